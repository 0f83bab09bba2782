//! Shared helpers for the integration tests: run the real `saphan` binary
//! with its own `SAPHAN_HOME`, and build real git repositories in temp dirs.
#![allow(dead_code)]

pub mod fleet;
pub mod lab;
pub mod slurm;
pub mod suite_images;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temp `SAPHAN_HOME` plus a way to run the real binary against it.
pub struct Env {
    pub home: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            home: tempfile::Builder::new()
                .prefix("saphan-home-")
                .tempdir()
                .unwrap(),
        }
    }
    pub fn home(&self) -> &Path {
        self.home.path()
    }
    /// A `Command` for the real binary with this home.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_saphan"));
        c.env("SAPHAN_HOME", self.home.path());
        c.env_remove("RUST_LOG");
        c
    }
    /// Run `saphan args…` and return its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
    /// Write the config file verbatim.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.home.path().join("config"), text).unwrap();
    }
}

/// stdout and stderr as strings, for assertions and failure messages.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Assert the exit code, printing both streams when it differs.
#[track_caller]
pub fn assert_code(o: &Output, code: i32) {
    let (out, err) = text(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{out}\nstderr:\n{err}"
    );
}

/// Assert a refusal: exit 2 and stderr opening with `saphan: <name>: `.
/// Returns stderr for further checks.
#[track_caller]
pub fn assert_refused(o: &Output, name: &str) -> String {
    assert_code(o, 2);
    let err = text(o).1;
    assert!(
        err.starts_with(&format!("saphan: {name}: ")),
        "expected `saphan: {name}: …`, got:\n{err}"
    );
    err
}

/// stdout parsed as the one JSON object `--json` promises (panics with both
/// streams when it is not).
pub fn json(o: &Output) -> serde_json::Value {
    let (out, err) = text(o);
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{out}\nstderr:\n{err}"))
}

/// Assert that only the repository's own worktree is registered: no scratch
/// worktree was left behind.
#[track_caller]
pub fn assert_only_main_worktree(repo: &Repo) {
    let wts = repo.worktrees();
    assert_eq!(wts.len(), 1, "scratch worktree left behind: {wts:?}");
}

/// `<base>/scratch/<key>/tree/<name>`, when a scratch tree under `base`
/// holds it: how a test sees a file a suite wrote in its own tree (a sealed
/// suite can write nowhere else). `base` is a `SAPHAN_HOME`, or a machine's
/// `<workhome>/saphan` (lab hosts share this filesystem).
pub fn in_scratch_tree(base: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(base.join("scratch"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("tree").join(name))
        .find(|p| p.exists())
}

/// Run git in `dir`; panic with its stderr on failure. Returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim_end().to_string()
}

/// A real git repository in a temp dir.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    /// `git init -b main` with one commit holding `files`.
    pub fn new(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("saphan-repo-")
            .tempdir()
            .unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let r = Repo { dir };
        r.commit(files, "initial");
        r
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn path_str(&self) -> String {
        self.dir.path().to_string_lossy().into_owned()
    }
    /// Write `files` (creating directories; mode 0755 when the content starts
    /// with `#!`), commit them, return the new HEAD SHA.
    pub fn commit(&self, files: &[(&str, &str)], msg: &str) -> String {
        for (p, content) in files {
            let full = self.path().join(p);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, content).unwrap();
            if content.starts_with("#!") {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        git(self.path(), &["add", "-A"]);
        git(self.path(), &["commit", "-q", "--allow-empty", "-m", msg]);
        self.head()
    }
    pub fn head(&self) -> String {
        git(self.path(), &["rev-parse", "HEAD"])
    }
    /// Every line of `<git-common-dir>/saphan/attempts.jsonl`, each of which
    /// must be one whole JSON record (empty when there is no file).
    pub fn records(&self) -> Vec<serde_json::Value> {
        let common = git(
            self.path(),
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        );
        std::fs::read_to_string(Path::new(&common).join("saphan/attempts.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("whole JSON line"))
            .collect()
    }
    /// `refs/saphan/verified`, when it exists.
    pub fn verified(&self) -> Option<String> {
        let o = Command::new("git")
            .arg("-C")
            .arg(self.path())
            .args(["rev-parse", "--verify", "--quiet", "refs/saphan/verified"])
            .output()
            .unwrap();
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    }
    /// `git worktree list --porcelain` lines that name a worktree.
    pub fn worktrees(&self) -> Vec<PathBuf> {
        git(self.path(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .map(PathBuf::from)
            .collect()
    }
}

/// Print a skip reason in a way that shows up in `cargo test` output, and
/// return true when `cond` says the test must skip.
///
/// With `SAPHAN_REQUIRE_ALL=1` in the environment (`.ci/run` sets it) a skip
/// is a failure instead: the test panics with the same reason, so a CI run
/// that could not reach the lab, Docker, Go or the corpus is red, never a
/// green that merely skipped. Developers' machines keep the printed skip.
pub fn skip_unless(cond: bool, why: &str) -> bool {
    if !cond {
        if require_all() {
            panic!("SAPHAN_REQUIRE_ALL=1 and a prerequisite is missing: {why}");
        }
        eprintln!("SKIPPED: {why}");
        println!("SKIPPED: {why}");
    }
    !cond
}

/// Is `SAPHAN_REQUIRE_ALL=1` set (every prerequisite required)?
pub fn require_all() -> bool {
    std::env::var_os("SAPHAN_REQUIRE_ALL").is_some_and(|v| v == "1")
}

/// Is `program` on PATH?
pub fn have(program: &str) -> bool {
    which(program).is_some()
}

/// Where `program` is on PATH, if anywhere.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// `--json machine probe` of one capability on `machine` (ids comma-separated)
/// with `--workhome /tmp --probed-by tester --workspace ws/main`.
pub fn probe_args<'a>(machine: &'a str, cap: &'a str, path: &'a str) -> Vec<&'a str> {
    vec![
        "--json",
        "machine",
        "probe",
        "--machine",
        machine,
        "--capability",
        cap,
        "--declared-path",
        path,
        "--workhome",
        "/tmp",
        "--probed-by",
        "tester",
        "--workspace",
        "ws/main",
    ]
}
pub mod gomod;
