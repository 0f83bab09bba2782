//! The stable scratch path heals itself (issue 15.7's shape, through the
//! one worktree code local certify and dispatch share): a registration of
//! exactly that path left missing-and-locked by a killed run does not wedge
//! the next certify, and the operator's own worktrees are never touched.

use crate::common::{Env, Repo, assert_code, git, json};

#[test]
fn a_locked_missing_registration_of_the_scratch_path_is_healed() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho ok\n")]);
    let sha = repo.head();
    let common_dir = git(
        repo.path(),
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    );
    let key = saphan::fsutil::sha256_hex(common_dir.as_bytes());
    let stable = env.home().join("scratch").join(&key[..16]).join("tree");
    let stable_s = stable.to_str().unwrap();
    // The operator's own worktree, moved away by hand (missing but
    // registered): saphan must not prune it.
    let own = tempfile::tempdir().unwrap();
    let own_wt = own.path().join("mine");
    git(
        repo.path(),
        &[
            "worktree",
            "add",
            "--detach",
            "-q",
            own_wt.to_str().unwrap(),
            &sha,
        ],
    );
    std::fs::remove_dir_all(&own_wt).unwrap();
    // What a run killed inside `git worktree add` leaves: the stable path
    // registered under git's own `initializing` lock, gone, and the
    // attempt's marker still there (a lock of any other reason is someone
    // else's: scratch-path-foreign, tests/it/never_a_lie.rs).
    git(
        repo.path(),
        &["worktree", "add", "--detach", "-q", stable_s, &sha],
    );
    git(
        repo.path(),
        &["worktree", "lock", "--reason", "initializing", stable_s],
    );
    std::fs::remove_dir_all(&stable).unwrap();
    let marker = saphan::worktree::attempt_marker(&stable);
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, "").unwrap();

    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["verdict"], "green");
    let wts = repo.worktrees();
    assert_eq!(wts.len(), 2, "{wts:?}");
    assert!(wts.iter().any(|w| w.ends_with("mine")), "{wts:?}");
    assert!(!wts.iter().any(|w| w == &stable), "{wts:?}");
}
