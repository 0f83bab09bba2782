//! `machine probe`: prove or refute that a declared absolute program is on a
//! machine, is executable and runs its catalog version command — then sign
//! and append the capability row. A probe never installs anything.
//!
//! Toolchain capabilities are probed here ([`probe_toolchains`]): one remote
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

/// One capability to probe: its name, catalog entry and the operator's inputs.
#[derive(Debug, Clone)]
pub struct ProbeItem {
    /// The catalog capability name.
    pub capability: String,
    /// Its catalog entry.
    pub entry: Capability,
    /// `--declared-path`, `--workhome`, `--probed-by`, `--workspace`.
    pub inputs: ProbeInputs,
}

/// What one probe invocation asks, for every machine it names. Several
/// capabilities share one connection and (for toolchains) one remote exec.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// The capabilities, in the order given.
    pub items: Vec<ProbeItem>,
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
        for it in &self.items {
            if !it.inputs.declared_path.starts_with('/') {
                return Err(FleetError::DeclaredPathNotAbsolute {
                    path: it.inputs.declared_path.clone(),
                }
                .into());
            }
            if !it.inputs.workhome.starts_with('/') {
                return Err(FleetError::WorkhomeNotAbsolute {
                    path: it.inputs.workhome.clone(),
                }
                .into());
            }
            if !crate::catalog::is_toolchain_probe(&it.capability) {
                let origin = match &self.catalog_path {
                    Some(p) => p.display().to_string(),
                    None => "embedded".to_string(),
                };
                precheck_other(&it.capability, &it.entry, &origin)?;
            }
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

/// The toolchain probe script. Positional arguments: `$1` a marker nonce,
/// `$2` the version command's timeout in seconds, `$3` the workhome, then per
/// capability: a count N, the declared path and the version argv (N words in
/// all). Values are only ever referenced as `"${k}"`, never spliced into the
/// script text; the nonce keeps a program's output from faking a marker.
pub const SCRIPT: &str = r#"M="@@saphan-$1"; t="$2"; w="$3"; shift 3
if [ -d "$w" ]; then echo "$M:workhome=present"; else echo "$M:workhome=absent"; fi
probe() {
  p="$1"
  if [ ! -e "$p" ]; then
    if [ -L "$p" ]; then echo "$M:dangling"; else echo "$M:absent"; fi
    return 0
  fi
  if [ -d "$p" ]; then echo "$M:directory"; return 0; fi
  if [ ! -x "$p" ]; then echo "$M:not-executable"; return 0; fi
  shift
  echo "$M:run"
  if command -v timeout >/dev/null 2>&1; then timeout "$t" "$@" </dev/null 2>&1; else "$@" </dev/null 2>&1; fi
  printf '\n%s:exit=%s\n' "$M" "$?"
}
k=0
while [ "$#" -gt 0 ]; do
  n="$1"; shift
  refs=""; i=1
  while [ "$i" -le "$n" ]; do refs="$refs \"\${$i}\""; i=$((i+1)); done
  echo "$M:item=$k"
  eval "probe $refs"
  shift "$n"
  k=$((k+1))
done
echo "$M:end"
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

/// Read the probe script's whole output (marker prefix `m`, e.g.
/// `@@saphan-<nonce>`) into one finding per item, in order.
pub fn read_script_output(
    machine: &str,
    m: &str,
    paths: &[&str],
    out: &str,
    version_timeout: u64,
) -> Result<Vec<Finding>, FleetError> {
    let bad = |detail: String| FleetError::MeasureOutput {
        machine: machine.into(),
        detail,
    };
    let mut lines = out.split('\n');
    let workhome = match lines
        .next()
        .and_then(|l| l.strip_prefix(m))
        .and_then(|l| l.strip_prefix(":workhome="))
    {
        Some(w) => w == "present",
        None => return Err(bad("the probe script printed no workhome marker".into())),
    };
    let rest: Vec<&str> = lines.collect();
    let item_prefix = format!("{m}:item=");
    let end_marker = format!("{m}:end");
    let mut sections: Vec<Vec<&str>> = Vec::new();
    let mut ended = false;
    for l in rest {
        if l.starts_with(&item_prefix) {
            sections.push(Vec::new());
        } else if l == end_marker {
            ended = true;
            break;
        } else if let Some(cur) = sections.last_mut() {
            cur.push(l);
        }
    }
    if !ended || sections.len() != paths.len() {
        return Err(bad(format!(
            "the probe script did not finish ({} of {} capabilities reported)",
            sections.len(),
            paths.len()
        )));
    }
    let mut out = Vec::new();
    for (sec, path) in sections.iter().zip(paths) {
        let mut f = read_item(machine, m, path, sec, version_timeout)?;
        f.detail
            .insert("workhome_exists".into(), Value::Bool(workhome));
        out.push(f);
    }
    Ok(out)
}

fn read_item(
    machine: &str,
    m: &str,
    path: &str,
    sec: &[&str],
    version_timeout: u64,
) -> Result<Finding, FleetError> {
    let mut f = Finding::default();
    let marker = sec
        .first()
        .and_then(|l| l.strip_prefix(m))
        .unwrap_or_default();
    let set = |f: &mut Finding, o: Outcome, r: &str, d: String| {
        f.outcome = Some(o);
        f.reason = Some(r.into());
        f.reason_detail = Some(d);
    };
    match marker {
        ":absent" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} does not exist on {machine}"),
        ),
        ":dangling" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} is a symbolic link to nothing on {machine}"),
        ),
        ":directory" => set(
            &mut f,
            Outcome::Failed,
            "not-a-file",
            format!("{path} is a directory on {machine}"),
        ),
        ":not-executable" => set(
            &mut f,
            Outcome::Failed,
            "not-executable",
            format!("{path} exists on {machine} but is not executable"),
        ),
        ":run" => {
            let body = sec[1..].join("\n");
            let exit_marker = format!("\n{m}:exit=");
            let Some(idx) = body.rfind(&exit_marker) else {
                return Err(FleetError::MeasureOutput {
                    machine: machine.into(),
                    detail:
                        "the version command's exit status is missing (the script did not finish)"
                            .into(),
                });
            };
            let code: i64 = body[idx + exit_marker.len()..].trim().parse().unwrap_or(-1);
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

/// Probe `kind = "toolchain"` capabilities on one machine: one exec of
/// [`SCRIPT`] for all of them. `items` are (capability entry, inputs).
pub async fn probe_toolchains(
    home: &Home,
    machine: &MachineRow,
    items: &[(&Capability, &ProbeInputs)],
    t: &Transport,
    timeout: Duration,
) -> Result<Vec<Finding>, FleetError> {
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let nonce = hex::encode(nonce);
    // Leave the exchange a few seconds beyond the version commands' own limit.
    let version_timeout = timeout
        .saturating_sub(Duration::from_secs(3))
        .max(Duration::from_secs(1))
        .as_secs();
    let workhome = items
        .first()
        .map(|(_, i)| i.workhome.clone())
        .unwrap_or_else(|| "/".into());
    let mut argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "saphan-probe".into(),
        nonce.clone(),
        version_timeout.to_string(),
        workhome,
    ];
    for (entry, inputs) in items {
        let path = &inputs.declared_path;
        let version: Vec<String> = if entry.version.is_empty() {
            vec![path.clone()]
        } else {
            entry
                .version
                .iter()
                .map(|a| a.replace("{path}", path))
                .collect()
        };
        argv.push((version.len() + 1).to_string());
        argv.push(path.clone());
        argv.extend(version);
    }
    let out = t
        .exec(&argv, timeout)
        .await
        .map_err(|source| FleetError::Transport {
            machine: machine.id.clone(),
            source: Box::new(source),
        })?;
    if out.status == crate::exec::Termination::TimedOut {
        return Err(FleetError::Timeout {
            machine: machine.id.clone(),
            budget: timeout,
            ssh_config: super::remedy::ssh_config_display(home),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    tracing::debug!(machine = %machine.id, output = %text, "probe output");
    let paths: Vec<&str> = items
        .iter()
        .map(|(_, i)| i.declared_path.as_str())
        .collect();
    read_script_output(
        &machine.id,
        &format!("@@saphan-{nonce}"),
        &paths,
        &text,
        version_timeout,
    )
}

/// Checks for a non-toolchain capability (`docker-oci`, `sandbox-userns`)
/// made once, before any machine is contacted — e.g. refusing
/// `docker-probe-image-unpinned` while the catalog pin is the zero digest.
///
/// Delegates to [`crate::docker::precheck`]. `origin` names the catalog (`embedded` or the `--catalog` path).
pub fn precheck_other(capability: &str, entry: &Capability, origin: &str) -> Result<()> {
    crate::docker::precheck(capability, entry, origin)
}

/// Probe a non-toolchain capability on one connected machine.
///
/// Delegates to [`crate::docker::probe`], which returns a [`Finding`] (the
/// ceremony adds facts, measured_at, catalog digest and the two-line remedy —
/// using `Finding::install` for line 1 when set — then signs and appends the
/// row), or an error to record nothing for this machine.
pub async fn probe_other(req: &ProbeRequest<'_>, t: &Transport) -> Result<Finding> {
    crate::docker::probe(req, t).await
}

/// The whole ceremony for one machine: connect once, probe every item
/// (toolchains in one exec), build each row with its remedy, sign and append
/// it. Returns, per item in order, the row as written or why none was.
///
/// Errors: reaching the machine failed (nothing recorded for any item).
pub async fn probe_machine(
    home: &Home,
    ledger: &Arc<Ledger>,
    row: &MachineRow,
    s: &ProbeSettings,
) -> Result<Vec<Result<CapabilityRow>>> {
    let started = tokio::time::Instant::now();
    let t = super::machines::connect(home, row, s.timeout).await?;
    let facts = ledger.latest_facts(&row.id);
    let remaining = || {
        s.timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1))
    };
    let tool_idx: Vec<usize> = (0..s.items.len())
        .filter(|&i| crate::catalog::is_toolchain_probe(&s.items[i].capability))
        .collect();
    let mut findings: Vec<Option<Result<Finding>>> = (0..s.items.len()).map(|_| None).collect();
    if !tool_idx.is_empty() {
        let items: Vec<(&Capability, &ProbeInputs)> = tool_idx
            .iter()
            .map(|&i| (&s.items[i].entry, &s.items[i].inputs))
            .collect();
        let found = probe_toolchains(home, row, &items, &t, remaining()).await?;
        for (i, f) in tool_idx.iter().zip(found) {
            findings[*i] = Some(Ok(f));
        }
    }
    for (i, it) in s.items.iter().enumerate() {
        if findings[i].is_some() {
            continue;
        }
        let req = ProbeRequest {
            home,
            machine: row,
            capability: &it.capability,
            entry: &it.entry,
            inputs: &it.inputs,
            facts: facts.as_ref(),
            timeout: remaining(),
        };
        findings[i] = Some(probe_other(&req, &t).await);
    }
    let mut out = Vec::new();
    for (it, f) in s.items.iter().zip(findings) {
        let f = match f.expect("every item has a finding") {
            Ok(f) => f,
            Err(e) => {
                out.push(Err(e));
                continue;
            }
        };
        let cap = build_row(home, s.catalog_path.as_deref(), row, it, facts.clone(), f);
        match ledger.append_capability(cap.clone()) {
            Ok(()) => out.push(Ok(cap)),
            Err(e) => out.push(Err(e)),
        }
    }
    Ok(out)
}

/// Turn a finding into the capability row (with its remedy when not present).
pub fn build_row(
    home: &Home,
    catalog_path: Option<&std::path::Path>,
    row: &MachineRow,
    it: &ProbeItem,
    facts: Option<MachineFacts>,
    finding: Finding,
) -> CapabilityRow {
    let outcome = finding.outcome.unwrap_or(Outcome::Failed);
    let remedy = if outcome == Outcome::Present {
        Vec::new()
    } else {
        let ids = facts.as_ref().map(MachineFacts::platform_ids);
        let install = finding.install.clone().or_else(|| {
            ids.as_deref()
                .and_then(|ids| it.entry.install_for(ids))
                .map(str::to_string)
        });
        super::remedy::remedy(
            home,
            catalog_path,
            row,
            &it.capability,
            &it.inputs,
            ids.as_deref(),
            install.as_deref(),
        )
        .to_vec()
    };
    CapabilityRow {
        machine: row.id.clone(),
        capability: it.capability.clone(),
        inputs: it.inputs.clone(),
        outcome,
        reason: finding.reason,
        reason_detail: finding.reason_detail,
        version_output: finding.version_output,
        detail: finding.detail,
        facts,
        measured_at: super::now_rfc3339(),
        catalog_digest: it.entry.digest(&it.capability),
        remedy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_outputs() {
        let m = "@@saphan-ab";
        let out = "@@saphan-ab:workhome=present\n@@saphan-ab:item=0\n@@saphan-ab:absent\n\
                   @@saphan-ab:item=1\n@@saphan-ab:run\ngo version go1.19.8 linux/amd64\n\n@@saphan-ab:exit=0\n\
                   @@saphan-ab:item=2\n@@saphan-ab:run\nboom\n@@saphan-ab:exit=2\n@@saphan-ab:end\n";
        let f = read_script_output("m0", m, &["/a", "/b", "/c"], out, 5).unwrap();
        assert_eq!(f[0].outcome, Some(Outcome::Absent));
        assert_eq!(f[0].detail["workhome_exists"], Value::Bool(true));
        assert_eq!(f[1].outcome, Some(Outcome::Present));
        assert_eq!(
            f[1].version_output.as_deref(),
            Some("go version go1.19.8 linux/amd64")
        );
        assert_eq!(f[2].reason.as_deref(), Some("version-command-failed"));
        assert!(
            read_script_output(
                "m0",
                m,
                &["/a"],
                "@@saphan-ab:workhome=absent\n@@saphan-ab:item=0\n@@saphan-ab:run\nhalf",
                5
            )
            .is_err()
        );
    }
}
