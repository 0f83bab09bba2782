//! `saphan completions` and `saphan man`: generated from the clap
//! definitions ([`super::Cli`]), so they never drift from the parser.

use super::{Cli, Ctx, out};
use crate::error::{Exit, IoError, Result};
use clap::{Args, CommandFactory};
use std::path::PathBuf;

/// Print a shell completion script for saphan on stdout.
///
/// bash: `saphan completions bash > /etc/bash_completion.d/saphan`
/// (or `source <(saphan completions bash)`); zsh: into a directory on
/// `$fpath` as `_saphan`; fish: `~/.config/fish/completions/saphan.fish`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells `saphan completions` writes for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    /// GNU bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// Print the saphan(1) man page (roff) on stdout, or write one page per
/// verb into a directory.
///
/// `saphan man | man -l -` reads it now; `saphan man --dir /usr/local/share/man/man1`
/// installs saphan.1 and saphan-<verb>.1 for every verb.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write saphan.1 and one saphan-<verb>[-<sub>].1 per verb here instead of printing saphan.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Run `completions`.
pub fn completions(a: CompletionsArgs) -> Result<Exit> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "saphan", &mut buf);
    out(&String::from_utf8_lossy(&buf));
    Ok(Exit::Ok)
}

/// Run `man`.
pub fn man(ctx: &Ctx, a: ManArgs) -> Result<Exit> {
    let cmd = Cli::command();
    let Some(dir) = a.dir else {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut buf)
            .expect("rendering into memory does not fail");
        out(&String::from_utf8_lossy(&buf));
        return Ok(Exit::Ok);
    };
    let io = |source| IoError::Io {
        action: "write man pages into",
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    clap_mangen::generate_to(cmd, &dir).map_err(io)?;
    if ctx.json {
        super::out_json(&serde_json::json!({ "dir": dir }));
    } else {
        out(&format!("man pages written to {}\n", dir.display()));
    }
    Ok(Exit::Ok)
}
