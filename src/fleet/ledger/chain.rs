//! The signed hash chain: how a row becomes a ledger line and back. Each
//! line is the row's canonical JSON ([`canonical_json`]) with `v`, `seq`
//! (its 1-based line number) and `prev` (the sha256 hex of the previous
//! line's exact bytes, [`ZERO_HASH`] for the first) added, signed with
//! ed25519 over those bytes (`signature`, lowercase hex). The signed head
//! (`fleet/ledger.head`, [`head_path`]) holds the count and last-line hash.
//! Refusals: `ledger-row-tampered`, `ledger-row-malformed`,
//! `ledger-chain-broken`, `ledger-head-mismatch`.

use super::row::{ROW_VERSION, Row};
use crate::fleet::FleetError;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use crate::canonical::canonical_json;

/// `fleet/ledger.head` beside the ledger: the signed count and last-line
/// hash, rewritten (atomically) after every append.
pub fn head_path(ledger: &Path) -> PathBuf {
    ledger.with_file_name("ledger.head")
}

/// The zero hash: `prev` of the first row.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The ledger's signed head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Head {
    pub(super) count: u64,
    pub(super) last: String,
}

/// The head file's text: `{"count","kind":"ledger-head","last","signature","v":1}`
/// in canonical JSON, signed like a row, with a final newline.
pub(super) fn sign_head(key: &SigningKey, h: &Head) -> String {
    let mut v =
        serde_json::json!({"v": 1, "kind": "ledger-head", "count": h.count, "last": h.last});
    let sig: Signature = key.sign(canonical_json(&v).as_bytes());
    v["signature"] = Value::String(hex::encode(sig.to_bytes()));
    canonical_json(&v) + "\n"
}

/// The signed head beside `ledger`, verified with `vk`; `None` when there
/// is no head file.
///
/// Errors: `ledger-head-mismatch` when it cannot be read or is not a head
/// signed by this key.
pub(super) fn read_head(ledger: &Path, vk: &VerifyingKey) -> Result<Option<Head>, FleetError> {
    let path = head_path(ledger);
    let mismatch = |detail: String| FleetError::LedgerHeadMismatch {
        path: ledger.to_path_buf(),
        detail,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(mismatch(format!("cannot read {}: {e}", path.display()))),
    };
    let bad = || {
        mismatch(format!(
            "{} is not a head signed by this key",
            path.display()
        ))
    };
    let mut v: Value = serde_json::from_str(text.trim_end()).map_err(|_| bad())?;
    let sig = v
        .as_object_mut()
        .and_then(|m| m.remove("signature"))
        .and_then(|s| s.as_str().and_then(|s| hex::decode(s).ok()))
        .and_then(|b| Signature::from_slice(&b).ok())
        .ok_or_else(bad)?;
    vk.verify(canonical_json(&v).as_bytes(), &sig)
        .map_err(|_| bad())?;
    let count = v["count"].as_u64().ok_or_else(bad)?;
    let last = v["last"].as_str().ok_or_else(bad)?.to_string();
    Ok(Some(Head { count, last }))
}

/// The sha256 hex of each line's exact bytes (without its `\n`).
pub(super) fn line_hash(line: &str) -> String {
    crate::fsutil::sha256_hex(line.as_bytes())
}

/// Check one link of the chain: the row at `line` says `seq` and `prev`;
/// `expected` is the hash of the line before it ([`ZERO_HASH`] for line 1).
///
/// Errors: `ledger-chain-broken` naming the line.
pub(super) fn check_link(
    path: &Path,
    line: usize,
    seq: u64,
    prev: &str,
    expected: &str,
) -> Result<(), FleetError> {
    let broken = |detail: String| FleetError::LedgerChainBroken {
        path: path.to_path_buf(),
        line,
        detail,
    };
    if seq != line as u64 {
        return Err(broken(format!(
            "the row says seq {seq} but stands at line {line}"
        )));
    }
    if prev != expected {
        return Err(broken(
            "its `prev` is not the hash of the line before it".into(),
        ));
    }
    Ok(())
}

/// Check the chain (each row's `seq` and `prev`, as [`verify_line`] read
/// them, one per line) from the first line, and the head.
pub(super) fn check_chain_and_head(
    path: &Path,
    lines: &[(usize, &str)],
    links: &[(u64, String)],
    head: Option<&Head>,
) -> Result<(), FleetError> {
    let mut prev = ZERO_HASH.to_string();
    for ((n, l), (seq, p)) in lines.iter().zip(links) {
        check_link(path, *n, *seq, p, &prev)?;
        prev = line_hash(l);
    }
    check_head_only(path, lines, head)
}

/// Check the ledger's lines against its signed head: at least as many lines,
/// and line `count` hashes to the head's `last`.
pub(super) fn check_head_only(
    path: &Path,
    lines: &[(usize, &str)],
    head: Option<&Head>,
) -> Result<(), FleetError> {
    let head_file = head_path(path);
    match head {
        None if lines.is_empty() => Ok(()),
        None => Err(FleetError::LedgerHeadMismatch {
            path: path.to_path_buf(),
            detail: format!(
                "the ledger holds {} rows but its head {} is missing",
                lines.len(),
                head_file.display()
            ),
        }),
        Some(h) => {
            let count = h.count as usize;
            if lines.len() < count {
                return Err(FleetError::LedgerHeadMismatch {
                    path: path.to_path_buf(),
                    detail: format!(
                        "the ledger holds {} rows but its signed head {} says {count}",
                        lines.len(),
                        head_file.display()
                    ),
                });
            }
            let at = if count == 0 {
                ZERO_HASH.to_string()
            } else {
                line_hash(lines[count - 1].1)
            };
            if at != h.last {
                return Err(FleetError::LedgerHeadMismatch {
                    path: path.to_path_buf(),
                    detail: format!(
                        "line {count} is not the row its signed head {} names",
                        head_file.display()
                    ),
                });
            }
            // Rows beyond the head are a crash between an append and its
            // head write: they are signed and chained, so they stand.
            Ok(())
        }
    }
}

/// The ledger line of `row` at `seq` after the line hashing to `prev`:
/// canonical JSON with `v`, `seq`, `prev` and `signature` added (no newline).
pub(super) fn sign_row(key: &SigningKey, row: &Row, seq: u64, prev: &str) -> String {
    let mut v = serde_json::to_value(row).expect("ledger rows serialize");
    if let Value::Object(m) = &mut v {
        m.insert("v".into(), Value::from(ROW_VERSION));
        m.insert("seq".into(), Value::from(seq));
        m.insert("prev".into(), Value::String(prev.to_string()));
    }
    let canon = canonical_json(&v);
    let sig: Signature = key.sign(canon.as_bytes());
    if let Value::Object(m) = &mut v {
        m.insert(
            "signature".into(),
            Value::String(hex::encode(sig.to_bytes())),
        );
    }
    canonical_json(&v)
}

/// Read ledger line number `line` (`text`, without its newline): verify its
/// signature with `vk`, then its version; the row, its `seq` and `prev`.
/// The chain itself is checked by [`check_link`].
///
/// Errors: `ledger-row-malformed` (not JSON, not a row, an unknown or
/// version-1 row, no `seq`/`prev`), `ledger-row-tampered` (no signature, or
/// one that does not match).
pub(super) fn verify_line(
    path: &Path,
    line: usize,
    text: &str,
    vk: &VerifyingKey,
) -> Result<(Row, u64, String), FleetError> {
    read_line(path, line, text, Some(vk))
}

/// [`verify_line`] without the signature check, for a line whose exact
/// bytes the chain already ties to a verified signed head
/// ([`Ledger::open`](super::store::Ledger::open)): the same row, `seq` and
/// `prev`, and the same refusals but the signature's mismatch.
pub(super) fn read_chained_line(
    path: &Path,
    line: usize,
    text: &str,
) -> Result<(Row, u64, String), FleetError> {
    read_line(path, line, text, None)
}

fn read_line(
    path: &Path,
    line: usize,
    text: &str,
    vk: Option<&VerifyingKey>,
) -> Result<(Row, u64, String), FleetError> {
    let malformed = |detail: String| FleetError::LedgerMalformed {
        path: path.to_path_buf(),
        line,
        detail,
    };
    let tampered = |detail: &str| FleetError::LedgerTampered {
        path: path.to_path_buf(),
        line,
        detail: detail.to_string(),
    };
    if text.trim().is_empty() {
        return Err(malformed("the line is empty".into()));
    }
    let mut v: Value =
        serde_json::from_str(text).map_err(|e| malformed(format!("not JSON ({e})")))?;
    let Value::Object(m) = &mut v else {
        return Err(malformed("not a JSON object".into()));
    };
    let sig = match m.remove("signature") {
        Some(Value::String(s)) => s,
        _ => return Err(tampered("the row carries no signature")),
    };
    let sig = hex::decode(&sig)
        .ok()
        .and_then(|b| Signature::from_slice(&b).ok())
        .ok_or_else(|| tampered("the signature is not an ed25519 signature"))?;
    if let Some(vk) = vk
        && vk.verify(canonical_json(&v).as_bytes(), &sig).is_err()
    {
        return Err(tampered("the signature does not match the row"));
    }
    let Value::Object(m) = &mut v else {
        unreachable!()
    };
    match m.remove("v") {
        Some(x) if x.as_u64() == Some(ROW_VERSION) => {}
        Some(x) if x.as_u64() == Some(1) => {
            return Err(malformed(
                "a version-1 row, written by an older saphan without the hash chain (no `seq`/`prev`); it is not migrated".into(),
            ));
        }
        other => return Err(malformed(format!("unknown row version {other:?}"))),
    }
    let seq = match m.remove("seq").and_then(|x| x.as_u64()) {
        Some(n) if n >= 1 => n,
        _ => return Err(malformed("the row carries no `seq`".into())),
    };
    let prev = match m.remove("prev") {
        Some(Value::String(p)) if p.len() == 64 => p,
        _ => return Err(malformed("the row carries no `prev` hash".into())),
    };
    let row = serde_json::from_value(v)
        .map_err(|e| malformed(format!("not a machine or capability row ({e})")))?;
    Ok((row, seq, prev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        let v: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[{"y":1,"x":"é\n"}],"c":null}}"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"z":[{"x":"é\n","y":1}]},"b":1}"#
        );
    }
}
