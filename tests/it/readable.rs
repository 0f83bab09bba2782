//! Small things a person reads (issue 40 item 8), through the real binary:
//! the command that re-runs a failing test alone (go-test-json and a pytest
//! junit-xml report), a multi-line failure message that keeps its
//! indentation, failure text printed once, the subtests counted apart, and
//! the pointer's first move on a repository without `origin/HEAD`.

use crate::common::gomod;
use crate::common::{self, Env, Repo, assert_code, json, skip_unless, text};
use std::path::Path;

fn pytest_red() -> Repo {
    Repo::new(&[
        ("pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n"),
        ("pkg/__init__.py", ""),
        (
            "pkg/test_ops.py",
            "import pytest\n\n\ndef test_ok():\n    assert True\n\n\nclass TestK:\n    def test_mul(self):\n        assert 2 * 3 == 5, \"mul\\n  indented\\n    more\"\n\n\n@pytest.mark.parametrize(\"x\", [1.5])\ndef test_param(x):\n    assert x == 2\n",
        ),
    ])
}

#[test]
fn a_pytest_red_names_each_node_id_keeps_the_messages_lines_and_prints_them_once() {
    if skip_unless(
        Path::new("/usr/bin/pytest").exists(),
        "no /usr/bin/pytest (Debian's python3-pytest)",
    ) {
        return;
    }
    let env = Env::new();
    let repo = pytest_red();
    assert_code(&env.run(&["init", "--repo", &repo.path_str(), "--yes"]), 0);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    let (out, err) = text(&o);
    assert!(
        out.contains(
            "pkg.test_ops.TestK.test_mul — re-run: pytest 'pkg/test_ops.py::TestK::test_mul'\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "pkg.test_ops.test_param[1.5] — re-run: pytest 'pkg/test_ops.py::test_param[1.5]'\n"
        ),
        "{out}"
    );
    // The message's own lines sit under its first, their indentation kept.
    assert!(
        out.contains(
            "    message: AssertionError: mul\n                 indented\n                   more\n"
        ),
        "{out}"
    );
    // The failing test's output is printed once: the log's tail that
    // repeats pytest's FAILURES section is cut to the summary after it.
    assert_eq!(out.matches("def test_mul(self):").count(), 1, "{out}");
    assert!(!err.contains("def test_mul(self):"), "{err}");
    assert!(
        err.contains("the suite's log after the failing tests' output above"),
        "{err}"
    );
    assert!(err.contains("short test summary info"), "{err}");
    // The node ids run: the re-run line re-runs exactly that test, red.
    let tree = tempfile::tempdir().unwrap();
    common::git(
        Path::new("/"),
        &[
            "clone",
            "-q",
            &repo.path_str(),
            tree.path().to_str().unwrap(),
        ],
    );
    let rerun = std::process::Command::new("pytest")
        .args(["-q", "pkg/test_ops.py::TestK::test_mul"])
        .current_dir(tree.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&rerun.stdout);
    assert!(said.contains("1 failed"), "{said}");

    // records show reads the same way.
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", "last"]);
    assert_code(&o, 0);
    assert!(
        text(&o)
            .0
            .contains("re-run: pytest 'pkg/test_ops.py::TestK::test_mul'"),
        "{}",
        text(&o).0
    );
}

#[test]
fn a_go_red_reruns_by_anchored_name_and_counts_subtests_apart() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let (m, mod_text) = gomod::go_mod();
    let repo = Repo::new(&[
        (m, &mod_text),
        (
            "mul/mul.go",
            "package mul\n\nfunc Mul(a, b int) int { return a + b }\n",
        ),
        (
            "mul/mul_test.go",
            "package mul\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc TestA(t *testing.T) {\n\tt.Run(\"x\", func(t *testing.T) {})\n\tt.Run(\"sub\", func(t *testing.T) { t.Fatal(\"bad\") })\n}\n",
        ),
        (
            "top_test.go",
            "package m\n\nimport \"testing\"\n\nfunc TestTop(t *testing.T) {}\n",
        ),
    ]);
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["certify", "--repo", &repo.path_str()])
        .output()
        .unwrap();
    assert_code(&o, 1);
    let out = text(&o).0;
    assert!(out.contains("red — 3 tests (5 with subtests)"), "{out}");
    assert!(
        out.contains("example.com/m/mul.TestMul — re-run: go test -run '^TestMul$' ./mul\n"),
        "{out}"
    );
    assert!(
        out.contains("example.com/m/mul.TestA/sub — re-run: go test -run '^TestA$/^sub$' ./mul\n"),
        "{out}"
    );
    // The command runs that test alone, and it fails.
    let mut go = std::process::Command::new(gomod::default_go());
    gomod::go_env(&mut go);
    let r = go
        .args(["test", "-run", "^TestA$/^sub$", "-v", "./mul"])
        .current_dir(repo.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(said.contains("--- FAIL: TestA/sub"), "{said}");
    assert!(!said.contains("TestMul"), "{said}");
}

#[test]
fn the_first_move_without_origin_head_says_which_branch_it_follows_and_how_to_choose() {
    let env = Env::new();
    let repo = Repo::new(&[("README", "x\n")]);
    common::git(repo.path(), &["branch", "-M", "trunk-x"]);
    assert_code(
        &env.run(&[
            "config",
            "set",
            "--repo",
            &repo.path_str(),
            "verify.full.argv",
            "true",
        ]),
        0,
    );
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let out = text(&o).0;
    let file = Path::new(&common::git(
        repo.path(),
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    ))
    .join("saphan/verified-trunk");
    assert!(
        out.contains("trunk: refs/saphan/verified now follows trunk-x (refs/heads/trunk-x) for good: this repository has no origin/HEAD"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "git -C {} update-ref -d refs/saphan/verified && rm {}, then saphan certify --repo {} --trunk <branch>",
            repo.path_str(),
            file.display(),
            repo.path_str()
        )),
        "{out}"
    );
    // Said once: the next move follows what is recorded.
    repo.commit(&[("b", "y\n")], "next");
    let o = env.run(&["--json", "certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["first_follow"], serde_json::Value::Null);
    assert_eq!(json(&o)["verified_pointer"], "moved");

    // A named trunk, and origin/HEAD's, are not announced.
    let env = Env::new();
    let repo = Repo::new(&[("README", "x\n")]);
    assert_code(
        &env.run(&[
            "config",
            "set",
            "--repo",
            &repo.path_str(),
            "verify.full.argv",
            "true",
        ]),
        0,
    );
    let branch = common::git(repo.path(), &["symbolic-ref", "--short", "HEAD"]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--trunk", &branch]);
    assert_code(&o, 0);
    assert!(!text(&o).0.contains("for good"), "{}", text(&o).0);
}
