//! Nodes borrowed from a Slurm cluster (`--machine @POOL`, a `[pool.NAME]`
//! row, docs/slurm.md): the host class on machines saphan allocates for
//! one invocation and gives back.
//!
//! 1. allocations of an earlier saphan that died are cancelled
//!    ([`crate::slurm::sweep`]);
//! 2. every usable node of the pool's partition is admitted from the ledger
//!    as the machine `POOL/<node>`, exactly like a named machine (fresh
//!    facts, a fresh `present` row for the suite's program): a node without
//!    them is excluded from the allocation and named, with its remedy;
//! 3. `--nodes` (or the row's `nodes`) admitted nodes are allocated
//!    (`salloc --no-shell --exclusive --no-kill -J saphan-<attempt>`,
//!    [`crate::slurm::allocate`]), and each granted node becomes a fleet
//!    bench reached through `srun` ([`crate::transport::Transport::Slurm`]);
//! 4. the rest is the pipeline as for any admitted machines — ship, seal,
//!    lock, run, collect, coverage, failover (the nodes are chosen, not
//!    named, so an infrastructure failure re-runs elsewhere);
//! 5. the allocation is released on every path ([`Finish`]; a dropped
//!    allocation cancels itself).

use super::{Benches, ExecutionClass, Finish, Placement, Placing, Step};
use crate::dispatch::admit::{self, NotAdmitted, Refused};
use crate::error::{Error, Result};
use crate::fleet::ledger::Ledger;
use crate::fleet::machines::MachineRow;
use crate::measure::pipeline::Class;
use crate::schedule::invocation::{Borrowed, Certified};
use crate::slurm::Allocation;
use crate::suite::ResolvedSuite;

/// The Slurm pool class (module docs).
pub struct SlurmPool;

impl ExecutionClass for SlurmPool {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn claims(&self, class: Class, machines: &[String]) -> bool {
        // Every class: a pool's nodes run the host class, and `place`
        // says so to a `--class container` on a pool.
        let _ = class;
        crate::fleet::pool::selected(machines).is_some()
    }

    fn splits(&self) -> bool {
        true
    }

    fn place<'a>(
        &'a self,
        p: &'a Placing<'a>,
        suite: &'a mut ResolvedSuite,
    ) -> Step<'a, Result<Placement>> {
        Box::pin(place(p, suite))
    }
}

async fn place(p: &Placing<'_>, suite: &mut ResolvedSuite) -> Result<Placement> {
    let name = crate::fleet::pool::selected(p.machines).expect("claimed: one @POOL");
    if p.class != Class::Host {
        return Err(crate::dispatch::DispatchError::MachineList {
            given: format!("@{name}"),
            why: "names a Slurm pool, whose borrowed nodes run the suite directly (the host class)",
            fix: format!(
                "certify on the pool without --class {}, or name admitted machines for it",
                p.class.as_str()
            ),
        }
        .into());
    }
    let survey = crate::fleet::pool::survey(p.home, name).await?;
    let pool = &survey.pool;
    let ledger = Ledger::open(p.home)?;
    let window = crate::fleet::freshness_window(p.home)?;
    let now = time::OffsetDateTime::now_utc();
    let mut admitted = Vec::new();
    let mut refused: Vec<Refused> = Vec::new();
    for n in survey.nodes.iter().filter(|n| n.usable()) {
        let row = MachineRow::borrowed(pool, &n.node, None);
        match admit::admit(p.home, p.catalog, &ledger, window, &row, suite, now) {
            Ok(a) => admitted.push(a),
            Err(e) => refused.push(Refused::of(&row.id, &e)),
        }
    }
    let want = p.nodes.unwrap_or(pool.nodes).max(1);
    if admitted.is_empty() {
        if refused.is_empty() {
            return Err(crate::fleet::pool::no_usable_node(pool, want, &survey.nodes).into());
        }
        return Err(Error::from(NotAdmitted {
            refused,
            admitted: Vec::new(),
            selection: true,
            pool: Some(name.to_string()),
        }));
    }
    // Only admitted nodes may be granted.
    let allowed: Vec<String> = admitted.iter().map(|a| a.row.host.clone()).collect();
    let n = want.min(admitted.len() as u32);
    let (allocation, rows) = survey.borrow(n, &allowed, p.attempt, p.interrupt).await?;
    let admitted: Vec<_> = rows
        .into_iter()
        .map(|row| {
            let mut a = admitted
                .iter()
                .find(|a| a.row.host == row.host)
                .expect("Survey::borrow grants only allowed nodes")
                .clone();
            a.row = row;
            a
        })
        .collect();
    let borrowed = Borrowed {
        pool: name.to_string(),
        job: allocation.job,
        nodes: allocation.nodes.clone(),
        left_out: refused,
        unusable: survey
            .unusable()
            .map(|n| format!("{} ({})", n.node, n.state))
            .collect(),
        asked: want,
        swept: survey.swept.clone(),
        released: String::new(),
        release_failed: false,
    };
    Ok(Placement {
        benches: Benches::Machines {
            admitted,
            chosen: true,
        },
        executor: Box::new(crate::executor::Host),
        trust: None,
        finish: Some(Box::new(Release {
            allocation,
            borrowed,
        })),
    })
}

/// Gives the allocation back, and tells the outcome what was borrowed.
struct Release {
    allocation: Allocation,
    borrowed: Borrowed,
}

impl Finish for Release {
    fn finish<'s>(self: Box<Self>, out: &'s mut Result<Certified>) -> Step<'s, ()> {
        Box::pin(async move {
            let Release {
                allocation,
                mut borrowed,
            } = *self;
            let job = allocation.job;
            match allocation.release().await {
                Ok(r) => {
                    borrowed.released =
                        format!("released job {job} ({:.2} s)", r.waited.as_secs_f64());
                }
                Err(e) => {
                    borrowed.release_failed = true;
                    borrowed.released = e.to_string();
                }
            }
            match out {
                Ok(Certified::Machines(m)) => m.borrowed = Some(borrowed),
                _ if borrowed.release_failed => tracing::warn!("{}", borrowed.released),
                _ => tracing::debug!("{}", borrowed.released),
            }
        })
    }
}
