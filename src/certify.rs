//! `saphan certify`: the main job. Resolve the suite, preflight the local
//! toolchain, lock the repository, check out the exact SHA in a scratch
//! detached worktree, run the suite under its budget, append the record,
//! and move `refs/saphan/verified` only on green. The scratch tree is
//! removed on every path (green, red, timeout, error, Ctrl-C).

use crate::catalog::Catalog;
use crate::docker::container::{self, ContainerError};
use crate::error::{Refusal, Result};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::{self, Budget, Interrupt, Subject};
use crate::record::{self, Record};
use crate::report::Verdict;
use crate::transport::Transport;
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
    /// `--image`: the suite image pin for `--class container`
    /// (`sha256:<image id>` or `NAME@sha256:<registry digest>`).
    pub image: Option<String>,
    /// `--network`: give a container-class suite the engine's default
    /// network (off otherwise).
    pub network: bool,
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
    /// What each failing test wrote, bounded ([`crate::report::TestOutput`];
    /// shown on red / failure, and in `--json` as `test_output`).
    pub test_output: Vec<crate::report::TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
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
/// `settings.machines` (host or container class): the same local refusals first, then
/// admission from the ledger, then [`crate::dispatch::run_all`].
///
/// Errors: the local refusals, `machine-unknown`,
/// `verification-toolchain-absent` (with the machine and remedy lines),
/// the container class's pin and engine refusals
/// (`container-image-missing`, `container-image-tag`,
/// `container-image-absent`, `container-engine-unreachable`, the
/// docker-oci gate), a provision dest conflict found on a machine.
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
    let (mut suite, _) = setup.full_suite(&sha, "certify").await?;
    let provisions = setup.provisions()?;
    let container = if settings.class == Class::Container {
        let pin = match settings.image.as_deref() {
            None => return Err(ContainerError::ImageMissing.into()),
            Some(i) => container::parse_image(i)?,
        };
        let now = time::OffsetDateTime::now_utc();
        for m in settings.machines.iter().filter(|m| *m != "local") {
            crate::docker::require_container_capability(home, catalog, m, now)?;
        }
        if suite.source == crate::suite::SuiteSource::DefaultGo {
            // In a container, default-go's `go` is the image's, on its PATH.
            suite.argv[0] = "go".into();
        }
        Some(container::admit_all(home, catalog, &settings.machines, &suite, pin).await?)
    } else {
        None
    };
    let admitted = match &container {
        Some(c) => c.admitted.clone(),
        None => crate::dispatch::admit_all(home, catalog, &settings.machines, &suite)?,
    };
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
    let Some(c) = container else {
        return crate::dispatch::run_all(
            &job,
            &admitted,
            trunk.as_deref(),
            &crate::dispatch::HostExecutor,
            progress,
        )
        .await;
    };
    // One container executor for local and fleet machines: bollard speaks
    // to each machine's engine over its socket, forwarded through the
    // machine's transport (the core passes it to `execute`).
    let attempt = record::new_id();
    let executor = container::LocalExecutor::new(
        suite_target(
            Transport::Local(crate::transport::Local),
            c.socket.clone(),
            c.image.clone(),
            settings.network,
            None,
            &attempt,
            &repo.top,
            &sha,
            Vec::new(),
        ),
        interrupt.clone(),
    );
    let out =
        crate::dispatch::run_all(&job, &admitted, trunk.as_deref(), &executor, progress).await;
    executor.settle().await;
    // Whatever happened, no container of this attempt stays on a machine.
    c.sweep(home, container::LABEL_ATTEMPT, &attempt).await;
    out
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
    let (mut suite, tree_files) = setup.full_suite(&sha, "certify").await?;
    let in_tree = |p: &str| tree_files.iter().any(|f| f == p);
    let provisions = setup.provisions()?;
    let remote: Vec<&String> = settings.machines.iter().filter(|m| *m != "local").collect();
    let container = if settings.class == Class::Container {
        // The suite image pin is operator input: refused before anything.
        let pin = match settings.image.as_deref() {
            None => return Err(ContainerError::ImageMissing.into()),
            Some(i) => container::parse_image(i)?,
        };
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
        if !remote.is_empty() {
            // `certify_machines` runs fleet machines; this is the local engine.
            return Err(CertifyError::DispatchUnavailable {
                machines: settings.machines.join(","),
                class: settings.class.as_str(),
            }
            .into());
        }
        if suite.source == crate::suite::SuiteSource::DefaultGo {
            // In a container, default-go's `go` is the image's, on its PATH.
            suite.argv[0] = "go".into();
        }
        // The suite image must be on the engine already: nothing is pulled,
        // and an absent image is refused before any worktree exists.
        let socket = crate::docker::socket_of(catalog.get(crate::docker::DOCKER_OCI)?);
        let transport = Transport::Local(crate::transport::Local);
        let load = container::load_route(&pin, None);
        let image = container::resolve_image(&transport, "local", &socket, &pin, load).await?;
        Some((transport, socket, image))
    } else {
        if !remote.is_empty() {
            return Err(CertifyError::DispatchUnavailable {
                machines: settings.machines.join(","),
                class: settings.class.as_str(),
            }
            .into());
        }
        // The suite runs on this host: its toolchain must be here.
        crate::suite::preflight_local(&suite, catalog, &sha, in_tree)?;
        None
    };
    let trunk = record::trunk_ref(repo, settings.trunk.as_deref()).await?;
    let budget = Budget::attempt(settings.timeout, &suite, "verify.full");

    let _lock = record::Lock::acquire(repo, interrupt).await?;
    let scratch = repo
        .scratch_worktree_at(&scratch_path(home, repo), &sha)
        .await?;
    let attempt = record::new_id();
    // The container's Go build cache, kept between runs like the host's
    // own (content-addressed: it speeds builds, never changes a verdict).
    let go_cache = if container.is_some() {
        let dir = home.root().join("cache/go-build");
        std::fs::create_dir_all(&dir).map_err(|source| crate::error::IoError::Io {
            action: "create the container Go build cache",
            path: dir.clone(),
            source,
        })?;
        Some((
            dir.display().to_string(),
            container::GO_CACHE_IN_CONTAINER.to_string(),
            "GOCACHE".to_string(),
        ))
    } else {
        None
    };
    let executor = container.map(|(transport, socket, image)| {
        container::LocalExecutor::new(
            suite_target(
                transport,
                socket,
                image,
                settings.network,
                Some(format!(
                    "{}:{}",
                    nix::unistd::getuid(),
                    nix::unistd::getgid()
                )),
                &attempt,
                &repo.top,
                &sha,
                go_cache.into_iter().collect(),
            ),
            interrupt.clone(),
        )
    });
    watch.running(&sha, &suite.argv, &budget);
    let plan = measure::Plan {
        suite: &suite,
        budget: &budget,
        provisions: &provisions,
        extra_env: &[],
        report_root: None,
        keep_stdout: None,
        log_dir: Some(&measure::log_dir(repo)),
        catalog: Some(catalog),
    };
    let run = match &executor {
        None => measure::run_then_remove(scratch, plan, interrupt).await,
        Some(x) => {
            let run = measure::run_suite_with(&scratch, plan, x, interrupt).await;
            // The container is gone (removed on every path) before its tree.
            x.settle().await;
            let removed = scratch.remove().await;
            run.and_then(|r| removed.map(|()| r).map_err(Into::into))
        }
    };
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
        test_output: run.measurement.test_output,
        test_output_omitted: run.measurement.test_output_omitted,
        stderr_tail: run.stderr_tail,
    })
}

/// Where one container-class attempt runs: the attempt's labels
/// (`saphan.attempt`, `saphan.repo`, `saphan.sha`) and its container name
/// `saphan-suite-<attempt>` (unique per engine).
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
) -> container::Target {
    container::Target {
        transport,
        socket,
        image,
        network,
        user,
        labels: [
            (container::LABEL_ATTEMPT, attempt.to_string()),
            (container::LABEL_REPO, repo.display().to_string()),
            (container::LABEL_SHA, sha.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        name: format!("saphan-suite-{attempt}"),
        caches,
    }
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
