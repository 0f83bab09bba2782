//! The container-class gate: container work may be dispatched to a machine
//! only while the machine holds a fresh, present docker-oci row — proof that
//! it runs the pinned saphan-probe image, measured against the catalog entry
//! (and so the pin) in use now, within the freshness window.

use crate::catalog::Catalog;
use crate::docker::{DOCKER_OCI, DockerError};
use crate::error::Result;
use crate::fleet::ledger::{self, Ledger, MachineFacts, Outcome};
use crate::fleet::machines::{MachineRow, Machines};
use crate::fleet::remedy;
use crate::home::Home;

/// Refuse unless `machine_id` has a fresh, present docker-oci row at `now`.
///
/// Fresh means: the machine's latest docker-oci row says present, is younger
/// than the freshness window (`[fleet] freshness`, default 24h), and was
/// measured against `catalog`'s docker-oci entry exactly as it is (a new pin
/// makes every older row stale).
///
/// Errors: `container-docker-capability-absent` ([`check`]); `machine-unknown`;
/// the ledger's own refusals (`ledger-row-tampered` …); `capability-unknown`
/// when the catalog has no docker-oci row.
pub fn require_container_capability(
    home: &Home,
    catalog: &Catalog,
    machine_id: &str,
    now: time::OffsetDateTime,
) -> Result<()> {
    let machines = Machines::load(home)?;
    let row = machines.get(home, machine_id)?.clone();
    let ledger = Ledger::open(home)?;
    let window = crate::fleet::freshness_window(home)?;
    check(home, catalog, &ledger, window, &row, now)
}

/// The docker-oci gate for one machine row, from `ledger` at `now`.
///
/// Errors: `container-docker-capability-absent`: one headline line, then the
/// commands on indented lines, in the order they are run, all built at the
/// time of the refusal from the machine's latest facts and the catalog in
/// use: the `machine measure` line when the facts row is absent or stale;
/// only after a probe said absent or failed, the fix for its reason or the
/// install command for the measured platform (or `NO INSTALL COMMAND …`);
/// then the exact `saphan machine probe … --capability docker-oci` line with
/// the machine row's own workhome. A row never probed, or present but only
/// stale (older than the window, or measured against another catalog
/// entry), is told to probe — never to install. `capability-unknown` when
/// the catalog has no docker-oci row.
pub fn check(
    home: &Home,
    catalog: &Catalog,
    ledger: &Ledger,
    window: std::time::Duration,
    row: &MachineRow,
    now: time::OffsetDateTime,
) -> Result<()> {
    let machine_id = row.id.as_str();
    let entry = catalog.get(DOCKER_OCI)?;
    let latest = ledger.latest_capability(machine_id, DOCKER_OCI);
    let unpinned = super::pin_of(entry, &catalog.origin).is_err();
    let facts = ledger.latest_facts(machine_id);
    let ids = facts.as_ref().map(MachineFacts::platform_ids);
    let mut fix = None;
    let why = match &latest {
        None if unpinned => "it was never probed, and the catalog's docker-oci pin is the zero digest, so it cannot be until the image is pinned (docs/docker.md)".to_string(),
        None => "it was never probed".to_string(),
        Some(c) if c.outcome != Outcome::Present => {
            fix = Some(ids.as_deref().and_then(|ids| {
                first_command(latest.as_ref(), entry, &catalog.origin, facts.as_ref(), ids)
            }));
            format!(
                "its latest docker-oci row ({}) says {}{}",
                c.measured_at,
                c.outcome.as_str(),
                c.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            )
        }
        Some(c) if ledger::is_fresh(c, now, window, entry) => return Ok(()),
        Some(c) if c.catalog_digest != entry.digest(DOCKER_OCI) => format!(
            "its present row ({}) was measured against another docker-oci catalog entry (a different pin or socket) — probe it again with the catalog in use",
            c.measured_at
        ),
        Some(c) => format!(
            "its present row ({}) is older than the freshness window of {} — probe it again",
            c.measured_at,
            humantime::format_duration(window)
        ),
    };
    // The remedy is built now, from the machine's latest measured facts and
    // the catalog in use — never replayed from a stored row, whose commands
    // may name another catalog, home or platform.
    let catalog_path = catalog.flag_path(home);
    let inputs = latest
        .as_ref()
        .map(|c| c.inputs.clone())
        .unwrap_or_else(|| remedy::default_inputs(row, "/usr/bin/docker"));
    let needs = remedy::Needs {
        measure: !facts
            .as_ref()
            .is_some_and(|f| ledger::facts_fresh(f, now, window)),
        probe: Some((DOCKER_OCI.to_string(), inputs)),
        fix,
        platform_ids: ids,
    };
    let commands = remedy::admission(home, catalog_path, row, &needs);
    Err(DockerError::ContainerCapabilityAbsent {
        machine: machine_id.to_string(),
        why,
        commands: commands.join("\n  "),
    }
    .into())
}

/// Remedy line 1, from the measured facts and the current catalog: for a
/// failed docker-oci row, the fix its reason calls for on this platform
/// (e.g. `systemctl enable --now docker` for `daemon-unreachable`, the pinned
/// image's load command for `probe-image-absent`); otherwise, or when the
/// reason has none, the catalog's install command for the platform.
fn first_command(
    latest: Option<&crate::fleet::ledger::CapabilityRow>,
    entry: &crate::catalog::Capability,
    origin: &str,
    facts: Option<&MachineFacts>,
    ids: &[String],
) -> Option<String> {
    let install = entry.install_for(ids);
    let by_reason = latest
        .filter(|c| c.outcome != Outcome::Present)
        .and_then(|c| c.reason.as_deref())
        .and_then(super::Reason::from_word)
        .and_then(|r| {
            let pin = super::pin_of(entry, origin).ok();
            super::oci::fix_for(
                r,
                pin.as_ref(),
                install,
                &super::Platform::from_facts(facts),
            )
        });
    by_reason.or_else(|| install.map(str::to_string))
}
