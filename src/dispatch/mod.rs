//! Dispatch: the same measurement as a local certify, executed on admitted
//! fleet machines (DESIGN §6a; operator's view: docs/dispatch.md).
//!
//! Order of one dispatched run, every refusal before anything is shipped:
//! 1. local refusals (the caller: bad repo/revision, no suite, bad config,
//!    provision sources);
//! 2. [`admit`] from the ledger only, per machine;
//! 3. connect to every machine; a program no catalog row maps is resolved
//!    there and refused if absent;
//! 4. per machine, concurrently: [`ship`] only the commits the mirror lacks,
//!    take the repository's lock on the machine (`flock`, held by a process
//!    fed by this side's channel), materialize the stable scratch tree from
//!    the mirror ([`crate::worktree::add_at`], which also reaps what a lost
//!    connection left; submodules from the mirror), then the one measurement
//!    core ([`measure::run_suite_with`]: provisions placed and hashed there,
//!    the suite under the budget enforced on the machine, reports collected
//!    through the transport, the same parsers), remove the tree;
//! 5. record locally, one record per machine
//!    ([`crate::measure::pipeline::record_of`]); every record is appended,
//!    then the pointer moves only when every named machine is green
//!    ([`crate::measure::conclude`]).
//!
//! A fleet machine is a [`FleetBench`] of the one pipeline
//! ([`crate::measure::pipeline`]). The seam for other execution classes is
//! [`Executor`] (the core's): the bench takes the executor that runs the
//! suite's command in the shipped tree on the machine.

pub mod admit;
pub mod fault;
mod lock;
pub mod ship;

use crate::error::Result;
use crate::exec::{self, Cmd};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::bench::{Bench, BenchFuture, Measured, Shipped};
use crate::measure::progress::Event;
use crate::measure::{self, SuiteRun};
use crate::provision::ProvisionError;
use crate::record::{Phase, Phases};
use crate::report::FailureKind;
use crate::transport::Transport;
pub use admit::{Admitted, admit_all, machine_ids};
pub use fault::{DispatchError, DispatchFault};
use lock::MachineLock;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

pub use crate::transport::{CONNECT_TIMEOUT, CONTROL_TIMEOUT};
/// How long an attempt may wait for the repository's lock on the machine.
pub const LOCK_WAIT: Duration = Duration::from_secs(60);

pub use crate::measure::pipeline::Job;
pub use crate::measure::progress::{Progress, Silent};
pub use crate::measure::{Executor, Host as HostExecutor};

/// The repository key on a machine: the same key local certify uses for
/// its stable scratch path.
pub fn repo_key(repo: &Repo) -> String {
    crate::measure::bench::repo_key(repo)
}

/// Connect to an admitted machine and, when no catalog row maps the
/// program, resolve it there (refused if absent). Connection failures are
/// faults (the attempt is recorded as measurement-failed), not refusals —
/// except an ssh config, a file it includes or a known_hosts file it names
/// that others can change: that is `saphan-home-exposed`, a refusal before
/// anything was run on any machine (exit 2, nothing recorded), as every
/// other command refuses it.
pub async fn connect(
    home: &Home,
    m: &Admitted,
) -> Result<std::result::Result<Transport, DispatchFault>> {
    let t = match crate::fleet::machines::connect(home, &m.row, CONNECT_TIMEOUT).await {
        Ok(t) => t,
        Err(crate::fleet::FleetError::Transport { source, .. })
            if matches!(
                *source,
                crate::transport::TransportError::ConfigExposed { .. }
            ) =>
        {
            return Err((*source).into());
        }
        Err(e) => {
            let e: crate::error::Error = e.into();
            return Ok(Err(DispatchFault::new(
                FailureKind::of(&e),
                e.inner().to_string(),
            )));
        }
    };
    if m.capability.is_none() {
        let prog = m.argv[0].clone();
        // A path relative to the tree (`./run-tests.sh`) is the SHA's own file.
        let in_tree = prog.contains('/') && !prog.starts_with('/');
        // `saphan` (the bundled adapter) is this very binary, shipped.
        if !in_tree && prog != "saphan" {
            let argv: Vec<String> = vec![
                "sh".into(),
                "-c".into(),
                crate::remote::RESOLVE.into(),
                "saphan-resolve".into(),
                prog.clone(),
            ];
            match t.exec(&argv, CONTROL_TIMEOUT).await {
                Ok(o) if o.status.success() => {}
                Ok(o) => {
                    return Err(DispatchError::ProgramAbsent {
                        machine: m.row.id.clone(),
                        program: prog,
                        detail: format!("`command -v` found nothing ({:?})", o.status),
                    }
                    .into());
                }
                Err(e) => return Ok(Err(DispatchFault::transport(e))),
            }
        }
    }
    Ok(Ok(t))
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// One run of a machine's [`session`]: what a [`Feed`] hands out.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The suite's argv for this run, as admitted (`saphan` is mapped to
    /// the shipped binary there).
    pub argv: Vec<String>,
    /// The run's environment beyond the suite's own (instead of the job's
    /// `extra_env`).
    pub env: Vec<(String, String)>,
}

/// Where a machine's [`session`] gets its runs from, and where their
/// measurements go.
pub trait Feed: Send + Sync {
    /// The next run on this machine, asked once the tree is ready and again
    /// after every run; `None` ends the session. A session that failed
    /// before its tree was ready asks once too, and that run is measured
    /// as the failure (so every failure is some run's record).
    fn next(&self) -> Pin<Box<dyn Future<Output = Option<Batch>> + Send + '_>>;
    /// The measurement of the run `next` handed out last.
    fn done(&self, measured: Measured);
    /// At most how many runs this session will be handed (the machine's
    /// lock is held for that many budgets at the longest).
    fn runs_at_most(&self) -> usize {
        1
    }
    /// The machine left an SSH ping unanswered for half a
    /// `ServerAliveInterval` while the run `next` handed out last was
    /// running: it may be cut off (it is declared lost only at the
    /// keep-alive limit). Told once per run; the run goes on.
    fn suspect(&self) {}
    /// Resolves when the run `next` handed out last is no longer needed
    /// (a copy whose first attempt answered): the run is stopped — its
    /// group killed, its tree removed — and measured `interrupted`, which
    /// ends the session. Never, by default.
    fn unneeded(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
    /// Resolves once a wait in [`Feed::next`] may be a wait for other
    /// machines' work (the plan is in, or nothing more is handed out):
    /// the session asks `next` first and, when it is not ready then, lets
    /// go of the machine's repository lock until it is handed a batch —
    /// an idle session never holds a lock another invocation waits for.
    /// Never, by default (a feed whose `next` never waits on others).
    fn idle(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
    /// Resolves once the invocation's work is over: every batch has its
    /// answer and none is pending or running anywhere (what is left is
    /// cleaning up). Never, by default (a feed of one run: its session's
    /// end is the work's).
    fn finished(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
}

/// A feed of one run, for [`measure_on`].
struct Once {
    batch: std::sync::Mutex<Option<Batch>>,
    measured: std::sync::Mutex<Option<Measured>>,
}

impl Feed for Once {
    fn next(&self) -> Pin<Box<dyn Future<Output = Option<Batch>> + Send + '_>> {
        let b = self.batch.lock().ok().and_then(|mut b| b.take());
        Box::pin(async move { b })
    }
    fn done(&self, measured: Measured) {
        if let Ok(mut m) = self.measured.lock() {
            *m = Some(measured);
        }
    }
}

/// Ship, materialize, run and collect `job` on the connected machine `m`:
/// every outcome after admission is a [`Measured`] (a failure is a failed
/// measurement naming its cause); refusals found on the machine before the
/// suite ran (a provision dest conflict) are errors. One run of
/// [`session`].
pub async fn measure_on(
    job: &Job<'_>,
    m: &Admitted,
    connected: std::result::Result<Transport, DispatchFault>,
    connect_time: Duration,
    executor: &dyn Executor,
) -> Result<Measured> {
    let once = Once {
        batch: std::sync::Mutex::new(Some(Batch {
            argv: m.argv.clone(),
            env: job.extra_env.to_vec(),
        })),
        measured: std::sync::Mutex::new(None),
    };
    session(job, m, connected, connect_time, executor, &once).await?;
    let measured = once.measured.lock().ok().and_then(|mut m| m.take());
    // A session measures the run it was handed on every path.
    Ok(measured.unwrap_or_else(|| Measured {
        run: SuiteRun::not_run(FailureKind::ConnectionLost, "nothing ran"),
        argv: m.argv.clone(),
        notes: Vec::new(),
        fleet: None,
        local: None,
        pointer: None,
    }))
}

/// A machine's session: connected once, ship once, take the repository's
/// lock there once, then run every [`Batch`] `feed` hands out, one after
/// another, each in a fresh detached checkout of the SHA at the stable
/// scratch path (the first made before the first batch is asked for, each
/// later one after the previous run's tree is removed) and measured on its
/// own ([`Feed::done`]); remove the tree and let go of the lock at the end.
/// A run that ends in an infrastructure failure (a lost connection) or is
/// interrupted ends the session. The first run's phases carry `connect`,
/// `ship` and `materialize`; a later run's `materialize`, `run` and
/// `collect`.
///
/// The measurement itself is the core's ([`measure::run_suite_with`]) on a
/// scratch tree of the machine's mirror ([`crate::worktree::add_at`]):
/// provisions placed and hashed there, the suite run under the budget
/// enforced on the machine, report files collected through the transport,
/// the same parsers.
///
/// Errors: a refusal found on the machine before a suite ran (a provision
/// dest conflict).
pub async fn session(
    job: &Job<'_>,
    m: &Admitted,
    connected: std::result::Result<Transport, DispatchFault>,
    connect_time: Duration,
    executor: &dyn Executor,
    feed: &dyn Feed,
) -> Result<()> {
    // The attempt began when its connect did: a run that never starts
    // (a lock held elsewhere for the whole wait) says so, not the end.
    let began = Instant::now()
        .checked_sub(connect_time)
        .unwrap_or_else(Instant::now);
    let progress = job.progress;
    let layout = ship::Layout {
        base: format!("{}/saphan", m.row.workhome.trim_end_matches('/')),
        key: repo_key(job.repo),
    };
    let mut s = Session {
        m,
        layout: &layout,
        phases: Phases::new(),
        bundle_bytes: 0,
        notes: Vec::new(),
        runs: 0,
        lost: false,
        caches_made: false,
    };
    s.phases.insert(Phase::Connect, secs(connect_time));
    let mut fault = None;
    match connected {
        Err(f) => fault = Some(f),
        Ok(t) => {
            let on = On {
                job,
                t: &t,
                layout: &layout,
                executor,
                progress,
                id: &m.row.id,
                feed,
            };
            let work = async {
                let r = attempt(on, &mut s).await;
                // A lost connection is gone already; closing it politely
                // would wait behind a reconnect to the dead machine.
                let gone = s.lost
                    || matches!(&r, Err(Failure::Fault(f)) if f.kind == FailureKind::ConnectionLost);
                if let Transport::Ssh(ssh) = &t
                    && !gone
                {
                    ssh.disconnect().await;
                }
                r
            };
            // Done is done: once the invocation's work is over, a machine
            // that stops answering is not waited for while its session
            // cleans up or closes (the next dispatch there reaps what is
            // left).
            let r = tokio::select! {
                biased;
                r = work => Some(r),
                () = cut_off_after_work(&t, feed) => None,
            };
            match r {
                Some(Ok(())) | None => {}
                Some(Err(Failure::Fault(f))) => fault = Some(f),
                Some(Err(Failure::Refused(e))) => return Err(e),
            }
        }
    }
    if let Some(f) = fault
        && s.runs == 0
        && let Some(b) = feed.next().await
    {
        let argv = s.argv(job, &b.argv);
        let mut run = SuiteRun::not_run(f.kind, f.detail);
        run.started_at = crate::clock::rfc3339_before(began.elapsed());
        feed.done(s.measured(job, argv, run, None));
    }
    Ok(())
}

/// Resolves once `feed`'s work is over ([`Feed::finished`]) and then the
/// machine leaves an SSH ping unanswered for half a `ServerAliveInterval`
/// (the rule that makes a running batch's machine suspect, [`watching`]):
/// a session that is only cleaning up or closing on a machine cut off is
/// not waited for — without this, the tree's removal, the lock's release
/// and the disconnect each waited out the keep-alive limit or a reconnect's
/// connect timeout there (a spare cut off while idle kept a finished split
/// alive about 8 s). Never for a machine reached without SSH.
async fn cut_off_after_work(t: &Transport, feed: &dyn Feed) {
    let Transport::Ssh(ssh) = t else {
        return std::future::pending().await;
    };
    feed.finished().await;
    let half = ssh.keepalive_interval() / 2;
    loop {
        let asked = Instant::now();
        if !ssh.answers_ping(half).await {
            return;
        }
        tokio::time::sleep(half.saturating_sub(asked.elapsed())).await;
    }
}

/// A session in progress: what every run's measurement carries.
struct Session<'s> {
    m: &'s Admitted,
    layout: &'s ship::Layout,
    /// The phases of the next run to be measured.
    phases: Phases,
    bundle_bytes: u64,
    /// Notes for the next run's record (`reaped: …`, the ship's).
    notes: Vec<String>,
    /// Runs measured so far.
    runs: usize,
    /// The connection was lost.
    lost: bool,
    /// The attempt's cache directory was made on the machine.
    caches_made: bool,
}

impl Session<'_> {
    /// The argv as the machine runs it (`saphan` is the shipped binary).
    fn argv(&self, job: &Job<'_>, argv: &[String]) -> Vec<String> {
        let mut argv = argv.to_vec();
        if let Some((_, sha)) = job.self_binary
            && argv.first().is_some_and(|a| a == "saphan")
        {
            argv[0] = format!("{}/bin/saphan-{sha}", self.layout.base);
        }
        argv
    }

    /// The measurement of one run; the session's phases, notes and shipped
    /// bytes go to this run, the next one starts afresh.
    fn measured(
        &mut self,
        job: &Job<'_>,
        argv: Vec<String>,
        mut run: SuiteRun,
        local: Option<tempfile::TempDir>,
    ) -> Measured {
        let m = self.m;
        self.runs += 1;
        if run.submodules.is_empty() {
            run.submodules = job
                .submodules
                .iter()
                .map(|s| (s.path.clone(), s.commit.clone()))
                .collect();
        }
        // The version is this attempt's own measurement (none when the
        // program could not start); the row's stays in `machine_program`.
        run.program = measure::Program {
            path: m.program_path.clone().or_else(|| Some(argv[0].clone())),
            version: run.program.version.take(),
        };
        let interrupted = run.measurement.failure == Some(FailureKind::Interrupted);
        job.progress.event(
            &m.row.id,
            &Event::Done {
                verdict: run.measurement.verdict,
            },
        );
        Measured {
            fleet: Some(Shipped {
                capability: m.capability.clone(),
                program_path: m.program_path.clone().unwrap_or_else(|| argv[0].clone()),
                program_version: m.program_version.clone(),
                bundle_bytes: std::mem::take(&mut self.bundle_bytes),
                phases: std::mem::take(&mut self.phases),
                remote_tree: self.layout.tree(),
                interrupted,
                slurm_job: m.row.slurm.as_ref().map(|n| n.job),
            }),
            run,
            argv,
            notes: std::mem::take(&mut self.notes),
            local,
            pointer: None,
        }
    }
}

enum Failure {
    Fault(DispatchFault),
    Refused(crate::error::Error),
}

impl From<DispatchFault> for Failure {
    fn from(f: DispatchFault) -> Failure {
        Failure::Fault(f)
    }
}

/// Run `script` (POSIX sh, `$1`… = `args`) on `t` as a control command.
async fn control(
    t: &Transport,
    script: &str,
    args: &[&str],
) -> Result<exec::Output, DispatchFault> {
    t.run(
        Cmd::new("sh")
            .args(["-c", script, "saphan-dispatch"])
            .args(args)
            .timeout(CONTROL_TIMEOUT),
    )
    .await
    .map_err(DispatchFault::transport)
}

/// One machine's session in progress: what every step needs.
#[derive(Clone, Copy)]
struct On<'a, 'j> {
    job: &'a Job<'j>,
    t: &'a Transport,
    layout: &'a ship::Layout,
    executor: &'a dyn Executor,
    progress: &'a dyn Progress,
    id: &'a str,
    feed: &'a dyn Feed,
}

async fn attempt(on: On<'_, '_>, s: &mut Session<'_>) -> std::result::Result<(), Failure> {
    let On {
        job,
        t,
        layout,
        progress,
        id,
        ..
    } = on;
    let argv = s.argv(job, &s.m.argv);

    // Ship the SHA and every submodule commit a local store holds.
    progress.event(id, &Event::Ship);
    let t_ship = Instant::now();
    let mut sources = vec![(job.repo.clone(), job.sha.to_string())];
    for s in job.submodules {
        if let Some(store) = &s.store {
            sources.push((store.clone(), s.commit.clone()));
        }
    }
    let tag = format!("{}-{}", std::process::id(), id);
    // Ctrl-C does not wait for a large bundle: the ship stops sending (the
    // machine's half bundle fails `git bundle verify` there and is removed
    // by the machine's own script, which is never killed mid-write) and
    // says so ([`ship::ship`]).
    let shipped = match ship::ship(t, layout, &sources, &tag, job.interrupt).await {
        Ok(shipped) => shipped,
        Err(f) => {
            if f.kind == FailureKind::Interrupted {
                for (repo, _) in &sources {
                    ship::forget(repo, &tag).await;
                }
            }
            return Err(f.into());
        }
    };
    s.bundle_bytes = shipped.bundle_bytes;
    s.notes.extend(shipped.notes);
    if let Some((local_bin, sha)) = job.self_binary
        && argv[0].ends_with(&format!("/bin/saphan-{sha}"))
    {
        // Content-addressed: shipped once per build, reused after — but
        // trusted by its bytes, not its name: hashed there before each use
        // (`have-binary.sh` runs `sha256.sh`), re-shipped (a temp file
        // renamed into place) when it is not the binary its name says.
        let have = control(
            t,
            crate::remote::HAVE_BINARY,
            &[&argv[0], crate::remote::SHA256],
        )
        .await?;
        let found = have.stdout_str();
        let found = found.split_whitespace().next().unwrap_or_default();
        if !have.status.success() || found != sha {
            if have.status.code() != Some(1) {
                s.notes.push(format!(
                    "re-shipped: {} was not the binary its name says (sha256 {}) — replaced",
                    argv[0],
                    if found.is_empty() {
                        "unreadable"
                    } else {
                        found
                    }
                ));
            }
            t.put(local_bin, &argv[0])
                .await
                .map_err(DispatchFault::transport)?;
        }
    }
    s.phases.insert(Phase::Ship, secs(t_ship.elapsed()));
    progress.event(
        id,
        &Event::Shipped {
            bytes: shipped.bundle_bytes,
        },
    );

    // Materialize under the repository's lock on the machine (taken before
    // the first batch is asked for, while a split still lists), and run
    // each batch under it — but never hold it while idle (`runs`).
    runs(on, s, Instant::now()).await
}

/// The repository's lock on the machine, held, with the run directory it
/// was taken in and the tree checked out under it.
struct Held {
    lock: MachineLock,
    run_dir: String,
    scratch: Option<crate::worktree::Scratch>,
}

/// Take the repository's lock on the machine in a fresh run directory
/// (its `locked` ready file is this hold's own); a tree an earlier attempt
/// left at the stable path is noted as reaped (materialize heals it).
async fn take_lock(on: On<'_, '_>, s: &mut Session<'_>) -> Result<Held, DispatchFault> {
    let run_dir = on
        .layout
        .run(&format!("{}-{}", crate::record::new_id(), on.id));
    let per_run = on.job.budget.duration + crate::exec::GRACE + 2 * CONTROL_TIMEOUT;
    let hold = LOCK_WAIT + per_run * on.feed.runs_at_most().max(1) as u32;
    let (lock, left) = MachineLock::acquire(
        on.t,
        on.id,
        on.layout,
        &format!("{run_dir}/locked"),
        hold,
        &on.layout.tree(),
        &crate::record::wait::Holder::me(on.job.verb),
        &|wait| on.progress.event(on.id, &Event::Waiting { wait }),
    )
    .await?;
    if left {
        s.notes.push(format!(
            "reaped: {} (left by an earlier attempt)",
            on.layout.tree()
        ));
    }
    Ok(Held {
        lock,
        run_dir,
        scratch: None,
    })
}

impl Held {
    /// Remove the tree, the run dir and the (now empty) parent of the
    /// stable tree, then let go of the lock — unless the connection is
    /// lost: every call would first reconnect to a dead machine and wait
    /// out its connect timeout, delaying the record (and failover); the
    /// next dispatch there reaps what is left.
    async fn let_go(self, on: On<'_, '_>, lost: bool) {
        let Held {
            lock,
            run_dir,
            scratch,
        } = self;
        if lost {
            // Removed in the background, best effort (see `attempt`).
            drop(scratch);
            lock.abandon();
            return;
        }
        if let Some(sc) = scratch {
            let _ = sc.remove().await;
        }
        let parent = format!("{}/scratch/{}", on.layout.base, on.layout.key);
        let _ = control(on.t, crate::remote::RUN_CLEANUP, &[&run_dir, &parent]).await;
        lock.release().await;
    }
}

/// Check out the SHA (and its submodules) at the stable scratch path.
async fn materialize(
    on: On<'_, '_>,
    mirror: &std::path::Path,
    tree: &std::path::Path,
) -> std::result::Result<crate::worktree::Scratch, Failure> {
    let mut scratch = crate::worktree::add_at(on.t, mirror, tree, on.job.sha)
        .await
        .map_err(|e| DispatchFault::new(FailureKind::MaterializeFailed, e.to_string()))?;
    let subs: Vec<(String, String, Option<std::path::PathBuf>)> = on
        .job
        .submodules
        .iter()
        .map(|s| (s.path.clone(), s.commit.clone(), Some(mirror.to_path_buf())))
        .collect();
    crate::worktree::checkout_submodules(&mut scratch, &subs).await;
    Ok(scratch)
}

/// The session's runs: the lock is taken and the tree checked out before
/// the first batch is asked for; each batch runs in a fresh tree under the
/// lock. While the session waits for a batch that depends on other
/// machines' work ([`Feed::idle`]: the plan is in and nothing is this
/// machine's now), it lets go of the lock — tree removed, run dir cleaned —
/// and takes it again for the next batch it is handed: an idle session
/// never holds a machine's lock, so two invocations sharing machines (two
/// splits, each waiting for its batch on the machine the other holds)
/// never wait on each other for more than a batch. A lock or checkout that
/// fails for a later batch is that batch's measured failure.
async fn runs(
    on: On<'_, '_>,
    s: &mut Session<'_>,
    t_mat: Instant,
) -> std::result::Result<(), Failure> {
    let mut held = Some(take_lock(on, s).await?);
    let r = runs_held(on, s, &mut held, t_mat).await;
    if let Err(Failure::Fault(f)) = &r
        && f.kind == FailureKind::ConnectionLost
    {
        s.lost = true;
    }
    if let Some(h) = held.take() {
        h.let_go(on, s.lost).await;
    }
    r
}

async fn runs_held(
    on: On<'_, '_>,
    s: &mut Session<'_>,
    held: &mut Option<Held>,
    t_mat: Instant,
) -> std::result::Result<(), Failure> {
    let On {
        job, layout, feed, ..
    } = on;
    let mirror = std::path::PathBuf::from(layout.mirror());
    let tree = std::path::PathBuf::from(layout.tree());
    // A tree a lost connection left (the lock's wait named it) is reaped:
    // add_at heals the stable path.
    let first = materialize(on, &mirror, &tree).await?;
    if let Some(h) = held.as_mut() {
        h.scratch = Some(first);
    }
    s.phases.insert(Phase::Materialize, secs(t_mat.elapsed()));
    let mut used = false;
    loop {
        let b = if held.is_some() {
            let next = feed.next();
            tokio::pin!(next);
            tokio::select! {
                biased;
                b = &mut next => b,
                () = feed.idle() => {
                    // Nothing for this machine now: let go of the lock
                    // while other machines run what this one waits for.
                    if let Some(h) = held.take() {
                        h.let_go(on, s.lost).await;
                    }
                    next.await
                }
            }
        } else {
            feed.next().await
        };
        let Some(b) = b else { break };
        let argv = s.argv(job, &b.argv);
        // Handed a batch after a signal (so that this machine's record
        // says it was interrupted): nothing more runs here.
        if job.interrupt.is_cancelled() {
            let run = SuiteRun::not_run(
                FailureKind::Interrupted,
                format!(
                    "{} before this machine's batch started; nothing ran on the machine",
                    job.interrupt
                        .reason()
                        .unwrap_or(crate::cancel::Reason::Requested)
                        .words()
                ),
            );
            feed.done(s.measured(job, argv, run, None));
            break;
        }
        if held.is_none() || used {
            let t_mat = Instant::now();
            let again = match held.as_mut() {
                Some(h) => {
                    if let Some(sc) = h.scratch.take() {
                        let _ = sc.remove().await;
                    }
                    Ok(())
                }
                None => take_lock(on, s).await.map(|h| *held = Some(h)),
            };
            let sc = match again {
                Ok(()) => materialize(on, &mirror, &tree).await,
                Err(f) => Err(Failure::Fault(f)),
            };
            match sc {
                Ok(sc) => {
                    if let Some(h) = held.as_mut() {
                        h.scratch = Some(sc);
                    }
                }
                Err(Failure::Fault(f)) => {
                    s.lost |= f.kind == FailureKind::ConnectionLost;
                    let mut run = SuiteRun::not_run(f.kind, f.detail);
                    run.started_at = crate::clock::rfc3339_before(t_mat.elapsed());
                    feed.done(s.measured(job, argv, run, None));
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
            s.phases.insert(Phase::Materialize, secs(t_mat.elapsed()));
        }
        used = true;
        let Some(h) = held.as_ref() else { break };
        let Some(scratch) = h.scratch.as_ref() else {
            break;
        };
        let r = run_batch(on, s, scratch, &h.run_dir, &argv, &b.env).await;
        let (run, local) = match r {
            Ok(rl) => rl,
            Err(Failure::Fault(f)) => {
                s.lost = f.kind == FailureKind::ConnectionLost;
                (SuiteRun::not_run(f.kind, f.detail), None)
            }
            Err(e) => return Err(e),
        };
        let stop = run
            .measurement
            .failure
            .as_ref()
            .is_some_and(|k| k.is_infrastructure() || *k == FailureKind::Interrupted);
        s.lost |= run.measurement.failure == Some(FailureKind::ConnectionLost);
        feed.done(s.measured(job, argv, run, local));
        if stop {
            break;
        }
    }
    Ok(())
}

/// `work`, while the machine's SSH server is pinged every half
/// `ServerAliveInterval`: the first ping left unanswered for half an
/// interval tells `feed` the machine is suspect ([`Feed::suspect`], once).
/// Half, so that a machine is suspected well before the keep-alive limit
/// (`ServerAliveInterval` × `ServerAliveCountMax`, at least one whole
/// interval) declares it lost; a machine reached without SSH is not asked.
/// `None` when `feed` says the run is no longer needed
/// ([`Feed::unneeded`]): `work` is dropped then, which kills its group.
async fn watching<T>(t: &Transport, feed: &dyn Feed, work: impl Future<Output = T>) -> Option<T> {
    let watch = async {
        if let Transport::Ssh(ssh) = t {
            let half = ssh.keepalive_interval() / 2;
            loop {
                let asked = Instant::now();
                if !ssh.answers_ping(half).await {
                    feed.suspect();
                    break;
                }
                tokio::time::sleep(half.saturating_sub(asked.elapsed())).await;
            }
        }
        std::future::pending::<std::convert::Infallible>().await
    };
    tokio::select! {
        biased;
        out = work => Some(out),
        () = feed.unneeded() => None,
        never = watch => match never {},
    }
}

/// One run of a session in the materialized tree: the suite, then collect.
async fn run_batch(
    on: On<'_, '_>,
    s: &mut Session<'_>,
    scratch: &crate::worktree::Scratch,
    run_dir: &str,
    argv: &[String],
    env: &[(String, String)],
) -> std::result::Result<(SuiteRun, Option<tempfile::TempDir>), Failure> {
    let On {
        job,
        t,
        executor,
        progress,
        id,
        feed,
        ..
    } = on;
    let local = tempfile::Builder::new()
        .prefix(&ship::temp_prefix("collect"))
        .tempdir()
        .map_err(|e| DispatchFault::new(FailureKind::CollectFailed, format!("temp dir: {e}")))?;
    let mut env: Vec<(String, String)> = env.to_vec();
    // The build caches of the attempt's trust class, under the workhome
    // (made once per session), the run's private temp dir (the sealed
    // suite's TMPDIR, removed with the run dir) and the affected tier's
    // report dir: one command.
    let trust = match job.trust {
        Some(t) => t,
        None => measure::trust_of(job.repo, job.sha, job.trunk).await,
    };
    let caches = on.layout.cache(trust);
    let tmp = format!("{run_dir}/tmp-{}", s.runs);
    let mut dirs: Vec<String> = vec![tmp.clone()];
    if !s.caches_made {
        dirs.push(caches.clone());
    }
    if job.affected.is_some() {
        dirs.push(format!("{run_dir}/reports"));
    }
    {
        let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let mk = control(t, crate::remote::MKDIR, &dirs).await?;
        if !mk.status.success() {
            return Err(DispatchFault::new(FailureKind::ShipFailed, mk.stderr_str()).into());
        }
        s.caches_made = true;
    }
    let seal = measure::SealPlan {
        mode: job.seal.0,
        source: job.seal.1.to_string(),
        capability: s.m.seal.clone(),
        caches: Some(std::path::PathBuf::from(&caches)),
        writable: job
            .affected
            .map(|_| std::path::PathBuf::from(run_dir))
            .into_iter()
            .collect(),
        tmp: Some(std::path::PathBuf::from(&tmp)),
    };
    let report_root = if let Some(manifest) = job.affected {
        let reports = format!("{run_dir}/reports");
        if let Err(e) = t.put(manifest, &format!("{run_dir}/manifest.json")).await {
            return Err(DispatchFault::transport(e).into());
        }
        for (_, v) in env.iter_mut() {
            *v = v.replace("@RUN@", run_dir);
        }
        Some(std::path::PathBuf::from(reports))
    } else {
        None
    };

    progress.event(
        id,
        &Event::Run {
            sha: job.sha,
            argv,
            budget: job.budget,
        },
    );
    let mut suite = job.suite.clone();
    suite.argv = argv.to_vec();
    let keep = local.path().join("stdout");
    let log_dir = measure::log_dir(job.repo);
    let vouched = s.m.vouched.as_ref().map(admit::Vouched::words);
    let t_run = Instant::now();
    let run = measure::run_suite_with(
        scratch,
        measure::Plan::new(&suite, job.budget, job.provisions)
            .seal(Some(&seal))
            .extra_env(&env)
            .report_root(report_root.as_deref())
            .keep_stdout(Some(&keep))
            .log_dir(Some(&log_dir))
            .catalog(job.catalog)
            .vouched(vouched.as_deref()),
        executor,
        job.interrupt,
    );
    let run = match watching(t, feed, run).await {
        Some(run) => run,
        None => Ok(SuiteRun::not_run(
            FailureKind::Interrupted,
            "stopped: a copy no longer needed (its first attempt answered)",
        )),
    };
    let run_time = t_run.elapsed();
    progress.event(id, &Event::Collect);
    let t_collect = Instant::now();
    if job.affected.is_some() {
        // No scope file is an answer the affected engine judges, not a fault.
        let _ = t
            .get(
                &format!("{run_dir}/scope.json"),
                &local.path().join("scope.json"),
            )
            .await;
    }
    let run = match run {
        Ok(r) => r,
        Err(e) if matches!(e.downcast_ref(), Some(ProvisionError::DestConflict { .. })) => {
            return Err(Failure::Refused(
                DispatchError::ProvisionConflict {
                    machine: id.to_string(),
                    detail: e.inner().to_string(),
                }
                .into(),
            ));
        }
        Err(e) => {
            return Err(DispatchFault::new(FailureKind::of(&e), e.inner().to_string()).into());
        }
    };
    s.phases.insert(Phase::Run, secs(run_time));
    s.phases.insert(Phase::Collect, secs(t_collect.elapsed()));
    let mut run = run;
    // The row that vouched for a program now gone is superseded, so no
    // later admission chooses this machine for it until it is probed
    // again. The attempt's record is written whatever the ledger says.
    if run.measurement.failure == Some(FailureKind::ProgramVanished) {
        let detail = run.measurement.notes.first().cloned().unwrap_or_default();
        if let Err(e) = admit::supersede(job.home, s.m, &detail).await {
            run.measurement.notes.push(format!(
                "the machine's capability row could not be superseded: {}",
                e.line()
            ));
        }
    }
    Ok((run, Some(local)))
}

/// A fleet machine's bench: connected (or the fault that kept it from
/// being), then ship, the machine's lock, the scratch tree under its
/// workhome, the run, collect ([`measure_on`]).
pub struct FleetBench<'m> {
    admitted: &'m Admitted,
    connected: Option<std::result::Result<Transport, DispatchFault>>,
    connect_time: Duration,
}

impl<'m> FleetBench<'m> {
    /// Connect to every admitted machine at once (a program no catalog row
    /// maps is resolved there: refused before anything is shipped
    /// anywhere); a machine that cannot be reached is a bench whose
    /// attempt records that fault.
    ///
    /// Errors: `verification-toolchain-absent` for a program absent on a
    /// machine.
    pub async fn connect_all(
        job: &Job<'_>,
        admitted: &'m [Admitted],
    ) -> Result<Vec<FleetBench<'m>>> {
        for m in admitted {
            job.progress.event(&m.row.id, &Event::Connect);
        }
        let connected = futures_util::future::join_all(admitted.iter().map(|m| async move {
            let t0 = Instant::now();
            let c = connect(job.home, m).await;
            (c, t0.elapsed())
        }))
        .await;
        let mut benches = Vec::new();
        for (m, (c, d)) in admitted.iter().zip(connected) {
            benches.push(FleetBench {
                admitted: m,
                connected: Some(c?),
                connect_time: d,
            });
        }
        Ok(benches)
    }
}

impl Bench for FleetBench<'_> {
    fn machine(&self) -> &str {
        &self.admitted.row.id
    }
    fn measure<'a>(&'a mut self, job: &'a Job<'a>, executor: &'a dyn Executor) -> BenchFuture<'a> {
        Box::pin(async move {
            let connected = self.connected.take().unwrap_or_else(|| {
                Err(DispatchFault::new(
                    FailureKind::ConnectionLost,
                    "this machine's bench was already used",
                ))
            });
            measure_on(job, self.admitted, connected, self.connect_time, executor).await
        })
    }
}

/// Refuse unless the machine's *measured* os/arch are this build's, so the
/// running binary can be shipped there (`saphan-binary-unavailable`).
pub fn require_same_platform(m: &Admitted) -> Result<()> {
    let norm = |a: &str| match a {
        "arm64" => "aarch64".to_string(),
        "amd64" => "x86_64".to_string(),
        a => a.to_ascii_lowercase(),
    };
    let local_os = std::env::consts::OS;
    let local_arch = std::env::consts::ARCH;
    if m.os.eq_ignore_ascii_case(local_os) && norm(&m.arch) == norm(local_arch) {
        return Ok(());
    }
    Err(DispatchError::PlatformMismatch {
        machine: m.row.id.clone(),
        os: m.os.clone(),
        arch: m.arch.clone(),
        local_os: local_os.into(),
        local_arch: local_arch.into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::machines::{MachineRow, TransportKind};

    fn admitted(os: &str, arch: &str) -> Admitted {
        Admitted {
            row: MachineRow {
                id: "m9".into(),
                transport: TransportKind::Ssh,
                host: "m9".into(),
                workhome: "/srv".into(),
                slurm: None,
                partition: None,
            },
            argv: vec!["saphan".into()],
            capability: None,
            program_path: None,
            program_version: None,
            vouched: None,
            os: os.into(),
            arch: arch.into(),
            seal: crate::seal::Capability::Unable("test".into()),
        }
    }

    #[test]
    fn the_binary_ships_only_to_the_measured_platform_of_this_build() {
        let e = require_same_platform(&admitted("Darwin", "arm64")).unwrap_err();
        assert_eq!(e.name(), "saphan-binary-unavailable");
        assert!(e.line().contains("Darwin/arm64"), "{}", e.line());
        let here = admitted(std::env::consts::OS, std::env::consts::ARCH);
        assert!(require_same_platform(&here).is_ok());
    }
}
