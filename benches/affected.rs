//! How much of the affected tier's selection time is saphan's own?
//!
//! Generates a Go module of 2,000 packages (standard library only): package
//! `pN` imports `p(N/2)` and, every tenth package, `p(N-1)` too — a tree
//! with chain segments, depth ~11 — and every seventh package's external
//! test imports a package elsewhere in the tree. Then it times, on the
//! same machine and the same `go list` bytes:
//!
//! * `go list -e -json ./...` (what the bundled adapter runs; median of 3
//!   after one warm-up), and
//! * saphan's own selection: parse those bytes, map changed paths to
//!   packages, compute the reverse closure (median of 20), for a leaf
//!   change, a change near the root, and a go.mod change.
//!
//! It prints the selection time as a fraction of `go list` time; the goal
//! is ≤ 5 %. Run: `cargo bench --bench affected` (needs `go`; prints
//! `SKIPPED: …` without one).

use saphan::affected::golist;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PACKAGES: usize = 2000;
const MODULE: &str = "example.com/bench";

fn generate(root: &Path) {
    std::fs::write(root.join("go.mod"), format!("module {MODULE}\n\ngo 1.19\n")).unwrap();
    for n in 0..PACKAGES {
        let dir = root.join(format!("p{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut imports = Vec::new();
        if n > 0 {
            imports.push(n / 2);
        }
        if n > 1 && n % 10 == 0 && n - 1 != n / 2 {
            imports.push(n - 1);
        }
        let mut src = format!("package p{n}\n\n");
        for i in &imports {
            src.push_str(&format!("import \"{MODULE}/p{i}\"\n"));
        }
        let sum: String = imports.iter().map(|i| format!(" + p{i}.V()")).collect();
        src.push_str(&format!(
            "\n// V is a value.\nfunc V() int {{ return 1{sum} }}\n"
        ));
        std::fs::write(dir.join(format!("p{n}.go")), src).unwrap();
        if n % 7 == 0 {
            let other = (n * 13 + 5) % PACKAGES;
            std::fs::write(
                dir.join(format!("p{n}_test.go")),
                format!(
                    "package p{n}_test\n\nimport (\n\t\"testing\"\n\n\t\"{MODULE}/p{n}\"\n\t\"{MODULE}/p{other}\"\n)\n\nfunc TestV(t *testing.T) {{\n\tif p{n}.V()+p{other}.V() < 0 {{\n\t\tt.Fatal()\n\t}}\n}}\n"
                ),
            )
            .unwrap();
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn go_list(root: &Path) -> (Vec<u8>, Duration) {
    let t0 = Instant::now();
    let o = Command::new(saphan::suite::default_go_program())
        .args(["list", "-e", "-json", "./..."])
        .current_dir(root)
        .env("GOTOOLCHAIN", "local")
        .env_remove("GOFLAGS")
        .output()
        .expect("go runs");
    let d = t0.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (o.stdout, d)
}

fn main() {
    let go_ok = Command::new(saphan::suite::default_go_program())
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !go_ok {
        println!("SKIPPED: no `go` toolchain");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("saphan-bench-affected-")
        .tempdir()
        .unwrap();
    let root = dir.path();
    let t0 = Instant::now();
    generate(root);
    println!("generated {PACKAGES} packages in {:.2?}", t0.elapsed());

    let _ = go_list(root); // warm-up: module loading, build cache
    let mut list_times = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..3 {
        let (b, d) = go_list(root);
        list_times.push(d);
        bytes = b;
    }
    let list = median(list_times);
    println!(
        "go list -e -json ./...: {:.1} ms (median of 3), {} KiB of JSON",
        list.as_secs_f64() * 1e3,
        bytes.len() / 1024
    );

    let cases: [(&str, Vec<String>); 4] = [
        ("leaf change (p1999)", vec!["p1999/p1999.go".into()]),
        ("mid-tree change (p37)", vec!["p37/p37.go".into()]),
        ("root change (p0)", vec!["p0/p0.go".into()]),
        ("go.mod change (widens)", vec!["go.mod".into()]),
    ];
    let exists = |p: &str| root.join(p).symlink_metadata().is_ok();
    let mut worst = 0.0f64;
    for (label, changed) in &cases {
        let mut times = Vec::new();
        let mut selected = 0;
        for _ in 0..20 {
            let t = Instant::now();
            let pkgs = golist::parse(&bytes).expect("go list output parses");
            let sel = golist::select(&pkgs, root, changed, &exists);
            times.push(t.elapsed());
            selected = sel.selected_packages.len();
        }
        let d = median(times);
        let frac = d.as_secs_f64() / list.as_secs_f64();
        worst = worst.max(frac);
        println!(
            "{label:<24} selection {:>7.2} ms = {:>5.2} % of go list; selected {selected} of {PACKAGES}",
            d.as_secs_f64() * 1e3,
            frac * 100.0
        );
    }
    println!(
        "worst case: saphan's selection is {:.2} % of go list time (goal <= 5 %): {}",
        worst * 100.0,
        if worst <= 0.05 { "met" } else { "NOT MET" }
    );
}
