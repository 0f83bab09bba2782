//! `saphan stream teardown`: archive the declared returns, verify the copy,
//! then remove the worktree.
//!
//! Order matters, and every step before the removal is refusable with
//! nothing lost:
//!
//! 1. Run STOP-2 with the status file's waivers plus `--waive` ones.
//!    A declared-but-absent return refuses as `returns-exist`; an uncommitted
//!    authored path that is neither declared nor waived refuses as
//!    `returns-complete`, naming it.
//! 2. Copy every declared return into a staging directory under
//!    `SAPHAN_HOME/archive/<stream>/`, hashing the source before and the copy
//!    after; write `manifest.json` (sha256 and size per file); re-hash the
//!    whole staging copy against the manifest; rename it to `<timestamp>/`.
//! 3. Re-read the worktree: nothing new and uncovered may have appeared and
//!    no archived file may have changed since it was hashed.
//! 4. Only now `git worktree remove --force`: every uncommitted path in the
//!    worktree is archived or was waived by name, so the force only confirms
//!    what the operator already decided. The branch is kept.

use super::gate::{self, Outcome, ReturnEntry, Waived, Where};
use super::quote::os;
use super::status::{STATUS_FILE, Waiver, covers};
use super::{State, StreamError, io, shown};
use crate::fsutil::sha256_file;
use crate::git;
use crate::home::Home;
use serde::Serialize;
use std::path::PathBuf;

/// What `stream teardown` needs.
#[derive(Debug, Clone)]
pub struct TeardownSettings {
    /// Any directory inside the repository.
    pub repo: PathBuf,
    /// The stream name.
    pub name: String,
    /// `--waive PATH=REASON`, as given.
    pub waive: Vec<String>,
}

/// One archived file.
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedFile {
    /// Repository-relative path; the copy is at `files/<path>` in the archive.
    pub path: String,
    /// Lowercase hex sha256 of the bytes.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// One archived symlink (inside a declared directory).
#[derive(Debug, Clone, Serialize)]
pub struct ArchivedLink {
    /// Repository-relative path.
    pub path: String,
    /// The link's target, as written in the link.
    #[serde(with = "super::quote::path_serde")]
    pub target: PathBuf,
}

/// `manifest.json` of one archive.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveManifest {
    /// Format version (1).
    pub version: u32,
    /// The stream.
    pub stream: String,
    /// The branch (kept).
    pub branch: String,
    /// The base from the status file.
    pub base: String,
    /// The branch's commit at teardown.
    pub head: String,
    /// The removed worktree.
    #[serde(with = "super::quote::path_serde")]
    pub worktree: PathBuf,
    /// RFC 3339 UTC.
    pub archived_at: String,
    /// Whether the status file had a `- return:` field.
    pub return_field: bool,
    /// The declared returns, normalized.
    pub declared: Vec<String>,
    /// Every archived file with its sha256.
    pub files: Vec<ArchivedFile>,
    /// Archived directories (so an empty declared directory is visible).
    pub dirs: Vec<String>,
    /// Archived symlinks.
    pub symlinks: Vec<ArchivedLink>,
    /// Authored paths dropped on purpose, with their reasons.
    pub waived: Vec<Waived>,
    /// Committed but undeclared paths: on the kept branch, not archived.
    pub committed_undeclared: Vec<String>,
    /// Ignored files (not authored, not archived) deleted with the worktree.
    #[serde(default)]
    pub ignored_deleted: Vec<String>,
}

/// The outcome of a teardown.
#[derive(Debug, Clone, Serialize)]
pub struct Teardown {
    /// The stream.
    pub stream: String,
    /// `SAPHAN_HOME/archive/<stream>/<timestamp>`.
    #[serde(with = "super::quote::path_serde")]
    pub archive: PathBuf,
    /// The manifest written there.
    pub manifest: ArchiveManifest,
    /// The worktree that was removed.
    #[serde(with = "super::quote::path_serde")]
    pub worktree_removed: PathBuf,
    /// The branch, kept.
    pub branch_kept: String,
}

/// Parse `PATH=REASON`. A path that holds `=` (or any odd character) is
/// written quoted (`"a=b.log"=REASON`, see [`super::quote`]); an unquoted
/// `PATH=REASON` must hold exactly one `=`, since `a=b.log=x` could waive
/// `a` or `a=b.log`.
///
/// Errors: [`StreamError::WaiveMalformed`], [`StreamError::WaiveAmbiguous`].
pub fn parse_waive(arg: &str) -> Result<Waiver, StreamError> {
    let malformed = || StreamError::WaiveMalformed { arg: shown(arg) };
    let (path, reason) = if arg.starts_with('"') {
        let (bytes, rest) = super::quote::unquote_prefix(arg).map_err(|_| malformed())?;
        let reason = rest.strip_prefix('=').ok_or_else(malformed)?;
        (super::quote::encode(&bytes), reason)
    } else {
        match arg.matches('=').count() {
            0 => return Err(malformed()),
            1 => {
                let (p, r) = arg.split_once('=').expect("one `=`");
                (p.trim().to_string(), r)
            }
            _ => return Err(StreamError::WaiveAmbiguous { arg: shown(arg) }),
        }
    };
    if path.is_empty() || reason.trim().is_empty() {
        return Err(malformed());
    }
    Ok(Waiver {
        path,
        reason: reason.trim().to_string(),
        source: "command-line",
    })
}

/// Archive, verify, remove. See the module docs for the order.
///
/// Errors: [`StreamError::ReturnsExist`], [`StreamError::ReturnsComplete`],
/// [`StreamError::ArchiveVerifyFailed`], [`StreamError::WorktreeChanged`],
/// every refusal of the gate, git and I/O errors.
pub async fn teardown(home: &Home, s: &TeardownSettings) -> Result<Teardown, StreamError> {
    let extra = s
        .waive
        .iter()
        .map(|a| parse_waive(a))
        .collect::<Result<Vec<_>, _>>()?;
    // One teardown (or gate) per stream at a time: a second one is refused
    // before it reads, copies or removes anything.
    super::check_name(&s.name)?;
    let opened = git::Repo::open(&s.repo).await?;
    let _lock = if super::registry_dir(&opened)
        .join(format!("{}.json", s.name))
        .exists()
    {
        Some(super::lock(&opened, &s.name, true)?)
    } else {
        None
    };
    let (repo, mut entry, root) = super::find_active(&s.repo, &s.name).await?;
    let listed = super::worktrees(&repo).await?;
    let is_root =
        |p: &std::path::Path| std::fs::canonicalize(p).ok().as_deref() == Some(root.as_path());
    if listed.iter().any(|w| w.locked && is_root(&w.path)) {
        return Err(StreamError::WorktreeLocked {
            name: entry.name.clone(),
            path: root.clone(),
        });
    }
    let m = gate::manifest(&root, &entry, &extra)?;
    let g = gate::evaluate(&root, &entry, &m).await?;
    if g.returns_exist.result == Outcome::Fail {
        return Err(StreamError::ReturnsExist {
            absent: g.returns_exist.absent,
        });
    }
    if !g.returns_complete.lost.is_empty() {
        return Err(StreamError::ReturnsComplete {
            lost: g.returns_complete.lost,
        });
    }
    if !g.returns_complete.submodules_lost.is_empty() {
        return Err(StreamError::SubmoduleCommitLost {
            subs: g.returns_complete.submodules_lost,
        });
    }
    // A command-line waiver must drop something real: it is recorded in the
    // archive as a decision, so one that covers nothing is refused.
    for w in &extra {
        let p = super::status::check_path(&root, &w.path, false)?;
        if !g
            .returns_complete
            .waived
            .iter()
            .any(|x| covers(&p, &x.path))
        {
            return Err(StreamError::WaiveUnused {
                path: w.path.clone(),
            });
        }
    }
    let declared = m.returns.clone().unwrap_or_default();
    let entries = gate::return_entries(&root, &declared)?;
    let head = git::git(
        &repo.top,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}", entry.branch),
        ],
    )
    .await?
    .stdout_str();

    // Stage the archive beside its final place, then rename.
    let stream_dir = home.archive().join(&entry.name);
    std::fs::create_dir_all(&stream_dir).map_err(io("create directory", &stream_dir))?;
    let staging = tempfile::Builder::new()
        .prefix(".staging-")
        .tempdir_in(&stream_dir)
        .map_err(io("create a staging directory in", &stream_dir))?;
    let files_dir = staging.path().join("files");
    std::fs::create_dir_all(&files_dir).map_err(io("create directory", &files_dir))?;
    let mut manifest = ArchiveManifest {
        version: 1,
        stream: entry.name.clone(),
        branch: entry.branch.clone(),
        base: m.base.clone(),
        head,
        worktree: root.clone(),
        archived_at: crate::clock::now_rfc3339_seconds(),
        return_field: m.returns.is_some(),
        declared: declared.clone(),
        files: Vec::new(),
        dirs: Vec::new(),
        symlinks: Vec::new(),
        waived: g.returns_complete.waived.clone(),
        committed_undeclared: g.returns_complete.committed_undeclared.clone(),
        ignored_deleted: g.ignored_deleted.clone(),
    };
    let mut sources: Vec<(PathBuf, String)> = Vec::new();
    for e in &entries {
        match e {
            ReturnEntry::Dir { rel } => {
                let d = files_dir.join(os(rel));
                std::fs::create_dir_all(&d).map_err(io("create directory", &d))?;
                manifest.dirs.push(rel.clone());
            }
            ReturnEntry::Symlink { rel, target } => {
                let d = files_dir.join(os(rel));
                if let Some(p) = d.parent() {
                    std::fs::create_dir_all(p).map_err(io("create directory", p))?;
                }
                std::os::unix::fs::symlink(target, &d).map_err(io("create symlink", &d))?;
                manifest.symlinks.push(ArchivedLink {
                    path: rel.clone(),
                    target: target.clone(),
                });
            }
            ReturnEntry::File { rel, src } => {
                let d = files_dir.join(os(rel));
                if let Some(p) = d.parent() {
                    std::fs::create_dir_all(p).map_err(io("create directory", p))?;
                }
                let want = sha256_file(src).map_err(io("read", src))?;
                let bytes = std::fs::copy(src, &d).map_err(io("copy to", &d))?;
                std::fs::File::open(&d)
                    .and_then(|f| f.sync_all())
                    .map_err(io("sync", &d))?;
                let got = sha256_file(&d).map_err(io("read", &d))?;
                if got != want {
                    return Err(StreamError::ArchiveVerifyFailed {
                        path: rel.clone(),
                        want,
                        got,
                        dir: staging.keep(),
                    });
                }
                manifest.files.push(ArchivedFile {
                    path: rel.clone(),
                    sha256: want.clone(),
                    bytes,
                });
                sources.push((src.clone(), want));
            }
        }
    }
    // The status file travels with the archive as evidence; it is not a return.
    let status_src = root.join(STATUS_FILE);
    let status_dst = staging.path().join("status");
    std::fs::copy(&status_src, &status_dst).map_err(io("copy to", &status_dst))?;
    let mut text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
    text.push('\n');
    crate::fsutil::atomic_write(&staging.path().join("manifest.json"), text.as_bytes())?;
    // Verify the whole staged copy against the manifest once more.
    for f in &manifest.files {
        let p = files_dir.join(os(&f.path));
        let got = sha256_file(&p).map_err(io("read", &p))?;
        if got != f.sha256 {
            return Err(StreamError::ArchiveVerifyFailed {
                path: f.path.clone(),
                want: f.sha256.clone(),
                got,
                dir: staging.keep(),
            });
        }
    }
    let ts = crate::clock::now_compact();
    let mut final_dir = stream_dir.join(&ts);
    let mut n = 2;
    while final_dir.exists() {
        final_dir = stream_dir.join(format!("{ts}-{n}"));
        n += 1;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &final_dir).map_err(io("rename into place", &final_dir))?;
    if let Ok(d) = std::fs::File::open(&stream_dir) {
        let _ = d.sync_all();
    }

    // Nothing may have slipped in or changed since the gate.
    let now = gate::authored(&root, &m.base, &entry.branch).await?;
    let mut changed: Vec<String> = now
        .iter()
        .filter(|a| a.at == Where::Uncommitted)
        .filter(|a| {
            !declared.iter().any(|d| covers(d, &a.path))
                && !m.waivers.iter().any(|w| covers(&w.path, &a.path))
        })
        .map(|a| a.path.clone())
        .collect();
    for e in gate::return_entries(&root, &declared)? {
        if let ReturnEntry::File { rel, .. } = e
            && !manifest.files.iter().any(|f| f.path == rel)
        {
            changed.push(rel);
        }
    }
    for ((src, want), f) in sources.iter().zip(&manifest.files) {
        if sha256_file(src).ok().as_deref() != Some(want.as_str()) {
            changed.push(f.path.clone());
        }
    }
    if !changed.is_empty() {
        return Err(StreamError::WorktreeChanged {
            paths: changed,
            archive: final_dir,
        });
    }

    // Run the removal from another worktree (normally the main one), never
    // from inside the tree being removed.
    let from = listed
        .into_iter()
        .map(|w| w.path)
        .find(|p| !is_root(p))
        .unwrap_or_else(|| repo.common_dir.clone());
    git::git_os(
        &from,
        &[
            "worktree".as_ref(),
            "remove".as_ref(),
            "--force".as_ref(),
            root.as_os_str(),
        ],
    )
    .await?;
    // Tidy the default `<repo>.streams/` parent once its last stream is gone
    // (remove_dir only removes an empty directory).
    if let Some(parent) = root.parent()
        && parent.extension().is_some_and(|e| e == "streams")
    {
        let _ = std::fs::remove_dir(parent);
    }

    entry.state = State::TornDown;
    entry.archive = Some(final_dir.clone());
    entry.torn_down_at = Some(crate::clock::now_rfc3339_seconds());
    super::save(&repo, &entry)?;
    Ok(Teardown {
        stream: entry.name.clone(),
        archive: final_dir,
        manifest,
        worktree_removed: root,
        branch_kept: entry.branch.clone(),
    })
}

impl Teardown {
    /// The report a person reads.
    pub fn render(&self) -> String {
        let m = &self.manifest;
        let mut s = format!(
            "stream {} torn down\n  archived {} file(s) with sha256 to {}\n",
            self.stream,
            m.files.len(),
            self.archive.display()
        );
        for f in &m.files {
            s += &format!("    {}  {}\n", f.sha256, shown(&f.path));
        }
        if !m.return_field {
            s += "  the status file had no `- return:` field: nothing was declared\n";
        }
        for w in &m.waived {
            s += &format!(
                "  dropped (waived): {} — {}\n",
                shown(&w.path),
                shown(&w.reason)
            );
        }
        for p in &m.committed_undeclared {
            s += &format!(
                "  on the branch only (undeclared, committed): {}\n",
                shown(p)
            );
        }
        s += &gate::render_ignored(&m.ignored_deleted).replace(
            "teardown deletes them with the worktree (declare or copy any you need)",
            "deleted with the worktree",
        );
        s += &format!(
            "  removed worktree {}\n  kept branch {} at {} — delete it with `git branch -D {}` once it is merged or no longer needed\n",
            self.worktree_removed.display(),
            self.branch_kept,
            &m.head[..12.min(m.head.len())],
            self.branch_kept
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

    #[test]
    fn a_waive_argument_names_one_path() {
        assert_eq!(parse_waive("x.log=debug").unwrap().path, "x.log");
        let w = parse_waive("\"a=b.log\"=scratch=old").unwrap();
        assert_eq!(
            (w.path.as_str(), w.reason.as_str()),
            ("\"a=b.log\"", "scratch=old")
        );
        assert_eq!(
            parse_waive("a=b.log=x").unwrap_err().name(),
            "waive-ambiguous"
        );
        for bad in ["x.log", "=r", "x=", "\"a\"r", "\"a=r"] {
            assert_eq!(
                parse_waive(bad).unwrap_err().name(),
                "waive-malformed",
                "{bad}"
            );
        }
    }
}
