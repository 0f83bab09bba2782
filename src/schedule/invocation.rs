//! What one invocation over fleet machines did ([`Certified`], [`Multi`]:
//! a record per machine, the pointer, a split's union), and the plain
//! policy of a named list: [`every_named`] — every named machine runs the
//! whole suite and answers for itself; the pointer moves only when every
//! one is green.

use crate::error::{Exit, Result};
use crate::measure::Executor;
use crate::measure::bench::{Bench, Measured};
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::pipeline::{Job, Outcome, package_ends, record_of};
use crate::record::{self, Record};
use crate::report::Verdict;
use std::path::PathBuf;

/// One machine's attempt, recorded.
#[derive(Debug, Clone)]
pub struct MachineRun {
    /// The record (as appended).
    pub record: Record,
    /// The last lines of the suite's stderr on the machine.
    pub stderr_tail: String,
    /// What each failing test wrote, bounded ([`crate::report::TestOutput`]).
    pub test_output: Vec<crate::report::TestOutput>,
    /// Failing tests whose output was not kept (past the cap).
    pub test_output_omitted: u64,
    /// Every test the report says ended (`--junit`); empty for an attempt
    /// whose suite never ran or that a failover superseded.
    pub tests: crate::report::Tests,
}

/// Every machine's attempt of one invocation, and what the pointer did.
#[derive(Debug, Clone)]
pub struct Multi {
    /// One run per machine, in the order named.
    pub runs: Vec<MachineRun>,
    /// Where the records were appended.
    pub attempts: PathBuf,
    /// What happened to the verified pointer.
    pub pointer: record::PointerOutcome,
    /// `green on m0, red on m1` when the machines disagree.
    pub disagreement: Option<String>,
    /// `certify --split`: the verdict over the shards' union.
    pub split: Option<Box<SplitOutcome>>,
    /// Container class: containers the sweep after the run could not
    /// remove (the CLI shows each as a warning).
    pub remain: Vec<crate::docker::container::ContainersRemain>,
    /// `--machine @admitted`: machines whose attempt ended in an
    /// infrastructure failure while another machine answered — recorded,
    /// but left out of the verdict (a named list never leaves one out).
    pub left_out: Vec<LeftOut>,
    /// `--machine @POOL`: the nodes borrowed from the Slurm cluster for
    /// this invocation, and how they were given back.
    pub borrowed: Option<Borrowed>,
    /// `--machine @admitted`: which machines were chosen, and which left
    /// out before anything ran.
    pub selection: Option<crate::dispatch::admit::Selection>,
    /// The pointer's first move along a trunk it now follows for good
    /// (set by the verb when this invocation moved it first).
    pub first_follow: Option<record::trunk::FirstFollow>,
}

/// What one invocation borrowed from a Slurm pool ([`Multi::borrowed`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Borrowed {
    /// The pool (`[pool.NAME]`).
    pub pool: String,
    /// The allocation's job id.
    pub job: u64,
    /// The nodes granted, in Slurm's order.
    pub nodes: Vec<String>,
    /// Nodes of the partition not borrowed because they are not admitted
    /// (each with its refusal and remedy).
    pub left_out: Vec<crate::dispatch::admit::Refused>,
    /// Nodes of the partition Slurm cannot lend now (`n1 (down)`): not
    /// asked for.
    pub unusable: Vec<String>,
    /// How many nodes were asked for (`--nodes`, or the pool's `nodes`);
    /// fewer are borrowed when fewer are admitted.
    pub asked: u32,
    /// Allocations of an earlier saphan that died, cancelled first (one
    /// line each).
    pub swept: Vec<String>,
    /// How the allocation was given back: `released job 12 (0.02 s)`, or
    /// why it could not be (with the command that releases it).
    pub released: String,
    /// Whether the release failed.
    pub release_failed: bool,
}

/// A machine left out of an `@admitted` verdict, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeftOut {
    /// The machine.
    pub machine: String,
    /// Its attempt's failure (an infrastructure kind).
    pub failure: crate::report::FailureKind,
    /// Its attempt's record id.
    pub id: String,
}

/// The verdict of a `certify --split` invocation over its shards.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SplitOutcome {
    /// Green only when every shard is green and coverage is complete.
    pub verdict: Verdict,
    /// Why it failed, when it is measurement-failed (the first failing
    /// shard's kind).
    pub failure: Option<crate::report::FailureKind>,
    /// The sum of the shards' counts (`None` when some shard's is unavailable).
    pub count: Option<u64>,
    /// The union of the shards' failing tests, in shard order.
    pub named_tests: Vec<String>,
    /// Every shard's notes, each prefixed with its machine.
    pub notes: Vec<String>,
    /// How many shards ran.
    pub shards: usize,
    /// The coverage proof (go-test-json suites); `None` when advisory.
    pub coverage: Option<super::Coverage>,
    /// Why the result is advisory (a suite saphan cannot split itself).
    pub advisory: Option<String>,
}

impl Multi {
    /// The worst outcome: measurement-failed (3) > red (1) > green (0),
    /// over the effective attempts (an attempt a failover re-ran is
    /// superseded by its re-run); with `--split`, the split's verdict.
    pub fn exit(&self) -> Exit {
        if let Some(s) = &self.split {
            return s.verdict.exit();
        }
        let rank = |v: Verdict| match v {
            Verdict::Green => 0,
            Verdict::Red => 1,
            Verdict::MeasurementFailed => 2,
        };
        self.effective()
            .map(|r| r.verdict)
            .max_by_key(|v| rank(*v))
            .map(|v| v.exit())
            .unwrap_or(Exit::Ok)
    }

    /// The records the verdict is over: neither superseded by a failover's
    /// re-run nor left out (`@admitted`).
    pub fn effective(&self) -> impl Iterator<Item = &Record> {
        // An attempt another one re-ran (failover) is superseded by it.
        let superseded = |id: &str| {
            self.runs
                .iter()
                .any(|r| r.record.retry_of.as_deref() == Some(id))
        };
        self.runs
            .iter()
            .map(|r| &r.record)
            .filter(move |r| !superseded(&r.id) && !self.left_out.iter().any(|l| l.id == r.id))
    }

    /// The machines that certified the SHA — those of the effective
    /// records, each once, in order — when the pointer moved; empty
    /// otherwise.
    pub fn certified_by(&self) -> Vec<String> {
        let mut by: Vec<String> = Vec::new();
        if self.pointer.moved() {
            for r in self.effective() {
                if !by.contains(&r.machine) {
                    by.push(r.machine.clone());
                }
            }
        }
        by
    }
}

/// What one certify invocation did: on this machine, or on named machines.
#[derive(Debug, Clone)]
pub enum Certified {
    /// Without `--machine`: this machine's one record.
    Here(Box<Outcome>),
    /// With `--machine`: one record per machine.
    Machines(Box<Multi>),
}

/// A bench per fleet machine, all at once: connect everywhere first (a
/// program resolved on a machine is refused before anything is shipped
/// anywhere), then every machine's attempt, one record each; the pointer
/// moves only when every machine is green.
pub async fn every_named(
    job: &Job<'_>,
    admitted: &[crate::dispatch::Admitted],
    executor: &(dyn Executor + '_),
) -> Result<Certified> {
    let trunk = job.trunk;
    let mut benches = crate::dispatch::FleetBench::connect_all(job, admitted).await?;
    let runs = futures_util::future::join_all(benches.iter_mut().map(|b| {
        let machine = b.machine().to_string();
        async move {
            // Machines of one invocation may share an engine: each gets its own.
            let executor = executor.for_machine(&machine);
            let m = b.measure(job, executor.as_ref()).await;
            (m, executor.class())
        }
    }));
    // Which packages have test files, listed as a split lists them, while
    // the machines run: a package that ends `skip` on a machine did not
    // run the tests the listing found.
    let (results, listing) = tokio::join!(runs, tested_listing(job, admitted, executor));
    executor.settle().await;
    let ids: Vec<String> = admitted.iter().map(|m| m.row.id.clone()).collect();
    let mut runs = Vec::new();
    let mut refused = None;
    for ((m, class), b) in results.into_iter().zip(&benches) {
        match m {
            Ok(measured) => runs.push(MachineRun {
                record: {
                    let mut r = record_of(
                        job,
                        b.machine(),
                        class,
                        &measured,
                        Scope::Machines,
                        trunk,
                        &ids,
                    );
                    if let Some(l) = &listing {
                        untested(&mut r, &measured, l);
                    }
                    r
                },
                stderr_tail: measured.run.stderr_tail,
                test_output: measured.run.measurement.test_output,
                test_output_omitted: measured.run.measurement.test_output_omitted,
                tests: measured.run.measurement.tests,
            }),
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    let records: Vec<Record> = runs.iter().map(|r| r.record.clone()).collect();
    // Every record first, then the pointer: under the repository's lock,
    // compare-and-swap, only forward along the trunk.
    let pointer = conclude::conclude(
        job.repo,
        job.sha,
        trunk,
        &records,
        Scope::Machines,
        LockHold::Take(job.waiter()),
    )
    .await?;
    Ok(Certified::Machines(Box::new(Multi {
        disagreement: conclude::disagreement(&records),
        runs,
        attempts: record::attempts_path(job.repo),
        pointer,
        split: None,
        remain: Vec::new(),
        left_out: Vec::new(),
        borrowed: None,
        selection: None,
        first_follow: None,
    })))
}

/// The listing of an unsplit go-test-json run on fleet machines (host
/// class, `go test … ./...`): `super::list_packages` with this
/// machine's `go`, as `certify --split` lists, so the packages with test
/// files are known. `None` when the suite is no such run, or the listing
/// cannot be made here (no `go`, another version than the machines') —
/// the check is then not made (docs/dispatch.md).
async fn tested_listing(
    job: &Job<'_>,
    admitted: &[crate::dispatch::Admitted],
    executor: &dyn Executor,
) -> Option<super::Listing> {
    let first = admitted.first()?;
    if executor.class() != "host" || job.suite.report != crate::report::ReportKind::GoTestJson {
        return None;
    }
    let at = super::go_split_at(&first.argv)?;
    if admitted
        .iter()
        .any(|a| super::go_split_at(&a.argv) != Some(at))
    {
        return None;
    }
    let versions: Vec<(String, Option<String>)> = admitted
        .iter()
        .map(|a| (a.row.id.clone(), a.program_version.clone()))
        .collect();
    let go = super::local_go(&versions).await.ok()?;
    super::list_packages(
        job.home,
        job.repo,
        job.sha,
        &first.argv,
        job.extra_env,
        &go,
        job.interrupt,
    )
    .await
    .ok()
}

/// Mark `r`, the record of an unsplit run `m`, when its stream ended `skip`
/// (no test files) a package the listing found test files in: its tests
/// never ran there (the machine's own `GOFLAGS` tags, a build constraint
/// of its platform). A green becomes measurement-failed,
/// `tests-never-ran`; any verdict gets the note naming the packages.
fn untested(r: &mut Record, m: &Measured, listing: &super::Listing) {
    let mut skipped: Vec<String> = package_ends(m)
        .into_iter()
        .filter(|e| e.action == "skip" && listing.tested.contains(&e.package))
        .map(|e| e.package)
        .collect();
    skipped.sort();
    skipped.dedup();
    if skipped.is_empty() {
        return;
    }
    let kind = crate::report::FailureKind::TestsNeverRan;
    r.notes.push(format!(
        "{kind}: {} package(s) have test files at the SHA but ended `skip` (no test files) on {}, so their tests never ran: {} — the machine's own environment dropped them (its `go env GOFLAGS` tags, a build constraint of its platform)",
        skipped.len(),
        r.machine,
        skipped.join(", ")
    ));
    if r.verdict == crate::report::Verdict::Green {
        r.verdict = crate::report::Verdict::MeasurementFailed;
        r.failure = Some(kind);
    }
}
