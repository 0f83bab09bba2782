//! The closed capability catalog (`catalog/capabilities.toml`, embedded at
//! build time, overridable with `--catalog FILE`).
//!
//! A row names the programs that map to it (so a suite's `argv[0]` finds its
//! row), a version command, the descriptive `machines` column (the historical
//! m0..m3 topology — never an allow-list) and install commands per platform.

use crate::error::Refusal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The row-specific keys a capability row may carry besides the common ones.
pub const EXTRA_KEYS: &[&str] = &["image", "socket"];

/// The capability kinds.
pub const KINDS: &[&str] = &["toolchain", "container", "sandbox"];

/// Is `name` probed by the toolchain probe (everything but docker-oci and
/// sandbox-userns, which have their own)?
pub fn is_toolchain_probe(name: &str) -> bool {
    name != "docker-oci" && name != "sandbox-userns"
}

/// The catalog shipped inside the binary.
pub const EMBEDDED: &str = include_str!("../catalog/capabilities.toml");

/// Errors loading or querying the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog file could not be read.
    #[error("cannot read catalog {path}: {source} — pass an existing file to --catalog")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The catalog is not valid TOML of the catalog's shape.
    #[error(
        "catalog {origin} is malformed: {detail} — fix the file, or drop --catalog to use the embedded one"
    )]
    Malformed { origin: String, detail: String },
    /// A capability name that the closed catalog does not hold.
    #[error(
        "`{name}` is not a capability in the catalog ({known}) — pick one of those; `saphan catalog show` lists them"
    )]
    Unknown { name: String, known: String },
}

impl Refusal for CatalogError {
    fn name(&self) -> &'static str {
        match self {
            CatalogError::Read { .. } => "catalog-unreadable",
            CatalogError::Malformed { .. } => "catalog-malformed",
            CatalogError::Unknown { .. } => "capability-unknown",
        }
    }
}

/// One capability row. Unknown keys are refused by [`Catalog::parse`]
/// (serde cannot combine `deny_unknown_fields` with the flattened `extra`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Capability {
    /// `toolchain`, `container` or `sandbox`.
    pub kind: String,
    /// `argv[0]` names (basenames) that map to this row.
    #[serde(default)]
    pub programs: Vec<String>,
    /// The version command; `{path}` stands for the declared program path.
    #[serde(default)]
    pub version: Vec<String>,
    /// A regular expression the version command's output must match for the
    /// program to count as present (required for toolchain rows): exiting 0
    /// is not enough — `/bin/true` declared as `go` exits 0 too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_pattern: Option<String>,
    /// Descriptive: where the historical m0..m3 topology carried it.
    #[serde(default)]
    pub machines: Vec<String>,
    /// Install command per platform id (`debian`, `ubuntu`, `fedora`, `alpine`, `darwin` …).
    #[serde(default)]
    pub install: BTreeMap<String, String>,
    /// Extra row-specific settings, a closed set ([`EXTRA_KEYS`]): the
    /// docker-oci image pin (`image`) and engine socket (`socket`).
    #[serde(default, flatten)]
    pub extra: BTreeMap<String, toml::Value>,
}

/// The syntax of a `version_pattern`: regex syntax whose `\\d`, `\\s` …
/// are ASCII, matched against bytes.
fn pattern_syntax() -> regex_automata::util::syntax::Config {
    regex_automata::util::syntax::Config::new()
        .unicode(false)
        .utf8(false)
}

/// Compile a `version_pattern` (regex syntax; `\\d`, `\\s` … are ASCII).
pub fn compile_pattern(p: &str) -> Result<regex_automata::meta::Regex, String> {
    regex_automata::meta::Regex::builder()
        .syntax(pattern_syntax())
        .build(p)
        .map_err(|e| e.to_string())
}

/// Check that `p` is a `version_pattern` [`compile_pattern`] accepts, by
/// parsing it only: every run loads the catalog, and building the
/// matcher of each row (its automata) costs more than the rest of the
/// parse; a row's matcher is built when its version output is matched.
pub fn check_pattern(p: &str) -> Result<(), String> {
    regex_automata::util::syntax::parse_with(p, &pattern_syntax())
        .map(drop)
        .map_err(|e| e.to_string())
}

impl Capability {
    /// Does `output` match this row's `version_pattern` (`true` when it has none)?
    pub fn version_matches(&self, output: &str) -> bool {
        match &self.version_pattern {
            None => true,
            Some(p) => compile_pattern(p)
                .map(|re| re.is_match(output.as_bytes()))
                .unwrap_or(false),
        }
    }

    /// The install command for the first of `platform_ids` that has one.
    pub fn install_for(&self, platform_ids: &[String]) -> Option<&str> {
        platform_ids
            .iter()
            .find_map(|p| self.install.get(p).map(String::as_str))
    }

    /// Lowercase hex sha256 of this row's canonical JSON, prefixed by its
    /// name: `sha256(canonical_json({"name": name, "row": <this row>}))`.
    /// Capability rows in the ledger store it; a row measured against an
    /// entry that has since changed (a new version command, a new pinned
    /// image digest) is no longer fresh.
    pub fn digest(&self, name: &str) -> String {
        let row = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        let v = serde_json::json!({ "name": name, "row": row });
        crate::fsutil::sha256_hex(crate::canonical::canonical_json(&v).as_bytes())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    capability: BTreeMap<String, Capability>,
}

/// The closed set of capability rows.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Rows by capability name.
    pub rows: BTreeMap<String, Capability>,
    /// `embedded` or the override path.
    pub origin: String,
}

impl Catalog {
    /// The `--catalog` a printed remedy must carry to run against this
    /// catalog: `None` for the embedded one and for `home`'s own
    /// `catalog.toml` (every command picks that up without a flag), the
    /// override's path otherwise.
    pub fn flag_path(&self, home: &crate::home::Home) -> Option<&std::path::Path> {
        let p = std::path::Path::new(&self.origin);
        (self.origin != "embedded" && p != home.catalog()).then_some(p)
    }

    /// Parse catalog text.
    pub fn parse(text: &str, origin: &str) -> Result<Catalog, CatalogError> {
        Catalog::parse_with(text, origin, true)
    }

    /// [`Catalog::parse`]; `check_patterns: false` skips each row's
    /// `version_pattern` syntax check, for the embedded catalog only: its
    /// text is fixed at build time and the test
    /// `embedded_patterns_are_regular_expressions` holds every pattern in
    /// it to the check, so every run need not repeat it (two fifths of the
    /// catalog's load time in a `perf record` of a refused certify).
    fn parse_with(text: &str, origin: &str, check_patterns: bool) -> Result<Catalog, CatalogError> {
        let f: File = toml::from_str(text).map_err(|e| CatalogError::Malformed {
            origin: origin.to_string(),
            detail: crate::fsutil::toml_error_where(text, &e),
        })?;
        for (name, row) in &f.capability {
            let bad = |detail: String| CatalogError::Malformed {
                origin: origin.to_string(),
                detail,
            };
            if !KINDS.contains(&row.kind.as_str()) {
                return Err(bad(format!(
                    "capability `{name}` has kind `{}`; a kind is one of {}",
                    row.kind,
                    KINDS.join(", ")
                )));
            }
            // The probe is chosen by the capability's name, never by its
            // kind; a name that carries another kind is refused so the file
            // cannot claim one probe while getting another.
            let must = match name.as_str() {
                "docker-oci" => Some("container"),
                "sandbox-userns" => Some("sandbox"),
                _ => None,
            };
            match must {
                Some(k) if row.kind != k => {
                    return Err(bad(format!(
                        "capability `{name}` has kind `{}`, but `{name}` is always of kind `{k}`",
                        row.kind
                    )));
                }
                None if row.kind != "toolchain" => {
                    return Err(bad(format!(
                        "capability `{name}` has kind `{}`, which only docker-oci (container) and sandbox-userns (sandbox) carry; every other row is a toolchain",
                        row.kind
                    )));
                }
                _ => {}
            }
            match &row.version_pattern {
                None if row.kind == "toolchain" => {
                    return Err(bad(format!(
                        "capability `{name}` has no `version_pattern`; a toolchain row needs one (a regular expression its version output must match)"
                    )));
                }
                Some(p) if check_patterns => {
                    check_pattern(p).map_err(|e| {
                        bad(format!(
                            "capability `{name}`: version_pattern `{p}` is not a regular expression: {e}"
                        ))
                    })?;
                }
                Some(_) | None => {}
            }
            if let Some(k) = row.extra.keys().find(|k| !EXTRA_KEYS.contains(&k.as_str())) {
                return Err(CatalogError::Malformed {
                    origin: origin.to_string(),
                    detail: format!("unknown field `{k}` in capability `{name}`"),
                });
            }
        }
        Ok(Catalog {
            rows: f.capability,
            origin: origin.to_string(),
        })
    }

    /// The embedded catalog, or the file at `path`.
    pub fn load(path: Option<&Path>) -> Result<Catalog, CatalogError> {
        match path {
            None => Catalog::parse_with(EMBEDDED, "embedded", false),
            Some(p) => {
                let bytes = std::fs::read(p).map_err(|source| CatalogError::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                let text = crate::fsutil::utf8_or_where(bytes).map_err(|detail| {
                    CatalogError::Malformed {
                        origin: p.display().to_string(),
                        detail,
                    }
                })?;
                Catalog::parse(&text, &p.display().to_string())
            }
        }
    }

    /// The catalog a command uses: the `--catalog` file when one is given,
    /// else `SAPHAN_HOME/catalog.toml` ([`crate::home::Home::catalog`],
    /// written by `saphan catalog pin` (`crate::commands::catalog::pin`)) when it exists, else the embedded one. The
    /// home file decides the docker-oci pin, so it is checked like
    /// `fleet/machines.toml`: SAPHAN_HOME and the file must be the
    /// operator's alone.
    ///
    /// Errors: `saphan-home-exposed` (before the home file is read),
    /// `catalog-unreadable`, `catalog-malformed`.
    pub fn for_home(
        home: &crate::home::Home,
        flag: Option<&Path>,
    ) -> crate::error::Result<Catalog> {
        if let Some(p) = flag {
            return Ok(Catalog::load(Some(p))?);
        }
        let p = home.catalog();
        if std::fs::symlink_metadata(&p).is_err() {
            return Ok(Catalog::load(None)?);
        }
        crate::home::check_dirs(&[home.root(), &p])?;
        Ok(Catalog::load(Some(&p))?)
    }

    /// The row named `name`, or [`CatalogError::Unknown`].
    pub fn get(&self, name: &str) -> Result<&Capability, CatalogError> {
        self.rows.get(name).ok_or_else(|| CatalogError::Unknown {
            name: name.to_string(),
            known: self.rows.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The row whose `programs` holds the basename of `argv0`.
    pub fn for_program(&self, argv0: &str) -> Option<(&str, &Capability)> {
        let base = argv0.rsplit('/').next().unwrap_or(argv0);
        self.rows
            .iter()
            .find(|(_, c)| c.programs.iter().any(|p| p == base))
            .map(|(n, c)| (n.as_str(), c))
    }
}

/// `text` (a catalog file) with the docker-oci row's `image` set to
/// `image`, every other line kept as it was (comments included).
///
/// Errors: `catalog-malformed` when `text` is not TOML or holds no
/// `[capability.docker-oci]` table.
pub fn with_pinned_image(text: &str, image: &str, origin: &str) -> Result<String, CatalogError> {
    let bad = |detail: String| CatalogError::Malformed {
        origin: origin.to_string(),
        detail,
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| bad(e.message().to_string()))?;
    let row = doc
        .get_mut("capability")
        .and_then(|c| c.get_mut("docker-oci"))
        .and_then(|r| r.as_table_like_mut())
        .ok_or_else(|| bad("it has no [capability.docker-oci] table to pin".into()))?;
    row.insert("image", toml_edit::value(image));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_patterns_are_regular_expressions() {
        // The check the embedded catalog's load skips (parse_with).
        let checked = Catalog::parse(EMBEDDED, "embedded").unwrap();
        let loaded = Catalog::load(None).unwrap();
        assert_eq!(checked.rows.len(), loaded.rows.len());
        let patterns: Vec<_> = checked
            .rows
            .values()
            .filter_map(|r| r.version_pattern.as_deref())
            .collect();
        assert!(patterns.len() >= 10, "{patterns:?}");
        for p in patterns {
            compile_pattern(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
    }

    #[test]
    fn embedded_parses_and_maps_programs() {
        let c = Catalog::load(None).unwrap();
        assert_eq!(c.for_program("/usr/bin/pytest").unwrap().0, "pytest");
        assert_eq!(c.for_program("go").unwrap().0, "go");
        assert!(c.for_program("frobnicate").is_none());
        let go = c.get("go").unwrap();
        assert_eq!(
            go.install_for(&["ubuntu".into(), "debian".into()]),
            Some("apt-get install -y golang-go")
        );
        assert!(matches!(c.get("nope"), Err(CatalogError::Unknown { .. })));
    }

    #[test]
    fn every_embedded_pattern_builds_its_matcher_and_a_broken_one_is_refused() {
        // The parse only checks syntax; the matchers are built on use, so
        // each embedded row's must build.
        let c = Catalog::load(None).unwrap();
        for (name, row) in &c.rows {
            if let Some(p) = &row.version_pattern {
                assert!(compile_pattern(p).is_ok(), "{name}: {p}");
            }
        }
        let go = c.get("go").unwrap();
        assert!(go.version_matches("go version go1.19.8 linux/amd64"));
        assert!(!go.version_matches(""));
        let broken = EMBEDDED.replacen(
            &format!(
                "version_pattern = '{}'",
                go.version_pattern.as_deref().unwrap()
            ),
            "version_pattern = 'go(1'",
            1,
        );
        assert_ne!(broken, EMBEDDED, "the go row's pattern line was found");
        let e = Catalog::parse(&broken, "t").unwrap_err().to_string();
        assert!(e.contains("is not a regular expression"), "{e}");
    }

    #[test]
    fn pinning_changes_only_the_image_line() {
        let h = "c6838e578d8c74290795d47c46e42f1005d6d67b210a781407bf6cc775447a1c";
        let t = with_pinned_image(EMBEDDED, &format!("sha256:{h}"), "e").unwrap();
        let c = Catalog::parse(&t, "t").unwrap();
        assert_eq!(
            c.get("docker-oci").unwrap().extra["image"].as_str(),
            Some(format!("sha256:{h}").as_str())
        );
        let changed: Vec<(&str, &str)> = EMBEDDED
            .lines()
            .zip(t.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(EMBEDDED.lines().count(), t.lines().count());
        assert!(with_pinned_image("[capability.go]\nkind = \"toolchain\"\n", "x", "e").is_err());
    }
}
