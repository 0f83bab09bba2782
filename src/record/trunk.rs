//! The one trunk the verified pointer follows, per repository.
//!
//! `refs/saphan/verified` only moves along a trunk. Which trunk is written,
//! the first time the pointer moves, to `<git-common-dir>/saphan/verified-trunk`
//! (one line, the full ref name, replaced atomically). From then on:
//!
//! - certify without `--trunk` follows that trunk (not `origin/HEAD` or the
//!   main worktree's branch, which can change under it);
//! - certify with another `--trunk` is refused as `trunk-mismatch` before
//!   anything runs, with the deliberate commands that re-point it;
//! - a pointer move judged under the repository lock checks the file again,
//!   so two certifications with different trunks racing to be first cannot
//!   both move it.

use crate::error::{IoError, Refusal};
use crate::git::Repo;
use std::path::{Path, PathBuf};

/// `<common>/saphan/verified-trunk`.
pub fn path(repo: &Repo) -> PathBuf {
    repo.state_dir().join("verified-trunk")
}

/// The trunk ref the pointer follows, `None` when it has never moved under
/// a saphan that records it (or the file was removed to re-point it).
///
/// Errors: [`IoError::Io`] when the file exists and cannot be read.
pub fn followed(repo: &Repo) -> Result<Option<String>, IoError> {
    read(&repo.common_dir, &path(repo))
}

/// The file's one line, read without following a symlink at `saphan/` or
/// the file ([`crate::fsutil::open_state`] below the common dir `root`).
fn read(root: &Path, p: &Path) -> Result<Option<String>, IoError> {
    let Some(mut f) = crate::fsutil::open_state(root, p, crate::fsutil::StateOpen::Read)? else {
        return Ok(None);
    };
    let mut s = String::new();
    match std::io::Read::read_to_string(&mut f, &mut s) {
        Ok(_) => {
            let s = s.trim();
            Ok((!s.is_empty()).then(|| s.to_string()))
        }
        Err(source) => Err(IoError::Io {
            action: "read the verified pointer's trunk",
            path: p.to_path_buf(),
            source,
        }),
    }
}

/// Record `trunk` as the one the pointer follows, when none is recorded
/// yet (atomic replace, off the runtime). Called under the repository lock
/// right after the pointer moved.
///
/// Never through a symlink ([`crate::fsutil::write_state`]).
///
/// Errors: [`IoError::Io`] when the file cannot be written;
/// [`IoError::Symlink`].
pub async fn follow_if_unset(repo: &Repo, trunk: &str) -> Result<(), IoError> {
    let p = path(repo);
    let root = repo.common_dir.clone();
    let trunk = trunk.to_string();
    tokio::task::spawn_blocking(move || {
        if read(&root, &p)?.is_none() {
            crate::fsutil::write_state(&root, &p, format!("{trunk}\n").as_bytes())?;
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Refusals of the trunk rule.
#[derive(Debug, thiserror::Error)]
pub enum TrunkError {
    /// `--trunk` names another trunk than the one the pointer follows.
    #[error(
        "--trunk {named}: the verified pointer of {repo} follows {follows} (recorded in {file}) and never leaves its trunk; nothing was measured — certify with --trunk {follows} (or without --trunk), or re-point it deliberately: git -C {repo} update-ref -d refs/saphan/verified && rm {file}, then certify --trunk {named}"
    )]
    Mismatch {
        /// The repository top.
        repo: PathBuf,
        /// The full ref `--trunk` resolved to.
        named: String,
        /// The full ref the pointer follows.
        follows: String,
        /// The file that records it.
        file: PathBuf,
    },
}

impl Refusal for TrunkError {
    fn name(&self) -> &'static str {
        match self {
            TrunkError::Mismatch { .. } => "trunk-mismatch",
        }
    }
}

/// The trunk a certification of `repo` moves the pointer along: the
/// followed trunk when one is recorded (and `explicit`, when given, must
/// resolve to it), else [`super::trunk_ref`] of `explicit`.
///
/// Errors: `trunk-not-a-branch` ([`super::trunk_ref`]), `trunk-mismatch`,
/// the followed file unreadable.
pub async fn for_certify(
    repo: &Repo,
    explicit: Option<&str>,
) -> Result<Option<String>, crate::error::Error> {
    Ok(for_certify_first(repo, explicit).await?.0)
}

/// [`for_certify`], and — when the pointer follows no trunk yet, so its
/// first move will record this one — the first follow this certification
/// would make ([`FirstFollow`], `None` when a trunk is already followed).
///
/// Errors: as [`for_certify`].
pub async fn for_certify_first(
    repo: &Repo,
    explicit: Option<&str>,
) -> Result<(Option<String>, Option<FirstFollow>), crate::error::Error> {
    let follows = followed(repo)?;
    match (explicit, follows) {
        (Some(e), Some(follows)) => {
            let named = super::trunk_ref(repo, Some(e)).await?;
            match named {
                Some(named) if named != follows => Err(TrunkError::Mismatch {
                    repo: repo.top.clone(),
                    named,
                    follows,
                    file: path(repo),
                }
                .into()),
                _ => Ok((Some(follows), None)),
            }
        }
        (None, Some(follows)) => Ok((Some(follows), None)),
        (e, None) => match super::trunk_ref_from(repo, e).await? {
            Some((trunk, from)) => Ok((
                Some(trunk.clone()),
                Some(FirstFollow {
                    trunk,
                    from,
                    repo: repo.top.clone(),
                    file: path(repo),
                }),
            )),
            None => Ok((None, None)),
        },
    }
}

/// The pointer's first move records the trunk it follows from then on
/// ([`follow_if_unset`]): which trunk, how it was chosen, and where that is
/// written — what an operator reads when it was not named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FirstFollow {
    /// The full ref now followed.
    pub trunk: String,
    /// How it was chosen.
    #[serde(skip)]
    pub from: super::TrunkFrom,
    /// The repository top.
    pub repo: PathBuf,
    /// `<common>/saphan/verified-trunk`.
    pub file: PathBuf,
}

impl FirstFollow {
    /// The sentence for a first move along a trunk nobody named, on a
    /// repository without `origin/HEAD` (the branch checked out in the
    /// main worktree was taken): which branch it follows for good, and the
    /// commands that choose another. `None` when the trunk was named
    /// (`--trunk`) or is `origin/HEAD`'s.
    pub fn words(&self) -> Option<String> {
        if self.from != super::TrunkFrom::CheckedOut {
            return None;
        }
        let repo = self.repo.display().to_string();
        let q = |s: &str| crate::quote::quote(s).unwrap_or_else(|| s.to_string());
        let branch = self
            .trunk
            .strip_prefix("refs/heads/")
            .unwrap_or(&self.trunk);
        Some(format!(
            "{} now follows {branch} ({}) for good: this repository has no origin/HEAD, so the branch checked out in its main worktree was taken (recorded in {}). To follow another branch: git -C {} update-ref -d {} && rm {}, then saphan certify --repo {} --trunk <branch>",
            super::VERIFIED_REF,
            self.trunk,
            self.file.display(),
            q(&repo),
            super::VERIFIED_REF,
            q(&self.file.display().to_string()),
            q(&repo),
        ))
    }
}
