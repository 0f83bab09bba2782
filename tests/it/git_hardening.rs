//! Issue 36 item 4: saphan's own git and saphan's own state, against what a
//! suite (or anyone who can write the repository) left behind — planted
//! hooks, replace refs and grafts, symlinked state files, a damaged
//! attempts file, a replaced shipped binary. The real binary on real
//! repositories; every test plants the attack itself, as an earlier suite
//! would have, and each fails on the code before its fix.

use crate::common;

use crate::common::{Env, Repo, assert_code, assert_refused, git, json, text};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const RED: &str = "#!/bin/sh\necho red on purpose\nexit 1\n";
const GREEN: &str = "#!/bin/sh\nexit 0\n";

/// A home whose full suite is `./suite.sh` (exit-code floor).
fn env() -> Env {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    env
}

fn common_dir(repo: &Repo) -> PathBuf {
    PathBuf::from(git(
        repo.path(),
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    ))
}

fn certify(env: &Env, repo: &Repo, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--json", "certify", "--repo", repo.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// An executable file at `path` holding `text`.
fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A hook that turns the checked-out suite green and leaves a mark that it
/// ran (the suite's own tree is where a hook starts).
fn greening_hook(mark: &Path) -> String {
    format!(
        "#!/bin/sh\nprintf '#!/bin/sh\\nexit 0\\n' > suite.sh\ntouch {}\n",
        mark.display()
    )
}

/// (a) A `post-checkout` hook in `<common>/hooks`, and one under a
/// `core.hooksPath` the repository's config names: certify's checkout runs
/// neither, so the red commit certifies red and the pointer stays.
#[test]
fn a_planted_post_checkout_hook_never_runs_in_certifys_checkout() {
    let marks = tempfile::tempdir().unwrap();
    for via_config in [false, true] {
        let env = env();
        let repo = Repo::new(&[("suite.sh", RED)]);
        let mark = marks.path().join(format!("ran-{via_config}"));
        let hooks = if via_config {
            let d = marks.path().join("hooks-elsewhere");
            git(
                repo.path(),
                &["config", "core.hooksPath", d.to_str().unwrap()],
            );
            d
        } else {
            common_dir(&repo).join("hooks")
        };
        script(&hooks.join("post-checkout"), &greening_hook(&mark));
        // Every other hook a checkout, a ref update or a fetch could start.
        for h in ["reference-transaction", "post-merge", "post-rewrite"] {
            script(
                &hooks.join(h),
                &format!("#!/bin/sh\ntouch {}\n", mark.display()),
            );
        }
        let o = certify(&env, &repo, &[]);
        assert_code(&o, 1);
        let r = &json(&o);
        assert_eq!(r["verdict"], "red", "{r}");
        assert!(!mark.exists(), "a hook ran (via config: {via_config})");
        assert_eq!(repo.verified(), None);
        common::assert_only_main_worktree(&repo);
    }
}

/// (b) `git replace` of the suite's blob with a green one: the checkout is
/// the commit's own blob, so the commit certifies red.
#[test]
fn a_replaced_blob_changes_nothing_in_the_checkout() {
    let env = env();
    let repo = Repo::new(&[("suite.sh", RED)]);
    let red = git(repo.path(), &["rev-parse", "HEAD:suite.sh"]);
    let blob_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(blob_file.path(), GREEN).unwrap();
    let green = git(
        repo.path(),
        &["hash-object", "-w", blob_file.path().to_str().unwrap()],
    );
    git(repo.path(), &["replace", &red, &green]);
    let o = certify(&env, &repo, &[]);
    assert_code(&o, 1);
    assert_eq!(json(&o)["verdict"], "red");
    assert_eq!(repo.verified(), None);
}

/// (b) `git replace --graft main <feature>` and an `info/grafts` line doing
/// the same make a feature commit look like an ancestor of `main`: a green
/// certify of it records green, but the pointer does not move onto a
/// commit `refs/heads/main` does not reach.
#[test]
fn a_graft_never_puts_a_feature_commit_on_trunk() {
    for how in ["replace", "grafts"] {
        let env = env();
        let repo = Repo::new(&[("suite.sh", GREEN)]);
        let base = repo.head();
        let o = certify(&env, &repo, &[]);
        assert_code(&o, 0);
        assert_eq!(repo.verified().as_deref(), Some(base.as_str()));
        git(repo.path(), &["checkout", "-q", "-b", "feature"]);
        let feature = repo.commit(&[("f.txt", "feature\n")], "feature work");
        git(repo.path(), &["checkout", "-q", "main"]);
        let main = repo.commit(&[("m.txt", "trunk\n")], "trunk work");
        match how {
            "replace" => {
                git(repo.path(), &["replace", "--graft", &main, &feature]);
            }
            _ => {
                let f = common_dir(&repo).join("info/grafts");
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(&f, format!("{main} {feature}\n")).unwrap();
            }
        }
        // The graft works for a git that honours it.
        let plain = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["merge-base", "--is-ancestor", &feature, "main"])
            .status()
            .unwrap();
        assert!(plain.success(), "{how}: the graft did not take");
        let o = certify(&env, &repo, &["--sha", &feature]);
        assert_code(&o, 0);
        let v = json(&o);
        assert_eq!(v["verdict"], "green", "{v}");
        assert_eq!(
            repo.verified().as_deref(),
            Some(base.as_str()),
            "{how}: the pointer moved onto a commit main does not reach: {v}"
        );
    }
}

/// A `git` first on saphan's PATH that runs the real one and then — after a
/// `worktree add` — rewrites the new tree, as a hook of a git too old for
/// `core.hooksPath` would (or a leftover of an earlier attempt): the
/// checkout is found not to be the commit, the attempt is
/// measurement-failed `tree-mismatch` naming the paths, and the suite does
/// not run.
#[test]
fn a_tree_that_is_not_exactly_the_commit_is_measurement_failed_and_the_suite_never_runs() {
    let real = common::which("git").expect("git");
    let side = tempfile::tempdir().unwrap();
    let ran = side.path().join("suite-ran");
    let wrapper = side.path().join("bin/git");
    script(
        &wrapper,
        &format!(
            "#!/bin/sh\n{real} \"$@\"; rc=$?\ncase \" $* \" in *' worktree add '*)\n  n=$#; i=0; for a; do i=$((i+1)); [ $i -eq $((n-1)) ] && t=$a; done\n  printf '#!/bin/sh\\nexit 0\\n' > \"$t/suite.sh\"; echo planted > \"$t/planted.txt\" ;;\nesac\nexit $rc\n",
            real = real.display()
        ),
    );
    let env = env();
    let repo = Repo::new(&[(
        "suite.sh",
        &format!("#!/bin/sh\ntouch {}\nexit 1\n", ran.display()),
    )]);
    let path = format!(
        "{}:{}",
        wrapper.parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let o = env
        .cmd()
        .env("PATH", &path)
        .args(["--json", "certify", "--repo", &repo.path_str()])
        .output()
        .unwrap();
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "tree-mismatch", "{r}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("suite.sh") && notes.contains("planted.txt"),
        "{r}"
    );
    assert!(
        !ran.exists(),
        "the suite ran in a tree that is not the commit"
    );
    assert!(!wrapper.parent().unwrap().join("suite.sh").exists());
    assert_eq!(repo.verified(), None);
    common::assert_only_main_worktree(&repo);
}

/// The attempts file of `repo`.
fn attempts(repo: &Repo) -> PathBuf {
    common_dir(repo).join("saphan/attempts.jsonl")
}

/// (c) `attempts.jsonl`, `logs/` or `saphan/` itself replaced by a symlink:
/// certify is refused by name before it measures, and nothing is written
/// where the link points.
#[test]
fn a_symlinked_attempts_file_or_logs_dir_is_refused_and_its_target_untouched() {
    for which in ["attempts.jsonl", "logs", "saphan"] {
        let env = env();
        let side = tempfile::tempdir().unwrap();
        let repo = Repo::new(&[("suite.sh", GREEN)]);
        assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
        let state = common_dir(&repo).join("saphan");
        let target = side.path().join("target");
        let link = if which == "saphan" {
            state.clone()
        } else {
            state.join(which)
        };
        if which == "attempts.jsonl" {
            std::fs::write(&target, b"theirs\n").unwrap();
            std::fs::remove_file(&link).unwrap();
        } else {
            std::fs::create_dir(&target).unwrap();
            std::fs::rename(&link, side.path().join("moved-aside")).unwrap();
        }
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let o = env.run(&["certify", "--repo", &repo.path_str()]);
        let err = assert_refused(&o, "state-symlink");
        assert!(
            err.contains(&format!("{} is a symbolic link", link.display())),
            "{which}: {err}"
        );
        if which == "attempts.jsonl" {
            assert_eq!(std::fs::read(&target).unwrap(), b"theirs\n");
        } else {
            let inside: Vec<_> = std::fs::read_dir(&target).unwrap().flatten().collect();
            assert!(inside.is_empty(), "{which}: written through: {inside:?}");
        }
        // The verbs that read the file say the same, by name.
        if which != "logs" {
            assert_refused(
                &env.run(&["records", "--repo", &repo.path_str()]),
                "state-symlink",
            );
        }
        common::assert_only_main_worktree(&repo);
    }
}

/// (d) A byte that is not UTF-8, a line of 4 MiB and a last line without its
/// newline, appended to the attempts file by someone else: the next
/// certify still measures, records its attempt on a line of its own with a
/// note naming what it found, and exits with its verdict's code; `records`
/// and `status` still list every good line and name the bad ones.
#[test]
fn a_damaged_attempts_file_never_stops_a_measurement_from_being_recorded() {
    let env = env();
    let repo = Repo::new(&[("suite.sh", RED)]);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 1);
    let path = attempts(&repo);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"id\":\"\xff\xfe hand edit\"}\n");
    bytes.extend(std::iter::repeat_n(b'x', 4 << 20));
    bytes.extend_from_slice(b"\n{\"half\":");
    std::fs::write(&path, &bytes).unwrap();
    let o = env.run(&["--json", "certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    let after = std::fs::read(&path).unwrap();
    assert_eq!(
        &after[..bytes.len()],
        &bytes[..],
        "nothing before was touched"
    );
    let appended = &after[bytes.len()..];
    assert_eq!(appended[0], b'\n', "the record starts a line of its own");
    let rec: serde_json::Value = serde_json::from_slice(&appended[1..]).unwrap();
    assert_eq!(rec["verdict"], "red", "{rec}");
    let notes = rec["notes"].to_string();
    assert!(
        notes.contains("attempts.jsonl:2 is not UTF-8")
            && notes.contains("attempts.jsonl:3 is 4194304 bytes long")
            && notes.contains("attempts.jsonl did not end in a newline"),
        "{rec}"
    );
    // Every later certify goes on as well, and notes nothing new.
    let o = env.run(&["--json", "certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    let o = env.run(&["--json", "records", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["records"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["corrupt_lines"], serde_json::json!([2, 3, 4]));
    let last = &v["records"][2];
    assert_eq!(last["notes"], serde_json::json!([]), "noted once: {last}");
    let (_, err) = text(&o);
    assert!(
        err.contains(":3 is not a record (4194304 bytes long"),
        "{err}"
    );
    assert_code(&env.run(&["status", "--repo", &repo.path_str()]), 0);
}

/// (e) The saphan binary shipped to a lab machine for `verify-affected
/// --machine`, replaced there by another program: the next run hashes it,
/// finds it is not the binary its name says, re-ships it (and says so),
/// and the replacement never runs.
#[test]
fn a_replaced_shipped_binary_is_hashed_re_shipped_and_never_run() {
    use crate::common::gomod;
    if common::skip_unless(
        Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go for the lab hosts",
    ) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let (env, work) = common::fleet::home(lab, &["m1"], "git-hardening");
    assert_code(&env.run(&["machine", "measure", "--machine", "m1"]), 0);
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    files.extend(gomod::package("leaf", &[], 1));
    files.extend(gomod::package("other", &[], 1));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    git(repo.path(), &["branch", "base"]);
    repo.commit(
        &[(
            "leaf/leaf.go",
            "package leaf\n\n// V is two now.\nfunc V() int { return 2 }\n",
        )],
        "change leaf",
    );
    // Unsealed: what is checked here is saphan's own use of the file, not
    // what a seal keeps a suite from writing.
    env.write_config(
        "[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\nseal = \"off\"\n",
    );
    let run = || {
        let mut c = env.cmd();
        gomod::go_env(&mut c);
        c.args(["--json", "verify-affected", "--repo", &repo.path_str()])
            .args(["--base", "base", "--machine", "m1"])
            .output()
            .unwrap()
    };
    let o = run();
    assert_code(&o, 0);
    let v = json(&o);
    let shipped = PathBuf::from(v["adapter_argv"][0].as_str().unwrap());
    assert!(
        shipped.starts_with(work.path().join("m1/saphan/bin")),
        "{v}"
    );
    let own = std::fs::read(env!("CARGO_BIN_EXE_saphan")).unwrap();
    assert_eq!(std::fs::read(&shipped).unwrap(), own);
    // Another program under the binary's name, as a suite on m1 could
    // leave it: it would print a green stream and leave a mark.
    let mark = work.path().join("impostor-ran");
    std::fs::remove_file(&shipped).unwrap();
    script(
        &shipped,
        &format!("#!/bin/sh\ntouch {}\nexit 0\n", mark.display()),
    );
    let o = run();
    let (out, err) = text(&o);
    assert_code(&o, 0);
    assert!(!mark.exists(), "the replaced binary ran");
    assert_eq!(std::fs::read(&shipped).unwrap(), own, "not re-shipped");
    let all = format!("{out}{err}");
    assert!(
        all.contains("re-shipped: ") && all.contains("was not the binary its name says"),
        "{all}"
    );
}

/// (a) `--split` lists the packages in a local checkout: a planted
/// `post-checkout` hook that deletes the failing package there would leave
/// it out of every shard ("coverage: complete", a false green). The
/// listing's checkout runs no hook, so the package is listed, run, and red.
#[test]
fn a_planted_hook_never_shortens_the_splits_listing() {
    use crate::common::gomod;
    if common::skip_unless(
        Path::new("/usr/bin/go").exists() && saphan::exec::which("go").is_some(),
        "no /usr/bin/go for the lab hosts, or no go here to list packages with",
    ) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let (env, _work) = common::fleet::home(lab, &["m0", "m1"], "git-hardening-split");
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    assert_code(
        &common::fleet::probe(&env, "m0,m1", "go", "/usr/bin/go", "/tmp"),
        0,
    );
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    files.extend(gomod::package("p0", &[], 0));
    files.extend(gomod::package("p1", &[], 1));
    files.extend(gomod::package("pbad", &[], 2));
    files.push((
        "pbad/bad_test.go".into(),
        "package pbad\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let mark = _work.path().join("hook-ran");
    script(
        &common_dir(&repo).join("hooks/post-checkout"),
        &format!("#!/bin/sh\nrm -rf pbad\ntouch {}\n", mark.display()),
    );
    let o = common::fleet::certify(&env, &repo, "m0,m1", &["--split"]);
    assert_code(&o, 1);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "red", "{v}");
    assert_eq!(s["coverage"]["listed"], 3, "{v}");
    assert!(!mark.exists(), "the hook ran in the listing's checkout");
    assert_eq!(repo.verified(), None);
}
