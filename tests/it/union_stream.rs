//! verify-union and verify-stream end to end: the real binary, real git
//! repositories, real Go modules (standard library only), a real `go`.

use crate::common::gomod;
use crate::common::{Env, Repo, assert_code, git, json, text};

use crate::common::gomod::no_go;

fn saphan(env: &Env, args: &[&str]) -> std::process::Output {
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    c.args(args).output().unwrap()
}

/// `saphan verify-union --repo R --base BASE --stream S… [extra…]`.
fn union(
    env: &Env,
    r: &Repo,
    base: &str,
    streams: &[&str],
    extra: &[&str],
) -> std::process::Output {
    let repo = r.path_str();
    let mut a = vec!["verify-union", "--repo", &repo, "--base", base, "--stream"];
    a.extend_from_slice(streams);
    a.extend_from_slice(extra);
    saphan(env, &a)
}

/// A module whose one test says "at most two names registered". Each
/// stream registers one more name in a file of its own: each passes alone,
/// together they register three.
fn registry() -> Repo {
    let (gm, gc) = gomod::go_mod();
    let r = Repo::new(&[
        (gm, gc.as_str()),
        (
            "reg/reg.go",
            "package reg\n\nvar names = []string{\"base\"}\n\n// Names lists what is registered.\nfunc Names() []string { return names }\n",
        ),
        (
            "reg/reg_test.go",
            "package reg\n\nimport \"testing\"\n\nfunc TestAtMostTwo(t *testing.T) {\n\tif len(Names()) > 2 {\n\t\tt.Fatalf(\"%d names registered: %v\", len(Names()), Names())\n\t}\n}\n",
        ),
        ("NOTES.txt", "shared line\n"),
    ]);
    for (branch, name) in [("s1", "one"), ("s2", "two")] {
        git(r.path(), &["checkout", "-q", "-b", branch, "main"]);
        r.commit(
            &[(
                &format!("reg/{name}.go"),
                &format!("package reg\n\nfunc init() {{ names = append(names, \"{name}\") }}\n"),
            )],
            name,
        );
    }
    git(r.path(), &["checkout", "-q", "main"]);
    r
}

#[test]
fn two_streams_green_alone_are_red_together_and_the_record_says_union() {
    if no_go() {
        return;
    }
    let env = Env::new();
    let r = registry();
    let repo = r.path_str();
    for s in ["s1", "s2"] {
        let o = saphan(
            &env,
            &[
                "verify-union",
                "--repo",
                &repo,
                "--base",
                "main",
                "--stream",
                s,
            ],
        );
        assert_code(&o, 0);
        assert!(text(&o).0.contains(": green"), "{}", text(&o).0);
    }
    let o = saphan(
        &env,
        &[
            "verify-union",
            "--repo",
            &repo,
            "--base",
            "main",
            "--stream",
            "s1",
            "--stream",
            "s2",
            "--json",
        ],
    );
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(v["verb"], "verify-union");
    assert_eq!(v["verdict"], "red");
    assert_eq!(v["base"], git(r.path(), &["rev-parse", "main"]));
    assert_eq!(v["streams"][0]["name"], "s1");
    assert_eq!(v["streams"][0]["sha"], git(r.path(), &["rev-parse", "s1"]));
    assert_eq!(v["streams"][1]["name"], "s2");
    assert_eq!(v["streams"][1]["sha"], git(r.path(), &["rev-parse", "s2"]));
    assert_eq!(v["union"], v["sha"]);
    assert_eq!(v["suite_source"], "default-go");
    let named: Vec<&str> = v["named_tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        named.iter().any(|n| n.contains("TestAtMostTwo")),
        "{named:?}"
    );
    // The union commit has both stream heads as ancestors, and is the same
    // SHA every time (fixed identity and date).
    let sha = v["sha"].as_str().unwrap();
    git(r.path(), &["merge-base", "--is-ancestor", "s1", sha]);
    git(r.path(), &["merge-base", "--is-ancestor", "s2", sha]);
    let again = json(&saphan(
        &env,
        &[
            "verify-union",
            "--repo",
            &repo,
            "--base",
            "main",
            "--stream",
            "s1",
            "s2",
            "--json",
        ],
    ));
    assert_eq!(again["sha"], sha);
    // Advisory: four records (two single streams, two unions),
    // no pointer, no scratch worktree left, the working tree untouched.
    assert_eq!(r.records().len(), 4);
    assert!(r.records().iter().all(|x| x["verb"] == "verify-union"));
    assert!(git(r.path(), &["for-each-ref", "refs/saphan/"]).is_empty());
    assert_eq!(r.worktrees().len(), 1);
    assert_eq!(git(r.path(), &["status", "--porcelain"]), "");
    assert_eq!(
        git(r.path(), &["rev-parse", "--abbrev-ref", "HEAD"]),
        "main"
    );
}

#[test]
fn a_conflicting_union_names_the_stream_and_paths_and_saves_no_record() {
    let env = Env::new();
    let r = Repo::new(&[("NOTES.txt", "shared line\n"), ("other.txt", "o\n")]);
    env.write_config("[verify.full]\nargv = \"true\"\nreport = \"exitcode\"\n");
    for (b, line) in [("s1", "one\n"), ("s2", "two\n")] {
        git(r.path(), &["checkout", "-q", "-b", b, "main"]);
        r.commit(&[("NOTES.txt", line)], b);
    }
    git(r.path(), &["checkout", "-q", "main"]);
    let o = union(&env, &r, "main", &["s1", "s2"], &[]);
    assert_code(&o, 2);
    let (_, err) = text(&o);
    assert!(
        err.starts_with("saphan: union-merge-conflict: stream s2 ("),
        "{err}"
    );
    assert!(err.contains("in NOTES.txt"), "{err}");
    assert!(err.contains("no record was saved"), "{err}");
    assert!(r.records().is_empty());
    assert_eq!(r.worktrees().len(), 1);
    // The same with --json: the refusal object, still no record.
    let o = union(&env, &r, "main", &["s1", "s2"], &["--json"]);
    assert_eq!(json(&o)["error"], "union-merge-conflict");
    assert!(r.records().is_empty());
}

#[test]
fn a_union_that_obtains_no_measurement_is_an_error_with_no_record() {
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"sh,-c,sleep 60\"\nreport = \"exitcode\"\ntimeout = \"1s\"\n",
    );
    let r = Repo::new(&[("a.txt", "a\n")]);
    git(r.path(), &["checkout", "-q", "-b", "s1"]);
    r.commit(&[("b.txt", "b\n")], "b");
    git(r.path(), &["checkout", "-q", "main"]);
    let o = union(&env, &r, "main", &["s1"], &[]);
    assert_code(&o, 3);
    let (_, err) = text(&o);
    assert!(
        err.starts_with("saphan: union-measurement-failed: "),
        "{err}"
    );
    assert!(err.contains("timeout"), "{err}");
    assert!(r.records().is_empty());
    assert_eq!(r.worktrees().len(), 1);
}

fn go_module() -> Repo {
    let (gm, gc) = gomod::go_mod();
    let mut files: Vec<(String, String)> = vec![(gm.to_string(), gc)];
    files.extend(gomod::package("a", &[], 1));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    Repo::new(&refs)
}

#[test]
fn verify_stream_prints_its_default_budget_on_green() {
    if no_go() {
        return;
    }
    let env = Env::new();
    let r = go_module();
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .arg("verify-stream")
        .current_dir(r.path())
        .output()
        .unwrap();
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert!(out.contains("step budget: 10m per step (default)"), "{out}");
    for step in ["build", "vet", "test", "gofmt"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(step) && l.contains("pass")),
            "{step}: {out}"
        );
    }
    assert!(out.contains("result: green"), "{out}");
    let rec = &r.records()[0];
    assert_eq!(rec["verb"], "verify-stream");
    assert_eq!(rec["verdict"], "green");
    assert_eq!(rec["step_budget"], "10m");
    assert_eq!(rec["step_budget_source"], "default");
    assert_eq!(rec["steps"].as_array().unwrap().len(), 4);
    assert_eq!(rec["count"], 1);
    assert!(git(r.path(), &["for-each-ref", "refs/saphan/"]).is_empty());
}

#[test]
fn verify_stream_prints_its_configured_budget_on_red_and_gofmt_lists_fail() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"go,test,./...\"\ntimeout = \"20m\"\n");
    let r = go_module();
    // Well-formed Go that gofmt would rewrite: gofmt exits 0 and lists it.
    r.commit(
        &[("a/ugly.go", "package a\nfunc Ugly( ) int {return 3}\n")],
        "ugly",
    );
    let o = saphan(
        &env,
        &["verify-stream", "--repo", &r.path_str(), "--rev", "HEAD"],
    );
    assert_code(&o, 1);
    let (out, _) = text(&o);
    assert!(
        out.contains("step budget: 20m per step (config:verify.full.timeout)"),
        "{out}"
    );
    assert!(out.contains("gofmt lists 1 unformatted file(s)"), "{out}");
    assert!(out.contains("a/ugly.go"), "{out}");
    assert!(out.contains("result: red"), "{out}");
    let rec = &r.records()[0];
    assert_eq!(rec["verdict"], "red");
    assert_eq!(rec["step_budget"], "20m");
    assert_eq!(rec["step_budget_source"], "config:verify.full.timeout");
    let steps = rec["steps"].as_array().unwrap();
    let gofmt = steps.iter().find(|s| s["name"] == "gofmt").unwrap();
    assert_eq!(gofmt["outcome"], "fail");
    assert_eq!(gofmt["exit_code"], 0);
    assert_eq!(gofmt["files"][0], "a/ugly.go");
    for s in &steps[..3] {
        assert_eq!(s["outcome"], "pass", "{s}");
    }
}

#[test]
fn verify_stream_red_from_a_failing_test_still_prints_the_budget() {
    if no_go() {
        return;
    }
    let env = Env::new();
    let r = go_module();
    r.commit(
        &[(
            "a/fail_test.go",
            "package a\n\nimport \"testing\"\n\nfunc TestNo(t *testing.T) {\n\tt.Fatal(\"no\")\n}\n",
        )],
        "failing test",
    );
    // Uncommitted edits are not measured, and the run says so.
    std::fs::write(r.path().join("a/fail_test.go"), "package a\n").unwrap();
    let o = saphan(&env, &["verify-stream", "--repo", &r.path_str(), "--json"]);
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(v["verdict"], "red");
    assert_eq!(v["step_budget_source"], "default");
    let test = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "test")
        .unwrap()
        .clone();
    assert_eq!(test["outcome"], "fail");
    assert!(
        test["failing"][0].as_str().unwrap().contains("TestNo"),
        "{test}"
    );
    let o = saphan(&env, &["verify-stream", "--repo", &r.path_str()]);
    let (out, _) = text(&o);
    assert!(out.contains("step budget: 10m per step (default)"), "{out}");
    assert!(out.contains("uncommitted changes"), "{out}");
    assert!(out.contains("result: red"), "{out}");
}

#[test]
fn verify_stream_refuses_a_tree_without_go_mod() {
    let env = Env::new();
    let r = Repo::new(&[("a.txt", "a\n")]);
    let o = saphan(&env, &["verify-stream", "--repo", &r.path_str()]);
    assert_code(&o, 2);
    assert!(text(&o).1.starts_with("saphan: verify-stream-not-go: "));
    assert!(r.records().is_empty());
}

#[test]
fn verify_stream_in_a_stream_worktree_names_the_stream_and_ignores_its_status_file() {
    if no_go() {
        return;
    }
    let env = Env::new();
    let r = go_module();
    let wt = tempfile::Builder::new()
        .prefix("saphan-wt-")
        .tempdir()
        .unwrap();
    let wt = wt.path().join("feature");
    let o = saphan(
        &env,
        &[
            "stream",
            "start",
            "feature",
            "--repo",
            &r.path_str(),
            "--worktree",
            wt.to_str().unwrap(),
        ],
    );
    assert_code(&o, 0);
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["verify-stream", "--json"])
        .current_dir(&wt)
        .output()
        .unwrap();
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["stream"], "feature");
    assert_eq!(v["verdict"], "green");
    assert_eq!(v["sha"], git(&wt, &["rev-parse", "HEAD"]));
    // The record lives with the repository, seen from every worktree.
    assert_eq!(r.records().len(), 1);
}
