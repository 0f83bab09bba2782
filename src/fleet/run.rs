//! Several machines at once: one tokio task (and one connection) per
//! machine, each under its own budget, with one indicatif progress line per
//! machine when a person watches stderr (a TTY). Results come back in the
//! order the machines were named.

use super::FleetError;
use super::machines::MachineRow;
use crate::error::Result;
use crate::home::Home;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::future::Future;
use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

fn cancel_channel() -> &'static watch::Sender<bool> {
    static C: OnceLock<watch::Sender<bool>> = OnceLock::new();
    C.get_or_init(|| watch::channel(false).0)
}

/// Ask every running fleet ceremony in this process to stop (the operator
/// pressed Ctrl-C): probes stop waiting, kill what they started and remove
/// their probe containers, and record nothing.
pub fn cancel() {
    cancel_channel().send_replace(true);
}

/// Has [`cancel`] been called?
pub fn is_cancelled() -> bool {
    *cancel_channel().borrow()
}

/// Resolves once [`cancel`] is called (at once if it was).
pub async fn cancelled() {
    let mut rx = cancel_channel().subscribe();
    let _ = rx.wait_for(|c| *c).await;
}

/// Turn the first Ctrl-C, SIGTERM or SIGHUP (the process's
/// [`crate::cancel`] token) into [`cancel`] (replacing the default "die at
/// once", which would leave probe containers and version commands behind).
pub fn cancel_on_ctrl_c() {
    let t = crate::cancel::install();
    tokio::spawn(async move {
        t.cancelled().await;
        cancel();
    });
}

/// Run `f` on every machine concurrently. Each run is bounded by `budget`;
/// past it the machine's result is `machine-timeout` (and its task, with its
/// connection, is dropped). `verb` labels the progress lines (`measuring`,
/// `probing go`).
pub async fn for_each_machine<T, F, Fut>(
    home: &Home,
    rows: Vec<MachineRow>,
    budget: Duration,
    verb: &str,
    f: F,
) -> Vec<(MachineRow, Result<T>)>
where
    T: Send + 'static,
    F: Fn(MachineRow) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let watching = std::io::stderr().is_terminal();
    let mp = MultiProgress::with_draw_target(if watching {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let mut tasks = Vec::new();
    for row in rows {
        let pb = mp.add(ProgressBar::new_spinner());
        pb.set_style(style.clone());
        pb.set_prefix(format!("{:width$}", row.id));
        pb.set_message(format!("{verb}…"));
        if watching {
            pb.enable_steady_tick(Duration::from_millis(120));
        }
        let fut = f(row.clone());
        let hint = super::machines::reach_hint(home, &row);
        let id = row.id.clone();
        let bar = pb.clone();
        let handle = tokio::spawn(async move {
            let r = match tokio::time::timeout(budget, fut).await {
                Ok(r) => r,
                Err(_) => Err(FleetError::Timeout {
                    machine: id,
                    budget,
                    hint,
                }
                .into()),
            };
            match &r {
                Ok(_) => bar.finish_with_message("done"),
                Err(e) => bar.finish_with_message(format!("failed: {}", e.name())),
            }
            r
        });
        tasks.push((row, pb, handle));
    }
    let mut out = Vec::new();
    for (row, pb, handle) in tasks {
        let r = match handle.await {
            Ok(r) => r,
            Err(e) => Err(FleetError::MeasureOutput {
                machine: row.id.clone(),
                detail: format!("the task ended abnormally: {e}"),
            }
            .into()),
        };
        if !pb.is_finished() {
            pb.finish_with_message("failed");
        }
        out.push((row, r));
    }
    out
}
