//! What one probe is asked and what it found — the types the probe
//! implementations (the toolchain script in [`super::probe`], the Docker
//! probe in [`crate::docker`]) share. A leaf of the fleet module, so
//! `docker` does not depend on `fleet::probe` (which dispatches to it).

use super::ledger::{MachineFacts, Outcome, ProbeInputs};
use super::machines::MachineRow;
use crate::catalog::Capability;
use crate::home::Home;
use serde_json::{Map, Value};
use std::time::Duration;

/// One probe of one machine, as the probe functions see it.
#[derive(Debug)]
pub struct ProbeRequest<'a> {
    /// `SAPHAN_HOME`.
    pub home: &'a Home,
    /// The machine row.
    pub machine: &'a MachineRow,
    /// The capability name.
    pub capability: &'a str,
    /// Its catalog entry.
    pub entry: &'a Capability,
    /// The operator's inputs.
    pub inputs: &'a ProbeInputs,
    /// The machine's latest measured facts, if any.
    pub facts: Option<&'a MachineFacts>,
    /// The remaining budget for this machine.
    pub timeout: Duration,
}

/// What a probe found; the caller adds facts, time, digest, remedy and signs it.
#[derive(Debug, Clone, Default)]
pub struct Finding {
    /// present / absent / failed.
    pub outcome: Option<Outcome>,
    /// Stable short reason when not present (`not-found`, `not-executable`,
    /// `version-command-failed`, `binary-absent`, `daemon-unreachable` …).
    pub reason: Option<String>,
    /// A sentence about the reason.
    pub reason_detail: Option<String>,
    /// Version output, when a version command ran.
    pub version_output: Option<String>,
    /// Extra evidence for the row's `detail`.
    pub detail: Map<String, Value>,
    /// The platform command for remedy line 1, when the probe knows a
    /// better one than the catalog's install command for the measured
    /// platform (e.g. starting a daemon). `None`: the catalog's.
    pub install: Option<String>,
}
