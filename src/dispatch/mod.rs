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
use std::time::{Duration, Instant};

pub use crate::transport::{CONNECT_TIMEOUT, CONTROL_TIMEOUT};
/// Grace between TERM and KILL of the suite's group on the machine.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long an attempt may wait for the repository's lock on the machine.
pub const LOCK_WAIT: Duration = Duration::from_secs(60);

pub use crate::measure::pipeline::{Job, MachineRun, Multi};
pub use crate::measure::progress::{Progress, Silent};
pub use crate::measure::{Executor, Host as HostExecutor};

/// The repository key on a machine: the same key local certify uses for
/// its stable scratch path.
pub fn repo_key(repo: &Repo) -> String {
    crate::measure::bench::repo_key(repo)
}

/// Connect to an admitted machine and, when no catalog row maps the
/// program, resolve it there (refused if absent). Connection failures are
/// faults (the attempt is recorded as measurement-failed), not refusals.
pub async fn connect(
    home: &Home,
    m: &Admitted,
) -> Result<std::result::Result<Transport, DispatchFault>> {
    let t = match crate::fleet::machines::connect(home, &m.row, CONNECT_TIMEOUT).await {
        Ok(t) => t,
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

/// Ship, materialize, run and collect `job` on the connected machine `m`:
/// every outcome after admission is a [`Measured`] (a failure is a failed
/// measurement naming its cause); refusals found on the machine before the
/// suite ran (a provision dest conflict) are errors.
///
/// The measurement itself is the core's ([`measure::run_suite_with`]) on a
/// scratch tree of the machine's mirror ([`crate::worktree::add_at`]):
/// provisions placed and hashed there, the suite run under the budget
/// enforced on the machine, report files collected through the transport,
/// the same parsers.
pub async fn measure_on(
    job: &Job<'_>,
    m: &Admitted,
    connected: std::result::Result<Transport, DispatchFault>,
    connect_time: Duration,
    executor: &dyn Executor,
) -> Result<Measured> {
    let progress = job.progress;
    let layout = ship::Layout {
        base: format!("{}/saphan", m.row.workhome.trim_end_matches('/')),
        key: repo_key(job.repo),
    };
    let mut phases = Phases::new();
    phases.insert(Phase::Connect, secs(connect_time));
    let mut argv = m.argv.clone();
    if let Some((_, sha)) = job.self_binary
        && argv[0] == "saphan"
    {
        argv[0] = format!("{}/bin/saphan-{sha}", layout.base);
    }
    let mut a = Attempt {
        bundle_bytes: 0,
        notes: Vec::new(),
        local: None,
        run: None,
    };
    let mut fault = None;
    match connected {
        Err(f) => fault = Some(f),
        Ok(t) => {
            let on = On {
                job,
                t: &t,
                layout: &layout,
                argv: &argv,
                executor,
                progress,
                id: &m.row.id,
            };
            let r = attempt(on, &mut a, &mut phases).await;
            match r {
                Ok(()) => {}
                Err(Failure::Fault(f)) => fault = Some(f),
                Err(Failure::Refused(e)) => return Err(e),
            }
            // A lost connection is gone already; closing it politely would
            // wait behind a reconnect to the dead machine.
            let gone = fault
                .as_ref()
                .is_some_and(|f| f.kind == FailureKind::ConnectionLost)
                || lost(a.run.as_ref());
            if let Transport::Ssh(s) = &t
                && !gone
            {
                s.disconnect().await;
            }
        }
    }
    let mut run = match (a.run, fault) {
        (_, Some(f)) => SuiteRun::not_run(f.kind, f.detail),
        (None, None) => SuiteRun::not_run(FailureKind::ConnectionLost, "nothing ran"),
        (Some(run), None) => run,
    };
    if run.submodules.is_empty() {
        run.submodules = job
            .submodules
            .iter()
            .map(|s| (s.path.clone(), s.commit.clone()))
            .collect();
    }
    run.program = measure::Program {
        path: m.program_path.clone().or_else(|| Some(argv[0].clone())),
        version: m.program_version.clone(),
    };
    let interrupted = run.measurement.failure == Some(FailureKind::Interrupted);
    progress.event(
        &m.row.id,
        &Event::Done {
            verdict: run.measurement.verdict,
        },
    );
    Ok(Measured {
        fleet: Some(Shipped {
            capability: m.capability.clone(),
            program_path: m.program_path.clone().unwrap_or_else(|| argv[0].clone()),
            program_version: m.program_version.clone(),
            bundle_bytes: a.bundle_bytes,
            phases,
            remote_tree: layout.tree(),
            interrupted,
        }),
        run,
        argv,
        notes: a.notes,
        local: a.local,
    })
}

struct Attempt {
    bundle_bytes: u64,
    notes: Vec<String>,
    local: Option<tempfile::TempDir>,
    run: Option<SuiteRun>,
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

/// One machine's attempt in progress: what every step needs.
#[derive(Clone, Copy)]
struct On<'a, 'j> {
    job: &'a Job<'j>,
    t: &'a Transport,
    layout: &'a ship::Layout,
    argv: &'a [String],
    executor: &'a dyn Executor,
    progress: &'a dyn Progress,
    id: &'a str,
}

async fn attempt(
    on: On<'_, '_>,
    a: &mut Attempt,
    phases: &mut Phases,
) -> std::result::Result<(), Failure> {
    let On {
        job,
        t,
        layout,
        argv,
        progress,
        id,
        ..
    } = on;
    let run_id = format!("{}-{}", crate::record::new_id(), id);
    let run_dir = layout.run(&run_id);

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
    // Ctrl-C does not wait for a large bundle: the ship is dropped (its
    // local git and ssh children are killed on drop; the machine's half
    // written bundle fails `git bundle verify` there and is removed).
    let shipped = tokio::select! {
        r = ship::ship(t, layout, &sources, &tag) => r?,
        () = job.interrupt.cancelled() => {
            for (repo, _) in &sources {
                ship::forget(repo, &tag).await;
            }
            return Err(DispatchFault::new(
                FailureKind::Interrupted,
                format!(
                    "{} while the commit was being shipped; nothing ran on the machine",
                    job.interrupt.reason().map(|r| r.words()).unwrap_or("saphan was stopped")
                ),
            )
            .into());
        }
    };
    a.bundle_bytes = shipped.bundle_bytes;
    a.notes.extend(shipped.notes);
    if let Some((local_bin, sha)) = job.self_binary
        && argv[0].ends_with(&format!("/bin/saphan-{sha}"))
    {
        // Content-addressed: shipped once per build, reused after.
        let have = control(t, crate::remote::HAVE_BINARY, &[&argv[0]]).await?;
        if !have.status.success() {
            t.put(local_bin, &argv[0])
                .await
                .map_err(DispatchFault::transport)?;
        }
    }
    phases.insert(Phase::Ship, secs(t_ship.elapsed()));
    progress.event(
        id,
        &Event::Shipped {
            bytes: shipped.bundle_bytes,
        },
    );

    // Materialize under the repository's lock on the machine.
    let t_mat = Instant::now();
    let hold = job.budget.duration + GRACE + LOCK_WAIT + 2 * CONTROL_TIMEOUT;
    let lock = MachineLock::acquire(t, layout, &format!("{run_dir}/locked"), hold).await?;
    let r = locked(on, a, phases, &run_dir, t_mat).await;
    // The run dir goes; so does the (now empty) parent of the stable tree —
    // unless the connection is lost: every call would first reconnect to a
    // dead machine and wait out its connect timeout, delaying the record
    // (and failover); the next dispatch there reaps what is left.
    let lost = match &r {
        Err(Failure::Fault(f)) => f.kind == FailureKind::ConnectionLost,
        _ => lost(a.run.as_ref()),
    };
    if lost {
        lock.abandon();
    } else {
        let parent = format!("{}/scratch/{}", layout.base, layout.key);
        let _ = control(t, crate::remote::RUN_CLEANUP, &[&run_dir, &parent]).await;
        lock.release().await;
    }
    r
}

/// The run ended because the connection to the machine was lost.
fn lost(run: Option<&SuiteRun>) -> bool {
    run.is_some_and(|r| r.measurement.failure == Some(FailureKind::ConnectionLost))
}

async fn locked(
    on: On<'_, '_>,
    a: &mut Attempt,
    phases: &mut Phases,
    run_dir: &str,
    t_mat: Instant,
) -> std::result::Result<(), Failure> {
    let On {
        job,
        t,
        layout,
        argv,
        executor,
        progress,
        id,
    } = on;
    let mirror = std::path::PathBuf::from(layout.mirror());
    let tree = std::path::PathBuf::from(layout.tree());
    // A tree a lost connection left is reaped (add_at heals the stable path).
    let left = control(t, crate::remote::EXISTS, &[&layout.tree()]).await?;
    if left.status.success() {
        a.notes.push(format!(
            "reaped: {} (left by an earlier attempt)",
            layout.tree()
        ));
    }
    let mut scratch = crate::worktree::add_at(t, &mirror, &tree, job.sha)
        .await
        .map_err(|e| DispatchFault::new(FailureKind::MaterializeFailed, e.to_string()))?;
    let subs: Vec<(String, String, Option<std::path::PathBuf>)> = job
        .submodules
        .iter()
        .map(|s| (s.path.clone(), s.commit.clone(), Some(mirror.clone())))
        .collect();
    crate::worktree::checkout_submodules(&mut scratch, &subs).await;
    let local = tempfile::Builder::new()
        .prefix(&ship::temp_prefix("collect"))
        .tempdir()
        .map_err(|e| DispatchFault::new(FailureKind::CollectFailed, format!("temp dir: {e}")))?;
    let mut env: Vec<(String, String)> = job.extra_env.to_vec();
    let report_root = if let Some(manifest) = job.affected {
        let reports = format!("{run_dir}/reports");
        let mk = control(t, crate::remote::MKDIR, &[&reports]).await?;
        if !mk.status.success() {
            let _ = scratch.remove().await;
            return Err(DispatchFault::new(FailureKind::ShipFailed, mk.stderr_str()).into());
        }
        if let Err(e) = t.put(manifest, &format!("{run_dir}/manifest.json")).await {
            let _ = scratch.remove().await;
            return Err(DispatchFault::transport(e).into());
        }
        for (_, v) in env.iter_mut() {
            *v = v.replace("@RUN@", run_dir);
        }
        Some(std::path::PathBuf::from(reports))
    } else {
        None
    };
    phases.insert(Phase::Materialize, secs(t_mat.elapsed()));

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
    let t_run = Instant::now();
    let run = measure::run_suite_with(
        &scratch,
        measure::Plan::new(&suite, job.budget, job.provisions)
            .extra_env(&env)
            .report_root(report_root.as_deref())
            .keep_stdout(Some(&keep))
            .log_dir(Some(&log_dir)),
        executor,
        job.interrupt,
    )
    .await;
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
    if lost(run.as_ref().ok()) {
        // Removed in the background, best effort (see `attempt`).
        drop(scratch);
    } else {
        let _ = scratch.remove().await;
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
    phases.insert(Phase::Run, secs(run_time));
    phases.insert(Phase::Collect, secs(t_collect.elapsed()));
    a.run = Some(run);
    a.local = Some(local);
    Ok(())
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
            },
            argv: vec!["saphan".into()],
            capability: None,
            program_path: None,
            program_version: None,
            os: os.into(),
            arch: arch.into(),
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
