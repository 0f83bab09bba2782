//! The row schema: the typed rows of the ledger — a machine's measured
//! facts ([`MachineFacts`], `kind: "machine"`) and one probe of one
//! capability ([`CapabilityRow`], `kind: "capability"`) — and their serde
//! form. How rows are signed and chained is [`super::chain`]'s; this file
//! holds only what a row says.

use crate::platform::OsRelease;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The row format version written in `v`.
pub const ROW_VERSION: u64 = 2;

/// User-namespace support as measured on the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Userns {
    /// `true`/`false` when measured, `None` when nothing could tell.
    pub supported: Option<bool>,
    /// How it was decided: `"unshare -U true"` (an attempt, as the connected
    /// user), `"sysctl"` (from the two files below, when `unshare` is
    /// missing), or `"none"`.
    pub method: String,
    /// `/proc/sys/user/max_user_namespaces`, when readable.
    pub max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian/Ubuntu kernels), when present.
    pub unprivileged_userns_clone: Option<u64>,
}

/// A machine's measured confinement facts: one `kind: "machine"` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// The machine id.
    pub machine: String,
    /// When the facts were measured (RFC 3339, UTC).
    pub measured_at: String,
    /// `uname -s` (e.g. `Linux`, `Darwin`).
    pub os: String,
    /// `uname -m` (e.g. `x86_64`, `aarch64`, `arm64`).
    pub arch: String,
    /// `uname -r`.
    pub kernel: String,
    /// `/etc/os-release` (or `/usr/lib/os-release`) as parsed; `None` when
    /// the machine has neither file.
    pub distro: Option<OsRelease>,
    /// Online CPUs (`getconf _NPROCESSORS_ONLN`), when measured.
    pub cpus: Option<u64>,
    /// Total memory in bytes (`MemTotal` of /proc/meminfo × 1024, or
    /// `sysctl hw.memsize` on Darwin), when measured.
    pub memory_bytes: Option<u64>,
    /// User-namespace support.
    pub userns: Userns,
    /// The tools dispatch uses on the machine, as the measure script found
    /// them. `None` on a row measured by a saphan before this field existed
    /// (the row still reads and verifies; admission tells the machine to be
    /// re-measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Requirements>,
}

/// What a tiny real use of one tool on the machine showed (`machine
/// measure`'s requirements section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    /// It ran (`setsid true`, `flock -n` on /dev/null, the empty input's
    /// digest, `git --version`, /proc readable, `ps -o pid`).
    Ok,
    /// A file of that name is on PATH, but the use failed.
    NotRunnable,
    /// Not on PATH.
    Absent,
}

impl ToolState {
    /// `ok`, `not-runnable` or `absent`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolState::Ok => "ok",
            ToolState::NotRunnable => "not-runnable",
            ToolState::Absent => "absent",
        }
    }
}

/// The dispatch requirements measured on a machine, one [`ToolState`] per
/// tool; what admission makes of them is `crate::dispatch::admit`'s
/// (`machine-requirements-absent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requirements {
    /// `flock` (the repository lock; lock.sh falls back to a `mkdir` lock).
    pub flock: ToolState,
    /// `setsid` (the watchdog's process group).
    pub setsid: ToolState,
    /// `sha256sum` (provision hashes).
    pub sha256sum: ToolState,
    /// `shasum -a 256` (the provision hash where `sha256sum` is not).
    pub shasum: ToolState,
    /// `git`.
    pub git: ToolState,
    /// `git --version`'s version (`2.39.5`), when it ran.
    pub git_version: Option<String>,
    /// `/proc` (`/proc/$$/stat` readable).
    pub proc: ToolState,
    /// `ps`.
    pub ps: ToolState,
    /// `bwrap` (the seal, [`crate::seal`]): `ok` when a sealed `true` ran —
    /// `bwrap` with the seal's namespaces, read-only root, private `/dev`,
    /// `/proc` and `/tmp` — as the connected user. `None` on a row measured
    /// before saphan measured the seal (format 3 of the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<ToolState>,
    /// Where that `bwrap` is on the machine, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap_path: Option<String>,
}

impl MachineFacts {
    /// The platform ids an install command may be chosen by, most specific
    /// first: `["darwin"]` on Darwin, else os-release `ID` then `ID_LIKE`.
    /// Empty when the facts prove no platform.
    pub fn platform_ids(&self) -> Vec<String> {
        if self.os == "Darwin" {
            return vec!["darwin".into()];
        }
        self.distro
            .as_ref()
            .map(OsRelease::platform_ids)
            .unwrap_or_default()
    }
}

/// A probe's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The declared program exists, is executable and ran its version command.
    Present,
    /// The declared program is not there.
    Absent,
    /// It is there but does not work (not executable, version command failed
    /// or timed out), or — for docker-oci / sandbox-userns — the named check failed.
    Failed,
}

impl Outcome {
    /// `present`, `absent` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Present => "present",
            Outcome::Absent => "absent",
            Outcome::Failed => "failed",
        }
    }
}

/// The probe's inputs, as the operator gave them (or `machine probe`
/// defaulted them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeInputs {
    /// `--declared-path` (absolute).
    pub declared_path: String,
    /// `--workhome` (absolute; by default the machine row's own).
    pub workhome: String,
    /// `--probed-by` (by default the login user).
    pub probed_by: String,
    /// `--workspace`; empty when none was given (the default).
    pub workspace: String,
}

/// One probe of one capability on one machine: a `kind: "capability"` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityRow {
    /// The machine id.
    pub machine: String,
    /// The catalog capability name (`go`, `docker-oci` …).
    pub capability: String,
    /// What the operator declared.
    pub inputs: ProbeInputs,
    /// present / absent / failed.
    pub outcome: Outcome,
    /// Why, when not present: a stable short name where one exists
    /// (`binary-absent`, `daemon-unreachable`, `probe-image-absent`,
    /// `not-executable`, `version-command-failed` …) — see `reason_detail`.
    pub reason: Option<String>,
    /// A human sentence about `reason`.
    pub reason_detail: Option<String>,
    /// The version command's output (stdout and stderr), when it ran.
    pub version_output: Option<String>,
    /// Extra evidence a probe kind wants to keep (e.g. docker-oci VM facts).
    #[serde(default)]
    pub detail: Map<String, Value>,
    /// The machine's latest measured facts when the probe ran (`None`: never measured).
    pub facts: Option<MachineFacts>,
    /// When the probe ran (RFC 3339, UTC).
    pub measured_at: String,
    /// [`crate::catalog::Capability::digest`] of the catalog entry the probe used.
    pub catalog_digest: String,
    /// The two remedy lines printed on failure (empty when present).
    #[serde(default)]
    pub remedy: Vec<String>,
}

/// Any ledger row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // rows are few and short-lived; boxing buys nothing
pub enum Row {
    /// `kind: "machine"`.
    Machine(MachineFacts),
    /// `kind: "capability"`.
    Capability(CapabilityRow),
}
