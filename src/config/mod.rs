//! config-v1: the operator's declaration in `SAPHAN_HOME/config` (TOML).
//!
//! CONTRACT (the certify/affected code calls exactly this): [`Config::load`]
//! and the plain types below. Validation of closed scopes and keys, `config
//! set|unset|show` with byte-identical round-trips, and `init` live beside it.

use crate::error::Refusal;
use crate::home::Home;
use crate::report::ReportKind;
use std::path::PathBuf;
use std::time::Duration;

/// Errors reading or editing config-v1.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not valid TOML.
    #[error("{path} is not valid TOML: {detail} — fix the file by hand")]
    Malformed { path: PathBuf, detail: String },
}

impl Refusal for ConfigError {
    fn name(&self) -> &'static str {
        match self {
            ConfigError::Malformed { .. } => "config-malformed",
        }
    }
}

/// A declared suite: `[verify.full]` or `[verify.affected]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// `argv`, split on commas (or a TOML array of strings).
    pub argv: Vec<String>,
    /// `report`; `None` = the exitcode floor.
    pub report: Option<ReportKind>,
    /// `report_path` (a glob, junit-xml only).
    pub report_path: Option<String>,
    /// `timeout`.
    pub timeout: Option<Duration>,
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
    /// `dest`: where they land, relative to the tree root.
    pub dest: String,
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
    /// Load and validate `home.config()`; a missing file is an empty config.
    pub fn load(home: &Home) -> Result<Config, ConfigError> {
        let path = home.config();
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(Config::default());
        };
        let doc: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Malformed {
            path: path.clone(),
            detail: e.message().to_string(),
        })?;
        let mut cfg = Config::default();
        let suite = |t: &toml::Value| -> Suite {
            let argv = match t.get("argv") {
                Some(toml::Value::String(s)) => s.split(',').map(str::to_string).collect(),
                Some(toml::Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
                _ => Vec::new(),
            };
            Suite {
                argv,
                report: t.get("report").and_then(|v| v.as_str()).and_then(ReportKind::parse),
                report_path: t.get("report_path").and_then(|v| v.as_str()).map(str::to_string),
                timeout: t
                    .get("timeout")
                    .and_then(|v| v.as_str())
                    .and_then(|s| humantime::parse_duration(s).ok()),
            }
        };
        if let Some(v) = doc.get("verify") {
            cfg.full = v.get("full").map(suite);
            cfg.affected = v.get("affected").map(suite);
            if let Some(toml::Value::Table(p)) = v.get("provision") {
                for (alias, t) in p {
                    let s = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                    cfg.provisions.push(Provision {
                        alias: alias.clone(),
                        repo: s("repo").into(),
                        source: s("source").into(),
                        dest: s("dest"),
                    });
                }
            }
        }
        Ok(cfg)
    }
}
