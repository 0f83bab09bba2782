//! config-v1: the operator's declaration in `SAPHAN_HOME/config` (TOML),
//! and a repository's own in `<git-common-dir>/saphan/config` — the same
//! keys and rules — which wins over the operator's for that repository.
//!
//! CONTRACT (the certify/affected code calls exactly this):
//! [`Config::for_repo`], the one place a repository's declaration is
//! resolved ([`Config::load`] for what only the operator declares), and the
//! plain types below. Everything else lives beside it:
//!
//! * [`schema`] — the closed vocabulary (scopes, keys, value shapes, argv
//!   splitting, durations);
//! * [`validate`] — a parsed document → [`Declared`], refusing every
//!   hand-written problem by name;
//! * [`edit`] — `config set` / `config unset` through toml_edit, so every other
//!   byte of the file stays as the operator wrote it;
//! * [`show`] — `config show`;
//! * [`init`] — stack detection and the two-key proposal of `saphan init`.
//!
//! Only `[verify.*]` (and the one key `[fleet] freshness`) belong to saphan;
//! every other section of the file belongs to someone else and is neither
//! read, refused nor touched.

pub mod edit;
pub mod init;
pub mod schema;
pub mod show;
pub mod stack;
pub mod validate;

pub use validate::{Declared, DeclaredProvision};

use crate::error::Refusal;
use crate::home::Home;
use crate::report::ReportKind;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[fleet] freshness` when the file does not set it: 24 hours.
pub const DEFAULT_FRESHNESS: Duration = Duration::from_secs(24 * 3600);

/// Which file a declaration lives in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The operator's: `SAPHAN_HOME/config`, for every repository.
    #[default]
    Operator,
    /// A repository's own: `<git-common-dir>/saphan/config` (never a file
    /// of the tree being certified: the code under test does not choose its
    /// own suite).
    Repository,
}

impl Origin {
    /// The prefix of a source word: `config` (`config:verify.full`) for the
    /// operator's, `repo-config` (`repo-config:verify.full`) for the
    /// repository's.
    pub fn prefix(self) -> &'static str {
        match self {
            Origin::Operator => "config",
            Origin::Repository => "repo-config",
        }
    }
}

/// `<common>/saphan/config`: the repository's own declaration, for the
/// repository whose git common dir (`git rev-parse --git-common-dir`,
/// absolute) is `common_dir`.
pub fn repo_config_path(common_dir: &Path) -> PathBuf {
    common_dir.join("saphan").join("config")
}

/// A config file saphan reads or edits, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub path: PathBuf,
    /// Whose declaration it holds.
    pub origin: Origin,
}

impl Place {
    /// The operator's: `home.config()`.
    pub fn operator(home: &Home) -> Place {
        Place {
            path: home.config(),
            origin: Origin::Operator,
        }
    }
    /// The repository's whose git common dir is `common_dir`
    /// ([`repo_config_path`]).
    pub fn repository(common_dir: &Path) -> Place {
        Place {
            path: repo_config_path(common_dir),
            origin: Origin::Repository,
        }
    }
}

/// Where a refused word came from: the file on disk, or the KEY/VALUE given
/// to `config set`/`unset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// Hand-written into this file.
    File(PathBuf),
    /// Given on the command line.
    Request,
}

/// Errors reading or editing config-v1. Each variant's [`Refusal::name`] is
/// stable and documented in `docs/config.md`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid TOML (or not UTF-8).
    #[error("{path} is not valid TOML: {detail} — fix the file by hand; nothing was changed")]
    Malformed { path: PathBuf, detail: String },
    /// The file exists but cannot be read.
    #[error("cannot read {path}: {source} — check the file's permissions")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The config path (after symlinks) is a FIFO, device, socket or
    /// directory: never read, since reading it could block or never end.
    #[error(
        "{path} is {kind}, not a regular file — nothing was read; make it a regular file (or a symlink to one)"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    /// The config file, the directory that holds it (SAPHAN_HOME), or —
    /// for a symlinked config — the directory of the file it resolves to,
    /// is owned by another user or writable by group or others: whoever can
    /// write it decides which suite runs and how it is judged.
    #[error(
        "{path}: {detail}; whoever can write it decides which suite runs and how its result is judged (`argv = [\"true\"]`, `report = \"exitcode\"`), so it is not read and nothing ran — run `{fix}`, then check the file for lines you did not write"
    )]
    Exposed {
        path: PathBuf,
        detail: String,
        fix: String,
    },
    /// The config file is larger than [`MAX_CONFIG_BYTES`].
    #[error(
        "{path} is larger than {limit} bytes — that is no hand-written config; check what it points at"
    )]
    TooLarge { path: PathBuf, limit: u64 },
    /// `verify.surface` is reserved.
    #[error("{}", reserved(scope, at))]
    ScopeReserved { scope: String, at: At },
    /// A scope under `verify` that config-v1 does not know.
    #[error("{}", unknown_scope(scope, at))]
    ScopeUnknown { scope: String, at: At },
    /// A key directly under `[verify]`, with no scope.
    #[error("{}", scope_missing(key, at))]
    ScopeMissing { key: String, at: At },
    /// A key outside its scope's closed set (a misspelling, usually).
    #[error("{}", unknown_key(scope, key, *suggestion, at))]
    KeyUnknown {
        scope: String,
        key: String,
        suggestion: Option<&'static str>,
        at: At,
    },
    /// A KEY of the wrong shape (`verify.full` for `set`, `verify..argv`).
    #[error(
        "`{key}` is not a KEY config-v1 can write: {why} — for example: saphan config set verify.full.argv \"npm,test\""
    )]
    KeyInvalid { key: String, why: String },
    /// A KEY outside `verify.*` and `fleet.freshness`.
    #[error(
        "`{key}` is outside config-v1 — saphan edits only verify.* and fleet.freshness; every other section of the file belongs to another tool: edit it by hand"
    )]
    KeyForeign { key: String },
    /// A provision alias that is not a plain name.
    #[error(
        "provision alias `{alias}`{} is not a plain name — use letters, digits, `-` and `_`, as in verify.provision.contract",
        located(at)
    )]
    AliasInvalid { alias: String, at: At },
    /// A suite block in the file with no argv.
    #[error("[{scope}] in {} is declared but names no argv, so there is no command to run — add one: saphan config set {scope}.argv \"<program>,<arg>,…\" (or remove the block: saphan config unset {scope})", path.display())]
    NoArgv { scope: String, path: PathBuf },
    /// `config set` of another key before the block has argv.
    #[error(
        "{scope} has no argv yet, so setting {scope}.{key} first would declare a block with nothing to run — set the command first: saphan config set {scope}.argv \"<program>,<arg>,…\""
    )]
    NoArgvYet { scope: String, key: String },
    /// `config unset` of argv while other keys remain.
    #[error(
        "unsetting {scope}.argv would leave [{scope}] declared with nothing to run — unset its other keys first, or remove the whole block: saphan config unset {scope}"
    )]
    ArgvStillNeeded { scope: String },
    /// A value of the wrong shape.
    #[error("{key} = {value}{} is refused: {what} — {fix}", located(at))]
    ValueInvalid {
        key: String,
        value: String,
        what: String,
        fix: String,
        at: At,
    },
    /// A provision `dest` that would land outside the tree (absolute, `..`)
    /// or inside `.git`.
    #[error(
        "{key} = {value}{} is refused: {what} — give a path inside the tree, like .provision/openapi.yaml",
        located(at)
    )]
    DestHostile {
        key: String,
        value: String,
        what: String,
        at: At,
    },
    /// `report = junit-xml` before `report_path` (config set).
    #[error(
        "{scope}.report_path is not set, so selecting junit-xml now would declare a file-based report with no file to read — set the path first, then the kind: saphan config set {scope}.report_path <glob relative to the repository root>"
    )]
    JunitNeedsPath { scope: String },
    /// Clearing `report_path` while junit-xml is selected (config unset).
    #[error(
        "{scope}.report is junit-xml, and clearing {scope}.report_path would leave it without its required input — change the kind first, then clear the path: saphan config set {scope}.report <go-test-json|exitcode>"
    )]
    PathNeededByJunit { scope: String },
    /// junit-xml without report_path, hand-written.
    #[error("[{scope}] in {} selects report = \"junit-xml\" but names no report_path, so there is no file to read — set it: saphan config set {scope}.report_path <glob relative to the repository root>", path.display())]
    ReportPathMissing { scope: String, path: PathBuf },
    /// A provision block in the file without `repo`.
    #[error("[verify.provision.{alias}] in {} names no repo, and repo is mandatory: an unscoped block would be placed into every tree saphan measures — repair it: saphan config set verify.provision.{alias}.repo <absolute path of the repository>", path.display())]
    ProvisionRepoMissing { alias: String, path: PathBuf },
    /// `config set` of source/dest before repo.
    #[error(
        "verify.provision.{alias} has no repo yet, so setting verify.provision.{alias}.{key} first would declare a block that applies to no repository — set the repo first: saphan config set verify.provision.{alias}.repo <absolute path of the repository>"
    )]
    ProvisionRepoFirst { alias: String, key: String },
    /// `config unset` of repo while source/dest remain.
    #[error(
        "unsetting verify.provision.{alias}.repo would leave the block without its mandatory repo — remove the whole block instead: saphan config unset verify.provision.{alias}"
    )]
    ProvisionRepoStillNeeded { alias: String },
    /// `fleet.freshness` in a repository's declaration: the freshness
    /// window judges the operator's fleet ledger, so only the operator's
    /// file declares it.
    #[error(
        "{key}{} belongs to the operator's declaration, not a repository's: the freshness window judges the fleet's ledger in SAPHAN_HOME for every repository — set it without --repo (saphan config set {key} <duration>){}",
        located(at),
        match at { At::File(_) => format!("; remove it here: saphan config unset --repo <repository> {key}"), At::Request => String::new() }
    )]
    OperatorOnly { key: String, at: At },
    /// A provision block still being staged (no source or no dest) when the
    /// declaration is used.
    #[error("[verify.provision.{alias}] in {} names no {key} yet, so there is nothing to place — finish it: saphan config set verify.provision.{alias}.{key} {}", path.display(), placeholder(key))]
    ProvisionIncomplete {
        alias: String,
        key: &'static str,
        path: PathBuf,
    },
}

fn located(at: &At) -> String {
    match at {
        At::File(p) => format!(" (in {})", p.display()),
        At::Request => String::new(),
    }
}

fn placeholder(key: &str) -> &'static str {
    match key {
        "source" => "<absolute path of the file>",
        _ => "<path inside the tree>",
    }
}

fn reserved(scope: &str, at: &At) -> String {
    match at {
        At::File(p) => format!(
            "{} declares [{scope}], which is reserved and not implemented — remove the block: saphan config unset {scope}",
            p.display()
        ),
        At::Request => format!(
            "{scope} is reserved and not implemented — declare verify.full, verify.affected or verify.provision.<alias> instead"
        ),
    }
}

fn unknown_scope(scope: &str, at: &At) -> String {
    match at {
        At::File(p) => format!(
            "{} declares [{scope}], a scope config-v1 does not know — the scopes are {}; remove it: saphan config unset {scope}",
            p.display(),
            schema::SCOPES_TEXT
        ),
        At::Request => format!(
            "{scope} is not a config-v1 scope — the scopes are {}",
            schema::SCOPES_TEXT
        ),
    }
}

fn scope_missing(key: &str, at: &At) -> String {
    let home = if schema::PROVISION_KEYS.contains(&key) {
        format!("verify.provision.<alias>.{key}")
    } else {
        format!("verify.full.{key} or verify.affected.{key}")
    };
    match at {
        At::File(p) => format!(
            "{} puts `{key}` directly under [verify], with no scope, so nothing would read it — keys live in a scope ({home}); move it there, then remove this one: saphan config unset verify.{key}",
            p.display()
        ),
        At::Request => {
            format!(
                "verify.{key} names no scope, so nothing would read it — keys live in a scope: {home}"
            )
        }
    }
}

fn unknown_key(scope: &str, key: &str, suggestion: Option<&str>, at: &At) -> String {
    let keys = if scope.starts_with("verify.provision.") {
        schema::PROVISION_KEYS
    } else {
        schema::SUITE_KEYS
    };
    let hint = suggestion
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    match at {
        At::File(p) => format!(
            "[{scope}] in {} has `{key}`, which is not one of its keys{hint} — a dropped key looks exactly like a key that worked, so rename it by hand ([{scope}] takes {}) or remove it: saphan config unset {scope}.{key}",
            p.display(),
            keys.join(", ")
        ),
        At::Request => format!(
            "`{scope}.{key}` is not a config-v1 key{hint} — [{scope}] takes {}",
            keys.join(", ")
        ),
    }
}

impl ConfigError {
    /// A refused value: `provision-dest-hostile` for a non-empty provision
    /// `dest` of the wrong shape, `config-value-invalid` otherwise.
    pub fn value(key: &str, value: String, what: String, fix: String, at: At) -> ConfigError {
        // The value is echoed: a newline in it must not break the line.
        let value = crate::error::one_line(&value);
        if key.starts_with("verify.provision.")
            && key.ends_with(".dest")
            && !value.trim_matches('"').is_empty()
        {
            ConfigError::DestHostile {
                key: key.to_string(),
                value,
                what,
                at,
            }
        } else {
            ConfigError::ValueInvalid {
                key: key.to_string(),
                value,
                what,
                fix,
                at,
            }
        }
    }
}

impl Refusal for ConfigError {
    fn name(&self) -> &'static str {
        match self {
            ConfigError::Malformed { .. } => "config-malformed",
            ConfigError::Unreadable { .. } => "config-unreadable",
            ConfigError::NotRegular { .. } => "config-not-regular",
            ConfigError::TooLarge { .. } => "config-too-large",
            ConfigError::Exposed { .. } => "saphan-home-exposed",
            ConfigError::ScopeReserved { .. } => "config-scope-reserved",
            ConfigError::ScopeUnknown { .. } => "config-scope-unknown",
            ConfigError::ScopeMissing { .. } => "config-scope-missing",
            ConfigError::KeyUnknown { .. } => "config-key-unknown",
            ConfigError::KeyInvalid { .. } => "config-key-invalid",
            ConfigError::KeyForeign { .. } => "config-key-foreign",
            ConfigError::AliasInvalid { .. } => "config-alias-invalid",
            ConfigError::NoArgv { .. }
            | ConfigError::NoArgvYet { .. }
            | ConfigError::ArgvStillNeeded { .. } => "config-no-argv",
            ConfigError::ValueInvalid { .. } => "config-value-invalid",
            ConfigError::DestHostile { .. } => "provision-dest-hostile",
            ConfigError::JunitNeedsPath { .. } | ConfigError::PathNeededByJunit { .. } => {
                "config-staging"
            }
            ConfigError::ReportPathMissing { .. } => "config-report-path-missing",
            ConfigError::ProvisionRepoMissing { .. }
            | ConfigError::ProvisionRepoFirst { .. }
            | ConfigError::ProvisionRepoStillNeeded { .. } => "provision-repo-missing",
            ConfigError::ProvisionIncomplete { .. } => "provision-incomplete",
            ConfigError::OperatorOnly { .. } => "config-key-operator-only",
        }
    }
}

/// A declared suite: `[verify.full]` or `[verify.affected]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// `argv`, split on commas (or a TOML array of strings). Never empty,
    /// no empty element.
    pub argv: Vec<String>,
    /// `report`; `None` = the exitcode floor.
    pub report: Option<ReportKind>,
    /// `report_path` (a glob relative to the tree root, junit-xml only).
    /// Always `Some` when `report` is junit-xml.
    pub report_path: Option<String>,
    /// `timeout`.
    pub timeout: Option<Duration>,
    /// `seal`: `auto`, `required` or `off` ([`crate::seal::Mode`]);
    /// `None` = not declared (`auto`).
    pub seal: Option<crate::seal::Mode>,
    /// Which declaration the block came from (a block is taken whole from
    /// one file, never merged key by key).
    pub origin: Origin,
}

impl Suite {
    /// The report kind in force: the declared one, else the exitcode floor.
    pub fn report_kind(&self) -> ReportKind {
        self.report.unwrap_or(ReportKind::Exitcode)
    }
}

/// One `[verify.provision.<alias>]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Provision {
    /// `<alias>`.
    pub alias: String,
    /// `repo`: the repository this entry applies to (absolute).
    pub repo: PathBuf,
    /// `source`: the file whose bytes are placed (absolute).
    pub source: PathBuf,
    /// `dest`: where they land, relative to the tree root (no `..`, not in `.git`).
    pub dest: String,
}

impl Provision {
    /// Does this entry apply to the repository whose top directory is
    /// `repo_top`? Both sides are canonicalized when they exist, so a
    /// trailing slash or a symlinked path still matches.
    pub fn applies_to(&self, repo_top: &Path) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        canon(&self.repo) == canon(repo_top)
    }
}

/// The validated declaration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// `[verify.full]`.
    pub full: Option<Suite>,
    /// `[verify.affected]`.
    pub affected: Option<Suite>,
    /// `[verify.provision.*]`, in file order.
    pub provisions: Vec<Provision>,
    /// `[fleet] freshness` (default 24h when `None`).
    pub fleet_freshness: Option<Duration>,
}

impl Config {
    /// Load and validate the operator's `home.config()`; a missing file is
    /// an empty config. For what only the operator declares (the fleet's
    /// freshness window); a repository's suite comes from
    /// [`Config::for_repo`].
    ///
    /// Every check of `config set` applies (closed scopes and keys, argv
    /// present, junit-xml with its path, provision with repo), and also
    /// completeness: a provision block still being staged (no `source` or
    /// no `dest`) is refused as `provision-incomplete`, because certify
    /// cannot place it.
    ///
    /// Errors: any [`ConfigError`], with the file's path in the message.
    pub fn load(home: &Home) -> Result<Config, ConfigError> {
        Config::load_place(&Place::operator(home))
    }

    /// The declaration in force for the repository whose git common dir is
    /// `common_dir` — the one function every verb resolves a repository's
    /// suite through: the repository's own file ([`repo_config_path`])
    /// wins over the operator's, block by block — its `[verify.full]`
    /// replaces the operator's `[verify.full]` whole, likewise
    /// `[verify.affected]`; provisions add up (each names its `repo`; an
    /// alias declared in both is the repository's); `[fleet] freshness` is
    /// the operator's alone. Nothing is read from any working tree.
    ///
    /// Errors: any [`ConfigError`] of either file (the message names it),
    /// `config-key-operator-only` for a `[fleet] freshness` in the
    /// repository's.
    pub fn for_repo(home: &Home, common_dir: &Path) -> Result<Config, ConfigError> {
        let operator = Config::load(home)?;
        let repo = Config::load_place(&Place::repository(common_dir))?;
        Ok(operator.overlaid(repo))
    }

    /// `self` (the operator's) with `repo` (a repository's) winning.
    fn overlaid(self, repo: Config) -> Config {
        let mut provisions: Vec<Provision> = self
            .provisions
            .into_iter()
            .filter(|p| !repo.provisions.iter().any(|r| r.alias == p.alias))
            .collect();
        provisions.extend(repo.provisions);
        Config {
            full: repo.full.or(self.full),
            affected: repo.affected.or(self.affected),
            provisions,
            fleet_freshness: self.fleet_freshness,
        }
    }

    /// Load and validate one file ([`Place`]); its suites carry its origin.
    ///
    /// Errors: as [`Config::load`]; `config-key-operator-only` for a
    /// repository's file that declares `[fleet] freshness`.
    pub fn load_place(place: &Place) -> Result<Config, ConfigError> {
        let path = place.path.clone();
        let mut declared = read_declared(&path)?;
        if place.origin == Origin::Repository && declared.fleet_freshness.is_some() {
            return Err(ConfigError::OperatorOnly {
                key: "fleet.freshness".into(),
                at: At::File(path),
            });
        }
        for s in [&mut declared.full, &mut declared.affected]
            .into_iter()
            .flatten()
        {
            s.origin = place.origin;
        }
        let mut provisions = Vec::new();
        for p in declared.provisions {
            let incomplete = |key| ConfigError::ProvisionIncomplete {
                alias: p.alias.clone(),
                key,
                path: path.clone(),
            };
            let source = p.source.clone().ok_or_else(|| incomplete("source"))?;
            let dest = p.dest.clone().ok_or_else(|| incomplete("dest"))?;
            provisions.push(Provision {
                alias: p.alias,
                repo: p.repo,
                source,
                dest,
            });
        }
        Ok(Config {
            full: declared.full,
            affected: declared.affected,
            provisions,
            fleet_freshness: declared.fleet_freshness,
        })
    }

    /// `[fleet] freshness`, or [`DEFAULT_FRESHNESS`].
    pub fn freshness(&self) -> Duration {
        self.fleet_freshness.unwrap_or(DEFAULT_FRESHNESS)
    }
}

/// The most a config file may hold (1 MiB): reading stops there.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Read the file's text; `None` when it does not exist. Only a regular file
/// (after symlinks) is read, at most [`MAX_CONFIG_BYTES`] of it: a FIFO never
/// blocks, `/dev/zero` never fills memory.
///
/// Before a byte is read, the file is guarded like every other file of
/// SAPHAN_HOME ([`check_exposed`]).
///
/// Errors: `saphan-home-exposed`, `config-unreadable`, `config-not-regular`,
/// `config-too-large`, `config-malformed` (not UTF-8).
pub fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    check_exposed(path)?;
    let read = || -> Result<Vec<u8>, ConfigError> {
        use std::io::Read;
        let f = crate::fsutil::open_regular(path).map_err(|e| match e {
            crate::fsutil::OpenRegular::NotRegular(kind) => ConfigError::NotRegular {
                path: path.to_path_buf(),
                kind,
            },
            crate::fsutil::OpenRegular::Io(source) => ConfigError::Unreadable {
                path: path.to_path_buf(),
                source,
            },
        })?;
        let mut bytes = Vec::new();
        f.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| ConfigError::Unreadable {
                path: path.to_path_buf(),
                source,
            })?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                limit: MAX_CONFIG_BYTES,
            });
        }
        Ok(bytes)
    };
    match read() {
        Ok(bytes) => crate::fsutil::utf8_or_where(bytes)
            .map(Some)
            .map_err(|detail| ConfigError::Malformed {
                path: path.to_path_buf(),
                detail,
            }),
        Err(ConfigError::Unreadable { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Refuse (`saphan-home-exposed`) a config that someone other than the
/// operator owns or can write: its directory (SAPHAN_HOME: whoever can write
/// it can replace the file), the file (after symlinks) and, when the path is
/// a symlink, the directory of the file it resolves to. A path that does not
/// exist is not checked (a missing config declares nothing); what root owns
/// is trusted, as for the ssh config.
///
/// Errors: [`ConfigError::Exposed`], naming the path and the `chmod`/`chown`
/// that fixes it.
pub fn check_exposed(path: &Path) -> Result<(), ConfigError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        paths.push(dir.to_path_buf());
    }
    // A FIFO or device is refused by name when it is read (config-not-regular).
    if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        paths.push(path.to_path_buf());
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && let Ok(target) = std::fs::canonicalize(path)
        && let Some(dir) = target.parent()
    {
        paths.push(dir.to_path_buf());
    }
    for p in paths {
        if let Some(x) = crate::fsutil::exposure(&p, true) {
            return Err(ConfigError::Exposed {
                path: p,
                detail: x.detail,
                fix: x.fix,
            });
        }
    }
    Ok(())
}

/// Parse config-v1 text with toml_edit (keeps every byte for re-rendering).
///
/// Errors: `config-malformed`.
pub fn parse(text: &str, path: &Path) -> Result<toml_edit::DocumentMut, ConfigError> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| ConfigError::Malformed {
            path: path.to_path_buf(),
            detail: one_line(&e.to_string()),
        })
}

fn one_line(s: &str) -> String {
    // toml_edit prints "…at line L, column C", a source excerpt, then the
    // reason: keep the position and the reason.
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    match (lines.first(), lines.last()) {
        (Some(first), Some(last)) if lines.len() > 1 => format!("{first}: {last}"),
        _ => s.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// Read and validate the file at `path` without the completeness check of
/// [`Config::load`]: what `config show` prints. A missing file declares
/// nothing.
pub fn read_declared(path: &Path) -> Result<Declared, ConfigError> {
    match read_text(path)? {
        None => Ok(Declared::default()),
        Some(text) => validate::validate(&parse(&text, path)?, path),
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::File(p) => write!(f, "{}", p.display()),
            At::Request => write!(f, "the command line"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(argv: &str, origin: Origin) -> Suite {
        Suite {
            argv: vec![argv.into()],
            report: None,
            report_path: None,
            timeout: None,
            seal: None,
            origin,
        }
    }

    fn provision(alias: &str, dest: &str) -> Provision {
        Provision {
            alias: alias.into(),
            repo: "/r".into(),
            source: "/s".into(),
            dest: dest.into(),
        }
    }

    #[test]
    fn the_repositorys_blocks_win_whole_and_provisions_add_up() {
        let operator = Config {
            full: Some(suite("sh", Origin::Operator)),
            affected: Some(suite("saphan", Origin::Operator)),
            provisions: vec![provision("a", "op-a"), provision("b", "op-b")],
            fleet_freshness: Some(Duration::from_secs(60)),
        };
        let repo = Config {
            full: Some(suite("pytest", Origin::Repository)),
            affected: None,
            provisions: vec![provision("b", "repo-b"), provision("c", "repo-c")],
            fleet_freshness: None,
        };
        let c = operator.clone().overlaid(repo);
        assert_eq!(c.full, Some(suite("pytest", Origin::Repository)));
        assert_eq!(c.affected, Some(suite("saphan", Origin::Operator)));
        let dests: Vec<&str> = c.provisions.iter().map(|p| p.dest.as_str()).collect();
        assert_eq!(dests, ["op-a", "repo-b", "repo-c"]);
        assert_eq!(c.fleet_freshness, Some(Duration::from_secs(60)));
        assert_eq!(operator.clone().overlaid(Config::default()), operator);
    }
}
