//! Admission of fleet machines (`certify --machine`): every refusal of a
//! list at once, remedies in the order they are run with each machine's own
//! workhome, and `--machine @admitted`. Lab hosts are real sshd hosts (m2
//! has no Go); ledger rows come from the real `machine measure` and
//! `machine probe` verbs.

use crate::common;

use crate::common::gomod;
use crate::common::{Env, Repo, assert_code, assert_refused, json, lab::Lab, text};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A saphan home wired to the lab, each machine row with its own workhome.
struct Fleet {
    env: Env,
    work: tempfile::TempDir,
}

impl Fleet {
    fn new(lab: &Lab, hosts: &[&str]) -> Fleet {
        let (env, work) = crate::common::fleet::home(lab, hosts, "admission");
        Fleet { env, work }
    }
    fn workhome(&self, host: &str) -> PathBuf {
        self.work.path().join(host)
    }
    fn workhome_str(&self, host: &str) -> String {
        self.workhome(host).display().to_string()
    }
    fn measure(&self, hosts: &str) {
        assert_code(
            &self.env.run(&["machine", "measure", "--machine", hosts]),
            0,
        );
    }
    /// Probe `cap` at `path` on `hosts`, all with one `--workhome`.
    fn probe(&self, hosts: &str, cap: &str, path: &str, workhome: &str) -> std::process::Output {
        crate::common::fleet::probe(&self.env, hosts, cap, path, workhome)
    }
    fn certify(&self, repo: &Repo, machines: &str, extra: &[&str]) -> std::process::Output {
        crate::common::fleet::certify(&self.env, repo, machines, extra)
    }
}

fn go_repo() -> Repo {
    let (m, mod_text) = gomod::go_mod();
    Repo::new(&[
        (m, &mod_text),
        ("a/a.go", "package a\n\nfunc V() int { return 1 }\n"),
        (
            "a/a_test.go",
            "package a\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {\n\tif V() != 1 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
        ),
    ])
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

/// The `--json` refusal's entry for `machine`.
fn refusal<'a>(v: &'a Value, machine: &str) -> &'a Value {
    v["refusals"]
        .as_array()
        .unwrap_or_else(|| panic!("no refusals: {v}"))
        .iter()
        .find(|r| r["machine"] == machine)
        .unwrap_or_else(|| panic!("no refusal for {machine}: {v}"))
}

fn remedy(r: &Value) -> Vec<String> {
    r["remedy"]
        .as_array()
        .unwrap_or_else(|| panic!("no remedy: {r}"))
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// The probe line for `machine`'s own row.
fn probe_line(f: &Fleet, machine: &str) -> String {
    format!(
        "machine probe --machine {machine} --capability go --declared-path /usr/bin/go --workhome {}",
        f.workhome_str(machine)
    )
}

/// A fleet that was never measured used to be refused one machine at a
/// time (m0; after fixing m0, m1 …), each with `NO INSTALL COMMAND` and
/// the measure line only. Now one refusal names all three, each with its
/// own lines in the order they are run: measure, then probe — the probe
/// line with that machine's own workhome.
#[test]
fn a_never_measured_fleet_is_refused_once_naming_every_machine() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m2"]);
    let repo = go_repo();
    let o = f.certify(&repo, "m0,m1,m2", &[]);
    let err = assert_refused(&o, "verification-toolchain-absent");
    assert!(
        err.contains("3 of 3 machines are not admitted (m0, m1, m2)"),
        "{err}"
    );
    let v = json(&o);
    assert_eq!(v["error"], "verification-toolchain-absent", "{v}");
    assert_eq!(v["refusals"].as_array().unwrap().len(), 3, "{v}");
    for m in ["m0", "m1", "m2"] {
        assert!(
            err.contains(&format!("\n  {m}: verification-toolchain-absent: ")),
            "{err}"
        );
        let r = refusal(&v, m);
        assert_eq!(r["error"], "verification-toolchain-absent", "{r}");
        let lines = remedy(r);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].ends_with(&format!("machine measure --machine {m}")),
            "{lines:?}"
        );
        assert!(lines[1].contains(&probe_line(&f, m)), "{lines:?}");
        for l in &lines {
            assert!(err.contains(&format!("\n    {l}")), "{l}\n{err}");
        }
        assert!(!f.workhome(m).exists(), "something was shipped to {m}");
    }
    assert!(!err.contains("apt-get"), "{err}");
    assert!(repo.records().is_empty());
}

/// Each machine's remedy follows what its rows say: a machine never
/// measured is measured then probed; a probe that said absent gets the
/// install command, then the re-probe line — with its own row's workhome,
/// not the `--workhome` the probe of several machines recorded (m1's path
/// for m2); an admitted machine of the list runs nothing either. A row that
/// is only stale is told to measure and probe again — never to install, and
/// a stale facts row is not "no measured platform".
#[test]
fn remedies_follow_the_ledger_with_each_rows_own_workhome() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m2"]);
    let repo = go_repo();
    f.measure("m1,m2");
    // One probe of m1 and m2 with m1's workhome: m1 present, m2 absent.
    assert_code(
        &f.probe("m1,m2", "go", "/usr/bin/go", &f.workhome_str("m1")),
        1,
    );
    let o = f.certify(&repo, "m0,m1,m2", &[]);
    let err = assert_refused(&o, "verification-toolchain-absent");
    assert!(
        err.contains(
            "2 of 3 machines are not admitted (m0, m2) — nothing was shipped, not even to m1"
        ),
        "{err}"
    );
    let v = json(&o);
    assert_eq!(v["admitted"], serde_json::json!(["m1"]), "{v}");
    let m0 = remedy(refusal(&v, "m0"));
    assert!(m0[0].ends_with("machine measure --machine m0"), "{m0:?}");
    assert!(m0[1].contains(&probe_line(&f, "m0")), "{m0:?}");
    let m2 = remedy(refusal(&v, "m2"));
    assert_eq!(m2.len(), 2, "{m2:?}");
    assert!(
        m2[0].starts_with("ssh -F ") && m2[0].ends_with(" m2 'apt-get install -y golang-go'"),
        "{m2:?}"
    );
    assert!(m2[1].contains(&probe_line(&f, "m2")), "{m2:?}");
    assert!(!m2[1].contains(&f.workhome_str("m1")), "{m2:?}");
    assert!(!f.workhome("m1").exists(), "something was shipped to m1");

    // Only stale: every row is older than a window of one nanosecond. That
    // is its own refusal (issue 40 item 4), and its remedy is the one
    // command made for it — never a measure and a probe line, never an
    // install, never "no measured platform".
    f.env.write_config("[fleet]\nfreshness = \"1ns\"\n");
    let o = f.certify(&repo, "m1", &[]);
    let err = assert_refused(&o, "verification-toolchain-stale");
    assert!(err.contains("its facts row ("), "{err}");
    assert!(
        err.contains("its present row (") && err.contains("older than the freshness window"),
        "{err}"
    );
    assert!(!err.contains("no measured platform"), "{err}");
    assert!(!err.contains("apt-get"), "{err}");
    assert!(!err.contains("NO INSTALL COMMAND"), "{err}");
    assert!(!err.contains("machine probe"), "{err}");
    let v = json(&o);
    let m1 = remedy(refusal(&v, "m1"));
    assert_eq!(m1.len(), 1, "{m1:?}");
    assert!(m1[0].ends_with("machine remeasure --machine m1"), "{m1:?}");
    assert!(repo.records().is_empty());
}

/// The go catalog entry as shipped, with its `version_pattern` spelled
/// differently (the same programs match): every go row probed before is
/// stale ("measured against another catalog entry"), nothing else is.
fn new_go_entry(env: &Env) {
    let shipped = saphan::catalog::EMBEDDED;
    let old = "version_pattern = '^go version go\\d'";
    assert!(shipped.contains(old), "the shipped go row changed");
    let new = shipped.replace(old, "version_pattern = '^go version go[0-9]'");
    std::fs::write(env.home().join("catalog.toml"), new).unwrap();
}

/// Issue 40 item 4: machines whose rows are only stale used to be refused
/// as `verification-toolchain-absent`, with a measure and a probe line per
/// machine. Now one refusal names them, a line each, and gathers them into
/// one `machine remeasure` line; a machine that lacks the program keeps
/// its own install and probe lines; `certify --remeasure` re-measures
/// first, says what it did, then certifies.
#[test]
fn stale_machines_are_one_remeasure_line_and_certify_remeasure_runs_it() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m2"]);
    let repo = go_repo();
    f.measure("m0,m1,m2");
    assert_code(&f.probe("m0,m1,m2", "go", "/usr/bin/go", "/tmp"), 1);
    new_go_entry(&f.env);

    let o = f.certify(&repo, "m0,m1", &[]);
    let err = assert_refused(&o, "verification-toolchain-stale");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 5, "{err}");
    assert!(
        lines[0].contains("2 of 2 machines are not admitted (m0, m1)"),
        "{err}"
    );
    for (i, m) in ["m0", "m1"].iter().enumerate() {
        assert!(
            lines[1 + i].starts_with(&format!(
                "  {m}: verification-toolchain-stale: its present row ("
            )),
            "{err}"
        );
        assert!(
            lines[1 + i].contains("measured against another catalog entry for go"),
            "{err}"
        );
    }
    assert!(
        lines[4].starts_with("    ") && lines[4].ends_with("machine remeasure --machine m0,m1"),
        "{err}"
    );
    let v = json(&o);
    assert!(
        v["remeasure"]
            .as_str()
            .unwrap()
            .ends_with("machine remeasure --machine m0,m1"),
        "{v}"
    );

    // m2 lacks go: its own refusal and lines, beside the gathered line.
    let o = f.certify(&repo, "m0,m1,m2", &[]);
    let err = assert_refused(&o, "machines-not-admitted");
    assert_eq!(err.matches("machine remeasure").count(), 1, "{err}");
    assert!(
        err.contains("machine remeasure --machine m0,m1\n")
            || err.ends_with("machine remeasure --machine m0,m1"),
        "{err}"
    );
    assert!(
        err.contains("\n  m2: verification-toolchain-absent: "),
        "{err}"
    );
    assert!(err.contains("'apt-get install -y golang-go'"), "{err}");
    assert!(repo.records().is_empty());

    // --remeasure needs machines to re-measure.
    let o = f
        .env
        .run(&["certify", "--repo", &repo.path_str(), "--remeasure"]);
    let msg = assert_refused(&o, "usage");
    assert!(msg.contains("--remeasure"), "{msg}");

    // certify --remeasure: the stale rows are probed again, then certified.
    let o = f.certify(&repo, "m0,m1", &["--remeasure"]);
    assert_code(&o, 0);
    let (_, err) = text(&o);
    assert!(
        err.contains(
            "--remeasure: re-measuring what is stale or not present on m0, m1 before admission"
        ),
        "{err}"
    );
    for m in ["m0", "m1"] {
        assert!(
            err.lines().any(|l| l.starts_with(&format!(
                "{m} go: re-probed (stale: measured against a different catalog entry), unchanged (go"
            ))),
            "{err}"
        );
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("{m} facts: fresh, left alone"))),
            "{err}"
        );
    }
    let v = json(&o);
    let machines: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["green", "green"], "{v}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
}

/// `--machine @admitted` used to be refused as an unknown machine. It runs
/// on every admitted machine of machines.toml and says which one was left
/// out (m2 has no Go) and why.
#[test]
fn admitted_selection_runs_on_the_admitted_and_says_who_was_left_out() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m2"]);
    let repo = go_repo();
    f.measure("m0,m1,m2");
    assert_code(&f.probe("m0,m1,m2", "go", "/usr/bin/go", "/tmp"), 1);
    let o = f.certify(&repo, "@admitted", &[]);
    assert_code(&o, 0);
    let (_, err) = text(&o);
    assert!(
        err.contains("--machine @admitted: chose m0, m1 (2 of 3 machines)"),
        "{err}"
    );
    assert!(
        err.contains("left out m2: verification-toolchain-absent: ssh -F ")
            && err.contains("'apt-get install -y golang-go'"),
        "{err}"
    );
    let v = json(&o);
    assert_eq!(
        v["selection"]["chosen"],
        serde_json::json!(["m0", "m1"]),
        "{v}"
    );
    let left = v["selection"]["left_out"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{v}");
    assert_eq!(left[0]["machine"], "m2");
    assert_eq!(left[0]["error"], "verification-toolchain-absent");
    assert!(
        left[0]["message"].as_str().unwrap().contains("says absent"),
        "{v}"
    );
    let machines: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["m0", "m1"], "{v}");
    assert!(!f.workhome("m2").exists(), "something was shipped to m2");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
}

/// `@admitted` with no machine admitted is one refusal listing every
/// machine's reason; mixing it with named machines is refused.
#[test]
fn admitted_selection_with_nothing_admitted_is_refused_with_every_reason() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m2"]);
    let repo = go_repo();
    f.measure("m2");
    let o = f.certify(&repo, "@admitted", &[]);
    let err = assert_refused(&o, "verification-toolchain-absent");
    assert!(
        err.contains("--machine @admitted: no machine of machines.toml is admitted for this suite (2 refused: m0, m2)"),
        "{err}"
    );
    assert!(err.contains("m0: verification-toolchain-absent: "), "{err}");
    assert!(err.contains("the machine was never measured"), "{err}");
    assert!(err.contains("m2: verification-toolchain-absent: "), "{err}");
    assert!(err.contains("it was never probed there"), "{err}");
    let v = json(&o);
    assert_eq!(v["refusals"].as_array().unwrap().len(), 2, "{v}");
    // m2 was measured, go never probed: the probe line alone, no install.
    let m2 = remedy(refusal(&v, "m2"));
    assert_eq!(m2.len(), 1, "{m2:?}");
    assert!(m2[0].contains(&probe_line(&f, "m2")), "{m2:?}");
    assert!(repo.records().is_empty());

    let o = f.certify(&repo, "@admitted,m0", &[]);
    let msg = assert_refused(&o, "machine-list-invalid");
    assert!(
        msg.contains("mixes `@admitted` with named machines"),
        "{msg}"
    );
    // verify-affected runs on one named machine.
    let o = f.env.run(&[
        "verify-affected",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        "HEAD",
        "--machine",
        "@admitted",
    ]);
    let msg = assert_refused(&o, "machine-list-invalid");
    assert!(msg.contains("runs on one named machine"), "{msg}");
}

/// The container class's docker-oci gate used to stop at the first machine
/// without a fresh row. Every machine of the list is named, each with its
/// probe line on its own workhome — before any machine is contacted.
#[test]
fn container_gate_names_every_machine_without_a_fresh_docker_oci_row() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1"]);
    let repo = go_repo();
    let image = format!("sha256:{}", "12".repeat(32));
    let o = f.certify(&repo, "m0,m1", &["--class", "container", "--image", &image]);
    let err = assert_refused(&o, "container-docker-capability-absent");
    assert!(
        err.contains("2 of 2 machines are not admitted (m0, m1)"),
        "{err}"
    );
    let v = json(&o);
    for m in ["m0", "m1"] {
        let r = refusal(&v, m);
        assert_eq!(r["error"], "container-docker-capability-absent", "{r}");
        let lines = remedy(r);
        assert!(
            lines[0].ends_with(&format!("machine measure --machine {m}")),
            "{lines:?}"
        );
        assert!(
            lines.last().unwrap().contains(&format!(
                "machine probe --machine {m} --capability docker-oci --declared-path /usr/bin/docker --workhome {}",
                f.workhome_str(m)
            )),
            "{lines:?}"
        );
        assert!(!lines.iter().any(|l| l.contains("apt-get")), "{lines:?}");
    }
    assert!(repo.records().is_empty());
}

/// A fleet whose ssh config was never written is told to write it first,
/// before the measure line that would fail on its absence (the walk of
/// issue 21 lost a round there). No lab: nothing is reached.
#[test]
fn a_missing_ssh_config_is_the_first_remedy() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"/tmp/w\"\n",
    )
    .unwrap();
    let (m, text) = crate::common::gomod::go_mod();
    let repo = Repo::new(&[(m, text.as_str())]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0"]);
    let err = assert_refused(&o, "verification-toolchain-absent");
    let write = err.find("ssh/config first").expect(&err);
    let measure = err.find("machine measure").expect(&err);
    assert!(write < measure, "the ssh config line comes first: {err}");
    assert!(err.contains("`Host m0`"), "{err}");

    // Once it exists, the line is gone.
    std::fs::create_dir_all(env.home().join("ssh")).unwrap();
    std::fs::write(
        env.home().join("ssh/config"),
        "Host m0\n  HostName 127.0.0.1\n",
    )
    .unwrap();
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0"]);
    let err = assert_refused(&o, "verification-toolchain-absent");
    assert!(!err.contains("ssh/config first"), "{err}");
}
