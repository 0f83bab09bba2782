//! Process groups on this machine, by what `/proc` says of them: read one
//! process's state ([`proc_stat`]) and kill whole groups, waiting until
//! their members have ended ([`kill_groups`]). Below both [`crate::exec`],
//! which starts every child in its own group, and [`crate::cancel`], whose
//! forced exit kills every group still registered.

use std::time::Duration;

/// What `/proc/<pid>/stat` (proc(5)) says of one process: the fields saphan
/// reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `D`, `Z` (a zombie: ended, not yet reaped), ….
    pub state: char,
    /// Field 5: its process group.
    pub pgrp: i32,
    /// Field 22: when it started, in clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    /// Whether it has ended (a zombie or dead, awaiting only its reaping).
    pub fn ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Read `/proc/<pid>/stat`; `None` when no such process is there (or not
/// on Linux). The command name (field 2) may hold spaces and parentheses,
/// so the fields are counted from its last `)`.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = stat[stat.rfind(')')? + 1..].split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let pgrp = f.nth(1)?.parse().ok()?;
    let start_time = f.nth(16)?.parse().ok()?;
    Some(ProcStat {
        state,
        pgrp,
        start_time,
    })
}

/// SIGKILL each process group in `pgids`, then wait, at most `bound`, until
/// every process that was in them has ended. A zombie has ended: it runs
/// nothing, and only its parent's wait removes it. Only groups are
/// signalled, never a pid as a process: a group's id can outlive its
/// leader's reaping, and a process that took the freed pid is not ours.
///
/// Sending SIGKILL does not end a process at once: it ends when it next
/// runs, which on a loaded machine can be after the caller has exited and
/// reported the group gone. The members are found in `/proc` and awaited
/// through pidfds (Linux 5.3), so nothing polls; where either is missing
/// this returns once the signals are sent.
pub async fn kill_groups(pgids: &[i32], bound: Duration) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let pgids: Vec<i32> = pgids.iter().copied().filter(|p| *p > 1).collect();
    for &p in &pgids {
        let _ = killpg(Pid::from_raw(p), Signal::SIGKILL);
    }
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    let ours = |st: &ProcStat| pgids.contains(&st.pgrp) && !st.ended();
    let mut ending = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if !proc_stat(pid).is_some_and(|st| ours(&st)) {
            continue;
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            continue;
        }
        // SAFETY: the fd was just returned to us and is owned by nobody else.
        let fd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
        // The pidfd holds this pid's process; if the pid was reused between
        // the read and the open, the process it holds is not ours.
        if !proc_stat(pid).is_some_and(|st| ours(&st)) {
            continue;
        }
        // SAFETY: the pidfd is an OwnedFd the AsyncFd owns for its life.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        };
        if let Ok(fd) = registered {
            ending.push(fd);
        }
    }
    let all = futures_util::future::join_all(ending.iter().map(|fd| fd.readable()));
    let _ = tokio::time::timeout(bound, all).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kill_groups` returns only once the group's processes have ended: a
    /// process holding 1.5 GB takes a while to die after SIGKILL (its
    /// memory is freed first), and is still running the moment `killpg`
    /// returns — never when `kill_groups` does.
    #[tokio::test]
    async fn killed_groups_have_ended_when_kill_groups_returns() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("perl")
            .args([
                "-e",
                "$SIG{TERM} = 'IGNORE'; $| = 1; my $x = 'a' x 1_500_000_000; print \"ready\\n\"; sleep 300",
            ])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        let pid = child.id() as i32;
        kill_groups(&[pid], Duration::from_secs(30)).await;
        let st = proc_stat(pid);
        assert!(st.is_none_or(|s| s.ended()), "{pid} still runs: {st:?}");
        child.wait().unwrap();
    }
}
