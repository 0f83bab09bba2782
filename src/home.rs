//! `SAPHAN_HOME` (default `~/.saphan`): where operator-scoped state lives
//! (DESIGN §2).

use std::path::{Path, PathBuf};

/// The operator's saphan home and the paths inside it.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$SAPHAN_HOME`, else `$HOME/.saphan`, else `./.saphan`.
    pub fn from_env() -> Home {
        let root = match std::env::var_os("SAPHAN_HOME") {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => match std::env::var_os("HOME") {
                Some(h) if !h.is_empty() => PathBuf::from(h).join(".saphan"),
                _ => PathBuf::from(".saphan"),
            },
        };
        Home { root }
    }
    /// A home rooted at `root` (tests).
    pub fn at(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }
    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `config`: config-v1.
    pub fn config(&self) -> PathBuf {
        self.root.join("config")
    }
    /// `ssh/config`: the OpenSSH client config for the fleet.
    pub fn ssh_config(&self) -> PathBuf {
        self.root.join("ssh").join("config")
    }
    /// `catalog.toml`: the capability catalog every command uses when it is
    /// given no `--catalog` ([`crate::catalog::Catalog::for_home`]).
    pub fn catalog(&self) -> PathBuf {
        self.root.join("catalog.toml")
    }
    /// `fleet/machines.toml`: the operator's machine rows.
    pub fn machines(&self) -> PathBuf {
        self.root.join("fleet").join("machines.toml")
    }
    /// `fleet/ledger.jsonl`: signed measured facts.
    pub fn ledger(&self) -> PathBuf {
        self.root.join("fleet").join("ledger.jsonl")
    }
    /// `keys/row-signing`: the ed25519 key that signs ledger rows.
    pub fn signing_key(&self) -> PathBuf {
        self.root.join("keys").join("row-signing")
    }
    /// `scratch/<key>/tree`: certify's scratch worktree for one repository
    /// (`key` identifies the repository; see [`crate::commands::certify`]).
    pub fn scratch(&self, key: &str) -> PathBuf {
        self.root.join("scratch").join(key).join("tree")
    }
    /// `archive/`: teardown archives of stream returns.
    pub fn archive(&self) -> PathBuf {
        self.root.join("archive")
    }
}
