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

// ---------------------------------------------------------------------------
// The record's schema, per verb, pinned against `record::FORMAT`.
//
// Changing a record field — a key added, removed, renamed, or its JSON type
// changed — changes what every reader of `attempts.jsonl` sees. Such a
// change must bump `saphan::record::FORMAT` and update the tables below in
// the same commit; these tests fail when either moves alone.

use serde_json::Value;

/// The record format the tables below describe.
const SCHEMA_FORMAT: u32 = 3;

/// A key and its JSON types (`|`-separated: `string`, `number`, `bool`,
/// `array`, `object`, `null`).
type Field = (&'static str, &'static str);

/// Keys every record carries.
const COMMON: &[Field] = &[
    ("format", "number"),
    ("id", "string"),
    ("verb", "string"),
    ("repo", "string"),
    ("sha", "string"),
    ("machine", "string"),
    ("class", "string"),
    ("started_at", "string"),
    ("finished_at", "string"),
    ("verdict", "string"),
    ("suite_source", "string"),
    ("suite_argv", "array"),
    ("report", "string"),
    ("suite_report_path", "string|null"),
    ("suite_report_files", "array"),
    ("count", "number|string"),
    ("named_tests", "array|string"),
    ("suite_exit_code", "number|null"),
    ("budget", "string"),
    ("budget_seconds", "number"),
    ("budget_source", "string"),
    ("suite_seconds", "number"),
    ("provisions", "array"),
    ("notes", "array"),
    ("program_path", "string|null"),
    ("program_version", "string|null"),
];

/// Keys any record may carry, when they apply.
const ANY_OPTIONAL: &[Field] = &[
    ("failure", "string"),
    ("count_derived", "bool"),
    ("suite_log", "string"),
    ("suite_log_sha256", "string"),
    ("verified_pointer", "string"),
    ("submodules", "array"),
    ("containment", "string"),
    ("seal", "object"),
];

/// certify, local or dispatched.
const CERTIFY: &[Field] = &[("trunk", "string|null")];

/// A dispatched certify.
const DISPATCHED: &[Field] = &[
    ("machine_program", "object"),
    ("bundle_bytes", "number"),
    ("phases", "object"),
    ("remote_tree", "string"),
    ("dispatch_machines", "array"),
];

/// A dispatched certify that Ctrl-C stopped, a go-test-json one (its
/// per-package seconds), a re-run of an infrastructure failure.
const DISPATCHED_OPTIONAL: &[Field] = &[
    ("interrupted", "bool"),
    ("package_seconds", "object"),
    ("retry_of", "string"),
    // A node borrowed from a Slurm pool: the allocation's job id.
    ("slurm_job", "number"),
];

/// `certify --split` (format 2).
const SPLIT: &[Field] = &[("shard", "object")];

/// Container class.
const CONTAINER: &[Field] = &[
    ("container", "string"),
    ("docker_api_version", "string"),
    ("docker_socket", "string"),
    ("image_id", "string"),
    ("image_pin", "string"),
    ("image_pin_kind", "string"),
    ("network", "bool"),
    ("engine_path", "string|null"),
    ("engine_version", "string|null"),
];

/// verify-union.
const UNION: &[Field] = &[
    ("base", "string"),
    ("streams", "array"),
    ("union", "string"),
];

/// verify-stream.
const STREAM: &[Field] = &[
    ("step_budget", "string"),
    ("step_budget_seconds", "number"),
    ("step_budget_source", "string"),
    ("steps", "array"),
];

/// verify-stream in a stream's worktree.
const STREAM_OPTIONAL: &[Field] = &[("stream", "string")];

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `rec` carries every key of `required` and no key outside `required` and
/// `optional`, each of its declared JSON type.
#[track_caller]
fn assert_schema(what: &str, rec: &Value, required: &[&[Field]], optional: &[&[Field]]) {
    assert_eq!(
        saphan::record::FORMAT,
        SCHEMA_FORMAT,
        "record::FORMAT changed: update the pinned record schema in tests/it/record_fields.rs to the new format"
    );
    assert_eq!(rec["format"], SCHEMA_FORMAT, "{what}: {rec}");
    let obj = rec
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {rec}"));
    let bump = "a record field changed without a record::FORMAT bump (or the pinned schema in tests/it/record_fields.rs is stale)";
    for (k, types) in required.iter().flat_map(|t| t.iter()) {
        let v = obj
            .get(*k)
            .unwrap_or_else(|| panic!("{bump}: {what} lacks `{k}`: {rec}"));
        assert!(
            types.split('|').any(|t| t == json_type(v)),
            "{bump}: {what}'s `{k}` is {} ({v}), pinned as {types}",
            json_type(v)
        );
    }
    for (k, v) in obj {
        let Some((_, types)) = required
            .iter()
            .chain(optional.iter())
            .flat_map(|t| t.iter())
            .find(|(name, _)| name == k)
        else {
            panic!("{bump}: {what} carries `{k}` ({v}), which the pinned schema does not name");
        };
        assert!(
            types.split('|').any(|t| t == json_type(v)),
            "{bump}: {what}'s `{k}` is {} ({v}), pinned as {types}",
            json_type(v)
        );
    }
}

/// The only record in `repo`.
fn only_record(repo: &Repo) -> Value {
    let mut all = repo.records();
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

/// Every field of the record type, populated, serializes to exactly the
/// pinned keys and types. A new field fails to compile here (the literal
/// names every field): pin it in the tables above and bump record::FORMAT.
#[test]
fn every_record_field_is_pinned() {
    use saphan::record::*;
    let rec = Record {
        format: FORMAT,
        id: "20261201T000000Z-00000000".into(),
        verb: "certify".into(),
        repo: "/r".into(),
        sha: "0".repeat(40),
        machine: "m0".into(),
        class: "container".into(),
        started_at: "2026-12-01T00:00:00Z".into(),
        finished_at: "2026-12-01T00:00:01Z".into(),
        verdict: saphan::report::Verdict::MeasurementFailed,
        failure: Some(saphan::report::FailureKind::Interrupted),
        suite_source: "default-go".into(),
        suite_argv: vec!["go".into()],
        report: saphan::report::ReportKind::JunitXml,
        suite_report_path: Some("r.xml".into()),
        suite_report_files: vec!["r.xml".into()],
        count: Avail::Value(1),
        count_derived: true,
        named_tests: Avail::Value(vec!["T".into()]),
        suite_exit_code: Some(1),
        budget: "10m".into(),
        budget_seconds: 600.0,
        budget_source: "default".into(),
        suite_seconds: 1.5,
        provisions: vec![saphan::provision::Placed {
            dest: "d".into(),
            sha256: "0".repeat(64),
        }],
        notes: vec!["interrupted: x".into()],
        program_path: Some("/usr/bin/go".into()),
        program_version: Some(saphan::record::Avail::Value("go version".into())),
        suite_log: Some("/l.log".into()),
        suite_log_sha256: Some("0".repeat(64)),
        verified_pointer: Some("moved".into()),
        base: Some("1".repeat(40)),
        bundle_bytes: Some(10),
        container: Some(ContainerRun {
            container: "saphan-suite-x".into(),
            docker_api_version: "1.47".into(),
            docker_socket: "/var/run/docker.sock".into(),
            image_id: "sha256:0".into(),
            image_pin: "sha256:0".into(),
            image_pin_kind: "image-id".into(),
            network: false,
            engine_path: Some("/usr/bin/docker".into()),
            engine_version: Some("Docker version 26.1.5".into()),
        }),
        dispatch_machines: Some(vec!["m0".into()]),
        interrupted: true,
        machine_program: Some(MachineProgram {
            capability: None,
            path: "/usr/bin/go".into(),
            version: None,
        }),
        phases: Some([(Phase::Connect, 0.1), (Phase::Run, 1.0)].into()),
        remote_tree: Some("/w/saphan/scratch/k/tree".into()),
        containment: Some(Containment::Cgroup),
        seal: Some(saphan::seal::Seal::sealed("/usr/bin/bwrap")),
        step_budget: Some("10m".into()),
        step_budget_seconds: Some(600.0),
        step_budget_source: Some("default".into()),
        steps: Some(vec![Step {
            name: "test".into(),
            argv: vec!["go".into()],
            outcome: StepOutcome::Pass,
            exit_code: Some(0),
            seconds: 1.0,
            files: vec![],
            count: Some(1),
            failing: vec![],
            detail: String::new(),
        }]),
        stream: Some("s1".into()),
        streams: Some(vec![StreamHead {
            name: "s1".into(),
            sha: "2".repeat(40),
        }]),
        submodules: vec![SubmoduleAt {
            commit: "3".repeat(40),
            path: "sub".into(),
        }],
        trunk: Some(None),
        union: Some("4".repeat(40)),
        shard: Some(Shard {
            index: 0,
            count: 2,
            packages: vec!["example.com/m/a".into()],
        }),
        package_seconds: Some([("example.com/m/a".to_string(), 2.5)].into()),
        retry_of: Some("20261201T000000Z-00000001".into()),
        slurm_job: Some(17),
    };
    let v = serde_json::to_value(&rec).unwrap();
    let all: Vec<&[Field]> = vec![
        COMMON,
        ANY_OPTIONAL,
        CERTIFY,
        DISPATCHED,
        DISPATCHED_OPTIONAL,
        CONTAINER,
        UNION,
        STREAM,
        STREAM_OPTIONAL,
        SPLIT,
    ];
    assert_schema("a record with every field", &v, &all, &[]);
    assert_eq!(
        v["shard"],
        serde_json::json!({"index": 0, "count": 2, "packages": ["example.com/m/a"]})
    );
    assert_eq!(
        v["package_seconds"],
        serde_json::json!({"example.com/m/a": 2.5})
    );
    // Nested shapes.
    assert_eq!(
        v["machine_program"],
        serde_json::json!({"capability": null, "path": "/usr/bin/go", "version": null})
    );
    assert_eq!(v["phases"], serde_json::json!({"connect": 0.1, "run": 1.0}));
    assert_eq!(
        v["submodules"],
        serde_json::json!([{"commit": "3".repeat(40), "path": "sub"}])
    );
    assert_eq!(
        v["streams"],
        serde_json::json!([{"name": "s1", "sha": "2".repeat(40)}])
    );
    assert_eq!(
        v["steps"],
        serde_json::json!([{"name": "test", "argv": ["go"], "outcome": "pass", "exit_code": 0, "seconds": 1.0, "count": 1}])
    );
    assert_eq!(v["trunk"], Value::Null);
    // It reads back as it was written.
    let back: Record = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
}

/// A record as format 1 wrote it before the fields were typed (a local
/// certify with `"trunk": null`, a union, a dispatched run without trunk)
/// reads back to the same JSON; a host record has no container fields.
#[test]
fn records_written_before_the_typed_fields_read_back_unchanged() {
    let base = serde_json::json!({
        "format": 1, "id": "20261129T153000Z-1a2b3c4d", "verb": "certify", "repo": "/r",
        "sha": "a".repeat(40), "machine": "local", "class": "host",
        "started_at": "2026-11-29T15:30:00Z", "finished_at": "2026-11-29T15:30:01Z",
        "verdict": "measurement-failed", "failure": "report-no-match",
        "suite_source": "config:verify.full", "suite_argv": ["./t"], "report": "junit-xml",
        "suite_report_path": "r/*.xml", "suite_report_files": [], "count": "unavailable",
        "named_tests": "unavailable", "suite_exit_code": 0, "budget": "10m",
        "budget_seconds": 600.0, "budget_source": "default", "suite_seconds": 0.1,
        "provisions": [], "notes": ["report-no-match: …"], "program_path": null,
        "program_version": null,
    });
    let with = |extra: Value| {
        let mut v = base.clone();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    for old in [
        with(serde_json::json!({"trunk": null})),
        with(
            serde_json::json!({"verb": "verify-union", "base": "b".repeat(40),
            "streams": [{"name": "s1", "sha": "c".repeat(40)}], "union": "d".repeat(40),
            "verified_pointer": "unchanged: verify-union is advisory and never moves the pointer"}),
        ),
        with(
            serde_json::json!({"machine": "m0", "bundle_bytes": 0, "dispatch_machines": ["m0"],
            "machine_program": {"capability": "go", "path": "/usr/bin/go", "version": "go1"},
            "phases": {"collect": 0.0, "connect": 0.1, "materialize": 0.2, "run": 0.3, "ship": 0.4},
            "remote_tree": "/w/t", "interrupted": true,
            "submodules": [{"commit": "e".repeat(40), "path": "sub"}]}),
        ),
    ] {
        let r: saphan::record::Record = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(r.failure, Some(saphan::report::FailureKind::ReportNoMatch));
        assert!(r.container.is_none());
        assert_eq!(serde_json::to_value(&r).unwrap(), old);
    }
}

#[test]
fn a_local_certify_record_carries_the_certify_keys() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let r = only_record(&repo);
    assert_schema(
        "a local certify record",
        &r,
        &[COMMON, CERTIFY],
        &[ANY_OPTIONAL],
    );
    assert_eq!(r["trunk"], "refs/heads/main", "{r}");
}

/// Local and dispatched certify records carry the same `trunk` key: null
/// when no trunk is known (the dispatched record used to leave it out).
#[test]
fn a_dispatched_certify_record_carries_the_dispatch_keys_and_a_null_trunk() {
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-schema-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        format!(
            "[machine.m0]\ntransport = \"ssh\"\nworkhome = \"{}\"\n",
            work.path().join("m0").display()
        ),
    )
    .unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "m0"]), 0);
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    // A detached main worktree and no origin: no trunk is known.
    common::git(repo.path(), &["checkout", "-q", "--detach"]);
    let local = env.run(&["certify", "--repo", &repo.path_str()]);
    assert_code(&local, 0);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "m0"]);
    assert_code(&o, 0);
    let all = repo.records();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_schema(
        "a local certify record",
        &all[0],
        &[COMMON, CERTIFY],
        &[ANY_OPTIONAL],
    );
    assert_schema(
        "a dispatched certify record",
        &all[1],
        &[COMMON, CERTIFY, DISPATCHED],
        &[ANY_OPTIONAL, DISPATCHED_OPTIONAL],
    );
    assert_eq!(all[0]["trunk"], Value::Null, "{}", all[0]);
    assert_eq!(all[1]["trunk"], Value::Null, "{}", all[1]);
    let phases: Vec<&str> = all[1]["phases"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for p in &phases {
        assert!(
            ["connect", "ship", "materialize", "run", "collect"].contains(p),
            "{phases:?}"
        );
    }
    assert_eq!(phases.len(), 5, "{phases:?}");
}

#[test]
fn a_container_certify_record_carries_the_container_keys() {
    use common::suite_images;
    if let Err(why) = suite_images::engine_up() {
        skip_unless(false, &why);
        return;
    }
    if let Some(why) = suite_images::missing(false) {
        skip_unless(false, &why);
        return;
    }
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.local]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "local"]), 0);
    let catalog = suite_images::pinned_catalog(env.home());
    let with_catalog = |args: &[&str]| {
        env.cmd()
            .args(["--catalog", catalog.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap()
    };
    let probe = suite_images::probe_args("local");
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    assert_code(&with_catalog(&probe), 0);
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    let o = with_catalog(&[
        "certify",
        "--class",
        "container",
        "--image",
        suite_images::shell_image(),
        "--repo",
        &repo.path_str(),
    ]);
    assert_code(&o, 0);
    let r = only_record(&repo);
    assert_schema(
        "a container certify record",
        &r,
        &[COMMON, CERTIFY, CONTAINER],
        &[ANY_OPTIONAL],
    );
    // Issue 21.6: the image's program, not Docker's (on main 7d6d184 the
    // host's `sh` was resolved here and no engine field existed); the
    // engine is named under the container fields, from the docker-oci row.
    assert_eq!(r["program_path"], "sh", "{r}");
    assert_eq!(r["program_version"], "unavailable", "{r}");
    assert_eq!(r["engine_path"], "/usr/bin/docker", "{r}");
    assert!(
        r["engine_version"]
            .as_str()
            .is_some_and(|v| v.to_lowercase().contains("docker")),
        "{r}"
    );
}

#[test]
fn a_verify_union_record_carries_the_union_keys() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = [\"sh\", \"-c\", \"true\"]\nreport = \"exitcode\"\n");
    let repo = Repo::new(&[("README", "x\n")]);
    for s in ["s1", "s2"] {
        common::git(repo.path(), &["checkout", "-q", "-b", s, "main"]);
        repo.commit(&[(&format!("{s}.txt"), "x\n")], s);
    }
    common::git(repo.path(), &["checkout", "-q", "main"]);
    let o = env.run(&[
        "verify-union",
        "--repo",
        &repo.path_str(),
        "--base",
        "main",
        "--stream",
        "s1",
        "s2",
    ]);
    assert_code(&o, 0);
    assert_schema(
        "a verify-union record",
        &only_record(&repo),
        &[COMMON, UNION],
        &[ANY_OPTIONAL],
    );
}

#[test]
fn a_verify_stream_record_carries_the_stream_keys() {
    if common::gomod::no_go() {
        return;
    }
    let env = Env::new();
    let (gm, gc) = common::gomod::go_mod();
    let mut files: Vec<(String, String)> = vec![(gm.to_string(), gc)];
    files.extend(common::gomod::package("a", &[], 1));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let mut c = env.cmd();
    common::gomod::go_env(&mut c);
    let o = c
        .arg("verify-stream")
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_schema(
        "a verify-stream record",
        &only_record(&repo),
        &[COMMON, STREAM],
        &[ANY_OPTIONAL, STREAM_OPTIONAL],
    );
}
