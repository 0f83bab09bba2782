//! Why a measurement failed, as the errors that end one say it:
//! [`FailureKind::of`] an error, and the kinds of this module's own
//! [`super::ReportError`] and of the transport's errors. The kinds
//! themselves are [`crate::outcome::FailureKind`]'s, below every module
//! whose errors they name.

use super::FailureKind;

impl FailureKind {
    /// The kind of an error met after admission: the kind the error says
    /// of itself ([`crate::error::Refusal::failure_kind`]: transport, fleet, provision,
    /// report, I/O and record errors — found by the error's type, never by
    /// its name); otherwise [`FailureKind::Other`] with the refusal's name.
    pub fn of(e: &crate::error::Error) -> FailureKind {
        e.inner()
            .failure_kind()
            .unwrap_or_else(|| FailureKind::Other(std::borrow::Cow::Borrowed(e.name())))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

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
