//! Issue 36, "What it must show": a host-class suite tried as an attacker
//! would. Each test runs an attacking suite on a feature commit (green: the
//! suite itself exits 0), then certifies a red trunk commit, and holds the
//! run to the promise: the red commit still certifies red (exit 1)
//! and the pointer does not move; every earlier record is intact (count and
//! bytes); `refs/heads/*` and the repository lock file are unchanged; no
//! process of either attempt is alive; and each record says
//! `seal.state == "sealed"`. The attacking suites print one line per write
//! they try (`<what>: done` / `<what>: refused`) into their kept log, so a
//! test can say which layer held.
//!
//! The real binary on real git repositories; lab hosts for the machines'
//! side. Every test here fails with the seal turned off: run them with
//! `SAPHAN_SEAL_TEST=off` (every certify then passes `--seal off`) to see
//! each attack land. `SAPHAN_SEAL_TEST=auto|required` passes that mode;
//! unset, no `--seal` is passed (the default). `SAPHAN_SEAL_TEST_BIN`
//! runs another saphan binary (an older build) instead of this one.

use crate::common::{self, Env, Repo, assert_code, json, lab::Lab, text};
use crate::containment::alive_with;
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

/// The seal mode every certify here passes: `--seal <SAPHAN_SEAL_TEST>`
/// when that is set (`off` is how each test is checked to fail with the
/// seal turned off), else none (the default, `auto`).
fn seal_mode() -> Option<String> {
    std::env::var("SAPHAN_SEAL_TEST")
        .ok()
        .filter(|m| !m.is_empty())
}

/// `saphan` with `env`'s home: this build's binary, or
/// `SAPHAN_SEAL_TEST_BIN` when set (to check an attack against an older
/// build).
fn saphan(env: &Env) -> Command {
    match std::env::var_os("SAPHAN_SEAL_TEST_BIN") {
        Some(bin) => {
            let mut c = Command::new(bin);
            c.env("SAPHAN_HOME", env.home());
            c.env_remove("RUST_LOG");
            c
        }
        None => env.cmd(),
    }
}

/// `saphan --json <verb> --repo REPO <extra…>` in the seal `mode`
/// (`None`: no `--seal`).
fn run_verb(env: &Env, verb: &str, repo: &Repo, extra: &[&str], mode: Option<&str>) -> Output {
    let mut c = saphan(env);
    common::gomod::go_env(&mut c);
    c.args(["--json", verb, "--repo", &repo.path_str()]);
    c.args(extra);
    if let Some(m) = mode {
        c.args(["--seal", m]);
    }
    c.output().unwrap()
}

/// `certify --sha REV` in the mode under test ([`seal_mode`]).
fn certify(env: &Env, repo: &Repo, rev: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--sha", rev];
    args.extend_from_slice(extra);
    run_verb(env, "certify", repo, &args, seal_mode().as_deref())
}

/// True (after `SKIPPED: …`) when this machine cannot seal: no bwrap.
fn no_seal() -> bool {
    common::skip_unless(
        common::have("bwrap"),
        "no bwrap on PATH (apt-get install bubblewrap): nothing can be sealed",
    )
}

/// True (after `SKIPPED: …`) when the test does not run as root.
fn not_root() -> bool {
    common::skip_unless(
        nix::unistd::Uid::effective().is_root(),
        "the attack needs a root suite (the root cgroup's cgroup.procs)",
    )
}

/// git for the test's own reads and writes: no hooks (a suite may have
/// planted one), replace refs and grafts ignored (a suite may have written
/// one), so the test sees what the repository really holds.
fn tgit(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap()
}

/// [`tgit`], which must succeed; its trimmed stdout.
fn tgit_ok(dir: &Path, args: &[&str]) -> String {
    let o = tgit(dir, args);
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim_end().to_string()
}

/// Kills every process whose command line holds the marker when dropped
/// (a failed test leaves no daemon behind).
struct Reaper(String);

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in alive_with(&self.0) {
            // SAFETY: killing a process this test's suite started, by pid.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
}

/// What must not change under an attack: the attempts file's bytes, the
/// branches, the lock file (same file, same bytes), the pointer.
#[derive(Debug, PartialEq)]
struct Ground {
    records: Vec<u8>,
    heads: String,
    lock: Option<(u64, u64, Vec<u8>)>,
    pointer: Option<String>,
}

/// A repository certified green once at its baseline, with a red trunk
/// commit and an attacking feature commit (from the baseline) waiting —
/// on this machine, or on lab machines.
struct Scene {
    env: Env,
    /// The lab machines' workhomes (`<work>/<host>`), when on a lab.
    work: Option<tempfile::TempDir>,
    /// `--machine` of every certify, when on a lab.
    machine: Option<String>,
    repo: Repo,
    /// A string unique to this scene, in every suite process's command
    /// line (`$1` of the suite) and every daemon's.
    marker: String,
    _reaper: Reaper,
    base: String,
    red: String,
    feature: String,
    before: Ground,
}

/// The baseline's green suite (its blob is the replace attack's green one).
const GREEN: &str = "exit 0\n";
/// The red trunk commit's suite (its blob is the replace attack's red one).
const RED: &str = "exit 1\n";

/// The suite config every scene starts with: `sh suite.sh <marker>`.
fn sh_suite(marker: &str) -> String {
    format!("[verify.full]\nargv = [\"sh\", \"suite.sh\", \"{marker}\"]\nreport = \"exitcode\"\n")
}

impl Scene {
    /// On this machine; `attack` and `red` are the files of the feature
    /// and the red trunk commit; `@MARKER@` in them is replaced by the
    /// scene's marker.
    fn new(tag: &str, attack: &[(&str, &str)], red: &[(&str, &str)]) -> Scene {
        Scene::build(tag, None, &[], attack, red)
    }

    /// On the lab machines `hosts` (measured; every certify names them).
    fn on(
        lab: &Lab,
        hosts: &[&str],
        tag: &str,
        attack: &[(&str, &str)],
        red: &[(&str, &str)],
    ) -> Scene {
        Scene::build(tag, Some((lab, hosts)), &[], attack, red)
    }

    /// The scene, with `files` in the baseline beside its green suite.
    fn build(
        tag: &str,
        on: Option<(&Lab, &[&str])>,
        files: &[(&str, &str)],
        attack: &[(&str, &str)],
        red: &[(&str, &str)],
    ) -> Scene {
        let marker = format!(
            "saphan-seal-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let fill = |files: &[(&str, &str)]| -> Vec<(String, String)> {
            files
                .iter()
                .map(|(p, c)| (p.to_string(), c.replace("@MARKER@", &marker)))
                .collect()
        };
        let (env, work, machine) = match on {
            None => (Env::new(), None, None),
            Some((lab, hosts)) => {
                let (env, work) = common::fleet::home(lab, hosts, "seal");
                let all = hosts.join(",");
                let o = saphan(&env)
                    .args(["machine", "measure", "--machine", &all])
                    .output()
                    .unwrap();
                assert_code(&o, 0);
                (env, Some(work), Some(all))
            }
        };
        env.write_config(&sh_suite(&marker));
        let mut base_files = vec![("suite.sh", GREEN), ("verdict", "pass\n")];
        base_files.extend_from_slice(files);
        let repo = Repo::new(&base_files);
        let base = repo.head();
        let commit = |files: Vec<(String, String)>, msg: &str| {
            for (p, c) in &files {
                let full = repo.path().join(p);
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(full, c).unwrap();
            }
            tgit_ok(repo.path(), &["add", "-A"]);
            tgit_ok(repo.path(), &["commit", "-q", "-m", msg]);
            tgit_ok(repo.path(), &["rev-parse", "HEAD"])
        };
        let red = commit(fill(red), "red");
        tgit_ok(repo.path(), &["checkout", "-q", "-b", "feature", &base]);
        let feature = commit(fill(attack), "attack");
        tgit_ok(repo.path(), &["checkout", "-q", "main"]);
        let mut scene = Scene {
            _reaper: Reaper(marker.clone()),
            env,
            work,
            machine,
            repo,
            marker,
            base,
            red,
            feature,
            before: Ground {
                records: Vec::new(),
                heads: String::new(),
                lock: None,
                pointer: None,
            },
        };
        let o = scene.certify(&scene.base, &[]);
        assert_code(&o, 0);
        assert_eq!(scene.repo.verified().as_deref(), Some(scene.base.as_str()));
        scene.before = scene.ground();
        scene
    }

    /// `certify --sha REV` on the scene's machines (or this one).
    fn certify(&self, rev: &str, extra: &[&str]) -> Output {
        let mut args: Vec<&str> = Vec::new();
        if let Some(m) = &self.machine {
            args.extend(["--machine", m]);
        }
        args.extend_from_slice(extra);
        certify(&self.env, &self.repo, rev, &args)
    }

    fn common(&self) -> PathBuf {
        self.repo.path().join(".git")
    }

    /// The machine's mirrors of this scene (`<workhome>/saphan/mirrors/*`).
    fn mirrors(&self, host: &str) -> Vec<PathBuf> {
        let dir = self
            .work
            .as_ref()
            .expect("a lab scene")
            .path()
            .join(host)
            .join("saphan/mirrors");
        std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    fn ground(&self) -> Ground {
        let state = self.common().join("saphan");
        let lock = std::fs::metadata(state.join("lock")).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                std::fs::read(state.join("lock")).unwrap_or_default(),
            )
        });
        Ground {
            records: std::fs::read(state.join("attempts.jsonl")).unwrap_or_default(),
            heads: tgit_ok(
                self.repo.path(),
                &[
                    "for-each-ref",
                    "--format=%(refname) %(objectname)",
                    "refs/heads/",
                ],
            ),
            lock,
            pointer: self.repo.verified(),
        }
    }

    /// Certify the attacking feature commit, then the red trunk commit, and
    /// hold both to the promise; returns the attack's record and its log,
    /// and every broken promise in `faults`.
    fn attack_then_red(&self, faults: &mut Vec<String>) -> (Value, String) {
        self.attack_check_then_red(faults, |_| {})
    }

    /// [`Scene::attack_then_red`], with `check` run between the two
    /// certifies (what the attack may have changed before the next attempt
    /// could mend it).
    fn attack_check_then_red(
        &self,
        faults: &mut Vec<String>,
        check: impl FnOnce(&mut Vec<String>),
    ) -> (Value, String) {
        let o = self.certify(&self.feature, &[]);
        let attack = self.after("attack", &o, 0, 1, faults);
        check(faults);
        let attack = records_of(&attack)
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let log = log_of(&attack);
        let o = self.certify(&self.red, &[]);
        let red = self.after("red", &o, 1, 2, faults);
        let red = records_of(&red).into_iter().next().unwrap_or(Value::Null);
        if !red.is_null() && red["verdict"] != "red" {
            faults.push(format!(
                "the red trunk commit was not red: {} {}",
                red["verdict"], red["failure"]
            ));
        }
        sealed("attack", &attack, faults);
        sealed("red", &red, faults);
        (attack, log)
    }

    /// After a certify that must end `code` with `added` records appended
    /// since the scene began: its `--json` output (`Null` when there is
    /// none).
    fn after(
        &self,
        what: &str,
        o: &Output,
        code: i32,
        added: usize,
        faults: &mut Vec<String>,
    ) -> Value {
        let (out, err) = text(o);
        if o.status.code() != Some(code) {
            let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
            let verdicts: Vec<String> = records_of(&v)
                .iter()
                .map(|r| format!("{} {} {}", r["machine"], r["verdict"], r["failure"]))
                .collect();
            faults.push(format!(
                "{what}: exit {:?}, not {code}: {verdicts:?} {}",
                o.status.code(),
                err.trim()
            ));
        }
        let v = serde_json::from_str::<Value>(out.trim()).unwrap_or(Value::Null);
        let now = self.ground();
        if !now.records.starts_with(&self.before.records) {
            faults.push(format!(
                "{what}: the earlier records are not intact: before {}, now {}",
                lines_of(&self.before.records),
                lines_of(&now.records)
            ));
        } else {
            let rest = &now.records[self.before.records.len()..];
            let lines: Vec<Value> = rest
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice::<Value>(l).unwrap_or(Value::Null))
                .collect();
            if lines.len() != added || lines.iter().any(Value::is_null) || !rest.ends_with(b"\n") {
                faults.push(format!(
                    "{what}: {added} whole records should follow the earlier ones, found {}",
                    lines_of(rest)
                ));
            } else {
                let ids: Vec<Value> = records_of(&v).iter().map(|r| r["id"].clone()).collect();
                let last: Vec<Value> = lines[lines.len().saturating_sub(ids.len())..]
                    .iter()
                    .map(|r| r["id"].clone())
                    .collect();
                if !ids.is_empty() && last != ids {
                    faults.push(format!(
                        "{what}: the last records are not this attempt's: {last:?} ≠ {ids:?}"
                    ));
                }
            }
        }
        if now.pointer != self.before.pointer {
            faults.push(format!(
                "{what}: the pointer moved from {:?} to {:?} (feature {}, red {})",
                self.before.pointer, now.pointer, self.feature, self.red
            ));
        }
        if now.heads != self.before.heads {
            faults.push(format!(
                "{what}: refs/heads changed:\nbefore {}\nnow    {}",
                self.before.heads, now.heads
            ));
        }
        if now.lock != self.before.lock {
            faults.push(format!(
                "{what}: the lock file changed: {:?} → {:?}",
                self.before.lock, now.lock
            ));
        }
        let alive = alive_with(&self.marker);
        if !alive.is_empty() {
            let cmds: Vec<String> = alive
                .iter()
                .map(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                        .unwrap_or_default()
                })
                .collect();
            faults.push(format!(
                "{what}: processes of the attempt are alive: {cmds:?}"
            ));
        }
        common::assert_only_main_worktree(&self.repo);
        v
    }
}

/// The lines of an attempts file, shortly: `[id verdict, …]`, a line
/// that is no JSON record as its first bytes.
fn lines_of(bytes: &[u8]) -> String {
    let lines: Vec<String> = bytes
        .split_inclusive(|b| *b == b'\n')
        .map(|l| match serde_json::from_slice::<Value>(l) {
            Ok(r) if l.ends_with(b"\n") => format!("{} {}", r["id"], r["verdict"]),
            _ => format!("{:?}", String::from_utf8_lossy(&l[..l.len().min(40)])),
        })
        .collect();
    format!("[{}]", lines.join(", "))
}

/// The records of a `--json` certify: a machine run's `records`, else the
/// one local record itself.
fn records_of(v: &Value) -> Vec<Value> {
    match v.get("records").and_then(Value::as_array) {
        Some(rs) => rs.clone(),
        None if v.get("id").is_some() => vec![v.clone()],
        None => Vec::new(),
    }
}

/// The kept suite log of a record (empty when there is none).
fn log_of(r: &Value) -> String {
    r.get("suite_log")
        .and_then(Value::as_str)
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default()
}

/// A fault unless record `r` (of `what`) says `seal.state == "sealed"`.
fn sealed(what: &str, r: &Value, faults: &mut Vec<String>) {
    if !r.is_null() && r["seal"]["state"] != "sealed" {
        faults.push(format!(
            "seal: the {what} record is not sealed: {}",
            r["seal"]
        ));
    }
}

/// Fail with every broken promise, one per line.
#[track_caller]
fn assert_no_faults(faults: &[String]) {
    assert!(
        faults.is_empty(),
        "{} broken promise(s):\n- {}",
        faults.len(),
        faults.join("\n- ")
    );
}

/// Each write `what` the attacking suite tried was refused, by its log
/// (`<what>: refused`), and none was done.
fn refused_in_log(log: &str, whats: &[&str], faults: &mut Vec<String>) {
    for w in whats {
        if !log.lines().any(|l| l == format!("{w}: refused")) {
            faults.push(format!(
                "the suite's `{w}` write was not refused; its log:\n{log}"
            ));
        }
    }
    for l in log.lines().filter(|l| l.ends_with(": done")) {
        faults.push(format!("the suite's write succeeded: {l}"));
    }
}

/// The shell line that runs `cmd` (in a subshell: a failed redirection of
/// a special builtin such as `:` ends the shell that runs it) and prints
/// `<what>: done` when it succeeded, `<what>: refused` when it failed.
fn attempt(what: &str, cmd: &str) -> String {
    format!("if ( {cmd} ) 2>/dev/null; then echo '{what}: done'; else echo '{what}: refused'; fi\n")
}

/// The attacking suite's prelude: `c` is the repository's common git dir.
const PRELUDE: &str = "c=$(git rev-parse --path-format=absolute --git-common-dir)\n";

/// A suite that plants `<common>/hooks/post-checkout` running `body` (a
/// shell line, in the checkout it follows), printing `hook: done|refused`.
fn hook_suite(body: &str) -> String {
    let hook = format!("#!/bin/sh\\n{body}\\n");
    format!(
        "{PRELUDE}{}exit 0\n",
        attempt(
            "hook",
            &format!(
                "mkdir -p \"$c/hooks\" && printf '{hook}' > \"$c/hooks/post-checkout\" && chmod +x \"$c/hooks/post-checkout\""
            )
        )
    )
}

/// A suite that writes the red suite's blob and the green one and runs
/// `git replace <red> <green>`, printing `replace: done|refused`.
fn replace_suite() -> String {
    format!(
        "{}exit 0\n",
        attempt(
            "replace",
            &format!(
                "g=$(printf '{}' | git hash-object -w --stdin) && r=$(printf '{}' | git hash-object -w --stdin) && git replace -f \"$r\" \"$g\"",
                GREEN.replace('\n', "\\n"),
                RED.replace('\n', "\\n")
            )
        )
    )
}

/// A planted hook: the suite writes `<common>/hooks/post-checkout`, which
/// would rewrite every later checkout's suite to `exit 0`. The seal makes
/// the write fail (asserted from the suite's log); saphan's own checkout
/// running no hooks would also hold the red.
#[test]
fn a_planted_post_checkout_hook_never_turns_a_red_trunk_commit_green() {
    if no_seal() {
        return;
    }
    let suite = hook_suite("echo \"exit 0\" > suite.sh");
    let s = Scene::new("hook", &[("suite.sh", &suite)], &[("suite.sh", RED)]);
    let mut faults = Vec::new();
    let (_, log) = s.attack_then_red(&mut faults);
    refused_in_log(&log, &["hook"], &mut faults);
    if s.common().join("hooks/post-checkout").exists() {
        faults.push("the hook is in the repository's hooks directory".into());
    }
    assert_no_faults(&faults);
}

/// A replace ref: the suite writes the red suite's blob and a green one and
/// runs `git replace <red> <green>`, which would swap the red commit's
/// suite in every later checkout. Two layers hold this: the seal (the
/// objects and refs are read-only, so the suite's `git replace` fails —
/// what `refused_in_log` and the empty `git replace -l` assert) and saphan's
/// own git calls ignoring replace refs (what the red verdict alone would
/// show).
#[test]
fn a_replace_ref_written_by_a_suite_never_swaps_a_later_checkout() {
    if no_seal() {
        return;
    }
    let suite = replace_suite();
    let s = Scene::new("replace", &[("suite.sh", &suite)], &[("suite.sh", RED)]);
    let mut faults = Vec::new();
    let (_, log) = s.attack_then_red(&mut faults);
    refused_in_log(&log, &["replace"], &mut faults);
    let replaced = String::from_utf8_lossy(&tgit(s.repo.path(), &["replace", "-l"]).stdout)
        .trim()
        .to_string();
    if !replaced.is_empty() {
        faults.push(format!("the repository holds replace refs: {replaced}"));
    }
    assert_no_faults(&faults);
}

/// saphan's own state, one attack per scene: truncating attempts.jsonl,
/// appending a forged green line, appending a byte that is not UTF-8,
/// moving `refs/heads/main` onto the suite's own commit, deleting the
/// repository lock. Each write fails under the seal; every earlier record,
/// the branches and the lock file stay as they were.
#[test]
fn a_suite_cannot_write_saphans_records_lock_or_branches() {
    if no_seal() {
        return;
    }
    let a = "\"$c/saphan/attempts.jsonl\"";
    let attacks = [
        ("truncate", format!(": > {a}")),
        (
            "forge",
            format!(
                "printf '%s\\n' '{{\"format\":2,\"id\":\"forged\",\"verb\":\"certify\",\"verdict\":\"green\"}}' >> {a}"
            ),
        ),
        ("non-utf8", format!("printf '\\377' >> {a}")),
        ("update-ref", "git update-ref refs/heads/main HEAD".into()),
        (
            "lock",
            "rm \"$c/saphan/lock\" && ! test -e \"$c/saphan/lock\"".into(),
        ),
    ];
    let mut faults = Vec::new();
    for (what, cmd) in &attacks {
        let suite = format!("{PRELUDE}{}exit 0\n", attempt(what, cmd));
        let s = Scene::new(what, &[("suite.sh", &suite)], &[("suite.sh", RED)]);
        let mut mine = Vec::new();
        let (_, log) = s.attack_then_red(&mut mine);
        refused_in_log(&log, &[what], &mut mine);
        faults.extend(mine.into_iter().map(|f| format!("[{what}] {f}")));
    }
    assert_no_faults(&faults);
}

/// Symlinks in saphan's state: the suite replaces attempts.jsonl, or the
/// logs directory, with a symlink to a file (a directory) outside. Under
/// the seal neither replacement can be made; saphan never writes through
/// one.
#[test]
fn a_suite_cannot_put_symlinks_into_saphans_state() {
    if no_seal() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("attempts.jsonl");
    std::fs::write(&target, "").unwrap();
    let logs = outside.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let attacks = [
        (
            "attempts-symlink",
            format!(
                "ln -sfn '{}' \"$c/saphan/attempts.jsonl\" && test -L \"$c/saphan/attempts.jsonl\"",
                target.display()
            ),
        ),
        (
            "logs-symlink",
            format!(
                "rm -rf \"$c/saphan/logs\" && ln -sfn '{}' \"$c/saphan/logs\" && test -L \"$c/saphan/logs\"",
                logs.display()
            ),
        ),
    ];
    let mut faults = Vec::new();
    for (what, cmd) in &attacks {
        let suite = format!("{PRELUDE}{}exit 0\n", attempt(what, cmd));
        let s = Scene::new(what, &[("suite.sh", &suite)], &[("suite.sh", RED)]);
        let mut mine = Vec::new();
        let (_, log) = s.attack_then_red(&mut mine);
        refused_in_log(&log, &[what], &mut mine);
        let state = s.common().join("saphan");
        for (p, dir) in [("attempts.jsonl", false), ("logs", true)] {
            let m = std::fs::symlink_metadata(state.join(p)).unwrap();
            if m.file_type().is_symlink() || m.is_dir() != dir {
                mine.push(format!("saphan/{p} is now {:?}", m.file_type()));
            }
        }
        faults.extend(mine.into_iter().map(|f| format!("[{what}] {f}")));
    }
    if std::fs::metadata(&target).unwrap().len() != 0 {
        faults.push(format!(
            "saphan wrote through the symlink: {:?}",
            std::fs::read_to_string(&target)
        ));
    }
    let written: Vec<_> = std::fs::read_dir(&logs).unwrap().flatten().collect();
    if !written.is_empty() {
        faults.push(format!(
            "saphan wrote logs through the symlink: {written:?}"
        ));
    }
    assert_no_faults(&faults);
}

/// The red commit of the daemon scenes: it waits (bounded, 2 s) for its
/// `verdict` file to change from `fail`, then passes only on `pass` — a
/// suite that reads its fixtures while it runs, which a daemon rewriting
/// the tree turns green.
const RED_READING_VERDICT: &str = "i=0\nwhile [ $i -lt 40 ] && [ \"$(cat verdict)\" = fail ]; do sleep 0.05; i=$((i+1)); done\n[ \"$(cat verdict)\" = pass ]\n";

/// The loop every daemon runs: mark itself ready (`$1`), then rewrite the
/// stable scratch tree's (`$0`) verdict to `pass` whenever it says `fail`.
const DAEMON_LOOP: &str = "touch \"$1\"; while :; do if [ \"$(cat \"$0/verdict\" 2>/dev/null)\" = fail ]; then echo pass > \"$0/verdict\"; fi; sleep 0.05; done";

/// An attacking suite that leaves `daemons` behind, each `(name, how)`
/// where `how` starts `sh -c "$L # <marker>-<name>" "$t" "$rd/<name>"` in
/// its own way (`$L` the loop, `$t` the tree, `$rd` where daemons mark
/// themselves ready); the suite waits (bounded, 5 s) until every daemon is
/// ready, prints what `$rd/*.out` files the daemons wrote, and exits 0.
fn daemon_suite(daemons: &[(&str, &str)]) -> String {
    let mut s = format!(
        "t=${{SAPHAN_SCRATCH:-$PWD}}\nrd=\"$t/.daemons\"\nmkdir -p \"$rd\"\nL='{DAEMON_LOOP}'\n"
    );
    let mut ready = String::new();
    for (name, how) in daemons {
        s += &how.replace("@NAME@", name);
        s += "\n";
        ready += &format!(" && [ -e \"$rd/{name}\" ]");
    }
    s += &format!(
        "i=0\nwhile [ $i -lt 100 ] && ! {{ true{ready}; }}; do sleep 0.05; i=$((i+1)); done\nfor f in \"$rd\"/*.out; do [ -e \"$f\" ] && cat \"$f\"; done\nexit 0\n"
    );
    s
}

/// The four ways out of an attempt's process group: `setsid`, `env -i
/// setsid` (no scratch marker in its environment), a double fork, and (as
/// root) `setsid` plus the root cgroup's `cgroup.procs` (cgroup v2 at
/// /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid layout as here).
fn daemons() -> Vec<(&'static str, String)> {
    let q = "</dev/null >/dev/null 2>&1 &";
    vec![
        (
            "setsid",
            format!("setsid sh -c \"$L # @MARKER@-@NAME@\" \"$t\" \"$rd/@NAME@\" {q}"),
        ),
        (
            "envi",
            format!(
                "env -i /usr/bin/setsid /bin/sh -c \"$L # @MARKER@-@NAME@\" \"$t\" \"$rd/@NAME@\" {q}"
            ),
        ),
        (
            "fork",
            format!(
                "sh -c 'sh -c \"$2\" \"$0\" \"$1\" {q}' \"$t\" \"$rd/@NAME@\" \"$L # @MARKER@-@NAME@\" {q}"
            ),
        ),
        (
            "cgroup",
            format!(
                "setsid sh -c 'for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do [ -e \"$r/cgroup.controllers\" ] && break; done; if echo $$ > \"$r/cgroup.procs\" 2>/dev/null; then echo \"cgroup: done\" > \"$1.out\"; else echo \"cgroup: refused\" > \"$1.out\"; fi; exec sh -c \"$2\" \"$0\" \"$1\"' \"$t\" \"$rd/@NAME@\" \"$L # @MARKER@-@NAME@\" {q}"
            ),
        ),
    ]
}

/// A daemon that outlives its suite (`setsid`, `env -i setsid`, a double
/// fork, the root cgroup) and rewrites the next attempt's stable scratch
/// tree: no such process survives the attempt, and the next (red) attempt
/// is red. The PID namespace ends them all with the suite.
#[test]
fn a_suites_daemons_die_with_its_attempt_and_never_reach_the_next_tree() {
    if no_seal() || not_root() {
        return;
    }
    let ds = daemons();
    let ds: Vec<(&str, &str)> = ds.iter().map(|(n, h)| (*n, h.as_str())).collect();
    let suite = daemon_suite(&ds);
    let s = Scene::new(
        "daemon",
        &[("suite.sh", &suite)],
        &[("suite.sh", RED_READING_VERDICT), ("verdict", "fail\n")],
    );
    let mut faults = Vec::new();
    let (_, log) = s.attack_then_red(&mut faults);
    refused_in_log(&log, &["cgroup"], &mut faults);
    assert_no_faults(&faults);
}

/// A suite that runs `git replace --graft main HEAD` to make its own
/// feature commit look on trunk: the pointer never moves onto a commit not
/// reachable from `refs/heads/main` (asked with replace refs ignored).
#[test]
fn a_graft_never_puts_a_feature_commit_on_trunk() {
    if no_seal() {
        return;
    }
    let suite = format!(
        "{}exit 0\n",
        attempt("graft", "git replace --graft main HEAD")
    );
    let s = Scene::new("graft", &[("suite.sh", &suite)], &[("suite.sh", RED)]);
    let mut faults = Vec::new();
    let (_, log) = s.attack_then_red(&mut faults);
    refused_in_log(&log, &["graft"], &mut faults);
    if let Some(p) = s.repo.verified() {
        let on = tgit(
            s.repo.path(),
            &["merge-base", "--is-ancestor", &p, "refs/heads/main"],
        );
        if !on.status.success() {
            faults.push(format!(
                "the pointer {p} is not reachable from refs/heads/main"
            ));
        }
        if p == s.feature {
            faults.push("the pointer is on the feature commit".into());
        }
    }
    assert_no_faults(&faults);
}

/// Not an attack: what a suite may still do under the seal. A clean tree
/// by `git status --porcelain` (prints nothing), `git log -1 main` and
/// `git rev-parse main` read history, `git diff` works; each certified
/// green and sealed.
#[test]
fn a_sealed_suite_still_sees_a_clean_tree_and_reads_history() {
    if no_seal() {
        return;
    }
    let env = Env::new();
    let marker = format!("saphan-seal-clean-{}", std::process::id());
    let _reaper = Reaper(marker.clone());
    env.write_config(&format!(
        "[verify.full]\nargv = [\"sh\", \"suite.sh\", \"{marker}\"]\nreport = \"exitcode\"\n"
    ));
    let suite = "set -e\nst=$(git status --porcelain)\n[ -z \"$st\" ] || { echo \"dirty: $st\"; exit 1; }\n\
        git diff --quiet HEAD\n\
        git log -1 --format=%H main\n\
        [ \"$(git rev-parse main)\" = \"$(git rev-parse HEAD)\" ]\n\
        git log --oneline main | grep -q first\n\
        echo scratch > made-by-suite\n[ -n \"$(git status --porcelain)\" ]\nexit 0\n";
    let repo = Repo::new(&[("README", "x\n")]);
    common::git(
        repo.path(),
        &["commit", "-q", "--allow-empty", "-m", "first"],
    );
    let sha = repo.commit(&[("suite.sh", suite)], "suite");
    let o = certify(&env, &repo, "main", &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green", "{r}");
    assert_eq!(repo.verified().as_deref(), Some(sha.as_str()));
    assert!(alive_with(&marker).is_empty());
    assert_eq!(r["seal"]["state"], "sealed", "{r}");
}

/// A Go module (standard library only, the real `go`) certified twice,
/// green both times with the same count, both sealed: the build caches
/// stay writable under the seal.
#[test]
fn a_go_module_certifies_green_twice_sealed() {
    if no_seal() || common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = common::gomod::go_mod();
        (p.to_string(), c)
    }];
    files.extend(common::gomod::package("leaf", &[], 1));
    files.extend(common::gomod::package("top", &["leaf"], 2));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let mut counts = Vec::new();
    for _ in 0..2 {
        let o = certify(&env, &repo, "HEAD", &[]);
        assert_code(&o, 0);
        let r = json(&o);
        assert_eq!(r["verdict"], "green", "{r}");
        assert_eq!(r["seal"]["state"], "sealed", "{r}");
        counts.push(r["count"].clone());
    }
    assert_eq!(counts[0], 2, "{counts:?}");
    assert_eq!(counts[0], counts[1]);
}

/// The shared lab, when this machine can seal (`None` after `SKIPPED: …`).
fn lab() -> Option<&'static Lab> {
    if no_seal() {
        return None;
    }
    Lab::shared()
}

/// True (after `SKIPPED: …`) when the lab hosts or this machine have no Go.
fn no_lab_go() -> bool {
    common::gomod::no_go()
        || common::skip_unless(
            Path::new("/usr/bin/go").exists(),
            "no /usr/bin/go for the lab hosts",
        )
}

/// A hook and a replace ref planted in a machine's mirror, on a root login
/// with cgroups (m0) and on the process-group machine (m3): the red commit
/// is still red there, and the mirror holds neither.
#[test]
fn a_hook_or_replace_ref_in_a_machines_mirror_never_turns_a_red_commit_green() {
    let Some(lab) = lab() else { return };
    let mut faults = Vec::new();
    for host in ["m0", "m3"] {
        for (what, suite) in [
            ("hook", hook_suite("echo \"exit 0\" > suite.sh")),
            ("replace", replace_suite()),
        ] {
            let s = Scene::on(
                lab,
                &[host],
                what,
                &[("suite.sh", &suite)],
                &[("suite.sh", RED)],
            );
            let mut mine = Vec::new();
            let (_, log) = s.attack_then_red(&mut mine);
            refused_in_log(&log, &[what], &mut mine);
            let mirrors = s.mirrors(host);
            if mirrors.is_empty() {
                mine.push("the machine holds no mirror".into());
            }
            for m in mirrors {
                if m.join("hooks/post-checkout").exists() {
                    mine.push(format!("{} holds the hook", m.display()));
                }
                let r = String::from_utf8_lossy(&tgit(&m, &["replace", "-l"]).stdout).into_owned();
                if !r.trim().is_empty() {
                    mine.push(format!("{} holds replace refs: {r}", m.display()));
                }
            }
            faults.extend(mine.into_iter().map(|f| format!("[{host} {what}] {f}")));
        }
    }
    assert_no_faults(&faults);
}

/// On lab hosts: a daemon that outlives its suite rewrites the next
/// attempt's tree — on m0 (root login with cgroups) by every way out
/// including the root cgroup, on m3 (process-group containment) by
/// `setsid`, `env -i setsid` and a double fork. None survives the attempt,
/// and the next (red) attempt is red.
#[test]
fn a_machines_suite_daemons_die_with_its_attempt_and_never_reach_the_next_tree() {
    let Some(lab) = lab() else { return };
    let all = daemons();
    let mut faults = Vec::new();
    for host in ["m0", "m3"] {
        let ds: Vec<(&str, &str)> = all
            .iter()
            .filter(|(n, _)| host == "m0" || *n != "cgroup")
            .map(|(n, h)| (*n, h.as_str()))
            .collect();
        let suite = daemon_suite(&ds);
        let s = Scene::on(
            lab,
            &[host],
            "daemon",
            &[("suite.sh", &suite)],
            &[("suite.sh", RED_READING_VERDICT), ("verdict", "fail\n")],
        );
        let mut mine = Vec::new();
        let (_, log) = s.attack_then_red(&mut mine);
        if host == "m0" {
            refused_in_log(&log, &["cgroup"], &mut mine);
        }
        faults.extend(mine.into_iter().map(|f| format!("[{host}] {f}")));
    }
    assert_no_faults(&faults);
}

/// The files of a Go module (standard library only): `leaf`, `top`
/// (imports leaf), `other`.
fn go_module() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = common::gomod::go_mod();
        (p.to_string(), c)
    }];
    files.extend(common::gomod::package("leaf", &[], 1));
    files.extend(common::gomod::package("top", &["leaf"], 1));
    files.extend(common::gomod::package("other", &[], 1));
    files
}

/// The shipped binary `<workhome>/saphan/bin/saphan-<sha256>`: a suite on
/// that machine cannot replace it (the workhome outside its tree is
/// read-only under the seal), and the next remote `verify-affected
/// --machine` runs the real one. That a binary replaced by other means is
/// checked by its sha256 and shipped again is helper-1's
/// (tests/it/git_hardening.rs).
#[test]
fn a_suite_cannot_replace_the_shipped_saphan_binary_on_a_machine() {
    if no_lab_go() {
        return;
    }
    let Some(lab) = lab() else { return };
    let module = go_module();
    let files: Vec<(&str, &str)> = module
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let attack = format!(
        "bin=\"${{PWD%/saphan/scratch/*}}/saphan/bin\"\nls \"$bin\"\n{}exit 0\n",
        attempt(
            "bin",
            "n=0; for b in \"$bin\"/saphan-*; do printf '#!/bin/sh\\necho @MARKER@-fake-ran >&2\\nexit 3\\n' > \"$b\" || exit 1; n=$((n+1)); done; [ $n -gt 0 ]"
        )
    );
    let red = [
        ("suite.sh", RED),
        (
            "leaf/leaf.go",
            "package leaf\n\n// V is two now.\nfunc V() int { return 2 }\n",
        ),
    ];
    let mut s = Scene::build(
        "bin",
        Some((lab, &["m1"])),
        &files,
        &[("suite.sh", &attack)],
        &red,
    );
    s.env.write_config(&format!(
        "{}\n[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\n",
        sh_suite(&s.marker)
    ));
    let affected = |s: &Scene| {
        run_verb(
            &s.env,
            "verify-affected",
            &s.repo,
            &["--base", &s.base, "--machine", "m1"],
            None,
        )
    };
    let o = affected(&s);
    assert_code(&o, 0);
    let v = json(&o);
    let bin = PathBuf::from(
        v["adapter_argv"][0]
            .as_str()
            .unwrap_or_else(|| panic!("{v}")),
    );
    let shipped = std::fs::read(&bin).unwrap();
    s.before = s.ground();

    let mut faults = Vec::new();
    let replaced = |faults: &mut Vec<String>| {
        if std::fs::read(&bin).ok().as_ref() != Some(&shipped) {
            faults.push(format!("the suite replaced {}", bin.display()));
        }
    };
    let (_, log) = s.attack_check_then_red(&mut faults, replaced);
    refused_in_log(&log, &["bin"], &mut faults);
    replaced(&mut faults);
    let o = affected(&s);
    let (out, err) = text(&o);
    if o.status.code() != Some(0) || err.contains("fake-ran") || out.contains("fake-ran") {
        faults.push(format!("verify-affected after the attack:\n{out}\n{err}"));
    }
    let v = serde_json::from_str::<Value>(out.trim()).unwrap_or(Value::Null);
    let sel = v["selected_packages"].to_string();
    if v["result"] != "green"
        || !sel.contains("example.com/m/leaf")
        || !sel.contains("example.com/m/top")
    {
        faults.push(format!("verify-affected did not run the real adapter: {v}"));
    }
    assert_no_faults(&faults);
}

/// `--split`: a hook planted (by a local suite) for the local listing
/// checkout would delete the failing package before `go list`, leaving it
/// out of every shard. Under the seal the hook is never planted: the
/// failing package is listed, and the split is red.
#[test]
fn a_hook_planted_for_the_split_listing_never_drops_a_failing_package() {
    if no_lab_go() {
        return;
    }
    let Some(lab) = lab() else { return };
    let module = go_module();
    let files: Vec<(&str, &str)> = module
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let attack = hook_suite("rm -rf leaf top");
    let red = [(
        "leaf/bad_test.go",
        "package leaf\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n",
    )];
    let s = Scene::build(
        "split",
        Some((lab, &["m0", "m1"])),
        &files,
        &[("suite.sh", &attack)],
        &red,
    );
    assert_code(
        &saphan(&s.env)
            .args([
                "machine",
                "probe",
                "--machine",
                "m0,m1",
                "--capability",
                "go",
            ])
            .args(["--declared-path", "/usr/bin/go", "--workhome", "/tmp"])
            .args(["--probed-by", "tester", "--workspace", "ws/main"])
            .output()
            .unwrap(),
        0,
    );
    let mut faults = Vec::new();
    // The attack runs here: the listing checkout is this machine's.
    let o = certify(&s.env, &s.repo, &s.feature, &[]);
    let attack = records_of(&s.after("attack", &o, 0, 1, &mut faults))
        .into_iter()
        .next()
        .unwrap_or(Value::Null);
    refused_in_log(&log_of(&attack), &["hook"], &mut faults);
    sealed("attack", &attack, &mut faults);
    if s.common().join("hooks/post-checkout").exists() {
        faults.push("the hook is in the repository's hooks directory".into());
    }
    // The split of the red trunk commit, with the default go suite.
    std::fs::remove_file(s.env.home().join("config")).unwrap();
    let o = certify(&s.env, &s.repo, &s.red, &["--machine", "m0,m1", "--split"]);
    let v = serde_json::from_str::<Value>(text(&o).0.trim()).unwrap_or(Value::Null);
    let shards = records_of(&v);
    s.after("split", &o, 1, 1 + shards.len().max(1), &mut faults);
    if v["split"]["verdict"] != "red" {
        faults.push(format!("the split is not red: {v}"));
    }
    let listed: Vec<String> = shards
        .iter()
        .flat_map(|r| {
            r["shard"]["packages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    if !listed.iter().any(|p| p == "example.com/m/leaf") {
        faults.push(format!("the failing package was not listed: {listed:?}"));
    }
    for r in &shards {
        sealed("shard", r, &mut faults);
    }
    assert_no_faults(&faults);
}

/// A sealed suite killed by a signal crashed: bwrap's monitor exits 137
/// for a SIGKILLed suite, and an exitcode suite must not read that as a
/// red (a failing test) — it is `measurement-failed`, `crash`, naming the
/// signal, sealed or not (the same reading a machine's watchdog gives).
#[test]
fn a_sealed_suite_killed_by_a_signal_is_a_crash_not_a_red() {
    if no_seal() {
        return;
    }
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"sh,-c,kill -KILL $$\"\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    for mode in ["required", "off"] {
        let o = run_verb(&env, "certify", &repo, &[], Some(mode));
        let (_, err) = text(&o);
        assert_code(&o, 3);
        let v = json(&o);
        assert_eq!(
            v["verdict"], "measurement-failed",
            "--seal {mode}: {v}\n{err}"
        );
        assert_eq!(v["failure"], "crash", "--seal {mode}: {v}");
        assert!(
            v["notes"].to_string().contains("signal 9"),
            "--seal {mode}: {v}"
        );
    }
}
