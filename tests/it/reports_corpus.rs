//! Every row of `../shared/corpus/MANIFEST.tsv` through `report::measure`,
//! the same entry point certify uses: the count (or a failed measurement),
//! the failing names in order, and the verdict under both exit statuses.

use crate::common;

use saphan::exec::Termination;
use saphan::report::{Evidence, Measurement, ReportKind, Verdict, measure};
use std::path::{Path, PathBuf};

/// The corpus: `$SAPHAN_CORPUS` when set (a worktree elsewhere than beside
/// `shared/`), else `../shared/corpus` beside the checkout. Missing, the
/// tests skip on a developer's machine and fail under `SAPHAN_REQUIRE_ALL=1`
/// (CI).
fn corpus() -> PathBuf {
    match std::env::var_os("SAPHAN_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    }
}

/// The corpus, or `None` after [`common::skip_unless`] said why it is
/// missing (which fails the test under `SAPHAN_REQUIRE_ALL=1`).
fn corpus_or_skip() -> Option<PathBuf> {
    let dir = corpus();
    let absent = common::skip_unless(
        dir.join("MANIFEST.tsv").is_file(),
        "the corpus MANIFEST.tsv is absent (../shared/corpus, or set SAPHAN_CORPUS)",
    );
    (!absent).then_some(dir)
}

struct Row {
    file: String,
    count: Option<u64>,
    names: Vec<String>,
}

fn rows(dir: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("read MANIFEST.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (cf, cc, cn) = (col("file"), col("expected_count"), col("expected_failing"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Row {
                file: f[cf].to_string(),
                count: if f[cc] == "ERROR" {
                    None
                } else {
                    Some(f[cc].parse().unwrap_or_else(|_| panic!("bad count in {l}")))
                },
                names: if f[cn] == "-" {
                    Vec::new()
                } else {
                    f[cn].split(';').map(str::to_string).collect()
                },
            }
        })
        .collect()
}

fn run(dir: &Path, file: &str, exit: i32) -> Measurement {
    let path = dir.join(file);
    let (kind, root, rel) = if file.starts_with("gojson/") {
        (ReportKind::GoTestJson, dir.to_path_buf(), String::new())
    } else {
        let (d, f) = file.rsplit_once('/').unwrap();
        (ReportKind::JunitXml, dir.join(d), f.to_string())
    };
    let ev = Evidence {
        kind,
        termination: Termination::Exited(exit),
        stdout: &path,
        report_root: &root,
        report_path: (kind == ReportKind::JunitXml).then_some(rel.as_str()),
        report_path_key: "verify.full.report_path",
    };
    let m = measure(&ev);
    // The failure kind is set exactly on a failed measurement, and the
    // deciding (last) note opens with its word, for the person reading it.
    assert_eq!(
        m.failure.is_some(),
        m.verdict == Verdict::MeasurementFailed,
        "{file}: {m:?}"
    );
    if let Some(kind) = &m.failure {
        let last = m.notes.last().map(String::as_str).unwrap_or_default();
        assert!(last.starts_with(&format!("{kind}: ")), "{file}: {m:?}");
    }
    m
}

/// Check one row; return the mismatches as text.
fn check(dir: &Path, row: &Row) -> Vec<String> {
    let mut bad = Vec::new();
    let short = row.file.rsplit('/').next().unwrap();
    match row.count {
        None => {
            for exit in [0, 1] {
                let m = run(dir, &row.file, exit);
                if m.verdict != Verdict::MeasurementFailed
                    || m.count.is_some()
                    || m.named_tests.is_some()
                {
                    bad.push(format!(
                        "exit {exit}: expected a failed measurement, got {m:?}"
                    ));
                }
                let note = m.notes.join(" | ");
                let names_file = row.file.starts_with("gojson/") || note.contains(short);
                if !note.starts_with("report-") || !names_file {
                    bad.push(format!(
                        "exit {exit}: the note must name the problem and the file: {note}"
                    ));
                }
                if note.contains("report-malformed") && !note.contains(" line ") {
                    bad.push(format!(
                        "exit {exit}: broken XML must name the line: {note}"
                    ));
                }
            }
        }
        Some(count) => {
            let named = !row.names.is_empty();
            // The honest exit status for the report: non-zero when it names failures.
            let m = run(dir, &row.file, if named { 1 } else { 0 });
            if m.count != Some(count) {
                bad.push(format!("count: expected {count}, got {:?}", m.count));
            }
            if m.named_tests.as_deref() != Some(&row.names[..]) {
                bad.push(format!(
                    "names:\n  expected {:?}\n  got      {:?}",
                    row.names, m.named_tests
                ));
            }
            // A report whose suites declare failures/errors yet name no
            // failing testcase (no_cases_but_tests_attr.xml) is never green,
            // under either exit status.
            let unnamed = !named && claims_failures(&dir.join(&row.file));
            let want = match (named, unnamed) {
                (true, _) => Verdict::Red,
                (false, true) => Verdict::MeasurementFailed,
                (false, false) => Verdict::Green,
            };
            if m.verdict != want {
                bad.push(format!(
                    "verdict: expected {want:?}, got {:?} ({:?})",
                    m.verdict, m.notes
                ));
            }
            // The disagreeing exit status.
            let m = run(dir, &row.file, if named { 0 } else { 1 });
            let (want, word) = match (named, count) {
                (true, 0) => (Verdict::MeasurementFailed, "contradictory:"),
                (true, _) => (Verdict::Red, "exit-code-disagreed:"),
                (false, _) if unnamed => (Verdict::MeasurementFailed, "unnamed-failures:"),
                (false, _) => (Verdict::MeasurementFailed, "crash:"),
            };
            if m.verdict != want || !m.notes.iter().any(|n| n.starts_with(word)) {
                bad.push(format!(
                    "with the other exit status: expected {want:?} with a `{word}` note, got {:?} {:?}",
                    m.verdict, m.notes
                ));
            }
            if !row.file.starts_with("gojson/") && m.report_files != [short] {
                bad.push(format!("report_files: {:?}", m.report_files));
            }
        }
    }
    bad
}

#[test]
fn every_manifest_row() {
    let Some(dir) = corpus_or_skip() else {
        return;
    };
    let rows = rows(&dir);
    assert!(rows.len() >= 39, "the manifest lists {} rows", rows.len());
    let mut failures = Vec::new();
    for row in &rows {
        let bad = check(&dir, row);
        let status = if bad.is_empty() { "ok  " } else { "FAIL" };
        println!("{status} {:<50} {:?}", row.file, row.count);
        if !bad.is_empty() {
            failures.push(format!("{}:\n    {}", row.file, bad.join("\n    ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus rows disagree with the manifest:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// Two files the same glob selects sum independently and list both, sorted.
#[test]
fn a_glob_over_two_reports_sums_them() {
    let Some(dir) = corpus_or_skip() else {
        return;
    };
    let ev = Evidence {
        kind: ReportKind::JunitXml,
        termination: Termination::Exited(1),
        stdout: Path::new("/nonexistent"),
        report_root: &dir,
        report_path: Some("junit/{surefire_stringutils,nextest_basic}.xml"),
        report_path_key: "verify.full.report_path",
    };
    let m = measure(&ev);
    assert_eq!(m.verdict, Verdict::Red);
    assert_eq!(m.count, Some(4 + 3));
    assert_eq!(
        m.report_files,
        ["junit/nextest_basic.xml", "junit/surefire_stringutils.xml"]
    );
    assert_eq!(
        m.named_tests.unwrap(),
        [
            "oxidized_navigation::parry3d.test_failure",
            "action.surefire.report.calc.StringUtilsTest.require_fail",
            "action.surefire.report.calc.StringUtilsTest.require"
        ]
    );
    // One broken file in the glob fails the whole measurement.
    let ev = Evidence {
        report_path: Some("junit/{nextest_basic,pytest_truncated_malformed}.xml"),
        ..ev
    };
    let m = measure(&ev);
    assert_eq!(m.verdict, Verdict::MeasurementFailed);
    assert!(
        m.notes[0].contains("pytest_truncated_malformed.xml line"),
        "{:?}",
        m.notes
    );
}

/// Does a JUnit file's own suite attributes claim a failure or error (a
/// plain text check, independent of the parser under test)?
fn claims_failures(path: &std::path::Path) -> bool {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    ["failures=\"", "errors=\"", "failures='", "errors='"]
        .iter()
        .any(|attr| {
            text.match_indices(attr).any(|(i, _)| {
                let rest = &text[i + attr.len()..];
                rest.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() && c != '0')
            })
        })
}

/// Every JUnit file of the corpus: its name (as the manifest gives it) and
/// its bytes — at least 20 of them, or the corpus is not the one these
/// tests were written for.
fn junit_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> = rows(dir)
        .into_iter()
        .filter(|row| row.file.starts_with("junit/"))
        .map(|row| {
            let bytes = std::fs::read(dir.join(&row.file)).expect("read corpus file");
            (row.file, bytes)
        })
        .collect();
    assert!(
        files.len() >= 20,
        "only {} JUnit files in the corpus",
        files.len()
    );
    files
}

/// A report file is read through a window (256 KiB in certify), refilled as
/// parsing reaches its end. Every JUnit file of the corpus reads the same —
/// count, names, output, or the same refusal at the same line — through
/// windows of every size from one byte up, as it does read whole.
#[test]
fn every_junit_file_reads_the_same_through_any_window() {
    let Some(dir) = corpus_or_skip() else {
        return;
    };
    for (file, bytes) in &junit_files(&dir) {
        let whole = format!("{:?}", saphan::report::junit::parse_bytes(bytes, file));
        for window in (1..=96).chain([127, 128, 255, 256, 1000, 4096, 65536]) {
            let through = format!(
                "{:?}",
                saphan::report::junit::parse_bytes_through(bytes, file, window)
            );
            assert_eq!(whole, through, "{} through a {window}-byte window", file);
        }
    }
}

/// The commonest events of a report (start, empty and end tags, the
/// whitespace between them) are read without quick-xml; every JUnit file
/// of the corpus reads the same — count, names, output, or the same refusal
/// at the same line — as when quick-xml reads every event, through windows
/// small and large.
#[test]
fn every_junit_file_reads_the_same_without_the_fast_path() {
    let Some(dir) = corpus_or_skip() else {
        return;
    };
    for (file, bytes) in &junit_files(&dir) {
        for window in (1..=32).chain([64, 255, 4096, bytes.len() + 1]) {
            let fast = format!(
                "{:?}",
                saphan::report::junit::parse_bytes_through(bytes, file, window)
            );
            let quick = format!(
                "{:?}",
                saphan::report::junit::parse_bytes_quick_xml_only(bytes, file, window)
            );
            assert_eq!(fast, quick, "{} through a {window}-byte window", file);
        }
    }
}
