//! The saphan-probe image's output contract (written by
//! `images/probe/src/main.rs`), and its one parser.
//!
//! The container's stdout must be, line by line:
//!
//! ```text
//! SAPHAN-PROBE-RAN
//! kernel=<non-empty>
//! arch=<non-empty>
//! cpus=<integer > 0>
//! memory_bytes=<integer > 0>
//! cgroup=<v1 | v2>
//! SAPHAN-PROBE-OK
//! ```
//!
//! Each marker exactly once, `RAN` first and `OK` last; between them only
//! `key=value` facts, each key once. Anything else is a failed probe that
//! names what was wrong.

use serde_json::{Map, Value};

/// The first line of a run.
pub const MARKER_RAN: &str = "SAPHAN-PROBE-RAN";
/// The last line of a run whose facts are all positive.
pub const MARKER_OK: &str = "SAPHAN-PROBE-OK";

/// The facts the image reports, all positive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFacts {
    /// Kernel release as seen inside the container (the host's kernel).
    pub kernel: String,
    /// Machine architecture (`x86_64`, `aarch64`).
    pub arch: String,
    /// CPUs the container may run on.
    pub cpus: u64,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// `v1` or `v2`.
    pub cgroup: String,
}

impl VmFacts {
    /// The facts as a JSON object (for the capability row's `detail`).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("kernel".into(), self.kernel.clone().into());
        m.insert("arch".into(), self.arch.clone().into());
        m.insert("cpus".into(), self.cpus.into());
        m.insert("memory_bytes".into(), self.memory_bytes.into());
        m.insert("cgroup".into(), self.cgroup.clone().into());
        m
    }
}

/// Parse the container's stdout. `Err` says, in one sentence, what was wrong.
pub fn parse(stdout: &str) -> Result<VmFacts, String> {
    let lines: Vec<&str> = stdout
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let count = |m: &str| lines.iter().filter(|l| **l == m).count();
    let (ran, ok) = (count(MARKER_RAN), count(MARKER_OK));
    if ran == 0 {
        return Err(format!("the output lacks the {MARKER_RAN} marker"));
    }
    if ok == 0 {
        let failed = lines.iter().find(|l| l.starts_with("SAPHAN-PROBE-FAILED"));
        return Err(match failed {
            Some(f) => format!("the output lacks the {MARKER_OK} marker (the image said `{f}`)"),
            None => format!("the output lacks the {MARKER_OK} marker"),
        });
    }
    if ran > 1 || ok > 1 {
        return Err(format!(
            "the output carries {MARKER_RAN} {ran} times and {MARKER_OK} {ok} times; each must appear once"
        ));
    }
    if lines.first() != Some(&MARKER_RAN) || lines.last() != Some(&MARKER_OK) {
        return Err(format!(
            "the markers are out of order: {MARKER_RAN} must be the first line and {MARKER_OK} the last"
        ));
    }
    let mut facts: std::collections::BTreeMap<&str, &str> = Default::default();
    for l in &lines[1..lines.len() - 1] {
        let Some((k, v)) = l.split_once('=') else {
            return Err(format!(
                "line `{l}` between the markers is not a key=value fact"
            ));
        };
        if facts.insert(k.trim(), v.trim()).is_some() {
            return Err(format!("the fact `{}` appears twice", k.trim()));
        }
    }
    let text = |k: &str| -> Result<String, String> {
        match facts.get(k) {
            None => Err(format!("the fact `{k}` is missing")),
            Some(&"") => Err(format!("the fact `{k}` is empty")),
            Some(v) => Ok(v.to_string()),
        }
    };
    let positive = |k: &str| -> Result<u64, String> {
        let v = text(k)?;
        match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("the fact `{k}={v}` is not a positive integer")),
        }
    };
    let cgroup = text("cgroup")?;
    if cgroup != "v1" && cgroup != "v2" {
        return Err(format!("the fact `cgroup={cgroup}` is neither v1 nor v2"));
    }
    Ok(VmFacts {
        kernel: text("kernel")?,
        arch: text("arch")?,
        cpus: positive("cpus")?,
        memory_bytes: positive("memory_bytes")?,
        cgroup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "SAPHAN-PROBE-RAN\nkernel=6.1.0\narch=x86_64\ncpus=2\nmemory_bytes=1024\ncgroup=v2\nSAPHAN-PROBE-OK\n";

    #[test]
    fn good_output_parses() {
        let f = parse(GOOD).unwrap();
        assert_eq!(f.cpus, 2);
        assert_eq!(f.memory_bytes, 1024);
        assert_eq!(f.to_map()["cgroup"], "v2");
    }

    #[test]
    fn each_defect_is_named() {
        let cases: &[(&str, &str)] = &[
            ("SAPHAN-PROBE-RAN\n", "lacks the SAPHAN-PROBE-OK"),
            ("kernel=1\nSAPHAN-PROBE-OK\n", "lacks the SAPHAN-PROBE-RAN"),
            (
                "SAPHAN-PROBE-OK\nkernel=6\narch=x\ncpus=1\nmemory_bytes=1\ncgroup=v1\nSAPHAN-PROBE-RAN\n",
                "out of order",
            ),
            (
                "SAPHAN-PROBE-RAN\nSAPHAN-PROBE-RAN\nSAPHAN-PROBE-OK\n",
                "each must appear once",
            ),
            (
                "SAPHAN-PROBE-RAN\nkernel=6\narch=x\ncpus=0\nmemory_bytes=1\ncgroup=v1\nSAPHAN-PROBE-OK\n",
                "`cpus=0` is not a positive",
            ),
            (
                "SAPHAN-PROBE-RAN\nkernel=6\narch=x\ncpus=1\nmemory_bytes=-5\ncgroup=v1\nSAPHAN-PROBE-OK\n",
                "`memory_bytes=-5`",
            ),
            (
                "SAPHAN-PROBE-RAN\nkernel=\narch=x\ncpus=1\nmemory_bytes=1\ncgroup=v1\nSAPHAN-PROBE-OK\n",
                "`kernel` is empty",
            ),
            (
                "SAPHAN-PROBE-RAN\narch=x\ncpus=1\nmemory_bytes=1\ncgroup=v1\nSAPHAN-PROBE-OK\n",
                "`kernel` is missing",
            ),
            (
                "SAPHAN-PROBE-RAN\nhello\nSAPHAN-PROBE-OK\n",
                "not a key=value",
            ),
            (
                "SAPHAN-PROBE-RAN\nkernel=6\narch=x\ncpus=1\nmemory_bytes=1\ncgroup=v3\nSAPHAN-PROBE-OK\n",
                "neither v1 nor v2",
            ),
            (
                "SAPHAN-PROBE-RAN\ncpus=1\nSAPHAN-PROBE-FAILED not measured: kernel\n",
                "the image said",
            ),
            ("", "lacks the SAPHAN-PROBE-RAN"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
