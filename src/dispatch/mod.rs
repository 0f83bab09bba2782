//! Dispatch: the same measurement as a local certify, executed on admitted
//! fleet machines (DESIGN §6a; operator's view: docs/dispatch.md).
//!
//! Order of one dispatched run, every refusal before anything is shipped:
//! 1. local refusals (the caller: bad repo/revision, no suite, bad config,
//!    provision sources);
//! 2. [`admit`] from the ledger only, per machine;
//! 3. connect to every machine; a program no catalog row maps is resolved
//!    there and refused if absent;
//! 4. per machine, concurrently: [`ship`] only the commits the mirror lacks,
//!    then one *session* on the machine under the repository's lock
//!    (`session.sh`): materialize the stable scratch tree (submodules at
//!    their gitlinks, provisions placed and hashed there, exclude file in
//!    the tree's own git dir), run the suite in its own process group under
//!    the budget enforced on the machine (`timeout(1)`: TERM to the group,
//!    grace, KILL), keep stdout and the report files, remove the tree;
//! 5. collect (bounded), parse locally with the same parsers, record locally.
//!
//! The seam for other execution classes is [`Executor`]: it decides which
//! command the session runs inside the shipped tree (the suite itself for
//! the host class).

pub mod admit;
pub mod ship;

use crate::config::Provision;
use crate::error::{Exit, Refusal, Result};
use crate::exec::{self, Cmd, Termination};
use crate::fleet::machines::MachineRow;
use crate::git::Repo;
use crate::home::Home;
use crate::measure::{self, Budget, Interrupt, Subject, SuiteRun};
use crate::provision::Placed;
use crate::record::Record;
use crate::report::{self, Evidence, Measurement, Verdict};
use crate::suite::ResolvedSuite;
use crate::transport::{Transport, TransportError};
pub use admit::Admitted;
use std::path::Path;
use std::time::{Duration, Instant};

/// Budget for one control command on a machine (mirror listing, fetch,
/// staging, cleanup).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(120);
/// Connect budget per machine.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Grace between TERM and KILL of the suite's group on the machine.
pub const GRACE: Duration = Duration::from_secs(2);
/// Bound on what is brought back: stdout, and the report files together.
pub const COLLECT_LIMIT: u64 = 64 * 1024 * 1024;
/// How long the session may wait for the repository's lock on the machine.
pub const LOCK_WAIT: Duration = Duration::from_secs(60);
/// How long Ctrl-C waits for the machine to kill and clean up.
pub const INTERRUPT_BOUND: Duration = Duration::from_secs(20);

const SESSION: &str = include_str!("session.sh");

/// Refusals of a dispatched run (nothing was shipped).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The machine is not admitted for the suite's program.
    #[error(
        "the suite's program `{program}` is not admitted on machine {machine} ({catalog_row}): {why} — nothing was shipped; run:\n  {}\n  {}",
        remedy.first().map(String::as_str).unwrap_or(""),
        remedy.get(1).map(String::as_str).unwrap_or("")
    )]
    ToolchainAbsent {
        machine: String,
        program: String,
        catalog_row: String,
        why: String,
        remedy: Vec<String>,
    },
    /// A program no catalog row maps is not on the machine.
    #[error(
        "the suite's program `{program}` is not on machine {machine} (no catalog row maps this program; resolved there: {detail}) — nothing was shipped; install it there, or declare the suite with a program the machine has"
    )]
    ProgramAbsent {
        machine: String,
        program: String,
        detail: String,
    },
    /// A provision could not be placed in the shipped tree.
    #[error(
        "on machine {machine}: provision {detail} — nothing was measured; change the provision's dest"
    )]
    ProvisionConflict { machine: String, detail: String },
    /// The verify-affected adapter needs a saphan binary the machine can run.
    #[error(
        "machine {machine} measured {os}/{arch}, but this saphan is built for {local_os}/{local_arch}, so it cannot be shipped there — install saphan {version} for {os}/{arch} on the machine and declare its path as verify.affected's adapter, or dispatch to a machine of this platform"
    )]
    PlatformMismatch {
        machine: String,
        os: String,
        arch: String,
        local_os: String,
        local_arch: String,
        version: String,
    },
}

impl Refusal for DispatchError {
    fn name(&self) -> &'static str {
        match self {
            DispatchError::ToolchainAbsent { .. } | DispatchError::ProgramAbsent { .. } => {
                "verification-toolchain-absent"
            }
            DispatchError::ProvisionConflict { .. } => "provision-dest-conflict",
            DispatchError::PlatformMismatch { .. } => "saphan-binary-unavailable",
        }
    }
}

/// Why a machine's attempt failed after admission: a stable name
/// (`host-unreachable`, `connection-lost`, `ship-failed` …) and a sentence.
#[derive(Debug, Clone)]
pub struct DispatchFault {
    /// Stable kebab-case name.
    pub name: &'static str,
    /// What happened.
    pub detail: String,
}

impl DispatchFault {
    /// A fault named `name`.
    pub fn new(name: &'static str, detail: impl Into<String>) -> DispatchFault {
        DispatchFault {
            name,
            detail: detail.into(),
        }
    }
    /// A transport error as a fault (its own stable name).
    pub fn transport(e: TransportError) -> DispatchFault {
        DispatchFault {
            name: e.name(),
            detail: e.to_string(),
        }
    }
    fn note(&self) -> String {
        format!("{}: {}", self.name, self.detail)
    }
}

/// Where the suite runs inside the shipped tree: the seam between dispatch
/// (ship, materialize, collect) and an execution class.
pub trait Executor: Send + Sync {
    /// The record's `class`.
    fn class(&self) -> &'static str;
    /// The command the session runs with the shipped tree (`tree`, an
    /// absolute path on the machine) as its working directory, under the
    /// budget, in its own process group. `suite_argv` is the admitted argv
    /// (argv[0] is the machine's declared program path).
    fn argv(&self, tree: &str, suite_argv: &[String]) -> Vec<String>;
}

/// The host class: the suite runs as a process on the machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostExecutor;

impl Executor for HostExecutor {
    fn class(&self) -> &'static str {
        "host"
    }
    fn argv(&self, _tree: &str, suite_argv: &[String]) -> Vec<String> {
        suite_argv.to_vec()
    }
}

/// Progress of one machine's attempt, for a person watching.
pub trait Progress: Send + Sync {
    /// `machine` entered a phase (`connect`, `ship 12 KiB`, `run`, `collect`).
    fn phase(&self, machine: &str, what: &str);
}

/// One measurement to dispatch.
pub struct Job<'a> {
    /// The operator's home.
    pub home: &'a Home,
    /// The local repository.
    pub repo: &'a Repo,
    /// The full SHA.
    pub sha: &'a str,
    /// The resolved suite (argv as resolved locally; admission rewrites argv[0]).
    pub suite: &'a ResolvedSuite,
    /// The attempt budget.
    pub budget: &'a Budget,
    /// Provisions that apply (already preflighted locally).
    pub provisions: &'a [Provision],
    /// Submodules at their gitlinks: (path, commit, the local repository holding it).
    pub submodules: &'a [crate::git::Submodule],
    /// The verb (`certify`).
    pub verb: &'a str,
    /// Extra environment for the suite.
    pub extra_env: &'a [(String, String)],
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// The affected tier's files (`None` for certify): `report_path` is then
    /// relative to `<run dir>/reports`, the manifest is staged at
    /// `<run dir>/manifest.json`, and `<run dir>/scope.json` is brought back.
    /// `@RUN@` in `extra_env` values stands for the run dir on the machine.
    pub affected: Option<&'a Path>,
    /// This saphan binary and its sha256, shipped to
    /// `<workhome>/saphan/bin/saphan-<sha256>` when argv[0] is `saphan`.
    pub self_binary: Option<(&'a Path, &'a str)>,
}

/// One machine's attempt, recorded.
#[derive(Debug, Clone)]
pub struct MachineRun {
    /// The record (not yet appended).
    pub record: Record,
    /// The last lines of the suite's stderr on the machine.
    pub stderr_tail: String,
}

/// The repository key on a machine: the same key local certify uses for
/// its stable scratch path.
pub fn repo_key(repo: &Repo) -> String {
    let key = crate::fsutil::sha256_hex(repo.common_dir.as_os_str().as_encoded_bytes());
    key[..16].to_string()
}

/// Connect to an admitted machine and, when no catalog row maps the
/// program, resolve it there (refused if absent). Connection failures are
/// faults (the attempt is recorded as measurement-failed), not refusals.
pub async fn connect(
    home: &Home,
    m: &Admitted,
) -> Result<std::result::Result<Transport, DispatchFault>> {
    let t = match crate::fleet::machines::connect(home, &m.row, CONNECT_TIMEOUT).await {
        Ok(t) => t,
        Err(e) => {
            let e: crate::error::Error = e.into();
            return Ok(Err(DispatchFault::new(e.name(), e.inner().to_string())));
        }
    };
    if m.capability.is_none() {
        let prog = m.argv[0].clone();
        // A path relative to the tree (`./run-tests.sh`) is the SHA's own file.
        let in_tree = prog.contains('/') && !prog.starts_with('/');
        // `saphan` (the bundled adapter) is this very binary, shipped.
        if !in_tree && prog != "saphan" {
            let argv: Vec<String> = vec![
                "sh".into(),
                "-c".into(),
                r#"command -v "$1""#.into(),
                "saphan-resolve".into(),
                prog.clone(),
            ];
            match t.exec(&argv, CONTROL_TIMEOUT).await {
                Ok(o) if o.status.success() => {}
                Ok(o) => {
                    return Err(DispatchError::ProgramAbsent {
                        machine: m.row.id.clone(),
                        program: prog,
                        detail: format!("`command -v` found nothing ({:?})", o.status),
                    }
                    .into());
                }
                Err(e) => return Ok(Err(DispatchFault::transport(e))),
            }
        }
    }
    Ok(Ok(t))
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Run `job` on the connected machine `m` (or record why it could not) and
/// build its record. Never returns an error for what happened on the
/// machine: every outcome after admission is a record. Refusals found on the
/// machine before the suite ran (a provision dest conflict) are errors.
pub async fn run_on(
    job: &Job<'_>,
    m: &Admitted,
    connected: std::result::Result<Transport, DispatchFault>,
    connect_time: Duration,
    executor: &dyn Executor,
    progress: &dyn Progress,
) -> Result<MachineRun> {
    let c = measure_on(job, m, connected, connect_time, executor, progress).await?;
    let mut suite = job.suite.clone();
    suite.argv = c.argv.clone();
    let mut record = measure::record(
        Subject {
            verb: job.verb,
            repo: &job.repo.top,
            sha: job.sha,
            machine: &m.row.id,
            class: executor.class(),
        },
        &suite,
        job.budget,
        &c.run,
    );
    record.notes.extend(c.notes);
    record.extra.insert(
        "machine_program".into(),
        serde_json::json!({
            "capability": m.capability,
            "path": m.program_path.clone().unwrap_or_else(|| c.argv[0].clone()),
            "version": m.program_version,
        }),
    );
    record
        .extra
        .insert("bundle_bytes".into(), serde_json::json!(c.bundle_bytes));
    record
        .extra
        .insert("phases".into(), serde_json::Value::Object(c.phases));
    record
        .extra
        .insert("remote_tree".into(), serde_json::json!(c.remote_tree));
    if c.interrupted {
        record
            .extra
            .insert("interrupted".into(), serde_json::json!(true));
    }
    Ok(MachineRun {
        record,
        stderr_tail: c.run.stderr_tail,
    })
}

/// What one machine's attempt left, before it becomes a record.
#[derive(Debug)]
pub struct Collected {
    /// The run, as the measurement core describes a local one.
    pub run: SuiteRun,
    /// What ran there.
    pub argv: Vec<String>,
    /// Notes to add to the record (`reaped: …`).
    pub notes: Vec<String>,
    /// Bundle bytes shipped.
    pub bundle_bytes: u64,
    /// Seconds per phase.
    pub phases: serde_json::Map<String, serde_json::Value>,
    /// The scratch tree path on the machine.
    pub remote_tree: String,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
    /// Local copies: `stdout`, `tree/` (report files), `scope.json`
    /// (affected). `None` when nothing was brought back.
    pub local: Option<tempfile::TempDir>,
}

/// Ship, materialize, run and collect `job` on the connected machine `m`:
/// every outcome after admission is a [`Collected`] (a failure is a failed
/// measurement naming its cause); refusals found on the machine before the
/// suite ran (a provision dest conflict) are errors.
pub async fn measure_on(
    job: &Job<'_>,
    m: &Admitted,
    connected: std::result::Result<Transport, DispatchFault>,
    connect_time: Duration,
    executor: &dyn Executor,
    progress: &dyn Progress,
) -> Result<Collected> {
    let started_at = crate::clock::now_rfc3339();
    let layout = ship::Layout {
        base: format!("{}/saphan", m.row.workhome.trim_end_matches('/')),
        key: repo_key(job.repo),
    };
    let mut phases = serde_json::Map::new();
    phases.insert("connect".into(), serde_json::json!(secs(connect_time)));
    let mut a = Attempt {
        bundle_bytes: 0,
        interrupted: false,
        termination: None,
        measurement: Measurement::failed("connection-lost: nothing ran"),
        placed: Vec::new(),
        run_time: Duration::ZERO,
        stderr_tail: String::new(),
        notes: Vec::new(),
        local: None,
    };
    let mut argv = m.argv.clone();
    if let Some((_, sha)) = job.self_binary
        && argv[0] == "saphan"
    {
        argv[0] = format!("{}/bin/saphan-{sha}", layout.base);
    }
    let run_argv = executor.argv(&layout.tree(), &argv);
    match connected {
        Err(f) => a.measurement = Measurement::failed(f.note()),
        Ok(t) => {
            let r = attempt(
                job,
                m,
                &t,
                &layout,
                &run_argv,
                &mut a,
                &mut phases,
                progress,
            )
            .await;
            if let Err(f) = r {
                match f {
                    Failure::Fault(f) => a.measurement = Measurement::failed(f.note()),
                    Failure::Refused(e) => return Err(e),
                }
            }
            if let Transport::Ssh(s) = &t {
                s.disconnect().await;
            }
        }
    }
    progress.phase(
        &m.row.id,
        &format!("done: {}", a.measurement.verdict.as_str()),
    );
    let run = SuiteRun {
        started_at,
        finished_at: crate::clock::now_rfc3339(),
        termination: a.termination,
        measurement: a.measurement,
        placed: a.placed,
        elapsed: a.run_time,
        stderr_tail: a.stderr_tail.clone(),
        submodules: job
            .submodules
            .iter()
            .map(|s| (s.path.clone(), s.commit.clone()))
            .collect(),
    };
    Ok(Collected {
        run,
        argv: run_argv,
        notes: a.notes,
        bundle_bytes: a.bundle_bytes,
        phases,
        remote_tree: layout.tree(),
        interrupted: a.interrupted,
        local: a.local,
    })
}

struct Attempt {
    bundle_bytes: u64,
    interrupted: bool,
    termination: Option<Termination>,
    measurement: Measurement,
    placed: Vec<Placed>,
    run_time: Duration,
    stderr_tail: String,
    notes: Vec<String>,
    local: Option<tempfile::TempDir>,
}

enum Failure {
    Fault(DispatchFault),
    Refused(crate::error::Error),
}

impl From<DispatchFault> for Failure {
    fn from(f: DispatchFault) -> Failure {
        Failure::Fault(f)
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The literal directory prefix of a report glob (`build/reports/*.xml` →
/// `build/reports`); `.` when the glob starts with a pattern.
fn report_prefix(pattern: &str) -> String {
    let comps: Vec<&str> = pattern
        .trim()
        .trim_start_matches("./")
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let literal = |c: &str| !c.contains(['*', '?', '[', ']', '{', '}', '\\']);
    let mut out = Vec::new();
    for (i, c) in comps.iter().enumerate() {
        if !literal(c) || i + 1 == comps.len() {
            break;
        }
        out.push(*c);
    }
    if out.is_empty() {
        ".".into()
    } else {
        out.join("/")
    }
}

#[allow(clippy::too_many_arguments)]
async fn attempt(
    job: &Job<'_>,
    m: &Admitted,
    t: &Transport,
    layout: &ship::Layout,
    run_argv: &[String],
    a: &mut Attempt,
    phases: &mut serde_json::Map<String, serde_json::Value>,
    progress: &dyn Progress,
) -> std::result::Result<(), Failure> {
    let id = m.row.id.as_str();
    let run_id = format!("{}-{}", crate::record::new_id(), id);
    let run_dir = layout.run(&run_id);

    // Ship the SHA and every submodule commit.
    progress.phase(id, "ship");
    let t_ship = Instant::now();
    let mut sources = vec![(job.repo.clone(), job.sha.to_string())];
    for s in job.submodules {
        if let Some(store) = &s.store {
            sources.push((store.clone(), s.commit.clone()));
        }
    }
    let tag = format!("{}-{}", std::process::id(), id);
    let shipped = ship::ship(t, layout, &sources, &tag).await?;
    a.bundle_bytes = shipped.bundle_bytes;
    phases.insert("ship".into(), serde_json::json!(secs(t_ship.elapsed())));
    progress.phase(
        id,
        &format!("shipped {} KiB", shipped.bundle_bytes.div_ceil(1024)),
    );

    // Stage provisions and the submodule list in the run dir.
    let staging = tempfile::Builder::new()
        .prefix("saphan-stage-")
        .tempdir()
        .map_err(|e| DispatchFault::new("ship-failed", format!("temp dir: {e}")))?;
    let staged = !job.provisions.is_empty()
        || !job.submodules.is_empty()
        || job.affected.is_some()
        || job.self_binary.is_some();
    if staged {
        let mk = t
            .exec(
                &strs(&[
                    "mkdir",
                    "-p",
                    &format!("{run_dir}/prov"),
                    &format!("{run_dir}/reports"),
                    &format!("{}/bin", layout.base),
                ]),
                CONTROL_TIMEOUT,
            )
            .await
            .map_err(DispatchFault::transport)?;
        if !mk.status.success() {
            return Err(DispatchFault::new(
                "ship-failed",
                format!("mkdir {run_dir}: {}", mk.stderr_str()),
            )
            .into());
        }
    }
    if let Some((local_bin, sha)) = job.self_binary
        && run_argv
            .first()
            .is_some_and(|a| a.ends_with(&format!("/bin/saphan-{sha}")))
    {
        // Content-addressed: shipped once per build, reused after.
        let remote_bin = run_argv[0].clone();
        let have = t
            .exec(&strs(&["test", "-x", &remote_bin]), CONTROL_TIMEOUT)
            .await
            .map_err(DispatchFault::transport)?;
        if !have.status.success() {
            t.put(local_bin, &remote_bin)
                .await
                .map_err(DispatchFault::transport)?;
        }
    }
    if let Some(manifest) = job.affected {
        t.put(manifest, &format!("{run_dir}/manifest.json"))
            .await
            .map_err(DispatchFault::transport)?;
    }
    let mut prov_args: Vec<String> = Vec::new();
    for (i, p) in job.provisions.iter().enumerate() {
        let remote = format!("{run_dir}/prov/{i}");
        t.put(&p.source, &remote)
            .await
            .map_err(DispatchFault::transport)?;
        prov_args.push(remote);
        prov_args.push(p.dest.clone());
    }
    if !job.submodules.is_empty() {
        let list: String = job
            .submodules
            .iter()
            .map(|s| format!("{} {}\n", s.commit, s.path))
            .collect();
        let f = staging.path().join("submodules");
        std::fs::write(&f, list)
            .map_err(|e| DispatchFault::new("ship-failed", format!("staging: {e}")))?;
        t.put(&f, &format!("{run_dir}/submodules"))
            .await
            .map_err(DispatchFault::transport)?;
    }

    // The session: materialize, run under the budget, keep, remove.
    let report_prefix = match (job.suite.report, &job.suite.report_path) {
        (report::ReportKind::JunitXml, Some(p)) if job.affected.is_some() => {
            format!("run:{}", report_prefix(p))
        }
        (report::ReportKind::JunitXml, Some(p)) => report_prefix(p),
        _ => String::new(),
    };
    let budget_s = job.budget.duration.as_secs().max(1);
    let mut argv = strs(&["sh", "-c", SESSION, "saphan-session"]);
    argv.extend([
        layout.base.clone(),
        layout.key.clone(),
        job.sha.to_string(),
        run_id.clone(),
        format!("{budget_s}s"),
        format!("{}s", GRACE.as_secs()),
        report_prefix,
        COLLECT_LIMIT.to_string(),
        job.provisions.len().to_string(),
    ]);
    argv.extend(prov_args);
    argv.push(job.extra_env.len().to_string());
    argv.extend(job.extra_env.iter().map(|(k, v)| format!("{k}={v}")));
    argv.push("--".into());
    argv.extend(run_argv.iter().cloned());
    let session_budget = job.budget.duration + GRACE + LOCK_WAIT + CONTROL_TIMEOUT;
    progress.phase(id, "run");
    let t_run = Instant::now();
    let mut intr = job.interrupt.clone();
    let session = t.exec(&argv, session_budget);
    tokio::pin!(session);
    let out = tokio::select! {
        r = &mut session => r,
        _ = measure::wait_interrupt(&mut intr) => {
            a.interrupted = true;
            progress.phase(id, "interrupted: stopping the suite on the machine");
            let cancel = format!(
                r#"touch "$1/cancel"; i=0; while [ ! -s "$1/pid" ] && [ ! -e "$1/status" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ -s "$1/pid" ] || exit 0
p=$(cat "$1/pid"); kill -s TERM -- "-$p" 2>/dev/null; sleep {g}; kill -s KILL -- "-$p" 2>/dev/null; exit 0"#,
                g = GRACE.as_secs()
            );
            let _ = t.exec(&strs(&["sh", "-c", &cancel, "saphan-cancel", &run_dir]), INTERRUPT_BOUND).await;
            match tokio::time::timeout(INTERRUPT_BOUND, &mut session).await {
                Ok(r) => r,
                Err(_) => Err(TransportError::RemoteTimeout {
                    alias: id.to_string(),
                    what: "stopping the suite after Ctrl-C".into(),
                    budget: INTERRUPT_BOUND,
                }),
            }
        }
    };
    a.run_time = t_run.elapsed();
    let out = match out {
        Ok(o) => o,
        Err(e) => return Err(DispatchFault::transport(e).into()),
    };
    if out.status == Termination::TimedOut {
        return Err(DispatchFault::new(
            "remote-timeout",
            format!(
                "the session on {id} did not end within {} (budget + grace + lock wait + control)",
                humantime::format_duration(session_budget)
            ),
        )
        .into());
    }
    let status = out
        .stdout_str()
        .split("@@status\n")
        .nth(1)
        .unwrap_or("")
        .trim()
        .to_string();

    // Collect.
    progress.phase(id, "collect");
    let t_collect = Instant::now();
    let local = tempfile::Builder::new()
        .prefix("saphan-collect-")
        .tempdir()
        .map_err(|e| DispatchFault::new("collect-failed", format!("temp dir: {e}")))?;
    let info = out.stdout_str();
    let mut section = "";
    let mut stamps: Vec<(String, f64)> = Vec::new();
    let mut stderr_tail = String::new();
    let mut err_tail = String::new();
    for l in info.lines() {
        if let Some(s) = l.strip_prefix("@@") {
            section = match s {
                "phases" => "phases",
                "provisions" => "provisions",
                "notes" => "notes",
                "stderr" => "stderr",
                "err" => "err",
                "status" => "status",
                _ => section,
            };
            continue;
        }
        match section {
            "phases" => {
                if let Some((n, v)) = l.split_once(' ')
                    && let Ok(v) = v.trim().parse::<f64>()
                {
                    stamps.push((n.to_string(), v));
                }
            }
            "provisions" => {
                if let Some((h, d)) = l.split_once(' ') {
                    a.placed.push(Placed {
                        dest: d.to_string(),
                        sha256: h.to_string(),
                    });
                }
            }
            "notes" if !l.trim().is_empty() => {
                a.notes
                    .push(format!("reaped: {}", l.trim_start_matches("reaped ")));
            }
            "stderr" => {
                stderr_tail.push_str(l);
                stderr_tail.push('\n');
            }
            "err" => {
                err_tail.push_str(l);
                err_tail.push('\n');
            }
            _ => {}
        }
    }
    a.stderr_tail = stderr_tail.trim_end().to_string();
    let at = |n: &str| stamps.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    if let (Some(x), Some(y)) = (at("materialize"), at("run")) {
        phases.insert(
            "materialize".into(),
            serde_json::json!(secs(Duration::from_secs_f64((y - x).max(0.0)))),
        );
    }
    let suite_secs = match (at("run"), at("collect")) {
        (Some(x), Some(y)) => Some((y - x).max(0.0)),
        _ => None,
    };
    if let Some(s) = suite_secs {
        phases.insert(
            "run".into(),
            serde_json::json!(secs(Duration::from_secs_f64(s))),
        );
        a.run_time = Duration::from_secs_f64(s);
    }

    let word = |k: &str| -> Option<String> {
        status
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    let cleanup = |t: &Transport| {
        let t = t.clone();
        let run_dir = run_dir.clone();
        async move {
            let _ = t
                .exec(&strs(&["rm", "-rf", &run_dir]), CONTROL_TIMEOUT)
                .await;
        }
    };
    let head = status.split_whitespace().next().unwrap_or("");
    if head != "done" {
        cleanup(t).await;
        let rest = status
            .split_once(' ')
            .map(|x| x.1)
            .unwrap_or("")
            .to_string();
        return Err(match head {
            "provision-conflict" | "provision-failed" => Failure::Refused(
                DispatchError::ProvisionConflict {
                    machine: id.to_string(),
                    detail: rest,
                }
                .into(),
            ),
            "submodule-missing" => {
                let (c, p) = rest.split_once(' ').unwrap_or((&rest, ""));
                DispatchFault::new("submodule-missing", format!("submodule {p} at commit {c} is not available on {id} (no network is used; its objects were not shipped) — the SHA was not measured")).into()
            }
            "lock-timeout" => DispatchFault::new(
                "lock-timeout",
                format!(
                    "another run held the repository's lock on {id} for {}s",
                    LOCK_WAIT.as_secs()
                ),
            )
            .into(),
            "" => DispatchFault::new(
                "connection-lost",
                format!(
                    "the session on {id} ended without a status ({:?}): {}",
                    out.status,
                    out.stderr_str()
                ),
            )
            .into(),
            _ => DispatchFault::new(
                "materialize-failed",
                format!("{status}: {}", err_tail.trim()),
            )
            .into(),
        });
    }
    let rc: i32 = word("rc").and_then(|v| v.parse().ok()).unwrap_or(-1);
    let timed_out = word("timedout").as_deref() == Some("1");
    let crash = word("crash").as_deref() == Some("1");
    let stdout_bytes: u64 = word("stdout_bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let reports = word("reports").unwrap_or_else(|| "none".into());

    let stdout_path = local.path().join("stdout");
    let root = local.path().join("tree");
    std::fs::create_dir_all(&root)
        .map_err(|e| DispatchFault::new("collect-failed", format!("temp dir: {e}")))?;
    let mut collect_note = None;
    if stdout_bytes > COLLECT_LIMIT {
        collect_note = Some(format!(
            "collect-bound: the suite's stdout on {id} is {stdout_bytes} bytes, over the {COLLECT_LIMIT}-byte bound; it was not brought back"
        ));
        let _ = std::fs::write(&stdout_path, b"");
    }
    if reports == "tar" {
        let tar = local.path().join("reports.tar");
        t.get(&format!("{run_dir}/reports.tar"), &tar)
            .await
            .map_err(DispatchFault::transport)?;
        let x = exec::run(
            Cmd::new("tar")
                .arg("-xf")
                .arg(&tar)
                .arg("-C")
                .arg(&root)
                .timeout(CONTROL_TIMEOUT),
        )
        .await;
        if !x.as_ref().is_ok_and(|o| o.status.success()) {
            collect_note = Some(format!(
                "collect-failed: the report files from {id} could not be unpacked"
            ));
        }
    } else if let Some(big) = reports.strip_prefix("too-big-") {
        collect_note = Some(format!(
            "collect-bound: the report files on {id} take {big}, over the {COLLECT_LIMIT}-byte bound; they were not brought back"
        ));
    }
    if job.affected.is_some() {
        // No scope file is an answer the affected engine judges, not a fault.
        let _ = t
            .get(
                &format!("{run_dir}/scope.json"),
                &local.path().join("scope.json"),
            )
            .await;
    }
    // stdout comes back with the removal of the run dir: one round trip.
    let last = t
        .exec(
            &strs(&[
                "sh",
                "-c",
                r#"if [ "$2" = yes ]; then cat "$1/stdout" || exit 1; fi; rm -rf "$1""#,
                "saphan-collect",
                &run_dir,
                if stdout_bytes > COLLECT_LIMIT {
                    "no"
                } else {
                    "yes"
                },
            ]),
            CONTROL_TIMEOUT,
        )
        .await
        .map_err(DispatchFault::transport)?;
    if stdout_bytes <= COLLECT_LIMIT {
        if !last.status.success() {
            return Err(DispatchFault::new(
                "collect-failed",
                format!("reading stdout on {id}: {}", last.stderr_str()),
            )
            .into());
        }
        std::fs::write(&stdout_path, &last.stdout).map_err(|e| {
            DispatchFault::new(
                "collect-failed",
                format!("writing {}: {e}", stdout_path.display()),
            )
        })?;
    }
    phases.insert(
        "collect".into(),
        serde_json::json!(secs(t_collect.elapsed())),
    );

    let termination = if a.interrupted {
        None
    } else if timed_out {
        Some(Termination::TimedOut)
    } else if rc > 128 && rc < 128 + 65 {
        Some(Termination::Signaled(rc - 128))
    } else {
        Some(Termination::Exited(rc))
    };
    a.termination = termination;
    a.measurement = if a.interrupted {
        Measurement::failed(
            "interrupted: the operator pressed Ctrl-C; the suite's process group on the machine was killed and its tree removed",
        )
    } else if crash {
        Measurement::failed(format!(
            "crash: the suite's program `{}` could not be started on {id}",
            run_argv[0]
        ))
    } else if let Some(n) = collect_note {
        Measurement::failed(n)
    } else {
        let scope = match &job.suite.source {
            crate::suite::SuiteSource::Config(scope) => scope,
            crate::suite::SuiteSource::DefaultGo => "verify.full",
        };
        let key = if job.affected.is_some() {
            format!("{scope}.report_path (relative to SAPHAN_AFFECTED_REPORT_DIR)")
        } else {
            format!("{scope}.report_path")
        };
        let ev = Evidence {
            kind: job.suite.report,
            termination: termination.unwrap_or(Termination::Exited(rc)),
            stdout: &stdout_path,
            report_root: &root,
            report_path: job.suite.report_path.as_deref(),
            report_path_key: &key,
        };
        let ev_owned = (
            ev.kind,
            ev.termination,
            stdout_path.clone(),
            root.clone(),
            job.suite.report_path.clone(),
            key.clone(),
        );
        // Parsing a big report is blocking work: off the runtime.
        tokio::task::spawn_blocking(move || {
            let (kind, termination, stdout, root, rp, key) = ev_owned;
            report::measure(&Evidence {
                kind,
                termination,
                stdout: &stdout,
                report_root: &root,
                report_path: rp.as_deref(),
                report_path_key: &key,
            })
        })
        .await
        .unwrap_or_else(|e| Measurement::failed(format!("crash: parsing the report panicked: {e}")))
    };
    a.local = Some(local);
    Ok(())
}

/// Every machine's attempt of one invocation, and what the pointer did.
#[derive(Debug, Clone)]
pub struct Multi {
    /// One run per machine, in the order named.
    pub runs: Vec<MachineRun>,
    /// Where the records were appended.
    pub attempts: std::path::PathBuf,
    /// What happened to the verified pointer.
    pub pointer: String,
    /// `green on m0, red on m1` when the machines disagree.
    pub disagreement: Option<String>,
}

impl Multi {
    /// The worst outcome: measurement-failed (3) > red (1) > green (0).
    pub fn exit(&self) -> Exit {
        let rank = |v: Verdict| match v {
            Verdict::Green => 0,
            Verdict::Red => 1,
            Verdict::MeasurementFailed => 2,
        };
        self.runs
            .iter()
            .map(|r| r.record.verdict)
            .max_by_key(|v| rank(*v))
            .map(|v| v.exit())
            .unwrap_or(Exit::Ok)
    }
}

/// `green on m0, red on m1` when the verdicts differ, else `None`.
pub fn disagreement(runs: &[MachineRun]) -> Option<String> {
    let first = runs.first()?.record.verdict;
    if runs.iter().all(|r| r.record.verdict == first) {
        return None;
    }
    let mut groups: Vec<(Verdict, Vec<&str>)> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|(v, _)| *v == r.record.verdict) {
            Some((_, ms)) => ms.push(&r.record.machine),
            None => groups.push((r.record.verdict, vec![&r.record.machine])),
        }
    }
    Some(
        groups
            .iter()
            .map(|(v, ms)| format!("{} on {}", v.as_str(), ms.join(", ")))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// Plain progress lines on stderr (no terminal), or one indicatif line per
/// machine.
pub struct Lines {
    bars: Vec<(String, indicatif::ProgressBar)>,
    start: Instant,
}

impl Lines {
    /// One line per machine in `ids`; indicatif when stderr is a terminal
    /// and `quiet` is false, plain lines otherwise (none when `quiet`).
    pub fn new(ids: &[String], quiet: bool) -> Lines {
        use std::io::IsTerminal;
        let mut bars = Vec::new();
        if !quiet && std::io::stderr().is_terminal() {
            let mp = indicatif::MultiProgress::new();
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} {prefix:.bold} {msg} ({elapsed})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            let w = ids.iter().map(String::len).max().unwrap_or(0);
            for id in ids {
                let pb = mp.add(indicatif::ProgressBar::new_spinner());
                pb.set_style(style.clone());
                pb.set_prefix(format!("{id:w$}"));
                pb.enable_steady_tick(Duration::from_millis(120));
                bars.push((id.clone(), pb));
            }
        }
        Lines {
            bars,
            start: Instant::now(),
        }
    }
    /// Finish every line.
    pub fn finish(&self) {
        for (_, pb) in &self.bars {
            pb.finish();
        }
    }
}

impl Progress for Lines {
    fn phase(&self, machine: &str, what: &str) {
        match self.bars.iter().find(|(id, _)| id == machine) {
            Some((_, pb)) => {
                if what.starts_with("done") {
                    pb.finish_with_message(what.to_string());
                } else {
                    pb.set_message(what.to_string());
                }
            }
            None if self.bars.is_empty() => {
                let e = self.start.elapsed().as_secs();
                eprintln!("{machine}: {what} ({:02}:{:02})", e / 60, e % 60);
            }
            None => {}
        }
    }
}

/// No progress output.
pub struct Silent;
impl Progress for Silent {
    fn phase(&self, _: &str, _: &str) {}
}

/// Dispatch `job` to every admitted machine concurrently, append one record
/// each, and move the verified pointer only when every machine is green for
/// the SHA in this invocation.
pub async fn run_all(
    job: &Job<'_>,
    admitted: &[Admitted],
    trunk: Option<&str>,
    executor: &dyn Executor,
    progress: &dyn Progress,
) -> Result<Multi> {
    // Connect everywhere first: a program resolved on a machine is refused
    // before anything is shipped anywhere.
    let mut conns = Vec::new();
    for m in admitted {
        progress.phase(&m.row.id, "connect");
    }
    let connected = futures_util::future::join_all(admitted.iter().map(|m| async move {
        let t0 = Instant::now();
        let c = connect(job.home, m).await;
        (c, t0.elapsed())
    }))
    .await;
    for (c, d) in connected {
        conns.push((c?, d));
    }
    let runs = futures_util::future::join_all(
        admitted
            .iter()
            .zip(conns)
            .map(|(m, (c, d))| run_on(job, m, c, d, executor, progress)),
    )
    .await;
    let mut out = Vec::new();
    let mut refused = None;
    for r in runs {
        match r {
            Ok(r) => out.push(r),
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    let attempts = crate::record::attempts_path(job.repo);
    let all_green = !out.is_empty() && out.iter().all(|r| r.record.verdict == Verdict::Green);
    let any_zero = out
        .iter()
        .any(|r| r.record.count == crate::record::Avail::Value(0));
    let disagreement = disagreement(&out);
    let pointer = if all_green && any_zero {
        "unchanged: the suite ran 0 tests on some machine — a green that tested nothing does not verify the SHA".to_string()
    } else if all_green {
        crate::record::advance_verified(job.repo, job.sha, trunk).await?
    } else {
        match &disagreement {
            Some(d) => format!("unchanged: the machines disagree ({d})"),
            None => format!("unchanged: {} is not green on every named machine", job.sha),
        }
    };
    for r in &mut out {
        let mut rec = r.record.clone();
        if let Some(t) = trunk {
            rec.extra.insert("trunk".into(), serde_json::json!(t));
        }
        rec.extra.insert(
            "dispatch_machines".into(),
            serde_json::json!(
                admitted
                    .iter()
                    .map(|m| m.row.id.clone())
                    .collect::<Vec<_>>()
            ),
        );
        let attempts = attempts.clone();
        let line = rec.clone();
        tokio::task::spawn_blocking(move || crate::record::append(&attempts, &line))
            .await
            .map_err(|e| crate::error::IoError::Io {
                action: "append the record",
                path: std::path::PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })??;
        r.record = rec;
    }
    Ok(Multi {
        runs: out,
        attempts,
        pointer,
        disagreement,
    })
}

/// Admit every machine in `ids` for `suite`, from the ledger only.
pub fn admit_all(
    home: &Home,
    catalog: &crate::catalog::Catalog,
    ids: &[String],
    suite: &ResolvedSuite,
) -> Result<Vec<Admitted>> {
    let machines = crate::fleet::machines::Machines::load(home)?;
    let rows: Vec<MachineRow> = machines.select(home, ids)?;
    let ledger = crate::fleet::ledger::Ledger::open(home)?;
    let window = crate::fleet::freshness_window(home)?;
    let now = time::OffsetDateTime::now_utc();
    rows.iter()
        .map(|r| admit::admit(home, catalog, &ledger, window, r, suite, now))
        .collect()
}

/// Refuse unless the machine's *measured* os/arch are this build's, so the
/// running binary can be shipped there (`saphan-binary-unavailable`).
pub fn require_same_platform(m: &Admitted) -> Result<()> {
    let norm = |a: &str| match a {
        "arm64" => "aarch64".to_string(),
        "amd64" => "x86_64".to_string(),
        a => a.to_ascii_lowercase(),
    };
    let local_os = std::env::consts::OS;
    let local_arch = std::env::consts::ARCH;
    if m.os.eq_ignore_ascii_case(local_os) && norm(&m.arch) == norm(local_arch) {
        return Ok(());
    }
    Err(DispatchError::PlatformMismatch {
        machine: m.row.id.clone(),
        os: m.os.clone(),
        arch: m.arch.clone(),
        local_os: local_os.into(),
        local_arch: local_arch.into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::machines::TransportKind;

    fn admitted(os: &str, arch: &str) -> Admitted {
        Admitted {
            row: MachineRow {
                id: "m9".into(),
                transport: TransportKind::Ssh,
                host: "m9".into(),
                workhome: "/srv".into(),
            },
            argv: vec!["saphan".into()],
            capability: None,
            program_path: None,
            program_version: None,
            os: os.into(),
            arch: arch.into(),
        }
    }

    #[test]
    fn the_binary_ships_only_to_the_measured_platform_of_this_build() {
        let e = require_same_platform(&admitted("Darwin", "arm64")).unwrap_err();
        assert_eq!(e.name(), "saphan-binary-unavailable");
        assert!(e.line().contains("Darwin/arm64"), "{}", e.line());
        let here = admitted(std::env::consts::OS, std::env::consts::ARCH);
        assert!(require_same_platform(&here).is_ok());
    }

    #[test]
    fn report_prefixes() {
        assert_eq!(report_prefix("build/reports/*.xml"), "build/reports");
        assert_eq!(report_prefix("*.xml"), ".");
        assert_eq!(report_prefix("out/junit.xml"), "out");
        assert_eq!(report_prefix("a/**/b/*.xml"), "a");
    }
}
