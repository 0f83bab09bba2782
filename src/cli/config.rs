//! `saphan config set|unset|show`: clap types, and the printing of what the
//! engine ([`crate::config::edit`], [`crate::config::show`]) did.

use super::{Ctx, out, out_json};
use crate::config::{Place, edit, show};
use crate::error::{Exit, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::PathBuf;

/// Read and edit config-v1 (`SAPHAN_HOME/config`, or with --repo the
/// repository's own declaration), one key per act.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The repository whose own declaration to read or edit:
    /// `<git-common-dir>/saphan/config`, which wins over SAPHAN_HOME/config
    /// for that repository (never a file of its tree). `show --repo` prints
    /// both and which applies.
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: ConfigCmd,
}

/// The config verbs.
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Set one key, e.g. `saphan config set verify.full.argv "npm,test"`.
    ///
    /// Keys: verify.full.{argv,report,report_path,timeout},
    /// verify.affected.{…the same…}, verify.provision.<alias>.{repo,source,dest},
    /// fleet.freshness. Every other byte of the file is left as it is.
    Set {
        /// The dotted key.
        key: String,
        /// The value. For argv: "program,arg,…" or a TOML array such as '["sh","-c","a,b"]'.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Remove one key, or a whole block (`verify.full`, `verify.provision.<alias>`).
    Unset {
        /// The dotted key or block.
        key: String,
    },
    /// Print what is currently declared (with the defaults that apply).
    Show,
}

/// Run a config verb.
pub async fn run(ctx: &Ctx, args: ConfigArgs) -> Result<Exit> {
    let repo = match &args.repo {
        Some(dir) => Some(crate::git::Repo::open(dir).await?),
        None => None,
    };
    let place = match &repo {
        Some(r) => Place::repository(&r.common_dir),
        None => Place::operator(&ctx.home),
    };
    match args.cmd {
        ConfigCmd::Set { key, value } => {
            let e = edit::set(&place, &key, &value)?;
            let shown = e.value.clone().unwrap_or_default();
            if ctx.json {
                out_json(&json!({
                    "action": "set", "key": e.key, "value": shown,
                    "changed": e.changed, "path": e.path,
                }));
            } else if e.changed {
                out(&format!(
                    "set {} = {} in {}\n",
                    e.key,
                    shown,
                    e.path.display()
                ));
            } else {
                out(&format!(
                    "{} is already {} — {} unchanged\n",
                    e.key,
                    shown,
                    e.path.display()
                ));
            }
        }
        ConfigCmd::Unset { key } => {
            let e = edit::unset(&place, &key)?;
            if ctx.json {
                out_json(&json!({
                    "action": "unset", "key": e.key, "changed": e.changed, "path": e.path,
                }));
            } else if e.changed {
                out(&format!("unset {} in {}\n", e.key, e.path.display()));
            } else {
                out(&format!(
                    "{} was not set — {} unchanged\n",
                    e.key,
                    e.path.display()
                ));
            }
        }
        ConfigCmd::Show => match &repo {
            Some(r) => {
                let s = show::show_repo(&ctx.home, &r.top, &r.common_dir)?;
                if ctx.json {
                    out_json(&s.to_json());
                } else {
                    out(&s.to_text());
                }
            }
            None => {
                let s = show::show(&place)?;
                if ctx.json {
                    out_json(&s.to_json());
                } else {
                    out(&s.to_text());
                }
            }
        },
    }
    Ok(Exit::Ok)
}
