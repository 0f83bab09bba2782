//! The fleet's Docker probes: docker-oci (does this machine really run the
//! pinned saphan-probe image?), sandbox-userns (can its user create an
//! unprivileged user namespace?), and the container-class gate dispatch
//! calls before it spawns anything — each reading and writing the fleet's
//! ledger. They reach the engine through [`crate::docker`], which knows
//! nothing of the fleet. DESIGN §6; the operator's guide is
//! `docs/docker.md`.
//!
//! - [`oci`]: the docker-oci probe run.
//! - [`userns`]: the sandbox-userns probe.
//! - [`gate`]: the container-class check, [`require_container_capability`].
//!
//! A probe never installs, enables, pulls or loads anything: it measures and
//! names what is missing, with the command that would fix it.

pub mod gate;
pub mod oci;
pub mod userns;

use crate::catalog::Capability;
use crate::docker::{DOCKER_OCI, SANDBOX_USERNS, pin_of, socket_of};
use crate::fleet::finding::{Finding, ProbeRequest};
use crate::fleet::ledger::{MachineFacts, Outcome};
use crate::transport::Transport;

pub use gate::require_container_capability;
pub use oci::{DockerProbeSettings, probe_docker_oci};
pub use userns::{UsernsProbeSettings, probe_sandbox_userns};

/// The machine's measured platform, as far as remedies may use it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Platform {
    /// `uname -s` as measured (`Linux`, `Darwin`); `None` when unmeasured.
    pub os: Option<String>,
    /// Platform ids, most specific first (`["ubuntu", "debian"]`, `["darwin"]`).
    pub ids: Vec<String>,
    /// The user saphan runs as on the machine, when known (for "grant socket access").
    pub user: Option<String>,
}

/// Why a docker probe (docker-oci, the userns checks) did not find its
/// capability present: the capability row's `reason` word, spelled once
/// here. Code decides on the variant; the word is only written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No (runnable) program at the declared path: `binary-absent`.
    BinaryAbsent,
    /// The engine did not answer at its socket: `daemon-unreachable`.
    DaemonUnreachable,
    /// The pinned image is not on the engine: `probe-image-absent`.
    ProbeImageAbsent,
    /// The probe ran but printed no valid facts: `probe-output-invalid`.
    ProbeOutputInvalid,
    /// The probe could not run or finish: `probe-run-failed`.
    ProbeRunFailed,
    /// The program answered `--version` with something else:
    /// `version-output-mismatch`.
    VersionOutputMismatch,
    /// `unshare` ran but no user namespace was made: `userns-not-created`.
    UsernsNotCreated,
    /// The kernel refused an unprivileged user namespace: `userns-denied`.
    UsernsDenied,
}

impl Reason {
    const ALL: [Reason; 8] = [
        Reason::BinaryAbsent,
        Reason::DaemonUnreachable,
        Reason::ProbeImageAbsent,
        Reason::ProbeOutputInvalid,
        Reason::ProbeRunFailed,
        Reason::VersionOutputMismatch,
        Reason::UsernsNotCreated,
        Reason::UsernsDenied,
    ];

    /// The row's word for it.
    pub const fn word(self) -> &'static str {
        match self {
            Reason::BinaryAbsent => "binary-absent",
            Reason::DaemonUnreachable => "daemon-unreachable",
            Reason::ProbeImageAbsent => "probe-image-absent",
            Reason::ProbeOutputInvalid => "probe-output-invalid",
            Reason::ProbeRunFailed => "probe-run-failed",
            Reason::VersionOutputMismatch => "version-output-mismatch",
            Reason::UsernsNotCreated => "userns-not-created",
            Reason::UsernsDenied => "userns-denied",
        }
    }

    /// The reason a recorded row's word names; `None` for a word no docker
    /// probe writes (another capability's row, a newer saphan's word).
    pub fn from_word(word: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.word() == word)
    }
}

/// A finding that is not present: `outcome`, a stable `reason`, a sentence,
/// and the command for remedy line 1 (`None`: the catalog's install command
/// for the measured platform).
pub(crate) fn failed(
    outcome: Outcome,
    reason: Reason,
    detail: String,
    install: Option<String>,
) -> Finding {
    Finding {
        outcome: Some(outcome),
        reason: Some(reason.word().to_string()),
        reason_detail: Some(detail),
        install,
        ..Default::default()
    }
}

impl Platform {
    /// The platform as the machine's latest facts row proves it (`None`:
    /// never measured — remedies then say NO INSTALL COMMAND).
    pub fn from_facts(facts: Option<&MachineFacts>) -> Platform {
        match facts {
            None => Platform::default(),
            Some(f) => Platform {
                os: Some(f.os.clone()),
                ids: f.platform_ids(),
                user: None,
            },
        }
    }
    pub(crate) fn is_darwin(&self) -> bool {
        self.os.as_deref() == Some("Darwin") || self.ids.iter().any(|i| i == "darwin")
    }
    pub(crate) fn is_linux(&self) -> bool {
        self.os.as_deref() == Some("Linux")
    }
}

/// Checks made once, before any machine is contacted, for a capability this
/// module probes (fleet's `precheck_other` calls it). docker-oci refuses here
/// while the pin is the zero digest, a tag or malformed — so nothing is
/// measured and no ledger line is written.
///
/// Errors: `docker-probe-image-unpinned`, `docker-probe-image-tag`,
/// `docker-probe-image-pin-malformed`; `capability-probe-unavailable` for a
/// capability of another kind.
pub fn precheck(capability: &str, entry: &Capability, origin: &str) -> crate::error::Result<()> {
    match capability {
        DOCKER_OCI => {
            pin_of(entry, origin)?;
            Ok(())
        }
        SANDBOX_USERNS => Ok(()),
        _ => Err(super::FleetError::ProbeUnavailable {
            capability: capability.into(),
            kind: entry.kind.clone(),
        }
        .into()),
    }
}

/// Probe docker-oci or sandbox-userns on one connected machine (fleet's
/// `probe_other` calls it; the ceremony adds facts, time, catalog digest and
/// the two remedy lines, then signs and appends the row).
///
/// Errors: those of [`precheck`] (so nothing is recorded).
pub async fn probe(req: &ProbeRequest<'_>, t: &Transport) -> crate::error::Result<Finding> {
    let platform = Platform::from_facts(req.facts);
    let install = req
        .facts
        .map(MachineFacts::platform_ids)
        .and_then(|ids| req.entry.install_for(&ids).map(str::to_string));
    match req.capability {
        DOCKER_OCI => {
            let s = DockerProbeSettings {
                declared_path: req.inputs.declared_path.clone(),
                socket: socket_of(req.entry),
                pin: pin_of(req.entry, "in use")?,
                platform,
                budget: req.timeout,
            };
            Ok(probe_docker_oci(t, &s, install.as_deref()).await)
        }
        SANDBOX_USERNS => {
            let s = UsernsProbeSettings {
                declared_path: req.inputs.declared_path.clone(),
                platform,
                budget: req.timeout,
                version_pattern: req.entry.version_pattern.clone(),
            };
            Ok(probe_sandbox_userns(t, &s, install.as_deref()).await)
        }
        other => {
            precheck(other, req.entry, "in use")?;
            unreachable!("precheck refuses every other capability")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn every_reason_reads_back_from_its_word_and_no_two_share_one() {
        let words: std::collections::BTreeSet<&str> =
            Reason::ALL.iter().map(|r| r.word()).collect();
        assert_eq!(words.len(), Reason::ALL.len());
        for r in Reason::ALL {
            assert_eq!(Reason::from_word(r.word()), Some(r));
        }
        assert_eq!(Reason::from_word("go-absent"), None);
    }
}
