//! The pointer guard of this machine's bench ([`super::bench::LocalBench`]).
//!
//! A suite's scratch tree shares the repository's refs and git dir, so a
//! suite can move `refs/saphan/verified` itself — to another value, or make
//! it a symbolic ref — or rewrite the file naming the trunk it follows. The
//! bench reads both under the repository lock before the suite and after
//! it ([`Guarded::of`]); what changed ([`Guarded::changes`]) is put back
//! ([`Change::put_back`]) and the attempt is `suite-moved-pointer`.

use crate::git::Repo;
use crate::record;

/// What a suite on this machine's bench must leave as it found it: the
/// verified pointer (its value, and whether it is the plain ref saphan
/// writes) and the file naming the trunk it follows
/// (`<git-common-dir>/saphan/verified-trunk`, [`record::trunk`]).
pub(crate) struct Guarded {
    pub(crate) read: record::PointerRead,
    /// The trunk file's bytes; `None` when it does not exist (or cannot be
    /// read).
    follows: Option<Vec<u8>>,
}

/// One thing a suite changed.
pub(crate) enum Change {
    /// The pointer: its value or its kind (now as read after the suite).
    Pointer(record::PointerRead),
    /// The trunk file.
    Follows,
}

impl Guarded {
    pub(crate) fn of(repo: &Repo, read: record::PointerRead) -> Guarded {
        Guarded {
            read,
            follows: std::fs::read(record::trunk::path(repo)).ok(),
        }
    }

    /// What differs in `after` from `self`.
    pub(crate) fn changes(&self, after: &Guarded) -> Vec<Change> {
        let mut out = Vec::new();
        if (&after.read.pointer, &after.read.symref) != (&self.read.pointer, &self.read.symref) {
            out.push(Change::Pointer(after.read.clone()));
        }
        if after.follows != self.follows {
            out.push(Change::Follows);
        }
        out
    }
}

impl Change {
    /// Put back what `before` had, and say what the suite did and whether
    /// it was put back (with the command to do it by hand when not).
    pub(crate) async fn put_back(&self, repo: &Repo, before: &Guarded) -> String {
        let ptr = record::VERIFIED_REF;
        let shown = |r: &record::PointerRead| match (&r.pointer, &r.symref) {
            (_, Some(t)) => format!("a symbolic ref to {t}"),
            (Some(p), None) => p.clone(),
            (None, None) => "(unset)".into(),
        };
        match self {
            Change::Pointer(after) => {
                let what = format!(
                    "the suite moved {ptr} from {} to {} while it ran",
                    shown(&before.read),
                    shown(after)
                );
                let put = record::write_pointer(
                    repo,
                    before.read.pointer.as_deref(),
                    None,
                    "saphan: put back what the suite moved",
                );
                match put.await {
                    Ok(_) => format!("{what} — it was put back"),
                    Err(e) => {
                        let by_hand = match &before.read.pointer {
                            Some(b) => format!("git update-ref --no-deref {ptr} {b}"),
                            None => format!("git update-ref --no-deref -d {ptr}"),
                        };
                        format!(
                            "{what} — it could not be put back ({}); put it back by hand: {by_hand}",
                            e.first_line()
                        )
                    }
                }
            }
            Change::Follows => {
                let file = record::trunk::path(repo);
                let put = match &before.follows {
                    Some(bytes) => {
                        crate::fsutil::atomic_write(&file, bytes).map_err(|e| e.to_string())
                    }
                    None => std::fs::remove_file(&file).or_else(|e| {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            Ok(())
                        } else {
                            Err(e.to_string())
                        }
                    }),
                };
                let what = format!(
                    "the suite rewrote {} (the trunk the pointer follows) while it ran",
                    file.display()
                );
                match put {
                    Ok(()) => format!("{what} — it was put back"),
                    Err(e) => format!(
                        "{what} — it could not be put back ({e}); restore or remove it by hand"
                    ),
                }
            }
        }
    }
}
