//! Issue 23: what dispatch needs on a machine (`setsid`, a SHA-256 tool,
//! `git`, `/proc` or `ps`; `flock` only where its `mkdir` fallback is not
//! used) is measured by `machine measure` and refused at admission, by
//! name, before anything is shipped. A tool is made "not runnable" on one
//! lab host by binding a non-executable file over it in that host's own
//! mount namespace (every lab host's sshd runs in a private one, so the
//! bind is seen by that host's logins only and goes with its lab).

use crate::common;
use crate::common::{Env, Repo, assert_code, json, lab::Lab, text};
use saphan::fleet::ledger::{Ledger, MachineFacts, Requirements, ToolState, Userns};
use saphan::home::Home;
use serde_json::Value;
use std::path::PathBuf;

/// A saphan home wired to `lab`'s m0, with its own workhome.
struct One {
    env: Env,
    work: tempfile::TempDir,
}

impl One {
    fn new(lab: &Lab) -> One {
        let env = Env::new();
        lab.install_ssh_config(env.home());
        let work = tempfile::Builder::new()
            .prefix("saphan-requirements-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(env.home().join("fleet")).unwrap();
        std::fs::write(
            env.home().join("fleet/machines.toml"),
            format!(
                "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"{}\"\n",
                work.path().join("m0").display()
            ),
        )
        .unwrap();
        One { env, work }
    }
    fn workhome(&self) -> PathBuf {
        self.work.path().join("m0")
    }
    fn measure(&self) -> Value {
        let o = self
            .env
            .run(&["--json", "machine", "measure", "--machine", "m0"]);
        assert_code(&o, 0);
        json(&o)
    }
    fn certify(&self, repo: &Repo) -> std::process::Output {
        self.env.run(&[
            "--json",
            "certify",
            "--repo",
            repo.path().to_str().unwrap(),
            "--machine",
            "m0",
        ])
    }
}

/// Bind a non-executable file over `tool` on `host` (in its mount
/// namespace only): the tool is then on PATH but does not run there.
fn break_tool(lab: &Lab, host: &str, tool: &str) {
    let stub = lab.state_dir().join(format!("{host}-not-{tool}"));
    std::fs::write(&stub, "not a program\n").unwrap();
    let o = lab.ssh(
        host,
        &format!(
            "mount --bind '{}' \"$(command -v {tool})\" && ! {tool} --version",
            stub.display()
        ),
    );
    assert!(o.status.success(), "binding over {tool}: {o:?}");
}

fn requirements_of(measured: &Value) -> String {
    measured.to_string()
}

/// A suite no catalog row maps (`sh`): admission needs only fresh facts.
fn sh_repo() -> Repo {
    Repo::new(&[("check.sh", "#!/bin/sh\nexit 0\n")])
}

const SH_SUITE: &str = "[verify.full]\nargv = [\"sh\", \"check.sh\"]\nreport = \"exitcode\"\n";

#[test]
fn a_machine_whose_setsid_does_not_run_is_refused_by_name_before_shipping() {
    let Some(lab) = Lab::start(1) else { return };
    break_tool(&lab, "m0", "setsid");
    let f = One::new(&lab);
    f.env.write_config(SH_SUITE);
    let measured = f.measure();
    let m = requirements_of(&measured);
    assert!(m.contains("\"setsid\":\"not-runnable\""), "{m}");
    let repo = sh_repo();
    let o = f.certify(&repo);
    assert_code(&o, 2);
    let v = json(&o);
    assert_eq!(v["error"], "machine-requirements-absent", "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("`setsid`"), "{msg}");
    assert!(msg.contains("nothing was shipped"), "{msg}");
    assert!(
        msg.contains("'apt-get install -y util-linux'"),
        "the install command for the measured platform (debian): {msg}"
    );
    assert!(msg.contains("is on PATH but does not run"), "{msg}");
    assert_eq!(
        v["refusals"][0]["remedy"].as_array().unwrap().len(),
        2,
        "{v}"
    );
    assert!(
        !f.workhome().join("saphan/mirrors").exists(),
        "a mirror was made on a refused machine"
    );
    assert!(repo.records().is_empty());
}

#[test]
fn a_machine_whose_flock_does_not_run_is_green_through_the_mkdir_lock() {
    let Some(lab) = Lab::start(1) else { return };
    break_tool(&lab, "m0", "flock");
    let f = One::new(&lab);
    f.env.write_config(SH_SUITE);
    let m = requirements_of(&f.measure());
    assert!(m.contains("\"flock\":\"not-runnable\""), "{m}");
    let repo = sh_repo();
    let o = f.certify(&repo);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["records"][0]["verdict"], "green", "{out}{err}");
    // The mkdir lock was taken and let go.
    let locks = f.workhome().join("saphan/locks");
    let left: Vec<_> = std::fs::read_dir(&locks)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|n| !n.ends_with(".lock.d")),
        "the mkdir lock outlived the run: {left:?}"
    );
    // Twice: the second run takes the lock the first let go.
    repo.commit(&[("b", "b\n")], "b");
    assert_code(&f.certify(&repo), 0);
}

#[test]
fn a_machine_whose_sha256sum_does_not_run_hashes_provisions_with_shasum() {
    if common::skip_unless(
        common::have("shasum"),
        "no shasum (Debian: perl, or libdigest-sha-perl)",
    ) {
        return;
    }
    let Some(lab) = Lab::start(1) else { return };
    break_tool(&lab, "m0", "sha256sum");
    let f = One::new(&lab);
    let m = requirements_of(&f.measure());
    assert!(m.contains("\"sha256sum\":\"not-runnable\""), "{m}");
    assert!(m.contains("\"shasum\":\"ok\""), "{m}");
    let secret = f.env.home().join("secret.txt");
    std::fs::write(&secret, "provisioned bytes\n").unwrap();
    let repo = Repo::new(&[(
        "check.sh",
        "#!/bin/sh\ngrep -q provisioned conf/secret.txt\n",
    )]);
    f.env.write_config(&format!(
        "{SH_SUITE}\n[verify.provision.secret]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \"conf/secret.txt\"\n",
        repo.path().display(),
        secret.display()
    ));
    let o = f.certify(&repo);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    let v = json(&o);
    let want = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"provisioned bytes\n"))
    };
    let r = &v["records"][0];
    assert_eq!(r["verdict"], "green", "{out}{err}");
    assert_eq!(r["provisions"][0]["sha256"], want.as_str(), "{r}");
}

/// A facts row signed into the ledger as `machine measure` would write it,
/// with `requirements` as given.
fn facts(machine: &str, distro: &str, requirements: Option<Requirements>) -> MachineFacts {
    MachineFacts {
        machine: machine.into(),
        measured_at: saphan::clock::now_rfc3339_seconds(),
        os: "Linux".into(),
        arch: "x86_64".into(),
        kernel: "6.1".into(),
        distro: Some(saphan::platform::OsRelease::parse(&format!(
            "ID={distro}\n"
        ))),
        cpus: Some(2),
        memory_bytes: Some(1 << 30),
        userns: Userns {
            supported: Some(true),
            method: "unshare -U true".into(),
            max_user_namespaces: Some(100),
            unprivileged_userns_clone: None,
        },
        requirements,
    }
}

fn all_ok() -> Requirements {
    Requirements {
        flock: ToolState::Ok,
        setsid: ToolState::Ok,
        sha256sum: ToolState::Ok,
        shasum: ToolState::Absent,
        git: ToolState::Ok,
        git_version: Some("2.39.5".into()),
        proc: ToolState::Ok,
        ps: ToolState::Ok,
        bwrap: Some(ToolState::Ok),
        bwrap_path: Some("/usr/bin/bwrap".into()),
    }
}

/// No lab: the machines are never reached (admission reads the ledger
/// only). An Alpine machine without setsid or a SHA-256 tool, and with
/// only flock missing (not a requirement: the mkdir lock), a machine
/// measured before this version, and an unknown machine are refused
/// together, each by its own name and remedy.
#[test]
fn every_missing_tool_is_named_with_its_platforms_install_command_with_the_others_refusals() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    let mut rows = String::new();
    for m in ["alp", "old", "deb"] {
        rows += &format!(
            "[machine.{m}]\ntransport = \"ssh\"\nhost = \"{m}.invalid\"\nworkhome = \"/srv/{m}\"\n\n"
        );
    }
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    env.write_config(SH_SUITE);
    let ledger = Ledger::open(&Home::at(env.home())).unwrap();
    let mut alp = all_ok();
    alp.setsid = ToolState::NotRunnable;
    alp.sha256sum = ToolState::Absent;
    alp.shasum = ToolState::Absent;
    alp.flock = ToolState::Absent;
    ledger
        .append_facts(facts("alp", "alpine", Some(alp)))
        .unwrap();
    ledger.append_facts(facts("old", "debian", None)).unwrap();
    let mut deb = all_ok();
    deb.flock = ToolState::NotRunnable;
    deb.git_version = Some("2.20.1".into());
    ledger
        .append_facts(facts("deb", "debian", Some(deb)))
        .unwrap();
    let repo = sh_repo();
    let o = env.run(&[
        "--json",
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        "alp,old,deb,nope",
    ]);
    assert_code(&o, 2);
    let v = json(&o);
    assert_eq!(v["error"], "machines-not-admitted", "{v}");
    let by = |m: &str| {
        v["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["machine"] == m)
            .unwrap_or_else(|| panic!("no refusal for {m}: {v}"))
            .clone()
    };
    let alp = by("alp");
    assert_eq!(alp["error"], "machine-requirements-absent", "{alp}");
    let msg = alp["message"].as_str().unwrap();
    assert!(
        msg.contains("`setsid` is on PATH but does not run"),
        "{msg}"
    );
    assert!(msg.contains("no SHA-256 tool runs"), "{msg}");
    assert!(!msg.contains("flock"), "flock has its fallback: {msg}");
    let remedy: Vec<&str> = alp["remedy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(remedy.len(), 3, "{remedy:?}");
    assert!(
        remedy[0].ends_with(" alp.invalid 'apk add util-linux'"),
        "{remedy:?}"
    );
    assert!(
        remedy[1].ends_with(" alp.invalid 'apk add coreutils'"),
        "{remedy:?}"
    );
    assert!(
        remedy[2].contains("machine measure --machine alp"),
        "{remedy:?}"
    );
    let old = by("old");
    assert_eq!(old["error"], "machine-requirements-absent", "{old}");
    assert!(
        old["message"]
            .as_str()
            .unwrap()
            .contains("measure it again"),
        "{old}"
    );
    assert_eq!(old["remedy"].as_array().unwrap().len(), 1, "{old}");
    let deb = by("deb");
    assert_eq!(deb["error"], "machine-requirements-absent", "{deb}");
    assert!(
        deb["message"]
            .as_str()
            .unwrap()
            .contains("`git` is 2.20.1, older than 2.31"),
        "{deb}"
    );
    assert!(
        deb["remedy"][0]
            .as_str()
            .unwrap()
            .ends_with("'apt-get install -y git'"),
        "{deb}"
    );
    assert_eq!(by("nope")["error"], "machine-unknown");
    assert!(repo.records().is_empty());
}

/// A Darwin machine without setsid gets a `NO INSTALL COMMAND` line (the
/// table has no route for it), and one that has everything is admitted.
#[test]
fn a_tool_without_an_install_route_says_so() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.mac]\ntransport = \"ssh\"\nhost = \"mac.invalid\"\nworkhome = \"/srv/mac\"\n",
    )
    .unwrap();
    env.write_config(SH_SUITE);
    let ledger = Ledger::open(&Home::at(env.home())).unwrap();
    let mut r = all_ok();
    r.setsid = ToolState::Absent;
    r.sha256sum = ToolState::Absent;
    r.shasum = ToolState::Ok;
    r.proc = ToolState::Absent;
    let mut f = facts("mac", "debian", Some(r));
    f.os = "Darwin".into();
    f.distro = None;
    ledger.append_facts(f).unwrap();
    let repo = sh_repo();
    let o = env.run(&[
        "--json",
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        "mac",
    ]);
    assert_code(&o, 2);
    let v = json(&o);
    assert_eq!(v["error"], "machine-requirements-absent", "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("`setsid` is not on PATH"), "{msg}");
    assert!(
        !msg.contains("SHA-256") && !msg.contains("/proc"),
        "shasum and ps are there: {msg}"
    );
    assert!(
        msg.contains("NO INSTALL COMMAND: saphan knows no install command for `setsid` on the measured platform (darwin)"),
        "{msg}"
    );
}
