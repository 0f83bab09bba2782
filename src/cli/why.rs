//! Why a test failed: each failing test's own output, as a person reads it
//! and as `--json` carries it (issue 21.5), and the suite log of a record
//! (`records show ID --log`, read by [`crate::record::log`]).
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
            // A message may hold lines of its own (`&#10;` survives XML's
            // normalization): each keeps its indentation, under the first.
            let mut lines = m.lines();
            s.push_str(&format!(
                "{indent}    message: {}\n",
                lines.next().unwrap_or_default()
            ));
            for l in lines {
                s.push_str(&format!("{indent}             {l}\n"));
            }
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

/// A record's kept suite log, checked against its hash: defined beside
/// the records ([`crate::record::log`]).
pub use crate::record::log::{LogError, suite_log};

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
        let multi = vec![TestOutput {
            test: "t.test_mul".into(),
            message: Some("AssertionError: mul\n  indented\n    more".into()),
            lines: vec![],
            dropped: 0,
        }];
        assert_eq!(
            test_output_lines(&multi, 0, ""),
            "output of failing tests:\n  t.test_mul:\n    message: AssertionError: mul\n               indented\n                 more\n"
        );
    }
}
