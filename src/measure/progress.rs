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
    },
    /// Bringing the reports back.
    Collect,
    /// The attempt is over, with this verdict.
    Done {
        /// The attempt's verdict.
        verdict: Verdict,
    },
}

impl Event<'_> {
    /// The words of a progress line: `connect`, `ship`, `shipped 312 B` /
    /// `shipped 1.21 MiB` (binary units, as indicatif's `HumanBytes`),
    /// `run`, `build: go build ./...`, `collect`, `done: green`.
    pub fn words(&self) -> String {
        match self {
            Event::Connect => "connect".into(),
            Event::Ship => "ship".into(),
            Event::Shipped { bytes } => format!("shipped {}", indicatif::HumanBytes(*bytes)),
            Event::Run { .. } => "run".into(),
            Event::Step { name, argv } => format!("{name}: {}", argv.join(" ")),
            Event::Shard {
                index,
                count,
                packages,
                retry_of,
            } => {
                let what = match packages.len() {
                    0 => "the suite's own splitter".to_string(),
                    1 => format!("1 package ({})", packages[0]),
                    n if n <= 3 => format!("{n} packages ({})", packages.join(", ")),
                    n => format!("{n} packages ({}, …)", packages[..3].join(", ")),
                };
                let retry = retry_of
                    .map(|r| format!(", re-running attempt {r}"))
                    .unwrap_or_default();
                format!("shard {}/{count}: {what}{retry}", index + 1)
            }
            Event::Collect => "collect".into(),
            Event::Done { verdict } => format!("done: {}", verdict.as_str()),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_bundle_is_shown_in_the_unit_that_fits_it() {
        let words = |bytes| Event::Shipped { bytes }.words();
        assert_eq!(words(312), "shipped 312 B");
        assert_eq!(words(12 * 1024), "shipped 12.00 KiB");
        assert_eq!(words(3 * 1024 * 1024 + 512 * 1024), "shipped 3.50 MiB");
    }
}
