//! The Slurm lab (`fleet/lab/slurm`, issue 39): a real slurmctld, munge and
//! slurmd nodes in network namespaces on this machine. These tests pin what
//! the lab promises (nodes with their own hostnames, a node without Go,
//! allocations that are given back, nothing left after `down`) and the
//! facts a Slurm transport builds on (fleet/lab/README.md).

use crate::common::slurm::{SlurmLab, job_id_of_salloc};
use crate::common::text;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn slurm_lab_runs_jobs_on_named_nodes_and_down_leaves_nothing() {
    let Some(mut lab) = SlurmLab::up(3, &["n2"]) else {
        return;
    };
    assert_eq!(lab.nodes, ["n0", "n1", "n2"]);
    assert_eq!(lab.bare, ["n2"]);
    assert!(
        lab.conf.is_file(),
        "no slurm.conf at {}",
        lab.conf.display()
    );
    for n in &lab.nodes {
        assert_eq!(lab.node_state(n), "idle", "{n} after up");
    }

    // One task per node, each node with its own hostname.
    let out = lab.run("srun", &["-N3", "--exclusive", "hostname"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "srun -N3 hostname: {stderr}");
    assert_eq!(sorted_lines(&stdout), ["n0", "n1", "n2"]);
    for n in &lab.nodes {
        let out = lab.run("srun", &["-w", n, "-N1", "-n1", "hostname"]);
        assert_eq!(text(&out).0.trim(), n.as_str());
    }

    // Go on a normal node, none on the bare one.
    let out = lab.run("srun", &["-w", "n0", "-N1", "-n1", "go", "version"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "go version on n0: {stderr}");
    assert!(stdout.starts_with("go version go"), "{stdout}");
    let out = lab.run("srun", &["-w", "n2", "-N1", "-n1", "go", "version"]);
    let (stdout, stderr) = text(&out);
    assert_ne!(
        out.status.code(),
        Some(0),
        "go ran on the bare node: {stdout}"
    );
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("go: No such file or directory"), "{stderr}");
    let out = lab.run(
        "srun",
        &[
            "-w",
            "n2",
            "-N1",
            "-n1",
            "sh",
            "-c",
            "ls -A /usr/lib/go-1.19 | wc -l; command -v go gofmt || echo none",
        ],
    );
    assert_eq!(sorted_lines(&text(&out).0), ["0", "none"]);

    // An allocation: the job id is the last word of salloc's stderr line;
    // its nodes come from squeue + scontrol show hostnames; steps run in
    // it with --overlap; scancel gives it back.
    let out = lab.run(
        "salloc",
        &[
            "--no-shell",
            "-N",
            "2",
            "--exclusive",
            "-J",
            "saphan-x",
            "--comment",
            "saphan test",
            "-p",
            "lab",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "salloc: {stderr}");
    assert!(
        stdout.is_empty(),
        "salloc --no-shell printed on stdout: {stdout}"
    );
    let job = job_id_of_salloc(&stderr).unwrap_or_else(|| panic!("no job id in: {stderr}"));
    let nodes = lab.job_nodes(job);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let out = lab.run("squeue", &["-j", &job.to_string(), "-h", "-o", "%j|%k|%T"]);
    assert_eq!(text(&out).0.trim(), "saphan-x|saphan test|RUNNING");

    let jid = job.to_string();
    let target = lab.state.join("stdin-copy");
    let mut child = lab
        .cmd("srun")
        .args([
            "--jobid",
            &jid,
            "-w",
            &nodes[1],
            "--overlap",
            "-N1",
            "-n1",
            "sh",
            "-c",
        ])
        .arg(format!("cat > {}", target.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"line1\nline2\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "srun stdin: {}", text(&out).1);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "line1\nline2\n");

    let out = lab.run(
        "srun",
        &[
            "--jobid",
            &jid,
            "-w",
            &nodes[0],
            "--overlap",
            "-N1",
            "-n1",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stdout, "out\n");
    assert!(stderr.contains("err\n"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "srun: error: {}: task 0: Exited with exit code 3",
            nodes[0]
        )),
        "{stderr}"
    );

    let started = Instant::now();
    let out = lab.run("scancel", &[&jid]);
    assert!(out.status.success(), "scancel: {}", text(&out).1);
    while !lab.squeue().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "squeue still shows {:?}",
            lab.squeue()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lab.job_nodes(job).is_empty());
    let out = lab.run("squeue", &["-h", "-t", "all", "-j", &jid, "-o", "%T"]);
    assert_eq!(text(&out).0.trim(), "CANCELLED");

    // down: no namespace, process, cgroup, lease or state dir is left.
    let state = lab.state.clone();
    lab.down();
    assert_eq!(lab.leftovers(), Vec::<String>::new());
    assert!(!state.exists());
    lab.down(); // safe twice
}

/// A node that dies mid-step: the step's `srun` waits until slurmctld marks
/// the node DOWN (SlurmdTimeout=10: ~25–31 s), then exits **0** with
/// `srun: error: Node failure on nI` — its exit code says nothing; the
/// allocation ends in NODE_FAIL. The node comes back with `start-node`.
#[test]
fn slurm_lab_kill_node_fails_the_step_and_the_allocation() {
    let Some(lab) = SlurmLab::up(2, &[]) else {
        return;
    };
    let job = lab.salloc(2, "saphan-kill");
    let jid = job.to_string();
    let mut step = lab
        .cmd("srun")
        .args([
            "--jobid",
            &jid,
            "-w",
            "n1",
            "--overlap",
            "-N1",
            "-n1",
            "sh",
            "-c",
            "echo started; exec sleep 600",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the task runs (its slurmstepd is there), then pull the plug.
    let mut first = [0u8; 8];
    std::io::Read::read_exact(step.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"started\n");
    let killed = Instant::now();
    lab.kill_node("n1");
    let out = step.wait_with_output().unwrap();
    let took = killed.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        took < Duration::from_secs(120),
        "srun returned only after {took:?}"
    );
    assert!(
        stderr.contains("srun: error: Node failure on n1"),
        "{stderr}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "srun's exit code after a node failure: {stderr}"
    );
    assert!(
        lab.node_state("n1").starts_with("down"),
        "{}",
        lab.node_state("n1")
    );

    let started = Instant::now();
    loop {
        let out = lab.run("squeue", &["-h", "-t", "all", "-j", &jid, "-o", "%T %r"]);
        let st = text(&out).0.trim().to_string();
        if st == "NODE_FAIL NodeDown" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "job state {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(lab.squeue().is_empty(), "{:?}", lab.squeue());

    lab.start_node("n1");
    let started = Instant::now();
    while lab.node_state("n1") != "idle" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "n1 is {}",
            lab.node_state("n1")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
