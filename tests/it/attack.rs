//! What a hostile or careless operator does to certify: closed output
//! streams, counts past 64 bits, unreadable report directories, one
//! repository reached by two paths, corrupt records and configs. The real
//! binary on real git repositories; each test fails without its fix.

use crate::common::{Env, Repo, assert_code, assert_only_main_worktree, text};
use std::process::{Command, Stdio};

/// A pipe whose read end is already closed: a write to the other end fails
/// with EPIPE (`| head -c0` once head has gone).
fn widowed_pipe() -> Stdio {
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    Stdio::from(w)
}

/// `saphan args…` with stdout (`which == 1`) or stderr (`2`) a widowed
/// pipe; the other stream captured. Returns (exit code, captured bytes).
fn run_widowed(env: &Env, args: &[&str], which: u8) -> (Option<i32>, String) {
    let mut c: Command = env.cmd();
    c.args(args).stdin(Stdio::null());
    if which == 1 {
        c.stdout(widowed_pipe()).stderr(Stdio::piped());
    } else {
        c.stderr(widowed_pipe()).stdout(Stdio::piped());
    }
    let o = c.output().unwrap();
    let other = if which == 1 { &o.stderr } else { &o.stdout };
    (o.status.code(), String::from_utf8_lossy(other).into_owned())
}

#[test]
fn a_closed_stdout_or_stderr_keeps_the_verdicts_exit_code() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let red = Repo::new(&[("suite.sh", "#!/bin/sh\necho out; echo err >&2; exit 1\n")]);
    let green = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let cases: [(&Repo, &[&str], i32); 4] = [
        (&red, &[], 1),
        (&red, &["--json"], 1),
        (&green, &[], 0),
        (&green, &["--json"], 0),
    ];
    for (repo, extra, code) in cases {
        for which in [1u8, 2] {
            let before = repo.records().len();
            let mut args = vec!["certify", "--repo", repo.dir.path().to_str().unwrap()];
            args.extend_from_slice(extra);
            let (got, other) = run_widowed(&env, &args, which);
            assert_eq!(
                got,
                Some(code),
                "certify {extra:?} with fd {which} a closed pipe: {other}"
            );
            assert!(!other.contains("panicked"), "{other}");
            // The attempt is recorded whole whatever happened to the words.
            assert_eq!(repo.records().len(), before + 1);
            assert_only_main_worktree(repo);
        }
    }
    // A refusal is still a refusal, and `records` still ends 0.
    for which in [1u8, 2] {
        let (got, other) = run_widowed(&env, &["certify", "--repo", "/nonexistent"], which);
        assert_eq!(got, Some(2), "fd {which}: {other}");
        let (got, other) = run_widowed(&env, &["records", "--repo", &red.path_str()], which);
        assert_eq!(got, Some(0), "fd {which}: {other}");
    }
    // `>&-` and `2>&-`: the stream is not there at all.
    for fd in [1, 2] {
        let mut c = env.cmd();
        c.args(["certify", "--repo", &red.path_str()]);
        use std::os::unix::process::CommandExt;
        // SAFETY: close(2) is async-signal-safe; nothing else runs here.
        unsafe {
            c.pre_exec(move || {
                libc::close(fd);
                Ok(())
            });
        }
        let o = c.output().unwrap();
        assert_code(&o, 1);
        assert!(!text(&o).1.contains("panicked"));
    }
}

/// Run `c` as `nobody` when this test runs as root (permissions bind only
/// a non-root user), with every path in `owned` handed to nobody first.
fn as_nobody(c: &mut Command, owned: &[&std::path::Path]) {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::Uid::effective().is_root() {
        return;
    }
    for p in owned {
        let o = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    c.env("HOME", owned[0]);
    // SAFETY: setgroups/setgid/setuid are async-signal-safe syscalls.
    unsafe {
        c.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Hand `p` back to this test's user after [`as_nobody`] (git refuses a
/// repository another user owns).
fn give_back(p: &std::path::Path) {
    if nix::unistd::Uid::effective().is_root() {
        let o = Command::new("chown")
            .arg("-R")
            .arg("0:0")
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
}

#[test]
fn an_unreadable_report_directory_is_report_unreadable_never_a_green() {
    // The suite writes a passing report beside a failing one it then makes
    // unreadable: the glob's walk must not skip it into a green.
    let suite = "#!/bin/sh\nmkdir -p reports/sub\n\
        echo '<testsuite name=\"a\" tests=\"1\"><testcase classname=\"a\" name=\"ok\"/></testsuite>' > reports/ok.xml\n\
        echo '<testsuite name=\"b\" tests=\"1\"><testcase classname=\"b\" name=\"bad\"><failure message=\"x\"/></testcase></testsuite>' > reports/sub/bad.xml\n\
        chmod 000 reports/sub\nexit 0\n";
    // A "directory" of the glob that is a file.
    let file_dir = "#!/bin/sh\nprintf x > reports\nexit 0\n";
    for (script, pattern, named) in [
        (suite, "reports/**/*.xml", "reports/sub"),
        (file_dir, "reports/*.xml", "reports"),
        (file_dir, "reports/junit.xml", "reports/junit.xml"),
    ] {
        let env = Env::new();
        env.write_config(&format!(
            "[verify.full]\nargv = \"./suite.sh\"\nreport = \"junit-xml\"\nreport_path = \"{pattern}\"\n"
        ));
        let repo = Repo::new(&[("suite.sh", script)]);
        let mut c = env.cmd();
        c.args(["certify", "--repo", &repo.path_str()]);
        as_nobody(&mut c, &[env.home(), repo.path()]);
        let o = c.output().unwrap();
        give_back(repo.path());
        let (out, err) = text(&o);
        let err = format!("{out}{err}");
        assert_code(&o, 3);
        assert!(err.contains("report-unreadable: "), "{pattern}: {err}");
        assert!(err.contains(named), "{pattern}: names {named}: {err}");
        assert_eq!(repo.verified(), None, "{pattern}: the pointer moved");
        let records = repo.records();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0]["verdict"], "measurement-failed", "{pattern}");
        assert_only_main_worktree(&repo);
    }
}

#[test]
fn one_repository_through_a_symlink_and_a_linked_worktree_is_certified_one_at_a_time() {
    // The lock lives in the git common dir: every path to the repository
    // (its own, a symlink to it, a linked worktree) takes the same one.
    let env = Env::new();
    // Observes the suite through a log file in a tempdir outside its tree, which a sealed suite cannot write (the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let side = tempfile::tempdir().unwrap();
    let log = side.path().join("log");
    let repo = Repo::new(&[(
        "suite.sh",
        &format!(
            "#!/bin/sh\necho start >> '{l}'\nsleep 1\necho end >> '{l}'\nexit 0\n",
            l = log.display()
        ),
    )]);
    let link = side.path().join("link");
    std::os::unix::fs::symlink(repo.path(), &link).unwrap();
    let linked = side.path().join("linked");
    crate::common::git(
        repo.path(),
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            linked.to_str().unwrap(),
        ],
    );
    let runs: Vec<_> = [repo.path().to_path_buf(), link, linked]
        .into_iter()
        .map(|p| {
            env.cmd()
                .args(["certify", "--sha", "main", "--repo"])
                .arg(p)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let o = r.wait_with_output().unwrap();
        assert_code(&o, 0);
    }
    let got = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        got,
        "start\nend\n".repeat(3),
        "two certify runs of one repository overlapped"
    );
    assert_eq!(repo.records().len(), 3);
}

/// `<common>/saphan/attempts.jsonl` of `repo`.
fn attempts(repo: &Repo) -> std::path::PathBuf {
    repo.path().join(".git/saphan/attempts.jsonl")
}

/// A line that is not UTF-8 is no record saphan wrote: every reader skips
/// it by name and goes on, and certify still measures and records
/// (issue 36/37: it used to refuse every verb, certify included, from then
/// on — a measurement lost to one byte).
#[test]
fn an_attempts_line_that_is_not_utf8_is_skipped_by_name_and_every_verb_goes_on() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let path = attempts(&repo);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"id\":\"\xff\xfe hand edit\"}\n");
    std::fs::write(&path, &bytes).unwrap();
    let named = format!("{}:2 is not a record (not UTF-8", path.display());
    for args in [vec!["records"], vec!["records", "--json"]] {
        let mut a = args.clone();
        a.extend(["--repo", repo.dir.path().to_str().unwrap()]);
        let o = env.run(&a);
        assert_code(&o, 0);
        let err = text(&o).1;
        assert!(err.contains(&named), "{args:?}: {err}");
    }
    assert_code(&env.run(&["status", "--repo", &repo.path_str()]), 0);
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..bytes.len()], &bytes[..]);
    assert_only_main_worktree(&repo);

    // A torn append (the file ends inside a character) is skipped as
    // corrupt, named, and the next record goes on a new line.
    let mut torn = bytes[..=bytes.iter().position(|b| *b == b'\n').unwrap()].to_vec();
    torn.extend_from_slice("{\"id\":\"é".as_bytes());
    torn.pop();
    std::fs::write(&path, &torn).unwrap();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let o = env.run(&["records", "--repo", &repo.path_str()]);
    assert_code(&o, 0);
    let (out, err) = text(&o);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        err.contains("record-corrupt") && err.contains(":2 "),
        "{err}"
    );
}

#[test]
fn a_config_machines_or_catalog_file_with_a_nul_or_non_utf8_byte_is_refused_at_its_line() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let r = repo.path_str();
    let good = b"[verify.full]\nargv = \"./suite.sh\"\n".to_vec();
    for (bytes, line) in [
        (
            b"[verify.full]\nargv = \"./suite.sh\"\n# caf\xe9\n".to_vec(),
            "line 3",
        ),
        (
            b"[verify.full]\nargv = \"./suite\x00.sh\"\n".to_vec(),
            "line 2",
        ),
        (
            b"[verify.full]\nargv = \"./suite.sh\"\n# \x00\n".to_vec(),
            "line 3",
        ),
    ] {
        let env = Env::new();
        std::fs::write(env.home().join("config"), &bytes).unwrap();
        for args in [vec!["certify", "--repo", &r], vec!["config", "show"]] {
            let err = crate::common::assert_refused(&env.run(&args), "config-malformed");
            assert!(err.contains(line), "{args:?} {bytes:?}: {err}");
        }
        assert!(repo.records().is_empty());
    }
    for (bytes, line) in [
        (
            b"[machine.a]\ntransport = \"local\"\n# \xff\nworkhome = \"/tmp\"\n".to_vec(),
            "line 3",
        ),
        (
            b"[machine.a]\ntransport = \"local\"\nworkhome = \"/t\x00mp\"\n".to_vec(),
            "line 3",
        ),
    ] {
        let env = Env::new();
        std::fs::write(env.home().join("config"), &good).unwrap();
        let fleet = env.home().join("fleet");
        std::fs::create_dir(&fleet).unwrap();
        std::fs::set_permissions(&fleet, std::fs::Permissions::from_mode(0o700)).unwrap();
        let m = fleet.join("machines.toml");
        std::fs::write(&m, &bytes).unwrap();
        std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = env.run(&["certify", "--repo", &r, "--machine", "a"]);
        let err = crate::common::assert_refused(&o, "machines-malformed");
        assert!(err.contains(line), "{bytes:?}: {err}");
    }
    let env = Env::new();
    let cat = env.home().join("my-catalog.toml");
    std::fs::write(&cat, b"# catalog\n# \xff\n").unwrap();
    let o = env.run(&["--catalog", cat.to_str().unwrap(), "catalog", "show"]);
    let (out, err) = text(&o);
    assert!(
        err.contains("catalog-malformed") && err.contains("line 2"),
        "{out}{err}"
    );
}

#[test]
fn a_directory_the_suite_made_unwritable_is_removed_with_its_scratch_tree() {
    // As a user permissions bind (nobody, when this runs as root): a suite
    // that leaves `chmod 000` and `chmod 500` directories in its tree.
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[(
        "suite.sh",
        "#!/bin/sh\nmkdir -p locked/deep ro\ntouch locked/deep/f ro/f\nchmod 000 locked/deep locked\nchmod 500 ro\nexit 0\n",
    )]);
    let certify = |env: &Env| {
        let mut c = env.cmd();
        c.args(["certify", "--repo", &repo.path_str()]);
        as_nobody(&mut c, &[env.home(), repo.path()]);
        let o = c.output().unwrap();
        give_back(repo.path());
        o
    };
    let o = certify(&env);
    assert_code(&o, 0);
    let scratch: Vec<_> = std::fs::read_dir(env.home().join("scratch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(scratch.len(), 1);
    let left: Vec<_> = std::fs::read_dir(&scratch[0]).unwrap().collect();
    assert!(left.is_empty(), "the scratch tree was left: {left:?}");
    assert_only_main_worktree(&repo);

    // A tree an older saphan (or a kill) left so: the next attempt heals it
    // instead of failing every certify until someone cleans up by hand.
    let tree = scratch[0].join("tree");
    std::fs::create_dir_all(tree.join("locked/deep")).unwrap();
    std::fs::write(tree.join("locked/deep/f"), "x").unwrap();
    for (p, mode) in [("locked/deep", 0o000), ("locked", 0o000)] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tree.join(p), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let o = certify(&env);
    let (out, err) = text(&o);
    assert_code(&o, 0);
    assert!(
        !err.contains("<script") || err.lines().count() < 3,
        "{out}{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&scratch[0]).unwrap().collect();
    assert!(left.is_empty(), "the scratch tree was left: {left:?}");
    assert_eq!(repo.records().len(), 2);
}

#[test]
fn a_suite_that_moves_the_verified_pointer_is_put_back_and_is_no_measurement() {
    let env = Env::new();
    // The suite writes saphan's refs on purpose to test the pointer guard (defence in depth), which the seal stops first (the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    let moves = [
        ("git update-ref refs/saphan/verified HEAD\nexit 1", "red"),
        ("git update-ref refs/saphan/verified HEAD\nexit 0", "green"),
        ("git update-ref -d refs/saphan/verified\nexit 0", "deleted"),
    ];
    for (body, what) in moves {
        let sha = repo.commit(&[("suite.sh", &format!("#!/bin/sh\n{body}\n"))], what);
        let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
        assert_code(&o, 3);
        let v = crate::common::json(&o);
        assert_eq!(v["verdict"], "measurement-failed", "{what}: {v}");
        assert_eq!(v["failure"], "suite-moved-pointer", "{what}: {v}");
        // The pointer stands where saphan left it, never on the suite's SHA.
        assert_eq!(repo.verified().as_deref(), Some(first.as_str()), "{what}");
        assert_ne!(repo.verified().as_deref(), Some(sha.as_str()));
    }
}

/// A suite that makes the pointer a symbolic ref (to the trunk, or
/// anywhere): the guard sees the kind change even when the value is the
/// same, puts back the plain ref without following the symbolic one (the
/// trunk it names never moves), and a pointer found symbolic before a
/// certify is neither trusted nor moved.
#[test]
fn a_symbolic_pointer_never_moves_the_ref_it_names_and_is_never_trusted() {
    let env = Env::new();
    // The suite writes saphan's refs on purpose to test the pointer guard (defence in depth), which the seal stops first (the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let branch = crate::common::git(repo.path(), &["symbolic-ref", "HEAD"]);
    let branch = branch.trim().to_string();
    let symbolic = |r: &Repo| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(r.path())
            .args(["symbolic-ref", "-q", "refs/saphan/verified"])
            .output()
            .unwrap()
            .status
            .success()
    };
    // The suite points it at the trunk: same value as the tip, other kind.
    let tip = repo.commit(
        &[(
            "suite.sh",
            &format!("#!/bin/sh\ngit symbolic-ref refs/saphan/verified {branch}\nexit 0\n"),
        )],
        "symbolic",
    );
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let v = crate::common::json(&o);
    assert_eq!(v["failure"], "suite-moved-pointer", "{v}");
    assert!(v["notes"].to_string().contains("a symbolic ref to"), "{v}");
    assert!(!symbolic(&repo), "the plain ref is back");
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
    assert_eq!(repo.head(), tip, "the trunk never moved");

    // Made symbolic outside any suite: a green neither trusts nor moves it.
    crate::common::git(
        repo.path(),
        &["symbolic-ref", "refs/saphan/verified", &branch],
    );
    let tip = repo.commit(&[("suite.sh", "#!/bin/sh\nexit 0\n")], "green");
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let v = crate::common::json(&o);
    assert!(
        v["verified_pointer"]
            .as_str()
            .is_some_and(|p| p.contains("is a symbolic ref")),
        "{v}"
    );
    assert!(symbolic(&repo));
    assert_eq!(repo.head(), tip, "the trunk never moved");
}

/// What a suite does to saphan's state that cannot be put back is still a
/// measurement with its record (exit 3), naming the command that fixes it;
/// a suite that rewrites the file naming the pointer's trunk has it put
/// back.
#[test]
fn a_pointer_that_cannot_be_put_back_is_still_recorded_and_the_trunk_file_is_guarded() {
    let env = Env::new();
    // The suite writes saphan's refs on purpose to test the pointer guard (defence in depth), which the seal stops first (the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    let common = repo.path().join(".git");
    let trunk_file = common.join("saphan/verified-trunk");
    let follows = std::fs::read(&trunk_file).unwrap();

    repo.commit(
        &[(
            "suite.sh",
            "#!/bin/sh\ngit update-ref refs/saphan/verified HEAD\ntouch \"$(git rev-parse --git-common-dir)/refs/saphan/verified.lock\"\nexit 0\n",
        )],
        "locked",
    );
    let before = repo.records().len();
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let v = crate::common::json(&o);
    assert_eq!(v["failure"], "suite-moved-pointer", "{v}");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("could not be put back")
            && notes.contains(&format!(
                "git update-ref --no-deref refs/saphan/verified {first}"
            )),
        "{v}"
    );
    assert_eq!(repo.records().len(), before + 1, "the attempt is recorded");
    std::fs::remove_file(common.join("refs/saphan/verified.lock")).unwrap();
    crate::common::git(repo.path(), &["update-ref", "refs/saphan/verified", &first]);

    repo.commit(
        &[(
            "suite.sh",
            "#!/bin/sh\necho refs/heads/elsewhere > \"$(git rev-parse --git-common-dir)/saphan/verified-trunk\"\nexit 0\n",
        )],
        "trunk file",
    );
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 3);
    let v = crate::common::json(&o);
    assert_eq!(v["failure"], "suite-moved-pointer", "{v}");
    assert!(v["notes"].to_string().contains("verified-trunk"), "{v}");
    assert_eq!(std::fs::read(&trunk_file).unwrap(), follows, "put back");
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
}

/// A green whose pointer git cannot write (a stale `.lock` the suite left)
/// keeps its record and says why the pointer stayed; nothing is refused
/// after the measurement.
#[test]
fn a_green_whose_pointer_cannot_be_written_keeps_its_record_and_says_why() {
    let env = Env::new();
    // The suite locks saphan's pointer on purpose (a ref write the seal stops first; the seal has its own tests: tests/it/seal.rs).
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\nseal = \"off\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let first = repo.head();
    assert_code(&env.run(&["certify", "--repo", &repo.path_str()]), 0);
    repo.commit(
        &[(
            "suite.sh",
            "#!/bin/sh\ntouch \"$(git rev-parse --git-common-dir)/refs/saphan/verified.lock\"\nexit 0\n",
        )],
        "lock",
    );
    let o = env.run(&["certify", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let v = crate::common::json(&o);
    assert_eq!(v["verdict"], "green", "{v}");
    assert!(
        v["verified_pointer"]
            .as_str()
            .is_some_and(|p| p.starts_with("unchanged: git could not write refs/saphan/verified")),
        "{v}"
    );
    assert_eq!(repo.records().len(), 2);
    assert_eq!(repo.verified().as_deref(), Some(first.as_str()));
}

/// `status` does not read a symbolic pointer as a verified SHA.
#[test]
fn status_reads_a_symbolic_pointer_as_nothing_verified() {
    let env = Env::new();
    env.write_config("[verify.full]\nargv = \"./suite.sh\"\n");
    let repo = Repo::new(&[("suite.sh", "#!/bin/sh\nexit 0\n")]);
    let branch = crate::common::git(repo.path(), &["symbolic-ref", "HEAD"]);
    crate::common::git(
        repo.path(),
        &["symbolic-ref", "refs/saphan/verified", branch.trim()],
    );
    let o = env.run(&["status", "--repo", &repo.path_str(), "--json"]);
    assert_code(&o, 0);
    let v = crate::common::json(&o);
    assert!(v["verified"].is_null(), "{v}");
    assert_eq!(v["verified_symbolic"], branch.trim(), "{v}");
    let o = env.run(&["status", "--repo", &repo.path_str()]);
    let (out, _) = text(&o);
    assert!(
        out.contains("verified: none — refs/saphan/verified is a symbolic ref to"),
        "{out}"
    );
}
