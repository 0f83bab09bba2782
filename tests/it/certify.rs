//! certify end to end: the real binary on real git repositories.

use crate::common;

use crate::common::{
    Env, Repo, assert_code, assert_only_main_worktree, assert_refused, have, json, skip_unless,
    text,
};
use std::time::{Duration, Instant};

const SUITE_CONFIG: &str = "[verify.full]\nargv = \"./suite.sh\"\n";

#[test]
fn green_exitcode_suite_moves_pointer_and_records_unavailable_count() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho ok\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green");
    assert_eq!(r["verb"], "certify");
    assert_eq!(r["sha"], repo.head());
    assert_eq!(r["machine"], "local");
    assert_eq!(r["class"], "host");
    assert_eq!(r["count"], "unavailable");
    assert_eq!(r["named_tests"], "unavailable");
    assert_eq!(r["report"], "exitcode");
    assert_eq!(r["suite_source"], "config:verify.full");
    assert_eq!(r["suite_argv"], serde_json::json!(["./suite.sh"]));
    assert_eq!(r["suite_exit_code"], 0);
    assert_eq!(r["budget_source"], "default");
    assert_eq!(r["budget_seconds"], 600.0);
    for k in [
        "id",
        "repo",
        "started_at",
        "finished_at",
        "suite_report_path",
        "suite_report_files",
        "provisions",
    ] {
        assert!(r.get(k).is_some(), "record lacks {k}: {r}");
    }
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    let recs = repo.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["id"], r["id"]);
    assert_only_main_worktree(&repo);

    // Human output says the verdict and where the record is.
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let (out, _) = text(&o);
    assert!(out.contains(": green"), "{out}");
    assert!(out.contains("attempts.jsonl"), "{out}");
    assert!(out.contains("count: unavailable"), "{out}");
}

#[test]
fn red_suite_records_exit_code_and_leaves_pointer() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho boom >&2\nexit 4\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red");
    assert_eq!(r["suite_exit_code"], 4);
    assert_eq!(r["count"], "unavailable");
    assert_eq!(repo.verified(), None);
    assert_only_main_worktree(&repo);
    assert_eq!(repo.records().len(), 1);
}

#[test]
fn pointer_only_moves_forward() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    let second = repo.commit(&[("b.txt", "b")], "second");
    assert_code(
        &env.run(&["certify", "--repo", &repo.path_str(), "--sha", &second]),
        0,
    );
    assert_eq!(repo.verified().as_deref(), Some(second.as_str()));
    assert_code(
        &env.run(&["certify", "--repo", &repo.path_str(), "--sha", &first]),
        0,
    );
    assert_eq!(
        repo.verified().as_deref(),
        Some(second.as_str()),
        "an older green must not move the pointer back"
    );
}

#[test]
fn certify_measures_the_exact_sha_not_the_working_tree() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let good = repo.head();
    repo.commit(&[("suite.sh", "#!/bin/sh\nexit 1\n")], "break");
    // Dirty the working tree too: certify must not see it.
    std::fs::write(repo.path().join("suite.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 1);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &good[..10],
        "--json",
    ]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["sha"], good, "the record carries the full SHA");
}

#[test]
fn no_declaration_in_a_swift_repo_is_refused_with_the_spec_text() {
    let env = Env::new();
    let repo = Repo::new(&[("Package.swift", "// swift-tools-version:5.9\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 2);
    let (_, err) = text(&o);
    let p = repo.path().display().to_string();
    let first = err.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "saphan: trunkcert: refusing to certify {p}: verify: {p} carries no go.mod and config-v1 declares no [verify.full] suite, so there is NO suite to run here — refusing to measure rather than running Go's own test command in a repository it knows nothing about and reporting a verdict about the result (detected: a swift project (Package.swift)). Declare the suite, then re-run:"
        )
    );
    assert!(
        err.contains("  saphan config set verify.full.argv \"swift,test\"\n"),
        "{err}"
    );
    assert!(
        err.contains("  saphan config set verify.full.report exitcode\n"),
        "{err}"
    );
    assert!(err.contains("`saphan init` proposes this block for a detected stack, and `saphan config show` prints what is currently declared."), "{err}");
    assert!(
        !repo.path().join(".git/saphan").exists(),
        "a refusal writes nothing"
    );
    assert_only_main_worktree(&repo);
}

#[test]
fn no_declaration_and_no_marker_is_refused_without_a_proposal() {
    let env = Env::new();
    let repo = Repo::new(&[("README", "hi")]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 2);
    let r = json(&o);
    assert_eq!(r["error"], "trunkcert");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("detected: no known stack marker")
    );
    assert!(!repo.path().join(".git/saphan").exists());
}

#[test]
fn absent_toolchain_is_refused_before_lock_and_worktree() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"swift,test\"\n");
    let repo = Repo::new(&[("Package.swift", "//\n")]);
    if skip_unless(
        !have("swift"),
        "swift is installed here; this test needs it absent",
    ) {
        return;
    }
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 2);
    let (_, err) = text(&o);
    assert!(
        err.starts_with("saphan: verification-toolchain-absent: "),
        "{err}"
    );
    assert!(err.contains("`swift`"), "{err}");
    assert!(err.contains("machine local"), "{err}");
    assert!(err.contains("catalog row: swift"), "{err}");
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    if os.contains("ID=debian") {
        assert!(err.contains("apt-get install -y swiftlang"), "{err}");
    }
    assert!(
        !repo.path().join(".git/saphan").exists(),
        "no lock, no record"
    );
    assert_only_main_worktree(&repo);

    // A program no catalog row maps: still refused, NO INSTALL COMMAND.
    env.write_config("[verify.full]\nargv = \"saphan-no-such-program-xyz\"\n");
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 2);
    let (_, err) = text(&o);
    assert!(err.contains("NO INSTALL COMMAND"), "{err}");
}

#[test]
fn relative_suite_program_missing_from_the_sha_is_refused() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./missing.sh\"\n");
    let repo = Repo::new(&[("a.txt", "a")]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    let err = common::assert_refused(&o, "suite-program-not-in-commit");
    let sha = repo.head();
    assert!(
        err.contains("`./missing.sh` is a path inside the repository")
            && err.contains(&format!("commit {sha} does not carry it"))
            && err.contains("`missing.sh`")
            && !err.contains("NO INSTALL COMMAND"),
        "{err}"
    );
    assert!(
        !repo.path().join(".git/saphan").exists(),
        "no lock, no record"
    );
    assert_only_main_worktree(&repo);
}

#[test]
fn provision_is_placed_hashed_and_invisible_to_an_inner_clean_tree_check() {
    let env = Env::new();
    let src_dir = tempfile::tempdir().unwrap();
    let src = src_dir.path().join("openapi.yaml");
    std::fs::write(&src, "openapi: 3.1.0\n").unwrap();
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nset -e\ntest \"$(cat .provision/openapi.yaml)\" = 'openapi: 3.1.0'\ndirt=$(git status --porcelain --untracked-files=all)\nif [ -n \"$dirt\" ]; then echo \"dirty: $dirt\" >&2; exit 7; fi\n",
    )]);
    let exclude_before = std::fs::read(repo.path().join(".git/info/exclude")).ok();
    env.write_config(&format!(
        "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.contract]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \".provision/openapi.yaml\"\n",
        repo.path().display(),
        src.display()
    ));
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let r = json(&o);
    let want = {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(b"openapi: 3.1.0\n"))
    };
    assert_eq!(
        r["provisions"],
        serde_json::json!([{"dest": ".provision/openapi.yaml", "sha256": want}])
    );
    assert_eq!(
        std::fs::read(repo.path().join(".git/info/exclude")).ok(),
        exclude_before,
        "shared exclude untouched"
    );
    assert!(
        !repo.path().join(".provision").exists(),
        "the operator's checkout is untouched"
    );
    assert_only_main_worktree(&repo);

    // A changed source gives a visibly different record.
    std::fs::write(&src, "openapi: 3.1.1\n").unwrap();
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 1);
    assert_ne!(json(&o)["provisions"][0]["sha256"], serde_json::json!(want));
}

#[test]
fn provision_for_another_repository_is_not_placed() {
    let env = Env::new();
    let src = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(src.path(), "x").unwrap();
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\ntest ! -e .provision/x\n")]);
    env.write_config(&format!(
        "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.other]\nrepo = \"/somewhere/else\"\nsource = \"{}\"\ndest = \".provision/x\"\n",
        src.path().display()
    ));
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["provisions"], serde_json::json!([]));
}

#[test]
fn provision_sources_missing_empty_or_unreadable_are_refused_by_name() {
    let env = Env::new();
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let cases = [
        (
            dir.path().join("missing").display().to_string(),
            ".provision/a",
            "provision-source-missing",
        ),
        (
            empty.display().to_string(),
            ".provision/a",
            "provision-source-empty",
        ),
        (
            dir.path().display().to_string(),
            ".provision/a",
            "provision-source-unreadable",
        ),
        (
            empty.display().to_string(),
            "../escape",
            "provision-dest-hostile",
        ),
    ];
    for (source, dest, name) in cases {
        env.write_config(&format!(
            "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.c]\nrepo = \"{}\"\nsource = \"{source}\"\ndest = \"{dest}\"\n",
            repo.path().display()
        ));
        let o = env.run(&["certify", "--repo", &repo.path_str()]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(
            err.starts_with(&format!("saphan: {name}: ")),
            "want {name}: {err}"
        );
        assert!(
            !repo.path().join(".git/saphan").exists(),
            "nothing written for {name}"
        );
        assert_only_main_worktree(&repo);
    }
}

#[test]
fn timeout_kills_the_whole_group_including_a_grandchild_holding_stdout() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\ntimeout = \"1h\"\n");
    let marker = format!("saphan-grandchild-{}", std::process::id());
    let repo = Repo::new(&[(
        "suite.sh",
        &format!("#!/bin/sh\necho started\n(exec -a {marker} sleep 300) &\nexec sleep 301\n"),
    )]);
    let t0 = Instant::now();
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--timeout",
        "2s",
        "--json",
    ]);
    let took = t0.elapsed();
    assert_code(&o, 3);
    assert!(
        took < Duration::from_secs(2 + 2 + 10),
        "budget 2s + grace 2s, took {took:?}"
    );
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["failure"], "timeout");
    assert_eq!(
        r["budget_source"], "flag:--timeout",
        "--timeout wins over the config"
    );
    assert_eq!(r["budget"], "2s");
    assert_eq!(r["suite_exit_code"], serde_json::Value::Null);
    assert_eq!(r["count"], "unavailable");
    let ps = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "grandchild survived: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
    assert_only_main_worktree(&repo);
    assert_eq!(repo.verified(), None);
}

#[test]
fn config_timeout_is_the_budget_when_no_flag() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\ntimeout = \"1s\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 30\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["budget_source"], "config:verify.full.timeout");
    assert_eq!(r["failure"], "timeout");
}

#[test]
fn ctrl_c_kills_the_suite_removes_the_tree_and_records_interrupted() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    // The suite marks that it started in its own tree.
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\ntouch running\nexec sleep 300\n")]);
    let child = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while common::in_scratch_tree(env.home(), "running").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "suite never started"
        );
        std::thread::yield_now();
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["failure"], "interrupted");
    assert_only_main_worktree(&repo);
    assert_eq!(common::in_scratch_tree(env.home(), "running"), None);
}

#[test]
fn eight_concurrent_certify_runs_give_eight_whole_records() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nfor i in 1 2 3; do echo line $i; done\n",
    )]);
    let children: Vec<_> = (0..8)
        .map(|_| {
            env.cmd()
                .args(["certify", "--repo", &repo.path_str(), "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_code(&o, 0);
    }
    let recs = repo.records();
    assert_eq!(recs.len(), 8);
    let mut ids: Vec<_> = recs
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8, "ids are unique");
    assert_only_main_worktree(&repo);
}

#[test]
fn bad_revision_and_not_a_repository_are_refused() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        "no-such-rev",
    ]);
    assert_refused(&o, "bad-revision");
    let dir = tempfile::tempdir().unwrap();
    let o = env.run(&["certify", "--repo", &dir.path().display().to_string()]);
    assert_refused(&o, "not-a-repository");
}

#[test]
fn records_lists_and_shows() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let r = json(&env.run(&["certify", "--repo", &repo.path_str(), "--json"]));
    let id = r["id"].as_str().unwrap();
    let o = env.run(&["records", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains(id));
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", id, "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["id"], id);
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", "nope"]);
    assert_code(&o, 2);
    assert!(text(&o).1.starts_with("saphan: record-not-found: "));
}

#[test]
fn default_go_certifies_a_real_go_module() {
    if common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = Repo::new(&[
        ("go.mod", "module example.com/demo\n\ngo 1.19\n"),
        (
            "demo.go",
            "package demo\n\nfunc Add(a, b int) int { return a + b }\n",
        ),
        (
            "demo_test.go",
            "package demo\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n\nfunc TestAddZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n",
        ),
    ]);
    let o = env
        .cmd()
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["suite_source"], "default-go");
    assert_eq!(r["report"], "go-test-json");
    let argv: Vec<String> = serde_json::from_value(r["suite_argv"].clone()).unwrap();
    let go = common::gomod::default_go();
    assert_eq!(argv, vec![go, "test", "-count=1", "-json", "./..."]);
    assert_eq!(r["count"], 2);
    assert_eq!(r["named_tests"], serde_json::json!([]));
    assert_only_main_worktree(&repo);
}

// ---- regressions from the break-it review ----

#[test]
fn a_cut_off_go_test_json_stream_is_never_green() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"sh,-c,cat ev.json\"\nreport = \"go-test-json\"\n");
    let repo = Repo::new(&[(
        "ev.json",
        "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n{\"Action\":\"output\",\"Package\":\"p\",\"Test\":\"TestA\",\"Output\":\"panic: boom\\n\"}\n",
    )]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["failure"], "stream-ended-early");
    assert_eq!(repo.verified(), None);
}

#[test]
fn the_pointer_follows_trunk_only() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    // A green on a feature branch is recorded, but trunk (main) keeps the pointer.
    common::git(repo.path(), &["checkout", "-q", "-b", "feature"]);
    let feature = repo.commit(&[("f.txt", "f")], "feature work");
    common::git(repo.path(), &["checkout", "-q", "main"]);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &feature,
        "--json",
    ]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["trunk"], "refs/heads/main");
    assert!(
        r["verified_pointer"]
            .as_str()
            .unwrap()
            .contains("is not on trunk refs/heads/main"),
        "{r}"
    );
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    // Trunk moves on and its next green moves the pointer.
    let second = repo.commit(&[("m.txt", "m")], "trunk work");
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    assert!(
        text(&o)
            .0
            .contains(&format!("refs/saphan/verified -> {second} (moved)")),
        "{}",
        text(&o).0
    );
    assert_eq!(repo.verified().as_deref(), Some(second.as_str()));
    // Naming another trunk than the one the pointer follows is refused
    // (the_pointer_never_leaves_its_trunk): it never jumps sideways.
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &feature,
        "--trunk",
        "feature",
        "--json",
    ]);
    assert_code(&o, 2);
    assert_eq!(json(&o)["error"], "trunk-mismatch");
    assert_eq!(repo.verified().as_deref(), Some(second.as_str()));
}

/// Issue 21.8: after `certify --sha side --trunk side`, trunk's next green
/// used to find the pointer on `side` ("not on trunk … move it by hand").
/// The pointer follows one trunk per repository (recorded on its first
/// move); another `--trunk` is refused by name before anything runs, with
/// the commands that re-point it deliberately.
#[test]
fn the_pointer_never_leaves_its_trunk() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    let state = repo.path().join(".git/saphan/verified-trunk");
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "refs/heads/main\n",
        "the first move records the trunk it follows"
    );
    // A side branch off trunk's tip: on main 7d6d184 this run moved the
    // pointer onto it.
    common::git(repo.path(), &["checkout", "-q", "-b", "side"]);
    let side = repo.commit(&[("s.txt", "s")], "side work");
    common::git(repo.path(), &["checkout", "-q", "main"]);
    let records = repo.records().len();
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &side,
        "--trunk",
        "side",
    ]);
    assert_refused(&o, "trunk-mismatch");
    let err = text(&o).1;
    assert!(
        err.contains("follows refs/heads/main")
            && err.contains("git -C ")
            && err.contains("update-ref -d refs/saphan/verified")
            && err.contains(&format!("rm {}", state.display())),
        "{err}"
    );
    assert_eq!(repo.records().len(), records, "nothing ran");
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    // Trunk's next green moves it, as it always should.
    let second = repo.commit(&[("m.txt", "m")], "trunk work");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["verified_pointer"], "moved", "{}", text(&o).0);
    assert_eq!(repo.verified().as_deref(), Some(second.as_str()));
    // `--trunk main` (the followed one, by its short name) is accepted.
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--trunk", "main"]);
    assert_code(&o, 0);
    // Re-pointing is deliberate: the two printed commands, then --trunk side.
    common::git(repo.path(), &["update-ref", "-d", "refs/saphan/verified"]);
    std::fs::remove_file(&state).unwrap();
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &side,
        "--trunk",
        "side",
        "--json",
    ]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["verified_pointer"], "moved");
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "refs/heads/side\n"
    );
    // Now certify without --trunk follows side, not the main worktree's branch.
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["trunk"], "refs/heads/side");
    assert_eq!(repo.verified().as_deref(), Some(side.as_str()));
}

#[test]
fn the_suite_is_chosen_from_the_certified_commit_not_the_working_tree() {
    let env = Env::new();
    let repo = Repo::new(&[("README", "not go")]);
    std::fs::write(repo.path().join("go.mod"), "module x\n\ngo 1.19\n").unwrap();
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_refused(&o, "trunkcert");
    assert!(
        !repo.path().join(".git/saphan/attempts.jsonl").exists(),
        "no record for a refusal"
    );
}

#[test]
fn ctrl_c_while_waiting_for_the_lock_measures_nothing() {
    if skip_unless(have("flock"), "util-linux flock is not installed") {
        return;
    }
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let state = repo.path().join(".git/saphan");
    std::fs::create_dir_all(&state).unwrap();
    let held = state.join("held");
    let mut holder = std::process::Command::new("flock")
        .arg(state.join("lock"))
        .args([
            "sh",
            "-c",
            &format!("touch '{}'; exec sleep 60", held.display()),
        ])
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !held.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::yield_now();
    }
    let child = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is blocked on the lock (the kernel lists a blocked
    // flock waiter with `->` in /proc/locks), then interrupt.
    let pid = child.id().to_string();
    let t0 = Instant::now();
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
        if locks.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"->") && f.get(5) == Some(&pid.as_str())
        }) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "certify never blocked on the repository lock:\n{locks}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_code(&o, 2);
    assert_eq!(json(&o)["error"], "interrupted");
    assert!(
        !state.join("attempts.jsonl").exists(),
        "nothing was measured, nothing recorded"
    );
    assert_only_main_worktree(&repo);
}

#[test]
fn certify_never_prunes_the_operators_own_worktrees() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().join("mine");
    common::git(
        repo.path(),
        &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()],
    );
    let away = dir.path().join("moved-away");
    std::fs::rename(&wt, &away).unwrap();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    std::fs::rename(&away, &wt).unwrap();
    common::git(&wt, &["status", "--short"]);
}

#[test]
fn nothing_leaks_from_one_attempt_into_the_next() {
    let env = Env::new();
    // Unsealed: the seal makes `..` read-only (tests/it/seal.rs); this
    // holds saphan's own clearing of the scratch key's directory.
    env.write_config(
        "[verify.full]\nargv = \"sh,-c,test ! -e ../leak && echo x > ../leak\"\nseal = \"off\"\n",
    );
    let repo = Repo::new(&[("a.txt", "a")]);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
}

#[test]
fn a_bare_repository_is_refused_by_name() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    common::git(dir.path(), &["init", "-q", "--bare", "r.git"]);
    let o = env.run(&[
        "certify",
        "--repo",
        &dir.path().join("r.git").display().to_string(),
    ]);
    assert_refused(&o, "bare-repository");
}

#[test]
fn records_lists_whole_records_around_a_torn_line() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let path = repo.path().join(".git/saphan/attempts.jsonl");
    let mut text_before = std::fs::read_to_string(&path).unwrap();
    text_before.push_str("{\"half\":\n");
    std::fs::write(&path, text_before).unwrap();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let o = env.run(&["records", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["records"].as_array().unwrap().len(), 2);
    assert_eq!(v["corrupt_lines"], serde_json::json!([2]));
    assert!(
        text(&o).1.contains("saphan: record-corrupt: "),
        "{}",
        text(&o).1
    );
}

#[test]
fn a_green_that_ran_zero_tests_does_not_move_the_pointer() {
    if common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = Repo::new(&[
        ("go.mod", "module example.com/none\n\ngo 1.19\n"),
        ("none.go", "package none\n\nfunc F() int { return 1 }\n"),
    ]);
    let o = env
        .cmd()
        .env("GOTOOLCHAIN", "local")
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green");
    assert_eq!(r["count"], 0);
    assert!(
        r["verified_pointer"]
            .as_str()
            .unwrap()
            .contains("ran 0 tests"),
        "{r}"
    );
    assert_eq!(repo.verified(), None);
}

#[test]
fn trunk_must_be_a_branch_and_is_recorded_by_its_full_name() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    common::git(repo.path(), &["tag", "v1"]);
    for bad in ["HEAD", "v1", &repo.head()] {
        let o = env.run(&[
            "certify",
            "--repo",
            &repo.path_str(),
            "--trunk",
            bad,
            "--json",
        ]);
        assert_code(&o, 2);
        assert_eq!(json(&o)["error"], "trunk-not-a-branch", "--trunk {bad}");
    }
    assert_eq!(repo.verified(), None, "a refusal moves nothing");
    // A tag named like the branch does not shadow it.
    common::git(repo.path(), &["checkout", "-q", "-b", "feature"]);
    let feature = repo.commit(&[("f.txt", "f")], "feature");
    common::git(repo.path(), &["tag", "main", &feature]);
    common::git(repo.path(), &["checkout", "-q", "main"]);
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--sha",
        &feature,
        "--trunk",
        "main",
        "--json",
    ]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["trunk"], "refs/heads/main");
    assert_eq!(
        repo.verified(),
        None,
        "the feature commit is not on branch main"
    );
}

#[test]
fn a_junit_report_that_declares_failures_it_does_not_name_is_never_green() {
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"sh,-c,mkdir -p r && cp j.xml r/j.xml\"\nreport = \"junit-xml\"\nreport_path = \"r/j.xml\"\n",
    );
    let repo = Repo::new(&[(
        "j.xml",
        "<testsuite name=\"s\" tests=\"3\" failures=\"1\"/>\n",
    )]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["failure"], "unnamed-failures");
    assert_eq!(repo.verified(), None);
}

#[test]
fn a_go_test_json_package_that_never_ends_or_a_torn_last_line_is_never_green() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"sh,-c,cat ev.json\"\nreport = \"go-test-json\"\n");
    let ended_never = "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}\n";
    let torn = "{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestA\"}\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}\n{\"Action\":\"pass\",\"Pack";
    for ev in [ended_never, torn] {
        let repo = Repo::new(&[("ev.json", ev)]);
        let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
        assert_code(&o, 3);
        let r = json(&o);
        assert_eq!(r["failure"], "stream-ended-early", "{r}");
        assert_eq!(repo.verified(), None);
    }
}

#[test]
fn a_pointer_left_behind_by_a_rewritten_trunk_says_so_and_how_to_recover() {
    let env = Env::new();
    env.write_config(SUITE_CONFIG);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    repo.commit(&[("b.txt", "b")], "b");
    let c3 = repo.commit(&[("c.txt", "c")], "c");
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_eq!(repo.verified().as_deref(), Some(c3.as_str()));
    common::git(repo.path(), &["reset", "-q", "--hard", "HEAD~2"]);
    let x = repo.commit(&[("x.txt", "x")], "x");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let why = json(&o)["verified_pointer"].as_str().unwrap().to_string();
    assert!(why.contains("is not on trunk refs/heads/main"), "{why}");
    assert!(
        why.contains(&format!("git update-ref refs/saphan/verified {x}")),
        "{why}"
    );
    assert_eq!(
        repo.verified().as_deref(),
        Some(c3.as_str()),
        "never moved by itself"
    );
}
