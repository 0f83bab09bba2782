//! The affected tier: the fast, advisory question "what does this change
//! touch, and does that pass?" (spec: "verify.affected is the FAST, ADVISORY
//! tier").
//!
//! * [`protocol`] — the versioned manifest and scope records the engine and
//!   any proc adapter exchange through files named in the environment.
//! * [`golist`] — the bundled Go adapter's selection: `go list -json`
//!   objects → changed packages → reverse closure.
//! * [`adapter`] — `saphan adapter go-affected`, the bundled adapter verb.
//! * [`engine`] — `saphan verify-affected`: writes the manifest, runs the
//!   declared adapter in a detached worktree at the exact head, reads its
//!   scope and report, and says what was and was not run.
//!
//! The tier never moves or satisfies `refs/saphan/verified`: only
//! `[verify.full]` through certify can.

pub mod adapter;
pub mod engine;
pub mod golist;
pub mod protocol;

use crate::error::{Exit, Refusal};
use std::path::PathBuf;

/// Errors of the affected tier, engine and bundled adapter.
#[derive(Debug, thiserror::Error)]
pub enum AffectedError {
    /// verify-affected names more than one fleet machine.
    #[error(
        "verify-affected --machine {machines} names several machines; the advisory tier runs on one — name one machine (certify --machine takes several)"
    )]
    OneMachine { machines: String },
    /// The adapter was started without the protocol's environment.
    #[error(
        "{var} is not set — `saphan adapter go-affected` is run by `saphan verify-affected`, which sets it; run that instead"
    )]
    AdapterEnv { var: &'static str },
    /// The manifest could not be read or is not a manifest this saphan knows.
    #[error("manifest {path}: {issue} — run the adapter through `saphan verify-affected`")]
    Manifest { path: PathBuf, issue: String },
    /// The adapter's directory is not checked out at the manifest's head.
    #[error(
        "{dir} is at {found}, not at the manifest's head {head} — the adapter must run in the detached worktree saphan made at the head"
    )]
    NotAtHead {
        dir: PathBuf,
        head: String,
        found: String,
    },
    /// `go list` could not list the module's packages.
    #[error(
        "{detail} — fix the module so `go list -e -json ./...` succeeds at the head, then re-run"
    )]
    GoList { detail: String },
    /// A changed path lies in a nested module the root's `go list` never lists.
    #[error(
        "{detail} — go-affected lists and tests only the module at the repository root (`go list ./...` stops at a directory holding its own go.mod, even under go.work), so these changes would go unmeasured — test the nested module yourself (the command above) or declare a [verify.affected] adapter that covers every module; no scope was written and nothing ran"
    )]
    NestedModule { detail: String },
    /// `[verify.affected]` is present but declares no argv.
    #[error(
        "[verify.affected] is declared but names no argv — run `saphan config set verify.affected.argv \"saphan,adapter,go-affected\"` (or your stack's adapter)"
    )]
    NoArgv,
    /// The changed paths between base and head could not be listed.
    #[error(
        "cannot list the paths changed between {base} and {head}: {detail} — check that both revisions share history"
    )]
    Diff {
        base: String,
        head: String,
        detail: String,
    },
    /// The adapter ended without writing its scope record.
    #[error(
        "the adapter `{argv}` wrote no scope record to {env} ({ended}){stderr} — an adapter must write its scope before it runs its suite; no verdict was taken"
    )]
    ScopeMissing {
        argv: String,
        env: &'static str,
        ended: String,
        stderr: String,
    },
    /// The adapter's scope record is not one this engine accepts.
    #[error(
        "the adapter `{argv}` wrote a scope record saphan refuses: {issue} — fix the adapter; no verdict was taken"
    )]
    ScopeInvalid { argv: String, issue: String },
    /// A junit-xml adapter wrote no report matching report_path.
    #[error(
        "the adapter `{argv}` wrote no report matching `{report_path}` beneath {env} ({notes}) — write the report there; report_path is relative to that directory; no verdict was taken"
    )]
    ReportMissing {
        argv: String,
        report_path: String,
        env: &'static str,
        notes: String,
    },
    /// The adapter selected nothing yet behaved as if it ran something.
    #[error(
        "the adapter `{argv}` selected no package but {what} — a run of nothing must end quietly with status 0; no verdict was taken"
    )]
    EmptyButActive { argv: String, what: String },
    /// The scope leaves something the change touched unrun, or the suite's
    /// stream does not cover what the scope selected.
    #[error("the adapter `{argv}`: {issue} — fix the adapter; no verdict was taken")]
    ScopeContradicted { argv: String, issue: String },
    /// The adapter program could not be started.
    #[error("could not start the adapter `{argv}`: {source} — check [verify.affected].argv")]
    Spawn {
        argv: String,
        #[source]
        source: std::io::Error,
    },
}

impl Refusal for AffectedError {
    fn name(&self) -> &'static str {
        match self {
            AffectedError::OneMachine { .. } => "affected-one-machine",
            AffectedError::AdapterEnv { .. } => "affected-protocol-env-missing",
            AffectedError::Manifest { .. } => "affected-manifest-invalid",
            AffectedError::NotAtHead { .. } => "affected-not-at-head",
            AffectedError::GoList { .. } => "go-list-failed",
            AffectedError::NestedModule { .. } => "affected-nested-module",
            AffectedError::NoArgv => "affected-argv-missing",
            AffectedError::Diff { .. } => "affected-diff-failed",
            AffectedError::ScopeMissing { .. } => "affected-scope-missing",
            AffectedError::ScopeInvalid { .. } => "affected-scope-invalid",
            AffectedError::ReportMissing { .. } => "affected-report-missing",
            AffectedError::EmptyButActive { .. } => "affected-scope-contradicted",
            AffectedError::ScopeContradicted { .. } => "affected-scope-contradicted",
            AffectedError::Spawn { .. } => "affected-adapter-unstartable",
        }
    }
    fn exit(&self) -> Exit {
        match self {
            AffectedError::ScopeMissing { .. }
            | AffectedError::ScopeInvalid { .. }
            | AffectedError::ReportMissing { .. }
            | AffectedError::EmptyButActive { .. }
            | AffectedError::ScopeContradicted { .. } => Exit::MeasurementFailed,
            _ => Exit::Refusal,
        }
    }
}
