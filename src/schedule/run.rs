//! `certify --split` and `--machine @admitted` on the one pipeline, as a
//! pull queue: every machine's session ([`dispatch::session`]) connects,
//! ships and checks out at once — while this machine lists the packages —
//! then pulls the next batch whenever it is free, until no batch is left
//! and no first attempt is still running anywhere (a free machine stays
//! ready to re-run a lost one). A machine that leaves an SSH ping
//! unanswered for half a keep-alive interval while its first attempt runs
//! ([`Feed::suspect`]) has a copy of its batch queued for a free machine:
//! the copy is the re-run if that attempt ends in an infrastructure
//! failure, and otherwise is stopped or dropped, never counted and never
//! recorded (docs/dispatch.md, "A copy of a suspect machine's batch").
//! Records come from [`pipeline::record_of`];
//! the pointer moves through [`conclude::conclude`] — for a split only when
//! every batch is green and coverage is proven.

use super::invocation::{Certified, LeftOut, MachineRun, Multi, SplitOutcome};
use super::{Coverage, ShardCoverage};
use crate::dispatch::{self, Admitted, Batch, DispatchFault, Feed};
use crate::error::Result;
use crate::exec::Termination;
use crate::measure::Executor;
use crate::measure::bench::Measured;
use crate::measure::conclude::{self, LockHold, Scope};
use crate::measure::pipeline::{self, Job};
use crate::measure::progress::Event;
use crate::record::{self, Avail, Record};
use crate::report::{FailureKind, ReportKind, Verdict};
use crate::transport::Transport;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One batch of the plan: a shard of `--split` (its packages, or the whole
/// suite with `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT`), or one
/// machine's whole suite for `@admitted`.
#[derive(Clone)]
struct Work {
    /// A shard of `--split` (its record carries `shard`); false for a
    /// machine of `@admitted` running the whole suite.
    sharded: bool,
    /// The batch's index in the plan, from 0, and the plan's batch count
    /// (the record's `shard.index` / `shard.count`).
    index: usize,
    count: usize,
    /// Its packages (empty: the whole suite).
    packages: Vec<String>,
    /// The machine planned for it (the one whose build cache has its
    /// packages, or the one that must answer for itself).
    prefer: usize,
    /// Only `prefer` may run its first attempt (`@admitted`, advisory
    /// shards: each machine answers for its own).
    bound: bool,
    /// The job's environment plus, for advisory shards,
    /// `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT`.
    env: Vec<(String, String)>,
    /// Not a batch of the plan: what an interrupted invocation hands a
    /// machine that had no batch of its own (a spare, or a plan not made
    /// yet), so that its session records how it was interrupted — the
    /// whole suite's argv, no `shard`.
    stand_in: bool,
}

/// A batch waiting to be pulled: a first attempt, a re-run of a failed
/// one, or a copy of a first attempt whose machine stopped answering.
#[derive(Clone)]
struct Pending {
    work: Work,
    /// The failed attempt's id (a re-run).
    retry_of: Option<String>,
    /// The machine it failed on, or the suspect machine a copy is of (a
    /// re-run goes elsewhere first; a copy only elsewhere).
    failed_on: Option<usize>,
    /// A copy of the first attempt running on `failed_on`, started early
    /// because that machine left an SSH ping unanswered: it counts only if
    /// that attempt ends in an infrastructure failure (then it is the
    /// re-run, `retry_of` that attempt); otherwise it is not recorded.
    copy: bool,
}

/// A batch's attempt, recorded.
struct Done {
    work: Work,
    measured: Measured,
    record: Record,
}

/// The queue every machine's session pulls from.
#[derive(Default)]
struct Queue {
    /// The plan is in (the listing finished).
    planned: bool,
    /// Nothing more is handed out (a refusal, the listing failed).
    closed: bool,
    pending: VecDeque<Pending>,
    /// First attempts handed out and not measured yet: while any runs, a
    /// free machine stays ready to re-run it.
    first_running: usize,
    /// Per machine: the batch handed out last.
    current: Vec<Option<Pending>>,
    /// Per machine: its session is open.
    alive: Vec<bool>,
    /// Per machine: a second session opened because no other machine was
    /// left to re-run what failed there (it may re-run its own).
    fallback: Vec<bool>,
    /// Per planned batch: its effective attempt.
    done: Vec<Option<Done>>,
    /// Failed attempts a re-run replaced.
    superseded: Vec<Record>,
    /// Per planned batch: a copy of its first attempt was queued.
    copied: Vec<bool>,
    /// Per planned batch: a copy that ended while the first attempt still
    /// ran, held until that attempt ends.
    held: Vec<Option<Done>>,
    /// Runs handed out in all.
    handed: usize,
    /// Notes for a batch's first attempt, kept until it ends: (batch, note).
    notes: Vec<(usize, String)>,
    /// Per machine: the copy it runs is no longer needed (stop it).
    unneeded: Vec<bool>,
    /// Per machine: it was handed a run in this invocation.
    ran: Vec<bool>,
    /// The measured stand-ins ([`Work::stand_in`]) of an interrupted
    /// invocation: each machine's record of its interruption.
    stand_ins: Vec<Done>,
}

impl Queue {
    /// The notes kept for batch `i`'s first attempt.
    fn later_notes(&mut self, i: usize) -> Vec<String> {
        let (mine, rest) = std::mem::take(&mut self.notes)
            .into_iter()
            .partition(|(b, _)| *b == i);
        self.notes = rest;
        mine.into_iter().map(|(_, n)| n).collect()
    }

    /// The next batch for machine `t`: a re-run first (the moment a loss
    /// is noticed), then the batch planned for `t`, then a copy of a
    /// suspect machine's batch, then a batch whose machine is gone.
    fn take_for(&mut self, t: usize) -> Option<Pending> {
        let fallback = self.fallback[t];
        let pos = self
            .pending
            .iter()
            .position(|p| p.retry_of.is_some() && (fallback || p.failed_on != Some(t)))
            .or_else(|| {
                self.pending
                    .iter()
                    .position(|p| p.retry_of.is_none() && !p.copy && p.work.prefer == t)
            })
            // A copy only goes to a machine with nothing of its own to run
            // (a stopped copy ends its session), never to the one it copies.
            .or_else(|| {
                self.pending
                    .iter()
                    .position(|p| p.copy && p.failed_on != Some(t))
            })
            .or_else(|| {
                self.pending.iter().position(|p| {
                    p.retry_of.is_none()
                        && !p.copy
                        && (fallback || (!p.work.bound && !self.alive[p.work.prefer]))
                })
            })?;
        self.pending.remove(pos)
    }
}

/// The invocation's scheduler: the queue and what a record needs.
struct Sched<'a, 'j> {
    job: &'a Job<'j>,
    admitted: &'a [Admitted],
    /// Where `./...` stands in the argv (go-test-json splits).
    at: Option<usize>,
    class: &'static str,
    trunk: Option<&'a str>,
    ids: Vec<String>,
    failover: bool,
    /// `--split` ([`Mode::sharded`]).
    sharded: bool,
    queue: Mutex<Queue>,
    wake: tokio::sync::Notify,
}

impl Sched<'_, '_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until `done` holds of the queue (checked at once, then at each
    /// wake-up); with `interrupt`, Ctrl-C ends the wait too.
    async fn until(&self, done: impl Fn(&Queue) -> bool, interrupt: bool) {
        loop {
            let wake = self.wake.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            if done(&self.lock()) {
                return;
            }
            if interrupt {
                tokio::select! {
                    () = &mut wake => {}
                    () = self.job.interrupt.cancelled() => return,
                }
            } else {
                wake.await;
            }
        }
    }

    /// Queue the plan's batches.
    fn plan(&self, works: Vec<Work>) {
        let mut q = self.lock();
        q.done = (0..works.len()).map(|_| None).collect();
        q.held = (0..works.len()).map(|_| None).collect();
        q.copied = vec![false; works.len()];
        q.pending.extend(works.into_iter().map(|work| Pending {
            work,
            retry_of: None,
            failed_on: None,
            copy: false,
        }));
        q.planned = true;
        drop(q);
        self.wake.notify_waiters();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_waiters();
    }

    /// What machine `t` is handed once the invocation is interrupted: once,
    /// when it was handed nothing yet, its own first batch of the plan (its
    /// record carries that shard) or else a stand-in ([`Work::stand_in`]),
    /// which its session measures as the interruption without running it —
    /// so every machine chosen for the invocation gets its `interrupted`
    /// record, however early the signal came; nothing after that.
    fn interrupted(&self, q: &mut Queue, t: usize) -> Option<Batch> {
        if std::mem::replace(&mut q.ran[t], true) {
            return None;
        }
        let own = q
            .pending
            .iter()
            .position(|p| p.retry_of.is_none() && !p.copy && p.work.prefer == t);
        let p = match own.and_then(|i| q.pending.remove(i)) {
            Some(p) => {
                q.first_running += 1;
                p
            }
            None => Pending {
                work: Work {
                    sharded: self.sharded,
                    index: t,
                    count: self.admitted.len(),
                    packages: Vec::new(),
                    prefer: t,
                    bound: true,
                    env: self.job.extra_env.to_vec(),
                    stand_in: true,
                },
                retry_of: None,
                failed_on: None,
                copy: false,
            },
        };
        q.handed += 1;
        let b = self.batch(t, &p);
        q.current[t] = Some(p);
        Some(b)
    }

    /// The batch `t` is handed: its argv on that machine.
    fn batch(&self, t: usize, p: &Pending) -> Batch {
        let a = &self.admitted[t];
        let argv = match self.at {
            Some(at) if !p.work.stand_in => super::shard_argv(&a.argv, at, &p.work.packages),
            _ => a.argv.clone(),
        };
        Batch {
            argv,
            env: p.work.env.clone(),
        }
    }

    /// Machine `t` measured the batch it was handed last.
    fn done(&self, t: usize, measured: Measured) {
        let mut q = self.lock();
        let Some(p) = q.current[t].take() else { return };
        let work = p.work;
        let mut rec = record(
            self.job,
            &self.admitted[t].row.id,
            &work,
            &measured,
            self.class,
            self.trunk,
            &self.ids,
        );
        if work.stand_in {
            q.stand_ins.push(Done {
                work,
                measured,
                record: rec,
            });
            drop(q);
            self.wake.notify_waiters();
            return;
        }
        let i = work.index;
        let infra = |r: &Record| {
            r.failure
                .as_ref()
                .is_some_and(FailureKind::is_infrastructure)
        };
        if p.copy {
            // Stopped because its first attempt answered (a copy that ended
            // on its own just then is told as ended).
            let stopped = std::mem::take(&mut q.unneeded[t])
                && measured.run.measurement.failure == Some(FailureKind::Interrupted);
            let copy = Done {
                work,
                measured,
                record: rec,
            };
            match q.done[i].take() {
                // Stopped because the first attempt answered: not counted.
                Some(mut first) if stopped => {
                    first.record.notes.push(format!(
                        "a copy of this batch on {} (started when this machine left an SSH ping unanswered) was stopped and is not counted: this attempt answered",
                        copy.record.machine
                    ));
                    q.done[i] = Some(first);
                }
                // The first attempt ended in an infrastructure failure: the
                // copy is its one re-run.
                Some(first) if infra(&first.record) && first.record.retry_of.is_none() => {
                    q.done[i] = Some(adopt(copy, first.record, &mut q.superseded));
                }
                // The first attempt answered: it counts, the copy does not.
                Some(mut first) => {
                    first
                        .record
                        .notes
                        .push(uncounted(&copy, "its first attempt answered"));
                    q.done[i] = Some(first);
                }
                None if infra(&copy.record) => {
                    // A copy that failed itself is no re-run: a real one
                    // may still be needed.
                    q.copied[i] = false;
                    let why = uncounted(&copy, "it failed itself");
                    q.notes.push((i, why));
                }
                None => {
                    tracing::info!(
                        machine = %copy.record.machine,
                        batch = i,
                        verdict = copy.record.verdict.as_str(),
                        "a copy ended before its first attempt: held until that attempt ends"
                    );
                    q.held[i] = Some(copy);
                }
            }
            drop(q);
            self.wake.notify_waiters();
            return;
        }
        match p.retry_of {
            Some(id) => {
                rec.retry_of = Some(id);
                if let Some(old) = q.done[i].take() {
                    q.superseded.push(old.record);
                }
                q.done[i] = Some(Done {
                    work,
                    measured,
                    record: rec,
                });
            }
            None => {
                rec.notes.append(&mut q.later_notes(i));
                let failed_over = self.failover && infra(&rec);
                let held = q.held[i].take();
                let first = Done {
                    work,
                    measured,
                    record: rec,
                };
                if failed_over && let Some(copy) = held {
                    // The copy ended already: it is the re-run.
                    let done = adopt(copy, first.record, &mut q.superseded);
                    q.done[i] = Some(done);
                } else if failed_over && q.copied[i] {
                    // The copy is queued or running: it is the re-run.
                    let id = first.record.id.clone();
                    if let Some(c) = q.pending.iter_mut().find(|p| p.copy && p.work.index == i) {
                        c.copy = false;
                        c.retry_of = Some(id);
                    }
                    q.done[i] = Some(first);
                } else if failed_over {
                    q.pending.push_front(Pending {
                        work: first.work.clone(),
                        retry_of: Some(first.record.id.clone()),
                        failed_on: Some(t),
                        copy: false,
                    });
                    q.done[i] = Some(first);
                } else {
                    // The first attempt answered (or nothing is retried):
                    // a copy not started yet is dropped, one that ended is
                    // not counted, one still running is not counted when it
                    // ends.
                    let mut first = first;
                    q.pending.retain(|p| !(p.copy && p.work.index == i));
                    // A copy still running is stopped.
                    for u in 0..q.current.len() {
                        if q.current[u]
                            .as_ref()
                            .is_some_and(|c| c.copy && c.work.index == i)
                        {
                            q.unneeded[u] = true;
                        }
                    }
                    if let Some(copy) = held {
                        first
                            .record
                            .notes
                            .push(uncounted(&copy, "its first attempt answered"));
                    }
                    q.done[i] = Some(first);
                }
                q.first_running -= 1;
            }
        }
        drop(q);
        self.wake.notify_waiters();
    }

    /// Machine `t` left an SSH ping unanswered while running its batch:
    /// with failover, queue a copy of that first attempt for another
    /// machine (once per batch, never for a bound batch, only while
    /// another machine's session is open to run it).
    fn suspect(&self, t: usize) {
        if !self.failover {
            return;
        }
        let mut q = self.lock();
        let Some(p) = q.current[t].as_ref() else {
            return;
        };
        if p.retry_of.is_some() || p.copy || p.work.bound || q.closed {
            return;
        }
        let i = p.work.index;
        let elsewhere = (0..q.alive.len()).any(|u| u != t && q.alive[u]);
        if q.copied[i] || !elsewhere {
            return;
        }
        let work = p.work.clone();
        q.copied[i] = true;
        q.pending.push_front(Pending {
            work,
            retry_of: None,
            failed_on: Some(t),
            copy: true,
        });
        tracing::info!(
            machine = %self.admitted[t].row.id,
            batch = i,
            "a ping went unanswered: a copy of its batch is queued for another machine"
        );
        drop(q);
        self.wake.notify_waiters();
    }

    /// Machines whose session should open again: every pending batch's
    /// machine, when no session is open to pull it (and nothing is closed
    /// or interrupted), each once.
    fn fallbacks(&self) -> Vec<usize> {
        let mut q = self.lock();
        if q.closed || !q.planned || self.job.interrupt.is_cancelled() || q.alive.iter().any(|a| *a)
        {
            return Vec::new();
        }
        // One second session per machine at most.
        let mut ts: Vec<usize> = q
            .pending
            .iter()
            .map(|p| p.failed_on.unwrap_or(p.work.prefer))
            .filter(|&t| !q.fallback[t])
            .collect();
        ts.sort_unstable();
        ts.dedup();
        for &t in &ts {
            q.alive[t] = true;
            q.fallback[t] = true;
        }
        ts
    }
}

/// Machine `t`'s end of the queue.
struct MachineFeed<'s, 'a, 'j> {
    sched: &'s Sched<'a, 'j>,
    t: usize,
}

impl Feed for MachineFeed<'_, '_, '_> {
    fn next(&self) -> Pin<Box<dyn Future<Output = Option<Batch>> + Send + '_>> {
        Box::pin(async move {
            let s = self.sched;
            loop {
                let wake = s.wake.notified();
                tokio::pin!(wake);
                wake.as_mut().enable();
                {
                    let mut q = s.lock();
                    if q.closed {
                        return None;
                    }
                    if s.job.interrupt.is_cancelled() {
                        return s.interrupted(&mut q, self.t);
                    }
                    if let Some(p) = q.take_for(self.t) {
                        if p.retry_of.is_none() && !p.copy {
                            q.first_running += 1;
                        }
                        q.handed += 1;
                        q.ran[self.t] = true;
                        let b = s.batch(self.t, &p);
                        announce(s.job, s.admitted, &s.admitted[self.t].row.id, &p);
                        q.current[self.t] = Some(p);
                        return Some(b);
                    }
                    if q.planned && q.pending.is_empty() && q.first_running == 0 {
                        return None;
                    }
                }
                tokio::select! {
                    () = &mut wake => {}
                    () = s.job.interrupt.cancelled() => {}
                }
            }
        })
    }
    fn done(&self, measured: Measured) {
        self.sched.done(self.t, measured);
    }
    fn suspect(&self) {
        self.sched.suspect(self.t);
    }
    fn unneeded(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.sched.until(|q| q.unneeded[self.t], false))
    }
    fn idle(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        // Before the plan is in, a wait is for this machine's listing only;
        // after it, what `next` waits for runs on other machines.
        Box::pin(self.sched.until(|q| q.planned || q.closed, true))
    }
    fn finished(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.sched.until(
            |q| q.planned && q.pending.is_empty() && q.first_running == 0,
            false,
        ))
    }
    fn runs_at_most(&self) -> usize {
        // Every batch once, and each re-run once.
        let q = self.sched.lock();
        2 * q.done.len().max(self.sched.admitted.len())
    }
}

/// A copy that ended as the re-run of the `first` attempt (an
/// infrastructure failure): it carries `retry_of` that attempt, which is
/// superseded.
fn adopt(mut copy: Done, first: Record, superseded: &mut Vec<Record>) -> Done {
    copy.record.retry_of = Some(first.id.clone());
    copy.record.notes.push(format!(
        "started as a copy of {} when {} left an SSH ping unanswered; it counts as the re-run because that attempt ended in {}",
        first.id,
        first.machine,
        first
            .failure
            .as_ref()
            .map_or("an infrastructure failure", |f| f.as_str()),
    ));
    superseded.push(first);
    copy
}

/// The note a first attempt carries about a copy of it that does not count:
/// why, then the copy's own result, told as the copy's (it is not this
/// attempt's).
fn uncounted(copy: &Done, why: &str) -> String {
    let result = match &copy.record.failure {
        Some(f) => format!("{} ({})", copy.record.verdict.as_str(), f.as_str()),
        None => copy.record.verdict.as_str().to_string(),
    };
    format!(
        "a copy of this batch ran on {} (started when this machine left an SSH ping unanswered) and is not counted: {why}; the copy's own result was {result}",
        copy.record.machine,
    )
}

/// The progress line of a shard: which shard this machine runs.
fn announce(job: &Job<'_>, admitted: &[Admitted], machine: &str, p: &Pending) {
    if p.work.sharded {
        job.progress.event(
            machine,
            &Event::Shard {
                index: p.work.index,
                count: p.work.count,
                packages: &p.work.packages,
                retry_of: p.retry_of.as_deref(),
                copy_of: p
                    .failed_on
                    .filter(|_| p.copy)
                    .map(|t| admitted[t].row.id.as_str()),
            },
        );
    }
}

/// The record of a batch's attempt on `machine`.
fn record(
    job: &Job<'_>,
    machine: &str,
    w: &Work,
    m: &Measured,
    class: &str,
    trunk: Option<&str>,
    ids: &[String],
) -> Record {
    let mut r = pipeline::record_of(job, machine, class, m, Scope::Machines, trunk, ids);
    if w.sharded && !w.stand_in {
        r.shard = Some(record::Shard {
            index: w.index,
            count: w.count,
            packages: w.packages.clone(),
        });
    }
    r
}

/// What the invocation's event loop waits for.
enum Ev {
    /// The packages listed (go-test-json splits), or why not; `None` when
    /// a signal stopped the listing.
    Listed(Option<Result<super::Listing>>),
    /// Machine `t` connected (or the fault that kept it from it), or a
    /// refusal found there.
    Connected(
        usize,
        Result<std::result::Result<Transport, DispatchFault>>,
        Duration,
    ),
    /// Machine `t`'s session ended.
    Ended(usize, Result<()>),
}

/// `certify --split` over the admitted machines: list (go-test-json suites
/// saphan can split; while the machines connect, ship and check out) and
/// plan one batch per machine ([`super::assign`]), or give each machine's
/// batch `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT` (advisory); every
/// machine pulls; with `failover`, a batch whose attempt ended in an
/// infrastructure failure is re-run once by the first free machine (the
/// same one, in a new session, when no other is left); prove coverage;
/// append every record (superseded attempts first), then conclude over the
/// batches' effective attempts.
///
/// Errors: `split-list-unavailable` (before anything is shipped),
/// `split-list-failed` (nothing ran), the benches' refusals, a record that
/// cannot be appended.
pub async fn split(
    job: &Job<'_>,
    admitted: &[Admitted],
    executor: &(dyn Executor + '_),
    failover: bool,
) -> Result<Certified> {
    let trunk = job.trunk;
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
    let plan: PlanFuture<'_> = match at {
        Some(_) => {
            let versions: Vec<(String, Option<String>)> = admitted
                .iter()
                .map(|a| (a.row.id.clone(), a.program_version.clone()))
                .collect();
            let go = super::local_go(&versions).await?;
            let ids: Vec<String> = admitted.iter().map(|a| a.row.id.clone()).collect();
            let listing = async move {
                let listed = super::list_packages(
                    job.home,
                    job.repo,
                    job.sha,
                    &admitted[0].argv,
                    job.extra_env,
                    &go,
                    job.interrupt,
                )
                .await?;
                let shards = super::assign(&listed.packages, &ids, &super::history(job.repo));
                let count = shards.iter().filter(|s| !s.is_empty()).count();
                let works: Vec<Work> = shards
                    .into_iter()
                    .enumerate()
                    .filter(|(_, p)| !p.is_empty())
                    .enumerate()
                    .map(|(index, (prefer, packages))| Work {
                        sharded: true,
                        index,
                        count,
                        packages,
                        prefer,
                        bound: false,
                        env: job.extra_env.to_vec(),
                        stand_in: false,
                    })
                    .collect();
                Ok((works, listed))
            };
            Box::pin(listing)
        }
        None => {
            let count = admitted.len();
            let works = (0..count)
                .map(|index| {
                    let mut env = job.extra_env.to_vec();
                    env.push((super::SHARD_INDEX_ENV.into(), index.to_string()));
                    env.push((super::SHARD_COUNT_ENV.into(), count.to_string()));
                    Work {
                        sharded: true,
                        index,
                        count,
                        packages: Vec::new(),
                        prefer: index,
                        bound: true,
                        env,
                        stand_in: false,
                    }
                })
                .collect();
            Box::pin(async move { Ok((works, super::Listing::default())) })
        }
    };
    let queue = Mode {
        failover,
        leave_out: false,
        sharded: true,
    };
    run_queue(job, admitted, executor, trunk, queue, at, plan).await
}

/// `--machine @admitted` without `--split`: every admitted machine runs the
/// whole suite once. Nothing is re-run: a re-run goes only to a machine
/// that has not run that work in this invocation, and every machine here
/// runs the whole suite — another run of it on a machine that answered
/// adds no evidence. A machine whose attempt ended in an infrastructure
/// failure is instead left out of the verdict by name ([`Multi::left_out`],
/// a note on its record) when another machine answered; the verdict and
/// the pointer are over the machines that answered (every one must be
/// green). When none answered, every failure counts.
///
/// Errors: the benches' refusals, a record that cannot be appended.
pub async fn admitted(
    job: &Job<'_>,
    admitted: &[Admitted],
    executor: &(dyn Executor + '_),
) -> Result<Certified> {
    let trunk = job.trunk;
    let works = (0..admitted.len())
        .map(|index| Work {
            sharded: false,
            index,
            count: admitted.len(),
            packages: Vec::new(),
            prefer: index,
            bound: true,
            env: job.extra_env.to_vec(),
            stand_in: false,
        })
        .collect();
    let plan = async move { Ok((works, super::Listing::default())) };
    let queue = Mode {
        failover: false,
        leave_out: true,
        sharded: false,
    };
    run_queue(job, admitted, executor, trunk, queue, None, Box::pin(plan)).await
}

/// How a queue treats an attempt that ended in an infrastructure failure.
#[derive(Clone, Copy)]
struct Mode {
    /// Re-run its batch once on another machine (`--split` with failover).
    failover: bool,
    /// Leave its machine out of the verdict when another machine answered
    /// (`@admitted` without `--split`).
    leave_out: bool,
    /// The batches are shards of `--split` (so is the record of an
    /// interruption that came before the plan).
    sharded: bool,
}

/// The plan: the batches, and the listed packages (go-test-json splits;
/// empty otherwise).
type PlanFuture<'p> = Pin<Box<dyn Future<Output = Result<(Vec<Work>, super::Listing)>> + 'p>>;

/// Connect everywhere while `plan` runs (a program resolved on a machine is
/// refused before anything is shipped anywhere), open every machine's
/// session, let them pull until the queue is done, prove coverage (`at`:
/// the listed packages), append, conclude.
async fn run_queue(
    job: &Job<'_>,
    admitted: &[Admitted],
    executor: &(dyn Executor + '_),
    trunk: Option<&str>,
    mode: Mode,
    at: Option<usize>,
    plan: PlanFuture<'_>,
) -> Result<Certified> {
    let n = admitted.len();
    let sched = Sched {
        job,
        admitted,
        at,
        class: executor.class(),
        trunk,
        ids: admitted.iter().map(|a| a.row.id.clone()).collect(),
        failover: mode.failover,
        sharded: mode.sharded,
        queue: Mutex::new(Queue {
            current: vec![None; n],
            unneeded: vec![false; n],
            ran: vec![false; n],
            alive: vec![false; n],
            fallback: vec![false; n],
            ..Queue::default()
        }),
        wake: tokio::sync::Notify::new(),
    };
    let sched = &sched;
    let session = |t: usize, connected, took| -> Pin<Box<dyn Future<Output = Ev> + '_>> {
        Box::pin(async move {
            let executor = executor.for_machine(&admitted[t].row.id);
            let feed = MachineFeed { sched, t };
            let r = dispatch::session(job, &admitted[t], connected, took, executor.as_ref(), &feed)
                .await;
            Ev::Ended(t, r)
        })
    };
    let mut events: FuturesUnordered<Pin<Box<dyn Future<Output = Ev> + '_>>> =
        FuturesUnordered::new();
    // A signal stops the listing (its `go list` killed, its tree removed):
    // the machines record the interruption without a plan.
    events.push(Box::pin(async move {
        tokio::select! {
            r = plan => Ev::Listed(Some(r.map(|(w, l)| {
                sched.plan(w);
                l
            }))),
            () = job.interrupt.cancelled() => Ev::Listed(None),
        }
    }));
    for (t, a) in admitted.iter().enumerate() {
        job.progress.event(&a.row.id, &Event::Connect);
        events.push(Box::pin(async move {
            let t0 = Instant::now();
            let c = dispatch::connect(job.home, a).await;
            Ev::Connected(t, c, t0.elapsed())
        }));
    }
    let mut connected: Vec<Option<std::result::Result<Transport, DispatchFault>>> =
        (0..n).map(|_| None).collect();
    let mut took = vec![Duration::ZERO; n];
    let mut connects_left = n;
    let mut listed: Option<super::Listing> = None;
    let mut refused: Option<crate::error::Error> = None;
    while let Some(ev) = events.next().await {
        match ev {
            Ev::Listed(Some(Ok(l))) => listed = Some(l),
            // Interrupted: no refusal, each machine records its interruption.
            Ev::Listed(None) => {}
            Ev::Listed(Some(Err(_))) if job.interrupt.is_cancelled() => {}
            Ev::Listed(Some(Err(e))) => {
                refused.get_or_insert(e);
                sched.close();
            }
            Ev::Connected(t, c, d) => {
                connects_left -= 1;
                match c {
                    Ok(c) => connected[t] = Some(c),
                    Err(e) => {
                        refused.get_or_insert(e);
                        sched.close();
                    }
                }
                took[t] = d;
                if connects_left == 0 && refused.is_none() {
                    let mut q = sched.lock();
                    for t in 0..n {
                        if let Some(c) = connected[t].take() {
                            q.alive[t] = true;
                            events.push(session(t, c, took[t]));
                        }
                    }
                }
            }
            Ev::Ended(t, r) => {
                sched.lock().alive[t] = false;
                // A machine waiting for a batch planned for `t` may take it
                // now (`take_for`: a gone machine's batch is anyone's).
                sched.wake.notify_waiters();
                if let Err(e) = r {
                    refused.get_or_insert(e);
                    sched.close();
                }
                // "Later on the same one": no machine is left to pull what
                // is pending, so the machines it failed on open again.
                for t in sched.fallbacks() {
                    job.progress.event(&admitted[t].row.id, &Event::Connect);
                    let t0 = Instant::now();
                    let c = match dispatch::connect(job.home, &admitted[t]).await {
                        Ok(c) => c,
                        Err(e) => Err(DispatchFault::new(
                            FailureKind::of(&e),
                            e.inner().to_string(),
                        )),
                    };
                    events.push(session(t, c, t0.elapsed()));
                }
            }
        }
    }
    drop(events);
    executor.settle().await;
    if let Some(e) = refused {
        return Err(e);
    }
    let (done, superseded) = {
        let mut q = sched.lock();
        let mut done: Vec<Done> = std::mem::take(&mut q.done).into_iter().flatten().collect();
        // An interrupted invocation: the machines that had no batch of
        // their own record their interruption too.
        done.append(&mut q.stand_ins);
        (done, std::mem::take(&mut q.superseded))
    };
    let listed = at.and(listed);
    // A split saphan cannot list is advisory (not one whose listing a
    // signal stopped).
    let advisory = at.is_none();
    conclude_queue(job, trunk, done, superseded, listed, mode, advisory).await
}

/// Prove coverage (`listed`), leave out (`leave_out`, unsharded) the
/// machines that failed for an infrastructure reason when another
/// answered, append every record (superseded and left-out attempts
/// first), conclude over the effective attempts (an interrupted
/// invocation's stand-ins among them). `advisory`: a split of a suite
/// saphan cannot list.
async fn conclude_queue(
    job: &Job<'_>,
    trunk: Option<&str>,
    mut done: Vec<Done>,
    superseded: Vec<Record>,
    listed: Option<super::Listing>,
    mode: Mode,
    advisory: bool,
) -> Result<Certified> {
    let Mode {
        leave_out, sharded, ..
    } = mode;
    let (kept, out) = if leave_out && !sharded {
        leave_out_of(done)
    } else {
        (done, Vec::new())
    };
    done = kept;

    // Coverage: the batches' package-level terminal events, against the list.
    let mut explained = true;
    let coverage: Option<Coverage> = listed.as_ref().map(|listed| {
        let assigned: Vec<Vec<String>> = done.iter().map(|d| d.work.packages.clone()).collect();
        let ends: Vec<Vec<crate::report::gojson::PackageEnd>> = done
            .iter()
            .map(|d| pipeline::package_ends(&d.measured))
            .collect();
        let (c, per) = super::coverage(listed, &assigned, &ends);
        for (d, sc) in done.iter_mut().zip(per) {
            let told = failed_exit(&d.measured);
            explained &= mark_incomplete(&mut d.record, &sc, told);
        }
        c
    });
    // The split's own judgement: the shards' streams as one stream.
    let union = coverage.as_ref().and_then(|_| union_judgement(&done));

    // Every record first (superseded attempts, then the batches'), then the
    // pointer, over the effective attempts.
    let attempts = record::attempts_path(job.repo);
    for r in superseded.iter().chain(out.iter().map(|d| &d.record)) {
        record::append_off_runtime(&attempts, r).await?;
    }
    let records: Vec<Record> = done.iter().map(|d| d.record.clone()).collect();
    let mut outcome = sharded.then(|| outcome(&records, coverage, advisory, union, explained));
    // A suite that splits itself: a test that ran in two shards is one test.
    if let Some(o) = outcome.as_mut()
        && listed.is_none()
        && job.suite.report == crate::report::ReportKind::JunitXml
        && let Some(sum) = o.count
    {
        let ids: Vec<&[u64]> = done
            .iter()
            .map(|d| d.measured.run.measurement.test_ids.as_slice())
            .collect();
        if let Some(r) = super::repeats(&ids) {
            o.notes.insert(0, super::repeats_note(&r, sum));
            o.count = Some(sum.saturating_sub(r.extra));
        }
    }
    let scope = match (sharded, &outcome) {
        (false, _) if leave_out => Scope::Admitted,
        (false, _) => Scope::Machines,
        (true, Some(o)) if o.coverage.is_some() || !advisory => Scope::Split {
            union_green: o.verdict == Verdict::Green,
        },
        (true, _) => Scope::Advisory,
    };
    let pointer = conclude::conclude(
        job.repo,
        job.sha,
        trunk,
        &records,
        scope,
        LockHold::Take(job.waiter()),
    )
    .await?;
    let outcome = outcome.map(Box::new);
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
            tests: Default::default(),
        })
        .collect();
    let left_out: Vec<LeftOut> = out
        .iter()
        .filter_map(|d| {
            Some(LeftOut {
                machine: d.record.machine.clone(),
                failure: d.record.failure.clone()?,
                id: d.record.id.clone(),
            })
        })
        .collect();
    // In the machines' order, the left-out among them.
    let mut all: Vec<Done> = done.into_iter().chain(out).collect();
    all.sort_by_key(|d| d.work.index);
    for d in all {
        runs.push(MachineRun {
            record: d.record,
            stderr_tail: d.measured.run.stderr_tail,
            test_output: d.measured.run.measurement.test_output,
            test_output_omitted: d.measured.run.measurement.test_output_omitted,
            tests: d.measured.run.measurement.tests,
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
    Ok(Certified::Machines(Box::new(Multi {
        runs,
        attempts,
        pointer,
        disagreement,
        split: outcome,
        remain: Vec::new(),
        left_out,
        borrowed: None,
        selection: None,
        first_follow: None,
    })))
}

/// Split unsharded attempts into those the verdict is over and those left
/// out of it: an attempt that ended in an infrastructure failure, when
/// another attempt answered (any verdict that is not such a failure). Each
/// left-out record carries a note saying so. When none answered, nothing
/// is left out.
fn leave_out_of(done: Vec<Done>) -> (Vec<Done>, Vec<Done>) {
    let infra = |r: &Record| {
        r.failure
            .as_ref()
            .is_some_and(FailureKind::is_infrastructure)
    };
    let answered: Vec<String> = done
        .iter()
        .filter(|d| !infra(&d.record))
        .map(|d| d.record.machine.clone())
        .collect();
    if answered.is_empty() {
        return (done, Vec::new());
    }
    let (mut out, kept): (Vec<Done>, Vec<Done>) = done.into_iter().partition(|d| infra(&d.record));
    for d in &mut out {
        let kind = d.record.failure.as_ref().map_or("", |f| f.as_str());
        d.record.notes.push(format!(
            "left out of the verdict: {kind} is an infrastructure failure and {} answered (the machines were chosen, not named, and every chosen machine ran the whole suite, so none was left to re-run it)",
            answered.join(", ")
        ));
    }
    (kept, out)
}

/// The exit code of a shard's `go test` that ran to its end and failed
/// (non-zero); `None` for a zero exit or a run that did not end on its own.
fn failed_exit(m: &Measured) -> Option<i32> {
    match m.run.termination {
        Some(Termination::Exited(c)) if c != 0 => Some(c),
        _ => None,
    }
}

/// A shard that did not end exactly its packages (`c`) is never green. When
/// it only left packages without an end and its `go test` itself exited
/// non-zero (`failed_exit`: go says it failed — Go 1.19 exits 2 and writes
/// nothing on stdout for an untested package that fails to build, as an
/// unsplit run's stream has no end for it either) the shard's own verdict
/// stands (it cannot be green) and a note names the packages; returns true.
/// Otherwise a green becomes measurement-failed `shard-coverage-incomplete`,
/// and so does a red (the tests it never ran might have failed too); an
/// attempt that already failed keeps its own kind (its stream is cut off
/// by that); returns false.
fn mark_incomplete(r: &mut Record, c: &ShardCoverage, failed_exit: Option<i32>) -> bool {
    if c.complete() {
        return true;
    }
    if let (Some(code), true, false) = (
        failed_exit,
        c.doubled.is_empty() && c.untested.is_empty(),
        r.verdict == Verdict::Green,
    ) {
        r.notes.push(super::told_note(c, code));
        return true;
    }
    r.notes.push(super::coverage_note(c));
    if r.verdict != Verdict::MeasurementFailed {
        r.verdict = Verdict::MeasurementFailed;
        r.failure = Some(FailureKind::ShardCoverageIncomplete);
    }
    false
}

/// The judgement of the effective attempts' go-test-json streams as one
/// stream ([`crate::report::measure_go_union`]), against their combined
/// ending — the highest exit code, as `go test` itself exits with the
/// highest status of its packages — when every attempt's suite ran to its
/// own exit and its stream was brought back; `None` otherwise (a timeout,
/// a signal, an infrastructure failure: that attempt's own failure
/// decides).
fn union_judgement(done: &[Done]) -> Option<crate::report::Measurement> {
    let mut code = 0;
    let mut paths = Vec::new();
    for d in done {
        match d.measured.run.termination {
            Some(Termination::Exited(c)) => code = code.max(c),
            _ => return None,
        }
        paths.push(pipeline::stdout_of(&d.measured)?);
    }
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    Some(crate::report::measure_go_union(
        &refs,
        Termination::Exited(code),
    ))
}

/// The invocation's verdict over its shards' effective records: with
/// `union` (go-test-json, every shard's suite ran to its exit) the
/// verdict, failure, count and named tests are the union's judgement —
/// the unsplit run's rules on the same streams — and its notes come first,
/// unprefixed; otherwise the worst record's. Every record's notes follow,
/// prefixed with its machine. Incomplete coverage makes it
/// measurement-failed, unless every hole was `explained` by its shard's
/// own failing exit and the judgement is not green.
fn outcome(
    records: &[Record],
    coverage: Option<Coverage>,
    advisory: bool,
    union: Option<crate::report::Measurement>,
    explained: bool,
) -> SplitOutcome {
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
    let mut count = records.iter().map(|r| r.count.value()).sum::<Option<u64>>();
    let mut named_tests: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if let Some(u) = union {
        verdict = u.verdict;
        failure = u.failure;
        count = u.count;
        named_tests = u.named_tests.unwrap_or_default();
        notes = u.notes;
    } else {
        for r in records {
            if let Avail::Value(ns) = &r.named_tests {
                for n in ns {
                    if !named_tests.contains(n) {
                        named_tests.push(n.clone());
                    }
                }
            }
        }
    }
    if let Some(c) = &coverage
        && !c.complete
        && !(explained && verdict != Verdict::Green)
    {
        verdict = Verdict::MeasurementFailed;
        if failure.is_none() {
            failure = Some(FailureKind::ShardCoverageIncomplete);
        }
    }
    notes.extend(
        records
            .iter()
            .flat_map(|r| r.notes.iter().map(move |n| format!("{}: {n}", r.machine))),
    );
    SplitOutcome {
        verdict,
        failure,
        count,
        named_tests,
        notes,
        // The batches of the plan (an interrupted machine's stand-in is none).
        shards: records.iter().filter(|r| r.shard.is_some()).count(),
        coverage,
        advisory: advisory.then(|| {
            "the suite is not a go-test-json `go test -json ./...` suite, so saphan cannot list its units: each shard got SAPHAN_SHARD_INDEX and SAPHAN_SHARD_COUNT for the suite's own splitter, nothing proves the shards ran the whole suite, and the pointer does not move".to_string()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(index: usize, prefer: usize, bound: bool) -> Work {
        Work {
            sharded: true,
            index,
            count: 3,
            packages: vec![format!("m/p{index}")],
            prefer,
            bound,
            env: Vec::new(),
            stand_in: false,
        }
    }

    fn first(w: Work) -> Pending {
        Pending {
            work: w,
            retry_of: None,
            failed_on: None,
            copy: false,
        }
    }

    fn queue(n: usize, pending: Vec<Pending>) -> Queue {
        Queue {
            planned: true,
            pending: pending.into(),
            current: vec![None; n],
            alive: vec![true; n],
            fallback: vec![false; n],
            ..Queue::default()
        }
    }

    #[test]
    fn a_machine_pulls_a_rerun_first_then_its_own_batch_then_a_gone_machines() {
        let mut q = queue(
            3,
            vec![
                first(work(0, 0, false)),
                first(work(1, 1, false)),
                first(work(2, 2, false)),
            ],
        );
        assert_eq!(q.take_for(0).map(|p| p.work.index), Some(0));
        assert!(
            q.take_for(0).is_none(),
            "the others' batches wait for their live machines"
        );
        q.alive[2] = false;
        assert_eq!(
            q.take_for(0).map(|p| p.work.index),
            Some(2),
            "a gone machine's batch is anyone's"
        );
        q.pending.push_back(Pending {
            work: work(1, 1, false),
            retry_of: Some("a1".into()),
            failed_on: Some(1),
            copy: false,
        });
        let p = q.take_for(1).unwrap();
        assert!(
            p.retry_of.is_none() && p.work.index == 1,
            "a re-run goes elsewhere"
        );
        let p = q.take_for(0).unwrap();
        assert_eq!(p.retry_of.as_deref(), Some("a1"));
    }

    #[test]
    fn a_copy_goes_to_an_idle_machine_never_the_suspect_one_even_a_fallback() {
        let mut q = queue(3, vec![first(work(1, 1, false))]);
        q.pending.push_front(Pending {
            work: work(0, 0, false),
            retry_of: None,
            failed_on: Some(0),
            copy: true,
        });
        q.fallback[0] = true;
        let p = q.take_for(0).unwrap();
        assert!(
            !p.copy && p.work.index == 1,
            "never the copy of its own batch, not even in a second session"
        );
        assert!(q.take_for(0).is_none());
        q.pending.push_back(first(work(2, 2, false)));
        assert_eq!(
            q.take_for(2).map(|p| (p.copy, p.work.index)),
            Some((false, 2)),
            "its own batch before a copy"
        );
        let p = q.take_for(2).unwrap();
        assert!(p.copy && p.work.index == 0, "then the copy");
    }

    #[test]
    fn a_bound_batch_waits_for_its_machine_and_a_second_session_reruns_its_own() {
        let mut q = queue(2, vec![first(work(0, 0, true)), first(work(1, 1, true))]);
        q.alive[1] = false;
        assert_eq!(q.take_for(0).map(|p| p.work.index), Some(0));
        assert!(
            q.take_for(0).is_none(),
            "each machine answers for its own suite"
        );
        q.pending.push_back(Pending {
            work: work(0, 0, true),
            retry_of: Some("a0".into()),
            failed_on: Some(0),
            copy: false,
        });
        assert!(q.take_for(0).is_none(), "not the machine it failed on");
        q.fallback[0] = true;
        assert_eq!(
            q.take_for(0).and_then(|p| p.retry_of).as_deref(),
            Some("a0")
        );
        assert_eq!(q.take_for(0).map(|p| p.work.index), Some(1));
    }
}
