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
        &[
            r"\b(?:e?println|e?print)!\s*\(",
            r"\bindicatif::",
            // writing to the process's own streams is printing too
            r"\bio::std(?:out|err)\s*\(",
        ],
        &[
            // the test harness's skip line (CONTRIBUTING, "Tests")
            ("src/lib.rs", "SKIPPED: {why}"),
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

/// The layers of `src/`, bottom first (CONTRIBUTING.md, "Layering"): a
/// module may name modules of its own layer and of the layers below.
const LAYERS: &[&[&str]] = &[
    &[
        "error",
        "outcome",
        "canonical",
        "clock",
        "platform",
        "home",
        "quote",
        "fsutil",
        "procs",
        "exec",
        "seal",
        "cancel",
    ],
    &["git"],
    &["remote"],
    &["transport"],
    &["slurm"],
    &["worktree"],
    &["report"],
    &["config"],
    &["catalog"],
    &["suite"],
    &["provision"],
    &["record"],
    &["executor"],
    &["docker"],
    &["fleet"],
    &["measure"],
    &["dispatch"],
    &["schedule"],
    &["stream", "affected"],
    &["commands"],
    &["cli"],
];

/// Edges that still point up, `(from, to)`: each is a cycle left to break.
/// Remove a line when its edge goes; a new one fails the test.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Cycles left between the files of one module, `(module, a, b)` with
/// `a < b`: each pair reaches the other.
const KNOWN_FILE_CYCLES: &[(&str, &str, &str)] = &[("measure", "bench", "pipeline")];

/// Every `(module path, named module path)` of the code: `crate::a::b…`
/// paths (also inside `use crate::{…}` groups) and `super::x` of a file
/// in a module. Paths are cut to two parts (`docker::engine`).
fn names() -> Vec<(Vec<String>, Vec<String>)> {
    let mut by_file: std::collections::BTreeMap<String, String> = Default::default();
    for (f, _, l) in code_lines() {
        let e = by_file.entry(f).or_default();
        e.push_str(&l);
        e.push('\n');
    }
    let path =
        Regex::new(r"\b(crate|super)::((?:[A-Za-z_][A-Za-z0-9_]*::)*)(\{|[A-Za-z_][A-Za-z0-9_]*)")
            .unwrap();
    let mut out = Vec::new();
    for (f, text) in by_file {
        let rel = f.trim_start_matches("src/").trim_end_matches(".rs");
        let mut me: Vec<String> = rel.split('/').map(String::from).collect();
        if me.last().is_some_and(|l| l == "mod") {
            me.pop();
        }
        if me == ["lib"] || me == ["main"] {
            continue;
        }
        for m in path.find_iter(&text) {
            let s = &text[m.start()..m.end()];
            let (root, rest) = s.split_once("::").unwrap();
            let base: Vec<String> = if root == "crate" {
                Vec::new()
            } else if me.len() == 2 {
                vec![me[0].clone()]
            } else {
                continue;
            };
            let mut parts: Vec<String> = rest
                .split("::")
                .filter(|p| !p.is_empty() && *p != "{")
                .map(String::from)
                .collect();
            if rest.ends_with('{') {
                // a group: each item's first part
                let body_start = m.end();
                let mut depth = 1;
                let mut end = body_start;
                for (i, c) in text[body_start..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        end = body_start + i;
                        break;
                    }
                }
                let mut d = 0;
                let mut item = String::new();
                let mut firsts = Vec::new();
                for c in text[body_start..end].chars().chain([',']) {
                    match c {
                        '{' => d += 1,
                        '}' => d -= 1,
                        ',' if d == 0 => {
                            let first = item.trim().split("::").next().unwrap_or("").to_string();
                            if !first.is_empty() {
                                firsts.push(first);
                            }
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if d == 0 {
                        item.push(c);
                    }
                }
                for first in firsts {
                    let mut p = base.clone();
                    p.extend(parts.iter().cloned());
                    p.push(first);
                    p.truncate(2);
                    out.push((me.clone(), p));
                }
                continue;
            }
            let mut p = base;
            p.append(&mut parts);
            p.truncate(2);
            out.push((me.clone(), p));
        }
    }
    out
}

#[test]
fn lower_modules_never_name_higher_ones() {
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut up = std::collections::BTreeSet::new();
    let mut unplaced = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    for (from, to) in names() {
        let (a, b) = (from[0].as_str(), to[0].as_str());
        if a == b || b == "self" || b == "super" {
            continue;
        }
        let (Some(la), Some(lb)) = (layer(a), layer(b)) else {
            // a name in the crate's root (lib.rs: `skip_unless`) is no module
            if layer(a).is_none() {
                unplaced.insert(a.to_string());
            }
            continue;
        };
        if lb > la {
            if KNOWN_UPWARD.contains(&(a, b)) {
                seen.insert((a.to_string(), b.to_string()));
            } else {
                up.insert(format!("{a} -> {b}"));
            }
        }
    }
    // An allowance whose edge is gone must go too: the list only shrinks.
    let stale: Vec<String> = KNOWN_UPWARD
        .iter()
        .filter(|(a, b)| !seen.contains(&(a.to_string(), b.to_string())))
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN_UPWARD allows edges that no longer exist — remove them: {stale:?}"
    );
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS (place them, and in CONTRIBUTING.md): {unplaced:?}"
    );
    assert!(
        up.is_empty(),
        "a lower module names a higher one (CONTRIBUTING.md, \"Layering\"): move what both need down:\n{}",
        up.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_files_of_a_module_form_no_cycle() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut edges: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for (from, to) in names() {
        if from.len() == 2 && to.len() == 2 && from[0] == to[0] && from[1] != to[1] {
            edges
                .entry(from[0].clone())
                .or_default()
                .insert((from[1].clone(), to[1].clone()));
        }
    }
    assert!(
        edges.get("docker").is_some_and(|e| !e.is_empty()),
        "the files' names were read: {edges:?}"
    );
    let mut found = Vec::new();
    let mut known_seen = BTreeSet::new();
    for (module, es) in &edges {
        let nodes: BTreeSet<&String> = es.iter().flat_map(|(a, b)| [a, b]).collect();
        let reach = |from: &String| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from];
            while let Some(n) = todo.pop() {
                for (a, b) in es {
                    if a == n && seen.insert(b) {
                        todo.push(b);
                    }
                }
            }
            seen
        };
        for a in &nodes {
            for b in reach(a) {
                if *a < b && reach(b).contains(a) {
                    let key = (module.as_str(), a.as_str(), b.as_str());
                    if KNOWN_FILE_CYCLES.contains(&key) {
                        known_seen.insert(key);
                    } else {
                        found.push(format!("{module}: {a} <-> {b}"));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "files of one module reach each other (CONTRIBUTING.md, \"Layering\"):\n{}",
        found.join("\n")
    );
    let stale: Vec<_> = KNOWN_FILE_CYCLES
        .iter()
        .filter(|k| !known_seen.contains(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN_FILE_CYCLES lists cycles that are gone; take them off: {stale:?}"
    );
}

#[test]
fn the_cli_prints_through_writers_that_cannot_panic() {
    // `println!`/`eprintln!` panic when the stream is a pipe whose reader
    // left (exit 101 instead of the verdict's code): src/cli writes through
    // `out` and `say!`, which drop the words and keep the exit code.
    let found: Vec<String> = offending(&[r"\b(?:e?println|e?print)!\s*\("], &[])
        .into_iter()
        .filter(|l| l.starts_with("src/cli/") || l.starts_with("src/main.rs:"))
        .collect();
    assert!(
        found.is_empty(),
        "print through `crate::cli::out` (stdout) or `say!` (stderr):\n{}",
        found.join("\n")
    );
}
