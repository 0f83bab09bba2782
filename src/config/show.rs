//! `config show`: what config-v1 currently declares, for a person (text) or
//! a program (one JSON object). Defaults that apply are printed as such, so
//! nothing in force is invisible.

use super::schema::format_duration;
use super::{ConfigError, DEFAULT_FRESHNESS, Declared, Suite, read_declared};
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
    /// Whether the file exists.
    pub exists: bool,
    /// What it declares (validated; staged provisions allowed).
    pub declared: Declared,
}

/// Read and validate `home.config()` for display.
///
/// Errors: every refusal a hand-written file can earn (a broken file is
/// refused here by name, as certify would refuse it).
pub fn show(home: &Home) -> Result<Shown, ConfigError> {
    let path = home.config();
    let exists = path.exists();
    let declared = read_declared(&path)?;
    Ok(Shown {
        path,
        exists,
        declared,
    })
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
            "fleet": {
                "freshness": format_duration(fresh),
                "freshness_seconds": fresh.as_secs_f64(),
                "freshness_source": if d.fleet_freshness.is_some() { "config" } else { "default" },
            },
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
        for (name, suite) in [("verify.full", &d.full), ("verify.affected", &d.affected)] {
            s.push('\n');
            match suite {
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
