//! `saphan verify-stream`: a stream's four Go steps — `go build ./...`,
//! `go vet ./...`, `go test ./...` and `gofmt -l .` — each under a budget of
//! its own (spec: "verify-stream — it bounds ONE STEP").
//!
//! The budget is `[verify.full].timeout` when declared (source
//! `config:verify.full.timeout`), else [`VERIFY_STEP_WALL_CLOCK`] (source
//! `default`). Each of the four steps gets the whole of it: declaring `20m`
//! hands out four 20-minute ceilings, never four 5-minute quarters. There
//! is no `--timeout` flag; the key is the only way to move it.
//!
//! The steps run in a scratch detached worktree at one committed SHA (the
//! stream worktree's `HEAD` by default), with the same provisions and
//! exclude file as certify, through the shared measurement core
//! ([`crate::measure::run_suite`]). `go test` is Go's own module suite
//! (`go test -count=1 -json ./...`, the default-go argv), so the record
//! carries its count and failing tests. `gofmt -l` exits 0 whether or not
//! it lists files, so a non-empty list is the step's failure, and the files
//! are named.
//!
//! The record (verb `verify-stream`) carries `step_budget`,
//! `step_budget_source` and every step's outcome; its `budget` fields are
//! the same step budget. `refs/saphan/verified` is never read or moved.

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::{Refusal, Result};
use crate::exec::{self, Cmd, Termination};
use crate::home::Home;
use crate::measure::{self, Budget, Interrupt, Subject};
use crate::record::{self, Record};
use crate::report::{FailureKind, ReportKind, Verdict};
use crate::suite::{ResolvedSuite, SuiteSource};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The per-step floor when `[verify.full].timeout` is not declared: 10
/// minutes, this verb's own constant (not the suite floor of certify).
pub const VERIFY_STEP_WALL_CLOCK: Duration = Duration::from_secs(10 * 60);

/// `step_budget_source` when the floor applies.
pub const SOURCE_DEFAULT: &str = "default";
/// `step_budget_source` when `[verify.full].timeout` is declared.
pub const SOURCE_CONFIG: &str = "config:verify.full.timeout";

/// What to verify.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Any path inside the repository (a stream's worktree).
    pub repo: PathBuf,
    /// The revision (default `HEAD` of that worktree).
    pub rev: String,
}

/// Refusals of verify-stream.
#[derive(Debug, thiserror::Error)]
pub enum StreamVerifyError {
    /// The measured tree is not a Go module.
    #[error(
        "{sha} of {repo} carries no go.mod at its root — verify-stream runs Go's four steps (build, vet, test, gofmt); use `saphan certify` for another stack"
    )]
    NotGo { repo: PathBuf, sha: String },
}

impl Refusal for StreamVerifyError {
    fn name(&self) -> &'static str {
        "verify-stream-not-go"
    }
}

/// The step budget and where it came from.
pub fn step_budget(cfg: &Config) -> Budget {
    match cfg
        .full
        .as_ref()
        .and_then(|s| s.timeout.map(|d| (d, s.origin)))
    {
        // SOURCE_CONFIG for the operator's, repo-config:… for the repository's.
        Some((d, origin)) => Budget {
            duration: d,
            source: format!("{}:verify.full.timeout", origin.prefix()),
        },
        None => Budget {
            duration: VERIFY_STEP_WALL_CLOCK,
            source: SOURCE_DEFAULT.into(),
        },
    }
}

/// How one step ended, and one step as it ran (the record's `steps`).
pub use crate::record::{Step, StepOutcome};

/// What verify-stream obtained.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The appended record.
    pub record: Record,
    /// Where it was appended.
    pub attempts: PathBuf,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The step budget.
    pub budget: Budget,
    /// A note when the worktree has uncommitted changes (they are not measured).
    pub dirty: Option<String>,
}

fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.trim().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn round(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn gofmt_program(go: &str) -> String {
    match Path::new(go).parent() {
        Some(dir) if go.contains('/') => dir.join("gofmt").to_string_lossy().into_owned(),
        _ => "gofmt".into(),
    }
}

/// Run the four steps at `settings.rev` and append the record.
///
/// Errors: refusals before anything runs (bad repository or revision, no
/// go.mod, absent toolchain, provision sources).
pub async fn verify_stream(
    home: &Home,
    catalog: &Catalog,
    s: &Settings,
    progress: &dyn crate::measure::progress::Progress,
    interrupt: &Interrupt,
) -> Result<Outcome> {
    let setup = measure::Setup::open(home, &s.repo).await?;
    let (repo, cfg) = (&setup.repo, &setup.cfg);
    let sha = repo.resolve(&s.rev).await?;
    let tree_files = repo.tree_files(&sha).await?;
    if !tree_files.iter().any(|f| f == "go.mod") {
        return Err(StreamVerifyError::NotGo {
            repo: repo.top.clone(),
            sha,
        }
        .into());
    }
    let go = crate::suite::default_go_program();
    let test_suite = ResolvedSuite {
        argv: [go.as_str(), "test", "-count=1", "-json", "./..."]
            .map(String::from)
            .to_vec(),
        report: ReportKind::GoTestJson,
        report_path: None,
        timeout: None,
        seal: None,
        source: SuiteSource::DefaultGo,
    };
    crate::suite::preflight_local(&test_suite, catalog, &sha, |_| false)?;
    let provisions = setup.provisions()?;
    let budget = step_budget(cfg);
    let dirty = match crate::git::git(&repo.top, &["status", "--porcelain"]).await {
        Ok(o) if !o.stdout.is_empty() && s.rev == "HEAD" => Some(format!(
            "{} has uncommitted changes; they are not measured — verify-stream measures the committed {}",
            repo.top.display(),
            &sha[..12]
        )),
        _ => None,
    };

    let exitcode = |argv: Vec<String>| ResolvedSuite {
        argv,
        report: ReportKind::Exitcode,
        report_path: None,
        timeout: None,
        seal: None,
        source: SuiteSource::DefaultGo,
    };
    let build = exitcode([go.as_str(), "build", "./..."].map(String::from).to_vec());
    let vet = exitcode([go.as_str(), "vet", "./..."].map(String::from).to_vec());

    let seal = measure::bench::local_seal(
        home,
        crate::seal::Mode::Auto,
        "default",
        crate::seal::Trust::Other,
    )?;
    let bench =
        measure::bench::LocalBench::open(home, repo, interrupt, "verify-stream", progress).await?;
    let scratch = bench.checkout(&sha).await?;
    let log_dir = measure::log_dir(repo);
    let mut steps = Vec::with_capacity(4);
    let mut test_run = None;
    let mut err = None;
    for (name, suite, is_test) in [
        ("build", &build, false),
        ("vet", &vet, false),
        ("test", &test_suite, true),
    ] {
        if interrupt.is_cancelled() {
            break;
        }
        progress.event(
            "local",
            &crate::measure::progress::Event::Step {
                name,
                argv: &suite.argv,
            },
        );
        let run = measure::run_suite(
            &scratch,
            measure::Plan::new(suite, &budget, &provisions)
                .seal(Some(&seal))
                .log_dir(is_test.then_some(log_dir.as_path()))
                .catalog(Some(catalog)),
            interrupt,
        )
        .await;
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                err = Some(e);
                break;
            }
        };
        let m = &run.measurement;
        let outcome = match (run.termination, m.verdict) {
            (Some(Termination::TimedOut), _) => StepOutcome::Timeout,
            (_, Verdict::Green) => StepOutcome::Pass,
            (_, Verdict::Red) => StepOutcome::Fail,
            _ => StepOutcome::MeasurementFailed,
        };
        let mut detail = String::new();
        if outcome != StepOutcome::Pass {
            detail = last_lines(&run.stderr_tail, 8);
            if detail.is_empty() || outcome == StepOutcome::MeasurementFailed {
                let notes = m.notes.join("; ");
                if !notes.is_empty() {
                    detail = if detail.is_empty() {
                        notes
                    } else {
                        format!("{notes}\n{detail}")
                    };
                }
            }
        }
        steps.push(Step {
            name: name.into(),
            argv: suite.argv.clone(),
            outcome,
            exit_code: run.termination.and_then(|t| t.code()),
            seconds: round(run.elapsed),
            files: Vec::new(),
            count: if is_test { m.count } else { None },
            failing: if is_test {
                m.named_tests.clone().unwrap_or_default()
            } else {
                Vec::new()
            },
            detail,
        });
        if is_test {
            test_run = Some(run);
        }
    }
    if err.is_none() && !interrupt.is_cancelled() {
        let argv = vec![gofmt_program(&go), "-l".into(), ".".into()];
        progress.event(
            "local",
            &crate::measure::progress::Event::Step {
                name: "gofmt",
                argv: &argv,
            },
        );
        let ran = exec::run(
            Cmd::from_argv(&argv)
                .cwd(&scratch.path)
                .timeout(budget.duration),
        )
        .await;
        steps.push(gofmt_step(argv, ran));
    }
    let removed = scratch.remove().await;
    if let Some(e) = err {
        return Err(e);
    }
    removed?;

    // Interrupted before the test step: the record still says so.
    let interrupted_run;
    let run = match &test_run {
        Some(run) => run,
        None => {
            interrupted_run = measure::SuiteRun::not_run(
                FailureKind::Interrupted,
                format!(
                    "{} before go test ran",
                    interrupt
                        .reason()
                        .unwrap_or(crate::cancel::Reason::Requested)
                        .words()
                ),
            );
            &interrupted_run
        }
    };
    let mut rec = measure::record(
        Subject {
            verb: "verify-stream",
            repo: &repo.top,
            sha: &sha,
            machine: "local",
            class: "host",
        },
        &test_suite,
        &budget,
        run,
    );
    let verdict = overall(&steps, interrupt.is_cancelled());
    if verdict != rec.verdict {
        rec.verdict = verdict;
        rec.failure = match verdict {
            Verdict::MeasurementFailed if interrupt.is_cancelled() => {
                Some(FailureKind::Interrupted)
            }
            Verdict::MeasurementFailed
                if steps.iter().any(|s| s.outcome == StepOutcome::Timeout) =>
            {
                Some(FailureKind::Timeout)
            }
            Verdict::MeasurementFailed => Some(FailureKind::Crash),
            _ => None,
        };
    }
    for st in &steps {
        if st.outcome != StepOutcome::Pass {
            rec.notes.push(format!(
                "step {}: {}",
                st.name,
                match st.outcome {
                    StepOutcome::Fail if !st.files.is_empty() => format!(
                        "gofmt lists {} unformatted file(s): {}",
                        st.files.len(),
                        st.files.join(", ")
                    ),
                    StepOutcome::Fail => "failed".into(),
                    StepOutcome::Timeout => format!(
                        "ran past its {} step budget ({})",
                        humantime::format_duration(budget.duration),
                        budget.source
                    ),
                    _ => "no verdict".into(),
                }
            ));
        }
    }
    rec.verified_pointer =
        Some("unchanged: verify-stream is advisory and never moves the pointer".into());
    rec.stream = stream_name(&repo.top);
    rec.step_budget = Some(humantime::format_duration(budget.duration).to_string());
    rec.step_budget_seconds = Some(budget.duration.as_secs_f64());
    rec.step_budget_source = Some(budget.source.clone());
    rec.steps = Some(steps.clone());
    let attempts = record::attempts_path(repo);
    record::append_off_runtime(&attempts, &rec).await?;
    Ok(Outcome {
        record: rec,
        attempts,
        steps,
        budget,
        dirty,
    })
}

/// The stream a worktree belongs to, from its status file (`- stream:`),
/// when it has a readable one.
fn stream_name(top: &Path) -> Option<String> {
    let file = top.join(crate::stream::status::STATUS_FILE);
    let text = std::fs::read_to_string(&file).ok()?;
    crate::stream::status::StatusFile::parse(&text, &file)
        .ok()?
        .stream
}

/// The step of `gofmt -l .`: a listed file is a failure although gofmt
/// exits 0; a non-zero exit (a file that does not parse) is one too.
fn gofmt_step(argv: Vec<String>, ran: std::io::Result<exec::Output>) -> Step {
    let mut step = Step {
        name: "gofmt".into(),
        argv,
        outcome: StepOutcome::MeasurementFailed,
        exit_code: None,
        seconds: 0.0,
        files: Vec::new(),
        count: None,
        failing: Vec::new(),
        detail: String::new(),
    };
    match ran {
        Err(e) => step.detail = format!("could not start gofmt: {e}"),
        Ok(out) => {
            step.seconds = round(out.elapsed);
            step.exit_code = out.status.code();
            step.files = out
                .stdout_str()
                .lines()
                .map(|l| l.trim().trim_start_matches("./").to_string())
                .filter(|l| !l.is_empty())
                .collect();
            step.outcome = match out.status {
                Termination::TimedOut => StepOutcome::Timeout,
                Termination::Exited(0) if step.files.is_empty() => StepOutcome::Pass,
                Termination::Exited(_) => StepOutcome::Fail,
                Termination::Signaled(_) | Termination::OutputLost => {
                    StepOutcome::MeasurementFailed
                }
            };
            if step.outcome != StepOutcome::Pass {
                step.detail = last_lines(&out.stderr_str(), 8);
            }
        }
    }
    step
}

/// Red when any step failed; else measurement-failed when any step gave no
/// verdict (or the run was interrupted); else green.
pub fn overall(steps: &[Step], interrupted: bool) -> Verdict {
    if steps.iter().any(|s| s.outcome == StepOutcome::Fail) {
        Verdict::Red
    } else if interrupted || steps.len() < 4 || steps.iter().any(|s| s.outcome != StepOutcome::Pass)
    {
        Verdict::MeasurementFailed
    } else {
        Verdict::Green
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &'static str, outcome: StepOutcome) -> Step {
        Step {
            name: name.into(),
            argv: vec![],
            outcome,
            exit_code: None,
            seconds: 0.0,
            files: vec![],
            count: None,
            failing: vec![],
            detail: String::new(),
        }
    }

    #[test]
    fn overall_verdict() {
        use StepOutcome::*;
        let all = |o: [StepOutcome; 4]| {
            ["build", "vet", "test", "gofmt"]
                .into_iter()
                .zip(o)
                .map(|(n, o)| step(n, o))
                .collect::<Vec<_>>()
        };
        assert_eq!(overall(&all([Pass; 4]), false), Verdict::Green);
        assert_eq!(overall(&all([Pass, Pass, Pass, Fail]), false), Verdict::Red);
        assert_eq!(
            overall(&all([Fail, Pass, Timeout, Pass]), false),
            Verdict::Red
        );
        assert_eq!(
            overall(&all([Pass, Pass, Timeout, Pass]), false),
            Verdict::MeasurementFailed
        );
        assert_eq!(overall(&all([Pass; 4]), true), Verdict::MeasurementFailed);
        assert_eq!(
            overall(&all([Pass; 4])[..3], false),
            Verdict::MeasurementFailed
        );
    }

    #[test]
    fn gofmt_listing_files_fails_although_it_exits_zero() {
        let out = exec::Output {
            status: Termination::Exited(0),
            stdout: b"a/b.go\n./c.go\n".to_vec(),
            stderr: vec![],
            elapsed: Duration::from_millis(5),
        };
        let s = gofmt_step(vec!["gofmt".into()], Ok(out.clone()));
        assert_eq!(s.outcome, StepOutcome::Fail);
        assert_eq!(s.files, ["a/b.go", "c.go"]);
        let clean = exec::Output {
            stdout: vec![],
            ..out
        };
        assert_eq!(gofmt_step(vec![], Ok(clean)).outcome, StepOutcome::Pass);
    }

    #[test]
    fn step_budget_comes_from_verify_full_timeout_or_the_floor() {
        let b = step_budget(&Config::default());
        assert_eq!(b.duration, VERIFY_STEP_WALL_CLOCK);
        assert_eq!(b.source, "default");
        let cfg = Config {
            full: Some(crate::config::Suite {
                argv: vec!["go".into()],
                report: None,
                report_path: None,
                timeout: Some(Duration::from_secs(1200)),
                seal: None,
                origin: crate::config::Origin::Operator,
            }),
            ..Default::default()
        };
        let b = step_budget(&cfg);
        assert_eq!(b.duration, Duration::from_secs(1200));
        assert_eq!(b.source, "config:verify.full.timeout");
    }
}
