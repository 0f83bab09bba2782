//! Reading a parsed config-v1 document into its declaration, refusing every
//! hand-written problem by name: reserved, unknown and missing scopes,
//! unknown keys, a suite with no argv, a value of the wrong shape, junit-xml
//! without its path, a provision without repo.
//!
//! Sections outside `verify` belong to other tools and are not looked at,
//! except `[fleet] freshness`, which saphan reads.

use super::schema::{self, Scope};
use super::{At, ConfigError, Suite};
use crate::report::ReportKind;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml_edit::{DocumentMut, Item, TableLike};

/// One `[verify.provision.<alias>]` block as declared, possibly still being
/// staged (`repo` is mandatory; `source` and `dest` may not be set yet).
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredProvision {
    /// `<alias>`.
    pub alias: String,
    /// `repo` (absolute).
    pub repo: PathBuf,
    /// `source` (absolute), when set.
    pub source: Option<PathBuf>,
    /// `dest` (relative to the tree root), when set.
    pub dest: Option<String>,
}

/// Everything config-v1 declares, as written in the file (no defaults
/// applied). Staged provision blocks are allowed here; [`super::Config::load`]
/// refuses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// `[verify.full]`.
    pub full: Option<Suite>,
    /// `[verify.affected]`.
    pub affected: Option<Suite>,
    /// `[verify.provision.*]` in file order.
    pub provisions: Vec<DeclaredProvision>,
    /// `[fleet] freshness`.
    pub fleet_freshness: Option<Duration>,
}

/// Validate a whole document read from `path`: the first problem, in file
/// order, is the refusal.
///
/// Errors: every [`ConfigError`] a hand-written file can earn, with
/// `At::File(path)`.
pub fn validate(doc: &DocumentMut, path: &Path) -> Result<Declared, ConfigError> {
    let (declared, mut problems) = validate_all(doc, path);
    if problems.is_empty() {
        Ok(declared)
    } else {
        Err(problems.swap_remove(0))
    }
}

/// Validate a whole document and return every problem found, in file order
/// (within a block: unknown keys, bad values, then what is missing). The
/// declaration holds whatever was readable.
pub fn validate_all(doc: &DocumentMut, path: &Path) -> (Declared, Vec<ConfigError>) {
    let mut out = Declared::default();
    let mut errs = Vec::new();
    let at = || At::File(path.to_path_buf());
    let root = doc.as_table();

    if let Some(fresh) = root
        .get("fleet")
        .and_then(Item::as_table_like)
        .and_then(|t| t.get("freshness"))
    {
        match value_of(fresh, "fleet.freshness", path) {
            Ok(v) => match schema::check_value(None, "freshness", v) {
                Ok(()) => {
                    out.fleet_freshness = v.as_str().and_then(|s| schema::parse_duration(s).ok())
                }
                Err((what, fix)) => errs.push(invalid("fleet.freshness", v, what, fix, path)),
            },
            Err(e) => errs.push(e),
        }
    }

    let Some(verify) = root.get("verify") else {
        return (out, errs);
    };
    let Some(verify) = verify.as_table_like() else {
        errs.push(ConfigError::ValueInvalid {
            key: "verify".into(),
            value: shown(verify),
            what: "verify must be a table of scopes".into(),
            fix: format!(
                "declare [verify.full] and friends instead; edit {} by hand",
                path.display()
            ),
            at: at(),
        });
        return (out, errs);
    };
    for (name, item) in verify.iter() {
        match name {
            "full" | "affected" => {
                let scope = if name == "full" {
                    Scope::Full
                } else {
                    Scope::Affected
                };
                let suite = match table(item, &scope, path) {
                    Ok(t) => read_suite(&scope, t, path, &mut errs),
                    Err(e) => {
                        errs.push(e);
                        None
                    }
                };
                if name == "full" {
                    out.full = suite;
                } else {
                    out.affected = suite;
                }
            }
            "provision" => {
                let Some(blocks) = item.as_table_like() else {
                    errs.push(ConfigError::ValueInvalid {
                        key: "verify.provision".into(),
                        value: shown(item),
                        what: "verify.provision must hold named blocks, [verify.provision.<alias>]"
                            .into(),
                        fix: format!("edit {} by hand", path.display()),
                        at: at(),
                    });
                    continue;
                };
                for (alias, block) in blocks.iter() {
                    if !schema::alias_ok(alias) {
                        errs.push(ConfigError::AliasInvalid {
                            alias: alias.to_string(),
                            at: at(),
                        });
                        continue;
                    }
                    let scope = Scope::Provision(alias.to_string());
                    match table(block, &scope, path) {
                        Ok(t) => out
                            .provisions
                            .extend(read_provision(alias, t, path, &mut errs)),
                        Err(e) => errs.push(e),
                    }
                }
            }
            "surface" => errs.push(ConfigError::ScopeReserved {
                scope: "verify.surface".into(),
                at: at(),
            }),
            other if !is_table(item) => errs.push(ConfigError::ScopeMissing {
                key: other.to_string(),
                at: at(),
            }),
            other => errs.push(ConfigError::ScopeUnknown {
                scope: format!("verify.{other}"),
                at: at(),
            }),
        }
    }
    (out, errs)
}

fn is_table(item: &Item) -> bool {
    item.is_table_like() || item.is_array_of_tables()
}

fn shown(item: &Item) -> String {
    item.to_string().trim().to_string()
}

fn table<'a>(item: &'a Item, scope: &Scope, path: &Path) -> Result<&'a dyn TableLike, ConfigError> {
    item.as_table_like()
        .ok_or_else(|| ConfigError::ValueInvalid {
            key: scope.path(),
            value: shown(item),
            what: format!("{} must be one table, [{}]", scope.path(), scope.path()),
            fix: format!("edit {} by hand", path.display()),
            at: At::File(path.to_path_buf()),
        })
}

fn value_of<'a>(
    item: &'a Item,
    key: &str,
    path: &Path,
) -> Result<&'a toml_edit::Value, ConfigError> {
    item.as_value().ok_or_else(|| ConfigError::ValueInvalid {
        key: key.to_string(),
        value: shown(item),
        what: "it must be a value, not a table".into(),
        fix: format!("edit {} by hand", path.display()),
        at: At::File(path.to_path_buf()),
    })
}

fn invalid(key: &str, v: &toml_edit::Value, what: String, fix: String, path: &Path) -> ConfigError {
    ConfigError::value(
        key,
        v.to_string().trim().to_string(),
        what,
        fix,
        At::File(path.to_path_buf()),
    )
}

/// Check every key of the block: unknown keys and bad values become
/// problems; returns the good values by key.
fn checked<'a>(
    scope: &Scope,
    t: &'a dyn TableLike,
    path: &Path,
    errs: &mut Vec<ConfigError>,
) -> Vec<(&'a str, &'a toml_edit::Value)> {
    let mut vals = Vec::new();
    for (k, item) in t.iter() {
        if !scope.keys().contains(&k) {
            errs.push(ConfigError::KeyUnknown {
                scope: scope.path(),
                key: k.to_string(),
                suggestion: schema::suggest(k, scope.keys()),
                at: At::File(path.to_path_buf()),
            });
            continue;
        }
        let dotted = format!("{}.{k}", scope.path());
        match value_of(item, &dotted, path) {
            Ok(v) => match schema::check_value(Some(scope), k, v) {
                Ok(()) => vals.push((k, v)),
                Err((what, fix)) => errs.push(invalid(&dotted, v, what, fix, path)),
            },
            Err(e) => errs.push(e),
        }
    }
    vals
}

fn read_suite(
    scope: &Scope,
    t: &dyn TableLike,
    path: &Path,
    errs: &mut Vec<ConfigError>,
) -> Option<Suite> {
    let vals = checked(scope, t, path, errs);
    let get = |k: &str| vals.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    if !t.contains_key("argv") {
        errs.push(ConfigError::NoArgv {
            scope: scope.path(),
            path: path.to_path_buf(),
        });
    }
    let suite = Suite {
        argv: get("argv").and_then(|v| schema::argv_from_value(v).ok())?,
        report: get("report")
            .and_then(|v| v.as_str())
            .and_then(ReportKind::parse),
        report_path: get("report_path")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        timeout: get("timeout")
            .and_then(|v| v.as_str())
            .and_then(|s| schema::parse_budget(s).ok()),
        seal: get("seal")
            .and_then(|v| v.as_str())
            .and_then(crate::seal::Mode::parse),
        origin: super::Origin::Operator,
    };
    if suite.report == Some(ReportKind::JunitXml)
        && suite.report_path.is_none()
        && !t.contains_key("report_path")
    {
        errs.push(ConfigError::ReportPathMissing {
            scope: scope.path(),
            path: path.to_path_buf(),
        });
    }
    Some(suite)
}

fn read_provision(
    alias: &str,
    t: &dyn TableLike,
    path: &Path,
    errs: &mut Vec<ConfigError>,
) -> Option<DeclaredProvision> {
    let scope = Scope::Provision(alias.to_string());
    let vals = checked(&scope, t, path, errs);
    let get = |k: &str| {
        vals.iter()
            .find(|(key, _)| *key == k)
            .and_then(|(_, v)| v.as_str())
            .map(str::to_string)
    };
    if !t.contains_key("repo") {
        errs.push(ConfigError::ProvisionRepoMissing {
            alias: alias.to_string(),
            path: path.to_path_buf(),
        });
    }
    Some(DeclaredProvision {
        alias: alias.to_string(),
        repo: get("repo")?.into(),
        source: get("source").map(PathBuf::from),
        dest: get("dest"),
    })
}
