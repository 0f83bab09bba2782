//! Build script: the catalog is embedded (rebuild when it changes), and so
//! is the static saphan-probe program (`images/probe/src/main.rs`, no
//! dependencies), compiled here with the same rustc for
//! x86_64-unknown-linux-gnu with a static C runtime, so that
//! `saphan catalog probe-image` can write the probe image from the installed
//! binary alone. Where that target (or static glibc) is missing, an empty
//! file is embedded instead and `catalog probe-image` refuses by name.
//!
//! On Linux with glibc the `saphan` binary is linked with packed relative
//! relocations (`-z pack-relative-relocs`, DT_RELR: binutils 2.38, glibc
//! 2.36): a position-independent binary of this size carries ~27,000
//! relative relocations, and applying them from a 650 KB `.rela.dyn` cost
//! every start about 60 page faults (310 → 247) and half a millisecond —
//! saphan starts once per certify, probe and status. A linker that does not
//! know the option warns and ignores it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let target = |k: &str| std::env::var(k).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=catalog/capabilities.toml");
    println!("cargo:rerun-if-changed=images/probe/src/main.rs");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("saphan-probe");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let built = Command::new(rustc)
        .args([
            "--edition",
            "2024",
            "--crate-name",
            "saphan_probe",
            "--crate-type",
            "bin",
            "--target",
            "x86_64-unknown-linux-gnu",
            "-C",
            "opt-level=s",
            "-C",
            "panic=abort",
            "-C",
            "codegen-units=1",
            "-C",
            "strip=symbols",
            "-C",
            "target-feature=+crt-static",
            "images/probe/src/main.rs",
            "-o",
        ])
        .arg(&out)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !built {
        std::fs::write(&out, b"").expect("write OUT_DIR/saphan-probe");
        println!(
            "cargo:warning=the static saphan-probe program could not be built (it needs rustc's x86_64-unknown-linux-gnu target and static glibc); `saphan catalog probe-image` will refuse in this build"
        );
    }
}
