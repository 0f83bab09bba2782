//! Collect: bring a suite's report files from the machine it ran on to a
//! local directory, for the parsers of [`crate::report`].
//!
//! Locally the files are read in place (nothing is copied). On an SSH
//! machine, `src/remote/report-list.sh` lists the tree's real path and the
//! candidates under the glob's literal directory prefix (never descending
//! into `.git`); the listing is read whole — up to [`REPORT_LISTING_CAP`]
//! bytes, past which the measurement fails as `report-listing-unbounded`,
//! never on a cut listing. The glob is matched here with the same rules as
//! [`crate::report::files`] (globset, `literal_separator`), each match is
//! described *on the machine* by `src/remote/report-classify.sh` (its kind
//! and `readlink -f`), and saphan decides here: refused if it leads outside
//! the root or is not a regular file; each accepted file is copied with at
//! most [`REPORT_FILE_CAP`] bytes (a larger one is refused as unreadable,
//! never truncated into a parse) into the local directory at the same
//! relative path. Then the parsers select from the local copy exactly as
//! they would from a local tree — a pattern that matched nothing there is
//! the parsers' `report-no-match`, with the right key.

use crate::exec::{Cmd, Sink};
use crate::report::ReportError;
use crate::transport::Transport;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The most bytes one report file may have to be brought back (256 MiB).
pub const REPORT_FILE_CAP: u64 = 256 * 1024 * 1024;

/// The most report files one pattern may bring back.
pub const REPORT_FILES_MAX: usize = 10_000;

/// The most bytes a remote listing of report candidates may take (32 MiB,
/// twice what the transport keeps of a captured stdout): it is read whole
/// from a file, never from a bounded tail, and a larger one fails the
/// measurement as `report-listing-unbounded`.
pub const REPORT_LISTING_CAP: u64 = 32 * 1024 * 1024;

const BUDGET: Duration = Duration::from_secs(600);

fn unreadable(file: &str, detail: impl std::fmt::Display) -> ReportError {
    ReportError::Unreadable {
        file: file.to_string(),
        source: std::io::Error::other(detail.to_string()),
    }
}

/// Bring the files `pattern` selects under `root` (a directory on the
/// machine `t`) into `local` (an existing, empty local directory), and
/// return the root the parsers should read: `root` itself for the local
/// machine, `local` otherwise. A pattern that does not compile, or matches
/// nothing, copies nothing (the parsers name it).
///
/// Errors: [`ReportError::SymlinkEscape`], [`ReportError::NotRegular`],
/// [`ReportError::Unreadable`] (listing or copying failed, a file over
/// [`REPORT_FILE_CAP`], more than [`REPORT_FILES_MAX`] matches),
/// [`ReportError::ListingUnbounded`] (the candidates take more than
/// [`REPORT_LISTING_CAP`] bytes to list).
pub async fn reports(
    t: &Transport,
    root: &Path,
    pattern: &str,
    local: &Path,
) -> Result<PathBuf, ReportError> {
    if t.is_local() {
        return Ok(root.to_path_buf());
    }
    let trimmed = pattern.trim().trim_start_matches("./");
    if trimmed.is_empty()
        || Path::new(trimmed).is_absolute()
        || Path::new(trimmed)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        return Ok(local.to_path_buf());
    }
    let Ok(glob) = globset::GlobBuilder::new(trimmed)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
    else {
        return Ok(local.to_path_buf());
    };
    let glob = glob.compile_matcher();
    let literal = |c: &str| !c.contains(['*', '?', '[', ']', '{', '}', '\\']);
    let comps: Vec<&str> = trimmed
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut prefix = String::from(".");
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        if !literal(c) {
            break;
        }
        prefix.push('/');
        prefix.push_str(c);
    }
    let shown_root = root.display().to_string();
    let (listed, bytes) = crate::transport::whole_stdout(
        t,
        crate::remote::sh(
            crate::remote::REPORT_LIST,
            "saphan-list",
            [
                root.as_os_str(),
                std::ffi::OsStr::new(&prefix),
                std::ffi::OsStr::new(&(REPORT_LISTING_CAP + 1).to_string()),
            ],
        )
        .timeout(BUDGET),
        // The tree's real path comes first (at most PATH_MAX bytes).
        REPORT_LISTING_CAP + 4097,
    )
    .await
    .map_err(|e| unreadable(&shown_root, e))?;
    let unbounded = || ReportError::ListingUnbounded {
        dir: format!("{}/{}", shown_root, prefix.trim_start_matches("./")),
        cap: REPORT_LISTING_CAP,
    };
    let Some(bytes) = bytes else {
        return Err(unbounded());
    };
    let root_end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    if (bytes.len() - root_end).saturating_sub(1) as u64 > REPORT_LISTING_CAP {
        return Err(unbounded());
    }
    if !listed.status.success() {
        return Err(unreadable(&shown_root, listed.stderr_str()));
    }
    let mut entries = bytes.split(|b| *b == 0);
    let real_root = entries
        .next()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .filter(|r| r.starts_with('/'))
        .ok_or_else(|| unreadable(&shown_root, "the machine did not list the tree"))?;
    let mut matched: Vec<String> = entries
        .filter(|s| !s.is_empty())
        .map(|s| {
            String::from_utf8_lossy(s)
                .trim_start_matches("./")
                .to_string()
        })
        .filter(|rel| glob.is_match(rel))
        .collect();
    matched.sort();
    matched.dedup();
    if matched.is_empty() {
        return Ok(local.to_path_buf());
    }
    if matched.len() > REPORT_FILES_MAX {
        return Err(unreadable(
            pattern,
            format!(
                "it matches {} files, more than the {REPORT_FILES_MAX} saphan brings back — narrow report_path",
                matched.len()
            ),
        ));
    }
    // The names go on stdin, NUL-separated (`xargs -0`), so no command line
    // on the machine grows with the number of matches. The description is
    // read whole too: at most two short fields and a path per match.
    let mut names = Vec::new();
    for m in &matched {
        names.extend_from_slice(m.as_bytes());
        names.push(0);
    }
    let describe_cap = (REPORT_FILES_MAX as u64) * 8192;
    let (classified, bytes) = crate::transport::whole_stdout(
        t,
        Cmd::new("xargs")
            .args([
                "-0",
                "sh",
                "-c",
                crate::remote::REPORT_CLASSIFY,
                "saphan-classify",
            ])
            .arg(root)
            .stdin(names)
            .timeout(BUDGET),
        describe_cap,
    )
    .await
    .map_err(|e| unreadable(&shown_root, e))?;
    if !classified.status.success() {
        return Err(unreadable(&shown_root, classified.stderr_str()));
    }
    let bytes = bytes.ok_or_else(|| {
        unreadable(
            &shown_root,
            "the machine described the matches in too many bytes",
        )
    })?;
    let fields: Vec<String> = bytes
        .split(|b| *b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    for (i, rel) in matched.iter().enumerate() {
        let (Some(kind), Some(resolved)) = (fields.get(2 * i), fields.get(2 * i + 1)) else {
            return Err(unreadable(rel, "the machine did not describe it"));
        };
        let inside = resolved
            .strip_prefix(real_root.as_str())
            .is_some_and(|rest| rest.starts_with('/'));
        if !inside && kind != "missing" {
            return Err(ReportError::SymlinkEscape {
                file: rel.clone(),
                target: PathBuf::from(resolved),
            });
        }
        match kind.as_str() {
            "file" => {}
            "dir" => continue,
            "missing" => return Err(unreadable(rel, "it is a dangling symlink")),
            "fifo" => {
                return Err(ReportError::NotRegular {
                    file: rel.clone(),
                    kind: "a FIFO",
                });
            }
            "socket" => {
                return Err(ReportError::NotRegular {
                    file: rel.clone(),
                    kind: "a socket",
                });
            }
            _ => {
                return Err(ReportError::NotRegular {
                    file: rel.clone(),
                    kind: "a device",
                });
            }
        }
        let dest = local.join(rel);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| unreadable(rel, e))?;
        }
        let out = t
            .run(
                Cmd::new("head")
                    .arg("-c")
                    .arg((REPORT_FILE_CAP + 1).to_string())
                    .arg("--")
                    .arg(resolved)
                    .stdout(Sink::File(dest.clone()))
                    .timeout(BUDGET),
            )
            .await
            .map_err(|e| unreadable(rel, e))?;
        if !out.status.success() {
            return Err(unreadable(rel, out.stderr_str()));
        }
        let len = tokio::fs::metadata(&dest)
            .await
            .map_err(|e| unreadable(rel, e))?
            .len();
        if len > REPORT_FILE_CAP {
            return Err(unreadable(
                rel,
                format!("it is larger than the {REPORT_FILE_CAP}-byte bound saphan brings back"),
            ));
        }
    }
    Ok(local.to_path_buf())
}
