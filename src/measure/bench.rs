//! Benches: where one machine's attempt is set up and measured. Two kinds,
//! one shape (DESIGN §6b):
//!
//! - **this machine** ([`LocalBench`]): the repository's lock
//!   ([`record::Lock`], held for the whole attempt) and the repository's one
//!   stable scratch path ([`scratch_path`]) — certify, verify-union,
//!   verify-stream and verify-affected all measure here;
//! - **a fleet machine** ([`crate::dispatch::FleetBench`]): ship the commits
//!   the machine's mirror lacks, the machine's lock, the scratch tree under
//!   its workhome. A `transport = "local"` row is a fleet machine like any
//!   other.
//!
//! Both run the suite through the one core ([`super::run_suite_with`]) and
//! give back a [`Measured`], which [`super::pipeline`] turns into records
//! and [`super::conclude`] appends before it moves the pointer.

use crate::error::Result;
use crate::git::Repo;
use crate::home::Home;
use crate::measure::pipeline::Job;
use crate::measure::progress::{Event, Progress};
use crate::measure::{Executor, Interrupt, Plan, SealPlan, SuiteRun};
use crate::record;
use crate::worktree::Scratch;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

/// The one scratch worktree path of `repo` (keyed by its git common dir,
/// so every worktree of one repository shares it):
/// `SAPHAN_HOME/scratch/<16 hex>/tree`. Only a holder of the repository
/// lock ([`record::Lock`]) may check out there — a [`LocalBench`] holds it
/// — so one measurement at a time uses it: a fresh detached checkout every
/// attempt, but at the same directory, which keeps directory-keyed build
/// caches (Go's) warm across attempts and across the measuring verbs.
pub fn scratch_path(home: &Home, repo: &Repo) -> PathBuf {
    home.scratch(&repo_key(repo))
}

/// The repository key (16 hex of the sha256 of its git common dir): this
/// machine's scratch path and a fleet machine's mirror and tree use it.
pub fn repo_key(repo: &Repo) -> String {
    let key = crate::fsutil::sha256_hex(repo.common_dir.as_os_str().as_encoded_bytes());
    key[..16].to_string()
}

/// This machine's seal for one attempt ([`SealPlan`]): `mode` (from
/// `source`), bwrap as [`crate::seal::local`] found it, and the build
/// caches of `trust` in `SAPHAN_HOME/cache/<trust>` (made when missing).
///
/// Errors: [`crate::error::IoError`] when the cache directory cannot be
/// made.
pub fn local_seal(
    home: &Home,
    mode: crate::seal::Mode,
    source: &str,
    trust: crate::seal::Trust,
) -> Result<SealPlan> {
    let dir = home.cache(trust);
    std::fs::create_dir_all(&dir).map_err(|source| crate::error::IoError::Io {
        action: "create the build cache directory",
        path: dir.clone(),
        source,
    })?;
    Ok(SealPlan::here(mode, source).caches(Some(dir)))
}

/// This machine's bench: the repository lock, held until dropped, and the
/// stable scratch path.
#[derive(Debug)]
pub struct LocalBench {
    repo: Repo,
    path: PathBuf,
    lock: record::Lock,
}

impl LocalBench {
    /// Take `repo`'s lock for `verb` (waiting for any other holder, off the
    /// runtime; while it waits, `progress` hears [`Event::Waiting`] for
    /// `local` at once and every [`record::wait::NOTE_EVERY`]).
    ///
    /// Errors: `interrupted` (Ctrl-C, SIGTERM or SIGHUP while waiting:
    /// nothing measured, nothing written), an I/O failure opening the lock.
    pub async fn open(
        home: &Home,
        repo: &Repo,
        interrupt: &Interrupt,
        verb: &str,
        progress: &dyn Progress,
    ) -> Result<LocalBench> {
        let lock = record::Lock::acquire(repo, interrupt, verb, &|wait| {
            progress.event("local", &Event::Waiting { wait })
        })
        .await?;
        Ok(LocalBench {
            repo: repo.clone(),
            path: scratch_path(home, repo),
            lock,
        })
    }

    /// The repository lock this bench holds (for [`super::conclude`]).
    pub fn lock(&self) -> &record::Lock {
        &self.lock
    }

    /// The stable scratch path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A fresh detached checkout of `sha` at the stable scratch path,
    /// healing what an earlier attempt left there.
    ///
    /// Errors: git failures, `leftover-alive`.
    pub async fn checkout(&self, sha: &str) -> Result<Scratch> {
        let here = crate::transport::Transport::Local(Default::default());
        Ok(
            crate::worktree::add_at_with(&here, &self.repo.top, &self.path, sha, Some(&self.repo))
                .await?,
        )
    }
}

/// What a bench's attempt left, before it becomes a record
/// ([`super::pipeline::record_of`]).
#[derive(Debug)]
pub struct Measured {
    /// The run, as the core describes it.
    pub run: SuiteRun,
    /// What ran (argv as the machine ran it).
    pub argv: Vec<String>,
    /// Notes to add to the record (`reaped: …`).
    pub notes: Vec<String>,
    /// What a fleet machine's bench adds to the record; `None` here.
    pub fleet: Option<Shipped>,
    /// Local copies a fleet machine brought back (`stdout`, `tree/`,
    /// `scope.json`); `None` when nothing was brought back.
    pub local: Option<tempfile::TempDir>,
    /// This machine's bench only: the verified pointer and the trunk's tip
    /// ([`Job::trunk`]) read under the bench's lock once the suite ended
    /// (the pointer as it was before the suite: one the suite moved is
    /// put back), for the pointer's first judgement; `None` on a fleet
    /// machine.
    pub pointer: Option<record::PointerRead>,
}

/// What a fleet machine's attempt adds to its record.
#[derive(Debug, Clone)]
pub struct Shipped {
    /// The capability row the program was admitted by (`go`, `docker-oci`),
    /// if any.
    pub capability: Option<String>,
    /// The program's path on the machine.
    pub program_path: String,
    /// Its version output, from the capability row.
    pub program_version: Option<String>,
    /// Bundle bytes shipped.
    pub bundle_bytes: u64,
    /// Seconds per phase (`connect`, `ship`, `materialize`, `run`, `collect`).
    pub phases: crate::record::Phases,
    /// The scratch tree path on the machine.
    pub remote_tree: String,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
    /// A borrowed Slurm node: the allocation's job id.
    pub slurm_job: Option<u64>,
}

/// The boxed future a [`Bench`] returns.
pub type BenchFuture<'a> = Pin<Box<dyn Future<Output = Result<Measured>> + Send + 'a>>;

/// One machine of an invocation: set up the tree at the SHA, run the
/// suite through `executor`, collect, and remove the tree on every path.
pub trait Bench: Send {
    /// The record's `machine`: `local`, or the fleet id.
    fn machine(&self) -> &str;
    /// Measure `job` on this bench (once). This machine's bench gives the
    /// core's errors back; a fleet machine's makes every outcome after
    /// admission a [`Measured`] (a failed measurement naming its cause)
    /// except refusals found on the machine before the suite ran.
    fn measure<'a>(&'a mut self, job: &'a Job<'a>, executor: &'a dyn Executor) -> BenchFuture<'a>;
}

impl Bench for LocalBench {
    fn machine(&self) -> &str {
        "local"
    }
    fn measure<'a>(&'a mut self, job: &'a Job<'a>, executor: &'a dyn Executor) -> BenchFuture<'a> {
        Box::pin(async move {
            // The affected tier's protocol files: a run dir here, as a fleet
            // machine's bench makes one there (`@RUN@` in the environment).
            let run_dir = match job.affected {
                None => None,
                Some(manifest) => Some(affected_run_dir(manifest)?),
            };
            let at = |d: &tempfile::TempDir, name: &str| d.path().join(name);
            let env: Vec<(String, String)> = match &run_dir {
                None => job.extra_env.to_vec(),
                Some(d) => job
                    .extra_env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.replace("@RUN@", &d.path().to_string_lossy())))
                    .collect(),
            };
            let reports = run_dir.as_ref().map(|d| at(d, "reports"));
            let keep = run_dir.as_ref().map(|d| at(d, "stdout"));
            // A certify attempt keeps its suite log beside its record; the
            // affected tier saves no record, so it keeps no log here.
            let log_dir = job.affected.is_none().then(|| super::log_dir(job.repo));
            // The scratch tree shares the repository's refs and git dir, so
            // a suite can move the pointer (or rewrite the trunk it follows)
            // itself: both are read under the lock while the tree is checked
            // out, and again while it is removed.
            // The same read gives the trunk's tip: certifying the tip itself
            // (the usual case) needs no ancestry question for its caches.
            let (scratch, before) = tokio::join!(
                self.checkout(job.sha),
                record::read_pointer(&self.repo, job.trunk)
            );
            let scratch = scratch?;
            let before = match before {
                Ok(read) => super::guard::Guarded::of(&self.repo, read),
                Err(e) => {
                    let _ = scratch.remove().await;
                    return Err(e.into());
                }
            };
            let trust = match (job.trust, &before.read.tip) {
                (Some(t), _) => t,
                (None, Some(tip)) if tip == job.sha => crate::seal::Trust::Trunk,
                (None, _) => super::trust_of(job.repo, job.sha, job.trunk).await,
            };
            job.progress.event(
                "local",
                &Event::Run {
                    sha: job.sha,
                    argv: &job.suite.argv,
                    budget: job.budget,
                },
            );
            let seal = local_seal(job.home, job.seal.0, job.seal.1, trust)?
                .writable(run_dir.as_ref().map(|d| d.path().to_path_buf()));
            let plan = Plan::new(job.suite, job.budget, job.provisions)
                .seal(Some(&seal))
                .extra_env(&env)
                .report_root(reports.as_deref())
                .keep_stdout(keep.as_deref())
                .log_dir(log_dir.as_deref())
                .catalog(job.catalog)
                .log_deferred();
            let mut run = super::run_suite_with(&scratch, plan, executor, job.interrupt).await;
            // A container is gone (removed on every path) before its tree.
            executor.settle().await;
            // The log is written (and fsynced) while the tree is removed;
            // the record that names it is appended after both.
            let pending = run.as_mut().ok().and_then(|r| r.pending_log.take());
            let (removed, after, log) = tokio::join!(
                scratch.remove(),
                record::read_pointer(&self.repo, job.trunk),
                async {
                    match pending {
                        Some(p) => p.write().await,
                        None => None,
                    }
                }
            );
            if let Ok(run) = run.as_mut()
                && run.log.is_none()
            {
                run.log = log;
            }
            let mut after = after?;
            let changed = before.changes(&super::guard::Guarded::of(&self.repo, after.clone()));
            let mut words = Vec::new();
            for change in &changed {
                words.push(change.put_back(&self.repo, &before).await);
            }
            let mut run = run?;
            removed?;
            if !changed.is_empty() {
                run.measurement = crate::report::Measurement::failed(
                    crate::report::FailureKind::SuiteMovedPointer,
                    format!(
                        "{} — a suite must not write saphan's refs or files",
                        words.join("; ")
                    ),
                );
                // The pointer's judgement is made on what saphan left.
                after.pointer = before.read.pointer.clone();
                after.symref = before.read.symref.clone();
            }
            job.progress.event(
                "local",
                &Event::Done {
                    verdict: run.measurement.verdict,
                },
            );
            Ok(Measured {
                run,
                argv: job.suite.argv.clone(),
                notes: Vec::new(),
                fleet: None,
                local: run_dir,
                pointer: Some(after),
            })
        })
    }
}

/// A fresh local run dir for the affected tier: `manifest.json` (a copy of
/// `manifest`) and an empty `reports/`; the adapter writes `scope.json`
/// there and the suite's stdout is kept as `stdout`.
fn affected_run_dir(manifest: &Path) -> Result<tempfile::TempDir> {
    let io = |action: &'static str, path: PathBuf| {
        move |source: std::io::Error| crate::error::IoError::Io {
            action,
            path,
            source,
        }
    };
    let d = tempfile::Builder::new()
        .prefix("saphan-affected-run-")
        .tempdir()
        .map_err(io("create a temp directory in", std::env::temp_dir()))?;
    let reports = d.path().join("reports");
    std::fs::create_dir(&reports).map_err(io("create", reports.clone()))?;
    let staged = d.path().join("manifest.json");
    std::fs::copy(manifest, &staged).map_err(io("copy the manifest to", staged.clone()))?;
    Ok(d)
}
