//! JUnit reports written by real producers on this project's build machine
//! (`tests/it/fixtures/junit/`), each with what the producer itself said
//! and what saphan must read from it, through `report::measure` — the entry
//! point certify uses — under the exit status the producer really returned.
//!
//! The files were written by running small suites of each shape (pass,
//! fail, error, skip, xfail/xpass, setup/teardown errors, collection errors,
//! odd ids, re-runs, xdist, control characters and bytes that are not UTF-8
//! in the output …) and are kept byte for byte as the producer wrote them.
//! `docs/reports.md` ("What real producers write") says how each is read.

use saphan::exec::Termination;
use saphan::report::{Evidence, Measurement, ReportKind, Verdict, measure};
use std::path::Path;

/// What saphan must make of a fixture.
enum Want {
    /// A measurement: count, failing names in order, verdict, and a note
    /// that must open one of the record's notes (`""`: none required).
    Read {
        count: u64,
        names: &'static [&'static str],
        verdict: Verdict,
        note: &'static str,
    },
    /// A refusal: the failure kind the deciding note opens with, and the
    /// line it must name.
    Refused { kind: &'static str, line: u64 },
}

struct Row {
    file: &'static str,
    /// The producer and its version, as installed here.
    producer: &'static str,
    /// The producer's own terminal summary for the run.
    says: &'static str,
    /// The producer's real exit status.
    exit: i32,
    want: Want,
}

use Verdict::{MeasurementFailed, Red};
use Want::{Read, Refused};

/// pytest writes a call failure and the same test's teardown error as two
/// testcases of one name: the corpus rules name every testcase with a
/// `<failure>` or `<error>` ("a name that occurs twice is listed twice").
const PYTEST_OUTCOMES: &[&str] = &[
    "test_outcomes.test_fail",
    "test_outcomes.test_raises",
    "test_outcomes.test_setup_error",
    "test_outcomes.test_teardown_error_after_pass",
    "test_outcomes.test_fail_and_teardown_error",
    "test_outcomes.test_fail_and_teardown_error",
    "test_outcomes.test_xpass_strict",
];

/// gotestsum `--rerun-fails`, every flake passing on its re-run: the
/// failed attempts.
const RERUN_GREEN_FAILED: &[&str] = &[
    "example.com/rr/f.TestFlaky",
    "example.com/rr/f.TestFlakySub/inner",
    "example.com/rr/f.TestFlakySub",
    "example.com/rr/f.TestFlakySub/inner",
    "example.com/rr/f.TestFlakySub",
];

const ROWS: &[Row] = &[
    Row {
        file: "pytest-9.2.0_outcomes.xml",
        producer: "pytest 9.2.0 (PyPI), junit_family xunit2",
        says: "4 failed, 2 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors",
        exit: 1,
        // tests="13" skipped="4" (2 skips + 2 xfails, written <skipped>):
        // pytest counts test_fail_and_teardown_error's teardown half as a
        // testcase of its own, and so does the rule (tests − skipped).
        want: Read {
            count: 9,
            names: PYTEST_OUTCOMES,
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-7.2.1_outcomes.xml",
        producer: "pytest 7.2.1 (Debian python3-pytest)",
        says: "4 failed, 2 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors",
        exit: 1,
        want: Read {
            count: 9,
            names: PYTEST_OUTCOMES,
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_xunit1.xml",
        producer: "pytest 9.2.0, junit_family xunit1 (file/line attributes)",
        says: "4 failed, 2 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors",
        exit: 1,
        want: Read {
            count: 9,
            names: PYTEST_OUTCOMES,
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_xdist-3.8.0.xml",
        producer: "pytest 9.2.0 + pytest-xdist 3.8.0, -n 2",
        says: "5 failed, 7 passed, 2 skipped, 2 xfailed, 1 xpassed, 3 errors",
        exit: 1,
        // Workers interleave; each half is named where it stands.
        want: Read {
            count: 15,
            names: &[
                "test_more.test_many[3]",
                "test_outcomes.test_raises",
                "test_outcomes.test_fail",
                "test_outcomes.test_setup_error",
                "test_outcomes.test_teardown_error_after_pass",
                "test_outcomes.test_fail_and_teardown_error",
                "test_outcomes.test_fail_and_teardown_error",
                "test_outcomes.test_xpass_strict",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_collection_error.xml",
        producer: "pytest 9.2.0, a module that fails to import",
        says: "Interrupted: 1 error during collection; 1 error",
        exit: 2,
        // pytest's tests="1" counts the module's collection error.
        want: Read {
            count: 1,
            names: &["test_broken"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_collection_error_continue.xml",
        producer: "pytest 9.2.0 --continue-on-collection-errors",
        says: "2 passed, 1 error",
        exit: 1,
        want: Read {
            count: 3,
            names: &["test_broken"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_rerunfailures-16.7.xml",
        producer: "pytest 9.2.0 + pytest-rerunfailures 16.7, --reruns 2",
        says: "1 failed, 3 passed, 4 rerun",
        exit: 1,
        // Each rerun attempt is an empty testcase; tests="4" is right.
        want: Read {
            count: 4,
            names: &["test_rerun.test_always_fails"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_param_ids.xml",
        producer: "pytest 9.2.0, parametrized ids with unicode, quotes, <, &, newline, NUL",
        says: "7 failed, 12 passed",
        exit: 1,
        want: Read {
            count: 19,
            names: &[
                "test_params.test_id[tab\\tx]",
                "test_params.test_id[nul\\x00x]",
                "test_params.test_pair[1-2]",
                "test_params.test_pair[[-]]",
                "test_params.TestOuter.test_in_class",
                "test_params.TestOuter.TestInner.test_nested",
                "test_params.TestOuter.TestInner.test_nested_param[a b]",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_logging_all_ctl.xml",
        producer: "pytest 9.2.0, junit_logging=all, output with control characters and bad UTF-8",
        says: "1 failed, 2 passed",
        exit: 1,
        want: Read {
            count: 3,
            names: &["test_log.test_invalid_utf8_bytes"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_junit_prefix.xml",
        producer: "pytest 9.2.0 --junit-prefix=myprefix, packages and a class",
        says: "3 failed, 1 passed",
        exit: 1,
        want: Read {
            count: 4,
            names: &[
                "myprefix.pkg.sub.test_p.test_bad",
                "myprefix.pkg.sub.test_p.TestK.test_m",
                "myprefix.test_root.test_root_bad",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "pytest-9.2.0_no_tests.xml",
        producer: "pytest 9.2.0, no test collected",
        says: "no tests ran",
        exit: 5,
        want: Read {
            count: 0,
            names: &[],
            verdict: MeasurementFailed,
            note: "crash:",
        },
    },
    Row {
        file: "pytest-9.2.0_subtests.xml",
        producer: "pytest 9.2.0 subtests (fixture and unittest subTest)",
        says: "4 failed, 2 passed (3 SUBFAILED)",
        exit: 1,
        // tests="13" counts the subtests: the attribute wins (corpus rule).
        want: Read {
            count: 13,
            names: &[
                "test_sub.test_fixture_subtests",
                "test_sub.TestUnit.test_unittest_subtests",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "xmlrunner-4.0.0_testu.xml",
        producer: "unittest-xml-reporting 4.0.0 (Python 3.11)",
        says: "Ran 8 tests; FAILED (failures=3, errors=3, skipped=1, expected failures=1, unexpected successes=1)",
        exit: 1,
        want: Read {
            count: 6,
            names: &[
                "TestU.test_fail",
                "TestU.test_sub (i=1)",
                "TestU.test_sub (i=2)",
                "TestU.test_error",
                "TestU.test_xpass",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "xmlrunner-4.0.0_teardown.xml",
        producer: "unittest-xml-reporting 4.0.0, tearDown raises",
        says: "(same run) errors include TestTeardown.test_b",
        exit: 1,
        want: Read {
            count: 1,
            names: &["TestTeardown.test_b"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "xmlrunner-4.0.0_setupclass.xml",
        producer: "unittest-xml-reporting 4.0.0, setUpClass raises",
        says: "(same run) errors include setUpClass (__main__.TestSetupFails)",
        exit: 1,
        want: Read {
            count: 1,
            names: &["setUpClass (__main__.TestSetupFails)"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "gotestsum-1.8.2_basic.xml",
        producer: "gotestsum 1.8.2 (Debian), go 1.19.8",
        says: "DONE 11 tests, 2 skipped, 6 failures, 1 error",
        exit: 2,
        // No `skipped` attribute: the corpus rule reads it as 0, so the
        // 2 <skipped> testcases stay in tests="11" (gotestsum's own "11
        // tests" counts them too). The package that did not build is not
        // in the file at all.
        want: Read {
            count: 11,
            names: &[
                "example.com/gts/p.TestFail",
                "example.com/gts/p.TestSub/b/c",
                "example.com/gts/p.TestSub",
                "example.com/gts/p.TestCtl",
                "example.com/gts/p.TestNoNewline",
                "example.com/gts/q.TestPanics",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "gotestsum-1.8.2_rerun_fails.xml",
        producer: "gotestsum 1.8.2 --rerun-fails=3",
        says: "DONE 4 runs, 14 tests, 1 skipped, 9 failures",
        exit: 1,
        // Every attempt is a testcase of its own: each failed attempt is
        // named (as go-test-json's re-runs are), and no `skipped`
        // attribute means 0 subtracted.
        want: Read {
            count: 14,
            names: &[
                "example.com/rr/f.TestFlaky",
                "example.com/rr/f.TestAlwaysFails",
                "example.com/rr/f.TestFlakySub/inner",
                "example.com/rr/f.TestFlakySub",
                "example.com/rr/f.TestAlwaysFails",
                "example.com/rr/f.TestFlakySub/inner",
                "example.com/rr/f.TestFlakySub",
                "example.com/rr/f.TestAlwaysFails",
                "example.com/rr/f.TestAlwaysFails",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "gotestsum-1.8.2_rerun_fails_green.xml",
        producer: "gotestsum 1.8.2 --rerun-fails=3, every flake passes on a re-run",
        says: "DONE 3 runs, 10 tests, 1 skipped, 5 failures (exit 0)",
        exit: 0,
        // A flake that passed on a re-run still failed once: its failed
        // attempts are named, so the verdict is never green (the report
        // wins over the exit status, and the record says they disagreed).
        want: Read {
            count: 10,
            names: RERUN_GREEN_FAILED,
            verdict: Red,
            note: "exit-code-disagreed",
        },
    },
    Row {
        file: "gotestsum-1.8.2_rerun_fails_green.xml",
        producer: "the same file under a non-zero exit (a pass that did not settle the run)",
        says: "(exit status changed by the test)",
        exit: 1,
        want: Read {
            count: 10,
            names: RERUN_GREEN_FAILED,
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "gotestsum-1.8.2_build_failure.xml",
        producer: "gotestsum 1.8.2, one package does not build",
        says: "DONE 1 tests, 1 error",
        exit: 2,
        // The broken package is missing from the file: a crash, not green.
        want: Read {
            count: 1,
            names: &[],
            verdict: MeasurementFailed,
            note: "crash:",
        },
    },
    Row {
        file: "gtest-1.12.1_shapes.xml",
        producer: "googletest 1.12.1 (Debian), DISABLED_, GTEST_SKIP in SetUp, death tests, TearDown failure, TEST_P",
        says: "11 tests ran; 4 PASSED, 2 SKIPPED, 5 FAILED; 2 DISABLED",
        exit: 1,
        // tests="13" holds the 2 DISABLED_ tests (disabled="2"): `disabled`
        // is not subtracted (corpus rule), so they count.
        want: Read {
            count: 11,
            names: &[
                "DeathTest.DoesNotDie",
                "Math.Fails",
                "Math.PrintsBad",
                "BadFixture.PassesButTearDownFails",
                "Nums/P.Even/1",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "gtest-1.12.1_invalid_utf8.xml",
        producer: "googletest 1.12.1, a failure message with a byte that is not UTF-8",
        says: "5 FAILED (the byte is copied into the XML raw)",
        exit: 1,
        want: Refused {
            kind: "report-malformed",
            line: 28,
        },
    },
    Row {
        file: "ctest-3.25.1.xml",
        producer: "ctest 3.25.1 --output-junit (Debian cmake)",
        says: "38% tests passed, 5 tests failed out of 8 (1 disabled, 1 skipped, 1 Not Run, 1 Timeout)",
        exit: 8,
        // The "Not Run" test (executable missing) is written <skipped>; the
        // disabled one is counted (`disabled` is not subtracted).
        want: Read {
            count: 7,
            names: &[
                "fails.fails",
                "times_out.times_out",
                "name with <&> \"q\".name with <&> \"q\"",
                "regex_fail.regex_fail",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "catch2-2.13.10.xml",
        producer: "Catch2 2.13.10 (Debian) -r junit",
        says: "test cases: 8 | 1 passed | 5 failed | 2 failed as expected",
        exit: 7,
        // [!mayfail]/[!shouldfail] failures carry a <skipped> beside their
        // <failure>: the rule names every testcase with a <failure>, and
        // no `skipped` attribute subtracts nothing from tests="12"
        // (Catch2 2.x's `tests` counts assertions). Catch2's exit status
        // (7) is red as well.
        want: Read {
            count: 12,
            names: &[
                "t.global.fails with <xml> & \"q\"",
                "t.global.throws",
                "t.global.may fail",
                "t.global.should fail",
                "t.global.sections/s2",
                "t.global.sections/s3 nested/inner",
                "t.global.prints bad bytes",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "rspec_junit_formatter-0.4.1.xml",
        producer: "rspec 3.12 + rspec_junit_formatter 0.4.1 (Debian)",
        says: "10 examples, 7 failures, 2 pending",
        exit: 1,
        want: Read {
            count: 8,
            names: &[
                "spec.a_spec.Calc <&> fails with \"quotes\"",
                "spec.a_spec.Calc <&> raises",
                "spec.a_spec.Calc <&> pending passes",
                "spec.a_spec.Calc <&> prints bad bytes",
                "spec.a_spec.Calc <&> nested ctx inner fails",
                "spec.a_spec.BeforeAllFails a",
                "spec.a_spec.BeforeAllFails b",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "nextest-0.9.143_retries.xml",
        producer: "cargo-nextest 0.9.143, retries = 2, JUnit on",
        says: "8 tests run: 5 passed (1 flaky), 3 failed, 1 skipped",
        exit: 100,
        // nextest leaves the ignored test out of the file (tests="8"
        // skipped="0"); a failing test's retries are `<rerunFailure>`
        // children of its one testcase, the flaky pass's first try a
        // `<flakyFailure>`: neither is a `<failure>`, so the flaky test is
        // not named, and each failing test is named once. The control
        // bytes the tests printed were dropped by nextest.
        want: Read {
            count: 8,
            names: &[
                "nx.tests::always_fails_retried",
                "nx.tests::fails",
                "nx.tests::prints_controls",
            ],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "nextest-0.9.143_flaky_green.xml",
        producer: "cargo-nextest 0.9.143, retries = 2, a flaky test passing on its retry",
        says: "2 tests run: 2 passed (1 flaky), 7 skipped",
        exit: 0,
        want: Read {
            count: 2,
            names: &[],
            verdict: Verdict::Green,
            note: "",
        },
    },
    Row {
        file: "nextest-0.9.143_abort_timeout.xml",
        producer: "cargo-nextest 0.9.143, slow-timeout terminate-after, a test that aborts",
        says: "4 tests run: 2 passed, 1 failed, 1 timed out, 8 skipped",
        exit: 100,
        // The timed-out test is a `<failure type="test timeout"/>` with no
        // message or text: still a failure element.
        want: Read {
            count: 4,
            names: &["nx.harsh::aborts", "nx.harsh::hangs"],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "bats-1.8.2.xml",
        producer: "bats 1.8.2 (Debian) --formatter junit",
        says: "3 tests, 1 failure, 1 skipped",
        exit: 1,
        want: Read {
            count: 2,
            names: &["t.bats.fails <&> \"q\""],
            verdict: Red,
            note: "",
        },
    },
    Row {
        file: "bats-1.8.2_escape.xml",
        producer: "bats 1.8.2, a failing test printing an ANSI colour (ESC)",
        says: "3 tests, 1 failure, 1 skipped (ESC written as &#27;)",
        exit: 1,
        want: Refused {
            kind: "report-malformed",
            line: 8,
        },
    },
    Row {
        file: "bats-1.8.2_invalid_utf8.xml",
        producer: "bats 1.8.2, a failing test printing a byte that is not UTF-8",
        says: "5 tests, 2 failures, 1 skipped (the byte is copied raw)",
        exit: 1,
        want: Refused {
            kind: "report-malformed",
            line: 15,
        },
    },
];

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/junit")
}

fn run(file: &str, exit: i32) -> Measurement {
    let dir = fixtures();
    let ev = Evidence {
        kind: ReportKind::JunitXml,
        termination: Termination::Exited(exit),
        stdout: &dir.join(file),
        report_root: &dir,
        report_path: Some(file),
        report_path_key: "verify.full.report_path",
    };
    measure(&ev)
}

/// What is wrong with one row's reading, as text.
fn check(row: &Row) -> Vec<String> {
    let m = run(row.file, row.exit);
    let mut bad = Vec::new();
    let notes = m.notes.join(" | ");
    match &row.want {
        Read {
            count,
            names,
            verdict,
            note,
        } => {
            if m.count != Some(*count) {
                bad.push(format!("count: expected {count}, got {:?}", m.count));
            }
            if m.named_tests.as_deref()
                != Some(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..])
            {
                bad.push(format!(
                    "names:\n      expected {names:?}\n      got      {:?}",
                    m.named_tests
                ));
            }
            if m.verdict != *verdict {
                bad.push(format!(
                    "verdict: expected {verdict:?}, got {:?}",
                    m.verdict
                ));
            }
            if !note.is_empty() && !m.notes.iter().any(|n| n.starts_with(note)) {
                bad.push(format!("no note starting `{note}`: {notes}"));
            }
            if note.is_empty() && !m.notes.is_empty() {
                bad.push(format!("unexpected notes: {notes}"));
            }
        }
        Refused { kind, line } => {
            let last = m.notes.last().map(String::as_str).unwrap_or_default();
            let at = format!("{} line {line}:", row.file);
            if m.verdict != MeasurementFailed
                || m.count.is_some()
                || !last.starts_with(&format!("{kind}: "))
                || !last.contains(&at)
            {
                bad.push(format!(
                    "expected a `{kind}` refusal naming `{at}`, got {:?} {notes}",
                    m.verdict
                ));
            }
        }
    }
    bad
}

/// Every row: the reading agrees with what the producer said, as the
/// rules in `docs/reports.md` read it.
#[test]
fn every_real_producer_report() {
    let mut failures = Vec::new();
    for row in ROWS {
        let bad = check(row);
        let status = if bad.is_empty() { "ok  " } else { "FAIL" };
        println!("{status} {:<45} {} — {}", row.file, row.producer, row.says);
        if !bad.is_empty() {
            failures.push(format!(
                "{} ({}):\n    {}",
                row.file,
                row.producer,
                bad.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} producer reports are misread:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
}

/// Every fixture file is in the table (a file added without its expected
/// reading would test nothing).
#[test]
fn every_fixture_has_a_row() {
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    for f in &files {
        assert!(
            ROWS.iter().any(|r| r.file == f),
            "{f} has no row in reports_producers::ROWS"
        );
    }
}

/// Two producers' files end to end through the real `saphan certify`: a
/// suite that writes the file the producer wrote and exits as it did.
#[test]
fn certify_reads_real_producer_files() {
    use crate::common::{Env, Repo, assert_code, text};
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n",
    );
    let suite = |file: &str, exit: i32| {
        format!(
            "#!/bin/sh\nmkdir -p reports\ncp '{}' reports/junit.xml\nexit {exit}\n",
            fixtures().join(file).display()
        )
    };
    let certify = |repo: &Repo, code: i32| -> serde_json::Value {
        let o = env
            .cmd()
            .args(["--json", "certify", "--repo", &repo.path_str()])
            .output()
            .unwrap();
        assert_code(&o, code);
        serde_json::from_str(text(&o).0.trim()).unwrap()
    };
    // gotestsum --rerun-fails, every flake passing on its re-run, exit 0:
    // the failed attempts are named, red, and the pointer stays.
    let repo = Repo::new(&[(
        "suite.sh",
        &suite("gotestsum-1.8.2_rerun_fails_green.xml", 0),
    )]);
    let r = certify(&repo, 1);
    assert_eq!(r["verdict"], "red", "{r:#}");
    assert_eq!(r["count"], 10);
    assert_eq!(r["named_tests"], serde_json::json!(RERUN_GREEN_FAILED));
    let notes = r["notes"].to_string();
    assert!(notes.contains("exit-code-disagreed"), "{notes}");
    assert_eq!(repo.verified(), None);
    // pytest: a call failure and its teardown error, each named.
    repo.commit(
        &[("suite.sh", &suite("pytest-9.2.0_outcomes.xml", 1))],
        "pytest",
    );
    let r = certify(&repo, 1);
    assert_eq!(r["verdict"], "red", "{r:#}");
    assert_eq!(r["count"], 9);
    assert_eq!(r["named_tests"], serde_json::json!(PYTEST_OUTCOMES));
}
