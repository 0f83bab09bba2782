//! Host settings for an SSH host alias, resolved with OpenSSH's own semantics.
//!
//! The reference is the OpenSSH client itself: [`resolve`] runs
//! `ssh -G -F FILE ALIAS` (which evaluates `Host` and `Match` blocks, `!`
//! negation, `Include`, first-value-wins, `%h`-style tokens in `HostName`) and
//! parses what it prints with [`parse_ssh_g`]. `ssh -G` prints `IdentityFile`
//! values unexpanded, so their `~` and `%` tokens are expanded here, the way
//! `ssh` does when it loads keys.
//!
//! Where no `ssh` program exists, [`resolve_fallback`] reads the file with the
//! `ssh2-config` crate: `Host` patterns, `!`, `Include`, first-value-wins and
//! accumulating `IdentityFile` work; a config that uses `Match` is refused
//! (that crate cannot evaluate it), and tokens are expanded here.

use super::TransportError;
use crate::exec::{self, Cmd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `ssh -G` may take (it only reads files; `Match exec` may run a command).
const SSH_G_BUDGET: Duration = Duration::from_secs(10);

/// Everything saphan needs to reach one host, as OpenSSH would resolve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSettings {
    /// The alias that was asked for (`Host` name, `%n`).
    pub alias: String,
    /// The address to connect to (`HostName`, tokens expanded; the alias when unset).
    pub hostname: String,
    /// TCP port (`Port`, default 22).
    pub port: u16,
    /// Remote user (`User`, default the local user).
    pub user: String,
    /// Private keys to try, in order, `~` and `%` tokens expanded (`IdentityFile`, accumulating).
    pub identity_files: Vec<PathBuf>,
    /// `IdentitiesOnly yes`: use only the identity files (and agent keys matching them).
    pub identities_only: bool,
    /// Where the ssh-agent socket is: `Some(path)`, or `None` for no agent
    /// (`IdentityAgent none`, or `SSH_AUTH_SOCK` unset).
    pub identity_agent: Option<PathBuf>,
    /// known_hosts files checked first (`UserKnownHostsFile`).
    pub user_known_hosts_files: Vec<PathBuf>,
    /// known_hosts files checked after them (`GlobalKnownHostsFile`).
    pub global_known_hosts_files: Vec<PathBuf>,
    /// Name looked up in known_hosts instead of `hostname` (`HostKeyAlias`).
    pub host_key_alias: Option<String>,
    /// Jump hosts, outermost first, as written (`ProxyJump`, `[user@]host[:port]`).
    pub proxy_jump: Vec<String>,
    /// `ProxyCommand`, which saphan does not run (connecting refuses it).
    pub proxy_command: Option<String>,
    /// `ConnectTimeout`; `None` when unset or 0 (the caller's default applies).
    pub connect_timeout: Option<Duration>,
    /// `ServerAliveInterval`; `None` when 0 (the caller's default applies).
    pub server_alive_interval: Option<Duration>,
    /// `ServerAliveCountMax` (default 3).
    pub server_alive_count_max: u32,
    /// `StrictHostKeyChecking` as written (saphan is strict whatever it says).
    pub strict_host_key_checking: String,
    /// The config file this came from (jump hosts are resolved in it too).
    pub config_file: PathBuf,
}

/// Resolve `alias` through `ssh_config` (an OpenSSH client config file).
///
/// Uses `ssh -G -F ssh_config alias` where an `ssh` program is on PATH (or at
/// `/usr/bin/ssh`), [`resolve_fallback`] otherwise. A missing file, a file
/// `ssh` rejects, or an unsupported construct is refused as `ssh-config`.
pub async fn resolve(ssh_config: &Path, alias: &str) -> Result<HostSettings, TransportError> {
    resolve_with(ssh_config, alias, None, None).await
}

/// [`resolve`], keeping what `ssh -G` printed in `cache_dir` (see
/// [`SshGCache`]): a fleet invocation connects to every machine, and one
/// `ssh -G` per host per invocation was half of saphan's own CPU per host.
/// The same checks run as without the cache (exposure of the config, its
/// includes and known_hosts files); only the `ssh -G` child is saved.
pub async fn resolve_cached(
    ssh_config: &Path,
    alias: &str,
    cache_dir: &Path,
) -> Result<HostSettings, TransportError> {
    resolve_inner(ssh_config, alias, None, None, Some(cache_dir)).await
}

/// [`resolve`] with a user and port that override the config (as
/// `ssh -l USER -p PORT` do); used for `ProxyJump` hops.
pub async fn resolve_with(
    ssh_config: &Path,
    alias: &str,
    user: Option<&str>,
    port: Option<u16>,
) -> Result<HostSettings, TransportError> {
    resolve_inner(ssh_config, alias, user, port, None).await
}

async fn resolve_inner(
    ssh_config: &Path,
    alias: &str,
    user: Option<&str>,
    port: Option<u16>,
    cache_dir: Option<&Path>,
) -> Result<HostSettings, TransportError> {
    check_alias(ssh_config, alias)?;
    if !ssh_config.is_file() {
        return Err(config_err(
            ssh_config,
            alias,
            "the file does not exist or is not a file — create it (an ordinary OpenSSH client config)",
        ));
    }
    // `ssh -G` runs `Match exec` commands (and the resolved settings pick
    // the host and the keys it is judged by): files others can change are
    // refused before anything reads or runs them.
    check_config_files(ssh_config)?;
    let settings = match (ssh_program(), cache_dir) {
        (Some(ssh), Some(dir)) => match SshGCache::key(&ssh, ssh_config, alias, user, port) {
            Some(cache) => cache.resolve(dir, &ssh, ssh_config, alias).await,
            None => resolve_ssh_g(&ssh, ssh_config, alias, user, port).await,
        },
        (Some(ssh), None) => resolve_ssh_g(&ssh, ssh_config, alias, user, port).await,
        (None, _) => resolve_fallback(ssh_config, alias, user, port),
    }?;
    for kh in settings
        .user_known_hosts_files
        .iter()
        .chain(&settings.global_known_hosts_files)
    {
        check_exposed(kh, "it decides which host keys are trusted")?;
    }
    Ok(settings)
}

/// How deep `Include` is followed when checking who can change a config.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Refuse (`saphan-home-exposed`) an ssh config — its directory, the file,
/// or any file it `Include`s (followed recursively, globs in the last path
/// component expanded, relative paths taken from `~/.ssh` as OpenSSH does)
/// — that someone other than the operator (or root) owns or can write.
pub fn check_config_files(ssh_config: &Path) -> Result<(), TransportError> {
    if let Some(dir) = ssh_config.parent().filter(|d| !d.as_os_str().is_empty()) {
        check_exposed(dir, "whoever can write it can replace the ssh config")?;
    }
    check_included(ssh_config, 0)
}

fn check_included(file: &Path, depth: usize) -> Result<(), TransportError> {
    check_exposed(
        file,
        "ssh runs the commands it names (`Match exec`, `ProxyCommand`, `KnownHostsCommand` …) as you and it decides which host a machine is",
    )?;
    if depth >= MAX_INCLUDE_DEPTH {
        return Ok(());
    }
    // Bytes, as OpenSSH reads them: a byte that is not UTF-8 (a Latin-1
    // comment) must not hide the file's Includes from this check.
    let Ok(text) = std::fs::read(file) else {
        return Ok(());
    };
    for (key, rest) in directives(&text) {
        if !key.eq_ignore_ascii_case(b"include") {
            continue;
        }
        for word in include_words(rest) {
            for inc in include_targets(&word) {
                // Whoever can write its directory can replace the file.
                if let Some(dir) = inc.parent() {
                    check_exposed(
                        dir,
                        "whoever can write it can replace an ssh config file it holds",
                    )?;
                }
                check_included(&inc, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// The directives of an ssh config file's bytes (ssh_config(5)): for each
/// line, split on `\n`, its keyword (up to the first whitespace or `=`)
/// and the rest (after the separators), both trimmed; blank lines are
/// skipped, comments come back as keywords that match nothing. Bytes, not
/// text: OpenSSH reads bytes, so a byte that is not UTF-8 anywhere in the
/// file changes no keyword and no path.
fn directives(text: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let sep = |c: &u8| c.is_ascii_whitespace() || *c == b'=';
    text.split(|c| *c == b'\n').filter_map(move |line| {
        let line = line.trim_ascii();
        let i = line.iter().position(sep).unwrap_or(line.len());
        let (key, rest) = line.split_at(i);
        let skip = rest.iter().position(|c| !sep(c)).unwrap_or(rest.len());
        (!key.is_empty()).then_some((key, &rest[skip..]))
    })
}

/// The arguments of an `Include` directive, split as OpenSSH splits a
/// config line (`argv_split` in its misc.c, with comments ending the
/// line): whitespace separates words; a `"` or `'` opens a quote that the
/// same character closes, anywhere in a word (`"a b"*.conf` is one word);
/// a backslash keeps the next `"`, `'` or `\` (and, outside quotes, a
/// space) literally; an unquoted `#` starts a comment.
fn include_words(rest: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if matches!(rest[i], b' ' | b'\t') {
            i += 1;
            continue;
        }
        if rest[i] == b'#' {
            break;
        }
        let mut word = Vec::new();
        let mut quote = 0u8;
        while i < rest.len() {
            let c = rest[i];
            if c == b'\\' {
                let next = rest.get(i + 1).copied();
                if matches!(next, Some(b'\'' | b'"' | b'\\')) || (quote == 0 && next == Some(b' '))
                {
                    i += 1;
                    word.push(rest[i]);
                } else {
                    word.push(c);
                }
            } else if quote == 0 && matches!(c, b' ' | b'\t') {
                break;
            } else if quote == 0 && matches!(c, b'"' | b'\'') {
                quote = c;
            } else if quote != 0 && c == quote {
                quote = 0;
            } else {
                word.push(c);
            }
            i += 1;
        }
        words.push(word);
    }
    words
}

/// The files one `Include` argument names (ssh_config(5): `~` is the home
/// directory, a relative path is under `~/.ssh`, glob wildcards allowed).
fn include_targets(arg: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
    let path = if let Some(rest) = arg.strip_prefix(b"~/") {
        home.join(os(rest))
    } else if arg.starts_with(b"/") {
        PathBuf::from(os(arg))
    } else {
        home.join(".ssh").join(os(arg))
    };
    // Wildcards may stand in any component (glob(3), as OpenSSH expands
    // them): each level is matched against its directory's entries.
    let mut found = vec![PathBuf::new()];
    for part in path.components() {
        let name = part.as_os_str();
        let glob = name
            .as_bytes()
            .iter()
            .any(|c| matches!(c, b'*' | b'?' | b'['));
        if !glob {
            for f in &mut found {
                f.push(name);
            }
            continue;
        }
        let Ok(m) = globset::GlobBuilder::new(&name.to_string_lossy())
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher())
        else {
            return vec![path];
        };
        let mut next = Vec::new();
        for dir in &found {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut here: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| m.is_match(e.file_name()))
                .map(|e| e.path())
                .collect();
            here.sort();
            next.extend(here);
        }
        found = next;
    }
    found
}

/// `saphan-home-exposed` when `path` (existing) can be changed by someone
/// other than the operator or root; `why` says what that someone gains.
fn check_exposed(path: &Path, why: &str) -> Result<(), TransportError> {
    // `/dev/null` (`UserKnownHostsFile /dev/null`) is everyone's and holds nothing.
    use std::os::unix::fs::FileTypeExt;
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()) {
        return Ok(());
    }
    match crate::fsutil::exposure(path, true) {
        None => Ok(()),
        Some(x) => Err(TransportError::ConfigExposed {
            path: path.to_path_buf(),
            detail: x.detail,
            why: why.to_string(),
            fix: x.fix,
        }),
    }
}

fn check_alias(ssh_config: &Path, alias: &str) -> Result<(), TransportError> {
    if alias.is_empty()
        || alias.starts_with('-')
        || alias.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(config_err(
            ssh_config,
            alias,
            "not a usable host alias (empty, starts with '-', or holds whitespace) — fix the machine row",
        ));
    }
    Ok(())
}

/// The OpenSSH client, if installed.
pub fn ssh_program() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("ssh"))
        .find(|p| p.is_file())
}

/// A cache of `ssh -G` output, keyed by everything that output depends on.
///
/// The key is the sha256 of: the `ssh` program (path, size, mtime, inode),
/// the alias and the `-l`/`-p` overrides, the bytes of the config file and
/// of every file it `Include`s (followed as [`check_config_files`] follows
/// them, the list of matched paths included, so a new glob match changes
/// the key), and the environment `ssh -G` expands tokens from (`HOME`,
/// `USER`, `LOGNAME`, `SSH_AUTH_SOCK`, the uid, this host's name). A config
/// whose answer can change without any of these changing is never cached:
/// any `Match` block (`Match exec` runs a command, `Match localnetwork`
/// reads interfaces) or `CanonicalizeHostname` (DNS). An entry is one file,
/// `<cache_dir>/<key hex>`, holding exactly what `ssh -G` printed; written
/// whole (temp + rename), and ignored when anyone but the operator (or root)
/// could have changed it. A file changed within the same mtime tick still
/// changes its bytes, hence the key: nothing stale is ever read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshGCache {
    /// Lowercase hex sha256 of the inputs.
    pub key: String,
}

impl SshGCache {
    /// The key for one resolution, or `None` when the config cannot be
    /// cached (see the type's doc) or a file cannot be read.
    pub fn key(
        ssh: &Path,
        ssh_config: &Path,
        alias: &str,
        user: Option<&str>,
        port: Option<u16>,
    ) -> Option<SshGCache> {
        use sha2::{Digest, Sha256};
        use std::os::unix::fs::MetadataExt;
        let mut h = Sha256::new();
        let mut field = |name: &str, bytes: &[u8]| {
            h.update(name.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field("format", b"ssh-g-cache-2");
        let m = std::fs::metadata(ssh).ok()?;
        field("ssh", ssh.as_os_str().as_encoded_bytes());
        field(
            "ssh-meta",
            format!("{} {} {} {}", m.len(), m.mtime(), m.mtime_nsec(), m.ino()).as_bytes(),
        );
        field("alias", alias.as_bytes());
        field("user", user.unwrap_or("").as_bytes());
        field(
            "port",
            port.map(|p| p.to_string()).unwrap_or_default().as_bytes(),
        );
        for var in ["HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK"] {
            let v = std::env::var_os(var);
            field(
                var,
                v.as_deref()
                    .map(|v| v.as_encoded_bytes())
                    .unwrap_or(b"\0unset"),
            );
        }
        field("uid", nix::unistd::getuid().as_raw().to_string().as_bytes());
        let mut host = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at
        // most that many bytes.
        if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } != 0 {
            return None;
        }
        field("hostname", &host);
        let mut seen = Vec::new();
        let mut stack = vec![(ssh_config.to_path_buf(), 0usize)];
        while let Some((file, depth)) = stack.pop() {
            field("file", file.as_os_str().as_encoded_bytes());
            let text = match std::fs::read(&file) {
                Ok(t) => t,
                // An Include naming a file that does not exist is fine to ssh.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && depth > 0 => {
                    field("absent", b"");
                    continue;
                }
                Err(_) => return None,
            };
            field("bytes", &text);
            if seen.contains(&file) || depth >= MAX_INCLUDE_DEPTH {
                continue;
            }
            seen.push(file.clone());
            let mut includes = Vec::new();
            for (key, rest) in directives(&text) {
                if key.eq_ignore_ascii_case(b"match")
                    || key.eq_ignore_ascii_case(b"canonicalizehostname")
                {
                    return None;
                }
                if key.eq_ignore_ascii_case(b"include") {
                    for word in include_words(rest) {
                        let mut targets = include_targets(&word);
                        targets.sort();
                        includes.extend(targets);
                    }
                }
            }
            // Depth first, in the order written (the stack pops the last).
            stack.extend(includes.into_iter().rev().map(|f| (f, depth + 1)));
        }
        Some(SshGCache {
            key: hex::encode(h.finalize()),
        })
    }

    /// The settings from the entry in `dir`, or from `ssh -G` (then kept).
    /// A cache that cannot be read or written is only slower, never wrong.
    pub async fn resolve(
        &self,
        dir: &Path,
        ssh: &Path,
        ssh_config: &Path,
        alias: &str,
    ) -> Result<HostSettings, TransportError> {
        let entry = dir.join(&self.key);
        if crate::fsutil::exposure(&entry, true).is_none()
            && let Ok(text) = tokio::fs::read_to_string(&entry).await
        {
            tracing::debug!(alias, entry = %entry.display(), "ssh -G answered from the cache");
            return parse_ssh_g(&text, alias, ssh_config);
        }
        let text = ssh_g_text(ssh, ssh_config, alias, None, None).await?;
        let settings = parse_ssh_g(&text, alias, ssh_config)?;
        let bytes = text.into_bytes();
        let dir = dir.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::PermissionsExt;
            std::fs::create_dir_all(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
            crate::fsutil::atomic_write(&entry, &bytes).map_err(std::io::Error::other)
        })
        .await;
        Ok(settings)
    }
}

/// Resolve with `ssh -G` (the OpenSSH reference).
pub async fn resolve_ssh_g(
    ssh: &Path,
    ssh_config: &Path,
    alias: &str,
    user: Option<&str>,
    port: Option<u16>,
) -> Result<HostSettings, TransportError> {
    let text = ssh_g_text(ssh, ssh_config, alias, user, port).await?;
    parse_ssh_g(&text, alias, ssh_config)
}

/// What `ssh -G -o BatchMode=no -F ssh_config [-l user] [-p port] -- alias` prints, or the
/// `ssh-config` refusal quoting why it failed.
async fn ssh_g_text(
    ssh: &Path,
    ssh_config: &Path,
    alias: &str,
    user: Option<&str>,
    port: Option<u16>,
) -> Result<String, TransportError> {
    check_alias(ssh_config, alias)?;
    // `BatchMode=no`: saphan never prompts, so BatchMode means nothing to
    // it — but with `BatchMode yes` OpenSSH reports an unset
    // `ServerAliveInterval` as 300 s, and a cut-off machine would then be
    // declared lost after 20 minutes instead of saphan's own default
    // (SshOptions::keepalive_interval). An interval the config sets still wins.
    let mut cmd = Cmd::new(ssh)
        .arg("-G")
        .arg("-o")
        .arg("BatchMode=no")
        .arg("-F")
        .arg(ssh_config);
    if let Some(u) = user {
        cmd = cmd.arg("-l").arg(u);
    }
    if let Some(p) = port {
        cmd = cmd.arg("-p").arg(p.to_string());
    }
    let out = exec::run(cmd.arg("--").arg(alias).timeout(SSH_G_BUDGET))
        .await
        .map_err(|e| {
            config_err(
                ssh_config,
                alias,
                &format!("could not run {}: {e}", ssh.display()),
            )
        })?;
    if !out.status.success() {
        let why: Vec<String> = out
            .stderr_str()
            .lines()
            .filter(|l| !l.starts_with("Pseudo-terminal"))
            .map(str::to_string)
            .collect();
        return Err(config_err(
            ssh_config,
            alias,
            &format!(
                "`ssh -G` rejects it: {} — fix the file (`ssh -G -F {} {alias}` shows the same)",
                why.join("; "),
                ssh_config.display()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parse the output of `ssh -G` (one `key value` per line, keys lower case,
/// `identityfile` repeated, known_hosts files space-separated) for `alias`.
pub fn parse_ssh_g(
    text: &str,
    alias: &str,
    ssh_config: &Path,
) -> Result<HostSettings, TransportError> {
    let mut hostname = None;
    let mut port = None;
    let mut user = None;
    let mut identity_files = Vec::new();
    let mut identities_only = false;
    let mut identity_agent = None;
    let mut user_kh = Vec::new();
    let mut global_kh = Vec::new();
    let mut host_key_alias = None;
    let mut proxy_jump = Vec::new();
    let mut proxy_command = None;
    let mut connect_timeout = None;
    let mut alive = None;
    let mut alive_max = 3;
    let mut strict = String::from("ask");
    let bad = |what: &str, v: &str| {
        config_err(
            ssh_config,
            alias,
            &format!("`ssh -G` printed an unreadable {what} `{v}` — report this"),
        )
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else {
            continue;
        };
        match k {
            "hostname" => hostname = Some(v.to_string()),
            "port" => port = Some(v.parse::<u16>().map_err(|_| bad("port", v))?),
            "user" => user = Some(v.to_string()),
            "identityfile" => identity_files.push(v.to_string()),
            "identitiesonly" => identities_only = yes(v),
            "identityagent" => identity_agent = Some(v.to_string()),
            "userknownhostsfile" => user_kh = split_paths(v),
            "globalknownhostsfile" => global_kh = split_paths(v),
            "hostkeyalias" => host_key_alias = Some(v.to_string()),
            "proxyjump" if v != "none" => proxy_jump = split_jumps(v),
            "proxycommand" if v != "none" => proxy_command = Some(v.to_string()),
            "connecttimeout" => {
                connect_timeout = seconds(v).map_err(|_| bad("connecttimeout", v))?
            }
            "serveraliveinterval" => {
                alive = seconds(v).map_err(|_| bad("serveraliveinterval", v))?
            }
            "serveralivecountmax" => {
                alive_max = v.parse().map_err(|_| bad("serveralivecountmax", v))?
            }
            "stricthostkeychecking" => strict = v.to_string(),
            _ => {}
        }
    }
    let hostname = hostname.ok_or_else(|| bad("output (no hostname line)", ""))?;
    let user = user.ok_or_else(|| bad("output (no user line)", ""))?;
    let port = port.unwrap_or(22);
    let tokens = Tokens::new(alias, &hostname, &user, port)?;
    Ok(HostSettings {
        alias: alias.to_string(),
        identity_files: identity_files
            .iter()
            .map(|f| tokens.expand_path(f))
            .collect::<Result<_, _>>()
            .map_err(|e| config_err(ssh_config, alias, &e))?,
        identities_only,
        identity_agent: agent_socket(identity_agent.as_deref(), &tokens)
            .map_err(|e| config_err(ssh_config, alias, &e))?,
        user_known_hosts_files: user_kh,
        global_known_hosts_files: global_kh,
        host_key_alias,
        proxy_jump,
        proxy_command,
        connect_timeout,
        server_alive_interval: alive,
        server_alive_count_max: alive_max,
        strict_host_key_checking: strict,
        config_file: ssh_config.to_path_buf(),
        hostname,
        port,
        user,
    })
}

/// Resolve with the `ssh2-config` crate, for machines without an `ssh`
/// program. Refuses a config that uses `Match`.
pub fn resolve_fallback(
    ssh_config: &Path,
    alias: &str,
    user_override: Option<&str>,
    port_override: Option<u16>,
) -> Result<HostSettings, TransportError> {
    use ssh2_config::{ParseRule, SshConfig};
    check_alias(ssh_config, alias)?;
    let me = local_user().map_err(|e| config_err(ssh_config, alias, &e))?;
    let file = std::fs::File::open(ssh_config)
        .map_err(|e| config_err(ssh_config, alias, &format!("cannot read it: {e}")))?;
    let parsed = SshConfig::default()
        .home_dir(&me.home)
        .parse(
            &mut std::io::BufReader::new(file),
            ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS,
        )
        .map_err(|e| {
            config_err(
                ssh_config,
                alias,
                &format!("cannot parse it: {e} — fix the file"),
            )
        })?;
    if parsed.get_hosts().iter().any(|h| {
        h.params
            .ignored_fields
            .keys()
            .any(|k| k.eq_ignore_ascii_case("match"))
    }) {
        return Err(config_err(
            ssh_config,
            alias,
            "it uses `Match`, which only the OpenSSH client evaluates — install openssh-client (saphan then resolves with `ssh -G`) or use `Host` blocks",
        ));
    }
    let p = parsed.query(alias);
    // Keywords ssh2-config stores without interpreting, keyed as written.
    let other = |k: &str| -> Option<String> {
        p.unsupported_fields
            .iter()
            .chain(p.ignored_fields.iter())
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.join(" "))
    };
    let port = port_override.or(p.port).unwrap_or(22);
    let user = user_override
        .map(str::to_string)
        .or(p.user.clone())
        .unwrap_or_else(|| me.name.clone());
    let raw_host = p.host_name.clone().unwrap_or_else(|| alias.to_string());
    let hostname = expand_percent(&raw_host, &|c| match c {
        'h' => Some(alias.to_string()),
        _ => None,
    })
    .map_err(|e| config_err(ssh_config, alias, &e))?
    .to_lowercase();
    let tokens = Tokens::new(alias, &hostname, &user, port)?;
    let files = |v: Option<String>, default: &[&str]| -> Result<Vec<PathBuf>, TransportError> {
        match v {
            Some(v) => v
                .split_whitespace()
                .map(|f| tokens.expand_path(f))
                .collect::<Result<_, _>>()
                .map_err(|e| config_err(ssh_config, alias, &e)),
            None => default
                .iter()
                .map(|f| tokens.expand_path(f))
                .collect::<Result<_, _>>()
                .map_err(|e| config_err(ssh_config, alias, &e)),
        }
    };
    let identity_files = match &p.identity_file {
        Some(list) => list
            .iter()
            .map(|f| tokens.expand_path(&f.to_string_lossy()))
            .collect::<Result<_, _>>()
            .map_err(|e| config_err(ssh_config, alias, &e))?,
        None => files(
            None,
            &[
                "~/.ssh/id_rsa",
                "~/.ssh/id_ecdsa",
                "~/.ssh/id_ecdsa_sk",
                "~/.ssh/id_ed25519",
                "~/.ssh/id_ed25519_sk",
                "~/.ssh/id_xmss",
                "~/.ssh/id_dsa",
            ],
        )?,
    };
    let bad =
        |k: &str, v: &str| config_err(ssh_config, alias, &format!("bad {k} `{v}` — fix the file"));
    let proxy_jump = match p.proxy_jump.as_ref() {
        Some(v) if !(v.len() == 1 && v[0] == "none") => {
            v.iter().flat_map(|s| split_jumps(s)).collect()
        }
        _ => Vec::new(),
    };
    Ok(HostSettings {
        alias: alias.to_string(),
        identity_files,
        identities_only: other("identitiesonly").is_some_and(|v| yes(&v)),
        identity_agent: agent_socket(other("identityagent").as_deref(), &tokens)
            .map_err(|e| config_err(ssh_config, alias, &e))?,
        user_known_hosts_files: files(
            other("userknownhostsfile"),
            &["~/.ssh/known_hosts", "~/.ssh/known_hosts2"],
        )?,
        global_known_hosts_files: files(
            other("globalknownhostsfile"),
            &["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"],
        )?,
        host_key_alias: other("hostkeyalias"),
        proxy_jump,
        proxy_command: other("proxycommand").filter(|v| v != "none"),
        connect_timeout: p.connect_timeout.filter(|d| !d.is_zero()),
        server_alive_interval: p.server_alive_interval.filter(|d| !d.is_zero()),
        server_alive_count_max: match other("serveralivecountmax") {
            Some(v) => v.parse().map_err(|_| bad("ServerAliveCountMax", &v))?,
            None => 3,
        },
        strict_host_key_checking: other("stricthostkeychecking").unwrap_or_else(|| "ask".into()),
        config_file: ssh_config.to_path_buf(),
        hostname,
        port,
        user,
    })
}

/// One `ProxyJump` hop: `[user@]host[:port]` or `ssh://[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpSpec {
    /// User, when the hop names one.
    pub user: Option<String>,
    /// Host alias or address (IPv6 without brackets).
    pub host: String,
    /// Port, when the hop names one.
    pub port: Option<u16>,
}

/// Parse one hop of a `ProxyJump` list.
pub fn parse_jump(spec: &str) -> Option<JumpSpec> {
    let s = spec.strip_prefix("ssh://").unwrap_or(spec);
    let (user, rest) = match s.rsplit_once('@') {
        Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
        Some(_) => return None,
        None => (None, s),
    };
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (h, after) = r.split_once(']')?;
        match after.strip_prefix(':') {
            Some(p) => (h.to_string(), Some(p.parse().ok()?)),
            None if after.is_empty() => (h.to_string(), None),
            None => return None,
        }
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p.parse().ok()?)),
            _ => (rest.to_string(), None),
        }
    };
    if host.is_empty() || host.starts_with('-') {
        return None;
    }
    Some(JumpSpec { user, host, port })
}

fn split_jumps(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn yes(v: &str) -> bool {
    matches!(v, "yes" | "true")
}

fn seconds(v: &str) -> Result<Option<Duration>, ()> {
    if v == "none" {
        return Ok(None);
    }
    let n: u64 = v.parse().map_err(|_| ())?;
    Ok((n > 0).then(|| Duration::from_secs(n)))
}

/// `ssh -G` joins known_hosts files with spaces, so a path that itself holds
/// a space is split; such a piece does not start with `/` or `~` (the files
/// it prints are expanded, hence absolute), so it is glued back.
fn split_paths(v: &str) -> Vec<PathBuf> {
    let mut out: Vec<String> = Vec::new();
    for piece in v.split(' ') {
        match out.last_mut() {
            Some(last) if !(piece.starts_with('/') || piece.starts_with('~')) => {
                last.push(' ');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out.into_iter()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

fn agent_socket(v: Option<&str>, tokens: &Tokens) -> Result<Option<PathBuf>, String> {
    match v {
        Some("none") => Ok(None),
        None | Some("SSH_AUTH_SOCK") => Ok(std::env::var_os("SSH_AUTH_SOCK")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)),
        Some(v) if v.starts_with('$') => Ok(std::env::var_os(&v[1..])
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)),
        Some(v) => tokens.expand_path(v).map(Some),
    }
}

struct LocalUser {
    name: String,
    home: PathBuf,
    uid: u32,
}

/// The local user as OpenSSH sees it: from the password database, not `$HOME`.
fn local_user() -> Result<LocalUser, String> {
    let uid = nix::unistd::Uid::current();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => Ok(LocalUser {
            name: u.name,
            home: u.dir,
            uid: uid.as_raw(),
        }),
        _ => Err(format!(
            "uid {uid} has no password entry, so `~` and %d cannot be expanded"
        )),
    }
}

fn local_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The `%` tokens OpenSSH expands in `IdentityFile`, `UserKnownHostsFile`
/// and `IdentityAgent` (ssh_config(5) "TOKENS"), plus a leading `~`.
struct Tokens {
    alias: String,
    hostname: String,
    user: String,
    port: u16,
    me: LocalUser,
}

impl Tokens {
    fn new(alias: &str, hostname: &str, user: &str, port: u16) -> Result<Tokens, TransportError> {
        Ok(Tokens {
            alias: alias.into(),
            hostname: hostname.into(),
            user: user.into(),
            port,
            me: local_user().map_err(|e| TransportError::SshConfig {
                alias: alias.into(),
                file: PathBuf::new(),
                detail: e,
            })?,
        })
    }

    fn expand_path(&self, raw: &str) -> Result<PathBuf, String> {
        let tilde = if raw == "~" {
            self.me.home.to_string_lossy().into_owned()
        } else if let Some(rest) = raw.strip_prefix("~/") {
            format!(
                "{}/{rest}",
                self.me.home.to_string_lossy().trim_end_matches('/')
            )
        } else if let Some(rest) = raw.strip_prefix('~') {
            // ~otheruser/… : look the user up as ssh does.
            let (name, rest) = rest.split_once('/').unwrap_or((rest, ""));
            match nix::unistd::User::from_name(name) {
                Ok(Some(u)) => format!("{}/{rest}", u.dir.to_string_lossy().trim_end_matches('/')),
                _ => return Err(format!("`{raw}`: no such user `{name}`")),
            }
        } else {
            raw.to_string()
        };
        let host = local_hostname();
        let short = host.split('.').next().unwrap_or("").to_string();
        let expanded = expand_percent(&tilde, &|c| match c {
            'd' => Some(self.me.home.to_string_lossy().into_owned()),
            'h' => Some(self.hostname.clone()),
            'n' => Some(self.alias.clone()),
            'p' => Some(self.port.to_string()),
            'r' => Some(self.user.clone()),
            'u' => Some(self.me.name.clone()),
            'i' => Some(self.me.uid.to_string()),
            'l' => Some(host.clone()),
            'L' => Some(short.clone()),
            _ => None,
        })?;
        Ok(PathBuf::from(expanded))
    }
}

fn expand_percent(s: &str, value: &dyn Fn(char) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('%') => out.push('%'),
            Some(t) => match value(t) {
                Some(v) => out.push_str(&v),
                None => {
                    return Err(format!(
                        "`{s}` uses the token %{t}, which saphan does not expand — write the value out"
                    ));
                }
            },
            None => return Err(format!("`{s}` ends in a lone %")),
        }
    }
    Ok(out)
}

fn config_err(file: &Path, alias: &str, detail: &str) -> TransportError {
    TransportError::SshConfig {
        alias: alias.to_string(),
        file: file.to_path_buf(),
        detail: detail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn included_files_others_can_write_are_found_through_globs_and_nesting() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("conf.d");
        std::fs::create_dir(&conf).unwrap();
        let cfg = d.path().join("config");
        std::fs::write(
            &cfg,
            format!("Host x\n  Include={}/*.conf\n", conf.display()),
        )
        .unwrap();
        let nested = d.path().join("nested");
        std::fs::write(
            conf.join("a.conf"),
            format!("Include \"{}\"\n", nested.display()),
        )
        .unwrap();
        std::fs::write(conf.join("skip.txt"), "").unwrap();
        std::fs::write(&nested, "").unwrap();
        let mode =
            |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        check_config_files(&cfg).unwrap();
        // Not matched by the glob: not included, not checked.
        mode(&conf.join("skip.txt"), 0o666);
        check_config_files(&cfg).unwrap();
        mode(&nested, 0o666);
        let e = check_config_files(&cfg).unwrap_err();
        assert!(
            matches!(&e, TransportError::ConfigExposed { path, .. } if *path == nested),
            "{e}"
        );
        mode(&nested, 0o644);
        mode(d.path(), 0o777);
        assert!(check_config_files(&cfg).is_err());
        mode(d.path(), 0o700);
    }

    /// A byte that is not UTF-8 (a Latin-1 comment) in a config, and a
    /// file name that is not UTF-8, hide no Include from the check.
    #[test]
    fn includes_are_found_in_configs_and_names_that_are_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9.conf");
        let inc = d.path().join(name);
        std::fs::write(&inc, "").unwrap();
        let cfg = d.path().join("config");
        let mut text = b"# r\xe9seau du bureau\nHost x\n  Include ".to_vec();
        text.extend_from_slice(inc.as_os_str().as_bytes());
        text.push(b'\n');
        std::fs::write(&cfg, &text).unwrap();
        check_config_files(&cfg).unwrap();
        std::fs::set_permissions(&inc, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_config_files(&cfg).unwrap_err();
        assert!(
            matches!(&e, TransportError::ConfigExposed { path, .. } if *path == inc),
            "{e}"
        );
    }

    /// Wildcards in a directory part, a quoted part joined to a glob, a
    /// backslash-escaped space; and a safe file in a directory others can
    /// write (they can replace it).
    #[test]
    fn includes_through_directory_globs_quotes_and_escapes_are_checked() {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("inc");
        for sub in ["s1", "with space"] {
            std::fs::create_dir_all(inc.join(sub)).unwrap();
            std::fs::write(inc.join(sub).join("a.conf"), "").unwrap();
        }
        let root = inc.display();
        let cases = [
            (format!("Include {root}/s*/*.conf\n"), inc.join("s1/a.conf")),
            (
                format!("Include \"{root}/with space/\"*.conf\n"),
                inc.join("with space/a.conf"),
            ),
            (
                format!("Include {root}/with\\ space/a.conf\n"),
                inc.join("with space/a.conf"),
            ),
        ];
        let cfg = d.path().join("config");
        for (text, target) in cases {
            std::fs::write(&cfg, &text).unwrap();
            check_config_files(&cfg).unwrap();
            mode(&target, 0o666);
            let e = check_config_files(&cfg).unwrap_err();
            assert!(
                matches!(&e, TransportError::ConfigExposed { path, .. } if *path == target),
                "{text}: {e}"
            );
            mode(&target, 0o644);
            let dir = target.parent().unwrap();
            mode(dir, 0o777);
            let e = check_config_files(&cfg).unwrap_err();
            assert!(
                matches!(&e, TransportError::ConfigExposed { path, .. } if path == dir),
                "{text}: {e}"
            );
            mode(dir, 0o755);
        }
    }

    #[test]
    fn directives_split_keyword_and_arguments_like_ssh() {
        let text = b"  Include = a  \"b c\"\n\n# Include x\nHostName\th\r\n";
        let got: Vec<(&[u8], &[u8])> = directives(text).collect();
        assert_eq!(
            got,
            [
                (&b"Include"[..], &b"a  \"b c\""[..]),
                (&b"#"[..], &b"Include x"[..]),
                (&b"HostName"[..], &b"h"[..]),
            ]
        );
        let words = |b: &[u8]| include_words(b);
        assert_eq!(words(got[0].1), [b"a".to_vec(), b"b c".to_vec()]);
        assert_eq!(words(b"\"unclosed x"), [b"unclosed x".to_vec()]);
        assert_eq!(
            words(b"\"/a b/\"*.conf with\\ space 'q'x # not this"),
            [
                b"/a b/*.conf".to_vec(),
                b"with space".to_vec(),
                b"qx".to_vec()
            ]
        );
    }

    /// Verbatim `ssh -G` output from OpenSSH 9.2 (trimmed to the keys saphan reads
    /// plus a few it ignores).
    const SSH_G: &str = "\
host m1
user deploy
hostname 10.250.0.11
port 2222
addressfamily any
batchmode yes
identitiesonly yes
identityagent none
identityfile ~/.ssh/id_a
identityfile %d/keys/%r@%h:%p
identityfile /abs/%n
userknownhostsfile /tmp/kh one /tmp/kh2
globalknownhostsfile /etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2
hostkeyalias m1-key
proxyjump jump@m0:2200,m9
connecttimeout 7
serveraliveinterval 0
serveralivecountmax 5
stricthostkeychecking yes
";

    #[test]
    fn parses_fixed_ssh_g_output() {
        let s = parse_ssh_g(SSH_G, "m1", Path::new("/cfg")).unwrap();
        let home = local_user().unwrap().home;
        let home = home.to_string_lossy().trim_end_matches('/').to_string();
        assert_eq!(s.hostname, "10.250.0.11");
        assert_eq!(s.user, "deploy");
        assert_eq!(s.port, 2222);
        assert_eq!(
            s.identity_files,
            vec![
                PathBuf::from(format!("{home}/.ssh/id_a")),
                PathBuf::from(format!("{home}/keys/deploy@10.250.0.11:2222")),
                PathBuf::from("/abs/m1"),
            ]
        );
        assert!(s.identities_only);
        assert_eq!(s.identity_agent, None);
        assert_eq!(
            s.user_known_hosts_files,
            vec![PathBuf::from("/tmp/kh one"), PathBuf::from("/tmp/kh2")]
        );
        assert_eq!(s.global_known_hosts_files.len(), 2);
        assert_eq!(s.host_key_alias.as_deref(), Some("m1-key"));
        assert_eq!(
            s.proxy_jump,
            vec!["jump@m0:2200".to_string(), "m9".to_string()]
        );
        assert_eq!(s.connect_timeout, Some(Duration::from_secs(7)));
        assert_eq!(s.server_alive_interval, None);
        assert_eq!(s.server_alive_count_max, 5);
        assert_eq!(s.strict_host_key_checking, "yes");
    }

    #[test]
    fn parse_refuses_garbage() {
        assert!(parse_ssh_g("hostname x\nuser u\nport many\n", "x", Path::new("/c")).is_err());
        assert!(parse_ssh_g("user u\n", "x", Path::new("/c")).is_err());
        let e = parse_ssh_g(
            "hostname x\nuser u\nidentityfile %Z\n",
            "x",
            Path::new("/c"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("%Z"), "{e}");
    }

    #[test]
    fn jump_specs() {
        let j = |s| parse_jump(s);
        assert_eq!(
            j("m0"),
            Some(JumpSpec {
                user: None,
                host: "m0".into(),
                port: None
            })
        );
        assert_eq!(
            j("bob@h:2200"),
            Some(JumpSpec {
                user: Some("bob".into()),
                host: "h".into(),
                port: Some(2200)
            })
        );
        assert_eq!(
            j("ssh://a@[::1]:22"),
            Some(JumpSpec {
                user: Some("a".into()),
                host: "::1".into(),
                port: Some(22)
            })
        );
        assert_eq!(
            j("[fe80::1]"),
            Some(JumpSpec {
                user: None,
                host: "fe80::1".into(),
                port: None
            })
        );
        assert_eq!(j("h:notaport"), None);
        assert_eq!(j("-oProxyCommand=x"), None);
        assert_eq!(j("@h"), None);
    }

    #[test]
    fn known_hosts_paths_with_spaces_are_glued_back() {
        assert_eq!(
            split_paths("/a b c /d ~/e f"),
            vec![
                PathBuf::from("/a b c"),
                PathBuf::from("/d"),
                PathBuf::from("~/e f")
            ]
        );
    }
}
