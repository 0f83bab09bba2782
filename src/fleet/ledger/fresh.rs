//! Freshness: a row is fresh while it is younger than the window (`[fleet]
//! freshness`, default 24h, [`crate::fleet::freshness_window`]) and — for
//! capability rows — was measured against the current catalog entry: the
//! row stores [`crate::catalog::Capability::digest`] of the entry it was
//! measured against (for docker-oci this covers the pinned image digest).

use super::row::{CapabilityRow, MachineFacts};
use crate::catalog::Capability;
use std::time::Duration;

/// Is a facts row fresh: measured within `window` before `now`?
pub fn facts_fresh(facts: &MachineFacts, now: time::OffsetDateTime, window: Duration) -> bool {
    young(&facts.measured_at, now, window)
}

/// Is a capability row fresh: measured within `window` before `now`, and
/// against `catalog_row` exactly as it is now (its digest matches)?
/// `catalog_row` is the current entry for `row.capability`.
pub fn is_fresh(
    row: &CapabilityRow,
    now: time::OffsetDateTime,
    window: Duration,
    catalog_row: &Capability,
) -> bool {
    young(&row.measured_at, now, window)
        && row.catalog_digest == catalog_row.digest(&row.capability)
}

fn young(measured_at: &str, now: time::OffsetDateTime, window: Duration) -> bool {
    let Some(t) = crate::clock::parse_rfc3339(measured_at) else {
        return false;
    };
    let age = now - t;
    // A row from the future (clock skew) is not trusted as fresh.
    !age.is_negative() && age.unsigned_abs() < window
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::ledger::{Outcome, ProbeInputs};
    use serde_json::Map;

    #[test]
    fn freshness_needs_age_and_catalog_digest() {
        let cat = crate::catalog::Catalog::load(None).unwrap();
        let go = cat.get("go").unwrap();
        let row = CapabilityRow {
            machine: "m0".into(),
            capability: "go".into(),
            inputs: ProbeInputs {
                declared_path: "/usr/bin/go".into(),
                workhome: "/w".into(),
                probed_by: "t".into(),
                workspace: "w".into(),
            },
            outcome: Outcome::Present,
            reason: None,
            reason_detail: None,
            version_output: None,
            detail: Map::new(),
            facts: None,
            measured_at: "2026-01-01T00:00:00Z".into(),
            catalog_digest: go.digest("go"),
            remedy: vec![],
        };
        let t = |s: &str| crate::clock::parse_rfc3339(s).unwrap();
        let day = Duration::from_secs(86400);
        assert!(is_fresh(&row, t("2026-01-01T23:59:00Z"), day, go));
        assert!(!is_fresh(&row, t("2026-01-02T00:00:01Z"), day, go));
        assert!(!is_fresh(&row, t("2025-12-31T00:00:00Z"), day, go));
        let mut changed = go.clone();
        changed.version = vec!["{path}".into(), "env".into()];
        assert!(!is_fresh(&row, t("2026-01-01T01:00:00Z"), day, &changed));
    }
}
