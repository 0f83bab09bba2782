//! `machine measure`: a machine's confinement facts, gathered by one small
//! POSIX shell script in ONE remote exec (one round trip per machine).
//!
//! The script prints sections, each introduced by a marker line
//! `@@saphan-measure:<name>` and the whole closed by `@@saphan-measure:end`;
//! [`parse`] reads them back. Files are read with shell builtins, so the
//! whole script starts only four programs (`uname`, `getconf`, `id`,
//! `unshare`). User-namespace support is decided by an
//! attempt, `unshare -U true`, as the connected user; when `unshare` is
//! missing, by the sysctls (`max_user_namespaces` > 0 and, where the kernel
//! has it, `unprivileged_userns_clone` = 1 — or the user is root).
//!
//! The same script measures the dispatch requirements (`flock`, `setsid`,
//! `sha256sum`/`shasum`, `git` and its version, `/proc`, `ps`), each by a
//! tiny real use of the tool, into [`MachineFacts::requirements`];
//! admission judges them (`crate::dispatch::admit`).

use super::FleetError;
use super::ledger::{MachineFacts, Requirements, ToolState, Userns};
use crate::platform::OsRelease;
use crate::transport::Transport;
use std::collections::BTreeMap;
use std::time::Duration;

/// The measure script (POSIX sh; Linux and Darwin).
pub const SCRIPT: &str = crate::remote::MEASURE;

/// Split the script's output into sections by marker.
fn sections(out: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut cur: Option<(String, String)> = None;
    for line in out.lines() {
        if let Some(name) = line.strip_prefix("@@saphan-measure:") {
            if let Some((n, body)) = cur.take() {
                map.insert(n, body.trim().to_string());
            }
            cur = Some((name.trim().to_string(), String::new()));
        } else if let Some((_, body)) = cur.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((n, body)) = cur {
        map.insert(n, body.trim().to_string());
    }
    map
}

/// Read the script's output into facts for `machine`, stamped `measured_at`.
///
/// Errors: [`FleetError::MeasureOutput`] when the end marker or `uname`
/// facts are missing (the script did not run to its end).
pub fn parse(machine: &str, measured_at: &str, out: &str) -> Result<MachineFacts, FleetError> {
    let s = sections(out);
    let bad = |detail: &str| FleetError::MeasureOutput {
        machine: machine.to_string(),
        detail: detail.to_string(),
    };
    if !s.contains_key("end") {
        return Err(bad("the end marker is missing (the script did not finish)"));
    }
    let get = |k: &str| s.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let first_num = |k: &str| get(k).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    // `uname -srm` prints kernel name, release, machine — in that order.
    let uname: Vec<&str> = get("uname")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let [os, kernel, arch] = uname[..] else {
        return Err(bad("`uname -srm` did not print three words"));
    };
    let (os, kernel, arch) = (os.to_string(), kernel.to_string(), arch.to_string());
    let distro = get("os-release").map(OsRelease::parse);
    let memory_bytes = get("memory").and_then(|v| {
        if let Some(rest) = v.strip_prefix("MemTotal:") {
            let mut it = rest.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            let unit = it.next().unwrap_or("kB");
            Some(if unit.eq_ignore_ascii_case("kb") {
                n * 1024
            } else {
                n
            })
        } else {
            v.trim().parse().ok()
        }
    });
    let max = first_num("userns-max");
    let clone = first_num("userns-clone");
    let root = first_num("uid") == Some(0);
    let userns = match get("userns-unshare") {
        Some("ok") => Userns {
            supported: Some(true),
            method: "unshare -U true".into(),
            max_user_namespaces: max,
            unprivileged_userns_clone: clone,
        },
        Some("fail") => Userns {
            supported: Some(false),
            method: "unshare -U true".into(),
            max_user_namespaces: max,
            unprivileged_userns_clone: clone,
        },
        _ => Userns {
            supported: max.map(|m| m > 0 && (root || clone.unwrap_or(1) == 1)),
            method: if max.is_some() { "sysctl" } else { "none" }.into(),
            max_user_namespaces: max,
            unprivileged_userns_clone: clone,
        },
    };
    Ok(MachineFacts {
        machine: machine.to_string(),
        measured_at: measured_at.to_string(),
        os,
        arch,
        kernel,
        distro,
        cpus: first_num("cpus").filter(|n| *n > 0),
        memory_bytes: memory_bytes.filter(|n| *n > 0),
        userns,
        requirements: s.get("requirements").map(String::as_str).map(requirements),
    })
}

/// The requirements section (`TOOL ok|not-runnable|absent`, git's line with
/// its version) as [`Requirements`]; a tool without a line is absent.
fn requirements(body: &str) -> Requirements {
    let mut seen: BTreeMap<&str, (ToolState, Option<String>)> = BTreeMap::new();
    for line in body.lines() {
        let mut w = line.split_whitespace();
        let (Some(tool), Some(state)) = (w.next(), w.next()) else {
            continue;
        };
        let state = match state {
            "ok" => ToolState::Ok,
            "not-runnable" => ToolState::NotRunnable,
            _ => ToolState::Absent,
        };
        seen.insert(tool, (state, w.next().map(str::to_string)));
    }
    let get = |t: &str| seen.get(t).map(|(s, _)| *s).unwrap_or(ToolState::Absent);
    Requirements {
        flock: get("flock"),
        setsid: get("setsid"),
        sha256sum: get("sha256sum"),
        shasum: get("shasum"),
        git: get("git"),
        git_version: seen
            .get("git")
            .filter(|(s, _)| *s == ToolState::Ok)
            .and_then(|(_, v)| v.clone()),
        proc: get("proc"),
        ps: get("ps"),
        bwrap: seen.get("bwrap").map(|(s, _)| *s),
        bwrap_path: seen
            .get("bwrap")
            .filter(|(s, _)| *s == ToolState::Ok)
            .and_then(|(_, v)| v.clone()),
    }
}

/// Run the measure script on `t` and read the facts.
pub async fn measure(
    t: &Transport,
    machine: &str,
    timeout: Duration,
) -> Result<MachineFacts, FleetError> {
    let argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "saphan-measure".into(),
    ];
    let out = t
        .exec(&argv, timeout)
        .await
        .map_err(|source| FleetError::Transport {
            machine: machine.to_string(),
            source: Box::new(source),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    tracing::debug!(machine, output = ?text, "measure output");
    if out.status == crate::exec::Termination::TimedOut {
        return Err(FleetError::MeasureOutput {
            machine: machine.into(),
            detail: format!("the script ran past {}s", timeout.as_secs_f64()),
        });
    }
    if let Some(why) = out.lost_why() {
        return Err(FleetError::MeasureOutput {
            machine: machine.into(),
            detail: why,
        });
    }
    parse(machine, &crate::clock::now_rfc3339_seconds(), &text)
}

/// The `machine measure` ceremony for one machine: connect to `row`,
/// run the measure script ([`measure`]), and append the facts to the
/// ledger as a signed `machine` row (off the runtime). Bounded by
/// `timeout` per step.
///
/// Errors: the connection's (`host-unreachable`, …), the script's
/// (`measure-output-invalid`, …), the ledger's.
pub async fn measure_machine(
    home: &crate::home::Home,
    led: &std::sync::Arc<super::ledger::Ledger>,
    row: &super::machines::MachineRow,
    timeout: Duration,
) -> crate::error::Result<MachineFacts> {
    let t = super::machines::connect(home, row, timeout).await?;
    let f = measure(&t, &row.id, timeout).await?;
    led.append_off_runtime(super::ledger::Row::Machine(f.clone()))
        .await?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_linux_output() {
        let out = "\n@@saphan-measure:uname\nLinux 6.1.0 x86_64\n\
                   @@saphan-measure:os-release\nID=debian\nVERSION_ID=\"12\"\n\
                   @@saphan-measure:cpus\n2\n@@saphan-measure:memory\nMemTotal:        4000000 kB\n\
                   @@saphan-measure:uid\n0\n@@saphan-measure:userns-max\n100\n@@saphan-measure:userns-clone\n\n\
                   @@saphan-measure:userns-unshare\nok\n@@saphan-measure:end\n";
        let f = parse("m0", "2026-01-01T00:00:00Z", out).unwrap();
        assert_eq!(f.os, "Linux");
        assert_eq!(f.memory_bytes, Some(4_096_000_000));
        assert_eq!(f.cpus, Some(2));
        assert_eq!(f.platform_ids(), vec!["debian"]);
        assert_eq!(f.distro.unwrap().version_id.as_deref(), Some("12"));
        assert_eq!(f.userns.supported, Some(true));
        assert_eq!(f.userns.unprivileged_userns_clone, None);
        assert_eq!((f.kernel.as_str(), f.arch.as_str()), ("6.1.0", "x86_64"));
        assert!(parse("m0", "x", "@@saphan-measure:uname\nLinux\n").is_err());
        assert!(
            parse(
                "m0",
                "x",
                "@@saphan-measure:uname\nLinux\n@@saphan-measure:end\n"
            )
            .is_err()
        );
    }

    #[test]
    fn parses_the_requirements_and_reads_an_old_output_without_them() {
        let head = "@@saphan-measure:uname\nLinux 6.1.0 x86_64\n";
        let out = format!(
            "{head}@@saphan-measure:requirements\nflock not-runnable\nsetsid ok\nsha256sum absent\nshasum ok\ngit ok 2.39.5\nproc ok\n@@saphan-measure:end\n"
        );
        let r = parse("m0", "x", &out).unwrap().requirements.unwrap();
        assert_eq!(r.flock, ToolState::NotRunnable);
        assert_eq!(r.setsid, ToolState::Ok);
        assert_eq!((r.sha256sum, r.shasum), (ToolState::Absent, ToolState::Ok));
        assert_eq!(r.git_version.as_deref(), Some("2.39.5"));
        assert_eq!(r.ps, ToolState::Absent, "a tool without a line is absent");
        let old = parse("m0", "x", &format!("{head}@@saphan-measure:end\n")).unwrap();
        assert_eq!(old.requirements, None);
        let row = serde_json::to_value(&old).unwrap();
        assert!(
            row.get("requirements").is_none(),
            "an old row's bytes: {row}"
        );
        let back: MachineFacts = serde_json::from_value(row).unwrap();
        assert_eq!(back.requirements, None);
    }

    #[tokio::test]
    async fn measures_this_machine() {
        let f = measure(
            &Transport::Local(crate::transport::Local),
            "local",
            Duration::from_secs(20),
        )
        .await
        .unwrap();
        assert!(f.cpus.unwrap() > 0);
        assert!(f.memory_bytes.unwrap() > 0);
        assert!(!f.kernel.is_empty());
        let r = f.requirements.unwrap();
        assert_eq!(r.git, ToolState::Ok);
    }
}
