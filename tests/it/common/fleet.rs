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
