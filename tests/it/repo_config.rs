//! One home, every stack (issue 40 item 1): a repository's own declaration
//! in `<git-common-dir>/saphan/config`, written by `config set --repo`,
//! wins over the operator's for that repository, and the record's
//! `suite_source` says which one ran (`repo-config:verify.full`). A Go
//! module and a pytest project are certified from one SAPHAN_HOME, each
//! with its own declaration, here and on a lab machine.

use crate::common::gomod;
use crate::common::lab::Lab;
use crate::common::{self, Env, Repo, assert_code, assert_refused, json, skip_unless, text};
use std::path::{Path, PathBuf};

/// The operator declares a suite that fits neither repository: if it ran,
/// the verdict would be red with exit code 7.
const OPERATOR_WRONG: &str = "[verify.full]\nargv = [\"sh\", \"-c\", \"exit 7\"]\n";

fn set(env: &Env, repo: &Repo, key: &str, value: &str) -> std::process::Output {
    env.run(&["config", "set", "--repo", &repo.path_str(), key, value])
}

fn common_dir(repo: &Repo) -> PathBuf {
    PathBuf::from(common::git(
        repo.path(),
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    ))
}

fn go_module() -> Repo {
    let (m, mod_text) = gomod::go_mod();
    Repo::new(&[
        (m, &mod_text),
        (
            "mul/mul.go",
            "package mul\n\nfunc Mul(a, b int) int { return a * b }\n",
        ),
        (
            "mul/mul_test.go",
            "package mul\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc TestOne(t *testing.T) {\n\tt.Run(\"a\", func(t *testing.T) {})\n\tt.Run(\"b\", func(t *testing.T) {})\n}\n",
        ),
        // A declaration in the tree is never read: the code under test does
        // not choose its own suite.
        (".saphan/config", "[verify.full]\nargv = \"true\"\n"),
        ("saphan/config", "[verify.full]\nargv = \"true\"\n"),
    ])
}

fn pytest_project() -> Repo {
    Repo::new(&[
        (
            "pyproject.toml",
            "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n",
        ),
        ("calc/__init__.py", ""),
        ("calc/ops.py", "def add(a, b):\n    return a + b\n"),
        (
            "tests/test_ops.py",
            "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
        ),
        ("tests/__init__.py", ""),
        (".saphan/config", "[verify.full]\nargv = \"true\"\n"),
    ])
}

/// Declare the Go module's and the pytest project's suites, each in its
/// own repository, through the real verbs (init for pytest: its junit-xml
/// proposal).
fn declare_both(env: &Env, go: &Repo, py: &Repo) {
    assert_code(
        &set(env, go, "verify.full.argv", "go,test,-count=1,-json,./..."),
        0,
    );
    assert_code(&set(env, go, "verify.full.report", "go-test-json"), 0);
    let o = env.run(&["init", "--repo", &py.path_str(), "--yes"]);
    assert_code(&o, 0);
    assert!(
        text(&o).0.contains("pytest,--junitxml=reports/junit.xml"),
        "{}",
        text(&o).0
    );
}

fn have_pytest() -> bool {
    skip_unless(
        Path::new("/usr/bin/pytest").exists(),
        "no /usr/bin/pytest (Debian's python3-pytest)",
    )
}

#[test]
fn config_set_repo_writes_the_repositorys_state_under_the_same_rules() {
    let env = Env::new();
    env.write_config(OPERATOR_WRONG);
    let repo = Repo::new(&[("README", "x\n")]);
    let file = common_dir(&repo).join("saphan/config");

    // The same staging rules and refusals as the operator's file.
    let err = assert_refused(
        &set(&env, &repo, "verify.full.report", "exitcode"),
        "config-no-argv",
    );
    assert!(err.contains("verify.full"), "{err}");
    assert_code(
        &set(&env, &repo, "verify.full.argv", "pytest,--junitxml=r/j.xml"),
        0,
    );
    assert_refused(
        &set(&env, &repo, "verify.full.report", "junit-xml"),
        "config-staging",
    );
    assert_refused(
        &set(&env, &repo, "verify.full.argvv", "x"),
        "config-key-unknown",
    );
    assert_refused(
        &set(&env, &repo, "verify.surface.argv", "x"),
        "config-scope-reserved",
    );
    // The freshness window is the operator's alone.
    let err = assert_refused(
        &set(&env, &repo, "fleet.freshness", "2h"),
        "config-key-operator-only",
    );
    assert!(err.contains("without --repo"), "{err}");
    assert_code(&set(&env, &repo, "verify.full.report_path", "r/j.xml"), 0);
    let o = set(&env, &repo, "verify.full.report", "junit-xml");
    assert_code(&o, 0);
    assert!(
        text(&o).0.contains(&file.display().to_string()),
        "{}",
        text(&o).0
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[verify.full]\nargv = \"pytest,--junitxml=r/j.xml\"\nreport_path = \"r/j.xml\"\nreport = \"junit-xml\"\n"
    );
    // The operator's file is untouched.
    assert_eq!(
        std::fs::read_to_string(env.home().join("config")).unwrap(),
        OPERATOR_WRONG
    );

    // A linked worktree shares the common dir, so the same file.
    let wt = tempfile::tempdir().unwrap();
    let wt_path = wt.path().join("wt");
    common::git(
        repo.path(),
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            wt_path.to_str().unwrap(),
        ],
    );
    let o = env.run(&[
        "--json",
        "config",
        "show",
        "--repo",
        wt_path.to_str().unwrap(),
    ]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["repository"]["path"], file.display().to_string(), "{v}");
    assert_eq!(v["applies"]["verify.full"]["from"], "repository", "{v}");
    assert_eq!(
        v["applies"]["verify.full"]["suite_source"],
        "repo-config:verify.full"
    );
    assert_eq!(v["operator"]["verify"]["full"]["argv"][0], "sh");

    // A hand-written problem in the repository's file is refused by name,
    // naming that file — by show and by certify alike.
    std::fs::write(
        &file,
        "[verify.full]\nargv = \"x\"\n\n[fleet]\nfreshness = \"1h\"\n",
    )
    .unwrap();
    let err = assert_refused(
        &env.run(&["config", "show", "--repo", &repo.path_str()]),
        "config-key-operator-only",
    );
    assert!(err.contains(&file.display().to_string()), "{err}");
    let err = assert_refused(
        &env.run(&["certify", "--repo", &repo.path_str()]),
        "config-key-operator-only",
    );
    assert!(err.contains("config unset --repo"), "{err}");
    assert!(repo.records().is_empty());
    // …and unset is its repair.
    assert_code(
        &env.run(&[
            "config",
            "unset",
            "--repo",
            &repo.path_str(),
            "fleet.freshness",
        ]),
        0,
    );
    assert_code(&env.run(&["config", "show", "--repo", &repo.path_str()]), 0);
}

#[test]
fn a_go_module_and_a_pytest_project_certify_here_from_one_home() {
    if gomod::no_go() || have_pytest() {
        return;
    }
    let env = Env::new();
    env.write_config(OPERATOR_WRONG);
    let (go, py) = (go_module(), pytest_project());
    declare_both(&env, &go, &py);

    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["--json", "certify", "--repo", &go.path_str()])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["suite_source"], "repo-config:verify.full", "{r}");
    assert_eq!(r["report"], "go-test-json");
    assert_eq!(r["count"], 2, "{r}");
    assert_eq!(go.verified().as_deref(), Some(go.head().as_str()));

    let o = env.run(&["--json", "certify", "--repo", &py.path_str()]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["suite_source"], "repo-config:verify.full", "{r}");
    assert_eq!(r["report"], "junit-xml");
    assert_eq!(
        r["suite_argv"],
        serde_json::json!(["pytest", "--junitxml=reports/junit.xml"])
    );
    assert_eq!(
        r["suite_report_files"],
        serde_json::json!(["reports/junit.xml"]),
        "{r}"
    );
    assert_eq!(r["count"], 2, "{r}");
    assert_eq!(py.verified().as_deref(), Some(py.head().as_str()));

    // Without its own declaration a repository runs the operator's, and
    // the record says so.
    std::fs::remove_file(common_dir(&py).join("saphan/config")).unwrap();
    let o = env.run(&["--json", "certify", "--repo", &py.path_str()]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["suite_source"], "config:verify.full", "{r}");
    assert_eq!(r["suite_exit_code"], 7, "{r}");
}

#[test]
fn a_go_module_and_a_pytest_project_certify_on_a_lab_machine_from_one_home() {
    if have_pytest()
        || skip_unless(
            Path::new("/usr/bin/go").exists(),
            "no /usr/bin/go for the lab hosts",
        )
    {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let (env, _work) = common::fleet::home(lab, &["m0"], "repo-config");
    env.write_config(OPERATOR_WRONG);
    let (go, py) = (go_module(), pytest_project());
    declare_both(&env, &go, &py);
    assert_code(&env.run(&["machine", "measure", "--machine", "m0"]), 0);
    assert_code(
        &common::fleet::probe(&env, "m0", "go", "/usr/bin/go", "/tmp"),
        0,
    );
    assert_code(
        &common::fleet::probe(&env, "m0", "pytest", "/usr/bin/pytest", "/tmp"),
        0,
    );

    for (repo, report, program) in [
        (&go, "go-test-json", "/usr/bin/go"),
        (&py, "junit-xml", "/usr/bin/pytest"),
    ] {
        let o = common::fleet::certify(&env, repo, "m0", &[]);
        assert_code(&o, 0);
        let v = json(&o);
        let r = &v["records"][0];
        assert_eq!(r["machine"], "m0", "{r}");
        assert_eq!(r["suite_source"], "repo-config:verify.full", "{r}");
        assert_eq!(r["report"], report, "{r}");
        assert_eq!(r["program_path"], program, "{r}");
        assert_eq!(r["count"], 2, "{r}");
        assert_eq!(v["verified_pointer"], "moved", "{v}");
    }

    // status reads the same resolution: the pytest project's program is
    // pytest, not the operator's sh.
    let o = env.run(&["--json", "status", "--repo", &py.path_str()]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["fleet"]["program"], "pytest", "{v}");
    assert_eq!(v["fleet"]["capability"], "pytest", "{v}");
}

/// verify-affected reads the same resolution: a repository's own
/// `[verify.affected]` runs where the operator declares none.
#[test]
fn verify_affected_runs_the_repositorys_own_adapter() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
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
    common::git(repo.path(), &["branch", "base"]);
    let (p, c) = &gomod::package("leaf", &[], 2)[0];
    repo.commit(&[(p, c)], "leaf: 2");
    let affected = || {
        let mut c = env.cmd();
        gomod::go_env(&mut c);
        c.args([
            "--json",
            "verify-affected",
            "--repo",
            &repo.path_str(),
            "--base",
            "base",
        ])
        .output()
        .unwrap()
    };
    // The operator declares no adapter: unavailable.
    let o = affected();
    assert_code(&o, 2);
    assert_eq!(json(&o)["result"], "unavailable");
    assert_code(
        &set(
            &env,
            &repo,
            "verify.affected.argv",
            "saphan,adapter,go-affected",
        ),
        0,
    );
    assert_code(
        &set(&env, &repo, "verify.affected.report", "go-test-json"),
        0,
    );
    let o = affected();
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["result"], "green", "{v}");
    assert_eq!(
        v["selected_packages"],
        serde_json::json!([format!("{}/leaf", gomod::MODULE)]),
        "{v}"
    );
}
