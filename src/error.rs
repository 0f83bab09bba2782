//! The one error type the binary prints, and the exit codes of DESIGN §4.
//!
//! Every module keeps its own `thiserror` enum and implements [`Refusal`] for
//! it: a stable kebab-case name (the spec's words, e.g.
//! `verification-toolchain-absent`) and an exit code. The `Display` text of a
//! variant is "what happened — what to do". [`crate::cli`] is the only place
//! that prints, as `saphan: <name>: <display>`.

use std::fmt;

/// Process exit codes (DESIGN §4): the outcome's, re-exported for the
/// refusals below.
pub use crate::outcome::Exit;

/// An error the operator can act on: a stable name and an exit code.
pub trait Refusal: std::error::Error + Send + Sync + 'static {
    /// The stable kebab-case name printed after `saphan: `.
    fn name(&self) -> &'static str;
    /// The exit code; refusals default to 2.
    fn exit(&self) -> Exit {
        Exit::Refusal
    }
    /// Extra keys for the `--json` object (an object whose keys are added
    /// to `error`/`message`/`exit_code`); `None` for most refusals.
    fn details(&self) -> Option<serde_json::Value> {
        None
    }
    /// The record's `failure` word for this error when it ends an attempt
    /// that was already under way ([`crate::outcome::FailureKind`]); `None`
    /// for a refusal that has no kind of its own (then its name is the
    /// word: `report::FailureKind::of`).
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        None
    }
}

/// Any [`Refusal`], boxed: what verbs return to the CLI.
pub struct Error(Box<dyn Refusal>);

impl Error {
    /// The stable name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }
    /// The exit code.
    pub fn exit(&self) -> Exit {
        self.0.exit()
    }
    /// The one line the operator reads, without the trailing newline.
    pub fn line(&self) -> String {
        format!("saphan: {}: {}", self.name(), self.0)
    }
    /// The inner error, for tests and callers that match on a module's enum.
    pub fn inner(&self) -> &dyn Refusal {
        &*self.0
    }
    /// Try to view the inner error as a concrete module error.
    pub fn downcast_ref<E: Refusal>(&self) -> Option<&E> {
        let any: &dyn std::error::Error = &*self.0;
        any.downcast_ref::<E>()
    }
    /// The one JSON object `--json` prints for this error.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "error": self.name(),
            "message": self.0.to_string(),
            "exit_code": self.exit() as u8,
        });
        if let (Some(serde_json::Value::Object(extra)), Some(o)) =
            (self.0.details(), v.as_object_mut())
        {
            for (k, x) in extra {
                o.entry(k).or_insert(x);
            }
        }
        v
    }
}

impl<E: Refusal> From<E> for Error {
    fn from(e: E) -> Self {
        Error(Box::new(e))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.line())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.line())
    }
}

/// Result alias for verbs.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the local environment that are not any module's business: a
/// file saphan must write could not be written, a program it drives (git)
/// could not be started.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// A read or write of one of saphan's own files failed.
    #[error("{action} {path}: {source} — check the path's permissions and free space, then re-run")]
    Io {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A program saphan drives could not be started.
    #[error("could not start `{program}`: {source} — install it or put it on PATH")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// One of saphan's own state files or directories is a symbolic link
    /// (`crate::fsutil::open_state`): saphan never reads or writes its
    /// state through one.
    #[error(
        "{path} is a symbolic link where saphan keeps its own state — saphan never reads or writes its state through a link (a suite may have put it there); see where it points (`ls -l {path}`), remove it, then re-run"
    )]
    Symlink { path: std::path::PathBuf },
}

impl Refusal for IoError {
    fn name(&self) -> &'static str {
        match self {
            IoError::Io { .. } => "io",
            IoError::Spawn { .. } => "spawn",
            IoError::Symlink { .. } => "state-symlink",
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        use crate::outcome::FailureKind;
        Some(match self {
            IoError::Io { .. } | IoError::Symlink { .. } => FailureKind::Io,
            IoError::Spawn { .. } => FailureKind::Spawn,
        })
    }
}

/// A usage error detected after clap: conflicting or missing arguments.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

impl Refusal for Usage {
    fn name(&self) -> &'static str {
        "usage"
    }
}

/// `s` with every control character escaped as Rust escapes it (`\n`,
/// `\t`, `\u{1b}`): what is printed as one line stays one line.
pub fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}
