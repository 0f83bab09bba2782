//! Results where CI shows them (issue 40 item 3): `certify --junit FILE`,
//! `verify-union --junit`, `verify-affected --junit` write one JUnit XML
//! report of what they measured — for a `--split`, of the shards' union.
//! Each file is read back with quick-junit's own reader and with saphan's
//! junit-xml parser. The real binary, real git repositories, a real `go`,
//! real sshd hosts for the split.

use crate::common::gomod::{self, MODULE};
use crate::common::{Env, Repo, assert_code, assert_refused, git, json, lab::Lab, text};
use quick_junit::{Report, TestCaseStatus, TestSuite};
use std::path::{Path, PathBuf};

/// `saphan ARGS…` with the Go environment a test module needs.
fn run(env: &Env, args: &[&str]) -> std::process::Output {
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    c.args(args).output().unwrap()
}

/// The report at `path`, read by quick-junit; saphan's own junit-xml
/// parser must read it too (and count what quick-junit counts).
fn read(path: &Path) -> Report {
    let xml = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let r = Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let p = saphan::report::junit::parse_file(path, "junit.xml")
        .unwrap_or_else(|e| panic!("saphan cannot read its own report: {e}:\n{xml}"));
    let cases: usize = r.test_suites.iter().map(|s| s.tests).sum();
    let skipped: usize = r.test_suites.iter().map(|s| s.skipped).sum();
    assert_eq!(p.count as usize, cases - skipped, "{xml}");
    let failing: usize = r.test_suites.iter().map(|s| s.failures + s.errors).sum();
    assert_eq!(p.names.len(), failing, "{xml}");
    r
}

/// A suite's `saphan.<key>` properties with that key, in order.
fn prop<'a>(s: &'a TestSuite, key: &str) -> Vec<&'a str> {
    s.properties
        .iter()
        .filter(|p| p.name.as_str() == key)
        .map(|p| p.value.as_str())
        .collect()
}

/// `(classname.name, status word)` of every testcase of `s`.
fn cases(s: &TestSuite) -> Vec<(String, &'static str)> {
    s.test_cases
        .iter()
        .map(|c| {
            let name = match &c.classname {
                Some(cl) => format!("{}.{}", cl.as_str(), c.name.as_str()),
                None => c.name.as_str().to_string(),
            };
            let st = match &c.status {
                TestCaseStatus::Success { .. } => "pass",
                TestCaseStatus::Skipped { .. } => "skip",
                TestCaseStatus::NonSuccess {
                    kind: quick_junit::NonSuccessKind::Failure,
                    ..
                } => "fail",
                TestCaseStatus::NonSuccess { .. } => "error",
            };
            (name, st)
        })
        .collect()
}

/// The `<failure>`/`<error>` text of the testcase named `name`.
fn failure_text(s: &TestSuite, name: &str) -> String {
    let c = s
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no testcase {name}"));
    match &c.status {
        TestCaseStatus::NonSuccess {
            description,
            message,
            ..
        } => format!(
            "{}|{}",
            message.as_ref().map(|m| m.as_str()).unwrap_or(""),
            description.as_ref().map(|d| d.as_str()).unwrap_or("")
        ),
        other => panic!("{name} did not fail: {other:?}"),
    }
}

/// A directory for report files, and the file in it.
fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("saphan-junit-")
        .tempdir()
        .unwrap();
    let f = d.path().join("reports/saphan.xml");
    (d, f)
}

/// Nothing but `file` in its directory: the temp file was renamed.
fn alone(file: &Path) {
    let names: Vec<String> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [file.file_name().unwrap().to_string_lossy().into_owned()]
    );
}

fn go_module(test: &str) -> Repo {
    let (m, mod_text) = gomod::go_mod();
    Repo::new(&[
        (m, &mod_text),
        ("a/a.go", "package a\n\nfunc V() int { return 1 }\n"),
        (
            "a/a_test.go",
            &format!("package a\n\nimport \"testing\"\n\n{test}"),
        ),
    ])
}

const RED_TESTS: &str = "func TestOne(t *testing.T) {\n\tt.Log(\"about to fail\")\n\tt.Fatal(\"V is not 2\")\n}\n\nfunc TestTwo(t *testing.T) {}\n\nfunc TestLater(t *testing.T) { t.Skip(\"not today\") }\n\nfunc TestParent(t *testing.T) {\n\tt.Run(\"a\", func(t *testing.T) {})\n\tt.Run(\"b\", func(t *testing.T) {})\n}\n";

#[test]
fn a_red_go_module_writes_a_testcase_per_test_with_its_failure_output_and_skips() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = go_module(RED_TESTS);
    let (_d, file) = out_dir();
    // What was there before is replaced whole, even on red.
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "stale\n").unwrap();
    let o = run(
        &env,
        &[
            "certify",
            "--repo",
            &repo.path_str(),
            "--junit",
            file.to_str().unwrap(),
        ],
    );
    assert_code(&o, 1);
    alone(&file);
    let rec = &repo.records()[0];
    let r = read(&file);
    assert_eq!(r.name.as_ref().map(|n| n.as_str()), Some("saphan"));
    assert_eq!(r.test_suites.len(), 1);
    let s = &r.test_suites[0];
    assert_eq!(
        s.name.as_str(),
        format!("certify {} on local", &repo.head()[..12])
    );
    let a = format!("{MODULE}/a");
    let want: Vec<(String, &str)> = [
        ("TestOne", "fail"),
        ("TestTwo", "pass"),
        ("TestLater", "skip"),
        ("TestParent/a", "pass"),
        ("TestParent/b", "pass"),
        ("TestParent", "pass"),
    ]
    .iter()
    .map(|(n, st)| (format!("{a}.{n}"), *st))
    .collect();
    assert_eq!(cases(s), want);
    assert_eq!((s.tests, s.failures, s.errors, s.skipped), (6, 1, 0, 1));
    let f = failure_text(s, "TestOne");
    assert!(
        f.contains("a_test.go:6: about to fail") && f.contains("a_test.go:7: V is not 2"),
        "{f}"
    );
    assert_eq!(prop(s, "saphan.verdict"), ["red"]);
    assert_eq!(prop(s, "saphan.verb"), ["certify"]);
    assert_eq!(prop(s, "saphan.sha"), [repo.head().as_str()]);
    assert_eq!(prop(s, "saphan.machine"), ["local"]);
    assert_eq!(prop(s, "saphan.count"), ["3"]);
    assert_eq!(prop(s, "saphan.record"), [rec["id"].as_str().unwrap()]);
    assert_eq!(prop(s, "saphan.report"), ["go-test-json"]);
    assert!(
        prop(s, "saphan.verified_pointer")[0].starts_with("unchanged: "),
        "{:?}",
        s.properties
    );
    let out = s.system_out.as_ref().unwrap().as_str();
    assert!(
        out.contains("certify ") && out.contains(": red — 3 tests"),
        "{out}"
    );
    // A new file is readable by CI's uploader.
    use std::os::unix::fs::PermissionsExt;
    let (_d2, fresh) = out_dir();
    let o = run(
        &env,
        &[
            "--json",
            "certify",
            "--repo",
            &repo.path_str(),
            "--junit",
            fresh.to_str().unwrap(),
        ],
    );
    assert_code(&o, 1);
    assert_eq!(json(&o)["verdict"], "red");
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
}

#[test]
fn a_junit_xml_suite_keeps_its_classnames_messages_and_skips() {
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"out/junit.xml\"\n",
    );
    let xml = r#"<?xml version="1.0"?>
<testsuite name="pkg" tests="3" skipped="1" failures="1">
  <testcase classname="tests.test_math" name="test_add"/>
  <testcase classname="tests.test_math" name="test_div"><failure message="ZeroDivisionError: division by zero">Traceback:
  File "test_math.py", line 9
ZeroDivisionError</failure></testcase>
  <testcase classname="tests.test_math" name="test_later"><skipped message="later"/></testcase>
</testsuite>
"#;
    let repo = Repo::new(&[(
        "suite.sh",
        &format!("#!/bin/sh\nmkdir -p out\ncat > out/junit.xml <<'EOF'\n{xml}EOF\nexit 1\n"),
    )]);
    let (_d, file) = out_dir();
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--junit",
        file.to_str().unwrap(),
    ]);
    assert_code(&o, 1);
    let r = read(&file);
    let s = &r.test_suites[0];
    assert_eq!(
        cases(s),
        [
            ("tests.test_math.test_add".to_string(), "pass"),
            ("tests.test_math.test_div".to_string(), "fail"),
            ("tests.test_math.test_later".to_string(), "skip"),
        ]
    );
    let f = failure_text(s, "test_div");
    assert!(
        f.starts_with("ZeroDivisionError: division by zero|")
            && f.contains("File \"test_math.py\", line 9"),
        "{f}"
    );
    assert_eq!(prop(s, "saphan.report"), ["junit-xml"]);
    assert_eq!(prop(s, "saphan.count"), ["2"]);
}

#[test]
fn a_verdict_no_test_explains_is_one_error_and_a_green_has_none() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[
        ("suite.sh", "#!/bin/sh\nexit $(cat code)\n"),
        ("code", "0\n"),
    ]);
    let (_d, file) = out_dir();
    let f = file.to_str().unwrap();
    assert_code(
        &env.run(&["certify", "--repo", &repo.path_str(), "--junit", f]),
        0,
    );
    let s = &read(&file).test_suites[0];
    assert_eq!((s.tests, s.failures, s.errors), (0, 0, 0));
    assert_eq!(prop(s, "saphan.verdict"), ["green"]);
    assert_eq!(prop(s, "saphan.count"), ["unavailable"]);

    // An exitcode red names no test: the verdict itself is the one error,
    // so no CI view reads it as "0 failures".
    repo.commit(&[("code", "1\n")], "red");
    assert_code(
        &env.run(&["certify", "--repo", &repo.path_str(), "--junit", f]),
        1,
    );
    let s = &read(&file).test_suites[0];
    assert_eq!(cases(s), [("saphan.verdict".to_string(), "error")]);
    assert!(
        failure_text(s, "verdict").starts_with("saphan verdict: red|"),
        "{:?}",
        s.test_cases
    );

    // A measurement that failed says why.
    repo.commit(&[("suite.sh", "#!/bin/sh\nsleep 30\n")], "slow");
    assert_code(
        &env.run(&[
            "certify",
            "--repo",
            &repo.path_str(),
            "--timeout",
            "1s",
            "--junit",
            f,
        ]),
        3,
    );
    let s = &read(&file).test_suites[0];
    assert_eq!(prop(s, "saphan.verdict"), ["measurement-failed"]);
    assert_eq!(prop(s, "saphan.failure"), ["timeout"]);
    let t = failure_text(s, "verdict");
    assert!(
        t.starts_with("saphan verdict: measurement-failed|failure: timeout\ntimeout: "),
        "{t}"
    );
}

#[test]
fn a_refusal_before_any_record_writes_no_file_and_a_directory_is_refused_first() {
    let env = Env::new();
    let (d, file) = out_dir();
    // No suite declared and no go.mod: refused before anything runs.
    let repo = Repo::new(&[("README.md", "no suite\n")]);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--junit",
        file.to_str().unwrap(),
    ]);
    assert_code(&o, 2);
    assert!(!file.exists());
    assert!(repo.records().is_empty());

    // A directory can never be the report: refused by name, nothing runs.
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--junit",
        d.path().to_str().unwrap(),
    ]);
    let err = assert_refused(&o, "junit-path-invalid");
    assert!(err.contains("is a directory"), "{err}");
    assert!(repo.records().is_empty());
}

#[test]
fn verify_union_and_verify_affected_write_their_reports() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let (gm, gc) = gomod::go_mod();
    let r = Repo::new(&[
        (gm, gc.as_str()),
        (
            "reg/reg.go",
            "package reg\n\nvar names = []string{\"base\"}\n\n// Names lists what is registered.\nfunc Names() []string { return names }\n",
        ),
        (
            "reg/reg_test.go",
            "package reg\n\nimport \"testing\"\n\nfunc TestAtMostTwo(t *testing.T) {\n\tif len(Names()) > 2 {\n\t\tt.Fatalf(\"%d names registered\", len(Names()))\n\t}\n}\n",
        ),
    ]);
    git(r.path(), &["branch", "base"]);
    for (branch, name) in [("s1", "one"), ("s2", "two")] {
        git(r.path(), &["checkout", "-q", "-b", branch, "main"]);
        r.commit(
            &[(
                &format!("reg/{name}.go"),
                &format!("package reg\n\nfunc init() {{ names = append(names, \"{name}\") }}\n"),
            )],
            name,
        );
    }
    git(r.path(), &["checkout", "-q", "main"]);
    let (_d, file) = out_dir();
    let f = file.to_str().unwrap();
    let o = run(
        &env,
        &[
            "verify-union",
            "--repo",
            &r.path_str(),
            "--base",
            "main",
            "--stream",
            "s1",
            "s2",
            "--junit",
            f,
        ],
    );
    assert_code(&o, 1);
    let s = &read(&file).test_suites[0];
    assert_eq!(
        cases(s),
        [(format!("{MODULE}/reg.TestAtMostTwo"), "fail")],
        "{}",
        text(&o).0
    );
    assert!(failure_text(s, "TestAtMostTwo").contains("3 names registered"));
    assert_eq!(prop(s, "saphan.verb"), ["verify-union"]);
    assert_eq!(prop(s, "saphan.stream").len(), 2);
    assert_eq!(
        prop(s, "saphan.base"),
        [git(r.path(), &["rev-parse", "main"]).as_str()]
    );

    // verify-affected: s1's change selects reg, whose test passes alone.
    env.write_config(
        "[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\n",
    );
    git(r.path(), &["checkout", "-q", "s1"]);
    let o = run(
        &env,
        &[
            "verify-affected",
            "--repo",
            &r.path_str(),
            "--base",
            "base",
            "--junit",
            f,
        ],
    );
    assert_code(&o, 0);
    let s = &read(&file).test_suites[0];
    assert_eq!(cases(s), [(format!("{MODULE}/reg.TestAtMostTwo"), "pass")]);
    assert_eq!(prop(s, "saphan.verb"), ["verify-affected"]);
    assert_eq!(prop(s, "saphan.verdict"), ["green"]);
    assert_eq!(
        prop(s, "saphan.selected_packages"),
        [format!("{MODULE}/reg").as_str()]
    );

    // Nothing selected is no test and no failure.
    r.commit(&[("NOTES.md", "notes\n")], "notes");
    git(r.path(), &["branch", "-f", "base", "HEAD~1"]);
    let o = run(
        &env,
        &[
            "verify-affected",
            "--repo",
            &r.path_str(),
            "--base",
            "base",
            "--junit",
            f,
        ],
    );
    assert_code(&o, 0);
    let s = &read(&file).test_suites[0];
    assert_eq!(prop(s, "saphan.verdict"), ["nothing-selected"]);
    assert_eq!((s.tests, s.failures, s.errors), (0, 0, 0));
}

/// A red `--split` over two lab machines: one report of the union — a
/// testcase per test of every shard, the failure with its output, the
/// split's verdict — and `records` and `status` mark each shard's record
/// as a shard, so the green shard does not read as a green certification.
#[test]
fn a_split_writes_one_report_of_the_union_and_its_shards_read_as_shards() {
    if crate::common::skip_unless(
        Path::new("/usr/bin/go").exists() && saphan::exec::which("go").is_some(),
        "no /usr/bin/go for the lab hosts, or no go here to list packages with",
    ) {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let (env, _work) = crate::common::fleet::home(lab, &["m0", "m1"], "junit");
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    assert_code(
        &crate::common::fleet::probe(&env, "m0,m1", "go", "/usr/bin/go", "/tmp"),
        0,
    );
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    for i in 0..4 {
        files.extend(gomod::package(&format!("p{i}"), &[], i));
    }
    files.push((
        "p2/bad_test.go".into(),
        "package p2\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let (_d, file) = out_dir();
    let o = crate::common::fleet::certify(
        &env,
        &repo,
        "m0,m1",
        &["--split", "--junit", file.to_str().unwrap()],
    );
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(v["split"]["verdict"], "red", "{v}");
    let r = read(&file);
    assert_eq!(r.test_suites.len(), 1, "one report of the union");
    let s = &r.test_suites[0];
    let mut got = cases(s);
    got.sort();
    let mut want: Vec<(String, &str)> = (0..4)
        .map(|i| (format!("{MODULE}/p{i}.TestVp{i}"), "pass"))
        .collect();
    want.push((format!("{MODULE}/p2.TestBad"), "fail"));
    want.sort();
    assert_eq!(got, want);
    assert_eq!((s.tests, s.failures, s.errors), (5, 1, 0));
    assert!(failure_text(s, "TestBad").contains("broken on purpose"));
    assert_eq!(prop(s, "saphan.verdict"), ["red"]);
    assert_eq!(prop(s, "saphan.split"), ["2 shard(s)"]);
    assert_eq!(prop(s, "saphan.count"), ["5"]);
    let ids: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(prop(s, "saphan.record"), ids);

    // Each shard's record reads as a shard, in the listing and in status.
    let o = env.run(&["records", "--repo", &repo.path_str()]);
    let listing = text(&o).0;
    let mut marks: Vec<&str> = listing
        .lines()
        .map(|l| {
            if l.contains(" (shard 1/2) ") {
                "1/2"
            } else if l.contains(" (shard 2/2) ") {
                "2/2"
            } else {
                panic!("not marked as a shard: {l}\n{listing}")
            }
        })
        .collect();
    marks.sort();
    assert_eq!(marks, ["1/2", "2/2"], "{listing}");
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let st = text(&o).0;
    for m in ["m0", "m1"] {
        let line = st
            .lines()
            .find(|l| l.starts_with(&format!("  {m}: ")))
            .unwrap_or_else(|| panic!("{st}"));
        assert!(
            line.contains("(shard ") && line.contains("of a split: not the SHA's verdict)"),
            "{st}"
        );
    }
}
