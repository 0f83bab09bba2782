//! go-test-json: a line parser over `go test -json`'s event stream
//! (cmd/test2json: one JSON object per line with `Action`, `Package`,
//! `Test`, and since Go 1.24 `ImportPath` / `FailedBuild` for build events).
//!
//! The stream is read line by line through a fixed buffer and never held in
//! memory; state is kept per package run (the tests of the package currently
//! running) plus the failing names.
//!
//! Rules (`../shared/corpus/README.md`, "go test -json"):
//!
//! 1. Lines that are not JSON objects with an `Action` (compiler output
//!    before Go 1.24, stray prints) are skipped. No event at all is an error.
//! 2. count = top-level tests (no `/` in `Test`) whose last action is `pass`
//!    or `fail`, per package and per run (a re-run counts again). Skips do
//!    not count.
//! 3. Every `fail` of a test names `<Package>.<Test>`, subtests included, in
//!    stream order.
//! 4. When a package fails, each of its tests that started but never ended
//!    is named (and counted if top-level): the test that panicked, hung or
//!    called `os.Exit`. A failed package with no named failing test at all is
//!    named by its import path, after the test names. Build failures come in
//!    three shapes, all of which fail the package: plain text
//!    `FAIL\t<p> [build failed]` (before Go 1.24), the same text as an
//!    `output` event, and `build-fail` events keyed by `ImportPath`
//!    (`p [p.test]` or `p.test`), linked to the package's `fail` through
//!    `FailedBuild`. A `build-fail` nobody links still fails `p`. A text
//!    failure is taken back by a later `pass` or `skip` of that package
//!    (a test printed it: go1.19's test2json gives a test's `FAIL …` line
//!    to its package), so it fails nothing.
//! 5. A test that started and never ended anywhere else — its package
//!    passed (or was skipped) without its terminal event, it was re-run
//!    before the earlier run ended, or the stream stopped while it ran — is
//!    never dropped: it is not counted (its result was never seen) and it is
//!    named in an `unfinished-tests:` note (open at a package pass/skip or at
//!    a re-run) or a `stream-ended-early:` note (open at the stream's end),
//!    which [`super::judge`] never lets be green. Go 1.19's test2json makes
//!    the first shape: a test whose output lacks a trailing newline has its
//!    `--- PASS` line glued to that output and its `pass` event is lost.
//! 6. A package that ends `pass` having started no test in that run and
//!    without `testing`'s closing `PASS` line among its own output (what
//!    `m.Run()` prints when it ran, even with no test to run) never ran
//!    its tests: its `TestMain` returned or exited 0 without `m.Run()`. It
//!    is named in a `tests-never-ran:` note, which [`super::judge`] never
//!    lets be green. (A package without test files ends `skip`.)
//! 7. A stream with no event at all is [`ReportError::NoEvents`], a failed
//!    measurement (the corpus's rule 1), whatever text it holds. When that
//!    text is go's own build failure (`FAIL\t<p> [build failed]`: Go 1.19
//!    writes nothing else when every package given failed to build), the
//!    error says so and that the build is what to fix — not that the suite
//!    should print go test -json, which it did. Beside events, such a line
//!    names its package as failing (rule 4).

use super::{
    FailureKind, OUTPUT_LINE_BYTES, OUTPUT_LINES, OUTPUT_TESTS, Parsed, ReportError, TestOutput,
    TestStatus, Tests,
};
use serde::Deserialize;
use std::borrow::Cow;
// Keyed by names the stream spells (packages, tests), looked up on most
// events: foldhash (randomly seeded per process, as std's SipHash is) hashes
// them several times faster; SipHash was a sixth of the parse.
use foldhash::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// What to do about a stream without events that is not go's own build
/// failure ([`ReportError::NoEvents`]).
pub const NO_EVENTS_REMEDY: &str = "a stream without events is never 0 tests: make the suite run `go test -json` (and build), or declare another report kind";

/// Lines longer than this are not buffered whole: they are skipped as
/// non-JSON (test2json never writes an event that large; a stray print can).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
const READ_BUF: usize = 256 * 1024;

/// Parse the stream in `path`; `display` is how errors name it.
pub fn parse_file(path: &Path, display: &str) -> Result<Parsed, ReportError> {
    let f = File::open(path).map_err(|source| ReportError::Unreadable {
        file: display.to_string(),
        source,
    })?;
    parse_reader(BufReader::with_capacity(READ_BUF, f), display)
}

/// Parse a stream from any buffered reader.
pub fn parse_reader<R: BufRead>(r: R, display: &str) -> Result<Parsed, ReportError> {
    let mut st = Stream::new();
    st.feed(r, display)?;
    st.finish(display)
}

/// Parse the streams in `paths` as one stream, in order: the judgement of
/// `certify --split` over its shards' streams is the judgement of their
/// union, by the same rules as one unsplit stream. `display` names them.
pub fn parse_files(paths: &[&Path], display: &str) -> Result<Parsed, ReportError> {
    let mut st = Stream::new();
    for path in paths {
        let f = File::open(path).map_err(|source| ReportError::Unreadable {
            file: display.to_string(),
            source,
        })?;
        st.feed(BufReader::with_capacity(READ_BUF, f), display)?;
    }
    st.finish(display)
}

impl Stream {
    fn new() -> Stream {
        Stream {
            marker: memchr::memmem::Finder::new(b" failed]"),
            seq: 0,
            events: 0,
            nonjson: 0,
            count: 0,
            names: Vec::new(),
            pkgs: Runs::default(),
            named_pkgs: HashSet::default(),
            failed_pkgs: Vec::new(),
            failed_set: HashSet::default(),
            pending_builds: Vec::new(),
            open_pkgs: HashSet::default(),
            last_open: None,
            torn_tail: false,
            unfinished: Vec::new(),
            cap: Capture::new(),
            spare: Spare::default(),
            text_only: HashSet::default(),
            ends: Vec::new(),
            ended: HashSet::default(),
            said_pass: HashSet::default(),
            never_ran: Vec::new(),
            lines: 0,
            tests: Tests::default(),
        }
    }

    /// Read every line of `r` into the stream.
    fn feed<R: BufRead>(&mut self, mut r: R, display: &str) -> Result<(), ReportError> {
        let st = self;
        let mut line = Vec::with_capacity(4096);
        loop {
            // A whole line in the reader's buffer is read where it lies.
            match r.fill_buf() {
                Ok(buf) => {
                    if let Some(i) = memchr::memchr(b'\n', buf) {
                        st.line(&buf[..i]);
                        r.consume(i + 1);
                        continue;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(ReportError::Unreadable {
                        file: display.to_string(),
                        source,
                    });
                }
            }
            line.clear();
            let (more, complete, terminated) = read_line_capped(&mut r, &mut line, MAX_LINE)
                .map_err(|source| ReportError::Unreadable {
                    file: display.to_string(),
                    source,
                })?;
            if !more {
                break;
            }
            if complete {
                let before = st.nonjson;
                st.line(&line);
                if !terminated && st.nonjson > before && line.trim_ascii_start().starts_with(b"{") {
                    st.torn_tail = true;
                }
            } else {
                st.nonjson += 1;
            }
            if line.capacity() > 4 * 1024 * 1024 {
                line.shrink_to(4096);
            }
        }
        Ok(())
    }
}

/// Parse a stream held in memory (tests, fuzzing).
pub fn parse_bytes(bytes: &[u8], display: &str) -> Result<Parsed, ReportError> {
    parse_reader(bytes, display)
}

/// Read one line (without its `\n`) into `out`, keeping at most `cap` bytes.
/// Returns (a line was read, it fit under `cap`, it ended with `\n`).
fn read_line_capped<R: BufRead>(
    r: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<(bool, bool, bool)> {
    let mut any = false;
    let mut fits = true;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((any, fits, false));
        }
        any = true;
        let (chunk, used, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        if fits {
            if out.len() + chunk.len() > cap {
                fits = false;
                out.clear();
            } else {
                out.extend_from_slice(chunk);
            }
        }
        r.consume(used);
        if done {
            return Ok((true, fits, true));
        }
    }
}

/// The fields of a test2json event saphan reads; everything else (Time,
/// Elapsed, Output …) is skipped by serde without allocation.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "Action", borrow)]
    action: Option<Cow<'a, str>>,
    #[serde(rename = "Package", borrow, default)]
    package: Option<Cow<'a, str>>,
    #[serde(rename = "Test", borrow, default)]
    test: Option<Cow<'a, str>>,
    #[serde(rename = "ImportPath", borrow, default)]
    import_path: Option<Cow<'a, str>>,
    #[serde(rename = "FailedBuild", borrow, default)]
    failed_build: Option<Cow<'a, str>>,
    #[serde(rename = "Elapsed", default)]
    elapsed: Option<Elapsed>,
}

/// `Elapsed` as serde reads it: a number, or anything else ignored (the
/// field never decides whether a line is an event).
#[derive(Deserialize)]
#[serde(untagged)]
enum Elapsed {
    Seconds(f64),
    Other(serde::de::IgnoredAny),
}

impl Elapsed {
    fn seconds(&self) -> Option<f64> {
        match self {
            Elapsed::Seconds(s) => Some(*s),
            Elapsed::Other(_) => None,
        }
    }
}

/// Only decoded for the rare line that mentions a build failure.
#[derive(Deserialize)]
struct OutputOnly<'a> {
    #[serde(rename = "Output", borrow, default)]
    output: Option<Cow<'a, str>>,
}

/// An event line in test2json's own layout, read without serde: a compact
/// object (no whitespace) whose keys are among `Time`, `Action`, `Package`,
/// `Test`, `Output`, `Elapsed`, each at most once, strings of printable
/// ASCII (escapes allowed only in `Time` and `Output`, which are not
/// decoded), `Elapsed` a JSON number. `None` means "not this layout": the
/// line goes to serde, which decides. So the fast path never accepts what
/// serde would refuse, and gives what serde would give when it accepts.
struct Fast<'a> {
    action: &'a str,
    package: Option<&'a str>,
    test: Option<&'a str>,
    /// The raw value of `Output`, between its quotes.
    output: Option<(usize, usize)>,
    /// The raw number of `Elapsed`.
    elapsed: Option<(usize, usize)>,
}

const HI: u64 = 0x8080_8080_8080_8080;
const LO: u64 = 0x0101_0101_0101_0101;

/// The first byte at or after `i` that is `"`, `\`, a control or not ASCII.
#[inline]
fn string_stop(b: &[u8], mut i: usize) -> Option<usize> {
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().ok()?);
        let q = w ^ (LO * b'"' as u64);
        let s = w ^ (LO * b'\\' as u64);
        let m = (w
            | q.wrapping_sub(LO) & !q
            | s.wrapping_sub(LO) & !s
            | w.wrapping_sub(LO * 0x20) & !w)
            & HI;
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c))
        .map(|k| i + k)
}

/// A string value opening at `b[i] == '"'`: the index of its closing quote.
/// `escapes_ok`: `\` escapes are checked as serde checks ignored strings.
#[inline]
fn fast_string(b: &[u8], i: usize, escapes_ok: bool) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j = string_stop(b, j)?;
        match b[j] {
            b'"' => return Some(j),
            b'\\' if escapes_ok => match *b.get(j + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                b'u' => {
                    let h = b.get(j + 2..j + 6)?;
                    if !h.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    j += 6;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The bytes of a string value [`fast_string`] read without escapes, as
/// a `&str`, not checked again: it returns only when every byte before the
/// closing quote is printable ASCII, which is UTF-8.
#[inline]
fn printable_ascii(b: &[u8]) -> &str {
    debug_assert!(b.iter().all(|c| (0x20..0x80).contains(c)));
    // SAFETY: without escapes, `fast_string` returns the closing quote only
    // when `string_stop` stopped at no byte before it, and `string_stop`
    // stops at every byte outside 0x20..0x80; ASCII is valid UTF-8. (A
    // second `from_utf8` here was a tenth of the parse.)
    unsafe { std::str::from_utf8_unchecked(b) }
}

/// A JSON number starting at `i`: the index just past it.
fn fast_number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |b: &[u8], i: usize| b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i += digits(b, i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let n = digits(b, i + 1);
        if n == 0 {
            return None;
        }
        i += 1 + n;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(b, i);
        if n == 0 {
            return None;
        }
        i += n;
    }
    Some(i)
}

/// The key of test2json's layout that `b` (just past a key's opening
/// quote) starts with, up to its colon (`Action":`): (the length of those
/// bytes, the key's bit, its kind). Each key is compared whole, as a
/// literal the compiler turns into a few loads, so there is no search for
/// the closing quote.
#[inline]
fn fast_key(b: &[u8]) -> Option<(usize, u8, u8)> {
    let key = |k: &[u8], bit, kind| Some((k.len(), bit, kind));
    match b.first()? {
        b'T' if b.starts_with(b"Time\":") => key(b"Time\":", 1, 0),
        b'A' if b.starts_with(b"Action\":") => key(b"Action\":", 2, 1),
        b'P' if b.starts_with(b"Package\":") => key(b"Package\":", 4, 2),
        b'T' if b.starts_with(b"Test\":") => key(b"Test\":", 8, 3),
        b'O' if b.starts_with(b"Output\":") => key(b"Output\":", 16, 4),
        b'E' if b.starts_with(b"Elapsed\":") => key(b"Elapsed\":", 32, 5),
        _ => None,
    }
}

fn fast_event(b: &[u8]) -> Option<Fast<'_>> {
    if b.first() != Some(&b'{') {
        return None;
    }
    let (mut action, mut package, mut test, mut output, mut elapsed) =
        (None, None, None, None, None);
    let mut seen = 0u8;
    let mut i = 1;
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (key, bit, kind) = fast_key(&b[i + 1..])?;
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        let v = i + 1 + key;
        if kind == 5 {
            i = fast_number(b, v)?;
            elapsed = Some((v, i));
        } else {
            if b.get(v) != Some(&b'"') {
                return None;
            }
            let end = fast_string(b, v, kind == 0 || kind == 4)?;
            // No escapes and printable ASCII only: the bytes are the string.
            let s = || printable_ascii(&b[v + 1..end]);
            match kind {
                1 => action = Some(s()),
                2 => package = Some(s()),
                3 => test = Some(s()),
                4 => output = Some((v + 1, end)),
                _ => {}
            }
            i = end + 1;
        }
        match b.get(i)? {
            b',' => i += 1,
            b'}' if i + 1 == b.len() => break,
            _ => return None,
        }
    }
    Some(Fast {
        action: action?,
        package,
        test,
        output,
        elapsed,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Term {
    Pass,
    Fail,
    Skip,
}

struct TestRun {
    seq: u64,
    last: Option<Term>,
    /// Its output ring in [`Capture::rings`], once it wrote a line.
    ring: Option<usize>,
}

#[derive(Default)]
struct PkgRun {
    tests: HashMap<String, TestRun>,
    /// Earlier runs of a test that were re-run before they ended: (seq, name).
    lost: Vec<(u64, String)>,
    /// The package's own output (events without a `Test`).
    ring: Option<usize>,
}

/// The package runs in flight. The run the last look-up found is held
/// apart: events of one package come in runs, so most look-ups compare one
/// name and hash none.
#[derive(Default)]
struct Runs {
    last: Option<(String, PkgRun)>,
    rest: HashMap<String, PkgRun>,
}

impl Runs {
    /// The run of `pkg`, begun over `spare` if it has none.
    fn run(&mut self, pkg: &str, spare: &mut Spare) -> &mut PkgRun {
        if self.last.as_ref().is_none_or(|(p, _)| p != pkg) {
            let found = self.rest.remove_entry(pkg);
            let run = found.unwrap_or_else(|| (pkg.to_string(), spare.run()));
            if let Some((p, r)) = self.last.replace(run) {
                self.rest.insert(p, r);
            }
        }
        &mut self.last.as_mut().expect("set above").1
    }

    /// Take the run of `pkg` out, if it has one.
    fn remove(&mut self, pkg: &str) -> Option<PkgRun> {
        match &self.last {
            Some((p, _)) if p == pkg => self.last.take().map(|(_, r)| r),
            _ => self.rest.remove(pkg),
        }
    }

    /// Every run in flight, in no particular order.
    fn into_all(self) -> impl Iterator<Item = (String, PkgRun)> {
        self.last.into_iter().chain(self.rest)
    }
}

/// What ended package runs leave for the next ones: their emptied test
/// maps (capacity kept) and their tests' name buffers, so a stream of many
/// packages allocates about once for its largest package instead of once
/// per test. Bounded: little is kept of a huge package.
#[derive(Default)]
struct Spare {
    maps: Vec<HashMap<String, TestRun>>,
    names: Vec<String>,
}

impl Spare {
    /// Test maps kept (package runs mostly come one at a time).
    const MAPS: usize = 4;
    /// Most entries a kept map may have room for, and most names kept.
    const ENTRIES: usize = 4096;
    /// Most bytes a kept name buffer may hold.
    const NAME_BYTES: usize = 256;

    /// A new package run, over a kept map when there is one.
    fn run(&mut self) -> PkgRun {
        PkgRun {
            tests: self.maps.pop().unwrap_or_default(),
            ..PkgRun::default()
        }
    }

    /// `test` as a map key, in a kept buffer when there is one.
    fn name(&mut self, test: &str) -> String {
        match self.names.pop() {
            Some(mut n) => {
                n.clear();
                n.push_str(test);
                n
            }
            None => test.to_string(),
        }
    }

    /// Keep an ended run's test map, emptied by `drain`, if it has room
    /// (a package that ran no test leaves none worth keeping).
    fn keep_map(&mut self, map: HashMap<String, TestRun>) {
        debug_assert!(map.is_empty());
        if self.maps.len() < Self::MAPS && (1..=Self::ENTRIES).contains(&map.capacity()) {
            self.maps.push(map);
        }
    }

    /// Keep the buffer of a test name no longer needed.
    fn keep_name(&mut self, name: String) {
        if self.names.len() < Self::ENTRIES && name.capacity() <= Self::NAME_BYTES {
            self.names.push(name);
        }
    }
}

/// The last [`OUTPUT_LINES`] `Output` values one test wrote, kept as the
/// raw, still JSON-escaped bytes between the quotes: nothing is decoded
/// unless the test fails. Slots are reused, so a test that writes a
/// million lines costs 20 buffers.
#[derive(Default)]
struct RawRing {
    slots: Vec<Vec<u8>>,
    /// Slots in use (≤ OUTPUT_LINES).
    len: usize,
    /// The oldest slot once the ring is full.
    head: usize,
    /// Lines ever pushed.
    total: u64,
}

/// The escaped bytes kept of one line: enough for [`OUTPUT_LINE_BYTES`]
/// decoded bytes even when every character is a 6-byte `\uXXXX` escape.
const RAW_LINE_BYTES: usize = OUTPUT_LINE_BYTES * 6;

impl RawRing {
    fn push(&mut self, raw: &[u8]) {
        let slot = if self.len < OUTPUT_LINES {
            if self.slots.len() == self.len {
                self.slots.push(Vec::new());
            }
            self.len += 1;
            &mut self.slots[self.len - 1]
        } else {
            let i = self.head;
            self.head = (self.head + 1) % OUTPUT_LINES;
            &mut self.slots[i]
        };
        slot.clear();
        if raw.len() <= RAW_LINE_BYTES {
            slot.extend_from_slice(raw);
        } else {
            // Cut, never inside an escape: back off past a trailing `\…`.
            let mut cut = RAW_LINE_BYTES;
            if let Some(b) = memchr::memrchr(b'\\', &raw[cut - 6..cut]) {
                cut = cut - 6 + b;
                // `\\` is a whole escape: keep it.
                let run = raw[..cut + 1]
                    .iter()
                    .rev()
                    .take_while(|c| **c == b'\\')
                    .count();
                if run % 2 == 0 {
                    cut += 1;
                }
            }
            slot.extend_from_slice(&raw[..cut]);
            slot.extend_from_slice(b"\\u2026");
        }
        self.total += 1;
    }

    fn reset(&mut self) {
        self.len = 0;
        self.head = 0;
        self.total = 0;
        if self.slots.capacity() > OUTPUT_LINES {
            self.slots.shrink_to(OUTPUT_LINES);
        }
        for s in &mut self.slots {
            if s.capacity() > 64 * 1024 {
                *s = Vec::new();
            }
        }
    }

    /// Decode the kept lines as `test`'s output.
    fn decode(&self, test: String) -> TestOutput {
        let order = if self.len < OUTPUT_LINES {
            (0..self.len).chain(0..0)
        } else {
            (self.head..OUTPUT_LINES).chain(0..self.head)
        };
        let mut ring = super::LineRing::default();
        let mut q = Vec::new();
        for i in order {
            let raw = &self.slots[i];
            q.clear();
            q.push(b'"');
            q.extend_from_slice(raw);
            q.push(b'"');
            let text: String = serde_json::from_slice(&q)
                .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned());
            let text = text.strip_suffix('\n').unwrap_or(&text);
            ring.push_text(text);
            ring.push_text("\n");
        }
        let mut out = ring.finish(test, None);
        out.dropped += self.total - self.len as u64;
        out
    }
}

/// Test2json's framing lines (`=== RUN`, `--- FAIL: …`): not the test's own
/// output, so not kept. `raw` is the escaped `Output` value.
fn framing(raw: &[u8]) -> bool {
    if raw.starts_with(b"=== ") {
        return true;
    }
    let t = raw.trim_ascii_start();
    t.starts_with(b"--- FAIL: ") || t.starts_with(b"--- PASS: ") || t.starts_with(b"--- SKIP: ")
}

/// A package's own framing (`PASS`, `FAIL`, `ok  \tp\t0.1s`, `FAIL\tp …`).
/// `raw` is the escaped value and whatever follows it on the line.
fn package_framing(raw: &[u8]) -> bool {
    raw.starts_with(b"PASS\\n\"")
        || raw.starts_with(b"FAIL\\n\"")
        || raw.starts_with(b"ok  ")
        || raw.starts_with(b"FAIL\\t")
        || raw.starts_with(b"coverage: ")
}

/// Where the raw (escaped) value of the `"Output":"…"` member of an event
/// line serde already accepted as JSON begins and ends. test2json writes
/// `Output` last, so the value is found backwards from the line's end (its
/// opening quote is the first unescaped `"` before the closing one) —
/// passing over the value only. Any other layout is searched for forwards;
/// the key cannot occur inside another string (its quotes would be escaped).
fn output_span(finder: &memchr::memmem::Finder<'_>, line: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\"Output\":";
    let escaped = |q: usize| line[..q].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 1;
    if line.ends_with(b"\"}") {
        let end = line.len() - 2;
        let mut i = end;
        while let Some(q) = memchr::memrchr(b'"', &line[..i]) {
            if escaped(q) {
                i = q;
                continue;
            }
            if line[..q].ends_with(KEY) {
                return Some((q + 1, end));
            }
            break;
        }
    }
    let start = finder.find(line)? + finder.needle().len();
    let mut i = start;
    loop {
        let j = i + memchr::memchr2(b'"', b'\\', &line[i..])?;
        if line[j] == b'"' {
            return Some((start, j));
        }
        i = j + 2;
        if i > line.len() {
            return None;
        }
    }
}

/// The output capture: a ring per running test (reused through a free
/// list), the decoded output of failing tests, and a one-entry cache of the
/// test the last output line went to (lines of one test come in runs).
struct Capture {
    finder: memchr::memmem::Finder<'static>,
    rings: Vec<RawRing>,
    free: Vec<usize>,
    cur_pkg: String,
    cur_test: String,
    cur: Option<usize>,
    output: Vec<TestOutput>,
    omitted: u64,
    /// Failed packages' own output, emitted if the package is named.
    pkg_output: HashMap<String, TestOutput>,
}

impl Capture {
    fn new() -> Capture {
        Capture {
            finder: memchr::memmem::Finder::new(b"\"Output\":\""),
            rings: Vec::new(),
            free: Vec::new(),
            cur_pkg: String::new(),
            cur_test: String::new(),
            cur: None,
            output: Vec::new(),
            omitted: 0,
            pkg_output: HashMap::default(),
        }
    }

    fn alloc(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.rings.push(RawRing::default());
                self.rings.len() - 1
            }
        }
    }

    fn release(&mut self, ring: Option<usize>) {
        if let Some(i) = ring {
            self.rings[i].reset();
            self.free.push(i);
            if self.cur == Some(i) {
                self.cur = None;
            }
        }
    }

    /// A failing test: keep its output (under the cap) and let its ring go.
    fn failed(&mut self, ring: Option<usize>, name: impl FnOnce() -> String) {
        let Some(i) = ring else { return };
        if self.rings[i].total > 0 {
            if self.output.len() < OUTPUT_TESTS {
                let o = self.rings[i].decode(name());
                self.output.push(o);
            } else {
                self.omitted += 1;
            }
        }
        self.release(Some(i));
    }
}

struct Stream {
    /// Finds `" failed]"` (the tail of `[build failed]` / `[setup failed]`).
    marker: memchr::memmem::Finder<'static>,
    seq: u64,
    events: u64,
    nonjson: u64,
    count: u64,
    names: Vec<String>,
    /// Package runs in flight.
    pkgs: Runs,
    /// Packages that named at least one failing test.
    named_pkgs: HashSet<String>,
    /// Packages that failed, in order of their first failure.
    failed_pkgs: Vec<String>,
    failed_set: HashSet<String>,
    /// `build-fail` events not (yet) linked by a `FailedBuild`: (ImportPath, package).
    pending_builds: Vec<(String, String)>,
    /// Packages with events but no package-level pass/fail/skip yet.
    open_pkgs: HashSet<String>,
    /// The package of the last event, known to be in `open_pkgs`.
    last_open: Option<String>,
    /// The stream's last line ends without a newline and is not JSON: the
    /// writer was cut off mid-event.
    torn_tail: bool,
    /// `<Package>.<Test>` of every test that started and never ended in a
    /// package that passed or was skipped (or was re-run before it ended and
    /// its package did not fail), in start order per package.
    unfinished: Vec<String>,
    /// What failing tests wrote.
    cap: Capture,
    /// Maps and names of ended package runs, for the next ones.
    spare: Spare,
    /// Failed packages whose only evidence so far is a `[build failed]` /
    /// `[setup failed]` text (a later pass or skip of theirs takes it back).
    text_only: HashSet<String>,
    /// Package ends so far ([`package_ends`]), in stream order.
    ends: Vec<PackageEnd>,
    /// Packages with a package-level terminal event.
    ended: HashSet<String>,
    /// Packages whose own output in their current run had `testing`'s
    /// closing `PASS` line (rule 6).
    said_pass: HashSet<String>,
    /// Packages that ended `pass` without starting a test or saying
    /// `PASS` (rule 6), in stream order.
    never_ran: Vec<String>,
    /// Lines read, JSON or not.
    lines: u64,
    /// Every test that ended, in stream order ([`Parsed::tests`]).
    tests: Tests,
}

fn top_level(test: &str) -> bool {
    !test.contains('/')
}

/// Top-level tests of a package run whose last action was pass or fail.
fn finished_top_level(run: &PkgRun) -> u64 {
    run.tests
        .iter()
        .filter(|(name, t)| top_level(name) && matches!(t.last, Some(Term::Pass | Term::Fail)))
        .count() as u64
}

/// The package a `build-fail` ImportPath belongs to: `p [p.test]` → `p`,
/// `p_test [p.test]` → `p`, `p.test` → `p`, `p` → `p`.
pub fn build_package(import_path: &str) -> &str {
    let ip = import_path.trim();
    if let (Some(open), true) = (ip.find(" ["), ip.ends_with(']')) {
        let inner = &ip[open + 2..ip.len() - 1];
        return inner.strip_suffix(".test").unwrap_or(inner);
    }
    ip.strip_suffix(".test").unwrap_or(ip)
}

/// Whether the `Output` of an event line can start with `FAIL`, as
/// [`build_failed_text`] needs, so whether the line is worth searching for
/// `" failed]"`. `span` is where the fast path found the value (`Some(None)`:
/// the line has no `Output`), `None` when the fast path did not read the
/// line. A raw value that starts with neither `FAIL` nor an escape cannot
/// decode to text starting with `FAIL`.
fn may_say_failed(line: &[u8], span: Option<Option<(usize, usize)>>) -> bool {
    match span {
        Some(Some((start, _))) => {
            let v = &line[start..];
            v.starts_with(b"FAIL") || v.starts_with(b"\\")
        }
        Some(None) => false,
        None => true,
    }
}

/// `FAIL\t<p> [build failed]` (or `[setup failed]`) → `p`.
fn build_failed_text(line: &str) -> Option<&str> {
    let rest = line.trim_end().strip_prefix("FAIL")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    let p = rest
        .strip_suffix("[build failed]")
        .or_else(|| rest.strip_suffix("[setup failed]"))?
        .trim_end();
    (!p.is_empty() && !p.contains(char::is_whitespace)).then_some(p)
}

impl Stream {
    fn line(&mut self, raw: &[u8]) {
        self.lines += 1;
        let trimmed = raw.trim_ascii();
        if trimmed.first() != Some(&b'{') {
            self.nonjson += 1;
            if self.marker.find(trimmed).is_some()
                && let Some(p) = build_failed_text(&String::from_utf8_lossy(trimmed))
            {
                self.text_claim(p.to_string());
            }
            return;
        }
        // test2json's own layout is read directly; anything else is serde's.
        let (ev, span) = match fast_event(trimmed) {
            Some(f) => (
                Event {
                    action: Some(Cow::Borrowed(f.action)),
                    package: f.package.map(Cow::Borrowed),
                    test: f.test.map(Cow::Borrowed),
                    import_path: None,
                    failed_build: None,
                    // Read only where it is kept: a package's end.
                    elapsed: match (f.test, f.elapsed) {
                        (None, Some((a, b))) => std::str::from_utf8(&trimmed[a..b])
                            .ok()
                            .and_then(|n| n.parse().ok())
                            .map(Elapsed::Seconds),
                        _ => None,
                    },
                },
                Some(f.output),
            ),
            None => match serde_json::from_slice::<Event<'_>>(trimmed) {
                Ok(ev) => (ev, None),
                Err(_) => {
                    self.nonjson += 1;
                    return;
                }
            },
        };
        let Some(action) = ev.action else {
            self.nonjson += 1;
            return;
        };
        self.events += 1;
        self.seq += 1;
        let seq = self.seq;
        if let Some(pkg) = ev.package.as_deref() {
            match (&*action, ev.test.as_deref()) {
                ("pass" | "skip" | "fail", None) => {
                    self.open_pkgs.remove(pkg);
                    if self.last_open.as_deref() == Some(pkg) {
                        self.last_open = None;
                    }
                }
                // Events of one package come in runs: the set is asked
                // only when the package changes.
                _ if self.last_open.as_deref() == Some(pkg) => {}
                _ => {
                    if !self.open_pkgs.contains(pkg) {
                        self.open_pkgs.insert(pkg.to_string());
                    }
                    self.last_open = Some(pkg.to_string());
                }
            }
        }
        match (&*action, ev.package.as_deref(), ev.test.as_deref()) {
            ("start", Some(pkg), None) => {
                // A new run of the package (Go 1.20+): a previous run that
                // never reported its end is closed for counting.
                if let Some(mut run) = self.pkgs.remove(pkg) {
                    self.count += finished_top_level(&run);
                    self.cap.release(run.ring);
                    for (name, t) in run.tests.drain() {
                        self.cap.release(t.ring);
                        self.spare.keep_name(name);
                    }
                    self.spare.keep_map(run.tests);
                }
            }
            ("build-fail", _, _) => {
                if let Some(ip) = ev.import_path.as_deref() {
                    let p = build_package(ip).to_string();
                    self.pending_builds.push((ip.to_string(), p));
                }
            }
            ("output", Some(pkg), test) => {
                if may_say_failed(trimmed, span)
                    && self.marker.find(trimmed).is_some()
                    && let Ok(o) = serde_json::from_slice::<OutputOnly<'_>>(trimmed)
                {
                    // The package is the event's own; the text claims the
                    // failure until the package reports otherwise.
                    if o.output.as_deref().and_then(build_failed_text).is_some() {
                        self.text_claim(pkg.to_string());
                    }
                }
                self.output(pkg, test, trimmed, span);
            }
            ("run", Some(pkg), Some(test)) => {
                let run = self.pkgs.run(pkg, &mut self.spare);
                let fresh = TestRun {
                    seq,
                    last: None,
                    ring: None,
                };
                let prev = match run.tests.get_mut(test) {
                    Some(t) => Some(std::mem::replace(t, fresh)),
                    None => {
                        run.tests.insert(self.spare.name(test), fresh);
                        None
                    }
                };
                // A re-run starts its output afresh.
                self.cap.release(prev.as_ref().and_then(|p| p.ring));
                match prev {
                    Some(p) if p.last.is_none() => run.lost.push((p.seq, test.to_string())),
                    Some(p)
                        if matches!(p.last, Some(Term::Pass | Term::Fail)) && top_level(test) =>
                    {
                        self.count += 1;
                    }
                    _ => {}
                }
            }
            (a @ ("pass" | "fail" | "skip"), Some(pkg), Some(test)) => {
                let term = match a {
                    "pass" => Term::Pass,
                    "fail" => Term::Fail,
                    _ => Term::Skip,
                };
                let run = self.pkgs.run(pkg, &mut self.spare);
                let ring = match run.tests.get_mut(test) {
                    Some(t) => {
                        t.last = Some(term);
                        t.ring.take()
                    }
                    None => {
                        run.tests.insert(
                            test.to_string(),
                            TestRun {
                                seq,
                                last: Some(term),
                                ring: None,
                            },
                        );
                        None
                    }
                };
                if term == Term::Fail {
                    self.cap.failed(ring, || format!("{pkg}.{test}"));
                } else {
                    self.cap.release(ring);
                }
                let status = match term {
                    Term::Pass => TestStatus::Passed,
                    Term::Fail => TestStatus::Failed,
                    Term::Skip => TestStatus::Skipped,
                };
                self.tests.push(pkg, test, status);
                if term == Term::Fail {
                    self.names.push(format!("{pkg}.{test}"));
                    if !self.named_pkgs.contains(pkg) {
                        self.named_pkgs.insert(pkg.to_string());
                    }
                }
            }
            (a @ ("pass" | "skip" | "fail"), Some(pkg), None) => {
                let mut run = self.pkgs.remove(pkg).unwrap_or_default();
                let failed = a == "fail";
                // Rule 6: `ok` with no test started and no `PASS` said.
                let said_pass = !self.said_pass.is_empty() && self.said_pass.remove(pkg);
                if a == "pass" && !said_pass && run.tests.is_empty() && run.lost.is_empty() {
                    self.never_ran.push(pkg.to_string());
                }
                self.ends.push(PackageEnd {
                    package: pkg.to_string(),
                    action: a.to_string(),
                    elapsed: ev.elapsed.as_ref().and_then(Elapsed::seconds),
                });
                if !self.ended.contains(pkg) {
                    self.ended.insert(pkg.to_string());
                }
                // A package that passed or was skipped did not fail to
                // build, whatever text said so before (a test can print
                // `FAIL p [build failed]`).
                if !failed && self.text_only.remove(pkg) {
                    self.failed_set.remove(pkg);
                    self.failed_pkgs.retain(|p| p != pkg);
                }
                let mut unfinished: Vec<(u64, String)> = run.lost;
                let mut rings: HashMap<u64, usize> = HashMap::default();
                for (name, t) in run.tests.drain() {
                    match t.last {
                        Some(Term::Pass | Term::Fail) if top_level(&name) => self.count += 1,
                        None => {
                            if let Some(r) = t.ring
                                && failed
                            {
                                rings.insert(t.seq, r);
                            } else {
                                self.cap.release(t.ring);
                            }
                            unfinished.push((t.seq, name));
                            continue;
                        }
                        _ => {}
                    }
                    self.cap.release(t.ring);
                    self.spare.keep_name(name);
                }
                self.spare.keep_map(run.tests);
                if failed
                    && let Some(r) = run.ring
                    && self.cap.rings[r].total > 0
                {
                    let o = self.cap.rings[r].decode(pkg.to_string());
                    self.cap.pkg_output.insert(pkg.to_string(), o);
                }
                self.cap.release(run.ring);
                unfinished.sort();
                if !failed {
                    // The package passed (or was skipped) but these tests
                    // never reported an end: their results were not seen.
                    self.unfinished
                        .extend(unfinished.into_iter().map(|(_, n)| format!("{pkg}.{n}")));
                } else {
                    for (seq, name) in unfinished {
                        if top_level(&name) {
                            self.count += 1;
                        }
                        self.cap
                            .failed(rings.remove(&seq), || format!("{pkg}.{name}"));
                        self.names.push(format!("{pkg}.{name}"));
                        self.tests.push(pkg, &name, TestStatus::Failed);
                        if !self.named_pkgs.contains(pkg) {
                            self.named_pkgs.insert(pkg.to_string());
                        }
                    }
                    if let Some(fb) = ev.failed_build.as_deref() {
                        self.pending_builds.retain(|(ip, _)| ip != fb);
                    }
                    self.package_failed(pkg.to_string());
                }
            }
            _ => {}
        }
    }

    /// An `output` event: keep its line in the ring of the test (or the
    /// package) it belongs to, unless it is test2json's framing. Only the
    /// escaped bytes are copied; nothing is decoded here.
    /// `span`: where the fast path found the value (`Some(None)`: no
    /// `Output`); `None`: not read by the fast path, so searched for here.
    fn output(
        &mut self,
        pkg: &str,
        test: Option<&str>,
        line: &[u8],
        span: Option<Option<(usize, usize)>>,
    ) {
        let span = match span {
            Some(s) => s,
            None => output_span(&self.cap.finder, line),
        };
        let Some((start, end)) = span else {
            return;
        };
        let test = test.unwrap_or("");
        // Framing is told by the value's first bytes: no need to find its end.
        if test.is_empty() {
            if package_framing(&line[start..]) {
                // `testing`'s closing line: the package's tests ran (rule 6).
                if line[start..].starts_with(b"PASS\\n\"") && !self.said_pass.contains(pkg) {
                    self.said_pass.insert(pkg.to_string());
                }
                return;
            }
        } else if framing(&line[start..]) {
            return;
        }
        let raw = &line[start..end];
        let cap = &mut self.cap;
        if let Some(i) = cap.cur
            && cap.cur_pkg == pkg
            && cap.cur_test == test
        {
            cap.rings[i].push(raw);
            return;
        }
        let run = self.pkgs.run(pkg, &mut self.spare);
        let slot = if test.is_empty() {
            &mut run.ring
        } else {
            match run.tests.get_mut(test) {
                Some(t) => &mut t.ring,
                // Output of a test never started: nothing to keep it under.
                None => return,
            }
        };
        let i = match *slot {
            Some(i) => i,
            None => {
                let i = cap.alloc();
                *slot = Some(i);
                i
            }
        };
        cap.rings[i].push(raw);
        cap.cur = Some(i);
        cap.cur_pkg.clear();
        cap.cur_pkg.push_str(pkg);
        cap.cur_test.clear();
        cap.cur_test.push_str(test);
    }

    fn package_failed(&mut self, pkg: String) {
        self.text_only.remove(&pkg);
        if self.failed_set.insert(pkg.clone()) {
            self.failed_pkgs.push(pkg);
        }
    }

    /// A `FAIL p [build failed]` / `[setup failed]` text: `p` fails, unless
    /// it reports a pass or a skip later.
    fn text_claim(&mut self, pkg: String) {
        if !self.failed_set.contains(&pkg) {
            self.failed_set.insert(pkg.clone());
            self.text_only.insert(pkg.clone());
            self.failed_pkgs.push(pkg);
        }
    }

    /// `build-fail` events no package event linked fail their package.
    fn settle_builds(&mut self) {
        for (_, p) in std::mem::take(&mut self.pending_builds) {
            self.package_failed(p);
        }
    }

    /// The stream's package ends: every package-level terminal event, then
    /// each failed package that had none (a build or setup failure told by
    /// text or by a `build-fail` event: go ran nothing of it, and it ended
    /// failed).
    fn take_ends(&mut self) -> Vec<PackageEnd> {
        self.settle_builds();
        let mut ends = std::mem::take(&mut self.ends);
        for p in &self.failed_pkgs {
            if !self.ended.contains(p) {
                ends.push(PackageEnd {
                    package: p.clone(),
                    action: "fail".into(),
                    elapsed: None,
                });
            }
        }
        ends
    }

    fn finish(mut self, display: &str) -> Result<Parsed, ReportError> {
        // Rule 7: no event is no measurement; go's own build failure says
        // what to fix.
        if self.events == 0 {
            let (hint, remedy) = match self.failed_pkgs.as_slice() {
                [] => (
                    if self.nonjson > 0 {
                        format!(" ({} line(s) of plain text)", self.nonjson)
                    } else {
                        " (it is empty)".to_string()
                    },
                    NO_EVENTS_REMEDY.to_string(),
                ),
                pkgs => (
                    format!(
                        " (go printed only that {} failed to build or set up)",
                        pkgs.iter()
                            .map(|p| format!("`{p}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    "no test was built, so none ran: fix the build (go wrote why on the suite's stderr)".to_string(),
                ),
            };
            return Err(ReportError::NoEvents {
                file: display.to_string(),
                hint,
                empty: self.lines == 0,
                remedy,
            });
        }
        // Package runs the stream never finished: count what ended.
        let pkgs = std::mem::take(&mut self.pkgs);
        let mut unfinished_pkgs = Vec::new();
        let mut running: Vec<(String, u64, String)> = Vec::new();
        for (pkg, run) in pkgs.into_all() {
            let mut open: Vec<(u64, String)> = run.lost;
            for (name, t) in run.tests {
                match t.last {
                    Some(Term::Pass | Term::Fail) if top_level(&name) => self.count += 1,
                    None => open.push((t.seq, name)),
                    _ => {}
                }
            }
            if !open.is_empty() {
                running.extend(open.into_iter().map(|(seq, n)| (pkg.clone(), seq, n)));
                unfinished_pkgs.push(pkg);
            }
        }
        running.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        self.settle_builds();
        let mut names = self.names;
        let mut cap = self.cap;
        let mut tests = self.tests;
        for p in &self.failed_pkgs {
            if !self.named_pkgs.contains(p) {
                names.push(p.clone());
                // The package failed without naming a test: it is the test.
                tests.push(p, "", TestStatus::Failed);
                if let Some(o) = cap.pkg_output.remove(p) {
                    if cap.output.len() < OUTPUT_TESTS {
                        cap.output.push(o);
                    } else {
                        cap.omitted += 1;
                    }
                }
            }
        }
        let mut notes = Vec::new();
        // Every note below says the evidence was cut off; the first decides
        // the kind.
        let first_cut = if !self.unfinished.is_empty() {
            FailureKind::UnfinishedTests
        } else if !self.never_ran.is_empty() {
            FailureKind::TestsNeverRan
        } else {
            FailureKind::StreamEndedEarly
        };
        if !self.unfinished.is_empty() {
            notes.push(format!(
                "unfinished-tests: {} test(s) started and never reported an end, though their package ended: {} — their results were not seen, so they are not counted and the verdict cannot be green (Go 1.19 loses a test's end when its output lacks a trailing newline: end the test's output with a newline, or use Go 1.20 or later)",
                self.unfinished.len(),
                self.unfinished.join(", ")
            ));
        }
        if !self.never_ran.is_empty() {
            notes.push(format!(
                "tests-never-ran: {} ended `ok` but started no test and `testing` never printed its closing PASS — its TestMain returned or exited without running m.Run(), so its tests were not measured and the verdict cannot be green (end TestMain with `os.Exit(m.Run())`)",
                self.never_ran.join(", ")
            ));
        }
        if !running.is_empty() {
            unfinished_pkgs.sort();
            let tests: Vec<String> = running.iter().map(|(p, _, n)| format!("{p}.{n}")).collect();
            notes.push(format!(
                "stream-ended-early: the stream ends with {} test(s) still running in {}: {} — they are not counted",
                tests.len(),
                unfinished_pkgs.join(", "),
                tests.join(", ")
            ));
        }
        let mut never_ended: Vec<String> = self
            .open_pkgs
            .iter()
            .filter(|p| !unfinished_pkgs.contains(p) && !self.failed_set.contains(*p))
            .cloned()
            .collect();
        if !never_ended.is_empty() {
            never_ended.sort();
            notes.push(format!(
                "stream-ended-early: the stream ends before {} reported pass, fail or skip",
                never_ended.join(", ")
            ));
        }
        if self.torn_tail {
            notes.push("stream-ended-early: the stream's last line is cut off mid-event".into());
        }
        Ok(Parsed {
            count: self.count,
            names,
            cut_off: (!notes.is_empty()).then_some((0, first_cut)),
            notes,
            output: cap.output,
            output_omitted: cap.omitted,
            tests,
            ..Parsed::default()
        })
    }
}

/// One package-level terminal event of a stream (`pass`, `fail` or `skip`
/// with a `Package` and no `Test`): what `certify --split` proves coverage
/// with, and the per-package seconds the next split balances by.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageEnd {
    /// The package's import path (`Package`).
    pub package: String,
    /// `pass`, `fail` or `skip`.
    pub action: String,
    /// The event's `Elapsed` in seconds, when it carries one.
    pub elapsed: Option<f64>,
}

/// Every package end of the stream at `path`, in stream order, duplicates
/// kept (a package that ended twice appears twice): its package-level
/// terminal events (`pass`, `fail` or `skip` with a `Package` and no
/// `Test`), then each package the stream says failed without one (a
/// `FAIL p [build failed]` / `[setup failed]` text that no later pass of
/// `p` took back, a `build-fail` event) as a `fail` without `Elapsed`.
/// The same reader and rules as [`parse_file`] — one judgement of what
/// ended, for the verdict and for `certify --split`'s coverage — and, unlike
/// it, a stream without any event still has its text-told ends.
///
/// Errors: the file cannot be read (`report-unreadable`).
pub fn package_ends(path: &Path, display: &str) -> Result<Vec<PackageEnd>, ReportError> {
    let f = File::open(path).map_err(|source| ReportError::Unreadable {
        file: display.to_string(),
        source,
    })?;
    let mut st = Stream::new();
    st.feed(BufReader::with_capacity(READ_BUF, f), display)?;
    Ok(st.take_ends())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Parsed {
        parse_bytes(s.as_bytes(), "stdout").unwrap_or_else(|e| panic!("{e}"))
    }

    fn out(p: &str, t: &str, text: &str) -> String {
        let mut v = serde_json::json!({"Time":"2026-01-01T00:00:00Z","Action":"output","Package":p,"Output":text});
        if !t.is_empty() {
            v["Test"] = serde_json::json!(t);
        }
        v.to_string() + "\n"
    }

    #[test]
    fn failing_tests_keep_their_own_last_lines_subtests_under_their_names() {
        let mut s = String::new();
        s += &ev("run", "p", Some("TestOk"));
        s += &out("p", "TestOk", "=== RUN   TestOk\n");
        s += &out("p", "TestOk", "    ok_test.go:3: passing chatter\n");
        s += &ev("pass", "p", Some("TestOk"));
        s += &ev("run", "p", Some("TestBad"));
        s += &out("p", "TestBad", "=== RUN   TestBad\n");
        for i in 0..25 {
            s += &out(
                "p",
                "TestBad",
                &format!("    bad_test.go:9: line {i} \"q\" \\ \u{1b}]52;c;x\u{7}\n"),
            );
        }
        s += &ev("run", "p", Some("TestBad/sub"));
        s += &out("p", "TestBad/sub", "=== RUN   TestBad/sub\n");
        s += &out("p", "TestBad/sub", "    bad_test.go:12: sub says no\n");
        s += &out("p", "TestBad/sub", "    --- FAIL: TestBad/sub (0.00s)\n");
        s += &ev("fail", "p", Some("TestBad/sub"));
        s += &out("p", "TestBad", "--- FAIL: TestBad (0.00s)\n");
        s += &ev("fail", "p", Some("TestBad"));
        s += &out("p", "", "FAIL\n");
        s += &ev("fail", "p", None);
        let p = ok(&s);
        assert_eq!(p.names, ["p.TestBad/sub", "p.TestBad"]);
        assert_eq!(p.output.len(), 2, "{:?}", p.output);
        assert_eq!(p.output[0].test, "p.TestBad/sub");
        assert_eq!(p.output[0].lines, ["    bad_test.go:12: sub says no"]);
        assert_eq!(p.output[0].dropped, 0);
        let bad = &p.output[1];
        assert_eq!(bad.test, "p.TestBad");
        assert_eq!(bad.lines.len(), OUTPUT_LINES);
        assert_eq!(bad.dropped, 5);
        assert_eq!(
            bad.lines[0],
            "    bad_test.go:9: line 5 \"q\" \\ \u{1b}]52;c;x\u{7}"
        );
        assert_eq!(
            bad.lines[19],
            "    bad_test.go:9: line 24 \"q\" \\ \u{1b}]52;c;x\u{7}"
        );
        assert!(!format!("{:?}", p.output).contains("passing chatter"));
    }

    #[test]
    fn a_package_named_by_its_path_keeps_its_own_output() {
        let mut s = String::new();
        s += &out("p", "", "panic: init went wrong\n");
        s += &out("p", "", "FAIL\tp\t0.01s\n");
        s += &ev("fail", "p", None);
        let p = ok(&s);
        assert_eq!(p.names, ["p"]);
        assert_eq!(p.output.len(), 1);
        assert_eq!(p.output[0].test, "p");
        assert_eq!(p.output[0].lines, ["panic: init went wrong"]);
    }

    #[test]
    fn a_test_that_never_ended_in_a_failed_package_keeps_its_output() {
        let mut s = String::new();
        s += &ev("run", "p", Some("TestExit"));
        s += &out("p", "TestExit", "    exit_test.go:5: about to exit\n");
        s += &ev("fail", "p", None);
        let p = ok(&s);
        assert_eq!(p.names, ["p.TestExit"]);
        assert_eq!(p.output[0].lines, ["    exit_test.go:5: about to exit"]);
    }

    #[test]
    fn fast_path_reads_test2json_lines_and_leaves_the_rest_to_serde() {
        let l = br#"{"Time":"2026-11-29T12:00:00.1Z","Action":"output","Package":"p","Test":"T/a","Output":"x \"y\" \u00e9\n"}"#;
        let f = fast_event(l).expect("test2json layout");
        assert_eq!(
            (f.action, f.package, f.test),
            ("output", Some("p"), Some("T/a"))
        );
        let (a, b) = f.output.unwrap();
        assert_eq!(&l[a..b], br#"x \"y\" \u00e9\n"#);
        let f = fast_event(br#"{"Action":"pass","Package":"p","Elapsed":0.12}"#).unwrap();
        assert_eq!((f.action, f.test, f.output.is_none()), ("pass", None, true));
        for other in [
            &br#"{"Action": "pass"}"#[..],
            br#"{"Action":"pass","Action":"fail"}"#,
            br#"{"Action":"pass","ImportPath":"p"}"#,
            br#"{"Action":"pa\u0073s"}"#,
            br#"{"Action":"pass","Elapsed":01}"#,
            br#"{"Action":"pass"} x"#,
            br#"{"Package":"p"}"#,
            "{\"Action\":\"é\"}".as_bytes(),
            br#"{"Action":"pass","Output":"\x"}"#,
            br#"{"Action":"pass","Output":"a"#,
            br#"{"Action":null}"#,
        ] {
            assert!(
                fast_event(other).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn output_span_finds_the_value_backwards_and_forwards() {
        let f = memchr::memmem::Finder::new(b"\"Output\":\"");
        let span = |l: &str| output_span(&f, l.as_bytes()).map(|(a, b)| l[a..b].to_string());
        assert_eq!(
            span(r#"{"Action":"output","Test":"T","Output":"say \"hi\" \\\"Output\":\"x\\\\"}"#)
                .as_deref(),
            Some(r#"say \"hi\" \\\"Output\":\"x\\\\"#)
        );
        assert_eq!(
            span(r#"{"Output":"a\"b","Action":"output","Test":"T"}"#).as_deref(),
            Some(r#"a\"b"#)
        );
        assert_eq!(span(r#"{"Action":"output","Test":"T"}"#), None);
    }

    #[test]
    fn raw_ring_cuts_long_lines_outside_escapes() {
        let long = "\\\\".repeat(RAW_LINE_BYTES); // escaped backslashes
        let mut r = RawRing::default();
        r.push(long.as_bytes());
        let o = r.decode("t".into());
        assert!(o.lines[0].ends_with('…'));
        assert!(o.lines[0].trim_end_matches('…').chars().all(|c| c == '\\'));
        assert!(o.lines[0].len() <= OUTPUT_LINE_BYTES + 3);
    }

    #[test]
    fn build_package_shapes() {
        assert_eq!(build_package("p [p.test]"), "p");
        assert_eq!(build_package("p_test [p.test]"), "p");
        assert_eq!(build_package("example.com/x.test"), "example.com/x");
        assert_eq!(build_package("q"), "q");
        assert_eq!(
            build_failed_text("FAIL\texample.com/m/bad [build failed]\n"),
            Some("example.com/m/bad")
        );
        assert_eq!(
            build_failed_text("FAIL example.com/m/bad [setup failed]"),
            Some("example.com/m/bad")
        );
        assert_eq!(build_failed_text("FAILED x [build failed]"), None);
    }

    #[test]
    fn go119_plain_text_build_failure_beside_events() {
        let p = ok("FAIL\texample.com/m/bad [build failed]\n\
            {\"Action\":\"run\",\"Package\":\"example.com/m/ok\",\"Test\":\"TestA\"}\n\
            {\"Action\":\"pass\",\"Package\":\"example.com/m/ok\",\"Test\":\"TestA\"}\n\
            {\"Action\":\"pass\",\"Package\":\"example.com/m/ok\"}\n");
        assert_eq!(p.count, 1);
        assert_eq!(p.names, ["example.com/m/bad"]);
    }

    #[test]
    fn count_2_and_a_restarted_package_count_every_run() {
        let p = ok("{\"Action\":\"start\",\"Package\":\"p\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"start\",\"Package\":\"p\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"skip\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"T\"}\n\
            {\"Action\":\"pass\",\"Package\":\"p\"}\n");
        assert_eq!(p.count, 3);
        assert_eq!(p.names, ["p.T"]);
    }

    #[test]
    fn build_output_event_without_fail_event() {
        let p = ok(
            "{\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"FAIL\\tp [build failed]\\n\"}\n",
        );
        assert_eq!(p.names, ["p"]);
        assert_eq!(p.count, 0);
    }

    #[test]
    fn build_output_event_read_by_either_path_or_escaped_fails_its_package() {
        // The fast path's layout, serde's (a space after a colon), and a
        // value whose `FAIL` starts with an escape: each names the package.
        for line in [
            "{\"Time\":\"2026-01-01T00:00:00Z\",\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"FAIL\\tp [build failed]\\n\"}\n",
            "{\"Action\": \"output\",\"Package\":\"p\",\"Output\":\"FAIL\\tp [build failed]\\n\"}\n",
            "{\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"\\u0046AIL\\tp [setup failed]\\n\"}\n",
        ] {
            let p = ok(line);
            assert_eq!(p.names, ["p"], "{line}");
        }
        // Output that only mentions a build failure names nothing.
        let p = ok(
            "{\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"ok  \\tp [build failed]\\n\"}\n",
        );
        assert!(p.names.is_empty());
    }

    /// Ended runs' maps and names are reused: nothing of one package (or
    /// one run of it) is seen in the next, interleaved or not.
    #[test]
    fn reused_runs_keep_packages_and_reruns_apart() {
        let s = [
            ev("start", "p", None),
            ev("run", "p", Some("TestA")),
            ev("run", "p", Some("TestB")),
            ev("pass", "p", Some("TestA")),
            // p starts again with TestB open: that run is closed, TestA counted.
            ev("start", "p", None),
            ev("run", "p", Some("TestB")),
            ev("pass", "p", Some("TestB")),
            ev("pass", "p", None),
            // Same names in other packages, interleaved.
            ev("run", "q", Some("TestA")),
            ev("run", "r", Some("TestA")),
            ev("fail", "r", Some("TestA")),
            ev("run", "q", Some("TestB")),
            ev("pass", "q", Some("TestB")),
            ev("fail", "q", None),
            ev("fail", "r", None),
            // p once more, after its maps went to q and r.
            ev("run", "p", Some("TestC")),
            ev("pass", "p", None),
        ]
        .concat();
        let p = ok(&s);
        assert_eq!(p.names, ["r.TestA", "q.TestA"]);
        // p: TestA, TestB; q: TestB and the unfinished TestA; r: TestA.
        assert_eq!(p.count, 5);
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains(": p.TestC —"), "{}", p.notes[0]);
    }

    #[test]
    fn dependency_build_fail_is_linked_not_named_twice() {
        let p = ok("{\"ImportPath\":\"q\",\"Action\":\"build-fail\"}\n\
            {\"Action\":\"fail\",\"Package\":\"p1\",\"FailedBuild\":\"q\"}\n\
            {\"Action\":\"fail\",\"Package\":\"p2\",\"FailedBuild\":\"q\"}\n");
        assert_eq!(p.names, ["p1", "p2"]);
        let p = ok("{\"ImportPath\":\"p.test\",\"Action\":\"build-fail\"}\n");
        assert_eq!(p.names, ["p"]);
    }

    #[test]
    fn unfinished_test_in_failed_package_is_named_and_counted() {
        let p = ok(
            "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestOK\"}\n\
            {\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestOK\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestBoom\"}\n\
            {\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestBoom/sub\"}\n\
            {\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"panic: boom\\n\"}\n\
            {\"Action\":\"fail\",\"Package\":\"p\"}\n",
        );
        assert_eq!(p.count, 2);
        assert_eq!(p.names, ["p.TestBoom", "p.TestBoom/sub"]);
    }

    fn ev(a: &str, p: &str, t: Option<&str>) -> String {
        match t {
            Some(t) => format!("{{\"Action\":\"{a}\",\"Package\":\"{p}\",\"Test\":\"{t}\"}}\n"),
            None => format!("{{\"Action\":\"{a}\",\"Package\":\"{p}\"}}\n"),
        }
    }

    fn judged(s: &str) -> crate::report::Measurement {
        crate::report::judge(ok(s), crate::exec::Termination::Exited(0))
    }

    /// Go 1.19's glued `--- PASS` (see tests/reports_e2e.rs for the real run):
    /// the package passes, TestA never ends.
    #[test]
    fn unfinished_at_package_pass_is_named_not_counted_never_green() {
        let s = [
            ev("run", "p", Some("TestA")),
            "{\"Action\":\"output\",\"Package\":\"p\",\"Test\":\"TestA\",\"Output\":\"no newline--- PASS: TestA (0.00s)\\n\"}\n".into(),
            ev("run", "p", Some("TestB")),
            ev("pass", "p", Some("TestB")),
            ev("pass", "p", None),
        ]
        .concat();
        let p = ok(&s);
        assert_eq!(p.count, 1);
        assert!(p.names.is_empty());
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(
            p.notes[0].starts_with("unfinished-tests: 1 test(s)"),
            "{}",
            p.notes[0]
        );
        assert!(p.notes[0].contains(": p.TestA —"), "{}", p.notes[0]);
        let m = judged(&s);
        assert_eq!(m.verdict, crate::report::Verdict::MeasurementFailed);
        assert_eq!(m.failure, Some(FailureKind::UnfinishedTests));
    }

    #[test]
    fn unfinished_subtest_and_skipped_package_and_rerun_are_named() {
        // A subtest left open under a parent that passed.
        let s = [
            ev("run", "p", Some("T")),
            ev("run", "p", Some("T/sub")),
            ev("pass", "p", Some("T")),
            ev("pass", "p", None),
            // A test re-run (-count=2, no start event) before its first run ended.
            ev("run", "q", Some("U")),
            ev("run", "q", Some("U")),
            ev("pass", "q", Some("U")),
            ev("pass", "q", None),
            // A package reported as skipped with a test open.
            ev("run", "r", Some("V")),
            ev("skip", "r", None),
        ]
        .concat();
        let p = ok(&s);
        assert_eq!(p.count, 2);
        assert!(p.notes[0].contains("p.T/sub, q.U, r.V"), "{:?}", p.notes);
        assert_eq!(
            judged(&s).verdict,
            crate::report::Verdict::MeasurementFailed
        );
    }

    #[test]
    fn unfinished_beside_a_named_failure_is_red_and_still_named() {
        let s = [
            ev("run", "p", Some("TestA")),
            ev("pass", "p", None),
            ev("run", "q", Some("TestF")),
            ev("fail", "q", Some("TestF")),
            ev("fail", "q", None),
        ]
        .concat();
        let m = crate::report::judge(ok(&s), crate::exec::Termination::Exited(1));
        assert_eq!(m.verdict, crate::report::Verdict::Red);
        assert_eq!(m.named_tests.as_deref(), Some(&["q.TestF".to_string()][..]));
        assert!(
            m.notes
                .iter()
                .any(|n| n.starts_with("unfinished-tests") && n.contains("p.TestA"))
        );
    }

    /// Rule 6, in go1.19's own words: `ok` without a test started and
    /// without `PASS` (a TestMain that exits 0 or returns before
    /// `m.Run()`) is never green and is named; `PASS` with no test run (a
    /// `-run` that matches nothing, a package of helpers only) is green,
    /// and so is a package whose tests ran; `skip` (no test files) is too.
    #[test]
    fn a_package_ok_without_a_test_started_or_pass_said_never_ran_its_tests() {
        let never = [
            out("m/a", "", "ok  \tm/a\t0.002s\n"),
            ev("pass", "m/a", None),
        ]
        .concat();
        let ran = [
            ev("run", "m/b", Some("TestB")),
            ev("pass", "m/b", Some("TestB")),
            out("m/b", "", "PASS\n"),
            ev("pass", "m/b", None),
            out("m/c", "", "testing: warning: no tests to run\n"),
            out("m/c", "", "PASS\n"),
            out("m/c", "", "ok  \tm/c\t0.01s [no tests to run]\n"),
            ev("pass", "m/c", None),
            out("m/e", "", "?   \tm/e\t[no test files]\n"),
            ev("skip", "m/e", None),
        ]
        .concat();
        let m = judged(&ran);
        assert_eq!(m.verdict, crate::report::Verdict::Green, "{:?}", m.notes);
        let m = judged(&(ran.clone() + &never));
        assert_eq!(m.verdict, crate::report::Verdict::MeasurementFailed);
        assert_eq!(m.failure, Some(FailureKind::TestsNeverRan));
        assert_eq!(m.count, Some(1));
        assert!(
            m.notes
                .iter()
                .any(|n| n.starts_with("tests-never-ran: m/a ended")),
            "{:?}",
            m.notes
        );
        // A PASS said in one run does not carry over to the next.
        let m = judged(&(ran.clone() + &ran.replace("m/b", "m/a") + &never));
        assert_eq!(m.failure, Some(FailureKind::TestsNeverRan), "{:?}", m.notes);
        // Beside a named failure: red, the note stays.
        let red = [
            ev("run", "m/d", Some("TestD")),
            ev("fail", "m/d", Some("TestD")),
            ev("fail", "m/d", None),
        ]
        .concat();
        let m = crate::report::judge(
            ok(&(never.clone() + &red)),
            crate::exec::Termination::Exited(1),
        );
        assert_eq!(m.verdict, crate::report::Verdict::Red);
        assert!(
            m.notes
                .iter()
                .any(|n| n.starts_with("tests-never-ran: m/a"))
        );
        // Split: the shards' streams as one stream say the same.
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, &ran).unwrap();
        std::fs::write(&b, &never).unwrap();
        let u = crate::report::measure_go_union(&[&a, &b], crate::exec::Termination::Exited(0));
        assert_eq!(u.failure, Some(FailureKind::TestsNeverRan));
    }

    /// Rule 7: Go 1.19 writes only `FAIL\tp [build failed]` when every
    /// package it was given failed to build: still no event, so no
    /// measurement (the corpus's rule), but the words say the build failed
    /// and never advise printing go test -json; an empty stream with a
    /// failing exit is the suite's crash; plain text without a build
    /// failure keeps the go test -json advice.
    #[test]
    fn build_failures_alone_are_build_failures_and_an_empty_failing_stream_a_crash() {
        let e = parse_bytes(b"FAIL\tm/bf [build failed]\n", "stdout").unwrap_err();
        let words = e.to_string();
        assert!(matches!(e, ReportError::NoEvents { .. }), "{words}");
        assert!(words.contains("`m/bf` failed to build"), "{words}");
        assert!(words.contains("fix the build"), "{words}");
        assert!(!words.contains("go test -json`"), "{words}");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        let u = crate::report::measure_go_union(&[&empty], crate::exec::Termination::Exited(2));
        assert_eq!(u.failure, Some(FailureKind::Crash), "{:?}", u.notes);
        assert!(!u.notes[0].contains("go test -json`"), "{:?}", u.notes);
        let u = crate::report::measure_go_union(&[&empty], crate::exec::Termination::Exited(0));
        assert_eq!(u.failure, Some(FailureKind::ReportNoEvents));
        let e = parse_bytes(b"ok  \tm/a\t0.1s\n", "stdout").unwrap_err();
        assert!(
            matches!(e, ReportError::NoEvents { empty: false, .. }),
            "{e}"
        );
    }

    #[test]
    fn unfinished_at_package_fail_is_named_failing_and_counted() {
        let s = [
            ev("run", "p", Some("TestA")),
            ev("run", "p", Some("TestA")),
            ev("fail", "p", None),
        ]
        .concat();
        let p = ok(&s);
        // Both runs started and neither ended: both are named, both counted.
        assert_eq!(p.names, ["p.TestA", "p.TestA"]);
        assert_eq!(p.count, 2);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn open_at_stream_end_names_every_test() {
        let s = [
            ev("run", "p", Some("TestA")),
            ev("pass", "p", Some("TestA")),
            ev("run", "p", Some("TestB")),
            ev("run", "p", Some("TestB/x")),
        ]
        .concat();
        let p = ok(&s);
        assert_eq!(p.count, 1);
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(
            p.notes[0].starts_with("stream-ended-early: the stream ends with 2 test(s) still running in p: p.TestB, p.TestB/x"),
            "{}",
            p.notes[0]
        );
        let m = judged(&s);
        assert_eq!(m.failure, Some(FailureKind::StreamEndedEarly));
    }

    #[test]
    fn json_arrays_and_objects_without_action_are_not_events() {
        let e = parse_bytes(
            b"[\"run\",\"p\",\"T\"]\n{\"Package\":\"p\"}\nhello\n",
            "stdout",
        )
        .unwrap_err();
        assert!(matches!(e, ReportError::NoEvents { .. }), "{e}");
        assert!(matches!(
            parse_bytes(b"", "stdout").unwrap_err(),
            ReportError::NoEvents { .. }
        ));
    }

    #[test]
    fn a_build_failure_told_by_text_ends_its_package_and_a_printed_one_fails_nothing() {
        // Go 1.19: a build failure is only a text line; a setup failure too.
        let stream = concat!(
            "FAIL\tp/bf [build failed]\n",
            "FAIL\tp/cyc [setup failed]\n",
            "{\"Action\":\"run\",\"Package\":\"p/pr\",\"Test\":\"TestPrint\"}\n",
            // test2json gives a `FAIL` line to the package, not the test.
            "{\"Action\":\"output\",\"Package\":\"p/pr\",\"Output\":\"FAIL\\tp/pr [build failed]\\n\"}\n",
            "{\"Action\":\"pass\",\"Package\":\"p/pr\",\"Test\":\"TestPrint\",\"Elapsed\":0}\n",
            "{\"Action\":\"pass\",\"Package\":\"p/pr\",\"Elapsed\":0.5}\n",
        );
        let p = parse_bytes(stream.as_bytes(), "stdout").unwrap();
        assert_eq!(
            p.names,
            ["p/bf", "p/cyc"],
            "p/pr passed: its text fails nothing"
        );
        assert_eq!(p.count, 1);
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("stdout");
        std::fs::write(&f, stream).unwrap();
        let ends: Vec<(String, String, Option<f64>)> = package_ends(&f, "stdout")
            .unwrap()
            .into_iter()
            .map(|e| (e.package, e.action, e.elapsed))
            .collect();
        assert_eq!(
            ends,
            [
                ("p/pr".into(), "pass".into(), Some(0.5)),
                ("p/bf".into(), "fail".into(), None),
                ("p/cyc".into(), "fail".into(), None),
            ]
        );
        // A stream of text alone has no event: no measurement (rule 7),
        // saying which package failed.
        std::fs::write(&f, "FAIL\tp/cyc [setup failed]\n").unwrap();
        let e = parse_file(&f, "stdout").unwrap_err();
        assert!(e.to_string().contains("`p/cyc` failed"), "{e}");
    }

    #[test]
    fn streams_parsed_as_one_are_judged_as_their_union() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::fs::write(&a, "FAIL\tp/cyc [setup failed]\n").unwrap();
        std::fs::write(
            &b,
            concat!(
                "{\"Action\":\"run\",\"Package\":\"p/a\",\"Test\":\"TestA\"}\n",
                "{\"Action\":\"pass\",\"Package\":\"p/a\",\"Test\":\"TestA\"}\n",
                "{\"Action\":\"pass\",\"Package\":\"p/a\"}\n",
            ),
        )
        .unwrap();
        let u = parse_files(&[a.as_path(), b.as_path()], "shards").unwrap();
        let mut one = std::fs::read(&a).unwrap();
        one.extend(std::fs::read(&b).unwrap());
        assert_eq!(u, parse_bytes(&one, "shards").unwrap());
        assert_eq!((u.count, u.names), (1, vec!["p/cyc".to_string()]));
    }

    #[test]
    fn package_ends_lists_every_package_terminal_event_with_its_seconds() {
        let stream = concat!(
            "{\"Action\":\"run\",\"Package\":\"p/a\",\"Test\":\"TestX\"}\n",
            "{\"Action\":\"pass\",\"Package\":\"p/a\",\"Test\":\"TestX\",\"Elapsed\":2}\n",
            "{\"Action\":\"pass\",\"Package\":\"p/a\",\"Elapsed\":2.5}\n",
            "not json\n",
            "{\"Action\":\"skip\",\"Package\":\"p/b\"}\n",
            "{\"Action\":\"fail\",\"Package\":\"p/c\",\"Elapsed\":0.1}\n",
            "{\"Action\":\"pass\",\"Package\":\"p/a\",\"Elapsed\":1}\n",
        );
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("stdout");
        std::fs::write(&f, stream).unwrap();
        let ends = package_ends(&f, "stdout").unwrap();
        let got: Vec<(&str, &str, Option<f64>)> = ends
            .iter()
            .map(|e| (e.package.as_str(), e.action.as_str(), e.elapsed))
            .collect();
        assert_eq!(
            got,
            [
                ("p/a", "pass", Some(2.5)),
                ("p/b", "skip", None),
                ("p/c", "fail", Some(0.1)),
                ("p/a", "pass", Some(1.0)),
            ]
        );
    }

    #[test]
    fn overlong_line_is_skipped_without_buffering_it() {
        let mut s = Vec::new();
        s.extend_from_slice(b"{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}\n");
        s.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        s.extend_from_slice(b"\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"T\"}\n");
        let p = parse_bytes(&s, "stdout").unwrap();
        assert_eq!(p.count, 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_bytes(&bytes, "fuzz");
        }

        /// The fast path accepts only what serde accepts, and reads it as
        /// serde does (lines of test2json's layout, mutated byte by byte).
        #[test]
        fn fast_path_agrees_with_serde(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "{", "}", ",", ":", "\"", "\"Time\":", "\"Action\":", "\"Package\":", "\"Test\":",
                "\"Output\":", "\"Elapsed\":", "\"ImportPath\":", "\"run\"", "\"p\"", "\"T/a\"",
                "\"a\\nb\\u00e9\\\"c\"", "\"x\\q\"", "\"\\u12\"", "\"é\"", "\"\t\"", "0", "-0.5e+3", "01",
                "1.", "1e", "null", " ", "\\", "\"\u{7f}\"", "\"Action\":\"pass\"",
            ]), 0..14),
            cut in 0usize..200,
            byte in proptest::prelude::any::<u8>(),
        ) {
            let mut line = parts.concat().into_bytes();
            for l in [line.clone(), {
                if !line.is_empty() { let n = line.len(); line[cut % n] = byte; }
                line.clone()
            }] {
                let serde = serde_json::from_slice::<Event<'_>>(&l);
                if let Some(f) = fast_event(&l) {
                    let e = serde.expect("the fast path accepted what serde refuses");
                    proptest::prop_assert_eq!(e.action.as_deref(), Some(f.action));
                    proptest::prop_assert_eq!(e.package.as_deref(), f.package);
                    proptest::prop_assert_eq!(e.test.as_deref(), f.test);
                    proptest::prop_assert!(e.import_path.is_none() && e.failed_build.is_none());
                    proptest::prop_assert_eq!(output_span(&memchr::memmem::Finder::new(b"\"Output\":\""), &l), f.output);
                }
            }
        }

        #[test]
        fn never_panics_on_event_soup(lines in proptest::collection::vec((
            proptest::sample::select(vec!["run", "pass", "fail", "skip", "output", "pause", "cont", "start", "build-fail", "build-output", "bench"]),
            proptest::option::of(proptest::sample::select(vec!["p", "q", "p/x", ""])),
            proptest::option::of(proptest::sample::select(vec!["T", "T/a", "T/a/b", "U", ""])),
            proptest::option::of(proptest::sample::select(vec!["p [p.test]", "p.test", "q", " [", "]", ""])),
            proptest::bool::ANY,
        ), 0..40)) {
            let mut s = String::new();
            for (a, p, t, ip, fb) in lines {
                let mut o = serde_json::Map::new();
                o.insert("Action".into(), a.into());
                if let Some(p) = p { o.insert("Package".into(), p.into()); }
                if let Some(t) = t { o.insert("Test".into(), t.into()); }
                if let Some(ip) = ip {
                    o.insert("ImportPath".into(), ip.into());
                    if fb { o.insert("FailedBuild".into(), ip.into()); }
                }
                if a == "output" && fb { o.insert("Output".into(), "FAIL\tp [build failed]\n".into()); }
                s.push_str(&serde_json::Value::Object(o).to_string());
                s.push('\n');
            }
            let _ = parse_bytes(s.as_bytes(), "soup");
        }
    }
}
