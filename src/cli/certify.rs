//! `saphan certify` and `saphan records`.

use super::{Ctx, out, out_json};
use crate::certify::{self, Class, Settings, Watch};
use crate::error::{Exit, Result};
use crate::measure::Budget;
use crate::record::Avail;
use crate::report::Verdict;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// `--timeout`: the same budget rule as `verify.<suite>.timeout`
/// ([`crate::config::schema::parse_budget`]: 1s to 30d).
fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    crate::config::schema::parse_budget(s)
}

/// Certify an exact SHA: run the declared suite in a fresh detached worktree,
/// append the record, move refs/saphan/verified only on green.
#[derive(Debug, Args)]
pub struct CertifyArgs {
    /// The repository (any path inside it).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The revision to certify (resolved to a full SHA).
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub sha: String,
    /// Budget for this attempt (e.g. 90s, 20m); always wins over verify.full.timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Run on these fleet machines instead of this one (comma-separated ids).
    /// Dispatch is not in this version: the run is refused after the local
    /// preflight (and, for --class container, after the docker-oci gate).
    #[arg(long, value_name = "ID[,ID…]", value_delimiter = ',')]
    pub machine: Vec<String>,
    /// Run directly on the machine (host) or in a container on its Docker engine.
    #[arg(long, value_enum, default_value = "host")]
    pub class: Class,
    /// The trunk branch the verified pointer follows (default: origin/HEAD's branch,
    /// else the branch checked out in the main worktree). A green SHA that is
    /// not on trunk is recorded but never moves the pointer.
    #[arg(long, value_name = "REF")]
    pub trunk: Option<String>,
}

/// List the attempt records of a repository, or show one.
#[derive(Debug, Args)]
pub struct RecordsArgs {
    /// The repository (any path inside it).
    #[arg(long, default_value = ".", global = true)]
    pub repo: PathBuf,
    #[command(subcommand)]
    pub cmd: Option<RecordsCmd>,
}

/// `records` sub-verbs.
#[derive(Debug, Subcommand)]
pub enum RecordsCmd {
    /// Show one record in full.
    Show {
        /// The record id (first column of `saphan records`).
        id: String,
    },
}

struct Spinner(Option<indicatif::ProgressBar>);

impl Watch for Spinner {
    fn running(&self, sha: &str, argv: &[String], budget: &Budget) {
        if let Some(pb) = &self.0 {
            pb.set_message(format!(
                "certify {}: running `{}` (budget {}, {})",
                &sha[..12.min(sha.len())],
                argv.join(" "),
                humantime::format_duration(budget.duration),
                budget.source
            ));
            pb.enable_steady_tick(Duration::from_millis(120));
        }
    }
    fn done(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// Run `certify`.
pub async fn run(ctx: &Ctx, a: CertifyArgs) -> Result<Exit> {
    let catalog = ctx.catalog()?;
    let settings = Settings {
        repo: a.repo,
        rev: Some(a.sha),
        timeout: a.timeout,
        machines: a.machine,
        class: a.class,
        trunk: a.trunk,
    };
    let spinner = if !ctx.json && std::io::stderr().is_terminal() {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .expect("static template"),
        );
        Spinner(Some(pb))
    } else {
        Spinner(None)
    };
    let interrupt = crate::measure::interrupt_watch();
    let o = certify::certify(&ctx.home, &catalog, &settings, &spinner, &interrupt).await?;
    let r = &o.record;
    if ctx.json {
        let mut v = serde_json::to_value(r).expect("records serialize");
        v["verified_pointer"] = serde_json::json!(o.pointer);
        // The human output shows the suite's last stderr lines on a
        // non-green verdict; so does the JSON.
        if r.verdict != Verdict::Green && !o.stderr_tail.trim().is_empty() {
            v["stderr_tail"] = serde_json::json!(o.stderr_tail.trim_end());
        }
        out_json(&v);
    } else {
        let mut s = format!(
            "certify {} on {}: {} — {} ({}, {}), {:.1}s\n",
            r.sha,
            r.machine,
            r.verdict.as_str(),
            r.count_words(),
            r.report.as_str(),
            r.suite_source,
            r.suite_seconds,
        );
        if let Avail::Value(names) = &r.named_tests
            && !names.is_empty()
        {
            s.push_str(&format!("failing ({}):\n", names.len()));
            for n in names {
                s.push_str(&format!("  {n}\n"));
            }
        }
        if let Some(code) = r.suite_exit_code
            && r.verdict != Verdict::Green
        {
            s.push_str(&format!("suite exit code: {code}\n"));
        }
        for n in &r.notes {
            s.push_str(&format!("note: {n}\n"));
        }
        s.push_str(&format!("budget: {} ({})\n", r.budget, r.budget_source));
        s.push_str(&format!("record: {} (id {})\n", o.attempts.display(), r.id));
        if o.pointer == "moved" {
            s.push_str(&format!(
                "verified: {} -> {} (moved)\n",
                crate::record::VERIFIED_REF,
                r.sha
            ));
        } else {
            s.push_str(&format!(
                "verified: {} not moved ({})\n",
                crate::record::VERIFIED_REF,
                o.pointer.trim_start_matches("unchanged: ")
            ));
        }
        out(&s);
        if r.verdict != Verdict::Green && !o.stderr_tail.trim().is_empty() {
            eprintln!(
                "--- last lines of the suite's stderr ---\n{}",
                o.stderr_tail.trim_end()
            );
        }
    }
    Ok(r.verdict.exit())
}

/// Run `records`.
pub async fn records(ctx: &Ctx, a: RecordsArgs) -> Result<Exit> {
    let (path, attempts) = certify::records(&a.repo).await?;
    for (line, why) in &attempts.corrupt {
        eprintln!(
            "saphan: record-corrupt: {}:{line} is not a record ({why}) — skipped; the file is append-only, so move that line aside by hand",
            path.display()
        );
    }
    let all = attempts.records;
    match a.cmd {
        Some(RecordsCmd::Show { id }) => {
            let r = all
                .iter()
                .find(|r| r.id == id)
                .ok_or(crate::record::RecordError::NotFound { id, path })?;
            let v = serde_json::to_value(r).expect("records serialize");
            if ctx.json {
                out_json(&v);
            } else {
                out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&v).expect("json")
                ));
            }
        }
        None => {
            if ctx.json {
                let corrupt: Vec<usize> = attempts.corrupt.iter().map(|(l, _)| *l).collect();
                out_json(
                    &serde_json::json!({ "attempts": path, "records": all, "corrupt_lines": corrupt }),
                );
            } else {
                let mut s = String::new();
                for r in &all {
                    s.push_str(&format!(
                        "{}  {:<15} {:<19} {}  {}  {}\n",
                        r.id,
                        r.verb,
                        serde_json::to_value(r.verdict)
                            .expect("json")
                            .as_str()
                            .unwrap_or(""),
                        &r.sha[..12.min(r.sha.len())],
                        r.machine,
                        r.count_words()
                    ));
                }
                if all.is_empty() {
                    s.push_str(&format!("no records yet in {}\n", path.display()));
                }
                out(&s);
            }
        }
    }
    Ok(Exit::Ok)
}
