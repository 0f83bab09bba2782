//! `saphan verify-affected` and `saphan adapter go-affected`: clap types and
//! the step from arguments to [`crate::affected`] settings.

use super::{Ctx, out, out_json, visible};
use crate::affected::{adapter, engine};
use crate::error::{Exit, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Ask the fast, advisory affected tier: run what base...head touches.
///
/// Lists the paths changed between the merge base of --base and --head, hands
/// them to the declared [verify.affected] adapter in a detached worktree at
/// the exact head, and prints what it selected, omitted, widened and measured.
/// Never moves refs/saphan/verified. Exit: 0 green or nothing selected, 1 red,
/// 2 unavailable (no adapter declared) or refused, 3 measurement failed.
#[derive(Debug, Args)]
pub struct VerifyAffectedArgs {
    /// The repository (any directory inside it).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The revision the change is measured from (its merge base with head).
    #[arg(long, value_name = "REV")]
    pub base: String,
    /// The revision measured; the adapter runs in a detached worktree here.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub head: String,
    /// Run the adapter on this fleet machine instead of here (see
    /// docs/dispatch.md); the bundled adapter ships this saphan binary there
    /// when the machine's measured os/arch match this build.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub machine: Vec<String>,
    /// Also write the result as one JUnit XML report to FILE (replaced
    /// atomically): a testcase per selected test, the result and the
    /// selection in the testsuite's properties.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
}

/// Bundled proc adapters, run by the engine, not by hand.
#[derive(Debug, Args)]
pub struct AdapterArgs {
    #[command(subcommand)]
    pub which: AdapterCmd,
}

/// The bundled adapters.
#[derive(Debug, Subcommand)]
pub enum AdapterCmd {
    /// The Go adapter: go list -json ./... → changed packages → reverse
    /// closure → go test -count=1 -json on the selection.
    ///
    /// Reads the manifest named by SAPHAN_AFFECTED_MANIFEST, writes its scope
    /// to SAPHAN_AFFECTED_SCOPE_OUT before running anything. Declare it with
    /// `saphan config set verify.affected.argv "saphan,adapter,go-affected"`.
    ///
    /// The Go flags that choose which packages `./...` holds (`-tags=…`,
    /// `-mod=…`, `-modfile=…`, the `-flag=value` form) may follow; they go
    /// to both `go list` and `go test`. The engine adds verify.full's own
    /// when none are given, so the affected tier sees the packages
    /// certification (and `--split`) sees.
    GoAffected {
        /// `-tags=…`, `-mod=…`, `-modfile=…`.
        #[arg(allow_hyphen_values = true, value_name = "GO-FLAG")]
        go_flags: Vec<String>,
    },
}

/// Run `verify-affected`.
pub async fn verify_affected(ctx: &Ctx, a: VerifyAffectedArgs) -> Result<Exit> {
    let machines = crate::dispatch::machine_ids(&a.machine)?;
    crate::dispatch::admit::refuse_selection(&machines, "verify-affected")?;
    super::junit::check(a.junit.as_deref())?;
    let settings = engine::Settings {
        repo: a.repo,
        base: a.base,
        head: a.head,
        home: ctx.home.clone(),
        catalog: if machines.is_empty() {
            None
        } else {
            Some(ctx.catalog()?)
        },
        machines,
    };
    let interrupt = crate::cancel::install();
    let r = engine::verify_affected(&settings, &interrupt).await?;
    if a.junit.is_some() {
        super::junit::write_asked(a.junit.as_deref(), &[junit_suite(&r)]);
    }
    if ctx.json {
        out_json(&serde_json::to_value(&r).expect("a result serializes"));
    } else {
        out(&visible(&engine::render(&r)));
    }
    Ok(r.result.exit())
}

/// Run a bundled adapter.
pub fn adapter(a: AdapterArgs) -> Result<Exit> {
    match a.which {
        AdapterCmd::GoAffected { go_flags } => adapter::go_affected(
            &go_flags,
            &mut |n| say!("{n}"),
            &mut std::io::stdout().lock(),
            Box::new(std::io::stderr()),
        ),
    }
}

/// The JUnit testsuite of a verify-affected result: the selected tests,
/// the result and the selection in its properties, its rendering as
/// `<system-out>`.
fn junit_suite(r: &engine::AffectedResult) -> super::junit::Suite<'_> {
    let m = r.measurement.as_ref();
    let mut properties = vec![
        ("saphan.verb", "verify-affected".to_string()),
        ("saphan.verdict", r.result.as_str().to_string()),
    ];
    if let Some(f) = m.and_then(|m| m.failure.as_ref()) {
        properties.push(("saphan.failure", f.to_string()));
    }
    properties.extend([
        ("saphan.tier", r.tier.to_string()),
        ("saphan.base", r.base.clone()),
        ("saphan.sha", r.head.clone()),
        ("saphan.machine", r.machine.clone()),
        (
            "saphan.count",
            super::junit::count_word(m.and_then(|m| m.count)),
        ),
        ("saphan.selected_packages", r.selected_packages.join(" ")),
        ("saphan.widened", r.widened.to_string()),
    ]);
    if let Some(k) = r.report {
        properties.push(("saphan.report", k.as_str().to_string()));
    }
    let mut why: Vec<String> = r.reason.iter().cloned().collect();
    why.extend(m.iter().flat_map(|m| m.notes.iter().cloned()));
    let suite = super::junit::Suite {
        name: format!("verify-affected {}", &r.head[..12.min(r.head.len())]),
        properties,
        verdict: r.result.as_str().to_string(),
        why,
        seconds: r.adapter_seconds,
        summary: engine::render(r),
        ..super::junit::Suite::default()
    };
    match m {
        Some(m) => suite.with_tests(&m.tests, &m.test_output),
        None => suite,
    }
}
