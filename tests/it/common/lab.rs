//! A lab of real sshd hosts for integration tests, driven through the
//! `fleet/lab/` scripts.
//!
//! ```ignore
//! let Some(lab) = common::lab::Lab::start(4) else { return };  // prints SKIPPED
//! let out = lab.ssh("m0", "true");                             // system ssh client
//! lab.stop("m2");        // kill every process on m2: connects are refused
//! lab.partition("m3");   // blackhole route: connects time out
//! lab.heal("m3");
//! // Drop runs fleet/lab/down: sshd, sessions, namespaces, bridge, state dir.
//! ```
//!
//! `Lab::shared()` hands every caller in one test binary the same 4-host lab
//! (started on first use, torn down when the binary exits): for tests that
//! neither injure hosts nor count logins.
//!
//! Each `start` gets its own lab name (`t<pid hex>x<counter>`), state dir and
//! leased `10.250.X/24` subnet, so tests in one binary and several test
//! binaries run side by side. Hosts are `m0`..`m(N-1)` at `10.250.X.10+i`,
//! port 22, user root; `ssh_config_path()` is an OpenSSH client config for
//! them (strict known_hosts, BatchMode, ConnectTimeout 2 s, ServerAlive 1 s x3).
//! Host differences: each host has its own `/root` ([`Lab::home_dir`]); m2
//! has no Go; m3 says Ubuntu 22.04 and its `/root` is empty. Labs left behind by a killed test process are torn down by the
//! next `start`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The shared lab, if started; `Some(None)` when it had to be skipped.
static SHARED: OnceLock<Option<&'static Lab>> = OnceLock::new();
/// Name and state dir of the shared lab, for the exit hook.
static SHARED_DOWN: Mutex<Option<(String, PathBuf)>> = Mutex::new(None);

extern "C" fn shared_down() {
    if let Ok(mut g) = SHARED_DOWN.lock()
        && let Some((name, state)) = g.take()
    {
        let _ = Command::new(script("down"))
            .args(["--name", &name, "--state"])
            .arg(&state)
            .status();
    }
}

/// A running lab; dropping it tears it down.
pub struct Lab {
    name: String,
    state: PathBuf,
    net: String,
    hosts: usize,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fleet/lab")
        .join(name)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Lab {
    /// Start `hosts` sshd hosts. Returns `None` after printing `SKIPPED: …`
    /// when this machine cannot run a lab (not root, no sshd, no `ip`, no
    /// `ssh`); panics with the script's output when `fleet/lab/up` fails.
    pub fn start(hosts: usize) -> Option<Lab> {
        let why = if !is_root() {
            Some("the SSH lab needs root (network namespaces)")
        } else if !Path::new("/usr/sbin/sshd").exists() {
            Some("no /usr/sbin/sshd (apt-get install openssh-server)")
        } else if !super::have("ip") {
            Some("no `ip` (apt-get install iproute2)")
        } else if !super::have("ssh") || !super::have("ssh-keyscan") {
            Some("no OpenSSH client (apt-get install openssh-client)")
        } else {
            None
        };
        if let Some(why) = why {
            super::skip_unless(false, why);
            return None;
        }
        reap_abandoned();
        let name = format!(
            "t{:x}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let out = Command::new(script("up"))
            .args([
                "--name",
                &name,
                "--hosts",
                &hosts.to_string(),
                "--net",
                "auto",
            ])
            .output()
            .expect("run fleet/lab/up");
        assert!(
            out.status.success(),
            "fleet/lab/up failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let state = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let env = std::fs::read_to_string(state.join("lab.env")).expect("lab.env");
        let net = env
            .lines()
            .find_map(|l| l.strip_prefix("NET="))
            .expect("NET in lab.env")
            .to_string();
        Some(Lab {
            name,
            state,
            net,
            hosts,
        })
    }

    /// One 4-host lab shared by every caller in this test binary, torn down
    /// when the binary exits (an `atexit` hook; a killed binary's lab is
    /// reaped by the next `start`). Never stop, partition or count logins on
    /// it. `None` (after `SKIPPED: …`) where no lab can run.
    pub fn shared() -> Option<&'static Lab> {
        let lab = *SHARED.get_or_init(|| {
            let lab: &'static Lab = Box::leak(Box::new(Lab::start(4)?));
            *SHARED_DOWN.lock().unwrap() = Some((lab.name.clone(), lab.state.clone()));
            // SAFETY: registering a plain extern "C" fn with no arguments.
            unsafe { libc::atexit(shared_down) };
            Some(lab)
        });
        if lab.is_none() {
            super::skip_unless(false, "the shared SSH lab could not start (see above)");
        }
        lab
    }

    /// The lab's name (namespaces are `sl-<name>-mI`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The state dir holding keys, configs and logs.
    pub fn state_dir(&self) -> &Path {
        &self.state
    }
    /// An OpenSSH client config with `Host m0` … entries.
    pub fn ssh_config_path(&self) -> PathBuf {
        self.state.join("ssh_config")
    }
    /// The known_hosts file the config names (one ed25519 line per host).
    pub fn known_hosts(&self) -> PathBuf {
        self.state.join("known_hosts")
    }
    /// The client's private key (authorized on every host).
    pub fn identity(&self) -> PathBuf {
        self.state.join("id_ed25519")
    }
    /// Host ids, `m0`..`m(N-1)`.
    pub fn hosts(&self) -> Vec<String> {
        (0..self.hosts).map(|i| format!("m{i}")).collect()
    }
    /// The address of `host` ("m1" → "10.250.X.11").
    pub fn host_ip(&self, host: &str) -> String {
        let i: usize = host
            .strip_prefix('m')
            .and_then(|n| n.parse().ok())
            .expect("host mN");
        assert!(i < self.hosts, "{host} is not in this lab");
        format!("{}.{}", self.net, 10 + i)
    }
    /// The host's `/root` as seen from this machine (each host has its own;
    /// remote commands start there).
    pub fn home_dir(&self, host: &str) -> PathBuf {
        self.state.join(host).join("home")
    }
    /// `sshd.log` of a host, for failure messages.
    pub fn sshd_log(&self, host: &str) -> String {
        std::fs::read_to_string(self.state.join(host).join("sshd.log")).unwrap_or_default()
    }
    /// Kill every process on `host`; new connections are refused.
    pub fn stop(&self, host: &str) {
        self.fault("stop", host)
    }
    /// Cut `host` off (blackhole route): connects time out.
    pub fn partition(&self, host: &str) {
        self.fault("partition", host)
    }
    /// Undo [`Lab::partition`].
    pub fn heal(&self, host: &str) {
        self.fault("heal", host)
    }
    /// Stall `host`'s SSH server (SIGSTOP of its sshd processes,
    /// `fleet/lab/stall`): pings and keep-alives go unanswered, nothing is
    /// cut, the suites there keep running.
    pub fn stall(&self, host: &str) {
        self.fault("stall", host)
    }
    /// Undo [`Lab::stall`] (SIGCONT).
    pub fn resume(&self, host: &str) {
        self.fault_with("stall", &["--resume"], host)
    }
    fn fault(&self, what: &str, host: &str) {
        self.fault_with(what, &[], host)
    }
    fn fault_with(&self, what: &str, flags: &[&str], host: &str) {
        let out = Command::new(script(what))
            .args(["--name", &self.name, "--state"])
            .arg(&self.state)
            .args(flags)
            .arg(host)
            .output()
            .expect("run fleet/lab script");
        assert!(
            out.status.success(),
            "fleet/lab/{what} {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    /// Run `command` (a remote shell line) on `host` with the system ssh client.
    pub fn ssh(&self, host: &str, command: &str) -> Output {
        Command::new("ssh")
            .arg("-F")
            .arg(self.ssh_config_path())
            .arg(host)
            .arg(command)
            .output()
            .expect("run ssh")
    }
    /// Copy the client config to `<saphan_home>/ssh/config` (where saphan
    /// resolves host aliases) and return that path.
    pub fn install_ssh_config(&self, saphan_home: &Path) -> PathBuf {
        let dir = saphan_home.join("ssh");
        std::fs::create_dir_all(&dir).unwrap();
        let dst = dir.join("config");
        std::fs::copy(self.ssh_config_path(), &dst).unwrap();
        dst
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(script("down"))
            .args(["--name", &self.name, "--state"])
            .arg(&self.state)
            .status();
    }
}

/// Tear down labs named `t<pid>x<n>` whose test process is gone (killed
/// before its `Drop` ran).
fn reap_abandoned() {
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix("saphan-lab-")) else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix('t')
            .and_then(|r| r.split_once('x'))
            .and_then(|(p, _)| u32::from_str_radix(p, 16).ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new(script("down"))
                .args(["--name", name, "--state"])
                .arg(e.path())
                .status();
        }
    }
}
