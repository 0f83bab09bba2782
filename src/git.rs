//! Git plumbing through the `git` program: repository discovery, SHA
//! resolution, scratch detached worktrees and refs.
//!
//! Nothing here re-implements git; every call is a [`crate::exec`] run with a
//! budget ([`GIT_TIMEOUT`]).

use crate::error::Refusal;
use crate::exec::{self, Cmd, Output};
use std::path::{Path, PathBuf};
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
    /// git could not be started.
    #[error("could not start git: {0} — install git")]
    Spawn(#[source] std::io::Error),
    /// A process of an earlier, killed attempt still runs at the scratch path.
    #[error(
        "process(es) {pids:?} of an earlier certify attempt still run in {path} and survived SIGKILL — stop them (`kill -9 {pids:?}`), then re-run; nothing was measured"
    )]
    LeftoverAlive { pids: Vec<i32>, path: PathBuf },
}

impl Refusal for GitError {
    fn name(&self) -> &'static str {
        match self {
            GitError::NotARepo { .. } => "not-a-repository",
            GitError::Bare { .. } => "bare-repository",
            GitError::NotABranch { .. } => "trunk-not-a-branch",
            GitError::BadRevision { .. } => "bad-revision",
            GitError::Failed { .. } => "git-failed",
            GitError::Spawn(_) => "git-absent",
            GitError::LeftoverAlive { .. } => "scratch-leftover-alive",
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

/// `git -C dir` with prompts off and the plumbing budget.
fn git_cmd(dir: &Path) -> Cmd {
    Cmd::new("git")
        .arg("-C")
        .arg(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .timeout(GIT_TIMEOUT)
}

/// Run a git command; a non-zero exit is [`GitError::Failed`].
async fn checked(cmd: Cmd) -> Result<Output, GitError> {
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

/// The one path git printed on a line of its own: exactly one trailing
/// newline is cut, every other byte (newlines, non-UTF-8) is kept.
pub fn one_path(stdout: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let b = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

/// The environment variable every process saphan starts for a stable
/// scratch path carries: `SAPHAN_SCRATCH=<the scratch tree's path>` (the
/// suite, and the `git worktree` calls that create and remove the tree).
/// A process still carrying it when the next attempt starts is a leftover
/// of an earlier attempt (saphan was killed) and is killed before the tree
/// is made again — see [`Repo::scratch_worktree_at`].
pub const SCRATCH_MARKER: &str = "SAPHAN_SCRATCH";

/// How long a leftover process may take to die after SIGKILL.
pub const LEFTOVER_BOUND: Duration = Duration::from_secs(10);

/// Every process of this user, other than saphan itself, whose environment
/// holds `SAPHAN_SCRATCH=<path>` exactly (read from `/proc/<pid>/environ`).
pub fn scratch_leftovers(path: &Path) -> Vec<i32> {
    use std::os::unix::ffi::OsStrExt;
    let mut want = format!("{SCRATCH_MARKER}=").into_bytes();
    want.extend_from_slice(path.as_os_str().as_bytes());
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || !alive(pid) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == want.as_slice()) {
            out.push(pid);
        }
    }
    out
}

/// A process that exists and is not a zombie (a zombie writes nothing).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last `)`.
        Ok(st) => st
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Kill (SIGKILL) every leftover process of an earlier attempt at the
/// stable scratch `path`, and its process group, then wait up to
/// [`LEFTOVER_BOUND`] until none is alive. Only for callers that hold the
/// repository lock: under it no attempt of this repository is running, so
/// whatever still carries the marker belongs to a dead one.
///
/// Errors: [`GitError::LeftoverAlive`] when one survives the bound.
pub async fn kill_scratch_leftovers(path: &Path) -> Result<(), GitError> {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::{Pid, getpgid};
    let deadline = std::time::Instant::now() + LEFTOVER_BOUND;
    let own_group = getpgid(None).ok();
    loop {
        let left = scratch_leftovers(path);
        if left.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(GitError::LeftoverAlive {
                pids: left,
                path: path.to_path_buf(),
            });
        }
        for pid in left {
            tracing::warn!(pid, path = %path.display(), "killing a leftover of an earlier attempt");
            let p = Pid::from_raw(pid);
            if let Ok(g) = getpgid(Some(p))
                && Some(g) != own_group
            {
                let _ = killpg(g, Signal::SIGKILL);
            }
            let _ = kill(p, Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Remove exactly the worktree registrations (`<common>/worktrees/<id>/`)
/// whose `gitdir` file points at `<path>/.git` — what a `git worktree add`
/// or `remove` killed half-way leaves behind ("missing but registered",
/// "missing but locked"). Never a `git worktree prune`: the operator's own
/// missing or locked worktrees are left alone.
pub fn heal_registration(common_dir: &Path, path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let mut wants: Vec<PathBuf> = vec![path.join(".git")];
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name())
        && let Ok(real) = std::fs::canonicalize(parent)
    {
        wants.push(real.join(name).join(".git"));
    }
    let Ok(dir) = std::fs::read_dir(common_dir.join("worktrees")) else {
        return;
    };
    for e in dir.flatten() {
        let Ok(gitdir) = std::fs::read(e.path().join("gitdir")) else {
            continue;
        };
        let gd = gitdir.strip_suffix(b"\n").unwrap_or(&gitdir);
        if wants.iter().any(|w| w.as_os_str().as_bytes() == gd) {
            tracing::warn!(entry = %e.path().display(), "removing saphan's own stale scratch registration");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

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
        let ask = |flag: &'static str| async move {
            git(path, &["rev-parse", "--path-format=absolute", flag])
                .await
                .map_err(|e| match e {
                    GitError::Failed { stderr, .. }
                        if stderr.contains("must be run in a work tree") =>
                    {
                        GitError::Bare {
                            path: path.to_path_buf(),
                        }
                    }
                    GitError::Failed { stderr, .. } => not(stderr),
                    other => other,
                })
                .map(|o| one_path(&o.stdout))
        };
        let top = ask("--show-toplevel").await?;
        let common_dir = ask("--git-common-dir").await?;
        if top.as_os_str().is_empty() || common_dir.as_os_str().is_empty() {
            return Err(not("git printed no toplevel (a bare repository?)".into()));
        }
        Ok(Repo { top, common_dir })
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
    pub async fn tree_files(&self, sha: &str) -> Result<Vec<String>, GitError> {
        let out = git(&self.top, &["ls-tree", "-r", "--name-only", "-z", sha]).await?;
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect())
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

    /// Point `name` at `sha` with a reflog message.
    pub async fn update_ref(&self, name: &str, sha: &str, msg: &str) -> Result<(), GitError> {
        git(&self.top, &["update-ref", "-m", msg, name, sha]).await?;
        Ok(())
    }

    /// Create a detached worktree at `sha` under a fresh temp directory.
    /// The returned guard removes it on [`Scratch::remove`] or, as a last
    /// resort, on drop.
    pub async fn scratch_worktree(&self, sha: &str) -> Result<Scratch, GitError> {
        let parent = tempfile::Builder::new()
            .prefix("saphan-scratch-")
            .tempdir()
            .map_err(|e| GitError::Failed {
                cmd: "create a temp directory".into(),
                stderr: e.to_string(),
            })?;
        let path = parent.path().join("tree");
        self.add_scratch(path, sha, Some(parent)).await
    }

    /// Create a detached worktree at `sha` at the fixed path `path`, first
    /// removing whatever an earlier crashed run left there. Only for callers
    /// that hold the repository lock: a stable path lets build caches keyed
    /// by directory (Go's) stay warm between attempts.
    pub async fn scratch_worktree_at(&self, path: &Path, sha: &str) -> Result<Scratch, GitError> {
        // Whatever an earlier attempt left running (its suite, its `git
        // worktree add`) dies before the path is touched: nothing of a dead
        // attempt may write into this one's tree.
        kill_scratch_leftovers(path).await?;
        if path.exists() {
            let _ = self
                .scratch_git(&["worktree", "remove", "--force", "--force"], path)
                .await;
        }
        // The parent belongs to this scratch alone: clear whatever the last
        // attempt (or a suite writing to `..`) left, so nothing leaks into
        // the next attempt.
        if let Some(parent) = path.parent() {
            let _ = std::fs::remove_dir_all(parent);
            std::fs::create_dir_all(parent).map_err(|e| GitError::Failed {
                cmd: format!("create {}", parent.display()),
                stderr: e.to_string(),
            })?;
        }
        // A registration left by a killed `git worktree add/remove` would
        // refuse the add below ("missing but registered/locked"). After the
        // parent exists again, so its real path can be compared too.
        heal_registration(&self.common_dir, path);
        self.add_scratch(path.to_path_buf(), sha, None).await
    }

    /// `git -C <top> <args…> <path>` carrying the scratch marker, so a
    /// copy of it outliving a killed saphan is found by the next attempt.
    async fn scratch_git(&self, args: &[&str], path: &Path) -> Result<Output, GitError> {
        checked(
            git_cmd(&self.top)
                .args(args)
                .arg(path)
                .env(SCRATCH_MARKER, path),
        )
        .await
    }

    async fn add_scratch(
        &self,
        path: PathBuf,
        sha: &str,
        parent: Option<tempfile::TempDir>,
    ) -> Result<Scratch, GitError> {
        checked(
            git_cmd(&self.top)
                .args(["worktree", "add", "--detach", "--quiet", "--end-of-options"])
                .arg(&path)
                .arg(sha)
                .env(SCRATCH_MARKER, &path),
        )
        .await?;
        let mut scratch = Scratch {
            repo_top: self.top.clone(),
            path,
            git_dir: PathBuf::new(),
            _parent: parent,
            armed: true,
        };
        scratch.git_dir = one_path(
            &git(
                &scratch.path,
                &["rev-parse", "--path-format=absolute", "--git-dir"],
            )
            .await?
            .stdout,
        );
        Ok(scratch)
    }
}

/// A scratch detached worktree. Removed by [`Scratch::remove`]; if that was
/// never reached (panic, early return, an error while creating it) the drop
/// removes it synchronously.
#[derive(Debug)]
pub struct Scratch {
    repo_top: PathBuf,
    /// The worktree's top directory.
    pub path: PathBuf,
    /// The worktree's own git dir (`<common>/worktrees/<name>`).
    pub git_dir: PathBuf,
    _parent: Option<tempfile::TempDir>,
    armed: bool,
}

impl Scratch {
    /// Remove the worktree (forced: it is scratch) and its admin entry.
    pub async fn remove(mut self) -> Result<(), GitError> {
        let res = git_cmd(&self.repo_top)
            .args(["worktree", "remove", "--force", "--force"])
            .arg(&self.path)
            .env(SCRATCH_MARKER, &self.path);
        let res = match exec::run(res).await {
            Ok(o) if o.status.success() => Ok(()),
            _ => Err(()),
        };
        if res.is_err() {
            self.remove_by_hand();
        }
        self.armed = false;
        Ok(())
    }

    /// When `git worktree remove` could not: delete the tree and exactly this
    /// worktree's admin entry — never a repository-wide `git worktree
    /// prune`, which would also drop the operator's own moved worktrees.
    fn remove_by_hand(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
        let is_admin_entry = self
            .git_dir
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "worktrees");
        if is_admin_entry {
            let _ = std::fs::remove_dir_all(&self.git_dir);
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut git = std::process::Command::new("git");
        for k in crate::exec::GIT_LOCAL_ENV {
            git.env_remove(k);
        }
        let removed = git
            .arg("-C")
            .arg(&self.repo_top)
            .args(["worktree", "remove", "--force", "--force"])
            .arg(&self.path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !removed {
            self.remove_by_hand();
        }
    }
}
