//! A saphan home wired to the lab: its ssh config installed and one
//! `[machine.<host>]` row per host (transport ssh), each with a workhome of
//! its own under one temp dir, so tests running at once never share one.

use super::Env;
use super::lab::Lab;
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

/// The home and the temp dir that holds every row's workhome
/// (`<work>/<host>`); `tag` names the test area in the temp dir's name.
pub fn home(lab: &Lab, hosts: &[&str], tag: &str) -> (Env, tempfile::TempDir) {
    let env = Env::new();
    lab.install_ssh_config(env.home());
    let work = tempfile::Builder::new()
        .prefix(&format!(
            "saphan-{tag}-{}-{}-",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ))
        .tempdir()
        .unwrap();
    let mut s = String::new();
    for h in hosts {
        s += &format!(
            "[machine.{h}]\ntransport = \"ssh\"\nworkhome = \"{}\"\n\n",
            work.path().join(h).display()
        );
    }
    std::fs::create_dir_all(env.home().join("fleet")).unwrap();
    std::fs::write(env.home().join("fleet/machines.toml"), s).unwrap();
    (env, work)
}

/// `saphan machine probe` of `cap` at `path` on `hosts`, with one
/// `--workhome` and the tests' fixed `--probed-by`/`--workspace`.
pub fn probe(
    env: &Env,
    hosts: &str,
    cap: &str,
    path: &str,
    workhome: &str,
) -> std::process::Output {
    env.run(&[
        "machine",
        "probe",
        "--machine",
        hosts,
        "--capability",
        cap,
        "--declared-path",
        path,
        "--workhome",
        workhome,
        "--probed-by",
        "tester",
        "--workspace",
        "ws/main",
    ])
}

/// `saphan --json certify --repo REPO --machine MACHINES EXTRA…`.
pub fn certify(
    env: &Env,
    repo: &super::Repo,
    machines: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "--json",
        "certify",
        "--repo",
        repo.path().to_str().unwrap(),
        "--machine",
        machines,
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}
