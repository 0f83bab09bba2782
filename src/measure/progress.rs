//! What a person watching sees of an attempt: one typed event per step of
//! one machine's attempt, rendered by the CLI (a spinner, one indicatif
//! line per machine, or plain `m0: …` lines). Nothing in the pipeline
//! prints.

use crate::measure::Budget;
use crate::report::Verdict;

/// One step of one machine's attempt.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// Connecting to the machine.
    Connect,
    /// Shipping the commits its mirror lacks.
    Ship,
    /// Shipped: the bundle's size in bytes (0: the mirror had everything).
    Shipped {
        /// Bundle bytes.
        bytes: u64,
    },
    /// The suite is about to run.
    Run {
        /// The SHA measured.
        sha: &'a str,
        /// What runs.
        argv: &'a [String],
        /// Under this budget.
        budget: &'a Budget,
    },
    /// One step of a multi-step verb (verify-stream's `build`, `vet`,
    /// `test`, `gofmt`) is about to run.
    Step {
        /// The step's name.
        name: &'a str,
        /// What runs.
        argv: &'a [String],
    },
    /// `certify --split`: the shard this machine runs.
    Shard {
        /// Its index, from 0.
        index: usize,
        /// How many shards.
        count: usize,
        /// Its packages (empty: the suite splits itself by
        /// `SAPHAN_SHARD_INDEX` / `SAPHAN_SHARD_COUNT`).
        packages: &'a [String],
        /// The attempt id this run re-runs (failover), if any.
        retry_of: Option<&'a str>,
        /// The suspect machine whose running first attempt this run copies
        /// (counted only if that attempt ends in an infrastructure failure).
        copy_of: Option<&'a str>,
    },
    /// Waiting for a lock another run holds — the repository lock here, or
    /// the repository's lock on a fleet machine: said at once, then every
    /// [`crate::record::wait::NOTE_EVERY`] until it is taken.
    Waiting {
        /// What is waited for, who holds it and since when, how long so far.
        wait: &'a crate::record::wait::LockWait,
    },
    /// `--machine @admitted`: the machines chosen before anything ran, and
    /// those left out and why (reported once, with machine `""`).
    Chosen {
        /// The selector as given (`@admitted`).
        selector: &'a str,
        /// The chosen machine ids, in id order.
        chosen: &'a [String],
        /// The machines left out.
        left_out: &'a [LeftOutMachine],
    },
    /// Bringing the reports back.
    Collect,
    /// The attempt is over, with this verdict.
    Done {
        /// The attempt's verdict.
        verdict: Verdict,
    },
}

/// A machine a selection left out ([`Event::Chosen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOutMachine {
    /// The machine id.
    pub machine: String,
    /// Its refusal's stable name (`verification-toolchain-absent`, …).
    pub name: &'static str,
    /// The first command of its remedy (or its refusal's first line).
    pub remedy: String,
}

/// An observer of attempts' progress.
pub trait Progress: Send + Sync {
    /// `machine` (`local` or a fleet id) reached `event`.
    fn event(&self, machine: &str, event: &Event<'_>);
}

/// No progress output.
pub struct Silent;

impl Progress for Silent {
    fn event(&self, _: &str, _: &Event<'_>) {}
}
