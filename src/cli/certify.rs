//! `saphan certify` and `saphan records`.

use super::{Ctx, junit, out, out_json, visible, why};
use crate::commands::certify::{self, Certified, Class, Settings};
use crate::error::{Exit, Result};
use crate::measure::progress::{Event, Progress};
use crate::record::{Avail, PointerOutcome};
use crate::report::Verdict;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// `--timeout`: the same budget rule as `verify.<suite>.timeout`
/// ([`crate::config::schema::parse_budget`]: 1s to 30d).
fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    crate::config::schema::parse_budget(s)
}

/// Certify an exact SHA: run the declared suite in a fresh detached worktree,
/// append the record, move refs/saphan/verified only on green.
#[derive(Debug, Args)]
pub struct CertifyArgs {
    /// The repository (any path inside it).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The revision to certify (resolved to a full SHA).
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub sha: String,
    /// Budget for this attempt (e.g. 90s, 20m); always wins over verify.full.timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Run on these fleet machines instead of this one (comma-separated ids).
    /// Each must be admitted from the ledger (`machine measure`,
    /// `machine probe`); see docs/dispatch.md. The pointer moves only when
    /// every named machine is green. Without it, --class container uses this
    /// machine's engine (fleet row `local`).
    #[arg(long, value_name = "ID[,ID…]", value_delimiter = ',')]
    pub machine: Vec<String>,
    /// Run directly on the machine (host) or in a container on its Docker engine.
    #[arg(long, default_value = "host", value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(Class::ALL), |s: String| Class::parse(&s).expect("a listed class")))]
    pub class: Class,
    /// The trunk branch the verified pointer follows (default: the one it
    /// already follows, .git/saphan/verified-trunk; else origin/HEAD's
    /// branch, else the branch checked out in the main worktree). Another
    /// branch than the followed one is refused (trunk-mismatch). A green SHA
    /// that is not on trunk is recorded but never moves the pointer.
    #[arg(long, value_name = "REF")]
    pub trunk: Option<String>,
    /// --class container: the suite image, pinned — sha256:<image id> or
    /// NAME@sha256:<registry digest>; never a tag, never pulled.
    #[arg(long, value_name = "PIN")]
    pub image: Option<String>,
    /// --class container: give the suite the engine's default network
    /// (without it the container has no network).
    #[arg(long)]
    pub network: bool,
    /// Split the suite over the --machine machines, one shard each; the
    /// verdict is taken over their union (docs/dispatch.md "Splitting").
    /// go-test-json suites are split by package and coverage is proven;
    /// other suites get SAPHAN_SHARD_INDEX/SAPHAN_SHARD_COUNT and an
    /// advisory result. An infrastructure failure re-runs once elsewhere.
    #[arg(long)]
    pub split: bool,
    /// Seal the suite in its own mount and PID namespaces (bubblewrap):
    /// `auto` where the machine can (the default; the record and one line
    /// say where it cannot), `required` (refuse a machine that cannot),
    /// `off`. Wins over verify.full.seal; see docs/certify.md "The seal".
    #[arg(long, value_name = "auto|required|off", value_parser = parse_seal)]
    pub seal: Option<crate::seal::Mode>,
    /// Also write the attempt as one JUnit XML report to FILE (replaced
    /// atomically, on every verdict): a testcase per test, failures with
    /// their output, the verdict in the testsuite's properties; for
    /// --split, the union of the shards (docs/certify.md).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Before admission, re-measure the --machine machines' stale rows
    /// (and re-probe what a probe said is not present), as `saphan machine
    /// remeasure` does, saying what changed on stderr; then certify.
    #[arg(long)]
    pub remeasure: bool,
    /// With --machine @POOL: borrow N nodes of the Slurm pool this time
    /// instead of its row's `nodes` (docs/slurm.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
}

/// `--seal`'s value.
fn parse_seal(s: &str) -> std::result::Result<crate::seal::Mode, String> {
    crate::seal::Mode::parse(s)
        .ok_or_else(|| format!("use one of {}", crate::seal::Mode::ALL.join(", ")))
}

/// List the attempt records of a repository, or show one.
///
/// One line per record, oldest first: id, start (UTC), suite seconds, verb,
/// verdict (a shard of a `--split` says so: its green is not the SHA's),
/// SHA, machine, count, failure. The filters combine.
#[derive(Debug, Args)]
pub struct RecordsArgs {
    /// The repository (any path inside it).
    #[arg(long, default_value = ".", global = true)]
    pub repo: PathBuf,
    /// Only records of a SHA starting with this (hex, as `git log` shows).
    #[arg(long, value_name = "PREFIX")]
    pub sha: Option<String>,
    /// Only records of this machine (`local` or a fleet id).
    #[arg(long, value_name = "ID")]
    pub machine: Option<String>,
    /// Only records with this verdict.
    #[arg(long, value_name = "VERDICT", value_parser = ["green", "red", "measurement-failed"])]
    pub verdict: Option<String>,
    /// Only the last N records (after the other filters).
    #[arg(short = 'n', value_name = "N")]
    pub last: Option<usize>,
    #[command(subcommand)]
    pub cmd: Option<RecordsCmd>,
}

/// A filter given to `records show`, which shows one record.
#[derive(Debug, thiserror::Error)]
#[error(
    "`records show` shows the one record its id names; {0} filters the listing — drop it, or list with `saphan records {0} …`"
)]
pub struct FilterWithShow(&'static str);

impl crate::error::Refusal for FilterWithShow {
    fn name(&self) -> &'static str {
        "usage"
    }
}

/// `records` sub-verbs.
#[derive(Debug, Subcommand)]
pub enum RecordsCmd {
    /// Show one record: what it measured, why it is not green (each failing
    /// test's output, from the kept log), where its log is.
    Show {
        /// The record id (first column of `saphan records`), a prefix of it
        /// that only one record's id starts with, or `last` (the newest).
        id: String,
        /// Print the attempt's kept suite log instead (checked against the
        /// record's `suite_log_sha256`; refused when it does not match).
        #[arg(long)]
        log: bool,
    },
}

/// This machine's attempt as one spinner line on a terminal.
struct Spinner(Option<indicatif::ProgressBar>);

impl Progress for Spinner {
    fn event(&self, machine: &str, event: &Event<'_>) {
        // A wait for a lock is said with or without a terminal.
        if let Event::Waiting { .. } = event {
            match &self.0 {
                Some(pb) => {
                    pb.set_message(event_words(event));
                    pb.enable_steady_tick(Duration::from_millis(120));
                }
                None => say!("{machine}: {}", event_words(event)),
            }
            return;
        }
        let Some(pb) = &self.0 else { return };
        match event {
            Event::Run { sha, argv, budget } => {
                pb.set_message(format!(
                    "certify {}: running `{}` (budget {}, {})",
                    &sha[..12.min(sha.len())],
                    argv.join(" "),
                    humantime::format_duration(budget.duration),
                    budget.source
                ));
                pb.enable_steady_tick(Duration::from_millis(120));
            }
            Event::Done { .. } => pb.finish_and_clear(),
            _ => {}
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// Plain progress lines on stderr (no terminal), or one indicatif line per
/// machine.
pub struct Lines {
    bars: std::sync::Mutex<Vec<(String, indicatif::ProgressBar)>>,
    /// On a terminal: the lines' home, and whether a machine's line is
    /// added at its first event (the machines of a selector — `@admitted`,
    /// a pool's nodes — are known only once chosen).
    multi: Option<(indicatif::MultiProgress, bool)>,
    width: usize,
    start: Instant,
}

impl Lines {
    /// One line per machine in `ids`; indicatif when stderr is a terminal
    /// and `quiet` is false, plain lines otherwise (none when `quiet`).
    /// `ids` of one selector (`@admitted`, `@POOL`): a line per machine
    /// once it is chosen.
    pub fn new(ids: &[String], quiet: bool) -> Lines {
        use std::io::IsTerminal;
        let selector = match ids {
            [one] => one.strip_prefix('@'),
            _ => None,
        };
        let width = match selector {
            Some(p) => (p.len() + 4).max(8),
            None => ids.iter().map(String::len).max().unwrap_or(0),
        };
        let lines = Lines {
            bars: std::sync::Mutex::new(Vec::new()),
            multi: (!quiet && std::io::stderr().is_terminal())
                .then(|| (indicatif::MultiProgress::new(), selector.is_some())),
            width,
            start: Instant::now(),
        };
        if selector.is_none() && lines.multi.is_some() {
            for id in ids {
                lines.add(id);
            }
        }
        lines
    }
    /// A new line for `id` (the caller checked there is a terminal).
    fn add(&self, id: &str) -> Option<indicatif::ProgressBar> {
        let (mp, _) = self.multi.as_ref()?;
        let style =
            indicatif::ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let pb = mp.add(indicatif::ProgressBar::new_spinner());
        pb.set_style(style);
        pb.set_prefix(format!("{id:w$}", w = self.width));
        pb.enable_steady_tick(Duration::from_millis(120));
        self.bars
            .lock()
            .expect("lines")
            .push((id.to_string(), pb.clone()));
        Some(pb)
    }
    /// The line of `machine`; added at its first step when the machines
    /// were chosen by a selector.
    fn bar(&self, machine: &str, event: &Event<'_>) -> Option<indicatif::ProgressBar> {
        let found = self
            .bars
            .lock()
            .expect("lines")
            .iter()
            .find(|(id, _)| id == machine)
            .map(|(_, pb)| pb.clone());
        let step = !matches!(event, Event::Waiting { .. } | Event::Chosen { .. });
        match (&found, &self.multi) {
            (None, Some((_, true))) if step && !machine.is_empty() => self.add(machine),
            _ => found,
        }
    }
    /// Finish every line still running; a line that finished keeps the
    /// time it took (a finish redraws the line, and `{elapsed}` would read
    /// the whole invocation's time).
    pub fn finish(&self) {
        for (_, pb) in self.bars.lock().expect("lines").iter() {
            if !pb.is_finished() {
                pb.finish();
            }
        }
    }
}

/// The words of a progress line: `connect`, `ship`, `shipped 312 B` /
/// `shipped 1.21 MiB` (binary units, as indicatif's `HumanBytes`),
/// `run`, `build: go build ./...`, `collect`, `done: green`.
pub(crate) fn event_words(event: &Event<'_>) -> String {
    match event {
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
            copy_of,
        } => {
            let what = match packages.len() {
                0 => "the suite's own splitter".to_string(),
                1 => format!("1 package ({})", packages[0]),
                n if n <= 3 => format!("{n} packages ({})", packages.join(", ")),
                n => format!("{n} packages ({}, …)", packages[..3].join(", ")),
            };
            let retry = match (retry_of, copy_of) {
                (Some(r), _) => format!(", re-running attempt {r}"),
                (None, Some(m)) => format!(
                    ", a copy of {m}'s (it left a ping unanswered; counted only if {m} is lost)"
                ),
                (None, None) => String::new(),
            };
            format!("shard {}/{count}: {what}{retry}", index + 1)
        }
        Event::Waiting { wait } => waiting_words(wait),
        Event::Chosen {
            selector,
            chosen,
            left_out,
        } => chosen_words(selector, chosen, left_out),
        Event::Collect => "collect".into(),
        Event::Done { verdict } => format!("done: {}", verdict.as_str()),
    }
}

/// `--machine @admitted: chose m0, m1 (2 of 3 machines)`, then one line per
/// machine left out with its refusal name and first remedy line.
fn chosen_words(
    selector: &str,
    chosen: &[String],
    left_out: &[crate::measure::progress::LeftOutMachine],
) -> String {
    let mut s = format!(
        "--machine {selector}: chose {} ({} of {} machines)\n",
        chosen.join(", "),
        chosen.len(),
        chosen.len() + left_out.len()
    );
    for r in left_out {
        s.push_str(&format!(
            "  left out {}: {}: {}\n",
            r.machine, r.name, r.remedy
        ));
    }
    s
}

/// `waiting for the repository lock /r/.git/saphan/lock — held by certify
/// (pid 4242 on laptop) since 2026-12-01T03:00:04Z; waited 10s`.
pub(crate) fn waiting_words(w: &crate::record::wait::LockWait) -> String {
    let holder = match &w.holder {
        Some(h) => format!(
            "held by {} (pid {} on {}) since {}",
            h.verb, h.pid, h.host, h.since
        ),
        None => "held by another run (it does not say which)".into(),
    };
    format!(
        "waiting for {} — {holder}; waited {}",
        w.lock,
        humantime::format_duration(Duration::from_secs(w.waited.as_secs()))
    )
}

impl Progress for Lines {
    fn event(&self, machine: &str, event: &Event<'_>) {
        let what = event_words(event);
        if let Event::Chosen { .. } = event {
            match &self.multi {
                Some((mp, _)) => {
                    let _ = mp.println(what.trim_end());
                }
                None => say_part!("{what}"),
            }
            return;
        }
        match self.bar(machine, event) {
            // A finished machine's line stays as it ended.
            Some(pb) if pb.is_finished() => {}
            Some(pb) => {
                if let Event::Done { .. } = event {
                    // Its timer stops: the time it took, frozen into the
                    // message, under a template without `{elapsed}`.
                    let took = format!("{:#}", indicatif::HumanDuration(pb.elapsed()));
                    if let Ok(style) =
                        indicatif::ProgressStyle::with_template("{spinner} {prefix:.bold} {msg}")
                    {
                        pb.set_style(style);
                        pb.finish_with_message(format!("{what} ({took})"));
                    } else {
                        pb.finish_with_message(what);
                    }
                } else {
                    pb.set_message(what);
                }
            }
            None if self.multi.is_none() => {
                let e = self.start.elapsed().as_secs();
                say!("{machine}: {what} ({:02}:{:02})", e / 60, e % 60);
            }
            // A machine without a line (this one's repository lock, for
            // the pointer): its wait is said above the lines.
            None => {
                if let (Event::Waiting { .. }, Some((mp, _))) = (event, &self.multi) {
                    let _ = mp.println(format!("{machine}: {what}"));
                }
            }
        }
    }
}

/// What a person sees of the suite on a non-green verdict: `(json key,
/// header, text)`. The suite log's tail (stdout then stderr) when the
/// report cannot name failures (`exitcode`), or a junit-xml suite wrote
/// nothing on stderr — a suite that prints its failures on stdout (pytest)
/// shows them; otherwise (and always for go-test-json, whose stdout is the
/// event stream) the last lines of its stderr.
///
/// The failing tests' output is printed above it (`printed`): a log tail
/// that repeats it (pytest's FAILURES section) is cut to what follows the
/// last line it repeats (the summary), said in its header, and left out
/// when nothing follows — the failure text is not printed twice.
fn failure_tail(
    r: &crate::record::Record,
    log_tail: &str,
    stderr_tail: &str,
    printed: &[crate::report::TestOutput],
) -> Option<(&'static str, String, String)> {
    if r.verdict == Verdict::Green {
        return None;
    }
    let use_log = !log_tail.trim().is_empty()
        && (r.report == crate::report::ReportKind::Exitcode
            || (r.report == crate::report::ReportKind::JunitXml && stderr_tail.trim().is_empty()));
    if use_log {
        let log = r.suite_log.as_deref().unwrap_or("not kept");
        let tail = log_tail.trim_end();
        match after_repeats(tail, printed) {
            None => Some((
                "log_tail",
                format!("last lines of the suite's log ({log})"),
                tail.to_string(),
            )),
            Some(rest) if rest.trim().is_empty() => None,
            Some(rest) => Some((
                "log_tail",
                format!(
                    "the suite's log after the failing tests' output above ({log}; `saphan records show {} --log` prints all of it)",
                    r.id
                ),
                rest.trim_start_matches('\n').to_string(),
            )),
        }
    } else if !stderr_tail.trim().is_empty() {
        Some((
            "stderr_tail",
            "last lines of the suite's stderr".into(),
            stderr_tail.trim_end().to_string(),
        ))
    } else {
        None
    }
}

/// When `tail` repeats every line of the failing tests' output `printed`
/// (compared without surrounding whitespace, blank lines aside): the part
/// of `tail` after the last line that repeats one. `None` when nothing was
/// printed or some printed line is not in the tail.
fn after_repeats<'a>(tail: &'a str, printed: &[crate::report::TestOutput]) -> Option<&'a str> {
    let shown: std::collections::HashSet<&str> = printed
        .iter()
        .flat_map(|o| o.lines.iter())
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if shown.is_empty() {
        return None;
    }
    let lines: Vec<&str> = tail.lines().collect();
    let inside: std::collections::HashSet<&str> = lines.iter().map(|l| l.trim()).collect();
    if !shown.iter().all(|l| inside.contains(l)) {
        return None;
    }
    let last = lines.iter().rposition(|l| shown.contains(l.trim()))?;
    let offset: usize = lines[..=last].iter().map(|l| l.len() + 1).sum();
    Some(tail.get(offset.min(tail.len())..).unwrap_or(""))
}

/// What the failing names and the count can say beyond the record: the
/// command that re-runs each failing test alone, and the subtests apart.
#[derive(Debug, Default)]
pub(crate) struct Detail {
    /// How a failing name's re-run command is derived.
    pub rerun: crate::report::rerun::Rerun,
    /// go-test-json: how many distinct subtests ended (`TestA/sub`).
    pub subtests: Option<u64>,
}

impl Detail {
    /// Add what the human lines say beyond the record to its JSON object:
    /// `rerun`, `[{"test", "command"}]` for the failing names that have
    /// one, and `count_with_subtests` when subtests ended.
    fn add_json(&self, v: &mut serde_json::Value, r: &crate::record::Record) {
        if let Avail::Value(names) = &r.named_tests {
            let rerun: Vec<serde_json::Value> = names
                .iter()
                .filter_map(|n| {
                    self.rerun
                        .command(n)
                        .map(|c| serde_json::json!({"test": n, "command": c}))
                })
                .collect();
            if !rerun.is_empty() {
                v["rerun"] = serde_json::json!(rerun);
            }
        }
        if let (Some(sub), Some(n)) = (self.subtests, r.count.value())
            && sub > 0
        {
            v["count_with_subtests"] = serde_json::json!(n + sub);
        }
    }

    /// For record `r`, whose tests were `tests` when the verb still has
    /// them: the re-run context read from the commit (its root `go.mod`'s
    /// module, or its files for a pytest report), only on a verdict with
    /// failing names.
    pub(crate) async fn of(
        r: &crate::record::Record,
        tests: Option<&crate::report::Tests>,
    ) -> Detail {
        let subtests = tests
            .filter(|_| r.report == crate::report::ReportKind::GoTestJson)
            .map(|t| {
                t.iter()
                    .filter(|c| c.name.contains('/'))
                    .map(|c| (c.classname, c.name))
                    .collect::<std::collections::HashSet<_>>()
                    .len() as u64
            });
        let failing = matches!(&r.named_tests, Avail::Value(n) if !n.is_empty());
        let rerun = if failing {
            rerun_of(r).await
        } else {
            crate::report::rerun::Rerun::None
        };
        Detail { rerun, subtests }
    }
}

async fn rerun_of(r: &crate::record::Record) -> crate::report::rerun::Rerun {
    use crate::report::rerun::{self, Rerun};
    let top = std::path::Path::new(&r.repo);
    match r.report {
        crate::report::ReportKind::GoTestJson => {
            let module = crate::git::git(top, &["show", &format!("{}:go.mod", r.sha)])
                .await
                .ok()
                .and_then(|o| rerun::go_module(&o.stdout_str()));
            Rerun::Go {
                module,
                flags: crate::schedule::list_flags(&r.suite_argv),
            }
        }
        crate::report::ReportKind::JunitXml => {
            let Some(program) = rerun::pytest_program(&r.suite_argv) else {
                return Rerun::None;
            };
            let Ok(repo) = crate::git::Repo::open(top).await else {
                return Rerun::None;
            };
            match repo.tree_files(&r.sha).await {
                Ok(files) => Rerun::Pytest {
                    program,
                    files: files.iter().map(|f| f.to_string()).collect(),
                },
                Err(_) => Rerun::None,
            }
        }
        crate::report::ReportKind::Exitcode => Rerun::None,
    }
}

/// Run `certify`.
pub async fn run(ctx: &Ctx, a: CertifyArgs) -> Result<Exit> {
    let catalog = ctx.catalog()?;
    junit::check(a.junit.as_deref())?;
    let junit_path = a.junit;
    let settings = Settings {
        repo: a.repo,
        rev: Some(a.sha),
        timeout: a.timeout,
        machines: crate::dispatch::machine_ids(&a.machine)?,
        class: a.class,
        trunk: a.trunk,
        image: a.image,
        network: a.network,
        split: a.split,
        failover: a.split,
        seal: a.seal,
        nodes: a.nodes,
    };
    if settings.nodes.is_some() && crate::fleet::pool::selected(&settings.machines).is_none() {
        return Err(crate::error::Usage(
            "--nodes says how many nodes a Slurm pool lends — give it with --machine @POOL (a [pool.POOL] row of machines.toml)".into(),
        )
        .into());
    }
    if a.remeasure {
        super::machine::remeasure_before_certify(ctx, &settings.machines).await?;
    }
    let interrupt = crate::cancel::install();
    let certified = if certify::is_dispatch(&settings) {
        let lines = Lines::new(&settings.machines, ctx.json);
        let m = certify::certify(&ctx.home, &catalog, &settings, &lines, &interrupt).await;
        lines.finish();
        m?
    } else {
        let spinner = if !ctx.json && std::io::stderr().is_terminal() {
            let pb = indicatif::ProgressBar::new_spinner();
            pb.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .expect("static template"),
            );
            Spinner(Some(pb))
        } else {
            Spinner(None)
        };
        certify::certify(&ctx.home, &catalog, &settings, &spinner, &interrupt).await?
    };
    let o = match certified {
        Certified::Machines(m) => {
            junit::write_asked(junit_path.as_deref(), &machines_junit(&m));
            let mut details = Vec::with_capacity(m.runs.len());
            for run in &m.runs {
                details.push(Detail::of(&run.record, Some(&run.tests)).await);
            }
            return Ok(dispatched(ctx, &m, &details));
        }
        Certified::Here(o) => *o,
    };
    let r = &o.record;
    let detail = Detail::of(r, Some(&o.tests)).await;
    if junit_path.is_some() {
        let mut suite = junit::Suite {
            summary: verdict_lines_with(r, "", &detail),
            ..junit::Suite::of_record(format!("certify {} on {}", short(&r.sha), r.machine), r)
        }
        .with_tests(&o.tests, &o.test_output);
        suite
            .properties
            .push(("saphan.verified_pointer", pointer_word(&o.pointer)));
        junit::write_asked(junit_path.as_deref(), &[suite]);
    }
    if ctx.json {
        let mut v = serde_json::to_value(r).expect("records serialize");
        v["verified_pointer"] = serde_json::json!(o.pointer);
        detail.add_json(&mut v, r);
        // The human output shows the suite's last lines on a non-green
        // verdict; so does the JSON (`stderr_tail` or `log_tail`).
        if let Some((key, _, tail)) = failure_tail(r, &o.log_tail, &o.stderr_tail, &o.test_output) {
            v[key] = serde_json::json!(tail);
        }
        if let Some(words) = o.first_follow.as_ref().and_then(|f| f.words()) {
            v["first_follow"] = serde_json::json!({
                "trunk": o.first_follow.as_ref().map(|f| &f.trunk),
                "words": words,
            });
        }
        why::add_test_output(&mut v, r.verdict, &o.test_output, o.test_output_omitted);
        out_json(&v);
    } else {
        let mut s = verdict_lines_with(r, "", &detail);
        s.push_str(&why::test_output_lines(
            &o.test_output,
            o.test_output_omitted,
            "",
        ));
        s.push_str(&format!("budget: {} ({})\n", r.budget, r.budget_source));
        s.push_str(&format!("record: {} (id {})\n", o.attempts.display(), r.id));
        match &o.pointer {
            PointerOutcome::Moved => s.push_str(&format!(
                "verified: {} -> {} (moved)\n",
                crate::record::VERIFIED_REF,
                r.sha
            )),
            PointerOutcome::Unchanged(why) => s.push_str(&format!(
                "verified: {} not moved ({why})\n",
                crate::record::VERIFIED_REF,
            )),
        }
        if let Some(words) = o.first_follow.as_ref().and_then(|f| f.words()) {
            s.push_str(&format!("trunk: {words}\n"));
        }
        // What the suite wrote (names, notes, its output) is escaped.
        out(&visible(&s));
        if let Some((_, header, tail)) =
            failure_tail(r, &o.log_tail, &o.stderr_tail, &o.test_output)
        {
            say!("{}", visible(&format!("--- {header} ---\n{tail}")));
        }
    }
    Ok(r.verdict.exit())
}

/// The first 12 characters of a SHA.
fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// `moved`, or `unchanged: <why>` (the record's `verified_pointer` words).
fn pointer_word(p: &PointerOutcome) -> String {
    match p {
        PointerOutcome::Moved => "moved".into(),
        PointerOutcome::Unchanged(why) => format!("unchanged: {why}"),
    }
}

/// The JUnit report of `certify --machine`: one testsuite per machine
/// whose attempt the verdict is over, or, for `--split`, one testsuite of
/// the shards' union.
fn machines_junit(m: &crate::schedule::invocation::Multi) -> Vec<junit::Suite<'_>> {
    let effective: Vec<&str> = m.effective().map(|r| r.id.as_str()).collect();
    let runs: Vec<&crate::schedule::invocation::MachineRun> = m
        .runs
        .iter()
        .filter(|r| effective.contains(&r.record.id.as_str()))
        .collect();
    let pointer = pointer_word(&m.pointer);
    let Some(sp) = &m.split else {
        return runs
            .iter()
            .map(|run| {
                let r = &run.record;
                let mut suite = junit::Suite {
                    summary: record_lines(run, &Detail::default()),
                    ..junit::Suite::of_record(
                        format!("certify {} on {}", short(&r.sha), r.machine),
                        r,
                    )
                }
                .with_tests(&run.tests, &run.test_output);
                suite
                    .properties
                    .push(("saphan.verified_pointer", pointer.clone()));
                suite
            })
            .collect();
    };
    let sha = m.runs.first().map(|r| r.record.sha.as_str()).unwrap_or("");
    let mut properties = vec![
        ("saphan.verb", "certify".to_string()),
        ("saphan.verdict", sp.verdict.as_str().to_string()),
    ];
    if let Some(f) = &sp.failure {
        properties.push(("saphan.failure", f.to_string()));
    }
    properties.extend([
        ("saphan.sha", sha.to_string()),
        ("saphan.split", format!("{} shard(s)", sp.shards)),
        ("saphan.count", junit::count_word(sp.count)),
    ]);
    if let Some(r) = runs.first() {
        properties.push(("saphan.report", r.record.report.as_str().to_string()));
    }
    for run in &runs {
        properties.push(("saphan.machine", run.record.machine.clone()));
        properties.push(("saphan.record", run.record.id.clone()));
    }
    properties.push(("saphan.verified_pointer", pointer));
    let mut why: Vec<String> = sp.failure.iter().map(|f| format!("failure: {f}")).collect();
    why.extend(sp.notes.iter().cloned());
    why.extend(sp.advisory.iter().map(|a| format!("advisory: {a}")));
    let shards: Vec<&crate::report::Tests> = runs.iter().map(|r| &r.tests).collect();
    let mut summary = split_lines(sp, &crate::report::rerun::Rerun::None);
    for run in &runs {
        summary.push_str(&record_lines(run, &Detail::default()));
    }
    vec![junit::Suite {
        name: format!("certify {} split over {} shard(s)", short(sha), sp.shards),
        properties,
        tests: junit::union(&shards),
        output: runs.iter().flat_map(|r| r.test_output.iter()).collect(),
        verdict: sp.verdict.as_str().to_string(),
        why,
        seconds: runs.iter().map(|r| r.record.suite_seconds).reduce(f64::max),
        summary,
    }]
}

/// The verdict line of a record and what explains it (failing tests, exit
/// code, notes), each following line indented by `indent`: the same words
/// for a local record and for each machine's.
pub(crate) fn verdict_lines(r: &crate::record::Record, indent: &str) -> String {
    verdict_lines_with(r, indent, &Detail::default())
}

/// [`verdict_lines`] with what `detail` adds: each failing name's re-run
/// command (`example.com/m/mul.TestMul — re-run: go test -run '^TestMul$'
/// ./mul`) and the subtests apart in the count (`10 tests (13 with
/// subtests)`).
pub(crate) fn verdict_lines_with(
    r: &crate::record::Record,
    indent: &str,
    detail: &Detail,
) -> String {
    let count = match (detail.subtests, r.count.value()) {
        (Some(sub), Some(n)) if sub > 0 => {
            format!("{} ({} with subtests)", r.count_words(), n + sub)
        }
        _ => r.count_words(),
    };
    let mut s = format!(
        "{} {} on {}: {} — {} ({}, {}), {:.1}s\n",
        r.verb,
        r.sha,
        r.machine,
        r.verdict.as_str(),
        count,
        r.report.as_str(),
        r.suite_source,
        r.suite_seconds,
    );
    // A suite that ran unsealed could have reached what its verdict
    // rests on: one line says so (a sealed run says nothing).
    if let Some(seal) = r
        .seal
        .as_ref()
        .filter(|s| s.state != crate::seal::State::Sealed)
    {
        s.push_str(&format!("{indent}seal: {}\n", seal.words()));
    }
    if let Some(sh) = &r.shard {
        s.push_str(&format!(
            "{indent}shard {}/{}: {}\n",
            sh.index + 1,
            sh.count,
            if sh.packages.is_empty() {
                "SAPHAN_SHARD_INDEX/SAPHAN_SHARD_COUNT".to_string()
            } else {
                format!("{} package(s)", sh.packages.len())
            }
        ));
    }
    if let Some(id) = &r.retry_of {
        s.push_str(&format!(
            "{indent}re-run of attempt {id} (its machine failed the attempt)\n"
        ));
    }
    // A machine that never ran the suite (unreachable, ship or lock
    // failed, the engine down) gets no `program:`/`shipped:` lines as if it
    // had: the failure line says what happened.
    let infra = r.failure.as_ref().filter(|f| f.is_infrastructure());
    if let Some(f) = infra {
        s.push_str(&format!("{indent}failure: {f}\n"));
    } else if r.machine != "local" {
        if let Some(p) = &r.program_path {
            s.push_str(&format!(
                "{indent}program: {p} ({})\n",
                match &r.program_version {
                    Some(Avail::Value(v)) => v.as_str(),
                    Some(Avail::Unavailable) => "version unavailable",
                    None => "version unknown",
                }
            ));
        }
        if let Some(b) = r.bundle_bytes {
            s.push_str(&format!("{indent}shipped: {b} bytes\n"));
        }
    }
    if let Avail::Value(names) = &r.named_tests
        && !names.is_empty()
    {
        s.push_str(&format!("{indent}failing ({}):\n", names.len()));
        for n in names {
            match detail.rerun.command(n) {
                Some(c) => s.push_str(&format!("{indent}  {n} — re-run: {c}\n")),
                None => s.push_str(&format!("{indent}  {n}\n")),
            }
        }
    }
    if let Some(code) = r.suite_exit_code
        && r.verdict != Verdict::Green
    {
        s.push_str(&format!("{indent}suite exit code: {code}\n"));
    }
    for n in &r.notes {
        s.push_str(&format!("{indent}note: {n}\n"));
    }
    s
}

/// One machine's record, then the tail of its suite's stderr on a non-green.
fn record_lines(run: &crate::schedule::invocation::MachineRun, detail: &Detail) -> String {
    let (r, stderr_tail) = (&run.record, run.stderr_tail.as_str());
    let mut s = verdict_lines_with(r, "  ", detail);
    s.push_str(&why::test_output_lines(
        &run.test_output,
        run.test_output_omitted,
        "  ",
    ));
    if r.verdict != Verdict::Green && !stderr_tail.trim().is_empty() {
        s.push_str("  --- last lines of the suite's stderr there ---\n");
        let lines: Vec<&str> = stderr_tail.trim_end().lines().collect();
        for l in &lines[lines.len().saturating_sub(20)..] {
            s.push_str(&format!("  {l}\n"));
        }
    }
    s
}

/// `certify --machine …`: one summary of every machine's attempt (and,
/// for `--machine @admitted`, which machines were chosen).
fn dispatched(ctx: &Ctx, m: &crate::schedule::invocation::Multi, details: &[Detail]) -> Exit {
    let first_follow = m.first_follow.as_ref().and_then(|f| f.words());
    for r in &m.remain {
        say!("saphan: warning: {}", visible(&r.to_string()));
    }
    if let Some(b) = m.borrowed.as_ref().filter(|b| b.release_failed) {
        say!("saphan: warning: {}", visible(&b.released));
    }
    if ctx.json {
        out_json(&serde_json::json!({
            "sha": m.runs.first().map(|r| r.record.sha.clone()),
            "records": m.runs.iter().enumerate().map(|(i, r)| {
                let mut v = serde_json::to_value(&r.record).expect("records serialize");
                if let Some(d) = details.get(i) {
                    d.add_json(&mut v, &r.record);
                }
                // As for a local attempt: the suite's last stderr lines on
                // a non-green verdict (what the human output shows).
                if r.record.verdict != Verdict::Green && !r.stderr_tail.trim().is_empty() {
                    v["stderr_tail"] = serde_json::json!(r.stderr_tail.trim_end());
                }
                why::add_test_output(&mut v, r.record.verdict, &r.test_output, r.test_output_omitted);
                v
            }).collect::<Vec<_>>(),
            "verified_pointer": m.pointer,
            "disagreement": m.disagreement,
            "attempts": m.attempts,
            "exit_code": m.exit() as u8,
            "selection": m.selection,
            "split": m.split,
            "certified_by": m.certified_by(),
            "left_out": m.left_out,
            "borrowed": m.borrowed,
            "first_follow": first_follow.as_ref().map(|w| serde_json::json!({
                "trunk": m.first_follow.as_ref().map(|f| &f.trunk),
                "words": w,
            })),
        }));
    } else {
        let mut s = String::new();
        if let Some(b) = &m.borrowed {
            s.push_str(&borrowed_lines(b));
        }
        for (i, r) in m.runs.iter().enumerate() {
            let none = Detail::default();
            s.push_str(&record_lines(r, details.get(i).unwrap_or(&none)));
        }
        if let Some(d) = &m.disagreement {
            s.push_str(&format!("machines disagree: {d}\n"));
        }
        if let Some(sp) = &m.split {
            // The shards ran one SHA: any shard's re-run context serves.
            let none = crate::report::rerun::Rerun::None;
            let rerun = details
                .iter()
                .map(|d| &d.rerun)
                .find(|r| !matches!(r, crate::report::rerun::Rerun::None))
                .unwrap_or(&none);
            s.push_str(&split_lines(sp, rerun));
        }
        s.push_str(&format!("records: {}\n", m.attempts.display()));
        match &m.pointer {
            PointerOutcome::Moved if m.split.is_some() => s.push_str(&format!(
                "verified: {} -> {} (moved: green on every shard, coverage complete)\n",
                crate::record::VERIFIED_REF,
                m.runs.first().map(|r| r.record.sha.as_str()).unwrap_or("")
            )),
            PointerOutcome::Moved => s.push_str(&format!(
                "verified: {} -> {} (moved: {})\n",
                crate::record::VERIFIED_REF,
                m.runs.first().map(|r| r.record.sha.as_str()).unwrap_or(""),
                certified_words(m, m.selection.is_some()),
            )),
            PointerOutcome::Unchanged(why) => s.push_str(&format!(
                "verified: {} not moved ({why}{})\n",
                crate::record::VERIFIED_REF,
                left_out_words(m),
            )),
        }
        if let Some(words) = &first_follow {
            s.push_str(&format!("trunk: {words}\n"));
        }
        out(&visible(&s));
    }
    m.exit()
}

/// What a `--machine @POOL` borrowed: the allocations of a dead saphan it
/// cancelled, the nodes it left out (each with its refusal and remedy),
/// `borrowed Slurm job 17 from pool ci: n0, n1, n2`, and how it was given
/// back.
fn borrowed_lines(b: &crate::schedule::invocation::Borrowed) -> String {
    let mut s = String::new();
    for l in &b.swept {
        s.push_str(&format!("pool {}: {l}\n", b.pool));
    }
    for r in &b.left_out {
        // The refusal's own text ends with its remedy lines.
        s.push_str(&format!(
            "pool {}: left out {} ({}): {}\n",
            b.pool, r.machine, r.name, r.message
        ));
    }
    for n in &b.unusable {
        s.push_str(&format!(
            "pool {}: {n}: Slurm cannot lend it now — not asked for\n",
            b.pool
        ));
    }
    let fewer = if (b.nodes.len() as u32) < b.asked {
        format!(
            " (asked for {}; only these are admitted and usable)",
            b.asked
        )
    } else {
        String::new()
    };
    s.push_str(&format!(
        "pool {}: borrowed Slurm job {}: {}{fewer}; {}\n",
        b.pool,
        b.job,
        b.nodes.join(", "),
        b.released
    ));
    s
}

/// Who certified the SHA, for a moved pointer's line: `certified by m0,
/// m1 — green on every named machine` (or `every admitted machine`), or,
/// when `@admitted` left machines out, `certified by m0; left out: m1
/// (host-unreachable)`.
fn certified_words(m: &crate::schedule::invocation::Multi, admitted: bool) -> String {
    let by = format!("certified by {}", m.certified_by().join(", "));
    if !m.left_out.is_empty() {
        format!("{by}{}", left_out_words(m))
    } else if m.borrowed.is_some() {
        format!("{by} — green on every borrowed node")
    } else if admitted {
        format!("{by} — green on every admitted machine")
    } else {
        format!("{by} — green on every named machine")
    }
}

/// `; left out: m1 (host-unreachable), m2 (lock-timeout)`, or nothing.
fn left_out_words(m: &crate::schedule::invocation::Multi) -> String {
    if m.left_out.is_empty() {
        return String::new();
    }
    let each: Vec<String> = m
        .left_out
        .iter()
        .map(|l| format!("{} ({})", l.machine, l.failure.as_str()))
        .collect();
    format!("; left out: {}", each.join(", "))
}

/// `certify --split`: the verdict over the shards, their coverage, and
/// why an advisory result moves nothing.
fn split_lines(
    sp: &crate::schedule::invocation::SplitOutcome,
    rerun: &crate::report::rerun::Rerun,
) -> String {
    let mut s = format!(
        "split over {} shard(s): {} — {}",
        sp.shards,
        sp.verdict.as_str(),
        crate::report::count_words(sp.count)
    );
    if let Some(f) = &sp.failure {
        s.push_str(&format!(" ({f})"));
    }
    s.push('\n');
    match &sp.coverage {
        Some(c) if c.complete => s.push_str(&format!(
            "coverage: complete — every one of the {} listed packages ended exactly once\n",
            c.listed
        )),
        Some(c) => {
            s.push_str(&format!("coverage: incomplete ({} listed)\n", c.listed));
            if !c.missing.is_empty() {
                s.push_str(&format!("  missing: {}\n", c.missing.join(", ")));
            }
            if !c.doubled.is_empty() {
                s.push_str(&format!("  doubled: {}\n", c.doubled.join(", ")));
            }
        }
        None => {}
    }
    if !sp.named_tests.is_empty() {
        s.push_str(&format!("failing ({}):\n", sp.named_tests.len()));
        for n in &sp.named_tests {
            match rerun.command(n) {
                Some(c) => s.push_str(&format!("  {n} — re-run: {c}\n")),
                None => s.push_str(&format!("  {n}\n")),
            }
        }
    }
    if let Some(a) = &sp.advisory {
        s.push_str(&format!("advisory: {a}\n"));
    }
    s
}

/// Run `records`.
pub async fn records(ctx: &Ctx, a: RecordsArgs) -> Result<Exit> {
    let (path, attempts) = certify::records(&a.repo).await?;
    for (line, why) in &attempts.corrupt {
        say!(
            "{}",
            visible(&format!(
                "saphan: record-corrupt: {}:{line} is not a record ({why}) — skipped; the file is append-only, so move that line aside by hand",
                path.display()
            ))
        );
    }
    let all = attempts.records;
    match a.cmd {
        Some(RecordsCmd::Show { id, log }) => {
            let given = [
                (a.sha.is_some(), "--sha"),
                (a.machine.is_some(), "--machine"),
                (a.verdict.is_some(), "--verdict"),
                (a.last.is_some(), "-n"),
            ];
            if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
                return Err(FilterWithShow(flag).into());
            }
            let r = crate::record::find(&all, &id, &path)?;
            if log {
                let bytes = why::suite_log(r).await?;
                let text = String::from_utf8_lossy(&bytes);
                if ctx.json {
                    out_json(&serde_json::json!({
                        "id": r.id,
                        "suite_log": r.suite_log,
                        "suite_log_sha256": r.suite_log_sha256,
                        "log": text,
                    }));
                } else {
                    out(&visible(&text));
                }
                return Ok(Exit::Ok);
            }
            if ctx.json {
                out_json(&serde_json::to_value(r).expect("records serialize"));
            } else {
                out(&visible(&show(r).await));
            }
        }
        None => {
            let chosen = filter(&all, &a);
            if ctx.json {
                let corrupt: Vec<usize> = attempts.corrupt.iter().map(|(l, _)| *l).collect();
                out_json(
                    &serde_json::json!({ "attempts": path, "records": chosen, "corrupt_lines": corrupt }),
                );
            } else {
                let mut s = String::new();
                for r in &chosen {
                    s.push_str(&listing_line(r));
                }
                if all.is_empty() {
                    s.push_str(&format!("no records yet in {}\n", path.display()));
                } else if chosen.is_empty() {
                    s.push_str(&format!(
                        "no record of the {} in {} matches the filters\n",
                        all.len(),
                        path.display()
                    ));
                }
                out(&visible(&s));
            }
        }
    }
    Ok(Exit::Ok)
}

/// The records `a`'s filters keep, oldest first: `--sha` (a prefix,
/// case-insensitive), `--machine`, `--verdict`, then the last `-n`.
fn filter<'a>(all: &'a [crate::record::Record], a: &RecordsArgs) -> Vec<&'a crate::record::Record> {
    let sha = a.sha.as_deref().map(str::to_ascii_lowercase);
    let mut kept: Vec<&crate::record::Record> = all
        .iter()
        .filter(|r| sha.as_deref().is_none_or(|p| r.sha.starts_with(p)))
        .filter(|r| a.machine.as_deref().is_none_or(|m| r.machine == m))
        .filter(|r| a.verdict.as_deref().is_none_or(|v| r.verdict.as_str() == v))
        .collect();
    if let Some(n) = a.last {
        kept.drain(..kept.len().saturating_sub(n));
    }
    kept
}

/// The verdict as a listing or `status` shows it: a shard of a `--split`
/// says so (`green (shard 1/3)`), since its green is one shard's, not the
/// SHA's certification.
pub(crate) fn verdict_word(r: &crate::record::Record) -> String {
    match &r.shard {
        Some(sh) => format!(
            "{} (shard {}/{})",
            r.verdict.as_str(),
            sh.index + 1,
            sh.count
        ),
        None => r.verdict.as_str().to_string(),
    }
}

/// One line of `records`: id, start, suite seconds, verb, verdict, SHA,
/// machine, count, and a measurement-failed attempt's failure
/// (`measurement-failed (host-unreachable)`).
fn listing_line(r: &crate::record::Record) -> String {
    let failure = r
        .failure
        .as_ref()
        .map(|f| format!("  ({f})"))
        .unwrap_or_default();
    format!(
        "{}  {}  {:>8}  {:<15} {:<26} {}  {}  {}{failure}\n",
        r.id,
        crate::clock::to_seconds(&r.started_at),
        format!("{:.1}s", r.suite_seconds),
        r.verb,
        verdict_word(r),
        short(&r.sha),
        r.machine,
        r.count_words()
    )
}

/// `records show ID`: the record as a person reads it — what was measured
/// where and when, its verdict and what explains it in the words certify
/// printed (the failing tests with their output, read again from the kept
/// log; the log's last lines), where the log is.
async fn show(r: &crate::record::Record) -> String {
    let mut s = format!("record {} ({})\n", r.id, r.verb);
    s.push_str(&verdict_lines_with(r, "", &Detail::of(r, None).await));
    // What the kept log still tells: each failing test's output (a
    // go-test-json stream), the log's last lines.
    let mut tail = None;
    if r.verdict != Verdict::Green {
        match why::suite_log(r).await {
            Ok(bytes) => {
                let w =
                    crate::record::log::why(r, &bytes, crate::measure::pipeline::LOG_TAIL_LINES);
                s.push_str(&why::test_output_lines(
                    &w.test_output,
                    w.test_output_omitted,
                    "",
                ));
                tail = failure_tail(r, &w.log_tail, &w.stderr_tail, &w.test_output);
            }
            Err(crate::record::log::LogError::NotKept { .. }) => {}
            Err(e) => s.push_str(&format!(
                "output of failing tests: not shown — {}: {e}\n",
                crate::error::Refusal::name(&e)
            )),
        }
    }
    s.push_str(&format!("machine: {} ({} class)\n", r.machine, r.class));
    s.push_str(&format!("sha: {}\n", r.sha));
    match &r.trunk {
        Some(Some(t)) => s.push_str(&format!("trunk: {t}\n")),
        Some(None) => s.push_str("trunk: none known\n"),
        None => {}
    }
    if let Some(b) = &r.base {
        s.push_str(&format!("base: {b}\n"));
    }
    for st in r.streams.iter().flatten() {
        s.push_str(&format!("stream: {} {}\n", st.sha, st.name));
    }
    s.push_str(&format!(
        "started: {}, finished {} (suite {:.1}s)\n",
        crate::clock::to_seconds(&r.started_at),
        crate::clock::to_seconds(&r.finished_at),
        r.suite_seconds
    ));
    s.push_str(&format!("budget: {} ({})\n", r.budget, r.budget_source));
    // An unsealed run's seal line is among the verdict's lines already.
    match &r.seal {
        Some(seal) if seal.state == crate::seal::State::Sealed => {
            s.push_str(&format!("seal: {}\n", seal.words()))
        }
        Some(_) => {}
        None => s.push_str("seal: none (the suite never ran)\n"),
    }
    if let Some(sh) = &r.shard {
        s.push_str(&format!(
            "split: this record is shard {}/{} of a `certify --split`; the SHA's verdict is the union's, not this shard's\n",
            sh.index + 1,
            sh.count
        ));
    }
    s.push_str(&format!("suite: {}\n", r.suite_argv.join(" ")));
    if let Some(p) = &r.verified_pointer {
        s.push_str(&format!("verified pointer: {p}\n"));
    }
    match &r.suite_log {
        Some(l) => s.push_str(&format!(
            "log: {l} (`saphan records show {} --log`)\n",
            r.id
        )),
        None => s.push_str("log: none kept\n"),
    }
    if let Some((_, header, text)) = tail {
        s.push_str(&format!("--- {header} ---\n{text}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_bundle_is_shown_in_the_unit_that_fits_it() {
        let words = |bytes| event_words(&Event::Shipped { bytes });
        assert_eq!(words(312), "shipped 312 B");
        assert_eq!(words(12 * 1024), "shipped 12.00 KiB");
        assert_eq!(words(3 * 1024 * 1024 + 512 * 1024), "shipped 3.50 MiB");
    }

    #[test]
    fn a_shard_line_says_whether_it_is_a_re_run_or_a_copy() {
        let packages = ["m/a".to_string(), "m/b".to_string()];
        let words = |retry_of, copy_of| {
            event_words(&Event::Shard {
                index: 1,
                count: 4,
                packages: &packages,
                retry_of,
                copy_of,
            })
        };
        assert_eq!(words(None, None), "shard 2/4: 2 packages (m/a, m/b)");
        assert_eq!(
            words(Some("a1"), None),
            "shard 2/4: 2 packages (m/a, m/b), re-running attempt a1"
        );
        assert_eq!(
            words(None, Some("m4")),
            "shard 2/4: 2 packages (m/a, m/b), a copy of m4's (it left a ping unanswered; counted only if m4 is lost)"
        );
    }
}
