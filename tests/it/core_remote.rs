//! The measurement core against a tree on a real sshd lab host, through
//! `Transport::Ssh` — the same code local certify runs as `Transport::Local`:
//! scratch worktree at a stable path (healing a stale registration),
//! provisions placed and hashed on the machine, the suite run there, its
//! junit-xml reports brought back and parsed, the tree removed.
//!
//! Lab hosts share this machine's filesystem (own network, mount and UTS
//! namespaces, own /root), so a repository in /tmp is reachable there.

use crate::common;

use crate::common::lab::Lab;
use saphan::config::Provision;
use saphan::measure::{self, Budget, Plan};
use saphan::report::{ReportKind, Verdict};
use saphan::suite::{ResolvedSuite, SuiteSource};
use saphan::transport::{SshOptions, Transport, resolve};
use std::path::Path;
use std::time::Duration;

async fn connect(lab: &Lab, host: &str) -> Transport {
    let s = resolve(&lab.ssh_config_path(), host).await.unwrap();
    Transport::connect_ssh(&s, &SshOptions::default())
        .await
        .unwrap()
}

fn junit_suite() -> ResolvedSuite {
    ResolvedSuite {
        argv: vec!["./suite.sh".into()],
        report: ReportKind::JunitXml,
        report_path: Some("out/*.xml".into()),
        timeout: None,
        seal: None,
        source: SuiteSource::Config("verify.full"),
    }
}

const SUITE: &str = "#!/bin/sh
set -e
test -f docs/contract.yaml
mkdir -p out
n=$(hostname)
cat > out/a.xml <<X
<testsuite name=\"s\" tests=\"2\" failures=\"0\"><testcase name=\"on-$n\"/><testcase name=\"b\"/></testsuite>
X
git status --porcelain > out/status.txt
echo stdout-of-the-suite
echo stderr-of-the-suite >&2
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_measures_a_tree_on_an_ssh_machine() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m1").await;
    let repo = common::Repo::new(&[("suite.sh", SUITE), ("README", "x\n")]);
    let sha = repo.head();
    let scratch_home = tempfile::tempdir().unwrap();
    let path = scratch_home.path().join("k").join("tree");
    let source = scratch_home.path().join("contract.yaml");
    std::fs::write(&source, b"contract: 1\n").unwrap();
    let provisions = vec![Provision {
        alias: "contract".into(),
        repo: repo.path().to_path_buf(),
        source: source.clone(),
        dest: "docs/contract.yaml".into(),
    }];

    // A stale, locked registration of the stable path (a killed earlier
    // attempt) is healed; the operator's other worktree is untouched.
    let other = scratch_home.path().join("operator-wt");
    common::git(
        repo.path(),
        &[
            "worktree",
            "add",
            "--detach",
            "-q",
            other.to_str().unwrap(),
            &sha,
        ],
    );
    common::git(
        repo.path(),
        &[
            "worktree",
            "add",
            "--detach",
            "-q",
            path.to_str().unwrap(),
            &sha,
        ],
    );
    // What a killed `git worktree add` leaves: git's own `initializing`
    // lock and the attempt's marker (any other lock is someone else's:
    // scratch-path-foreign).
    common::git(
        repo.path(),
        &[
            "worktree",
            "lock",
            "--reason",
            "initializing",
            path.to_str().unwrap(),
        ],
    );
    std::fs::remove_dir_all(&path).unwrap();
    let marker = saphan::worktree::attempt_marker(&path);
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, "").unwrap();

    let logs = tempfile::tempdir().unwrap().keep();
    let scratch = saphan::worktree::add_at(&t, repo.path(), &path, &sha)
        .await
        .unwrap();
    assert!(path.join("suite.sh").exists());
    let suite = junit_suite();
    let budget = Budget::attempt(Some(Duration::from_secs(60)), &suite, "verify.full");
    let intr = saphan::cancel::Token::never();
    let run = measure::run_then_remove(
        scratch,
        Plan {
            suite: &suite,
            budget: &budget,
            provisions: &provisions,
            extra_env: &[],
            report_root: None,
            keep_stdout: None,
            log_dir: Some(&logs),
            catalog: None,
            log_deferred: false,
            vouched: None,
            seal: None,
        },
        &intr,
    )
    .await
    .unwrap();
    assert_eq!(
        run.measurement.verdict,
        Verdict::Green,
        "{:?} {}",
        run.measurement.notes,
        run.stderr_tail
    );
    assert_eq!(run.measurement.count, Some(2));
    assert_eq!(run.measurement.report_files, vec!["out/a.xml".to_string()]);
    assert_eq!(run.placed.len(), 1);
    assert_eq!(
        run.placed[0].sha256,
        saphan::fsutil::sha256_hex(b"contract: 1\n")
    );
    assert!(!path.exists(), "the scratch tree was removed");
    // The suite's stdout and stderr came back into the local log.
    let log = run.log.as_ref().expect("a log was kept");
    let text = std::fs::read_to_string(&log.path).unwrap();
    assert!(text.contains("stdout-of-the-suite"), "{text}");
    assert!(text.contains("stderr-of-the-suite"), "{text}");
    assert_eq!(log.sha256, saphan::fsutil::sha256_hex(text.as_bytes()));
    let _ = std::fs::remove_dir_all(&logs);
    let wts = repo.worktrees();
    assert_eq!(wts.len(), 2, "{wts:?}");
    assert!(wts.iter().any(|w| w.ends_with("operator-wt")), "{wts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_symlink_leaving_the_tree_on_the_machine_is_refused() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("x.xml"),
        "<testsuite tests=\"1\"><testcase name=\"a\"/></testsuite>",
    )
    .unwrap();
    let script = format!(
        "#!/bin/sh\nmkdir -p out && ln -s '{}/x.xml' out/a.xml\n",
        outside.path().display()
    );
    let repo = common::Repo::new(&[("suite.sh", &script)]);
    let sha = repo.head();
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("k").join("tree");
    let scratch = saphan::worktree::add_at(&t, repo.path(), &path, &sha)
        .await
        .unwrap();
    let suite = junit_suite();
    let budget = Budget::attempt(Some(Duration::from_secs(60)), &suite, "verify.full");
    let intr = saphan::cancel::Token::never();
    let run = measure::run_then_remove(
        scratch,
        Plan {
            suite: &suite,
            budget: &budget,
            provisions: &[],
            extra_env: &[],
            report_root: None,
            keep_stdout: None,
            log_dir: None,
            catalog: None,
            log_deferred: false,
            vouched: None,
            seal: None,
        },
        &intr,
    )
    .await
    .unwrap();
    assert_eq!(run.measurement.verdict, Verdict::MeasurementFailed);
    let notes = run.measurement.notes.join("; ");
    assert!(notes.contains("report-symlink-escape"), "{notes}");
    assert!(!Path::new(&path).exists());
    common::assert_only_main_worktree(&repo);
}

/// A suite left running at the stable path by an earlier attempt whose
/// saphan died is found on the machine by its marker and killed, group
/// included, before the path is used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_at_the_stable_path_on_the_machine_is_killed() {
    use saphan::exec::{Cmd, Termination};
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m2").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k").join("tree");
    let gc = dir.path().join("gc");
    // The dead attempt's marker, as heal.sh made it before the attempt's
    // first process started (the lab host shares this filesystem).
    let marker = saphan::worktree::attempt_marker(&path);
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, "").unwrap();
    let script = format!(
        "sleep 300 & echo $! > '{g}.tmp'; mv '{g}.tmp' '{g}'; wait",
        g = gc.display()
    );
    let t2 = t.clone();
    let run = tokio::spawn(async move {
        t2.run(
            Cmd::new("sh")
                .args(["-c", &script])
                .env(saphan::git::SCRATCH_MARKER, &path)
                .timeout(Duration::from_secs(120)),
        )
        .await
    });
    let t0 = std::time::Instant::now();
    while !gc.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let path = dir.path().join("k").join("tree");
    saphan::worktree::kill_leftovers(&t, &path).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the leftover's run ended")
        .unwrap()
        .unwrap();
    assert_eq!(out.status, Termination::Signaled(9), "{out:?}");
    let pid = std::fs::read_to_string(&gc).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.contains(") Z "),
        "the grandchild survived: {stat}"
    );
}
