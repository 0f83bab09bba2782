//! The ledger: `SAPHAN_HOME/fleet/ledger.jsonl`, one signed JSON row per
//! line, append-only (`fsutil::append_line`).
//!
//! Two kinds of row:
//! - `kind: "machine"` — a machine's measured confinement facts
//!   ([`MachineFacts`]), written by `machine measure`;
//! - `kind: "capability"` — one probe of one capability on one machine
//!   ([`CapabilityRow`]), written by `machine probe` (and the docker-oci /
//!   sandbox-userns probes).
//!
//! **Signatures.** Every row carries `v` (format version, 2), `seq`, `prev`
//! and `signature`: lowercase hex of the 64-byte ed25519 signature over the
//! row's *canonical bytes* — the row as JSON with the `signature` member
//! removed, object keys sorted by byte order at every depth, no insignificant
//! whitespace, strings escaped the way serde_json escapes them
//! ([`canonical_json`]). The key is `SAPHAN_HOME/keys/row-signing`: the 32
//! raw bytes of an ed25519 secret key, created from `getrandom` with mode
//! 0600 (directory 0700) on the first append — never by a read. A key others
//! can read (or a key directory others can write) is refused
//! (`row-signing-key-exposed`); a missing key beside a non-empty ledger is
//! `row-signing-key-missing`. SAPHAN_HOME, `fleet/` and `keys/` must be
//! owned by the current user and not group- or world-writable (sticky or
//! not): otherwise `saphan-home-exposed` ([`check_home_dirs`]), since whoever
//! can write them can swap the key directory, the ledger or its head. Every
//! read verifies every row; a row that fails
//! is refused as `ledger-row-tampered`, naming the line.
//!
//! **Chain and head.** `seq` is the 1-based line number and `prev` the sha256
//! hex of the previous line's exact bytes ([`ZERO_HASH`] for the first), both
//! signed: reordering, deleting or duplicating lines is `ledger-chain-broken`.
//! `fleet/ledger.head` ([`head_path`]) holds the signed count and last-line
//! hash, rewritten atomically after each append; a ledger shorter than the
//! head or with another line at the head's position is `ledger-head-mismatch`.
//! Rows past the head (the crash window between append and head write) are
//! accepted with a one-line stderr warning; the next append re-verifies them,
//! chained from the head's hash, before signing a head that covers them. An
//! old head restored with a matching truncation looks the same: only the
//! warning shows it (docs/fleet.md, "What the signatures protect against").
//! A last line without its newline is `ledger-row-torn` and is never
//! appended onto. Appends hold an exclusive `flock` on the ledger file around
//! re-read + append + head write; reads hold a shared one.
//!
//! **Freshness.** A row is fresh while it is younger than the window
//! (`[fleet] freshness`, default 24h) and — for capability rows — was
//! measured against the current catalog entry: the row stores
//! [`crate::catalog::Capability::digest`] of the entry it was measured
//! against (for docker-oci this covers the pinned image digest).

use super::FleetError;
use crate::catalog::Capability;
use crate::home::Home;
use crate::platform::OsRelease;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The row format version written in `v`.
pub const ROW_VERSION: u64 = 2;

/// User-namespace support as measured on the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Userns {
    /// `true`/`false` when measured, `None` when nothing could tell.
    pub supported: Option<bool>,
    /// How it was decided: `"unshare -U true"` (an attempt, as the connected
    /// user), `"sysctl"` (from the two files below, when `unshare` is
    /// missing), or `"none"`.
    pub method: String,
    /// `/proc/sys/user/max_user_namespaces`, when readable.
    pub max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian/Ubuntu kernels), when present.
    pub unprivileged_userns_clone: Option<u64>,
}

/// A machine's measured confinement facts: one `kind: "machine"` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// The machine id.
    pub machine: String,
    /// When the facts were measured (RFC 3339, UTC).
    pub measured_at: String,
    /// `uname -s` (e.g. `Linux`, `Darwin`).
    pub os: String,
    /// `uname -m` (e.g. `x86_64`, `aarch64`, `arm64`).
    pub arch: String,
    /// `uname -r`.
    pub kernel: String,
    /// `/etc/os-release` (or `/usr/lib/os-release`) as parsed; `None` when
    /// the machine has neither file.
    pub distro: Option<OsRelease>,
    /// Online CPUs (`getconf _NPROCESSORS_ONLN`), when measured.
    pub cpus: Option<u64>,
    /// Total memory in bytes (`MemTotal` of /proc/meminfo × 1024, or
    /// `sysctl hw.memsize` on Darwin), when measured.
    pub memory_bytes: Option<u64>,
    /// User-namespace support.
    pub userns: Userns,
    /// The tools dispatch uses on the machine, as the measure script found
    /// them. `None` on a row measured by a saphan before this field existed
    /// (the row still reads and verifies; admission tells the machine to be
    /// re-measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Requirements>,
}

/// What a tiny real use of one tool on the machine showed (`machine
/// measure`'s requirements section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    /// It ran (`setsid true`, `flock -n` on /dev/null, the empty input's
    /// digest, `git --version`, /proc readable, `ps -o pid`).
    Ok,
    /// A file of that name is on PATH, but the use failed.
    NotRunnable,
    /// Not on PATH.
    Absent,
}

impl ToolState {
    /// `ok`, `not-runnable` or `absent`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolState::Ok => "ok",
            ToolState::NotRunnable => "not-runnable",
            ToolState::Absent => "absent",
        }
    }
}

/// The dispatch requirements measured on a machine, one [`ToolState`] per
/// tool; what admission makes of them is `crate::dispatch::admit`'s
/// (`machine-requirements-absent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requirements {
    /// `flock` (the repository lock; lock.sh falls back to a `mkdir` lock).
    pub flock: ToolState,
    /// `setsid` (the watchdog's process group).
    pub setsid: ToolState,
    /// `sha256sum` (provision hashes).
    pub sha256sum: ToolState,
    /// `shasum -a 256` (the provision hash where `sha256sum` is not).
    pub shasum: ToolState,
    /// `git`.
    pub git: ToolState,
    /// `git --version`'s version (`2.39.5`), when it ran.
    pub git_version: Option<String>,
    /// `/proc` (`/proc/$$/stat` readable).
    pub proc: ToolState,
    /// `ps`.
    pub ps: ToolState,
}

impl MachineFacts {
    /// The platform ids an install command may be chosen by, most specific
    /// first: `["darwin"]` on Darwin, else os-release `ID` then `ID_LIKE`.
    /// Empty when the facts prove no platform.
    pub fn platform_ids(&self) -> Vec<String> {
        if self.os == "Darwin" {
            return vec!["darwin".into()];
        }
        self.distro
            .as_ref()
            .map(OsRelease::platform_ids)
            .unwrap_or_default()
    }
}

/// A probe's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The declared program exists, is executable and ran its version command.
    Present,
    /// The declared program is not there.
    Absent,
    /// It is there but does not work (not executable, version command failed
    /// or timed out), or — for docker-oci / sandbox-userns — the named check failed.
    Failed,
}

impl Outcome {
    /// `present`, `absent` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Present => "present",
            Outcome::Absent => "absent",
            Outcome::Failed => "failed",
        }
    }
}

/// The probe's inputs, as the operator gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeInputs {
    /// `--declared-path` (absolute).
    pub declared_path: String,
    /// `--workhome` (absolute).
    pub workhome: String,
    /// `--probed-by`.
    pub probed_by: String,
    /// `--workspace`.
    pub workspace: String,
}

/// One probe of one capability on one machine: a `kind: "capability"` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityRow {
    /// The machine id.
    pub machine: String,
    /// The catalog capability name (`go`, `docker-oci` …).
    pub capability: String,
    /// What the operator declared.
    pub inputs: ProbeInputs,
    /// present / absent / failed.
    pub outcome: Outcome,
    /// Why, when not present: a stable short name where one exists
    /// (`binary-absent`, `daemon-unreachable`, `probe-image-absent`,
    /// `not-executable`, `version-command-failed` …) — see `reason_detail`.
    pub reason: Option<String>,
    /// A human sentence about `reason`.
    pub reason_detail: Option<String>,
    /// The version command's output (stdout and stderr), when it ran.
    pub version_output: Option<String>,
    /// Extra evidence a probe kind wants to keep (e.g. docker-oci VM facts).
    #[serde(default)]
    pub detail: Map<String, Value>,
    /// The machine's latest measured facts when the probe ran (`None`: never measured).
    pub facts: Option<MachineFacts>,
    /// When the probe ran (RFC 3339, UTC).
    pub measured_at: String,
    /// [`Capability::digest`] of the catalog entry the probe used.
    pub catalog_digest: String,
    /// The two remedy lines printed on failure (empty when present).
    #[serde(default)]
    pub remedy: Vec<String>,
}

/// Any ledger row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // rows are few and short-lived; boxing buys nothing
pub enum Row {
    /// `kind: "machine"`.
    Machine(MachineFacts),
    /// `kind: "capability"`.
    Capability(CapabilityRow),
}

pub use crate::canonical::canonical_json;

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
                fix: format!("chmod 700 {}", super::remedy::quote(&dir.to_string_lossy())),
            });
        }
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(FleetError::SigningKeyExposed {
                path: path.to_path_buf(),
                detail: format!("the key file is readable or writable by others (mode {mode:03o})"),
                fix: format!(
                    "chmod 600 {}",
                    super::remedy::quote(&path.to_string_lossy())
                ),
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
    for dir in dirs {
        if let Some(x) = crate::fsutil::exposure(dir, false) {
            return Err(FleetError::HomeExposed {
                dir: dir.to_path_buf(),
                detail: x.detail,
                fix: x.fix,
            });
        }
    }
    Ok(())
}

/// SAPHAN_HOME and `fleet/` for a ledger at `SAPHAN_HOME/fleet/ledger.jsonl`.
fn ledger_dirs(ledger: &Path) -> Vec<&Path> {
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

/// `fleet/ledger.head` beside the ledger: the signed count and last-line
/// hash, rewritten (atomically) after every append.
pub fn head_path(ledger: &Path) -> PathBuf {
    ledger.with_file_name("ledger.head")
}

/// The zero hash: `prev` of the first row.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The ledger's signed head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Head {
    count: u64,
    last: String,
}

fn sign_head(key: &SigningKey, h: &Head) -> String {
    let mut v =
        serde_json::json!({"v": 1, "kind": "ledger-head", "count": h.count, "last": h.last});
    let sig: Signature = key.sign(canonical_json(&v).as_bytes());
    v["signature"] = Value::String(hex::encode(sig.to_bytes()));
    canonical_json(&v) + "\n"
}

fn read_head(ledger: &Path, vk: &VerifyingKey) -> Result<Option<Head>, FleetError> {
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
fn line_hash(line: &str) -> String {
    crate::fsutil::sha256_hex(line.as_bytes())
}

/// Split ledger text into numbered lines, refusing a torn last line.
fn split_lines<'a>(path: &Path, text: &'a str) -> Result<Vec<(usize, &'a str)>, FleetError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let body = match text.strip_suffix('\n') {
        Some(b) => b,
        None => {
            let keep = text.rfind('\n').map(|i| i + 1).unwrap_or(0);
            return Err(FleetError::LedgerTorn {
                path: path.to_path_buf(),
                line: text.matches('\n').count() + 1,
                keep: keep as u64,
            });
        }
    };
    Ok(body
        .split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect())
}

/// A signing key with neither ledger rows nor a head: the ledger and its
/// head were deleted (or emptied), which would otherwise restart an empty
/// ledger under the same key without a word. Refused as
/// `ledger-head-mismatch`; starting over is done on purpose by moving the
/// key aside too (docs/fleet.md).
fn refuse_vanished(
    path: &Path,
    key_path: &Path,
    lines: &[(usize, &str)],
    head: Option<&Head>,
) -> Result<(), FleetError> {
    if lines.is_empty() && head.is_none() {
        return Err(FleetError::LedgerVanished {
            path: path.to_path_buf(),
            key: key_path.to_path_buf(),
        });
    }
    Ok(())
}

/// Check the chain (each row's `seq` and `prev`) and the head.
fn check_chain_and_head(
    path: &Path,
    lines: &[(usize, &str)],
    links: &[(u64, String)],
    head: Option<&Head>,
) -> Result<(), FleetError> {
    let mut prev = ZERO_HASH.to_string();
    for ((n, l), (seq, p)) in lines.iter().zip(links) {
        let broken = |detail: String| FleetError::LedgerChainBroken {
            path: path.to_path_buf(),
            line: *n,
            detail,
        };
        if *seq != *n as u64 {
            return Err(broken(format!(
                "the row says seq {seq} but stands at line {n}"
            )));
        }
        if *p != prev {
            return Err(broken(
                "its `prev` is not the hash of the line before it".into(),
            ));
        }
        prev = line_hash(l);
    }
    check_head_only(path, lines, head)
}

/// Check the ledger's lines against its signed head: at least as many lines,
/// and line `count` hashes to the head's `last`.
fn check_head_only(
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

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> crate::error::Error {
    let path = path.to_path_buf();
    move |source| {
        crate::error::IoError::Io {
            action,
            path,
            source,
        }
        .into()
    }
}

/// Read `path` whole through an open handle.
fn read_all(f: &mut std::fs::File, path: &Path) -> crate::error::Result<String> {
    use std::io::{Read, Seek};
    let mut buf = Vec::new();
    f.seek(std::io::SeekFrom::Start(0))
        .and_then(|_| f.read_to_end(&mut buf))
        .map_err(io_err("read", path))?;
    String::from_utf8(buf).map_err(|_| {
        FleetError::LedgerMalformed {
            path: path.to_path_buf(),
            line: 0,
            detail: "the file is not UTF-8".into(),
        }
        .into()
    })
}

/// The ledger, read and verified.
pub struct Ledger {
    path: PathBuf,
    key_path: PathBuf,
    key: Mutex<Option<SigningKey>>,
    rows: Mutex<Vec<Row>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Open `home`'s ledger for reading and appending: read every row and
    /// verify its signature, the hash chain and the signed head. Never
    /// creates the key (the first [`Ledger::append`] does). A missing ledger
    /// is empty.
    ///
    /// Errors: `ledger-row-tampered` (a signature fails), `ledger-row-malformed`
    /// (a line is not a row), `ledger-chain-broken`, `ledger-head-mismatch`,
    /// `ledger-row-torn`, `row-signing-key-exposed`, `row-signing-key-missing`,
    /// `signing-key-unusable`, `io`.
    pub fn open(home: &Home) -> crate::error::Result<Ledger> {
        let path = home.ledger();
        let key_path = home.signing_key();
        check_home_dirs(&ledger_dirs(&path))?;
        // The shared lock is held until the head is read too, so an append
        // in between cannot make the two disagree.
        let read = || -> crate::error::Result<(String, Option<std::fs::File>)> {
            match std::fs::File::open(&path) {
                Ok(mut f) => {
                    f.lock_shared().map_err(io_err("lock", &path))?;
                    Ok((read_all(&mut f, &path)?, Some(f)))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), None)),
                Err(e) => Err(io_err("read", &path)(e)),
            }
        };
        // The key is read after the ledger is locked: a first append creates
        // the ledger file, then (under its lock) the key, then the row — so
        // a key seen here with no ledger file seen a moment ago means the
        // file appeared since: read it again.
        let (mut text, mut guard) = read()?;
        let key = load_key(&key_path)?;
        if key.is_some() && guard.is_none() {
            (text, guard) = read()?;
        }
        let _guard = guard;
        check_home_dirs(&[key_path.parent().unwrap_or(Path::new("."))])?;
        check_home_dirs(&[&path, &head_path(&path), &key_path])?;
        let lines = split_lines(&path, &text)?;
        let Some(key) = key else {
            if lines.is_empty() && !head_path(&path).exists() {
                return Ok(Ledger {
                    path,
                    key_path,
                    key: Mutex::new(None),
                    rows: Mutex::new(Vec::new()),
                });
            }
            return Err(FleetError::SigningKeyMissing {
                path: key_path,
                ledger: path,
            }
            .into());
        };
        let vk = key.verifying_key();
        let head = read_head(&path, &vk)?;
        refuse_vanished(&path, &key_path, &lines, head.as_ref())?;
        // Verification is the cost of every ledger read: spread it over the
        // cores, then keep file order (and report the first bad line).
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(lines.len() / 256 + 1);
        let chunk = lines.len().div_ceil(threads.max(1)).max(1);
        type Verified = Result<Vec<(Row, u64, String)>, FleetError>;
        let verified: Vec<Verified> = std::thread::scope(|s| {
            let handles: Vec<_> = lines
                .chunks(chunk)
                .map(|part| {
                    let (path, vk) = (&path, &vk);
                    s.spawn(move || {
                        part.iter()
                            .map(|(n, l)| verify_line(path, *n, l, vk))
                            .collect::<Verified>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("verification thread"))
                .collect()
        });
        let mut rows = Vec::with_capacity(lines.len());
        let mut links = Vec::with_capacity(lines.len());
        for part in verified {
            for (r, seq, prev) in part? {
                rows.push(r);
                links.push((seq, prev));
            }
        }
        check_chain_and_head(&path, &lines, &links, head.as_ref())?;
        if let Some(h) = &head {
            let past = lines.len() as u64 - h.count;
            if past > 0 {
                eprintln!(
                    "saphan: warning: {past} row(s) of {} stand past its signed head (line {}), accepted as a crash between an append and its head write; the next append re-signs the head",
                    path.display(),
                    h.count
                );
            }
        }
        Ok(Ledger {
            path,
            key_path,
            key: Mutex::new(Some(key)),
            rows: Mutex::new(rows),
        })
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sign and append a row, continuing the chain and rewriting the head.
    ///
    /// Under an exclusive lock on the ledger file: read the ledger again
    /// (another process may have appended since [`Ledger::open`]), check its
    /// last line (not torn, signed, at its `seq`) against the signed head,
    /// append the row with the next `seq` and `prev`, write the head.
    pub fn append(&self, row: Row) -> crate::error::Result<()> {
        use std::io::Write;
        check_home_dirs(&ledger_dirs(&self.path))?;
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        }
        // 0600 whatever the umask: the ledger is the operator's alone.
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(io_err("open for append", &self.path))?;
        check_home_dirs(&[&self.path, &head_path(&self.path), &self.key_path])?;
        f.lock().map_err(io_err("lock", &self.path))?;
        // The key is created under the ledger's lock, after the file exists
        // and before the first row, so no reader ever sees a fresh key with
        // no ledger file. A key that was there before this append, with no
        // rows and no head, is a deleted ledger (refused below).
        let (key, key_was_there) = {
            let mut k = self.key.lock().unwrap_or_else(|e| e.into_inner());
            let was = k.is_some() || self.key_path.exists();
            if k.is_none() {
                *k = Some(load_or_create_key(&self.key_path)?);
            }
            (k.clone().expect("key loaded"), was)
        };
        let text = read_all(&mut f, &self.path)?;
        let lines = split_lines(&self.path, &text)?;
        let vk = key.verifying_key();
        check_home_dirs(&[self.key_path.parent().unwrap_or(Path::new("."))])?;
        let head = read_head(&self.path, &vk)?;
        if key_was_there {
            refuse_vanished(&self.path, &self.key_path, &lines, head.as_ref())?;
        }
        // The head must name a prefix of the ledger; every row past it (a
        // crash window) is verified again, chained from the head's hash,
        // before the new head re-signs them.
        check_head_only(&self.path, &lines, head.as_ref())?;
        let (from, mut prev) = match &head {
            Some(h) => (h.count as usize, h.last.clone()),
            None => (0, ZERO_HASH.to_string()),
        };
        for (n, l) in lines.iter().skip(from) {
            let (_, seq, p) = verify_line(&self.path, *n, l, &vk)?;
            let broken = |detail: String| FleetError::LedgerChainBroken {
                path: self.path.clone(),
                line: *n,
                detail,
            };
            if seq != *n as u64 {
                return Err(
                    broken(format!("the row says seq {seq} but stands at line {n}")).into(),
                );
            }
            if p != prev {
                return Err(
                    broken("its `prev` is not the hash of the line before it".into()).into(),
                );
            }
            prev = line_hash(l);
        }
        let (seq, prev) = match lines.last() {
            None => (1, ZERO_HASH.to_string()),
            Some((n, l)) => (*n as u64 + 1, line_hash(l)),
        };
        let line = sign_row(&key, &row, seq, &prev);
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        f.write_all(&buf)
            .and_then(|_| f.sync_data())
            .map_err(io_err("append to", &self.path))?;
        let head = Head {
            count: seq,
            last: line_hash(&line),
        };
        crate::fsutil::atomic_write(&head_path(&self.path), sign_head(&key, &head).as_bytes())?;
        rows.push(row);
        Ok(())
    }
    /// [`Ledger::append`] on a blocking thread: it takes an exclusive file
    /// lock (waiting for another saphan) and fsyncs, which must not stall
    /// the async runtime.
    pub async fn append_off_runtime(
        self: &std::sync::Arc<Self>,
        row: Row,
    ) -> crate::error::Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.append(row))
            .await
            .map_err(|e| {
                crate::error::IoError::Io {
                    action: "append to",
                    path: self.path.clone(),
                    source: std::io::Error::other(e.to_string()),
                }
                .into()
            })
            .and_then(|r| r)
    }

    /// Sign and append a machine's facts.
    pub fn append_facts(&self, facts: MachineFacts) -> crate::error::Result<()> {
        self.append(Row::Machine(facts))
    }

    /// Sign and append a capability row.
    pub fn append_capability(&self, row: CapabilityRow) -> crate::error::Result<()> {
        self.append(Row::Capability(row))
    }

    /// Every verified row, in file order.
    pub fn rows(&self) -> Vec<Row> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The last facts row of `machine`.
    pub fn latest_facts(&self, machine: &str) -> Option<MachineFacts> {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        rows.iter().rev().find_map(|r| match r {
            Row::Machine(f) if f.machine == machine => Some(f.clone()),
            _ => None,
        })
    }

    /// The last capability row of `capability` on `machine`.
    pub fn latest_capability(&self, machine: &str, capability: &str) -> Option<CapabilityRow> {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        rows.iter().rev().find_map(|r| match r {
            Row::Capability(c) if c.machine == machine && c.capability == capability => {
                Some(c.clone())
            }
            _ => None,
        })
    }

    /// The last row of each capability probed on `machine`, by capability name.
    pub fn latest_capabilities(&self, machine: &str) -> Vec<CapabilityRow> {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let mut by: std::collections::BTreeMap<String, CapabilityRow> = Default::default();
        for r in rows.iter() {
            if let Row::Capability(c) = r
                && c.machine == machine
            {
                by.insert(c.capability.clone(), c.clone());
            }
        }
        by.into_values().collect()
    }
}

fn sign_row(key: &SigningKey, row: &Row, seq: u64, prev: &str) -> String {
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

fn verify_line(
    path: &Path,
    line: usize,
    text: &str,
    vk: &VerifyingKey,
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
    if vk.verify(canonical_json(&v).as_bytes(), &sig).is_err() {
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

/// Is a facts row fresh: measured within `window` before `now`?
pub fn facts_fresh(facts: &MachineFacts, now: time::OffsetDateTime, window: Duration) -> bool {
    young(&facts.measured_at, now, window)
}

/// Is a capability row fresh: measured within `window` before `now`, and
/// against `catalog_row` exactly as it is now (its digest matches)?
/// `catalog_row` is the current entry for `row.capability`.
pub fn is_fresh(
    row: &CapabilityRow,
    now: time::OffsetDateTime,
    window: Duration,
    catalog_row: &Capability,
) -> bool {
    young(&row.measured_at, now, window)
        && row.catalog_digest == catalog_row.digest(&row.capability)
}

fn young(measured_at: &str, now: time::OffsetDateTime, window: Duration) -> bool {
    let Some(t) = crate::clock::parse_rfc3339(measured_at) else {
        return false;
    };
    let age = now - t;
    // A row from the future (clock skew) is not trusted as fresh.
    !age.is_negative() && age.unsigned_abs() < window
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(m: &str) -> MachineFacts {
        MachineFacts {
            machine: m.into(),
            measured_at: crate::clock::now_rfc3339_seconds(),
            os: "Linux".into(),
            arch: "x86_64".into(),
            kernel: "6.1".into(),
            distro: Some(OsRelease::parse("ID=debian\nVERSION_ID=\"12\"\n")),
            cpus: Some(2),
            memory_bytes: Some(1 << 30),
            userns: Userns {
                supported: Some(true),
                method: "unshare -U true".into(),
                max_user_namespaces: Some(100),
                unprivileged_userns_clone: None,
            },
            requirements: None,
        }
    }

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        let v: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[{"y":1,"x":"é\n"}],"c":null}}"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"z":[{"x":"é\n","y":1}]},"b":1}"#
        );
    }

    #[test]
    fn sign_verify_tamper_and_key_mode() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let l = Ledger::open(&home).unwrap();
        assert!(!home.signing_key().exists(), "open never creates the key");
        l.append_facts(facts("m0")).unwrap();
        l.append_facts(facts("m1")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.signing_key())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let l = Ledger::open(&home).unwrap();
        assert_eq!(l.latest_facts("m1").unwrap().cpus, Some(2));
        assert!(l.latest_facts("m9").is_none());
        let text = std::fs::read_to_string(home.ledger()).unwrap();
        std::fs::write(home.ledger(), text.replacen("\"cpus\":2", "\"cpus\":64", 1)).unwrap();
        let e = Ledger::open(&home).unwrap_err();
        assert_eq!(e.name(), "ledger-row-tampered");
        assert!(e.line().contains("line 1"), "{}", e.line());
    }

    #[test]
    fn append_reverifies_rows_past_the_head_under_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let l = Ledger::open(&home).unwrap();
        l.append_facts(facts("m0")).unwrap();
        let head1 = std::fs::read(head_path(&home.ledger())).unwrap();
        l.append_facts(facts("m1")).unwrap();
        l.append_facts(facts("m2")).unwrap();
        std::fs::write(head_path(&home.ledger()), &head1).unwrap();
        let l = Ledger::open(&home).unwrap();
        // After open: line 3 replaced by a copy of line 2 (validly signed,
        // wrong place). The append must catch it, not re-sign over it.
        let text = std::fs::read_to_string(home.ledger()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let swapped = format!("{}\n{}\n{}\n", lines[0], lines[1], lines[1]);
        std::fs::write(home.ledger(), &swapped).unwrap();
        let e = l.append_facts(facts("m3")).unwrap_err();
        assert_eq!(e.name(), "ledger-chain-broken");
        assert!(e.line().contains("line 3"), "{}", e.line());
        assert_eq!(std::fs::read_to_string(home.ledger()).unwrap(), swapped);
        assert_eq!(std::fs::read(head_path(&home.ledger())).unwrap(), head1);
        // Intact rows past the head are re-signed into the new head.
        std::fs::write(home.ledger(), &text).unwrap();
        l.append_facts(facts("m3")).unwrap();
        let l = Ledger::open(&home).unwrap();
        assert_eq!(l.rows().len(), 4);
    }

    #[test]
    fn freshness_needs_age_and_catalog_digest() {
        let cat = crate::catalog::Catalog::load(None).unwrap();
        let go = cat.get("go").unwrap();
        let row = CapabilityRow {
            machine: "m0".into(),
            capability: "go".into(),
            inputs: ProbeInputs {
                declared_path: "/usr/bin/go".into(),
                workhome: "/w".into(),
                probed_by: "t".into(),
                workspace: "w".into(),
            },
            outcome: Outcome::Present,
            reason: None,
            reason_detail: None,
            version_output: None,
            detail: Map::new(),
            facts: None,
            measured_at: "2026-01-01T00:00:00Z".into(),
            catalog_digest: go.digest("go"),
            remedy: vec![],
        };
        let t = |s: &str| crate::clock::parse_rfc3339(s).unwrap();
        let day = Duration::from_secs(86400);
        assert!(is_fresh(&row, t("2026-01-01T23:59:00Z"), day, go));
        assert!(!is_fresh(&row, t("2026-01-02T00:00:01Z"), day, go));
        assert!(!is_fresh(&row, t("2025-12-31T00:00:00Z"), day, go));
        let mut changed = go.clone();
        changed.version = vec!["{path}".into(), "env".into()];
        assert!(!is_fresh(&row, t("2026-01-01T01:00:00Z"), day, &changed));
    }
}
