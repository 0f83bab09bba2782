//! The seal (DESIGN §6c, docs/certify.md "The seal"): what a host-class
//! suite can reach while it runs.
//!
//! A suite is code under test, and the ground of its verdict — the
//! repository's refs, hooks and config, saphan's records and lock, a
//! machine's mirror, the next attempt's tree — is not its to write. Every
//! host-class attempt runs under [bubblewrap] (`bwrap`, what Flatpak seals
//! its apps with) in its own mount and PID namespaces:
//!
//! - the whole filesystem is bound read-only (`--ro-bind / /`) — `/tmp`
//!   too: the suite reads everything the machine holds, as it always
//!   could — with a private `/dev`;
//! - writable again are only the attempt's own paths ([`Bounds::writable`]):
//!   the scratch tree, the scratch worktree's own git dir (its index and
//!   HEAD), the build caches of the attempt's trust class, the affected
//!   tier's report directory, and a private temp dir ([`Bounds::tmp`],
//!   `TMPDIR`);
//! - every capability is dropped (`--cap-drop ALL`: a root suite keeps
//!   its uid but cannot remount, load modules or make device nodes), and
//!   the suite is in a new session (no `TIOCSTI` into the operator's
//!   terminal);
//! - when the suite's first process exits, bwrap (PID 1 of the namespace)
//!   exits and the kernel kills every process left in the namespace,
//!   whatever it did with `setsid`, `env -i`, double forks or cgroup files;
//!   `--die-with-parent` ends it too when saphan (or a machine's watchdog)
//!   goes first.
//!
//! Where the user is not root, bwrap makes a user namespace for this
//! (unprivileged user namespaces, which `machine measure` measures). A
//! machine without bwrap, or where it cannot make its namespaces, runs
//! unsealed and the record says so ([`Seal`]); under [`Mode::Required`]
//! such a machine is refused before anything runs.
//!
//! This module is pure: it builds the sealed argv and reads bwrap's own
//! failure; which machine can seal is asked by the benches (this machine:
//! [`local`]; a fleet machine: its measured `bwrap` requirement).
//!
//! [bubblewrap]: https://github.com/containers/bubblewrap

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The program that seals: bubblewrap's `bwrap`.
pub const TOOL: &str = "bwrap";

/// Whether an attempt is sealed: config key `verify.<scope>.seal`, flag
/// `--seal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Seal where the machine can; where it cannot, run unsealed, say so in
    /// one line and in the record (the default).
    #[default]
    Auto,
    /// Seal or refuse: a machine that cannot seal is refused by name before
    /// anything is shipped or run (`seal-unavailable`).
    Required,
    /// Never seal (a suite that needs capabilities, or the operator's own
    /// comparison); the record says `off`.
    Off,
}

impl Mode {
    /// The config and flag spelling (`auto`, `required`, `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Required => "required",
            Mode::Off => "off",
        }
    }

    /// Read the config and flag spelling.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "required" => Some(Mode::Required),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }

    /// Every spelling, for messages.
    pub const ALL: [&'static str; 3] = ["auto", "required", "off"];
}

/// What a machine can seal with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// bwrap at this absolute path on the machine, measured to work (on a
    /// fleet machine) or found with what it needs (this machine).
    Tool(String),
    /// It cannot seal, and why — a sentence that ends with what to do
    /// (`bwrap is not installed — apt-get install bubblewrap`).
    Unable(String),
}

impl Capability {
    /// The bwrap path, when the machine can seal.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Capability::Tool(t) => Some(t),
            Capability::Unable(_) => None,
        }
    }
}

/// The record's `seal` word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The suite ran in its own mount and PID namespaces ([`TOOL`]), or in
    /// a container (the engine's namespaces, read-only git dirs).
    Sealed,
    /// The machine could not seal; `why` says why and what to do.
    Unsealed,
    /// The operator turned the seal off (`--seal off`, `seal = "off"`).
    Off,
}

/// How one attempt's suite was sealed (record field `seal`, format 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// `sealed`, `unsealed` or `off`.
    pub state: State,
    /// What sealed it: bwrap's path on the machine, or `container`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Why it was not sealed (`unsealed`, `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Seal {
    /// Sealed by bwrap at `tool`.
    pub fn sealed(tool: &str) -> Seal {
        Seal {
            state: State::Sealed,
            tool: Some(tool.to_string()),
            why: None,
        }
    }
    /// Sealed by the container engine (container class).
    pub fn container() -> Seal {
        Seal {
            state: State::Sealed,
            tool: Some("container".into()),
            why: None,
        }
    }
    /// Unsealed, because `why`.
    pub fn unsealed(why: impl Into<String>) -> Seal {
        Seal {
            state: State::Unsealed,
            tool: None,
            why: Some(why.into()),
        }
    }
    /// Turned off by the operator (`source`: `--seal off`, `verify.full.seal`).
    pub fn off(source: &str) -> Seal {
        Seal {
            state: State::Off,
            tool: None,
            why: Some(format!("turned off by {source}")),
        }
    }
    /// One line for a person: `sealed (/usr/bin/bwrap)`, `UNSEALED: why`.
    pub fn words(&self) -> String {
        match self.state {
            State::Sealed => format!("sealed ({})", self.tool.as_deref().unwrap_or("?")),
            State::Unsealed => format!(
                "UNSEALED — {}; the suite could reach saphan's state",
                self.why.as_deref().unwrap_or("the machine cannot seal")
            ),
            State::Off => format!("off ({})", self.why.as_deref().unwrap_or("")),
        }
    }
}

/// The paths of one attempt, on the machine that runs it.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    /// Bound read-write: the scratch tree, its worktree git dir, the
    /// caches, a report directory. Each must exist.
    pub writable: Vec<PathBuf>,
    /// The attempt's private temp dir (an existing, empty directory on the
    /// machine, removed with the attempt): bound read-write and given to
    /// the suite as `TMPDIR`.
    pub tmp: PathBuf,
    /// The suite's working directory.
    pub cwd: PathBuf,
}

/// `bwrap` at `tool` sealing `program` (argv) within `bounds`: the argv to
/// run instead of `program`. The suite's environment passes through
/// unchanged but for `TMPDIR` (its private temp dir, [`Bounds::tmp`]).
pub fn argv(tool: &str, bounds: &Bounds, program: &[OsString]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::with_capacity(24 + 3 * bounds.writable.len() + program.len());
    let mut push = |s: &str| a.push(s.into());
    for w in [
        tool,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ] {
        push(w);
    }
    for w in bounds.writable.iter().chain([&bounds.tmp]) {
        a.push("--bind".into());
        a.push(w.into());
        a.push(w.into());
    }
    a.push("--setenv".into());
    a.push("TMPDIR".into());
    a.push(bounds.tmp.clone().into());
    a.push("--chdir".into());
    a.push(bounds.cwd.clone().into());
    a.push("--".into());
    a.extend(program.iter().cloned());
    a
}

/// bwrap's own failure, read from how the sealed command ended: bwrap
/// reports a sandbox it could not set up on stderr as `bwrap: <why>` and
/// exits 1, before the suite started. `Some(first line)` when the run
/// looks like that — the caller confirms with a sealed `true`
/// ([`probe_argv`]) before it believes it, because a suite may print the
/// same.
pub fn setup_failure(exit_code: Option<i32>, stderr: &[u8]) -> Option<String> {
    if exit_code != Some(1) {
        return None;
    }
    let first = stderr.split(|b| *b == b'\n').next()?;
    let first = String::from_utf8_lossy(first);
    first.starts_with("bwrap: ").then(|| first.into_owned())
}

/// The sealed `true` that tells whether bwrap at `tool` can seal these
/// `bounds` on the machine at all (exit 0: it can).
pub fn probe_argv(tool: &str, bounds: &Bounds) -> Vec<OsString> {
    argv(tool, bounds, &["true".into()])
}

/// Can this machine seal? bwrap on `PATH` (or in `/usr/bin`), and — where
/// saphan is not root — user namespaces the kernel lets this user make
/// (`/proc/sys/user/max_user_namespaces` > 0, and Debian's
/// `kernel.unprivileged_userns_clone` not 0). Decided once per process
/// from files alone, nothing started: a machine where bwrap still fails
/// (an LSM forbids the namespaces) is found by the attempt itself
/// ([`setup_failure`]).
pub fn local() -> &'static Capability {
    static CAP: std::sync::OnceLock<Capability> = std::sync::OnceLock::new();
    CAP.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return Capability::Unable(
                "this machine is not Linux (the seal needs Linux namespaces)".into(),
            );
        }
        let Some(tool) = crate::exec::which(TOOL).or_else(|| {
            let p = Path::new("/usr/bin/bwrap");
            p.is_file().then(|| p.to_path_buf())
        }) else {
            return Capability::Unable(format!(
                "bwrap is not installed here — {}",
                INSTALL_HINT
            ));
        };
        if !nix::unistd::geteuid().is_root() {
            let num = |p: &str| {
                std::fs::read_to_string(p)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
            };
            if num("/proc/sys/user/max_user_namespaces") == Some(0)
                || num("/proc/sys/kernel/unprivileged_userns_clone") == Some(0)
            {
                return Capability::Unable(
                    "this user cannot make user namespaces (kernel sysctls user.max_user_namespaces / kernel.unprivileged_userns_clone) — enable them, or run saphan as root".into(),
                );
            }
        }
        Capability::Tool(tool.display().to_string())
    })
}

/// How long the sealed `true` that confirms a setup failure may take.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// bwrap's words when it set the sandbox up but could not start the
/// program (`bwrap: execvp <program>: <why>`): `Some(<program>: <why>)`.
/// The suite's program is missing, not the seal.
pub fn exec_failure(line: &str) -> Option<&str> {
    line.strip_prefix("bwrap: execvp ")
}

/// Whose build caches an attempt may write: a certification of a commit on
/// the trunk the pointer follows runs trusted code, and every other
/// attempt (a branch, verify-union, verify-affected, verify-stream) does
/// not — so the caches one writes are never the other's, and a branch's
/// suite can never reach a trunk verdict through a cache entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// certify of a commit reachable from the trunk.
    Trunk,
    /// Everything else.
    Other,
}

impl Trust {
    /// The cache directory's name: `trunk` or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trunk => "trunk",
            Trust::Other => "other",
        }
    }
}

/// The suite's environment for the build caches in `dir` (a directory of
/// one [`Trust`] class on the machine): `XDG_CACHE_HOME=<dir>` (pip, and
/// every tool that follows the XDG base directories), `GOCACHE=<dir>/go-build`
/// and `GOMODCACHE=<dir>/go-mod` (Go's build and module caches, which go
/// creates when missing).
pub fn cache_env(dir: &Path) -> Vec<(String, String)> {
    let d = dir.display();
    vec![
        ("XDG_CACHE_HOME".into(), d.to_string()),
        ("GOCACHE".into(), format!("{d}/go-build")),
        ("GOMODCACHE".into(), format!("{d}/go-mod")),
    ]
}

/// Refusals of the seal, before anything is shipped or run.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// `--seal required` (or `seal = "required"`) and the machine cannot
    /// seal.
    #[error(
        "{machine} cannot seal its suite ({why}) and the seal is required ({from}) — make the machine able to seal (then `saphan machine measure --machine {machine}` for a fleet machine), or run with `--seal auto` to run it unsealed and have the record say so"
    )]
    Unavailable {
        /// `local` or the fleet id.
        machine: String,
        /// Where `required` came from (`flag:--seal`, `config:verify.full.seal`).
        from: String,
        /// Why it cannot seal.
        why: String,
    },
}

impl crate::error::Refusal for SealError {
    fn name(&self) -> &'static str {
        match self {
            SealError::Unavailable { .. } => "seal-unavailable",
        }
    }
}

/// What to install where bwrap is missing.
pub const INSTALL_HINT: &str = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Alpine: apk add bubblewrap)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_binds_the_attempts_paths_after_the_read_only_root() {
        let b = Bounds {
            writable: vec!["/h/scratch/k/tree".into(), "/r/.git/worktrees/tree".into()],
            tmp: "/tmp/saphan-run-1-x/tmp".into(),
            cwd: "/h/scratch/k/tree".into(),
        };
        let a: Vec<String> = argv("/usr/bin/bwrap", &b, &["go".into(), "test".into()])
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect();
        let s = a.join(" ");
        assert!(s.starts_with("/usr/bin/bwrap --die-with-parent"), "{s}");
        assert!(s.contains("--cap-drop ALL --ro-bind / / --dev /dev --proc /proc --bind"));
        assert!(
            !s.contains("--tmpfs"),
            "/tmp stays the machine's, read-only: {s}"
        );
        assert!(
            s.contains("--bind /tmp/saphan-run-1-x/tmp /tmp/saphan-run-1-x/tmp --setenv TMPDIR /tmp/saphan-run-1-x/tmp"),
            "{s}"
        );
        let ro = s.find("--ro-bind / /").unwrap();
        let tree = s.find("--bind /h/scratch/k/tree").unwrap();
        assert!(ro < tree);
        assert!(s.ends_with("--chdir /h/scratch/k/tree -- go test"), "{s}");
    }

    #[test]
    fn only_bwraps_own_first_line_with_exit_1_is_a_setup_failure() {
        let e = b"bwrap: Creating new namespace failed: Operation not permitted\n";
        assert!(
            setup_failure(Some(1), e)
                .unwrap()
                .contains("namespace failed")
        );
        assert_eq!(setup_failure(Some(2), e), None);
        assert_eq!(setup_failure(Some(1), b"FAIL x\nbwrap: y\n"), None);
        assert_eq!(setup_failure(None, e), None);
    }

    #[test]
    fn modes_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m).unwrap().as_str(), m);
        }
        assert_eq!(Mode::parse("on"), None);
    }
}
