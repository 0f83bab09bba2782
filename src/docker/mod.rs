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
//! - the sandbox-userns probe and the container-class check
//!   (`require_container_capability`) live above, in
//!   [`crate::fleet::docker_probes`] (they read and write the ledger).
//! - [`container`]: the suite image pin and the container-class suite run.
//! - [`toolchain`]: the suite image's Go toolchain, filled once into engine
//!   volumes and mounted read-only in every suite container of the image.
//!
//! A probe never installs, enables, pulls or loads anything: it measures and
//! names what is missing, with the command that would fix it.

pub mod container;
pub mod engine;
pub mod output;
pub mod pin;
pub mod probe_image;
pub mod toolchain;

use crate::catalog::Capability;
use crate::error::Refusal;

pub use pin::Pin;

/// The catalog row name of the Docker probe.
pub const DOCKER_OCI: &str = "docker-oci";
/// The catalog row name of the user-namespace probe.
pub const SANDBOX_USERNS: &str = "sandbox-userns";
/// The Docker socket used when neither the machine nor the catalog names one.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Refusals of the Docker ceremonies. A refusal measured nothing and wrote
/// nothing; the outcomes of a probe that did run are
/// [`crate::fleet::finding::Finding`]s instead.
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
