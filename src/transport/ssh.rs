//! The SSH side of [`super::Transport`], on russh.
//!
//! One connection per machine: an [`Ssh`] holds one authenticated russh
//! session (behind an `Arc`, so clones share it) and opens one channel per
//! command, at most [`SshOptions::max_sessions`] at a time (OpenSSH's sshd
//! allows 10 session channels per connection by default). A session that died
//! (keep-alive got no answer, the server went away) is replaced by a fresh
//! connection on the next call; a command that was running on it fails with
//! `connection-lost` and may still be running remotely — nothing here assumes
//! a remote cleanup happened.
//!
//! Connecting: TCP (or a `direct-tcpip` channel through the `ProxyJump` host)
//! within `ConnectTimeout`, the SSH handshake with a strict known_hosts check
//! (unknown or changed key: refused, nothing runs), then key authentication
//! with each `IdentityFile` in order, then the ssh-agent.

use super::ssh_config::{self, HostSettings, parse_jump};
use super::watchdog::{Finished, Supervised};
use super::{AsyncReadWrite, TransportError, known_hosts, quote};
use crate::exec::{Cmd, Sink};
use crate::exec::{Output, REMOTE_STDOUT_WHOLE, STDERR_TAIL, TailBuf, Termination, WholeBuf};
use russh::client::{self, Handle};
use russh::keys::{HashAlg, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, ChannelOpenFailure, Sig};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::Semaphore;

/// How many `ProxyJump` hops a chain may have (a longer one is likely a loop).
const MAX_JUMPS: usize = 4;

/// Defaults for what an ssh config leaves open. Values from the host's
/// settings (`ConnectTimeout`, `ServerAliveInterval`, `ServerAliveCountMax`)
/// win over these.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// TCP connect budget when the config sets no `ConnectTimeout` (default
    /// 10 s); also the budget for opening a forwarded socket.
    pub connect_timeout: Duration,
    /// Budget for the SSH handshake plus authentication once TCP is up
    /// (default 30 s; never less than the connect budget).
    pub handshake_timeout: Duration,
    /// Keep-alive interval when the config sets no `ServerAliveInterval`
    /// (default 5 s). A session whose server does not answer
    /// `keepalive_max` keep-alives in a row is closed.
    pub keepalive_interval: Duration,
    /// Session channels open at once on one connection (default 8; sshd's
    /// `MaxSessions` defaults to 10).
    pub max_sessions: usize,
    /// Budget for one `put` or `get` (default 600 s).
    pub transfer_timeout: Duration,
}

impl Default for SshOptions {
    fn default() -> SshOptions {
        SshOptions {
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(5),
            max_sessions: 8,
            transfer_timeout: Duration::from_secs(600),
        }
    }
}

/// A machine reached over SSH. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Ssh {
    inner: Arc<Inner>,
}

impl Ssh {
    /// What the supervisor reported for the last command that carried the
    /// scratch marker (`None` before one ran).
    pub fn containment(&self) -> Option<crate::exec::Containment> {
        self.inner.containment.lock().ok().and_then(|g| *g)
    }

    /// Note what the supervisor reported (watchdog).
    pub(super) fn set_containment(&self, c: crate::exec::Containment) {
        if let Ok(mut g) = self.inner.containment.lock() {
            *g = Some(c);
        }
    }
}

struct Inner {
    settings: HostSettings,
    opts: SshOptions,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    sessions: Arc<Semaphore>,
    /// What the supervisor reported for the last command that carried the
    /// scratch marker ([`super::watchdog`]).
    containment: std::sync::Mutex<Option<crate::exec::Containment>>,
    /// The last connection closed and was discarded, and no new one has
    /// opened since ([`Ssh::connection_gone`]).
    lost: std::sync::atomic::AtomicBool,
}

struct Conn {
    handle: Handle<Client>,
    /// The jump host's connection, kept alive as long as this one.
    _jump: Option<Ssh>,
}

impl std::fmt::Debug for Ssh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.inner.settings;
        write!(f, "Ssh({} = {}@{}:{})", s.alias, s.user, s.hostname, s.port)
    }
}

/// What the known_hosts check decided about the server's key.
#[derive(Debug, Clone)]
enum KeyVerdict {
    Known,
    Unknown {
        key_type: String,
        fingerprint: String,
    },
    Changed {
        file: PathBuf,
        line: usize,
        key_type: String,
        fingerprint: String,
        revoked: bool,
    },
    Unreadable {
        file: PathBuf,
        detail: String,
    },
}

struct Client {
    /// Name looked up in known_hosts (`HostKeyAlias` or the host name).
    name: String,
    port: u16,
    files: Vec<PathBuf>,
    verdict: Arc<Mutex<Option<KeyVerdict>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let verdict = match key {
            PublicKeyOrCertificate::PublicKey { key, .. } => self.check(key),
            PublicKeyOrCertificate::Certificate(c) => {
                // Host certificates would need @cert-authority lines; treat
                // them as an unknown key so nothing runs.
                KeyVerdict::Unknown {
                    key_type: format!("{} certificate", c.algorithm()),
                    fingerprint: c.public_key().fingerprint(HashAlg::Sha256).to_string(),
                }
            }
        };
        let ok = matches!(verdict, KeyVerdict::Known);
        *self.verdict.lock().unwrap() = Some(verdict);
        Ok(ok)
    }
}

impl Client {
    fn check(&self, key: &PublicKey) -> KeyVerdict {
        let key_type = key.algorithm().to_string();
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        match known_hosts::check(&self.files, &self.name, self.port, key) {
            known_hosts::Verdict::Known => KeyVerdict::Known,
            known_hosts::Verdict::Unknown => KeyVerdict::Unknown {
                key_type,
                fingerprint,
            },
            known_hosts::Verdict::Changed { file, line } => KeyVerdict::Changed {
                file,
                line,
                key_type,
                fingerprint,
                revoked: false,
            },
            known_hosts::Verdict::Revoked { file, line } => KeyVerdict::Changed {
                file,
                line,
                key_type,
                fingerprint,
                revoked: true,
            },
            known_hosts::Verdict::Unreadable { file, detail } => {
                KeyVerdict::Unreadable { file, detail }
            }
        }
    }
}

impl Ssh {
    /// Connect and authenticate now; errors are named (see [`TransportError`]).
    pub async fn connect(
        settings: &HostSettings,
        opts: &SshOptions,
    ) -> Result<Ssh, TransportError> {
        connect_depth(settings.clone(), opts.clone(), 0).await
    }

    /// The settings this machine was reached with.
    pub fn settings(&self) -> &HostSettings {
        &self.inner.settings
    }

    fn alias(&self) -> String {
        self.inner.settings.alias.clone()
    }

    /// The live connection, reconnecting when the previous one died.
    async fn conn(&self) -> Result<Arc<Conn>, TransportError> {
        let mut guard = self.inner.conn.lock().await;
        if let Some(c) = guard.as_ref()
            && !c.handle.is_closed()
        {
            return Ok(c.clone());
        }
        if guard.take().is_some() {
            // Closed under a run that may not have noticed yet: remember
            // it until a new connection opens (see `connection_gone`).
            self.inner
                .lost
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let c =
            Arc::new(open_boxed(self.inner.settings.clone(), self.inner.opts.clone(), 0).await?);
        self.inner
            .lost
            .store(false, std::sync::atomic::Ordering::Relaxed);
        *guard = Some(c.clone());
        Ok(c)
    }

    /// Whether the server of the open connection answers an SSH ping (a
    /// `keepalive@openssh.com` global request that wants a reply; OpenSSH
    /// answers it, with a failure, at once) within `within`. `false` when
    /// it does not answer in time or the connection is closed, or was lost
    /// and none replaced it yet; `true` when no connection was opened
    /// (nothing to ask). It declares nothing lost:
    /// that stays the keep-alive limit's (`ServerAliveInterval` ×
    /// `ServerAliveCountMax`). The scheduler asks it while a batch runs, to
    /// start a copy of the batch elsewhere early
    /// ([`crate::dispatch::Feed::suspect`]).
    pub async fn answers_ping(&self, within: Duration) -> bool {
        // The bound covers waiting for the connection too (a reconnect
        // holds it while it connects).
        let ask = async {
            let c = {
                let guard = self.inner.conn.lock().await;
                match guard.as_ref() {
                    Some(c) if c.handle.is_closed() => return false,
                    Some(c) => c.clone(),
                    None => {
                        return !self.inner.lost.load(std::sync::atomic::Ordering::Relaxed);
                    }
                }
            };
            c.handle.send_ping().await.is_ok() && !c.handle.is_closed()
        };
        tokio::time::timeout(within, ask).await.unwrap_or(false)
    }

    /// `ServerAliveInterval` for this machine ([`keepalive`]).
    pub fn keepalive_interval(&self) -> Duration {
        keepalive(&self.inner.settings, &self.inner.opts).0
    }

    /// Whether the connection this machine was last using is gone (its
    /// server left unanswered `ServerAliveCountMax` keep-alives sent every
    /// `ServerAliveInterval`, or the server closed it): `Some(why)` naming
    /// the keep-alive limit, `None` while it is up or no connection was
    /// opened. Used by runs whose own stream (a forwarded socket) cannot
    /// tell a dead connection from a failing peer.
    ///
    /// A closed connection that another call already discarded (and could
    /// not replace: the machine is still cut off) counts as gone too, so a
    /// run racing a reconnect attempt is not told `engine`.
    ///
    /// A connection that still looks open is asked once: a session channel
    /// opened within the keep-alive limit (`ServerAliveInterval` ×
    /// `ServerAliveCountMax`) says it is up — a live server answers in
    /// milliseconds, so a real engine failure is not delayed; no answer by
    /// then means it is gone (the run's stream may fail before the
    /// keep-alive notices the cut).
    pub async fn connection_gone(&self) -> Option<String> {
        let c = {
            let guard = self.inner.conn.lock().await;
            match guard.as_ref() {
                Some(c) if c.handle.is_closed() => {
                    return Some(self.gone_detail("the connection closed"));
                }
                Some(c) => c.clone(),
                None => {
                    return self
                        .inner
                        .lost
                        .load(std::sync::atomic::Ordering::Relaxed)
                        .then(|| self.gone_detail("the connection closed"));
                }
            }
        };
        let (interval, max) = keepalive(&self.inner.settings, &self.inner.opts);
        let limit = interval * max;
        match tokio::time::timeout(limit, c.handle.channel_open_session()).await {
            Ok(Ok(ch)) => {
                let _ = ch.close().await;
                None
            }
            // The server answered (e.g. MaxSessions reached): it is up.
            Ok(Err(russh::Error::ChannelOpenFailure(_))) => None,
            Ok(Err(e)) => Some(self.gone_detail(&format!("a new channel failed: {e}"))),
            Err(_) => Some(self.gone_detail(&format!(
                "no answer to a new channel within {}s",
                limit.as_secs_f64()
            ))),
        }
    }

    /// `the SSH connection is gone (<detail>; keep-alive every Ns, declared
    /// dead after M s of silence)`.
    fn gone_detail(&self, detail: &str) -> String {
        let (interval, max) = keepalive(&self.inner.settings, &self.inner.opts);
        format!(
            "the SSH connection is gone ({detail}; keep-alive every {}s, declared dead after {}s of silence)",
            interval.as_secs_f64(),
            dead_after(interval, max).as_secs_f64()
        )
    }

    /// Close the connection politely (the next call reconnects).
    pub async fn disconnect(&self) {
        if let Some(c) = self.inner.conn.lock().await.take() {
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                c.handle
                    .disconnect(russh::Disconnect::ByApplication, "", "en"),
            )
            .await;
        }
    }

    /// Run `argv` remotely, every word quoted for the remote shell; its
    /// stdout captured as `sink` says.
    pub(super) async fn exec(
        &self,
        argv: &[String],
        timeout: Duration,
        sink: OutSink,
    ) -> Result<Output, TransportError> {
        let line = command_line(argv)?;
        self.run_line_with(&line, None, sink, timeout, None).await
    }

    /// Copy a local file to `remote`: written to a temp file beside it, given
    /// the local file's permission bits, then renamed into place.
    pub async fn put(&self, local: &Path, remote: &str) -> Result<(), TransportError> {
        use std::os::unix::fs::PermissionsExt;
        let what = format!("{} to {}:{remote}", local.display(), self.alias());
        let file = tokio::fs::File::open(local)
            .await
            .map_err(|source| TransportError::Copy {
                what: what.clone(),
                source,
            })?;
        let mode = file
            .metadata()
            .await
            .map_err(|source| TransportError::Copy {
                what: what.clone(),
                source,
            })?
            .permissions()
            .mode()
            & 0o7777;
        let line = command_line(&[
            "sh",
            "-c",
            crate::remote::PUT,
            "saphan-put",
            remote,
            &format!("{mode:o}"),
        ])?;
        let budget = self.inner.opts.transfer_timeout;
        let out = self
            .run_line(&line, Some(Box::pin(file)), None, budget)
            .await?;
        self.transfer_result(&what, out, budget)
    }

    /// Copy `remote` to a local file (written to a temp file beside it, then
    /// renamed into place).
    pub async fn get(&self, remote: &str, local: &Path) -> Result<(), TransportError> {
        let what = format!("{}:{remote} to {}", self.alias(), local.display());
        let copy_err = |source| TransportError::Copy {
            what: what.clone(),
            source,
        };
        let dir = match local.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".saphan-get.")
            .tempfile_in(&dir)
            .map_err(copy_err)?;
        let file = tokio::fs::File::from_std(tmp.reopen().map_err(copy_err)?);
        let line = command_line(&["cat", "--", remote])?;
        let budget = self.inner.opts.transfer_timeout;
        let out = self.run_line(&line, None, Some(file), budget).await?;
        self.transfer_result(&what, out, budget)?;
        tmp.persist(local).map_err(|e| copy_err(e.error))?;
        Ok(())
    }

    fn transfer_result(
        &self,
        what: &str,
        out: Output,
        budget: Duration,
    ) -> Result<(), TransportError> {
        match out.status {
            Termination::Exited(0) => Ok(()),
            Termination::TimedOut => Err(TransportError::RemoteTimeout {
                alias: self.alias(),
                what: format!("copying {what}"),
                budget,
            }),
            other => Err(TransportError::RemoteCopy {
                what: what.to_string(),
                detail: format!("{other:?}: {}", out.stderr_str()),
            }),
        }
    }

    /// A byte stream to the Unix socket `path` on the machine
    /// (`direct-streamlocal@openssh.com`, the way `ssh -L local:remote.sock` works).
    pub async fn open_unix_socket(
        &self,
        path: &str,
    ) -> Result<Box<dyn AsyncReadWrite>, TransportError> {
        let conn = self.conn().await?;
        let budget = self.connect_budget();
        match tokio::time::timeout(budget, conn.handle.channel_open_direct_streamlocal(path)).await
        {
            Ok(Ok(ch)) => Ok(Box::new(ch.into_stream())),
            Ok(Err(e)) => Err(TransportError::UnixSocket {
                alias: self.alias(),
                path: path.to_string(),
                detail: match e {
                    russh::Error::ChannelOpenFailure(f) => open_failure(&f),
                    e => e.to_string(),
                },
            }),
            Err(_) => Err(TransportError::RemoteTimeout {
                alias: self.alias(),
                what: format!("opening the socket {path}"),
                budget,
            }),
        }
    }

    pub(super) fn transfer_budget(&self) -> Duration {
        self.inner.opts.transfer_timeout
    }

    fn connect_budget(&self) -> Duration {
        self.inner
            .settings
            .connect_timeout
            .unwrap_or(self.inner.opts.connect_timeout)
    }

    /// Run one remote command line on a fresh channel. `stdin` is sent and
    /// then closed (no stdin: closed at once); stdout goes to `out_file` or is
    /// captured. Reads until the channel closes, because the exit status can
    /// arrive after EOF.
    ///
    /// Every stream is bounded: captured stdout is kept whole up to
    /// [`REMOTE_STDOUT_WHOLE`] bytes and refused past it
    /// ([`Termination::OutputLost`]), stderr keeps its last [`STDERR_TAIL`]
    /// (issue 13.5: a login shell printing hundreds of MB cannot grow
    /// saphan's memory).
    async fn run_line(
        &self,
        line: &str,
        stdin: Option<Pin<Box<dyn AsyncRead + Send>>>,
        out_file: Option<tokio::fs::File>,
        timeout: Duration,
    ) -> Result<Output, TransportError> {
        let sink = match out_file {
            Some(f) => OutSink::File(f),
            None => OutSink::Capture,
        };
        self.run_line_with(line, stdin, sink, timeout, None).await
    }

    pub(super) async fn run_line_with(
        &self,
        line: &str,
        stdin: Option<Pin<Box<dyn AsyncRead + Send>>>,
        sink: OutSink,
        timeout: Duration,
        mut scan: Option<&mut super::watchdog::GroupScan>,
    ) -> Result<Output, TransportError> {
        let start = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let (mut out_file, discard, mut stdout) = match sink {
            OutSink::File(f) => (Some(f), false, WholeBuf::new(0)),
            OutSink::Capture => (None, false, WholeBuf::new(REMOTE_STDOUT_WHOLE)),
            OutSink::CaptureFrom(m) => (None, false, WholeBuf::from_marker(REMOTE_STDOUT_WHOLE, m)),
            OutSink::Null => (None, true, WholeBuf::new(0)),
        };
        let mut stderr = TailBuf::new(STDERR_TAIL);
        let timed_out = |stdout: WholeBuf, stderr: TailBuf| Output {
            status: Termination::TimedOut,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            elapsed: start.elapsed(),
        };
        let Ok(permit) =
            tokio::time::timeout_at(deadline, self.inner.sessions.clone().acquire_owned()).await
        else {
            return Ok(timed_out(stdout, stderr));
        };
        let _permit = permit.expect("semaphore never closed");
        let conn = match tokio::time::timeout_at(deadline, self.conn()).await {
            Ok(c) => c?,
            Err(_) => return Ok(timed_out(stdout, stderr)),
        };
        // sshd refuses a session channel past its MaxSessions, and frees a
        // slot only a little after the previous channel closed: a refused
        // open is retried with a growing pause until the budget runs out.
        let mut pause = Duration::from_millis(10);
        let ch = loop {
            match tokio::time::timeout_at(deadline, conn.handle.channel_open_session()).await {
                Ok(Ok(ch)) => break ch,
                Ok(Err(russh::Error::ChannelOpenFailure(_))) if !conn.handle.is_closed() => {
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Ok(timed_out(stdout, stderr));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Ok(Err(e)) => {
                    return Err(self.lost(&conn, &format!("could not open a channel: {e}")));
                }
                Err(_) => return Ok(timed_out(stdout, stderr)),
            }
        };
        let (mut rx, tx) = ch.split();
        let mut status = None;
        let mut refused = false;
        let mut write_err = None;
        // A write the server leaves unacknowledged (no window adjust) for
        // twice the keep-alive limit means the machine is cut off: a live
        // server opens the window in milliseconds. Without this bound a
        // copy stalled on a full send buffer waited for the transfer budget
        // whenever the keep-alive was late to notice (a loaded machine).
        let (interval, max) = keepalive(&self.inner.settings, &self.inner.opts);
        let stall = interval * max * 2;
        let stalled = std::sync::atomic::AtomicBool::new(false);
        let run = async {
            tx.exec(true, line.as_bytes()).await?;
            let writer = async {
                if let Some(mut r) = stdin {
                    use tokio::io::AsyncReadExt;
                    let mut buf = vec![0u8; 256 * 1024];
                    loop {
                        let n = r.read(&mut buf).await?;
                        if n == 0 {
                            break;
                        }
                        if tokio::time::timeout(stall, tx.data(&buf[..n]))
                            .await
                            .is_err()
                        {
                            stalled.store(true, std::sync::atomic::Ordering::Relaxed);
                            return Err(russh::Error::SendError);
                        }
                    }
                }
                tx.eof().await
            };
            let reader = async {
                while let Some(msg) = rx.wait().await {
                    match msg {
                        ChannelMsg::Data { data } => match out_file.as_mut() {
                            Some(f) => {
                                if let Err(e) = f.write_all(&data).await {
                                    write_err = Some(e);
                                    break;
                                }
                            }
                            None if discard => {}
                            None => stdout.push(&data),
                        },
                        ChannelMsg::ExtendedData { data, ext: 1 } => {
                            if let Some(sc) = scan.as_deref_mut() {
                                sc.feed(&data);
                            }
                            stderr.push(&data)
                        }
                        ChannelMsg::ExitStatus { exit_status } => {
                            status = Some(Termination::Exited(exit_status as i32))
                        }
                        ChannelMsg::ExitSignal { signal_name, .. } => {
                            status = Some(Termination::Signaled(signal_number(&signal_name)))
                        }
                        ChannelMsg::Failure => {
                            refused = true;
                            break;
                        }
                        ChannelMsg::Close => break,
                        _ => {}
                    }
                }
            };
            let mut writer = std::pin::pin!(writer);
            let mut reader = std::pin::pin!(reader);
            let mut written = false;
            loop {
                tokio::select! {
                    _ = &mut writer, if !written => {
                        written = true;
                        if stalled.load(std::sync::atomic::Ordering::Relaxed) {
                            return Err(russh::Error::SendError);
                        }
                    }
                    _ = &mut reader => break,
                }
            }
            Ok::<(), russh::Error>(())
        };
        let res = tokio::time::timeout_at(deadline, run).await;
        if let Some(f) = out_file.as_mut()
            && let Err(e) = f.flush().await
        {
            // A write can fail only here, when the last bytes reach the disk.
            write_err.get_or_insert(e);
        }
        match res {
            Err(_) => {
                // Past the budget: ask the remote side to stop and close the
                // channel. The process may be left running (no pty, or the
                // machine is cut off); callers must not assume it stopped.
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    let _ = tx.signal(Sig::TERM).await;
                    let _ = tx.close().await;
                })
                .await;
                Ok(timed_out(stdout, stderr))
            }
            Ok(Err(_)) if stalled.load(std::sync::atomic::Ordering::Relaxed) => Err(self.lost(
                &conn,
                &format!(
                    "a write to it went unacknowledged for {}s (twice the keep-alive limit)",
                    stall.as_secs_f64()
                ),
            )),
            Ok(Err(e)) => Err(self.lost(&conn, &format!("sending the command failed: {e}"))),
            Ok(Ok(())) => {
                if let Some(e) = write_err {
                    return Err(TransportError::RemoteCopy {
                        what: format!("output of a command on {}", self.alias()),
                        detail: format!("writing the local file: {e}"),
                    });
                }
                if refused {
                    return Err(TransportError::Handshake {
                        alias: self.alias(),
                        addr: addr(&self.inner.settings),
                        detail: "the server refused to run the command (exec request denied)"
                            .into(),
                    });
                }
                match status {
                    Some(status) => {
                        let mut stderr = stderr.finish();
                        let status = match stdout.overflow_why() {
                            Some(why) => {
                                // First, not last: the watchdog reads its
                                // end markers from the end of stderr.
                                let line = crate::exec::output_lost_line(&why);
                                stderr.splice(0..0, line.into_bytes());
                                Termination::OutputLost
                            }
                            None => status,
                        };
                        Ok(Output {
                            status,
                            stdout: stdout.finish(),
                            stderr,
                            elapsed: start.elapsed(),
                        })
                    }
                    None => Err(self.lost(&conn, "the channel closed without an exit status")),
                }
            }
        }
    }

    fn lost(&self, conn: &Conn, detail: &str) -> TransportError {
        let detail = if conn.handle.is_closed() {
            self.gone_detail(detail)
        } else {
            detail.to_string()
        };
        TransportError::ConnectionLost {
            alias: self.inner.settings.alias.clone(),
            detail,
        }
    }
}

impl Ssh {
    /// Run `cmd` on the machine under the [`WATCHDOG`](super::watchdog::WATCHDOG) ([`super::watchdog`]): same
    /// [`Output`] meaning as [`crate::exec::run`]. Without a budget in `cmd`
    /// the transfer budget ([`super::SshOptions::transfer_timeout`]) applies.
    ///
    /// Errors: `bad-argument` (a word that is not UTF-8 or holds a NUL),
    /// `spawn` (the program, `setsid` or the working directory is missing on
    /// the machine), `copy` (the local stdin file or stdout file),
    /// `connection-lost`, and the connection errors of [`Ssh::connect`].
    pub async fn run(&self, cmd: Cmd) -> Result<Output, TransportError> {
        let run = Supervised::new(cmd.budget().unwrap_or(self.transfer_budget()));
        let line =
            quote::command_line(&run.argv(&cmd)?).map_err(|i| TransportError::BadArgument {
                detail: format!("word {i} of the command holds a NUL byte"),
            })?;
        let copy = |what: String| move |source| TransportError::Copy { what, source };
        let stdin = cmd
            .stdin_input()
            .open()
            .await
            .map_err(copy(format!("the stdin of `{}`", cmd.display())))?;
        let sink = match cmd.sink() {
            Sink::Capture => OutSink::Capture,
            Sink::CaptureFrom(m) => OutSink::CaptureFrom(m.clone()),
            Sink::Null => OutSink::Null,
            Sink::File(p) => OutSink::File(tokio::fs::File::create(p).await.map_err(copy(
                format!("the stdout of `{}` to {}", cmd.display(), p.display()),
            ))?),
        };
        let mut scan = run.scan();
        let ssh = self.clone();
        let mut guard = run.guard(Arc::new(move |p, bound| {
            let ssh = ssh.clone();
            Box::pin(async move {
                let argv = ["kill", "-s", "KILL", "--", &format!("-{p}")].map(String::from);
                let _ = ssh.exec(&argv, bound, OutSink::Capture).await;
            })
        }));
        let out = self
            .run_line_with(&line, stdin, sink, run.wait(), Some(&mut scan))
            .await?;
        if let Some(c) = scan.containment() {
            self.set_containment(c);
        }
        match run.finish(out, &cmd, &self.settings().alias, &mut guard) {
            Finished::Ended(out) => Ok(out),
            Finished::Refused(e) => Err(e),
            // No honest status to give: the wrapper itself died.
            Finished::Unreported(out) => Err(TransportError::ConnectionLost {
                alias: self.settings().alias.clone(),
                detail: format!(
                    "the remote supervisor ended ({:?}) without reporting how `{}` ended",
                    out.status,
                    cmd.display()
                ),
            }),
        }
    }
}

/// The keep-alive of a connection to `s`: (interval, unanswered count) —
/// `ServerAliveInterval` (else [`SshOptions::keepalive_interval`]) and
/// `ServerAliveCountMax` (OpenSSH's default 3; at least 1). A connection
/// whose server answers nothing is declared dead at the keep-alive limit,
/// interval × count after the server's last packet — the figure
/// ssh_config(5) gives ("if ServerAliveInterval is set to 15 and
/// ServerAliveCountMax is left at the default … ssh will disconnect after
/// approximately 45 seconds"); OpenSSH's `ssh` itself waits one interval
/// more. With a count of 1 it is 2 × interval (one keep-alive sent, one
/// interval to answer it).
pub fn keepalive(s: &HostSettings, opts: &SshOptions) -> (Duration, u32) {
    (
        s.server_alive_interval.unwrap_or(opts.keepalive_interval),
        s.server_alive_count_max.max(1),
    )
}

/// russh's `keepalive_max` for a keep-alive count: russh closes the
/// connection when the keep-alive timer fires with more than
/// `keepalive_max` keep-alives unanswered — at (`keepalive_max` + 1) ×
/// interval of silence — so count − 1 closes it at count × interval (see
/// [`keepalive`]); 0 would mean never, so a count of 1 keeps 1.
fn unanswered_before_close(count: u32) -> usize {
    (count.max(2) - 1) as usize
}

/// The silence after which a connection with this keep-alive is declared
/// dead: what russh does with [`unanswered_before_close`]'s count.
fn dead_after(interval: Duration, count: u32) -> Duration {
    interval * (unanswered_before_close(count) as u32 + 1)
}

/// Where a remote command's stdout goes.
pub(super) enum OutSink {
    /// Kept in memory, whole up to [`REMOTE_STDOUT_WHOLE`] bytes.
    Capture,
    /// Kept in memory from the first occurrence of these bytes on (at most
    /// [`REMOTE_STDOUT_WHOLE`]); see [`crate::exec::Sink::CaptureFrom`].
    CaptureFrom(Vec<u8>),
    /// Streamed into this local file.
    File(tokio::fs::File),
    /// Read and dropped.
    Null,
}

pub(super) fn command_line<S: AsRef<str>>(argv: &[S]) -> Result<String, TransportError> {
    if argv.is_empty() {
        return Err(TransportError::BadArgument {
            detail: "an empty command".into(),
        });
    }
    let line = quote::command_line(argv).map_err(|i| TransportError::BadArgument {
        detail: format!(
            "word {i} of the command holds a NUL byte, which no remote command can receive"
        ),
    })?;
    if line.len() > MAX_COMMAND_LINE {
        return Err(TransportError::ArgumentTooLong {
            bytes: line.len(),
            max: MAX_COMMAND_LINE,
        });
    }
    Ok(line)
}

/// The longest command line sent to a machine, in bytes: sshd hands it to
/// the login shell as the one argument of `$SHELL -c LINE`, and Linux takes
/// at most 131072 bytes (`MAX_ARG_STRLEN`, NUL included) in one argument.
pub const MAX_COMMAND_LINE: usize = 131071;

fn addr(s: &HostSettings) -> String {
    if s.hostname.contains(':') {
        format!("[{}]:{}", s.hostname, s.port)
    } else {
        format!("{}:{}", s.hostname, s.port)
    }
}

fn open_failure(f: &ChannelOpenFailure) -> String {
    match f {
        ChannelOpenFailure::AdministrativelyProhibited => {
            "the server forbids it (AllowStreamLocalForwarding / AllowTcpForwarding / PermitOpen)"
                .into()
        }
        ChannelOpenFailure::ConnectFailed => "nothing answered there (connect failed)".into(),
        ChannelOpenFailure::UnknownChannelType => {
            "the server does not support this channel type".into()
        }
        ChannelOpenFailure::ResourceShortage => "the server is out of resources".into(),
        ChannelOpenFailure::Other { code, reason } => format!("refused ({code}: {reason})"),
    }
}

/// POSIX numbers for the signal names SSH sends.
fn signal_number(s: &Sig) -> i32 {
    match s {
        Sig::HUP => 1,
        Sig::INT => 2,
        Sig::QUIT => 3,
        Sig::ILL => 4,
        Sig::ABRT => 6,
        Sig::FPE => 8,
        Sig::KILL => 9,
        Sig::USR1 => 10,
        Sig::SEGV => 11,
        Sig::PIPE => 13,
        Sig::ALRM => 14,
        Sig::TERM => 15,
        Sig::Custom(name) => match name.as_str() {
            "USR2" => 12,
            "CHLD" => 17,
            "CONT" => 18,
            "STOP" => 19,
            "TSTP" => 20,
            "XCPU" => 24,
            "XFSZ" => 25,
            "SYS" => 31,
            _ => -1,
        },
    }
}

fn connect_depth(
    settings: HostSettings,
    opts: SshOptions,
    depth: usize,
) -> BoxFuture<Result<Ssh, TransportError>> {
    Box::pin(async move {
        let conn = open_boxed(settings.clone(), opts.clone(), depth).await?;
        Ok(Ssh {
            inner: Arc::new(Inner {
                sessions: Arc::new(Semaphore::new(opts.max_sessions.max(1))),
                conn: tokio::sync::Mutex::new(Some(Arc::new(conn))),
                settings,
                opts,
                containment: std::sync::Mutex::new(None),
                lost: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    })
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn open_boxed(
    s: HostSettings,
    opts: SshOptions,
    depth: usize,
) -> BoxFuture<Result<Conn, TransportError>> {
    Box::pin(async move { open(&s, &opts, depth).await })
}

/// Open one authenticated connection.
async fn open(s: &HostSettings, opts: &SshOptions, depth: usize) -> Result<Conn, TransportError> {
    if let Some(pc) = &s.proxy_command {
        return Err(TransportError::SshConfig {
            alias: s.alias.clone(),
            file: s.config_file.clone(),
            detail: format!(
                "it sets `ProxyCommand {pc}`, which saphan does not run — use `ProxyJump` instead"
            ),
        });
    }
    let budget = s.connect_timeout.unwrap_or(opts.connect_timeout);
    let hs_budget = opts.handshake_timeout.max(budget);
    let verdict = Arc::new(Mutex::new(None));
    let handler = Client {
        name: s
            .host_key_alias
            .clone()
            .unwrap_or_else(|| s.hostname.clone()),
        port: s.port,
        files: s
            .user_known_hosts_files
            .iter()
            .chain(&s.global_known_hosts_files)
            .cloned()
            .collect(),
        verdict: verdict.clone(),
    };
    let config = Arc::new(client::Config {
        keepalive_interval: Some(keepalive(s, opts).0),
        keepalive_max: unanswered_before_close(keepalive(s, opts).1),
        nodelay: true,
        preferred: known_first(&handler),
        ..Default::default()
    });
    let start = Instant::now();
    let unreachable = |cause: String, via: Option<String>| TransportError::HostUnreachable {
        alias: s.alias.clone(),
        addr: addr(s),
        via,
        cause,
        elapsed: start.elapsed(),
        budget,
        config: s.config_file.clone(),
    };

    let (handshake, jump) = if let Some(last) = s.proxy_jump.last() {
        if depth >= MAX_JUMPS {
            return Err(TransportError::SshConfig {
                alias: s.alias.clone(),
                file: s.config_file.clone(),
                detail: format!(
                    "its ProxyJump chain is longer than {MAX_JUMPS} hops (a loop?) — shorten it"
                ),
            });
        }
        let spec = parse_jump(last).ok_or_else(|| TransportError::SshConfig {
            alias: s.alias.clone(),
            file: s.config_file.clone(),
            detail: format!("`ProxyJump {last}` is not [user@]host[:port] — fix it"),
        })?;
        let mut js =
            ssh_config::resolve_with(&s.config_file, &spec.host, spec.user.as_deref(), spec.port)
                .await?;
        if s.proxy_jump.len() > 1 {
            js.proxy_jump = s.proxy_jump[..s.proxy_jump.len() - 1].to_vec();
        }
        let jump = connect_depth(js, opts.clone(), depth + 1).await?;
        let jc = jump.conn().await?;
        let via = Some(jump.alias());
        let ch = match tokio::time::timeout(
            budget,
            jc.handle
                .channel_open_direct_tcpip(s.hostname.clone(), s.port as u32, "127.0.0.1", 0),
        )
        .await
        {
            Ok(Ok(ch)) => ch,
            Ok(Err(russh::Error::ChannelOpenFailure(f))) => {
                return Err(unreachable(open_failure(&f), via));
            }
            Ok(Err(e)) => return Err(unreachable(e.to_string(), via)),
            Err(_) => return Err(unreachable("timed out".into(), via)),
        };
        let hs = tokio::time::timeout(
            hs_budget,
            client::connect_stream(config, ch.into_stream(), handler),
        )
        .await;
        (hs, Some(jump))
    } else {
        let tcp = match tokio::time::timeout(
            budget,
            tokio::net::TcpStream::connect((s.hostname.as_str(), s.port)),
        )
        .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(unreachable(e.to_string(), None)),
            Err(_) => return Err(unreachable("connect timed out".into(), None)),
        };
        let _ = tcp.set_nodelay(true);
        let hs =
            tokio::time::timeout(hs_budget, client::connect_stream(config, tcp, handler)).await;
        (hs, None)
    };
    let via = jump.as_ref().map(|j| j.alias());
    let mut handle = match handshake {
        Ok(Ok(h)) => h,
        Err(_) => {
            return Err(unreachable(
                "no SSH handshake within the budget".into(),
                via,
            ));
        }
        Ok(Err(e)) => {
            let v = verdict.lock().unwrap().clone();
            return Err(match v {
                Some(KeyVerdict::Unknown {
                    key_type,
                    fingerprint,
                }) => TransportError::HostKeyUnknown {
                    alias: s.alias.clone(),
                    name: known_hosts_name(s),
                    key_type,
                    fingerprint,
                    files: s.user_known_hosts_files.clone(),
                    keyscan: keyscan(s),
                },
                Some(KeyVerdict::Changed {
                    file,
                    line,
                    key_type,
                    fingerprint,
                    revoked: true,
                }) => TransportError::HostKeyRevoked {
                    alias: s.alias.clone(),
                    name: known_hosts_name(s),
                    file,
                    line,
                    key_type,
                    fingerprint,
                },
                Some(KeyVerdict::Changed {
                    file,
                    line,
                    key_type,
                    fingerprint,
                    revoked: false,
                }) => TransportError::HostKeyChanged {
                    alias: s.alias.clone(),
                    name: known_hosts_name(s),
                    file,
                    line,
                    key_type,
                    fingerprint,
                },
                Some(KeyVerdict::Unreadable { file, detail }) => {
                    TransportError::KnownHostsUnreadable { file, detail }
                }
                // The server hung up before any SSH was spoken: as good as
                // not answering (sshd dying, MaxStartups, a firewall reset).
                _ if matches!(
                    e,
                    russh::Error::IO(_) | russh::Error::HUP | russh::Error::Disconnect
                ) =>
                {
                    unreachable(
                        format!("the connection was closed during the SSH handshake ({e})"),
                        via,
                    )
                }
                _ => TransportError::Handshake {
                    alias: s.alias.clone(),
                    addr: addr(s),
                    detail: e.to_string(),
                },
            });
        }
    };
    match tokio::time::timeout(hs_budget, authenticate(&mut handle, s)).await {
        Ok(Ok(())) => Ok(Conn {
            handle,
            _jump: jump,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(TransportError::AuthFailed {
            alias: s.alias.clone(),
            user: s.user.clone(),
            addr: addr(s),
            tried: vec![format!(
                "authentication did not finish within {}s",
                budget.as_secs()
            )],
        }),
    }
}

/// russh's preferred algorithms with the host key types on record for this
/// host moved to the front (OpenSSH does the same), so a server with several
/// host keys shows the recorded one, and one that no longer has it is
/// refused as changed.
fn known_first(c: &Client) -> russh::Preferred {
    let mut p = russh::Preferred::default();
    let known = known_hosts::known_algorithms(&c.files, &c.name, c.port);
    if known.is_empty() {
        return p;
    }
    let on_record = |a: &russh::keys::Algorithm| {
        known.iter().any(|k| {
            k == a
                || (matches!(k, russh::keys::Algorithm::Rsa { .. })
                    && matches!(a, russh::keys::Algorithm::Rsa { .. }))
        })
    };
    let (mut first, rest): (Vec<_>, Vec<_>) = p.key.iter().cloned().partition(on_record);
    first.extend(rest);
    p.key = first.into();
    p
}

fn known_hosts_name(s: &HostSettings) -> String {
    let h = s.host_key_alias.as_deref().unwrap_or(&s.hostname);
    known_hosts::host_port_name(h, s.port)
}

fn keyscan(s: &HostSettings) -> String {
    let file = s
        .user_known_hosts_files
        .first()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.ssh/known_hosts".into());
    let port = if s.port == 22 {
        String::new()
    } else {
        format!("-p {} ", s.port)
    };
    format!(
        "ssh-keyscan {port}{} >> {}",
        quote::quote(&s.hostname).unwrap_or_default(),
        quote::quote(&file).unwrap_or_default()
    )
}

/// The hash an RSA key signs with: the best the server supports (SHA-2 when
/// it says so); `None` for other key types.
async fn rsa_hash(
    handle: &mut Handle<Client>,
    is_rsa: bool,
) -> Result<Option<HashAlg>, russh::Error> {
    if !is_rsa {
        return Ok(None);
    }
    Ok(handle.best_supported_rsa_hash().await?.flatten())
}

/// Key authentication: each `IdentityFile` in order, then the agent's keys
/// (only those matching an identity file when `IdentitiesOnly yes`).
async fn authenticate(handle: &mut Handle<Client>, s: &HostSettings) -> Result<(), TransportError> {
    let proto = |e: russh::Error| TransportError::Handshake {
        alias: s.alias.clone(),
        addr: addr(s),
        detail: format!("during authentication: {e}"),
    };
    let mut tried = Vec::new();
    let mut file_pubkeys = Vec::new();
    for f in &s.identity_files {
        if let Ok(text) = std::fs::read_to_string(format!("{}.pub", f.display()))
            && let Ok(k) = PublicKey::from_openssh(text.trim())
        {
            file_pubkeys.push(k);
        }
        if !f.exists() {
            continue;
        }
        let key = match russh::keys::load_secret_key(f, None) {
            Ok(k) => k,
            Err(e) => {
                tried.push(format!("{}: not usable ({e})", f.display()));
                continue;
            }
        };
        file_pubkeys.push(key.public_key().clone());
        let hash = rsa_hash(handle, key.algorithm().is_rsa())
            .await
            .map_err(proto)?;
        let res = handle
            .authenticate_publickey(&s.user, PrivateKeyWithHashAlg::new(Arc::new(key), hash))
            .await
            .map_err(proto)?;
        if res.success() {
            return Ok(());
        }
        tried.push(format!("{}: rejected", f.display()));
    }
    if tried.is_empty() {
        tried.push("no identity file exists".into());
    }
    match &s.identity_agent {
        None => tried.push("no ssh-agent (SSH_AUTH_SOCK unset or IdentityAgent none)".into()),
        Some(sock) => match russh::keys::agent::client::AgentClient::connect_uds(sock).await {
            Err(e) => tried.push(format!("ssh-agent at {}: {e}", sock.display())),
            Ok(mut agent) => {
                let ids = agent.request_identities().await.unwrap_or_default();
                let mut n = 0;
                for id in ids {
                    let key = id.public_key().into_owned();
                    if s.identities_only
                        && !file_pubkeys.iter().any(|k| k.key_data() == key.key_data())
                    {
                        continue;
                    }
                    n += 1;
                    let hash = rsa_hash(handle, key.algorithm().is_rsa())
                        .await
                        .map_err(proto)?;
                    if let Ok(r) = handle
                        .authenticate_publickey_with(&s.user, key, hash, &mut agent)
                        .await
                        && r.success()
                    {
                        return Ok(());
                    }
                }
                tried.push(format!("ssh-agent: {n} usable key(s) rejected"));
            }
        },
    }
    Err(TransportError::AuthFailed {
        alias: s.alias.clone(),
        user: s.user.clone(),
        addr: addr(s),
        tried,
    })
}
