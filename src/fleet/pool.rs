//! A Slurm pool as fleet machines: the `[pool.NAME]` row of machines.toml
//! looked up by name, and every usable node of its partition borrowed at
//! once so the fleet's ceremonies (`machine measure`, `machine probe`,
//! `machine remeasure --machine @NAME`) measure each node as the machine
//! `NAME/<node>` (docs/slurm.md).

use crate::error::Result;
use crate::fleet::machines::{MachineRow, Machines};
use crate::home::Home;
use crate::slurm::{self, Allocation, NodeState, Pool, SlurmError};

/// The pool row `name` of machines.toml.
///
/// Errors: machines.toml's own (`machines-malformed`, `pool-invalid`),
/// `pool-unknown` (naming the pools there are).
pub fn named(home: &Home, name: &str) -> Result<Pool> {
    let machines = Machines::load(home)?;
    machines.pools.get(name).cloned().ok_or_else(|| {
        SlurmError::PoolUnknown {
            pool: name.to_string(),
            path: home.machines(),
            known: if machines.pools.is_empty() {
                "none".into()
            } else {
                machines
                    .pools
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        }
        .into()
    })
}

/// The pool `ids` selects (`[@NAME]`, not `@admitted`), if any.
pub fn selected(ids: &[String]) -> Option<&str> {
    match ids {
        [m] => m.strip_prefix('@').filter(|n| *n != "admitted"),
        _ => None,
    }
}

/// A pool before anything is borrowed: its row, the allocations of a dead
/// saphan that were cancelled, and its partition's nodes.
pub struct Survey {
    /// The pool's row.
    pub pool: Pool,
    /// Allocations of an earlier saphan that died, cancelled first (one
    /// line each).
    pub swept: Vec<String>,
    /// The partition's nodes, as `sinfo` lists them.
    pub nodes: Vec<NodeState>,
}

/// Read pool `name`, cancel what a dead saphan left in it, and list its
/// partition.
///
/// Errors: [`named`]'s, `slurm-unavailable`, `slurm-timeout`,
/// `slurm-command-failed`.
pub async fn survey(home: &Home, name: &str) -> Result<Survey> {
    let pool = named(home, name)?;
    let swept = slurm::sweep(&pool)
        .await?
        .iter()
        .map(ToString::to_string)
        .collect();
    let nodes = slurm::partition_nodes(&pool).await?;
    Ok(Survey { pool, swept, nodes })
}

impl Survey {
    /// The partition's nodes Slurm cannot lend now (down, drained, not
    /// responding).
    pub fn unusable(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.iter().filter(|n| !n.usable())
    }

    /// Borrow `n` of the nodes named in `allowed` for invocation `id` (job
    /// `saphan-<id>`): every other node of the partition is excluded by
    /// name, and a grant beyond `allowed` is released and refused — saphan
    /// never runs on a node it did not admit. Ctrl-C (`interrupt`) while
    /// the nodes are awaited withdraws the request. Returns the allocation
    /// and one machine row per granted node (`NAME/<node>`, reached with
    /// srun), in Slurm's order.
    ///
    /// Errors: `slurm-allocation-failed`, `slurm-allocation-timeout`,
    /// `slurm-timeout`, `slurm-command-failed`, `interrupted`.
    pub async fn borrow(
        &self,
        n: u32,
        allowed: &[String],
        id: &str,
        interrupt: &crate::cancel::Token,
    ) -> Result<(Allocation, Vec<MachineRow>)> {
        let pool = &self.pool;
        let exclude: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.node.clone())
            .filter(|n| !allowed.contains(n))
            .collect();
        let allocation = slurm::allocate_or_interrupted(pool, n, id, &exclude, interrupt).await?;
        if let Some(stray) = allocation.nodes.iter().find(|g| !allowed.contains(g)) {
            let words = format!(
                "job {} was granted {} ({stray} was not asked for); it was released",
                allocation.job,
                allocation.nodes.join(",")
            );
            let _ = allocation.release().await;
            return Err(SlurmError::AllocationFailed {
                pool: pool.name.clone(),
                nodes: n,
                partition: pool.partition.clone(),
                words,
            }
            .into());
        }
        let rows = allocation
            .nodes
            .iter()
            .map(|node| MachineRow::borrowed(pool, node, Some(&allocation)))
            .collect();
        Ok((allocation, rows))
    }
}

/// Every usable node of a pool, borrowed for a fleet ceremony.
pub struct Borrowed {
    /// The allocation (give it back with [`Allocation::release`]; dropped,
    /// it cancels itself).
    pub allocation: Allocation,
    /// One machine row per granted node (`NAME/<node>`), reached with srun.
    pub rows: Vec<MachineRow>,
    /// The partition's nodes that were not usable (down, drained…), not
    /// borrowed.
    pub unusable: Vec<NodeState>,
    /// Allocations of an earlier saphan that died, cancelled first (one
    /// line each).
    pub swept: Vec<String>,
}

/// Borrow every usable node of pool `name` for invocation `id` (job name
/// `saphan-<id>`) — [`survey`], then [`Survey::borrow`] of the usable
/// nodes. Ctrl-C while they are awaited withdraws the request.
///
/// Errors: [`survey`]'s and [`Survey::borrow`]'s, `slurm-allocation-failed`
/// when no node is usable.
pub async fn borrow_every_node(home: &Home, name: &str, id: &str) -> Result<Borrowed> {
    let survey = survey(home, name).await?;
    let usable: Vec<String> = survey
        .nodes
        .iter()
        .filter(|n| n.usable())
        .map(|n| n.node.clone())
        .collect();
    if usable.is_empty() {
        return Err(no_usable_node(&survey.pool, survey.pool.nodes, &survey.nodes).into());
    }
    let (allocation, rows) = survey
        .borrow(usable.len() as u32, &usable, id, &crate::cancel::token())
        .await?;
    let unusable = survey.unusable().cloned().collect();
    Ok(Borrowed {
        allocation,
        rows,
        unusable,
        swept: survey.swept,
    })
}

/// `slurm-allocation-failed` for a partition with no usable node, naming
/// each node's state.
pub fn no_usable_node(pool: &Pool, want: u32, nodes: &[NodeState]) -> SlurmError {
    SlurmError::AllocationFailed {
        pool: pool.name.clone(),
        nodes: want,
        partition: pool.partition.clone(),
        words: format!(
            "no node of the partition is usable ({})",
            if nodes.is_empty() {
                "it lists none".to_string()
            } else {
                nodes
                    .iter()
                    .map(|n| format!("{} {}", n.node, n.state))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    }
}
