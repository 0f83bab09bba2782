//! Real Go modules (standard library only) for tests that run a real `go`.

use std::process::Command;

/// The module path every fixture uses.
pub const MODULE: &str = "example.com/m";

/// `go.mod` for a Go 1.19 module with no requirements.
pub fn go_mod() -> (&'static str, String) {
    ("go.mod", format!("module {MODULE}\n\ngo 1.19\n"))
}

/// A package `name` in directory `dir` whose `V()` returns `value` plus the
/// `V()` of every package it imports, with one passing test.
pub fn package(dir: &str, imports: &[&str], value: i32) -> Vec<(String, String)> {
    let name = dir.rsplit('/').next().unwrap();
    let mut src = format!("package {name}\n\n");
    if !imports.is_empty() {
        src.push_str("import (\n");
        for i in imports {
            src.push_str(&format!("\t\"{MODULE}/{i}\"\n"));
        }
        src.push_str(")\n\n");
    }
    let sum: String = imports
        .iter()
        .map(|i| format!(" + {}.V()", i.rsplit('/').next().unwrap()))
        .collect();
    src.push_str(&format!(
        "// V is this package's value.\nfunc V() int {{ return {value}{sum} }}\n"
    ));
    let test = format!(
        "package {name}\n\nimport \"testing\"\n\nfunc TestV{name}(t *testing.T) {{\n\tif V() < 0 {{\n\t\tt.Fatal(\"negative\")\n\t}}\n}}\n"
    );
    vec![
        (format!("{dir}/{name}.go"), src),
        (format!("{dir}/{name}_test.go"), test),
    ]
}

/// The `go` default-go runs, by the engine's documented rule (written out
/// here independently, so tests can check the engine against it):
/// `/usr/local/go/bin/go` when it exists, else a bare `go`.
pub fn default_go() -> &'static str {
    if std::path::Path::new("/usr/local/go/bin/go").exists() {
        "/usr/local/go/bin/go"
    } else {
        "go"
    }
}

/// Is a usable `go` here (the one default-go would run)?
pub fn have_go() -> bool {
    Command::new(default_go())
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True (after printing `SKIPPED: …`) when there is no usable `go`.
pub fn no_go() -> bool {
    super::skip_unless(
        have_go(),
        "no usable `go` toolchain (default-go's /usr/local/go/bin/go or PATH's go)",
    )
}

/// Set the Go environment a test module needs on a command: no toolchain
/// download, no inherited GOFLAGS.
pub fn go_env(c: &mut Command) -> &mut Command {
    c.env("GOTOOLCHAIN", "local").env_remove("GOFLAGS")
}
