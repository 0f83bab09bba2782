//! Is the affected tier actually cheaper than certification?
//!
//! Generates a real multi-package Go module (standard library only): 32
//! packages, `pN` imports `p(N/2)`, each with 300 small functions and one
//! test, so compiling (which the build cache saves) and linking (which it
//! does not) both weigh, as in real modules. Three
//! commits: `c0`; `c1` changes `p15` (a leaf-side package: p15, p30 and p31
//! are selected, 3 of 32); `c2` also edits `go.mod`, which widens the
//! selection to the whole module.
//!
//! Then, interleaved, warm (one untimed round first), median of ROUNDS, on
//! one repository and one SAPHAN_HOME, with the bundled adapter
//! (`saphan adapter go-affected`):
//!
//! * `saphan certify` of c1 and of c2 (default-go: `go test -count=1 -json ./...`),
//! * `saphan verify-affected --base c0 --head c1` (leaf change),
//! * `saphan verify-affected --base c0 --head c2` (widened),
//!
//! and prints leaf ÷ certify (goal ≤ 0.5) and widened ÷ certify (goal ≤ 1.1).
//! Run: `cargo bench --bench affected_vs_certify` (needs `go`; prints
//! `SKIPPED: …` without one). `SAPHAN_BENCH_BIN=/path/to/saphan` measures
//! that binary instead (a before/after comparison).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PACKAGES: usize = 32;
const FUNCS: usize = 300;
const ROUNDS: usize = 5;
const MODULE: &str = "example.com/bench";

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.invalid")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.invalid")
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn package(n: usize, salt: u32) -> (String, String) {
    let imp = if n > 0 {
        format!("import \"{MODULE}/p{}\"\n\n", n / 2)
    } else {
        String::new()
    };
    let base = if n > 0 {
        format!("p{}.V()", n / 2)
    } else {
        "0".into()
    };
    let src = format!(
        "package p{n}\n\n{imp}// V is a value.\nfunc V() int {{ return {base} + {salt} + F(10) }}\n\n// F sums 0..n-1 the long way.\nfunc F(n int) int {{\n\ts := 0\n\tfor i := 0; i < n; i++ {{\n\t\tswitch {{\n\t\tcase i%3 == 0:\n\t\t\ts += i * 2\n\t\tcase i%3 == 1:\n\t\t\ts -= i\n\t\tdefault:\n\t\t\ts += i - i/2\n\t\t}}\n\t}}\n\treturn s\n}}\n"
    );
    let test = format!(
        "package p{n}\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc TestV{n}(t *testing.T) {{\n\tif V() < -1000000 {{\n\t\tt.Fatal(fmt.Sprint(V()))\n\t}}\n\tif !strings.HasPrefix(fmt.Sprintf(\"p%d\", {n}), \"p\") {{\n\t\tt.Fatal()\n\t}}\n}}\n"
    );
    // Bulk, so compiling matters as it does in real modules (where the
    // build cache is what a warm run saves): FUNCS functions per package.
    let mut src = src;
    for f in 0..FUNCS {
        src.push_str(&format!(
            "\n// G{f} is filler.\nfunc G{f}(xs []int) (int, string) {{\n\tm := map[int]int{{}}\n\tfor i, x := range xs {{\n\t\tm[x%{m}] += i * {f}\n\t}}\n\tt := 0\n\tfor k, v := range m {{\n\t\tt += k*v + {salt}\n\t}}\n\treturn t, fmt.Sprintf(\"%d-%d\", t, len(m))\n}}\n",
            m = f % 7 + 2
        ));
    }
    let src = src.replacen(
        &format!("package p{n}\n\n"),
        &format!("package p{n}\n\nimport \"fmt\"\n\n"),
        1,
    );
    (src, test)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let go = saphan::suite::default_go_program();
    let go_ok = Command::new(&go)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go_ok {
        println!("SKIPPED: no `go` toolchain");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("saphan-bench-avc-")
        .tempdir()
        .unwrap();
    let repo = dir.path().join("repo");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config"),
        "[verify.affected]\nargv = \"saphan,adapter,go-affected\"\nreport = \"go-test-json\"\n",
    )
    .unwrap();
    std::fs::write(repo.join("go.mod"), format!("module {MODULE}\n\ngo 1.19\n")).unwrap();
    for n in 0..PACKAGES {
        let d = repo.join(format!("p{n}"));
        std::fs::create_dir_all(&d).unwrap();
        let (src, test) = package(n, 1);
        std::fs::write(d.join(format!("p{n}.go")), src).unwrap();
        std::fs::write(d.join(format!("p{n}_test.go")), test).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "c0"]);
    let c0 = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(repo.join("p15/p15.go"), package(15, 2).0).unwrap();
    git(&repo, &["commit", "-q", "-am", "c1: leaf change"]);
    let c1 = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        repo.join("go.mod"),
        format!("module {MODULE}\n\n// widened\ngo 1.19\n"),
    )
    .unwrap();
    git(&repo, &["commit", "-q", "-am", "c2: go.mod change"]);
    let c2 = git(&repo, &["rev-parse", "HEAD"]);
    // SAPHAN_BENCH_BIN runs another build (e.g. an older one, for a
    // before/after comparison) instead of this one.
    let saphan = std::env::var("SAPHAN_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_saphan").to_string());
    println!("saphan: {saphan}");
    let repo_s = repo.to_str().unwrap().to_string();

    let run = |args: &[&str], ok: &[i32]| -> (Duration, serde_json::Value) {
        let t0 = Instant::now();
        let o = Command::new(&saphan)
            .args(args)
            .env("SAPHAN_HOME", &home)
            .env("GOTOOLCHAIN", "local")
            .env_remove("GOFLAGS")
            .output()
            .unwrap();
        let d = t0.elapsed();
        assert!(
            ok.contains(&o.status.code().unwrap_or(-1)),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (
            d,
            serde_json::from_slice(&o.stdout).expect("one JSON object"),
        )
    };
    let certify = |sha: &str| {
        run(
            &["--json", "certify", "--repo", &repo_s, "--sha", sha],
            &[0],
        )
    };
    let affected = |head: &str| {
        run(
            &[
                "--json",
                "verify-affected",
                "--repo",
                &repo_s,
                "--base",
                &c0,
                "--head",
                head,
            ],
            &[0],
        )
    };
    // Warm-up round: the build cache at the repository's scratch path.
    let (_, v) = affected(&c1);
    let leaf_selected = v["selected_packages"].as_array().map_or(0, Vec::len);
    let (_, v) = affected(&c2);
    assert_eq!(v["widened"], true, "{v}");
    let widened_selected = v["selected_packages"].as_array().map_or(0, Vec::len);
    certify(&c1);
    certify(&c2);

    let (mut cert1, mut cert2, mut leaf, mut wide) = (vec![], vec![], vec![], vec![]);
    // Where the time goes, as the verbs report it: certify's suite_seconds;
    // the adapter's selection_seconds and adapter_seconds.
    let secs = |v: &serde_json::Value, p: &str| {
        Duration::from_secs_f64(v.pointer(p).and_then(|x| x.as_f64()).unwrap_or(0.0))
    };
    let (mut suite2, mut sel2, mut adapter2) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        cert1.push(certify(&c1).0);
        leaf.push(affected(&c1).0);
        let (d, v) = certify(&c2);
        cert2.push(d);
        suite2.push(secs(&v, "/suite_seconds"));
        let (d, v) = affected(&c2);
        wide.push(d);
        sel2.push(secs(&v, "/closure_contribution/selection_seconds"));
        adapter2.push(secs(&v, "/adapter_seconds"));
    }
    let (c1m, c2m, lm, wm) = (median(cert1), median(cert2), median(leaf), median(wide));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("module: {PACKAGES} packages, one test each; medians of {ROUNDS}, warm");
    println!(
        "certify c1 (leaf head):                 {:>8.0} ms",
        ms(c1m)
    );
    println!(
        "verify-affected c0..c1 ({leaf_selected} of {PACKAGES} selected): {:>8.0} ms",
        ms(lm)
    );
    println!(
        "certify c2 (go.mod head):               {:>8.0} ms",
        ms(c2m)
    );
    println!(
        "verify-affected c0..c2 (widened, {widened_selected}):   {:>8.0} ms",
        ms(wm)
    );
    println!(
        "  of which: certify c2 suite {:.0} ms; widened adapter {:.0} ms, its selection (go list + closure) {:.0} ms",
        ms(median(suite2)),
        ms(median(adapter2)),
        ms(median(sel2))
    );
    let (rl, rw) = (
        lm.as_secs_f64() / c1m.as_secs_f64(),
        wm.as_secs_f64() / c2m.as_secs_f64(),
    );
    let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
    println!(
        "leaf verify-affected / certify:    {rl:.2} (goal <= 0.5): {}",
        verdict(rl <= 0.5)
    );
    println!(
        "widened verify-affected / certify: {rw:.2} (goal <= 1.1): {}",
        verdict(rw <= 1.1)
    );
}
