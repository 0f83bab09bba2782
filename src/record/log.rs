//! An attempt's kept suite log (`<git-common-dir>/saphan/logs/<id>.log`,
//! named by the record's `suite_log` and checked against its
//! `suite_log_sha256`), and what it still tells after the fact: each
//! failing test's output (go-test-json: the log keeps the event stream,
//! read again by [`crate::report::gojson`], the parser that judged it),
//! and its last lines.
//!
//! The log's layout is the measuring core's (`measure::read_log`): a
//! `=== suite stdout ===` line, the suite's stdout (its first and last
//! bytes around an elision line when it was larger than the log keeps), a
//! `=== suite stderr (last 1 MiB) ===` line, then the end of its stderr.

use super::Record;
use crate::report::{ReportKind, TestOutput};

/// The line that opens a kept log's stdout section.
pub const STDOUT_HEADER: &str = "=== suite stdout ===\n";

/// The line that opens a kept log's stderr section.
pub const STDERR_HEADER: &str = "=== suite stderr (last 1 MiB) ===\n";

/// Why a record's suite log cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The record names no kept log.
    #[error(
        "record {id} keeps no suite log (verify-affected keeps none; the attempt may have ended before its suite ran) — `saphan records show {id}` shows what it does record"
    )]
    NotKept {
        /// The record id.
        id: String,
    },
    /// The log the record names is gone or unreadable.
    #[error(
        "record {id}'s suite log {path} cannot be read ({why}) — it was moved or deleted; logs are never removed by saphan"
    )]
    Missing {
        /// The record id.
        id: String,
        /// The log path the record names.
        path: String,
        /// The I/O error.
        why: String,
    },
    /// The log's bytes no longer hash to the record's `suite_log_sha256`.
    #[error(
        "record {id}'s suite log {path} has sha256 {actual}, but the record says {expected} — the file was changed after the attempt; it is not the suite's log and is not shown"
    )]
    Tampered {
        /// The record id.
        id: String,
        /// The log path.
        path: String,
        /// `suite_log_sha256` in the record.
        expected: String,
        /// What the file hashes to now.
        actual: String,
    },
}

impl crate::error::Refusal for LogError {
    fn name(&self) -> &'static str {
        match self {
            LogError::NotKept { .. } => "record-log-not-kept",
            LogError::Missing { .. } => "record-log-missing",
            LogError::Tampered { .. } => "record-log-tampered",
        }
    }
}

/// The bytes of `r`'s kept suite log (`suite_log`), after checking they
/// still hash to `suite_log_sha256`. Local and dispatched attempts keep it
/// at the same place (`<git-common-dir>/saphan/logs/<id>.log`).
///
/// Errors: [`LogError::NotKept`] when the record names no log (or no hash),
/// [`LogError::Missing`] when the file cannot be read,
/// [`LogError::Tampered`] when its sha256 differs.
pub async fn suite_log(r: &crate::record::Record) -> std::result::Result<Vec<u8>, LogError> {
    let (Some(path), Some(expected)) = (&r.suite_log, &r.suite_log_sha256) else {
        return Err(LogError::NotKept { id: r.id.clone() });
    };
    let bytes = tokio::fs::read(path).await.map_err(|e| LogError::Missing {
        id: r.id.clone(),
        path: path.clone(),
        why: e.to_string(),
    })?;
    let actual = crate::fsutil::sha256_hex(&bytes);
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(LogError::Tampered {
            id: r.id.clone(),
            path: path.clone(),
            expected: expected.clone(),
            actual,
        });
    }
    Ok(bytes)
}

/// The two sections of a kept log: `(stdout, stderr)`, without their
/// header lines. The stderr section begins at the first header line that
/// opens it (a go-test-json stdout is JSON lines, which never are one);
/// a log without one is all stdout.
pub fn sections(log: &[u8]) -> (&[u8], &[u8]) {
    let body = log.strip_prefix(STDOUT_HEADER.as_bytes()).unwrap_or(log);
    let at = memchr::memmem::find(body, STDERR_HEADER.as_bytes()).filter(|i| {
        // The header is a line of its own.
        *i == 0 || body[i - 1] == b'\n'
    });
    match at {
        Some(i) => (&body[..i], &body[i + STDERR_HEADER.len()..]),
        None => (body, &[]),
    }
}

/// The last `lines` lines of `text` (trailing blank lines dropped).
pub fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a kept log still tells about a non-green attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Why {
    /// What each failing test wrote, bounded, in the order it failed
    /// (go-test-json only: the log keeps the event stream; a junit-xml
    /// report was in the attempt's tree, which is gone).
    pub test_output: Vec<TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
    /// The last lines of the log (stdout then stderr); empty when the
    /// suite printed nothing.
    pub log_tail: String,
    /// The last lines of the stderr section.
    pub stderr_tail: String,
}

/// What `log` (the verified bytes of `r`'s kept log) tells: each failing
/// test's output when `r`'s report is go-test-json, read by the same parser
/// that judged the attempt; and the last `lines` lines of the log and of
/// its stderr.
pub fn why(r: &Record, log: &[u8], lines: usize) -> Why {
    let (stdout, stderr) = sections(log);
    let mut w = Why::default();
    if r.report == ReportKind::GoTestJson
        && let Ok(p) = crate::report::gojson::parse_bytes(stdout, "the suite's stdout")
    {
        w.test_output = p.output;
        w.test_output_omitted = p.output_omitted;
    }
    let text = String::from_utf8_lossy(log);
    // Only the section headers: the suite printed nothing.
    let printed = text
        .lines()
        .any(|l| !l.starts_with("=== suite ") && !l.trim().is_empty());
    if printed {
        w.log_tail = last_lines(&text, lines);
    }
    w.stderr_tail = last_lines(&String::from_utf8_lossy(stderr), lines);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_splits_into_its_stdout_and_stderr() {
        let log = b"=== suite stdout ===\n{\"Action\":\"pass\"}\n=== suite stderr (last 1 MiB) ===\nboom\n";
        assert_eq!(
            sections(log),
            (&b"{\"Action\":\"pass\"}\n"[..], &b"boom\n"[..])
        );
        assert_eq!(sections(b"plain\n"), (&b"plain\n"[..], &b""[..]));
        assert_eq!(last_lines("a\nb\nc\n\n", 2), "b\nc");
    }
}
