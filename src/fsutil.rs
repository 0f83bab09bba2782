//! Atomic file writes (DESIGN §2): a crash never leaves a torn record or a
//! half-written config.

use crate::error::IoError;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> IoError + 'a {
    move |source| IoError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Replace `path` with `bytes` atomically: write a temp file beside it,
/// fsync, rename over, fsync the directory. Creates parent directories.
///
/// Errors: [`IoError::Io`] naming the path.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".saphan-tmp-")
        .tempfile_in(dir)
        .map_err(io("create a temp file in", dir))?;
    tmp.write_all(bytes).map_err(io("write", path))?;
    tmp.as_file().sync_all().map_err(io("sync", path))?;
    if let Ok(meta) = fs::metadata(path) {
        let _ = fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| IoError::Io {
        action: "rename over",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Append one whole line (a `\n` is added) with `O_APPEND` in a single
/// `write`, then fsync. Concurrent appenders never interleave inside a line
/// as long as each line is written by one call (Linux guarantees this for
/// regular files opened with `O_APPEND`).
///
/// Errors: [`IoError::Io`] naming the path.
pub fn append_line(path: &Path, line: &str) -> Result<(), IoError> {
    debug_assert!(!line.contains('\n'));
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io("open for append", path))?;
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    f.write_all(&buf).map_err(io("append to", path))?;
    f.sync_data().map_err(io("sync", path))?;
    Ok(())
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex sha256 of a file's bytes, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}
