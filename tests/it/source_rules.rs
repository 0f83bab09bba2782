//! Rules of CONTRIBUTING.md that the source itself must keep, read from
//! `src/**/*.rs` (code only: comments and each file's trailing
//! `#[cfg(test)] mod tests` are not read — tests may assert words).
//!
//! - code decides on typed kinds and variants, never on a refusal's
//!   `name()` or the words of an error, a note or a kind;
//! - engine modules print nothing (only `src/cli` renders).

use regex_automata::meta::Regex;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, with its code lines: `(path relative to
/// the crate, 1-based line number, line)`. Lines that are comments are
/// left out, and so is a file's test module when it closes the file.
fn code_lines() -> Vec<(String, usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(root.join("src"))
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 50, "src/ read: {} files", files.len());
    let tests = Regex::new(r"\n#\[cfg\(test\)\]\s*\nmod tests").unwrap();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = match tests.find(&text) {
            Some(m) => &text[..m.start()],
            None => &text[..],
        };
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        for (i, line) in code.lines().enumerate() {
            if !line.trim_start().starts_with("//") {
                out.push((rel.clone(), i + 1, line.to_string()));
            }
        }
    }
    out
}

/// The lines matching any of `patterns`, as `path:line: text`, except
/// those whose `path` and text contain an `allowed` pair.
fn offending(patterns: &[&str], allowed: &[(&str, &str)]) -> Vec<String> {
    let res: Vec<Regex> = patterns.iter().map(|p| Regex::new(p).unwrap()).collect();
    code_lines()
        .into_iter()
        .filter(|(_, _, l)| res.iter().any(|r| r.is_match(l)))
        .filter(|(p, _, l)| !allowed.iter().any(|(ap, al)| p == ap && l.contains(al)))
        .map(|(p, n, l)| format!("{p}:{n}: {}", l.trim()))
        .collect()
}

/// What an error's, a note's or a kind's words are held in.
const WORDS: &str = r"(?:stderr|stderr_str\(\)|stdout_str\(\)|err|error|e|msg|message|note|notes|detail|why|reason|kind|verdict|failure|outcome|to_string\(\))";

#[test]
fn no_decision_reads_a_kind_or_a_refusal_from_its_words() {
    let text = format!(r"\b{WORDS}\s*\.\s*(?:contains|starts_with|ends_with|strip_prefix|find)\(");
    let split = format!(r"\b{WORDS}\s*\.\s*(?:split|splitn|split_once|rsplit_once)\(\s*':'");
    let patterns = [
        // a refusal's stable name compared, matched or tested
        r"\.name\(\)\s*[!=]=",
        r"[!=]=\s*[\w.&*]*\.name\(\)",
        r"matches!\(\s*[\w.&*]*\.name\(\)",
        r"match\s+[\w.&*]*\.name\(\)\s*\{",
        // the words of an error, a note or a kind searched
        &text,
        // a kind recovered from a note's `kind: …` prefix
        &split,
        r#"starts_with\("done"#,
    ];
    let found = offending(&patterns, &[]);
    assert!(
        found.is_empty(),
        "decide on a typed kind or variant (`e.downcast_ref::<…>()`, an enum), not on words:\n{}",
        found.join("\n")
    );
}

#[test]
fn engine_modules_print_nothing() {
    let found: Vec<String> = offending(
        &[r"\b(?:e?println|e?print)!\s*\("],
        &[
            // the test harness's skip line (CONTRIBUTING, "Tests")
            ("src/lib.rs", "SKIPPED: {why}"),
            // issue 18: the fleet's ledger split gives this warning back
            ("src/fleet/ledger.rs", "eprintln!("),
        ],
    )
    .into_iter()
    .filter(|l| !l.starts_with("src/cli/") && !l.starts_with("src/main.rs:"))
    .collect();
    assert!(
        found.is_empty(),
        "only src/cli prints: give the words back (a value, a typed event) or use tracing:\n{}",
        found.join("\n")
    );
}
