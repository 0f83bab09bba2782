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
    /// `cache/<trust>`: the build caches of one trust class of attempts
    /// on this machine ([`crate::seal::Trust`]; Go's build and module
    /// caches and `XDG_CACHE_HOME`, [`crate::seal::cache_env`]).
    pub fn cache(&self, trust: crate::seal::Trust) -> PathBuf {
        self.root.join("cache").join(trust.as_str())
    }
    /// `archive/`: teardown archives of stream returns.
    pub fn archive(&self) -> PathBuf {
        self.root.join("archive")
    }
}

/// Paths under a fleet machine's workhome for one repository: the same
/// shapes as this machine's (`scratch/<key>/tree`, `cache/<trust>`),
/// under `<workhome>/saphan`.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `<workhome>/saphan`.
    pub base: String,
    /// The repository key (16 hex of the sha256 of the local common dir).
    pub key: String,
}

impl Layout {
    /// The bare mirror.
    pub fn mirror(&self) -> String {
        format!("{}/mirrors/{}.git", self.base, self.key)
    }
    /// The stable scratch worktree.
    pub fn tree(&self) -> String {
        format!("{}/scratch/{}/tree", self.base, self.key)
    }
    /// One attempt's run directory.
    pub fn run(&self, id: &str) -> String {
        format!("{}/runs/{}", self.base, id)
    }
    /// The machine's build caches of one trust class
    /// (`<base>/cache/<trust>`), kept between runs as this machine's
    /// `$SAPHAN_HOME/cache/<trust>` is ([`Home::cache`]): a trunk
    /// certification never reads what another attempt's suite wrote.
    pub fn cache(&self, trust: crate::seal::Trust) -> String {
        format!("{}/cache/{}", self.base, trust.as_str())
    }
    /// The Go build cache of one trust class, for container-class suites
    /// (`<base>/cache/<trust>/go-build`): the host class's `GOCACHE` too.
    pub fn go_cache(&self, trust: crate::seal::Trust) -> String {
        format!("{}/go-build", self.cache(trust))
    }
    /// The layout whose stable tree ([`Layout::tree`]) is `tree`, when it is
    /// one (`<base>/scratch/<key>/tree`).
    pub fn of_tree(tree: &str) -> Option<Layout> {
        let rest = tree.strip_suffix("/tree")?;
        let (scratch, key) = rest.rsplit_once('/')?;
        let base = scratch.strip_suffix("/scratch")?;
        (!base.is_empty() && !key.is_empty()).then(|| Layout {
            base: base.to_string(),
            key: key.to_string(),
        })
    }
}

/// saphan's home is writable by someone other than its owner.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// A directory (or file) of SAPHAN_HOME others can write, or that the
    /// current user does not own.
    #[error(
        "{dir}: {detail}; whoever can write it can change what saphan reads from SAPHAN_HOME (its catalog, its machines, its ledger), so nothing in it is trusted — run `{fix}`"
    )]
    Exposed {
        /// The path.
        dir: PathBuf,
        /// What is wrong with it.
        detail: String,
        /// The command that fixes it.
        fix: String,
    },
}

impl crate::error::Refusal for HomeError {
    fn name(&self) -> &'static str {
        match self {
            HomeError::Exposed { .. } => "saphan-home-exposed",
        }
    }
}

/// The home's permission rule: refuse a path among `dirs` (SAPHAN_HOME and
/// what saphan reads from it) that is group- or world-writable (a sticky
/// bit does not help: it guards names against other users, not the
/// directory's contents against replacement by its owner's peers), or that
/// is not owned by the current user ([`crate::fsutil::exposure`]). A path
/// that does not exist yet is skipped.
///
/// Errors: [`HomeError::Exposed`] (`saphan-home-exposed`) with the fix.
pub fn check_dirs(dirs: &[&Path]) -> Result<(), HomeError> {
    for dir in dirs {
        if let Some(x) = crate::fsutil::exposure(dir, false) {
            return Err(HomeError::Exposed {
                dir: dir.to_path_buf(),
                detail: x.detail,
                fix: x.fix,
            });
        }
    }
    Ok(())
}
