//! Several machines at once: one tokio task (and one connection) per
//! machine, each under its own budget. Each machine's start and end is a
//! typed [`MachineEvent`] handed to the caller's observer (the CLI draws one
//! progress line per machine from them); nothing here prints. Results come
//! back in the order the machines were named. Ctrl-C reaches the ceremonies
//! through the process's one cancellation token ([`crate::cancel`]).

use super::FleetError;
use super::machines::MachineRow;
use crate::error::Result;
use crate::home::Home;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One step of one machine in [`for_each_machine`], for the caller to show.
#[derive(Debug, Clone, Copy)]
pub enum MachineEvent<'a> {
    /// The machine's task started.
    Started,
    /// The machine's task ended: `None` when it succeeded, else the stable
    /// name of the refusal it ended with (`machine-timeout`, …).
    Finished(Option<&'a str>),
}

/// Receives every machine's [`MachineEvent`]s, from the machines' tasks
/// (so it must be `Send + Sync`); called with the machine's id.
pub type Observer = Arc<dyn Fn(&str, MachineEvent<'_>) + Send + Sync>;

/// Run `f` on every machine concurrently. Each run is bounded by `budget`;
/// past it the machine's result is `machine-timeout` (and its task, with its
/// connection, is dropped). `observe` hears each machine start and finish.
pub async fn for_each_machine<T, F, Fut>(
    home: &Home,
    rows: Vec<MachineRow>,
    budget: Duration,
    observe: Observer,
    f: F,
) -> Vec<(MachineRow, Result<T>)>
where
    T: Send + 'static,
    F: Fn(MachineRow) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let mut tasks = Vec::new();
    for row in rows {
        observe(&row.id, MachineEvent::Started);
        let fut = f(row.clone());
        let hint = super::machines::reach_hint(home, &row);
        let id = row.id.clone();
        let obs = observe.clone();
        let handle = tokio::spawn(async move {
            let r = match tokio::time::timeout(budget, fut).await {
                Ok(r) => r,
                Err(_) => Err(FleetError::Timeout {
                    machine: id.clone(),
                    budget,
                    hint,
                }
                .into()),
            };
            obs(
                &id,
                MachineEvent::Finished(r.as_ref().err().map(|e| e.name())),
            );
            r
        });
        tasks.push((row, handle));
    }
    let mut out = Vec::new();
    for (row, handle) in tasks {
        let r = match handle.await {
            Ok(r) => r,
            Err(e) => {
                let e: crate::error::Error = FleetError::MeasureOutput {
                    machine: row.id.clone(),
                    detail: format!("the task ended abnormally: {e}"),
                }
                .into();
                observe(&row.id, MachineEvent::Finished(Some(e.name())));
                Err(e)
            }
        };
        out.push((row, r));
    }
    out
}
