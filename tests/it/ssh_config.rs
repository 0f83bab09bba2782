//! saphan's host settings equal OpenSSH's (`ssh -G`) on varied configs.
//!
//! Each case states, by hand, what OpenSSH's rules give (first value wins,
//! `Host` patterns with `*`/`?`/`!`, `Match`, `Include`, tokens, accumulating
//! `IdentityFile`). The test checks three things against that statement:
//! `ssh -G` itself agrees (so the statement is OpenSSH's truth), saphan's
//! `resolve` agrees, and — for the configs it supports — the `ssh2-config`
//! fallback used where no `ssh` program exists agrees too.

use crate::common;

use saphan::error::Refusal;
use saphan::transport::ssh_config::{HostSettings, resolve_fallback, resolve_with, ssh_program};
use saphan::transport::{SshOptions, Transport, resolve};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Case {
    name: &'static str,
    /// Files to write: (relative path, text). `@D` is the temp dir, `@H` the home.
    files: &'static [(&'static str, &'static str)],
    alias: &'static str,
    hostname: &'static str,
    port: u16,
    /// `None`: the local user.
    user: Option<&'static str>,
    identity_files: &'static [&'static str],
    /// `None`: OpenSSH's defaults.
    known_hosts: Option<&'static [&'static str]>,
    proxy_jump: &'static [&'static str],
    connect_timeout: Option<u64>,
    /// Whether the ssh2-config fallback supports this config.
    fallback: bool,
}

const DEFAULT_IDS: &[&str] = &[
    "@H/.ssh/id_rsa",
    "@H/.ssh/id_ecdsa",
    "@H/.ssh/id_ecdsa_sk",
    "@H/.ssh/id_ed25519",
    "@H/.ssh/id_ed25519_sk",
    "@H/.ssh/id_xmss",
    "@H/.ssh/id_dsa",
];

const CASES: &[Case] = &[
    Case {
        name: "plain host block",
        files: &[(
            "config",
            "Host box\n  HostName 10.1.2.3\n  Port 2200\n  User bob\n  IdentityFile ~/k1\n  ConnectTimeout 7\n",
        )],
        alias: "box",
        hostname: "10.1.2.3",
        port: 2200,
        user: Some("bob"),
        identity_files: &["@H/k1"],
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: Some(7),
        fallback: true,
    },
    Case {
        name: "first value wins over a later Host *",
        files: &[(
            "config",
            "Host box\n  Port 1000\n\nHost *\n  Port 2000\n  User everyone\n  HostName fallback.example\n",
        )],
        alias: "box",
        hostname: "fallback.example",
        port: 1000,
        user: Some("everyone"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "? wildcard and %h in HostName",
        files: &[(
            "config",
            "Host web-??\n  HostName %h.example.com\n  User www\n",
        )],
        alias: "web-07",
        hostname: "web-07.example.com",
        port: 22,
        user: Some("www"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "negated pattern excludes a host",
        files: &[(
            "config",
            "Host *.corp !bastion.corp\n  User corp\n  Port 2022\n\nHost *\n  User other\n",
        )],
        alias: "bastion.corp",
        hostname: "bastion.corp",
        port: 22,
        user: Some("other"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "negated pattern still matches the others",
        files: &[(
            "config",
            "Host *.corp !bastion.corp\n  User corp\n  Port 2022\n\nHost *\n  User other\n",
        )],
        alias: "db.corp",
        hostname: "db.corp",
        port: 2022,
        user: Some("corp"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "IdentityFile accumulates, with tokens",
        files: &[(
            "config",
            "Host box\n  User deploy\n  IdentityFile ~/.ssh/first\n\nHost *\n  HostName 192.0.2.9\n  Port 2201\n  IdentityFile %d/keys/%r@%h:%p\n  IdentityFile /k/%n-%%\n",
        )],
        alias: "box",
        hostname: "192.0.2.9",
        port: 2201,
        user: Some("deploy"),
        identity_files: &["@H/.ssh/first", "@H/keys/deploy@192.0.2.9:2201", "/k/box-%"],
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "Include of a file and a glob",
        files: &[
            (
                "config",
                "Include @D/one.conf @D/conf.d/*.conf\n\nHost *\n  Port 99\n  User late\n",
            ),
            ("one.conf", "Host inc\n  HostName 198.51.100.4\n"),
            ("conf.d/a.conf", "Host inc\n  Port 42\n  ConnectTimeout 3\n"),
        ],
        alias: "inc",
        hostname: "198.51.100.4",
        port: 42,
        user: Some("late"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: Some(3),
        fallback: true,
    },
    Case {
        name: "Match host sees the HostName",
        files: &[(
            "config",
            "Host alias1\n  HostName real.example\n\nMatch host real.example\n  User matched\n  Port 2222\n\nHost *\n  User unmatched\n",
        )],
        alias: "alias1",
        hostname: "real.example",
        port: 2222,
        user: Some("matched"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: false,
    },
    Case {
        name: "Match originalhost and Match all",
        files: &[(
            "config",
            "Match originalhost o?ig,!other\n  User orig\n\nMatch all\n  Port 2345\n  HostName 203.0.113.5\n",
        )],
        alias: "orig",
        hostname: "203.0.113.5",
        port: 2345,
        user: Some("orig"),
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: false,
    },
    Case {
        name: "ProxyJump list and UserKnownHostsFile tokens",
        files: &[(
            "config",
            "Host target\n  HostName 10.9.9.9\n  User ops\n  ProxyJump j@bastion:2201,second\n  UserKnownHostsFile ~/kh_%h @D/kh2\n",
        )],
        alias: "target",
        hostname: "10.9.9.9",
        port: 22,
        user: Some("ops"),
        identity_files: DEFAULT_IDS,
        known_hosts: Some(&["@H/kh_10.9.9.9", "@D/kh2"]),
        proxy_jump: &["j@bastion:2201", "second"],
        connect_timeout: None,
        fallback: true,
    },
    Case {
        name: "keywords any case, = syntax, quoted values, several patterns",
        files: &[(
            "config",
            "host alpha beta gamma\n  HOSTNAME 10.3.3.3\n  port=2023\n  IdentityFile \"~/with space/key\"\n  CONNECTTIMEOUT 0\n",
        )],
        alias: "beta",
        hostname: "10.3.3.3",
        port: 2023,
        user: None,
        identity_files: &["@H/with space/key"],
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: false,
    },
    Case {
        name: "no block matches: everything defaults",
        files: &[("config", "Host other\n  Port 1\n")],
        alias: "nomatch.example",
        hostname: "nomatch.example",
        port: 22,
        user: None,
        identity_files: DEFAULT_IDS,
        known_hosts: None,
        proxy_jump: &[],
        connect_timeout: None,
        fallback: true,
    },
];

fn home() -> String {
    let u = nix::unistd::User::from_uid(nix::unistd::Uid::current())
        .unwrap()
        .unwrap();
    u.dir.to_string_lossy().trim_end_matches('/').to_string()
}

fn local_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::current())
        .unwrap()
        .unwrap()
        .name
}

fn subst(s: &str, dir: &Path) -> String {
    s.replace("@D", &dir.to_string_lossy())
        .replace("@H", &home())
}

fn write_case(c: &Case, dir: &Path) -> PathBuf {
    for (rel, text) in c.files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, subst(text, dir)).unwrap();
    }
    dir.join("config")
}

/// The values of `key` in `ssh -G` output, read without saphan's parser.
fn ssh_g(config: &Path, alias: &str) -> Vec<(String, String)> {
    let out = Command::new("ssh")
        .arg("-G")
        .arg("-F")
        .arg(config)
        .arg(alias)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn check_expected(c: &Case, dir: &Path, s: &HostSettings, who: &str) {
    let ctx = format!("{who}, case `{}`", c.name);
    assert_eq!(s.alias, c.alias, "{ctx}");
    assert_eq!(s.hostname, c.hostname, "{ctx}");
    assert_eq!(s.port, c.port, "{ctx}");
    assert_eq!(
        s.user,
        c.user.map(str::to_string).unwrap_or_else(local_user),
        "{ctx}"
    );
    let ids: Vec<PathBuf> = c
        .identity_files
        .iter()
        .map(|f| PathBuf::from(subst(f, dir)))
        .collect();
    assert_eq!(s.identity_files, ids, "{ctx}");
    let kh: Vec<PathBuf> = match c.known_hosts {
        Some(list) => list.iter().map(|f| PathBuf::from(subst(f, dir))).collect(),
        None => vec![
            PathBuf::from(format!("{}/.ssh/known_hosts", home())),
            PathBuf::from(format!("{}/.ssh/known_hosts2", home())),
        ],
    };
    assert_eq!(s.user_known_hosts_files, kh, "{ctx}");
    assert_eq!(
        s.proxy_jump,
        c.proxy_jump
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
        "{ctx}"
    );
    assert_eq!(
        s.connect_timeout,
        c.connect_timeout.map(Duration::from_secs),
        "{ctx}"
    );
}

#[tokio::test]
async fn resolution_equals_ssh_g_on_varied_configs() {
    if common::skip_unless(
        ssh_program().is_some(),
        "no OpenSSH client (ssh -G is the reference)",
    ) {
        return;
    }
    assert!(CASES.len() >= 10);
    let mut fallback_checked = 0;
    for c in CASES {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_case(c, dir.path());

        // 1. The hand-written expectation is what OpenSSH says.
        let g = ssh_g(&cfg, c.alias);
        let one = |k: &str| g.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let ctx = format!("ssh -G, case `{}`", c.name);
        assert_eq!(one("hostname").as_deref(), Some(c.hostname), "{ctx}");
        assert_eq!(one("port"), Some(c.port.to_string()), "{ctx}");
        assert_eq!(
            one("user"),
            Some(c.user.map(str::to_string).unwrap_or_else(local_user)),
            "{ctx}"
        );
        assert_eq!(
            g.iter().filter(|(k, _)| k == "identityfile").count(),
            c.identity_files.len(),
            "{ctx}"
        );
        assert_eq!(
            one("proxyjump"),
            (!c.proxy_jump.is_empty()).then(|| c.proxy_jump.join(",")),
            "{ctx}"
        );
        let ct = one("connecttimeout").unwrap();
        assert_eq!(
            c.connect_timeout,
            ct.parse::<u64>().ok().filter(|&n| n > 0),
            "{ctx}: {ct}"
        );

        // 2. saphan's resolution says the same.
        let s = resolve(&cfg, c.alias)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        check_expected(c, dir.path(), &s, "resolve");

        // 3. The fallback agrees where it claims support, and refuses Match.
        let fb = resolve_fallback(&cfg, c.alias, None, None);
        if c.fallback {
            let fb = fb.unwrap_or_else(|e| panic!("fallback, case `{}`: {e}", c.name));
            check_expected(c, dir.path(), &fb, "fallback");
            assert_eq!(fb, s, "fallback vs ssh -G, case `{}`", c.name);
            fallback_checked += 1;
        } else if c.files.iter().any(|(_, t)| t.contains("Match")) {
            let e = fb.unwrap_err();
            assert_eq!(e.name(), "ssh-config");
            assert!(e.to_string().contains("Match"), "{e}");
        }
    }
    assert!(fallback_checked >= 8);
}

#[tokio::test]
async fn jump_hosts_resolve_with_user_and_port_overrides() {
    if common::skip_unless(ssh_program().is_some(), "no OpenSSH client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::write(
        &cfg,
        "Host bastion\n  HostName 10.7.7.7\n  User nobody\n  Port 2000\n  ProxyJump none\n",
    )
    .unwrap();
    let s = resolve_with(&cfg, "bastion", Some("j"), Some(2201))
        .await
        .unwrap();
    assert_eq!(
        (s.hostname.as_str(), s.user.as_str(), s.port),
        ("10.7.7.7", "j", 2201)
    );
    assert!(s.proxy_jump.is_empty());
    let f = resolve_fallback(&cfg, "bastion", Some("j"), Some(2201)).unwrap();
    assert_eq!(f, s);
}

#[tokio::test]
async fn bad_configs_are_refused_as_ssh_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::write(&cfg, "Host x\n  Port notaport\n").unwrap();
    let e = resolve(&cfg, "x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    let e = resolve(&dir.path().join("missing"), "x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    assert!(e.to_string().contains("does not exist"), "{e}");
    std::fs::write(&cfg, "Host x\n  IdentityFile /k/%Q\n").unwrap();
    let e = resolve(&cfg, "x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    assert!(e.to_string().contains("%Q"), "{e}");
    // A ProxyCommand is resolved but never run.
    std::fs::write(
        &cfg,
        "Host x\n  HostName 127.0.0.1\n  ProxyCommand touch /tmp/never\n",
    )
    .unwrap();
    let s = resolve(&cfg, "x").await.unwrap();
    assert!(s.proxy_command.is_some());
    let e = Transport::connect_ssh(&s, &SshOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.name(), "ssh-config");
}

/// A private directory (ssh config dirs must not be group/other writable).
fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// `ssh -G` answers are kept across invocations (issue 22: one `ssh -G` per
/// host per invocation was half of saphan's CPU per host), and a kept answer
/// is never stale: a config edit that keeps the size and the mtime still
/// changes the answer, because the key is over the file's bytes.
#[tokio::test]
async fn ssh_g_answers_are_cached_and_never_stale() {
    use saphan::transport::ssh_config::resolve_cached;
    if common::skip_unless(ssh_program().is_some(), "no OpenSSH client (ssh -G)") {
        return;
    }
    let dir = private_dir();
    let cache = dir.path().join("cache");
    let config = dir.path().join("config");
    let inc = dir.path().join("inc.conf");
    std::fs::write(&inc, "Host m1\n  User alice\n").unwrap();
    let write = |host: &str| {
        std::fs::write(
            &config,
            format!(
                "Include {}\nHost m1\n  HostName {host}\n  Port 2201\n",
                inc.display()
            ),
        )
        .unwrap();
    };
    write("10.0.0.1");
    let first = resolve_cached(&config, "m1", &cache).await.unwrap();
    assert_eq!(first.hostname, "10.0.0.1");
    assert_eq!(first.user, "alice", "the Include is followed");
    let kept = entries(&cache);
    assert_eq!(kept.len(), 1, "one entry per resolution: {kept:?}");
    let again = resolve_cached(&config, "m1", &cache).await.unwrap();
    assert_eq!(again, first, "the cached answer is the same settings");
    assert_eq!(
        again,
        resolve(&config, "m1").await.unwrap(),
        "and equals ssh -G's"
    );

    // The entry is what is read: an entry the operator changed by hand is
    // believed (it is the operator's own file under SAPHAN_HOME) …
    std::fs::write(
        &kept[0],
        std::fs::read_to_string(&kept[0])
            .unwrap()
            .replace("hostname 10.0.0.1", "hostname 10.9.9.9"),
    )
    .unwrap();
    assert_eq!(
        resolve_cached(&config, "m1", &cache)
            .await
            .unwrap()
            .hostname,
        "10.9.9.9"
    );
    // … but one anyone could have written is not.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kept[0], std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    assert_eq!(
        resolve_cached(&config, "m1", &cache)
            .await
            .unwrap()
            .hostname,
        "10.0.0.1"
    );

    // Same size, same mtime, other bytes: a new key, a fresh answer.
    let mtime = std::fs::metadata(&config).unwrap().modified().unwrap();
    write("10.0.0.2");
    std::fs::File::options()
        .write(true)
        .open(&config)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(
        resolve_cached(&config, "m1", &cache)
            .await
            .unwrap()
            .hostname,
        "10.0.0.2"
    );
    // An included file's edit changes the key too.
    std::fs::write(&inc, "Host m1\n  User bobby\n").unwrap();
    assert_eq!(
        resolve_cached(&config, "m1", &cache).await.unwrap().user,
        "bobby"
    );
}

/// A config whose answer can change while no file does (`Match exec` runs a
/// command; `CanonicalizeHostname` asks DNS) is never cached.
#[tokio::test]
async fn configs_with_match_or_canonicalization_are_not_cached() {
    use saphan::transport::ssh_config::resolve_cached;
    if common::skip_unless(ssh_program().is_some(), "no OpenSSH client (ssh -G)") {
        return;
    }
    for body in [
        "Match exec \"test -e /nonexistent\"\n  User eve\nHost m1\n  HostName 10.0.0.1\n",
        "Host m1\n  HostName 10.0.0.1\n  CanonicalizeHostname no\n",
    ] {
        let dir = private_dir();
        let cache = dir.path().join("cache");
        let config = dir.path().join("config");
        std::fs::write(&config, body).unwrap();
        let s = resolve_cached(&config, "m1", &cache).await.unwrap();
        assert_eq!(s, resolve(&config, "m1").await.unwrap());
        assert!(entries(&cache).is_empty(), "nothing cached for {body:?}");
    }
}
