//! `saphan verify-union`: measure the declared suite on the merge of several
//! streams onto a base — the question "do these pass *together*?", which no
//! stream's own green answers.
//!
//! The union is built without touching any working tree: each stream is
//! merged, in the order given, onto the result so far with `git merge-tree
//! --write-tree` (git's ort merge, exactly what `git merge --no-ff` would
//! do), and each step is recorded as a two-parent commit (`git
//! commit-tree`) with a fixed identity (`saphan <saphan@localhost>`) and the
//! base commit's date — so the union SHA is a pure function of the base and
//! the stream heads: run it twice, get the same SHA. That commit is then
//! checked out in a scratch detached worktree and measured by the shared
//! core ([`crate::measure`]) exactly as certify would measure it: same suite
//! resolution, provisions, budget (`verify.full.timeout` or the core's
//! 10-minute floor), report parsing.
//!
//! Advisory: the record says `verb: verify-union`, lists the base and every
//! stream head, and `refs/saphan/verified` is never read or moved. A merge
//! conflict names the stream and the paths and is an error; a measurement
//! that yields no verdict is an error too — neither saves a record, because
//! no union measurement was obtained.

use crate::catalog::Catalog;
use crate::error::{Exit, Refusal, Result};
use crate::git::{self, GitError, Repo};
use crate::home::Home;
use crate::measure::bench::LocalBench;
use crate::measure::{self, Budget, Interrupt, Subject};
use crate::record::{self, Record};
use crate::report::Verdict;
use std::path::PathBuf;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Any path inside the repository.
    pub repo: PathBuf,
    /// The base revision.
    pub base: String,
    /// Stream branches (or any revisions), merged in this order.
    pub streams: Vec<String>,
}

/// One stream as merged (the record's `streams`).
pub use crate::record::StreamHead;

/// Errors of verify-union: no union measurement was obtained, so no record.
#[derive(Debug, thiserror::Error)]
pub enum UnionError {
    /// A stream does not merge cleanly onto the union so far.
    #[error(
        "stream {stream} ({sha}) conflicts with {onto} in {paths} — no union was measured and no record was saved; resolve the conflict between the streams (merge one into the other, or rebase), then re-run"
    )]
    Conflict {
        stream: String,
        sha: String,
        onto: String,
        paths: String,
    },
    /// git could not merge for another reason (unrelated histories …).
    #[error(
        "cannot merge stream {stream} onto {onto}: {detail} — no union was measured and no record was saved"
    )]
    Merge {
        stream: String,
        onto: String,
        detail: String,
    },
    /// The suite ran but no verdict could be derived.
    #[error(
        "the union {sha} was not measured: {detail}{stderr} — no record was saved; fix the cause (budget, report, suite) and re-run"
    )]
    NoMeasurement {
        sha: String,
        detail: String,
        stderr: String,
    },
}

impl Refusal for UnionError {
    fn name(&self) -> &'static str {
        match self {
            UnionError::Conflict { .. } => "union-merge-conflict",
            UnionError::Merge { .. } => "union-merge-failed",
            UnionError::NoMeasurement { .. } => "union-measurement-failed",
        }
    }
    fn exit(&self) -> Exit {
        match self {
            UnionError::NoMeasurement { .. } => Exit::MeasurementFailed,
            _ => Exit::Refusal,
        }
    }
}

/// What verify-union obtained.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The appended record.
    pub record: Record,
    /// Where it was appended.
    pub attempts: PathBuf,
    /// The last lines of the suite's stderr.
    pub stderr_tail: String,
    /// The last lines of the kept suite log (shown on red).
    pub log_tail: String,
    /// What each failing test wrote, bounded ([`crate::report::TestOutput`]).
    pub test_output: Vec<crate::report::TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
    /// Every test the report says ended (`--junit`).
    pub tests: crate::report::Tests,
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// Merge `streams` onto `base` in order; returns the union commit SHA.
///
/// Errors: [`UnionError::Conflict`] naming the first conflicting stream and
/// its paths; [`UnionError::Merge`]; git failures.
pub async fn build_union(repo: &Repo, base: &str, streams: &[StreamHead]) -> Result<String> {
    let date = git::git(&repo.top, &["show", "-s", "--format=%ct +0000", base])
        .await?
        .stdout_str();
    let date = format!("@{date}");
    let ident: [(&str, &str); 6] = [
        ("GIT_AUTHOR_NAME", "saphan"),
        ("GIT_AUTHOR_EMAIL", "saphan@localhost"),
        ("GIT_AUTHOR_DATE", &date),
        ("GIT_COMMITTER_NAME", "saphan"),
        ("GIT_COMMITTER_EMAIL", "saphan@localhost"),
        ("GIT_COMMITTER_DATE", &date),
    ];
    let mut cur = base.to_string();
    let mut merged: Vec<&str> = Vec::new();
    for s in streams {
        let onto = if merged.is_empty() {
            format!("the base {}", short(base))
        } else {
            format!("the base {} + {}", short(base), merged.join(" + "))
        };
        let out = git::git_status_env(
            &repo.top,
            &[
                "merge-tree",
                "--write-tree",
                "--no-messages",
                "--name-only",
                "-z",
                &cur,
                &s.sha,
            ],
            &[],
        )
        .await?;
        let fields: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).trim().to_string())
            .collect();
        let tree = fields.first().cloned().unwrap_or_default();
        let tree_ok = tree.len() >= 40 && tree.chars().all(|c| c.is_ascii_hexdigit());
        match out.status.code() {
            Some(0) if tree_ok => {}
            Some(1) if tree_ok => {
                let mut paths: Vec<String> = fields[1..].to_vec();
                paths.sort();
                paths.dedup();
                return Err(UnionError::Conflict {
                    stream: s.name.clone(),
                    sha: short(&s.sha).to_string(),
                    onto,
                    paths: paths.join(", "),
                }
                .into());
            }
            _ => {
                return Err(UnionError::Merge {
                    stream: s.name.clone(),
                    onto,
                    detail: out.stderr_str(),
                }
                .into());
            }
        }
        let msg = format!(
            "saphan verify-union: merge {} ({}) onto {}",
            s.name,
            short(&s.sha),
            short(base)
        );
        let c = git::git_status_env(
            &repo.top,
            &["commit-tree", &tree, "-p", &cur, "-p", &s.sha, "-m", &msg],
            &ident,
        )
        .await?;
        if !c.status.success() {
            return Err(GitError::Failed {
                cmd: "git commit-tree".into(),
                stderr: c.stderr_str(),
            }
            .into());
        }
        cur = c.stdout_str();
        merged.push(&s.name);
    }
    Ok(cur)
}

/// Run verify-union.
///
/// Errors: refusals before anything runs (bad repository or revision, no
/// suite, provision sources, absent toolchain), [`UnionError`] — none of
/// which saves a record.
pub async fn verify_union(
    home: &Home,
    catalog: &Catalog,
    s: &Settings,
    interrupt: &Interrupt,
) -> Result<Outcome> {
    let setup = measure::Setup::open(home, &s.repo).await?;
    let repo = &setup.repo;
    let base = repo.resolve(&s.base).await?;
    let suite = setup.full_suite(&base, "measure a union in").await?;
    let provisions = setup.provisions()?;
    let mut heads = Vec::with_capacity(s.streams.len());
    for name in &s.streams {
        heads.push(StreamHead {
            name: name.clone(),
            sha: repo.resolve(name).await?,
        });
    }
    let union = build_union(repo, &base, &heads).await?;
    measure::against_tree(repo, &union, |in_tree| {
        crate::suite::preflight_local(&suite, catalog, &union, in_tree)
    })
    .await??;
    let budget = Budget::attempt(None, &suite, "verify.full");

    let (mode, source) = measure::SealPlan::mode_of(None, &suite, "verify.full");
    let seal = measure::bench::local_seal(home, mode, &source, crate::seal::Trust::Other)?;
    let bench = LocalBench::open(
        home,
        repo,
        interrupt,
        "verify-union",
        &crate::measure::progress::Silent,
    )
    .await?;
    let scratch = bench.checkout(&union).await?;
    let log_dir = measure::log_dir(repo);
    let run = measure::run_then_remove(
        scratch,
        measure::Plan::new(&suite, &budget, &provisions)
            .seal(Some(&seal))
            .log_dir(Some(&log_dir))
            .catalog(Some(catalog)),
        interrupt,
    )
    .await;
    let run = run?;
    if run.measurement.verdict == Verdict::MeasurementFailed {
        let tail = run.stderr_tail.trim();
        return Err(UnionError::NoMeasurement {
            sha: union,
            detail: run.measurement.notes.join("; "),
            stderr: if tail.is_empty() {
                String::new()
            } else {
                let lines: Vec<&str> = tail.lines().collect();
                format!(
                    "; the suite's stderr ends: {}",
                    lines[lines.len().saturating_sub(6)..].join(" | ")
                )
            },
        }
        .into());
    }
    let mut rec = measure::record(
        Subject {
            verb: "verify-union",
            repo: &repo.top,
            sha: &union,
            machine: "local",
            class: "host",
        },
        &suite,
        &budget,
        &run,
    );
    rec.verified_pointer =
        Some("unchanged: verify-union is advisory and never moves the pointer".into());
    rec.base = Some(base.clone());
    rec.streams = Some(heads.clone());
    rec.union = Some(union.clone());
    let attempts = record::attempts_path(repo);
    record::append_off_runtime(&attempts, &rec).await?;
    Ok(Outcome {
        record: rec,
        attempts,
        log_tail: run.log_tail(measure::pipeline::LOG_TAIL_LINES),
        stderr_tail: run.stderr_tail,
        test_output: run.measurement.test_output,
        test_output_omitted: run.measurement.test_output_omitted,
        tests: run.measurement.tests,
    })
}
