//! xml: the XML 1.0 well-formedness rules saphan holds a report to, apart
//! from what the report means (that is [`super::junit`]).
//!
//! quick-xml tokenizes and matches end tags to start tags; it checks less
//! than XML 1.0 asks, so what it lets through is checked here:
//!
//! * characters XML forbids anywhere (§2.2), before quick-xml sees them
//!   ([`Window`], one vectorizable pass per read);
//! * attributes (§3.1, §3.3.3, §4.1): whitespace before each
//!   `name="value"`, Names, no duplicates, no `<` in values, every `&` a
//!   known reference — one fused scan per element that also hands the
//!   values' spans to the reader ([`scan_attrs`]), so nothing is parsed
//!   twice; for a tag of plain shape the same scan also finds the tag's
//!   end ([`start_tag`]), and quick-xml does not read it at all;
//! * names (§2.3), references (§4.1), comments (§2.5), processing
//!   instructions (§2.6), the XML declaration (§2.8), `]]>` in text (§2.4).
//!
//! Every check returns why it refused as a sentence for the operator.

use quick_xml::XmlVersion;
use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesDecl, BytesPI};
use quick_xml::name::QName;
use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;

/// Is `b` XML whitespace (§2.3 `S`)?
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Is `s` only XML whitespace?
pub(super) fn is_blank(s: &str) -> bool {
    s.bytes().all(is_ws)
}

/// A text run: refused if it holds `]]>` ([`check_text`]); else whether it
/// is only whitespace. The short runs between elements take one loop.
pub(super) fn text_is_blank(t: &str) -> Result<bool, &'static str> {
    let b = t.as_bytes();
    if b.len() <= 32 {
        let mut blank = true;
        for (k, &c) in b.iter().enumerate() {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b']' if b[k..].starts_with(b"]]>") => return Err(CDATA_END),
                _ => blank = false,
            }
        }
        return Ok(blank);
    }
    check_text(b)?;
    Ok(is_blank(t))
}

const CDATA_END: &str = "`]]>` in text (XML needs `]]&gt;`)";

/// One attribute of an element, as byte ranges into the element's raw
/// attribute text (everything after its name).
#[derive(Clone, Debug)]
pub(super) struct AttrSpan {
    pub key: Range<usize>,
    /// The value between its quotes, still escaped.
    pub value: Range<usize>,
    /// The value holds no `&` and no tab, CR or LF: it is its own
    /// normalized form.
    pub plain: bool,
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The first byte at or after `i` in an attribute value quoted by `q` that
/// ends a plain run: `q`, `<`, `&` or a control (tab, CR and LF are
/// normalized; the others never get this far, [`Window`] refuses them).
/// Eight bytes at a time: the lowest flagged byte of each test is exact.
#[inline]
fn value_stop(raw: &[u8], mut i: usize, q: u8) -> usize {
    let zero = |x: u64| x.wrapping_sub(LO) & !x;
    let (qw, lt, amp) = (LO * q as u64, LO * b'<' as u64, LO * b'&' as u64);
    while i + 8 <= raw.len() {
        let w = u64::from_le_bytes(raw[i..i + 8].try_into().unwrap_or([0; 8]));
        let m =
            (zero(w ^ qw) | zero(w ^ lt) | zero(w ^ amp) | (w.wrapping_sub(LO * 0x20) & !w)) & HI;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + raw[i..]
        .iter()
        .position(|&c| c == q || c == b'<' || c == b'&' || c < 0x20)
        .unwrap_or(raw.len() - i)
}

/// The end of the run of ASCII lowercase letters at `i`, eight bytes at a
/// time (most attribute names are such a run: `name`, `classname`, `time`).
/// Bytes are masked to seven bits first, so no sum carries into the next
/// byte; a byte with its top bit set is never a letter.
#[inline]
fn lowercase_run(raw: &[u8], mut i: usize) -> usize {
    while i + 8 <= raw.len() {
        let w = u64::from_le_bytes(raw[i..i + 8].try_into().unwrap_or([0; 8]));
        let w7 = w & !HI;
        // Top bit of each byte: at least `a`, and not past `z`, and ASCII.
        let lower = w7.wrapping_add(LO * (0x80 - b'a' as u64))
            & !w7.wrapping_add(LO * (0x80 - b'z' as u64 - 1))
            & !w
            & HI;
        let run = (!lower & HI).trailing_zeros() / 8;
        i += run as usize;
        if run < 8 {
            break;
        }
    }
    i
}

/// Check an element's attributes and note where each one lies in `out`
/// (cleared first). `raw` is everything after the element name. One pass
/// over the bytes; quick-xml checks less than this (it lets `<` and a
/// missing separator through), so it is not asked.
pub(super) fn scan_attrs(raw: &[u8], out: &mut Vec<AttrSpan>) -> Result<(), String> {
    scan::<false>(raw, out).map(|_| ())
}

/// [`scan_attrs`] over `raw`, or with `TAG` over what follows an element's
/// name up to the tag's end: then a `>` or `/>` where an attribute could
/// begin ends the attributes, and the answer is where (the offset of that
/// `>` or `/`) and whether it was `/>`; running out of bytes first is an
/// error with no message (the caller hands the tag to quick-xml).
#[inline]
fn scan<const TAG: bool>(raw: &[u8], out: &mut Vec<AttrSpan>) -> Result<(usize, bool), String> {
    out.clear();
    let mut i = 0;
    let n = raw.len();
    loop {
        let before = i;
        while i < n && is_ws(raw[i]) {
            i += 1;
        }
        if i == n {
            return if TAG {
                Err(String::new())
            } else {
                Ok((n, false))
            };
        }
        if TAG && raw[i] == b'>' {
            return Ok((i, false));
        }
        if TAG && raw[i] == b'/' && raw.get(i + 1) == Some(&b'>') {
            return Ok((i, true));
        }
        if i == before {
            return Err(format!(
                "`{}` must be separated from what precedes it by whitespace",
                show(&raw[i..])
            ));
        }
        // The usual ASCII name is scanned and validated in one pass; a
        // name with other bytes ends at whitespace or `=` and is checked whole.
        let start = i;
        i = lowercase_run(raw, i);
        while i < n && ASCII_NAME[raw[i] as usize] & 2 != 0 {
            i += 1;
        }
        if i < n && !is_ws(raw[i]) && raw[i] != b'=' {
            while i < n && !is_ws(raw[i]) && raw[i] != b'=' {
                i += 1;
            }
            let key = &raw[start..i];
            if !is_name(key) {
                return Err(format!("`{}` is not an XML name", show(key)));
            }
        } else if i == start || ASCII_NAME[raw[start] as usize] & 1 == 0 {
            return Err(format!("`{}` is not an XML name", show(&raw[start..i])));
        }
        let key = &raw[start..i];
        // Keys are short: a byte loop, not a call per earlier attribute.
        if out
            .iter()
            .any(|a| a.key.len() == key.len() && raw[a.key.clone()].iter().eq(key.iter()))
        {
            return Err(format!("duplicate attribute `{}`", show(key)));
        }
        while i < n && is_ws(raw[i]) {
            i += 1;
        }
        if i == n || raw[i] != b'=' {
            return Err(format!("attribute `{}` has no `=\"value\"`", show(key)));
        }
        i += 1;
        while i < n && is_ws(raw[i]) {
            i += 1;
        }
        if i == n || !matches!(raw[i], b'"' | b'\'') {
            return Err(format!(
                "the value of `{}` must be enclosed in `\"` or `'`",
                show(key)
            ));
        }
        let q = raw[i];
        i += 1;
        let vstart = i;
        let mut plain = true;
        // One pass over the value, eight bytes at a time, stopping at the
        // closing quote, `<`, `&` and whitespace to normalize (values are
        // short: this beats setting up a vector search per value).
        loop {
            i = value_stop(raw, i, q);
            if i == n {
                return Err(format!("the value of `{}` is not closed", show(key)));
            }
            match raw[i] {
                c if c == q => break,
                b'<' => {
                    return Err(format!(
                        "the value of `{}` holds a raw `<` (XML needs `&lt;`)",
                        show(key)
                    ));
                }
                b'&' => {
                    plain = false;
                    // The `;` must come before the closing quote.
                    let semi = memchr::memchr2(b';', q, &raw[i..]).filter(|&k| raw[i + k] == b';');
                    let Some(semi) = semi else {
                        return Err(format!(
                            "the value of `{}` holds a bare `&` (XML needs `&amp;`)",
                            show(key)
                        ));
                    };
                    let r = &raw[i + 1..i + semi];
                    check_reference(r, false)
                        .map_err(|why| format!("in `{}`: {why}", show(key)))?;
                    i += semi + 1;
                }
                b'\t' | b'\n' | b'\r' => {
                    plain = false;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        out.push(AttrSpan {
            key: start..start + key.len(),
            value: vstart..i,
            plain,
        });
        i += 1;
    }
}

/// The value of an attribute [`scan_attrs`] accepted, unescaped and
/// normalized (XML 1.0 §3.3.3); borrowed when it is plain.
pub(super) fn attr_value<'a>(raw: &'a str, a: &AttrSpan) -> Result<Cow<'a, str>, String> {
    let v = &raw[a.value.clone()];
    if a.plain {
        return Ok(Cow::Borrowed(v));
    }
    Attribute {
        key: QName(&raw[a.key.clone()]),
        value: Cow::Borrowed(v),
    }
    .normalized_value(XmlVersion::Implicit1_0)
    .map_err(|e| e.to_string())
}

/// A start or empty tag read whole by [`start_tag`], its attributes checked as [`scan_attrs`] checks them and
/// their spans in `out`.
#[derive(Debug)]
pub(super) struct StartTag<'a> {
    /// The element's name.
    pub name: &'a str,
    /// Everything after the name up to `>` or `/>`, as quick-xml's
    /// `attributes_raw` gives it: `out`'s spans index it.
    pub attrs: &'a str,
    /// It was `<name …/>`.
    pub empty: bool,
    /// Its length in bytes, through its `>`.
    pub len: usize,
}

/// The start or empty tag at the front of `s` (`s` begins with `<`) when
/// its shape is plain: an ASCII name, attributes [`scan_attrs`] accepts,
/// and its `>` inside `s`. Then it is exactly the event quick-xml would
/// read there (its first `>` outside quotes ends the tag; the name is what
/// precedes the first whitespace), read in one pass instead of two.
/// `None` for anything else — a tag the window cuts, any name or attribute
/// that does not pass — and quick-xml reads it, so every refusal keeps its
/// words and its position.
pub(super) fn start_tag<'a>(s: &'a str, out: &mut Vec<AttrSpan>) -> Option<StartTag<'a>> {
    let b = s.as_bytes();
    if ASCII_NAME[*b.get(1)? as usize] & 1 == 0 {
        return None;
    }
    let mut i = lowercase_run(b, 1);
    while i < b.len() && ASCII_NAME[b[i] as usize] & 2 != 0 {
        i += 1;
    }
    let after = *b.get(i)?;
    if !(is_ws(after) || after == b'>' || after == b'/') {
        return None;
    }
    let (at, empty) = scan::<true>(&b[i..], out).ok()?;
    Some(StartTag {
        name: s.get(1..i)?,
        attrs: s.get(i..i + at)?,
        empty,
        len: i + at + if empty { 2 } else { 1 },
    })
}

/// The longest start of `b` that is UTF-8 (all of it, or up to the first
/// byte that is not: quick-xml refuses that one when it reaches it).
pub(super) fn utf8_prefix(b: &[u8]) -> &str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// The length of the run of XML whitespace at the front of `b`.
pub(super) fn blank_run(b: &[u8]) -> usize {
    b.iter().position(|&c| !is_ws(c)).unwrap_or(b.len())
}

/// The span of attribute `key`, if the element has it.
pub(super) fn find<'s>(raw: &str, spans: &'s [AttrSpan], key: &str) -> Option<&'s AttrSpan> {
    spans.iter().find(|a| &raw[a.key.clone()] == key)
}

/// Bytes for an error message (lossy, at most 40 bytes).
pub(super) fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned()
}

/// Is `c` an XML 1.0 `Char` (§2.2)?
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// XML 1.0 `NameStartChar` (§2.3).
fn is_name_start(c: char) -> bool {
    matches!(c, ':' | 'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}'
        | '\u{F8}'..='\u{2FF}' | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}' | '\u{200C}'..='\u{200D}'
        | '\u{2070}'..='\u{218F}' | '\u{2C00}'..='\u{2FEF}' | '\u{3001}'..='\u{D7FF}'
        | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}' | '\u{10000}'..='\u{EFFFF}')
}

/// XML 1.0 `NameChar` (§2.3).
fn is_name_char(c: char) -> bool {
    is_name_start(c)
        || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// ASCII bytes that may start a Name (bit 0) or continue one (bit 1);
/// other bytes are 0 (names with them take the full check).
const ASCII_NAME: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        let start = c == b':' || c == b'_' || c.is_ascii_alphabetic();
        let more = start || c == b'-' || c == b'.' || c.is_ascii_digit();
        t[i] = (start as u8) | ((more as u8) << 1);
        i += 1;
    }
    t
};

/// Is `b` an XML 1.0 `Name` (§2.3)? ASCII names take a table lookup per byte.
pub(super) fn is_name(b: &[u8]) -> bool {
    let Some(&first) = b.first() else {
        return false;
    };
    if first < 0x80 {
        if ASCII_NAME[first as usize] & 1 == 0 {
            return false;
        }
        let rest = &b[1..];
        match rest
            .iter()
            .position(|&c| c >= 0x80 || ASCII_NAME[c as usize] & 2 == 0)
        {
            None => return true,
            Some(k) if rest[k] < 0x80 => return false,
            Some(_) => {}
        }
    }
    let Ok(s) = std::str::from_utf8(b) else {
        return false;
    };
    let mut cs = s.chars();
    cs.next().is_some_and(is_name_start) && cs.all(is_name_char)
}

/// A reference's inside (`amp`, `#65`, `#x41`): a character reference must
/// name an XML character; an entity must be a Name, and one of the five
/// predefined entities unless `declared_ok` (a DOCTYPE may declare it).
pub(super) fn check_reference(r: &[u8], declared_ok: bool) -> Result<(), String> {
    if let Some(num) = r.strip_prefix(b"#") {
        let (digits, radix) = match num.strip_prefix(b"x") {
            Some(h) => (h, 16),
            None => (num, 10),
        };
        let c = std::str::from_utf8(digits)
            .ok()
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u32::from_str_radix(d, radix).ok())
            .and_then(char::from_u32);
        return match c {
            Some(c) if is_xml_char(c) => Ok(()),
            _ => Err(format!("`&{};` is not a character XML allows", show(r))),
        };
    }
    if !is_name(r) {
        return Err(format!("`&{};` is not a reference", show(r)));
    }
    if declared_ok || matches!(r, b"lt" | b"gt" | b"amp" | b"apos" | b"quot") {
        Ok(())
    } else {
        Err(format!("unknown reference `&{};`", show(r)))
    }
}

/// A window onto a report as it is read: a byte range of the file that
/// quick-xml parses as a slice (no copy per event), refilled from the
/// source as parsing reaches its end.
///
/// quick-xml's slice reader sees one window at a time; where an event runs
/// past the window's end, the caller keeps the bytes from that event's start
/// and asks for a refill ([`Window::refill`]), which moves them to the front
/// and reads on. So the window holds at most one buffer plus the event being
/// read: memory stays flat however large the report, and grows only with
/// the longest single event (as any streaming reader's does).
///
/// Every byte read is checked once for the characters XML 1.0 forbids
/// everywhere in a document (§2.2): C0 controls other than tab, LF and CR,
/// and U+FFFE / U+FFFF. The window ends before the first one, which is
/// refused when parsing reaches it. (quick-xml refuses bytes that are not
/// UTF-8; the window ends on a character boundary until the source is
/// exhausted, so a character cut by a read never looks broken.)
pub(super) struct Window<R> {
    src: R,
    /// `data[..end]` holds file bytes `base..base + end`.
    data: Vec<u8>,
    end: usize,
    /// Parsing may go up to here: `end`, less a character the read cut.
    limit: usize,
    base: u64,
    /// The source is exhausted: everything up to `end` is all there is.
    eof: bool,
    /// The size the window starts at and shrinks back to (bytes).
    cap: usize,
    /// The window's size now (bytes): `cap`, doubled for each time one
    /// event did not fit. `data` is zero-filled one `cap` at a time as
    /// reads reach it, so a size never read into costs no memory.
    size: usize,
    /// A forbidden character at `limit`: the refill that would read past
    /// it fails with this instead, so it is refused where parsing reaches
    /// it, whatever the window's size.
    bad: Option<(u64, String)>,
}

/// Why a [`Window`] could not be refilled.
#[derive(Debug)]
pub(super) enum Refill {
    Io(std::io::Error),
    /// A character XML forbids, at this file offset.
    Forbidden {
        offset: u64,
        why: String,
    },
}

/// A window that has grown past this many bytes for one long event is
/// given back once that event is behind it.
const KEEP_WINDOW: usize = 1024 * 1024;

impl<R: Read> Window<R> {
    /// An empty window of `cap` bytes (at least 1) over `src`; call
    /// [`Window::refill`]`(0)` before the first parse.
    pub fn new(src: R, cap: usize) -> Window<R> {
        Window {
            src,
            data: Vec::new(),
            end: 0,
            limit: 0,
            base: 0,
            eof: false,
            cap: cap.max(1),
            size: cap.max(1),
            bad: None,
        }
    }

    /// The bytes to parse now.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.limit]
    }

    /// The file offset of `bytes()[0]`.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Nothing more will come: `bytes()` runs to the end of the file.
    pub fn at_eof(&self) -> bool {
        self.eof && self.bad.is_none()
    }

    /// At least `n` bytes from `bytes()[at]` on are here (or all there is).
    pub fn holds(&self, at: usize, n: usize) -> bool {
        self.at_eof() || self.limit - at >= n
    }

    /// Drop `bytes()[..keep]`, move the rest to the front and read on until
    /// the window is full or the source is exhausted. With nothing to drop
    /// (`keep == 0`) and the window full, it doubles: the event being read
    /// is longer than the window.
    pub fn refill(&mut self, keep: usize) -> Result<(), Refill> {
        debug_assert!(keep <= self.limit);
        if let Some((offset, why)) = self.bad.take() {
            return Err(Refill::Forbidden { offset, why });
        }
        if keep == 0 && self.end >= self.size {
            self.size *= 2;
        } else if keep > 0 {
            self.data.copy_within(keep..self.end, 0);
            self.end -= keep;
            self.base += keep as u64;
            if self.size > KEEP_WINDOW.max(self.cap) && self.end < self.cap {
                self.size = self.cap;
                self.data.truncate(self.cap);
                self.data.shrink_to_fit();
            }
        }
        let fresh = self.end;
        while self.end < self.size && !self.eof {
            if self.end == self.data.len() {
                let more = (self.data.len() + self.cap).min(self.size);
                self.data.resize(more, 0);
            }
            match self.src.read(&mut self.data[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Refill::Io(e)),
            }
        }
        // From two bytes back: a U+FFFE begun by the last read. (Those bytes
        // are still here: a character cut by a read lies past `limit`, and
        // nothing past `limit` is dropped.)
        let from = fresh.saturating_sub(2);
        self.limit = if self.eof {
            self.end
        } else {
            char_boundary(&self.data[..self.end])
        };
        if let Some((at, why)) = forbidden(&self.data[from..self.end]) {
            self.limit = from + at;
            self.bad = Some((self.base + self.limit as u64, why));
        }
        Ok(())
    }
}

/// The end of `b` less a UTF-8 character its last bytes begin but do not
/// finish (bytes that could never be UTF-8 are left for quick-xml to refuse).
fn char_boundary(b: &[u8]) -> usize {
    let n = b.len();
    for i in (n.saturating_sub(3)..n).rev() {
        let c = b[i];
        if c < 0x80 {
            return n;
        }
        if c >= 0xC0 {
            let need = if c < 0xE0 {
                2
            } else if c < 0xF0 {
                3
            } else {
                4
            };
            return if i + need > n { i } else { n };
        }
    }
    n
}

/// Offset and description of the first forbidden character in `b`.
fn forbidden(b: &[u8]) -> Option<(usize, String)> {
    // A control other than tab, LF and CR: 1, else 0. (`&` not `&&`: no
    // branch per byte, so the compiler uses vector compares.)
    let ctl =
        |c: u8| (c < 0x20) as u8 & (c != b'\t') as u8 & (c != b'\n') as u8 & (c != b'\r') as u8;
    // Fast: one vectorizable pass that notes any control (bit 0) and any
    // non-ASCII byte (bit 7); the exact positions are looked for only then.
    let flag = |c: u8| ctl(c) | (c & 0x80);
    let mut words = b.chunks_exact(64);
    let mut seen = 0u8;
    for w in &mut words {
        let w: &[u8; 64] = w.try_into().unwrap_or(&[0; 64]);
        seen |= w.iter().fold(0u8, |a, &c| a | flag(c));
    }
    seen |= words.remainder().iter().fold(0u8, |a, &c| a | flag(c));
    let ctl_at = if seen & 1 != 0 {
        b.iter().position(|&c| ctl(c) != 0)
    } else {
        None
    };
    // U+FFFE / U+FFFF are EF BF BE / EF BF BF.
    let fffe_at = if seen & 0x80 != 0 {
        memchr::memmem::find_iter(b, b"\xEF\xBF")
            .find(|&k| b.get(k + 2).is_some_and(|&x| x == 0xBE || x == 0xBF))
    } else {
        None
    };
    match (ctl_at, fffe_at) {
        (Some(c), f) if f.is_none_or(|f| c < f) => Some((
            c,
            format!("control character U+{:04X} is not allowed in XML", b[c]),
        )),
        (_, Some(f)) => Some((f, "U+FFFE/U+FFFF is not allowed in XML".to_string())),
        _ => None,
    }
}

/// `]]>` may not stand in text (§2.4). Most text (the whitespace between
/// elements) has no `]`: memchr first, the substring search only then.
pub(super) fn check_text(t: &[u8]) -> Result<(), &'static str> {
    if memchr::memchr(b']', t).is_some() && memchr::memmem::find(t, b"]]>").is_some() {
        return Err(CDATA_END);
    }
    Ok(())
}

/// A comment may not hold `--` or end with `-` (§2.5).
pub(super) fn check_comment(c: &str) -> Result<(), &'static str> {
    if memchr::memmem::find(c.as_bytes(), b"--").is_some() || c.ends_with('-') {
        return Err("a comment may not hold `--` or end with `-`");
    }
    Ok(())
}

/// A processing instruction's target is a Name other than `xml` (§2.6).
pub(super) fn check_pi(p: &BytesPI<'_>) -> Result<(), String> {
    let t = p.target();
    if !is_name(t.as_bytes()) || t.eq_ignore_ascii_case("xml") {
        return Err(format!(
            "`<?{}` is not a processing instruction (the target must be a name other than xml)",
            show(t.as_bytes())
        ));
    }
    Ok(())
}

/// The XML declaration (§2.8): only at the very start (`at_start`: it is
/// the first event and begins at most after a byte-order mark), `version`
/// first and `1.x`, `encoding` an encoding name, `standalone` yes or no.
pub(super) fn check_decl(d: &BytesDecl<'_>, at_start: bool) -> Result<(), &'static str> {
    let version_ok = d.version().is_ok_and(|v| {
        v.strip_prefix("1.")
            .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
    });
    let standalone_ok = match d.standalone() {
        None => true,
        Some(Ok(v)) => v == "yes" || v == "no",
        Some(Err(_)) => false,
    };
    let encoding_ok = match d.encoding() {
        None => true,
        Some(Ok(v)) => {
            let b = v.as_bytes();
            b.first().is_some_and(u8::is_ascii_alphabetic)
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        }
        Some(Err(_)) => false,
    };
    if !at_start {
        Err("an XML declaration is allowed only at the very start of the file")
    } else if !version_ok {
        Err("the XML declaration needs version=\"1.x\" first")
    } else if !standalone_ok {
        Err("the XML declaration's standalone must be \"yes\" or \"no\"")
    } else if !encoding_ok {
        Err("the XML declaration's encoding is not an encoding name")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quick_xml::events::attributes::Attributes;

    fn check_attr_run(raw: &[u8]) -> Result<(), String> {
        scan_attrs(raw, &mut Vec::new())
    }

    #[test]
    fn attribute_check_accepts_and_refuses() {
        for raw in [
            " a='1' b=\"2\"",
            "",
            "  ",
            " a = '1'\n b='x y'",
            " a='&amp;&#x41;&#65;'",
            " a='\"&lt;\"' b=\"'&amp;'\"",
            " é='1' a·b='2' _:x.y-z='3'",
        ] {
            assert!(check_attr_run(raw.as_bytes()).is_ok(), "{raw:?}");
        }
        for raw in [
            " a",
            " a=1",
            " a='1' a='2'",
            " a='<'",
            " a='&amp'",
            " a='&#1;'",
            " a='&#xFFFE;'",
            " a='&bogus;'",
            " 1a='1'",
            " a='1'b='2'",
            " a='1",
            " /",
            " ='1'",
            " a='&amp' b='x;'",
            " a='x&' b=';'",
            " a='&lt;<'",
            " ·a='1'",
            " a\"b='1'",
            " é\"='1'",
            " a='1' é='2' é='3'",
        ] {
            assert!(check_attr_run(raw.as_bytes()).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn spans_name_keys_and_plain_values() {
        let raw = " a='1' b=\"x&amp;y\" c='p\tq'";
        let mut spans = Vec::new();
        scan_attrs(raw.as_bytes(), &mut spans).unwrap();
        let got: Vec<(&str, String, bool)> = spans
            .iter()
            .map(|s| {
                (
                    &raw[s.key.clone()],
                    attr_value(raw, s).unwrap().into_owned(),
                    s.plain,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", "1".to_string(), true),
                ("b", "x&y".to_string(), false),
                ("c", "p q".to_string(), false)
            ]
        );
        assert_eq!(
            find(raw, &spans, "b").map(|s| s.value.clone()),
            Some(10..17)
        );
        assert!(find(raw, &spans, "z").is_none());
    }

    #[test]
    fn lowercase_runs_stop_at_the_first_other_byte() {
        // Exact where eight bytes remain; the byte loop after it does the rest.
        for s in [
            "name=",
            "classname=\"",
            "abcdefgh",
            "abcdefghijklmnopq=",
            "aZ",
            "a`",
            "a{",
            "az@",
            "xé",
            "",
            "timestamp ",
            "a\u{e1}",
            "zzzzzzzzzzzzzzzz",
            "abcdefg\u{e1}abc",
        ] {
            let b = s.as_bytes();
            let want = b
                .iter()
                .position(|c| !c.is_ascii_lowercase())
                .unwrap_or(b.len());
            let got = lowercase_run(b, 0);
            assert!(
                got == want || (got < want && got + 8 > b.len()),
                "{s:?}: {got} for {want}"
            );
        }
        for c in 0..=255u8 {
            let mut b = [b'q'; 16];
            b[3] = c;
            let want = if c.is_ascii_lowercase() { 16 } else { 3 };
            assert_eq!(lowercase_run(&b, 0), want, "byte {c:#04x}");
        }
    }

    #[test]
    fn text_runs_short_and_long() {
        assert_eq!(text_is_blank("\n  \t"), Ok(true));
        assert_eq!(text_is_blank(" x "), Ok(false));
        assert!(text_is_blank("a]]>b").is_err());
        assert_eq!(text_is_blank("a]]b ]>"), Ok(false));
        let long = format!("{}]]>", " ".repeat(40));
        assert!(text_is_blank(&long).is_err());
        assert_eq!(text_is_blank(&" ".repeat(40)), Ok(true));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        #[test]
        fn short_text_runs_read_as_the_byte_rules_say(t in "[ \t\r\n\\]>x\u{0}\u{80}é]{0,40}") {
            let want = if t.contains("]]>") {
                Err(CDATA_END)
            } else {
                Ok(is_blank(&t))
            };
            proptest::prop_assert_eq!(text_is_blank(&t), want);
        }

        #[test]
        fn fast_attribute_path_never_accepts_what_quick_xml_rejects(raw in "[ a-c=\"'<&;/x\t\n\r1é·]{0,24}|( [ab]=\"[x&;lt#\t\n\r']{0,12}\"){1,3}") {
            let mut spans = Vec::new();
            if scan_attrs(raw.as_bytes(), &mut spans).is_ok() {
                let mut keys = Vec::new();
                let mut n = 0;
                for a in Attributes::new(&raw, 0) {
                    let a = a.expect("quick-xml rejects what the fast path accepted");
                    proptest::prop_assert!(!keys.contains(&a.key.0.to_string()));
                    keys.push(a.key.0.to_string());
                    // The spans read what quick-xml reads.
                    let s = &spans[n];
                    proptest::prop_assert_eq!(&raw[s.key.clone()], a.key.0);
                    proptest::prop_assert_eq!(
                        attr_value(&raw, s).ok(),
                        a.normalized_value(XmlVersion::Implicit1_0).ok().map(|v| v.into_owned().into())
                    );
                    n += 1;
                }
                proptest::prop_assert_eq!(n, spans.len());
            }
        }
    }
}
