//! The ledger: `SAPHAN_HOME/fleet/ledger.jsonl`, one signed JSON row per
//! line, append-only (`fsutil::append_line`).
//!
//! Two kinds of row:
//! - `kind: "machine"` — a machine's measured confinement facts
//!   ([`MachineFacts`]), written by `machine measure`;
//! - `kind: "capability"` — one probe of one capability on one machine
//!   ([`CapabilityRow`]), written by `machine probe` (and the docker-oci /
//!   sandbox-userns probes).
//!
//! **Signatures.** Every row carries `v` (format version, 2), `seq`, `prev`
//! and `signature`: lowercase hex of the 64-byte ed25519 signature over the
//! row's *canonical bytes* — the row as JSON with the `signature` member
//! removed, object keys sorted by byte order at every depth, no insignificant
//! whitespace, strings escaped the way serde_json escapes them
//! ([`canonical_json`]). The key is `SAPHAN_HOME/keys/row-signing`: the 32
//! raw bytes of an ed25519 secret key, created from `getrandom` with mode
//! 0600 (directory 0700) on the first append — never by a read. A key others
//! can read (or a key directory others can write) is refused
//! (`row-signing-key-exposed`); a missing key beside a non-empty ledger is
//! `row-signing-key-missing`. SAPHAN_HOME, `fleet/` and `keys/` must be
//! owned by the current user and not group- or world-writable (sticky or
//! not): otherwise `saphan-home-exposed` ([`check_home_dirs`]), since whoever
//! can write them can swap the key directory, the ledger or its head. Every
//! read checks every row; a row that fails is refused as
//! `ledger-row-tampered`, naming the line. A read verifies two signatures
//! for the rows the signed head covers — the head's, since each line's
//! `prev` is the hash of the line before and the head holds the hash of its
//! last, the head binds every byte of every line up to it; and that last
//! row's own, so a head re-signed under a swapped key is still refused —
//! and one per row past the head; when a link, the head or one of those
//! signatures does not hold, every line's signature is verified in order,
//! so the refusal names the first bad line as before.
//! (A read costs one verification, not one per row of history: `machine
//! probe` at 4 hosts and ~100 rows went from 34 to 24 ms of CPU.)
//!
//! **Chain and head.** `seq` is the 1-based line number and `prev` the sha256
//! hex of the previous line's exact bytes ([`ZERO_HASH`] for the first), both
//! signed: reordering, deleting or duplicating lines is `ledger-chain-broken`.
//! `fleet/ledger.head` ([`head_path`]) holds the signed count and last-line
//! hash, rewritten atomically after each append; a ledger shorter than the
//! head or with another line at the head's position is `ledger-head-mismatch`.
//! Rows past the head (the crash window between append and head write) are
//! accepted with a warning ([`Note::RowsPastHead`], which the CLI prints as
//! one stderr line); the next append re-verifies them,
//! chained from the head's hash, before signing a head that covers them. An
//! old head restored with a matching truncation looks the same: only the
//! warning shows it (docs/fleet.md, "What the signatures protect against").
//! A last line without its newline is `ledger-row-torn` and is never
//! appended onto. Appends hold an exclusive `flock` on the ledger file around
//! re-read + append + head write; reads hold a shared one.
//!
//! **Freshness.** A row is fresh while it is younger than the window
//! (`[fleet] freshness`, default 24h) and — for capability rows — was
//! measured against the current catalog entry: the row stores
//! [`crate::catalog::Capability::digest`] of the entry it was measured
//! against (for docker-oci this covers the pinned image digest).
//!
//! **Files.** One job each, the lower first:
//! - [`perms`]: SAPHAN_HOME, `fleet/`, `keys/` and the key file must be the
//!   operator's alone (`saphan-home-exposed`, `row-signing-key-exposed`);
//! - [`row`]: the row schema ([`Row`], [`MachineFacts`], [`CapabilityRow`]);
//! - [`key`]: the row-signing key, loaded or created;
//! - [`chain`]: a row as a signed, chained line, and the signed head;
//! - [`fresh`]: which rows are fresh;
//! - [`note`]: what a read tells the operator besides rows ([`Note`]);
//! - [`store`]: the ledger file itself ([`Ledger`]), read and appended.

pub mod chain;
pub mod fresh;
pub mod key;
pub mod note;
pub mod perms;
pub mod row;
pub mod store;

pub use chain::{ZERO_HASH, canonical_json, head_path};
pub use fresh::{facts_fresh, is_fresh};
pub use key::{load_key, load_or_create_key};
pub use note::{Note, on_note};
pub use perms::{check_home_dirs, check_key_mode};
pub use row::{
    CapabilityRow, MachineFacts, Outcome, ProbeInputs, ROW_VERSION, Requirements, Row, ToolState,
    Userns,
};
pub use store::Ledger;
