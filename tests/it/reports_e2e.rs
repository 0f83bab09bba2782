//! Report parsing end to end: the real `saphan certify` binary on real git
//! repositories, a real Go module under default-go, and shell suites that
//! write real JUnit files under a declared junit-xml suite. Every check reads
//! both the record `--json` prints and the line appended to
//! `<git-common-dir>/saphan/attempts.jsonl`.

use crate::common;

use crate::common::{Env, Repo, assert_code, text};
use serde_json::{Value, json};

/// The last record in the repository's attempts.jsonl.
fn last_record(repo: &Repo) -> Value {
    let p = repo.path().join(".git/saphan/attempts.jsonl");
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(t.lines().last().expect("a record")).expect("one whole JSON line")
}

/// Run `saphan certify --json` with `code` expected; return the printed
/// record after checking it is the one appended to attempts.jsonl.
#[track_caller]
fn certify(env: &Env, repo: &Repo, code: i32) -> Value {
    let o = env
        .cmd()
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .output()
        .unwrap();
    assert_code(&o, code);
    let (out, err) = text(&o);
    let r: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{out}\n{err}"));
    let mut stored = last_record(repo);
    assert_eq!(
        r["id"], stored["id"],
        "the printed record is the stored one"
    );
    // The stored line is appended before the pointer is decided; the printed
    // record adds `verified_pointer` (and, off green, the suite's
    // `stderr_tail` or `log_tail` and each failing test's `test_output` the
    // human output shows). Everything else is the same.
    let mut printed = r.clone();
    for v in [&mut printed, &mut stored] {
        v.as_object_mut().unwrap().remove("verified_pointer");
        v.as_object_mut().unwrap().remove("stderr_tail");
        v.as_object_mut().unwrap().remove("log_tail");
        v.as_object_mut().unwrap().remove("test_output");
        v.as_object_mut().unwrap().remove("test_output_omitted");
        // …and what the human lines add: the first follow of a trunk, the
        // re-run commands, the count with subtests.
        v.as_object_mut().unwrap().remove("first_follow");
        v.as_object_mut().unwrap().remove("rerun");
        v.as_object_mut().unwrap().remove("count_with_subtests");
    }
    assert!(
        stored.get("test_output").is_none(),
        "the record itself never carries test_output"
    );
    assert_eq!(printed, stored);
    assert_eq!(r["sha"], repo.head());
    r
}

fn names(r: &Value) -> Vec<String> {
    serde_json::from_value(r["named_tests"].clone())
        .unwrap_or_else(|_| panic!("named_tests is not a list: {}", r["named_tests"]))
}

fn notes(r: &Value) -> String {
    r["notes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

const GO_MOD: &str = "module example.com/e2e\n\ngo 1.19\n";

const BASIC: &str = r#"package basic

import "testing"

func TestPass(t *testing.T) {}

func TestFail(t *testing.T) { t.Fatal("wrong answer") }

func TestSkip(t *testing.T) { t.Skip("not on this machine") }

func TestSub(t *testing.T) {
	t.Run("a", func(t *testing.T) {})
	t.Run("b", func(t *testing.T) { t.Error("b is wrong") })
}
"#;

const GOROUTINE: &str = r#"package goroutine

import "testing"

func TestBefore(t *testing.T) {}

// A panic on another goroutine kills the test binary: test2json never sees
// this test end.
func TestGoroutinePanic(t *testing.T) {
	never := make(chan struct{})
	go func() { panic("boom in a goroutine") }()
	<-never
}
"#;

const EXITS: &str = r#"package exits

import (
	"os"
	"testing"
)

func TestFirst(t *testing.T) {}

func TestExit(t *testing.T) { os.Exit(3) }
"#;

const BROKEN: &str = r#"package broken

import "testing"

func TestNeverBuilds(t *testing.T) { undefinedFunction() }
"#;

#[test]
fn default_go_names_every_kind_of_failure() {
    if common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = Repo::new(&[
        ("go.mod", GO_MOD),
        ("basic/basic_test.go", BASIC),
        ("goroutine/goroutine_test.go", GOROUTINE),
        ("exits/exits_test.go", EXITS),
    ]);
    let r = certify(&env, &repo, 1);
    assert_eq!(r["suite_source"], "default-go");
    assert_eq!(r["report"], "go-test-json");
    assert_eq!(r["verdict"], "red");
    // basic: TestPass, TestFail, TestSub (TestSkip did not run);
    // goroutine: TestBefore, TestGoroutinePanic; exits: TestFirst, TestExit.
    assert_eq!(r["count"], 7, "{r:#}");
    // Packages finish in parallel, so their order in the stream varies; within
    // a package the names keep stream order (a subtest fails before its parent).
    let n = names(&r);
    let mut sorted = n.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "example.com/e2e/basic.TestFail",
            "example.com/e2e/basic.TestSub",
            "example.com/e2e/basic.TestSub/b",
            "example.com/e2e/exits.TestExit",
            "example.com/e2e/goroutine.TestGoroutinePanic",
        ],
        "{r:#}"
    );
    let basic: Vec<&String> = n.iter().filter(|x| x.contains("/basic.")).collect();
    assert_eq!(
        basic,
        [
            "example.com/e2e/basic.TestFail",
            "example.com/e2e/basic.TestSub/b",
            "example.com/e2e/basic.TestSub"
        ]
    );
    assert_eq!(r["suite_report_files"], json!([]));
    assert_ne!(r["suite_exit_code"], 0);

    // A package that does not build is named by its import path (Go 1.19
    // says so in plain text, outside the JSON stream).
    repo.commit(
        &[("broken/broken_test.go", BROKEN)],
        "a package that does not build",
    );
    let r = certify(&env, &repo, 1);
    assert_eq!(r["verdict"], "red");
    assert_eq!(r["count"], 7, "{r:#}");
    let n = names(&r);
    assert_eq!(
        n.last().map(String::as_str),
        Some("example.com/e2e/broken"),
        "{n:?}"
    );
    assert_eq!(n.len(), 6, "{n:?}");

    // All green: the pointer may move.
    let green = repo.commit(
        &[
            ("basic/basic_test.go", "package basic\n\nimport \"testing\"\n\nfunc TestPass(t *testing.T) {}\n\nfunc TestSkip(t *testing.T) { t.Skip(\"later\") }\n"),
            ("goroutine/goroutine_test.go", "package goroutine\n\nimport \"testing\"\n\nfunc TestBefore(t *testing.T) {}\n"),
            ("exits/exits_test.go", "package exits\n\nimport \"testing\"\n\nfunc TestFirst(t *testing.T) {\n\tt.Run(\"inner\", func(t *testing.T) {})\n}\n"),
            ("broken/broken_test.go", "package broken\n"),
        ],
        "fix everything",
    );
    let r = certify(&env, &repo, 0);
    assert_eq!(r["verdict"], "green");
    assert_eq!(r["count"], 3, "{r:#}");
    assert_eq!(r["named_tests"], json!([]));
    assert_eq!(r["sha"], green);
    assert_eq!(r["verified_pointer"], "moved");
}

/// A JUnit file as Surefire writes it: `tests` cases, `skipped` of them skipped.
fn surefire(suite: &str, cases: &[(&str, &str)], skipped: usize) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{suite}\" tests=\"{}\" skipped=\"{skipped}\" failures=\"0\" errors=\"0\">\n",
        cases.len()
    );
    for (name, body) in cases {
        s.push_str(&format!(
            "  <testcase classname=\"{suite}\" name=\"{name}\">{body}</testcase>\n"
        ));
    }
    s.push_str("</testsuite>\n");
    s
}

/// A suite script that writes `files` (path, content) then exits `code`.
fn suite_script(files: &[(&str, &str)], code: i32) -> String {
    let mut s = String::from("#!/bin/sh\nset -e\nmkdir -p reports\n");
    for (path, content) in files {
        // A here-document always ends its text with a newline.
        let nl = if content.ends_with('\n') { "" } else { "\n" };
        s.push_str(&format!(
            "cat > '{path}' <<'SAPHAN_EOF'\n{content}{nl}SAPHAN_EOF\n"
        ));
    }
    s.push_str(&format!("exit {code}\n"));
    s
}

const JUNIT_CONFIG: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n";

#[test]
fn junit_suite_good_rerun_and_broken_files() {
    let env = Env::new();
    env.write_config(JUNIT_CONFIG);
    let good = surefire(
        "com.example.CalcTest",
        &[("adds", ""), ("divides", ""), ("later", "<skipped/>")],
        1,
    );
    // The re-run of a flaky test: it passed on retry, so it is not failing,
    // and the re-run file counts again beside the original.
    let rerun = surefire(
        "com.example.CalcTest",
        &[("divides", "<flakyFailure message=\"first try\"/>")],
        0,
    );
    let repo = Repo::new(&[(
        "suite.sh",
        &suite_script(
            &[
                ("reports/TEST-good.xml", &good),
                ("reports/TEST-rerun.xml", &rerun),
            ],
            0,
        ),
    )]);
    let r = certify(&env, &repo, 0);
    assert_eq!(r["verdict"], "green", "{r:#}");
    assert_eq!(r["report"], "junit-xml");
    assert_eq!(r["count"], 2 + 1);
    assert_eq!(r["named_tests"], json!([]));
    assert_eq!(r["suite_report_path"], "reports/*.xml");
    assert_eq!(
        r["suite_report_files"],
        json!(["reports/TEST-good.xml", "reports/TEST-rerun.xml"])
    );

    // One broken (truncated) file beside them: the whole measurement fails,
    // naming the file and the line — never the sum of what was readable.
    let broken = "<?xml version=\"1.0\"?>\n<testsuite name=\"Cut\" tests=\"5\">\n  <testcase name=\"a\">\n    <skipped>cut he";
    repo.commit(
        &[(
            "suite.sh",
            &suite_script(
                &[
                    ("reports/TEST-good.xml", &good),
                    ("reports/TEST-rerun.xml", &rerun),
                    ("reports/TEST-broken.xml", broken),
                ],
                0,
            ),
        )],
        "a broken report",
    );
    let r = certify(&env, &repo, 3);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["count"], "unavailable");
    assert_eq!(r["named_tests"], "unavailable");
    let n = notes(&r);
    // Four lines, the last one cut inside <skipped>: the break is at the end.
    assert!(
        n.contains("report-malformed: reports/TEST-broken.xml line 5"),
        "{n}"
    );
    assert!(n.contains("<skipped>"), "{n}");
}

#[test]
fn junit_verdict_weighs_the_exit_status() {
    let env = Env::new();
    env.write_config(JUNIT_CONFIG);
    let failing = surefire(
        "com.example.CalcTest",
        &[("adds", ""), ("divides", "<failure message=\"1/0\"/>")],
        0,
    );
    let init_error = "<testsuites>\n<testsuite name=\"libs/foo.spec.ts\" tests=\"0\" errors=\"1\">\n<testcase classname=\"Test suite failed to run\" name=\"libs/foo.spec.ts\"><error>TS6258</error></testcase>\n</testsuite>\n</testsuites>\n";
    let passing = surefire("com.example.CalcTest", &[("adds", "")], 0);
    let repo = Repo::new(&[("README", "x\n")]);

    struct Case {
        what: &'static str,
        file: String,
        exit: i32,
        code: i32,
        verdict: &'static str,
        count: Value,
        names: Value,
        note: &'static str,
    }
    let cases = [
        Case {
            what: "named failure, non-zero exit: red",
            file: failing.clone(),
            exit: 1,
            code: 1,
            verdict: "red",
            count: json!(2),
            names: json!(["com.example.CalcTest.divides"]),
            note: "",
        },
        Case {
            what: "named failure, exit 0: red, and the record says the exit code disagreed",
            file: failing,
            exit: 0,
            code: 1,
            verdict: "red",
            count: json!(2),
            names: json!(["com.example.CalcTest.divides"]),
            note: "exit-code-disagreed:",
        },
        Case {
            what: "tests=0 errors=1 with a non-zero exit: a clean red with count 0",
            file: init_error.to_string(),
            exit: 1,
            code: 1,
            verdict: "red",
            count: json!(0),
            names: json!(["Test suite failed to run.libs/foo.spec.ts"]),
            note: "",
        },
        Case {
            what: "tests=0 errors=1 with exit 0: refused as contradictory",
            file: init_error.to_string(),
            exit: 0,
            code: 3,
            verdict: "measurement-failed",
            count: json!(0),
            names: json!(["Test suite failed to run.libs/foo.spec.ts"]),
            note: "contradictory:",
        },
        Case {
            what: "nothing named but a non-zero exit: a crash, not a red",
            file: passing,
            exit: 2,
            code: 3,
            verdict: "measurement-failed",
            count: json!(1),
            names: json!([]),
            note: "crash:",
        },
    ];
    for c in cases {
        repo.commit(
            &[(
                "suite.sh",
                &suite_script(&[("reports/TEST-x.xml", &c.file)], c.exit),
            )],
            c.what,
        );
        let r = certify(&env, &repo, c.code);
        assert_eq!(r["verdict"], c.verdict, "{}: {r:#}", c.what);
        assert_eq!(r["count"], c.count, "{}", c.what);
        assert_eq!(r["named_tests"], c.names, "{}", c.what);
        assert_eq!(r["suite_exit_code"], c.exit, "{}", c.what);
        assert_eq!(
            r["suite_report_files"],
            json!(["reports/TEST-x.xml"]),
            "{}",
            c.what
        );
        if !c.note.is_empty() {
            assert!(notes(&r).contains(c.note), "{}: {}", c.what, notes(&r));
        }
    }
}

#[test]
fn junit_glob_matching_nothing_or_escaping_the_tree_is_never_green() {
    let env = Env::new();
    env.write_config(JUNIT_CONFIG);
    // The suite passes but writes its report somewhere else.
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nmkdir -p out\necho '<testsuite tests=\"1\"/>' > out/junit.xml\nexit 0\n",
    )]);
    let r = certify(&env, &repo, 3);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["count"], "unavailable");
    assert!(notes(&r).contains("matched no files"), "{}", notes(&r));
    assert_eq!(r["suite_report_path"], "reports/*.xml");

    // A report that is a symlink leading out of the worktree is refused by name.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("elsewhere.xml");
    std::fs::write(&target, "<testsuite tests=\"100\"/>").unwrap();
    repo.commit(
        &[(
            "suite.sh",
            &format!(
                "#!/bin/sh\nmkdir -p reports\nln -s '{}' reports/TEST-evil.xml\nexit 0\n",
                target.display()
            ),
        )],
        "escape",
    );
    let r = certify(&env, &repo, 3);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["count"], "unavailable");
    let n = notes(&r);
    assert!(
        n.contains("report-symlink-escape: reports/TEST-evil.xml"),
        "{n}"
    );
}

/// Issue 12.1: Go 1.19's test2json loses the `pass` of a test whose output
/// lacks a trailing newline (`no newline--- PASS: TestGlued`), and the
/// package still passes with exit 0. The test must not vanish: the record
/// names it, does not count it, and is never green (the pointer stays).
/// Go 1.20+ frames its output and reports the test: then it is an ordinary
/// green with both tests counted.
#[test]
fn go_test_that_never_ended_is_named_never_green() {
    if common::gomod::no_go() {
        return;
    }
    let v = std::process::Command::new(common::gomod::default_go())
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&v.stdout).to_string();
    let glues = version.contains("go1.19") || version.contains("go1.18");
    let env = Env::new();
    let repo = Repo::new(&[
        ("go.mod", GO_MOD),
        (
            "glue/glue_test.go",
            "package glue\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestGlued(t *testing.T) { fmt.Print(\"no newline\") }\n\nfunc TestPlain(t *testing.T) {}\n",
        ),
    ]);
    if !glues {
        let r = certify(&env, &repo, 0);
        assert_eq!(r["verdict"], "green", "{version}: {r:#}");
        assert_eq!(r["count"], 2, "{r:#}");
        return;
    }
    let r = certify(&env, &repo, 3);
    assert_eq!(r["verdict"], "measurement-failed", "{r:#}");
    assert_eq!(r["suite_exit_code"], 0, "{r:#}");
    let n = notes(&r);
    assert!(
        n.contains("unfinished-tests: 1 test(s)") && n.contains("example.com/e2e/glue.TestGlued"),
        "{n}"
    );
    assert_ne!(r["verified_pointer"], "moved", "{r:#}");
    assert_eq!(repo.verified(), None);
}
