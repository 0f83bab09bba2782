//! Where a machine cannot seal (issue 36 item 6): the run goes on unsealed
//! and says so — in the record (`seal: {"state": "unsealed", "why": …}`)
//! and in one line of certify's output — unless the operator requires the
//! seal, which refuses such a machine by name before anything runs or is
//! shipped; `off` is recorded as off. The real binary runs in a private
//! mount namespace where `/usr/bin/bwrap` is `/dev/null` (not a program):
//! this machine, and a `transport = "local"` fleet machine measured there.

use crate::common::{self, Env, Repo, assert_code, assert_refused, json, text};
use std::process::{Command, Output};

/// `saphan args…` with `env`'s home, where bwrap is not a program.
fn without_bwrap(env: &Env, args: &[&str]) -> Output {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind /dev/null /usr/bin/bwrap && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_saphan"))
        .args(args)
        .env("SAPHAN_HOME", env.home())
        .env_remove("RUST_LOG");
    c.output().unwrap()
}

/// Root, `unshare` and a bwrap at `/usr/bin/bwrap` to hide; otherwise
/// SKIPPED.
fn ready() -> bool {
    !common::skip_unless(
        nix::unistd::geteuid().is_root()
            && common::have("unshare")
            && std::path::Path::new("/usr/bin/bwrap").is_file(),
        "hiding bwrap needs root, unshare and /usr/bin/bwrap (apt-get install bubblewrap util-linux)",
    )
}

const SUITE: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n";

#[test]
fn this_machine_without_bwrap_runs_unsealed_saying_so_or_refuses_when_required() {
    if !ready() {
        return;
    }
    let env = Env::new();
    env.write_config(SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho ran\n")]);
    let r = repo.path_str();

    let o = without_bwrap(&env, &["certify", "--repo", &r]);
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert!(
        out.lines()
            .any(|l| l.starts_with("seal: UNSEALED — bwrap is not installed here")),
        "{out}"
    );
    let rec = repo.records().pop().unwrap();
    assert_eq!(rec["seal"]["state"], "unsealed", "{rec}");
    assert!(
        rec["seal"]["why"].as_str().unwrap().contains("bubblewrap"),
        "{rec}"
    );

    // Required: refused before the lock, the tree or a record.
    let before = repo.records().len();
    let o = without_bwrap(&env, &["certify", "--repo", &r, "--seal", "required"]);
    let line = assert_refused(&o, "seal-unavailable");
    assert!(line.contains("local cannot seal"), "{line}");
    assert!(line.contains("flag:--seal"), "{line}");
    assert_eq!(repo.records().len(), before);
    common::assert_only_main_worktree(&repo);

    // Declared: the same refusal, naming the declaration.
    env.write_config(&format!("{SUITE}seal = \"required\"\n"));
    let o = without_bwrap(&env, &["certify", "--repo", &r]);
    let line = assert_refused(&o, "seal-unavailable");
    assert!(line.contains("config:verify.full.seal"), "{line}");

    // Off: recorded as off, said in one line, and the flag wins.
    let o = without_bwrap(&env, &["certify", "--repo", &r, "--seal", "off", "--json"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["seal"]["state"], "off", "{v}");
    assert!(
        v["seal"]["why"].as_str().unwrap().contains("flag:--seal"),
        "{v}"
    );

    // With bwrap there, the same declaration seals.
    let o = env.run(&["certify", "--repo", &r, "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["seal"]["state"], "sealed");
}

#[test]
fn a_fleet_machine_measured_without_bwrap_is_unsealed_or_refused_before_the_ship() {
    if !ready() {
        return;
    }
    let env = Env::new();
    env.write_config(SUITE);
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        format!(
            "[machine.here]\ntransport = \"local\"\nworkhome = \"{}\"\n",
            work.path().display()
        ),
    )
    .unwrap();
    // The facts row says what the machine could do when it was measured.
    let o = without_bwrap(&env, &["machine", "measure", "--machine", "here"]);
    assert_code(&o, 0);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho ran\n")]);
    let r = repo.path_str();

    let o = without_bwrap(
        &env,
        &["certify", "--repo", &r, "--machine", "here", "--json"],
    );
    assert_code(&o, 0);
    let v = json(&o);
    let rec = &v["records"][0];
    assert_eq!(rec["seal"]["state"], "unsealed", "{v}");
    let why = rec["seal"]["why"].as_str().unwrap();
    // `/dev/null` at bwrap's path: on PATH, but not a program.
    assert!(
        why.contains("bwrap on here did not run a sealed `true`")
            && why.contains("saphan machine measure --machine here"),
        "{why}"
    );
    let o = without_bwrap(&env, &["certify", "--repo", &r, "--machine", "here"]);
    assert_code(&o, 0);
    assert!(
        text(&o)
            .0
            .contains("seal: UNSEALED — bwrap on here did not run"),
        "{}",
        text(&o).0
    );

    // Required: refused by name before anything is shipped to the machine.
    let before = repo.records().len();
    let o = without_bwrap(
        &env,
        &[
            "certify",
            "--repo",
            &r,
            "--machine",
            "here",
            "--seal",
            "required",
        ],
    );
    let line = assert_refused(&o, "seal-unavailable");
    assert!(line.contains("here cannot seal"), "{line}");
    assert_eq!(repo.records().len(), before);
    assert!(
        !work.path().join("saphan/mirrors").exists()
            || std::fs::read_dir(work.path().join("saphan/mirrors"))
                .unwrap()
                .count()
                == 1,
        "only the earlier attempts' mirror"
    );

    // Measured again with bwrap there, the machine seals.
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    let o = env.run(&[
        "certify",
        "--repo",
        &r,
        "--machine",
        "here",
        "--json",
        "--seal",
        "required",
    ]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["records"][0]["seal"]["state"], "sealed");
}
