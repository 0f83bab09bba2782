//! `saphan machine list|show|measure|probe`: machine rows and the two fleet
//! ceremonies (docs/fleet.md).

use crate::cli::{Ctx, out, out_json, visible};
use crate::error::{Exit, Result};
use crate::fleet::ledger::{self, Ledger, MachineFacts, Outcome, ProbeInputs};
use crate::fleet::machines::{MachineRow, Machines};
use crate::fleet::probe::{self, ProbeSettings};
use crate::fleet::run::{MachineEvent, Observer, for_each_machine};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// `saphan machine …`
#[derive(Debug, Subcommand)]
pub enum MachineCmd {
    /// List the machine rows of SAPHAN_HOME/fleet/machines.toml, with when
    /// each last answered (its ledger rows) and, with --repo, its last
    /// infrastructure failure in that repository's records.
    List {
        /// A repository whose attempt records to read for each machine's
        /// last infrastructure failure (and last answer).
        #[arg(long, value_name = "DIR")]
        repo: Option<std::path::PathBuf>,
    },
    /// Show one machine: its row, its measured facts and its capability rows,
    /// each marked fresh or stale.
    Show {
        /// The machine id.
        id: String,
    },
    /// Measure machines' confinement facts (os, arch, kernel, distro, cpus,
    /// memory, user namespaces) and append them to the ledger as signed rows.
    Measure {
        /// Machine ids, comma-separated or repeated.
        #[arg(long = "machine", value_name = "ID[,ID…]", required = true)]
        machines: Vec<String>,
        /// Budget per machine, connection included (e.g. 30s, 2m).
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// Prove or refute that a declared absolute program is on machines, is
    /// executable and runs; append a signed capability row per machine.
    /// Never installs anything; a failure prints two commands under `remedy`.
    Probe(ProbeArgs),
    /// Re-run `machine measure` and every capability probe whose row is
    /// stale or absent, or says the program is not present (absent, failed),
    /// each probe with its own last row's inputs, and print what changed
    /// (`m1 go: go1.19.8 → go1.21.0`, `m1 go: absent → present`) and what
    /// was fresh and left alone. Machines run concurrently.
    Remeasure {
        /// Machine ids, comma-separated or repeated (default: every machine
        /// of machines.toml).
        #[arg(long = "machine", value_name = "ID[,ID…]")]
        machines: Vec<String>,
        /// Budget per machine for each step (the measure, then the probes),
        /// connection included (e.g. 30s, 2m).
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        timeout: Duration,
    },
}

/// `machine probe` arguments.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Machine ids, comma-separated or repeated.
    #[arg(long = "machine", value_name = "ID[,ID…]", required = true)]
    pub machines: Vec<String>,
    /// The catalog capability (`saphan catalog show` lists them). Several may
    /// be given (repeated or comma-separated), each with its own
    /// --declared-path in the same order; they share one connection.
    #[arg(long = "capability", value_name = "NAME", required = true)]
    pub capabilities: Vec<String>,
    /// The program's absolute path on the machine (one per --capability).
    #[arg(long = "declared-path", value_name = "ABS", required = true)]
    pub declared_paths: Vec<String>,
    /// The machine's absolute work directory, checked for and recorded in
    /// the row (default: each machine row's own workhome).
    #[arg(long, value_name = "ABS")]
    pub workhome: Option<String>,
    /// Who probes, recorded in the row (default: the login user).
    #[arg(long, value_name = "ACTOR")]
    pub probed_by: Option<String>,
    /// The canonical workspace the probe is for, recorded in the row
    /// (default: none).
    #[arg(long, value_name = "CANON")]
    pub workspace: Option<String>,
    /// Budget per machine, connection included (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    crate::config::schema::humantime_parse(s)
}

/// Run `machine …`.
pub async fn run(ctx: &Ctx, cmd: MachineCmd) -> Result<Exit> {
    match cmd {
        MachineCmd::List { repo } => list(ctx, repo.as_deref()).await,
        MachineCmd::Show { id } => show(ctx, &id),
        MachineCmd::Measure { machines, timeout } => measure(ctx, &machines, timeout).await,
        MachineCmd::Probe(a) => probe(ctx, a).await,
        MachineCmd::Remeasure { machines, timeout } => remeasure(ctx, &machines, timeout).await,
    }
}

async fn list(ctx: &Ctx, repo: Option<&std::path::Path>) -> Result<Exit> {
    let m = Machines::load(&ctx.home)?;
    // Health reads what exists: the ledger (when there is one) and the
    // named repository's records. Nothing is contacted.
    let ledger = if m.rows.is_empty() {
        None
    } else {
        Some(Ledger::open(&ctx.home)?)
    };
    let records = match repo {
        Some(dir) => {
            let repo = crate::git::Repo::open(dir).await?;
            crate::record::read_all(&crate::record::attempts_path(&repo))?.records
        }
        None => Vec::new(),
    };
    let health = |id: &str| crate::commands::status::health(id, &records, ledger.as_ref());
    if ctx.json {
        let rows: Vec<Value> = m
            .rows
            .values()
            .map(|r| {
                let mut v = serde_json::to_value(r).expect("rows serialize");
                if let (Some(o), Ok(Value::Object(h))) =
                    (v.as_object_mut(), serde_json::to_value(health(&r.id)))
                {
                    o.extend(h);
                }
                v
            })
            .collect();
        out_json(&json!({ "machines": rows, "path": ctx.home.machines() }));
        return Ok(Exit::Ok);
    }
    if m.rows.is_empty() {
        out(&format!(
            "no machine rows in {} — add [machine.<id>] rows (docs/fleet.md)\n",
            ctx.home.machines().display()
        ));
        return Ok(Exit::Ok);
    }
    let w = m.rows.keys().map(String::len).max().unwrap_or(2).max(2);
    let mut s = format!(
        "{:w$}  {:9}  {:12}  {:20}  {:20}  last infrastructure failure\n",
        "id", "transport", "host", "workhome", "last answered"
    );
    for r in m.rows.values() {
        let h = health(&r.id);
        let answered = h
            .last_answered
            .as_deref()
            .map(crate::clock::to_seconds)
            .unwrap_or_else(|| "never".into());
        let failure = match &h.last_infrastructure_failure {
            Some(f) => format!(
                "{} {} (id {})",
                f.failure,
                crate::clock::to_seconds(&f.at),
                f.id
            ),
            None if repo.is_some() => "none".into(),
            None => "(--repo DIR reads a repository's records)".into(),
        };
        s += &format!(
            "{:w$}  {:9}  {:12}  {:20}  {:20}  {}\n",
            r.id,
            r.transport.as_str(),
            r.host,
            r.workhome,
            answered,
            failure
        );
    }
    out(&s);
    Ok(Exit::Ok)
}

fn facts_line(f: &MachineFacts) -> String {
    use crate::fleet::remeasure::{distro_words, gib};
    let distro = distro_words(f);
    let userns = match f.userns.supported {
        Some(true) => format!("userns yes ({})", f.userns.method),
        Some(false) => format!("userns no ({})", f.userns.method),
        None => "userns unknown".into(),
    };
    format!(
        "{} {} {} · {} · {} cpus · {} · {}",
        f.os,
        f.arch,
        f.kernel,
        distro,
        f.cpus.map(|c| c.to_string()).unwrap_or("?".into()),
        f.memory_bytes.map(gib).unwrap_or("? memory".into()),
        userns
    )
}

fn show(ctx: &Ctx, id: &str) -> Result<Exit> {
    let machines = Machines::load(&ctx.home)?;
    let row = machines.get(&ctx.home, id)?.clone();
    let cat = ctx.catalog()?;
    let window = crate::fleet::freshness_window(&ctx.home)?;
    let led = Ledger::open(&ctx.home)?;
    let now = time::OffsetDateTime::now_utc();
    let facts = led.latest_facts(id);
    let facts_fresh = facts.as_ref().map(|f| ledger::facts_fresh(f, now, window));
    let caps: Vec<(ledger::CapabilityRow, bool, &'static str)> = led
        .latest_capabilities(id)
        .into_iter()
        .map(|c| {
            let (fresh, why) = match cat.rows.get(&c.capability) {
                None => (false, "capability no longer in the catalog"),
                Some(entry) if ledger::is_fresh(&c, now, window, entry) => (true, "fresh"),
                Some(entry) if c.catalog_digest != entry.digest(&c.capability) => {
                    (false, "stale: measured against a different catalog entry")
                }
                Some(_) => (false, "stale: older than the freshness window"),
            };
            (c, fresh, why)
        })
        .collect();
    let window_s = humantime::format_duration(window).to_string();
    if ctx.json {
        let caps_json: Vec<Value> = caps
            .iter()
            .map(|(c, fresh, why)| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                v["fresh"] = (*fresh).into();
                v["freshness"] = (*why).into();
                v
            })
            .collect();
        let facts_json = facts.as_ref().map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or_default();
            v["fresh"] = facts_fresh.unwrap_or(false).into();
            v["platform_ids"] = json!(f.platform_ids());
            v
        });
        let mut v = json!({
            "machine": row,
            "freshness_window": window_s,
            "facts": facts_json,
            "capabilities": caps_json,
        });
        // The human output's "never measured — run: …" line.
        if facts.is_none() {
            v["measure"] = json!(crate::fleet::remedy::measure_line(
                &ctx.home,
                ctx.catalog.as_deref(),
                id
            ));
        }
        out_json(&v);
        return Ok(Exit::Ok);
    }
    let mut s = format!(
        "machine {}\n  transport  {}{}\n  workhome   {}\n  freshness  {window_s}\n",
        row.id,
        row.transport.as_str(),
        if row.transport == crate::fleet::machines::TransportKind::Ssh {
            format!(" (host {})", row.host)
        } else {
            String::new()
        },
        row.workhome
    );
    match &facts {
        None => {
            s += &format!(
                "facts: never measured — run: {}\n",
                crate::fleet::remedy::measure_line(&ctx.home, ctx.catalog.as_deref(), id)
            )
        }
        Some(f) => {
            s += &format!(
                "facts ({}, measured {}):\n  {}\n",
                if facts_fresh == Some(true) {
                    "fresh"
                } else {
                    "stale"
                },
                f.measured_at,
                facts_line(f)
            );
        }
    }
    if caps.is_empty() {
        s += "capabilities: none probed\n";
    } else {
        s += "capabilities:\n";
        for (c, _, why) in &caps {
            s += &format!(
                "  {:12} {:8} {}  {}  measured {}\n",
                c.capability,
                c.outcome.as_str(),
                c.inputs.declared_path,
                why,
                c.measured_at
            );
        }
    }
    out(&visible(&s));
    Ok(Exit::Ok)
}

/// One spinner line per machine on stderr while a person watches it (a
/// TTY; hidden otherwise): `m0 measuring… (3s)`, ending `done` or
/// `failed: <refusal name>`.
fn machine_lines(rows: &[MachineRow], verb: &str) -> Observer {
    use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal;
    let watching = std::io::stderr().is_terminal();
    let mp = MultiProgress::with_draw_target(if watching {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let bars: std::collections::HashMap<String, ProgressBar> = rows
        .iter()
        .map(|r| {
            let pb = mp.add(ProgressBar::new_spinner());
            pb.set_style(style.clone());
            pb.set_prefix(format!("{:width$}", r.id));
            pb.set_message(format!("{verb}…"));
            (r.id.clone(), pb)
        })
        .collect();
    Arc::new(move |id: &str, ev: MachineEvent<'_>| {
        let Some(pb) = bars.get(id) else { return };
        match ev {
            MachineEvent::Started if watching => pb.enable_steady_tick(Duration::from_millis(120)),
            MachineEvent::Started => {}
            MachineEvent::Finished(None) => pb.finish_with_message("done"),
            MachineEvent::Finished(Some(name)) => pb.finish_with_message(format!("failed: {name}")),
        }
    })
}

fn error_json(e: &crate::error::Error) -> Value {
    e.to_json()
}

async fn measure(ctx: &Ctx, ids: &[String], timeout: Duration) -> Result<Exit> {
    let machines = Machines::load(&ctx.home)?;
    let (rows, borrowed) = rows_for(ctx, &machines, ids).await?;
    let led = Arc::new(Ledger::open(&ctx.home)?);
    let home = ctx.home.clone();
    let lines = machine_lines(&rows, "measuring");
    let results = for_each_machine(&ctx.home, rows, timeout, lines, |row| {
        let home = home.clone();
        let led = led.clone();
        async move { crate::fleet::measure::measure_machine(&home, &led, &row, timeout).await }
    })
    .await;
    give_back(borrowed).await?;
    let mut exit = Exit::Ok;
    let mut text = String::new();
    let mut json_rows = Vec::new();
    let w = results.iter().map(|(r, _)| r.id.len()).max().unwrap_or(2);
    for (row, r) in &results {
        match r {
            Ok(f) => {
                text += &format!("{:w$}  measured  {}\n", row.id, facts_line(f));
                json_rows.push(json!({"machine": row.id, "ok": true, "facts": f, "platform_ids": f.platform_ids()}));
            }
            Err(e) => {
                exit = worse(exit, e.exit());
                text += &format!("{:w$}  failed    {}\n", row.id, e.line());
                let mut v = error_json(e);
                v["machine"] = row.id.clone().into();
                v["ok"] = false.into();
                json_rows.push(v);
            }
        }
    }
    if ctx.json {
        out_json(&json!({"verb": "machine measure", "ledger": led.path(), "results": json_rows}));
    } else {
        out(&visible(&text));
    }
    Ok(exit)
}

/// The machines named by `--machine`; an empty list (`--machine ,`,
/// `--machine ''`) is a usage error, never a silent success.
fn select(
    home: &crate::home::Home,
    machines: &Machines,
    ids: &[String],
) -> Result<Vec<MachineRow>> {
    let rows = machines.select(home, ids)?;
    if rows.is_empty() {
        return Err(crate::error::Usage(
            "--machine names no machine — give one or more machine ids (`saphan machine list` shows them)".into(),
        )
        .into());
    }
    Ok(rows)
}

/// The machine rows `ids` names, or, for `--machine @POOL`, one row per
/// node of the Slurm pool (`POOL/<node>`), every usable node borrowed until
/// [`give_back`]. What the borrowing did is said on stderr.
async fn rows_for(
    ctx: &Ctx,
    machines: &Machines,
    ids: &[String],
) -> Result<(Vec<MachineRow>, Option<crate::fleet::pool::Borrowed>)> {
    let Some(pool) = crate::fleet::pool::selected(ids) else {
        return Ok((select(&ctx.home, machines, ids)?, None));
    };
    // Ctrl-C while the nodes are awaited withdraws the request.
    let _ = crate::cancel::install();
    let b =
        crate::fleet::pool::borrow_every_node(&ctx.home, pool, &crate::record::new_id()).await?;
    for l in &b.swept {
        say!("pool {pool}: {l}");
    }
    for n in &b.unusable {
        say!(
            "pool {pool}: {} is {} — not borrowed, not measured",
            n.node,
            n.state
        );
    }
    say!(
        "pool {pool}: borrowed Slurm job {} ({})",
        b.allocation.job,
        b.allocation.nodes.join(", ")
    );
    Ok((b.rows.clone(), Some(b)))
}

/// Give back what [`rows_for`] borrowed, saying so on stderr.
///
/// Errors: `slurm-release-failed` (with the command that releases it).
async fn give_back(b: Option<crate::fleet::pool::Borrowed>) -> Result<()> {
    if let Some(b) = b {
        let job = b.allocation.job;
        let r = b.allocation.release().await?;
        say!("released Slurm job {job} ({:.2} s)", r.waited.as_secs_f64());
    }
    Ok(())
}

fn worse(a: Exit, b: Exit) -> Exit {
    if (b as u8) > (a as u8) { b } else { a }
}

async fn probe(ctx: &Ctx, a: ProbeArgs) -> Result<Exit> {
    let cat = ctx.catalog()?;
    let caps: Vec<String> = a
        .capabilities
        .iter()
        .flat_map(|c| c.split(','))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    if caps.len() != a.declared_paths.len() {
        return Err(crate::error::Usage(format!(
            "{} capabilities but {} --declared-path values — give one --declared-path per capability, in the same order",
            caps.len(),
            a.declared_paths.len()
        ))
        .into());
    }
    if a.workhome.as_deref() == Some("") {
        // Empty inputs stand for the row's own: an empty flag is refused.
        return Err(crate::fleet::FleetError::WorkhomeNotAbsolute {
            path: String::new(),
        }
        .into());
    }
    let mut items = Vec::new();
    for (cap, path) in caps.iter().zip(&a.declared_paths) {
        items.push(probe::ProbeItem {
            capability: cap.clone(),
            entry: cat.get(cap)?.clone(),
            // No --workhome: each machine row's own (ProbeSettings::for_row).
            inputs: ProbeInputs {
                declared_path: path.clone(),
                workhome: a.workhome.clone().unwrap_or_default(),
                probed_by: a
                    .probed_by
                    .clone()
                    .unwrap_or_else(crate::fleet::remedy::login_user),
                workspace: a.workspace.clone().unwrap_or_default(),
            },
        });
    }
    let settings = ProbeSettings {
        items,
        timeout: a.timeout,
        catalog_path: ctx.catalog.clone(),
        catalog_origin: cat.origin.clone(),
    };
    settings.validate()?;
    let machines = Machines::load(&ctx.home)?;
    let (rows, borrowed) = rows_for(ctx, &machines, &a.machines).await?;
    let led = Arc::new(Ledger::open(&ctx.home)?);
    let home = ctx.home.clone();
    let settings = Arc::new(settings);
    let _ = crate::cancel::install();
    let verb = format!("probing {}", caps.join(", "));
    // The per-machine budget is enforced inside probe_machine's steps; the
    // outer bound adds a little slack so the inner, better-named error wins.
    let outer = a.timeout + Duration::from_secs(2);
    let lines = machine_lines(&rows, &verb);
    let results = for_each_machine(&ctx.home, rows, outer, lines, |row| {
        let home = home.clone();
        let led = led.clone();
        let s = settings.clone();
        async move { probe::probe_machine(&home, &led, &row, &s).await }
    })
    .await;
    give_back(borrowed).await?;
    let mut exit = Exit::Ok;
    let mut text = String::new();
    let mut json_rows = Vec::new();
    let w = results.iter().map(|(r, _)| r.id.len()).max().unwrap_or(2);
    let cw = caps.iter().map(String::len).max().unwrap_or(2);
    let fail = |exit: &mut Exit,
                text: &mut String,
                row: &MachineRow,
                cap: &str,
                e: &crate::error::Error|
     -> Value {
        *exit = worse(*exit, e.exit());
        *text += &format!("{:w$}  {cap:cw$}  error    {}\n", row.id, e.line());
        let mut v = error_json(e);
        v["machine"] = row.id.clone().into();
        v["capability"] = cap.into();
        v["ok"] = false.into();
        v
    };
    for (row, r) in &results {
        match r {
            Err(e) => {
                for cap in &caps {
                    json_rows.push(fail(&mut exit, &mut text, row, cap, e));
                }
            }
            Ok(per) => {
                for (cap, r) in caps.iter().zip(per) {
                    let c = match r {
                        Ok(c) => c,
                        Err(e) => {
                            json_rows.push(fail(&mut exit, &mut text, row, cap, e));
                            continue;
                        }
                    };
                    let head = match c.outcome {
                        Outcome::Present => format!(
                            "{}  {}",
                            c.inputs.declared_path,
                            c.version_output
                                .as_deref()
                                .and_then(|v| v.lines().next())
                                .unwrap_or("")
                        ),
                        _ => match &c.reason {
                            Some(r) => {
                                format!("{r}: {}", c.reason_detail.as_deref().unwrap_or(""))
                            }
                            None => c.reason_detail.clone().unwrap_or_default(),
                        },
                    };
                    text += &format!(
                        "{:w$}  {cap:cw$}  {:7}  {}\n",
                        row.id,
                        c.outcome.as_str(),
                        head
                    );
                    if c.outcome != Outcome::Present {
                        exit = worse(exit, Exit::Red);
                        text += "remedy:\n";
                        for l in &c.remedy {
                            text += &format!("  {l}\n");
                        }
                    }
                    json_rows.push(json!({
                        "machine": row.id,
                        "capability": cap,
                        "ok": true,
                        "outcome": c.outcome,
                        "remedy": c.remedy,
                        "row": c,
                    }));
                }
            }
        }
    }
    if ctx.json {
        out_json(&json!({
            "verb": "machine probe",
            "ledger": led.path(),
            "results": json_rows,
        }));
    } else {
        out(&visible(&text));
    }
    Ok(exit)
}

/// `machine remeasure`: plan (what is fresh, stale, never probed), re-run
/// the stale work on every machine at once, print one line per change and
/// per row left alone.
///
/// Exit: 0 nothing stale failed; 1 a re-probed capability is absent or
/// failed (its remedy printed); 3 a machine could not be reached or
/// measured (the others completed); 2 a refusal (before anything ran, or a
/// capability refused before contact, e.g. `docker-probe-image-unpinned`).
async fn remeasure(ctx: &Ctx, ids: &[String], timeout: Duration) -> Result<Exit> {
    let machines = Machines::load(&ctx.home)?;
    let rows = if ids.is_empty() {
        if machines.rows.is_empty() {
            return Err(crate::error::Usage(format!(
                "no machine rows in {} — add [machine.<id>] rows (docs/fleet.md), then run this again",
                ctx.home.machines().display()
            ))
            .into());
        }
        (machines.rows.values().cloned().collect(), None)
    } else {
        rows_for(ctx, &machines, ids).await?
    };
    let (rows, borrowed) = rows;
    let r = remeasured(ctx, &machines, rows, timeout).await;
    give_back(borrowed).await?;
    let r = r?;
    if ctx.json {
        out_json(&r.json);
    } else {
        out(&visible(&r.text));
    }
    Ok(r.exit)
}

/// `certify --remeasure --machine IDS`: before certify admits them,
/// re-measure what `machine remeasure` would on those machines (every
/// fleet machine of machines.toml for `@admitted`), and say so on stderr
/// (certify's stdout stays its own). A machine that could not be
/// re-measured is named there and left to admission, which refuses it.
///
/// Errors: what refuses before anything runs (`machine-unknown`,
/// machines.toml, the ledger, the catalog); `usage` without `--machine`.
pub(crate) async fn remeasure_before_certify(ctx: &Ctx, ids: &[String]) -> Result<()> {
    let machines = Machines::load(&ctx.home)?;
    let ids = match ids {
        [] => {
            return Err(crate::error::Usage(
                "--remeasure re-measures fleet machines before certifying on them — give --machine ID[,ID…] or --machine @admitted".into(),
            )
            .into());
        }
        [one] if one == crate::dispatch::admit::ADMITTED => {
            crate::dispatch::admit::expand(&ctx.home, &machines, ids)?.0
        }
        _ => ids.to_vec(),
    };
    let (rows, borrowed) = rows_for(ctx, &machines, &ids).await?;
    say!(
        "--remeasure: re-measuring what is stale or not present on {} before admission",
        ids.join(", ")
    );
    let r = remeasured(ctx, &machines, rows, REMEASURE_TIMEOUT).await;
    give_back(borrowed).await?;
    let r = r?;
    say_part!("{}", visible(&r.text));
    Ok(())
}

/// `certify --remeasure`'s budget per machine and step (`machine
/// remeasure`'s `--timeout` default).
const REMEASURE_TIMEOUT: Duration = Duration::from_secs(30);

/// What one re-measure did: the lines a person reads, the `--json`
/// object, the exit code.
struct Remeasured {
    text: String,
    json: Value,
    exit: Exit,
}

/// `machine remeasure` of `rows` (`machines` is the whole fleet, for the
/// never-probed lines).
async fn remeasured(
    ctx: &Ctx,
    machines: &Machines,
    rows: Vec<MachineRow>,
    timeout: Duration,
) -> Result<Remeasured> {
    use crate::fleet::remeasure::{self as rm, CapPlan};
    let cat = ctx.catalog()?;
    let window = crate::fleet::freshness_window(&ctx.home)?;
    let fleet: Vec<MachineRow> = machines.rows.values().cloned().collect();
    let led = Arc::new(Ledger::open(&ctx.home)?);
    let plans = rm::plan(
        &ctx.home,
        &cat,
        ctx.catalog.as_deref(),
        &led,
        &rows,
        &fleet,
        window,
    );
    let _ = crate::cancel::install();
    let settings = rm::Settings {
        timeout,
        catalog_flag: ctx.catalog.clone(),
    };
    let rows: Vec<MachineRow> = plans.iter().map(|p| p.row.clone()).collect();
    let lines = machine_lines(&rows, "re-measuring");
    let results = rm::run(&ctx.home, &led, &cat, &plans, &settings, lines).await;
    let mut exit = Exit::Ok;
    let mut text = String::new();
    let mut changes_all: Vec<String> = Vec::new();
    let mut json_rows = Vec::new();
    for (plan, (row, r)) in plans.iter().zip(&results) {
        let id = &row.id;
        let done = match r {
            Err(e) => {
                exit = worse(exit, e.exit());
                text += &format!("{id}: failed: {}\n", e.line());
                let mut v = error_json(e);
                v["machine"] = id.clone().into();
                v["ok"] = false.into();
                json_rows.push(v);
                continue;
            }
            Ok(d) => d,
        };
        // Facts.
        let (before, fresh) = &plan.facts;
        let facts_json = match &done.facts {
            Some(after) => {
                let ch = rm::facts_changes(before.as_ref(), after);
                if ch.is_empty() {
                    text += &format!("{id} facts: re-measured ({}), unchanged\n", fresh.words());
                }
                let lines: Vec<String> = ch
                    .iter()
                    .map(|(b, a)| format!("{id} facts: {b} → {a}"))
                    .collect();
                for l in &lines {
                    text += &format!("{l}\n");
                }
                changes_all.extend(lines.iter().cloned());
                json!({"action": "re-measured", "was": fresh.words(), "before": before,
                       "after": after, "changes": lines})
            }
            None => {
                let at = before
                    .as_ref()
                    .map(|f| f.measured_at.as_str())
                    .unwrap_or("");
                text += &format!("{id} facts: fresh, left alone (measured {at})\n");
                json!({"action": "fresh", "before": before, "changes": []})
            }
        };
        let probes_failed = done.probes_failed.as_ref().map(|e| {
            exit = worse(exit, e.exit());
            text += &format!("{id}: probes failed: {}\n", e.line());
            let mut v = error_json(e);
            v["machine"] = id.clone().into();
            v
        });
        // Capabilities.
        let mut caps_json = Vec::new();
        for (cap, p) in &plan.caps {
            let probed = done.probes.iter().find(|(n, _)| n == cap).map(|(_, r)| r);
            let v = match (p, probed) {
                (CapPlan::Fresh(c), _) => {
                    text += &format!(
                        "{id} {cap}: fresh, left alone ({}, measured {})\n",
                        rm::state(c),
                        c.measured_at
                    );
                    json!({"capability": cap, "action": "fresh", "before": c, "changes": []})
                }
                (CapPlan::NotInCatalog(c), _) => {
                    text += &format!(
                        "{id} {cap}: left alone — `{cap}` is no longer in the catalog ({}), so it cannot be probed again\n",
                        cat.origin
                    );
                    json!({"capability": cap, "action": "not-in-catalog", "before": c, "changes": []})
                }
                (CapPlan::NeverProbed { probe }, _) => {
                    text += &format!(
                        "{id} {cap}: never probed on {id} — no recorded inputs to re-run; probe it with its absolute path on {id}:\n  {probe}\n"
                    );
                    json!({"capability": cap, "action": "never-probed", "probe": probe, "changes": []})
                }
                (CapPlan::Reprobe(before, why), None) => {
                    // The machine's probes failed (reported above); nothing
                    // was recorded for this capability.
                    json!({"capability": cap, "action": "not-run", "was": why.words(), "before": before, "changes": []})
                }
                (CapPlan::Reprobe(before, why), Some(Err(e))) => {
                    exit = worse(exit, e.exit());
                    text += &format!("{id} {cap}: not re-probed: {}\n", e.line());
                    let mut v = error_json(e);
                    v["capability"] = cap.clone().into();
                    v["action"] = "refused".into();
                    v["was"] = why.words().into();
                    v["before"] = json!(before);
                    v["changes"] = json!([]);
                    v
                }
                (CapPlan::Reprobe(before, why), Some(Ok(after))) => {
                    let lines: Vec<String> = rm::capability_change(before, after)
                        .map(|(b, a)| vec![format!("{id} {cap}: {b} → {a}")])
                        .unwrap_or_default();
                    if lines.is_empty() {
                        text += &format!(
                            "{id} {cap}: re-probed ({}), unchanged ({})\n",
                            why.words(),
                            rm::state(after)
                        );
                    }
                    for l in &lines {
                        text += &format!("{l}\n");
                    }
                    changes_all.extend(lines.iter().cloned());
                    if after.outcome != Outcome::Present {
                        exit = worse(exit, Exit::Red);
                        text += "remedy:\n";
                        for l in &after.remedy {
                            text += &format!("  {l}\n");
                        }
                    }
                    json!({"capability": cap, "action": "re-probed", "was": why.words(),
                           "before": before, "after": after, "outcome": after.outcome,
                           "remedy": after.remedy, "changes": lines})
                }
            };
            caps_json.push(v);
        }
        json_rows.push(json!({"machine": id, "ok": true, "facts": facts_json,
                              "capabilities": caps_json, "probes_failed": probes_failed}));
    }
    Ok(Remeasured {
        json: json!({
            "verb": "machine remeasure",
            "ledger": led.path(),
            "freshness_window": humantime::format_duration(window).to_string(),
            "changes": changes_all,
            "results": json_rows,
        }),
        text,
        exit,
    })
}
