//! Report kinds and the verdict: what the record is allowed to say about a
//! suite's result (spec: "The three report kinds").
//!
//! * `go-test-json` — the suite's stdout is `go test -json`'s event stream
//!   (cmd/test2json).
//! * `junit-xml` — the suite writes XML files selected by `report_path`, a
//!   glob relative to the tree root (JUnit XML as Surefire writes it).
//! * `exitcode` — the exit status is the whole verdict; no count, no names.
//!
//! [`measure`] is the one entry point certify, verify-union and the affected
//! tier use.

use crate::exec::Termination;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The three report kinds, spelled as in config-v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportKind {
    /// `go-test-json`
    #[serde(rename = "go-test-json")]
    GoTestJson,
    /// `junit-xml`
    #[serde(rename = "junit-xml")]
    JunitXml,
    /// `exitcode`
    #[serde(rename = "exitcode")]
    Exitcode,
}

impl ReportKind {
    /// The config-v1 spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReportKind::GoTestJson => "go-test-json",
            ReportKind::JunitXml => "junit-xml",
            ReportKind::Exitcode => "exitcode",
        }
    }
    /// Parse the config-v1 spelling.
    pub fn parse(s: &str) -> Option<ReportKind> {
        match s {
            "go-test-json" => Some(ReportKind::GoTestJson),
            "junit-xml" => Some(ReportKind::JunitXml),
            "exitcode" => Some(ReportKind::Exitcode),
            _ => None,
        }
    }
}

/// The verdict of one measurement (record field `verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every named test passed and the process agreed.
    Green,
    /// A failure was measured.
    Red,
    /// No honest verdict could be derived (timeout, crash, broken report).
    MeasurementFailed,
}

/// What one suite run measured, ready for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The verdict.
    pub verdict: Verdict,
    /// Tests that ran; `None` = `"unavailable"` (exitcode kind, or no report
    /// could be read). Never a 0 nobody measured.
    pub count: Option<u64>,
    /// True when the count was derived from testcases because an outermost
    /// `<testsuite>` carried no `tests` attribute.
    pub count_derived: bool,
    /// Failing test names in report order; `None` = `"unavailable"`.
    pub named_tests: Option<Vec<String>>,
    /// Report files read, relative to the tree root, sorted (junit-xml only).
    pub report_files: Vec<String>,
    /// Why the measurement failed, or where evidence disagreed (e.g. exit 0
    /// with named failures); empty on a plain green or red.
    pub notes: Vec<String>,
}

/// The evidence of one finished suite run.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The declared report kind.
    pub kind: ReportKind,
    /// How the suite process ended.
    pub termination: Termination,
    /// The file holding the suite's stdout (the go test -json stream).
    pub stdout: &'a Path,
    /// The root `report_path` is relative to (the scratch worktree, or the
    /// affected tier's `SAPHAN_AFFECTED_REPORT_DIR`).
    pub report_root: &'a Path,
    /// `report_path` as declared (junit-xml only).
    pub report_path: Option<&'a str>,
}

/// Derive the measurement from the evidence. Never fails: anything that
/// cannot be read becomes a `MeasurementFailed` with a note naming why.
pub fn measure(ev: &Evidence<'_>) -> Measurement {
    let failed = |note: String| Measurement {
        verdict: Verdict::MeasurementFailed,
        count: None,
        count_derived: false,
        named_tests: None,
        report_files: Vec::new(),
        notes: vec![note],
    };
    match ev.termination {
        Termination::TimedOut => {
            return failed(
                "timeout: the suite ran past its budget and its process group was killed".into(),
            );
        }
        Termination::Signaled(s) => {
            return failed(format!("crash: the suite was killed by signal {s}"));
        }
        Termination::Exited(_) => {}
    }
    match ev.kind {
        ReportKind::Exitcode => Measurement {
            verdict: if ev.termination.success() {
                Verdict::Green
            } else {
                Verdict::Red
            },
            count: None,
            count_derived: false,
            named_tests: None,
            report_files: Vec::new(),
            notes: Vec::new(),
        },
        ReportKind::GoTestJson | ReportKind::JunitXml => {
            failed(format!("{} parsing is not built yet", ev.kind.as_str()))
        }
    }
}
