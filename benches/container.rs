//! Container-class overhead: `saphan certify --class container` wall time vs
//! host-class `saphan certify` of the same suite on the same machine (this
//! one), interleaved, in one run. The suite image is Debian's go-1.19 plus
//! busybox, imported here without a registry (tests/it/common/suite_images.rs).
//!
//! Run: `cargo bench --bench container`. Prints medians and the ratio
//! (goal ≤ 1.3). Prints `SKIPPED: …` where no engine, Go or busybox is.
//!
//! Three runs (2026-12-03, release profile, nothing else running, load
//! average 1.5–2.5 from the bench itself): container ÷ host min 1.143,
//! median 1.200, max 1.244 (the container adds 97 / 166 / 175 ms). Phases
//! of the extra run: connected 7–9 ms, toolchain under 1 (the sealed fill
//! found), created 27–35, started 127–165, logs read 1 ms after the exit,
//! removed 5–12 ms after it. The first (warm-up) container run fills the
//! image's toolchain volumes (src/docker/toolchain.rs; docs/docker.md,
//! "The image's toolchain on volumes"); the timed runs mount them. Three
//! more runs of the final build at load 2.5–5: 1.232 / 1.293 / 1.320.

#[allow(dead_code)]
#[path = "../tests/it/common/suite_images.rs"]
mod suite_images;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

fn run(home: &Path, args: &[&str]) -> std::process::Output {
    let o = Command::new(env!("CARGO_BIN_EXE_saphan"))
        .args(args)
        .env("SAPHAN_HOME", home)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "saphan {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.invalid")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.invalid")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if let Err(why) = suite_images::engine_up() {
        println!("SKIPPED: {why}");
        return;
    }
    if let Some(why) = suite_images::missing(true) {
        println!("SKIPPED: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(home.join("fleet")).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(
        home.join("fleet/machines.toml"),
        "[machine.local]\ntransport = \"local\"\nworkhome = \"/tmp\"\n",
    )
    .unwrap();
    run(&home, &["machine", "measure", "--machine", "local"]);
    let catalog = suite_images::pinned_catalog(dir.path());
    let cat = catalog.to_str().unwrap();
    let mut probe = vec!["--catalog".to_string(), cat.to_string()];
    probe.extend(suite_images::probe_args("local"));
    run(&home, &probe.iter().map(String::as_str).collect::<Vec<_>>());
    std::fs::write(repo.join("go.mod"), "module example.com/bench\n\ngo 1.19\n").unwrap();
    for p in 0..8 {
        let pkg = repo.join(format!("p{p}"));
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("p.go"), format!("package p{p}\n\nfunc F(n int) int {{ s := 0; for i := 0; i < n; i++ {{ s += i }}; return s }}\n")).unwrap();
        std::fs::write(pkg.join("p_test.go"), format!("package p{p}\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {{ if F(10) != 45 {{ t.Fatal(F(10)) }} }}\n")).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "bench"]);
    println!("suite: default-go on a generated 8-package Go module");
    let image = suite_images::go_image();
    let r = repo.to_str().unwrap();
    let host = || {
        let t0 = Instant::now();
        run(&home, &["--catalog", cat, "certify", "--repo", r]);
        t0.elapsed()
    };
    let container = || {
        let t0 = Instant::now();
        run(
            &home,
            &[
                "--catalog",
                cat,
                "certify",
                "--repo",
                r,
                "--class",
                "container",
                "--image",
                image,
            ],
        );
        t0.elapsed()
    };
    // Warm what each class can keep warm (the host's Go build cache; the
    // image's layers in the page cache).
    host();
    container();
    let (mut h, mut c) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        h.push(host());
        c.push(container());
    }
    let (mh, mc) = (median(h), median(c));
    println!(
        "host-class certify:      median {:>8.1} ms over {ROUNDS}",
        mh.as_secs_f64() * 1e3
    );
    println!(
        "container-class certify: median {:>8.1} ms over {ROUNDS}",
        mc.as_secs_f64() * 1e3
    );
    println!(
        "ratio container/host: {:.3} (goal <= 1.3); the container adds {:.0} ms",
        mc.as_secs_f64() / mh.as_secs_f64(),
        (mc.as_secs_f64() - mh.as_secs_f64()) * 1e3
    );
    // Where a container run's time goes: one more (untimed) run with the
    // engine phases (`saphan::container_phase`: connected, created,
    // started, exited, logs-read, removed — ms since the run began) and
    // every command saphan spawned, in ms since saphan started.
    let t0 = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_saphan"))
        .args(["--catalog", cat, "certify", "--repo", r])
        .args(["--class", "container", "--image", image])
        .env("SAPHAN_HOME", &home)
        .env("NO_COLOR", "1")
        .env(
            "RUST_LOG",
            "saphan::container_phase=debug,saphan::exec=debug",
        )
        .output()
        .unwrap();
    let total = t0.elapsed();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let mut phases = Vec::new();
    for l in err.lines() {
        let l: String = strip_ansi(l);
        if let Some(i) = l.find("phase=") {
            let rest = &l[i..];
            phases.push(rest.replace("container phase", "").trim().to_string());
        } else if let Some(i) = l.find("spawned cmd=") {
            let cmd: String = l[i + 12..].chars().take(60).collect();
            phases.push(format!("spawned {cmd}"));
        }
    }
    println!(
        "one container certify, {:.0} ms in all; engine phases (ms since the run began) and commands:",
        total.as_secs_f64() * 1e3
    );
    for p in phases {
        println!("  {p}");
    }
}

fn strip_ansi(l: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in l.chars() {
        if esc {
            if c == 'm' {
                esc = false;
            }
        } else if c == '\x1b' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}
