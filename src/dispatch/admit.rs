//! Admission of a machine for a dispatched run, from the ledger only
//! (DESIGN §6a step 2): a machine row, a fresh facts row, and a fresh
//! `present` capability row for the suite's program. The local PATH is never
//! consulted.

use super::DispatchError;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::fleet::ledger::{self, Ledger, Outcome};
use crate::fleet::machines::MachineRow;
use crate::fleet::remedy;
use crate::home::Home;
use crate::suite::{ResolvedSuite, SuiteSource};
use std::path::Path;

/// What runs on an admitted machine.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The machine row.
    pub row: MachineRow,
    /// The suite's argv as it runs there (argv[0] is the capability row's
    /// declared absolute path when a catalog row maps the program).
    pub argv: Vec<String>,
    /// The catalog row that admitted the program (`None`: no row maps it;
    /// it is resolved on the machine before anything is shipped).
    pub capability: Option<String>,
    /// The declared absolute program path from the capability row.
    pub program_path: Option<String>,
    /// The version output the probe captured (first line), when it ran.
    pub program_version: Option<String>,
    /// The machine's measured `uname -s` / `uname -m`.
    pub os: String,
    /// See `os`.
    pub arch: String,
}

/// The program token default-go names for a remote run: the machine's own
/// `go` as the capability row declares it — never the local path.
fn program_token(suite: &ResolvedSuite) -> String {
    match suite.source {
        SuiteSource::DefaultGo => "go".into(),
        SuiteSource::Config(_) => suite.argv.first().cloned().unwrap_or_default(),
    }
}

/// Admit `row` for `suite` at `now`, from the ledger only.
///
/// Errors: `verification-toolchain-absent` naming the machine, the catalog
/// row and the two remedy lines (install on the machine's measured platform,
/// or `NO INSTALL COMMAND` and the measure line; then the exact probe line);
/// the ledger's own refusals.
pub fn admit(
    home: &Home,
    catalog: &Catalog,
    ledger: &Ledger,
    window: std::time::Duration,
    row: &MachineRow,
    suite: &ResolvedSuite,
    now: time::OffsetDateTime,
) -> Result<Admitted> {
    let token = program_token(suite);
    let catalog_path = (catalog.origin != "embedded").then(|| Path::new(&catalog.origin));
    let facts = ledger.latest_facts(&row.id);
    let fresh_facts = facts
        .as_ref()
        .filter(|f| ledger::facts_fresh(f, now, window));
    let mapped = catalog.for_program(&token);
    let Some(f) = fresh_facts else {
        let why = match &facts {
            None => "the machine was never measured".to_string(),
            Some(f) => format!(
                "its facts row ({}) is older than the freshness window of {}",
                f.measured_at,
                humantime::format_duration(window)
            ),
        };
        let cap = mapped.map(|(n, _)| n).unwrap_or("-");
        let inputs = remedy::default_inputs(row, &token);
        let lines = remedy::remedy(home, catalog_path, row, cap, &inputs, None, None);
        return Err(DispatchError::ToolchainAbsent {
            machine: row.id.clone(),
            program: token,
            catalog_row: mapped
                .map(|(n, _)| format!("catalog row: {n}"))
                .unwrap_or_else(|| "no catalog row maps this program".into()),
            why,
            remedy: lines.to_vec(),
        }
        .into());
    };
    let Some((cap_name, entry)) = mapped else {
        // No catalog row: the program is resolved on the machine itself
        // before anything is shipped (see `resolve_unmapped`).
        return Ok(Admitted {
            row: row.clone(),
            argv: suite.argv.clone(),
            capability: None,
            program_path: None,
            program_version: None,
            os: f.os.clone(),
            arch: f.arch.clone(),
        });
    };
    let latest = ledger.latest_capability(&row.id, cap_name);
    // A declared absolute program runs only where a row probed exactly that
    // path: another path's row proves nothing about it.
    let named = Path::new(&token).is_absolute().then(|| token.clone());
    let why = match &latest {
        None => "it was never probed there".to_string(),
        Some(c) if c.outcome != Outcome::Present => format!(
            "its latest row ({}) says {}{}",
            c.measured_at,
            c.outcome.as_str(),
            c.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        Some(c)
            if named
                .as_deref()
                .is_some_and(|n| n != c.inputs.declared_path) =>
        {
            format!(
                "its present row ({}) probed {}, but the suite's argv names {}, which was never probed there",
                c.measured_at,
                c.inputs.declared_path,
                named.as_deref().unwrap_or_default()
            )
        }
        Some(c) if ledger::is_fresh(c, now, window, entry) => {
            let mut argv = suite.argv.clone();
            argv[0] = c.inputs.declared_path.clone();
            return Ok(Admitted {
                row: row.clone(),
                argv,
                capability: Some(cap_name.to_string()),
                program_path: Some(c.inputs.declared_path.clone()),
                program_version: c
                    .version_output
                    .as_deref()
                    .and_then(|v| v.lines().find(|l| !l.trim().is_empty()))
                    .map(|l| l.trim().to_string()),
                os: f.os.clone(),
                arch: f.arch.clone(),
            });
        }
        Some(c) if c.catalog_digest != entry.digest(cap_name) => format!(
            "its present row ({}) was measured against another catalog entry for {cap_name}",
            c.measured_at
        ),
        Some(c) => format!(
            "its present row ({}) is older than the freshness window of {}",
            c.measured_at,
            humantime::format_duration(window)
        ),
    };
    let ids = f.platform_ids();
    let install = entry.install_for(&ids);
    let declared = latest
        .as_ref()
        .map(|c| c.inputs.declared_path.clone())
        .unwrap_or_else(|| format!("/usr/bin/{}", token.rsplit('/').next().unwrap_or(&token)));
    let mut inputs = latest
        .as_ref()
        .map(|c| c.inputs.clone())
        .unwrap_or_else(|| remedy::default_inputs(row, &declared));
    if let Some(n) = named {
        inputs.declared_path = n;
    }
    let lines = remedy::remedy(
        home,
        catalog_path,
        row,
        cap_name,
        &inputs,
        Some(&ids),
        install,
    );
    Err(DispatchError::ToolchainAbsent {
        machine: row.id.clone(),
        program: token,
        catalog_row: format!("catalog row: {cap_name}"),
        why,
        remedy: lines.to_vec(),
    }
    .into())
}
