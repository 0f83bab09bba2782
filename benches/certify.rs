//! certify overhead: `saphan certify` wall time vs the raw sequence it
//! wraps — `git worktree add --detach`, the same suite argv, `git worktree
//! remove` — on the same repository, interleaved, in one run.
//!
//! Run: `cargo bench --bench certify`. Prints medians and the ratio (goal ≤ 1.05).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;

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

    let raw = || {
        let t0 = Instant::now();
        let wt = dir.path().join("raw-wt");
        git(
            &repo,
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
            &repo,
            &["worktree", "remove", "--force", wt.to_str().unwrap()],
        );
        t0.elapsed()
    };
    let certify = || {
        let t0 = Instant::now();
        let out = Command::new(saphan)
            .args(["certify", "--repo", repo.to_str().unwrap()])
            .env("SAPHAN_HOME", &home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t0.elapsed()
    };
    // Warm caches (go build cache, page cache) for both.
    raw();
    certify();
    let (mut r, mut c) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        r.push(raw());
        c.push(certify());
    }
    let (mr, mc) = (median(r), median(c));
    println!(
        "raw worktree add + suite + remove: median {:>8.1} ms over {ROUNDS}",
        mr.as_secs_f64() * 1e3
    );
    println!(
        "saphan certify:                    median {:>8.1} ms over {ROUNDS}",
        mc.as_secs_f64() * 1e3
    );
    println!(
        "ratio certify/raw: {:.3} (goal <= 1.05)",
        mc.as_secs_f64() / mr.as_secs_f64()
    );
}
