//! Never a lie (issue 37): what saphan says matches what happened — tests
//! that never ran are not green, a build failure is a build failure, a
//! record's times are its attempt's, words name whose result they tell,
//! what a killed run left is reaped, descriptors that ran out are not a
//! missing git, and a worktree saphan did not make is never removed. Real
//! binary, real git, real Go (Debian's go1.19), lab hosts for the splits.

use crate::common::gomod::{self, MODULE};
use crate::common::{self, Env, Repo, assert_code, json, lab::Lab, text};
use std::path::{Path, PathBuf};

/// A Go module (standard library only) of `files` beside its `go.mod`.
fn module(files: &[(&str, &str)]) -> Repo {
    let (p, c) = gomod::go_mod();
    let mut all: Vec<(&str, &str)> = vec![(p, c.as_str())];
    all.extend_from_slice(files);
    Repo::new(&all)
}

/// `saphan --json certify --repo REPO EXTRA…` here, with Go's toolchain
/// local and no inherited GOFLAGS.
fn certify(env: &Env, repo: &Repo, extra: &[&str]) -> std::process::Output {
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    c.args(["--json", "certify", "--repo", &repo.path_str()])
        .args(extra)
        .output()
        .unwrap()
}

/// Packages whose TestMain never runs m.Run(): `exits` calls os.Exit(0)
/// first, `returns` returns without it; `ran` is an ordinary package.
const NEVER_RAN: [(&str, &str); 4] = [
    (
        "exits/exits_test.go",
        "package exits\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\n\nfunc TestNever(t *testing.T) { t.Fatal(\"would fail\") }\n",
    ),
    (
        "returns/returns_test.go",
        "package returns\n\nimport \"testing\"\n\nfunc TestMain(m *testing.M) {}\n\nfunc TestNever(t *testing.T) { t.Fatal(\"would fail\") }\n",
    ),
    (
        "ran/ran_test.go",
        "package ran\n\nimport \"testing\"\n\nfunc TestRan(t *testing.T) {}\n",
    ),
    (
        "norun/norun_test.go",
        "package norun\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n// TestMain runs m.Run(), which finds no test: PASS, green.\nfunc TestMain(m *testing.M) { os.Exit(m.Run()) }\n",
    ),
];

/// Item 1: a package whose TestMain exits 0 (or returns) before m.Run()
/// ends `ok` in go1.19's stream with no test started and no `PASS` line:
/// never green, the note names both such packages (and not the one whose
/// m.Run() found nothing to run), the pointer stays.
#[test]
fn a_test_main_that_never_runs_its_tests_is_never_green() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = module(&NEVER_RAN);
    let o = certify(&env, &repo, &[]);
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "tests-never-ran", "{r}");
    assert_eq!(r["count"], 1, "{r}");
    let notes = r["notes"].to_string();
    for p in ["exits", "returns"] {
        assert!(notes.contains(&format!("{MODULE}/{p}")), "{p}: {r}");
    }
    for p in ["ran", "norun"] {
        assert!(!notes.contains(&format!("{MODULE}/{p}")), "{p}: {r}");
    }
    assert_eq!(repo.verified(), None);
    // Without them the module is green: the rule is what failed it.
    let green = module(&NEVER_RAN[2..]);
    let o = certify(&env, &green, &[]);
    assert_code(&o, 0);
    assert_eq!(green.verified(), Some(green.head()));
}

fn go_ready_lab() -> Option<&'static Lab> {
    if common::skip_unless(
        Path::new("/usr/bin/go").exists() && saphan::exec::which("go").is_some(),
        "no /usr/bin/go for the lab hosts, or no go here to list packages with",
    ) {
        return None;
    }
    Lab::shared()
}

/// A home wired to the lab's `hosts`, measured and with go probed.
fn lab_fleet(lab: &Lab, hosts: &[&str]) -> (Env, tempfile::TempDir) {
    let (env, work) = common::fleet::home(lab, hosts, "never");
    let list = hosts.join(",");
    assert_code(&env.run(&["machine", "measure", "--machine", &list]), 0);
    assert_code(
        &common::fleet::probe(&env, &list, "go", "/usr/bin/go", "/tmp"),
        0,
    );
    (env, work)
}

/// Item 1, split: the same packages over two lab machines — the split's
/// judgement is the unsplit one: measurement-failed `tests-never-ran`,
/// naming them, coverage complete (they did end), the pointer stays.
#[test]
fn a_split_over_tests_that_never_ran_is_never_green_either() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0", "m1"]);
    let repo = module(&NEVER_RAN);
    let o = common::fleet::certify(&env, &repo, "m0,m1", &["--split"]);
    assert_code(&o, 3);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "measurement-failed", "{v}");
    assert_eq!(s["failure"], "tests-never-ran", "{v}");
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    let notes = s["notes"].to_string();
    for p in ["exits", "returns"] {
        assert!(notes.contains(&format!("{MODULE}/{p}")), "{p}: {v}");
    }
    assert_eq!(repo.verified(), None);
}

/// Items 19b and 19c: shards whose only package failed to build (go1.19:
/// `FAIL p [build failed]` as plain text for a package with tests, nothing
/// but stderr and exit 2 for one without) are a build failure — red naming
/// the package, or the suite's crash — never `report-no-events` with advice
/// to make the suite run go test -json; each dispatched record that is not
/// green carries its suite's `stderr_tail` in `--json`, as a local one
/// does. Unsplit, a module whose only package fails to build is red too.
#[test]
fn a_shard_whose_only_package_failed_to_build_is_a_build_failure() {
    if gomod::no_go() {
        return;
    }
    let bf: [(&str, &str); 2] = [
        (
            "bf/bf.go",
            "package bf\n\n// F is wrong.\nfunc F() int { return \"x\" }\n",
        ),
        (
            "bf/bf_test.go",
            "package bf\n\nimport \"testing\"\n\nfunc TestBF(t *testing.T) {}\n",
        ),
    ];
    let env = Env::new();
    let only = module(&bf);
    let o = certify(&env, &only, &[]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(
        r["named_tests"],
        serde_json::json!([format!("{MODULE}/bf")])
    );
    assert!(
        r["stderr_tail"].as_str().unwrap().contains("cannot use"),
        "{r}"
    );

    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0", "m1"]);
    let mut files = bf.to_vec();
    files.push((
        "nt/nt.go",
        "package nt\n\n// F is wrong.\nfunc F() int { return \"y\" }\n",
    ));
    let repo = module(&files);
    let o = common::fleet::certify(&env, &repo, "m0,m1", &["--split"]);
    let (_, err) = text(&o);
    assert_code(&o, 1);
    let v = json(&o);
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{v}");
    for r in records {
        let packages = r["shard"]["packages"].to_string();
        assert!(!r.to_string().contains("report-no-events"), "{r}\n{err}");
        assert!(!r.to_string().contains("run `go test -json`"), "{r}");
        let tail = r["stderr_tail"]
            .as_str()
            .unwrap_or_else(|| panic!("no stderr_tail: {r}"));
        if packages.contains("/bf") {
            assert_eq!(r["verdict"], "red", "{r}");
            assert_eq!(
                r["named_tests"],
                serde_json::json!([format!("{MODULE}/bf")])
            );
        } else {
            assert_eq!(r["verdict"], "measurement-failed", "{r}");
            assert_eq!(r["failure"], "crash", "{r}");
            assert!(
                tail.contains("nt/nt.go") && tail.contains("cannot use"),
                "{r}"
            );
        }
    }
    assert_eq!(v["split"]["verdict"], "red", "{v}");
}

/// A home with one `transport = "local"` machine row, `here`, measured and
/// with go probed: a fleet machine's bench on this machine.
fn local_row(work: &Path) -> Env {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        format!(
            "[machine.here]\ntransport = \"local\"\nworkhome = \"{}\"\n",
            work.display()
        ),
    )
    .unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    assert_code(
        &common::fleet::probe(&env, "here", "go", "/usr/bin/go", "/tmp"),
        0,
    );
    env
}

/// Item 6: an attempt that waited out the machine's repository lock (held
/// by another run for the whole 60 s) is `lock-timeout`, and its record's
/// `started_at` is when it started — before the wait — not its end.
#[test]
fn a_lock_timeout_record_starts_when_its_attempt_did() {
    if common::skip_unless(
        Path::new("/usr/bin/go").exists() && common::have("flock"),
        "no /usr/bin/go or no flock",
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let env = local_row(work.path());
    let repo = module(&[(
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
    )]);
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let run = |c: &mut std::process::Command| {
        c.args([
            "--json",
            "certify",
            "--repo",
            &repo.path_str(),
            "--machine",
            "here",
        ])
        .output()
        .unwrap()
    };
    assert_code(&run(&mut c), 0);
    // The machine's repository lock, held by someone else.
    let locks: Vec<PathBuf> = std::fs::read_dir(work.path().join("saphan/locks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lock"))
        .collect();
    assert_eq!(locks.len(), 1, "{locks:?}");
    let mut holder = std::process::Command::new("flock")
        .arg(&locks[0])
        .args(["sleep", "200"])
        .spawn()
        .unwrap();
    // The lock is held once a second flock cannot take it.
    let t0 = std::time::Instant::now();
    let free = || {
        std::process::Command::new("flock")
            .arg("-n")
            .arg(&locks[0])
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    while free() {
        assert!(t0.elapsed().as_secs() < 30, "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before = time::OffsetDateTime::now_utc();
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = run(&mut c);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_code(&o, 3);
    let v = json(&o);
    let r = &v["records"][0];
    assert_eq!(r["failure"], "lock-timeout", "{v}");
    let at = |k: &str| saphan::clock::parse_rfc3339(r[k].as_str().unwrap()).unwrap();
    let waited = at("finished_at") - at("started_at");
    assert!(
        waited >= time::Duration::seconds(55),
        "started_at is the wait's end: {r}"
    );
    assert!(
        at("started_at") >= before - time::Duration::seconds(1),
        "{r}"
    );
}

/// Item 12: a `saphan-listing-*` file a killed run left in `$TMPDIR` is
/// reaped by a later run: its name carries its owner's pid, and only a
/// dead owner's file is removed — a live process's, and a name without a
/// pid, stay.
#[test]
fn listing_files_a_killed_run_left_are_reaped() {
    if common::skip_unless(Path::new("/usr/bin/go").exists(), "no /usr/bin/go") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let env = local_row(work.path());
    let tmp = tempfile::tempdir().unwrap();
    // A pid that is gone: a child that ran and was reaped.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let dead_file = tmp.path().join(format!("saphan-listing-{dead}-a1b2c3"));
    let live_file = tmp
        .path()
        .join(format!("saphan-listing-{}-d4e5f6", std::process::id()));
    let other = tmp.path().join("saphan-listing-notapid");
    for f in [&dead_file, &live_file, &other] {
        std::fs::write(f, "x\n").unwrap();
    }
    let repo = module(&[(
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
    )]);
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .env("TMPDIR", tmp.path())
        .args([
            "--json",
            "certify",
            "--repo",
            &repo.path_str(),
            "--machine",
            "here",
        ])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert!(!dead_file.exists(), "a dead run's listing file stays");
    assert!(
        live_file.exists() && other.exists(),
        "a live or unnamed one went"
    );
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("saphan-listing-"))
        .collect();
    assert_eq!(left.len(), 2, "this run left its own: {left:?}");
}

/// Item 16: a saphan that runs out of file descriptors says so — never
/// `git-absent … install git` — at whatever limit it runs out.
#[test]
fn running_out_of_descriptors_is_not_a_missing_git() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    let bin = env!("CARGO_BIN_EXE_saphan");
    let mut said = Vec::new();
    for limit in 8..48 {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {limit} && exec \"$0\" certify --repo \"$1\""
            ))
            .arg(bin)
            .arg(repo.path())
            .env("SAPHAN_HOME", env.home())
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert!(
            !err.contains("git-absent") && !err.contains("install git"),
            "at {limit} descriptors: {err}"
        );
        if err.contains("descriptors-exhausted") {
            assert!(err.contains("ulimit -n"), "{err}");
            said.push(limit);
        }
    }
    assert!(!said.is_empty(), "no limit ran out at a git spawn");
}

/// Item 19a: a copy of a stalled machine's shard that ended green while
/// the first attempt went on to answer red is told as the copy's result —
/// "the copy's own result was green" — never as the first attempt's.
#[test]
fn a_copys_note_tells_its_result_as_the_copys() {
    let Some(lab) = Lab::start(2) else { return };
    if common::skip_unless(Path::new("/usr/bin/go").exists(), "no /usr/bin/go") {
        return;
    }
    let v = crate::split::stalled_then_red(&lab, true);
    let m1 = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["machine"] == "m1")
        .expect("m1's record");
    let notes = m1["notes"].to_string();
    assert!(
        notes.contains("its first attempt answered; the copy's own result was green"),
        "{m1}"
    );
    assert!(!notes.contains("answered (green)"), "{m1}");
}

/// Item 20: a worktree someone else registered and locked at saphan's
/// scratch path (its directory there, a file in it) is refused by name —
/// `scratch-path-foreign`, with what to do — and left exactly as it was:
/// registered, locked, its file in place. Once unlocked and removed, the
/// next certify is green.
#[test]
fn a_locked_worktree_saphan_did_not_make_is_refused_never_removed() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let keys: Vec<PathBuf> = std::fs::read_dir(env.home().join("scratch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let tree = keys[0].join("tree");
    let tree_s = tree.to_str().unwrap();
    common::git(
        repo.path(),
        &["worktree", "add", "--detach", tree_s, "HEAD"],
    );
    common::git(
        repo.path(),
        &["worktree", "lock", "--reason", "mine", tree_s],
    );
    std::fs::write(tree.join("notes.txt"), "precious\n").unwrap();
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    let err = common::assert_refused(&o, "scratch-path-foreign");
    assert!(
        err.contains(tree_s) && err.contains("git worktree unlock"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.join("notes.txt")).unwrap(),
        "precious\n"
    );
    let list = common::git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(tree_s) && list.contains("locked mine"),
        "{list}"
    );
    assert_eq!(repo.records().len(), 1, "a refusal records nothing");
    common::git(repo.path(), &["worktree", "unlock", tree_s]);
    common::git(repo.path(), &["worktree", "remove", "--force", tree_s]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Item 15: the config — the file that says what runs and how it is judged
/// — is guarded like every other file of SAPHAN_HOME: writable by others
/// (the file, or the home that holds it) it is `saphan-home-exposed` before
/// a byte is read, for certify and `config show` alike; nothing runs, nothing
/// is recorded, the pointer stays. The operator's alone again, it is green.
#[test]
fn a_config_others_can_write_is_refused_like_the_rest_of_the_home() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"true\"]\nreport = \"exitcode\"\n");
    let config = env.home().join("config");
    let repo = Repo::new(&[("README", "x\n")]);
    let certify = ["certify", "--repo", &repo.path_str()];
    for (p, mode, back) in [(&config, 0o666, 0o600), (&config, 0o620, 0o600)] {
        chmod(p, mode);
        let err = common::assert_refused(&env.run(&certify), "saphan-home-exposed");
        assert!(
            err.contains(&format!("chmod go-w {}", p.display())),
            "{err}"
        );
        common::assert_refused(&env.run(&["config", "show"]), "saphan-home-exposed");
        chmod(p, back);
    }
    let home = env.home().to_path_buf();
    chmod(&home, 0o777);
    let err = common::assert_refused(&env.run(&certify), "saphan-home-exposed");
    assert!(
        err.contains(&format!("chmod go-w {}", home.display())),
        "{err}"
    );
    chmod(&home, 0o700);
    assert!(repo.records().is_empty(), "a refusal records nothing");
    assert_eq!(repo.verified(), None);
    assert_code(&env.run(&certify), 0);
    assert_eq!(repo.verified(), Some(repo.head()));
}

/// Item 15: an ssh config others can write, met while a dispatch connects,
/// is the refusal every other command gives — `saphan-home-exposed`, exit
/// 2, nothing recorded — not a machine's measurement-failed record; with
/// `--split` too.
#[test]
fn an_exposed_ssh_config_during_a_dispatch_is_a_refusal() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0", "m1"]);
    let repo = module(&[(
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
    )]);
    let ssh_config = env.home().join("ssh/config");
    chmod(&ssh_config, 0o666);
    for (machines, extra) in [("m0", &[][..]), ("m0,m1", &["--split"][..])] {
        let mut args = vec!["certify", "--repo", repo.path().to_str().unwrap()];
        args.extend(["--machine", machines]);
        args.extend_from_slice(extra);
        let o = env.run(&args);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(
            err.contains(&format!(
                "saphan: saphan-home-exposed: {}",
                ssh_config.display()
            )),
            "{err}"
        );
    }
    assert!(repo.records().is_empty(), "{:?}", repo.records());
    chmod(&ssh_config, 0o644);
    assert_code(&common::fleet::certify(&env, &repo, "m0", &[]), 0);
}

/// `files` as the `(&str, &str)` pairs [`module`] and `Repo::commit` take.
fn as_str(f: &[(String, String)]) -> Vec<(&str, &str)> {
    f.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

/// A package `p<i>` whose one test sleeps `ms` milliseconds.
fn sleeper(i: usize, ms: u32) -> (String, String) {
    (
        format!("p{i}/p{i}_test.go"),
        format!(
            "package p{i}\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestP{i}(t *testing.T) {{ time.Sleep({ms} * time.Millisecond) }}\n"
        ),
    )
}

/// Item 18: one bad run does not make the plan. Four packages of about
/// 0.2 s each, split over two lab machines twice; then one commit where
/// one of them took 3 s (its records say so); then a commit where all four
/// are as before again: the plan balances by the median of each package's
/// recorded runs — two packages a machine — not by the latest run alone,
/// which put the slow one alone and the other three on one machine.
#[test]
fn one_bad_run_does_not_make_the_next_plan() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0", "m1"]);
    let normal: Vec<(String, String)> = (0..4).map(|i| sleeper(i, 200)).collect();
    let repo = module(&as_str(&normal));
    let split = |repo: &Repo| -> Vec<usize> {
        let o = common::fleet::certify(&env, repo, "m0,m1", &["--split"]);
        assert_code(&o, 0);
        let v = json(&o);
        let mut sizes: Vec<usize> = v["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["shard"]["packages"].as_array().unwrap().len())
            .collect();
        sizes.sort();
        sizes
    };
    assert_eq!(split(&repo), [2, 2]);
    assert_eq!(split(&repo), [2, 2]);
    // The bad run: p3 took 3 s.
    repo.commit(&as_str(&[sleeper(3, 3000)]), "p3 is slow once");
    split(&repo);
    let slow = repo.records();
    let p3 = slow
        .iter()
        .rev()
        .find_map(|r| r["package_seconds"][&format!("{MODULE}/p3")].as_f64())
        .unwrap();
    assert!(p3 >= 3.0, "{slow:?}");
    repo.commit(&as_str(&[sleeper(3, 200)]), "p3 as before");
    assert_eq!(split(&repo), [2, 2], "the plan followed one bad run");
}
