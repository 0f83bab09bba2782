//! Why a test failed (issue 21.5) and remote text escaped (issue 20.7), end
//! to end through the real binary on real repositories: a red Go module
//! shows each failing test's own lines under its name, a red JUnit suite its
//! failure message, `--json` carries both, `records show ID --log` prints
//! the kept suite log and refuses one that was changed or removed, and no
//! escape sequence a suite wrote reaches the human output.

use crate::common;

use crate::common::{Env, Repo, assert_code, assert_refused, text};
use serde_json::Value;

fn certify(env: &Env, repo: &Repo, json: bool) -> std::process::Output {
    let mut c = env.cmd();
    common::gomod::go_env(&mut c);
    c.env("GOFLAGS", "-mod=mod")
        .args(["certify", "--repo", &repo.path_str()]);
    if json {
        c.arg("--json");
    }
    c.output().unwrap()
}

const GO_MOD: &str = "module example.com/why\n\ngo 1.19\n";

/// TestBad writes 25 t.Log lines and one t.Error (26 of its own), a subtest
/// that fails with its own line, and TestGood chatters and passes.
const W_TEST: &str = r#"package w

import "testing"

func TestGood(t *testing.T) {
	t.Log("passing chatter nobody needs")
}

func TestBad(t *testing.T) {
	for i := 0; i < 25; i++ {
		t.Logf("bad step %d", i)
	}
	t.Run("sub", func(t *testing.T) { t.Error("sub says no") })
	t.Error("bad result: got 2, want 1")
}
"#;

#[test]
fn red_go_module_shows_each_failing_tests_own_lines_under_its_name() {
    if common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = Repo::new(&[("go.mod", GO_MOD), ("w/w_test.go", W_TEST)]);

    let o = certify(&env, &repo, false);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    let all = format!("{out}\n{err}");
    // The record's lines are all still there.
    assert!(
        out.contains(
            "failing (2):\n  example.com/why/w.TestBad/sub — re-run: go test -run '^TestBad$/^sub$' ./w\n  example.com/why/w.TestBad — re-run: go test -run '^TestBad$' ./w\n"
        ),
        "{all}"
    );
    assert!(out.contains("record: "), "{all}");
    assert!(
        out.contains("verified: refs/saphan/verified not moved"),
        "{all}"
    );
    // Under each failing test, its own lines; 26 written, the last 20 kept.
    assert!(out.contains("output of failing tests:\n"), "{all}");
    let sub = out
        .find("  example.com/why/w.TestBad/sub:\n")
        .unwrap_or_else(|| panic!("the subtest's output is under its own name:\n{all}"));
    assert!(
        out[sub..].contains("sub says no"),
        "the subtest's own line is under it:\n{all}"
    );
    let bad = out
        .find("  example.com/why/w.TestBad (6 earlier lines dropped):\n")
        .unwrap_or_else(|| panic!("TestBad's output, with the dropped count:\n{all}"));
    let block: Vec<&str> = out[bad..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect();
    assert_eq!(block.len(), 20, "{all}");
    assert!(block[0].contains("bad step 6"), "{block:?}");
    assert!(block[18].contains("bad step 24"), "{block:?}");
    assert!(block[19].contains("bad result: got 2, want 1"), "{block:?}");
    assert!(
        !out[bad..].contains("sub says no"),
        "the subtest's line is not its parent's: {all}"
    );
    assert!(
        !all.contains("=== RUN"),
        "test2json's framing is not the test's output: {all}"
    );
    assert!(
        !all.contains("passing chatter"),
        "a passing test's output is not shown: {all}"
    );

    // --json carries the same, beside the record's fields (not in the record).
    let o = certify(&env, &repo, true);
    assert_code(&o, 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let outs = v["test_output"].as_array().expect("test_output is a list");
    assert_eq!(outs.len(), 2, "{v:#}");
    assert_eq!(outs[0]["test"], "example.com/why/w.TestBad/sub");
    assert_eq!(outs[1]["test"], "example.com/why/w.TestBad");
    assert_eq!(outs[1]["dropped"], 6);
    let lines = outs[1]["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 20);
    assert!(
        lines[19]
            .as_str()
            .unwrap()
            .contains("bad result: got 2, want 1")
    );
    let stored = repo.records().pop().expect("a record");
    assert_eq!(stored["id"], v["id"]);
    assert!(stored.get("test_output").is_none(), "{stored:#}");
}

const JUNIT_CONFIG: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n";

const JUNIT_SUITE: &str = r#"#!/bin/sh
mkdir -p reports
cat > reports/TEST-c.xml <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="c.CalcTest" tests="2" failures="1" errors="0">
  <testcase classname="c.CalcTest" name="adds"><system-out>passing chatter</system-out></testcase>
  <testcase classname="c.CalcTest" name="divides">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError">org.opentest4j.AssertionFailedError: expected: &lt;2&gt; but was: &lt;3&gt;
	at c.CalcTest.divides(CalcTest.java:14)</failure>
  </testcase>
</testsuite>
EOF
exit 1
"#;

#[test]
fn red_junit_suite_shows_the_failure_message_and_text() {
    let env = Env::new();
    env.write_config(JUNIT_CONFIG);
    let repo = Repo::new(&[("suite.sh", JUNIT_SUITE)]);

    let o = certify(&env, &repo, false);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    assert!(
        out.contains(
            "output of failing tests:\n  c.CalcTest.divides:\n    message: expected: <2> but was: <3>\n    org.opentest4j.AssertionFailedError: expected: <2> but was: <3>\n    \tat c.CalcTest.divides(CalcTest.java:14)\n"
        ),
        "{out}\n{err}"
    );
    assert!(!out.contains("passing chatter"), "{out}");

    let o = certify(&env, &repo, true);
    assert_code(&o, 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["test_output"][0]["test"], "c.CalcTest.divides", "{v:#}");
    assert_eq!(v["test_output"][0]["message"], "expected: <2> but was: <3>");
    assert_eq!(v["test_output"][0]["dropped"], 0);
}

/// A suite that writes an OSC 52 clipboard write and a clear-screen to
/// stdout and stderr, in its go test -json stream (a failing test's output),
/// and then fails.
const HOSTILE_CONFIG: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"go-test-json\"\n";

const HOSTILE_SUITE: &str = r#"#!/bin/sh
esc=$(printf '\033')
bel=$(printf '\007')
printf '{"Action":"run","Package":"p","Test":"TestEvil"}\n'
printf '{"Action":"output","Package":"p","Test":"TestEvil","Output":"    evil_test.go:3: \\u001b]52;c;ZXZpbA==\\u0007 and \\u001b[2J\\n"}\n'
printf '{"Action":"fail","Package":"p","Test":"TestEvil"}\n'
printf '{"Action":"fail","Package":"p"}\n'
printf 'stderr says %s]52;c;ZXZpbA==%s then %s[2J\n' "$esc" "$bel" "$esc" >&2
exit 1
"#;

const HOSTILE_EXITCODE: &str = r#"#!/bin/sh
printf 'stdout says \033]52;c;ZXZpbA==\007 then \033[2J\n'
printf 'stderr says \033]52;c;ZXZpbA==\007 then \033[2J\n' >&2
exit 1
"#;

#[test]
fn escape_sequences_a_suite_wrote_never_reach_the_human_output() {
    let env = Env::new();
    let repo = Repo::new(&[("suite.sh", HOSTILE_SUITE), ("ex.sh", HOSTILE_EXITCODE)]);
    let osc = "\u{1b}]52;c;ZXZpbA==\u{7}";

    // go-test-json: a failing test's output and the suite's stderr tail.
    env.write_config(HOSTILE_CONFIG);
    let o = certify(&env, &repo, false);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    assert!(
        !o.stdout.contains(&0x1b) && !o.stderr.contains(&0x1b),
        "{out:?}\n{err:?}"
    );
    assert!(
        !o.stdout.contains(&0x07) && !o.stderr.contains(&0x07),
        "{out:?}\n{err:?}"
    );
    assert!(
        out.contains(
            "p.TestEvil:\n        evil_test.go:3: \\x1b]52;c;ZXZpbA==\\x07 and \\x1b[2J\n"
        ),
        "{out}"
    );
    assert!(
        err.contains("stderr says \\x1b]52;c;ZXZpbA==\\x07 then \\x1b[2J"),
        "{err}"
    );
    let o = certify(&env, &repo, true);
    assert_code(&o, 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["test_output"][0]["lines"][0],
        format!("    evil_test.go:3: {osc} and \u{1b}[2J"),
        "--json keeps the text as the suite wrote it"
    );
    assert!(
        v["stderr_tail"]
            .as_str()
            .unwrap()
            .contains(&format!("stderr says {osc} then \u{1b}[2J")),
        "{v:#}"
    );

    // exitcode: the log tail (stdout, then stderr).
    env.write_config("[verify.full]\nargv = \"./ex.sh\"\nreport = \"exitcode\"\n");
    let o = certify(&env, &repo, false);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    assert!(
        !o.stdout.contains(&0x1b) && !o.stderr.contains(&0x1b),
        "{out:?}\n{err:?}"
    );
    assert!(
        err.contains("stdout says \\x1b]52;c;ZXZpbA==\\x07 then \\x1b[2J"),
        "{err}"
    );
    assert!(
        err.contains("stderr says \\x1b]52;c;ZXZpbA==\\x07 then \\x1b[2J"),
        "{err}"
    );
    let o = certify(&env, &repo, true);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["log_tail"]
            .as_str()
            .unwrap()
            .contains(&format!("stdout says {osc} then \u{1b}[2J")),
        "{v:#}"
    );

    // records show --log prints the log escaped too; --json keeps it.
    let id = v["id"].as_str().unwrap().to_string();
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", &id, "--log"]);
    assert_code(&o, 0);
    assert!(!o.stdout.contains(&0x1b), "{:?}", text(&o).0);
    assert!(
        text(&o).0.contains("stdout says \\x1b]52;c;"),
        "{:?}",
        text(&o).0
    );
    let o = env.run(&[
        "--json",
        "records",
        "--repo",
        &repo.path_str(),
        "show",
        &id,
        "--log",
    ]);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["log"].as_str().unwrap().contains(osc), "{j:#}");
}

/// Run `script -qc CMD` (util-linux) so saphan's stdout and stderr are a
/// real terminal, and return what the terminal received.
fn under_pty(env: &Env, args: &[&str]) -> Vec<u8> {
    let mut cmdline = String::from(env!("CARGO_BIN_EXE_saphan"));
    for a in args {
        cmdline.push_str(&format!(" '{a}'"));
    }
    let o = std::process::Command::new("script")
        .args(["-qec", &cmdline, "/dev/null"])
        .env("SAPHAN_HOME", env.home())
        .env("TERM", "dumb")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script(1) from util-linux");
    o.stdout
}

#[test]
fn under_a_real_terminal_no_escape_a_suite_wrote_arrives() {
    if !common::skip_unless(common::have("script"), "script(1) (util-linux)") {
        return;
    }
    let env = Env::new();
    let repo = Repo::new(&[("suite.sh", HOSTILE_SUITE)]);
    env.write_config(HOSTILE_CONFIG);
    let got = under_pty(&env, &["certify", "--repo", &repo.path_str()]);
    let t = String::from_utf8_lossy(&got);
    assert!(t.contains("p.TestEvil"), "{t:?}");
    // The spinner draws with its own escapes on a terminal; none of the
    // suite's sequences (OSC 52, clear screen) may be among them.
    assert!(!t.contains("\u{1b}]52"), "{t:?}");
    assert!(!t.contains("\u{1b}[2J"), "{t:?}");
    assert!(t.contains("\\x1b]52;c;ZXZpbA==\\x07"), "{t:?}");
}

#[test]
fn records_show_log_prints_the_kept_log_and_refuses_a_changed_or_missing_one() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./ex.sh\"\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[(
        "ex.sh",
        "#!/bin/sh\necho 'the suite ran on stdout'\necho 'and complained on stderr' >&2\nexit 1\n",
    )]);
    let o = certify(&env, &repo, true);
    assert_code(&o, 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    let log = v["suite_log"].as_str().expect("a kept log").to_string();

    let show = |extra: &[&str]| {
        let mut a = vec!["records", "--repo", &*repo.path_str()]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        a.extend(["show".to_string(), id.clone(), "--log".to_string()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        env.run(&a)
    };
    let o = show(&[]);
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert_eq!(out.as_bytes(), std::fs::read(&log).unwrap().as_slice());
    assert!(out.contains("the suite ran on stdout"), "{out}");
    assert!(out.contains("and complained on stderr"), "{out}");
    let o = show(&["--json"]);
    assert_code(&o, 0);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["id"], id.as_str());
    assert_eq!(j["suite_log_sha256"], v["suite_log_sha256"]);
    assert!(
        j["log"]
            .as_str()
            .unwrap()
            .contains("the suite ran on stdout")
    );

    // One changed byte: refused by name, nothing of it printed.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(b"forged line\n");
    std::fs::write(&log, &bytes).unwrap();
    let o = show(&[]);
    let line = assert_refused(&o, "record-log-tampered");
    assert!(line.contains(&log), "{line}");
    assert!(!text(&o).0.contains("forged line"), "{:?}", text(&o));

    std::fs::remove_file(&log).unwrap();
    let o = show(&[]);
    assert_refused(&o, "record-log-missing");

    let o = env.run(&[
        "records",
        "--repo",
        &repo.path_str(),
        "show",
        "nope",
        "--log",
    ]);
    assert_refused(&o, "record-not-found");
}
