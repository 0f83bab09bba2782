//! A real Slurm cluster for integration tests, driven through
//! `fleet/lab/slurm` (fleet/lab/README.md, "The Slurm lab").
//!
//! ```ignore
//! let Some(lab) = common::slurm::SlurmLab::up(3, &["n2"]) else { return }; // SKIPPED
//! let out = lab.cmd("srun").args(["-N3", "--exclusive", "hostname"]).output().unwrap();
//! let job = lab.salloc(2, "saphan-x");      // salloc --no-shell -N 2 --exclusive …
//! lab.kill_node("n1");                      // every process of n1 SIGKILLed at once
//! lab.start_node("n1");                     // slurmd again (ReturnToService=2)
//! // Drop runs `fleet/lab/slurm down`: daemons, namespaces, cgroups, state dir.
//! ```
//!
//! Each `up` gets its own lab name (`u<pid hex>x<counter>`, 10 characters at
//! most), state dir (`/tmp/saphan-slurm-<name>`), leased `10.250.X/24`
//! subnet and slurmctld port, so tests in one binary and several test
//! binaries run side by side. Nodes are `n0`..`n(N-1)` in partition `lab`;
//! a node named in `bare` has no Go. Labs left behind by a killed test
//! process are torn down by the next `up`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A running Slurm lab; dropping it tears it down.
pub struct SlurmLab {
    /// The lab's name (namespaces `slurm-<name>-nI`, bridge `ub<name>`).
    pub name: String,
    /// The state dir `up` printed (logs, spool dirs, `lab.env`).
    pub state: PathBuf,
    /// `<state>/slurm.conf`: what clients need as `SLURM_CONF`.
    pub conf: PathBuf,
    /// Node names, `n0`..`n(N-1)`.
    pub nodes: Vec<String>,
    /// The nodes that lack Go.
    pub bare: Vec<String>,
    down: bool,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet/lab/slurm")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn have_sbin(program: &str) -> bool {
    super::have(program) || Path::new("/usr/sbin").join(program).is_file()
}

impl SlurmLab {
    /// Start `nodes` slurmd nodes (n0…) plus munge and slurmctld, and wait
    /// until every node is idle. `bare` names nodes without Go (`"n2"`).
    /// Returns `None` after printing `SKIPPED: …` when this machine cannot
    /// run the lab (not root, Slurm or munge not installed, no cgroup v1
    /// freezer); panics with the script's output when `up` fails.
    pub fn up(nodes: usize, bare: &[&str]) -> Option<SlurmLab> {
        let why = if !is_root() {
            Some("the Slurm lab needs root (network namespaces, cgroups)")
        } else if !have_sbin("slurmctld") || !have_sbin("slurmd") || !super::have("srun") {
            Some("Slurm is not installed (apt-get install --no-install-recommends slurm-wlm munge)")
        } else if !have_sbin("munged") || !have_sbin("mungekey") {
            Some("munge is not installed (apt-get install --no-install-recommends munge)")
        } else if !super::have("ip") || !super::have("nsenter") {
            Some("no `ip` or `nsenter` (apt-get install iproute2 util-linux)")
        } else if !Path::new("/sys/fs/cgroup/freezer").is_dir() {
            Some(
                "no cgroup v1 freezer at /sys/fs/cgroup/freezer (the Slurm lab's proctrack/cgroup needs it)",
            )
        } else {
            None
        };
        if let Some(why) = why {
            super::skip_unless(false, why);
            return None;
        }
        reap_abandoned();
        let name = format!(
            "u{:x}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        assert!(name.len() <= 10, "lab name {name} too long");
        let mut cmd = Command::new(script());
        cmd.args(["up", "--name", &name, "--nodes", &nodes.to_string()]);
        if !bare.is_empty() {
            cmd.args(["--bare", &bare.join(",")]);
        }
        let out = cmd.output().expect("run fleet/lab/slurm up");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "fleet/lab/slurm up failed:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let state = PathBuf::from(
            stdout
                .lines()
                .last()
                .expect("up prints the state dir")
                .trim(),
        );
        let env = std::fs::read_to_string(state.join("lab.env")).expect("lab.env");
        let field = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        let list = |v: String| -> Vec<String> {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        };
        Some(SlurmLab {
            conf: PathBuf::from(field("SLURM_CONF")),
            nodes: list(field("NODES")),
            bare: list(field("BARE")),
            name,
            state,
            down: false,
        })
    }

    /// A `Command` for a Slurm client (`srun`, `salloc`, `squeue`, …) with
    /// `SLURM_CONF` set and the temp dir as its working directory (a task's
    /// working directory is the client's; one under `/root` does not exist
    /// on the nodes, which each have their own `/root`).
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .current_dir(std::env::temp_dir());
        c
    }

    /// Run a client and return its output.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cmd(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    }

    /// `salloc --no-shell -N <nodes> --exclusive -J <job_name> -p lab`: the
    /// job id (read from salloc's stderr line `salloc: Granted job
    /// allocation <id>`). Panics when no allocation was granted.
    pub fn salloc(&self, nodes: usize, job_name: &str) -> u64 {
        let out = self.run(
            "salloc",
            &[
                "--no-shell",
                "-N",
                &nodes.to_string(),
                "--exclusive",
                "-J",
                job_name,
                "-p",
                "lab",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "salloc failed: {err}");
        job_id_of_salloc(&err).unwrap_or_else(|| panic!("no job id in salloc's stderr: {err}"))
    }

    /// The nodes of job `job` (`squeue -j J -h -o %N`, expanded by
    /// `scontrol show hostnames`); empty once the job has ended.
    pub fn job_nodes(&self, job: u64) -> Vec<String> {
        let out = self.run("squeue", &["-j", &job.to_string(), "-h", "-o", "%N"]);
        let list = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if list.is_empty() {
            return Vec::new();
        }
        let out = self.run("scontrol", &["show", "hostnames", &list]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `squeue -h -o '%i %j %T'`: the jobs not yet ended (pending, running,
    /// completing), one line each.
    pub fn squeue(&self) -> Vec<String> {
        let out = self.run("squeue", &["-h", "-o", "%i %j %T"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A saphan home whose machines.toml has one pool, `ci`, of the lab's
    /// partition `lab`, borrowing `nodes` nodes, with `workhome` on each node
    /// (under its private `/root`, `<state>/<node>/home` here).
    pub fn pool_home(&self, nodes: u32, workhome: &str) -> super::Env {
        let env = super::Env::new();
        std::fs::create_dir_all(env.home().join("fleet")).unwrap();
        std::fs::write(
            env.home().join("fleet/machines.toml"),
            format!(
                "[pool.ci]\ntransport = \"slurm\"\npartition = \"lab\"\nnodes = {nodes}\nworkhome = \"{workhome}\"\ntime_limit = \"30\"\nconf = \"{}\"\nallocation_wait = 60\n",
                self.conf.display()
            ),
        )
        .unwrap();
        env
    }

    /// The pid on this machine of the process that is `pid` in `node`'s
    /// own PID namespace (what `echo $$` prints on the node), while it runs:
    /// found among the node network namespace's processes by the last
    /// field of their `NSpid`. `None` once it has ended (a zombie has no
    /// namespace links, so it is not listed either).
    pub fn host_pid(&self, node: &str, pid: i32) -> Option<i32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &format!("slurm-{}-{node}", self.name)])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|host| {
                std::fs::read_to_string(format!("/proc/{host}/status"))
                    .ok()
                    .and_then(|st| {
                        st.lines()
                            .find_map(|l| l.strip_prefix("NSpid:"))
                            .and_then(|v| v.split_whitespace().last()?.parse::<i32>().ok())
                    })
                    == Some(pid)
            })
    }

    /// A node's state as `sinfo` prints it (`idle`, `alloc`, `down*`, …).
    pub fn node_state(&self, node: &str) -> String {
        let out = self.run("sinfo", &["-h", "-N", "-n", node, "-o", "%t"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Kill every process of `node` (slurmd, slurmstepd, tasks) with SIGKILL
    /// at once, as a machine that loses power. Slurm marks it DOWN ~25–31 s
    /// later (SlurmdTimeout=10).
    pub fn kill_node(&self, node: &str) {
        self.script(&["kill-node", "--node", node]);
    }

    /// Start a killed node's slurmd again; it returns to service by itself
    /// (ReturnToService=2) once it registers.
    pub fn start_node(&self, node: &str) {
        self.script(&["start-node", "--node", node]);
    }

    fn script(&self, args: &[&str]) {
        let out = Command::new(script())
            .args([args[0], "--name", &self.name, "--state"])
            .arg(&self.state)
            .args(&args[1..])
            .output()
            .expect("run fleet/lab/slurm");
        assert!(
            out.status.success(),
            "fleet/lab/slurm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Run `fleet/lab/slurm down` now (Drop then does nothing more).
    pub fn down(&mut self) {
        if !self.down {
            self.down = true;
            self.script(&["down"]);
        }
    }

    /// What of this lab still exists, one line per thing: its namespaces,
    /// bridge, veths, processes naming its state dir, cgroups, subnet lease
    /// and state dir. Empty after a clean `down`.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let ns_prefix = format!("slurm-{}-n", self.name);
        for l in String::from_utf8_lossy(&ns.stdout).lines() {
            if l.starts_with(&ns_prefix) {
                left.push(format!("netns {l}"));
            }
        }
        let links = Command::new("ip")
            .args(["-o", "link", "show"])
            .output()
            .unwrap();
        let bridge = format!("ub{}", self.name);
        let veth = format!("u{}-", self.name);
        for l in String::from_utf8_lossy(&links.stdout).lines() {
            let Some(dev) = l.split(": ").nth(1) else {
                continue;
            };
            let dev = dev.split('@').next().unwrap_or(dev);
            if dev == bridge || dev.starts_with(&veth) {
                left.push(format!("link {dev}"));
            }
        }
        let state = self.state.to_string_lossy().into_owned();
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for p in procs.flatten() {
                let pid = p.file_name();
                let Some(pid) = pid
                    .to_str()
                    .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
                else {
                    continue;
                };
                let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains(&state) {
                    left.push(format!("process {pid}: {cmdline}"));
                }
            }
        }
        let cg_leaf = format!("saphan-slurm-{}-n", self.name);
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for line in own.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(ctl), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if id == "0" || ctl.is_empty() || ctl.starts_with("name=") {
                continue;
            }
            let dir = Path::new("/sys/fs/cgroup")
                .join(ctl)
                .join(path.trim_start_matches('/'));
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().starts_with(&cg_leaf) {
                        left.push(format!("cgroup {}", e.path().display()));
                    }
                }
            }
        }
        let owner = format!("slurm-{}", self.name);
        if let Ok(leases) = std::fs::read_dir("/run/saphan-lab/nets") {
            for l in leases.flatten() {
                if std::fs::read_to_string(l.path().join("owner")).is_ok_and(|o| o.trim() == owner)
                {
                    left.push(format!("lease {}", l.path().display()));
                }
            }
        }
        if self.state.exists() {
            left.push(format!("state dir {state}"));
        }
        left
    }
}

impl Drop for SlurmLab {
    fn drop(&mut self) {
        if !self.down {
            self.down = true;
            let _ = Command::new(script())
                .args(["down", "--name", &self.name, "--state"])
                .arg(&self.state)
                .status();
        }
    }
}

/// The job id in salloc's stderr: the last word of the line
/// `salloc: Granted job allocation <id>`.
pub fn job_id_of_salloc(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .and_then(|id| id.trim().parse().ok())
}

/// Tear down labs named `u<pid>x<n>` whose test process is gone (killed
/// before its `Drop` ran).
fn reap_abandoned() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix("saphan-slurm-")) else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix('u')
            .and_then(|r| r.split_once('x'))
            .and_then(|(p, _)| u32::from_str_radix(p, 16).ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new(script())
                .args(["down", "--name", name, "--state"])
                .arg(e.path())
                .status();
        }
    }
}
