//! How an operator line spells a word or SAPHAN_HOME: POSIX-shell quoting
//! of one word for pasting (the transport's own quoting), and SAPHAN_HOME
//! shown as `~/.saphan` when it is the default. A leaf of the fleet: the
//! refusals ([`super::FleetError`]), the ledger's permission checks, the
//! machine rows and the remedies all spell through it.

use crate::home::Home;
use std::path::Path;

/// Quote `s` for a POSIX shell only when it needs it — the transport's own
/// quoting ([`crate::transport::quote::quote`]), so a remedy an operator
/// pastes quotes exactly as saphan's remote command lines do. (Command-line
/// arguments cannot hold a NUL; should one appear, it is spelled out
/// visibly rather than dropped.)
pub fn quote(s: &str) -> String {
    crate::transport::quote::quote(s).unwrap_or_else(|| single_quote(&s.replace('\0', "\\0")))
}

/// Always single-quote `s` for a POSIX shell (`'` becomes `'\''`).
pub fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Is `home` the default `$HOME/.saphan`?
pub fn home_is_default(home: &Home) -> bool {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Path::new(&h).join(".saphan") == home.root(),
        _ => false,
    }
}

/// `~/.saphan/ssh/config` for the default home, else the quoted real path.
pub fn ssh_config_display(home: &Home) -> String {
    if home_is_default(home) {
        "~/.saphan/ssh/config".to_string()
    } else {
        quote(&home.ssh_config().to_string_lossy())
    }
}

/// Who is running saphan, as a probe records it (`--probed-by`'s default):
/// `$USER`, else `$LOGNAME`, else the password database's name of the real
/// uid, else the uid itself (`uid-1000`).
pub fn login_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        })
        .unwrap_or_else(|| format!("uid-{}", nix::unistd::getuid().as_raw()))
}
