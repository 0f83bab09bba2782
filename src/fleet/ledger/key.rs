//! The row-signing key, `SAPHAN_HOME/keys/row-signing`: the 32 raw bytes of
//! an ed25519 secret key, loaded (its mode checked first, [`super::perms`])
//! or created from `getrandom` with mode 0600 in a 0700 directory — only by
//! an append, never by a read.

use super::perms::check_key_mode;
use crate::fleet::FleetError;
use ed25519_dalek::SigningKey;
use std::path::Path;

/// Load the signing key at `path` (its mode checked first); `None` when it
/// does not exist.
///
/// Errors: `row-signing-key-exposed`; [`FleetError::SigningKey`] when the
/// file is not 32 bytes or cannot be read.
pub fn load_key(path: &Path) -> Result<Option<SigningKey>, FleetError> {
    check_key_mode(path)?;
    match std::fs::read(path) {
        Ok(bytes) => {
            let arr: [u8; 32] =
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| FleetError::SigningKey {
                        path: path.to_path_buf(),
                        detail: format!("holds {} bytes, an ed25519 secret key is 32", bytes.len()),
                    })?;
            Ok(Some(SigningKey::from_bytes(&arr)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FleetError::SigningKey {
            path: path.to_path_buf(),
            detail: format!("cannot read: {e}"),
        }),
    }
}

/// Load the signing key at `path`, creating it (0600, from `getrandom`, in a
/// 0700 directory) when absent.
///
/// Errors: `row-signing-key-exposed`; [`FleetError::SigningKey`] when the
/// file exists but is not 32 bytes or cannot be read or created.
pub fn load_or_create_key(path: &Path) -> Result<SigningKey, FleetError> {
    let bad = |detail: String| FleetError::SigningKey {
        path: path.to_path_buf(),
        detail,
    };
    if let Some(k) = load_key(path)? {
        return Ok(k);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?;
    }
    check_key_mode(path)?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| bad(format!("no randomness: {e}")))?;
    // tempfile creates 0600; persist_noclobber makes a concurrent
    // first use lose the race cleanly instead of overwriting.
    let mut tmp = tempfile::Builder::new()
        .prefix(".row-signing-")
        .tempfile_in(dir)
        .map_err(|e| bad(format!("cannot create a temp file: {e}")))?;
    use std::io::Write;
    tmp.write_all(&secret)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| bad(format!("cannot write: {e}")))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(SigningKey::from_bytes(&secret)),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => load_or_create_key(path),
        Err(e) => Err(bad(format!("cannot create: {}", e.error))),
    }
}
