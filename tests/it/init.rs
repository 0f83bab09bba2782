//! `saphan init` through the real binary: detection in the fixed order, the
//! two keys it shows, asking (default no), no terminal → nothing written
//! unless --yes, nothing recognised → nothing proposed.

use crate::common::{Env, Repo, assert_code, have, skip_unless, text};
use saphan::config::Config;
use saphan::home::Home;
use std::path::Path;
use std::process::{Command, Stdio};

fn config(env: &Env) -> Option<String> {
    std::fs::read_to_string(env.home().join("config")).ok()
}

/// `saphan init --repo DIR` with stdin not a terminal.
fn init(env: &Env, dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut c = env.cmd();
    c.arg("init").arg("--repo").arg(dir).args(extra);
    c.stdin(Stdio::null());
    c.output().unwrap()
}

fn dir_with(files: &[&str]) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("saphan-init-")
        .tempdir()
        .unwrap();
    for f in files {
        std::fs::write(d.path().join(f), "").unwrap();
    }
    d
}

/// Each marker alone: the stack, and the exact two commands.
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "go.mod",
        "go",
        "go,test,-count=1,-json,./...",
        "go-test-json",
    ),
    ("package.json", "node", "npm,test", "exitcode"),
    ("Cargo.toml", "rust", "cargo,test", "exitcode"),
    ("pyproject.toml", "python", "pytest", "exitcode"),
    ("Package.swift", "swift", "swift,test", "exitcode"),
    ("pom.xml", "maven", "mvn,test", "exitcode"),
    ("build.gradle", "gradle", "gradle,test", "exitcode"),
    ("build.gradle.kts", "gradle", "gradle,test", "exitcode"),
];

#[test]
fn each_marker_is_detected_and_shows_its_two_keys_without_writing() {
    for (marker, stack, argv, report) in CASES {
        let env = Env::new();
        let d = dir_with(&[marker]);
        let o = init(&env, d.path(), &[]);
        assert_code(&o, 0);
        let out = text(&o).0;
        assert!(
            out.contains(&format!("detected: a {stack} project ({marker})")),
            "{marker}:\n{out}"
        );
        assert!(
            out.contains(&format!(
                "  saphan config set verify.full.argv \"{argv}\"\n"
            )),
            "{marker}:\n{out}"
        );
        assert!(
            out.contains(&format!(
                "  saphan config set verify.full.report {report}\n"
            )),
            "{marker}:\n{out}"
        );
        assert!(out.contains("nothing was written"), "{out}");
        assert!(config(&env).is_none(), "{marker}: wrote without a terminal");

        let o = init(&env, d.path(), &["--json"]);
        assert_code(&o, 0);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["detected"]["stack"], *stack);
        assert_eq!(v["detected"]["marker"], *marker);
        assert_eq!(v["keys"][0]["value"], *argv);
        assert_eq!(v["keys"][1]["value"], *report);
        assert_eq!(v["written"], false);
        assert_eq!(v["outcome"], "no-terminal");
        assert!(config(&env).is_none());
    }
}

#[test]
fn first_match_in_the_fixed_order() {
    let env = Env::new();
    // A Go service that also carries a package.json resolves to Go.
    let d = dir_with(&["package.json", "go.mod"]);
    let v: serde_json::Value =
        serde_json::from_slice(&init(&env, d.path(), &["--json"]).stdout).unwrap();
    assert_eq!(v["detected"]["stack"], "go");
    // Every later marker loses to every earlier one.
    let all: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    for i in 0..all.len() {
        let d = dir_with(&all[i..]);
        let v: serde_json::Value =
            serde_json::from_slice(&init(&env, d.path(), &["--json"]).stdout).unwrap();
        assert_eq!(v["detected"]["marker"], all[i], "markers {:?}", &all[i..]);
    }
    // A marker below the root does not count.
    let d = dir_with(&[]);
    std::fs::create_dir(d.path().join("web")).unwrap();
    std::fs::write(d.path().join("web/package.json"), "{}").unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&init(&env, d.path(), &["--json"]).stdout).unwrap();
    assert_eq!(v["detected"], serde_json::Value::Null);
}

#[test]
fn yes_writes_exactly_the_two_keys() {
    let env = Env::new();
    let d = dir_with(&["go.mod"]);
    let o = init(&env, d.path(), &["--yes"]);
    assert_code(&o, 0);
    assert!(
        text(&o)
            .0
            .contains("Wrote verify.full.argv and verify.full.report")
    );
    assert_eq!(
        config(&env).unwrap(),
        "[verify.full]\nargv = \"go,test,-count=1,-json,./...\"\nreport = \"go-test-json\"\n"
    );
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.argv, ["go", "test", "-count=1", "-json", "./..."]);
    assert_eq!(suite.report, Some(saphan::report::ReportKind::GoTestJson));
}

#[test]
fn yes_leaves_every_other_byte_of_the_config() {
    let env = Env::new();
    let hand = "# mine\n[someone.else]\nx = 1 # keep\n\n[fleet]\nfreshness = \"6h\"\n";
    env.write_config(hand);
    let d = dir_with(&["Package.swift"]);
    assert_code(&init(&env, d.path(), &["--yes"]), 0);
    assert_eq!(
        config(&env).unwrap(),
        format!("{hand}\n[verify.full]\nargv = \"swift,test\"\nreport = \"exitcode\"\n")
    );
}

#[test]
fn nothing_recognised_proposes_nothing() {
    let env = Env::new();
    let d = dir_with(&["README.md", "Makefile"]);
    for extra in [&[][..], &["--yes"][..]] {
        let o = init(&env, d.path(), extra);
        assert_code(&o, 0);
        let out = text(&o).0;
        assert!(out.contains("recognised no stack"), "{out}");
        assert!(out.contains("Proposing nothing"), "{out}");
        assert!(!out.contains("verify.full.argv \"go"), "{out}");
        assert!(
            config(&env).is_none(),
            "wrote for an unrecognised repository"
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&init(&env, d.path(), &["--json", "--yes"]).stdout).unwrap();
    assert_eq!(v["detected"], serde_json::Value::Null);
    assert_eq!(v["keys"], serde_json::Value::Null);
    assert_eq!(v["outcome"], "nothing-recognised");
    assert_eq!(v["written"], false);
}

#[test]
fn an_existing_declaration_is_not_replaced() {
    let env = Env::new();
    let mine = "[verify.full]\nargv = \"make,check\"\n";
    env.write_config(mine);
    let d = dir_with(&["Cargo.toml"]);
    let o = init(&env, d.path(), &["--yes"]);
    assert_code(&o, 0);
    let out = text(&o).0;
    assert!(out.contains("already declared"), "{out}");
    assert!(
        out.contains("saphan config set verify.full.argv \"cargo,test\""),
        "{out}"
    );
    assert_eq!(config(&env).unwrap(), mine);
}

#[test]
fn a_broken_config_is_refused_before_proposing() {
    let env = Env::new();
    env.write_config("[verify.full]\nargvv = \"x\"\n");
    let d = dir_with(&["go.mod"]);
    let o = init(&env, d.path(), &["--yes"]);
    assert_code(&o, 2);
    assert!(text(&o).1.starts_with("saphan: config-key-unknown: "));
    assert_eq!(config(&env).unwrap(), "[verify.full]\nargvv = \"x\"\n");
}

#[test]
fn repo_defaults_to_the_git_top_and_cwd() {
    let env = Env::new();
    let repo = Repo::new(&[("go.mod", "module x\n"), ("sub/README", "x\n")]);
    // --repo pointing into a subdirectory looks at the repository root.
    let v: serde_json::Value =
        serde_json::from_slice(&init(&env, &repo.path().join("sub"), &["--json"]).stdout).unwrap();
    assert_eq!(v["detected"]["stack"], "go");
    // No --repo: the current directory.
    let o = env
        .cmd()
        .args(["--json", "init"])
        .current_dir(repo.path().join("sub"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&o, 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["detected"]["stack"], "go");
    // A path that is not a directory is refused by name.
    let o = init(&env, &repo.path().join("nope"), &[]);
    assert_code(&o, 2);
    assert!(text(&o).1.starts_with("saphan: init-repo-missing: "));
}

/// Run init on a pseudo-terminal (util-linux `script`), typing `answer`.
fn init_on_a_tty(env: &Env, dir: &Path, answer: &str) -> std::process::Output {
    let line = format!(
        "{} init --repo {}",
        env!("CARGO_BIN_EXE_saphan"),
        dir.display()
    );
    let mut child = Command::new("timeout")
        .args(["60", "script", "-qec", &line, "/dev/null"])
        .env("SAPHAN_HOME", env.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn on_a_terminal_it_asks_and_defaults_to_no() {
    if skip_unless(
        have("script") && have("timeout"),
        "util-linux `script` is needed to give init a terminal",
    ) {
        return;
    }
    let env = Env::new();
    let d = dir_with(&["pom.xml"]);
    for answer in ["\n", "n\n", "whatever\n"] {
        let o = init_on_a_tty(&env, d.path(), answer);
        assert_code(&o, 0);
        let out = text(&o).0;
        assert!(out.contains("Write them? [y/N]"), "{out}");
        assert!(out.contains("Nothing written."), "{answer:?}: {out}");
        assert!(config(&env).is_none(), "{answer:?} wrote the config");
    }
    let o = init_on_a_tty(&env, d.path(), "y\n");
    assert_code(&o, 0);
    assert_eq!(
        config(&env).unwrap(),
        "[verify.full]\nargv = \"mvn,test\"\nreport = \"exitcode\"\n"
    );
}
