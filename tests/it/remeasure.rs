//! `machine remeasure` on real lab hosts (issue 21.3), and the pinned
//! catalog every command picks up from SAPHAN_HOME/catalog.toml (issue 21.4)
//! against the real Docker engine.

use crate::common;

use crate::common::{Env, Repo, assert_code, json, lab::Lab, probe_args, text};
use serde_json::Value;
use std::path::Path;

/// A lab of `n` hosts with one ssh machine row per host in `env`'s home.
fn lab_env(n: usize) -> Option<(Lab, Env)> {
    let lab = Lab::start(n)?;
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let mut s = String::new();
    for h in lab.hosts() {
        s += &format!("[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"/tmp\"\n\n");
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
    Some((lab, env))
}

/// Write `/root/bin/go` on `host` (each lab host has its own /root): a
/// script that says it is `version`.
fn fake_go(lab: &Lab, host: &str, version: &str) {
    let dir = lab.home_dir(host).join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("go");
    std::fs::write(
        &p,
        format!("#!/bin/sh\necho \"go version {version} linux/amd64\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The capability rows of the ledger, in order.
fn capability_rows(env: &Env) -> Vec<Value> {
    std::fs::read_to_string(env.home().join("fleet/ledger.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "capability")
        .collect()
}

/// The embedded catalog with go's `version_pattern` spelled differently (the
/// same programs match): every go row measured before is "measured against a
/// different catalog entry", every other row stays fresh.
fn home_catalog_with_new_go_entry(env: &Env) {
    let shipped = saphan::catalog::EMBEDDED;
    let old = "version_pattern = '^go version go\\d'";
    assert!(shipped.contains(old), "the shipped go row changed");
    let new = shipped.replace(old, "version_pattern = '^go version go[0-9]'");
    std::fs::write(env.home().join("catalog.toml"), new).unwrap();
}

#[test]
fn stale_rows_are_reprobed_with_their_recorded_inputs_fresh_ones_left_alone_and_a_stopped_host_named()
 {
    let Some((lab, env)) = lab_env(3) else { return };
    for h in ["m0", "m1", "m2"] {
        fake_go(&lab, h, "go1.19.8");
    }
    assert_code(
        &env.run(&["machine", "measure", "--machine", "m0,m1,m2"]),
        0,
    );
    assert_code(&env.run(&probe_args("m0,m1,m2", "go", "/root/bin/go")), 0);
    assert_code(&env.run(&probe_args("m0,m1", "git", "/usr/bin/git")), 0);
    // python3 is probed on m0 only: m1 has no recorded inputs for it.
    assert_code(
        &env.run(&probe_args("m0", "python3", "/usr/bin/python3")),
        0,
    );

    // go's catalog entry changes; m1's go is upgraded; m2 is stopped.
    home_catalog_with_new_go_entry(&env);
    fake_go(&lab, "m1", "go1.21.0");
    lab.stop("m2");
    let before = capability_rows(&env).len();

    let o = env.run(&["machine", "remeasure", "--timeout", "10s"]);
    let (out, err) = text(&o);
    assert_code(&o, 3);
    eprintln!("{out}\n{err}");
    let has = |l: &str| assert!(out.lines().any(|x| x == l), "no line `{l}` in:\n{out}");
    let starts = |l: &str| {
        assert!(
            out.lines().any(|x| x.starts_with(l)),
            "no line starting `{l}` in:\n{out}"
        )
    };
    has("m1 go: go1.19.8 → go1.21.0");
    has(
        "m0 go: re-probed (stale: measured against a different catalog entry), unchanged (go1.19.8)",
    );
    starts("m0 facts: fresh, left alone (measured ");
    starts("m0 git: fresh, left alone (");
    starts("m1 git: fresh, left alone (");
    starts("m0 python3: fresh, left alone (");
    starts("m1 python3: never probed on m1 — no recorded inputs to re-run");
    assert!(
        out.contains("--capability python3 --declared-path '<absolute path of python3 on m1>' --workhome /tmp --probed-by tester --workspace ws/main"),
        "{out}"
    );
    starts("m2: failed: saphan: host-unreachable: m2");
    // Exactly the two stale go rows of the reachable machines were written,
    // each with the inputs its last row recorded.
    let rows = capability_rows(&env);
    let new: Vec<&Value> = rows[before..].iter().collect();
    let mut on: Vec<&str> = new.iter().map(|r| r["machine"].as_str().unwrap()).collect();
    on.sort();
    assert_eq!(on, ["m0", "m1"], "{new:?}");
    for r in &new {
        assert_eq!(r["capability"], "go");
        assert_eq!(
            r["inputs"],
            serde_json::json!({"declared_path": "/root/bin/go", "workhome": "/tmp",
                               "probed_by": "tester", "workspace": "ws/main"})
        );
    }
    // Now everything of m0 and m1 is fresh: nothing runs, nothing is written.
    let o = env.run(&["--json", "machine", "remeasure", "--machine", "m0,m1"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["changes"], serde_json::json!([]));
    for m in v["results"].as_array().unwrap() {
        assert_eq!(m["facts"]["action"], "fresh", "{m}");
        for c in m["capabilities"].as_array().unwrap() {
            assert!(
                c["action"] == "fresh" || c["action"] == "never-probed",
                "{c}"
            );
        }
    }
    assert_eq!(capability_rows(&env).len(), rows.len());

    // A window shorter than the rows' age: the facts and every row are
    // stale; a program that went away is a change and a remedy (exit 1),
    // and so is a new distribution release (bound over m1's os-release in
    // its private mount namespace).
    std::fs::remove_file(lab.home_dir("m1").join("bin/go")).unwrap();
    let release = lab.state_dir().join("trixie-os-release");
    std::fs::write(
        &release,
        "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\nVERSION_ID=\"13\"\n",
    )
    .unwrap();
    let sshd = std::fs::read_to_string(lab.state_dir().join("m1/sshd.pid")).unwrap();
    let o = std::process::Command::new("nsenter")
        .arg(format!("--mount=/proc/{}/ns/mnt", sshd.trim()))
        .args(["mount", "--bind"])
        .arg(&release)
        .arg("/usr/lib/os-release")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let newest = rows
        .iter()
        .map(|r| saphan::clock::parse_rfc3339(r["measured_at"].as_str().unwrap()).unwrap())
        .max()
        .unwrap();
    while time::OffsetDateTime::now_utc() - newest <= time::Duration::milliseconds(2) {
        std::thread::yield_now();
    }
    env.write_config("[fleet]\nfreshness = \"1ms\"\n");
    let o = env.run(&["--json", "machine", "remeasure", "--machine", "m1"]);
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(
        v["changes"],
        serde_json::json!(["m1 facts: debian 12 → debian 13", "m1 go: present → absent"]),
        "{v}"
    );
    let m1 = &v["results"][0];
    assert_eq!(m1["facts"]["action"], "re-measured");
    let go = m1["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "go")
        .unwrap();
    assert_eq!(go["action"], "re-probed");
    assert_eq!(go["outcome"], "absent");
    let remedy = go["remedy"][1].as_str().unwrap();
    assert!(
        remedy.contains("--capability go --declared-path /root/bin/go --workhome /tmp --probed-by tester --workspace ws/main"),
        "{remedy}"
    );
    let git = m1["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "git")
        .unwrap();
    assert_eq!(git["action"], "re-probed");
    assert_eq!(git["changes"], serde_json::json!([]));
}

#[test]
fn remeasure_refuses_an_empty_fleet_and_unknown_ids_by_name() {
    let env = Env::new();
    common::assert_refused(&env.run(&["machine", "remeasure"]), "usage");
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.here]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    common::assert_refused(
        &env.run(&["machine", "remeasure", "--machine", "here,m9"]),
        "machine-unknown",
    );
    common::assert_refused(
        &env.run(&["machine", "remeasure", "--machine", ","]),
        "usage",
    );
    // Never measured: the facts are measured, nothing else was ever probed.
    let o = env.run(&["machine", "remeasure"]);
    assert_code(&o, 0);
    assert!(
        text(&o).0.starts_with("here facts: never measured → "),
        "{}",
        text(&o).0
    );
}

/// After `catalog pin`, no command needs `--catalog`: the docker-oci probe
/// uses the pin, `machine show` reads the row as fresh, and container-class
/// admission passes — all with SAPHAN_HOME/catalog.toml and no flag.
#[test]
fn a_pinned_catalog_is_used_without_catalog_by_probe_show_and_certify() {
    use common::suite_images;
    if let Err(why) = suite_images::engine_up() {
        common::skip_unless(false, &why);
        return;
    }
    if let Some(why) = suite_images::missing(false) {
        common::skip_unless(false, &why);
        return;
    }
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.local]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "local"]), 0);
    let probe = suite_images::probe_args("local");
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    // Unpinned: refused by name, nothing recorded.
    common::assert_refused(&env.run(&probe), "docker-probe-image-unpinned");
    // A tag is refused by the pin ceremony too, and nothing is written.
    common::assert_refused(
        &env.run(&["catalog", "pin", "saphan-probe:candidate"]),
        "docker-probe-image-tag",
    );
    assert!(!env.home().join("catalog.toml").exists());
    let id = suite_images::probe_image();
    let o = env.run(&["catalog", "pin", id]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains(id), "{}", text(&o).0);
    let file = env.home().join("catalog.toml");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o077,
        0,
        "the home catalog is the operator's alone"
    );
    // The probe, with no --catalog.
    let o = env.run(&probe);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("present"), "{}", text(&o).0);
    // machine show, with no --catalog: fresh.
    let v = json(&env.run(&["--json", "machine", "show", "local"]));
    let row = v["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "docker-oci")
        .unwrap()
        .clone();
    assert_eq!(row["fresh"], true, "{row}");
    let (show, _) = text(&env.run(&["machine", "show", "local"]));
    assert!(
        show.lines()
            .any(|l| l.contains("docker-oci") && l.contains("present") && l.contains(" fresh ")),
        "{show}"
    );
    // A row probed with `--catalog` of the same file is the same entry.
    let mut with_flag = vec!["--catalog", file.to_str().unwrap()];
    with_flag.extend(&probe);
    assert_code(&env.run(&with_flag), 0);
    let v = json(&env.run(&["--json", "machine", "show", "local"]));
    assert!(
        v["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["capability"] == "docker-oci" && c["fresh"] == true),
        "{v}"
    );
    // Container-class certify: admitted with no --catalog, and green.
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let o = env.run(&[
        "certify",
        "--class",
        "container",
        "--image",
        suite_images::shell_image(),
        "--json",
        "--repo",
        &repo.path_str(),
    ]);
    assert_code(&o, 0);
    // A pin that moves makes the row stale: show says so, remeasure re-probes
    // it with its recorded inputs (and the new pin's image is absent here).
    let other = format!("sha256:{}", "ab".repeat(32));
    assert_code(&env.run(&["catalog", "pin", &other]), 0);
    let (show, _) = text(&env.run(&["machine", "show", "local"]));
    assert!(
        show.contains("stale: measured against a different catalog entry"),
        "{show}"
    );
    let o = env.run(&["machine", "remeasure"]);
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(
        out.lines()
            .any(|l| l == "local docker-oci: present → probe-image-absent"),
        "{out}"
    );
}

/// With only the installed binary: `catalog probe-image` writes the probe
/// image, `docker load` on a lab host (over ssh) gives it the printed ID,
/// `catalog pin` pins it, and the docker-oci probe of that host is present.
#[test]
fn the_installed_binary_writes_the_probe_image_a_machine_loads_and_probes_present() {
    use common::suite_images;
    if let Err(why) = suite_images::engine_up() {
        common::skip_unless(false, &why);
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tar = dir.path().join("saphan-probe.tar");
    let tag = format!("saphan-test/binprobe:p{}", std::process::id());
    let o = env.run(&[
        "catalog",
        "probe-image",
        "--save",
        tar.to_str().unwrap(),
        "--tag",
        &tag,
    ]);
    assert_code(&o, 0);
    let id = text(&o).0.trim().to_string();
    assert!(id.starts_with("sha256:") && id.len() == 71, "{id:?}");
    // The same binary writes the same bytes.
    let again = dir.path().join("again.tar");
    assert_code(
        &env.run(&[
            "catalog",
            "probe-image",
            "--save",
            again.to_str().unwrap(),
            "--tag",
            &tag,
        ]),
        0,
    );
    assert_eq!(std::fs::read(&tar).unwrap(), std::fs::read(&again).unwrap());
    // Load it on m0 (lab hosts reach this machine's engine and files).
    let o = lab.ssh("m0", &format!("docker load -i {}", tar.display()));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let inspect = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", &tag])
        .output()
        .unwrap();
    let loaded = String::from_utf8_lossy(&inspect.stdout).trim().to_string();
    let _ = std::process::Command::new("docker")
        .args(["rmi", &tag])
        .output();
    assert_eq!(loaded, id, "docker load gives the image the printed ID");
    // The image must be there for the probe: load it again under the tag,
    // remove it when done.
    let o = lab.ssh("m0", &format!("docker load -i {}", tar.display()));
    assert!(o.status.success());
    struct Untag(String);
    impl Drop for Untag {
        fn drop(&mut self) {
            let _ = std::process::Command::new("docker")
                .args(["rmi", &self.0])
                .output();
        }
    }
    let _untag = Untag(tag.clone());
    assert_code(&env.run(&["machine", "measure", "--machine", "m0"]), 0);
    assert_code(&env.run(&["catalog", "pin", &id]), 0);
    let probe = suite_images::probe_args("m0");
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    let o = env.run(&probe);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("present"), "{}", text(&o).0);
}

/// 20 machines × 5 capabilities, all stale: one command re-measures the 20
/// and re-probes the 100 rows, each with its own recorded inputs.
#[test]
fn twenty_machines_by_five_capabilities_are_one_command() {
    let env = Env::new();
    let ids: Vec<String> = (0..20).map(|i| format!("h{i:02}")).collect();
    let mut s = String::new();
    for id in &ids {
        s += &format!("[machine.{id}]\ntransport = \"local\"\nworkhome = \"/tmp\"\n\n");
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
    let caps = [
        ("git", "/usr/bin/git"),
        ("go", "/usr/bin/go"),
        ("gofmt", "/usr/bin/gofmt"),
        ("python3", "/usr/bin/python3"),
        ("sandbox-userns", "/usr/bin/unshare"),
    ];
    for (_, p) in caps {
        if common::skip_unless(Path::new(p).exists(), &format!("no {p}")) {
            return;
        }
    }
    let all = ids.join(",");
    assert_code(&env.run(&["machine", "measure", "--machine", &all]), 0);
    let mut args = vec!["machine", "probe", "--machine", &all, "--timeout", "60s"];
    for (c, p) in caps {
        args.extend(["--capability", c, "--declared-path", p]);
    }
    // Each machine's rows record who probed them (so the re-probe can be
    // seen to use each row's own inputs).
    for id in &ids {
        let mut a: Vec<&str> = args.clone();
        a[3] = id;
        let who = format!("op-{id}");
        a.extend([
            "--workhome",
            "/tmp",
            "--probed-by",
            &who,
            "--workspace",
            "ws",
        ]);
        assert_code(&env.run(&a), 0);
    }
    let before = capability_rows(&env).len();
    assert_eq!(before, 100);
    let newest = capability_rows(&env)
        .iter()
        .map(|r| saphan::clock::parse_rfc3339(r["measured_at"].as_str().unwrap()).unwrap())
        .max()
        .unwrap();
    while time::OffsetDateTime::now_utc() - newest <= time::Duration::milliseconds(2) {
        std::thread::yield_now();
    }
    env.write_config("[fleet]\nfreshness = \"1ms\"\n");
    let o = env.run(&["machine", "remeasure", "--timeout", "60s"]);
    assert_code(&o, 0);
    let out = text(&o).0;
    assert_eq!(out.lines().count(), 120, "{out}");
    for id in &ids {
        assert!(
            out.lines().any(|l| l
                == format!(
                    "{id} facts: re-measured (stale: older than the freshness window), unchanged"
                )),
            "{out}"
        );
    }
    let rows = capability_rows(&env);
    assert_eq!(rows.len(), 200);
    for r in &rows[100..] {
        let m = r["machine"].as_str().unwrap();
        assert_eq!(r["inputs"]["probed_by"], format!("op-{m}"), "{r}");
        assert_eq!(r["outcome"], "present", "{r}");
    }
}

/// The home catalog decides the docker-oci pin: one others can write is
/// refused by every command that would read it, and by `catalog pin`.
#[test]
fn a_home_catalog_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let id = format!("sha256:{}", "ab".repeat(32));
    assert_code(&env.run(&["catalog", "pin", &id]), 0);
    let file = env.home().join("catalog.toml");
    let o = env.run(&["--json", "catalog", "show", "docker-oci"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["image"], id.as_str());
    assert_eq!(json(&o)["catalog"], file.to_str().unwrap());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = common::assert_refused(&env.run(&["catalog", "show"]), "saphan-home-exposed");
    assert!(err.contains("catalog.toml"), "{err}");
    common::assert_refused(&env.run(&["catalog", "pin", &id]), "saphan-home-exposed");
    // An explicit --catalog is the operator's own choice, read as given.
    let o = env.run(&[
        "--catalog",
        file.to_str().unwrap(),
        "catalog",
        "show",
        "docker-oci",
    ]);
    assert_code(&o, 0);
}

/// Issue 40 item 5: a fresh row that says `absent` used to be "fresh, left
/// alone" (exit 0), so "I fixed the machine, now remeasure" did nothing.
/// remeasure probes again every row that is not `present` and says what
/// changed; a `present` fresh row is still left alone.
#[test]
fn remeasure_retries_what_a_probe_said_is_not_present() {
    let env = Env::new();
    let bin = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.here]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    let go = bin.path().join("go");
    let go = go.to_str().unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "here"]), 0);
    assert_code(&env.run(&probe_args("here", "go", go)), 1);

    // Still absent: probed again (nothing changed), its remedy, exit 1.
    let o = env.run(&["machine", "remeasure"]);
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(
        out.lines()
            .any(|l| l == "here go: re-probed (fresh, but not present), unchanged (absent)"),
        "{out}"
    );
    assert!(out.contains("remedy:\n"), "{out}");
    let rows = capability_rows(&env);
    assert_eq!(rows.len(), 2, "re-probed: a new row");
    assert_eq!(
        rows[1]["inputs"], rows[0]["inputs"],
        "with its recorded inputs"
    );

    // Fixed: the next remeasure says so, and exits 0.
    std::fs::write(go, "#!/bin/sh\necho \"go version go1.21.0 linux/amd64\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(go, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = env.run(&["--json", "machine", "remeasure"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(
        v["changes"],
        serde_json::json!(["here go: absent → present"]),
        "{v}"
    );
    let c = &v["results"][0]["capabilities"][0];
    assert_eq!(c["action"], "re-probed", "{c}");
    assert_eq!(c["was"], "fresh, but not present", "{c}");
    assert_eq!(c["outcome"], "present", "{c}");

    // Present and fresh: left alone, nothing written.
    let o = env.run(&["machine", "remeasure"]);
    assert_code(&o, 0);
    assert!(
        text(&o)
            .0
            .lines()
            .any(|l| l.starts_with("here go: fresh, left alone (go1.21.0")),
        "{}",
        text(&o).0
    );
    assert_eq!(capability_rows(&env).len(), 3);
}
