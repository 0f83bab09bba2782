//! One way to run things on a machine, three implementations: local
//! processes, SSH (russh), and a node borrowed from a Slurm cluster (srun).
//! Fleet ceremonies, the Docker probe and dispatch only see [`Transport`].
//!
//! - [`ssh_config`]: host settings for an alias, resolved like OpenSSH does
//!   (`ssh -G` is the reference).
//! - [`ssh`]: the russh client — strict known_hosts, key and agent auth,
//!   ProxyJump, keep-alive, one connection per machine.
//! - [`srun`]: a node of a Slurm allocation, one job step per command.
//! - [`watchdog`]: the supervisor a remote command runs under, shared by
//!   both remote transports.
//! - [`quote`]: POSIX shell quoting of every remote word.
//!
//! The operator's view is `docs/transport.md`.

// Errors here carry what the operator needs to act (host, address, files,
// fingerprints, budgets); they are built once per failed connection, so their
// size does not matter.
#![allow(clippy::result_large_err)]

pub mod known_hosts;
/// POSIX shell quoting (a bottom module: [`crate::fsutil`] quotes with
/// it too).
pub use crate::quote;
pub mod srun;
pub mod ssh;
pub mod ssh_config;
pub mod watchdog;

pub use srun::{SlurmNode, Srun};
pub use ssh::{Ssh, SshOptions};
pub use ssh_config::{HostSettings, resolve};

use crate::error::{Exit, Refusal};
use crate::exec::{self, Cmd, Output};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Budget for one control command on a machine (mirror listing, fetch,
/// staging, cleanup, a container's git dirs or user).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(120);
/// Connect budget per machine.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A bidirectional byte stream (a local Unix socket, or a forwarded remote
/// one): what [`Transport::open_unix_socket`] returns.
pub trait AsyncReadWrite: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> AsyncReadWrite for T {}

fn secs(d: &Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Errors reaching or using a machine.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A local program could not be started.
    #[error("could not start `{program}` on the local machine: {source} — check the path")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A local file transfer failed.
    #[error("copying {what}: {source} — check the paths and permissions")]
    Copy {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The host alias could not be resolved through the ssh config.
    #[error("cannot resolve host `{alias}` through {}: {detail}", file.display())]
    SshConfig {
        alias: String,
        file: PathBuf,
        detail: String,
    },
    /// A file that steers SSH (the ssh config, its directory, an included
    /// file, a known_hosts file) can be changed by someone other than the
    /// operator: nothing was read from it or run.
    #[error(
        "{}: {detail}; {why}, so saphan neither resolves nor connects through it — nothing was run. Run `{fix}`, then check the file for lines you did not write",
        path.display()
    )]
    ConfigExposed {
        path: PathBuf,
        detail: String,
        why: String,
        fix: String,
    },
    /// Nothing answered (connection refused, no route, timed out).
    #[error(
        "{alias} ({addr}{}) did not answer: {cause} after {} (budget {}) — check that the machine is up and sshd listens there: `ssh -F {} {alias} true`",
        via.as_ref().map(|v| format!(" via {v}")).unwrap_or_default(),
        secs(elapsed), secs(budget), config.display()
    )]
    HostUnreachable {
        alias: String,
        addr: String,
        via: Option<String>,
        cause: String,
        elapsed: Duration,
        budget: Duration,
        config: PathBuf,
    },
    /// The server's host key is in no known_hosts file: nothing was run.
    #[error(
        "the host key of {alias} ({name}: {key_type} {fingerprint}) is not in {} — nothing was run. Check the fingerprint with the machine's owner (on the machine: `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then add it: `{keyscan}`",
        list(files)
    )]
    HostKeyUnknown {
        alias: String,
        name: String,
        key_type: String,
        fingerprint: String,
        files: Vec<PathBuf>,
        keyscan: String,
    },
    /// The server's host key differs from the recorded one: nothing was run.
    #[error(
        "the host key of {alias} ({name}) is now {key_type} {fingerprint}, not the key recorded at {}:{line} — nothing was run. The machine may have been reinstalled, or someone is in the middle; confirm the new fingerprint with its owner, then `ssh-keygen -R '{name}' -f {}` and add the verified key",
        file.display(), file.display()
    )]
    HostKeyChanged {
        alias: String,
        name: String,
        file: PathBuf,
        line: usize,
        key_type: String,
        fingerprint: String,
    },
    /// The server's host key is marked `@revoked`: nothing was run.
    #[error(
        "the host key of {alias} ({name}: {key_type} {fingerprint}) is revoked at {}:{line} — nothing was run. Ask the machine's owner for a new host key",
        file.display()
    )]
    HostKeyRevoked {
        alias: String,
        name: String,
        file: PathBuf,
        line: usize,
        key_type: String,
        fingerprint: String,
    },
    /// A known_hosts file could not be read or parsed.
    #[error("cannot use the known_hosts file {}: {detail} — fix or remove the bad line", file.display())]
    KnownHostsUnreadable { file: PathBuf, detail: String },
    /// No key was accepted.
    #[error(
        "no key was accepted for {user}@{alias} ({addr}); tried: {} — put the public key in ~{user}/.ssh/authorized_keys there, or name the right IdentityFile in the ssh config",
        tried.join("; ")
    )]
    AuthFailed {
        alias: String,
        user: String,
        addr: String,
        tried: Vec<String>,
    },
    /// The SSH conversation itself failed (not a network or key problem).
    #[error(
        "the SSH conversation with {alias} ({addr}) failed: {detail} — try `ssh -v` with the same config to see why"
    )]
    Handshake {
        alias: String,
        addr: String,
        detail: String,
    },
    /// The connection died while a command was running; it may still run remotely.
    #[error(
        "lost {alias}: {detail} — the remote command may still be running; check the machine and the network, then retry"
    )]
    ConnectionLost { alias: String, detail: String },
    /// A machine's Docker engine failed a container-class run (refused to
    /// create or start the container, its wait ended without a status, the
    /// container could not be removed): a failed measurement.
    #[error("{detail}")]
    Engine {
        /// What happened, naming the container.
        detail: String,
    },
    /// A remote operation (other than a command's own budget) ran out of time.
    #[error(
        "{what} on {alias} did not finish within {} — check the machine and the network, then retry",
        secs(budget)
    )]
    RemoteTimeout {
        alias: String,
        what: String,
        budget: Duration,
    },
    /// A remote file transfer failed.
    #[error("copying {what}: {detail} — check the paths and permissions")]
    RemoteCopy { what: String, detail: String },
    /// A Unix socket could not be reached.
    #[error(
        "cannot reach the Unix socket {path} on {alias}: {detail} — check that the service listens there"
    )]
    UnixSocket {
        alias: String,
        path: String,
        detail: String,
    },
    /// The quoted command line is longer than a remote shell accepts as one
    /// argument; nothing was sent.
    #[error(
        "the command line for the machine is {bytes} bytes once quoted, more than the {max} a remote shell accepts as one argument — nothing was sent; shorten the arguments (a path is at most 4095 bytes)"
    )]
    ArgumentTooLong { bytes: usize, max: usize },
    /// The program (or its working directory, or `setsid`) is missing on
    /// the machine: nothing ran.
    #[error("could not start `{program}` on {alias}: {detail} — install it there or fix the path")]
    RemoteSpawn {
        alias: String,
        program: String,
        detail: String,
    },
    /// A command that cannot be sent as given.
    #[error("cannot run this command: {detail}")]
    BadArgument { detail: String },
    /// A job step on a borrowed Slurm node ended without the supervisor's
    /// report: Slurm could not create or launch it, the node failed, or
    /// the job was cancelled, expired or ran past its time limit. What ran
    /// may have been killed; no status of the command is known.
    #[error(
        "{machine}: Slurm ended the step on node {node} of job {job} without saphan's report of the command ({words}) — the node or the allocation is gone (a node failure, the job cancelled or past its time limit); the work can run on another node. See `scontrol show job {job}` and `sinfo --nodes {node}`"
    )]
    SlurmStep {
        /// The machine's id (`POOL/NODE`).
        machine: String,
        job: u64,
        node: String,
        /// srun's own words (its error lines, joined with `; `).
        words: String,
    },
    /// What a borrowed Slurm node cannot do (srun forwards no socket):
    /// nothing was tried.
    #[error(
        "{machine} is a node borrowed from a Slurm cluster, reached through srun, which cannot {what} — borrowed nodes run the host class; run this on an SSH machine"
    )]
    Unsupported {
        /// The machine's id (`POOL/NODE`).
        machine: String,
        /// What was asked (`forward the Unix socket /var/run/docker.sock`).
        what: String,
    },
}

impl Refusal for TransportError {
    fn name(&self) -> &'static str {
        match self {
            TransportError::Spawn { .. } | TransportError::RemoteSpawn { .. } => "spawn",
            TransportError::Copy { .. } | TransportError::RemoteCopy { .. } => "copy",
            TransportError::SshConfig { .. } => "ssh-config",
            TransportError::ConfigExposed { .. } => "saphan-home-exposed",
            TransportError::HostUnreachable { .. } => "host-unreachable",
            TransportError::HostKeyUnknown { .. } => "host-key-unknown",
            TransportError::HostKeyChanged { .. } => "host-key-changed",
            TransportError::HostKeyRevoked { .. } => "host-key-revoked",
            TransportError::KnownHostsUnreadable { .. } => "known-hosts-unreadable",
            TransportError::AuthFailed { .. } => "auth-failed",
            TransportError::Handshake { .. } => "ssh-handshake",
            TransportError::ConnectionLost { .. } => "connection-lost",
            TransportError::Engine { .. } => "engine",
            TransportError::RemoteTimeout { .. } => "remote-timeout",
            TransportError::UnixSocket { .. } => "unix-socket-unreachable",
            TransportError::BadArgument { .. } => "bad-argument",
            TransportError::ArgumentTooLong { .. } => "argument-too-long",
            TransportError::SlurmStep { .. } => "slurm-step-failed",
            TransportError::Unsupported { .. } => "transport-unsupported",
        }
    }
    fn exit(&self) -> Exit {
        match self {
            TransportError::ConnectionLost { .. }
            | TransportError::RemoteTimeout { .. }
            | TransportError::SlurmStep { .. }
            | TransportError::Engine { .. } => Exit::MeasurementFailed,
            _ => Exit::Refusal,
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        Some(self.into())
    }
}

/// The record's `failure` word of a transport error met after admission.
impl From<&TransportError> for crate::outcome::FailureKind {
    fn from(e: &TransportError) -> crate::outcome::FailureKind {
        use crate::outcome::FailureKind;
        use TransportError as T;
        match e {
            T::Spawn { .. } | T::RemoteSpawn { .. } => FailureKind::Spawn,
            T::Copy { .. } | T::RemoteCopy { .. } => FailureKind::CopyFailed,
            T::SshConfig { .. } => FailureKind::SshConfig,
            T::ConfigExposed { .. } => FailureKind::HomeExposed,
            T::HostUnreachable { .. } => FailureKind::HostUnreachable,
            T::HostKeyUnknown { .. } => FailureKind::HostKeyUnknown,
            T::HostKeyChanged { .. } => FailureKind::HostKeyChanged,
            T::HostKeyRevoked { .. } => FailureKind::HostKeyRevoked,
            T::KnownHostsUnreadable { .. } => FailureKind::KnownHostsUnreadable,
            T::AuthFailed { .. } => FailureKind::AuthFailed,
            T::Handshake { .. } => FailureKind::SshHandshake,
            T::ConnectionLost { .. } => FailureKind::ConnectionLost,
            T::Engine { .. } => FailureKind::Engine,
            T::RemoteTimeout { .. } => FailureKind::RemoteTimeout,
            T::UnixSocket { .. } => FailureKind::UnixSocketUnreachable,
            T::BadArgument { .. } => FailureKind::BadArgument,
            T::ArgumentTooLong { .. } => FailureKind::ArgumentTooLong,
            T::SlurmStep { .. } => FailureKind::SlurmStepFailed,
            T::Unsupported { .. } => FailureKind::TransportUnsupported,
        }
    }
}

/// The local machine.
#[derive(Debug, Clone, Default)]
pub struct Local;

/// A machine saphan can run commands on. Cheap to clone: clones of an SSH
/// transport share one connection.
#[derive(Debug, Clone)]
pub enum Transport {
    /// This machine, through [`crate::exec`].
    Local(Local),
    /// A machine reached over SSH.
    Ssh(Ssh),
    /// A node of a Slurm allocation, reached with srun ([`srun`]).
    Slurm(Srun),
}

impl Transport {
    /// Connect to an SSH machine now (TCP within `ConnectTimeout`, strict
    /// known_hosts check, key then agent auth). Errors: `host-unreachable`,
    /// `host-key-unknown`, `host-key-changed`, `known-hosts-unreadable`,
    /// `auth-failed`, `ssh-handshake`, `ssh-config` (ProxyJump/ProxyCommand).
    pub async fn connect_ssh(
        settings: &HostSettings,
        opts: &SshOptions,
    ) -> Result<Transport, TransportError> {
        Ssh::connect(settings, opts).await.map(Transport::Ssh)
    }

    /// Resolve `alias` through `ssh_config` (see [`ssh_config::resolve`]) and connect.
    pub async fn connect_alias(
        ssh_config: &Path,
        alias: &str,
        opts: &SshOptions,
    ) -> Result<Transport, TransportError> {
        let settings = resolve(ssh_config, alias).await?;
        Transport::connect_ssh(&settings, opts).await
    }

    /// A node of a Slurm allocation as a machine ([`srun`]); nothing runs
    /// until a command does.
    pub fn slurm(node: SlurmNode) -> Transport {
        Transport::Slurm(Srun::new(node))
    }

    /// A short description for messages: `local`, `ssh m1
    /// (root@10.0.0.5:22)` or `slurm n0 (job 42)`.
    pub fn describe(&self) -> String {
        match self {
            Transport::Local(_) => "local".into(),
            Transport::Ssh(s) => {
                let h = s.settings();
                format!("ssh {} ({}@{}:{})", h.alias, h.user, h.hostname, h.port)
            }
            Transport::Slurm(s) => s.describe(),
        }
    }

    /// `Some(why)` when this machine's SSH connection was declared dead (the
    /// keep-alive limit, [`ssh::keepalive`]), or a borrowed Slurm node can
    /// no longer be reached through its allocation ([`Srun::connection_gone`])
    /// — a run on it ended because the connection did, not because of the
    /// machine; `None` locally or while it is up.
    pub async fn connection_gone(&self) -> Option<String> {
        match self {
            Transport::Local(_) => None,
            Transport::Ssh(s) => s.connection_gone().await,
            Transport::Slurm(s) => s.connection_gone().await,
        }
    }

    /// A stream to the Unix socket `path` on the machine: a local
    /// `UnixStream`, or over SSH a `direct-streamlocal` channel (needs
    /// `AllowStreamLocalForwarding yes`, sshd's default). For bollard's custom
    /// transport, the Docker socket, and the like. A borrowed Slurm node
    /// forwards none: `transport-unsupported`.
    pub async fn open_unix_socket(
        &self,
        path: &str,
    ) -> Result<Box<dyn AsyncReadWrite>, TransportError> {
        match self {
            Transport::Local(_) => tokio::net::UnixStream::connect(path)
                .await
                .map(|s| Box::new(s) as Box<dyn AsyncReadWrite>)
                .map_err(|e| TransportError::UnixSocket {
                    alias: "the local machine".into(),
                    path: path.to_string(),
                    detail: e.to_string(),
                }),
            Transport::Ssh(s) => s.open_unix_socket(path).await,
            Transport::Slurm(s) => Err(TransportError::Unsupported {
                machine: s.node().id.clone(),
                what: format!("forward the Unix socket {path}"),
            }),
        }
    }

    /// Run `argv` (no shell) with a budget. Remote implementations quote every
    /// word for the remote shell; no word is ever spliced in unquoted.
    pub async fn exec(&self, argv: &[String], timeout: Duration) -> Result<Output, TransportError> {
        self.exec_into(argv, timeout, None).await
    }

    /// [`Transport::exec`] of a script that frames its output: stdout is
    /// kept from the first occurrence of `begin` on
    /// ([`exec::Sink::CaptureFrom`]), so whatever a login shell prints
    /// before the script runs is dropped as it arrives, never held.
    pub async fn exec_from(
        &self,
        argv: &[String],
        timeout: Duration,
        begin: &[u8],
    ) -> Result<Output, TransportError> {
        self.exec_into(argv, timeout, Some(begin.to_vec())).await
    }

    async fn exec_into(
        &self,
        argv: &[String],
        timeout: Duration,
        begin: Option<Vec<u8>>,
    ) -> Result<Output, TransportError> {
        match self {
            Transport::Local(_) => {
                let cmd = Cmd::from_argv(argv).timeout(timeout);
                let cmd = match begin {
                    Some(m) => cmd.stdout(exec::Sink::CaptureFrom(m)),
                    None => cmd,
                };
                exec::run(cmd)
                    .await
                    .map_err(|source| TransportError::Spawn {
                        program: argv[0].clone(),
                        source,
                    })
            }
            Transport::Ssh(s) => {
                let sink = match begin {
                    Some(m) => ssh::OutSink::CaptureFrom(m),
                    None => ssh::OutSink::Capture,
                };
                s.exec(argv, timeout, sink).await
            }
            Transport::Slurm(s) => s.exec(argv, timeout, begin).await,
        }
    }

    /// Run one [`Cmd`] on the machine — the one call for both sides, with the
    /// same [`Output`] meaning: cwd, env changes, stdin ([`exec::Input`]:
    /// bytes, a local file or a reader, streamed), stdout to a local file
    /// ([`exec::Sink::File`]) or captured whole (up to
    /// [`exec::STDOUT_WHOLE`] bytes locally, [`exec::REMOTE_STDOUT_WHOLE`]
    /// from a remote machine; past it [`exec::Termination::OutputLost`]),
    /// stderr's last [`exec::STDERR_TAIL`] bytes, and the budget enforced by
    /// killing the command's whole process group (locally by
    /// [`exec::run`]; on an SSH machine by a watchdog running *there*, see
    /// [`watchdog`]). A `Cmd` without a budget gets none locally and the
    /// transfer budget remotely.
    ///
    /// Errors: the program cannot be started (`spawn`), a word that cannot
    /// be sent (`bad-argument`), the connection errors.
    pub async fn run(&self, cmd: Cmd) -> Result<Output, TransportError> {
        match self {
            Transport::Local(_) => {
                let program = cmd.program().to_string_lossy().into_owned();
                exec::run(cmd)
                    .await
                    .map_err(|source| TransportError::Spawn { program, source })
            }
            Transport::Ssh(s) => {
                let t0 = std::time::Instant::now();
                let what = debug_label(&cmd);
                let r = s.run(cmd).await;
                tracing::debug!(
                    target: "saphan::remote",
                    alias = %s.settings().alias,
                    cmd = %what,
                    ms = t0.elapsed().as_secs_f64() * 1e3,
                    "remote command"
                );
                r
            }
            Transport::Slurm(s) => {
                let t0 = std::time::Instant::now();
                let what = debug_label(&cmd);
                let r = s.run(cmd).await;
                tracing::debug!(
                    target: "saphan::remote",
                    alias = %s.node().id,
                    cmd = %what,
                    ms = t0.elapsed().as_secs_f64() * 1e3,
                    "remote command"
                );
                r
            }
        }
    }

    /// What an attempt's commands (those carrying the scratch marker) get to
    /// keep their processes from outliving them: locally
    /// [`exec::local_containment`]; on an SSH machine or a borrowed Slurm
    /// node what its supervisor reported for the last such command (`None`
    /// before one ran).
    pub async fn containment(&self) -> Option<crate::exec::Containment> {
        match self {
            Transport::Local(_) => Some(exec::local_containment()),
            Transport::Ssh(s) => s.containment(),
            Transport::Slurm(s) => s.containment(),
        }
    }

    /// True for the local machine.
    pub fn is_local(&self) -> bool {
        matches!(self, Transport::Local(_))
    }

    /// Copy a local file to `remote` (an absolute path on the machine).
    pub async fn put(&self, local: &Path, remote: &str) -> Result<(), TransportError> {
        match self {
            Transport::Local(_) => local_put(local, Path::new(remote)).await,
            Transport::Ssh(s) => s.put(local, remote).await,
            Transport::Slurm(s) => s.put(local, remote).await,
        }
    }

    /// Copy `remote` (an absolute path on the machine) to a local file.
    pub async fn get(&self, remote: &str, local: &Path) -> Result<(), TransportError> {
        match self {
            Transport::Local(_) => local_copy(Path::new(remote), local).await,
            Transport::Ssh(s) => s.get(remote, local).await,
            Transport::Slurm(s) => s.get(remote, local).await,
        }
    }
}

/// A short name of `cmd` for a debug event: for `sh -c SCRIPT`, the name
/// its header comment gives (`# saphan-ship-fetch — …`), else the program
/// and its first argument.
fn debug_label(cmd: &Cmd) -> String {
    let tail = cmd.argv_tail();
    let word = |i: usize| tail.get(i).map(|a| a.to_string_lossy().into_owned());
    match (word(0).as_deref(), word(1)) {
        (Some("-c"), Some(script)) => script
            .lines()
            .next()
            .map(|l| l.trim_start_matches("# ").split(" —").next().unwrap_or(l))
            .unwrap_or_default()
            .chars()
            .take(40)
            .collect(),
        (first, _) => format!(
            "{} {}",
            cmd.program().to_string_lossy(),
            first.unwrap_or_default()
        ),
    }
}

/// The local machine's copy, for both directions of [`Transport::put`] and
/// [`Transport::get`].
/// [`Transport::put`] on this machine, as `put.sh` does on an SSH one: a
/// temp file beside `to` (`<to>.saphan-put.<pid>`, its mode copied),
/// renamed over `to` — a running program at `to` keeps its bytes, a
/// symlink at `to` is replaced, never written through, and `to` is never
/// seen half written.
async fn local_put(from: &Path, to: &Path) -> Result<(), TransportError> {
    let mut tmp = to.as_os_str().to_owned();
    tmp.push(format!(".saphan-put.{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let _ = tokio::fs::remove_file(&tmp).await;
    local_copy(from, &tmp).await?;
    tokio::fs::rename(&tmp, to).await.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        TransportError::Copy {
            what: format!("{} into place at {}", tmp.display(), to.display()),
            source,
        }
    })
}

async fn local_copy(from: &Path, to: &Path) -> Result<(), TransportError> {
    tokio::fs::copy(from, to)
        .await
        .map(|_| ())
        .map_err(|source| TransportError::Copy {
            what: format!("{} to {}", from.display(), to.display()),
            source,
        })
}

/// Run `cmd` on `t` with its stdout streamed to a local temp file, and read
/// that file whole: for what a machine prints as *data* (a listing, a
/// description) that may be larger than a captured stdout holds
/// ([`crate::exec::REMOTE_STDOUT_WHOLE`]). The bytes are `None` when
/// there are more than `cap` of them (the caller fails by name).
///
/// Errors: the transport's ([`TransportError`]); the local temp file's as
/// [`TransportError::Copy`].
pub async fn whole_stdout(
    t: &Transport,
    cmd: Cmd,
    cap: u64,
) -> Result<(Output, Option<Vec<u8>>), TransportError> {
    let copy = |source| TransportError::Copy {
        what: "the stdout of a command on the machine to a local temp file".into(),
        source,
    };
    // `saphan-listing-<pid>-…`: a killed run's file is reaped by the next.
    let file = crate::fsutil::run_tempfile("saphan-listing-")
        .map_err(copy)?
        .into_temp_path();
    let out = t
        .run(cmd.stdout(crate::exec::Sink::File(file.to_path_buf())))
        .await?;
    let len = tokio::fs::metadata(&file).await.map_err(copy)?.len();
    if len > cap {
        return Ok((out, None));
    }
    let bytes = tokio::fs::read(&file).await.map_err(copy)?;
    Ok((out, Some(bytes)))
}
