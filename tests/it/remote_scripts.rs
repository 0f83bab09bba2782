//! The scripts saphan runs on machines (`src/remote/*.sh`), each run through
//! its own cases under every POSIX shell a machine may have: dash, bash and
//! busybox sh (with busybox's applets first on PATH, so `find`, `xargs`,
//! `head`, `setsid`, `flock` … are busybox's too). A missing shell fails the
//! test under SAPHAN_REQUIRE_ALL (`.ci/run` installs them).

use crate::common;
use saphan::remote;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// One shell: how to start it, and what goes first on PATH.
struct Shell {
    name: &'static str,
    argv: Vec<String>,
    path_first: Option<PathBuf>,
    _bin: Option<tempfile::TempDir>,
}

impl Shell {
    /// `sh -c SCRIPT NAME ARGS…` under this shell, stdin from `stdin`.
    fn run(&self, script: &str, name: &str, args: &[&str], stdin: &[u8]) -> Output {
        self.run_env(script, name, args, stdin, &[])
    }

    fn run_env(
        &self,
        script: &str,
        name: &str,
        args: &[&str],
        stdin: &[u8],
        env: &[(&str, &str)],
    ) -> Output {
        let mut c = self.cmd();
        c.arg("-c").arg(script).arg(name).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        {
            use std::io::Write;
            let mut i = child.stdin.take().unwrap();
            let _ = i.write_all(stdin);
        }
        child.wait_with_output().unwrap()
    }

    fn cmd(&self) -> Command {
        self.cmd_before(None)
    }

    /// [`Shell::cmd`] with `before` (a [`broken`] directory) first on PATH,
    /// before even the busybox applets.
    fn cmd_before(&self, before: Option<&Path>) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]);
        let path = std::env::var("PATH").unwrap_or_default();
        let path = match &self.path_first {
            Some(d) => format!("{}:{path}", d.display()),
            None => path,
        };
        let path = match before {
            Some(b) => format!("{}:{path}", b.display()),
            None => path,
        };
        c.env("PATH", path);
        c
    }

    /// `sh -c SCRIPT NAME ARGS…` with `before` first on PATH, no stdin.
    fn run_before(&self, before: &Path, script: &str, name: &str, args: &[&str]) -> Output {
        self.cmd_before(Some(before))
            .arg("-c")
            .arg(script)
            .arg(name)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// dash, bash and busybox sh — or a failure (REQUIRE_ALL) / SKIPPED line
/// for each one missing.
fn shells() -> Vec<Shell> {
    let mut out = Vec::new();
    for name in ["dash", "bash"] {
        if let Some(p) = common::which(name) {
            out.push(Shell {
                name,
                argv: vec![p.display().to_string()],
                path_first: None,
                _bin: None,
            });
        } else {
            common::skip_unless(false, &format!("no {name} on PATH"));
        }
    }
    match common::which("busybox") {
        Some(bb) => {
            // A directory of busybox applets, `sh` among them, first on PATH.
            let bin = tempfile::tempdir().unwrap();
            let list = Command::new(&bb).arg("--list").output().unwrap();
            for applet in String::from_utf8_lossy(&list.stdout).lines() {
                let _ = std::os::unix::fs::symlink(&bb, bin.path().join(applet));
            }
            out.push(Shell {
                name: "busybox sh",
                argv: vec![bin.path().join("sh").display().to_string()],
                path_first: Some(bin.path().to_path_buf()),
                _bin: Some(bin),
            });
        }
        None => {
            common::skip_unless(false, "no busybox on PATH (busybox-static)");
        }
    }
    out
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@x")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@x")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", s(&o.stderr));
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    s(&o.stdout).trim().to_string()
}

/// A repository with one commit; returns its SHA.
fn repo_at(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a"), "a\n").unwrap();
    git(dir, &["add", "a"]);
    git(dir, &["commit", "-q", "-m", "a"]);
    git_out(dir, &["rev-parse", "HEAD"])
}

/// Pids whose environment holds `kv` exactly.
fn with_env(kv: &str) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let alive = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(") ")
                    .map(|(_, r)| !r.starts_with(['Z', 'X']))
            })
            .unwrap_or(false);
        if alive && env.split(|b| *b == 0).any(|x| x == kv.as_bytes()) {
            v.push(pid);
        }
    }
    v
}

/// Wait (bounded) for `cond`.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !cond() {
        assert!(t0.elapsed().as_secs() < 30, "never: {what}");
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    }
}

#[test]
fn every_script_is_valid_sh_under_every_shell() {
    for sh in shells() {
        for (name, text) in remote::ALL {
            let o = sh.cmd().arg("-n").arg("-c").arg(text).output().unwrap();
            assert!(
                o.status.success(),
                "{} -n {name}: {}",
                sh.name,
                s(&o.stderr)
            );
        }
    }
}

#[test]
fn the_small_control_scripts_keep_their_protocol() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x/y");
        assert_eq!(
            code(&sh.run(remote::MKDIR, "t", &[p(&f)], b"")),
            Some(0),
            "{n}"
        );
        assert!(f.is_dir(), "{n}");
        assert_eq!(
            code(&sh.run(remote::RESOLVE, "t", &["ls"], b"")),
            Some(0),
            "{n}"
        );
        assert_ne!(
            code(&sh.run(remote::RESOLVE, "t", &["saphan-no-such-program"], b"")),
            Some(0),
            "{n}"
        );
        let bin = d.path().join("bin/saphan-abc");
        let have = |bin: &Path| sh.run(remote::HAVE_BINARY, "t", &[p(bin), remote::SHA256], b"");
        assert_eq!(code(&have(&bin)), Some(1), "{n}");
        assert!(bin.parent().unwrap().is_dir(), "{n}: its directory is made");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        // There: its bytes' digest is printed, for the caller to compare.
        let o = have(&bin);
        assert_eq!(code(&o), Some(0), "{n}");
        let digest = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        assert_eq!(digest, saphan::fsutil::sha256_hex(b"#!/bin/sh\n"), "{n}");
        // A symlink under the name is no binary: absent, to be re-shipped.
        let link = d.path().join("bin/saphan-link");
        std::os::unix::fs::symlink(&bin, &link).unwrap();
        assert_eq!(code(&have(&link)), Some(1), "{n}");
        let w = d.path().join("w");
        assert_eq!(
            code(&sh.run(remote::WRITE_FILE, "t", &[p(&w)], b"bytes\n")),
            Some(0)
        );
        assert_eq!(std::fs::read_to_string(&w).unwrap(), "bytes\n", "{n}");
        let put = d.path().join("put");
        assert_eq!(
            code(&sh.run(remote::PUT, "t", &[p(&put), "640"], b"put\n")),
            Some(0)
        );
        assert_eq!(std::fs::read_to_string(&put).unwrap(), "put\n", "{n}");
        let mode = std::fs::metadata(&put).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{n}");
        let run = d.path().join("runs/r1");
        let parent = d.path().join("scratch/k");
        std::fs::create_dir_all(run.join("reports")).unwrap();
        std::fs::create_dir_all(&parent).unwrap();
        assert_eq!(
            code(&sh.run(remote::RUN_CLEANUP, "t", &[p(&run), p(&parent)], b"")),
            Some(0)
        );
        assert!(!run.exists() && !parent.exists(), "{n}");
        let ids = s(&sh.run(remote::USER_IDS, "t", &[], b"").stdout);
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        assert!(ids.starts_with(&format!("{uid}:")), "{n}: {ids}");
        let m = sh.run(remote::MEASURE, "t", &[], b"");
        assert!(
            s(&m.stdout).contains("@@saphan-measure:end"),
            "{n}: {}",
            s(&m.stdout)
        );
        let pr = sh.run(remote::PROBE, "t", &["5", "/", "", "n0nce"], b"");
        assert!(s(&pr.stdout).contains("@@saphan begin n0nce"), "{n}");
        assert!(s(&pr.stdout).contains("@@saphan end n0nce"), "{n}");
    }
}

#[test]
fn the_lock_holds_until_stdin_closes_and_says_busy_by_its_code() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let lock = d.path().join("locks/k.lock");
        let ready = d.path().join("runs/a/locked");
        let mut holder = sh.cmd();
        holder
            .args(["-c", remote::LOCK, "saphan-lock", p(&lock), p(&ready), "5"])
            .stdin(Stdio::piped());
        let mut holder = holder.spawn().unwrap();
        let w = sh.run(remote::LOCK_WAIT, "t", &[p(&ready)], b"");
        assert_eq!(code(&w), Some(0), "{n}: {}", s(&w.stderr));
        assert_eq!(s(&w.stdout), "", "{n}: nothing was asked about");
        // Asked about a path once the lock is held: `left` only when it is there.
        let tree = d.path().join("scratch/k/tree");
        let w = sh.run(remote::LOCK_WAIT, "t", &[p(&ready), p(&tree)], b"");
        assert_eq!((code(&w), s(&w.stdout).as_str()), (Some(0), ""), "{n}");
        std::fs::create_dir_all(&tree).unwrap();
        let w = sh.run(remote::LOCK_WAIT, "t", &[p(&ready), p(&tree)], b"");
        assert_eq!(
            (code(&w), s(&w.stdout).as_str()),
            (Some(0), "left\n"),
            "{n}"
        );
        let ready2 = d.path().join("runs/b/locked");
        let busy = sh.run(
            remote::LOCK,
            "saphan-lock",
            &[p(&lock), p(&ready2), "0"],
            b"",
        );
        assert_eq!(
            code(&busy),
            Some(remote::LOCK_EXIT_BUSY),
            "{n}: {}",
            s(&busy.stderr)
        );
        assert!(!ready2.exists(), "{n}");
        drop(holder.stdin.take());
        assert!(holder.wait().unwrap().success(), "{n}");
        let again = sh.run(
            remote::LOCK,
            "saphan-lock",
            &[p(&lock), p(&ready2), "0"],
            b"",
        );
        assert_eq!(code(&again), Some(0), "{n}: {}", s(&again.stderr));
        let f = d.path().join("file");
        std::fs::write(&f, "").unwrap();
        let nodir = sh.run(
            remote::LOCK,
            "saphan-lock",
            &[p(&f.join("l")), p(&ready2), "0"],
            b"",
        );
        assert_eq!(code(&nodir), Some(remote::LOCK_EXIT_MKDIR), "{n}");
    }
}

#[test]
fn dest_kinds_lists_up_to_the_first_non_directory() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        std::fs::create_dir_all(t.join("real/sub")).unwrap();
        std::fs::write(t.join("a.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/tmp", t.join("docs")).unwrap();
        let kinds = |dest: &str| s(&sh.run(remote::DEST_KINDS, "t", &[p(t), dest], b"").stdout);
        assert_eq!(kinds("docs/c.yaml"), "link\n", "{n}");
        assert_eq!(kinds("a.txt"), "other\n", "{n}");
        assert_eq!(kinds("a.txt/x"), "other\n", "{n}");
        assert_eq!(kinds("real/sub/new"), "dir\ndir\nmissing\n", "{n}");
        assert_eq!(kinds("real/sub"), "dir\ndir\n", "{n}");
        assert_eq!(kinds("fresh/x"), "missing\n", "{n}");
        // Rust decides from the words, the same way as for this machine.
        for dest in [
            "docs/c.yaml",
            "a.txt",
            "a.txt/x",
            "real/sub/new",
            "real/sub",
            "fresh/x",
        ] {
            let words: Vec<saphan::provision::DestKind> = kinds(dest)
                .lines()
                .map(|w| match w {
                    "link" => saphan::provision::DestKind::Link,
                    "missing" => saphan::provision::DestKind::Missing,
                    "dir" => saphan::provision::DestKind::Dir,
                    _ => saphan::provision::DestKind::Other,
                })
                .collect();
            assert_eq!(
                saphan::provision::judge_dest(dest, &words),
                saphan::provision::check_dest(t, dest),
                "{n}: {dest}"
            );
        }
    }
}

#[test]
fn the_report_listing_puts_the_root_first_and_never_passes_its_bound() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        std::fs::create_dir_all(t.join("reports/deep/.git")).unwrap();
        std::fs::write(t.join("reports/a.xml"), "x").unwrap();
        std::fs::write(t.join("reports/deep/b.xml"), "x").unwrap();
        std::fs::write(t.join("reports/deep/.git/c.xml"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", t.join("reports/evil.xml")).unwrap();
        let o = sh.run(
            remote::REPORT_LIST,
            "t",
            &[p(t), "./reports", "100000"],
            b"",
        );
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        let fields: Vec<String> = o
            .stdout
            .split(|b| *b == 0)
            .map(s)
            .filter(|f| !f.is_empty())
            .collect();
        let real = std::fs::canonicalize(t).unwrap();
        assert_eq!(fields[0], real.display().to_string(), "{n}");
        let mut rest = fields[1..].to_vec();
        rest.sort();
        assert_eq!(
            rest,
            [
                "./reports/a.xml",
                "./reports/deep/b.xml",
                "./reports/evil.xml"
            ],
            "{n}"
        );
        // Bounded: never more names than asked for (the caller's cap + 1).
        let cut = sh.run(remote::REPORT_LIST, "t", &[p(t), "./reports", "10"], b"");
        let after_root = cut.stdout.len() - fields[0].len() - 1;
        assert_eq!(after_root, 10, "{n}");
        // Missing prefix: only the root.
        let none = sh.run(remote::REPORT_LIST, "t", &[p(t), "./nothing", "100"], b"");
        assert_eq!(code(&none), Some(0), "{n}");
        assert_eq!(none.stdout.len(), fields[0].len() + 1, "{n}");
        // The description: the count, kind and resolved path per name,
        // then the files' sizes, NUL-terminated.
        std::fs::create_dir_all(t.join("linked")).unwrap();
        std::fs::write(t.join("linked/d.xml"), "four").unwrap();
        std::os::unix::fs::symlink(t.join("linked"), t.join("reports/via")).unwrap();
        let mut c = sh.cmd();
        c.args([
            "-c",
            "xargs -0 sh -c \"$0\" saphan-classify \"$1\"",
            remote::REPORT_CLASSIFY,
            p(t),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
        let mut child = c.spawn().unwrap();
        {
            use std::io::Write;
            let mut i = child.stdin.take().unwrap();
            i.write_all(
                b"reports/a.xml\0reports/evil.xml\0reports/deep\0reports/gone\0reports/via/d.xml\0",
            )
            .unwrap();
        }
        let o = child.wait_with_output().unwrap();
        let f: Vec<String> = o.stdout.split(|b| *b == 0).map(s).collect();
        assert_eq!(f[0], "5", "{n}: {f:?}");
        assert_eq!(f[1], "file", "{n}");
        assert_eq!(
            f[2],
            real.join("reports/a.xml").display().to_string(),
            "{n}"
        );
        assert_eq!(
            (f[3].as_str(), f[4].as_str()),
            ("file", "/etc/passwd"),
            "{n}"
        );
        assert_eq!(f[5], "dir", "{n}");
        assert_eq!(f[7], "missing", "{n}");
        // A name under a symlinked directory resolves through it.
        assert_eq!(
            (f[9].as_str(), f[10].as_str()),
            (
                "file",
                real.join("linked/d.xml").display().to_string().as_str()
            ),
            "{n}"
        );
        let passwd = std::fs::metadata("/etc/passwd").unwrap().len();
        assert_eq!(f[11], format!("1\n{passwd}\n4"), "{n}");
        assert_eq!(f.len(), 13, "{n}: {f:?}");
        // The stream: the files' bytes in order, bounded.
        let list = format!(
            "{}\0{}\0",
            real.join("linked/d.xml").display(),
            real.join("reports/a.xml").display()
        );
        let o = sh.run(remote::REPORT_FETCH, "t", &["6"], list.as_bytes());
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert_eq!(o.stdout, b"fourx", "{n}");
        let cut = sh.run(remote::REPORT_FETCH, "t", &["3"], list.as_bytes());
        assert_eq!(cut.stdout, b"fou", "{n}");
        let gone = format!("{}\0", real.join("reports/gone").display());
        let o = sh.run(remote::REPORT_FETCH, "t", &["6"], gone.as_bytes());
        assert_ne!(code(&o), Some(0), "{n}");
    }
}

#[test]
fn heal_rm_tree_and_submodule_touch_only_their_own_tree() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        let sha = repo_at(&repo);
        let other = d.path().join("other");
        git(&repo, &["worktree", "add", "-q", "--detach", p(&other)]);
        let tree = d.path().join("scratch/k/tree");
        std::fs::create_dir_all(tree.parent().unwrap()).unwrap();
        git(&repo, &["worktree", "add", "-q", "--detach", p(&tree)]);
        std::fs::write(tree.parent().unwrap().join("junk"), "x").unwrap();
        let o = sh.run_env(
            remote::HEAL,
            "saphan-heal",
            &[p(&repo), p(&tree)],
            b"",
            &[("SAPHAN_SCRATCH", p(&tree))],
        );
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert!(!tree.exists(), "{n}");
        assert!(
            tree.parent().unwrap().is_dir(),
            "{n}: the parent is recreated"
        );
        assert!(!tree.parent().unwrap().join("junk").exists(), "{n}");
        let list = git_out(&repo, &["worktree", "list", "--porcelain"]);
        assert!(
            list.contains(p(&other)),
            "{n}: another worktree was touched"
        );
        assert!(!list.contains(p(&tree)), "{n}: {list}");
        // Submodule: a shared clone from a store on the machine.
        let sub = d.path().join("sub");
        let o = sh.run(remote::SUBMODULE, "t", &[p(&repo), p(&sub), &sha], b"");
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert_eq!(git_out(&sub, &["rev-parse", "HEAD"]), sha, "{n}");
        let o = sh.run(
            remote::SUBMODULE,
            "t",
            &[p(&repo), p(&sub), &"0".repeat(40)],
            b"",
        );
        assert_ne!(code(&o), Some(0), "{n}");
        // By hand: the tree, and an admin entry only if it is one.
        let admin = d.path().join("common/worktrees/x");
        let keep = d.path().join("keep");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::create_dir_all(&tree).unwrap();
        assert_eq!(
            code(&sh.run(remote::RM_TREE, "t", &[p(&tree), p(&admin)], b"")),
            Some(0)
        );
        assert!(!tree.exists() && !admin.exists(), "{n}");
        assert_eq!(
            code(&sh.run(remote::RM_TREE, "t", &[p(&tree), p(&keep)], b"")),
            Some(0)
        );
        assert!(keep.exists(), "{n}: not an admin entry, not removed");
    }
}

/// heal.sh leaves a registration of the scratch path that someone else
/// locked exactly as it is (exit 3, `HEAL_EXIT_FOREIGN`); git's own
/// `initializing` lock of an add an earlier attempt started (its marker
/// there before) is healed.
#[test]
fn heal_refuses_a_foreign_locked_worktree_and_heals_a_killed_add() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        repo_at(&repo);
        let tree = d.path().join("scratch/k/tree");
        let marker = d.path().join("scratch-live/k");
        std::fs::create_dir_all(tree.parent().unwrap()).unwrap();
        git(&repo, &["worktree", "add", "-q", "--detach", p(&tree)]);
        git(&repo, &["worktree", "lock", "--reason", "mine", p(&tree)]);
        std::fs::write(tree.join("precious"), "x").unwrap();
        let heal = || {
            sh.run(
                remote::HEAL,
                "saphan-heal",
                &[p(&repo), p(&tree), p(&marker)],
                b"",
            )
        };
        let o = heal();
        assert_eq!(code(&o), Some(remote::HEAL_EXIT_FOREIGN), "{n}");
        assert!(tree.join("precious").exists(), "{n}");
        let list = git_out(&repo, &["worktree", "list", "--porcelain"]);
        assert!(list.contains("locked mine"), "{n}: {list}");
        // git's own lock of an add that was killed, with the marker there.
        let admin = git_out(&tree, &["rev-parse", "--path-format=absolute", "--git-dir"]);
        std::fs::write(Path::new(&admin).join("locked"), "initializing").unwrap();
        assert!(marker.exists(), "{n}: the marker was written");
        let o = heal();
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert!(!tree.exists(), "{n}");
        let list = git_out(&repo, &["worktree", "list", "--porcelain"]);
        assert!(!list.contains(p(&tree)), "{n}: {list}");
    }
}

#[test]
fn ship_probe_and_fetch_move_a_bundle_into_the_mirror() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        let sha = repo_at(&repo);
        let mirror = d.path().join("w/mirrors/k.git");
        let o = sh.run(
            remote::SHIP_PROBE,
            "saphan-ship",
            &[p(&mirror), "4", &sha],
            b"",
        );
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert_eq!(s(&o.stdout), "", "{n}: a new mirror holds nothing");
        git(&repo, &["update-ref", "refs/saphan/ship/t", &sha]);
        let bundle = d.path().join("b.bundle");
        git(
            &repo,
            &["bundle", "create", "-q", p(&bundle), "refs/saphan/ship/t"],
        );
        let incoming = d.path().join("w/incoming/t.bundle");
        let bytes = std::fs::read(&bundle).unwrap();
        let size = bytes.len().to_string();
        let o = sh.run(
            remote::SHIP_FETCH,
            "saphan-fetch",
            &[p(&mirror), p(&incoming), "refs/saphan/ship/t", &sha, &size],
            &bytes,
        );
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert!(!incoming.exists(), "{n}: the incoming bundle stays");
        let o = sh.run(
            remote::SHIP_PROBE,
            "saphan-ship",
            &[p(&mirror), "4", &sha],
            b"",
        );
        assert_eq!(s(&o.stdout), format!("have {sha}\npresent {sha}\n"), "{n}");
        // A cut bundle is refused and removed (a fresh mirror: one that
        // holds the commit already needs nothing from it) — by its size:
        // its header passes `git bundle verify`, and fetching it left the
        // dead index-pack's tmp_pack_* in the mirror.
        let fresh = d.path().join("w/mirrors/fresh.git");
        git(d.path(), &["init", "-q", "--bare", p(&fresh)]);
        let o = sh.run(
            remote::SHIP_FETCH,
            "saphan-fetch",
            &[p(&fresh), p(&incoming), "refs/saphan/ship/t", &sha, &size],
            &bytes[..bytes.len() / 2],
        );
        assert_ne!(code(&o), Some(0), "{n}");
        assert!(
            s(&o.stderr).contains("the bundle arrived cut short"),
            "{n}: {}",
            s(&o.stderr)
        );
        assert!(!incoming.exists(), "{n}: a half bundle stays");
        let tmp: Vec<_> = std::fs::read_dir(fresh.join("objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(tmp.is_empty(), "{n}: the fetch left {tmp:?}");
    }
}

/// The supervisor's protocol, and issue 20.2: the reap of a scratch path
/// (kill-leftovers.sh) kills the program's group *and* disarms its
/// watchdog, whose `sleep` alone carries `SAPHAN_WATCHDOG=<path>`.
#[test]
fn the_watchdog_keeps_its_protocol_and_goes_with_a_reaped_group() {
    for sh in shells() {
        let n = sh.name;
        let run = |budget: &str, args: &[&str]| {
            let mut a = vec!["N1", budget, "0.5", "", remote::WATCHDOG_INNER];
            a.extend_from_slice(args);
            sh.run(remote::WATCHDOG, "saphan-run", &a, b"")
        };
        let o = run("30", &["+A=b c", "--", "sh", "-c", "echo \"$A\"; exit 7"]);
        assert_eq!(s(&o.stdout), "b c\n", "{n}");
        assert!(
            s(&o.stderr).ends_with("\nN1 exit 7\n"),
            "{n}: {}",
            s(&o.stderr)
        );
        assert!(s(&o.stderr).contains("N1 pgid "), "{n}");
        // A program killed by a signal: its stderr is its own — the shell's
        // `Killed` about the job it waited for is not added to it.
        let o = run("30", &["--", "sh", "-c", "echo own >&2; kill -KILL $$"]);
        assert_eq!(
            without_pgid(&s(&o.stderr), "N1"),
            "own\n\nN1 exit 137\n",
            "{n}"
        );
        let o = run("0.5", &["--", "sh", "-c", "sleep 300 & wait"]);
        assert!(
            s(&o.stderr).ends_with("\nN1 timeout\n"),
            "{n}: {}",
            s(&o.stderr)
        );
        let o = run("30", &["--", "saphan-no-such-program"]);
        assert!(
            s(&o.stderr).contains("\nN1 noprogram\n"),
            "{n}: {}",
            s(&o.stderr)
        );
        let o = sh.run(
            remote::WATCHDOG,
            "saphan-run",
            &[
                "N1",
                "30",
                "0.5",
                "/nonexistent/dir",
                remote::WATCHDOG_INNER,
                "--",
                "true",
            ],
            b"",
        );
        assert!(
            s(&o.stderr).ends_with("\nN1 nocwd\n"),
            "{n}: {}",
            s(&o.stderr)
        );

        // A run for a scratch path; the reap of that path takes the
        // program's group and disarms the watchdog.
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(format!("tree-{}", n.replace(' ', "-")));
        let marker = format!("SAPHAN_SCRATCH={}", path.display());
        let watch = format!("SAPHAN_WATCHDOG={}", path.display());
        let plus = format!("+{marker}");
        let mut sup = sh.cmd();
        sup.args([
            "-c",
            remote::WATCHDOG,
            "saphan-run",
            "N2",
            "600",
            "0.5",
            "",
            remote::WATCHDOG_INNER,
            &plus,
            "--",
            "sh",
            "-c",
            "sleep 900 & wait",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let sup = sup.spawn().unwrap();
        until("the program and its watchdog run", || {
            !with_env(&marker).is_empty() && !with_env(&watch).is_empty()
        });
        let o = sh.run(remote::KILL_LEFTOVERS, "saphan-leftovers", &[p(&path)], b"");
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert_eq!(s(&o.stdout), "", "{n}: survivors");
        assert!(with_env(&marker).is_empty(), "{n}");
        assert!(
            with_env(&watch).is_empty(),
            "{n}: the watchdog is still armed"
        );
        let o = sup.wait_with_output().unwrap();
        assert!(
            !s(&o.stderr).contains("timeout"),
            "{n}: a disarmed watchdog fired: {}",
            s(&o.stderr)
        );
    }
}

/// prepare.sh: one shell kills what an earlier attempt left at a scratch
/// path (its attempt marker there) and then heals the path; the shell
/// itself is not taken for a leftover.
#[test]
fn prepare_kills_the_leftovers_then_heals_in_one_shell() {
    use std::os::unix::process::ExitStatusExt;
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        repo_at(&repo);
        let tree = d
            .path()
            .join(format!("scratch/k-{}/tree", n.replace(' ', "-")));
        std::fs::create_dir_all(tree.parent().unwrap()).unwrap();
        git(&repo, &["worktree", "add", "-q", "--detach", p(&tree)]);
        let mark = d.path().join("scratch-live/k");
        std::fs::create_dir_all(mark.parent().unwrap()).unwrap();
        std::fs::write(&mark, "").unwrap();
        // An earlier attempt's leftover: a process carrying the marker.
        let marker = format!("SAPHAN_SCRATCH={}", tree.display());
        let mut left = std::process::Command::new("sleep")
            .arg("600")
            .env("SAPHAN_SCRATCH", &tree)
            .spawn()
            .unwrap();
        until("the leftover runs", || !with_env(&marker).is_empty());
        let o = sh.run(
            remote::PREPARE,
            "saphan-prepare",
            &[
                remote::KILL_LEFTOVERS,
                remote::HEAL,
                p(&repo),
                p(&tree),
                p(&mark),
            ],
            b"",
        );
        assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        assert_eq!(s(&o.stdout), "", "{n}: survivors");
        assert!(left.wait().unwrap().signal().is_some(), "{n}: not killed");
        assert!(!tree.exists(), "{n}: not healed");
        assert!(
            tree.parent().unwrap().is_dir(),
            "{n}: the parent is recreated"
        );
        assert!(mark.exists(), "{n}: the attempt marker is written");
        let list = git_out(&repo, &["worktree", "list", "--porcelain"]);
        assert!(!list.contains(p(&tree)), "{n}: {list}");
    }
}

/// Every process whose command line is exactly `argv`.
fn with_cmdline(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want) {
            v.push(pid);
        }
    }
    v
}

/// `stderr` without the supervisor's `NONCE pgid N` line.
fn without_pgid(stderr: &str, nonce: &str) -> String {
    let tag = format!("{nonce} pgid ");
    stderr
        .split_inclusive('\n')
        .filter(|l| !l.starts_with(&tag))
        .collect()
}

/// A command that ends at once leaves no watchdog `sleep` behind: the
/// supervisor's TERM could land before the watchdog knew its `sleep`'s pid,
/// or in the forked child before it exec'd `sleep` (where the trap still
/// ran), and that `sleep` then lived out the whole budget — about one fast
/// command in twenty on the lab (the `sleep 120.000` strays after a soak).
#[test]
fn a_fast_command_leaves_no_watchdog_sleep_behind() {
    let mut left = Vec::new();
    for sh in shells() {
        let n = sh.name;
        let budget = format!("611.{}", std::process::id() % 1000);
        for i in 0..300 {
            let nonce = format!("N{i}");
            let o = sh.run(
                remote::WATCHDOG,
                "saphan-run",
                &[
                    &nonce,
                    &budget,
                    "0.5",
                    "",
                    remote::WATCHDOG_INNER,
                    "--",
                    "true",
                ],
                b"",
            );
            // Nothing but the protocol's lines: a watchdog that got its
            // TERM before its trap was set dies of it, and the shell's
            // `Terminated` about it is not the program's stderr.
            assert_eq!(
                without_pgid(&s(&o.stderr), &nonce),
                format!("\n{nonce} exit 0\n"),
                "{n}"
            );
        }
        // A stray is reparented, not a zombie: give a dying one a moment.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let strays = with_cmdline(&["sleep", &budget]);
        for pid in &strays {
            // SAFETY: kill(2) on pids this test's supervisors started.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        if !strays.is_empty() {
            left.push(format!("{n}: {}", strays.len()));
        }
    }
    assert!(
        left.is_empty(),
        "watchdog sleeps that outlived 300 fast commands: {left:?}"
    );
}

/// Run `argv` (with `env`) under a fresh child subreaper (a forked child of
/// this test with `PR_SET_CHILD_SUBREAPER`) that reaps every descendant
/// orphaned under it, as an init that reaps does, and exits once none is
/// left. Returns the subreaper's pid.
fn under_subreaper(argv: &[String], env: &[String]) -> i32 {
    use std::ffi::CString;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()).unwrap())
        .collect();
    let envs: Vec<CString> = env
        .iter()
        .map(|a| CString::new(a.as_str()).unwrap())
        .collect();
    let mut argp: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = envs.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: between fork and exec/_exit the child calls only
    // async-signal-safe functions (prctl, fork, execve, waitpid, _exit) on
    // memory prepared before the fork.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            let c = libc::fork();
            if c == 0 {
                libc::execve(argp[0], argp.as_ptr(), envp.as_ptr());
                libc::_exit(127);
            }
            let mut st = 0;
            while libc::waitpid(-1, &mut st, 0) > 0 {}
            libc::_exit(0);
        }
        pid
    }
}

/// Issue 20.2, the other half: a watchdog signals only a group that is
/// still the attempt's. Its supervisor is killed and the program's leader
/// ends and is reaped (so the group's id is free for a stranger), one
/// process left in the old group standing in for whoever may hold the id
/// by then. Once the budget is past and the orphaned watchdog has ended,
/// that process still lives: the watchdog signalled nothing it could no
/// longer vouch for. (Before, it sent SIGTERM to the old id at the budget.)
#[test]
fn an_orphaned_watchdog_signals_no_group_that_is_not_its_attempts() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let sup_file = d.path().join("supervisor");
        let held_file = d.path().join("held");
        let nonce = format!(
            "saphan-orphan-{}-{}",
            std::process::id(),
            n.replace(' ', "-")
        );
        // The leader notes its supervisor ($1), waits until it is gone,
        // leaves a child in its group and exits.
        let prog = format!(
            "echo \"$1\" > {s}.t && mv {s}.t {s}; while kill -0 \"$1\" 2>/dev/null; do sleep 0.05; done; sleep 120 & echo $! > {h}.t && mv {h}.t {h}; exit 0",
            s = sup_file.display(),
            h = held_file.display()
        );
        // `exec`: the supervisor keeps the wrapper's pid, which the program
        // gets as $1.
        let wrapper = format!(
            "exec \"$0\" -c \"$1\" saphan-run {nonce} 1 0.2 '' \"$2\" -- sh -c '{prog}' prog $$"
        );
        let path = std::env::var("PATH").unwrap_or_default();
        let path = match &sh.path_first {
            Some(b) => format!("PATH={}:{path}", b.display()),
            None => format!("PATH={path}"),
        };
        let reaper = under_subreaper(
            &[
                sh.argv[0].clone(),
                "-c".into(),
                wrapper,
                sh.argv[0].clone(),
                remote::WATCHDOG.into(),
                remote::WATCHDOG_INNER.into(),
            ],
            &[path],
        );
        let read_pid =
            |f: &Path| -> i32 { std::fs::read_to_string(f).unwrap().trim().parse().unwrap() };
        until("the program runs", || sup_file.exists());
        // SAFETY: the supervisor this test started, by its pid.
        unsafe { libc::kill(read_pid(&sup_file), libc::SIGKILL) };
        until("the leader left its child", || held_file.exists());
        let held = read_pid(&held_file);
        // The orphaned watchdog (its command line is the supervisor's, with
        // the nonce) ends at its budget, after deciding.
        until("the orphaned watchdog ended", || {
            !std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| c.windows(nonce.len()).any(|w| w == nonce.as_bytes()))
            })
        });
        let alive = std::fs::read_to_string(format!("/proc/{held}/stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(") ")
                    .map(|(_, r)| !r.starts_with(['Z', 'X']))
            })
            .unwrap_or(false);
        // SAFETY: the pid this test's own program started.
        unsafe { libc::kill(held, libc::SIGKILL) };
        let mut st = 0;
        // SAFETY: reaping the subreaper this test forked.
        unsafe { libc::waitpid(reaper, &mut st, 0) };
        assert!(
            alive,
            "{n}: the orphaned watchdog signalled the old group id"
        );
    }
}

/// A directory of stand-ins for `tools` that are on PATH but do not run
/// (each exits 126, as a shell does for a file it cannot execute), to put
/// first on PATH.
fn broken(tools: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for t in tools {
        let f = d.path().join(t);
        std::fs::write(&f, "#!/bin/sh\necho \"$0: cannot execute\" >&2\nexit 126\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

/// Issue 40 item 7: a holder writes who it is beside the lock (flock or
/// mkdir lock alike); a waiter's lock-wait.sh says `busy` and that line at
/// once, or after the seconds it is given; the line is gone on release,
/// and the waiter then takes the lock.
#[test]
fn a_busy_lock_says_who_holds_it() {
    use saphan::record::wait::Holder;
    let no_flock = broken(&["flock"]);
    for sh in shells() {
        for before in [None, Some(no_flock.path())] {
            let n = format!(
                "{}{}",
                sh.name,
                if before.is_some() {
                    " (mkdir lock)"
                } else {
                    ""
                }
            );
            let d = tempfile::tempdir().unwrap();
            let lock = d.path().join("locks/k.lock");
            let holder_file = d.path().join("locks/k.lock.holder");
            let ready = |k: &str| d.path().join(format!("runs/{k}/locked"));
            let me = Holder {
                since: String::new(),
                pid: 4242,
                verb: "certify".into(),
                host: "controller".into(),
            };
            let hold = |k: &str, wait: &str| {
                let mut c = sh.cmd_before(before);
                c.args([
                    "-c",
                    remote::LOCK,
                    "saphan-lock",
                    p(&lock),
                    p(&ready(k)),
                    wait,
                    &me.members(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::null());
                c.spawn().unwrap()
            };
            let wait = |k: &str, after: &str| {
                sh.run(
                    remote::LOCK_WAIT,
                    "t",
                    &[p(&ready(k)), "", p(&holder_file), after],
                    b"",
                )
            };
            let mut a = hold("a", "20");
            assert_eq!(code(&wait("a", "0")), Some(0), "{n}");
            let line = std::fs::read_to_string(&holder_file).unwrap();
            let written = Holder::parse(&line).unwrap_or_else(|| panic!("{n}: {line:?}"));
            assert_eq!(
                (written.pid, written.verb.as_str()),
                (4242, "certify"),
                "{n}"
            );
            assert!(
                saphan::clock::parse_rfc3339(&written.since).is_some(),
                "{n}: {line:?}"
            );
            // A second run waits: lock-wait says so at once, with the line.
            let mut b = hold("b", "20");
            let o = wait("b", "0");
            assert_eq!(
                code(&o),
                Some(remote::LOCK_WAIT_EXIT_BUSY),
                "{n}: {}",
                s(&o.stderr)
            );
            let out = s(&o.stdout);
            let mut lines = out.lines();
            assert_eq!(lines.next(), Some("busy"), "{n}: {out:?}");
            assert_eq!(
                lines.next().and_then(Holder::parse),
                Some(written.clone()),
                "{n}"
            );
            // Asked to say it after a second: not before.
            let t0 = std::time::Instant::now();
            assert_eq!(
                code(&wait("b", "1")),
                Some(remote::LOCK_WAIT_EXIT_BUSY),
                "{n}"
            );
            assert!(t0.elapsed() >= std::time::Duration::from_secs(1), "{n}");
            // Released: the line goes, the waiter takes the lock and says so.
            drop(a.stdin.take());
            assert!(a.wait().unwrap().success(), "{n}");
            assert_eq!(code(&wait("b", "5")), Some(0), "{n}");
            assert!(holder_file.exists(), "{n}: the new holder's line");
            drop(b.stdin.take());
            assert!(b.wait().unwrap().success(), "{n}");
            assert!(!holder_file.exists(), "{n}: removed on release");
            // Without the holder file argument, lock-wait only waits (as before).
            let mut c = hold("c", "20");
            let w = sh.run(remote::LOCK_WAIT, "t", &[p(&ready("c"))], b"");
            assert_eq!((code(&w), s(&w.stdout)), (Some(0), String::new()), "{n}");
            drop(c.stdin.take());
            assert!(c.wait().unwrap().success(), "{n}");
        }
    }
}

/// This process's identity as lock.sh writes a holder's: pid and start time.
fn identity_of_self() -> String {
    let st = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = st.rsplit_once(") ").unwrap().1;
    let start = rest.split_whitespace().nth(19).unwrap();
    format!("{} {start}", std::process::id())
}

/// Issue 23: where `flock` does not run, lock.sh holds a `mkdir` lock with
/// flock's lifetime: held until stdin closes, released on TERM, broken by
/// the next waiter once its holder is gone (KILL) — and not broken while a
/// process with the holder's pid *and start time* runs (pid reuse).
#[test]
fn the_mkdir_lock_holds_where_flock_does_not_run() {
    use std::os::unix::process::CommandExt;
    let no = broken(&["flock"]);
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let lock = d.path().join("locks/k.lock");
        let dir = d.path().join("locks/k.lock.d");
        let ready = |k: &str| d.path().join(format!("runs/{k}/locked"));
        let holder = |k: &str| {
            let mut c = sh.cmd_before(Some(no.path()));
            c.args([
                "-c",
                remote::LOCK,
                "saphan-lock",
                p(&lock),
                p(&ready(k)),
                "5",
            ])
            .stdin(Stdio::piped())
            .process_group(0);
            c.spawn().unwrap()
        };
        let take = |k: &str, wait: &str| {
            sh.run_before(
                no.path(),
                remote::LOCK,
                "saphan-lock",
                &[p(&lock), p(&ready(k)), wait],
            )
        };
        // Held until stdin closes; busy meanwhile.
        let mut h = holder("a");
        let w = sh.run(remote::LOCK_WAIT, "t", &[p(&ready("a"))], b"");
        assert_eq!(code(&w), Some(0), "{n}: {}", s(&w.stderr));
        assert!(dir.join("owner").is_file(), "{n}: the mkdir lock");
        let busy = take("b", "0");
        assert_eq!(code(&busy), Some(remote::LOCK_EXIT_BUSY), "{n}");
        assert!(!ready("b").exists(), "{n}");
        drop(h.stdin.take());
        assert!(h.wait().unwrap().success(), "{n}");
        assert!(!dir.exists(), "{n}: released when stdin closed");
        assert_eq!(code(&take("c", "0")), Some(0), "{n}");
        assert!(!dir.exists(), "{n}");
        // TERM to the holder's group (the watchdog's budget) releases it.
        let mut h = holder("d");
        until("the lock is held", || ready("d").exists());
        // SAFETY: kill has no memory preconditions; the group is the holder's own.
        unsafe { libc::kill(-(h.id() as i32), libc::SIGTERM) };
        assert!(!h.wait().unwrap().success(), "{n}");
        assert!(!dir.exists(), "{n}: released on TERM");
        // KILL leaves the directory; the next waiter breaks it.
        let mut h = holder("e");
        until("the lock is held", || ready("e").exists());
        h.kill().unwrap();
        h.wait().unwrap();
        assert!(dir.join("owner").exists(), "{n}: KILL leaves the lock");
        let again = take("f", "5");
        assert_eq!(code(&again), Some(0), "{n}: {}", s(&again.stderr));
        assert!(!dir.exists(), "{n}");
        // A live process with the owner's pid but another start time is
        // another process: stale. The same pid and start time: held.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("owner"), format!("{} 1\n", std::process::id())).unwrap();
        assert_eq!(code(&take("g", "5")), Some(0), "{n}: a reused pid");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("owner"), identity_of_self() + "\n").unwrap();
        assert_eq!(
            code(&take("h", "0")),
            Some(remote::LOCK_EXIT_BUSY),
            "{n}: a live holder"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Issue 23: sha256.sh hashes with `sha256sum`, or `shasum -a 256` where
/// `sha256sum` does not run — the same digest; neither running fails.
#[test]
fn sha256_falls_back_to_shasum() {
    if common::skip_unless(common::have("shasum"), "no shasum (Debian: perl)") {
        return;
    }
    let no_sum = broken(&["sha256sum"]);
    let neither = broken(&["sha256sum", "shasum"]);
    let none = broken(&[]);
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f");
    std::fs::write(&f, "provisioned bytes\n").unwrap();
    let want = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"provisioned bytes\n"))
    };
    for sh in shells() {
        let n = sh.name;
        for dir in [none.path(), no_sum.path()] {
            let o = sh.run_before(dir, remote::SHA256, "saphan-sha256", &[p(&f)]);
            assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
            assert_eq!(
                s(&o.stdout).split_whitespace().next(),
                Some(want.as_str()),
                "{n}"
            );
        }
        // busybox sh runs its own applets whatever PATH says: its
        // sha256sum cannot be broken from PATH.
        if sh.path_first.is_none() {
            let o = sh.run_before(neither.path(), remote::SHA256, "saphan-sha256", &[p(&f)]);
            assert_ne!(code(&o), Some(0), "{n}");
        }
        let o = sh.run_before(
            none.path(),
            remote::SHA256,
            "saphan-sha256",
            &[p(&d.path().join("nope"))],
        );
        assert_ne!(code(&o), Some(0), "{n}: a missing file");
    }
}

/// Issue 23: the measure script's requirements section says which tools
/// run, by a real use (a file on PATH that does not run is `not-runnable`).
#[test]
fn measure_says_which_required_tools_run() {
    let no = broken(&["flock", "sha256sum", "setsid"]);
    let none = broken(&[]);
    for sh in shells() {
        let n = sh.name;
        let req = |dir: &Path| {
            let o = sh.run_before(dir, remote::MEASURE, "saphan-measure", &[]);
            let out = s(&o.stdout);
            out.split("@@saphan-measure:requirements\n")
                .nth(1)
                .unwrap_or_else(|| panic!("{n}: no requirements section: {out}"))
                .split("\n@@saphan-measure:")
                .next()
                .unwrap()
                .to_string()
        };
        let ok = req(none.path());
        for t in ["flock", "setsid", "sha256sum", "proc", "ps"] {
            assert!(ok.contains(&format!("{t} ok")), "{n}: {t}: {ok}");
        }
        assert!(ok.contains("git ok 2."), "{n}: {ok}");
        let bad = req(no.path());
        // busybox sh runs its own applets (setsid, sha256sum) whatever PATH
        // says; flock is not one of them here.
        let breakable: &[&str] = if sh.path_first.is_some() {
            &["flock"]
        } else {
            &["flock", "setsid", "sha256sum"]
        };
        for t in breakable {
            assert!(
                bad.contains(&format!("{t} not-runnable")),
                "{n}: {t}: {bad}"
            );
        }
    }
}

/// The first dispatches of a repository at once all open one new mirror
/// (no lock: one rename wins), leaving nothing beside or inside it.
#[test]
fn ship_probe_makes_one_mirror_without_a_lock() {
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let mirror = d.path().join("w/mirrors/k.git");
        let kids: Vec<_> = (0..6)
            .map(|_| {
                sh.cmd()
                    .args(["-c", remote::SHIP_PROBE, "saphan-ship", p(&mirror), "60"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for k in kids {
            let o = k.wait_with_output().unwrap();
            assert_eq!(code(&o), Some(0), "{n}: {}", s(&o.stderr));
        }
        assert_eq!(
            git_out(&mirror, &["rev-parse", "--is-bare-repository"]),
            "true",
            "{n}"
        );
        let beside: Vec<_> = std::fs::read_dir(mirror.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(beside, vec!["k.git".to_string()], "{n}");
        let inside: Vec<_> = std::fs::read_dir(&mirror)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| f.contains(".init."))
            .collect();
        assert!(inside.is_empty(), "{n}: {inside:?}");
    }
}

#[test]
fn slurm_login_gives_the_command_line_a_login_and_its_status() {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .unwrap()
        .unwrap();
    for sh in shells() {
        let n = sh.name;
        // What srun --export=NONE leaves a task: no HOME, USER, PATH.
        let mut c = sh.cmd();
        c.env_clear();
        if let Some(d) = &sh.path_first {
            // busybox's applets (`id`) are where a busybox machine has them.
            c.env("PATH", d);
        }
        let o = c
            .arg("-c")
            .arg(remote::SLURM_LOGIN)
            .arg("saphan-slurm-login")
            .arg("printf '%s|' \"$HOME\" \"$USER\" \"$LOGNAME\" \"$SHELL\" \"$PATH\" \"$(pwd)\" ':' 'a b'; exit 7")
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(code(&o), Some(7), "{n}: {}", s(&o.stderr));
        let home = user.dir.display().to_string();
        assert_eq!(
            s(&o.stdout),
            format!(
                "{home}|{u}|{u}|{}|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|{home}|:|a b|",
                user.shell.display(),
                u = user.name
            ),
            "{n}"
        );
        assert!(o.stderr.is_empty(), "{n}: {}", s(&o.stderr));
    }
}
