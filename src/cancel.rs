//! One cancellation token for the whole process.
//!
//! [`install`] (idempotent; the CLI calls it once per command) replaces the
//! default "die at once" of SIGINT (Ctrl-C), SIGTERM and SIGHUP: the first
//! of them cancels the [`Token`] — every running measurement stops waiting,
//! its suite's process group is killed (locally by the dropped
//! [`crate::exec::run`]; on a machine by the dropped remote run), its scratch
//! tree is removed and its record says `interrupted` naming the signal. A
//! second signal forces: every process group still registered here is sent
//! SIGKILL (remote ones over their connections, for at most
//! [`FORCE_BOUND`]), and saphan exits with 128 + the signal number.
//!
//! Without [`install`] (library use, tests) a token simply never fires
//! unless [`cancel`] is called.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// What is told when a second signal forces the exit (before the groups
/// are killed): set once by the CLI ([`on_force`]); nothing here prints.
static FORCE_NOTICE: OnceLock<fn(Reason)> = OnceLock::new();

/// Have `notice` called with the second signal's reason when it forces
/// the exit (the CLI tells the operator there; later calls do nothing).
pub fn on_force(notice: fn(Reason)) {
    let _ = FORCE_NOTICE.set(notice);
}

/// How long a forced exit waits for remote groups to be killed.
pub const FORCE_BOUND: Duration = Duration::from_secs(3);

/// Why the process was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// SIGINT: the operator pressed Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP (the terminal went away).
    Hangup,
    /// [`cancel`] was called by code.
    Requested,
}

impl Reason {
    /// How a record note says it: `the operator pressed Ctrl-C`, `saphan
    /// received SIGTERM`, ….
    pub fn words(&self) -> &'static str {
        match self {
            Reason::Interrupt => "the operator pressed Ctrl-C",
            Reason::Terminate => "saphan received SIGTERM",
            Reason::Hangup => "saphan received SIGHUP",
            Reason::Requested => "saphan was asked to stop",
        }
    }
    fn signal_number(&self) -> i32 {
        match self {
            Reason::Interrupt => libc::SIGINT,
            Reason::Terminate => libc::SIGTERM,
            Reason::Hangup => libc::SIGHUP,
            Reason::Requested => libc::SIGTERM,
        }
    }
}

fn channel() -> &'static watch::Sender<Option<Reason>> {
    static C: OnceLock<watch::Sender<Option<Reason>>> = OnceLock::new();
    C.get_or_init(|| watch::channel(None).0)
}

/// The process's cancellation token: cheap to clone; every clone sees the
/// same cancellation.
#[derive(Debug, Clone)]
pub struct Token(watch::Receiver<Option<Reason>>);

/// A token for the process (fires only after [`install`] or [`cancel`]).
pub fn token() -> Token {
    Token(channel().subscribe())
}

/// Resolves once the process is cancelled (at once if it is): the
/// process token's [`Token::cancelled`], for a `select!` arm.
pub async fn cancelled() {
    token().cancelled().await
}

impl Token {
    /// A token that is never cancelled (for library callers and tests that
    /// do not want the process's signals).
    pub fn never() -> Token {
        let (tx, rx) = watch::channel(None);
        std::mem::forget(tx);
        Token(rx)
    }
    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.borrow().is_some()
    }
    /// Why, once cancelled.
    pub fn reason(&self) -> Option<Reason> {
        *self.0.borrow()
    }
    /// Resolves once cancelled (at once if it already is); never when the
    /// token cannot fire.
    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|r| r.is_some()).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Cancel the process's token with `reason` (the first reason sticks).
pub fn cancel(reason: Reason) {
    channel().send_if_modified(|r| {
        if r.is_none() {
            *r = Some(reason);
            true
        } else {
            false
        }
    });
}

type RemoteKill = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

#[derive(Default)]
struct Groups {
    local: HashMap<u64, i32>,
    remote: HashMap<u64, RemoteKill>,
}

fn groups() -> &'static Mutex<Groups> {
    static G: OnceLock<Mutex<Groups>> = OnceLock::new();
    G.get_or_init(Default::default)
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A registered process group; unregisters on drop.
#[derive(Debug)]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut g) = groups().lock() {
            g.local.remove(&self.0);
            g.remote.remove(&self.0);
        }
    }
}

/// Register a local process group for the forced exit.
pub fn register_local(pgid: i32) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut g) = groups().lock() {
        g.local.insert(id, pgid);
    }
    Registration(id)
}

/// Register how to kill a remote process group for the forced exit.
pub fn register_remote(kill: RemoteKill) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut g) = groups().lock() {
        g.remote.insert(id, kill);
    }
    Registration(id)
}

/// Kill every registered group, local and remote, and wait at most
/// [`FORCE_BOUND`] for them to end (local ones: [`crate::procs::kill_groups`]).
pub async fn kill_all_groups() {
    let (local, remote) = match groups().lock() {
        Ok(mut g) => (
            g.local.values().copied().collect::<Vec<_>>(),
            g.remote.drain().map(|(_, k)| k).collect::<Vec<_>>(),
        ),
        Err(_) => return,
    };
    let kills = futures_util::future::join_all(remote.into_iter().map(|k| k()));
    let _ = tokio::time::timeout(
        FORCE_BOUND,
        futures_util::future::join(crate::procs::kill_groups(&local, FORCE_BOUND), kills),
    )
    .await;
}

/// Listen for SIGINT, SIGTERM and SIGHUP (once per process; later calls do
/// nothing) and return the token. Must run inside a tokio runtime.
pub fn install() -> Token {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        use tokio::signal::unix::{SignalKind, signal};
        let kinds = [
            (SignalKind::interrupt(), Reason::Interrupt),
            (SignalKind::terminate(), Reason::Terminate),
            (SignalKind::hangup(), Reason::Hangup),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Reason>();
        for (kind, reason) in kinds {
            let Ok(mut s) = signal(kind) else { continue };
            let tx = tx.clone();
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    if tx.send(reason).is_err() {
                        break;
                    }
                }
            });
        }
        tokio::spawn(async move {
            let mut seen = 0;
            while let Some(reason) = rx.recv().await {
                seen += 1;
                if seen == 1 {
                    tracing::debug!(?reason, "cancelling");
                    cancel(reason);
                } else {
                    tracing::debug!(?reason, "forcing the exit");
                    if let Some(notice) = FORCE_NOTICE.get() {
                        notice(reason);
                    }
                    kill_all_groups().await;
                    std::process::exit(128 + reason.signal_number());
                }
            }
        });
    });
    token()
}
