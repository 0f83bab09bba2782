//! One way to run things on a machine, two implementations: local processes
//! and SSH (russh). Fleet ceremonies, the Docker probe and dispatch only see
//! [`Transport`].

use crate::error::Refusal;
use crate::exec::{self, Cmd, Output};
use std::path::Path;
use std::time::Duration;

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
}

impl Refusal for TransportError {
    fn name(&self) -> &'static str {
        match self {
            TransportError::Spawn { .. } => "spawn",
            TransportError::Copy { .. } => "copy",
        }
    }
}

/// The local machine.
#[derive(Debug, Clone, Default)]
pub struct Local;

/// A machine saphan can run commands on.
#[derive(Debug)]
pub enum Transport {
    /// This machine, through [`crate::exec`].
    Local(Local),
}

impl Transport {
    /// Run `argv` (no shell) with a budget. Remote implementations quote every
    /// word for the remote shell; no word is ever spliced in unquoted.
    pub async fn exec(&self, argv: &[String], timeout: Duration) -> Result<Output, TransportError> {
        match self {
            Transport::Local(_) => exec::run(Cmd::from_argv(argv).timeout(timeout))
                .await
                .map_err(|source| TransportError::Spawn {
                    program: argv[0].clone(),
                    source,
                }),
        }
    }

    /// Copy a local file to `remote` (an absolute path on the machine).
    pub async fn put(&self, local: &Path, remote: &str) -> Result<(), TransportError> {
        match self {
            Transport::Local(_) => {
                tokio::fs::copy(local, remote)
                    .await
                    .map(|_| ())
                    .map_err(|source| TransportError::Copy {
                        what: format!("{} to {remote}", local.display()),
                        source,
                    })
            }
        }
    }

    /// Copy `remote` (an absolute path on the machine) to a local file.
    pub async fn get(&self, remote: &str, local: &Path) -> Result<(), TransportError> {
        match self {
            Transport::Local(_) => {
                tokio::fs::copy(remote, local)
                    .await
                    .map(|_| ())
                    .map_err(|source| TransportError::Copy {
                        what: format!("{remote} to {}", local.display()),
                        source,
                    })
            }
        }
    }
}
