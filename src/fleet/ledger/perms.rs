//! Permissions of what SAPHAN_HOME holds for the fleet: SAPHAN_HOME,
//! `fleet/` and `keys/` must be owned by the current user and not group- or
//! world-writable ([`check_home_dirs`], `saphan-home-exposed`), and the
//! row-signing key must be readable by its owner alone, in a directory only
//! its owner can write ([`check_key_mode`], `row-signing-key-exposed`).
//! Whoever can write them can swap the key directory, the ledger or its
//! head. A leaf of the fleet: machines.toml and the catalog check their
//! directories here too.

use crate::fleet::FleetError;
use crate::fleet::spell::quote;
use std::path::Path;

/// Refuse a key file others can read, or a key directory others can write.
///
/// Errors: [`FleetError::SigningKeyExposed`] with the `chmod` that fixes it.
pub fn check_key_mode(path: &Path) -> Result<(), FleetError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Ok(m) = std::fs::metadata(dir) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(FleetError::SigningKeyExposed {
                path: path.to_path_buf(),
                detail: format!(
                    "its directory {} is writable by others (mode {mode:03o}), so the key can be replaced",
                    dir.display()
                ),
                fix: format!("chmod 700 {}", quote(&dir.to_string_lossy())),
            });
        }
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(FleetError::SigningKeyExposed {
                path: path.to_path_buf(),
                detail: format!("the key file is readable or writable by others (mode {mode:03o})"),
                fix: format!("chmod 600 {}", quote(&path.to_string_lossy())),
            });
        }
    }
    Ok(())
}

/// Refuse a directory among `dirs` (SAPHAN_HOME, `fleet/`, `keys/`) that is
/// group- or world-writable (a sticky bit does not help: it guards names
/// against other users, not the directory's contents against replacement by
/// its owner's peers), or that is not owned by the current user. A directory
/// that does not exist yet is skipped.
///
/// Errors: [`FleetError::HomeExposed`] (`saphan-home-exposed`) with the fix.
pub fn check_home_dirs(dirs: &[&Path]) -> Result<(), FleetError> {
    crate::home::check_dirs(dirs).map_err(|e| match e {
        crate::home::HomeError::Exposed { dir, detail, fix } => {
            FleetError::HomeExposed { dir, detail, fix }
        }
    })
}

/// SAPHAN_HOME and `fleet/` for a ledger at `SAPHAN_HOME/fleet/ledger.jsonl`.
pub(super) fn ledger_dirs(ledger: &Path) -> Vec<&Path> {
    let mut v = Vec::new();
    if let Some(fleet) = ledger.parent() {
        if let Some(root) = fleet.parent() {
            v.push(if root.as_os_str().is_empty() {
                Path::new(".")
            } else {
                root
            });
        }
        v.push(fleet);
    }
    v
}
