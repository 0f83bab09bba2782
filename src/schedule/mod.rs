//! Scheduling on the one pipeline (DESIGN §6b; operator's view:
//! docs/dispatch.md "Splitting"): `certify --split` lists a go-test-json
//! suite's packages at the SHA ([`list_packages`]), assigns them to the
//! invocation's machines by their recorded seconds ([`assign`], from
//! [`history`]), rewrites the suite's argv per shard ([`shard_argv`]), and
//! proves afterwards that the shards' package-level terminal events cover
//! the listed set, each package exactly once ([`coverage`]).
//!
//! The shards themselves run as fleet benches of the pipeline
//! ([`crate::measure::pipeline`]), one per machine; nothing here runs a
//! suite.

pub mod class;
pub mod invocation;
pub mod run;

use crate::error::{Refusal, Result};
use crate::exec::{self, Cmd};
use crate::git::Repo;
use crate::home::Home;
use crate::measure::Interrupt;
use crate::measure::bench::LocalBench;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// Budget for `go version` and `go list` on this machine.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment variable a shard of a suite saphan cannot split itself
/// reads: this shard's index, from 0.
pub const SHARD_INDEX_ENV: &str = "SAPHAN_SHARD_INDEX";
/// The environment variable with the number of shards.
pub const SHARD_COUNT_ENV: &str = "SAPHAN_SHARD_COUNT";

/// Refusals of `certify --split` (nothing was shipped).
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// `--split` without fleet machines.
    #[error(
        "--split needs machines to split over — name them with --machine ID[,ID…] or --machine @admitted"
    )]
    NoMachines,
    /// `--split` with `--class container`.
    #[error(
        "--split runs host-class suites only in this version — drop --class container, or certify the container class without --split"
    )]
    ContainerClass,
    /// The packages cannot be listed honestly on this machine.
    #[error(
        "--split lists the packages with this machine's go, which must be the machines' go: {why} — install the machines' go version here (or the same on every machine), or certify without --split"
    )]
    ListUnavailable {
        /// What differs.
        why: String,
    },
    /// `go list` failed or listed nothing.
    #[error(
        "--split could not list the packages at {sha}: {detail} — fix the module, or certify without --split"
    )]
    ListFailed {
        /// The SHA.
        sha: String,
        /// What `go list` said.
        detail: String,
    },
}

impl Refusal for ScheduleError {
    fn name(&self) -> &'static str {
        match self {
            ScheduleError::NoMachines | ScheduleError::ContainerClass => "split-invalid",
            ScheduleError::ListUnavailable { .. } => "split-list-unavailable",
            ScheduleError::ListFailed { .. } => "split-list-failed",
        }
    }
}

/// Where `./...` stands in a go-test-json suite's argv that saphan can split
/// itself: `<…/go> test [flags] ./...` with `-json` among the flags and
/// `./...` the one package pattern (default-go's argv is
/// `go test -count=1 -json ./...`). `None` for any other argv.
pub fn go_split_at(argv: &[String]) -> Option<usize> {
    let prog = argv.first()?;
    let base = prog.rsplit('/').next().unwrap_or(prog);
    if base != "go" || argv.get(1).map(String::as_str) != Some("test") {
        return None;
    }
    if !argv.iter().any(|a| a == "-json" || a == "--json") {
        return None;
    }
    let patterns: Vec<usize> = argv
        .iter()
        .enumerate()
        .skip(2)
        .filter(|(_, a)| !a.starts_with('-'))
        .map(|(i, _)| i)
        .collect();
    match patterns.as_slice() {
        [i] if argv[*i] == "./..." => Some(*i),
        _ => None,
    }
}

/// The argv of one shard: `./...` (at `at`, see [`go_split_at`]) replaced
/// by `packages`, and `-count=1` added when the suite lacks a `-count`
/// (a cached result is no measurement); every other flag kept.
pub fn shard_argv(argv: &[String], at: usize, packages: &[String]) -> Vec<String> {
    let mut out: Vec<String> = argv[..at].to_vec();
    if !out.iter().any(|a| a.starts_with("-count")) {
        out.insert(2, "-count=1".into());
    }
    out.extend(packages.iter().cloned());
    out.extend(argv[at + 1..].iter().cloned());
    out
}

/// What the records say about each package: a robust estimate of its
/// seconds over its last recorded runs, and the machine that ran it last.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Package → the median of its last [`HISTORY_RUNS`] recorded
    /// `package_seconds` entries (one run under load moves it no further
    /// than the middle run).
    pub seconds: HashMap<String, f64>,
    /// Package → the `machine` of the latest record that timed it (its
    /// build cache holds the package).
    pub machine: HashMap<String, String>,
}

/// How many of a package's latest recorded runs its estimate is the median
/// of: one bad run among them (a machine under load, a cold cache) is
/// outvoted by the others.
pub const HISTORY_RUNS: usize = 5;

/// The history of `repo`'s attempts, in file order (the latest runs count).
/// Unreadable attempts give no history (the split then balances by count).
pub fn history(repo: &Repo) -> History {
    match crate::record::read_all(&crate::record::attempts_path(repo)) {
        Ok(a) => history_of(
            a.records
                .into_iter()
                .filter_map(|r| r.package_seconds.map(|ps| (r.machine, ps))),
        ),
        Err(_) => History::default(),
    }
}

/// [`History`] from `(machine, package_seconds)` of records, oldest first:
/// per package the median of its last [`HISTORY_RUNS`] seconds (the mean
/// of the middle two for an even number), and the machine of its latest.
pub fn history_of(
    runs: impl IntoIterator<Item = (String, std::collections::BTreeMap<String, f64>)>,
) -> History {
    let mut samples: HashMap<String, std::collections::VecDeque<f64>> = HashMap::new();
    let mut out = History::default();
    for (machine, ps) in runs {
        for (p, s) in ps {
            if !s.is_finite() {
                continue;
            }
            let v = samples.entry(p.clone()).or_default();
            if v.len() == HISTORY_RUNS {
                v.pop_front();
            }
            v.push_back(s);
            out.machine.insert(p, machine.clone());
        }
    }
    for (p, v) in samples {
        let mut v: Vec<f64> = v.into_iter().collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        out.seconds.insert(p, median);
    }
    out
}

/// How close to the least-loaded machine's load (as a share of the
/// package's own weight) a machine may be and still get the package
/// because it ran it last (its build cache holds it).
pub const LOCALITY_SLACK: f64 = 0.1;

/// Assign `packages` to `machines` (their ids, in order), longest first
/// onto the least-loaded machine, by `history.seconds` (a package without
/// history weighs the mean of those with history, or 1 when none has any —
/// equal counts). Among the machines whose load is within
/// [`LOCALITY_SLACK`] × the package's weight of the least, the one that ran
/// the package last wins (cache locality); otherwise ties go to the
/// machine with fewer packages, then the lower index. Returns one list per
/// machine (index as in `machines`), each sorted; a machine may get none
/// (more machines than packages).
pub fn assign(packages: &[String], machines: &[String], history: &History) -> Vec<Vec<String>> {
    let seconds = &history.seconds;
    let known: Vec<f64> = packages
        .iter()
        .filter_map(|p| seconds.get(p).copied())
        .collect();
    let default = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    let mut weighted: Vec<(f64, &String)> = packages
        .iter()
        .map(|p| (seconds.get(p).copied().unwrap_or(default).max(0.0), p))
        .collect();
    weighted.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let n = machines.len().max(1);
    let mut shards: Vec<(f64, Vec<String>)> = vec![(0.0, Vec::new()); n];
    for (w, p) in weighted {
        let least = (0..n)
            .min_by(|&a, &b| {
                shards[a]
                    .0
                    .total_cmp(&shards[b].0)
                    .then(shards[a].1.len().cmp(&shards[b].1.len()))
                    .then(a.cmp(&b))
            })
            .unwrap_or(0);
        let last = history
            .machine
            .get(p)
            .and_then(|m| machines.iter().position(|x| x == m))
            .filter(|&i| shards[i].0 <= shards[least].0 + LOCALITY_SLACK * w);
        let i = last.unwrap_or(least);
        shards[i].0 += w;
        shards[i].1.push(p.clone());
    }
    shards
        .into_iter()
        .map(|(_, mut ps)| {
            ps.sort();
            ps
        })
        .collect()
}

/// The suite's flags that change which packages `./...` matches, for
/// `go list` (and the affected tier, and a re-run line): [`package_flags`]
/// of the arguments after `go test`.
pub fn list_flags(argv: &[String]) -> Vec<String> {
    package_flags(argv.get(2..).unwrap_or_default()).0
}

/// `args` split into the Go flags that choose packages — `-tags`, `-mod`,
/// `-modfile`, written `-flag=value` or `-flag value` (one dash or two, as
/// Go's flag package reads them), each returned as `-flag=value` — and
/// every other argument, in order.
pub fn package_flags(args: &[String]) -> (Vec<String>, Vec<String>) {
    const CHOOSE: [&str; 3] = ["tags", "mod", "modfile"];
    let (mut chosen, mut rest) = (Vec::new(), Vec::new());
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let bare = a.trim_start_matches('-');
        let flag = a.starts_with('-') && a != "--";
        match bare.split_once('=') {
            Some((name, _)) if flag && CHOOSE.contains(&name) => chosen.push(format!("-{bare}")),
            None if flag && CHOOSE.contains(&bare) => match args.next() {
                Some(v) => chosen.push(format!("-{bare}={v}")),
                None => rest.push(a.clone()),
            },
            _ => rest.push(a.clone()),
        }
    }
    (chosen, rest)
}

/// The Go variables that choose which packages `./...` matches, or how
/// they are named (`GOOS`/`GOARCH` and `CGO_ENABLED` select files by
/// their build constraints, `GOFLAGS` may carry `-tags=`, `GOEXPERIMENT`
/// adds `goexperiment.*` tags, `GOWORK` and `GO111MODULE` change the
/// module or GOPATH mode), or which `go` answers (`GOTOOLCHAIN`), or where
/// Go reads defaults for all of them (`GOENV`, this machine's `go env -w`
/// file). None of this machine's values reaches a machine's `go test`, so
/// the listing runs without them (docs/dispatch.md "Splitting").
pub const LISTING_ENV: [&str; 9] = [
    "GOOS",
    "GOARCH",
    "GOFLAGS",
    "CGO_ENABLED",
    "GOEXPERIMENT",
    "GOWORK",
    "GO111MODULE",
    "GOTOOLCHAIN",
    "GOENV",
];

/// This machine's `go`, fit to list the machines' packages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalGo {
    /// The `go` on this machine's PATH.
    pub path: std::path::PathBuf,
    /// The machines' GOOS and GOARCH, from the `go version` line every
    /// machine's `go` capability row records (`go version go1.19.8
    /// linux/amd64` → `linux`, `amd64`); `None` when the line names none.
    pub platform: Option<(String, String)>,
}

/// The GOOS and GOARCH a `go version` line names (its last word,
/// `linux/amd64`).
pub fn version_platform(line: &str) -> Option<(String, String)> {
    let word = line.split_whitespace().last()?;
    let (os, arch) = word.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    (ok(os) && ok(arch)).then(|| (os.to_string(), arch.to_string()))
}

/// The environment changes of a `go` run on this machine that must see
/// what a machine's `go test` sees: every [`LISTING_ENV`] variable removed
/// (nothing of this machine's shell reaches a machine), `GOENV=off` (this
/// machine's `go env -w` file is not the machines'), GOOS/GOARCH pinned to
/// `platform` (the machines'), then the suite's own `env` entries for
/// those variables (what the shards' `go test` is given).
pub fn listing_env(
    platform: Option<&(String, String)>,
    env: &[(String, String)],
) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> =
        LISTING_ENV.iter().map(|k| (k.to_string(), None)).collect();
    out.push(("GOENV".into(), Some("off".into())));
    if let Some((os, arch)) = platform {
        out.push(("GOOS".into(), Some(os.clone())));
        out.push(("GOARCH".into(), Some(arch.clone())));
    }
    for (k, v) in env {
        if LISTING_ENV.contains(&k.as_str()) {
            out.push((k.clone(), Some(v.clone())));
        }
    }
    out
}

/// This machine's `go`, when listing with it is honest: the first line of
/// its `go version` (which names the version and GOOS/GOARCH), run
/// without this machine's Go variables ([`listing_env`]), must equal
/// every machine's capability row version (`versions`: machine id →
/// version). Fast, so it refuses before anything is shipped.
///
/// Errors: `split-list-unavailable` (no go here, a machine without a
/// recorded version, or a different version).
pub async fn local_go(versions: &[(String, Option<String>)]) -> Result<LocalGo> {
    let go = exec::which("go").ok_or_else(|| ScheduleError::ListUnavailable {
        why: "no `go` on this machine's PATH".into(),
    })?;
    let out = exec::run(
        Cmd::new(&go)
            .arg("version")
            .timeout(LIST_TIMEOUT)
            .env_changes_from(&listing_env(None, &[])),
    )
    .await
    .map_err(|e| ScheduleError::ListUnavailable {
        why: format!("`{} version` did not start: {e}", go.display()),
    })?;
    let here = out
        .stdout_str()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    for (id, v) in versions {
        let v = v.as_deref().map(str::trim).unwrap_or("");
        if v.is_empty() {
            return Err(ScheduleError::ListUnavailable {
                why: format!("machine {id}'s go capability row records no version"),
            }
            .into());
        }
        if v != here {
            return Err(ScheduleError::ListUnavailable {
                why: format!("this machine has `{here}`, machine {id} has `{v}`"),
            }
            .into());
        }
    }
    Ok(LocalGo {
        path: go,
        platform: version_platform(&here),
    })
}

/// What the listing found at the SHA: the packages of `./...` and which
/// of them have test files (`TestGoFiles` or `XTestGoFiles`) in the
/// environment the machines' `go test` builds in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Import paths, sorted, each once.
    pub packages: Vec<String>,
    /// The packages that have test files: each must run them on its
    /// machine — one that ends `skip` there (no test files) did not.
    pub tested: BTreeSet<String>,
}

/// The `go list -f` template of a listing line: the import path, then
/// ` tests` when the package has test files.
const LIST_FORMAT: &str = "{{.ImportPath}}{{if or .TestGoFiles .XTestGoFiles}} tests{{end}}";

/// List the packages of `./...` at `sha` with this machine's `go` (`go`,
/// from [`local_go`]) and the suite `argv`'s [`list_flags`], in the
/// repository's stable scratch tree (under the repository lock, released
/// at the end): `go list -e -f … ./...` ([`Listing`]: import paths sorted,
/// and which have test files), in the
/// environment the machines' `go test` builds in ([`listing_env`], with
/// the shards' `env`). It runs while the machines connect, ship and check
/// out.
///
/// Errors: `split-list-failed` (`go list` failed or listed nothing), the
/// repository lock's and git's.
pub async fn list_packages(
    home: &Home,
    repo: &Repo,
    sha: &str,
    argv: &[String],
    env: &[(String, String)],
    go: &LocalGo,
    interrupt: &Interrupt,
) -> Result<Listing> {
    let bench = LocalBench::open(
        home,
        repo,
        interrupt,
        "certify",
        &crate::measure::progress::Silent,
    )
    .await?;
    let scratch = bench.checkout(sha).await?;
    // The listing decides what the shards must cover: it is of exactly the
    // commit's tree, or there is none.
    if let Some(why) = scratch.verify_tree().await? {
        let _ = scratch.remove().await;
        return Err(ScheduleError::ListFailed {
            sha: sha.to_string(),
            detail: why,
        }
        .into());
    }
    let listed = exec::run(
        Cmd::new(&go.path)
            .args(["list", "-e", "-f", LIST_FORMAT])
            .args(list_flags(argv))
            .arg("./...")
            .cwd(&scratch.path)
            .timeout(LIST_TIMEOUT)
            .env_changes_from(&listing_env(go.platform.as_ref(), env)),
    )
    .await;
    let _ = scratch.remove().await;
    drop(bench);
    let failed = |detail: String| ScheduleError::ListFailed {
        sha: sha.to_string(),
        detail: detail.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    let listed = listed.map_err(|e| failed(format!("`go list` did not start: {e}")))?;
    if !listed.status.success() {
        return Err(failed(format!(
            "`go list -e ./...` {:?}: {}",
            listed.status,
            listed.stderr_str()
        ))
        .into());
    }
    let listing = parse_listing(&listed.stdout_str());
    if listing.packages.is_empty() {
        return Err(failed("`go list -e ./...` listed no package".into()).into());
    }
    Ok(listing)
}

/// A [`Listing`] from `go list -e -f` `LIST_FORMAT` output.
pub fn parse_listing(text: &str) -> Listing {
    let mut out = Listing::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (pkg, tests) = match line.strip_suffix(" tests") {
            Some(p) => (p.trim(), true),
            None => (line, false),
        };
        out.packages.push(pkg.to_string());
        if tests {
            out.tested.insert(pkg.to_string());
        }
    }
    out.packages.sort();
    out.packages.dedup();
    out
}

/// What one shard's stream covered, against what it was assigned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardCoverage {
    /// Assigned packages the stream never ended.
    pub missing: Vec<String>,
    /// Packages the stream ended more than once, or that it was not assigned.
    pub doubled: Vec<String>,
    /// Packages with test files at the SHA (the listing's) that the stream
    /// ended `skip`: the machine built none of their tests (its own
    /// `GOFLAGS`, a build constraint of its platform).
    pub untested: Vec<String>,
}

impl ShardCoverage {
    /// True when the shard ended exactly its packages, each once, and ran
    /// the tests of every one that has test files.
    pub fn complete(&self) -> bool {
        self.missing.is_empty() && self.doubled.is_empty() && self.untested.is_empty()
    }
}

/// The invocation's coverage: the union of every shard's package-level
/// terminal events against the listed set.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    /// True when every listed package ended exactly once over all shards.
    pub complete: bool,
    /// How many packages were listed.
    pub listed: usize,
    /// Listed packages no shard ended.
    pub missing: Vec<String>,
    /// Packages ended more than once over all shards, or never listed.
    pub doubled: Vec<String>,
    /// Listed packages with test files that a shard ended `skip` (no test
    /// files on its machine): their tests never ran.
    pub untested: Vec<String>,
}

/// Prove coverage: the `listed` packages against the packages each shard
/// ended (`ends[i]`, one entry per terminal event, duplicates kept) and was
/// assigned (`assigned[i]`) — each listed package ended exactly once, and
/// every one the listing found test files in ended having run them (not
/// `skip`). Returns the invocation's coverage and each shard's.
pub fn coverage(
    listed: &Listing,
    assigned: &[Vec<String>],
    ends: &[Vec<crate::report::gojson::PackageEnd>],
) -> (Coverage, Vec<ShardCoverage>) {
    let listed_set: BTreeSet<&String> = listed.packages.iter().collect();
    let mut seen: BTreeMap<&String, usize> = BTreeMap::new();
    let mut untested_all: BTreeSet<String> = BTreeSet::new();
    let mut per = Vec::new();
    for (a, e) in assigned.iter().zip(ends) {
        let mine: BTreeSet<&String> = a.iter().collect();
        let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
        let mut untested: BTreeSet<String> = BTreeSet::new();
        for end in e {
            let p = &end.package;
            *counts.entry(p).or_default() += 1;
            *seen.entry(p).or_default() += 1;
            if end.action == "skip" && listed.tested.contains(p) {
                untested.insert(p.clone());
            }
        }
        untested_all.extend(untested.iter().cloned());
        per.push(ShardCoverage {
            missing: a
                .iter()
                .filter(|p| !counts.contains_key(p))
                .cloned()
                .collect(),
            doubled: counts
                .iter()
                .filter(|(p, n)| **n > 1 || !mine.contains(*p))
                .map(|(p, _)| (*p).clone())
                .collect(),
            untested: untested.into_iter().collect(),
        });
    }
    let missing: Vec<String> = listed
        .packages
        .iter()
        .filter(|p| !seen.contains_key(p))
        .cloned()
        .collect();
    let doubled: Vec<String> = seen
        .iter()
        .filter(|(p, n)| **n > 1 || !listed_set.contains(*p))
        .map(|(p, _)| (*p).clone())
        .collect();
    let untested: Vec<String> = untested_all.into_iter().collect();
    (
        Coverage {
            complete: missing.is_empty() && doubled.is_empty() && untested.is_empty(),
            listed: listed.packages.len(),
            missing,
            doubled,
            untested,
        },
        per,
    )
}

/// Tests that ran in more than one shard of a `--split` whose suite splits
/// itself (junit-xml: [`crate::report::Measurement::test_ids`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeats {
    /// How many runs beyond the first of each test the shards' counts
    /// hold: subtracted, each test is counted once.
    pub extra: u64,
    /// How many distinct tests ran in more than one shard.
    pub tests: usize,
    /// Every shard ran exactly the same tests: the suite ignored
    /// `SAPHAN_SHARD_INDEX`/`SAPHAN_SHARD_COUNT`.
    pub all_same: bool,
}

/// The tests that ran in more than one of `shards` (each a shard's test
/// identities, duplicates kept: a glob that caught a report and its re-run
/// counts both, within one shard); `None` when no test ran in two shards.
/// Per test, the shard that ran it most times counts; the runs in the
/// other shards are [`Repeats::extra`].
pub fn repeats(shards: &[&[u64]]) -> Option<Repeats> {
    let per: Vec<HashMap<u64, u64>> = shards
        .iter()
        .map(|ids| {
            let mut m: HashMap<u64, u64> = HashMap::new();
            for id in ids.iter() {
                *m.entry(*id).or_default() += 1;
            }
            m
        })
        .collect();
    let mut all: HashMap<u64, (u64, u64, usize)> = HashMap::new();
    for m in &per {
        for (id, n) in m {
            let e = all.entry(*id).or_default();
            e.0 += n;
            e.1 = e.1.max(*n);
            e.2 += 1;
        }
    }
    let tests = all.values().filter(|(_, _, shards)| *shards > 1).count();
    if tests == 0 {
        return None;
    }
    Some(Repeats {
        extra: all.values().map(|(total, max, _)| total - max).sum(),
        tests,
        all_same: per.len() > 1 && per.iter().all(|m| *m == per[0]),
    })
}

/// The note of a split whose shards ran tests more than once (`sum`: the
/// shards' counts added up).
pub fn repeats_note(r: &Repeats, sum: u64) -> String {
    let once = sum.saturating_sub(r.extra);
    if r.all_same {
        format!(
            "shards-repeated: the suite ignored its shard variables (SAPHAN_SHARD_INDEX, SAPHAN_SHARD_COUNT): every shard ran the same tests — each test is counted once ({once}, not {sum}); make the suite run only its shard's share"
        )
    } else {
        format!(
            "shards-repeated: {} test(s) ran in more than one shard (the suite does not split exactly by SAPHAN_SHARD_INDEX and SAPHAN_SHARD_COUNT) — each test is counted once ({once}, not {sum})",
            r.tests
        )
    }
}

/// The note of a shard whose stream did not end exactly its packages.
pub fn coverage_note(c: &ShardCoverage) -> String {
    let mut parts = Vec::new();
    if !c.missing.is_empty() {
        parts.push(format!(
            "{} assigned package(s) never reported an end: {}",
            c.missing.len(),
            c.missing.join(", ")
        ));
    }
    if !c.doubled.is_empty() {
        parts.push(format!(
            "{} package(s) ended twice or were not assigned: {}",
            c.doubled.len(),
            c.doubled.join(", ")
        ));
    }
    if !c.untested.is_empty() {
        parts.push(format!(
            "{} package(s) have test files at the SHA but ended `skip` (no test files) on the machine, so their tests never ran: {} — the machine's own environment dropped them (its `go env GOFLAGS` tags, a build constraint of its platform)",
            c.untested.len(),
            c.untested.join(", ")
        ));
    }
    format!(
        "{}: {} — the shards together did not run the whole suite, so the verdict cannot be green",
        crate::report::FailureKind::ShardCoverageIncomplete,
        parts.join("; ")
    )
}

/// The note of a shard that left assigned packages without an end while
/// its `go test` exited `code`: go said the run failed, the shard's own
/// verdict (never green) stands, as an unsplit run's would.
pub fn told_note(c: &ShardCoverage, code: i32) -> String {
    format!(
        "{}: {} assigned package(s) never reported an end: {} — the shard's `go test` exited {code}, so it failed by go's own account (go 1.19 writes no event for an untested package that fails to build); the verdict is that failure's, never green",
        crate::report::FailureKind::ShardCoverageIncomplete,
        c.missing.len(),
        c.missing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn default_go_and_declared_go_test_json_over_all_packages_split() {
        assert_eq!(
            go_split_at(&s(&["go", "test", "-count=1", "-json", "./..."])),
            Some(4)
        );
        assert_eq!(
            go_split_at(&s(&["go", "test", "-json", "-run", "TestX", "./..."])),
            None,
            "a flag value apart from its flag reads as a second pattern: not split"
        );
        assert_eq!(
            go_split_at(&s(&["/usr/bin/go", "test", "-json", "-race", "./..."])),
            Some(4)
        );
        assert_eq!(go_split_at(&s(&["go", "test", "./..."])), None, "no -json");
        assert_eq!(go_split_at(&s(&["go", "test", "-json", "./a/..."])), None);
        assert_eq!(
            go_split_at(&s(&["gotestsum", "test", "-json", "./..."])),
            None
        );
    }

    #[test]
    fn a_shard_argv_keeps_the_flags_and_runs_its_packages_uncached() {
        let argv = s(&["/usr/bin/go", "test", "-json", "-race", "./..."]);
        assert_eq!(
            shard_argv(&argv, 4, &s(&["m/a", "m/b"])),
            s(&[
                "/usr/bin/go",
                "test",
                "-count=1",
                "-json",
                "-race",
                "m/a",
                "m/b"
            ])
        );
        let argv = s(&["go", "test", "-count=1", "-json", "./..."]);
        assert_eq!(
            shard_argv(&argv, 4, &s(&["m/a"])),
            s(&["go", "test", "-count=1", "-json", "m/a"])
        );
    }

    #[test]
    fn go_list_gets_the_flags_that_choose_packages() {
        let argv = s(&[
            "go",
            "test",
            "-json",
            "-tags=integration",
            "-race",
            "-mod=mod",
            "./...",
        ]);
        assert_eq!(list_flags(&argv), s(&["-tags=integration", "-mod=mod"]));
        // The two-argument form, and two dashes, as Go's flag package reads them.
        let argv = s(&[
            "go", "test", "-json", "-tags", "x,y", "--mod", "vendor", "-modfile", "f.mod", "-run",
            "TestA", "./...",
        ]);
        assert_eq!(
            list_flags(&argv),
            s(&["-tags=x,y", "-mod=vendor", "-modfile=f.mod"])
        );
    }

    #[test]
    fn the_listing_sees_the_machines_go_environment_not_this_machines() {
        assert_eq!(
            version_platform("go version go1.19.8 linux/amd64"),
            Some(("linux".into(), "amd64".into()))
        );
        assert_eq!(version_platform("go version devel"), None);
        let env = listing_env(
            Some(&("linux".into(), "amd64".into())),
            &[
                ("GOFLAGS".into(), "-tags=x".into()),
                ("HOME".into(), "/h".into()),
            ],
        );
        // Applied in order: the last change of a variable wins.
        let last = |k: &str| {
            env.iter()
                .rev()
                .find(|(e, _)| e == k)
                .map(|(_, v)| v.clone())
        };
        for k in LISTING_ENV {
            assert!(last(k).is_some(), "{k} is not set or removed");
        }
        assert_eq!(last("GOOS"), Some(Some("linux".into())));
        assert_eq!(last("GOARCH"), Some(Some("amd64".into())));
        assert_eq!(last("GOENV"), Some(Some("off".into())));
        assert_eq!(
            last("GOFLAGS"),
            Some(Some("-tags=x".into())),
            "the suite's own"
        );
        assert_eq!(last("CGO_ENABLED"), Some(None));
        assert_eq!(last("GOWORK"), Some(None));
        assert_eq!(last("HOME"), None, "not a listing variable");
    }

    #[test]
    fn no_history_gives_equal_counts_and_history_balances_by_time() {
        let pkgs: Vec<String> = (0..8).map(|i| format!("m/p{i}")).collect();
        let three = s(&["a", "b", "c"]);
        let shards = assign(&pkgs, &three, &History::default());
        let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 3, 2]);
        let mut h = History::default();
        h.seconds.insert("m/p0".to_string(), 10.0);
        for p in &pkgs[1..] {
            h.seconds.insert(p.clone(), 1.0);
        }
        let shards = assign(&pkgs, &three[..2], &h);
        assert_eq!(shards[0], s(&["m/p0"]), "the long package alone");
        assert_eq!(shards[1].len(), 7);
        // More machines than packages: the others get nothing.
        let one = assign(&s(&["m/a"]), &s(&["a", "b", "c", "d"]), &History::default());
        assert_eq!(one.iter().filter(|p| !p.is_empty()).count(), 1);
    }

    #[test]
    fn a_package_stays_on_the_machine_that_ran_it_when_the_balance_allows() {
        let pkgs: Vec<String> = (0..8).map(|i| format!("m/p{i}")).collect();
        let machines = s(&["m0", "m1", "m3", "m4"]);
        let mut h = History::default();
        // Equal seconds but for a few milliseconds; each package last ran on
        // machine (i + 1) % 4, which plain LPT by index would not give.
        for (i, p) in pkgs.iter().enumerate() {
            h.seconds.insert(p.clone(), 2.0 + i as f64 * 0.001);
            h.machine.insert(p.clone(), machines[(i + 1) % 4].clone());
        }
        let shards = assign(&pkgs, &machines, &h);
        for (i, p) in pkgs.iter().enumerate() {
            assert!(shards[(i + 1) % 4].contains(p), "{p}: {shards:?}");
        }
        // Locality never outweighs the balance: a machine that ran all
        // eight gets its fair share only.
        for p in &pkgs {
            h.machine.insert(p.clone(), "m0".into());
        }
        let shards = assign(&pkgs, &machines, &h);
        assert!(shards.iter().all(|p| p.len() == 2), "{shards:?}");
    }

    #[test]
    fn one_bad_run_does_not_make_the_plan() {
        let run = |m: &str, secs: &[(&str, f64)]| {
            (
                m.to_string(),
                secs.iter()
                    .map(|(p, s)| (p.to_string(), *s))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
        };
        let normal = [("m/a", 1.0), ("m/b", 1.0), ("m/c", 1.0), ("m/d", 1.0)];
        let bad = [("m/a", 1.0), ("m/b", 1.0), ("m/c", 1.0), ("m/d", 60.0)];
        let h = history_of([run("m0", &normal), run("m1", &normal), run("m0", &bad)]);
        assert_eq!(h.seconds["m/d"], 1.0, "the median of 1, 1, 60");
        assert_eq!(h.machine["m/d"], "m0", "the latest run's machine");
        let pkgs = s(&["m/a", "m/b", "m/c", "m/d"]);
        let shards = assign(&pkgs, &s(&["m0", "m1"]), &h);
        assert!(shards.iter().all(|p| p.len() == 2), "{shards:?}");
        // Only the last HISTORY_RUNS count: five slow runs after a fast one.
        let mut runs = vec![run("m0", &normal)];
        runs.extend((0..HISTORY_RUNS).map(|_| run("m1", &[("m/a", 9.0)])));
        assert_eq!(history_of(runs).seconds["m/a"], 9.0);
        // An even number of runs: the mean of the middle two.
        let h = history_of([run("m0", &[("m/a", 1.0)]), run("m0", &[("m/a", 3.0)])]);
        assert_eq!(h.seconds["m/a"], 2.0);
    }

    /// Each package ending `pass`.
    fn ends(v: &[&str]) -> Vec<crate::report::gojson::PackageEnd> {
        v.iter()
            .map(|p| crate::report::gojson::PackageEnd {
                package: p.to_string(),
                action: "pass".into(),
                elapsed: None,
            })
            .collect()
    }

    #[test]
    fn coverage_names_the_missing_and_the_doubled() {
        let listed = Listing {
            packages: s(&["m/a", "m/b", "m/c"]),
            tested: Default::default(),
        };
        let s = |v: &[&str]| s(v);
        let assigned = vec![s(&["m/a", "m/b"]), s(&["m/c"])];
        let (c, per) = coverage(&listed, &assigned, &[ends(&["m/a", "m/b"]), ends(&["m/c"])]);
        assert!(c.complete && per.iter().all(ShardCoverage::complete));
        let (c, per) = coverage(&listed, &assigned, &[ends(&["m/a"]), ends(&["m/c", "m/c"])]);
        assert!(!c.complete);
        assert_eq!(c.missing, s(&["m/b"]));
        assert_eq!(c.doubled, s(&["m/c"]));
        assert_eq!(per[0].missing, s(&["m/b"]));
        assert_eq!(per[1].doubled, s(&["m/c"]));
        let (c, per) = coverage(
            &listed,
            &assigned,
            &[ends(&["m/a", "m/b", "m/c"]), ends(&["m/c"])],
        );
        assert_eq!(c.doubled, s(&["m/c"]));
        assert_eq!(per[0].doubled, s(&["m/c"]), "not assigned to shard 0");
    }

    #[test]
    fn tests_run_by_more_than_one_shard_count_once() {
        assert_eq!(repeats(&[&[1, 2], &[3]]), None);
        let same = repeats(&[&[1, 2, 3], &[3, 2, 1]]).unwrap();
        assert_eq!((same.extra, same.tests, same.all_same), (3, 3, true));
        assert!(repeats_note(&same, 6).contains("ignored its shard variables"));
        assert!(repeats_note(&same, 6).contains("(3, not 6)"));
        // A report and its re-run in one shard still count twice there.
        let part = repeats(&[&[1, 1, 2], &[2, 4]]).unwrap();
        assert_eq!((part.extra, part.tests, part.all_same), (1, 1, false));
    }

    #[test]
    fn a_package_with_test_files_that_ended_skip_is_not_covered() {
        let listed = parse_listing("m/a tests\nm/b\nm/c tests\n");
        assert_eq!(listed.packages, s(&["m/a", "m/b", "m/c"]));
        let skip = |p: &str| crate::report::gojson::PackageEnd {
            package: p.into(),
            action: "skip".into(),
            elapsed: None,
        };
        let assigned = vec![s(&["m/a", "m/b"]), s(&["m/c"])];
        // m/b has no test files: its skip is its due; m/c's is not.
        let mut first = ends(&["m/a"]);
        first.push(skip("m/b"));
        let (c, per) = coverage(&listed, &assigned, &[first, vec![skip("m/c")]]);
        assert!(!c.complete);
        assert_eq!(c.untested, s(&["m/c"]));
        assert!(per[0].complete());
        assert_eq!(per[1].untested, s(&["m/c"]));
        assert!(coverage_note(&per[1]).contains("ended `skip`"));
    }
}
