//! Streams and returns (DESIGN §7, spec "The return manifest"): the real
//! `saphan` binary against real repositories and real git worktrees.

use crate::common;

use crate::common::{Env, assert_code, assert_refused, git, text};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A repository at `<tmp>/repo` (so default stream worktrees land in
/// `<tmp>/repo.streams/`, inside the temp dir), a home, and one started stream.
struct Fixture {
    env: Env,
    tmp: tempfile::TempDir,
    name: String,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let tmp = tempfile::Builder::new()
            .prefix("saphan-streams-")
            .tempdir()
            .unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        std::fs::write(repo.join("main.go"), "package main\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        let f = Fixture {
            env: Env::new(),
            tmp,
            name: name.to_string(),
        };
        let o = f.saphan(&["stream", "start", name, "--repo", &f.repo_str()]);
        assert_code(&o, 0);
        f
    }
    fn repo(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }
    fn repo_str(&self) -> String {
        self.repo().to_string_lossy().into_owned()
    }
    fn wt(&self) -> PathBuf {
        self.tmp.path().join("repo.streams").join(&self.name)
    }
    fn saphan(&self, args: &[&str]) -> std::process::Output {
        self.env.run(args)
    }
    /// `saphan stream <verb> [gate] NAME --repo R [extra…]`.
    fn stream(&self, verb: &[&str], extra: &[&str]) -> std::process::Output {
        let repo = self.repo_str();
        let mut a: Vec<&str> = vec!["stream"];
        a.extend_from_slice(verb);
        a.push(&self.name);
        a.extend_from_slice(&["--repo", &repo]);
        a.extend_from_slice(extra);
        self.saphan(&a)
    }
    fn gate(&self) -> std::process::Output {
        self.stream(&["gate", "stop-2"], &[])
    }
    fn gate_json(&self) -> (Option<i32>, Value) {
        let o = self.stream(&["gate", "stop-2"], &["--json"]);
        let (out, err) = text(&o);
        let v: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}\nstderr:\n{err}"));
        (o.status.code(), v)
    }
    fn write(&self, rel: &str, content: &str) {
        let p = self.wt().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    fn status_text(&self) -> String {
        std::fs::read_to_string(self.wt().join(".saphan/status")).unwrap()
    }
    fn set_status(&self, text: &str) {
        std::fs::write(self.wt().join(".saphan/status"), text).unwrap();
    }
    /// Append lines under the existing `- return:` (which is the last field).
    fn declare(&self, paths: &[&str]) {
        let mut s = self.status_text();
        for p in paths {
            s.push_str(&format!("  {p}\n"));
        }
        self.set_status(&s);
    }
    /// Write a file whose name is given as raw bytes.
    fn write_bytes(&self, rel: &[u8], content: &str) -> PathBuf {
        use std::os::unix::ffi::OsStrExt;
        let p = self.wt().join(std::ffi::OsStr::from_bytes(rel));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
    /// Append raw bytes to the status file (after its `- return:` field).
    fn append_status(&self, lines: &[u8]) {
        let f = self.wt().join(".saphan/status");
        let mut s = std::fs::read(&f).unwrap();
        s.extend_from_slice(lines);
        std::fs::write(f, s).unwrap();
    }
    /// The one archive directory of this stream.
    fn archive(&self) -> PathBuf {
        let d = self.env.home().join("archive").join(&self.name);
        let mut v: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(v.len(), 1, "{v:?}");
        v.pop().unwrap()
    }
    fn base(&self) -> String {
        git(&self.repo(), &["rev-parse", "main"])
    }
    fn worktrees(&self) -> Vec<PathBuf> {
        git(&self.repo(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .map(PathBuf::from)
            .collect()
    }
}

fn sha256(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn start_makes_branch_worktree_and_an_ignored_status_file() {
    let f = Fixture::new("alpha");
    let exclude = f.repo().join(".git/info/exclude");
    let exclude_before = std::fs::read(&exclude).ok();
    // The branch, at the base.
    assert_eq!(
        git(&f.repo(), &["rev-parse", "refs/heads/stream/alpha"]),
        f.base()
    );
    // The worktree, where the docs say, on that branch.
    let wt = std::fs::canonicalize(f.wt()).unwrap();
    assert!(
        f.worktrees().iter().any(|p| p == &wt),
        "{:?}",
        f.worktrees()
    );
    assert_eq!(
        git(&f.wt(), &["symbolic-ref", "HEAD"]),
        "refs/heads/stream/alpha"
    );
    // The status file: stream, full base SHA, an empty return list.
    let s = f.status_text();
    assert!(s.contains("- stream: alpha\n"), "{s}");
    assert!(s.contains(&format!("- base: {}\n", f.base())), "{s}");
    assert!(s.contains("- return:\n"), "{s}");
    // Ignored in the stream's worktree, without touching the shared exclude.
    assert_eq!(
        git(&f.wt(), &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    git(&f.wt(), &["check-ignore", "-q", ".saphan/status"]);
    assert_eq!(std::fs::read(&exclude).ok(), exclude_before);
    // Registered in the common git dir.
    assert!(f.repo().join(".git/saphan/streams/alpha.json").is_file());
    // A second start of the same name is refused by name.
    let o = f.saphan(&["stream", "start", "alpha", "--repo", &f.repo_str()]);
    assert_refused(&o, "stream-exists");
    // A name that cannot be a branch component is refused before anything is made.
    let o = f.saphan(&["stream", "start", "../evil", "--repo", &f.repo_str()]);
    assert_refused(&o, "stream-name-invalid");
}

#[test]
fn start_honours_base_and_worktree_and_commands_find_the_repo_from_the_worktree() {
    let f = Fixture::new("first");
    let old = f.base();
    git(
        &f.repo(),
        &["commit", "-q", "--allow-empty", "-m", "second"],
    );
    let wt = f.tmp.path().join("elsewhere");
    let o = f.saphan(&[
        "stream",
        "start",
        "second",
        "--repo",
        &f.repo_str(),
        "--base",
        &old[..10],
        "--worktree",
        &wt.to_string_lossy(),
    ]);
    assert_code(&o, 0);
    let s = std::fs::read_to_string(wt.join(".saphan/status")).unwrap();
    assert!(s.contains(&format!("- base: {old}\n")), "{s}");
    // No --repo: found from the current directory (the stream's own worktree).
    let o = f
        .env
        .cmd()
        .current_dir(&wt)
        .args(["stream", "status", "second", "--json"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let v: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    assert_eq!(v["base"], old.as_str());
}

#[test]
fn understated_manifest_fails_the_gate_naming_the_file() {
    let f = Fixture::new("under");
    f.write("reports/summary.md", "the result\n");
    f.write("reports/raw-output.txt", "undeclared evidence\n");
    f.declare(&["reports/summary.md"]);
    let o = f.gate();
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(out.contains("returns-exist: pass"), "{out}");
    assert!(out.contains("returns-complete: FAIL"), "{out}");
    assert!(out.contains("    reports/raw-output.txt\n"), "{out}");
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(1));
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["returns_complete"]["result"], "fail");
    assert_eq!(
        strs(&v["returns_complete"]["lost"]),
        vec!["reports/raw-output.txt"]
    );
    assert_eq!(
        strs(&v["returns_complete"]["declared"]),
        vec!["reports/summary.md"]
    );
    // Declaring it makes the gate pass.
    f.declare(&["reports/raw-output.txt"]);
    assert_code(&f.gate(), 0);
}

#[test]
fn uncommitted_edit_of_a_tracked_file_counts_as_lost_work() {
    let f = Fixture::new("edit");
    f.write("README.md", "changed in the stream, never committed\n");
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(1));
    assert_eq!(strs(&v["returns_complete"]["lost"]), vec!["README.md"]);
}

#[test]
fn committed_undeclared_paths_are_a_warning_not_a_failure() {
    let f = Fixture::new("commit");
    f.write("lib/feature.go", "package lib\n");
    git(&f.wt(), &["add", "lib/feature.go"]);
    git(&f.wt(), &["commit", "-q", "-m", "feature"]);
    let o = f.gate();
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert!(out.contains("warning: undeclared but committed"), "{out}");
    assert!(out.contains("    lib/feature.go\n"), "{out}");
    let (_, v) = f.gate_json();
    assert_eq!(v["verdict"], "pass");
    assert_eq!(
        strs(&v["returns_complete"]["committed_undeclared"]),
        vec!["lib/feature.go"]
    );
    assert_eq!(v["returns_complete"]["authored"][0]["where"], "committed");
}

#[test]
fn declared_but_absent_fails_returns_exist_by_name() {
    let f = Fixture::new("absent");
    f.write("present.txt", "here\n");
    f.declare(&["present.txt", "reports/never-written.xml"]);
    let o = f.gate();
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(out.contains("returns-exist: FAIL"), "{out}");
    assert!(out.contains("    reports/never-written.xml\n"), "{out}");
    let (_, v) = f.gate_json();
    assert_eq!(v["returns_exist"]["name"], "returns-exist");
    assert_eq!(v["returns_exist"]["result"], "fail");
    assert_eq!(
        strs(&v["returns_exist"]["absent"]),
        vec!["reports/never-written.xml"]
    );
    assert_eq!(v["returns_complete"]["result"], "pass");
    // Teardown refuses by the same name and leaves everything in place.
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    let err = text(&o).1;
    assert!(err.starts_with("saphan: returns-exist:"), "{err}");
    assert!(err.contains("reports/never-written.xml"), "{err}");
    assert!(f.wt().join("present.txt").is_file());
}

#[test]
fn no_return_field_passes_returns_exist_and_still_lists_what_would_be_lost() {
    let f = Fixture::new("bare");
    f.set_status(&format!("- stream: bare\n- base: {}\n", f.base()));
    f.write("notes.md", "notes\n");
    f.write("out/run.log", "log\n");
    let o = f.gate();
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(
        out.contains("returns-exist: pass — the status file has no `- return:` field"),
        "{out}"
    );
    assert!(
        out.contains("    notes.md\n") && out.contains("    out/run.log\n"),
        "{out}"
    );
    let (_, v) = f.gate_json();
    assert_eq!(v["returns_exist"]["result"], "pass");
    assert_eq!(v["returns_exist"]["return_field"], false);
    assert_eq!(v["returns_complete"]["result"], "fail");
    assert_eq!(
        strs(&v["returns_complete"]["lost"]),
        vec!["notes.md", "out/run.log"]
    );
    // With nothing authored, the same file is a clean pass.
    std::fs::remove_file(f.wt().join("notes.md")).unwrap();
    std::fs::remove_dir_all(f.wt().join("out")).unwrap();
    assert_code(&f.gate(), 0);
}

#[test]
fn teardown_archives_with_verifiable_sha256_and_removes_the_worktree() {
    let f = Fixture::new("done");
    f.write("reports/summary.md", "summary bytes\n");
    f.write("results/a.json", "{\"a\":1}\n");
    f.write("results/deep/b.bin", "\u{0}\u{1}binary-ish\n");
    f.write("README.md", "edited and declared\n");
    f.declare(&["reports/summary.md", "results/", "README.md"]);
    // What the files hash to in the worktree, before teardown.
    let want: Vec<(String, String)> = [
        "README.md",
        "reports/summary.md",
        "results/a.json",
        "results/deep/b.bin",
    ]
    .iter()
    .map(|p| (p.to_string(), sha256(&f.wt().join(p))))
    .collect();
    let wt = std::fs::canonicalize(f.wt()).unwrap();

    let o = f.stream(&["teardown"], &["--json"]);
    assert_code(&o, 0);
    let v: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    let archive = PathBuf::from(v["archive"].as_str().unwrap());
    assert!(
        archive.starts_with(f.env.home().join("archive").join("done")),
        "{archive:?}"
    );
    // The manifest on disk, re-hashed here independently.
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(archive.join("manifest.json")).unwrap())
            .unwrap();
    let mut got: Vec<(String, String)> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let p = e["path"].as_str().unwrap().to_string();
            let sha = e["sha256"].as_str().unwrap().to_string();
            assert_eq!(sha256(&archive.join("files").join(&p)), sha, "{p}");
            (p, sha)
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(m["stream"], "done");
    assert_eq!(m["base"], f.base().as_str());
    // The status file rides along as evidence.
    assert!(
        std::fs::read_to_string(archive.join("status"))
            .unwrap()
            .contains("- stream: done")
    );
    // The worktree is gone, from disk and from git; the branch is kept.
    assert!(!wt.exists());
    assert!(
        !f.worktrees().iter().any(|p| p == &wt),
        "{:?}",
        f.worktrees()
    );
    git(
        &f.repo(),
        &["rev-parse", "--verify", "refs/heads/stream/done"],
    );
    // status reports the archive; gate and teardown refuse by name.
    let o = f.stream(&["status"], &["--json"]);
    assert_code(&o, 0);
    let s: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    assert_eq!(s["state"], "torn-down");
    assert_eq!(s["archive"], archive.to_string_lossy().as_ref());
    let o = f.gate();
    assert_refused(&o, "stream-torn-down");
}

#[test]
fn teardown_refuses_undeclared_untracked_work_until_it_is_waived() {
    let f = Fixture::new("waive");
    f.write("kept.txt", "keep me\n");
    f.write("scratch/debug.log", "noise\n");
    f.write("tmp.out", "more noise\n");
    f.declare(&["kept.txt"]);
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    let err = text(&o).1;
    assert!(err.starts_with("saphan: returns-complete:"), "{err}");
    assert!(
        err.contains("scratch/debug.log") && err.contains("tmp.out"),
        "{err}"
    );
    // Nothing was lost or archived.
    assert!(f.wt().join("scratch/debug.log").is_file());
    assert!(
        !f.env.home().join("archive/waive").exists() || {
            // a refused teardown leaves no archive behind
            std::fs::read_dir(f.env.home().join("archive/waive"))
                .unwrap()
                .next()
                .is_none()
        }
    );
    // Waiving only one of the two is still refused, naming the other.
    let o = f.stream(&["teardown"], &["--waive", "scratch=debug output"]);
    assert_code(&o, 2);
    let err = text(&o).1;
    assert!(
        err.contains("tmp.out") && !err.contains("scratch/debug.log"),
        "{err}"
    );
    // A waiver without a reason is refused.
    let o = f.stream(&["teardown"], &["--waive", "tmp.out"]);
    assert_refused(&o, "waive-malformed");
    // One waiver in the status file, one on the command line: teardown runs.
    let mut s = f.status_text();
    s.push_str("- waive: tmp.out — a temporary file of the tool\n");
    f.set_status(&s);
    let o = f.stream(
        &["teardown"],
        &["--waive", "scratch=debug output", "--json"],
    );
    assert_code(&o, 0);
    let v: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    let waived: Vec<(String, String)> = v["manifest"]["waived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["path"].as_str().unwrap().to_string(),
                w["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        waived,
        vec![
            ("scratch/debug.log".to_string(), "debug output".to_string()),
            (
                "tmp.out".to_string(),
                "a temporary file of the tool".to_string()
            ),
        ]
    );
    assert!(!f.wt().exists());
}

#[test]
fn hostile_paths_are_refused_by_name() {
    let f = Fixture::new("hostile");
    let outside = f.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "not yours\n").unwrap();
    std::os::unix::fs::symlink(&outside, f.wt().join("escape")).unwrap();
    std::os::unix::fs::symlink("../../nowhere/file", f.wt().join("dangling")).unwrap();
    std::fs::create_dir_all(f.wt().join("results")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", f.wt().join("results/pw")).unwrap();
    let base = f.status_text();
    for (path, why) in [
        ("../x", "`..`"),
        ("reports/../../x", "`..`"),
        ("/etc/passwd", "absolute"),
        ("escape/secret", "symlink escape"),
        ("escape", "symlink escape"),
        ("dangling", "symlink"),
        ("results", "symlink inside a declared directory"),
        (".git/config", "git's own files"),
    ] {
        f.set_status(&format!("{base}  {path}\n"));
        for verb in [&["gate", "stop-2"][..], &["teardown"][..], &["status"][..]] {
            let o = f.stream(verb, &[]);
            assert_code(&o, 2);
            let err = text(&o).1;
            assert!(
                err.starts_with("saphan: return-path-hostile:"),
                "{path} ({why}) via {verb:?}: {err}"
            );
        }
    }
    // A hostile waiver is refused the same way.
    f.set_status(&format!("{base}- waive: ../../x — because\n"));
    let o = f.gate();
    assert_refused(&o, "return-path-hostile");
    let o = f.stream(&["teardown"], &["--waive", "/etc=nothing"]);
    assert_refused(&o, "return-path-hostile");
    // Nothing was touched: the worktree and the outside file remain.
    assert!(f.wt().is_dir());
    assert!(outside.join("secret").is_file());
    // A symlink that stays inside the worktree is fine.
    std::fs::remove_file(f.wt().join("results/pw")).unwrap();
    f.write("real/data.txt", "data\n");
    std::os::unix::fs::symlink("real", f.wt().join("alias")).unwrap();
    f.set_status(&format!(
        "{base}  alias/data.txt\n  real/\n- waive: escape — a link to a fixture\n- waive: dangling — a broken link\n- waive: results — empty\n- waive: alias — a convenience link to real/\n"
    ));
    let o = f.gate();
    assert_code(&o, 0);
}

#[test]
fn malformed_status_files_are_refused_by_name() {
    let f = Fixture::new("malformed");
    let sha = f.base();
    for (text_, name) in [
        (
            format!("- stream: malformed\n- base: {sha}\n- retrun:\n  a\n"),
            "status-file-malformed",
        ),
        (
            format!("- stream: malformed\n- base: {sha}\nstray line\n"),
            "status-file-malformed",
        ),
        (
            format!("- stream: malformed\n- base: {sha}\n- waive: a.txt\n"),
            "waiver-without-reason",
        ),
        (
            format!("- stream: other\n- base: {sha}\n"),
            "status-file-mismatch",
        ),
        (
            "- stream: malformed\n- base: main\n".to_string(),
            "status-file-mismatch",
        ),
    ] {
        f.set_status(&text_);
        let o = f.gate();
        assert_code(&o, 2);
        let err = text(&o).1;
        assert!(
            err.starts_with(&format!("saphan: {name}:")),
            "{text_}: {err}"
        );
    }
    std::fs::remove_file(f.wt().join(".saphan/status")).unwrap();
    let o = f.gate();
    assert_refused(&o, "status-file-missing");
}

#[test]
fn status_and_gate_speak_json() {
    let f = Fixture::new("json");
    f.write("a.txt", "a\n");
    f.declare(&["a.txt"]);
    let o = f.stream(&["status"], &["--json"]);
    assert_code(&o, 0);
    let v: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    assert_eq!(v["name"], "json");
    assert_eq!(v["branch"], "stream/json");
    assert_eq!(v["state"], "active");
    assert_eq!(v["base"], f.base().as_str());
    assert_eq!(v["head"], f.base().as_str());
    assert_eq!(v["return_field"], true);
    assert_eq!(strs(&v["returns"]), vec!["a.txt"]);
    assert_eq!(
        PathBuf::from(v["worktree"].as_str().unwrap()),
        std::fs::canonicalize(f.wt()).unwrap()
    );
    let (code, g) = f.gate_json();
    assert_eq!(code, Some(0));
    assert_eq!(g["gate"], "stop-2");
    assert_eq!(g["stream"], "json");
    assert_eq!(g["verdict"], "pass");
    assert_eq!(g["returns_exist"]["declared"], serde_json::json!(["a.txt"]));
    assert_eq!(
        g["returns_complete"]["authored"],
        serde_json::json!([{"path": "a.txt", "where": "uncommitted"}])
    );
    // A refusal under --json is one JSON object too.
    let o = f.saphan(&[
        "stream",
        "status",
        "nope",
        "--repo",
        &f.repo_str(),
        "--json",
    ]);
    assert_code(&o, 2);
    let e: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    assert_eq!(e["error"], "stream-unknown");
    assert_eq!(e["exit_code"], 2);
}

#[test]
fn teardown_refuses_a_locked_worktree_before_archiving() {
    let f = Fixture::new("locked");
    f.write("out.txt", "x\n");
    f.declare(&["out.txt"]);
    git(&f.repo(), &["worktree", "lock", &f.wt().to_string_lossy()]);
    let o = f.stream(&["teardown"], &[]);
    assert_refused(&o, "stream-worktree-locked");
    assert!(!f.env.home().join("archive").exists());
    assert!(f.wt().join("out.txt").is_file());
    git(
        &f.repo(),
        &["worktree", "unlock", &f.wt().to_string_lossy()],
    );
    assert_code(&f.stream(&["teardown"], &[]), 0);
}

#[test]
fn start_refuses_a_repository_that_tracks_dot_saphan_and_leaves_nothing() {
    let repo = common::Repo::new(&[(".saphan/status", "- stream: tracked\n")]);
    let env = Env::new();
    let wt = repo.dir.path().join("nested-wt");
    let o = env.run(&[
        "stream",
        "start",
        "t",
        "--repo",
        &repo.path_str(),
        "--worktree",
        &wt.to_string_lossy(),
    ]);
    assert_refused(&o, "stream-status-tracked");
    assert!(!wt.exists());
    assert_eq!(repo.worktrees().len(), 1);
    assert!(git(repo.path(), &["branch", "--list", "stream/t"]).is_empty());
}

/// `--skip-worktree` / `--assume-unchanged` hide an edit from `git status`;
/// the gate must still see it, or teardown's `--force` destroys it.
#[test]
fn edits_hidden_by_skip_worktree_or_assume_unchanged_fail_the_gate() {
    let f = Fixture::new("hidden");
    // Flagged but unchanged: nothing to lose, the gate passes.
    git(&f.wt(), &["update-index", "--assume-unchanged", "main.go"]);
    git(&f.wt(), &["update-index", "--skip-worktree", "README.md"]);
    assert_code(&f.gate(), 0);
    // Now edit both; git status stays silent about them.
    f.write("README.md", "hello\nx\n");
    f.write("main.go", "package main\n// edited\n");
    assert_eq!(git(&f.wt(), &["status", "--porcelain"]), "");
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(
        strs(&v["returns_complete"]["lost"]),
        vec!["README.md", "main.go"]
    );
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    assert!(
        text(&o).1.starts_with("saphan: returns-complete:") && text(&o).1.contains("README.md"),
        "{}",
        text(&o).1
    );
    assert_eq!(
        std::fs::read_to_string(f.wt().join("README.md")).unwrap(),
        "hello\nx\n"
    );
    // Declared, they are archived and teardown goes through.
    f.declare(&["README.md", "main.go"]);
    assert_code(&f.stream(&["teardown"], &[]), 0);
}

/// Ignored files are not authored (build outputs), but the gate and teardown
/// say which ones teardown deletes, in text and JSON.
#[test]
fn ignored_files_teardown_deletes_are_listed() {
    let f = Fixture::new("ign");
    f.write(".gitignore", "results/\n");
    git(&f.wt(), &["add", ".gitignore"]);
    git(&f.wt(), &["commit", "-q", "-m", "ignore results"]);
    f.write("results/out.txt", "precious\n");
    f.write(".saphan/notes.txt", "my notes\n");
    f.declare(&[".gitignore"]);
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        strs(&v["ignored_deleted"]),
        vec![".saphan/notes.txt", "results/out.txt"]
    );
    let o = f.gate();
    assert_code(&o, 0);
    let out = text(&o).0;
    assert!(
        out.contains("warning: 2 ignored file(s)") && out.contains("    results/out.txt\n"),
        "{out}"
    );
    let o = f.stream(&["teardown"], &["--json"]);
    assert_code(&o, 0);
    let t: Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    assert_eq!(
        strs(&t["manifest"]["ignored_deleted"]),
        vec![".saphan/notes.txt", "results/out.txt"]
    );
    let archive = PathBuf::from(t["archive"].as_str().unwrap());
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(archive.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(strs(&m["ignored_deleted"]).len(), 2);
}

/// A second teardown while one runs is refused as `stream-busy` before it
/// does anything; two racing teardowns leave exactly one archive.
#[test]
fn concurrent_teardowns_take_a_per_stream_lock() {
    let f = Fixture::new("race");
    f.write("out.txt", "x\n");
    f.declare(&["out.txt"]);
    // Another process (this test) holds the lock: both verbs refuse.
    let lock = f.repo().join(".git/saphan/streams/race.lock");
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .unwrap();
    held.try_lock().unwrap();
    for o in [f.stream(&["teardown"], &[]), f.gate()] {
        assert_refused(&o, "stream-busy");
    }
    assert!(f.wt().exists());
    assert!(!f.env.home().join("archive/race").exists());
    held.unlock().unwrap();
    drop(held);
    // Two real teardown processes at once.
    let repo = f.repo_str();
    let spawn = || {
        f.env
            .cmd()
            .args(["stream", "teardown", "race", "--repo", &repo])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let ok = outs.iter().filter(|o| o.status.code() == Some(0)).count();
    assert_eq!(ok, 1, "{:?}", outs.iter().map(text).collect::<Vec<_>>());
    for o in outs.iter().filter(|o| o.status.code() != Some(0)) {
        assert_code(o, 2);
        let err = text(o).1;
        assert!(
            err.starts_with("saphan: stream-busy:") || err.starts_with("saphan: stream-torn-down:"),
            "{err}"
        );
    }
    let archives: Vec<_> = std::fs::read_dir(f.env.home().join("archive/race"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
}

/// A commit made inside a submodule of the stream's worktree lives only in
/// `.git/worktrees/<wt>/modules/`; teardown must not destroy it unwaived.
#[test]
fn submodule_commits_only_the_worktree_holds_block_teardown() {
    let f = Fixture::new("subm");
    let sub = f.tmp.path().join("subrepo");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q", "-b", "main"]);
    std::fs::write(sub.join("lib.txt"), "v1\n").unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-q", "-m", "v1"]);
    let sub_url = sub.to_string_lossy().into_owned();
    git(
        &f.wt(),
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &sub_url,
            "lib",
        ],
    );
    git(&f.wt(), &["commit", "-q", "-m", "add lib"]);
    // A new commit inside the submodule, recorded by the stream's branch.
    std::fs::write(f.wt().join("lib/lib.txt"), "v2 only here\n").unwrap();
    git(&f.wt().join("lib"), &["commit", "-q", "-am", "v2"]);
    git(&f.wt(), &["commit", "-q", "-am", "bump lib"]);
    f.declare(&[".gitmodules"]);
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(strs(&v["returns_complete"]["submodules_lost"]), vec!["lib"]);
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    assert!(
        text(&o).1.starts_with("saphan: submodule-commit-lost:") && text(&o).1.contains("lib"),
        "{}",
        text(&o).1
    );
    assert!(f.wt().join("lib/lib.txt").exists());
    // Waived by name, teardown goes through and records the decision.
    let o = f.stream(&["teardown"], &["--waive", "lib=pushed upstream by hand"]);
    assert_code(&o, 0);
}

/// A base rewritten away and garbage-collected is refused by name, and the
/// documented way out (the merge-base as the new `- base:`) works.
#[test]
fn a_missing_base_is_refused_by_name_and_a_merge_base_fixes_it() {
    let f = Fixture::new("rebased");
    f.write("work.txt", "w\n");
    git(&f.wt(), &["add", "work.txt"]);
    git(&f.wt(), &["commit", "-q", "-m", "work"]);
    let old_base = f.base();
    // Rewrite trunk's only commit, rebase the stream onto it, collect.
    git(&f.repo(), &["commit", "-q", "--amend", "-m", "rewritten"]);
    git(&f.wt(), &["rebase", "-q", "--onto", "main", &old_base]);
    git(&f.repo(), &["reflog", "expire", "--expire=now", "--all"]);
    git(&f.repo(), &["gc", "-q", "--prune=now"]);
    assert!(
        std::process::Command::new("git")
            .arg("-C")
            .arg(f.repo())
            .args(["cat-file", "-e", &format!("{old_base}^{{commit}}")])
            .status()
            .unwrap()
            .code()
            != Some(0)
    );
    for o in [f.gate(), f.stream(&["teardown"], &[])] {
        assert_code(&o, 2);
        let err = text(&o).1;
        assert!(
            err.starts_with("saphan: stream-base-missing:") && err.contains("git merge-base"),
            "{err}"
        );
    }
    // A base that is not an ancestor of the branch is refused too.
    let mb = git(&f.repo(), &["merge-base", "main", "stream/rebased"]);
    git(&f.repo(), &["commit", "-q", "--allow-empty", "-m", "later"]);
    let later = git(&f.repo(), &["rev-parse", "main"]);
    let s = f.status_text().replace(&old_base, &later);
    f.set_status(&s);
    let o = f.gate();
    assert_refused(&o, "stream-base-not-ancestor");
    f.set_status(&s.replace(&later, &mb));
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        strs(&v["returns_complete"]["committed_undeclared"]),
        vec!["work.txt"]
    );
}

#[test]
fn unused_waivers_are_refused_and_odd_paths_are_printed_escaped() {
    let f = Fixture::new("odd");
    f.write("a\nb.txt", "x\n");
    let o = f.gate();
    assert_code(&o, 1);
    let out = text(&o).0;
    assert!(out.contains("    \"a\\nb.txt\"\n"), "{out}");
    assert!(!out.lines().any(|l| l == "b.txt"), "{out}");
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    assert!(text(&o).1.contains("\"a\\nb.txt\""), "{}", text(&o).1);
    // A waiver for a path nothing would lose is refused, nothing is done.
    let o = f.stream(
        &["teardown"],
        &[
            "--waive",
            "a\nb.txt=scratch",
            "--waive",
            "README.md=not mine",
        ],
    );
    assert_code(&o, 2);
    assert!(
        text(&o).1.starts_with("saphan: waive-unused:") && text(&o).1.contains("README.md"),
        "{}",
        text(&o).1
    );
    assert!(f.wt().exists());
    // A status file saved with a UTF-8 byte-order mark is read as usual.
    let s = format!("\u{feff}{}", f.status_text());
    f.set_status(&s);
    let o = f.stream(&["teardown"], &["--waive", "a\nb.txt=scratch"]);
    assert_code(&o, 0);
}

#[test]
fn a_stream_whose_worktree_was_removed_by_hand_can_be_forgotten_not_torn_down() {
    let f = Fixture::new("gone");
    // While the worktree exists, forget refuses: teardown archives first.
    let o = f.stream(&["forget"], &[]);
    assert_refused(&o, "stream-worktree-present");
    std::fs::remove_dir_all(f.wt()).unwrap();
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 2);
    let (_, err) = text(&o);
    assert!(err.starts_with("saphan: stream-worktree-missing:"), "{err}");
    assert!(err.contains("saphan stream forget gone"), "{err}");
    let o = f.stream(&["forget"], &["--json"]);
    assert_code(&o, 0);
    assert_eq!(common::json(&o)["state"], "torn-down");
    // Now it is torn down like any other, and its branch is kept.
    let o = f.stream(&["status"], &[]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("torn down"), "{}", text(&o).0);
    git(&f.repo(), &["rev-parse", "--verify", "stream/gone"]);
}

// Issue 15 item 1: a file whose name is not UTF-8 is seen by the gate,
// refused by teardown while undeclared, and archived by its exact bytes
// once declared.
#[test]
fn a_non_utf8_name_is_seen_refused_and_archived_by_its_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let f = Fixture::new("bytes");
    let name: &[u8] = b"caf\xe9.txt";
    let file = f.write_bytes(name, "work\n");
    let (code, v) = f.gate_json();
    assert_eq!(code, Some(1));
    assert_eq!(
        v["returns_complete"]["lost"],
        serde_json::json!(["\"caf\\351.txt\""]),
        "{v}"
    );
    let o = f.stream(&["teardown"], &[]);
    let err = assert_refused(&o, "returns-complete");
    assert!(err.contains("\"caf\\351.txt\""), "{err}");
    assert!(file.exists(), "teardown removed work the gate never saw");
    // Declared by its quoted form: archived under the same bytes.
    f.append_status(b"  \"caf\\351.txt\"\n");
    let o = f.stream(&["teardown"], &["--json"]);
    assert_code(&o, 0);
    let copy = f
        .archive()
        .join("files")
        .join(std::ffi::OsStr::from_bytes(name));
    assert_eq!(std::fs::read_to_string(copy).unwrap(), "work\n");
    let m: Value =
        serde_json::from_slice(&std::fs::read(f.archive().join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["files"][0]["path"], "\"caf\\351.txt\"");
}

// Issue 15 item 2: a waiver names one path, whatever it holds.
#[test]
fn a_waiver_for_a_name_holding_the_separator_waives_only_that_name() {
    let f = Fixture::new("waive");
    f.write_bytes(b"a=b.log", "log\n");
    let keep = f.write_bytes(b"a/important.txt", "keep\n");
    // Unquoted, `a=b.log=scratch` could waive `a` or `a=b.log`: refused.
    let o = f.stream(&["teardown"], &["--waive", "a=b.log=scratch"]);
    assert_refused(&o, "waive-ambiguous");
    assert!(keep.exists());
    // Quoted: it waives `a=b.log` alone, so `a/important.txt` is still lost.
    let o = f.stream(&["teardown"], &["--waive", "\"a=b.log\"=scratch"]);
    let err = assert_refused(&o, "returns-complete");
    assert!(err.contains("a/important.txt"), "{err}");
    assert!(keep.exists());
    // The same in the status file: an unquoted line with two separators is
    // refused, a quoted one waives exactly that name.
    f.append_status("- waive: a — b.log — scratch\n".as_bytes());
    assert_refused(&f.gate(), "status-file-malformed");
    let t = f.status_text().replace(
        "- waive: a — b.log — scratch\n",
        "  a\n- waive: \"a=b.log\" — scratch\n",
    );
    f.set_status(&t);
    let o = f.stream(&["teardown"], &["--json"]);
    assert_code(&o, 0);
    let v = common::json(&o);
    assert_eq!(v["manifest"]["waived"][0]["path"], "\"a=b.log\"", "{v}");
    let copy = f.archive().join("files/a/important.txt");
    assert_eq!(std::fs::read_to_string(copy).unwrap(), "keep\n");
}

// Issue 15 item 3: the teardown report prints names escaped.
#[test]
fn the_teardown_report_escapes_names() {
    let f = Fixture::new("esc");
    f.write_bytes(b"\x1b[31mred", "x\n");
    f.write_bytes(b"x\n  removed worktree /forged", "y\n");
    // One declared as written (a raw escape byte), one by its quoted form.
    f.append_status(b"  \x1b[31mred\n  \"x\\n  removed worktree /forged\"\n");
    let o = f.stream(&["teardown"], &[]);
    assert_code(&o, 0);
    assert!(!o.stdout.contains(&0x1b), "{}", text(&o).0);
    let out = text(&o).0;
    assert!(
        !out.lines()
            .any(|l| l.starts_with("  removed worktree /forged")),
        "{out}"
    );
    assert!(out.contains("\"\\033[31mred\""), "{out}");
    assert!(out.contains("\"x\\n  removed worktree /forged\""), "{out}");
}
