//! bollard against a machine's Docker socket: one stream to the engine's
//! Unix socket through the machine's [`Transport`] (a local Unix socket, or
//! the remote socket forwarded over the machine's one SSH connection,
//! direct-streamlocal), carrying one HTTP/1.1 connection (hyper's http1
//! handshake) that bollard's custom transport sends every request through,
//! one after the other; and the container steps every run shares (wait,
//! logs, removal). The docker-oci probe that runs over it lives with the
//! fleet's other probes (`crate::fleet::docker_probes`).

use crate::transport::{AsyncReadWrite, Transport, TransportError};
use bollard::query_parameters::{LogsOptions, RemoveContainerOptions, WaitContainerOptions};
use bollard::{BollardRequest, Docker};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// How long the engine has to answer the version handshake.
pub const CONNECT_BUDGET: Duration = Duration::from_secs(15);
/// The part of a probe's budget kept for removing a container that was cut
/// off by the budget.
pub const CLEANUP_RESERVE: Duration = Duration::from_millis(1500);
/// How long removing the probe container may take.
pub const CLEANUP_BUDGET: Duration = Duration::from_secs(15);

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

/// The time from now until `deadline` (zero once it has passed).
pub fn left(deadline: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(tokio::time::Instant::now())
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
