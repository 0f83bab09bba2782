//! The suite image's Go toolchain read from engine volumes rather than
//! through the engine's storage driver.
//!
//! The go command reads its whole standard library's sources (to hash them)
//! on every build. In a container those reads pass through the engine's
//! storage driver; on `fuse-overlayfs` (a rootless or nested engine, the
//! lab's) that is most of what a container run costs beyond the host
//! class. An engine volume is a plain directory of the engine's host
//! mounted straight into the container, and Docker fills an empty named
//! volume with the image's content at the mount path when a container that
//! mounts it is created. So, once per image and engine, saphan fills
//! volumes with the image's own GOROOT and mounts them read-only at the
//! same paths in every later suite container of that image: the suite sees
//! the image's files, byte for byte, without the driver in the way.
//!
//! The steps ([`mounts`]):
//! 1. **Lookup** (every run, one request): the volumes labelled
//!    [`LABEL_IMAGE`]`=<image id>`. A *seal* volume (one that carries
//!    [`LABEL_MOUNTS`]) lists the (path, volume) pairs of a finished fill;
//!    it is used only when every volume it names is there.
//! 2. **Fill** (no seal yet): a lock container `saphan-toolchain-<12 hex of
//!    the image id>` is created (never started) — the engine's name
//!    uniqueness is the lock, so of several runs at once one fills and the
//!    others run without volumes this time. The image's GOROOT is found as
//!    the go command finds its own ([`goroot`]): the image's `GOROOT`
//!    variable, else `bin/go`'s parent on the image's `PATH`, symbolic links
//!    resolved component by component; it must hold `pkg/tool`. Its
//!    `src` and `pkg`, when they are symbolic links out of it (Debian's
//!    layout: `/usr/lib/go-1.19/src -> /usr/share/go-1.19/src`), get
//!    volumes of their own ([`roots`]). Fresh volumes (names with a random
//!    part, never reused) are filled by creating a second container that
//!    mounts them; when that returns, the copy is complete, and the seal is
//!    created last. An image without a Go toolchain gets a seal with no
//!    mounts, so it is looked at once.
//!    Under the lock the lookup is made again (another run may have just
//!    sealed), and volumes of the image that no valid seal names — what a
//!    fill that died left — are removed before filling.
//! 3. The lock container is removed when the fill ends, however it ends
//!    (its own budget included); one left by a saphan interrupted or killed
//!    mid-fill carries [`LABEL_CONTROLLER`](super::container::LABEL_CONTROLLER)
//!    and is reaped like a suite container by the next run on the engine.
//!
//! Every path is checked as the engine will use it: links in GOROOT's path
//! and in its children's are resolved component by component first (the
//! engine follows them when it copies and when it mounts), and a path that
//! is not [`mountable`] — a system directory, the kernel's file systems, a
//! path not in plain form — is never filled. A seal is checked the same way
//! when it is read. The volumes are trusted as the engine is: whoever can
//! create volumes on it can also run anything there.
//!
//! Nothing here decides a verdict: a failure at any step is a `warn` event
//! and the run goes on without volumes. The operator's guide is
//! `docs/docker.md`, "The image's toolchain on volumes".

use super::engine::remove_on;
use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, MountVolumeOptions, VolumeCreateRequest,
};
use bollard::query_parameters::{
    ContainerArchiveInfoOptions, CreateContainerOptions, ListVolumesOptions, RemoveVolumeOptions,
};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Label on every volume of an image's toolchain (the data volumes and the
/// seal): the engine's image ID, `sha256:<64 hex>`. Remove them all with
/// `docker volume rm $(docker volume ls -q --filter label=saphan.toolchain-image)`.
pub const LABEL_IMAGE: &str = "saphan.toolchain-image";

/// Label of a seal volume: JSON `[[path, volume], …]`, the read-only mounts
/// of a finished fill (an empty list for an image without a Go toolchain).
pub const LABEL_MOUNTS: &str = "saphan.toolchain-mounts";

/// How long one fill may take (the engine copying a GOROOT of ~0.5 GB).
/// A fill that runs out leaves unsealed volumes; the run goes on without.
pub const FILL_BUDGET: Duration = Duration::from_secs(300);

/// How long the lookup of an earlier fill may take.
const LOOKUP_BUDGET: Duration = Duration::from_secs(15);

/// Directories never mounted over, whatever the image's GOROOT says: a
/// volume there would hide the rest of the image.
const SYSTEM_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/sbin",
    "/usr/share",
    "/var",
];

/// Directories the engine fills from the kernel, not the image: nothing
/// at or under them is ever mounted over.
const KERNEL_DIRS: &[&str] = &["/proc", "/sys", "/dev"];

/// One read-only volume mount of the image's toolchain: the volume holds
/// the image's content at `path`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolchainMount {
    /// Absolute path in the container.
    pub path: String,
    /// The engine volume's name.
    pub volume: String,
}

impl ToolchainMount {
    /// The mount as the engine's create request takes it: read-only, no
    /// copy (the volume is already full).
    pub fn to_mount(&self) -> Mount {
        Mount {
            target: Some(self.path.clone()),
            source: Some(self.volume.clone()),
            typ: Some(MountType::VOLUME),
            read_only: Some(true),
            volume_options: Some(MountVolumeOptions {
                no_copy: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// The read-only toolchain mounts for a suite container of `image_id` on
/// `docker`'s engine: a sealed fill's, else a new fill's when this run wins
/// the lock ([`FILL_BUDGET`]), else none. `labels` go on the lock and fill
/// containers (the attempt's, with its controller, so a killed fill is
/// reaped). Mounts that would meet `taken` (paths the suite container
/// mounts already: the tree, caches, scratch) are all dropped. Never fails:
/// what goes wrong is a `warn` event and no mounts.
pub async fn mounts(
    docker: &Docker,
    image_id: &str,
    labels: &HashMap<String, String>,
    taken: &[&str],
) -> Vec<ToolchainMount> {
    let found = match tokio::time::timeout(LOOKUP_BUDGET, sealed(docker, image_id)).await {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => {
            tracing::warn!(image = image_id, error = %e, "toolchain volumes not looked up");
            return Vec::new();
        }
        Err(_) => {
            tracing::warn!(image = image_id, "toolchain volume lookup gave no answer");
            return Vec::new();
        }
    };
    let found = match found {
        Some(m) => m,
        None => match fill_locked(docker, image_id, labels).await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(image = image_id, error = %e, "toolchain volumes not filled");
                Vec::new()
            }
        },
    };
    if let Some(m) = found
        .iter()
        .find(|m| taken.iter().any(|t| overlaps(&m.path, t)))
    {
        tracing::warn!(path = %m.path, "toolchain volume would meet a mount of the run; none used");
        return Vec::new();
    }
    found
}

/// Whether a volume may be mounted at `p`: an absolute path in plain form
/// (no empty, `.` or `..` component, no trailing `/`), not a system
/// directory (`/`, `/usr`, `/etc`, …) and not at or under `/proc`, `/sys` or
/// `/dev`.
pub fn mountable(p: &str) -> bool {
    p.len() > 1
        && p.starts_with('/')
        && !p[1..]
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        && !SYSTEM_DIRS.contains(&p)
        && !KERNEL_DIRS.iter().any(|k| overlaps(p, k))
}

/// Whether two absolute paths are the same or one holds the other.
fn overlaps(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| {
        x == y
            || (x.starts_with(y) && (y.ends_with('/') || x.as_bytes().get(y.len()) == Some(&b'/')))
    };
    under(a, b) || under(b, a)
}

/// The mounts of a sealed fill of `image_id`, `None` when there is none
/// (or none whose volumes all remain).
async fn sealed(
    docker: &Docker,
    image_id: &str,
) -> Result<Option<Vec<ToolchainMount>>, bollard::errors::Error> {
    let vols = labelled(docker, image_id).await?;
    let names: HashSet<&str> = vols.iter().map(|v| v.name.as_str()).collect();
    let mut seals: Vec<(&str, &str)> = vols
        .iter()
        .filter_map(|v| Some((v.name.as_str(), v.labels.get(LABEL_MOUNTS)?.as_str())))
        .collect();
    seals.sort();
    Ok(seals.into_iter().find_map(|(seal, json)| {
        let m: Vec<(String, String)> = serde_json::from_str(json).ok()?;
        // A seal is taken only as a fill writes one: every path one this
        // module would mount, every volume there.
        let fits = m
            .iter()
            .all(|(p, v)| mountable(p) && names.contains(v.as_str()));
        if !fits {
            tracing::warn!(
                seal,
                mounts = json,
                "a toolchain seal that names what no fill would; ignored"
            );
        }
        fits.then(|| {
            m.into_iter()
                .map(|(path, volume)| ToolchainMount { path, volume })
                .collect()
        })
    }))
}

/// The volumes labelled as `image_id`'s toolchain.
async fn labelled(
    docker: &Docker,
    image_id: &str,
) -> Result<Vec<bollard::models::Volume>, bollard::errors::Error> {
    let opts = ListVolumesOptions {
        filters: Some(
            [(
                "label".to_string(),
                vec![format!("{LABEL_IMAGE}={image_id}")],
            )]
            .into(),
        ),
    };
    Ok(docker
        .list_volumes(Some(opts))
        .await?
        .volumes
        .unwrap_or_default())
}

/// The lock container's name for `image_id`.
pub fn lock_name(image_id: &str) -> String {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    format!("saphan-toolchain-{}", &hex[..hex.len().min(12)])
}

/// Fill under the lock; `Ok(vec![])` when another run holds it.
async fn fill_locked(
    docker: &Docker,
    image_id: &str,
    labels: &HashMap<String, String>,
) -> Result<Vec<ToolchainMount>, String> {
    // The engine's copy may outlast the run's request timeout (which is
    // sized to the suite's budget); the fill has its own.
    let docker = &docker.clone().with_timeout(FILL_BUDGET);
    let lock = lock_name(image_id);
    let body = ContainerCreateBody {
        image: Some(image_id.to_string()),
        cmd: Some(vec!["/saphan-toolchain-lock".into()]),
        entrypoint: Some(Vec::new()),
        labels: Some(labels.clone()),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let opts = CreateContainerOptions {
        name: Some(lock.clone()),
        ..Default::default()
    };
    match docker.create_container(Some(opts), body.clone()).await {
        Ok(_) => {}
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => {
            tracing::info!(image = image_id, lock = %lock, "another run fills the toolchain volumes");
            return Ok(Vec::new());
        }
        Err(e) => return Err(format!("creating the lock container {lock}: {e}")),
    }
    let filled =
        match tokio::time::timeout(FILL_BUDGET, fill_held(docker, image_id, &lock, body)).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "the fill ran past its {} s budget",
                FILL_BUDGET.as_secs()
            )),
        };
    if let Err(e) = remove_on(docker, &lock).await {
        tracing::warn!(container = %lock, error = %e, "toolchain lock container not removed; remove it: docker rm -f {lock}");
    }
    filled
}

/// With the lock held: a seal another run finished meanwhile, else a new
/// fill. What carries this image's label and no valid seal names is what a
/// fill that died left (only the lock's holder fills), and is removed
/// first.
async fn fill_held(
    docker: &Docker,
    image_id: &str,
    lock: &str,
    body: ContainerCreateBody,
) -> Result<Vec<ToolchainMount>, String> {
    let looked = |e: bollard::errors::Error| format!("looking up the toolchain volumes: {e}");
    if let Some(m) = sealed(docker, image_id).await.map_err(looked)? {
        return Ok(m);
    }
    for v in labelled(docker, image_id).await.map_err(looked)? {
        tracing::info!(volume = %v.name, "removing a toolchain volume no seal names");
        let _ = docker
            .remove_volume(&v.name, None::<RemoveVolumeOptions>)
            .await;
    }
    fill(docker, image_id, lock, body).await
}

/// The fill itself, the lock held (`lock` is the created container the
/// image's paths are looked at in).
async fn fill(
    docker: &Docker,
    image_id: &str,
    lock: &str,
    body: ContainerCreateBody,
) -> Result<Vec<ToolchainMount>, String> {
    let image = docker
        .inspect_image(image_id)
        .await
        .map_err(|e| format!("inspecting {image_id}: {e}"))?;
    let env = image.config.and_then(|c| c.env).unwrap_or_default();
    let mut candidates = Vec::new();
    for p in goroot_candidates(&env) {
        candidates.push((p.clone(), stat(docker, lock, &p).await?));
    }
    let mut paths = Vec::new();
    if let Some(g) = goroot(&candidates) {
        let mut children = Vec::new();
        for c in ["pkg/tool", "src", "pkg"] {
            children.push((c, stat(docker, lock, &format!("{g}/{c}")).await?));
        }
        paths = roots(&g, &children);
    }
    let nonce = {
        let mut b = [0u8; 4];
        let _ = getrandom::fill(&mut b);
        hex::encode(b)
    };
    let base = format!("{}-{nonce}", lock_name(image_id));
    let label = |extra: Option<String>| {
        let mut l = HashMap::from([(LABEL_IMAGE.to_string(), image_id.to_string())]);
        if let Some(m) = extra {
            l.insert(LABEL_MOUNTS.to_string(), m);
        }
        l
    };
    let mut made = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let volume = format!("{base}-{i}");
        if let Err(e) = docker
            .create_volume(VolumeCreateRequest {
                name: Some(volume.clone()),
                labels: Some(label(None)),
                ..Default::default()
            })
            .await
        {
            discard(docker, &made).await;
            return Err(format!("creating volume {volume}: {e}"));
        }
        made.push(ToolchainMount {
            path: path.clone(),
            volume,
        });
    }
    if !made.is_empty() {
        // Creating a container that mounts the empty volumes is what has
        // the engine copy the image's content into them.
        let mut body = body;
        if let Some(h) = body.host_config.as_mut() {
            h.mounts = Some(
                made.iter()
                    .map(|m| {
                        let mut mount = m.to_mount();
                        mount.volume_options = None;
                        mount
                    })
                    .collect(),
            );
        }
        let filler = format!("{lock}-fill-{nonce}");
        let opts = CreateContainerOptions {
            name: Some(filler.clone()),
            ..Default::default()
        };
        let created = docker.create_container(Some(opts), body).await;
        let _ = remove_on(docker, &filler).await;
        if let Err(e) = created {
            discard(docker, &made).await;
            return Err(format!("filling the toolchain volumes: {e}"));
        }
    }
    let pairs: Vec<(&str, &str)> = made
        .iter()
        .map(|m| (m.path.as_str(), m.volume.as_str()))
        .collect();
    let json = serde_json::to_string(&pairs).map_err(|e| e.to_string())?;
    let seal = format!("{base}-sealed");
    if let Err(e) = docker
        .create_volume(VolumeCreateRequest {
            name: Some(seal.clone()),
            labels: Some(label(Some(json))),
            ..Default::default()
        })
        .await
    {
        discard(docker, &made).await;
        return Err(format!("creating the seal volume {seal}: {e}"));
    }
    tracing::info!(image = image_id, mounts = ?made, "toolchain volumes filled");
    Ok(made)
}

/// Remove the volumes of a fill that will never be sealed (best effort:
/// what remains is unsealed, so nothing mounts it).
async fn discard(docker: &Docker, made: &[ToolchainMount]) {
    for m in made {
        let _ = docker
            .remove_volume(&m.volume, None::<RemoveVolumeOptions>)
            .await;
    }
}

/// A path in the image, its links resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// What the path leads to is a directory.
    pub dir: bool,
    /// The real path (every symbolic link in it resolved) when it is not
    /// the path itself.
    pub link: Option<String>,
}

/// Go's `os.FileMode` bits in the engine's archive stat: a directory, a
/// symbolic link.
const MODE_DIR: u32 = 1 << 31;
const MODE_LINK: u32 = 1 << 27;

/// `path` in the created container `container`, its links resolved
/// component by component — as the engine follows them when it copies
/// into a volume and when it mounts one, so every check is made on the
/// real path. `None` when a component is absent (or a link leads nowhere).
async fn stat(docker: &Docker, container: &str, path: &str) -> Result<Option<Stat>, String> {
    // Deeper than any toolchain; a path past it is not one.
    const MAX_COMPONENTS: usize = 64;
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if comps.len() > MAX_COMPONENTS || comps.iter().any(|c| *c == "." || *c == "..") {
        return Ok(None);
    }
    let mut real = String::new();
    let mut dir = true;
    for c in comps {
        let next = format!("{real}/{c}");
        let Some((mut mode, target)) = lstat(docker, container, &next).await? else {
            return Ok(None);
        };
        // The engine answers for the path itself (lstat), a link's target
        // resolved to an absolute path: that target is looked at in turn.
        real = if mode & MODE_LINK != 0 && !target.is_empty() {
            if !target.starts_with('/') {
                return Ok(None);
            }
            let Some((m, _)) = lstat(docker, container, &target).await? else {
                return Ok(None);
            };
            mode = m;
            target.trim_end_matches('/').to_string()
        } else {
            next
        };
        dir = mode & MODE_DIR != 0;
    }
    let real = if real.is_empty() {
        "/".to_string()
    } else {
        real
    };
    Ok(Some(Stat {
        dir,
        link: (real != path).then_some(real),
    }))
}

/// The engine's archive stat of `path`: its mode (Go's `os.FileMode`
/// bits) and, for a symbolic link, the resolved target.
async fn lstat(
    docker: &Docker,
    container: &str,
    path: &str,
) -> Result<Option<(u32, String)>, String> {
    let opts = ContainerArchiveInfoOptions {
        path: path.to_string(),
    };
    match docker
        .get_container_archive_info(container, Some(opts))
        .await
    {
        Ok(s) => Ok(Some((s.file_mode, s.link_target))),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(format!("looking at {path} in the image: {e}")),
    }
}

/// The paths where the image's `go` may be, in the order the go command
/// would be found: the image's `GOROOT` (its `bin/go`), else `go` in each
/// directory of the image's `PATH` (Docker's default `PATH` when the image
/// sets none). `env` is the image config's `KEY=value` list.
pub fn goroot_candidates(env: &[String]) -> Vec<String> {
    let var = |k: &str| {
        env.iter()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_string)
    };
    if let Some(g) = var("GOROOT").filter(|g| g.starts_with('/')) {
        return vec![format!("{}/bin/go", g.trim_end_matches('/'))];
    }
    let path = var("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| format!("{}/go", d.trim_end_matches('/')))
        .collect()
}

/// The image's GOROOT from the stats of [`goroot_candidates`]: the first
/// `go` that exists and is not a directory, resolved, whose path ends in
/// `/bin/go` — its grandparent (the go command's own rule). `None` for an
/// image without one.
pub fn goroot(candidates: &[(String, Option<Stat>)]) -> Option<String> {
    let (path, stat) = candidates
        .iter()
        .find_map(|(p, s)| s.as_ref().filter(|s| !s.dir).map(|s| (p, s)))?;
    let real = stat.link.as_deref().unwrap_or(path);
    let root = real.strip_suffix("/bin/go")?;
    root.starts_with('/').then(|| root.to_string())
}

/// The paths to fill for GOROOT `goroot` given the stats of its children
/// `pkg/tool`, `src` and `pkg`: none unless `pkg/tool` is there (it is no
/// GOROOT otherwise); GOROOT itself, and each child that is a symbolic link
/// out of it, at the resolved path. `goroot` and the links are real paths
/// (no link left in them). A path that is not [`mountable`], or inside
/// another, is left out.
pub fn roots(goroot: &str, children: &[(&str, Option<Stat>)]) -> Vec<String> {
    let has_tool = children
        .iter()
        .any(|(c, s)| *c == "pkg/tool" && s.as_ref().is_some_and(|s| s.dir));
    if !has_tool {
        return Vec::new();
    }
    let mut out = vec![goroot.to_string()];
    for (c, s) in children {
        if *c == "pkg/tool" {
            continue;
        }
        if let Some(Stat {
            dir: true,
            link: Some(l),
        }) = s
        {
            out.push(l.clone());
        }
    }
    let clean = |p: &String| mountable(p);
    let mut keep: Vec<String> = Vec::new();
    for p in out.iter().filter(|p| clean(p)) {
        if !keep.iter().any(|k| overlaps(k, p)) {
            keep.push(p.clone());
        }
    }
    // GOROOT itself refused (a system directory): its children alone would
    // leave the sources half on volumes — fill nothing.
    if keep.first().map(String::as_str) != Some(goroot) {
        return Vec::new();
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(dir: bool, link: Option<&str>) -> Option<Stat> {
        Some(Stat {
            dir,
            link: link.map(str::to_string),
        })
    }

    #[test]
    fn candidates_follow_goroot_then_path() {
        let env = vec!["GOROOT=/opt/go/".to_string(), "PATH=/bin".to_string()];
        assert_eq!(goroot_candidates(&env), vec!["/opt/go/bin/go"]);
        let env = vec!["PATH=/usr/lib/go-1.19/bin:relative:/bin".to_string()];
        assert_eq!(
            goroot_candidates(&env),
            vec!["/usr/lib/go-1.19/bin/go", "/bin/go"]
        );
        assert_eq!(goroot_candidates(&[]).len(), 6);
        // GOROOTX is not GOROOT.
        let env = vec!["GOROOTX=/x".to_string(), "PATH=/b".to_string()];
        assert_eq!(goroot_candidates(&env), vec!["/b/go"]);
    }

    #[test]
    fn goroot_is_the_resolved_go_binarys_grandparent() {
        let c = vec![
            ("/usr/local/bin/go".to_string(), None),
            (
                "/usr/bin/go".to_string(),
                st(false, Some("/usr/lib/go-1.19/bin/go")),
            ),
        ];
        assert_eq!(goroot(&c).as_deref(), Some("/usr/lib/go-1.19"));
        let c = vec![("/usr/local/go/bin/go".to_string(), st(false, None))];
        assert_eq!(goroot(&c).as_deref(), Some("/usr/local/go"));
        // A `go` that is a directory, or a binary not in a bin/: no GOROOT.
        assert_eq!(goroot(&[("/bin/go".to_string(), st(true, None))]), None);
        assert_eq!(goroot(&[("/x/go".to_string(), st(false, None))]), None);
        assert_eq!(goroot(&[("/usr/bin/go".to_string(), None)]), None);
    }

    #[test]
    fn roots_take_goroot_and_its_links_out() {
        let debian = [
            ("pkg/tool", st(true, None)),
            ("src", st(true, Some("/usr/share/go-1.19/src"))),
            ("pkg", st(true, None)),
        ];
        assert_eq!(
            roots("/usr/lib/go-1.19", &debian),
            vec!["/usr/lib/go-1.19", "/usr/share/go-1.19/src"]
        );
        let plain = [
            ("pkg/tool", st(true, None)),
            ("src", st(true, None)),
            ("pkg", st(true, None)),
        ];
        assert_eq!(roots("/usr/local/go", &plain), vec!["/usr/local/go"]);
        // A link that stays inside GOROOT needs no volume of its own.
        let inside = [
            ("pkg/tool", st(true, None)),
            ("src", st(true, Some("/usr/local/go/source"))),
        ];
        assert_eq!(roots("/usr/local/go", &inside), vec!["/usr/local/go"]);
        // No pkg/tool: not a GOROOT.
        assert!(roots("/usr/local/go", &[("src", st(true, None))]).is_empty());
        // A GOROOT that is a system directory, or a link into one: refused.
        assert!(roots("/usr", &plain).is_empty());
        let to_usr = [
            ("pkg/tool", st(true, None)),
            ("src", st(true, Some("/usr/share"))),
        ];
        assert_eq!(roots("/opt/go", &to_usr), vec!["/opt/go"]);
        assert!(roots("/opt/../usr", &plain).is_empty());
        // Nothing at or under the kernel's file systems, GOROOT or a link.
        assert!(roots("/proc/self/go", &plain).is_empty());
        assert!(roots("/dev/shm/go", &plain).is_empty());
        let to_sys = [
            ("pkg/tool", st(true, None)),
            ("src", st(true, Some("/sys/kernel/src"))),
        ];
        assert_eq!(roots("/opt/go", &to_sys), vec!["/opt/go"]);
    }

    #[test]
    fn only_plain_paths_outside_the_system_are_mountable() {
        assert!(mountable("/opt/go"));
        assert!(mountable("/usr/lib/go-1.19"));
        for p in [
            "/",
            "//usr",
            "/usr/",
            "/usr//lib/go",
            "/opt/./go",
            "/opt/../usr",
            "opt/go",
            "",
            "/usr",
            "/usr/local",
            "/proc",
            "/proc/self/x",
            "/sys/x",
            "/dev/shm/go",
        ] {
            assert!(!mountable(p), "{p:?}");
        }
    }

    #[test]
    fn overlap_is_by_component() {
        assert!(overlaps("/usr/lib/go", "/usr/lib/go"));
        assert!(overlaps("/usr/lib/go/src", "/usr/lib/go"));
        assert!(overlaps("/usr/lib/go", "/usr/lib/go/src/x"));
        assert!(!overlaps("/usr/lib/go-1.19", "/usr/lib/go"));
        assert!(overlaps("/", "/anything"));
    }

    #[test]
    fn lock_names_are_short_and_per_image() {
        assert_eq!(
            lock_name("sha256:393b2ea13e0b78522a4c105c04e77d12023cbd22c33698c12bbfb66befe23e95"),
            "saphan-toolchain-393b2ea13e0b"
        );
    }
}
