//! Shipping commits to a machine's bare mirror (DESIGN §6a step 3): learn
//! which shipped commits the mirror already holds, bundle only what it
//! lacks (`git bundle create <ref> --not <what it has>`), stream the bundle
//! over the connection, verify it there and fetch it into
//! `refs/saphan/shipped/<sha>` of the mirror. Nothing already there is
//! re-sent.
//!
//! Hygiene (docs/dispatch.md, "What is reaped"): every ship first reaps what
//! dead attempts left — locally (the first ship of a repository in a
//! process, [`reap_local`]: the bundle and collect
//! directories and the ship refs of a saphan process that is gone, and the
//! `git bundle create` still writing into such a directory), and on the
//! machine (`src/remote/ship-probe.sh`: half bundles in `incoming/`, a dead
//! fetch's `tmp_*` files in the mirror, run directories of attempts that
//! are over) — each with a `reaped: …` note. A mirror that fails its
//! integrity check after a git command on it failed is moved aside,
//! recreated and sent the full history once ([`ship`]), with a
//! `mirror-renewed: …` note.

use super::{CONTROL_TIMEOUT, DispatchFault};
use crate::cancel::Token as Interrupt;
use crate::exec::{self, Cmd};
use crate::git::Repo;
use crate::report::FailureKind;
use crate::transport::Transport;
use std::future::Future;
use std::pin::Pin;

/// The namespace of the mirror's refs: one per shipped commit.
pub const SHIPPED: &str = "refs/saphan/shipped/";

/// What one ship sent.
#[derive(Debug, Clone, Default)]
pub struct Shipped {
    /// Bundle bytes sent (0 when the mirror already had every commit).
    pub bundle_bytes: u64,
    /// How many commits the mirror already had that the bundle excluded.
    pub prerequisites: usize,
    /// Record notes: what was reaped (`reaped: …`, locally and on the
    /// machine) and whether the mirror was renewed (`mirror-renewed: …`).
    pub notes: Vec<String>,
}

/// Minutes after which nothing a live attempt writes on the machine
/// (a bundle in `incoming/`, a fetch's `tmp_*` file, a run directory that
/// never got its lock) can still be in use: every ship command is bounded
/// by [`CONTROL_TIMEOUT`] plus the watchdog's grace and slack, and the lock
/// wait by [`super::LOCK_WAIT`]. Older ones are reaped.
pub const REAP_AGE_MINUTES: u64 = (CONTROL_TIMEOUT.as_secs()
    + exec::GRACE.as_secs()
    + crate::transport::watchdog::LINK_SLACK.as_secs())
.div_ceil(60)
    + 1;

/// The prefix of one saphan process's temporary directories of `kind`
/// (`bundle`, `collect`) in the temp dir: `saphan-<kind>-<pid>-`, so the
/// next run can tell whose they are ([`reap_local`]).
pub fn temp_prefix(kind: &str) -> String {
    format!("saphan-{kind}-{}-", std::process::id())
}

pub use crate::home::Layout;

/// Run `argv` on the machine and return its whole stdout (read from a file,
/// never a bounded tail: the mirror's listing grows with every shipped
/// commit).
async fn remote(t: &Transport, cmd: Cmd, what: &str) -> Result<String, DispatchFault> {
    let (out, bytes) = crate::transport::whole_stdout(t, cmd.timeout(CONTROL_TIMEOUT), u64::MAX)
        .await
        .map_err(DispatchFault::transport)?;
    if !out.status.success() {
        return Err(ship_failed(
            what,
            &out,
            " — the machine row's workhome must be writable there and git installed",
        ));
    }
    Ok(String::from_utf8_lossy(&bytes.unwrap_or_default())
        .trim_end()
        .to_string())
}

/// `ship-failed` for a command that ran on the machine and did not succeed:
/// what it was doing, how it ended, its stderr, then `hint`.
fn ship_failed(what: &str, out: &exec::Output, hint: &str) -> DispatchFault {
    DispatchFault::new(
        FailureKind::ShipFailed,
        format!("{what}: {:?}: {}{hint}", out.status, out.stderr_str()),
    )
}

async fn local_git(repo: &Repo, args: &[String]) -> Result<exec::Output, DispatchFault> {
    exec::run(crate::git::git_cmd(&repo.top).args(args))
        .await
        .map_err(|e| DispatchFault::new(FailureKind::ShipFailed, format!("running git: {e}")))
}

/// Ship every commit in `shas` (the measured SHA, then submodule commits the
/// caller found locally) into the machine's mirror.
///
/// `sources` pairs each SHA with the local repository that holds it (the
/// superproject, or a submodule's own object store). `tag` names this
/// shipment's temporary local ref (`refs/saphan/ship/<tag>`), removed after;
/// it starts with this process's id (`<pid>-…`), so [`reap_local`] can tell
/// a dead process's refs.
///
/// When the ship fails as `ship-failed` and the mirror then fails its
/// integrity check (`src/remote/mirror-check.sh`: a truncated pack, a
/// missing object), the mirror is moved aside and recreated
/// (`mirror-renew.sh`) and the full history is shipped once more; the
/// result's notes say so (`mirror-renewed: …`).
///
/// `stop` (the process's cancellation) ends the ship early without
/// killing anything on the machine mid-write: a bundle being made here is
/// dropped, and a bundle streaming to the machine is cut short — its
/// stream ends, so the machine's `ship-fetch.sh` finds a half bundle,
/// fails to verify it and removes it itself; a bundle that had arrived
/// whole is fetched to the end there (a fetch killed mid-way would leave
/// its `tmp_pack_*` in the mirror). Either way the ship waits for that
/// command, so nothing of it is left on the machine, and returns the
/// `interrupted` fault.
///
/// Errors: the fault of the ship (`ship-failed`, the transport's kinds),
/// or of the second ship; `interrupted` when `stop` fired.
pub async fn ship(
    t: &Transport,
    layout: &Layout,
    sources: &[(Repo, String)],
    tag: &str,
    stop: &Interrupt,
) -> Result<Shipped, DispatchFault> {
    if stop.is_cancelled() {
        return Err(stopped(stop, "before the commit was shipped"));
    }
    let repos: Vec<Repo> = sources.iter().map(|(r, _)| r.clone()).collect();
    let mut notes = reap_local_once(&repos).await;
    let first = ship_once(t, layout, sources, tag, &mut notes, stop).await;
    let fault = match first {
        Ok(_) if stop.is_cancelled() => return Err(stopped(stop, SHIPPING)),
        Ok(mut s) => {
            notes.append(&mut s.notes);
            s.notes = notes;
            return Ok(s);
        }
        Err(_) if stop.is_cancelled() => return Err(stopped(stop, SHIPPING)),
        Err(f) if f.kind == FailureKind::ShipFailed => f,
        Err(f) => return Err(f),
    };
    let mirror = layout.mirror();
    let check = t
        .run(
            crate::remote::sh(
                crate::remote::MIRROR_CHECK,
                "saphan-mirror-check",
                [&mirror],
            )
            .timeout(CONTROL_TIMEOUT),
        )
        .await;
    let why = match check {
        Ok(o) if o.status.code() == Some(crate::remote::MIRROR_CHECK_EXIT_CORRUPT) => {
            o.stdout_str().trim().to_string()
        }
        _ => return Err(fault),
    };
    let renew = t
        .run(
            crate::remote::sh(
                crate::remote::MIRROR_RENEW,
                "saphan-mirror-renew",
                [&mirror],
            )
            .timeout(CONTROL_TIMEOUT),
        )
        .await
        .map_err(DispatchFault::transport)?;
    if !renew.status.success() {
        return Err(DispatchFault::new(
            FailureKind::ShipFailed,
            format!(
                "{} — and the mirror {mirror} is corrupt ({why}) and could not be renewed: {}",
                fault.detail,
                renew.stderr_str()
            ),
        ));
    }
    let mut s = ship_once(t, layout, sources, tag, &mut notes, stop).await?;
    if stop.is_cancelled() {
        return Err(stopped(stop, SHIPPING));
    }
    notes.push(format!(
        "mirror-renewed: the mirror {mirror} failed its integrity check ({why}) after `{}`; it was moved aside and removed, a new one created, and the full history shipped ({} bytes)",
        fault.detail.chars().take(200).collect::<String>(),
        s.bundle_bytes
    ));
    notes.append(&mut s.notes);
    s.notes = notes;
    Ok(s)
}

/// When the ship was stopped: `interrupted`, nothing ran on the machine.
const SHIPPING: &str = "while the commit was being shipped";

/// The fault of a ship `stop` ended (`when`: how far it had come).
fn stopped(stop: &Interrupt, when: &str) -> DispatchFault {
    DispatchFault::new(
        FailureKind::Interrupted,
        format!(
            "{} {when}; nothing ran on the machine",
            stop.reason()
                .unwrap_or(crate::cancel::Reason::Requested)
                .words()
        ),
    )
}

/// A file's bytes that end early — as if the file ended — once `stop`
/// fires: the stream of a bundle cut short without killing its reader on
/// the machine ([`ship`]).
struct UntilStopped {
    file: tokio::fs::File,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopped: bool,
}

impl tokio::io::AsyncRead for UntilStopped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if !self.stopped && self.stop.as_mut().poll(cx).is_ready() {
            self.stopped = true;
        }
        if self.stopped {
            return std::task::Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

/// One ship (see [`ship`]); `notes` gets what the machine reaped. Once
/// `stop` fires no bundle is made or sent any more, and the one streaming
/// is cut short.
async fn ship_once(
    t: &Transport,
    layout: &Layout,
    sources: &[(Repo, String)],
    tag: &str,
    notes: &mut Vec<String>,
    stop: &Interrupt,
) -> Result<Shipped, DispatchFault> {
    let mirror = layout.mirror();
    let mut shas: Vec<&str> = sources.iter().map(|(_, s)| s.as_str()).collect();
    shas.dedup();
    let age = REAP_AGE_MINUTES.to_string();
    let mut probe_args = vec![mirror.as_str(), &age];
    probe_args.extend(shas.iter().copied());
    let probe = crate::remote::sh(crate::remote::SHIP_PROBE, "saphan-ship", probe_args);
    let listing = remote(t, probe, "reading the mirror").await?;
    let mut haves: Vec<String> = Vec::new();
    let mut present: Vec<String> = Vec::new();
    let mut reaped: Vec<&str> = Vec::new();
    for l in listing.lines() {
        if let Some(r) = l.strip_prefix("reaped ") {
            reaped.push(r);
        } else if let Some(h) = l.strip_prefix("have ") {
            haves.push(h.trim().to_string());
        } else if let Some(p) = l.strip_prefix("present ") {
            present.push(p.trim().to_string());
        }
    }
    if !reaped.is_empty() {
        notes.push(format!(
            "reaped: {} (left on the machine by attempts that are over)",
            reaped.join(", ")
        ));
    }
    let mut shipped = Shipped::default();
    for (repo, sha) in sources {
        if present.iter().any(|p| p == sha) {
            continue;
        }
        if stop.is_cancelled() {
            return Err(stopped(stop, SHIPPING));
        }
        // Prerequisites: the mirror's commits this repository knows.
        let mut known = Vec::new();
        if !haves.is_empty() {
            let out = exec::run(
                crate::git::git_cmd(&repo.top)
                    .args(["cat-file", "--batch-check=%(objectname) %(objecttype)"])
                    .stdin(haves.join("\n").into_bytes()),
            )
            .await
            .map_err(|e| {
                DispatchFault::new(FailureKind::ShipFailed, format!("running git: {e}"))
            })?;
            for l in out.stdout_str().lines() {
                if let Some(h) = l.strip_suffix(" commit") {
                    known.push(h.to_string());
                }
            }
        }
        // Machines of one invocation whose mirrors lack the same commits
        // get the same bundle: it is made once ([`bundle_for`]). Making it
        // is local: it is dropped when `stop` fires (its `git` killed, its
        // directory removed; the caller forgets its ref).
        let bundle = tokio::select! {
            b = bundle_for(repo, sha, &known, tag) => b?,
            () = stop.cancelled() => return Err(stopped(stop, SHIPPING)),
        };
        let bytes = bundle.bytes;
        let incoming = format!("{}/incoming/{tag}-{}.bundle", layout.base, &sha[..12]);
        let boundary = shallow_boundary(repo).await;
        // One round trip: the bundle streams over the connection into the
        // incoming file, is verified and fetched there, then removed — on
        // every path by the script itself: `stop` only ends the stream
        // early, and the command is waited for.
        let file = tokio::fs::File::open(&bundle.file).await.map_err(|e| {
            DispatchFault::new(
                FailureKind::ShipFailed,
                format!("reading the bundle {}: {e}", bundle.file.display()),
            )
        })?;
        let stream = UntilStopped {
            file,
            stop: Box::pin({
                let stop = stop.clone();
                async move { stop.cancelled().await }
            }),
            stopped: false,
        };
        let out = t
            .run(
                crate::remote::sh(
                    crate::remote::SHIP_FETCH,
                    "saphan-fetch",
                    [&mirror, &incoming, &bundle.tip, sha, &bytes.to_string()],
                )
                .args(boundary.iter().map(String::as_str))
                .input(exec::Input::Stream(exec::SharedReader::new(stream)))
                .timeout(CONTROL_TIMEOUT),
            )
            .await
            .map_err(DispatchFault::transport)?;
        if stop.is_cancelled() {
            return Err(stopped(stop, SHIPPING));
        }
        if !out.status.success() {
            return Err(ship_failed("verifying and fetching the bundle", &out, ""));
        }
        shipped.bundle_bytes += bytes;
        shipped.prerequisites += known.len();
    }
    Ok(shipped)
}

/// One bundle made here: its file (in its own temporary directory, removed
/// with it), its size, and the ref it carries the SHA under.
struct Bundle {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    bytes: u64,
    /// `refs/saphan/ship/<tag>-<sha12>` of the ship that made it.
    tip: String,
}

/// What identifies a bundle: the repository (its common dir), the SHA and
/// the sorted prerequisites it excludes.
type BundleKey = (std::path::PathBuf, String, Vec<String>);

/// A bundle's slot: held while it is made, empty once no ship uses it.
type Slot = std::sync::Arc<tokio::sync::Mutex<std::sync::Weak<Bundle>>>;

/// The bundles of this process still in use, one slot per [`BundleKey`]:
/// while some ship holds a bundle, another ship of the same commits to a
/// mirror holding the same prerequisites sends the same file instead of
/// running `git bundle create` again (eight machines of one invocation, all
/// lacking the SHA: one bundle, not eight). A slot's bundle is gone once
/// the last ship using it is done.
static BUNDLES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<BundleKey, Slot>>> =
    std::sync::LazyLock::new(Default::default);

/// The bundle of `sha` from `repo` without the commits `known` (and their
/// history): one still in use by another ship of this process, else made
/// now (`update-ref` of a temporary ref named after `tag`, `git bundle
/// create`, the ref deleted).
async fn bundle_for(
    repo: &Repo,
    sha: &str,
    known: &[String],
    tag: &str,
) -> Result<std::sync::Arc<Bundle>, DispatchFault> {
    let mut sorted = known.to_vec();
    sorted.sort();
    let key = (repo.common_dir.clone(), sha.to_string(), sorted);
    let slot = {
        let mut all = BUNDLES.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|_, s| s.try_lock().map(|w| w.strong_count() > 0).unwrap_or(true));
        all.entry(key).or_default().clone()
    };
    // One maker per key; the others wait for its bundle.
    let mut held = slot.lock().await;
    if let Some(b) = held.upgrade() {
        return Ok(b);
    }
    let b = std::sync::Arc::new(make_bundle(repo, sha, known, tag).await?);
    *held = std::sync::Arc::downgrade(&b);
    Ok(b)
}

/// `git bundle create` of `sha` (named by a temporary ref) `--not known`.
async fn make_bundle(
    repo: &Repo,
    sha: &str,
    known: &[String],
    tag: &str,
) -> Result<Bundle, DispatchFault> {
    let tip = format!("refs/saphan/ship/{tag}-{}", &sha[..12.min(sha.len())]);
    let dir = tempfile::Builder::new()
        .prefix(&temp_prefix("bundle"))
        .tempdir()
        .map_err(|e| DispatchFault::new(FailureKind::ShipFailed, format!("temp dir: {e}")))?;
    let file = dir.path().join("ship.bundle");
    let up = local_git(repo, &["update-ref".into(), tip.clone(), sha.to_string()]).await?;
    if !up.status.success() {
        return Err(DispatchFault::new(
            FailureKind::ShipFailed,
            format!("cannot name {sha} for the bundle: {}", up.stderr_str()),
        ));
    }
    let mut args = vec![
        "bundle".to_string(),
        "create".into(),
        "--quiet".into(),
        file.display().to_string(),
        tip.clone(),
    ];
    if !known.is_empty() {
        args.push("--not".into());
        args.extend(known.iter().cloned());
    }
    let made = local_git(repo, &args).await;
    let _ = local_git(repo, &["update-ref".into(), "-d".into(), tip.clone()]).await;
    let made = made?;
    if !made.status.success() {
        return Err(DispatchFault::new(
            FailureKind::ShipFailed,
            format!("git bundle create: {}", made.stderr_str()),
        ));
    }
    let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    Ok(Bundle {
        _dir: dir,
        file,
        bytes,
        tip,
    })
}

/// The shallow boundary of `repo` (the commits listed in its common dir's
/// `shallow` file, whose parents the clone does not hold); empty for a full
/// clone. A bundle from a shallow clone stops at these commits, so the
/// mirror records them as its own shallow boundary before fetching it —
/// otherwise the fetch's connectivity check fails on the missing parents.
async fn shallow_boundary(repo: &Repo) -> Vec<String> {
    let text = tokio::fs::read_to_string(repo.common_dir.join("shallow"))
        .await
        .unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| (l.len() == 40 || l.len() == 64) && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

/// Delete the temporary `refs/saphan/ship/<tag>-*` refs an interrupted
/// [`ship`] may have left in `repo` (best effort).
pub async fn forget(repo: &Repo, tag: &str) {
    let Ok(out) = local_git(
        repo,
        &[
            "for-each-ref".into(),
            "--format=%(refname)".into(),
            format!("refs/saphan/ship/{tag}-*"),
        ],
    )
    .await
    else {
        return;
    };
    for r in out.stdout_str().lines().filter(|r| !r.is_empty()) {
        let _ = local_git(repo, &["update-ref".into(), "-d".into(), r.to_string()]).await;
    }
}

/// Is process `pid` alive (or a zombie not yet reaped)? A pid that cannot be
/// signalled for want of permission is alive.
fn alive(pid: i32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// The pid in a name `<prefix><pid>-…`, when `name` has that shape.
fn owner(name: &str, prefix: &str) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?;
    let (pid, tail) = rest.split_once('-')?;
    if tail.is_empty() {
        return None;
    }
    pid.parse::<i32>().ok().filter(|p| *p > 0)
}

/// [`reap_local`] for the repositories of `repos` this process has not
/// reaped yet (and the temp dir on the first call): the machines of one
/// invocation ship concurrently, and what dead processes left here needs
/// reaping once — its notes go to the first machine's record.
async fn reap_local_once(repos: &[Repo]) -> Vec<String> {
    static REAPED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    static TEMP_DIR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let fresh: Vec<Repo> = {
        let mut done = REAPED.lock().unwrap_or_else(|e| e.into_inner());
        repos
            .iter()
            .filter(|r| {
                let new = !done.contains(&r.common_dir);
                if new {
                    done.push(r.common_dir.clone());
                }
                new
            })
            .cloned()
            .collect()
    };
    let temp_dir = !TEMP_DIR.swap(true, std::sync::atomic::Ordering::SeqCst);
    reap(&fresh, temp_dir).await
}

/// Reap, on this machine, what saphan processes that are no longer running
/// left behind (a kill -9, a crash): their `saphan-bundle-<pid>-*` and
/// `saphan-collect-<pid>-*` directories in the temp dir (after killing any
/// process, such as a `git bundle create`, whose command line names one),
/// and their `refs/saphan/ship/<pid>-…` refs in `repos`. Returns one
/// `reaped: …` note per kind found, nothing when nothing was left. Names
/// without a pid (older versions) are never touched; a live process's
/// things are never touched. Best effort: what cannot be removed stays for
/// the next run.
pub async fn reap_local(repos: &[Repo]) -> Vec<String> {
    reap(repos, true).await
}

/// [`reap_local`]; the temp dir only when `temp_dir`.
async fn reap(repos: &[Repo], temp_dir: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let dirs = if temp_dir {
        tokio::task::spawn_blocking(reap_temp_dirs)
            .await
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if !dirs.is_empty() {
        notes.push(format!(
            "reaped: {} (left here by saphan processes that are gone)",
            dirs.join(", ")
        ));
    }
    let mut refs = Vec::new();
    for repo in repos {
        let Ok(out) = local_git(
            repo,
            &[
                "for-each-ref".into(),
                "--format=%(refname)".into(),
                "refs/saphan/ship/".into(),
            ],
        )
        .await
        else {
            continue;
        };
        for r in out.stdout_str().lines() {
            let Some(name) = r.strip_prefix("refs/saphan/ship/") else {
                continue;
            };
            let Some(pid) = owner(name, "") else { continue };
            if alive(pid) {
                continue;
            }
            let d = local_git(repo, &["update-ref".into(), "-d".into(), r.to_string()]).await;
            if d.map(|o| o.status.success()).unwrap_or(false) && !refs.contains(&r.to_string()) {
                refs.push(r.to_string());
            }
        }
    }
    if !refs.is_empty() {
        notes.push(format!(
            "reaped: {} (ship refs of saphan processes that are gone)",
            refs.join(", ")
        ));
    }
    notes
}

/// The temp-dir half of [`reap_local`] (blocking): the directories removed.
fn reap_temp_dirs() -> Vec<String> {
    let tmp = std::env::temp_dir();
    let Ok(rd) = std::fs::read_dir(&tmp) else {
        return Vec::new();
    };
    let mut dead = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = owner(&name, "saphan-bundle-").or_else(|| owner(&name, "saphan-collect-"));
        if let Some(pid) = pid
            && !alive(pid)
            && e.file_type().map(|t| t.is_dir()).unwrap_or(false)
        {
            dead.push(e.path());
        }
    }
    if dead.is_empty() {
        return Vec::new();
    }
    kill_writers(&dead);
    let mut gone = Vec::new();
    for d in dead {
        if std::fs::remove_dir_all(&d).is_ok() {
            gone.push(d.display().to_string());
        }
    }
    gone
}

/// SIGKILL every process (Linux `/proc`) whose command line names a path
/// under one of `dirs` — an orphaned `git bundle create` still writing
/// there. Elsewhere nothing is found.
fn kill_writers(dirs: &[std::path::PathBuf]) {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id() as i32;
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let hit = cmdline.split(|b| *b == 0).any(|w| {
            let w = String::from_utf8_lossy(w);
            dirs.iter().any(|d| w.starts_with(&*d.to_string_lossy()))
        });
        if hit {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_from_names() {
        assert_eq!(owner("saphan-bundle-123-abc", "saphan-bundle-"), Some(123));
        assert_eq!(owner("saphan-bundle-abc", "saphan-bundle-"), None);
        assert_eq!(owner("saphan-bundle-123-", "saphan-bundle-"), None);
        assert_eq!(owner("77-m0-0123456789ab", ""), Some(77));
        assert!(alive(std::process::id() as i32));
    }
}
