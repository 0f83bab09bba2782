//! `config show`: what config-v1 currently declares, for a person (text) or
//! a program (one JSON object). Defaults that apply are printed as such, so
//! nothing in force is invisible.

use super::schema::format_duration;
use super::{ConfigError, DEFAULT_FRESHNESS, Declared, Origin, Place, Suite, read_declared};
use crate::home::Home;
use crate::report::ReportKind;
use serde_json::{Value, json};
use std::fmt::Write;
use std::path::PathBuf;

/// The declaration as `config show` prints it.
#[derive(Debug, Clone)]
pub struct Shown {
    /// The config file.
    pub path: PathBuf,
    /// Whose it is.
    pub origin: Origin,
    /// Whether the file exists.
    pub exists: bool,
    /// What it declares (validated; staged provisions allowed).
    pub declared: Declared,
}

/// Read and validate the file of `place` for display.
///
/// Errors: every refusal a hand-written file can earn (a broken file is
/// refused here by name, as certify would refuse it).
pub fn show(place: &Place) -> Result<Shown, ConfigError> {
    let path = place.path.clone();
    let exists = path.exists();
    let declared = read_declared(&path)?;
    if place.origin == Origin::Repository && declared.fleet_freshness.is_some() {
        return Err(ConfigError::OperatorOnly {
            key: "fleet.freshness".into(),
            at: super::At::File(path),
        });
    }
    Ok(Shown {
        path,
        origin: place.origin,
        exists,
        declared,
    })
}

/// `config show --repo R`: the repository's declaration, the operator's,
/// and which applies to the repository, block by block.
#[derive(Debug, Clone)]
pub struct RepoShown {
    /// The repository's top directory.
    pub repo: PathBuf,
    /// Its own declaration (`<git-common-dir>/saphan/config`).
    pub repository: Shown,
    /// The operator's (`SAPHAN_HOME/config`).
    pub operator: Shown,
}

/// Read both declarations of the repository whose top is `top` and whose
/// git common dir is `common_dir`.
///
/// Errors: as [`show`], for either file.
pub fn show_repo(
    home: &Home,
    top: &std::path::Path,
    common_dir: &std::path::Path,
) -> Result<RepoShown, ConfigError> {
    Ok(RepoShown {
        repo: top.to_path_buf(),
        repository: show(&Place::repository(common_dir))?,
        operator: show(&Place::operator(home))?,
    })
}

impl RepoShown {
    /// Whose `scope` block applies: the repository's when it declares one,
    /// else the operator's, else neither (`None`).
    pub fn applies(&self, scope: &str) -> Option<Origin> {
        let of = |d: &Declared| match scope {
            "verify.full" => d.full.is_some(),
            _ => d.affected.is_some(),
        };
        if of(&self.repository.declared) {
            Some(Origin::Repository)
        } else if of(&self.operator.declared) {
            Some(Origin::Operator)
        } else {
            None
        }
    }

    /// The record's `suite_source` for `scope` when its block applies:
    /// `repo-config:verify.full`, `config:verify.full`; `None` when neither
    /// declares it.
    pub fn source(&self, scope: &str) -> Option<String> {
        self.applies(scope)
            .map(|o| format!("{}:{scope}", o.prefix()))
    }

    /// One JSON object: `{"repo", "repository": <show>, "operator": <show>,
    /// "applies": {"verify.full": {"from", "suite_source"}, "verify.affected": …}}`;
    /// `from` is `repository`, `operator` or `none`.
    pub fn to_json(&self) -> Value {
        let applies = |scope: &str| {
            json!({
                "from": match self.applies(scope) {
                    Some(Origin::Repository) => "repository",
                    Some(Origin::Operator) => "operator",
                    None => "none",
                },
                "suite_source": self.source(scope),
            })
        };
        json!({
            "repo": self.repo,
            "repository": self.repository.to_json(),
            "operator": self.operator.to_json(),
            "applies": {
                "verify.full": applies("verify.full"),
                "verify.affected": applies("verify.affected"),
            },
        })
    }

    /// The text a person reads: which applies first, then each file.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "repository: {}", self.repo.display());
        for scope in ["verify.full", "verify.affected"] {
            let line = match self.applies(scope) {
                Some(Origin::Repository) => format!(
                    "[{scope}] of this repository applies (suite_source: repo-config:{scope}){}",
                    if scope == "verify.full" && self.operator.declared.full.is_some()
                        || scope == "verify.affected" && self.operator.declared.affected.is_some()
                    {
                        " — it wins over the operator's"
                    } else {
                        ""
                    }
                ),
                Some(Origin::Operator) => format!(
                    "[{scope}] of the operator applies (suite_source: config:{scope}) — this repository declares none"
                ),
                None if scope == "verify.full" => format!(
                    "[{scope}] declared by neither — certify runs default-go in a Go repository and refuses everywhere else"
                ),
                None => format!("[{scope}] declared by neither — the affected tier is unavailable"),
            };
            let _ = writeln!(s, "  {line}");
        }
        let _ = writeln!(
            s,
            "  (a block is taken whole from one file; provisions of both apply; [fleet] freshness is the operator's)"
        );
        let _ = writeln!(
            s,
            "
=== this repository's declaration ==="
        );
        s.push_str(&self.repository.to_text());
        let _ = writeln!(
            s,
            "
=== the operator's declaration ==="
        );
        s.push_str(&self.operator.to_text());
        s
    }
}

fn suite_json(s: &Option<Suite>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({
            "argv": s.argv,
            "report": s.report_kind().as_str(),
            "report_declared": s.report.is_some(),
            "report_path": s.report_path,
            "timeout": s.timeout.map(format_duration),
            "timeout_seconds": s.timeout.map(|d| d.as_secs_f64()),
        }),
    }
}

impl Shown {
    /// One JSON object:
    /// `{"path","exists","verify":{"full","affected","provision":[…]},"fleet":{…}}`.
    /// A suite is `null` when not declared; durations carry seconds beside
    /// the written form.
    pub fn to_json(&self) -> Value {
        let d = &self.declared;
        let fresh = d.fleet_freshness.unwrap_or(DEFAULT_FRESHNESS);
        json!({
            "path": self.path,
            "origin": match self.origin { Origin::Operator => "operator", Origin::Repository => "repository" },
            "exists": self.exists,
            "verify": {
                "full": suite_json(&d.full),
                "affected": suite_json(&d.affected),
                "provision": d.provisions.iter().map(|p| json!({
                    "alias": p.alias,
                    "repo": p.repo,
                    "source": p.source,
                    "dest": p.dest,
                    "complete": p.source.is_some() && p.dest.is_some(),
                })).collect::<Vec<_>>(),
            },
            // A repository's declaration has no [fleet]: the window is the operator's.
            "fleet": if self.origin == Origin::Repository { Value::Null } else { json!({
                "freshness": format_duration(fresh),
                "freshness_seconds": fresh.as_secs_f64(),
                "freshness_source": if d.fleet_freshness.is_some() { "config" } else { "default" },
            }) },
        })
    }

    /// The text a person reads.
    pub fn to_text(&self) -> String {
        let d = &self.declared;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "config-v1: {}{}",
            self.path.display(),
            if self.exists { "" } else { " (no file yet)" }
        );
        let repository = self.origin == Origin::Repository;
        for (name, suite) in [("verify.full", &d.full), ("verify.affected", &d.affected)] {
            s.push('\n');
            match suite {
                None if repository => {
                    let _ = writeln!(s, "[{name}]  not declared in this repository's file");
                }
                None if name == "verify.full" => {
                    let _ = writeln!(
                        s,
                        "[verify.full]  not declared — certify runs go test -count=1 -json ./... in a Go \
                         repository (suite_source: default-go) and refuses everywhere else; \
                         `saphan init` proposes a block"
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "[verify.affected]  not declared — the affected tier is unavailable, never green by silence"
                    );
                }
                Some(suite) => {
                    let _ = writeln!(s, "[{name}]");
                    let argv = serde_json::to_string(&suite.argv).unwrap_or_default();
                    let _ = writeln!(s, "  argv         {argv}");
                    match suite.report {
                        Some(k) => {
                            let _ = writeln!(s, "  report       {}", k.as_str());
                        }
                        None => {
                            let _ = writeln!(
                                s,
                                "  report       {} (not declared: the exitcode floor)",
                                ReportKind::Exitcode.as_str()
                            );
                        }
                    }
                    match &suite.report_path {
                        Some(p) if suite.report == Some(ReportKind::JunitXml) => {
                            let _ = writeln!(
                                s,
                                "  report_path  {p} (a glob relative to {})",
                                if name == "verify.affected" {
                                    "the adapter's fresh SAPHAN_AFFECTED_REPORT_DIR"
                                } else {
                                    "the repository root"
                                }
                            );
                        }
                        Some(p) => {
                            let _ = writeln!(
                                s,
                                "  report_path  {p} (staged: read only once report is junit-xml)"
                            );
                        }
                        None => {}
                    }
                    match suite.timeout {
                        Some(t) => {
                            let _ = writeln!(
                                s,
                                "  timeout      {} (certify --timeout still wins)",
                                format_duration(t)
                            );
                        }
                        None => {
                            let _ = writeln!(
                                s,
                                "  timeout      not declared (the 10-minute floor applies)"
                            );
                        }
                    }
                }
            }
        }
        for p in &d.provisions {
            let _ = writeln!(s, "\n[verify.provision.{}]", p.alias);
            let _ = writeln!(s, "  repo    {}", p.repo.display());
            let missing = "not set yet — certify refuses (provision-incomplete) until it is";
            match &p.source {
                Some(src) => {
                    let _ = writeln!(s, "  source  {}", src.display());
                }
                None => {
                    let _ = writeln!(s, "  source  {missing}");
                }
            }
            let _ = writeln!(s, "  dest    {}", p.dest.as_deref().unwrap_or(missing));
        }
        if repository {
            return s;
        }
        let _ = writeln!(
            s,
            "\n[fleet] freshness  {}",
            match d.fleet_freshness {
                Some(f) => format_duration(f),
                None => format!("{} (default)", format_duration(DEFAULT_FRESHNESS)),
            }
        );
        s
    }
}
