//! Every POSIX-sh script saphan runs on a machine, one file each
//! (`src/remote/<name>.sh`, embedded with `include_str!`). Each script opens
//! with its protocol — arguments (`$1`…), environment, what it prints, exit
//! codes — and is run as `sh -c SCRIPT NAME ARGS…` through
//! [`crate::transport::Transport`], on an SSH machine and on this one alike.
//! The exit codes a caller matches on are the constants below; the script's
//! header names them. CI runs `shellcheck -s sh src/remote/*.sh` and each
//! script's cases under dash, bash and busybox sh
//! (`tests/it/remote_scripts.rs`).
//!
//! Rules that must hold on every machine exist once: either as one of these
//! scripts (run locally through [`crate::transport::Transport::Local`]), or
//! in Rust alone, with the machine only listing facts or moving bytes
//! (CONTRIBUTING.md, "Rules that run on machines").

use crate::exec::Cmd;
use std::ffi::OsStr;

/// The supervisor of every command on an SSH machine
/// ([`crate::transport::watchdog`]).
pub const WATCHDOG: &str = include_str!("watchdog.sh");
/// The program's own shell under [`WATCHDOG`].
pub const WATCHDOG_INNER: &str = include_str!("watchdog-inner.sh");
/// Holds the repository's lock on a machine for one attempt.
pub const LOCK: &str = include_str!("lock.sh");
/// [`LOCK`]'s exit code when another run held the lock for the whole wait.
pub const LOCK_EXIT_BUSY: i32 = 3;
/// [`LOCK`]'s exit code when the lock's or ready file's directory cannot be
/// created.
pub const LOCK_EXIT_MKDIR: i32 = 4;
/// Waits until [`LOCK`] holds the lock; says whether a path (the stable
/// tree) exists then.
pub const LOCK_WAIT: &str = include_str!("lock-wait.sh");
/// [`LOCK_WAIT`]'s exit code when the ready file never appeared.
pub const LOCK_WAIT_EXIT_TIMEOUT: i32 = 3;
/// [`LOCK_WAIT`]'s exit code when another run holds the lock: it printed
/// `busy` and the holder's line ([`LOCK`] writes it to `<lock>.holder`).
pub const LOCK_WAIT_EXIT_BUSY: i32 = 5;
/// Is a program on the machine's PATH.
pub const RESOLVE: &str = include_str!("resolve.sh");
/// Is the shipped saphan binary already on the machine.
pub const HAVE_BINARY: &str = include_str!("have-binary.sh");
/// Removes an attempt's run directory (and the tree's empty parent).
pub const RUN_CLEANUP: &str = include_str!("run-cleanup.sh");
/// `mkdir -p`.
pub const MKDIR: &str = include_str!("mkdir.sh");
/// Opens (or creates) a machine's mirror and lists what it holds.
pub const SHIP_PROBE: &str = include_str!("ship-probe.sh");
/// Is a mirror whole (`git fsck --connectivity-only`), after a git command
/// on it failed.
pub const MIRROR_CHECK: &str = include_str!("mirror-check.sh");
/// [`MIRROR_CHECK`]'s exit code when the mirror is corrupt.
pub const MIRROR_CHECK_EXIT_CORRUPT: i32 = 1;
/// Moves a corrupt mirror aside, removes it and creates an empty one.
pub const MIRROR_RENEW: &str = include_str!("mirror-renew.sh");
/// Receives, verifies and fetches one bundle into the mirror.
pub const SHIP_FETCH: &str = include_str!("ship-fetch.sh");
/// Heals one stable scratch path's registration and empties its parent.
pub const HEAL: &str = include_str!("heal.sh");
/// [`HEAL`]'s (and so `prepare.sh`'s) exit code when the stable scratch
/// path is a worktree someone else registered and locked: nothing touched.
pub const HEAL_EXIT_FOREIGN: i32 = 3;
/// Kills an earlier attempt's leftovers (and disarms its watchdogs) at a
/// stable scratch path.
pub const KILL_LEFTOVERS: &str = include_str!("kill-leftovers.sh");
/// [`KILL_LEFTOVERS`], then [`HEAL`], in one shell.
pub const PREPARE: &str = include_str!("prepare.sh");
/// Checks one submodule out from a store on the same machine.
pub const SUBMODULE: &str = include_str!("submodule.sh");
/// Deletes a scratch tree and its admin entry by hand.
pub const RM_TREE: &str = include_str!("rm-tree.sh");
/// Lists what a provision's dest passes through.
pub const DEST_KINDS: &str = include_str!("dest-kinds.sh");
/// Writes stdin to a file.
pub const WRITE_FILE: &str = include_str!("write-file.sh");
/// Lists a report root's real path and the candidates under a prefix.
pub const REPORT_LIST: &str = include_str!("report-list.sh");
/// Describes each matched report name (kind, resolved path, size).
pub const REPORT_CLASSIFY: &str = include_str!("report-classify.sh");
/// Streams the accepted report files back, one after another.
pub const REPORT_FETCH: &str = include_str!("report-fetch.sh");
/// A machine's confinement facts (`machine measure`).
pub const MEASURE: &str = include_str!("measure.sh");
/// The toolchain probe (`machine probe`).
pub const PROBE: &str = include_str!("probe.sh");
/// Receives a file and renames it into place (SSH put).
pub const PUT: &str = include_str!("put.sh");
/// `UID:GID` of the connection's user on the machine.
pub const USER_IDS: &str = include_str!("user-ids.sh");
/// The SHA-256 of a file on the machine (`sha256sum`, else `shasum -a 256`).
pub const SHA256: &str = include_str!("sha256.sh");

/// The login of every command on a borrowed Slurm node
/// ([`crate::transport::srun`]): `$1` is the quoted command line.
pub const SLURM_LOGIN: &str = include_str!("slurm-login.sh");

/// Every script, by file name, for the shell tests and the docs.
pub const ALL: &[(&str, &str)] = &[
    ("watchdog.sh", WATCHDOG),
    ("watchdog-inner.sh", WATCHDOG_INNER),
    ("lock.sh", LOCK),
    ("lock-wait.sh", LOCK_WAIT),
    ("resolve.sh", RESOLVE),
    ("have-binary.sh", HAVE_BINARY),
    ("run-cleanup.sh", RUN_CLEANUP),
    ("mkdir.sh", MKDIR),
    ("ship-probe.sh", SHIP_PROBE),
    ("ship-fetch.sh", SHIP_FETCH),
    ("mirror-check.sh", MIRROR_CHECK),
    ("mirror-renew.sh", MIRROR_RENEW),
    ("heal.sh", HEAL),
    ("kill-leftovers.sh", KILL_LEFTOVERS),
    ("prepare.sh", PREPARE),
    ("submodule.sh", SUBMODULE),
    ("rm-tree.sh", RM_TREE),
    ("dest-kinds.sh", DEST_KINDS),
    ("write-file.sh", WRITE_FILE),
    ("report-list.sh", REPORT_LIST),
    ("report-classify.sh", REPORT_CLASSIFY),
    ("report-fetch.sh", REPORT_FETCH),
    ("measure.sh", MEASURE),
    ("probe.sh", PROBE),
    ("put.sh", PUT),
    ("user-ids.sh", USER_IDS),
    ("sha256.sh", SHA256),
    ("slurm-login.sh", SLURM_LOGIN),
];

/// `sh -c SCRIPT NAME ARGS…` as a [`Cmd`] (no budget: the caller sets one).
/// `name` is the script's `$0`, shown by `ps` on the machine.
///
/// The one way a script that runs git is started, on every machine: its
/// environment carries [`crate::git::hardening_env`] (no hooks, no
/// fsmonitor, no sparse checkout, replace refs and grafts ignored), so
/// every `git` the script runs — in a mirror, a scratch tree, a
/// submodule's clone — is the git [`crate::git::git_cmd`] starts here. No
/// script spells the rule again.
pub fn sh<I, S>(script: &str, name: &str, args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    crate::git::harden(Cmd::new("sh").args(["-c", script, name]).args(args))
}

/// The same as an argv for [`crate::transport::Transport::exec`], for a
/// script that runs no git (an argv carries no environment: a script that
/// runs git goes through [`sh`]).
pub fn sh_argv(script: &str, name: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["sh".into(), "-c".into(), script.into(), name.into()];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_opens_with_its_protocol() {
        for (name, text) in ALL {
            let head: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
            assert!(head.len() >= 3, "{name} has no protocol header");
            let head = head.join("\n");
            assert!(head.contains("Exit"), "{name}'s header names no exit codes");
            assert!(
                head.contains("Prints") || head.contains("Print"),
                "{name}'s header says nothing of what it prints"
            );
        }
    }
}
