//! STOP-2: returns-exist and returns-complete.
//!
//! returns-exist reads every path under `- return:` and fails naming each one
//! that is not on disk in the stream's worktree; a status file with no
//! `- return:` field passes it (the spec's explicit clean pass).
//!
//! returns-complete is the other direction. The authored set is
//! `git diff --name-only base...stream/NAME` (committed on the branch) plus
//! `git status --short --untracked-files=all` in the worktree (uncommitted:
//! untracked files and uncommitted edits), minus `.saphan/`. An authored path
//! is covered when a declared return or a waiver equals it or is a directory
//! above it. Uncovered uncommitted paths are what teardown would destroy: they
//! fail the gate. Uncovered committed paths survive on the kept branch and are
//! listed as a warning.

use super::quote::{encode, os};
use super::status::{self, STATUS_DIR, StatusFile, Waiver, check_path, covers};
use super::{Entry, StreamError, shown};
use crate::git;
use serde::Serialize;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The status file after every path in it was checked and normalized.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The stream's base, full SHA, from `- base:`.
    pub base: String,
    /// Normalized `- return:` paths; `None` when the field is absent.
    pub returns: Option<Vec<String>>,
    /// Normalized waivers: the status file's, then the command line's.
    pub waivers: Vec<Waiver>,
}

fn is_full_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Load `.saphan/status` from the canonical worktree `root`, check its
/// stream and base, and check every declared and waived path (plus `extra`
/// waivers from the command line), including symlinks found inside declared
/// directories.
///
/// Errors: status-file errors, [`StreamError::StatusMismatch`],
/// [`StreamError::ReturnPathHostile`].
pub fn manifest(root: &Path, entry: &Entry, extra: &[Waiver]) -> Result<Manifest, StreamError> {
    let sf = StatusFile::load(root)?;
    let file = root.join(status::STATUS_FILE);
    let mismatch = |detail: String| StreamError::StatusMismatch {
        file: file.clone(),
        stream: entry.name.clone(),
        detail,
    };
    match sf.stream.as_deref() {
        Some(s) if s == entry.name => {}
        Some(s) => return Err(mismatch(format!("it names stream `{s}`"))),
        None => return Err(mismatch("it has no `- stream:` line".into())),
    }
    let base = match sf.base.as_deref() {
        Some(b) if is_full_sha(b) => b.to_ascii_lowercase(),
        Some(b) => return Err(mismatch(format!("`- base: {b}` is not a full commit SHA"))),
        None => return Err(mismatch("it has no `- base:` line".into())),
    };
    let returns = match &sf.returns {
        None => None,
        Some(v) => {
            let mut out: Vec<String> = Vec::new();
            for p in v {
                let n = check_path(root, p, true)?;
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            Some(out)
        }
    };
    // Walk the present returns so an escaping symlink inside a declared
    // directory is refused by every verb, not discovered at teardown.
    if let Some(r) = &returns {
        return_entries(root, r)?;
    }
    let mut waivers = Vec::new();
    for w in sf.waivers.iter().chain(extra.iter()) {
        waivers.push(Waiver {
            path: check_path(root, &w.path, false)?,
            reason: w.reason.clone(),
            source: w.source,
        });
    }
    Ok(Manifest {
        base,
        returns,
        waivers,
    })
}

/// Whether an authored path is committed on the branch or lives only in the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Where {
    /// In `git diff base...branch` and clean in the worktree: the kept branch holds it.
    Committed,
    /// Untracked, or an uncommitted edit: only the worktree holds it.
    Uncommitted,
}

/// One authored path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Authored {
    /// Repository-relative path.
    pub path: String,
    /// Committed or uncommitted.
    #[serde(rename = "where")]
    pub at: Where,
}

/// The authored set of the stream, sorted by path.
///
/// Deleted paths are left out (there is nothing on disk to return), and so
/// is `.saphan/` (the status file is not a return).
pub async fn authored(root: &Path, base: &str, branch: &str) -> Result<Vec<Authored>, StreamError> {
    let range = format!("{base}...refs/heads/{branch}");
    let diff = git::git(
        root,
        &[
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--diff-filter=d",
            &range,
            "--",
        ],
    )
    .await?;
    let st = git::git(
        root,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ],
    )
    .await?;
    let mut uncommitted: Vec<String> = Vec::new();
    for rec in st.stdout.split(|b| *b == 0) {
        if rec.len() < 4 {
            continue;
        }
        // Every path by its exact bytes: a name that is not UTF-8 is seen
        // (and later declared, waived or refused) like any other.
        if std::fs::symlink_metadata(root.join(OsStr::from_bytes(&rec[3..]))).is_err() {
            continue; // deleted in the worktree
        }
        uncommitted.push(encode(&rec[3..]));
    }
    for p in hidden_edits(root).await? {
        if !uncommitted.contains(&p) {
            uncommitted.push(p);
        }
    }
    let mut out: Vec<Authored> = Vec::new();
    for p in &uncommitted {
        out.push(Authored {
            path: p.clone(),
            at: Where::Uncommitted,
        });
    }
    for rec in diff.stdout.split(|b| *b == 0) {
        if rec.is_empty() {
            continue;
        }
        let p = encode(rec);
        if !uncommitted.contains(&p) {
            out.push(Authored {
                path: p,
                at: Where::Committed,
            });
        }
    }
    out.retain(|a| !covers(STATUS_DIR, &a.path));
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup();
    Ok(out)
}

/// Tracked files whose edits `git status` does not show: flagged
/// assume-unchanged (lowercase tag in `git ls-files -v`) or skip-worktree
/// (`S`, also what sparse checkout sets), present on disk, and whose content
/// differs from the index. Teardown's `--force` would destroy such an edit.
pub async fn hidden_edits(root: &Path) -> Result<Vec<String>, StreamError> {
    let lsv = git::git(root, &["ls-files", "-v", "-z"]).await?;
    let mut flagged: Vec<String> = Vec::new();
    for rec in lsv.stdout.split(|b| *b == 0) {
        if rec.len() < 3 {
            continue;
        }
        let tag = rec[0];
        if !(tag.is_ascii_lowercase() || tag == b'S') {
            continue;
        }
        if std::fs::symlink_metadata(root.join(OsStr::from_bytes(&rec[2..]))).is_ok() {
            flagged.push(encode(&rec[2..]));
        }
    }
    if flagged.is_empty() {
        return Ok(flagged);
    }
    // The index's blob for each flagged path.
    let lss = git::git(root, &["ls-files", "-s", "-z"]).await?;
    let mut index: std::collections::HashMap<String, String> = Default::default();
    for (meta, path) in staged_entries(&lss.stdout) {
        if let Some(sha) = meta.split(' ').nth(1) {
            index.insert(encode(path), sha.to_string());
        }
    }
    // Hash the working-tree files the way `git add` would (filters included).
    // A path git cannot take on one line (a newline, or a leading `"` that
    // `--stdin-paths` would unquote), or a symlink, counts as changed.
    let (plain, odd): (Vec<String>, Vec<String>) = flagged.into_iter().partition(|p| {
        let b = os(p);
        let b = b.as_os_str().as_bytes();
        !b.contains(&b'\n')
            && !b.starts_with(b"\"")
            && std::fs::symlink_metadata(root.join(os(p))).is_ok_and(|m| m.file_type().is_file())
    });
    let mut out = odd;
    if !plain.is_empty() {
        let mut input = Vec::new();
        for p in &plain {
            input.extend_from_slice(os(p).as_os_str().as_bytes());
            input.push(b'\n');
        }
        let o = crate::exec::run(
            git::git_cmd(root)
                .args(["hash-object", "--stdin-paths"])
                .stdin(input),
        )
        .await
        .map_err(git::GitError::Spawn)?;
        let shas: Vec<String> = o.stdout_str().lines().map(str::to_string).collect();
        for (i, p) in plain.into_iter().enumerate() {
            if !o.status.success() || shas.get(i) != index.get(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The records of `git ls-files -s -z`: `(mode sha stage, path bytes)`.
fn staged_entries(out: &[u8]) -> impl Iterator<Item = (String, &[u8])> {
    out.split(|b| *b == 0).filter_map(|rec| {
        let tab = rec.iter().position(|b| *b == b'\t')?;
        Some((
            String::from_utf8_lossy(&rec[..tab]).into_owned(),
            &rec[tab + 1..],
        ))
    })
}

/// Ignored files teardown will delete with the worktree (gitignored build
/// outputs, `results/` a stream chose to ignore, anything in `.saphan/`
/// besides the status file and its `.gitignore`), minus what a declared
/// return archives or a waiver covers. Not authored — listed as a warning.
pub async fn ignored_deleted(
    root: &Path,
    declared: &[String],
    waivers: &[Waiver],
) -> Result<Vec<String>, StreamError> {
    let o = git::git(
        root,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
        ],
    )
    .await?;
    let mut out: Vec<String> = Vec::new();
    for rec in o.stdout.split(|b| *b == 0) {
        if rec.is_empty() {
            continue;
        }
        let p = encode(rec);
        if p == status::STATUS_FILE || p == status::STATUS_GITIGNORE {
            continue;
        }
        if declared.iter().any(|d| covers(d, &p)) || waivers.iter().any(|w| covers(&w.path, &p)) {
            continue;
        }
        out.push(p);
    }
    out.sort();
    Ok(out)
}

/// Initialized submodules of the stream's worktree whose checked-out commit
/// is in neither the main checkout's copy of the submodule nor the
/// superproject's `modules/` store: removing the worktree (and its
/// `.git/worktrees/<wt>/modules/`) would destroy that commit.
pub async fn submodules_lost(root: &Path) -> Result<Vec<String>, StreamError> {
    let ls = git::git(root, &["ls-files", "-s", "-z"]).await?;
    let mut subs: Vec<String> = Vec::new();
    for (meta, path) in staged_entries(&ls.stdout) {
        if meta.starts_with("160000 ") {
            subs.push(encode(path));
        }
    }
    if subs.is_empty() {
        return Ok(subs);
    }
    let repo = git::Repo::open(root).await?;
    let main = super::worktrees(&repo)
        .await?
        .into_iter()
        .next()
        .map(|w| w.path)
        .unwrap_or_else(|| repo.top.clone());
    let mut out = Vec::new();
    for sub in subs {
        let dir = root.join(os(&sub));
        if std::fs::symlink_metadata(dir.join(".git")).is_err() {
            continue; // not initialized: nothing of its own to lose
        }
        let Ok(head) = git::git(&dir, &["rev-parse", "--verify", "HEAD^{commit}"]).await else {
            continue;
        };
        let obj = format!("{}^{{commit}}", head.stdout_str());
        let mut found = false;
        let main_sub = main.join(os(&sub));
        if std::fs::canonicalize(&main_sub).ok() != std::fs::canonicalize(&dir).ok()
            && std::fs::symlink_metadata(main_sub.join(".git")).is_ok()
            && git::git(&main_sub, &["cat-file", "-e", &obj]).await.is_ok()
        {
            found = true;
        }
        let store = repo.common_dir.join("modules").join(os(&sub));
        if !found && store.is_dir() {
            let gd = format!("--git-dir={}", store.display());
            found = git::git(&repo.common_dir, &[&gd, "cat-file", "-e", &obj])
                .await
                .is_ok();
        }
        if !found {
            out.push(sub);
        }
    }
    Ok(out)
}

/// Refuse a base git no longer has, and a base that differs from the one
/// the stream was started from unless it is an ancestor of the branch.
pub async fn check_base(root: &Path, entry: &Entry, base: &str) -> Result<(), StreamError> {
    let file = root.join(status::STATUS_FILE);
    let obj = format!("{base}^{{commit}}");
    if git::git(root, &["cat-file", "-e", &obj]).await.is_err() {
        return Err(StreamError::BaseMissing {
            name: entry.name.clone(),
            base: base.to_string(),
            branch: entry.branch.clone(),
            file,
        });
    }
    if !base.eq_ignore_ascii_case(&entry.base) {
        let br = format!("refs/heads/{}", entry.branch);
        if git::git(root, &["merge-base", "--is-ancestor", base, &br])
            .await
            .is_err()
        {
            return Err(StreamError::BaseNotAncestor {
                name: entry.name.clone(),
                base: base.to_string(),
                branch: entry.branch.clone(),
                file,
            });
        }
    }
    Ok(())
}

/// One thing to archive under a declared return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReturnEntry {
    /// A regular file: its repository-relative path and where its bytes are.
    File { rel: String, src: PathBuf },
    /// A directory (possibly empty).
    Dir { rel: String },
    /// A symlink inside a declared directory, pointing inside the worktree.
    Symlink { rel: String, target: PathBuf },
}

/// Expand the declared returns that exist into files, directories and
/// symlinks, sorted. A declared path that is itself a symlink is followed (it
/// was checked to stay inside); symlinks found inside a declared directory
/// are kept as symlinks and must point inside the worktree too. Sockets and
/// other special files are skipped.
///
/// Errors: [`StreamError::ReturnPathHostile`] for an escaping symlink.
pub fn return_entries(root: &Path, declared: &[String]) -> Result<Vec<ReturnEntry>, StreamError> {
    let mut out = Vec::new();
    for rel in declared {
        let p = root.join(os(rel));
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        let real = std::fs::canonicalize(&p).unwrap_or(p.clone());
        if meta.is_file() {
            out.push(ReturnEntry::File {
                rel: rel.clone(),
                src: real,
            });
            continue;
        }
        if !meta.is_dir() {
            continue;
        }
        out.push(ReturnEntry::Dir { rel: rel.clone() });
        let walk = walkdir::WalkDir::new(&real)
            .min_depth(1)
            .follow_links(false)
            .sort_by_file_name();
        for e in walk {
            let e = e.map_err(|e| {
                StreamError::Io(crate::error::IoError::Io {
                    action: "walk",
                    path: e.path().map(Path::to_path_buf).unwrap_or(real.clone()),
                    source: e
                        .into_io_error()
                        .unwrap_or_else(|| std::io::Error::other("walk error")),
                })
            })?;
            let sub = e.path().strip_prefix(&real).unwrap_or(e.path());
            let mut child = os(rel).into_os_string().into_vec();
            child.push(b'/');
            child.extend_from_slice(sub.as_os_str().as_bytes());
            let child = encode(&child);
            let ft = e.file_type();
            if ft.is_symlink() {
                // Judge it exactly like a declared path.
                check_path(root, &child, true)?;
                let target = std::fs::read_link(e.path()).unwrap_or_default();
                out.push(ReturnEntry::Symlink { rel: child, target });
            } else if ft.is_dir() {
                out.push(ReturnEntry::Dir { rel: child });
            } else if ft.is_file() {
                out.push(ReturnEntry::File {
                    rel: child,
                    src: e.path().to_path_buf(),
                });
            }
        }
    }
    Ok(out)
}

/// `pass` or `fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The check holds.
    Pass,
    /// The check does not hold.
    Fail,
}

/// returns-exist.
#[derive(Debug, Clone, Serialize)]
pub struct ReturnsExist {
    /// `returns-exist`.
    pub name: &'static str,
    /// Pass or fail.
    pub result: Outcome,
    /// Whether the status file has a `- return:` field at all.
    pub return_field: bool,
    /// Declared paths, normalized, in file order.
    pub declared: Vec<String>,
    /// Declared paths not on disk.
    pub absent: Vec<String>,
}

/// An authored path covered by a waiver.
#[derive(Debug, Clone, Serialize)]
pub struct Waived {
    /// The authored path.
    pub path: String,
    /// The waiver's path (equal to, or a directory above, `path`).
    pub waiver: String,
    /// The reason.
    pub reason: String,
    /// `status-file` or `command-line`.
    pub source: &'static str,
}

/// returns-complete.
#[derive(Debug, Clone, Serialize)]
pub struct ReturnsComplete {
    /// `returns-complete`.
    pub name: &'static str,
    /// Pass or fail.
    pub result: Outcome,
    /// Uncommitted authored paths neither declared nor waived: teardown
    /// would destroy them. Any entry fails the check.
    pub lost: Vec<String>,
    /// Committed authored paths neither declared nor waived: kept on the
    /// branch, listed as a warning.
    pub committed_undeclared: Vec<String>,
    /// Authored paths covered by a declared return.
    pub declared: Vec<String>,
    /// Authored paths covered by a waiver.
    pub waived: Vec<Waived>,
    /// Initialized submodules whose checked-out commit only the stream's
    /// worktree holds, not waived. Any entry fails the check.
    pub submodules_lost: Vec<String>,
    /// The whole authored set.
    pub authored: Vec<Authored>,
}

/// The STOP-2 result.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    /// The stream.
    pub stream: String,
    /// `stop-2`.
    pub gate: &'static str,
    /// Pass when both checks pass.
    pub verdict: Outcome,
    /// The branch.
    pub branch: String,
    /// The base from the status file.
    pub base: String,
    /// The worktree.
    #[serde(with = "super::quote::path_serde")]
    pub worktree: PathBuf,
    /// The first check.
    pub returns_exist: ReturnsExist,
    /// The second check.
    pub returns_complete: ReturnsComplete,
    /// Ignored files (not authored) that teardown deletes with the worktree:
    /// a warning, never a failure.
    pub ignored_deleted: Vec<String>,
}

/// Evaluate both checks against a loaded manifest.
pub async fn evaluate(root: &Path, entry: &Entry, m: &Manifest) -> Result<Gate, StreamError> {
    let declared = m.returns.clone().unwrap_or_default();
    let absent: Vec<String> = declared
        .iter()
        .filter(|p| std::fs::metadata(root.join(os(p))).is_err())
        .cloned()
        .collect();
    check_base(root, entry, &m.base).await?;
    let authored = authored(root, &m.base, &entry.branch).await?;
    let mut rc = ReturnsComplete {
        name: "returns-complete",
        result: Outcome::Pass,
        lost: Vec::new(),
        committed_undeclared: Vec::new(),
        declared: Vec::new(),
        waived: Vec::new(),
        submodules_lost: Vec::new(),
        authored: authored.clone(),
    };
    for a in &authored {
        if declared.iter().any(|d| covers(d, &a.path)) {
            rc.declared.push(a.path.clone());
        } else if let Some(w) = m.waivers.iter().find(|w| covers(&w.path, &a.path)) {
            rc.waived.push(Waived {
                path: a.path.clone(),
                waiver: w.path.clone(),
                reason: w.reason.clone(),
                source: w.source,
            });
        } else if a.at == Where::Uncommitted {
            rc.lost.push(a.path.clone());
        } else {
            rc.committed_undeclared.push(a.path.clone());
        }
    }
    for sub in submodules_lost(root).await? {
        if let Some(w) = m.waivers.iter().find(|w| covers(&w.path, &sub)) {
            if !rc.waived.iter().any(|x| x.path == sub) {
                rc.waived.push(Waived {
                    path: sub.clone(),
                    waiver: w.path.clone(),
                    reason: w.reason.clone(),
                    source: w.source,
                });
            }
        } else {
            rc.submodules_lost.push(sub);
        }
    }
    if !rc.lost.is_empty() || !rc.submodules_lost.is_empty() {
        rc.result = Outcome::Fail;
    }
    let ignored = ignored_deleted(root, &declared, &m.waivers).await?;
    let re = ReturnsExist {
        name: "returns-exist",
        result: if absent.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        return_field: m.returns.is_some(),
        declared,
        absent,
    };
    let verdict = if re.result == Outcome::Pass && rc.result == Outcome::Pass {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    Ok(Gate {
        stream: entry.name.clone(),
        gate: "stop-2",
        verdict,
        branch: entry.branch.clone(),
        base: m.base.clone(),
        worktree: root.to_path_buf(),
        returns_exist: re,
        returns_complete: rc,
        ignored_deleted: ignored,
    })
}

/// `saphan stream gate stop-2 NAME`: find the stream, load and check its
/// manifest, evaluate both checks.
pub async fn stop2(repo_dir: &Path, name: &str) -> Result<Gate, StreamError> {
    super::check_name(name)?;
    let repo = git::Repo::open(repo_dir).await?;
    let _lock = if super::registry_dir(&repo)
        .join(format!("{name}.json"))
        .exists()
    {
        Some(super::lock(&repo, name, false)?)
    } else {
        None
    };
    let (_repo, entry, root) = super::find_active(repo_dir, name).await?;
    let m = manifest(&root, &entry, &[])?;
    evaluate(&root, &entry, &m).await
}

impl Gate {
    /// The report a person reads.
    pub fn render(&self) -> String {
        let word = |o: Outcome| match o {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAIL",
        };
        let mut s = format!(
            "stream {} — gate stop-2: {}\n  branch {}  base {}\n  worktree {}\n",
            self.stream,
            word(self.verdict),
            self.branch,
            &self.base[..12.min(self.base.len())],
            self.worktree.display()
        );
        let re = &self.returns_exist;
        if !re.return_field {
            s += "returns-exist: pass — the status file has no `- return:` field (an explicit clean pass: nothing declared)\n";
        } else if re.absent.is_empty() {
            s += &format!(
                "returns-exist: pass — {} declared, all on disk\n",
                re.declared.len()
            );
        } else {
            s += &format!(
                "returns-exist: FAIL — declared but not on disk ({} of {}):\n",
                re.absent.len(),
                re.declared.len()
            );
            for p in &re.absent {
                s += &format!("    {}\n", shown(p));
            }
        }
        let rc = &self.returns_complete;
        s += &format!(
            "returns-complete: {} — {} authored, {} declared, {} waived, {} would be lost\n",
            word(rc.result),
            rc.authored.len(),
            rc.declared.len(),
            rc.waived.len(),
            rc.lost.len()
        );
        if !rc.lost.is_empty() {
            s += "  undeclared and uncommitted — teardown would destroy these:\n";
            for p in &rc.lost {
                s += &format!("    {}\n", shown(p));
            }
        }
        if !rc.submodules_lost.is_empty() {
            s += "  submodule commits only this worktree holds — teardown would destroy them:\n";
            for p in &rc.submodules_lost {
                s += &format!("    {}\n", shown(p));
            }
        }
        if !rc.committed_undeclared.is_empty() {
            s += &format!(
                "  warning: undeclared but committed — kept on branch {}, not archived:\n",
                self.branch
            );
            for p in &rc.committed_undeclared {
                s += &format!("    {}\n", shown(p));
            }
        }
        if !rc.waived.is_empty() {
            s += "  waived:\n";
            for w in &rc.waived {
                s += &format!("    {} — {}\n", shown(&w.path), shown(&w.reason));
            }
        }
        s += &render_ignored(&self.ignored_deleted);
        if re.result == Outcome::Fail {
            s += "to fix returns-exist: create each absent path, or drop it from `- return:` in .saphan/status\n";
        }
        if !rc.lost.is_empty() {
            s += "to fix returns-complete: declare each path under `- return:` in .saphan/status, or waive it with `- waive: PATH — reason`\n";
        }
        if !rc.submodules_lost.is_empty() {
            s += "to fix the submodules: push each commit to the submodule's remote and fetch it into the main checkout's submodule, or waive the submodule path\n";
        }
        s
    }
}

/// How many ignored paths a report prints before "… and N more".
pub const IGNORED_SHOWN: usize = 20;

/// The warning about ignored files teardown deletes ("" when none).
pub fn render_ignored(paths: &[String]) -> String {
    if paths.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "  warning: {} ignored file(s) are not authored and are not archived — teardown deletes them with the worktree (declare or copy any you need):\n",
        paths.len()
    );
    for p in paths.iter().take(IGNORED_SHOWN) {
        s += &format!("    {}\n", shown(p));
    }
    if paths.len() > IGNORED_SHOWN {
        s += &format!("    … and {} more\n", paths.len() - IGNORED_SHOWN);
    }
    s
}
