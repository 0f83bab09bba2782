//! Collect: bring a suite's report files from the machine it ran on to a
//! local directory, for the parsers of [`crate::report`].
//!
//! Locally the files are read in place (nothing is copied). On an SSH
//! machine, `src/remote/report-list.sh` lists the tree's real path and the
//! candidates under the glob's literal directory prefix (never descending
//! into `.git`); the listing is read whole — up to [`REPORT_LISTING_CAP`]
//! bytes, past which the measurement fails as `report-listing-unbounded`,
//! never on a cut listing. The glob is matched here with the same rules as
//! [`crate::report::files`] (globset, `literal_separator`), every match is
//! described *on the machine* by `src/remote/report-classify.sh` (its kind,
//! the path it resolves to, a file's size), and saphan decides here:
//! refused if it leads outside the root or is not a regular file, or is
//! larger than [`REPORT_FILE_CAP`] bytes (refused as unreadable, never
//! truncated into a parse); the accepted files come back in one stream
//! (`src/remote/report-fetch.sh`), cut here at their described sizes into
//! the local directory at the same relative paths (a stream of another
//! length fails the collection). Three commands on the machine for any
//! number of files — listing, description, stream — where a command per
//! file cost a round trip each (3000 files: ~30 s). Then the parsers select from the local copy exactly as
//! they would from a local tree — a pattern that matched nothing there is
//! the parsers' `report-no-match`, with the right key.

use crate::exec::{Cmd, Sink};
use crate::report::{ReportError, files};
use crate::transport::Transport;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The most bytes one report file may have to be brought back (256 MiB):
/// the one bound of [`crate::report::files`], here and on this machine.
pub use crate::report::files::REPORT_FILE_CAP;

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
    let entries: Vec<&[u8]> = entries.filter(|s| !s.is_empty()).collect();
    // The glob's literal directory is listed as an entry only when it is
    // not a directory itself — a symlink (find does not follow it): it is
    // described with the matches, and refused like a local tree refuses it
    // when it leads outside.
    let prefix_listed = prefix != "." && entries.contains(&prefix.as_bytes());
    // Matched by the name's text, as on this machine; a matching name that
    // is not UTF-8 is refused by name (`files::match_name`), as there.
    let mut matched: Vec<String> = Vec::new();
    for entry in &entries {
        let rel = entry.strip_prefix(b"./").unwrap_or(entry);
        if glob.is_match(String::from_utf8_lossy(rel).as_ref()) {
            matched.push(files::match_name(rel)?);
        }
    }
    matched.sort();
    matched.dedup();
    if matched.is_empty() && !prefix_listed {
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
    // read whole too: a count, two short fields and a path per match, a
    // size per file.
    let mut names = Vec::new();
    if prefix_listed {
        names.extend_from_slice(prefix.as_bytes());
        names.push(0);
    }
    for m in &matched {
        names.extend_from_slice(m.as_bytes());
        names.push(0);
    }
    let describe_cap = (REPORT_FILES_MAX as u64) * 8192;
    let (classified, bytes) = crate::transport::whole_stdout(
        t,
        // At most 200 names a run: the script collects its files' paths
        // in its arguments, which costs a run the square of its names.
        Cmd::new("xargs")
            .args([
                "-0",
                "-n",
                "200",
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
    let mut described = described(&bytes)
        .filter(|d| d.len() == matched.len() + usize::from(prefix_listed))
        .ok_or_else(|| unreadable(&shown_root, "the machine did not describe every match"))?;
    let inside = |resolved: &str| {
        resolved
            .strip_prefix(real_root.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
    };
    if prefix_listed {
        let d = described.remove(0);
        let kind = kind_of(&d.kind);
        if !inside(&d.resolved) && kind != files::Kind::Missing {
            return Err(ReportError::SymlinkEscape {
                file: prefix.trim_start_matches("./").to_string(),
                target: PathBuf::from(d.resolved),
            });
        }
    }
    // saphan's judgement, in the matches' order — the one a local tree
    // gets ([`files::judge`]): inside the tree, a regular file, within the
    // size bound.
    let mut accepted: Vec<(&str, String, u64)> = Vec::new();
    for (rel, d) in matched.iter().zip(described) {
        let kind = kind_of(&d.kind);
        let read = files::judge(
            rel,
            kind,
            Path::new(&d.resolved),
            inside(&d.resolved),
            d.size,
        )?;
        if let (true, Some(size)) = (read, d.size) {
            accepted.push((rel, d.resolved, size));
        }
    }
    if accepted.is_empty() {
        return Ok(local.to_path_buf());
    }
    fetch(t, &shown_root, &accepted, local).await?;
    Ok(local.to_path_buf())
}

/// A kind word of `report-classify.sh` as [`files::Kind`] (`device` and
/// any word it does not print: a device).
fn kind_of(word: &str) -> files::Kind {
    match word {
        "file" => files::Kind::File,
        "dir" => files::Kind::Dir,
        "missing" => files::Kind::Missing,
        "fifo" => files::Kind::Fifo,
        "socket" => files::Kind::Socket,
        _ => files::Kind::Device,
    }
}

/// One match as the machine described it (`report-classify.sh`).
struct Description {
    /// `file`, `dir`, `missing`, `fifo`, `socket` or `device`.
    kind: String,
    /// The path it resolves to (empty when it does not resolve).
    resolved: String,
    /// Its size in bytes, for a `file` the machine could size.
    size: Option<u64>,
}

/// `report-classify.sh`'s output, parsed: per run of the script its count,
/// that many `KIND`/path pairs, then the sizes of its files, one per line.
/// `None` when the blocks do not add up.
fn described(bytes: &[u8]) -> Option<Vec<Description>> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut fields = bytes.split(|b| *b == 0);
    let mut out = Vec::new();
    while let Some(count) = fields.next() {
        if count.is_empty() {
            // The empty tail after the last NUL.
            return fields.next().is_none().then_some(out);
        }
        let n: usize = text(count).trim().parse().ok()?;
        let start = out.len();
        for _ in 0..n {
            let kind = text(fields.next()?);
            let resolved = text(fields.next()?);
            out.push(Description {
                kind,
                resolved,
                size: None,
            });
        }
        let sizes = text(fields.next()?);
        let mut sizes = sizes.lines().map(|l| l.trim().parse::<u64>().ok());
        for d in out[start..].iter_mut().filter(|d| d.kind == "file") {
            d.size = sizes.next()?;
        }
        if sizes.next().is_some() {
            return None;
        }
    }
    Some(out)
}

/// Bring `accepted` (relative name, resolved path on the machine, size as
/// described) into `local` at their relative paths in one command on the
/// machine (`report-fetch.sh`: the files' bytes one after another, bounded
/// by the sum of the sizes plus one), through a local temp file cut at the
/// described sizes. A stream whose length is not that sum (a file changed
/// since it was described, or could not be read) fails the collection as
/// unreadable — never a file cut or padded into a parse.
async fn fetch(
    t: &Transport,
    shown_root: &str,
    accepted: &[(&str, String, u64)],
    local: &Path,
) -> Result<(), ReportError> {
    use tokio::io::AsyncReadExt;
    let total: u64 = accepted.iter().map(|(_, _, n)| n).sum();
    let mut paths = Vec::new();
    for (_, resolved, _) in accepted {
        paths.extend_from_slice(resolved.as_bytes());
        paths.push(0);
    }
    // `saphan-listing-<pid>-…`: a killed run's file is reaped by the next.
    let stream = crate::fsutil::run_tempfile("saphan-listing-")
        .map_err(|e| unreadable(shown_root, e))?
        .into_temp_path();
    let out = t
        .run(
            crate::remote::sh(
                crate::remote::REPORT_FETCH,
                "saphan-fetch",
                [(total + 1).to_string()],
            )
            .stdin(paths)
            .stdout(Sink::File(stream.to_path_buf()))
            .timeout(BUDGET),
        )
        .await
        .map_err(|e| unreadable(shown_root, e))?;
    let len = tokio::fs::metadata(&stream)
        .await
        .map_err(|e| unreadable(shown_root, e))?
        .len();
    if !out.status.success() || len != total {
        let why = if out.status.success() {
            format!(
                "the report files came back as {len} bytes where their sizes add up to {total}: one changed while it was brought back"
            )
        } else {
            format!(
                "bringing the report files back failed: {}",
                out.stderr_str()
            )
        };
        return Err(unreadable(shown_root, why));
    }
    let mut from = tokio::fs::File::open(&stream)
        .await
        .map_err(|e| unreadable(shown_root, e))?;
    for (rel, _, size) in accepted {
        let dest = local.join(rel);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| unreadable(rel, e))?;
        }
        let mut to = tokio::fs::File::create(&dest)
            .await
            .map_err(|e| unreadable(rel, e))?;
        let copied = tokio::io::copy(&mut (&mut from).take(*size), &mut to)
            .await
            .map_err(|e| unreadable(rel, e))?;
        if copied != *size {
            return Err(unreadable(rel, "the stream ended before it"));
        }
    }
    Ok(())
}
