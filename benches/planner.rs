//! The split's planner past this machine, by simulation (issue 39): plan a
//! real module's recorded per-package seconds — expr-lang/expr's 64
//! packages, from one `go test -json` run here (`benches/data/
//! expr-package-seconds.tsv`, its provenance in its header) — over N = 4,
//! 16, 64 and 256 nodes with the scheduler's own planner
//! ([`saphan::schedule::assign`], the one `certify --split` uses), and print
//! for each N the planned makespan ÷ the ideal max(longest package, Σ ÷ N)
//! (goal ≤ 1.2), then the planner's own time at N = 256 (goal ≤ 10 ms).
//!
//! Where the longest package alone is more than Σ ÷ N, no split by package
//! can be faster than that package: the line says so (splitting inside a
//! package is another matter).
//!
//! `cargo bench --bench planner` (no lab, no root).

use saphan::schedule::{History, assign};
use std::time::{Duration, Instant};

fn main() {
    let data = include_str!("data/expr-package-seconds.tsv");
    let seconds: Vec<(String, f64)> = data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (p, s) = l.split_once('\t').expect("package<TAB>seconds");
            (p.to_string(), s.parse().expect("seconds"))
        })
        .collect();
    let history = History {
        seconds: seconds.iter().cloned().collect(),
        machine: Default::default(),
    };
    let packages: Vec<String> = seconds.iter().map(|(p, _)| p.clone()).collect();
    let sum: f64 = seconds.iter().map(|(_, s)| s).sum();
    let (longest_pkg, longest) = seconds
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("packages");
    println!(
        "expr-lang/expr: {} packages, Σ {sum:.2} s, longest {longest:.2} s ({longest_pkg})",
        packages.len()
    );
    let mut worst: f64 = 0.0;
    for n in [4usize, 16, 64, 256] {
        let nodes: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let shards = assign(&packages, &nodes, &history);
        let covered: usize = shards.iter().map(Vec::len).sum();
        assert_eq!(covered, packages.len(), "every package planned once");
        let makespan = shards
            .iter()
            .map(|s| s.iter().map(|p| history.seconds[p]).sum::<f64>())
            .fold(0.0, f64::max);
        let ideal = longest.max(sum / n as f64);
        let ratio = makespan / ideal;
        worst = worst.max(ratio);
        let bound = if *longest >= sum / n as f64 {
            format!(
                "; bounded by one package ({longest_pkg}, {longest:.2} s > Σ÷N {:.2} s): only splitting inside it goes faster",
                sum / n as f64
            )
        } else {
            String::new()
        };
        println!(
            "N = {n:3}: planned makespan {makespan:.3} s / ideal {ideal:.3} s = {ratio:.3} (goal <= 1.2){bound}"
        );
    }
    // The planner's own time at N = 256: the median of 201 plans.
    let nodes: Vec<String> = (0..256).map(|i| format!("n{i}")).collect();
    let mut times: Vec<Duration> = (0..201)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(assign(&packages, &nodes, &history));
            t0.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "planner time at N = 256: {:.3} ms (median of {}; goal <= 10 ms)",
        median.as_secs_f64() * 1e3,
        times.len()
    );
    println!("worst makespan ratio: {worst:.3}");
}
