//! Record fields that say which program ran and why a suite failed
//! (issue 12.5, 12.6): `program_path`, `program_version`, `suite_log`,
//! `suite_log_sha256`, and the log's tail on red.

use crate::common;

use crate::common::{Env, Repo, assert_code, json, skip_unless, text};

const GO_TEST: &str = "package demo\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {}\n";

/// Two records of the same SHA from two different `go` binaries (the real
/// one, and a wrapper first on PATH that reports another version) are
/// distinguishable by `program_path` and `program_version`.
#[test]
fn two_go_binaries_give_distinguishable_records_of_one_sha() {
    if common::gomod::no_go()
        || skip_unless(
            common::gomod::default_go() == "go",
            "default-go runs /usr/local/go/bin/go here, so a wrapper on PATH is not what runs",
        )
    {
        return;
    }
    let real = saphan::exec::which("go").expect("go on PATH");
    let env = Env::new();
    let repo = Repo::new(&[
        ("go.mod", "module example.com/demo\n\ngo 1.19\n"),
        ("demo.go", "package demo\n"),
        ("demo_test.go", GO_TEST),
    ]);
    let wrap = tempfile::tempdir().unwrap();
    let wrapper = wrap.path().join("go");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = version ]; then echo 'go version go1.99.9 saphan-wrapper/amd64'; exit 0; fi\nexec '{}' \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let certify = |path: &str| {
        let o = env
            .cmd()
            .env("PATH", path)
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .args(["certify", "--repo", &repo.path_str(), "--json"])
            .output()
            .unwrap();
        assert_code(&o, 0);
        json(&o)
    };
    let a = certify(&path);
    let b = certify(&format!("{}:{path}", wrap.path().display()));
    assert_eq!(a["sha"], b["sha"]);
    assert_eq!(
        a["suite_argv"], b["suite_argv"],
        "argv alone cannot tell them apart"
    );
    let real_canon = std::fs::canonicalize(&real).unwrap();
    assert_eq!(a["program_path"], real_canon.display().to_string());
    assert!(
        a["program_version"]
            .as_str()
            .unwrap()
            .starts_with("go version go1."),
        "{a}"
    );
    assert_eq!(
        b["program_path"],
        wrapper.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(
        b["program_version"],
        "go version go1.99.9 saphan-wrapper/amd64"
    );
    assert_ne!(a["program_path"], b["program_path"]);
    assert_ne!(a["program_version"], b["program_version"]);
}

/// A red exitcode suite that prints its failures on stdout (as pytest
/// does): the failures are in the kept log, whose path and sha256 the record
/// carries, and the human output shows the log's tail.
#[test]
fn a_red_suite_printing_failures_on_stdout_shows_them() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\necho 'collected 3 items'\necho 'FAILED tests/test_x.py::test_parse - AssertionError: 2 != 3'\nexit 1\n",
    )]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red");
    let log = r["suite_log"].as_str().expect("a suite_log path");
    assert!(
        log.ends_with(&format!("saphan/logs/{}.log", r["id"].as_str().unwrap())),
        "{log}"
    );
    let bytes = std::fs::read(log).unwrap();
    assert_eq!(r["suite_log_sha256"], saphan::fsutil::sha256_hex(&bytes));
    assert!(String::from_utf8_lossy(&bytes).contains("FAILED tests/test_x.py::test_parse"));
    // The program of a relative suite is the tree's own file, resolved in
    // the scratch tree; no catalog row maps it, so no version.
    assert!(
        r["program_path"].as_str().unwrap().ends_with("/suite.sh"),
        "{r}"
    );
    assert_eq!(r["program_version"], serde_json::Value::Null);

    let o = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&o, 1);
    let (_, err) = text(&o);
    assert!(
        err.contains("FAILED tests/test_x.py::test_parse - AssertionError"),
        "{err}"
    );
    assert!(err.contains("suite's log"), "{err}");
}
