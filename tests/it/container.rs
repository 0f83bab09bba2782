//! Container-class certify against the real Docker engine on
//! /var/run/docker.sock (skipped, with the reason printed, where none
//! answers): the suite runs in a pinned image built here without a registry
//! (tests/common/suite_images.rs), the tree bind-mounted. After every test no
//! container carrying that test's repository label is left.

use crate::common;

use crate::common::suite_images::{self, engine_up, git_image, go_image, labelled, shell_image};
use crate::common::{
    Env, Repo, assert_code, assert_only_main_worktree, assert_refused, json, text,
};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The declaration most tests here run: `./suite.sh` in the tree, judged by
/// its exit status.
const EXITCODE_SUITE: &str = "[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n";

/// A home whose machine `local` (this one) has a fresh docker-oci row
/// measured with a catalog pinned to the real probe image.
struct Here {
    env: Env,
    catalog: PathBuf,
}

impl Here {
    /// `None` (after printing SKIPPED) when the engine or busybox is missing.
    fn new(go: bool) -> Option<Here> {
        Here::setup(go, true)
    }

    fn setup(go: bool, probe: bool) -> Option<Here> {
        if !prerequisites(go) {
            return None;
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
        let here = Here { env, catalog };
        if probe {
            let o = here.probe("local");
            assert_code(&o, 0);
        }
        Some(here)
    }

    /// Probe docker-oci on `machine` with the pinned catalog.
    fn probe(&self, machine: &str) -> Output {
        let args = suite_images::probe_args(machine);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.env.cmd();
        c.args(["--catalog", self.catalog.to_str().unwrap()])
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `certify --class container --image IMAGE --json` of `repo` plus `extra`.
    fn certify(&self, repo: &Repo, image: &str, extra: &[&str]) -> Output {
        let mut args = vec![
            "certify",
            "--class",
            "container",
            "--image",
            image,
            "--json",
            "--repo",
        ];
        let p = repo.path_str();
        args.push(&p);
        args.extend(extra);
        self.run(&args)
    }
}

/// The repository label saphan puts on the containers of `repo`.
fn repo_label(repo: &Repo) -> String {
    repo.path().canonicalize().unwrap().display().to_string()
}

/// No container of this test's repository is left, in any state.
#[track_caller]
fn assert_no_container(repo: &Repo) {
    let left = labelled("saphan.repo", &repo_label(repo));
    assert!(left.is_empty(), "containers left behind: {left}");
}

fn go_module(test_body: &str) -> Vec<(&'static str, String)> {
    vec![
        ("go.mod", "module example.com/m\n\ngo 1.19\n".to_string()),
        (
            "m.go",
            "package m\n\nfunc Add(a, b int) int { return a + b }\n".to_string(),
        ),
        (
            "m_test.go",
            format!(
                "package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {{\n\tif Add(1, 2) != 3 {{\n\t\tt.Fatal(\"bad\")\n\t}}\n}}\n\n{test_body}"
            ),
        ),
    ]
}

fn files<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(p, c)| (*p, c.as_str())).collect()
}

/// The engine answers and the suite images (`go`: the Go one too) are
/// built; otherwise the test prints `SKIPPED: <why>` and returns false.
fn prerequisites(go: bool) -> bool {
    if let Err(why) = engine_up() {
        common::skip_unless(false, &why);
        return false;
    }
    if let Some(why) = suite_images::missing(go) {
        common::skip_unless(false, &why);
        return false;
    }
    true
}
#[test]
fn go_suite_green_with_its_count_then_red_naming_the_failing_test() {
    let Some(here) = Here::new(true) else {
        return;
    };
    let image = go_image();
    let m = go_module(
        "func TestZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n",
    );
    let repo = Repo::new(&files(&m));
    // default-go: `go` is looked up on the image's PATH, not this host's.
    let o = here.certify(&repo, image, &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["class"], "container");
    assert_eq!(r["machine"], "local");
    assert_eq!(r["suite_source"], "default-go");
    assert_eq!(r["suite_argv"][0], "go");
    assert_eq!(r["report"], "go-test-json");
    assert_eq!(r["count"], 2, "{r}");
    assert_eq!(r["named_tests"], serde_json::json!([]));
    assert_eq!(r["image_pin"], image);
    assert_eq!(r["image_pin_kind"], "image-id");
    assert_eq!(r["image_id"], image);
    assert_eq!(r["network"], false);
    let api = r["docker_api_version"].as_str().unwrap();
    assert!(api.starts_with("1."), "{r}");
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    assert_eq!(repo.records().len(), 1);
    assert_eq!(repo.records()[0]["id"], r["id"]);
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);

    let m = go_module("func TestBroken(t *testing.T) {\n\tt.Fatal(\"broken on purpose\")\n}\n");
    let sha = repo.commit(&files(&m), "break");
    let o = here.certify(&repo, image, &[]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(r["sha"], sha);
    assert_eq!(r["count"], 2);
    assert_eq!(
        r["named_tests"],
        serde_json::json!(["example.com/m.TestBroken"])
    );
    assert_eq!(r["suite_exit_code"], 1);
    assert_ne!(repo.verified().as_deref(), Some(sha.as_str()));
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

#[test]
fn junit_report_is_read_from_the_mounted_tree() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(
        "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"out/*.xml\"\n",
    );
    let script = "#!/bin/sh\nmkdir -p out\ncat > out/r.xml <<'X'\n<testsuite name=\"s\" tests=\"3\" failures=\"1\"><testcase name=\"a\"/><testcase name=\"b\"/><testcase classname=\"k\" name=\"c\"><failure message=\"no\"/></testcase></testsuite>\nX\nexit 1\n";
    let repo = Repo::new(&[("suite.sh", script)]);
    let o = here.certify(&repo, shell_image(), &[]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(r["count"], 3);
    assert_eq!(r["suite_report_files"], serde_json::json!(["out/r.xml"]));
    assert_eq!(r["named_tests"].as_array().unwrap().len(), 1, "{r}");
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

#[test]
fn exitcode_suite_runs_without_network_as_the_trees_owner() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    // Network off: only the loopback interface; the tree is the working
    // directory, writable by the user the suite runs as.
    let uid = nix::unistd::getuid().to_string();
    let script = format!(
        "#!/bin/sh\n[ \"$(ls /sys/class/net)\" = lo ] || {{ echo \"net: $(ls /sys/class/net)\" >&2; exit 7; }}\n[ \"$(id -u)\" = {uid} ] || exit 8\ntouch written || exit 9\n[ -f suite.sh ] || exit 10\necho fine\n"
    );
    let repo = Repo::new(&[("suite.sh", &script)]);
    let o = here.certify(&repo, shell_image(), &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green", "{r}\n{}", text(&o).1);
    assert_eq!(r["suite_exit_code"], 0);
    assert_no_container(&repo);

    let sha = repo.commit(&[("suite.sh", "#!/bin/sh\necho boom >&2\nexit 5\n")], "red");
    let o = here.certify(&repo, shell_image(), &[]);
    assert_code(&o, 1);
    let r = json(&o);
    assert_eq!(r["verdict"], "red");
    assert_eq!(r["sha"], sha);
    assert_eq!(r["suite_exit_code"], 5);
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);

    // A stdout of several MiB is streamed from the engine's log to the
    // attempt's file in chunks, and arrives whole: the kept log holds it
    // byte for byte (whole up to about 7 MiB, docs/certify.md).
    let big = 3 * 1024 * 1024 + 17;
    repo.commit(
        &[(
            "suite.sh",
            &format!(
                "#!/bin/sh
head -c {big} /dev/zero | tr '\\0' x\necho\necho end-of-stdout\n"
            ),
        )],
        "loud",
    );
    let o = here.certify(&repo, shell_image(), &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green", "{r}");
    let log = std::fs::read(r["suite_log"].as_str().unwrap()).unwrap();
    let want = [vec![b'x'; big], b"\nend-of-stdout\n".to_vec()].concat();
    assert!(
        memchr::memmem::find(&log, &want).is_some(),
        "the kept log ({} bytes) does not hold the suite's {} bytes of stdout whole",
        log.len(),
        want.len()
    );
    assert_no_container(&repo);
}

#[test]
fn timeout_kills_and_removes_the_container() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 300\n")]);
    let t0 = Instant::now();
    let o = here.certify(&repo, shell_image(), &["--timeout", "3s"]);
    assert_code(&o, 3);
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?}",
        t0.elapsed()
    );
    let r = json(&o);
    assert_eq!(r["verdict"], "measurement-failed");
    assert_eq!(r["failure"], "timeout");
    assert_eq!(r["suite_exit_code"], serde_json::Value::Null);
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

#[test]
fn ctrl_c_mid_run_records_interrupted_and_removes_the_container() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 300\n")]);
    let label = repo_label(&repo);
    let p = repo.path_str();
    let child = here
        .cmd(&[
            "certify",
            "--class",
            "container",
            "--image",
            shell_image(),
            "--json",
            "--repo",
            &p,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the suite's container runs (each `docker ps` is a real
    // round trip to the engine; bounded).
    let t0 = Instant::now();
    loop {
        let o = Command::new("docker")
            .args([
                "ps",
                "-q",
                "--filter",
                &format!("label=saphan.repo={label}"),
                "--filter",
                "status=running",
            ])
            .output()
            .unwrap();
        if !text(&o).0.trim().is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the suite container never ran"
        );
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 3);
    let r = json(&o);
    assert_eq!(r["failure"], "interrupted", "{r}");
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

#[test]
fn absent_image_and_tag_are_refused_with_nothing_run() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let missing = format!("sha256:{}", "ab".repeat(32));
    let o = here.certify(&repo, &missing, &[]);
    let err = assert_refused(&o, "container-image-absent");
    assert!(err.contains(&missing), "{err}");
    assert!(err.contains("nothing was pulled or run"), "{err}");
    assert!(
        err.lines()
            .nth(1)
            .unwrap()
            .trim_start()
            .starts_with("docker load"),
        "{err}"
    );
    // A registry pin that is not there names the pull of that exact digest.
    let reg = format!("example.invalid/suite@sha256:{}", "cd".repeat(32));
    let err = assert_refused(&here.certify(&repo, &reg, &[]), "container-image-absent");
    assert!(err.contains(&format!("docker pull {reg}")), "{err}");
    // A tag, even of an image that is here, is refused by name.
    let err = assert_refused(
        &here.certify(&repo, "saphan-test-shell:latest", &[]),
        "container-image-tag",
    );
    assert!(err.contains("`saphan-test-shell:latest`"), "{err}");
    let err = assert_refused(
        &here.run(&[
            "certify",
            "--class",
            "container",
            "--repo",
            &repo.path_str(),
        ]),
        "container-image-missing",
    );
    assert!(err.contains("--image"), "{err}");
    assert!(repo.records().is_empty());
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

#[test]
fn a_machine_without_a_fresh_docker_oci_row_is_refused() {
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let err = assert_refused(
        &here.certify(&repo, shell_image(), &[]),
        "container-docker-capability-absent",
    );
    assert!(err.contains("machine `local`"), "{err}");
    assert!(err.contains("it was never probed"), "{err}");
    assert!(repo.records().is_empty());
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

/// The library's container run over SSH to a lab host: the engine is reached
/// through a direct-streamlocal channel (lab hosts share this machine's
/// docker.sock and filesystem, so the image and the tree are "there"). Then
/// the host is cut off mid-run: a failed measurement, never an exit code,
/// within the budget plus the cleanup budget.
#[test]
fn over_ssh_through_the_forwarded_socket_and_a_partition_mid_run() {
    use saphan::docker::container::{self, Ended, Target};
    use saphan::exec::Termination;
    use saphan::transport::{SshOptions, Transport};
    if !prerequisites(false) {
        return;
    }
    // m3's /root is empty: its ssh sessions do not run this machine's rc files.
    let Some(lab) = common::lab::Lab::start(4) else {
        return;
    };
    let image = shell_image();
    let tree = tempfile::Builder::new()
        .prefix("saphan-ctree-")
        .tempdir()
        .unwrap();
    let tree_s = tree.path().to_str().unwrap().to_string();
    std::fs::write(
        tree.path().join("suite.sh"),
        "#!/bin/sh\necho out; echo err >&2; echo made > made.txt\nexit 3\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            tree.path().join("suite.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let attempt = format!("t{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let interrupt = saphan::cancel::Token::never();
    rt.block_on(async {
        let t = Transport::connect_alias(&lab.ssh_config_path(), "m3", &SshOptions::default())
            .await
            .expect("connect to lab host m3");
        let socket = "/var/run/docker.sock";
        let ssh = format!("ssh -F {} m3", lab.ssh_config_path().display());

        // The image pin, checked over the forwarded socket; an absent one
        // names the save | ssh load route.
        let missing = container::parse_image(&format!("sha256:{}", "ef".repeat(32))).unwrap();
        let e = container::resolve_image(
            &t,
            "m3",
            socket,
            &missing,
            container::load_route(&missing, Some(&ssh)),
        )
        .await
        .unwrap_err();
        let line = e.to_string();
        assert!(
            line.contains(&format!(
                "docker save {} | {ssh} docker load",
                missing.reference()
            )),
            "{line}"
        );
        let pin = container::parse_image(image).unwrap();
        let resolved = container::resolve_image(&t, "m3", socket, &pin, String::new())
            .await
            .unwrap();
        assert_eq!(resolved.image_id, image);

        let target = |name: &str| Target {
            transport: t.clone(),
            socket: socket.into(),
            image: resolved.clone(),
            network: false,
            user: None,
            labels: [(container::LABEL_ATTEMPT.to_string(), attempt.clone())].into(),
            name: name.into(),
            caches: Vec::new(),
            trust: saphan::seal::Trust::Other,
            scratch: container::go_scratch(),
        };
        let argv = vec!["./suite.sh".to_string()];
        let out = tree.path().join("stdout");
        let run = container::Run {
            argv: &argv,
            tree: &tree_s,
            env: &[],
            read_only: &[],
            budget: Duration::from_secs(120),
            stdout: &out,
        };
        let o = container::run(&target(&format!("saphan-t-{attempt}-a")), &run, &interrupt).await;
        match o.ended {
            Ended::Finished {
                status: Termination::Exited(3),
                stderr,
            } => assert_eq!(String::from_utf8_lossy(&stderr), "err\n"),
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "out\n");
        assert_eq!(
            std::fs::read_to_string(tree.path().join("made.txt")).unwrap(),
            "made\n"
        );
        assert!(labelled(container::LABEL_ATTEMPT, &attempt).is_empty());

        // Cut the host off while the suite runs.
        std::fs::write(tree.path().join("suite.sh"), "#!/bin/sh\nexec sleep 300\n").unwrap();
        let name = format!("saphan-t-{attempt}-b");
        let budget = Duration::from_secs(20);
        let run = container::Run { budget, ..run };
        let tgt = target(&name);
        let t0 = Instant::now();
        let running = container::run(&tgt, &run, &interrupt);
        tokio::pin!(running);
        let cut = async {
            loop {
                let o = Command::new("docker")
                    .args([
                        "ps",
                        "-q",
                        "--filter",
                        &format!("name={name}"),
                        "--filter",
                        "status=running",
                    ])
                    .output()
                    .unwrap();
                if !text(&o).0.trim().is_empty() {
                    break;
                }
                tokio::task::yield_now().await;
            }
            lab.partition("m3");
        };
        let o = tokio::select! {
            o = &mut running => panic!("ended before the partition: {o:?}"),
            () = cut => running.await,
        };
        let took = t0.elapsed();
        lab.heal("m3");
        match &o.ended {
            Ended::ConnectionLost(note) => {
                assert!(note.contains("keep-alive every 1s"), "{note}");
                assert!(note.contains(&format!("docker rm -f {name}")), "{note}");
            }
            other => panic!("a partition must fail the measurement: {other:?}"),
        }
        assert!(
            took < budget + Duration::from_secs(60),
            "took {took:?} for a {budget:?} budget"
        );
        // The engine is this machine's: remove what the cut-off run could not.
        let _ = Command::new("docker").args(["rm", "-f", &name]).output();
        assert!(labelled(container::LABEL_ATTEMPT, &attempt).is_empty());
    });
}

/// `certify --class container --machine m3`: the repository is shipped to
/// the lab host, the container executor runs the suite image through m3's
/// engine (bollard over the forwarded socket) with the shipped tree mounted,
/// the record carries the container fields, and no container stays; a red
/// names its test; the budget leaves nothing behind.
#[test]
fn certify_on_a_lab_host_runs_the_suite_in_its_engine() {
    if !prerequisites(true) {
        return;
    }
    let Some(lab) = common::lab::Lab::start(4) else {
        return;
    };
    let Some(here) = Here::setup(true, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    std::fs::write(
        here.env.home().join("fleet/machines.toml"),
        format!(
            "[machine.m3]\ntransport = \"ssh\"\nworkhome = \"{}\"\n",
            work.path().display()
        ),
    )
    .unwrap();
    assert_code(&here.env.run(&["machine", "measure", "--machine", "m3"]), 0);
    let m = go_module("func TestZero(t *testing.T) {}\n");
    let repo = Repo::new(&files(&m));
    // Not yet probed: refused by the gate, nothing shipped.
    assert_refused(
        &here.certify(&repo, go_image(), &["--machine", "m3"]),
        "container-docker-capability-absent",
    );
    assert_code(&here.probe("m3"), 0);
    // An image m3's engine lacks: the save | ssh load route.
    let missing = format!("sha256:{}", "12".repeat(32));
    let err = assert_refused(
        &here.certify(&repo, &missing, &["--machine", "m3"]),
        "container-image-absent",
    );
    assert!(
        err.contains(&format!("docker save {missing} | ssh -F "))
            && err.contains(" m3 docker load"),
        "{err}"
    );

    let o = here.certify(&repo, go_image(), &["--machine", "m3"]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = &v["records"][0];
    assert_eq!(r["machine"], "m3", "{v}");
    assert_eq!(r["class"], "container");
    assert_eq!(r["verdict"], "green", "{v}");
    assert_eq!(r["count"], 2, "{v}");
    assert_eq!(r["image_id"], go_image());
    // The same container fields as a local run, on the record as appended.
    assert_eq!(r["image_pin"], go_image());
    assert_eq!(r["image_pin_kind"], "image-id");
    assert!(
        r["docker_socket"].as_str().unwrap().ends_with(".sock"),
        "{r}"
    );
    assert!(
        r["container"]
            .as_str()
            .unwrap()
            .starts_with("saphan-suite-"),
        "{r}"
    );
    // Issue 21.6: the image's program, not Docker's; the engine is named
    // under the container fields (on main 7d6d184 program_path was
    // /usr/bin/docker and program_version Docker's).
    assert_eq!(r["program_path"], "go", "{r}");
    assert_eq!(r["program_version"], "unavailable", "{r}");
    assert_eq!(r["engine_path"], "/usr/bin/docker", "{r}");
    assert!(
        r["engine_version"]
            .as_str()
            .is_some_and(|v| v.to_lowercase().contains("docker")),
        "{r}"
    );
    let stored = repo.records().last().cloned().unwrap();
    assert_eq!(stored["image_id"], go_image(), "{stored}");
    assert_eq!(stored["container"], r["container"], "{stored}");
    assert!(r["docker_api_version"].as_str().unwrap().starts_with("1."));
    assert_no_container(&repo);

    let m = go_module("func TestBroken(t *testing.T) {\n\tt.Fatal(\"no\")\n}\n");
    repo.commit(&files(&m), "break");
    let o = here.certify(&repo, go_image(), &["--machine", "m3"]);
    assert_code(&o, 1);
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["verdict"], "red", "{r}");
    assert_eq!(
        r["named_tests"],
        serde_json::json!(["example.com/m.TestBroken"])
    );
    assert_no_container(&repo);

    // The budget: the suite image's `sleep` outlives it; the container goes.
    here.env.write_config(EXITCODE_SUITE);
    repo.commit(&[("suite.sh", "#!/bin/sh\nexec sleep 300\n")], "slow");
    let t0 = Instant::now();
    let o = here.certify(
        &repo,
        shell_image(),
        &["--machine", "m3", "--timeout", "3s"],
    );
    assert_code(&o, 3);
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["failure"], "timeout", "{r}");
    assert!(t0.elapsed() < Duration::from_secs(120));
    assert_no_container(&repo);
    let scratch = work.path().join("saphan/scratch");
    if scratch.exists() {
        let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// machines.toml of `here` holding `rows` (`(id, transport, host)`), each
/// workhome under `work`; every row measured and docker-oci probed.
fn fleet_rows(here: &Here, rows: &[(&str, &str, &str)], work: &std::path::Path) {
    let mut s = String::new();
    for (id, transport, host) in rows {
        s += &format!(
            "[machine.{id}]\ntransport = \"{transport}\"\nhost = \"{host}\"\nworkhome = \"{}\"\n\n",
            work.join(id).display()
        );
    }
    std::fs::write(here.env.home().join("fleet/machines.toml"), s).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.0).collect();
    assert_code(
        &here
            .env
            .run(&["machine", "measure", "--machine", &ids.join(",")]),
        0,
    );
    for id in ids {
        assert_code(&here.probe(id), 0);
    }
}

/// Regression (issue 18.3): a `transport = "local"` row failed container
/// class too (`materialize-failed: … is a bare repository`). Now it is a
/// fleet machine like any other: shipped to its workhome's mirror, the
/// suite run in this machine's engine, the container removed.
#[test]
fn a_local_row_is_a_fleet_machine_for_container_class() {
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(&here, &[("here", "local", "here")], work.path());
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\n[ -f suite.sh ] && echo fine\n")]);
    let o = here.certify(&repo, shell_image(), &["--machine", "here"]);
    assert_code(&o, 0);
    let v = json(&o);
    let r = &v["records"][0];
    assert_eq!(r["machine"], "here", "{v}");
    assert_eq!(r["class"], "container", "{v}");
    assert_eq!(r["verdict"], "green", "{v}");
    assert_eq!(r["image_id"], shell_image(), "{v}");
    assert_eq!(v["verified_pointer"], "moved", "{v}");
    assert_no_container(&repo);
    assert_only_main_worktree(&repo);
}

/// Regression (issue 18.4): two machines of one invocation that share one
/// Docker engine (two lab hosts; lab hosts reach this machine's engine)
/// gave their containers one name and one attempt label: the second create
/// got 409 Conflict, and one machine's cleanup removed the other's
/// container. Now names and labels carry the machine: green on both, no
/// container left.
#[test]
fn container_class_on_two_machines_sharing_one_engine_is_green_on_both() {
    if !prerequisites(false) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(
        &here,
        &[
            ("m0", "ssh", "m0"),
            ("m1", "ssh", "m1"),
            ("here", "local", "here"),
        ],
        work.path(),
    );
    here.env.write_config(EXITCODE_SUITE);
    // Long enough that the machines' containers exist at once.
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nsleep 2\necho fine\n")]);
    let o = here.certify(&repo, shell_image(), &["--machine", "m0,m1,here"]);
    let v = json(&o);
    assert_code(&o, 0);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 3, "{v}");
    let mut names = Vec::new();
    for r in recs {
        assert_eq!(r["verdict"], "green", "{v}");
        let name = r["container"].as_str().unwrap().to_string();
        let m = r["machine"].as_str().unwrap();
        assert!(name.ends_with(&format!("-{m}")), "{name} on {m}");
        names.push(name);
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(v["verified_pointer"], "moved", "{v}");
    assert_no_container(&repo);
}

/// Waits for `child` at most `bound`; past it the child is killed and the
/// test fails.
fn output_within(child: std::process::Child, bound: Duration) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("saphan did not end within {bound:?}");
        }
    }
}

/// Until a container of `repo` runs on this machine's engine (each `docker
/// ps` is a round trip to the engine; bounded): its attempt label.
fn running_attempt(repo: &Repo) -> String {
    let label = repo_label(repo);
    let t0 = Instant::now();
    loop {
        let o = Command::new("docker")
            .args([
                "ps",
                "--format",
                "{{.Label \"saphan.attempt\"}}",
                "--filter",
                &format!("label=saphan.repo={label}"),
                "--filter",
                "status=running",
            ])
            .output()
            .unwrap();
        let a = text(&o).0.trim().to_string();
        if !a.is_empty() {
            return a;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the suite container never ran"
        );
    }
}

/// `certify --class container --machine <machines>` of `repo` in the shell
/// image, spawned.
fn spawn_certify(here: &Here, repo: &Repo, machines: &str, extra: &[&str]) -> std::process::Child {
    spawn_certify_in(here, repo, shell_image(), machines, extra)
}

/// `certify --class container --image <image> --machine <machines>` of
/// `repo`, spawned.
fn spawn_certify_in(
    here: &Here,
    repo: &Repo,
    image: &str,
    machines: &str,
    extra: &[&str],
) -> std::process::Child {
    let p = repo.path_str();
    let mut args = vec![
        "certify",
        "--class",
        "container",
        "--image",
        image,
        "--json",
        "--repo",
        &p,
        "--machine",
        machines,
    ];
    args.extend(extra);
    here.cmd(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Issue 19: a container-class run on a machine cut off mid-run is
/// `connection-lost` at the SSH keep-alive limit (the lab: 1 s × 3), not
/// at its budget (10 minutes) plus grace.
#[test]
fn a_partitioned_container_run_is_connection_lost_at_the_keepalive_limit() {
    if !prerequisites(false) {
        return;
    }
    let Some(lab) = common::lab::Lab::start(1) else {
        return;
    };
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(&here, &[("m0", "ssh", "m0")], work.path());
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 900\n")]);
    let child = spawn_certify(&here, &repo, "m0", &["--timeout", "10m"]);
    running_attempt(&repo);
    lab.partition("m0");
    // Keep-alive limit 3 s plus a generous slack; far below 10 minutes.
    let o = output_within(child, Duration::from_secs(90));
    lab.heal("m0");
    assert_code(&o, 3);
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["verdict"], "measurement-failed", "{r}");
    assert_eq!(r["failure"], "connection-lost", "{r}");
    // The engine is this machine's: the cut-off run's container is the
    // next run's to remove; here the test removes it.
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker rm -f $(docker ps -aq --filter label=saphan.repo={})",
            repo_label(&repo)
        ))
        .output();
}

/// Issue 20.4: saphan killed (-9) mid container-class run left its
/// container on the engine for good (the next dispatch killed the suite's
/// processes but never removed the container). Now the next run to that
/// engine removes every container of an attempt that is over (its saphan
/// process is gone), and its record says which.
#[test]
fn the_next_run_removes_the_container_of_a_killed_saphan() {
    if !prerequisites(false) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(&here, &[("m1", "ssh", "m1")], work.path());
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 900\n")]);
    let mut child = spawn_certify(&here, &repo, "m1", &["--timeout", "10m"]);
    let old = running_attempt(&repo);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    repo.commit(&[("suite.sh", "#!/bin/sh\necho fine\n")], "quick");
    let o = output_within(
        spawn_certify(&here, &repo, "m1", &[]),
        Duration::from_secs(300),
    );
    assert_code(&o, 0);
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["verdict"], "green", "{r}");
    assert_eq!(
        labelled("saphan.attempt", &old),
        "",
        "the killed attempt's container is left"
    );
    // The note is this record's unless another test's container run on the
    // shared engine reaped the container first (every run reaps every
    // finished attempt's containers); the container is gone either way.
    let notes = r["notes"].to_string();
    if notes.contains("reaped: container") {
        assert!(
            notes.contains(&format!("reaped: container saphan-suite-{old}-m1"))
                && notes.contains("left by an attempt that is over (its saphan process"),
            "{r}"
        );
    } else {
        eprintln!("the killed attempt's container was reaped by another test's run");
    }
    assert_no_container(&repo);
}

/// Issue 20.8: a container run on a fleet machine keeps the host class's
/// guarantees. With a provision placed, the provisions' exclude file and
/// the GIT_CONFIG_* variables reach the container and git there sees the
/// tree's repository, so a suite that asserts a clean tree sees one (before:
/// the tree's git dir was not in the container, so git there found no
/// repository — and on a machine not sharing this one's file system the
/// exclude file was never mounted, since it was looked for here).
#[test]
fn a_container_run_on_a_fleet_machine_sees_a_clean_tree_with_a_provision() {
    if !prerequisites(false) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(&here, &[("m0", "ssh", "m0")], work.path());
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\n\
         [ -f .provision/contract.yaml ] || { echo 'no provision' >&2; exit 4; }\n\
         [ -n \"$GIT_CONFIG_COUNT\" ] || { echo 'no GIT_CONFIG_COUNT' >&2; exit 5; }\n\
         s=$(git status --porcelain) || { echo 'git status failed' >&2; exit 6; }\n\
         [ -z \"$s\" ] || { echo \"dirty: $s\" >&2; exit 7; }\n\
         echo clean\n",
    )]);
    let source = here.env.home().join("contract.yaml");
    std::fs::write(&source, "openapi: 3.0.0\n").unwrap();
    here.env.write_config(&format!(
        "[verify.full]\nargv = \"./suite.sh\"\nreport = \"exitcode\"\n\n[verify.provision.contract]\nrepo = \"{}\"\nsource = \"{}\"\ndest = \".provision/contract.yaml\"\n",
        repo.path().display(),
        source.display()
    ));
    let o = output_within(
        spawn_certify_in(&here, &repo, git_image(), "m0", &[]),
        Duration::from_secs(300),
    );
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["verdict"], "green", "{r}\n{}", text(&o).1);
    assert_code(&o, 0);
    assert_no_container(&repo);
}

/// Issue 20.8: Ctrl-C (SIGINT to the real binary) during a container run on
/// a fleet machine: the container and the machine's tree are gone, and the
/// record says interrupted.
#[test]
fn ctrl_c_during_a_remote_container_run_removes_container_and_tree() {
    if !prerequisites(false) {
        return;
    }
    let Some(lab) = common::lab::Lab::shared() else {
        return;
    };
    let Some(here) = Here::setup(false, false) else {
        return;
    };
    lab.install_ssh_config(here.env.home());
    let work = tempfile::Builder::new()
        .prefix("saphan-cwork-")
        .tempdir()
        .unwrap();
    fleet_rows(&here, &[("m1", "ssh", "m1")], work.path());
    here.env.write_config(EXITCODE_SUITE);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexec sleep 900\n")]);
    let child = spawn_certify(&here, &repo, "m1", &["--timeout", "10m"]);
    let attempt = running_attempt(&repo);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = output_within(child, Duration::from_secs(120));
    assert_code(&o, 3);
    let r = json(&o)["records"][0].clone();
    assert_eq!(r["failure"], "interrupted", "{r}");
    assert_eq!(r["interrupted"], true, "{r}");
    assert_eq!(labelled("saphan.attempt", &attempt), "", "container left");
    assert_no_container(&repo);
    for d in ["scratch", "runs", "incoming"] {
        let p = work.path().join("m1/saphan").join(d);
        if p.exists() {
            let left: Vec<_> = std::fs::read_dir(&p).unwrap().flatten().collect();
            assert!(left.is_empty(), "{} still holds {left:?}", p.display());
        }
    }
    assert!(repo.verified().is_none());
}

/// Wait (at most `bound`) until `done` holds, looking every 100 ms.
#[track_caller]
fn wait_for(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < bound, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The toolchain lock container's name for `image` (src/docker/toolchain.rs).
fn toolchain_lock(image: &str) -> String {
    format!("saphan-toolchain-{}", &image["sha256:".len()..][..12])
}

fn container_exists(name: &str) -> bool {
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("name=^{name}$")])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&o.stdout).trim().is_empty()
}

/// The `saphan.toolchain-mounts` label of each sealed toolchain volume of `image`.
fn toolchain_seals(image: &str) -> Vec<String> {
    suite_images::toolchain_volumes(image)
        .iter()
        .filter_map(|v| {
            let o = Command::new("docker")
                .args([
                    "volume",
                    "inspect",
                    "--format",
                    "{{index .Labels \"saphan.toolchain-mounts\"}}",
                    v,
                ])
                .output()
                .unwrap();
            let l = String::from_utf8_lossy(&o.stdout).trim().to_string();
            (!l.is_empty() && l != "<no value>").then_some(l)
        })
        .collect()
}

/// Issue 22 (container ÷ host): the Go image's GOROOT is filled once into
/// engine volumes and mounted read-only at its own paths; the suite sees a
/// mount point there, cannot write it, and its verdict is the host class's.
#[test]
fn the_go_toolchain_is_read_from_read_only_volumes() {
    let Some(here) = Here::new(true) else {
        return;
    };
    let image = go_image();
    let m = go_module("");
    let repo = Repo::new(&files(&m));
    // The first run fills the volumes (or another test's run does: then
    // this one waits for its lock to go).
    let o = here.certify(&repo, image, &[]);
    assert_code(&o, 0);
    let first = json(&o);
    let lock = toolchain_lock(image);
    wait_for("the toolchain fill", Duration::from_secs(300), || {
        !container_exists(&lock)
    });
    let seals = toolchain_seals(image);
    assert_eq!(seals.len(), 1, "one seal for {image}: {seals:?}");
    let mounts: Vec<(String, String)> = serde_json::from_str(&seals[0]).unwrap();
    let paths: Vec<&str> = mounts.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["/usr/lib/go-1.19", "/usr/share/go-1.19/src"],
        "{seals:?}"
    );

    // The host class gives the same verdict on the same SHA.
    let o = here.run(&["certify", "--json", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let host = json(&o);
    for k in ["verdict", "count", "named_tests", "sha"] {
        assert_eq!(first[k], host[k], "{k}: container {first} host {host}");
    }

    let check = r#"
func TestToolchainIsAReadOnlyMount(t *testing.T) {
	if _, err := os.Stat("/.dockerenv"); err != nil {
		t.Skip("not in a container")
	}
	for _, root := range []string{runtime.GOROOT(), "/usr/share/go-1.19/src"} {
		info, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(info), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[4] == root {
				found = true
				if !strings.HasPrefix(f[5], "ro") {
					t.Fatalf("%s is mounted %s", root, f[5])
				}
			}
		}
		if !found {
			t.Fatalf("%s is not a mount point:\n%s", root, info)
		}
		if err := os.WriteFile(filepath.Join(root, "saphan-was-here"), nil, 0o644); err == nil {
			t.Fatalf("%s is writable", root)
		}
	}
}
"#;
    let mut m = go_module(check);
    m[2].1 = m[2].1.replace(
        "import \"testing\"",
        "import (\n\t\"os\"\n\t\"path/filepath\"\n\t\"runtime\"\n\t\"strings\"\n\t\"testing\"\n)",
    );
    let sha = repo.commit(&files(&m), "check the toolchain mounts");
    let o = here.certify(&repo, image, &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(r["verdict"], "green", "{r}\n{}", text(&o).1);
    assert_eq!(r["sha"], sha);
    assert_eq!(r["count"], 2, "{r}");
    assert_eq!(repo.verified().as_deref(), Some(sha.as_str()));
    assert_eq!(toolchain_seals(image).len(), 1, "the seal is reused");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("read-only copies on engine volumes: /usr/lib/go-1.19 (saphan-toolchain-"),
        "{r}"
    );
    assert_only_main_worktree(&repo);
    assert_no_container(&repo);
}

/// Issue 22: the fill's lock is the engine's container name. While another
/// run holds it a run goes on without volumes (and fills nothing); once it
/// is gone the next run seals the image — with no mounts for an image that
/// has no Go toolchain.
#[test]
fn a_held_toolchain_lock_runs_without_volumes_and_an_image_without_go_seals_empty() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let image = shell_image();
    let lock = toolchain_lock(image);
    // Hold the lock (waiting out another test's fill of this image first),
    // then forget any seal so that only the lock stands in the way.
    wait_for("the lock to be free", Duration::from_secs(300), || {
        Command::new("docker")
            .args([
                "create",
                "--name",
                &lock,
                "--label",
                "saphan.test=lock",
                image,
                "/x",
            ])
            .output()
            .unwrap()
            .status
            .success()
    });
    suite_images::remove_toolchain_volumes(image);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho fine\n")]);
    let o = here.certify(&repo, image, &[]);
    let during = suite_images::toolchain_volumes(image);
    let _ = Command::new("docker").args(["rm", "-f", &lock]).output();
    assert_code(&o, 0);
    assert_eq!(json(&o)["verdict"], "green");

    let sha = repo.commit(&[("suite.sh", "#!/bin/sh\necho again\n")], "again");
    let o = here.certify(&repo, image, &[]);
    assert_code(&o, 0);
    assert_eq!(json(&o)["sha"], sha);
    assert!(during.is_empty(), "filled under a held lock: {during:?}");
    wait_for("the seal", Duration::from_secs(60), || {
        !toolchain_seals(image).is_empty()
    });
    assert!(
        toolchain_seals(image).iter().all(|s| s == "[]"),
        "{:?}",
        toolchain_seals(image)
    );
    assert!(!container_exists(&lock));
    assert_no_container(&repo);
}

/// Review (helper-31): a GOROOT reached through a symbolic link into a
/// system directory — or `/` itself — had that directory mounted over
/// (read-only `/usr/local`; with `/`, every run of the image failed to
/// start). Paths are resolved as the engine will follow them, then
/// checked: nothing is mounted and the runs are green.
#[test]
fn a_toolchain_reached_through_a_link_into_the_system_is_never_mounted() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let cases = [
        // GOROOT=/opt/go, /opt/go -> /usr/local (a system directory).
        (
            "lnk-usr-local",
            "mkdir -p usr/local/bin usr/local/pkg/tool usr/local/src opt && echo x > usr/local/bin/go && ln -s /usr/local opt/go",
            vec!["ENV GOROOT=/opt/go", "ENV PATH=/bin"],
        ),
        // go on PATH through /x -> /: GOROOT would be `/`.
        (
            "lnk-root",
            "mkdir -p pkg/tool src && echo x > bin/go && ln -s / x",
            vec!["ENV PATH=/x/bin:/bin"],
        ),
        // GOROOT=//usr: not in plain form, and /usr besides.
        (
            "dbl-slash",
            "mkdir -p usr/bin usr/pkg/tool usr/src && echo x > usr/bin/go",
            vec!["ENV GOROOT=//usr", "ENV PATH=/bin"],
        ),
    ];
    let suite = "#!/bin/sh\n! grep -E ' / (/usr|/usr/local|/x|/opt/go) ro' /proc/self/mountinfo || exit 7\necho fine\n";
    for (tag, layout, env) in cases {
        let image = suite_images::linked_toolchain_image(tag, layout, &env);
        let repo = Repo::new(&[("suite.sh", suite)]);
        for round in 0..2 {
            let o = here.certify(&repo, &image, &[]);
            assert_code(&o, 0);
            let r = json(&o);
            assert_eq!(
                r["verdict"],
                "green",
                "{tag} round {round}: {r}\n{}",
                text(&o).1
            );
            assert!(!r["notes"].to_string().contains("toolchain"), "{tag}: {r}");
            if round == 0 {
                repo.commit(&[("suite.sh", &format!("{suite}# again\n"))], "again");
            }
        }
        assert_eq!(toolchain_seals(&image), ["[]"], "{tag}");
        assert_no_container(&repo);
    }
}

/// Review (helper-31): a seal the engine holds is checked as a fill would
/// write it, and a suite container the engine will not start with the
/// volumes is started without them — a seal naming `/etc` is ignored, one
/// whose mount the engine refuses (a directory volume over a file) costs a
/// retry, and neither turns a run into a failed measurement.
#[test]
fn a_seal_no_fill_would_write_never_fails_a_run() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    let image = suite_images::linked_toolchain_image("forged", "true", &["ENV PATH=/bin"]);
    let vol = format!("saphan-test-forged-{}", std::process::id());
    let label = format!("{}={image}", suite_images::TOOLCHAIN_LABEL);
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().unwrap();
        assert!(
            o.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    docker(&["volume", "create", "--label", &label, &vol]);
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\necho fine\n")]);
    for (n, mounts) in [("etc", "/etc"), ("file", "/bin/busybox")]
        .iter()
        .enumerate()
    {
        let seal = format!("aaa-{}-{}-sealed", mounts.0, std::process::id());
        let mounts_label = format!("saphan.toolchain-mounts=[[\"{}\",\"{vol}\"]]", mounts.1);
        docker(&[
            "volume",
            "create",
            "--label",
            &label,
            "--label",
            &mounts_label,
            &seal,
        ]);
        if n > 0 {
            repo.commit(
                &[("suite.sh", &format!("#!/bin/sh\necho fine {n}\n"))],
                "again",
            );
        }
        let o = here.certify(&repo, &image, &[]);
        assert_code(&o, 0);
        let r = json(&o);
        assert_eq!(r["verdict"], "green", "{}: {r}\n{}", mounts.0, text(&o).1);
        assert!(!r["notes"].to_string().contains("toolchain"), "{r}");
        let _ = Command::new("docker")
            .args(["volume", "rm", "-f", &seal])
            .output();
    }
    assert_no_container(&repo);
}

/// Issue 36: the container class holds the attacks a host-class suite is
/// sealed against. A green suite (git in its image) tries to plant a
/// `post-checkout` hook, write a replace ref, move `refs/heads/main`, write
/// saphan's records and delete its lock, and leave a daemon rewriting the
/// stable tree; every write is refused by the engine's mounts (the git
/// dirs read-only), the daemon dies with the container, and the next
/// commit — red — certifies red with every earlier record intact.
#[test]
fn a_container_suite_cannot_reach_what_its_verdict_rests_on() {
    let Some(here) = Here::new(false) else {
        return;
    };
    here.env.write_config(EXITCODE_SUITE);
    // Each attack in a subshell: a write that lands prints LANDED.
    let attack =
        |what: &str, cmd: &str| format!("( {cmd} ) >/dev/null 2>&1 && echo \"LANDED: {what}\"\n");
    let mut script = String::from(
        "#!/bin/sh\nc=$(git rev-parse --path-format=absolute --git-common-dir) || exit 9\n",
    );
    script += &attack(
        "hook",
        "mkdir -p \"$c/hooks\" && printf '#!/bin/sh\\nprintf \"#!/bin/sh\\\\nexit 0\\\\n\" > suite.sh\\n' > \"$c/hooks/post-checkout\" && chmod +x \"$c/hooks/post-checkout\"",
    );
    script += &attack(
        "replace",
        "b=$(printf '#!/bin/sh\\nexit 0\\n' | git hash-object -w --stdin) && git replace -f $(git rev-parse HEAD:suite.sh) $b",
    );
    script += &attack("branch", "git update-ref refs/heads/main HEAD~1");
    script += &attack("records", "echo forged >> \"$c/saphan/attempts.jsonl\"");
    script += &attack("lock", "rm \"$c/saphan/lock\"");
    // A daemon that outlives the suite would rewrite the next tree.
    script += "(setsid sh -c 'while :; do printf \"#!/bin/sh\\nexit 0\\n\" > suite.sh 2>/dev/null; sleep 0.05; done' &) \necho suite-done\n";
    let repo = Repo::new(&[("suite.sh", &script), ("README", "x\n")]);
    repo.commit(&[("README", "y\n")], "second");
    let o = here.certify(&repo, git_image(), &[]);
    assert_code(&o, 0);
    let r = json(&o);
    assert_eq!(
        r["seal"],
        serde_json::json!({"state": "sealed", "tool": "container"}),
        "{r}"
    );
    let log = std::fs::read_to_string(r["suite_log"].as_str().unwrap()).unwrap();
    assert!(log.contains("suite-done"), "{log}");
    assert!(!log.contains("LANDED"), "an attack landed:\n{log}");
    let before = std::fs::read(repo.dir.path().join(".git/saphan/attempts.jsonl")).unwrap();
    let main = crate::common::git(repo.path(), &["rev-parse", "refs/heads/main"]);
    assert_no_container(&repo);

    let red = repo.commit(&[("suite.sh", "#!/bin/sh\nexit 1\n")], "red");
    let o = here.certify(&repo, git_image(), &[]);
    assert_code(&o, 1);
    assert_eq!(json(&o)["sha"], red);
    let after = std::fs::read(repo.dir.path().join(".git/saphan/attempts.jsonl")).unwrap();
    assert!(after.starts_with(&before), "an earlier record changed");
    assert_ne!(
        crate::common::git(repo.path(), &["rev-parse", "refs/heads/main"]),
        main,
        "main moved only by the test's own commit"
    );
    assert_eq!(
        crate::common::git(repo.path(), &["rev-parse", "refs/heads/main"]),
        red
    );
    assert_eq!(repo.verified().as_deref(), Some(main.as_str()));
    assert_no_container(&repo);
}
