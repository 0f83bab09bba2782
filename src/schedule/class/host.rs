//! The host class: the suite runs directly on the machine — this one (its
//! toolchain found on PATH, against the commit's tree), or fleet machines
//! admitted from the ledger (a fresh facts row and a fresh `present` row
//! for the suite's program at its declared path).

use super::{Benches, ExecutionClass, Placement, Placing, Step};
use crate::error::Result;
use crate::measure::pipeline::Class;
use crate::suite::ResolvedSuite;

/// The host class (module docs).
pub struct HostClass;

impl ExecutionClass for HostClass {
    fn name(&self) -> &'static str {
        "host"
    }

    fn claims(&self, class: Class, _machines: &[String]) -> bool {
        class == Class::Host
    }

    fn splits(&self) -> bool {
        true
    }

    fn place<'a>(
        &'a self,
        p: &'a Placing<'a>,
        suite: &'a mut ResolvedSuite,
    ) -> Step<'a, Result<Placement>> {
        Box::pin(async move {
            let benches = if p.machines.is_empty() {
                // The suite runs on this host: its toolchain must be here.
                crate::measure::against_tree(p.repo, p.sha, |in_tree| {
                    crate::suite::preflight_local(suite, p.catalog, p.sha, in_tree)
                })
                .await??;
                Benches::Here
            } else {
                Benches::Machines {
                    admitted: crate::dispatch::admit_all(p.home, p.catalog, p.machines, suite)?,
                    chosen: false,
                }
            };
            Ok(Placement {
                benches,
                executor: Box::new(crate::executor::Host),
                trust: None,
                finish: None,
            })
        })
    }
}
