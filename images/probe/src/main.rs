//! saphan-probe: the only program of the saphan-probe image (`FROM scratch`).
//!
//! It proves a container really ran on the machine and reports what that
//! container saw. Output, one item per line, in this order:
//!
//! ```text
//! SAPHAN-PROBE-RAN
//! kernel=<release, from uname(2)>
//! arch=<machine, from uname(2)>
//! cpus=<CPUs this process may run on, > 0>
//! memory_bytes=<MemTotal of /proc/meminfo in bytes, > 0>
//! cgroup=<v1 | v2>
//! SAPHAN-PROBE-OK
//! ```
//!
//! `SAPHAN-PROBE-OK` is printed only when every fact was measured and is
//! positive; otherwise the last line is `SAPHAN-PROBE-FAILED <why>` and the
//! exit status is 1. saphan (`src/docker/`) parses exactly this shape.
//!
//! No dependencies: uname(2) is declared by hand (glibc's `struct utsname`
//! on Linux is six 65-byte fields).

use std::io::Write;

#[repr(C)]
struct Utsname {
    sysname: [u8; 65],
    nodename: [u8; 65],
    release: [u8; 65],
    version: [u8; 65],
    machine: [u8; 65],
    domainname: [u8; 65],
}

unsafe extern "C" {
    fn uname(buf: *mut Utsname) -> i32;
}

fn field(b: &[u8; 65]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).trim().to_string()
}

/// (kernel release, machine) from uname(2); the release falls back to
/// /proc/sys/kernel/osrelease.
fn uname_facts() -> (String, String) {
    let mut u = Utsname {
        sysname: [0; 65],
        nodename: [0; 65],
        release: [0; 65],
        version: [0; 65],
        machine: [0; 65],
        domainname: [0; 65],
    };
    // SAFETY: `u` is a properly sized, writable utsname; uname only writes into it.
    let rc = unsafe { uname(&mut u) };
    let (mut release, machine) = if rc == 0 {
        (field(&u.release), field(&u.machine))
    } else {
        (String::new(), String::new())
    };
    if release.is_empty() {
        release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
    }
    (release, machine)
}

/// MemTotal from /proc/meminfo, in bytes (the file states kB = 1024 bytes).
fn memory_bytes() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map(|kb| kb.saturating_mul(1024))
        .unwrap_or(0)
}

/// `v2` when the unified hierarchy is mounted, `v1` when legacy controllers
/// are, empty when neither is visible.
fn cgroup_version() -> &'static str {
    let root = std::path::Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        "v2"
    } else if ["memory", "cpu", "cpu,cpuacct", "pids", "blkio"]
        .iter()
        .any(|c| root.join(c).exists())
    {
        "v1"
    } else {
        ""
    }
}

fn main() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "SAPHAN-PROBE-RAN");
    let (kernel, arch) = uname_facts();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = memory_bytes();
    let cgroup = cgroup_version();
    let _ = writeln!(out, "kernel={kernel}");
    let _ = writeln!(out, "arch={arch}");
    let _ = writeln!(out, "cpus={cpus}");
    let _ = writeln!(out, "memory_bytes={mem}");
    let _ = writeln!(out, "cgroup={cgroup}");
    let mut missing = Vec::new();
    if kernel.is_empty() {
        missing.push("kernel");
    }
    if arch.is_empty() {
        missing.push("arch");
    }
    if cpus == 0 {
        missing.push("cpus");
    }
    if mem == 0 {
        missing.push("memory_bytes");
    }
    if cgroup.is_empty() {
        missing.push("cgroup");
    }
    if missing.is_empty() {
        let _ = writeln!(out, "SAPHAN-PROBE-OK");
        let _ = out.flush();
    } else {
        let _ = writeln!(out, "SAPHAN-PROBE-FAILED not measured: {}", missing.join(", "));
        let _ = out.flush();
        std::process::exit(1);
    }
}
