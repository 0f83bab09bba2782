//! Atomic file writes (DESIGN §2): a crash never leaves a torn record or a
//! half-written config.

use crate::error::IoError;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> IoError + 'a {
    move |source| IoError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// `bytes` as text, or where the first byte that is not UTF-8 sits: the
/// words `line N, byte M` (1-based) for a refusal that names its line.
pub fn utf8_or_where(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let b = e.as_bytes();
        let line = line_of(b, at);
        let start = b[..at]
            .iter()
            .rposition(|c| *c == b'\n')
            .map_or(0, |i| i + 1);
        format!("line {line}, byte {}: it is not UTF-8", at - start + 1)
    })
}

/// A TOML parse error of `text` as one line for the operator: `line N:
/// <what toml says>` where the error has a span, its message alone
/// otherwise.
pub fn toml_error_where(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(sp) => format!(
            "line {}: {}",
            line_of(text.as_bytes(), sp.start),
            e.message()
        ),
        None => e.message().to_string(),
    }
}

/// The 1-based line of byte `offset` in `bytes` (past the end: the last).
pub fn line_of(bytes: &[u8], offset: usize) -> usize {
    let end = offset.min(bytes.len());
    bytes[..end].iter().filter(|c| **c == b'\n').count() + 1
}

/// Why someone other than the current user could change `path` (a file or
/// a directory, symlinks followed): it is owned by another user (root is
/// accepted only when `allow_root`, as OpenSSH accepts root-owned configs),
/// or it is writable by its group or by everyone (a sticky bit does not
/// help: it guards names against other users, not a directory's contents
/// against its owner's peers). `None` when only its owner can change it or
/// it does not exist.
///
/// Shapes: [`Exposure::detail`] reads `it is owned by uid 65534, not by you
/// (uid 1000)` or `it is writable by others (mode 0775)`;
/// [`Exposure::fix`] is the command that fixes it (`chmod go-w PATH`,
/// `chown UID PATH && chmod go-w PATH`), the path quoted for a POSIX shell.
pub fn exposure(path: &Path, allow_root: bool) -> Option<Exposure> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).ok()?;
    let me = nix::unistd::geteuid().as_raw();
    let s = path.to_string_lossy();
    let q = crate::quote::quote(&s).unwrap_or_else(|| format!("'{s}'"));
    if m.uid() != me && !(allow_root && m.uid() == 0) {
        return Some(Exposure {
            detail: format!("it is owned by uid {}, not by you (uid {me})", m.uid()),
            fix: format!("chown {me} {q} && chmod go-w {q}"),
        });
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        let sticky = if mode & 0o1000 != 0 {
            "; a sticky bit does not make it safe"
        } else {
            ""
        };
        return Some(Exposure {
            detail: format!("it is writable by others (mode {mode:04o}{sticky})"),
            fix: format!("chmod go-w {q}"),
        });
    }
    None
}

/// What [`exposure`] found: what is wrong and the command that fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// `it is owned by uid N, not by you (uid M)` or `it is writable by others (mode 0775)`.
    pub detail: String,
    /// The `chmod go-w …` (or `chown … && chmod go-w …`) that fixes it.
    pub fix: String,
}

/// Replace `path` with `bytes` atomically: write a temp file beside it,
/// fsync, rename over, fsync the directory. Creates parent directories.
/// When `path` is a symlink, the write goes to the file it resolves to (temp
/// file in the target's directory, renamed over the target), so the link
/// itself stays — a config kept in a dotfiles repository stays linked.
///
/// Errors: [`IoError::Io`] naming the path.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let resolved = resolve_link(path);
    let path = resolved.as_path();
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    sweep_leftovers(dir, TMP_PREFIX);
    let mut tmp = tempfile::Builder::new()
        .prefix(&own_prefix(TMP_PREFIX))
        .tempfile_in(dir)
        .map_err(io("create a temp file in", dir))?;
    tmp.write_all(bytes).map_err(io("write", path))?;
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    if let Ok(meta) = fs::metadata(path) {
        let _ = fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| IoError::Io {
        action: "rename over",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Follow `path` through symlinks (up to 40 hops) to the path a write should
/// replace. A dangling link resolves to its (missing) target; a non-link is
/// returned unchanged.
pub fn resolve_link(path: &Path) -> std::path::PathBuf {
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => match fs::read_link(&cur) {
                Ok(target) => {
                    cur = if target.is_absolute() {
                        target
                    } else {
                        cur.parent().unwrap_or(Path::new(".")).join(target)
                    };
                }
                Err(_) => return cur,
            },
            _ => return cur,
        }
    }
    cur
}

/// Append one whole line (a `\n` is added) with `O_APPEND` in a single
/// `write`, then fsync. Concurrent appenders never interleave inside a line
/// as long as each line is written by one call (Linux guarantees this for
/// regular files opened with `O_APPEND`). If the file does not end in `\n`
/// (a torn last line from a crash), a `\n` is written first in the same
/// write, so the torn line never swallows the new record.
///
/// The file itself is never followed through a symlink ([`open_state`],
/// its directory as the root).
///
/// Errors: [`IoError::Io`] naming the path; [`IoError::Symlink`].
pub fn append_line(path: &Path, line: &str) -> Result<(), IoError> {
    append_line_seen(path.parent().unwrap_or(Path::new("/")), path, line).map(drop)
}

/// The file as [`append_line`] saw it through its own open descriptor:
/// just before its write and just after it (before the sync, which changes
/// no time), and the bytes it wrote.
#[derive(Debug)]
pub struct Appended {
    /// `fstat` before the write.
    pub before: fs::Metadata,
    /// `fstat` right after the write.
    pub after: fs::Metadata,
    /// Bytes written: the line, its newline, and a newline first when the
    /// file ended torn.
    pub written: u64,
}

/// [`append_line`] of a state file below `root` ([`open_state`]: no
/// directory between `root` and it, and not the file itself, is followed
/// through a symlink), saying what it saw ([`Appended`]).
pub fn append_line_seen(root: &Path, path: &Path, line: &str) -> Result<Appended, IoError> {
    debug_assert!(!line.contains('\n'));
    let mut f = open_state(root, path, StateOpen::Append)?.expect("an append creates the file");
    let mut buf = Vec::with_capacity(line.len() + 2);
    if ends_torn(&f) {
        buf.push(b'\n');
    }
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let before = f.metadata().map_err(io("stat", path))?;
    f.write_all(&buf).map_err(io("append to", path))?;
    let after = f.metadata().map_err(io("stat", path))?;
    f.sync_data().map_err(io("sync", path))?;
    Ok(Appended {
        before,
        after,
        written: buf.len() as u64,
    })
}

/// How [`open_state`] opens a state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateOpen {
    /// Read only; a missing file (or directory) is `None`.
    Read,
    /// Read and `O_APPEND`, created (with its directories) when missing.
    Append,
    /// Write, created (with its directories) when missing, not truncated
    /// (a lock file).
    Write,
    /// Write, created when missing, truncated (a small cache file).
    Replace,
}

/// `path` opened as one of saphan's state files below the trusted `root`
/// (the repository's git common dir): `root` itself is followed as the
/// operator gave it, but every directory after it and the file itself are
/// opened one component at a time with `openat(…, O_NOFOLLOW)`, so a
/// symlink a suite put at `saphan/`, `logs/` or `attempts.jsonl` is never
/// followed — the open fails, and the failure names the link
/// ([`IoError::Symlink`]). Missing directories are created (`mkdirat`,
/// mode 0777 less the umask) for every mode but [`StateOpen::Read`].
///
/// Race-free where it matters: each step opens what is at the name *now*
/// without following it, so a link swapped in between a check and the open
/// cannot be written through (a check by `symlink_metadata` first and an
/// open by path after could be). Returns `Ok(None)` for
/// [`StateOpen::Read`] of a missing file. `path` not below `root` is opened
/// from `/` the same way.
///
/// Errors: [`IoError::Symlink`] naming the link; [`IoError::Io`] for any
/// other failure.
pub fn open_state(root: &Path, path: &Path, how: StateOpen) -> Result<Option<File>, IoError> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    let Some(name) = path.file_name() else {
        return Err(IoError::Io {
            action: "open",
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    };
    let dir = match state_dir(
        root,
        path.parent().unwrap_or(Path::new("/")),
        how != StateOpen::Read,
    )? {
        Some(d) => d,
        None => return Ok(None),
    };
    let flags = OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | match how {
            StateOpen::Read => OFlag::O_RDONLY,
            StateOpen::Append => OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT,
            StateOpen::Write => OFlag::O_WRONLY | OFlag::O_CREAT,
            StateOpen::Replace => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
        };
    match openat(&dir, name, flags, Mode::from_bits_truncate(0o666)) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(nix::errno::Errno::ENOENT) if how == StateOpen::Read => Ok(None),
        Err(e) => Err(state_error(&dir, name, path, "open", e)),
    }
}

/// `bytes` written to the state file `path` below `root` whole or not at
/// all: a temp file `.<name>.partial` made in the directory
/// [`open_state`] opens (`O_CREAT | O_EXCL | O_NOFOLLOW`: a link planted at
/// that name is never written through), fsynced, renamed over `path` with
/// `renameat` in the same directory (a link at `path` is replaced, not
/// followed), then the directory fsynced. Creates missing directories.
///
/// Errors: [`IoError::Symlink`] for a link among the directories;
/// [`IoError::Io`] otherwise.
pub fn write_state(root: &Path, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    use nix::fcntl::{OFlag, openat, renameat};
    use nix::sys::stat::Mode;
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let name = path.file_name().unwrap_or_default();
    let dir = state_dir(root, path.parent().unwrap_or(Path::new("/")), true)?
        .expect("created when missing");
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".partial");
    let tmp_path = path.with_file_name(&tmp_name);
    // A killed writer's partial goes first.
    let _ = unlinkat(&dir, tmp_name.as_os_str(), UnlinkatFlags::NoRemoveDir);
    let fd = openat(
        &dir,
        tmp_name.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| state_error(&dir, &tmp_name, &tmp_path, "create", e))?;
    let mut f = File::from(fd);
    let written = f
        .write_all(bytes)
        .map_err(io("write", &tmp_path))
        .and_then(|()| f.sync_all().map_err(io("sync", &tmp_path)))
        .and_then(|()| {
            renameat(&dir, tmp_name.as_os_str(), &dir, name)
                .map_err(|e| io("rename into place", path)(e.into()))
        });
    if written.is_err() {
        let _ = unlinkat(&dir, tmp_name.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    written?;
    let _ = nix::unistd::fsync(&dir);
    Ok(())
}

/// The directory `dir` (below `root`, see [`open_state`]) as an open
/// descriptor, each component after `root` opened `O_NOFOLLOW |
/// O_DIRECTORY` (and made when missing and `create`); `None` when missing
/// and not `create`.
fn state_dir(
    root: &Path,
    dir: &Path,
    create: bool,
) -> Result<Option<std::os::fd::OwnedFd>, IoError> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::{Mode, mkdirat};
    use std::path::Component;
    let (start, rest) = match dir.strip_prefix(root) {
        Ok(rest) => (root, rest),
        Err(_) => (Path::new("/"), dir.strip_prefix("/").unwrap_or(dir)),
    };
    let dflags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut fd = match open(start, dflags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) if create => {
            fs::create_dir_all(start).map_err(io("create directory", start))?;
            open(start, dflags, Mode::empty()).map_err(|e| io("open", start)(e.into()))?
        }
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(io("open", start)(e.into())),
    };
    let mut at = start.to_path_buf();
    for c in rest.components() {
        let Component::Normal(name) = c else {
            continue;
        };
        at.push(name);
        let next = match openat(&fd, name, dflags | OFlag::O_NOFOLLOW, Mode::empty()) {
            Err(nix::errno::Errno::ENOENT) if create => {
                match mkdirat(&fd, name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => return Err(io("create directory", &at)(e.into())),
                }
                openat(&fd, name, dflags | OFlag::O_NOFOLLOW, Mode::empty())
            }
            r => r,
        };
        fd = match next {
            Ok(n) => n,
            Err(nix::errno::Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(state_error(&fd, name, &at, "open", e)),
        };
    }
    Ok(Some(fd))
}

/// An `openat` of `name` in `dir` failed with `e`: [`IoError::Symlink`]
/// when `name` is a symlink (`O_NOFOLLOW` says ELOOP, or ENOTDIR with
/// `O_DIRECTORY` on some systems: asked of the entry itself), else
/// [`IoError::Io`].
fn state_error(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    path: &Path,
    action: &'static str,
    e: nix::errno::Errno,
) -> IoError {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{SFlag, fstatat};
    let is_link = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK);
    if is_link {
        IoError::Symlink {
            path: path.to_path_buf(),
        }
    } else {
        io(action, path)(e.into())
    }
}

/// Whether the open file is non-empty and its last byte is not `\n`.
fn ends_torn(f: &File) -> bool {
    use std::os::unix::fs::FileExt;
    let len = match f.metadata() {
        Ok(m) => m.len(),
        Err(_) => return false,
    };
    if len == 0 {
        return false;
    }
    let mut last = [0u8; 1];
    matches!(f.read_at(&mut last, len - 1), Ok(1)) && last[0] != b'\n'
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex sha256 of a file's bytes, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// Prefix of [`atomic_write`]'s temp files: `.saphan-tmp-<pid>-<random>`.
pub const TMP_PREFIX: &str = ".saphan-tmp-";

/// `<prefix><pid>-`: a temp name that says which process made it.
fn own_prefix(prefix: &str) -> String {
    format!("{prefix}{}-", std::process::id())
}

/// Is process `pid` alive on this machine (signal 0; EPERM means alive)?
fn pid_alive(pid: i32) -> bool {
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Remove what killed saphan processes left in `dir`: entries named
/// `<prefix><pid>-…` whose process no longer exists and that this user
/// owns (files, or directories with their contents; a symlink is never
/// followed). A live process's entry, another user's, or a name without a
/// pid is left alone — only saphan's own kind of leftover, and only a dead
/// one, is removed. Best effort: failures are ignored.
pub fn sweep_leftovers(dir: &Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid_alive(pid) {
            continue;
        }
        let path = e.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.uid() != me {
            continue;
        }
        if meta.is_dir() {
            let _ = fs::remove_dir_all(&path);
        } else if meta.is_file() {
            let _ = fs::remove_file(&path);
        }
    }
}

/// A fresh private directory `$TMPDIR/<prefix><pid>-<random>`, removed on
/// drop; first removes the ones killed runs left behind
/// ([`sweep_leftovers`]).
pub fn run_tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    sweep_leftovers(&std::env::temp_dir(), prefix);
    tempfile::Builder::new()
        .prefix(&own_prefix(prefix))
        .tempdir()
}

/// A fresh private file `$TMPDIR/<prefix><pid>-<random>`, removed on drop;
/// the first call of the process with `prefix` removes the ones killed
/// runs left behind ([`sweep_leftovers`]: their pid names their owner, so
/// a live run's file is never touched). For temp files a run makes often
/// (a machine's listing): the sweep reads `$TMPDIR` once per process, not
/// once per file.
pub fn run_tempfile(prefix: &'static str) -> std::io::Result<tempfile::NamedTempFile> {
    static SWEPT: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
        if !swept.contains(&prefix) {
            swept.push(prefix);
            sweep_leftovers(&std::env::temp_dir(), prefix);
        }
    }
    tempfile::Builder::new()
        .prefix(&own_prefix(prefix))
        .tempfile()
}

/// What a non-regular file is, in words for a refusal: `a FIFO`,
/// `a socket`, `a device`, `a directory`; `None` for a regular file.
pub fn not_regular_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        None
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Some("a device")
    } else if ft.is_dir() {
        Some("a directory")
    } else {
        Some("not a regular file")
    }
}

/// Why [`open_regular`] refused.
#[derive(Debug)]
pub enum OpenRegular {
    /// The path (after symlinks) is not a regular file: what it is.
    NotRegular(&'static str),
    /// Opening or inspecting it failed.
    Io(std::io::Error),
}

/// Open `path` (following symlinks) for reading only if it is a regular
/// file. The open is non-blocking, so a FIFO (even one swapped in after a
/// check) never blocks; its type is checked on the open descriptor.
pub fn open_regular(path: &Path) -> Result<File, OpenRegular> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(OpenRegular::Io)?;
    let meta = f.metadata().map_err(OpenRegular::Io)?;
    if let Some(kind) = not_regular_kind(&meta.file_type()) {
        return Err(OpenRegular::NotRegular(kind));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_state_replaces_a_killed_writers_partial_and_leaves_only_the_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let logs = d.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // What a writer killed mid-write left.
        std::fs::write(logs.join(".a.log.partial"), b"half").unwrap();
        write_state(d.path(), &logs.join("a.log"), b"whole\n").unwrap();
        assert_eq!(std::fs::read(logs.join("a.log")).unwrap(), b"whole\n");
        let names: Vec<_> = std::fs::read_dir(&logs)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.log"]);
        let mode = std::fs::metadata(logs.join("a.log"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Parents are made.
        write_state(d.path(), &d.path().join("x/y/b.log"), b"").unwrap();
        assert!(d.path().join("x/y/b.log").is_file());
        // A write that fails leaves no partial behind (here the rename: a
        // directory stands at the name).
        std::fs::create_dir_all(logs.join("c.log/inside")).unwrap();
        assert!(write_state(d.path(), &logs.join("c.log"), b"lost").is_err());
        assert!(!logs.join(".c.log.partial").exists());
    }

    #[test]
    fn a_state_file_or_directory_that_is_a_symlink_is_refused_by_name_and_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("common");
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir_all(root.join("saphan")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("target"), b"theirs\n").unwrap();
        let named = |e: IoError| match e {
            IoError::Symlink { path } => path,
            e => panic!("not a symlink refusal: {e}"),
        };
        // The file itself.
        let file = root.join("saphan/attempts.jsonl");
        std::os::unix::fs::symlink(elsewhere.join("target"), &file).unwrap();
        for how in [
            StateOpen::Read,
            StateOpen::Append,
            StateOpen::Write,
            StateOpen::Replace,
        ] {
            assert_eq!(
                named(open_state(&root, &file, how).unwrap_err()),
                file,
                "{how:?}"
            );
        }
        assert_eq!(
            named(append_line_seen(&root, &file, "{}").unwrap_err()),
            file
        );
        // A directory on the way (`logs/` → elsewhere).
        let logs = root.join("saphan/logs");
        std::os::unix::fs::symlink(&elsewhere, &logs).unwrap();
        assert_eq!(
            named(write_state(&root, &logs.join("a.log"), b"x").unwrap_err()),
            logs
        );
        assert_eq!(
            named(open_state(&root, &logs.join("target"), StateOpen::Read).unwrap_err()),
            logs
        );
        // A link put where write_state renames over is replaced, not
        // followed.
        let trunk = root.join("saphan/verified-trunk");
        std::os::unix::fs::symlink(elsewhere.join("target"), &trunk).unwrap();
        write_state(&root, &trunk, b"refs/heads/main\n").unwrap();
        assert!(
            !std::fs::symlink_metadata(&trunk)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read(elsewhere.join("target")).unwrap(),
            b"theirs\n"
        );
        let names: Vec<_> = std::fs::read_dir(&elsewhere)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["target"], "nothing was written through a link");
        // The root itself is the operator's and is followed.
        let linked_root = d.path().join("root-link");
        std::os::unix::fs::symlink(&root, &linked_root).unwrap();
        assert!(
            open_state(
                &linked_root,
                &linked_root.join("saphan/new"),
                StateOpen::Append
            )
            .unwrap()
            .is_some()
        );
        assert!(
            open_state(&root, &root.join("missing/x"), StateOpen::Read)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn append_after_torn_line_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("attempts.jsonl");
        fs::write(&p, b"{\"a\":1}\n{\"torn\":").unwrap();
        append_line(&p, "{\"b\":2}").unwrap();
        append_line(&p, "{\"c\":3}").unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"torn\":\n{\"b\":2}\n{\"c\":3}\n");
    }

    #[test]
    fn append_to_empty_and_missing_file_adds_no_blank_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.jsonl");
        append_line(&p, "x").unwrap();
        let q = dir.path().join("empty.jsonl");
        fs::write(&q, b"").unwrap();
        append_line(&q, "y").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "x\n");
        assert_eq!(fs::read_to_string(&q).unwrap(), "y\n");
    }

    #[test]
    fn atomic_write_through_symlink_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let dots = dir.path().join("dotfiles");
        fs::create_dir(&dots).unwrap();
        let target = dots.join("saphan.toml");
        fs::write(&target, b"old").unwrap();
        let home = dir.path().join("home");
        fs::create_dir(&home).unwrap();
        let link = home.join("config");
        std::os::unix::fs::symlink("../dotfiles/saphan.toml", &link).unwrap();
        atomic_write(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // No temp file left in either directory.
        assert_eq!(fs::read_dir(&home).unwrap().count(), 1);
        assert_eq!(fs::read_dir(&dots).unwrap().count(), 1);
    }
}
