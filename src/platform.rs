//! Platform facts from `/etc/os-release` (freedesktop os-release(5)).
//!
//! Remedies pick an install command only from measured facts; this module
//! parses them. It never guesses a platform from a machine id or host name.

/// The fields of os-release(5) saphan uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OsRelease {
    /// `ID` (e.g. `debian`), lowercase.
    pub id: Option<String>,
    /// `ID_LIKE`, split on whitespace (e.g. `["debian"]` on Ubuntu).
    pub id_like: Vec<String>,
    /// `VERSION_ID` (e.g. `12`); absent on rolling distributions.
    pub version_id: Option<String>,
    /// `PRETTY_NAME`.
    pub pretty_name: Option<String>,
}

/// Undo os-release's shell-like quoting of one value: `"…"` with `\"`,
/// `\\`, `` \` ``, `\$` escapes, or `'…'` verbatim, or bare.
fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        let inner = &v[1..v.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else {
                out.push(c);
            }
        }
        out
    } else if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].to_string()
    } else {
        v.to_string()
    }
}

impl OsRelease {
    /// Parse the text of an os-release file. Unknown keys, comments and
    /// malformed lines are ignored; missing keys stay `None`.
    pub fn parse(text: &str) -> OsRelease {
        let mut r = OsRelease::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = unquote(v);
            match k.trim() {
                "ID" => r.id = Some(v.to_lowercase()).filter(|s| !s.is_empty()),
                "ID_LIKE" => r.id_like = v.split_whitespace().map(|s| s.to_lowercase()).collect(),
                "VERSION_ID" => r.version_id = Some(v).filter(|s| !s.is_empty()),
                "PRETTY_NAME" => r.pretty_name = Some(v).filter(|s| !s.is_empty()),
                _ => {}
            }
        }
        r
    }

    /// The platform ids to try, most specific first: `ID`, then `ID_LIKE`.
    pub fn platform_ids(&self) -> Vec<String> {
        self.id.iter().chain(self.id_like.iter()).cloned().collect()
    }
}

/// The local machine's platform ids: os-release on Linux (`/etc/os-release`,
/// then `/usr/lib/os-release`), `["darwin"]` on macOS, empty when unknown.
pub fn local_platform_ids() -> Vec<String> {
    if cfg!(target_os = "macos") {
        return vec!["darwin".into()];
    }
    for p in ["/etc/os-release", "/usr/lib/os-release"] {
        if let Ok(t) = std::fs::read_to_string(p) {
            return OsRelease::parse(&t).platform_ids();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_unquoted_and_missing_version() {
        let r = OsRelease::parse(
            "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        assert_eq!(r.id.as_deref(), Some("debian"));
        assert_eq!(r.version_id.as_deref(), Some("12"));
        let r = OsRelease::parse("ID=arch\nID_LIKE='archlinux other'\n# c\n");
        assert_eq!(r.version_id, None);
        assert_eq!(r.platform_ids(), vec!["arch", "archlinux", "other"]);
        let r = OsRelease::parse("ID=\"ubuntu\"\nID_LIKE=debian\nVERSION_ID=22.04\n");
        assert_eq!(r.platform_ids(), vec!["ubuntu", "debian"]);
        assert_eq!(r.version_id.as_deref(), Some("22.04"));
    }
}
