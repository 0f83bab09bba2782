//! Local reliability of certify (issue 15, items 4–7): a hostile `--repo`,
//! a git hook's environment, a suite that outlives a killed saphan, a
//! wedged scratch registration. The real binary, real git. Items 1–3
//! (hostile names made from bytes) are in tests/streams.rs.

use crate::common;

use crate::common::{Env, Repo, assert_code, git};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SUITE_CONFIG: &str = "[verify.full]\nargv = \"./suite.sh\"\n";

/// A repository at `dir` whose suite exits 0.
fn green_repo_at(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    let suite = dir.join("suite.sh");
    std::fs::write(&suite, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&suite, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn records_of(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join(".git/saphan/attempts.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// Item 4: a newline in --repo certifies that repository and no other.
#[test]
fn a_newline_in_repo_certifies_that_repository() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let t = tempfile::Builder::new()
        .prefix("saphan-nl-")
        .tempdir()
        .unwrap();
    let victim = t.path().join("x");
    green_repo_at(&victim);
    // `<t>/x\ny/evil`: read by lines, git's answer names `<t>/x` and `y/evil`.
    let hostile = t.path().join("x\ny").join("evil");
    let head = green_repo_at(&hostile);
    let o = env
        .cmd()
        .current_dir(t.path())
        .arg("certify")
        .arg("--repo")
        .arg(&hostile)
        .arg("--json")
        .output()
        .unwrap();
    assert_code(&o, 0);
    let recs = records_of(&hostile);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["sha"], head.as_str());
    assert!(records_of(&victim).is_empty(), "the victim got a record");
    assert!(!t.path().join("y").exists(), "a record went to the cwd");
    let verified = Command::new("git")
        .arg("-C")
        .arg(&victim)
        .args(["rev-parse", "--verify", "--quiet", "refs/saphan/verified"])
        .output()
        .unwrap();
    assert!(!verified.status.success(), "the victim's pointer moved");
}

// Item 5: run from a git hook, certify acts on --repo only, keeps the
// operator's staged index, and the suite sees no hook variables.
#[test]
fn a_git_hook_environment_does_not_leak_into_certify() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nfor v in GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_OBJECT_DIRECTORY GIT_COMMON_DIR; do\n  eval \"test -z \\\"\\${$v}\\\"\" || { echo \"$v leaked\" >&2; exit 3; }\ndone\ntest \"$(git rev-parse --show-toplevel)\" = \"$(pwd -P)\" || exit 4\n",
    )]);
    std::fs::write(repo.path().join("staged.txt"), "staged\n").unwrap();
    git(repo.path(), &["add", "staged.txt"]);
    let other = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let o = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .env("GIT_DIR", other.path().join(".git"))
        .env("GIT_WORK_TREE", other.path())
        .env("GIT_INDEX_FILE", repo.path().join(".git/index"))
        .env("GIT_OBJECT_DIRECTORY", other.path().join(".git/objects"))
        .env("GIT_COMMON_DIR", other.path().join(".git"))
        .output()
        .unwrap();
    assert_code(&o, 0);
    let recs = repo.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["sha"], repo.head().as_str());
    assert_eq!(repo.verified(), Some(repo.head()));
    assert!(other.records().is_empty());
    assert_eq!(other.verified(), None, "another repository's pointer moved");
    assert_eq!(
        git(repo.path(), &["diff", "--cached", "--name-only"]),
        "staged.txt",
        "the operator's staged index was overwritten"
    );
}

#[test]
fn the_stripped_variables_cover_gits_own_list() {
    let o = Command::new("git")
        .args(["rev-parse", "--local-env-vars"])
        .output()
        .unwrap();
    for v in String::from_utf8_lossy(&o.stdout).lines() {
        assert!(
            saphan::exec::GIT_LOCAL_ENV.contains(&v),
            "{v} is not stripped"
        );
    }
}

/// A process that exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with(['Z', 'X']))
}

fn wait_for(p: &Path, what: &str) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Item 6: the first attempt's suite ignores TERM and outlives saphan killed
/// with `sig`; by the time the second attempt's suite runs it must be dead,
/// and nothing it does reaches the second attempt's tree.
fn leftover_suite_scenario(sig: nix::sys::signal::Signal) {
    let env = Env::new();
    // Observes the suite through a control dir in a tempdir outside its tree, which a sealed suite cannot write, and a pid its PID namespace would make meaningless here (the seal has its own tests: tests/it/seal.rs).
    env.write_config(&format!("{SUITE_CONFIG}seal = \"off\"\n"));
    let ctl = tempfile::tempdir().unwrap();
    let c = ctl.path().display();
    let repo = Repo::new(&[(
        "suite.sh",
        &format!(
            "#!/bin/sh\nif mkdir '{c}/first' 2>/dev/null; then\n  trap '' TERM HUP INT\n  echo $$ > '{c}/pid.tmp' && mv '{c}/pid.tmp' '{c}/pid'\n  while [ ! -e '{c}/go' ]; do sleep 0.02; done\n  echo leftover > \"$PWD/leftover-was-here\"\n  touch '{c}/wrote'\n  exit 0\nfi\ntouch '{c}/second'\nwhile [ ! -e '{c}/go2' ]; do sleep 0.02; done\ntest ! -e leftover-was-here || exit 7\n"
        ),
    )]);
    let mut first = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl.path().join("pid"), "the first suite never started");
    let pid: i32 = std::fs::read_to_string(ctl.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.id() as i32), sig).unwrap();
    first.wait().unwrap();
    let second = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ctl.path().join("second"), "the second suite never started");
    let survived = alive(pid);
    // Let a survivor do its worst before the second suite looks.
    std::fs::write(ctl.path().join("go"), "").unwrap();
    if survived {
        let t0 = Instant::now();
        while alive(pid) && !ctl.path().join("wrote").exists() {
            assert!(t0.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    std::fs::write(ctl.path().join("go2"), "").unwrap();
    let o = second.wait_with_output().unwrap();
    if alive(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        !survived,
        "the first attempt's suite (pid {pid}) still ran while the second attempt's suite ran (after {sig})"
    );
    assert_code(&o, 0);
    assert!(!ctl.path().join("wrote").exists());
}

#[test]
fn a_suite_outliving_a_sigkilled_saphan_never_touches_the_next_attempt() {
    leftover_suite_scenario(nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn a_suite_outliving_a_sigtermed_saphan_never_touches_the_next_attempt() {
    leftover_suite_scenario(nix::sys::signal::Signal::SIGTERM);
}

// Item 7: a registration of the stable scratch path left missing (and
// locked) by a killed `git worktree` is healed; the operator's own missing
// and locked worktrees are left registered.
#[test]
fn a_wedged_scratch_registration_is_healed_and_only_that_one() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let certify = || env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&certify(), 0);
    let keys: Vec<PathBuf> = std::fs::read_dir(env.home().join("scratch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(keys.len(), 1);
    let scratch = keys[0].join("tree");
    let sp = scratch.to_string_lossy().into_owned();
    // The operator's own: one moved away (missing), one missing and locked.
    let ops = tempfile::tempdir().unwrap();
    let mine = ops.path().join("mine");
    let locked = ops.path().join("locked");
    for (p, lock) in [(&mine, false), (&locked, true)] {
        let ps = p.to_string_lossy().into_owned();
        git(repo.path(), &["worktree", "add", "-q", "--detach", &ps]);
        if lock {
            git(repo.path(), &["worktree", "lock", &ps]);
        }
        std::fs::remove_dir_all(p).unwrap();
    }
    for lock in [false, true] {
        git(repo.path(), &["worktree", "add", "-q", "--detach", &sp]);
        if lock {
            // git's own lock of an add that was killed, with the killed
            // attempt's marker still there (any other lock is someone
            // else's: scratch-path-foreign).
            git(
                repo.path(),
                &["worktree", "lock", "--reason", "initializing", &sp],
            );
            let marker = saphan::worktree::attempt_marker(&scratch);
            std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
            std::fs::write(&marker, "").unwrap();
        }
        std::fs::remove_dir_all(&scratch).unwrap();
        let o = certify();
        assert_code(&o, 0);
    }
    let listed = repo.worktrees();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed.contains(&mine) && listed.contains(&locked),
        "{listed:?}"
    );
}

// Item 4 (and 1): a repository whose directory name is not UTF-8 is found
// by its bytes — certify measures it, and a stream's worktree beside it is
// listed, gated and torn down.
#[test]
fn a_repository_whose_path_is_not_utf8_is_certified_and_streams_work() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let t = tempfile::Builder::new()
        .prefix("saphan-bytes-")
        .tempdir()
        .unwrap();
    let repo = t.path().join(std::ffi::OsStr::from_bytes(b"r\xe9po"));
    let head = green_repo_at(&repo);
    let run = |args: &[&str]| {
        env.cmd()
            .arg(args[0])
            .args(&args[1..])
            .arg("--repo")
            .arg(&repo)
            .output()
            .unwrap()
    };
    assert_code(&run(&["certify", "--json"]), 0);
    let recs = records_of(&repo);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["sha"], head.as_str());
    assert_code(&run(&["stream", "start", "s"]), 0);
    let wt = t
        .path()
        .join(std::ffi::OsStr::from_bytes(b"r\xe9po.streams"))
        .join("s");
    assert!(wt.join(".saphan/status").is_file());
    let o = run(&["stream", "gate", "stop-2", "s", "--json"]);
    assert_code(&o, 0);
    // JSON cannot hold those bytes as they are: the path is C-quoted.
    let w = common::json(&o)["worktree"].as_str().unwrap().to_string();
    assert!(
        w.starts_with('"') && w.contains("r\\351po.streams/s"),
        "{w}"
    );
    let o = run(&["stream", "teardown", "s", "--json"]);
    assert_code(&o, 0);
    assert_eq!(common::json(&o)["worktree_removed"], w.as_str());
    assert!(!wt.exists());
}
