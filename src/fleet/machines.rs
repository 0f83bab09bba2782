//! Machine rows: `SAPHAN_HOME/fleet/machines.toml` (the repository's
//! `fleet/machines.toml` is the historical m0..m3 example).
//!
//! ```toml
//! [machine.m1]
//! transport = "ssh"        # "local" | "ssh"
//! host = "m1"              # ssh host alias in SAPHAN_HOME/ssh/config; defaults to the id
//! workhome = "/var/lib/saphan"
//! ```
//!
//! A row says how to reach a machine, nothing about what it can run: that is
//! only ever learned by measuring and probing it.
//!
//! A `[pool.NAME]` row (`transport = "slurm"`, [`crate::slurm::Pool`])
//! names nodes saphan borrows from a Slurm cluster for one invocation
//! (`--machine @NAME`); each borrowed node is the machine `NAME/<node>`,
//! a row made when its allocation is granted ([`MachineRow::borrowed`]).

use super::FleetError;
use crate::home::Home;
use crate::transport::{Local, SshOptions, Transport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How saphan reaches a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// This machine, as local processes.
    Local,
    /// SSH through `SAPHAN_HOME/ssh/config`.
    Ssh,
    /// A node borrowed from a Slurm pool, reached with `srun` inside its
    /// allocation ([`MachineRow::slurm`]). Only `[pool.NAME]` rows say
    /// `slurm`; a `[machine.ID]` row that does is refused.
    Slurm,
}

impl TransportKind {
    /// `local`, `ssh` or `slurm`.
    pub fn as_str(&self) -> &'static str {
        match self {
            TransportKind::Local => "local",
            TransportKind::Ssh => "ssh",
            TransportKind::Slurm => "slurm",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRow {
    transport: TransportKind,
    host: Option<String>,
    workhome: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    machine: BTreeMap<String, RawRow>,
    #[serde(default)]
    pool: BTreeMap<String, toml::Table>,
}

/// One machine row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineRow {
    /// The machine id (`[A-Za-z0-9._-]+`).
    pub id: String,
    /// `local` or `ssh`.
    pub transport: TransportKind,
    /// The ssh host alias (the id unless the row names another).
    pub host: String,
    /// The machine's absolute work directory.
    pub workhome: String,
    /// A borrowed node's place in its allocation (job, node, slurm.conf);
    /// `None` for every other row, and for a pool's node before (or
    /// without) an allocation.
    #[serde(skip)]
    pub slurm: Option<crate::transport::SlurmNode>,
    /// A pool's node: the pool's partition (for the remedy's `srun -p`);
    /// `None` for every other row.
    #[serde(skip)]
    pub partition: Option<String>,
}

impl MachineRow {
    /// The row of node `node` of `pool` (`NAME/<node>`, the pool's
    /// workhome), inside allocation `allocation` when one is granted.
    pub fn borrowed(
        pool: &crate::slurm::Pool,
        node: &str,
        allocation: Option<&crate::slurm::Allocation>,
    ) -> MachineRow {
        MachineRow {
            id: pool.machine_id(node),
            transport: TransportKind::Slurm,
            host: node.to_string(),
            workhome: pool.workhome.clone(),
            slurm: allocation.map(|a| a.slurm_node(node)),
            partition: Some(pool.partition.clone()),
        }
    }
}

/// Every machine row of the operator.
#[derive(Debug, Clone, Default)]
pub struct Machines {
    /// Rows by id.
    pub rows: BTreeMap<String, MachineRow>,
    /// Slurm pools by name (`[pool.NAME]`).
    pub pools: BTreeMap<String, crate::slurm::Pool>,
}

/// Whether `id` may name a machine row or a pool (ASCII letters, digits,
/// `.`, `_`, `-`; not `.`, `..` or a leading `-`).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Machines {
    /// Parse machines.toml text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &std::path::Path) -> Result<Machines, FleetError> {
        let bad = |detail: String| FleetError::MachinesMalformed {
            path: origin.to_path_buf(),
            detail,
        };
        let raw: RawFile =
            toml::from_str(text).map_err(|e| bad(crate::fsutil::toml_error_where(text, &e)))?;
        let mut rows = BTreeMap::new();
        for (id, r) in raw.machine {
            if !valid_id(&id) {
                return Err(bad(format!(
                    "machine id `{id}` may only hold letters, digits, `.`, `_` and `-` (not leading), and is not `.` or `..`"
                )));
            }
            if !r.workhome.starts_with('/') {
                return Err(bad(format!(
                    "machine `{id}`: workhome `{}` is not absolute",
                    r.workhome
                )));
            }
            if r.transport == TransportKind::Slurm {
                return Err(bad(format!(
                    "machine `{id}`: transport `slurm` names a pool of borrowed nodes — write it as [pool.{id}] with partition, nodes and workhome (docs/slurm.md)"
                )));
            }
            let host = r.host.unwrap_or_else(|| id.clone());
            if !valid_id(&host) {
                return Err(bad(format!(
                    "machine `{id}`: host alias `{host}` may only hold letters, digits, `.`, `_` and `-` (not leading)"
                )));
            }
            rows.insert(
                id.clone(),
                MachineRow {
                    id,
                    transport: r.transport,
                    host,
                    workhome: r.workhome,
                    slurm: None,
                    partition: None,
                },
            );
        }
        let mut pools = BTreeMap::new();
        for (name, table) in raw.pool {
            let invalid = |detail: String| FleetError::Pool {
                source: Box::new(crate::slurm::SlurmError::PoolInvalid {
                    pool: name.clone(),
                    detail,
                }),
            };
            if !valid_id(&name) {
                return Err(invalid(
                    "a pool's name may only hold letters, digits, `.`, `_` and `-` (not leading) — rename the table".into(),
                ));
            }
            if rows.contains_key(&name) {
                return Err(invalid(format!(
                    "[machine.{name}] has the same name, and both are named with --machine — rename one"
                )));
            }
            if name == "admitted" {
                return Err(invalid(
                    "`admitted` is the name of the --machine @admitted selector — rename the pool"
                        .into(),
                ));
            }
            let pool = crate::slurm::Pool::from_toml_table(&name, &table).map_err(|e| match e {
                crate::slurm::SlurmError::PoolInvalid { .. } => FleetError::Pool {
                    source: Box::new(e),
                },
                other => bad(other.to_string()),
            })?;
            pools.insert(name, pool);
        }
        Ok(Machines { rows, pools })
    }

    /// Load `home`'s machine rows; a missing file holds none.
    ///
    /// A row decides which host a machine is, so SAPHAN_HOME, `fleet/` and
    /// the file itself must be the operator's alone: errors
    /// `saphan-home-exposed` (before the file is read), `machines-malformed`.
    pub fn load(home: &Home) -> Result<Machines, FleetError> {
        let path = home.machines();
        let fleet = path.parent().unwrap_or(home.root());
        super::ledger::perms::check_home_dirs(&[home.root(), fleet, &path])?;
        match std::fs::read(&path) {
            Ok(b) => match crate::fsutil::utf8_or_where(b) {
                Ok(t) => Machines::parse(&t, &path),
                Err(detail) => Err(FleetError::MachinesMalformed { path, detail }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Machines::default()),
            Err(e) => Err(FleetError::MachinesMalformed {
                path,
                detail: format!("cannot read: {e}"),
            }),
        }
    }

    /// The row `id`, or `machine-unknown` naming it.
    pub fn get(&self, home: &Home, id: &str) -> Result<&MachineRow, FleetError> {
        self.rows.get(id).ok_or_else(|| FleetError::MachineUnknown {
            id: id.to_string(),
            path: home.machines(),
            known: if self.rows.is_empty() {
                "none".into()
            } else {
                self.rows.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        })
    }

    /// Resolve a comma-separated id list (`m0,m2`), in the order given,
    /// without duplicates; any unknown id refuses the whole list.
    pub fn select(&self, home: &Home, ids: &[String]) -> Result<Vec<MachineRow>, FleetError> {
        let mut out: Vec<MachineRow> = Vec::new();
        for id in ids
            .iter()
            .flat_map(|s| s.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let row = self.get(home, id)?;
            if !out.iter().any(|r| r.id == row.id) {
                out.push(row.clone());
            }
        }
        Ok(out)
    }
}

/// Open one connection to `row`'s machine within `timeout`.
///
/// Local rows get [`Transport::Local`]. SSH rows resolve `row.host` through
/// `home.ssh_config()` with OpenSSH semantics and connect with key auth and
/// strict host-key checking.
///
/// Errors: the transport's own refusal (unknown host key, connection
/// refused …) wrapped in [`FleetError::Transport`], or
/// [`FleetError::Timeout`] when `timeout` passes first.
pub async fn connect(
    home: &Home,
    row: &MachineRow,
    timeout: Duration,
) -> Result<Transport, FleetError> {
    match row.transport {
        TransportKind::Local => Ok(Transport::Local(Local)),
        TransportKind::Slurm => match &row.slurm {
            Some(node) => Ok(Transport::slurm(node.clone())),
            None => Err(FleetError::Transport {
                machine: row.id.clone(),
                source: Box::new(crate::transport::TransportError::BadArgument {
                    detail: format!(
                        "{} is a node of a Slurm pool and is reached only inside an allocation — name the pool: --machine @{}",
                        row.id,
                        row.id.split('/').next().unwrap_or_default()
                    ),
                }),
            }),
        },
        TransportKind::Ssh => {
            let opts = SshOptions {
                connect_timeout: timeout,
                ..SshOptions::default()
            };
            let config = home.ssh_config();
            let attempt = async {
                let settings = crate::transport::ssh_config::resolve_cached(
                    &config,
                    &row.host,
                    &home.root().join("cache/ssh-g"),
                )
                .await?;
                Transport::connect_ssh(&settings, &opts).await
            };
            match tokio::time::timeout(timeout, attempt).await {
                Ok(Ok(t)) => Ok(t),
                Ok(Err(source)) => Err(FleetError::Transport {
                    machine: row.id.clone(),
                    source: Box::new(source),
                }),
                Err(_) => Err(FleetError::Timeout {
                    machine: row.id.clone(),
                    budget: timeout,
                    hint: reach_hint(home, row),
                }),
            }
        }
    }
}

/// What a `machine-timeout` tells the operator to check: that an SSH
/// machine answers (`ssh -F <config> <host> true`); for the local machine,
/// which no ssh reaches, what is keeping it busy.
pub fn reach_hint(home: &Home, row: &MachineRow) -> String {
    match row.transport {
        TransportKind::Ssh => format!(
            "check that the machine is up and reachable (`ssh -F {} {} true`)",
            super::spell::ssh_config_display(home),
            row.host
        ),
        TransportKind::Local => {
            "this is the local machine: check what keeps it (or the program probed) busy".into()
        }
        TransportKind::Slurm => format!(
            "check the node's state (`sinfo -n {}`) and that steps start on it (`srun -w {} true`)",
            row.host, row.host
        ),
    }
}
