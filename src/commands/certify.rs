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
use crate::docker::container::{self, ContainerError};
use crate::error::{Refusal, Result};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::bench::{Bench, LocalBench};
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::pipeline::{Job, record_of};
use crate::measure::progress::Progress;
use crate::measure::{self, Budget, Executor, Interrupt};
use crate::record;
use crate::suite::ResolvedSuite;
use crate::transport::Transport;
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
    /// of the invocation (`--split` or `--machine @admitted`).
    pub failover: bool,
    /// `--seal`: wins over the declared `verify.full.seal`.
    pub seal: Option<crate::seal::Mode>,
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

/// The class gate's answer, per kind of bench.
enum Gate {
    /// Host class on this machine (the toolchain was found on PATH).
    LocalHost,
    /// Container class on this machine's engine.
    LocalContainer(String, container::SuiteImage),
    /// Host class on fleet machines, admitted from the ledger.
    FleetHost(Vec<crate::dispatch::Admitted>),
    /// Container class on fleet machines.
    FleetContainer(crate::dispatch::admit::ContainerAdmitted),
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
    if settings.split && settings.class == Class::Container {
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
    let gate = gate(home, catalog, settings, &fleet, &mut suite, repo, &sha).await?;
    if seal_mode == crate::seal::Mode::Required
        && let Gate::FleetHost(admitted) = &gate
        && let Some((m, why)) = admitted.iter().find_map(|m| match &m.seal {
            crate::seal::Capability::Unable(why) => Some((m.row.id.clone(), why.clone())),
            crate::seal::Capability::Tool(_) => None,
        })
    {
        return Err(crate::seal::SealError::Unavailable {
            machine: m,
            from: seal_source,
            why,
        }
        .into());
    }
    // Whose caches: the host class's benches ask beside their own git work
    // (the job's trunk says); the container class's are named here.
    let trust = match gate {
        Gate::LocalContainer(..) | Gate::FleetContainer(_) => {
            Some(measure::trust_of(repo, &sha, trunk.as_deref()).await)
        }
        _ => None,
    };
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
        trust,
    };
    let attempt = record::new_id();
    let target = |transport: Transport, socket: String, image, user, caches| {
        suite_target(
            transport,
            socket,
            image,
            settings.network,
            user,
            &attempt,
            &repo.top,
            &sha,
            caches,
            trust.unwrap_or(crate::seal::Trust::Other),
        )
    };
    let local = || Transport::Local(crate::transport::Local);
    let certified = match gate {
        Gate::LocalHost => here(&job, &measure::Host).await,
        Gate::LocalContainer(socket, image) => {
            // The container's Go build cache, kept between runs like the
            // host's own (content-addressed: it speeds builds, never
            // changes a verdict).
            let dir = home
                .cache(trust.unwrap_or(crate::seal::Trust::Other))
                .join("go-build");
            std::fs::create_dir_all(&dir).map_err(|source| crate::error::IoError::Io {
                action: "create the container Go build cache",
                path: dir.clone(),
                source,
            })?;
            let caches = vec![(
                dir.display().to_string(),
                container::GO_CACHE_IN_CONTAINER.to_string(),
                "GOCACHE".to_string(),
            )];
            let user = format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid());
            let executor = container::LocalExecutor::new(
                target(local(), socket, image, Some(user), caches),
                interrupt.clone(),
            );
            here(&job, &executor).await
        }
        Gate::FleetHost(admitted) if settings.split => {
            crate::schedule::run::split(&job, &admitted, &measure::Host, settings.failover).await
        }
        Gate::FleetHost(admitted) if settings.failover => {
            crate::schedule::run::admitted(&job, &admitted, &measure::Host).await
        }
        Gate::FleetHost(admitted) => {
            crate::schedule::invocation::every_named(&job, &admitted, &measure::Host).await
        }
        Gate::FleetContainer(c) => {
            // One container executor for every machine: bollard speaks to
            // each machine's engine over its socket, forwarded through the
            // machine's transport; each machine's container is its own
            // (named and labelled after the machine).
            let executor = container::LocalExecutor::new(
                target(local(), c.socket.clone(), c.image.clone(), None, Vec::new()),
                interrupt.clone(),
            );
            let out = crate::schedule::invocation::every_named(&job, &c.admitted, &executor).await;
            // Whatever happened, no container of this attempt stays on a machine.
            let remain = c.sweep(home, &attempt).await;
            match out {
                Ok(Certified::Machines(mut m)) => {
                    m.remain = remain;
                    Ok(Certified::Machines(m))
                }
                other => {
                    for r in &remain {
                        tracing::warn!("{r}");
                    }
                    other
                }
            }
        }
    };
    // A pointer that moved for the first time now follows this trunk for
    // good: the verb says which (the record of the move is the file).
    Ok(match certified? {
        Certified::Here(mut o) => {
            if o.pointer.moved() {
                o.first_follow = first_follow;
            }
            Certified::Here(o)
        }
        Certified::Machines(mut m) => {
            if m.pointer.moved() {
                m.first_follow = first_follow;
            }
            Certified::Machines(m)
        }
    })
}

/// The class gate: the container class's pin, docker-oci rows and image;
/// the host class's toolchain (on PATH here, from the ledger on the fleet).
async fn gate(
    home: &Home,
    catalog: &Catalog,
    settings: &Settings,
    fleet: &[String],
    suite: &mut ResolvedSuite,
    repo: &crate::git::Repo,
    sha: &str,
) -> Result<Gate> {
    if settings.class == Class::Host {
        if fleet.is_empty() {
            // The suite runs on this host: its toolchain must be here.
            measure::against_tree(repo, sha, |in_tree| {
                crate::suite::preflight_local(suite, catalog, sha, in_tree)
            })
            .await??;
            return Ok(Gate::LocalHost);
        }
        return Ok(Gate::FleetHost(crate::dispatch::admit_all(
            home, catalog, fleet, suite,
        )?));
    }
    // The suite image pin is operator input: refused before anything.
    let pin = match settings.image.as_deref() {
        None => return Err(ContainerError::ImageMissing.into()),
        Some(i) => container::parse_image(i)?,
    };
    // Container-class runs need proof that each machine can run the
    // pinned probe image, before anything else happens there: for fleet
    // machines `dispatch::admit::admit_all_container` asks every machine's docker-oci row
    // and names every refusal at once; here, this machine's row.
    if fleet.is_empty() {
        let now = time::OffsetDateTime::now_utc();
        crate::fleet::docker_probes::require_container_capability(home, catalog, "local", now)?;
    }
    if suite.source == crate::suite::SuiteSource::DefaultGo {
        // In a container, default-go's `go` is the image's, on its PATH.
        suite.argv[0] = "go".into();
    }
    if !fleet.is_empty() {
        return Ok(Gate::FleetContainer(
            crate::dispatch::admit::admit_all_container(home, catalog, fleet, suite, pin).await?,
        ));
    }
    // The suite image must be on the engine already: nothing is pulled,
    // and an absent image is refused before any worktree exists.
    let socket = crate::docker::socket_of(catalog.get(crate::docker::DOCKER_OCI)?);
    let transport = Transport::Local(crate::transport::Local);
    let load = container::load_route(&pin, None);
    let image = container::resolve_image(&transport, "local", &socket, &pin, load).await?;
    Ok(Gate::LocalContainer(socket, image))
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

/// Where one container-class attempt runs: the attempt's labels
/// (`saphan.attempt`, `saphan.machine`, `saphan.repo`, `saphan.sha`) and its
/// container name `saphan-suite-<attempt>-local`; on fleet machines
/// [`Executor::for_machine`] names and labels it after each machine.
#[allow(clippy::too_many_arguments)]
fn suite_target(
    transport: Transport,
    socket: String,
    image: container::SuiteImage,
    network: bool,
    user: Option<String>,
    attempt: &str,
    repo: &Path,
    sha: &str,
    caches: Vec<(String, String, String)>,
    trust: crate::seal::Trust,
) -> container::Target {
    container::Target {
        transport,
        socket,
        image,
        network,
        user,
        labels: [
            (container::LABEL_ATTEMPT, attempt.to_string()),
            (container::LABEL_MACHINE, "local".to_string()),
            (container::LABEL_REPO, repo.display().to_string()),
            (container::LABEL_SHA, sha.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        name: container::container_name(attempt, "local"),
        caches,
        trust,
        scratch: container::go_scratch(),
    }
}
