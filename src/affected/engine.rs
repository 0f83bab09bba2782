//! `saphan verify-affected`: the engine side of the proc-adapter protocol.
//!
//! 1. Resolve base and head to SHAs; list `git diff --name-only
//!    --no-renames base...head` (the paths changed on head's side since the
//!    merge base).
//! 2. No `[verify.affected]` → the result is `unavailable` (exit 2), never
//!    green. Nothing is created.
//! 3. Write the manifest into a fresh private directory; make a fresh empty
//!    report directory beside it; make a detached scratch worktree at the
//!    exact head.
//! 4. Run the declared argv there (`argv[0]` `saphan` means this very binary)
//!    with `SAPHAN_AFFECTED_MANIFEST`, `SAPHAN_AFFECTED_SCOPE_OUT` and
//!    `SAPHAN_AFFECTED_REPORT_DIR` set, under `[verify.affected].timeout`
//!    (default: the measuring core's 10-minute floor), through the
//!    measurement core [`crate::measure::run_suite`] (provisions included).
//! 5. No scope → error. A scope selecting nothing, from an adapter that ran
//!    nothing and exited 0 → `nothing-selected` (exit 0: the change touches
//!    no package; it is not a green). Otherwise the report is measured by
//!    [`crate::report::measure`] (`report_path` relative to the report
//!    directory); a junit-xml adapter whose report matched nothing → error.
//! 6. The scratch worktree and the private directory are removed; no attempt
//!    record is written and `refs/saphan/verified` is never read or moved:
//!    the tier is advisory.

use super::AffectedError;
use super::protocol::{
    ENV_MANIFEST, ENV_REPORT_DIR, ENV_SCOPE_OUT, Manifest, NoPackagePath, ProtocolIssue, Scope,
    VERSION, WideningPath,
};
use crate::config::{Config, Suite};
use crate::error::{Exit, Result};
use crate::exec::Termination;
use crate::git::{self, Repo};
use crate::home::Home;
use crate::measure::bench::Bench;
use crate::measure::pipeline::Job;
use crate::measure::{self, Budget, Interrupt, SuiteRun};
use crate::report::{FailureKind, Measurement, ReportKind, Verdict};
use crate::suite::ResolvedSuite;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `verify-affected` is asked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--repo`: any directory inside the repository.
    pub repo: PathBuf,
    /// `--base`.
    pub base: String,
    /// `--head` (default `HEAD`).
    pub head: String,
    /// The operator's home (config).
    pub home: Home,
    /// `--machine`: run the adapter on this fleet machine instead of here
    /// (empty = this machine).
    pub machines: Vec<String>,
    /// The catalog in use (admission on a machine).
    pub catalog: Option<crate::catalog::Catalog>,
}

/// The result's one-word outcome (`result` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The selected packages ran and passed.
    Green,
    /// A selected test failed.
    Red,
    /// The adapter ran but no honest verdict could be derived.
    MeasurementFailed,
    /// The change maps to no package: nothing ran. Not a green.
    NothingSelected,
    /// No affected adapter is declared: nothing ran. Never a green.
    Unavailable,
}

impl Outcome {
    /// The word printed and written in JSON.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Green => "green",
            Outcome::Red => "red",
            Outcome::MeasurementFailed => "measurement-failed",
            Outcome::NothingSelected => "nothing-selected",
            Outcome::Unavailable => "unavailable",
        }
    }
    /// The exit code: 0 green / nothing-selected, 1 red, 2 unavailable, 3
    /// measurement-failed.
    pub fn exit(&self) -> Exit {
        match self {
            Outcome::Green | Outcome::NothingSelected => Exit::Ok,
            Outcome::Red => Exit::Red,
            Outcome::Unavailable => Exit::Refusal,
            Outcome::MeasurementFailed => Exit::MeasurementFailed,
        }
    }
}

/// What the reverse closure added, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClosureContribution {
    /// Selected packages that no changed path belongs to: the closure's
    /// additions (`selected − changed`), sorted.
    pub packages: Vec<String>,
    /// `packages.len()`.
    pub count: usize,
    /// Seconds the adapter spent choosing (its own measurement), when it said.
    pub selection_seconds: Option<f64>,
    /// Test seconds of the closure's packages: the sum of the per-package
    /// times the suite reported (packages run in parallel, so this is work,
    /// not wall time); `None` when the adapter timed no packages.
    pub test_seconds: Option<f64>,
    /// The same sum over the changed packages, for comparison.
    pub changed_test_seconds: Option<f64>,
}

/// Everything `verify-affected` says (its `--json` object).
#[derive(Debug, Clone, Serialize)]
pub struct AffectedResult {
    /// Always `affected`.
    pub tier: &'static str,
    /// The outcome.
    pub result: Outcome,
    /// Why the outcome is what it is, in words (empty for a plain green/red).
    pub reason: Option<String>,
    /// The repository's top directory.
    pub repository: String,
    /// Where the adapter ran: `local` (this machine) or the fleet machine
    /// `--machine` named.
    pub machine: String,
    /// Base SHA.
    pub base: String,
    /// Head SHA (the tree the adapter ran in).
    pub head: String,
    /// Changed paths (the manifest's).
    pub changed_paths: Vec<String>,
    /// Changed paths mapping to no package, with reasons.
    pub no_package_paths: Vec<NoPackagePath>,
    /// Packages a changed path belongs to.
    pub changed_packages: Vec<String>,
    /// Packages the change deleted.
    pub deleted_packages: Vec<String>,
    /// Packages run.
    pub selected_packages: Vec<String>,
    /// Packages not run.
    pub omitted_packages: Vec<String>,
    /// True when the run widened to the full module.
    pub widened: bool,
    /// The paths that widened it and why.
    pub widened_by: Vec<WideningPath>,
    /// What the reverse closure added.
    pub closure_contribution: Option<ClosureContribution>,
    /// The adapter argv exactly as run (empty when unavailable).
    pub adapter_argv: Vec<String>,
    /// The declared report kind.
    pub report: Option<ReportKind>,
    /// The budget, in seconds.
    pub budget_seconds: Option<u64>,
    /// `default` or `config:verify.affected.timeout`.
    pub budget_source: Option<String>,
    /// Wall-clock seconds the adapter ran (selection and suite together).
    pub adapter_seconds: Option<f64>,
    /// The adapter's exit status, when it exited.
    pub adapter_exit_code: Option<i32>,
    /// The measurement (count, named failing tests, notes).
    pub measurement: Option<Measurement>,
    /// Always `untouched`: this tier never moves `refs/saphan/verified`.
    pub verified_pointer: &'static str,
}

impl AffectedResult {
    fn new(repo: &Repo, base: &str, head: &str, changed: Vec<String>) -> AffectedResult {
        AffectedResult {
            tier: "affected",
            result: Outcome::Unavailable,
            reason: None,
            repository: repo.top.to_string_lossy().into_owned(),
            machine: "local".into(),
            base: base.into(),
            head: head.into(),
            changed_paths: changed,
            no_package_paths: vec![],
            changed_packages: vec![],
            deleted_packages: vec![],
            selected_packages: vec![],
            omitted_packages: vec![],
            widened: false,
            widened_by: vec![],
            closure_contribution: None,
            adapter_argv: vec![],
            report: None,
            budget_seconds: None,
            budget_source: None,
            adapter_seconds: None,
            adapter_exit_code: None,
            measurement: None,
            verified_pointer: "untouched",
        }
    }

    fn take_scope(&mut self, s: Scope) {
        let added = s.closure_added();
        let run: Vec<String> = s
            .changed_packages
            .iter()
            .filter(|p| s.selected_packages.contains(p))
            .cloned()
            .collect();
        let timed = !s.package_seconds.is_empty();
        self.closure_contribution = Some(ClosureContribution {
            count: added.len(),
            test_seconds: if timed { s.seconds_of(&added) } else { None },
            changed_test_seconds: if timed { s.seconds_of(&run) } else { None },
            packages: added,
            selection_seconds: s.selection_seconds,
        });
        self.no_package_paths = s.no_package_paths;
        self.changed_packages = s.changed_packages;
        self.deleted_packages = s.deleted_packages;
        self.selected_packages = s.selected_packages;
        self.omitted_packages = s.omitted_packages;
        self.widened = s.widened;
        self.widened_by = s.widened_by;
    }
}

/// `git diff --name-only --no-renames -z base...head`, sorted and unique.
pub async fn changed_paths(repo: &Repo, base: &str, head: &str) -> Result<Vec<String>> {
    let range = format!("{base}...{head}");
    let out = git::git(
        &repo.top,
        &["diff", "--name-only", "--no-renames", "-z", &range, "--"],
    )
    .await
    .map_err(|e| AffectedError::Diff {
        base: base.into(),
        head: head.into(),
        detail: e.to_string(),
    })?;
    let mut v: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// Whether `argv` runs the bundled Go adapter (`saphan adapter
/// go-affected …`).
fn is_go_affected(argv: &[String]) -> bool {
    argv.len() >= 3 && argv[0] == "saphan" && argv[1] == "adapter" && argv[2] == "go-affected"
}

/// The adapter argv as run: a declared `saphan` means this binary.
fn adapter_argv(declared: &[String]) -> Vec<String> {
    let mut argv = declared.to_vec();
    if argv.first().map(String::as_str) == Some("saphan")
        && let Ok(me) = std::env::current_exe()
    {
        argv[0] = me.to_string_lossy().into_owned();
    }
    argv
}

fn tail(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = s.lines().collect();
    let start = lines.len().saturating_sub(6);
    format!("; its stderr ends: {}", lines[start..].join(" | "))
}

/// Run the affected tier. Returns the result for every outcome that is an
/// answer (green, red, measurement-failed, nothing-selected, unavailable);
/// errors are refusals and broken protocol (see [`AffectedError`]).
pub async fn verify_affected(s: &Settings, interrupt: &Interrupt) -> Result<AffectedResult> {
    let repo = Repo::open(&s.repo).await?;
    let base = repo.resolve(&s.base).await?;
    let head = repo.resolve(&s.head).await?;
    let config = Config::for_repo(&s.home, &repo.common_dir)?;
    let changed = changed_paths(&repo, &base, &head).await?;
    let mut res = AffectedResult::new(&repo, &base, &head, changed.clone());

    let Some(suite) = config.affected.clone() else {
        res.reason = Some(
            "no [verify.affected] adapter is declared, so nothing was selected or run — declare one: \
             saphan config set verify.affected.argv \"saphan,adapter,go-affected\" and \
             saphan config set verify.affected.report go-test-json"
                .into(),
        );
        return Ok(res);
    };
    if suite.argv.is_empty() || suite.argv[0].is_empty() {
        return Err(AffectedError::NoArgv.into());
    }
    let remote: Vec<String> = s
        .machines
        .iter()
        .flat_map(|m| m.split(','))
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty() && m != "local")
        .collect();
    let target = match remote.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        _ => {
            return Err(AffectedError::OneMachine {
                machines: remote.join(","),
            }
            .into());
        }
    };
    if let Some(m) = &target {
        res.machine = m.clone();
    }
    let on = target.map(|m| Remote {
        home: &s.home,
        catalog: s.catalog.as_ref(),
        machine: m,
    });
    run_adapter(
        &s.home, &repo, &config, &suite, changed, &mut res, interrupt, on,
    )
    .await?;
    Ok(res)
}

/// A fleet machine the adapter runs on.
struct Remote<'a> {
    home: &'a Home,
    catalog: Option<&'a crate::catalog::Catalog>,
    machine: String,
}

#[allow(clippy::too_many_arguments)]
async fn run_adapter(
    home: &Home,
    repo: &Repo,
    cfg: &Config,
    declared: &Suite,
    changed: Vec<String>,
    res: &mut AffectedResult,
    interrupt: &Interrupt,
    on: Option<Remote<'_>>,
) -> Result<()> {
    let mut suite = ResolvedSuite::declared(declared, "verify.affected");
    // The bundled Go adapter lists and tests with verify.full's
    // package-choosing flags (`-tags=…`) unless it was given its own: the
    // affected tier sees the packages certification sees.
    if is_go_affected(&suite.argv)
        && suite.argv.len() == 3
        && let Some(full) = cfg
            .full
            .as_ref()
            .filter(|f| f.argv.get(1).is_some_and(|a| a == "test"))
    {
        suite.argv.extend(crate::schedule::list_flags(&full.argv));
    }
    if on.is_none() {
        suite.argv = adapter_argv(&suite.argv);
    }
    let budget = Budget::attempt(None, &suite, "verify.affected");
    let (seal_mode, seal_source) = measure::SealPlan::mode_of(None, &suite, "verify.affected");
    let provisions = measure::provisions(cfg, repo)?;
    res.report = Some(suite.report);
    res.budget_seconds = Some(budget.duration.as_secs());
    res.budget_source = Some(budget.source.clone());
    res.adapter_argv = suite.argv.clone();
    let shown = suite.argv.join(" ");

    let io = |action: &'static str, path: PathBuf| {
        move |source: std::io::Error| crate::error::IoError::Io {
            action,
            path,
            source,
        }
    };
    let private = tempfile::Builder::new()
        .prefix("saphan-affected-")
        .tempdir()
        .map_err(io("create a temp directory in", std::env::temp_dir()))?;
    let manifest_path = private.path().join("manifest.json");
    let manifest = Manifest {
        version: VERSION,
        repository: res.repository.clone(),
        base: res.base.clone(),
        head: res.head.clone(),
        changed_paths: changed,
    };
    crate::fsutil::atomic_write(
        &manifest_path,
        &serde_json::to_vec_pretty(&manifest).expect("a manifest serializes"),
    )?;
    // The protocol's files live in the attempt's run dir on the machine
    // that runs the adapter (`@RUN@`): this machine's bench makes one here,
    // a fleet machine's bench makes one under its workhome.
    let env: Vec<(String, String)> = vec![
        (ENV_MANIFEST.to_string(), "@RUN@/manifest.json".to_string()),
        (ENV_SCOPE_OUT.to_string(), "@RUN@/scope.json".to_string()),
        (ENV_REPORT_DIR.to_string(), "@RUN@/reports".to_string()),
    ];
    let measured = match on {
        Some(on) => {
            run_remote(
                repo,
                &on,
                &suite,
                &budget,
                &provisions,
                &env,
                &manifest_path,
                &res.head,
                interrupt,
            )
            .await?
        }
        None => {
            // Under the repository lock, at the repository's one stable
            // scratch path (certify's): Go's build cache is keyed by
            // directory, so a fresh random path every run would make every
            // run cold.
            let job = Job {
                home,
                repo,
                sha: &res.head,
                suite: &suite,
                budget: &budget,
                provisions: &provisions,
                submodules: &[],
                verb: "verify-affected",
                extra_env: &env,
                interrupt,
                affected: Some(&manifest_path),
                self_binary: None,
                catalog: None,
                progress: &crate::measure::progress::Silent,
                trunk: None,
                seal: (seal_mode, &seal_source),
                trust: Some(crate::seal::Trust::Other),
            };
            let mut bench =
                measure::bench::LocalBench::open(home, repo, interrupt, job.verb, job.progress)
                    .await?;
            bench.measure(&job, &measure::Host).await?
        }
    };
    res.adapter_argv = measured.argv.clone();
    let (scope_path, stream) = match &measured.local {
        Some(d) => (d.path().join("scope.json"), d.path().join("stdout")),
        None => (
            private.path().join("no-scope.json"),
            private.path().join("no-stdout"),
        ),
    };
    let judged = judge(
        &measured.run,
        &shown,
        &budget,
        &suite,
        &manifest,
        &scope_path,
        &stream,
        res,
    );
    drop(measured);
    drop(private);
    judged
}

/// Run the adapter on a fleet machine through dispatch: admission from the
/// ledger (fresh facts; the bundled adapter needs this very binary, shipped
/// only when the machine's measured os/arch match this build), ship, run
/// with the protocol's files in the machine's run dir, bring back stdout,
/// the scope and the reports.
#[allow(clippy::too_many_arguments)]
async fn run_remote(
    repo: &Repo,
    on: &Remote<'_>,
    suite: &ResolvedSuite,
    budget: &Budget,
    provisions: &[crate::config::Provision],
    env: &[(String, String)],
    manifest_path: &Path,
    head: &str,
    interrupt: &Interrupt,
) -> Result<measure::bench::Measured> {
    use crate::dispatch;
    let (seal_mode, seal_source) = measure::SealPlan::mode_of(None, suite, "verify.affected");
    let embedded;
    let catalog = match on.catalog {
        Some(c) => c,
        None => {
            embedded = crate::catalog::Catalog::load(None)?;
            &embedded
        }
    };
    let admitted = dispatch::admit_all(on.home, catalog, std::slice::from_ref(&on.machine), suite)?;
    let m = &admitted[0];
    let mut self_sha = String::new();
    // The running binary by its open inode on Linux: hashed and shipped as
    // it runs, even when a rebuild has replaced (or removed) its path.
    let proc_exe = PathBuf::from("/proc/self/exe");
    let me = if proc_exe.exists() {
        proc_exe
    } else {
        std::env::current_exe().map_err(|source| crate::error::IoError::Io {
            action: "find the running saphan binary",
            path: PathBuf::from("/proc/self/exe"),
            source,
        })?
    };
    if suite.argv.first().map(String::as_str) == Some("saphan") {
        dispatch::require_same_platform(m)?;
        let p = me.clone();
        self_sha = tokio::task::spawn_blocking(move || crate::fsutil::sha256_file(&p))
            .await
            .map_err(|e| crate::error::IoError::Io {
                action: "hash",
                path: me.clone(),
                source: std::io::Error::other(e.to_string()),
            })?
            .map_err(|source| crate::error::IoError::Io {
                action: "hash",
                path: me.clone(),
                source,
            })?;
    }
    let submodules = repo.submodules(head).await?;
    let job = dispatch::Job {
        home: on.home,
        repo,
        sha: head,
        suite,
        budget,
        provisions,
        submodules: &submodules,
        verb: "verify-affected",
        extra_env: env,
        interrupt,
        affected: Some(manifest_path),
        self_binary: (!self_sha.is_empty()).then_some((me.as_path(), self_sha.as_str())),
        catalog: None,
        progress: &dispatch::Silent,
        trunk: None,
        seal: (seal_mode, &seal_source),
        trust: Some(crate::seal::Trust::Other),
    };
    let mut bench = dispatch::FleetBench::connect_all(&job, std::slice::from_ref(m))
        .await?
        .remove(0);
    let mut c = bench.measure(&job, &dispatch::HostExecutor).await?;
    c.run.stderr_tail = format!("(on {}) {}", on.machine, c.run.stderr_tail);
    // What the machine's bench noted (`re-shipped: …`, `reaped: …`) is said
    // with the measurement: verify-affected keeps no record to carry it.
    let noted = std::mem::take(&mut c.notes);
    c.run.measurement.notes.extend(noted);
    Ok(c)
}

/// The packages a go test -json stream finished: those with a terminal
/// package-level event (`pass`, `fail` or `skip` with no `Test`), which go
/// test -json emits for every package it was given — `skip` for one with no
/// test files. A `start` or `output` event alone is not a measurement.
fn stream_packages(stream: &Path) -> std::collections::HashSet<String> {
    #[derive(serde::Deserialize)]
    struct Event {
        #[serde(rename = "Action", default)]
        action: Option<String>,
        #[serde(rename = "Package", default)]
        package: Option<String>,
        #[serde(rename = "Test", default)]
        test: Option<String>,
    }
    let bytes = std::fs::read(stream).unwrap_or_default();
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Event>(l).ok())
        .filter(|e| {
            e.test.as_deref().is_none_or(str::is_empty)
                && matches!(e.action.as_deref(), Some("pass" | "fail" | "skip"))
        })
        .filter_map(|e| e.package)
        .collect()
}

/// Read the scope an adapter left and the measurement of its report, and
/// fill `res`.
#[allow(clippy::too_many_arguments)]
fn judge(
    run: &SuiteRun,
    shown: &str,
    budget: &Budget,
    suite: &ResolvedSuite,
    manifest: &Manifest,
    scope_path: &Path,
    stream_path: &Path,
    res: &mut AffectedResult,
) -> Result<()> {
    res.adapter_seconds = Some((run.elapsed.as_secs_f64() * 1000.0).round() / 1000.0);
    res.adapter_exit_code = run.termination.and_then(|t| t.code());
    let scope = match Scope::read(scope_path) {
        Ok(sc) => sc,
        Err(ProtocolIssue::Missing) => {
            let ended = match run.termination {
                Some(Termination::Exited(c)) => format!("it exited with status {c}"),
                Some(Termination::Signaled(sig)) => format!("it was killed by signal {sig}"),
                Some(Termination::TimedOut) => format!(
                    "it ran past its {} budget ({}) and was killed",
                    humantime::format_duration(budget.duration),
                    budget.source
                ),
                Some(Termination::OutputLost) => {
                    "its stdout could not be kept whole (output-lost)".to_string()
                }
                None => run.measurement.notes.join("; "),
            };
            return Err(AffectedError::ScopeMissing {
                argv: shown.to_string(),
                env: ENV_SCOPE_OUT,
                ended,
                stderr: tail(&run.stderr_tail),
            }
            .into());
        }
        Err(ProtocolIssue::Contradicted(issue)) => {
            return Err(AffectedError::ScopeContradicted {
                argv: shown.to_string(),
                issue,
            }
            .into());
        }
        Err(issue) => {
            return Err(AffectedError::ScopeInvalid {
                argv: shown.to_string(),
                issue: issue.to_string(),
            }
            .into());
        }
    };
    scope
        .check_against(manifest)
        .map_err(|issue| AffectedError::ScopeInvalid {
            argv: shown.to_string(),
            issue: issue.to_string(),
        })?;
    let nothing = scope.selected_packages.is_empty();
    let selected = scope.selected_packages.clone();
    res.take_scope(scope);
    let mut m = run.measurement.clone();
    if nothing {
        let what = match run.termination {
            Some(t) if t.success() => match m.count {
                Some(n) if n > 0 => Some(format!("{} ran", crate::report::count_words(Some(n)))),
                _ => None,
            },
            Some(Termination::Exited(c)) => Some(format!("it exited with status {c}")),
            Some(Termination::Signaled(sig)) => Some(format!("it was killed by signal {sig}")),
            Some(Termination::TimedOut) => Some("it ran past its budget".to_string()),
            Some(Termination::OutputLost) => {
                Some("its stdout could not be kept whole (output-lost)".to_string())
            }
            None => Some(m.notes.join("; ")),
        };
        if let Some(what) = what {
            return Err(AffectedError::EmptyButActive {
                argv: shown.to_string(),
                what,
            }
            .into());
        }
        res.result = Outcome::NothingSelected;
        res.reason =
            Some("the change maps to no package, so nothing ran — this is not a green".into());
        return Ok(());
    }
    if suite.report == ReportKind::JunitXml && m.report_files.is_empty() {
        return Err(AffectedError::ReportMissing {
            argv: shown.to_string(),
            report_path: suite.report_path.clone().unwrap_or_default(),
            env: ENV_REPORT_DIR,
            notes: m.notes.join("; "),
        }
        .into());
    }
    res.result = match m.verdict {
        Verdict::Green => Outcome::Green,
        Verdict::Red => Outcome::Red,
        Verdict::MeasurementFailed => Outcome::MeasurementFailed,
    };
    let exited = match run.termination {
        Some(Termination::Exited(c)) => Some(c),
        _ => None,
    };
    if res.result == Outcome::MeasurementFailed {
        // No event at all and a failing exit: a stream with lines is
        // `report-no-events`, an empty one the suite's crash with no count
        // (`report::measure`).
        let no_events = m.failure == Some(FailureKind::ReportNoEvents)
            || (m.failure == Some(FailureKind::Crash) && m.count.is_none());
        res.reason = Some(if no_events && exited.is_some_and(|c| c != 0) {
            format!(
                "build failed: the adapter exited with status {} before its suite wrote a single go test -json event, so no selected test ran{}",
                exited.unwrap_or_default(),
                tail(&run.stderr_tail)
            )
        } else {
            format!("{}{}", m.notes.join("; "), tail(&run.stderr_tail))
        });
    } else if suite.report == ReportKind::GoTestJson {
        // go test -json ends every package it was given with a package-level
        // pass/fail/skip, even one without test files; a selected package
        // the stream never ends was not measured.
        let seen = stream_packages(stream_path);
        let unseen: Vec<&str> = selected
            .iter()
            .map(String::as_str)
            .filter(|p| !seen.contains(*p))
            .collect();
        if !unseen.is_empty() {
            let note = format!(
                "unmeasured-packages: the scope selected {} but the go test -json stream has no package-level pass, fail or skip for {} — a selected package that was never measured is never green",
                selected.len(),
                unseen.join(", ")
            );
            m.notes.push(note.clone());
            if res.result == Outcome::Green {
                res.result = Outcome::MeasurementFailed;
                m.verdict = Verdict::MeasurementFailed;
                m.failure = Some(FailureKind::UnmeasuredPackages);
                m.named_tests = None;
            }
            res.reason = Some(note);
        }
    }
    res.measurement = Some(m);
    Ok(())
}

/// The human rendering of a result.
pub fn render(r: &AffectedResult) -> String {
    use std::fmt::Write;
    let short = |s: &str| s.chars().take(12).collect::<String>();
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "affected tier (advisory: never moves refs/saphan/verified)"
    );
    let _ = writeln!(o, "  repository        {}", r.repository);
    let _ = writeln!(o, "  machine           {}", r.machine);
    let _ = writeln!(
        o,
        "  base..head        {}...{}",
        short(&r.base),
        short(&r.head)
    );
    let _ = writeln!(
        o,
        "  changed paths     {}: {}",
        r.changed_paths.len(),
        list(&r.changed_paths)
    );
    if r.result != Outcome::Unavailable {
        let np: Vec<String> = r
            .no_package_paths
            .iter()
            .map(|p| format!("{} ({})", p.path, p.reason))
            .collect();
        let _ = writeln!(o, "  no-package paths  {}: {}", np.len(), list(&np));
        let _ = writeln!(
            o,
            "  changed packages  {}: {}",
            r.changed_packages.len(),
            list(&r.changed_packages)
        );
        if !r.deleted_packages.is_empty() {
            let _ = writeln!(
                o,
                "  deleted packages  {}: {}",
                r.deleted_packages.len(),
                list(&r.deleted_packages)
            );
        }
        let total = r.selected_packages.len() + r.omitted_packages.len();
        let _ = writeln!(
            o,
            "  selected packages {} of {}: {}",
            r.selected_packages.len(),
            total,
            list(&r.selected_packages)
        );
        let _ = writeln!(
            o,
            "  omitted packages  {}: {}",
            r.omitted_packages.len(),
            list(&r.omitted_packages)
        );
        if r.widened {
            let why: Vec<String> = r
                .widened_by
                .iter()
                .map(|w| format!("{} ({})", w.path, w.reason))
                .collect();
            let _ = writeln!(
                o,
                "  widened           yes, to the full module: {}",
                why.join(", ")
            );
        } else {
            let _ = writeln!(o, "  widened           no");
        }
        if let Some(c) = &r.closure_contribution {
            let mut secs = c
                .selection_seconds
                .map(|s| format!("; selection took {s:.2}s"))
                .unwrap_or_default();
            if let (Some(t), Some(ch), true) = (c.test_seconds, c.changed_test_seconds, c.count > 0)
            {
                secs.push_str(&format!(
                    "; its tests took {t:.2}s (changed packages' {ch:.2}s)"
                ));
            }
            let _ = writeln!(
                o,
                "  closure added     {}: {}{}",
                c.count,
                list(&c.packages),
                secs
            );
        }
        if let (Some(b), Some(src)) = (r.budget_seconds, &r.budget_source) {
            let ran = r
                .adapter_seconds
                .map(|s| format!("; adapter ran {s:.2}s"))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  budget            {} ({src}){ran}",
                humantime::format_duration(Duration::from_secs(b))
            );
        }
    }
    let detail = match (&r.measurement, r.result) {
        (Some(m), Outcome::Green | Outcome::Red) => {
            let count = crate::report::count_words(m.count);
            let failing = match &m.named_tests {
                Some(v) if v.is_empty() => String::new(),
                Some(v) => format!("; failing: {}", v.join(", ")),
                None => "; named_tests: unavailable".into(),
            };
            format!(" — {count}{failing}")
        }
        _ => r
            .reason
            .as_ref()
            .map(|s| format!(" — {s}"))
            .unwrap_or_default(),
    };
    let _ = writeln!(o, "result: {}{}", r.result.as_str(), detail);
    o
}
