//! Running one [`Cmd`] on a machine — an SSH machine ([`super::Ssh::run`])
//! or a borrowed Slurm node ([`super::Srun::run`]) — with the same meaning
//! as [`crate::exec::run`] locally: its own process group, a budget enforced
//! *on the machine* (SIGTERM to the whole group, [`GRACE`], SIGKILL), stdout
//! to a local file or a bounded capture, stderr bounded to
//! [`STDERR_TAIL`](crate::exec::STDERR_TAIL). This module is the one piece
//! both share (`Supervised`: the argv, the local wait, the group scan, the
//! guard, the reading of the end markers); each transport only carries the
//! argv there and the bytes back.
//!
//! The remote argv is `sh -c WATCHDOG saphan-run NONCE BUDGET GRACE
//! CWD INNER [+K=V | -K]… -- PROGRAM ARGS…`, sent as one command line with
//! every word quoted by [`super::quote`] (SSH hands it to the login shell;
//! on a Slurm node `slurm-login.sh` runs it, see [`super::srun`]). The POSIX-sh [`WATCHDOG`] script
//! (`src/remote/watchdog.sh`, its protocol in its header):
//!
//! 1. `cd`s into CWD (empty: the login directory);
//! 2. starts the [`INNER`] shell under `setsid` (a new session and process
//!    group; without job control the backgrounded `setsid` is no group
//!    leader, so it does not fork and `$!` is the group id), its stdin the
//!    channel's; INNER applies the environment changes (`+K=V` exports, `-K`
//!    unsets) to the program alone — the supervisor and its watchdog never
//!    carry them, so a search for the scratch marker finds only the
//!    program's processes — checks the program is on PATH,
//! 3. prints `NONCE pgid N` on stderr (so a dropped run can kill the group)
//!    and execs the program;
//! 4. runs a watchdog subshell: after BUDGET seconds it sends SIGTERM to the
//!    group, after GRACE more SIGKILL — whether or not the SSH connection is
//!    still there (LAB.md: a partitioned host keeps running orphaned
//!    processes, so the local side alone cannot enforce a budget). It
//!    signals only a group that is still the attempt's: the leader is the
//!    same process (same start time), or it has ended while the supervisor,
//!    the watchdog's parent, is alive (its id cannot have been reused). A
//!    watchdog whose supervisor died does nothing, and the next attempt's
//!    reap of the scratch path (`src/remote/kill-leftovers.sh`) disarms it:
//!    its `sleep` carries `SAPHAN_WATCHDOG=<scratch path>`;
//! 5. when the program's leader exits, kills what is left of its group (a
//!    grandchild cannot hold the channel open) and prints a final stderr line
//!    `NONCE exit CODE` or `NONCE timeout`, which is stripped from the
//!    captured stderr and mapped to [`Termination`]. An exit status above 128
//!    is read as "killed by signal status−128" (a POSIX shell cannot tell the
//!    two apart; locally they can be).
//!
//! The local side waits BUDGET + GRACE + [`LINK_SLACK`] for the channel; past
//! that (a partitioned machine) it returns [`Termination::TimedOut`] and
//! leaves the group to the machine's watchdog. A run whose future is dropped
//! (Ctrl-C, a lost `select!`) sends `kill -KILL -PGID` to the machine (over
//! the connection, or in another srun step) in the background, best effort;
//! a second signal does the same through [`crate::cancel`].
//!
//! Requirements on the machine: a POSIX `sh`, `setsid` (util-linux or
//! busybox), `sleep` with fractional seconds (GNU coreutils, busybox), and
//! `kill`. A missing program is reported as [`TransportError::RemoteSpawn`],
//! like a local spawn failure.

use super::TransportError;
use crate::exec::{Cmd, GRACE, Output, Termination};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long past budget + grace the local side waits for a remote command's
/// channel to report before calling it timed out (the machine's watchdog has
/// killed the group by then unless the machine is unreachable).
pub const LINK_SLACK: Duration = Duration::from_secs(5);

/// The POSIX-sh supervisor every [`super::Ssh::run`] and
/// [`super::Srun::run`] command runs under (see the
/// module docs; its protocol heads `src/remote/watchdog.sh`). `$0` is
/// `saphan-run`.
pub const WATCHDOG: &str = crate::remote::WATCHDOG;

/// The program's own shell, inside the new process group: applies the
/// environment changes (`+K=V` exports, `-K` unsets) to the program alone —
/// never to the supervisor or its watchdog, so nothing but the program's
/// group carries them (the scratch marker included) — checks the program
/// exists on the resulting PATH, prints `NONCE pgid N` on stderr, and execs
/// (`src/remote/watchdog-inner.sh`).
pub const INNER: &str = crate::remote::WATCHDOG_INNER;

/// Watches a remote stderr stream for the `NONCE pgid N` line.
#[derive(Debug)]
pub(super) struct GroupScan {
    needle: Vec<u8>,
    window: Vec<u8>,
    found: Arc<Mutex<Option<i32>>>,
    contain: Vec<u8>,
    /// The `NONCE contain …` line's word, when seen (it comes before the
    /// group line).
    containment: Option<crate::exec::Containment>,
}

impl GroupScan {
    /// What the `NONCE contain …` line said, once seen.
    pub(super) fn containment(&self) -> Option<crate::exec::Containment> {
        self.containment
    }

    fn new(nonce: &str, found: Arc<Mutex<Option<i32>>>) -> GroupScan {
        GroupScan {
            needle: format!("{nonce} pgid ").into_bytes(),
            window: Vec::new(),
            found,
            contain: format!("{nonce} contain ").into_bytes(),
            containment: None,
        }
    }

    /// Feed the next stderr bytes; keeps only a small window, so a flood
    /// costs nothing.
    pub(super) fn feed(&mut self, data: &[u8]) {
        if self.found.lock().map(|g| g.is_some()).unwrap_or(true) {
            return;
        }
        self.window.extend_from_slice(data);
        if self.containment.is_none()
            && let Some(i) = find(&self.window, &self.contain)
        {
            let rest = &self.window[i + self.contain.len()..];
            if let Some(end) = rest.iter().position(|b| *b == b'\n') {
                self.containment = std::str::from_utf8(&rest[..end])
                    .ok()
                    .and_then(crate::exec::Containment::parse);
            }
        }
        if let Some(i) = find(&self.window, &self.needle) {
            let rest = &self.window[i + self.needle.len()..];
            if let Some(end) = rest.iter().position(|b| *b == b'\n') {
                if let Some(p) = std::str::from_utf8(&rest[..end])
                    .ok()
                    .and_then(|s| s.parse::<i32>().ok())
                    && let Ok(mut g) = self.found.lock()
                {
                    *g = Some(p);
                }
                self.window.clear();
            }
            return;
        }
        let keep = self.needle.len() + 32;
        if self.window.len() > keep {
            self.window.drain(..self.window.len() - keep);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// How a transport kills a process group on its machine from here:
/// `(pgid, bound)` → a future that sends `kill -s KILL -- -PGID` there and
/// waits at most `bound`. Best effort: its result is not read.
pub(super) type KillGroup =
    Arc<dyn Fn(i32, Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Kills the remote group when a run ends before its end was read: in the
/// background when dropped (a dropped future, Ctrl-C), and through
/// [`crate::cancel`] when a second signal forces the exit.
pub(super) struct GroupGuard {
    kill: KillGroup,
    pgid: Arc<Mutex<Option<i32>>>,
    armed: bool,
    _registered: crate::cancel::Registration,
}

impl GroupGuard {
    fn new(kill: KillGroup, pgid: Arc<Mutex<Option<i32>>>) -> GroupGuard {
        let registered = {
            let (kill, pgid) = (kill.clone(), pgid.clone());
            crate::cancel::register_remote(Box::new(move || {
                Box::pin(async move {
                    let p = pgid.lock().ok().and_then(|g| *g);
                    if let Some(p) = p {
                        kill(p, crate::cancel::FORCE_BOUND).await;
                    }
                })
            }))
        };
        GroupGuard {
            kill,
            pgid,
            armed: true,
            _registered: registered,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(p) = self.pgid.lock().ok().and_then(|g| *g) else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn((self.kill)(p, Duration::from_secs(10)));
        }
    }
}

fn word(s: &std::ffi::OsStr, what: &str) -> Result<String, TransportError> {
    s.to_str()
        .map(str::to_string)
        .ok_or_else(|| TransportError::BadArgument {
            detail: format!("{what} `{}` is not UTF-8", s.to_string_lossy()),
        })
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// The remote argv for `cmd` under the watchdog, with `nonce` and `budget`.
fn remote_argv(cmd: &Cmd, nonce: &str, budget: Duration) -> Result<Vec<String>, TransportError> {
    let mut w: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        WATCHDOG.into(),
        "saphan-run".into(),
        nonce.into(),
        seconds(budget),
        seconds(GRACE),
        match cmd.working_dir() {
            Some(d) => word(d.as_os_str(), "the working directory")?,
            None => String::new(),
        },
        INNER.into(),
    ];
    for (k, v) in cmd.env_changes() {
        let k = word(k, "an environment variable name")?;
        if k.is_empty() || k.contains('=') {
            return Err(TransportError::BadArgument {
                detail: format!("`{k}` is not an environment variable name"),
            });
        }
        match v {
            Some(v) => w.push(format!("+{k}={}", word(v, "an environment value")?)),
            None => w.push(format!("-{k}")),
        }
    }
    w.push("--".into());
    w.push(word(cmd.program(), "the program")?);
    for a in cmd.argv_tail() {
        w.push(word(a, "an argument")?);
    }
    if let Some(i) = w.iter().position(|x| x.contains('\0')) {
        return Err(TransportError::BadArgument {
            detail: format!("word {i} of the command holds a NUL byte"),
        });
    }
    Ok(w)
}

/// How the remote side said the command ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Exit(i32),
    TimedOut,
    NoCwd,
    NoSetsid,
    NoProgram,
}

/// Remove the first line of `buf` that starts at `prefix` (through its
/// newline, or to the end).
fn drop_line(buf: &mut Vec<u8>, prefix: &[u8]) {
    if let Some(i) = find(buf, prefix) {
        let end = buf[i..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|e| i + e + 1)
            .unwrap_or(buf.len());
        buf.drain(i..end);
    }
}

/// Find and strip the final `\nNONCE …\n` marker and the `NONCE pgid N\n`
/// line from `stderr`. What follows the marker's line is not the
/// program's (the supervisor printed it last) but the transport's own
/// words after the command ended (srun's, on a borrowed Slurm node); it is
/// kept.
fn split_markers(stderr: &mut Vec<u8>, nonce: &str) -> Option<End> {
    for tag in ["contain", "pgid"] {
        drop_line(stderr, format!("{nonce} {tag} ").as_bytes());
    }
    let np = format!("\n{nonce} noprogram\n").into_bytes();
    if let Some(i) = find(stderr, &np) {
        stderr.truncate(i);
        return Some(End::NoProgram);
    }
    let m = format!("\n{nonce} ").into_bytes();
    let i = rfind(stderr, &m)?;
    let rest = &stderr[i + m.len()..];
    let (line, after) = match rest.iter().position(|b| *b == b'\n') {
        Some(e) => (&rest[..e], rest[e + 1..].to_vec()),
        None => (rest, Vec::new()),
    };
    let text = String::from_utf8_lossy(line).trim().to_string();
    let end = match text.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["exit", c] => End::Exit(c.parse().ok()?),
        ["timeout"] => End::TimedOut,
        ["nocwd"] => End::NoCwd,
        ["nosetsid"] => End::NoSetsid,
        ["noprogram"] => End::NoProgram,
        _ => return None,
    };
    stderr.truncate(i);
    if !after.is_empty() {
        // The marker's own leading newline is the supervisor's: the
        // program's last line may lack one.
        if stderr.last().is_some_and(|b| *b != b'\n') {
            stderr.push(b'\n');
        }
        stderr.extend_from_slice(&after);
    }
    Some(end)
}

/// One command run under the [`WATCHDOG`] on a machine, whatever carries it
/// there (an SSH channel, an srun step): the nonce, the remote argv, the
/// local wait, the group scan, the guard that kills a dropped run's group,
/// and how its end markers are read. Each transport only moves bytes.
pub(super) struct Supervised {
    nonce: String,
    budget: Duration,
    pgid: Arc<Mutex<Option<i32>>>,
}

/// How a supervised run ended, once its end markers were read.
pub(super) enum Finished {
    /// The supervisor reported how the program ended (or the local wait
    /// ran out: [`Termination::TimedOut`]): the markers are stripped, the
    /// status is the program's.
    Ended(Output),
    /// Nothing ran: the working directory, `setsid` or the program is
    /// missing on the machine.
    Refused(TransportError),
    /// The supervisor ended without its end marker (it was killed, the
    /// carrier failed): no honest status. The transport says why, from
    /// what it saw; the guard stays armed.
    Unreported(Output),
}

impl Supervised {
    /// A fresh run with `budget` (the nonce is random).
    pub(super) fn new(budget: Duration) -> Supervised {
        let mut nb = [0u8; 12];
        let _ = getrandom::fill(&mut nb);
        Supervised {
            nonce: format!("saphan-{}", hex::encode(nb)),
            budget,
            pgid: Arc::new(Mutex::new(None)),
        }
    }

    /// The argv to run on the machine (`sh -c WATCHDOG saphan-run …`, see
    /// the module docs). Errors: `bad-argument` (a word that is not UTF-8
    /// or holds a NUL, an environment name that is empty or holds `=`).
    pub(super) fn argv(&self, cmd: &Cmd) -> Result<Vec<String>, TransportError> {
        remote_argv(cmd, &self.nonce, self.budget)
    }

    /// How long the local side waits for the run to report: budget +
    /// [`GRACE`] + [`LINK_SLACK`].
    pub(super) fn wait(&self) -> Duration {
        self.budget + GRACE + LINK_SLACK
    }

    /// A scan of the run's stderr for its process group and containment.
    pub(super) fn scan(&self) -> GroupScan {
        GroupScan::new(&self.nonce, self.pgid.clone())
    }

    /// The guard that kills the run's group with `kill` unless the run's
    /// end was read ([`Supervised::finish`] disarms it).
    pub(super) fn guard(&self, kill: KillGroup) -> GroupGuard {
        GroupGuard::new(kill, self.pgid.clone())
    }

    /// Read how the run ended from `out` (what the carrier returned for
    /// it): strip the markers, map the final one to a [`Termination`],
    /// disarm `guard` when the group is known to be gone. `machine` names
    /// the machine in a [`TransportError::RemoteSpawn`].
    pub(super) fn finish(
        &self,
        mut out: Output,
        cmd: &Cmd,
        machine: &str,
        guard: &mut GroupGuard,
    ) -> Finished {
        if out.status == Termination::TimedOut {
            // The machine did not report within budget + grace + slack: the
            // guard's drop asks it to kill the group (its own watchdog does
            // anyway).
            let _ = split_markers(&mut out.stderr, &self.nonce);
            return Finished::Ended(out);
        }
        let lost = out.status == Termination::OutputLost;
        let end = split_markers(&mut out.stderr, &self.nonce);
        let spawn = |why: String| {
            Finished::Refused(TransportError::RemoteSpawn {
                alias: machine.to_string(),
                program: cmd.program().to_string_lossy().into_owned(),
                detail: why,
            })
        };
        out.status = match end {
            Some(End::Exit(c)) => Termination::of_reported_status(c),
            Some(End::TimedOut) => Termination::TimedOut,
            Some(End::NoCwd) => {
                guard.disarm();
                return spawn(format!(
                    "the working directory {} does not exist there",
                    cmd.working_dir()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default()
                ));
            }
            Some(End::NoSetsid) => {
                guard.disarm();
                return spawn(
                    "`setsid` is not installed there (util-linux or busybox provides it)".into(),
                );
            }
            Some(End::NoProgram) => {
                guard.disarm();
                return spawn("no such program on the machine's PATH".into());
            }
            // The wrapper itself died (the shell was killed, the carrier
            // failed, or the machine's sh is not POSIX).
            None => return Finished::Unreported(out),
        };
        guard.disarm();
        if lost && out.status != Termination::TimedOut {
            out.status = Termination::OutputLost;
        }
        Finished::Ended(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_stripped_and_read() {
        let mut e = b"noise\nsaphan-x pgid 42\nboom\n\nsaphan-x exit 3\n".to_vec();
        assert_eq!(split_markers(&mut e, "saphan-x"), Some(End::Exit(3)));
        assert_eq!(e, b"noise\nboom\n");
        let mut e = b"saphan-x pgid 42\n\nsaphan-x timeout\n".to_vec();
        assert_eq!(split_markers(&mut e, "saphan-x"), Some(End::TimedOut));
        assert_eq!(e, b"");
        let mut e = b"no marker".to_vec();
        assert_eq!(split_markers(&mut e, "saphan-x"), None);
        // What a carrier says after the supervisor's last line (srun, as
        // the step is torn down) is kept, and is no marker of its own.
        let mut e =
            b"boom\n\nsaphan-x exit 0\nslurmstepd-n1: error: *** STEP 4.2 ON n1 CANCELLED ***\n"
                .to_vec();
        assert_eq!(split_markers(&mut e, "saphan-x"), Some(End::Exit(0)));
        assert_eq!(
            e,
            b"boom\nslurmstepd-n1: error: *** STEP 4.2 ON n1 CANCELLED ***\n"
        );
    }

    #[test]
    fn the_scan_finds_the_group_across_chunks() {
        let found = Arc::new(Mutex::new(None));
        let mut s = GroupScan::new("saphan-x", found.clone());
        s.feed(&vec![b'y'; 100_000]);
        s.feed(b"sapha");
        s.feed(b"n-x pg");
        s.feed(b"id 77");
        s.feed(b"1\nrest");
        assert_eq!(*found.lock().unwrap(), Some(771));
    }

    /// The watchdog script itself, run by the local `sh`: its budget kills
    /// a group whose grandchild holds stdout, and the markers come out.
    #[test]
    fn the_watchdog_script_enforces_the_budget_locally() {
        let t0 = std::time::Instant::now();
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                WATCHDOG,
                "saphan-run",
                "N1",
                "0.5",
                "0.5",
                "",
                INNER,
                "+A=b c",
                "--",
            ])
            .args(["sh", "-c", "echo \"$A\"; sleep 300 & wait"])
            .output()
            .unwrap();
        let mut e = out.stderr.clone();
        assert_eq!(
            split_markers(&mut e, "N1"),
            Some(End::TimedOut),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "b c\n");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}
