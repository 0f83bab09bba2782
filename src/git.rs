//! Git plumbing through the `git` program: repository discovery, SHA
//! resolution, submodules and refs. The scratch worktrees built on it are
//! `crate::worktree` (above this module: it names nothing there).
//!
//! Nothing here re-implements git; every call is a [`crate::exec`] run with a
//! budget ([`GIT_TIMEOUT`]).

use crate::error::Refusal;
use crate::exec::{self, Cmd, Output};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Budget for one git plumbing call (not for the suite).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Errors from git plumbing.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The path is not inside a git repository.
    #[error("{path} is not a git repository ({detail}) — pass --repo with a repository's path")]
    NotARepo { path: PathBuf, detail: String },
    /// The path is a bare repository: nothing to check out from.
    #[error(
        "{path} is a bare repository — saphan measures a repository with a working tree; pass the path of a clone"
    )]
    Bare { path: PathBuf },
    /// `--trunk` named something that is not a branch.
    #[error(
        "--trunk {rev} is not a local or remote-tracking branch — name the trunk branch, e.g. --trunk main or --trunk origin/main (tags, HEAD and SHAs are refused)"
    )]
    NotABranch { rev: String },
    /// A revision did not resolve to a commit.
    #[error(
        "{rev} does not name a commit in {repo} — check the revision with `git -C {repo} rev-parse {rev}`"
    )]
    BadRevision { repo: PathBuf, rev: String },
    /// A git command failed.
    #[error("`{cmd}` failed: {stderr} — run it by hand to see why")]
    Failed { cmd: String, stderr: String },
    /// git could not be started: not installed, or — EMFILE / ENFILE —
    /// out of file descriptors ([`crate::exec::out_of_descriptors`]).
    #[error("could not start git: {} — {}", .0, spawn_remedy(.0))]
    Spawn(#[source] std::io::Error),
    /// A process of an earlier, killed attempt still runs at the scratch path.
    #[error(
        "process(es) {pids:?} of an earlier certify attempt still run in {path} and survived SIGKILL — stop them (`kill -9 {pids:?}`), then re-run; nothing was measured"
    )]
    LeftoverAlive { pids: Vec<i32>, path: PathBuf },
    /// The stable scratch path is a worktree someone else registered and
    /// locked (`src/remote/heal.sh`): saphan removes only what it made.
    #[error(
        "{path} is a locked git worktree saphan did not create — nothing there was touched; if it is no longer needed, `git worktree unlock {path}` and `git worktree remove {path}`, or move it elsewhere (`git worktree move`), then re-run"
    )]
    ScratchForeign { path: PathBuf },
}

/// What to do when git could not be started: a spawn that ran out of
/// file descriptors says which limit; anything else is a missing git.
fn spawn_remedy(e: &std::io::Error) -> &'static str {
    crate::exec::out_of_descriptors(e).unwrap_or("install git")
}

impl GitError {
    /// The first line of what happened (git's hints on the lines after it
    /// are left out), for a note or a reason in a line of its own.
    pub fn first_line(&self) -> String {
        let all = self.to_string();
        all.lines().next().unwrap_or("git failed").to_string()
    }
}

impl Refusal for GitError {
    fn name(&self) -> &'static str {
        match self {
            GitError::NotARepo { .. } => "not-a-repository",
            GitError::Bare { .. } => "bare-repository",
            GitError::NotABranch { .. } => "trunk-not-a-branch",
            GitError::BadRevision { .. } => "bad-revision",
            GitError::Failed { .. } => "git-failed",
            GitError::Spawn(e) => match crate::exec::out_of_descriptors(e) {
                Some(_) => "descriptors-exhausted",
                None => "git-absent",
            },
            GitError::LeftoverAlive { .. } => "scratch-leftover-alive",
            GitError::ScratchForeign { .. } => "scratch-path-foreign",
        }
    }
}

/// A repository as seen from one of its working trees.
#[derive(Debug, Clone)]
pub struct Repo {
    /// Top of the working tree given by the operator.
    pub top: PathBuf,
    /// `git rev-parse --git-common-dir`, absolute: shared by every worktree.
    pub common_dir: PathBuf,
}

/// Run `git -C dir args…` with the plumbing budget; non-zero exit is an error.
pub async fn git(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    git_os(dir, &args).await
}

/// [`git`] with arguments that need not be UTF-8 (paths, by their bytes).
pub async fn git_os(dir: &Path, args: &[&std::ffi::OsStr]) -> Result<Output, GitError> {
    checked(git_cmd(dir).args(args)).await
}

/// `git -C dir` with prompts off, [`harden`]ed, and the plumbing budget
/// (git's repository-local variables are dropped by [`exec::run`] for every
/// child; the hardening's are set again after that).
pub fn git_cmd(dir: &Path) -> Cmd {
    harden(
        Cmd::new("git")
            .arg("-C")
            .arg(dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .timeout(GIT_TIMEOUT),
    )
}

/// The configuration every git process saphan starts runs with, whatever
/// the repository's (or a suite's) configuration says: `(key, value)`.
///
/// - `core.hooksPath=/dev/null`: no hook runs (`post-checkout` in
///   `git worktree add` and a submodule's checkout, `reference-transaction`
///   in `update-ref` …): git looks for `/dev/null/<hook>`, which cannot
///   exist. git 2.9 and later.
/// - `core.fsmonitor=false`: no fsmonitor hook or daemon answers for
///   `git status` (a suite could name a program there that says "clean").
/// - `core.sparseCheckout=false`: `git worktree add` (2.36+) copies the
///   current worktree's sparse patterns into the new one; a checkout saphan
///   makes is always whole.
/// - `core.untrackedCache=false`: the untracked files of a status are read
///   from the directory, never from a cache in the index.
pub const GIT_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.sparseCheckout", "false"),
    ("core.untrackedCache", "false"),
];

/// Where [`harden`] points `GIT_GRAFT_FILE`: a path below `/dev/null`
/// cannot exist (ENOTDIR), so git reads no graft file and says nothing
/// (git warns on a graft file it can open, `/dev/null` included, and
/// keeps quiet on ENOENT and ENOTDIR).
pub const NO_GRAFT_FILE: &str = "/dev/null/saphan-no-grafts";

/// The environment of [`harden`]: `(name, value)`, in order. The one rule
/// for every git saphan starts — here through [`git_cmd`], on any machine
/// through the scripts of [`crate::remote`] (whose [`crate::remote::sh`]
/// sets the same variables), and in a scratch tree's drop.
///
/// - [`GIT_CONFIG`] twice: as `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/
///   `GIT_CONFIG_VALUE_<n>` (git 2.31+, documented in git-config(1)) and as
///   `GIT_CONFIG_PARAMETERS` (the variable `git -c` has used to hand its
///   settings to git's own child processes since 1.7.2; a git older than
///   2.31 on a fleet machine reads only this one). Both are the command
///   line's scope: above the repository's config, its includes and
///   `config.worktree`. A git that reads both sets each key twice to the
///   same value.
/// - `GIT_NO_REPLACE_OBJECTS=1`: `refs/replace/*` is ignored, so a
///   `git replace` (of a blob, or `--graft` of a commit) changes neither a
///   checkout nor an ancestry answer.
/// - `GIT_GRAFT_FILE=`[`NO_GRAFT_FILE`]: `info/grafts` is ignored too
///   (`GIT_NO_REPLACE_OBJECTS` does not cover it).
pub fn hardening_env() -> &'static [(String, String)] {
    static ENV: std::sync::LazyLock<Vec<(String, String)>> = std::sync::LazyLock::new(|| {
        let mut env = vec![("GIT_CONFIG_COUNT".to_string(), GIT_CONFIG.len().to_string())];
        let mut params = Vec::new();
        for (i, (k, v)) in GIT_CONFIG.iter().enumerate() {
            env.push((format!("GIT_CONFIG_KEY_{i}"), k.to_string()));
            env.push((format!("GIT_CONFIG_VALUE_{i}"), v.to_string()));
            // git's own shape: each `key=value` in single quotes (none of
            // these holds a quote), separated by spaces.
            params.push(format!("'{k}={v}'"));
        }
        env.push(("GIT_CONFIG_PARAMETERS".into(), params.join(" ")));
        env.push(("GIT_NO_REPLACE_OBJECTS".into(), "1".into()));
        env.push(("GIT_GRAFT_FILE".into(), NO_GRAFT_FILE.into()));
        env
    });
    &ENV
}

/// `cmd` with [`hardening_env`] set: every git process saphan starts goes
/// through this ([`git_cmd`], [`crate::remote::sh`]).
pub fn harden(mut cmd: Cmd) -> Cmd {
    for (k, v) in hardening_env() {
        cmd = cmd.env(k, v);
    }
    cmd
}

/// Run a git command; a non-zero exit is [`GitError::Failed`].
pub async fn checked(cmd: Cmd) -> Result<Output, GitError> {
    let shown = cmd.display();
    let out = exec::run(cmd).await.map_err(GitError::Spawn)?;
    if !out.status.success() {
        return Err(GitError::Failed {
            cmd: shown,
            stderr: out.stderr_str(),
        });
    }
    Ok(out)
}

/// Run `git -C dir args…` with extra environment (`GIT_AUTHOR_*` …) and the
/// plumbing budget, and return its output whatever its exit status: for
/// commands whose non-zero exit is an answer (`merge-tree` reports a
/// conflict with 1). Errors only when git cannot be started.
pub async fn git_status_env(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Output, GitError> {
    let mut cmd = git_cmd(dir).args(args);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    exec::run(cmd).await.map_err(GitError::Spawn)
}

/// Whether `b` is a full object id as git prints it: 40 (SHA-1) or 64
/// (SHA-256) lowercase hex digits.
fn is_object_id(b: &[u8]) -> bool {
    matches!(b.len(), 40 | 64) && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// git's output as lines, its one trailing newline cut (a path holding a
/// newline makes more lines than were asked for: callers check the count).
fn lines(stdout: &[u8]) -> Vec<&[u8]> {
    stdout
        .strip_suffix(b"\n")
        .unwrap_or(stdout)
        .split(|b| *b == b'\n')
        .collect()
}

/// The one path git printed on a line of its own: exactly one trailing
/// newline is cut, every other byte (newlines, non-UTF-8) is kept.
pub fn one_path(stdout: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let b = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

/// The environment variable that marks a scratch tree's processes
/// (defined by [`crate::exec`], which contains them; re-exported here
/// beside the git calls that create and remove the trees).
pub use crate::exec::SCRATCH_MARKER;

impl Repo {
    /// Discover the repository containing `path`.
    ///
    /// Errors: [`GitError::NotARepo`].
    pub async fn open(path: &Path) -> Result<Repo, GitError> {
        let not = |detail: String| GitError::NotARepo {
            path: path.to_path_buf(),
            detail,
        };
        if !path.is_dir() {
            return Err(not("no such directory".into()));
        }
        // One value per call, its one trailing newline cut: a path that
        // holds a newline (or bytes that are not UTF-8) is read whole, never
        // split into two paths.
        let ask = |flags: &'static [&'static str]| async move {
            let mut args = vec!["rev-parse", "--path-format=absolute"];
            args.extend_from_slice(flags);
            match git(path, &args).await {
                // Outside a work tree: a bare repository (or a git dir)
                // when git says it is inside one — asked of git, never
                // read from the words of its refusal.
                Err(GitError::Failed { stderr, .. }) => {
                    let in_git_dir = git(path, &["rev-parse", "--is-inside-git-dir"])
                        .await
                        .is_ok_and(|o| o.stdout_str() == "true");
                    Err(if in_git_dir {
                        GitError::Bare {
                            path: path.to_path_buf(),
                        }
                    } else {
                        not(stderr)
                    })
                }
                r => r,
            }
        };
        // Both in one call when its output can only be read one way (two
        // lines); a path holding a newline is asked for alone.
        let both = ask(&["--show-toplevel", "--git-common-dir"]).await?.stdout;
        let (top, common_dir) = match lines(&both)[..] {
            [t, c] => (one_path(t), one_path(c)),
            _ => (
                one_path(&ask(&["--show-toplevel"]).await?.stdout),
                one_path(&ask(&["--git-common-dir"]).await?.stdout),
            ),
        };
        if top.as_os_str().is_empty() || common_dir.as_os_str().is_empty() {
            return Err(not("git printed no toplevel (a bare repository?)".into()));
        }
        Ok(Repo { top, common_dir })
    }

    /// [`Repo::open`] and [`Repo::resolve`] of `rev` in one `git rev-parse`
    /// (the toplevel, the common dir and `rev^{commit}`, three lines). When
    /// that call cannot be read one way — a bad revision, not a repository,
    /// a path holding a newline — each is asked alone, so every refusal is
    /// the one [`Repo::open`] or [`Repo::resolve`] gives.
    ///
    /// Errors: those of [`Repo::open`]; the revision's own error (e.g.
    /// [`GitError::BadRevision`]) is the inner result, so a caller can
    /// report what it checks in between (the config) first.
    pub async fn open_resolving(
        path: &Path,
        rev: &str,
    ) -> Result<(Repo, Result<String, GitError>), GitError> {
        let spec = format!("{rev}^{{commit}}");
        if path.is_dir()
            && let Ok(o) = git(
                path,
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--git-common-dir",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &spec,
                ],
            )
            .await
            && let [t, c, sha] = lines(&o.stdout)[..]
            && !t.is_empty()
            && !c.is_empty()
            && is_object_id(sha)
        {
            let repo = Repo {
                top: one_path(t),
                common_dir: one_path(c),
            };
            return Ok((repo, Ok(String::from_utf8_lossy(sha).into_owned())));
        }
        let repo = Repo::open(path).await?;
        let sha = repo.resolve(rev).await;
        Ok((repo, sha))
    }

    /// Resolve `rev` to a full commit SHA.
    ///
    /// Errors: [`GitError::BadRevision`].
    pub async fn resolve(&self, rev: &str) -> Result<String, GitError> {
        let spec = format!("{rev}^{{commit}}");
        match git(
            &self.top,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ],
        )
        .await
        {
            Ok(o) => Ok(o.stdout_str()),
            Err(GitError::Failed { .. }) => Err(GitError::BadRevision {
                repo: self.top.clone(),
                rev: rev.to_string(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Every file path (blobs and links) in the tree of commit `sha`.
    ///
    /// One `git ls-tree -r -z --full-tree` listing per commit in this
    /// process, shared: a listing already under way ([`Repo::list_ahead`])
    /// is waited for, not started again, and [`Repo::submodules`] of the
    /// same commit reads its gitlinks from it.
    pub async fn tree_files(&self, sha: &str) -> Result<Arc<[String]>, GitError> {
        Ok(self.listing(sha).await?.files.clone())
    }

    /// Start listing the tree of `sha` in the background, for a
    /// [`Repo::tree_files`] or [`Repo::submodules`] of it that is sure to
    /// come (a certification's checkout reads its gitlinks), so the
    /// listing runs beside what comes first. A failure is not reported
    /// here: the caller that needs the listing runs it again and gets the
    /// error.
    pub fn list_ahead(&self, sha: &str) {
        let (repo, sha) = (self.clone(), sha.to_string());
        tokio::spawn(async move {
            let _ = repo.listing(&sha).await;
        });
    }

    /// The listing of `sha`'s tree: from this process's memo (a commit's
    /// tree never changes, so it is never stale), else one `git ls-tree`.
    async fn listing(&self, sha: &str) -> Result<Arc<Listing>, GitError> {
        let cell = {
            let mut memo = LISTINGS.lock().unwrap_or_else(|e| e.into_inner());
            let key = (self.top.clone(), sha.to_string());
            match memo.iter().find(|(k, _)| *k == key) {
                Some((_, c)) => c.clone(),
                None => {
                    if memo.len() >= 8 {
                        memo.remove(0);
                    }
                    let c = Arc::new(tokio::sync::OnceCell::new());
                    memo.push((key, c.clone()));
                    c
                }
            }
        };
        let listed = cell
            .get_or_try_init(|| async {
                let out = git(&self.top, &["ls-tree", "-r", "-z", "--full-tree", sha]).await?;
                Ok::<_, GitError>(Arc::new(Listing::parse(&out.stdout)))
            })
            .await?;
        Ok(listed.clone())
    }

    /// `<common-dir>/saphan`: repository-scoped saphan state.
    pub fn state_dir(&self) -> PathBuf {
        self.common_dir.join("saphan")
    }

    /// Read a ref; `None` when it does not exist.
    pub async fn read_ref(&self, name: &str) -> Result<Option<String>, GitError> {
        match git(&self.top, &["rev-parse", "--verify", "--quiet", name]).await {
            Ok(o) => Ok(Some(o.stdout_str())),
            Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read several refs in one `git for-each-ref`: for each of `names`
    /// (full names, `refs/…`), what it points at, or `None` when it does
    /// not exist. A symbolic ref reads as its target's object, with the
    /// ref it names in [`RefValue::symref`].
    ///
    /// Ref names cannot hold the glob characters `*`, `?` or `[`
    /// (git-check-ref-format(1)), so each name is matched literally; a
    /// pattern also lists the refs below it (`refs/heads/main/x`), which
    /// are not asked for and are left out. A name outside `refs/` (a short
    /// name in a hand-edited file) is read alone by [`Repo::read_ref`], as
    /// git would resolve it.
    pub async fn read_refs<const N: usize>(
        &self,
        names: [&str; N],
    ) -> Result<[Option<RefValue>; N], GitError> {
        let mut found = [const { None }; N];
        let full: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| n.starts_with("refs/"))
            .collect();
        for (i, n) in names.iter().enumerate() {
            if !n.starts_with("refs/") {
                found[i] = self
                    .read_ref(n)
                    .await?
                    .map(|oid| RefValue { oid, symref: None });
            }
        }
        if full.is_empty() {
            return Ok(found);
        }
        let mut args = vec![
            "for-each-ref",
            "--format=%(objectname) %(symref) %(refname)",
        ];
        args.extend_from_slice(&full);
        let out = git(&self.top, &args).await?;
        for line in out.stdout_str().lines() {
            let mut f = line.splitn(3, ' ');
            let (Some(oid), Some(symref), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if let Some(i) = names.iter().position(|n| *n == name) {
                found[i] = Some(RefValue {
                    oid: oid.to_string(),
                    symref: (!symref.is_empty()).then(|| symref.to_string()),
                });
            }
        }
        Ok(found)
    }

    /// Point `name` at `sha` with a reflog message.
    pub async fn update_ref(&self, name: &str, sha: &str, msg: &str) -> Result<(), GitError> {
        git(&self.top, &["update-ref", "-m", msg, name, sha]).await?;
        Ok(())
    }
}

/// What a ref points at ([`Repo::read_refs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefValue {
    /// The object (a symbolic ref: its target's).
    pub oid: String,
    /// The ref a symbolic ref names; `None` for a plain ref.
    pub symref: Option<String>,
}

/// A submodule of a commit: its gitlink and where its objects are found
/// locally (no network is ever used).
#[derive(Debug, Clone)]
pub struct Submodule {
    /// The path in the superproject's tree.
    pub path: String,
    /// The gitlink commit.
    pub commit: String,
    /// A local repository holding that commit: the superproject's own
    /// `<common-dir>/modules/<name>` store, or the submodule checked out in
    /// the operator's working tree. `None`: no local repository has it.
    pub store: Option<Repo>,
}

/// One commit's tree, as `git ls-tree -r -z --full-tree` lists it.
#[derive(Debug)]
struct Listing {
    /// Every path (blobs, links and gitlinks).
    files: Arc<[String]>,
    /// The gitlinks: (path, commit).
    links: Vec<(String, String)>,
}

/// The listings of the last few commits listed (or being listed) in this
/// process, by (repository top, SHA); a listing under way is one cell that
/// every caller waits on.
#[allow(clippy::type_complexity)]
static LISTINGS: std::sync::Mutex<
    Vec<((PathBuf, String), Arc<tokio::sync::OnceCell<Arc<Listing>>>)>,
> = std::sync::Mutex::new(Vec::new());

impl Listing {
    /// `git ls-tree -r -z --full-tree` output: NUL-terminated entries
    /// `<mode> <type> <object>\t<path>`; a gitlink is mode 160000, type
    /// `commit`, its object the submodule's commit.
    fn parse(out: &[u8]) -> Listing {
        let (mut files, mut links) = (Vec::new(), Vec::new());
        for entry in out.split(|b| *b == 0) {
            let Some(tab) = entry.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let path = String::from_utf8_lossy(&entry[tab + 1..]).into_owned();
            let mut meta = entry[..tab].split(|b| *b == b' ');
            if meta.next() == Some(b"160000")
                && meta.next() == Some(b"commit")
                && let Some(c) = meta.next()
            {
                links.push((path.clone(), String::from_utf8_lossy(c).into_owned()));
            }
            files.push(path);
        }
        Listing {
            files: files.into(),
            links,
        }
    }
}

impl Repo {
    /// The gitlinks of `sha` (recursively only one level: nested submodules
    /// are not followed), each with a local store that holds its commit.
    ///
    /// Errors: git failures reading the tree.
    pub async fn submodules(&self, sha: &str) -> Result<Vec<Submodule>, GitError> {
        let listed = self.listing(sha).await?;
        let links = &listed.links;
        if links.is_empty() {
            return Ok(Vec::new());
        }
        // Names from the commit's .gitmodules (path -> name); the name is the
        // directory under <common-dir>/modules.
        let mut names: Vec<(String, String)> = Vec::new();
        let spec = format!("{sha}:.gitmodules");
        if let Ok(o) = git(
            &self.top,
            &[
                "config",
                "--blob",
                &spec,
                "--get-regexp",
                r"^submodule\..*\.path$",
            ],
        )
        .await
        {
            for l in o.stdout_str().lines() {
                if let Some((k, p)) = l.split_once(' ')
                    && let Some(n) = k
                        .strip_prefix("submodule.")
                        .and_then(|k| k.strip_suffix(".path"))
                {
                    names.push((p.to_string(), n.to_string()));
                }
            }
        }
        let mut subs = Vec::new();
        for (path, commit) in links {
            let name = names
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, n)| n.clone())
                .unwrap_or_else(|| path.clone());
            let mut candidates = vec![
                self.common_dir.join("modules").join(&name),
                self.top.join(path),
            ];
            candidates.dedup();
            let mut store = None;
            for c in candidates {
                if !c.exists() {
                    continue;
                }
                let check = format!("{commit}^{{commit}}");
                let ok = crate::exec::run(
                    harden(crate::exec::Cmd::new("git"))
                        .arg("--git-dir")
                        .arg(if c.join(".git").exists() {
                            c.join(".git")
                        } else {
                            c.clone()
                        })
                        .args(["cat-file", "-e", &check])
                        .timeout(GIT_TIMEOUT),
                )
                .await
                .is_ok_and(|o| o.status.success());
                if ok {
                    let git_dir = if c.join(".git").exists() {
                        c.join(".git")
                    } else {
                        c.clone()
                    };
                    store = Some(Repo {
                        top: c.clone(),
                        common_dir: git_dir,
                    });
                    break;
                }
            }
            subs.push(Submodule {
                path: path.clone(),
                commit: commit.clone(),
                store,
            });
        }
        Ok(subs)
    }
}

#[cfg(test)]
mod listing_tests {
    #[test]
    fn a_listing_keeps_every_path_and_the_gitlinks_apart() {
        let out = b"100644 blob 1111111111111111111111111111111111111111\ta b.txt\0\
160000 commit 2222222222222222222222222222222222222222\tvendor/sub\0\
120000 blob 3333333333333333333333333333333333333333\tlink\0";
        let l = super::Listing::parse(out);
        assert_eq!(&*l.files, ["a b.txt", "vendor/sub", "link"]);
        assert_eq!(
            l.links,
            [(
                "vendor/sub".to_string(),
                "2222222222222222222222222222222222222222".to_string()
            )]
        );
    }
}
