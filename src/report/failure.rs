//! Why a measurement failed: [`FailureKind`], the record's `failure` word.
//!
//! Every word a failed measurement can carry is spelled once, here; the
//! record, the report's [`super::Measurement`] and the dispatch faults carry
//! the typed kind, and nothing recovers a kind from a note's text. A note
//! still opens with the kind's word (`timeout: …`), for a person reading it.

use crate::error::Refusal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

macro_rules! kinds {
    ($( $(#[$doc:meta])* $v:ident => $w:literal, )*) => {
        /// Why a measurement failed (record field `failure`), serialized as
        /// its stable kebab-case word (`timeout`, `connection-lost` …).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum FailureKind {
            $( $(#[$doc])* $v, )*
            /// A word this build has no variant for: the name of a refusal
            /// met on a machine after admission (`provision-source-missing`,
            /// `io` …, see [`FailureKind::of`]), or a word read back from a
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
    /// [`super::ReportError::NoMatch`].
    ReportNoMatch => "report-no-match",
    /// [`super::ReportError::BadPattern`] and [`super::ReportError::NoPattern`].
    ReportPathInvalid => "report-path-invalid",
    /// [`super::ReportError::SymlinkEscape`].
    ReportSymlinkEscape => "report-symlink-escape",
    /// [`super::ReportError::NotRegular`].
    ReportNotRegular => "report-not-regular",
    /// [`super::ReportError::Unreadable`].
    ReportUnreadable => "report-unreadable",
    /// [`super::ReportError::Empty`].
    ReportEmpty => "report-empty",
    /// [`super::ReportError::Malformed`].
    ReportMalformed => "report-malformed",
    /// [`super::ReportError::NoTestsuite`].
    ReportNoTestsuite => "report-no-testsuite",
    /// [`super::ReportError::NoEvents`].
    ReportNoEvents => "report-no-events",
    /// [`super::ReportError::ListingUnbounded`].
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
    /// A program could not be started ([`crate::transport::TransportError::Spawn`]).
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
}

impl FailureKind {
    /// True for a failure of the infrastructure rather than of the suite:
    /// the machine or its engine failed the attempt, so the same work could
    /// succeed elsewhere (the failover set of issue 19: `host-unreachable`,
    /// `connection-lost`, `ship-failed`, `lock-timeout`,
    /// `materialize-failed`, `engine`, `seal-failed`, `program-vanished`).
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
        )
    }

    /// The kind of an error met after admission: its module's typed kind
    /// where the error is a transport, fleet, provision, report, I/O or
    /// record error (found by the error's type, never by its name);
    /// otherwise [`FailureKind::Other`] with the refusal's name.
    pub fn of(e: &crate::error::Error) -> FailureKind {
        if let Some(e) = e.downcast_ref::<crate::transport::TransportError>() {
            return e.into();
        }
        if let Some(e) = e.downcast_ref::<crate::fleet::FleetError>() {
            return e.into();
        }
        if let Some(e) = e.downcast_ref::<crate::provision::ProvisionError>() {
            return e.into();
        }
        if let Some(e) = e.downcast_ref::<super::ReportError>() {
            return e.into();
        }
        if let Some(e) = e.downcast_ref::<crate::error::IoError>() {
            return match e {
                crate::error::IoError::Io { .. } | crate::error::IoError::Symlink { .. } => {
                    FailureKind::Io
                }
                crate::error::IoError::Spawn { .. } => FailureKind::Spawn,
            };
        }
        if let Some(crate::record::RecordError::Interrupted { .. }) = e.downcast_ref() {
            return FailureKind::Interrupted;
        }
        FailureKind::Other(Cow::Borrowed(e.name()))
    }
}

impl From<&super::ReportError> for FailureKind {
    fn from(e: &super::ReportError) -> FailureKind {
        use super::ReportError as R;
        match e {
            R::NoMatch { .. } => FailureKind::ReportNoMatch,
            R::BadPattern { .. } | R::NoPattern { .. } => FailureKind::ReportPathInvalid,
            R::SymlinkEscape { .. } => FailureKind::ReportSymlinkEscape,
            R::NotRegular { .. } => FailureKind::ReportNotRegular,
            R::Unreadable { .. } => FailureKind::ReportUnreadable,
            R::Empty { .. } => FailureKind::ReportEmpty,
            R::Malformed { .. } => FailureKind::ReportMalformed,
            R::NoTestsuite { .. } => FailureKind::ReportNoTestsuite,
            R::NoEvents { .. } => FailureKind::ReportNoEvents,
            R::ListingUnbounded { .. } => FailureKind::ReportListingUnbounded,
        }
    }
}

impl From<&crate::transport::TransportError> for FailureKind {
    fn from(e: &crate::transport::TransportError) -> FailureKind {
        use crate::transport::TransportError as T;
        match e {
            T::Spawn { .. } | T::RemoteSpawn { .. } => FailureKind::Spawn,
            T::Copy { .. } | T::RemoteCopy { .. } => FailureKind::CopyFailed,
            T::SshConfig { .. } => FailureKind::SshConfig,
            T::ConfigExposed { .. } => FailureKind::HomeExposed,
            T::HostUnreachable { .. } => FailureKind::HostUnreachable,
            T::HostKeyUnknown { .. } => FailureKind::HostKeyUnknown,
            T::HostKeyChanged { .. } => FailureKind::HostKeyChanged,
            T::HostKeyRevoked { .. } => FailureKind::HostKeyRevoked,
            T::KnownHostsUnreadable { .. } => FailureKind::KnownHostsUnreadable,
            T::AuthFailed { .. } => FailureKind::AuthFailed,
            T::Handshake { .. } => FailureKind::SshHandshake,
            T::ConnectionLost { .. } => FailureKind::ConnectionLost,
            T::Engine { .. } => FailureKind::Engine,
            T::RemoteTimeout { .. } => FailureKind::RemoteTimeout,
            T::UnixSocket { .. } => FailureKind::UnixSocketUnreachable,
            T::BadArgument { .. } => FailureKind::BadArgument,
            T::ArgumentTooLong { .. } => FailureKind::ArgumentTooLong,
        }
    }
}

impl From<&crate::fleet::FleetError> for FailureKind {
    fn from(e: &crate::fleet::FleetError) -> FailureKind {
        use crate::fleet::FleetError as F;
        match e {
            F::Transport { source, .. } => (&**source).into(),
            F::Timeout { .. } => FailureKind::MachineTimeout,
            F::Interrupted { .. } => FailureKind::Interrupted,
            other => FailureKind::Other(Cow::Borrowed(other.name())),
        }
    }
}

impl From<&crate::provision::ProvisionError> for FailureKind {
    fn from(e: &crate::provision::ProvisionError) -> FailureKind {
        use crate::provision::ProvisionError as P;
        match e {
            P::Place { .. } => FailureKind::ProvisionFailed,
            P::SourceMissing { .. } => FailureKind::ProvisionSourceMissing,
            P::SourceUnreadable { .. } => FailureKind::ProvisionSourceUnreadable,
            P::SourceEmpty { .. } => FailureKind::ProvisionSourceEmpty,
            P::DestConflict { .. } => FailureKind::ProvisionDestConflict,
        }
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
                "materialize-failed"
            ]
        );
    }

    /// A kind taken from an error is spelled as the error's refusal name:
    /// one word per failure, whichever way it is reached.
    #[test]
    fn an_error_and_its_kind_have_one_word() {
        use super::super::ReportError as R;
        let f = || "f".to_string();
        for e in [
            R::NoMatch {
                pattern: f(),
                key: f(),
            },
            R::BadPattern {
                pattern: f(),
                why: f(),
            },
            R::NoPattern { key: f() },
            R::SymlinkEscape {
                file: f(),
                target: f().into(),
            },
            R::NotRegular {
                file: f(),
                kind: "a FIFO",
            },
            R::Unreadable {
                file: f(),
                source: std::io::Error::other("x"),
            },
            R::Empty { file: f() },
            R::Malformed {
                file: f(),
                line: 1,
                why: f(),
            },
            R::NoTestsuite { file: f() },
            R::NoEvents {
                file: f(),
                hint: f(),
                empty: false,
                remedy: f(),
            },
        ] {
            assert_eq!(FailureKind::from(&e).as_str(), e.name());
            let boxed: crate::error::Error = e.into();
            assert!(!matches!(FailureKind::of(&boxed), FailureKind::Other(_)));
        }
        use crate::provision::ProvisionError as P;
        for e in [
            P::SourceMissing {
                alias: f(),
                source_path: f().into(),
            },
            P::SourceUnreadable {
                alias: f(),
                source_path: f().into(),
                detail: f(),
            },
            P::SourceEmpty {
                alias: f(),
                source_path: f().into(),
            },
            P::DestConflict {
                alias: f(),
                dest: f(),
                why: f(),
            },
            P::Place {
                alias: f(),
                dest: f(),
                detail: f(),
            },
        ] {
            assert_eq!(FailureKind::from(&e).as_str(), e.name());
        }
        use crate::transport::TransportError as T;
        let io = || std::io::Error::other("x");
        let d = std::time::Duration::ZERO;
        for e in [
            T::Spawn {
                program: f(),
                source: io(),
            },
            T::Copy {
                what: f(),
                source: io(),
            },
            T::SshConfig {
                alias: f(),
                file: f().into(),
                detail: f(),
            },
            T::ConfigExposed {
                path: f().into(),
                detail: f(),
                why: f(),
                fix: f(),
            },
            T::HostUnreachable {
                alias: f(),
                addr: f(),
                via: None,
                cause: f(),
                elapsed: d,
                budget: d,
                config: f().into(),
            },
            T::HostKeyUnknown {
                alias: f(),
                name: f(),
                key_type: f(),
                fingerprint: f(),
                files: vec![],
                keyscan: f(),
            },
            T::HostKeyChanged {
                alias: f(),
                name: f(),
                file: f().into(),
                line: 1,
                key_type: f(),
                fingerprint: f(),
            },
            T::HostKeyRevoked {
                alias: f(),
                name: f(),
                file: f().into(),
                line: 1,
                key_type: f(),
                fingerprint: f(),
            },
            T::KnownHostsUnreadable {
                file: f().into(),
                detail: f(),
            },
            T::AuthFailed {
                alias: f(),
                user: f(),
                addr: f(),
                tried: vec![],
            },
            T::Handshake {
                alias: f(),
                addr: f(),
                detail: f(),
            },
            T::ConnectionLost {
                alias: f(),
                detail: f(),
            },
            T::Engine { detail: f() },
            T::RemoteTimeout {
                alias: f(),
                what: f(),
                budget: d,
            },
            T::RemoteCopy {
                what: f(),
                detail: f(),
            },
            T::UnixSocket {
                alias: f(),
                path: f(),
                detail: f(),
            },
            T::ArgumentTooLong { bytes: 1, max: 0 },
            T::RemoteSpawn {
                alias: f(),
                program: f(),
                detail: f(),
            },
            T::BadArgument { detail: f() },
        ] {
            assert_eq!(FailureKind::from(&e).as_str(), e.name());
            let boxed: crate::error::Error = e.into();
            assert!(!matches!(FailureKind::of(&boxed), FailureKind::Other(_)));
        }
        let io: crate::error::Error = crate::error::IoError::Io {
            action: "read",
            path: f().into(),
            source: std::io::Error::other("x"),
        }
        .into();
        assert_eq!(FailureKind::of(&io), FailureKind::Io);
        assert_eq!(FailureKind::of(&io).as_str(), io.name());
    }
}
