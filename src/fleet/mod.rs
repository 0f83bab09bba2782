//! The fleet: machine rows, the signed ledger of measured facts, and the two
//! ceremonies that fill it — `machine measure` (a machine's confinement facts)
//! and `machine probe` (one capability on one machine, with a remedy when it
//! fails). DESIGN §6; the operator's guide is `docs/fleet.md`.
//!
//! - [`machines`]: `SAPHAN_HOME/fleet/machines.toml` and [`machines::connect`].
//! - [`ledger`]: `SAPHAN_HOME/fleet/ledger.jsonl`, ed25519-signed rows,
//!   freshness.
//! - [`measure`]: one remote script gathers every fact in one exec.
//! - [`probe`]: prove or refute a declared absolute program; remedies.
//! - [`run`]: several machines at once, one connection and one progress line each.
//! - [`remeasure`]: re-run what is stale, with each row's recorded inputs; what changed.
//! - [`remedy`]: the commands a refusal or a failed probe prints.
//! - [`spell`]: shell quoting and SAPHAN_HOME as an operator line spells them.
//!
//! Layering, one way: [`spell`] at the bottom (the [`FleetError`] words
//! quote through it); [`ledger`] (its `perms` below the rest) on it;
//! [`machines`] on both; [`remedy`] on top of ledger and machines; the
//! ceremonies ([`probe`], [`run`], [`remeasure`]) above. Nothing below
//! names what is above it.

pub mod docker_probes;
pub mod finding;
pub mod ledger;
pub mod machines;
pub mod measure;
pub mod pool;
pub mod probe;
pub mod remeasure;
pub mod remedy;
pub mod run;
pub mod spell;

use crate::error::{Exit, Refusal};
use std::path::PathBuf;
use std::time::Duration;

/// The row a `machine-unknown` refusal tells the operator to add: for
/// `local` (this machine, the row a container-class run without `--machine`
/// is gated on) `transport = "local"` and its workhome; else an ssh row.
fn row_form(id: &str) -> String {
    if id == "local" {
        "transport = \"local\", workhome = \"/ABSOLUTE/DIR\": this machine as a fleet row".into()
    } else {
        format!(
            "transport = \"ssh\", host = \"{id}\", workhome = \"/ABSOLUTE/DIR\" — or transport = \"local\" for this machine"
        )
    }
}

/// Errors of the fleet ceremonies.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// `fleet/machines.toml` is not valid or not of the expected shape.
    #[error("{path} is malformed: {detail} — fix the file (docs/fleet.md shows a row)")]
    MachinesMalformed { path: PathBuf, detail: String },
    /// A `[pool.NAME]` row of machines.toml that cannot be used
    /// (`pool-invalid`, docs/slurm.md).
    #[error("{source}")]
    Pool {
        #[source]
        source: Box<crate::slurm::SlurmError>,
    },
    /// A machine id that no row declares.
    #[error(
        "no machine `{id}` in {path} (known: {known}) — add a [machine.{id}] row ({}), or pick a known id",
        row_form(id)
    )]
    MachineUnknown {
        id: String,
        path: PathBuf,
        known: String,
    },
    /// A ledger line whose signature does not verify.
    #[error(
        "{path} line {line}: {detail} — the row was edited or signed by another key; saphan trusts none of the ledger while it holds it: move the ledger aside and re-measure"
    )]
    LedgerTampered {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// A ledger line that is not a ledger row at all.
    #[error(
        "{path} line {line} is not a ledger row: {detail} — the file was edited by hand; move it aside and re-measure"
    )]
    LedgerMalformed {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// The signing key exists but cannot be used.
    #[error(
        "signing key {path}: {detail} — restore the key, or move it and the ledger aside to start a new ledger"
    )]
    SigningKey { path: PathBuf, detail: String },
    /// The signing key (or its directory) can be read or replaced by others.
    #[error(
        "signing key {path}: {detail}; anyone who can read it can forge ledger rows, and nothing signed with it is trusted — run `{fix}`, then (if others may have read it) move the key and the ledger aside and re-measure"
    )]
    SigningKeyExposed {
        path: PathBuf,
        detail: String,
        fix: String,
    },
    /// SAPHAN_HOME, `fleet/` or `keys/` can be written by others or is owned
    /// by another user: whoever can write it can swap the ledger, its head
    /// or the key directory.
    #[error(
        "{dir}: {detail}; whoever can write it can rename `keys/` or swap the ledger and its head, so nothing in it is trusted — run `{fix}`, then (if others may have used it) move the key and the ledger aside and re-measure"
    )]
    HomeExposed {
        dir: PathBuf,
        detail: String,
        fix: String,
    },
    /// The ledger holds rows but the key that signed them is gone.
    #[error(
        "signing key {path} is missing while {ledger} holds signed rows, so none of them can be verified — restore the key from a backup, or move the ledger (and fleet/ledger.head) aside and re-measure"
    )]
    SigningKeyMissing { path: PathBuf, ledger: PathBuf },
    /// The signing key is there but the ledger and its head are gone (or
    /// empty): deleting both must not silently start an empty ledger.
    #[error(
        "{} and its signed head are missing or empty, but the key {} that signed them is still there — the ledger was deleted or emptied, and saphan will not start an empty one under the same key by itself; restore the ledger and fleet/ledger.head from a backup, or start a new ledger on purpose: move the key aside as well (`mv {} {}`), then re-measure",
        path.display(),
        key.display(),
        spell::quote(&key.to_string_lossy()),
        spell::quote(&format!("{}.retired", key.display()))
    )]
    LedgerVanished { path: PathBuf, key: PathBuf },
    /// A ledger line whose `seq`/`prev` does not continue the line before it.
    #[error(
        "{path} line {line}: {detail} — lines were reordered, removed or duplicated; saphan trusts none of the ledger while it holds it: move the ledger and fleet/ledger.head aside and re-measure"
    )]
    LedgerChainBroken {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// The ledger does not match its signed head (`fleet/ledger.head`).
    #[error(
        "{path}: {detail} — lines were removed or the file was replaced; saphan trusts none of the ledger while it holds it: move the ledger and fleet/ledger.head aside and re-measure"
    )]
    LedgerHeadMismatch { path: PathBuf, detail: String },
    /// The ledger's last line has no newline: an append was cut short.
    #[error(
        "{path} line {line} has no final newline: an append was cut short (a crash or a full disk) — nothing more is appended onto it; remove the partial line with `truncate -s {keep} {path}` and run the command again"
    )]
    LedgerTorn {
        path: PathBuf,
        line: usize,
        keep: u64,
    },
    /// `--declared-path` was not absolute.
    #[error(
        "--declared-path `{path}` is not an absolute path — declare the program by its absolute path on the machine (e.g. /usr/bin/go)"
    )]
    DeclaredPathNotAbsolute { path: String },
    /// An argument that travels to the machine is longer than any path there.
    #[error(
        "{flag} is {bytes} bytes long, more than the {max} a path on a machine can have — nothing was contacted or recorded; give the real path"
    )]
    ArgumentTooLong {
        flag: &'static str,
        bytes: usize,
        max: usize,
    },
    /// `--workhome` was not absolute.
    #[error(
        "--workhome `{path}` is not an absolute path — pass the machine's absolute work directory"
    )]
    WorkhomeNotAbsolute { path: String },
    /// The machine could not be reached or the connection broke.
    #[error("{machine}: {source}")]
    Transport {
        machine: String,
        #[source]
        source: Box<crate::transport::TransportError>,
    },
    /// The whole exchange with the machine ran past its budget.
    #[error("{machine}: no answer within {}s — {hint}, or raise --timeout", budget.as_secs_f64())]
    Timeout {
        machine: String,
        budget: Duration,
        /// What to check: `ssh -F … HOST true` for an SSH machine; for the
        /// local machine, what it is busy with.
        hint: String,
    },
    /// The measure script's output could not be read.
    #[error(
        "{machine}: the measure script's output is not readable: {detail} — run `saphan machine measure --machine {machine}` again; if it persists the machine's shell is unusual (RUST_LOG=saphan=debug shows the output)"
    )]
    MeasureOutput { machine: String, detail: String },
    /// The operator pressed Ctrl-C: what was started was stopped, nothing recorded.
    #[error(
        "{machine}: interrupted (Ctrl-C) — the probe's commands were stopped and its probe containers removed; nothing was recorded for this machine: run the probe again"
    )]
    Interrupted { machine: String },
    /// A capability kind whose probe is not built into this binary.
    #[error(
        "capability `{capability}` is of kind `{kind}`, whose probe is not available in this build — nothing was measured or recorded"
    )]
    ProbeUnavailable { capability: String, kind: String },
}

impl Refusal for FleetError {
    fn name(&self) -> &'static str {
        match self {
            FleetError::MachinesMalformed { .. } => "machines-malformed",
            FleetError::Pool { source } => source.name(),
            FleetError::MachineUnknown { .. } => "machine-unknown",
            FleetError::LedgerTampered { .. } => "ledger-row-tampered",
            FleetError::LedgerMalformed { .. } => "ledger-row-malformed",
            FleetError::SigningKey { .. } => "signing-key-unusable",
            FleetError::SigningKeyExposed { .. } => "row-signing-key-exposed",
            FleetError::SigningKeyMissing { .. } => "row-signing-key-missing",
            FleetError::HomeExposed { .. } => "saphan-home-exposed",
            FleetError::LedgerChainBroken { .. } => "ledger-chain-broken",
            FleetError::LedgerHeadMismatch { .. } | FleetError::LedgerVanished { .. } => {
                "ledger-head-mismatch"
            }
            FleetError::LedgerTorn { .. } => "ledger-row-torn",
            FleetError::DeclaredPathNotAbsolute { .. } => "declared-path-not-absolute",
            FleetError::WorkhomeNotAbsolute { .. } => "workhome-not-absolute",
            FleetError::ArgumentTooLong { .. } => "argument-too-long",
            FleetError::Transport { source, .. } => source.name(),
            FleetError::Timeout { .. } => "machine-timeout",
            FleetError::MeasureOutput { .. } => "measure-output-unreadable",
            FleetError::ProbeUnavailable { .. } => "capability-probe-unavailable",
            FleetError::Interrupted { .. } => "interrupted",
        }
    }
    fn exit(&self) -> Exit {
        match self {
            // An exposed ssh config or known_hosts is the operator's to
            // fix before anything runs: a refusal, as everywhere else.
            FleetError::Transport { source, .. }
                if matches!(
                    **source,
                    crate::transport::TransportError::ConfigExposed { .. }
                ) =>
            {
                Exit::Refusal
            }
            FleetError::Transport { .. }
            | FleetError::Timeout { .. }
            | FleetError::MeasureOutput { .. }
            | FleetError::Interrupted { .. } => Exit::MeasurementFailed,
            _ => Exit::Refusal,
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        Some(self.into())
    }
}

/// The record's `failure` word of a fleet error met after admission: its
/// transport's kind, a timeout, an interruption — otherwise its own name.
impl From<&FleetError> for crate::outcome::FailureKind {
    fn from(e: &FleetError) -> crate::outcome::FailureKind {
        use crate::outcome::FailureKind;
        use FleetError as F;
        match e {
            F::Transport { source, .. } => (&**source).into(),
            F::Timeout { .. } => FailureKind::MachineTimeout,
            F::Interrupted { .. } => FailureKind::Interrupted,
            other => FailureKind::Other(std::borrow::Cow::Borrowed(other.name())),
        }
    }
}

/// The freshness window: `[fleet] freshness` in config-v1, default 24 hours.
pub fn freshness_window(home: &crate::home::Home) -> crate::error::Result<Duration> {
    Ok(crate::config::Config::load(home)?
        .fleet_freshness
        .unwrap_or(DEFAULT_FRESHNESS))
}

/// The default freshness window: 24 hours.
pub const DEFAULT_FRESHNESS: Duration = Duration::from_secs(24 * 3600);
