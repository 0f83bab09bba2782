//! `saphan certify`: the main job. Resolve the suite, preflight the
//! toolchain (on PATH here, from the ledger on fleet machines), lock the
//! repository, check out the exact SHA in a scratch detached worktree, run
//! the suite under its budget, append the record, and move
//! `refs/saphan/verified` only on green. The scratch tree is removed on
//! every path (green, red, timeout, error, Ctrl-C).
//!
//! The verb composes the one attempt pipeline ([`crate::measure::pipeline`])
//! over this machine's bench, or over one bench per `--machine` through
//! the schedule's policies ([`crate::schedule`]: every named machine,
//! `@admitted`, `--split`).

use crate::catalog::Catalog;
use crate::error::{Refusal, Result};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::bench::{Bench, LocalBench};
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::pipeline::{Job, record_of};
use crate::measure::progress::Progress;
use crate::measure::{self, Budget, Executor, Interrupt};
use crate::record;
use crate::schedule::class::Benches;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::measure::pipeline::{Class, LOG_TAIL_LINES, Outcome};
pub use crate::schedule::invocation::Certified;

/// Refusals of certify itself.
#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    /// Container-class dispatch was asked for and could not be routed. No
    /// longer raised since one pipeline runs this machine and fleet machines
    /// alike; the name stays reserved so it never means something else.
    #[error(
        "certify --class {class} --machine {machines} asks for container-class dispatch, which this version does not run yet — certify with --class host (on this machine, or with --machine on admitted fleet machines)"
    )]
    DispatchUnavailable {
        machines: String,
        class: &'static str,
    },
}

impl Refusal for CertifyError {
    fn name(&self) -> &'static str {
        match self {
            CertifyError::DispatchUnavailable { .. } => "dispatch-unavailable",
        }
    }
}

/// True when `settings` names fleet machines (anything but `local` alone).
pub fn is_dispatch(settings: &Settings) -> bool {
    settings.machines.iter().any(|m| m != "local")
}

/// The records of the repository containing `repo`, and where they live.
pub async fn records(repo: &Path) -> Result<(PathBuf, record::Attempts)> {
    let repo = Repo::open(repo).await?;
    let path = record::attempts_path(&repo);
    let all = record::read_all(&path)?;
    Ok((path, all))
}

/// What to certify.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Any path inside the repository.
    pub repo: PathBuf,
    /// The revision (default `HEAD`).
    pub rev: Option<String>,
    /// `--timeout`: always wins over the declared timeout.
    pub timeout: Option<Duration>,
    /// `--machine`: empty or `["local"]` = this machine.
    pub machines: Vec<String>,
    /// `--class`.
    pub class: Class,
    /// `--trunk`: the ref the verified pointer follows (default: see
    /// [`record::trunk_ref`]).
    pub trunk: Option<String>,
    /// `--image`: the suite image pin for `--class container`
    /// (`sha256:<image id>` or `NAME@sha256:<registry digest>`).
    pub image: Option<String>,
    /// `--network`: give a container-class suite the engine's default
    /// network (off otherwise).
    pub network: bool,
    /// `--split`: one shard per machine, the verdict over their union
    /// ([`crate::schedule`]).
    pub split: bool,
    /// Failover: re-run an infrastructure failure once on another machine
    /// of the invocation (`--split`; always for machines that were chosen —
    /// `--machine @admitted`, a pool's nodes — rather than named).
    pub failover: bool,
    /// `--seal`: wins over the declared `verify.full.seal`.
    pub seal: Option<crate::seal::Mode>,
    /// `--nodes`: how many nodes a `--machine @POOL` borrows this time
    /// (default: the pool row's `nodes`).
    pub nodes: Option<u32>,
}

impl Settings {
    /// The fleet machine ids named (every `--machine` id but `local`).
    pub fn fleet(&self) -> Vec<String> {
        self.machines
            .iter()
            .filter(|m| *m != "local")
            .cloned()
            .collect()
    }
}

/// Certify `settings.rev` of `settings.repo`: prepare (every refusal comes
/// here, before any lock, tree or connection: bad repo or revision, no
/// suite, bad config, provision sources, the toolchain on PATH or the
/// machines' admission from the ledger, the container class's pin, gate and
/// image), then the benches, the run, the records and the pointer. The
/// commit's tree is listed before the lock only when a refusal depends on
/// it (no declared suite, a program path in the commit); otherwise beside
/// the checkout, so a `git ls-tree` that fails there (a timeout, an object
/// missing) ends the attempt after the lock — an error, no record, the
/// scratch tree removed.
///
/// Errors: the refusals above, `machine-unknown`,
/// `verification-toolchain-absent` (with the machine and remedy lines), a
/// provision dest conflict found on a machine, a record that cannot be
/// appended (the pointer does not move then). After the benches are set up
/// every outcome is a record.
pub async fn certify(
    home: &Home,
    catalog: &Catalog,
    settings: &Settings,
    progress: &dyn Progress,
    interrupt: &Interrupt,
) -> Result<Certified> {
    // `--machine @admitted`: choose the admitted machines first, and say
    // which were chosen and which were left out, and why. The machines
    // were chosen, not named: an infrastructure failure re-runs once on
    // another chosen machine.
    let selection = match settings.machines.as_slice() {
        [m] if m == crate::dispatch::admit::ADMITTED => {
            let sel = crate::dispatch::admit::select(
                home,
                catalog,
                &settings.repo,
                settings.rev.as_deref().unwrap_or("HEAD"),
                settings.class,
                settings.image.as_deref(),
            )
            .await?;
            progress.event(
                "",
                &crate::measure::progress::Event::Chosen {
                    selector: m,
                    chosen: &sel.chosen,
                    left_out: &sel.left_out_machines(),
                },
            );
            Some(sel)
        }
        _ => None,
    };
    let chosen;
    let settings = match &selection {
        Some(sel) => {
            chosen = Settings {
                machines: sel.chosen.clone(),
                failover: true,
                ..settings.clone()
            };
            &chosen
        }
        None => settings,
    };
    let (setup, sha) = measure::Setup::open_at(
        home,
        &settings.repo,
        settings.rev.as_deref().unwrap_or("HEAD"),
    )
    .await?;
    let repo = &setup.repo;
    let mut suite = setup.full_suite(&sha, "certify").await?;
    let provisions = setup.provisions()?;
    // The pointer's trunk: `trunk-mismatch` is refused here, before any
    // gate, lock or machine.
    let (trunk, first_follow) =
        record::trunk::for_certify_first(repo, settings.trunk.as_deref()).await?;
    let fleet = settings.fleet();
    if settings.split && fleet.is_empty() {
        return Err(crate::schedule::ScheduleError::NoMachines.into());
    }
    let class = crate::schedule::class::of(settings.class, &fleet);
    if settings.split && !class.splits() {
        return Err(crate::schedule::ScheduleError::ContainerClass.into());
    }
    let (seal_mode, seal_source) = measure::SealPlan::mode_of(settings.seal, &suite, "verify.full");
    if seal_mode == crate::seal::Mode::Required
        && fleet.is_empty()
        && settings.class == Class::Host
        && let crate::seal::Capability::Unable(why) = crate::seal::local()
    {
        return Err(crate::seal::SealError::Unavailable {
            machine: "local".into(),
            from: seal_source,
            why: why.clone(),
        }
        .into());
    }
    let attempt = record::new_id();
    let placing = crate::schedule::class::Placing {
        home,
        catalog,
        repo,
        sha: &sha,
        trunk: trunk.as_deref(),
        machines: &fleet,
        class: settings.class,
        image: settings.image.as_deref(),
        network: settings.network,
        nodes: settings.nodes,
        attempt: &attempt,
        interrupt,
    };
    let placement = class.place(&placing, &mut suite).await?;
    let mut finish = placement.finish;
    let out = async {
        if seal_mode == crate::seal::Mode::Required
            && placement.executor.class() == Class::Host.as_str()
            && let Benches::Machines { admitted, .. } = &placement.benches
            && let Some((m, why)) = admitted.iter().find_map(|m| match &m.seal {
                crate::seal::Capability::Unable(why) => Some((m.row.id.clone(), why.clone())),
                crate::seal::Capability::Tool(_) => None,
            })
        {
            return Err(crate::seal::SealError::Unavailable {
                machine: m,
                from: seal_source.clone(),
                why,
            }
            .into());
        }
        let budget = Budget::attempt(settings.timeout, &suite, "verify.full");
        let submodules = if fleet.is_empty() {
            Vec::new()
        } else {
            repo.submodules(&sha).await?
        };
        let job = Job {
            home,
            repo,
            sha: &sha,
            suite: &suite,
            budget: &budget,
            provisions: &provisions,
            submodules: &submodules,
            verb: "certify",
            extra_env: &[],
            interrupt,
            affected: None,
            self_binary: None,
            catalog: Some(catalog),
            progress,
            trunk: trunk.as_deref(),
            seal: (seal_mode, &seal_source),
            trust: placement.trust,
        };
        let executor = &*placement.executor;
        match &placement.benches {
            Benches::Here => here(&job, executor).await,
            Benches::Machines { admitted, .. } if settings.split => {
                let failover = settings.failover || placement_chosen(&placement.benches);
                crate::schedule::run::split(&job, admitted, executor, failover).await
            }
            Benches::Machines { admitted, chosen } if settings.failover || *chosen => {
                crate::schedule::run::admitted(&job, admitted, executor).await
            }
            Benches::Machines { admitted, .. } => {
                crate::schedule::invocation::every_named(&job, admitted, executor).await
            }
        }
    }
    .await;
    let mut out = out;
    if let Some(f) = finish.take() {
        f.finish(&mut out).await;
    }
    // A pointer that moved for the first time now follows this trunk for
    // good: the verb says which (the record of the move is the file).
    match &mut out {
        Ok(Certified::Machines(m)) => {
            m.selection = selection;
            if m.pointer.moved() {
                m.first_follow = first_follow;
            }
        }
        Ok(Certified::Here(o)) if o.pointer.moved() => o.first_follow = first_follow,
        _ => {}
    }
    out
}

fn placement_chosen(b: &Benches) -> bool {
    matches!(b, Benches::Machines { chosen: true, .. })
}

/// This machine's bench: the repository lock (held through the pointer
/// move), the stable scratch path, one record.
async fn here(job: &Job<'_>, executor: &dyn Executor) -> Result<Certified> {
    let trunk = job.trunk;
    let mut bench =
        LocalBench::open(job.home, job.repo, job.interrupt, job.verb, job.progress).await?;
    // The bench guards the pointer against the suite, and reads it with
    // the trunk's tip under its lock once the suite has ended.
    let mut measured = bench.measure(job, executor).await?;
    let read = measured.pointer.take();
    let record = record_of(
        job,
        bench.machine(),
        executor.class(),
        &measured,
        Scope::Local,
        trunk,
        &[],
    );
    // The record first, then the pointer, under the lock this bench holds.
    let pointer = conclude::conclude(
        job.repo,
        job.sha,
        trunk,
        std::slice::from_ref(&record),
        Scope::Local,
        LockHold::Held {
            lock: bench.lock(),
            read,
        },
    )
    .await?;
    Ok(Certified::Here(Box::new(Outcome {
        record,
        attempts: record::attempts_path(job.repo),
        pointer,
        log_tail: measured.run.log_tail(LOG_TAIL_LINES),
        test_output: measured.run.measurement.test_output,
        test_output_omitted: measured.run.measurement.test_output_omitted,
        tests: measured.run.measurement.tests,
        stderr_tail: measured.run.stderr_tail,
        first_follow: None,
    })))
}
