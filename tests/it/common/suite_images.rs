//! Suite images built here without a registry (LAB.md "Suite images without
//! a registry"), for container-class tests and benches: a busybox-only image
//! for shell suites, and a Go image imported from Debian's go-1.19 tree. Each
//! is built once per test binary under a name carrying the process id and
//! removed when the process exits; nothing is cached between runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// Where Debian's busybox-static puts busybox.
pub const BUSYBOX: &str = "/bin/busybox";
/// Debian's golang-1.19 trees.
const GO_TREES: [&str; 2] = ["usr/lib/go-1.19", "usr/share/go-1.19"];
/// The busybox applets the shell image links (busybox runs as its name).
const APPLETS: [&str; 12] = [
    "sh", "cat", "echo", "sleep", "ls", "mkdir", "printf", "touch", "id", "rm", "test", "true",
];

static MADE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Image IDs built here: saphan's toolchain volumes of each go at exit.
static IDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

extern "C" fn remove_images() {
    let made = MADE.lock().map(|m| m.clone()).unwrap_or_default();
    for name in made {
        let _ = Command::new("docker")
            .args(["rmi", "-f", &name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let ids = IDS.lock().map(|m| m.clone()).unwrap_or_default();
    for id in ids {
        remove_toolchain_volumes(&id);
    }
}

/// The label saphan puts on an image's toolchain volumes
/// (`src/docker/toolchain.rs`, `LABEL_IMAGE`).
pub const TOOLCHAIN_LABEL: &str = "saphan.toolchain-image";

/// Names of the toolchain volumes saphan filled for image `id`.
pub fn toolchain_volumes(id: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args([
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("label={TOOLCHAIN_LABEL}={id}"),
        ])
        .output()
        .expect("docker volume ls");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Remove the toolchain volumes of image `id` (those no container holds).
pub fn remove_toolchain_volumes(id: &str) {
    let vols = toolchain_volumes(id);
    if !vols.is_empty() {
        let _ = Command::new("docker")
            .args(["volume", "rm", "-f"])
            .args(&vols)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn remember(name: &str) {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| unsafe {
        libc::atexit(remove_images);
    });
    MADE.lock().unwrap().push(name.to_string());
}

/// Why a suite image cannot be built here (`None`: it can).
pub fn missing(go: bool) -> Option<String> {
    if !Path::new(BUSYBOX).is_file() {
        return Some(format!(
            "no {BUSYBOX} (apt-get install busybox-static) for the suite images"
        ));
    }
    if go && !Path::new("/usr/lib/go-1.19/bin/go").is_file() {
        return Some("no /usr/lib/go-1.19 (Debian's golang-go) for the Go suite image".into());
    }
    None
}

/// A staging root: /bin with busybox and its applets, /tmp (1777), and the
/// two libc files Debian's dynamically linked `go` needs.
fn stage(libc: bool) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("saphan-suite-image-")
        .tempdir()
        .unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(BUSYBOX, bin.join("busybox")).unwrap();
    for a in APPLETS {
        std::os::unix::fs::symlink("busybox", bin.join(a)).unwrap();
    }
    let tmp = d.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    if libc {
        let lib = d.path().join("lib/x86_64-linux-gnu");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::copy("/lib/x86_64-linux-gnu/libc.so.6", lib.join("libc.so.6")).unwrap();
        let lib64 = d.path().join("lib64");
        std::fs::create_dir_all(&lib64).unwrap();
        // Copying follows the symlink: the loader itself goes in.
        std::fs::copy(
            "/lib64/ld-linux-x86-64.so.2",
            lib64.join("ld-linux-x86-64.so.2"),
        )
        .unwrap();
    }
    d
}

/// `tar -c <parts> | docker import <changes> - NAME`; the image ID.
fn import(name: &str, tar_args: &[&str], changes: &[&str]) -> String {
    let mut tar = Command::new("tar")
        .args(["-c", "--numeric-owner"])
        .args(tar_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tar");
    let mut import = Command::new("docker");
    import.arg("import");
    for c in changes {
        import.args(["-c", c]);
    }
    let o = import
        .args(["-", name])
        .stdin(Stdio::from(tar.stdout.take().unwrap()))
        .output()
        .expect("run docker import");
    let t = tar.wait_with_output().unwrap();
    assert!(
        t.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&t.stderr)
    );
    assert!(
        o.status.success(),
        "docker import {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    remember(name);
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(id.starts_with("sha256:") && id.len() == 71, "{id:?}");
    IDS.lock().unwrap().push(id.clone());
    id
}

/// The busybox-only image (shell suites): its image ID. Built once.
pub fn shell_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let s = stage(false);
        let root = s.path().to_str().unwrap();
        import(
            &format!("saphan-test-shell:p{}", std::process::id()),
            &["-C", root, "bin", "tmp"],
            &["ENV PATH=/bin", "ENV HOME=/tmp"],
        )
    })
}

/// A busybox image with a fake Go toolchain reached through a symbolic
/// link into a system directory (`env` its `ENV` lines, `extra` run in the
/// staging root by `sh -c` to lay the toolchain out): its image ID. Built
/// on every call, under a name with `tag`.
pub fn linked_toolchain_image(tag: &str, layout: &str, env: &[&str]) -> String {
    let s = stage(false);
    let root = s.path();
    let st = Command::new("sh")
        .args(["-c", layout])
        .current_dir(root)
        .status()
        .expect("run sh");
    assert!(st.success(), "layout {layout:?}");
    let mut parts: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    parts.sort();
    let mut args = vec!["-C", root.to_str().unwrap()];
    args.extend(parts.iter().map(String::as_str));
    let mut changes = vec!["ENV HOME=/tmp"];
    changes.extend(env);
    import(
        &format!("saphan-test-{tag}:p{}", std::process::id()),
        &args,
        &changes,
    )
}

/// The busybox image plus this machine's `git` (its binary and the shared
/// libraries `ldd` names), for suites that ask git about their tree: its
/// image ID. Built once.
pub fn git_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let s = stage(true);
        let root = s.path();
        let git = which_git();
        std::fs::copy(&git, root.join("bin/git")).unwrap();
        let ldd = Command::new("ldd").arg(&git).output().expect("run ldd");
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            // `libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)`
            if let Some((_, rest)) = line.split_once("=> ")
                && let Some(lib) = rest.split_whitespace().next()
                && lib.starts_with('/')
            {
                let dest = root.join(lib.trim_start_matches('/'));
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::copy(lib, &dest).unwrap();
            }
        }
        let mut parts = vec!["bin", "tmp", "lib64"];
        for d in ["lib", "usr"] {
            if root.join(d).exists() {
                parts.push(d);
            }
        }
        let mut args = vec!["-C", root.to_str().unwrap()];
        args.extend(parts);
        import(
            &format!("saphan-test-git:p{}", std::process::id()),
            &args,
            &["ENV PATH=/bin", "ENV HOME=/tmp"],
        )
    })
}

fn which_git() -> std::path::PathBuf {
    ["/usr/bin/git", "/bin/git", "/usr/local/bin/git"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file())
        .expect("git is installed here")
}

/// The Go image (Debian's go-1.19 plus busybox): its image ID. Built once.
pub fn go_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let s = stage(true);
        let root = s.path().to_str().unwrap();
        let mut args = vec!["-C", "/"];
        args.extend(GO_TREES);
        args.extend(["-C", root, "bin", "tmp", "lib", "lib64"]);
        import(
            &format!("saphan-test-go:p{}", std::process::id()),
            &args,
            &[
                "ENV PATH=/usr/lib/go-1.19/bin:/bin",
                "ENV CGO_ENABLED=0",
                "ENV GOCACHE=/tmp/gocache",
                "ENV HOME=/tmp",
                "ENV GOTOOLCHAIN=local",
                "ENV GOFLAGS=-mod=mod",
            ],
        )
    })
}

/// The real saphan-probe image (`images/probe/build`, tagged with this
/// process's id, the tag removed at exit): its image ID. Built once.
pub fn probe_image() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let tag = format!("saphan-test-probe:p{}", std::process::id());
        let o = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("images/probe/build"))
            .args(["--tag", &tag])
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("run images/probe/build");
        assert!(
            o.status.success(),
            "images/probe/build: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // Untag only: the same bytes may be another run's image too.
        remember(&tag);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    })
}

/// Does the local engine answer? `Err` says why not.
pub fn engine_up() -> Result<(), String> {
    if !Path::new("/var/run/docker.sock").exists() {
        return Err("no Docker engine socket at /var/run/docker.sock".into());
    }
    match Command::new("docker")
        .args(["version", "--format", "{{.Server.APIVersion}}"])
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "the Docker engine does not answer: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("no docker CLI: {e}")),
    }
}

/// Containers (any state) carrying label `key=value`, one id a line.
pub fn labelled(key: &str, value: &str) -> String {
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={key}={value}")])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Write `dir/pinned.toml`: the shipped catalog with the docker-oci pin set
/// to the real probe image ([`probe_image`]) — the operator's pinning step.
pub fn pinned_catalog(dir: &Path) -> std::path::PathBuf {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog/capabilities.toml"),
    )
    .unwrap();
    let pinned: String = shipped
        .lines()
        .map(|l| {
            if l.starts_with("image = ") {
                format!("image = \"{}\"\n", probe_image())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let path = dir.join("pinned.toml");
    std::fs::write(&path, pinned).unwrap();
    path
}

/// `machine probe --machine MACHINE --capability docker-oci …` (the real
/// /usr/bin/docker).
pub fn probe_args(machine: &str) -> Vec<String> {
    [
        "machine",
        "probe",
        "--machine",
        machine,
        "--capability",
        "docker-oci",
        "--declared-path",
        "/usr/bin/docker",
        "--workhome",
        "/tmp",
        "--probed-by",
        "tester",
        "--workspace",
        "/w",
    ]
    .map(String::from)
    .to_vec()
}
