//! Remedies: the two complete commands a failed probe prints under `remedy`.
//!
//! 1. The install command for the machine's *measured* platform (its latest
//!    facts row; [`crate::catalog::Capability::install_for`]). For an SSH
//!    machine it is wrapped as `ssh -F <SAPHAN_HOME>/ssh/config <host> '<install>'`;
//!    for a local machine it is the install command itself. When the machine
//!    has never been measured the first line is `NO INSTALL COMMAND …` and the
//!    second is the measure command — never a guess from an id or host name.
//! 2. The complete re-measure invocation: the same `saphan machine probe`
//!    line, every argument shell-quoted.
//!
//! `SAPHAN_HOME` is spelled `~/.saphan` when it is the default
//! (`$HOME/.saphan`); otherwise its real path is used, and the saphan
//! command lines are prefixed with `SAPHAN_HOME=<path>` so that they act on
//! the same home as the probe that printed them.

use super::ledger::ProbeInputs;
pub use super::machines::reach_hint;
use super::machines::{MachineRow, TransportKind};
pub use super::spell::{home_is_default, login_user, quote, single_quote, ssh_config_display};
use crate::home::Home;
use std::path::Path;

/// The first word of the unmeasured remedy.
pub const NO_INSTALL_COMMAND: &str = "NO INSTALL COMMAND";

/// The line that says to write the fleet's ssh config first: saphan
/// reaches an SSH machine only through `SAPHAN_HOME/ssh/config` (OpenSSH
/// ssh_config(5)), never `~/.ssh/config`.
pub fn ssh_config_line(home: &Home, row: &MachineRow) -> String {
    format!(
        "write {} first: a `Host {}` block (HostName, User, IdentityFile, UserKnownHostsFile — OpenSSH ssh_config(5); docs/fleet.md), then measure",
        ssh_config_display(home),
        row.host
    )
}

/// `saphan`, or `SAPHAN_HOME=<path> saphan` for a non-default home, plus
/// `--catalog <absolute file>` when one was given.
pub fn saphan_prefix(home: &Home, catalog: Option<&Path>) -> String {
    let mut s = String::new();
    if !home_is_default(home) {
        s.push_str(&format!(
            "SAPHAN_HOME={} ",
            quote(&home.root().to_string_lossy())
        ));
    }
    s.push_str("saphan");
    if let Some(c) = catalog {
        // Absolute, so the line works from any directory.
        let abs = std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf());
        s.push_str(&format!(" --catalog {}", quote(&abs.to_string_lossy())));
    }
    s
}

/// The install line for `row`: the command itself for a local machine,
/// `ssh -F <config> <host> '<install>'` for an SSH one.
pub fn install_line(home: &Home, row: &MachineRow, install: &str) -> String {
    match row.transport {
        TransportKind::Local => install.to_string(),
        TransportKind::Ssh => format!(
            "ssh -F {} {} {}",
            ssh_config_display(home),
            row.host,
            single_quote(install)
        ),
        // A borrowed node: a step of its own on that node (as root, which
        // installing needs: the cluster's administrators run it).
        TransportKind::Slurm => format!(
            "srun -p {} -w {} -N1 -n1 sh -c {}",
            row.partition.as_deref().unwrap_or("PARTITION"),
            row.host,
            single_quote(install)
        ),
    }
}

/// `saphan machine measure --machine <id>`.
pub fn measure_line(home: &Home, catalog: Option<&Path>, machine: &str) -> String {
    format!(
        "{} machine measure {}",
        saphan_prefix(home, catalog),
        flag("machine", &machine_word(machine))
    )
}

/// `saphan machine remeasure --machine <id>[,<id>…]`: the one command
/// for rows that are only stale (and rows a probe said absent or failed,
/// which it probes again). `saphan` is [`saphan_prefix`].
pub fn remeasure_line(saphan: &str, machines: &[&str]) -> String {
    format!(
        "{saphan} machine remeasure {}",
        flag("machine", &machines.join(","))
    )
}

/// The complete `saphan machine probe …` invocation for one machine:
/// every input spelled out (so it records what the row it repeats
/// recorded, whoever pastes it), but `--workspace` only when the inputs
/// name one (none is its default).
pub fn probe_line(
    home: &Home,
    catalog: Option<&Path>,
    machine: &str,
    capability: &str,
    inputs: &ProbeInputs,
) -> String {
    let mut s = format!(
        "{} machine probe {} {} {} {} {}",
        saphan_prefix(home, catalog),
        flag("machine", &machine_word(machine)),
        flag("capability", capability),
        flag("declared-path", &inputs.declared_path),
        flag("workhome", &inputs.workhome),
        flag("probed-by", &inputs.probed_by),
    );
    if !inputs.workspace.is_empty() {
        s.push(' ');
        s.push_str(&flag("workspace", &inputs.workspace));
    }
    s
}

/// What `--machine` takes to reach `machine` again: the id itself, or for
/// a node borrowed from a Slurm pool (`NAME/<node>`) the pool, `@NAME` —
/// a node is measured and probed inside an allocation of its pool, which
/// reaches every node of the partition.
pub fn machine_word(machine: &str) -> String {
    match machine.split_once('/') {
        Some((pool, _)) => format!("@{pool}"),
        None => machine.to_string(),
    }
}

/// `--name value`, quoted for a POSIX shell — or `--name=value` when the
/// value begins with `-`, which the parser would otherwise take for a flag
/// (`--probed-by=-x`), so every printed command runs as printed.
pub fn flag(name: &str, value: &str) -> String {
    if value.starts_with('-') {
        format!("--{name}={}", quote(value))
    } else {
        format!("--{name} {}", quote(value))
    }
}

/// The probe inputs a remedy line proposes when no row recorded any —
/// `machine probe`'s own defaults: the machine row's workhome, the login
/// user ([`login_user`]) as the prober, no workspace, and `declared` as
/// the path.
pub fn default_inputs(row: &MachineRow, declared: &str) -> ProbeInputs {
    ProbeInputs {
        declared_path: declared.to_string(),
        workhome: row.workhome.clone(),
        probed_by: login_user(),
        workspace: String::new(),
    }
}

/// `inputs` with the workhome of `row` itself: a re-probe line names the
/// machine's own workhome, never one copied from another machine's row or
/// from a probe that named several machines with one `--workhome`.
pub fn with_row_workhome(row: &MachineRow, inputs: &ProbeInputs) -> ProbeInputs {
    ProbeInputs {
        workhome: row.workhome.clone(),
        ..inputs.clone()
    }
}

/// What an admission refusal's remedy must fix, from the ledger only.
#[derive(Debug, Clone)]
pub struct Needs {
    /// The machine's latest facts row is absent or stale: the measure line
    /// comes first.
    pub measure: bool,
    /// A probe must (re-)run: the capability and the inputs it is probed
    /// with (the workhome is always the row's own).
    pub probe: Option<(String, ProbeInputs)>,
    /// A probe already said absent or failed: the fix that comes before the
    /// re-probe — `Some(command)` for the measured platform, `None` when
    /// there is none (no measured platform, or the catalog has no command).
    pub fix: Option<Option<String>>,
    /// The platform ids of the latest facts row, fresh or stale (`None`:
    /// never measured).
    pub platform_ids: Option<Vec<String>>,
}

/// The remedy lines of an admission refusal, in the order they are run:
///
/// 1. `saphan machine measure …` when the facts row is absent or stale;
/// 2. only when a probe already said absent or failed: the install (or
///    reason-specific) command for the measured platform — wrapped in
///    `ssh -F …` for an SSH machine — or a `NO INSTALL COMMAND: …` line;
/// 3. the complete `saphan machine probe …` line when a probe is due,
///    with the machine row's own workhome.
///
/// A program never probed, or a `present` row that is only stale, gets no
/// install command: nothing says it is missing.
pub fn admission(
    home: &Home,
    catalog: Option<&Path>,
    row: &MachineRow,
    needs: &Needs,
) -> Vec<String> {
    let mut lines = Vec::new();
    if needs.measure {
        // Measuring an SSH machine reads the fleet's ssh config: say so
        // before the measure line fails on its absence.
        if matches!(row.transport, crate::fleet::machines::TransportKind::Ssh)
            && !home.ssh_config().exists()
        {
            lines.push(ssh_config_line(home, row));
        }
        lines.push(measure_line(home, catalog, &row.id));
    }
    let cap = needs
        .probe
        .as_ref()
        .map(|(c, _)| c.as_str())
        .unwrap_or("the program");
    match (&needs.fix, needs.platform_ids.as_deref()) {
        (None, _) => {}
        (Some(Some(cmd)), _) => lines.push(install_line(home, row, cmd)),
        (Some(None), None) => lines.push(format!(
            "{NO_INSTALL_COMMAND}: machine {} has no measured platform — measure it first (the line above), then install `{cap}` and probe again",
            row.id
        )),
        (Some(None), Some(ids)) => lines.push(format!(
            "{NO_INSTALL_COMMAND}: the catalog has no install command for `{cap}` on the measured platform ({}) — install it by hand, then probe again",
            if ids.is_empty() {
                "unknown".to_string()
            } else {
                ids.join(", ")
            }
        )),
    }
    if let Some((c, inputs)) = &needs.probe {
        lines.push(probe_line(
            home,
            catalog,
            &row.id,
            c,
            &with_row_workhome(row, inputs),
        ));
    }
    lines
}

/// The two remedy lines for a failed probe of `capability` on `row`.
///
/// `install` is the platform's install command when the machine was measured
/// and the catalog has one for its platform; `platform_ids` are the measured
/// platform ids (`None`: the machine has no facts row).
#[allow(clippy::too_many_arguments)]
pub fn remedy(
    home: &Home,
    catalog: Option<&Path>,
    row: &MachineRow,
    capability: &str,
    inputs: &ProbeInputs,
    platform_ids: Option<&[String]>,
    install: Option<&str>,
) -> [String; 2] {
    let own = with_row_workhome(row, inputs);
    match (platform_ids, install) {
        (None, _) => [
            format!(
                "{NO_INSTALL_COMMAND}: machine {} has no measured platform — measure it first, then probe again",
                row.id
            ),
            measure_line(home, catalog, &row.id),
        ],
        (Some(_), Some(cmd)) => [
            install_line(home, row, cmd),
            probe_line(home, catalog, &row.id, capability, &own),
        ],
        (Some(ids), None) => [
            format!(
                "{NO_INSTALL_COMMAND}: the catalog has no install command for `{capability}` on the measured platform ({}) — install it by hand, then probe again",
                if ids.is_empty() {
                    "unknown".to_string()
                } else {
                    ids.join(", ")
                }
            ),
            probe_line(home, catalog, &row.id, capability, &own),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(
            single_quote("apt-get install -y go"),
            "'apt-get install -y go'"
        );
        assert_eq!(single_quote("it's"), r"'it'\''s'");
        assert_eq!(quote("/usr/bin/go"), "/usr/bin/go");
        assert_eq!(quote("/a b;c'd"), r"'/a b;c'\''d'");
        assert_eq!(flag("probed-by", "-x"), "--probed-by=-x");
        assert_eq!(flag("probed-by", "- x"), "--probed-by='- x'");
        assert_eq!(flag("probed-by", "x"), "--probed-by x");
    }
}
