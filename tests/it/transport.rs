//! The SSH transport against real sshd hosts from `fleet/lab/`.
//!
//! Every test that injures a host starts its own lab (about half a second),
//! so tests run in parallel without disturbing each other. The lab hosts
//! share this machine's filesystem, which lets a test check on the local
//! disk what a remote command did.

use crate::common;

use crate::common::lab::Lab;
use saphan::error::Refusal;
use saphan::exec::Termination;
use saphan::transport::{SshOptions, Transport, TransportError, resolve};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(20);

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

async fn connect(lab: &Lab, host: &str) -> Transport {
    connect_with(&lab.ssh_config_path(), host)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connect {host}: {}: {e}\nsshd log:\n{}",
                e.name(),
                lab.sshd_log(host)
            )
        })
}

async fn connect_with(config: &Path, host: &str) -> Result<Transport, TransportError> {
    let s = resolve(config, host).await?;
    Transport::connect_ssh(&s, &SshOptions::default()).await
}

/// A config that overrides `host` with `lines`, then includes the lab's.
fn override_config(lab: &Lab, dir: &Path, host: &str, lines: &str) -> PathBuf {
    let p = dir.join("ssh_config");
    std::fs::write(
        &p,
        format!(
            "Host {host}\n{lines}\n\nMatch all\nInclude {}\n",
            lab.ssh_config_path().display()
        ),
    )
    .unwrap();
    p
}

fn accepted_logins(lab: &Lab, host: &str) -> usize {
    lab.sshd_log(host).matches("Accepted publickey").count()
}

#[test]
fn lab_hosts_answer_the_system_ssh_client() {
    let Some(lab) = Lab::shared() else { return };
    for h in lab.hosts() {
        let out = lab.ssh(
            &h,
            "hostname; . /etc/os-release; echo $ID; test -x /usr/bin/go && echo go; true",
        );
        let (o, e) = common::text(&out);
        assert!(out.status.success(), "{h}: {e}\n{}", lab.sshd_log(&h));
        let want = match h.as_str() {
            "m2" => "m2\ndebian\n",
            "m3" => "m3\nubuntu\ngo\n",
            _ => &format!("{h}\ndebian\ngo\n"),
        };
        assert_eq!(o, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_returns_stdout_stderr_and_exit_code() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let out = t
        .exec(&argv(&["sh", "-c", "hostname; echo err >&2; exit 3"]), T)
        .await
        .unwrap();
    assert_eq!(out.status, Termination::Exited(3));
    assert_eq!(out.stdout, b"m0\n");
    assert_eq!(out.stderr, b"err\n");

    let out = t.exec(&argv(&["true"]), T).await.unwrap();
    assert_eq!(out.status, Termination::Exited(0));

    // A signal is reported as such.
    let out = t
        .exec(&argv(&["sh", "-c", "kill -TERM $$"]), T)
        .await
        .unwrap();
    assert_eq!(out.status, Termination::Signaled(15), "{out:?}");

    // A NUL cannot be sent and is refused by name.
    let e = t.exec(&argv(&["echo", "a\0b"]), T).await.unwrap_err();
    assert_eq!(e.name(), "bad-argument");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_status_arriving_after_eof_is_read() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    // Close stdout and stderr (the server sends EOF), wait, then exit 7.
    let out = t
        .exec(
            &argv(&["sh", "-c", "echo before; exec >&- 2>&-; sleep 0.5; exit 7"]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(out.status, Termination::Exited(7));
    assert_eq!(out.stdout, b"before\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_path_reaches_the_remote_side_as_one_literal_argument() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    // The remote shell starts in m0's /root; a word that escaped its quotes
    // would create this marker there (or in `dir`).
    let pwned = format!("saphan-pwned-{}", std::process::id());
    let markers = [dir.path().join(&pwned), lab.home_dir("m0").join(&pwned)];
    let hostile = dir.path().join(format!(
        "it's a \"path\"; touch {pwned} ; $(touch {pwned}) `touch {pwned}` \\ * ~ \n end"
    ));
    let hostile_s = hostile.to_str().unwrap();

    let out = t
        .exec(&argv(&["printf", "%s", hostile_s]), T)
        .await
        .unwrap();
    assert_eq!(out.status, Termination::Exited(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), hostile_s);

    let out = t
        .exec(
            &argv(&["sh", "-c", "echo content > \"$1\"", "sh", hostile_s]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(out.status, Termination::Exited(0), "{}", out.stderr_str());
    // The remote side created exactly that file (the lab shares this disk).
    assert_eq!(std::fs::read_to_string(&hostile).unwrap(), "content\n");
    let out = t.exec(&argv(&["cat", hostile_s]), T).await.unwrap();
    assert_eq!(out.stdout, b"content\n");
    for m in &markers {
        assert!(!m.exists(), "a word was interpreted by the remote shell");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_key_is_refused_and_nothing_runs() {
    let Some(lab) = Lab::start(1) else { return };
    let lab = &lab;
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("known_hosts");
    std::fs::write(&empty, "").unwrap();
    let cfg = override_config(
        lab,
        dir.path(),
        "m0",
        &format!("  UserKnownHostsFile {}", empty.display()),
    );
    let before = accepted_logins(lab, "m0");
    let marker = dir.path().join("ran");
    let res = match connect_with(&cfg, "m0").await {
        Ok(t) => Ok(t.exec(&argv(&["touch", marker.to_str().unwrap()]), T).await),
        Err(e) => Err(e),
    };
    let e = res.unwrap_err();
    assert_eq!(e.name(), "host-key-unknown", "{e}");
    let msg = e.to_string();
    assert!(msg.contains("SHA256:"), "{msg}");
    assert!(
        msg.contains(&format!("ssh-keyscan {}", lab.host_ip("m0"))),
        "{msg}"
    );
    assert!(msg.contains("nothing was run"), "{msg}");
    assert!(!marker.exists());
    assert_eq!(accepted_logins(lab, "m0"), before, "a login happened");
    // The system client agrees with the refusal.
    let out = std::process::Command::new("ssh")
        .args(["-F", cfg.to_str().unwrap(), "m0", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_host_key_is_refused_and_nothing_runs() {
    let Some(lab) = Lab::start(2) else { return };
    let lab = &lab;
    let dir = tempfile::tempdir().unwrap();
    // Record m1's key under m0's address: m0 now presents a "changed" key.
    let kh = std::fs::read_to_string(lab.known_hosts()).unwrap();
    let m1_key = kh
        .lines()
        .find(|l| l.starts_with(&format!("{} ", lab.host_ip("m1"))))
        .unwrap()
        .split_once(' ')
        .unwrap()
        .1
        .to_string();
    let forged = dir.path().join("known_hosts");
    std::fs::write(
        &forged,
        format!("# comment\n{} {m1_key}\n", lab.host_ip("m0")),
    )
    .unwrap();
    let cfg = override_config(
        lab,
        dir.path(),
        "m0",
        &format!("  UserKnownHostsFile {}", forged.display()),
    );
    let before = accepted_logins(lab, "m0");
    let marker = dir.path().join("ran");
    let res = match connect_with(&cfg, "m0").await {
        Ok(t) => Ok(t.exec(&argv(&["touch", marker.to_str().unwrap()]), T).await),
        Err(e) => Err(e),
    };
    let e = res.unwrap_err();
    assert_eq!(e.name(), "host-key-changed", "{e}");
    assert!(
        e.to_string().contains(&format!("{}:2", forged.display())),
        "{e}"
    );
    assert!(!marker.exists());
    assert_eq!(accepted_logins(lab, "m0"), before, "a login happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_fails_auth_by_name() {
    let Some(lab) = Lab::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("stranger");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    let cfg = override_config(
        lab,
        dir.path(),
        "m0",
        &format!("  IdentityFile {}\n  IdentityAgent none", key.display()),
    );
    // IdentityFile accumulates: the stranger key comes first, the lab key
    // second, so with both the login works...
    connect_with(&cfg, "m0").await.unwrap();
    // ...and with only the stranger key it is refused by name.
    let only = dir.path().join("only");
    std::fs::write(
        &only,
        format!(
            "Host m0\n  HostName {}\n  IdentityFile {}\n  IdentityAgent none\n  UserKnownHostsFile {}\n  User root\n",
            lab.host_ip("m0"),
            key.display(),
            lab.known_hosts().display()
        ),
    )
    .unwrap();
    let e = connect_with(&only, "m0").await.unwrap_err();
    assert_eq!(e.name(), "auth-failed", "{e}");
    assert!(e.to_string().contains("stranger: rejected"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_and_partitioned_hosts_fail_by_name_while_others_work() {
    let Some(lab) = Lab::start(4) else { return };
    let lab = &lab;
    lab.stop("m2");
    lab.partition("m3");
    let cfg = lab.ssh_config_path();
    let timed = |h: &'static str| {
        let cfg = cfg.clone();
        async move {
            let settings = resolve(&cfg, h).await.unwrap();
            let start = Instant::now();
            let r = Transport::connect_ssh(&settings, &SshOptions::default()).await;
            let elapsed = start.elapsed();
            let r = match r {
                Ok(t) => t.exec(&argv(&["hostname"]), T).await,
                Err(e) => Err(e),
            };
            (r, elapsed)
        }
    };
    let ((r0, _), (r1, _), (r2, e2), (r3, e3)) =
        tokio::join!(timed("m0"), timed("m1"), timed("m2"), timed("m3"));
    assert_eq!(r0.unwrap().stdout, b"m0\n");
    assert_eq!(r1.unwrap().stdout, b"m1\n");

    let err2 = r2.unwrap_err();
    assert_eq!(err2.name(), "host-unreachable", "{err2}");
    assert!(err2.to_string().contains("refused"), "{err2}");
    assert!(
        e2 < Duration::from_secs(2),
        "refused should be fast: {e2:?}"
    );

    let err3 = r3.unwrap_err();
    assert_eq!(err3.name(), "host-unreachable", "{err3}");
    let msg = err3.to_string();
    assert!(msg.contains(&format!("{}:22", lab.host_ip("m3"))), "{msg}");
    assert!(msg.contains("budget 2.0s"), "{msg}");
    // ConnectTimeout is 2 s in the lab config.
    assert!(
        e3 >= Duration::from_secs(2) && e3 < Duration::from_secs(6),
        "{e3:?}"
    );

    lab.heal("m3");
    let t3 = connect(lab, "m3").await;
    assert_eq!(
        t3.exec(&argv(&["hostname"]), T).await.unwrap().stdout,
        b"m3\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_partitioned_mid_command_ends_and_the_next_call_reconnects() {
    let Some(lab) = Lab::start(1) else { return };
    let lab = &lab;
    let t = connect(lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let budget = Duration::from_secs(15);
    let cmd = argv(&[
        "sh",
        "-c",
        "touch \"$1\"; sleep 60",
        "sh",
        started.to_str().unwrap(),
    ]);
    let t2 = t.clone();
    let run = tokio::spawn(async move {
        let start = Instant::now();
        (t2.exec(&cmd, budget).await, start.elapsed())
    });
    // Wait for the remote command to run, then cut the host off.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.exists() {
        assert!(Instant::now() < deadline, "remote command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lab.partition("m0");
    let (res, elapsed) = run.await.unwrap();
    match &res {
        Err(e) => assert_eq!(e.name(), "connection-lost", "{e}"),
        Ok(out) => assert_eq!(out.status, Termination::TimedOut),
    }
    assert!(elapsed < budget + Duration::from_secs(3), "{elapsed:?}");
    eprintln!("partitioned mid-command: {res:?} after {elapsed:?}");

    lab.heal("m0");
    let out = t.exec(&argv(&["hostname"]), T).await.unwrap();
    assert_eq!(out.stdout, b"m0\n", "the transport reconnects");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_budget_is_timed_out() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let start = Instant::now();
    let out = t
        .exec(
            &argv(&["sh", "-c", "echo partial; sleep 30"]),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    assert_eq!(out.status, Termination::TimedOut);
    assert_eq!(out.stdout, b"partial\n");
    assert!(start.elapsed() < Duration::from_secs(5));
    // The connection is still good.
    assert!(t.exec(&argv(&["true"]), T).await.unwrap().status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_carries_many_concurrent_commands() {
    let Some(lab) = Lab::start(1) else { return };
    let lab = &lab;
    let t = connect(lab, "m0").await;
    let before = accepted_logins(lab, "m0");
    // More than sshd's MaxSessions (10) at once: the transport queues them.
    let runs = (0..24).map(|i| {
        let t = t.clone();
        async move {
            t.exec(
                &argv(&["sh", "-c", "sleep 0.2; echo $1", "sh", &i.to_string()]),
                T,
            )
            .await
        }
    });
    let outs = futures_util::future::join_all(runs).await;
    for (i, o) in outs.into_iter().enumerate() {
        let o = o.unwrap();
        assert_eq!(o.status, Termination::Exited(0), "{}", o.stderr_str());
        assert_eq!(o.stdout_str(), i.to_string());
    }
    assert_eq!(
        accepted_logins(lab, "m0"),
        before,
        "no new connection was made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_and_get_round_trip_bytes() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("src.bin");
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(3 * 1024 * 1024 + 17).collect();
    bytes.extend_from_slice(b"\0\n'\"");
    std::fs::write(&local, &bytes).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o750)).unwrap();
    }
    let remote = dir.path().join("remote copy; 'x'.bin");
    let remote_s = remote.to_str().unwrap();
    t.put(&local, remote_s).await.unwrap();
    let out = t
        .exec(&argv(&["stat", "-c", "%a %s", remote_s]), T)
        .await
        .unwrap();
    assert_eq!(out.stdout_str(), format!("750 {}", bytes.len()));

    let back = dir.path().join("back.bin");
    t.get(remote_s, &back).await.unwrap();
    assert!(std::fs::read(&back).unwrap() == bytes, "bytes differ");

    let e = t
        .get("/nonexistent/file", &dir.path().join("x"))
        .await
        .unwrap_err();
    assert_eq!(e.name(), "copy", "{e}");
    assert!(!dir.path().join("x").exists());
    let e = t.put(&local, "/nonexistent/dir/file").await.unwrap_err();
    assert_eq!(e.name(), "copy", "{e}");
}

fn net_ns_of(pid: i32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_unix_socket_reaches_a_socket_on_the_machine() {
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        let mut peers = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = listener.accept().await.unwrap();
            peers.push(s.peer_cred().unwrap().pid().unwrap());
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"ping");
            s.write_all(b"pong").await.unwrap();
        }
        peers
    });
    let path_s = path.to_str().unwrap();
    for tr in [&t, &Transport::Local(saphan::transport::Local)] {
        let mut s = tr.open_unix_socket(path_s).await.unwrap();
        s.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
    let peers = server.await.unwrap();
    // The first peer is sshd inside m0's network namespace, the second is us.
    assert_ne!(net_ns_of(peers[0]), net_ns_of(std::process::id() as i32));
    assert_eq!(peers[1], std::process::id() as i32);

    let e = t
        .open_unix_socket(dir.path().join("absent.sock").to_str().unwrap())
        .await
        .err()
        .unwrap();
    assert_eq!(e.name(), "unix-socket-unreachable", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_jump_through_m0_reaches_a_host_this_machine_cannot() {
    let Some(lab) = Lab::start(2) else { return };
    let lab = &lab;
    // m1 cannot answer this machine any more, but m0 can still reach it.
    lab.partition("m1");
    let e = connect_with(&lab.ssh_config_path(), "m1")
        .await
        .unwrap_err();
    assert_eq!(e.name(), "host-unreachable");

    let dir = tempfile::tempdir().unwrap();
    let cfg = override_config(lab, dir.path(), "m1", "  ProxyJump m0");
    let s = resolve(&cfg, "m1").await.unwrap();
    assert_eq!(s.proxy_jump, vec!["m0".to_string()]);
    let t = Transport::connect_ssh(&s, &SshOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", e.name()));
    let out = t
        .exec(&argv(&["sh", "-c", "hostname; echo $SSH_CONNECTION"]), T)
        .await
        .unwrap();
    let text = out.stdout_str();
    assert!(text.starts_with("m1\n"), "{text}");
    // The connection came from m0's address.
    assert!(text.contains(&format!("{} ", lab.host_ip("m0"))), "{text}");

    // A jump host that is down is named in the error.
    let cfg2 = dir.path().join("c2");
    std::fs::write(
        &cfg2,
        format!(
            "Host m1\n  ProxyJump nobody@m0:2\n\nMatch all\nInclude {}\n",
            lab.ssh_config_path().display()
        ),
    )
    .unwrap();
    let e = connect_with(&cfg2, "m1").await.unwrap_err();
    assert_eq!(e.name(), "host-unreachable", "{e}");
    assert!(
        e.to_string().contains(&format!("{}:2", lab.host_ip("m0"))),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_command_and_missing_config_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c");
    std::fs::write(
        &cfg,
        "Host x\n  HostName 127.0.0.1\n  ProxyCommand nc %h %p\n",
    )
    .unwrap();
    let e = connect_with(&cfg, "x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    assert!(e.to_string().contains("ProxyJump"), "{e}");
    let e = connect_with(&dir.path().join("absent"), "x")
        .await
        .unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    std::fs::write(&cfg, "Host x\n  Bogus yes\n").unwrap();
    let e = resolve(&cfg, "x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
    assert!(
        e.to_string().contains("Bogus") || e.to_string().contains("bogus"),
        "{e}"
    );
    let e = resolve(&cfg, "-oProxyCommand=x").await.unwrap_err();
    assert_eq!(e.name(), "ssh-config");
}

/// An ssh-agent this test starts (foreground, own socket) and kills by pid.
struct Agent {
    child: std::process::Child,
    sock: PathBuf,
}

impl Agent {
    fn start(dir: &Path) -> Agent {
        let sock = dir.join("agent.sock");
        let child = std::process::Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        // The socket file exists once ssh-agent has bound it, a moment
        // before it listens: wait until a connection is accepted.
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                Instant::now() < deadline,
                "ssh-agent did not listen on its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Agent { child, sock }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ssh_agent_logs_in_when_no_identity_file_can() {
    if common::skip_unless(
        common::have("ssh-agent") && common::have("ssh-add"),
        "no ssh-agent",
    ) {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path());
    let add = std::process::Command::new("ssh-add")
        .arg("-q")
        .arg(lab.identity())
        .env("SSH_AUTH_SOCK", &agent.sock)
        .output()
        .unwrap();
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    // Only the public half is on disk: the private key lives in the agent.
    let pubonly = dir.path().join("agentkey");
    std::fs::copy(
        lab.identity().with_extension("pub"),
        dir.path().join("agentkey.pub"),
    )
    .unwrap();
    let write = |name: &str, extra: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!(
                "Host m0\n  HostName {}\n  User root\n  UserKnownHostsFile {}\n  IdentityAgent {}\n{extra}",
                lab.host_ip("m0"),
                lab.known_hosts().display(),
                agent.sock.display()
            ),
        )
        .unwrap();
        p
    };
    let cfg = write(
        "ok",
        &format!(
            "  IdentityFile {}\n  IdentitiesOnly yes\n",
            pubonly.display()
        ),
    );
    let t = connect_with(&cfg, "m0")
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", e.name()));
    assert!(t.exec(&argv(&["true"]), T).await.unwrap().status.success());

    // IdentitiesOnly with an identity file the agent does not hold: the
    // agent's key is not offered.
    let other = dir.path().join("other");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(st.success());
    let cfg = write(
        "only",
        &format!("  IdentityFile {}\n  IdentitiesOnly yes\n", other.display()),
    );
    let e = connect_with(&cfg, "m0").await.unwrap_err();
    assert_eq!(e.name(), "auth-failed", "{e}");
    assert!(e.to_string().contains("ssh-agent: 0 usable key(s)"), "{e}");
}

/// The Docker engineer's path: an HTTP/1 client (hyper, as bollard's custom
/// transport uses) over the engine socket forwarded from m0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_over_a_forwarded_docker_socket() {
    let sock = "/var/run/docker.sock";
    if common::skip_unless(Path::new(sock).exists(), "no Docker engine socket here") {
        return;
    }
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let stream = t.open_unix_socket(sock).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get("/_ping")
        .header("Host", "docker")
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"OK");
}

/// known_hosts names a host on another port `[ip]:port`, and `HostKeyAlias`
/// replaces the name looked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_hosts_lookup_respects_port_and_host_key_alias() {
    let Some(lab) = Lab::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ip = lab.host_ip("m0");
    let kh = std::fs::read_to_string(lab.known_hosts()).unwrap();
    let key = kh
        .lines()
        .find(|l| l.starts_with(&format!("{ip} ")))
        .unwrap()
        .split_once(' ')
        .unwrap()
        .1
        .to_string();
    let write = |name: &str, known: &str, extra: &str| {
        let khf = dir.path().join(format!("{name}.kh"));
        std::fs::write(&khf, known).unwrap();
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!(
                "Host m0\n  HostName {ip}\n  User root\n  IdentityFile {}\n  IdentityAgent none\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n{extra}",
                lab.identity().display(),
                khf.display()
            ),
        )
        .unwrap();
        p
    };
    // Port 2222 with only the port-22 entry: unknown, and the message says
    // how the entry must look.
    let cfg = write("p22", &format!("{ip} {key}\n"), "  Port 2222\n");
    let e = connect_with(&cfg, "m0").await.unwrap_err();
    assert_eq!(e.name(), "host-key-unknown", "{e}");
    assert!(e.to_string().contains(&format!("[{ip}]:2222")), "{e}");
    assert!(
        e.to_string().contains(&format!("ssh-keyscan -p 2222 {ip}")),
        "{e}"
    );
    // With the `[ip]:2222` entry it connects.
    let cfg = write("p2222", &format!("[{ip}]:2222 {key}\n"), "  Port 2222\n");
    let t = connect_with(&cfg, "m0").await.unwrap();
    assert!(t.exec(&argv(&["true"]), T).await.unwrap().status.success());
    // HostKeyAlias: the entry is looked up under the alias, not the address.
    let cfg = write(
        "alias",
        &format!("box-m0 {key}\n"),
        "  HostKeyAlias box-m0\n",
    );
    connect_with(&cfg, "m0").await.unwrap();
    let cfg = write(
        "noalias",
        &format!("{ip} {key}\n"),
        "  HostKeyAlias box-m0\n",
    );
    assert_eq!(
        connect_with(&cfg, "m0").await.unwrap_err().name(),
        "host-key-unknown"
    );
}

/// `Transport::run` over SSH: cwd, env changes, a streamed stdin file,
/// stdout into a local file, the exit code, and stderr without the
/// supervisor's markers — the same `Output` meaning as a local run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_carries_cwd_env_stdin_and_stdout_file_like_a_local_run() {
    use saphan::exec::{Cmd, Input, Sink};
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&input, &big).unwrap();
    let stdout = dir.path().join("out");
    let script =
        "pwd; echo \"$SAPHAN_X\"; echo \"${HOME_GONE-unset}\"; wc -c; echo to-err >&2; exit 7";
    for t in [Transport::Local(Default::default()), t] {
        let cmd = Cmd::new("sh")
            .args(["-c", script])
            .cwd(dir.path())
            .env("SAPHAN_X", "a b 'c'")
            .env("HOME_GONE", "x")
            .env_remove("HOME_GONE")
            .input(Input::File(input.clone()))
            .stdout(Sink::File(stdout.clone()))
            .timeout(T);
        let out = t.run(cmd).await.unwrap();
        assert_eq!(out.status, Termination::Exited(7), "{}", t.describe());
        assert_eq!(out.stderr_str(), "to-err", "{}", t.describe());
        let text = std::fs::read_to_string(&stdout).unwrap();
        let want = format!(
            "{}\na b 'c'\nunset\n{}\n",
            dir.path().canonicalize().unwrap().display(),
            big.len()
        );
        assert_eq!(text.trim_start(), want, "{}", t.describe());
    }
}

/// The budget is enforced on the machine: a suite whose grandchild holds
/// stdout is timed out within budget + grace, and its whole group is gone
/// there; a missing program is a spawn failure, as locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_kills_the_remote_group_at_the_budget() {
    use saphan::exec::Cmd;
    let Some(lab) = Lab::shared() else { return };
    let t = connect(lab, "m1").await;
    let dir = tempfile::tempdir().unwrap();
    let gc = dir.path().join("gc");
    let script = format!(
        "sleep 300 & echo $! > '{}'; echo started; wait",
        gc.display()
    );
    let t0 = Instant::now();
    let out = t
        .run(
            Cmd::new("sh")
                .args(["-c", &script])
                .timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(out.status, Termination::TimedOut);
    assert_eq!(out.stdout_str(), "started");
    assert!(t0.elapsed() < Duration::from_secs(12), "{:?}", t0.elapsed());
    let pid: i32 = std::fs::read_to_string(&gc)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gone = (0..100).any(|_| {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        if alive {
            std::thread::sleep(Duration::from_millis(50));
        }
        !alive
    });
    assert!(gone, "the grandchild {pid} still runs on the machine");

    let err = t
        .run(Cmd::new("no-such-program-saphan").timeout(T))
        .await
        .unwrap_err();
    assert_eq!(err.name(), "spawn", "{err}");
}

/// Issue 13.5: a login shell that prints a flood before saphan's command
/// cannot grow saphan's memory, and what saphan reads as the command's
/// stdout is whole or refused by name: past [`REMOTE_STDOUT_WHOLE`] an
/// unframed command's stdout (the flood and the command's own lines) is
/// `output-lost` — never its last 16 MiB read as if it were all of it —
/// under `exec` and under the watchdog alike; a framed one (`exec_from`)
/// drops the flood as it streams and reads the rest whole. stderr keeps its
/// last 1 MiB (for showing), the command's own lines at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_shell_flood_is_bounded_and_never_read_in_part() {
    use saphan::exec::{Cmd, REMOTE_STDOUT_WHOLE, STDERR_TAIL};
    let Some(lab) = Lab::start(1) else { return };
    let flood_out = REMOTE_STDOUT_WHOLE + 4 * 1024 * 1024;
    let flood_err = 8 * STDERR_TAIL;
    std::fs::write(
        lab.home_dir("m0").join(".bashrc"),
        format!(
            "head -c {flood_out} /dev/zero | tr '\\0' o\nhead -c {flood_err} /dev/zero | tr '\\0' e >&2\n"
        ),
    )
    .unwrap();
    let t = connect(&lab, "m0").await;
    let script = "echo the-command; echo its-stderr >&2";
    let unframed = t
        .exec(&argv(&["sh", "-c", script]), Duration::from_secs(120))
        .await
        .unwrap();
    let watched = t
        .run(
            Cmd::new("sh")
                .args(["-c", script])
                .timeout(Duration::from_secs(120)),
        )
        .await
        .unwrap();
    for (how, out) in [("exec", &unframed), ("run", &watched)] {
        assert_eq!(out.status, Termination::OutputLost, "{how}");
        assert!(
            out.stdout.is_empty(),
            "{how}: {} bytes handed on",
            out.stdout.len()
        );
        let err = out.stderr_str();
        assert!(
            err.contains("saphan: output-lost: the command wrote more than 16 MiB on stdout"),
            "{how}: {}",
            &err[err.len().saturating_sub(400)..]
        );
        assert!(
            out.stderr.len() <= STDERR_TAIL + 512,
            "{how}: stderr kept {} bytes",
            out.stderr.len()
        );
        assert!(
            err.ends_with("eeeeits-stderr"),
            "{how}: the command's stderr is at the end: {:?}",
            &err[err.len().saturating_sub(300)..]
        );
    }
    let framed = t
        .exec_from(
            &argv(&["sh", "-c", "printf '\\n@@begin X\\n'; echo the-command"]),
            Duration::from_secs(120),
            b"\n@@begin X\n",
        )
        .await
        .unwrap();
    assert_eq!(framed.status, Termination::Exited(0));
    assert_eq!(framed.stdout, b"\n@@begin X\nthe-command\n");
}

/// A partition mid-run: the local side gives up within budget + grace +
/// slack, and the machine's own watchdog kills the suite's group there at
/// budget + grace — a lost connection leaves nothing running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_machine_still_kills_the_group_at_the_budget() {
    use saphan::exec::{Cmd, GRACE};
    use saphan::transport::watchdog::LINK_SLACK;
    let Some(lab) = Lab::start(1) else { return };
    let t = connect(&lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let gc = dir.path().join("gc");
    let script = format!(
        "sleep 300 & echo $! > '{g}.tmp'; mv '{g}.tmp' '{g}'; wait",
        g = gc.display()
    );
    let budget = Duration::from_secs(3);
    let t0 = Instant::now();
    let run = tokio::spawn(async move {
        t.run(Cmd::new("sh").args(["-c", &script]).timeout(budget))
            .await
    });
    while !gc.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the suite never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lab.partition("m0");
    let res = run.await.unwrap();
    let waited = t0.elapsed();
    match &res {
        Ok(o) => assert_eq!(o.status, Termination::TimedOut),
        Err(e) => assert_eq!(e.name(), "connection-lost", "{e}"),
    }
    assert!(
        waited < budget + GRACE + LINK_SLACK + Duration::from_secs(3),
        "returned after {waited:?}"
    );
    let pid: i32 = std::fs::read_to_string(&gc)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !stat.is_empty() && !stat.contains(") Z ")
    };
    while alive(pid) {
        assert!(
            t0.elapsed() < budget + GRACE + Duration::from_secs(10),
            "the suite's grandchild {pid} still runs on the partitioned machine"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lab.heal("m0");
}

/// A machine cut off while a large copy streams to it: the connection's
/// writes stall (the TCP send buffer fills), and the session must still be
/// declared dead near its keep-alive limit (the lab: 1 s × 3), not at the
/// copy's budget (600 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_mid_copy_is_connection_lost_near_the_keepalive_limit() {
    let Some(lab) = Lab::start(1) else { return };
    let t = connect(&lab, "m0").await;
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    // Sparse: reading it costs nothing here, sending it takes a while.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let remote = dir.path().join("copy");
    let remote_s = remote.to_str().unwrap().to_string();
    let copy = tokio::spawn({
        let t = t.clone();
        let big = big.clone();
        async move { t.put(&big, &remote_s).await }
    });
    // Lab hosts share this file system: wait until bytes arrive there (in
    // the temp file the copy writes beside `copy`).
    let arrived = |d: &Path| -> u64 {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != "big")
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while arrived(dir.path()) < (64 << 20) {
        assert!(Instant::now() < deadline, "the copy never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lab.partition("m0");
    let res = tokio::time::timeout(Duration::from_secs(60), copy).await;
    lab.heal("m0");
    match res {
        Err(_) => panic!("the copy to a cut-off machine still waits after 60 s"),
        Ok(r) => {
            let e = r
                .unwrap()
                .expect_err("a copy to a cut-off machine cannot succeed");
            assert_eq!(e.name(), "connection-lost", "{e}");
        }
    }
}

/// Issue 20.9: with `BatchMode yes` and no `ServerAliveInterval`, OpenSSH's
/// `ssh -G` reports the interval as 300 s; saphan must still use its own
/// default (5 s: a cut-off machine is declared lost in about 15 s, not 20
/// minutes), while an interval the config sets wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_mode_does_not_stretch_the_keep_alive() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c");
    std::fs::write(
        &cfg,
        "Host quiet\n  HostName 127.0.0.1\n  User u\n  BatchMode yes\n\n\
         Host set\n  HostName 127.0.0.1\n  User u\n  BatchMode yes\n  ServerAliveInterval 7\n",
    )
    .unwrap();
    let opts = SshOptions::default();
    let s = resolve(&cfg, "quiet").await.unwrap();
    assert_eq!(s.server_alive_interval, None, "{s:?}");
    assert_eq!(
        saphan::transport::ssh::keepalive(&s, &opts),
        (Duration::from_secs(5), 3)
    );
    let s = resolve(&cfg, "set").await.unwrap();
    assert_eq!(s.server_alive_interval, Some(Duration::from_secs(7)));
}
