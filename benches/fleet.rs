//! Fleet ceremony benchmark (harness = false), on the lab's real sshd hosts.
//!
//! 1. From one run on four lab hosts: saphan's `machine measure` plus probes
//!    of six capabilities (seven invocations of the real binary, each
//!    connecting to all four hosts) against ansible-core's fact gathering
//!    (`ansible all -i INV -m setup`, the lab's ssh config passed through
//!    `ansible_ssh_common_args`). Goal: saphan ≥ 5× faster.
//! 2. The same saphan ceremony on 64 real lab hosts (64 sshd processes in
//!    64 network namespaces) against 4. Goal: ≤ 2× the time.
//! 3. saphan's own CPU per host per invocation (user + system of saphan and
//!    the children it waits for, over the seven invocations) at 4, 16 and 64
//!    hosts. Goal: ≤ 8 ms, and not growing with the fleet (64 ÷ 4 ≤ 1.25).
//!    `ssh -G` answers are cached under SAPHAN_HOME (`cache/ssh-g/`), so the
//!    warm-up run pays for them and the timed runs do not.
//!    Last run (2026-12-02, `cargo bench --bench fleet`, the optimized
//!    binary, load ~3): 6.7 / 4.9 / 6.1 ms at 4 / 16 / 64 hosts, 64 ÷ 4 =
//!    0.91×; the unoptimized `--profile dev` binary: 9.3 / 8.2 / 8.4 ms.
//!
//! Every lab host has its own `/root` (the lab's doing), so this machine's
//! `~/.bashrc` (pyenv, whose rehash lock would serialize every session of
//! every host) weighs on neither tool.
//! Each figure is the median of `RUNS` timed runs after one warm-up.
//! ansible is taken from `SAPHAN_BENCH_ANSIBLE` (a path to `ansible`), else
//! PATH; `benches/fleet-ansible.sh` installs ansible-core from PyPI into a
//! virtualenv and prints the path. Run as root:
//!
//! ```text
//! SAPHAN_BENCH_ANSIBLE=$(benches/fleet-ansible.sh) cargo bench --profile dev --bench fleet
//! ```

#[path = "../tests/it/common/mod.rs"]
mod common;

use common::Env;
use common::lab::Lab;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 3;

/// Six capabilities and where this machine (and so the lab hosts) has them.
const CAPS: [(&str, &str); 6] = [
    ("go", "/usr/bin/go"),
    ("gofmt", "/usr/bin/gofmt"),
    ("python3", "/usr/bin/python3"),
    ("git", "/usr/bin/git"),
    ("node", "/usr/bin/node"),
    ("java", "/usr/bin/java"),
];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// A SAPHAN_HOME whose machine rows are the lab's hosts.
fn fleet_home(lab: &Lab) -> Env {
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let mut s = String::new();
    for h in lab.hosts() {
        s += &format!("[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"/tmp\"\n\n");
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
    env
}

fn probe_cmd<'a>(list: &'a str, caps: &[(&'a str, &'a str)]) -> Vec<&'a str> {
    let mut a = vec!["--json", "machine", "probe", "--machine", list];
    for (cap, path) in caps {
        a.extend(["--capability", cap, "--declared-path", path]);
    }
    a.extend([
        "--workhome",
        "/tmp",
        "--probed-by",
        "bench",
        "--workspace",
        "bench",
    ]);
    a
}

/// measure + six probes over every host; panics when a host fails.
/// `combined`: one probe invocation for all six capabilities (one connection
/// and one exec per host); otherwise six invocations, one per capability.
fn saphan_ceremony(env: &Env, hosts: &[String], combined: bool) -> Duration {
    let list = hosts.join(",");
    let t0 = Instant::now();
    let o = env.run(&["--json", "machine", "measure", "--machine", &list]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "measure: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let batches: Vec<Vec<(&str, &str)>> = if combined {
        vec![CAPS.to_vec()]
    } else {
        CAPS.iter().map(|c| vec![*c]).collect()
    };
    for batch in batches {
        let o = env.run(&probe_cmd(&list, &batch));
        // 0 (all present) or 1 (some absent) — never a failed measurement.
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "probe {batch:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    t0.elapsed()
}

fn timed<F: FnMut() -> Duration>(mut f: F) -> Duration {
    f();
    median((0..RUNS).map(|_| f()).collect())
}

/// CPU time (user + system) of every waited-for child so far: the saphan
/// processes and the `ssh -G` they run — saphan's own cost, without the
/// lab's sshd and remote shells, which share this machine's cores.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Median wall time and median client CPU of the ceremony.
fn timed_cpu<F: FnMut() -> Duration>(mut f: F) -> (Duration, Duration) {
    f();
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..RUNS {
        let c0 = children_cpu();
        walls.push(f());
        cpus.push(children_cpu() - c0);
    }
    (median(walls), median(cpus))
}

fn find_ansible() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SAPHAN_BENCH_ANSIBLE") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "SAPHAN_BENCH_ANSIBLE={} does not exist",
                p.display()
            ))
        };
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join("ansible")).find(|p| p.is_file()))
        .ok_or_else(|| {
            "ansible is not installed (run benches/fleet-ansible.sh, which installs ansible-core from PyPI, and pass its output as SAPHAN_BENCH_ANSIBLE)".to_string()
        })
}

fn ansible_setup(ansible: &Path, lab: &Lab, dir: &Path) -> Duration {
    let inv = dir.join("inventory.ini");
    let mut s = String::from("[lab]\n");
    for h in lab.hosts() {
        s += &format!("{h}\n");
    }
    s += &format!(
        "\n[lab:vars]\nansible_user=root\nansible_python_interpreter=/usr/bin/python3\nansible_ssh_common_args='-F {}'\n",
        lab.ssh_config_path().display()
    );
    std::fs::write(&inv, s).unwrap();
    let t0 = Instant::now();
    let o = Command::new(ansible)
        .args(["all", "-i"])
        .arg(&inv)
        .args(["-m", "setup", "-f", "64"])
        .env("ANSIBLE_LOCAL_TEMP", dir.join("local-tmp"))
        .env("ANSIBLE_HOME", dir.join("ansible-home"))
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert!(
        o.status.success(),
        "ansible setup failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout)
            .chars()
            .take(3000)
            .collect::<String>(),
        String::from_utf8_lossy(&o.stderr)
    );
    took
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(lab4) = Lab::start(4) else { return };
    let env4 = fleet_home(&lab4);
    let hosts4 = lab4.hosts();
    let (saphan4, cpu4) = timed_cpu(|| saphan_ceremony(&env4, &hosts4, false));
    let (saphan4c, cpu4c) = timed_cpu(|| saphan_ceremony(&env4, &hosts4, true));
    println!(
        "saphan measure + 6 probe invocations, 4 lab hosts (median of {RUNS}):       {} (saphan CPU {})",
        secs(saphan4),
        secs(cpu4)
    );
    println!(
        "saphan measure + 1 probe of 6 capabilities, 4 lab hosts (median of {RUNS}): {} (saphan CPU {})",
        secs(saphan4c),
        secs(cpu4c)
    );
    match find_ansible() {
        Ok(ansible) => {
            let dir = tempfile::tempdir().unwrap();
            let ans = timed(|| ansible_setup(&ansible, &lab4, dir.path()));
            println!(
                "ansible all -m setup, same 4 hosts (median of {RUNS}):   {}",
                secs(ans)
            );
            for (what, t) in [
                ("6 probe invocations", saphan4),
                ("1 probe of 6 capabilities", saphan4c),
            ] {
                let ratio = ans.as_secs_f64() / t.as_secs_f64();
                println!(
                    "ratio ansible/saphan ({what}): {ratio:.1}x — goal >= 5x: {}",
                    if ratio >= 5.0 { "met" } else { "NOT met" }
                );
            }
        }
        Err(why) => println!("ansible comparison not run: {why}"),
    }
    drop(lab4);

    let lab16 = Lab::start(16).expect("a 16-host lab");
    let env16 = fleet_home(&lab16);
    let hosts16 = lab16.hosts();
    let (_, cpu16) = timed_cpu(|| saphan_ceremony(&env16, &hosts16, false));
    drop(lab16);

    let t0 = Instant::now();
    let Some(lab64) = Lab::start(64) else { return };
    println!("(64-host lab started in {})", secs(t0.elapsed()));
    let env64 = fleet_home(&lab64);
    let hosts64 = lab64.hosts();
    let (saphan64, cpu64) = timed_cpu(|| saphan_ceremony(&env64, &hosts64, false));
    let (saphan64c, cpu64c) = timed_cpu(|| saphan_ceremony(&env64, &hosts64, true));
    println!(
        "saphan measure + 6 probe invocations, 64 lab hosts (median of {RUNS}):       {} (saphan CPU {})",
        secs(saphan64),
        secs(cpu64)
    );
    println!(
        "saphan measure + 1 probe of 6 capabilities, 64 lab hosts (median of {RUNS}): {} (saphan CPU {})",
        secs(saphan64c),
        secs(cpu64c)
    );
    // Wall time only: saphan's CPU for 64 hosts is 16 times the work of 4
    // hosts by construction; what must not grow is its CPU per host (below).
    for (what, t64, t4) in [
        ("wall, 6 probe invocations", saphan64, saphan4),
        ("wall, 1 probe of 6 capabilities", saphan64c, saphan4c),
    ] {
        let ratio = t64.as_secs_f64() / t4.as_secs_f64();
        println!(
            "ratio 64 hosts / 4 hosts ({what}): {ratio:.2}x — goal <= 2x: {}",
            if ratio <= 2.0 { "met" } else { "NOT met" }
        );
    }
    // Seven invocations (measure + six probes), each touching every host.
    let per_host = |cpu: Duration, hosts: usize| cpu.as_secs_f64() * 1000.0 / (7.0 * hosts as f64);
    let (p4, p16, p64) = (per_host(cpu4, 4), per_host(cpu16, 16), per_host(cpu64, 64));
    for (n, p) in [(4, p4), (16, p16), (64, p64)] {
        println!(
            "saphan CPU per host per invocation, {n} hosts: {p:.1} ms — goal <= 8 ms: {}",
            if p <= 8.0 { "met" } else { "NOT met" }
        );
    }
    let growth = p64 / p4;
    println!(
        "ratio CPU per host, 64 hosts / 4 hosts: {growth:.2}x — goal <= 1.25x (does not grow with the fleet): {}",
        if growth <= 1.25 { "met" } else { "NOT met" }
    );
    println!(
        "(all 64 sshd servers and their remote shells run on this machine's {} cores, beside saphan)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
}
