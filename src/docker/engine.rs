//! bollard against a machine's Docker socket, and the docker-oci probe run.
//!
//! The socket is reached through the machine's [`Transport`]: a local Unix
//! socket, or the remote socket forwarded over the machine's one SSH
//! connection (direct-streamlocal). One stream carries one HTTP/1.1
//! connection (hyper's http1 handshake) that bollard's custom transport sends
//! every request of the probe through, one after the other.
//!
//! The probe never calls the image-create (pull) endpoint: it inspects the
//! pinned image, then creates, starts, waits for and reads the logs of a
//! container made from the image's exact ID, and removes it afterwards.

use super::output;
use super::{Pin, Platform, Reason, failed};
use crate::fleet::finding::Finding;
use crate::fleet::ledger::Outcome;
use crate::transport::{AsyncReadWrite, Transport, TransportError};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, LogsOptions, RemoveContainerOptions, WaitContainerOptions,
};
use bollard::{BollardRequest, Docker};
use futures_util::StreamExt;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long the engine has to answer the version handshake.
pub const CONNECT_BUDGET: Duration = Duration::from_secs(15);
/// The part of a probe's budget kept for removing a container that was cut
/// off by the budget.
pub const CLEANUP_RESERVE: Duration = Duration::from_millis(1500);
/// How long removing the probe container may take.
pub const CLEANUP_BUDGET: Duration = Duration::from_secs(15);

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

/// Open a stream to `socket` on the machine behind `transport`: a local Unix
/// socket, or a direct-streamlocal channel on the machine's SSH connection.
/// `Err` is one sentence for the row's reason detail.
pub async fn open_socket(
    transport: &Transport,
    socket: &str,
) -> Result<Box<dyn AsyncReadWrite>, String> {
    transport
        .open_unix_socket(socket)
        .await
        .map_err(|e| match e {
            TransportError::UnixSocket { detail, .. } => {
                format!("cannot connect to unix://{socket}: {detail}")
            }
            other => format!("cannot connect to unix://{socket}: {other}"),
        })
}

/// A bollard client speaking HTTP/1.1 over `stream`, with the API version
/// negotiated down to what the engine speaks (Debian's docker.io: 1.41).
/// `timeout` bounds every request.
pub async fn client_over(
    stream: Box<dyn AsyncReadWrite>,
    timeout: Duration,
) -> Result<Docker, String> {
    let io = hyper_util::rt::TokioIo::new(stream);
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake on the socket failed: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "docker engine connection ended");
        }
    });
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let docker = Docker::connect_with_custom_transport(
        move |req: BollardRequest| {
            let sender = Arc::clone(&sender);
            async move {
                let (mut parts, body) = req.into_parts();
                // The stream already is the engine: send origin-form
                // (`/containers/create?…`) with a Host header, as the docker
                // CLI does over a Unix socket.
                let pq = parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_else(|| "/".into());
                parts.uri = pq.parse().map_err(bollard::errors::Error::from)?;
                parts.headers.insert(
                    hyper::header::HOST,
                    hyper::header::HeaderValue::from_static("docker"),
                );
                let req = BollardRequest::from_parts(parts, body);
                let fut = {
                    let mut s = sender.lock().await;
                    s.ready().await.map_err(bollard::errors::Error::from)?;
                    s.send_request(req)
                };
                fut.await.map_err(bollard::errors::Error::from)
            }
        },
        Some("http://docker"),
        timeout.as_secs().max(1),
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| e.to_string())?;
    docker
        .negotiate_version()
        .await
        .map_err(|e| format!("the engine did not answer the version handshake: {e}"))
}

/// Connect to the engine at `socket` on the machine, within [`CONNECT_BUDGET`]
/// or `timeout`, whichever is shorter (`timeout` also bounds each later
/// request). A socket that accepts and never answers fails at that bound.
pub async fn connect(
    transport: &Transport,
    socket: &str,
    timeout: Duration,
) -> Result<Docker, String> {
    let work = async {
        let stream = open_socket(transport, socket).await?;
        client_over(stream, timeout).await
    };
    let budget = CONNECT_BUDGET.min(timeout);
    match tokio::time::timeout(budget, work).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "unix://{socket} gave no answer within {:.1}s (a socket that accepts but never speaks HTTP, or an engine that hangs)",
            budget.as_secs_f64()
        )),
    }
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

/// The time from now until `deadline` (zero once it has passed).
fn left(deadline: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(tokio::time::Instant::now())
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
            _ = crate::fleet::run::cancelled() => None,
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

/// The exit status the engine's wait reports for `cid`.
///
/// A wait stream that ends without any status is an error (never 0): the
/// container's end was not observed.
pub(crate) async fn wait_status(docker: &Docker, cid: &str) -> Result<i64, String> {
    let mut code = None;
    let mut waits = docker.wait_container(cid, None::<WaitContainerOptions>);
    while let Some(w) = waits.next().await {
        match w {
            Ok(r) => code = Some(r.status_code),
            Err(bollard::errors::Error::DockerContainerWaitError { code: c, .. }) => code = Some(c),
            Err(e) => return Err(format!("the engine's wait for the container failed: {e}")),
        }
    }
    code.ok_or_else(|| {
        "the engine's wait for the container ended without an exit status".to_string()
    })
}

/// Demultiplexed logs: stdout (TTY console frames count as stdout, their
/// CRLF line ends made LF) and stderr, each stream joined across frames.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    /// What the container wrote to stdout: all of it, or, when
    /// [`read_logs`] streams stdout to a file, what is not written there yet.
    pub stdout: Vec<u8>,
    /// The last `stderr_cap` bytes of its stderr.
    pub stderr: Vec<u8>,
    console_cr: bool,
}

/// Past this many bytes of stdout held, [`read_logs`] writes them to its
/// file (1 MiB).
const LOG_CHUNK: usize = 1024 * 1024;

impl Logs {
    fn console(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.console_cr {
                self.console_cr = false;
                if b != b'\n' {
                    self.stdout.push(b'\r');
                }
            }
            if b == b'\r' {
                self.console_cr = true;
            } else {
                self.stdout.push(b);
            }
        }
    }
    fn finish(&mut self) {
        if std::mem::take(&mut self.console_cr) {
            self.stdout.push(b'\r');
        }
    }
}

/// Read the finished container's whole log, demultiplexed. With
/// `stdout_to`, its stdout is streamed into that file (created or
/// truncated) as it comes, never held whole — a suite's stdout can be
/// hundreds of MB — and [`Logs::stdout`] comes back empty; without it,
/// stdout is returned whole (the probe's few lines).
///
/// Errors: the engine's log stream failing, or the file not written (a
/// full disk) — either way the stdout is not whole and is not used.
pub(crate) async fn read_logs(
    docker: &Docker,
    cid: &str,
    stderr_cap: usize,
    stdout_to: Option<&std::path::Path>,
) -> Result<Logs, String> {
    use tokio::io::AsyncWriteExt;
    let opts = LogsOptions {
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let unwritten = |p: &std::path::Path, e: std::io::Error| {
        format!("could not keep the suite's stdout in {}: {e}", p.display())
    };
    let mut file = match stdout_to {
        Some(p) => Some((
            tokio::fs::File::create(p)
                .await
                .map_err(|e| unwritten(p, e))?,
            p,
        )),
        None => None,
    };
    let mut out = Logs::default();
    let mut stderr = crate::exec::TailBuf::new(stderr_cap);
    let mut logs = docker.logs(cid, Some(opts));
    while let Some(frame) = logs.next().await {
        match frame {
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                out.stdout.extend_from_slice(&message)
            }
            Ok(bollard::container::LogOutput::Console { message }) => out.console(&message),
            Ok(bollard::container::LogOutput::StdErr { message }) => stderr.push(&message),
            Ok(bollard::container::LogOutput::StdIn { .. }) => {}
            Err(e) => return Err(format!("reading the container's output failed: {e}")),
        }
        if let Some((f, p)) = file.as_mut()
            && out.stdout.len() >= LOG_CHUNK
        {
            f.write_all(&out.stdout)
                .await
                .map_err(|e| unwritten(p, e))?;
            out.stdout.clear();
        }
    }
    out.finish();
    if let Some((mut f, p)) = file {
        f.write_all(&out.stdout)
            .await
            .map_err(|e| unwritten(p, e))?;
        f.flush().await.map_err(|e| unwritten(p, e))?;
        out.stdout = Vec::new();
    }
    out.stderr = stderr.finish();
    Ok(out)
}

/// Remove container `name_or_id` (forced: killed first if running, its
/// anonymous volumes with it) on `docker`, and over a fresh connection to
/// `socket` when there is none or that request failed: each request within
/// [`CLEANUP_BUDGET`], both before `deadline`. Already gone (404) is
/// removed; a removal the engine has already in progress (409) is waited
/// for until the container is gone. `Err` says why it may remain.
pub(crate) async fn remove_container(
    transport: &Transport,
    socket: &str,
    docker: Option<&Docker>,
    name_or_id: &str,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    let budget = || CLEANUP_BUDGET.min(left(deadline));
    if let Some(d) = docker
        && let Ok(Ok(())) = tokio::time::timeout(budget(), remove_on(d, name_or_id)).await
    {
        return Ok(());
    }
    let budget = budget();
    let again = async {
        let d = connect(transport, socket, budget).await?;
        remove_on(&d, name_or_id).await
    };
    match tokio::time::timeout(budget, again).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the engine gave no answer within {:.0}s",
            budget.as_secs_f64().ceil()
        )),
    }
}

/// The deadline of a removal that has no budget of its own to keep: one
/// [`CLEANUP_BUDGET`] for the request on the open connection and one for a
/// fresh connection's.
pub(crate) fn cleanup_deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + 2 * CLEANUP_BUDGET
}

/// One forced removal request on `d`, as [`remove_container`] judges it
/// (gone already counts as removed).
pub(super) async fn remove_on(d: &Docker, name_or_id: &str) -> Result<(), String> {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    match d.remove_container(name_or_id, Some(opts)).await {
        Ok(()) => Ok(()),
        // Already gone (never created, or removed): nothing left.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // A conflict on a forced removal: the engine is already removing it
        // ("removal of container … is already in progress"). Wait until it
        // is gone; the inspect after the wait is the proof, not the words,
        // and the caller's deadline bounds the wait.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => removed(d, name_or_id).await,
        Err(e) => Err(e.to_string()),
    }
}

/// Wait until the engine has removed `name_or_id` (`condition=removed`),
/// then confirm it is gone.
async fn removed(d: &Docker, name_or_id: &str) -> Result<(), String> {
    let opts = WaitContainerOptions {
        condition: "removed".into(),
    };
    let mut waits = d.wait_container(name_or_id, Some(opts));
    // The wait's own answer (an exit status, or 404 once it is gone) only
    // says the wait is over; the inspect below is the proof.
    while waits.next().await.is_some() {}
    match d.inspect_container(name_or_id, None).await {
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Ok(_) => Err("the engine's removal in progress did not remove it".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_frames_lose_crlf_across_frames() {
        let mut l = Logs::default();
        l.console(b"a\r");
        l.console(b"\nb\r\r\n");
        l.console(b"c\r");
        l.finish();
        assert_eq!(l.stdout, b"a\nb\r\nc\r");
    }
}
