//! `saphan init [--repo DIR] [--yes]`: detect the stack, explain the trade,
//! show the two keys, ask (default no), write only on yes. Detection and the
//! proposal live in [`crate::config::init`]; the write goes through
//! [`crate::config::edit::set_many`].

use super::{Ctx, out, out_json};
use crate::config::{self, Origin, Place, edit, init};
use crate::error::{Exit, IoError, Result};
use clap::Args;
use serde_json::json;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// Propose a [verify.full] block for the repository's stack, into the
/// repository's own declaration.
///
/// Looks for one marker in the repository root, first match in this order:
/// go.mod, package.json, Cargo.toml, pyproject.toml (or pytest.ini,
/// conftest.py, a setup.cfg or tox.ini naming pytest: pytest with JUnit
/// XML), Package.swift, pom.xml, build.gradle(.kts). Shows the keys it
/// would write to <git-common-dir>/saphan/config (SAPHAN_HOME/config outside
/// a git repository) and asks, defaulting to no. Without a terminal it
/// writes nothing unless --yes is given.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The repository (default: the current directory; inside a git
    /// repository its top directory is used).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Write the proposal without asking.
    #[arg(long)]
    pub yes: bool,
}

/// Why init wrote or did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    Declined,
    NoTerminal,
    AlreadyDeclared,
    NothingRecognised,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::Declined => "declined",
            Outcome::NoTerminal => "no-terminal",
            Outcome::AlreadyDeclared => "already-declared",
            Outcome::NothingRecognised => "nothing-recognised",
        }
    }
}

fn wrap(text: &str, width: usize) -> String {
    let mut s = String::new();
    let mut col = 0;
    for w in text.split_whitespace() {
        if col > 0 && col + 1 + w.len() > width {
            s.push('\n');
            col = 0;
        } else if col > 0 {
            s.push(' ');
            col += 1;
        }
        s.push_str(w);
        col += w.len();
    }
    s.push('\n');
    s
}

/// Run `saphan init`.
pub async fn run(ctx: &Ctx, args: InitArgs) -> Result<Exit> {
    let dir = match args.repo {
        Some(d) => d,
        None => std::env::current_dir().map_err(|source| IoError::Io {
            action: "read the current directory",
            path: PathBuf::from("."),
            source,
        })?,
    };
    if !dir.is_dir() {
        return Err(init::InitError::NoDirectory { path: dir }.into());
    }
    // Inside a git repository the proposal is the repository's own
    // declaration (it wins over the operator's for it alone); elsewhere the
    // operator's.
    let (root, place) = match crate::git::Repo::open(&dir).await {
        Ok(r) => (r.top.clone(), Place::repository(&r.common_dir)),
        Err(_) => (
            std::fs::canonicalize(&dir).unwrap_or(dir),
            Place::operator(&ctx.home),
        ),
    };
    let cfg_path = place.path.clone();
    // A broken config is refused before anything is proposed: init would
    // not be able to write into it anyway (nor certify read it).
    let declared = config::read_declared(&cfg_path)?;
    let operator = match place.origin {
        Origin::Repository => Some(config::read_declared(&ctx.home.config())?),
        Origin::Operator => None,
    };
    let repo_arg = (place.origin == Origin::Repository).then_some(root.as_path());
    let proposal = init::detect(&root);

    let mut text = format!("saphan init: {}\n", root.display());
    let outcome = match &proposal {
        None => {
            text.push_str(&format!(
                "recognised no stack: none of {} is in the repository root.\n\
                 Proposing nothing — a made-up suite is worse than none. Declare the suite yourself:\n  \
                 saphan config set verify.full.argv \"<program>,<arg>,…\"\n  \
                 saphan config set verify.full.report <go-test-json|junit-xml|exitcode>\n",
                init::marker_names().join(", ")
            ));
            Outcome::NothingRecognised
        }
        Some(p) => {
            text.push_str(&format!("detected: {}\n\n", init::detected(p)));
            text.push_str(&wrap(&init::trade(p, place.origin), 78));
            if let Some(cur) = &declared.full {
                let same = cur.argv == init::argv_vec(p)
                    && cur.report_kind() == p.report
                    && cur.report.is_some();
                if same {
                    text.push_str(&format!(
                        "\n[verify.full] in {} already declares exactly this; nothing to write.\n",
                        cfg_path.display()
                    ));
                } else {
                    text.push_str(&format!(
                        "\n[verify.full] is already declared in {}: argv {}, report {}.\n\
                         init does not replace a declaration. To switch to the proposal, run:\n  {}\n",
                        cfg_path.display(),
                        serde_json::to_string(&cur.argv).unwrap_or_default(),
                        cur.report_kind().as_str(),
                        init::commands(p, repo_arg).join("\n  "),
                    ));
                }
                Outcome::AlreadyDeclared
            } else {
                text.push_str(&format!(
                    "\nIt would write these {} keys to {}:\n  {}\n",
                    if p.report_path.is_some() {
                        "three"
                    } else {
                        "two"
                    },
                    cfg_path.display(),
                    init::commands(p, repo_arg).join("\n  "),
                ));
                if let Some(op) = operator.as_ref().and_then(|d| d.full.as_ref()) {
                    text.push_str(&format!(
                        "Today the operator's [verify.full] in {} applies here (argv {}); this \
                         repository's own would win over it, for this repository only.\n",
                        ctx.home.config().display(),
                        serde_json::to_string(&op.argv).unwrap_or_default(),
                    ));
                }
                if args.yes {
                    Outcome::Written
                } else if ctx.json || !std::io::stdin().is_terminal() {
                    text.push_str(
                        "\nNo terminal to ask on, so nothing was written. Re-run with --yes to\n\
                         write these keys, or run the commands yourself.\n",
                    );
                    Outcome::NoTerminal
                } else {
                    text.push_str("\nWrite them? [y/N] ");
                    out(&text);
                    text.clear();
                    let mut answer = String::new();
                    let _ = std::io::stdout().flush();
                    let _ = std::io::stdin().lock().read_line(&mut answer);
                    match answer.trim().to_ascii_lowercase().as_str() {
                        "y" | "yes" => Outcome::Written,
                        _ => {
                            text.push_str("Nothing written.\n");
                            Outcome::Declined
                        }
                    }
                }
            }
        }
    };

    if outcome == Outcome::Written
        && let Some(p) = &proposal
    {
        edit::set_many(&place, &init::keys(p))?;
        let mut keys: Vec<String> = init::keys(p).into_iter().map(|(k, _)| k).collect();
        let last = keys.pop().unwrap_or_default();
        text.push_str(&format!(
            "\nWrote {} and {last} to {}; `saphan config show{}` prints them.\n",
            keys.join(", "),
            cfg_path.display(),
            repo_arg
                .map(|r| {
                    let r = r.display().to_string();
                    format!(" --repo {}", crate::quote::quote(&r).unwrap_or(r))
                })
                .unwrap_or_default(),
        ));
    }

    if ctx.json {
        out_json(&json!({
            "repo": root,
            "detected": proposal.as_ref().map(|p| json!({
                "stack": p.stack,
                "marker": p.marker,
                "argv": init::argv_vec(p),
                "report": p.report.as_str(),
                "report_path": p.report_path,
            })),
            "keys": proposal.as_ref().map(|p| init::keys(p).iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>()),
            "commands": proposal.as_ref().map(|p| init::commands(p, repo_arg)),
            "written": outcome == Outcome::Written,
            "outcome": outcome.as_str(),
            "config": cfg_path,
            "declaration": match place.origin { Origin::Repository => "repository", Origin::Operator => "operator" },
        }));
    } else {
        out(&text);
    }
    Ok(Exit::Ok)
}
