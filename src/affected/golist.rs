//! The bundled Go adapter's selection: `go list -e -json ./...` output →
//! changed paths mapped to packages → reverse-dependency closure.
//!
//! Pure functions over bytes and a "does this path exist at head" probe, so
//! the benchmark (`benches/affected.rs`) times exactly what the adapter runs.
//!
//! # Mapping a changed path (first rule that matches wins)
//!
//! 1. A path inside a **nested module** — below a directory (not the root,
//!    not under `testdata/`, `vendor/`, `_x/`, `.x/`) holding its own
//!    `go.mod` that go list did not report as a module — is set apart in
//!    [`Selection::nested_modules`]; the adapter refuses, because the
//!    root's `go list ./...` never lists (or tests) that module.
//! 2. `go.mod`, `go.sum`, `go.work`, `go.work.sum` (anywhere else) widen to
//!    every package: they change how every package builds.
//! 3. A file a package embeds (`EmbedFiles`, `TestEmbedFiles`,
//!    `XTestEmbedFiles`) belongs to that package, whatever its name.
//! 4. A path under `D/testdata/` belongs to the package in `D` (or to the
//!    deleted package `D` was). A `testdata` with no owner widens.
//! 5. Any file directly in a package's directory belongs to it, whatever
//!    its name (sources, build-constrained sources, fixtures its tests
//!    open — `CHANGES.json` and `README.md` included).
//! 6. A documentation file ([`is_documentation`]) or repository metadata (a
//!    top-level `docs/`/`doc/` tree, `.github/`, `.gitignore`,
//!    `.editorconfig`) maps to no package — only outside every package's
//!    directory tree; inside one it belongs to the nearest enclosing
//!    package (or deleted package).
//! 7. A path gone at head whose directory held a Go file the change deleted
//!    and holds no package at head is part of a **deleted package**: its
//!    import path is never its parent directory's package. Whatever at head
//!    still imports it is selected (and will fail to build, which is the
//!    signal).
//! 8. Anything else may affect the build in a way this adapter cannot see
//!    (a `vendor/` file, a Go file outside every listed package, a fixture in
//!    a directory no package owns): it widens to every package.
//!
//! # Closure
//!
//! A package is selected when its test binary can contain a changed or
//! deleted package: the reverse closure over `Imports` (a package's build
//! contains whatever it imports, transitively), then one last hop over
//! `TestImports` and `XTestImports` (a package's tests link what its test
//! files import, and everything that imports, but a package importing `q`
//! does not link `q`'s test imports). Widening selects every package.

use super::protocol::{NoPackagePath, WideningPath};
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;

/// The fields of one `go list -json` object this adapter reads. Go omits
/// empty fields, so every list defaults to empty.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GoPackage {
    /// Absolute directory holding the package. Empty on an error object
    /// that names no directory (a malformed import path, a pattern that
    /// matched no module), which the adapter refuses rather than guess at.
    #[serde(default)]
    pub dir: String,
    /// The error go attached to this object, when it could not load it.
    #[serde(default)]
    pub error: Option<GoListError>,
    /// The import path.
    pub import_path: String,
    /// The module the package belongs to.
    #[serde(default)]
    pub module: Option<GoModule>,
    /// Direct imports of the package's non-test files.
    #[serde(default)]
    pub imports: Vec<String>,
    /// Imports of its in-package `_test.go` files.
    #[serde(default)]
    pub test_imports: Vec<String>,
    /// Imports of its external (`package x_test`) test files.
    #[serde(default)]
    pub x_test_imports: Vec<String>,
    /// Files embedded by the package, relative to `dir`.
    #[serde(default)]
    pub embed_files: Vec<String>,
    /// Files embedded by its in-package tests, relative to `dir`.
    #[serde(default)]
    pub test_embed_files: Vec<String>,
    /// Files embedded by its external tests, relative to `dir`.
    #[serde(default)]
    pub x_test_embed_files: Vec<String>,
}

/// `Error` of a `go list -json` object.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GoListError {
    /// go's own words.
    #[serde(default)]
    pub err: String,
}

/// `Module` of a `go list -json` object.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GoModule {
    /// The module path.
    pub path: String,
    /// The module's root directory (absolute).
    #[serde(default)]
    pub dir: Option<String>,
}

/// Parse `go list -json`'s concatenated objects (not an array).
///
/// Errors: the serde error text, naming the line and column.
pub fn parse(bytes: &[u8]) -> Result<Vec<GoPackage>, String> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<GoPackage>()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// What the adapter selects for one set of changed paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Changed paths that map to no package.
    pub no_package_paths: Vec<NoPackagePath>,
    /// Existing packages a changed path belongs to, sorted.
    pub changed_packages: Vec<String>,
    /// Import paths of packages the change deleted, sorted.
    pub deleted_packages: Vec<String>,
    /// The changed or deleted package each changed path belongs to (every
    /// path that is neither a no-package nor a widening path).
    pub package_of: std::collections::BTreeMap<String, String>,
    /// Packages to run, sorted.
    pub selected_packages: Vec<String>,
    /// Packages not run, sorted.
    pub omitted_packages: Vec<String>,
    /// Paths that widened the run (empty when it did not widen).
    pub widened_by: Vec<WideningPath>,
    /// Changed paths inside a nested module — a directory below the root
    /// holding its own `go.mod` that `go list ./...` at the root does not
    /// list — by the module's directory. Non-empty means the change cannot
    /// be measured from the root, and the adapter refuses.
    pub nested_modules: Vec<(String, Vec<String>)>,
}

/// Build-control files that change every package's build.
const BUILD_CONTROL: &[&str] = &["go.mod", "go.sum", "go.work", "go.work.sum"];

/// Extensions (lowercase) of documentation files.
const DOC_EXTENSIONS: &[&str] = &["md", "markdown", "mdown", "rst", "adoc", "asciidoc"];

/// File stems (uppercase, the part before the first `.`) of documentation
/// and legal files: `LICENSE`, `LICENSE.txt`, `NOTICE`, `README` …
const DOC_STEMS: &[&str] = &[
    "README",
    "LICENSE",
    "LICENCE",
    "COPYING",
    "NOTICE",
    "AUTHORS",
    "CONTRIBUTORS",
    "PATENTS",
    "CHANGELOG",
    "CHANGES",
    "CODEOWNERS",
];

/// True for a documentation-only file by its name: a `.md`, `.markdown`,
/// `.mdown`, `.rst`, `.adoc` or `.asciidoc` file, or a file whose name
/// before its first dot is one of README, LICENSE, LICENCE, COPYING, NOTICE,
/// AUTHORS, CONTRIBUTORS, PATENTS, CHANGELOG, CHANGES, CODEOWNERS (any
/// case). A `.go` file is never documentation.
pub fn is_documentation(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    if base.ends_with(".go") {
        return false;
    }
    if let Some((_, ext)) = base.rsplit_once('.')
        && DOC_EXTENSIONS.iter().any(|d| ext.eq_ignore_ascii_case(d))
    {
        return true;
    }
    let stem = base.split('.').next().unwrap_or(base);
    DOC_STEMS.iter().any(|s| stem.eq_ignore_ascii_case(s))
}

/// Repository metadata that no Go build or test reads, by path: a top-level
/// `docs/` or `doc/` tree, `.github/`, and `.gitignore` / `.editorconfig`
/// files at any depth. Returns the reason.
fn repository_metadata(path: &str) -> Option<&'static str> {
    let base = path.rsplit('/').next().unwrap_or(path);
    if path.ends_with(".go") {
        return None;
    }
    if path.starts_with("docs/") || path.starts_with("doc/") {
        return Some("documentation tree");
    }
    if path.starts_with(".github/") {
        return Some("repository metadata (.github/)");
    }
    if base == ".gitignore" || base == ".editorconfig" {
        return Some("repository metadata");
    }
    None
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// `dir` relative to `root` with `/` separators, or `None` when outside.
fn relative(root: &str, dir: &str) -> Option<String> {
    if dir == root {
        return Some(String::new());
    }
    let rest = dir.strip_prefix(root)?.strip_prefix('/')?;
    Some(rest.to_string())
}

/// The selection for `changed` paths over the packages `pkgs` that `go list`
/// reported at head, in the tree rooted at `root` (the directory `go list`
/// ran in). `exists(p)` answers whether the repository-relative path `p`
/// exists at head.
pub fn select<'a>(
    pkgs: &[GoPackage],
    root: &Path,
    changed: &'a [String],
    exists: &dyn Fn(&str) -> bool,
) -> Selection {
    let root_raw = root.to_string_lossy().trim_end_matches('/').to_string();
    let root_canon = std::fs::canonicalize(root)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| root_raw.clone());
    let rel = |dir: &str| -> Option<String> {
        relative(&root_raw, dir)
            .or_else(|| relative(&root_canon, dir))
            .or_else(|| {
                let c = std::fs::canonicalize(dir).ok()?;
                relative(&root_canon, &c.to_string_lossy())
            })
    };

    // Package directories and embedded files, repository-relative.
    let mut by_dir: HashMap<String, usize> = HashMap::with_capacity(pkgs.len());
    let mut embedded: HashMap<String, Vec<usize>> = HashMap::new();
    let mut modules: Vec<(String, String)> = Vec::new();
    for (i, p) in pkgs.iter().enumerate() {
        let Some(d) = rel(&p.dir) else { continue };
        for f in p
            .embed_files
            .iter()
            .chain(&p.test_embed_files)
            .chain(&p.x_test_embed_files)
        {
            embedded.entry(join(&d, f)).or_default().push(i);
        }
        if let Some(m) = &p.module
            && let Some(md) = m.dir.as_deref().and_then(&rel)
            && !modules.iter().any(|(d, _)| *d == md)
        {
            modules.push((md, m.path.clone()));
        }
        by_dir.insert(d, i);
    }
    // Longest module root first, so a nested module wins.
    modules.sort_by_key(|(d, _)| std::cmp::Reverse(d.len()));
    let import_path_of_dir = |dir: &str| -> Option<String> {
        modules.iter().find_map(|(md, mp)| {
            if md.is_empty() {
                Some(if dir.is_empty() {
                    mp.clone()
                } else {
                    format!("{mp}/{dir}")
                })
            } else if dir == md {
                Some(mp.clone())
            } else {
                dir.strip_prefix(md.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                    .map(|r| format!("{mp}/{r}"))
            }
        })
    };

    // Directories whose Go files the change deleted and that hold no package
    // at head: deleted packages.
    let ignored_dir = |d: &str| {
        d.split('/')
            .any(|c| c == "testdata" || c == "vendor" || c.starts_with('.') || c.starts_with('_'))
    };
    let mut deleted_dirs: HashSet<&str> = HashSet::new();
    for p in changed {
        let d = parent(p);
        if p.ends_with(".go") && !by_dir.contains_key(d) && !ignored_dir(d) && !exists(p) {
            deleted_dirs.insert(d);
        }
    }
    fn nearest<'p>(deleted_dirs: &HashSet<&str>, p: &'p str) -> Option<&'p str> {
        let mut d = parent(p);
        loop {
            if deleted_dirs.contains(d) {
                return Some(d);
            }
            if d.is_empty() {
                return None;
            }
            d = parent(d);
        }
    }
    let nearest_deleted = |p: &'a str| nearest(&deleted_dirs, p);

    let mut sel = Selection::default();
    let mut changed_idx: BTreeSet<usize> = BTreeSet::new();
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    let widen = |sel: &mut Selection, p: &str, why: &str| {
        sel.widened_by.push(WideningPath {
            path: p.to_string(),
            reason: why.to_string(),
        })
    };
    let mut deleted_dir = |sel: &mut Selection, p: &str, d: &str| match import_path_of_dir(d) {
        Some(ip) => {
            sel.package_of.insert(p.to_string(), ip.clone());
            deleted.insert(ip);
        }
        None => widen(
            sel,
            p,
            "a deleted package outside every module go list reported",
        ),
    };
    // Nested modules: the deepest directory below the root, outside any
    // testdata/ or vendor/, that holds a go.mod at head (or whose go.mod the
    // change touched) and that is not a module go list reported.
    let module_dirs: HashSet<&str> = modules.iter().map(|(d, _)| d.as_str()).collect();
    let nested_of = |p: &str| -> Option<String> {
        let dir = parent(p);
        if dir
            .split('/')
            .any(|c| c == "testdata" || c == "vendor" || c.starts_with('_') || c.starts_with('.'))
        {
            return None;
        }
        if p.rsplit('/').next() == Some("go.mod") && !dir.is_empty() && !module_dirs.contains(dir) {
            return Some(dir.to_string());
        }
        let mut d = dir;
        while !d.is_empty() {
            if !module_dirs.contains(d) && !by_dir.contains_key(d) && exists(&join(d, "go.mod")) {
                return Some(d.to_string());
            }
            d = parent(d);
        }
        None
    };
    let nested_dirs: BTreeSet<String> = changed.iter().filter_map(|p| nested_of(p)).collect();
    // A path under a nested module's directory belongs to it (the deepest),
    // even when the module's go.mod went with it.
    let nested_dir_of = |p: &str| -> Option<&String> {
        nested_dirs
            .iter()
            .filter(|d| {
                p.strip_prefix(d.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            })
            .max_by_key(|d| d.len())
    };
    let mut nested: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for p in changed {
        if let Some(d) = nested_dir_of(p) {
            nested.entry(d.clone()).or_default().push(p.clone());
        }
    }
    let in_nested = |p: &str| nested_dir_of(p).is_some();
    // The package (or deleted package) whose directory tree holds `p`: the
    // nearest enclosing one.
    let enclosing = |p: &str| -> Option<Result<usize, String>> {
        let mut d = parent(p);
        loop {
            if let Some(&i) = by_dir.get(d) {
                return Some(Ok(i));
            }
            if deleted_dirs.contains(d) && !exists(p) {
                return Some(Err(d.to_string()));
            }
            if d.is_empty() {
                return None;
            }
            d = parent(d);
        }
    };
    for p in changed {
        if in_nested(p) {
            continue;
        }
        let base = p.rsplit('/').next().unwrap_or(p);
        if BUILD_CONTROL.contains(&base) {
            widen(
                &mut sel,
                p,
                &format!("{base} changes how every package builds"),
            );
            continue;
        }
        if let Some(owners) = embedded.get(p.as_str()) {
            changed_idx.extend(owners);
            sel.package_of
                .insert(p.clone(), pkgs[owners[0]].import_path.clone());
            continue;
        }
        if let Some(pos) = p.split('/').position(|c| c == "testdata") {
            let owner = p.split('/').take(pos).collect::<Vec<_>>().join("/");
            if let Some(&i) = by_dir.get(&owner) {
                changed_idx.insert(i);
                sel.package_of
                    .insert(p.clone(), pkgs[i].import_path.clone());
            } else if deleted_dirs.contains(owner.as_str()) {
                deleted_dir(&mut sel, p, &owner);
            } else {
                widen(&mut sel, p, "testdata of a directory that holds no package");
            }
            continue;
        }
        // Directly in a package's directory: that package's, whatever its
        // name — a test may read CHANGES.json or README.md as a fixture.
        if let Some(&i) = by_dir.get(parent(p)) {
            changed_idx.insert(i);
            sel.package_of
                .insert(p.clone(), pkgs[i].import_path.clone());
            continue;
        }
        let no_package = if is_documentation(p) {
            Some("documentation")
        } else {
            repository_metadata(p)
        };
        if let Some(why) = no_package {
            // Only outside every package's directory tree does a document
            // select nothing; inside one, it belongs to the nearest
            // enclosing package (over-selection is safe, omission is not).
            match enclosing(p) {
                Some(Ok(i)) => {
                    changed_idx.insert(i);
                    sel.package_of
                        .insert(p.clone(), pkgs[i].import_path.clone());
                }
                Some(Err(d)) => deleted_dir(&mut sel, p, &d),
                None => sel.no_package_paths.push(NoPackagePath {
                    path: p.clone(),
                    reason: why.into(),
                }),
            }
            continue;
        }
        if !exists(p)
            && let Some(d) = nearest_deleted(p)
        {
            deleted_dir(&mut sel, p, d);
            continue;
        }
        let why = if p.starts_with("vendor/") || p.contains("/vendor/") {
            "a vendored file changes what packages build against"
        } else if p.ends_with(".go") && exists(p) {
            "a Go file in no package go list reported (build-constrained, ignored, or outside the module)"
        } else {
            "a path in no package directory, which a build or a test may still read"
        };
        widen(&mut sel, p, why);
    }

    sel.changed_packages = changed_idx
        .iter()
        .map(|&i| pkgs[i].import_path.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    sel.deleted_packages = deleted.into_iter().collect();
    sel.nested_modules = nested.into_iter().collect();

    let all: BTreeSet<&str> = pkgs.iter().map(|p| p.import_path.as_str()).collect();
    if !sel.widened_by.is_empty() {
        sel.selected_packages = all.iter().map(|s| s.to_string()).collect();
        return sel;
    }
    let selected = closure(pkgs, &sel.changed_packages, &sel.deleted_packages);
    sel.selected_packages = selected.iter().map(|s| s.to_string()).collect();
    sel.omitted_packages = all
        .iter()
        .filter(|p| !selected.contains(*p))
        .map(|s| s.to_string())
        .collect();
    sel
}

/// Reverse closure: every package reaching a seed over `Imports`, then
/// every package whose test imports reach one of those or a seed.
/// Deleted import paths seed the walk but are never selected themselves.
fn closure<'a>(pkgs: &'a [GoPackage], changed: &[String], deleted: &[String]) -> BTreeSet<&'a str> {
    let mut rev: HashMap<&str, Vec<usize>> = HashMap::with_capacity(pkgs.len());
    let mut rev_test: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(pkgs.len());
    for (i, p) in pkgs.iter().enumerate() {
        index.insert(p.import_path.as_str(), i);
        for imp in &p.imports {
            rev.entry(imp.as_str()).or_default().push(i);
        }
        for imp in p.test_imports.iter().chain(&p.x_test_imports) {
            rev_test.entry(imp.as_str()).or_default().push(i);
        }
    }
    let mut built: Vec<bool> = vec![false; pkgs.len()];
    let mut queue: VecDeque<&str> = VecDeque::new();
    for c in changed {
        if let Some(&i) = index.get(c.as_str())
            && !built[i]
        {
            built[i] = true;
            queue.push_back(pkgs[i].import_path.as_str());
        }
    }
    for d in deleted {
        queue.push_back(d.as_str());
    }
    while let Some(path) = queue.pop_front() {
        for &j in rev.get(path).map(Vec::as_slice).unwrap_or(&[]) {
            if !built[j] {
                built[j] = true;
                queue.push_back(pkgs[j].import_path.as_str());
            }
        }
    }
    let mut selected: BTreeSet<&str> = BTreeSet::new();
    let reached = pkgs
        .iter()
        .enumerate()
        .filter(|(i, _)| built[*i])
        .map(|(_, p)| p.import_path.as_str())
        .chain(deleted.iter().map(String::as_str));
    for path in reached {
        if let Some(&i) = index.get(path) {
            selected.insert(pkgs[i].import_path.as_str());
        }
        for &j in rev_test.get(path).map(Vec::as_slice).unwrap_or(&[]) {
            selected.insert(pkgs[j].import_path.as_str());
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(dir: &str, ip: &str, imports: &[&str], test: &[&str]) -> GoPackage {
        GoPackage {
            dir: format!("/r/{dir}").trim_end_matches('/').to_string(),
            import_path: ip.into(),
            module: Some(GoModule {
                path: "m".into(),
                dir: Some("/r".into()),
            }),
            imports: imports.iter().map(|s| s.to_string()).collect(),
            x_test_imports: test.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn graph() -> Vec<GoPackage> {
        let mut emb = pkg("web", "m/web", &[], &[]);
        emb.embed_files = vec!["static/site.css".into()];
        vec![
            pkg("", "m", &["m/b"], &[]),
            pkg("leaf", "m/leaf", &[], &[]),
            pkg("b", "m/b", &["m/leaf"], &[]),
            pkg("c", "m/c", &["m/b"], &[]),
            // t's tests import leaf; nothing imports t's tests.
            pkg("t", "m/t", &[], &["m/t", "m/leaf"]),
            // u imports t: it must not be selected by a leaf change.
            pkg("u", "m/u", &["m/t"], &[]),
            emb,
            pkg("lone", "m/lone", &["m/gone"], &[]),
        ]
    }

    /// Every path exists at head except a go.mod below the root.
    fn present(p: &str) -> bool {
        !p.ends_with("/go.mod")
    }

    fn sel(paths: &[&str], exists: &dyn Fn(&str) -> bool) -> Selection {
        let changed: Vec<String> = paths.iter().map(|s| s.to_string()).collect();
        let s = select(&graph(), Path::new("/r"), &changed, exists);
        // Every path outside a nested module is accounted for exactly as the
        // engine checks it: no-package, widening, or package_of a changed or
        // deleted package.
        for p in &changed {
            if s.nested_modules.iter().any(|(_, ps)| ps.contains(p)) {
                continue;
            }
            let ok = s.no_package_paths.iter().any(|n| n.path == *p)
                || s.widened_by.iter().any(|w| w.path == *p)
                || s.package_of.get(p).is_some_and(|k| {
                    s.changed_packages.contains(k) || s.deleted_packages.contains(k)
                });
            assert!(ok, "{p} unaccounted in {s:?}");
        }
        s
    }

    #[test]
    fn leaf_selects_its_reverse_closure_and_test_importers_only() {
        let s = sel(&["leaf/leaf.go"], &present);
        assert_eq!(s.changed_packages, ["m/leaf"]);
        assert_eq!(s.selected_packages, ["m", "m/b", "m/c", "m/leaf", "m/t"]);
        assert_eq!(s.omitted_packages, ["m/lone", "m/u", "m/web"]);
        assert!(s.widened_by.is_empty());
    }

    #[test]
    fn docs_select_nothing_and_go_mod_widens() {
        // Outside every package's directory (no package at the root here).
        let no_root: Vec<GoPackage> = graph().into_iter().skip(1).collect();
        let changed: Vec<String> = ["README.md", "docs/img/a.png", "LICENSE", ".github/ci.yml"]
            .map(String::from)
            .to_vec();
        let s = select(&no_root, Path::new("/r"), &changed, &present);
        assert!(s.selected_packages.is_empty(), "{s:?}");
        assert_eq!(s.no_package_paths.len(), 4);
        // With a package at the root, every path is inside its directory
        // tree: the root package is selected, never nothing.
        let s = sel(&["README.md", "docs/img/a.png"], &present);
        assert_eq!(s.changed_packages, ["m"]);
        assert!(s.no_package_paths.is_empty());
        // Inside a package's directory a "document" is that package's: its
        // tests may read it.
        let s = sel(&["leaf/NOTES.md", "b/CHANGES.json"], &present);
        assert_eq!(s.changed_packages, ["m/b", "m/leaf"]);
        assert!(s.no_package_paths.is_empty());
        // Deeper inside a package's tree: the nearest enclosing package.
        let s = sel(&["b/fixtures/AUTHORS.txt"], &present);
        assert_eq!(s.changed_packages, ["m/b"]);
        let s = sel(&["go.mod", "README.md"], &present);
        assert_eq!(s.widened_by[0].path, "go.mod");
        assert_eq!(s.selected_packages.len(), graph().len());
        assert!(s.omitted_packages.is_empty());
    }

    #[test]
    fn embedded_and_testdata_belong_to_their_package() {
        let s = sel(&["web/static/site.css"], &present);
        assert_eq!(s.changed_packages, ["m/web"]);
        let s = sel(&["b/testdata/golden/x.md"], &present);
        assert_eq!(s.changed_packages, ["m/b"]);
        let s = sel(&["nowhere/testdata/x"], &present);
        assert_eq!(s.widened_by.len(), 1);
    }

    #[test]
    fn deleted_package_is_not_its_parents() {
        // b/sub was a package; its files are gone; b stays.
        let s = sel(&["b/sub/sub.go", "b/sub/data.json"], &|_| false);
        assert_eq!(s.changed_packages, Vec::<String>::new());
        assert_eq!(s.deleted_packages, ["m/b/sub"]);
        assert!(s.selected_packages.is_empty(), "{s:?}");
        assert!(s.widened_by.is_empty());
        // gone is still imported by lone: lone is selected.
        let s = sel(&["gone/gone.go"], &|_| false);
        assert_eq!(s.deleted_packages, ["m/gone"]);
        assert_eq!(s.selected_packages, ["m/lone"]);
    }

    #[test]
    fn nested_module_paths_are_set_apart() {
        // lib/ holds its own go.mod; go list at the root never lists it.
        let s = sel(&["lib/lib.go", "lib/README.md", "leaf/leaf.go"], &|p| {
            p == "lib/go.mod" || p.starts_with("lib/")
        });
        assert_eq!(
            s.nested_modules,
            [(
                "lib".to_string(),
                vec!["lib/lib.go".to_string(), "lib/README.md".to_string()]
            )]
        );
        assert_eq!(s.changed_packages, ["m/leaf"]);
        // A deleted nested go.mod names its module too; a testdata go.mod does not.
        let s = sel(&["x/go.mod", "b/testdata/mod/go.mod"], &|_| false);
        assert_eq!(s.nested_modules.len(), 1, "{s:?}");
        assert_eq!(s.nested_modules[0].0, "x");
    }

    #[test]
    fn unmappable_paths_widen_with_a_reason() {
        let s = sel(&["scripts/gen.sh"], &present);
        assert_eq!(s.widened_by[0].path, "scripts/gen.sh");
        let s = sel(&["vendor/x/y.go"], &present);
        assert!(s.widened_by[0].reason.contains("vendored"));
    }

    #[test]
    fn parses_concatenated_objects() {
        let text = br#"{"Dir":"/r/a","ImportPath":"m/a","Deps":["x"],"Stale":true}
{"Dir":"/r/b","ImportPath":"m/b","Imports":["m/a"],"Module":{"Path":"m","Dir":"/r","Main":true}}"#;
        let p = parse(text).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].imports, ["m/a"]);
        assert!(parse(b"{\"Dir\":").is_err());
    }

    #[test]
    fn documentation_names() {
        for d in [
            "README",
            "a/readme.md",
            "LICENSE.txt",
            "x/CHANGELOG",
            "a.rst",
        ] {
            assert!(is_documentation(d), "{d}");
        }
        for n in ["a/x.go", "README.go", "a/data.json", "a/notes.txt"] {
            assert!(!is_documentation(n), "{n}");
        }
    }
}
