//! The measurement core shared by certify, verify-union and the affected
//! tier: place provisions and the exclude file in a tree, run the suite in
//! its own process group under the attempt budget, read its report, and
//! build the record.
//!
//! Worktree creation and removal stay with the caller (certify checks out a
//! SHA; verify-union merges streams first), so this module never decides
//! *which* tree is measured — only *how*.

use crate::config::Provision;
use crate::error::{IoError, Result};
use crate::exec::{self, Cmd, Sink, Termination};
use crate::git::Scratch;
use crate::provision::{self, Placed};
use crate::record::{Avail, Record};
use crate::report::{self, Evidence, Measurement};
use crate::suite::ResolvedSuite;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The measuring code's own default budget for one attempt at a suite: the
/// 10-minute floor, used when neither `--timeout` nor the config's
/// `timeout` says otherwise.
pub const DEFAULT_SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// An attempt budget and where the number came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The wall-clock budget.
    pub duration: Duration,
    /// `default`, `config:<scope>.timeout` or `flag:--timeout`.
    pub source: String,
}

impl Budget {
    /// `--timeout` always wins; then the declared `timeout` of `scope`
    /// (`verify.full`…); then [`DEFAULT_SUITE_TIMEOUT`].
    pub fn attempt(flag: Option<Duration>, suite: &ResolvedSuite, scope: &str) -> Budget {
        match (flag, suite.timeout) {
            (Some(d), _) => Budget {
                duration: d,
                source: "flag:--timeout".into(),
            },
            (None, Some(d)) => Budget {
                duration: d,
                source: format!("config:{scope}.timeout"),
            },
            (None, None) => Budget {
                duration: DEFAULT_SUITE_TIMEOUT,
                source: "default".into(),
            },
        }
    }
}

/// Fires when the operator presses Ctrl-C. Install once per process with
/// [`interrupt_watch`]; `changed()` resolves on the first Ctrl-C.
pub type Interrupt = watch::Receiver<bool>;

/// Start listening for Ctrl-C (replaces the default "die at once", so the
/// scratch tree is removed and a record says `interrupted`).
pub fn interrupt_watch() -> Interrupt {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = tx.send(true);
        }
    });
    rx
}

/// Resolves once Ctrl-C was pressed (at once if it already was); never if
/// the watch is gone without a press.
pub async fn wait_interrupt(i: &mut Interrupt) {
    while !*i.borrow_and_update() {
        if i.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// True once Ctrl-C was pressed.
pub fn interrupted(i: &Interrupt) -> bool {
    *i.borrow()
}

/// What one suite run left.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// How the suite ended; `None` when the operator interrupted it.
    pub termination: Option<Termination>,
    /// The derived measurement.
    pub measurement: Measurement,
    /// Provisions placed.
    pub placed: Vec<Placed>,
    /// Suite wall time.
    pub elapsed: Duration,
    /// The last 4 KiB of the suite's stderr (for the operator, not the record).
    pub stderr_tail: String,
}

/// Where and how to run one suite.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    /// The suite.
    pub suite: &'a ResolvedSuite,
    /// The attempt budget.
    pub budget: &'a Budget,
    /// Provision entries that apply (already preflighted).
    pub provisions: &'a [&'a Provision],
    /// Extra environment for the suite (e.g. the affected protocol's variables).
    pub extra_env: &'a [(String, String)],
    /// What `report_path` is relative to; `None` = the tree.
    pub report_root: Option<&'a Path>,
    /// Also copy the suite's stdout here (the affected tier reads which
    /// packages the go test -json stream named); `None` = keep nothing.
    pub keep_stdout: Option<&'a Path>,
}

/// Run the suite of `plan` in `scratch`, then remove the scratch worktree —
/// whatever the run did. The usual shape of one measurement.
///
/// Errors: those of [`run_suite`], then a failure to remove the worktree.
pub async fn run_then_remove(
    scratch: Scratch,
    plan: Plan<'_>,
    interrupt: &Interrupt,
) -> Result<SuiteRun> {
    let run = run_suite(&scratch, plan, interrupt).await;
    let removed = scratch.remove().await;
    let run = run?;
    removed?;
    Ok(run)
}

/// Run the suite of `plan` in the scratch worktree `scratch` (provisions
/// and the exclude file go there) and derive its measurement.
///
/// Errors: provision placement refusals, or an I/O failure preparing the
/// run. A suite that cannot be started is a measurement (failed), not an
/// error: the attempt happened.
pub async fn run_suite(
    scratch: &Scratch,
    plan: Plan<'_>,
    interrupt: &Interrupt,
) -> Result<SuiteRun> {
    let started_at = crate::clock::now_rfc3339();
    let exclude = scratch.git_dir.join("saphan-exclude");
    let placed = provision::place(plan.provisions, &scratch.path, &exclude)?;
    let mut env: Vec<(String, String)> = Vec::new();
    if !placed.is_empty() {
        env.extend(provision::exclude_env(&exclude));
    }
    env.extend(plan.extra_env.iter().cloned());

    let run_dir = tempfile::Builder::new()
        .prefix("saphan-run-")
        .tempdir()
        .map_err(|source| IoError::Io {
            action: "create a temp directory",
            path: std::env::temp_dir(),
            source,
        })?;
    let stdout_path = run_dir.path().join("stdout");
    // The suite inherits none of git's repository-local variables
    // (`exec::run` drops them), so git inside it finds the scratch tree from
    // its working directory; the marker lets a later attempt find it should
    // it outlive a killed saphan.
    let mut cmd = Cmd::from_argv(&plan.suite.argv)
        .cwd(&scratch.path)
        .env(crate::git::SCRATCH_MARKER, &scratch.path)
        .timeout(plan.budget.duration)
        .stdout(Sink::File(stdout_path.clone()));
    for (k, v) in &env {
        cmd = cmd.env(k, v);
    }
    let t0 = Instant::now();
    let mut intr = interrupt.clone();
    let outcome = tokio::select! {
        r = exec::run(cmd) => Some(r),
        _ = wait_interrupt(&mut intr) => None,
    };
    let elapsed = t0.elapsed();
    let (termination, measurement, stderr_tail) = match outcome {
        None => (
            None,
            Measurement::failed(
                "interrupted: the operator pressed Ctrl-C; the suite's process group was killed",
            ),
            String::new(),
        ),
        Some(Err(e)) => (
            None,
            Measurement::failed(format!(
                "crash: the suite's program `{}` could not be started: {e}",
                plan.suite.argv[0]
            )),
            String::new(),
        ),
        Some(Ok(out)) => {
            if !stdout_path.exists() {
                let _ = std::fs::write(&stdout_path, b"");
            }
            let scope = match &plan.suite.source {
                crate::suite::SuiteSource::Config(scope) => scope,
                crate::suite::SuiteSource::DefaultGo => "verify.full",
            };
            let key = match plan.report_root {
                Some(_) => format!("{scope}.report_path (relative to SAPHAN_AFFECTED_REPORT_DIR)"),
                None => format!("{scope}.report_path"),
            };
            let ev = Evidence {
                kind: plan.suite.report,
                termination: out.status,
                stdout: &stdout_path,
                report_root: plan.report_root.unwrap_or(&scratch.path),
                report_path: plan.suite.report_path.as_deref(),
                report_path_key: &key,
            };
            let m = report::measure(&ev);
            if let Some(keep) = plan.keep_stdout {
                let _ = std::fs::copy(&stdout_path, keep);
            }
            let tail_start = out.stderr.len().saturating_sub(4096);
            (
                Some(out.status),
                m,
                String::from_utf8_lossy(&out.stderr[tail_start..]).into_owned(),
            )
        }
    };
    Ok(SuiteRun {
        started_at,
        finished_at: crate::clock::now_rfc3339(),
        termination,
        measurement,
        placed,
        elapsed,
        stderr_tail,
    })
}

/// Who measured what, for [`record`].
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The verb (`certify`, `verify-union`, …).
    pub verb: &'a str,
    /// Repository top.
    pub repo: &'a Path,
    /// The SHA measured (for a union: the merge commit or base; see the verb).
    pub sha: &'a str,
    /// `local` or a fleet id.
    pub machine: &'a str,
    /// `host` or `container`.
    pub class: &'a str,
}

/// Build the record of one suite run.
pub fn record(
    subject: Subject<'_>,
    suite: &ResolvedSuite,
    budget: &Budget,
    run: &SuiteRun,
) -> Record {
    let m = &run.measurement;
    Record {
        format: crate::record::FORMAT,
        id: crate::record::new_id(),
        verb: subject.verb.to_string(),
        repo: subject.repo.display().to_string(),
        sha: subject.sha.to_string(),
        machine: subject.machine.to_string(),
        class: subject.class.to_string(),
        started_at: run.started_at.clone(),
        finished_at: run.finished_at.clone(),
        verdict: m.verdict,
        failure: m.failure(),
        suite_source: suite.source.as_str(),
        suite_argv: suite.argv.clone(),
        report: suite.report,
        suite_report_path: suite.report_path.clone(),
        suite_report_files: m.report_files.clone(),
        count: Avail::from(m.count),
        count_derived: m.count_derived,
        named_tests: Avail::from(m.named_tests.clone()),
        suite_exit_code: run.termination.and_then(|t| t.code()),
        budget: humantime::format_duration(budget.duration).to_string(),
        budget_seconds: budget.duration.as_secs_f64(),
        budget_source: budget.source.clone(),
        suite_seconds: (run.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        provisions: run.placed.clone(),
        notes: m.notes.clone(),
        verified_pointer: None,
        extra: Default::default(),
    }
}
