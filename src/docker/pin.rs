//! The docker-oci image pin: the catalog row's `image` value.
//!
//! Two forms, and the form says which field of the image it is checked
//! against (a locally built image has `RepoDigests=[]` and an `Id` that is its
//! config digest, not a registry manifest digest — LAB.md):
//!
//! - `sha256:<64 hex>` — a local image ID, checked against the image's `Id`;
//! - `NAME@sha256:<64 hex>` — a registry digest, checked against the image's
//!   `RepoDigests`.
//!
//! A tag (`name:candidate`, `name`) is refused by name; the all-zero digest
//! (what the shipped catalog carries) is refused as unpinned.

use super::DockerError;
use crate::catalog::Catalog;

/// A parsed, non-zero image pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// `sha256:<hex>`: the image's `Id` must equal it.
    ImageId(String),
    /// `name@sha256:<hex>`: the image's `RepoDigests` must hold exactly this.
    Registry {
        /// The repository name (`ghcr.io/saphan-studio/saphan-probe`).
        name: String,
        /// `sha256:<hex>`.
        digest: String,
    },
}

fn hex64(s: &str) -> Result<(), String> {
    if s.len() != 64 {
        return Err(format!("the digest has {} hex digits, not 64", s.len()));
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err("the digest is not lowercase hexadecimal".into());
    }
    Ok(())
}

impl Pin {
    /// Parse an `image` value; `origin` names the catalog in refusals.
    ///
    /// Errors: `docker-probe-image-unpinned` (zero digest),
    /// `docker-probe-image-tag` (a tag, no digest),
    /// `docker-probe-image-pin-malformed` (anything else).
    pub fn parse(image: &str, origin: &str) -> Result<Pin, DockerError> {
        let malformed = |why: String| DockerError::PinMalformed {
            origin: origin.to_string(),
            image: image.to_string(),
            why,
        };
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (Some(n), d),
            None => (None, image),
        };
        let Some(hex) = digest.strip_prefix("sha256:") else {
            if name.is_none() && !image.is_empty() && !image.contains(char::is_whitespace) {
                return Err(DockerError::PinIsTag {
                    origin: origin.to_string(),
                    image: image.to_string(),
                });
            }
            return Err(malformed("it carries no `sha256:` digest".into()));
        };
        hex64(hex).map_err(malformed)?;
        if hex.bytes().all(|b| b == b'0') {
            return Err(DockerError::Unpinned {
                origin: origin.to_string(),
                image: image.to_string(),
            });
        }
        match name {
            None => Ok(Pin::ImageId(digest.to_string())),
            Some(n) => {
                let ok = !n.is_empty()
                    && n.bytes().all(|b| {
                        b.is_ascii_lowercase()
                            || b.is_ascii_digit()
                            || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
                    });
                if !ok {
                    return Err(malformed(format!("`{n}` is not an image repository name")));
                }
                // `name:tag@sha256:…` is legal for docker, but the tag part
                // would be ignored: keep the pin honest and refuse it.
                if n.rsplit('/').next().is_some_and(|last| last.contains(':')) {
                    return Err(malformed(format!(
                        "`{n}` carries a tag; a registry pin is `NAME@sha256:…` with no tag"
                    )));
                }
                Ok(Pin::Registry {
                    name: n.to_string(),
                    digest: digest.to_string(),
                })
            }
        }
    }

    /// The docker-oci row's pin from `catalog`.
    ///
    /// Errors: those of [`Pin::parse`]; a row without `image` is malformed;
    /// a catalog without the row is `capability-unknown`.
    pub fn from_catalog(catalog: &Catalog) -> crate::error::Result<Pin> {
        let row = catalog.get(super::DOCKER_OCI)?;
        Ok(super::pin_of(row, &catalog.origin)?)
    }

    /// The reference to inspect the image by: the ID, or `name@digest`.
    pub fn reference(&self) -> String {
        match self {
            Pin::ImageId(id) => id.clone(),
            Pin::Registry { name, digest } => format!("{name}@{digest}"),
        }
    }

    /// `image-id` or `registry-digest`: which kind of digest this is.
    pub fn kind(&self) -> &'static str {
        match self {
            Pin::ImageId(_) => "image-id",
            Pin::Registry { .. } => "registry-digest",
        }
    }

    /// Does an inspected image (its `Id` and `RepoDigests`) carry this pin?
    pub fn matches(&self, id: &str, repo_digests: &[String]) -> bool {
        match self {
            Pin::ImageId(want) => id == want,
            Pin::Registry { .. } => {
                let want = self.reference();
                repo_digests.contains(&want)
            }
        }
    }

    /// The command that puts the pinned image on a machine (run there).
    pub fn load_command(&self) -> String {
        match self {
            Pin::ImageId(_) => "docker load -i saphan-probe.tar".into(),
            Pin::Registry { .. } => format!("docker pull {}", self.reference()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

    const H: &str = "c6838e578d8c74290795d47c46e42f1005d6d67b210a781407bf6cc775447a1c";

    fn name(r: Result<Pin, DockerError>) -> &'static str {
        r.unwrap_err().name()
    }

    #[test]
    fn forms_and_refusals() {
        assert_eq!(
            Pin::parse(&format!("sha256:{H}"), "t").unwrap(),
            Pin::ImageId(format!("sha256:{H}"))
        );
        let r = Pin::parse(
            &format!("ghcr.io/saphan-studio/saphan-probe@sha256:{H}"),
            "t",
        )
        .unwrap();
        assert_eq!(r.kind(), "registry-digest");
        assert_eq!(
            r.reference(),
            format!("ghcr.io/saphan-studio/saphan-probe@sha256:{H}")
        );
        assert!(r.matches(
            "sha256:x",
            &[format!("ghcr.io/saphan-studio/saphan-probe@sha256:{H}")]
        ));
        assert!(
            !r.matches(&format!("sha256:{H}"), &[]),
            "a registry pin is never checked against the Id"
        );
        let z = "0".repeat(64);
        assert_eq!(
            name(Pin::parse(&format!("sha256:{z}"), "t")),
            "docker-probe-image-unpinned"
        );
        assert_eq!(
            name(Pin::parse(&format!("x/y@sha256:{z}"), "t")),
            "docker-probe-image-unpinned"
        );
        assert_eq!(
            name(Pin::parse(
                "ghcr.io/saphan-studio/saphan-probe:candidate",
                "t"
            )),
            "docker-probe-image-tag"
        );
        assert_eq!(
            name(Pin::parse("saphan-probe", "t")),
            "docker-probe-image-tag"
        );
        assert_eq!(
            name(Pin::parse(&format!("x:candidate@sha256:{H}"), "t")),
            "docker-probe-image-pin-malformed"
        );
        assert_eq!(name(Pin::parse(&H[..12], "t")), "docker-probe-image-tag");
        assert_eq!(
            name(Pin::parse(&format!("sha256:{}", &H[..63]), "t")),
            "docker-probe-image-pin-malformed"
        );
        assert_eq!(
            name(Pin::parse(&format!("sha256:{}", H.to_uppercase()), "t")),
            "docker-probe-image-pin-malformed"
        );
        assert_eq!(
            name(Pin::parse("", "t")),
            "docker-probe-image-pin-malformed"
        );
    }

    #[test]
    fn catalog_rows_refuse_unknown_keys() {
        let t = "[capability.docker-oci]\nkind = \"container\"\nimag = \"sha256:x\"\n";
        let e = Catalog::parse(t, "t").unwrap_err();
        assert_eq!(e.name(), "catalog-malformed");
        assert!(
            e.to_string()
                .contains("unknown field `imag` in capability `docker-oci`"),
            "{e}"
        );
        let t = "[capability.docker-oci]\nkind = \"container\"\nimage = \"sha256:x\"\nsocket = \"/s\"\n";
        assert!(Catalog::parse(t, "t").is_ok());
    }

    #[test]
    fn shipped_catalog_is_unpinned() {
        let c = Catalog::load(None).unwrap();
        let e = Pin::from_catalog(&c).unwrap_err();
        assert_eq!(e.name(), "docker-probe-image-unpinned");
        assert_eq!(
            super::super::socket_of(c.get("docker-oci").unwrap()),
            "/var/run/docker.sock"
        );
    }
}
