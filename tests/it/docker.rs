//! docker-oci, sandbox-userns and the container-class gate, against the real
//! Docker engine on /var/run/docker.sock (skipped, with the reason printed,
//! where no engine answers) and real sshd lab hosts.
//!
//! Images are built once per test binary: the real probe image through
//! `images/probe/build`, and a fake one (FROM scratch, a static program that
//! prints only `SAPHAN-PROBE-RAN`). Tests that must remove or uniquely
//! identify an image build a labelled variant of the real one (a label
//! changes the image ID) and remove it afterwards.

use crate::common;

use crate::common::{Env, assert_code, assert_refused, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

const SOCKET: &str = "/var/run/docker.sock";
/// Tags this test process builds: unique per process, so concurrent runs
/// on one engine never retag each other's images.
/// Every tag made is removed when the test binary exits.
fn tag(name: &str) -> String {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: registering a plain extern "C" fn with no arguments.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(remove_tags);
    });
    tag_name(name)
}

extern "C" fn remove_tags() {
    for name in ["probe", "fake-probe", "sleeper-probe"] {
        let _ = Command::new("docker")
            .args(["rmi", "-f", &tag_name(name)])
            .output();
    }
}

fn tag_name(name: &str) -> String {
    format!("saphan-test/{name}:p{}", std::process::id())
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("run docker")
}

/// Does an engine answer here? Prints SKIPPED and returns false when not.
fn engine() -> bool {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let up = UP.get_or_init(|| {
        if !Path::new(SOCKET).exists() {
            return Err(format!("no Docker engine socket at {SOCKET}"));
        }
        if !common::have("docker") {
            return Err("no docker CLI on PATH".into());
        }
        let o = docker(&["version", "--format", "{{.Server.APIVersion}}"]);
        if !o.status.success() {
            return Err(format!(
                "the Docker engine does not answer: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(())
    });
    match up {
        Ok(()) => true,
        Err(why) => !common::skip_unless(false, why),
    }
}

/// The real probe image, built once by `images/probe/build`: its image ID.
fn probe_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let o = Command::new(root().join("images/probe/build"))
            .args(["--tag", &tag("probe")])
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("run images/probe/build");
        let (out, err) = text(&o);
        assert!(
            o.status.success(),
            "images/probe/build failed:\n{out}\n{err}"
        );
        let id = out.trim().to_string();
        assert!(
            id.starts_with("sha256:") && id.len() == 71,
            "build printed {id:?}\n{err}"
        );
        id
    })
}

/// A labelled copy of the real probe image (its own image ID), removed on drop.
struct Variant {
    id: String,
    tag: String,
}

impl Variant {
    fn new() -> Variant {
        static N: AtomicUsize = AtomicUsize::new(0);
        probe_image();
        let label = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let tag = format!("saphan-test/probe:v{label}");
        let o = Command::new("docker")
            .current_dir(root())
            .args([
                "build",
                "--quiet",
                "--file",
                "images/probe/Dockerfile",
                "--tag",
                &tag,
            ])
            .args(["--label", &format!("org.saphan.test={label}"), "."])
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "docker build: {out}\n{err}");
        Variant {
            id: out.trim().lines().last().unwrap().to_string(),
            tag,
        }
    }
    /// Containers (any state) made from this image.
    fn containers(&self) -> String {
        let o = docker(&["ps", "-aq", "--filter", &format!("ancestor={}", self.id)]);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for Variant {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "-f", &self.tag]);
        let _ = docker(&["rmi", "-f", &self.id]);
    }
}

/// A FROM-scratch image whose only program is `main_rs` compiled statically;
/// its image ID.
fn scratch_image(main_rs: &str, tag: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix("saphan-fake-probe-")
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("main.rs"), main_rs).unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let o = Command::new(rustc)
        .current_dir(dir.path())
        .args([
            "--edition",
            "2021",
            "-O",
            "-C",
            "target-feature=+crt-static",
        ])
        .args([
            "--target",
            "x86_64-unknown-linux-gnu",
            "main.rs",
            "-o",
            "fake",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "rustc: {}", text(&o).1);
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM scratch\nCOPY fake /saphan-probe\nENTRYPOINT [\"/saphan-probe\"]\n",
    )
    .unwrap();
    let o = Command::new("docker")
        .current_dir(dir.path())
        .args(["build", "--quiet", "--tag", tag, "."])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "docker build {tag}: {out}\n{err}");
    out.trim().lines().last().unwrap().to_string()
}

/// The fake image: prints only the first marker. Built once.
fn fake_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        scratch_image(
            "fn main() { println!(\"SAPHAN-PROBE-RAN\"); }\n",
            &tag("fake-probe"),
        )
    })
}

/// A home with one local machine `here`, measured.
fn local_env() -> Env {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.here]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    let o = env.run(&["machine", "measure", "--machine", "here"]);
    assert_code(&o, 0);
    env
}

/// A copy of the shipped catalog with the docker-oci `image` (and optionally
/// `socket`) replaced: the operator's pinning step.
fn catalog_with(env: &Env, image: &str, socket: Option<&str>) -> PathBuf {
    let shipped = std::fs::read_to_string(root().join("catalog/capabilities.toml")).unwrap();
    let mut out = String::new();
    for line in shipped.lines() {
        if line.starts_with("image = ") {
            out += &format!("image = \"{image}\"\n");
        } else if line.starts_with("socket = ") {
            out += &format!("socket = \"{}\"\n", socket.unwrap_or(SOCKET));
        } else {
            out += line;
            out.push('\n');
        }
    }
    let mut n = 0;
    let path = loop {
        let p = env.home().join(format!("pinned-{n}.toml"));
        if !p.exists() {
            break p;
        }
        n += 1;
    };
    std::fs::write(&path, out).unwrap();
    path
}

fn probe_args<'a>(capability: &'a str, declared: &'a str) -> Vec<&'a str> {
    vec![
        "machine",
        "probe",
        "--machine",
        "here",
        "--capability",
        capability,
        "--declared-path",
        declared,
        "--workhome",
        "/tmp",
        "--probed-by",
        "tester",
        "--workspace",
        "/w",
    ]
}

/// Run a docker-oci probe of `here` with `catalog`; returns (exit, stdout, the --json row).
fn probe_docker(env: &Env, catalog: &Path, declared: &str) -> (i32, String, Value) {
    let mut args = vec!["--catalog", catalog.to_str().unwrap()];
    args.extend(probe_args("docker-oci", declared));
    let o = env.run(&args);
    let (out, err) = text(&o);
    (
        o.status.code().unwrap(),
        format!("{out}{err}"),
        last_row(env),
    )
}

fn ledger_lines(env: &Env) -> Vec<Value> {
    match std::fs::read_to_string(env.home().join("fleet/ledger.jsonl")) {
        Ok(t) => t
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn last_row(env: &Env) -> Value {
    ledger_lines(env).pop().unwrap_or(Value::Null)
}

#[test]
fn probe_image_builds_from_scratch_without_a_pull() {
    if !engine() {
        return;
    }
    let dockerfile = std::fs::read_to_string(root().join("images/probe/Dockerfile")).unwrap();
    let from: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.trim_start().starts_with("FROM"))
        .collect();
    assert_eq!(from, vec!["FROM scratch"], "the only base is scratch");
    let id = probe_image();
    // Locally built: no registry digest; its Id is the pin a local operator uses.
    let o = docker(&[
        "image",
        "inspect",
        id,
        "--format",
        "{{json .RepoDigests}} {{len .RootFS.Layers}} {{.Id}}",
    ]);
    assert_eq!(text(&o).0.trim(), format!("[] 1 {id}"));
    let o = docker(&["run", "--rm", "--pull=never", "--network", "none", id]);
    let out = text(&o).0;
    assert!(o.status.success(), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"SAPHAN-PROBE-RAN"));
    assert_eq!(lines.last(), Some(&"SAPHAN-PROBE-OK"));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cpus=") && l != &"cpus=0"),
        "{out}"
    );
    // `--save` writes a loadable tarball.
    let dir = tempfile::tempdir().unwrap();
    let tar = dir.path().join("saphan-probe.tar");
    let o = Command::new(root().join("images/probe/build"))
        .args(["--tag", &tag("probe"), "--save", tar.to_str().unwrap()])
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(
        text(&o).0.trim(),
        id,
        "a rebuild of the same bytes keeps the ID"
    );
    assert!(std::fs::metadata(&tar).unwrap().len() > 100_000);
}

#[test]
fn unpinned_catalog_refuses_and_records_nothing() {
    let env = local_env();
    let before = ledger_lines(&env).len();
    let o = env.run(&probe_args("docker-oci", "/usr/bin/docker"));
    assert_code(&o, 2);
    let err = text(&o).1;
    assert!(
        err.starts_with("saphan: docker-probe-image-unpinned: catalog embedded pins"),
        "{err}"
    );
    assert_eq!(
        ledger_lines(&env).len(),
        before,
        "no ledger line for an unpinned probe"
    );
    // A tag is refused by name, and records nothing either.
    let cat = catalog_with(&env, "ghcr.io/saphan-studio/saphan-probe:candidate", None);
    let mut args = vec!["--catalog", cat.to_str().unwrap()];
    args.extend(probe_args("docker-oci", "/usr/bin/docker"));
    let o = env.run(&args);
    assert_refused(&o, "docker-probe-image-tag");
    assert_eq!(ledger_lines(&env).len(), before);
}

#[test]
fn pinned_probe_passes_locally_and_removes_its_container() {
    if !engine() {
        return;
    }
    let v = Variant::new();
    let env = local_env();
    let cat = catalog_with(&env, &v.id, None);
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 0, "{out}\n{row}");
    assert!(
        out.contains("docker-oci  present  /usr/bin/docker"),
        "{out}"
    );
    assert_eq!(row["capability"], "docker-oci");
    assert_eq!(row["outcome"], "present");
    assert_eq!(row["detail"]["image_id"], v.id.as_str());
    assert_eq!(row["detail"]["pin_kind"], "image-id");
    assert!(row["detail"]["vm"]["cpus"].as_u64().unwrap() > 0);
    assert!(row["detail"]["vm"]["memory_bytes"].as_u64().unwrap() > 0);
    assert!(row["signature"].as_str().unwrap().len() == 128);
    assert_eq!(v.containers(), "", "the probe container was removed");
}

#[test]
fn probe_image_absent_is_named_with_its_remedy() {
    if !engine() {
        return;
    }
    let env = local_env();
    // An image that existed and was removed.
    let v = Variant::new();
    let id = v.id.clone();
    drop(v);
    assert!(!docker(&["image", "inspect", &id]).status.success());
    let cat = catalog_with(&env, &id, None);
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("failed   probe-image-absent: "), "{out}");
    assert!(
        out.contains("remedy:\n  docker load -i saphan-probe.tar\n"),
        "{out}"
    );
    assert!(
        out.contains("saphan --catalog"),
        "the re-measure line repeats --catalog: {out}"
    );
    assert_eq!(row["reason"], "probe-image-absent");
    // A registry pin is checked against RepoDigests: a local image's ID
    // written as NAME@sha256 is not found.
    let hex = probe_image().trim_start_matches("sha256:");
    let cat = catalog_with(&env, &format!("saphan-test/probe@sha256:{hex}"), None);
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert_eq!(row["reason"], "probe-image-absent");
    assert!(
        out.contains("docker pull saphan-test/probe@sha256:"),
        "{out}"
    );
}

#[test]
fn daemon_unreachable_is_named_with_its_remedy() {
    if !engine() {
        return;
    }
    let env = local_env();
    let cat = catalog_with(&env, probe_image(), Some("/nonexistent/docker.sock"));
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "failed   daemon-unreachable: cannot connect to unix:///nonexistent/docker.sock"
        ),
        "{out}"
    );
    assert!(
        out.contains("remedy:\n  systemctl enable --now docker\n"),
        "{out}"
    );
    assert_eq!(row["reason"], "daemon-unreachable");
    assert!(
        row["version_output"]
            .as_str()
            .unwrap()
            .starts_with("Docker version")
    );
    // A socket that exists but has no engine behind it (a plain file).
    let fake_sock = env.home().join("docker.sock");
    std::fs::write(&fake_sock, "").unwrap();
    let cat = catalog_with(&env, probe_image(), Some(fake_sock.to_str().unwrap()));
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert_eq!(row["reason"], "daemon-unreachable", "{out}");
}

#[test]
fn binary_absent_is_named_with_the_platform_install_command() {
    let env = local_env();
    let id = format!("sha256:{}", "1".repeat(64));
    let cat = catalog_with(&env, &id, None);
    let (code, out, row) = probe_docker(&env, &cat, "/nonexistent/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("absent   binary-absent: no docker program at /nonexistent/bin/docker"),
        "{out}"
    );
    assert_eq!(row["reason"], "binary-absent");
    assert_eq!(row["outcome"], "absent");
    // Measured as Debian here (LAB): the install line comes from the catalog.
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    if os.lines().any(|l| l == "ID=debian") {
        assert!(
            out.contains("remedy:\n  apt-get install -y docker.io\n"),
            "{out}"
        );
    }
    assert!(out.contains("machine probe --machine here --capability docker-oci --declared-path /nonexistent/bin/docker"), "{out}");
}

#[test]
fn fake_image_with_one_marker_fails_by_name() {
    if !engine() {
        return;
    }
    let env = local_env();
    let fake = fake_image();
    let cat = catalog_with(&env, fake, None);
    let (code, out, row) = probe_docker(&env, &cat, "/usr/bin/docker");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("failed   probe-output-invalid: "), "{out}");
    assert!(out.contains("lacks the SAPHAN-PROBE-OK marker"), "{out}");
    assert_eq!(row["reason"], "probe-output-invalid");
    let o = docker(&["ps", "-aq", "--filter", &format!("ancestor={fake}")]);
    assert_eq!(
        text(&o).0.trim(),
        "",
        "the fake's container was removed too"
    );
}

#[test]
fn container_class_gate_refuses_without_a_fresh_row_and_passes_with_one() {
    if !engine() {
        return;
    }
    use saphan::catalog::Catalog;
    use saphan::home::Home;
    let v = Variant::new();
    let env = local_env();
    let home = Home::at(env.home());
    let cat_path = catalog_with(&env, &v.id, None);
    let cat = Catalog::load(Some(&cat_path)).unwrap();
    let now = || time::OffsetDateTime::now_utc();

    // Never probed.
    let e = saphan::fleet::docker_probes::require_container_capability(&home, &cat, "here", now())
        .unwrap_err();
    assert_eq!(e.name(), "container-docker-capability-absent");
    let line = e.line();
    let lines: Vec<&str> = line.lines().collect();
    assert!(
        lines[0].starts_with("saphan: container-docker-capability-absent: machine `here` ")
            && lines[0].contains("it was never probed")
            && lines[0].contains(" — "),
        "{line}"
    );
    // Never probed: the probe line alone — nothing says Docker is missing,
    // so no install command comes before it.
    assert_eq!(lines.len(), 2, "{line}");
    assert!(!line.contains("apt-get"), "{line}");
    let probe_line = format!(
        "saphan --catalog {} machine probe --machine here --capability docker-oci --declared-path /usr/bin/docker",
        cat_path.display()
    );
    assert!(
        lines.last().unwrap().starts_with("  SAPHAN_HOME=")
            && lines.last().unwrap().contains(&probe_line),
        "{line}"
    );

    // A failed probe: the refusal names it, and its remedy is built now
    // from the facts and the catalog in use — not replayed from the row.
    let bad = catalog_with(&env, &v.id, Some("/nonexistent/docker.sock"));
    let (code, _, _) = probe_docker(&env, &bad, "/usr/bin/docker");
    assert_eq!(code, 1);
    let row = last_row(&env);
    assert!(
        row["remedy"][1]
            .as_str()
            .unwrap()
            .contains(&bad.display().to_string()),
        "{row}"
    );
    let e = saphan::fleet::docker_probes::require_container_capability(&home, &cat, "here", now())
        .unwrap_err();
    let line = e.line();
    assert!(line.contains("says failed: daemon-unreachable"), "{line}");
    assert!(
        !line.contains(&bad.display().to_string()),
        "replayed the stored remedy:\n{line}"
    );
    assert!(line.lines().last().unwrap().contains(&probe_line), "{line}");
    assert_eq!(line.lines().count(), 3, "{line}");
    assert_eq!(
        line.lines().nth(1).unwrap(),
        "  systemctl enable --now docker",
        "{line}"
    );

    // A real successful probe writes the fresh row; the gate passes.
    let (code, out, _) = probe_docker(&env, &cat_path, "/usr/bin/docker");
    assert_eq!(code, 0, "{out}");
    saphan::fleet::docker_probes::require_container_capability(&home, &cat, "here", now()).unwrap();

    // Re-pinning makes it stale; so does time.
    let other = catalog_with(&env, probe_image(), None);
    let other = Catalog::load(Some(&other)).unwrap();
    let e =
        saphan::fleet::docker_probes::require_container_capability(&home, &other, "here", now())
            .unwrap_err();
    assert!(
        e.line().contains("another docker-oci catalog entry"),
        "{}",
        e.line()
    );
    // Only stale: told to probe again, not to install Docker it has.
    assert_eq!(e.line().lines().count(), 2, "{}", e.line());
    assert!(
        e.line()
            .lines()
            .nth(1)
            .unwrap()
            .contains("machine probe --machine here --capability docker-oci"),
        "{}",
        e.line()
    );
    let later = now() + time::Duration::hours(25);
    let e = saphan::fleet::docker_probes::require_container_capability(&home, &cat, "here", later)
        .unwrap_err();
    let line = e.line();
    assert!(line.contains("older than the freshness window"), "{line}");
    // The facts row is stale too: measure, then probe; no install.
    let lines: Vec<&str> = line.lines().collect();
    assert_eq!(lines.len(), 3, "{line}");
    assert!(
        lines[1].ends_with("machine measure --machine here"),
        "{line}"
    );
    assert!(lines[2].contains(&probe_line), "{line}");
    assert!(!line.contains("apt-get"), "{line}");
    // An unknown machine is refused by its own name.
    let e = saphan::fleet::docker_probes::require_container_capability(&home, &cat, "nope", now())
        .unwrap_err();
    assert_eq!(e.name(), "machine-unknown");
}

#[test]
fn sandbox_userns_present_here() {
    let env = local_env();
    let o = env.run(&probe_args("sandbox-userns", "/usr/bin/unshare"));
    let (out, err) = text(&o);
    if !Path::new("/usr/bin/unshare").exists() {
        common::skip_unless(false, "no /usr/bin/unshare");
        return;
    }
    assert_code(&o, 0);
    assert!(
        out.contains("sandbox-userns  present  /usr/bin/unshare"),
        "{out}\n{err}"
    );
    let row = last_row(&env);
    assert_eq!(row["capability"], "sandbox-userns");
    assert!(
        row["detail"]["method"]
            .as_str()
            .unwrap()
            .ends_with("--user --map-root-user cat /proc/self/uid_map")
    );
    assert!(
        row["detail"]["uid_map"].as_str().unwrap().starts_with("0 "),
        "{row}"
    );
    assert!(row["detail"]["max_user_namespaces"].as_u64().unwrap() > 0);
}

#[test]
fn sandbox_userns_denied_and_absent_are_named() {
    if !Path::new("/usr/bin/unshare").exists() {
        common::skip_unless(false, "no /usr/bin/unshare");
        return;
    }
    let env = local_env();
    // Absent.
    let o = env.run(&probe_args("sandbox-userns", "/nonexistent/unshare"));
    assert_code(&o, 1);
    assert!(
        text(&o).0.contains("absent   binary-absent: "),
        "{}",
        text(&o).0
    );
    // Denied for real: run saphan inside a user namespace whose
    // max_user_namespaces is 0, so the kernel refuses any nested one.
    let bin = env!("CARGO_BIN_EXE_saphan");
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"")
        .arg(bin)
        .args(probe_args("sandbox-userns", "/usr/bin/unshare"))
        .env("SAPHAN_HOME", env.home());
    let o = cmd.output().unwrap();
    let (out, err) = text(&o);
    if err.contains("unshare failed") {
        common::skip_unless(
            false,
            "this machine refuses the outer user namespace itself",
        );
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.contains("failed   userns-denied: "), "{out}");
    assert!(
        out.contains("remedy:\n  sysctl -w user.max_user_namespaces=15000\n"),
        "{out}"
    );
}

/// The probe over SSH, through the library (the machine's russh connection
/// forwards the remote /var/run/docker.sock; lab hosts share this machine's
/// filesystem, so the socket there is this engine's).
#[test]
fn pinned_probe_passes_over_ssh_to_a_lab_host() {
    use saphan::docker::Pin;
    use saphan::fleet::docker_probes::{DockerProbeSettings, Platform, probe_docker_oci};
    use saphan::fleet::ledger::Outcome;
    use saphan::transport::{SshOptions, Transport};
    if !engine() {
        return;
    }
    // m3's /root is empty: ssh commands there do not run this machine's
    // /root/.bashrc (whose pyenv hook can stall every session under load).
    let Some(lab) = common::lab::Lab::start(4) else {
        return;
    };
    let v = Variant::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let t = Transport::connect_alias(&lab.ssh_config_path(), "m3", &SshOptions::default())
            .await
            .expect("connect to lab host m3");
        assert!(t.describe().starts_with("ssh m3"), "{}", t.describe());
        let settings = |declared: &str, socket: &str| DockerProbeSettings {
            declared_path: declared.into(),
            socket: socket.into(),
            pin: Pin::parse(&v.id, "test").unwrap(),
            platform: Platform {
                os: Some("Linux".into()),
                ids: vec!["debian".into()],
                user: None,
            },
            budget: std::time::Duration::from_secs(60),
        };
        let f = probe_docker_oci(&t, &settings("/usr/bin/docker", SOCKET), None).await;
        assert_eq!(f.outcome, Some(Outcome::Present), "{f:?}");
        assert_eq!(f.detail["image_id"], v.id.as_str());
        assert!(f.detail["vm"]["cpus"].as_u64().unwrap() > 0);

        let f = probe_docker_oci(
            &t,
            &settings("/usr/bin/docker", "/nonexistent/docker.sock"),
            None,
        )
        .await;
        assert_eq!(f.reason.as_deref(), Some("daemon-unreachable"), "{f:?}");
        assert_eq!(
            f.install.as_deref(),
            Some("systemctl enable --now docker"),
            "{f:?}"
        );

        let f = probe_docker_oci(
            &t,
            &settings("/nonexistent/docker", SOCKET),
            Some("apt-get install -y docker.io"),
        )
        .await;
        assert_eq!(f.reason.as_deref(), Some("binary-absent"), "{f:?}");
        assert_eq!(f.outcome, Some(Outcome::Absent));
    });

    // The same through the real binary: an SSH machine row, its measured
    // platform (m3 says Ubuntu), the signed row, the remedy and the gate.
    let env = Env::new();
    lab.install_ssh_config(env.home());
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[machine.m3]\ntransport = \"ssh\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    assert_code(&env.run(&["machine", "measure", "--machine", "m3"]), 0);
    let cat = catalog_with(&env, &v.id, None);
    let mut args = vec!["--catalog", cat.to_str().unwrap()];
    args.extend(probe_args("docker-oci", "/usr/bin/docker"));
    let args: Vec<&str> = args
        .iter()
        .map(|a| if *a == "here" { "m3" } else { a })
        .collect();
    let o = env.run(&args);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    assert!(
        out.contains("m3  docker-oci  present  /usr/bin/docker"),
        "{out}\n{err}"
    );
    let row = last_row(&env);
    assert_eq!(row["machine"], "m3");
    assert_eq!(row["detail"]["image_id"], v.id.as_str());
    let home = saphan::home::Home::at(env.home());
    let catalog = saphan::catalog::Catalog::load(Some(&cat)).unwrap();
    saphan::fleet::docker_probes::require_container_capability(
        &home,
        &catalog,
        "m3",
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let args: Vec<&str> = args
        .iter()
        .map(|a| {
            if *a == "/usr/bin/docker" {
                "/nonexistent/docker"
            } else {
                a
            }
        })
        .collect();
    let o = env.run(&args);
    let out = text(&o).0;
    assert_code(&o, 1);
    assert!(out.contains("absent   binary-absent: "), "{out}");
    assert!(
        out.contains(" m3 'apt-get install -y docker.io'\n"),
        "ssh -F … m3 '<ubuntu install>': {out}"
    );
    assert_eq!(v.containers(), "", "the probe container was removed");
}

#[test]
fn a_probe_past_its_budget_fails_by_name_and_removes_its_container() {
    if !engine() {
        return;
    }
    let sleeper = scratch_image(
        "fn main() { println!(\"SAPHAN-PROBE-RAN\"); std::thread::sleep(std::time::Duration::from_secs(120)); }\n",
        &tag("sleeper-probe"),
    );
    let env = local_env();
    let cat = catalog_with(&env, &sleeper, None);
    let mut args = vec!["--catalog", cat.to_str().unwrap()];
    args.extend(probe_args("docker-oci", "/usr/bin/docker"));
    args.extend(["--timeout", "5s"]);
    let t0 = std::time::Instant::now();
    let o = env.run(&args);
    let took = t0.elapsed();
    let out = text(&o).0;
    assert_code(&o, 1);
    assert!(
        out.contains("failed   probe-run-failed: the probe did not finish within its ")
            && out.contains("s budget (--timeout)"),
        "{out}"
    );
    assert!(
        took < std::time::Duration::from_secs(30),
        "bounded by the budget: {took:?}"
    );
    let o = docker(&["ps", "-aq", "--filter", &format!("ancestor={sleeper}")]);
    assert_eq!(text(&o).0.trim(), "", "the cut-off container was removed");
    let _ = docker(&["rmi", "-f", &tag("sleeper-probe")]);
}

/// A catalog cannot re-route docker-oci or sandbox-userns to the toolchain
/// probe (which would skip the pin check and the image run) by its `kind`.
#[test]
fn catalog_kinds_cannot_reroute_the_docker_or_userns_probe() {
    let env = local_env();
    let shipped = std::fs::read_to_string(root().join("catalog/capabilities.toml")).unwrap();
    let with_kind = |cap: &str, kind: &str| -> PathBuf {
        let header = format!("[capability.{cap}]\nkind = ");
        let at = shipped.find(&header).unwrap() + header.len();
        let end = at + shipped[at..].find('\n').unwrap();
        let text = format!("{}\"{kind}\"{}", &shipped[..at], &shipped[end..]);
        let p = env.home().join(format!("kind-{cap}-{kind}.toml"));
        std::fs::write(&p, text).unwrap();
        p
    };
    for (cap, kind, declared) in [
        ("docker-oci", "toolchain", "/bin/true"),
        ("sandbox-userns", "toolchain", "/bin/true"),
        ("docker-oci", "sandbox", "/bin/true"),
        ("go", "container", "/usr/bin/go"),
        ("git", "wizard", "/usr/bin/git"),
    ] {
        let cat = with_kind(cap, kind);
        let before = ledger_lines(&env).len();
        let mut args = vec!["--catalog", cat.to_str().unwrap()];
        args.extend(probe_args(cap, declared));
        let o = env.run(&args);
        let (out, err) = text(&o);
        assert_code(&o, 2);
        assert!(
            err.starts_with("saphan: catalog-malformed: "),
            "{cap}/{kind}: {out}\n{err}"
        );
        assert!(err.contains(&format!("`{cap}`")), "{err}");
        assert_eq!(
            ledger_lines(&env).len(),
            before,
            "{cap}/{kind} recorded a row"
        );
    }
}

/// Exiting 0 is not proof: sandbox-userns needs util-linux unshare and a
/// uid_map that maps root to the connected user.
#[test]
fn sandbox_userns_needs_a_real_namespace_not_exit_zero() {
    use std::os::unix::fs::PermissionsExt;
    let env = local_env();
    let o = env.run(&probe_args("sandbox-userns", "/bin/true"));
    assert_code(&o, 1);
    let row = last_row(&env);
    assert_eq!(row["outcome"], "failed", "{row}");
    assert_eq!(row["reason"], "version-output-mismatch", "{row}");
    // Says it is util-linux unshare, exits 0, but creates no namespace.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("unshare");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'unshare from util-linux 2.38.1'; fi\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = env.run(&probe_args("sandbox-userns", fake.to_str().unwrap()));
    assert_code(&o, 1);
    let row = last_row(&env);
    assert_eq!(row["reason"], "userns-not-created", "{row}");
}
