//! The docker-oci probe: does this machine really run the pinned
//! saphan-probe image? Over bollard against the machine's Docker socket
//! ([`crate::docker::engine`]).
//!
//! The probe never calls the image-create (pull) endpoint: it inspects the
//! pinned image, then creates, starts, waits for and reads the logs of a
//! container made from the image's exact ID, and removes it afterwards.

use super::{Platform, Reason, failed};
use crate::docker::Pin;
use crate::docker::engine::{
    CLEANUP_RESERVE, connect, left, read_logs, remove_container, wait_status,
};
use crate::docker::output;
use crate::fleet::finding::Finding;
use crate::fleet::ledger::Outcome;
use crate::transport::Transport;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::CreateContainerOptions;
use serde_json::{Map, Value};
use std::time::Duration;

/// What the docker-oci probe needs besides the machine.
#[derive(Debug, Clone)]
pub struct DockerProbeSettings {
    /// The declared absolute path of the docker program on the machine.
    pub declared_path: String,
    /// The engine's Unix socket on the machine.
    pub socket: String,
    /// The pinned probe image (never the zero digest: [`Pin::parse`] refuses it).
    pub pin: Pin,
    /// The machine's measured platform, for remedies.
    pub platform: Platform,
    /// The whole probe's budget (version check, engine handshake, run, logs).
    pub budget: Duration,
}

/// The remedy command for a finding's reason, from measured facts only.
pub fn fix_for(
    reason: Reason,
    pin: Option<&Pin>,
    install: Option<&str>,
    platform: &Platform,
) -> Option<String> {
    match reason {
        Reason::BinaryAbsent => install.map(str::to_string),
        Reason::DaemonUnreachable => {
            if platform.is_darwin() {
                Some("open -a Docker".into())
            } else if platform.is_linux() {
                let start = "systemctl enable --now docker";
                Some(match platform.user.as_deref() {
                    Some(u) if u != "root" => format!("{start} && usermod -aG docker {u}"),
                    _ => start.to_string(),
                })
            } else {
                None
            }
        }
        Reason::ProbeImageAbsent | Reason::ProbeOutputInvalid => pin.map(Pin::load_command),
        // Run it by hand to see the engine's own words.
        Reason::ProbeRunFailed => pin.map(|p| {
            format!(
                "docker run --rm --pull=never --network none {}",
                p.reference()
            )
        }),
        // The userns checks' remedies come from their own detail
        // (`userns::fix_for_denial`).
        Reason::VersionOutputMismatch | Reason::UsernsNotCreated | Reason::UsernsDenied => None,
    }
}

fn finding(
    s: &DockerProbeSettings,
    outcome: Outcome,
    reason: Reason,
    detail: String,
    install: Option<&str>,
) -> Finding {
    failed(
        outcome,
        reason,
        detail,
        fix_for(reason, Some(&s.pin), install, &s.platform),
    )
}

/// A daemon-unreachable finding; the remedy grants socket access to the
/// user saphan runs as there (`id -un` on the machine).
async fn unreachable(
    transport: &Transport,
    s: &DockerProbeSettings,
    why: String,
    deadline: tokio::time::Instant,
) -> Finding {
    let mut platform = s.platform.clone();
    // Who the connected user is sharpens the fix (`usermod -aG docker`);
    // asked only within the time left, so the finding itself is never late.
    let ask =
        Duration::from_secs(10).min(left(deadline).saturating_sub(Duration::from_millis(200)));
    if platform.user.is_none() && platform.is_linux() && !ask.is_zero() {
        let argv = vec!["id".to_string(), "-un".to_string()];
        if let Ok(o) = transport.exec(&argv, ask).await
            && o.status.success()
        {
            platform.user = Some(o.stdout_str().trim().to_string()).filter(|u| !u.is_empty());
        }
    }
    failed(
        Outcome::Failed,
        Reason::DaemonUnreachable,
        why,
        fix_for(Reason::DaemonUnreachable, Some(&s.pin), None, &platform),
    )
}

/// Probe docker-oci on the machine behind `transport`: the declared docker
/// program, the engine at the socket, the pinned image, and a run of it.
///
/// `install` is the catalog row's install command for the machine's measured
/// platform (`None`: unmeasured, or no command for that platform).
///
/// Never an error: every way it can end is a [`Finding`] with its own
/// reason — `binary-absent`, `daemon-unreachable`, `probe-image-absent`,
/// `probe-output-invalid` (the image ran but its output broke the contract
/// of [`output`]), `probe-run-failed` (the engine refused to create, start or
/// finish the container, or the budget ran out).
pub async fn probe_docker_oci(
    transport: &Transport,
    s: &DockerProbeSettings,
    install: Option<&str>,
) -> Finding {
    let mut suffix = [0u8; 6];
    let _ = getrandom::fill(&mut suffix);
    let name = format!("saphan-probe-{}", hex::encode(suffix));
    let deadline = tokio::time::Instant::now() + s.budget;
    // Leave part of the budget for removing a container cut off mid-run.
    let run_budget = s
        .budget
        .saturating_sub(CLEANUP_RESERVE)
        .max(Duration::from_secs(1));
    let run_deadline = tokio::time::Instant::now() + run_budget;
    let run = async {
        tokio::select! {
            r = tokio::time::timeout(run_budget, probe_inner(transport, s, install, &name, run_deadline)) => r.ok(),
            // Ctrl-C: stop where it is and remove the container, as below.
            _ = crate::cancel::cancelled() => None,
        }
    };
    match run.await {
        Some(f) => f,
        None => {
            // The run was cut off wherever it was: remove the container by
            // its name, over a fresh connection (absent if never created) —
            // within what is left of the budget, never past it.
            if let Err(e) = remove_container(transport, &s.socket, None, &name, deadline).await {
                tracing::debug!(container = %name, error = %e, "removing after the budget");
            }
            finding(
                s,
                Outcome::Failed,
                Reason::ProbeRunFailed,
                format!(
                    "the probe did not finish within its {}s budget (--timeout)",
                    s.budget.as_secs()
                ),
                install,
            )
        }
    }
}

async fn probe_inner(
    transport: &Transport,
    s: &DockerProbeSettings,
    install: Option<&str>,
    name: &str,
    deadline: tokio::time::Instant,
) -> Finding {
    // Each step's own budget ends a little before the run's, so a step that
    // hangs is named for what it is (`daemon-unreachable` …) within --timeout.
    const MARGIN: Duration = Duration::from_millis(500);
    let step = |cap: Duration| {
        cap.min(left(deadline).saturating_sub(MARGIN))
            .max(Duration::from_millis(100))
    };
    // 1. The declared docker program.
    let argv = vec![s.declared_path.clone(), "--version".to_string()];
    let version_output = match transport.exec(&argv, step(Duration::from_secs(20))).await {
        Err(crate::transport::TransportError::Spawn { source, .. }) => {
            return finding(
                s,
                Outcome::Absent,
                Reason::BinaryAbsent,
                format!("no docker program at {} ({source})", s.declared_path),
                install,
            );
        }
        Err(e) => {
            return finding(
                s,
                Outcome::Failed,
                Reason::ProbeRunFailed,
                format!("could not run {} on the machine: {e}", s.declared_path),
                install,
            );
        }
        Ok(o) if matches!(o.status.code(), Some(126) | Some(127)) => {
            return finding(
                s,
                Outcome::Absent,
                Reason::BinaryAbsent,
                format!(
                    "no runnable docker program at {} ({})",
                    s.declared_path,
                    o.stderr_str()
                ),
                install,
            );
        }
        Ok(o) => {
            let mut t = o.stdout_str();
            let e = o.stderr_str();
            if !e.is_empty() {
                if !t.is_empty() {
                    t.push('\n');
                }
                t.push_str(&e);
            }
            t
        }
    };

    // 2. The engine.
    let docker = match connect(transport, &s.socket, step(s.budget)).await {
        Ok(d) => d,
        Err(why) => {
            let mut f = unreachable(transport, s, why, deadline).await;
            f.version_output = Some(version_output);
            return f;
        }
    };
    let api = docker.client_version().to_string();

    // 3. The pinned image, checked against the field its kind names.
    let reference = s.pin.reference();
    let absent = |why: String| {
        let mut f = finding(s, Outcome::Failed, Reason::ProbeImageAbsent, why, install);
        f.version_output = Some(version_output.clone());
        f
    };
    let image = match docker.inspect_image(&reference).await {
        Ok(i) => i,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {
            return absent(format!(
                "the engine at unix://{} holds no image {reference} (pinned by {})",
                s.socket,
                s.pin.kind()
            ));
        }
        Err(e) => {
            let mut f = unreachable(
                transport,
                s,
                format!("inspecting {reference} failed: {e}"),
                deadline,
            )
            .await;
            f.version_output = Some(version_output);
            return f;
        }
    };
    let id = image.id.clone().unwrap_or_default();
    let repo_digests = image.repo_digests.clone().unwrap_or_default();
    if !s.pin.matches(&id, &repo_digests) {
        return absent(format!(
            "the engine's image for {reference} is {id} with repo digests [{}], which does not carry the pin",
            repo_digests.join(", ")
        ));
    }

    // 4. Run it by ID (never by name, never pulling).
    let mut detail = Map::new();
    detail.insert("pin".into(), Value::from(reference.clone()));
    detail.insert("pin_kind".into(), Value::from(s.pin.kind()));
    detail.insert("image_id".into(), Value::from(id.clone()));
    detail.insert("api_version".into(), Value::from(api));
    detail.insert("socket".into(), Value::from(s.socket.clone()));
    let ran = run_image(&docker, &id, name, s.budget).await;
    // The container is removed whatever happened; a broken connection gets
    // a fresh one for the removal.
    if let Some(cid) = ran.container.as_deref() {
        // Within what is left of the probe's budget (its reserve included).
        let by = deadline + CLEANUP_RESERVE;
        if let Err(e) = remove_container(transport, &s.socket, Some(&docker), cid, by).await {
            tracing::warn!(container = cid, error = %e, "could not remove the probe container");
        }
    }
    let mut f = match ran.result {
        Err(why) => finding(s, Outcome::Failed, Reason::ProbeRunFailed, why, install),
        Ok((code, stdout)) => match output::parse(&stdout) {
            Ok(facts) if code == 0 => {
                detail.insert("vm".into(), Value::Object(facts.to_map()));
                Finding {
                    outcome: Some(Outcome::Present),
                    detail: detail.clone(),
                    ..Default::default()
                }
            }
            Ok(_) => finding(
                s,
                Outcome::Failed,
                Reason::ProbeOutputInvalid,
                format!("the probe container exited {code} although its output was complete"),
                install,
            ),
            Err(why) => {
                let shown: String = stdout.chars().take(400).collect();
                finding(
                    s,
                    Outcome::Failed,
                    Reason::ProbeOutputInvalid,
                    format!("image {id} ran (exit {code}) but {why}; its output was {shown:?}"),
                    install,
                )
            }
        },
    };
    if f.outcome != Some(Outcome::Present) {
        f.detail = detail;
    }
    f.version_output = Some(version_output);
    f
}

struct Ran {
    container: Option<String>,
    result: Result<(i64, String), String>,
}

async fn run_image(docker: &Docker, image_id: &str, name: &str, budget: Duration) -> Ran {
    let body = ContainerCreateBody {
        image: Some(image_id.to_string()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        network_disabled: Some(true),
        labels: Some([("org.saphan.probe".to_string(), "docker-oci".to_string())].into()),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            pids_limit: Some(16),
            ..Default::default()
        }),
        ..Default::default()
    };
    let opts = CreateContainerOptions {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let created = match docker.create_container(Some(opts), body).await {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                container: None,
                result: Err(format!(
                    "the engine refused to create the probe container: {e}"
                )),
            };
        }
    };
    let cid = created.id;
    let result = async {
        docker
            .start_container(&cid, None)
            .await
            .map_err(|e| match e {
                // The request's bound is the probe's budget (see `step`):
                // under a loaded engine the start itself can use it up.
                bollard::errors::Error::RequestTimeoutError => format!(
                    "the probe did not finish within its {}s budget (--timeout): the engine had not started its container",
                    budget.as_secs()
                ),
                e => format!("the engine refused to start the probe container: {e}"),
            })?;
        let code = wait_status(docker, &cid)
            .await
            .map_err(|e| format!("the probe container's end was not observed: {e}"))?;
        let out = read_logs(docker, &cid, 64 * 1024, None).await?.stdout;
        Ok((code, String::from_utf8_lossy(&out).into_owned()))
    }
    .await;
    Ran {
        container: Some(cid),
        result,
    }
}
