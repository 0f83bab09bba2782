//! Issue 20.3: a suite's daemons do not outlive its attempt. A suite that
//! starts `env -i setsid sh -c 'sleep …' &` escapes its process group and
//! drops the scratch marker; in the attempt's own cgroup it ends with the
//! suite (`cgroup.kill`), and the record says which containment the run
//! had.

use crate::common::{Env, Repo, assert_code};

/// The pids of live processes whose command line holds `needle`.
pub fn alive_with(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(c) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let c = String::from_utf8_lossy(&c).replace('\0', " ");
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with(['Z', 'X']));
        if c.contains(needle) && !zombie {
            pids.push(pid);
        }
    }
    pids
}

/// A suite that leaves a daemon behind which left its group and its
/// environment: `sleep <secs>` with a per-test unique duration.
pub fn daemon_suite(secs: &str) -> String {
    format!(
        "[verify.full]\nargv = [\"sh\", \"-c\", \"env -i setsid sh -c 'sleep {secs}' </dev/null >/dev/null 2>&1 & exit 0\"]\nreport = \"exitcode\"\n"
    )
}

#[test]
fn a_local_suites_escaping_daemon_is_gone_after_the_attempt() {
    let env = Env::new();
    let secs = format!("1001.{}", std::process::id());
    env.write_config(&daemon_suite(&secs));
    let repo = Repo::new(&[("README", "x\n")]);
    let o = env.run(&["certify", "--repo", repo.path().to_str().unwrap()]);
    let left = alive_with(&format!("sleep {secs}"));
    for p in &left {
        // SAFETY: killing the daemon this test's suite started, by pid.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert_code(&o, 0);
    let r = repo.records().pop().unwrap();
    // The tests run as root on a cgroup v2 hierarchy: a cgroup is always
    // available here.
    assert_eq!(r["containment"], "cgroup", "{r}");
    assert!(
        left.is_empty(),
        "the suite's daemon outlived the attempt: {left:?}"
    );
}
