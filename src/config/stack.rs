//! Stack detection: one marker file at the tree root, first match in the
//! spec's fixed order, so the same repository resolves the same way on
//! every machine.

use crate::report::ReportKind;
use std::path::Path;

/// A proposed `[verify.full]` block for a detected stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The stack's name (`go`, `node`, `rust`, `python`, `swift`, `maven`, `gradle`).
    pub stack: &'static str,
    /// The marker file that was found.
    pub marker: &'static str,
    /// The comma-separated argv to declare.
    pub argv: &'static str,
    /// The report kind to declare.
    pub report: ReportKind,
    /// The `report_path` to declare (junit-xml: set before the kind).
    pub report_path: Option<&'static str>,
}

impl Proposal {
    /// "a swift", "an npm"… for the refusal sentence.
    pub fn article_stack(&self) -> String {
        let first = self.stack.chars().next().unwrap_or('x');
        let article = if "aeiou".contains(first) { "an" } else { "a" };
        format!("{article} {}", self.stack)
    }

    /// The (key, value) pairs to write, in the staging order `config set`
    /// accepts: argv, then report_path, then report.
    pub fn keys(&self) -> Vec<(String, String)> {
        let mut k = vec![("verify.full.argv".to_string(), self.argv.to_string())];
        if let Some(p) = self.report_path {
            k.push(("verify.full.report_path".into(), p.into()));
        }
        k.push(("verify.full.report".into(), self.report.as_str().into()));
        k
    }

    /// The commands that write [`Proposal::keys`], as an operator types
    /// them; `repo` adds `--repo DIR` (the repository's own declaration):
    ///
    /// ```text
    /// saphan config set verify.full.argv "swift,test"
    /// saphan config set verify.full.report exitcode
    /// ```
    pub fn commands(&self, repo: Option<&Path>) -> Vec<String> {
        let at = repo
            .map(|r| {
                let r = r.display().to_string();
                format!("--repo {} ", crate::quote::quote(&r).unwrap_or(r))
            })
            .unwrap_or_default();
        self.keys()
            .into_iter()
            .map(|(k, v)| match k.as_str() {
                "verify.full.report" => format!("saphan config set {at}{k} {v}"),
                _ => format!("saphan config set {at}{k} \"{v}\""),
            })
            .collect()
    }
}

/// The pytest project's proposal: JUnit XML that pytest writes itself, so
/// records carry the count and the failing names (never the exitcode floor
/// where the stack can say more).
pub const PYTEST_REPORT: &str = "reports/junit.xml";

/// Files that say a Python project runs pytest, in the order they are
/// looked at: `pytest.ini` and `conftest.py` by being there, the others
/// when their text names pytest (`[tool.pytest.ini_options]`,
/// `[tool:pytest]`, `[pytest]`, a pytest dependency).
pub const PYTEST_MARKERS: &[&str] = &[
    "pytest.ini",
    "conftest.py",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
];

fn pytest(marker: &'static str) -> Proposal {
    Proposal {
        stack: "python",
        marker,
        argv: "pytest,--junitxml=reports/junit.xml",
        report: ReportKind::JunitXml,
        report_path: Some(PYTEST_REPORT),
    }
}

/// The markers in detection order, with their proposals.
pub const MARKERS: &[Proposal] = &[
    Proposal {
        stack: "go",
        marker: "go.mod",
        argv: "go,test,-count=1,-json,./...",
        report: ReportKind::GoTestJson,
        report_path: None,
    },
    Proposal {
        stack: "node",
        marker: "package.json",
        argv: "npm,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "rust",
        marker: "Cargo.toml",
        argv: "cargo,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "python",
        marker: "pyproject.toml",
        argv: "pytest",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "swift",
        marker: "Package.swift",
        argv: "swift,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "maven",
        marker: "pom.xml",
        argv: "mvn,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "gradle",
        marker: "build.gradle",
        argv: "gradle,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
    Proposal {
        stack: "gradle",
        marker: "build.gradle.kts",
        argv: "gradle,test",
        report: ReportKind::Exitcode,
        report_path: None,
    },
];

/// The first marker present at `dir`, in [`MARKERS`] order; a Python
/// project that runs pytest ([`PYTEST_MARKERS`], their text read, at most
/// 1 MiB each) gets pytest's JUnit XML proposal.
pub fn detect(dir: &Path) -> Option<Proposal> {
    detect_reading(
        |m| dir.join(m).is_file(),
        |m| {
            use std::io::Read;
            let f = std::fs::File::open(dir.join(m)).ok()?;
            let mut s = String::new();
            f.take(1 << 20).read_to_string(&mut s).ok()?;
            Some(s)
        },
    )
}

/// The first marker for which `has(marker)` holds, in [`MARKERS`] order —
/// e.g. asked of the files of one commit's tree rather than a directory,
/// whose texts are not read (`pytest.ini` and `conftest.py` still say
/// pytest by being there).
pub fn detect_with(has: impl Fn(&str) -> bool) -> Option<Proposal> {
    detect_reading(has, |_| None)
}

/// [`detect_with`], reading a marker's text with `read` where its text
/// decides (does `pyproject.toml` name pytest?). The Python slot of the
/// order holds every [`PYTEST_MARKERS`] file: a project that runs pytest
/// gets pytest's junit-xml proposal there, else `pyproject.toml` alone the
/// exitcode floor.
pub fn detect_reading(
    has: impl Fn(&str) -> bool,
    read: impl Fn(&str) -> Option<String>,
) -> Option<Proposal> {
    for p in MARKERS {
        if p.stack == "python" {
            let runs_pytest = PYTEST_MARKERS.iter().find(|m| {
                has(m)
                    && (matches!(**m, "pytest.ini" | "conftest.py")
                        || read(m).is_some_and(|t| t.contains("pytest")))
            });
            if let Some(m) = runs_pytest {
                return Some(pytest(m));
            }
        }
        if has(p.marker) {
            return Some(p.clone());
        }
    }
    None
}
