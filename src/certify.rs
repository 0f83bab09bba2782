//! `saphan certify`: the main job. Resolve the suite, preflight the local
//! toolchain, lock the repository, check out the exact SHA in a scratch
//! detached worktree, run the suite under its budget, append the record,
//! and move `refs/saphan/verified` only on green. The scratch tree is
//! removed on every path (green, red, timeout, error, Ctrl-C).

use crate::catalog::Catalog;
use crate::error::{Refusal, Result};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::{self, Budget, Interrupt, Subject};
use crate::record::{self, Record};
use crate::report::Verdict;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The execution class of a run (`--class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Class {
    /// The suite runs directly on the machine.
    Host,
    /// The suite runs in a container on the machine's Docker engine.
    Container,
}

impl Class {
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
}

/// Refusals of certify itself.
#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    /// Container-class dispatch was asked for; this version dispatches
    /// host-class runs only.
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

/// How many lines of the suite log a person sees on red and
/// measurement-failed.
pub const LOG_TAIL_LINES: usize = 30;

/// The outcome printed by the CLI.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The appended record.
    pub record: Record,
    /// Where it was appended.
    pub attempts: PathBuf,
    /// What happened to the verified pointer: `moved`, or `unchanged: <why>`
    /// (on every verdict — a red or failed measurement reads
    /// `unchanged: <sha> is not green`).
    pub pointer: String,
    /// The last lines of the suite's stderr (shown on red / failure).
    pub stderr_tail: String,
    /// The last lines of the kept suite log (stdout then stderr; shown on
    /// red / failure). Empty when no log was kept.
    pub log_tail: String,
}

/// Observer for a person watching (spinner); silent by default.
pub trait Watch: Send + Sync {
    /// The suite is about to run.
    fn running(&self, _sha: &str, _argv: &[String], _budget: &Budget) {}
    /// The suite finished.
    fn done(&self) {}
}

/// A [`Watch`] that shows nothing.
pub struct Quiet;
impl Watch for Quiet {}

/// True when `settings` names fleet machines (anything but `local` alone).
pub fn is_dispatch(settings: &Settings) -> bool {
    settings.machines.iter().any(|m| m != "local")
}

/// Certify `settings.rev` of `settings.repo` on the fleet machines named in
/// `settings.machines` (host class): the same local refusals first, then
/// admission from the ledger, then [`crate::dispatch::run_all`].
///
/// Errors: the local refusals, `machine-unknown`,
/// `verification-toolchain-absent` (with the machine and remedy lines),
/// `dispatch-unavailable` for the container class (not built yet), a
/// provision dest conflict found on a machine.
pub async fn certify_machines(
    home: &Home,
    catalog: &Catalog,
    settings: &Settings,
    progress: &dyn crate::dispatch::Progress,
    interrupt: &Interrupt,
) -> Result<crate::dispatch::Multi> {
    let setup = measure::Setup::open(home, &settings.repo).await?;
    let repo = &setup.repo;
    let sha = repo
        .resolve(settings.rev.as_deref().unwrap_or("HEAD"))
        .await?;
    let (suite, _) = setup.full_suite(&sha, "certify").await?;
    let provisions = setup.provisions()?;
    if settings.class == Class::Container {
        let now = time::OffsetDateTime::now_utc();
        for m in settings.machines.iter().filter(|m| *m != "local") {
            crate::docker::require_container_capability(home, catalog, m, now)?;
        }
        return Err(CertifyError::DispatchUnavailable {
            machines: settings.machines.join(","),
            class: settings.class.as_str(),
        }
        .into());
    }
    let admitted = crate::dispatch::admit_all(home, catalog, &settings.machines, &suite)?;
    let trunk = record::trunk_ref(repo, settings.trunk.as_deref()).await?;
    let budget = Budget::attempt(settings.timeout, &suite, "verify.full");
    let submodules = repo.submodules(&sha).await?;
    let job = crate::dispatch::Job {
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
    };
    crate::dispatch::run_all(
        &job,
        &admitted,
        trunk.as_deref(),
        &crate::dispatch::HostExecutor,
        progress,
    )
    .await
}

/// Certify `settings.rev` of `settings.repo` on the local machine.
///
/// Errors: every refusal happens before the lock and before any worktree
/// (bad repo or revision, no suite, bad config, provision sources, absent
/// toolchain); after that every outcome is a record.
pub async fn certify(
    home: &Home,
    catalog: &Catalog,
    settings: &Settings,
    watch: &dyn Watch,
    interrupt: &Interrupt,
) -> Result<Outcome> {
    let setup = measure::Setup::open(home, &settings.repo).await?;
    let repo = &setup.repo;
    let sha = repo
        .resolve(settings.rev.as_deref().unwrap_or("HEAD"))
        .await?;
    let (suite, tree_files) = setup.full_suite(&sha, "certify").await?;
    let in_tree = |p: &str| tree_files.iter().any(|f| f == p);
    let provisions = setup.provisions()?;
    let remote: Vec<&String> = settings.machines.iter().filter(|m| *m != "local").collect();
    if settings.class == Class::Container {
        // Container-class runs need proof that each machine can run the
        // pinned probe image, before anything else happens there.
        let now = time::OffsetDateTime::now_utc();
        let targets: Vec<&str> = if remote.is_empty() {
            vec!["local"]
        } else {
            remote.iter().map(|m| m.as_str()).collect()
        };
        for m in targets {
            crate::docker::require_container_capability(home, catalog, m, now)?;
        }
        return Err(CertifyError::DispatchUnavailable {
            machines: settings.machines.join(","),
            class: settings.class.as_str(),
        }
        .into());
    }
    crate::suite::preflight_local(&suite, catalog, &sha, in_tree)?;
    let trunk = record::trunk_ref(repo, settings.trunk.as_deref()).await?;
    let budget = Budget::attempt(settings.timeout, &suite, "verify.full");

    let _lock = record::Lock::acquire(repo, interrupt).await?;
    let scratch = repo
        .scratch_worktree_at(&scratch_path(home, repo), &sha)
        .await?;
    watch.running(&sha, &suite.argv, &budget);
    let run = measure::run_then_remove(
        scratch,
        measure::Plan {
            suite: &suite,
            budget: &budget,
            provisions: &provisions,
            extra_env: &[],
            report_root: None,
            keep_stdout: None,
            log_dir: Some(&measure::log_dir(repo)),
            catalog: Some(catalog),
        },
        interrupt,
    )
    .await;
    watch.done();
    let run = run?;

    let record = measure::record(
        Subject {
            verb: "certify",
            repo: &repo.top,
            sha: &sha,
            machine: "local",
            class: settings.class.as_str(),
        },
        &suite,
        &budget,
        &run,
    );
    let mut record = record;
    record
        .extra
        .insert("trunk".into(), serde_json::json!(trunk));
    let attempts = record::attempts_path(repo);
    record::append_off_runtime(&attempts, &record).await?;
    let pointer = if record.verdict == Verdict::Green && record.count == record::Avail::Value(0) {
        // Measured truthfully, but a suite that ran nothing verified nothing.
        "unchanged: the suite ran 0 tests — a green that tested nothing does not verify the SHA"
            .to_string()
    } else if record.verdict == Verdict::Green {
        record::advance_verified(repo, &sha, trunk.as_deref()).await?
    } else {
        format!("unchanged: {sha} is not green")
    };
    Ok(Outcome {
        record,
        attempts,
        pointer,
        log_tail: run.log_tail(LOG_TAIL_LINES),
        stderr_tail: run.stderr_tail,
    })
}

/// The one scratch worktree path of `repo` (keyed by its git common dir,
/// so every worktree of one repository shares it):
/// `SAPHAN_HOME/scratch/<16 hex>/tree`. Only a holder of the repository
/// lock ([`record::Lock`]) may check out there — certify, verify-affected,
/// verify-union and verify-stream all do — so one measurement at a time
/// uses it: a fresh detached checkout every attempt, but at the same
/// directory, which keeps directory-keyed build caches (Go's) warm across
/// attempts and across those verbs.
pub fn scratch_path(home: &Home, repo: &Repo) -> PathBuf {
    let key = crate::fsutil::sha256_hex(repo.common_dir.as_os_str().as_encoded_bytes());
    home.scratch(&key[..16])
}

/// The records of the repository containing `repo`, and where they live.
pub async fn records(repo: &Path) -> Result<(PathBuf, record::Attempts)> {
    let repo = Repo::open(repo).await?;
    let path = record::attempts_path(&repo);
    let all = record::read_all(&path)?;
    Ok((path, all))
}
