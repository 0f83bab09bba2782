//! `certify --split`: one go-test-json suite split by package over lab
//! machines (real sshd hosts, real git, real Go; m2 has no Go), coverage
//! proven from the shards' package-level terminal events, failover of an
//! infrastructure failure. Admission rows come from the real
//! `machine measure` and `machine probe` verbs.

use crate::common;

use crate::common::gomod::{self, MODULE};
use crate::common::{Env, Repo, assert_code, json, lab::Lab, text};
use serde_json::Value;
use std::path::Path;

/// A saphan home wired to a lab, each machine row with its own workhome.
struct Fleet {
    env: Env,
    _work: tempfile::TempDir,
}

impl Fleet {
    fn new(lab: &Lab, hosts: &[&str]) -> Fleet {
        let (env, work) = crate::common::fleet::home(lab, hosts, "split");
        Fleet { env, _work: work }
    }
    /// Measure `hosts` and probe `go` at `path` there.
    fn admit(&self, hosts: &str, path: &str) -> std::process::Output {
        assert_code(
            &self.env.run(&["machine", "measure", "--machine", hosts]),
            0,
        );
        crate::common::fleet::probe(&self.env, hosts, "go", path, "/tmp")
    }
    fn certify(&self, repo: &Repo, machines: &str, extra: &[&str]) -> std::process::Output {
        crate::common::fleet::certify(&self.env, repo, machines, extra)
    }
    /// Has a suite on `host` written `name` in its scratch tree (the one
    /// place a sealed suite writes; the lab shares this filesystem)?
    fn started(&self, host: &str, name: &str) -> bool {
        let base = self._work.path().join(host).join("saphan");
        common::in_scratch_tree(&base, name).is_some()
    }
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

/// A module of `pkgs` packages (`p0`…), each with one passing test, plus
/// `notests` (a package without test files); `extra` files added.
fn module(pkgs: usize, extra: &[(&str, &str)]) -> Repo {
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    for i in 0..pkgs {
        files.extend(gomod::package(&format!("p{i}"), &[], i as i32));
    }
    files.push((
        "notests/notests.go".into(),
        "package notests\n\n// W is two.\nfunc W() int { return 2 }\n".into(),
    ));
    for (p, c) in extra {
        files.push((p.to_string(), c.to_string()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    Repo::new(&refs)
}

fn listed(pkgs: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..pkgs).map(|i| format!("{MODULE}/p{i}")).collect();
    v.push(format!("{MODULE}/notests"));
    v.sort();
    v
}

fn records(v: &Value) -> &Vec<Value> {
    v["records"].as_array().unwrap()
}

/// The packages of every shard record, in shard order.
fn shard_packages(v: &Value) -> Vec<String> {
    let mut all: Vec<String> = records(v)
        .iter()
        .filter(|r| r["retry_of"].is_null())
        .flat_map(|r| {
            r["shard"]["packages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort();
    all
}

/// `--split` over three machines: green with the whole module's count,
/// coverage complete (each listed package in exactly one shard), one record
/// per shard with its `shard` and per-package seconds, the pointer moved —
/// and the same verdict, count and named tests as the unsplit run.
#[test]
fn split_over_three_machines_is_green_with_the_whole_count_like_the_unsplit_run() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let repo = module(5, &[]);
    let o = f.certify(&repo, "m0,m1,m3", &["--split"]);
    let (_, err) = text(&o);
    assert_code(&o, 0);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "green", "{v}");
    assert_eq!(s["count"], 5, "{v}");
    assert_eq!(s["shards"], 3, "{v}");
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    assert_eq!(s["coverage"]["listed"], 6, "{v}");
    assert_eq!(s["advisory"], Value::Null);
    assert_eq!(records(&v).len(), 3, "{v}");
    assert_eq!(shard_packages(&v), listed(5), "each package in one shard");
    for (i, r) in records(&v).iter().enumerate() {
        assert_eq!(r["shard"]["index"], i, "{r}");
        assert_eq!(r["shard"]["count"], 3, "{r}");
        assert_eq!(r["verdict"], "green", "{r}");
        let secs = r["package_seconds"].as_object().expect("package_seconds");
        let mine: Vec<&str> = r["shard"]["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        for p in &mine {
            assert!(secs.contains_key(*p), "{p} has no seconds: {r}");
        }
        let argv = r["suite_argv"].as_array().unwrap();
        assert!(argv.iter().any(|a| a == "-count=1"), "{r}");
        assert!(!argv.iter().any(|a| a == "./..."), "{r}");
    }
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    // The progress shows each machine's shard.
    assert!(err.contains("shard 1/3"), "{err}");

    // The unsplit run of the same SHA says the same.
    let o = f.certify(&repo, "m0", &[]);
    assert_code(&o, 0);
    let u = json(&o);
    let r = &u["records"][0];
    assert_eq!(r["verdict"], s["verdict"]);
    assert_eq!(r["count"], s["count"]);
    assert_eq!(r["named_tests"], s["named_tests"]);
}

/// A red in one shard is red overall, names the test (the same names and
/// count as the unsplit run), moves nothing, and is never retried.
#[test]
fn a_red_shard_is_red_overall_like_the_unsplit_run_and_is_not_retried() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let repo = module(
        4,
        &[(
            "p2/bad_test.go",
            "package p2\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n",
        )],
    );
    let o = f.certify(&repo, "m0,m1,m3", &["--split"]);
    assert_code(&o, 1);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "red", "{v}");
    assert_eq!(
        s["named_tests"],
        serde_json::json!([format!("{MODULE}/p2.TestBad")]),
        "{v}"
    );
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    assert_eq!(records(&v).len(), 3, "a red is never retried: {v}");
    // The shard that failed names the command that re-runs the test alone.
    let failed: Vec<&Value> = records(&v)
        .iter()
        .filter(|r| r["verdict"] == "red")
        .collect();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(
        failed[0]["rerun"],
        serde_json::json!([{"test": format!("{MODULE}/p2.TestBad"), "command": "go test -run '^TestBad$' ./p2"}]),
        "{v}"
    );
    assert!(records(&v).iter().all(|r| r["retry_of"].is_null()), "{v}");
    assert_eq!(repo.verified(), None);
    assert!(
        v["verified_pointer"]
            .as_str()
            .unwrap()
            .contains("not green on every shard"),
        "{v}"
    );

    // The split's own failing list says it too, for a person.
    let o = f.env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--machine",
        "m0,m1,m3",
        "--split",
    ]);
    assert_code(&o, 1);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "failing (1):\n  {MODULE}/p2.TestBad — re-run: go test -run '^TestBad$' ./p2\n"
        )),
        "{out}"
    );

    let o = f.certify(&repo, "m0", &[]);
    assert_code(&o, 1);
    let u = json(&o);
    let r = &u["records"][0];
    assert_eq!(r["verdict"], s["verdict"]);
    assert_eq!(r["count"], s["count"]);
    assert_eq!(r["named_tests"], s["named_tests"]);
}

/// A `go` that drops one package from what it is asked to test (a suite
/// wrapper that exits early for it): that package never reports its
/// terminal event, so the invocation is `shard-coverage-incomplete` naming
/// it, and nothing moves — though every test that did run passed.
#[test]
fn a_shard_that_leaves_a_package_without_its_end_is_coverage_incomplete() {
    let Some(lab) = go_ready_lab() else { return };
    let bin = tempfile::Builder::new()
        .prefix("saphan-split-go-")
        .tempdir()
        .unwrap();
    let go = bin.path().join("go");
    let dropped = format!("{MODULE}/p1");
    std::fs::write(
        &go,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do shift; [ \"$a\" = '{dropped}' ] || set -- \"$@\" \"$a\"; done\nexec /usr/bin/go \"$@\"\n"
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", go.to_str().unwrap()), 0);
    let repo = module(5, &[]);
    let o = f.certify(&repo, "m0,m1,m3", &["--split"]);
    assert_code(&o, 3);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "measurement-failed", "{v}");
    assert_eq!(s["failure"], "shard-coverage-incomplete", "{v}");
    assert_eq!(s["coverage"]["complete"], false, "{v}");
    assert_eq!(
        s["coverage"]["missing"],
        serde_json::json!([dropped]),
        "{v}"
    );
    let short: Vec<&Value> = records(&v)
        .iter()
        .filter(|r| r["failure"] == "shard-coverage-incomplete")
        .collect();
    assert_eq!(short.len(), 1, "{v}");
    assert!(short[0]["notes"].to_string().contains(&dropped), "{v}");
    assert_eq!(repo.verified(), None);

    let o = f.env.run(&[
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        "m0,m1,m3",
        "--split",
    ]);
    assert_code(&o, 3);
    let (out, _) = text(&o);
    assert!(out.contains("coverage: incomplete"), "{out}");
    assert!(out.contains(&format!("missing: {dropped}")), "{out}");
}

/// `@admitted --split` with m2 lacking Go: the shards run on the others,
/// and the output says m2 was left out and why.
#[test]
fn admitted_split_runs_on_the_machines_with_go_and_says_who_was_left_out() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m2"]);
    assert_code(&f.admit("m0,m1,m2", "/usr/bin/go"), 1);
    let repo = module(3, &[]);
    let o = f.certify(&repo, "@admitted", &["--split"]);
    assert_code(&o, 0);
    let (_, err) = text(&o);
    assert!(
        err.contains("--machine @admitted: chose m0, m1 (2 of 3 machines)"),
        "{err}"
    );
    assert!(
        err.contains("left out m2: verification-toolchain-absent"),
        "{err}"
    );
    let v = json(&o);
    assert_eq!(v["split"]["shards"], 2, "{v}");
    assert_eq!(v["split"]["count"], 3, "{v}");
    let machines: Vec<&str> = records(&v)
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["m0", "m1"], "{v}");
    assert_eq!(shard_packages(&v), listed(3));
}

/// `--split` without machines is refused before anything runs.
#[test]
fn split_without_machines_is_refused() {
    let env = Env::new();
    let repo = module(1, &[]);
    let o = env.run(&[
        "--json",
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--split",
    ]);
    common::assert_refused(&o, "split-invalid");
    assert!(repo.records().is_empty());
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

/// A machine partitioned mid-run: its shard's attempt is connection-lost,
/// re-run once on another machine of the invocation into a green that
/// carries `retry_of`; both attempts are recorded and the pointer moves.
#[test]
fn a_partitioned_machines_shard_is_re_run_elsewhere_into_a_green() {
    let Some(lab) = Lab::start(4) else { return };
    if common::skip_unless(Path::new("/usr/bin/go").exists(), "no /usr/bin/go") {
        return;
    }
    let token = format!("saphan-split-fo-{}", std::process::id());
    let wait = format!(
        "package pw\n\nimport (\n\t\"os\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestWait(t *testing.T) {{\n\thome := os.Getenv(\"HOME\")\n\t_ = os.WriteFile(\"../{token}.started\", nil, 0o644)\n\tfor i := 0; i < 600; i++ {{\n\t\tif _, err := os.Stat(home + \"/{token}.go\"); err == nil {{\n\t\t\treturn\n\t\t}}\n\t\ttime.Sleep(100 * time.Millisecond)\n\t}}\n\tt.Fatal(\"never released\")\n}}\n"
    );
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    for i in 0..3 {
        files.push((format!("w{i}/w.go"), format!("package w{i}\n")));
        files.push((
            format!("w{i}/w_test.go"),
            wait.replace("package pw", &format!("package w{i}")),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let f = Fleet::new(&lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let child = f
        .env
        .cmd()
        .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", "m0,m1,m3", "--split", "--timeout", "20s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bound = std::time::Duration::from_secs(120);
    for h in ["m0", "m1", "m3"] {
        assert!(
            wait_for(bound, || f.started(h, &format!("{token}.started"))),
            "the shard never started on {h}"
        );
    }
    lab.partition("m1");
    for h in ["m0", "m3"] {
        std::fs::write(lab.home_dir(h).join(format!("{token}.go")), "").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    lab.heal("m1");
    let v = json(&o);
    assert_code(&o, 0);
    let s = &v["split"];
    assert_eq!(s["verdict"], "green", "{v}");
    assert_eq!(s["count"], 3, "{v}");
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    let all = records(&v);
    assert_eq!(all.len(), 4, "both attempts recorded: {v}");
    let lost = all
        .iter()
        .find(|r| r["machine"] == "m1")
        .expect("m1's attempt");
    assert_eq!(lost["failure"], "connection-lost", "{lost}");
    let retry = all
        .iter()
        .find(|r| !r["retry_of"].is_null())
        .expect("a retry");
    assert_eq!(retry["retry_of"], lost["id"], "{v}");
    assert_ne!(retry["machine"], "m1", "{v}");
    assert_eq!(retry["verdict"], "green", "{v}");
    assert_eq!(retry["shard"], lost["shard"], "{v}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    // Both attempts are in the repository's records.
    assert_eq!(repo.records().len(), 4);
}

/// A machine whose SSH server stalls mid-run (its pings go unanswered,
/// nothing is cut) has a copy of its shard started on another machine.
/// When the stalled machine then answers — red — its answer counts and the
/// copy's does not: a copy never outruns a red. Twice: a copy that ended
/// green before the red came (held, then not counted), and a copy still
/// running when the red came (stopped at once: the invocation does not
/// wait for it). The red record says so, no record carries `retry_of`, the
/// copy is not recorded, and the pointer stays.
#[test]
fn a_stalled_machines_red_counts_and_the_copy_of_its_shard_does_not() {
    let Some(lab) = Lab::start(2) else { return };
    if common::skip_unless(Path::new("/usr/bin/go").exists(), "no /usr/bin/go") {
        return;
    }
    let _ = stalled_then_red(&lab, true);
    let _ = stalled_then_red(&lab, false);
}

/// One case of the test above: the copy's package is released on m0
/// (`copy_ends`: the copy ends green first) or not (it waits until stopped).
/// Returns the invocation's `--json` output.
pub(crate) fn stalled_then_red(lab: &Lab, copy_ends: bool) -> Value {
    use std::io::BufRead;
    let token = format!("saphan-split-copy-{}-{copy_ends}", std::process::id());
    let test = |pkg: &str| {
        format!(
            "package {pkg}\n\nimport (\n\t\"os\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestWait(t *testing.T) {{\n\thome := os.Getenv(\"HOME\")\n\t_ = os.WriteFile(\"../{token}-{pkg}.started\", nil, 0o644)\n\tfor i := 0; i < 1200; i++ {{\n\t\tif _, err := os.Stat(home + \"/{token}-{pkg}.go\"); err == nil {{\n\t\t\tbreak\n\t\t}}\n\t\ttime.Sleep(50 * time.Millisecond)\n\t}}\n\tif _, err := os.Stat(home + \"/{token}.red\"); err == nil {{\n\t\tt.Fatal(\"red on this machine\")\n\t}}\n}}\n"
        )
    };
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    for pkg in ["w0", "w1"] {
        files.push((format!("{pkg}/w.go"), format!("package {pkg}\n")));
        files.push((format!("{pkg}/w_test.go"), test(pkg)));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let f = Fleet::new(lab, &["m0", "m1"]);
    assert_code(&f.admit("m0,m1", "/usr/bin/go"), 0);
    let home = |h: &str| lab.home_dir(h);
    let release = |h: &str, pkg: &str| {
        std::fs::write(home(h).join(format!("{token}-{pkg}.go")), "").unwrap();
    };
    std::fs::write(home("m1").join(format!("{token}.red")), "").unwrap();
    let mut child = f
        .env
        .cmd()
        .env("RUST_LOG", "saphan=info")
        .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", "m0,m1", "--split", "--timeout", "90s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l.clone());
            all += &l;
            all += "\n";
        }
        all
    });
    let bound = std::time::Duration::from_secs(120);
    let started = |h: &str, pkg: &str| f.started(h, &format!("{token}-{pkg}.started"));
    let t0 = std::time::Instant::now();
    let (on_m0, on_m1) = loop {
        match (
            ["w0", "w1"].into_iter().find(|p| started("m0", p)),
            ["w0", "w1"].into_iter().find(|p| started("m1", p)),
        ) {
            (Some(a), Some(b)) => break (a, b),
            _ if t0.elapsed() > bound => panic!("the shards never started"),
            _ => std::thread::park_timeout(std::time::Duration::from_millis(50)),
        }
    };
    assert_ne!(on_m0, on_m1);
    // m0 ends its own shard and is free; m1 stalls until saphan suspects it.
    release("m0", on_m0);
    if copy_ends {
        release("m0", on_m1);
    }
    lab.stall("m1");
    let suspected = loop {
        match rx.recv_timeout(bound) {
            Ok(l) if l.contains("a ping went unanswered") => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    lab.resume("m1");
    assert!(suspected, "saphan never suspected the stalled m1");
    // The copy of m1's shard runs on m0 … (one released already may end,
    // and its tree go, before its marker is seen: its end line says it ran)
    if !copy_ends {
        assert!(
            wait_for(bound, || started("m0", on_m1)),
            "no copy of m1's shard ({on_m1}) ran on m0"
        );
    }
    if copy_ends {
        // … and ends green there before m1 answers.
        let ended = loop {
            match rx.recv_timeout(bound) {
                Ok(l) if l.contains("a copy ended before its first attempt") => break true,
                Ok(_) => continue,
                Err(_) => break false,
            }
        };
        assert!(ended, "the copy never ended");
    }
    // Only then does m1 answer: red.
    release("m1", on_m1);
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let status = child.wait().unwrap();
    let err = lines.join().unwrap();
    let v: Value = serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(status.code(), Some(1), "{v}\n{err}");
    assert_eq!(v["split"]["verdict"], "red", "{v}");
    let all = records(&v);
    assert_eq!(all.len(), 2, "the copy is not recorded: {v}");
    assert!(all.iter().all(|r| r["retry_of"].is_null()), "{v}");
    let m1 = all
        .iter()
        .find(|r| r["machine"] == "m1")
        .expect("m1's record");
    assert_eq!(m1["verdict"], "red", "{m1}");
    let notes = m1["notes"].to_string();
    let told = if copy_ends {
        "a copy of this batch ran on m0"
    } else {
        "a copy of this batch on m0 (started when this machine left an SSH ping unanswered) was stopped"
    };
    assert!(
        notes.contains(told) && notes.contains("not counted"),
        "{m1}"
    );
    assert_eq!(repo.verified(), None, "a red moves nothing");
    assert_eq!(repo.records().len(), 2);
    // Nothing of a stopped copy keeps running: no process works in this
    // test's workhomes.
    let t0 = std::time::Instant::now();
    let mine = f._work.path().to_string_lossy().to_string();
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_link(e.path().join("cwd")).ok())
            .map(|c| c.to_string_lossy().to_string())
            .filter(|c| c.starts_with(&mine))
            .collect();
        let left = left.join(", ");
        if left.is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < bound,
            "the copy's test process survives on m0: {left}"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    }
    v
}

/// A machine whose sshd is gone after it was admitted: its shard's attempt
/// is `host-unreachable` (nothing ran there), re-run once on another
/// machine of the invocation into a green with `retry_of`; coverage is
/// complete and the pointer moves, with the count of the whole module.
#[test]
fn an_unreachable_machines_shard_is_re_run_elsewhere_into_a_green() {
    let Some(lab) = Lab::start(4) else { return };
    if common::skip_unless(
        Path::new("/usr/bin/go").exists() && saphan::exec::which("go").is_some(),
        "no /usr/bin/go for the lab hosts, or no go here to list packages with",
    ) {
        return;
    }
    let f = Fleet::new(&lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let repo = module(5, &[]);
    lab.stop("m1");
    let o = f.certify(&repo, "m0,m1,m3", &["--split"]);
    let v = json(&o);
    assert_code(&o, 0);
    let s = &v["split"];
    assert_eq!(s["verdict"], "green", "{v}");
    assert_eq!(s["count"], 5, "{v}");
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    let all = records(&v);
    let lost = all
        .iter()
        .find(|r| r["machine"] == "m1")
        .expect("m1's attempt is recorded");
    assert_eq!(lost["verdict"], "measurement-failed", "{lost}");
    assert_eq!(lost["failure"], "host-unreachable", "{lost}");
    let retry = all
        .iter()
        .find(|r| !r["retry_of"].is_null())
        .expect("m1's shard re-run");
    assert_eq!(retry["retry_of"], lost["id"], "{v}");
    assert_ne!(retry["machine"], "m1", "{v}");
    assert_eq!(retry["shard"], lost["shard"], "{v}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
}

/// A suite saphan cannot split itself (an exitcode suite): each shard gets
/// `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT`, the result is advisory, the
/// pointer does not move, and the output says why.
#[test]
fn other_suites_get_the_shard_environment_and_an_advisory_result() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1"]);
    assert_code(&f.env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    // The suite says what it got on its stdout, which its log keeps.
    f.env.write_config(
        "[verify.full]\nargv = [\"sh\", \"-c\", \"echo $SAPHAN_SHARD_INDEX/$SAPHAN_SHARD_COUNT\"]\nreport = \"exitcode\"\n",
    );
    let repo = Repo::new(&[("README", "x\n")]);
    let o = f.certify(&repo, "m0,m1", &["--split"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert!(
        v["split"]["advisory"]
            .as_str()
            .unwrap()
            .contains("SAPHAN_SHARD_INDEX"),
        "{v}"
    );
    assert_eq!(v["split"]["coverage"], Value::Null, "{v}");
    assert!(
        v["verified_pointer"].as_str().unwrap().contains("advisory"),
        "{v}"
    );
    assert_eq!(repo.verified(), None);
    for (i, h) in ["m0", "m1"].iter().enumerate() {
        let r = records(&v)
            .iter()
            .find(|r| r["machine"] == *h)
            .unwrap_or_else(|| panic!("no record for {h}: {v}"));
        let log = r["suite_log"].as_str().expect("a suite_log path");
        let got = std::fs::read_to_string(log).unwrap();
        let stdout = got
            .split("=== suite stdout ===\n")
            .nth(1)
            .and_then(|s| s.split("=== suite stderr").next())
            .unwrap_or_else(|| panic!("{h}: no stdout in the log: {got}"));
        assert_eq!(stdout.trim(), format!("{i}/2"), "{h}: {got}");
    }
    let o = f.env.run(&[
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        "m0,m1",
        "--split",
    ]);
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert!(out.contains("advisory: "), "{out}");
    assert!(out.contains("not moved (advisory"), "{out}");
}

/// `--machine @admitted` without `--split`: every machine runs the whole
/// suite, so a partitioned machine's run is re-run nowhere — it is left
/// out of the verdict by name (issue 37 item 10) and the machines that
/// answered certify; an explicit list retries nothing and leaves nobody
/// out (each named machine answers for itself).
#[test]
fn admitted_fails_over_a_partitioned_machine_and_a_named_list_does_not() {
    let Some(lab) = Lab::start(2) else { return };
    if common::skip_unless(Path::new("/usr/bin/go").exists(), "no /usr/bin/go") {
        return;
    }
    let token = format!("saphan-adm-fo-{}", std::process::id());
    let f = Fleet::new(&lab, &["m0", "m1"]);
    assert_code(&f.admit("m0,m1", "/usr/bin/go"), 0);
    let repo = Repo::new(&[("README", "x\n")]);
    let run = |machines: &str| {
        // The suite marks that it started in its own tree, under a name of
        // this run's (a partitioned machine's tree may outlive its run).
        let started = format!("{token}-{}.started", machines.replace([',', '@'], ""));
        f.env.write_config(&format!(
            "[verify.full]\nargv = [\"sh\", \"-c\", \"touch {started}; while [ ! -e $HOME/{token}.go ]; do sleep 0.1; done\"]\nreport = \"exitcode\"\n"
        ));
        let child = f
            .env
            .cmd()
            .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
            .args(["--machine", machines, "--timeout", "15s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        for h in ["m0", "m1"] {
            assert!(
                wait_for(std::time::Duration::from_secs(120), || f
                    .started(h, &started)),
                "never started on {h}"
            );
        }
        lab.partition("m1");
        std::fs::write(lab.home_dir("m0").join(format!("{token}.go")), "").unwrap();
        let o = child.wait_with_output().unwrap();
        lab.heal("m1");
        let _ = std::fs::remove_file(lab.home_dir("m0").join(format!("{token}.go")));
        o
    };
    let o = run("@admitted");
    let v = json(&o);
    assert_code(&o, 0);
    let all = records(&v);
    assert_eq!(all.len(), 2, "{v}");
    assert!(all.iter().all(|r| r["retry_of"].is_null()), "{v}");
    let lost = all.iter().find(|r| r["machine"] == "m1").expect("m1");
    assert_eq!(lost["failure"], "connection-lost", "{lost}");
    let green = all.iter().find(|r| r["machine"] == "m0").expect("m0");
    assert_eq!(green["verdict"], "green");
    assert_eq!(v["certified_by"], serde_json::json!(["m0"]), "{v}");
    assert_eq!(v["left_out"][0]["machine"], "m1", "{v}");
    assert_eq!(v["split"], Value::Null);
    // A named list never retries: m1's connection-lost is its answer.
    let o = run("m0,m1");
    assert_code(&o, 3);
    let v = json(&o);
    assert_eq!(records(&v).len(), 2, "{v}");
    assert!(records(&v).iter().all(|r| r["retry_of"].is_null()), "{v}");
}

/// github.com/google/go-cmp as Debian's golang-github-google-go-cmp-dev
/// ships it: a real module of 10 packages (4 without tests, internal
/// packages, test-only helpers), no network needed.
const GO_CMP: &str = "/usr/share/gocode/src/github.com/google/go-cmp";

/// The verdict-bearing part of a split's or an unsplit record's JSON.
fn verdict_of(v: &Value) -> (Value, Value, Value, Vec<String>) {
    let notes = |n: &Value| -> Vec<String> {
        let mut n: Vec<String> = n
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str())
            // Notes naming a machine or a shard differ by design.
            .filter(|x| x.starts_with("unfinished-tests") || x.starts_with("build-failed"))
            .map(str::to_string)
            .collect();
        n.sort();
        n
    };
    (
        v["verdict"].clone(),
        v["count"].clone(),
        v["named_tests"].clone(),
        notes(&v["notes"]),
    )
}

/// github.com/BurntSushi/toml as Debian's golang-github-burntsushi-toml-dev
/// ships it: a real module of 4 packages, one with tests, no network needed.
const TOML: &str = "/usr/share/gocode/src/github.com/BurntSushi/toml";

/// Split and unsplit verdicts are the same on a real multi-package module:
/// green (same count), then red after a commit that breaks one test (the
/// same named test, the same count).
#[test]
fn split_and_unsplit_agree_on_a_real_module() {
    agree_on_a_real_module(
        GO_CMP,
        "github.com/google/go-cmp",
        "golang-github-google-go-cmp-dev",
        10,
        ("cmp/cmpopts", "cmpopts"),
        // 20 top-level tests (and ~700 subtests, which the count leaves
        // out) in Debian 12's go-cmp 0.5.9.
        10,
    );
}

/// The same on BurntSushi/toml (issue 37: the real modules the lab uses
/// certify with the same verdict, count and named tests, split and
/// unsplit).
#[test]
fn split_and_unsplit_agree_on_the_toml_module() {
    agree_on_a_real_module(
        TOML,
        "github.com/BurntSushi/toml",
        "golang-github-burntsushi-toml-dev",
        4,
        (".", "toml"),
        10,
    );
}

/// Copy the module at `src` (`module`, from Debian's `package`) into a
/// repository and compare `--split` over m0, m1, m3 with an unsplit run on
/// m0: green with `listed` packages covered and at least `min_count`
/// tests, then red naming the one test a commit breaks in `broken` (its
/// directory and package name).
fn agree_on_a_real_module(
    src: &str,
    module: &str,
    package: &str,
    listed: u64,
    broken: (&str, &str),
    min_count: u64,
) {
    if common::skip_unless(
        Path::new(src).join("go.mod").exists(),
        &format!("no {module} source (apt-get install {package})"),
    ) {
        return;
    }
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let repo = Repo::new(&[("README.saphan", &format!("{module}\n"))]);
    let cp = std::process::Command::new("cp")
        .args(["-r", &format!("{src}/."), &repo.path_str()])
        .status()
        .unwrap();
    assert!(cp.success());
    common::git(repo.path(), &["add", "-A"]);
    common::git(repo.path(), &["commit", "-q", "-m", module]);

    let compare = |want: i32| {
        let o = f.certify(&repo, "m0,m1,m3", &["--split"]);
        assert_code(&o, want);
        let v = json(&o);
        assert_eq!(v["split"]["coverage"]["complete"], true, "{v}");
        assert_eq!(v["split"]["coverage"]["listed"], listed, "{v}");
        let split = verdict_of(&v["split"]);
        let o = f.certify(&repo, "m0", &[]);
        assert_code(&o, want);
        let u = json(&o);
        let unsplit = verdict_of(&u["records"][0]);
        assert_eq!(split, unsplit, "split {v}\nunsplit {u}");
        split
    };
    let (verdict, count, _, _) = compare(0);
    assert_eq!(verdict, "green");
    assert!(
        count.as_u64().unwrap() >= min_count,
        "{module}'s tests: {count}"
    );

    let (dir, pkg) = broken;
    repo.commit(
        &[(
            &format!("{dir}/zz_broken_test.go"),
            &format!("package {pkg}\n\nimport \"testing\"\n\nfunc TestBrokenOnPurpose(t *testing.T) {{\n\tt.Fatal(\"broken on purpose\")\n}}\n"),
        )],
        "break one test",
    );
    let (verdict, _, named, _) = compare(1);
    assert_eq!(verdict, "red");
    let import = if dir == "." {
        module.to_string()
    } else {
        format!("{module}/{dir}")
    };
    assert_eq!(
        named,
        serde_json::json!([format!("{import}.TestBrokenOnPurpose")])
    );
}

/// The Go variables that change which packages `./...` matches, or how
/// they are named: an operator may have any of them exported here.
const GO_LISTING_ENV: [&str; 7] = [
    "GOOS",
    "GOARCH",
    "GOFLAGS",
    "CGO_ENABLED",
    "GOEXPERIMENT",
    "GOWORK",
    "GO111MODULE",
];

/// `saphan --json certify --repo REPO --machine MACHINES EXTRA…` with the
/// Go listing variables removed, then `env` set.
fn certify_with(
    f: &Fleet,
    repo: &Repo,
    machines: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut c = f.env.cmd();
    c.args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", machines])
        .args(extra);
    for k in GO_LISTING_ENV {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The verdict-bearing part of a split (its `split` object) or of an
/// unsplit run (its one record): verdict, failure, count, the named tests
/// as a set (`go test -json` prints packages as they finish: the order
/// across packages is not the suite's), and the notes that are the
/// judgement's (a split's notes prefixed `<machine>: ` are that shard's
/// own, and differ by design).
fn judged(v: &Value, machines: &[&str]) -> (Value, Value, Value, Vec<String>, Vec<String>) {
    let mut named: Vec<String> = v["named_tests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect();
    named.sort();
    let mut notes: Vec<String> = v["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str())
        .filter(|n| !machines.iter().any(|m| n.starts_with(&format!("{m}: "))))
        .map(str::to_string)
        .collect();
    notes.sort();
    (
        v["verdict"].clone(),
        v["failure"].clone(),
        v["count"].clone(),
        named,
        notes,
    )
}

type Judged = (Value, Value, Value, Vec<String>, Vec<String>);

/// Split over m0, m1, m3 with `env` exported here, and the unsplit run on
/// m0 without it: the same judgement, and coverage complete. Returns the
/// unsplit run's judgement.
fn split_agrees(f: &Fleet, repo: &Repo, env: &[(&str, &str)]) -> Judged {
    let (j, coverage) = split_judged(f, repo, env);
    assert_eq!(coverage["complete"], true, "with {env:?}: {coverage}");
    j
}

/// [`split_agrees`] without the coverage check; returns the split's
/// coverage too.
fn split_judged(f: &Fleet, repo: &Repo, env: &[(&str, &str)]) -> (Judged, Value) {
    let o = certify_with(f, repo, "m0", &[], &[]);
    let u = json(&o);
    let unsplit = judged(&u["records"][0], &["m0"]);
    let o = certify_with(f, repo, "m0,m1,m3", &["--split"], env);
    let v = json(&o);
    let split = judged(&v["split"], &["m0", "m1", "m3"]);
    assert_eq!(
        split, unsplit,
        "with {env:?} exported:\nsplit {v}\nunsplit {u}"
    );
    (unsplit, v["split"]["coverage"].clone())
}

/// A file of `pkg` under a build constraint, and its one passing test
/// (`TestOnly<pkg>`) under the same constraint.
fn constrained(pkg: &str, constraint: &str) -> Vec<(String, String)> {
    vec![
        (
            format!("{pkg}/{pkg}.go"),
            format!(
                "//go:build {constraint}\n\npackage {pkg}\n\n// V is one.\nfunc V() int {{ return 1 }}\n"
            ),
        ),
        (
            format!("{pkg}/{pkg}_test.go"),
            format!(
                "//go:build {constraint}\n\npackage {pkg}\n\nimport \"testing\"\n\nfunc TestOnly{pkg}(t *testing.T) {{\n\tif V() != 1 {{\n\t\tt.Fatal(\"not one\")\n\t}}\n}}\n"
            ),
        ),
    ]
}

/// The machines' `go test` builds for their own platform with Go's
/// defaults (nothing of this machine's environment reaches them): the
/// packages `--split` lists are the ones it builds, whatever GOOS, GOARCH,
/// GOFLAGS, CGO_ENABLED, GOEXPERIMENT, GOWORK or GO111MODULE the operator
/// exported here. A linux-only, an amd64-only and a cgo-only package are
/// in the suite; a tag-only and an experiment-only package are not. With
/// GOOS exported, listing with it dropped the linux-only package, and a
/// red there was a split green.
#[test]
fn split_lists_the_packages_the_machines_go_test_builds_whatever_is_exported_here() {
    if common::skip_unless(
        Path::new("/usr/bin/gcc").exists(),
        "no /usr/bin/gcc for the cgo-only package",
    ) {
        return;
    }
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let mut files: Vec<(String, String)> = Vec::new();
    files.extend(constrained("lin", "linux"));
    files.extend(constrained("amd", "amd64"));
    files.extend(constrained("tagged", "saphanextra"));
    files.extend(constrained("exp", "goexperiment.fieldtrack"));
    files.push((
        "cg/cg.go".into(),
        "package cg\n\n// #define ONE 1\nimport \"C\"\n\n// V is one.\nfunc V() int { return int(C.ONE) }\n"
            .into(),
    ));
    files.push((
        "cg/cg_test.go".into(),
        "//go:build cgo\n\npackage cg\n\nimport \"testing\"\n\nfunc TestOnlycg(t *testing.T) {\n\tif V() != 1 {\n\t\tt.Fatal(\"not one\")\n\t}\n}\n"
            .into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = module(2, &refs);
    // A workspace elsewhere that does not hold the module.
    let work = tempfile::tempdir().unwrap();
    let other = work.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("go.mod"),
        "module example.com/other\n\ngo 1.19\n",
    )
    .unwrap();
    std::fs::write(
        work.path().join("go.work"),
        format!("go 1.19\n\nuse {}\n", other.display()),
    )
    .unwrap();
    let gowork = work.path().join("go.work");
    let exported: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("GOOS", "windows")],
        vec![("GOARCH", "arm64")],
        vec![("GOFLAGS", "-tags=saphanextra")],
        vec![("CGO_ENABLED", "0")],
        vec![("GOEXPERIMENT", "fieldtrack")],
        vec![("GOWORK", gowork.to_str().unwrap())],
        vec![("GO111MODULE", "off")],
    ];
    for env in &exported {
        let (verdict, _, count, _, _) = split_agrees(&f, &repo, env);
        assert_eq!(verdict, "green", "{env:?}");
        // p0, p1, lin, amd, cg.
        assert_eq!(count, 5, "{env:?}");
    }
    // The dishonest green that was seen: a red in the linux-only package.
    repo.commit(
        &[(
            "lin/bad_test.go",
            "//go:build linux\n\npackage lin\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n",
        )],
        "break the linux-only package",
    );
    let (verdict, _, _, named, _) = split_agrees(&f, &repo, &[("GOOS", "windows")]);
    assert_eq!(verdict, "red");
    assert_eq!(named, [format!("{MODULE}/lin.TestBad")]);
}

/// Package shapes whose split judgement must be the unsplit one on the
/// same SHA (Debian's go1.19: build failures are plain text on stdout, or
/// nothing but stderr): a package that fails to build (`FAIL p [build
/// failed]`), a test whose own output prints that text for another
/// package (no package fails), a package with only an `init` panic, a
/// setup failure (`FAIL p [setup failed]`, an import cycle in a test), an
/// untested package that fails to build (go exits 2 and prints no event
/// for it) beside a build failure and alone; every module also has a
/// package without test files and one with only an external test.
#[test]
fn split_and_unsplit_agree_on_every_package_shape() {
    let Some(lab) = go_ready_lab() else { return };
    let f = Fleet::new(lab, &["m0", "m1", "m3"]);
    assert_code(&f.admit("m0,m1,m3", "/usr/bin/go"), 0);
    let m = MODULE;
    let build_fail: [(&str, &str); 2] = [
        (
            "bf/bf.go",
            "package bf\n\n// F is wrong.\nfunc F() int { return \"x\" }\n",
        ),
        (
            "bf/bf_test.go",
            "package bf\n\nimport \"testing\"\n\nfunc TestBF(t *testing.T) {}\n",
        ),
    ];
    let printer = format!(
        "package printer\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestPrint(t *testing.T) {{\n\tfmt.Println(\"FAIL\\t{m}/p0 [build failed]\")\n\tfmt.Println(\"FAIL\\t{m}/printer [build failed]\")\n}}\n"
    );
    let init_panic: [(&str, &str); 2] = [
        (
            "initp/initp.go",
            "package initp\n\nfunc init() { panic(\"boom in init\") }\n",
        ),
        ("initp/initp_test.go", "package initp\n"),
    ];
    let cycle = [
        ("cyc/cyc.go", "package cyc\n".to_string()),
        (
            "cyc/cyc_test.go",
            format!(
                "package cyc\n\nimport (\n\t\"testing\"\n\n\t_ \"{m}/cyc2\"\n)\n\nfunc TestC(t *testing.T) {{}}\n"
            ),
        ),
        (
            "cyc2/cyc2.go",
            format!("package cyc2\n\nimport _ \"{m}/cyc\"\n"),
        ),
    ];
    let untested_broken: (&str, &str) = (
        "ntbroken/ntbroken.go",
        "package ntbroken\n\n// F is wrong.\nfunc F() int { return \"x\" }\n",
    );
    let base: [(&str, &str); 1] = [(
        "xonly/x_test.go",
        "package xonly_test\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n",
    )];
    let with = |shape: &[(&str, &str)]| {
        let mut all: Vec<(&str, &str)> = base.to_vec();
        all.extend_from_slice(shape);
        module(3, &all)
    };
    let names = |n: &[&str]| -> Vec<String> { n.iter().map(|x| format!("{m}/{x}")).collect() };

    // Green: 3 tests and xonly's.
    let (verdict, _, count, named, _) = split_agrees(&f, &with(&[]), &[]);
    assert_eq!((verdict.as_str(), count.as_u64()), (Some("green"), Some(4)));
    assert!(named.is_empty());

    let (verdict, _, _, named, _) = split_agrees(&f, &with(&build_fail), &[]);
    assert_eq!(verdict, "red", "a build failure");
    assert_eq!(named, names(&["bf"]));

    let (verdict, _, count, named, _) =
        split_agrees(&f, &with(&[("printer/p_test.go", &printer)]), &[]);
    assert_eq!(verdict, "green", "printed text fails no package: {named:?}");
    assert_eq!(count, 5);

    let (verdict, _, _, named, _) = split_agrees(&f, &with(&init_panic), &[]);
    assert_eq!(verdict, "red", "an init panic");
    assert_eq!(named, names(&["initp"]));

    let cyc: Vec<(&str, &str)> = cycle.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let (verdict, _, _, named, _) = split_agrees(&f, &with(&cyc), &[]);
    assert_eq!(verdict, "red", "a setup failure");
    assert_eq!(named, names(&["cyc"]));

    // go exits 2 and says nothing on stdout of ntbroken: beside a named
    // build failure that is the same red, alone the same crash; never green.
    let mut both: Vec<(&str, &str)> = build_fail.to_vec();
    both.push(untested_broken);
    let ((verdict, _, _, named, _), coverage) = split_judged(&f, &with(&both), &[]);
    assert_eq!(verdict, "red", "an untested package that fails to build");
    assert_eq!(named, names(&["bf"]));
    assert_eq!(coverage["missing"], serde_json::json!(names(&["ntbroken"])));
    let ((verdict, failure, _, named, _), coverage) =
        split_judged(&f, &with(&[untested_broken]), &[]);
    assert_eq!(verdict, "measurement-failed");
    assert_eq!(failure, "crash");
    assert!(named.is_empty());
    assert_eq!(coverage["missing"], serde_json::json!(names(&["ntbroken"])));
}
