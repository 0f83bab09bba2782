//! The proc-adapter file protocol of the affected tier (spec: "The engine
//! does not implement ecosystem graphs").
//!
//! The engine and every adapter — the bundled `saphan adapter go-affected`
//! or any later stack's own program — speak through three paths handed over
//! in the environment, never on the command line:
//!
//! | variable | direction | what |
//! | --- | --- | --- |
//! | [`ENV_MANIFEST`] | engine → adapter | a [`Manifest`]: repository, base, head, changed paths |
//! | [`ENV_SCOPE_OUT`] | adapter → engine | a [`Scope`], written **before** the adapter runs its suite |
//! | [`ENV_REPORT_DIR`] | adapter → engine | a fresh, empty directory; a junit-xml adapter writes its report beneath it and `report_path` is relative to it |
//!
//! Both files are JSON objects carrying `"version": 1`. A reader refuses a
//! version it does not know rather than guessing at its fields; a format
//! change bumps the version. (`Scope::package_of` joined version 1 without
//! a bump: it is optional to parse, and only a scope that already left a
//! changed path unaccounted for — which version 1 always forbade — needs it.)

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The protocol version this engine writes and accepts.
pub const VERSION: u32 = 1;

/// Environment variable naming the manifest file.
pub const ENV_MANIFEST: &str = "SAPHAN_AFFECTED_MANIFEST";
/// Environment variable naming where the adapter writes its scope record.
pub const ENV_SCOPE_OUT: &str = "SAPHAN_AFFECTED_SCOPE_OUT";
/// Environment variable naming the fresh report directory (junit-xml adapters).
pub const ENV_REPORT_DIR: &str = "SAPHAN_AFFECTED_REPORT_DIR";

/// What the engine asks: which paths changed between `base` and `head`.
///
/// Example:
/// ```json
/// {"version":1,"repository":"/src/app","base":"3f2c…","head":"9a1b…",
///  "changed_paths":["go.mod","internal/leaf/leaf.go"]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`VERSION`].
    pub version: u32,
    /// The repository's top directory as the operator named it (absolute).
    /// The adapter runs elsewhere: in a detached worktree at `head`, which
    /// is its current directory.
    pub repository: String,
    /// The base commit, a full SHA.
    pub base: String,
    /// The head commit, a full SHA; the worktree the adapter runs in is
    /// checked out exactly here.
    pub head: String,
    /// `git diff --name-only --no-renames base...head`: repository-relative,
    /// `/`-separated, sorted, unique. A rename appears as its deleted old
    /// path and its added new path.
    pub changed_paths: Vec<String>,
}

/// One changed path that maps to no package, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoPackagePath {
    /// The path, as in the manifest.
    pub path: String,
    /// Why it selects nothing (e.g. `documentation`).
    pub reason: String,
}

/// One changed path that widened the run to every package, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WideningPath {
    /// The path, as in the manifest.
    pub path: String,
    /// Why it could not be mapped safely (e.g. `go.mod changes how every package builds`).
    pub reason: String,
}

/// What the adapter decided to run: its answer to the manifest, written to
/// [`ENV_SCOPE_OUT`] before its suite starts.
///
/// "Packages" are whatever unit the adapter's stack selects (Go import
/// paths for go-affected; Gradle projects, Swift targets … for others).
/// `selected_packages` ∪ `omitted_packages` is every package the adapter
/// knows, and the two never overlap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    /// Always [`VERSION`].
    pub version: u32,
    /// Who wrote it, e.g. `saphan adapter go-affected`.
    pub adapter: String,
    /// The manifest's `changed_paths`, echoed: the engine checks the adapter
    /// answered the question it was asked.
    pub changed_paths: Vec<String>,
    /// Changed paths that map to no package.
    pub no_package_paths: Vec<NoPackagePath>,
    /// Packages a changed path belongs to (existing at head), sorted.
    pub changed_packages: Vec<String>,
    /// Which package each changed path belongs to: every changed path that
    /// is neither a no-package path nor a widening path is a key here, and
    /// its value is one of `changed_packages` or `deleted_packages`. The
    /// engine checks this, so no changed path goes unaccounted by silence.
    #[serde(default)]
    pub package_of: std::collections::BTreeMap<String, String>,
    /// Packages whose directory a change deleted: not runnable, but whatever
    /// still imports them is selected. Sorted; may be empty.
    #[serde(default)]
    pub deleted_packages: Vec<String>,
    /// Packages the suite runs, sorted.
    pub selected_packages: Vec<String>,
    /// Packages the suite does not run, sorted.
    pub omitted_packages: Vec<String>,
    /// True when a path could not be mapped safely and every package was selected.
    pub widened: bool,
    /// The paths that widened the run, each with its reason; non-empty
    /// exactly when `widened`.
    pub widened_by: Vec<WideningPath>,
    /// Seconds the adapter spent deciding (listing packages, mapping,
    /// closure), measured by the adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_seconds: Option<f64>,
    /// The exact command the adapter runs next (empty when nothing is selected).
    #[serde(default)]
    pub suite_argv: Vec<String>,
    /// Seconds each package's tests took, as the suite reported them. The
    /// one field an adapter may add by rewriting its scope (atomically)
    /// after the suite ends; absent when the suite never finished.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub package_seconds: std::collections::BTreeMap<String, f64>,
}

/// Why a protocol file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolIssue {
    /// The file does not exist.
    Missing,
    /// The file could not be read.
    Unreadable(String),
    /// Not JSON of the expected shape.
    Malformed(String),
    /// A version this engine does not know.
    Version(u32),
    /// Well-formed but self-contradictory (e.g. widened with no reason).
    Inconsistent(String),
    /// The scope leaves part of the question unanswered: a changed package
    /// that is not run, or a changed path no package, no-package reason or
    /// widening accounts for.
    Contradicted(String),
}

impl std::fmt::Display for ProtocolIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolIssue::Missing => write!(f, "the file does not exist"),
            ProtocolIssue::Unreadable(e) => write!(f, "the file cannot be read: {e}"),
            ProtocolIssue::Malformed(e) => write!(f, "the file is not a valid record: {e}"),
            ProtocolIssue::Version(v) => {
                write!(
                    f,
                    "version {v} is not known (this saphan speaks version {VERSION})"
                )
            }
            ProtocolIssue::Inconsistent(e) => write!(f, "the record contradicts itself: {e}"),
            ProtocolIssue::Contradicted(e) => write!(f, "{e}"),
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<(T, u32), ProtocolIssue> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ProtocolIssue::Missing),
        Err(e) => return Err(ProtocolIssue::Unreadable(e.to_string())),
    };
    // Look at the version first so a future format is named as such rather
    // than as a missing field.
    #[derive(Deserialize)]
    struct Versioned {
        version: u32,
    }
    let v: Versioned =
        serde_json::from_slice(&bytes).map_err(|e| ProtocolIssue::Malformed(e.to_string()))?;
    if v.version != VERSION {
        return Err(ProtocolIssue::Version(v.version));
    }
    let t = serde_json::from_slice(&bytes).map_err(|e| ProtocolIssue::Malformed(e.to_string()))?;
    Ok((t, v.version))
}

impl Manifest {
    /// Read and check a manifest.
    pub fn read(path: &Path) -> Result<Manifest, ProtocolIssue> {
        let (m, _): (Manifest, _) = read_json(path)?;
        if m.changed_paths.iter().any(|p| !is_relative_clean(p)) {
            return Err(ProtocolIssue::Inconsistent(
                "a changed path is absolute or climbs out of the repository".into(),
            ));
        }
        Ok(m)
    }
}

impl Scope {
    /// Read a scope record and check it against itself. (That it answers
    /// the right manifest is [`Scope::check_against`].)
    pub fn read(path: &Path) -> Result<Scope, ProtocolIssue> {
        let (s, _): (Scope, _) = read_json(path)?;
        s.check()?;
        Ok(s)
    }

    /// The internal consistency rules: widened ⇔ a widening path is named;
    /// selected and omitted are disjoint.
    pub fn check(&self) -> Result<(), ProtocolIssue> {
        if self.widened == self.widened_by.is_empty() {
            return Err(ProtocolIssue::Inconsistent(if self.widened {
                "widened is true but widened_by names no path".into()
            } else {
                "widened is false but widened_by names paths".into()
            }));
        }
        let selected: std::collections::HashSet<&str> =
            self.selected_packages.iter().map(String::as_str).collect();
        if let Some(p) = self
            .omitted_packages
            .iter()
            .find(|p| selected.contains(p.as_str()))
        {
            return Err(ProtocolIssue::Inconsistent(format!(
                "{p} is both selected and omitted"
            )));
        }
        self.check_accounted()
    }

    /// Nothing the change touched goes unrun by silence: every changed
    /// package is selected (or listed deleted), and every changed path is a
    /// no-package path, a widening path, or mapped by `package_of` to a
    /// changed or deleted package.
    pub fn check_accounted(&self) -> Result<(), ProtocolIssue> {
        let selected: std::collections::HashSet<&str> =
            self.selected_packages.iter().map(String::as_str).collect();
        let unrun: Vec<&str> = self
            .changed_packages
            .iter()
            .map(String::as_str)
            .filter(|p| !selected.contains(p) && !self.deleted_packages.iter().any(|d| d == p))
            .collect();
        if !unrun.is_empty() {
            return Err(ProtocolIssue::Contradicted(format!(
                "the changed package(s) {} are neither selected nor deleted — a changed package is always run",
                unrun.join(", ")
            )));
        }
        let owners: std::collections::HashSet<&str> = self
            .changed_packages
            .iter()
            .chain(&self.deleted_packages)
            .map(String::as_str)
            .collect();
        if let Some((p, _)) = self
            .package_of
            .iter()
            .find(|(p, _)| !self.changed_paths.iter().any(|c| c == *p))
        {
            return Err(ProtocolIssue::Inconsistent(format!(
                "package_of names {p}, which is not a changed path"
            )));
        }
        let unaccounted: Vec<String> = self
            .changed_paths
            .iter()
            .filter(|p| {
                !self.no_package_paths.iter().any(|n| n.path == **p)
                    && !self.widened_by.iter().any(|w| w.path == **p)
            })
            .filter_map(|p| match self.package_of.get(p) {
                Some(pkg) if owners.contains(pkg.as_str()) => None,
                Some(pkg) => Some(format!(
                    "{p} (package_of names {pkg}, which is neither a changed nor a deleted package)"
                )),
                None => Some(p.clone()),
            })
            .collect();
        if !unaccounted.is_empty() {
            return Err(ProtocolIssue::Contradicted(format!(
                "the changed path(s) {} are accounted for nowhere — every changed path must be a no_package_paths or widened_by entry, or a package_of key whose package is changed or deleted",
                unaccounted.join(", ")
            )));
        }
        Ok(())
    }

    /// Check the scope answers `manifest`: the echoed changed paths match.
    pub fn check_against(&self, manifest: &Manifest) -> Result<(), ProtocolIssue> {
        let mut a = self.changed_paths.clone();
        a.sort();
        a.dedup();
        if a != manifest.changed_paths {
            return Err(ProtocolIssue::Inconsistent(format!(
                "its changed_paths ({} paths) are not the manifest's ({} paths) — the adapter answered another question",
                self.changed_paths.len(),
                manifest.changed_paths.len()
            )));
        }
        Ok(())
    }

    /// The sum of `package_seconds` over `packages`, when every one of them
    /// was timed; `None` otherwise (never a 0 nobody measured).
    pub fn seconds_of(&self, packages: &[String]) -> Option<f64> {
        packages
            .iter()
            .map(|p| self.package_seconds.get(p).copied())
            .try_fold(0.0f64, |acc, s| s.map(|s| acc + s))
            .map(|s| (s * 1000.0).round() / 1000.0)
    }

    /// `selected_packages` minus `changed_packages`: what the reverse
    /// closure added beyond the packages the change touched.
    pub fn closure_added(&self) -> Vec<String> {
        let changed: std::collections::HashSet<&str> =
            self.changed_packages.iter().map(String::as_str).collect();
        self.selected_packages
            .iter()
            .filter(|p| !changed.contains(p.as_str()))
            .cloned()
            .collect()
    }
}

/// A repository-relative path that stays inside the repository: not empty,
/// not absolute, no `..`, `.` or empty component.
pub fn is_relative_clean(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            version: VERSION,
            adapter: "t".into(),
            changed_paths: vec!["a/a.go".into()],
            no_package_paths: vec![],
            changed_packages: vec!["m/a".into()],
            package_of: [("a/a.go".to_string(), "m/a".to_string())].into(),
            deleted_packages: vec![],
            selected_packages: vec!["m/a".into(), "m/b".into()],
            omitted_packages: vec!["m/c".into()],
            widened: false,
            widened_by: vec![],
            selection_seconds: Some(0.1),
            suite_argv: vec![],
            package_seconds: Default::default(),
        }
    }

    #[test]
    fn scope_round_trips_and_checks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("scope.json");
        std::fs::write(&p, serde_json::to_vec(&scope()).unwrap()).unwrap();
        let s = Scope::read(&p).unwrap();
        assert_eq!(s, scope());
        assert_eq!(s.closure_added(), vec!["m/b".to_string()]);
    }

    #[test]
    fn scope_refuses_unknown_version_missing_and_contradictions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("scope.json");
        assert_eq!(Scope::read(&p), Err(ProtocolIssue::Missing));
        let mut v = serde_json::to_value(scope()).unwrap();
        v["version"] = 2.into();
        std::fs::write(&p, v.to_string()).unwrap();
        assert_eq!(Scope::read(&p), Err(ProtocolIssue::Version(2)));
        let mut s = scope();
        s.widened = true;
        std::fs::write(&p, serde_json::to_vec(&s).unwrap()).unwrap();
        assert!(matches!(
            Scope::read(&p),
            Err(ProtocolIssue::Inconsistent(_))
        ));
        let mut s = scope();
        s.omitted_packages.push("m/a".into());
        assert!(matches!(s.check(), Err(ProtocolIssue::Inconsistent(_))));
        std::fs::write(&p, "{\"version\":1}").unwrap();
        assert!(matches!(Scope::read(&p), Err(ProtocolIssue::Malformed(_))));
    }

    #[test]
    fn scope_must_run_every_changed_package_and_account_for_every_path() {
        let mut s = scope();
        s.selected_packages = vec!["m/b".into()];
        assert!(matches!(s.check(), Err(ProtocolIssue::Contradicted(_))));
        s.deleted_packages = vec!["m/a".into()];
        assert!(s.check().is_ok());
        // A second changed path the scope is silent about is refused even
        // though a changed package is named (the reviewer's a/ + b/ case).
        let mut s = scope();
        s.changed_paths.push("b/b.go".into());
        assert!(matches!(s.check(), Err(ProtocolIssue::Contradicted(e)) if e.contains("b/b.go")));
        // Mapping it to a package that is not changed is refused too.
        s.package_of.insert("b/b.go".into(), "m/b".into());
        assert!(matches!(s.check(), Err(ProtocolIssue::Contradicted(e)) if e.contains("m/b")));
        s.changed_packages.push("m/b".into());
        s.selected_packages.push("m/b".into());
        assert!(s.check().is_ok());
        // package_of may only name changed paths.
        s.package_of.insert("c/c.go".into(), "m/a".into());
        assert!(matches!(s.check(), Err(ProtocolIssue::Inconsistent(_))));
        let mut s = scope();
        s.changed_packages.clear();
        assert!(matches!(s.check(), Err(ProtocolIssue::Contradicted(_))));
        s.package_of.clear();
        assert!(matches!(s.check(), Err(ProtocolIssue::Contradicted(_))));
        s.no_package_paths = vec![NoPackagePath {
            path: "a/a.go".into(),
            reason: "r".into(),
        }];
        assert!(s.check().is_ok());
    }

    #[test]
    fn scope_must_answer_the_manifest() {
        let m = Manifest {
            version: VERSION,
            repository: "/r".into(),
            base: "a".into(),
            head: "b".into(),
            changed_paths: vec!["a/a.go".into(), "b/b.go".into()],
        };
        assert!(scope().check_against(&m).is_err());
        let mut s = scope();
        s.changed_paths = vec!["b/b.go".into(), "a/a.go".into()];
        assert!(s.check_against(&m).is_ok());
    }

    #[test]
    fn manifest_refuses_escaping_paths() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.json");
        for bad in ["../x", "/etc/passwd", "a//b", "a/./b", ""] {
            let m = serde_json::json!({"version":1,"repository":"/r","base":"a","head":"b","changed_paths":[bad]});
            std::fs::write(&p, m.to_string()).unwrap();
            assert!(
                matches!(Manifest::read(&p), Err(ProtocolIssue::Inconsistent(_))),
                "{bad}"
            );
        }
    }
}
