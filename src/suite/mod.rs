//! Which suite runs: the declaration, the `default-go` fallback, or a
//! refusal (spec: "What happens with no [verify.full] block at all"); and the
//! local toolchain preflight (spec: "Toolchain readiness ceremony").

/// The stack table (`config::stack`: `init` proposes from it too).
pub use crate::config::stack;

use crate::catalog::Catalog;
use crate::config::{Config, Suite};
use crate::error::Refusal;
use crate::report::ReportKind;
use std::path::Path;
use std::time::Duration;

/// The program default-go runs when it exists: the toolchain the engine
/// installs, deliberately not PATH's first `go`.
pub const INSTALLED_GO: &str = "/usr/local/go/bin/go";

/// Where the suite came from (record field `suite_source`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteSource {
    /// `config:verify.full` (or `config:verify.affected`): the operator's
    /// declaration, `SAPHAN_HOME/config`.
    Config(&'static str),
    /// `repo-config:verify.full` (or `repo-config:verify.affected`): the
    /// repository's own declaration, `<git-common-dir>/saphan/config`.
    RepoConfig(&'static str),
    /// `default-go`: no declaration, a go.mod at the root.
    DefaultGo,
}

impl SuiteSource {
    /// The record spelling.
    pub fn as_str(&self) -> String {
        match self {
            SuiteSource::Config(scope) => format!("config:{scope}"),
            SuiteSource::RepoConfig(scope) => format!("repo-config:{scope}"),
            SuiteSource::DefaultGo => "default-go".into(),
        }
    }

    /// The declared scope (`verify.full`…); default-go stands in for
    /// `verify.full`.
    pub fn scope(&self) -> &'static str {
        match self {
            SuiteSource::Config(scope) | SuiteSource::RepoConfig(scope) => scope,
            SuiteSource::DefaultGo => "verify.full",
        }
    }

    /// The prefix of a declared key's source word: `repo-config` for the
    /// repository's declaration (`repo-config:verify.full.timeout`),
    /// `config` otherwise.
    pub fn prefix(&self) -> &'static str {
        match self {
            SuiteSource::RepoConfig(_) => crate::config::Origin::Repository.prefix(),
            _ => crate::config::Origin::Operator.prefix(),
        }
    }
}

/// A suite ready to run.
#[derive(Debug, Clone)]
pub struct ResolvedSuite {
    /// Exactly what will run.
    pub argv: Vec<String>,
    /// How its result is read.
    pub report: ReportKind,
    /// `report_path` (junit-xml).
    pub report_path: Option<String>,
    /// The declared `timeout`, if any.
    pub timeout: Option<Duration>,
    /// The declared `seal`, if any ([`crate::seal::Mode`]).
    pub seal: Option<crate::seal::Mode>,
    /// Where it came from.
    pub source: SuiteSource,
}

impl ResolvedSuite {
    /// A declared suite from `scope` (`verify.full` or `verify.affected`)
    /// of the operator's or the repository's declaration (`s.origin`).
    pub fn declared(s: &Suite, scope: &'static str) -> ResolvedSuite {
        ResolvedSuite {
            argv: s.argv.clone(),
            report: s.report.unwrap_or(ReportKind::Exitcode),
            report_path: s.report_path.clone(),
            timeout: s.timeout,
            seal: s.seal,
            source: match s.origin {
                crate::config::Origin::Operator => SuiteSource::Config(scope),
                crate::config::Origin::Repository => SuiteSource::RepoConfig(scope),
            },
        }
    }
}

/// Refusals before anything is measured.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// No declaration and no go.mod: the spec's exact text.
    #[error("{0}")]
    NoSuite(String),
    /// `argv[0]` is not on the local machine.
    #[error(
        "the suite's program `{token}` is not on machine local ({catalog_row}); install: {install} — install it, or declare the suite with a program this machine has, then re-run"
    )]
    ToolchainAbsent {
        token: String,
        catalog_row: String,
        install: String,
    },
    /// `argv[0]` is a path inside the repository (`./ci/test.sh`) and the
    /// commit being measured has no file there: nothing to install.
    #[error(
        "the suite's program `{token}` is a path inside the repository, and commit {sha} does not carry it (its tree has no `{path}`) — nothing to install: commit the script at that path, or point verify.full.argv at a program the commit carries or this machine has, then re-run"
    )]
    ProgramNotInCommit {
        token: String,
        path: String,
        sha: String,
    },
}

impl Refusal for SuiteError {
    fn name(&self) -> &'static str {
        match self {
            SuiteError::NoSuite(_) => "trunkcert",
            SuiteError::ToolchainAbsent { .. } => "verification-toolchain-absent",
            SuiteError::ProgramNotInCommit { .. } => "suite-program-not-in-commit",
        }
    }
}

/// The `go` default-go runs: [`INSTALLED_GO`] when it exists, else bare `go`.
pub fn default_go_program() -> String {
    if Path::new(INSTALLED_GO).is_file() {
        INSTALLED_GO.to_string()
    } else {
        "go".to_string()
    }
}

/// Resolve the full-tier suite for the repository whose tree root is `top`
/// from `cfg`, its declaration ([`Config::for_repo`]: the repository's own
/// `[verify.full]`, else the operator's) — the one place every verb and
/// `status` decide which suite a repository runs —
/// looking at the commit that will be measured: `in_tree(path)` says whether
/// that commit's tree carries a file at the root (`go.mod`, the stack
/// markers) — never the working tree, whose untracked files are not what
/// gets measured.
///
/// `verb` names the measurement in the refusal: `certify` gives the spec's
/// text verbatim ("refusing to certify …"); verify-union passes
/// `measure a union in`.
///
/// Errors: [`SuiteError::NoSuite`] with the spec's refusal text.
pub fn resolve_full(
    cfg: &Config,
    top: &Path,
    verb: &str,
    in_tree: impl Fn(&str) -> bool,
) -> Result<ResolvedSuite, SuiteError> {
    if let Some(s) = &cfg.full {
        return Ok(ResolvedSuite::declared(s, "verify.full"));
    }
    if in_tree("go.mod") {
        return Ok(ResolvedSuite {
            argv: vec![
                default_go_program(),
                "test".into(),
                "-count=1".into(),
                "-json".into(),
                "./...".into(),
            ],
            report: ReportKind::GoTestJson,
            report_path: None,
            timeout: None,
            seal: None,
            source: SuiteSource::DefaultGo,
        });
    }
    Err(SuiteError::NoSuite(no_suite_text(
        top,
        verb,
        stack::detect_with(in_tree),
    )))
}

fn no_suite_text(top: &Path, verb: &str, detected: Option<stack::Proposal>) -> String {
    let p = top.display();
    let head = format!(
        "refusing to {verb} {p}: verify: {p} carries no go.mod and config-v1 declares no [verify.full] suite, so there is NO suite to run here — refusing to measure rather than running Go's own test command in a repository it knows nothing about and reporting a verdict about the result"
    );
    match detected {
        Some(prop) => format!(
            "{head} (detected: {} project ({})). Declare the suite, then re-run:\n  {}\n`saphan init` proposes this block for a detected stack, and `saphan config show` prints what is currently declared.",
            prop.article_stack(),
            prop.marker,
            prop.commands(None).join("\n  "),
        ),
        None => format!(
            "{head} (detected: no known stack marker). Declare the suite, then re-run:\n  saphan config set verify.full.argv \"<program>,<arg>,…\"\n  saphan config set verify.full.report exitcode\n`saphan init` proposes this block for a detected stack, and `saphan config show` prints what is currently declared."
        ),
    }
}

/// Resolve `argv[0]` on the local host; refuse as
/// `verification-toolchain-absent` with the catalog row and its install
/// command for the local platform (from /etc/os-release).
///
/// A relative token with a `/` (`./run-tests.sh`) names a file of the tree
/// itself: `in_tree` says whether the measured commit `sha` carries it, and
/// when it does not the refusal is [`SuiteError::ProgramNotInCommit`]
/// (`suite-program-not-in-commit`), not a toolchain to install.
///
/// Pure apart from the PATH lookup, which runs only where `in_tree` is not
/// asked: [`crate::measure::against_tree`] may call it twice (once without
/// the tree's listing), and keeps the first answer only when `in_tree` was
/// not consulted.
pub fn preflight_local(
    suite: &ResolvedSuite,
    catalog: &Catalog,
    sha: &str,
    in_tree: impl Fn(&str) -> bool,
) -> Result<(), SuiteError> {
    let token = suite.argv.first().cloned().unwrap_or_default();
    if token.contains('/') && !token.starts_with('/') {
        let rel = token.trim_start_matches("./");
        if in_tree(rel) {
            return Ok(());
        }
        return Err(SuiteError::ProgramNotInCommit {
            path: rel.to_string(),
            token,
            sha: sha.to_string(),
        });
    } else if crate::exec::which(&token).is_some() {
        return Ok(());
    }
    let ids = crate::platform::local_platform_ids();
    let (catalog_row, install) = match catalog.for_program(&token) {
        Some((name, row)) => (
            format!("catalog row: {name}"),
            row.install_for(&ids)
                .map(str::to_string)
                .unwrap_or_else(|| "NO INSTALL COMMAND".into()),
        ),
        None => (
            "no catalog row maps this program".into(),
            "NO INSTALL COMMAND".into(),
        ),
    };
    Err(SuiteError::ToolchainAbsent {
        token,
        catalog_row,
        install,
    })
}
