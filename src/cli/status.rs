//! `saphan status`.

use super::{Ctx, out, out_json, visible};
use crate::commands::status::{Attempt, Freshness, Status};
use crate::error::{Exit, Result};
use clap::Args;
use std::path::PathBuf;

/// One screen of trunk state, read from what exists; measures nothing.
///
/// Trunk and its head, the verified SHA and how many trunk commits are not
/// yet verified, the last certify attempt per machine, the last red with its
/// failing tests, and which fleet machines lack fresh facts or a fresh
/// toolchain row for the declared suite. Reads records, refs, config and the
/// ledger; measures nothing and connects nowhere (docs/status.md).
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The repository (any path inside it).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The trunk branch (default: the one the verified pointer follows,
    /// else as certify finds it — origin/HEAD's branch, else the branch
    /// checked out in the main worktree).
    #[arg(long, value_name = "REF")]
    pub trunk: Option<String>,
}

/// Run `status`.
pub async fn run(ctx: &Ctx, a: StatusArgs) -> Result<Exit> {
    let catalog = ctx.catalog()?;
    let st =
        crate::commands::status::status(&ctx.home, &catalog, &a.repo, a.trunk.as_deref()).await?;
    if ctx.json {
        out_json(&serde_json::to_value(&st).expect("status serializes"));
    } else {
        out(&visible(&render(&st)));
    }
    Ok(Exit::Ok)
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

fn attempt_line(a: &Attempt) -> String {
    let verdict = match &a.failure {
        Some(f) => format!("{} ({f})", a.verdict.as_str()),
        None => a.verdict.as_str().to_string(),
    };
    // A shard's verdict is that shard's, not the SHA's.
    let verdict = match &a.shard {
        Some(sh) => format!(
            "{verdict} (shard {}/{} of a split: not the SHA's verdict)",
            sh.index + 1,
            sh.count
        ),
        None => verdict,
    };
    format!(
        "{} {} {} — {}, finished {}, {:.1}s (id {})",
        short(&a.sha),
        a.class,
        verdict,
        a.count_words(),
        crate::clock::to_seconds(&a.finished_at),
        a.suite_seconds,
        a.id
    )
}

/// The human screen; every value in it is a field of the `--json` object.
fn render(st: &Status) -> String {
    let mut s = format!("repository: {}\n", st.repo.display());
    match (&st.trunk, &st.trunk_head) {
        (Some(t), Some(h)) => s.push_str(&format!("trunk: {t} at {h}\n")),
        _ => s.push_str(
            "trunk: none known (no origin/HEAD and the main worktree is detached) — --trunk REF names one\n",
        ),
    }
    let behind = st
        .unverified_commits
        .map(|n| {
            format!(
                " — {n} trunk commit{} not yet verified",
                if n == 1 { "" } else { "s" }
            )
        })
        .unwrap_or_default();
    match (&st.verified, &st.verified_symbolic) {
        (_, Some(t)) => s.push_str(&format!(
            "verified: none — {} is a symbolic ref to {t}, which verifies nothing (delete it: git update-ref --no-deref -d {}){behind}\n",
            crate::record::VERIFIED_REF,
            crate::record::VERIFIED_REF
        )),
        (Some(v), None) => s.push_str(&format!("verified: {v}{behind}\n")),
        (None, None) => s.push_str(&format!("verified: none yet{behind}\n")),
    }
    if st.last_attempts.is_empty() {
        s.push_str(&format!(
            "last attempts: none in {}\n",
            st.attempts.display()
        ));
    } else {
        s.push_str("last certify attempt per machine:\n");
        for a in &st.last_attempts {
            s.push_str(&format!("  {}: {}\n", a.machine, attempt_line(a)));
        }
    }
    for l in &st.corrupt_lines {
        s.push_str(&format!(
            "note: {} line {l} is not a record (skipped)\n",
            st.attempts.display()
        ));
    }
    match &st.last_red {
        None => s.push_str("last red: none\n"),
        Some(r) => {
            s.push_str(&format!(
                "last red: on {}: {}\n",
                r.machine,
                attempt_line(r)
            ));
            match &r.named_tests {
                crate::record::Avail::Value(names) => {
                    s.push_str(&format!("  failing ({}):\n", names.len()));
                    for n in names {
                        s.push_str(&format!("    {n}\n"));
                    }
                }
                crate::record::Avail::Unavailable => {
                    s.push_str("  failing: unavailable (the report kind names no tests)\n")
                }
            }
            if let Some(o) = &r.first_output {
                s.push_str(&super::why::test_output_lines(
                    std::slice::from_ref(o),
                    0,
                    "  ",
                ));
            } else if let Some(t) = &r.log_tail {
                s.push_str("  last lines of the suite's log:\n");
                for l in t.lines() {
                    s.push_str(&format!("    {l}\n"));
                }
            }
            s.push_str(&format!(
                "  (saphan records show {} shows all of it)\n",
                r.id
            ));
        }
    }
    let f = &st.fleet;
    if let Some(e) = &f.error {
        s.push_str(&format!(
            "fleet: unreadable — saphan: {}: {}\n",
            e["error"].as_str().unwrap_or(""),
            e["message"].as_str().unwrap_or("")
        ));
        return s;
    }
    let suite = match (&f.program, &f.capability) {
        (Some(p), Some(c)) => format!("suite program `{p}` → capability {c}"),
        (Some(p), None) => format!("suite program `{p}` maps to no catalog capability"),
        (None, _) => "no suite declared".to_string(),
    };
    let window = f
        .freshness_seconds
        .map(|w| crate::config::schema::format_duration(std::time::Duration::from_secs(w)))
        .unwrap_or_default();
    if f.machines.is_empty() {
        s.push_str(&format!("fleet: no machine rows ({suite})\n"));
        return s;
    }
    s.push_str(&format!("fleet ({suite}; fresh = within {window}):\n"));
    let when = |w: &Option<String>| {
        w.as_deref()
            .map(|w| format!(" ({})", crate::clock::to_seconds(w)))
            .unwrap_or_default()
    };
    for m in &f.machines {
        let mut line = format!(
            "  {}: facts {}{}",
            m.machine,
            m.facts.as_str(),
            when(&m.facts_measured_at)
        );
        if let (Some(t), Some(c)) = (m.toolchain, &f.capability) {
            let outcome = m
                .toolchain_outcome
                .as_deref()
                .map(|o| format!(" {o}"))
                .unwrap_or_default();
            line.push_str(&format!(
                "; {c}{outcome} {}{}",
                t.as_str(),
                when(&m.toolchain_measured_at)
            ));
        }
        line.push_str(&health_words(&m.health));
        if m.needs_attention {
            let mut todo = Vec::new();
            // A row that exists but is old is re-run by the one command
            // made for it; what was never measured or probed is asked for.
            let stale = m.facts == Freshness::Stale || m.toolchain == Some(Freshness::Stale);
            if m.facts == Freshness::None {
                todo.push(format!("saphan machine measure --machine {}", m.machine));
            }
            if stale {
                todo.push(format!("saphan machine remeasure --machine {}", m.machine));
            }
            if let (Some(t), Some(c)) = (m.toolchain, &f.capability)
                && (t == Freshness::None || t == Freshness::NotPresent)
            {
                todo.push(format!(
                    "saphan machine probe --machine {} --capability {c} …",
                    m.machine
                ));
            }
            line.push_str(&format!(" — needs: {}", todo.join("; ")));
        }
        line.push('\n');
        s.push_str(&line);
    }
    s
}

/// `; answered 2026-12-01T03:00:04Z; last infrastructure failure:
/// host-unreachable 2026-12-01T04:10:00Z (id …)` — what the records and
/// the ledger say of a machine's health, to the second.
pub fn health_words(h: &crate::commands::status::Health) -> String {
    let mut s = match &h.last_answered {
        Some(at) => format!("; answered {}", crate::clock::to_seconds(at)),
        None => "; never answered".to_string(),
    };
    if let Some(f) = &h.last_infrastructure_failure {
        s.push_str(&format!(
            "; last infrastructure failure: {} {} (id {})",
            f.failure,
            crate::clock::to_seconds(&f.at),
            f.id
        ));
    }
    s
}
