//! Report kinds and the verdict: what the record is allowed to say about a
//! suite's result (spec: "The three report kinds").
//!
//! * `go-test-json` — the suite's stdout is `go test -json`'s event stream
//!   (cmd/test2json); parsed line by line in [`gojson`].
//! * `junit-xml` — the suite writes XML files selected by `report_path`, a
//!   glob relative to the tree root (JUnit XML as Surefire writes it); files
//!   are selected in [`files`] and parsed as a stream in [`junit`].
//! * `exitcode` — the exit status is the whole verdict; no count, no names.
//!
//! [`measure`] is the one entry point certify, verify-union and the affected
//! tier use. Where the spec leaves a choice open, `../shared/corpus/README.md`
//! fixes it, and the corpus manifest is the test of every rule here.

pub mod failure;
pub mod files;
pub mod gojson;
pub mod junit;
pub mod rerun;
mod xml;

pub use crate::outcome::{FailureKind, Verdict};

use crate::error::{Exit, Refusal};
use crate::exec::Termination;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

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
    /// with named failures); empty on a plain green or red. Each note starts
    /// with a stable kebab-case name (`crash:`, `report-malformed:`,
    /// `exit-code-disagreed:` …), for a person: the kind is [`Self::failure`].
    pub notes: Vec<String>,
    /// Why the measurement failed: `Some` exactly when the verdict is
    /// measurement-failed (the record's `failure`).
    #[serde(default)]
    pub failure: Option<FailureKind>,
    /// What each failing test wrote, in report order (see [`TestOutput`]):
    /// for the operator's output and certify's `--json`, never the record
    /// (`#[serde(skip)]`: the record schema does not carry it).
    #[serde(skip)]
    pub test_output: Vec<TestOutput>,
    /// Failing tests past [`OUTPUT_TESTS`] whose output was not kept.
    #[serde(skip)]
    pub test_output_omitted: u64,
    /// junit-xml: the identities of the tests that ran ([`Parsed::test_ids`]),
    /// for a `--split`'s count of each test once; never the record.
    #[serde(skip)]
    pub test_ids: Vec<u64>,
    /// Every test the report says ended, and how ([`Parsed::tests`]): what
    /// `--junit` writes one `<testcase>` for; never the record.
    #[serde(skip)]
    pub tests: Tests,
}

impl Measurement {
    /// A failed measurement of `kind` with one note, `<kind>: <detail>`:
    /// no count, no names — nothing was measured that could be trusted.
    pub fn failed(kind: FailureKind, detail: impl fmt::Display) -> Measurement {
        Measurement {
            verdict: Verdict::MeasurementFailed,
            count: None,
            count_derived: false,
            named_tests: None,
            report_files: Vec::new(),
            notes: vec![format!("{kind}: {detail}")],
            failure: Some(kind),
            test_output: Vec::new(),
            test_output_omitted: 0,
            test_ids: Vec::new(),
            tests: Tests::default(),
        }
    }

    /// A failed measurement for a report that could not be read: its kind
    /// and its note ([`ReportError::note`]).
    pub fn report_failed(e: &ReportError) -> Measurement {
        Measurement::failed(e.into(), e)
    }
}

/// How a count reads to a person: `1 test`, `12 tests`, or
/// `count: unavailable` when nothing was measured (never a made-up 0).
pub fn count_words(count: Option<u64>) -> String {
    match count {
        Some(1) => "1 test".into(),
        Some(n) => format!("{n} tests"),
        None => "count: unavailable".into(),
    }
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
    /// The config key that declared `report_path`, as messages should name
    /// it (`verify.full.report_path`, or the affected tier's key and root).
    pub report_path_key: &'a str,
}

/// What a parser derived from a report, before the exit status is weighed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Tests that ran (junit: Σ tests − skipped over outermost suites;
    /// go: top-level tests whose last action is pass or fail).
    pub count: u64,
    /// True when some outermost `<testsuite>` had no `tests` attribute and its
    /// count was derived from its testcases.
    pub count_derived: bool,
    /// Failing names in report order, duplicates kept.
    pub names: Vec<String>,
    /// Report files read, relative to the root, sorted (junit-xml only).
    pub files: Vec<String>,
    /// Observations worth keeping in the record (not failures).
    pub notes: Vec<String>,
    /// Σ `failures` + `errors` attributes over outermost `<testsuite>`s
    /// (junit-xml): what the report claims failed, named or not. Used only
    /// to refuse a green when failures are claimed but none is named.
    pub declared_failures: u64,
    /// The note in `notes` (its index) that says the evidence was cut off
    /// (go test -json: `stream-ended-early`, `unfinished-tests`), and that
    /// kind: without a named failure it decides a measurement-failed.
    pub cut_off: Option<(usize, FailureKind)>,
    /// What each failing test wrote (go: its `output` events; junit: its
    /// `<failure>`/`<error>` message and text), in the order the failures
    /// were named, for at most [`OUTPUT_TESTS`] tests.
    pub output: Vec<TestOutput>,
    /// Failing tests whose output was not kept because [`OUTPUT_TESTS`]
    /// were already kept.
    pub output_omitted: u64,
    /// junit-xml: one identity per `<testcase>` that ran (not skipped), in
    /// report order, duplicates kept — a hash of its raw `classname` and
    /// `name` ([`test_id`]) — so the shards of a `--split` can tell the
    /// same test run twice from two tests. Empty for go-test-json.
    pub test_ids: Vec<u64>,
    /// Every test the report says ended — passed, failed or skipped — in
    /// report order, re-runs and subtests each on their own (see [`Tests`]).
    /// Its failed entries are exactly [`Self::names`], in the same order.
    pub tests: Tests,
}

/// How one test ended, as its report says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestStatus {
    /// It passed.
    Passed,
    /// It failed (go: a `fail` event, or it never ended in a package that
    /// failed; junit: a `<failure>` or `<error>` child; a suite-level
    /// `<error>`; a go package that failed without naming a test).
    Failed,
    /// It was skipped (go: a `skip` event; junit: a `<skipped>` child).
    Skipped,
}

/// One entry of [`Tests`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestResult<'a> {
    /// The package (go-test-json) or `classname` (junit-xml); empty for a
    /// junit testcase without one and for a suite-level error.
    pub classname: &'a str,
    /// The test (`TestAdd`, `TestAdd/sub`) or the testcase's `name`; empty
    /// for a go package that failed without naming a test (its build or
    /// setup failed) and for a junit testcase without a `name`.
    pub name: &'a str,
    /// How it ended.
    pub status: TestStatus,
}

impl TestResult<'_> {
    /// The test as `named_tests` spells it: `classname.name`, the one that
    /// is not empty alone, or `(unnamed testcase)`.
    pub fn full_name(&self) -> String {
        match (self.classname.is_empty(), self.name.is_empty()) {
            (false, false) => format!("{}.{}", self.classname, self.name),
            (_, false) => self.name.to_string(),
            (false, true) => self.classname.to_string(),
            (true, true) => "(unnamed testcase)".to_string(),
        }
    }
}

/// Every test a report says ended, in report order: what `--junit` writes
/// one `<testcase>` each for. Held in one text buffer (a package's name
/// once for its run of tests) and one small entry per test, so a report of
/// a million tests costs their names and about 40 bytes each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tests {
    text: String,
    cases: Vec<CaseAt>,
}

/// Where one test's classname and name lie in [`Tests::text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CaseAt {
    class: (usize, usize),
    name: (usize, usize),
    status: TestStatus,
}

impl Tests {
    /// Add one test at the end.
    pub fn push(&mut self, classname: &str, name: &str, status: TestStatus) {
        let c = self.case(classname, name, status);
        self.cases.push(c);
    }

    /// Add one test at position `at` (clamped to the end): a junit
    /// suite-level error is named where its suite began.
    pub fn insert(&mut self, at: usize, classname: &str, name: &str, status: TestStatus) {
        let c = self.case(classname, name, status);
        self.cases.insert(at.min(self.cases.len()), c);
    }

    fn case(&mut self, classname: &str, name: &str, status: TestStatus) -> CaseAt {
        // A package's tests come in runs: its name is kept once per run.
        let class = match self.cases.last() {
            Some(l) if &self.text[l.class.0..l.class.1] == classname => l.class,
            _ => {
                let s = self.text.len();
                self.text.push_str(classname);
                (s, self.text.len())
            }
        };
        let s = self.text.len();
        self.text.push_str(name);
        CaseAt {
            class,
            name: (s, self.text.len()),
            status,
        }
    }

    /// Set how the entry at `index` ended (a junit testcase is added when
    /// it opens and learns its end from its children).
    pub fn set_status(&mut self, index: usize, status: TestStatus) {
        if let Some(c) = self.cases.get_mut(index) {
            c.status = status;
        }
    }

    /// Add every test of `other` after these.
    pub fn extend(&mut self, other: &Tests) {
        for t in other.iter() {
            self.push(t.classname, t.name, t.status);
        }
    }

    /// How many tests.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }

    /// The tests, in order.
    pub fn iter(&self) -> impl Iterator<Item = TestResult<'_>> + '_ {
        self.cases.iter().map(|c| TestResult {
            classname: &self.text[c.class.0..c.class.1],
            name: &self.text[c.name.0..c.name.1],
            status: c.status,
        })
    }

    /// How many ended with `status`.
    pub fn count(&self, status: TestStatus) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }
}

/// The identity of a test: a hash of its raw (still escaped) `classname`
/// and `name` attribute values. Equal for the same testcase written the
/// same way by two runs of one suite; compared within one process only.
pub fn test_id(classname: &[u8], name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    classname.hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

/// Lines kept per failing test: the last ones it wrote.
pub const OUTPUT_LINES: usize = 20;
/// Bytes kept of one output line; a longer line is cut and ends in `…`.
pub const OUTPUT_LINE_BYTES: usize = 2048;
/// Failing tests whose output is kept; past this the output of further
/// failing tests is counted ([`Parsed::output_omitted`]), not kept, so a
/// report with a million failures costs their names and no more.
pub const OUTPUT_TESTS: usize = 200;

/// What one failing test wrote, bounded: the last [`OUTPUT_LINES`] lines of
/// its own output (go test -json: the `output` events under its own name,
/// without the `=== RUN` / `--- FAIL` framing; junit-xml: the text of its
/// `<failure>`/`<error>`), with the count of earlier lines dropped, and the
/// failure's `message` attribute (junit-xml). The text is as the suite
/// wrote it; whoever prints it for a person escapes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutput {
    /// The failing test, spelled as in `named_tests`.
    pub test: String,
    /// The `<failure>`/`<error>` `message` attribute (junit-xml only), at
    /// most [`OUTPUT_LINE_BYTES`] bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last lines, oldest first, without their newlines.
    pub lines: Vec<String>,
    /// How many earlier lines were dropped (0 when `lines` is all of it).
    pub dropped: u64,
}

/// A bounded ring of text lines: keeps the last [`OUTPUT_LINES`] lines fed
/// to it (each cut at [`OUTPUT_LINE_BYTES`]) and counts the ones it let go.
/// Text may arrive in pieces ([`LineRing::push_text`]); a piece without a
/// newline continues the current line.
#[derive(Debug, Default, Clone)]
pub struct LineRing {
    lines: std::collections::VecDeque<String>,
    partial: String,
    partial_cut: bool,
    dropped: u64,
}

impl LineRing {
    /// Feed text; every `\n` ends a line (a `\r` before it is dropped).
    pub fn push_text(&mut self, text: &str) {
        let mut rest = text;
        while let Some(i) = rest.find('\n') {
            self.append(&rest[..i]);
            self.end_line();
            rest = &rest[i + 1..];
        }
        self.append(rest);
    }

    fn append(&mut self, piece: &str) {
        if self.partial_cut {
            return;
        }
        let room = OUTPUT_LINE_BYTES.saturating_sub(self.partial.len());
        if piece.len() <= room {
            self.partial.push_str(piece);
        } else {
            let mut cut = room;
            while !piece.is_char_boundary(cut) {
                cut -= 1;
            }
            self.partial.push_str(&piece[..cut]);
            self.partial.push('…');
            self.partial_cut = true;
        }
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.partial);
        self.partial_cut = false;
        if line.ends_with('\r') {
            line.pop();
        }
        if self.lines.len() == OUTPUT_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }

    /// End the current line if it holds anything (a piece of text that
    /// ends without a newline), so the next text starts a line of its own.
    pub fn break_line(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }

    /// True when nothing was fed.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.partial.is_empty() && self.dropped == 0
    }

    /// The kept lines (an unterminated last piece counts as a line) as the
    /// output of `test`.
    pub fn finish(mut self, test: String, message: Option<String>) -> TestOutput {
        if !self.partial.is_empty() {
            self.end_line();
        }
        TestOutput {
            test,
            message,
            lines: self.lines.into(),
            dropped: self.dropped,
        }
    }
}

/// Why a report could not be read. Every variant names the file (relative to
/// the tree root for junit-xml), so the record says where to look.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A junit-xml glob selected nothing.
    #[error(
        "report_path `{pattern}` matched no files — make the suite write its report there, or fix {key}"
    )]
    NoMatch {
        /// The glob as declared.
        pattern: String,
        /// The config key that declared it (see [`Evidence::report_path_key`]).
        key: String,
    },
    /// `report_path` is not a usable relative glob.
    #[error(
        "report_path `{pattern}` is not a usable glob: {why} — declare a glob relative to the repository root"
    )]
    BadPattern {
        /// The glob as declared.
        pattern: String,
        /// What is wrong with it.
        why: String,
    },
    /// No `report_path` was declared for junit-xml.
    #[error("junit-xml needs report_path and none was declared — set {key}")]
    NoPattern {
        /// The config key to set (see [`Evidence::report_path_key`]).
        key: String,
    },
    /// A matched path is a symlink (or sits under one) that leads outside the tree.
    #[error(
        "{file} leads outside the tree (to {target}) — the suite must write its report inside the worktree"
    )]
    SymlinkEscape {
        /// The matched path, relative.
        file: String,
        /// Where it resolves.
        target: PathBuf,
    },
    /// A matched path is not a regular file (a FIFO, socket or device):
    /// it is never opened, since reading it could block forever.
    #[error(
        "{file} is {kind}, not a regular file — it was not opened; make the suite write its report as a regular file, or narrow report_path"
    )]
    NotRegular {
        /// The matched path, relative.
        file: String,
        /// What it is (`a FIFO`, `a socket`, `a device`).
        kind: &'static str,
    },
    /// The list of candidates under report_path's directory on a machine is
    /// larger than saphan reads whole: it is never cut (a cut listing could
    /// drop a failing report and come out green).
    #[error(
        "the files under {dir} take more than {cap} bytes to list, more than saphan reads whole — narrow report_path, or have the suite keep its report directory small"
    )]
    ListingUnbounded {
        /// The listed directory (the glob's literal prefix, on the machine).
        dir: String,
        /// The most listing bytes read ([`crate::measure::collect::REPORT_LISTING_CAP`]).
        cap: u64,
    },
    /// The file could not be opened or read.
    #[error("cannot read {file}: {source} — check that the suite wrote it and it is readable")]
    Unreadable {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is empty (or only whitespace).
    #[error("{file} is empty — the suite wrote no report; an empty file is never 0 tests")]
    Empty {
        /// The file.
        file: String,
    },
    /// The XML is not well-formed (or ends before its root closes).
    #[error("{file} line {line}: {why} — the report is broken; nothing from it is counted")]
    Malformed {
        /// The file.
        file: String,
        /// 1-based line of the error.
        line: u64,
        /// What broke.
        why: String,
    },
    /// Well-formed XML with no `<testsuite>` anywhere.
    #[error(
        "{file} holds no <testsuite> — it is not a JUnit report, or the suite ran nothing it could describe"
    )]
    NoTestsuite {
        /// The file.
        file: String,
    },
    /// A go test -json stream with no event at all.
    #[error("{file} holds no go test -json events{hint} — {remedy}")]
    NoEvents {
        /// The stream file.
        file: String,
        /// Extra context (how many plain-text lines it holds, or that it is
        /// empty).
        hint: String,
        /// The stream has no line at all (what go writes on stdout when a
        /// package without test files fails to build).
        empty: bool,
        /// What to do: fix the build when go printed only build failures,
        /// else [`gojson::NO_EVENTS_REMEDY`].
        remedy: String,
    },
}

impl Refusal for ReportError {
    fn name(&self) -> &'static str {
        match self {
            ReportError::NoMatch { .. } => "report-no-match",
            ReportError::BadPattern { .. } | ReportError::NoPattern { .. } => "report-path-invalid",
            ReportError::SymlinkEscape { .. } => "report-symlink-escape",
            ReportError::NotRegular { .. } => "report-not-regular",
            ReportError::Unreadable { .. } => "report-unreadable",
            ReportError::ListingUnbounded { .. } => "report-listing-unbounded",
            ReportError::Empty { .. } => "report-empty",
            ReportError::Malformed { .. } => "report-malformed",
            ReportError::NoTestsuite { .. } => "report-no-testsuite",
            ReportError::NoEvents { .. } => "report-no-events",
        }
    }
    fn exit(&self) -> Exit {
        Exit::MeasurementFailed
    }
    fn failure_kind(&self) -> Option<FailureKind> {
        Some(self.into())
    }
}

impl ReportError {
    /// The record note for this error: `<name>: <message>`.
    pub fn note(&self) -> String {
        format!("{}: {}", self.name(), self)
    }
}

/// Parse the report an [`Evidence`] points at, without weighing the exit
/// status. `exitcode` has nothing to parse and returns an empty [`Parsed`].
pub fn parse(ev: &Evidence<'_>) -> Result<Parsed, ReportError> {
    match ev.kind {
        ReportKind::Exitcode => Ok(Parsed::default()),
        ReportKind::GoTestJson => gojson::parse_file(ev.stdout, "the suite's stdout"),
        ReportKind::JunitXml => {
            let key = ev.report_path_key.to_string();
            let pattern = ev
                .report_path
                .ok_or_else(|| ReportError::NoPattern { key: key.clone() })?;
            junit::parse_glob(ev.report_root, pattern).map_err(|e| match e {
                ReportError::NoMatch { pattern, .. } => ReportError::NoMatch { pattern, key },
                e => e,
            })
        }
    }
}

/// Derive the measurement from the evidence. Never fails: anything that
/// cannot be read becomes a `MeasurementFailed` with a note naming why.
pub fn measure(ev: &Evidence<'_>) -> Measurement {
    match ev.termination {
        Termination::TimedOut => {
            return Measurement::failed(
                FailureKind::Timeout,
                "the suite ran past its budget and its process group was killed",
            );
        }
        Termination::Signaled(s) => {
            return Measurement::failed(
                FailureKind::Crash,
                format!("the suite was killed by signal {s}"),
            );
        }
        Termination::OutputLost => {
            return Measurement::failed(
                FailureKind::OutputLost,
                "the suite's stdout could not be kept whole (its file could not be written); none of it was judged",
            );
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
            failure: None,
            test_output: Vec::new(),
            test_output_omitted: 0,
            test_ids: Vec::new(),
            tests: Tests::default(),
        },
        ReportKind::GoTestJson | ReportKind::JunitXml => match parse(ev) {
            Ok(p) => judge(p, ev.termination),
            Err(e) => report_failed(&e, ev.termination),
        },
    }
}

/// The judgement of `certify --split` over its go-test-json shards: their
/// streams (`stdouts`, in shard order) parsed as one stream
/// ([`gojson::parse_files`]) and weighed by [`judge`] against
/// `termination` (the shards' combined ending) — the same rules, and the
/// same words, as one unsplit stream's.
pub fn measure_go_union(stdouts: &[&Path], termination: Termination) -> Measurement {
    match gojson::parse_files(stdouts, "the suite's stdout") {
        Ok(p) => judge(p, termination),
        Err(e) => report_failed(&e, termination),
    }
}

/// A report that could not be read, weighed against how the suite ended:
/// an empty go test -json stream from a suite that exited non-zero is the
/// suite's crash, as the same exit with events and nothing named is
/// ([`judge`]) — go wrote why on stderr (Go 1.19 writes a build failure of
/// a package without test files only there), and no advice to make the
/// suite print events would be true. Every other error is its own name.
fn report_failed(e: &ReportError, termination: Termination) -> Measurement {
    match (e, termination.code()) {
        (ReportError::NoEvents { empty: true, .. }, Some(c)) if c != 0 => Measurement::failed(
            FailureKind::Crash,
            format!(
                "the suite exited {c} without writing anything on its stdout (no go test -json event) — the reason is on its stderr: go writes a build failure of a package without test files only there"
            ),
        ),
        _ => Measurement::report_failed(e),
    }
}

/// Weigh parsed evidence against how the process ended (corpus README,
/// "Verdicts"):
///
/// * named failures are never green; with a non-zero exit they are a red;
/// * exit 0 with named failures and a positive count is red, and a note says
///   the exit code disagreed;
/// * exit 0 with named failures and a count of 0 (the suite-initialization
///   shape `tests="0" errors="1"`) is refused as contradictory;
/// * a non-zero exit with nothing named is a crash: measurement failed;
/// * `failures`/`errors` declared on an outermost `<testsuite>` with no
///   failing testcase named is measurement-failed (`unnamed-failures`);
/// * a go test -json stream that ends with tests still running, or in which
///   a test started and never ended inside a package that ended, with
///   nothing named is measurement-failed (`stream-ended-early`,
///   `unfinished-tests`), whatever the exit; with a named failure it is red
///   and the note stays;
/// * exit 0 with nothing named is green.
///
/// Timeouts and signals never reach here ([`measure`] handles them).
pub fn judge(p: Parsed, termination: Termination) -> Measurement {
    let code = termination.code();
    let mut notes = p.notes;
    let named = !p.names.is_empty();
    // A go test -json stream that stops while tests are still running (the
    // suite was cut off, or piped through `head`) proves nothing about the
    // tests it never finished: without a named failure it is never green.
    // The same holds for a test that started and never reported an end
    // inside a package that ended (`unfinished-tests`): its result was
    // never seen.
    let cut_off = p.cut_off;
    let mut failure = None;
    let verdict = match (named, code) {
        // The report says something failed but names nothing: whatever the
        // exit status, that is no green (and no honest red either).
        (false, _) if p.declared_failures > 0 => {
            notes.push(format!(
                "unnamed-failures: the report's <testsuite> attributes declare {} failure(s)/error(s) but no <testcase> carries a <failure> or <error> — the report contradicts itself",
                p.declared_failures
            ));
            failure = Some(FailureKind::UnnamedFailures);
            Verdict::MeasurementFailed
        }
        (false, _) if cut_off.is_some() => {
            if let Some((at, kind)) = cut_off {
                let note = notes.remove(at);
                notes.push(note);
                failure = Some(kind);
            }
            Verdict::MeasurementFailed
        }
        (true, Some(c)) if c != 0 => Verdict::Red,
        (true, _) if p.count == 0 => {
            notes.push(format!(
                "contradictory: the report counts 0 tests yet names {} failure(s), and the suite exited 0 — a zero-test failure needs a non-zero exit to be believed",
                p.names.len()
            ));
            failure = Some(FailureKind::Contradictory);
            Verdict::MeasurementFailed
        }
        (true, _) => {
            notes.push(format!(
                "exit-code-disagreed: the suite exited 0 but the report names {} failing test(s); the verdict follows the report",
                p.names.len()
            ));
            Verdict::Red
        }
        (false, Some(0)) => Verdict::Green,
        (false, _) => {
            notes.push(format!(
                "crash: the suite exited {} but the report names no failing test — the suite broke outside any test",
                code.map(|c| c.to_string()).unwrap_or_else(|| "abnormally".into())
            ));
            failure = Some(FailureKind::Crash);
            Verdict::MeasurementFailed
        }
    };
    Measurement {
        verdict,
        count: Some(p.count),
        count_derived: p.count_derived,
        named_tests: Some(p.names),
        report_files: p.files,
        notes,
        failure,
        test_output: p.output,
        test_output_omitted: p.output_omitted,
        test_ids: p.test_ids,
        tests: p.tests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite whose stdout was lost ([`Termination::OutputLost`]) is never
    /// judged, however green what reached the file looks and however the
    /// suite exited: a part of a stream is not the stream.
    #[test]
    fn a_lost_stdout_is_a_failed_measurement_named_output_lost() {
        let dir = tempfile::tempdir().unwrap();
        let stdout = dir.path().join("stdout");
        std::fs::write(
            &stdout,
            concat!(
                r#"{"Action":"run","Package":"p","Test":"TestA"}"#,
                "\n",
                r#"{"Action":"pass","Package":"p","Test":"TestA"}"#,
                "\n",
                r#"{"Action":"pass","Package":"p"}"#,
                "\n"
            ),
        )
        .unwrap();
        let ev = |termination| Evidence {
            kind: ReportKind::GoTestJson,
            termination,
            stdout: &stdout,
            report_root: dir.path(),
            report_path: None,
            report_path_key: "verify.full.report_path",
        };
        assert_eq!(measure(&ev(Termination::Exited(0))).verdict, Verdict::Green);
        for kind in [ReportKind::GoTestJson, ReportKind::Exitcode] {
            let m = measure(&Evidence {
                kind,
                ..ev(Termination::OutputLost)
            });
            assert_eq!(m.verdict, Verdict::MeasurementFailed, "{kind:?}");
            assert_eq!(m.failure, Some(FailureKind::OutputLost), "{kind:?}");
        }
    }
}
