//! Admission of machines for a dispatched run, from the ledger only
//! (DESIGN §6a step 2): a machine row, a fresh facts row, and a fresh
//! `present` capability row for the suite's program. The local PATH is never
//! consulted.
//!
//! Every machine of an invocation is admitted or refused on its own
//! ([`admit_each`]); the refusals of a list come back together as one
//! [`NotAdmitted`], each machine with its own reason and remedy lines.
//! `--machine @admitted` ([`ADMITTED`]) selects every machine of
//! machines.toml that is admitted right now ([`select`]).
//!
//! A machine whose fresh facts row says a tool dispatch needs there does
//! not run (`setsid`; a SHA-256 tool; `git` at least [`MIN_GIT`]; `/proc`
//! or `ps`), or whose row was measured before those facts existed, is
//! refused as [`REQUIREMENTS_ABSENT`] ([`requirements`]), with the install
//! command of each missing tool for its measured platform ([`INSTALL`]).

use super::DispatchError;
use crate::catalog::Catalog;
use crate::docker::container::{ContainersRemain, LABEL_ATTEMPT, LABEL_MACHINE};
use crate::error::{Error, Exit, Refusal, Result};
use crate::fleet::ledger::{self, Ledger, MachineFacts, Outcome, Requirements, ToolState};
use crate::fleet::machines::{MachineRow, Machines};
use crate::fleet::remedy;
use crate::home::Home;
use crate::suite::{ResolvedSuite, SuiteSource};
use std::path::Path;

/// The `--machine` value that selects every machine of machines.toml
/// admitted for the suite right now, instead of naming machines.
pub const ADMITTED: &str = "@admitted";

/// The refusal name of a list whose machines are refused for different
/// reasons (one `verification-toolchain-absent`, one `machine-unknown` …).
/// When every refusal shares one name, the combined refusal keeps it.
pub const MIXED: &str = "machines-not-admitted";

/// What runs on an admitted machine.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The machine row.
    pub row: MachineRow,
    /// The suite's argv as it runs there (`argv[0]` is the capability row's
    /// declared absolute path when a catalog row maps the program).
    pub argv: Vec<String>,
    /// The catalog row that admitted the program (`None`: no row maps it;
    /// it is resolved on the machine before anything is shipped).
    pub capability: Option<String>,
    /// The declared absolute program path from the capability row.
    pub program_path: Option<String>,
    /// The version output the probe captured (first line), when it ran.
    pub program_version: Option<String>,
    /// The machine's measured `uname -s` / `uname -m`.
    pub os: String,
    /// See `os`.
    pub arch: String,
    /// What the machine can seal a host-class suite with, from its facts
    /// row ([`seal_of`]).
    pub seal: crate::seal::Capability,
    /// The `present` capability row that admitted the suite's program, and
    /// the probe line that measures it again; `None` for a program no
    /// catalog row maps and for the container class.
    pub vouched: Option<Vouched>,
}

/// The capability row that vouched for an admitted program ([`Admitted::vouched`]).
#[derive(Debug, Clone)]
pub struct Vouched {
    /// The row (`outcome: present`).
    pub row: ledger::CapabilityRow,
    /// `saphan machine probe …` for that machine, capability and path.
    pub probe: String,
}

impl Vouched {
    /// The words a `program-vanished` failure ends with: which row said
    /// `present`, that the machine is left out until probed again, and the
    /// probe line.
    pub fn words(&self) -> String {
        format!(
            "its `{}` row measured {} said present — its row is superseded and the machine is left out of admission until it is probed again: {}",
            self.row.capability, self.row.measured_at, self.probe
        )
    }
}

/// Supersede the row that vouched for `m`'s program after an attempt found
/// nothing at its path (`program-vanished`): append to the ledger a signed
/// capability row for the same machine, capability and inputs, outcome
/// `absent`, reason `program-vanished` with the attempt's `detail`, the
/// probe line as its remedy. Admission reads the latest row, so the
/// machine is refused for this program — and left out of `@admitted` —
/// until a probe says `present` again. A program no row vouched for
/// appends nothing.
///
/// Errors: the ledger's own (`ledger-*`, `saphan-home-exposed`, `io`).
pub async fn supersede(home: &Home, m: &Admitted, detail: &str) -> Result<()> {
    let Some(v) = &m.vouched else {
        return Ok(());
    };
    let row = ledger::CapabilityRow {
        machine: v.row.machine.clone(),
        capability: v.row.capability.clone(),
        inputs: v.row.inputs.clone(),
        outcome: Outcome::Absent,
        reason: Some(
            crate::report::FailureKind::ProgramVanished
                .as_str()
                .to_string(),
        ),
        reason_detail: Some(detail.to_string()),
        version_output: None,
        detail: serde_json::Map::from_iter([(
            "superseded".to_string(),
            serde_json::Value::String(v.row.measured_at.clone()),
        )]),
        facts: v.row.facts.clone(),
        measured_at: crate::clock::now_rfc3339(),
        catalog_digest: v.row.catalog_digest.clone(),
        remedy: vec![v.probe.clone()],
    };
    let home = home.clone();
    tokio::task::spawn_blocking(move || Ledger::open(&home)?.append_capability(row))
        .await
        .map_err(|e| {
            Error::from(crate::error::IoError::Io {
                action: "append to",
                path: std::path::PathBuf::from("the ledger"),
                source: std::io::Error::other(e.to_string()),
            })
        })?
}

/// What the machine of facts row `f` can seal with: bwrap at its measured
/// path when `machine measure` ran a sealed `true` there; otherwise why
/// not, ending in what to do.
pub fn seal_of(
    home: &Home,
    catalog: Option<&Path>,
    row: &MachineRow,
    f: &MachineFacts,
) -> crate::seal::Capability {
    use crate::seal::Capability;
    let measure = remedy::measure_line(home, catalog, &row.id);
    if f.os != "Linux" {
        return Capability::Unable(format!(
            "{} is not Linux ({}): the seal needs Linux namespaces",
            row.id, f.os
        ));
    }
    let r = f.requirements.as_ref();
    match (
        r.and_then(|r| r.bwrap),
        r.and_then(|r| r.bwrap_path.clone()),
    ) {
        (Some(ToolState::Ok), Some(path)) => Capability::Tool(path),
        (None, _) | (Some(ToolState::Ok), None) => Capability::Unable(format!(
            "its facts row ({}) was measured before saphan measured the seal — {measure}",
            f.measured_at
        )),
        (Some(ToolState::Absent), _) => Capability::Unable(format!(
            "bwrap is not installed on {} — {}, then {measure}",
            row.id,
            crate::seal::INSTALL_HINT
        )),
        (Some(ToolState::NotRunnable), _) => Capability::Unable(format!(
            "bwrap on {} did not run a sealed `true` (not a working program there, or no namespaces for this login: unprivileged user namespaces off?) — reinstall bubblewrap, enable user namespaces or log in as root, then {measure}",
            row.id
        )),
    }
}

/// The program token default-go names for a remote run: the machine's own
/// `go` as the capability row declares it — never the local path.
fn program_token(suite: &ResolvedSuite) -> String {
    match suite.source {
        SuiteSource::DefaultGo => "go".into(),
        SuiteSource::Config(_) | SuiteSource::RepoConfig(_) => {
            suite.argv.first().cloned().unwrap_or_default()
        }
    }
}

/// Admit `row` for `suite` at `now`, from the ledger only.
///
/// Errors: `verification-toolchain-stale` ([`DispatchError::ToolchainStale`])
/// when every reason is a row older than the freshness window or measured
/// against another catalog entry (the facts row, a `present` row at the
/// path the suite runs) — the remedy is the one line
/// `saphan machine remeasure --machine <id>`. Otherwise
/// `verification-toolchain-absent` naming the machine, the catalog
/// row, every reason (facts never measured or stale; program never probed,
/// probed absent or failed, probed at another path, or only stale) and the
/// remedy lines in the order they are run ([`remedy::admission`]): the
/// measure line when the facts row is absent or stale; the install command
/// only after a probe said absent or failed; then the exact probe line with
/// the machine row's own workhome.
pub fn admit(
    home: &Home,
    catalog: &Catalog,
    ledger: &Ledger,
    window: std::time::Duration,
    row: &MachineRow,
    suite: &ResolvedSuite,
    now: time::OffsetDateTime,
) -> Result<Admitted> {
    let token = program_token(suite);
    let catalog_path = catalog.flag_path(home);
    let facts = ledger.latest_facts(&row.id);
    let fresh_facts = facts
        .as_ref()
        .filter(|f| ledger::facts_fresh(f, now, window));
    let mut whys: Vec<String> = Vec::new();
    // Every reason so far is a row older than the window (or measured
    // against another catalog entry): `machine remeasure` is the remedy.
    let mut only_stale = true;
    match &facts {
        None => {
            only_stale = false;
            whys.push("the machine was never measured".into())
        }
        Some(f) if fresh_facts.is_none() => whys.push(format!(
            "its facts row ({}) is older than the freshness window of {}",
            f.measured_at,
            humantime::format_duration(window)
        )),
        Some(_) => {}
    }
    if let Some(f) = fresh_facts {
        requirements(home, catalog_path, row, f)?;
    }
    let ids = facts.as_ref().map(|f| f.platform_ids());
    let mut needs = remedy::Needs {
        measure: fresh_facts.is_none(),
        probe: None,
        fix: None,
        platform_ids: ids.clone(),
    };
    let mapped = catalog.for_program(&token);
    let catalog_row = match mapped {
        None => {
            if let Some(f) = fresh_facts {
                // No catalog row: the program is resolved on the machine
                // itself before anything is shipped (see `resolve_unmapped`).
                return Ok(Admitted {
                    row: row.clone(),
                    argv: suite.argv.clone(),
                    capability: None,
                    program_path: None,
                    program_version: None,
                    os: f.os.clone(),
                    arch: f.arch.clone(),
                    seal: seal_of(home, catalog_path, row, f),
                    vouched: None,
                });
            }
            "no catalog row maps this program".to_string()
        }
        Some((cap_name, entry)) => {
            let latest = ledger.latest_capability(&row.id, cap_name);
            // A declared absolute program runs only where a row probed
            // exactly that path: another path's row proves nothing about it.
            let named = Path::new(&token).is_absolute().then(|| token.clone());
            let declared = named
                .clone()
                .or_else(|| latest.as_ref().map(|c| c.inputs.declared_path.clone()))
                .unwrap_or_else(|| {
                    format!("/usr/bin/{}", token.rsplit('/').next().unwrap_or(&token))
                });
            let mut inputs = latest
                .as_ref()
                .map(|c| c.inputs.clone())
                .unwrap_or_else(|| remedy::default_inputs(row, &declared));
            inputs.declared_path = declared;
            let mut probe = true;
            match &latest {
                None => {
                    only_stale = false;
                    whys.push("it was never probed there".into())
                }
                Some(c) if c.outcome != Outcome::Present => {
                    only_stale = false;
                    whys.push(format!(
                        "its latest row ({}) says {}{}",
                        c.measured_at,
                        c.outcome.as_str(),
                        c.reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ));
                    // A probe said it is not there: install, then re-probe.
                    needs.fix = Some(
                        ids.as_deref()
                            .and_then(|ids| entry.install_for(ids))
                            .map(str::to_string),
                    );
                }
                Some(c)
                    if named
                        .as_deref()
                        .is_some_and(|n| n != c.inputs.declared_path) =>
                {
                    only_stale = false;
                    whys.push(format!(
                        "its present row ({}) probed {}, but the suite's argv names {}, which was never probed there",
                        c.measured_at,
                        c.inputs.declared_path,
                        named.as_deref().unwrap_or_default()
                    ))
                }
                Some(c) if ledger::is_fresh(c, now, window, entry) => {
                    if let Some(f) = fresh_facts {
                        let mut argv = suite.argv.clone();
                        argv[0] = c.inputs.declared_path.clone();
                        return Ok(Admitted {
                            row: row.clone(),
                            argv,
                            capability: Some(cap_name.to_string()),
                            program_path: Some(c.inputs.declared_path.clone()),
                            program_version: c
                                .version_output
                                .as_deref()
                                .and_then(|v| v.lines().find(|l| !l.trim().is_empty()))
                                .map(|l| l.trim().to_string()),
                            os: f.os.clone(),
                            arch: f.arch.clone(),
                            seal: seal_of(home, catalog_path, row, f),
                            vouched: Some(Vouched {
                                row: c.clone(),
                                probe: remedy::probe_line(
                                    home,
                                    catalog_path,
                                    &row.id,
                                    cap_name,
                                    &remedy::with_row_workhome(row, &c.inputs),
                                ),
                            }),
                        });
                    }
                    // Only the facts row is stale: measuring is the remedy.
                    probe = false;
                }
                Some(c) if c.catalog_digest != entry.digest(cap_name) => whys.push(format!(
                    "its present row ({}) was measured against another catalog entry for {cap_name}",
                    c.measured_at
                )),
                Some(c) => whys.push(format!(
                    "its present row ({}) is older than the freshness window of {}",
                    c.measured_at,
                    humantime::format_duration(window)
                )),
            }
            if probe {
                needs.probe = Some((cap_name.to_string(), inputs));
            }
            format!("catalog row: {cap_name}")
        }
    };
    if only_stale {
        let saphan = remedy::saphan_prefix(home, catalog_path);
        return Err(DispatchError::ToolchainStale {
            machine: row.id.clone(),
            program: token,
            catalog_row,
            why: whys.join("; "),
            remedy: vec![remedy::remeasure_line(&saphan, &[&row.id])],
            saphan,
        }
        .into());
    }
    Err(DispatchError::ToolchainAbsent {
        machine: row.id.clone(),
        program: token,
        catalog_row,
        why: whys.join("; "),
        remedy: remedy::admission(home, catalog_path, row, &needs),
    }
    .into())
}

/// The refusal name of a machine that lacks a tool dispatch needs there.
pub const REQUIREMENTS_ABSENT: &str = "machine-requirements-absent";

/// The oldest git dispatch works with (major, minor): heal.sh's
/// `git rev-parse --path-format=absolute` came in git 2.31.
pub const MIN_GIT: (u64, u64) = (2, 31);

/// The install command of each tool dispatch needs, per platform id (as
/// [`MachineFacts::platform_ids`] names it, most specific first) — the one
/// table. A tool or platform without an entry gets a `NO INSTALL COMMAND`
/// line. `flock` is not here: lock.sh falls back to a `mkdir` lock.
pub const INSTALL: &[(&str, &[(&str, &str)])] = &[
    (
        "setsid",
        &[
            ("debian", "apt-get install -y util-linux"),
            ("ubuntu", "apt-get install -y util-linux"),
            ("fedora", "dnf install -y util-linux"),
            ("alpine", "apk add util-linux"),
        ],
    ),
    (
        "sha256sum",
        &[
            ("debian", "apt-get install -y coreutils"),
            ("ubuntu", "apt-get install -y coreutils"),
            ("fedora", "dnf install -y coreutils"),
            ("alpine", "apk add coreutils"),
        ],
    ),
    (
        "git",
        &[
            ("debian", "apt-get install -y git"),
            ("ubuntu", "apt-get install -y git"),
            ("fedora", "dnf install -y git"),
            ("alpine", "apk add git"),
            ("darwin", "xcode-select --install"),
        ],
    ),
    (
        "ps",
        &[
            ("debian", "apt-get install -y procps"),
            ("ubuntu", "apt-get install -y procps"),
            ("fedora", "dnf install -y procps-ng"),
            ("alpine", "apk add procps"),
        ],
    ),
];

/// The install command of `tool` for the first of `platform_ids` that
/// [`INSTALL`] has one for.
pub fn install_for(tool: &str, platform_ids: &[String]) -> Option<&'static str> {
    let (_, by) = INSTALL.iter().find(|(t, _)| *t == tool)?;
    platform_ids
        .iter()
        .find_map(|id| by.iter().find(|(p, _)| p == id).map(|(_, c)| *c))
}

/// A machine lacks a tool dispatch needs there (or its facts row predates
/// the requirement facts): refused before anything is shipped.
#[derive(Debug, thiserror::Error)]
#[error(
    "machine {machine} lacks what dispatch needs there: {why} — nothing was shipped; remedy:\n  {}",
    remedy.join("\n  ")
)]
pub struct RequirementsAbsent {
    /// The machine id.
    pub machine: String,
    /// Every missing tool (`setsid`, `sha256sum`, `git`, `ps`); empty when
    /// the facts row predates the requirement facts.
    pub missing: Vec<String>,
    /// Why, per tool, joined by `; `.
    pub why: String,
    /// The remedy lines in the order they are run: each missing tool's
    /// install command (or `NO INSTALL COMMAND …`), then the measure line.
    pub remedy: Vec<String>,
}

impl Refusal for RequirementsAbsent {
    fn name(&self) -> &'static str {
        REQUIREMENTS_ABSENT
    }
    fn details(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ "missing": self.missing }))
    }
}

fn state_words(s: ToolState) -> &'static str {
    match s {
        ToolState::Ok => "runs",
        ToolState::NotRunnable => "is on PATH but does not run",
        ToolState::Absent => "is not on PATH",
    }
}

/// The tools `r` says are missing, each with why: `setsid` (no POSIX
/// alternative gives the watchdog its own process group without a
/// terminal), a SHA-256 tool (`sha256sum` or `shasum -a 256`), `git` (at
/// least [`MIN_GIT`]), `/proc` or `ps`. `flock` is never missing: lock.sh
/// holds a `mkdir` lock without it.
pub fn missing(r: &Requirements) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if r.setsid != ToolState::Ok {
        out.push((
            "setsid",
            format!(
                "`setsid` {} (`setsid true` failed; the watchdog's process group needs it)",
                state_words(r.setsid)
            ),
        ));
    }
    if r.sha256sum != ToolState::Ok && r.shasum != ToolState::Ok {
        out.push((
            "sha256sum",
            format!(
                "no SHA-256 tool runs (`sha256sum` {}; `shasum -a 256` {})",
                state_words(r.sha256sum),
                state_words(r.shasum)
            ),
        ));
    }
    if r.git != ToolState::Ok {
        out.push(("git", format!("`git` {}", state_words(r.git))));
    } else if let Some(v) = r.git_version.as_deref() {
        let mut n = v.split('.').map(|x| {
            x.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .unwrap_or(0)
        });
        let (major, minor) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
        if (major, minor) < MIN_GIT {
            out.push((
                "git",
                format!(
                    "`git` is {v}, older than {}.{} (dispatch uses `git rev-parse --path-format=absolute`)",
                    MIN_GIT.0, MIN_GIT.1
                ),
            ));
        }
    }
    if r.proc != ToolState::Ok && r.ps != ToolState::Ok {
        out.push((
            "ps",
            format!(
                "neither /proc nor `ps` is there (/proc {}; `ps` {})",
                if r.proc == ToolState::Ok {
                    "readable"
                } else {
                    "not readable"
                },
                state_words(r.ps)
            ),
        ));
    }
    out
}

/// Refuse `row` when its fresh facts row `f` says a tool dispatch needs
/// does not run there, or predates the requirement facts.
///
/// Errors: [`RequirementsAbsent`] (`machine-requirements-absent`) naming
/// every missing tool, with each one's install command for the measured
/// platform (`ssh -F …` for an SSH machine; `NO INSTALL COMMAND …` where
/// [`INSTALL`] has none), then the measure line.
pub fn requirements(
    home: &Home,
    catalog: Option<&Path>,
    row: &MachineRow,
    f: &MachineFacts,
) -> Result<()> {
    let measure = remedy::measure_line(home, catalog, &row.id);
    let Some(r) = &f.requirements else {
        return Err(RequirementsAbsent {
            machine: row.id.clone(),
            missing: Vec::new(),
            why: format!(
                "its facts row ({}) was measured by an older saphan and says nothing of the tools dispatch needs (setsid, a SHA-256 tool, git, /proc or ps) — measure it again",
                f.measured_at
            ),
            remedy: vec![measure],
        }
        .into());
    };
    let lacking = missing(r);
    if lacking.is_empty() {
        return Ok(());
    }
    let ids = f.platform_ids();
    let mut lines: Vec<String> = Vec::new();
    for (tool, _) in &lacking {
        let line = match install_for(tool, &ids) {
            Some(cmd) => remedy::install_line(home, row, cmd),
            None => format!(
                "{}: saphan knows no install command for `{tool}` on the measured platform ({}) — install it by hand",
                remedy::NO_INSTALL_COMMAND,
                if ids.is_empty() {
                    "unknown".to_string()
                } else {
                    ids.join(", ")
                }
            ),
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines.push(measure);
    Err(RequirementsAbsent {
        machine: row.id.clone(),
        missing: lacking.iter().map(|(t, _)| t.to_string()).collect(),
        why: format!(
            "{} (facts row {})",
            lacking
                .iter()
                .map(|(_, w)| w.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            f.measured_at
        ),
        remedy: lines,
    }
    .into())
}

/// One machine's refusal, as a combined refusal lists it (and `--json`
/// carries it under `refusals`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Refused {
    /// The machine id as given.
    pub machine: String,
    /// The machine's own refusal name (`verification-toolchain-absent`,
    /// `container-docker-capability-absent`, `machine-unknown` …).
    #[serde(rename = "error")]
    pub name: &'static str,
    /// The machine's own refusal text, exactly as a list of that one
    /// machine would print it.
    pub message: String,
    /// Its remedy commands, in the order they are run (empty when the
    /// refusal carries none).
    pub remedy: Vec<String>,
    /// A `verification-toolchain-stale` refusal: why, and `saphan` as its
    /// remedy spells it — a refusal of several machines lists the machine
    /// with its why alone and gathers every stale machine into one
    /// `machine remeasure` line ([`NotAdmitted`]).
    #[serde(skip)]
    pub stale: Option<Stale>,
}

/// Why a machine's rows are only stale, for a combined refusal
/// ([`Refused::stale`]).
#[derive(Debug, Clone)]
pub struct Stale {
    /// Which rows are stale, and since when.
    pub why: String,
    /// `saphan`, `SAPHAN_HOME=… saphan`, `… --catalog …`.
    pub saphan: String,
}

impl Refused {
    /// The refusal `e` of machine `machine`.
    pub fn of(machine: &str, e: &Error) -> Refused {
        Refused {
            machine: machine.to_string(),
            name: e.name(),
            message: e.inner().to_string(),
            remedy: remedy_of(e),
            stale: match e.downcast_ref::<DispatchError>() {
                Some(DispatchError::ToolchainStale { why, saphan, .. }) => Some(Stale {
                    why: why.clone(),
                    saphan: saphan.clone(),
                }),
                _ => None,
            },
        }
    }

    /// The first remedy line, else the first line of the message.
    pub fn first_remedy(&self) -> &str {
        self.remedy
            .first()
            .map(String::as_str)
            .unwrap_or_else(|| self.message.lines().next().unwrap_or(""))
    }
}

/// The remedy commands a refusal carries, as separate lines.
fn remedy_of(e: &Error) -> Vec<String> {
    if let Some(
        DispatchError::ToolchainAbsent { remedy, .. }
        | DispatchError::ToolchainStale { remedy, .. },
    ) = e.downcast_ref::<DispatchError>()
    {
        return remedy.clone();
    }
    if let Some(RequirementsAbsent { remedy, .. }) = e.downcast_ref::<RequirementsAbsent>() {
        return remedy.clone();
    }
    if let Some(crate::docker::DockerError::ContainerCapabilityAbsent { commands, .. }) =
        e.downcast_ref::<crate::docker::DockerError>()
    {
        return commands
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
    }
    if let Some(crate::docker::container::ContainerError::ImageAbsent { load, .. }) =
        e.downcast_ref::<crate::docker::container::ContainerError>()
    {
        return vec![load.clone()];
    }
    Vec::new()
}

/// The machines of an invocation that are not admitted: one refusal that
/// names every one of them, each with its own reason and remedy lines.
///
/// Its name is the machines' shared refusal name
/// (`verification-toolchain-absent`, `container-docker-capability-absent`
/// …), or [`MIXED`] (`machines-not-admitted`) when they differ. A list of
/// one machine prints exactly that machine's refusal.
#[derive(Debug)]
pub struct NotAdmitted {
    /// Every refused machine, in the order of the list.
    pub refused: Vec<Refused>,
    /// The machines that were admitted (nothing ran on them either).
    pub admitted: Vec<String>,
    /// The list was `@admitted`: no machine of machines.toml is admitted.
    pub selection: bool,
    /// The list was a Slurm pool's nodes (`@NAME`): no usable node of its
    /// partition is admitted.
    pub pool: Option<String>,
}

impl std::fmt::Display for NotAdmitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.refused.len() == 1 && self.admitted.is_empty() && !self.selection {
            return write!(f, "{}", self.refused[0].message);
        }
        let ids: Vec<&str> = self.refused.iter().map(|r| r.machine.as_str()).collect();
        let total = self.refused.len() + self.admitted.len();
        if let Some(pool) = &self.pool {
            write!(
                f,
                "--machine @{pool}: no usable node of the pool's partition is admitted for this suite ({} refused: {}) — nothing was borrowed; each node's refusal and remedy follow",
                self.refused.len(),
                ids.join(", ")
            )?;
        } else if self.selection {
            write!(
                f,
                "--machine {ADMITTED}: no machine of machines.toml is admitted for this suite ({} refused: {}) — nothing was shipped; each machine's refusal and remedy follow",
                self.refused.len(),
                ids.join(", ")
            )?;
        } else {
            write!(
                f,
                "{} of {total} machines are not admitted ({}) — nothing was shipped{}; each machine's refusal and remedy follow",
                self.refused.len(),
                ids.join(", "),
                if self.admitted.is_empty() {
                    String::new()
                } else {
                    format!(", not even to {}", self.admitted.join(", "))
                }
            )?;
        }
        for r in &self.refused {
            write!(f, "\n  {}: {}: ", r.machine, r.name)?;
            if let Some(st) = &r.stale {
                // Its remedy is gathered with the other stale machines'.
                write!(f, "{} — re-measure it (below)", st.why)?;
                continue;
            }
            for (i, l) in r.message.lines().enumerate() {
                if i > 0 {
                    write!(f, "\n  ")?;
                }
                write!(f, "{l}")?;
            }
        }
        if let Some(line) = self.remeasure() {
            write!(
                f,
                "\n  re-measure the stale machines at once (or certify with --remeasure):\n    {line}"
            )?;
        }
        Ok(())
    }
}

impl NotAdmitted {
    /// One `saphan machine remeasure --machine <id>,<id>…` line naming
    /// every refused machine whose rows are only stale
    /// (`verification-toolchain-stale`); `None` when none is.
    pub fn remeasure(&self) -> Option<String> {
        let stale: Vec<&Refused> = self.refused.iter().filter(|r| r.stale.is_some()).collect();
        let saphan = &stale.first()?.stale.as_ref()?.saphan;
        let ids: Vec<&str> = stale.iter().map(|r| r.machine.as_str()).collect();
        Some(remedy::remeasure_line(saphan, &ids))
    }
}

impl std::error::Error for NotAdmitted {}

impl Refusal for NotAdmitted {
    fn name(&self) -> &'static str {
        match self.refused.first() {
            Some(first) if self.refused.iter().all(|r| r.name == first.name) => first.name,
            _ => MIXED,
        }
    }
    fn exit(&self) -> Exit {
        Exit::Refusal
    }
    fn details(&self) -> Option<serde_json::Value> {
        let mut v = serde_json::json!({
            "refusals": self.refused,
            "admitted": self.admitted,
        });
        if let Some(line) = self.remeasure() {
            v["remeasure"] = line.into();
        }
        Some(v)
    }
}

/// Each machine's admission: admitted (`Ok`), or its refusal.
pub type Each<T> = Vec<(String, std::result::Result<T, Refused>)>;

/// The fleet machine ids `ids` stands for: the ids themselves, or for
/// `[@admitted]` every machine row of machines.toml but `local` (this
/// machine, which runs without `--machine`), in id order.
///
/// Errors: `machine-list-invalid` when `@admitted` finds no machine row.
pub fn expand(home: &Home, machines: &Machines, ids: &[String]) -> Result<(Vec<String>, bool)> {
    if ids.len() == 1 && ids[0] == ADMITTED {
        let all: Vec<String> = machines
            .rows
            .keys()
            .filter(|k| *k != "local")
            .cloned()
            .collect();
        if all.is_empty() {
            return Err(DispatchError::MachineList {
                given: ADMITTED.into(),
                why: "finds no fleet machine in machines.toml",
                fix: format!(
                    "add machine rows to {} (docs/fleet.md)",
                    home.machines().display()
                ),
            }
            .into());
        }
        return Ok((all, true));
    }
    let mut out: Vec<String> = Vec::new();
    for id in ids.iter().flat_map(|s| s.split(',')).map(str::trim) {
        if !id.is_empty() && !out.iter().any(|o| o == id) {
            out.push(id.to_string());
        }
    }
    Ok((out, false))
}

/// Admit each machine of `ids` (or of `@admitted`) for `suite`, from the
/// ledger only; the bool says the list was `@admitted`.
///
/// Errors: only what concerns no single machine (machines.toml or the
/// ledger unreadable, `machine-list-invalid`); a machine's own refusal
/// (`machine-unknown`, `verification-toolchain-absent`) is its entry.
pub fn admit_each(
    home: &Home,
    catalog: &Catalog,
    ids: &[String],
    suite: &ResolvedSuite,
) -> Result<(Each<Admitted>, bool)> {
    let machines = Machines::load(home)?;
    let (ids, selection) = expand(home, &machines, ids)?;
    let ledger = Ledger::open(home)?;
    let window = crate::fleet::freshness_window(home)?;
    let now = time::OffsetDateTime::now_utc();
    let each = ids
        .into_iter()
        .map(|id| {
            let r = machines
                .get(home, &id)
                .map_err(Error::from)
                .and_then(|row| admit(home, catalog, &ledger, window, row, suite, now))
                .map_err(|e| Refused::of(&id, &e));
            (id, r)
        })
        .collect();
    Ok((each, selection))
}

/// Split `each` into what runs: for a named list, every machine or a
/// [`NotAdmitted`] naming every refused one; for `@admitted`
/// (`selection`), the admitted ones and the refused ones left out — or a
/// [`NotAdmitted`] when none is admitted.
pub fn settle<T>(each: Each<T>, selection: bool) -> Result<(Vec<T>, Vec<Refused>)> {
    let mut ok = Vec::new();
    let mut ok_ids = Vec::new();
    let mut refused = Vec::new();
    for (id, r) in each {
        match r {
            Ok(a) => {
                ok.push(a);
                ok_ids.push(id);
            }
            Err(r) => refused.push(r),
        }
    }
    if refused.is_empty() || (selection && !ok.is_empty()) {
        return Ok((ok, refused));
    }
    Err(NotAdmitted {
        refused,
        admitted: if selection { Vec::new() } else { ok_ids },
        selection,
        pool: None,
    }
    .into())
}

/// Admit every machine in `ids` for `suite`, from the ledger only: all of
/// them, or one refusal naming every machine that is not admitted
/// ([`NotAdmitted`]). For `[@admitted]`, the admitted machines of
/// machines.toml (refused only when none is).
pub fn admit_all(
    home: &Home,
    catalog: &Catalog,
    ids: &[String],
    suite: &ResolvedSuite,
) -> Result<Vec<Admitted>> {
    let (each, selection) = admit_each(home, catalog, ids, suite)?;
    Ok(settle(each, selection)?.0)
}

/// What `--machine @admitted` chose: the admitted machines, and the ones
/// left out with their refusals.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Selection {
    /// The admitted machine ids, in id order: what runs.
    pub chosen: Vec<String>,
    /// The machines left out, each with its refusal name, message and
    /// remedy lines.
    pub left_out: Vec<Refused>,
}

impl Selection {
    /// The machines left out, as [`crate::measure::progress::Event::Chosen`]
    /// reports them.
    pub fn left_out_machines(&self) -> Vec<crate::measure::progress::LeftOutMachine> {
        self.left_out
            .iter()
            .map(|r| crate::measure::progress::LeftOutMachine {
                machine: r.machine.clone(),
                name: r.name,
                remedy: r.first_remedy().to_string(),
            })
            .collect()
    }
}

/// Resolve `--machine @admitted` for a certify of `rev` of the repository
/// at `repo` in `class` (`image`: the container class's pin): the suite at
/// the revision is resolved as certify resolves it, then every machine of
/// machines.toml is admitted or refused as a named list would be (host
/// class: fresh facts and a fresh `present` row for the suite's program at
/// its declared path; container class: the docker-oci gate and the pinned
/// image on the machine's engine). Nothing is shipped.
///
/// Errors: the local refusals of certify (repository, revision, suite,
/// image pin), `machine-list-invalid` (no machine rows), and a
/// [`NotAdmitted`] listing every machine's refusal when none is admitted.
pub async fn select(
    home: &Home,
    catalog: &Catalog,
    repo: &Path,
    rev: &str,
    class: crate::measure::pipeline::Class,
    image: Option<&str>,
) -> Result<Selection> {
    let (setup, sha) = crate::measure::Setup::open_at(home, repo, rev).await?;
    let mut suite = setup.full_suite(&sha, "certify").await?;
    let ids = [ADMITTED.to_string()];
    let (chosen, left_out) = if class == crate::measure::pipeline::Class::Container {
        let pin = match image {
            None => return Err(crate::docker::container::ContainerError::ImageMissing.into()),
            Some(i) => crate::docker::container::parse_image(i)?,
        };
        if suite.source == SuiteSource::DefaultGo {
            suite.argv[0] = "go".into();
        }
        let (each, selection) = admit_each_container(home, catalog, &ids, &suite, &pin).await?;
        let (ok, left) = settle(each, selection)?;
        (ok.into_iter().map(|(a, _)| a.row.id).collect(), left)
    } else {
        let (each, selection) = admit_each(home, catalog, &ids, &suite)?;
        let (ok, left) = settle(each, selection)?;
        (ok.into_iter().map(|a| a.row.id).collect(), left)
    };
    Ok(Selection { chosen, left_out })
}

/// The fleet machine ids of `--machine` values (each may hold several
/// comma-separated ids): trimmed, in order, each once. Empty when the run
/// is on this machine (no `--machine`, or only `local`). `@admitted` alone
/// is kept as the one value `[@admitted]` ([`ADMITTED`]).
///
/// Errors: `machine-list-invalid` when the values name no machine at all
/// (`--machine ""`, `--machine ,`), which would otherwise measure nothing,
/// mix `local` with fleet machines (one invocation runs either here or
/// on the fleet), mix `@admitted` with named machines, or name another
/// `@` selector.
pub fn machine_ids(given: &[String]) -> Result<Vec<String>> {
    let joined = given.join(",");
    let mut ids: Vec<String> = Vec::new();
    for id in given.iter().flat_map(|g| g.split(',')).map(str::trim) {
        if !id.is_empty() && !ids.iter().any(|i| i == id) {
            ids.push(id.to_string());
        }
    }
    if !given.is_empty() && ids.is_empty() {
        return Err(DispatchError::MachineList {
            given: joined,
            why: "names no machine, so nothing would be measured",
            fix: "name one (`--machine m0`), or leave --machine out to run on this machine".into(),
        }
        .into());
    }
    if let Some(sel) = ids.iter().find(|i| i.starts_with('@')) {
        // `@admitted`, or `@POOL`: a `[pool.POOL]` row (checked when the
        // pool is read).
        if !crate::fleet::machines::valid_id(&sel[1..]) {
            return Err(DispatchError::MachineList {
                given: joined,
                why: "names a selector saphan cannot read",
                fix: format!(
                    "the selectors are `--machine {ADMITTED}` and `--machine @POOL` for a `[pool.POOL]` row of machines.toml; or name machines"
                ),
            }
            .into());
        }
        if ids.len() > 1 {
            let named: Vec<&str> = ids
                .iter()
                .filter(|i| *i != sel)
                .map(String::as_str)
                .collect();
            let what = if sel == ADMITTED {
                "every admitted machine"
            } else {
                "the pool's borrowed nodes"
            };
            return Err(DispatchError::MachineList {
                given: joined,
                why: if sel == ADMITTED {
                    "mixes `@admitted` with named machines"
                } else {
                    "mixes a pool with other machines"
                },
                fix: format!(
                    "give either `--machine {sel}` ({what}) or the list `--machine {}` (each must be admitted)",
                    named.join(",")
                ),
            }
            .into());
        }
        return Ok(ids);
    }
    let remote: Vec<String> = ids.iter().filter(|i| *i != "local").cloned().collect();
    if remote.len() < ids.len() && !remote.is_empty() {
        return Err(DispatchError::MachineList {
            given: joined,
            why: "mixes `local` (this machine) with fleet machines",
            fix: format!(
                "run this machine and the fleet as two invocations: without --machine, and with --machine {}",
                remote.join(",")
            ),
        }
        .into());
    }
    Ok(remote)
}

/// Refuse `[@admitted]` for a verb that runs on one named machine
/// (`verify-affected`): `machine-list-invalid`.
pub fn refuse_selection(ids: &[String], verb: &'static str) -> Result<()> {
    if let Some(sel) = ids.iter().find(|i| i.starts_with('@')) {
        return Err(DispatchError::MachineList {
            given: sel.clone(),
            why: "selects machines, but this verb runs on one named machine",
            fix: format!(
                "name the machine (`{verb} --machine m0`); `saphan machine show ID` says whether it is admitted"
            ),
        }
        .into());
    }
    Ok(())
}

// The container class: the same admission per machine, then its engine
// is asked for the pinned image.

/// Fleet machines admitted for a container-class run.
#[derive(Debug, Clone)]
pub struct ContainerAdmitted {
    /// Dispatch's admissions: the suite's argv (its program comes from the
    /// image, so no toolchain row is asked for), capability `docker-oci`.
    pub admitted: Vec<Admitted>,
    /// The engine socket (the catalog's docker-oci `socket`).
    pub socket: String,
    /// The suite image, as the first machine's engine resolved it (every
    /// machine's engine must carry the same image ID).
    pub image: crate::docker::container::SuiteImage,
}

/// Admit each machine of `ids` (or of `[@admitted]`) for a container-class
/// run of `suite`: its row, the docker-oci gate ([`crate::fleet::docker_probes::gate::check`]),
/// then its engine is asked — over its own transport — for the pinned image.
/// Nothing is run. The bool says the list was `@admitted`. Every machine's
/// engine must resolve the pin to the image ID the first admitted machine's
/// did; one that resolves it to another is refused as
/// `container-engine-unreachable`.
///
/// Errors: only what concerns no single machine (machines.toml or the
/// ledger unreadable, no docker-oci catalog row, `machine-list-invalid`); a
/// machine's own refusal (`machine-unknown`,
/// `container-docker-capability-absent`, `container-image-absent` — the
/// route is `docker save … | ssh -F … ID docker load` —,
/// `container-engine-unreachable`, also when the machine cannot be reached)
/// is its entry.
pub async fn admit_each_container(
    home: &Home,
    catalog: &Catalog,
    ids: &[String],
    suite: &ResolvedSuite,
    pin: &crate::docker::Pin,
) -> Result<(Each<(Admitted, crate::docker::container::SuiteImage)>, bool)> {
    let machines = crate::fleet::machines::Machines::load(home)?;
    let (ids, selection) = expand(home, &machines, ids)?;
    let ledger = crate::fleet::ledger::Ledger::open(home)?;
    let window = crate::fleet::freshness_window(home)?;
    let socket = crate::docker::socket_of(catalog.get(crate::docker::DOCKER_OCI)?);
    let now = time::OffsetDateTime::now_utc();
    let mut each = Vec::new();
    let mut first: Option<String> = None;
    for id in ids {
        let row = match machines.get(home, &id) {
            Ok(r) => r.clone(),
            Err(e) => {
                let r = Refused::of(&id, &e.into());
                each.push((id, Err(r)));
                continue;
            }
        };
        if let Err(e) =
            crate::fleet::docker_probes::gate::check(home, catalog, &ledger, window, &row, now)
        {
            if !matches!(
                e.downcast_ref::<crate::docker::DockerError>(),
                Some(crate::docker::DockerError::ContainerCapabilityAbsent { .. })
            ) {
                return Err(e);
            }
            each.push((id.clone(), Err(Refused::of(&id, &e))));
            continue;
        }
        let r = admit_one_container(home, &ledger, window, &row, &socket, suite, pin).await;
        let r = match r {
            Ok((a, img)) => match &first {
                Some(f) if *f != img.image_id => Err(
                    crate::docker::container::ContainerError::EngineUnreachable {
                        machine: row.id.clone(),
                        socket: socket.clone(),
                        why: format!(
                            "its engine resolves the pin to {}, another machine's to {f}",
                            img.image_id
                        ),
                    }
                    .into(),
                ),
                _ => {
                    first.get_or_insert(img.image_id.clone());
                    Ok((a, img))
                }
            },
            Err(e) => Err(e),
        };
        each.push((id.clone(), r.map_err(|e| Refused::of(&id, &e))));
    }
    Ok((each, selection))
}

/// One gated machine's engine, asked for the pinned image.
async fn admit_one_container(
    home: &Home,
    ledger: &crate::fleet::ledger::Ledger,
    window: std::time::Duration,
    row: &crate::fleet::machines::MachineRow,
    socket: &str,
    suite: &ResolvedSuite,
    pin: &crate::docker::Pin,
) -> Result<(Admitted, crate::docker::container::SuiteImage)> {
    let cap = ledger.latest_capability(&row.id, crate::docker::DOCKER_OCI);
    let facts = ledger.latest_facts(&row.id);
    let declared = cap
        .as_ref()
        .map(|c| c.inputs.declared_path.clone())
        .unwrap_or_else(|| "docker".into());
    // The ship, the lock and the tree run on the machine's host whatever the
    // class: a fresh facts row that says a tool they need does not run
    // there refuses the machine here too (`machine-requirements-absent`).
    if let Some(f) = facts
        .as_ref()
        .filter(|f| crate::fleet::ledger::facts_fresh(f, time::OffsetDateTime::now_utc(), window))
    {
        requirements(home, None, row, f)?;
    }
    let t = crate::fleet::machines::connect(home, row, crate::transport::CONNECT_TIMEOUT)
        .await
        .map_err(
            |e| crate::docker::container::ContainerError::EngineUnreachable {
                machine: row.id.clone(),
                socket: socket.to_string(),
                why: e.to_string(),
            },
        )?;
    let ssh = match row.transport {
        crate::fleet::machines::TransportKind::Local
        | crate::fleet::machines::TransportKind::Slurm => None,
        crate::fleet::machines::TransportKind::Ssh => Some(format!(
            "ssh -F {} {}",
            crate::fleet::remedy::ssh_config_display(home),
            row.host
        )),
    };
    let load = crate::docker::container::load_route(pin, ssh.as_deref());
    let found = crate::docker::container::resolve_image(&t, &row.id, socket, pin, load).await;
    if let crate::transport::Transport::Ssh(s) = &t {
        s.disconnect().await;
    }
    let found = found?;
    Ok((
        Admitted {
            row: row.clone(),
            argv: suite.argv.clone(),
            capability: Some(crate::docker::DOCKER_OCI.into()),
            program_path: Some(declared),
            program_version: cap.and_then(|c| c.version_output),
            os: facts.as_ref().map(|f| f.os.clone()).unwrap_or_default(),
            arch: facts.as_ref().map(|f| f.arch.clone()).unwrap_or_default(),
            // The container class is sealed by its engine.
            seal: crate::seal::Capability::Unable("container class".into()),
            vouched: None,
        },
        found,
    ))
}

/// Admit `ids` for a container-class run of `suite` ([`admit_each_container`]): all
/// of them, or one refusal naming every machine that is not admitted, each
/// with its own reason and remedy ([`NotAdmitted`]:
/// `container-docker-capability-absent` when that is every machine's
/// refusal, `machines-not-admitted` for a mix). For `[@admitted]`, the
/// admitted machines of machines.toml (refused only when none is).
///
/// Errors: those of [`admit_each_container`], then the combined refusal.
pub async fn admit_all_container(
    home: &Home,
    catalog: &Catalog,
    ids: &[String],
    suite: &ResolvedSuite,
    pin: crate::docker::Pin,
) -> Result<ContainerAdmitted> {
    let socket = crate::docker::socket_of(catalog.get(crate::docker::DOCKER_OCI)?);
    let (each, selection) = admit_each_container(home, catalog, ids, suite, &pin).await?;
    let (ok, _) = settle(each, selection)?;
    let mut image = None;
    let mut admitted = Vec::new();
    for (a, img) in ok {
        image.get_or_insert(img);
        admitted.push(a);
    }
    let image =
        image.ok_or_else(
            || crate::docker::container::ContainerError::EngineUnreachable {
                machine: "-".into(),
                socket: socket.clone(),
                why: "no machine was named".into(),
            },
        )?;
    Ok(ContainerAdmitted {
        admitted,
        socket,
        image,
    })
}

impl ContainerAdmitted {
    /// Remove every container of `attempt` that ran for each admitted
    /// machine, on that machine's engine — only its own
    /// ([`LABEL_ATTEMPT`]`=<attempt>` and [`LABEL_MACHINE`]`=<id>`: machines
    /// sharing an engine never remove each other's containers), bounded per
    /// machine. Gives back what could not be removed, each with the command
    /// that removes it (the caller shows them; this prints nothing).
    pub async fn sweep(&self, home: &Home, attempt: &str) -> Vec<ContainersRemain> {
        let mut remain = Vec::new();
        for m in &self.admitted {
            let labels = [(LABEL_ATTEMPT, attempt), (LABEL_MACHINE, m.row.id.as_str())];
            let r = async {
                let t = crate::fleet::machines::connect(
                    home,
                    &m.row,
                    crate::transport::CONNECT_TIMEOUT,
                )
                .await
                .map_err(|e| e.to_string())?;
                let r = crate::docker::container::remove_labelled(&t, &self.socket, &labels).await;
                if let crate::transport::Transport::Ssh(s) = &t {
                    s.disconnect().await;
                }
                r
            };
            if let Err(why) = r.await {
                remain.push(ContainersRemain {
                    attempt: attempt.to_string(),
                    machine: m.row.id.clone(),
                    why,
                });
            }
        }
        remain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_selector_stands_alone() {
        assert_eq!(
            machine_ids(&ids(&["@admitted"])).unwrap(),
            ids(&["@admitted"])
        );
        assert_eq!(
            machine_ids(&ids(&["m0, m1", "m0"])).unwrap(),
            ids(&["m0", "m1"])
        );
        for bad in [
            &["@admitted,m0"][..],
            &["m0", "@admitted"],
            &["@ci,m0"],
            &["@"],
            &["@../x"],
            &["local,@admitted"],
        ] {
            let e = machine_ids(&ids(bad)).unwrap_err();
            assert_eq!(e.name(), "machine-list-invalid", "{bad:?}");
        }
        assert_eq!(machine_ids(&ids(&["@ci"])).unwrap(), ids(&["@ci"]));
        assert!(refuse_selection(&ids(&["@admitted"]), "verify-affected").is_err());
        assert!(refuse_selection(&ids(&["@ci"]), "verify-affected").is_err());
        assert!(refuse_selection(&ids(&["m0"]), "verify-affected").is_ok());
    }

    fn refused(machine: &str, name: &'static str) -> Refused {
        Refused {
            machine: machine.into(),
            name,
            message: format!("{machine} is not admitted — remedy:\n  fix {machine}"),
            remedy: vec![format!("fix {machine}")],
            stale: None,
        }
    }

    fn stale(machine: &str) -> Refused {
        let e: Error = DispatchError::ToolchainStale {
            machine: machine.into(),
            program: "go".into(),
            catalog_row: "catalog row: go".into(),
            why: format!("{machine}'s facts row (T) is older than the freshness window of 1day"),
            remedy: vec![format!("saphan machine remeasure --machine {machine}")],
            saphan: "saphan".into(),
        }
        .into();
        Refused::of(machine, &e)
    }

    #[test]
    fn stale_machines_share_one_remeasure_line() {
        let refuse = |r: Vec<Refused>| {
            let each: Each<u8> = r.into_iter().map(|r| (r.machine.clone(), Err(r))).collect();
            settle(each, false).unwrap_err()
        };
        let one = refuse(vec![stale("m0")]);
        assert_eq!(one.name(), "verification-toolchain-stale");
        assert!(
            one.inner()
                .to_string()
                .ends_with("remedy:\n  saphan machine remeasure --machine m0"),
            "{one}"
        );
        let mixed = refuse(vec![
            stale("m0"),
            refused("m2", "verification-toolchain-absent"),
            stale("m3"),
        ]);
        assert_eq!(mixed.name(), MIXED);
        let text = mixed.inner().to_string();
        assert!(
            text.contains("\n  m0: verification-toolchain-stale: m0's facts row (T) is older than the freshness window of 1day — re-measure it (below)\n  m2: "),
            "{text}"
        );
        assert!(
            text.ends_with("\n  re-measure the stale machines at once (or certify with --remeasure):\n    saphan machine remeasure --machine m0,m3"),
            "{text}"
        );
        assert_eq!(text.matches("machine remeasure").count(), 1, "{text}");
        let v = mixed.to_json();
        assert_eq!(v["remeasure"], "saphan machine remeasure --machine m0,m3");
        assert_eq!(
            v["refusals"][0]["remedy"][0],
            "saphan machine remeasure --machine m0"
        );
    }

    #[test]
    fn one_refusal_names_every_machine_and_keeps_a_shared_name() {
        let one = NotAdmitted {
            refused: vec![refused("m0", "verification-toolchain-absent")],
            admitted: vec![],
            selection: false,
            pool: None,
        };
        assert_eq!(one.name(), "verification-toolchain-absent");
        assert_eq!(one.to_string(), "m0 is not admitted — remedy:\n  fix m0");
        let two = NotAdmitted {
            refused: vec![
                refused("m0", "verification-toolchain-absent"),
                refused("m2", "verification-toolchain-absent"),
            ],
            admitted: vec!["m1".into()],
            selection: false,
            pool: None,
        };
        assert_eq!(two.name(), "verification-toolchain-absent");
        let text = two.to_string();
        assert!(
            text.starts_with(
                "2 of 3 machines are not admitted (m0, m2) — nothing was shipped, not even to m1;"
            ),
            "{text}"
        );
        assert!(
            text.contains("\n  m0: verification-toolchain-absent: m0 is not admitted — remedy:\n    fix m0\n  m2: "),
            "{text}"
        );
        let mixed = NotAdmitted {
            refused: vec![
                refused("m0", "verification-toolchain-absent"),
                refused("m9", "machine-unknown"),
            ],
            admitted: vec![],
            selection: false,
            pool: None,
        };
        assert_eq!(mixed.name(), MIXED);
        let v = Error::from(mixed).to_json();
        assert_eq!(v["error"], MIXED);
        assert_eq!(v["refusals"][1]["error"], "machine-unknown");
        assert_eq!(v["refusals"][0]["remedy"][0], "fix m0");
    }

    #[test]
    fn settle_keeps_the_admitted_of_a_selection() {
        let each: Each<u8> = vec![
            ("m0".into(), Ok(0)),
            (
                "m1".into(),
                Err(refused("m1", "verification-toolchain-absent")),
            ),
        ];
        let (ok, left) = settle(each, true).unwrap();
        assert_eq!(ok, vec![0]);
        assert_eq!(left[0].machine, "m1");
        let each: Each<u8> = vec![
            ("m0".into(), Ok(0)),
            (
                "m1".into(),
                Err(refused("m1", "verification-toolchain-absent")),
            ),
        ];
        assert!(settle(each, false).is_err());
        let each: Each<u8> = vec![("m1".into(), Err(refused("m1", "x-y")))];
        let e = settle(each, true).unwrap_err();
        assert!(
            e.line().contains("no machine of machines.toml is admitted"),
            "{e}"
        );
    }
}
