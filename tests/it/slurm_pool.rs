//! `--machine @POOL` (issue 39): certify on nodes borrowed from a real
//! Slurm cluster of the lab (`fleet/lab/slurm`), measured and probed per
//! node by the real `machine measure` / `machine probe` verbs, admitted
//! from the ledger like any machine, and given back on every path — green,
//! red, a node killed mid-run, Ctrl-C, and `kill -9` of saphan (the next
//! invocation cancels what it left).

use crate::common::gomod;
use crate::common::slurm::SlurmLab;
use crate::common::{Env, Repo, assert_code, json, text};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The nodes' workhome: under each node's private `/root`
/// (`<state>/<node>/home` here).
const WORKHOME: &str = "/root/saphan-work";

/// A saphan home with the pool `ci` of `lab`, borrowing `nodes` nodes.
fn home(lab: &SlurmLab, nodes: u32) -> Env {
    lab.pool_home(nodes, WORKHOME)
}

/// `machine measure` and `machine probe` of go on every node of the pool;
/// probe's output (a bare node's go is absent: exit 1).
fn admit(env: &Env) -> Output {
    let o = env.run(&["machine", "measure", "--machine", "@ci"]);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    assert!(err.contains("pool ci: borrowed Slurm job"), "{err}");
    assert!(err.contains("released Slurm job"), "{err}");
    assert!(out.contains("ci/n0  measured"), "{out}");
    env.run(&[
        "machine",
        "probe",
        "--machine",
        "@ci",
        "--capability",
        "go",
        "--declared-path",
        "/usr/bin/go",
    ])
}

/// A module of `pkgs` packages with one passing test each, plus `extra`.
fn module(pkgs: usize, extra: &[(String, String)]) -> Repo {
    let mut files: Vec<(String, String)> = vec![{
        let (p, c) = gomod::go_mod();
        (p.to_string(), c)
    }];
    for i in 0..pkgs {
        files.extend(gomod::package(&format!("p{i}"), &[], i as i32));
    }
    files.extend(extra.iter().cloned());
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    Repo::new(&refs)
}

/// A package `slow` whose test writes `slow-started` in its directory (in
/// the scratch tree: the one place a sealed suite writes), then sleeps.
fn slow_package(seconds: u32) -> Vec<(String, String)> {
    vec![
        ("slow/slow.go".into(), "package slow\n".into()),
        (
            "slow/slow_test.go".into(),
            format!(
                "package slow\n\nimport (\n\t\"os\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) {{\n\tif err := os.WriteFile(\"slow-started\", nil, 0o644); err != nil {{\n\t\tt.Fatal(err)\n\t}}\n\ttime.Sleep({seconds} * time.Second)\n}}\n"
            ),
        ),
    ]
}

fn certify(env: &Env, repo: &Repo, extra: &[&str]) -> Output {
    crate::common::fleet::certify(env, repo, "@ci", extra)
}

/// No job of saphan's is left in the cluster's queue: a cancelled job may
/// show COMPLETING while Slurm ends its processes, so this waits as long
/// as a release does (`slurm::RELEASE_BOUND`) for the queue to drain.
fn no_saphan_job(lab: &SlurmLab) {
    let t0 = Instant::now();
    loop {
        let left: Vec<String> = lab
            .squeue()
            .into_iter()
            .filter(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|n| n.starts_with("saphan-"))
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            t0.elapsed() < saphan::slurm::RELEASE_BOUND,
            "saphan left allocations behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn records(v: &Value) -> &Vec<Value> {
    v["records"].as_array().unwrap()
}

/// The node (of `nodes`) whose scratch tree holds `name`, once one does.
fn node_with(lab: &SlurmLab, name: &str, bound: Duration) -> String {
    let t0 = Instant::now();
    loop {
        for n in &lab.nodes {
            let base = lab.state.join(n).join("home/saphan-work/saphan");
            if crate::common::in_scratch_tree(&base, name).is_some() {
                return n.clone();
            }
        }
        assert!(t0.elapsed() < bound, "no node's scratch tree holds {name}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn_certify(env: &Env, repo: &Repo, extra: &[&str]) -> Child {
    let mut c: Command = env.cmd();
    c.args([
        "--json",
        "certify",
        "--repo",
        &repo.path_str(),
        "--machine",
        "@ci",
    ])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.spawn().unwrap()
}

fn lab_with_go(nodes: usize, bare: &[&str]) -> Option<SlurmLab> {
    if crate::common::skip_unless(
        Path::new("/usr/bin/go").exists(),
        "no /usr/bin/go for the Slurm lab's nodes",
    ) {
        return None;
    }
    SlurmLab::up(nodes, bare)
}

/// `--split` over the three nodes that have Go of a four-node partition:
/// the bare node is left out with its refusal and never used; green with
/// the whole module's count and complete coverage; each record is the
/// machine `ci/<node>` with the allocation's job id; the pointer moves;
/// and the allocation is given back. A red then names the test, moves
/// nothing, and gives the nodes back too.
#[test]
fn split_over_borrowed_nodes_is_green_with_coverage_and_gives_them_back() {
    let Some(lab) = lab_with_go(4, &["n3"]) else {
        return;
    };
    let env = home(&lab, 3);
    let probe = admit(&env);
    let (out, _) = text(&probe);
    assert_code(&probe, 1);
    assert!(out.contains("ci/n3  go"), "{out}");
    assert!(out.contains("absent"), "{out}");
    let repo = module(5, &[]);
    let o = certify(&env, &repo, &["--split"]);
    let (_, err) = text(&o);
    assert_code(&o, 0);
    let v = json(&o);
    let s = &v["split"];
    assert_eq!(s["verdict"], "green", "{v}\n{err}");
    assert_eq!(s["count"], 5, "{v}");
    assert_eq!(s["shards"], 3, "{v}");
    assert_eq!(s["coverage"]["complete"], true, "{v}");
    let b = &v["borrowed"];
    assert_eq!(b["pool"], "ci", "{v}");
    let job = b["job"].as_u64().expect("the job id");
    let mut nodes: Vec<&str> = b["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["n0", "n1", "n2"],
        "the bare node is never borrowed: {v}"
    );
    let left: Vec<&str> = b["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["ci/n3"], "{v}");
    assert_eq!(
        b["left_out"][0]["error"], "verification-toolchain-absent",
        "{v}"
    );
    let mut machines: Vec<&str> = records(&v)
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    machines.sort();
    assert_eq!(machines, ["ci/n0", "ci/n1", "ci/n2"], "{v}");
    for r in records(&v) {
        assert_eq!(r["slurm_job"], job, "{r}");
        assert_eq!(r["verdict"], "green", "{r}");
        assert_eq!(r["class"], "host", "{r}");
    }
    assert_eq!(repo.verified().as_deref(), Some(repo.head().as_str()));
    assert!(
        b["released"]
            .as_str()
            .unwrap()
            .starts_with(&format!("released job {job}")),
        "{v}"
    );
    no_saphan_job(&lab);

    // The human lines say what was borrowed and left out.
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--machine",
        "@ci",
        "--nodes",
        "2",
    ]);
    let (out, _) = text(&o);
    assert_code(&o, 0);
    assert!(
        out.contains("pool ci: left out ci/n3 (verification-toolchain-absent)"),
        "{out}"
    );
    assert!(out.contains("pool ci: borrowed Slurm job"), "{out}");
    let v = json(&certify(&env, &repo, &["--nodes", "2"]));
    assert_eq!(records(&v).len(), 2, "--nodes 2 borrows two nodes: {v}");
    no_saphan_job(&lab);

    // A red names the test and gives the nodes back.
    let red = repo.commit(
        &[(
            "p1/p1_test.go",
            "package p1\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { t.Fatal(\"broken\") }\n",
        )],
        "red",
    );
    let o = certify(&env, &repo, &["--split"]);
    assert_code(&o, 1);
    let v = json(&o);
    assert_eq!(v["split"]["verdict"], "red", "{v}");
    let names = v["split"]["named_tests"].to_string();
    assert!(names.contains("TestBroken"), "{v}");
    assert_ne!(repo.verified().as_deref(), Some(red.as_str()));
    no_saphan_job(&lab);
}

/// A node killed while its shard runs: Slurm's node failure is an
/// infrastructure failure, and the shard re-runs on another node of the
/// allocation into a green (the retry's record says `retry_of`); the
/// allocation is given back.
#[test]
fn a_node_killed_mid_run_fails_over_into_a_green() {
    let Some(lab) = lab_with_go(3, &[]) else {
        return;
    };
    let env = home(&lab, 3);
    assert_code(&admit(&env), 0);
    let repo = module(2, &slow_package(8));
    let child = spawn_certify(&env, &repo, &["--split"]);
    let node = node_with(&lab, "slow/slow-started", Duration::from_secs(120));
    lab.kill_node(&node);
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert_code(&o, 0);
    let v = json(&o);
    assert_eq!(v["split"]["verdict"], "green", "{v}\n{err}");
    assert_eq!(v["split"]["coverage"]["complete"], true, "{v}");
    let lost = records(&v)
        .iter()
        .find(|r| r["machine"] == format!("ci/{node}"))
        .unwrap_or_else(|| panic!("no record of the killed node {node}: {v}"));
    assert_eq!(lost["verdict"], "measurement-failed", "{lost}");
    let retry = records(&v)
        .iter()
        .find(|r| r["retry_of"] == lost["id"])
        .unwrap_or_else(|| panic!("no retry of {}: {v}", lost["id"]));
    assert_eq!(retry["verdict"], "green", "{retry}");
    assert_ne!(retry["machine"], lost["machine"], "{retry}");
    no_saphan_job(&lab);
}

/// Ctrl-C while the suite runs: the steps are cancelled and the allocation
/// released before saphan exits.
#[test]
fn ctrl_c_gives_the_nodes_back() {
    let Some(lab) = lab_with_go(2, &[]) else {
        return;
    };
    let env = home(&lab, 2);
    assert_code(&admit(&env), 0);
    let repo = module(1, &slow_package(60));
    let child = spawn_certify(&env, &repo, &[]);
    node_with(&lab, "slow/slow-started", Duration::from_secs(120));
    assert!(!lab.squeue().is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    no_saphan_job(&lab);
}

/// `kill -9` of saphan leaves its allocation behind; the next invocation
/// on the pool finds it (its saphan is gone), cancels it, says so, and
/// certifies.
#[test]
fn after_kill_9_the_next_run_cancels_the_allocation_left_behind() {
    let Some(lab) = lab_with_go(2, &[]) else {
        return;
    };
    let env = home(&lab, 1);
    assert_code(&admit(&env), 0);
    let slow = module(1, &slow_package(60));
    let mut child = spawn_certify(&env, &slow, &[]);
    node_with(&lab, "slow/slow-started", Duration::from_secs(120));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = lab.squeue();
    assert!(
        left.iter().any(|l| l.contains("saphan-")),
        "kill -9 leaves the allocation: {left:?}"
    );
    let repo = module(1, &[]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "@ci"]);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    assert!(
        out.contains("pool ci: cancelled Slurm job") && out.contains("is gone"),
        "{out}\n{err}"
    );
    no_saphan_job(&lab);
}

/// What a pool refuses before it borrows anything: an unknown pool names
/// the pools there are, `--nodes` without a pool is a usage refusal, and
/// a pool with `--class container` says its nodes run the host class.
#[test]
fn a_pool_refuses_what_it_cannot_run_before_borrowing() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(
        env.home().join("fleet/machines.toml"),
        "[pool.ci]\ntransport = \"slurm\"\npartition = \"lab\"\nnodes = 2\nworkhome = \"/root/w\"\n",
    )
    .unwrap();
    let repo = module(1, &[]);
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--machine", "@gpu"]);
    let err = crate::common::assert_refused(&o, "pool-unknown");
    assert!(err.contains("ci"), "{err}");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--nodes", "2"]);
    crate::common::assert_refused(&o, "usage");
    let o = env.run(&[
        "certify",
        "--repo",
        &repo.path_str(),
        "--machine",
        "@ci",
        "--class",
        "container",
        "--image",
        &format!("sha256:{}", "0".repeat(64)),
    ]);
    let err = crate::common::assert_refused(&o, "machine-list-invalid");
    assert!(err.contains("host class"), "{err}");
}

/// Ctrl-C while the pool's nodes are awaited (the partition is busy): the
/// request is withdrawn at once — `interrupted`, exit 3, no record, and no
/// job of saphan's left pending or granted once the nodes free up.
#[test]
fn ctrl_c_while_waiting_for_nodes_withdraws_the_request() {
    let Some(lab) = lab_with_go(2, &[]) else {
        return;
    };
    let env = home(&lab, 2);
    assert_code(&admit(&env), 0);
    let holder = lab.salloc(2, "holder");
    let repo = module(1, &[]);
    let child = spawn_certify(&env, &repo, &[]);
    let t0 = Instant::now();
    while !lab
        .squeue()
        .iter()
        .any(|l| l.contains(" saphan-") && l.ends_with("PENDING"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "saphan's request never pended: {:?}",
            lab.squeue()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_code(&o, 3);
    assert!(
        format!("{out}{err}").contains("interrupted while waiting for 2 node(s)"),
        "{out}\n{err}"
    );
    assert!(repo.records().is_empty(), "nothing was measured");
    let o = lab.run("scancel", &[&holder.to_string()]);
    assert!(o.status.success());
    let t0 = Instant::now();
    while lab.squeue().iter().any(|l| l.contains(" holder ")) {
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", lab.squeue());
        std::thread::sleep(Duration::from_millis(50));
    }
    no_saphan_job(&lab);
}
