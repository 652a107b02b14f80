//! The `move` suite: `loopx migrate --from-dir D --store URL`, a SQLite
//! loop moved into PostgreSQL, timed end to end on seeded ledgers.
//!
//! For each size it seeds one loop directory (see [`crate::seed`]), then
//! for each run creates a fresh database on the `--store` server, times the
//! whole command (open, audit of the source, schema, the one-transaction
//! copy, and the verification that audits both sides again) and drops the
//! database. Reports the median and the journal entries moved per second.
//! It owns no rule; it is not run by `cargo test`.

use crate::measure::{time_once, Summary};
use crate::{claims, seed, Result};
use std::fmt::Write as _;
use std::path::Path;

pub fn run(loopx: &Path, url: &str, sizes: &[u64], runs: usize, work: &Path) -> Result<String> {
    let mut out = String::from(
        "## loopx migrate --from-dir: a SQLite loop moved into PostgreSQL (loopback)\n\n\
         | ledger iterations | journal entries | runs | median ms | min ms | entries/s (median) |\n|---:|---:|---:|---:|---:|---:|\n",
    );
    for &size in sizes {
        let dir = work.join(size.to_string());
        eprintln!(
            "loopx-bench: move: seeding {size} iterations in {}",
            dir.display()
        );
        seed::seed(&dir, size)?;
        let dir_text = dir.to_str().ok_or("the temporary directory is not UTF-8")?;
        let mut times = Vec::with_capacity(runs);
        for run in 0..runs {
            let name = format!("loopx_bench_move_{}_{size}_{run}", std::process::id());
            let target = claims::fresh_database(url, &name)?;
            times.push(time_once(
                loopx,
                &["migrate", "--from-dir", dir_text, "--store", &target],
            )?);
            claims::drop_database(url, &name)?;
        }
        // The seed writes the init and one entry per iteration.
        let entries = size + 1;
        let summary = Summary::of(&times);
        writeln!(
            out,
            "| {size} | {entries} | {runs} | {:.1} | {:.1} | {:.0} |",
            summary.median_ms,
            summary.min_ms,
            entries as f64 / (summary.median_ms / 1000.0)
        )?;
    }
    Ok(out)
}
