//! Conclude: the last step of every certification, local or dispatched.
//!
//! 1. Append every record of the invocation to
//!    `<git-common-dir>/saphan/attempts.jsonl` (one whole line each,
//!    fsynced, off the runtime). A record that cannot be appended is an
//!    error, and the pointer is not touched: `refs/saphan/verified` never
//!    stands on a SHA without its record.
//! 2. Only then, and only when the invocation is green, move the pointer —
//!    under the repository's local lock ([`record::Lock`], the one a local
//!    certification holds for its whole run), with a compare-and-swap
//!    (`git update-ref refs/saphan/verified NEW OLD`) and only forward
//!    along the trunk ([`record::advance_verified`]).
//!
//! So two certifications of one repository at once (two dispatches, or a
//! dispatch and a local run) never move the pointer backwards or past each
//! other: each decides and moves it while holding the lock, against the
//! value it read.

use crate::error::Result;
use crate::git::Repo;
use crate::measure::Interrupt;
use crate::measure::progress::{Event, Progress};
use crate::record::{self, Avail, PointerOutcome, Record, Unmoved};
use crate::report::Verdict;

/// Whose words the pointer's "unchanged" reasons use: a local certify's
/// (`… is not green`) or a machine list's (`… on every named machine`,
/// `the machines disagree (…)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `certify` without `--machine`: one record, this machine.
    Local,
    /// `certify --machine …`: one record per named machine.
    Machines,
    /// `certify --machine @admitted`: one record per admitted machine,
    /// over those that answered (the rest are left out by the caller).
    Admitted,
    /// `certify --split`: one record per shard; the invocation is green
    /// when every shard is green (coverage proven: a shard that did not end
    /// exactly its packages is not green), the judgement of the shards'
    /// union is green (`union_green`) and the shards ran tests.
    Split {
        /// The split's own verdict (the union of the shards' streams,
        /// judged as one) is green.
        union_green: bool,
    },
    /// `certify --split` of a suite saphan cannot split itself: advisory,
    /// the pointer never moves.
    Advisory,
}

/// Who takes the repository lock for a pointer move ([`LockHold::Take`]):
/// Ctrl-C, the verb it is written down as holding it for, and who hears
/// that it waits.
#[derive(Clone, Copy)]
pub struct Waiter<'a> {
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// The verb (`certify`).
    pub verb: &'a str,
    /// Hears [`Event::Waiting`].
    pub progress: &'a dyn Progress,
}

/// The repository lock the pointer move happens under.
pub enum LockHold<'a> {
    /// The caller holds it already (local certify holds it for its whole
    /// run, for the scratch path): a second `flock` of the same file from
    /// this process would wait on itself.
    Held {
        /// The lock.
        lock: &'a record::Lock,
        /// The pointer and the trunk's tip as the holder read them under
        /// it after the suite (the bench's pointer guard): the pointer's
        /// first judgement uses them rather than reading them again.
        read: Option<record::PointerRead>,
    },
    /// Take it for the pointer move only (dispatch); while it waits, the
    /// waiter's progress hears [`Event::Waiting`] for `local`. Ctrl-C while
    /// waiting leaves the pointer unchanged (the records are appended
    /// already).
    Take(Waiter<'a>),
}

/// Append every one of `records` (all of one invocation, all of `sha`) to
/// the repository's attempts, then move the verified pointer when the
/// invocation is green (every record green, none that ran 0 tests), under
/// the repository lock with a compare-and-swap, only forward along
/// `trunk`. Returns what happened to the pointer, for the operator and
/// the JSON output (rendered `moved`, or `unchanged: <why>`).
///
/// Errors: the append's I/O error (nothing is moved then), git failures
/// while moving the pointer.
pub async fn conclude(
    repo: &Repo,
    sha: &str,
    trunk: Option<&str>,
    records: &[Record],
    scope: Scope,
    lock: LockHold<'_>,
) -> Result<PointerOutcome> {
    let attempts = record::attempts_path(repo);
    for r in records {
        record::append_off_runtime(&attempts, r).await?;
    }
    if let Some(why) = why_not(sha, records, scope) {
        return Ok(PointerOutcome::Unchanged(why));
    }
    match lock {
        LockHold::Held { lock: _, read } => advance(repo, sha, trunk, read).await,
        LockHold::Take(w) => match record::Lock::acquire(repo, w.interrupt, w.verb, &|wait| {
            w.progress.event("local", &Event::Waiting { wait })
        })
        .await
        {
            Ok(_held) => advance(repo, sha, trunk, None).await,
            Err(e)
                if matches!(
                    e.downcast_ref::<record::RecordError>(),
                    Some(record::RecordError::Interrupted { .. })
                ) =>
            {
                Ok(PointerOutcome::Unchanged(Unmoved::Interrupted))
            }
            Err(e) => Err(e),
        },
    }
}

/// Under the repository lock: judge and move the pointer along `trunk`
/// (compare-and-swap), and on its first move record `trunk` as the one it
/// follows ([`record::trunk`]). A pointer found following another trunk
/// (a certification with another `--trunk` that raced this one past the
/// early `trunk-mismatch` check and moved it first) stays where it is.
async fn advance(
    repo: &Repo,
    sha: &str,
    trunk: Option<&str>,
    read: Option<record::PointerRead>,
) -> Result<PointerOutcome> {
    if let (Some(t), Some(follows)) = (trunk, record::trunk::followed(repo)?)
        && t != follows
    {
        return Ok(PointerOutcome::Unchanged(Unmoved::FollowsAnotherTrunk {
            trunk: t.to_string(),
            follows,
        }));
    }
    let outcome = record::advance_verified(repo, sha, trunk, read).await?;
    if let (PointerOutcome::Moved, Some(t)) = (&outcome, trunk) {
        record::trunk::follow_if_unset(repo, t).await?;
    }
    Ok(outcome)
}

/// Why the pointer must not move for this invocation, in `scope`'s words;
/// `None` when every record is green and ran at least one test.
fn why_not(sha: &str, records: &[Record], scope: Scope) -> Option<Unmoved> {
    let all_green = !records.is_empty() && records.iter().all(|r| r.verdict == Verdict::Green);
    // Measured truthfully, but a suite that ran nothing verified nothing.
    let any_zero = records.iter().any(|r| r.count == Avail::Value(0));
    let sha = sha.to_string();
    match scope {
        Scope::Local if all_green && any_zero => Some(Unmoved::ZeroTests),
        Scope::Local if all_green => None,
        Scope::Local => Some(Unmoved::NotGreen { sha }),
        Scope::Machines | Scope::Admitted if all_green && any_zero => {
            Some(Unmoved::ZeroTestsOnSomeMachine)
        }
        Scope::Machines | Scope::Admitted if all_green => None,
        Scope::Machines | Scope::Admitted => Some(match disagreement(records) {
            Some(disagreement) => Unmoved::MachinesDisagree { disagreement },
            None if scope == Scope::Admitted => Unmoved::NotGreenOnEveryAdmitted { sha },
            None => Unmoved::NotGreenOnEveryMachine { sha },
        }),
        Scope::Split { union_green } => {
            // A shard of only test-less packages runs 0 tests: the sum counts.
            let total: u64 = records.iter().filter_map(|r| r.count.value()).sum();
            match (all_green && union_green, total) {
                (true, 0) => Some(Unmoved::ZeroTests),
                (true, _) => None,
                (false, _) => Some(Unmoved::NotGreenOnEveryShard { sha }),
            }
        }
        Scope::Advisory => Some(Unmoved::Advisory),
    }
}

/// `green on m0, red on m1` when the machines' verdicts differ, else `None`.
pub fn disagreement(records: &[Record]) -> Option<String> {
    let first = records.first()?.verdict;
    if records.iter().all(|r| r.verdict == first) {
        return None;
    }
    let mut groups: Vec<(Verdict, Vec<&str>)> = Vec::new();
    for r in records {
        match groups.iter_mut().find(|(v, _)| *v == r.verdict) {
            Some((_, ms)) => ms.push(&r.machine),
            None => groups.push((r.verdict, vec![&r.machine])),
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
