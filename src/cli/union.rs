//! `saphan verify-union` and `saphan verify-stream`: clap types and the
//! step from arguments to [`crate::commands::union`] and [`crate::commands::stepgo`].

use super::{Ctx, out, out_json, visible};
use crate::commands::stepgo::{self, StepOutcome};
use crate::commands::union;
use crate::error::{Exit, Result};
use crate::record::Avail;
use clap::Args;
use std::path::PathBuf;

/// Measure the declared suite on the merge of streams onto a base (advisory).
///
/// Merges each --stream, in order, onto --base (as `git merge --no-ff`
/// would), checks the union out in a scratch detached worktree and measures
/// the [verify.full] suite there exactly as certify would. The record says
/// verb: verify-union and lists the base and stream heads; refs/saphan/verified
/// never moves. A conflict or a measurement without a verdict is an error and
/// saves no record. Exit: 0 green, 1 red, 2 refused or conflict, 3 no
/// measurement.
#[derive(Debug, Args)]
pub struct VerifyUnionArgs {
    /// The repository (any path inside it).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The base the streams merge onto.
    #[arg(long, value_name = "REV")]
    pub base: String,
    /// A stream branch; repeat (or give several) to merge them in order.
    #[arg(long, value_name = "BRANCH", num_args = 1.., required = true)]
    pub stream: Vec<String>,
    /// Also write the union's measurement as one JUnit XML report to FILE
    /// (replaced atomically; none when no union was measured).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Run a stream's four Go steps: go build, go vet, go test, gofmt -l.
///
/// Each step gets its own budget: [verify.full].timeout when declared, else
/// 10 minutes; every run prints the budget and where it came from. The steps
/// run in a scratch detached worktree at the committed revision (uncommitted
/// changes are not measured). Exit: 0 green, 1 red, 2 refused, 3 no verdict.
#[derive(Debug, Args)]
pub struct VerifyStreamArgs {
    /// The repository or stream worktree (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The revision to verify.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub rev: String,
}

/// Run `verify-union`.
pub async fn verify_union(ctx: &Ctx, a: VerifyUnionArgs) -> Result<Exit> {
    let catalog = ctx.catalog()?;
    super::junit::check(a.junit.as_deref())?;
    let interrupt = crate::cancel::install();
    let s = union::Settings {
        repo: a.repo,
        base: a.base,
        streams: a.stream,
    };
    let o = union::verify_union(&ctx.home, &catalog, &s, &interrupt).await?;
    let r = &o.record;
    if a.junit.is_some() {
        let mut suite = super::junit::Suite {
            summary: super::certify::verdict_lines(r, ""),
            ..super::junit::Suite::of_record(
                format!("verify-union {}", &r.sha[..12.min(r.sha.len())]),
                r,
            )
        }
        .with_tests(&o.tests, &o.test_output);
        if let Some(b) = &r.base {
            suite.properties.push(("saphan.base", b.clone()));
        }
        for st in r.streams.iter().flatten() {
            suite
                .properties
                .push(("saphan.stream", format!("{} {}", st.name, st.sha)));
        }
        super::junit::write_asked(a.junit.as_deref(), &[suite]);
    }
    if ctx.json {
        out_json(&serde_json::to_value(r).expect("records serialize"));
        return Ok(r.verdict.exit());
    }
    let mut t = format!(
        "verify-union {} (advisory): {} — {} ({}, {}), {:.1}s\n",
        r.sha,
        r.verdict.as_str(),
        r.count_words(),
        r.report.as_str(),
        r.suite_source,
        r.suite_seconds
    );
    if let Some(b) = &r.base {
        t.push_str(&format!("  base    {b}\n"));
    }
    for st in r.streams.iter().flatten() {
        t.push_str(&format!("  stream  {} {}\n", st.sha, st.name));
    }
    if let Avail::Value(names) = &r.named_tests
        && !names.is_empty()
    {
        t.push_str(&format!("failing ({}):\n", names.len()));
        for n in names {
            t.push_str(&format!("  {n}\n"));
        }
    }
    for n in &r.notes {
        t.push_str(&format!("note: {n}\n"));
    }
    t.push_str(&format!("budget: {} ({})\n", r.budget, r.budget_source));
    t.push_str(&format!("record: {} (id {})\n", o.attempts.display(), r.id));
    t.push_str(&pointer_line(r));
    out(&visible(&t));
    if r.verdict != crate::report::Verdict::Green && !o.log_tail.trim().is_empty() {
        say!(
            "{}",
            visible(&format!(
                "--- last lines of the suite's log ({}) ---\n{}",
                r.suite_log.as_deref().unwrap_or("not kept"),
                o.log_tail.trim_end()
            ))
        );
    }
    Ok(r.verdict.exit())
}

/// The human form of the record's `verified_pointer` (`unchanged: <why>`
/// → `verified pointer: unchanged (<why>)`), so both outputs say one thing.
fn pointer_line(r: &crate::record::Record) -> String {
    let p = r.verified_pointer.as_deref().unwrap_or("unchanged");
    match p.split_once(": ") {
        Some((word, why)) => format!("verified pointer: {word} ({why})\n"),
        None => format!("verified pointer: {p}\n"),
    }
}

/// verify-stream's steps as lines on a terminal's stderr.
struct Progress(bool);

impl crate::measure::progress::Progress for Progress {
    fn event(&self, _machine: &str, event: &crate::measure::progress::Event<'_>) {
        use crate::measure::progress::Event;
        // A wait for the repository lock is said with or without a terminal.
        if matches!(event, Event::Waiting { .. }) || (self.0 && matches!(event, Event::Step { .. }))
        {
            say!("verify-stream: {}", super::certify::event_words(event));
        }
    }
}

/// Run `verify-stream`.
pub async fn verify_stream(ctx: &Ctx, a: VerifyStreamArgs) -> Result<Exit> {
    use std::io::IsTerminal;
    let catalog = ctx.catalog()?;
    let interrupt = crate::cancel::install();
    let s = stepgo::Settings {
        repo: a.repo,
        rev: a.rev,
    };
    let watch = Progress(!ctx.json && std::io::stderr().is_terminal());
    let o = stepgo::verify_stream(&ctx.home, &catalog, &s, &watch, &interrupt).await?;
    let r = &o.record;
    if ctx.json {
        let mut v = serde_json::to_value(r).expect("records serialize");
        // The human output's `note:` about uncommitted edits.
        if let Some(d) = &o.dirty {
            v["dirty"] = serde_json::json!(d);
        }
        out_json(&v);
        return Ok(r.verdict.exit());
    }
    let budget = format!(
        "step budget: {} per step ({})",
        humantime::format_duration(o.budget.duration),
        o.budget.source
    );
    let mut t = format!("verify-stream {}\n{budget}\n", r.sha);
    for st in &o.steps {
        let word = match st.outcome {
            StepOutcome::Pass => "pass",
            StepOutcome::Fail => "FAIL",
            StepOutcome::Timeout => "TIMEOUT",
            StepOutcome::MeasurementFailed => "NO VERDICT",
        };
        let extra = match (st.name.as_str(), st.count) {
            ("test", Some(n)) => format!(" ({})", crate::report::count_words(Some(n))),
            _ => String::new(),
        };
        t.push_str(&format!(
            "  {:<6} {:<10} {:>7.1}s  {}{}\n",
            st.name,
            word,
            st.seconds,
            st.argv.join(" "),
            extra
        ));
        if !st.files.is_empty() {
            t.push_str(&format!(
                "         gofmt lists {} unformatted file(s) (a failure, though gofmt exits 0):\n",
                st.files.len()
            ));
            for f in &st.files {
                t.push_str(&format!("           {f}\n"));
            }
        }
        for f in &st.failing {
            t.push_str(&format!("         failing: {f}\n"));
        }
        if !st.detail.is_empty() && st.files.is_empty() {
            for l in st.detail.lines() {
                t.push_str(&format!("         | {l}\n"));
            }
        }
    }
    if let Some(d) = &o.dirty {
        t.push_str(&format!("note: {d}\n"));
    }
    t.push_str(&format!("result: {}\n", r.verdict.as_str()));
    t.push_str(&format!("record: {} (id {})\n", o.attempts.display(), r.id));
    t.push_str(&pointer_line(r));
    out(&visible(&t));
    Ok(r.verdict.exit())
}
