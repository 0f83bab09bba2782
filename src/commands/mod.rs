//! The verbs' engines: one module per CLI verb that is more than a call into
//! another area. Each takes typed settings from `src/cli/` and returns typed
//! results; none prints (the CLI renders what they return and the progress
//! events of [`crate::measure::progress`]).
//!
//! - [`certify`] — `saphan certify`, the one attempt pipeline over this
//!   machine's bench or one bench per `--machine`.
//! - [`union`] — `saphan verify-union`, the suite on the merge of streams.
//! - [`stepgo`] — `saphan verify-stream`, a stream's four Go steps.
//! - [`status`] — `saphan status`, one screen read from what exists.

pub mod catalog;
pub mod certify;
pub mod status;
pub mod stepgo;
pub mod union;
