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
    /// Pin the saphan-probe image the docker-oci probe runs: write IMAGE
    /// (`sha256:<image id>` or `NAME@sha256:<registry digest>`) into
    /// SAPHAN_HOME/catalog.toml — a copy of the embedded catalog the first
    /// time, afterwards only its docker-oci `image` line — or into the
    /// `--catalog` file when one is given. Every command without
    /// `--catalog` then uses that catalog.
    Pin {
        /// The pin: `sha256:<64 hex>` (a local image ID, what
        /// `saphan catalog probe-image` prints) or `NAME@sha256:<64 hex>`.
        image: String,
    },
    /// Write the saphan-probe image as a `docker save` archive, from the
    /// probe program this binary embeds (no source checkout, no registry,
    /// no Docker needed here). Prints one line on stdout: the image ID
    /// (`sha256:<64 hex>`) that `docker load -i FILE` gives it on every
    /// machine — the value to `saphan catalog pin`.
    ProbeImage {
        /// Where to write the archive.
        #[arg(long, value_name = "FILE")]
        save: std::path::PathBuf,
        /// The tag `docker load` applies.
        #[arg(long, value_name = "NAME:TAG", default_value = crate::docker::probe_image::DEFAULT_TAG)]
        tag: String,
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

/// `catalog pin IMAGE`: check the pin, write it into the catalog file every
/// command picks up, say what it makes stale.
///
/// Errors: the pin's refusals (`docker-probe-image-tag`,
/// `docker-probe-image-unpinned`, `docker-probe-image-pin-malformed`),
/// `saphan-home-exposed`, `catalog-malformed` — all before anything is
/// written.
fn pin(ctx: &Ctx, image: &str) -> Result<Exit> {
    let p = crate::commands::catalog::pin(&ctx.home, ctx.catalog.as_deref(), image)?;
    let origin = p.path.display().to_string();
    let uses = if ctx.catalog.is_some() {
        format!(
            "commands use it with --catalog {}",
            crate::fleet::remedy::quote(&origin)
        )
    } else {
        "every command without --catalog now uses it".to_string()
    };
    if ctx.json {
        out_json(&serde_json::json!({
            "catalog": origin,
            "image": image,
            "previous": p.previous,
            "digest": p.digest,
        }));
    } else {
        out(&format!(
            "pinned docker-oci to {image} in {origin}{}\n{uses}; docker-oci rows measured under another pin are stale — re-probe them: {} machine remeasure\n",
            p.previous
                .map(|p| format!(" (was {p})"))
                .unwrap_or_default(),
            crate::fleet::remedy::saphan_prefix(&ctx.home, ctx.catalog.as_deref()),
        ));
    }
    Ok(Exit::Ok)
}

/// `catalog probe-image --save FILE`: write the archive, print its image ID.
fn probe_image(ctx: &Ctx, save: &std::path::Path, tag: &str) -> Result<Exit> {
    let a = crate::docker::probe_image::archive(tag)?;
    crate::fsutil::atomic_write(save, &a.bytes)?;
    let file = std::path::absolute(save).unwrap_or_else(|_| save.to_path_buf());
    let q = crate::fleet::remedy::quote(&file.to_string_lossy());
    let pin = format!(
        "{} catalog pin {}",
        crate::fleet::remedy::saphan_prefix(&ctx.home, ctx.catalog.as_deref()),
        a.image_id
    );
    if ctx.json {
        out_json(&serde_json::json!({
            "image": a.image_id,
            "file": file,
            "tag": tag,
            "bytes": a.bytes.len(),
            "load": format!("docker load -i {q}"),
            "pin": pin,
        }));
    } else {
        say!(
            "saphan: wrote the saphan-probe image {tag} to {} ({} bytes); load it on a machine with `docker load -i {q}`, then pin it: {pin}",
            file.display(),
            a.bytes.len()
        );
        out(&format!("{}\n", a.image_id));
    }
    Ok(Exit::Ok)
}

/// Run `catalog …`.
pub async fn run(ctx: &Ctx, cmd: CatalogCmd) -> Result<Exit> {
    match &cmd {
        CatalogCmd::Pin { image } => return pin(ctx, image),
        CatalogCmd::ProbeImage { save, tag } => return probe_image(ctx, save, tag),
        CatalogCmd::Show { .. } => {}
    }
    let cat = ctx.catalog()?;
    match cmd {
        CatalogCmd::Pin { .. } | CatalogCmd::ProbeImage { .. } => unreachable!("handled above"),
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
