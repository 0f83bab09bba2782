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
/// but stderr and exit 2 for one without) are no measurement — a stream
/// without events is never a verdict (the corpus's rule 1) — but their
/// words say the build failed and to fix it (or the suite's crash, whose
/// reason is on stderr), never advice to make the suite run go test -json;
/// each dispatched record that is not green carries its suite's
/// `stderr_tail` in `--json`, as a local one does. Unsplit, a module whose
/// only package fails to build says the same.
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
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "report-no-events", "{r}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains(&format!("`{MODULE}/bf` failed to build"))
            && notes.contains("fix the build"),
        "{r}"
    );
    assert!(!notes.contains("run `go test -json`"), "{r}");
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
    assert_code(&o, 3);
    let v = json(&o);
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{v}");
    for r in records {
        let packages = r["shard"]["packages"].to_string();
        assert!(!r.to_string().contains("run `go test -json`"), "{r}\n{err}");
        let tail = r["stderr_tail"]
            .as_str()
            .unwrap_or_else(|| panic!("no stderr_tail: {r}"));
        if packages.contains("/bf") {
            assert_eq!(r["verdict"], "measurement-failed", "{r}");
            assert_eq!(r["failure"], "report-no-events", "{r}");
            assert!(r["notes"].to_string().contains("fix the build"), "{r}");
        } else {
            assert_eq!(r["verdict"], "measurement-failed", "{r}");
            assert_eq!(r["failure"], "crash", "{r}");
            assert!(
                tail.contains("nt/nt.go") && tail.contains("cannot use"),
                "{r}"
            );
        }
    }
    assert_eq!(v["split"]["verdict"], "measurement-failed", "{v}");
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

static WRAPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A `go` in `host`'s own `/root`: `go version` prints the `version` file
/// beside it, anything else runs `/usr/bin/go`. Returns its directory here
/// and its path on the machine.
fn wrapped_go(lab: &Lab, host: &str, version: &str) -> (PathBuf, String) {
    let name = format!(
        "saphan-go-{}-{}",
        std::process::id(),
        WRAPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let dir = lab.home_dir(host).join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("version"), format!("{version}\n")).unwrap();
    let on = format!("/root/{name}");
    std::fs::write(
        dir.join("go"),
        format!(
            "#!/bin/sh\nif [ \"$1\" = version ]; then cat {on}/version; exit 0; fi\nexec /usr/bin/go \"$@\"\n"
        ),
    )
    .unwrap();
    chmod(&dir.join("go"), 0o755);
    (dir, format!("{on}/go"))
}

/// A home wired to the lab's `hosts`, measured, with `go` probed at `path`.
fn lab_fleet_at(lab: &Lab, hosts: &[&str], path: &str) -> (Env, tempfile::TempDir) {
    let (env, work) = common::fleet::home(lab, hosts, "never");
    let list = hosts.join(",");
    assert_code(&env.run(&["machine", "measure", "--machine", &list]), 0);
    assert_code(&common::fleet::probe(&env, &list, "go", path, "/tmp"), 0);
    (env, work)
}

/// Item 7: a dispatched record's `program_version` is what this attempt
/// measured on the machine, just before the suite — never the probe row's
/// (that stays in `machine_program.version`). A program that cannot start
/// there gets no version at all, in the record and in what certify prints.
#[test]
fn a_record_carries_only_the_version_its_attempt_measured() {
    let Some(lab) = go_ready_lab() else { return };
    let probed = "go version go1.19.8 linux/amd64 (as probed)";
    let (dir, path) = wrapped_go(lab, "m0", probed);
    let (env, _work) = lab_fleet_at(lab, &["m0"], &path);
    let now = "go version go1.19.8 linux/amd64 (as run)";
    std::fs::write(dir.join("version"), format!("{now}\n")).unwrap();
    let repo = module(&[(
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
    )]);
    let o = common::fleet::certify(&env, &repo, "m0", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = &v["records"][0];
    assert_eq!(r["program_version"], now, "{r}");
    assert_eq!(r["machine_program"]["version"], probed, "{r}");
    // The program can no longer start there.
    chmod(&dir.join("go"), 0o644);
    let o = common::fleet::certify(&env, &repo, "m0", &[]);
    assert_code(&o, 3);
    let r = &json(&o)["records"][0];
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert!(r["program_version"].is_null(), "{r}");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0"]);
    assert_code(&o, 3);
    let (out, err) = text(&o);
    assert!(
        !out.contains("(as probed)") && !out.contains("(as run)"),
        "{out}\n{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Commit an incompressible file of `mib` MiB to `repo`: bundling,
/// streaming and fetching it take a while. Returns the new HEAD.
fn heavy(repo: &Repo, name: &str, mib: u64) -> String {
    use std::io::Read;
    let mut blob = std::fs::File::create(repo.path().join(name)).unwrap();
    std::io::copy(
        &mut std::fs::File::open("/dev/urandom").unwrap().take(mib << 20),
        &mut blob,
    )
    .unwrap();
    drop(blob);
    repo.commit(&[], name)
}

/// Wait (bounded) until `cond` holds.
fn wait_until(bound: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < bound {
        if cond() {
            return true;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(10));
    }
    false
}

/// What an interrupted certify left: its exit code, its `--json` and its stderr.
struct Stopped {
    code: Option<i32>,
    json: serde_json::Value,
    stderr: String,
}

/// Start `saphan --json certify --repo REPO ARGS…`, wait (bounded) until
/// `at` holds — given the stderr so far — send `sig` to the saphan process,
/// and wait for it to end.
fn interrupt_when(
    env: &Env,
    repo: &Repo,
    args: &[&str],
    sig: i32,
    mut at: impl FnMut(&str) -> bool,
) -> Stopped {
    use std::io::Read;
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let mut child = c
        .args(["--json", "certify", "--repo", &repo.path_str()])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let drain = {
        let err = err.clone();
        let mut pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => err
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        })
    };
    let reached = wait_until(std::time::Duration::from_secs(120), || {
        at(&err.lock().unwrap())
    });
    if reached {
        // SAFETY: signalling the child this test spawned, by its pid.
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let st = child.wait().unwrap();
    drain.join().unwrap();
    let stderr = err.lock().unwrap().clone();
    assert!(
        reached,
        "the moment to interrupt never came:\n{out}\n{stderr}"
    );
    let json = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{e}: not JSON:\n{out}\n{stderr}"));
    Stopped {
        code: st.code(),
        json,
        stderr,
    }
}

/// Every machine of `machines` has exactly one record in `s`, each
/// `interrupted` (measurement-failed) naming `words`; the repository holds
/// the same records and the pointer did not move.
fn every_machine_interrupted(s: &Stopped, repo: &Repo, machines: &[&str], words: &str) {
    let Stopped { code, json, stderr } = s;
    assert_eq!(*code, Some(3), "{json}\n{stderr}");
    let records = json["records"].as_array().unwrap();
    let mut on: Vec<&str> = records
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    on.sort();
    assert_eq!(on, machines, "{json}\n{stderr}");
    for r in records {
        assert_eq!(r["verdict"], "measurement-failed", "{r}");
        assert_eq!(r["failure"], "interrupted", "{r}");
        assert_eq!(r["interrupted"], true, "{r}");
        assert!(r["notes"].to_string().contains(words), "{r}");
    }
    let kept: Vec<String> = repo
        .records()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    for r in records {
        assert!(
            kept.iter().any(|k| *k == r["id"]),
            "{r} not in attempts.jsonl"
        );
    }
    assert_eq!(kept.len(), records.len());
    assert_eq!(repo.verified(), None);
}

/// A Go test that marks that it started (`../<token>.started`, the tree's
/// root: the one place a sealed suite writes) and waits until
/// `$HOME/<token>.go` exists on its machine (at most 60 s).
fn waiting_test(pkg: &str, token: &str) -> (String, String) {
    (
        format!("{pkg}/{pkg}_test.go"),
        format!(
            "package {pkg}\n\nimport (\n\t\"os\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestWait(t *testing.T) {{\n\thome := os.Getenv(\"HOME\")\n\t_ = os.WriteFile(\"../{token}.started\", nil, 0o644)\n\tfor i := 0; i < 600; i++ {{\n\t\tif _, err := os.Stat(home + \"/{token}.go\"); err == nil {{\n\t\t\treturn\n\t\t}}\n\t\ttime.Sleep(100 * time.Millisecond)\n\t}}\n\tt.Fatal(\"never released\")\n}}\n"
        ),
    )
}

/// Item 4: an interrupted `--split` or `--machine @admitted` run records
/// every machine chosen for it. SIGINT while a split ships a heavy commit
/// (its packages being listed here meanwhile), SIGTERM while an
/// `@admitted` run ships it, and SIGINT once a one-package split's shard
/// runs on one machine while the other waits as a spare: exit 3, one
/// `interrupted` record per machine — in `--json` and in attempts.jsonl —
/// and the pointer stays. They used to exit 0 with `records: []` and
/// nothing appended (or only the machine that had pulled a batch).
#[test]
fn an_interrupted_split_or_admitted_run_records_every_machine() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, work) = lab_fleet(lab, &["m0", "m1"]);
    let shipping = |e: &str| e.lines().any(|l| l.contains(": ship ("));

    let repo = module(&as_str(&[sleeper(0, 10), sleeper(1, 10)]));
    heavy(&repo, "blob.bin", 64);
    let s = interrupt_when(
        &env,
        &repo,
        &["--machine", "m0,m1", "--split"],
        libc::SIGINT,
        shipping,
    );
    every_machine_interrupted(&s, &repo, &["m0", "m1"], "Ctrl-C");
    assert_eq!(
        s.json["split"]["verdict"], "measurement-failed",
        "{}",
        s.json
    );
    assert_eq!(s.json["split"]["failure"], "interrupted", "{}", s.json);

    let repo = module(&as_str(&[sleeper(0, 10)]));
    heavy(&repo, "blob.bin", 64);
    let s = interrupt_when(
        &env,
        &repo,
        &["--machine", "@admitted"],
        libc::SIGTERM,
        shipping,
    );
    every_machine_interrupted(&s, &repo, &["m0", "m1"], "SIGTERM");

    let token = format!("saphan-never-int-{}", std::process::id());
    let repo = module(&as_str(&[waiting_test("w", &token)]));
    let started = format!("{token}.started");
    let ran =
        |h: &str| common::in_scratch_tree(&work.path().join(h).join("saphan"), &started).is_some();
    let s = interrupt_when(
        &env,
        &repo,
        &["--machine", "m0,m1", "--split"],
        libc::SIGINT,
        |_| ran("m0") || ran("m1"),
    );
    every_machine_interrupted(&s, &repo, &["m0", "m1"], "Ctrl-C");
    let shards: Vec<&serde_json::Value> = s.json["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["shard"].is_null())
        .collect();
    assert_eq!(shards.len(), 1, "{}", s.json);
    assert_eq!(shards[0]["shard"]["packages"][0], format!("{MODULE}/w"));
}

/// Files under `dir` (recursively) whose name starts with `prefix`.
fn named_under(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with(prefix) {
            found.push(p.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(named_under(&p, prefix));
        }
    }
    found
}

/// Item 11: Ctrl-C while a heavy commit is being shipped to three machines
/// leaves nothing of the ship on any of them — no bundle in `incoming/`
/// and no `tmp_*` of a fetch in the mirror — whether it comes while a
/// bundle streams in or while a mirror's fetch indexes it. Each machine
/// records `interrupted`, the exit is 3.
#[test]
fn ctrl_c_during_a_ship_to_several_machines_leaves_nothing_of_it() {
    let Some(lab) = Lab::shared() else { return };
    let hosts = ["m0", "m1", "m3"];
    let (env, work) = common::fleet::home(lab, &hosts, "never");
    assert_code(
        &env.run(&["machine", "measure", "--machine", "m0,m1,m3"]),
        0,
    );
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let base = |h: &str| work.path().join(h).join("saphan");
    let left = |h: &str| {
        let mut l = named_under(&base(h).join("incoming"), "");
        l.extend(named_under(&base(h).join("mirrors"), "tmp_"));
        l
    };
    let repo = Repo::new(&[("README", "x\n")]);
    // Twice: when a bundle arrives on some machine, when some mirror's
    // fetch writes its pack.
    let moments: [(&str, &str); 2] = [("incoming", ""), ("mirrors", "tmp_pack_")];
    for (i, (dir, prefix)) in moments.into_iter().enumerate() {
        heavy(&repo, &format!("blob{i}.bin"), 96);
        let s = interrupt_when(
            &env,
            &repo,
            &["--machine", "m0,m1,m3"],
            libc::SIGINT,
            |_| {
                hosts.iter().any(|h| {
                    named_under(&base(h).join(dir), prefix)
                        .iter()
                        .any(|p| p.is_file())
                })
            },
        );
        assert_eq!(s.code, Some(3), "{}\n{}", s.json, s.stderr);
        for r in s.json["records"].as_array().unwrap() {
            assert_eq!(r["failure"], "interrupted", "{r}");
        }
        for h in hosts {
            assert!(left(h).is_empty(), "{dir}: {h} still holds {:?}", left(h));
        }
    }
}

/// Item 17: done is done. A one-package split over two machines: one runs
/// the shard, the other waits as a spare. Cut off the spare while it
/// waits, then let the shard finish: the invocation ends as soon as after
/// the same run with no machine cut off (within 2.5 s of it), green — it
/// does not wait on the dead spare's keep-alive, a reconnect and a
/// disconnect (about 8 s).
#[test]
fn a_spare_cut_off_while_idle_does_not_keep_a_finished_split_alive() {
    let Some(lab) = Lab::start(2) else { return };
    if common::skip_unless(
        Path::new("/usr/bin/go").exists() && saphan::exec::which("go").is_some(),
        "no /usr/bin/go for the lab hosts, or no go here to list packages with",
    ) {
        return;
    }
    let (env, work) = lab_fleet(&lab, &["m0", "m1"]);
    let run = |cut: bool, n: usize| -> std::time::Duration {
        let token = format!("saphan-never-done-{}-{n}", std::process::id());
        let repo = module(&as_str(&[waiting_test("w", &token)]));
        let started = format!("{token}.started");
        let ran = |h: &str| {
            common::in_scratch_tree(&work.path().join(h).join("saphan"), &started).is_some()
        };
        let mut c = env.cmd();
        gomod::go_env(&mut c);
        let child = c
            .args(["--json", "certify", "--repo", &repo.path_str()])
            .args(["--machine", "m0,m1", "--split"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert!(
            wait_until(std::time::Duration::from_secs(120), || ran("m0")
                || ran("m1")),
            "the shard never started"
        );
        let (busy, spare) = if ran("m0") {
            ("m0", "m1")
        } else {
            ("m1", "m0")
        };
        if cut {
            lab.partition(spare);
        }
        let t0 = std::time::Instant::now();
        std::fs::write(lab.home_dir(busy).join(format!("{token}.go")), "").unwrap();
        let o = child.wait_with_output().unwrap();
        let took = t0.elapsed();
        if cut {
            lab.heal(spare);
        }
        assert_code(&o, 0);
        let v = json(&o);
        assert_eq!(v["split"]["verdict"], "green", "{v}");
        took
    };
    let plain = run(false, 0);
    let cut = run(true, 1);
    assert!(
        cut <= plain + std::time::Duration::from_millis(2500),
        "with the spare cut off the split ended {cut:?} after its shard was released, {plain:?} without"
    );
}

/// The repository's lock file on `host` under the fleet's `work` dir (one
/// repository dispatched there so far).
fn machine_lock(work: &Path, host: &str) -> PathBuf {
    let locks: Vec<PathBuf> = std::fs::read_dir(work.join(host).join("saphan/locks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lock"))
        .collect();
    assert_eq!(locks.len(), 1, "{locks:?}");
    locks[0].clone()
}

/// `flock -o LOCK sleep 600` in a process group of its own, returned once
/// the lock is held (a second `flock -n` cannot take it); [`let_go`] ends
/// it (`-o`: only flock itself holds the lock, not its `sleep`).
fn hold_lock(lock: &Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(lock)
        .args(["sleep", "600"])
        .process_group(0)
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while std::process::Command::new("flock")
        .arg("-n")
        .arg(lock)
        .arg("true")
        .status()
        .unwrap()
        .success()
    {
        assert!(t0.elapsed().as_secs() < 30, "flock never took {lock:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    holder
}

/// End [`hold_lock`]'s holder and its `sleep` (its process group).
fn let_go(mut holder: std::process::Child) {
    // SAFETY: kill has no memory preconditions; the group is the holder's own.
    unsafe { libc::kill(-(holder.id() as i32), libc::SIGKILL) };
    let _ = holder.wait();
}

/// Item 8: two `--split` runs of one repository over the same machines
/// and a plain `--machine` dispatch, started together, while m1's
/// repository lock is held elsewhere: a split's session on m0 that has run
/// its shard and waits for its other shard lets go of m0's lock, so the
/// other split's m0 shard and the plain dispatch run there — the plain
/// dispatch ends green while m1 is still held (it used to wait behind an
/// idle session for the whole 60 s: lock-timeout, exit 3). Once m1 is free
/// both splits end green, no record anywhere is a lock-timeout.
#[test]
fn splits_sharing_machines_never_hold_a_lock_while_idle() {
    let Some(lab) = go_ready_lab() else { return };
    if common::skip_unless(common::have("flock"), "no flock") {
        return;
    }
    let (env, work) = lab_fleet(lab, &["m0", "m1"]);
    let repo = module(&[
        (
            "a/a_test.go",
            "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
        ),
        (
            "b/b_test.go",
            "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {}\n",
        ),
    ]);
    // The lock files exist (and the mirrors and caches are warm).
    assert_code(
        &common::fleet::certify(&env, &repo, "m0,m1", &["--split"]),
        0,
    );
    let mut holder = hold_lock(&machine_lock(work.path(), "m1"));
    let start = |machines: &str, extra: &[&str]| {
        let mut c = env.cmd();
        gomod::go_env(&mut c);
        c.args(["--json", "certify", "--repo", &repo.path_str()])
            .args(["--machine", machines])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = start("m0,m1", &["--split"]);
    let b = start("m0,m1", &["--split"]);
    let plain = start("m0", &[]);
    let plain = plain.wait_with_output().unwrap();
    // m1 is still held: the plain dispatch did not wait for it.
    let still_held = holder.try_wait().unwrap().is_none();
    let_go(holder);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(still_held);
    assert_code(&plain, 0);
    assert_code(&a, 0);
    assert_code(&b, 0);
    for o in [&plain, &a, &b] {
        let v = json(o);
        for r in v["records"].as_array().unwrap() {
            assert_eq!(r["verdict"], "green", "{r}");
        }
    }
    assert_eq!(repo.verified(), Some(repo.head()));
}

/// Item 10: `--machine @admitted` (no `--split`) over three machines of
/// which two cannot be reached: the whole suite runs once, on the one that
/// answered — never again there for the others — the two are left out of
/// the verdict by name with their failure, and the pointer line says which
/// machine certified the SHA and which were left out and why (it said
/// "green on every named machine", nothing having been named, after
/// re-running the suite twice on m0). An explicit list answers for itself:
/// exit 3, nothing re-run, the pointer stays.
#[test]
fn admitted_failover_adds_only_evidence_and_says_who_certified() {
    let Some(lab) = Lab::start(3) else { return };
    let (env, _work) = common::fleet::home(&lab, &["m0", "m1", "m2"], "never");
    assert_code(
        &env.run(&["machine", "measure", "--machine", "m0,m1,m2"]),
        0,
    );
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"exit 0\"]\nreport = \"exitcode\"\n");
    lab.stop("m1");
    lab.stop("m2");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = common::fleet::certify(&env, &repo, "@admitted", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(
        recs.len(),
        3,
        "one attempt per machine, nothing re-run: {v}"
    );
    assert!(recs.iter().all(|r| r["retry_of"].is_null()), "{v}");
    let on = |m: &str| recs.iter().find(|r| r["machine"] == m).unwrap();
    assert_eq!(on("m0")["verdict"], "green", "{v}");
    for m in ["m1", "m2"] {
        assert_eq!(on(m)["failure"], "host-unreachable", "{v}");
    }
    assert_eq!(v["certified_by"], serde_json::json!(["m0"]), "{v}");
    let left: Vec<(&str, &str)> = v["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["machine"].as_str().unwrap(),
                l["failure"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        left,
        [("m1", "host-unreachable"), ("m2", "host-unreachable")],
        "{v}"
    );
    assert_eq!(repo.verified(), Some(repo.head()));
    // What an operator reads.
    let c = repo.commit(&[("README", "y\n")], "y");
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--machine",
        "@admitted",
    ]);
    assert_code(&o, 0);
    let (out, err) = text(&o);
    assert!(
        out.contains(
            "(moved: certified by m0; left out: m1 (host-unreachable), m2 (host-unreachable))"
        ),
        "{out}\n{err}"
    );
    assert!(!out.contains("every named machine"), "{out}");
    assert_eq!(repo.verified(), Some(c));
    // An explicit list: every named machine answers for itself.
    repo.commit(&[("README", "z\n")], "z");
    let o = common::fleet::certify(&env, &repo, "m0,m1,m2", &[]);
    assert_code(&o, 3);
    let v = json(&o);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 3, "{v}");
    assert!(recs.iter().all(|r| r["retry_of"].is_null()), "{v}");
    assert_ne!(repo.verified(), Some(repo.head()));
}

/// Item 14: 3000 report files on a machine cost a constant few commands
/// there, not one (or more) per file: the commands the machine ran for a
/// certify of 3000 reports (counted by its shell's rc file, read once per
/// command) are at most a few more than for 3 — they were about 3000 more.
/// Every file is read (the count, the one failing test), and the checks
/// still hold among them: a report that is a symlink out of the tree is
/// `report-symlink-escape`.
#[test]
fn many_report_files_cost_a_machine_a_constant_few_commands() {
    let Some(lab) = Lab::start(1) else { return };
    let (env, _work) = common::fleet::home(&lab, &["m0"], "never");
    assert_code(&env.run(&["machine", "measure", "--machine", "m0"]), 0);
    let counter = lab.home_dir("m0").join("saphan-commands");
    let rc = lab.home_dir("m0").join(".bashrc");
    let mut text_rc = std::fs::read_to_string(&rc).unwrap_or_default();
    text_rc.push_str("echo . >> /root/saphan-commands\n");
    std::fs::write(&rc, text_rc).unwrap();
    let commands = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let suite = "#!/bin/sh\nmkdir -p reports\ni=0; while [ $i -lt \"$1\" ]; do\n  printf '<testsuite name=\"p%s\" tests=\"1\" failures=\"0\"><testcase classname=\"p\" name=\"ok%s\"/></testsuite>\\n' $i $i > reports/pass$i.xml\n  i=$((i+1))\ndone\nprintf '<testsuite name=\"f\" tests=\"1\" failures=\"1\"><testcase classname=\"f\" name=\"broken\"><failure message=\"no\">no</failure></testcase></testsuite>\\n' > reports/fail.xml\n[ -z \"$2\" ] || ln -s /etc/passwd reports/evil.xml\n";
    let repo = Repo::new(&[("suite.sh", suite)]);
    let run = |n: usize, evil: bool| {
        env.write_config(&format!(
            "[verify.full]\nargv = [\"sh\", \"suite.sh\", \"{n}\"{}]\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n",
            if evil { ", \"evil\"" } else { "" }
        ));
        let before = commands();
        let o = common::fleet::certify(&env, &repo, "m0", &[]);
        (json(&o), commands() - before)
    };
    let (few, few_cmds) = run(3, false);
    assert_eq!(few["records"][0]["verdict"], "red", "{few}");
    let (many, many_cmds) = run(3000, false);
    let r = &many["records"][0];
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(r["count"], 3001, "{r}");
    let named = r["named_tests"].as_array().unwrap();
    assert!(
        named.len() == 1 && named[0].as_str().unwrap().contains("broken"),
        "{r}"
    );
    assert!(
        many_cmds <= few_cmds + 3,
        "3000 reports cost {many_cmds} commands on the machine, 3 cost {few_cmds}"
    );
    let (evil, _) = run(3000, true);
    let r = &evil["records"][0];
    assert_eq!(r["failure"], "report-symlink-escape", "{r}");
}

/// [`wrapped_go`] at one path on each of `hosts` (each host's own `/root`):
/// their directories here and the path on the machines.
fn wrapped_go_on(lab: &Lab, hosts: &[&str], version: &str) -> (Vec<PathBuf>, String) {
    let (first, path) = wrapped_go(lab, hosts[0], version);
    let name = first.file_name().unwrap().to_owned();
    let mut dirs = vec![first.clone()];
    for h in &hosts[1..] {
        let dir = lab.home_dir(h).join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["go", "version"] {
            std::fs::copy(first.join(f), dir.join(f)).unwrap();
        }
        dirs.push(dir);
    }
    (dirs, path)
}

/// Item 9: a program gone from where a fresh `present` row vouched for it
/// (its directory deleted on m0) is `program-vanished` — an
/// infrastructure failure, not a crash of the suite — whose note gives the
/// probe line; the row is superseded in the ledger (an `absent` row,
/// reason `program-vanished`), so the next `@admitted` run leaves m0 out
/// and `--machine m0` is refused with the probe line, until a probe says
/// `present` again. Sealed and with `--seal off` alike.
#[test]
fn a_program_gone_from_where_its_row_vouched_is_its_own_failure() {
    let Some(lab) = go_ready_lab() else { return };
    let (dirs, path) = wrapped_go_on(lab, &["m0", "m1"], "go version go1.19.8 linux/amd64");
    let (env, _work) = lab_fleet_at(lab, &["m0", "m1"], &path);
    let repo = module(&[(
        "a/a_test.go",
        "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
    )]);
    let probe = format!("machine probe --machine m0 --capability go --declared-path {path}");
    let backup = dirs[0].with_extension("kept");
    for seal in ["auto", "off"] {
        std::fs::rename(&dirs[0], &backup).unwrap();
        let o = common::fleet::certify(&env, &repo, "@admitted", &["--seal", seal]);
        let v = json(&o);
        let records = v["records"].as_array().unwrap();
        let m0 = records
            .iter()
            .find(|r| r["machine"] == "m0")
            .unwrap_or_else(|| panic!("no record for m0: {v}"));
        assert_eq!(m0["verdict"], "measurement-failed", "{m0}");
        assert_eq!(m0["failure"], "program-vanished", "{seal}: {m0}");
        assert!(m0["notes"].to_string().contains(&probe), "{m0}");
        assert!(m0["program_version"].is_null(), "{m0}");
        let m1 = records.iter().find(|r| r["machine"] == "m1").unwrap();
        assert_eq!(m1["verdict"], "green", "{m1}");
        // The row is superseded: the next @admitted run leaves m0 out …
        let o = common::fleet::certify(&env, &repo, "@admitted", &["--seal", seal]);
        let v = json(&o);
        let machines: Vec<&str> = v["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["machine"].as_str().unwrap())
            .collect();
        assert_eq!(machines, ["m1"], "{v}");
        // … and naming it is refused with the probe line.
        let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0"]);
        let (out, err) = text(&o);
        assert_code(&o, 2);
        assert!(err.contains("program-vanished"), "{out}\n{err}");
        assert!(err.contains(&probe), "{err}");
        // Back where it was and probed again: admitted again.
        std::fs::rename(&backup, &dirs[0]).unwrap();
        assert_code(&common::fleet::probe(&env, "m0", "go", &path, "/tmp"), 0);
        assert_code(&common::fleet::certify(&env, &repo, "m0", &[]), 0);
    }
    for d in dirs {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// Item 2, split: a package with test files at the SHA (the listing's,
/// `go list` in the machines' environment without their own settings)
/// that ends `skip` — "no test files" — on a machine, because that
/// machine's own `go env -w GOFLAGS=-tags=…` drops them, is not covered:
/// `shard-coverage-incomplete`, naming it, never green; the pointer stays.
/// Unsplit (`--machine`), each machine's record is `tests-never-ran`,
/// naming it. Without the machines' tag the same split is green.
#[test]
fn test_files_a_machine_did_not_build_are_not_covered() {
    let Some(_) = go_ready_lab() else { return };
    let Some(lab) = Lab::start(2) else { return };
    let (env, _work) = lab_fleet(&lab, &["m0", "m1"]);
    let files: [(&str, &str); 3] = [
        (
            "a/a_test.go",
            "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
        ),
        (
            "b/b.go",
            "package b\n\n// V is one.\nfunc V() int { return 1 }\n",
        ),
        (
            "b/b_test.go",
            "//go:build !saphanskip\n\npackage b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {\n\tif V() != 1 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
        ),
    ];
    let green = module(&files);
    let o = common::fleet::certify(&env, &green, "m0,m1", &["--split"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["split"]["count"], 2);
    for h in ["m0", "m1"] {
        let dir = lab.home_dir(h).join(".config/go");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("env"), "GOFLAGS=-tags=saphanskip\n").unwrap();
    }
    let repo = module(&files);
    let o = common::fleet::certify(&env, &repo, "m0,m1", &["--split"]);
    let v = json(&o);
    let s = &v["split"];
    assert_code(&o, 3);
    assert_eq!(s["verdict"], "measurement-failed", "{v}");
    assert_eq!(s["failure"], "shard-coverage-incomplete", "{v}");
    assert_eq!(s["coverage"]["complete"], false, "{v}");
    assert_eq!(
        s["coverage"]["untested"],
        serde_json::json!([format!("{MODULE}/b")]),
        "{v}"
    );
    assert!(
        s["notes"].to_string().contains(&format!("{MODULE}/b")),
        "{v}"
    );
    assert_eq!(repo.verified(), None);
    // Unsplit, on one machine and on both: a named failure, never green.
    for machines in ["m1", "m0,m1"] {
        let o = common::fleet::certify(&env, &repo, machines, &[]);
        let v = json(&o);
        assert_code(&o, 3);
        for r in v["records"].as_array().unwrap() {
            assert_eq!(r["verdict"], "measurement-failed", "{r}");
            assert_eq!(r["failure"], "tests-never-ran", "{r}");
            assert!(
                r["notes"].to_string().contains(&format!("{MODULE}/b")),
                "{r}"
            );
        }
    }
    assert_eq!(repo.verified(), None);
}

/// Item 13: one tree, one failure name. A suite that leaves its report
/// directory a symlink out of the tree, a huge sparse report, or a report
/// whose name is not UTF-8 gets the same failure word certified here and
/// on a lab machine: `report-symlink-escape`, `report-unreadable` (larger
/// than saphan reads), `report-unreadable` (a name no record can carry).
#[test]
fn one_tree_gets_one_failure_name_wherever_it_runs() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0"]);
    let repo = Repo::new(&[(
        "run.sh",
        "#!/bin/sh\nmkdir -p reports\ncase \"$1\" in\nescape) rm -rf reports && ln -s /usr/share reports ;;\nhuge) truncate -s 300M reports/big.xml ;;\nname) printf '<testsuite tests=\"1\"/>' > \"reports/r$(printf '\\377').xml\" ;;\nesac\n",
    )]);
    for (case, word) in [
        ("escape", "report-symlink-escape"),
        ("huge", "report-unreadable"),
        ("name", "report-unreadable"),
    ] {
        env.write_config(&format!(
            "[verify.full]\nargv = [\"sh\", \"run.sh\", \"{case}\"]\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n"
        ));
        let here = env.run(&["--json", "certify", "--repo", &repo.path_str()]);
        let there = common::fleet::certify(&env, &repo, "m0", &[]);
        let failure = |o: &std::process::Output| {
            assert_code(o, 3);
            let v = json(o);
            let r = if v["records"].is_array() {
                v["records"][0].clone()
            } else {
                v
            };
            (r["failure"].as_str().unwrap_or_default().to_string(), r)
        };
        let (h, hr) = failure(&here);
        let (t, tr) = failure(&there);
        assert_eq!(h, word, "{case} here: {hr}");
        assert_eq!(t, word, "{case} on m0: {tr}");
    }
}

/// Item 3: a junit-xml `--split` whose suite ignores `SAPHAN_SHARD_INDEX`
/// and `SAPHAN_SHARD_COUNT` — every shard runs the same three tests — says
/// so and counts each test once (3, not 6); a suite that runs only its
/// shard's share sums as before (3), and one whose shards overlap on one
/// test counts it once (4, not 5).
#[test]
fn shards_that_ignored_their_shard_count_each_test_once() {
    let Some(lab) = go_ready_lab() else { return };
    let (env, _work) = lab_fleet(lab, &["m0", "m1"]);
    let repo = Repo::new(&[(
        "run.sh",
        "#!/bin/sh\n# $1: all (ignore the shard), own (shard 0: a b, shard 1: c), overlap (0: a b c, 1: c d)\nmkdir -p reports\ncase \"$1/$SAPHAN_SHARD_INDEX\" in\nall/*) cases='a b c' ;;\nown/0) cases='a b' ;;\nown/1) cases='c' ;;\noverlap/0) cases='a b c' ;;\noverlap/1) cases='c d' ;;\nesac\nn=0; body=''\nfor c in $cases; do n=$((n+1)); body=\"$body<testcase classname='s' name='$c'/>\"; done\nprintf '<testsuite name=\"s\" tests=\"%s\">%s</testsuite>\\n' \"$n\" \"$body\" > reports/junit.xml\n",
    )]);
    for (case, count, repeated) in [("all", 3, true), ("own", 3, false), ("overlap", 4, true)] {
        env.write_config(&format!(
            "[verify.full]\nargv = [\"sh\", \"run.sh\", \"{case}\"]\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n"
        ));
        let o = common::fleet::certify(&env, &repo, "m0,m1", &["--split"]);
        assert_code(&o, 0);
        let v = json(&o);
        let s = &v["split"];
        assert_eq!(s["count"], count, "{case}: {v}");
        let notes = s["notes"].to_string();
        assert_eq!(notes.contains("shards-repeated"), repeated, "{case}: {v}");
        if case == "all" {
            assert!(notes.contains("ignored its shard variables"), "{v}");
        }
    }
}
