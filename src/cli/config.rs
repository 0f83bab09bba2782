//! `saphan config set|unset|show`: clap types, and the printing of what the
//! engine ([`crate::config::edit`], [`crate::config::show`]) did.

use super::{Ctx, out, out_json};
use crate::config::{edit, show};
use crate::error::{Exit, Result};
use clap::{Args, Subcommand};
use serde_json::json;

/// Read and edit config-v1 (`SAPHAN_HOME/config`), one key per act.
#[derive(Debug, Args)]
pub struct ConfigArgs {
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
pub fn run(ctx: &Ctx, args: ConfigArgs) -> Result<Exit> {
    match args.cmd {
        ConfigCmd::Set { key, value } => {
            let e = edit::set(&ctx.home, &key, &value)?;
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
            let e = edit::unset(&ctx.home, &key)?;
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
        ConfigCmd::Show => {
            let s = show::show(&ctx.home)?;
            if ctx.json {
                out_json(&s.to_json());
            } else {
                out(&s.to_text());
            }
        }
    }
    Ok(Exit::Ok)
}
