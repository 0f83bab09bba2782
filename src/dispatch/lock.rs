//! The repository's lock on a fleet machine ([`MachineLock`]): `lock.sh`
//! holds `flock` there for as long as this side's pipe stays open.

use super::{DispatchFault, LOCK_WAIT, control, ship};
use crate::exec::{self, Cmd};
use crate::report::FailureKind;
use crate::transport::{Transport, TransportError};
use std::time::Duration;

/// The repository's lock on the machine: `flock` held by a process whose
/// stdin is this side's pipe. Dropping [`MachineLock::release`]'s writer
/// ends it; a lost connection ends it too (sshd closes the channel), and the
/// watchdog's budget bounds it in any case.
pub(super) struct MachineLock {
    writer: Option<tokio::io::DuplexStream>,
    holder: tokio::task::JoinHandle<std::result::Result<exec::Output, TransportError>>,
}

impl MachineLock {
    /// Take the repository's lock on the machine (`ready` is the file the
    /// holder creates once it holds it, `budget` the holder's), for
    /// `holder` (written beside the lock while held, for the next waiter
    /// to name), and say in the same round trip whether `look_for` (the
    /// stable tree) exists once it is held. While another run holds it,
    /// `on_wait` hears who (as that run wrote it down) at once and every
    /// [`crate::record::wait::NOTE_EVERY`]; `machine` names the machine
    /// in those words.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn acquire(
        t: &Transport,
        machine: &str,
        layout: &ship::Layout,
        ready: &str,
        budget: Duration,
        look_for: &str,
        holder: &crate::record::wait::Holder,
        on_wait: crate::record::wait::OnWait<'_>,
    ) -> Result<(MachineLock, bool), DispatchFault> {
        use crate::record::wait::{self, LockWait};
        let (writer, reader) = tokio::io::duplex(64);
        let lock = format!("{}/locks/{}.lock", layout.base, layout.key);
        let holder_file = format!("{lock}.holder");
        let cmd = Cmd::new("sh")
            .args([
                "-c",
                crate::remote::LOCK,
                "saphan-lock",
                &lock,
                ready,
                &LOCK_WAIT.as_secs().to_string(),
                &holder.members(),
            ])
            .input(exec::Input::Stream(exec::SharedReader::new(reader)))
            .timeout(budget);
        let t2 = t.clone();
        let mut holder = tokio::spawn(async move { t2.run(cmd).await });
        let busy = |lock: &str| {
            DispatchFault::new(
                FailureKind::LockTimeout,
                format!(
                    "another run held the repository's lock {lock} for {}s",
                    LOCK_WAIT.as_secs()
                ),
            )
        };
        let started = std::time::Instant::now();
        // 0: say at once that the lock is busy; then every NOTE_EVERY.
        let mut after = 0;
        loop {
            let after_s = u64::to_string(&after);
            let wait_args = [ready, look_for, &holder_file, &after_s];
            let wait = control(t, crate::remote::LOCK_WAIT, &wait_args);
            tokio::select! {
                r = wait => match r {
                    Ok(o) if o.status.success() => {
                        let left = o.stdout_str().lines().any(|l| l == "left");
                        return Ok((MachineLock { writer: Some(writer), holder }, left));
                    }
                    Ok(o) if o.status.code() == Some(crate::remote::LOCK_WAIT_EXIT_BUSY) => {
                        let out = o.stdout_str();
                        on_wait(&LockWait {
                            lock: format!("the repository's lock on {machine} ({lock})"),
                            holder: out.lines().nth(1).and_then(wait::Holder::parse),
                            waited: started.elapsed(),
                        });
                        after = wait::NOTE_EVERY.as_secs();
                    }
                    Ok(_) => {
                        holder.abort();
                        return Err(busy(&lock));
                    }
                    Err(f) => {
                        holder.abort();
                        return Err(f);
                    }
                },
                r = &mut holder => return Err(match r {
                    Ok(Ok(o)) if o.status.code() == Some(crate::remote::LOCK_EXIT_BUSY) => busy(&lock),
                    Ok(Ok(o)) if o.status.code() == Some(crate::remote::LOCK_EXIT_MKDIR) => DispatchFault::new(FailureKind::LockFailed, format!("cannot create the directory of {lock} there: {} — the machine row's workhome must be writable", o.stderr_str())),
                    Ok(Ok(o)) => DispatchFault::new(FailureKind::LockFailed, format!("taking {lock}: {:?}: {}", o.status, o.stderr_str())),
                    Ok(Err(e)) => DispatchFault::transport(e),
                    Err(e) => DispatchFault::new(FailureKind::LockFailed, e.to_string()),
                }),
            }
        }
    }

    /// The connection is lost: the machine's sshd ends the holder with
    /// the session (and the watchdog's budget bounds it); do not wait for it.
    pub(super) fn abandon(mut self) {
        drop(self.writer.take());
        self.holder.abort();
    }

    pub(super) async fn release(mut self) {
        drop(self.writer.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.holder).await;
        self.holder.abort();
    }
}
