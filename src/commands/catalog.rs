//! `saphan catalog pin IMAGE`: pin the docker-oci probe image in the
//! catalog file every command picks up. A verb over the catalog (its text,
//! [`crate::catalog::with_pinned_image`]) and docker's pin rules
//! ([`crate::docker::Pin`]).

use std::path::{Path, PathBuf};

/// What [`pin`] wrote.
#[derive(Debug, Clone)]
pub struct Pinned {
    /// The catalog file written (absolute).
    pub path: PathBuf,
    /// The docker-oci `image` it held before (`None`: no such value).
    pub previous: Option<String>,
    /// [`crate::catalog::Capability::digest`] of the new docker-oci entry.
    pub digest: String,
}

/// `saphan catalog pin IMAGE`: set the docker-oci `image` of the catalog
/// file every command picks up — `SAPHAN_HOME/catalog.toml` (a copy of the
/// embedded catalog when it does not exist yet), or the `--catalog` file
/// `flag` — changing nothing else in it. The pin is checked first, the new
/// catalog parsed before it replaces the old one (atomically; a new file is
/// mode 0600).
///
/// Errors: the pin's refusals (`docker-probe-image-tag`,
/// `docker-probe-image-unpinned`, `docker-probe-image-pin-malformed`),
/// `saphan-home-exposed`, `catalog-unreadable` (a `--catalog` file that is
/// not there), `catalog-malformed` — all before anything is written.
pub fn pin(
    home: &crate::home::Home,
    flag: Option<&Path>,
    image: &str,
) -> crate::error::Result<Pinned> {
    let home_file = home.catalog();
    let target = flag
        .map(Path::to_path_buf)
        .unwrap_or_else(|| home_file.clone());
    let target = std::path::absolute(&target).unwrap_or(target);
    let origin = target.display().to_string();
    crate::docker::pin::Pin::parse(image, &origin)?;
    let exists = std::fs::symlink_metadata(&target).is_ok();
    if flag.is_none() {
        let mut check = vec![home.root()];
        if exists {
            check.push(&target);
        }
        crate::home::check_dirs(&check)?;
    }
    let text = if exists {
        std::fs::read_to_string(&target).map_err(|source| crate::catalog::CatalogError::Read {
            path: target.clone(),
            source,
        })?
    } else if flag.is_some() {
        return Err(crate::catalog::CatalogError::Read {
            path: target.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
        .into());
    } else {
        crate::catalog::EMBEDDED.to_string()
    };
    let previous = crate::catalog::Catalog::parse(&text, &origin)
        .ok()
        .and_then(|c| c.rows.get(crate::docker::DOCKER_OCI).cloned())
        .and_then(|r| {
            r.extra
                .get("image")
                .and_then(|v| v.as_str().map(str::to_string))
        });
    let new = crate::catalog::with_pinned_image(&text, image, &origin)?;
    let cat = crate::catalog::Catalog::parse(&new, &origin)?;
    let digest = cat
        .get(crate::docker::DOCKER_OCI)?
        .digest(crate::docker::DOCKER_OCI);
    crate::fsutil::atomic_write(&target, new.as_bytes())?;
    Ok(Pinned {
        path: target,
        previous,
        digest,
    })
}
