//! The saphan-probe image from the installed binary alone: the static probe
//! program (`images/probe/src/main.rs`) is compiled by `build.rs` and
//! embedded ([`PROGRAM`]); [`archive`] wraps it in a `docker save` archive
//! (`manifest.json`, the image config, one layer holding `/saphan-probe`)
//! that `docker load -i` reads on any machine, with no registry and no
//! source checkout.
//!
//! The archive is deterministic: every timestamp is the epoch, every owner
//! root, so the same saphan binary always writes the same bytes and the
//! image ID (`sha256:` of the config) is the same on every machine that
//! loads it — the value `saphan catalog pin` takes.

use crate::error::Refusal;

/// The static x86_64 saphan-probe program, or empty when this build could
/// not compile it (see `build.rs`).
pub const PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/saphan-probe"));

/// The tag the archive's image carries (`docker load` applies it).
pub const DEFAULT_TAG: &str = "ghcr.io/saphan-studio/saphan-probe:candidate";

/// Why no archive can be written.
#[derive(Debug, thiserror::Error)]
pub enum ProbeImageError {
    /// This binary carries no probe program.
    #[error(
        "this saphan build carries no saphan-probe program (its build had no x86_64-unknown-linux-gnu target with static glibc) — build the image from a source checkout with `images/probe/build --save saphan-probe.tar` (docs/docker.md), or use a saphan built for x86_64 Linux"
    )]
    NotEmbedded,
    /// The tag is not `NAME:TAG`.
    #[error(
        "--tag `{tag}` is not NAME:TAG (lowercase name, a tag after the last `:`) — give e.g. {DEFAULT_TAG}"
    )]
    BadTag {
        /// What was given.
        tag: String,
    },
}

impl Refusal for ProbeImageError {
    fn name(&self) -> &'static str {
        match self {
            ProbeImageError::NotEmbedded => "probe-image-not-embedded",
            ProbeImageError::BadTag { .. } => "usage",
        }
    }
}

/// A written archive: its bytes and the image ID `docker load` gives it.
#[derive(Debug, Clone)]
pub struct Archive {
    /// The `docker save` archive (a tar file).
    pub bytes: Vec<u8>,
    /// `sha256:<64 hex>`: the digest of the image config, which is the
    /// image ID after `docker load`.
    pub image_id: String,
}

/// One ustar header + data for a regular file (`typeflag` `0`) or a
/// directory (`5`), owner root, mtime 0.
fn entry(out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8], dir: bool) {
    assert!(name.len() < 100, "tar names here are short");
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
        let s = format!("{v:0w$o}\0", w = len - 1);
        h[at..at + len].copy_from_slice(s.as_bytes());
    };
    octal(&mut h, 100, 8, mode as u64);
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, if dir { 0 } else { data.len() as u64 });
    octal(&mut h, 136, 12, 0);
    h[156] = if dir { b'5' } else { b'0' };
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    out.extend_from_slice(&h);
    if !dir {
        out.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        out.extend(std::iter::repeat_n(0u8, pad));
    }
}

fn finish(out: &mut Vec<u8>) {
    out.extend(std::iter::repeat_n(0u8, 1024));
}

fn valid_tag(tag: &str) -> bool {
    let Some((name, t)) = tag.rsplit_once(':') else {
        return false;
    };
    !name.is_empty()
        && !t.is_empty()
        && !t.contains('/')
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'/')
        })
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The `docker save` archive of the probe image made of `program`, tagged
/// `tag`.
///
/// Errors: `usage` for a tag that is not `NAME:TAG`.
pub fn archive_of(program: &[u8], tag: &str) -> Result<Archive, ProbeImageError> {
    if !valid_tag(tag) {
        return Err(ProbeImageError::BadTag { tag: tag.into() });
    }
    let mut layer = Vec::new();
    entry(&mut layer, "saphan-probe", 0o755, program, false);
    finish(&mut layer);
    let layer_hex = crate::fsutil::sha256_hex(&layer);
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Entrypoint": ["/saphan-probe"]},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_hex}")]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "saphan catalog probe-image"}],
    });
    let config = crate::canonical::canonical_json(&config).into_bytes();
    let config_hex = crate::fsutil::sha256_hex(&config);
    let manifest = serde_json::json!([{
        "Config": format!("{config_hex}.json"),
        "RepoTags": [tag],
        "Layers": [format!("{layer_hex}/layer.tar")],
    }]);
    let manifest = crate::canonical::canonical_json(&manifest).into_bytes();
    let mut out = Vec::new();
    entry(&mut out, &format!("{layer_hex}/"), 0o755, &[], true);
    entry(
        &mut out,
        &format!("{layer_hex}/layer.tar"),
        0o644,
        &layer,
        false,
    );
    entry(
        &mut out,
        &format!("{config_hex}.json"),
        0o644,
        &config,
        false,
    );
    entry(&mut out, "manifest.json", 0o644, &manifest, false);
    finish(&mut out);
    Ok(Archive {
        bytes: out,
        image_id: format!("sha256:{config_hex}"),
    })
}

/// The probe image archive from the program this binary embeds.
///
/// Errors: `probe-image-not-embedded`, `usage` (a bad tag).
pub fn archive(tag: &str) -> Result<Archive, ProbeImageError> {
    if PROGRAM.is_empty() {
        return Err(ProbeImageError::NotEmbedded);
    }
    archive_of(PROGRAM, tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_deterministic_tar_files() {
        let a = archive_of(b"#!/bin/true\n", DEFAULT_TAG).unwrap();
        let b = archive_of(b"#!/bin/true\n", DEFAULT_TAG).unwrap();
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(a.image_id, b.image_id);
        assert_eq!(a.bytes.len() % 512, 0);
        assert_eq!(&a.bytes[257..263], b"ustar\0");
        let c = archive_of(b"other", DEFAULT_TAG).unwrap();
        assert_ne!(a.image_id, c.image_id);
        assert!(archive_of(b"x", "no-tag").is_err());
        assert!(archive_of(b"x", "Upper:1").is_err());
        assert!(valid_tag("saphan-test/probe:p1"));
    }
}
