//! The operator's experience through the real binary: usage errors that
//! keep clap's hints, duration hints, completions and the man page, the
//! repository-script refusal, `--json` saying what the human lines say, and
//! `saphan status` on a real repository and a real fleet home.

use crate::common;

use crate::common::{Env, Repo, assert_code, assert_refused, json, lab::Lab, text};
use std::path::Path;
use std::process::Command;

// ---------------------------------------------------------------- usage

/// stderr of `saphan args…`, which must be a usage refusal (exit 2).
fn usage(env: &Env, args: &[&str]) -> String {
    let o = env.run(args);
    let err = assert_refused(&o, "usage");
    assert!(text(&o).0.is_empty(), "nothing on stdout: {}", text(&o).0);
    err
}

#[test]
fn usage_errors_keep_clap_argument_names_tips_and_possible_values() {
    let env = Env::new();
    assert_eq!(
        usage(&env, &["records", "show"]),
        "saphan: usage: the following required arguments were not provided: <ID> — see `saphan records show --help`\n  Usage: saphan records show <ID>\n"
    );
    assert_eq!(
        usage(&env, &["config", "set"]),
        "saphan: usage: the following required arguments were not provided: <KEY>, <VALUE> — see `saphan config set --help`\n  Usage: saphan config set <KEY> <VALUE>\n"
    );
    let err = usage(&env, &["machine", "probe", "--machine", "m1"]);
    let first = err.lines().next().unwrap();
    assert_eq!(
        first,
        "saphan: usage: the following required arguments were not provided: --capability <NAME>, --declared-path <ABS> — see `saphan machine probe --help`"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("  Usage: saphan machine probe --machine ")),
        "{err}"
    );
    assert_eq!(
        usage(&env, &["certfy"]),
        "saphan: usage: unrecognized subcommand 'certfy' — see `saphan --help`\n  tip: a similar subcommand exists: 'certify'\n  Usage: saphan [OPTIONS] <COMMAND>\n"
    );
    assert_eq!(
        usage(&env, &["certify", "--class", "vm"]),
        "saphan: usage: invalid value 'vm' for '--class <CLASS>' — see `saphan certify --help`\n  [possible values: host, container]\n"
    );
    // Under --json the same words, hint lines included, are the message.
    let o = env.run(&["--json", "certify", "--class", "vm"]);
    assert_code(&o, 2);
    let v = json(&o);
    assert_eq!(v["error"], "usage");
    assert_eq!(
        format!("saphan: usage: {}\n", v["message"].as_str().unwrap()),
        text(&o).1
    );
}

#[test]
fn a_bare_number_duration_suggests_a_unit_the_floor_accepts() {
    let env = Env::new();
    let err = usage(&env, &["certify", "--timeout", "5"]);
    assert!(
        err.contains("`5` is not a duration: 5 has no unit — write 5s (seconds) or 5m (minutes)"),
        "{err}"
    );
    assert!(!err.contains("5ms"), "{err}");
    // What it suggests is accepted: the run gets past parsing (and is
    // refused for the directory, which is not a repository).
    let dir = tempfile::tempdir().unwrap();
    let o = env.run(&[
        "certify",
        "--timeout",
        "5s",
        "--repo",
        dir.path().to_str().unwrap(),
    ]);
    assert_code(&o, 2);
    assert!(!text(&o).1.starts_with("saphan: usage: "), "{}", text(&o).1);
    // machine --timeout gives the same hint.
    let err = usage(
        &env,
        &["machine", "measure", "--machine", "a", "--timeout", "30"],
    );
    assert!(err.contains("write 30s (seconds)"), "{err}");
}

// ---------------------------------------------------- completions and man

#[test]
fn completions_generate_for_each_shell_and_bash_loads_them() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let o = env.run(&["completions", shell]);
        assert_code(&o, 0);
        let out = text(&o).0;
        for verb in ["certify", "verify-affected", "status", "machine"] {
            assert!(out.contains(verb), "{shell} completion lacks {verb}");
        }
        let program = match shell {
            "bash" => "bash",
            "zsh" => "zsh",
            _ => "fish",
        };
        if !common::have(program) {
            eprintln!("note: no {program} here; its script is generated but not loaded");
            continue;
        }
        let f = env.home().join(format!("saphan.{shell}"));
        std::fs::write(&f, &out).unwrap();
        let check = match shell {
            // Load it and ask bash what completes `saphan`.
            "bash" => format!("source '{}' && complete -p saphan", f.display()),
            "zsh" => format!("zsh -n '{}'", f.display()),
            _ => format!("fish --no-execute '{}'", f.display()),
        };
        let o = Command::new(if shell == "bash" { "bash" } else { "sh" })
            .args(["-c", &check])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if shell == "bash" {
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("saphan"),
                "{}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
    }
    assert!(
        !common::skip_unless(common::have("bash"), "no bash to load the completion"),
        "bash is what .ci/run installs"
    );
    let o = env.run(&["completions", "tcsh"]);
    let err = assert_refused(&o, "usage");
    assert!(err.contains("[possible values: bash, zsh, fish]"), "{err}");
}

#[test]
fn man_page_is_generated_from_the_clap_definitions() {
    let env = Env::new();
    let o = env.run(&["man"]);
    assert_code(&o, 0);
    let page = text(&o).0;
    assert!(page.contains(".TH saphan 1"), "{page}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    assert!(page.contains("saphan\\-status"), "{page}");
    let dir = env.home().join("man1");
    let o = env.run(&["man", "--dir", dir.to_str().unwrap()]);
    assert_code(&o, 0);
    for p in [
        "saphan.1",
        "saphan-certify.1",
        "saphan-status.1",
        "saphan-machine-probe.1",
    ] {
        let t = std::fs::read_to_string(dir.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(t.contains(".TH "), "{p}");
    }
    if common::have("man") {
        let o = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(dir.join("saphan-certify.1"))
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(o.status.success());
        assert!(String::from_utf8_lossy(&o.stdout).contains("--timeout"));
    }
}

// ------------------------------------------------ a junit suite per commit

/// A suite that reads the committed `mode` file: `green` (2 tests pass),
/// `red` (one of 2 fails, a line on stderr, exit 1), `broken` (no report:
/// measurement-failed).
const SUITE: &str = r#"#!/bin/sh
case "$(cat mode)" in
green) printf '<testsuite name="s" tests="2" failures="0"><testcase classname="calc" name="TestAdd"/><testcase classname="calc" name="TestMul"/></testsuite>' > r.xml ;;
red) printf '<testsuite name="s" tests="2" failures="1"><testcase classname="calc" name="TestAdd"><failure message="2+3 != 6"/></testcase><testcase classname="calc" name="TestMul"/></testsuite>' > r.xml
     echo "calc_test: 2+3 != 6" >&2; exit 1 ;;
broken) echo "the reporter crashed" >&2; exit 0 ;;
esac
"#;

const CONFIG: &str =
    "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"r.xml\"\n";

/// A repository whose single commit is fixed to the second (author, committer
/// and dates), so two of them made from the same files have the same SHA.
fn twin(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("saphan-twin-")
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("suite.sh"), SUITE).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.path().join("suite.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(dir.path().join("mode"), format!("{mode}\n")).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", mode],
    ] {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
            .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    dir
}

/// The human lines certify prints for the JSON object `v` (its record plus
/// `verified_pointer`), seconds left out: what the human output must say.
fn human_from_json(v: &serde_json::Value) -> Vec<String> {
    let s = |k: &str| {
        v[k].as_str()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .to_string()
    };
    let count = match v["count_with_subtests"].as_u64() {
        Some(all) => format!(
            "{} ({all} with subtests)",
            saphan::report::count_words(v["count"].as_u64())
        ),
        None => saphan::report::count_words(v["count"].as_u64()),
    };
    let mut lines = vec![format!(
        "certify {} on {}: {} — {} ({}, {}), <s>",
        s("sha"),
        s("machine"),
        s("verdict"),
        count,
        s("report"),
        s("suite_source"),
    )];
    if let Some(names) = v["named_tests"].as_array()
        && !names.is_empty()
    {
        lines.push(format!("failing ({}):", names.len()));
        for n in names {
            let rerun = v["rerun"]
                .as_array()
                .and_then(|a| a.iter().find(|r| r["test"] == *n))
                .map(|r| format!(" — re-run: {}", r["command"].as_str().unwrap()))
                .unwrap_or_default();
            lines.push(format!("  {}{rerun}", n.as_str().unwrap()));
        }
    }
    if let Some(code) = v["suite_exit_code"].as_i64()
        && v["verdict"] != "green"
    {
        lines.push(format!("suite exit code: {code}"));
    }
    for n in v["notes"].as_array().unwrap() {
        lines.push(format!("note: {}", n.as_str().unwrap()));
    }
    // Each failing test's own output (issue 21.5): `test_output` in the JSON.
    let shown: Vec<&serde_json::Value> = v["test_output"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|o| o.get("message").is_some() || o["lines"] != serde_json::json!([]))
                .collect()
        })
        .unwrap_or_default();
    if !shown.is_empty() {
        lines.push("output of failing tests:".into());
        for o in shown {
            let dropped = match o["dropped"].as_u64().unwrap() {
                0 => String::new(),
                1 => " (1 earlier line dropped)".into(),
                n => format!(" ({n} earlier lines dropped)"),
            };
            lines.push(format!("  {}{dropped}:", o["test"].as_str().unwrap()));
            if let Some(m) = o.get("message") {
                let mut ml = m.as_str().unwrap().lines();
                lines.push(format!("    message: {}", ml.next().unwrap_or_default()));
                lines.extend(ml.map(|l| format!("             {l}")));
            }
            for l in o["lines"].as_array().unwrap() {
                lines.push(format!("    {}", l.as_str().unwrap()));
            }
        }
    }
    lines.push(format!("budget: {} ({})", s("budget"), s("budget_source")));
    lines.push(format!("record: <path> (id {})", s("id")));
    let p = s("verified_pointer");
    lines.push(if p == "moved" {
        format!("verified: refs/saphan/verified -> {} (moved)", s("sha"))
    } else {
        let why = p
            .strip_prefix("unchanged: ")
            .unwrap_or_else(|| panic!("verified_pointer is `moved` or `unchanged: …`: {p}"));
        format!("verified: refs/saphan/verified not moved ({why})")
    });
    if let Some(w) = v["first_follow"]["words"].as_str() {
        lines.push(format!("trunk: {w}"));
    }
    lines
}

/// certify's human lines with what differs between two runs (seconds, the
/// record's path and id, the home) made comparable.
fn normalize(out: &str, home: &Path, id: &str) -> Vec<String> {
    out.lines()
        .map(|l| {
            let l = l.replace(&home.display().to_string(), "<home>");
            if l.starts_with("certify ") {
                let cut = l.rfind("), ").expect("a seconds field") + 3;
                format!("{}<s>", &l[..cut])
            } else if l.starts_with("record: ") {
                format!("record: <path> (id {id})")
            } else {
                l
            }
        })
        .collect()
}

#[test]
fn certify_json_and_human_output_say_the_same_for_every_verdict_and_refusal() {
    for (mode, exit, verdict) in [
        ("green", 0, "green"),
        ("red", 1, "red"),
        ("broken", 3, "measurement-failed"),
    ] {
        let (ea, eb) = (Env::new(), Env::new());
        ea.write_config(CONFIG);
        eb.write_config(CONFIG);
        let (a, b) = (twin(mode), twin(mode));
        let human = ea.run(&["certify", "--repo", a.path().to_str().unwrap()]);
        let js = eb.run(&["--json", "certify", "--repo", b.path().to_str().unwrap()]);
        assert_code(&human, exit);
        assert_code(&js, exit);
        let v = json(&js);
        assert_eq!(v["verdict"], verdict, "{v}");
        assert!(
            v["verified_pointer"].is_string(),
            "the pointer's fate is always said: {v}"
        );
        let mut want = human_from_json(&v);
        for l in want.iter_mut() {
            *l = l
                .replace(&eb.home().display().to_string(), "<home>")
                .replace(&b.path().display().to_string(), "<repo>");
        }
        let got: Vec<String> = normalize(&text(&human).0, ea.home(), v["id"].as_str().unwrap())
            .into_iter()
            .map(|l| l.replace(&a.path().display().to_string(), "<repo>"))
            .collect();
        assert_eq!(got, want, "{mode}: human vs --json");
        // The suite's stderr: shown to a person on a non-green verdict, and
        // carried in the JSON as `stderr_tail`.
        let err = text(&human).1;
        match v.get("stderr_tail").and_then(|t| t.as_str()) {
            Some(tail) => assert_eq!(
                err,
                format!("--- last lines of the suite's stderr ---\n{tail}\n"),
                "{mode}"
            ),
            None => assert!(err.is_empty(), "{mode}: {err}"),
        }
        match mode {
            "green" => assert_eq!(v["verified_pointer"], "moved"),
            "red" => {
                assert_eq!(v["named_tests"], serde_json::json!(["calc.TestAdd"]));
                assert_eq!(
                    v["verified_pointer"],
                    format!("unchanged: {} is not green", v["sha"].as_str().unwrap())
                );
                assert!(v["stderr_tail"].as_str().unwrap().contains("2+3 != 6"));
            }
            _ => assert_eq!(v["failure"], "report-no-match", "{v}"),
        }
    }

    // Refusals: the JSON object is the stderr line, word for word.
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./ci/test.sh\"\n");
    let repo = Repo::new(&[("a.txt", "a\n")]);
    for args in [
        vec!["certify", "--repo", repo.dir.path().to_str().unwrap()],
        vec!["records", "--repo", "/", "show", "nope"],
        vec!["certify", "--repo", "/nonexistent-saphan-dir"],
    ] {
        let human = env.run(&args);
        let mut jargs = vec!["--json"];
        jargs.extend(&args);
        let js = env.run(&jargs);
        assert_eq!(human.status.code(), js.status.code(), "{args:?}");
        let v = json(&js);
        assert_eq!(v["exit_code"], human.status.code().unwrap(), "{v}");
        assert_eq!(
            text(&human).1,
            format!(
                "saphan: {}: {}\n",
                v["error"].as_str().unwrap(),
                v["message"].as_str().unwrap()
            ),
            "{args:?}"
        );
        assert_eq!(text(&js).1, text(&human).1, "{args:?}: stderr alike");
    }
}

#[test]
fn a_repository_script_the_commit_lacks_is_named_for_what_it_is() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./ci/test.sh\"\n");
    let repo = Repo::new(&[("a.txt", "a\n")]);
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    let err = assert_refused(&o, "suite-program-not-in-commit");
    assert_eq!(
        err,
        format!(
            "saphan: suite-program-not-in-commit: the suite's program `./ci/test.sh` is a path inside the repository, and commit {} does not carry it (its tree has no `ci/test.sh`) — nothing to install: commit the script at that path, or point verify.full.argv at a program the commit carries or this machine has, then re-run\n",
            repo.head()
        )
    );
    assert!(repo.records().is_empty());
    common::assert_only_main_worktree(&repo);
    // Committed, it runs.
    repo.commit(&[("ci/test.sh", "#!/bin/sh\nexit 0\n")], "add the suite");
    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
}

// ---------------------------------------------------------------- status

/// `2026-12-01T04:02:11.123456789Z` → `2026-12-01T04:02:11Z`: what a
/// human screen shows of a record's time.
fn to_second(t: &str) -> String {
    let (head, _) = t.split_once('.').unwrap_or((t.trim_end_matches('Z'), ""));
    format!("{}Z", head.trim_end_matches('Z'))
}

fn certify(env: &Env, repo: &Repo, exit: i32) -> serde_json::Value {
    let o = env.run(&["--json", "certify", "--repo", &repo.path_str()]);
    assert_code(&o, exit);
    json(&o)
}

#[test]
fn status_shows_trunk_verified_last_attempts_and_last_red() {
    let env = Env::new();
    env.write_config(CONFIG);
    let repo = Repo::new(&[("suite.sh", SUITE), ("mode", "green\n")]);
    let green = certify(&env, &repo, 0);
    repo.commit(&[("mode", "red\n")], "red");
    let red = certify(&env, &repo, 1);
    repo.commit(&[("mode", "broken\n")], "broken");
    let failed = certify(&env, &repo, 3);
    let head = repo.commit(&[("b.txt", "b\n")], "not certified yet");

    let o = env.run(&["--json", "status", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["trunk"], "refs/heads/main");
    assert_eq!(v["trunk_head"], head);
    assert_eq!(v["verified"], green["sha"]);
    assert_eq!(v["unverified_commits"], 3);
    let last = v["last_attempts"].as_array().unwrap();
    assert_eq!(last.len(), 1, "{v}");
    assert_eq!(last[0]["machine"], "local");
    assert_eq!(last[0]["id"], failed["id"]);
    assert_eq!(last[0]["verdict"], "measurement-failed");
    assert_eq!(last[0]["failure"], "report-no-match");
    assert_eq!(last[0]["count"], "unavailable");
    assert_eq!(last[0]["finished_at"], failed["finished_at"]);
    assert_eq!(v["last_red"]["id"], red["id"]);
    assert_eq!(
        v["last_red"]["named_tests"],
        serde_json::json!(["calc.TestAdd"])
    );
    assert_eq!(v["last_red"]["count"], 2);
    assert_eq!(v["fleet"]["program"], "./suite.sh");
    assert_eq!(v["fleet"]["capability"], serde_json::Value::Null);
    assert_eq!(v["fleet"]["machines"], serde_json::json!([]));

    let o = env.run(&["status", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let out = text(&o).0;
    let want = [
        format!("repository: {}", v["repo"].as_str().unwrap()),
        format!("trunk: refs/heads/main at {head}"),
        format!(
            "verified: {} — 3 trunk commits not yet verified",
            green["sha"].as_str().unwrap()
        ),
        "last certify attempt per machine:".to_string(),
        format!(
            "  local: {} host measurement-failed (report-no-match) — count: unavailable, finished {}, {:.1}s (id {})",
            &failed["sha"].as_str().unwrap()[..12],
            to_second(failed["finished_at"].as_str().unwrap()),
            failed["suite_seconds"].as_f64().unwrap(),
            failed["id"].as_str().unwrap()
        ),
        format!(
            "last red: on local: {} host red — 2 tests, finished {}, {:.1}s (id {})",
            &red["sha"].as_str().unwrap()[..12],
            to_second(red["finished_at"].as_str().unwrap()),
            red["suite_seconds"].as_f64().unwrap(),
            red["id"].as_str().unwrap()
        ),
        "  failing (1):".to_string(),
        "    calc.TestAdd".to_string(),
        // A junit-xml red keeps no test's output after the fact: the kept
        // log's last lines stand for it.
        "  last lines of the suite's log:".to_string(),
        "    calc_test: 2+3 != 6".to_string(),
        format!(
            "  (saphan records show {} shows all of it)",
            red["id"].as_str().unwrap()
        ),
        "fleet: no machine rows (suite program `./suite.sh` maps to no catalog capability)"
            .to_string(),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), want, "{out}");
    // --trunk names another trunk: a branch at the verified SHA is caught up.
    common::git(
        repo.path(),
        &["branch", "release", green["sha"].as_str().unwrap()],
    );
    let o = env.run(&[
        "--json",
        "status",
        "--repo",
        &repo.path_str(),
        "--trunk",
        "release",
    ]);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["trunk"], "refs/heads/release");
    assert_eq!(v["unverified_commits"], 0);
    common::git(repo.path(), &["tag", "v1"]);
    let o = env.run(&["status", "--repo", &repo.path_str(), "--trunk", "v1"]);
    assert_refused(&o, "trunk-not-a-branch");
    // It measured nothing and wrote nothing.
    assert_eq!(repo.records().len(), 3);
    common::assert_only_main_worktree(&repo);
}

#[test]
fn status_names_fleet_machines_without_fresh_facts_or_toolchain_rows() {
    if common::skip_unless(common::have("go"), "no go for the lab probe to find") {
        return;
    }
    let Some(lab) = Lab::start(3) else { return };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    let mut rows = String::new();
    for h in lab.hosts() {
        rows += &format!("[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"/tmp\"\n\n");
    }
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    // m0: facts and a present go. m1: facts only. m2: facts and an absent go
    // (the lab hides Go on m2).
    let o = env.run(&["machine", "measure", "--machine", "m0,m1,m2"]);
    assert_code(&o, 0);
    for (m, code) in [("m0", 0), ("m2", 1)] {
        let o = env.run(&[
            "machine",
            "probe",
            "--machine",
            m,
            "--capability",
            "go",
            "--declared-path",
            "/usr/bin/go",
            "--workhome",
            "/tmp",
            "--probed-by",
            "tester",
            "--workspace",
            "ws/main",
        ]);
        assert_code(&o, code);
    }
    let gm = common::gomod::go_mod();
    let repo = Repo::new(&[(gm.0, gm.1.as_str())]);

    let o = env.run(&["--json", "status", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let v = json(&o);
    let f = &v["fleet"];
    assert_eq!(f["capability"], "go", "{v}");
    assert_eq!(f["freshness_seconds"], 86400);
    let by = |m: &str| {
        f["machines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["machine"] == m)
            .unwrap_or_else(|| panic!("{m}: {v}"))
            .clone()
    };
    let (m0, m1, m2) = (by("m0"), by("m1"), by("m2"));
    assert_eq!(
        (&m0["facts"], &m0["toolchain"], &m0["needs_attention"]),
        (&"fresh".into(), &"fresh".into(), &false.into()),
        "{m0}"
    );
    assert_eq!(m0["toolchain_outcome"], "present");
    assert_eq!(
        (&m1["facts"], &m1["toolchain"], &m1["needs_attention"]),
        (&"fresh".into(), &"none".into(), &true.into()),
        "{m1}"
    );
    assert_eq!(
        (&m2["facts"], &m2["toolchain"], &m2["toolchain_outcome"]),
        (&"fresh".into(), &"not-present".into(), &"absent".into()),
        "{m2}"
    );
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let out = text(&o).0;
    let line = |m: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("  {m}: ")))
            .unwrap_or_else(|| panic!("{m}: {out}"))
            .to_string()
    };
    assert!(out.contains("fleet (suite program `"), "{out}");
    assert!(!line("m0").contains("needs:"), "{out}");
    assert!(
        line("m1").contains("; go none; answered ")
            && line("m1")
                .ends_with(" — needs: saphan machine probe --machine m1 --capability go …"),
        "{out}"
    );
    assert!(line("m2").contains("go absent not-present"), "{out}");

    // A 1 ms window: once the clock is past the rows' age, every row is stale.
    let at = saphan::clock::parse_rfc3339(m0["toolchain_measured_at"].as_str().unwrap()).unwrap();
    while time::OffsetDateTime::now_utc() - at <= time::Duration::milliseconds(2) {
        std::thread::yield_now();
    }
    env.write_config("[fleet]\nfreshness = \"1ms\"\n");
    let o = env.run(&["--json", "status", "--repo", &repo.path_str()]);
    let v = json(&o);
    for m in v["fleet"]["machines"].as_array().unwrap() {
        assert_eq!(m["facts"], "stale", "{m}");
        assert_eq!(m["needs_attention"], true, "{m}");
    }
    assert_eq!(by_stale(&v, "m0")["toolchain"], "stale");
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let out = text(&o).0;
    assert!(
        out.contains("  m0: facts stale (")
            && out.contains("— needs: saphan machine remeasure --machine m0\n"),
        "{out}"
    );
}

fn by_stale(v: &serde_json::Value, m: &str) -> serde_json::Value {
    v["fleet"]["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["machine"] == m)
        .unwrap()
        .clone()
}

// ---------------------------------------------------------------- demo

/// Run scripts/demo with `args` and its temp directory under a fresh TMPDIR;
/// return the exit code and that TMPDIR (which must be empty afterwards).
fn demo(args: &[&str], home: Option<&Path>) -> (Option<i32>, tempfile::TempDir) {
    let tmp = tempfile::Builder::new()
        .prefix("saphan-demo-tmp-")
        .tempdir()
        .unwrap();
    let mut c = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/demo"));
    c.args(args)
        .env("SAPHAN_BIN", env!("CARGO_BIN_EXE_saphan"))
        .env("TMPDIR", tmp.path())
        .env("GOTOOLCHAIN", "local")
        .env_remove("SAPHAN_HOME");
    if let Some(h) = home {
        c.env("SAPHAN_HOME", h);
    }
    let o = c.output().unwrap();
    (o.status.code(), tmp)
}

fn left_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_demo_removes_its_temp_directory_on_every_exit_path() {
    let go = common::gomod::have_go();
    if go {
        // Its own repository, green: exit 0.
        let (code, tmp) = demo(&[], None);
        assert_eq!(code, Some(0));
        assert_eq!(left_in(tmp.path()), Vec::<String>::new());
    } else {
        eprintln!("note: no go here; the demo's own repository is not certified");
    }
    // --repo with a repository saphan refuses (no go.mod, no suite): the
    // refusal's exit code, the throwaway home gone, the repository kept.
    let repo = Repo::new(&[("a.txt", "a\n")]);
    let (code, tmp) = demo(&["--repo", &repo.path_str()], None);
    assert_eq!(code, Some(2));
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
    assert!(repo.path().join("a.txt").is_file());
    // --repo naming no repository: `records` fails under `set -e`; still gone.
    let not_repo = tempfile::tempdir().unwrap();
    let (code, tmp) = demo(&["--repo", not_repo.path().to_str().unwrap()], None);
    assert_ne!(code, Some(0));
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
    // An exported SAPHAN_HOME is the operator's: it stays.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config"), "# mine\n").unwrap();
    let (_, tmp) = demo(&["--repo", &repo.path_str()], Some(home.path()));
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
    assert!(home.path().join("config").is_file());
}

// ----------------------------------------------------- one scratch path

#[test]
fn certify_verify_affected_and_verify_union_measure_at_one_stable_scratch_path() {
    let env = Env::new();
    let log = env.home().join("where.log");
    let script = format!("#!/bin/sh\npwd >> '{}'\nexit 0\n", log.display());
    // Observes the suite through a log in SAPHAN_HOME outside its tree, which a sealed suite cannot write (the seal has its own tests: tests/it/seal.rs).
    env.write_config(
        "[verify.full]\nargv = \"./where.sh\"\nseal = \"off\"\n\n[verify.affected]\nargv = \"./where.sh\"\nseal = \"off\"\n",
    );
    let repo = Repo::new(&[("where.sh", script.as_str())]);
    common::git(repo.path(), &["checkout", "-q", "-b", "s1"]);
    repo.commit(&[("a.txt", "a\n")], "s1");
    common::git(repo.path(), &["checkout", "-q", "main"]);
    let r = repo.path_str();
    assert_code(&env.run(&["certify", "--repo", &r]), 0);
    assert_code(&env.run(&["certify", "--repo", &r]), 0);
    // The adapter writes no scope, so the run is an error; it ran, though.
    let o = env.run(&[
        "verify-affected",
        "--repo",
        &r,
        "--base",
        "main",
        "--head",
        "s1",
    ]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o).0);
    assert_code(
        &env.run(&[
            "verify-union",
            "--repo",
            &r,
            "--base",
            "main",
            "--stream",
            "s1",
        ]),
        0,
    );
    let dirs: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(dirs.len(), 4, "{dirs:?}");
    let scratch = env.home().join("scratch");
    assert!(
        Path::new(&dirs[0]).starts_with(&scratch) && dirs[0].ends_with("/tree"),
        "{dirs:?}"
    );
    assert!(
        dirs.iter().all(|d| *d == dirs[0]),
        "one path for every verb: {dirs:?}"
    );
    common::assert_only_main_worktree(&repo);
}

/// Issue 21.7: an unreachable machine's record does not print `program:`
/// and `shipped: 0 bytes` as if it ran; `records` names the failure of a
/// measurement-failed attempt; `status` and `machine list` show each
/// machine's last infrastructure failure and when it last answered, and
/// `status` the class of each attempt, times to the second. On main
/// 7d6d184 none of these words were printed.
#[test]
fn machine_health_shows_at_a_glance() {
    let Some(lab) = Lab::start(2) else { return };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    let mut rows = String::new();
    for h in ["m0", "m1"] {
        rows += &format!(
            "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
            work.path().join(h).display()
        );
    }
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    env.write_config("[verify.full]\nargv = [\"sh\", \"ok.sh\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("ok.sh", "#!/bin/sh\necho fine\n")]);
    lab.stop("m1");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0,m1"]);
    assert_code(&o, 3);
    let out = text(&o).0;
    let block = |m: &str| -> Vec<String> {
        let mut lines = out
            .lines()
            .skip_while(|l| !l.contains(&format!(" on {m}: ")));
        let mut b = vec![
            lines
                .next()
                .unwrap_or_else(|| panic!("{m}: {out}"))
                .to_string(),
        ];
        b.extend(
            lines
                .take_while(|l| l.starts_with("  "))
                .map(str::to_string),
        );
        b
    };
    let m1 = block("m1");
    assert!(m1[0].contains("measurement-failed"), "{out}");
    assert!(
        m1.iter()
            .all(|l| !l.contains("program:") && !l.contains("shipped:")),
        "{out}"
    );
    assert!(
        m1.contains(&"  failure: host-unreachable".to_string()),
        "{out}"
    );
    assert!(
        block("m0").iter().any(|l| l.starts_with("  shipped: ")),
        "{out}"
    );

    let o = env.run(&["records", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let listing = text(&o).0;
    let line = listing
        .lines()
        .find(|l| l.contains("  m1  "))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        line.contains("measurement-failed") && line.ends_with("(host-unreachable)"),
        "{listing}"
    );
    let recs = repo.records();
    let failed = recs.iter().find(|r| r["machine"] == "m1").unwrap();

    let o = env.run(&["--json", "status", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let v = json(&o);
    let by = |m: &str| {
        v["fleet"]["machines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["machine"] == m)
            .unwrap_or_else(|| panic!("{m}: {v}"))
            .clone()
    };
    let (s0, s1) = (by("m0"), by("m1"));
    assert_eq!(
        s1["last_infrastructure_failure"]["failure"], "host-unreachable",
        "{s1}"
    );
    assert_eq!(s1["last_infrastructure_failure"]["id"], failed["id"]);
    assert_eq!(
        s1["last_answered"], s1["facts_measured_at"],
        "only its measure answered"
    );
    assert_eq!(s0["last_infrastructure_failure"], serde_json::Value::Null);
    let m0_rec = recs.iter().find(|r| r["machine"] == "m0").unwrap();
    assert_eq!(
        s0["last_answered"], m0_rec["finished_at"],
        "its certify answered last"
    );
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let out = text(&o).0;
    let fleet_line = |m: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("  {m}: facts ")))
            .unwrap_or_else(|| panic!("{m}: {out}"))
            .to_string()
    };
    assert!(
        fleet_line("m1").contains(&format!(
            "; answered {}; last infrastructure failure: host-unreachable {} (id {})",
            s1["facts_measured_at"].as_str().unwrap(),
            to_second(failed["finished_at"].as_str().unwrap()),
            failed["id"].as_str().unwrap()
        )),
        "{out}"
    );
    assert!(
        fleet_line("m0").contains(&format!(
            "; answered {}",
            to_second(m0_rec["finished_at"].as_str().unwrap())
        )) && !fleet_line("m0").contains("infrastructure"),
        "{out}"
    );
    let attempt = out
        .lines()
        .find(|l| {
            l.starts_with("  m1: ") && l.contains(" host measurement-failed (host-unreachable)")
        })
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        attempt.contains(&format!(
            "finished {},",
            to_second(failed["finished_at"].as_str().unwrap())
        )),
        "{out}"
    );

    let o = env.run(&["machine", "list", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let list = text(&o).0;
    let l1 = list
        .lines()
        .find(|l| l.starts_with("m1 "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        l1.contains(s1["facts_measured_at"].as_str().unwrap())
            && l1.contains(&format!(
                "host-unreachable {}",
                to_second(failed["finished_at"].as_str().unwrap())
            )),
        "{list}"
    );
    let o = env.run(&["--json", "machine", "list", "--repo", &repo.path_str()]);
    let v = json(&o);
    let j1 = v["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "m1")
        .unwrap()
        .clone();
    assert_eq!(
        j1["last_infrastructure_failure"]["failure"], "host-unreachable",
        "{v}"
    );
    assert_eq!(j1["last_answered"], s1["facts_measured_at"]);
}

/// Issue 21.9: a container run on this machine without its `[machine.local]`
/// row is told the row's form (`transport = "local"`, a workhome), not just
/// "add a [machine.local] row" (main 7d6d184).
#[test]
fn the_missing_local_row_is_named_with_its_form() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    let pin = format!("sha256:{}", "1".repeat(64));
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--class",
        "container",
        "--image",
        &pin,
    ]);
    let err = assert_refused(&o, "machine-unknown");
    assert!(
        err.contains("add a [machine.local] row (transport = \"local\", workhome = \""),
        "{err}"
    );
    assert!(repo.records().is_empty());
}

/// Every line of a terminal recording with its escape sequences removed,
/// split at carriage returns and newlines.
fn screen_lines(raw: &[u8]) -> Vec<String> {
    let s = String::from_utf8_lossy(raw);
    let mut plain = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // CSI: parameters, then one final byte in @..~; any but a
                // colour (`m`) moves the cursor or clears: a line break.
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        if d != 'm' {
                            plain.push('\n');
                        }
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    // indicatif pads each bar to the terminal's width, so two bars can
    // share one recorded line: runs of spaces separate them.
    plain
        .split(['\r', '\n'])
        .flat_map(|l| l.split("   "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The seconds a progress line ends with (`… done: green (3s)`).
fn line_seconds(l: &str) -> Option<u64> {
    let inner = l.rsplit_once('(')?.1.strip_suffix(')')?;
    let mut total = 0;
    for part in inner.split_whitespace() {
        let (n, unit) = part.split_at(part.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = n.parse().ok()?;
        total += match unit {
            "s" => n,
            "m" => n * 60,
            "h" => n * 3600,
            _ => return None,
        };
    }
    Some(total)
}

/// Issue 21.9: on a terminal, a machine that finished keeps the time it
/// took on its progress line, while another still runs; on main 7d6d184 the
/// closing redraw gave every line the whole invocation's time. Recorded
/// through a real pty (`script`), on two lab hosts; m1 waits for a file the
/// test writes only once m1's own line shows it has run 2 s past m0's.
#[test]
fn a_finished_machines_timer_stops_counting() {
    if common::skip_unless(common::have("script"), "no script(1) for a pty") {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    let mut rows = String::new();
    for h in ["m0", "m1"] {
        rows += &format!(
            "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
            work.path().join(h).display()
        );
    }
    std::fs::write(env.home().join("fleet/machines.toml"), rows).unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "m0,m1"]), 0);
    let token = format!("saphan-timer-{}", std::process::id());
    env.write_config("[verify.full]\nargv = [\"sh\", \"wait.sh\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[(
        "wait.sh",
        &format!(
            "#!/bin/sh\nif [ -e \"$HOME/{token}.slow\" ]; then\n  while [ ! -e \"$HOME/{token}.go\" ]; do sleep 0.1; done\nfi\necho done\n"
        ),
    )]);
    std::fs::write(lab.home_dir("m1").join(format!("{token}.slow")), "").unwrap();
    let inner = env.cmd();
    // A pty of no size stops indicatif drawing: give it one.
    let mut line = format!(
        "stty rows 40 cols 150; exec '{}'",
        inner.get_program().to_string_lossy()
    );
    for a in ["certify", "--repo", &repo.path_str(), "--machine", "m0,m1"] {
        line.push_str(&format!(" '{a}'"));
    }
    let mut c = Command::new("script");
    c.args(["-qefc", &line, "/dev/null"]);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let mut child = c
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let reader = {
        let recorded = recorded.clone();
        let mut out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                recorded.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let lines_of = |m: &str| -> Vec<String> {
        screen_lines(&recorded.lock().unwrap())
            .into_iter()
            // `⠁ m0 run (1s)` while it runs, `m0 done: green (1s)` once
            // finished (the spinner is blank then).
            .filter(|l| l.split_whitespace().take(2).any(|w| w == m))
            .collect()
    };
    // m0 finished: the seconds its line showed then.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let m0_done = loop {
        if let Some(l) = lines_of("m0")
            .into_iter()
            .find(|l| l.contains("done: green"))
        {
            break line_seconds(&l).unwrap_or_else(|| panic!("{l}"));
        }
        assert!(
            std::time::Instant::now() < deadline,
            "m0 never finished: {:?}",
            lines_of("m0")
        );
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    };
    // m1 still runs, and its line counts on past m0's time.
    loop {
        let far = lines_of("m1")
            .iter()
            .filter_map(|l| line_seconds(l))
            .any(|s| s >= m0_done + 2);
        if far {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "m1's line never counted on: {:?}",
            lines_of("m1")
        );
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    }
    std::fs::write(lab.home_dir("m1").join(format!("{token}.go")), "").unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let _ = std::fs::remove_file(lab.home_dir("m1").join(format!("{token}.slow")));
    let _ = std::fs::remove_file(lab.home_dir("m1").join(format!("{token}.go")));
    assert!(
        status.success(),
        "{status:?}: {:?}",
        screen_lines(&recorded.lock().unwrap())
    );
    let m0 = lines_of("m0");
    let last = m0.last().unwrap();
    assert!(last.contains("done: green"), "{m0:?}");
    assert_eq!(
        line_seconds(last),
        Some(m0_done),
        "m0's finished line kept counting: {m0:?}"
    );
    let m1_last = lines_of("m1").last().cloned().unwrap();
    assert!(line_seconds(&m1_last).unwrap() >= m0_done + 2, "{m1_last}");
}
