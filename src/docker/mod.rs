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
//! - [`gate`]: `require_container_capability`.
//!
//! A probe never installs, enables, pulls or loads anything: it measures and
//! names what is missing, with the command that would fix it.

pub mod engine;
pub mod gate;
pub mod output;
pub mod pin;
pub mod userns;

use crate::error::Refusal;

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
    #[error("the catalog ({origin}) pins the saphan-probe image to the zero digest `{image}`, so there is no image to trust; nothing was measured or recorded — build the image (images/probe/build), put its image ID or registry digest into a copy of the catalog and pass it with --catalog (docs/docker.md, \"Pinning\")")]
    Unpinned { origin: String, image: String },
    /// The pin names a tag, which can move; only digests are accepted.
    #[error("the catalog ({origin}) names the probe image by the tag `{image}`; a tag can point at different bytes tomorrow, so it is never accepted — pin `sha256:<image id>` (local) or `NAME@sha256:<registry digest>` instead (docs/docker.md, \"Pinning\")")]
    PinIsTag { origin: String, image: String },
    /// The pin is neither form.
    #[error("the catalog ({origin}) docker-oci `image` value `{image}` is not a pin: {why} — write `sha256:<64 lowercase hex>` (a local image ID) or `NAME@sha256:<64 lowercase hex>` (a registry digest)")]
    PinMalformed {
        origin: String,
        image: String,
        why: String,
    },
    /// The machine has no fresh, present docker-oci row: container-class
    /// work may not be dispatched to it.
    #[error("machine `{machine}` has no fresh docker-oci capability ({why}); container-class work needs proof that it runs the pinned saphan-probe image —\n  install: {install}\n  re-measure: {remeasure}")]
    ContainerCapabilityAbsent {
        machine: String,
        why: String,
        install: String,
        remeasure: String,
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

/// How a probe that ran ended (the ledger's present / absent / failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The capability is proven.
    Present,
    /// The declared program is not there.
    Absent,
    /// It is there but the named check failed.
    Failed,
}

/// What a docker-oci or sandbox-userns probe found: everything a capability
/// row needs besides the inputs, the machine facts and the signature.
#[derive(Debug, Clone)]
pub struct Finding {
    /// present / absent / failed.
    pub verdict: Verdict,
    /// The stable name of a failure: `binary-absent`, `daemon-unreachable`,
    /// `probe-image-absent`, `probe-output-invalid`, `probe-run-failed`,
    /// `userns-denied`; `None` when present.
    pub reason: Option<&'static str>,
    /// One sentence about `reason`.
    pub reason_detail: Option<String>,
    /// The declared program's `--version` output, when it ran.
    pub version_output: Option<String>,
    /// Evidence: for docker-oci the VM facts the image reported, the image ID
    /// run, the engine's API version; for sandbox-userns the sysctls.
    pub detail: serde_json::Map<String, serde_json::Value>,
    /// The command to run ON the machine that would fix a failure, chosen
    /// from measured facts only; `None` when present, or when the machine's
    /// facts prove no platform (then the remedy is NO INSTALL COMMAND and the
    /// measure command).
    pub fix: Option<String>,
}

impl Finding {
    /// A present finding with this evidence.
    pub fn present(
        version_output: Option<String>,
        detail: serde_json::Map<String, serde_json::Value>,
    ) -> Finding {
        Finding {
            verdict: Verdict::Present,
            reason: None,
            reason_detail: None,
            version_output,
            detail,
            fix: None,
        }
    }
    /// A failed or absent finding.
    pub fn failed(
        verdict: Verdict,
        reason: &'static str,
        reason_detail: String,
        fix: Option<String>,
    ) -> Finding {
        Finding {
            verdict,
            reason: Some(reason),
            reason_detail: Some(reason_detail),
            version_output: None,
            detail: Default::default(),
            fix,
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

impl Platform {
    fn is_darwin(&self) -> bool {
        self.os.as_deref() == Some("Darwin") || self.ids.iter().any(|i| i == "darwin")
    }
    fn is_linux(&self) -> bool {
        self.os.as_deref() == Some("Linux")
    }
}
