//! Execute: how the suite's command is run in a tree — the seam every
//! execution class implements ([`Executor`]): the host class ([`Host`], a
//! process on the tree's machine) here, the container class in
//! `crate::docker::container`. Below both the measuring core, which runs a
//! suite through whichever it is handed, and the classes themselves.

use crate::exec::{Cmd, Output};
use crate::transport::{Transport, TransportError};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The measuring code's own default budget for one attempt at a suite: the
/// 10-minute floor, used when neither `--timeout` nor the config's
/// `timeout` says otherwise.
pub const DEFAULT_SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// Execute: how the suite's command is run in a tree. The default is
/// [`Host`] (a process on the tree's machine, through [`Transport::run`]);
/// a container executor implements this to run the same [`Cmd`] — argv,
/// cwd (the tree's path on the machine), env, budget, stdout file — in a
/// container that bind-mounts the tree, and must give the same [`Output`]
/// meaning (budget past → [`crate::exec::Termination::TimedOut`] with everything it
/// started killed; stderr bounded to [`crate::exec::STDERR_TAIL`]).
pub trait Executor: Send + Sync {
    /// `host` or `container`: the record's `class`.
    fn class(&self) -> &'static str;
    /// Run `cmd` in the tree on `transport`'s machine.
    fn execute<'a>(
        &'a self,
        transport: &'a Transport,
        cmd: Cmd,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<Output, TransportError>> + Send + 'a>>;
    /// What ran the suite, for the record, carried on the `measure::SuiteRun` into
    /// `measure::record`: the container class gives its image pin, resolved image
    /// ID, engine API version and container name. The host class: `None`.
    fn container_run(&self) -> Option<crate::record::ContainerRun> {
        None
    }
    /// This executor for machine `machine` of the invocation (dispatch asks
    /// once per machine, so that machines sharing an engine never share a
    /// container): the container class names and labels its container after
    /// the machine; the host class is the same on every machine.
    fn for_machine<'s>(&'s self, machine: &str) -> Box<dyn Executor + 's>;
    /// Wait (bounded) until everything this executor started is over — a
    /// container run's removal goes on after the core stopped waiting
    /// (Ctrl-C) — before the tree is removed. The host class has nothing
    /// to wait for.
    fn settle<'s>(&'s self) -> Pin<Box<dyn Future<Output = ()> + Send + 's>> {
        Box::pin(async {})
    }
    /// Notes for the record from what the executor did besides the suite
    /// (the container class: the containers of finished attempts it removed
    /// from the engine first), taken once after the run. The host class:
    /// none.
    fn take_notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The host executor: the suite is a process on the machine, in its own
/// process group under the budget ([`Transport::run`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

impl Executor for Host {
    fn class(&self) -> &'static str {
        "host"
    }
    fn for_machine<'s>(&'s self, _machine: &str) -> Box<dyn Executor + 's> {
        Box::new(Host)
    }
    fn execute<'a>(
        &'a self,
        transport: &'a Transport,
        cmd: Cmd,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<Output, TransportError>> + Send + 'a>>
    {
        Box::pin(transport.run(cmd))
    }
}
