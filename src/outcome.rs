//! The outcome of a measurement, below everything that produces or reads
//! one: the [`Verdict`] and, for a failed measurement, why —
//! [`FailureKind`], the record's `failure` word.
//!
//! Every word a failed measurement can carry is spelled once, here; the
//! record, the report's measurement and the dispatch faults carry the
//! typed kind, and nothing recovers a kind from a note's text. A note
//! still opens with the kind's word (`timeout: …`), for a person reading
//! it. An error says its own kind ([`crate::error::Refusal::failure_kind`]),
//! so nothing here needs to know the modules whose errors become failures.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// Process exit codes (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success, or a green verdict.
    Ok = 0,
    /// A red verdict.
    Red = 1,
    /// A refusal or a usage error: nothing was measured.
    Refusal = 2,
    /// A measurement was attempted and failed (timeout, crash, broken report, lost machine).
    MeasurementFailed = 3,
}

/// The verdict of one measurement (record field `verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every named test passed and the process agreed.
    Green,
    /// A failure was measured.
    Red,
    /// No honest verdict could be derived (timeout, crash, broken report).
    MeasurementFailed,
}

impl Verdict {
    /// The record spelling (`green`, `red`, `measurement-failed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Green => "green",
            Verdict::Red => "red",
            Verdict::MeasurementFailed => "measurement-failed",
        }
    }
    /// The process exit code a verb uses for this verdict (DESIGN §4).
    pub fn exit(&self) -> Exit {
        match self {
            Verdict::Green => Exit::Ok,
            Verdict::Red => Exit::Red,
            Verdict::MeasurementFailed => Exit::MeasurementFailed,
        }
    }
}

macro_rules! kinds {
    ($( $(#[$doc:meta])* $v:ident => $w:literal, )*) => {
        /// Why a measurement failed (record field `failure`), serialized as
        /// its stable kebab-case word (`timeout`, `connection-lost` …).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum FailureKind {
            $( $(#[$doc])* $v, )*
            /// A word this build has no variant for: the name of a refusal
            /// met on a machine after admission (`provision-source-missing`,
            /// `io` …, see `report::FailureKind::of`), or a word read back from a
            /// record another version wrote.
            Other(Cow<'static, str>),
        }

        impl FailureKind {
            /// Every kind except [`FailureKind::Other`], in declaration order.
            pub const KNOWN: &'static [FailureKind] = &[$(FailureKind::$v),*];

            /// The stable word (`timeout`, `report-no-match`, …).
            pub fn as_str(&self) -> &str {
                match self {
                    $(FailureKind::$v => $w,)*
                    FailureKind::Other(w) => w,
                }
            }

            /// The kind a word names (deserialization of a record): a known
            /// word is its variant, any other is [`FailureKind::Other`].
            pub fn parse(word: &str) -> FailureKind {
                match word {
                    $($w => FailureKind::$v,)*
                    w => FailureKind::Other(Cow::Owned(w.to_string())),
                }
            }
        }
    };
}

kinds! {
    // The suite's run.
    /// The suite ran past its budget; its process group was killed.
    Timeout => "timeout",
    /// Ctrl-C, SIGTERM or SIGHUP stopped the attempt.
    Interrupted => "interrupted",
    /// The suite could not be started, was killed by a signal, or exited
    /// non-zero with nothing named.
    Crash => "crash",
    /// The suite's stdout could not be kept whole (a file that could not be
    /// written): none of it was judged
    /// ([`crate::exec::Termination::OutputLost`]).
    OutputLost => "output-lost",
    /// A gitlink commit no local store holds: the SHA was not measured.
    SubmoduleMissing => "submodule-missing",
    /// The scratch tree, once checked out, was not exactly the commit
    /// (`crate::worktree::Scratch::verify_tree`: another HEAD, a changed,
    /// missing or extra file): the suite did not run.
    TreeMismatch => "tree-mismatch",
    /// The suite itself moved `refs/saphan/verified` (its scratch tree
    /// shares the repository's refs): the pointer was put back, and the
    /// attempt is no measurement.
    SuiteMovedPointer => "suite-moved-pointer",
    /// The suite's program, which a fresh capability row of the machine
    /// vouched for (`present`), could not be started because nothing is at
    /// its path any more (deleted, unmounted): the machine failed the
    /// attempt, not the suite; its row is superseded in the ledger until it
    /// is probed again.
    ProgramVanished => "program-vanished",
    /// The seal was required (`--seal required`) and bwrap could not set
    /// up its namespaces on the machine: the suite did not run
    /// ([`crate::seal`]).
    SealFailed => "seal-failed",
    // The evidence (docs/reports.md).
    /// A report counting 0 tests that names failures, with exit 0.
    Contradictory => "contradictory",
    /// `<testsuite>` attributes declare failures no `<testcase>` names.
    UnnamedFailures => "unnamed-failures",
    /// A go test -json stream that ends with tests or packages unfinished.
    StreamEndedEarly => "stream-ended-early",
    /// A test that started and never ended inside a package that ended.
    UnfinishedTests => "unfinished-tests",
    /// A go package that ended `ok` without running its tests (its
    /// `TestMain` returned or exited before `m.Run()`).
    TestsNeverRan => "tests-never-ran",
    /// verify-affected: a selected package the stream never ended.
    UnmeasuredPackages => "unmeasured-packages",
    /// `certify --split`: the shards' package-level terminal events do not
    /// equal the listed package set, each package once.
    ShardCoverageIncomplete => "shard-coverage-incomplete",
    /// `report::ReportError::NoMatch`.
    ReportNoMatch => "report-no-match",
    /// `report::ReportError::BadPattern` and `report::ReportError::NoPattern`.
    ReportPathInvalid => "report-path-invalid",
    /// `report::ReportError::SymlinkEscape`.
    ReportSymlinkEscape => "report-symlink-escape",
    /// `report::ReportError::NotRegular`.
    ReportNotRegular => "report-not-regular",
    /// `report::ReportError::Unreadable`.
    ReportUnreadable => "report-unreadable",
    /// `report::ReportError::Empty`.
    ReportEmpty => "report-empty",
    /// `report::ReportError::Malformed`.
    ReportMalformed => "report-malformed",
    /// `report::ReportError::NoTestsuite`.
    ReportNoTestsuite => "report-no-testsuite",
    /// `report::ReportError::NoEvents`.
    ReportNoEvents => "report-no-events",
    /// `report::ReportError::ListingUnbounded`.
    ReportListingUnbounded => "report-listing-unbounded",
    // Container class.
    /// The container engine refused, lost or could not remove the run.
    Engine => "engine",
    // A machine of the fleet (docs/dispatch.md, "Faults").
    /// The machine could not be reached.
    HostUnreachable => "host-unreachable",
    /// The connection dropped mid-attempt.
    ConnectionLost => "connection-lost",
    /// A remote command ran past its budget.
    RemoteTimeout => "remote-timeout",
    /// Connecting ran past its budget.
    MachineTimeout => "machine-timeout",
    /// The mirror, bundle or fetch failed on the machine.
    ShipFailed => "ship-failed",
    /// Another run held the repository's lock on the machine too long.
    LockTimeout => "lock-timeout",
    /// The lock command itself failed on the machine.
    LockFailed => "lock-failed",
    /// The scratch tree could not be made from the mirror.
    MaterializeFailed => "materialize-failed",
    /// The local directory for collected files could not be made.
    CollectFailed => "collect-failed",
    /// Placing a provision's bytes on the machine failed (not a dest conflict).
    ProvisionFailed => "provision-failed",
    /// A provision's source vanished after the preflight.
    ProvisionSourceMissing => "provision-source-missing",
    /// A provision's source became unreadable after the preflight.
    ProvisionSourceUnreadable => "provision-source-unreadable",
    /// A provision's source became empty after the preflight.
    ProvisionSourceEmpty => "provision-source-empty",
    /// A provision's dest is a path the tree carries (a refusal wherever it
    /// is met; named here so every provision error has its kind).
    ProvisionDestConflict => "provision-dest-conflict",
    /// One of saphan's own files could not be read or written.
    Io => "io",
    // Transport errors met after admission (their refusal names).
    /// A program could not be started (`transport::TransportError::Spawn`).
    Spawn => "spawn",
    /// A file copy failed.
    CopyFailed => "copy",
    /// The SSH config could not be resolved.
    SshConfig => "ssh-config",
    /// saphan's home is readable by others.
    HomeExposed => "saphan-home-exposed",
    /// The machine's host key is not known.
    HostKeyUnknown => "host-key-unknown",
    /// The machine's host key changed.
    HostKeyChanged => "host-key-changed",
    /// The machine's host key is revoked.
    HostKeyRevoked => "host-key-revoked",
    /// A known_hosts file could not be read.
    KnownHostsUnreadable => "known-hosts-unreadable",
    /// SSH authentication failed.
    AuthFailed => "auth-failed",
    /// The SSH handshake failed.
    SshHandshake => "ssh-handshake",
    /// A Unix socket could not be reached.
    UnixSocketUnreachable => "unix-socket-unreachable",
    /// An argument cannot be passed to a remote command.
    BadArgument => "bad-argument",
    /// An argument is longer than a remote command accepts.
    ArgumentTooLong => "argument-too-long",
    /// A transport was asked what it cannot do (a borrowed Slurm node
    /// forwards no socket).
    TransportUnsupported => "transport-unsupported",
    // A node borrowed from a Slurm cluster (`crate::slurm`).
    /// A job step on a borrowed node ended without the supervisor's report
    /// (the node failed, the job was cancelled, expired or timed out, the
    /// step could not be created or launched).
    SlurmStepFailed => "slurm-step-failed",
    /// The cluster could not be asked (no Slurm client here, no config).
    SlurmUnavailable => "slurm-unavailable",
    /// The cluster refused or did not grant the allocation.
    SlurmAllocationFailed => "slurm-allocation-failed",
}

impl FailureKind {
    /// True for a failure of the infrastructure rather than of the suite:
    /// the machine or its engine failed the attempt, so the same work could
    /// succeed elsewhere (the failover set of issue 19: `host-unreachable`,
    /// `connection-lost`, `ship-failed`, `lock-timeout`,
    /// `materialize-failed`, `engine`, `seal-failed`, `program-vanished`;
    /// and issue 39's `slurm-step-failed`: Slurm took the node or the
    /// allocation away).
    /// A red is never infrastructure, nor
    /// is a `timeout`. This is the one place that says so.
    pub fn is_infrastructure(&self) -> bool {
        matches!(
            self,
            FailureKind::HostUnreachable
                | FailureKind::ConnectionLost
                | FailureKind::ShipFailed
                | FailureKind::LockTimeout
                | FailureKind::MaterializeFailed
                | FailureKind::Engine
                | FailureKind::SealFailed
                | FailureKind::ProgramVanished
                | FailureKind::SlurmStepFailed
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Cow::<'de, str>::deserialize(d)?;
        Ok(FailureKind::parse(&w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_word_reads_back_as_its_kind() {
        for k in FailureKind::KNOWN {
            let json = serde_json::to_string(k).unwrap();
            let back: FailureKind = serde_json::from_str(&json).unwrap();
            assert_eq!(&back, k, "{json}");
            assert!(
                !matches!(back, FailureKind::Other(_)),
                "{json} must be a variant"
            );
        }
        let words: std::collections::BTreeSet<&str> =
            FailureKind::KNOWN.iter().map(FailureKind::as_str).collect();
        assert_eq!(
            words.len(),
            FailureKind::KNOWN.len(),
            "a word spelled twice"
        );
    }

    #[test]
    fn an_unknown_word_is_kept_verbatim() {
        let k: FailureKind = serde_json::from_str("\"a-future-word\"").unwrap();
        assert_eq!(k, FailureKind::Other(Cow::Borrowed("a-future-word")));
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"a-future-word\"");
        assert!(!k.is_infrastructure());
    }

    #[test]
    fn the_failover_set_is_the_infrastructure_set() {
        let infra: Vec<&str> = FailureKind::KNOWN
            .iter()
            .filter(|k| k.is_infrastructure())
            .map(FailureKind::as_str)
            .collect();
        assert_eq!(
            infra,
            [
                "program-vanished",
                "seal-failed",
                "engine",
                "host-unreachable",
                "connection-lost",
                "ship-failed",
                "lock-timeout",
                "materialize-failed",
                "slurm-step-failed"
            ]
        );
    }
}
