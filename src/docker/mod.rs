//! Docker on a machine: the docker-oci probe (does this machine really run
//! the pinned saphan-probe image?), the sandbox-userns probe (can its user
//! create an unprivileged user namespace?) and the container-class gate
//! dispatch calls before it spawns anything. DESIGN §6; the operator's guide
//! is `docs/docker.md`.
//!
//! - [`pin`]: what the catalog's `image` value says and how it is checked.
//! - [`output`]: the probe image's output contract (`images/probe/src/main.rs`).
//! - [`engine`]: bollard over the machine's Docker socket (local, or forwarded
//!   over the machine's SSH connection) and the probe run itself.
//! - [`userns`]: the sandbox-userns probe.
//! - [`gate`]: the container-class check, `require_container_capability`.
//! - [`container`]: the suite image pin and the container-class suite run.
//! - [`toolchain`]: the suite image's Go toolchain, filled once into engine
//!   volumes and mounted read-only in every suite container of the image.
//!
//! A probe never installs, enables, pulls or loads anything: it measures and
//! names what is missing, with the command that would fix it.

pub mod container;
pub mod engine;
pub mod gate;
pub mod output;
pub mod pin;
pub mod probe_image;
pub mod toolchain;
pub mod userns;

use crate::catalog::Capability;
use crate::error::Refusal;
use crate::fleet::finding::{Finding, ProbeRequest};
use crate::fleet::ledger::{MachineFacts, Outcome};
use crate::transport::Transport;

pub use engine::{DockerProbeSettings, probe_docker_oci};
pub use gate::require_container_capability;
pub use pin::Pin;
pub use userns::{UsernsProbeSettings, probe_sandbox_userns};

/// The catalog row name of the Docker probe.
pub const DOCKER_OCI: &str = "docker-oci";
/// The catalog row name of the user-namespace probe.
pub const SANDBOX_USERNS: &str = "sandbox-userns";
/// The Docker socket used when neither the machine nor the catalog names one.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Refusals of the Docker ceremonies. A refusal measured nothing and wrote
/// nothing; the outcomes of a probe that did run are [`Finding`]s instead.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// The catalog's docker-oci pin is the deliberate zero digest.
    #[error(
        "catalog {origin} pins the saphan-probe image to the zero digest `{image}`, so there is no image to trust; nothing was measured or recorded — build the image (images/probe/build), put its image ID or registry digest into a copy of the catalog and pass it with --catalog (docs/docker.md, \"Pinning\")"
    )]
    Unpinned { origin: String, image: String },
    /// The pin names a tag, which can move; only digests are accepted.
    #[error(
        "catalog {origin} names the probe image by the tag `{image}`; a tag can point at different bytes tomorrow, so it is never accepted — pin `sha256:<image id>` (local) or `NAME@sha256:<registry digest>` instead (docs/docker.md, \"Pinning\")"
    )]
    PinIsTag { origin: String, image: String },
    /// The pin is neither form.
    #[error(
        "catalog {origin}: the docker-oci `image` value `{image}` is not a pin: {why} — write `sha256:<64 lowercase hex>` (a local image ID) or `NAME@sha256:<64 lowercase hex>` (a registry digest)"
    )]
    PinMalformed {
        origin: String,
        image: String,
        why: String,
    },
    /// The machine has no fresh, present docker-oci row: container-class
    /// work may not be dispatched to it.
    #[error(
        "machine `{machine}` has no fresh docker-oci capability ({why}) — container-class work needs proof that it runs the pinned saphan-probe image; run:\n  {commands}"
    )]
    ContainerCapabilityAbsent {
        machine: String,
        why: String,
        /// The remedy commands, joined by a newline and two spaces.
        commands: String,
    },
}

impl Refusal for DockerError {
    fn name(&self) -> &'static str {
        match self {
            DockerError::Unpinned { .. } => "docker-probe-image-unpinned",
            DockerError::PinIsTag { .. } => "docker-probe-image-tag",
            DockerError::PinMalformed { .. } => "docker-probe-image-pin-malformed",
            DockerError::ContainerCapabilityAbsent { .. } => "container-docker-capability-absent",
        }
    }
}

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
        _ => Err(crate::fleet::FleetError::ProbeUnavailable {
            capability: capability.into(),
            kind: entry.kind.clone(),
        }
        .into()),
    }
}

/// The pin of a docker-oci catalog entry.
pub fn pin_of(entry: &Capability, origin: &str) -> Result<Pin, DockerError> {
    let image = entry
        .extra
        .get("image")
        .and_then(|v| v.as_str())
        .ok_or_else(|| DockerError::PinMalformed {
            origin: origin.to_string(),
            image: String::new(),
            why: "the docker-oci row has no `image` string".into(),
        })?;
    Pin::parse(image, origin)
}

/// The Docker socket a docker-oci catalog entry names (`socket`), else
/// [`DEFAULT_SOCKET`].
pub fn socket_of(entry: &Capability) -> String {
    entry
        .extra
        .get("socket")
        .and_then(|v| v.as_str())
        .unwrap_or(DEFAULT_SOCKET)
        .to_string()
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
