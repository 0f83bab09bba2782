//! `config set` and `config unset`: one key per act, edited in place with
//! toml_edit so every other section, comment and blank line keeps its bytes.
//!
//! The rules, in the order they are checked:
//!
//! 1. The KEY must be in the vocabulary ([`schema::parse_key`]); `unset` also
//!    accepts a refused word that is present in the file, so a hand-written
//!    misspelling can be removed by name.
//! 2. The VALUE must have the key's shape ([`schema::value_from_cli`]).
//! 3. The write must not leave the block inconsistent (staging): a suite
//!    block gets `argv` first and loses it last; `junit-xml` needs
//!    `report_path` first and keeps it until the kind changes; a provision
//!    block gets `repo` first and loses it last. `config unset <scope>`
//!    removes a whole block at once.
//! 4. The whole resulting document must validate, so a write never produces
//!    a file the next load refuses.
//!
//! A write that changes nothing (same value, absent key) leaves the file
//! untouched, byte for byte. When a value is replaced, its surrounding
//! whitespace and trailing comment are kept. Writes are atomic and
//! serialized by a lock file beside the config (`config.lock`).
//!
//! The file is a [`Place`]: the operator's (`SAPHAN_HOME/config`) or a
//! repository's own (`<git-common-dir>/saphan/config`, `config set --repo`),
//! under the same rules — except `fleet.freshness`, which only the
//! operator's declares (`config-key-operator-only`).

use super::schema::{self, KeyPath, Scope};
use super::{At, ConfigError, Origin, Place, read_text};
use crate::error::{Error, IoError};
use crate::report::ReportKind;
use std::path::{Path, PathBuf};
use toml_edit::{DocumentMut, InlineTable, Item, Table, TableLike, Value};

/// What one edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The dotted KEY as given.
    pub key: String,
    /// The TOML value written (`set`), e.g. `"npm,test"`; `None` for `unset`.
    pub value: Option<String>,
    /// False when the file already said exactly this (nothing was written).
    pub changed: bool,
    /// The config file.
    pub path: PathBuf,
}

/// `saphan config set KEY VALUE` on the file of `place`.
///
/// Errors: any [`ConfigError`] of the rules above
/// (`config-key-operator-only` for `fleet.freshness` in a repository's
/// file); [`IoError`] when the file cannot be written. Nothing is written
/// on error.
pub fn set(place: &Place, key: &str, value: &str) -> Result<Edit, Error> {
    operator_only(place, key)?;
    let path = place.path.clone();
    let mut shown = None;
    let changed = transact(place, |text| {
        let (new, v) = set_text(text, &path, key, value)?;
        shown = Some(v);
        Ok(new)
    })?;
    Ok(Edit {
        key: key.to_string(),
        value: shown,
        changed,
        path,
    })
}

/// `saphan config unset KEY` on the file of `place`. KEY may name a whole
/// block (`verify.full`, `verify.provision.contract`).
///
/// Errors: as [`set`] (removing a `fleet.freshness` from a repository's
/// file is allowed: that is its repair).
pub fn unset(place: &Place, key: &str) -> Result<Edit, Error> {
    let path = place.path.clone();
    let changed = transact(place, |text| unset_text(text, &path, key))?;
    Ok(Edit {
        key: key.to_string(),
        value: None,
        changed,
        path,
    })
}

/// Several `set`s applied in order as one atomic write (used by `init`).
/// Each step obeys the same rules as a single `config set`.
pub fn set_many(place: &Place, pairs: &[(String, String)]) -> Result<bool, Error> {
    for (k, _) in pairs {
        operator_only(place, k)?;
    }
    let path = place.path.clone();
    transact(place, |text| {
        let mut cur = text.to_string();
        for (k, v) in pairs {
            if let (Some(new), _) = set_text(&cur, &path, k, v)? {
                cur = new;
            }
        }
        Ok((cur != text).then_some(cur))
    })
}

/// Refuse `fleet.*` for a repository's file: the freshness window is the
/// operator's.
fn operator_only(place: &Place, key: &str) -> Result<(), ConfigError> {
    if place.origin == Origin::Repository && (key == "fleet" || key.starts_with("fleet.")) {
        return Err(ConfigError::OperatorOnly {
            key: crate::error::one_line(key),
            at: At::Request,
        });
    }
    Ok(())
}

/// Lock, read, edit, write if changed. Returns whether the file changed.
fn transact(
    place: &Place,
    f: impl FnOnce(&str) -> Result<Option<String>, ConfigError>,
) -> Result<bool, Error> {
    let path = place.path.clone();
    let root = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(root).map_err(|source| IoError::Io {
        action: "create directory",
        path: root.to_path_buf(),
        source,
    })?;
    // Lock the file that is written: through a symlink, the target (two
    // homes linking one file share one lock); plainly, `config.lock`.
    let target = crate::fsutil::resolve_link(&path);
    let mut lock_name = target
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "config".into());
    lock_name.push(".lock");
    let lock_dir = target.parent().unwrap_or(root).to_path_buf();
    std::fs::create_dir_all(&lock_dir).map_err(|source| IoError::Io {
        action: "create directory",
        path: lock_dir.clone(),
        source,
    })?;
    let lock_path = lock_dir.join(lock_name);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| IoError::Io {
            action: "open",
            path: lock_path.clone(),
            source,
        })?;
    lock.lock().map_err(|source| IoError::Io {
        action: "lock",
        path: lock_path.clone(),
        source,
    })?;
    let text = read_text(&path)?.unwrap_or_default();
    let changed = match f(&text)?.map(|new| keep_bytes(&text, new)) {
        Some(new) if new != text => {
            crate::fsutil::atomic_write(&path, new.as_bytes())?;
            true
        }
        _ => false,
    };
    drop(lock);
    Ok(changed)
}

/// Keep every byte of `orig` outside the edited span. toml_edit re-renders
/// a whole document, and in doing so regroups dotted keys (`probe.timeout`,
/// `name`, `probe.retries` comes back with `name` last) in tables saphan
/// does not own. So the edit is taken as the one run of lines where `new`
/// differs from `orig` re-rendered unedited, and spliced into `orig` at the
/// same lines — when the lines it replaces read the same in `orig` and the
/// result re-renders exactly as `new` (the same document, same layout). Otherwise (an edit inside a
/// regrouped table) `new` is written as rendered.
fn keep_bytes(orig: &str, new: String) -> String {
    if let Some(spliced) = splice_leaves(orig, &new) {
        return spliced;
    }
    let Ok(doc) = orig.parse::<DocumentMut>() else {
        return new;
    };
    let base = doc.to_string();
    if base == orig {
        return new;
    }
    let b: Vec<&str> = base.split_inclusive('\n').collect();
    let o: Vec<&str> = orig.split_inclusive('\n').collect();
    let n: Vec<&str> = new.split_inclusive('\n').collect();
    if b.len() != o.len() {
        return new;
    }
    let pre = b.iter().zip(&n).take_while(|(x, y)| x == y).count();
    let room = b.len().min(n.len()) - pre;
    let suf = b
        .iter()
        .rev()
        .zip(n.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    let (from, to) = (pre, b.len() - suf);
    if b[from..to] != o[from..to] {
        return new;
    }
    let mut out = String::with_capacity(new.len() + orig.len() - base.len().min(orig.len()));
    out.extend(o[..from].iter().copied());
    out.extend(n[pre..n.len() - suf].iter().copied());
    out.extend(o[to..].iter().copied());
    let same = out
        .parse::<DocumentMut>()
        .is_ok_and(|d| d.to_string() == new);
    if same { out } else { new }
}

/// One key = value of a document, with where it is written.
struct Leaf {
    /// Table path and key (`["verify", "full", "argv"]`).
    path: Vec<String>,
    /// Byte range of the key's last part (`argv` of `full.argv`).
    key: std::ops::Range<usize>,
    /// Byte range of the value (an inline table or array is one value).
    value: std::ops::Range<usize>,
}

/// Every key = value of `text` (an inline table or an array is one leaf), or
/// `None` when some leaf has no span (arrays of tables: left to the
/// line-based splice).
fn leaves(text: &str) -> Option<Vec<Leaf>> {
    fn walk(t: &dyn TableLike, path: &mut Vec<String>, out: &mut Vec<Leaf>) -> Option<()> {
        for (k, item) in t.iter() {
            path.push(k.to_string());
            match item {
                Item::Table(sub) => walk(sub, path, out)?,
                Item::Value(v) => out.push(Leaf {
                    path: path.clone(),
                    key: t.key(k)?.span()?,
                    value: v.span()?,
                }),
                Item::ArrayOfTables(_) => return None,
                Item::None => {}
            }
            path.pop();
        }
        Some(())
    }
    let doc = toml_edit::Document::parse(text).ok()?;
    let mut out = Vec::new();
    walk(doc.as_table(), &mut Vec::new(), &mut out)?;
    Some(out)
}

/// Byte range of the line holding `at`, through its line ending.
fn line_of(text: &str, at: usize) -> std::ops::Range<usize> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    start..end
}

/// `new` written as the smallest edit of `orig` that TOML reads the same:
/// each key whose value changed gets the new value's text at the old
/// value's bytes; a removed key loses its line; an added key gets a line
/// after the last line of its table's keys, written the way that line
/// writes its key (`full.` before `timeout` when the table is written with
/// dotted keys). Every other byte of `orig` stays, whatever order its keys
/// are in — toml_edit would regroup interleaved dotted keys. `None` when
/// that cannot express the edit (a table added or emptied, an array of
/// tables changed): the line-based splice is tried then.
fn splice_leaves(orig: &str, new: &str) -> Option<String> {
    let (old, fresh) = (leaves(orig)?, leaves(new)?);
    let same_value = |a: &str, b: &str| {
        a == b
            || matches!(
                (
                    toml::from_str::<toml::Table>(&format!("v = {a}")),
                    toml::from_str::<toml::Table>(&format!("v = {b}")),
                ),
                (Ok(x), Ok(y)) if x == y
            )
    };
    // (start, end, replacement), applied from the end of the file back.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for o in &old {
        match fresh.iter().find(|n| n.path == o.path) {
            Some(n) if same_value(&orig[o.value.clone()], &new[n.value.clone()]) => {}
            Some(n) => edits.push((o.value.start, o.value.end, new[n.value.clone()].to_string())),
            None => {
                let line = line_of(orig, o.value.start);
                if line_of(orig, o.key.start) != line || o.value.end > line.end {
                    return None;
                }
                edits.push((line.start, line.end, String::new()));
            }
        }
    }
    for n in fresh
        .iter()
        .filter(|n| !old.iter().any(|o| o.path == n.path))
    {
        let parent = &n.path[..n.path.len() - 1];
        let anchor = old
            .iter()
            .filter(|o| &o.path[..o.path.len() - 1] == parent)
            .max_by_key(|o| o.value.end)?;
        let line = line_of(orig, anchor.key.start);
        let after = line_of(orig, anchor.value.end.saturating_sub(1)).end;
        let eol = if orig[..after].ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        };
        let prefix = &orig[line.start..anchor.key.start];
        let lead = if orig[..after].ends_with('\n') || after == 0 {
            ""
        } else {
            eol
        };
        edits.push((
            after,
            after,
            format!(
                "{lead}{prefix}{} = {}{eol}",
                &new[n.key.clone()],
                &new[n.value.clone()]
            ),
        ));
    }
    if edits.is_empty() {
        return None;
    }
    edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    let mut out = orig.to_string();
    let mut floor = usize::MAX;
    for (start, end, text) in edits {
        if end > floor {
            return None;
        }
        out.replace_range(start..end, &text);
        floor = start;
    }
    let read = |t: &str| toml::from_str::<toml::Table>(t).ok();
    (read(&out).is_some() && read(&out) == read(new)).then_some(out)
}

/// Apply `config set KEY VALUE` to `text` (the file at `path`, for
/// messages). Returns the new text (`None` when nothing changes) and the TOML
/// value as it reads in the file.
///
/// Errors: any [`ConfigError`] of the rules in the module docs.
pub fn set_text(
    text: &str,
    path: &Path,
    key: &str,
    raw: &str,
) -> Result<(Option<String>, String), ConfigError> {
    let mut doc = super::parse(text, path)?;
    let kp = schema::parse_key(key)?;
    let (segs, leaf, scope): (Vec<String>, &str, Option<Scope>) = match &kp {
        KeyPath::Scope(s) => {
            return Err(ConfigError::KeyInvalid {
                key: key.to_string(),
                why: format!(
                    "config set writes one key of {} at a time ({})",
                    s.path(),
                    s.keys().join(", ")
                ),
            });
        }
        KeyPath::FleetFreshness => (vec!["fleet".into()], "freshness", None),
        KeyPath::Key { scope, key } => (
            scope.segments().into_iter().map(String::from).collect(),
            *key,
            Some(scope.clone()),
        ),
    };
    let value = schema::value_from_cli(scope.as_ref(), leaf, raw, &kp.dotted())?;
    let shown = value.to_string().trim().to_string();
    let seg_refs: Vec<&str> = segs.iter().map(String::as_str).collect();

    // Staging: what the block holds now decides whether this key may come next.
    let block = item_at(&doc, &seg_refs).and_then(Item::as_table_like);
    let has = |k: &str| block.is_some_and(|t| t.contains_key(k));
    match &scope {
        Some(s @ (Scope::Full | Scope::Affected)) => {
            if leaf != "argv" && !has("argv") {
                return Err(ConfigError::NoArgvYet {
                    scope: s.path(),
                    key: leaf.to_string(),
                });
            }
            if leaf == "report"
                && value.as_str() == Some(ReportKind::JunitXml.as_str())
                && !has("report_path")
            {
                return Err(ConfigError::JunitNeedsPath { scope: s.path() });
            }
        }
        Some(Scope::Provision(alias)) if leaf != "repo" && !has("repo") => {
            return Err(ConfigError::ProvisionRepoFirst {
                alias: alias.clone(),
                key: leaf.to_string(),
            });
        }
        Some(Scope::Provision(_)) => {}
        None => {}
    }

    let unchanged = block
        .and_then(|t| t.get(leaf))
        .and_then(Item::as_value)
        .is_some_and(|old| same_value(old, &value));
    if unchanged {
        super::validate::validate(&doc, path)?;
        return Ok((None, shown));
    }

    let pos = new_table_position(&doc, seg_refs[0]);
    let Some(table) = ensure_table(&mut doc, &seg_refs, pos) else {
        // Something that is not a table sits where the block belongs: the
        // file is refused as it stands.
        super::validate::validate(&super::parse(text, path)?, path)?;
        return Err(ConfigError::ValueInvalid {
            key: seg_refs.join("."),
            value: String::new(),
            what: "it is not a table in the file".into(),
            fix: format!("edit {} by hand", path.display()),
            at: super::At::File(path.to_path_buf()),
        });
    };
    let appended = !table.contains_key(leaf);
    put(table, leaf, value);
    if appended {
        tidy_inline_append(&mut doc, &seg_refs, leaf);
    }
    super::validate::validate(&doc, path)?;
    Ok((Some(render(&doc, text)), shown))
}

/// Apply `config unset KEY` to `text`. Returns the new text, or `None` when
/// the key was not set (nothing changes).
///
/// Errors: any [`ConfigError`] of the rules in the module docs.
pub fn unset_text(text: &str, path: &Path, key: &str) -> Result<Option<String>, ConfigError> {
    let mut doc = super::parse(text, path)?;
    let segs: Vec<String> = match schema::parse_key(key) {
        Ok(KeyPath::Scope(s)) => s.segments().into_iter().map(String::from).collect(),
        Ok(KeyPath::FleetFreshness) => vec!["fleet".into(), "freshness".into()],
        Ok(KeyPath::Key { scope, key: leaf }) => {
            let seg_refs = scope.segments();
            if let Some(t) = item_at(&doc, &seg_refs).and_then(Item::as_table_like)
                && t.contains_key(leaf)
            {
                let others = t.len() > 1;
                match &scope {
                    Scope::Full | Scope::Affected => {
                        if leaf == "argv" && others {
                            return Err(ConfigError::ArgvStillNeeded {
                                scope: scope.path(),
                            });
                        }
                        let junit = t
                            .get("report")
                            .and_then(Item::as_str)
                            .is_some_and(|r| r == ReportKind::JunitXml.as_str());
                        if leaf == "report_path" && junit {
                            return Err(ConfigError::PathNeededByJunit {
                                scope: scope.path(),
                            });
                        }
                    }
                    Scope::Provision(alias) => {
                        if leaf == "repo" && others {
                            return Err(ConfigError::ProvisionRepoStillNeeded {
                                alias: alias.clone(),
                            });
                        }
                    }
                }
            }
            let mut v: Vec<String> = seg_refs.into_iter().map(String::from).collect();
            v.push(leaf.to_string());
            v
        }
        // A refused word that is in the file may still be removed by name:
        // that is how a hand-written misspelling is repaired.
        Err(
            e @ (ConfigError::ScopeReserved { .. }
            | ConfigError::ScopeUnknown { .. }
            | ConfigError::ScopeMissing { .. }
            | ConfigError::KeyUnknown { .. }),
        ) => {
            let raw: Vec<&str> = key.split('.').collect();
            if item_at(&doc, &raw).is_none() {
                return Err(e);
            }
            raw.into_iter().map(String::from).collect()
        }
        Err(e) => return Err(e),
    };
    let seg_refs: Vec<&str> = segs.iter().map(String::as_str).collect();
    if item_at(&doc, &seg_refs).is_none() {
        super::validate::validate(&doc, path)?;
        return Ok(None);
    }
    let before: Vec<String> = super::validate::validate_all(&doc, path)
        .1
        .iter()
        .map(ToString::to_string)
        .collect();
    remove_and_prune(&mut doc, &seg_refs);
    // An unset may leave problems the file already had (that is how they
    // are repaired one at a time); it must not introduce a new one.
    if let Some(new) = super::validate::validate_all(&doc, path)
        .1
        .into_iter()
        .find(|e| !before.contains(&e.to_string()))
    {
        return Err(new);
    }
    Ok(Some(render(&doc, text)))
}

/// The document's text, with the original's line endings: toml_edit writes
/// `\n`, so a file whose every line ended in `\r\n` gets them back.
fn render(doc: &DocumentMut, original: &str) -> String {
    let out = doc.to_string();
    let newlines = original.matches('\n').count();
    if newlines > 0 && original.matches("\r\n").count() == newlines {
        out.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        out
    }
}

/// The item at a dotted path, through standard, dotted and inline tables.
fn item_at<'a>(doc: &'a DocumentMut, segs: &[&str]) -> Option<&'a Item> {
    let mut item = doc.as_item();
    for s in segs {
        item = item.as_table_like()?.get(s)?;
    }
    Some(item)
}

fn item_at_mut<'a>(doc: &'a mut DocumentMut, segs: &[&str]) -> Option<&'a mut Item> {
    let mut item = doc.as_item_mut();
    for s in segs {
        item = item.as_table_like_mut()?.get_mut(s)?;
    }
    Some(item)
}

/// Where a new `[verify.*]` table goes: right after the last header table
/// of the same top-level section, else after the last table of the file.
fn new_table_position(doc: &DocumentMut, top: &str) -> Option<isize> {
    fn walk(t: &Table, inside: bool, depth: usize, top: &str, out: &mut Vec<(bool, isize)>) {
        for (k, item) in t.iter() {
            let inside = inside || (depth == 0 && k == top);
            let mut visit = |st: &Table| {
                if let Some(p) = st.position() {
                    out.push((inside, p));
                }
                walk(st, inside, depth + 1, top, out);
            };
            match item {
                Item::Table(st) => visit(st),
                Item::ArrayOfTables(a) => a.iter().for_each(visit),
                _ => {}
            }
        }
    }
    let mut all = Vec::new();
    walk(doc.as_table(), false, 0, top, &mut all);
    let same = all
        .iter()
        .filter(|(inside, _)| *inside)
        .map(|(_, p)| *p)
        .max();
    same.or_else(|| all.iter().map(|(_, p)| *p).max().map(|p| p + 1))
}

/// Walk to the block at `segs`, creating missing tables: intermediate ones
/// implicit (no header of their own), the block itself a header table at
/// `pos`. Inside an inline table, inline tables are created instead.
fn ensure_table<'a>(
    doc: &'a mut DocumentMut,
    segs: &[&str],
    pos: Option<isize>,
) -> Option<&'a mut dyn TableLike> {
    let mut item = doc.as_item_mut();
    for (i, s) in segs.iter().enumerate() {
        let leaf = i + 1 == segs.len();
        item = match item {
            Item::Table(t) => {
                if !t.contains_key(s) {
                    let mut nt = Table::new();
                    if leaf {
                        nt.set_position(pos);
                    } else {
                        nt.set_implicit(true);
                    }
                    t.insert(s, Item::Table(nt));
                }
                t.get_mut(s)?
            }
            Item::Value(Value::InlineTable(t)) => {
                if !t.contains_key(s) {
                    t.insert(*s, Value::InlineTable(InlineTable::new()));
                }
                TableLike::get_mut(t, s)?
            }
            _ => return None,
        };
    }
    item.as_table_like_mut()
}

/// Put `value` at `key`, keeping the old value's whitespace and trailing
/// comment (toml_edit drops them on a plain replace) and the key's own
/// formatting (alignment).
fn put(table: &mut dyn TableLike, key: &str, mut value: Value) {
    match table.get_mut(key) {
        Some(item) => {
            if let Some(old) = item.as_value() {
                *value.decor_mut() = old.decor().clone();
            }
            *item = Item::Value(value);
        }
        None => {
            table.insert(key, Item::Value(value));
        }
    }
}

/// In an inline table, a key appended after the last one takes over that
/// key's trailing space before `}` (`{ a = 1 }` + b → `{ a = 1, b = 2 }`).
fn tidy_inline_append(doc: &mut DocumentMut, segs: &[&str], key: &str) {
    let Some(Item::Value(Value::InlineTable(t))) = item_at_mut(doc, segs) else {
        return;
    };
    let n = t.len();
    if n < 2 || t.iter().last().map(|(k, _)| k) != Some(key) {
        return;
    }
    let mut values: Vec<&mut Value> = t.iter_mut().map(|(_, v)| v).collect();
    let suffix = values[n - 2].decor().suffix().cloned();
    if let Some(sfx) = suffix {
        values[n - 2].decor_mut().set_suffix("");
        values[n - 1].decor_mut().set_suffix(sfx);
    }
}

/// Equal for config-v1's purposes: same string, or same array of strings.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.value() == y.value(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| p.as_str().is_some() && p.as_str() == q.as_str())
        }
        _ => false,
    }
}

/// Remove the item at `segs`, then every table above it that this left
/// empty and that has no header of its own (implicit or dotted), plus the
/// emptied block itself: an empty `[verify.full]` would declare a suite with
/// no argv. An explicit header the operator wrote (`[verify]`, `[fleet]`)
/// stays unless it only ever held what was removed.
/// The lines above a removed table's header that are not its own heading:
/// everything up to the last blank line of its prefix. toml_edit stores all
/// of them in the table's prefix, so without this a file-level comment
/// above a block would vanish with the block.
fn detached_prefix(t: &Table) -> String {
    let prefix = t
        .decor()
        .prefix()
        .and_then(|r| r.as_str())
        .unwrap_or_default();
    match prefix.rfind("\n\n").or_else(|| prefix.rfind("\n\r\n")) {
        Some(i) => prefix[..=i].to_string(),
        None => String::new(),
    }
}

/// The key path of the table with the smallest position greater than
/// `after` (the one that follows in the file), searching below `item`.
fn next_table(
    item: &Item,
    path: &mut Vec<String>,
    after: isize,
    best: &mut Option<(isize, Vec<String>)>,
) {
    let Some(t) = item.as_table() else { return };
    if let Some(p) = t.position()
        && p > after
        && best.as_ref().is_none_or(|(b, _)| p < *b)
    {
        *best = Some((p, path.clone()));
    }
    for (k, child) in t.iter() {
        path.push(k.to_string());
        next_table(child, path, after, best);
        path.pop();
    }
}

/// Give `text` to the table that follows position `after` in the file (as
/// the start of its prefix), or to the end of the document when none does.
fn reattach(doc: &mut DocumentMut, after: isize, text: String) {
    if text.is_empty() {
        return;
    }
    let mut best = None;
    next_table(doc.as_item(), &mut Vec::new(), after, &mut best);
    let path: Vec<String> = best.map(|(_, p)| p).unwrap_or_default();
    let segs: Vec<&str> = path.iter().map(String::as_str).collect();
    let next = if segs.is_empty() {
        None
    } else {
        item_at_mut(doc, &segs).and_then(Item::as_table_mut)
    };
    match next {
        Some(t) => {
            let old = t
                .decor()
                .prefix()
                .and_then(|r| r.as_str())
                .unwrap_or_default();
            let joined = format!("{text}{old}");
            t.decor_mut().set_prefix(joined);
        }
        None => {
            let joined = format!("{}{text}", doc.trailing().as_str().unwrap_or_default());
            doc.set_trailing(joined);
        }
    }
}

fn remove_and_prune(doc: &mut DocumentMut, segs: &[&str]) {
    let (last, parent) = segs.split_last().expect("a non-empty path");
    let mut keep = None;
    if let Some(t) = item_at_mut(doc, parent).and_then(Item::as_table_like_mut)
        && let Some(removed) = t.remove(last)
        && let Item::Table(rt) = &removed
        && let Some(pos) = rt.position()
    {
        keep = Some((pos, detached_prefix(rt)));
    }
    if let Some((pos, text)) = keep {
        reattach(doc, pos, text);
    }
    for depth in (1..segs.len()).rev() {
        let path = &segs[..depth];
        let Some(item) = item_at(doc, path) else {
            break;
        };
        let empty = item.as_table_like().is_some_and(|t| t.is_empty());
        let headerless = match item {
            Item::Table(t) => t.is_implicit() || t.is_dotted(),
            Item::Value(Value::InlineTable(t)) => t.is_dotted(),
            _ => false,
        };
        // The block a key belonged to (verify.full, verify.provision.x,
        // fleet) goes when emptied; sections above it only when headerless.
        let is_block = depth + 1 == segs.len();
        if !(empty && (headerless || is_block)) {
            break;
        }
        let (name, above) = path.split_last().expect("depth >= 1");
        if let Some(t) = item_at_mut(doc, above).and_then(Item::as_table_like_mut) {
            t.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> PathBuf {
        PathBuf::from("/home/op/.saphan/config")
    }
    /// What `config set` writes: the edit, then the byte-keeping splice.
    fn set(text: &str, k: &str, v: &str) -> String {
        keep_bytes(text, set_text(text, &p(), k, v).unwrap().0.unwrap())
    }
    fn unset(text: &str, k: &str) -> String {
        keep_bytes(text, unset_text(text, &p(), k).unwrap().unwrap())
    }

    #[test]
    fn unsetting_a_block_keeps_the_comments_above_its_own_heading() {
        let text = "# top\n\n# the full suite\n[verify.full]\nargv = \"x\"\n\n[other]\na = 1\n";
        assert_eq!(unset(text, "verify.full"), "# top\n\n[other]\na = 1\n");
        let text = "[a]\nb = 1\n\n# sep\n\n[verify.full]\nargv = \"x\"\n";
        assert_eq!(unset(text, "verify.full"), "[a]\nb = 1\n\n# sep\n");
    }

    const HAND: &str = "# my saphan config\n\n[someone.else]\nx = 1 # theirs\n\n[verify.full]\nargv    = \"npm,test\"   # the suite\ntimeout = \"20m\"\n\n# fleet below\n[fleet]\nfreshness = \"12h\"\n";

    #[test]
    fn replacing_a_value_keeps_its_comment_and_alignment() {
        let out = set(HAND, "verify.full.argv", "npm,run,test");
        assert_eq!(out, HAND.replace("\"npm,test\"", "\"npm,run,test\""));
    }

    #[test]
    fn same_value_is_no_change() {
        assert_eq!(
            set_text(HAND, &p(), "verify.full.argv", "npm,test")
                .unwrap()
                .0,
            None
        );
        assert_eq!(unset_text(HAND, &p(), "verify.full.report").unwrap(), None);
    }

    #[test]
    fn set_then_unset_is_identity() {
        for (k, v) in [
            ("verify.full.report", "exitcode"),
            ("verify.full.report_path", "reports/*.xml"),
            ("verify.affected.argv", "saphan,adapter,go-affected"),
            ("verify.provision.contract.repo", "/src/engine"),
        ] {
            let mid = set(HAND, k, v);
            assert_ne!(mid, HAND);
            let back = unset(&mid, k);
            assert_eq!(back, HAND, "after set+unset of {k}:\n{mid}");
        }
    }

    #[test]
    fn new_scope_lands_after_the_last_verify_table() {
        let out = set(HAND, "verify.affected.argv", "x");
        assert_eq!(
            out,
            HAND.replace(
                "timeout = \"20m\"\n",
                "timeout = \"20m\"\n\n[verify.affected]\nargv = \"x\"\n"
            )
        );
    }

    #[test]
    fn empty_file_gets_one_block() {
        assert_eq!(
            set("", "verify.full.argv", "swift,test"),
            "[verify.full]\nargv = \"swift,test\"\n"
        );
        assert_eq!(
            unset("[verify.full]\nargv = \"swift,test\"\n", "verify.full.argv"),
            ""
        );
    }

    #[test]
    fn dotted_keys_are_edited_in_place() {
        let text = "verify.full.argv = \"go,test\" # dotted\nother = 1\n";
        let out = set(text, "verify.full.argv", "go,vet");
        assert_eq!(out, text.replace("go,test", "go,vet"));
        let mid = set(text, "verify.full.timeout", "5m");
        assert_eq!(unset(&mid, "verify.full.timeout"), text, "mid:\n{mid}");
    }

    #[test]
    fn interleaved_dotted_keys_keep_their_order() {
        // issue 21.9: saphan's own [verify] table, dotted keys interleaved.
        let text = "[verify]\nfull.argv = \"go,test,./...\"   # the suite\naffected.argv = \"saphan\"\nfull.timeout = \"10m\"\n\n[fleet]\nfreshness = \"24h\"\n";
        let out = set(text, "verify.full.timeout", "5m");
        assert_eq!(out, text.replace("\"10m\"", "\"5m\""));
        let out = set(text, "verify.affected.timeout", "2m");
        assert_eq!(
            out,
            text.replace(
                "affected.argv = \"saphan\"\n",
                "affected.argv = \"saphan\"\naffected.timeout = \"2m\"\n"
            ),
            "a new key goes after its own table's last key, written the same way"
        );
        let out = unset(text, "verify.full.timeout");
        assert_eq!(out, text.replace("full.timeout = \"10m\"\n", ""));
        assert_eq!(
            unset(
                &set(text, "verify.affected.timeout", "2m"),
                "verify.affected.timeout"
            ),
            text
        );
    }

    #[test]
    fn interleaved_dotted_keys_keep_crlf() {
        let text = "[verify]\r\nfull.argv = \"go,test\"\r\naffected.argv = \"x\"\r\nfull.timeout = \"1m\"\r\n";
        let out = set(text, "verify.full.report", "go-test-json");
        assert_eq!(
            out,
            text.replace(
                "full.timeout = \"1m\"\r\n",
                "full.timeout = \"1m\"\r\nfull.report = \"go-test-json\"\r\n"
            )
        );
    }

    #[test]
    fn inline_tables_are_edited_in_place() {
        let text = "[verify]\nfull = { argv = \"go,test\" }\n";
        let out = set(text, "verify.full.report", "go-test-json");
        assert_eq!(
            out,
            "[verify]\nfull = { argv = \"go,test\", report = \"go-test-json\" }\n"
        );
        let again = set(&out, "verify.full.report", "exitcode");
        assert_eq!(
            again,
            "[verify]\nfull = { argv = \"go,test\", report = \"exitcode\" }\n"
        );
    }

    #[test]
    fn crlf_files_keep_their_line_endings() {
        let text = "# c\r\n[verify.full]\r\nargv = \"x\"\r\n\r\n[other]\r\ny = 1\r\n";
        let mid = set(text, "verify.full.timeout", "5m");
        assert_eq!(
            mid,
            text.replace("argv = \"x\"\r\n", "argv = \"x\"\r\ntimeout = \"5m\"\r\n")
        );
        assert_eq!(unset(&mid, "verify.full.timeout"), text);
    }

    #[test]
    fn argv_array_value() {
        let out = set("", "verify.full.argv", r#"["sh", "-c", "echo a,b"]"#);
        assert_eq!(
            out,
            "[verify.full]\nargv = [\"sh\", \"-c\", \"echo a,b\"]\n"
        );
    }

    #[test]
    fn repair_by_unsetting_a_misspelling() {
        let text = "[verify.full]\nargv = \"x\"\nargvv = \"y\"\n";
        assert_eq!(
            unset(text, "verify.full.argvv"),
            "[verify.full]\nargv = \"x\"\n"
        );
        let err = unset_text(text, &p(), "verify.full.nothing").unwrap_err();
        assert_eq!(crate::error::Refusal::name(&err), "config-key-unknown");
    }
}
