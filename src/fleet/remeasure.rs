//! `machine remeasure`: re-run `machine measure` and every capability probe
//! whose row is stale or absent, or says the program is not `present`, each
//! probe with the inputs its own last row recorded, and say what changed
//! (docs/fleet.md, "Re-measure").
//!
//! [`plan`] reads the ledger and decides, per machine, what is fresh and
//! `present` (left alone), what is stale or not present (re-run: "I fixed
//! the machine, now remeasure" probes it again) and what was never probed on that machine
//! while other machines of the fleet have a row for it (reported, with the
//! probe command to run: there are no recorded inputs to re-run). [`run`]
//! then does the stale work on every machine concurrently
//! ([`super::run::for_each_machine`]), one connection per machine: facts
//! first (so remedies use the new platform), then the probes.
//! [`facts_changes`] and [`capability_change`] compare a new row with the
//! one before it.

use super::ledger::{self, CapabilityRow, Ledger, MachineFacts, Outcome};
use super::machines::MachineRow;
use super::probe::{ProbeItem, ProbeSettings};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::home::Home;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a row is (not) re-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Younger than the window and (for capabilities) measured against the
    /// catalog entry as it is now: left alone.
    Fresh,
    /// Older than the freshness window.
    Old,
    /// Measured against another catalog entry (a new pin, a new version
    /// command).
    OtherEntry,
    /// No row at all.
    Absent,
    /// Fresh, but its probe said `absent` or `failed`: probed again (its
    /// probe is cheap), so a machine fixed since is seen at once.
    NotPresent,
}

impl Freshness {
    /// The human words (`fresh`, `stale: older than the freshness window` …).
    pub fn words(self) -> &'static str {
        match self {
            Freshness::Fresh => "fresh",
            Freshness::Old => "stale: older than the freshness window",
            Freshness::OtherEntry => "stale: measured against a different catalog entry",
            Freshness::Absent => "never measured",
            Freshness::NotPresent => "fresh, but not present",
        }
    }
    /// Does the row need re-running? (Every row but a fresh one: a stale
    /// row, and a fresh row that is not `present`.)
    pub fn stale(self) -> bool {
        self != Freshness::Fresh
    }
}

/// What the plan says about one capability of one machine.
#[derive(Debug, Clone)]
pub enum CapPlan {
    /// Its last row is fresh and `present`: left alone.
    Fresh(CapabilityRow),
    /// Its last row is stale, or fresh but not `present`: re-probed with
    /// that row's inputs.
    Reprobe(CapabilityRow, Freshness),
    /// Its last row is stale but the capability has left the catalog: it
    /// cannot be probed again; left alone.
    NotInCatalog(CapabilityRow),
    /// Never probed on this machine (other machines have rows for it): no
    /// recorded inputs; the probe command to run is printed.
    NeverProbed {
        /// The `saphan machine probe …` line, with a placeholder for the
        /// declared path (saphan does not invent one).
        probe: String,
    },
}

/// The plan for one machine.
#[derive(Debug, Clone)]
pub struct MachinePlan {
    /// The machine row.
    pub row: MachineRow,
    /// The last facts row, if any, and whether it is fresh.
    pub facts: (Option<MachineFacts>, Freshness),
    /// Per capability (by name, sorted).
    pub caps: Vec<(String, CapPlan)>,
}

impl MachinePlan {
    /// Is there anything to run on this machine?
    pub fn has_work(&self) -> bool {
        self.facts.1.stale()
            || self
                .caps
                .iter()
                .any(|(_, c)| matches!(c, CapPlan::Reprobe(..)))
    }
}

/// The placeholder a never-probed capability's probe line carries instead of
/// a declared path: it is refused as `declared-path-not-absolute` if pasted
/// unedited, so nothing is recorded under a guessed path.
pub fn path_placeholder(capability: &str, machine: &str) -> String {
    format!("<absolute path of {capability} on {machine}>")
}

/// Decide, for each machine in `rows`, what is fresh, stale or never probed.
/// `fleet` is every machine row of machines.toml: a capability counts as
/// "never probed" on a machine when some machine of the fleet has a row for
/// it (and the catalog still holds it).
pub fn plan(
    home: &Home,
    catalog: &Catalog,
    catalog_flag: Option<&std::path::Path>,
    led: &Ledger,
    rows: &[MachineRow],
    fleet: &[MachineRow],
    window: Duration,
) -> Vec<MachinePlan> {
    let now = time::OffsetDateTime::now_utc();
    // Capability → the fleet's newest row of it (for the prober and the
    // workspace a never-probed line proposes; never for the path).
    let mut known: std::collections::BTreeMap<String, CapabilityRow> = Default::default();
    for c in fleet.iter().flat_map(|m| led.latest_capabilities(&m.id)) {
        if !catalog.rows.contains_key(&c.capability) {
            continue;
        }
        let newer = known.get(&c.capability).is_none_or(|k| {
            crate::clock::parse_rfc3339(&c.measured_at)
                > crate::clock::parse_rfc3339(&k.measured_at)
        });
        if newer {
            known.insert(c.capability.clone(), c);
        }
    }
    rows.iter()
        .map(|row| {
            let facts = led.latest_facts(&row.id);
            let ff = match &facts {
                None => Freshness::Absent,
                Some(f) if ledger::facts_fresh(f, now, window) => Freshness::Fresh,
                Some(_) => Freshness::Old,
            };
            let mut caps: Vec<(String, CapPlan)> = Vec::new();
            let last = led.latest_capabilities(&row.id);
            for c in last {
                let p = match catalog.rows.get(&c.capability) {
                    None => CapPlan::NotInCatalog(c.clone()),
                    Some(e) if ledger::is_fresh(&c, now, window, e) => {
                        if c.outcome == Outcome::Present {
                            CapPlan::Fresh(c.clone())
                        } else {
                            CapPlan::Reprobe(c.clone(), Freshness::NotPresent)
                        }
                    }
                    Some(e) if c.catalog_digest != e.digest(&c.capability) => {
                        CapPlan::Reprobe(c.clone(), Freshness::OtherEntry)
                    }
                    Some(_) => CapPlan::Reprobe(c.clone(), Freshness::Old),
                };
                caps.push((c.capability.clone(), p));
            }
            for (cap, other) in &known {
                if caps.iter().any(|(n, _)| n == cap) {
                    continue;
                }
                let mut inputs =
                    super::remedy::default_inputs(row, &path_placeholder(cap, &row.id));
                inputs.probed_by = other.inputs.probed_by.clone();
                inputs.workspace = other.inputs.workspace.clone();
                let probe = super::remedy::probe_line(home, catalog_flag, &row.id, cap, &inputs);
                caps.push((cap.clone(), CapPlan::NeverProbed { probe }));
            }
            caps.sort_by(|a, b| a.0.cmp(&b.0));
            MachinePlan {
                row: row.clone(),
                facts: (facts, ff),
                caps,
            }
        })
        .collect()
}

/// What was done on one machine.
#[derive(Debug)]
pub struct Done {
    /// The new facts row, when the facts were re-measured.
    pub facts: Option<MachineFacts>,
    /// Per re-probed capability (in plan order): the new row, or why none
    /// was written.
    pub probes: Vec<(String, Result<CapabilityRow>)>,
    /// Why the probes of this machine did not run at all, after its facts
    /// were re-measured (the connection broke, Ctrl-C): nothing was
    /// recorded for them.
    pub probes_failed: Option<crate::error::Error>,
}

/// Settings of one re-measure invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Budget for each step on a machine (the measure, then the probes),
    /// connection included.
    pub timeout: Duration,
    /// `--catalog`, repeated in remedy lines.
    pub catalog_flag: Option<PathBuf>,
}

/// Run every plan's stale work, machines concurrently. A machine with
/// nothing stale is not contacted (its result is an empty [`Done`]).
/// Per machine: a failure to reach or measure it is the machine's error
/// (nothing more is tried there); a capability whose recorded inputs or
/// catalog entry are refused before contact (e.g.
/// `docker-probe-image-unpinned`) is that capability's error. `observe`
/// hears each machine start and finish ([`super::run::for_each_machine`]).
pub async fn run(
    home: &Home,
    led: &Arc<Ledger>,
    catalog: &Catalog,
    plans: &[MachinePlan],
    s: &Settings,
    observe: super::run::Observer,
) -> Vec<(MachineRow, Result<Done>)> {
    let rows: Vec<MachineRow> = plans.iter().map(|p| p.row.clone()).collect();
    let by_id: std::collections::HashMap<String, MachinePlan> = plans
        .iter()
        .map(|p| (p.row.id.clone(), p.clone()))
        .collect();
    let by_id = Arc::new(by_id);
    let catalog = Arc::new(catalog.clone());
    let home = home.clone();
    let settings = s.clone();
    // The measure, then the probes: each bounded by `timeout`, plus slack so
    // the inner, better-named error wins.
    let budget = s.timeout * 2 + Duration::from_secs(2);
    super::run::for_each_machine(&home.clone(), rows, budget, observe, |row| {
        let home = home.clone();
        let led = led.clone();
        let plan = by_id[&row.id].clone();
        let catalog = catalog.clone();
        let s = settings.clone();
        async move { machine(&home, &led, &catalog, &plan, &s).await }
    })
    .await
}

async fn machine(
    home: &Home,
    led: &Arc<Ledger>,
    catalog: &Catalog,
    plan: &MachinePlan,
    s: &Settings,
) -> Result<Done> {
    let mut done = Done {
        facts: None,
        probes: Vec::new(),
        probes_failed: None,
    };
    if !plan.has_work() {
        return Ok(done);
    }
    let row = &plan.row;
    let started = tokio::time::Instant::now();
    let t = super::machines::connect(home, row, s.timeout).await?;
    if plan.facts.1.stale() {
        let f = tokio::select! {
            r = super::measure::measure(&t, &row.id, s.timeout) => r?,
            _ = crate::cancel::cancelled() => {
                return Err(super::FleetError::Interrupted { machine: row.id.clone() }.into());
            }
        };
        led.append_off_runtime(ledger::Row::Machine(f.clone()))
            .await?;
        done.facts = Some(f);
    }
    // Each capability re-probed with its own row's inputs, against the
    // catalog entry as it is now; one refused before contact is that
    // capability's error alone.
    let mut items = Vec::new();
    for (cap, p) in &plan.caps {
        let CapPlan::Reprobe(before, _) = p else {
            continue;
        };
        let item = catalog.get(cap).map(|entry| ProbeItem {
            capability: cap.clone(),
            entry: entry.clone(),
            inputs: before.inputs.clone(),
        });
        let checked = match item {
            Err(e) => Err(e.into()),
            Ok(it) => ProbeSettings {
                items: vec![it.clone()],
                timeout: s.timeout,
                catalog_path: s.catalog_flag.clone(),
                catalog_origin: catalog.origin.clone(),
            }
            .validate()
            .map(|()| it),
        };
        match checked {
            Ok(it) => items.push(it),
            Err(e) => done.probes.push((cap.clone(), Err(e))),
        }
    }
    if !items.is_empty() {
        let names: Vec<String> = items.iter().map(|i| i.capability.clone()).collect();
        let settings = ProbeSettings {
            items,
            timeout: s.timeout,
            catalog_path: s.catalog_flag.clone(),
            catalog_origin: catalog.origin.clone(),
        };
        // The probes' budget starts after the measure (or the connection).
        let since = if done.facts.is_some() {
            tokio::time::Instant::now()
        } else {
            started
        };
        match super::probe::probe_on(home, led, row, &settings, &t, since).await {
            Ok(per) => done.probes.extend(names.into_iter().zip(per)),
            // Nothing was measured here yet: the machine's error.
            Err(e) if done.facts.is_none() => return Err(e),
            Err(e) => done.probes_failed = Some(e),
        }
    }
    Ok(done)
}

/// The short form of a capability row's state: for a present row its
/// version (the first word of the version output's first line that holds a
/// digit: `go1.21.0`, `3.11.2`), else `present`; `absent`; for a failed row
/// its reason (`daemon-unreachable`), else `failed`.
pub fn state(c: &CapabilityRow) -> String {
    match c.outcome {
        Outcome::Present => version_word(c).unwrap_or_else(|| "present".into()),
        Outcome::Absent => "absent".into(),
        Outcome::Failed => c.reason.clone().unwrap_or_else(|| "failed".into()),
    }
}

fn first_line(c: &CapabilityRow) -> Option<&str> {
    c.version_output.as_deref().and_then(|v| v.lines().next())
}

fn version_word(c: &CapabilityRow) -> Option<String> {
    first_line(c)?
        .split_whitespace()
        .find(|w| w.bytes().any(|b| b.is_ascii_digit()))
        .map(|w| w.trim_end_matches([',', ';', ':']).to_string())
}

/// What changed between a capability's last row and its new one, as
/// `(before, after)`: versions when both are present (`go1.19.8`,
/// `go1.21.0`; the whole first output lines when the version words agree
/// but the lines do not), else the outcome in words (`present`,
/// `daemon-unreachable`). `None`: unchanged.
pub fn capability_change(
    before: &CapabilityRow,
    after: &CapabilityRow,
) -> Option<(String, String)> {
    if before.outcome == Outcome::Present && after.outcome == Outcome::Present {
        if first_line(before) == first_line(after) {
            return None;
        }
        let (b, a) = (state(before), state(after));
        if b != a {
            return Some((b, a));
        }
        return Some((
            first_line(before).unwrap_or("").to_string(),
            first_line(after).unwrap_or("").to_string(),
        ));
    }
    let word = |c: &CapabilityRow| match c.outcome {
        Outcome::Present => "present".to_string(),
        _ => state(c),
    };
    let (b, a) = (word(before), word(after));
    (b != a).then_some((b, a))
}

/// Bytes as GiB with one decimal: `31.3 GiB`.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// A facts row's distro in words: `debian 12`, `unknown-distro 12`,
/// `debian (no VERSION_ID)`, or `no os-release` when the row has none.
pub fn distro_words(f: &MachineFacts) -> String {
    f.distro
        .as_ref()
        .map(|d| {
            format!(
                "{} {}",
                d.id.as_deref().unwrap_or("unknown-distro"),
                d.version_id.as_deref().unwrap_or("(no VERSION_ID)")
            )
        })
        .unwrap_or_else(|| "no os-release".into())
}

/// The compared aspects of a facts row, in words: `Linux x86_64`,
/// `kernel 6.1.0-18-amd64`, `debian 12`, `8 cpus`, `31.3 GiB`, `userns yes`.
pub fn facts_aspects(f: &MachineFacts) -> Vec<String> {
    vec![
        format!("{} {}", f.os, f.arch),
        format!("kernel {}", f.kernel),
        distro_words(f),
        f.cpus
            .map(|c| format!("{c} cpus"))
            .unwrap_or_else(|| "? cpus".into()),
        f.memory_bytes.map(gib).unwrap_or_else(|| "? memory".into()),
        match f.userns.supported {
            Some(true) => "userns yes".into(),
            Some(false) => "userns no".into(),
            None => "userns unknown".into(),
        },
    ]
}

/// What changed between two facts rows of a machine, one `(before, after)`
/// per aspect of [`facts_aspects`] that differs (`debian 12`, `debian 13`).
/// With no row before, one pair: `never measured` and the distro.
pub fn facts_changes(before: Option<&MachineFacts>, after: &MachineFacts) -> Vec<(String, String)> {
    let a = facts_aspects(after);
    let Some(before) = before else {
        return vec![("never measured".into(), a[2].clone())];
    };
    facts_aspects(before)
        .into_iter()
        .zip(a)
        .filter(|(b, a)| b != a)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::ledger::ProbeInputs;

    fn row(outcome: Outcome, out: Option<&str>, reason: Option<&str>) -> CapabilityRow {
        CapabilityRow {
            machine: "m1".into(),
            capability: "go".into(),
            inputs: ProbeInputs {
                declared_path: "/usr/bin/go".into(),
                workhome: "/w".into(),
                probed_by: "a".into(),
                workspace: "ws".into(),
            },
            outcome,
            reason: reason.map(str::to_string),
            reason_detail: None,
            version_output: out.map(str::to_string),
            detail: Default::default(),
            facts: None,
            measured_at: "2026-01-01T00:00:00Z".into(),
            catalog_digest: String::new(),
            remedy: vec![],
        }
    }

    #[test]
    fn changes_in_words() {
        let a = row(
            Outcome::Present,
            Some("go version go1.19.8 linux/amd64"),
            None,
        );
        let b = row(
            Outcome::Present,
            Some("go version go1.21.0 linux/amd64"),
            None,
        );
        assert_eq!(
            capability_change(&a, &b),
            Some(("go1.19.8".into(), "go1.21.0".into()))
        );
        assert_eq!(capability_change(&a, &a.clone()), None);
        let f = row(Outcome::Failed, None, Some("daemon-unreachable"));
        assert_eq!(
            capability_change(&a, &f),
            Some(("present".into(), "daemon-unreachable".into()))
        );
        let d = row(
            Outcome::Present,
            Some("Docker version 20.10.24+dfsg1, build 297e128"),
            None,
        );
        assert_eq!(state(&d), "20.10.24+dfsg1");
        let gone = row(Outcome::Absent, None, Some("not-found"));
        assert_eq!(
            capability_change(&gone, &a),
            Some(("absent".into(), "present".into()))
        );
        assert_eq!(capability_change(&gone, &gone.clone()), None);
    }
}
