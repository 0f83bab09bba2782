//! Why, after the fact (issue 40 item 2): `records show ID` as a person
//! reads it (the failing tests with their output, read again from the kept
//! log), a unique id prefix and `last`; the listing's date and duration
//! columns and its filters; `status` showing the last red's first failing
//! output. The real binary, real git repositories, a real `go`.

use crate::common::gomod;
use crate::common::{Env, Repo, assert_code, assert_refused, json, text};
use serde_json::Value;

/// `saphan ARGS…` with the Go environment a test module needs.
fn run(env: &Env, args: &[&str]) -> std::process::Output {
    let mut c = env.cmd();
    gomod::go_env(&mut c);
    c.args(args).output().unwrap()
}

/// A Go module whose `a.TestOne` fails after logging, `a.TestTwo` passes.
pub fn red_go_module() -> Repo {
    let (m, mod_text) = gomod::go_mod();
    Repo::new(&[
        (m, &mod_text),
        ("a/a.go", "package a\n\nfunc V() int { return 1 }\n"),
        (
            "a/a_test.go",
            "package a\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {\n\tt.Log(\"about to fail\")\n\tt.Log(\"line two\")\n\tt.Fatal(\"V is not 2\")\n}\n\nfunc TestTwo(t *testing.T) {}\n",
        ),
    ])
}

/// The exitcode suite `suite.sh`, which exits with the code in `code`.
const EXIT_SUITE: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n";

fn exit_repo() -> Repo {
    Repo::new(&[
        (
            "suite.sh",
            "#!/bin/sh\necho \"exiting $(cat code)\"\nexit $(cat code)\n",
        ),
        ("code", "0\n"),
    ])
}

#[test]
fn records_show_prints_a_red_as_certify_did_and_json_prints_the_record() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let repo = red_go_module();
    let o = run(&env, &["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    let certified = text(&o).0;
    let id = repo.records()[0]["id"].as_str().unwrap().to_string();

    let o = run(&env, &["records", "--repo", &repo.path_str(), "show", &id]);
    assert_code(&o, 0);
    let (out, err) = text(&o);
    assert!(err.is_empty(), "{err}");
    // The verdict, the failing test and its output, in certify's words.
    for line in certified.lines().take_while(|l| !l.starts_with("budget:")) {
        assert!(out.contains(line), "`{line}` missing from:\n{out}");
    }
    assert!(out.contains("        a_test.go:8: V is not 2\n"), "{out}");
    assert!(
        out.contains("        a_test.go:6: about to fail\n"),
        "{out}"
    );
    for want in [
        &format!("record {id} (certify)\n"),
        "machine: local (host class)\n",
        &format!("sha: {}\n", repo.head()),
        "trunk: refs/heads/main\n",
        "budget: 10m (default)\n",
        "seal: ",
        "started: ",
        "suite: go test -count=1 -json ./...\n",
        &format!("(`saphan records show {id} --log`)"),
    ] {
        assert!(out.contains(want), "`{want}` missing from:\n{out}");
    }

    // --json prints the record itself, as the attempts file holds it.
    let o = run(
        &env,
        &["records", "--repo", &repo.path_str(), "show", &id, "--json"],
    );
    assert_code(&o, 0);
    assert_eq!(json(&o), repo.records()[0]);
}

#[test]
fn records_show_takes_a_unique_id_prefix_and_last_and_refuses_an_ambiguous_one() {
    let env = Env::new();
    env.write_config(EXIT_SUITE);
    let repo = exit_repo();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    repo.commit(&[("code", "1\n")], "red");
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 1);
    let ids: Vec<String> = repo
        .records()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let show = |id: &str| env.run(&["--json", "records", "--repo", &repo.path_str(), "show", id]);
    // Every id but its last character is still unique.
    for id in &ids {
        let o = show(&id[..id.len() - 1]);
        assert_code(&o, 0);
        assert_eq!(json(&o)["id"], id.as_str());
    }
    let o = show("last");
    assert_code(&o, 0);
    assert_eq!(json(&o)["id"], ids[1].as_str());
    assert_eq!(json(&o)["verdict"], "red");

    // Both ids start with the year: refused, naming both.
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", &ids[0][..4]]);
    let err = assert_refused(&o, "record-id-ambiguous");
    assert!(err.contains(&ids[0]) && err.contains(&ids[1]), "{err}");
    assert!(err.contains("2 record ids"), "{err}");
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", "1999"]);
    assert_refused(&o, "record-not-found");

    // The human view of an exitcode red: no test names, the log's last lines.
    let o = env.run(&["records", "--repo", &repo.path_str(), "show", "last"]);
    assert_code(&o, 0);
    let out = text(&o).0;
    assert!(
        out.contains(": red — count: unavailable (exitcode"),
        "{out}"
    );
    assert!(out.contains("suite exit code: 1\n"), "{out}");
    assert!(out.contains("--- last lines of the suite's log ("), "{out}");
    assert!(out.contains("exiting 1\n"), "{out}");

    // `last` in a repository without records is not found.
    let empty = Repo::new(&[("a", "a\n")]);
    let o = env.run(&["records", "--repo", &empty.path_str(), "show", "last"]);
    assert_refused(&o, "record-not-found");
}

#[test]
fn the_listing_has_a_date_and_a_duration_and_filters_by_sha_machine_verdict_and_count() {
    let env = Env::new();
    env.write_config(EXIT_SUITE);
    let repo = exit_repo();
    let green = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let red = repo.commit(&[("code", "1\n")], "red");
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 1);
    let recs = repo.records();

    let list = |extra: &[&str]| {
        let mut a = vec!["records", "--repo"];
        let p = repo.path_str();
        a.push(&p);
        a.extend_from_slice(extra);
        let o = env.run(&a);
        assert_code(&o, 0);
        text(&o).0
    };
    let all = list(&[]);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 3, "{all}");
    for (line, r) in lines.iter().zip(&recs) {
        let started = r["started_at"].as_str().unwrap();
        let secs = format!("{:.1}s", r["suite_seconds"].as_f64().unwrap());
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[0], r["id"].as_str().unwrap(), "{line}");
        assert_eq!(cols[1], format!("{}Z", &started[..19]), "{line}");
        assert_eq!(cols[2], secs, "{line}");
        assert_eq!(cols[3], "certify", "{line}");
        assert_eq!(cols[4], r["verdict"].as_str().unwrap(), "{line}");
        assert_eq!(cols[5], &r["sha"].as_str().unwrap()[..12], "{line}");
        assert_eq!(cols[6], "local", "{line}");
    }

    let ids = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let id = |i: usize| recs[i]["id"].as_str().unwrap().to_string();
    assert_eq!(ids(&list(&["--sha", &green[..7]])), [id(0), id(1)]);
    assert_eq!(ids(&list(&["--sha", &red[..7].to_uppercase()])), [id(2)]);
    assert_eq!(ids(&list(&["--verdict", "red"])), [id(2)]);
    assert_eq!(ids(&list(&["--verdict", "green", "-n", "1"])), [id(1)]);
    assert_eq!(ids(&list(&["-n", "2"])), [id(1), id(2)]);
    assert_eq!(ids(&list(&["--machine", "local", "-n", "1"])), [id(2)]);
    let none = list(&["--machine", "m9"]);
    assert!(
        none.starts_with("no record of the 3 in ") && none.contains("matches the filters"),
        "{none}"
    );
    // The filters apply to --json too.
    let o = env.run(&[
        "--json",
        "records",
        "--repo",
        &repo.path_str(),
        "--verdict",
        "red",
    ]);
    let v = json(&o);
    let got: Vec<&Value> = v["records"].as_array().unwrap().iter().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], id(2).as_str());
    // A verdict nobody writes is a usage refusal; so is a filter with `show`.
    assert_refused(
        &env.run(&["records", "--repo", &repo.path_str(), "--verdict", "pink"]),
        "usage",
    );
    assert_refused(
        &env.run(&[
            "records",
            "--repo",
            &repo.path_str(),
            "--verdict",
            "red",
            "show",
            "last",
        ]),
        "usage",
    );
}

#[test]
fn status_shows_the_last_reds_first_failing_output_bounded() {
    if gomod::no_go() {
        return;
    }
    let env = Env::new();
    let (m, mod_text) = gomod::go_mod();
    let mut body = String::from("func TestLoud(t *testing.T) {\n");
    for i in 0..12 {
        body.push_str(&format!("\tt.Log(\"loud line {i}\")\n"));
    }
    body.push_str("\tt.Fatal(\"loud failure\")\n}\n\nfunc TestQuiet(t *testing.T) { t.Fatal(\"quiet failure\") }\n");
    let repo = Repo::new(&[
        (m, &mod_text),
        ("a/a.go", "package a\n"),
        (
            "a/a_test.go",
            &format!("package a\n\nimport \"testing\"\n\n{body}"),
        ),
    ]);
    assert_code(&run(&env, &["certify", "--repo", &repo.path_str()]), 1);
    let id = repo.records()[0]["id"].as_str().unwrap().to_string();
    let o = run(&env, &["status", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let out = text(&o).0;
    let at = out
        .find("last red: on local: ")
        .unwrap_or_else(|| panic!("{out}"));
    let red: Vec<&str> = out[at..].lines().collect();
    assert_eq!(red[1], "  failing (2):", "{out}");
    assert_eq!(red[4], "  output of failing tests:", "{out}");
    // The first failing test, its last five lines, the rest said dropped.
    assert_eq!(
        red[5], "    example.com/m/a.TestLoud (8 earlier lines dropped):",
        "{out}"
    );
    assert!(red[6].ends_with("loud line 8"), "{out}");
    assert!(red[10].ends_with("loud failure"), "{out}");
    assert_eq!(
        red[11],
        format!("  (saphan records show {id} shows all of it)"),
        "{out}"
    );
    assert!(!out.contains("quiet failure"), "{out}");

    let o = run(&env, &["--json", "status", "--repo", &repo.path_str()]);
    let v = json(&o);
    let first = &v["last_red"]["first_output"];
    assert_eq!(first["test"], "example.com/m/a.TestLoud", "{v:#}");
    assert_eq!(first["lines"].as_array().unwrap().len(), 5, "{v:#}");
    assert_eq!(first["dropped"], 8, "{v:#}");
}

#[test]
fn status_shows_the_last_lines_of_an_exitcode_reds_log() {
    let env = Env::new();
    env.write_config(EXIT_SUITE);
    let repo = exit_repo();
    repo.commit(&[("code", "3\n")], "red");
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 1);
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let out = text(&o).0;
    assert!(
        out.contains("  failing: unavailable (the report kind names no tests)\n  last lines of the suite's log:\n"),
        "{out}"
    );
    assert!(out.contains("    exiting 3\n"), "{out}");
    let v = json(&env.run(&["--json", "status", "--repo", &repo.path_str()]));
    assert!(
        v["last_red"]["log_tail"]
            .as_str()
            .unwrap()
            .contains("exiting 3"),
        "{v:#}"
    );
}
