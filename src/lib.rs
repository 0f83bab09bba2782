//! saphan: certify an exact trunk SHA by running the team's declared suite in
//! a fresh detached git worktree, locally or on a fleet of SSH machines.
//!
//! The binary is a thin shell over this library; see `DESIGN.md` for the
//! architecture and `docs/` for the operator guide.

pub mod affected;
pub mod cancel;
pub mod canonical;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod dispatch;
pub mod docker;
pub mod error;
pub mod exec;
pub mod executor;
pub mod fleet;
pub mod fsutil;
pub mod git;
pub mod home;
pub mod measure;
pub mod outcome;
pub mod platform;
pub mod procs;
pub mod provision;
pub mod quote;
pub mod record;
pub mod remote;
pub mod report;
pub mod schedule;
pub mod seal;
pub mod slurm;
pub mod stream;
pub mod suite;
pub mod transport;
pub mod worktree;

/// The unit tests' side of `tests/it/common::skip_unless`: true (after printing
/// `SKIPPED: <why>`) when `cond` fails; a panic with the reason instead when
/// `SAPHAN_REQUIRE_ALL=1` (CI), so a skip is never a silent green there.
#[cfg(test)]
pub(crate) fn skip_unless(cond: bool, why: &str) -> bool {
    if !cond {
        if std::env::var_os("SAPHAN_REQUIRE_ALL").is_some_and(|v| v == "1") {
            panic!("SAPHAN_REQUIRE_ALL=1 and a prerequisite is missing: {why}");
        }
        eprintln!("SKIPPED: {why}");
        println!("SKIPPED: {why}");
    }
    !cond
}
