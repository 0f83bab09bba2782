//! The one attempt pipeline (DESIGN §6b): **prepare** once (repository,
//! SHA, suite, provisions, budget, class, image: the verb does, e.g.
//! `crate::commands::certify`) → one **bench** per machine
//! ([`super::bench::LocalBench`] for this machine, a fleet machine's bench
//! in `dispatch` — a `transport = "local"` row is one too) → the run
//! through `Transport` ([`super::run_suite_with`]) → [`record_of`] →
//! [`super::conclude`]: every record appended, then the pointer under the
//! repository lock. This module holds what every bench and verb shares:
//! the prepared [`Job`], the one record builder, a local attempt's
//! [`Outcome`]; it knows no verb, no schedule and no dispatch.

use crate::catalog::Catalog;
use crate::config::Provision;
use crate::git::Repo;
use crate::home::Home;
use crate::measure::bench::Measured;
use crate::measure::conclude::Scope;
use crate::measure::progress::Progress;
use crate::measure::{self, Budget, Interrupt, Subject};
use crate::record::{self, Record};
use crate::suite::ResolvedSuite;
use std::path::{Path, PathBuf};

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

impl Job<'_> {
    /// This job as the taker of the repository lock for a pointer move
    /// ([`super::conclude::LockHold::Take`]).
    pub fn waiter(&self) -> super::conclude::Waiter<'_> {
        super::conclude::Waiter {
            interrupt: self.interrupt,
            verb: self.verb,
            progress: self.progress,
        }
    }
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
    /// Every test the report says ended (`--junit`).
    pub tests: crate::report::Tests,
    /// The pointer's first move along a trunk it now follows for good
    /// (set by the verb when this attempt moved it first).
    pub first_follow: Option<record::trunk::FirstFollow>,
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
        record.slurm_job = f.slurm_job;
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
