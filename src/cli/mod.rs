//! The command line: clap types and nothing else. Each verb family has one
//! file; each turns its clap arguments into plain settings and calls the
//! engine. This module is the only place that prints errors and maps them to
//! exit codes (DESIGN §4).
//!
//! The doc comments of the clap types are the `--help` text a terminal
//! shows, where `<alias>`-style placeholders are the convention; rustdoc
//! would read them as HTML tags, so that lint is off here alone.
#![allow(rustdoc::invalid_html_tags)]

/// `eprintln!` that cannot panic: words for stderr through `err_text`. A
/// closed or broken stderr loses the words, never the verdict's exit code.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::cli::err_text(&format!("{}\n", format_args!($($t)*)))
    };
}

/// `eprint!` that cannot panic (no newline added); see `say!`.
macro_rules! say_part {
    ($($t:tt)*) => {
        $crate::cli::err_text(&format!($($t)*))
    };
}

pub mod affected;
pub mod certify;
pub mod stream;
pub mod union;

use crate::error::{Exit, Result};
use crate::home::Home;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

pub mod catalog;
pub mod config;
pub mod init;
pub mod junit;
pub mod machine;
pub mod shell;
pub mod status;
pub mod why;

/// saphan — certify an exact trunk SHA by running the declared suite in a
/// fresh detached worktree, locally or on an SSH fleet.
#[derive(Debug, Parser)]
#[command(name = "saphan", version, about, long_about = None)]
pub struct Cli {
    /// Print one JSON object on stdout (the record, the result, or the refusal).
    #[arg(long, global = true)]
    pub json: bool,
    /// Use this capability catalog instead of SAPHAN_HOME/catalog.toml (when
    /// it exists) or the embedded one.
    #[arg(long, global = true, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Certify an exact SHA: run the declared suite in a fresh detached worktree.
    Certify(certify::CertifyArgs),
    /// List a repository's attempt records, or show one.
    Records(certify::RecordsArgs),
    /// Read and edit config-v1 (SAPHAN_HOME/config), one key per act.
    Config(config::ConfigArgs),
    /// Propose a [verify.full] block for the repository's stack.
    Init(init::InitArgs),
    // Help text: the doc comment of the Args type.
    VerifyUnion(union::VerifyUnionArgs),
    // Help text: the doc comment of the Args type.
    VerifyStream(union::VerifyStreamArgs),
    // Help text: the doc comment of the Args type.
    VerifyAffected(affected::VerifyAffectedArgs),
    /// Work streams and their returns: start, status, gate stop-2, teardown.
    #[command(subcommand)]
    Stream(stream::StreamCmd),
    /// Machine rows, and the measure and probe ceremonies.
    Machine {
        #[command(subcommand)]
        cmd: machine::MachineCmd,
    },
    /// The closed capability catalog.
    Catalog {
        #[command(subcommand)]
        cmd: catalog::CatalogCmd,
    },
    // Help text: the doc comment of the Args type.
    Adapter(affected::AdapterArgs),
    // Help text: the doc comment of the Args type.
    Status(status::StatusArgs),
    // Help text: the doc comment of the Args type.
    Completions(shell::CompletionsArgs),
    // Help text: the doc comment of the Args type.
    Man(shell::ManArgs),
}

/// What every verb gets besides its own arguments.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// `--catalog`.
    pub catalog: Option<PathBuf>,
    /// `SAPHAN_HOME`.
    pub home: Home,
}

impl Ctx {
    /// Load the capability catalog this invocation uses: `--catalog`, else
    /// SAPHAN_HOME/catalog.toml when it exists, else the embedded one
    /// ([`crate::catalog::Catalog::for_home`]).
    pub fn catalog(&self) -> Result<crate::catalog::Catalog> {
        crate::catalog::Catalog::for_home(&self.home, self.catalog.as_deref())
    }
}

/// Whether a write to stdout has failed (a closed pipe, `| head -c0`).
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write to stdout. Once a write fails (a reader that closed its end of the
/// pipe) nothing more is written, and the verb runs on to its own exit
/// code: a red or a refusal whose reader went away is still a red or a
/// refusal, never an exit 0 (it was `exit(0)` on a broken pipe).
pub fn out(text: &str) {
    use std::sync::atomic::Ordering;
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut so = std::io::stdout().lock();
    if so
        .write_all(text.as_bytes())
        .and_then(|_| so.flush())
        .is_err()
    {
        STDOUT_GONE.store(true, Ordering::Relaxed);
    }
}

/// Write to stderr, ignoring a closed or broken stderr (`2>&-` is made
/// /dev/null by std; a pipe whose reader left fails with EPIPE, on which
/// `eprintln!` panics, exit 101): what `say!` prints through.
pub fn err_text(text: &str) {
    let mut se = std::io::stderr().lock();
    let _ = se.write_all(text.as_bytes()).and_then(|_| se.flush());
}

/// Text for a person's terminal: every control character except newline and
/// tab (C0, DEL, C1 — escape sequences, carriage returns, backspaces, the
/// bytes that set window titles or erase lines) is written out visibly as
/// `\x1b` / `\u{9b}`, so text a machine sent (version output, remote
/// stderr, measured facts) cannot redraw, hide or forge what the operator
/// reads. Human output of remote-sourced text goes through this one helper;
/// the ledger and `--json` keep the exact bytes (JSON-escaped).
pub fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !bad(c) {
            o.push(c);
        } else if (c as u32) < 0x80 {
            o.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            o.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    std::borrow::Cow::Owned(o)
}

/// Print one JSON value as one line on stdout.
pub fn out_json(v: &serde_json::Value) {
    out(&format!("{v}\n"));
}

async fn dispatch(ctx: Ctx, cmd: Command) -> Result<Exit> {
    match cmd {
        Command::Catalog { cmd } => catalog::run(&ctx, cmd).await,
        Command::Machine { cmd } => machine::run(&ctx, cmd).await,
        Command::Stream(c) => stream::run(&ctx, c).await,
        Command::Certify(a) => certify::run(&ctx, a).await,
        Command::Records(a) => certify::records(&ctx, a).await,
        Command::Config(a) => config::run(&ctx, a).await,
        Command::Init(a) => init::run(&ctx, a).await,
        Command::VerifyAffected(a) => affected::verify_affected(&ctx, a).await,
        Command::Adapter(a) => affected::adapter(a),
        Command::VerifyUnion(a) => union::verify_union(&ctx, a).await,
        Command::VerifyStream(a) => union::verify_stream(&ctx, a).await,
        Command::Status(a) => status::run(&ctx, a).await,
        Command::Completions(a) => shell::completions(a),
        Command::Man(a) => shell::man(&ctx, a),
    }
}

/// Print a clap parse failure. Help and `--version` (and the help clap shows
/// for a bare `saphan`) print as clap prints them; any other parse error is
/// one line, `saphan: usage: <what> — see `saphan <verb> --help``, exit 2,
/// and under `--json` also `{"error":"usage",…}` on stdout.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    // args_os: an argument that is not UTF-8 is exactly what clap refused
    // here, and std::env::args() would panic on it (exit 101).
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (line, json) = usage_line(&e, &args);
    if json {
        out_json(&serde_json::json!({
            "error": "usage",
            "message": line.strip_prefix("saphan: usage: ").unwrap_or(&line),
            "exit_code": Exit::Refusal as u8,
        }));
    }
    say!("{}", echo_escaped(line));
    ExitCode::from(Exit::Refusal as u8)
}

/// The usage refusal for a parse error of `args` (without the program
/// name), and whether `--json` was among them. The first line is
/// `saphan: usage: <what> — see `saphan <verb> --help``; when clap's first
/// line ends in `:` (the missing arguments follow it) the names it lists are
/// joined onto it. Every other line clap printed (its `tip:` lines, possible
/// values, the `Usage:` line) follows, indented two spaces, except its
/// closing "For more information, try '--help'." which the first line says.
fn usage_line(e: &clap::Error, args: &[String]) -> (String, bool) {
    use clap::CommandFactory;
    let rendered = e.render().to_string();
    let mut lines = rendered
        .lines()
        .map(str::trim_end)
        .skip_while(|l| l.trim().is_empty())
        .peekable();
    let first = lines
        .next()
        .map(str::trim)
        .unwrap_or("the arguments could not be parsed");
    let mut what = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if what.ends_with(':') {
        let mut named = Vec::new();
        while let Some(l) = lines.next_if(|l| l.starts_with(' ') && !l.trim().is_empty()) {
            named.push(l.trim().to_string());
        }
        if !named.is_empty() {
            what = format!("{what} {}", named.join(", "));
        }
    }
    let hints: Vec<String> = lines
        .filter(|l| !l.trim().is_empty() && !l.trim().starts_with("For more information, try"))
        .map(|l| format!("  {}", l.trim()))
        .collect();
    let until_dashdash = args.iter().take_while(|a| a.as_str() != "--");
    let json = until_dashdash.clone().any(|a| a == "--json");
    // The verb path: each argument that names a subcommand of the last one.
    let mut cmd = Cli::command();
    let mut verbs: Vec<String> = Vec::new();
    for a in until_dashdash {
        let next = cmd
            .get_subcommands()
            .find(|c| c.get_name() == a || c.get_all_aliases().any(|x| x == a))
            .cloned();
        if let Some(c) = next {
            verbs.push(c.get_name().to_string());
            cmd = c;
        }
    }
    let mut help = String::from("saphan");
    for v in &verbs {
        help.push(' ');
        help.push_str(v);
    }
    let mut line = format!("saphan: usage: {what} — see `{help} --help`");
    for h in hints {
        line.push('\n');
        line.push_str(&h);
    }
    (line, json)
}

/// `line` with every command-line argument that holds a control character
/// (a newline in `--sha`, a key, a dest; an escape sequence) echoed escaped
/// (`\n`, `\u{1b}`), so an operator's typo cannot break the one-line
/// refusal or forge a second line. (A refusal's own text may span lines on
/// purpose — trunkcert's instructions — so only what was typed is escaped.)
fn echo_escaped(mut line: String) -> String {
    let mut typed: Vec<String> = Vec::new();
    for a in std::env::args_os().skip(1) {
        let a = a.to_string_lossy().into_owned();
        if let Some((_, v)) = a.strip_prefix("--").and_then(|r| r.split_once('=')) {
            typed.push(v.to_string());
        }
        typed.push(a);
    }
    typed.retain(|a| a.chars().any(char::is_control));
    // Longest first, so a value inside a longer argument is not split.
    typed.sort_by_key(|a| std::cmp::Reverse(a.len()));
    for a in typed {
        line = line.replace(&a, &crate::error::one_line(&a));
    }
    line
}

/// Parse the command line, run the verb, print any error, return the exit code.
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("RUST_LOG"))
        .with_writer(std::io::stderr)
        .init();
    // What a ledger read tells the operator besides its rows.
    crate::fleet::ledger::on_note(|n| say!("saphan: warning: {n}"));
    crate::cancel::on_force(|_| {
        say!(
            "saphan: interrupted: a second signal — killing every suite process group and exiting now"
        )
    });
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let ctx = Ctx {
        json: cli.json,
        catalog: cli.catalog.clone(),
        home: Home::from_env(),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say!("saphan: runtime: cannot start the async runtime: {e} — check ulimits");
            return ExitCode::from(2);
        }
    };
    let json = ctx.json;
    let result = rt.block_on(dispatch(ctx, cli.command));
    // A blocking task may still wait on something we gave up on (a lock
    // after Ctrl-C): exit now rather than wait for it.
    rt.shutdown_background();
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            if json {
                out_json(&e.to_json());
            }
            // What the operator typed, then what a machine sent: both escaped.
            say!("{}", visible(&echo_escaped(e.line())));
            ExitCode::from(e.exit() as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn visible_escapes_every_control_but_newline_and_tab() {
        use super::visible;
        assert_eq!(visible("go version go1.19\tx\n"), "go version go1.19\tx\n");
        assert_eq!(
            visible("\x1b[2K\rgo present\x07\x7f\u{9b}31m"),
            "\\x1b[2K\\x0dgo present\\x07\\x7f\\u{9b}31m"
        );
    }
}
