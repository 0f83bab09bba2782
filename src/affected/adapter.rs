//! `saphan adapter go-affected`: the bundled proc adapter for Go modules.
//!
//! The engine runs it as `[verify.affected].argv = "saphan,adapter,go-affected"`
//! in a detached worktree at the manifest's head. It reads the manifest,
//! lists the module's packages (`go list -e -json [FLAGS] ./...`, FLAGS the
//! package-choosing Go flags it was given: `-tags=…`, `-mod=…`,
//! `-modfile=…`), selects the
//! changed packages and their reverse closure ([`super::golist`]), writes the
//! scope record, and only then runs `go test -count=1 -json` on the
//! selection, with go's event stream on its stdout and go's exit status as
//! its own (0 green, 1 failing tests, 2 build failure; a signal becomes 3).
//! With nothing selected it runs nothing, prints nothing on stdout and exits
//! 0 — the scope record, not the silence, says why.
//!
//! Why this module starts `go` with `std::process` instead of
//! [`crate::exec::run`]: `exec` puts every child in a process group of its
//! own so that *its caller's* budget can kill it. Here the caller is the
//! engine, which already runs this adapter in its own group under the
//! affected budget; a second group would let `go test` and its test
//! binaries outlive that budget when the engine kills the adapter. So `go`
//! stays in the adapter's group, and its stdout and stderr are the
//! adapter's, streamed, not buffered.

use super::AffectedError;
use super::golist;
use super::protocol::{ENV_MANIFEST, ENV_SCOPE_OUT, Manifest, Scope, VERSION};
use crate::error::{Exit, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The name the adapter writes into its scope record.
pub const ADAPTER_NAME: &str = "saphan adapter go-affected";

fn env_path(var: &'static str) -> Result<PathBuf, AffectedError> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => Ok(PathBuf::from(v)),
        _ => Err(AffectedError::AdapterEnv { var }),
    }
}

/// What the adapter computed before running anything.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scope record it writes.
    pub scope: Scope,
}

/// List packages in `root` and select for `manifest`: everything the adapter
/// decides, without writing or running anything.
///
/// Errors: [`AffectedError::GoList`] when go cannot be started, exits
/// non-zero, or prints something that is not `go list -json` output.
pub fn plan(
    root: &Path,
    manifest: &Manifest,
    go: &str,
    flags: &[String],
) -> Result<Plan, AffectedError> {
    let t0 = Instant::now();
    if !root.join("go.mod").is_file() && !root.join("go.work").is_file() {
        return Err(AffectedError::GoList {
            detail: format!(
                "{} has no go.mod or go.work at its root, so go-affected has no module to map (it reads Go modules only)",
                root.display()
            ),
        });
    }
    let out = Command::new(go)
        .args(["list", "-e", "-json"])
        .args(flags)
        .arg("./...")
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| AffectedError::GoList {
            detail: format!("could not start `{go}`: {e}"),
        })?;
    if !out.status.success() {
        return Err(AffectedError::GoList {
            detail: format!(
                "`{go} list -e -json ./...` exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    let pkgs = golist::parse(&out.stdout).map_err(|e| AffectedError::GoList {
        detail: format!("its output is not go list -json objects: {e}"),
    })?;
    // An object go could not place (no directory): a malformed import path
    // such as a directory with a space, or a pattern matching no module
    // (`./...` at a go.work root that does not `use .`). Quote go.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.trim();
    if let Some(bad) = pkgs.iter().find(|p| p.dir.is_empty()) {
        let err = bad
            .error
            .as_ref()
            .map(|e| e.err.trim().to_string())
            .unwrap_or_else(|| "no directory and no error given".into());
        return Err(AffectedError::GoList {
            detail: format!(
                "`{go} list -e -json ./...` could not place `{}`: {err}{}",
                bad.import_path,
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!("; go's stderr: {stderr}")
                }
            ),
        });
    }
    let sel = golist::select(&pkgs, root, &manifest.changed_paths, &|p| {
        root.join(p).symlink_metadata().is_ok()
    });
    if !sel.nested_modules.is_empty() {
        let detail = sel
            .nested_modules
            .iter()
            .map(|(d, paths)| {
                format!(
                    "{} changed in the nested module {d}/ (its own {d}/go.mod; test it with `cd {d} && go test ./...`)",
                    paths.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(AffectedError::NestedModule { detail });
    }
    let widened = !sel.widened_by.is_empty();
    let suite_argv: Vec<String> = if sel.selected_packages.is_empty() {
        Vec::new()
    } else {
        let mut a: Vec<String> = [go, "test", "-count=1", "-json"].map(String::from).to_vec();
        a.extend(flags.iter().cloned());
        if widened {
            a.push("./...".into());
        } else {
            a.extend(sel.selected_packages.iter().cloned());
        }
        a
    };
    let scope = Scope {
        version: VERSION,
        adapter: ADAPTER_NAME.into(),
        changed_paths: manifest.changed_paths.clone(),
        no_package_paths: sel.no_package_paths,
        changed_packages: sel.changed_packages,
        package_of: sel.package_of,
        deleted_packages: sel.deleted_packages,
        selected_packages: sel.selected_packages,
        omitted_packages: sel.omitted_packages,
        widened,
        widened_by: sel.widened_by,
        selection_seconds: Some(t0.elapsed().as_secs_f64()),
        suite_argv,
        package_seconds: Default::default(),
    };
    Ok(Plan { scope })
}

/// Copy `go test -json`'s stream to `out` byte for byte, line by line, and
/// collect each package's own elapsed seconds from its final
/// `pass`/`fail`/`skip` event (the one with a `Package` and no `Test`).
/// Only timing is read here; the verdict is the engine's report parser's.
pub fn forward_and_time(
    pipe: impl std::io::Read,
    mut out: impl std::io::Write,
) -> std::collections::BTreeMap<String, f64> {
    use std::io::BufRead;
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Event {
        action: String,
        #[serde(default)]
        package: Option<String>,
        #[serde(default)]
        test: Option<String>,
        #[serde(default)]
        elapsed: Option<f64>,
    }
    let mut timed = std::collections::BTreeMap::new();
    let mut r = std::io::BufReader::new(pipe);
    let mut line = Vec::new();
    let mut writing = true;
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // Keep draining even if our reader went away, so go is not blocked.
        if writing && out.write_all(&line).is_err() {
            writing = false;
        }
        if let Ok(ev) = serde_json::from_slice::<Event>(&line)
            && ev.test.is_none()
            && matches!(ev.action.as_str(), "pass" | "fail" | "skip")
            && let (Some(p), Some(e)) = (ev.package, ev.elapsed)
        {
            timed.insert(p, e);
        }
    }
    let _ = out.flush();
    timed
}

fn head_of(root: &Path) -> Option<String> {
    let o = Command::new("git")
        .args(["rev-parse", "--verify", "HEAD"])
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// What the adapter tells the operator on its stderr while it runs (the
/// CLI writes each one as a line; the adapter itself prints none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The selection is empty: nothing runs.
    NothingSelected {
        /// Packages left out (all of them).
        omitted: usize,
    },
    /// The selection runs.
    Running {
        /// Packages selected.
        selected: usize,
        /// Packages in the module.
        total: usize,
        /// The selection was widened to the full module.
        widened: bool,
    },
    /// `go test` ended unsuccessfully before any selected package
    /// reported a result.
    BuildFailed {
        /// How `go test` ended (`exit status: 1`).
        status: String,
        /// go wrote something on stderr (forwarded just above).
        go_spoke: bool,
    },
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::NothingSelected { omitted } => write!(
                f,
                "{ADAPTER_NAME}: 0 of {omitted} packages selected — nothing to run"
            ),
            Note::Running {
                selected,
                total,
                widened,
            } => write!(
                f,
                "{ADAPTER_NAME}: running {selected} of {total} packages{}",
                if *widened {
                    " (widened to the full module)"
                } else {
                    ""
                }
            ),
            Note::BuildFailed { status, go_spoke } => write!(
                f,
                "{ADAPTER_NAME}: build failed: `go test` ended ({status}) before any selected package reported a result{}",
                if *go_spoke {
                    " (go's own words are just above)"
                } else {
                    "; go printed nothing on stderr"
                }
            ),
        }
    }
}

/// The verb: read the manifest, write the scope, run the selection; each
/// [`Note`] goes to `note` as it happens, and go's own stdout and stderr
/// are forwarded to `stdout` and `stderr` as they come (they are the
/// protocol's report stream; the CLI hands in the process's own).
///
/// Errors (the engine sees them as a missing scope plus this line on the
/// adapter's stderr): [`AffectedError::AdapterEnv`],
/// [`AffectedError::Manifest`], [`AffectedError::NotAtHead`],
/// [`AffectedError::GoList`], an [`crate::error::IoError`] writing the scope.
pub fn go_affected(
    flags: &[String],
    note: &mut dyn FnMut(&Note),
    stdout: &mut dyn std::io::Write,
    mut stderr: Box<dyn std::io::Write + Send>,
) -> Result<Exit> {
    // Only the flags that choose packages, read by the rule certify's split
    // lists with (`schedule::package_flags`): `-tags=x` or `-tags x`.
    let (flags, other) = crate::schedule::package_flags(flags);
    if let Some(bad) = other.first() {
        return Err(crate::error::Usage(format!(
            "go-affected takes only the Go flags that choose packages (-tags=…, -mod=…, -modfile=…), not {bad:?} — declare it as \"saphan,adapter,go-affected,-tags=…\""
        ))
        .into());
    }
    let manifest_path = env_path(ENV_MANIFEST)?;
    let scope_out = env_path(ENV_SCOPE_OUT)?;
    let manifest = Manifest::read(&manifest_path).map_err(|issue| AffectedError::Manifest {
        path: manifest_path.clone(),
        issue: issue.to_string(),
    })?;
    let root = std::env::current_dir().map_err(|e| crate::error::IoError::Io {
        action: "read the current directory",
        path: PathBuf::from("."),
        source: e,
    })?;
    match head_of(&root) {
        Some(h) if h == manifest.head => {}
        found => {
            return Err(AffectedError::NotAtHead {
                dir: root,
                head: manifest.head,
                found: found.unwrap_or_else(|| "no commit".into()),
            }
            .into());
        }
    }
    // The same rule as the default-go suite: /usr/local/go/bin/go when it
    // exists, else `go`, so the affected tier and certification use one toolchain.
    let go = crate::suite::default_go_program();
    let Plan { scope } = plan(&root, &manifest, &go, &flags)?;
    let json = serde_json::to_vec_pretty(&scope).expect("a scope serializes");
    crate::fsutil::atomic_write(&scope_out, &json)?;
    if scope.suite_argv.is_empty() {
        note(&Note::NothingSelected {
            omitted: scope.omitted_packages.len(),
        });
        return Ok(Exit::Ok);
    }
    note(&Note::Running {
        selected: scope.selected_packages.len(),
        total: scope.selected_packages.len() + scope.omitted_packages.len(),
        widened: scope.widened,
    });
    let mut child = Command::new(&scope.suite_argv[0])
        .args(&scope.suite_argv[1..])
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| AffectedError::GoList {
            detail: format!("could not start `{}`: {e}", scope.suite_argv[0]),
        })?;
    // go's stderr is forwarded as it comes, and its tail kept: go test -json
    // (1.19) writes a build or setup failure only there.
    let err_thread = child.stderr.take().map(|pipe| {
        std::thread::spawn(move || {
            use std::io::{BufRead, Write};
            let mut tail: std::collections::VecDeque<String> = Default::default();
            for line in std::io::BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(stderr, "{line}");
                tail.push_back(line);
                if tail.len() > 8 {
                    tail.pop_front();
                }
            }
            tail.into_iter().collect::<Vec<_>>().join(" | ")
        })
    });
    let timed = match child.stdout.take() {
        Some(pipe) => forward_and_time(pipe, stdout),
        None => Default::default(),
    };
    let status = child.wait().map_err(|e| AffectedError::GoList {
        detail: format!("waiting for `{}`: {e}", scope.suite_argv[0]),
    })?;
    let go_tail = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() && timed.is_empty() {
        note(&Note::BuildFailed {
            status: status.to_string(),
            go_spoke: !go_tail.is_empty(),
        });
    }
    if !timed.is_empty() {
        let mut scope = scope;
        scope.package_seconds = timed;
        let json = serde_json::to_vec_pretty(&scope).expect("a scope serializes");
        crate::fsutil::atomic_write(&scope_out, &json)?;
    }
    Ok(match status.code() {
        Some(0) => Exit::Ok,
        Some(1) => Exit::Red,
        Some(2) => Exit::Refusal,
        _ => Exit::MeasurementFailed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_every_byte_and_times_packages() {
        let stream = concat!(
            "{\"Action\":\"run\",\"Package\":\"m/a\",\"Test\":\"TestA\"}\n",
            "{\"Action\":\"pass\",\"Package\":\"m/a\",\"Test\":\"TestA\",\"Elapsed\":0.5}\n",
            "{\"Action\":\"pass\",\"Package\":\"m/a\",\"Elapsed\":0.75}\n",
            "not json\n",
            "{\"Action\":\"skip\",\"Package\":\"m/b\",\"Elapsed\":0}\n",
            "{\"Action\":\"fail\",\"Package\":\"m/c\",\"Elapsed\":1.25}"
        );
        let mut out = Vec::new();
        let t = forward_and_time(stream.as_bytes(), &mut out);
        assert_eq!(out, stream.as_bytes());
        assert_eq!(t.len(), 3);
        assert_eq!(t["m/a"], 0.75);
        assert_eq!(t["m/b"], 0.0);
        assert_eq!(t["m/c"], 1.25);
    }
}
