//! The stream's status file, `.saphan/status` in its worktree: the `- return:`
//! manifest and the waivers, parsed and checked for hostile paths.
//!
//! Format (one field per line, a field starts at column 0 with `- NAME:`):
//!
//! ```text
//! - stream: NAME
//! - base: <full commit SHA>
//! - return:
//!   reports/summary.md
//!   results/
//! - waive: scratch/notes.txt — a scratch file, nothing to keep
//! ```
//!
//! Lines after `- return:` up to the next field are paths, one per line
//! (leading spaces and an optional `- ` bullet are stripped; blank lines
//! and lines starting with `#` are skipped). A value on the `- return:` line
//! itself counts as the first path. `- waive:` takes a
//! path, then ` — ` (or ` -- `, ` – `), then a reason that must not be
//! empty; an unquoted path must leave exactly one separator on the line.
//! A path starting with `"` is C-quoted ([`super::quote`]), so any name —
//! a newline, `=`, a separator, bytes that are not UTF-8 — can be named
//! exactly.
//! Unknown fields are refused, so a misspelt `- retrun:` cannot silently
//! declare nothing.

use super::{StreamError, quote};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Directory inside the worktree that holds saphan's stream files.
pub const STATUS_DIR: &str = ".saphan";
/// The status file, relative to the worktree.
pub const STATUS_FILE: &str = ".saphan/status";
/// The self-ignoring `.gitignore` inside [`STATUS_DIR`].
pub const STATUS_GITIGNORE: &str = ".saphan/.gitignore";

/// A waived path: authored, deliberately not returned, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiver {
    /// Repository-relative path (a directory waives everything under it).
    pub path: String,
    /// Why losing it is fine (never empty).
    pub reason: String,
    /// `status-file` or `command-line` (`teardown --waive`).
    pub source: &'static str,
}

/// The parsed status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusFile {
    /// `- stream:`.
    pub stream: Option<String>,
    /// `- base:`.
    pub base: Option<String>,
    /// `Some` when a `- return:` field is present (possibly empty); `None`
    /// when the file has no `- return:` field at all.
    pub returns: Option<Vec<String>>,
    /// `- waive:` lines.
    pub waivers: Vec<Waiver>,
}

/// Render a fresh status file for `stream start`.
pub fn render_initial(stream: &str, base: &str) -> String {
    format!(
        "# saphan stream status file (gitignored; see docs/streams.md)\n\
         # List every path this stream must return under `- return:`, one per line.\n\
         # Waive an authored path you mean to lose with `- waive: PATH — reason`.\n\
         - stream: {stream}\n\
         - base: {base}\n\
         - return:\n"
    )
}

/// How a waiver value failed to split.
enum Split {
    /// No separator: no reason given.
    NoReason,
    /// More than one way to read it, or a malformed quoted path.
    Bad(String),
}

/// Split a waiver value `PATH — reason` (or ` -- `, ` – `) into the path's
/// text form and the reason. A quoted path (`"a — b.log" — reason`, see
/// [`super::quote`]) ends at its closing quote; an unquoted one must hold
/// exactly one separator, since `a — b — c` could name `a` or `a — b`.
fn split_waiver(v: &str) -> Result<(String, &str), Split> {
    if v.starts_with('"') {
        let (bytes, rest) = quote::unquote_prefix(v).map_err(Split::Bad)?;
        let rest = rest.trim_start();
        for sep in quote::WAIVER_SEPARATORS {
            if let Some(r) = rest.strip_prefix(sep.trim_start()) {
                return Ok((quote::encode(&bytes), r.trim()));
            }
        }
        return if rest.is_empty() {
            Err(Split::NoReason)
        } else {
            Err(Split::Bad(format!(
                "after the quoted path comes `{rest}`, not ` — reason`"
            )))
        };
    }
    let hits: Vec<(usize, &str)> = quote::WAIVER_SEPARATORS
        .iter()
        .flat_map(|sep| v.match_indices(sep))
        .collect();
    match hits.as_slice() {
        [] => Err(Split::NoReason),
        [(at, sep)] => Ok((v[..*at].trim().to_string(), v[at + sep.len()..].trim())),
        _ => Err(Split::Bad(format!(
            "`{v}` holds the separator more than once, so it is unclear where the path ends — quote the path: `- waive: \"PATH\" — reason`"
        ))),
    }
}

impl StatusFile {
    /// Parse the text of a status file. `file` is used in messages only.
    ///
    /// Errors: [`StreamError::StatusMalformed`] (unknown or repeated field,
    /// stray line outside `- return:`), [`StreamError::WaiverWithoutReason`].
    pub fn parse(text: &str, file: &Path) -> Result<StatusFile, StreamError> {
        // Editors on some systems start UTF-8 files with a byte-order mark;
        // it is not part of the first field.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let bad = |line: usize, detail: String| StreamError::StatusMalformed {
            file: file.to_path_buf(),
            line,
            detail,
        };
        let mut sf = StatusFile {
            stream: None,
            base: None,
            returns: None,
            waivers: Vec::new(),
        };
        let mut in_return = false;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if let Some(rest) = raw.strip_prefix("- ")
                && let Some((key, value)) = rest.split_once(':')
            {
                let key = key.trim();
                if !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
                {
                    let value = value.trim();
                    in_return = false;
                    match key {
                        "stream" | "base" => {
                            let slot = if key == "stream" {
                                &mut sf.stream
                            } else {
                                &mut sf.base
                            };
                            if slot.is_some() {
                                return Err(bad(n, format!("`- {key}:` appears twice")));
                            }
                            *slot = Some(value.to_string());
                        }
                        "return" => {
                            if sf.returns.is_some() {
                                return Err(bad(
                                    n,
                                    "`- return:` appears twice; keep one list".into(),
                                ));
                            }
                            let mut v = Vec::new();
                            if !value.is_empty() {
                                v.push(value.to_string());
                            }
                            sf.returns = Some(v);
                            in_return = true;
                        }
                        "waive" => {
                            let (p, r) = match split_waiver(value) {
                                Ok(x) => x,
                                Err(Split::NoReason) => {
                                    return Err(StreamError::WaiverWithoutReason {
                                        file: file.to_path_buf(),
                                        line: n,
                                        path: value.to_string(),
                                    });
                                }
                                Err(Split::Bad(why)) => return Err(bad(n, why)),
                            };
                            if p.is_empty() {
                                return Err(bad(n, "`- waive:` names no path".into()));
                            }
                            if r.is_empty() {
                                return Err(StreamError::WaiverWithoutReason {
                                    file: file.to_path_buf(),
                                    line: n,
                                    path: p.to_string(),
                                });
                            }
                            sf.waivers.push(Waiver {
                                path: p,
                                reason: r.to_string(),
                                source: "status-file",
                            });
                        }
                        other => {
                            return Err(bad(
                                n,
                                format!(
                                    "unknown field `- {other}:` (known: stream, base, return, waive)"
                                ),
                            ));
                        }
                    }
                    continue;
                }
            }
            if in_return {
                let p = trimmed.strip_prefix("- ").map(str::trim).unwrap_or(trimmed);
                if let Some(v) = sf.returns.as_mut() {
                    v.push(p.to_string());
                }
                continue;
            }
            return Err(bad(
                n,
                format!("`{trimmed}` is not a field and is not under `- return:`"),
            ));
        }
        Ok(sf)
    }

    /// Read and parse `<worktree>/.saphan/status`.
    ///
    /// Errors: [`StreamError::StatusMissing`], plus those of [`StatusFile::parse`].
    pub fn load(worktree: &Path) -> Result<StatusFile, StreamError> {
        let file = worktree.join(STATUS_FILE);
        let text = std::fs::read_to_string(&file).map_err(|e| StreamError::StatusMissing {
            file: file.clone(),
            detail: e.to_string(),
        })?;
        StatusFile::parse(&text, &file)
    }
}

/// Check one repository-relative path from the status file (or `--waive`)
/// and return it normalized (`a/./b/` → `a/b`).
///
/// `root` must be the canonical worktree path. Refused as
/// [`StreamError::ReturnPathHostile`]: an empty path, an absolute path, a `..`
/// component, a path into `.git`, and a path whose existing prefix runs
/// through a symlink that resolves outside `root` (a dangling symlink is
/// judged by where its target would be).
///
/// With `follow_last == false` (waivers: nothing is read through them) the
/// last component may itself be a symlink pointing anywhere; the components
/// before it are still checked.
pub fn check_path(root: &Path, raw: &str, follow_last: bool) -> Result<String, StreamError> {
    let hostile = |why: String| StreamError::ReturnPathHostile {
        path: raw.to_string(),
        why,
    };
    let bytes =
        quote::decode(raw).map_err(|why| hostile(format!("it is not a readable path: {why}")))?;
    if bytes.is_empty() {
        return Err(hostile("the path is empty".into()));
    }
    if bytes.starts_with(b"/") {
        return Err(hostile(
            "it is absolute; returns are repository-relative".into(),
        ));
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in bytes.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(hostile("it climbs out with `..`".into())),
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return Err(hostile(
            "it names the worktree itself, not a path in it".into(),
        ));
    }
    if parts[0] == b".git" {
        return Err(hostile("it points into git's own files (.git)".into()));
    }
    // Walk the prefixes that exist on disk; any symlink among them must
    // resolve inside the worktree.
    let mut cur = root.to_path_buf();
    let walk = if follow_last {
        &parts[..]
    } else {
        &parts[..parts.len() - 1]
    };
    for c in walk {
        cur.push(OsStr::from_bytes(c));
        let meta = match std::fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(_) => break,
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        match std::fs::canonicalize(&cur) {
            Ok(real) => {
                if !real.starts_with(root) {
                    return Err(hostile(format!(
                        "it runs through the symlink {} which resolves to {}, outside the worktree",
                        cur.strip_prefix(root).unwrap_or(&cur).display(),
                        real.display()
                    )));
                }
                cur = real;
            }
            Err(_) => {
                let target = std::fs::read_link(&cur).unwrap_or_default();
                let parent = cur.parent().unwrap_or(root);
                let lexical = lexical_normalize(&parent.join(&target));
                if !lexical.starts_with(root) {
                    return Err(hostile(format!(
                        "it runs through the symlink {} which points to {}, outside the worktree",
                        cur.strip_prefix(root).unwrap_or(&cur).display(),
                        target.display()
                    )));
                }
                break;
            }
        }
    }
    Ok(quote::encode(&parts.join(&b'/')))
}

/// Resolve `.` and `..` without touching the filesystem.
fn lexical_normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Does `path` lie at or under `prefix` (both normalized, `/`-separated,
/// in the text form of [`quote`]; compared by their bytes)?
pub fn covers(prefix: &str, path: &str) -> bool {
    let (prefix, path) = (quote::os(prefix), quote::os(path));
    let (prefix, path) = (prefix.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    path == prefix
        || (path.len() > prefix.len() && path.starts_with(prefix) && path[prefix.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

    fn p(t: &str) -> Result<StatusFile, StreamError> {
        StatusFile::parse(t, Path::new("status"))
    }

    #[test]
    fn parses_fields_returns_and_waivers() {
        let sf = p("# c\n- stream: s\n- base: abc\n- return:\n  a.txt\n  - b/c\n\nd\n- e/f:g\n- waive: x/y — scratch\n- waive: z -- tmp\n").unwrap();
        assert_eq!(sf.stream.as_deref(), Some("s"));
        assert_eq!(sf.base.as_deref(), Some("abc"));
        assert_eq!(sf.returns.unwrap(), vec!["a.txt", "b/c", "d", "e/f:g"]);
        assert_eq!(sf.waivers.len(), 2);
        assert_eq!(sf.waivers[0].path, "x/y");
        assert_eq!(sf.waivers[1].reason, "tmp");
    }

    #[test]
    fn no_return_field_is_none_and_empty_is_some() {
        assert_eq!(p("- stream: s\n").unwrap().returns, None);
        assert_eq!(p("- return:\n").unwrap().returns, Some(vec![]));
        assert_eq!(p("- return: a\n").unwrap().returns, Some(vec!["a".into()]));
    }

    #[test]
    fn refuses_unknown_field_stray_line_and_bare_waiver() {
        assert_eq!(
            p("- retrun:\n  a\n").unwrap_err().name(),
            "status-file-malformed"
        );
        assert_eq!(
            p("- stream: s\nfoo\n").unwrap_err().name(),
            "status-file-malformed"
        );
        assert_eq!(
            p("- waive: a\n").unwrap_err().name(),
            "waiver-without-reason"
        );
        assert_eq!(
            p("- waive: a — \n").unwrap_err().name(),
            "waiver-without-reason"
        );
        assert_eq!(
            p("- base: a\n- base: b\n").unwrap_err().name(),
            "status-file-malformed"
        );
    }

    #[test]
    fn lexical_hostile_paths() {
        let root = Path::new("/nonexistent-root");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/..",
            ".git/config",
            ".",
            "./",
        ] {
            assert_eq!(
                check_path(root, bad, true).unwrap_err().name(),
                "return-path-hostile",
                "{bad}"
            );
        }
        assert_eq!(check_path(root, "./a//b/", true).unwrap(), "a/b");
    }

    #[test]
    fn a_leading_byte_order_mark_is_ignored() {
        let sf = p("\u{feff}- stream: s\n- return:\n  a\n").unwrap();
        assert_eq!(sf.stream.as_deref(), Some("s"));
        assert_eq!(sf.returns.unwrap(), vec!["a"]);
    }

    #[test]
    fn waivers_name_one_path_quoted_or_not() {
        let sf =
            p("- waive: \"a — b.log\" — scratch — really\n- waive: \"caf\\351\" -- x\n").unwrap();
        assert_eq!(sf.waivers[0].path, "\"a — b.log\"");
        assert_eq!(sf.waivers[0].reason, "scratch — really");
        assert_eq!(quote::decode(&sf.waivers[1].path).unwrap(), b"caf\xe9");
        assert_eq!(
            p("- waive: a — b.log — scratch\n").unwrap_err().name(),
            "status-file-malformed"
        );
        assert_eq!(
            p("- waive: \"a\"\n").unwrap_err().name(),
            "waiver-without-reason"
        );
        assert_eq!(
            p("- waive: \"a\" scratch\n").unwrap_err().name(),
            "status-file-malformed"
        );
        let root = Path::new("/nonexistent-root");
        assert_eq!(
            check_path(root, "\"a/./b\\n\"", true).unwrap(),
            "\"a/b\\n\""
        );
        assert_eq!(check_path(root, "\"\\377\"", true).unwrap(), "\"\\377\"");
        assert_eq!(
            check_path(root, "\"../x\"", true).unwrap_err().name(),
            "return-path-hostile"
        );
        assert_eq!(
            check_path(root, "\"open", true).unwrap_err().name(),
            "return-path-hostile"
        );
    }

    #[test]
    fn covers_compares_bytes() {
        assert!(covers("a", "\"a/\\377\""));
        assert!(!covers("\"a=b\"", "a/x"));
    }

    #[test]
    fn covers_is_component_wise() {
        assert!(covers("a", "a"));
        assert!(covers("a", "a/b"));
        assert!(!covers("a", "ab"));
    }
}
