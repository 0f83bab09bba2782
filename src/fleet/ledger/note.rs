//! Notes: what a ledger read tells the operator besides its rows, as typed
//! values. The ledger prints nothing; the CLI installs the one observer
//! ([`on_note`]) that renders each note (`saphan: warning: <note>` on
//! stderr) when it is given. Without an observer (library use, unit tests)
//! a note only goes to `tracing` (debug).
//!
//! The ledger is opened deep inside several engines (admission, the docker
//! gate, status, the pipeline), so a note reaches the CLI through this
//! observer rather than through every engine's return value.

use std::path::PathBuf;
use std::sync::OnceLock;

/// A note from a ledger read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Rows stand past the signed head: a crash between an append and its
    /// head write leaves exactly that, and so does an old head restored
    /// with a matching truncation (docs/fleet.md, "What the signatures
    /// protect against"). The rows are accepted; the next append re-verifies
    /// them and re-signs the head.
    RowsPastHead {
        /// The ledger file.
        path: PathBuf,
        /// The line the signed head names (its count).
        head: u64,
        /// How many rows stand past it (at least 1).
        past: u64,
    },
}

/// The words after `saphan: warning: ` (docs/fleet.md, "The head").
impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::RowsPastHead { path, head, past } => write!(
                f,
                "{past} row(s) of {} stand past its signed head (line {head}), accepted as a crash between an append and its head write; the next append re-signs the head",
                path.display()
            ),
        }
    }
}

static OBSERVER: OnceLock<fn(&Note)> = OnceLock::new();

/// Install the process's one note observer (the CLI's renderer). A second
/// call is ignored: the first observer stays.
pub fn on_note(observer: fn(&Note)) {
    let _ = OBSERVER.set(observer);
}

/// Give `note` to the observer, if one is installed, and to `tracing`.
pub(super) fn tell(note: Note) {
    tracing::debug!(%note, "ledger note");
    if let Some(observe) = OBSERVER.get() {
        observe(&note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_past_head_reads_as_the_operator_guide_shows() {
        let n = Note::RowsPastHead {
            path: "/home/me/.saphan/fleet/ledger.jsonl".into(),
            head: 4,
            past: 1,
        };
        assert_eq!(
            format!("saphan: warning: {n}"),
            "saphan: warning: 1 row(s) of /home/me/.saphan/fleet/ledger.jsonl stand past its signed head (line 4), accepted as a crash between an append and its head write; the next append re-signs the head"
        );
    }
}
