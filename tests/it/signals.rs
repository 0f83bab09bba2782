//! SIGTERM and SIGHUP end certify like Ctrl-C (issue 15.6): the suite's
//! process group is killed, the scratch tree removed, and the record says
//! `interrupted`, naming the signal.

use crate::common::{Env, Repo, assert_code, assert_only_main_worktree, json};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z ")
}

fn certify_then_signal(sig: Signal, words: &str) {
    let env = Env::new();
    // Observes the suite through a pid file in a tempdir outside its tree, which a sealed suite cannot write, and a pid its PID namespace would make meaningless here (the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let repo = Repo::new(&[(
        "suite.sh",
        &format!(
            "#!/bin/sh\nsleep 300 &\necho $! > '{p}.tmp' && mv '{p}.tmp' '{p}'\nwait\n",
            p = pidfile.display()
        ),
    )]);
    let child = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !pidfile.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "suite never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["failure"], "interrupted", "{r}");
    // The suite ran before it was killed: the record says under what.
    assert!(r["containment"].is_string(), "{r}");
    let notes = r["notes"].to_string();
    assert!(notes.contains(words), "{notes}");
    assert_only_main_worktree(&repo);
    assert_eq!(repo.records().len(), 1);
    let t1 = Instant::now();
    while !gone(grandchild) {
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "the suite's grandchild {grandchild} survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_interrupts_like_ctrl_c() {
    certify_then_signal(Signal::SIGTERM, "SIGTERM");
}

#[test]
fn sighup_interrupts_like_ctrl_c() {
    certify_then_signal(Signal::SIGHUP, "SIGHUP");
}
