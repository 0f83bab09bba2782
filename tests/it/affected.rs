//! The affected tier end to end: the real `saphan` binary, real git
//! repositories, real Go modules (standard library only) and a real `go`.

use crate::common::gomod::{self, MODULE};
use crate::common::{Env, Repo, assert_code, git, text};
use serde_json::Value;

const GO_ADAPTER: &str =
    "[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\n";

/// leaf ← mid ← top; other alone; testonly's external test imports leaf;
/// user imports testonly (not its tests); mid/sub is its own package.
fn module() -> Repo {
    let mut files: Vec<(String, String)> = vec![
        {
            let (p, c) = gomod::go_mod();
            (p.to_string(), c)
        },
        ("README.md".into(), "# m\n".into()),
        ("docs/guide.md".into(), "guide\n".into()),
    ];
    files.extend(gomod::package("leaf", &[], 1));
    files.extend(gomod::package("mid", &["leaf"], 1));
    files.extend(gomod::package("top", &["mid"], 1));
    files.extend(gomod::package("other", &[], 1));
    files.extend(gomod::package("mid/sub", &[], 1));
    files.push((
        "testonly/testonly.go".into(),
        "package testonly\n\n// W is two.\nfunc W() int { return 2 }\n".into(),
    ));
    files.push((
        "testonly/testonly_test.go".into(),
        format!(
            "package testonly_test\n\nimport (\n\t\"testing\"\n\n\t\"{MODULE}/leaf\"\n\t\"{MODULE}/testonly\"\n)\n\nfunc TestW(t *testing.T) {{\n\tif testonly.W()+leaf.V() != 3 {{\n\t\tt.Fatal(\"leaf changed under testonly\")\n\t}}\n}}\n"
        ),
    ));
    files.push((
        "user/user.go".into(),
        format!("package user\n\nimport \"{MODULE}/testonly\"\n\n// U uses testonly.\nfunc U() int {{ return testonly.W() }}\n"),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let r = Repo::new(&refs);
    git(r.path(), &["branch", "base"]);
    r
}

fn run_json(env: &Env, args: &[&str]) -> (std::process::Output, Value) {
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c.args(args).arg("--json").output().unwrap();
    let (out, err) = text(&o);
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{out}\nstderr:\n{err}"));
    (o, v)
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn pkgs(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("{MODULE}/{n}")).collect()
}

fn affected(env: &Env, r: &Repo) -> (std::process::Output, Value) {
    run_json(
        env,
        &["verify-affected", "--repo", &r.path_str(), "--base", "base"],
    )
}

use crate::common::gomod::no_go;

#[test]
fn leaf_change_selects_only_its_reverse_closure_including_a_test_importer() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    let (p, c) = &gomod::package("leaf", &[], 2)[0];
    r.commit(&[(p, c)], "leaf: 2");
    let (o, v) = affected(&env, &r);
    assert_eq!(v["tier"], "affected");
    assert_eq!(strs(&v["changed_paths"]), ["leaf/leaf.go"]);
    assert_eq!(strs(&v["changed_packages"]), pkgs(&["leaf"]));
    // testonly is reached only through its external test's import of leaf;
    // user imports testonly's code, not its tests, so it stays omitted.
    assert_eq!(
        strs(&v["selected_packages"]),
        pkgs(&["leaf", "mid", "testonly", "top"])
    );
    assert_eq!(
        strs(&v["omitted_packages"]),
        pkgs(&["mid/sub", "other", "user"])
    );
    assert_eq!(v["widened"], false);
    assert_eq!(
        strs(&v["closure_contribution"]["packages"]),
        pkgs(&["mid", "testonly", "top"])
    );
    assert_eq!(v["closure_contribution"]["count"], 3);
    assert!(
        v["closure_contribution"]["selection_seconds"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // The closure's own test time, from go test's per-package elapsed times.
    let c = &v["closure_contribution"];
    assert!(c["test_seconds"].as_f64().is_some(), "{v:#}");
    assert!(c["changed_test_seconds"].as_f64().is_some(), "{v:#}");
    // testonly's test asserts W()+leaf.V() == 3: leaf is now 2, so it fails,
    // which is exactly why a test-import-only dependant must be selected.
    assert_eq!(v["result"], "red", "{v:#}");
    assert_code(&o, 1);
    let named = strs(&v["measurement"]["named_tests"]);
    assert!(named.iter().any(|t| t.contains("TestW")), "{named:?}");
    assert_eq!(v["verified_pointer"], "untouched");
    assert!(git(r.path(), &["for-each-ref", "refs/saphan/"]).is_empty());
    assert_eq!(r.worktrees().len(), 1, "scratch worktree left behind");
}

#[test]
fn docs_only_change_selects_nothing_and_says_it_is_not_green() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    r.commit(
        &[("README.md", "# m, better\n"), ("docs/guide.md", "more\n")],
        "docs",
    );
    let (o, v) = affected(&env, &r);
    assert_code(&o, 0);
    assert_eq!(v["result"], "nothing-selected", "{v:#}");
    assert!(strs(&v["selected_packages"]).is_empty());
    assert_eq!(strs(&v["omitted_packages"]).len(), 7);
    let np: Vec<&str> = v["no_package_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert_eq!(np, ["README.md", "docs/guide.md"]);
    assert!(v["reason"].as_str().unwrap().contains("not a green"));
    // The human rendering says the same.
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .args(["verify-affected", "--repo", &r.path_str(), "--base", "base"])
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert!(out.contains("result: nothing-selected"), "{out}");
    assert!(out.contains("README.md (documentation)"), "{out}");
}

#[test]
fn go_mod_change_widens_to_the_full_module_and_names_it() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    r.commit(
        &[(
            "go.mod",
            &format!("module {MODULE}\n\n// a comment\ngo 1.19\n"),
        )],
        "touch go.mod",
    );
    let (o, v) = affected(&env, &r);
    assert_eq!(v["widened"], true);
    assert_eq!(v["widened_by"][0]["path"], "go.mod");
    assert!(
        v["widened_by"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("go.mod")
    );
    assert_eq!(strs(&v["selected_packages"]).len(), 7);
    assert!(strs(&v["omitted_packages"]).is_empty());
    assert_eq!(v["result"], "green", "{v:#}");
    assert_code(&o, 0);
    let count = v["measurement"]["count"].as_u64().unwrap();
    assert!(count >= 6, "{count}");
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let (out, _) = text(
        &c.args(["verify-affected", "--repo", &r.path_str(), "--base", "base"])
            .output()
            .unwrap(),
    );
    assert!(
        out.contains("widened           yes, to the full module: go.mod"),
        "{out}"
    );
}

#[test]
fn deleted_package_is_not_its_parents_and_its_importers_are_selected() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    // mid/sub goes; nothing imports it, and mid (its parent) is untouched.
    git(r.path(), &["rm", "-q", "-r", "mid/sub"]);
    r.commit(&[], "drop mid/sub");
    let (o, v) = affected(&env, &r);
    assert_eq!(strs(&v["deleted_packages"]), pkgs(&["mid/sub"]));
    assert!(strs(&v["changed_packages"]).is_empty(), "{v:#}");
    assert!(strs(&v["selected_packages"]).is_empty(), "{v:#}");
    assert_eq!(v["widened"], false);
    assert_eq!(v["result"], "nothing-selected");
    assert_code(&o, 0);

    // leaf goes while mid still imports it: mid and everything above it are
    // selected, and the run is not green.
    git(r.path(), &["rm", "-q", "-r", "leaf"]);
    r.commit(&[], "drop leaf");
    let (o, v) = run_json(
        &env,
        &[
            "verify-affected",
            "--repo",
            &r.path_str(),
            "--base",
            "HEAD~1",
        ],
    );
    assert_eq!(strs(&v["deleted_packages"]), pkgs(&["leaf"]));
    assert_eq!(
        strs(&v["selected_packages"]),
        pkgs(&["mid", "testonly", "top"])
    );
    assert_eq!(v["result"], "measurement-failed", "{v:#}");
    assert_code(&o, 3);
    // go test -json (1.19) says why only on stderr: the result quotes it.
    let why = v["reason"].as_str().unwrap();
    assert!(why.starts_with("build failed"), "{why}");
    assert!(why.contains("leaf"), "{why}");
    assert!(!why.contains("declare another report kind"), "{why}");
}

#[test]
fn the_suite_runs_at_the_committed_head_never_the_working_tree() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    let (p, c) = &gomod::package("other", &[], 5)[0];
    r.commit(&[(p, c)], "other: 5");
    // Uncommitted breakage in the operator's checkout must not be measured.
    std::fs::write(
        r.path().join("other/other.go"),
        "package other\n\nthis does not compile\n",
    )
    .unwrap();
    let (o, v) = affected(&env, &r);
    assert_eq!(strs(&v["selected_packages"]), pkgs(&["other"]));
    assert_eq!(v["result"], "green", "{v:#}");
    assert_code(&o, 0);
    assert_eq!(v["measurement"]["count"], 1);
}

#[test]
fn an_adapter_that_forgets_its_scope_is_an_error_never_green() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(
        "[verify.affected]\nargv = \"sh,-c,go test -count=1 -json ./...\"\nreport = \"go-test-json\"\n",
    );
    let r = module();
    r.commit(&[("leaf/extra.go", "package leaf\n")], "extra");
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-scope-missing", "{v:#}");
    let (_, err) = text(&o);
    assert!(err.starts_with("saphan: affected-scope-missing: "), "{err}");
    assert!(err.contains("SAPHAN_AFFECTED_SCOPE_OUT"), "{err}");
    assert_eq!(r.worktrees().len(), 1, "scratch worktree left behind");
}

#[test]
fn no_adapter_declared_is_unavailable_never_green() {
    let env = Env::new();
    let r = Repo::new(&[("a.txt", "a\n")]);
    git(r.path(), &["branch", "base"]);
    r.commit(&[("a.txt", "b\n")], "change");
    let (o, v) = run_json(
        &env,
        &["verify-affected", "--repo", &r.path_str(), "--base", "base"],
    );
    assert_code(&o, 2);
    assert_eq!(v["result"], "unavailable");
    assert_eq!(v["tier"], "affected");
    assert_eq!(strs(&v["changed_paths"]), ["a.txt"]);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("verify.affected.argv")
    );
    let o = env
        .cmd()
        .args(["verify-affected", "--repo", &r.path_str(), "--base", "base"])
        .output()
        .unwrap();
    assert_code(&o, 2);
    assert!(text(&o).0.contains("result: unavailable"));
    assert_eq!(r.worktrees().len(), 1);
}

/// A shell adapter committed in the repository, speaking the protocol by
/// hand: the scope echoes `changed`, the junit report goes where told (or not).
fn junit_adapter(changed: &str, write_report: bool) -> String {
    let report = if write_report {
        r#"mkdir -p "$SAPHAN_AFFECTED_REPORT_DIR/out"
cat > "$SAPHAN_AFFECTED_REPORT_DIR/out/junit.xml" <<'X'
<testsuite name="s" tests="2" failures="1"><testcase classname="s" name="ok"/><testcase classname="s" name="bad"><failure/></testcase></testsuite>
X
exit 1"#
    } else {
        "exit 1"
    };
    let package_of: Vec<String> = changed.split(',').map(|p| format!("{p}:\"s\"")).collect();
    let package_of = package_of.join(",");
    format!(
        r#"#!/bin/sh
set -e
test -f "$SAPHAN_AFFECTED_MANIFEST"
cat > "$SAPHAN_AFFECTED_SCOPE_OUT" <<'S'
{{"version":1,"adapter":"sh","changed_paths":[{changed}],"no_package_paths":[],"changed_packages":["s"],"package_of":{{{package_of}}},"selected_packages":["s"],"omitted_packages":["t"],"widened":false,"widened_by":[]}}
S
{report}
"#
    )
}

#[test]
fn a_junit_adapter_reports_beneath_the_fresh_report_dir_or_errors() {
    let env = Env::new();
    env.write_config(
        "[verify.affected]\nargv = \"sh,adapter.sh\"\nreport = \"junit-xml\"\nreport_path = \"out/*.xml\"\n",
    );
    let r = Repo::new(&[("adapter.sh", &junit_adapter("\"x.txt\"", true))]);
    git(r.path(), &["branch", "base"]);
    r.commit(&[("x.txt", "x\n")], "x");
    // A stale report in the working tree must never be read.
    std::fs::create_dir_all(r.path().join("out")).unwrap();
    std::fs::write(r.path().join("out/stale.xml"), "<testsuite tests=\"9\"/>").unwrap();
    let (o, v) = affected(&env, &r);
    assert_eq!(v["result"], "red", "{v:#}");
    assert_code(&o, 1);
    assert_eq!(v["measurement"]["count"], 2);
    assert_eq!(strs(&v["measurement"]["named_tests"]), ["s.bad"]);
    assert_eq!(strs(&v["omitted_packages"]), ["t"]);

    // The same adapter without its report: an error, never green — even
    // though the tree now carries a report at the declared path.
    r.commit(
        &[(
            "adapter.sh",
            &junit_adapter("\"adapter.sh\",\"out/stale.xml\"", false),
        )],
        "forget",
    );
    let (o, v) = run_json(
        &env,
        &[
            "verify-affected",
            "--repo",
            &r.path_str(),
            "--base",
            "HEAD~1",
        ],
    );
    assert_eq!(v["error"], "affected-report-missing", "{v:#}");
    assert_code(&o, 3);
}

#[test]
fn the_adapter_refuses_to_run_outside_the_protocol() {
    let env = Env::new();
    let o = env
        .cmd()
        .args(["adapter", "go-affected"])
        .env_remove("SAPHAN_AFFECTED_MANIFEST")
        .output()
        .unwrap();
    assert_code(&o, 2);
    let (_, err) = text(&o);
    assert!(
        err.starts_with("saphan: affected-protocol-env-missing: SAPHAN_AFFECTED_MANIFEST"),
        "{err}"
    );
}

#[test]
fn go_list_failure_is_a_missing_scope_that_quotes_why() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    r.commit(&[("go.mod", "this is not a go.mod\n")], "break go.mod");
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-scope-missing", "{v:#}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("go-list-failed"), "{msg}");
    assert_eq!(r.worktrees().len(), 1, "scratch worktree left behind");
}

#[test]
fn an_adapter_past_its_budget_is_measurement_failed_never_green() {
    let env = Env::new();
    env.write_config(
        "[verify.affected]\nargv = \"sh,adapter.sh\"\nreport = \"exitcode\"\ntimeout = \"1s\"\n",
    );
    let script = "#!/bin/sh\ncat > \"$SAPHAN_AFFECTED_SCOPE_OUT\" <<'S'\n{\"version\":1,\"adapter\":\"sh\",\"changed_paths\":[\"x.txt\"],\"no_package_paths\":[],\"changed_packages\":[\"s\"],\"package_of\":{\"x.txt\":\"s\"},\"selected_packages\":[\"s\"],\"omitted_packages\":[],\"widened\":false,\"widened_by\":[]}\nS\nexec sleep 60\n";
    let r = Repo::new(&[("adapter.sh", script)]);
    git(r.path(), &["branch", "base"]);
    r.commit(&[("x.txt", "x\n")], "x");
    let t0 = std::time::Instant::now();
    let (o, v) = affected(&env, &r);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        t0.elapsed()
    );
    assert_code(&o, 3);
    assert_eq!(v["result"], "measurement-failed", "{v:#}");
    assert_eq!(v["budget_source"], "config:verify.affected.timeout");
    assert_eq!(v["budget_seconds"], 1);
    assert!(v["reason"].as_str().unwrap().contains("timeout"), "{v:#}");
    assert_eq!(strs(&v["selected_packages"]), ["s"]);
}

/// The budget reaches the test binaries `go test` starts: they run in the
/// adapter's process group, which the engine kills at the deadline.
#[test]
fn the_affected_budget_kills_the_go_test_binaries_too() {
    if no_go() {
        return;
    }
    let env = Env::new();
    // Observes the suite through a pid file in SAPHAN_HOME, outside its tree, which a sealed suite cannot write, and a pid its PID namespace would make meaningless here (the seal has its own tests: tests/it/seal.rs).
    env.write_config(&format!("{GO_ADAPTER}timeout = \"10s\"\nseal = \"off\"\n"));
    let r = module();
    r.commit(
        &[(
            "other/slow_test.go",
            "package other\n\nimport (\n\t\"os\"\n\t\"strconv\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) {\n\t_ = os.WriteFile(os.Getenv(\"SAPHAN_TEST_PIDFILE\"), []byte(strconv.Itoa(os.Getpid())), 0o644)\n\ttime.Sleep(5 * time.Minute)\n}\n",
        )],
        "slow test",
    );
    let pidfile = env.home().join("test.pid");
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    let o = c
        .env("SAPHAN_TEST_PIDFILE", &pidfile)
        .args([
            "verify-affected",
            "--repo",
            &r.path_str(),
            "--base",
            "base",
            "--json",
        ])
        .output()
        .unwrap();
    assert_code(&o, 3);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["result"], "measurement-failed", "{v:#}");
    let pid = std::fs::read_to_string(&pidfile)
        .expect("the test binary started within the budget and wrote its pid");
    let stat = format!("/proc/{}/stat", pid.trim());
    let gone = || match std::fs::read_to_string(&stat) {
        Err(_) => true,
        // A zombie (state Z) has exited; only its parent has not reaped it.
        Ok(s) => s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !gone() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        gone(),
        "test binary {} outlived the affected budget",
        pid.trim()
    );
}

/// A package's test reads `changes.json` from its own directory: a name that
/// looks like documentation is still that package's fixture.
#[test]
fn a_doc_looking_fixture_in_a_package_dir_selects_its_package() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    r.commit(
        &[
            ("td/td.go", "package td\n"),
            (
                "td/td_test.go",
                "package td\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestChanges(t *testing.T) {\n\tb, err := os.ReadFile(\"changes.json\")\n\tif err != nil || string(b) != \"ok\\n\" {\n\t\tt.Fatalf(\"changes.json: %q %v\", b, err)\n\t}\n}\n",
            ),
            ("td/changes.json", "ok\n"),
        ],
        "td",
    );
    git(r.path(), &["branch", "-f", "base"]);
    r.commit(&[("td/changes.json", "broken\n")], "break the fixture");
    let (o, v) = affected(&env, &r);
    assert_eq!(strs(&v["changed_packages"]), pkgs(&["td"]), "{v:#}");
    assert!(
        v["no_package_paths"].as_array().unwrap().is_empty(),
        "{v:#}"
    );
    assert_eq!(v["result"], "red", "{v:#}");
    assert_code(&o, 1);
    let named = strs(&v["measurement"]["named_tests"]);
    assert!(named.iter().any(|t| t.contains("TestChanges")), "{named:?}");
}

/// lib/ is its own module (replaced into the root): `go list ./...` at the
/// root never lists it, so a change there must never be green by omission.
#[test]
fn a_change_in_a_nested_module_is_refused_never_green() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    let r = module();
    r.commit(
        &[
            (
                "go.mod",
                &format!("module {MODULE}\n\ngo 1.19\n\nreplace ex.com/lib => ./lib\n"),
            ),
            ("lib/go.mod", "module ex.com/lib\n\ngo 1.19\n"),
            ("lib/lib.go", "package lib\n\n// L is one.\nfunc L() int { return 1 }\n"),
            (
                "lib/lib_test.go",
                "package lib\n\nimport \"testing\"\n\nfunc TestLib(t *testing.T) { t.Fatal(\"lib is broken\") }\n",
            ),
        ],
        "nested lib",
    );
    git(r.path(), &["branch", "-f", "base"]);
    r.commit(
        &[(
            "lib/lib.go",
            "package lib\n\n// L is two.\nfunc L() int { return 2 }\n",
        )],
        "lib: 2",
    );
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-scope-missing", "{v:#}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("affected-nested-module"), "{msg}");
    assert!(msg.contains("lib/lib.go"), "{msg}");
    assert!(msg.contains("lib/go.mod"), "{msg}");
    assert!(msg.contains("cd lib && go test ./..."), "{msg}");
    assert_eq!(r.worktrees().len(), 1, "scratch worktree left behind");
}

/// A shell adapter that writes `scope` (the fields after `version` and
/// `adapter`) and then prints `stream` on stdout as its go test -json events.
fn scope_adapter(scope: &str, stream: &str) -> String {
    format!(
        "#!/bin/sh\ncat > \"$SAPHAN_AFFECTED_SCOPE_OUT\" <<'S'\n{{\"version\":1,\"adapter\":\"sh\",{scope}}}\nS\ncat <<'E'\n{stream}\nE\n"
    )
}

const PASS_S: &str = "{\"Action\":\"run\",\"Package\":\"s\",\"Test\":\"TestS\"}\n{\"Action\":\"pass\",\"Package\":\"s\",\"Test\":\"TestS\",\"Elapsed\":0}\n{\"Action\":\"pass\",\"Package\":\"s\",\"Elapsed\":0}";

fn sh_repo(env: &Env, script: &str) -> Repo {
    env.write_config("[verify.affected]\nargv = \"sh,adapter.sh\"\nreport = \"go-test-json\"\n");
    let r = Repo::new(&[("adapter.sh", script)]);
    git(r.path(), &["branch", "base"]);
    r.commit(&[("x.txt", "x\n")], "x");
    r
}

#[test]
fn a_changed_package_left_unselected_is_contradicted() {
    let env = Env::new();
    let r = sh_repo(
        &env,
        &scope_adapter(
            r#""changed_paths":["x.txt"],"no_package_paths":[],"changed_packages":["s"],"package_of":{"x.txt":"s"},"selected_packages":["t"],"omitted_packages":["s"],"widened":false,"widened_by":[]"#,
            "",
        ),
    );
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-scope-contradicted", "{v:#}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("neither selected nor deleted"),
        "{v:#}"
    );
}

#[test]
fn a_changed_path_nothing_accounts_for_is_contradicted() {
    let env = Env::new();
    let r = sh_repo(
        &env,
        &scope_adapter(
            r#""changed_paths":["x.txt"],"no_package_paths":[],"changed_packages":[],"selected_packages":["s"],"omitted_packages":[],"widened":false,"widened_by":[]"#,
            PASS_S,
        ),
    );
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-scope-contradicted", "{v:#}");
    assert!(v["message"].as_str().unwrap().contains("x.txt"), "{v:#}");
}

#[test]
fn a_selected_package_missing_from_the_event_stream_is_never_green() {
    let env = Env::new();
    let r = sh_repo(
        &env,
        &scope_adapter(
            r#""changed_paths":["x.txt"],"no_package_paths":[],"changed_packages":["s"],"package_of":{"x.txt":"s"},"selected_packages":["s","t"],"omitted_packages":[],"widened":false,"widened_by":[]"#,
            PASS_S,
        ),
    );
    let (o, v) = affected(&env, &r);
    assert_eq!(v["result"], "measurement-failed", "{v:#}");
    assert_code(&o, 3);
    let why = v["reason"].as_str().unwrap();
    assert!(
        why.contains("unmeasured-packages") && why.contains(" t "),
        "{why}"
    );
}

#[test]
fn a_changed_path_the_scope_is_silent_about_is_contradicted_even_beside_a_changed_package() {
    let env = Env::new();
    env.write_config("[verify.affected]\nargv = \"sh,adapter.sh\"\nreport = \"go-test-json\"\n");
    let pass_a = "{\"Action\":\"run\",\"Package\":\"a\",\"Test\":\"TestA\"}\n{\"Action\":\"pass\",\"Package\":\"a\",\"Test\":\"TestA\",\"Elapsed\":0}\n{\"Action\":\"pass\",\"Package\":\"a\",\"Elapsed\":0}";
    // The reviewer's scope: a/ and b/ changed, only a declared, b/b.go
    // never mentioned — with and without a package_of for a/a.go.
    for package_of in ["", r#""package_of":{"a/a.go":"a"},"#] {
        let scope = format!(
            r#""changed_paths":["a/a.go","b/b.go"],"no_package_paths":[],"changed_packages":["a"],{package_of}"selected_packages":["a"],"omitted_packages":["b"],"widened":false,"widened_by":[]"#
        );
        let r = Repo::new(&[("adapter.sh", &scope_adapter(&scope, pass_a))]);
        git(r.path(), &["branch", "base"]);
        r.commit(
            &[("a/a.go", "package a\n"), ("b/b.go", "package b\n")],
            "a and b",
        );
        let (o, v) = affected(&env, &r);
        assert_code(&o, 3);
        assert_eq!(v["error"], "affected-scope-contradicted", "{v:#}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains("b/b.go"), "{msg}");
        assert_eq!(msg.contains("a/a.go"), package_of.is_empty(), "{msg}");
    }
    // Mapping b/b.go to a package that is not changed is refused as well;
    // declaring b changed (and so selected) is accepted and measured.
    let mapped = r#""changed_paths":["a/a.go","b/b.go"],"no_package_paths":[],"package_of":{"a/a.go":"a","b/b.go":"b"},"omitted_packages":[],"widened":false,"widened_by":[]"#;
    let pass_ab = format!("{pass_a}\n{}", pass_a.replace("\"a\"", "\"b\""));
    for (packages, ok) in [
        (
            r#""changed_packages":["a"],"selected_packages":["a","b"]"#,
            false,
        ),
        (
            r#""changed_packages":["a","b"],"selected_packages":["a","b"]"#,
            true,
        ),
    ] {
        let r = Repo::new(&[(
            "adapter.sh",
            &scope_adapter(&format!("{mapped},{packages}"), &pass_ab),
        )]);
        git(r.path(), &["branch", "base"]);
        r.commit(
            &[("a/a.go", "package a\n"), ("b/b.go", "package b\n")],
            "a and b",
        );
        let (o, v) = affected(&env, &r);
        if ok {
            assert_eq!(v["result"], "green", "{v:#}");
            assert_code(&o, 0);
        } else {
            assert_code(&o, 3);
            assert_eq!(v["error"], "affected-scope-contradicted", "{v:#}");
            let msg = v["message"].as_str().unwrap();
            assert!(
                msg.contains("b/b.go") && msg.contains("neither a changed nor a deleted"),
                "{msg}"
            );
        }
    }
}

#[test]
fn a_selected_package_with_only_a_start_or_output_event_is_unmeasured() {
    let scope = r#""changed_paths":["x.txt"],"no_package_paths":[],"changed_packages":["s"],"package_of":{"x.txt":"s"},"selected_packages":["s","t"],"omitted_packages":[],"widened":false,"widened_by":[]"#;
    for (t_events, green) in [
        ("{\"Action\":\"start\",\"Package\":\"t\"}", false),
        (
            "{\"Action\":\"output\",\"Package\":\"t\",\"Output\":\"ok\\n\"}",
            false,
        ),
        (
            "{\"Action\":\"run\",\"Package\":\"t\",\"Test\":\"TestT\"}\n{\"Action\":\"pass\",\"Package\":\"t\",\"Test\":\"TestT\",\"Elapsed\":0}",
            false,
        ),
        // What go test -json prints for a package with no test files.
        (
            "{\"Action\":\"output\",\"Package\":\"t\",\"Output\":\"?   \\tt\\t[no test files]\\n\"}\n{\"Action\":\"skip\",\"Package\":\"t\",\"Elapsed\":0}",
            true,
        ),
    ] {
        let env = Env::new();
        let r = sh_repo(
            &env,
            &scope_adapter(scope, &format!("{PASS_S}\n{t_events}")),
        );
        let (o, v) = affected(&env, &r);
        if green {
            assert_eq!(v["result"], "green", "{t_events}: {v:#}");
            assert_code(&o, 0);
        } else {
            assert_eq!(v["result"], "measurement-failed", "{t_events}: {v:#}");
            assert_code(&o, 3);
            // Either guard may speak first: the engine's (a selected
            // package the stream never finished) or the report parser's (a
            // package whose events stop before its pass/fail/skip).
            let why = v["reason"].as_str().unwrap();
            assert!(
                (why.contains("unmeasured-packages") && why.contains(" t "))
                    || why.contains("stream-ended-early: the stream ends before t reported"),
                "{why}"
            );
        }
    }
}

#[test]
fn a_missing_junit_report_names_the_affected_key() {
    let env = Env::new();
    env.write_config(
        "[verify.affected]\nargv = \"sh,adapter.sh\"\nreport = \"junit-xml\"\nreport_path = \"out/*.xml\"\n",
    );
    let r = Repo::new(&[("adapter.sh", &junit_adapter("\"x.txt\"", false))]);
    git(r.path(), &["branch", "base"]);
    r.commit(&[("x.txt", "x\n")], "x");
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    assert_eq!(v["error"], "affected-report-missing", "{v:#}");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("verify.affected.report_path"), "{msg}");
    assert!(!msg.contains("verify.full"), "{msg}");
}

#[test]
fn go_list_objects_without_a_directory_are_quoted() {
    if no_go() {
        return;
    }
    let env = Env::new();
    env.write_config(GO_ADAPTER);
    // A package directory with a space: go cannot form its import path.
    let r = module();
    r.commit(&[("b c/b.go", "package b\n")], "spaced");
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("go-list-failed") && msg.contains("invalid char"),
        "{msg}"
    );
    assert!(!msg.contains("missing field"), "{msg}");
    // A go.work at the root that does not `use .`: ./... matches nothing.
    let r = module();
    r.commit(
        &[
            ("go.work", "go 1.19\n\nuse ./lib\n"),
            ("lib/go.mod", "module ex.com/lib\n\ngo 1.19\n"),
            ("lib/lib.go", "package lib\n"),
        ],
        "work",
    );
    let (o, v) = affected(&env, &r);
    assert_code(&o, 3);
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("go.work"), "{msg}");
    assert!(!msg.contains("missing field"), "{msg}");
}

/// A package that exists only under a build tag: with verify.full's
/// `-tags=integration`, the bundled adapter lists and tests with the same
/// tag (the packages certification and `--split` see), so a change there
/// selects and runs its package; declared with its own flags, they win;
/// a flag that does not choose packages is refused.
#[test]
fn the_go_adapter_lists_with_the_full_suites_build_tags() {
    if no_go() {
        return;
    }
    let tagged = (
        "tagged/tagged.go",
        "//go:build integration\n\npackage tagged\n\n// V is one.\nfunc V() int { return 1 }\n",
    );
    let tagged_test = (
        "tagged/tagged_test.go",
        "//go:build integration\n\npackage tagged\n\nimport \"testing\"\n\nfunc TestTagged(t *testing.T) {\n\tif V() != 2 {\n\t\tt.Fatal(\"tagged changed\")\n\t}\n}\n",
    );
    let r = module();
    r.commit(&[tagged, tagged_test], "tagged");
    git(r.path(), &["branch", "-f", "base"]);
    r.commit(
        &[(
            "tagged/tagged.go",
            "//go:build integration\n\npackage tagged\n\n// V is two.\nfunc V() int { return 2 }\n",
        )],
        "tagged: 2",
    );
    let env = Env::new();
    // Either way Go reads the flag: `-tags=integration` or `-tags integration`.
    for tags in ["-tags=integration", "-tags,integration"] {
        env.write_config(&format!(
            "{GO_ADAPTER}\n[verify.full]\nargv = \"go,test,-json,-count=1,{tags},./...\"\nreport = \"go-test-json\"\n"
        ));
        let (o, v) = affected(&env, &r);
        assert_eq!(
            strs(&v["changed_packages"]),
            pkgs(&["tagged"]),
            "{tags}: {v:#}"
        );
        assert_eq!(
            strs(&v["selected_packages"]),
            pkgs(&["tagged"]),
            "{tags}: {v:#}"
        );
        assert!(
            strs(&v["adapter_argv"]).contains(&"-tags=integration".to_string()),
            "{tags}: {v:#}"
        );
        assert_eq!(v["result"], "green", "{tags}: {v:#}");
        assert_code(&o, 0);
    }

    // Its own flags win; without the tag the package does not exist, so a
    // Go file nothing lists widens the run to every listed package.
    env.write_config(
        "[verify.affected]\nargv = \"saphan,adapter,go-affected,-tags=other\"\nreport = \"go-test-json\"\n\n[verify.full]\nargv = \"go,test,-json,-count=1,-tags=integration,./...\"\nreport = \"go-test-json\"\n",
    );
    let (_, v) = affected(&env, &r);
    assert_eq!(v["widened"], true, "{v:#}");
    assert!(
        !strs(&v["selected_packages"]).contains(&format!("{MODULE}/tagged")),
        "{v:#}"
    );
    assert!(
        !strs(&v["adapter_argv"]).contains(&"-tags=integration".to_string()),
        "{v:#}"
    );

    env.write_config(
        "[verify.affected]\nargv = \"saphan,adapter,go-affected,-race\"\nreport = \"go-test-json\"\n",
    );
    let (o, v) = affected(&env, &r);
    assert_ne!(o.status.code(), Some(0), "{v:#}");
    assert!(v.to_string().contains("-race"), "{v:#}");
}
