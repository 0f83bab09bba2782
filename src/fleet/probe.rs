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
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The longest `--declared-path` or `--workhome`, in bytes (Linux's
/// `PATH_MAX` less its NUL); longer is refused as `argument-too-long`.
pub const PATH_MAX: usize = 4095;

/// The most version output a row keeps, in bytes.
pub const VERSION_OUTPUT_MAX: usize = 4096;

/// One capability to probe: its name, catalog entry and the operator's inputs.
#[derive(Debug, Clone)]
pub struct ProbeItem {
    /// The catalog capability name.
    pub capability: String,
    /// Its catalog entry.
    pub entry: Capability,
    /// `--declared-path`, `--workhome`, `--probed-by`, `--workspace`. An
    /// empty `workhome` stands for each machine row's own
    /// ([`ProbeSettings::for_row`]), so one probe of machines with
    /// different workhomes records each one's.
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
    /// The catalog's origin (`embedded` or its file), named in refusals.
    pub catalog_origin: String,
}

impl ProbeSettings {
    /// Check what can be checked before any machine is contacted.
    ///
    /// Errors: `argument-too-long`, `declared-path-not-absolute`,
    /// `workhome-not-absolute` (for a given one: an empty workhome is the
    /// machine row's own, absolute by machines.toml's rules), and
    /// whatever [`precheck_other`] refuses for non-toolchain kinds.
    pub fn validate(&self) -> Result<()> {
        for it in &self.items {
            for (flag, v) in [
                ("--declared-path", &it.inputs.declared_path),
                ("--workhome", &it.inputs.workhome),
            ] {
                if v.len() > PATH_MAX {
                    return Err(FleetError::ArgumentTooLong {
                        flag,
                        bytes: v.len(),
                        max: PATH_MAX,
                    }
                    .into());
                }
            }
            if !it.inputs.declared_path.starts_with('/') {
                return Err(FleetError::DeclaredPathNotAbsolute {
                    path: it.inputs.declared_path.clone(),
                }
                .into());
            }
            if !it.inputs.workhome.is_empty() && !it.inputs.workhome.starts_with('/') {
                return Err(FleetError::WorkhomeNotAbsolute {
                    path: it.inputs.workhome.clone(),
                }
                .into());
            }
            if !crate::catalog::is_toolchain_probe(&it.capability) {
                precheck_other(&it.capability, &it.entry, &self.catalog_origin)?;
            }
        }
        Ok(())
    }

    /// These settings for the machine of `row`: every item whose workhome
    /// was not given (empty) gets the row's own.
    pub fn for_row(&self, row: &MachineRow) -> ProbeSettings {
        let mut s = self.clone();
        for it in &mut s.items {
            if it.inputs.workhome.is_empty() {
                it.inputs.workhome = row.workhome.clone();
            }
        }
        s
    }
}

pub use super::finding::{Finding, ProbeRequest};

/// The most version output the probe script captures per program, in bytes;
/// the rest is read and discarded on the machine (`version_output_truncated`
/// in the row's detail says so).
pub const VERSION_CAPTURE_MAX: usize = 65536;

/// The toolchain probe script. Positional arguments: `$1` the version
/// command's timeout in seconds, `$2` the workhome, `$3` a directory where the
/// script notes each running version command's `timeout` pid (its process
/// group) so a local Ctrl-C can kill it (empty: none), `$4` this run's nonce
/// (32 random hex digits), then per capability: a count N, the declared path
/// and the version argv (N words in all). Values are only ever referenced as
/// `"${k}"`, never spliced into the script text.
///
/// Begin and end: the script's output sits between `@@saphan begin NONCE`
/// (on a line of its own) and `@@saphan end NONCE`; whatever the login shell
/// prints before (a `.bashrc` that says `Welcome`) or after (an EXIT trap) is
/// not the script's and is ignored. The nonce only finds the script's
/// output among the shell's; it is not what keeps a program from forging
/// (that is the length-counted frame below), so it being visible in argv
/// costs nothing.
///
/// Holding: under `timeout` (which makes the command its own process
/// group) the version command runs as `"$@" | cat`, so its run lasts until
/// its output closes — a program that exits 0 but leaves a child holding
/// stdout runs into the limit and is `version-command-timed-out`, not a
/// hang until the machine's budget — and its exit code is carried out
/// separately. When `timeout` returns, the whole group is SIGKILLed, so no
/// child it left behind survives on the machine.
///
/// Framing: the script prints every marker line itself. A version command's
/// output (stdout and stderr, at most [`VERSION_CAPTURE_MAX`] bytes kept, the
/// rest drained) is captured into a shell variable; only after the program
/// has ended does the shell print `@@saphan item K run RC SECS TRUNC LEN`
/// followed by exactly LEN bytes and a newline. Whatever the program prints —
/// marker lookalikes included — is inside its own length-counted body, so it
/// cannot speak for another capability. Nothing secret is in argv.
pub const SCRIPT: &str = crate::remote::PROBE;

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

/// Reads the probe script's output frame by frame.
struct Frames<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Frames<'a> {
    fn line(&mut self) -> Option<&'a str> {
        let rest = &self.buf[self.at..];
        let n = rest.iter().position(|&b| b == b'\n')?;
        self.at += n + 1;
        std::str::from_utf8(&rest[..n]).ok()
    }
    fn body(&mut self, len: usize) -> Option<&'a [u8]> {
        let rest = &self.buf[self.at..];
        if rest.len() < len + 1 || rest[len] != b'\n' {
            return None;
        }
        self.at += len + 1;
        Some(&rest[..len])
    }
}

/// One toolchain item as the output reader needs it.
#[derive(Debug, Clone, Copy)]
pub struct ScriptItem<'a> {
    /// The declared path.
    pub path: &'a str,
    /// The catalog entry (for `version_pattern`).
    pub entry: &'a Capability,
}

/// The line that opens the probe script's output, with the newline before
/// it (the script prints that newline itself: a greeting without one
/// cannot hide the marker).
fn begin_line(nonce: &str) -> String {
    format!("\n@@saphan begin {nonce}\n")
}

/// Read the probe script's output into one finding per item, in order.
/// What the login shell printed before the line `@@saphan begin NONCE` or
/// after the line `@@saphan end NONCE` is ignored; between them, anything
/// but exactly the expected frames is refused as unreadable.
pub fn read_script_output(
    machine: &str,
    items: &[ScriptItem<'_>],
    out: &[u8],
    version_timeout: u64,
    nonce: &str,
) -> Result<Vec<Finding>, FleetError> {
    let bad = |detail: String| FleetError::MeasureOutput {
        machine: machine.into(),
        detail,
    };
    let begin = begin_line(nonce);
    let start = out
        .windows(begin.len())
        .position(|w| w == begin.as_bytes())
        .ok_or_else(|| bad("the probe script's begin marker is missing (it did not run)".into()))?;
    let mut fr = Frames {
        buf: out,
        at: start + begin.len(),
    };
    let workhome = match fr.line() {
        Some("@@saphan workhome present") => true,
        Some("@@saphan workhome absent") => false,
        _ => return Err(bad("the probe script printed no workhome marker".into())),
    };
    let mut found = Vec::new();
    for (k, it) in items.iter().enumerate() {
        let prefix = format!("@@saphan item {k} ");
        let Some(head) = fr.line().and_then(|l| l.strip_prefix(prefix.as_str())) else {
            return Err(bad(format!(
                "the probe script did not finish ({k} of {} capabilities reported)",
                items.len()
            )));
        };
        let mut f = read_item(machine, it, head, &mut fr, version_timeout)?;
        f.detail
            .insert("workhome_exists".into(), Value::Bool(workhome));
        found.push(f);
    }
    if fr.line() != Some(format!("@@saphan end {nonce}").as_str()) {
        return Err(bad(
            "the probe script's output does not end where it should".into(),
        ));
    }
    Ok(found)
}

fn read_item(
    machine: &str,
    it: &ScriptItem<'_>,
    head: &str,
    fr: &mut Frames<'_>,
    version_timeout: u64,
) -> Result<Finding, FleetError> {
    let path = it.path;
    let mut f = Finding::default();
    let set = |f: &mut Finding, o: Outcome, r: &str, d: String| {
        f.outcome = Some(o);
        f.reason = Some(r.into());
        f.reason_detail = Some(d);
    };
    let bad = |detail: String| FleetError::MeasureOutput {
        machine: machine.into(),
        detail,
    };
    match head {
        "absent" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} does not exist on {machine}"),
        ),
        "dangling" => set(
            &mut f,
            Outcome::Absent,
            "not-found",
            format!("{path} is a symbolic link to nothing on {machine}"),
        ),
        "directory" => set(
            &mut f,
            Outcome::Failed,
            "not-a-file",
            format!("{path} is a directory on {machine}"),
        ),
        "not-executable" => set(
            &mut f,
            Outcome::Failed,
            "not-executable",
            format!("{path} exists on {machine} but is not executable"),
        ),
        run if run.starts_with("run ") => {
            let nums: Vec<i64> = run[4..]
                .split(' ')
                .map(|n| n.parse::<i64>().unwrap_or(-1))
                .collect();
            let [code, secs, truncated, len] = nums[..] else {
                return Err(bad(format!(
                    "unexpected probe frame `{}`",
                    truncate(run, 80)
                )));
            };
            let body = usize::try_from(len)
                .ok()
                .filter(|&l| l <= VERSION_CAPTURE_MAX)
                .and_then(|l| fr.body(l))
                .ok_or_else(|| bad("a version output frame is cut short".into()))?;
            let output = String::from_utf8_lossy(body).trim_end().to_string();
            f.version_output = Some(truncate(&output, VERSION_OUTPUT_MAX));
            f.detail
                .insert("version_exit_code".into(), Value::from(code));
            f.detail.insert("version_seconds".into(), Value::from(secs));
            if truncated == 1 {
                f.detail
                    .insert("version_output_truncated".into(), Value::Bool(true));
                f.detail.insert(
                    "version_output_captured_bytes".into(),
                    Value::from(VERSION_CAPTURE_MAX),
                );
            }
            // GNU timeout exits 124 (TERM worked) or 137 (KILL after -k);
            // only a run that also lasted the whole limit is a timeout — a
            // program may exit 124 on its own.
            let timed_out = matches!(code, 124 | 137) && secs >= version_timeout as i64;
            if timed_out {
                set(
                    &mut f,
                    Outcome::Failed,
                    "version-command-timed-out",
                    format!(
                        "{path}'s version command ran past {version_timeout}s on {machine} and was killed"
                    ),
                );
            } else if code != 0 {
                let first = output.lines().next().unwrap_or("").to_string();
                set(
                    &mut f,
                    Outcome::Failed,
                    "version-command-failed",
                    format!(
                        "{path}'s version command exited {code} on {machine}: {}",
                        truncate(&first, 200)
                    ),
                );
            } else if !it.entry.version_matches(&output) {
                let first = output.lines().next().unwrap_or("").to_string();
                set(
                    &mut f,
                    Outcome::Failed,
                    "version-output-mismatch",
                    format!(
                        "{path} ran on {machine} but its version output `{}` does not match the catalog's version_pattern `{}` — it is not this program",
                        truncate(&first, 120),
                        it.entry.version_pattern.as_deref().unwrap_or("")
                    ),
                );
            } else {
                f.outcome = Some(Outcome::Present);
            }
        }
        other => {
            return Err(bad(format!(
                "unexpected probe output `{}`",
                truncate(other, 80)
            )));
        }
    }
    Ok(f)
}

/// The seconds each version command may run when `n` share `budget`: the
/// budget less 3 s for the exchange, split evenly, less 2 s for the kill
/// that follows an ignored TERM; at least 1.
pub fn version_timeout(budget: Duration, n: usize) -> u64 {
    let per = budget.as_secs().saturating_sub(3) / n.max(1) as u64;
    per.saturating_sub(2).max(1)
}

/// SIGKILL every `timeout` noted in `dir` (one file per pid, removed by the
/// script once that `timeout` was waited for) and its process group, and
/// wait, at most [`crate::exec::GRACE`], until the groups have ended. The
/// pid itself is signalled too: a `timeout` that made no group of its own
/// (busybox's) is no group leader.
async fn kill_noted_groups(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|p| *p > 1)
        .collect();
    for &p in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    crate::procs::kill_groups(&pids, crate::exec::GRACE).await;
}

/// Probe toolchain capabilities on one machine: one exec of [`SCRIPT`] for
/// all of them. `items` are (capability entry, inputs).
pub async fn probe_toolchains(
    home: &Home,
    machine: &MachineRow,
    items: &[(&Capability, &ProbeInputs)],
    t: &Transport,
    timeout: Duration,
) -> Result<Vec<Finding>, FleetError> {
    let version_timeout = version_timeout(timeout, items.len());
    // On this machine, a private directory where the script notes the
    // version commands' process groups (for Ctrl-C).
    let pid_dir = match t {
        Transport::Local(_) => tempfile::Builder::new()
            .prefix("saphan-probe-pids-")
            .tempdir()
            .ok(),
        Transport::Ssh(_) | Transport::Slurm(_) => None,
    };
    let workhome = items
        .first()
        .map(|(_, i)| i.workhome.clone())
        .unwrap_or_else(|| "/".into());
    let nonce = {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).map_err(|e| FleetError::MeasureOutput {
            machine: machine.id.clone(),
            detail: format!("no randomness for the probe's nonce: {e}"),
        })?;
        hex::encode(b)
    };
    let mut argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "saphan-probe".into(),
        version_timeout.to_string(),
        workhome,
        pid_dir
            .as_ref()
            .map(|d| d.path().to_string_lossy().into_owned())
            .unwrap_or_default(),
        nonce.clone(),
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
    // What the login shell prints before the script's begin line is
    // dropped as it streams in, however much of it there is.
    let begin = begin_line(&nonce);
    let out = tokio::select! {
        r = t.exec_from(&argv, timeout, begin.as_bytes()) => r.map_err(|source| FleetError::Transport {
            machine: machine.id.clone(),
            source: Box::new(source),
        })?,
        _ = crate::cancel::cancelled() => {
            // Dropping the exec killed the script's process group; the
            // version commands run under `timeout` in groups of their own.
            if let Some(d) = &pid_dir {
                kill_noted_groups(d.path()).await;
            }
            return Err(FleetError::Interrupted { machine: machine.id.clone() });
        }
    };
    if out.status == crate::exec::Termination::TimedOut {
        return Err(FleetError::Timeout {
            machine: machine.id.clone(),
            budget: timeout,
            hint: super::machines::reach_hint(home, machine),
        });
    }
    if let Some(why) = out.lost_why() {
        return Err(FleetError::MeasureOutput {
            machine: machine.id.clone(),
            detail: why,
        });
    }
    tracing::debug!(machine = %machine.id, output = ?String::from_utf8_lossy(&out.stdout), "probe output");
    let script_items: Vec<ScriptItem<'_>> = items
        .iter()
        .map(|(entry, i)| ScriptItem {
            path: i.declared_path.as_str(),
            entry,
        })
        .collect();
    read_script_output(
        &machine.id,
        &script_items,
        &out.stdout,
        version_timeout,
        &nonce,
    )
}

/// Checks for a non-toolchain capability (`docker-oci`, `sandbox-userns`)
/// made once, before any machine is contacted — e.g. refusing
/// `docker-probe-image-unpinned` while the catalog pin is the zero digest.
///
/// Delegates to [`super::docker_probes::precheck`]. `origin` names the catalog (`embedded` or the `--catalog` path).
pub fn precheck_other(capability: &str, entry: &Capability, origin: &str) -> Result<()> {
    super::docker_probes::precheck(capability, entry, origin)
}

/// Probe a non-toolchain capability on one connected machine.
///
/// Delegates to [`super::docker_probes::probe`], which returns a [`Finding`] (the
/// ceremony adds facts, measured_at, catalog digest and the two-line remedy —
/// using `Finding::install` for line 1 when set — then signs and appends the
/// row), or an error to record nothing for this machine.
pub async fn probe_other(req: &ProbeRequest<'_>, t: &Transport) -> Result<Finding> {
    super::docker_probes::probe(req, t).await
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
    probe_on(home, ledger, row, s, &t, started).await
}

/// [`probe_machine`] over a connection already open to `row` (the
/// re-measure ceremony measures and probes over one connection). `started`
/// is when `s.timeout` began to run (the connection's own start, if it was
/// opened for this probe); every step is bounded by what is left of it.
///
/// Errors: the toolchain exec failed or was interrupted (nothing recorded
/// for any item).
pub async fn probe_on(
    home: &Home,
    ledger: &Arc<Ledger>,
    row: &MachineRow,
    s: &ProbeSettings,
    t: &Transport,
    started: tokio::time::Instant,
) -> Result<Vec<Result<CapabilityRow>>> {
    let s = &s.for_row(row);
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
        let found = probe_toolchains(home, row, &items, t, remaining()).await?;
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
        findings[i] = Some(probe_other(&req, t).await);
    }
    if crate::cancel::token().is_cancelled() {
        return Err(FleetError::Interrupted {
            machine: row.id.clone(),
        }
        .into());
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
        match ledger
            .append_off_runtime(super::ledger::Row::Capability(cap.clone()))
            .await
        {
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
        measured_at: crate::clock::now_rfc3339_seconds(),
        catalog_digest: it.entry.digest(&it.capability),
        remedy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_framed_outputs_and_ignores_what_the_shell_prints_around_them() {
        let cat = crate::catalog::Catalog::load(None).unwrap();
        let go = cat.get("go").unwrap();
        let it = |p| ScriptItem { path: p, entry: go };
        const N: &str = "0123456789abcdef0123456789abcdef";
        let body = format!(
            "go version go1.19.8 linux/amd64\n@@saphan item 2 run 0 0 0 3\nfoo\n@@saphan end {N}"
        );
        let frames = format!(
            "\n@@saphan begin {N}\n@@saphan workhome present\n@@saphan item 0 absent\n@@saphan item 1 run 0 0 0 {}\n{body}\n@@saphan item 2 run 2 0 0 4\nboom\n@@saphan end {N}\n",
            body.len()
        );
        let three = [it("/a"), it("/b"), it("/c")];
        // A login shell's greeting (without a newline) before, a goodbye after.
        for out in [
            frames.clone(),
            format!("Welcome{frames}"),
            format!("Welcome\n@@saphan end {N}\n{frames}Bye\n@@saphan item 9 absent\n"),
        ] {
            let f = read_script_output("m0", &three, out.as_bytes(), 5, N).unwrap();
            assert_eq!(f[0].outcome, Some(Outcome::Absent));
            assert_eq!(f[0].detail["workhome_exists"], Value::Bool(true));
            assert_eq!(f[1].outcome, Some(Outcome::Present));
            assert!(f[1].version_output.as_deref().unwrap().ends_with(N));
            assert_eq!(f[2].reason.as_deref(), Some("version-command-failed"));
        }
        // Another run's nonce, or none at all, is not this run's output.
        let other = "ffffffffffffffffffffffffffffffff";
        assert!(read_script_output("m0", &three, frames.as_bytes(), 5, other).is_err());
        let short = format!(
            "\n@@saphan begin {N}\n@@saphan workhome absent\n@@saphan item 0 run 0 0 0 99\nhalf\n"
        );
        assert!(read_script_output("m0", &[it("/a")], short.as_bytes(), 5, N).is_err());
        // 124 after the whole limit is a timeout; 124 at once is the program's own exit.
        let t = |secs| {
            format!(
                "\n@@saphan begin {N}\n@@saphan workhome present\n@@saphan item 0 run 124 {secs} 0 0\n\n@@saphan end {N}\n"
            )
        };
        let r = |o: String| {
            read_script_output("m0", &[it("/a")], o.as_bytes(), 5, N).unwrap()[0]
                .reason
                .clone()
        };
        assert_eq!(r(t(5)).as_deref(), Some("version-command-timed-out"));
        assert_eq!(r(t(0)).as_deref(), Some("version-command-failed"));
    }
}
