//! Selecting junit-xml report files: `report_path` is a glob relative to a
//! root (the scratch worktree, or the affected tier's report directory).
//!
//! The glob uses globset with `literal_separator`: `*` and `?` stay inside
//! one path component, `**` crosses directories. The walk starts at the
//! glob's longest literal directory prefix, never follows symlinked
//! directories, and skips `.git`. Every match is checked after resolving
//! symlinks: a match that leads outside the root is refused by name rather
//! than read.

use super::ReportError;
use globset::GlobBuilder;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The most bytes one report file may have to be read (256 MiB), on this
/// machine or brought back from another: a larger file is refused as
/// unreadable, never truncated into a parse.
pub const REPORT_FILE_CAP: u64 = 256 * 1024 * 1024;

/// What a report match is where it was found, after symlinks: this
/// machine's `metadata`, or a machine's `report-classify.sh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory (skipped: a glob may match one).
    Dir,
    /// Nothing: a dangling symlink.
    Missing,
    /// A FIFO.
    Fifo,
    /// A socket.
    Socket,
    /// A block or character device.
    Device,
}

/// The name of a match as the record shows it: its path relative to the
/// root, `/`-separated — the same words wherever the tree is. A name that
/// is not UTF-8 cannot be named in a record (nor matched by the glob as
/// written), so it is refused as unreadable, shown with its bytes escaped.
///
/// Errors: [`ReportError::Unreadable`].
pub fn match_name(rel: &[u8]) -> Result<String, ReportError> {
    match std::str::from_utf8(rel) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => Err(ReportError::Unreadable {
            file: rel.escape_ascii().to_string(),
            source: std::io::Error::other(
                "its name is not UTF-8, so no record can name it — rename the report file",
            ),
        }),
    }
}

/// The one judgement of a report match, on this machine
/// ([`select`]) and on any other (`crate::measure::collect`): `rel` as
/// [`match_name`] gave it, its [`Kind`], the path it resolves to, whether
/// that path is inside the tree, and a file's size. `Ok(true)`: read it;
/// `Ok(false)`: skip it (a directory).
///
/// Errors, in this order: [`ReportError::SymlinkEscape`] (resolves outside
/// the tree), [`ReportError::Unreadable`] (a dangling symlink, a size not
/// known, larger than [`REPORT_FILE_CAP`]), [`ReportError::NotRegular`].
pub fn judge(
    rel: &str,
    kind: Kind,
    resolved: &Path,
    inside: bool,
    size: Option<u64>,
) -> Result<bool, ReportError> {
    let unreadable = |why: String| ReportError::Unreadable {
        file: rel.to_string(),
        source: std::io::Error::other(why),
    };
    if !inside && kind != Kind::Missing {
        return Err(ReportError::SymlinkEscape {
            file: rel.to_string(),
            target: resolved.to_path_buf(),
        });
    }
    let not_regular = |kind: &'static str| ReportError::NotRegular {
        file: rel.to_string(),
        kind,
    };
    match kind {
        Kind::Dir => Ok(false),
        Kind::Missing => Err(unreadable("it is a dangling symlink".into())),
        Kind::Fifo => Err(not_regular("a FIFO")),
        Kind::Socket => Err(not_regular("a socket")),
        Kind::Device => Err(not_regular("a device")),
        Kind::File => match size {
            None => Err(unreadable("its size could not be told".into())),
            Some(n) if n > REPORT_FILE_CAP => Err(unreadable(format!(
                "it is {n} bytes, larger than the {REPORT_FILE_CAP} bytes saphan reads of a report"
            ))),
            Some(_) => Ok(true),
        },
    }
}

/// One selected report file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// The path relative to the root, `/`-separated, as the record shows it.
    pub rel: String,
    /// The resolved absolute path to open (inside the root).
    pub path: PathBuf,
}

/// Characters that make a glob component non-literal.
fn is_literal(component: &str) -> bool {
    !component.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// The files under `root` that `pattern` selects, sorted by relative path.
///
/// Errors: [`ReportError::BadPattern`] for an absolute pattern, a `..`
/// component or a glob that does not compile; [`ReportError::SymlinkEscape`]
/// for a match that resolves outside `root`; [`ReportError::NoMatch`] when
/// nothing matched; [`ReportError::NotRegular`] for a match (after
/// resolving symlinks) that is a FIFO, socket or device — never opened;
/// [`ReportError::Unreadable`] when the root cannot be
/// resolved or a matched symlink dangles.
pub fn select(root: &Path, pattern: &str) -> Result<Vec<Selected>, ReportError> {
    let bad = |why: &str| ReportError::BadPattern {
        pattern: pattern.to_string(),
        why: why.to_string(),
    };
    let trimmed = pattern.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    let as_path = Path::new(trimmed);
    if as_path.is_absolute() {
        return Err(bad("it is absolute"));
    }
    if as_path
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(bad("it climbs out of the tree with `..`"));
    }
    let trimmed = trimmed.trim_start_matches("./");
    let glob = GlobBuilder::new(trimmed)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| bad(&e.kind().to_string()))?
        .compile_matcher();

    let canon_root = root
        .canonicalize()
        .map_err(|source| ReportError::Unreadable {
            file: root.display().to_string(),
            source,
        })?;

    // The longest literal directory prefix: no need to walk the rest of the tree.
    let comps: Vec<&str> = trimmed
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut prefix = PathBuf::new();
    let literal_all = comps.iter().all(|c| is_literal(c));
    let dir_comps = if literal_all {
        comps.len().saturating_sub(1)
    } else {
        comps.len()
    };
    for c in comps.iter().take(dir_comps) {
        if !is_literal(c) {
            break;
        }
        prefix.push(c);
    }

    // Whether `rel` is there: absent is no match; any other answer (a
    // parent that cannot be searched, a "directory" that is a file) is a
    // path that could not be read, never a quiet no-match.
    let present = |rel: &Path| match root.join(rel).symlink_metadata() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(ReportError::Unreadable {
            file: rel.display().to_string(),
            source,
        }),
    };
    let mut candidates: Vec<String> = Vec::new();
    if literal_all {
        let rel = comps.join("/");
        if present(Path::new(&rel))? {
            candidates.push(rel);
        }
    } else {
        let start = root.join(&prefix);
        if present(&prefix)? {
            let resolved = start
                .canonicalize()
                .map_err(|source| ReportError::Unreadable {
                    file: prefix.display().to_string(),
                    source,
                })?;
            if !resolved.starts_with(&canon_root) {
                return Err(ReportError::SymlinkEscape {
                    file: prefix.display().to_string(),
                    target: resolved,
                });
            }
            if !prefix.as_os_str().is_empty() && !resolved.is_dir() {
                return Err(ReportError::Unreadable {
                    file: prefix.display().to_string(),
                    source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
                });
            }
            let walker = walkdir::WalkDir::new(&start)
                .follow_links(false)
                .follow_root_links(false)
                .sort_by_file_name()
                .into_iter()
                .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git");
            for entry in walker {
                // A directory the walk could not read may hold a failing
                // report: skipping it could turn a red into a green.
                let entry = entry.map_err(|e| {
                    let at = e.path().unwrap_or(&start);
                    let rel = at.strip_prefix(root).unwrap_or(at).display().to_string();
                    ReportError::Unreadable {
                        file: rel,
                        source: e
                            .into_io_error()
                            .unwrap_or_else(|| std::io::Error::other("the walk failed")),
                    }
                })?;
                if entry.file_type().is_dir() {
                    continue;
                }
                let Ok(rel) = entry.path().strip_prefix(root) else {
                    continue;
                };
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().as_bytes())
                    .collect::<Vec<_>>()
                    .join(&b'/');
                // Matched as a machine's listing is matched: by the name's
                // text, and a name that is not UTF-8 is refused by name.
                if glob.is_match(String::from_utf8_lossy(&rel).as_ref()) {
                    candidates.push(match_name(&rel)?);
                }
            }
        }
    }

    let mut out = Vec::new();
    for rel in candidates {
        let full = root.join(&rel);
        let (kind, resolved, size) = match full.canonicalize() {
            Ok(resolved) => {
                let meta = resolved
                    .metadata()
                    .map_err(|source| ReportError::Unreadable {
                        file: rel.clone(),
                        source,
                    })?;
                let t = meta.file_type();
                use std::os::unix::fs::FileTypeExt;
                let kind = if t.is_dir() {
                    Kind::Dir
                } else if t.is_file() {
                    Kind::File
                } else if t.is_fifo() {
                    Kind::Fifo
                } else if t.is_socket() {
                    Kind::Socket
                } else {
                    Kind::Device
                };
                (kind, resolved, Some(meta.len()))
            }
            // A symlink whose target is not there.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && full.symlink_metadata().is_ok_and(|m| m.is_symlink()) =>
            {
                (Kind::Missing, PathBuf::new(), None)
            }
            Err(source) => {
                return Err(ReportError::Unreadable {
                    file: rel.clone(),
                    source,
                });
            }
        };
        let inside = resolved.starts_with(&canon_root);
        if judge(&rel, kind, &resolved, inside, size)? {
            out.push(Selected {
                rel,
                path: resolved,
            });
        }
    }
    if out.is_empty() {
        return Err(ReportError::NoMatch {
            pattern: pattern.to_string(),
            key: "report_path".to_string(),
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "reports/a.xml",
            "reports/b.xml",
            "reports/sub/c.xml",
            "other/d.xml",
            "reports/notes.txt",
        ] {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "<testsuite tests='1'/>").unwrap();
        }
        d
    }

    fn rels(v: &[Selected]) -> Vec<&str> {
        v.iter().map(|s| s.rel.as_str()).collect()
    }

    #[test]
    fn a_fifo_match_is_refused_without_opening_it() {
        let d = tree();
        let fifo = d.path().join("reports/pipe.xml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("pipe.xml", d.path().join("reports/link.xml")).unwrap();
        match select(d.path(), "reports/*.xml") {
            Err(ReportError::NotRegular { file, kind }) => {
                assert_eq!(file, "reports/link.xml");
                assert_eq!(kind, "a FIFO");
            }
            other => panic!("want NotRegular, got {other:?}"),
        }
        assert!(matches!(
            select(d.path(), "reports/pipe.xml"),
            Err(ReportError::NotRegular { .. })
        ));
    }

    #[test]
    fn star_stays_in_one_directory_and_doublestar_crosses() {
        let d = tree();
        let one = select(d.path(), "reports/*.xml").unwrap();
        assert_eq!(rels(&one), ["reports/a.xml", "reports/b.xml"]);
        let all = select(d.path(), "**/*.xml").unwrap();
        assert_eq!(
            rels(&all),
            [
                "other/d.xml",
                "reports/a.xml",
                "reports/b.xml",
                "reports/sub/c.xml"
            ]
        );
        let lit = select(d.path(), "./reports/sub/c.xml").unwrap();
        assert_eq!(rels(&lit), ["reports/sub/c.xml"]);
    }

    #[test]
    fn nothing_matched_is_an_error_not_zero() {
        let d = tree();
        for p in ["reports/*.json", "missing/x.xml", "reports"] {
            let e = select(d.path(), p).unwrap_err();
            assert!(matches!(e, ReportError::NoMatch { .. }), "{p}: {e}");
            assert!(e.to_string().contains("matched no files"));
        }
    }

    #[test]
    fn absolute_and_parent_patterns_are_refused() {
        let d = tree();
        for p in ["/etc/*.xml", "../x.xml", "reports/../../x.xml", ""] {
            assert!(
                matches!(
                    select(d.path(), p).unwrap_err(),
                    ReportError::BadPattern { .. }
                ),
                "{p}"
            );
        }
    }

    #[test]
    fn symlink_escaping_the_root_is_refused_by_name() {
        let d = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x.xml"), "<testsuite tests='1'/>").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("x.xml"),
            d.path().join("reports/evil.xml"),
        )
        .unwrap();
        let e = select(d.path(), "reports/*.xml").unwrap_err();
        match e {
            ReportError::SymlinkEscape { file, .. } => assert_eq!(file, "reports/evil.xml"),
            other => panic!("{other}"),
        }
        // A directory symlink as the literal prefix is caught too.
        std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
        let e = select(d.path(), "out/*.xml").unwrap_err();
        assert!(matches!(e, ReportError::SymlinkEscape { .. }), "{e}");
        let e = select(d.path(), "out/x.xml").unwrap_err();
        assert!(matches!(e, ReportError::SymlinkEscape { .. }), "{e}");
    }

    #[test]
    fn symlink_inside_the_root_is_read() {
        let d = tree();
        std::os::unix::fs::symlink("a.xml", d.path().join("reports/link.xml")).unwrap();
        let v = select(d.path(), "reports/*.xml").unwrap();
        assert_eq!(
            rels(&v),
            ["reports/a.xml", "reports/b.xml", "reports/link.xml"]
        );
    }
}
