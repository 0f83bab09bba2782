//! Attempt records: append-only JSON Lines in
//! `<git-common-dir>/saphan/attempts.jsonl`, one whole line per attempt
//! (DESIGN §5), the repository-wide lock, and the verified pointer
//! `refs/saphan/verified`.
//!
//! A number nobody measured is never written: `count` and `named_tests`
//! are `"unavailable"` rather than 0 or `[]` when the report kind gives none.

pub mod fields;
pub mod log;
pub mod trunk;
pub mod wait;

pub use fields::{
    ContainerRun, Containment, MachineProgram, Phase, Phases, Shard, Step, StepOutcome, StreamHead,
    SubmoduleAt,
};

use crate::error::{IoError, Refusal};
use crate::git::Repo;
use crate::provision::Placed;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::{Path, PathBuf};

/// The record format version (bumped on any incompatible change).
pub const FORMAT: u32 = 3;

/// The verified pointer.
pub const VERIFIED_REF: &str = "refs/saphan/verified";

/// A value that was measured, or the word `"unavailable"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Avail<T> {
    /// Measured.
    Value(T),
    /// Not measured; serialized as the string `"unavailable"`.
    Unavailable,
}

impl<T: Copy> Avail<T> {
    /// The measured value, if any.
    pub fn value(&self) -> Option<T> {
        match self {
            Avail::Value(v) => Some(*v),
            Avail::Unavailable => None,
        }
    }
}

impl<T> From<Option<T>> for Avail<T> {
    fn from(o: Option<T>) -> Self {
        o.map_or(Avail::Unavailable, Avail::Value)
    }
}

impl<T: Serialize> Serialize for Avail<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Avail::Value(v) => v.serialize(s),
            Avail::Unavailable => s.serialize_str("unavailable"),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Avail<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        if v.as_str() == Some("unavailable") {
            return Ok(Avail::Unavailable);
        }
        T::deserialize(v)
            .map(Avail::Value)
            .map_err(serde::de::Error::custom)
    }
}

/// One attempt (DESIGN §5): the fields every record carries, then the
/// typed fields only some verbs or classes write (verify-union's base and
/// stream heads, a dispatched run's phases …). The keys per verb are pinned
/// by `tests/it/record_fields.rs` against [`FORMAT`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Record format version.
    pub format: u32,
    /// Unique id: `<UTC timestamp>-<8 hex>`.
    pub id: String,
    /// `certify`, `verify-union`, `verify-stream`, `verify-affected`.
    pub verb: String,
    /// Repository top directory.
    pub repo: String,
    /// The full SHA measured.
    pub sha: String,
    /// `local` or a fleet id.
    pub machine: String,
    /// `host` or `container`.
    pub class: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// `green` | `red` | `measurement-failed`.
    pub verdict: crate::report::Verdict,
    /// Why a measurement failed (`timeout`, `interrupted`, `crash`,
    /// `report-no-match`, `connection-lost` …), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<crate::report::FailureKind>,
    /// `config:verify.full` | `default-go` | `config:verify.affected`.
    pub suite_source: String,
    /// Exactly what ran.
    pub suite_argv: Vec<String>,
    /// The report kind.
    pub report: crate::report::ReportKind,
    /// `report_path` as declared (junit-xml), else null.
    pub suite_report_path: Option<String>,
    /// Report files read, sorted.
    pub suite_report_files: Vec<String>,
    /// Tests that ran, or `"unavailable"`.
    pub count: Avail<u64>,
    /// True when the count was derived from testcases (no `tests` attribute).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_derived: bool,
    /// Failing test names in report order, or `"unavailable"`.
    pub named_tests: Avail<Vec<String>>,
    /// The suite's exit code, or null when it did not exit on its own.
    pub suite_exit_code: Option<i32>,
    /// The attempt budget, human form (`10m`).
    pub budget: String,
    /// The attempt budget in seconds.
    pub budget_seconds: f64,
    /// `default` | `config:verify.full.timeout` | `flag:--timeout`.
    pub budget_source: String,
    /// Wall time of the suite run in seconds.
    pub suite_seconds: f64,
    /// Provisioned entries: dest + sha256 of the bytes as placed.
    pub provisions: Vec<Placed>,
    /// Where evidence disagreed or why the measurement failed.
    pub notes: Vec<String>,
    /// The resolved absolute path of the suite's program (`argv[0]`) on the
    /// machine that ran it; null when it could not be resolved. Local runs:
    /// resolved like `execvp` (a relative `./x` against the tree). Dispatched
    /// runs: the capability row's declared path (set by dispatch). Container
    /// class: `argv[0]` as the container's command names it (the image's PATH
    /// resolves a bare name) — never the engine's program.
    #[serde(default)]
    pub program_path: Option<String>,
    /// That program's version output (stdout then stderr, trimmed, at most
    /// 4 KiB): default-go runs `go version`; otherwise the catalog row's
    /// version command when `argv[0]` maps to a row; else null. Container
    /// class: `"unavailable"` — the suite's program is the image's, and its
    /// version is not measured (that would take a second container per
    /// attempt); the engine's is `engine_version`.
    #[serde(default)]
    pub program_version: Option<Avail<String>>,
    /// Path of this attempt's suite log (`<git-common-dir>/saphan/logs/<id>.log`):
    /// the suite's stdout and stderr, bounded (see `measure::LOG_CAP`); null
    /// when none was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_log: Option<String>,
    /// Lowercase hex sha256 of the suite log's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_log_sha256: Option<String>,
    /// What happened to `refs/saphan/verified` (`moved`, `unchanged: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_pointer: Option<String>,
    // The fields below are written only by some verbs or classes; each is
    // absent from the JSON where it is `None` (or empty), and reads back as
    // absent from a record written before it existed.
    /// verify-union: the base the streams were merged onto (a full SHA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Dispatched runs: bytes of the bundle shipped to the machine (0 when
    /// it already had every commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_bytes: Option<u64>,
    /// Container class: what ran the suite (`container`, `docker_api_version`,
    /// `docker_socket`, `image_id`, `image_pin`, `image_pin_kind`,
    /// `network`, flattened into the record).
    #[serde(flatten, default)]
    pub container: Option<ContainerRun>,
    /// Dispatched certify: every machine id of the invocation, in the order
    /// named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_machines: Option<Vec<String>>,
    /// Dispatched runs: Ctrl-C stopped the attempt (written only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Dispatched runs: the program used on the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_program: Option<MachineProgram>,
    /// Dispatched runs: seconds per phase reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// Dispatched runs: the scratch tree's path on the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_tree: Option<String>,
    /// A node borrowed from a Slurm pool: the allocation's job id (the
    /// record's `machine` is `POOL/<node>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<u64>,
    /// Host class: what kept the suite's processes from outliving the
    /// attempt (`cgroup`, `process-group`); absent when the suite
    /// never ran or ran in a container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<Containment>,
    /// How the suite was sealed (`{"state": "sealed", "tool":
    /// "/usr/bin/bwrap"}`, `{"state": "unsealed", "why": …}`, `{"state":
    /// "off", "why": …}`; the container class: `"tool": "container"`);
    /// absent when the suite never ran (format 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<crate::seal::Seal>,
    /// verify-stream: the step budget, human form (`10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_budget: Option<String>,
    /// verify-stream: the step budget in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_budget_seconds: Option<f64>,
    /// verify-stream: where the step budget came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_budget_source: Option<String>,
    /// verify-stream: every step as it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
    /// verify-stream: the stream's name, when the tree is a stream's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// verify-union: the streams merged, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<Vec<StreamHead>>,
    /// Submodules checked out at their gitlinks (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub submodules: Vec<SubmoduleAt>,
    /// certify (local and dispatched): the ref the verified pointer follows,
    /// `Some(None)` (JSON `null`) when none is known; `None` (absent) for
    /// verbs that never move the pointer.
    #[serde(
        default,
        deserialize_with = "fields::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub trunk: Option<Option<String>>,
    /// verify-union: the union commit measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub union: Option<String>,
    /// `certify --split`: which shard of the invocation this record is
    /// (format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Dispatched go-test-json runs: seconds per package, from the
    /// package-level terminal events' `Elapsed` (what the next
    /// `certify --split` balances by; format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_seconds: Option<std::collections::BTreeMap<String, f64>>,
    /// Failover: the id of the attempt this one re-runs (format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
}

impl Record {
    /// The count as a person reads it (`1 test`, `count: unavailable`).
    pub fn count_words(&self) -> String {
        crate::report::count_words(self.count.value())
    }
}

/// Errors of the record store.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Ctrl-C while waiting for the repository lock.
    #[error(
        "interrupted while waiting for {lock} (another certification of this repository holds it) — nothing was measured; re-run when it is done"
    )]
    Interrupted { lock: PathBuf },
    /// No record with that id (or id prefix, or `last` in an empty file).
    #[error("no record with id {id} in {path} — `saphan records` lists the ids")]
    NotFound { id: String, path: PathBuf },
    /// An id prefix that more than one record's id starts with.
    #[error(
        "{prefix} is the start of {count} record ids: {} — give more of the id",
        candidates.join(", ")
    )]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// How many ids it starts.
        count: usize,
        /// Every id it starts (at most [`AMBIGUOUS_SHOWN`], then `…`).
        candidates: Vec<String>,
    },
}

/// How many candidates an ambiguous id prefix names.
pub const AMBIGUOUS_SHOWN: usize = 10;

/// The word `records show` takes for the newest record.
pub const LAST: &str = "last";

/// The record `id` names among `records` (in file order, oldest first):
/// the record with exactly that id; `last`, the newest (the file's last
/// record); else the one record whose id starts with `id`, as git takes a
/// unique prefix of an object name.
///
/// Errors: [`RecordError::NotFound`] (nothing matches, an empty `id`, or
/// `last` with no record), [`RecordError::Ambiguous`] naming the ids a
/// prefix starts.
pub fn find<'a>(records: &'a [Record], id: &str, path: &Path) -> Result<&'a Record, RecordError> {
    let not_found = || RecordError::NotFound {
        id: id.to_string(),
        path: path.to_path_buf(),
    };
    if let Some(r) = records.iter().find(|r| r.id == id) {
        return Ok(r);
    }
    if id == LAST {
        return records.last().ok_or_else(not_found);
    }
    if id.is_empty() {
        return Err(not_found());
    }
    let mut matching = records.iter().filter(|r| r.id.starts_with(id));
    match (matching.next(), matching.next()) {
        (None, _) => Err(not_found()),
        (Some(r), None) => Ok(r),
        (Some(a), Some(b)) => {
            let mut candidates: Vec<String> = vec![a.id.clone(), b.id.clone()];
            candidates.extend(matching.map(|r| r.id.clone()));
            let count = candidates.len();
            if count > AMBIGUOUS_SHOWN {
                let more = count - AMBIGUOUS_SHOWN;
                candidates.truncate(AMBIGUOUS_SHOWN);
                candidates.push(format!("… and {more} more"));
            }
            Err(RecordError::Ambiguous {
                prefix: id.to_string(),
                count,
                candidates,
            })
        }
    }
}

impl Refusal for RecordError {
    fn name(&self) -> &'static str {
        match self {
            RecordError::NotFound { .. } => "record-not-found",
            RecordError::Ambiguous { .. } => "record-id-ambiguous",
            RecordError::Interrupted { .. } => "interrupted",
        }
    }
    fn failure_kind(&self) -> Option<crate::outcome::FailureKind> {
        match self {
            RecordError::Interrupted { .. } => Some(crate::outcome::FailureKind::Interrupted),
            RecordError::NotFound { .. } | RecordError::Ambiguous { .. } => None,
        }
    }
}

/// `<common>/saphan/attempts.jsonl`.
pub fn attempts_path(repo: &Repo) -> PathBuf {
    repo.state_dir().join("attempts.jsonl")
}

/// A fresh record id: `20261129T153000Z-1a2b3c4d`.
pub fn new_id() -> String {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    format!("{}-{}", crate::clock::now_compact(), hex::encode(b))
}

/// The longest line of the attempts file a reader holds (1 MiB): a longer
/// one is no record saphan wrote (its records are a few KiB), so it is
/// skipped and named, read through in bounded chunks, never held whole.
pub const LINE_CAP: usize = 1 << 20;

/// The trusted root of the attempts file `path`
/// (`<common>/saphan/attempts.jsonl` → `<common>`): the state directory and
/// the files in it are opened below it without following a symlink
/// ([`crate::fsutil::open_state`]).
fn state_root(path: &Path) -> &Path {
    path.parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"))
}

/// Append one record as one whole line of its own, whatever the file
/// already holds. When `check` finds lines no reader takes (not UTF-8,
/// longer than [`LINE_CAP`], a last line without its newline), the record
/// says so in a note — once: the next check finds the file as this append
/// left it — and goes on a line of its own; the measurement is recorded
/// all the same (every reader skips those lines by name).
///
/// Errors: the file cannot be opened or written ([`IoError::Io`]), or a
/// symlink stands at `saphan/` or the file ([`IoError::Symlink`]).
pub fn append(path: &Path, rec: &Record) -> Result<(), crate::error::Error> {
    let (checked, found) = check(path)?;
    let line = if found.is_empty() {
        serde_json::to_string(rec).expect("records serialize")
    } else {
        let mut rec = rec.clone();
        rec.notes.extend(found);
        serde_json::to_string(&rec).expect("records serialize")
    };
    append_checked(path, &line, checked)
}

/// One serialized record appended, after [`check`] (its findings are not
/// noted: for the tests of the cache).
#[cfg(test)]
fn append_line(path: &Path, line: &str) -> Result<(), crate::error::Error> {
    let (checked, _) = check(path)?;
    append_checked(path, line, checked)
}

/// Append `line` to `path`, which [`check`] read as `checked`, and
/// remember the result checked when nothing else wrote the file in between.
fn append_checked(path: &Path, line: &str, checked: Checked) -> Result<(), crate::error::Error> {
    let seen = crate::fsutil::append_line_seen(state_root(path), path, line)?;
    // Remembered only when the file, seen through the append's own
    // descriptor, was the checked file just before the write (same stat, or
    // still empty where there was none) and grew by exactly the bytes
    // written: then nothing else touched it between the check and the
    // write's own stat.
    let was_checked = match &checked {
        Checked::Absent => seen.before.len() == 0,
        Checked::Read(id) => *id == stat_identity(&seen.before),
        Checked::Unvouched => false,
    };
    if was_checked && seen.after.len() == seen.before.len() + seen.written {
        remember_checked(path, &seen.after);
    }
    Ok(())
}

/// [`append`] on a blocking thread (the append locks and fsyncs the file).
pub async fn append_off_runtime(path: &Path, rec: &Record) -> Result<(), crate::error::Error> {
    let rec = rec.clone();
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || append(&p, &rec))
        .await
        .unwrap_or_else(|e| {
            Err(IoError::Io {
                action: "append to",
                path: path.to_path_buf(),
                source: std::io::Error::other(e.to_string()),
            }
            .into())
        })
}

/// One line of the attempts file as [`each_line`] hands it over.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole UTF-8 line (its newline and a trailing `\r` cut).
    Text(&'a str),
    /// A byte inside it is not UTF-8: at this 1-based offset.
    NotUtf8 { byte: usize },
    /// It ends inside a character: what a torn append leaves.
    Torn,
    /// Longer than [`LINE_CAP`]: this many bytes, not held.
    TooLong { bytes: u64 },
}

impl Line<'_> {
    /// Why a reader skips this line, in words (`None` for text).
    pub fn why_skipped(&self) -> Option<String> {
        match self {
            Line::Text(_) => None,
            Line::NotUtf8 { byte } => Some(format!("not UTF-8 (byte {byte} of the line)")),
            Line::Torn => Some("a torn write: it ends inside a character".into()),
            Line::TooLong { bytes } => Some(format!(
                "{bytes} bytes long, past the {} MiB a record can take",
                LINE_CAP >> 20
            )),
        }
    }
}

/// Read the attempts file `path` line by line (opened without following a
/// symlink, [`crate::fsutil::open_state`]), handing `f` each line's 1-based
/// number and what it is ([`Line`]); at most [`LINE_CAP`] bytes of a line
/// are ever held. Returns the bytes read and whether the last line ended
/// in its newline (`true` for an empty or missing file). A missing file is
/// no lines.
///
/// Errors: the file cannot be read ([`IoError::Io`]); a symlink
/// ([`IoError::Symlink`]).
pub fn each_line(
    path: &Path,
    mut f: impl FnMut(usize, Line<'_>),
) -> Result<(u64, bool), crate::error::Error> {
    use std::io::BufRead;
    let Some(file) =
        crate::fsutil::open_state(state_root(path), path, crate::fsutil::StateOpen::Read)?
    else {
        return Ok((0, true));
    };
    let read_err = |source| IoError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let mut r = std::io::BufReader::with_capacity(64 * 1024, file);
    let (mut n, mut total, mut ended) = (0usize, 0u64, true);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        buf.clear();
        let mut len = 0u64;
        let mut newline = false;
        loop {
            let chunk = r.fill_buf().map_err(read_err)?;
            if chunk.is_empty() {
                break;
            }
            let (take, nl) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let body = if nl { &chunk[..take - 1] } else { chunk };
            len += body.len() as u64;
            if buf.len() + body.len() <= LINE_CAP {
                buf.extend_from_slice(body);
            } else {
                buf.clear();
            }
            r.consume(take);
            if nl {
                newline = true;
                break;
            }
        }
        if len == 0 && !newline {
            break;
        }
        n += 1;
        total += len + u64::from(newline);
        ended = newline;
        let line = if len > LINE_CAP as u64 {
            Line::TooLong { bytes: len }
        } else {
            let l = buf.strip_suffix(b"\r").unwrap_or(&buf);
            match std::str::from_utf8(l) {
                Ok(t) => Line::Text(t),
                Err(e) if e.error_len().is_none() => Line::Torn,
                Err(e) => Line::NotUtf8 {
                    byte: e.valid_up_to() + 1,
                },
            }
        };
        f(n, line);
    }
    Ok((total, ended))
}

/// What a certify checks before it measures: that the attempts file, the
/// state directory and `logs/` can be opened as saphan's own (no symlink
/// at any of them: [`IoError::Symlink`], refused by name before anything
/// runs). Damage inside the file refuses nothing ([`append`] notes it).
///
/// The file is read through only when it is not, by its `stat`, the file
/// the last check or append here left checked: same device and inode,
/// size, modification and status-change times (nanoseconds), as kept in
/// `attempts.checked` beside it ([`checked_path`]). Any other writer — an
/// edit, a copy over it, an append by another program — changes one of
/// them (the status-change time cannot be set back), so a check costs one
/// `stat` and one small read, not the file's whole history, while the file
/// is saphan's alone. An append remembers its result only when the file,
/// `fstat`ed through its own descriptor just before and just after its
/// write, was the checked file and grew by exactly what it wrote. What is
/// left unseen: a same-size rewrite between that write and its `fstat`
/// (microseconds), or within the kernel's timestamp tick (a few
/// milliseconds) after it on kernels before Linux 6.13, whose multigrain
/// timestamps give a file whose times were just read a fine-grained time on
/// its next change (on filesystems that opt in, ext4, xfs, btrfs, tmpfs).
///
/// Errors: [`IoError::Symlink`]; [`IoError::Io`] when a state path cannot
/// be read.
pub fn check_appendable(path: &Path) -> Result<(), crate::error::Error> {
    let logs = path.with_file_name("logs");
    if std::fs::symlink_metadata(&logs).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(IoError::Symlink { path: logs }.into());
    }
    check(path).map(drop)
}

/// What [`check`] found the file to be.
#[derive(Debug)]
enum Checked {
    /// No file.
    Absent,
    /// The file with this [`stat_identity`], read through (or known so
    /// from `attempts.checked`).
    Read(String),
    /// The file as read, which changed while it was read: nothing to vouch
    /// for, so the append after it remembers nothing.
    Unvouched,
}

/// [`check_appendable`], saying what it found: how the file stands, and —
/// when it was read through — the notes an append adds for lines no reader
/// takes (`attempts.jsonl:2 is not UTF-8 (byte 9 of the line) — skipped by
/// every reader; this record starts a line of its own`).
fn check(path: &Path) -> Result<(Checked, Vec<String>), crate::error::Error> {
    let root = state_root(path);
    let Some(f) = crate::fsutil::open_state(root, path, crate::fsutil::StateOpen::Read)? else {
        return Ok((Checked::Absent, Vec::new()));
    };
    let stat_err = |source| IoError::Io {
        action: "stat",
        path: path.to_path_buf(),
        source,
    };
    let before = f.metadata().map_err(stat_err)?;
    drop(f);
    let identity = stat_identity(&before);
    let cached =
        crate::fsutil::open_state(root, &checked_path(path), crate::fsutil::StateOpen::Read)
            .ok()
            .flatten()
            .and_then(|mut c| {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut c, &mut s).ok()?;
                Some(s)
            });
    if cached.as_deref() == Some(identity.as_str()) {
        return Ok((Checked::Read(identity), Vec::new()));
    }
    let shown = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut found = Vec::new();
    let mut last_noted = false;
    let (bytes, ended) = each_line(path, |n, l| {
        last_noted = false;
        if let Some(why) = l.why_skipped() {
            found.push(format!(
                "{shown}:{n} is {why} — skipped by every reader; this record starts a line of its own"
            ));
            last_noted = true;
        }
    })?;
    if !ended && !last_noted {
        found.push(format!(
            "{shown} did not end in a newline — this record starts a line of its own"
        ));
    }
    // Remembered only when nothing changed while it was read, and only
    // when nothing was found: what was found is noted by the append that
    // follows, which then remembers the file as it left it.
    match crate::fsutil::open_state(root, path, crate::fsutil::StateOpen::Read)
        .ok()
        .flatten()
        .and_then(|f| f.metadata().ok())
    {
        Some(after) if stat_identity(&after) == identity && after.len() == bytes => {
            if found.is_empty() {
                remember_checked(path, &after);
            }
            Ok((Checked::Read(identity), found))
        }
        _ => Ok((Checked::Unvouched, found)),
    }
}

/// `attempts.checked` beside the attempts file: the `stat` identity of the
/// attempts file as it was last read through ([`check_appendable`]). A
/// cache only: missing, torn or stale, the next check reads the file.
pub fn checked_path(path: &Path) -> PathBuf {
    path.with_extension("checked")
}

/// One line: device, inode, size, mtime and ctime (seconds.nanoseconds).
fn stat_identity(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{} {} {} {}.{:09} {}.{:09}\n",
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
}

/// Keep `meta` as the checked state of `path`, best effort (a failed write
/// only means the next check reads the file), never through a symlink.
fn remember_checked(path: &Path, meta: &std::fs::Metadata) {
    if let Ok(Some(mut f)) = crate::fsutil::open_state(
        state_root(path),
        &checked_path(path),
        crate::fsutil::StateOpen::Replace,
    ) {
        let _ = std::io::Write::write_all(&mut f, stat_identity(meta).as_bytes());
    }
}

/// What `attempts.jsonl` holds: the whole records in append order, and the
/// 1-based numbers of lines that are not records (a torn write, a hand
/// edit, bytes that are not UTF-8, a line past [`LINE_CAP`]) — kept apart
/// so one bad line never hides every good one.
#[derive(Debug, Default)]
pub struct Attempts {
    /// Whole records, in append order.
    pub records: Vec<Record>,
    /// Lines that did not parse, with why.
    pub corrupt: Vec<(usize, String)>,
}

/// Read `path` (a missing file is empty), one bounded line at a time
/// ([`each_line`]): a line that is not a record is skipped and named in
/// [`Attempts::corrupt`], never fatal.
///
/// Errors: the file cannot be read at all; [`IoError::Symlink`].
pub fn read_all(path: &Path) -> Result<Attempts, crate::error::Error> {
    let mut out = Attempts::default();
    each_line(path, |n, l| match l {
        Line::Text(t) if t.trim().is_empty() => {}
        Line::Text(t) => match serde_json::from_str::<Record>(t) {
            Ok(r) => out.records.push(r),
            Err(e) => out.corrupt.push((n, e.to_string())),
        },
        other => out
            .corrupt
            .push((n, other.why_skipped().unwrap_or_default())),
    })?;
    Ok(out)
}

/// The repository-wide lock (`<common>/saphan/lock`), held until dropped.
/// Its holder is written beside it (`<common>/saphan/lock.holder`,
/// [`wait::Holder`]) for a waiter to name; the next holder writes itself
/// over it.
#[derive(Debug)]
pub struct Lock {
    _file: std::fs::File,
}

impl Lock {
    /// Take the lock for `verb`, waiting for any other holder (off the
    /// async runtime). A free lock is taken at once, even when Ctrl-C was
    /// already pressed; Ctrl-C (or SIGTERM/SIGHUP) while waiting gives up:
    /// [`RecordError::Interrupted`], nothing measured, nothing written.
    /// While it waits, `on_wait` hears a [`wait::LockWait`] at once and
    /// every [`wait::NOTE_EVERY`] — who holds the lock, as its holder wrote
    /// it down, and since when. Once taken, this process is written down
    /// as its holder.
    pub async fn acquire(
        repo: &Repo,
        interrupt: &crate::cancel::Token,
        verb: &str,
        on_wait: wait::OnWait<'_>,
    ) -> Result<Lock, crate::error::Error> {
        let path = repo.state_dir().join("lock");
        let root = repo.common_dir.clone();
        let shown = path.clone();
        let holder_path = repo.state_dir().join("lock.holder");
        let open_root = root.clone();
        let open = tokio::task::spawn_blocking(move || {
            // Never through a symlink a suite put at `saphan/` or `lock`.
            let f = crate::fsutil::open_state(&open_root, &path, crate::fsutil::StateOpen::Write)?
                .expect("a write creates the lock file");
            match f.try_lock() {
                Ok(()) => Ok::<_, IoError>((f, true, path)),
                Err(std::fs::TryLockError::WouldBlock) => Ok((f, false, path)),
                Err(std::fs::TryLockError::Error(source)) => Err(IoError::Io {
                    action: "lock",
                    path: path.clone(),
                    source,
                }),
            }
        });
        let (f, held, path) = open.await.expect("lock task does not panic")?;
        let f = if held {
            f
        } else {
            let wait = tokio::task::spawn_blocking(move || {
                f.lock().map_err(|source| IoError::Io {
                    action: "lock",
                    path: path.clone(),
                    source,
                })?;
                Ok::<_, IoError>(f)
            });
            tokio::pin!(wait);
            let started = std::time::Instant::now();
            let said = |root: &Path, holder: &Path| {
                on_wait(&wait::LockWait {
                    lock: format!("the repository lock {}", shown.display()),
                    holder: read_holder(root, holder),
                    waited: started.elapsed(),
                })
            };
            said(&root, &holder_path);
            loop {
                tokio::select! {
                    got = &mut wait => break got.expect("lock task does not panic")?,
                    _ = interrupt.cancelled() => {
                        return Err(RecordError::Interrupted { lock: shown }.into())
                    }
                    _ = tokio::time::sleep(wait::NOTE_EVERY) => said(&root, &holder_path),
                }
            }
        };
        let me = wait::Holder::me(verb);
        let line = format!(
            "{}\n",
            serde_json::to_string(&me).expect("a holder serializes")
        );
        if let Err(e) = crate::fsutil::write_state(&root, &holder_path, line.as_bytes()) {
            // Only a waiter's words depend on it.
            tracing::debug!(error = %e, "could not write the lock's holder");
        }
        Ok(Lock { _file: f })
    }
}

/// The holder written beside the repository lock, if one is readable
/// (never through a symlink).
fn read_holder(root: &Path, holder: &Path) -> Option<wait::Holder> {
    use std::io::Read;
    let f = crate::fsutil::open_state(root, holder, crate::fsutil::StateOpen::Read).ok()??;
    let mut s = String::new();
    f.take(wait::HOLDER_MAX as u64 + 1)
        .read_to_string(&mut s)
        .ok()?;
    wait::Holder::parse(&s)
}

/// The trunk the verified pointer follows: `explicit` (a ref or branch the
/// operator named with `--trunk`), else the branch `refs/remotes/origin/HEAD`
/// points at, else the branch checked out in the main worktree. `None`
/// when none of these exists (a detached main worktree, no origin).
///
/// Errors: [`crate::git::GitError::NotABranch`] when `explicit` is not a
/// local or remote-tracking branch. The full ref name is returned (and
/// recorded), not what was typed.
pub async fn trunk_ref(
    repo: &Repo,
    explicit: Option<&str>,
) -> Result<Option<String>, crate::git::GitError> {
    Ok(trunk_ref_from(repo, explicit).await?.map(|(r, _)| r))
}

/// How [`trunk_ref`] chose the trunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrunkFrom {
    /// `--trunk`.
    Named,
    /// The branch `refs/remotes/origin/HEAD` points at.
    OriginHead,
    /// The branch checked out in the main worktree (no `origin/HEAD`).
    CheckedOut,
}

/// [`trunk_ref`], and how it chose.
///
/// Errors: as [`trunk_ref`].
pub async fn trunk_ref_from(
    repo: &Repo,
    explicit: Option<&str>,
) -> Result<Option<(String, TrunkFrom)>, crate::git::GitError> {
    if let Some(r) = explicit {
        // A trunk is a branch: a local one or a remote-tracking one, named
        // by its short or full name — never a tag, HEAD or a bare SHA, and
        // a local branch wins over a same-named tag.
        let candidates: Vec<String> =
            if r.starts_with("refs/heads/") || r.starts_with("refs/remotes/") {
                vec![r.to_string()]
            } else {
                vec![format!("refs/heads/{r}"), format!("refs/remotes/{r}")]
            };
        for c in candidates {
            if repo.read_ref(&c).await?.is_some() {
                return Ok(Some((c, TrunkFrom::Named)));
            }
        }
        return Err(crate::git::GitError::NotABranch { rev: r.to_string() });
    }
    let gd = format!("--git-dir={}", repo.common_dir.display());
    for (args, from) in [
        (
            vec![
                gd.as_str(),
                "symbolic-ref",
                "-q",
                "refs/remotes/origin/HEAD",
            ],
            TrunkFrom::OriginHead,
        ),
        (
            vec![gd.as_str(), "symbolic-ref", "-q", "HEAD"],
            TrunkFrom::CheckedOut,
        ),
    ] {
        if let Ok(o) = crate::git::git(&repo.top, &args).await {
            let r = o.stdout_str();
            if !r.is_empty() && repo.read_ref(&r).await?.is_some() {
                return Ok(Some((r, from)));
            }
        }
    }
    Ok(None)
}

/// What happened to `refs/saphan/verified` at the end of a certification.
/// Rendered (and serialized, as `verified_pointer`) in the words an
/// operator reads: `moved`, or `unchanged: <why>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointerOutcome {
    /// It now points at the certified SHA.
    Moved,
    /// It stayed where it was, for this reason.
    Unchanged(Unmoved),
}

/// Why the verified pointer did not move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmoved {
    /// No trunk is known (no origin/HEAD, a detached main worktree).
    NoTrunk,
    /// The trunk ref does not exist.
    TrunkAbsent {
        /// The trunk's full ref name.
        trunk: String,
    },
    /// The SHA is not on the trunk.
    NotOnTrunk {
        /// The SHA certified.
        sha: String,
        /// The trunk's full ref name.
        trunk: String,
        /// The trunk's tip.
        tip: String,
    },
    /// The pointer is at this SHA already.
    AlreadyHere,
    /// The pointer is at a trunk commit that is not an ancestor of the SHA.
    NotForward {
        /// Where the pointer is.
        at: String,
    },
    /// The pointer is at a commit that is not on the trunk.
    PointerOffTrunk {
        /// Where the pointer is.
        at: String,
        /// The trunk's full ref name.
        trunk: String,
        /// The SHA certified.
        sha: String,
    },
    /// Every compare-and-swap lost to another writer.
    Contended {
        /// How many swaps were tried.
        tries: usize,
    },
    /// A green that ran 0 tests on this machine.
    ZeroTests,
    /// A green that ran 0 tests on some named machine.
    ZeroTestsOnSomeMachine,
    /// The SHA is not green here.
    NotGreen {
        /// The SHA certified.
        sha: String,
    },
    /// The SHA is not green on every named machine (they agree).
    NotGreenOnEveryMachine {
        /// The SHA certified.
        sha: String,
    },
    /// `--machine @admitted`: the SHA is not green on every admitted
    /// machine that answered (they agree).
    NotGreenOnEveryAdmitted {
        /// The SHA certified.
        sha: String,
    },
    /// The machines disagree (`green on m0, red on m1`).
    MachinesDisagree {
        /// Who said what.
        disagreement: String,
    },
    /// Ctrl-C while waiting for the repository lock to move it.
    Interrupted,
    /// git could not write the pointer (a stale `refs/saphan/verified.lock`,
    /// a ref in the way, a read-only git dir); `detail` is git's first line.
    WriteFailed {
        /// What git said.
        detail: String,
    },
    /// The pointer is a symbolic ref (to `target`): it follows that ref
    /// instead of standing on a verified SHA, so it is neither trusted nor
    /// moved (moving it would move `target`).
    Symbolic {
        /// The ref it names.
        target: String,
    },
    /// Under the lock, the pointer was found following another trunk
    /// (another certification, racing this one, moved it first).
    FollowsAnotherTrunk {
        /// The trunk this certification judged along.
        trunk: String,
        /// The trunk the pointer follows.
        follows: String,
    },
    /// `certify --split`: some shard is not green (or coverage is not
    /// proven).
    NotGreenOnEveryShard {
        /// The SHA certified.
        sha: String,
    },
    /// `certify --split` of a suite saphan cannot split itself (the
    /// suite's own splitter chose the tests, so no coverage is proven).
    Advisory,
}

impl PointerOutcome {
    /// True when the pointer moved.
    pub fn moved(&self) -> bool {
        matches!(self, PointerOutcome::Moved)
    }
}

impl std::fmt::Display for PointerOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PointerOutcome::Moved => f.write_str("moved"),
            PointerOutcome::Unchanged(why) => write!(f, "unchanged: {why}"),
        }
    }
}

impl std::fmt::Display for Unmoved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmoved::NoTrunk => f.write_str(
                "no trunk is known (no origin/HEAD and the main worktree is detached) — pass --trunk REF",
            ),
            Unmoved::TrunkAbsent { trunk } => write!(f, "trunk {trunk} does not exist"),
            Unmoved::NotOnTrunk { sha, trunk, tip } => {
                write!(f, "{sha} is not on trunk {trunk} (tip {tip})")
            }
            Unmoved::AlreadyHere => f.write_str("already at this SHA"),
            Unmoved::NotForward { at } => write!(
                f,
                "the pointer is at {at}, which is not an ancestor of this SHA (it only moves forward)"
            ),
            Unmoved::PointerOffTrunk { at, trunk, sha } => write!(
                f,
                "the pointer is at {at}, which is not on trunk {trunk} (trunk's history was rewritten, or another trunk is named now) — after checking, move it by hand: git update-ref {VERIFIED_REF} {sha}"
            ),
            Unmoved::Contended { tries } => write!(
                f,
                "{VERIFIED_REF} kept moving under this run ({tries} compare-and-swap attempts lost) — another writer is moving it; certify again when it is done"
            ),
            Unmoved::ZeroTests => f.write_str(
                "the suite ran 0 tests — a green that tested nothing does not verify the SHA",
            ),
            Unmoved::ZeroTestsOnSomeMachine => f.write_str(
                "the suite ran 0 tests on some machine — a green that tested nothing does not verify the SHA",
            ),
            Unmoved::NotGreen { sha } => write!(f, "{sha} is not green"),
            Unmoved::NotGreenOnEveryMachine { sha } => {
                write!(f, "{sha} is not green on every named machine")
            }
            Unmoved::NotGreenOnEveryAdmitted { sha } => {
                write!(f, "{sha} is not green on the admitted machines that answered")
            }
            Unmoved::MachinesDisagree { disagreement } => {
                write!(f, "the machines disagree ({disagreement})")
            }
            Unmoved::NotGreenOnEveryShard { sha } => write!(
                f,
                "{sha} is not green on every shard, or the shards did not cover every package"
            ),
            Unmoved::Advisory => f.write_str(
                "advisory: the suite split itself by SAPHAN_SHARD_INDEX/SAPHAN_SHARD_COUNT, so saphan cannot prove the shards ran the whole suite — certify without --split to move it",
            ),
            Unmoved::Interrupted => f.write_str(
                "interrupted while waiting for the repository lock to move it — the records are appended; certify again to move it",
            ),
            Unmoved::WriteFailed { detail } => write!(
                f,
                "git could not write {VERIFIED_REF} ({detail}) — the record is appended; fix what git names (a stale {VERIFIED_REF}.lock: remove it once no git runs) and certify again"
            ),
            Unmoved::Symbolic { target } => write!(
                f,
                "{VERIFIED_REF} is a symbolic ref to {target}, so it follows that ref instead of a verified SHA — delete it (git update-ref --no-deref -d {VERIFIED_REF}) and certify again"
            ),
            Unmoved::FollowsAnotherTrunk { trunk, follows } => write!(
                f,
                "the pointer follows {follows}, not {trunk} (another certification moved it first) — certify with --trunk {follows}"
            ),
        }
    }
}

impl Serialize for PointerOutcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Move `refs/saphan/verified` to the green `sha` — only along `trunk`:
/// `sha` must be on trunk (an ancestor of, or equal to, its tip), and the
/// pointer only moves forward (it must be unset or an ancestor of `sha`).
/// The move is a compare-and-swap against the value the rules were judged
/// on (`git update-ref refs/saphan/verified NEW OLD`, OLD the zero OID when
/// unset); when another writer moved it in between, the rules are judged
/// again on the new value. Callers hold the repository's [`Lock`]
/// ([`crate::measure::conclude`]), so the swap only loses to a writer that
/// does not (an older saphan, a hand-made `git update-ref`).
/// Returns what happened, for the operator.
///
/// `read` is the pointer and the trunk's tip as the caller read them under
/// the same lock (this machine's bench reads them once the suite has ended,
/// for its pointer guard): the first judgement uses them instead of asking
/// git again; a read of another trunk is ignored.
pub async fn advance_verified(
    repo: &Repo,
    sha: &str,
    trunk: Option<&str>,
    read: Option<PointerRead>,
) -> Result<PointerOutcome, crate::git::GitError> {
    const TRIES: usize = 3;
    let mut read = read.filter(|r| r.trunk.as_deref() == trunk);
    for _ in 0..TRIES {
        let old = match judge_move(repo, sha, trunk, read.take()).await? {
            Move::Unchanged(why) => return Ok(PointerOutcome::Unchanged(why)),
            Move::From(old) => old,
        };
        let expected = old.clone().unwrap_or_else(|| "0".repeat(sha.len()));
        let swapped =
            write_pointer(repo, Some(sha), Some(&expected), "saphan certify: green").await;
        match swapped {
            Ok(_) => return Ok(PointerOutcome::Moved),
            // Lost the swap: someone moved it since it was read. Judge again.
            Err(_) if repo.read_ref(VERIFIED_REF).await? != old => continue,
            // git could not write it (a stale `.lock`, a ref in the way, a
            // read-only git dir): the records stand, the pointer stays.
            Err(e) => {
                return Ok(PointerOutcome::Unchanged(Unmoved::WriteFailed {
                    detail: e.first_line(),
                }));
            }
        }
    }
    Ok(PointerOutcome::Unchanged(Unmoved::Contended {
        tries: TRIES,
    }))
}

/// The verified pointer and, when a trunk is asked for, its tip
/// ([`read_pointer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerRead {
    /// The trunk asked for (`None`: none; then `tip` is `None`).
    pub trunk: Option<String>,
    /// The trunk's tip; `None` when it does not exist (or none was asked for).
    pub tip: Option<String>,
    /// The object `refs/saphan/verified` points at; `None` when unset.
    pub pointer: Option<String>,
    /// The ref `refs/saphan/verified` names when it is a symbolic ref
    /// (`git symbolic-ref`): it would then follow that ref instead of
    /// standing on a verified SHA. `None` for the plain ref saphan writes.
    pub symref: Option<String>,
}

/// Read the verified pointer (its object, and its target when it is a
/// symbolic ref) and `trunk`'s tip in one `git for-each-ref`
/// ([`Repo::read_refs`]).
///
/// Errors: git failures other than a ref being absent.
pub async fn read_pointer(
    repo: &Repo,
    trunk: Option<&str>,
) -> Result<PointerRead, crate::git::GitError> {
    let (pointer, tip) = match trunk {
        None => {
            let [pointer] = repo.read_refs([VERIFIED_REF]).await?;
            (pointer, None)
        }
        Some(t) => {
            let [pointer, tip] = repo.read_refs([VERIFIED_REF, t]).await?;
            (pointer, tip)
        }
    };
    Ok(PointerRead {
        trunk: trunk.map(str::to_string),
        tip: tip.map(|t| t.oid),
        symref: pointer.as_ref().and_then(|p| p.symref.clone()),
        pointer: pointer.map(|p| p.oid),
    })
}

/// Write the verified pointer — to `to`, or delete it when `None` — with a
/// reflog `msg`, only if it still is `expected` (a compare-and-swap; `None`:
/// whatever it is now). Always `--no-deref`: a symbolic pointer is replaced
/// itself, and the ref it names never moves. Every write of the pointer
/// goes through here.
///
/// Errors: git refused (the swap lost, a `.lock` in the way, …).
pub async fn write_pointer(
    repo: &Repo,
    to: Option<&str>,
    expected: Option<&str>,
    msg: &str,
) -> Result<(), crate::git::GitError> {
    let mut args = vec!["update-ref", "--no-deref", "-m", msg];
    match to {
        Some(sha) => args.extend([VERIFIED_REF, sha]),
        None => args.extend(["-d", VERIFIED_REF]),
    }
    args.extend(expected);
    crate::git::git(&repo.top, &args).await.map(drop)
}

/// What the pointer rules say about moving to `sha`.
enum Move {
    /// Leave it, for this reason.
    Unchanged(Unmoved),
    /// Move it from this value (`None`: unset).
    From(Option<String>),
}

async fn judge_move(
    repo: &Repo,
    sha: &str,
    trunk: Option<&str>,
    read: Option<PointerRead>,
) -> Result<Move, crate::git::GitError> {
    let is_ancestor = |a: String, b: String| async move {
        crate::git::git(&repo.top, &["merge-base", "--is-ancestor", &a, &b])
            .await
            .is_ok()
    };
    let Some(trunk) = trunk else {
        return Ok(Move::Unchanged(Unmoved::NoTrunk));
    };
    // The trunk's tip and the pointer, read in one call (or given).
    let PointerRead {
        tip,
        pointer,
        symref,
        ..
    } = match read {
        Some(r) => r,
        None => read_pointer(repo, Some(trunk)).await?,
    };
    // A symbolic pointer follows another ref: it verifies nothing, and
    // moving it would move that ref. It is left for the operator.
    if let Some(target) = symref {
        return Ok(Move::Unchanged(Unmoved::Symbolic { target }));
    }
    let Some(tip) = tip else {
        return Ok(Move::Unchanged(Unmoved::TrunkAbsent {
            trunk: trunk.to_string(),
        }));
    };
    // A commit is its own ancestor: certifying the tip asks git nothing.
    if sha != tip && !is_ancestor(sha.to_string(), tip.clone()).await {
        return Ok(Move::Unchanged(Unmoved::NotOnTrunk {
            sha: sha.to_string(),
            trunk: trunk.to_string(),
            tip,
        }));
    }
    match pointer {
        Some(cur) if cur == sha => Ok(Move::Unchanged(Unmoved::AlreadyHere)),
        Some(cur) if !is_ancestor(cur.clone(), sha.to_string()).await => {
            if is_ancestor(cur.clone(), tip.clone()).await {
                Ok(Move::Unchanged(Unmoved::NotForward { at: cur }))
            } else {
                Ok(Move::Unchanged(Unmoved::PointerOffTrunk {
                    at: cur,
                    trunk: trunk.to_string(),
                    sha: sha.to_string(),
                }))
            }
        }
        cur => Ok(Move::From(cur)),
    }
}

#[cfg(test)]
mod pointer_tests {
    use super::*;

    /// The typed outcome renders today's words, in the human line and in
    /// `verified_pointer` (a JSON string).
    #[test]
    fn pointer_outcomes_render_the_operators_words() {
        assert_eq!(PointerOutcome::Moved.to_string(), "moved");
        let sha = "a".repeat(40);
        let cases = [
            (
                Unmoved::NotGreen { sha: sha.clone() },
                format!("unchanged: {sha} is not green"),
            ),
            (Unmoved::AlreadyHere, "unchanged: already at this SHA".into()),
            (
                Unmoved::MachinesDisagree {
                    disagreement: "green on m0, red on m1".into(),
                },
                "unchanged: the machines disagree (green on m0, red on m1)".into(),
            ),
            (
                Unmoved::ZeroTests,
                "unchanged: the suite ran 0 tests — a green that tested nothing does not verify the SHA".into(),
            ),
            (
                Unmoved::TrunkAbsent {
                    trunk: "refs/heads/main".into(),
                },
                "unchanged: trunk refs/heads/main does not exist".into(),
            ),
        ];
        for (why, words) in cases {
            let o = PointerOutcome::Unchanged(why);
            assert!(!o.moved());
            assert_eq!(o.to_string(), words);
            assert_eq!(serde_json::to_value(&o).unwrap(), serde_json::json!(words));
        }
    }
}

#[cfg(test)]
mod attempts_tests {
    use super::*;

    /// Another program's edit in place: byte `at` of `path` becomes `b`,
    /// the size unchanged.
    fn overwrite_byte(path: &Path, at: u64, b: u8) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_at(&[b], at).unwrap();
    }

    #[test]
    fn the_check_is_remembered_by_stat_and_any_other_writer_voids_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saphan/attempts.jsonl");
        // A missing file is fine and leaves nothing behind.
        check_appendable(&path).unwrap();
        assert!(!checked_path(&path).exists());
        append_line(&path, r#"{"id":"a"}"#).unwrap();
        append_line(&path, r#"{"id":"b"}"#).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(checked_path(&path)).unwrap(),
            stat_identity(&meta),
            "an append that followed its own check is remembered"
        );
        assert!(check(&path).unwrap().1.is_empty());
        // A same-size edit in place (a byte that is not UTF-8): the times
        // change, so the file is read again, and the damage is found —
        // refusing nothing.
        overwrite_byte(&path, 8, 0xff);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), meta.len());
        check_appendable(&path).unwrap();
        let (checked, found) = check(&path).unwrap();
        assert_eq!(
            found,
            [
                "attempts.jsonl:1 is not UTF-8 (byte 9 of the line) — skipped by every reader; this record starts a line of its own"
            ]
        );
        // Found until an append notes it; then the check after it knows
        // the file by its stat.
        assert_eq!(check(&path).unwrap().1.len(), 1);
        append_checked(&path, r#"{"id":"c"}"#, checked).unwrap();
        assert!(check(&path).unwrap().1.is_empty());
        // An edit between a check and the append after it: the append sees
        // the file changed before its write and remembers nothing.
        let (checked, _) = check(&path).unwrap();
        overwrite_byte(&path, 8, 0xfe);
        append_checked(&path, r#"{"id":"e"}"#, checked).unwrap();
        assert_ne!(
            std::fs::read_to_string(checked_path(&path)).unwrap_or_default(),
            stat_identity(&std::fs::metadata(&path).unwrap())
        );
        assert_eq!(check(&path).unwrap().1.len(), 1, "read again");
    }

    /// The reader's words for a file holding every kind of bad line.
    fn lines_of(bytes: &[u8]) -> (Vec<(usize, String)>, (u64, bool)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saphan/attempts.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let mut seen = Vec::new();
        let end = each_line(&path, |n, l| {
            seen.push((
                n,
                match l {
                    Line::Text(t) => format!("text {t}"),
                    other => other.why_skipped().unwrap(),
                },
            ))
        })
        .unwrap();
        (seen, end)
    }

    #[test]
    fn each_line_names_what_it_skips_and_holds_no_more_than_the_cap() {
        let mut bytes = b"{\"a\":1}\r\n{\"id\":\"\xff\"}\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', LINE_CAP + 5));
        bytes.extend_from_slice(b"\n{\"b\":2}\n{\"c\":\"");
        bytes.extend_from_slice(&"é".as_bytes()[..1]);
        let (seen, (total, ended)) = lines_of(&bytes);
        assert_eq!(
            seen,
            [
                (1, "text {\"a\":1}".to_string()),
                (2, "not UTF-8 (byte 8 of the line)".to_string()),
                (
                    3,
                    format!(
                        "{} bytes long, past the 1 MiB a record can take",
                        LINE_CAP + 5
                    )
                ),
                (4, "text {\"b\":2}".to_string()),
                (5, "a torn write: it ends inside a character".to_string()),
            ]
        );
        assert_eq!(total, bytes.len() as u64);
        assert!(!ended);
        // A line exactly at the cap is read.
        let mut at_cap = vec![b' '; LINE_CAP - 2];
        at_cap.extend_from_slice(b"{}\n");
        let (seen, (_, ended)) = lines_of(&at_cap);
        assert_eq!(seen.len(), 1);
        assert!(seen[0].1.starts_with("text "));
        assert!(ended);
        assert_eq!(lines_of(b"").0, []);
    }

    #[test]
    fn read_all_skips_bad_lines_by_name_and_keeps_the_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("saphan/attempts.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"not json\n\xfe\n\n").unwrap();
        let a = read_all(&path).unwrap();
        assert!(a.records.is_empty());
        assert_eq!(a.corrupt.len(), 2);
        assert_eq!(
            a.corrupt[1],
            (2, "not UTF-8 (byte 1 of the line)".to_string())
        );
    }
}
