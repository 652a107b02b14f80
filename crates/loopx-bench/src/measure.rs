//! Spawning the binary, timing it, and summarising the timings.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Result;

/// The wall time of one run of `loopx args...`, from spawn to exit.
/// Fails if the process does not exit with status 0.
pub fn time_once(loopx: &Path, args: &[&str]) -> Result<Duration> {
    let started = Instant::now();
    let status = Command::new(loopx)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", loopx.display()))?;
    let elapsed = started.elapsed();
    if !status.success() {
        return Err(format!(
            "`{} {}` failed with {status}; re-run it by hand to see why",
            loopx.display(),
            args.join(" ")
        )
        .into());
    }
    Ok(elapsed)
}

/// `runs` timed runs of the same command.
pub fn time_runs(loopx: &Path, args: &[&str], runs: usize) -> Result<Vec<Duration>> {
    (0..runs).map(|_| time_once(loopx, args)).collect()
}

/// Run `loopx args...` and parse its `--json` stdout (untimed).
pub fn json_of(loopx: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let output = Command::new(loopx)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", loopx.display()))?;
    if !output.status.success() {
        return Err(format!(
            "`{} {}` failed with {}: {}",
            loopx.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Median, p95 and minimum of a set of timings, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median_ms: f64,
    pub p95_ms: f64,
    pub min_ms: f64,
    pub runs: usize,
}

impl Summary {
    /// Summarise by sorting: the median averages the two middle runs of an
    /// even count; p95 is the nearest-rank value (the ceil(0.95 n)-th).
    pub fn of(timings: &[Duration]) -> Summary {
        assert!(!timings.is_empty(), "at least one run to summarise");
        let mut ms: Vec<f64> = timings.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median_ms = if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        let rank = (n * 95).div_ceil(100).max(1);
        Summary {
            median_ms,
            p95_ms: ms[rank - 1],
            min_ms: ms[0],
            runs: n,
        }
    }

    /// The header of a table of summaries, with `what` in the first column.
    pub fn table_header(what: &str, count: &str) -> String {
        format!("| {what} | median ms | p95 ms | min ms | {count} |\n|---|---:|---:|---:|---:|\n")
    }

    /// This summary as a row of that table.
    pub fn table_row(&self, name: &str) -> String {
        format!(
            "| {name} | {:.2} | {:.2} | {:.2} | {} |\n",
            self.median_ms, self.p95_ms, self.min_ms, self.runs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().copied().map(Duration::from_millis).collect()
    }

    #[test]
    fn odd_count_median_is_the_middle_value() {
        let s = Summary::of(&ms(&[5, 1, 3]));
        assert_eq!((s.median_ms, s.min_ms, s.runs), (3.0, 1.0, 3));
    }

    #[test]
    fn even_count_median_averages_the_middle_pair() {
        assert_eq!(Summary::of(&ms(&[4, 1, 3, 2])).median_ms, 2.5);
    }

    #[test]
    fn p95_is_nearest_rank() {
        let twenty: Vec<u64> = (1..=20).collect();
        assert_eq!(Summary::of(&ms(&twenty)).p95_ms, 19.0);
        let thirty: Vec<u64> = (1..=30).collect();
        assert_eq!(Summary::of(&ms(&thirty)).p95_ms, 29.0);
        assert_eq!(Summary::of(&ms(&[7])).p95_ms, 7.0);
    }
}
