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
/// `saphan-<id>`): cancel what a dead saphan left, list the partition,
/// allocate its usable nodes exclusively (unusable ones excluded by name).
///
/// Errors: [`named`]'s, `slurm-unavailable`, `slurm-allocation-failed`
/// (also when no node is usable), `slurm-allocation-timeout`,
/// `slurm-timeout`, `slurm-command-failed`.
pub async fn borrow_every_node(home: &Home, name: &str, id: &str) -> Result<Borrowed> {
    let pool = named(home, name)?;
    let swept = slurm::sweep(&pool)
        .await?
        .iter()
        .map(ToString::to_string)
        .collect();
    let nodes = slurm::partition_nodes(&pool).await?;
    let (usable, unusable): (Vec<NodeState>, Vec<NodeState>) =
        nodes.into_iter().partition(NodeState::usable);
    if usable.is_empty() {
        return Err(no_usable_node(&pool, pool.nodes, &unusable).into());
    }
    let exclude: Vec<String> = unusable.iter().map(|n| n.node.clone()).collect();
    let allocation = slurm::allocate_or_interrupted(
        &pool,
        usable.len() as u32,
        id,
        &exclude,
        &crate::cancel::token(),
    )
    .await?;
    let rows = allocation
        .nodes
        .iter()
        .map(|n| MachineRow::borrowed(&pool, n, Some(&allocation)))
        .collect();
    Ok(Borrowed {
        allocation,
        rows,
        unusable,
        swept,
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
