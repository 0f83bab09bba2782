//! `--junit FILE` (certify, verify-union, verify-affected): one JUnit XML
//! report of what the verb measured, for the test views of CI systems
//! (GitHub, GitLab, Jenkins, Buildkite), written with `quick-junit`.
//!
//! The shape (docs/certify.md, "A JUnit report for CI"):
//!
//! * `<testsuites name="saphan">` holding one `<testsuite>` per answer: one
//!   for a local attempt, a verify-union or a verify-affected run; one per
//!   machine for `certify --machine` (each ran the whole suite); one for a
//!   `--split`, over the union of its shards.
//! * One `<testcase>` per test the report says ended ([`Tests`]):
//!   `classname` the package (go-test-json) or the testcase's own
//!   `classname` (junit-xml), `name` the test; a failed test carries
//!   `<failure>` with the message and the lines saphan kept of its output
//!   (the same as certify prints), a skipped one `<skipped/>`. A go package
//!   that failed without naming a test (its build failed) is a testcase of
//!   its own, named by the package.
//! * The verdict as the testsuite's properties (`saphan.verdict`,
//!   `saphan.failure`, `saphan.count`, `saphan.sha`, `saphan.record` …)
//!   and its `<system-out>` (the verdict lines certify prints). A verdict
//!   that is not green and that no failed testcase explains — an exitcode
//!   suite's red, any measurement-failed, verify-affected's unavailable —
//!   adds one testcase `saphan` / `verdict` with an `<error>` saying it,
//!   so no CI view reads a red as "0 failures".
//!
//! The file is replaced atomically (a temp file beside it, then a rename),
//! on every verdict; a refusal or an error before the verb answered writes
//! none.

use crate::error::Refusal;
use crate::record::Record;
use crate::report::{TestOutput, TestResult, TestStatus, Tests};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a JUnit report was not written.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    /// `--junit` names a directory: refused before anything runs.
    #[error(
        "--junit {path} is a directory — name the file to write the report to (e.g. {path}/saphan.xml)"
    )]
    IsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The report could not be written (after the verb answered).
    #[error(
        "the JUnit report {path} was not written: {why} — the verdict and its record stand; make the path writable, or read the record with `saphan records show`"
    )]
    Unwritable {
        /// The path given.
        path: PathBuf,
        /// What failed.
        why: String,
    },
}

impl Refusal for JunitError {
    fn name(&self) -> &'static str {
        match self {
            JunitError::IsDirectory { .. } => "junit-path-invalid",
            JunitError::Unwritable { .. } => "junit-unwritable",
        }
    }
}

/// Refuse a `--junit` path that can never be written as a file (a
/// directory), before the verb measures anything.
///
/// Errors: [`JunitError::IsDirectory`].
pub fn check(path: Option<&Path>) -> crate::error::Result<()> {
    match path {
        Some(p) if p.is_dir() => Err(JunitError::IsDirectory {
            path: p.to_path_buf(),
        }
        .into()),
        _ => Ok(()),
    }
}

/// One `<testsuite>`: one answer of the verb.
#[derive(Debug, Default)]
pub struct Suite<'a> {
    /// Its name (`certify 5c1d0b3e2a4f on local`).
    pub name: String,
    /// `saphan.<key>` properties, in order.
    pub properties: Vec<(&'static str, String)>,
    /// Its tests, in report order.
    pub tests: Vec<TestResult<'a>>,
    /// What the failing tests wrote, matched to them by name, in order.
    pub output: Vec<&'a TestOutput>,
    /// The verdict word (`green`, `red`, `measurement-failed`, or
    /// verify-affected's `nothing-selected` / `unavailable`).
    pub verdict: String,
    /// Why it is what it is, when no failed testcase says it: the
    /// synthetic `saphan` / `verdict` testcase's text (notes, failure).
    pub why: Vec<String>,
    /// Suite seconds.
    pub seconds: Option<f64>,
    /// The `<system-out>`: what saphan printed of it.
    pub summary: String,
}

impl<'a> Suite<'a> {
    /// The properties every record gives: verb, verdict, failure, SHA,
    /// machine, class, count, report kind, suite source, record id,
    /// started and finished; the suite's name is `name`.
    pub fn of_record(name: String, r: &'a Record) -> Suite<'a> {
        let mut p: Vec<(&'static str, String)> = vec![
            ("saphan.verb", r.verb.clone()),
            ("saphan.verdict", r.verdict.as_str().to_string()),
        ];
        if let Some(f) = &r.failure {
            p.push(("saphan.failure", f.to_string()));
        }
        p.extend([
            ("saphan.sha", r.sha.clone()),
            ("saphan.machine", r.machine.clone()),
            ("saphan.class", r.class.clone()),
            ("saphan.count", count_word(r.count.value())),
            ("saphan.report", r.report.as_str().to_string()),
            ("saphan.suite_source", r.suite_source.clone()),
            ("saphan.record", r.id.clone()),
            ("saphan.started_at", r.started_at.clone()),
            ("saphan.finished_at", r.finished_at.clone()),
        ]);
        if let Some(sh) = &r.shard {
            p.push(("saphan.shard", format!("{}/{}", sh.index + 1, sh.count)));
        }
        let mut why: Vec<String> = r.failure.iter().map(|f| format!("failure: {f}")).collect();
        why.extend(r.notes.iter().cloned());
        Suite {
            name,
            properties: p,
            verdict: r.verdict.as_str().to_string(),
            why,
            seconds: Some(r.suite_seconds),
            ..Suite::default()
        }
    }

    /// Add `tests` and the output of its failing tests.
    pub fn with_tests(mut self, tests: &'a Tests, output: &'a [TestOutput]) -> Suite<'a> {
        self.tests.extend(tests.iter());
        self.output.extend(output.iter());
        self
    }
}

/// `2`, or `unavailable`.
pub fn count_word(count: Option<u64>) -> String {
    count.map_or("unavailable".into(), |n| n.to_string())
}

/// The union of a `--split`'s shards: every shard's tests in shard order,
/// each test a suite re-ran in several shards (one that ignored its shard
/// variables) taken from the shard that ran it most — as the split counts
/// it (`schedule::repeats`).
pub fn union<'a>(shards: &[&'a Tests]) -> Vec<TestResult<'a>> {
    // Per test, how often each shard ran it.
    let mut runs: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, t) in shards.iter().enumerate() {
        for c in t.iter() {
            let per = runs
                .entry((c.classname, c.name))
                .or_insert_with(|| vec![0; shards.len()]);
            per[i] += 1;
        }
    }
    let owner = |key: (&str, &str)| -> Option<usize> {
        let per = runs.get(&key)?;
        let most = *per.iter().max()?;
        per.iter().position(|n| *n == most)
    };
    let mut out = Vec::new();
    for (i, t) in shards.iter().enumerate() {
        for c in t.iter() {
            if owner((c.classname, c.name)) == Some(i) {
                out.push(c);
            }
        }
    }
    out
}

/// Does `verdict` need the synthetic `saphan` / `verdict` testcase: not
/// green (nor verify-affected's nothing-selected), and either no honest
/// red (measurement-failed, unavailable) or a red no failed test explains.
fn needs_verdict_case(s: &Suite<'_>) -> bool {
    match s.verdict.as_str() {
        "green" | "nothing-selected" => false,
        "red" => !s.tests.iter().any(|t| t.status == TestStatus::Failed),
        _ => true,
    }
}

/// The lines kept of a failing test's output, as certify prints them
/// (without the indentation), for a `<failure>`'s text.
fn output_text(o: &TestOutput) -> String {
    let mut lines: Vec<String> = Vec::new();
    if o.dropped > 0 {
        lines.push(format!("({} earlier line(s) dropped)", o.dropped));
    }
    lines.extend(o.lines.iter().cloned());
    lines.join("\n")
}

/// The quick-junit testsuite of one [`Suite`].
fn testsuite(s: &Suite<'_>) -> TestSuite {
    let mut ts = TestSuite::new(s.name.as_str());
    for (k, v) in &s.properties {
        ts.add_property(Property::new(*k, v.as_str()));
    }
    if let Some(secs) = s.seconds.filter(|s| s.is_finite() && *s >= 0.0) {
        ts.set_time(Duration::from_secs_f64(secs));
    }
    // The output of failing tests, by the name `named_tests` spells.
    let mut outputs: HashMap<&str, VecDeque<&TestOutput>> = HashMap::new();
    for o in &s.output {
        outputs.entry(o.test.as_str()).or_default().push_back(o);
    }
    for t in &s.tests {
        let full = t.full_name();
        let status = match t.status {
            TestStatus::Passed => TestCaseStatus::success(),
            TestStatus::Skipped => TestCaseStatus::skipped(),
            TestStatus::Failed => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                if let Some(o) = outputs.get_mut(full.as_str()).and_then(VecDeque::pop_front) {
                    if let Some(m) = &o.message {
                        st.set_message(m.as_str());
                    }
                    let text = output_text(o);
                    if !text.is_empty() {
                        st.set_description(text);
                    }
                }
                st
            }
        };
        let name = if t.name.is_empty() {
            full.as_str()
        } else {
            t.name
        };
        let mut tc = TestCase::new(name, status);
        if !t.classname.is_empty() {
            tc.set_classname(t.classname);
        }
        ts.add_test_case(tc);
    }
    if needs_verdict_case(s) {
        let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
        st.set_message(format!("saphan verdict: {}", s.verdict));
        if !s.why.is_empty() {
            st.set_description(s.why.join("\n"));
        }
        let mut tc = TestCase::new("verdict", st);
        tc.set_classname("saphan");
        ts.add_test_case(tc);
    }
    if !s.summary.is_empty() {
        ts.set_system_out(s.summary.as_str());
    }
    ts
}

/// The XML of `suites`.
pub fn render(suites: &[Suite<'_>]) -> String {
    let mut report = Report::new("saphan");
    let total: f64 = suites.iter().filter_map(|s| s.seconds).sum();
    if total.is_finite() && total >= 0.0 {
        report.set_time(Duration::from_secs_f64(total));
    }
    for s in suites {
        report.add_test_suite(testsuite(s));
    }
    report
        .to_string()
        .expect("a JUnit report of strings serializes")
}

/// Write the report of `suites` to `path`, replacing it atomically (temp
/// file beside it, fsync, rename). A new file is readable by all (0644),
/// as CI's uploaders need; an existing one keeps its mode.
///
/// Errors: [`JunitError::Unwritable`].
pub fn write(path: &Path, suites: &[Suite<'_>]) -> crate::error::Result<()> {
    let xml = render(suites);
    let existed = path.exists();
    crate::fsutil::atomic_write(path, xml.as_bytes()).map_err(|e| JunitError::Unwritable {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    if !existed {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644));
    }
    Ok(())
}

/// Write `suites` to `path` when `--junit` asked for it; a failure is
/// said on stderr (`saphan: warning: junit-unwritable: …`) and changes no
/// exit code: the verdict and its record stand.
pub fn write_asked(path: Option<&Path>, suites: &[Suite<'_>]) {
    let Some(path) = path else { return };
    if let Err(e) = write(path, suites) {
        say!(
            "saphan: warning: {}: {}",
            e.name(),
            super::visible(&e.to_string())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quick_junit::TestCaseStatus as S;

    fn tests(cases: &[(&str, &str, TestStatus)]) -> Tests {
        let mut t = Tests::default();
        for (c, n, s) in cases {
            t.push(c, n, *s);
        }
        t
    }

    #[test]
    fn every_test_is_a_testcase_and_a_red_without_a_failed_test_says_so() {
        let t = tests(&[
            ("p", "TestA", TestStatus::Passed),
            ("p", "TestB", TestStatus::Failed),
            ("p", "TestC", TestStatus::Skipped),
            ("q", "", TestStatus::Failed),
        ]);
        let out = vec![TestOutput {
            test: "p.TestB".into(),
            message: None,
            lines: vec!["    b_test.go:3: no".into()],
            dropped: 2,
        }];
        let s = Suite {
            name: "certify x on local".into(),
            verdict: "red".into(),
            ..Suite::default()
        }
        .with_tests(&t, &out);
        let xml = render(std::slice::from_ref(&s));
        let back = Report::deserialize_from_str(&xml).unwrap();
        let ts = &back.test_suites[0];
        assert_eq!(ts.test_cases.len(), 4, "{xml}");
        assert_eq!((ts.failures, ts.skipped, ts.errors), (2, 1, 0), "{xml}");
        let b = &ts.test_cases[1];
        assert_eq!(b.name.as_str(), "TestB");
        assert_eq!(b.classname.as_ref().unwrap().as_str(), "p");
        match &b.status {
            S::NonSuccess { description, .. } => assert_eq!(
                description.as_ref().unwrap().as_str(),
                "(2 earlier line(s) dropped)\n    b_test.go:3: no"
            ),
            other => panic!("{other:?}"),
        }
        // A package that failed without a test is a testcase named by it.
        assert_eq!(ts.test_cases[3].name.as_str(), "q");

        // An exitcode red: no test failed, so the verdict is one error.
        let none = Tests::default();
        let s = Suite {
            name: "n".into(),
            verdict: "red".into(),
            why: vec!["suite exit code: 1".into()],
            ..Suite::default()
        }
        .with_tests(&none, &[]);
        let back = Report::deserialize_from_str(&render(&[s])).unwrap();
        let ts = &back.test_suites[0];
        assert_eq!((ts.tests, ts.errors), (1, 1));
        assert_eq!(
            ts.test_cases[0].classname.as_ref().unwrap().as_str(),
            "saphan"
        );
    }

    #[test]
    fn a_split_union_takes_a_repeated_test_from_the_shard_that_ran_it_most() {
        let a = tests(&[
            ("c", "t1", TestStatus::Passed),
            ("c", "t2", TestStatus::Passed),
        ]);
        let b = tests(&[
            ("c", "t2", TestStatus::Passed),
            ("c", "t2", TestStatus::Failed),
            ("c", "t3", TestStatus::Passed),
        ]);
        let u: Vec<String> = union(&[&a, &b])
            .iter()
            .map(|t| format!("{}:{:?}", t.full_name(), t.status))
            .collect();
        assert_eq!(
            u,
            ["c.t1:Passed", "c.t2:Passed", "c.t2:Failed", "c.t3:Passed"]
        );
    }
}
