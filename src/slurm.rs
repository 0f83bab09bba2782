//! Borrowing nodes from a Slurm cluster (issue 39): a pool's spec
//! ([`Pool`], a `[pool.NAME]` row of machines.toml), the partition's nodes
//! ([`partition_nodes`]), an allocation ([`allocate`] → [`Allocation`],
//! each node a [`Transport::Slurm`]), giving it back ([`Allocation::release`],
//! and on every other path the allocation's guard), the helpers failover
//! asks ([`Allocation::job_gone`], [`Allocation::node_gone`],
//! [`node_state`]), and the sweep of allocations whose saphan died
//! ([`sweep`]).
//!
//! Slurm is reached the way its own tools are: its client programs
//! (`salloc`, `squeue`, `sinfo`, `scontrol`, `scancel`) on this machine,
//! with `SLURM_CONF` from the pool (or the environment, or Slurm's default),
//! every call through [`crate::exec::run`] with a budget
//! ([`crate::transport::srun::client`]: inherited Slurm input variables
//! removed). Output formats are those of slurm-wlm 22.05 (`squeue --format`,
//! `sinfo --format`, `scontrol show hostnames`; salloc's `Granted job
//! allocation N` on stderr).
//!
//! An allocation is `salloc --no-shell --immediate=WAIT -N n --exclusive
//! --no-kill -J saphan-<invocation id> -p PARTITION … --comment OWNER`:
//! `--exclusive` puts one borrower per node; `--no-kill` keeps the job
//! running on its other nodes when one fails (measured: without it a node
//! failure ends the whole job, `NODE_FAIL`; with it the failed node leaves
//! the job's node list and the others keep running), so failover can stay
//! inside the allocation. salloc 22.05 has no `--no-requeue`; an
//! allocation made by salloc is not a batch job and Slurm requeues only
//! batch jobs, so saphan's retries are the only ones. `--immediate` bounds
//! the wait for nodes: past it salloc withdraws the request (a request for
//! more nodes than the partition has would otherwise pend forever).
//!
//! The comment names the owner — this host, its boot, saphan's pid and
//! the process's start time ([`Owner`]) — so that [`sweep`] can tell an
//! allocation whose saphan was killed (`kill -9`) from one still in use.

use crate::error::{Exit, Refusal};
use crate::exec::{self, Cmd, Output, StderrWatch, Termination};
use crate::transport::srun::{CLIENT_TIMEOUT, ClientSays, client, client_says};
use crate::transport::{SlurmNode, Transport};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long [`allocate`] waits for the nodes when the pool sets no
/// `allocation_wait`.
pub const ALLOCATION_WAIT: Duration = Duration::from_secs(120);

/// How long [`Allocation::release`] waits, after `scancel`, for the job to
/// end.
pub const RELEASE_BOUND: Duration = Duration::from_secs(30);

/// Errors of borrowing from a Slurm cluster.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// No Slurm client here, or it has no configuration to reach a
    /// cluster with.
    #[error(
        "cannot ask the Slurm cluster: {detail} — install the Slurm client (Debian: apt-get install slurm-client) and point it at the cluster's slurm.conf: `export SLURM_CONF=/path/to/slurm.conf`, or `conf = \"/path/to/slurm.conf\"` in the pool's row"
    )]
    Unavailable {
        /// What failed (the program and its words).
        detail: String,
    },
    /// The pool's row cannot be used.
    #[error("pool `{pool}` in machines.toml: {detail}")]
    PoolInvalid { pool: String, detail: String },
    /// `--machine @NAME` names no `[pool.NAME]` row.
    #[error(
        "--machine @{pool} names no pool of {} (pools: {known}) — add a [pool.{pool}] row (docs/slurm.md), or name a pool that is there",
        path.display()
    )]
    PoolUnknown {
        pool: String,
        path: std::path::PathBuf,
        known: String,
    },
    /// salloc refused the request or failed.
    #[error(
        "Slurm did not lend pool `{pool}` {nodes} node(s) of partition {partition}: {words} — check the partition and the pool's account, constraint and time_limit (`sinfo --partition {partition}`), or borrow fewer with --nodes"
    )]
    AllocationFailed {
        pool: String,
        nodes: u32,
        partition: String,
        /// salloc's own words.
        words: String,
    },
    /// The nodes were not free within the wait; the request was withdrawn.
    #[error(
        "Slurm had no {nodes} free node(s) in partition {partition} for pool `{pool}` within {}s; the request was withdrawn ({words}) — the partition is busy: retry later, borrow fewer with --nodes, or raise the pool's allocation_wait",
        waited.as_secs()
    )]
    AllocationTimeout {
        pool: String,
        nodes: u32,
        partition: String,
        waited: Duration,
        words: String,
    },
    /// A Slurm client call did not answer within its budget.
    #[error(
        "`{command}` did not answer within {}s — slurmctld may be down or unreachable from here: `scontrol ping`",
        budget.as_secs()
    )]
    Timeout { command: String, budget: Duration },
    /// A Slurm client call failed.
    #[error("`{command}` failed: {words} — check the cluster: `scontrol ping`, `sinfo`")]
    Failed { command: String, words: String },
    /// The job was still running after `scancel` and the release bound.
    #[error(
        "job {job} was still {state} {}s after `scancel {job}` — cancel it by hand (`scancel {job}`) and check the cluster (`squeue --jobs {job}`)",
        waited.as_secs()
    )]
    NotReleased {
        job: u64,
        state: String,
        waited: Duration,
    },
    /// Ctrl-C while waiting for the nodes: the request was withdrawn.
    #[error(
        "interrupted while waiting for {nodes} node(s) of partition {partition} for pool `{pool}` — the request was withdrawn; nothing was borrowed or measured"
    )]
    Interrupted {
        pool: String,
        nodes: u32,
        partition: String,
    },
}

/// [`allocate`], given up when `interrupt` fires first (Ctrl-C): the
/// dropped request cancels a job salloc already named.
///
/// Errors: [`allocate`]'s, `interrupted`.
pub async fn allocate_or_interrupted(
    pool: &Pool,
    n: u32,
    invocation_id: &str,
    exclude: &[String],
    interrupt: &crate::cancel::Token,
) -> Result<Allocation, SlurmError> {
    tokio::select! {
        a = allocate(pool, n, invocation_id, exclude) => a,
        _ = interrupt.cancelled() => Err(SlurmError::Interrupted {
            pool: pool.name.clone(),
            nodes: n,
            partition: pool.partition.clone(),
        }),
    }
}

impl Refusal for SlurmError {
    fn name(&self) -> &'static str {
        match self {
            SlurmError::Unavailable { .. } => "slurm-unavailable",
            SlurmError::PoolInvalid { .. } => "pool-invalid",
            SlurmError::PoolUnknown { .. } => "pool-unknown",
            SlurmError::AllocationFailed { .. } => "slurm-allocation-failed",
            SlurmError::AllocationTimeout { .. } => "slurm-allocation-timeout",
            SlurmError::Timeout { .. } => "slurm-timeout",
            SlurmError::Failed { .. } => "slurm-command-failed",
            SlurmError::NotReleased { .. } => "slurm-release-failed",
            SlurmError::Interrupted { .. } => "interrupted",
        }
    }
    fn exit(&self) -> Exit {
        match self {
            SlurmError::Timeout { .. }
            | SlurmError::NotReleased { .. }
            | SlurmError::Interrupted { .. } => Exit::MeasurementFailed,
            _ => Exit::Refusal,
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        use crate::outcome::FailureKind;
        Some(match self {
            SlurmError::Unavailable { .. }
            | SlurmError::Timeout { .. }
            | SlurmError::Failed { .. }
            | SlurmError::NotReleased { .. } => FailureKind::SlurmUnavailable,
            SlurmError::PoolInvalid { .. } | SlurmError::PoolUnknown { .. } => return None,
            SlurmError::Interrupted { .. } => FailureKind::Interrupted,
            SlurmError::AllocationFailed { .. } | SlurmError::AllocationTimeout { .. } => {
                FailureKind::SlurmAllocationFailed
            }
        })
    }
}

/// A pool of nodes borrowed from a Slurm cluster: a `[pool.NAME]` row of
/// machines.toml (`transport = "slurm"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// The pool's name (`ci`): machines are `NAME/<node>`.
    pub name: String,
    /// The partition to borrow from (`-p`).
    pub partition: String,
    /// How many nodes to borrow (`-N`), at least 1.
    pub nodes: u32,
    /// A node-local absolute path saphan works under on every node.
    pub workhome: String,
    /// Slurm's `--time` for the allocation (`30`, `1:00:00`, `1-0`, …);
    /// `None`: the partition's default.
    pub time_limit: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--constraint` (node features).
    pub constraint: Option<String>,
    /// The cluster's slurm.conf (`SLURM_CONF` for every call); `None`: the
    /// environment's `SLURM_CONF`, or Slurm's default.
    pub conf: Option<PathBuf>,
    /// How long an allocation waits for free nodes (`--immediate`).
    pub allocation_wait: Duration,
}

/// The keys of a `[pool.NAME]` row, as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolRow {
    transport: String,
    partition: String,
    nodes: i64,
    workhome: String,
    time_limit: Option<String>,
    account: Option<String>,
    constraint: Option<String>,
    conf: Option<PathBuf>,
    /// Seconds.
    allocation_wait: Option<u64>,
}

impl Pool {
    /// The pool `name` from its `[pool.NAME]` table: `transport = "slurm"`,
    /// `partition`, `nodes` (≥ 1), `workhome` (absolute), optional
    /// `time_limit`, `account`, `constraint`, `conf` (absolute path of a
    /// slurm.conf) and `allocation_wait` (seconds, ≥ 1). No other key.
    ///
    /// Errors: `pool-invalid`, naming the key.
    pub fn from_toml_table(name: &str, table: &toml::Table) -> Result<Pool, SlurmError> {
        let bad = |detail: String| SlurmError::PoolInvalid {
            pool: name.to_string(),
            detail,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(
                "a pool's name is letters, digits, `-` and `_` (it begins every node's machine id, NAME/node) — rename the table".into(),
            ));
        }
        let row: PoolRow = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| bad(format!("{} — fix the row", e.message())))?;
        if row.transport != "slurm" {
            return Err(bad(format!(
                "transport = \"{}\", and a pool is borrowed from Slurm — write transport = \"slurm\"",
                row.transport
            )));
        }
        let word = |key: &str, v: &str| -> Result<(), SlurmError> {
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(bad(format!(
                    "{key} = {v:?} is not a Slurm name — give the name `sinfo` shows"
                )));
            }
            Ok(())
        };
        word("partition", &row.partition)?;
        if row.partition.contains(',') {
            return Err(bad(format!(
                "partition = {:?} names several partitions — name one",
                row.partition
            )));
        }
        let nodes = u32::try_from(row.nodes)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| bad(format!("nodes = {} — borrow at least 1 node", row.nodes)))?;
        if !row.workhome.starts_with('/') || row.workhome.contains('\0') {
            return Err(bad(format!(
                "workhome = {:?} is not an absolute path — give a node-local absolute path",
                row.workhome
            )));
        }
        if let Some(t) = &row.time_limit
            && !time_limit_ok(t)
        {
            return Err(bad(format!(
                "time_limit = {t:?} is none of Slurm's forms (MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED) — fix it"
            )));
        }
        for (key, v) in [("account", &row.account), ("constraint", &row.constraint)] {
            if let Some(v) = v
                && (v.is_empty() || v.chars().any(|c| c.is_control()))
            {
                return Err(bad(format!(
                    "{key} = {v:?} is empty or holds a control character"
                )));
            }
        }
        if let Some(c) = &row.conf
            && !c.is_absolute()
        {
            return Err(bad(format!(
                "conf = {:?} is not an absolute path — give the slurm.conf's absolute path",
                c.display()
            )));
        }
        let allocation_wait = match row.allocation_wait {
            None => ALLOCATION_WAIT,
            Some(0) => return Err(bad("allocation_wait = 0 — give seconds, at least 1".into())),
            Some(s) => Duration::from_secs(s),
        };
        Ok(Pool {
            name: name.to_string(),
            partition: row.partition,
            nodes,
            workhome: row.workhome,
            time_limit: row.time_limit,
            account: row.account,
            constraint: row.constraint,
            conf: row.conf,
            allocation_wait,
        })
    }

    /// The machine id of `node` in this pool: `NAME/node`.
    pub fn machine_id(&self, node: &str) -> String {
        format!("{}/{node}", self.name)
    }
}

/// Slurm's `--time` forms (sbatch(1)): `MINUTES`, `MINUTES:SECONDS`,
/// `HOURS:MINUTES:SECONDS`, `DAYS-HOURS`, `DAYS-HOURS:MINUTES`,
/// `DAYS-HOURS:MINUTES:SECONDS`, or `UNLIMITED`/`INFINITE`.
fn time_limit_ok(t: &str) -> bool {
    if matches!(t, "UNLIMITED" | "INFINITE" | "unlimited" | "infinite") {
        return true;
    }
    let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    if days.is_some_and(|d| !digits(d)) {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    parts.iter().all(|p| digits(p)) && (1..=3).contains(&parts.len())
}

/// Who owns an allocation: written in its `--comment` as `saphan owner
/// host=H boot=B pid=P start=T` — this machine's host name and boot id
/// (`/proc/sys/kernel/random/boot_id`), saphan's pid and its start time
/// (clock ticks since boot, `/proc/<pid>/stat` field 22). A pid alone is
/// reused; with its start time and the boot it names one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub host: String,
    pub boot: String,
    pub pid: u32,
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> Owner {
        Owner::of(std::process::id()).unwrap_or_else(|| Owner {
            host: host_name(),
            boot: boot_id(),
            pid: std::process::id(),
            start: 0,
        })
    }

    /// The process `pid` on this machine, while it runs.
    pub fn of(pid: u32) -> Option<Owner> {
        let stat = crate::procs::proc_stat(i32::try_from(pid).ok()?)?;
        Some(Owner {
            host: host_name(),
            boot: boot_id(),
            pid,
            start: stat.start_time,
        })
    }

    /// The comment that names it.
    pub fn comment(&self) -> String {
        format!(
            "saphan owner host={} boot={} pid={} start={}",
            self.host, self.boot, self.pid, self.start
        )
    }

    /// Read a comment [`Owner::comment`] wrote; `None` for any other.
    pub fn parse(comment: &str) -> Option<Owner> {
        let rest = comment.trim().strip_prefix("saphan owner ")?;
        let (mut host, mut boot, mut pid, mut start) = (None, None, None, None);
        for w in rest.split_whitespace() {
            let (k, v) = w.split_once('=')?;
            match k {
                "host" => host = Some(v.to_string()),
                "boot" => boot = Some(v.to_string()),
                "pid" => pid = v.parse().ok(),
                "start" => start = v.parse().ok(),
                _ => return None,
            }
        }
        Some(Owner {
            host: host?,
            boot: boot?,
            pid: pid?,
            start: start?,
        })
    }

    /// Whether this is a process of this machine (same host name).
    pub fn is_here(&self) -> bool {
        self.host == host_name()
    }

    /// Whether the owning process still runs: same host and boot, and the
    /// pid is there with the same start time. Meaningful only where
    /// [`Owner::is_here`].
    pub fn is_alive(&self) -> bool {
        self.boot == boot_id()
            && i32::try_from(self.pid)
                .ok()
                .and_then(crate::procs::proc_stat)
                .is_some_and(|s| s.start_time == self.start && !s.ended())
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
        .unwrap_or_else(|| "unknown".into())
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().to_string())
        .ok()
        .filter(|b| !b.is_empty() && !b.contains(char::is_whitespace))
        .unwrap_or_else(|| "unknown".into())
}

/// The config a call will use, checked first: a named slurm.conf that does
/// not exist makes Slurm's clients retry for 60 s before they give up
/// (measured), so it is refused here at once.
fn check_conf(conf: Option<&Path>) -> Result<(), SlurmError> {
    let named = conf
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("SLURM_CONF").map(PathBuf::from));
    if let Some(c) = named
        && !c.is_file()
    {
        return Err(SlurmError::Unavailable {
            detail: format!("the Slurm config {} does not exist", c.display()),
        });
    }
    Ok(())
}

/// Run one Slurm client call with `budget`; a non-zero exit is the
/// caller's to judge, except a client that cannot find its config
/// (`slurm-unavailable`).
async fn call(conf: Option<&Path>, cmd: Cmd, budget: Duration) -> Result<Output, SlurmError> {
    check_conf(conf)?;
    let shown = cmd.display();
    let program = cmd.program().to_string_lossy().into_owned();
    let out = exec::run(cmd.timeout(budget))
        .await
        .map_err(|e| SlurmError::Unavailable {
            detail: format!("`{program}` could not be started here ({e})"),
        })?;
    if out.status == Termination::TimedOut {
        return Err(SlurmError::Timeout {
            command: shown,
            budget,
        });
    }
    if !out.status.success() && client_says(&out.stderr) == ClientSays::NoConfig {
        return Err(SlurmError::Unavailable {
            detail: format!(
                "`{program}` found no cluster configuration ({})",
                one_line(&out.stderr_str())
            ),
        });
    }
    Ok(out)
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn failed(cmd: &str, out: &Output) -> SlurmError {
    let words = one_line(&out.stderr_str());
    SlurmError::Failed {
        command: cmd.to_string(),
        words: if words.is_empty() {
            format!("exit {:?}", out.status)
        } else {
            words
        },
    }
}

/// `scontrol show hostnames LIST`: a Slurm host list (`n[0-2,5]`) as names.
pub async fn hostnames(conf: Option<&Path>, list: &str) -> Result<Vec<String>, SlurmError> {
    if list.trim().is_empty() || list == "(null)" {
        return Ok(Vec::new());
    }
    let out = call(
        conf,
        client("scontrol", conf).args(["show", "hostnames", list]),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() {
        return Err(failed(&format!("scontrol show hostnames {list}"), &out));
    }
    Ok(out
        .stdout_str()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// One node of a partition as `sinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The node's name (`n0`).
    pub node: String,
    /// Slurm's long state, without the `*` that marks a node not
    /// responding: `idle`, `allocated`, `mixed`, `down`, `drained`,
    /// `draining`, `completing`, … (sinfo's `%T`).
    pub state: String,
    /// False when sinfo marks it `*`: slurmctld has not heard from it.
    pub responding: bool,
}

impl NodeState {
    /// Whether Slurm could give it to a job: responding and in a state
    /// that takes work (`idle`, `mixed`, `allocated`, `completing`).
    pub fn usable(&self) -> bool {
        self.responding
            && matches!(
                self.state
                    .trim_end_matches(['~', '#', '%', '$', '@', '^', '-', '!']),
                // `planned`: idle, but the backfill scheduler has it in
                // mind for a pending job — it can still be granted.
                "idle" | "mixed" | "allocated" | "completing" | "planned"
            )
    }
}

/// Read `sinfo --noheader --Node --format=%N|%T` lines.
fn parse_sinfo(text: &str) -> Vec<NodeState> {
    let mut seen = std::collections::BTreeSet::new();
    text.lines()
        .filter_map(|l| {
            let (node, state) = l.trim().split_once('|')?;
            let responding = !state.ends_with('*');
            let state = state.trim_end_matches('*').to_string();
            seen.insert(node.to_string()).then(|| NodeState {
                node: node.to_string(),
                state,
                responding,
            })
        })
        .collect()
}

/// Every node of the pool's partition and its state (`sinfo --Node`), in
/// sinfo's order, each once.
///
/// Errors: `slurm-unavailable`, `slurm-timeout`, `slurm-command-failed`
/// (an unknown partition, slurmctld unreachable).
pub async fn partition_nodes(pool: &Pool) -> Result<Vec<NodeState>, SlurmError> {
    let conf = pool.conf.as_deref();
    let out = call(
        conf,
        client("sinfo", conf).args([
            "--noheader",
            "--Node",
            "--partition",
            &pool.partition,
            "--format=%N|%T",
        ]),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() {
        return Err(failed(
            &format!("sinfo --partition {}", pool.partition),
            &out,
        ));
    }
    Ok(parse_sinfo(&out.stdout_str()))
}

/// The state of one node (`sinfo --Node --nodes NODE`); `None` when Slurm
/// does not know it.
///
/// Errors: as [`partition_nodes`].
pub async fn node_state(conf: Option<&Path>, node: &str) -> Result<Option<NodeState>, SlurmError> {
    let out = call(
        conf,
        client("sinfo", conf).args(["--noheader", "--Node", "--nodes", node, "--format=%N|%T"]),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() {
        return Err(failed(&format!("sinfo --nodes {node}"), &out));
    }
    Ok(parse_sinfo(&out.stdout_str())
        .into_iter()
        .find(|n| n.node == node))
}

/// A job as `squeue` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// Slurm's state word (`PENDING`, `RUNNING`, `COMPLETING`,
    /// `CANCELLED`, `NODE_FAIL`, `TIMEOUT`, …).
    pub state: String,
    /// The nodes it holds now (expanded).
    pub nodes: Vec<String>,
    /// Why it is in that state (`None`, `NodeDown`, `Resources`, …).
    pub reason: String,
}

impl JobState {
    /// Whether it still holds or waits for resources (not ended, not
    /// completing).
    pub fn active(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "SUSPENDED"
                | "CONFIGURING"
                | "RESIZING"
                | "REQUEUED"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
        )
    }
}

/// The job's state (`squeue --jobs JOB --states=all`); `None` once
/// slurmctld no longer knows it (ended and purged after `MinJobAge`).
///
/// Errors: `slurm-unavailable`, `slurm-timeout`, `slurm-command-failed`.
pub async fn job_state(conf: Option<&Path>, job: u64) -> Result<Option<JobState>, SlurmError> {
    let out = call(
        conf,
        client("squeue", conf).args([
            "--noheader",
            "--jobs",
            &job.to_string(),
            "--states=all",
            "--format=%T|%r|%N",
        ]),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() {
        // squeue's words for a job it does not know.
        if client_says(&out.stderr) == ClientSays::UnknownJob {
            return Ok(None);
        }
        return Err(failed(&format!("squeue --jobs {job}"), &out));
    }
    let text = out.stdout_str();
    let Some(line) = text.lines().next() else {
        return Ok(None);
    };
    let mut f = line.trim().splitn(3, '|');
    let state = f.next().unwrap_or_default().to_string();
    let reason = f.next().unwrap_or_default().to_string();
    let list = f.next().unwrap_or_default().to_string();
    Ok(Some(JobState {
        state,
        reason,
        nodes: hostnames(conf, &list).await?,
    }))
}

/// What was given back: the job and the state it was last seen in
/// (`None`: slurmctld no longer knew it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub job: u64,
    pub state: Option<String>,
    /// From `scancel` to the job's end.
    pub waited: Duration,
}

/// Cancels a job when dropped unless disarmed: on every path an
/// allocation does not reach [`Allocation::release`] (an error, a panic
/// unwinding, Ctrl-C dropping the future that held it), and — registered
/// with [`crate::cancel`] — when a second signal forces the exit.
///
/// A drop cannot await, and the process may exit right after it, so the
/// drop starts `scancel JOB` as a detached process of its own process
/// group (it outlives saphan; a thread reaps it) instead of a task of the
/// runtime, which the exit would kill with it.
#[derive(Debug)]
struct ReleaseGuard {
    job: Arc<Mutex<Option<u64>>>,
    conf: Option<PathBuf>,
    armed: bool,
    _registered: crate::cancel::Registration,
}

impl ReleaseGuard {
    fn new(conf: Option<PathBuf>) -> ReleaseGuard {
        let job: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
        let registered = {
            let (job, conf) = (job.clone(), conf.clone());
            crate::cancel::register_remote(Box::new(move || {
                Box::pin(async move {
                    let j = job.lock().ok().and_then(|g| *g);
                    if let Some(j) = j {
                        let _ = exec::run(
                            client("scancel", conf.as_deref())
                                .arg(j.to_string())
                                .timeout(crate::cancel::FORCE_BOUND),
                        )
                        .await;
                    }
                })
            }))
        };
        ReleaseGuard {
            job,
            conf,
            armed: true,
            _registered: registered,
        }
    }

    fn job(&self) -> Option<u64> {
        self.job.lock().ok().and_then(|g| *g)
    }
}

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(j) = self.job() {
            tracing::debug!(job = j, "releasing a dropped Slurm allocation");
            scancel_detached(self.conf.as_deref(), j);
        }
    }
}

/// `scancel JOB` as a detached process (see [`ReleaseGuard`]).
fn scancel_detached(conf: Option<&Path>, job: u64) {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new("scancel");
    for (k, v) in client("scancel", conf).env_changes() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.arg(job.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    if let Ok(mut child) = c.spawn() {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
}

/// Nodes borrowed for one invocation: a Slurm job made by [`allocate`].
/// Each node is a machine ([`Allocation::transport`]). Give it back with
/// [`Allocation::release`]; dropped unreleased, it is cancelled in the
/// background.
#[derive(Debug)]
pub struct Allocation {
    /// The job id.
    pub job: u64,
    /// The nodes granted, in Slurm's order.
    pub nodes: Vec<String>,
    /// The job's name, `saphan-<invocation id>`.
    pub name: String,
    pool: Pool,
    guard: ReleaseGuard,
}

impl Allocation {
    /// The pool it was borrowed for.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The [`SlurmNode`] of `node` (its machine id `POOL/node`).
    pub fn slurm_node(&self, node: &str) -> SlurmNode {
        SlurmNode {
            job: self.job,
            node: node.to_string(),
            conf: self.pool.conf.clone(),
            id: self.pool.machine_id(node),
        }
    }

    /// `node` as a machine: [`Transport::Slurm`], its commands job steps
    /// of this allocation.
    pub fn transport(&self, node: &str) -> Transport {
        Transport::slurm(self.slurm_node(node))
    }

    /// `Some(why)` when the job no longer runs (ended, cancelled, failed,
    /// past its time limit, or unknown to slurmctld); `None` while it runs.
    ///
    /// Errors: `slurm-unavailable`, `slurm-timeout`, `slurm-command-failed`.
    pub async fn job_gone(&self) -> Result<Option<String>, SlurmError> {
        Ok(
            match job_state(self.pool.conf.as_deref(), self.job).await? {
                None => Some(format!(
                    "job {} is gone (slurmctld no longer knows it)",
                    self.job
                )),
                Some(s) if s.state == "RUNNING" => None,
                Some(s) => Some(format!("job {} is {} ({})", self.job, s.state, s.reason)),
            },
        )
    }

    /// `Some(why)` when `node` can no longer run this allocation's work:
    /// the job is gone ([`Allocation::job_gone`]), the node left the job
    /// (a node failure under `--no-kill`), or Slurm says it is down,
    /// drained or not responding. `None` while it is usable.
    ///
    /// Errors: as [`Allocation::job_gone`].
    pub async fn node_gone(&self, node: &str) -> Result<Option<String>, SlurmError> {
        let conf = self.pool.conf.as_deref();
        let job = match job_state(conf, self.job).await? {
            None => {
                return Ok(Some(format!(
                    "job {} is gone (slurmctld no longer knows it)",
                    self.job
                )));
            }
            Some(s) if s.state != "RUNNING" => {
                return Ok(Some(format!(
                    "job {} is {} ({})",
                    self.job, s.state, s.reason
                )));
            }
            Some(s) => s,
        };
        if !job.nodes.iter().any(|n| n == node) {
            return Ok(Some(format!(
                "node {node} has left job {} (it holds {})",
                self.job,
                job.nodes.join(",")
            )));
        }
        Ok(match node_state(conf, node).await? {
            None => Some(format!("Slurm no longer knows node {node}")),
            Some(n) if !n.responding => {
                Some(format!("node {node} is not responding ({}*)", n.state))
            }
            Some(n) if !n.usable() => Some(format!("node {node} is {}", n.state)),
            Some(_) => None,
        })
    }

    /// Give the nodes back: `scancel JOB`, then wait — polling `squeue`
    /// with a growing pause, 10 ms to 500 ms — until the job has ended, so
    /// `squeue` lists it no more (an idle allocation: ~20 ms; one whose
    /// step was just killed stays `COMPLETING` ~3 s, measured), at most
    /// [`RELEASE_BOUND`]; a job still completing then is given back too
    /// (Slurm is cleaning its nodes up; nothing of saphan's runs there).
    /// Disarms the drop's cancel once it is given back.
    ///
    /// Errors: `slurm-unavailable`, `slurm-timeout`, `slurm-command-failed`
    /// (scancel refused), `slurm-release-failed` (still running at the
    /// bound). On an error the guard stays armed: the drop cancels again.
    pub async fn release(mut self) -> Result<Released, SlurmError> {
        let conf = self.pool.conf.clone();
        let t0 = Instant::now();
        let state = cancel_and_wait(conf.as_deref(), self.job).await?;
        self.guard.armed = false;
        Ok(Released {
            job: self.job,
            state,
            waited: t0.elapsed(),
        })
    }
}

/// `scancel JOB`, then wait until it has ended (see
/// [`Allocation::release`]); the state it was last seen in.
async fn cancel_and_wait(conf: Option<&Path>, job: u64) -> Result<Option<String>, SlurmError> {
    let out = call(
        conf,
        client("scancel", conf).arg(job.to_string()),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() && client_says(&out.stderr) != ClientSays::UnknownJob {
        return Err(failed(&format!("scancel {job}"), &out));
    }
    let t0 = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        let s = job_state(conf, job).await?;
        match s {
            None => return Ok(None),
            Some(s) if !s.active() && s.state != "COMPLETING" => return Ok(Some(s.state)),
            Some(s) if t0.elapsed() >= RELEASE_BOUND => {
                if !s.active() {
                    return Ok(Some(s.state));
                }
                return Err(SlurmError::NotReleased {
                    job,
                    state: s.state,
                    waited: t0.elapsed(),
                });
            }
            Some(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// The job id in one of salloc's stderr lines (`salloc: Pending job
/// allocation N`, `salloc: Granted job allocation N`, `salloc: job N
/// queued and waiting for resources`), and whether it says granted.
fn salloc_job(line: &str) -> Option<(u64, bool)> {
    let l = line.trim().strip_prefix("salloc: ")?;
    if let Some(n) = l.strip_prefix("Granted job allocation ") {
        return Some((n.trim().parse().ok()?, true));
    }
    if let Some(n) = l.strip_prefix("Pending job allocation ") {
        return Some((n.trim().parse().ok()?, false));
    }
    if let Some(r) = l.strip_prefix("job ")
        && let Some((n, _)) = r.split_once(' ')
    {
        return Some((n.parse().ok()?, false));
    }
    None
}

/// The granted job in salloc's stderr, if any, and its error lines.
fn read_salloc(stderr: &str) -> (Option<u64>, Option<u64>, String) {
    let (mut seen, mut granted) = (None, None);
    for l in stderr.lines() {
        if let Some((j, g)) = salloc_job(l) {
            seen = Some(j);
            if g {
                granted = Some(j);
            }
        }
    }
    let words = one_line(
        &stderr
            .lines()
            .filter(|l| salloc_job(l).is_none())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    (seen, granted, words)
}

/// Borrow `n` nodes of the pool's partition for the invocation
/// `invocation_id` (see the module docs for the salloc line), leaving out
/// the nodes in `exclude` (`--exclude`). Waits at most the pool's
/// `allocation_wait` for free nodes.
///
/// The job is guarded from the moment salloc names it: dropping this
/// future (Ctrl-C) or the [`Allocation`] cancels it.
///
/// Errors: `slurm-unavailable`, `slurm-allocation-failed` (salloc's words:
/// an unknown partition or account, a constraint no node has, more nodes
/// than the partition holds …), `slurm-allocation-timeout`,
/// `slurm-timeout`, `slurm-command-failed`.
pub async fn allocate(
    pool: &Pool,
    n: u32,
    invocation_id: &str,
    exclude: &[String],
) -> Result<Allocation, SlurmError> {
    let conf = pool.conf.as_deref();
    let name = format!("saphan-{invocation_id}");
    let wait = pool.allocation_wait;
    let mut cmd = client("salloc", conf).args([
        "--no-shell".to_string(),
        format!("--immediate={}", wait.as_secs().max(1)),
        format!("--nodes={n}"),
        "--exclusive".into(),
        "--no-kill".into(),
        format!("--job-name={name}"),
        format!("--partition={}", pool.partition),
    ]);
    if let Some(t) = &pool.time_limit {
        cmd = cmd.arg(format!("--time={t}"));
    }
    if let Some(a) = &pool.account {
        cmd = cmd.arg(format!("--account={a}"));
    }
    if let Some(c) = &pool.constraint {
        cmd = cmd.arg(format!("--constraint={c}"));
    }
    if !exclude.is_empty() {
        cmd = cmd.arg(format!("--exclude={}", exclude.join(",")));
    }
    cmd = cmd.arg(format!("--comment={}", Owner::current().comment()));
    let guard = ReleaseGuard::new(pool.conf.clone());
    let watch = {
        let job = guard.job.clone();
        let mut line = Vec::new();
        StderrWatch::new(move |b: &[u8]| {
            for &c in b {
                if c != b'\n' {
                    if line.len() < 512 {
                        line.push(c);
                    }
                    continue;
                }
                if let Some((j, _)) = salloc_job(&String::from_utf8_lossy(&line))
                    && let Ok(mut g) = job.lock()
                {
                    *g = Some(j);
                }
                line.clear();
            }
        })
    };
    let t0 = Instant::now();
    let out = call(conf, cmd.watch_stderr(watch), wait + CLIENT_TIMEOUT).await;
    let out = match out {
        Ok(o) => o,
        Err(e) => return Err(e), // the guard cancels a job salloc named
    };
    let (seen, granted, words) = read_salloc(&out.stderr_str());
    if let Some(j) = seen
        && let Ok(mut g) = guard.job.lock()
    {
        *g = Some(j);
    }
    let Some(job) = granted.filter(|_| out.status.success()) else {
        // Nothing granted: a request salloc left pending is cancelled by
        // the guard's drop too.
        let words = if words.is_empty() {
            format!("salloc ended {:?} without granting a job", out.status)
        } else {
            words
        };
        return Err(if t0.elapsed() >= wait {
            SlurmError::AllocationTimeout {
                pool: pool.name.clone(),
                nodes: n,
                partition: pool.partition.clone(),
                waited: t0.elapsed(),
                words,
            }
        } else {
            SlurmError::AllocationFailed {
                pool: pool.name.clone(),
                nodes: n,
                partition: pool.partition.clone(),
                words,
            }
        });
    };
    let state = job_state(conf, job).await?;
    let nodes = state.map(|s| s.nodes).unwrap_or_default();
    if nodes.len() != n as usize {
        return Err(SlurmError::AllocationFailed {
            pool: pool.name.clone(),
            nodes: n,
            partition: pool.partition.clone(),
            words: format!(
                "job {job} was granted but holds {} node(s) ({}); it was cancelled",
                nodes.len(),
                nodes.join(",")
            ),
        });
    }
    Ok(Allocation {
        job,
        nodes,
        name,
        pool: pool.clone(),
        guard,
    })
}

/// An allocation [`sweep`] cancelled: its job, its name, and the owner
/// its comment named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub job: u64,
    pub name: String,
    pub owner: Owner,
}

impl std::fmt::Display for Swept {
    /// `cancelled Slurm job 42 (saphan-…): its saphan (pid 123 on host) is gone`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cancelled Slurm job {} ({}): its saphan (pid {} on {}) is gone",
            self.job, self.name, self.owner.pid, self.owner.host
        )
    }
}

/// One line of `squeue --format=%i|%j|%k`: the id, the name, the comment
/// (after the last `|`: a name may hold one, saphan's comment never does).
fn parse_job_line(l: &str) -> Option<(u64, String, String)> {
    let (id, rest) = l.trim().split_once('|')?;
    let (name, comment) = rest.rsplit_once('|')?;
    Some((id.parse().ok()?, name.to_string(), comment.to_string()))
}

/// Cancel the allocations a saphan of this machine left behind: this
/// user's jobs named `saphan-*`, pending or running, whose comment names an
/// [`Owner`] on this host that no longer runs (its pid gone, or another
/// process under it, or another boot). Live owners' allocations and other
/// hosts' are left alone. Returns what it cancelled, for one line each
/// ([`Swept`]'s `Display`).
///
/// Errors: `slurm-unavailable`, `slurm-timeout`, `slurm-command-failed`.
pub async fn sweep(pool: &Pool) -> Result<Vec<Swept>, SlurmError> {
    let conf = pool.conf.as_deref();
    let uid = nix::unistd::getuid().as_raw().to_string();
    let out = call(
        conf,
        client("squeue", conf).args([
            "--noheader",
            "--user",
            &uid,
            "--states=PENDING,RUNNING,SUSPENDED,CONFIGURING",
            "--format=%i|%j|%k",
        ]),
        CLIENT_TIMEOUT,
    )
    .await?;
    if !out.status.success() {
        return Err(failed("squeue --user", &out));
    }
    let dead: Vec<Swept> = out
        .stdout_str()
        .lines()
        .filter_map(parse_job_line)
        .filter(|(_, name, _)| name.starts_with("saphan-"))
        .filter_map(|(job, name, comment)| {
            let owner = Owner::parse(&comment)?;
            (owner.is_here() && !owner.is_alive()).then_some(Swept { job, name, owner })
        })
        .collect();
    if dead.is_empty() {
        return Ok(dead);
    }
    let ids: Vec<String> = dead.iter().map(|s| s.job.to_string()).collect();
    let out = call(conf, client("scancel", conf).args(&ids), CLIENT_TIMEOUT).await?;
    if !out.status.success() && client_says(&out.stderr) != ClientSays::UnknownJob {
        return Err(failed(&format!("scancel {}", ids.join(" ")), &out));
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sallocs_lines_name_the_job_and_whether_it_was_granted() {
        // slurm-wlm 22.05.8, measured in the lab.
        let (seen, granted, words) = read_salloc("salloc: Granted job allocation 4\n");
        assert_eq!((seen, granted, words.as_str()), (Some(4), Some(4), ""));
        let e = "salloc: Pending job allocation 5\nsalloc: job 5 queued and waiting for resources\nsalloc: error: Unable to allocate resources: Connection timed out\n";
        let (seen, granted, words) = read_salloc(e);
        assert_eq!((seen, granted), (Some(5), None));
        assert_eq!(
            words,
            "salloc: error: Unable to allocate resources: Connection timed out"
        );
        let e = "salloc: error: invalid partition specified: nope\nsalloc: error: Job submit/allocate failed: Invalid partition name specified\n";
        let (seen, granted, words) = read_salloc(e);
        assert_eq!((seen, granted), (None, None));
        assert!(
            words.contains("invalid partition specified: nope; salloc: error"),
            "{words}"
        );
    }

    #[test]
    fn sinfo_lines_read_state_and_responsiveness() {
        let n = parse_sinfo("n0|idle\nn1|down*\nn0|idle\nn2|allocated\nn3|drained\n");
        assert_eq!(n.len(), 4, "{n:?}");
        assert!(n[0].usable());
        assert_eq!((n[1].state.as_str(), n[1].responding), ("down", false));
        assert!(!n[1].usable());
        assert!(n[2].usable());
        assert!(!n[3].usable());
        // Idle, but in the backfill scheduler's plan for a pending job: it
        // can still be granted (seen after a pending request was withdrawn).
        let n = parse_sinfo("n0|planned\nn1|planned*\n");
        assert!(n[0].usable());
        assert!(!n[1].usable());
    }

    #[test]
    fn an_owner_reads_back_and_a_dead_one_is_told() {
        let me = Owner::current();
        assert_eq!(Owner::parse(&me.comment()), Some(me.clone()));
        assert!(me.is_here() && me.is_alive(), "{me:?}");
        let restarted = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!restarted.is_alive());
        let rebooted = Owner {
            boot: "another-boot".into(),
            ..me.clone()
        };
        assert!(!rebooted.is_alive());
        assert_eq!(Owner::parse("built by ci"), None);
        assert_eq!(Owner::parse("saphan owner host=h pid=1 start=2"), None);
        assert_eq!(
            parse_job_line("42|saphan-a|b|saphan owner host=h boot=b pid=1 start=2"),
            Some((
                42,
                "saphan-a|b".into(),
                "saphan owner host=h boot=b pid=1 start=2".into()
            ))
        );
    }

    #[test]
    fn a_pool_row_is_read_whole_or_refused_by_key() {
        let t: toml::Table = toml::from_str(
            r#"transport = "slurm"
partition = "lab"
nodes = 3
workhome = "/var/tmp/saphan"
time_limit = "0-01:00:00"
account = "ci"
constraint = "go&x86"
conf = "/etc/slurm/slurm.conf"
allocation_wait = 30"#,
        )
        .unwrap();
        let p = Pool::from_toml_table("ci", &t).unwrap();
        assert_eq!(p.nodes, 3);
        assert_eq!(p.allocation_wait, Duration::from_secs(30));
        assert_eq!(p.machine_id("n0"), "ci/n0");
        let bad = |text: &str| {
            let t: toml::Table = toml::from_str(text).unwrap();
            Pool::from_toml_table("ci", &t).unwrap_err().to_string()
        };
        let base = "transport = \"slurm\"\npartition = \"lab\"\nnodes = 2\nworkhome = \"/w\"\n";
        assert!(bad(&format!("{base}colour = 1")).contains("colour"));
        assert!(bad(&base.replace("nodes = 2", "nodes = 0")).contains("at least 1"));
        assert!(bad(&base.replace("\"/w\"", "\"w\"")).contains("absolute"));
        assert!(bad(&base.replace("\"slurm\"", "\"ssh\"")).contains("transport"));
        assert!(bad(&format!("{base}time_limit = \"soon\"")).contains("time_limit"));
        assert!(bad(&base.replace("\"lab\"", "\"a,b\"")).contains("several"));
    }

    #[test]
    fn time_limits_take_slurms_forms() {
        for ok in [
            "30",
            "30:00",
            "1:00:00",
            "1-0",
            "1-2:30",
            "2-12:00:00",
            "UNLIMITED",
        ] {
            assert!(time_limit_ok(ok), "{ok}");
        }
        for bad in ["", "1h", "1-", "-1", "1:2:3:4", "1-2:3:4:5", "a"] {
            assert!(!time_limit_ok(bad), "{bad}");
        }
    }
}
