//! `[verify.provision.<alias>]`: documents a suite swears by that the
//! repository must not carry (spec: "A document your suite swears by…").
//!
//! For the entries whose `repo` is the repository being measured, the bytes
//! of `source` are copied to `dest` inside the scratch tree, their sha256 (of
//! the bytes as placed) goes into the record, and an exclude file in the
//! scratch worktree's own git dir lists every dest; the suite's git is
//! pointed at it through the environment (`GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_n=core.excludesFile`), so neither the tree's bytes nor the
//! repository's shared `.git/info/exclude` change.

use crate::config::Provision;
use crate::error::Refusal;
use crate::exec::Cmd;
use crate::transport::{Transport, TransportError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A placed entry, as the record carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    /// `dest`, relative to the tree root.
    pub dest: String,
    /// Lowercase hex sha256 of the bytes as placed.
    pub sha256: String,
}

/// Refusals of provision entries (before any lock or worktree).
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The source file does not exist.
    #[error(
        "verify.provision.{alias}.source {source_path} does not exist — restore the file or point source at it, then re-run"
    )]
    SourceMissing { alias: String, source_path: PathBuf },
    /// The source cannot be read.
    #[error(
        "verify.provision.{alias}.source {source_path} is unreadable: {detail} — fix its permissions, then re-run"
    )]
    SourceUnreadable {
        alias: String,
        source_path: PathBuf,
        detail: String,
    },
    /// The source has zero bytes.
    #[error(
        "verify.provision.{alias}.source {source_path} is zero bytes — a measurement against an empty document is refused; restore its content, then re-run"
    )]
    SourceEmpty { alias: String, source_path: PathBuf },
    /// `dest` names a path the checked-out tree already has, or a path
    /// through a committed symlink: writing would overwrite a tracked file
    /// or land outside the tree. Nothing was written.
    #[error(
        "verify.provision.{alias}.dest {dest} {why} at this revision — nothing was placed; choose a dest the repository does not carry (provisioned documents must not be in the tree), then re-run"
    )]
    DestConflict {
        alias: String,
        dest: String,
        why: String,
    },
    /// Placing the bytes failed.
    #[error(
        "placing verify.provision.{alias} at {dest}: {detail} — check free space in the temp directory"
    )]
    Place {
        alias: String,
        dest: String,
        detail: String,
    },
}

impl Refusal for ProvisionError {
    fn name(&self) -> &'static str {
        match self {
            ProvisionError::SourceMissing { .. } => "provision-source-missing",
            ProvisionError::SourceUnreadable { .. } => "provision-source-unreadable",
            ProvisionError::SourceEmpty { .. } => "provision-source-empty",
            ProvisionError::DestConflict { .. } => "provision-dest-conflict",
            ProvisionError::Place { .. } => "provision-failed",
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        Some(self.into())
    }
}

/// The record's `failure` word of a provision error met after admission.
impl From<&ProvisionError> for crate::outcome::FailureKind {
    fn from(e: &ProvisionError) -> crate::outcome::FailureKind {
        use crate::outcome::FailureKind;
        use ProvisionError as P;
        match e {
            P::Place { .. } => FailureKind::ProvisionFailed,
            P::SourceMissing { .. } => FailureKind::ProvisionSourceMissing,
            P::SourceUnreadable { .. } => FailureKind::ProvisionSourceUnreadable,
            P::SourceEmpty { .. } => FailureKind::ProvisionSourceEmpty,
            P::DestConflict { .. } => FailureKind::ProvisionDestConflict,
        }
    }
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The entries that apply to the repository whose tree root is `top` and
/// whose git common dir is `common_dir` (an entry matches the main
/// worktree's path too, so certifying from a linked worktree sees the same).
pub fn select<'a>(all: &'a [Provision], top: &Path, common_dir: &Path) -> Vec<&'a Provision> {
    let mut mine = vec![canon(top)];
    if common_dir.file_name().is_some_and(|n| n == ".git")
        && let Some(main) = common_dir.parent()
    {
        mine.push(canon(main));
    }
    all.iter()
        .filter(|p| mine.contains(&canon(&p.repo)))
        .collect()
}

/// Check every selected entry can be placed: source exists, is readable and
/// non-empty. Runs before the lock. (`dest` was already checked to stay
/// inside the tree when the config was loaded.)
pub fn preflight(entries: &[&Provision]) -> Result<(), ProvisionError> {
    for p in entries {
        match std::fs::metadata(&p.source) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ProvisionError::SourceMissing {
                    alias: p.alias.clone(),
                    source_path: p.source.clone(),
                });
            }
            Err(e) => {
                return Err(ProvisionError::SourceUnreadable {
                    alias: p.alias.clone(),
                    source_path: p.source.clone(),
                    detail: e.to_string(),
                });
            }
            Ok(m) => {
                // A FIFO would block the open (and the run) forever; a
                // device may never end: only regular files are sources.
                if let Some(kind) = crate::fsutil::not_regular_kind(&m.file_type()) {
                    return Err(ProvisionError::SourceUnreadable {
                        alias: p.alias.clone(),
                        source_path: p.source.clone(),
                        detail: format!("it is {kind}, not a regular file"),
                    });
                }
            }
        }
        open_source(p)?;
        if std::fs::metadata(&p.source).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err(ProvisionError::SourceEmpty {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
            });
        }
    }
    Ok(())
}

/// Open a provision source for reading: a regular file only (after
/// symlinks), opened without blocking.
fn open_source(p: &Provision) -> Result<std::fs::File, ProvisionError> {
    crate::fsutil::open_regular(&p.source).map_err(|e| match e {
        crate::fsutil::OpenRegular::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            ProvisionError::SourceMissing {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
            }
        }
        crate::fsutil::OpenRegular::Io(e) => ProvisionError::SourceUnreadable {
            alias: p.alias.clone(),
            source_path: p.source.clone(),
            detail: e.to_string(),
        },
        crate::fsutil::OpenRegular::NotRegular(kind) => ProvisionError::SourceUnreadable {
            alias: p.alias.clone(),
            source_path: p.source.clone(),
            detail: format!("it is {kind}, not a regular file"),
        },
    })
}

/// Copy each entry's bytes into `tree`, hash the bytes as placed, and write
/// the exclude file at `exclude` listing every dest (anchored). Returns the
/// placed entries in declaration order.
///
/// Every dest is checked before anything is written (see [`check_dest`]):
/// no component may be a symlink and the final path must not exist, so a
/// committed `docs -> /elsewhere` or a tracked file at `dest` is refused
/// with nothing placed.
///
/// Errors: [`ProvisionError::DestConflict`], the source refusals again (a
/// source can change between preflight and placement), or
/// [`ProvisionError::Place`].
pub fn place(
    entries: &[&Provision],
    tree: &Path,
    exclude: &Path,
) -> Result<Vec<Placed>, ProvisionError> {
    unique_dests(entries.iter().copied())?;
    for p in entries {
        check_dest(tree, &p.dest).map_err(|why| conflict(p, why))?;
    }
    let mut placed = Vec::new();
    for p in entries {
        let mut source = open_source(p)?;
        let target = tree.join(&p.dest);
        let fail = |detail: String| ProvisionError::Place {
            alias: p.alias.clone(),
            dest: p.dest.clone(),
            detail,
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
        }
        // create_new: O_EXCL, which also never follows a symlink at the
        // final component (checked above; this closes the race).
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)
                .map_err(|e| fail(e.to_string()))?;
            // Streamed: memory stays bounded however large the source.
            let n = std::io::copy(&mut source, &mut f).map_err(|e| {
                ProvisionError::SourceUnreadable {
                    alias: p.alias.clone(),
                    source_path: p.source.clone(),
                    detail: e.to_string(),
                }
            })?;
            if n == 0 {
                return Err(ProvisionError::SourceEmpty {
                    alias: p.alias.clone(),
                    source_path: p.source.clone(),
                });
            }
        }
        // Hash the bytes as placed, streamed.
        let sha256 = crate::fsutil::sha256_file(&target).map_err(|e| fail(e.to_string()))?;
        placed.push(Placed {
            dest: p.dest.clone(),
            sha256,
        });
    }
    std::fs::write(exclude, exclude_text(&placed)).map_err(|e| ProvisionError::Place {
        alias: "*".into(),
        dest: exclude.display().to_string(),
        detail: e.to_string(),
    })?;
    Ok(placed)
}

/// The first line of every exclude file saphan writes.
const EXCLUDE_HEADER: &str = "# saphan: provisioned files placed in this scratch worktree\n";

/// The exclude file's text for what was placed, on every machine: the
/// header, then `/<dest>` a line (anchored at the tree's top).
fn exclude_text(placed: &[Placed]) -> String {
    let mut lines = String::from(EXCLUDE_HEADER);
    for p in placed {
        lines.push('/');
        lines.push_str(&p.dest);
        lines.push('\n');
    }
    lines
}

fn conflict(p: &Provision, why: String) -> ProvisionError {
    ProvisionError::DestConflict {
        alias: p.alias.clone(),
        dest: p.dest.clone(),
        why,
    }
}

/// Refuse two entries naming one dest.
fn unique_dests<'a>(entries: impl Iterator<Item = &'a Provision>) -> Result<(), ProvisionError> {
    let mut seen: Vec<&str> = Vec::new();
    for p in entries {
        if seen.contains(&p.dest.as_str()) {
            return Err(conflict(
                p,
                "is named by another provision entry too".into(),
            ));
        }
        seen.push(&p.dest);
    }
    Ok(())
}

/// The sha256 (lowercase hex) of the file `path` on the machine `t`, of the
/// bytes as they are there: locally hashed as a stream off the runtime
/// (`spawn_blocking`); on an SSH machine by `sha256sum` there, or
/// `shasum -a 256` where `sha256sum` does not run (`remote/sha256.sh`).
///
/// Errors: the file cannot be read, neither tool runs or it prints no
/// digest (as [`TransportError::RemoteCopy`]), the connection errors.
pub async fn sha256_on(t: &Transport, path: &Path) -> Result<String, TransportError> {
    let what = || format!("hashing {} on {}", path.display(), t.describe());
    if t.is_local() {
        let p = path.to_path_buf();
        return tokio::task::spawn_blocking(move || crate::fsutil::sha256_file(&p))
            .await
            .map_err(|e| TransportError::RemoteCopy {
                what: what(),
                detail: e.to_string(),
            })?
            .map_err(|source| TransportError::Copy {
                what: what(),
                source,
            });
    }
    let out = t
        .run(
            crate::remote::sh(crate::remote::SHA256, "saphan-sha256", [path])
                .timeout(std::time::Duration::from_secs(600)),
        )
        .await?;
    let text = out.stdout_str();
    let hex = text.split_whitespace().next().unwrap_or_default();
    if !out.status.success() || hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(TransportError::RemoteCopy {
            what: what(),
            detail: format!("{:?}: {}", out.status, out.stderr_str()),
        });
    }
    Ok(hex.to_ascii_lowercase())
}

/// Place `entries` into `tree` on the machine `t` and write the exclude
/// file `exclude` there (same rules and errors as [`place`]): locally this
/// is [`place`] off the runtime; on an SSH machine every dest is checked
/// there first, each source is sent with [`Transport::put`] (a temp file
/// beside the dest, renamed into place) and hashed there with
/// [`sha256_on`], so the record's sha256 is of the bytes as placed *on the
/// machine*.
pub async fn place_on(
    t: &Transport,
    entries: &[Provision],
    tree: &Path,
    exclude: &Path,
) -> Result<Vec<Placed>, ProvisionError> {
    if t.is_local() {
        let (entries, tree, exclude) =
            (entries.to_vec(), tree.to_path_buf(), exclude.to_path_buf());
        return tokio::task::spawn_blocking(move || {
            let refs: Vec<&Provision> = entries.iter().collect();
            place(&refs, &tree, &exclude)
        })
        .await
        .map_err(|e| ProvisionError::Place {
            alias: "*".into(),
            dest: "the scratch tree".into(),
            detail: e.to_string(),
        })?;
    }
    let budget = std::time::Duration::from_secs(120);
    let fail = |p: &Provision, detail: String| ProvisionError::Place {
        alias: p.alias.clone(),
        dest: p.dest.clone(),
        detail,
    };
    unique_dests(entries.iter())?;
    for p in entries {
        // The machine lists what the dest passes through; the verdict is
        // [`judge_dest`]'s, the same as for this machine.
        let out = t
            .run(
                crate::remote::sh(
                    crate::remote::DEST_KINDS,
                    "saphan-dest-kinds",
                    [tree.as_os_str(), std::ffi::OsStr::new(&dest_words(&p.dest))],
                )
                .timeout(budget),
            )
            .await
            .map_err(|e| fail(p, e.to_string()))?;
        if !out.status.success() {
            return Err(fail(p, out.stderr_str()));
        }
        let kinds: Vec<DestKind> = out.stdout_str().lines().map(DestKind::word).collect();
        judge_dest(&p.dest, &kinds).map_err(|why| conflict(p, why))?;
    }
    let mut placed = Vec::new();
    for p in entries {
        preflight(&[p])?;
        let target = tree.join(&p.dest);
        if let Some(parent) = target.parent() {
            let out = t
                .run(
                    Cmd::new("mkdir")
                        .arg("-p")
                        .arg("--")
                        .arg(parent)
                        .timeout(budget),
                )
                .await
                .map_err(|e| fail(p, e.to_string()))?;
            if !out.status.success() {
                return Err(fail(p, out.stderr_str()));
            }
        }
        let remote = target
            .to_str()
            .ok_or_else(|| fail(p, "the dest path is not UTF-8".into()))?;
        t.put(&p.source, remote)
            .await
            .map_err(|e| fail(p, e.to_string()))?;
        let sha256 = sha256_on(t, &target)
            .await
            .map_err(|e| fail(p, e.to_string()))?;
        placed.push(Placed {
            dest: p.dest.clone(),
            sha256,
        });
    }
    let out = t
        .run(
            crate::remote::sh(crate::remote::WRITE_FILE, "saphan-exclude", [exclude])
                .stdin(exclude_text(&placed).into_bytes())
                .timeout(budget),
        )
        .await;
    match out {
        Ok(o) if o.status.success() => Ok(placed),
        Ok(o) => Err(ProvisionError::Place {
            alias: "*".into(),
            dest: exclude.display().to_string(),
            detail: o.stderr_str(),
        }),
        Err(e) => Err(ProvisionError::Place {
            alias: "*".into(),
            dest: exclude.display().to_string(),
            detail: e.to_string(),
        }),
    }
}

/// What one component of a provision's dest is in the scratch tree, on
/// whichever machine the tree is (locally from `symlink_metadata`; on an
/// SSH machine from `src/remote/dest-kinds.sh`'s listing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestKind {
    /// A symlink (never followed).
    Link,
    /// Nothing there: the rest of the dest will be created.
    Missing,
    /// A real directory.
    Dir,
    /// Anything else that exists (a file, a FIFO, …).
    Other,
    /// It could not be looked at (the reason).
    Unreadable(String),
}

impl DestKind {
    /// Read one word of `dest-kinds.sh`'s listing.
    fn word(w: &str) -> DestKind {
        match w.trim() {
            "link" => DestKind::Link,
            "missing" => DestKind::Missing,
            "dir" => DestKind::Dir,
            "other" => DestKind::Other,
            w => DestKind::Unreadable(format!("the machine described it as `{w}`")),
        }
    }
}

/// `dest`'s components joined by `/` exactly as [`judge_dest`] counts them
/// (`a//b` and `a/./b` are `a/b`).
fn dest_words(dest: &str) -> String {
    Path::new(dest)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The one rule for a provision's dest, on every machine: it can be created
/// under the tree without following a symlink or replacing anything — every
/// existing intermediate component is a real directory and the final path
/// does not exist. `kinds` describes the dest's components from the first,
/// up to the first that is not a directory. Returns why not, as a phrase.
pub fn judge_dest(dest: &str, kinds: &[DestKind]) -> Result<(), String> {
    let comps: Vec<_> = Path::new(dest).components().collect();
    for i in 0..comps.len() {
        let shown = comps[..=i]
            .iter()
            .collect::<PathBuf>()
            .display()
            .to_string();
        let last = i + 1 == comps.len();
        match kinds.get(i) {
            Some(DestKind::Missing) => return Ok(()),
            None => return Err(format!("cannot be checked ({shown}: not described)")),
            Some(DestKind::Unreadable(e)) => {
                return Err(format!("cannot be checked ({shown}: {e})"));
            }
            Some(DestKind::Link) => {
                return Err(format!(
                    "passes through {shown}, a symlink committed in the tree"
                ));
            }
            Some(_) if last => return Err("is a path the tree already carries".into()),
            Some(DestKind::Other) => {
                return Err(format!("passes through {shown}, which is not a directory"));
            }
            Some(DestKind::Dir) => {}
        }
    }
    Ok(())
}

/// Check `dest` (relative, already validated to stay inside the tree) under
/// the local `tree` by [`judge_dest`]. Returns why not, as a phrase.
pub fn check_dest(tree: &Path, dest: &str) -> Result<(), String> {
    let mut kinds = Vec::new();
    let mut cur = tree.to_path_buf();
    for c in Path::new(dest).components() {
        cur.push(c.as_os_str());
        let k = match std::fs::symlink_metadata(&cur) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DestKind::Missing,
            Err(e) => DestKind::Unreadable(e.to_string()),
            Ok(m) if m.file_type().is_symlink() => DestKind::Link,
            Ok(m) if m.is_dir() => DestKind::Dir,
            Ok(_) => DestKind::Other,
        };
        let stop = k != DestKind::Dir;
        kinds.push(k);
        if stop {
            break;
        }
    }
    judge_dest(dest, &kinds)
}

/// Environment that points the suite's git at `exclude` as
/// `core.excludesFile`, appended after any `GIT_CONFIG_COUNT` entries the
/// operator's environment already carries.
pub fn exclude_env(exclude: &Path) -> Vec<(String, String)> {
    let n: usize = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    vec![
        ("GIT_CONFIG_COUNT".into(), (n + 1).to_string()),
        (format!("GIT_CONFIG_KEY_{n}"), "core.excludesFile".into()),
        (
            format!("GIT_CONFIG_VALUE_{n}"),
            exclude.display().to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn check_dest_refuses_symlinks_and_existing_paths() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let tree = t.path();
        std::fs::create_dir(tree.join("real")).unwrap();
        std::fs::write(tree.join("a.txt"), b"tracked").unwrap();
        symlink(outside.path(), tree.join("docs")).unwrap();
        symlink(outside.path().join("n"), tree.join("notes.txt")).unwrap();
        assert!(
            check_dest(tree, "docs/contract.yaml")
                .unwrap_err()
                .contains("symlink")
        );
        assert!(
            check_dest(tree, "notes.txt")
                .unwrap_err()
                .contains("symlink")
        );
        assert!(check_dest(tree, "a.txt").unwrap_err().contains("already"));
        assert!(
            check_dest(tree, "a.txt/x")
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(check_dest(tree, "real/new.yaml").is_ok());
        assert!(check_dest(tree, "fresh/dir/new.yaml").is_ok());
    }
}
