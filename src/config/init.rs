//! The two-key proposal of `saphan init`: what it shows, explains and writes
//! for a detected stack.
//!
//! Detection looks for one marker file in the repository root, first match
//! in the fixed order of [`MARKERS`] (go.mod, package.json, Cargo.toml,
//! pyproject.toml, Package.swift, pom.xml, build.gradle(.kts)), so a Go
//! service that also carries a `package.json` resolves to Go the same way on
//! every machine. A directory with none of them gets no proposal: a made-up
//! suite is worse than none.

use crate::error::Refusal;
use crate::report::ReportKind;
use std::path::{Path, PathBuf};

/// The one stack table lives in [`super::stack`] (certify's
/// no-declaration refusal reads it too); `init` proposes from it.
pub use super::stack::{MARKERS, Proposal, detect};

/// The proposal for one marker file name (`"Package.swift"`); `None` for a
/// name that is not a marker.
pub fn proposal_for(marker: &str) -> Option<Proposal> {
    MARKERS.iter().find(|p| p.marker == marker).cloned()
}

/// The marker names in detection order, for messages.
pub fn marker_names() -> Vec<&'static str> {
    MARKERS.iter().map(|p| p.marker).collect()
}

/// `argv` split into arguments.
pub fn argv_vec(p: &Proposal) -> Vec<String> {
    p.argv.split(',').map(str::to_string).collect()
}

/// How messages name the detection: `a swift project (Package.swift)`.
pub fn detected(p: &Proposal) -> String {
    format!("{} project ({})", p.article_stack(), p.marker)
}

/// The (key, value) pairs `init` writes, in staging order (argv, then
/// report_path for junit-xml, then report).
pub fn keys(p: &Proposal) -> Vec<(String, String)> {
    p.keys()
}

/// The commands that write the proposal, exactly as an operator would
/// type them; `repo` writes into that repository's own declaration
/// (`--repo DIR`):
///
/// ```text
/// saphan config set verify.full.argv "swift,test"
/// saphan config set verify.full.report exitcode
/// ```
pub fn commands(p: &Proposal, repo: Option<&Path>) -> Vec<String> {
    p.commands(repo)
}

/// The trade `init` explains before asking: what the report kind will and
/// will not tell, and how to get more where the stack can.
pub fn trade(p: &Proposal, origin: super::Origin) -> String {
    let mut s = match p.report {
        ReportKind::GoTestJson => String::from(
            "The report is go-test-json: saphan reads go test's own event stream, so every \
             record carries the number of tests that ran and the name of each one that failed.",
        ),
        ReportKind::JunitXml => String::from(
            "The report is junit-xml: saphan reads the XML files the command writes, so every \
             record carries the count and the failing names.",
        ),
        ReportKind::Exitcode => String::from(
            "The report is exitcode: the exit status is the whole verdict. Records say \
             count: unavailable and named_tests: unavailable — an honest floor, never a \
             guessed 0.",
        ),
    };
    let upgrade = match p.stack {
        "python" if p.report != ReportKind::JunitXml => Some(
            "pytest can write JUnit XML (--junitxml=reports/junit.xml); saphan proposes it when \
             pytest.ini, conftest.py, or a pyproject.toml, setup.cfg or tox.ini naming pytest is there",
        ),
        "maven" => Some("Maven's Surefire writes JUnit XML under target/surefire-reports/"),
        "gradle" => Some("Gradle writes JUnit XML under build/test-results/"),
        "node" => Some("jest and mocha can write JUnit XML through a reporter"),
        "swift" => Some("swift test can write JUnit XML with --xunit-output"),
        _ => None,
    };
    if let Some(u) = upgrade {
        s.push_str(&format!(
            " For counts and names: {u}; declare it as junit-xml (report_path first, then \
             report — see docs/config.md)."
        ));
    }
    if p.report == ReportKind::JunitXml && p.stack == "python" {
        s.push_str(
            " pytest writes it itself with --junitxml; the report_path is set before the kind, \
             as config set requires.",
        );
    }
    s.push_str(
        " The command runs in a fresh detached worktree at the exact SHA, and only its green \
         moves refs/saphan/verified.",
    );
    s.push_str(match origin {
        super::Origin::Repository => {
            " The declaration lives in this repository's saphan state \
             (<git-common-dir>/saphan/config, never a file of the tree it certifies) and wins \
             over SAPHAN_HOME/config for this repository only."
        }
        super::Origin::Operator => {
            " The declaration lives in SAPHAN_HOME/config and applies to every repository \
             this account certifies that declares none of its own."
        }
    });
    s
}

/// Errors of `saphan init` itself (config errors pass through as
/// [`super::ConfigError`]).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `--repo` is not a directory.
    #[error("{} is not a directory — pass the repository's root with --repo", path.display())]
    NoDirectory { path: PathBuf },
}

impl Refusal for InitError {
    fn name(&self) -> &'static str {
        match self {
            InitError::NoDirectory { .. } => "init-repo-missing",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_has_a_proposal() {
        for m in marker_names() {
            let p = proposal_for(m).unwrap();
            assert_eq!(p.marker, m);
            assert!(!argv_vec(&p).iter().any(String::is_empty));
        }
        assert_eq!(proposal_for("Makefile"), None);
        assert_eq!(
            marker_names(),
            [
                "go.mod",
                "package.json",
                "Cargo.toml",
                "pyproject.toml",
                "Package.swift",
                "pom.xml",
                "build.gradle",
                "build.gradle.kts"
            ]
        );
    }

    #[test]
    fn swift_commands_match_the_spec() {
        let p = proposal_for("Package.swift").unwrap();
        assert_eq!(detected(&p), "a swift project (Package.swift)");
        assert_eq!(
            commands(&p, None),
            [
                "saphan config set verify.full.argv \"swift,test\"".to_string(),
                "saphan config set verify.full.report exitcode".to_string(),
            ]
        );
        assert_eq!(
            commands(&p, Some(Path::new("/src/my app"))),
            [
                "saphan config set --repo '/src/my app' verify.full.argv \"swift,test\""
                    .to_string(),
                "saphan config set --repo '/src/my app' verify.full.report exitcode".to_string(),
            ]
        );
    }

    #[test]
    fn first_match_wins() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("package.json"), "{}").unwrap();
        assert_eq!(detect(d.path()).unwrap().stack, "node");
        std::fs::write(d.path().join("go.mod"), "module x\n").unwrap();
        assert_eq!(detect(d.path()).unwrap().stack, "go");
        let e = tempfile::tempdir().unwrap();
        std::fs::create_dir(e.path().join("go.mod")).unwrap();
        assert_eq!(
            detect(e.path()),
            None,
            "a directory named go.mod is not a marker"
        );
    }

    #[test]
    fn a_pytest_project_gets_junit_xml_and_plain_python_the_floor() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("pyproject.toml"), "[project]\nname = \"x\"\n").unwrap();
        let p = detect(d.path()).unwrap();
        assert_eq!(
            (p.marker, p.report),
            ("pyproject.toml", ReportKind::Exitcode)
        );
        for (file, text) in [
            ("pyproject.toml", "[tool.pytest.ini_options]\n"),
            ("setup.cfg", "[tool:pytest]\ntestpaths = t\n"),
            ("tox.ini", "[testenv]\ncommands = pytest\n"),
            ("pytest.ini", ""),
            ("conftest.py", ""),
        ] {
            let d = tempfile::tempdir().unwrap();
            std::fs::write(d.path().join(file), text).unwrap();
            let p = detect(d.path()).unwrap();
            assert_eq!((p.marker, p.report), (file, ReportKind::JunitXml), "{file}");
            assert_eq!(
                keys(&p),
                [
                    (
                        "verify.full.argv".to_string(),
                        "pytest,--junitxml=reports/junit.xml".to_string()
                    ),
                    ("verify.full.report_path".into(), "reports/junit.xml".into()),
                    ("verify.full.report".into(), "junit-xml".into()),
                ]
            );
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("setup.cfg"), "[metadata]\nname = x\n").unwrap();
        assert_eq!(
            detect(d.path()),
            None,
            "a setup.cfg that does not name pytest is no marker"
        );
        std::fs::write(d.path().join("go.mod"), "module x\n").unwrap();
        std::fs::write(d.path().join("conftest.py"), "").unwrap();
        assert_eq!(
            detect(d.path()).unwrap().stack,
            "go",
            "first match still wins"
        );
    }
}
