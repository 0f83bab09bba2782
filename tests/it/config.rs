//! config-v1 through the real binary: every refusal by its name, byte-for-byte
//! round-trips of a hand-written file, staging order, provisions.

use crate::common;

use crate::common::{Env, assert_code, text};
use saphan::config::Config;
use saphan::error::Refusal;
use saphan::home::Home;
use std::process::Output;

/// A config an operator wrote by hand: comments, blank lines, aligned keys,
/// foreign sections before, between and after saphan's.
const HAND: &str = r#"# ~/.saphan/config — hand-written
# (the team's shared settings live below)

[someone.else]
colour = "blue"   # not saphan's business
nested = { a = 1, b = [1, 2,3] }

[verify.full]
# the suite we certify with
argv    = "go,test,-count=1,-json,./..."   # keep -count=1
report  = "go-test-json"
timeout = "20m"


[fleet]
freshness = "12h"  # measured rows go stale after this
owner     = "ops"

# trailing notes
[[plugins]]
name = "x"
"#;

fn refused(o: &Output, name: &str) -> String {
    let err = common::assert_refused(o, name);
    assert_eq!(err.lines().count(), 1, "a refusal is one line:\n{err}");
    err
}

fn config(env: &Env) -> Option<String> {
    std::fs::read_to_string(env.home().join("config")).ok()
}

fn load_err(env: &Env) -> &'static str {
    Config::load(&Home::at(env.home())).unwrap_err().name()
}

#[test]
fn every_set_refusal_by_name_and_nothing_written() {
    let env = Env::new();
    let cases: &[(&str, &str, &str)] = &[
        ("verify.surface.argv", "go,test", "config-scope-reserved"),
        ("verify.surface", "x", "config-scope-reserved"),
        ("verify.bogus.argv", "go,test", "config-scope-unknown"),
        ("verify.argv", "go,test", "config-scope-missing"),
        ("verify.full.argvv", "npm,test", "config-key-unknown"),
        ("verify.provision.contract.argv", "x", "config-key-unknown"),
        ("verify.full", "x", "config-key-invalid"),
        ("verify.full.argv.more", "x", "config-key-invalid"),
        ("someone.else.colour", "red", "config-key-foreign"),
        ("verify.provision.a:b.repo", "/x", "config-alias-invalid"),
        ("verify.full.report", "exitcode", "config-no-argv"),
        ("verify.full.timeout", "20m", "config-no-argv"),
        ("verify.full.argv", "", "config-value-invalid"),
        ("verify.full.argv", "npm,,test", "config-value-invalid"),
        (
            "verify.provision.contract.repo",
            "relative/path",
            "config-value-invalid",
        ),
        (
            "verify.provision.contract.source",
            "/src/openapi.yaml",
            "provision-repo-missing",
        ),
        ("fleet.freshness", "often", "config-value-invalid"),
    ];
    for (k, v, name) in cases {
        let err = refused(&env.run(&["config", "set", k, v]), name);
        assert!(
            config(&env).is_none(),
            "{k}: refused but wrote a file ({err})"
        );
    }
    // With a suite declared, the value checks of the other keys.
    assert_code(
        &env.run(&["config", "set", "verify.full.argv", "go,test"]),
        0,
    );
    let before = config(&env).unwrap();
    for (k, v, name) in [
        ("verify.full.timeout", "20", "config-value-invalid"),
        ("verify.full.timeout", "0s", "config-value-invalid"),
        ("verify.full.report", "junit", "config-value-invalid"),
        (
            "verify.full.report_path",
            "/abs/junit.xml",
            "config-value-invalid",
        ),
        (
            "verify.full.report_path",
            "../junit.xml",
            "config-value-invalid",
        ),
        ("verify.full.argvv", "go,test", "config-key-unknown"),
    ] {
        refused(&env.run(&["config", "set", k, v]), name);
        assert_eq!(config(&env).unwrap(), before, "{k} {v} changed the file");
    }
    let err = refused(
        &env.run(&["config", "set", "verify.full.argvv", "x"]),
        "config-key-unknown",
    );
    assert!(err.contains("did you mean `argv`?"), "{err}");
}

#[test]
fn hand_written_problems_are_refused_on_every_load() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "[verify.surface]\nargv = \"x\"\n",
            "config-scope-reserved",
            &["[verify.surface]"],
        ),
        (
            "[verify.bogus]\nargv = \"x\"\n",
            "config-scope-unknown",
            &["[verify.bogus]"],
        ),
        (
            "[verify]\nargv = \"go,test\"\n",
            "config-scope-missing",
            &["directly under [verify]"],
        ),
        (
            "[verify.full]\nargvv = \"npm,test\"\n",
            "config-key-unknown",
            &[
                "`argvv`",
                "did you mean `argv`?",
                "saphan config unset verify.full.argvv",
            ],
        ),
        (
            "[verify.full]\nargv = \"go,test\"\ntimout = \"5m\"\n",
            "config-key-unknown",
            &["`timout`", "did you mean `timeout`?"],
        ),
        (
            "[verify.provision.c]\nrepo = \"/r\"\ndst = \"x\"\n",
            "config-key-unknown",
            &["`dst`", "did you mean `dest`?"],
        ),
        (
            "[verify.full]\nreport = \"exitcode\"\n",
            "config-no-argv",
            &["[verify.full]", "is declared but names no argv"],
        ),
        (
            "[verify.affected]\n",
            "config-no-argv",
            &["[verify.affected]"],
        ),
        (
            "[verify.full]\nargv = \"pytest\"\nreport = \"junit-xml\"\n",
            "config-report-path-missing",
            &["saphan config set verify.full.report_path"],
        ),
        (
            "[verify.full]\nargv = \"go,test\"\ntimeout = \"soon\"\n",
            "config-value-invalid",
            &["timeout"],
        ),
        (
            "[verify.full]\nargv = 7\n",
            "config-value-invalid",
            &["verify.full.argv"],
        ),
        (
            "[verify.full]\nargv = [\"go\", \"\"]\n",
            "config-value-invalid",
            &["argument 2 of 2 is empty"],
        ),
        (
            "[fleet]\nfreshness = \"often\"\n",
            "config-value-invalid",
            &["fleet.freshness"],
        ),
        (
            "[verify.full\nargv = 1\n",
            "config-malformed",
            &["not valid TOML"],
        ),
        (
            "verify = 3\n",
            "config-value-invalid",
            &["verify must be a table"],
        ),
    ];
    for (file, name, words) in cases {
        let env = Env::new();
        env.write_config(file);
        // config show, config set of an unrelated key, and the library load
        // certify calls all refuse it by the same name.
        let err = refused(&env.run(&["config", "show"]), name);
        for w in *words {
            assert!(err.contains(w), "{name}: missing `{w}` in:\n{err}");
        }
        assert!(!err.contains("declares no [verify.full]"), "{err}");
        refused(
            &env.run(&["config", "set", "verify.provision.zz.repo", "/x"]),
            name,
        );
        assert_eq!(load_err(&env), *name, "Config::load of:\n{file}");
        assert_eq!(
            config(&env).unwrap(),
            *file,
            "a refused file is never rewritten"
        );
    }
}

#[test]
fn foreign_sections_are_never_refused_or_touched() {
    let env = Env::new();
    let file = "[someone.else]\nargvv = 1\n[verify2]\nx = 1\n[fleet]\nfreshness = \"90m\"\nanything = [1]\n";
    env.write_config(file);
    assert_code(&env.run(&["config", "show"]), 0);
    let cfg = Config::load(&Home::at(env.home())).unwrap();
    assert_eq!(
        cfg.fleet_freshness,
        Some(std::time::Duration::from_secs(5400))
    );
    assert_eq!(cfg.full, None);
    assert_code(
        &env.run(&["config", "set", "verify.full.argv", "make,test"]),
        0,
    );
    let now = config(&env).unwrap();
    assert!(now.starts_with(file), "foreign bytes moved:\n{now}");
    assert_eq!(
        &now[file.len()..],
        "\n[verify.full]\nargv = \"make,test\"\n"
    );
}

#[test]
fn hand_written_config_round_trips_byte_for_byte() {
    let env = Env::new();
    env.write_config(HAND);

    // Reading never writes.
    assert_code(&env.run(&["config", "show"]), 0);
    assert_code(&env.run(&["--json", "config", "show"]), 0);
    assert_eq!(config(&env).unwrap(), HAND);

    // Setting a value to what it already is changes nothing.
    let o = env.run(&["config", "set", "verify.full.timeout", "20m"]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("unchanged"), "{}", text(&o).0);
    assert_eq!(config(&env).unwrap(), HAND);

    // Unsetting an absent key changes nothing.
    assert_code(&env.run(&["config", "unset", "verify.full.report_path"]), 0);
    assert_code(&env.run(&["config", "unset", "verify.affected"]), 0);
    assert_eq!(config(&env).unwrap(), HAND);

    // Set a new key, then unset it: the original bytes.
    assert_code(
        &env.run(&["config", "set", "verify.full.report_path", "out/*.xml"]),
        0,
    );
    let mid = config(&env).unwrap();
    assert_eq!(
        mid,
        HAND.replace(
            "timeout = \"20m\"\n",
            "timeout = \"20m\"\nreport_path = \"out/*.xml\"\n"
        ),
        "setting a key touched other bytes"
    );
    assert_code(&env.run(&["config", "unset", "verify.full.report_path"]), 0);
    assert_eq!(config(&env).unwrap(), HAND);

    // Replace a value: only that value's bytes change; its comment stays.
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.full.argv",
            "go,test,-count=1,-json,-race,./...",
        ]),
        0,
    );
    assert_eq!(
        config(&env).unwrap(),
        HAND.replace("./...\"   # keep", "-race,./...\"   # keep")
    );
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.full.argv",
            "go,test,-count=1,-json,./...",
        ]),
        0,
    );
    assert_eq!(config(&env).unwrap(), HAND);

    // A whole new scope, then a whole-block unset: the original bytes.
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.affected.argv",
            "saphan,adapter,go-affected",
        ]),
        0,
    );
    assert_code(
        &env.run(&["config", "set", "verify.affected.report", "go-test-json"]),
        0,
    );
    assert_code(
        &env.run(&["config", "set", "verify.affected.timeout", "5m"]),
        0,
    );
    let mid = config(&env).unwrap();
    assert!(
        mid.contains("timeout = \"20m\"\n\n[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\ntimeout = \"5m\"\n\n\n[fleet]"),
        "new scope not grouped after [verify.full]:\n{mid}"
    );
    assert_code(&env.run(&["config", "unset", "verify.affected"]), 0);
    assert_eq!(config(&env).unwrap(), HAND);

    // Key by key back out, too.
    assert_code(&env.run(&["config", "set", "verify.affected.argv", "a"]), 0);
    assert_code(
        &env.run(&["config", "set", "verify.affected.timeout", "5m"]),
        0,
    );
    assert_code(&env.run(&["config", "unset", "verify.affected.timeout"]), 0);
    assert_code(&env.run(&["config", "unset", "verify.affected.argv"]), 0);
    assert_eq!(config(&env).unwrap(), HAND);

    // A provision block, staged and removed.
    for (k, v) in [
        ("verify.provision.contract.repo", "/src/the-engine"),
        (
            "verify.provision.contract.source",
            "/src/the-contract/openapi.yaml",
        ),
        ("verify.provision.contract.dest", ".provision/openapi.yaml"),
    ] {
        assert_code(&env.run(&["config", "set", k, v]), 0);
    }
    let cfg = Config::load(&Home::at(env.home())).unwrap();
    assert_eq!(cfg.provisions.len(), 1);
    assert_eq!(cfg.provisions[0].dest, ".provision/openapi.yaml");
    assert_code(
        &env.run(&["config", "unset", "verify.provision.contract"]),
        0,
    );
    assert_eq!(config(&env).unwrap(), HAND);

    // fleet.freshness is saphan's: replaced in place, comment kept.
    assert_code(&env.run(&["config", "set", "fleet.freshness", "6h"]), 0);
    assert_eq!(config(&env).unwrap(), HAND.replace("\"12h\"", "\"6h\""));
}

#[test]
fn staging_order_into_and_out_of_junit_xml() {
    let env = Env::new();
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.full.argv",
            "pytest,--junitxml=reports/junit.xml",
        ]),
        0,
    );
    // The kind before its path: refused.
    refused(
        &env.run(&["config", "set", "verify.full.report", "junit-xml"]),
        "config-staging",
    );
    // The spec's order: path, then kind.
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.full.report_path",
            "reports/junit.xml",
        ]),
        0,
    );
    assert_code(
        &env.run(&["config", "set", "verify.full.report", "junit-xml"]),
        0,
    );
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.argv, ["pytest", "--junitxml=reports/junit.xml"]);
    assert_eq!(suite.report, Some(saphan::report::ReportKind::JunitXml));
    assert_eq!(suite.report_path.as_deref(), Some("reports/junit.xml"));
    let show = text(&env.run(&["config", "show"])).0;
    assert!(show.contains("report       junit-xml"), "{show}");

    // Leaving: clearing the path while junit-xml is selected is refused…
    let before = config(&env).unwrap();
    let err = refused(
        &env.run(&["config", "unset", "verify.full.report_path"]),
        "config-staging",
    );
    assert!(err.contains("change the kind first"), "{err}");
    assert_eq!(config(&env).unwrap(), before);
    // …so the kind first, then the path.
    assert_code(
        &env.run(&["config", "set", "verify.full.report", "exitcode"]),
        0,
    );
    assert_code(&env.run(&["config", "unset", "verify.full.report_path"]), 0);
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.report, Some(saphan::report::ReportKind::Exitcode));
    assert_eq!(suite.report_path, None);
}

#[test]
fn argv_with_no_report_is_the_exitcode_floor() {
    let env = Env::new();
    assert_code(
        &env.run(&["config", "set", "verify.full.argv", "npm,test"]),
        0,
    );
    assert_eq!(
        config(&env).unwrap(),
        "[verify.full]\nargv = \"npm,test\"\n"
    );
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.report, None);
    assert_eq!(suite.report_kind(), saphan::report::ReportKind::Exitcode);
    let show = text(&env.run(&["config", "show"])).0;
    assert!(
        show.contains("exitcode (not declared: the exitcode floor)"),
        "{show}"
    );
    let o = env.run(&["--json", "config", "show"]);
    assert_code(&o, 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verify"]["full"]["report"], "exitcode");
    assert_eq!(v["verify"]["full"]["report_declared"], false);
    assert_eq!(
        v["verify"]["full"]["argv"],
        serde_json::json!(["npm", "test"])
    );
}

#[test]
fn argv_as_a_toml_array() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"echo a,b\"]\n");
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.argv, ["sh", "-c", "echo a,b"]);
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.full.argv",
            r#"["sh", "-c", "echo c,d"]"#,
        ]),
        0,
    );
    let suite = Config::load(&Home::at(env.home())).unwrap().full.unwrap();
    assert_eq!(suite.argv, ["sh", "-c", "echo c,d"]);
}

#[test]
fn provision_without_repo_names_the_repair_command() {
    let env = Env::new();
    let file = "[verify.provision.contract]\nsource = \"/src/the-contract/openapi.yaml\"\ndest   = \".provision/openapi.yaml\"\n";
    env.write_config(file);
    let err = refused(&env.run(&["config", "show"]), "provision-repo-missing");
    assert!(
        err.contains(
            "saphan config set verify.provision.contract.repo <absolute path of the repository>"
        ),
        "{err}"
    );
    assert_eq!(load_err(&env), "provision-repo-missing");
    // The named command repairs it.
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.provision.contract.repo",
            "/src/the-engine",
        ]),
        0,
    );
    assert_eq!(
        config(&env).unwrap(),
        format!("{file}repo = \"/src/the-engine\"\n")
    );
    let cfg = Config::load(&Home::at(env.home())).unwrap();
    assert_eq!(
        cfg.provisions[0].repo,
        std::path::PathBuf::from("/src/the-engine")
    );
    assert_eq!(
        cfg.provisions[0].source,
        std::path::PathBuf::from("/src/the-contract/openapi.yaml")
    );
}

#[test]
fn provision_staging_repo_first_and_last() {
    let env = Env::new();
    let k = |s: &str| format!("verify.provision.contract.{s}");
    refused(
        &env.run(&["config", "set", &k("dest"), ".provision/x"]),
        "provision-repo-missing",
    );
    assert_code(
        &env.run(&["config", "set", &k("repo"), "/src/the-engine"]),
        0,
    );
    // Staged: config show works, the load certify uses refuses by name.
    let show = text(&env.run(&["config", "show"])).0;
    assert!(show.contains("not set yet"), "{show}");
    assert_eq!(load_err(&env), "provision-incomplete");
    assert_code(
        &env.run(&["config", "set", &k("source"), "/src/c/openapi.yaml"]),
        0,
    );
    assert_eq!(load_err(&env), "provision-incomplete");
    assert_code(
        &env.run(&["config", "set", &k("dest"), ".provision/openapi.yaml"]),
        0,
    );
    Config::load(&Home::at(env.home())).unwrap();
    // repo goes last, or with the whole block.
    refused(
        &env.run(&["config", "unset", &k("repo")]),
        "provision-repo-missing",
    );
    for hostile in ["../outside", ".git/hooks/x", "/etc/passwd"] {
        refused(
            &env.run(&["config", "set", &k("dest"), hostile]),
            "provision-dest-hostile",
        );
    }
    assert_code(
        &env.run(&["config", "unset", "verify.provision.contract"]),
        0,
    );
    assert_eq!(config(&env).unwrap(), "");
}

#[test]
fn argv_goes_first_and_last() {
    let env = Env::new();
    assert_code(
        &env.run(&["config", "set", "verify.full.argv", "npm,test"]),
        0,
    );
    assert_code(
        &env.run(&["config", "set", "verify.full.timeout", "20m"]),
        0,
    );
    let err = refused(
        &env.run(&["config", "unset", "verify.full.argv"]),
        "config-no-argv",
    );
    assert!(err.contains("saphan config unset verify.full"), "{err}");
    assert_code(&env.run(&["config", "unset", "verify.full.timeout"]), 0);
    assert_code(&env.run(&["config", "unset", "verify.full.argv"]), 0);
    assert_eq!(config(&env).unwrap(), "");
}

#[test]
fn a_hand_written_misspelling_is_removed_by_name() {
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"npm,test\"\nargvv = \"npm,test\"\n\n[verify.bogus]\nx = 1\n",
    );
    refused(&env.run(&["config", "show"]), "config-key-unknown");
    // Each problem is removed by name while the other one is still there.
    assert_code(&env.run(&["config", "unset", "verify.full.argvv"]), 0);
    refused(&env.run(&["config", "show"]), "config-scope-unknown");
    // A set is refused while the file still has a problem.
    refused(
        &env.run(&["config", "set", "verify.full.timeout", "5m"]),
        "config-scope-unknown",
    );
    assert_code(&env.run(&["config", "unset", "verify.bogus"]), 0);
    assert_code(&env.run(&["config", "show"]), 0);
    assert_eq!(
        config(&env).unwrap(),
        "[verify.full]\nargv = \"npm,test\"\n"
    );
    // A misspelling that is not in the file is still refused.
    refused(
        &env.run(&["config", "unset", "verify.full.argvv"]),
        "config-key-unknown",
    );
}

#[test]
fn json_refusal_and_json_results_are_one_object() {
    let env = Env::new();
    let o = env.run(&["--json", "config", "set", "verify.surface.argv", "x"]);
    assert_code(&o, 2);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"], "config-scope-reserved");
    assert_eq!(v["exit_code"], 2);

    let o = env.run(&["--json", "config", "set", "verify.full.argv", "go,test"]);
    assert_code(&o, 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["changed"], true);
    assert_eq!(v["value"], "\"go,test\"");

    let o = env.run(&["config", "show", "--json"]);
    assert_code(&o, 0);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["verify"]["full"]["argv"],
        serde_json::json!(["go", "test"])
    );
    assert_eq!(v["verify"]["affected"], serde_json::Value::Null);
    assert_eq!(v["fleet"]["freshness"], "24h");
    assert_eq!(v["fleet"]["freshness_source"], "default");
}

#[test]
fn the_spec_examples_run_as_written() {
    let env = Env::new();
    for args in [
        ["config", "set", "verify.full.argv", "npm,test"],
        ["config", "set", "verify.full.report", "exitcode"],
        ["config", "set", "verify.full.timeout", "20m"],
        [
            "config",
            "set",
            "verify.affected.argv",
            "saphan,adapter,go-affected",
        ],
        ["config", "set", "verify.affected.report", "go-test-json"],
        ["config", "set", "verify.affected.timeout", "5m"],
        [
            "config",
            "set",
            "verify.provision.contract.repo",
            "/Users/you/src/the-engine",
        ],
        [
            "config",
            "set",
            "verify.provision.contract.source",
            "/Users/you/src/the-contract/openapi.yaml",
        ],
        [
            "config",
            "set",
            "verify.provision.contract.dest",
            ".provision/openapi.yaml",
        ],
    ] {
        assert_code(&env.run(&args), 0);
    }
    let cfg = Config::load(&Home::at(env.home())).unwrap();
    assert_eq!(
        cfg.full.unwrap().timeout,
        Some(std::time::Duration::from_secs(1200))
    );
    assert_eq!(
        cfg.affected.unwrap().argv,
        ["saphan", "adapter", "go-affected"]
    );
    assert_eq!(cfg.provisions[0].alias, "contract");
}

#[test]
fn concurrent_sets_all_land() {
    let env = Env::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            env.cmd()
                .args([
                    "config",
                    "set",
                    &format!("verify.provision.p{i}.repo"),
                    &format!("/src/r{i}"),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_code(&o, 0);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&env.run(&["--json", "config", "show"]).stdout).unwrap();
    assert_eq!(v["verify"]["provision"].as_array().unwrap().len(), 8, "{v}");
}

/// Issue 15.9: arguments that are not UTF-8 are a usage refusal (one line,
/// exit 2), never a panic (exit 101) — whichever verb and position.
#[test]
fn non_utf8_arguments_are_a_usage_refusal_not_a_panic() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let bad = OsStr::from_bytes(b"\xff\xfe");
    let dashed = OsStr::from_bytes(b"--\xff");
    let cases: Vec<Vec<&OsStr>> = vec![
        vec![bad],
        vec![dashed],
        vec![OsStr::new("certify"), bad],
        vec![OsStr::new("--json"), OsStr::new("certify"), bad],
        vec![
            OsStr::new("config"),
            OsStr::new("set"),
            bad,
            OsStr::new("x"),
        ],
        vec![
            OsStr::new("config"),
            OsStr::new("set"),
            OsStr::new("verify.full.argv"),
            bad,
        ],
        vec![OsStr::new("records"), OsStr::new("--sha"), bad],
    ];
    for args in cases {
        let o = env.cmd().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(101), "{args:?} panicked:\n{err}");
        assert!(!err.contains("panicked"), "{args:?}:\n{err}");
        assert_eq!(o.status.code(), Some(2), "{args:?}:\n{err}");
        // The usage refusal: its first line, then clap's hints (indented).
        assert!(err.starts_with("saphan: usage: "), "{args:?}:\n{err}");
    }
}

/// Run `args` with a generous bound: a command that hangs is killed and the
/// test fails (instead of hanging the test run).
fn run_bounded(env: &Env, args: &[&str]) -> Output {
    let mut child = env
        .cmd()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{args:?} hung: {}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(p: &std::path::Path) {
    let o = std::process::Command::new("mkfifo")
        .arg(p)
        .output()
        .unwrap();
    assert!(o.status.success(), "mkfifo {}", p.display());
}

/// Issue 15.8: a FIFO or a device as the config is refused by name (never
/// read, never a hang, never unbounded memory); an oversized config is
/// refused by size.
#[test]
fn special_files_as_the_config_are_refused_not_read() {
    let env = Env::new();
    let cfg = env.home().join("config");
    std::fs::create_dir_all(env.home()).unwrap();
    mkfifo(&cfg);
    for args in [
        &["config", "show"][..],
        &["config", "set", "verify.full.argv", "go,test"][..],
    ] {
        let err = common::assert_refused(&run_bounded(&env, args), "config-not-regular");
        assert!(err.contains("is a FIFO"), "{err}");
    }
    std::fs::remove_file(&cfg).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cfg).unwrap();
    let err = common::assert_refused(
        &run_bounded(&env, &["config", "show"]),
        "config-not-regular",
    );
    assert!(err.contains("is a device"), "{err}");
    assert!(
        std::fs::symlink_metadata(&cfg)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    std::fs::remove_file(&cfg).unwrap();
    let mut big = String::from("# padding\n");
    while big.len() <= 1024 * 1024 {
        big.push_str("# ........................................................\n");
    }
    std::fs::write(&cfg, &big).unwrap();
    common::assert_refused(&run_bounded(&env, &["config", "show"]), "config-too-large");
}

/// Issue 15.8: a FIFO as a provision source is refused by name before the
/// lock; nothing is measured or recorded.
#[test]
fn a_fifo_provision_source_is_refused_not_opened() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("contract.yaml");
    mkfifo(&src);
    let repo = common::Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    env.write_config(&format!(
        "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.contract]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \".provision/c.yaml\"\n",
        repo.path().display(),
        src.display()
    ));
    let o = run_bounded(&env, &["certify", "--repo", &repo.path_str()]);
    let err = common::assert_refused(&o, "provision-source-unreadable");
    assert!(err.contains("is a FIFO"), "{err}");
    assert!(!repo.path().join(".git/saphan/attempts.jsonl").exists());
}

/// Issue 15.10: edits keep every byte outside the edited span, even in a
/// table saphan does not own whose dotted keys toml_edit would regroup; and
/// `set` then `unset` gives back the file byte for byte.
#[test]
fn set_then_unset_restores_the_file_byte_for_byte() {
    let env = Env::new();
    for original in [
        "# mine\n[tool]\nprobe.timeout = 5\nname = \"x\"   # aligned\nprobe.retries = 3\n",
        "[verify.full]\nargv = \"a\"\n\n[tool]\nprobe.timeout = 5\nname = \"x\"\nprobe.retries = 3\n\n[other]\nq.a = 1\nz = 2\nq.b = 3\n",
    ] {
        env.write_config(original);
        let cfg = env.home().join("config");
        let (key, value, unset) = if original.starts_with("[verify.full]") {
            ("verify.full.timeout", "20m", "verify.full.timeout")
        } else {
            ("verify.full.argv", "go,test", "verify.full")
        };
        assert_code(&env.run(&["config", "set", key, value]), 0);
        let after = std::fs::read_to_string(&cfg).unwrap();
        assert!(
            after.contains("probe.timeout = 5\nname = \"x\""),
            "the foreign table was reordered:\n{after}"
        );
        assert_code(&env.run(&["config", "unset", unset]), 0);
        assert_eq!(std::fs::read(&cfg).unwrap(), original.as_bytes());
    }
}

/// Issue 15.10: two homes whose `config` links to one file lose no update
/// under concurrency: the lock is taken on the file that is written.
#[test]
fn concurrent_edits_through_symlinked_configs_lose_nothing() {
    let shared_dir = tempfile::tempdir().unwrap();
    let shared = shared_dir.path().join("config.toml");
    std::fs::write(&shared, "# shared\n").unwrap();
    let homes = [Env::new(), Env::new()];
    for h in &homes {
        std::fs::create_dir_all(h.home()).unwrap();
        std::os::unix::fs::symlink(&shared, h.home().join("config")).unwrap();
    }
    let per_home = 12;
    let mut children = Vec::new();
    for i in 0..per_home {
        for (k, h) in homes.iter().enumerate() {
            let alias = format!("p{k}x{i}");
            children.push((
                alias.clone(),
                h.cmd()
                    .args([
                        "config",
                        "set",
                        &format!("verify.provision.{alias}.repo"),
                        &format!("/r/{alias}"),
                    ])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            ));
        }
    }
    for (alias, c) in children {
        let o = c.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{alias}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let text = std::fs::read_to_string(&shared).unwrap();
    let missing: Vec<String> = (0..per_home)
        .flat_map(|i| (0..2).map(move |k| format!("p{k}x{i}")))
        .filter(|a| !text.contains(&format!("[verify.provision.{a}]")))
        .collect();
    assert!(missing.is_empty(), "lost updates: {missing:?}\n{text}");
    for h in &homes {
        let link = h.home().join("config");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}

/// A pid that no longer exists (a child that has been reaped).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// Issue 15.11: what killed runs leave (`.saphan-tmp-<pid>-*` beside the
/// config, `$TMPDIR/saphan-run-<pid>-*`) is removed by the next run — only
/// a dead process's, never a live one's or another name.
#[test]
fn leftovers_of_killed_runs_are_swept_and_live_ones_kept() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let tmp = tempfile::tempdir().unwrap();
    let dead = dead_pid();
    let live = std::process::id();
    let mk_file = |p: std::path::PathBuf| {
        std::fs::write(&p, "x").unwrap();
        p
    };
    let mk_dir = |p: std::path::PathBuf| {
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("stdout"), "x").unwrap();
        p
    };
    let dead_cfg = mk_file(env.home().join(format!(".saphan-tmp-{dead}-abc")));
    let live_cfg = mk_file(env.home().join(format!(".saphan-tmp-{live}-abc")));
    let other_cfg = mk_file(env.home().join(".saphan-tmp-nopid"));
    let dead_run = mk_dir(tmp.path().join(format!("saphan-run-{dead}-xyz")));
    let live_run = mk_dir(tmp.path().join(format!("saphan-run-{live}-xyz")));
    let other_run = mk_dir(tmp.path().join("saphan-runner-1-x"));
    assert_code(&env.run(&["config", "set", "verify.full.timeout", "5m"]), 0);
    assert!(!dead_cfg.exists(), "a dead run's config copy stays");
    assert!(live_cfg.exists() && other_cfg.exists());
    let repo = common::Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let o = env
        .cmd()
        .env("TMPDIR", tmp.path())
        .args(["certify", "--repo", &repo.path_str()])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert!(!dead_run.exists(), "a dead run's directory stays");
    assert!(live_run.exists() && other_run.exists());
    // This run left nothing of its own behind.
    let own: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("saphan-run-") && !n.contains(&format!("-{live}-")))
        .collect();
    assert!(own.is_empty(), "{own:?}");
}

/// Issue 15.11: a newline (or an escape sequence) in `--sha`, a key or a
/// dest is echoed escaped: the refusal stays one line.
#[test]
fn control_characters_in_arguments_keep_the_refusal_one_line() {
    let env = Env::new();
    let repo = common::Repo::new(&[("a", "a")]);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "config".into(),
                "set".into(),
                "verify.full.ar\ngv".into(),
                "x".into(),
            ],
            "config-key-unknown",
        ),
        (
            vec![
                "certify".into(),
                "--repo".into(),
                repo.path_str(),
                "--sha".into(),
                "abc\nsaphan: forged: \u{1b}[2K".into(),
            ],
            "bad-revision",
        ),
    ];
    for (args, name) in cases {
        let o = env.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = common::assert_refused(&o, name);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!err.contains('\u{1b}'), "{err:?}");
        assert!(err.contains("\\n"), "{err}");
    }
    env.write_config(&format!(
        "[verify.full]\nargv = \"x\"\n\n[verify.provision.a]\nrepo = \"{}\"\nsource = \"/etc/hostname\"\n",
        repo.path().display()
    ));
    let o = env.run(&["config", "set", "verify.provision.a.dest", "/x\ny"]);
    let err = common::assert_refused(&o, "provision-dest-hostile");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// issue 21.9: saphan's own `[verify]` table written with interleaved dotted
/// keys — editing one key changes only that key's line (toml_edit alone
/// would regroup the `full.*` keys together).
#[test]
fn interleaved_dotted_keys_change_only_the_edited_line() {
    let env = Env::new();
    let hand = "# ours\n[verify]\nfull.argv = \"go,test,-json,./...\"  # the suite\naffected.argv = \"saphan,affected-go\"\nfull.timeout = \"20m\"\naffected.timeout = \"5m\"\n";
    env.write_config(hand);
    assert_code(
        &env.run(&["config", "set", "verify.full.timeout", "30m"]),
        0,
    );
    assert_eq!(config(&env).unwrap(), hand.replace("\"20m\"", "\"30m\""));
    assert_code(
        &env.run(&["config", "set", "verify.affected.timeout", "6m"]),
        0,
    );
    assert_eq!(
        config(&env).unwrap(),
        hand.replace("\"20m\"", "\"30m\"")
            .replace("\"5m\"", "\"6m\"")
    );
    assert_code(&env.run(&["config", "unset", "verify.full.timeout"]), 0);
    assert_eq!(
        config(&env).unwrap(),
        hand.replace("full.timeout = \"20m\"\n", "")
            .replace("\"5m\"", "\"6m\"")
    );
    // A new key lands after its own table's last line, written the same way.
    assert_code(
        &env.run(&["config", "set", "verify.full.timeout", "20m"]),
        0,
    );
    assert_eq!(
        config(&env).unwrap(),
        hand.replace("full.timeout = \"20m\"\n", "")
            .replace("\"5m\"", "\"6m\"")
            .replace("# the suite\n", "# the suite\nfull.timeout = \"20m\"\n")
    );
}
