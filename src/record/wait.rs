//! Waiting for a lock, said. A holder writes down who it is beside the
//! lock it holds ([`Holder`]: its pid, verb, host, and since when); a
//! waiter reads that and reports a [`LockWait`] at once and again every
//! [`NOTE_EVERY`] while it waits. Nothing here prints: each report goes to
//! the waiter's caller ([`OnWait`]), which turns it into a progress event
//! the CLI renders (`measure::progress::Event::Waiting`).
//!
//! Two locks are waited for this way: the repository lock on this machine
//! ([`super::Lock`], the holder written to `<common>/saphan/lock.holder`)
//! and the repository's lock on a fleet machine (`lock.sh` writes
//! `<lock>.holder` there from [`Holder::members`]).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often a waiter says again that it still waits.
pub const NOTE_EVERY: Duration = Duration::from_secs(10);

/// The most of a holder line a waiter reads, in bytes: a line that is
/// longer is not a holder's.
pub const HOLDER_MAX: usize = 1024;

/// Who holds a lock, as the holder wrote it down when it took the lock:
/// one JSON object on one line (`{"since":…,"pid":…,"verb":…,"host":…}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// When it took the lock: RFC 3339, UTC, to the second — by the clock
    /// of the machine the lock is on.
    pub since: String,
    /// The holding saphan process's pid (on `host`).
    pub pid: u32,
    /// Its verb (`certify`, `verify-union`, `verify-stream`,
    /// `verify-affected`).
    pub verb: String,
    /// The host that saphan process runs on (`/proc/sys/kernel/hostname`).
    pub host: String,
}

impl Holder {
    /// This process, taking a lock now for `verb`.
    pub fn me(verb: &str) -> Holder {
        Holder {
            since: crate::clock::now_rfc3339_seconds(),
            pid: std::process::id(),
            verb: verb.to_string(),
            host: this_host(),
        }
    }

    /// The object's members but `since`, without braces
    /// (`"pid":1,"verb":"certify","host":"h"`): lock.sh's fourth argument,
    /// to which the machine adds `since` by its own clock.
    pub fn members(&self) -> String {
        let v = serde_json::json!({"pid": self.pid, "verb": self.verb, "host": self.host});
        let s = v.to_string();
        s[1..s.len() - 1].to_string()
    }

    /// The holder a holder line names; `None` for an empty line, one longer
    /// than [`HOLDER_MAX`], or one that is not a holder's.
    pub fn parse(line: &str) -> Option<Holder> {
        let line = line.trim();
        if line.is_empty() || line.len() > HOLDER_MAX {
            return None;
        }
        serde_json::from_str(line).ok()
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `localhost`).
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// One report of a wait for a lock that another run holds: at once, then
/// every [`NOTE_EVERY`] until the lock is taken (or the wait gives up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockWait {
    /// What is waited for, in words: `the repository lock
    /// /src/app/.git/saphan/lock`, `the repository's lock on m0
    /// (/srv/saphan/locks/<key>.lock)`.
    pub lock: String,
    /// Who holds it, as it wrote down; `None` when nothing readable says
    /// (a saphan too old to write it, or a holder that has only just taken
    /// the lock).
    pub holder: Option<Holder>,
    /// How long this wait has lasted so far.
    pub waited: Duration,
}

/// Hears every [`LockWait`] of a wait (from the waiting task).
pub type OnWait<'a> = &'a (dyn Fn(&LockWait) + Send + Sync);

/// An [`OnWait`] that hears nothing.
pub fn unheard(_: &LockWait) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_line_round_trips_through_the_machines_shape() {
        let h = Holder {
            since: "2026-12-01T03:00:04Z".into(),
            pid: 4242,
            verb: "certify".into(),
            host: "lap\"top".into(),
        };
        let line = format!("{{\"since\":\"{}\",{}}}", h.since, h.members());
        assert_eq!(Holder::parse(&line), Some(h));
        assert_eq!(Holder::parse(""), None);
        assert_eq!(Holder::parse("{\"pid\":1}"), None);
        assert_eq!(Holder::parse(&"x".repeat(HOLDER_MAX + 1)), None);
    }
}
