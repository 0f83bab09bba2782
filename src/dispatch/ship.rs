//! Shipping commits to a machine's bare mirror (DESIGN §6a step 3): learn
//! which shipped commits the mirror already holds, bundle only what it
//! lacks (`git bundle create <ref> --not <what it has>`), stream the bundle
//! over the connection, verify it there and fetch it into
//! `refs/saphan/shipped/<sha>` of the mirror. Nothing already there is
//! re-sent.

use super::{CONTROL_TIMEOUT, DispatchFault};
use crate::exec::{self, Cmd};
use crate::git::Repo;
use crate::report::FailureKind;
use crate::transport::Transport;

/// The namespace of the mirror's refs: one per shipped commit.
pub const SHIPPED: &str = "refs/saphan/shipped/";

/// What one ship sent.
#[derive(Debug, Clone, Default)]
pub struct Shipped {
    /// Bundle bytes sent (0 when the mirror already had every commit).
    pub bundle_bytes: u64,
    /// How many commits the mirror already had that the bundle excluded.
    pub prerequisites: usize,
}

/// Paths on the machine for one repository.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `<workhome>/saphan`.
    pub base: String,
    /// The repository key (16 hex of the sha256 of the local common dir).
    pub key: String,
}

impl Layout {
    /// The bare mirror.
    pub fn mirror(&self) -> String {
        format!("{}/mirrors/{}.git", self.base, self.key)
    }
    /// The stable scratch worktree.
    pub fn tree(&self) -> String {
        format!("{}/scratch/{}/tree", self.base, self.key)
    }
    /// One attempt's run directory.
    pub fn run(&self, id: &str) -> String {
        format!("{}/runs/{}", self.base, id)
    }
}

/// Run `argv` on the machine and return its whole stdout (read from a file,
/// never a bounded tail: the mirror's listing grows with every shipped
/// commit).
async fn remote(t: &Transport, argv: &[&str], what: &str) -> Result<String, DispatchFault> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let (out, bytes) =
        crate::remote::whole_stdout(t, Cmd::from_argv(&argv).timeout(CONTROL_TIMEOUT), u64::MAX)
            .await
            .map_err(DispatchFault::transport)?;
    if !out.status.success() {
        return Err(ship_failed(
            what,
            &out,
            " — the machine row's workhome must be writable there and git installed",
        ));
    }
    Ok(String::from_utf8_lossy(&bytes.unwrap_or_default())
        .trim_end()
        .to_string())
}

/// `ship-failed` for a command that ran on the machine and did not succeed:
/// what it was doing, how it ended, its stderr, then `hint`.
fn ship_failed(what: &str, out: &exec::Output, hint: &str) -> DispatchFault {
    DispatchFault::new(
        FailureKind::ShipFailed,
        format!("{what}: {:?}: {}{hint}", out.status, out.stderr_str()),
    )
}

async fn local_git(repo: &Repo, args: &[String]) -> Result<exec::Output, DispatchFault> {
    exec::run(
        Cmd::new("git")
            .arg("-C")
            .arg(&repo.top)
            .args(args)
            .timeout(crate::git::GIT_TIMEOUT),
    )
    .await
    .map_err(|e| DispatchFault::new(FailureKind::ShipFailed, format!("running git: {e}")))
}

/// Ship every commit in `shas` (the measured SHA, then submodule commits the
/// caller found locally) into the machine's mirror.
///
/// `sources` pairs each SHA with the local repository that holds it (the
/// superproject, or a submodule's own object store). `tag` names this
/// shipment's temporary local ref (`refs/saphan/ship/<tag>`), removed after.
pub async fn ship(
    t: &Transport,
    layout: &Layout,
    sources: &[(Repo, String)],
    tag: &str,
) -> Result<Shipped, DispatchFault> {
    let mirror = layout.mirror();
    let mut shas: Vec<&str> = sources.iter().map(|(_, s)| s.as_str()).collect();
    shas.dedup();
    let mut probe_args = vec![
        "sh",
        "-c",
        crate::remote::SHIP_PROBE,
        "saphan-ship",
        &mirror,
    ];
    probe_args.extend(shas.iter().copied());
    let listing = remote(t, &probe_args, "reading the mirror").await?;
    let mut haves: Vec<String> = Vec::new();
    let mut present: Vec<String> = Vec::new();
    for l in listing.lines() {
        if let Some(h) = l.strip_prefix("have ") {
            haves.push(h.trim().to_string());
        } else if let Some(p) = l.strip_prefix("present ") {
            present.push(p.trim().to_string());
        }
    }
    let mut shipped = Shipped::default();
    for (repo, sha) in sources {
        if present.iter().any(|p| p == sha) {
            continue;
        }
        // Prerequisites: the mirror's commits this repository knows.
        let mut known = Vec::new();
        if !haves.is_empty() {
            let out = exec::run(
                Cmd::new("git")
                    .arg("-C")
                    .arg(&repo.top)
                    .args(["cat-file", "--batch-check=%(objectname) %(objecttype)"])
                    .stdin(haves.join("\n").into_bytes())
                    .timeout(crate::git::GIT_TIMEOUT),
            )
            .await
            .map_err(|e| {
                DispatchFault::new(FailureKind::ShipFailed, format!("running git: {e}"))
            })?;
            for l in out.stdout_str().lines() {
                if let Some(h) = l.strip_suffix(" commit") {
                    known.push(h.to_string());
                }
            }
        }
        let tmp_ref = format!("refs/saphan/ship/{tag}-{}", &sha[..12.min(sha.len())]);
        let dir = tempfile::Builder::new()
            .prefix("saphan-bundle-")
            .tempdir()
            .map_err(|e| DispatchFault::new(FailureKind::ShipFailed, format!("temp dir: {e}")))?;
        let file = dir.path().join("ship.bundle");
        let up = local_git(repo, &["update-ref".into(), tmp_ref.clone(), sha.clone()]).await?;
        if !up.status.success() {
            return Err(DispatchFault::new(
                FailureKind::ShipFailed,
                format!("cannot name {sha} for the bundle: {}", up.stderr_str()),
            ));
        }
        let mut args = vec![
            "bundle".to_string(),
            "create".into(),
            "--quiet".into(),
            file.display().to_string(),
            tmp_ref.clone(),
        ];
        if !known.is_empty() {
            args.push("--not".into());
            args.extend(known.iter().cloned());
        }
        let made = local_git(repo, &args).await;
        let _ = local_git(repo, &["update-ref".into(), "-d".into(), tmp_ref.clone()]).await;
        let made = made?;
        if !made.status.success() {
            return Err(DispatchFault::new(
                FailureKind::ShipFailed,
                format!("git bundle create: {}", made.stderr_str()),
            ));
        }
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let incoming = format!("{}/incoming/{tag}-{}.bundle", layout.base, &sha[..12]);
        let boundary = shallow_boundary(repo).await;
        // One round trip: the bundle streams over the connection into the
        // incoming file, is verified and fetched there, then removed.
        let out = t
            .run(
                Cmd::new("sh")
                    .args([
                        "-c",
                        crate::remote::SHIP_FETCH,
                        "saphan-fetch",
                        &mirror,
                        &incoming,
                        &tmp_ref,
                        sha,
                    ])
                    .args(boundary.iter().map(String::as_str))
                    .input(exec::Input::File(file.clone()))
                    .timeout(CONTROL_TIMEOUT),
            )
            .await
            .map_err(DispatchFault::transport)?;
        if !out.status.success() {
            return Err(ship_failed("verifying and fetching the bundle", &out, ""));
        }
        shipped.bundle_bytes += bytes;
        shipped.prerequisites += known.len();
    }
    Ok(shipped)
}

/// The shallow boundary of `repo` (the commits listed in its common dir's
/// `shallow` file, whose parents the clone does not hold); empty for a full
/// clone. A bundle from a shallow clone stops at these commits, so the
/// mirror records them as its own shallow boundary before fetching it —
/// otherwise the fetch's connectivity check fails on the missing parents.
async fn shallow_boundary(repo: &Repo) -> Vec<String> {
    let text = tokio::fs::read_to_string(repo.common_dir.join("shallow"))
        .await
        .unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| (l.len() == 40 || l.len() == 64) && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

/// Delete the temporary `refs/saphan/ship/<tag>-*` refs an interrupted
/// [`ship`] may have left in `repo` (best effort).
pub async fn forget(repo: &Repo, tag: &str) {
    let Ok(out) = local_git(
        repo,
        &[
            "for-each-ref".into(),
            "--format=%(refname)".into(),
            format!("refs/saphan/ship/{tag}-*"),
        ],
    )
    .await
    else {
        return;
    };
    for r in out.stdout_str().lines().filter(|r| !r.is_empty()) {
        let _ = local_git(repo, &["update-ref".into(), "-d".into(), r.to_string()]).await;
    }
}
