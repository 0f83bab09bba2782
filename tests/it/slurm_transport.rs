//! The Slurm transport and allocation (issue 39), on a real cluster of the
//! Slurm lab (`fleet/lab/slurm`): `slurm::allocate` borrows nodes with
//! salloc, `Transport::Slurm` runs commands on them as srun steps under the
//! same supervisor as SSH, and every allocation is given back — released,
//! dropped, or swept once its saphan is gone.

use crate::common::slurm::SlurmLab;
use saphan::error::Refusal;
use saphan::exec::{Cmd, Sink, Termination};
use saphan::outcome::FailureKind;
use saphan::slurm::{self, Owner, Pool};
use saphan::transport::{Transport, TransportError};
use std::time::{Duration, Instant};

fn pool(lab: &SlurmLab, nodes: u32) -> Pool {
    Pool {
        name: "ci".into(),
        partition: "lab".into(),
        nodes,
        workhome: "/tmp/saphan-slurm-work".into(),
        time_limit: Some("30".into()),
        account: None,
        constraint: None,
        conf: Some(lab.conf.clone()),
        allocation_wait: Duration::from_secs(30),
    }
}

/// The pid a command on the node wrote to `file` (a path on the node),
/// once it is there (bounded).
async fn pid_on_node(t: &Transport, file: &str) -> i32 {
    let t0 = Instant::now();
    loop {
        let o = t
            .exec(
                &["cat".to_string(), file.to_string()],
                Duration::from_secs(30),
            )
            .await
            .unwrap();
        if let Ok(p) = o.stdout_str().trim().parse() {
            return p;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no pid in {file}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait (bounded) until `cond` holds.
async fn until(what: &str, bound: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    let mut pause = Duration::from_millis(10);
    while !cond() {
        assert!(t0.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

fn alive(pid: i32) -> bool {
    saphan::procs::proc_stat(pid).is_some_and(|s| !s.ended())
}

fn job_listed(lab: &SlurmLab, job: u64) -> bool {
    lab.squeue()
        .iter()
        .any(|l| l.split_whitespace().next() == Some(&job.to_string()))
}

async fn run(t: &Transport, cmd: Cmd) -> saphan::exec::Output {
    t.run(cmd.timeout(Duration::from_secs(60)))
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", e.name()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_transport_runs_commands_on_a_borrowed_node_as_ssh_does() {
    let Some(lab) = SlurmLab::up(2, &[]) else {
        return;
    };
    let pool = pool(&lab, 2);
    let id = format!("t1-{}", std::process::id());
    let alloc = slurm::allocate(&pool, 2, &id, &[])
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", e.name()));
    assert_eq!(alloc.nodes, ["n0", "n1"]);
    assert_eq!(alloc.name, format!("saphan-{id}"));
    // The comment names this process as the owner.
    let o = lab.run(
        "squeue",
        &["-h", "-j", &alloc.job.to_string(), "-o", "%j|%k"],
    );
    let listed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let (name, comment) = listed.split_once('|').unwrap();
    assert_eq!(name, alloc.name);
    assert_eq!(Owner::parse(comment), Some(Owner::current()), "{listed}");
    let t = alloc.transport("n1");
    assert_eq!(t.describe(), format!("slurm n1 (job {})", alloc.job));
    assert!(t.connection_gone().await.is_none());

    // Exit code, stdout and stderr exactly; it ran on the node.
    let o = run(
        &t,
        Cmd::new("sh").args(["-c", "hostname; printf 'err\\n' >&2; exit 3"]),
    )
    .await;
    assert_eq!(o.status, Termination::Exited(3), "{}", o.stderr_str());
    assert_eq!(o.stdout, b"n1\n");
    assert_eq!(o.stderr, b"err\n");

    // Every word arrives as given — `:` too, which srun alone would take
    // for a heterogeneous job's separator — and stdin is forwarded whole.
    let o = run(
        &t,
        Cmd::new("sh")
            .args([
                "-c",
                "printf '<%s>' \"$@\"; cat",
                "x",
                ":",
                "a b",
                "",
                "'\"$HOME",
            ])
            .stdin(b"in\0put:\n".to_vec()),
    )
    .await;
    assert_eq!(o.status, Termination::Exited(0), "{}", o.stderr_str());
    assert_eq!(o.stdout, b"<:><a b><><'\"$HOME>in\0put:\n");

    // The node's login, not this machine's environment; the changes apply.
    let o = run(
        &t,
        Cmd::new("sh")
            .args(["-c", "echo \"$A|$USER|$PWD\"; env"])
            .env("A", "x y")
            .env_remove("TMPDIR"),
    )
    .await;
    let env = o.stdout_str();
    let first = env.lines().next().unwrap_or_default();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap();
    assert_eq!(
        first,
        format!("x y|{}|{}", user.name, user.dir.display()),
        "{env}"
    );
    assert!(!env.lines().any(|l| l.starts_with("TMPDIR=")), "{env}");
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO") || k == "RUST_BACKTRACE" {
            assert!(
                !env.lines().any(|l| l.starts_with(&format!("{k}="))),
                "{k} leaked to the node:\n{env}"
            );
        }
    }
    let o = run(&t, Cmd::new("pwd").cwd("/tmp")).await;
    assert_eq!(o.stdout, b"/tmp\n");

    // Nothing runs: the same refusals as over SSH.
    let e = t
        .run(Cmd::new("saphan-no-such-program").timeout(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert_eq!(e.name(), "spawn", "{e}");
    let e = t
        .run(
            Cmd::new("true")
                .cwd("/no/such/dir")
                .timeout(Duration::from_secs(30)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, TransportError::RemoteSpawn { alias, .. } if alias == "ci/n1"),
        "{e}"
    );

    // stdout to a local file; a capture past 16 MiB is lost whole.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out");
    let o = run(
        &t,
        Cmd::new("sh")
            .args(["-c", "seq 1 100000"])
            .stdout(Sink::File(f.clone())),
    )
    .await;
    assert_eq!(o.status, Termination::Exited(0));
    assert!(o.stdout.is_empty());
    let seq = std::fs::read_to_string(&f).unwrap();
    assert_eq!(seq.lines().count(), 100000);
    assert_eq!(seq.lines().last(), Some("100000"));
    let o = run(
        &t,
        Cmd::new("sh").args(["-c", "head -c 17000000 /dev/zero"]),
    )
    .await;
    assert_eq!(o.status, Termination::OutputLost, "{}", o.stderr_str());
    assert!(o.stdout.is_empty());
    assert!(
        o.lost_why().unwrap().contains("16 MiB"),
        "{:?}",
        o.lost_why()
    );

    // The budget is enforced on the node: the whole group goes, a
    // grandchild included.
    let t0 = Instant::now();
    let o = t
        .run(
            Cmd::new("sh")
                .args(["-c", "sleep 300 & echo $!; wait"])
                .timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(o.status, Termination::TimedOut, "{}", o.stderr_str());
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    // The node has its own PID namespace: the pid it printed is the
    // node's; gone means no process of the node has it.
    let grandchild: i32 = o.stdout_str().trim().parse().unwrap();
    until(
        "the budget's grandchild to be gone",
        Duration::from_secs(10),
        || lab.host_pid("n1", grandchild).is_none(),
    )
    .await;

    // An attempt's command gets the supervisor's containment word.
    let o = run(
        &t,
        Cmd::new("true").env(saphan::exec::SCRATCH_MARKER, "/tmp/saphan-slurm-x"),
    )
    .await;
    assert_eq!(o.status, Termination::Exited(0));
    assert!(t.containment().await.is_some());

    // put / get: the same bytes both ways, the mode kept.
    let bytes: Vec<u8> = (0..1_000_000u64).map(|i| (i * 7919 % 251) as u8).collect();
    let src = dir.path().join("src");
    std::fs::write(&src, &bytes).unwrap();
    std::fs::set_permissions(
        &src,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o640),
    )
    .unwrap();
    let remote = format!("/tmp/saphan-slurm-put-{}", std::process::id());
    t.put(&src, &remote).await.unwrap();
    let o = run(&t, Cmd::new("stat").args(["-c", "%a %s", &remote])).await;
    assert_eq!(o.stdout_str(), "640 1000000");
    let back = dir.path().join("back");
    t.get(&remote, &back).await.unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), bytes);
    let e = t.get("/no/such/file", &back).await.unwrap_err();
    assert_eq!(e.name(), "copy", "{e}");
    let _ = run(&t, Cmd::new("rm").args(["-f", &remote])).await;

    // exec: the argv's own status and stderr (srun's report of the exit
    // is not the program's).
    let o = t
        .exec(
            &["sh", "-c", "echo hi; echo oops >&2; exit 4"].map(String::from),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(o.status, Termination::Exited(4));
    assert_eq!(o.stdout, b"hi\n");
    assert_eq!(o.stderr_str(), "oops");

    // No socket forwarding: refused by name.
    let e = t
        .open_unix_socket("/var/run/docker.sock")
        .await
        .err()
        .unwrap();
    assert_eq!(e.name(), "transport-unsupported", "{e}");

    // A dropped run (Ctrl-C) leaves nothing running on the node.
    let pidfile = format!("/tmp/saphan-slurm-drop-{}", std::process::id());
    let script = format!("echo $$ > {pidfile}; exec sleep 300");
    let t2 = t.clone();
    let running = tokio::spawn(async move {
        t2.run(
            Cmd::new("sh")
                .args(["-c", &script])
                .timeout(Duration::from_secs(600)),
        )
        .await
    });
    let sleeper = pid_on_node(&t, &pidfile).await;
    let sleeper = lab
        .host_pid("n1", sleeper)
        .expect("the sleeper runs on n1 (its pid here, from the node's)");
    assert!(alive(sleeper));
    running.abort();
    let _ = running.await;
    until(
        "the dropped run's group to be gone",
        Duration::from_secs(10),
        || !alive(sleeper),
    )
    .await;
    let _ = run(&t, Cmd::new("rm").args(["-f", &pidfile])).await;

    // Given back: the job leaves squeue.
    let job = alloc.job;
    let released = alloc.release().await.unwrap();
    assert_eq!(released.job, job);
    assert!(!job_listed(&lab, job), "{:?}", lab.squeue());
    // The node's allocation is gone: a step there now fails by name.
    let e = t
        .run(Cmd::new("true").timeout(Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert_eq!(e.name(), "slurm-step-failed", "{e}");
    assert!(t.connection_gone().await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_is_slurms_failure_and_the_other_node_runs_on() {
    let Some(lab) = SlurmLab::up(2, &[]) else {
        return;
    };
    let pool = pool(&lab, 2);
    let alloc = slurm::allocate(&pool, 2, &format!("t2-{}", std::process::id()), &[])
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", e.name()));
    let (t0, t1) = (alloc.transport("n0"), alloc.transport("n1"));
    let pidfile = format!("/tmp/saphan-slurm-kill-{}", std::process::id());
    let script = format!("echo $$ > {pidfile}; exec sleep 300");
    let t1c = t1.clone();
    let running = tokio::spawn(async move {
        t1c.run(
            Cmd::new("sh")
                .args(["-c", &script])
                .timeout(Duration::from_secs(600)),
        )
        .await
    });
    let sleeper = pid_on_node(&t1, &pidfile).await;
    let sleeper = lab
        .host_pid("n1", sleeper)
        .expect("the sleeper runs on n1 (its pid here, from the node's)");
    let _ = t1
        .exec(
            &["rm".into(), "-f".into(), pidfile.clone()],
            Duration::from_secs(30),
        )
        .await;
    lab.kill_node("n1");
    assert!(!alive(sleeper), "kill-node kills the node's processes");
    // Slurm notices at its SlurmdTimeout (10 s in the lab; ~30 s measured).
    let e = tokio::time::timeout(Duration::from_secs(120), running)
        .await
        .expect("the step on the killed node ends")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.name(), "slurm-step-failed", "{e}");
    let kind = e.failure_kind().unwrap();
    assert_eq!(kind, FailureKind::SlurmStepFailed);
    assert!(kind.is_infrastructure());
    assert!(e.to_string().contains("Node failure on n1"), "{e}");
    assert!(e.to_string().starts_with("ci/n1: "), "{e}");
    assert!(t1.connection_gone().await.is_some());
    // The job runs on without n1; n0 still serves.
    assert!(alloc.job_gone().await.unwrap().is_none());
    let why = alloc.node_gone("n1").await.unwrap();
    assert!(why.is_some());
    assert_eq!(alloc.node_gone("n0").await.unwrap(), None);
    let o = run(&t0, Cmd::new("hostname")).await;
    assert_eq!(o.stdout, b"n0\n");
    assert!(t0.connection_gone().await.is_none());
    let job = alloc.job;
    alloc.release().await.unwrap();
    assert!(!job_listed(&lab, job), "{:?}", lab.squeue());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_are_given_back_when_dropped_or_their_saphan_is_gone() {
    let Some(lab) = SlurmLab::up(3, &[]) else {
        return;
    };
    let pool = pool(&lab, 1);
    let nodes = slurm::partition_nodes(&pool).await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
        ["n0", "n1", "n2"]
    );
    assert!(nodes.iter().all(|n| n.usable()), "{nodes:?}");

    // A live owner's allocation.
    let live = slurm::allocate(&pool, 1, &format!("live-{}", std::process::id()), &[])
        .await
        .unwrap();
    // Excluded nodes are left out.
    let other = slurm::allocate(&pool, 1, "excl", &[live.nodes[0].clone(), "n2".to_string()])
        .await
        .unwrap();
    assert_ne!(other.nodes, live.nodes);
    assert_ne!(other.nodes, ["n2"]);
    // Dropped without release: cancelled in the background.
    let dropped = other.job;
    drop(other);
    until(
        "the dropped allocation to go",
        Duration::from_secs(20),
        || !job_listed(&lab, dropped),
    )
    .await;

    // An allocation whose saphan died (kill -9): its comment names a
    // process that has ended. And a job of another name with the same
    // comment, which is not saphan's.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let dead = Owner::of(child.id()).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dead.is_alive());
    let salloc = |name: &str| {
        let out = lab.run(
            "salloc",
            &[
                "--no-shell",
                "-N1",
                "--exclusive",
                "-p",
                "lab",
                "-J",
                name,
                &format!("--comment={}", dead.comment()),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        crate::common::slurm::job_id_of_salloc(&err).unwrap_or_else(|| panic!("{err}"))
    };
    let orphan = salloc("saphan-orphan");
    let foreign = salloc("nightly-build");
    let swept = slurm::sweep(&pool).await.unwrap();
    assert_eq!(
        swept.iter().map(|s| s.job).collect::<Vec<_>>(),
        [orphan],
        "{swept:?}"
    );
    assert_eq!(swept[0].owner, dead);
    assert!(swept[0].to_string().contains(&format!("job {orphan}")));
    until("the orphan to go", Duration::from_secs(20), || {
        !job_listed(&lab, orphan)
    })
    .await;
    assert!(
        job_listed(&lab, live.job),
        "the live owner's allocation stays"
    );
    assert!(job_listed(&lab, foreign), "a job not named saphan-* stays");
    assert!(slurm::sweep(&pool).await.unwrap().is_empty());
    lab.run("scancel", &[&foreign.to_string()]);

    // Refusals, by name.
    let mut busy = pool.clone();
    busy.allocation_wait = Duration::from_secs(2);
    let e = slurm::allocate(&busy, 3, "busy", &[]).await.unwrap_err();
    assert_eq!(e.name(), "slurm-allocation-timeout", "{e}");
    let mut nope = pool.clone();
    nope.partition = "nope".into();
    let e = slurm::allocate(&nope, 1, "nope", &[]).await.unwrap_err();
    assert_eq!(e.name(), "slurm-allocation-failed", "{e}");
    assert!(e.to_string().contains("nope"), "{e}");
    let mut gone = pool.clone();
    gone.conf = Some("/no/such/slurm.conf".into());
    let t0 = Instant::now();
    let e = slurm::allocate(&gone, 1, "gone", &[]).await.unwrap_err();
    assert_eq!(e.name(), "slurm-unavailable", "{e}");
    assert!(e.to_string().contains("SLURM_CONF"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));

    let job = live.job;
    live.release().await.unwrap();
    assert!(!job_listed(&lab, job));
    until("every allocation to go", Duration::from_secs(20), || {
        lab.squeue().is_empty()
    })
    .await;
}
