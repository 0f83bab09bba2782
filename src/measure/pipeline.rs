//! The one attempt pipeline (DESIGN §6b): **prepare** once (repository,
//! SHA, suite, provisions, budget, class, image) → one **bench** per machine
//! ([`super::bench::LocalBench`] for this machine, a
//! [`crate::dispatch::FleetBench`] for each fleet machine — a
//! `transport = "local"` row is one too) → the run through `Transport`
//! ([`super::run_suite_with`]) → [`record_of`] → [`super::conclude`]:
//! every record appended, then the pointer under the repository lock.
//!
//! `saphan certify` is this pipeline; without `--machine` its one bench is
//! this machine's, with `--machine` it is one bench per named machine.

use crate::catalog::Catalog;
use crate::config::Provision;
use crate::docker::container::{self, ContainerError};
use crate::error::{Exit, Result};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::bench::{Bench, LocalBench, Measured};
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::progress::Progress;
use crate::measure::{self, Budget, Executor, Interrupt, Subject};
use crate::record::{self, Record};
use crate::report::Verdict;
use crate::suite::ResolvedSuite;
use crate::transport::Transport;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The execution class of a run (`--class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The suite runs directly on the machine.
    Host,
    /// The suite runs in a container on the machine's Docker engine.
    Container,
}

impl Class {
    /// Every spelling, for messages and `--class`'s choices.
    pub const ALL: [&'static str; 2] = ["host", "container"];

    /// Read the record (and `--class`) spelling.
    pub fn parse(s: &str) -> Option<Class> {
        match s {
            "host" => Some(Class::Host),
            "container" => Some(Class::Container),
            _ => None,
        }
    }

    /// The record spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Class::Host => "host",
            Class::Container => "container",
        }
    }
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

/// One measurement, prepared: what every bench of the invocation runs.
pub struct Job<'a> {
    /// The operator's home.
    pub home: &'a Home,
    /// The local repository.
    pub repo: &'a Repo,
    /// The full SHA.
    pub sha: &'a str,
    /// The resolved suite (argv as resolved locally; admission rewrites `argv[0]`).
    pub suite: &'a ResolvedSuite,
    /// The attempt budget.
    pub budget: &'a Budget,
    /// Provisions that apply (already preflighted locally).
    pub provisions: &'a [Provision],
    /// Submodules at their gitlinks: (path, commit, the local repository holding it).
    pub submodules: &'a [crate::git::Submodule],
    /// The verb (`certify`).
    pub verb: &'a str,
    /// Extra environment for the suite.
    pub extra_env: &'a [(String, String)],
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// The affected tier's files (`None` for certify): `report_path` is then
    /// relative to `<run dir>/reports`, the manifest is staged at
    /// `<run dir>/manifest.json`, and `<run dir>/scope.json` is brought back.
    /// `@RUN@` in `extra_env` values stands for the run dir on the machine.
    pub affected: Option<&'a Path>,
    /// This saphan binary and its sha256, shipped to
    /// `<workhome>/saphan/bin/saphan-<sha256>` when `argv[0]` is `saphan`.
    pub self_binary: Option<(&'a Path, &'a str)>,
    /// The catalog, for the program's version command on this machine's
    /// bench (a fleet machine's comes from its capability row).
    pub catalog: Option<&'a Catalog>,
    /// Who watches.
    pub progress: &'a dyn Progress,
    /// The pointer's trunk (certify with one; `None` for the other verbs):
    /// what the records name and the pointer moves along; this machine's
    /// bench reads its tip with the pointer once the suite has ended
    /// ([`Measured::pointer`](crate::measure::bench::Measured::pointer)).
    pub trunk: Option<&'a str>,
    /// Whether the suite is sealed (`--seal`, `verify.<scope>.seal`) and
    /// where that came from ([`measure::SealPlan::mode_of`]).
    pub seal: (crate::seal::Mode, &'a str),
    /// Whose build caches the attempt uses; `None`: each bench asks
    /// [`measure::trust_of`] (trunk only for a commit on [`Job::trunk`],
    /// which only certify names).
    pub trust: Option<crate::seal::Trust>,
}

/// How many lines of the suite log a person sees on red and
/// measurement-failed.
pub const LOG_TAIL_LINES: usize = 30;

/// A local certify's outcome, printed by the CLI.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The appended record.
    pub record: Record,
    /// Where it was appended.
    pub attempts: PathBuf,
    /// What happened to the verified pointer (on every verdict — a red or
    /// failed measurement reads `unchanged: <sha> is not green`).
    pub pointer: record::PointerOutcome,
    /// The last lines of the suite's stderr (shown on red / failure).
    pub stderr_tail: String,
    /// The last lines of the kept suite log (stdout then stderr; shown on
    /// red / failure). Empty when no log was kept.
    pub log_tail: String,
    /// What each failing test wrote, bounded ([`crate::report::TestOutput`];
    /// shown on red / failure, and in `--json` as `test_output`).
    pub test_output: Vec<crate::report::TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
}

/// One machine's attempt, recorded.
#[derive(Debug, Clone)]
pub struct MachineRun {
    /// The record (as appended).
    pub record: Record,
    /// The last lines of the suite's stderr on the machine.
    pub stderr_tail: String,
    /// What each failing test wrote, bounded ([`crate::report::TestOutput`]).
    pub test_output: Vec<crate::report::TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
}

/// Every machine's attempt of one invocation, and what the pointer did.
#[derive(Debug, Clone)]
pub struct Multi {
    /// One run per machine, in the order named.
    pub runs: Vec<MachineRun>,
    /// Where the records were appended.
    pub attempts: PathBuf,
    /// What happened to the verified pointer.
    pub pointer: record::PointerOutcome,
    /// `green on m0, red on m1` when the machines disagree.
    pub disagreement: Option<String>,
    /// `certify --split`: the verdict over the shards' union.
    pub split: Option<Box<SplitOutcome>>,
    /// Container class: containers the sweep after the run could not
    /// remove (the CLI shows each as a warning).
    pub remain: Vec<crate::docker::container::ContainersRemain>,
    /// `--machine @admitted`: machines whose attempt ended in an
    /// infrastructure failure while another machine answered — recorded,
    /// but left out of the verdict (a named list never leaves one out).
    pub left_out: Vec<LeftOut>,
}

/// A machine left out of an `@admitted` verdict, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeftOut {
    /// The machine.
    pub machine: String,
    /// Its attempt's failure (an infrastructure kind).
    pub failure: crate::report::FailureKind,
    /// Its attempt's record id.
    pub id: String,
}

/// The verdict of a `certify --split` invocation over its shards.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SplitOutcome {
    /// Green only when every shard is green and coverage is complete.
    pub verdict: Verdict,
    /// Why it failed, when it is measurement-failed (the first failing
    /// shard's kind).
    pub failure: Option<crate::report::FailureKind>,
    /// The sum of the shards' counts (`None` when some shard's is unavailable).
    pub count: Option<u64>,
    /// The union of the shards' failing tests, in shard order.
    pub named_tests: Vec<String>,
    /// Every shard's notes, each prefixed with its machine.
    pub notes: Vec<String>,
    /// How many shards ran.
    pub shards: usize,
    /// The coverage proof (go-test-json suites); `None` when advisory.
    pub coverage: Option<crate::schedule::Coverage>,
    /// Why the result is advisory (a suite saphan cannot split itself).
    pub advisory: Option<String>,
}

impl Multi {
    /// The worst outcome: measurement-failed (3) > red (1) > green (0),
    /// over the effective attempts (an attempt a failover re-ran is
    /// superseded by its re-run); with `--split`, the split's verdict.
    pub fn exit(&self) -> Exit {
        if let Some(s) = &self.split {
            return s.verdict.exit();
        }
        let rank = |v: Verdict| match v {
            Verdict::Green => 0,
            Verdict::Red => 1,
            Verdict::MeasurementFailed => 2,
        };
        self.effective()
            .map(|r| r.verdict)
            .max_by_key(|v| rank(*v))
            .map(|v| v.exit())
            .unwrap_or(Exit::Ok)
    }

    /// The records the verdict is over: neither superseded by a failover's
    /// re-run nor left out (`@admitted`).
    pub fn effective(&self) -> impl Iterator<Item = &Record> {
        // An attempt another one re-ran (failover) is superseded by it.
        let superseded = |id: &str| {
            self.runs
                .iter()
                .any(|r| r.record.retry_of.as_deref() == Some(id))
        };
        self.runs
            .iter()
            .map(|r| &r.record)
            .filter(move |r| !superseded(&r.id) && !self.left_out.iter().any(|l| l.id == r.id))
    }

    /// The machines that certified the SHA — those of the effective
    /// records, each once, in order — when the pointer moved; empty
    /// otherwise.
    pub fn certified_by(&self) -> Vec<String> {
        let mut by: Vec<String> = Vec::new();
        if self.pointer.moved() {
            for r in self.effective() {
                if !by.contains(&r.machine) {
                    by.push(r.machine.clone());
                }
            }
        }
        by
    }
}

/// What one certify invocation did: on this machine, or on named machines.
#[derive(Debug, Clone)]
pub enum Certified {
    /// Without `--machine`: this machine's one record.
    Here(Box<Outcome>),
    /// With `--machine`: one record per machine.
    Machines(Multi),
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
    let trunk = record::trunk::for_certify(repo, settings.trunk.as_deref()).await?;
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
    match gate {
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
        Gate::FleetHost(admitted) => machines(&job, &admitted, &measure::Host).await,
        Gate::FleetContainer(c) => {
            // One container executor for every machine: bollard speaks to
            // each machine's engine over its socket, forwarded through the
            // machine's transport; each machine's container is its own
            // (named and labelled after the machine).
            let executor = container::LocalExecutor::new(
                target(local(), c.socket.clone(), c.image.clone(), None, Vec::new()),
                interrupt.clone(),
            );
            let out = machines(&job, &c.admitted, &executor).await;
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
    }
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
        crate::docker::require_container_capability(home, catalog, "local", now)?;
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
    let mut bench = LocalBench::open(job.home, job.repo, job.interrupt).await?;
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
        stderr_tail: measured.run.stderr_tail,
    })))
}

/// A bench per fleet machine, all at once: connect everywhere first (a
/// program resolved on a machine is refused before anything is shipped
/// anywhere), then every machine's attempt, one record each; the pointer
/// moves only when every machine is green.
async fn machines(
    job: &Job<'_>,
    admitted: &[crate::dispatch::Admitted],
    executor: &(dyn Executor + '_),
) -> Result<Certified> {
    let trunk = job.trunk;
    let mut benches = crate::dispatch::FleetBench::connect_all(job, admitted).await?;
    let runs = futures_util::future::join_all(benches.iter_mut().map(|b| {
        let machine = b.machine().to_string();
        async move {
            // Machines of one invocation may share an engine: each gets its own.
            let executor = executor.for_machine(&machine);
            let m = b.measure(job, executor.as_ref()).await;
            (m, executor.class())
        }
    }));
    // Which packages have test files, listed as a split lists them, while
    // the machines run: a package that ends `skip` on a machine did not
    // run the tests the listing found.
    let (results, listing) = tokio::join!(runs, tested_listing(job, admitted, executor));
    executor.settle().await;
    let ids: Vec<String> = admitted.iter().map(|m| m.row.id.clone()).collect();
    let mut runs = Vec::new();
    let mut refused = None;
    for ((m, class), b) in results.into_iter().zip(&benches) {
        match m {
            Ok(measured) => runs.push(MachineRun {
                record: {
                    let mut r = record_of(
                        job,
                        b.machine(),
                        class,
                        &measured,
                        Scope::Machines,
                        trunk,
                        &ids,
                    );
                    if let Some(l) = &listing {
                        untested(&mut r, &measured, l);
                    }
                    r
                },
                stderr_tail: measured.run.stderr_tail,
                test_output: measured.run.measurement.test_output,
                test_output_omitted: measured.run.measurement.test_output_omitted,
            }),
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    let records: Vec<Record> = runs.iter().map(|r| r.record.clone()).collect();
    // Every record first, then the pointer: under the repository's lock,
    // compare-and-swap, only forward along the trunk.
    let pointer = conclude::conclude(
        job.repo,
        job.sha,
        trunk,
        &records,
        Scope::Machines,
        LockHold::Take(job.interrupt),
    )
    .await?;
    Ok(Certified::Machines(Multi {
        disagreement: conclude::disagreement(&records),
        runs,
        attempts: record::attempts_path(job.repo),
        pointer,
        split: None,
        remain: Vec::new(),
        left_out: Vec::new(),
    }))
}

/// The record of one machine's attempt — the one place a certify record
/// is built, on this machine or a fleet machine. Every record carries
/// `trunk` (null when none is known); `Scope::Machines` records carry
/// `dispatch_machines` (`machines`), and a fleet bench's `machine_program`,
/// `bundle_bytes`, `phases`, `remote_tree` and `interrupted`.
pub fn record_of(
    job: &Job<'_>,
    machine: &str,
    class: &str,
    m: &Measured,
    scope: Scope,
    trunk: Option<&str>,
    machines: &[String],
) -> Record {
    let mut suite = job.suite.clone();
    suite.argv = m.argv.clone();
    let mut record = measure::record(
        Subject {
            verb: job.verb,
            repo: &job.repo.top,
            sha: job.sha,
            machine,
            class,
        },
        &suite,
        job.budget,
        &m.run,
    );
    record.notes.extend(m.notes.iter().cloned());
    if let Some(f) = &m.fleet {
        record.machine_program = Some(crate::record::MachineProgram {
            capability: f.capability.clone(),
            path: f.program_path.clone(),
            version: f.program_version.clone(),
        });
        record.bundle_bytes = Some(f.bundle_bytes);
        record.phases = Some(f.phases.clone());
        record.remote_tree = Some(f.remote_tree.clone());
        record.interrupted = f.interrupted;
        if job.suite.report == crate::report::ReportKind::GoTestJson {
            let seconds: std::collections::BTreeMap<String, f64> = package_ends(m)
                .into_iter()
                .filter_map(|e| e.elapsed.map(|s| (e.package, s)))
                .collect();
            if !seconds.is_empty() {
                record.package_seconds = Some(seconds);
            }
        }
    }
    if let Some(c) = record.container.as_mut() {
        container_program(job, machine, m, c, &mut record.program_path);
        record.program_version = Some(crate::record::Avail::Unavailable);
    }
    // Local and dispatched records carry the same keys: `trunk` always
    // (null when none is known).
    record.trunk = Some(trunk.map(str::to_string));
    if let Scope::Machines = scope {
        record.dispatch_machines = Some(machines.to_vec());
    }
    record
}

/// The listing of an unsplit go-test-json run on fleet machines (host
/// class, `go test … ./...`): `crate::schedule::list_packages` with this
/// machine's `go`, as `certify --split` lists, so the packages with test
/// files are known. `None` when the suite is no such run, or the listing
/// cannot be made here (no `go`, another version than the machines') —
/// the check is then not made (docs/dispatch.md).
async fn tested_listing(
    job: &Job<'_>,
    admitted: &[crate::dispatch::Admitted],
    executor: &dyn Executor,
) -> Option<crate::schedule::Listing> {
    let first = admitted.first()?;
    if executor.class() != "host" || job.suite.report != crate::report::ReportKind::GoTestJson {
        return None;
    }
    let at = crate::schedule::go_split_at(&first.argv)?;
    if admitted
        .iter()
        .any(|a| crate::schedule::go_split_at(&a.argv) != Some(at))
    {
        return None;
    }
    let versions: Vec<(String, Option<String>)> = admitted
        .iter()
        .map(|a| (a.row.id.clone(), a.program_version.clone()))
        .collect();
    let go = crate::schedule::local_go(&versions).await.ok()?;
    crate::schedule::list_packages(
        job.home,
        job.repo,
        job.sha,
        &first.argv,
        job.extra_env,
        &go,
        job.interrupt,
    )
    .await
    .ok()
}

/// Mark `r`, the record of an unsplit run `m`, when its stream ended `skip`
/// (no test files) a package the listing found test files in: its tests
/// never ran there (the machine's own `GOFLAGS` tags, a build constraint
/// of its platform). A green becomes measurement-failed,
/// `tests-never-ran`; any verdict gets the note naming the packages.
fn untested(r: &mut Record, m: &Measured, listing: &crate::schedule::Listing) {
    let mut skipped: Vec<String> = package_ends(m)
        .into_iter()
        .filter(|e| e.action == "skip" && listing.tested.contains(&e.package))
        .map(|e| e.package)
        .collect();
    skipped.sort();
    skipped.dedup();
    if skipped.is_empty() {
        return;
    }
    let kind = crate::report::FailureKind::TestsNeverRan;
    r.notes.push(format!(
        "{kind}: {} package(s) have test files at the SHA but ended `skip` (no test files) on {}, so their tests never ran: {} — the machine's own environment dropped them (its `go env GOFLAGS` tags, a build constraint of its platform)",
        skipped.len(),
        r.machine,
        skipped.join(", ")
    ));
    if r.verdict == crate::report::Verdict::Green {
        r.verdict = crate::report::Verdict::MeasurementFailed;
        r.failure = Some(kind);
    }
}

/// The suite's stdout a fleet bench brought back (`stdout`), when it did.
pub fn stdout_of(m: &Measured) -> Option<std::path::PathBuf> {
    let p = m.local.as_ref()?.path().join("stdout");
    p.is_file().then_some(p)
}

/// The package ends of a fleet bench's go-test-json stream
/// ([`crate::report::gojson::package_ends`]); empty when nothing was
/// brought back.
pub fn package_ends(m: &Measured) -> Vec<crate::report::gojson::PackageEnd> {
    match stdout_of(m) {
        Some(p) => {
            crate::report::gojson::package_ends(&p, "the suite's stdout").unwrap_or_default()
        }
        None => Vec::new(),
    }
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

/// A container-class record names the image's program, not the engine's:
/// `program_path` is `argv[0]` as the container's command names it, and the
/// engine's client program and version (the machine's docker-oci row: a
/// fleet bench's admitted program, or this machine's `local` row) go to
/// `engine_path` / `engine_version`.
fn container_program(
    job: &Job<'_>,
    machine: &str,
    m: &Measured,
    c: &mut crate::record::ContainerRun,
    program_path: &mut Option<String>,
) {
    *program_path = m.argv.first().cloned();
    match &m.fleet {
        Some(f) => {
            c.engine_path = Some(f.program_path.clone());
            c.engine_version = f.program_version.clone();
        }
        None => {
            let row = crate::fleet::ledger::Ledger::open(job.home)
                .ok()
                .and_then(|l| l.latest_capability(machine, crate::docker::DOCKER_OCI));
            if let Some(row) = row {
                c.engine_path = Some(row.inputs.declared_path);
                c.engine_version = row.version_output;
            }
        }
    }
}
