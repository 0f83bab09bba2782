//! Report parsing against real peers, on the same generated inputs, in one run.
//!
//! Run: `cargo bench --bench reports` (release build). Optional environment:
//! `SAPHAN_BENCH_MB` (size of the comparison inputs, default 64) and
//! `SAPHAN_BENCH_RSS_GB` (size of the peak-RSS input, default 1; 0 skips it).
//!
//! * junit-xml beside bare quick-xml event reading of the same file (the
//!   floor: tokenizing alone, none of the XML 1.0 strictness checks nor the
//!   JUnit rules), and vs junitparser 5 (PyPI; `pip install
//!   'junitparser>=5,<6'`): its parse plus the walk that derives the same
//!   count and failing names, timed inside the Python process (interpreter
//!   start-up excluded). Goal ≥ 30×.
//! * go-test-json: MB/s (goal ≥ 550 MB/s: the 2-core AMD EPYC build VM,
//!   2.0 GHz, no AVX-512, reads this stream at 607–645 MB/s at load
//!   average 1.6–2.3, as docs/reports.md gives) and vs gotestsum (Debian)
//!   converting the same stream:
//!   `gotestsum --junitfile FILE --raw-command -- cat FILE`, wall clock.
//!   Goal ≥ 5×.
//!
//! In-process timings are the best of 5 runs, ours and bare quick-xml
//! interleaved so both see the same load; the load average is printed at
//! the start and the end (the machine may be shared).
//! * peak RSS (VmHWM) of a child process that parses a 1 GB JUnit file.
//!   Goal < 64 MiB.
//!
//! It prints ratios; it asserts nothing (performance is not a test).

use saphan::report::{gojson, junit};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RSS_CHILD: &str = "SAPHAN_BENCH_RSS_CHILD";

fn main() {
    if let Ok(path) = std::env::var(RSS_CHILD) {
        rss_child(Path::new(&path));
        return;
    }
    let mb: u64 = env_num("SAPHAN_BENCH_MB", 64);
    let rss_gb: u64 = env_num("SAPHAN_BENCH_RSS_GB", 1);
    let dir = tempfile::Builder::new()
        .prefix("saphan-bench-")
        .tempdir()
        .expect("temp dir");

    println!(
        "saphan report benchmark (inputs ≈ {mb} MB; best of {RUNS} for in-process timings; load average {})",
        loadavg()
    );
    println!();
    junit_vs_junitparser(dir.path(), mb);
    println!();
    gojson_vs_gotestsum(dir.path(), mb);
    println!();
    if rss_gb > 0 {
        peak_rss(dir.path(), rss_gb);
    }
    println!();
    println!("load average at the end: {}", loadavg());
}

/// In-process timings take the best of this many runs.
const RUNS: usize = 5;

/// The first three fields of /proc/loadavg (1, 5, 15 minutes).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn env_num(k: &str, d: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..n {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        out = Some(v);
    }
    (best, out.unwrap())
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

/// A Surefire-shaped report: suites of testcases, 2% failures with a stack
/// trace, 1% skipped, a `<system-out>` per suite. Returns (count, failing).
fn write_junit(path: &Path, target_bytes: u64) -> (u64, u64) {
    let f = std::fs::File::create(path).expect("create junit");
    let mut w = BufWriter::with_capacity(1 << 20, f);
    writeln!(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>").unwrap();
    writeln!(w, "<testsuites name=\"bench\">").unwrap();
    let (mut written, mut count, mut failing) = (0u64, 0u64, 0u64);
    let mut suite = 0u64;
    let cases = 200u64;
    let mut buf = Vec::with_capacity(256 * 1024);
    while written < target_bytes {
        buf.clear();
        let skipped = cases / 100;
        writeln!(
            buf,
            "  <testsuite name=\"com.example.pkg{suite}.ServiceTest\" tests=\"{cases}\" skipped=\"{skipped}\" failures=\"4\" errors=\"0\" time=\"1.234\" timestamp=\"2026-11-29T12:00:00\" hostname=\"ci-42\">"
        )
        .unwrap();
        writeln!(buf, "    <properties><property name=\"java.version\" value=\"21\"/><property name=\"os.name\" value=\"Linux\"/></properties>").unwrap();
        for c in 0..cases {
            let cls = format!("com.example.pkg{suite}.ServiceTest");
            if c % 100 == 7 {
                writeln!(buf, "    <testcase name=\"skipsCase{c}\" classname=\"{cls}\" time=\"0\"><skipped message=\"not on linux\"/></testcase>").unwrap();
            } else if c % 50 == 3 {
                failing += 1;
                writeln!(buf, "    <testcase name=\"failsCase{c}(int, String)\" classname=\"{cls}\" time=\"0.012\">").unwrap();
                writeln!(buf, "      <failure message=\"expected: &lt;1&gt; but was: &lt;2&gt;\" type=\"org.opentest4j.AssertionFailedError\">org.opentest4j.AssertionFailedError: expected: &lt;1&gt; but was: &lt;2&gt;").unwrap();
                for k in 0..12 {
                    writeln!(
                        buf,
                        "\tat com.example.pkg{suite}.ServiceTest.failsCase{c}(ServiceTest.java:{})",
                        100 + k
                    )
                    .unwrap();
                }
                writeln!(buf, "</failure>\n      <system-out><![CDATA[log line one\nlog line two]]></system-out>\n    </testcase>").unwrap();
            } else {
                writeln!(
                    buf,
                    "    <testcase name=\"passesCase{c}\" classname=\"{cls}\" time=\"0.003\"/>"
                )
                .unwrap();
            }
        }
        writeln!(buf, "    <system-out><![CDATA[suite {suite} started\nsuite {suite} finished\n]]></system-out>\n  </testsuite>").unwrap();
        count += cases - skipped;
        suite += 1;
        written += buf.len() as u64;
        w.write_all(&buf).unwrap();
    }
    writeln!(w, "</testsuites>").unwrap();
    w.flush().unwrap();
    (count, failing)
}

const JUNITPARSER_PEER: &str = r#"
import sys, time
from junitparser import JUnitXml, TestSuite, Failure, Error
t = time.perf_counter()
x = JUnitXml.fromfile(sys.argv[1])
suites = [x] if isinstance(x, TestSuite) else list(x)
count = 0
names = []
for s in suites:
    count += (s.tests or 0) - (s.skipped or 0)
    for c in s:
        if any(isinstance(r, (Failure, Error)) for r in c.result):
            names.append(f"{c.classname}.{c.name}" if c.classname else c.name)
print(time.perf_counter() - t, count, len(names))
"#;

fn junit_vs_junitparser(dir: &Path, mb: u64) {
    let path = dir.join("report.xml");
    let (count, failing) = write_junit(&path, mb * 1_000_000);
    let size = std::fs::metadata(&path).unwrap().len();
    // Bare quick-xml and ours, interleaved, best of RUNS each.
    let raw_read = || {
        let f = std::fs::File::open(&path).unwrap();
        let mut r =
            quick_xml::Reader::from_reader(std::io::BufReader::with_capacity(256 * 1024, f));
        let mut buf = Vec::new();
        let mut n = 0u64;
        loop {
            match r.read_event_into(&mut buf).unwrap() {
                quick_xml::events::Event::Eof => break,
                _ => n += 1,
            }
            buf.clear();
        }
        n
    };
    let (mut raw, mut ours) = (Duration::MAX, Duration::MAX);
    let (mut n, mut p) = (0, None);
    for _ in 0..RUNS {
        let (d, v) = best_of(1, raw_read);
        (raw, n) = (raw.min(d), v);
        let (d, v) = best_of(1, || junit::parse_file(&path, "report.xml").expect("parse"));
        (ours, p) = (ours.min(d), Some(v));
    }
    let p = p.expect("ran");
    assert_eq!(
        (p.count, p.names.len() as u64),
        (count, failing),
        "saphan disagrees with the generator"
    );
    println!(
        "junit-xml  quick-xml    {:>8.3} s  {:>7.0} MB/s  (bare event reading, {n} events, no checks)",
        raw.as_secs_f64(),
        mbps(size, raw)
    );
    println!(
        "junit-xml  saphan       {:>8.3} s  {:>7.0} MB/s  ({} tests, {} failing, {:.1} MB)",
        ours.as_secs_f64(),
        mbps(size, ours),
        p.count,
        p.names.len(),
        size as f64 / 1e6
    );
    println!(
        "junit-xml  ÷ quick-xml  {:>8.2}×  (our time over bare reading's)",
        ours.as_secs_f64() / raw.as_secs_f64()
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(JUNITPARSER_PEER)
        .arg(&path)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let s = String::from_utf8_lossy(&o.stdout);
            let mut it = s.split_whitespace();
            let secs: f64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
            let pc: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            let pf: u64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            println!(
                "junit-xml  junitparser  {:>8.3} s  {:>7.0} MB/s  ({pc} tests, {pf} failing)",
                secs,
                size as f64 / 1e6 / secs
            );
            println!(
                "junit-xml  ratio        {:>8.1}×  (goal ≥ 30×){}",
                secs / ours.as_secs_f64(),
                if (pc, pf) == (count, failing) {
                    ""
                } else {
                    "  [peer derived different values]"
                }
            );
        }
        Ok(o) => println!(
            "junit-xml  junitparser  SKIPPED: peer failed: {} — pip install 'junitparser>=5,<6'",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Err(e) => println!("junit-xml  junitparser  SKIPPED: python3: {e}"),
    }
}

/// A go test -json stream: packages of tests, each with RUN/PASS output
/// lines; every 5th test has two subtests; 2% fail. Returns (count, failing).
fn write_gojson(path: &Path, target_bytes: u64) -> (u64, u64) {
    let f = std::fs::File::create(path).expect("create stream");
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let (mut written, mut count, mut failing) = (0u64, 0u64, 0u64);
    let mut pkg = 0u64;
    let mut buf = Vec::with_capacity(256 * 1024);
    let ts = "2026-11-29T12:00:00.123456789Z";
    while written < target_bytes {
        buf.clear();
        let p = format!("example.com/service/internal/pkg{pkg}");
        writeln!(buf, r#"{{"Time":"{ts}","Action":"start","Package":"{p}"}}"#).unwrap();
        let mut pkg_failed = false;
        for t in 0..100u64 {
            let name = format!("TestHandler{t}");
            let fail = t % 50 == 13;
            writeln!(
                buf,
                r#"{{"Time":"{ts}","Action":"run","Package":"{p}","Test":"{name}"}}"#
            )
            .unwrap();
            writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{name}","Output":"=== RUN   {name}\n"}}"#).unwrap();
            if t % 5 == 0 {
                for s in ["ok_input", "edge_case"] {
                    let sub = format!("{name}/{s}");
                    writeln!(
                        buf,
                        r#"{{"Time":"{ts}","Action":"run","Package":"{p}","Test":"{sub}"}}"#
                    )
                    .unwrap();
                    writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{sub}","Output":"=== RUN   {sub}\n"}}"#).unwrap();
                    writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{sub}","Output":"    --- PASS: {sub} (0.00s)\n"}}"#).unwrap();
                    writeln!(buf, r#"{{"Time":"{ts}","Action":"pass","Package":"{p}","Test":"{sub}","Elapsed":0}}"#).unwrap();
                }
            }
            if fail {
                failing += 1;
                pkg_failed = true;
                writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{name}","Output":"    handler_test.go:42: expected status 200, got 500\n"}}"#).unwrap();
                writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{name}","Output":"--- FAIL: {name} (0.01s)\n"}}"#).unwrap();
                writeln!(buf, r#"{{"Time":"{ts}","Action":"fail","Package":"{p}","Test":"{name}","Elapsed":0.01}}"#).unwrap();
            } else {
                writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Test":"{name}","Output":"--- PASS: {name} (0.00s)\n"}}"#).unwrap();
                writeln!(buf, r#"{{"Time":"{ts}","Action":"pass","Package":"{p}","Test":"{name}","Elapsed":0}}"#).unwrap();
            }
            count += 1;
        }
        let (word, act) = if pkg_failed {
            ("FAIL", "fail")
        } else {
            ("ok", "pass")
        };
        writeln!(buf, r#"{{"Time":"{ts}","Action":"output","Package":"{p}","Output":"{word}\t{p}\t0.123s\n"}}"#).unwrap();
        writeln!(
            buf,
            r#"{{"Time":"{ts}","Action":"{act}","Package":"{p}","Elapsed":0.123}}"#
        )
        .unwrap();
        pkg += 1;
        written += buf.len() as u64;
        w.write_all(&buf).unwrap();
    }
    w.flush().unwrap();
    (count, failing)
}

fn gojson_vs_gotestsum(dir: &Path, mb: u64) {
    let path = dir.join("stream.jsonl");
    let (count, failing) = write_gojson(&path, mb * 1_000_000);
    let size = std::fs::metadata(&path).unwrap().len();
    let (ours, p) = best_of(RUNS, || gojson::parse_file(&path, "stream").expect("parse"));
    assert_eq!(
        (p.count, p.names.len() as u64),
        (count, failing),
        "saphan disagrees with the generator"
    );
    println!(
        "go-json    saphan       {:>8.3} s  {:>7.0} MB/s  ({} tests, {} failing, {:.1} MB; goal ≥ 550 MB/s on the 2-core build VM)",
        ours.as_secs_f64(),
        mbps(size, ours),
        p.count,
        p.names.len(),
        size as f64 / 1e6
    );
    let junit_out = dir.join("gotestsum-junit.xml");
    let run = || {
        let t = Instant::now();
        let o = Command::new("gotestsum")
            .arg("--format")
            .arg("dots")
            .arg("--junitfile")
            .arg(&junit_out)
            .arg("--raw-command")
            .arg("--")
            .arg("cat")
            .arg(&path)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        (t.elapsed(), o)
    };
    match run() {
        (_, Err(e)) => println!("go-json    gotestsum    SKIPPED: {e} (apt-get install gotestsum)"),
        (_, Ok(_)) => {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                best = best.min(run().0);
            }
            println!(
                "go-json    gotestsum    {:>8.3} s  {:>7.0} MB/s  (wall clock, incl. writing its JUnit file)",
                best.as_secs_f64(),
                mbps(size, best)
            );
            println!(
                "go-json    ratio        {:>8.1}×  (goal ≥ 5×)",
                best.as_secs_f64() / ours.as_secs_f64()
            );
        }
    }
}

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn rss_child(path: &Path) {
    let before = vm_hwm_kib().unwrap_or(0);
    let t = Instant::now();
    let p = junit::parse_file(path, "big.xml").expect("parse");
    let secs = t.elapsed().as_secs_f64();
    let after = vm_hwm_kib().unwrap_or(0);
    println!("{before} {after} {secs} {} {}", p.count, p.names.len());
}

fn peak_rss(dir: &Path, gb: u64) {
    let path = dir.join("big.xml");
    let t = Instant::now();
    let (count, failing) = write_junit(&path, gb * 1_000_000_000);
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "peak RSS   generated {:.2} GB JUnit in {:.1} s",
        size as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    let exe = std::env::current_exe().expect("current exe");
    let o = Command::new(exe)
        .env(RSS_CHILD, &path)
        .output()
        .expect("child");
    let s = String::from_utf8_lossy(&o.stdout);
    let v: Vec<&str> = s.split_whitespace().collect();
    if !o.status.success() || v.len() != 5 {
        println!(
            "peak RSS   child failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    let before: f64 = v[0].parse().unwrap_or(0.0);
    let after: f64 = v[1].parse().unwrap_or(0.0);
    let secs: f64 = v[2].parse().unwrap_or(0.0);
    println!(
        "peak RSS   VmHWM {:.1} MiB while parsing ({:.1} MiB before), {:.2} s, {:.0} MB/s; {} tests, {} failing{}  (goal < 64 MiB)",
        after / 1024.0,
        before / 1024.0,
        secs,
        size as f64 / 1e6 / secs,
        v[3],
        v[4],
        if (v[3].parse::<u64>().ok(), v[4].parse::<u64>().ok()) == (Some(count), Some(failing)) {
            ""
        } else {
            "  [disagrees with the generator]"
        }
    );
    let _ = std::fs::remove_file(&path);
}
