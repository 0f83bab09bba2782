//! The store: `SAPHAN_HOME/fleet/ledger.jsonl`, read whole and verified
//! ([`Ledger::open`]) and appended to one signed line at a time
//! ([`Ledger::append`]), with the queries over its rows. Appends hold an
//! exclusive `flock` on the ledger file around re-read + append + head
//! write; reads hold a shared one. A last line without its newline is
//! `ledger-row-torn` and is never appended onto.

use super::chain::{
    Head, ZERO_HASH, check_chain_and_head, check_head_only, check_link, head_path, line_hash,
    read_chained_line, read_head, sign_head, sign_row, verify_line,
};
use super::key::{load_key, load_or_create_key};
use super::note::{self, Note};
use super::perms::{check_home_dirs, ledger_dirs};
use super::row::{CapabilityRow, MachineFacts, Row};
use crate::fleet::FleetError;
use crate::home::Home;
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
        // The signed head and the chain of line hashes tie every line up to
        // the head to bytes this key signed: the lines before the head's own
        // row are read without their signatures (two verifications per
        // read, not one per row of history). The head's row, rows past it,
        // and any ledger whose chain or head does not hold are verified line
        // by line, which names the first bad line exactly as before.
        let rows = match read_chained(&path, &lines, head.as_ref(), &vk) {
            Some(read) => read,
            None => verify_all(&path, &lines, &vk, head.as_ref())?,
        };
        if let Some(h) = &head {
            let past = lines.len() as u64 - h.count;
            if past > 0 {
                note::tell(Note::RowsPastHead {
                    path: path.clone(),
                    head: h.count,
                    past,
                });
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
            check_link(&self.path, *n, seq, &p, &prev)?;
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

/// Rows of `lines` when the chain holds up to a signed `head`: lines before
/// line `head.count` read by [`read_chained_line`] (their bytes are bound
/// to the head by the chain), that line and later ones by [`verify_line`]
/// (two signatures per read, the head's and its row's, plus one per row
/// past the head).
/// `None` when there is no head, or any line, link or the head fails — the
/// caller then verifies every line ([`verify_all`]) and refuses by name.
fn read_chained(
    path: &Path,
    lines: &[(usize, &str)],
    head: Option<&Head>,
    vk: &VerifyingKey,
) -> Option<Vec<Row>> {
    let head = head?;
    let mut rows = Vec::with_capacity(lines.len());
    let mut links = Vec::with_capacity(lines.len());
    for (n, l) in lines {
        // Line `count` (the row the head names) is verified too: a head
        // re-signed under a swapped key, over rows the old key signed, then
        // fails here and is refused line by line, as every read did before.
        let read = if (*n as u64) < head.count {
            read_chained_line(path, *n, l)
        } else {
            verify_line(path, *n, l, vk)
        };
        let (r, seq, prev) = read.ok()?;
        rows.push(r);
        links.push((seq, prev));
    }
    check_chain_and_head(path, lines, &links, Some(head)).ok()?;
    Some(rows)
}

/// Every line's signature verified (spread over the cores: this is the
/// path for a ledger whose chain or head does not hold, or has no head),
/// then the chain and the head; the first bad line is the refusal.
///
/// Errors: `ledger-row-tampered`, `ledger-row-malformed`,
/// `ledger-chain-broken`, `ledger-head-mismatch`.
fn verify_all(
    path: &Path,
    lines: &[(usize, &str)],
    vk: &VerifyingKey,
    head: Option<&Head>,
) -> Result<Vec<Row>, FleetError> {
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
    check_chain_and_head(path, lines, &links, head)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::ledger::Userns;
    use crate::platform::OsRelease;

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
    fn rows_past_the_head_are_verified_by_their_signatures_though_the_chain_holds() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let l = Ledger::open(&home).unwrap();
        l.append_facts(facts("m0")).unwrap();
        l.append_facts(facts("m1")).unwrap();
        let head2 = std::fs::read(head_path(&home.ledger())).unwrap();
        l.append_facts(facts("m2")).unwrap();
        // The head back at 2 rows: line 3 is past it, its `prev` still the
        // hash of line 2, so the chain and the head both hold.
        std::fs::write(head_path(&home.ledger()), &head2).unwrap();
        assert_eq!(Ledger::open(&home).unwrap().rows().len(), 3);
        // An edit of line 3 breaks no link; only its signature shows it.
        let text = std::fs::read_to_string(home.ledger()).unwrap();
        let edited = {
            let mut lines: Vec<String> = text.lines().map(String::from).collect();
            lines[2] = lines[2].replacen("\"cpus\":2", "\"cpus\":64", 1);
            assert_ne!(lines[2], text.lines().nth(2).unwrap());
            lines.join("\n") + "\n"
        };
        std::fs::write(home.ledger(), &edited).unwrap();
        let e = Ledger::open(&home).unwrap_err();
        assert_eq!(e.name(), "ledger-row-tampered");
        assert!(e.line().contains("line 3"), "{}", e.line());
        // Nothing is appended onto it either.
        l.append_facts(facts("m3")).unwrap_err();
        // The same edit under the head (line 2 of 4) breaks the chain at
        // line 3; the line-by-line reading still names line 2.
        std::fs::write(home.ledger(), &text).unwrap();
        let l = Ledger::open(&home).unwrap();
        l.append_facts(facts("m3")).unwrap();
        let text = std::fs::read_to_string(home.ledger()).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines[1] = lines[1].replacen("\"cpus\":2", "\"cpus\":64", 1);
        std::fs::write(home.ledger(), lines.join("\n") + "\n").unwrap();
        let e = Ledger::open(&home).unwrap_err();
        assert_eq!(e.name(), "ledger-row-tampered");
        assert!(e.line().contains("line 2"), "{}", e.line());
    }

    #[test]
    fn a_head_re_signed_under_a_swapped_key_is_refused_at_the_first_row() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let l = Ledger::open(&home).unwrap();
        for m in ["m0", "m1", "m2"] {
            l.append_facts(facts(m)).unwrap();
        }
        // Another key in the key file, and the head signed again with it
        // over the same rows (the rows still carry the old key's signatures).
        let other = SigningKey::from_bytes(&[7u8; 32]);
        std::fs::write(home.signing_key(), other.to_bytes()).unwrap();
        let text = std::fs::read_to_string(home.ledger()).unwrap();
        let last = text.lines().last().unwrap();
        let head = Head {
            count: 3,
            last: line_hash(last),
        };
        std::fs::write(head_path(&home.ledger()), sign_head(&other, &head)).unwrap();
        let e = Ledger::open(&home).unwrap_err();
        assert_eq!(e.name(), "ledger-row-tampered");
        assert!(e.line().contains("line 1"), "{}", e.line());
    }
}
