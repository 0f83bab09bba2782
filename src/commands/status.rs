//! `saphan status`: one screen of a repository's trunk state, read from what
//! exists — the refs, the attempt records, config-v1, the fleet's machine
//! rows and its signed ledger. It measures nothing, runs no suite and
//! connects to no machine; every value it shows was written by another verb.
//!
//! The operator's guide is `docs/status.md`.

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::Result;
use crate::fleet::ledger::{self, Ledger, Outcome};
use crate::fleet::machines::Machines;
use crate::git::Repo;
use crate::home::Home;
use crate::record::{self, Record};
use crate::report::Verdict;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The whole status of one repository, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The repository's top directory.
    pub repo: PathBuf,
    /// The trunk ref (`refs/heads/main`), `None` when none is known.
    pub trunk: Option<String>,
    /// The trunk's head SHA.
    pub trunk_head: Option<String>,
    /// `refs/saphan/verified`, `None` when it was never moved (or is a
    /// symbolic ref, which verifies nothing: `verified_symbolic`).
    pub verified: Option<String>,
    /// The ref `refs/saphan/verified` names when it is a symbolic ref: it
    /// follows that ref instead of standing on a verified SHA.
    pub verified_symbolic: Option<String>,
    /// Trunk commits the verified SHA does not contain
    /// (`git rev-list --count <verified>..<trunk>`; every trunk commit when
    /// nothing is verified yet). `None` when there is no trunk.
    pub unverified_commits: Option<u64>,
    /// `<common>/saphan/attempts.jsonl`.
    pub attempts: PathBuf,
    /// Lines of it that are not records.
    pub corrupt_lines: Vec<usize>,
    /// The last `certify` attempt on each machine, by machine id.
    pub last_attempts: Vec<Attempt>,
    /// The last red `certify` attempt (any machine).
    pub last_red: Option<Attempt>,
    /// The fleet's readiness for the declared suite.
    pub fleet: Fleet,
}

/// One attempt as status shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The record id.
    pub id: String,
    /// The machine id (`local` or a fleet id).
    pub machine: String,
    /// The SHA measured.
    pub sha: String,
    /// `green` | `red` | `measurement-failed`.
    pub verdict: Verdict,
    /// Why a measurement failed (`timeout`, `crash`, `report-no-match` …).
    pub failure: Option<crate::report::FailureKind>,
    /// Tests that ran, or `"unavailable"`.
    pub count: record::Avail<u64>,
    /// When it finished (RFC 3339 UTC).
    pub finished_at: String,
    /// Wall time of the suite in seconds.
    pub suite_seconds: f64,
    /// Failing test names, or `"unavailable"`.
    pub named_tests: record::Avail<Vec<String>>,
    /// `host` or `container`.
    pub class: String,
    /// `certify --split`: which shard of the invocation this record is —
    /// its verdict is that shard's, not the SHA's (the split's verdict is
    /// its shards' union, which no one record holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<record::Shard>,
    /// The last red only: its first failing test's output, its last
    /// [`OUTPUT_LINES`] lines, read again from the kept log (a go-test-json
    /// stream keeps each test's output).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_output: Option<crate::report::TestOutput>,
    /// The last red only, when no test's output can be read from its log
    /// (junit-xml, exitcode): the log's last [`OUTPUT_LINES`] lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_tail: Option<String>,
}

/// How many lines of the last red's output `status` shows.
pub const OUTPUT_LINES: usize = 5;

impl Attempt {
    fn of(r: &Record) -> Attempt {
        Attempt {
            id: r.id.clone(),
            machine: r.machine.clone(),
            sha: r.sha.clone(),
            verdict: r.verdict,
            failure: r.failure.clone(),
            count: r.count.clone(),
            finished_at: r.finished_at.clone(),
            suite_seconds: r.suite_seconds,
            named_tests: r.named_tests.clone(),
            class: r.class.clone(),
            shard: r.shard.clone(),
            first_output: None,
            log_tail: None,
        }
    }

    /// The attempt with what its kept log tells of why it is red: the
    /// first failing test's last lines, or the log's. Nothing when the
    /// log is not kept, or no longer hashes to the record's sha256.
    async fn with_output(mut self, r: &Record) -> Attempt {
        let Ok(bytes) = record::log::suite_log(r).await else {
            return self;
        };
        let w = record::log::why(r, &bytes, crate::measure::pipeline::LOG_TAIL_LINES);
        // The suite's own lines, without the log's section headers.
        let own: Vec<&str> = w
            .log_tail
            .lines()
            .filter(|l| *l != record::log::STDOUT_HEADER.trim_end())
            .filter(|l| *l != record::log::STDERR_HEADER.trim_end())
            .collect();
        let log_tail = own[own.len().saturating_sub(OUTPUT_LINES)..].join("\n");
        match w.test_output.into_iter().next() {
            Some(mut o) => {
                let cut = o.lines.len().saturating_sub(OUTPUT_LINES);
                o.lines.drain(..cut);
                o.dropped += cut as u64;
                self.first_output = Some(o);
            }
            None if !log_tail.trim().is_empty() => self.log_tail = Some(log_tail),
            None => {}
        }
        self
    }
    /// The count as a person reads it.
    pub fn count_words(&self) -> String {
        crate::report::count_words(self.count.value())
    }
}

/// The fleet's readiness, from `fleet/machines.toml` and the ledger.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    /// The suite's program (`verify.full.argv[0]`, or default-go's `go`),
    /// `None` when no suite is declared and trunk carries no go.mod.
    pub program: Option<String>,
    /// The catalog capability that program maps to, when one does.
    pub capability: Option<String>,
    /// The freshness window in seconds (`[fleet] freshness`, default 24 h).
    pub freshness_seconds: Option<u64>,
    /// One entry per machine row.
    pub machines: Vec<MachineStatus>,
    /// Why the fleet could not be read (a malformed machines.toml, a
    /// ledger that fails verification): `{ "error", "message" }`.
    pub error: Option<serde_json::Value>,
}

/// One fleet machine's rows.
#[derive(Debug, Clone, Serialize)]
pub struct MachineStatus {
    /// The machine id.
    pub machine: String,
    /// The latest facts row: `fresh`, `stale` or `none`.
    pub facts: Freshness,
    /// When those facts were measured.
    pub facts_measured_at: Option<String>,
    /// The latest row of the suite's capability: `fresh` (and `present`),
    /// `stale`, `not-present` (fresh but absent or failed) or `none`; `None`
    /// when the program maps to no catalog capability.
    pub toolchain: Option<Freshness>,
    /// That row's outcome (`present`, `absent`, `failed`).
    pub toolchain_outcome: Option<String>,
    /// When it was probed.
    pub toolchain_measured_at: Option<String>,
    /// True when the machine lacks a fresh facts row or a fresh `present`
    /// toolchain row: it needs `machine measure` / `machine probe`.
    pub needs_attention: bool,
    /// When it last answered and its last infrastructure failure.
    #[serde(flatten)]
    pub health: Health,
}

/// One machine's health, from the repository's records (every verb) and
/// the ledger: nothing is contacted to know it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    /// When the machine last answered (RFC 3339 UTC, as written): the
    /// newest of its ledger rows' `measured_at` (a `machine measure` or
    /// `machine probe` that reached it) and the `finished_at` of its
    /// records that did not fail for infrastructure. `None`: never, as far
    /// as these know.
    pub last_answered: Option<String>,
    /// Its newest record whose failure is infrastructure
    /// ([`crate::report::FailureKind::is_infrastructure`]:
    /// `host-unreachable`, `connection-lost`, `ship-failed`, `lock-timeout`,
    /// `materialize-failed`, `engine`), `None` when none is.
    pub last_infrastructure_failure: Option<InfraFailure>,
}

/// A record that failed for infrastructure.
#[derive(Debug, Clone, Serialize)]
pub struct InfraFailure {
    /// The failure's name.
    pub failure: crate::report::FailureKind,
    /// When the attempt finished (RFC 3339 UTC).
    pub at: String,
    /// The record id.
    pub id: String,
    /// The verb that wrote it.
    pub verb: String,
}

/// `machine`'s [`Health`] from `records` (any verb, any order) and its rows
/// in `ledger` (when there is one).
pub fn health(machine: &str, records: &[Record], ledger: Option<&Ledger>) -> Health {
    let t = |s: &str| crate::clock::parse_rfc3339(s);
    let newer = |a: &Option<String>, b: &str| match a {
        None => true,
        Some(a) => t(b) > t(a),
    };
    let mut h = Health::default();
    for r in records.iter().filter(|r| r.machine == machine) {
        match &r.failure {
            Some(f) if f.is_infrastructure() => {
                let later = h
                    .last_infrastructure_failure
                    .as_ref()
                    .is_none_or(|x| t(&r.finished_at) > t(&x.at));
                if later {
                    h.last_infrastructure_failure = Some(InfraFailure {
                        failure: f.clone(),
                        at: r.finished_at.clone(),
                        id: r.id.clone(),
                        verb: r.verb.clone(),
                    });
                }
            }
            _ => {
                if newer(&h.last_answered, &r.finished_at) {
                    h.last_answered = Some(r.finished_at.clone());
                }
            }
        }
    }
    if let Some(l) = ledger {
        for row in l.rows() {
            let at = match &row {
                ledger::Row::Machine(f) if f.machine == machine => &f.measured_at,
                ledger::Row::Capability(c) if c.machine == machine => &c.measured_at,
                _ => continue,
            };
            if newer(&h.last_answered, at) {
                h.last_answered = Some(at.clone());
            }
        }
    }
    h
}

/// How current a ledger row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Freshness {
    /// Within the freshness window (and, for a capability, `present` against
    /// the current catalog entry).
    Fresh,
    /// Older than the window, or probed against a catalog entry that changed.
    Stale,
    /// Fresh, but the probe found the program absent or failing.
    NotPresent,
    /// No row at all.
    None,
}

impl Freshness {
    /// The word status prints.
    pub fn as_str(&self) -> &'static str {
        match self {
            Freshness::Fresh => "fresh",
            Freshness::Stale => "stale",
            Freshness::NotPresent => "not-present",
            Freshness::None => "none",
        }
    }
}

/// Read the status of the repository containing `dir`; `trunk` is
/// `--trunk` (else the trunk the pointer follows, else found as certify
/// finds it, [`record::trunk_ref`]).
///
/// Errors: only when `dir` is not in a git repository, `trunk` names no
/// branch (`trunk-not-a-branch`), or the attempt records cannot be read at
/// all; a broken config, machines.toml or ledger
/// shows up in [`Fleet::error`] rather than hiding the rest.
pub async fn status(
    home: &Home,
    catalog: &Catalog,
    dir: &Path,
    trunk: Option<&str>,
) -> Result<Status> {
    let repo = Repo::open(dir).await?;
    // The trunk the pointer follows, unless --trunk names another one to
    // look at (status only reads: no trunk-mismatch here).
    let trunk = match (trunk, record::trunk::followed(&repo)?) {
        (None, Some(follows)) => Some(follows),
        (t, _) => record::trunk_ref(&repo, t).await?,
    };
    let trunk_head = match &trunk {
        Some(t) => repo.read_ref(t).await?,
        None => None,
    };
    // A symbolic pointer follows another ref: it verifies nothing.
    let read = record::read_pointer(&repo, None).await?;
    let verified_symbolic = read.symref.clone();
    let verified = read.pointer.filter(|_| verified_symbolic.is_none());
    let unverified_commits = match (&trunk_head, &verified) {
        (Some(head), Some(v)) => rev_count(&repo, &format!("{v}..{head}")).await,
        (Some(head), None) => rev_count(&repo, head).await,
        _ => None,
    };
    let attempts = record::attempts_path(&repo);
    let all = record::read_all(&attempts)?;
    let certs: Vec<&Record> = all.records.iter().filter(|r| r.verb == "certify").collect();
    let mut by_machine: std::collections::BTreeMap<&str, &Record> = Default::default();
    for r in &certs {
        by_machine.insert(&r.machine, r);
    }
    let last_red = match certs.iter().rev().find(|r| r.verdict == Verdict::Red) {
        Some(r) => Some(Attempt::of(r).with_output(r).await),
        None => None,
    };
    let fleet = fleet(home, catalog, &repo, trunk_head.as_deref(), &all.records).await;
    Ok(Status {
        repo: repo.top.clone(),
        trunk,
        trunk_head,
        verified,
        verified_symbolic,
        unverified_commits,
        attempts,
        corrupt_lines: all.corrupt.iter().map(|(l, _)| *l).collect(),
        last_attempts: by_machine.values().map(|r| Attempt::of(r)).collect(),
        last_red,
        fleet,
    })
}

async fn rev_count(repo: &Repo, range: &str) -> Option<u64> {
    crate::git::git(&repo.top, &["rev-list", "--count", range])
        .await
        .ok()?
        .stdout_str()
        .parse()
        .ok()
}

async fn fleet(
    home: &Home,
    catalog: &Catalog,
    repo: &Repo,
    head: Option<&str>,
    records: &[Record],
) -> Fleet {
    let mut f = Fleet {
        program: None,
        capability: None,
        freshness_seconds: None,
        machines: Vec::new(),
        error: None,
    };
    if let Err(e) = fill_fleet(&mut f, home, catalog, repo, head, records).await {
        f.error = Some(e.to_json());
    }
    f
}

async fn fill_fleet(
    f: &mut Fleet,
    home: &Home,
    catalog: &Catalog,
    repo: &Repo,
    head: Option<&str>,
    records: &[Record],
) -> Result<()> {
    // The suite this repository runs, resolved as certify resolves it: its
    // declaration (its own, else the operator's), else default-go at the
    // trunk's head.
    let cfg = Config::for_repo(home, &repo.common_dir)?;
    let top = &repo.top;
    f.program = match head {
        Some(h) => crate::measure::against_tree(repo, h, |in_tree| {
            crate::suite::resolve_full(&cfg, top, "certify", in_tree).ok()
        })
        .await?
        .and_then(|s| s.argv.first().cloned()),
        // No trunk head to look at: what the declaration alone resolves to.
        None => crate::suite::resolve_full(&cfg, top, "certify", |_| false)
            .ok()
            .and_then(|s| s.argv.first().cloned()),
    };
    let entry = f
        .program
        .as_deref()
        .and_then(|p| catalog.for_program(p))
        .map(|(n, c)| (n.to_string(), c.clone()));
    f.capability = entry.as_ref().map(|(n, _)| n.clone());
    let window = crate::fleet::freshness_window(home)?;
    f.freshness_seconds = Some(window.as_secs());
    let machines = Machines::load(home)?;
    if machines.rows.is_empty() {
        return Ok(());
    }
    let ledger = Ledger::open(home)?;
    let now = time::OffsetDateTime::now_utc();
    for id in machines.rows.keys() {
        let facts_row = ledger.latest_facts(id);
        let facts = match &facts_row {
            None => Freshness::None,
            Some(r) if ledger::facts_fresh(r, now, window) => Freshness::Fresh,
            Some(_) => Freshness::Stale,
        };
        let cap_row = entry
            .as_ref()
            .and_then(|(name, _)| ledger.latest_capability(id, name));
        let toolchain = entry.as_ref().map(|(_, c)| match &cap_row {
            None => Freshness::None,
            Some(r) if !ledger::is_fresh(r, now, window, c) => Freshness::Stale,
            Some(r) if r.outcome == Outcome::Present => Freshness::Fresh,
            Some(_) => Freshness::NotPresent,
        });
        f.machines.push(MachineStatus {
            machine: id.clone(),
            facts,
            facts_measured_at: facts_row.map(|r| r.measured_at),
            needs_attention: facts != Freshness::Fresh
                || toolchain.is_some_and(|t| t != Freshness::Fresh),
            toolchain,
            toolchain_outcome: cap_row.as_ref().map(|r| r.outcome.as_str().to_string()),
            toolchain_measured_at: cap_row.map(|r| r.measured_at),
            health: health(id, records, Some(&ledger)),
        });
    }
    Ok(())
}
