//! Streams and their returns (DESIGN §7).
//!
//! A stream is a branch (`stream/NAME`), a worktree checked out on it, and a
//! gitignored status file (`.saphan/status`) whose `- return:` manifest names
//! the paths the stream must hand back. [`start`] creates all three and
//! registers the stream in `<git-common-dir>/saphan/streams/NAME.json`, so any
//! worktree of the repository finds it. [`gate::stop2`] runs the two STOP-2
//! checks, returns-exist and returns-complete; [`teardown::teardown`] archives
//! the declared returns with their sha256 into
//! `SAPHAN_HOME/archive/<stream>/<timestamp>/`, verifies the copy, and only
//! then removes the worktree. The branch is kept.

pub mod gate;
pub mod quote;
pub mod status;
pub mod teardown;

use crate::error::{IoError, Refusal};
use crate::git::{self, GitError, Repo};
use serde::{Deserialize, Serialize};
use status::{STATUS_DIR, STATUS_FILE, STATUS_GITIGNORE};
use std::path::{Path, PathBuf};

/// Errors of the stream verbs. Each variant's name is stable.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The stream name cannot be a branch component / file name.
    #[error(
        "`{name}` is not a usable stream name: {why} — use letters, digits, `.`, `_` and `-`, starting with a letter or digit"
    )]
    NameInvalid { name: String, why: String },
    /// A stream (registry entry or branch) with this name already exists.
    #[error(
        "stream `{name}` already exists ({what}) — pick another name, or inspect it with `saphan stream status {name}`"
    )]
    Exists { name: String, what: String },
    /// The stream's worktree is locked (`git worktree lock`).
    #[error(
        "the worktree of stream `{name}` ({path}) is locked — unlock it with `git worktree unlock {path}` if the lock is stale, then re-run; nothing was archived or removed"
    )]
    WorktreeLocked { name: String, path: PathBuf },
    /// The chosen worktree directory already exists.
    #[error("{path} already exists — remove it or pass --worktree with a fresh directory")]
    WorktreeExists { path: PathBuf },
    /// The repository tracks `.saphan/`, which would make the status file tracked.
    #[error(
        "the repository tracks {path} at {base}, so the stream's status file could not stay gitignored — remove `.saphan/` from the repository first"
    )]
    StatusTracked { path: String, base: String },
    /// The status file would not be ignored by git.
    #[error(
        "git does not ignore {file} (a .gitignore rule re-includes it?) — the status file must stay out of the stream's commits; check `git -C {worktree} check-ignore -v {STATUS_FILE}`"
    )]
    StatusNotIgnored { file: PathBuf, worktree: PathBuf },
    /// No stream of this name is registered.
    #[error(
        "no stream named `{name}` in {repo} — list the registry in {registry}, or start one with `saphan stream start {name} --repo {repo}`"
    )]
    Unknown {
        name: String,
        repo: PathBuf,
        registry: PathBuf,
    },
    /// The stream was torn down already.
    #[error(
        "stream `{name}` was torn down at {at}; its returns are archived in {archive} — its branch {branch} is kept"
    )]
    TornDown {
        name: String,
        at: String,
        archive: PathBuf,
        branch: String,
    },
    /// The registry names a worktree git no longer knows.
    #[error(
        "the worktree of stream `{name}` ({path}) is gone or no longer on {branch} — see `git worktree list`; nothing was changed. If it was removed on purpose, `saphan stream forget {name}` records that (nothing can be archived any more; the branch is kept)"
    )]
    WorktreeMissing {
        name: String,
        path: PathBuf,
        branch: String,
    },
    /// `stream forget` on a stream whose worktree is still there.
    #[error(
        "the worktree of stream `{name}` ({path}) is still there — use `saphan stream teardown {name}`, which archives the returns first"
    )]
    WorktreePresent { name: String, path: PathBuf },
    /// The registry file is unreadable.
    #[error("{file} is not a stream registry entry: {detail} — fix or remove the file by hand")]
    RegistryMalformed { file: PathBuf, detail: String },
    /// The status file is missing or unreadable.
    #[error(
        "cannot read the status file {file}: {detail} — recreate it with `- stream:`, `- base:` and `- return:` lines (docs/streams.md)"
    )]
    StatusMissing { file: PathBuf, detail: String },
    /// The status file has a line saphan cannot read.
    #[error("{file}:{line}: {detail} — fix the line (format: docs/streams.md)")]
    StatusMalformed {
        file: PathBuf,
        line: usize,
        detail: String,
    },
    /// The status file names another stream or a base that is not a full SHA.
    #[error(
        "{file}: {detail} — the status file must say `- stream: {stream}` and `- base: <full SHA>`"
    )]
    StatusMismatch {
        file: PathBuf,
        stream: String,
        detail: String,
    },
    /// A waiver without a reason.
    #[error(
        "{file}:{line}: the waiver for `{path}` gives no reason — write `- waive: PATH — reason`"
    )]
    WaiverWithoutReason {
        file: PathBuf,
        line: usize,
        path: String,
    },
    /// `teardown --waive` not in `PATH=REASON` form.
    #[error(
        "--waive `{arg}` is not PATH=REASON with a non-empty reason — e.g. --waive 'scratch.log=debug output' (quote an odd path as saphan prints it: '\"a=b.log\"=REASON')"
    )]
    WaiveMalformed { arg: String },
    /// `teardown --waive` whose unquoted path could end at more than one `=`.
    #[error(
        "--waive {arg} holds `=` more than once, so it is unclear where the path ends — quote the path the way saphan prints it: --waive '\"a=b.log\"=REASON'"
    )]
    WaiveAmbiguous { arg: String },
    /// A declared or waived path leaves the worktree.
    #[error(
        "`{path}` is refused: {why} — returns are paths inside the stream's worktree, relative to its top"
    )]
    ReturnPathHostile { path: String, why: String },
    /// Teardown: declared returns are not on disk.
    #[error("declared returns are not on disk: {} — create them, or remove them from `- return:`, then re-run", shown_list(.absent))]
    ReturnsExist { absent: Vec<String> },
    /// Teardown: authored paths would be destroyed.
    #[error("teardown would destroy undeclared work: {} — declare each under `- return:`, or waive it with `--waive PATH=REASON` (or `- waive: PATH — reason`)", shown_list(.lost))]
    ReturnsComplete { lost: Vec<String> },
    /// Teardown: a submodule's checked-out commit exists only in the stream worktree.
    #[error("submodule commit(s) exist only in the stream's worktree and teardown would destroy them: {} — push each to the submodule's remote and fetch it into the main checkout's submodule, or waive the submodule path with `--waive PATH=REASON`", shown_list(.subs))]
    SubmoduleCommitLost { subs: Vec<String> },
    /// `--waive` names a path teardown would not lose.
    #[error("--waive {} covers no undeclared authored path — nothing there would be lost; drop the --waive (waivers are recorded in the archive, so they must be true)", shown(.path))]
    WaiveUnused { path: String },
    /// Another gate or teardown of the same stream is running.
    #[error(
        "another saphan gate or teardown of stream `{name}` holds {lock} — wait for it to finish, then re-run; nothing was done"
    )]
    Busy { name: String, lock: PathBuf },
    /// The status file's base commit is not in the repository (rewritten and collected).
    #[error(
        "the base {base} of stream `{name}` is not a commit in this repository (history rewritten and garbage-collected?) — set `- base:` in {file} to the output of `git merge-base <trunk> {branch}`, then re-run"
    )]
    BaseMissing {
        name: String,
        base: String,
        branch: String,
        file: PathBuf,
    },
    /// The status file's base differs from the registered one and is not an ancestor of the branch.
    #[error(
        "`- base: {base}` in {file} differs from the base stream `{name}` started from and is not an ancestor of {branch} — use `git merge-base <trunk> {branch}`"
    )]
    BaseNotAncestor {
        name: String,
        base: String,
        branch: String,
        file: PathBuf,
    },
    /// The worktree changed between the gate and the removal.
    #[error("the worktree changed during teardown: {} appeared — the archive is kept in {archive}; re-run teardown", shown_list(.paths))]
    WorktreeChanged {
        paths: Vec<String>,
        archive: PathBuf,
    },
    /// The archived copy does not hash like the source.
    #[error(
        "the archived copy of {path} hashes {got}, the worktree's file {want} — nothing was removed; the partial archive is in {dir}"
    )]
    ArchiveVerifyFailed {
        path: String,
        want: String,
        got: String,
        dir: PathBuf,
    },
    /// Git plumbing.
    #[error(transparent)]
    Git(#[from] GitError),
    /// Local file I/O.
    #[error(transparent)]
    Io(#[from] IoError),
}

impl Refusal for StreamError {
    fn name(&self) -> &'static str {
        use StreamError::*;
        match self {
            NameInvalid { .. } => "stream-name-invalid",
            Exists { .. } => "stream-exists",
            WorktreeExists { .. } => "stream-worktree-exists",
            WorktreeLocked { .. } => "stream-worktree-locked",
            StatusTracked { .. } => "stream-status-tracked",
            StatusNotIgnored { .. } => "stream-status-not-ignored",
            Unknown { .. } => "stream-unknown",
            TornDown { .. } => "stream-torn-down",
            WorktreeMissing { .. } => "stream-worktree-missing",
            WorktreePresent { .. } => "stream-worktree-present",
            RegistryMalformed { .. } => "stream-registry-malformed",
            StatusMissing { .. } => "status-file-missing",
            StatusMalformed { .. } => "status-file-malformed",
            StatusMismatch { .. } => "status-file-mismatch",
            WaiverWithoutReason { .. } => "waiver-without-reason",
            WaiveMalformed { .. } => "waive-malformed",
            WaiveAmbiguous { .. } => "waive-ambiguous",
            ReturnPathHostile { .. } => "return-path-hostile",
            ReturnsExist { .. } => "returns-exist",
            ReturnsComplete { .. } => "returns-complete",
            SubmoduleCommitLost { .. } => "submodule-commit-lost",
            WaiveUnused { .. } => "waive-unused",
            Busy { .. } => "stream-busy",
            BaseMissing { .. } => "stream-base-missing",
            BaseNotAncestor { .. } => "stream-base-not-ancestor",
            WorktreeChanged { .. } => "stream-worktree-changed",
            ArchiveVerifyFailed { .. } => "archive-verify-failed",
            Git(e) => e.name(),
            Io(e) => e.name(),
        }
    }
}

/// A path (or a reason) as printed to a person: as-is when it holds no
/// control character and no leading/trailing space — every path saphan
/// read from git is already in [`quote`]'s text form, which never does —
/// else C-quoted by [`quote::encode`], so a hostile name cannot forge extra
/// report lines or send escape sequences to the terminal.
pub fn shown(p: &str) -> String {
    if p.chars().any(char::is_control) || p.starts_with(' ') || p.ends_with(' ') {
        quote::encode(p.as_bytes())
    } else {
        p.to_string()
    }
}

fn shown_list(v: &[String]) -> String {
    v.iter().map(|p| shown(p)).collect::<Vec<_>>().join(", ")
}

/// `<registry>/NAME.lock`: the per-stream lock file next to the entry.
pub fn lock_file(repo: &Repo, name: &str) -> PathBuf {
    registry_dir(repo).join(format!("{name}.lock"))
}

/// Take the per-stream lock without waiting: exclusive for teardown, shared
/// for the gate. The lock lives as long as the returned file.
///
/// Errors: [`StreamError::Busy`] when another process holds it.
pub fn lock(repo: &Repo, name: &str, exclusive: bool) -> Result<std::fs::File, StreamError> {
    let p = lock_file(repo, name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(io("create directory", d))?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(io("open", &p))?;
    let r = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    match r {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(StreamError::Busy {
            name: name.to_string(),
            lock: p,
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io("lock", &p)(e)),
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StreamError {
    let path = path.to_path_buf();
    move |source| {
        StreamError::Io(IoError::Io {
            action,
            path,
            source,
        })
    }
}

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Worktree present.
    Active,
    /// Returns archived, worktree removed, branch kept.
    TornDown,
}

/// One registry entry: `<git-common-dir>/saphan/streams/NAME.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// Format version (1).
    pub version: u32,
    /// The stream name.
    pub name: String,
    /// The branch, `stream/NAME`.
    pub branch: String,
    /// Absolute path of the stream's worktree.
    #[serde(with = "quote::path_serde")]
    pub worktree: PathBuf,
    /// Full SHA the stream started from.
    pub base: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// Active or torn down.
    pub state: State,
    /// The archive directory, once torn down.
    #[serde(default)]
    #[serde(with = "quote::opt_path_serde")]
    pub archive: Option<PathBuf>,
    /// RFC 3339 UTC, once torn down.
    #[serde(default)]
    pub torn_down_at: Option<String>,
}

/// The branch of stream `name`.
pub fn branch_name(name: &str) -> String {
    format!("stream/{name}")
}

/// Refuse names that are not one safe path/ref component.
pub fn check_name(name: &str) -> Result<(), StreamError> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 100 {
        Some("it is longer than 100 characters")
    } else if !name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        Some("it must start with a letter or a digit")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        Some("it holds a character other than letters, digits, `.`, `_`, `-`")
    } else if name.contains("..") || name.ends_with(".lock") || name.ends_with('.') {
        Some("git refuses `..`, a trailing `.` and a `.lock` suffix in branch names")
    } else {
        None
    };
    match why {
        Some(w) => Err(StreamError::NameInvalid {
            name: name.to_string(),
            why: w.to_string(),
        }),
        None => Ok(()),
    }
}

/// `<git-common-dir>/saphan/streams/`.
pub fn registry_dir(repo: &Repo) -> PathBuf {
    repo.state_dir().join("streams")
}

fn registry_file(repo: &Repo, name: &str) -> PathBuf {
    registry_dir(repo).join(format!("{name}.json"))
}

/// Write a registry entry atomically.
pub fn save(repo: &Repo, e: &Entry) -> Result<(), StreamError> {
    let mut text = serde_json::to_string_pretty(e).expect("entry serializes");
    text.push('\n');
    crate::fsutil::atomic_write(&registry_file(repo, &e.name), text.as_bytes())?;
    Ok(())
}

/// Open the repository at `repo_dir` and read stream `name`'s entry.
///
/// Errors: [`StreamError::NameInvalid`], [`StreamError::Unknown`],
/// [`StreamError::RegistryMalformed`], git discovery errors.
pub async fn find(repo_dir: &Path, name: &str) -> Result<(Repo, Entry), StreamError> {
    check_name(name)?;
    let repo = Repo::open(repo_dir).await?;
    let file = registry_file(&repo, name);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StreamError::Unknown {
                name: name.to_string(),
                repo: repo.top.clone(),
                registry: registry_dir(&repo),
            });
        }
        Err(e) => return Err(io("read", &file)(e)),
    };
    let entry: Entry = serde_json::from_str(&text).map_err(|e| StreamError::RegistryMalformed {
        file: file.clone(),
        detail: e.to_string(),
    })?;
    if entry.name != name {
        return Err(StreamError::RegistryMalformed {
            file,
            detail: format!("it names stream `{}`", entry.name),
        });
    }
    Ok((repo, entry))
}

/// Find an active stream and check git still has its worktree on its branch.
/// Returns the canonical worktree path too.
pub async fn find_active(
    repo_dir: &Path,
    name: &str,
) -> Result<(Repo, Entry, PathBuf), StreamError> {
    let (repo, entry) = find(repo_dir, name).await?;
    if entry.state == State::TornDown {
        return Err(StreamError::TornDown {
            name: entry.name.clone(),
            at: entry.torn_down_at.clone().unwrap_or_default(),
            archive: entry.archive.clone().unwrap_or_default(),
            branch: entry.branch.clone(),
        });
    }
    let missing = || StreamError::WorktreeMissing {
        name: entry.name.clone(),
        path: entry.worktree.clone(),
        branch: entry.branch.clone(),
    };
    let canon = std::fs::canonicalize(&entry.worktree).map_err(|_| missing())?;
    let listed = worktrees(&repo).await?;
    let want_branch = format!("refs/heads/{}", entry.branch);
    let found = listed.iter().find(|w| {
        std::fs::canonicalize(&w.path).ok().as_deref() == Some(canon.as_path())
            && w.branch.as_deref() == Some(want_branch.as_str())
    });
    if found.is_none() {
        return Err(missing());
    }
    Ok((repo, entry, canon))
}

/// Record that the worktree of stream `name` is already gone (removed by
/// hand): the entry becomes torn down with no archive, so the stream stops
/// blocking its name. Nothing is deleted; the branch is kept.
///
/// Errors: [`StreamError::WorktreePresent`] while the worktree is still a
/// worktree of the repository on its branch (teardown archives it first);
/// [`StreamError::TornDown`] when it already is.
pub async fn forget(repo_dir: &Path, name: &str) -> Result<Entry, StreamError> {
    check_name(name)?;
    match find_active(repo_dir, name).await {
        Ok((_, entry, root)) => Err(StreamError::WorktreePresent {
            name: entry.name,
            path: root,
        }),
        Err(StreamError::WorktreeMissing { .. }) => {
            let (repo, mut entry) = find(repo_dir, name).await?;
            let _lock = lock(&repo, name, true)?;
            entry.state = State::TornDown;
            entry.archive = None;
            entry.torn_down_at = Some(crate::clock::now_rfc3339_seconds());
            save(&repo, &entry)?;
            Ok(entry)
        }
        Err(e) => Err(e),
    }
}

/// One line of `git worktree list --porcelain`.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// Its top directory, as git records it.
    pub path: PathBuf,
    /// `refs/heads/…` when a branch is checked out.
    pub branch: Option<String>,
    /// `git worktree lock` was applied.
    pub locked: bool,
}

/// `git worktree list --porcelain`, main worktree first.
pub async fn worktrees(repo: &Repo) -> Result<Vec<Worktree>, StreamError> {
    let out = git::git(&repo.top, &["worktree", "list", "--porcelain", "-z"]).await?;
    let mut res: Vec<Worktree> = Vec::new();
    for field in out.stdout.split(|b| *b == 0) {
        // The path by its bytes; the other fields are ASCII keywords.
        if let Some(p) = field.strip_prefix(b"worktree ") {
            use std::os::unix::ffi::OsStrExt;
            res.push(Worktree {
                path: PathBuf::from(std::ffi::OsStr::from_bytes(p)),
                branch: None,
                locked: false,
            });
        } else if let Some(last) = res.last_mut() {
            let f = String::from_utf8_lossy(field);
            if let Some(b) = f.strip_prefix("branch ") {
                last.branch = Some(b.to_string());
            } else if f == "locked" || f.starts_with("locked ") {
                last.locked = true;
            }
        }
    }
    Ok(res)
}

/// What `stream start` needs.
#[derive(Debug, Clone)]
pub struct StartSettings {
    /// Any directory inside the repository.
    pub repo: PathBuf,
    /// The stream name.
    pub name: String,
    /// Revision to start from (default `HEAD`).
    pub base: Option<String>,
    /// Worktree directory (default `<main-worktree-parent>/<main-worktree-name>.streams/NAME`).
    pub worktree: Option<PathBuf>,
}

/// Create branch `stream/NAME` at the base, its worktree, the gitignored
/// status file, and the registry entry.
///
/// Nothing is left half-made: if a step after `git worktree add` fails, the
/// worktree and the branch are removed again.
///
/// Errors: [`StreamError::NameInvalid`], [`StreamError::Exists`],
/// [`StreamError::WorktreeExists`], [`StreamError::StatusTracked`],
/// [`StreamError::StatusNotIgnored`], git and I/O errors.
pub async fn start(s: &StartSettings) -> Result<Entry, StreamError> {
    check_name(&s.name)?;
    let repo = Repo::open(&s.repo).await?;
    let base = repo.resolve(s.base.as_deref().unwrap_or("HEAD")).await?;
    let branch = branch_name(&s.name);
    if registry_file(&repo, &s.name).exists() {
        return Err(StreamError::Exists {
            name: s.name.clone(),
            what: format!("registered in {}", registry_file(&repo, &s.name).display()),
        });
    }
    if repo
        .read_ref(&format!("refs/heads/{branch}"))
        .await?
        .is_some()
    {
        return Err(StreamError::Exists {
            name: s.name.clone(),
            what: format!("branch {branch} exists"),
        });
    }
    let tracked = git::git(&repo.top, &["ls-tree", "--name-only", &base, STATUS_DIR])
        .await?
        .stdout_str();
    if !tracked.is_empty() {
        return Err(StreamError::StatusTracked {
            path: tracked,
            base,
        });
    }
    let worktree = match &s.worktree {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => std::env::current_dir()
            .map_err(io("read the current directory", Path::new(".")))?
            .join(p),
        None => {
            let main = worktrees(&repo)
                .await?
                .into_iter()
                .next()
                .map(|w| w.path)
                .unwrap_or_else(|| repo.top.clone());
            let parent = main.parent().unwrap_or(Path::new("/")).to_path_buf();
            // The repository's directory name by its bytes, plus `.streams`.
            let mut dir_name = main
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_else(|| "repo".into());
            dir_name.push(".streams");
            parent.join(dir_name).join(&s.name)
        }
    };
    if std::fs::symlink_metadata(&worktree).is_ok() {
        return Err(StreamError::WorktreeExists { path: worktree });
    }
    if let Some(parent) = worktree.parent() {
        std::fs::create_dir_all(parent).map_err(io("create directory", parent))?;
    }
    let wt = worktree.as_os_str();
    git::git_os(
        &repo.top,
        &[
            "worktree".as_ref(),
            "add".as_ref(),
            "--quiet".as_ref(),
            "-b".as_ref(),
            branch.as_ref(),
            wt,
            base.as_ref(),
        ],
    )
    .await?;
    let entry = Entry {
        version: 1,
        name: s.name.clone(),
        branch: branch.clone(),
        worktree: std::fs::canonicalize(&worktree).unwrap_or(worktree.clone()),
        base: base.clone(),
        started_at: crate::clock::now_rfc3339_seconds(),
        state: State::Active,
        archive: None,
        torn_down_at: None,
    };
    let finish = async {
        crate::fsutil::atomic_write(&worktree.join(STATUS_GITIGNORE), b"*\n")?;
        crate::fsutil::atomic_write(
            &worktree.join(STATUS_FILE),
            status::render_initial(&s.name, &base).as_bytes(),
        )?;
        let ignored =
            crate::exec::run(git::git_cmd(&worktree).args(["check-ignore", "-q", STATUS_FILE]))
                .await
                .map_err(GitError::Spawn)?;
        if !ignored.status.success() {
            return Err(StreamError::StatusNotIgnored {
                file: worktree.join(STATUS_FILE),
                worktree: worktree.clone(),
            });
        }
        save(&repo, &entry)
    };
    if let Err(e) = finish.await {
        let _ = git::git_os(
            &repo.top,
            &[
                "worktree".as_ref(),
                "remove".as_ref(),
                "--force".as_ref(),
                wt,
            ],
        )
        .await;
        let _ = git::git(&repo.top, &["branch", "-D", &branch]).await;
        return Err(e);
    }
    Ok(entry)
}

/// What `stream status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct StatusView {
    /// The registry entry.
    #[serde(flatten)]
    pub entry: Entry,
    /// The branch's current commit (`None` if the branch is gone).
    pub head: Option<String>,
    /// `<worktree>/.saphan/status` (active streams).
    #[serde(with = "quote::opt_path_serde")]
    pub status_file: Option<PathBuf>,
    /// Whether the status file has a `- return:` field (active streams).
    pub return_field: Option<bool>,
    /// Declared returns, normalized (active streams).
    pub returns: Vec<String>,
    /// Waivers in the status file (active streams).
    pub waivers: Vec<status::Waiver>,
}

/// `saphan stream status NAME`: the registry entry and, while the stream is
/// active, its checked manifest.
pub async fn show(repo_dir: &Path, name: &str) -> Result<StatusView, StreamError> {
    let (repo, entry) = find(repo_dir, name).await?;
    let head = repo
        .read_ref(&format!("refs/heads/{}", entry.branch))
        .await?;
    let mut v = StatusView {
        entry: entry.clone(),
        head,
        status_file: None,
        return_field: None,
        returns: Vec::new(),
        waivers: Vec::new(),
    };
    if entry.state == State::Active {
        let (_, entry, root) = find_active(repo_dir, name).await?;
        let m = gate::manifest(&root, &entry, &[])?;
        v.status_file = Some(root.join(STATUS_FILE));
        v.return_field = Some(m.returns.is_some());
        v.returns = m.returns.unwrap_or_default();
        v.waivers = m.waivers;
    }
    Ok(v)
}

impl StatusView {
    /// The report a person reads.
    pub fn render(&self) -> String {
        let e = &self.entry;
        let state = match e.state {
            State::Active => "active",
            State::TornDown => "torn down",
        };
        let mut s = format!("stream {} ({state})\n", e.name);
        s += &format!(
            "  branch    {} at {}\n",
            e.branch,
            self.head.as_deref().unwrap_or("(branch missing)")
        );
        s += &format!("  base      {}\n  started   {}\n", e.base, e.started_at);
        match e.state {
            State::Active => {
                s += &format!("  worktree  {}\n", e.worktree.display());
                if let Some(f) = &self.status_file {
                    s += &format!("  status    {}\n", f.display());
                }
                if self.return_field == Some(false) {
                    s += "  returns   no `- return:` field (nothing declared)\n";
                } else {
                    s += &format!("  returns   {} declared\n", self.returns.len());
                    for p in &self.returns {
                        s += &format!("    {}\n", shown(p));
                    }
                }
                for w in &self.waivers {
                    s += &format!("  waived    {} — {}\n", shown(&w.path), shown(&w.reason));
                }
            }
            State::TornDown => {
                s += &format!(
                    "  torn down {}\n  archive   {}\n",
                    e.torn_down_at.as_deref().unwrap_or("?"),
                    e.archive.as_deref().unwrap_or(Path::new("?")).display()
                );
            }
        }
        s
    }
}
