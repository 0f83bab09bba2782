//! certify at its edges: hostile trees, odd report files, symlinked config,
//! hostile durations and usage errors. The real binary on real git repos.

use crate::common::{Env, Repo, assert_code, assert_only_main_worktree, git, json, text};

/// A repository whose tree commits `docs -> <outside>`, `notes.txt ->
/// <outside>/notes.txt` and a tracked `a.txt`.
fn repo_with_links(outside: &std::path::Path) -> Repo {
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n"), ("a.txt", "tracked\n")]);
    std::os::unix::fs::symlink(outside, repo.path().join("docs")).unwrap();
    std::os::unix::fs::symlink(outside.join("notes.txt"), repo.path().join("notes.txt")).unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "links"]);
    repo
}

#[test]
fn provision_dest_through_a_committed_symlink_or_onto_a_tracked_file_is_refused() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("notes.txt"), "mine\n").unwrap();
    let src_dir = tempfile::tempdir().unwrap();
    let src = src_dir.path().join("contract.yaml");
    std::fs::write(&src, "openapi: 3.1.0\n").unwrap();
    let repo = repo_with_links(outside.path());
    for dest in ["docs/contract.yaml", "notes.txt", "a.txt", "a.txt/deeper"] {
        env.write_config(&format!(
            "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.c]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \"{dest}\"\n",
            repo.path().display(),
            src.display()
        ));
        let o = env.run(&["certify", "--repo", &repo.path_str()]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(
            err.starts_with("saphan: provision-dest-conflict: ") && err.contains(dest),
            "{dest}: {err}"
        );
        assert_only_main_worktree(&repo);
        assert!(repo.records().is_empty(), "no record for {dest}");
    }
    // Nothing was written outside the tree or over the link target.
    assert!(!outside.path().join("contract.yaml").exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
    // A fresh dest still works in the same repository.
    env.write_config(&format!(
        "[verify.full]\nargv = \"./suite.sh\"\n\n[verify.provision.c]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \"fresh/contract.yaml\"\n",
        repo.path().display(),
        src.display()
    ));
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["provisions"][0]["dest"], "fresh/contract.yaml");
    assert_eq!(repo.records().len(), 1);
    assert_only_main_worktree(&repo);
}

#[test]
fn config_set_through_a_symlinked_config_writes_the_target_and_keeps_the_link() {
    let env = Env::new();
    let dots = tempfile::tempdir().unwrap();
    let target = dots.path().join("saphan.toml");
    std::fs::write(&target, "[verify.full]\nargv = \"./suite.sh\"\n").unwrap();
    let link = env.home().join("config");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = env.run(&["config", "set", "verify.full.argv", "go,test,./..."]);
    assert_code(&o, 0);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the config link was replaced by a regular file"
    );
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("go"), "target not updated: {text}");
    // Beside the target: the target and its lock (the lock sits beside the
    // file that is written, so every home linking it shares it); no temp.
    let mut names: Vec<String> = std::fs::read_dir(dots.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["saphan.toml", "saphan.toml.lock"], "temp left");
}

#[test]
fn a_fifo_matched_by_the_junit_glob_is_a_measurement_failure_not_a_hang() {
    let env = Env::new();
    env.write_config(
        "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"reports/*.xml\"\n",
    );
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nmkdir -p reports\necho '<testsuite tests=\"1\"/>' > reports/a.xml\nmkfifo reports/b.xml\nexit 0\n",
    )]);
    // `timeout` guards the test itself: a hang is killed (exit 124), and fails below.
    let o = std::process::Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_saphan")])
        .args(["certify", "--repo", &repo.path_str(), "--json"])
        .env("SAPHAN_HOME", env.home())
        .output()
        .unwrap();
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("report-not-regular: reports/b.xml is a FIFO"),
        "{notes}"
    );
    let recs = repo.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["verdict"], "measurement-failed");
    assert_only_main_worktree(&repo);
}

#[test]
fn budgets_outside_one_second_to_thirty_days_are_refused_by_flag_and_by_config() {
    let env = Env::new();
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    for bad in ["0s", "1ns", "500ms", "500000000000h", "31d"] {
        let o = env.run(&["certify", "--repo", &repo.path_str(), "--timeout", bad]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(
            err.starts_with("saphan: usage: ") && err.contains("between 1s and 30d"),
            "--timeout {bad}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(repo.records().is_empty());

        let o = env.run(&["config", "set", "verify.full.timeout", bad]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(err.contains("between 1s and 30d"), "config {bad}: {err}");

        env.write_config(&format!(
            "[verify.full]\nargv = \"./suite.sh\"\ntimeout = \"{bad}\"\n"
        ));
        let o = env.run(&["certify", "--repo", &repo.path_str()]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(err.contains("between 1s and 30d"), "file {bad}: {err}");
        assert!(repo.records().is_empty());
        env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    }
    // The edges of the range are accepted both ways.
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--timeout",
        "1s",
        "--json",
    ]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["budget_seconds"], 1.0);
    assert_code(
        &env.run(&["config", "set", "verify.full.timeout", "30d"]),
        0,
    );
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["budget_seconds"], 30.0 * 24.0 * 3600.0);
}

#[test]
fn provision_dest_must_name_a_file_outside_any_case_of_dot_git() {
    let env = Env::new();
    assert_code(
        &env.run(&["config", "set", "verify.provision.c.repo", "/srv/repo"]),
        0,
    );
    for bad in [".", "./", "x/", "x/.", ".GIT/x", ".Git/hooks/pre-commit"] {
        let o = env.run(&["config", "set", "verify.provision.c.dest", bad]);
        assert_code(&o, 2);
        let (_, err) = text(&o);
        assert!(
            err.starts_with("saphan: provision-dest-hostile: "),
            "{bad}: {err}"
        );
        let cfg = std::fs::read_to_string(env.home().join("config")).unwrap();
        assert!(!cfg.contains("dest"), "{bad} was written: {cfg}");
    }
    assert_code(
        &env.run(&[
            "config",
            "set",
            "verify.provision.c.dest",
            ".provision/x.yaml",
        ]),
        0,
    );
}

#[test]
fn usage_errors_are_one_prefixed_line_and_json_under_json() {
    let env = Env::new();
    let o = env.run(&["certify", "--bogus"]);
    assert_code(&o, 2);
    let (out, err) = text(&o);
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err,
        "saphan: usage: unexpected argument '--bogus' found — see `saphan certify --help`\n  Usage: saphan certify [OPTIONS]\n"
    );
    let o = env.run(&["--json", "certify", "--bogus"]);
    assert_code(&o, 2);
    let v = json(&o);
    assert_eq!(v["error"], "usage");
    assert_eq!(v["exit_code"], 2);
    assert!(v["message"].as_str().unwrap().contains("'--bogus'"), "{v}");
    let o = env.run(&["frobnicate", "--json"]);
    assert_code(&o, 2);
    assert_eq!(json(&o)["error"], "usage");
    // Help and --version stay as clap prints them, exit 0.
    let o = env.run(&["certify", "--help"]);
    assert_code(&o, 0);
    assert!(text(&o).0.contains("Usage: saphan certify"));
    let o = env.run(&["--version"]);
    assert_code(&o, 0);
    assert!(text(&o).0.starts_with("saphan "));
}

/// The one-call reads certify makes of git: the repository with the SHA
/// (`open_resolving`, falling back to one question at a time so a bad
/// revision and a path holding a newline keep their own answers), and the
/// trunk's tip with the pointer (`read_refs`: exact names only, a missing
/// ref is `None`, a ref below an asked name is not it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batched_git_reads_answer_as_the_single_ones_do() {
    use saphan::git::{GitError, Repo as GitRepo};
    let repo = Repo::new(&[("a.txt", "a\n")]);
    let head = git_out(repo.path(), &["rev-parse", "HEAD"]);
    let (r, sha) = GitRepo::open_resolving(repo.path(), "HEAD").await.unwrap();
    assert_eq!(sha.unwrap(), head);
    let alone = GitRepo::open(repo.path()).await.unwrap();
    assert_eq!(
        (r.top.clone(), r.common_dir.clone()),
        (alone.top, alone.common_dir)
    );
    let (_, bad) = GitRepo::open_resolving(repo.path(), "no-such-rev")
        .await
        .unwrap();
    assert!(matches!(bad, Err(GitError::BadRevision { .. })), "{bad:?}");
    let (_, range) = GitRepo::open_resolving(repo.path(), "HEAD..HEAD")
        .await
        .unwrap();
    assert!(range.is_err(), "a range is no commit: {range:?}");
    let not = tempfile::tempdir().unwrap();
    assert!(matches!(
        GitRepo::open_resolving(not.path(), "HEAD").await,
        Err(GitError::NotARepo { .. })
    ));
    // A repository whose path holds a newline: asked one at a time.
    let odd = tempfile::tempdir().unwrap();
    let nl = odd.path().join("two\nlines");
    std::fs::create_dir(&nl).unwrap();
    git(&nl, &["init", "-q", "-b", "main"]);
    git(
        &nl,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    let (r, sha) = GitRepo::open_resolving(&nl, "HEAD").await.unwrap();
    assert_eq!(r.top, nl.canonicalize().unwrap());
    assert_eq!(sha.unwrap(), git_out(&nl, &["rev-parse", "HEAD"]));

    git(
        repo.path(),
        &["update-ref", "refs/saphan/verified/below", &head],
    );
    let got = read_refs_of(
        &repo,
        ["refs/heads/main", "refs/saphan/verified", "refs/heads/mai"],
    )
    .await;
    assert_eq!(got, vec![Some(head.clone()), None, None]);
    git(
        repo.path(),
        &["update-ref", "-d", "refs/saphan/verified/below"],
    );
    git(repo.path(), &["update-ref", "refs/saphan/verified", &head]);
    let got = read_refs_of(&repo, ["refs/saphan/verified", "main"]).await;
    assert_eq!(
        got,
        vec![Some(head.clone()), Some(head)],
        "a short name is read as git reads it"
    );
}

async fn read_refs_of<const N: usize>(repo: &Repo, names: [&str; N]) -> Vec<Option<String>> {
    saphan::git::Repo::open(repo.path())
        .await
        .unwrap()
        .read_refs(names)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.map(|v| v.oid))
        .collect()
}

fn git_out(dir: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8(o.stdout).unwrap().trim_end().to_string()
}

/// What a certify started, in order: every `git` command line, and every
/// `sh -c` by its script's name (`sh saphan-prepare`), through a `git` and
/// an `sh` first on PATH that log a line each and run the real ones.
fn runs_of(env: &Env, repo: &Repo, args: &[&str]) -> (std::process::Output, Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    let shim = tempfile::tempdir().unwrap();
    let log = shim.path().join("log");
    for (name, line) in [("git", "git $*"), ("sh", "sh $3")] {
        let real = crate::common::which(name).expect("on PATH");
        let f = shim.path().join(name);
        std::fs::write(
            &f,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"{line}\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                real.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        shim.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = env
        .cmd()
        .args(["certify", "--repo", &repo.path_str()])
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap();
    let runs = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    (o, runs)
}

#[test]
fn a_certify_lists_its_commit_tree_once_and_waits_for_it_only_when_asked() {
    // Three things read the tree: the suite's resolution (default-go asks
    // for go.mod), the toolchain check (a program path in the commit) and
    // the checkout (gitlinks). One listing serves them all. A suite run
    // from PATH asks nothing before the lock, so the listing starts after
    // the lock's first step (`prepare.sh`, which the checkout waits for);
    // a program path in the commit is checked against it before the lock.
    let repo = Repo::new(&[("t.sh", "#!/bin/sh\nexit 0\n"), ("go.mod", "module x\n")]);
    for (config, listed_first) in [
        (
            "[verify.full]\nargv = \"true\"\nreport = \"exitcode\"\n",
            false,
        ),
        (
            "[verify.full]\nargv = \"./t.sh\"\nreport = \"exitcode\"\n",
            true,
        ),
    ] {
        let env = Env::new();
        env.write_config(config);
        let (o, runs) = runs_of(&env, &repo, &[]);
        assert_code(&o, 0);
        let at = |what: &str| {
            let all: Vec<usize> = (0..runs.len())
                .filter(|i| runs[*i].contains(what))
                .collect();
            assert_eq!(all.len(), 1, "{config}: one `{what}`: {runs:#?}");
            all[0]
        };
        let (listing, prepare) = (at("ls-tree"), at("sh saphan-prepare"));
        assert_eq!(listing < prepare, listed_first, "{config}: {runs:#?}");
    }
    // A program path the commit lacks is still refused, from the listing,
    // before the lock.
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./absent.sh\"\nreport = \"exitcode\"\n");
    let (o, runs) = runs_of(&env, &repo, &[]);
    let (_, err) = text(&o);
    assert!(err.contains("absent.sh"), "{err}");
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(!runs.iter().any(|r| r.starts_with("sh ")), "{runs:#?}");
    assert_only_main_worktree(&repo);
}
