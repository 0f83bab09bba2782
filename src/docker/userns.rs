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
use crate::fleet::ledger::Outcome;
use crate::fleet::probe::Finding;
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
        Value::from(format!("{} --user --map-root-user true", s.declared_path)),
    );
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
    let argv: Vec<String> = [&s.declared_path, "--user", "--map-root-user", "true"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let absent = |why: String| {
        let mut f = failed(
            Outcome::Absent,
            "binary-absent",
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
            "probe-run-failed",
            format!("could not run {} on the machine: {e}", s.declared_path),
            None,
        ),
        Ok(o) if matches!(o.status.code(), Some(126) | Some(127)) => absent(format!(
            "no runnable unshare program at {} ({})",
            s.declared_path,
            o.stderr_str()
        )),
        Ok(o) if o.status.success() => Finding {
            outcome: Some(Outcome::Present),
            version_output: version,
            detail,
            ..Default::default()
        },
        Ok(o) => {
            let why = o.stderr_str();
            detail.insert("stderr".into(), Value::from(why.clone()));
            let fix = fix_for_denial(&detail, &s.platform);
            let mut f = failed(
                Outcome::Failed,
                "userns-denied",
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

#[cfg(test)]
mod tests {
    use super::*;

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
