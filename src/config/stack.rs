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
}

impl Proposal {
    /// "a swift", "an npm"… for the refusal sentence.
    pub fn article_stack(&self) -> String {
        let first = self.stack.chars().next().unwrap_or('x');
        let article = if "aeiou".contains(first) { "an" } else { "a" };
        format!("{article} {}", self.stack)
    }
}

/// The markers in detection order, with their proposals.
pub const MARKERS: &[Proposal] = &[
    Proposal {
        stack: "go",
        marker: "go.mod",
        argv: "go,test,-count=1,-json,./...",
        report: ReportKind::GoTestJson,
    },
    Proposal {
        stack: "node",
        marker: "package.json",
        argv: "npm,test",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "rust",
        marker: "Cargo.toml",
        argv: "cargo,test",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "python",
        marker: "pyproject.toml",
        argv: "pytest",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "swift",
        marker: "Package.swift",
        argv: "swift,test",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "maven",
        marker: "pom.xml",
        argv: "mvn,test",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "gradle",
        marker: "build.gradle",
        argv: "gradle,test",
        report: ReportKind::Exitcode,
    },
    Proposal {
        stack: "gradle",
        marker: "build.gradle.kts",
        argv: "gradle,test",
        report: ReportKind::Exitcode,
    },
];

/// The first marker present at `dir`, in [`MARKERS`] order.
pub fn detect(dir: &Path) -> Option<Proposal> {
    detect_with(|m| dir.join(m).is_file())
}

/// The first marker for which `has(marker)` holds, in [`MARKERS`] order —
/// e.g. asked of the files of one commit's tree rather than a directory.
pub fn detect_with(has: impl Fn(&str) -> bool) -> Option<Proposal> {
    MARKERS.iter().find(|p| has(p.marker)).cloned()
}
