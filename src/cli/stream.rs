//! `saphan stream start|status|gate|teardown` (DESIGN §7): clap types and the
//! translation into [`crate::stream`] calls.

use super::{Ctx, out, out_json};
use crate::error::{Exit, Result};
use crate::stream::{self, gate::Outcome, teardown::TeardownSettings};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Work streams: a branch, a worktree and a gitignored status file whose
/// `- return:` manifest names what the stream hands back.
#[derive(Debug, Subcommand)]
pub enum StreamCmd {
    /// Create branch stream/NAME, its worktree and its status file.
    ///
    /// The worktree goes to `<repo-parent>/<repo-name>.streams/NAME` unless
    /// --worktree says otherwise. The status file `.saphan/status` is ignored
    /// by a `.saphan/.gitignore` inside the worktree; the repository's shared
    /// `.git/info/exclude` is not touched.
    Start(StartArgs),
    /// Show a stream: branch, base, worktree, declared returns, waivers.
    Status(NameArgs),
    /// Run a gate on a stream. Exit 0 pass, 1 fail, 2 refusal.
    Gate(GateArgs),
    /// Archive the declared returns (sha256 per file), verify the copy, then
    /// remove the worktree. The branch is kept.
    Teardown(TeardownArgs),
    /// Record that a stream's worktree was already removed by hand (nothing
    /// can be archived any more); refused while the worktree exists.
    Forget(NameArgs),
}

/// Where the repository is.
#[derive(Debug, Args)]
pub struct RepoArg {
    /// Any directory of the repository (or one of its worktrees); default:
    /// the current directory.
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

impl RepoArg {
    fn dir(&self) -> PathBuf {
        self.repo.clone().unwrap_or_else(|| PathBuf::from("."))
    }
}

/// `stream start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The stream name (letters, digits, `.`, `_`, `-`).
    pub name: String,
    #[command(flatten)]
    pub repo: RepoArg,
    /// Revision the stream starts from; default HEAD.
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Put the worktree here instead of `<repo-parent>/<repo-name>.streams/NAME`.
    #[arg(long, value_name = "DIR")]
    pub worktree: Option<PathBuf>,
}

/// A stream by name.
#[derive(Debug, Args)]
pub struct NameArgs {
    /// The stream name.
    pub name: String,
    #[command(flatten)]
    pub repo: RepoArg,
}

/// The gates saphan knows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GateName {
    /// returns-exist and returns-complete.
    #[value(name = "stop-2")]
    Stop2,
}

/// `stream gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Which gate.
    pub gate: GateName,
    /// The stream name.
    pub name: String,
    #[command(flatten)]
    pub repo: RepoArg,
}

/// `stream teardown`.
#[derive(Debug, Args)]
pub struct TeardownArgs {
    /// The stream name.
    pub name: String,
    #[command(flatten)]
    pub repo: RepoArg,
    /// Drop an undeclared authored path on purpose: PATH=REASON (repeatable;
    /// a directory waives everything under it).
    #[arg(long, value_name = "PATH=REASON")]
    pub waive: Vec<String>,
}

fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializes")
}

/// Run one `stream` verb.
pub async fn run(ctx: &Ctx, cmd: StreamCmd) -> Result<Exit> {
    match cmd {
        StreamCmd::Start(a) => {
            let e = stream::start(&stream::StartSettings {
                repo: a.repo.dir(),
                name: a.name,
                base: a.base,
                worktree: a.worktree,
            })
            .await?;
            if ctx.json {
                out_json(&json(&e));
            } else {
                out(&format!(
                    "started stream {}\n  branch    {}\n  base      {}\n  worktree  {}\n  status    {}\n\
                     declare the stream's returns under `- return:` in the status file, one path per line\n",
                    e.name,
                    e.branch,
                    e.base,
                    e.worktree.display(),
                    e.worktree.join(stream::status::STATUS_FILE).display()
                ));
            }
            Ok(Exit::Ok)
        }
        StreamCmd::Status(a) => {
            let v = stream::show(&a.repo.dir(), &a.name).await?;
            if ctx.json {
                out_json(&json(&v));
            } else {
                out(&v.render());
            }
            Ok(Exit::Ok)
        }
        StreamCmd::Forget(a) => {
            let e = stream::forget(&a.repo.dir(), &a.name).await?;
            if ctx.json {
                out_json(&json(&e));
            } else {
                out(&format!(
                    "stream {}: forgotten (its worktree {} was already gone; nothing archived); branch {} kept\n",
                    e.name,
                    e.worktree.display(),
                    e.branch
                ));
            }
            Ok(Exit::Ok)
        }
        StreamCmd::Gate(a) => {
            let GateName::Stop2 = a.gate;
            let g = stream::gate::stop2(&a.repo.dir(), &a.name).await?;
            if ctx.json {
                out_json(&json(&g));
            } else {
                out(&g.render());
            }
            Ok(match g.verdict {
                Outcome::Pass => Exit::Ok,
                Outcome::Fail => Exit::Red,
            })
        }
        StreamCmd::Teardown(a) => {
            let t = stream::teardown::teardown(
                &ctx.home,
                &TeardownSettings {
                    repo: a.repo.dir(),
                    name: a.name,
                    waive: a.waive,
                },
            )
            .await?;
            if ctx.json {
                out_json(&json(&t));
            } else {
                out(&t.render());
            }
            Ok(Exit::Ok)
        }
    }
}
