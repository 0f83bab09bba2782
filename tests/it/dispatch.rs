//! `certify --machine`: dispatch to the lab's real sshd hosts with real git
//! and real Go. Admission rows come from the real `machine measure` and
//! `machine probe` verbs. Lab hosts share this machine's filesystem (except
//! each host's own `/root`), so a remote workhome is also visible here: the
//! tests look at it directly to prove what was (not) left behind.

use crate::common;

use crate::common::gomod;
use crate::common::{Env, Repo, assert_code, assert_refused, json, lab::Lab, text};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A saphan home wired to a lab, with machine rows whose workhomes are
/// unique to this fleet.
struct Fleet {
    env: Env,
    work: tempfile::TempDir,
}

impl Fleet {
    fn new(lab: &Lab, hosts: &[&str]) -> Fleet {
        let (env, work) = crate::common::fleet::home(lab, hosts, "dispatch");
        Fleet { env, work }
    }
    fn workhome(&self, host: &str) -> PathBuf {
        self.work.path().join(host)
    }
    fn measure(&self, hosts: &str) {
        assert_code(
            &self.env.run(&["machine", "measure", "--machine", hosts]),
            0,
        );
    }
    fn probe(&self, hosts: &str, cap: &str, path: &str) -> std::process::Output {
        crate::common::fleet::probe(&self.env, hosts, cap, path, "/tmp")
    }
    fn certify(&self, repo: &Repo, machines: &str, extra: &[&str]) -> std::process::Output {
        crate::common::fleet::certify(&self.env, repo, machines, extra)
    }
    /// Nothing left under the machine's workhome but the mirror, locks and
    /// empty directories.
    fn assert_clean(&self, host: &str) {
        let base = self.workhome(host).join("saphan");
        for d in ["scratch", "runs", "incoming"] {
            let p = base.join(d);
            if p.exists() {
                let left: Vec<_> = std::fs::read_dir(&p).unwrap().flatten().collect();
                assert!(left.is_empty(), "{} still holds {left:?}", p.display());
            }
        }
    }
}

fn go_repo(test_body: &str) -> Repo {
    let (m, mod_text) = gomod::go_mod();
    Repo::new(&[
        (m, &mod_text),
        ("a/a.go", "package a\n\nfunc V() int { return 1 }\n"),
        (
            "a/a_test.go",
            &format!("package a\n\nimport \"testing\"\n\n{test_body}\n"),
        ),
    ])
}

const PASSING: &str = "func TestOne(t *testing.T) {\n\tif V() != 1 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc TestTwo(t *testing.T) {}\n";

fn record_on<'a>(v: &'a Value, machine: &str) -> &'a Value {
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["machine"] == machine)
        .unwrap_or_else(|| panic!("no record for {machine}: {v}"))
}

fn go_ready_lab() -> Option<&'static Lab> {
    if common::skip_unless(
        Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go for the lab hosts",
    ) {
        return None;
    }
    Lab::shared()
}

#[test]
fn default_go_green_on_one_machine_records_the_machine_and_its_go() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0"]);
    f.measure("m0");
    assert_code(&f.probe("m0", "go", "/usr/bin/go"), 0);
    let repo = go_repo(PASSING);
    let o = f.certify(&repo, "m0", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m0");
    assert_eq!(r["verdict"], "green", "{r}");
    assert_eq!(r["count"], 2, "{r}");
    assert_eq!(r["suite_source"], "default-go");
    assert_eq!(r["suite_argv"][0], "/usr/bin/go", "{r}");
    assert_eq!(r["machine_program"]["path"], "/usr/bin/go");
    assert_eq!(r["program_path"], "/usr/bin/go", "{r}");
    assert!(
        r["machine_program"]["version"]
            .as_str()
            .unwrap()
            .starts_with("go version go1."),
        "{r}"
    );
    assert!(r["bundle_bytes"].as_u64().unwrap() > 0, "{r}");
    for p in ["connect", "ship", "materialize", "run", "collect"] {
        assert!(r["phases"][p].is_number(), "phase {p}: {r}");
    }
    assert_eq!(v["verified_pointer"], "moved", "{v}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    let recs = repo.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["machine"], "m0");
    f.assert_clean("m0");
    common::assert_only_main_worktree(&repo);

    // The next commit ships only what the mirror lacks.
    let first = r["bundle_bytes"].as_u64().unwrap();
    repo.commit(&[("a/b.txt", "next\n")], "next");
    let o = f.certify(&repo, "m0", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let second = record_on(&v, "m0")["bundle_bytes"].as_u64().unwrap();
    assert!(
        second > 0 && second < first,
        "second bundle {second} bytes, first {first}"
    );
    // The same commit again ships nothing.
    let o = f.certify(&repo, "m0", &[]);
    assert_code(&o, 0);
    assert_eq!(record_on(&json(&o), "m0")["bundle_bytes"], 0);
}

/// Two dispatches that meet a repository's mirror for the first time at once
/// both create it (regression: `git init --bare` raced and one failed as
/// `ship-failed … File exists`). Lab hosts share this machine's filesystem,
/// so two machine rows with one workhome are two runs on one machine.
#[test]
fn first_dispatches_of_a_repository_at_once_share_one_new_mirror() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1"]);
    let shared = f.workhome("shared");
    std::fs::write(
        f.env.home().join("fleet/machines.toml"),
        format!(
            "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"{0}\"\n\n[machine.m1]\ntransport = \"ssh\"\nworkhome = \"{0}\"\n",
            shared.display()
        ),
    )
    .unwrap();
    f.measure("m0,m1");
    assert_code(&f.probe("m0", "go", "/usr/bin/go"), 0);
    assert_code(&f.probe("m1", "go", "/usr/bin/go"), 0);
    for _ in 0..4 {
        let repo = go_repo(PASSING);
        let o = f.certify(&repo, "m0,m1", &[]);
        let v = json(&o);
        for m in ["m0", "m1"] {
            assert_eq!(record_on(&v, m)["verdict"], "green", "{v}");
        }
        assert_code(&o, 0);
    }
}

#[test]
fn red_names_the_failing_test_and_keeps_the_pointer() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.measure("m1");
    assert_code(&f.probe("m1", "go", "/usr/bin/go"), 0);
    let repo = go_repo(
        "func TestGood(t *testing.T) {}\n\nfunc TestBroken(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n",
    );
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 1);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(
        r["named_tests"],
        serde_json::json!(["example.com/m/a.TestBroken"]),
        "{r}"
    );
    assert_eq!(r["count"], 2);
    assert_eq!(repo.verified(), None);
    f.assert_clean("m1");

    // A tree a lost connection left behind is reaped by the next dispatch.
    let tree = PathBuf::from(r["remote_tree"].as_str().unwrap());
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("left-behind"), "x").unwrap();
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 1);
    let v = json(&o);
    let notes = record_on(&v, "m1")["notes"].to_string();
    assert!(notes.contains("reaped"), "{notes}");
    assert!(!tree.exists());
    f.assert_clean("m1");
}

/// Issue 21.5 on a machine: the failing test's own lines under its name
/// (human and `--json`), and `records show ID --log` prints the dispatched
/// attempt's kept log and refuses it once changed.
#[test]
fn red_on_a_machine_shows_the_failing_tests_output_and_its_log() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.measure("m1");
    assert_code(&f.probe("m1", "go", "/usr/bin/go"), 0);
    let repo = go_repo(
        "func TestGood(t *testing.T) { t.Log(\"passing chatter\") }\n\nfunc TestBroken(t *testing.T) {\n\tt.Log(\"remote step one\")\n\tt.Fatal(\"broken on purpose\")\n}\n",
    );
    let o = f
        .env
        .run(&["certify", "--repo", &repo.path_str(), "--machine", "m1"]);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    assert!(
        out.contains("  output of failing tests:\n    example.com/m/a.TestBroken:\n"),
        "{out}\n{err}"
    );
    assert!(out.contains("remote step one"), "{out}");
    assert!(out.contains("broken on purpose"), "{out}");
    assert!(!out.contains("passing chatter"), "{out}");

    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 1);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert_eq!(
        r["test_output"][0]["test"], "example.com/m/a.TestBroken",
        "{r}"
    );
    let lines = r["test_output"][0]["lines"].to_string();
    assert!(
        lines.contains("remote step one") && lines.contains("broken on purpose"),
        "{lines}"
    );
    let stored = repo.records().pop().unwrap();
    assert!(stored.get("test_output").is_none(), "{stored}");

    let id = r["id"].as_str().unwrap();
    let log = r["suite_log"]
        .as_str()
        .expect("a dispatched attempt keeps its log");
    let o = f
        .env
        .run(&["records", "--repo", &repo.path_str(), "show", id, "--log"]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("remote step one"), "{}", text(&o).0);
    let mut bytes = std::fs::read(log).unwrap();
    bytes[0] ^= 1;
    std::fs::write(log, &bytes).unwrap();
    let o = f
        .env
        .run(&["records", "--repo", &repo.path_str(), "show", id, "--log"]);
    assert_refused(&o, "record-log-tampered");
}

#[test]
fn unadmitted_machine_and_unprobed_toolchain_are_refused_before_shipping() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m2"]);
    let repo = go_repo(PASSING);
    // Never measured: the remedy is the measure line.
    let o = f.certify(&repo, "m0", &[]);
    let (_, err) = text(&o);
    let msg = assert_refused(&o, "verification-toolchain-absent");
    assert!(msg.contains("machine m0"), "{err}");
    assert!(msg.contains("catalog row: go"), "{err}");
    assert!(msg.contains("machine measure --machine m0"), "{err}");
    assert!(!f.workhome("m0").exists(), "something was shipped");

    // Measured but go never probed on m2 (which has no Go): the probe line
    // only — nothing is known yet, so nothing is to be installed.
    f.measure("m2");
    let o = f.certify(&repo, "m2", &[]);
    let msg = assert_refused(&o, "verification-toolchain-absent");
    assert!(msg.contains("machine m2"), "{msg}");
    assert!(msg.contains("never probed"), "{msg}");
    assert!(!msg.contains("apt-get install"), "{msg}");
    assert!(
        msg.contains("machine probe --machine m2 --capability go"),
        "{msg}"
    );
    // Probed absent: still refused, still nothing shipped; now the install
    // command comes first, then the re-probe line.
    assert_code(&f.probe("m2", "go", "/usr/bin/go"), 1);
    let o = f.certify(&repo, "m2", &[]);
    let msg = assert_refused(&o, "verification-toolchain-absent");
    assert!(msg.contains("absent"), "{msg}");
    let install = msg.find("apt-get install -y golang-go").expect(&msg);
    let probe = msg.find("machine probe --machine m2").expect(&msg);
    assert!(install < probe, "{msg}");
    assert!(!f.workhome("m2").exists(), "something was shipped");
    assert!(repo.records().is_empty());
}

/// `--machine ""` used to dispatch to no machine at all and exit 0 with no
/// record ("green" for nothing measured); `local,m0` was refused as an
/// unknown machine `local`. Both are one refusal now, before any connection.
#[test]
fn machine_list_naming_no_machine_or_mixing_local_is_refused() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0"]);
    let repo = go_repo(PASSING);
    for given in ["", ",", " , "] {
        let o = f.certify(&repo, given, &[]);
        let msg = assert_refused(&o, "machine-list-invalid");
        assert!(msg.contains("names no machine"), "{msg}");
        assert_eq!(msg.trim_end().lines().count(), 1, "{msg}");
        let o = f.env.run(&[
            "verify-affected",
            "--repo",
            repo.path().to_str().unwrap(),
            "--base",
            "HEAD",
            "--machine",
            given,
        ]);
        assert_refused(&o, "machine-list-invalid");
    }
    let o = f.certify(&repo, "local,m0", &[]);
    let msg = assert_refused(&o, "machine-list-invalid");
    assert!(msg.contains("mixes `local`"), "{msg}");
    assert!(msg.contains("with --machine m0"), "{msg}");
    assert!(repo.records().is_empty());
    assert!(repo.verified().is_none());
    assert!(!f.workhome("m0").exists(), "something was shipped");
}

/// A declared absolute program was replaced by whatever path the machine's
/// capability row had probed: the suite ran a binary nobody declared.
#[test]
fn declared_absolute_program_runs_only_where_that_path_was_probed() {
    let Some(lab) = go_ready_lab() else { return };
    if common::skip_unless(
        Path::new("/usr/lib/go-1.19/bin/go").exists(),
        "no /usr/lib/go-1.19/bin/go for the lab hosts",
    ) {
        return;
    }
    let f = Fleet::new(lab, &["m1"]);
    f.env.write_config(
        "[verify.full]\nargv = [\"/usr/lib/go-1.19/bin/go\", \"test\", \"-count=1\", \"-json\", \"./...\"]\nreport = \"go-test-json\"\n",
    );
    f.measure("m1");
    assert_code(&f.probe("m1", "go", "/usr/bin/go"), 0);
    let repo = go_repo(PASSING);
    let o = f.certify(&repo, "m1", &[]);
    let msg = assert_refused(&o, "verification-toolchain-absent");
    assert!(msg.contains("probed /usr/bin/go"), "{msg}");
    assert!(
        msg.contains("--declared-path /usr/lib/go-1.19/bin/go"),
        "{msg}"
    );
    assert!(!f.workhome("m1").exists(), "something was shipped");
    assert!(repo.records().is_empty());

    assert_code(&f.probe("m1", "go", "/usr/lib/go-1.19/bin/go"), 0);
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert_eq!(r["suite_argv"][0], "/usr/lib/go-1.19/bin/go", "{r}");
    assert_eq!(
        r["machine_program"]["path"], "/usr/lib/go-1.19/bin/go",
        "{r}"
    );
}

/// A shallow clone (CI's `--depth 1`) used to fail every dispatch as
/// `ship-failed`: its bundle stops at the clone's boundary and the mirror's
/// fetch refused the missing parents.
#[test]
fn shallow_clone_ships_and_is_measured() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0"]);
    f.measure("m0");
    assert_code(&f.probe("m0", "go", "/usr/bin/go"), 0);
    let origin = go_repo(PASSING);
    origin.commit(&[("a/b.txt", "second\n")], "second");
    let dir = tempfile::Builder::new()
        .prefix("saphan-shallow-")
        .tempdir()
        .unwrap();
    let clone = dir.path().join("c");
    let st = std::process::Command::new("git")
        .args(["clone", "-q", "--depth", "1"])
        .arg(format!("file://{}", origin.path().display()))
        .arg(&clone)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(clone.join(".git/shallow").exists(), "not a shallow clone");
    let o = f.env.run(&[
        "--json",
        "certify",
        "--repo",
        clone.to_str().unwrap(),
        "--machine",
        "m0",
    ]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m0");
    assert_eq!(r["verdict"], "green", "{r}");
    assert_eq!(r["sha"], origin.head(), "{r}");
    assert!(r["bundle_bytes"].as_u64().unwrap() > 0, "{r}");
    f.assert_clean("m0");
}

/// A machine whose workhome is on a read-only file system: measurement-failed
/// as `ship-failed`, never a verdict, and the note is one line that says
/// what to fix (it used to quote the machine's stderr across lines, twice).
#[test]
fn read_only_workhome_fails_as_ship_failed_on_one_line() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m3"]);
    let wh = f.workhome("m3");
    std::fs::create_dir_all(&wh).unwrap();
    let mounted = lab.ssh(
        "m3",
        &format!("mount -t tmpfs -o ro,size=1m saphan-ro '{}'", wh.display()),
    );
    assert!(mounted.status.success(), "{mounted:?}");
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    f.measure("m3");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = f.certify(&repo, "m3", &[]);
    lab.ssh("m3", &format!("umount '{}'", wh.display()));
    assert_code(&o, 3);
    let v = json(&o);
    let r = record_on(&v, "m3");
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "ship-failed", "{r}");
    let note = r["notes"][0].as_str().unwrap();
    assert!(!note.contains('\n'), "{note}");
    assert!(note.contains("Read-only file system"), "{note}");
    assert!(note.contains("workhome must be writable"), "{note}");
    assert!(repo.verified().is_none());
}

/// A provision that cannot be placed on the machine for want of space is a
/// failed measurement of that machine (`provision-failed`, naming the disk
/// error) — not the refusal `provision-dest-conflict` with its remedy
/// "change the provision's dest", which it was reported as when the fault
/// was told apart by comparing refusal names.
#[test]
fn a_full_disk_while_provisioning_is_provision_failed_not_a_dest_conflict() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m3"]);
    let wh = f.workhome("m3");
    std::fs::create_dir_all(&wh).unwrap();
    // Room for the mirror and the tree, not for the provision's bytes.
    let mounted = lab.ssh(
        "m3",
        &format!("mount -t tmpfs -o size=2m saphan-full '{}'", wh.display()),
    );
    assert!(mounted.status.success(), "{mounted:?}");
    let big = f.env.home().join("big.bin");
    std::fs::write(&big, vec![b'x'; 8 * 1024 * 1024]).unwrap();
    let repo = Repo::new(&[("README", "x\n")]);
    f.env.write_config(&format!(
        "[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n\n[verify.provision.big]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \"conf/big.bin\"\n",
        repo.path().display(),
        big.display()
    ));
    f.measure("m3");
    let o = f.certify(&repo, "m3", &[]);
    lab.ssh("m3", &format!("umount '{}'", wh.display()));
    let (stdout, stderr) = text(&o);
    assert!(
        !stdout.contains("provision-dest-conflict") && !stderr.contains("provision-dest-conflict"),
        "a full disk was reported as a dest conflict:\n{stdout}{stderr}"
    );
    assert_code(&o, 3);
    let v = json(&o);
    let r = record_on(&v, "m3");
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "provision-failed", "{r}");
    let note = r["notes"][0].as_str().unwrap();
    assert!(note.starts_with("provision-failed: "), "{note}");
    assert!(note.contains("No space left on device"), "{note}");
    assert!(!note.contains("change the provision's dest"), "{note}");
    assert!(repo.verified().is_none());
}

#[test]
fn no_declaration_is_refused_before_any_connection() {
    // No lab needed: the machine row points at a host that does not exist,
    // and the refusal must come before any attempt to reach it.
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.far]\ntransport = \"ssh\"\nhost = \"nowhere.invalid\"\nworkhome = \"/tmp/x\"\n",
    )
    .unwrap();
    let repo = Repo::new(&[("README", "no suite here\n")]);
    let o = env.run(&[
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        "far",
    ]);
    let msg = assert_refused(&o, "trunkcert");
    assert!(msg.contains("NO suite to run here"), "{msg}");
    assert!(repo.records().is_empty());
}

#[test]
fn provision_hash_is_computed_on_the_machine_and_machines_disagree() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1"]);
    f.measure("m0,m1");
    // `sh` has no catalog row: it is resolved on each machine.
    let secret = f.env.home().join("secret.txt");
    std::fs::write(&secret, "provisioned bytes\n").unwrap();
    let repo = Repo::new(&[(
        "check.sh",
        "#!/bin/sh\nset -e\ngrep -q provisioned conf/secret.txt\n# fails where this machine's own /root says so\ntest ! -e \"$HOME/saphan-fail-here\"\n",
    )]);
    f.env.write_config(&format!(
        "[verify.full]\nargv = [\"sh\", \"check.sh\"]\nreport = \"exitcode\"\n\n[verify.provision.secret]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \"conf/secret.txt\"\n",
        repo.path().display(),
        secret.display()
    ));
    std::fs::write(lab.home_dir("m1").join("saphan-fail-here"), "").unwrap();
    let o = f.certify(&repo, "m0,m1", &[]);
    std::fs::remove_file(lab.home_dir("m1").join("saphan-fail-here")).unwrap();
    assert_code(&o, 1);
    let v = json(&o);
    let want = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"provisioned bytes\n"))
    };
    for m in ["m0", "m1"] {
        let r = record_on(&v, m);
        assert_eq!(r["provisions"][0]["dest"], "conf/secret.txt", "{r}");
        assert_eq!(r["provisions"][0]["sha256"], want.as_str(), "{r}");
    }
    assert_eq!(record_on(&v, "m0")["verdict"], "green");
    assert_eq!(record_on(&v, "m1")["verdict"], "red");
    assert_eq!(v["disagreement"], "green on m0, red on m1", "{v}");
    assert_eq!(repo.verified(), None, "the pointer moved on a disagreement");
    assert_eq!(repo.records().len(), 2);
    f.assert_clean("m0");
    f.assert_clean("m1");

    // Both green: the pointer moves.
    let o = f.certify(&repo, "m0,m1", &[]);
    assert_code(&o, 0);
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
}

/// Processes on this machine (lab hosts share its PID space) whose command
/// line holds `token`.
fn processes_with(token: &str) -> Vec<String> {
    let o = std::process::Command::new("pgrep")
        .args(["-a", "-f", token])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.contains("pgrep"))
        .map(str::to_string)
        .collect()
}

/// Wait (bounded) until `cond` holds.
fn wait_for(bound: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < bound {
        if cond() {
            return true;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
    false
}

/// Start `certify --json --machine <hosts>` in the background and wait
/// (bounded) until the waiting suite has started on every host.
fn started(
    f: &Fleet,
    repo: &Repo,
    token: &str,
    hosts: &[&str],
    extra: &[&str],
) -> std::process::Child {
    let machines = hosts.join(",");
    let child = f
        .env
        .cmd()
        .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", &machines])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bound = std::time::Duration::from_secs(60);
    for h in hosts {
        assert!(
            wait_for_started(f, h, token, bound),
            "the suite never started on {h}"
        );
    }
    child
}

/// Wait (bounded) until the waiting suite marked in its tree on `host` that
/// it started.
fn wait_for_started(f: &Fleet, host: &str, token: &str, bound: std::time::Duration) -> bool {
    let base = f.workhome(host).join("saphan");
    let name = format!("{token}.started");
    wait_for(bound, || common::in_scratch_tree(&base, &name).is_some())
}

/// A shell suite that marks that it started (in its own tree, the one place
/// a sealed suite writes), leaves a grandchild holding stdout, and waits
/// for `$HOME/<token>.go` (the machine's own /root).
fn waiting_repo(token: &str) -> Repo {
    Repo::new(&[(
        "wait.sh",
        &format!(
            "#!/bin/sh\ntouch \"{token}.started\"\nsh -c 'sleep 1000; : {token}' &\nwhile [ ! -e \"$HOME/{token}.go\" ]; do sleep 0.1; done\necho done\n"
        ),
    )])
}

#[test]
fn timeout_kills_the_whole_group_on_the_machine() {
    if common::skip_unless(common::have("pgrep"), "no pgrep") {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m0"]);
    f.measure("m0");
    let token = format!("saphan-to-{}", std::process::id());
    let repo = waiting_repo(&token);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    let t0 = std::time::Instant::now();
    let o = f.certify(&repo, "m0", &["--timeout", "3s"]);
    let took = t0.elapsed();
    assert_code(&o, 3);
    let r = record_on(&json(&o), "m0").clone();
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "timeout", "{r}");
    assert_eq!(r["budget_source"], "flag:--timeout");
    assert!(took.as_secs() < 60, "took {took:?}");
    assert!(
        processes_with(&token).is_empty(),
        "left on the machine: {:?}",
        processes_with(&token)
    );
    f.assert_clean("m0");
}

#[test]
fn ctrl_c_kills_remote_groups_and_removes_remote_trees() {
    if common::skip_unless(common::have("pgrep"), "no pgrep") {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m0", "m1"]);
    f.measure("m0,m1");
    let token = format!("saphan-cc-{}", std::process::id());
    let repo = waiting_repo(&token);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    let child = started(&f, &repo, &token, &["m0", "m1"], &[]);
    // SAFETY: signalling the child this test spawned, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        t0.elapsed().as_secs() < 60,
        "Ctrl-C took {:?}",
        t0.elapsed()
    );
    assert_code(&o, 3);
    let v = json(&o);
    for h in ["m0", "m1"] {
        let r = record_on(&v, h);
        assert_eq!(r["failure"], "interrupted", "{r}");
        assert_eq!(r["interrupted"], true, "{r}");
        f.assert_clean(h);
    }
    assert!(
        processes_with(&token).is_empty(),
        "left: {:?}",
        processes_with(&token)
    );
    assert_eq!(repo.records().len(), 2);
}

/// Ctrl-C while a large commit is being shipped used to wait for the whole
/// bundle to be sent (and fetched) and then record that "the suite's
/// process group was killed" although nothing had run. Now the ship stops,
/// the record says so, and nothing is left on the machine or in the repo.
#[test]
fn ctrl_c_during_ship_stops_the_ship_and_leaves_nothing() {
    use std::io::{BufRead, Read};
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m2"]);
    f.measure("m2");
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    // Incompressible, so bundling and streaming it take a while.
    let mut blob = std::fs::File::create(repo.path().join("blob.bin")).unwrap();
    std::io::copy(
        &mut std::fs::File::open("/dev/urandom").unwrap().take(80 << 20),
        &mut blob,
    )
    .unwrap();
    drop(blob);
    let sha = repo.commit(&[], "big");
    let mut child = f
        .env
        .cmd()
        .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", "m2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no ship phase");
        if line.starts_with("m2: ship") {
            break;
        }
    }
    // SAFETY: signalling the child this test spawned, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(3), "{out}\n{rest}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let r = record_on(&v, "m2");
    assert_eq!(r["failure"], "interrupted", "{r}");
    assert_eq!(r["interrupted"], true, "{r}");
    assert_eq!(r["bundle_bytes"], 0, "{r}");
    assert!(r["phases"].get("run").is_none(), "{r}");
    let note = r["notes"][0].as_str().unwrap();
    // The signal follows the `ship` line at once: it may reach saphan
    // before the ship's first byte or during it — both honest words.
    assert!(
        note.contains("while the commit was being shipped")
            || note.contains("before the commit was shipped"),
        "{note}"
    );
    assert!(!rest.contains("m2: run"), "{rest}");
    f.assert_clean("m2");
    // The machine's mirror never got the commit; the repo keeps no temp ref.
    let mirrors = f.workhome("m2").join("saphan/mirrors");
    for m in std::fs::read_dir(&mirrors).into_iter().flatten().flatten() {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(m.path())
            .args(["cat-file", "-e", &format!("{sha}^{{commit}}")])
            .output()
            .unwrap();
        assert!(!o.status.success(), "the mirror holds {sha}");
    }
    let refs = std::process::Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["for-each-ref", "refs/saphan/ship/"])
        .output()
        .unwrap();
    assert!(
        refs.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&refs.stdout)
    );
}

#[test]
fn stopped_and_partitioned_machines_fail_by_name_while_another_is_green() {
    if common::skip_unless(common::have("pgrep"), "no pgrep") {
        return;
    }
    let Some(lab) = Lab::start(3) else { return };
    let f = Fleet::new(&lab, &["m0", "m1", "m2"]);
    f.measure("m0,m1,m2");
    let token = format!("saphan-ft-{}", std::process::id());
    let repo = waiting_repo(&token);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    let child = started(
        &f,
        &repo,
        &token,
        &["m0", "m1", "m2"],
        &["--timeout", "20s"],
    );
    let t0 = std::time::Instant::now();
    lab.stop("m0");
    lab.partition("m1");
    std::fs::write(lab.home_dir("m2").join(format!("{token}.go")), "").unwrap();
    let o = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    lab.heal("m1");
    // budget 20 s + grace: the local side must not wait on a dead machine.
    assert!(took.as_secs() < 60, "took {took:?}");
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(record_on(&v, "m2")["verdict"], "green", "{v}");
    for h in ["m0", "m1"] {
        let r = record_on(&v, h);
        assert_eq!(r["verdict"], "measurement-failed", "{r}");
        assert_eq!(r["failure"], "connection-lost", "{r}");
    }
    assert_eq!(repo.verified(), None);
    // The partitioned machine's session still enforces the budget there.
    let gone = {
        let t = std::time::Instant::now();
        loop {
            if processes_with(&token).is_empty() || t.elapsed().as_secs() > 60 {
                break processes_with(&token).is_empty();
            }
            std::thread::park_timeout(std::time::Duration::from_millis(200));
        }
    };
    assert!(gone, "left: {:?}", processes_with(&token));
}

/// A superproject whose suite needs its submodule's content, plus a second
/// commit whose gitlink names a commit no repository here holds.
fn superproject() -> (Repo, Repo, String, String) {
    let sub = Repo::new(&[("lib.txt", "hello from the submodule\n")]);
    let sup = Repo::new(&[(
        "check.sh",
        "#!/bin/sh\ngrep -q 'hello from the submodule' sub/lib.txt\n",
    )]);
    common::git(
        sup.path(),
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub.path().to_str().unwrap(),
            "sub",
        ],
    );
    common::git(sup.path(), &["commit", "-q", "-m", "add submodule"]);
    let good = sup.head();
    common::git(
        sup.path(),
        &[
            "update-index",
            "--cacheinfo",
            "160000,1111111111111111111111111111111111111111,sub",
        ],
    );
    common::git(sup.path(), &["commit", "-q", "-m", "gitlink to nowhere"]);
    let missing = sup.head();
    (sup, sub, good, missing)
}

#[test]
fn submodules_at_their_gitlinks_locally_and_on_a_machine() {
    let (sup, sub, good, missing) = superproject();
    let sub_commit = sub.head();
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"sh\", \"check.sh\"]\nreport = \"exitcode\"\n");
    let local = |sha: &str| {
        env.run(&[
            "--json",
            "certify",
            "--repo",
            sup.path().to_str().unwrap(),
            "--sha",
            sha,
        ])
    };
    let o = local(&good);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(
        v["submodules"],
        serde_json::json!([{"path": "sub", "commit": sub_commit}]),
        "{v}"
    );
    let o = local(&missing);
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(v["failure"], "submodule-missing", "{v}");
    let note = v["notes"][0].as_str().unwrap();
    assert!(
        note.contains("sub") && note.contains("1111111111111111111111111111111111111111"),
        "{note}"
    );
    common::assert_only_main_worktree(&sup);

    // The same on a machine: the submodule's objects are shipped too.
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m0"]);
    f.measure("m0");
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"check.sh\"]\nreport = \"exitcode\"\n");
    let o = f.certify(&sup, "m0", &["--sha", &good]);
    assert_code(&o, 0);
    let r = record_on(&json(&o), "m0").clone();
    assert_eq!(
        r["submodules"],
        serde_json::json!([{"path": "sub", "commit": sub_commit}]),
        "{r}"
    );
    let o = f.certify(&sup, "m0", &["--sha", &missing]);
    assert_code(&o, 3);
    let r = record_on(&json(&o), "m0").clone();
    assert_eq!(r["failure"], "submodule-missing", "{r}");
    f.assert_clean("m0");
}

#[test]
fn verify_affected_on_a_machine_with_the_bundled_adapter() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.measure("m1");
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    files.extend(gomod::package("leaf", &[], 1));
    files.extend(gomod::package("top", &["leaf"], 1));
    files.extend(gomod::package("other", &[], 1));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    common::git(repo.path(), &["branch", "base"]);
    repo.commit(
        &[(
            "leaf/leaf.go",
            "package leaf\n\n// V is two now.\nfunc V() int { return 2 }\n",
        )],
        "change leaf",
    );
    f.env.write_config(
        "[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\n",
    );
    let mut c = f.env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args([
            "--json",
            "verify-affected",
            "--repo",
            repo.path().to_str().unwrap(),
            "--base",
            "base",
            "--machine",
            "m1",
        ])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["result"], "green", "{v}");
    let sel: Vec<&str> = v["selected_packages"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        sel.contains(&"example.com/m/leaf") && sel.contains(&"example.com/m/top"),
        "{v}"
    );
    assert!(!sel.contains(&"example.com/m/other"), "{v}");
    let argv0 = v["adapter_argv"][0].as_str().unwrap();
    assert!(
        argv0.starts_with(
            &f.workhome("m1")
                .join("saphan/bin/saphan-")
                .display()
                .to_string()
        ),
        "{v}"
    );
    assert!(
        Path::new(argv0).is_file(),
        "the binary was not shipped: {argv0}"
    );
    // Issue 21.6: where it ran is named, in the JSON and in the text (on
    // main 7d6d184 neither said m1).
    assert_eq!(v["machine"], "m1", "{v}");
    let mut c = f.env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["verify-affected", "--repo", repo.path().to_str().unwrap()])
        .args(["--base", "base", "--machine", "m1"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let out = text(&o).0;
    assert!(out.lines().any(|l| l == "  machine           m1"), "{out}");
    f.assert_clean("m1");
}

/// Pids of processes on this machine (lab hosts share its PID space) whose
/// whole command line is `cmdline` (arguments joined by spaces).
fn processes_exactly(cmdline: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let words: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        if words.join(" ") == cmdline {
            found.push(pid);
        }
    }
    found
}

/// Issue 20.2: after saphan is killed mid-run, the attempt's watchdog
/// (`sleep <budget>` under the remote supervisor) used to stay armed after
/// the next dispatch reaped the suite's group, and at the old budget it
/// signalled the old group id — by then possibly a stranger's. Now the reap
/// takes the watchdog with it: once the next dispatch is over, no watchdog
/// of the killed attempt is left on the machine.
#[test]
fn a_reaped_attempts_watchdog_goes_with_its_group() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.measure("m1");
    let token = format!("saphan-wd-{}", std::process::id());
    let repo = waiting_repo(&token);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    // An unusual budget, so its watchdog's `sleep` is this test's alone.
    let budget = "9337";
    let mut child = started(
        &f,
        &repo,
        &token,
        &["m1"],
        &["--timeout", &format!("{budget}s")],
    );
    let sleeper = format!("sleep {budget}.000");
    assert!(
        !processes_exactly(&sleeper).is_empty(),
        "the attempt's watchdog is not armed"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The next dispatch of the same repository reaps the killed attempt.
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    assert!(
        processes_with(&token).is_empty(),
        "the suite outlived the reap: {:?}",
        processes_with(&token)
    );
    let left = processes_exactly(&sleeper);
    assert!(
        left.is_empty(),
        "the killed attempt's watchdog is still armed after the reap: {left:?}"
    );
    // (The killed attempt's `runs/<id>/` is issue 20.5's, not checked here.)
}

/// A junit-xml suite that fails one test, writes 30 passing reports beside
/// the failing one, and fills its report directory with ~49 MB worth of
/// long names (three directories, 4500 files each, ~3.6 KB a path).
fn cut_listing_repo() -> Repo {
    let suite = r#"#!/bin/sh
set -e
seg=$(printf '%0200d' 0)
for k in 1 2 3; do
  p=reports/j$k
  n=0; while [ $n -lt 18 ]; do p=$p/$seg; n=$((n+1)); done
  mkdir -p "$p"
  i=0; while [ $i -lt 4500 ]; do : > "$p/f$i"; i=$((i+1)); done
done
i=0; while [ $i -lt 30 ]; do
  printf '<testsuite name="p%s" tests="1" failures="0"><testcase classname="p" name="ok%s"/></testsuite>\n' $i $i > reports/pass$i.xml
  i=$((i+1))
done
printf '<testsuite name="f" tests="1" failures="1"><testcase classname="f" name="broken"><failure message="no">no</failure></testcase></testsuite>\n' > reports/fail.xml
"#;
    Repo::new(&[("suite.sh", suite)])
}

/// Issue 20.1: the remote listing of report candidates was kept as a
/// bounded tail of the command's stdout (16 MiB), so a report directory
/// with many long names lost the start of its listing — the failing report
/// among it was never read, and red came out green. A listing is now read
/// whole or the measurement fails by name: never green, and never a verdict
/// read from part of the listing. (On the code before the fix the record
/// read 11 of the 31 reports: the listing was cut; whether the failing one
/// was among the dropped depends on the file system's directory order.)
#[test]
fn a_report_listing_too_long_to_keep_is_never_green() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m2"]);
    f.measure("m2");
    let repo = cut_listing_repo();
    f.env.write_config(
        "[verify.full]\nargv = [\"sh\", \"suite.sh\"]\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n",
    );
    let o = f.certify(&repo, "m2", &[]);
    let v = json(&o);
    let r = record_on(&v, "m2");
    assert_ne!(
        r["verdict"], "green",
        "a failing report was never read: {r}"
    );
    assert!(
        r["failure"] == "report-listing-unbounded" || r["verdict"] == "red",
        "{r}"
    );
    if r["verdict"] == "red" {
        // Red from a cut listing is luck, not a reading: every report is read.
        assert_eq!(
            r["suite_report_files"].as_array().map(Vec::len),
            Some(31),
            "the verdict came from a cut listing: {r}"
        );
    }
    assert_ne!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_ne!(repo.verified().as_deref(), Some(repo.head().as_str()));
    f.assert_clean("m2");
}

/// Waits for `child` at most `bound`; past it the child is killed and the
/// test fails (a lost connection must not wait for the suite's budget).
fn output_within(child: std::process::Child, bound: std::time::Duration) -> std::process::Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            // SAFETY: killing the child this test spawned, by its pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("saphan did not end within {bound:?}");
        }
    }
}

/// A machine partitioned mid-run is `connection-lost` at the SSH keep-alive
/// limit (the lab: ServerAliveInterval 1 s × ServerAliveCountMax 3), not at
/// the suite's budget (10 minutes here) plus grace.
#[test]
fn a_partitioned_machine_is_connection_lost_at_the_keepalive_limit() {
    let Some(lab) = Lab::start(1) else { return };
    let f = Fleet::new(&lab, &["m0"]);
    f.measure("m0");
    let token = format!("saphan-ka-{}", std::process::id());
    let repo = waiting_repo(&token);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    let child = started(&f, &repo, &token, &["m0"], &["--timeout", "10m"]);
    lab.partition("m0");
    // Keep-alive limit 3 s (1 s × 3, declared at the third silent second), plus
    // a generous slack for the record and the lock; far below 10 minutes.
    let o = output_within(child, std::time::Duration::from_secs(90));
    lab.heal("m0");
    assert_code(&o, 3);
    let r = record_on(&json(&o), "m0").clone();
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "connection-lost", "{r}");
    assert_eq!(repo.verified(), None);
}

/// The pack files of a machine's mirror for `repo` (the lab host shares
/// this filesystem).
fn mirror_packs(f: &Fleet, host: &str) -> Vec<PathBuf> {
    let mirrors = f.workhome(host).join("saphan/mirrors");
    let mut packs = Vec::new();
    for m in std::fs::read_dir(&mirrors).unwrap().flatten() {
        let p = m.path().join("objects/pack");
        for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "pack") {
                packs.push(e.path());
            }
        }
    }
    packs
}

/// Issue 20.6: a truncated pack in the machine's mirror used to make every
/// later dispatch `ship-failed` until someone repaired the mirror by hand.
/// Now the mirror fails its integrity check, is moved aside and recreated,
/// the full history is shipped once, and the record says so.
#[test]
fn a_corrupt_mirror_is_renewed_and_the_next_dispatch_is_green() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.env.write_config(
        "[verify.full]\nargv = [\"sh\", \"-c\", \"test -s big\"]\nreport = \"exitcode\"\n",
    );
    f.measure("m1");
    let noise: String = (0..40_000).map(|i| format!("{i:x}\n")).collect();
    let repo = Repo::new(&[("README", "x\n"), ("big", &noise)]);
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    let packs = mirror_packs(&f, "m1");
    assert!(!packs.is_empty(), "the mirror holds no pack");
    for p in &packs {
        let len = std::fs::metadata(p).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        file.set_len(len / 2).unwrap();
    }
    // The same SHA again (the mirror claims it, but cannot read it), then a
    // new commit (its bundle needs the mirror's corrupt prerequisites).
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert_eq!(r["verdict"], "green", "{r}");
    let notes = r["notes"].to_string();
    assert!(notes.contains("mirror-renewed"), "{notes}");
    assert!(notes.contains("full history"), "{notes}");
    let packs = mirror_packs(&f, "m1");
    assert!(!packs.is_empty(), "the renewed mirror holds no pack");
    for p in &packs {
        let len = std::fs::metadata(p).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        file.set_len(len / 2).unwrap();
    }
    repo.commit(&[("README", "y\n")], "two");
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert_eq!(r["verdict"], "green", "{r}");
    assert!(r["notes"].to_string().contains("mirror-renewed"), "{r}");
    // Healthy now: no renewal, nothing new to send.
    let o = f.certify(&repo, "m1", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m1");
    assert!(!r["notes"].to_string().contains("mirror-renewed"), "{r}");
    assert_eq!(r["bundle_bytes"], 0, "{r}");
    let left: Vec<_> = std::fs::read_dir(f.workhome("m1").join("saphan/mirrors"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("corrupt"))
        .collect();
    assert!(left.is_empty(), "the corrupt mirror was left: {left:?}");
    f.assert_clean("m1");
}

/// Issue 20.5: what dead attempts leave is reaped by the next run, with a
/// note naming it — on the machine (a half bundle in `incoming/`, a dead
/// fetch's `tmp_pack_*` in the mirror, run directories whose attempt is
/// over) and here (a killed saphan's bundle and collect directories in the
/// temp dir, the `git bundle create` still writing into one, its ship
/// refs). A live process's things are left alone.
#[test]
fn what_dead_attempts_left_is_reaped_on_both_sides_with_a_note() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m1"]);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    f.measure("m1");
    let repo = Repo::new(&[("README", "x\n")]);
    let tmp = tempfile::tempdir().unwrap();
    let certify = || {
        f.env
            .cmd()
            .env("TMPDIR", tmp.path())
            .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
            .args(["--machine", "m1"])
            .output()
            .unwrap()
    };
    assert_code(&certify(), 0);
    // A pid that is gone.
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let base = f.workhome("m1").join("saphan");
    let old = |p: &Path| {
        let o = std::process::Command::new("touch")
            .args(["-d", "30 minutes ago"])
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    };
    let half = base.join(format!("incoming/{dead}-m1-0123456789ab.bundle"));
    std::fs::write(&half, "# v2 git bundle\n").unwrap();
    old(&half);
    let fresh = base.join("incoming/9-m1-fresh.bundle");
    std::fs::write(&fresh, "being written").unwrap();
    let mirror = std::fs::read_dir(base.join("mirrors"))
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "git"))
        .unwrap()
        .path();
    let tmp_pack = mirror.join("objects/pack/tmp_pack_AbCdEf");
    std::fs::write(&tmp_pack, vec![0u8; 4096]).unwrap();
    old(&tmp_pack);
    let over = base.join("runs/over-m1");
    std::fs::create_dir_all(&over).unwrap();
    std::fs::write(over.join("locked"), "").unwrap();
    std::fs::write(over.join("stdout"), "x").unwrap();
    let waited = base.join("runs/waited-m1");
    std::fs::create_dir_all(&waited).unwrap();
    old(&waited);
    // A live attempt's run dir: its lock file is held.
    let live = base.join("runs/live-m1");
    std::fs::create_dir_all(&live).unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg(live.join("locked"))
        .args(["sleep", "600"])
        .spawn()
        .unwrap();
    while !live.join("locked").exists() {
        std::thread::yield_now();
    }
    // Here: a killed saphan's directories, a writer still in one, its ref.
    let bundle_dir = tmp.path().join(format!("saphan-bundle-{dead}-Xy12"));
    std::fs::create_dir_all(&bundle_dir).unwrap();
    // Stands in for an orphaned `git bundle create <dir>/ship.bundle …`.
    std::fs::write(bundle_dir.join("ship.bundle"), "x").unwrap();
    let mut writer = std::process::Command::new("tail")
        .arg("-f")
        .arg(bundle_dir.join("ship.bundle"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let collect_dir = tmp.path().join(format!("saphan-collect-{dead}-Zz34"));
    std::fs::create_dir_all(collect_dir.join("tree")).unwrap();
    let mine = tmp
        .path()
        .join(format!("saphan-bundle-{}-Mine", std::process::id()));
    std::fs::create_dir_all(&mine).unwrap();
    let ship_ref = format!("refs/saphan/ship/{dead}-m1-0123456789ab");
    common::git(repo.path(), &["update-ref", &ship_ref, "HEAD"]);

    let o = certify();
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m1");
    let notes = r["notes"].to_string();
    for p in [&half, &tmp_pack, &over, &waited, &bundle_dir, &collect_dir] {
        assert!(!p.exists(), "{} was left", p.display());
        assert!(
            notes.contains(&*p.display().to_string()),
            "no note names {}: {notes}",
            p.display()
        );
    }
    assert!(notes.contains(&ship_ref), "{notes}");
    assert!(notes.contains("reaped"), "{notes}");
    let refs = common::git(repo.path(), &["for-each-ref", "refs/saphan/ship/"]);
    assert_eq!(refs.trim(), "", "ship refs left");
    // Killed before the ship began: by now it has exited.
    let ended = writer.try_wait().unwrap();
    if ended.is_none() {
        let _ = writer.kill();
        let _ = writer.wait();
    }
    assert!(
        ended.is_some(),
        "the writer into a dead bundle dir was not killed"
    );
    assert!(fresh.exists(), "a bundle being written was reaped");
    assert!(live.exists(), "a live attempt's run dir was reaped");
    assert!(mine.exists(), "a live process's bundle dir was reaped");
    let _ = holder.kill();
    let _ = holder.wait();
    std::fs::remove_dir_all(&live).unwrap();
    std::fs::remove_file(&fresh).unwrap();
}

/// Issue 20.3 on a lab host: a suite's daemon that left its group and
/// dropped the scratch marker is gone after the attempt (its own cgroup), and the record says `containment: cgroup`.
#[test]
fn a_dispatched_suites_escaping_daemon_is_gone_after_the_attempt() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m2"]);
    let secs = format!("1002.{}", std::process::id());
    f.env.write_config(&crate::containment::daemon_suite(&secs));
    f.measure("m2");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = f.certify(&repo, "m2", &[]);
    // The lab hosts share this machine's process table.
    let left = crate::containment::alive_with(&format!("sleep {secs}"));
    for p in &left {
        // SAFETY: killing the daemon this test's suite started, by pid.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert_code(&o, 0);
    let v = json(&o);
    let r = record_on(&v, "m2");
    assert_eq!(r["containment"], "cgroup", "{r}");
    assert!(
        left.is_empty(),
        "the suite's daemon outlived the attempt: {left:?}"
    );
    f.assert_clean("m2");
}

/// Issue 20.3: a machine without a writable cgroup v2 hierarchy (lab host
/// m3) keeps the process-group containment, and its record says so.
#[test]
fn a_machine_without_cgroups_says_its_attempts_had_only_a_process_group() {
    let Some(lab) = Lab::shared() else { return };
    let f = Fleet::new(lab, &["m3"]);
    f.env
        .write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    f.measure("m3");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = f.certify(&repo, "m3", &[]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(record_on(&v, "m3")["containment"], "process-group", "{v}");
}
