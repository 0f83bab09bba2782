//! The one attempt pipeline (issue 18): every certification concludes the
//! same way — every record appended first, then the verified pointer moved
//! under the repository's lock with a compare-and-swap, only forward along
//! the trunk — whether it ran here or on fleet machines. Real binary, real
//! repositories, the lab's real sshd hosts (which share this machine's
//! filesystem, so a workhome and a marker file are visible from here).

use crate::common;

use crate::common::{Env, Repo, assert_code, json, lab::Lab, text};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static N: AtomicUsize = AtomicUsize::new(0);

/// A saphan home with ssh machine rows `hosts` of `lab`, each with its own
/// workhome, measured, and an `sh` suite (`sh <script>`, exitcode) declared.
struct Fleet {
    env: Env,
    _work: tempfile::TempDir,
}

impl Fleet {
    fn new(lab: &Lab, hosts: &[&str], script: &str) -> Fleet {
        let env = Env::new();
        lab.install_ssh_config(env.home());
        let work = scratch_dir("saphan-pipeline-");
        let mut s = String::new();
        for h in hosts {
            s += &format!(
                "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
                work.path().join(h).display()
            );
        }
        std::fs::create_dir_all(env.home().join("fleet")).unwrap();
        std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
        assert_code(
            &env.run(&["machine", "measure", "--machine", &hosts.join(",")]),
            0,
        );
        env.write_config(&sh_suite(script));
        Fleet { env, _work: work }
    }
}

fn scratch_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!(
            "{prefix}{}-{}-",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ))
        .tempdir()
        .unwrap()
}

fn sh_suite(script: &str) -> String {
    format!("[verify.full]\nargv = [\"sh\", \"{script}\"]\nreport = \"exitcode\"\n")
}

/// A repository on `main` whose `ok.sh` passes and whose `wait.sh` marks
/// `<gate>.started` and waits for `<gate>.go` (a relative `gate`: in the
/// suite's own tree, the one place a sealed suite writes).
fn repo_with_gate(gate: &Path) -> Repo {
    Repo::new(&[
        ("ok.sh", "#!/bin/sh\necho ok\n"),
        (
            "wait.sh",
            &format!(
                "#!/bin/sh\ntouch '{0}.started'\nwhile [ ! -e '{0}.go' ]; do sleep 0.1; done\necho done\n",
                gate.display()
            ),
        ),
    ])
}

fn certify_args<'a>(repo: &'a str, sha: &'a str, machine: Option<&'a str>) -> Vec<&'a str> {
    let mut a = vec!["--json", "certify", "--repo", repo, "--sha", sha];
    if let Some(m) = machine {
        a.extend(["--machine", m]);
    }
    a
}

fn spawn(env: &Env, args: &[&str]) -> Child {
    env.cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait (bounded) until `cond` holds; false when it never did.
fn wait_until(bound: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < bound {
        if cond() {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    false
}

fn state_dir(repo: &Repo) -> PathBuf {
    repo.path().join(".git/saphan")
}

/// The repository lock, taken by this test process (`flock`, the same
/// lock saphan takes), held until dropped.
fn hold_repo_lock(repo: &Repo) -> std::fs::File {
    std::fs::create_dir_all(state_dir(repo)).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir(repo).join("lock"))
        .unwrap();
    f.lock().unwrap();
    f
}

/// Records of `sha` (any machine) in the repository's attempts.
fn records_of(repo: &Repo, sha: &str) -> Vec<serde_json::Value> {
    repo.records()
        .into_iter()
        .filter(|r| r["sha"] == sha)
        .collect()
}

fn finished(c: Child) -> Output {
    c.wait_with_output().unwrap()
}

/// `attempts.jsonl` replaced by a directory: the append fails (root's
/// permission bits would not stop it).
fn break_attempts(repo: &Repo) {
    std::fs::create_dir_all(state_dir(repo).join("attempts.jsonl")).unwrap();
}

#[test]
fn local_pointer_never_moves_when_the_record_cannot_be_appended() {
    let env = Env::new();
    env.write_config(&sh_suite("ok.sh"));
    let repo = repo_with_gate(Path::new("/nonexistent"));
    break_attempts(&repo);
    let o = env.run(&certify_args(&repo.path_str(), "HEAD", None));
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains("attempts.jsonl"), "{err}");
    assert_eq!(repo.verified(), None, "a pointer without its record");
}

#[test]
fn dispatch_pointer_never_moves_when_the_record_cannot_be_appended() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m0"], "ok.sh");
    let repo = repo_with_gate(Path::new("/nonexistent"));
    break_attempts(&repo);
    let o = f
        .env
        .run(&certify_args(&repo.path_str(), "HEAD", Some("m0")));
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains("attempts.jsonl"), "{err}");
    // Regression: dispatch moved the pointer first, then failed to append.
    assert_eq!(repo.verified(), None, "a pointer without its record");
}

/// A dispatch moves the pointer only under the repository's lock: while a
/// local certification of a newer SHA holds it (for its whole run), the
/// dispatch's green record is appended but the pointer stays; when both are
/// done it stands on the newer green SHA, which has a green record.
#[test]
fn dispatch_and_local_certify_at_once_leave_the_pointer_at_the_newer_green() {
    let Some(lab) = Lab::shared() else { return };
    let repo = repo_with_gate(Path::new("gate"));
    let older = repo.head();
    let newer = repo.commit(&[("b.txt", "b\n")], "newer");

    let here = Env::new();
    here.write_config(&sh_suite("wait.sh"));
    let local = spawn(&here, &certify_args(&repo.path_str(), &newer, None));
    let mut started = None;
    assert!(
        wait_until(Duration::from_secs(60), || {
            started = common::in_scratch_tree(here.home(), "gate.started");
            started.is_some()
        }),
        "the local suite never started"
    );
    let tree = started.unwrap().parent().unwrap().to_path_buf();

    let f = Fleet::new(lab, &["m0"], "ok.sh");
    let fleet = spawn(&f.env, &certify_args(&repo.path_str(), &older, Some("m0")));
    assert!(
        wait_until(Duration::from_secs(120), || !records_of(&repo, &older)
            .is_empty()),
        "the dispatch never appended its record"
    );
    // Regression: dispatch took no lock and moved the pointer at once.
    assert_eq!(
        repo.verified(),
        None,
        "the pointer moved while a certification held the repository lock"
    );

    std::fs::write(tree.join("gate.go"), "").unwrap();
    let lo = finished(local);
    let fo = finished(fleet);
    assert_code(&lo, 0);
    assert_code(&fo, 0);
    assert_eq!(json(&lo)["verified_pointer"], "moved", "{}", text(&lo).0);
    assert_eq!(repo.verified().as_deref(), Some(newer.as_str()));
    let greens: Vec<_> = records_of(&repo, &newer)
        .into_iter()
        .filter(|r| r["verdict"] == "green")
        .collect();
    assert_eq!(greens.len(), 1, "{:?}", repo.records());
    assert_eq!(records_of(&repo, &older)[0]["verdict"], "green");
}

/// Two dispatches of different trunk SHAs at once: both append their
/// record, neither moves the pointer while the repository lock is held
/// elsewhere, and afterwards the pointer is at the newer green SHA.
#[test]
fn two_dispatches_at_once_leave_the_pointer_at_the_newer_green() {
    let Some(lab) = Lab::shared() else { return };
    let repo = repo_with_gate(Path::new("/nonexistent"));
    let older = repo.head();
    let newer = repo.commit(&[("b.txt", "b\n")], "newer");
    let f0 = Fleet::new(lab, &["m0"], "ok.sh");
    let f1 = Fleet::new(lab, &["m1"], "ok.sh");

    let held = hold_repo_lock(&repo);
    let a = spawn(&f0.env, &certify_args(&repo.path_str(), &newer, Some("m0")));
    let b = spawn(&f1.env, &certify_args(&repo.path_str(), &older, Some("m1")));
    assert!(
        wait_until(Duration::from_secs(120), || {
            !records_of(&repo, &older).is_empty() && !records_of(&repo, &newer).is_empty()
        }),
        "the dispatches never appended their records: {:?}",
        repo.records()
    );
    // Regression: neither took the lock; each moved the pointer at once.
    assert_eq!(
        repo.verified(),
        None,
        "the pointer moved while the repository lock was held"
    );
    drop(held);
    let ao = finished(a);
    let bo = finished(b);
    assert_code(&ao, 0);
    assert_code(&bo, 0);
    assert_eq!(repo.verified().as_deref(), Some(newer.as_str()));
    assert_eq!(records_of(&repo, &newer)[0]["verdict"], "green");
    assert_eq!(records_of(&repo, &older)[0]["verdict"], "green");
    common::assert_only_main_worktree(&repo);
}

/// machines.toml with a `transport = "local"` row `here` (its workhome under
/// `work`) and ssh rows `ssh_hosts`; every row measured.
fn fleet_with_here(lab: Option<&Lab>, ssh_hosts: &[&str], work: &Path) -> Env {
    let env = Env::new();
    if let Some(lab) = lab {
        lab.install_ssh_config(env.home());
    }
    let mut s = format!(
        "[machine.here]\ntransport = \"local\"\nworkhome = \"{}\"\n\n",
        work.join("here").display()
    );
    for h in ssh_hosts {
        s += &format!(
            "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
            work.join(h).display()
        );
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
    let mut ids = vec!["here"];
    ids.extend_from_slice(ssh_hosts);
    assert_code(
        &env.run(&["machine", "measure", "--machine", &ids.join(",")]),
        0,
    );
    env
}

/// Nothing left under a workhome but the mirror, locks and empty
/// directories.
fn assert_workhome_clean(workhome: &Path) {
    for d in ["scratch", "runs", "incoming"] {
        let p = workhome.join("saphan").join(d);
        if p.exists() {
            let left: Vec<_> = std::fs::read_dir(&p).unwrap().flatten().collect();
            assert!(left.is_empty(), "{} still holds {left:?}", p.display());
        }
    }
}

/// Regression: with a `transport = "local"` row, `certify --machine here`
/// failed every time as `materialize-failed: …/mirrors/<key>.git is a bare
/// repository` (the local checkout looked for submodule stores by opening
/// the mirror as a working repository).
#[test]
fn a_local_row_is_a_fleet_machine_like_any_other() {
    let work = scratch_dir("saphan-here-");
    let env = fleet_with_here(None, &[], work.path());
    env.write_config(&sh_suite("ok.sh"));
    let repo = repo_with_gate(Path::new("/nonexistent"));
    let o = env.run(&certify_args(&repo.path_str(), "HEAD", Some("here")));
    assert_code(&o, 0);
    let v = json(&o);
    let r = &v["records"][0];
    assert_eq!(r["machine"], "here", "{v}");
    assert_eq!(r["verdict"], "green", "{v}");
    assert_eq!(r["class"], "host", "{v}");
    assert!(r["bundle_bytes"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(v["verified_pointer"], "moved", "{v}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    assert_eq!(repo.records().len(), 1);
    assert_workhome_clean(&work.path().join("here"));
    common::assert_only_main_worktree(&repo);
}

/// This machine (through its row) and a lab host in one invocation: both
/// run, one record each, and the pointer moves because both are green.
#[test]
fn a_local_row_and_an_ssh_machine_run_in_one_invocation() {
    let Some(lab) = Lab::shared() else { return };
    let work = scratch_dir("saphan-here-");
    let env = fleet_with_here(Some(lab), &["m0"], work.path());
    env.write_config(&sh_suite("ok.sh"));
    let repo = repo_with_gate(Path::new("/nonexistent"));
    let o = env.run(&certify_args(&repo.path_str(), "HEAD", Some("here,m0")));
    assert_code(&o, 0);
    let v = json(&o);
    let machines: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["here", "m0"], "{v}");
    for r in v["records"].as_array().unwrap() {
        assert_eq!(r["verdict"], "green", "{r}");
        assert_eq!(r["dispatch_machines"], serde_json::json!(["here", "m0"]));
    }
    assert_eq!(v["verified_pointer"], "moved", "{v}");
    assert_eq!(repo.records().len(), 2);
    assert_workhome_clean(&work.path().join("here"));
    assert_workhome_clean(&work.path().join("m0"));
    common::assert_only_main_worktree(&repo);
}

/// What a person reads of a dispatched certify (no `--json`, no terminal):
/// one plain progress line per step of each machine on stderr — the typed
/// progress events rendered by the CLI in the words they always had — and
/// the summary on stdout.
#[test]
fn a_dispatched_certify_prints_progress_lines_and_the_summary() {
    let work = scratch_dir("saphan-here-");
    let env = fleet_with_here(None, &[], work.path());
    env.write_config(&sh_suite("ok.sh"));
    let repo = repo_with_gate(Path::new("/nonexistent"));
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "here"]);
    assert_code(&o, 0);
    let (out, err) = text(&o);
    for step in [
        "connect (",
        "ship (",
        "shipped ",
        "run (",
        "collect (",
        "done: green (",
    ] {
        assert!(
            err.lines().any(|l| l.starts_with(&format!("here: {step}"))),
            "no `here: {step}` line in:\n{err}"
        );
    }
    // The bundle's size in the unit that fits it (`shipped 436 B`).
    assert!(
        err.lines().any(
            |l| l.starts_with("here: shipped ") && (l.contains(" B (") || l.contains(" KiB ("))
        ),
        "{err}"
    );
    assert!(
        out.contains(&format!(
            "verified: refs/saphan/verified -> {} (moved: certified by here — green on every named machine)",
            repo.head()
        )),
        "{out}"
    );
    assert!(out.contains("shipped: "), "{out}");
}

/// `saphan … args` with stdout piped and stderr to a file this test reads
/// while it runs (a process without a terminal, as in CI).
fn spawn_logged(env: &Env, args: &[&str], stderr: &Path) -> Child {
    env.cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap()
}

/// The lines of `file` that contain `needle`.
fn lines_with(file: &Path, needle: &str) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// This machine's host name, as a holder writes it.
fn this_host() -> String {
    saphan::record::wait::this_host()
}

/// Issue 40 item 7: a certify waiting for the repository lock printed
/// nothing. Without a terminal it says at once, on stderr, what it waits
/// for — the holder's verb and pid, since when — and says it again every
/// 10 s until it has the lock; then it certifies as before.
#[test]
fn a_certify_waiting_for_the_repository_lock_says_who_holds_it() {
    let repo = repo_with_gate(Path::new("gate"));
    let first = Env::new();
    first.write_config(&sh_suite("wait.sh"));
    let holder = spawn(&first, &certify_args(&repo.path_str(), "HEAD", None));
    let mut started = None;
    assert!(
        wait_until(Duration::from_secs(60), || {
            started = common::in_scratch_tree(first.home(), "gate.started");
            started.is_some()
        }),
        "the first suite never started"
    );
    let tree = started.unwrap().parent().unwrap().to_path_buf();

    let second = Env::new();
    second.write_config(&sh_suite("ok.sh"));
    let log = second.home().join("stderr");
    let waiter = spawn_logged(&second, &["certify", "--repo", &repo.path_str()], &log);
    let lock = state_dir(&repo).join("lock");
    let said = format!(
        "local: waiting for the repository lock {} — held by certify (pid {} on {}) since ",
        lock.display(),
        holder.id(),
        this_host()
    );
    assert!(
        wait_until(Duration::from_secs(30), || !lines_with(&log, &said)
            .is_empty()),
        "never said: {said}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        lines_with(&log, &said)[0].ends_with("; waited 0s"),
        "{:?}",
        lines_with(&log, &said)
    );
    // …and again while it waits.
    assert!(
        wait_until(Duration::from_secs(30), || lines_with(&log, &said).len()
            >= 2),
        "said only once:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        lines_with(&log, &said)[1].contains("; waited 1"),
        "{:?}",
        lines_with(&log, &said)
    );
    std::fs::write(tree.join("gate.go"), "").unwrap();
    assert_code(&finished(holder), 0);
    let o = finished(waiter);
    assert_code(&o, 0);
    assert!(text(&o).0.contains(": green"), "{}", text(&o).0);
}

/// Issue 40 item 7, on a fleet machine: a certify waiting for the
/// repository's lock on the machine (another run holds it there) says at
/// once, and again every 10 s, whose it is and since when; then runs.
#[test]
fn a_certify_waiting_for_a_machines_lock_says_who_holds_it() {
    let Some(lab) = Lab::shared() else { return };
    let gate = Path::new("gate");
    let repo = repo_with_gate(gate);
    let f = Fleet::new(lab, &["m0"], "wait.sh");
    let holder = spawn(&f.env, &certify_args(&repo.path_str(), "HEAD", Some("m0")));
    let base = f._work.path().join("m0/saphan");
    let mut started = None;
    assert!(
        wait_until(Duration::from_secs(60), || {
            started = common::in_scratch_tree(&base, "gate.started");
            started.is_some()
        }),
        "the first suite never started on m0"
    );
    let tree = started.unwrap().parent().unwrap().to_path_buf();

    // A second home whose m0 row shares the first one's workhome.
    let second = Env::new();
    lab.install_ssh_config(second.home());
    std::fs::create_dir_all(second.home().join("fleet")).unwrap();
    std::fs::write(
        second.home().join("fleet/machines.toml"),
        format!(
            "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"{}\"\n",
            f._work.path().join("m0").display()
        ),
    )
    .unwrap();
    assert_code(&second.run(&["machine", "measure", "--machine", "m0"]), 0);
    second.write_config(&sh_suite("ok.sh"));
    let log = second.home().join("stderr");
    let waiter = spawn_logged(
        &second,
        &["certify", "--repo", &repo.path_str(), "--machine", "m0"],
        &log,
    );
    let said = format!(
        "m0: waiting for the repository's lock on m0 ({}/locks/",
        f._work.path().join("m0/saphan").display()
    );
    let holder_words = format!(
        "— held by certify (pid {} on {}) since ",
        holder.id(),
        this_host()
    );
    let saying = || {
        lines_with(&log, &said)
            .into_iter()
            .filter(|l| l.contains(&holder_words))
            .collect::<Vec<_>>()
    };
    assert!(
        wait_until(Duration::from_secs(30), || !saying().is_empty()),
        "never said: {said} … {holder_words}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        wait_until(Duration::from_secs(30), || saying().len() >= 2),
        "said only once:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    std::fs::write(tree.join("gate.go"), "").unwrap();
    assert_code(&finished(holder), 0);
    let o = finished(waiter);
    assert_code(&o, 0);
}
