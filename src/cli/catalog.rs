//! `saphan catalog show [NAME]`: the closed capability catalog.

use crate::cli::{Ctx, out, out_json};
use crate::error::{Exit, Result};
use clap::Subcommand;

/// `saphan catalog …`
#[derive(Debug, Subcommand)]
pub enum CatalogCmd {
    /// Show every capability row, or one in full.
    ///
    /// The `machines` column is descriptive (where the historical m0..m3
    /// topology carried a capability), never an allow-list.
    Show {
        /// A capability name (`go`, `docker-oci` …); refused by name if not in the catalog.
        name: Option<String>,
    },
}

fn row_json(name: &str, c: &crate::catalog::Capability) -> serde_json::Value {
    let mut v = serde_json::to_value(c).unwrap_or_default();
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("name".into(), name.into());
        m.insert("digest".into(), c.digest(name).into());
    }
    v
}

/// Run `catalog …`.
pub async fn run(ctx: &Ctx, cmd: CatalogCmd) -> Result<Exit> {
    let cat = ctx.catalog()?;
    match cmd {
        CatalogCmd::Show { name: Some(name) } => {
            let c = cat.get(&name)?;
            if ctx.json {
                let mut v = row_json(&name, c);
                v["catalog"] = cat.origin.clone().into();
                out_json(&v);
            } else {
                let mut s = format!("{name}\n  kind      {}\n", c.kind);
                if !c.programs.is_empty() {
                    s += &format!("  programs  {}\n", c.programs.join(", "));
                }
                if !c.version.is_empty() {
                    s += &format!("  version   {}\n", c.version.join(" "));
                }
                s += &format!(
                    "  machines  {} (descriptive, not an allow-list)\n",
                    if c.machines.is_empty() {
                        "-".into()
                    } else {
                        c.machines.join(", ")
                    }
                );
                for (k, v) in &c.extra {
                    s += &format!("  {k:<9} {v}\n");
                }
                if !c.install.is_empty() {
                    s += "  install\n";
                    for (p, cmd) in &c.install {
                        s += &format!("    {p:<8} {cmd}\n");
                    }
                }
                s += &format!(
                    "  digest    {}\n  catalog   {}\n",
                    c.digest(&name),
                    cat.origin
                );
                out(&s);
            }
        }
        CatalogCmd::Show { name: None } => {
            if ctx.json {
                let rows: serde_json::Map<String, serde_json::Value> = cat
                    .rows
                    .iter()
                    .map(|(n, c)| (n.clone(), row_json(n, c)))
                    .collect();
                out_json(&serde_json::json!({ "catalog": cat.origin, "capabilities": rows }));
            } else {
                let w = cat.rows.keys().map(String::len).max().unwrap_or(4).max(10);
                let mut s = format!(
                    "{:w$}  {:9}  {:24}  machines\n",
                    "capability", "kind", "programs"
                );
                for (n, c) in &cat.rows {
                    s += &format!(
                        "{n:w$}  {:9}  {:24}  {}\n",
                        c.kind,
                        c.programs.join(","),
                        c.machines.join(",")
                    );
                }
                s += &format!(
                    "({} capabilities, catalog: {})\n",
                    cat.rows.len(),
                    cat.origin
                );
                out(&s);
            }
        }
    }
    Ok(Exit::Ok)
}
