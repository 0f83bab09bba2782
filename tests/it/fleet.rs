//! The fleet ceremonies through the real binary: catalog, machine rows,
//! measure, probe (with remedies), the signed ledger — on this machine
//! (transport `local`) and on the lab's real sshd hosts (`fleet/lab/`).

use crate::common;

use crate::common::{Env, assert_code, assert_refused, json, lab::Lab, probe_args, text};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Write SAPHAN_HOME/fleet/machines.toml: (id, transport) rows.
fn machines(env: &Env, rows: &[(&str, &str)]) {
    let mut s = String::new();
    for (id, t) in rows {
        s += &format!("[machine.{id}]\ntransport = \"{t}\"\nworkhome = \"/tmp\"\n\n");
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
}

fn result<'a>(v: &'a Value, machine: &str) -> &'a Value {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["machine"] == machine)
        .unwrap_or_else(|| panic!("no result for {machine}: {v}"))
}

fn q(s: &str) -> String {
    // The quoting saphan uses: bare when safe, else single quotes.
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=/,.+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''").replace('!', r"'\!'"))
    }
}

fn reprobe(env: &Env, machine: &str, cap: &str, path: &str) -> String {
    format!(
        "SAPHAN_HOME={} saphan machine probe --machine {machine} --capability {cap} --declared-path {} --workhome /tmp --probed-by tester --workspace ws/main",
        q(&env.home().to_string_lossy()),
        q(path)
    )
}

fn local_install_ids() -> Vec<String> {
    saphan::platform::local_platform_ids()
}

#[test]
fn catalog_show_lists_rows_and_refuses_unknown_by_name() {
    let env = Env::new();
    let o = env.run(&["--json", "catalog", "show", "go"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["kind"], "toolchain");
    assert_eq!(v["install"]["debian"], "apt-get install -y golang-go");
    let o = env.run(&["catalog", "show"]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("python3"));
    let o = env.run(&["catalog", "show", "cobol"]);
    assert_code(&o, 2);
    assert!(
        text(&o)
            .1
            .starts_with("saphan: capability-unknown: `cobol`"),
        "{}",
        text(&o).1
    );
    // The same refusal stops a probe before anything is contacted or written.
    machines(&env, &[("here", "local")]);
    let o = env.run(&probe_args("here", "cobol", "/usr/bin/cobc"));
    assert_code(&o, 2);
    assert_eq!(json(&o)["error"], "capability-unknown");
    assert!(!env.home().join("fleet/ledger.jsonl").exists());
}

#[test]
fn unknown_machine_and_relative_paths_are_refused_by_name() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let o = env.run(&["machine", "show", "m9"]);
    assert_code(&o, 2);
    assert!(
        text(&o)
            .1
            .starts_with("saphan: machine-unknown: no machine `m9`"),
        "{}",
        text(&o).1
    );
    let o = env.run(&["machine", "measure", "--machine", "here,m9"]);
    assert_code(&o, 2);
    assert!(text(&o).1.contains("machine-unknown"));
    let o = env.run(&probe_args("here", "go", "bin/go"));
    assert_code(&o, 2);
    assert_eq!(json(&o)["error"], "declared-path-not-absolute");
    assert!(!env.home().join("fleet/ledger.jsonl").exists());
}

#[test]
fn local_measure_probe_present_absent_with_remedy() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let o = env.run(&["--json", "machine", "measure", "--machine", "here"]);
    assert_code(&o, 0);
    let v = json(&o);
    let f = &result(&v, "here")["facts"];
    assert_eq!(f["os"], "Linux");
    assert!(f["cpus"].as_u64().unwrap() > 0);
    assert!(f["memory_bytes"].as_u64().unwrap() > 0);
    assert!(f["userns"]["method"].is_string());

    // The key is created 0600 on first use.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.home().join("keys/row-signing"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    if common::skip_unless(
        Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go for the present probe",
    ) {
        return;
    }
    let o = env.run(&probe_args("here", "go", "/usr/bin/go"));
    assert_code(&o, 0);
    let r = result(&json(&o), "here").clone();
    assert_eq!(r["outcome"], "present");
    assert!(
        r["row"]["version_output"]
            .as_str()
            .unwrap()
            .starts_with("go version go")
    );
    assert_eq!(r["remedy"], serde_json::json!([]));

    let o = env.run(&probe_args("here", "go", "/opt/nowhere/bin/go"));
    assert_code(&o, 1);
    let r = result(&json(&o), "here").clone();
    assert_eq!(r["outcome"], "absent");
    let ids = local_install_ids();
    let cat = saphan::catalog::Catalog::load(None).unwrap();
    let install = cat
        .get("go")
        .unwrap()
        .install_for(&ids)
        .expect("this machine's platform has a go install command");
    assert_eq!(
        r["remedy"],
        serde_json::json!([install, reprobe(&env, "here", "go", "/opt/nowhere/bin/go")])
    );
    // The plain-text form prints the same two lines under `remedy:`.
    let mut args = probe_args("here", "go", "/opt/nowhere/bin/go");
    args.remove(0);
    let o = env.run(&args);
    assert_code(&o, 1);
    let out = text(&o).0;
    let tail: Vec<&str> = out.lines().skip_while(|l| *l != "remedy:").collect();
    assert_eq!(tail.len(), 3, "{out}");
    assert_eq!(tail[1].trim(), install);

    // `machine show` says which rows are fresh.
    let o = env.run(&["--json", "machine", "show", "here"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["facts"]["fresh"], true);
    let go = &v["capabilities"][0];
    assert_eq!(go["capability"], "go");
    assert_eq!(go["outcome"], "absent");
    assert_eq!(go["fresh"], true);

    // A catalog whose go entry changed makes the row stale.
    let changed = saphan::catalog::EMBEDDED.replace(
        "version = [\"{path}\", \"version\"]",
        "version = [\"{path}\", \"env\", \"GOROOT\"]",
    );
    assert_ne!(changed, saphan::catalog::EMBEDDED);
    let cat_file = env.home().join("changed.toml");
    std::fs::write(&cat_file, changed).unwrap();
    let o = env.run(&[
        "--json",
        "--catalog",
        cat_file.to_str().unwrap(),
        "machine",
        "show",
        "here",
    ]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["capabilities"][0]["fresh"], false);
    assert!(
        v["capabilities"][0]["freshness"]
            .as_str()
            .unwrap()
            .contains("different catalog entry")
    );
}

#[test]
fn unmeasured_machine_remedy_says_no_install_command() {
    let env = Env::new();
    machines(&env, &[("fresh-box", "local")]);
    let o = env.run(&probe_args("fresh-box", "go", "/opt/nowhere/go"));
    assert_code(&o, 1);
    let r = result(&json(&o), "fresh-box").clone();
    let remedy: Vec<String> = serde_json::from_value(r["remedy"].clone()).unwrap();
    assert_eq!(remedy.len(), 2);
    assert!(remedy[0].starts_with("NO INSTALL COMMAND"), "{remedy:?}");
    assert!(!remedy[0].contains("apt-get"));
    assert_eq!(
        remedy[1],
        format!(
            "SAPHAN_HOME={} saphan machine measure --machine fresh-box",
            q(&env.home().to_string_lossy())
        )
    );
    // The row carries the same remedy, and no facts.
    assert_eq!(r["row"]["remedy"], r["remedy"]);
    assert_eq!(r["row"]["facts"], Value::Null);
}

#[test]
fn hand_edited_ledger_row_is_refused_as_tampered() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    assert_code(&env.run(&["machine", "show", "here"]), 0);
    let ledger = env.home().join("fleet/ledger.jsonl");
    let text0 = std::fs::read_to_string(&ledger).unwrap();
    let lines: Vec<&str> = text0.lines().collect();
    assert_eq!(lines.len(), 2);
    // Claim more CPUs on the second row.
    let v: Value = serde_json::from_str(lines[1]).unwrap();
    let cpus = v["cpus"].as_u64().unwrap();
    let edited = lines[1].replace(
        &format!("\"cpus\":{cpus}"),
        &format!("\"cpus\":{}", cpus + 62),
    );
    assert_ne!(edited, lines[1]);
    std::fs::write(&ledger, format!("{}\n{edited}\n", lines[0])).unwrap();
    for args in [
        vec!["machine", "show", "here"],
        vec!["machine", "measure", "--machine", "here"],
        vec![
            "machine",
            "probe",
            "--machine",
            "here",
            "--capability",
            "go",
            "--declared-path",
            "/usr/bin/go",
            "--workhome",
            "/tmp",
            "--probed-by",
            "t",
            "--workspace",
            "w",
        ],
    ] {
        let o = env.run(&args);
        assert_code(&o, 2);
        let err = text(&o).1;
        assert!(err.starts_with("saphan: ledger-row-tampered: "), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }
    // Nothing was appended behind the refusal.
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 2);
}

#[test]
fn hostile_declared_path_reaches_the_machine_as_one_literal_path() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    // Run from `dir`: were the path ever spliced into a shell, `touch` would
    // leave PWNED here.
    let canary = dir.path().join("PWNED");
    let hostile = format!("{}/it's a \"go\"; touch PWNED #", dir.path().display());
    let run = |path: &str| {
        env.cmd()
            .current_dir(dir.path())
            .args(probe_args("here", "go", path))
            .output()
            .unwrap()
    };
    let o = run(&hostile);
    assert_code(&o, 1);
    let r = result(&json(&o), "here").clone();
    assert_eq!(r["outcome"], "absent");
    assert_eq!(r["row"]["inputs"]["declared_path"], hostile.as_str());
    assert_eq!(
        r["row"]["reason_detail"],
        format!("{hostile} does not exist on here")
    );
    assert!(!canary.exists());
    // Create exactly that program: now it is present and runs.
    std::fs::write(&hostile, "#!/bin/sh\necho \"go $* go1.19 hostile\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hostile, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run(&hostile);
    assert_code(&o, 0);
    let r = result(&json(&o), "here").clone();
    assert_eq!(r["outcome"], "present");
    assert_eq!(r["row"]["version_output"], "go version go1.19 hostile");
    assert!(!canary.exists());
}

// ---------------------------------------------------------------- the lab

struct Fleet {
    lab: Lab,
    env: Env,
}

fn lab_fleet(n: usize) -> Option<Fleet> {
    let lab = Lab::start(n)?;
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let ids = lab.hosts();
    let rows: Vec<(&str, &str)> = ids.iter().map(|h| (h.as_str(), "ssh")).collect();
    machines(&env, &rows);
    Some(Fleet { lab, env })
}

fn ssh_install(env: &Env, host: &str, install: &str) -> String {
    format!(
        "ssh -F {} {host} '{}'",
        q(&env.home().join("ssh/config").to_string_lossy()),
        install.replace('\'', r"'\''")
    )
}

#[test]
fn lab_measure_all_four_then_probe_go_present_and_absent() {
    let Some(f) = lab_fleet(4) else { return };
    let env = &f.env;
    let o = env.run(&["--json", "machine", "measure", "--machine", "m0,m1,m2,m3"]);
    assert_code(&o, 0);
    let v = json(&o);
    for h in ["m0", "m1", "m2"] {
        let r = result(&v, h);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["facts"]["distro"]["id"], "debian", "{r}");
    }
    let m3 = result(&v, "m3");
    assert_eq!(m3["facts"]["distro"]["id"], "ubuntu");
    assert_eq!(m3["facts"]["distro"]["version_id"], "22.04");
    assert_eq!(m3["platform_ids"], serde_json::json!(["ubuntu", "debian"]));

    let o = env.run(&probe_args("m0,m2", "go", "/usr/bin/go"));
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(result(&v, "m0")["outcome"], "present");
    let m2 = result(&v, "m2");
    assert_eq!(m2["outcome"], "absent");
    assert_eq!(
        m2["remedy"],
        serde_json::json!([
            ssh_install(env, "m2", "apt-get install -y golang-go"),
            reprobe(env, "m2", "go", "/usr/bin/go"),
        ])
    );
    // The install command really reaches m2 through that config (we do not
    // run apt-get: check the ssh half with a harmless command instead).
    let o = std::process::Command::new("ssh")
        .arg("-F")
        .arg(env.home().join("ssh/config"))
        .args(["m2", "test ! -e /usr/bin/go && hostname"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "m2");
}

/// Issue 40 item 6: `machine probe` asks only what it cannot know. With
/// no `--workhome`, `--probed-by` or `--workspace`, one probe of machines
/// with different workhomes records each machine row's own workhome, the
/// login user as the prober and no workspace; the remedy's re-probe line
/// names that machine's workhome and no workspace. An empty `--workhome`
/// given on purpose is still refused.
#[test]
fn probe_defaults_each_rows_workhome_the_login_user_and_no_workspace() {
    let Some(lab) = Lab::shared() else { return };
    let (env, work) = crate::common::fleet::home(lab, &["m0", "m2"], "probe-defaults");
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m2"]), 0);
    let o = env.run(&[
        "--json",
        "machine",
        "probe",
        "--machine",
        "m0,m2",
        "--capability",
        "go",
        "--declared-path",
        "/usr/bin/go",
    ]);
    assert_code(&o, 1);
    let v = json(&o);
    let user = saphan::fleet::spell::login_user();
    for h in ["m0", "m2"] {
        let r = result(&v, h);
        assert_eq!(
            r["row"]["inputs"],
            serde_json::json!({
                "declared_path": "/usr/bin/go",
                "workhome": work.path().join(h).to_str().unwrap(),
                "probed_by": user,
                "workspace": "",
            }),
            "{r}"
        );
    }
    assert_eq!(result(&v, "m0")["outcome"], "present");
    let m2 = result(&v, "m2");
    assert_eq!(m2["outcome"], "absent");
    let line = m2["remedy"][1].as_str().unwrap();
    assert!(
        line.ends_with(&format!(
            "machine probe --machine m2 --capability go --declared-path /usr/bin/go --workhome {} --probed-by {}",
            q(work.path().join("m2").to_str().unwrap()),
            q(&user)
        )),
        "{line}"
    );
    let o = env.run(&[
        "machine",
        "probe",
        "--machine",
        "m0",
        "--capability",
        "go",
        "--declared-path",
        "/usr/bin/go",
        "--workhome",
        "",
    ]);
    assert_refused(&o, "workhome-not-absolute");
}

#[test]
fn lab_stopped_and_partitioned_hosts_fail_by_name_while_others_succeed() {
    let Some(f) = lab_fleet(4) else { return };
    let env = &f.env;
    assert_code(
        &env.run(&["machine", "measure", "--machine", "m0,m1,m2,m3"]),
        0,
    );
    f.lab.stop("m2");
    f.lab.partition("m3");
    let budget = Duration::from_secs(8);
    let mut args = probe_args("m0,m1,m2,m3", "go", "/usr/bin/go");
    args.extend(["--timeout", "8s"]);
    let t0 = Instant::now();
    let o = env.run(&args);
    let took = t0.elapsed();
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(result(&v, "m0")["outcome"], "present");
    assert_eq!(result(&v, "m1")["outcome"], "present");
    let m2 = result(&v, "m2");
    assert_eq!(m2["ok"], false);
    let m3 = result(&v, "m3");
    assert_eq!(m3["ok"], false);
    eprintln!("m2: {m2}\nm3: {m3}\ntook {took:?}");
    // Stopped: refused at once. Partitioned: the lab's ConnectTimeout (2 s).
    assert_eq!(m2["error"], "host-unreachable");
    assert!(m2["message"].as_str().unwrap().starts_with("m2: "), "{m2}");
    assert!(m2["message"].as_str().unwrap().contains("refused"), "{m2}");
    assert_eq!(m3["error"], "host-unreachable");
    assert!(m3["message"].as_str().unwrap().starts_with("m3: "), "{m3}");
    assert!(
        m3["message"].as_str().unwrap().contains("timed out"),
        "{m3}"
    );
    // Generous bound: well inside the --timeout budget.
    assert!(took < budget, "{took:?}");
    // Only the reachable machines got rows.
    let ledger = std::fs::read_to_string(env.home().join("fleet/ledger.jsonl")).unwrap();
    let caps: Vec<Value> = ledger
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "capability")
        .collect();
    let mut on: Vec<&str> = caps
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    on.sort();
    assert_eq!(on, ["m0", "m1"]);
    // Measure fails the same way, by name, for the same two.
    let o = env.run(&[
        "--json",
        "machine",
        "measure",
        "--machine",
        "m0,m1,m2,m3",
        "--timeout",
        "8s",
    ]);
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(result(&v, "m0")["ok"], true);
    assert_eq!(result(&v, "m3")["ok"], false);
}

#[test]
fn lab_hostile_declared_path_is_one_literal_path_on_the_remote_side() {
    let Some(f) = lab_fleet(1) else { return };
    let env = &f.env;
    assert_code(&env.run(&["machine", "measure", "--machine", "m0"]), 0);
    let dir = tempfile::tempdir().unwrap();
    // The remote shell starts in m0's own /root (the lab's home_dir).
    let canary_path = f.lab.home_dir("m0").join("PWNED");
    let canary = canary_path.as_path();
    let _ = std::fs::remove_file(canary);
    let hostile = format!("{}/it's a \"go\"; touch PWNED #", dir.path().display());
    let o = env.run(&probe_args("m0", "go", &hostile));
    assert_code(&o, 1);
    let r = result(&json(&o), "m0").clone();
    assert_eq!(r["outcome"], "absent");
    assert_eq!(
        r["row"]["reason_detail"],
        format!("{hostile} does not exist on m0")
    );
    assert!(!canary.exists());
    // m0 shares this machine's /tmp: create exactly that program.
    std::fs::write(&hostile, "#!/bin/sh\necho \"go $* go1.19 hostile\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hostile, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = env.run(&probe_args("m0", "go", &hostile));
    assert_code(&o, 0);
    let r = result(&json(&o), "m0").clone();
    assert_eq!(r["row"]["version_output"], "go version go1.19 hostile");
    assert!(!canary.exists());
}

#[test]
fn several_capabilities_share_one_probe_and_each_gets_its_row() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    let sh = "/bin/sh";
    let o = env.run(&[
        "--json",
        "machine",
        "probe",
        "--machine",
        "here",
        "--capability",
        "git,python3",
        "--declared-path",
        "/opt/no/git",
        "--declared-path",
        sh,
        "--workhome",
        "/tmp",
        "--probed-by",
        "tester",
        "--workspace",
        "ws/main",
    ]);
    // sh --version fails on dash (exit 2) but runs on bash: either way a row.
    let v = json(&o);
    let rs = v["results"].as_array().unwrap();
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0]["capability"], "git");
    assert_eq!(rs[0]["outcome"], "absent");
    assert_eq!(
        rs[0]["remedy"][1],
        reprobe(&env, "here", "git", "/opt/no/git")
    );
    assert_eq!(rs[1]["capability"], "python3");
    assert_eq!(rs[1]["row"]["inputs"]["declared_path"], sh);
    let o = env.run(&["--json", "machine", "show", "here"]);
    let caps: Vec<String> = json(&o)["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["capability"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(caps, ["git", "python3"]);
    // One declared path per capability, or nothing happens.
    let o = env.run(&[
        "machine",
        "probe",
        "--machine",
        "here",
        "--capability",
        "git,python3",
        "--declared-path",
        "/usr/bin/git",
        "--workhome",
        "/tmp",
        "--probed-by",
        "t",
        "--workspace",
        "w",
    ]);
    assert_code(&o, 2);
    assert!(
        text(&o)
            .1
            .starts_with("saphan: usage: 2 capabilities but 1 --declared-path"),
        "{}",
        text(&o).1
    );
}

#[test]
fn freshness_window_comes_from_config() {
    let env = Env::new();
    machines(&env, &[("a", "local"), ("b", "local")]);
    // Without a terminal: one plain result line per machine.
    let o = env.run(&["machine", "measure", "--machine", "a,b"]);
    assert_code(&o, 0);
    let out = text(&o).0;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("a  measured  Linux"), "{out}");
    assert!(lines[1].starts_with("b  measured  Linux"), "{out}");
    let o = env.run(&["--json", "machine", "show", "a"]);
    let v = json(&o);
    assert_eq!(v["freshness_window"], "1day");
    assert_eq!(v["facts"]["fresh"], true);
    // A 1 ms window: once the clock is past measured_at + 1 ms, stale.
    let at = saphan::clock::parse_rfc3339(v["facts"]["measured_at"].as_str().unwrap()).unwrap();
    while time::OffsetDateTime::now_utc() - at <= time::Duration::milliseconds(2) {
        std::thread::yield_now();
    }
    env.write_config("[fleet]\nfreshness = \"1ms\"\n");
    let o = env.run(&["--json", "machine", "show", "a"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["facts"]["fresh"], false);
    let o = env.run(&["machine", "show", "a"]);
    assert!(
        text(&o).0.contains("facts (stale, measured "),
        "{}",
        text(&o).0
    );
}

fn measure_here(env: &Env, times: usize) -> std::path::PathBuf {
    for _ in 0..times {
        assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    }
    env.home().join("fleet/ledger.jsonl")
}

fn refused_as(env: &Env, args: &[&str], name: &str) -> String {
    common::assert_refused(&env.run(args), name)
}

#[test]
fn reordered_deleted_duplicated_or_truncated_ledger_lines_are_refused() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let ledger = measure_here(&env, 3);
    let text0 = std::fs::read_to_string(&ledger).unwrap();
    let l: Vec<&str> = text0.lines().collect();
    assert_eq!(l.len(), 3);
    for (i, line) in l.iter().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["seq"], (i + 1) as u64, "{line}");
        assert_eq!(v["prev"].as_str().unwrap().len(), 64);
    }
    assert!(env.home().join("fleet/ledger.head").exists());
    let show = ["machine", "show", "here"];
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "swap",
            format!("{}\n{}\n{}\n", l[0], l[2], l[1]),
            "ledger-chain-broken",
            "line 2",
        ),
        (
            "delete-middle",
            format!("{}\n{}\n", l[0], l[2]),
            "ledger-chain-broken",
            "line 2",
        ),
        (
            "duplicate",
            format!("{}\n{}\n{}\n{}\n", l[0], l[1], l[2], l[2]),
            "ledger-chain-broken",
            "line 4",
        ),
        (
            "delete-first",
            format!("{}\n{}\n", l[1], l[2]),
            "ledger-chain-broken",
            "line 1",
        ),
        (
            "drop-tail",
            format!("{}\n{}\n", l[0], l[1]),
            "ledger-head-mismatch",
            "3",
        ),
        ("emptied", String::new(), "ledger-head-mismatch", "head"),
    ];
    for (what, text, name, needle) in cases {
        std::fs::write(&ledger, &text).unwrap();
        let err = refused_as(&env, &show, name);
        assert!(err.contains(needle), "{what}: {err}");
        // And nothing is appended behind the refusal.
        refused_as(&env, &["machine", "measure", "--machine", "here"], name);
        assert_eq!(std::fs::read_to_string(&ledger).unwrap(), text, "{what}");
    }
    std::fs::write(&ledger, &text0).unwrap();
    assert_code(&env.run(&show), 0);
}

#[test]
fn concurrent_measures_keep_one_unbroken_chain() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let n = 6;
    let children: Vec<_> = (0..n)
        .map(|_| {
            env.cmd()
                .args(["machine", "measure", "--machine", "here"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let text0 = std::fs::read_to_string(env.home().join("fleet/ledger.jsonl")).unwrap();
    let seqs: Vec<u64> = text0
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=n as u64).collect::<Vec<_>>());
    assert_code(&env.run(&["machine", "show", "here"]), 0);
}

#[test]
fn torn_last_line_is_refused_and_never_appended_onto() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let ledger = measure_here(&env, 2);
    let head = env.home().join("fleet/ledger.head");
    let head2 = std::fs::read(&head).unwrap();
    let good = std::fs::read(&ledger).unwrap();
    measure_here(&env, 1);
    // A crash mid-append: half the third line written, the head not yet.
    let full = std::fs::read(&ledger).unwrap();
    let torn = &full[..good.len() + (full.len() - good.len()) / 2];
    std::fs::write(&ledger, torn).unwrap();
    std::fs::write(&head, &head2).unwrap();
    for args in [
        vec!["machine", "measure", "--machine", "here"],
        vec!["machine", "show", "here"],
    ] {
        let err = refused_as(&env, &args, "ledger-row-torn");
        assert!(err.contains("line 3"), "{err}");
        assert!(
            err.contains(&format!("truncate -s {} ", good.len())),
            "{err}"
        );
        assert_eq!(std::fs::read(&ledger).unwrap(), torn);
    }
    // The printed fix works.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&ledger)
        .unwrap()
        .set_len(good.len() as u64)
        .unwrap();
    assert_code(&env.run(&["machine", "show", "here"]), 0);
    measure_here(&env, 1);
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 3);
}

#[test]
fn signing_key_exposed_missing_and_never_created_by_readers() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let key = env.home().join("keys/row-signing");
    // Readers never create a key.
    assert_code(&env.run(&["machine", "list"]), 0);
    assert_code(&env.run(&["machine", "show", "here"]), 0);
    assert!(
        !key.exists(),
        "a read-only command created {}",
        key.display()
    );
    measure_here(&env, 1);
    assert!(key.exists());
    let dir_mode = std::fs::metadata(key.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let show = ["machine", "show", "here"];
    // A key others can read.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = refused_as(&env, &show, "row-signing-key-exposed");
    assert!(
        err.contains(&format!("chmod 600 {}", key.display())),
        "{err}"
    );
    refused_as(
        &env,
        &["machine", "measure", "--machine", "here"],
        "row-signing-key-exposed",
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A key directory others can write.
    let dir = key.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = refused_as(&env, &show, "row-signing-key-exposed");
    assert!(
        err.contains(&format!("chmod 700 {}", dir.display())),
        "{err}"
    );
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_code(&env.run(&show), 0);
    // The key gone while the ledger holds rows: missing, not tampered, and no new key.
    std::fs::remove_file(&key).unwrap();
    refused_as(&env, &show, "row-signing-key-missing");
    refused_as(
        &env,
        &["machine", "measure", "--machine", "here"],
        "row-signing-key-missing",
    );
    assert!(!key.exists());
}

#[test]
fn saphan_home_fleet_or_keys_writable_by_others_or_foreign_owned_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let ledger = measure_here(&env, 1);
    let before = std::fs::read(&ledger).unwrap();
    let show = ["machine", "show", "here"];
    let measure = ["machine", "measure", "--machine", "here"];
    let home = env.home().to_path_buf();
    let fleet = home.join("fleet");
    for dir in [&home, &fleet] {
        let orig = std::fs::metadata(dir).unwrap().permissions().mode() & 0o7777;
        for (mode, needle) in [
            (0o777, "mode 0777"),
            (0o775, "mode 0775"),
            (0o1777, "sticky"),
        ] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
            for args in [&show[..], &measure[..]] {
                let err = refused_as(&env, args, "saphan-home-exposed");
                assert!(err.contains(needle), "{mode:o}: {err}");
                assert!(
                    err.contains(&format!("chmod go-w {}", dir.display())),
                    "{err}"
                );
            }
            assert_eq!(std::fs::read(&ledger).unwrap(), before, "nothing appended");
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(orig)).unwrap();
        assert_code(&env.run(&show), 0);
    }
    // Another user's directory, even with a safe mode.
    if common::skip_unless(
        nix::unistd::geteuid().is_root(),
        "ownership part needs root to chown",
    ) {
        return;
    }
    let keys = home.join("keys");
    for dir in [&home, &fleet, &keys] {
        std::os::unix::fs::chown(dir, Some(65534), None).unwrap();
        for args in [&show[..], &measure[..]] {
            let err = refused_as(&env, args, "saphan-home-exposed");
            assert!(err.contains("owned by uid 65534"), "{err}");
            assert!(err.contains(&format!("chown 0 {}", dir.display())), "{err}");
        }
        std::os::unix::fs::chown(dir, Some(0), None).unwrap();
    }
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    assert_code(&env.run(&measure), 0);
}

#[test]
fn rows_past_an_old_signed_head_are_accepted_with_a_warning_then_re_signed() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let ledger = measure_here(&env, 2);
    let head = env.home().join("fleet/ledger.head");
    let head2 = std::fs::read(&head).unwrap();
    measure_here(&env, 2);
    let o = env.run(&["machine", "show", "here"]);
    assert_code(&o, 0);
    assert!(!text(&o).1.contains("warning"), "{}", text(&o).1);
    // An older head (a crash between append and head write looks the same).
    std::fs::write(&head, &head2).unwrap();
    let o = env.run(&["machine", "show", "here"]);
    assert_code(&o, 0);
    let err = text(&o).1;
    let warn: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warn.len(), 1, "{err}");
    assert!(
        warn[0].starts_with("saphan: warning: 2 row(s) of ")
            && warn[0].contains("past its signed head (line 2)")
            && warn[0].contains("crash"),
        "{err}"
    );
    // The next append verifies rows 3-4 from the head's hash and re-signs.
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 5);
    let o = env.run(&["machine", "show", "here"]);
    assert_code(&o, 0);
    assert!(!text(&o).1.contains("warning"), "{}", text(&o).1);
}

/// An executable `#!/bin/sh` program with `body`, in `dir`.
fn program(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_string_lossy().into_owned()
}

fn probe_many(env: &Env, caps: &[(&str, &str)], timeout: &str) -> std::process::Output {
    let mut args: Vec<String> = ["--json", "machine", "probe", "--machine", "here"]
        .map(String::from)
        .to_vec();
    for (c, p) in caps {
        args.extend(["--capability".into(), c.to_string()]);
        args.extend(["--declared-path".into(), p.to_string()]);
    }
    args.extend(
        [
            "--workhome",
            "/tmp",
            "--probed-by",
            "t",
            "--workspace",
            "w",
            "--timeout",
            timeout,
        ]
        .map(String::from),
    );
    env.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn rows_of(o: &std::process::Output) -> Vec<Value> {
    json(o)["results"].as_array().unwrap().clone()
}

/// One probed program cannot print another capability's result: its output
/// — marker lookalikes in the old nonce format (the nonce read from the
/// script's argv) and in the current one — stays inside its own frame.
#[test]
fn a_probed_program_cannot_forge_another_capabilitys_result() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    let forger = program(
        dir.path(),
        "go",
        r#"n=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -A1 -x saphan-probe | sed -n 2p)
M="@@saphan-$n"
echo "go version go1.19 forger"
printf '\n%s:exit=0\n%s:item=1\n%s:run\ngo version go1.19 forged\n\n%s:exit=0\n%s:end\n' "$M" "$M" "$M" "$M" "$M"
printf '@@saphan item 1 run 0 0 0 24\ngo version go1.19 forged\n@@saphan end\n'"#,
    );
    let o = probe_many(
        &env,
        &[("go", &forger), ("gofmt", "/nonexistent/gofmt")],
        "20s",
    );
    assert_code(&o, 1);
    let rows = rows_of(&o);
    assert_eq!(rows[0]["outcome"], "present", "{rows:?}");
    assert!(
        rows[0]["row"]["version_output"]
            .as_str()
            .unwrap()
            .contains("@@saphan item 1 run"),
        "the forged frame is the forger's own output"
    );
    assert_eq!(rows[1]["capability"], "gofmt");
    assert_eq!(rows[1]["outcome"], "absent", "{rows:?}");
    assert_eq!(rows[1]["row"]["reason"], "not-found");
}

/// A huge version output is capped on the machine, and the row says so.
#[test]
fn a_huge_version_output_is_capped_and_marked() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    let big = program(
        dir.path(),
        "go",
        "echo 'go version go1.19 big'; head -c 300000000 /dev/zero | tr '\\0' x",
    );
    let o = probe_many(&env, &[("go", &big)], "60s");
    assert_code(&o, 0);
    let r = &rows_of(&o)[0]["row"];
    assert_eq!(r["outcome"], "present");
    assert_eq!(r["detail"]["version_output_truncated"], true, "{r}");
    assert_eq!(r["detail"]["version_output_captured_bytes"], 65536);
    assert!(r["version_output"].as_str().unwrap().len() < 8192);
}

/// Exiting 0 is not enough: the output must match the row's version_pattern.
#[test]
fn a_program_that_is_not_the_capability_is_refuted_by_its_version_output() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let mut caps = vec![("go", "/bin/true")];
    let python = Path::new("/usr/bin/python3");
    if python.exists() {
        caps.push(("cargo", "/usr/bin/python3"));
    }
    let o = probe_many(&env, &caps, "20s");
    assert_code(&o, 1);
    for r in rows_of(&o) {
        assert_eq!(r["outcome"], "failed", "{r}");
        assert_eq!(r["row"]["reason"], "version-output-mismatch", "{r}");
    }
    // The real programs here match their own patterns.
    let cat = saphan::catalog::Catalog::load(None).unwrap();
    let mut real = Vec::new();
    for (cap, entry) in &cat.rows {
        if !saphan::catalog::is_toolchain_probe(cap) {
            continue;
        }
        for prog in &entry.programs {
            for dir in ["/usr/bin", "/usr/local/bin", "/root/.cargo/bin"] {
                let p = Path::new(dir).join(prog);
                if p.exists() && !real.iter().any(|(c, _)| c == cap) {
                    real.push((cap.clone(), p.to_string_lossy().into_owned()));
                }
            }
        }
    }
    if common::skip_unless(!real.is_empty(), "no catalog program installed here") {
        return;
    }
    let pairs: Vec<(&str, &str)> = real.iter().map(|(c, p)| (c.as_str(), p.as_str())).collect();
    let o = probe_many(&env, &pairs, "120s");
    for r in rows_of(&o) {
        assert_eq!(r["outcome"], "present", "{}: {r}", r["capability"]);
    }
    assert_code(&o, 0);
}

/// A version command that ignores SIGTERM is killed and named; a program
/// that exits 124 by itself is not called a timeout.
#[test]
fn version_command_timeouts_are_named_and_killed() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    let stubborn = program(dir.path(), "go", "trap '' TERM; sleep 60");
    let started = Instant::now();
    let o = probe_many(&env, &[("go", &stubborn)], "8s");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_code(&o, 1);
    let r = &rows_of(&o)[0];
    assert_eq!(r["row"]["reason"], "version-command-timed-out", "{r}");
    let own = program(dir.path(), "go124", "echo 'go version go1.19'; exit 124");
    let o = probe_many(&env, &[("go", &own)], "8s");
    assert_code(&o, 1);
    let r = &rows_of(&o)[0];
    assert_eq!(r["row"]["reason"], "version-command-failed", "{r}");
    assert!(
        r["row"]["reason_detail"]
            .as_str()
            .unwrap()
            .contains("exited 124"),
        "{r}"
    );
}

#[test]
fn empty_machine_lists_dot_ids_and_relative_catalogs() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    for args in [
        probe_args(",", "go", "/usr/bin/go"),
        vec!["machine", "measure", "--machine", ""],
        vec!["machine", "measure", "--machine", ",,"],
    ] {
        let o = env.run(&args);
        assert_refused(&o, "usage");
    }
    assert!(!env.home().join("fleet/ledger.jsonl").exists());
    // `.` and `..` are not machine ids.
    for id in [".", ".."] {
        std::fs::write(
            env.home().join("fleet/machines.toml"),
            format!("[machine.\"{id}\"]\ntransport = \"local\"\nworkhome = \"/tmp\"\n"),
        )
        .unwrap();
        let o = env.run(&["machine", "list"]);
        assert_refused(&o, "machines-malformed");
    }
    // A relative --catalog is printed absolute in the remedy.
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cat.toml"), saphan::catalog::EMBEDDED).unwrap();
    let mut args = vec!["--catalog", "cat.toml"];
    args.extend(probe_args("here", "go", "/nonexistent/go"));
    let o = env
        .cmd()
        .current_dir(dir.path())
        .args(&args)
        .output()
        .unwrap();
    assert_code(&o, 1);
    let r = result(&json(&o), "here").clone();
    let abs = dir.path().canonicalize().unwrap().join("cat.toml");
    let remedy = r["remedy"].to_string();
    assert!(
        remedy.contains(&format!("--catalog {}", abs.display()))
            || remedy.contains(&format!(
                "--catalog {}",
                dir.path().join("cat.toml").display()
            )),
        "{remedy}"
    );
}

/// Ctrl-C during `machine probe` kills the version command it started
/// (even one that ignores SIGTERM, in `timeout`'s own process group) and
/// records nothing.
#[test]
fn ctrl_c_during_probe_kills_the_version_command_and_records_nothing() {
    let env = Env::new();
    machines(&env, &[("here", "local")]);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let stubborn = program(
        dir.path(),
        "go",
        &format!(
            "echo $$ > {}.tmp && mv {0}.tmp {0}; trap '' TERM INT; sleep 120",
            pidfile.display()
        ),
    );
    let child = env
        .cmd()
        .args(probe_args("here", "go", &stubborn))
        .args(["--timeout", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the version command to be running.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pidfile.exists() {
        assert!(
            Instant::now() < deadline,
            "the version command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(result(&v, "here")["error"], "interrupted", "{v}");
    // The version command is gone (a zombie until reaped counts as gone).
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(!alive, "version command {pid} survived Ctrl-C");
    assert!(!env.home().join("fleet/ledger.jsonl").exists());
}
