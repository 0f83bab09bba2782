//! Nodes borrowed from Slurm (issue 39), from one run on the Slurm lab
//! (`fleet/lab/slurm`: munge, slurmctld and slurmd nodes in namespaces of
//! this machine). Prints:
//!
//! 1. `certify --machine @ci --split` over 3 borrowed nodes ÷ `certify
//!    --machine @ci --nodes 1` on a module of 6 packages whose one test each
//!    waits 2 s (goal ≤ 0.5) — the whole invocation each time: sweep,
//!    admission, allocation, ship, run, collect, release;
//!    — and the same with `go test -p=1` (the lab's nodes share this
//!    machine's 2 cores, so plain `go test` overlaps two packages on one
//!    node; `-p=1` is a node that tests one package at a time);
//! 2. the allocation's own cost: `slurm::allocate` of 3 nodes and
//!    `Allocation::release` until the job has left the queue (the median of
//!    10; goal ≤ 1.5 s).
//!
//! The nodes share this machine's cores: a suite that waits splits as it
//! would over real nodes. Run as root: `cargo bench --bench slurm`.

#[path = "../tests/it/common/mod.rs"]
mod common;

use common::slurm::SlurmLab;
use common::{Env, Repo};
use std::time::{Duration, Instant};

fn ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn certify(env: &Env, repo: &Repo, extra: &[&str]) -> (Duration, serde_json::Value) {
    let t0 = Instant::now();
    let o = env
        .cmd()
        .args(["--json", "certify", "--repo", repo.path().to_str().unwrap()])
        .args(["--machine", "@ci"])
        .args(extra)
        .output()
        .unwrap();
    let took = t0.elapsed();
    ok(&o, "certify");
    (took, serde_json::from_slice(&o.stdout).unwrap())
}

/// 6 packages, each with one test that waits 2 s.
fn module() -> Repo {
    let (m, mod_text) = common::gomod::go_mod();
    let mut files: Vec<(String, String)> = vec![(m.to_string(), mod_text)];
    for i in 0..6 {
        files.push((format!("w{i}/w.go"), format!("package w{i}\n")));
        files.push((
            format!("w{i}/w_test.go"),
            format!(
                "package w{i}\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestWait(t *testing.T) {{\n\ttime.Sleep(2 * time.Second)\n}}\n"
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    Repo::new(&refs)
}

fn main() {
    if !std::path::Path::new("/usr/bin/go").exists() {
        println!("SKIPPED: no /usr/bin/go for the lab's nodes");
        return;
    }
    let Some(lab) = SlurmLab::up(3, &[]) else {
        return;
    };
    let env = lab.pool_home(3, "/root/saphan-work");
    ok(
        &env.run(&["machine", "measure", "--machine", "@ci"]),
        "measure",
    );
    ok(
        &env.run(&[
            "machine",
            "probe",
            "--machine",
            "@ci",
            "--capability",
            "go",
            "--declared-path",
            "/usr/bin/go",
        ]),
        "probe",
    );
    let repo = module();
    // Warm every node's mirror and build cache.
    certify(&env, &repo, &["--split"]);
    certify(&env, &repo, &[]);

    let (one, _) = certify(&env, &repo, &["--nodes", "1"]);
    let (split, v) = certify(&env, &repo, &["--split"]);
    assert_eq!(v["split"]["verdict"], "green", "{v}");
    assert_eq!(v["split"]["shards"], 3, "{v}");
    println!(
        "--split over 3 borrowed nodes / 1 borrowed node (6 packages, 2 s each): {:.2}s / {:.2}s = {:.3} (goal <= 0.5)",
        split.as_secs_f64(),
        one.as_secs_f64(),
        split.as_secs_f64() / one.as_secs_f64()
    );

    // The lab's nodes see this machine's 2 cores, so `go test` runs two
    // packages at once on one node (6 packages: 3 rounds of 2 s, not 6).
    // The same module with `-p 1`: each node tests one package at a time,
    // as a one-core node (or a suite that must not overlap) does.
    ok(
        &env.run(&[
            "config",
            "set",
            "verify.full.argv",
            "go,test,-json,-count=1,-p=1,./...",
        ]),
        "config set verify.full.argv",
    );
    ok(
        &env.run(&["config", "set", "verify.full.report", "go-test-json"]),
        "config set verify.full.report",
    );
    certify(&env, &repo, &["--split"]);
    let (one_p1, _) = certify(&env, &repo, &["--nodes", "1"]);
    let (split_p1, v) = certify(&env, &repo, &["--split"]);
    assert_eq!(v["split"]["verdict"], "green", "{v}");
    println!(
        "the same with go test -p=1 (one package at a time per node): {:.2}s / {:.2}s = {:.3} (goal <= 0.5)",
        split_p1.as_secs_f64(),
        one_p1.as_secs_f64(),
        split_p1.as_secs_f64() / one_p1.as_secs_f64()
    );

    // The allocation's own cost, through the library certify uses.
    let machines = std::fs::read_to_string(env.home().join("fleet/machines.toml")).unwrap();
    let parsed =
        saphan::fleet::machines::Machines::parse(&machines, std::path::Path::new("machines.toml"))
            .unwrap();
    let pool = parsed.pools["ci"].clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut costs: Vec<Duration> = (0..10)
        .map(|i| {
            rt.block_on(async {
                let t0 = Instant::now();
                let a = saphan::slurm::allocate(&pool, 3, &format!("bench-{i}"), &[])
                    .await
                    .expect("allocate");
                a.release().await.expect("release");
                t0.elapsed()
            })
        })
        .collect();
    costs.sort();
    println!(
        "allocation of 3 nodes + release: {:.3} s (median of {}; goal <= 1.5 s)",
        costs[costs.len() / 2].as_secs_f64(),
        costs.len()
    );
}
