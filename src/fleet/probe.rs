//! `machine probe`: prove or refute that a declared absolute program is on a
//! machine, is executable and runs its catalog version command — then sign
//! and append the capability row. A probe never installs anything.
//!
//! Toolchain capabilities are probed here ([`probe_toolchain`]): one remote
//! exec of a small script that gets the declared path as one positional
//! argument (never spliced into the script), checks it, and runs the version
//! command under `timeout` when the machine has it. Other kinds
//! (`docker-oci`, `sandbox-userns`) go through [`precheck_other`] and
//! [`probe_other`], which their own module provides.

use super::FleetError;
use super::ledger::{CapabilityRow, Ledger, MachineFacts, Outcome, ProbeInputs};
use super::machines::MachineRow;
use crate::catalog::Capability;
use crate::error::Result;
use crate::home::Home;
use crate::transport::Transport;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The most version output a row keeps, in bytes.
pub const VERSION_OUTPUT_MAX: usize = 4096;

/// What one probe invocation asks, for every machine it names.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// The catalog capability name.
    pub capability: String,
    /// Its catalog entry.
    pub entry: Capability,
    /// `--declared-path`, `--workhome`, `--probed-by`, `--workspace`.
    pub inputs: ProbeInputs,
    /// Budget per machine, connection included.
    pub timeout: Duration,
    /// `--catalog`, repeated in the re-measure command.
    pub catalog_path: Option<PathBuf>,
}

impl ProbeSettings {
    /// Check what can be checked before any machine is contacted.
    ///
    /// Errors: `declared-path-not-absolute`, `workhome-not-absolute`, and
    /// whatever [`precheck_other`] refuses for non-toolchain kinds.
    pub fn validate(&self) -> Result<()> {
        if !self.inputs.declared_path.starts_with('/') {
            return Err(FleetError::DeclaredPathNotAbsolute {
                path: self.inputs.declared_path.clone(),
            }
            .into());
        }
        if !self.inputs.workhome.starts_with('/') {
            return Err(FleetError::WorkhomeNotAbsolute {
                path: self.inputs.workhome.clone(),
            }
            .into());
        }
        if self.entry.kind != "toolchain" {
            let origin = match &self.catalog_path {
                Some(p) => p.display().to_string(),
                None => "embedded".to_string(),
            };
            precheck_other(&self.capability, &self.entry, &origin)?;
        }
        Ok(())
    }
}

/// One probe of one machine, as the probe functions see it.
#[derive(Debug)]
pub struct ProbeRequest<'a> {
    /// `SAPHAN_HOME`.
    pub home: &'a Home,
    /// The machine row.
    pub machine: &'a MachineRow,
    /// The capability name.
    pub capability: &'a str,
    /// Its catalog entry.
    pub entry: &'a Capability,
    /// The operator's inputs.
    pub inputs: &'a ProbeInputs,
    /// The machine's latest measured facts, if any.
    pub facts: Option<&'a MachineFacts>,
    /// The remaining budget for this machine.
    pub timeout: Duration,
}

/// What a probe found; the caller adds facts, time, digest, remedy and signs it.
#[derive(Debug, Clone, Default)]
pub struct Finding {
    /// present / absent / failed.
    pub outcome: Option<Outcome>,
    /// Stable short reason when not present (`not-found`, `not-executable`,
    /// `version-command-failed`, `binary-absent`, `daemon-unreachable` …).
    pub reason: Option<String>,
    /// A sentence about the reason.
    pub reason_detail: Option<String>,
    /// Version output, when a version command ran.
    pub version_output: Option<String>,
    /// Extra evidence for the row's `detail`.
    pub detail: Map<String, Value>,
    /// The platform command for remedy line 1, when the probe knows a
    /// better one than the catalog's install command for the measured
    /// platform (e.g. starting a daemon). `None`: the catalog's.
    pub install: Option<String>,
}

/// The toolchain probe script. Positional arguments: `$1` timeout in
/// seconds, `$2` declared path, `$3` workhome, then the version argv.
pub const SCRIPT: &str = r#"t="$1"; p="$2"; w="$3"; shift 3
if [ -d "$w" ]; then echo "@@saphan-probe:workhome=present"; else echo "@@saphan-probe:workhome=absent"; fi
if [ ! -e "$p" ]; then
  if [ -L "$p" ]; then echo "@@saphan-probe:dangling"; else echo "@@saphan-probe:absent"; fi
  exit 0
fi
if [ -d "$p" ]; then echo "@@saphan-probe:directory"; exit 0; fi
if [ ! -x "$p" ]; then echo "@@saphan-probe:not-executable"; exit 0; fi
echo "@@saphan-probe:run"
if command -v timeout >/dev/null 2>&1; then timeout "$t" "$@" </dev/null 2>&1; else "$@" </dev/null 2>&1; fi
printf '\n@@saphan-probe:exit=%s\n' "$?"
"#;

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Read the toolchain script's output into a finding.
pub fn read_toolchain_output(
    machine: &str,
    path: &str,
    out: &str,
    version_timeout: u64,
) -> Result<Finding, FleetError> {
    let mut f = Finding::default();
    let mut lines = out.split('\n');
    let first = lines.next().unwrap_or_default();
    if let Some(w) = first.strip_prefix("@@saphan-probe:workhome=") {
        f.detail
            .insert("workhome_exists".into(), Value::Bool(w == "present"));
    } else {
        return Err(FleetError::MeasureOutput {
            machine: machine.into(),
            detail: "the probe script printed no workhome marker".into(),
        });
    }
    let rest: Vec<&str> = lines.collect();
    let marker = rest.first().copied().unwrap_or_default();
    let set = |f: &mut Finding, o: Outcome, r: &str, d: String| {
        f.outcome = Some(o);
        f.reason = Some(r.into());
        f.reason_detail = Some(d);
    };
    match marker {
        "@@saphan-probe:absent" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} does not exist on {machine}"),
        ),
        "@@saphan-probe:dangling" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} is a symbolic link to nothing on {machine}"),
        ),
        "@@saphan-probe:directory" => set(
            &mut f,
            Outcome::Failed,
            "not-a-file",
            format!("{path} is a directory on {machine}"),
        ),
        "@@saphan-probe:not-executable" => set(
            &mut f,
            Outcome::Failed,
            "not-executable",
            format!("{path} exists on {machine} but is not executable"),
        ),
        "@@saphan-probe:run" => {
            let body = rest[1..].join("\n");
            let Some(idx) = body.rfind("\n@@saphan-probe:exit=") else {
                return Err(FleetError::MeasureOutput {
                    machine: machine.into(),
                    detail:
                        "the version command's exit status is missing (the script did not finish)"
                            .into(),
                });
            };
            let code: i64 = body[idx..]
                .trim()
                .trim_start_matches("@@saphan-probe:exit=")
                .trim()
                .parse()
                .unwrap_or(-1);
            let output = body[..idx].trim_end().to_string();
            f.version_output = Some(truncate(&output, VERSION_OUTPUT_MAX));
            f.detail
                .insert("version_exit_code".into(), Value::from(code));
            if code == 0 {
                f.outcome = Some(Outcome::Present);
            } else if code == 124 {
                set(
                    &mut f,
                    Outcome::Failed,
                    "version-command-timed-out",
                    format!("{path}'s version command ran past {version_timeout}s on {machine}"),
                );
            } else {
                let head = output.lines().next().unwrap_or("").to_string();
                set(
                    &mut f,
                    Outcome::Failed,
                    "version-command-failed",
                    format!(
                        "{path}'s version command exited {code} on {machine}: {}",
                        truncate(&head, 200)
                    ),
                );
            }
        }
        other => {
            return Err(FleetError::MeasureOutput {
                machine: machine.into(),
                detail: format!("unexpected probe output `{}`", truncate(other, 80)),
            });
        }
    }
    Ok(f)
}

/// Probe a `kind = "toolchain"` capability: one exec of [`SCRIPT`].
pub async fn probe_toolchain(req: &ProbeRequest<'_>, t: &Transport) -> Result<Finding, FleetError> {
    let path = &req.inputs.declared_path;
    // Leave the exchange a few seconds beyond the version command's own limit.
    let version_timeout = req
        .timeout
        .saturating_sub(Duration::from_secs(3))
        .max(Duration::from_secs(1))
        .as_secs();
    let mut argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "saphan-probe".into(),
        version_timeout.to_string(),
        path.clone(),
        req.inputs.workhome.clone(),
    ];
    let version: Vec<String> = if req.entry.version.is_empty() {
        vec![path.clone()]
    } else {
        req.entry
            .version
            .iter()
            .map(|a| a.replace("{path}", path))
            .collect()
    };
    argv.extend(version);
    let out = t
        .exec(&argv, req.timeout)
        .await
        .map_err(|source| FleetError::Transport {
            machine: req.machine.id.clone(),
            source,
        })?;
    if out.status == crate::exec::Termination::TimedOut {
        return Err(FleetError::Timeout {
            machine: req.machine.id.clone(),
            budget: req.timeout,
            ssh_config: super::remedy::ssh_config_display(req.home),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    tracing::debug!(machine = %req.machine.id, output = %text, "probe output");
    read_toolchain_output(&req.machine.id, path, &text, version_timeout)
}

/// Checks for a non-toolchain capability (`docker-oci`, `sandbox-userns`)
/// made once, before any machine is contacted — e.g. refusing
/// `docker-probe-image-unpinned` while the catalog pin is the zero digest.
///
/// WIRING POINT for the docker-oci / sandbox-userns module: replace the body.
/// `origin` names the catalog (`embedded` or the `--catalog` path).
pub fn precheck_other(capability: &str, entry: &Capability, origin: &str) -> Result<()> {
    crate::docker::precheck(capability, entry, origin)
}

/// Probe a non-toolchain capability on one connected machine.
///
/// WIRING POINT for the docker-oci / sandbox-userns module: replace the body
/// with a call into it. Return a [`Finding`] (the ceremony adds facts,
/// measured_at, catalog digest and the two-line remedy — using
/// `Finding::install` for line 1 when set — then signs and appends the row),
/// or an error to record nothing for this machine.
pub async fn probe_other(req: &ProbeRequest<'_>, t: &Transport) -> Result<Finding> {
    crate::docker::probe(req, t).await
}

/// The whole ceremony for one machine: connect, probe, build the row with
/// its remedy, sign and append it. Returns the row as written.
pub async fn probe_machine(
    home: &Home,
    ledger: &Arc<Ledger>,
    row: &MachineRow,
    s: &ProbeSettings,
) -> Result<CapabilityRow> {
    let started = tokio::time::Instant::now();
    let t = super::machines::connect(home, row, s.timeout).await?;
    let facts = ledger.latest_facts(&row.id);
    let req = ProbeRequest {
        home,
        machine: row,
        capability: &s.capability,
        entry: &s.entry,
        inputs: &s.inputs,
        facts: facts.as_ref(),
        timeout: s
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1)),
    };
    let finding = if s.entry.kind == "toolchain" {
        probe_toolchain(&req, &t).await?
    } else {
        probe_other(&req, &t).await?
    };
    let outcome = finding.outcome.unwrap_or(Outcome::Failed);
    let remedy = if outcome == Outcome::Present {
        Vec::new()
    } else {
        let ids = facts.as_ref().map(MachineFacts::platform_ids);
        let install = finding.install.clone().or_else(|| {
            ids.as_deref()
                .and_then(|ids| s.entry.install_for(ids))
                .map(str::to_string)
        });
        super::remedy::remedy(
            home,
            s.catalog_path.as_deref(),
            row,
            &s.capability,
            &s.inputs,
            ids.as_deref(),
            install.as_deref(),
        )
        .to_vec()
    };
    let cap = CapabilityRow {
        machine: row.id.clone(),
        capability: s.capability.clone(),
        inputs: s.inputs.clone(),
        outcome,
        reason: finding.reason,
        reason_detail: finding.reason_detail,
        version_output: finding.version_output,
        detail: finding.detail,
        facts,
        measured_at: super::now_rfc3339(),
        catalog_digest: s.entry.digest(&s.capability),
        remedy,
    };
    ledger.append_capability(cap.clone())?;
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_outputs() {
        let f = read_toolchain_output(
            "m0",
            "/x",
            "@@saphan-probe:workhome=present\n@@saphan-probe:absent\n",
            5,
        )
        .unwrap();
        assert_eq!(f.outcome, Some(Outcome::Absent));
        let f = read_toolchain_output(
            "m0",
            "/x",
            "@@saphan-probe:workhome=absent\n@@saphan-probe:run\ngo version go1.19.8 linux/amd64\n\n@@saphan-probe:exit=0\n",
            5,
        )
        .unwrap();
        assert_eq!(f.outcome, Some(Outcome::Present));
        assert_eq!(
            f.version_output.as_deref(),
            Some("go version go1.19.8 linux/amd64")
        );
        let f = read_toolchain_output(
            "m0",
            "/x",
            "@@saphan-probe:workhome=absent\n@@saphan-probe:run\nboom\n@@saphan-probe:exit=2\n",
            5,
        )
        .unwrap();
        assert_eq!(f.reason.as_deref(), Some("version-command-failed"));
        assert!(
            read_toolchain_output(
                "m0",
                "/x",
                "@@saphan-probe:workhome=absent\n@@saphan-probe:run\nhalf",
                5
            )
            .is_err()
        );
    }
}
