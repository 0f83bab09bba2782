//! The command that re-runs one failing test alone, from its name as
//! `named_tests` spells it — only where it can be derived honestly:
//!
//! * go-test-json (`example.com/m/mul.TestMul`, a subtest
//!   `example.com/m/mul.TestA/sub`): `go test -run '^TestMul$' ./mul` —
//!   each `/`-separated level anchored and regex-escaped, as `go test -run`
//!   splits its pattern; the package as a directory below the module the
//!   commit's root `go.mod` declares (`.` for the module's own package),
//!   else its import path; a package that failed without a test is
//!   `go test ./mul`.
//! * junit-xml from pytest (the suite's argv runs pytest): the pytest node
//!   id `a/b/test_x.py::Class::name` when the commit carries `a/b/test_x.py`
//!   for classname `a.b.test_x[.Class]`; otherwise none — a made-up path is
//!   worse than the bare name.
//!
//! Pure: the caller reads the module path and the tree's files.

/// What a re-run command is derived from, for one record.
#[derive(Debug, Clone, Default)]
pub enum Rerun {
    /// No command can be derived (exitcode, another junit producer…).
    #[default]
    None,
    /// go-test-json: the module path of the commit's root `go.mod`, when
    /// it declares one.
    Go {
        /// `module` of the root `go.mod`.
        module: Option<String>,
        /// The suite's package-choosing flags (`-tags=…`, `-mod=…`,
        /// `-modfile=…`): without them a tagged test may not even build.
        flags: Vec<String>,
    },
    /// junit-xml written by pytest.
    Pytest {
        /// The suite's argv up to and including the pytest word
        /// (`["pytest"]`, `["python3", "-m", "pytest"]`).
        program: Vec<String>,
        /// The commit's files (paths relative to the root).
        files: std::collections::HashSet<String>,
    },
}

impl Rerun {
    /// The command that re-runs `test` (a `named_tests` entry) alone, as a
    /// shell line; `None` where it cannot be derived honestly.
    pub fn command(&self, test: &str) -> Option<String> {
        match self {
            Rerun::None => None,
            Rerun::Go { module, flags } => Some(go(test, module.as_deref(), flags)),
            Rerun::Pytest { program, files } => {
                let id = pytest_node_id(test, |p| files.contains(p))?;
                let mut words: Vec<String> = program.iter().map(|w| word(w)).collect();
                words.push(format!("'{}'", id.replace('\'', "'\\''")));
                Some(words.join(" "))
            }
        }
    }
}

/// The argv prefix that runs pytest, when `argv` does: `pytest`,
/// `pytest-3`, `py.test` (any directory), or `… -m pytest`.
pub fn pytest_program(argv: &[String]) -> Option<Vec<String>> {
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    if let Some(first) = argv.first()
        && matches!(base(first).as_str(), "pytest" | "pytest-3" | "py.test")
    {
        return Some(vec![first.clone()]);
    }
    let m = argv
        .windows(2)
        .position(|w| w[0] == "-m" && w[1] == "pytest")?;
    Some(argv[..m + 2].to_vec())
}

/// The `module` path of a `go.mod` text.
pub fn go_module(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("module")?;
        if !rest.starts_with([' ', '\t']) {
            return None;
        }
        let m = rest.split("//").next()?.trim().trim_matches('"');
        (!m.is_empty()).then(|| m.to_string())
    })
}

fn word(w: &str) -> String {
    crate::quote::quote(w).unwrap_or_else(|| w.to_string())
}

/// Split a go-test-json name into its package and its test: the test is
/// what follows the first `.` whose next word (up to `/` or the end) is a
/// top-level test function's name (`Test…`, `Example…`, `Fuzz…`, no dot).
fn go_split(name: &str) -> (&str, Option<&str>) {
    for (i, _) in name.match_indices('.') {
        let rest = &name[i + 1..];
        let top = rest.split('/').next().unwrap_or(rest);
        let is_func = ["Test", "Example", "Fuzz"]
            .iter()
            .any(|p| top.starts_with(p))
            && top.chars().all(|c| c.is_alphanumeric() || c == '_');
        if is_func {
            return (&name[..i], Some(rest));
        }
    }
    (name, None)
}

fn regex_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

fn go(name: &str, module: Option<&str>, flags: &[String]) -> String {
    let (pkg, test) = go_split(name);
    let dir = match module {
        Some(m) if pkg == m => ".".to_string(),
        Some(m) => match pkg.strip_prefix(m).and_then(|r| r.strip_prefix('/')) {
            Some(rel) => format!("./{rel}"),
            None => pkg.to_string(),
        },
        None => pkg.to_string(),
    };
    let mut go = String::from("go test");
    for f in flags {
        go.push(' ');
        go.push_str(&word(f));
    }
    match test {
        Some(t) => {
            let pattern: Vec<String> = t
                .split('/')
                .map(|level| format!("^{}$", regex_escape(level)))
                .collect();
            format!("{go} -run {} {}", word(&pattern.join("/")), word(&dir))
        }
        None => format!("{go} {}", word(&dir)),
    }
}

/// The pytest node id of a junit-xml name `classname.name` whose module
/// file the commit carries (`has`): the longest dotted prefix that is a
/// file `a/b/test_x.py`, then the rest as `::`-separated parts (a dot
/// inside `[…]`, a parametrized id, stays).
pub fn pytest_node_id(test: &str, has: impl Fn(&str) -> bool) -> Option<String> {
    // Split on dots outside brackets.
    let mut parts: Vec<String> = vec![String::new()];
    let mut depth = 0usize;
    for c in test.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c == '.' && depth == 0 {
            parts.push(String::new());
        } else {
            parts.last_mut().expect("one part").push(c);
        }
    }
    // The module file is never the last part (that is the test's name).
    (1..parts.len()).rev().find_map(|n| {
        let file = format!("{}.py", parts[..n].join("/"));
        has(&file).then(|| format!("{file}::{}", parts[n..].join("::")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names_anchor_and_escape_each_level_below_the_module() {
        let g = Rerun::Go {
            module: Some("example.com/m".into()),
            flags: Vec::new(),
        };
        assert_eq!(
            g.command("example.com/m/mul.TestMul").unwrap(),
            "go test -run '^TestMul$' ./mul"
        );
        assert_eq!(
            g.command("example.com/m/mul.TestA/sub").unwrap(),
            "go test -run '^TestA$/^sub$' ./mul"
        );
        assert_eq!(
            g.command("example.com/m.TestRoot/x.5_(y)").unwrap(),
            "go test -run '^TestRoot$/^x\\.5_\\(y\\)$' ."
        );
        assert_eq!(
            g.command("gopkg.in/yaml.v3.TestY").unwrap(),
            "go test -run '^TestY$' gopkg.in/yaml.v3"
        );
        assert_eq!(g.command("example.com/m/mul").unwrap(), "go test ./mul");
        assert_eq!(
            Rerun::Go {
                module: None,
                flags: Vec::new()
            }
            .command("x/p.TestQ")
            .unwrap(),
            "go test -run '^TestQ$' x/p"
        );
        // The suite's build tags go with it: a tagged test builds only so.
        assert_eq!(
            Rerun::Go {
                module: Some("example.com/m".into()),
                flags: vec!["-tags=x,y".into()],
            }
            .command("example.com/m/tagged.TestG")
            .unwrap(),
            "go test '-tags=x,y' -run '^TestG$' ./tagged"
        );
    }

    #[test]
    fn pytest_node_ids_only_where_the_file_is_there() {
        let files: std::collections::HashSet<String> =
            ["a/b/test_x.py", "test_top.py"].map(String::from).into();
        let p = Rerun::Pytest {
            program: vec!["pytest".into()],
            files,
        };
        assert_eq!(
            p.command("a.b.test_x.test_one").unwrap(),
            "pytest 'a/b/test_x.py::test_one'"
        );
        assert_eq!(
            p.command("a.b.test_x.TestK.test_two[1.5-x]").unwrap(),
            "pytest 'a/b/test_x.py::TestK::test_two[1.5-x]'"
        );
        assert_eq!(
            p.command("test_top.test_q").unwrap(),
            "pytest 'test_top.py::test_q'"
        );
        assert_eq!(p.command("c.test_gone.test_z"), None);
        assert_eq!(
            pytest_program(&["python3".into(), "-m".into(), "pytest".into(), "-q".into()]),
            Some(vec!["python3".to_string(), "-m".into(), "pytest".into()])
        );
        assert_eq!(
            pytest_program(&["/usr/bin/pytest".into()]),
            Some(vec!["/usr/bin/pytest".to_string()])
        );
        assert_eq!(pytest_program(&["npm".into(), "test".into()]), None);
    }

    #[test]
    fn the_module_line_of_a_go_mod() {
        assert_eq!(
            go_module("// c\nmodule example.com/m // x\n\ngo 1.19\n").as_deref(),
            Some("example.com/m")
        );
        assert_eq!(go_module("modules x\n"), None);
    }
}
