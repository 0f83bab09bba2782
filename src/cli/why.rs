//! Why a test failed: each failing test's own output, as a person reads it
//! and as `--json` carries it (issue 21.5), and the suite log of a record
//! (`records show ID --log`).
//!
//! The text is the suite's: the human forms are returned unescaped and the
//! caller prints them through [`super::visible`] with the rest of its output;
//! the JSON forms keep it exactly (JSON-escaped only).

use crate::report::TestOutput;

/// The human block under a red verdict: for each failing test that wrote
/// something, its name, then its failure message (junit-xml) and its last
/// lines, each line indented under the name; how many earlier lines were
/// dropped is said on the name's line. Empty when no failing test wrote
/// anything. Every line starts with `indent`.
///
/// ```text
/// output of failing tests:
///   example.com/m.TestBad (5 earlier lines dropped):
///         bad_test.go:9: line 5
///   (the output of 3 more failing tests was not kept)
/// ```
pub fn test_output_lines(outputs: &[TestOutput], omitted: u64, indent: &str) -> String {
    let shown: Vec<&TestOutput> = outputs
        .iter()
        .filter(|o| o.message.is_some() || !o.lines.is_empty())
        .collect();
    if shown.is_empty() && omitted == 0 {
        return String::new();
    }
    let mut s = format!("{indent}output of failing tests:\n");
    for o in shown {
        let dropped = match o.dropped {
            0 => String::new(),
            1 => " (1 earlier line dropped)".into(),
            n => format!(" ({n} earlier lines dropped)"),
        };
        s.push_str(&format!("{indent}  {}{dropped}:\n", o.test));
        if let Some(m) = &o.message {
            // A message attribute is one line (XML normalizes its newlines).
            s.push_str(&format!("{indent}    message: {m}\n"));
        }
        for l in &o.lines {
            s.push_str(&format!("{indent}    {l}\n"));
        }
    }
    if omitted > 0 {
        s.push_str(&format!(
            "{indent}  (the output of {omitted} more failing test(s) was not kept: saphan keeps it for the first {})\n",
            crate::report::OUTPUT_TESTS
        ));
    }
    s
}

/// The `--json` form: `[{"test", "message"?, "lines", "dropped"}]`, the
/// text exactly as the suite wrote it.
pub fn test_output_json(outputs: &[TestOutput]) -> serde_json::Value {
    serde_json::to_value(outputs).expect("test output serializes")
}

/// Add `test_output` (and `test_output_omitted` when some output was not
/// kept) to a JSON object beside the record's fields, on a non-green
/// verdict.
pub fn add_test_output(
    v: &mut serde_json::Value,
    verdict: crate::report::Verdict,
    outputs: &[TestOutput],
    omitted: u64,
) {
    if verdict == crate::report::Verdict::Green {
        return;
    }
    v["test_output"] = test_output_json(outputs);
    if omitted > 0 {
        v["test_output_omitted"] = serde_json::json!(omitted);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_sit_under_their_test_and_say_what_was_dropped() {
        let o = vec![
            TestOutput {
                test: "p.TestA".into(),
                message: None,
                lines: vec!["    a_test.go:3: no".into()],
                dropped: 4,
            },
            TestOutput {
                test: "p.TestQuiet".into(),
                ..TestOutput::default()
            },
            TestOutput {
                test: "c.n".into(),
                message: Some("expected 1".into()),
                lines: vec![],
                dropped: 0,
            },
        ];
        assert_eq!(
            test_output_lines(&o, 2, "  "),
            "  output of failing tests:\n    p.TestA (4 earlier lines dropped):\n          a_test.go:3: no\n    c.n:\n      message: expected 1\n    (the output of 2 more failing test(s) was not kept: saphan keeps it for the first 200)\n"
        );
        assert_eq!(test_output_lines(&o[1..2], 0, ""), "");
    }
}
