//! POSIX shell quoting for remote command lines.
//!
//! An SSH server runs the command line it receives with the user's login
//! shell (`$SHELL -c LINE`), so every word saphan sends is quoted so that a
//! POSIX shell (sh, dash, bash, ksh, zsh) reads it back as exactly one
//! literal word: words made only of `[A-Za-z0-9_./,:@+-]` (and not empty) go
//! as they are; every other word is wrapped in single quotes, inside which
//! nothing is special, and each `'` becomes `'\''` (close, escaped quote,
//! reopen). Newlines, `$`, backquotes, `\`, `;`, `*`, `~`, `=` and non-ASCII
//! bytes all stay literal. A NUL cannot be passed in an argument at all and is
//! refused. csh-family login shells are not supported (they treat `!` and
//! newlines inside single quotes specially).

/// Quote one word for a POSIX shell. Returns `None` when the word holds a NUL.
pub fn quote(word: &str) -> Option<String> {
    if word.contains('\0') {
        return None;
    }
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./,:@+-".contains(&b))
    {
        return Some(word.to_string());
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Some(out)
}

/// Quote every word and join them with spaces: a command line a POSIX shell
/// splits back into exactly `argv`. `Err(index)` names the first word holding
/// a NUL.
pub fn command_line<S: AsRef<str>>(argv: &[S]) -> Result<String, usize> {
    let mut words = Vec::with_capacity(argv.len());
    for (i, w) in argv.iter().enumerate() {
        words.push(quote(w.as_ref()).ok_or(i)?);
    }
    Ok(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::process::Command;

    #[test]
    fn plain_words_stay_plain() {
        assert_eq!(quote("go").unwrap(), "go");
        assert_eq!(quote("/usr/bin/go").unwrap(), "/usr/bin/go");
        assert_eq!(quote("-count=1").unwrap(), "'-count=1'");
        assert_eq!(quote("a,b:c@d+e").unwrap(), "a,b:c@d+e");
    }

    #[test]
    fn special_words_are_single_quoted() {
        assert_eq!(quote("").unwrap(), "''");
        assert_eq!(quote("a b").unwrap(), "'a b'");
        assert_eq!(quote("it's").unwrap(), "'it'\\''s'");
        assert_eq!(quote("'").unwrap(), "''\\'''");
        assert_eq!(quote("$(rm -rf /); `x`").unwrap(), "'$(rm -rf /); `x`'");
        assert_eq!(quote("~").unwrap(), "'~'");
        assert_eq!(quote("FOO=bar").unwrap(), "'FOO=bar'");
        assert_eq!(quote("a\0b"), None);
        assert_eq!(command_line(&["x", "a\0"]), Err(1));
    }

    /// Round-trip through real shells: `sh -c 'printf "%s\0" LINE'` must give
    /// back exactly the words.
    fn round_trip(shell: &str, words: &[String]) {
        let line = format!("printf '%s\\0' {}", command_line(words).unwrap());
        let out = Command::new(shell).arg("-c").arg(&line).output().unwrap();
        assert!(
            out.status.success(),
            "{shell} -c {line:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut got: Vec<String> = out
            .stdout
            .split(|&b| b == 0)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect();
        assert_eq!(got.pop().as_deref(), Some(""));
        assert_eq!(&got, words, "{shell} -c {line:?}");
    }

    #[test]
    fn hostile_words_survive_real_shells() {
        let words: Vec<String> = [
            "a b", "it's", "\"dq\"", "x;y", "$HOME", "`id`", "$(id)", "\\", "\n", "*", "~", "!",
            "#c", "a\tb", "é😀", "''", "-n", "", "\x01\x7f",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for sh in ["/bin/sh", "/bin/bash", "/bin/dash"] {
            if std::path::Path::new(sh).exists() {
                round_trip(sh, &words);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_words_survive_sh(words in proptest::collection::vec("[^\u{0}]{0,12}", 1..6)) {
            round_trip("/bin/sh", &words);
        }
    }
}
