//! The typed values of the record fields that only some verbs or classes
//! write (docs/certify.md, docs/dispatch.md, docs/docker.md,
//! docs/union-and-stream.md): what a container ran, a dispatched run's
//! program and phases, submodules, verify-union's stream heads and
//! verify-stream's steps. Their JSON shapes are the record format's
//! ([`super::FORMAT`]); `tests/it/record_fields.rs` pins them.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// What ran a container-class suite (record fields, flattened into the
/// record: every key present on a container-class record, none on a host
/// one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRun {
    /// The suite container's name (`saphan-suite-<attempt>`).
    pub container: String,
    /// The engine's API version (`1.47`).
    pub docker_api_version: String,
    /// The Docker socket spoken to, on the machine.
    pub docker_socket: String,
    /// The image ID the pin resolved to (`sha256:…`).
    pub image_id: String,
    /// The pin as given (`sha256:…` or `NAME@sha256:…`).
    pub image_pin: String,
    /// `image-id` or `registry-digest`.
    pub image_pin_kind: String,
    /// Whether the container had a network.
    #[serde(default)]
    pub network: bool,
    /// The engine's client program on the machine: the docker-oci row's
    /// declared path (`/usr/bin/docker`); null when no row names it. The
    /// suite's own program is the record's `program_path`, the image's.
    #[serde(default)]
    pub engine_path: Option<String>,
    /// That program's version output as the docker-oci row recorded it
    /// (`Docker version 26.1.5, …`); null when unknown.
    #[serde(default)]
    pub engine_version: Option<String>,
}

/// What kept an attempt's processes from outliving it (record field
/// `containment`): defined beside the processes it contains, in
/// [`crate::exec`].
pub use crate::exec::Containment;

/// The program a dispatched run used on the machine (record field
/// `machine_program`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineProgram {
    /// The capability row that admitted it; null for a program no catalog
    /// row maps (resolved on the machine).
    pub capability: Option<String>,
    /// Its path on the machine.
    pub path: String,
    /// Its version output, as the ledger row recorded it; null when unknown.
    pub version: Option<String>,
}

/// A phase of one machine's attempt (the keys of the record's `phases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Connecting to the machine.
    Connect,
    /// Shipping the commits (and the saphan binary) there.
    Ship,
    /// Taking the lock and making the scratch tree.
    Materialize,
    /// Running the suite.
    Run,
    /// Bringing back what it left.
    Collect,
}

/// Seconds per phase of a dispatched attempt (record field `phases`); a
/// phase never reached is absent.
pub type Phases = BTreeMap<Phase, f64>;

/// A submodule checked out at its gitlink (record field `submodules`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmoduleAt {
    /// The commit it was checked out at.
    pub commit: String,
    /// Its path in the tree.
    pub path: String,
}

/// One stream as verify-union merged it (record field `streams`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamHead {
    /// The name given on the command line.
    pub name: String,
    /// Its head SHA at the time of the merge.
    pub sha: String,
}

/// How one verify-stream step ended (`outcome` in the record's `steps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepOutcome {
    /// It passed.
    Pass,
    /// It failed: a non-zero exit, a failing test, or files gofmt lists.
    Fail,
    /// It ran past the step budget; its process group was killed.
    Timeout,
    /// It could not give a verdict (killed by a signal, unreadable report,
    /// not started, interrupted).
    MeasurementFailed,
}

/// One verify-stream step as it ran (record field `steps`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// `build`, `vet`, `test`, `gofmt`.
    pub name: String,
    /// Exactly what ran.
    pub argv: Vec<String>,
    /// How it ended.
    pub outcome: StepOutcome,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Files gofmt lists (gofmt only; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Tests that ran (test only, when measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Failing tests (test only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// The last lines of its stderr or notes, when it did not pass.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Deserialize a present value (even `null`) as `Some`: with
/// `#[serde(default)]`, an absent key stays `None`, so `Option<Option<T>>`
/// tells "absent" from "null".
pub(super) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// One shard of a `certify --split` invocation (record field `shard`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard's index, from 0.
    pub index: usize,
    /// How many shards the invocation ran.
    pub count: usize,
    /// The packages assigned to it (go-test-json suites; empty for other
    /// report kinds, whose suite splits itself by `SAPHAN_SHARD_INDEX` /
    /// `SAPHAN_SHARD_COUNT`).
    pub packages: Vec<String>,
}
