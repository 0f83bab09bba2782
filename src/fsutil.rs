//! Atomic file writes (DESIGN §2): a crash never leaves a torn record or a
//! half-written config.

use crate::error::IoError;
use std::fs::{self, File, OpenOptions};
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

/// Write `path`, a file only this writer names (a suite log named after its
/// record's id), whole or not at all: the bytes go to `.<name>.partial`
/// beside it (mode 0600), are fsynced and renamed into place, then the
/// directory is fsynced. Creates parent directories.
///
/// Unlike [`atomic_write`] it never lists the directory for the temp files
/// of killed writers: the directory grows with history (one log per
/// attempt), and sweeping it made every write cost more than the last. A
/// write that fails (a full disk) removes its `.partial`; only a writer
/// killed mid-write leaves one, which nothing names.
///
/// Errors: [`IoError::Io`] naming the path.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".partial");
    let tmp = dir.join(name);
    // A killed writer's partial goes first, so the new one is made afresh
    // (its mode and owner are this writer's).
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    let written = f
        .write_all(bytes)
        .map_err(io("write", &tmp))
        .and_then(|()| f.sync_all().map_err(io("sync", &tmp)))
        .and_then(|()| fs::rename(&tmp, path).map_err(io("rename into place", path)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
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
/// Errors: [`IoError::Io`] naming the path.
pub fn append_line(path: &Path, line: &str) -> Result<(), IoError> {
    append_line_seen(path, line).map(drop)
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

/// [`append_line`], saying what it saw ([`Appended`]).
pub fn append_line_seen(path: &Path, line: &str) -> Result<Appended, IoError> {
    debug_assert!(!line.contains('\n'));
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(io("open for append", path))?;
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
    fn write_new_replaces_a_killed_writers_partial_and_leaves_only_the_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let logs = d.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // What a writer killed mid-write left.
        std::fs::write(logs.join(".a.log.partial"), b"half").unwrap();
        write_new(&logs.join("a.log"), b"whole\n").unwrap();
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
        write_new(&d.path().join("x/y/b.log"), b"").unwrap();
        assert!(d.path().join("x/y/b.log").is_file());
        // A write that fails leaves no partial behind (here the rename: a
        // directory stands at the name).
        std::fs::create_dir_all(logs.join("c.log/inside")).unwrap();
        assert!(write_new(&logs.join("c.log"), b"lost").is_err());
        assert!(!logs.join(".c.log.partial").exists());
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
