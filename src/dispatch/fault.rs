//! What a dispatched run can go wrong with: the refusals raised before
//! anything is shipped ([`DispatchError`], each with its stable name) and the
//! typed fault of one machine's attempt after admission ([`DispatchFault`],
//! whose [`FailureKind`] is the record's `failure`).

use crate::error::Refusal;
use crate::report::FailureKind;
use crate::transport::TransportError;

/// The refusal name of a machine whose rows are only stale
/// ([`DispatchError::ToolchainStale`]).
pub const TOOLCHAIN_STALE: &str = "verification-toolchain-stale";

/// Refusals of a dispatched run (nothing was shipped).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The machine is not admitted for the suite's program.
    #[error(
        "the suite's program `{program}` is not admitted on machine {machine} ({catalog_row}): {why} — nothing was shipped; remedy:\n  {}",
        remedy.join("\n  ")
    )]
    ToolchainAbsent {
        machine: String,
        program: String,
        catalog_row: String,
        why: String,
        remedy: Vec<String>,
    },
    /// The machine was measured and its program probed `present`, but a
    /// row admission needs is older than the freshness window (or was
    /// measured against another catalog entry): nothing says it is
    /// missing, so the remedy is `machine remeasure`, never an install.
    #[error(
        "the suite's program `{program}` on machine {machine} ({catalog_row}) was measured, but not recently enough to be admitted: {why} — nothing was shipped; re-measure it (or certify with --remeasure); remedy:\n  {}",
        remedy.join("\n  ")
    )]
    ToolchainStale {
        machine: String,
        program: String,
        catalog_row: String,
        why: String,
        /// `saphan machine remeasure --machine <id>`.
        remedy: Vec<String>,
        /// `saphan` as the remedy spells it (`SAPHAN_HOME=… saphan
        /// --catalog …`), so a refusal of several stale machines prints
        /// one remeasure line naming them all.
        saphan: String,
    },
    /// A program no catalog row maps is not on the machine.
    #[error(
        "the suite's program `{program}` is not on machine {machine} (no catalog row maps this program; resolved there: {detail}) — nothing was shipped; install it there, or declare the suite with a program the machine has"
    )]
    ProgramAbsent {
        machine: String,
        program: String,
        detail: String,
    },
    /// A provision could not be placed in the shipped tree.
    #[error(
        "on machine {machine}: provision {detail} — nothing was measured; change the provision's dest"
    )]
    ProvisionConflict { machine: String, detail: String },
    /// The verify-affected adapter needs a saphan binary the machine can run.
    #[error(
        "machine {machine} measured {os}/{arch}, but this saphan is built for {local_os}/{local_arch}, so it cannot be shipped there — install saphan {version} for {os}/{arch} on the machine and declare its path as verify.affected's adapter, or dispatch to a machine of this platform"
    )]
    PlatformMismatch {
        machine: String,
        os: String,
        arch: String,
        local_os: String,
        local_arch: String,
        version: String,
    },
    /// `--machine` names no machine, or mixes `local` with fleet machines.
    #[error("--machine `{given}` {why} — {fix}")]
    MachineList {
        given: String,
        why: &'static str,
        fix: String,
    },
}

impl Refusal for DispatchError {
    fn name(&self) -> &'static str {
        match self {
            DispatchError::ToolchainAbsent { .. } | DispatchError::ProgramAbsent { .. } => {
                "verification-toolchain-absent"
            }
            DispatchError::ToolchainStale { .. } => TOOLCHAIN_STALE,
            DispatchError::ProvisionConflict { .. } => "provision-dest-conflict",
            DispatchError::PlatformMismatch { .. } => "saphan-binary-unavailable",
            DispatchError::MachineList { .. } => "machine-list-invalid",
        }
    }
}

/// Why a machine's attempt failed after admission: its kind
/// (`host-unreachable`, `connection-lost`, `ship-failed` …) and a sentence.
#[derive(Debug, Clone)]
pub struct DispatchFault {
    /// Why (the record's `failure`).
    pub kind: FailureKind,
    /// What happened.
    pub detail: String,
}

impl DispatchFault {
    /// A fault of `kind`. The detail becomes one line (a quoted remote
    /// stderr's newlines and runs of blanks fold to single spaces), so the
    /// record's note and the summary line stay one line each.
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> DispatchFault {
        DispatchFault {
            kind,
            detail: detail
                .into()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
    /// A transport error as a fault (its own kind).
    pub fn transport(e: TransportError) -> DispatchFault {
        DispatchFault {
            kind: FailureKind::from(&e),
            detail: e.to_string(),
        }
    }
}
