//! junit-xml: a streaming reader of JUnit XML reports (the Surefire shape and
//! its many cousins: pytest, Gradle, jest-junit, PHPUnit, nextest …).
//!
//! The file is read through a window of 256 KiB that quick-xml
//! parses as a slice, so events are borrowed from the window, never copied;
//! an event the window's end cuts is read again from its start once the
//! window is refilled (`xml::Window`). The commonest events — start, empty
//! and end tags of plain shape and the whitespace between them — are read
//! without quick-xml, in the one pass that checks their attributes
//! (`fast_event`); the tests hold that to reading exactly what quick-xml
//! reads, refusals included. No document tree is built, so memory
//! stays flat however large the report (it grows only with the longest
//! single event and with the failing names), and the result is the same for
//! every window size (the corpus and the proptests hold it to that, from a
//! one-byte window up).
//!
//! Rules (`../shared/corpus/README.md`, "JUnit XML"):
//!
//! 1. Outermost suites are `<testsuite>` elements with no `<testsuite>`
//!    ancestor. A report with none, an empty file, non-XML, or XML that ends
//!    before its root closes is an error naming the file and line.
//! 2. count = Σ over outermost suites of `tests − skipped` (missing `skipped`
//!    = 0; `disabled` is not subtracted). Nested suites are not counted again.
//!    An outermost suite without `tests` counts its `<testcase>` descendants
//!    that have no `<skipped>` child, and the count is marked derived.
//! 3. Every `<testcase>` with a direct `<failure>` or `<error>` child is named
//!    once, `classname.name` (bare `name` when classname is missing or
//!    empty), in report order, duplicates kept. `<flakyFailure>`,
//!    `<flakyError>`, `<rerunFailure>`, `<rerunError>` alone do not fail it.
//! 4. A suite with its own direct `<error>` child is named once, by its
//!    `name`, at the position of that suite.
//! 5. A UTF-8 BOM and an XML declaration are accepted.

use super::xml::{self, AttrSpan};
use super::{LineRing, OUTPUT_LINE_BYTES, OUTPUT_TESTS, Parsed, ReportError, TestStatus, files};
use quick_xml::encoding::EncodingError;
use quick_xml::events::Event;
use quick_xml::reader::Reader;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The window a report file is read through (bytes): one read's worth.
const READ_BUF: usize = 256 * 1024;

/// Select the files `pattern` matches under `root` and parse each one; the
/// files sum independently (an original run and its re-run both count).
/// `Parsed::files` holds the relative paths, sorted.
pub fn parse_glob(root: &Path, pattern: &str) -> Result<Parsed, ReportError> {
    let selected = files::select(root, pattern)?;
    let mut total = Parsed::default();
    for s in &selected {
        let p = parse_file(&s.path, &s.rel)?;
        // A sum that does not fit is no count at all: a saturated or
        // wrapped total would be a number nobody measured.
        total.count = total
            .count
            .checked_add(p.count)
            .ok_or_else(|| ReportError::Malformed {
                file: s.rel.clone(),
                line: 1,
                why: "its test count and the other matched files' overflow a 64-bit counter".into(),
            })?;
        total.count_derived |= p.count_derived;
        total.declared_failures = total.declared_failures.saturating_add(p.declared_failures);
        total.names.extend(p.names);
        total.test_ids.extend(p.test_ids);
        total.tests.extend(&p.tests);
        total.notes.extend(p.notes);
        for o in p.output {
            if total.output.len() < OUTPUT_TESTS {
                total.output.push(o);
            } else {
                total.output_omitted += 1;
            }
        }
        total.output_omitted += p.output_omitted;
    }
    total.files = selected.into_iter().map(|s| s.rel).collect();
    Ok(total)
}

/// Parse one report file; `display` is how errors name it (the relative
/// path). Broken XML is reported with its 1-based line.
pub fn parse_file(path: &Path, display: &str) -> Result<Parsed, ReportError> {
    let unreadable = |source| ReportError::Unreadable {
        file: display.to_string(),
        source,
    };
    let f = File::open(path).map_err(unreadable)?;
    match parse_stream(f, READ_BUF, Reading::Fast) {
        Ok(p) => Ok(p),
        Err(fail) => Err(fail.into_error(display, |offset| line_in_file(path, offset))),
    }
}

/// Parse a report held in memory (tests, fuzzing). Same rules and errors as
/// [`parse_file`].
pub fn parse_bytes(bytes: &[u8], display: &str) -> Result<Parsed, ReportError> {
    // One window holds it all (the read that finds its end included).
    parse_bytes_through(bytes, display, bytes.len() + 1)
}

/// [`parse_bytes`] read through a window of `window` bytes, as a file is
/// read through one of 256 KiB: the same result for every window size is
/// what the corpus tests hold the streaming parse to. Not an interface.
#[doc(hidden)]
pub fn parse_bytes_through(
    bytes: &[u8],
    display: &str,
    window: usize,
) -> Result<Parsed, ReportError> {
    parse_slice(bytes, display, window, Reading::Fast)
}

/// [`parse_bytes_through`] with every event read by quick-xml, none by the
/// fast path (`fast_event`): the tests hold the two to the same result.
/// Not an interface.
#[doc(hidden)]
pub fn parse_bytes_quick_xml_only(
    bytes: &[u8],
    display: &str,
    window: usize,
) -> Result<Parsed, ReportError> {
    parse_slice(bytes, display, window, Reading::QuickXmlOnly)
}

fn parse_slice(
    bytes: &[u8],
    display: &str,
    window: usize,
    reading: Reading,
) -> Result<Parsed, ReportError> {
    match parse_stream(bytes, window, reading) {
        Ok(p) => Ok(p),
        Err(fail) => Err(fail.into_error(display, |offset| {
            let end = (offset as usize).min(bytes.len());
            Some(crate::fsutil::line_of(bytes, end) as u64)
        })),
    }
}

/// 1-based line of byte `offset` in the file, read again in chunks.
fn line_in_file(path: &Path, offset: u64) -> Option<u64> {
    let mut f = File::open(path).ok()?.take(offset);
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = 1;
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return Some(lines);
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

/// Why parsing stopped, before it is turned into a [`ReportError`].
#[derive(Debug)]
enum Fail {
    Io(std::io::Error),
    Empty,
    NoTestsuite,
    At { offset: u64, why: String },
}

impl Fail {
    fn into_error(self, file: &str, line_at: impl FnOnce(u64) -> Option<u64>) -> ReportError {
        let file = file.to_string();
        match self {
            Fail::Io(source) => ReportError::Unreadable { file, source },
            Fail::Empty => ReportError::Empty { file },
            Fail::NoTestsuite => ReportError::NoTestsuite { file },
            Fail::At { offset, why } => ReportError::Malformed {
                file,
                line: line_at(offset).unwrap_or(0),
                why,
            },
        }
    }
}

/// One open `<testsuite>`.
struct Suite {
    /// Element depth of the suite (root = 1).
    depth: usize,
    /// Index in `names` where this suite began (rule 4 inserts there).
    at: usize,
    /// Index in `Parsed::tests` where this suite began (its error goes there).
    tests_at: usize,
    /// The `name` attribute, for rule 4.
    name: String,
    /// Rule 4 already named it.
    error_named: bool,
}

/// The open `<testcase>` (testcases do not nest).
struct Case {
    depth: usize,
    failing: bool,
    skipped: bool,
    /// [`super::test_id`] of its `classname` and `name`.
    id: u64,
    /// Its entry in `Parsed::tests`, whose status its close sets.
    entry: usize,
}

/// The streaming state machine.
struct State {
    parsed: Parsed,
    /// Where the attributes of the element just opened lie (reused).
    attrs: Vec<AttrSpan>,
    /// Open element names, packed: `stack_names[stack[i]..]`.
    stack: Vec<usize>,
    stack_names: String,
    suites: Vec<Suite>,
    case: Option<Case>,
    /// The raw attributes of the open testcase (reused buffer).
    case_attrs: String,
    /// Where the open testcase began, for errors in its attributes.
    case_offset: u64,
    /// The outermost suite currently open has no `tests`: its derived count.
    derived: Option<u64>,
    saw_suite: bool,
    root_closed: bool,
    saw_doctype: bool,
    /// Anything but whitespace and the byte-order mark was read.
    saw_content: bool,
    /// Any event was read (the XML declaration must be the first).
    saw_event: bool,
    /// The failure text being kept: the depth of the `<failure>`/`<error>`
    /// whose text is read. Text anywhere else is never decoded or copied.
    cap_depth: Option<usize>,
    /// The kept text of the open failing testcase (or suite-level error).
    cap_ring: LineRing,
    /// The first failure's `message` attribute.
    cap_message: Option<String>,
    /// `Some(index of the suite's name in names)` while a suite-level
    /// `<error>` is read.
    cap_suite: Option<String>,
}

/// An attribute's value cut to [`OUTPUT_LINE_BYTES`] (a `message` kept for
/// the operator).
fn cut_message(m: &str) -> String {
    if m.len() <= OUTPUT_LINE_BYTES {
        return m.to_string();
    }
    let mut cut = OUTPUT_LINE_BYTES;
    while !m.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &m[..cut])
}

/// The `message` attribute of a failure element, unescaped. `spans` are
/// its attributes as [`xml::scan_attrs`] found them.
fn message_attr(raw: &str, spans: &[AttrSpan], offset: u64) -> Result<Option<String>, Fail> {
    match xml::find(raw, spans, "message") {
        Some(a) => {
            let v = value(raw, a, offset)?;
            Ok((!v.is_empty()).then(|| cut_message(&v)))
        }
        None => Ok(None),
    }
}

/// An attribute value, unescaped and normalized (XML 1.0 §3.3.3).
fn value<'a>(raw: &'a str, a: &AttrSpan, offset: u64) -> Result<std::borrow::Cow<'a, str>, Fail> {
    xml::attr_value(raw, a).map_err(|x| attr_err(offset, x))
}

/// Check an element's raw attribute text (the XML rules in
/// [`xml::scan_attrs`]) and note where they lie in `spans`.
fn check_attr_spans(raw: &str, spans: &mut Vec<AttrSpan>, offset: u64) -> Result<(), Fail> {
    xml::scan_attrs(raw.as_bytes(), spans).map_err(|why| attr_err(offset, why))
}

fn attr_err(offset: u64, e: impl std::fmt::Display) -> Fail {
    Fail::At {
        offset,
        why: format!("bad attribute: {e}"),
    }
}

/// Parse a non-negative integer attribute (`tests`, `skipped`).
fn count_attr(value: &str, what: &str, offset: u64) -> Result<u64, Fail> {
    value.trim().parse::<u64>().map_err(|_| Fail::At {
        offset,
        why: format!("{what}=\"{value}\" is not a whole number of tests"),
    })
}

impl State {
    fn new() -> State {
        State {
            parsed: Parsed::default(),
            attrs: Vec::new(),
            stack: Vec::new(),
            stack_names: String::new(),
            suites: Vec::new(),
            case: None,
            case_attrs: String::new(),
            case_offset: 0,
            derived: None,
            saw_suite: false,
            root_closed: false,
            saw_doctype: false,
            saw_content: false,
            saw_event: false,
            cap_depth: None,
            cap_ring: LineRing::default(),
            cap_message: None,
            cap_suite: None,
        }
    }

    fn depth(&self) -> usize {
        self.stack.len()
    }

    /// An element opened (`Start`, or the first half of `Empty`: `empty`,
    /// it closes right after and has no children). `raw` is its attribute
    /// text; `checked`: [`xml::start_tag`] has checked it already and
    /// `self.attrs` holds its spans, else it is checked here, after the
    /// element's own place and name.
    fn open(
        &mut self,
        name: &str,
        raw: &str,
        checked: bool,
        offset: u64,
        empty: bool,
    ) -> Result<(), Fail> {
        if self.root_closed {
            return Err(Fail::At {
                offset,
                why: "a second root element after the first one closed".into(),
            });
        }
        // The names a report is made of are names; others are checked.
        let known = matches!(
            name,
            "testcase" | "testsuite" | "failure" | "error" | "skipped" | "property"
        );
        if !known && !xml::is_name(name.as_bytes()) {
            return Err(Fail::At {
                offset,
                why: format!(
                    "`<{}` is not an XML element name",
                    xml::show(name.as_bytes())
                ),
            });
        }
        self.stack.push(self.stack_names.len());
        self.stack_names.push_str(name);
        let depth = self.depth();
        if !checked {
            check_attr_spans(raw, &mut self.attrs, offset)?;
        }
        match name {
            "testsuite" => self.open_suite(raw, depth, offset)?,
            // JUnit XML lists testcases in a testsuite. One inside another
            // (directly or in its output) would hide its own failure behind
            // the outer case's name, or lose it: refused, never counted.
            "testcase" if self.case.is_some() => {
                return Err(Fail::At {
                    offset,
                    why: "a <testcase> inside another <testcase>: testcases belong in a <testsuite>, \
                          and a nested one's result cannot be told apart from its outer test's"
                        .into(),
                });
            }
            "testcase" => {
                // The name is built only if the testcase turns out failing
                // (an empty one cannot: it has no children).
                self.case_attrs.clear();
                if !empty {
                    self.case_attrs.push_str(raw);
                }
                self.case_offset = offset;
                // Its identity, from the spans checked above (no decoding).
                let (mut classname, mut tname) = (None, None);
                for a in &self.attrs {
                    match &raw[a.key.clone()] {
                        "classname" => classname = Some(a),
                        "name" => tname = Some(a),
                        _ => {}
                    }
                }
                let raw_of = |a: Option<&AttrSpan>| a.map_or("", |a| &raw[a.value.clone()]);
                let id = super::test_id(raw_of(classname).as_bytes(), raw_of(tname).as_bytes());
                // Its entry, passed until a child says otherwise. A value
                // that does not unescape is kept as written: only a failing
                // testcase's name decides anything (`case_name`).
                let decoded = |a: Option<&AttrSpan>| match a {
                    Some(a) => xml::attr_value(raw, a)
                        .unwrap_or(std::borrow::Cow::Borrowed(&raw[a.value.clone()])),
                    None => std::borrow::Cow::Borrowed(""),
                };
                let entry = self.parsed.tests.len();
                self.parsed
                    .tests
                    .push(&decoded(classname), &decoded(tname), TestStatus::Passed);
                self.case = Some(Case {
                    depth,
                    failing: false,
                    skipped: false,
                    id,
                    entry,
                });
            }
            _ => {
                let in_case = self.case.as_ref().map(|c| c.depth + 1 == depth);
                match name {
                    "failure" | "error" if in_case == Some(true) => {
                        let keep = self.parsed.output.len() < OUTPUT_TESTS;
                        if let Some(c) = self.case.as_mut() {
                            if !c.failing && keep {
                                self.cap_message = message_attr(raw, &self.attrs, offset)?;
                            }
                            c.failing = true;
                        }
                        if keep {
                            self.cap_depth = Some(depth);
                        }
                    }
                    "skipped" if in_case == Some(true) => {
                        if let Some(c) = self.case.as_mut() {
                            c.skipped = true;
                        }
                    }
                    _ => {}
                }
                if name == "error"
                    && self.case.is_none()
                    && let Some(s) = self.suites.last_mut()
                    && s.depth + 1 == depth
                    && !s.error_named
                {
                    s.error_named = true;
                    let n = if s.name.is_empty() {
                        "(unnamed testsuite)".to_string()
                    } else {
                        s.name.clone()
                    };
                    if self.parsed.output.len() < OUTPUT_TESTS {
                        self.cap_depth = Some(depth);
                        self.cap_suite = Some(n.clone());
                        self.cap_message = message_attr(raw, &self.attrs, offset)?;
                    } else {
                        self.parsed.output_omitted += 1;
                    }
                    self.parsed
                        .tests
                        .insert(s.tests_at, "", &n, TestStatus::Failed);
                    self.parsed.names.insert(s.at, n);
                }
            }
        }
        Ok(())
    }

    /// A `<testsuite>` opened; its attributes `raw` are checked and their
    /// spans in `self.attrs`.
    fn open_suite(&mut self, raw: &str, depth: usize, offset: u64) -> Result<(), Fail> {
        let outermost = self.suites.is_empty();
        let mut name = String::new();
        let mut tests = None;
        let mut skipped = None;
        for a in &self.attrs {
            match &raw[a.key.clone()] {
                "name" => name = value(raw, a, offset)?.into_owned(),
                "tests" if outermost => {
                    tests = Some(count_attr(&value(raw, a, offset)?, "tests", offset)?)
                }
                "skipped" if outermost => {
                    skipped = Some(count_attr(&value(raw, a, offset)?, "skipped", offset)?)
                }
                "failures" | "errors" if outermost => {
                    // Only a claim to weigh against the named testcases;
                    // a value that is not a count is not a claim.
                    if let Ok(n) = value(raw, a, offset)?.trim().parse::<u64>() {
                        self.parsed.declared_failures =
                            self.parsed.declared_failures.saturating_add(n);
                    }
                }
                _ => {}
            }
        }
        if outermost {
            self.saw_suite = true;
            match tests {
                Some(t) => {
                    let s = skipped.unwrap_or(0);
                    if s > t {
                        return Err(Fail::At {
                            offset,
                            why: format!("suite `{name}` says skipped=\"{s}\" but tests=\"{t}\""),
                        });
                    }
                    self.parsed.count =
                        self.parsed
                            .count
                            .checked_add(t - s)
                            .ok_or_else(|| Fail::At {
                                offset,
                                why: "the suites' test counts overflow a 64-bit counter".into(),
                            })?;
                }
                None => {
                    self.derived = Some(0);
                    self.parsed.count_derived = true;
                }
            }
        }
        self.suites.push(Suite {
            depth,
            at: self.parsed.names.len(),
            tests_at: self.parsed.tests.len(),
            name,
            error_named: false,
        });
        Ok(())
    }

    /// The name of the open testcase: `classname.name`, or `name` alone when
    /// classname is missing or empty.
    fn case_name(&self) -> Result<String, Fail> {
        let offset = self.case_offset;
        let raw = &self.case_attrs;
        // Checked when the testcase opened; scanned again for the spans
        // (only failing testcases get here).
        let mut spans = Vec::new();
        check_attr_spans(raw, &mut spans, offset)?;
        let mut classname = None;
        let mut tname = None;
        for a in &spans {
            match &raw[a.key.clone()] {
                "classname" => classname = Some(value(raw, a, offset)?),
                "name" => tname = Some(value(raw, a, offset)?),
                _ => {}
            }
        }
        Ok(match (classname.as_deref(), tname.as_deref()) {
            (Some(c), Some(n)) if !c.is_empty() => format!("{c}.{n}"),
            (_, Some(n)) => n.to_string(),
            (Some(c), None) if !c.is_empty() => c.to_string(),
            _ => "(unnamed testcase)".to_string(),
        })
    }

    /// The innermost open element closed.
    fn close(&mut self) -> Result<(), Fail> {
        let depth = self.depth();
        if self.cap_depth == Some(depth) {
            self.cap_depth = None;
            // The failure's text ends its line; a second failure starts anew.
            self.cap_ring.break_line();
            if let Some(suite) = self.cap_suite.take() {
                let ring = std::mem::take(&mut self.cap_ring);
                let o = ring.finish(suite, self.cap_message.take());
                // Suite-level errors are named at their suite's position;
                // their output comes in the order they closed.
                self.parsed.output.push(o);
            }
        }
        if let Some(c) = &self.case
            && c.depth == depth
        {
            if c.failing {
                let n = self.case_name()?;
                let ring = std::mem::take(&mut self.cap_ring);
                let message = self.cap_message.take();
                if self.parsed.output.len() < OUTPUT_TESTS {
                    self.parsed.output.push(ring.finish(n.clone(), message));
                } else {
                    self.parsed.output_omitted += 1;
                }
                self.parsed.names.push(n);
            }
            let status = match (c.failing, c.skipped) {
                (true, _) => TestStatus::Failed,
                (false, true) => TestStatus::Skipped,
                (false, false) => TestStatus::Passed,
            };
            self.parsed.tests.set_status(c.entry, status);
            if !c.skipped {
                self.parsed.test_ids.push(c.id);
                if let Some(d) = self.derived.as_mut() {
                    *d += 1;
                }
            }
            self.case = None;
        }
        if self.suites.last().map(|s| s.depth) == Some(depth) {
            self.suites.pop();
            if self.suites.is_empty()
                && let Some(d) = self.derived.take()
            {
                self.parsed.count = self.parsed.count.checked_add(d).ok_or_else(|| Fail::At {
                    offset: self.case_offset,
                    why: "the suites' test counts overflow a 64-bit counter".into(),
                })?;
            }
        }
        if let Some(start) = self.stack.pop() {
            self.stack_names.truncate(start);
        }
        if self.stack.is_empty() {
            self.root_closed = true;
        }
        Ok(())
    }

    fn innermost(&self) -> &str {
        self.stack
            .last()
            .map(|s| &self.stack_names[*s..])
            .unwrap_or("")
    }
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Who reads the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// The commonest events by [`fast_event`], the others by quick-xml.
    Fast,
    /// Every event by quick-xml (what the tests compare the fast path with).
    QuickXmlOnly,
}

/// The streaming parse: quick-xml reads each [`xml::Window`] as a slice;
/// an event the window's end cuts is read again from its start after a
/// refill. `cap` is the window's size in bytes (it grows only for an event
/// longer than that).
fn parse_stream<R: Read>(input: R, cap: usize, reading: Reading) -> Result<Parsed, Fail> {
    let refill_failed = |e| match e {
        xml::Refill::Io(e) => Fail::Io(e),
        xml::Refill::Forbidden { offset, why } => Fail::At { offset, why },
    };
    let mut win = xml::Window::new(input, cap);
    win.refill(0).map_err(refill_failed)?;
    let mut st = State::new();
    loop {
        match parse_window(&win, &mut st, reading)? {
            None => break,
            Some(keep) => win.refill(keep).map_err(refill_failed)?,
        }
    }
    st.finish(win.base() + win.bytes().len() as u64)
}

/// An error quick-xml may give only because the event runs past the window
/// (it would read on to the event's end, however far).
fn cut_short(e: &quick_xml::Error) -> bool {
    use quick_xml::errors::{IllFormedError, SyntaxError};
    matches!(
        e,
        quick_xml::Error::Syntax(
            SyntaxError::UnclosedTag
                | SyntaxError::UnclosedSingleQuotedAttributeValue
                | SyntaxError::UnclosedDoubleQuotedAttributeValue
                | SyntaxError::UnclosedComment
                | SyntaxError::UnclosedCData
                | SyntaxError::UnclosedDoctype
                | SyntaxError::UnclosedPI
                | SyntaxError::UnclosedXmlDecl
        ) | quick_xml::Error::IllFormed(IllFormedError::UnclosedReference)
    )
}

/// Other errors look a few bytes past an event's start at most (`<!` and
/// the keyword after it): a window this long decides them.
const LOOKAHEAD: usize = 64;

/// Could more of the file change error `e` of the event at window offset
/// `keep`? Then it is no verdict yet: refill from `keep` and read again.
fn undecided<R: Read>(win: &xml::Window<R>, keep: usize, e: &quick_xml::Error) -> bool {
    !win.at_eof() && (cut_short(e) || !win.holds(keep, LOOKAHEAD))
}

/// quick-xml's error for the event at file offset `before`, at `position`
/// (where quick-xml places it). quick-xml keeps no position for bytes that
/// are not UTF-8: they lie `valid_up_to` into the event.
fn quick_xml_fail(e: quick_xml::Error, before: u64, position: u64) -> Fail {
    let offset = match &e {
        quick_xml::Error::Encoding(EncodingError::Utf8(u)) => before + u.valid_up_to() as u64,
        _ => position,
    };
    Fail::At {
        offset,
        why: e.to_string(),
    }
}

/// Parse the events the window holds whole. `Ok(None)`: the document
/// ended. `Ok(Some(keep))`: the window's end cut an event that begins at
/// `keep` (a window offset); refill from there and call again.
///
/// The commonest events are read without quick-xml ([`fast_event`]);
/// quick-xml's reader is moved to wherever it is asked next. It is asked
/// only at an event's start, never in the middle of one of its own text
/// runs (after a text event it may be about to read a reference or markup
/// it has already begun).
fn parse_window<R: Read>(
    win: &xml::Window<R>,
    st: &mut State,
    reading: Reading,
) -> Result<Option<usize>, Fail> {
    let bytes = win.bytes();
    let whole = win.at_eof();
    let base = win.base();
    // quick-xml drops a byte-order mark at the start of what it reads.
    // Only the file's own first bytes may be one; elsewhere U+FEFF is text
    // ([`bom_text`]).
    let mut pos = if base == 0 && bytes.starts_with(BOM) {
        BOM.len()
    } else {
        0
    };
    let mut reader = Reader::from_reader(&bytes[pos..]);
    {
        // End tags are matched in `State` (a window's reader has not seen
        // the elements the earlier windows opened).
        let c = reader.config_mut();
        c.check_end_names = false;
        c.allow_unmatched_ends = true;
        c.expand_empty_elements = false;
    }
    // What the fast path may read: as far as the window is UTF-8, checked
    // once here instead of once per event.
    let text = xml::utf8_prefix(bytes);
    let mut mid_text = false;
    loop {
        let before = base + pos as u64;
        if !mid_text {
            if reading == Reading::Fast
                && let Some(t) = text.get(pos..)
                && let Some(len) = fast_event(st, t, before, whole)?
            {
                pos += len;
                continue;
            }
            if bytes[pos..].starts_with(BOM) {
                match bom_text(win, pos, st)? {
                    Some(end) => pos = end,
                    None => return Ok(Some(pos)),
                }
                continue;
            }
            *reader.get_mut() = &bytes[pos..];
        }
        // The reader's offsets count from where it was made; only their
        // differences are used.
        let rel = reader.buffer_position();
        let ev = match reader.read_event() {
            Ok(Event::Eof) if whole => return Ok(None),
            Ok(Event::Eof) => return Ok(Some(pos)),
            // An event that reaches the window's end may go on past it.
            Ok(_) if !whole && pos + (reader.buffer_position() - rel) as usize >= bytes.len() => {
                return Ok(Some(pos));
            }
            Ok(ev) => ev,
            Err(e) if undecided(win, pos, &e) => return Ok(Some(pos)),
            Err(e) => {
                let at = before + reader.error_position().saturating_sub(rel);
                return Err(quick_xml_fail(e, before, at));
            }
        };
        mid_text = matches!(ev, Event::Text(_));
        pos += (reader.buffer_position() - rel) as usize;
        st.event(ev, before)?;
    }
}

/// The text run that begins with a U+FEFF at window offset `pos`, read as
/// quick-xml reads a text run (up to the next `<` or `&`), since a reader
/// would drop the U+FEFF as a byte-order mark. `Ok(Some(end))`: read, up to
/// `end`; `Ok(None)`: the window's end may cut it, refill from `pos`.
fn bom_text<R: Read>(
    win: &xml::Window<R>,
    pos: usize,
    st: &mut State,
) -> Result<Option<usize>, Fail> {
    let before = win.base() + pos as u64;
    let run = &win.bytes()[pos..];
    let end = match memchr::memchr2(b'<', b'&', run) {
        Some(i) => i,
        None if win.at_eof() => run.len(),
        None => return Ok(None),
    };
    let t = match std::str::from_utf8(&run[..end]) {
        Ok(t) => t,
        Err(u) => {
            let e = quick_xml::Error::Encoding(EncodingError::Utf8(u));
            if undecided(win, pos, &e) {
                return Ok(None);
            }
            return Err(quick_xml_fail(e, before, before));
        }
    };
    st.event(
        Event::Text(quick_xml::events::BytesText::from_escaped(t)),
        before,
    )?;
    Ok(Some(pos + end))
}

/// The event at the front of `b` (at file offset `before`) read without
/// quick-xml when its shape is plain: a start or empty tag
/// [`xml::start_tag`] reads, the end tag of the innermost open element
/// spelled exactly, or whitespace up to the next `<` (outside a failure's
/// kept text). These are most of a report's events; `State` sees them as
/// it sees quick-xml's. `Ok(Some(len))`: read, `len` bytes; `Ok(None)`:
/// quick-xml reads it. Unless `t` runs to the end of the file (`whole`),
/// an event that reaches its end is left to quick-xml, which waits for the
/// next window (where a forbidden character there is refused first).
fn fast_event(st: &mut State, t: &str, before: u64, whole: bool) -> Result<Option<usize>, Fail> {
    let b = t.as_bytes();
    let inside = |len: usize| len < b.len() || whole;
    match b.first() {
        Some(b'<') if b.get(1) == Some(&b'/') => {
            let name = st.innermost().as_bytes();
            let len = name.len() + 3;
            if st.depth() == 0
                || !b[2..].starts_with(name)
                || b.get(len - 1) != Some(&b'>')
                || !inside(len)
            {
                return Ok(None);
            }
            st.saw_event = true;
            st.close()?;
            Ok(Some(len))
        }
        Some(b'<') => {
            let Some(t) = xml::start_tag(t, &mut st.attrs).filter(|t| inside(t.len)) else {
                return Ok(None);
            };
            st.saw_event = true;
            st.saw_content = true;
            st.open(t.name, t.attrs, true, before, t.empty)?;
            if t.empty {
                st.close()?;
            }
            Ok(Some(t.len))
        }
        Some(&c) if xml::is_ws(c) && st.cap_depth.is_none() => {
            let len = xml::blank_run(b);
            if b.get(len) != Some(&b'<') {
                return Ok(None);
            }
            st.saw_event = true;
            Ok(Some(len))
        }
        _ => Ok(None),
    }
}

impl State {
    /// One whole event, which begins at file offset `before`.
    fn event(&mut self, ev: Event<'_>, before: u64) -> Result<(), Fail> {
        let first = !self.saw_event;
        self.saw_event = true;
        let at = |why: String| Fail::At {
            offset: before,
            why,
        };
        match ev {
            Event::Start(e) => {
                self.saw_content = true;
                self.open(e.name().as_ref(), e.attributes_raw(), false, before, false)?;
            }
            Event::Empty(e) => {
                self.saw_content = true;
                self.open(e.name().as_ref(), e.attributes_raw(), false, before, true)?;
                self.close()?;
            }
            Event::End(e) => {
                let name = e.name();
                let name: &str = name.as_ref();
                if self.depth() == 0 {
                    return Err(at(format!(
                        "`</{}>` closes no open element",
                        xml::show(name.as_bytes())
                    )));
                }
                if name != self.innermost() {
                    return Err(at(format!(
                        "`</{}>` where `</{}>` was expected",
                        xml::show(name.as_bytes()),
                        xml::show(self.innermost().as_bytes())
                    )));
                }
                self.close()?;
            }
            Event::Text(t) => self.text(&t, before)?,
            Event::CData(c) => {
                if let Some(d) = self.cap_depth
                    && self.depth() >= d
                {
                    self.cap_ring.push_text(&c);
                }
                self.saw_content = true;
                if self.depth() == 0 {
                    return Err(at("CDATA outside the root element".into()));
                }
            }
            Event::GeneralRef(r) => {
                self.saw_content = true;
                if self.depth() == 0 {
                    return Err(at("a reference outside the root element".into()));
                }
                xml::check_reference(r.as_bytes(), self.saw_doctype).map_err(at)?;
                if let Some(d) = self.cap_depth
                    && self.depth() >= d
                {
                    match r.resolve_char_ref() {
                        Ok(Some(c)) => self.cap_ring.push_text(c.encode_utf8(&mut [0; 4])),
                        _ => {
                            if let Some(t) = quick_xml::escape::resolve_predefined_entity(&r) {
                                self.cap_ring.push_text(t);
                            }
                        }
                    }
                }
            }
            Event::DocType(_) => {
                self.saw_content = true;
                if self.saw_doctype || self.depth() > 0 || self.root_closed {
                    return Err(at(
                        "a DOCTYPE may appear once, before the root element".into()
                    ));
                }
                self.saw_doctype = true;
            }
            Event::Decl(d) => {
                self.saw_content = true;
                // Only at the very start (after a byte-order mark at most).
                xml::check_decl(&d, first && before <= BOM.len() as u64)
                    .map_err(|why| at(why.into()))?;
            }
            Event::PI(p) => {
                self.saw_content = true;
                xml::check_pi(&p).map_err(at)?;
            }
            Event::Comment(c) => {
                self.saw_content = true;
                xml::check_comment(&c).map_err(|why| at(why.into()))?;
            }
            Event::Eof => {}
        }
        Ok(())
    }

    /// A run of text (one that begins with a U+FEFF past the file's start
    /// included).
    fn text(&mut self, t: &str, before: u64) -> Result<(), Fail> {
        if let Some(d) = self.cap_depth
            && self.depth() >= d
        {
            self.cap_ring.push_text(t);
        }
        let blank = xml::text_is_blank(t).map_err(|why| Fail::At {
            offset: before,
            why: why.into(),
        })?;
        if !blank {
            self.saw_content = true;
            if self.depth() == 0 {
                return Err(Fail::At {
                    offset: before,
                    why: "text outside the root element (this is not XML)".into(),
                });
            }
        }
        Ok(())
    }

    /// The document ended: what it amounts to.
    /// `end` is the file's length: errors about what is missing point there.
    fn finish(self, end: u64) -> Result<Parsed, Fail> {
        if !self.saw_content {
            return Err(Fail::Empty);
        }
        if self.depth() > 0 {
            return Err(Fail::At {
                offset: end,
                why: format!(
                    "the file ends inside <{}> before its elements close (truncated?)",
                    self.innermost()
                ),
            });
        }
        if !self.root_closed {
            return Err(Fail::At {
                offset: end,
                why: "no root element".into(),
            });
        }
        if !self.saw_suite {
            return Err(Fail::NoTestsuite);
        }
        Ok(self.parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(xml: &str) -> Parsed {
        parse_bytes(xml.as_bytes(), "t.xml").unwrap_or_else(|e| panic!("{e}"))
    }
    #[test]
    fn count_attributes_that_overflow_are_malformed() {
        // One attribute past u64.
        let e = err(br#"<testsuite name="s" tests="99999999999999999999"></testsuite>"#);
        assert!(matches!(e, ReportError::Malformed { line: 1, .. }), "{e}");
        // Two outermost suites whose sum overflows, in one file.
        let e = err(format!(
            "<testsuites><testsuite tests=\"{m}\"/>\n<testsuite tests=\"1\"/></testsuites>",
            m = u64::MAX
        )
        .as_bytes());
        assert!(matches!(e, ReportError::Malformed { line: 2, .. }), "{e}");
        // Two files whose sum overflows: never a saturated total.
        let d = tempfile::tempdir().unwrap();
        let big = format!("<testsuite tests=\"{}\"/>", u64::MAX / 2 + 1);
        std::fs::write(d.path().join("a.xml"), &big).unwrap();
        std::fs::write(d.path().join("b.xml"), &big).unwrap();
        match parse_glob(d.path(), "*.xml") {
            Err(e @ ReportError::Malformed { .. }) => {
                assert_eq!(crate::error::Refusal::name(&e), "report-malformed");
                assert!(e.to_string().contains("b.xml"), "{e}");
            }
            other => panic!("a sum past u64 must be report-malformed: {other:?}"),
        }
    }

    fn err(xml: &[u8]) -> ReportError {
        parse_bytes(xml, "t.xml").unwrap_err()
    }

    #[test]
    fn attributes_are_checked_and_read() {
        let p = ok(
            "<testsuite tests='2'><testcase classname='c' name='n'/><testcase name='m' time='1'></testcase></testsuite>",
        );
        assert_eq!(p.count, 2);
        assert!(matches!(
            err(b"<testsuite tests='1'><testcase name=x/></testsuite>"),
            ReportError::Malformed { .. }
        ));
    }

    #[test]
    fn failure_message_and_text_are_kept_bounded_for_failing_cases_only() {
        let mut trace = String::new();
        for i in 0..30 {
            trace.push_str(&format!("\tat a.B.c(B.java:{i})\n"));
        }
        let xml = format!(
            "<testsuite name='s' tests='3'>\
             <testcase classname='c' name='ok'><system-out>passing chatter</system-out></testcase>\
             <testcase classname='c' name='bad'><failure message='expected: &lt;1&gt; but was: &lt;2&gt;' type='X'>X: boom &amp; more\n{trace}</failure></testcase>\
             <testcase classname='c' name='err'><error message='npe'/></testcase>\
             </testsuite>"
        );
        let p = ok(&xml);
        assert_eq!(p.names, ["c.bad", "c.err"]);
        assert_eq!(p.output.len(), 2);
        let bad = &p.output[0];
        assert_eq!(bad.test, "c.bad");
        assert_eq!(bad.message.as_deref(), Some("expected: <1> but was: <2>"));
        assert_eq!(bad.lines.len(), super::super::OUTPUT_LINES);
        assert_eq!(bad.dropped, 11);
        assert_eq!(bad.lines[19], "\tat a.B.c(B.java:29)");
        assert_eq!(p.output[1].message.as_deref(), Some("npe"));
        assert!(p.output[1].lines.is_empty());
        assert!(!format!("{:?}", p.output).contains("passing chatter"));
    }

    #[test]
    fn cdata_failure_text_and_suite_level_error_are_kept() {
        let p = ok(
            "<testsuites><testsuite name='boot' tests='0'><error message='could not start'>cannot load\nmodule x</error></testsuite>\
            <testsuite name='t' tests='1'><testcase name='n'><failure><![CDATA[assert 1 == 2\nE  nope]]></failure></testcase></testsuite></testsuites>",
        );
        assert_eq!(p.names, ["boot", "n"]);
        assert_eq!(p.output[0].test, "boot");
        assert_eq!(p.output[0].message.as_deref(), Some("could not start"));
        assert_eq!(p.output[0].lines, ["cannot load", "module x"]);
        assert_eq!(p.output[1].lines, ["assert 1 == 2", "E  nope"]);
    }

    #[test]
    fn bom_and_declaration_are_accepted() {
        let mut x = b"\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".to_vec();
        x.extend_from_slice(b"<testsuite name=\"s\" tests=\"2\"><testcase classname=\"c\" name=\"n\"><failure/></testcase></testsuite>");
        let p = parse_bytes(&x, "t.xml").unwrap();
        assert_eq!(p.count, 2);
        assert_eq!(p.names, ["c.n"]);
    }

    #[test]
    fn derived_count_when_tests_is_missing() {
        let p = ok(
            "<testsuites><testsuite name='s'><testcase name='a'/><testcase name='b'><skipped/></testcase>\
                    <testsuite name='inner' tests='9'><testcase name='c'/></testsuite></testsuite></testsuites>",
        );
        assert_eq!(p.count, 2);
        assert!(p.count_derived);
    }

    #[test]
    fn suite_level_error_is_named_at_the_suite_position() {
        let p = ok(
            "<testsuites><testsuite name='first' tests='1'><testcase classname='a' name='x'><failure/></testcase></testsuite>\
                    <testsuite name='broken' tests='2'><testcase classname='b' name='y'><error/></testcase><error message='boom'/><error/></testsuite></testsuites>",
        );
        assert_eq!(p.names, ["a.x", "broken", "b.y"]);
        assert_eq!(p.count, 3);
    }

    #[test]
    fn entities_in_names_are_unescaped() {
        let p = ok(
            "<testsuite tests='1'><testcase classname='a&amp;b' name='&quot;q&quot; &#x41;'><error/></testcase></testsuite>",
        );
        assert_eq!(p.names, ["a&b.\"q\" A"]);
    }

    #[test]
    fn broken_documents_name_the_line() {
        let e = err(b"<testsuite tests='1'>\n<testcase name='a'>\n<skipped>half");
        match e {
            ReportError::Malformed { line, ref why, .. } => {
                assert_eq!(line, 3, "{why}");
                assert!(why.contains("skipped"), "{why}");
            }
            other => panic!("{other}"),
        }
        assert!(matches!(
            err(b"<testsuite tests='1'>\n</testcase>"),
            ReportError::Malformed { line: 2, .. }
        ));
        assert!(matches!(
            err(b"<testsuite tests='x'/>"),
            ReportError::Malformed { .. }
        ));
        assert!(matches!(
            err(b"<testsuite tests='1' skipped='2'/>"),
            ReportError::Malformed { .. }
        ));
        assert!(matches!(err(b"<a/><b/>"), ReportError::Malformed { .. }));
        assert!(matches!(
            err(b"<testsuite tests='1'>&bogus;</testsuite>"),
            ReportError::Malformed { .. }
        ));
        assert!(matches!(err(b""), ReportError::Empty { .. }));
        assert!(matches!(err(b" \n\t"), ReportError::Empty { .. }));
        assert!(matches!(
            err(b"<?xml version='1.0'?>"),
            ReportError::Malformed { .. }
        ));
        assert!(matches!(
            err(b"<testsuites/>"),
            ReportError::NoTestsuite { .. }
        ));
        assert!(matches!(
            err(b"<testsuites>\xff</testsuites>"),
            ReportError::Malformed { .. }
        ));
    }

    #[test]
    fn bytes_that_are_not_utf8_in_text_name_their_line() {
        for x in [
            &b"<testsuite tests='1'>\n<testcase name='a'>\n<failure>x &#39; y\nbad \xff z</failure></testcase></testsuite>"[..],
            &b"<testsuite tests='1'>\n<testcase name='a'>\n<failure>x\ny\nz\nbad \xff z</failure></testcase></testsuite>"[..],
        ] {
            let want = x
                .split(|b| *b == b'\n')
                .position(|l| l.contains(&0xff))
                .unwrap() as u64
                + 1;
            match err(x) {
                ReportError::Malformed { line, ref why, .. } => assert_eq!(line, want, "{why}"),
                other => panic!("{other}"),
            }
        }
    }

    /// A passing report with slots where a malformation goes.
    const PASSING: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!--c{C}-->\n<{N}testsuite name=\"s{A}\" tests=\"2\" failures=\"0\"{D}>\n  <testcase classname=\"c\" name=\"a\" time=\"0.1\"/>\n  <testcase classname=\"c\" name=\"b\"><system-out>ok{T}</system-out></testcase>\n</testsuite{E}>\n{R}";

    fn fill(slot: &str, bad: &str) -> String {
        let mut s = PASSING.replace(&format!("{{{slot}}}"), bad);
        for x in ["C", "N", "A", "D", "T", "E", "R"] {
            s = s.replace(&format!("{{{x}}}"), "");
        }
        s
    }

    /// Every malformation, by slot (issue 12.2).
    const MALFORMED: &[(&str, &[&str])] = &[
        (
            "A",
            &[
                "<", "<<x>>", "&", "& x", "&bogus;", "&#0;", "&#1;", "&#xFFFE;", "&#xD800;",
                "&#x;", "\"", "\u{1}", "\u{FFFF}",
            ],
        ),
        (
            "T",
            &[
                "<",
                "&",
                "&;",
                "&#1;",
                "&#xFFFF;",
                "&nope;",
                "]]>",
                "\u{0}",
                "\u{C}",
                "\u{1B}[31m",
                "\u{FFFE}",
                "<1x/>",
                "<-a/>",
                "<?xml version='1.0'?>",
                "<!DOCTYPE x>",
                "<? x?>",
                "</system-out>",
                "<testcase name=\"inner\"><failure message=\"boom\"/></testcase>",
                "<testcase name=\"inner\"/>",
            ],
        ),
        ("C", &["--", "-"]),
        ("N", &["1", "-", ".", " "]),
        (
            "D",
            &[
                " name=\"again\"",
                " tests=\"2\"",
                " 1a=\"x\"",
                " a",
                " a=x",
                "b=\"c\"",
                " a=\"1\"b=\"2\"",
                " a=\"1",
                " a=\"<\"",
            ],
        ),
        ("E", &["s", "x", " x"]),
        (
            "R",
            &[
                "x",
                "<x/>",
                "<testsuite tests=\"1\"/>",
                "&amp;",
                "<!DOCTYPE x>",
                "<?xml version=\"1.0\"?>",
                "]]>",
                "\u{7}",
            ],
        ),
    ];

    #[test]
    fn the_passing_report_is_green() {
        let p = ok(&fill("", ""));
        assert_eq!(p.count, 2);
        assert!(p.names.is_empty());
    }

    /// A testcase directly inside another one, failing or not, is refused
    /// (its failure was once dropped and the report read green).
    #[test]
    fn a_testcase_inside_a_testcase_is_refused() {
        for inner in ["<failure message=\"boom\">assertion failed</failure>", ""] {
            let x = format!(
                "<testsuite name=\"s\" tests=\"2\"><testcase classname=\"c\" name=\"outer\">\n<testcase classname=\"c\" name=\"inner\">{inner}</testcase></testcase></testsuite>"
            );
            match parse_bytes(x.as_bytes(), "t.xml") {
                Err(ReportError::Malformed { line, why, .. }) => {
                    assert_eq!(line, 2, "{why}");
                    assert!(why.contains("inside another <testcase>"), "{why}");
                }
                other => panic!("not refused: {other:?}\n{x}"),
            }
        }
    }

    #[test]
    fn every_listed_malformation_is_refused() {
        for (slot, bads) in MALFORMED {
            for bad in *bads {
                let x = fill(slot, bad);
                match parse_bytes(x.as_bytes(), "t.xml") {
                    Err(ReportError::Malformed { .. }) => {}
                    other => panic!("slot {slot} {bad:?} was not refused: {other:?}\n{x}"),
                }
            }
        }
        // Not at the very start: a declaration after whitespace or twice.
        for x in [
            format!(" {}", fill("", "")),
            format!("<?xml version=\"1.0\"?>{}", fill("", "")),
            fill("", "").replace("version=\"1.0\"", "version=\"2.0\""),
            fill("", "").replace("version=\"1.0\" encoding", "encoding=\"UTF-8\" version"),
        ] {
            assert!(
                matches!(err(x.as_bytes()), ReportError::Malformed { .. }),
                "{x}"
            );
        }
    }

    /// The forbidden-character check sees a character split across buffers.
    #[test]
    fn forbidden_characters_straddling_buffers_are_found() {
        let x = fill("T", "\u{FFFE}");
        for cap in 1..12 {
            let r = parse_stream(x.as_bytes(), cap, Reading::Fast);
            assert!(matches!(r, Err(Fail::At { .. })), "capacity {cap}: {r:?}");
        }
        let good = fill("T", "\u{FFFD}\u{EFBF}é");
        for cap in 1..12 {
            let r = parse_stream(good.as_bytes(), cap, Reading::Fast);
            assert_eq!(r.map(|p| p.count).ok(), Some(2), "capacity {cap}");
        }
    }

    /// What the fast path and quick-xml both read, whole and through
    /// windows of `caps`: the same, refusals and their lines included.
    fn fast_path_agrees(d: &[u8], caps: impl IntoIterator<Item = usize>) -> Result<(), String> {
        for cap in caps.into_iter().chain([d.len() + 1]) {
            let fast = format!("{:?}", parse_bytes_through(d, "t.xml", cap));
            let quick = format!("{:?}", parse_bytes_quick_xml_only(d, "t.xml", cap));
            if fast != quick {
                return Err(format!(
                    "window {cap} over {:?}:\n fast  {fast}\n quick {quick}",
                    String::from_utf8_lossy(d)
                ));
            }
        }
        Ok(())
    }

    /// Tags at the edges of what the fast path takes: every one reads as
    /// quick-xml reads it, inside a passing report and as its root.
    const TAG_EDGES: &[&str] = &[
        "<a/>",
        "<a />",
        "<a\t/>",
        "<a>",
        "<a >",
        "<a b='1'/>",
        "<a b='1' />",
        "<a b='1'>",
        "<a b = \"1\"\n/>",
        "<a b='x>y'/>",
        "<a b=\"it's\"/>",
        "<a b='1'c='2'/>",
        "<a/ >",
        "<a//>",
        "<a / >",
        "<a b='1'/ >",
        "<é a='1'/>",
        "<a é='1'/>",
        "<a é/>",
        "<a é>",
        "<a b='\t'/>",
        "<a b='&#9;&lt;'/>",
        "<a b='&bogus;'/>",
        "<a b='&amp'/>",
        "<a b='<'/>",
        "<a b=1/>",
        "<a b='1' b='2'/>",
        "<a:b x:y='1'/>",
        "<_a.b-c1/>",
        "<a b='1",
        "<a b",
        "<a",
        "<1a/>",
        "<-a/>",
        "<a\u{FEFF}/>",
        "<a b='\u{FEFF}'/>",
        "<a/>\u{FEFF}",
        "</a>",
        "</a >",
        "</ a>",
        "</b>",
        "</>",
        " <a/>",
        "\n\t<a/>",
        " &amp;<a/>",
        " \u{FEFF}<a/>",
    ];

    #[test]
    fn the_fast_path_reads_what_quick_xml_reads() {
        let mut docs: Vec<String> = vec![fill("", "")];
        for (slot, bads) in MALFORMED {
            docs.extend(bads.iter().map(|bad| fill(slot, bad)));
        }
        // A tag that ends where a forbidden character stands: that is
        // refused first, as when quick-xml reads the tag.
        docs.extend(["<é a='1'/><a/>\u{7}", "<a/><b/>\u{0}", "<a></a>\u{1}"].map(String::from));
        for tag in TAG_EDGES {
            docs.push(fill("T", tag));
            docs.push(fill("R", tag));
            docs.push(tag.to_string());
            docs.push(format!("<testsuite tests='1'>{tag}</testsuite>"));
        }
        for d in &docs {
            if let Err(e) = fast_path_agrees(d.as_bytes(), (1..=40).chain([64, 4096])) {
                panic!("{e}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The fast path reads any soup of report pieces and tag edges as
        /// quick-xml reads it, through any window.
        #[test]
        fn the_fast_path_reads_any_soup_as_quick_xml_does(parts in proptest::collection::vec(proptest::sample::select(
            [
                &[
                    "<testsuites>", "</testsuites>", "<testsuite tests='3' skipped='1' name='s'>", "</testsuite>",
                    "</testsuite >", "<testcase classname='c' name='n'>", "<testcase name='m' time=\"0.1\"/>",
                    "</testcase>", "<failure message='a &lt; b'>", "</failure>", "<error/>", "<skipped/>",
                    "&amp;", "&am", "<![CDATA[x]]>", "<!-- c -->", "<?pi x?>", "<?xml version='1.0'?>",
                    "<!DOCTYPE r>", "text ", "é", "\u{FEFF}", " ", "\n", "\t", "<", ">", "/", "'", "\"",
                    "=", "]]>", "\u{7}",
                ][..],
                TAG_EDGES,
            ]
            .concat(),
        ), 0..40), cap in 1usize..64) {
            let s: String = parts.concat();
            if let Err(e) = fast_path_agrees(s.as_bytes(), [cap]) {
                proptest::prop_assert!(false, "{}", e);
            }
        }

        /// The same with bytes that are not UTF-8, in tags and out.
        #[test]
        fn the_fast_path_reads_any_bytes_as_quick_xml_does(parts in proptest::collection::vec(proptest::sample::select(vec![
            &b"<testsuite tests='1'>"[..], b"</testsuite>", b"<testcase name='a'>", b"<testcase name='\xff'/>",
            b"<testcase n\xC3\xA9='1'/>", b"<\xC3\xA9/>", b"<a b='\xE6\x97'/>", b"</testcase>", b"<failure>",
            b"</failure>", b"x", b" ", b"\n", b"\xC3\xA9", b"\xE6\x97", b"\xA5", b"\xFF", b"\xEF\xBF",
            b"\xBE", b"\xEF\xBB\xBF", b"\x00", b"&amp;", b"<!", b"<![CDATA[", b"]]>", b"/>", b">", b"'",
        ]), 0..40), cap in 1usize..64) {
            let b: Vec<u8> = parts.concat();
            if let Err(e) = fast_path_agrees(&b, [cap]) {
                proptest::prop_assert!(false, "{}", e);
            }
        }

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_bytes(&bytes, "fuzz.xml");
        }

        /// Issue 12.2: a passing report broken in any listed way, or by a
        /// forbidden control character anywhere, is never green — read whole
        /// or through buffers of any size.
        #[test]
        fn no_malformation_of_a_passing_report_is_green(
            which in 0usize..1000,
            ctl in proptest::sample::select(vec![0u8, 1, 7, 8, 0x0B, 0x0C, 0x0E, 0x1B, 0x1F]),
            at in 0usize..10_000,
            cap in 1usize..64,
        ) {
            let all: Vec<(&str, &str)> = MALFORMED.iter().flat_map(|(s, b)| b.iter().map(move |b| (*s, *b))).collect();
            let mut docs = vec![fill(all[which % all.len()].0, all[which % all.len()].1).into_bytes()];
            let mut raw = fill("", "").into_bytes();
            raw.insert(at % (raw.len() + 1), ctl);
            docs.push(raw);
            for d in docs {
                let whole = parse_bytes(&d, "t.xml");
                let streamed = parse_stream(&d[..], cap, Reading::Fast);
                for green in [
                    whole.ok().map(|p| crate::report::judge(p, crate::exec::Termination::Exited(0)).verdict),
                    streamed.ok().map(|p| crate::report::judge(p, crate::exec::Termination::Exited(0)).verdict),
                ] {
                    proptest::prop_assert_ne!(green, Some(crate::report::Verdict::Green), "{}", String::from_utf8_lossy(&d));
                }
            }
        }

        /// The streaming parse reads the same whatever the window: events
        /// cut by a window's end, a character split by a read, a U+FEFF
        /// that is text and not the file's byte-order mark.
        #[test]
        fn every_window_size_reads_what_the_whole_file_reads(parts in proptest::collection::vec(proptest::sample::select(vec![
            "<testsuites>", "</testsuites>", "<testsuite tests='3' skipped='1' name='s'>", "<testsuite name=\"é&amp;x\">",
            "</testsuite>", "<testcase classname='c' name='n'>", "<testcase name='m' time=\"0.1\"/>", "</testcase>",
            "<failure message='a &lt; b'>", "</failure>", "<error/>", "<skipped/>", "&amp;", "&#x1F600;", "&bogus;",
            "&am", "<![CDATA[x]]y]]>", "<![CDA", "<!-- c -->", "<!--", "<?pi x?>", "<?xml version='1.0'?>",
            "<!DOCTYPE r>", "<!", "text ", "é", "日本", "\u{1F600}", "\n", "\t", "<", ">", "'", "\"", "]]>",
            "\u{FEFF}", "</ testcase>", "<testcase name='x\ny'>", "\u{7}",
        ]), 0..40), cap in 1usize..48) {
            let s: String = parts.concat();
            let whole = format!("{:?}", parse_bytes(s.as_bytes(), "soup.xml"));
            let through = format!("{:?}", parse_bytes_through(s.as_bytes(), "soup.xml", cap));
            proptest::prop_assert_eq!(whole, through, "window {} over {:?}", cap, s);
        }

        /// The same with bytes that are not UTF-8 or not XML characters.
        #[test]
        fn every_window_size_refuses_what_the_whole_file_refuses(parts in proptest::collection::vec(proptest::sample::select(vec![
            &b"<testsuite tests='1'>"[..], b"</testsuite>", b"<testcase name='a'>", b"</testcase>", b"<failure>",
            b"</failure>", b"x", b"\xC3\xA9", b"\xE6\x97", b"\xA5", b"\xFF", b"\xF0\x9F\x98\x80", b"\xEF\xBF",
            b"\xBE", b"\xEF\xBB\xBF", b"\x00", b"\x0C", b"\n", b"&amp;", b"&#", b"<!", b"<![CDATA[", b"]]>", b"-->",
        ]), 0..40), cap in 1usize..48) {
            let b: Vec<u8> = parts.concat();
            let whole = format!("{:?}", parse_bytes(&b, "soup.xml"));
            let through = format!("{:?}", parse_bytes_through(&b, "soup.xml", cap));
            proptest::prop_assert_eq!(whole, through, "window {} over {:?}", cap, String::from_utf8_lossy(&b));
        }

        #[test]
        fn never_panics_on_xmlish_soup(parts in proptest::collection::vec(proptest::sample::select(vec![
            "<testsuites>", "</testsuites>", "<testsuite tests='3' skipped='1' name='s'>", "<testsuite>", "</testsuite>",
            "<testcase classname='c' name='n'>", "<testcase name='m'/>", "</testcase>", "<failure/>", "<error>",
            "</error>", "<skipped/>", "<flakyFailure/>", "&amp;", "&#0;", "&#x110000;", "<![CDATA[x]]>", "<!-- c -->",
            "<?xml version='1.0'?>", "text", "\n", "<", ">", "'", "\"", "\u{FEFF}", "<testsuite tests='18446744073709551615'>",
        ]), 0..40)) {
            let s: String = parts.concat();
            let _ = parse_bytes(s.as_bytes(), "soup.xml");
        }
    }
}
