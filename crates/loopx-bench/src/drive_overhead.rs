//! The `drive` suite: the driver's own cost per turn.
//!
//! A real `loopx drive` runs N turns of a no-op agent whose whole job is one
//! `loopx append-iteration`. The agent stamps the clock when it starts and
//! when it is done; the driver's overhead for a turn is the gap between one
//! agent's end stamp and the next agent's start stamp: settling the turn,
//! re-checking the stop arbiter, rendering the next prompt, committing the
//! next intent, creating its log and spawning the process group. The
//! shell's own start-up sits inside that gap too, so the suite also times
//! `sh -c 'date'` alone and reports the gap without it.

use crate::measure::Summary;
use crate::Result;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub fn run(loopx: &Path, turns: usize, work: &Path) -> Result<String> {
    std::fs::create_dir_all(work)?;
    let dir = work.join("loop");
    let stamps = work.join("stamps");
    let agent = work.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\necho \"start $(date +%s%N)\" >> {s}\nloopx append-iteration --mode monitor --objective noop --decision continue >/dev/null\necho \"end $(date +%s%N)\" >> {s}\n",
            s = stamps.display()
        ),
    )?;
    let status = Command::new(loopx)
        .args(["init", "--dir"])
        .arg(&dir)
        .args([
            "--goal",
            "measure the driver",
            "--success-criteria",
            "numbers",
            "--max-wall",
            "0",
        ])
        .args(["--max-iterations", &(turns + 1).to_string()])
        .output()?;
    if !status.status.success() {
        return Err(format!("init failed: {}", String::from_utf8_lossy(&status.stderr)).into());
    }
    eprintln!("loopx-bench: drive: {turns} turns of a no-op agent");
    let started = Instant::now();
    let drive = Command::new(loopx)
        .args(["drive", "--dir"])
        .arg(&dir)
        .arg("--root")
        .arg(work)
        .args([
            "--cmd",
            &format!("sh {}", agent.display()),
            "--max-iterations",
            &turns.to_string(),
        ])
        // The bench's loop is throwaway: keep it out of the user's registry
        // (the all-loops page would list it as gone once the bench ends).
        .env("LOOPX_REGISTRY_DIR", work.join("registry"))
        .output()?;
    let total = started.elapsed();
    if !drive.status.success() {
        return Err(format!("drive failed: {}", String::from_utf8_lossy(&drive.stderr)).into());
    }
    let text = std::fs::read_to_string(&stamps)?;
    let parse = |prefix: &str| -> Vec<u128> {
        text.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    };
    let (starts, ends) = (parse("start "), parse("end "));
    if starts.len() != turns || ends.len() != turns {
        return Err(format!(
            "expected {turns} stamped turns, found {} starts and {} ends",
            starts.len(),
            ends.len()
        )
        .into());
    }
    let gaps: Vec<Duration> = (1..turns)
        .map(|i| Duration::from_nanos((starts[i] - ends[i - 1]) as u64))
        .collect();
    let agent: Vec<Duration> = (0..turns)
        .map(|i| Duration::from_nanos((ends[i] - starts[i]) as u64))
        .collect();
    let shell: Vec<Duration> = (0..turns)
        .map(|_| {
            let t = Instant::now();
            let _ = Command::new("sh")
                .arg("-c")
                .arg("date +%s%N >/dev/null")
                .status();
            t.elapsed()
        })
        .collect();
    let (gap, agent, shell) = (Summary::of(&gaps), Summary::of(&agent), Summary::of(&shell));
    let mut out = Summary::table_header("per turn", "samples");
    out += &gap.table_row("driver gap between turns (agent end to next agent start)");
    out += &agent.table_row("the no-op agent itself (one `loopx append-iteration`)");
    out += &shell.table_row("`sh -c 'date'` start-up, inside the gap");
    out += &format!(
        "\nDriver overhead per turn, gap minus the shell's start-up: **{:.2} ms** median (target under 20 ms). Whole run: {turns} turns in {:.2} s.\n",
        gap.median_ms - shell.median_ms,
        total.as_secs_f64()
    );
    Ok(out)
}
