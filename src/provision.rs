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
            ProvisionError::Place { .. } => "provision-failed",
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
            Ok(m) if m.is_dir() => {
                return Err(ProvisionError::SourceUnreadable {
                    alias: p.alias.clone(),
                    source_path: p.source.clone(),
                    detail: "it is a directory".into(),
                });
            }
            Ok(_) => {}
        }
        if let Err(e) = std::fs::File::open(&p.source) {
            return Err(ProvisionError::SourceUnreadable {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
                detail: e.to_string(),
            });
        }
        if std::fs::metadata(&p.source).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err(ProvisionError::SourceEmpty {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
            });
        }
    }
    Ok(())
}

/// Copy each entry's bytes into `tree`, hash the bytes as placed, and write
/// the exclude file at `exclude` listing every dest (anchored). Returns the
/// placed entries in declaration order.
///
/// Errors: the source refusals again (a source can change between preflight
/// and placement), or [`ProvisionError::Place`].
pub fn place(
    entries: &[&Provision],
    tree: &Path,
    exclude: &Path,
) -> Result<Vec<Placed>, ProvisionError> {
    let mut placed = Vec::new();
    let mut lines = String::from("# saphan: provisioned files placed in this scratch worktree\n");
    for p in entries {
        let bytes = std::fs::read(&p.source).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ProvisionError::SourceMissing {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
            },
            _ => ProvisionError::SourceUnreadable {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
                detail: e.to_string(),
            },
        })?;
        if bytes.is_empty() {
            return Err(ProvisionError::SourceEmpty {
                alias: p.alias.clone(),
                source_path: p.source.clone(),
            });
        }
        let target = tree.join(&p.dest);
        let fail = |detail: String| ProvisionError::Place {
            alias: p.alias.clone(),
            dest: p.dest.clone(),
            detail,
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
        }
        std::fs::write(&target, &bytes).map_err(|e| fail(e.to_string()))?;
        let as_placed = std::fs::read(&target).map_err(|e| fail(e.to_string()))?;
        placed.push(Placed {
            dest: p.dest.clone(),
            sha256: crate::fsutil::sha256_hex(&as_placed),
        });
        lines.push('/');
        lines.push_str(&p.dest);
        lines.push('\n');
    }
    std::fs::write(exclude, lines).map_err(|e| ProvisionError::Place {
        alias: "*".into(),
        dest: exclude.display().to_string(),
        detail: e.to_string(),
    })?;
    Ok(placed)
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
