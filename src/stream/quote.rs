//! One unambiguous text form for any path git can report: the form saphan
//! reads in the status file and `--waive`, and prints in every report and
//! in `--json`.
//!
//! A path's bytes are written as they are when they are valid UTF-8, hold
//! no control character (C0, DEL, C1), no `=` and none of the waiver
//! separators (` — `, ` -- `, ` – `), do not start with `"`, `#` or `- `,
//! and neither start nor end with a space — so a name saphan prints can be
//! pasted back into the status file or `--waive` as it is. Any other path is C-quoted the way git quotes
//! odd names (`core.quotePath`): `"` + the bytes with `\\`, `\"`, `\n`, `\t`,
//! `\r` and `\ooo` (three octal digits, one byte: control characters and
//! bytes that are not UTF-8) + `"`. Printable UTF-8 stays as it is.
//!
//! Reading: a text starting with `"` is a quoted path and must end at its
//! closing `"` (git's escapes `\a \b \f \n \r \t \v \\ \" \ooo` are
//! accepted, so a name copied from `git status` works); any other text is
//! the path's bytes as written. Because a plain form never starts with `"`,
//! every text names exactly one path and every path has exactly one form.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What separates a waiver's path from its reason in the status file.
pub const WAIVER_SEPARATORS: [&str; 3] = [" — ", " -- ", " – "];

/// Whether `bytes` may be written as they are.
fn plain(bytes: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(bytes).ok()?;
    let ok = !s.chars().any(char::is_control)
        && !s.contains('=')
        && !WAIVER_SEPARATORS.iter().any(|sep| s.contains(sep))
        && !s.starts_with(['"', '#', ' '])
        && !s.starts_with("- ")
        && !s.ends_with(' ');
    ok.then_some(s)
}

/// The one text form of the path `bytes` (see the module docs).
pub fn encode(bytes: &[u8]) -> String {
    if let Some(s) = plain(bytes) {
        return s.to_string();
    }
    let mut out = String::from("\"");
    let mut rest = bytes;
    while !rest.is_empty() {
        // The longest valid UTF-8 prefix goes through char by char; an
        // invalid byte is written as an octal escape.
        let (good, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => (
                std::str::from_utf8(&rest[..e.valid_up_to()]).expect("valid prefix"),
                e.error_len().unwrap_or(rest.len() - e.valid_up_to()),
            ),
        };
        for c in good.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut b = [0u8; 4];
                    for byte in c.encode_utf8(&mut b).bytes() {
                        out.push_str(&format!("\\{byte:03o}"));
                    }
                }
                c => out.push(c),
            }
        }
        let at = good.len();
        for byte in &rest[at..at + bad] {
            out.push_str(&format!("\\{byte:03o}"));
        }
        rest = &rest[at + bad..];
    }
    out.push('"');
    out
}

/// Read one quoted path from the start of `s` (which starts with `"`):
/// its bytes and the text after the closing quote.
///
/// Errors: a human-readable reason (unterminated, unknown escape).
pub fn unquote_prefix(s: &str) -> Result<(Vec<u8>, &str), String> {
    let b = s.as_bytes();
    debug_assert_eq!(b.first(), Some(&b'"'));
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, &s[i + 1..])),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else { break };
                let simple = match e {
                    b'a' => Some(7),
                    b'b' => Some(8),
                    b'f' => Some(12),
                    b'n' => Some(b'\n'),
                    b'r' => Some(b'\r'),
                    b't' => Some(b'\t'),
                    b'v' => Some(11),
                    b'\\' => Some(b'\\'),
                    b'"' => Some(b'"'),
                    _ => None,
                };
                if let Some(v) = simple {
                    out.push(v);
                    i += 2;
                    continue;
                }
                let oct = b
                    .get(i + 1..i + 4)
                    .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3');
                match oct {
                    Some(d) => {
                        out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                        i += 4;
                    }
                    None => {
                        return Err(format!(
                            "`\\{}` is not an escape saphan reads (\\n \\t \\r \\\\ \\\" \\ooo …)",
                            char::from(e)
                        ));
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err("the quoted path has no closing `\"`".into())
}

/// The bytes of the path written as `text` (quoted or plain).
///
/// Errors: a malformed quoted form, or text after its closing quote.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    if !text.starts_with('"') {
        return Ok(text.as_bytes().to_vec());
    }
    let (bytes, rest) = unquote_prefix(text)?;
    if !rest.is_empty() {
        return Err(format!("`{rest}` follows the closing `\"` of the path"));
    }
    Ok(bytes)
}

/// The relative filesystem path named by the text form `text` (a text that
/// does not decode is taken literally; callers check paths with
/// `status::check_path` first).
pub fn os(text: &str) -> PathBuf {
    let b = decode(text).unwrap_or_else(|_| text.as_bytes().to_vec());
    PathBuf::from(OsStr::from_bytes(&b))
}

/// An absolute or relative path as JSON text: as it is when it is UTF-8
/// and does not start with `"`, else C-quoted by [`encode`] — so a path
/// that is not UTF-8 is written (and read back by [`path_from_text`])
/// exactly, never lossily and never as a serialization panic.
pub fn path_text(p: &std::path::Path) -> String {
    let b = p.as_os_str().as_bytes();
    match std::str::from_utf8(b) {
        Ok(s) if !s.starts_with('"') => s.to_string(),
        _ => encode(b),
    }
}

/// The path [`path_text`] wrote (a text that does not decode is taken
/// literally).
pub fn path_from_text(t: &str) -> PathBuf {
    os(t)
}

/// `#[serde(with = "…::quote::path_serde")]` for a `PathBuf` field.
pub mod path_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::{Path, PathBuf};

    /// Write [`super::path_text`].
    pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::path_text(p))
    }

    /// Read [`super::path_from_text`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Ok(super::path_from_text(&String::deserialize(d)?))
    }
}

/// `#[serde(with = "…::quote::opt_path_serde")]` for an `Option<PathBuf>`.
pub mod opt_path_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::PathBuf;

    /// Write `null` or [`super::path_text`].
    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&super::path_text(p)),
            None => s.serialize_none(),
        }
    }

    /// Read `null` or [`super::path_from_text`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(|t| super::path_from_text(&t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_and_odd_ones_round_trip() {
        assert_eq!(encode(b"a/b.txt"), "a/b.txt");
        assert_eq!(encode("résumé-x".as_bytes()), "résumé-x");
        for raw in [
            &b"caf\xe9.txt"[..],
            b"a\nb",
            b"\x1b[2Jx",
            b" lead",
            b"trail ",
            b"\"q\"",
            b"back\\slash\n",
            "\u{85}c1".as_bytes(),
            b"\xff\xfe",
        ] {
            let e = encode(raw);
            assert!(e.starts_with('"'), "{e}");
            assert!(!e.chars().any(char::is_control), "{e}");
            assert_eq!(decode(&e).unwrap(), raw, "{e}");
        }
        assert_eq!(encode(b"caf\xe9.txt"), "\"caf\\351.txt\"");
        assert_eq!(encode(b"a\nb"), "\"a\\nb\"");
        assert_eq!(encode(b"a=b.log"), "\"a=b.log\"");
        assert_eq!(encode("x — y".as_bytes()), "\"x — y\"");
    }

    #[test]
    fn decode_reads_gits_quoting_and_refuses_malformed() {
        assert_eq!(decode("\"a\\303\\251\"").unwrap(), "aé".as_bytes());
        assert_eq!(decode("plain\\x").unwrap(), b"plain\\x");
        assert!(decode("\"open").is_err());
        assert!(decode("\"a\"b").is_err());
        assert!(decode("\"\\q\"").is_err());
        assert_eq!(
            unquote_prefix("\"a=b\"=r").unwrap(),
            (b"a=b".to_vec(), "=r")
        );
    }
}
