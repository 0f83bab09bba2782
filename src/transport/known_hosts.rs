//! Strict host key verification against OpenSSH known_hosts files.
//!
//! Format (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): one key per line,
//! `[@marker] hostpatterns keytype base64key [comment]`; `#` comments and
//! blank lines are skipped. Host patterns are comma-separated, may use `*`
//! and `?`, may be negated with `!`, may be hashed (`|1|salt|hmac-sha1`), and
//! name a non-default port as `[host]:port`. A line that cannot be read is
//! skipped, as `ssh` does.
//!
//! This is written here rather than taken from `russh::keys::check_known_hosts_path`
//! because that function counts line numbers without comment lines, matches
//! no wildcard or negated patterns, and ignores `@revoked`.

use data_encoding::BASE64_MIME;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::PublicKey;
use sha1::Sha1;
use std::path::PathBuf;

/// What the known_hosts files say about a server key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A line for this host holds this key.
    Known,
    /// No line for this host holds a key of this type.
    Unknown,
    /// A line for this host holds a different key of the same type, or —
    /// when no line holds a key of the offered type — a key of another type
    /// (1-based line number). OpenSSH treats a host that suddenly offers
    /// only a key type it never recorded as changed, not new: accepting it
    /// is the advice that lets someone in the middle in.
    Changed { file: PathBuf, line: usize },
    /// An `@revoked` line holds this key.
    Revoked { file: PathBuf, line: usize },
    /// A file exists but cannot be read.
    Unreadable { file: PathBuf, detail: String },
}

/// The name known_hosts uses for `host` on `port`: `host`, or `[host]:port`
/// when the port is not 22.
pub fn host_port_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_lowercase()
    } else {
        format!("[{}]:{port}", host.to_lowercase())
    }
}

/// Check `key` for `host`:`port` against `files` in order (missing files are
/// empty). A revoked key wins over everything; then a matching key; then a
/// different key of the same type (changed); then a key of another type
/// (changed too: the host's recorded identity is not the one it shows);
/// otherwise unknown.
pub fn check(files: &[PathBuf], host: &str, port: u16, key: &PublicKey) -> Verdict {
    let name = host_port_name(host, port);
    let mut known = false;
    let mut changed = None;
    let mut other_type = None;
    for file in files {
        let text = match std::fs::read(file) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Verdict::Unreadable {
                    file: file.clone(),
                    detail: e.to_string(),
                };
            }
        };
        for (i, line) in text.lines().enumerate() {
            let Some(entry) = parse_line(line) else {
                continue;
            };
            if !hosts_match(entry.hosts, &name) {
                continue;
            }
            let Ok(recorded) = russh::keys::parse_public_key_base64(entry.key) else {
                continue;
            };
            let same = recorded.key_data() == key.key_data();
            match entry.marker {
                Some("@revoked") if same => {
                    return Verdict::Revoked {
                        file: file.clone(),
                        line: i + 1,
                    };
                }
                Some(_) => {}
                None if same => known = true,
                None if recorded.algorithm() == key.algorithm() && changed.is_none() => {
                    changed = Some((file.clone(), i + 1))
                }
                None if other_type.is_none() => other_type = Some((file.clone(), i + 1)),
                None => {}
            }
        }
    }
    match (known, changed.or(other_type)) {
        (true, _) => Verdict::Known,
        (false, Some((file, line))) => Verdict::Changed { file, line },
        (false, None) => Verdict::Unknown,
    }
}

/// The key algorithms recorded for `host`:`port` in `files` (plain lines,
/// not `@revoked` or `@cert-authority`), in file order without repeats.
/// Like OpenSSH, the client offers these host key algorithms first, so a
/// server with several host keys shows the one on record.
pub fn known_algorithms(files: &[PathBuf], host: &str, port: u16) -> Vec<russh::keys::Algorithm> {
    let name = host_port_name(host, port);
    let mut out = Vec::new();
    for file in files {
        let Ok(b) = std::fs::read(file) else { continue };
        for line in String::from_utf8_lossy(&b).lines() {
            let Some(entry) = parse_line(line) else {
                continue;
            };
            if entry.marker.is_some() || !hosts_match(entry.hosts, &name) {
                continue;
            }
            if let Ok(k) = russh::keys::parse_public_key_base64(entry.key)
                && !out.contains(&k.algorithm())
            {
                out.push(k.algorithm());
            }
        }
    }
    out
}

struct Entry<'a> {
    marker: Option<&'a str>,
    hosts: &'a str,
    key: &'a str,
}

fn parse_line(line: &str) -> Option<Entry<'_>> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut words = line.split_whitespace();
    let mut first = words.next()?;
    let marker = if first.starts_with('@') {
        let m = first;
        first = words.next()?;
        Some(m)
    } else {
        None
    };
    let _keytype = words.next()?;
    let key = words.next()?;
    Some(Entry {
        marker,
        hosts: first,
        key,
    })
}

/// OpenSSH's pattern-list rule: a negated pattern that matches vetoes the
/// line; otherwise any positive match counts. A hashed entry stands alone.
fn hosts_match(patterns: &str, name: &str) -> bool {
    if let Some(rest) = patterns.strip_prefix("|1|") {
        return hashed_match(rest, name);
    }
    let mut positive = false;
    for p in patterns.split(',') {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(&neg.to_lowercase(), name) {
                return false;
            }
        } else if glob(&p.to_lowercase(), name) {
            positive = true;
        }
    }
    positive
}

fn hashed_match(rest: &str, name: &str) -> bool {
    let Some((salt, hash)) = rest.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (
        BASE64_MIME.decode(salt.as_bytes()),
        BASE64_MIME.decode(hash.as_bytes()),
    ) else {
        return false;
    };
    let Ok(mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt) else {
        return false;
    };
    mac.chain_update(name.as_bytes())
        .verify_slice(&hash)
        .is_ok()
}

/// `*` matches any run, `?` one character; everything else literally.
fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    const K1: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIIClcTGr/XeTlvZjUqf2pk/3geIWiZJF/vtuvOI5CCAA";
    const K2: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIGbVbZpTyhEVFE/7yXygc0k9isbHVu7lxX+6K+1Z9j69";

    fn key(b64: &str) -> PublicKey {
        russh::keys::parse_public_key_base64(b64).unwrap()
    }

    fn file(dir: &Path, text: &str) -> Vec<PathBuf> {
        let p = dir.join("kh");
        std::fs::write(&p, text).unwrap();
        vec![p]
    }

    #[test]
    fn globs() {
        assert!(glob("*", "x"));
        assert!(glob("10.0.0.?", "10.0.0.5"));
        assert!(!glob("10.0.0.?", "10.0.0.55"));
        assert!(glob("*.example.com", "a.b.example.com"));
        assert!(!glob("*.example.com", "example.com"));
        assert!(glob("[h]:22*", "[h]:2222"));
    }

    #[test]
    fn verdicts() {
        let d = tempfile::tempdir().unwrap();
        let f = file(
            d.path(),
            &format!(
                "# a comment\n\n10.0.0.1 ssh-ed25519 {K1}\n[10.0.0.1]:2222 ssh-ed25519 {K2} c\n*.lab,!bad.lab ssh-ed25519 {K1}\n@revoked * ssh-ed25519 {K2}\n"
            ),
        );
        assert_eq!(check(&f, "10.0.0.1", 22, &key(K1)), Verdict::Known);
        // K2 is revoked everywhere.
        assert_eq!(
            check(&f, "10.0.0.1", 2222, &key(K2)),
            Verdict::Revoked {
                file: f[0].clone(),
                line: 6
            }
        );
        assert_eq!(check(&f, "m.lab", 22, &key(K1)), Verdict::Known);
        assert_eq!(check(&f, "bad.lab", 22, &key(K1)), Verdict::Unknown);
        assert_eq!(check(&f, "10.0.0.2", 22, &key(K1)), Verdict::Unknown);
        let f2 = file(d.path(), &format!("# c\n# c\n10.0.0.1 ssh-ed25519 {K1}\n"));
        // Line numbers count comments, as an editor does.
        assert_eq!(
            check(&f2, "10.0.0.1", 22, &key(K2)),
            Verdict::Changed {
                file: f2[0].clone(),
                line: 3
            }
        );
        assert_eq!(
            check(&[d.path().join("absent")], "h", 22, &key(K1)),
            Verdict::Unknown
        );
    }

    #[test]
    fn another_key_type_on_record_is_a_changed_key() {
        const RSA: &str = "AAAAB3NzaC1yc2EAAAADAQABAAAAgQC0gtSsha/mW50NneHUUvn3annFHOUoAT+2hy+/9EU0QM0+yh2Y+vfU7F6yMJQXOpPAy+yQsyuMv9whNEVSrvb4gIpPEqbKHVuo1h/Afmb6Y6hUWkLNRHEoiGoahbs2Y9OZjL8PfAG0WoGFIpAEzljpDgraBZMu9tvicv5AlGWchw==";
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path(), &format!("# c\n10.0.0.1 ssh-rsa {RSA}\n"));
        // The host is on record with an RSA key and now shows ed25519 only.
        assert_eq!(
            check(&f, "10.0.0.1", 22, &key(K1)),
            Verdict::Changed {
                file: f[0].clone(),
                line: 2
            }
        );
        assert_eq!(check(&f, "10.0.0.2", 22, &key(K1)), Verdict::Unknown);
        assert_eq!(
            known_algorithms(&f, "10.0.0.1", 22),
            vec![key(RSA).algorithm()]
        );
    }

    #[test]
    fn hashed_entries_from_ssh_keygen() {
        if crate::skip_unless(
            Command::new("ssh-keygen").arg("-?").output().is_ok(),
            "no ssh-keygen",
        ) {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let f = file(
            d.path(),
            &format!("10.9.8.7 ssh-ed25519 {K1}\n[10.9.8.7]:2200 ssh-ed25519 {K2}\n"),
        );
        let st = Command::new("ssh-keygen")
            .arg("-q")
            .arg("-H")
            .arg("-f")
            .arg(&f[0])
            .output()
            .unwrap();
        assert!(st.status.success());
        let text = std::fs::read_to_string(&f[0]).unwrap();
        assert!(text.starts_with("|1|"), "{text}");
        assert_eq!(check(&f, "10.9.8.7", 22, &key(K1)), Verdict::Known);
        assert_eq!(check(&f, "10.9.8.7", 2200, &key(K2)), Verdict::Known);
        assert!(matches!(
            check(&f, "10.9.8.7", 22, &key(K2)),
            Verdict::Changed { line: 1, .. }
        ));
        assert_eq!(check(&f, "10.9.8.8", 22, &key(K1)), Verdict::Unknown);
    }
}
