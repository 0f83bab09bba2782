//! certify overhead: `saphan certify` wall time vs the raw sequence it
//! wraps — `git worktree add --detach`, the same suite argv, `git worktree
//! remove` — on the same repository, interleaved, in one run.
//!
//! Run: `cargo bench --bench certify`. Prints, from one run:
//!
//! 1. on a generated 8-package Go module (a shell loop without go): medians
//!    and the ratio certify ÷ raw (goal ≤ 1.05);
//! 2. certify's own overhead in ms: the same pair with a suite that does
//!    nothing (`true`), median certify − median raw (goal ≤ 15 ms, the
//!    figure docs/certify.md quotes);
//! 3. the child processes one certify starts (goal: what the work needs —
//!    `git worktree add` and its checkout, the suite, `git worktree remove`
//!    and few more), counted from `strace -ff` of one untimed certify (with
//!    the programs by name and the opens of `/proc` files); skipped with a
//!    line where strace is not installed;
//! 4. the seal's cost: the do-nothing certify sealed (the default) and
//!    with `--seal off`, interleaved — medians and sealed − unsealed
//!    (goal <= 5 ms) — skipped with a line where this machine cannot seal.
//!
//! Figures: docs/certify.md, "What it costs" (9 programs per certify;
//! since 2026-12-03 a declared suite's tree listing runs beside the checkout;
//! the pointer guard's two reads run beside the checkout and the removal,
//! and the second is the pointer's judgement; 10 before that, 8 before the
//! guard, 11 earlier; the overhead against the 15 ms goal must be read on a
//! quiet machine — at load 3.6–4.5 the raw sequence
//! itself takes 30–37 ms instead of 12).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;
/// Rounds of the do-nothing pair (cheap, and the difference is small).
const QUICK_ROUNDS: usize = 21;

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
        .expect("git runs");
    assert!(st.success(), "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let have_go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let argv: Vec<String>;
    if have_go {
        std::fs::write(repo.join("go.mod"), "module example.com/bench\n\ngo 1.19\n").unwrap();
        for p in 0..8 {
            let pkg = repo.join(format!("p{p}"));
            std::fs::create_dir_all(&pkg).unwrap();
            std::fs::write(pkg.join("p.go"), format!("package p{p}\n\nfunc F(n int) int {{ s := 0; for i := 0; i < n; i++ {{ s += i }}; return s }}\n")).unwrap();
            std::fs::write(pkg.join("p_test.go"), format!("package p{p}\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {{ if F(10) != 45 {{ t.Fatal(F(10)) }} }}\n")).unwrap();
        }
        argv = ["go", "test", "-count=1", "-json", "./..."]
            .map(String::from)
            .to_vec();
        println!("suite: default-go on a generated 8-package Go module");
    } else {
        std::fs::write(
            repo.join("suite.sh"),
            "#!/bin/sh\ni=0; while [ $i -lt 200000 ]; do i=$((i+1)); done\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            repo.join("suite.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            home.join("config"),
            "[verify.full]\nargv = \"./suite.sh\"\n",
        )
        .unwrap();
        argv = vec!["./suite.sh".into()];
        println!("suite: a shell loop (no go on this machine)");
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "bench"]);
    let saphan = env!("CARGO_BIN_EXE_saphan");
    let (mr, mc) = pair(saphan, dir.path(), &repo, &home, &argv, ROUNDS);
    println!(
        "raw worktree add + suite + remove: median {:>8.1} ms over {ROUNDS}",
        ms(mr)
    );
    println!(
        "saphan certify:                    median {:>8.1} ms over {ROUNDS}",
        ms(mc)
    );
    println!(
        "ratio certify/raw: {:.3} (goal <= 1.05)",
        mc.as_secs_f64() / mr.as_secs_f64()
    );

    // Overhead alone: a suite that does nothing, so the difference is
    // saphan's own work and not the suite's noise.
    let quick = dir.path().join("quick");
    let qhome = dir.path().join("qhome");
    std::fs::create_dir_all(&quick).unwrap();
    std::fs::create_dir_all(&qhome).unwrap();
    std::fs::write(quick.join("README"), "nothing to test\n").unwrap();
    std::fs::write(
        qhome.join("config"),
        "[verify.full]\nargv = \"true\"\nreport = \"exitcode\"\n",
    )
    .unwrap();
    git(&quick, &["init", "-q", "-b", "main"]);
    git(&quick, &["add", "-A"]);
    git(&quick, &["commit", "-q", "-m", "quick"]);
    let (qr, qc) = pair(
        saphan,
        dir.path(),
        &quick,
        &qhome,
        &["true".to_string()],
        QUICK_ROUNDS,
    );
    println!(
        "do-nothing suite: raw median {:.1} ms, certify median {:.1} ms over {QUICK_ROUNDS}",
        ms(qr),
        ms(qc)
    );
    println!(
        "certify's own overhead: {:.1} ms (goal <= 15 ms)",
        ms(qc) - ms(qr)
    );
    children(saphan, &quick, &qhome);
    seal_cost(saphan, &quick, &qhome);
}

/// The seal's own cost: interleaved medians of the do-nothing certify
/// sealed and `--seal off`, over [`QUICK_ROUNDS`].
fn seal_cost(saphan: &str, repo: &Path, home: &Path) {
    let run = |seal: &str| {
        let (t, stdout) = certify_once(saphan, repo, home, &["--json", "--seal", seal]);
        let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        (t, v["seal"]["state"].as_str().unwrap_or("").to_string())
    };
    if run("auto").1 != "sealed" {
        println!("seal: not measured (this machine cannot seal: install bubblewrap)");
        return;
    }
    run("off");
    let (mut sealed, mut off) = (Vec::new(), Vec::new());
    for _ in 0..QUICK_ROUNDS {
        sealed.push(run("required").0);
        off.push(run("off").0);
    }
    let (s, o) = (median(sealed), median(off));
    println!(
        "do-nothing suite: sealed median {:.1} ms, --seal off median {:.1} ms over {QUICK_ROUNDS}",
        ms(s),
        ms(o)
    );
    println!(
        "the seal's cost: {:.1} ms per certify, sealed/unsealed {:.3} (goal <= 5 ms)",
        ms(s) - ms(o),
        s.as_secs_f64() / o.as_secs_f64()
    );
}

/// One `saphan certify --repo REPO EXTRA…` with `SAPHAN_HOME=home`, which
/// must exit 0: its wall time and stdout.
fn certify_once(saphan: &str, repo: &Path, home: &Path, extra: &[&str]) -> (Duration, Vec<u8>) {
    let t0 = Instant::now();
    let out = Command::new(saphan)
        .arg("certify")
        .args(extra)
        .arg("--repo")
        .arg(repo)
        .env("SAPHAN_HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (t0.elapsed(), out.stdout)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Interleaved medians of (raw sequence, `saphan certify`) over `rounds`,
/// after one warm-up of each.
fn pair(
    saphan: &str,
    scratch: &Path,
    repo: &Path,
    home: &Path,
    argv: &[String],
    rounds: usize,
) -> (Duration, Duration) {
    let raw = || {
        let t0 = Instant::now();
        let wt = scratch.join("raw-wt");
        git(
            repo,
            &[
                "worktree",
                "add",
                "--detach",
                "--quiet",
                wt.to_str().unwrap(),
                "HEAD",
            ],
        );
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&wt)
            .output()
            .unwrap();
        assert!(out.status.success());
        git(
            repo,
            &["worktree", "remove", "--force", wt.to_str().unwrap()],
        );
        t0.elapsed()
    };
    let certify = || certify_once(saphan, repo, home, &[]).0;
    // Warm caches (go build cache, page cache) for both.
    raw();
    certify();
    let (mut r, mut c) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        r.push(raw());
        c.push(certify());
    }
    (median(r), median(c))
}

/// Count what one certify starts, from `strace -f` (untimed): processes
/// (each ends with one `exit_group`; saphan's own is not counted), programs
/// executed (by name), and opens of `/proc/<pid>` files.
fn children(saphan: &str, repo: &Path, home: &Path) {
    // One file per process or thread (`-ff`): calls of processes running
    // at once would otherwise interleave as `<unfinished ...>` and
    // `<... resumed>` halves in one log.
    let logs = home.join("strace");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("log");
    let traced = Command::new("strace")
        .args(["-ff", "-qq", "-e", "signal=none"])
        .args(["-e", "trace=execve,exit_group,openat"])
        .arg("-o")
        .arg(&log)
        .arg(saphan)
        .args(["certify", "--repo", repo.to_str().unwrap()])
        .env("SAPHAN_HOME", home)
        .output();
    let Ok(o) = traced else {
        println!("child processes per certify: not counted (strace is not installed)");
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut text = String::new();
    for f in std::fs::read_dir(&logs).unwrap() {
        text += &std::fs::read_to_string(f.unwrap().path()).unwrap();
    }
    let mut forks = 0;
    let mut programs: std::collections::BTreeMap<String, usize> = Default::default();
    let mut proc_opens = 0;
    for l in text.lines() {
        // `-ff` files carry no pid prefix: each line is one whole call.
        let call = l.trim_start();
        // Every process ends with one exit_group (threads end with exit).
        if call.starts_with("exit_group(") {
            forks += 1;
        }
        if call.starts_with("execve(") && call.ends_with("= 0") {
            let prog = call
                .split('"')
                .nth(1)
                .and_then(|p| p.rsplit('/').next())
                .unwrap_or("?")
                .to_string();
            *programs.entry(prog).or_default() += 1;
        }
        // A process's files (`/proc/<pid>/…`); `/proc/sys/…` is not one.
        let of_a_process = call
            .split("\"/proc/")
            .nth(1)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if call.starts_with("openat(") && of_a_process {
            proc_opens += 1;
        }
    }
    // saphan's own exec and exit_group are not children.
    forks -= 1;
    if let Some(n) = programs.get_mut("saphan") {
        *n -= 1;
    }
    let execs: usize = programs.values().sum();
    let shown: Vec<String> = programs
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(p, n)| format!("{p} x{n}"))
        .collect();
    println!(
        "child processes per certify: {forks} (goal: what the work needs — worktree add and its checkout, the suite, worktree remove, and few more); programs run: {execs} ({}); opens of /proc/<pid> files: {proc_opens}",
        shown.join(", ")
    );
}
