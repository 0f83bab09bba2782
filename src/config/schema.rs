//! config-v1's closed vocabulary: which scopes exist under `verify`, which
//! keys each scope takes, how a `config set` KEY is parsed, and how every
//! value is read and checked. Nothing here touches the file; [`super::edit`]
//! and [`super::validate`] use it.

use super::{At, ConfigError};
use crate::report::ReportKind;
use std::path::{Component, Path};
use std::time::Duration;

/// The keys of `[verify.full]` and `[verify.affected]`.
pub const SUITE_KEYS: &[&str] = &["argv", "report", "report_path", "timeout", "seal"];
/// The keys of `[verify.provision.<alias>]`.
pub const PROVISION_KEYS: &[&str] = &["repo", "source", "dest"];
/// The scopes an operator may declare, as printed in messages.
pub const SCOPES_TEXT: &str = "verify.full, verify.affected and verify.provision.<alias>";

/// A scope under `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `verify.full`
    Full,
    /// `verify.affected`
    Affected,
    /// `verify.provision.<alias>`
    Provision(String),
}

impl Scope {
    /// The dotted path, e.g. `verify.provision.contract`.
    pub fn path(&self) -> String {
        match self {
            Scope::Full => "verify.full".into(),
            Scope::Affected => "verify.affected".into(),
            Scope::Provision(a) => format!("verify.provision.{a}"),
        }
    }
    /// The path segments from the document root.
    pub fn segments(&self) -> Vec<&str> {
        match self {
            Scope::Full => vec!["verify", "full"],
            Scope::Affected => vec!["verify", "affected"],
            Scope::Provision(a) => vec!["verify", "provision", a],
        }
    }
    /// The closed key set of this scope.
    pub fn keys(&self) -> &'static [&'static str] {
        match self {
            Scope::Full | Scope::Affected => SUITE_KEYS,
            Scope::Provision(_) => PROVISION_KEYS,
        }
    }
    /// The key every block of this scope must carry (`argv` or `repo`).
    pub fn required(&self) -> &'static str {
        match self {
            Scope::Full | Scope::Affected => "argv",
            Scope::Provision(_) => "repo",
        }
    }
}

/// A KEY given to `config set` or `config unset`, checked against the
/// vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPath {
    /// `verify.<scope>.<key>` with `key` in the scope's closed set.
    Key { scope: Scope, key: &'static str },
    /// `verify.<scope>` — a whole block (only `unset` accepts it).
    Scope(Scope),
    /// `fleet.freshness` — the one key saphan reads outside `verify`.
    FleetFreshness,
}

impl KeyPath {
    /// The dotted spelling.
    pub fn dotted(&self) -> String {
        match self {
            KeyPath::Key { scope, key } => format!("{}.{key}", scope.path()),
            KeyPath::Scope(s) => s.path(),
            KeyPath::FleetFreshness => "fleet.freshness".into(),
        }
    }
}

/// True for a bare TOML key usable as a provision alias (`[A-Za-z0-9_-]+`),
/// so the alias can be spelled in a dotted KEY and in repair commands.
pub fn alias_ok(alias: &str) -> bool {
    !alias.is_empty()
        && alias
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parse a dotted KEY strictly: every scope and key must be in the
/// vocabulary.
///
/// Errors: `config-key-foreign` (outside `verify.*` / `fleet.freshness`),
/// `config-key-invalid` (shape), `config-scope-reserved`,
/// `config-scope-unknown`, `config-scope-missing`, `config-alias-invalid`,
/// `config-key-unknown`.
pub fn parse_key(key: &str) -> Result<KeyPath, ConfigError> {
    let segs: Vec<&str> = key.split('.').collect();
    let invalid = |why: &str| ConfigError::KeyInvalid {
        key: key.to_string(),
        why: why.to_string(),
    };
    if segs.iter().any(|s| s.is_empty()) {
        return Err(invalid(
            "a KEY is dot-separated names with nothing empty between the dots",
        ));
    }
    match segs[0] {
        "verify" => {}
        "fleet" if segs.len() == 2 && segs[1] == "freshness" => return Ok(KeyPath::FleetFreshness),
        _ => {
            return Err(ConfigError::KeyForeign {
                key: key.to_string(),
            });
        }
    }
    if segs.len() == 1 {
        return Err(invalid("name a scope and a key, e.g. verify.full.argv"));
    }
    let (scope, rest) = match segs[1] {
        "full" => (Scope::Full, &segs[2..]),
        "affected" => (Scope::Affected, &segs[2..]),
        "provision" => {
            let Some(alias) = segs.get(2) else {
                return Err(invalid(
                    "a provision is named: verify.provision.<alias>.<key>",
                ));
            };
            if !alias_ok(alias) {
                return Err(ConfigError::AliasInvalid {
                    alias: alias.to_string(),
                    at: At::Request,
                });
            }
            (Scope::Provision(alias.to_string()), &segs[3..])
        }
        "surface" => {
            return Err(ConfigError::ScopeReserved {
                scope: "verify.surface".into(),
                at: At::Request,
            });
        }
        k if SUITE_KEYS.contains(&k) || PROVISION_KEYS.contains(&k) => {
            return Err(ConfigError::ScopeMissing {
                key: k.to_string(),
                at: At::Request,
            });
        }
        other => {
            return Err(ConfigError::ScopeUnknown {
                scope: format!("verify.{other}"),
                at: At::Request,
            });
        }
    };
    match rest {
        [] => Ok(KeyPath::Scope(scope)),
        [k] => match scope.keys().iter().find(|known| *known == k) {
            Some(known) => Ok(KeyPath::Key { scope, key: known }),
            None => Err(ConfigError::KeyUnknown {
                scope: scope.path(),
                key: k.to_string(),
                suggestion: suggest(k, scope.keys()),
                at: At::Request,
            }),
        },
        _ => Err(invalid(&format!(
            "{} takes plain keys ({}), nothing nested",
            scope.path(),
            scope.keys().join(", ")
        ))),
    }
}

/// The closest known key to a misspelling, when it is close enough to be a
/// plausible typo (edit distance ≤ 2, or equal ignoring case, `-` and `_`).
pub fn suggest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    known
        .iter()
        .map(|k| {
            let d = if norm(k) == norm(key) {
                0
            } else {
                distance(key, k)
            };
            (d, *k)
        })
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Split a comma-separated argv: `"go,test,./..."` → `["go","test","./..."]`.
/// Whitespace around each argument is trimmed; an empty argument (`"npm,,test"`,
/// or an empty string) is an error naming its 1-based position. Use the TOML
/// array form for arguments that contain commas or edge whitespace.
pub fn split_argv(s: &str) -> Result<Vec<String>, String> {
    let argv: Vec<String> = s.split(',').map(|a| a.trim().to_string()).collect();
    check_argv(argv)
}

fn check_argv(argv: Vec<String>) -> Result<Vec<String>, String> {
    if argv.len() == 1 && argv[0].is_empty() {
        return Err("it is empty: name the program to run".into());
    }
    if let Some(i) = argv.iter().position(|a| a.is_empty()) {
        return Err(format!("argument {} of {} is empty", i + 1, argv.len()));
    }
    Ok(argv)
}

/// Read an argv value: one comma-separated string or a TOML array of strings.
pub fn argv_from_value(v: &toml_edit::Value) -> Result<Vec<String>, String> {
    match v {
        toml_edit::Value::String(s) => split_argv(s.value()),
        toml_edit::Value::Array(a) => {
            let mut argv = Vec::new();
            for (i, item) in a.iter().enumerate() {
                match item.as_str() {
                    Some(s) => argv.push(s.to_string()),
                    None => return Err(format!("element {} of the array is not a string", i + 1)),
                }
            }
            if argv.is_empty() {
                return Err("the array is empty: name the program to run".into());
            }
            check_argv(argv)
        }
        _ => Err("it must be a string (\"go,test,./...\") or an array of strings".into()),
    }
}

/// Parse a duration such as `20m`, `90s`, `1h30m` (humantime syntax). Zero
/// is refused: a budget of nothing measures nothing.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime_parse(s)?;
    if d.is_zero() {
        return Err("a zero duration is no budget at all".into());
    }
    Ok(d)
}

/// humantime's parse of `s` (trimmed), with an error that names the
/// input. A bare number gets a hint every saphan duration accepts —
/// `5` → "write 5s (seconds) or 5m (minutes)" — rather than humantime's
/// own "for example 5sec or 5ms", which the one-second floors refuse.
pub fn humantime_parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    humantime::parse_duration(t).map_err(|e| match e {
        humantime::DurationError::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!(
                "`{t}` is not a duration: {value} has no unit — write {value}s (seconds) or {value}m (minutes)"
            )
        }
        e => format!("`{t}` is not a duration like 30s, 20m or 1h30m ({e})"),
    })
}

/// The shortest suite budget accepted: one second.
pub const BUDGET_MIN: Duration = Duration::from_secs(1);
/// The longest suite budget accepted: 30 days.
pub const BUDGET_MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// Parse a suite budget — `verify.<suite>.timeout` and `certify --timeout`
/// both go through here — as [`parse_duration`] does, then require it to lie
/// between [`BUDGET_MIN`] (1 s) and [`BUDGET_MAX`] (30 days). The error names
/// the range.
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let range = "a budget must be between 1s and 30d";
    let d = humantime_parse(s).map_err(|e| format!("{e}; {range}"))?;
    if d < BUDGET_MIN {
        return Err(format!("`{}` is too short; {range}", s.trim()));
    }
    if d > BUDGET_MAX {
        return Err(format!("`{}` is too long; {range}", s.trim()));
    }
    Ok(d)
}

/// Print a duration the way an operator writes one: `24h`, `1h30m`,
/// `20m`, `1m30s`, `1.5s` (readable back by [`parse_duration`]).
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    let ms = d.subsec_millis();
    if s > 0 || ms > 0 || out.is_empty() {
        if ms > 0 {
            out.push_str(format!("{s}.{ms:03}").trim_end_matches('0'));
            out.push('s');
        } else {
            out.push_str(&format!("{s}s"));
        }
    }
    out
}

/// A path relative to the tree root that cannot escape it: not absolute, no
/// `..`, not inside `.git` (compared case-insensitively: on a
/// case-insensitive filesystem `.GIT` is the same directory).
fn check_relative(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("it is empty".into());
    }
    let p = Path::new(s);
    if p.is_absolute() {
        return Err("it must be relative to the repository root, not absolute".into());
    }
    for c in p.components() {
        match c {
            Component::ParentDir => {
                return Err("it must not climb out of the tree with `..`".into());
            }
            Component::Normal(n) if n.eq_ignore_ascii_case(".git") => {
                return Err("it must not point into .git".into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// A provision `dest`: [`check_relative`], and it must name a file — its
/// last component is a plain file name (not `.`), with no trailing slash.
fn check_dest(s: &str) -> Result<(), String> {
    check_relative(s)?;
    if s.ends_with('/') {
        return Err("it must name a file, not end in `/`".into());
    }
    match Path::new(s).components().next_back() {
        Some(Component::Normal(_)) => {}
        _ => return Err("it must end in a file name".into()),
    }
    if s.rsplit('/').next().is_some_and(|last| last == ".") {
        return Err("it must end in a file name, not `.`".into());
    }
    Ok(())
}

/// Check one value for `key` of `scope` (or `fleet.freshness` when `scope`
/// is `None`), returning a short reason and the fix when it is not
/// acceptable.
pub fn check_value(
    scope: Option<&Scope>,
    key: &str,
    v: &toml_edit::Value,
) -> Result<(), (String, String)> {
    let s = v.as_str();
    let need_string = || {
        (
            "it must be a string".to_string(),
            "write it as a quoted string".to_string(),
        )
    };
    match (scope, key) {
        (Some(Scope::Full | Scope::Affected), "argv") => {
            argv_from_value(v).map(|_| ()).map_err(|e| {
                (
                    e,
                    "write it as \"<program>,<arg>,…\" (or a TOML array of strings)".into(),
                )
            })
        }
        (Some(_), "report") => {
            let s = s.ok_or_else(need_string)?;
            ReportKind::parse(s).map(|_| ()).ok_or_else(|| {
                (
                    "it is not a report kind".into(),
                    "use go-test-json, junit-xml or exitcode".into(),
                )
            })
        }
        (Some(_), "report_path") => {
            let s = s.ok_or_else(need_string)?;
            check_relative(s).map_err(|e| {
                (
                    e,
                    "give a glob relative to the repository root, like reports/*.xml".into(),
                )
            })?;
            globset::Glob::new(s).map(|_| ()).map_err(|e| {
                (
                    format!("it is not a valid glob: {e}"),
                    "fix the pattern".into(),
                )
            })
        }
        (Some(Scope::Full | Scope::Affected), "seal") => {
            let s = s.ok_or_else(need_string)?;
            crate::seal::Mode::parse(s).map(|_| ()).ok_or_else(|| {
                (
                    "it is not a seal mode".into(),
                    "use auto, required or off".into(),
                )
            })
        }
        (Some(_), "timeout") => {
            let s = s.ok_or_else(need_string)?;
            parse_budget(s).map(|_| ()).map_err(|e| {
                (
                    e,
                    "write a duration from 1s to 30d, like 20m, 90s or 1h30m".into(),
                )
            })
        }
        (None, "freshness") => {
            let s = s.ok_or_else(need_string)?;
            parse_duration(s)
                .map(|_| ())
                .map_err(|e| (e, "write a duration like 20m, 90s or 1h30m".into()))
        }
        (Some(_), "repo" | "source") => {
            let s = s.ok_or_else(need_string)?;
            if s.is_empty() || !Path::new(s).is_absolute() {
                return Err((
                    "it must be an absolute path".into(),
                    "give the full path, starting with /".into(),
                ));
            }
            Ok(())
        }
        (Some(_), "dest") => {
            let s = s.ok_or_else(need_string)?;
            check_dest(s).map_err(|e| {
                (
                    e,
                    "give a path inside the tree, like .provision/openapi.yaml".into(),
                )
            })
        }
        _ => Err((
            "it is not a config-v1 key".into(),
            "see docs/config.md for the keys".into(),
        )),
    }
}

/// Turn the VALUE of `config set` into the TOML value to write. A VALUE that
/// starts with `[` for `argv` is read as a TOML array of strings; every other
/// value is written as a TOML string exactly as given.
pub fn value_from_cli(
    scope: Option<&Scope>,
    key: &str,
    raw: &str,
    dotted: &str,
) -> Result<toml_edit::Value, ConfigError> {
    let v = if key == "argv" && raw.trim_start().starts_with('[') {
        raw.trim()
            .parse::<toml_edit::Value>()
            .map_err(|e| ConfigError::ValueInvalid {
                key: dotted.to_string(),
                value: raw.to_string(),
                what: format!(
                    "it starts with `[` but is not a TOML array: {}",
                    e.to_string().trim()
                ),
                fix: "write it as [\"<program>\", \"<arg>\"] or as \"<program>,<arg>,…\"".into(),
                at: At::Request,
            })?
    } else {
        toml_edit::Value::from(raw)
    };
    check_value(scope, key, &v).map_err(|(what, fix)| {
        ConfigError::value(
            dotted,
            v.to_string().trim().to_string(),
            what,
            fix,
            At::Request,
        )
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_splits_on_commas() {
        assert_eq!(
            split_argv("go,test,-count=1,-json,./...").unwrap(),
            ["go", "test", "-count=1", "-json", "./..."]
        );
        assert_eq!(
            split_argv("pytest,--junitxml=reports/junit.xml").unwrap(),
            ["pytest", "--junitxml=reports/junit.xml"]
        );
        assert_eq!(split_argv("swift").unwrap(), ["swift"]);
    }

    #[test]
    fn argv_trims_edges() {
        assert_eq!(split_argv(" npm , test ").unwrap(), ["npm", "test"]);
    }

    #[test]
    fn argv_refuses_empty_arguments() {
        assert_eq!(
            split_argv("").unwrap_err(),
            "it is empty: name the program to run"
        );
        assert_eq!(
            split_argv("   ").unwrap_err(),
            "it is empty: name the program to run"
        );
        assert_eq!(
            split_argv("npm,,test").unwrap_err(),
            "argument 2 of 3 is empty"
        );
        assert_eq!(
            split_argv("npm,test,").unwrap_err(),
            "argument 3 of 3 is empty"
        );
        assert_eq!(split_argv(",npm").unwrap_err(), "argument 1 of 2 is empty");
    }

    #[test]
    fn argv_array_keeps_commas() {
        let v: toml_edit::Value = r#"["sh", "-c", "echo a,b"]"#.parse().unwrap();
        assert_eq!(argv_from_value(&v).unwrap(), ["sh", "-c", "echo a,b"]);
        let v: toml_edit::Value = "[]".parse().unwrap();
        assert!(argv_from_value(&v).is_err());
        let v: toml_edit::Value = r#"["go", 1]"#.parse().unwrap();
        assert_eq!(
            argv_from_value(&v).unwrap_err(),
            "element 2 of the array is not a string"
        );
        let v: toml_edit::Value = "3".parse().unwrap();
        assert!(argv_from_value(&v).is_err());
    }

    #[test]
    fn budgets_lie_between_one_second_and_thirty_days() {
        assert_eq!(parse_budget("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_budget("20m").unwrap(), Duration::from_secs(1200));
        assert_eq!(parse_budget("30d").unwrap(), BUDGET_MAX);
        for bad in ["0s", "1ns", "999ms", "30d 1s", "500000000000h", "soon", ""] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains("between 1s and 30d"), "{bad}: {e}");
        }
    }

    #[test]
    fn dest_must_name_a_file_outside_dot_git_in_any_case() {
        for ok in [
            "x",
            "./x",
            ".provision/openapi.yaml",
            "a/b/c.txt",
            ".gitignore2",
        ] {
            assert!(check_dest(ok).is_ok(), "{ok}");
        }
        for bad in [
            ".",
            "./",
            "x/",
            "x/.",
            ".GIT/x",
            ".Git/config",
            "a/.git/b",
            "..",
            "/x",
            "",
        ] {
            assert!(check_dest(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20m").unwrap(), Duration::from_secs(1200));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86400));
        assert!(parse_duration("20").is_err(), "a bare number has no unit");
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(86400)), "24h");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        for s in ["20m", "90s", "1h30m", "24h", "1.5s"] {
            let d = parse_duration(s).unwrap();
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d, "{s}");
        }
    }

    #[test]
    fn keys_parse_strictly() {
        assert_eq!(
            parse_key("verify.full.argv").unwrap(),
            KeyPath::Key {
                scope: Scope::Full,
                key: "argv"
            }
        );
        assert_eq!(
            parse_key("verify.provision.contract.repo").unwrap(),
            KeyPath::Key {
                scope: Scope::Provision("contract".into()),
                key: "repo"
            }
        );
        assert_eq!(
            parse_key("verify.affected").unwrap(),
            KeyPath::Scope(Scope::Affected)
        );
        assert_eq!(
            parse_key("fleet.freshness").unwrap(),
            KeyPath::FleetFreshness
        );
        let name = |k: &str| crate::error::Refusal::name(&parse_key(k).unwrap_err());
        assert_eq!(name("verify.surface.argv"), "config-scope-reserved");
        assert_eq!(name("verify.bogus.argv"), "config-scope-unknown");
        assert_eq!(name("verify.argv"), "config-scope-missing");
        assert_eq!(name("verify.full.argvv"), "config-key-unknown");
        assert_eq!(name("verify.provision.contract.argv"), "config-key-unknown");
        assert_eq!(name("verify.full.argv.x"), "config-key-invalid");
        assert_eq!(name("verify..argv"), "config-key-invalid");
        assert_eq!(name("verify"), "config-key-invalid");
        assert_eq!(name("verify.provision"), "config-key-invalid");
        assert_eq!(name("verify.provision.a b.repo"), "config-alias-invalid");
        assert_eq!(name("fleet.other"), "config-key-foreign");
        let value = |k: &str, v: &str| {
            crate::error::Refusal::name(
                &value_from_cli(
                    Some(&Scope::Provision("c".into())),
                    k,
                    v,
                    &format!("verify.provision.c.{k}"),
                )
                .unwrap_err(),
            )
        };
        assert_eq!(value("dest", "../x"), "provision-dest-hostile");
        assert_eq!(value("dest", "/etc/passwd"), "provision-dest-hostile");
        assert_eq!(value("dest", ".git/config"), "provision-dest-hostile");
        assert_eq!(value("dest", ""), "config-value-invalid");
        assert_eq!(value("repo", "rel"), "config-value-invalid");
        assert_eq!(name("someone.else"), "config-key-foreign");
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("argvv", SUITE_KEYS), Some("argv"));
        assert_eq!(suggest("report-path", SUITE_KEYS), Some("report_path"));
        assert_eq!(suggest("timout", SUITE_KEYS), Some("timeout"));
        assert_eq!(suggest("command", SUITE_KEYS), None);
    }

    #[test]
    fn values() {
        let v = |s: &str| toml_edit::Value::from(s);
        assert!(check_value(Some(&Scope::Full), "report", &v("junit-xml")).is_ok());
        assert!(check_value(Some(&Scope::Full), "report", &v("junit")).is_err());
        assert!(check_value(Some(&Scope::Full), "report_path", &v("reports/*.xml")).is_ok());
        assert!(check_value(Some(&Scope::Full), "report_path", &v("/abs/x.xml")).is_err());
        assert!(check_value(Some(&Scope::Full), "report_path", &v("../x.xml")).is_err());
        assert!(check_value(Some(&Scope::Full), "report_path", &v("a/[.xml")).is_err());
        let p = Scope::Provision("c".into());
        assert!(check_value(Some(&p), "repo", &v("/src/engine")).is_ok());
        assert!(check_value(Some(&p), "repo", &v("src/engine")).is_err());
        assert!(check_value(Some(&p), "dest", &v(".provision/openapi.yaml")).is_ok());
        assert!(check_value(Some(&p), "dest", &v(".git/hooks/pre-commit")).is_err());
        assert!(check_value(None, "freshness", &v("12h")).is_ok());
        assert!(check_value(None, "freshness", &toml_edit::Value::from(12)).is_err());
    }
}
