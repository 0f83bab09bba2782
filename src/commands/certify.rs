//! `saphan certify`: the main job. Resolve the suite, preflight the
//! toolchain (on PATH here, from the ledger on fleet machines), lock the
//! repository, check out the exact SHA in a scratch detached worktree, run
//! the suite under its budget, append the record, and move
//! `refs/saphan/verified` only on green. The scratch tree is removed on
//! every path (green, red, timeout, error, Ctrl-C).
//!
//! The verb is the one attempt pipeline ([`crate::measure::pipeline`]) over
//! this machine's bench, or over one bench per `--machine`.

use crate::error::{Refusal, Result};
use crate::git::Repo;
use crate::record;
use std::path::{Path, PathBuf};

pub use crate::measure::pipeline::{Certified, Class, LOG_TAIL_LINES, Outcome, Settings, certify};

/// Refusals of certify itself.
#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    /// Container-class dispatch was asked for and could not be routed. No
    /// longer raised since one pipeline runs this machine and fleet machines
    /// alike; the name stays reserved so it never means something else.
    #[error(
        "certify --class {class} --machine {machines} asks for container-class dispatch, which this version does not run yet — certify with --class host (on this machine, or with --machine on admitted fleet machines)"
    )]
    DispatchUnavailable {
        machines: String,
        class: &'static str,
    },
}

impl Refusal for CertifyError {
    fn name(&self) -> &'static str {
        match self {
            CertifyError::DispatchUnavailable { .. } => "dispatch-unavailable",
        }
    }
}

/// True when `settings` names fleet machines (anything but `local` alone).
pub fn is_dispatch(settings: &Settings) -> bool {
    settings.machines.iter().any(|m| m != "local")
}

/// The records of the repository containing `repo`, and where they live.
pub async fn records(repo: &Path) -> Result<(PathBuf, record::Attempts)> {
    let repo = Repo::open(repo).await?;
    let path = record::attempts_path(&repo);
    let all = record::read_all(&path)?;
    Ok((path, all))
}
