//! Scratch detached worktrees on any machine, through [`Transport`]: the
//! local machine is simply [`Transport::Local`], and dispatch runs the very
//! same operations against its bare mirror on a remote machine.
//!
//! - [`add_at`]: a fresh detached checkout of a SHA at a *stable* path (warm
//!   directory-keyed build caches), after healing whatever an earlier
//!   attempt left there — a registration of exactly that path (missing,
//!   locked, or present) and the contents of its parent directory, which
//!   belongs to the scratch tree alone. Never a repository-wide `git
//!   worktree prune`: the operator's own worktrees are not touched.
//! - [`add_temp`]: the same under a fresh local temp directory.
//! - [`Scratch::remove`]: `git worktree remove --force --force`, falling
//!   back to deleting the tree and exactly its admin entry.
//!
//! `repo` is any path `git -C` accepts for the repository: a working tree,
//! or a bare mirror's git dir. Every git call runs with the git variables a
//! hook environment could carry (`GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_INDEX_FILE`, …) removed, and with [`GIT_TIMEOUT`].

use crate::exec::{Cmd, Output};
use crate::git::{GIT_TIMEOUT, GitError};
use crate::transport::{Transport, TransportError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a leftover process may take to die after SIGKILL (the bound
/// of `src/remote/kill-leftovers.sh`, run by [`kill_leftovers`] on every
/// machine).
pub const LEFTOVER_BOUND: Duration = Duration::from_secs(10);

/// `git -C dir args…` as a [`Cmd`]: no prompt, the plumbing budget
/// ([`crate::git::git_cmd`]; [`crate::exec::run`] drops git's
/// repository-local variables from every local child).
pub fn git_cmd<I, S>(dir: &Path, args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    crate::git::git_cmd(dir).args(args)
}

fn transport_err(cmd: &Cmd, e: TransportError) -> GitError {
    match e {
        TransportError::Spawn { source, .. } => GitError::Spawn(source),
        e => GitError::Failed {
            cmd: cmd.display(),
            stderr: e.to_string(),
        },
    }
}

/// Run `cmd` on `t`; a non-zero exit is [`GitError::Failed`].
pub async fn run_ok(t: &Transport, cmd: Cmd) -> Result<Output, GitError> {
    let shown = cmd.display();
    let out = t
        .run(cmd.clone())
        .await
        .map_err(|e| transport_err(&cmd, e))?;
    if !out.status.success() {
        return Err(GitError::Failed {
            cmd: shown,
            stderr: out.stderr_str(),
        });
    }
    Ok(out)
}

/// Heal the registration of exactly `path` in `repo` and clear the parent
/// directory (see the module docs), as one POSIX-sh script on the machine
/// (`src/remote/heal.sh`), run by [`prepare`].
const HEAL: &str = crate::remote::HEAL;

/// Kill whatever an earlier, killed attempt left running at the stable
/// `path` on the machine — every process saphan starts for it carries
/// `SAPHAN_SCRATCH=<path>` ([`crate::git::SCRATCH_MARKER`]) — and disarm the
/// remote watchdogs armed for it (`src/remote/kill-leftovers.sh`). One rule
/// for every machine: this one runs the same script through
/// [`Transport::Local`] (one `sh` and one `grep`).
const KILL_LEFTOVERS: &str = crate::remote::KILL_LEFTOVERS;

/// Kill an earlier attempt's leftovers at the stable `path` on `t`, within
/// [`LEFTOVER_BOUND`]. The search of the machine's processes
/// runs only when the path's [`attempt_marker`] is there (an earlier
/// attempt did not end cleanly); the reap of dead owners' cgroups always.
///
/// Errors: [`GitError::LeftoverAlive`] naming the survivors.
pub async fn kill_leftovers(t: &Transport, path: &Path) -> Result<(), GitError> {
    let marker = attempt_marker(path);
    let cmd = sh(
        KILL_LEFTOVERS,
        "saphan-leftovers",
        &[path, marker.as_path()],
    )
    .timeout(LEFTOVER_BOUND + GIT_TIMEOUT);
    survivors(path, &run_ok(t, cmd).await?)
}

/// The pids `kill-leftovers.sh` printed (its one line when any survived):
/// [`GitError::LeftoverAlive`] naming them, or nothing.
fn survivors(path: &Path, out: &Output) -> Result<(), GitError> {
    let pids: Vec<i32> = out
        .stdout_str()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    if pids.is_empty() {
        return Ok(());
    }
    for pid in &pids {
        tracing::warn!(pid, path = %path.display(), "a leftover of an earlier attempt survived SIGKILL");
    }
    Err(GitError::LeftoverAlive {
        pids,
        path: path.to_path_buf(),
    })
}

fn sh(script: &str, name: &str, args: &[&Path]) -> Cmd {
    crate::remote::sh(script, name, args).timeout(GIT_TIMEOUT)
}

/// Before an attempt at the stable `path`: [`kill_leftovers`], then heal
/// `path`'s registration in `repo` and recreate its (emptied) parent
/// directory on `t` (`src/remote/heal.sh`) — both in one shell
/// (`src/remote/prepare.sh`): one child here, one command on a machine.
/// Idempotent; touches no other worktree.
///
/// Errors: [`GitError::LeftoverAlive`]; [`GitError::ScratchForeign`] when
/// `path` is a worktree someone else registered and locked (nothing is
/// touched); [`GitError::Failed`] when the parent cannot be recreated or
/// `repo` is not a repository.
pub async fn prepare(t: &Transport, repo: &Path, path: &Path) -> Result<(), GitError> {
    let marker = attempt_marker(path);
    let args: [&std::ffi::OsStr; 5] = [
        KILL_LEFTOVERS.as_ref(),
        HEAL.as_ref(),
        repo.as_os_str(),
        path.as_os_str(),
        marker.as_os_str(),
    ];
    let cmd = crate::remote::sh(crate::remote::PREPARE, "saphan-prepare", args)
        .timeout(LEFTOVER_BOUND + GIT_TIMEOUT);
    let out = t
        .run(cmd.clone())
        .await
        .map_err(|e| transport_err(&cmd, e))?;
    if out.status.code() == Some(crate::remote::HEAL_EXIT_FOREIGN) {
        return Err(GitError::ScratchForeign {
            path: path.to_path_buf(),
        });
    }
    if !out.status.success() {
        return Err(GitError::Failed {
            cmd: cmd.display(),
            stderr: out.stderr_str(),
        });
    }
    survivors(path, &out)
}

/// The attempt marker of the stable scratch `path`
/// (`<base>/scratch/<key>/tree` → `<base>/scratch-live/<key>`, outside the
/// scratch directories, which [`prepare`] empties and a dispatch removes):
/// created by `heal.sh` before an attempt's first process carrying the
/// scratch marker starts, and removed by [`Scratch::remove`] when the
/// attempt ended cleanly — its commands were contained by cgroups, so
/// nothing of it can still run. While it is there, [`kill_leftovers`]
/// searches the machine's processes; when it is not, nothing was left and
/// the search is skipped.
pub fn attempt_marker(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(path);
    let key = parent
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "scratch".into());
    let scratch = parent.parent().unwrap_or(parent);
    let mut live = scratch
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "scratch".into());
    live.push("-live");
    scratch.with_file_name(live).join(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attempt_marker_lives_beside_the_scratch_directory() {
        assert_eq!(
            super::attempt_marker(std::path::Path::new("/w/saphan/scratch/k1/tree")),
            std::path::Path::new("/w/saphan/scratch-live/k1")
        );
    }
}

/// Create a detached worktree of `sha` at the stable `path` on `t`, after
/// [`prepare`] killed an earlier attempt's leftovers there and healed the
/// path. Only for callers holding the repository's lock (locally
/// `record::Lock`; on a machine, dispatch's lock): under it, whatever still
/// carries the path's marker belongs to a dead attempt.
///
/// Errors: [`GitError::LeftoverAlive`], [`GitError::Failed`] (e.g. the SHA
/// is not in `repo`).
pub async fn add_at(
    t: &Transport,
    repo: &Path,
    path: &Path,
    sha: &str,
) -> Result<Scratch, GitError> {
    add_at_with(t, repo, path, sha, None).await
}

/// [`add_at`], with the local repository `local` already open (its
/// submodule stores are then read from it instead of opening it again).
pub async fn add_at_with(
    t: &Transport,
    repo: &Path,
    path: &Path,
    sha: &str,
    local: Option<&crate::git::Repo>,
) -> Result<Scratch, GitError> {
    prepare(t, repo, path).await?;
    let mut s = add(t, repo, path.to_path_buf(), sha, None, local).await?;
    s.marker = Some(attempt_marker(path));
    Ok(s)
}

/// Create a detached worktree of `sha` under a fresh local temp directory.
pub async fn add_temp(repo: &Path, sha: &str) -> Result<Scratch, GitError> {
    add_temp_with(repo, sha, None).await
}

/// [`add_temp`], with the repository `local` already open.
pub async fn add_temp_with(
    repo: &Path,
    sha: &str,
    local: Option<&crate::git::Repo>,
) -> Result<Scratch, GitError> {
    let parent = tempfile::Builder::new()
        .prefix("saphan-scratch-")
        .tempdir()
        .map_err(|e| GitError::Failed {
            cmd: "create a temp directory".into(),
            stderr: e.to_string(),
        })?;
    let path = parent.path().join("tree");
    add(
        &Transport::Local(Default::default()),
        repo,
        path,
        sha,
        Some(parent),
        local,
    )
    .await
}

async fn add(
    t: &Transport,
    repo: &Path,
    path: PathBuf,
    sha: &str,
    parent: Option<tempfile::TempDir>,
    local: Option<&crate::git::Repo>,
) -> Result<Scratch, GitError> {
    // The tree's gitlinks are read below: listed (once per process) beside
    // the checkout rather than after it.
    if t.is_local()
        && let Some(r) = local
    {
        r.list_ahead(sha);
    }
    run_ok(
        t,
        git_cmd(
            repo,
            ["worktree", "add", "--detach", "--quiet", "--end-of-options"],
        )
        .arg(&path)
        .arg(sha)
        .env(crate::git::SCRATCH_MARKER, &path),
    )
    .await?;
    let mut scratch = Scratch {
        transport: t.clone(),
        repo: repo.to_path_buf(),
        sha: sha.to_string(),
        path,
        git_dir: PathBuf::new(),
        submodules: Vec::new(),
        submodule_missing: None,
        _parent: parent,
        marker: None,
        armed: true,
    };
    scratch.git_dir = match t.is_local().then(|| local_git_dir(&scratch.path)).flatten() {
        Some(d) => d,
        None => crate::git::one_path(
            &run_ok(
                t,
                git_cmd(
                    &scratch.path,
                    ["rev-parse", "--path-format=absolute", "--git-dir"],
                ),
            )
            .await?
            .stdout,
        ),
    };
    if t.is_local() {
        // Locally the stores are found here; a dispatched tree gets its
        // submodules from the machine's mirror (see dispatch) — also on
        // this machine, through a `transport = "local"` row: a bare mirror.
        let opened;
        let local = match local {
            Some(r) => r,
            None => match crate::git::Repo::open(repo).await {
                Ok(r) => {
                    opened = r;
                    &opened
                }
                Err(GitError::Bare { .. }) => return Ok(scratch),
                Err(e) => return Err(e),
            },
        };
        let subs: Vec<(String, String, Option<PathBuf>)> = local
            .submodules(sha)
            .await?
            .into_iter()
            .map(|s| (s.path, s.commit, s.store.map(|r| r.common_dir)))
            .collect();
        checkout_submodules(&mut scratch, &subs).await;
    }
    Ok(scratch)
}

/// Check each submodule `(path, commit, store)` out at its gitlink commit in
/// `scratch`, on the scratch's machine, from `store` (a repository on that
/// machine holding the commit: a `--shared` clone, so no network and no
/// copy). A gitlink with no store, or whose checkout fails, is noted in
/// [`Scratch::submodule_missing`]: the attempt is then measurement-failed
/// naming the path and commit, never red. Every gitlink is listed in
/// [`Scratch::submodules`].
pub async fn checkout_submodules(
    scratch: &mut Scratch,
    subs: &[(String, String, Option<PathBuf>)],
) {
    for (path, commit, store) in subs {
        scratch.submodules.push((path.clone(), commit.clone()));
        if scratch.submodule_missing.is_some() {
            continue;
        }
        let Some(store) = store else {
            scratch.submodule_missing = Some(format!(
                "submodule {path} at commit {commit} is not available on this machine (no local store holds it; no network is used)"
            ));
            continue;
        };
        let dest = scratch.path.join(path);
        let out = scratch
            .transport
            .run(sh(
                crate::remote::SUBMODULE,
                "saphan-submodule",
                &[store.as_path(), dest.as_path(), Path::new(commit)],
            ))
            .await;
        if !out.is_ok_and(|o| o.status.success()) {
            scratch.submodule_missing = Some(format!(
                "submodule {path} at commit {commit} could not be checked out from {} (its objects are not there; no network is used)",
                store.display()
            ));
        }
    }
}

/// A scratch detached worktree on a machine. Removed by
/// [`Scratch::remove`]; if that was never reached (panic, early return) the
/// drop removes it — synchronously on the local machine, in the background
/// (best effort) on a remote one, where the next [`add_at`] heals anyway.
#[derive(Debug)]
pub struct Scratch {
    transport: Transport,
    repo: PathBuf,
    /// The commit checked out.
    sha: String,
    /// The worktree's top directory (a path on the machine).
    pub path: PathBuf,
    /// The worktree's own git dir (`<common>/worktrees/<name>`), where the
    /// provision exclude file goes.
    pub git_dir: PathBuf,
    /// Submodules checked out at their gitlinks: (path, commit).
    pub submodules: Vec<(String, String)>,
    /// Why a submodule could not be checked out (the attempt is then
    /// measurement-failed, naming the path and commit).
    pub submodule_missing: Option<String>,
    _parent: Option<tempfile::TempDir>,
    /// The stable path's [`attempt_marker`] (`None` for a temp tree).
    marker: Option<PathBuf>,
    armed: bool,
}

/// A fresh linked worktree's git dir, read from its `.git` file
/// (`gitdir: <path>`, git's own format; a relative path is taken from the
/// tree). `None` when the file is not of that form (then `git rev-parse`
/// answers).
fn local_git_dir(tree: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = std::fs::read(tree.join(".git")).ok()?;
    let rest = bytes.strip_prefix(b"gitdir: ")?;
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    if rest.is_empty() || rest.contains(&b'\n') {
        return None;
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(rest));
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        tree.join(p)
    })
}

/// How many paths a [`Scratch::verify_tree`] answer names (the rest are
/// counted).
const MISMATCH_SHOWN: usize = 10;

/// The `git status` that tells whether a scratch tree is exactly its
/// commit ([`Scratch::verify_tree`]): porcelain v2, NUL-separated, with the
/// HEAD it sees, every untracked and every ignored file, submodules
/// compared too, renames not looked for. Each flag overrides the config
/// key that would hide something (`status.showUntrackedFiles`,
/// `diff.ignoreSubmodules`, `status.renames`).
const STATUS_ARGS: &[&str] = &[
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--untracked-files=all",
    "--ignored=matching",
    "--ignore-submodules=none",
    "--no-renames",
];

/// What a `STATUS_ARGS` listing says differs from commit `sha`: the
/// HEAD when it is another commit, then each path git lists (changed,
/// staged, unmerged, untracked or ignored), in git's order. Empty when the
/// tree is exactly the commit.
///
/// Shape (git-status(1), "Porcelain Format Version 2"): NUL-terminated
/// entries; headers `# branch.oid <sha>`; `1 XY sub mH mI mW hH hI <path>`;
/// `2 …` (never asked for: `--no-renames`) with the original path as the
/// next entry; `u XY sub m1 m2 m3 mW h1 h2 h3 <path>`; `? <path>`;
/// `! <path>`.
pub fn status_differences(out: &[u8], sha: &str) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut head = None;
    let mut entries = out.split(|b| *b == 0).filter(|e| !e.is_empty());
    while let Some(e) = entries.next() {
        let text = String::from_utf8_lossy(e);
        let field_path = |n: usize| {
            text.splitn(n + 1, ' ')
                .nth(n)
                .unwrap_or_default()
                .to_string()
        };
        match e[0] {
            b'#' => {
                if let Some(o) = text.strip_prefix("# branch.oid ") {
                    head = Some(o.to_string());
                }
            }
            b'1' => diffs.push(field_path(8)),
            b'2' => {
                diffs.push(field_path(9));
                entries.next();
            }
            b'u' => diffs.push(field_path(10)),
            b'?' | b'!' => diffs.push(field_path(1)),
            _ => diffs.push(text.into_owned()),
        }
    }
    match head {
        Some(h) if h == sha => {}
        h => diffs.insert(
            0,
            format!(
                "HEAD (at {}, not the commit)",
                h.as_deref().unwrap_or("nothing")
            ),
        ),
    }
    diffs
}

impl Scratch {
    /// Whether the tree is exactly its commit, before anything of the
    /// suite's is placed in it: one `git status` (`STATUS_ARGS`) on the
    /// tree's machine, with saphan's git hardening (no hooks, no fsmonitor,
    /// no sparse checkout, no untracked cache, replace refs and grafts
    /// ignored), judged here ([`status_differences`]) for every machine
    /// alike. `Ok(None)`: exact. `Ok(Some(words))`: what differs, naming
    /// up to `MISMATCH_SHOWN` paths (`src/a.go, extra.txt and 3 more`).
    ///
    /// "Exactly" is git's own comparison (docs/certify.md, "The tree is
    /// the commit's"): HEAD is the commit, the index is its tree, each
    /// file reads back as its blob through the repository's own filters
    /// (a git-lfs smudge filter stays the operator's to configure), and no
    /// file is there that the commit does not hold, ignored or not.
    ///
    /// Errors: git could not be run on the machine or failed.
    pub async fn verify_tree(&self) -> Result<Option<String>, GitError> {
        let out = run_ok(&self.transport, git_cmd(&self.path, STATUS_ARGS)).await?;
        let diffs = status_differences(&out.stdout, &self.sha);
        if diffs.is_empty() {
            return Ok(None);
        }
        let shown: Vec<&str> = diffs
            .iter()
            .take(MISMATCH_SHOWN)
            .map(String::as_str)
            .collect();
        let more = diffs.len().saturating_sub(MISMATCH_SHOWN);
        Ok(Some(format!(
            "the checkout of {} is not exactly the commit: {}{}",
            self.sha,
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )))
    }

    /// The machine the tree lives on.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The repository path the tree was added from.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// Remove the worktree (forced: it is scratch) and its admin entry.
    /// Never fails: what `git worktree remove` cannot do is done by hand
    /// (the tree and exactly this worktree's admin entry, `rm-tree.sh`).
    ///
    /// The attempt ended cleanly here: when the machine contained the
    /// attempt's commands in cgroups (each killed whole at its end), nothing
    /// of it runs any more and the [`attempt_marker`] goes, so the next
    /// attempt skips the search for leftovers. Under process groups alone a
    /// daemon that left its group may still carry the scratch marker: the
    /// file stays and the next attempt searches.
    pub async fn remove(mut self) -> Result<(), GitError> {
        self.armed = false;
        cleanup(&self.transport, &self.repo, &self.path, &self.git_dir).await;
        if let Some(m) = self.marker.take()
            && self.transport.containment().await == Some(crate::exec::Containment::Cgroup)
            && !crate::exec::uncontained_ran()
        {
            match &self.transport {
                Transport::Local(_) => {
                    let _ = tokio::fs::remove_file(&m).await;
                }
                t => {
                    let _ = t
                        .run(
                            Cmd::new("rm")
                                .arg("-f")
                                .arg("--")
                                .arg(&m)
                                .timeout(GIT_TIMEOUT),
                        )
                        .await;
                }
            }
        }
        Ok(())
    }
}

/// The one scratch cleanup rule, for every machine: `git worktree remove
/// --force --force` (carrying the scratch marker), and when that fails the
/// tree and exactly its admin entry by hand ([`BY_HAND`]).
async fn cleanup(t: &Transport, repo: &Path, path: &Path, git_dir: &Path) {
    let res = run_ok(
        t,
        git_cmd(repo, ["worktree", "remove", "--force", "--force"])
            .arg(path)
            .env(crate::git::SCRATCH_MARKER, path),
    )
    .await;
    if res.is_err() {
        let _ = t.run(sh(BY_HAND, "saphan-rm", &[path, git_dir])).await;
    }
}

/// Delete the tree `$1` and the admin entry `$2` if it is one
/// (`…/worktrees/<name>`): `src/remote/rm-tree.sh`, on every machine.
const BY_HAND: &str = crate::remote::RM_TREE;

impl Drop for Scratch {
    /// The same rule as [`Scratch::remove`]: synchronously on this machine
    /// (a drop cannot await; `git`, then `sh -c rm-tree.sh` only when git
    /// could not), in the background (best effort) on a remote one.
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match &self.transport {
            Transport::Local(_) => {
                let quiet = |c: &mut std::process::Command| {
                    for k in crate::exec::GIT_LOCAL_ENV {
                        c.env_remove(k);
                    }
                    c.envs(crate::git::hardening_env().iter().map(|(k, v)| (k, v)));
                    c.stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                };
                let removed = quiet(
                    std::process::Command::new("git")
                        .arg("-C")
                        .arg(&self.repo)
                        .args(["worktree", "remove", "--force", "--force"])
                        .arg(&self.path)
                        .env(crate::git::SCRATCH_MARKER, &self.path),
                );
                if !removed {
                    quiet(
                        std::process::Command::new("sh")
                            .args(["-c", BY_HAND, "saphan-rm"])
                            .arg(&self.path)
                            .arg(&self.git_dir),
                    );
                }
            }
            t => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let (t, repo, path, git_dir) = (
                        t.clone(),
                        self.repo.clone(),
                        self.path.clone(),
                        self.git_dir.clone(),
                    );
                    rt.spawn(async move { cleanup(&t, &repo, &path, &git_dir).await });
                }
            }
        }
    }
}

#[cfg(test)]
mod status_tests {
    use super::status_differences;

    const SHA: &str = "1111111111111111111111111111111111111111";

    #[test]
    fn a_clean_status_at_the_commit_differs_in_nothing() {
        let out = format!("# branch.oid {SHA}\0# branch.head (detached)\0");
        assert!(status_differences(out.as_bytes(), SHA).is_empty());
    }

    #[test]
    fn every_kind_of_entry_is_named_by_its_path_and_another_head_first() {
        let out = b"# branch.oid 2222222222222222222222222222222222222222\0\
# branch.head (detached)\0\
1 .M N... 100755 100755 100755 aaaa aaaa suite.sh\0\
1 A. N... 000000 100644 100644 0000 bbbb dir/with space.txt\0\
u UU N... 100644 100644 100644 100644 c1 c2 c3 conflict.go\0\
? extra.txt\0\
! build/out.o\0";
        assert_eq!(
            status_differences(out, SHA),
            [
                "HEAD (at 2222222222222222222222222222222222222222, not the commit)",
                "suite.sh",
                "dir/with space.txt",
                "conflict.go",
                "extra.txt",
                "build/out.o"
            ]
        );
    }

    #[test]
    fn a_status_without_a_head_says_so() {
        assert_eq!(
            status_differences(b"", SHA),
            ["HEAD (at nothing, not the commit)"]
        );
    }
}
