//! The execution-class seam: how a verb's suite reaches the machines that
//! run it. One implementation per class, one line of registration in
//! [`CLASSES`]:
//!
//! - [`host::HostClass`]: the suite runs directly on this machine, or on
//!   fleet machines admitted from the ledger;
//! - [`container::ContainerClass`]: in a container made from the pinned
//!   suite image, on this machine's engine or the fleet machines';
//! - [`pool::SlurmPool`]: directly on nodes borrowed from a Slurm cluster
//!   for this invocation (`--machine @POOL`), admitted from the ledger like
//!   any machine, given back on every path.
//!
//! A class answers one question — [`ExecutionClass::place`]: given the
//! prepared attempt, which benches run it, through which
//! [`Executor`], and what must be given back afterwards ([`Finish`]). The
//! verb (`crate::commands::certify`) picks the policy (this machine's bench,
//! every machine, `@admitted`, `--split`) and concludes; nothing else in the
//! verb knows which class it runs.

pub mod container;
pub mod host;
pub mod pool;

use super::invocation::Certified;
use crate::catalog::Catalog;
use crate::dispatch::Admitted;
use crate::error::Result;
use crate::executor::Executor;
use crate::git::Repo;
use crate::home::Home;
use crate::measure::Interrupt;
use crate::measure::pipeline::Class;
use crate::suite::ResolvedSuite;
use std::future::Future;
use std::pin::Pin;

/// The boxed future of a class's step.
pub type Step<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a class is asked to place: the prepared attempt, before any lock,
/// tree or connection (every refusal comes here).
pub struct Placing<'a> {
    /// The operator's home.
    pub home: &'a Home,
    /// The catalog in use.
    pub catalog: &'a Catalog,
    /// The local repository.
    pub repo: &'a Repo,
    /// The full SHA.
    pub sha: &'a str,
    /// The pointer's trunk, when the verb follows one.
    pub trunk: Option<&'a str>,
    /// The fleet machine ids named (`--machine`, without `local`; empty:
    /// this machine; `[@POOL]` for a pool).
    pub machines: &'a [String],
    /// `--class`.
    pub class: Class,
    /// `--image`: the container class's suite image pin.
    pub image: Option<&'a str>,
    /// `--network`: the container class's suite gets the engine's default
    /// network.
    pub network: bool,
    /// `--nodes`: how many nodes a pool borrows this time (`None`: the
    /// pool row's `nodes`).
    pub nodes: Option<u32>,
    /// The invocation's attempt id (container names, the allocation's
    /// job name `saphan-<id>`).
    pub attempt: &'a str,
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
}

/// Where the attempt runs.
pub enum Benches {
    /// This machine's bench.
    Here,
    /// One fleet bench per admitted machine (or borrowed node).
    Machines {
        /// The admitted machines, in order.
        admitted: Vec<Admitted>,
        /// The machines were chosen (`@admitted`, a pool's nodes), not
        /// named: an infrastructure failure re-runs once elsewhere.
        chosen: bool,
    },
}

/// A class's answer: the benches, the executor the suite runs through,
/// whose build caches it uses, and what to give back at the end.
pub struct Placement {
    /// Where it runs.
    pub benches: Benches,
    /// How it runs there (`host` or `container`: the record's `class`).
    pub executor: Box<dyn Executor>,
    /// Whose build caches ([`crate::seal::Trust`]); `None`: each host-class
    /// bench asks beside its own git work.
    pub trust: Option<crate::seal::Trust>,
    /// What to give back once the verb concluded (containers, borrowed
    /// nodes); `None`: nothing.
    pub finish: Option<Box<dyn Finish>>,
}

/// What a class gives back when the invocation ends, on every path that
/// got past [`ExecutionClass::place`] (green, red, error, Ctrl-C). It may
/// add what it could not give back to the outcome (the CLI shows it).
pub trait Finish: Send {
    /// Give back; `out` is the verb's outcome so far.
    fn finish<'s>(self: Box<Self>, out: &'s mut Result<Certified>) -> Step<'s, ()>;
}

/// An execution class (module docs).
pub trait ExecutionClass: Send + Sync {
    /// The class's name in messages (`host`, `container`, `slurm`).
    fn name(&self) -> &'static str;
    /// Whether this class runs an invocation with `class` on `machines`
    /// (the first class of [`CLASSES`] that claims it does).
    fn claims(&self, class: Class, machines: &[String]) -> bool;
    /// Whether `--split` may shard over this class's benches.
    fn splits(&self) -> bool;
    /// Admit: the refusals before any lock, tree or connection, then the
    /// benches. `suite` may be rewritten for the class (`argv[0]` as the
    /// machines run it).
    fn place<'a>(
        &'a self,
        p: &'a Placing<'a>,
        suite: &'a mut ResolvedSuite,
    ) -> Step<'a, Result<Placement>>;
}

/// Every execution class, in the order they are asked to claim an
/// invocation. A new class is one implementation and one line here.
pub const CLASSES: &[&dyn ExecutionClass] = &[
    &pool::SlurmPool,
    &container::ContainerClass,
    &host::HostClass,
];

/// The class that runs `class` on `machines`.
pub fn of(class: Class, machines: &[String]) -> &'static dyn ExecutionClass {
    CLASSES
        .iter()
        .copied()
        .find(|c| c.claims(class, machines))
        .unwrap_or(&host::HostClass)
}
