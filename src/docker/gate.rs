//! The container-class gate: container work may be dispatched to a machine
//! only while the machine holds a fresh, present docker-oci row — proof that
//! it runs the pinned saphan-probe image, measured against the catalog entry
//! (and so the pin) in use now, within the freshness window.

use super::{DOCKER_OCI, DockerError};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::fleet::ledger::{self, Ledger, MachineFacts, Outcome, ProbeInputs};
use crate::fleet::machines::Machines;
use crate::fleet::remedy;
use crate::home::Home;
use std::path::Path;

/// Refuse unless `machine_id` has a fresh, present docker-oci row at `now`.
///
/// Fresh means: the machine's latest docker-oci row says present, is younger
/// than the freshness window (`[fleet] freshness`, default 24h), and was
/// measured against `catalog`'s docker-oci entry exactly as it is (a new pin
/// makes every older row stale).
///
/// Errors: `container-docker-capability-absent` with the install line and the
/// re-measure line (from the failed row's own remedy, else built from the
/// machine's measured platform); `machine-unknown`; the ledger's own
/// refusals (`ledger-row-tampered` …); `capability-unknown` when the catalog
/// has no docker-oci row.
pub fn require_container_capability(
    home: &Home,
    catalog: &Catalog,
    machine_id: &str,
    now: time::OffsetDateTime,
) -> Result<()> {
    let machines = Machines::load(home)?;
    let row = machines.get(home, machine_id)?.clone();
    let entry = catalog.get(DOCKER_OCI)?;
    let ledger = Ledger::open(home)?;
    let window = crate::fleet::freshness_window(home)?;
    let latest = ledger.latest_capability(machine_id, DOCKER_OCI);
    let unpinned = super::pin_of(entry, &catalog.origin).is_err();
    let why = match &latest {
        None if unpinned => "it was never probed, and the catalog's docker-oci pin is the zero digest, so it cannot be until the image is pinned (docs/docker.md)".to_string(),
        None => "it was never probed".to_string(),
        Some(c) if c.outcome != Outcome::Present => format!(
            "its latest docker-oci row ({}) says {}{}",
            c.measured_at,
            c.outcome.as_str(),
            c.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
        ),
        Some(c) if ledger::is_fresh(c, now, window, entry) => return Ok(()),
        Some(c) if c.catalog_digest != entry.digest(DOCKER_OCI) => format!(
            "its present row ({}) was measured against another docker-oci catalog entry (a different pin or socket)",
            c.measured_at
        ),
        Some(c) => format!(
            "its present row ({}) is older than the freshness window of {}",
            c.measured_at,
            humantime::format_duration(window)
        ),
    };
    let catalog_path = (catalog.origin != "embedded").then(|| Path::new(&catalog.origin));
    let [install, remeasure] = match &latest {
        Some(c) if c.outcome != Outcome::Present && c.remedy.len() == 2 => {
            [c.remedy[0].clone(), c.remedy[1].clone()]
        }
        _ => {
            let facts = ledger.latest_facts(machine_id);
            let ids = facts.as_ref().map(MachineFacts::platform_ids);
            let cmd = ids.as_deref().and_then(|ids| entry.install_for(ids));
            let inputs = latest
                .as_ref()
                .map(|c| c.inputs.clone())
                .unwrap_or_else(|| ProbeInputs {
                    declared_path: "/usr/bin/docker".into(),
                    workhome: row.workhome.clone(),
                    probed_by: std::env::var("USER")
                        .ok()
                        .filter(|u| !u.is_empty())
                        .unwrap_or_else(|| "operator".into()),
                    workspace: std::env::current_dir()
                        .ok()
                        .and_then(|d| d.canonicalize().ok())
                        .map(|d| d.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "/".into()),
                });
            remedy::remedy(
                home,
                catalog_path,
                &row,
                DOCKER_OCI,
                &inputs,
                ids.as_deref(),
                cmd,
            )
        }
    };
    Err(DockerError::ContainerCapabilityAbsent {
        machine: machine_id.to_string(),
        why,
        install,
        remeasure,
    }
    .into())
}
