//! Snapshots (insta) of what an operator reads: a refusal, a green, a red
//! and a multi-machine certify summary, exactly as the real binary prints
//! them, with what changes from run to run redacted — temp paths, SHAs,
//! record ids, seconds, versions. A change to any of these words shows up
//! as a snapshot diff in review (`tests/it/snapshots/`); accept a deliberate
//! one with `INSTA_UPDATE=always cargo test --test it snapshots` (or
//! `cargo insta review`) and read the diff before committing it.

use crate::common::gomod;
use crate::common::lab::Lab;
use crate::common::{Env, Repo, assert_code};
use std::process::Output;

/// Both streams of a run, labelled, with the exit code.
fn shown(o: &Output) -> String {
    format!(
        "exit: {}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status.code().map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Redactions for what differs between runs and machines.
fn settings(env: &Env, repo: &Repo) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    let mut filters: Vec<(String, String)> = vec![
        (regex_escape(&repo.path_str()), "[REPO]".into()),
        (
            regex_escape(&env.home().display().to_string()),
            "[HOME]".into(),
        ),
    ];
    filters.extend(
        [
            (r"\b[0-9a-f]{40}\b", "[SHA]"),
            (r"\b\d{8}T\d{6}Z-[0-9a-f]{8}\b", "[ID]"),
            (r"\b\d+\.\d+s\b", "[SECS]"),
            (r"go version go[0-9.]+ [a-z0-9/]+", "go version [GO]"),
            (r"/tmp/[A-Za-z0-9._/-]+", "[TMP]"),
            (r"\(\d\d:\d\d\)", "(mm:ss)"),
            (r"\b\d+ bytes\b", "[N] bytes"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    for (a, b) in filters {
        s.add_filter(&a, b);
    }
    s
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
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
const FAILING: &str = "func TestOne(t *testing.T) {\n\tt.Log(\"about to fail\")\n\tt.Fatal(\"V is not 2\")\n}\n\nfunc TestTwo(t *testing.T) {}\n";

#[test]
fn refusal_no_suite_declared() {
    let env = Env::new();
    let repo = Repo::new(&[("README.md", "no suite here\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 2);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("refusal_no_suite", shown(&o)));
}

#[test]
fn green_on_this_machine() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = go_repo(PASSING);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("green_local", shown(&o)));
}

#[test]
fn red_on_this_machine() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = go_repo(FAILING);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("red_local", shown(&o)));
}

#[test]
fn multi_machine_summary() {
    if crate::common::skip_unless(
        std::path::Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go for the lab hosts",
    ) {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-snap-")
        .tempdir()
        .unwrap();
    let mut rows = String::new();
    for h in ["m0", "m1"] {
        rows += &format!(
            "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
            work.path().join(h).display()
        );
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    let p = env.run(&crate::common::probe_args("m0,m1", "go", "/usr/bin/go"));
    assert_code(&p, 0);
    let repo = go_repo(PASSING);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0,m1"]);
    assert_code(&o, 0);
    let mut s = settings(&env, &repo);
    s.add_filter(&regex_escape(&work.path().display().to_string()), "[WORK]");
    // stdout only: the progress lines on stderr interleave machines in
    // whatever order they answer.
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    s.bind(|| insta::assert_snapshot!("multi_machine_green", out));
}

/// What the records verbs print: the listing (date and duration columns)
/// and `records show` of a red go module (the failing test and its output,
/// read again from the kept log), with start times redacted too.
#[test]
fn records_listing_and_show_of_a_red() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = go_repo(FAILING);
    assert_code(
        &env.run(&["certify", "--repo", &repo.path_str(), "--timeout", "5m"]),
        1,
    );
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 1);
    let mut s = settings(&env, &repo);
    s.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[TIME]");
    s.add_filter(r"\b[0-9a-f]{12}\b", "[SHA12]");
    // The duration column is right-aligned: its width follows the digits.
    s.add_filter(r" +\[SECS\]", " [SECS]");
    let list = env.run(&["records", "--repo", &repo.path_str()]);
    assert_code(&list, 0);
    let show = env.run(&["records", "--repo", &repo.path_str(), "show", "last"]);
    assert_code(&show, 0);
    s.bind(|| {
        insta::assert_snapshot!("records_listing", shown(&list));
        insta::assert_snapshot!("records_show_red", shown(&show));
    });
}

/// Issue 40 item 4: four machines whose rows are past the freshness window
/// — one line each, and one `machine remeasure` line naming them all
/// (machines of `transport = "local"`: no lab needed).
#[test]
fn refusal_of_stale_machines() {
    if crate::common::skip_unless(
        std::path::Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go",
    ) {
        return;
    }
    let env = Env::new();
    let work = tempfile::Builder::new()
        .prefix("saphan-snap-")
        .tempdir()
        .unwrap();
    let ids = ["m0", "m1", "m2", "m3"];
    let mut rows = String::new();
    for h in ids {
        rows += &format!(
            "[machine.{h}]\ntransport = \"local\"\nworkhome = \"{}\"\n\n",
            work.path().join(h).display()
        );
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    let all = ids.join(",");
    assert_code(&env.run(&["machine", "measure", "--machine", &all]), 0);
    assert_code(
        &env.run(&[
            "machine",
            "probe",
            "--machine",
            &all,
            "--capability",
            "go",
            "--declared-path",
            "/usr/bin/go",
        ]),
        0,
    );
    env.write_config("[fleet]\nfreshness = \"1ns\"\n");
    let repo = go_repo(PASSING);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", &all]);
    assert_code(&o, 2);
    let mut s = settings(&env, &repo);
    s.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]");
    s.bind(|| insta::assert_snapshot!("refusal_stale_machines", shown(&o)));
}

/// `config show --repo R`: which declaration applies, then each file.
#[test]
fn config_show_of_a_repository() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"go,test,./...\"\ntimeout = \"20m\"\n");
    let repo = Repo::new(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]);
    for (k, v) in [
        ("verify.full.argv", "pytest,--junitxml=reports/junit.xml"),
        ("verify.full.report_path", "reports/junit.xml"),
        ("verify.full.report", "junit-xml"),
    ] {
        assert_code(
            &env.run(&["config", "set", "--repo", &repo.path_str(), k, v]),
            0,
        );
    }
    let o = env.run(&["config", "show", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("config_show_repo", shown(&o)));
}

/// `init` in a pytest project: the junit-xml proposal, into the
/// repository's own declaration.
#[test]
fn init_proposal_for_a_pytest_project() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"go,test,./...\"\n");
    let repo = Repo::new(&[
        ("pyproject.toml", "[project]\nname = \"calc\"\n"),
        ("tox.ini", "[testenv]\ncommands = pytest\n"),
    ]);
    let o = env
        .cmd()
        .args(["init", "--repo", &repo.path_str()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_code(&o, 0);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("init_pytest_proposal", shown(&o)));
}

/// Issue 40 item 8: a red Go module with subtests — the count says them
/// apart, and each failing name carries the command that re-runs it alone.
#[test]
fn red_with_subtests_and_rerun_lines() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let (m, mod_text) = gomod::go_mod();
    let repo = Repo::new(&[
        (m, &mod_text),
        (
            "mul/mul.go",
            "package mul\n\nfunc Mul(a, b int) int { return a + b }\n",
        ),
        (
            "mul/mul_test.go",
            "package mul\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(\"2*3 is not 6\")\n\t}\n}\n\nfunc TestTable(t *testing.T) {\n\tt.Run(\"zero\", func(t *testing.T) {})\n\tt.Run(\"one.5 (x)\", func(t *testing.T) { t.Fatal(\"bad\") })\n}\n",
        ),
    ]);
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["certify", "--repo", &repo.path_str()])
        .output()
        .unwrap();
    assert_code(&o, 1);
    settings(&env, &repo).bind(|| insta::assert_snapshot!("red_rerun_lines", shown(&o)));
}
