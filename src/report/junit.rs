//! junit-xml: a streaming reader of JUnit XML reports (the Surefire shape and
//! its many cousins: pytest, Gradle, jest-junit, PHPUnit, nextest …).
//!
//! The file is read as a stream of quick-xml events through a fixed buffer;
//! no document tree is built, so memory stays flat however large the report
//! (it grows only with the longest single event and with the failing names).
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

use super::{Parsed, ReportError, files};
use quick_xml::XmlVersion;
use quick_xml::events::attributes::{Attribute, Attributes};
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Buffer size for reading report files.
const READ_BUF: usize = 256 * 1024;
/// Event buffers larger than this are given back after the event.
const KEEP_BUF: usize = 1024 * 1024;

/// Select the files `pattern` matches under `root` and parse each one; the
/// files sum independently (an original run and its re-run both count).
/// `Parsed::files` holds the relative paths, sorted.
pub fn parse_glob(root: &Path, pattern: &str) -> Result<Parsed, ReportError> {
    let selected = files::select(root, pattern)?;
    let mut total = Parsed::default();
    for s in &selected {
        let p = parse_file(&s.path, &s.rel)?;
        total.count = total.count.saturating_add(p.count);
        total.count_derived |= p.count_derived;
        total.declared_failures = total.declared_failures.saturating_add(p.declared_failures);
        total.names.extend(p.names);
        total.notes.extend(p.notes);
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
    match parse_stream(BufReader::with_capacity(READ_BUF, f)) {
        Ok(p) => Ok(p),
        Err(fail) => Err(fail.into_error(display, |offset| line_in_file(path, offset))),
    }
}

/// Parse a report held in memory (tests, fuzzing). Same rules and errors as
/// [`parse_file`].
pub fn parse_bytes(bytes: &[u8], display: &str) -> Result<Parsed, ReportError> {
    match parse_stream(bytes) {
        Ok(p) => Ok(p),
        Err(fail) => Err(fail.into_error(display, |offset| {
            let end = (offset as usize).min(bytes.len());
            Some(line_of(&bytes[..end]))
        })),
    }
}

/// 1-based line number at the end of `prefix`.
fn line_of(prefix: &[u8]) -> u64 {
    prefix.iter().filter(|b| **b == b'\n').count() as u64 + 1
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
}

/// Is `s` only XML whitespace?
fn is_blank(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// The streaming state machine.
struct State {
    parsed: Parsed,
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
}

/// An attribute value, unescaped and normalized (XML 1.0 §3.3.3).
fn value<'a>(a: &Attribute<'a>, offset: u64) -> Result<std::borrow::Cow<'a, str>, Fail> {
    a.normalized_value(XmlVersion::Implicit1_0)
        .map_err(|x| attr_err(offset, x))
}

/// Well-formedness of an element's attributes: syntax, duplicates, and
/// references (only values holding `&` are unescaped to check them).
fn check_attrs(e: &BytesStart<'_>, offset: u64) -> Result<(), Fail> {
    if plain_attrs(e.attributes_raw().as_bytes()) {
        return Ok(());
    }
    // Anything unusual (references, odd syntax, many attributes) takes the
    // careful path, which also finds the words for an error.
    // quick-xml's own duplicate check allocates per element; a small array
    // does the same work for the usual handful of attributes.
    let mut keys: [&str; 16] = [""; 16];
    let mut n = 0;
    let mut attrs = e.attributes();
    attrs.with_checks(false);
    for a in attrs {
        let a = a.map_err(|x| attr_err(offset, x))?;
        let k = a.key.0;
        if n < keys.len() {
            if keys[..n].contains(&k) {
                return Err(attr_err(offset, format!("duplicate attribute `{k}`")));
            }
            keys[n] = k;
            n += 1;
        } else {
            // Many attributes: let quick-xml check them all.
            for a in e.attributes() {
                a.map_err(|x| attr_err(offset, x))?;
            }
        }
        if a.value.contains('&') {
            value(&a, offset)?;
        }
    }
    Ok(())
}

/// The fast path of [`check_attrs`]: true when `raw` is a well-formed run of
/// at most 16 distinct `name="value"` / `name='value'` pairs whose values
/// hold neither `<` nor `&`. False means "look closer", not "broken".
fn plain_attrs(raw: &[u8]) -> bool {
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let mut keys: [&[u8]; 16] = [b""; 16];
    let mut nk = 0;
    let mut i = 0;
    let n = raw.len();
    loop {
        while i < n && ws(raw[i]) {
            i += 1;
        }
        if i == n {
            return true;
        }
        let start = i;
        while i < n && !ws(raw[i]) && raw[i] != b'=' {
            if matches!(raw[i], b'"' | b'\'' | b'<' | b'>' | b'&' | b'/') {
                return false;
            }
            i += 1;
        }
        let key = &raw[start..i];
        if key.is_empty() || nk == keys.len() || keys[..nk].contains(&key) {
            return false;
        }
        keys[nk] = key;
        nk += 1;
        while i < n && ws(raw[i]) {
            i += 1;
        }
        if i == n || raw[i] != b'=' {
            return false;
        }
        i += 1;
        while i < n && ws(raw[i]) {
            i += 1;
        }
        if i == n || !matches!(raw[i], b'"' | b'\'') {
            return false;
        }
        let q = raw[i];
        i += 1;
        let Some(len) = memchr::memchr(q, &raw[i..]) else {
            return false;
        };
        if memchr::memchr2(b'<', b'&', &raw[i..i + len]).is_some() {
            return false;
        }
        i += len + 1;
        if i < n && !ws(raw[i]) {
            return false;
        }
    }
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
        }
    }

    fn depth(&self) -> usize {
        self.stack.len()
    }

    /// An element opened (`Start`, or the first half of `Empty`).
    fn open(&mut self, e: &BytesStart<'_>, offset: u64) -> Result<(), Fail> {
        if self.root_closed {
            return Err(Fail::At {
                offset,
                why: "a second root element after the first one closed".into(),
            });
        }
        let name = e.name();
        let name: &str = name.as_ref();
        self.stack.push(self.stack_names.len());
        self.stack_names.push_str(name);
        let depth = self.depth();
        match name {
            "testsuite" => self.open_suite(e, depth, offset)?,
            "testcase" if self.case.is_none() => {
                check_attrs(e, offset)?;
                // The name is built only if the testcase turns out failing.
                self.case_attrs.clear();
                self.case_attrs.push_str(e.attributes_raw());
                self.case_offset = offset;
                self.case = Some(Case {
                    depth,
                    failing: false,
                    skipped: false,
                });
            }
            _ => {
                check_attrs(e, offset)?;
                let in_case = self.case.as_ref().map(|c| c.depth + 1 == depth);
                match name {
                    "failure" | "error" if in_case == Some(true) => {
                        if let Some(c) = self.case.as_mut() {
                            c.failing = true;
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
                    self.parsed.names.insert(s.at, n);
                }
            }
        }
        Ok(())
    }

    fn open_suite(&mut self, e: &BytesStart<'_>, depth: usize, offset: u64) -> Result<(), Fail> {
        let outermost = self.suites.is_empty();
        let mut name = String::new();
        let mut tests = None;
        let mut skipped = None;
        for a in e.attributes() {
            let a = a.map_err(|x| attr_err(offset, x))?;
            match a.key.as_ref() {
                "name" => name = value(&a, offset)?.into_owned(),
                "tests" if outermost => {
                    tests = Some(count_attr(&value(&a, offset)?, "tests", offset)?)
                }
                "skipped" if outermost => {
                    skipped = Some(count_attr(&value(&a, offset)?, "skipped", offset)?)
                }
                "failures" | "errors" if outermost => {
                    // Only a claim to weigh against the named testcases;
                    // a value that is not a count is not a claim.
                    if let Ok(n) = value(&a, offset)?.trim().parse::<u64>() {
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
            name,
            error_named: false,
        });
        Ok(())
    }

    /// The name of the open testcase: `classname.name`, or `name` alone when
    /// classname is missing or empty.
    fn case_name(&self) -> Result<String, Fail> {
        let offset = self.case_offset;
        let mut classname = None;
        let mut tname = None;
        for a in Attributes::new(&self.case_attrs, 0) {
            let a = a.map_err(|x| attr_err(offset, x))?;
            match a.key.as_ref() {
                "classname" => classname = Some(value(&a, offset)?),
                "name" => tname = Some(value(&a, offset)?),
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
        if let Some(c) = &self.case
            && c.depth == depth
        {
            if c.failing {
                let n = self.case_name()?;
                self.parsed.names.push(n);
            }
            if !c.skipped
                && let Some(d) = self.derived.as_mut()
            {
                *d += 1;
            }
            self.case = None;
        }
        if self.suites.last().map(|s| s.depth) == Some(depth) {
            self.suites.pop();
            if self.suites.is_empty()
                && let Some(d) = self.derived.take()
            {
                self.parsed.count = self.parsed.count.saturating_add(d);
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

/// The streaming parse over any buffered reader.
fn parse_stream<R: BufRead>(input: R) -> Result<Parsed, Fail> {
    let mut reader = Reader::from_reader(input);
    {
        let c = reader.config_mut();
        c.check_end_names = true;
        c.allow_unmatched_ends = false;
        c.expand_empty_elements = false;
    }
    let mut st = State::new();
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut saw_content = false;
    loop {
        let before = reader.buffer_position();
        let ev = match reader.read_event_into(&mut buf) {
            Ok(ev) => ev,
            Err(quick_xml::Error::Io(e)) => {
                return Err(Fail::Io(std::io::Error::new(e.kind(), e.to_string())));
            }
            Err(e) => {
                return Err(Fail::At {
                    offset: reader.error_position(),
                    why: e.to_string(),
                });
            }
        };
        match ev {
            Event::Start(e) => {
                saw_content = true;
                st.open(&e, before)?;
            }
            Event::Empty(e) => {
                saw_content = true;
                st.open(&e, before)?;
                st.close()?;
            }
            Event::End(_) => st.close()?,
            Event::Text(t) => {
                if !is_blank(&t) {
                    saw_content = true;
                    if st.depth() == 0 {
                        return Err(Fail::At {
                            offset: before,
                            why: "text outside the root element (this is not XML)".into(),
                        });
                    }
                }
            }
            Event::CData(_) => {
                saw_content = true;
                if st.depth() == 0 {
                    return Err(Fail::At {
                        offset: before,
                        why: "CDATA outside the root element".into(),
                    });
                }
            }
            Event::GeneralRef(r) => {
                saw_content = true;
                if st.depth() == 0 {
                    return Err(Fail::At {
                        offset: before,
                        why: "a reference outside the root element".into(),
                    });
                }
                let ok = if r.is_char_ref() {
                    matches!(r.resolve_char_ref(), Ok(Some(_)))
                } else {
                    st.saw_doctype
                        || quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                            .is_some()
                };
                if !ok {
                    return Err(Fail::At {
                        offset: before,
                        why: format!("unknown reference `&{};`", r.xml10_content()),
                    });
                }
            }
            Event::DocType(_) => {
                saw_content = true;
                st.saw_doctype = true;
            }
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => saw_content = true,
            Event::Eof => break,
        }
        buf.clear();
        if buf.capacity() > KEEP_BUF {
            buf.shrink_to(8 * 1024);
        }
    }
    let end = reader.buffer_position();
    if !saw_content {
        return Err(Fail::Empty);
    }
    if st.depth() > 0 {
        return Err(Fail::At {
            offset: end,
            why: format!(
                "the file ends inside <{}> before its elements close (truncated?)",
                st.innermost()
            ),
        });
    }
    if !st.root_closed {
        return Err(Fail::At {
            offset: end,
            why: "no root element".into(),
        });
    }
    if !st.saw_suite {
        return Err(Fail::NoTestsuite);
    }
    Ok(st.parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(xml: &str) -> Parsed {
        parse_bytes(xml.as_bytes(), "t.xml").unwrap_or_else(|e| panic!("{e}"))
    }
    fn err(xml: &[u8]) -> ReportError {
        parse_bytes(xml, "t.xml").unwrap_err()
    }

    #[test]
    fn fast_attribute_check_agrees_with_quick_xml() {
        for raw in [" a='1' b=\"2\"", "", "  ", " a = '1'\n b='x y'"] {
            assert!(plain_attrs(raw.as_bytes()), "{raw:?}");
        }
        for raw in [
            " a",
            " a=1",
            " a='1' a='2'",
            " a='<'",
            " a='&amp;'",
            " a='1'b='2'",
            " a='1",
            " /",
            " ='1'",
        ] {
            assert!(!plain_attrs(raw.as_bytes()), "{raw:?}");
        }
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_bytes(&bytes, "fuzz.xml");
        }

        #[test]
        fn fast_attribute_path_never_accepts_what_quick_xml_rejects(raw in "[ a-c=\"'<&;/x\t]{0,24}") {
            if plain_attrs(raw.as_bytes()) {
                let mut keys = Vec::new();
                for a in Attributes::new(&raw, 0) {
                    let a = a.expect("quick-xml rejects what the fast path accepted");
                    proptest::prop_assert!(!keys.contains(&a.key.0.to_string()));
                    keys.push(a.key.0.to_string());
                }
            }
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
