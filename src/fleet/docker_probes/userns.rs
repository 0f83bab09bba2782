//! The sandbox-userns probe: can the user saphan runs as on a machine create
//! an unprivileged user namespace?
//!
//! Method: run the declared `unshare` (util-linux) as that user —
//! `unshare --user --map-root-user true` — through the machine's transport,
//! so the answer comes from the kernel itself, not from reading settings.
//! Beside it the probe records the sysctls that usually decide the answer
//! (`/proc/sys/user/max_user_namespaces`,
//! `/proc/sys/kernel/unprivileged_userns_clone` on Debian-patched kernels,
//! `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` on Ubuntu), and
//! a denial's remedy is chosen from those measured values. This is separate
//! from docker-oci, which says nothing about user namespaces.

use super::{Platform, failed};
use crate::fleet::finding::Finding;
use crate::fleet::ledger::Outcome;
use crate::transport::Transport;
use serde_json::{Map, Value};
use std::time::Duration;

/// What the sandbox-userns probe needs besides the machine.
#[derive(Debug, Clone)]
pub struct UsernsProbeSettings {
    /// The declared absolute path of `unshare` on the machine.
    pub declared_path: String,
    /// The machine's measured platform, for remedies.
    pub platform: Platform,
    /// Budget for each command run on the machine.
    pub budget: Duration,
    /// The catalog row's `version_pattern` (the `--version` output must match).
    pub version_pattern: Option<String>,
}

/// The sysctls read beside the attempt (file path, key in the row's detail).
pub const SYSCTLS: &[(&str, &str)] = &[
    ("/proc/sys/user/max_user_namespaces", "max_user_namespaces"),
    (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "unprivileged_userns_clone",
    ),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "apparmor_restrict_unprivileged_userns",
    ),
];

/// The remedy for a denial, from the measured sysctls (`None` when they do
/// not explain it).
pub fn fix_for_denial(detail: &Map<String, Value>, platform: &Platform) -> Option<String> {
    if platform.os.as_deref() != Some("Linux") {
        return None;
    }
    let get = |k: &str| detail.get(k).and_then(Value::as_u64);
    let mut cmds = Vec::new();
    if get("max_user_namespaces") == Some(0) {
        cmds.push("sysctl -w user.max_user_namespaces=15000");
    }
    if get("unprivileged_userns_clone") == Some(0) {
        cmds.push("sysctl -w kernel.unprivileged_userns_clone=1");
    }
    if get("apparmor_restrict_unprivileged_userns") == Some(1) {
        cmds.push("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0");
    }
    (!cmds.is_empty()).then(|| cmds.join(" && "))
}

/// Probe sandbox-userns on the machine behind `transport`.
///
/// `install` is the catalog row's install command for the machine's measured
/// platform. Never an error: `binary-absent` (no runnable `unshare` at the
/// declared path), `userns-denied` (it ran and the kernel refused), or
/// present. The row's detail holds `method`, the attempt's stderr on
/// denial, and each sysctl that exists on the machine.
pub async fn probe_sandbox_userns(
    transport: &Transport,
    s: &UsernsProbeSettings,
    install: Option<&str>,
) -> Finding {
    let mut detail = Map::new();
    detail.insert(
        "method".into(),
        Value::from(format!(
            "{} --user --map-root-user cat /proc/self/uid_map",
            s.declared_path
        )),
    );
    let uid = transport
        .exec(&["id".to_string(), "-u".to_string()], s.budget)
        .await
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| o.stdout_str().trim().parse::<u64>().ok());
    if let Some(u) = uid {
        detail.insert("uid".into(), Value::from(u));
    }
    for (path, key) in SYSCTLS {
        let argv = vec!["cat".to_string(), path.to_string()];
        if let Ok(o) = transport.exec(&argv, s.budget).await
            && o.status.success()
            && let Ok(n) = o.stdout_str().trim().parse::<u64>()
        {
            detail.insert(key.to_string(), Value::from(n));
        }
    }
    let version = transport
        .exec(&[s.declared_path.clone(), "--version".into()], s.budget)
        .await
        .ok()
        .filter(|o| o.status.success())
        .map(|o| o.stdout_str());
    let argv: Vec<String> = [
        &s.declared_path,
        "--user",
        "--map-root-user",
        "cat",
        "/proc/self/uid_map",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let absent = |why: String| {
        let mut f = failed(
            Outcome::Absent,
            super::Reason::BinaryAbsent,
            why,
            install.map(str::to_string),
        );
        f.detail = detail.clone();
        f
    };
    match transport.exec(&argv, s.budget).await {
        Err(crate::transport::TransportError::Spawn { source, .. }) => absent(format!(
            "no unshare program at {} ({source})",
            s.declared_path
        )),
        Err(e) => failed(
            Outcome::Failed,
            super::Reason::ProbeRunFailed,
            format!("could not run {} on the machine: {e}", s.declared_path),
            None,
        ),
        Ok(o) if matches!(o.status.code(), Some(126) | Some(127)) => absent(format!(
            "no runnable unshare program at {} ({})",
            s.declared_path,
            o.stderr_str()
        )),
        Ok(o) if o.status.success() => {
            let map = o.stdout_str();
            detail.insert("uid_map".into(), Value::from(map.trim().to_string()));
            let version_ok = version
                .as_deref()
                .is_some_and(|v| entry_matches(s.version_pattern.as_deref(), v));
            let mapped = uid.is_some_and(|u| maps_root_to(&map, u));
            let mut f = if !version_ok {
                failed(
                    Outcome::Failed,
                    super::Reason::VersionOutputMismatch,
                    format!(
                        "{} ran, but its version output {:?} does not match the catalog's version_pattern `{}` — it is not util-linux unshare",
                        s.declared_path,
                        version
                            .as_deref()
                            .unwrap_or("")
                            .lines()
                            .next()
                            .unwrap_or(""),
                        s.version_pattern.as_deref().unwrap_or("")
                    ),
                    install.map(str::to_string),
                )
            } else if !mapped {
                failed(
                    Outcome::Failed,
                    super::Reason::UsernsNotCreated,
                    format!(
                        "{} exited 0 but no user namespace was shown: /proc/self/uid_map inside it should read `0 {} 1`, it read {:?}",
                        s.declared_path,
                        uid.map(|u| u.to_string()).unwrap_or_else(|| "<uid>".into()),
                        truncate(map.trim(), 200)
                    ),
                    None,
                )
            } else {
                Finding {
                    outcome: Some(Outcome::Present),
                    ..Default::default()
                }
            };
            f.version_output = version;
            f.detail = detail;
            f
        }
        Ok(o) => {
            let why = o.stderr_str();
            detail.insert("stderr".into(), Value::from(why.clone()));
            let fix = fix_for_denial(&detail, &s.platform);
            let mut f = failed(
                Outcome::Failed,
                super::Reason::UsernsDenied,
                format!(
                    "the kernel refused an unprivileged user namespace ({:?}: {why})",
                    o.status
                ),
                fix,
            );
            f.detail = detail;
            f.version_output = version;
            f
        }
    }
}

/// Does `uid_map` (the file's text) map root in the namespace to `uid` outside,
/// one id wide: a line `0 <uid> 1`?
pub fn maps_root_to(uid_map: &str, uid: u64) -> bool {
    uid_map.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3 && f[0] == "0" && f[1].parse() == Ok(uid) && f[2] == "1"
    })
}

fn entry_matches(pattern: Option<&str>, output: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => crate::catalog::compile_pattern(p)
            .map(|re| re.is_match(output.as_bytes()))
            .unwrap_or(false),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_map_must_map_root_to_the_user() {
        assert!(maps_root_to("         0       1000          1\n", 1000));
        assert!(!maps_root_to("         0          0 4294967295\n", 0));
        assert!(!maps_root_to("", 0));
        assert!(!maps_root_to("0 1000 1", 1001));
    }

    #[test]
    fn denial_remedy_comes_from_measured_sysctls() {
        let linux = Platform {
            os: Some("Linux".into()),
            ids: vec!["debian".into()],
            user: None,
        };
        let mut d = Map::new();
        d.insert("max_user_namespaces".into(), 0.into());
        assert_eq!(
            fix_for_denial(&d, &linux).as_deref(),
            Some("sysctl -w user.max_user_namespaces=15000")
        );
        d.insert("max_user_namespaces".into(), 100.into());
        assert_eq!(fix_for_denial(&d, &linux), None);
        assert_eq!(fix_for_denial(&d, &Platform::default()), None);
    }
}
