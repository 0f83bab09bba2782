//! `certify --split` on the one pipeline: the shards are fleet benches
//! ([`crate::dispatch::FleetBench`]) whose admitted argv is the shard's,
//! their records come from [`pipeline::record_of`], and the pointer moves
//! through [`conclude::conclude`] — only when every shard is green and
//! coverage is proven.

use super::{Coverage, ShardCoverage};
use crate::dispatch::{Admitted, FleetBench};
use crate::error::Result;
use crate::measure::Executor;
use crate::measure::bench::{Bench, Measured};
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::pipeline::{self, Certified, Job, MachineRun, Multi, SplitOutcome};
use crate::measure::progress::Event;
use crate::record::{self, Avail, Record};
use crate::report::{FailureKind, ReportKind, Verdict};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

/// One shard's work: which machine runs it, its packages, its environment.
#[derive(Clone)]
struct Work {
    /// A shard of `--split` (its record carries `shard`); false for a
    /// machine of `@admitted` running the whole suite.
    sharded: bool,
    index: usize,
    count: usize,
    packages: Vec<String>,
    /// The machine's admission with the shard's argv.
    admitted: Admitted,
    /// `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT` (advisory shards) and
    /// the job's own environment.
    env: Vec<(String, String)>,
}

/// A shard's attempt, recorded.
struct Done {
    work: Work,
    measured: Measured,
    record: Record,
}

/// What finished: a first attempt (work index), or a re-run (work index,
/// the machine that re-ran it, the work as re-run).
enum Ev {
    First(usize, Result<(Measured, String)>),
    Retry(usize, usize, Box<Work>, Result<(Measured, String)>),
}

/// The same job with another environment (a shard's).
fn with_env<'a>(job: &Job<'a>, env: &'a [(String, String)]) -> Job<'a> {
    Job {
        home: job.home,
        repo: job.repo,
        sha: job.sha,
        suite: job.suite,
        budget: job.budget,
        provisions: job.provisions,
        submodules: job.submodules,
        verb: job.verb,
        extra_env: env,
        interrupt: job.interrupt,
        affected: job.affected,
        self_binary: job.self_binary,
        catalog: job.catalog,
        progress: job.progress,
    }
}

/// The progress line of a shard: which shard this machine runs.
fn announce(job: &Job<'_>, work: &Work, retry_of: Option<&str>) {
    if work.sharded {
        job.progress.event(
            &work.admitted.row.id,
            &Event::Shard {
                index: work.index,
                count: work.count,
                packages: &work.packages,
                retry_of,
            },
        );
    }
}

/// Run `work` on its machine: connect, then the bench's one attempt.
async fn run_one(
    job: &Job<'_>,
    work: &Work,
    executor: &(dyn Executor + '_),
    retry_of: Option<&str>,
) -> Result<(Measured, String)> {
    let job = with_env(job, &work.env);
    announce(&job, work, retry_of);
    let one = std::slice::from_ref(&work.admitted);
    let mut benches = FleetBench::connect_all(&job, one).await?;
    let b = &mut benches[0];
    let executor = executor.for_machine(b.machine());
    let m = b.measure(&job, executor.as_ref()).await?;
    Ok((m, executor.class().to_string()))
}

/// The record of a shard's attempt.
fn record(
    job: &Job<'_>,
    w: &Work,
    m: &Measured,
    class: &str,
    trunk: Option<&str>,
    ids: &[String],
) -> Record {
    let mut r = pipeline::record_of(
        job,
        &w.admitted.row.id,
        class,
        m,
        Scope::Machines,
        trunk,
        ids,
    );
    if w.sharded {
        r.shard = Some(record::Shard {
            index: w.index,
            count: w.count,
            packages: w.packages.clone(),
        });
    }
    r
}

/// `certify --split` over the admitted machines: list and assign (go-test-json
/// suites saphan can split), or give each shard `SAPHAN_SHARD_INDEX` /
/// `SAPHAN_SHARD_COUNT` (advisory); run every shard on its machine at once;
/// with `failover`, re-run each shard whose attempt ended in an
/// infrastructure failure once on another machine of the invocation (the
/// same one when every other failed too); prove coverage; append every
/// record (superseded attempts first), then conclude over the shards'
/// effective attempts.
///
/// Errors: `split-list-unavailable`, `split-list-failed` (before anything
/// is shipped), the benches' refusals, a record that cannot be appended.
pub async fn split(
    job: &Job<'_>,
    admitted: &[Admitted],
    executor: &(dyn Executor + '_),
    trunk: Option<&str>,
    failover: bool,
) -> Result<Certified> {
    let at = if job.suite.report == ReportKind::GoTestJson {
        admitted
            .first()
            .and_then(|a| super::go_split_at(&a.argv))
            .filter(|at| {
                admitted
                    .iter()
                    .all(|a| super::go_split_at(&a.argv) == Some(*at))
            })
    } else {
        None
    };
    let (works, listed) = match at {
        Some(at) => {
            let versions: Vec<(String, Option<String>)> = admitted
                .iter()
                .map(|a| (a.row.id.clone(), a.program_version.clone()))
                .collect();
            let listed = super::list_packages(
                job.home,
                job.repo,
                job.sha,
                &admitted[0].argv,
                &versions,
                job.interrupt,
            )
            .await?;
            let shards = super::assign(&listed, admitted.len(), &super::history(job.repo));
            let count = shards.len();
            let works: Vec<Work> = shards
                .into_iter()
                .zip(admitted)
                .enumerate()
                .map(|(index, (packages, a))| {
                    let mut adm = a.clone();
                    adm.argv = super::shard_argv(&a.argv, at, &packages);
                    Work {
                        sharded: true,
                        index,
                        count,
                        packages,
                        admitted: adm,
                        env: job.extra_env.to_vec(),
                    }
                })
                .collect();
            (works, Some(listed))
        }
        None => {
            let count = admitted.len();
            let works = admitted
                .iter()
                .enumerate()
                .map(|(index, a)| {
                    let mut env = job.extra_env.to_vec();
                    env.push((super::SHARD_INDEX_ENV.into(), index.to_string()));
                    env.push((super::SHARD_COUNT_ENV.into(), count.to_string()));
                    Work {
                        sharded: true,
                        index,
                        count,
                        packages: Vec::new(),
                        admitted: a.clone(),
                        env,
                    }
                })
                .collect();
            (works, None)
        }
    };
    run_works(job, admitted, works, executor, trunk, failover, at, listed).await
}

/// `--machine @admitted` without `--split`: every admitted machine runs the
/// whole suite (every record must be green, as for a named list), and a
/// machine whose attempt ended in an infrastructure failure has its run
/// re-run once on another machine of the invocation (recorded with
/// `retry_of`; the pointer is judged over the effective attempts).
///
/// Errors: the benches' refusals, a record that cannot be appended.
pub async fn admitted(
    job: &Job<'_>,
    admitted: &[Admitted],
    executor: &(dyn Executor + '_),
    trunk: Option<&str>,
) -> Result<Certified> {
    let count = admitted.len();
    let works = admitted
        .iter()
        .enumerate()
        .map(|(index, a)| Work {
            sharded: false,
            index,
            count,
            packages: Vec::new(),
            admitted: a.clone(),
            env: job.extra_env.to_vec(),
        })
        .collect();
    run_works(job, admitted, works, executor, trunk, true, None, None).await
}

/// Run every work at once, fail over, prove coverage (`listed`), append,
/// conclude.
#[allow(clippy::too_many_arguments)]
async fn run_works(
    job: &Job<'_>,
    admitted: &[Admitted],
    works: Vec<Work>,
    executor: &(dyn Executor + '_),
    trunk: Option<&str>,
    failover: bool,
    at: Option<usize>,
    listed: Option<Vec<String>>,
) -> Result<Certified> {
    let sharded = works.first().is_some_and(|w| w.sharded);
    let ids: Vec<String> = works.iter().map(|w| w.admitted.row.id.clone()).collect();

    // Connect everywhere first (a program resolved on a machine is refused
    // before anything is shipped anywhere), then every work at once, one
    // per machine.
    let adm: Vec<Admitted> = works.iter().map(|w| w.admitted.clone()).collect();
    let mut benches = FleetBench::connect_all(job, &adm).await?;
    let mut running: FuturesUnordered<Pin<Box<dyn Future<Output = Ev> + '_>>> =
        FuturesUnordered::new();
    for (i, (b, w)) in benches.iter_mut().zip(&works).enumerate() {
        running.push(Box::pin(async move {
            let job = with_env(job, &w.env);
            announce(&job, w, None);
            let executor = executor.for_machine(b.machine());
            let r = b
                .measure(&job, executor.as_ref())
                .await
                .map(|m| (m, executor.class().to_string()));
            Ev::First(i, r)
        }));
    }
    let mut done: Vec<Option<Done>> = (0..works.len()).map(|_| None).collect();
    let mut superseded: Vec<Record> = Vec::new();
    // Failover: a machine whose attempt did not fail that way, once it is
    // free, re-runs a failed work at once; when no machine can free up any
    // more, the failed machine re-runs its own.
    let mut free: VecDeque<usize> = VecDeque::new();
    let mut pending: VecDeque<usize> = VecDeque::new();
    let mut first_left = works.len();
    let mut refused: Option<crate::error::Error> = None;
    while let Some(ev) = running.next().await {
        match ev {
            Ev::First(i, r) => {
                first_left -= 1;
                match r {
                    Err(e) => {
                        refused.get_or_insert(e);
                    }
                    Ok((m, class)) => {
                        let rec = record(job, &works[i], &m, &class, trunk, &ids);
                        let infra = failover
                            && rec
                                .failure
                                .as_ref()
                                .is_some_and(FailureKind::is_infrastructure);
                        done[i] = Some(Done {
                            work: works[i].clone(),
                            measured: m,
                            record: rec,
                        });
                        if infra {
                            pending.push_back(i);
                        } else {
                            free.push_back(i);
                        }
                    }
                }
            }
            Ev::Retry(i, t, w, r) => {
                free.push_back(t);
                match r {
                    Err(e) => {
                        refused.get_or_insert(e);
                    }
                    Ok((m, class)) => {
                        let Some(old) = done[i].take() else { continue };
                        let mut rec = record(job, &w, &m, &class, trunk, &ids);
                        rec.retry_of = Some(old.record.id.clone());
                        superseded.push(old.record);
                        done[i] = Some(Done {
                            work: *w,
                            measured: m,
                            record: rec,
                        });
                    }
                }
            }
        }
        if refused.is_some() {
            continue;
        }
        while let Some(&i) = pending.front() {
            let t = match free.pop_front() {
                Some(t) => t,
                None if first_left == 0 && running.is_empty() => i,
                None => break,
            };
            pending.pop_front();
            let Some(d) = done[i].as_ref() else { continue };
            let mut w = d.work.clone();
            let mut adm = works[t].admitted.clone();
            adm.argv = match at {
                Some(at) => super::shard_argv(&admitted[t].argv, at, &w.packages),
                None => admitted[t].argv.clone(),
            };
            w.admitted = adm;
            let id = d.record.id.clone();
            running.push(Box::pin(async move {
                let r = run_one(job, &w, executor, Some(&id)).await;
                Ev::Retry(i, t, Box::new(w), r)
            }));
        }
    }
    drop(running);
    if let Some(e) = refused {
        executor.settle().await;
        return Err(e);
    }
    let mut done: Vec<Done> = done.into_iter().flatten().collect();
    executor.settle().await;

    // Coverage: the shards' package-level terminal events, against the list.
    let coverage: Option<Coverage> = listed.as_ref().map(|listed| {
        let assigned: Vec<Vec<String>> = done.iter().map(|d| d.work.packages.clone()).collect();
        let ends: Vec<Vec<String>> = done
            .iter()
            .map(|d| {
                pipeline::package_ends(&d.measured)
                    .into_iter()
                    .map(|e| e.package)
                    .collect()
            })
            .collect();
        let (c, per) = super::coverage(listed, &assigned, &ends);
        for (d, sc) in done.iter_mut().zip(per) {
            mark_incomplete(&mut d.record, &sc);
        }
        c
    });

    // Every record first (superseded attempts, then the shards'), then the
    // pointer, over the shards' effective attempts.
    let attempts = record::attempts_path(job.repo);
    for r in &superseded {
        record::append_off_runtime(&attempts, r).await?;
    }
    let records: Vec<Record> = done.iter().map(|d| d.record.clone()).collect();
    let scope = match (sharded, coverage.is_some()) {
        (false, _) => Scope::Machines,
        (true, true) => Scope::Split,
        (true, false) => Scope::Advisory,
    };
    let pointer = conclude::conclude(
        job.repo,
        job.sha,
        trunk,
        &records,
        scope,
        LockHold::Take(job.interrupt),
    )
    .await?;
    let outcome = sharded.then(|| Box::new(outcome(&records, coverage, listed.is_none())));
    let disagreement = if sharded {
        None
    } else {
        conclude::disagreement(&records)
    };
    let mut runs: Vec<MachineRun> = superseded
        .into_iter()
        .map(|record| MachineRun {
            record,
            stderr_tail: String::new(),
            test_output: Vec::new(),
            test_output_omitted: 0,
        })
        .collect();
    for d in done {
        runs.push(MachineRun {
            record: d.record,
            stderr_tail: d.measured.run.stderr_tail,
            test_output: d.measured.run.measurement.test_output,
            test_output_omitted: d.measured.run.measurement.test_output_omitted,
        });
    }
    if sharded {
        runs.sort_by_key(|r| {
            (
                r.record.shard.as_ref().map(|s| s.index),
                r.record.retry_of.is_some(),
            )
        });
    }
    Ok(Certified::Machines(Multi {
        runs,
        attempts,
        pointer,
        disagreement,
        split: outcome,
        remain: Vec::new(),
    }))
}

/// A shard that did not end exactly its packages is never green: a green
/// becomes measurement-failed `shard-coverage-incomplete`, and so does a
/// red (the tests it never ran might have failed too); an attempt that
/// already failed keeps its own kind (its stream is cut off by that).
fn mark_incomplete(r: &mut Record, c: &ShardCoverage) {
    if c.complete() {
        return;
    }
    r.notes.push(super::coverage_note(c));
    if r.verdict != Verdict::MeasurementFailed {
        r.verdict = Verdict::MeasurementFailed;
        r.failure = Some(FailureKind::ShardCoverageIncomplete);
    }
}

/// The invocation's verdict over its shards' effective records.
fn outcome(records: &[Record], coverage: Option<Coverage>, advisory: bool) -> SplitOutcome {
    let rank = |v: Verdict| match v {
        Verdict::Green => 0,
        Verdict::Red => 1,
        Verdict::MeasurementFailed => 2,
    };
    let mut verdict = records
        .iter()
        .map(|r| r.verdict)
        .max_by_key(|v| rank(*v))
        .unwrap_or(Verdict::MeasurementFailed);
    let mut failure = records
        .iter()
        .find(|r| r.verdict == Verdict::MeasurementFailed)
        .and_then(|r| r.failure.clone());
    if let Some(c) = &coverage
        && !c.complete
    {
        verdict = Verdict::MeasurementFailed;
        if failure.is_none() {
            failure = Some(FailureKind::ShardCoverageIncomplete);
        }
    }
    let count = records.iter().map(|r| r.count.value()).sum::<Option<u64>>();
    let mut named_tests: Vec<String> = Vec::new();
    for r in records {
        if let Avail::Value(ns) = &r.named_tests {
            for n in ns {
                if !named_tests.contains(n) {
                    named_tests.push(n.clone());
                }
            }
        }
    }
    let notes = records
        .iter()
        .flat_map(|r| r.notes.iter().map(move |n| format!("{}: {n}", r.machine)))
        .collect();
    SplitOutcome {
        verdict,
        failure,
        count,
        named_tests,
        notes,
        shards: records.len(),
        coverage,
        advisory: advisory.then(|| {
            "the suite is not a go-test-json `go test -json ./...` suite, so saphan cannot list its units: each shard got SAPHAN_SHARD_INDEX and SAPHAN_SHARD_COUNT for the suite's own splitter, nothing proves the shards ran the whole suite, and the pointer does not move".to_string()
        }),
    }
}
