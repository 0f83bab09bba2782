//! The Slurm side of [`super::Transport`]: a node of an allocation saphan
//! holds (`crate::slurm` borrows it), reached by running `srun` here.
//!
//! Every command is one job step on the node:
//!
//! ```text
//! srun --jobid JOB --nodelist NODE --overlap -N1 -n1 --quiet --export=NONE --chdir=/ \
//!      /bin/sh -c SLURM_LOGIN saphan-slurm-login LINE
//! ```
//!
//! run as a local process through [`crate::exec::run`] (`SLURM_CONF` set
//! when the pool names a config; every inherited Slurm input variable —
//! `SLURM_*`, `SALLOC_*`, `SRUN_*`, `SQUEUE_*`, … — removed, so a saphan
//! that itself runs inside a Slurm job, as CI runners on clusters do, steers
//! none of its calls by accident). `LINE` is the command quoted for a POSIX
//! shell, as over SSH: srun does *not* pass its argv through verbatim — an
//! argument that is exactly `:` anywhere in it is taken as the separator of
//! a heterogeneous job ("srun: fatal: No command given to execute"), so no
//! word of the command is ever an argument of srun. `--export=NONE` keeps
//! this machine's environment off the node (srun copies all of it by
//! default); [`SLURM_LOGIN`] (`src/remote/slurm-login.sh`) gives the line
//! what sshd gives a command: `HOME`, `USER`, `LOGNAME`, `SHELL` from the
//! node's passwd entry, a standard `PATH`, the home directory as working
//! directory.
//!
//! [`Srun::run`] runs the line under the same supervisor as an SSH machine
//! ([`super::watchdog`]: its own process group on the node, the budget
//! enforced there, `NONCE exit CODE` markers), with stdin forwarded by srun,
//! stdout to a local file or captured whole (at most
//! [`crate::exec::REMOTE_STDOUT_WHOLE`]), stderr's tail. A run dropped
//! before its end (Ctrl-C) kills its local `srun` (its group: Slurm then
//! cancels the step, which ends every process of it on the node within
//! ~60 ms, measured) and kills the node's group in another step
//! (`kill -s KILL -- -PGID`), in the background.
//!
//! What srun says is not the command's: srun exits 0 when the node died
//! under a step (`srun: error: Node failure on n1`, after `SlurmdTimeout`),
//! and with the task's code or 1 otherwise. So the supervisor's end marker
//! alone says how the command ended; a step that ends without it — the node
//! failed, the job was cancelled or ran past its time limit, the step could
//! not be created or launched — is [`TransportError::SlurmStep`]
//! (`slurm-step-failed`, an infrastructure failure), carrying srun's own
//! words. The commands run outside the supervisor ([`super::Transport::exec`],
//! `put`, `get`) are read the same way: srun's own error lines, other than
//! its report of the task's exit, make the step a failure of Slurm's.

use super::watchdog::{Finished, KillGroup, Supervised};
use super::{TransportError, ssh::command_line};
use crate::exec::{
    self, Cmd, Input, Output, REMOTE_STDOUT_WHOLE, Sink, StderrWatch, Termination, WholeBuf,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The login of a command on a borrowed node
/// (`src/remote/slurm-login.sh`): `$1` is the command line.
pub const SLURM_LOGIN: &str = crate::remote::SLURM_LOGIN;

/// Budget for one `put` or `get`, and for a [`Srun::run`] whose command
/// has none (as [`super::SshOptions::transfer_timeout`]'s default).
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// Budget for one call of a Slurm client program that asks slurmctld
/// something (`squeue`, `sinfo`, `scontrol`, `scancel`): slurmctld answers
/// in milliseconds; past this it is down or unreachable.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The prefixes of the environment variables Slurm's client programs read
/// as defaults for their options (their man pages, "INPUT ENVIRONMENT
/// VARIABLES"), plus the `SLURM_*` a Slurm job's processes carry.
const CLIENT_INPUT: &[&str] = &[
    "SLURM_",
    "SALLOC_",
    "SBATCH_",
    "SRUN_",
    "SQUEUE_",
    "SINFO_",
    "SCANCEL_",
    "SCONTROL_",
];

/// A Slurm client program (`srun`, `salloc`, `squeue`, `sinfo`, `scontrol`,
/// `scancel`) as a [`Cmd`]: every inherited Slurm input variable removed
/// (a saphan running inside a Slurm job would otherwise hand the job's
/// `SLURM_NTASKS`, `SQUEUE_FORMAT`, … to its own calls) except
/// `SLURM_CONF`, which is set to `conf` when one is named. No budget: the
/// caller sets one.
pub fn client(program: &str, conf: Option<&Path>) -> Cmd {
    let mut c = Cmd::new(program);
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if k != "SLURM_CONF" && CLIENT_INPUT.iter().any(|p| k.starts_with(p)) {
            c = c.env_remove(k);
        }
    }
    if let Some(conf) = conf {
        c = c.env("SLURM_CONF", conf);
    }
    c
}

/// One node of a Slurm allocation, as a machine: what
/// [`super::Transport::Slurm`] is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// The allocation's job id.
    pub job: u64,
    /// The node's name in Slurm (`n0`).
    pub node: String,
    /// The `slurm.conf` the pool names (`SLURM_CONF` for every call);
    /// `None`: the environment's or Slurm's default.
    pub conf: Option<PathBuf>,
    /// The machine's id in records and output: `POOL/NODE`.
    pub id: String,
}

/// A borrowed Slurm node (see the module docs). Cheap to clone; clones
/// share what was learned of the node.
#[derive(Debug, Clone)]
pub struct Srun {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    node: SlurmNode,
    /// What the supervisor reported for the last command that carried
    /// the scratch marker.
    containment: Mutex<Option<exec::Containment>>,
    /// Why a step on the node failed for Slurm's reasons, once one did
    /// ([`Srun::connection_gone`]).
    gone: Mutex<Option<String>>,
}

impl Srun {
    /// The node as a machine. Nothing is run until a command is.
    pub fn new(node: SlurmNode) -> Srun {
        Srun {
            inner: Arc::new(Inner {
                node,
                containment: Mutex::new(None),
                gone: Mutex::new(None),
            }),
        }
    }

    /// The node this transport reaches.
    pub fn node(&self) -> &SlurmNode {
        &self.inner.node
    }

    /// `slurm NODE (job JOB)`.
    pub fn describe(&self) -> String {
        let n = &self.inner.node;
        format!("slurm {} (job {})", n.node, n.job)
    }

    /// What the supervisor reported for the last command that carried the
    /// scratch marker (`None` before one ran).
    pub fn containment(&self) -> Option<exec::Containment> {
        self.inner.containment.lock().ok().and_then(|g| *g)
    }

    /// `Some(why)` once the node cannot be reached through its allocation
    /// any more: a step on it failed for Slurm's reasons
    /// ([`TransportError::SlurmStep`], remembered), or — asked of slurmctld
    /// now, one `squeue` bounded by [`CLIENT_TIMEOUT`] — the job is no
    /// longer running on the node (ended, cancelled, or the node left it
    /// after a failure). `None` while the job runs there, or when slurmctld
    /// could not be asked (nothing is declared lost on a guess).
    pub async fn connection_gone(&self) -> Option<String> {
        if let Some(why) = self.inner.gone.lock().ok().and_then(|g| g.clone()) {
            return Some(why);
        }
        let why = step_target_gone(&self.inner.node).await?;
        if let Ok(mut g) = self.inner.gone.lock() {
            g.get_or_insert(why.clone());
        }
        Some(why)
    }

    /// The srun step that runs `line` on the node (see the module docs).
    fn step(&self, line: &str) -> Cmd {
        let n = &self.inner.node;
        client("srun", n.conf.as_deref())
            .args(["--jobid", &n.job.to_string(), "--nodelist", &n.node])
            .args([
                "--overlap",
                "-N1",
                "-n1",
                "--quiet",
                "--export=NONE",
                "--chdir=/",
            ])
            .args(["/bin/sh", "-c", SLURM_LOGIN, "saphan-slurm-login", line])
    }

    /// Run the step for `line` here; a local failure to start `srun` is
    /// `spawn`.
    async fn run_step(&self, step: Cmd) -> Result<Output, TransportError> {
        exec::run(step)
            .await
            .map_err(|source| TransportError::Spawn {
                program: "srun".into(),
                source,
            })
    }

    /// [`TransportError::SlurmStep`] for this node with srun's `words`,
    /// remembered for [`Srun::connection_gone`].
    fn step_failed(&self, words: String) -> TransportError {
        let n = &self.inner.node;
        if let Ok(mut g) = self.inner.gone.lock() {
            g.get_or_insert_with(|| {
                format!("a step on {} of job {} failed: {words}", n.node, n.job)
            });
        }
        TransportError::SlurmStep {
            machine: n.id.clone(),
            job: n.job,
            node: n.node.clone(),
            words,
        }
    }

    /// How a dropped run's group is killed: `kill -s KILL -- -PGID` in
    /// another step on the node.
    fn killer(&self) -> KillGroup {
        let s = self.clone();
        Arc::new(move |p, bound| {
            let s = s.clone();
            Box::pin(async move {
                let argv = ["kill", "-s", "KILL", "--", &format!("-{p}")].map(String::from);
                let _ = s.exec(&argv, bound, None).await;
            })
        })
    }

    /// Run `cmd` on the node under the supervisor ([`super::watchdog`]):
    /// the same [`Output`] meaning as [`crate::exec::run`] and
    /// [`super::Ssh::run`]. Without a budget in `cmd`,
    /// [`TRANSFER_TIMEOUT`] applies.
    ///
    /// Errors: `bad-argument`, `argument-too-long` (the quoted line),
    /// `spawn` (`srun` cannot be started here; the program, `setsid` or the
    /// working directory is missing on the node), `slurm-step-failed` (the
    /// step ended without the supervisor's end marker: srun's words).
    pub async fn run(&self, cmd: Cmd) -> Result<Output, TransportError> {
        let run = Supervised::new(cmd.budget().unwrap_or(TRANSFER_TIMEOUT));
        let line = command_line(&run.argv(&cmd)?)?;
        let scan = Arc::new(Mutex::new(run.scan()));
        let watch = {
            let scan = scan.clone();
            StderrWatch::new(move |b| {
                if let Ok(mut s) = scan.lock() {
                    s.feed(b);
                }
            })
        };
        let capture = !matches!(cmd.sink(), Sink::File(_) | Sink::Null);
        let step = self
            .step(&line)
            .timeout(run.wait())
            .input(cmd.stdin_input().clone())
            .stdout(cmd.sink().clone())
            .watch_stderr(watch);
        let mut guard = run.guard(self.killer());
        let out = exec::run(step).await.map_err(|source| match cmd.sink() {
            Sink::File(p) => TransportError::Copy {
                what: format!("the stdout of `{}` to {}", cmd.display(), p.display()),
                source,
            },
            _ => TransportError::Spawn {
                program: "srun".into(),
                source,
            },
        })?;
        if let Some(c) = scan.lock().ok().and_then(|s| s.containment())
            && let Ok(mut g) = self.inner.containment.lock()
        {
            *g = Some(c);
        }
        let out = if capture { remote_cap(out) } else { out };
        match run.finish(out, &cmd, &self.inner.node.id, &mut guard) {
            Finished::Ended(out) => Ok(out),
            Finished::Refused(e) => Err(e),
            Finished::Unreported(out) => {
                let said = srun_words(&out.stderr);
                let words = said.failure.or(said.tasks).unwrap_or_else(|| {
                    format!(
                        "srun ended ({:?}) without the supervisor's report of how `{}` ended",
                        out.status,
                        cmd.display()
                    )
                });
                Err(self.step_failed(words))
            }
        }
    }

    /// Run `argv` on the node (no supervisor: the line is the argv, quoted)
    /// with `timeout` enforced here — killing `srun` cancels the step.
    /// stdout captured, from `begin` on when given
    /// ([`crate::exec::Sink::CaptureFrom`]).
    ///
    /// Errors: `bad-argument`, `argument-too-long`, `spawn` (no `srun`
    /// here), `slurm-step-failed`.
    pub(super) async fn exec(
        &self,
        argv: &[String],
        timeout: Duration,
        begin: Option<Vec<u8>>,
    ) -> Result<Output, TransportError> {
        let line = command_line(argv)?;
        let sink = match begin {
            Some(m) => Sink::CaptureFrom(m),
            None => Sink::Capture,
        };
        let out = self
            .run_step(self.step(&line).timeout(timeout).stdout(sink))
            .await?;
        self.step_output(remote_cap(out))
    }

    /// Read a step run outside the supervisor: srun's own failure words
    /// make it [`TransportError::SlurmStep`]; its report of the task's end
    /// (`srun: error: n1: task 0: Exited with exit code 3`) is dropped from
    /// stderr, and a task killed by a signal (srun exits 128 + N and says
    /// so) is [`Termination::Signaled`].
    fn step_output(&self, mut out: Output) -> Result<Output, TransportError> {
        if out.status == Termination::TimedOut {
            return Ok(out);
        }
        let w = srun_words(&out.stderr);
        if let Some(words) = w.failure {
            return Err(self.step_failed(words));
        }
        if w.tasks.is_some() {
            out.stderr = w.rest;
            if let Termination::Exited(c) = out.status
                && c > 128
                && c < 128 + 65
            {
                out.status = Termination::Signaled(c - 128);
            }
        }
        Ok(out)
    }

    /// Copy a local file to `remote` on the node: `put.sh` reads it on
    /// stdin (forwarded by srun), writes a temp file beside `remote` with
    /// the local file's permission bits and renames it into place.
    ///
    /// Errors: `copy` (the local file; the node could not write it),
    /// `remote-timeout` (past [`TRANSFER_TIMEOUT`]), `spawn`,
    /// `slurm-step-failed`.
    pub async fn put(&self, local: &Path, remote: &str) -> Result<(), TransportError> {
        use std::os::unix::fs::PermissionsExt;
        let what = format!("{} to {}:{remote}", local.display(), self.inner.node.id);
        let mode = tokio::fs::metadata(local)
            .await
            .map_err(|source| TransportError::Copy {
                what: what.clone(),
                source,
            })?
            .permissions()
            .mode()
            & 0o7777;
        let line = command_line(&[
            "sh",
            "-c",
            crate::remote::PUT,
            "saphan-put",
            remote,
            &format!("{mode:o}"),
        ])?;
        let out = self
            .run_step(
                self.step(&line)
                    .timeout(TRANSFER_TIMEOUT)
                    .input(Input::File(local.to_path_buf()))
                    .stdout(Sink::Null),
            )
            .await?;
        self.transfer_result(&what, self.step_output(out)?)
    }

    /// Copy `remote` on the node to a local file: `cat` into a temp file
    /// beside `local`, renamed into place once whole.
    ///
    /// Errors: as [`Srun::put`].
    pub async fn get(&self, remote: &str, local: &Path) -> Result<(), TransportError> {
        let what = format!("{}:{remote} to {}", self.inner.node.id, local.display());
        let copy_err = |source| TransportError::Copy {
            what: what.clone(),
            source,
        };
        let dir = match local.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".saphan-get.")
            .tempfile_in(&dir)
            .map_err(copy_err)?;
        let line = command_line(&["cat", "--", remote])?;
        let out = self
            .run_step(
                self.step(&line)
                    .timeout(TRANSFER_TIMEOUT)
                    .stdout(Sink::File(tmp.path().to_path_buf())),
            )
            .await?;
        self.transfer_result(&what, self.step_output(out)?)?;
        tmp.persist(local).map_err(|e| copy_err(e.error))?;
        Ok(())
    }

    fn transfer_result(&self, what: &str, out: Output) -> Result<(), TransportError> {
        match out.status {
            Termination::Exited(0) => Ok(()),
            Termination::TimedOut => Err(TransportError::RemoteTimeout {
                alias: self.inner.node.id.clone(),
                what: format!("copying {what}"),
                budget: TRANSFER_TIMEOUT,
            }),
            other => Err(TransportError::RemoteCopy {
                what: what.to_string(),
                detail: format!("{other:?}: {}", out.stderr_str()),
            }),
        }
    }
}

/// A captured stdout held to [`REMOTE_STDOUT_WHOLE`], as from an SSH
/// machine: past it none of it is kept, the run is
/// [`Termination::OutputLost`] and its stderr opens with the
/// [`exec::output_lost_line`] saying why. (`exec::run` captured up to its
/// local cap first.)
fn remote_cap(mut out: Output) -> Output {
    if out.stdout.len() <= REMOTE_STDOUT_WHOLE {
        return out;
    }
    let mut w = WholeBuf::new(REMOTE_STDOUT_WHOLE);
    w.push(&out.stdout);
    let why = w.overflow_why().unwrap_or_default();
    out.stdout = Vec::new();
    out.stderr
        .splice(0..0, exec::output_lost_line(&why).into_bytes());
    if out.status != Termination::TimedOut {
        out.status = Termination::OutputLost;
    }
    out
}

/// What srun (and the node's slurmstepd, through it) said on a step's
/// stderr, apart from the command's own lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SrunWords {
    /// Its error lines that say the step failed (it could not be created
    /// or launched, the node failed, the job or step was cancelled, timed
    /// out or expired), joined with `; `.
    pub failure: Option<String>,
    /// Its reports of how the task ended (`n1: task 0: Killed`), joined.
    pub tasks: Option<String>,
    /// stderr without the task reports.
    pub rest: Vec<u8>,
}

/// Split srun's own lines from a step's stderr. srun's lines open with
/// `srun: ` (`error:`, `fatal:`, or a notice such as `Job step aborted`),
/// the node's with `slurmstepd` (`slurmstepd-n1: error: *** STEP 4.2 ON n1
/// CANCELLED AT … ***`). A task report is `srun: error: NODE: task(s) LIST:
/// WHAT` — `Exited with exit code N`, or a signal's name.
pub(crate) fn srun_words(stderr: &[u8]) -> SrunWords {
    let text = String::from_utf8_lossy(stderr);
    let (mut failure, mut tasks, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if let Some(report) = task_report(l) {
            tasks.push(report.to_string());
            continue;
        }
        let ours = l.starts_with("srun: ")
            || (l.starts_with("slurmstepd")
                && l.split_once(": ")
                    .is_some_and(|(who, _)| !who.contains(' ')));
        if ours && !l.starts_with("srun: Warning") {
            failure.push(l.to_string());
        }
        rest.extend_from_slice(line.as_bytes());
    }
    let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join("; "));
    SrunWords {
        failure: join(failure),
        tasks: join(tasks),
        rest,
    }
}

/// `NODE: task 0: WHAT` when `l` is srun's report of a task's end.
fn task_report(l: &str) -> Option<&str> {
    let r = l.strip_prefix("srun: error: ")?;
    let (node, after) = r.split_once(": ")?;
    if node.contains(' ') {
        return None;
    }
    let after = after
        .strip_prefix("task ")
        .or_else(|| after.strip_prefix("tasks "))?;
    let (list, what) = after.split_once(": ")?;
    (list
        .chars()
        .all(|c| c.is_ascii_digit() || "-,[]".contains(c))
        && !what.is_empty())
    .then_some(r)
}

/// What a failed Slurm client call said on stderr, as far as saphan acts
/// on it: the client programs of slurm-wlm 22.05 print these words (a
/// foreign format, read here once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSays {
    /// It has no configuration to reach a cluster with: "Unable to process
    /// configuration file", "fetch_config: DNS SRV lookup failed",
    /// "_establish_config_source: failed to fetch config".
    NoConfig,
    /// The job named is unknown to slurmctld (never was, or ended and was
    /// purged): "Invalid job id specified".
    UnknownJob,
    /// Anything else.
    Other,
}

/// Read a Slurm client's stderr ([`ClientSays`]).
pub fn client_says(stderr: &[u8]) -> ClientSays {
    let text = String::from_utf8_lossy(stderr);
    if text.contains("Invalid job id") {
        ClientSays::UnknownJob
    } else if text.contains("configuration file")
        || text.contains("fetch config")
        || text.contains("fetch_config")
    {
        ClientSays::NoConfig
    } else {
        ClientSays::Other
    }
}

/// Whether the job of `n` still runs on its node, asked of slurmctld (one
/// `squeue -j JOB --nodelist NODE`, [`CLIENT_TIMEOUT`]): `Some(why)` when it
/// does not — the job is unknown (ended and purged), in another state than
/// running, or no longer holds the node; `None` when it runs there, or when
/// slurmctld could not be asked.
pub async fn step_target_gone(n: &SlurmNode) -> Option<String> {
    let out = exec::run(
        client("squeue", n.conf.as_deref())
            .args(["--noheader", "--jobs", &n.job.to_string()])
            .args(["--states=all", "--format=%T|%N"])
            .timeout(CLIENT_TIMEOUT),
    )
    .await
    .ok()?;
    let text = out.stdout_str();
    if !out.status.success() {
        return (client_says(&out.stderr) == ClientSays::UnknownJob)
            .then(|| format!("job {} is gone ({})", n.job, out.stderr_str()));
    }
    let Some((state, nodes)) = text.lines().next().and_then(|l| l.split_once('|')) else {
        return Some(format!("job {} is gone (squeue lists it no more)", n.job));
    };
    if state != "RUNNING" {
        return Some(format!("job {} is {state}", n.job));
    }
    let holds = exec::run(
        client("scontrol", n.conf.as_deref())
            .args(["show", "hostnames", nodes])
            .timeout(CLIENT_TIMEOUT),
    )
    .await
    .ok()
    .filter(|o| o.status.success())
    .map(|o| o.stdout_str().lines().any(|l| l.trim() == n.node));
    match holds {
        Some(false) => Some(format!(
            "node {} has left job {} (it holds {nodes} now)",
            n.node, n.job
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srun_failure_words_are_told_from_task_reports_and_the_commands_lines() {
        // Measured on slurm-wlm 22.05.8 (shared/LAB.md's lab).
        let e = b"boom\nsrun: error: n1: task 0: Exited with exit code 3\n";
        let w = srun_words(e);
        assert_eq!(w.failure, None);
        assert_eq!(
            w.tasks.as_deref(),
            Some("n1: task 0: Exited with exit code 3")
        );
        assert_eq!(w.rest, b"boom\n");

        let e = b"started\nsrun: error: Node failure on n1\n";
        assert_eq!(
            srun_words(e).failure.as_deref(),
            Some("srun: error: Node failure on n1")
        );

        let e = b"slurmstepd-n1: error: *** STEP 1.14 ON n1 CANCELLED AT 2026-12-06T06:18:55 ***\nsrun: error: n1: task 0: Terminated\n";
        let w = srun_words(e);
        assert_eq!(
            w.failure.as_deref(),
            Some("slurmstepd-n1: error: *** STEP 1.14 ON n1 CANCELLED AT 2026-12-06T06:18:55 ***")
        );
        assert_eq!(w.tasks.as_deref(), Some("n1: task 0: Terminated"));

        let e = b"srun: error: Unable to create step for job 4: Requested node configuration is not available\n";
        assert!(
            srun_words(e)
                .failure
                .unwrap()
                .contains("Unable to create step")
        );
        let e = b"srun: error: Slurm job 1 has expired\n";
        assert!(srun_words(e).failure.is_some());

        // The command's own lines that merely mention srun are its own.
        let e = b"my srun: error: not srun\nslurmstepd is a word here\n";
        let w = srun_words(e);
        assert_eq!(w.failure, None);
        assert_eq!(w.rest, e);
    }

    #[test]
    fn a_clients_words_say_no_config_or_an_unknown_job() {
        let said = |t: &str| client_says(t.as_bytes());
        assert_eq!(
            said("slurm_load_jobs error: Invalid job id specified\n"),
            ClientSays::UnknownJob
        );
        assert_eq!(
            said(
                "squeue: error: s_p_parse_file: cannot stat file /x\nsqueue: fatal: Unable to process configuration file\n"
            ),
            ClientSays::NoConfig
        );
        assert_eq!(
            said(
                "squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\nsqueue: error: fetch_config: DNS SRV lookup failed\n"
            ),
            ClientSays::NoConfig
        );
        assert_eq!(
            said("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"),
            ClientSays::Other
        );
    }

    #[test]
    fn a_capture_past_the_remote_cap_is_lost_whole() {
        let out = Output {
            status: Termination::Exited(0),
            stdout: vec![b'x'; REMOTE_STDOUT_WHOLE + 1],
            stderr: b"tail\n".to_vec(),
            elapsed: Duration::ZERO,
        };
        let out = remote_cap(out);
        assert_eq!(out.status, Termination::OutputLost);
        assert!(out.stdout.is_empty());
        assert!(
            out.lost_why().unwrap().contains("16 MiB"),
            "{:?}",
            out.lost_why()
        );
        let at = Output {
            status: Termination::Exited(0),
            stdout: vec![b'x'; REMOTE_STDOUT_WHOLE],
            stderr: Vec::new(),
            elapsed: Duration::ZERO,
        };
        assert_eq!(remote_cap(at).status, Termination::Exited(0));
    }

    #[test]
    fn the_client_drops_inherited_slurm_input_but_keeps_the_config() {
        let c = client("squeue", Some(Path::new("/etc/x/slurm.conf")));
        let set: Vec<_> = c
            .env_changes()
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(set, ["SLURM_CONF"]);
        assert!(
            !c.env_changes()
                .iter()
                .any(|(k, v)| k == "SLURM_CONF" && v.is_none())
        );
    }
}
