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
//!
//! Where this machine can contain a process (root, bubblewrap, the cgroup
//! hierarchies), the same turns run again as a pinned provider under
//! `--transport trusted-local`, and the difference of the two gaps is what
//! containment adds per turn: attesting the binary again, making the
//! cgroup scope, the gate, bubblewrap, and removing the scope.

use crate::measure::Summary;
use crate::Result;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub fn run(loopx: &Path, turns: usize, work: &Path) -> Result<String> {
    let plain = gaps(loopx, turns, &work.join("unconfined-0"), false)?;
    let mut out = plain.table;
    if let Err(why) = gaps(loopx, 2, &work.join("probe"), true) {
        out += &format!("\nContainment not measured here: {why}\n");
        return Ok(out);
    }
    // Interleaved rounds, so a machine that gets busier or quieter during
    // the run moves both sides alike; the medians of the rounds compare.
    const ROUNDS: usize = 5;
    let (mut unconfined, mut contained) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        unconfined.push(
            gaps(
                loopx,
                turns,
                &work.join(format!("unconfined-{}", round + 1)),
                false,
            )?
            .gap_ms,
        );
        contained.push(gaps(loopx, turns, &work.join(format!("contained-{round}")), true)?.gap_ms);
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (unconfined, contained) = (median(&mut unconfined), median(&mut contained));
    out += &format!(
        "\nUnconfined against `--transport trusted-local` (a pinned provider script: attestation again, its cgroup scope, the gate, bubblewrap, the scope removed), {ROUNDS} interleaved rounds of {turns} turns, median of the rounds' median gaps: **{unconfined:.2} ms** against **{contained:.2} ms**, so containment adds **{:.2} ms** per turn (target under 50 ms).\n",
        contained - unconfined
    );
    Ok(out)
}

/// One run's report, and its median gap.
struct Gaps {
    table: String,
    gap_ms: f64,
}

/// `turns` turns of the no-op agent, run as `--cmd` or, `contained`, as a
/// pinned `claude` under trusted-local.
fn gaps(loopx: &Path, turns: usize, work: &Path, contained: bool) -> Result<Gaps> {
    std::fs::create_dir_all(work)?;
    let dir = work.join("loop");
    let stamps = work.join("stamps");
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin)?;
    // Named as the provider, so the contained run can pin it.
    let agent = bin.join("claude");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\necho \"start $(date +%s%N)\" >> {s}\nloopx append-iteration --mode monitor --objective noop --decision continue >/dev/null\necho \"end $(date +%s%N)\" >> {s}\n",
            s = stamps.display()
        ),
    )?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))?;
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
    eprintln!(
        "loopx-bench: drive: {turns} turns of a no-op agent{}",
        if contained {
            " under trusted-local"
        } else {
            ""
        }
    );
    let mut drive = Command::new(loopx);
    drive
        .args(["drive", "--dir"])
        .arg(&dir)
        .arg("--root")
        .arg(work)
        .args(["--max-iterations", &turns.to_string()])
        // The bench's loop is throwaway: keep it out of the user's registry
        // (the all-loops page would list it as gone once the bench ends).
        .env("LOOPX_REGISTRY_DIR", work.join("registry"));
    if contained {
        let attest = Command::new(loopx)
            .args(["attest", "--provider", "claude", "--json", "--bin"])
            .arg(&agent)
            .output()?;
        if !attest.status.success() {
            return Err(String::from_utf8_lossy(&attest.stderr)
                .trim()
                .to_owned()
                .into());
        }
        let exports: serde_json::Value = serde_json::from_slice(&attest.stdout)?;
        for line in exports["exports"].as_array().into_iter().flatten() {
            let Some((name, value)) = line
                .as_str()
                .and_then(|l| l.strip_prefix("export"))
                .and_then(|l| l.trim().split_once('='))
            else {
                continue;
            };
            drive.env(name, value.trim_matches('\''));
        }
        let path = format!(
            "{}:{}",
            loopx
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            std::env::var("PATH").unwrap_or_default()
        );
        drive
            .env("AAS_AUTOLOOP_ATTESTED_MODEL_CLAUDE", "bench")
            .env("PATH", path)
            .args(["--provider", "claude", "--transport", "trusted-local"]);
    } else {
        drive.args(["--cmd", &format!("sh {}", agent.display())]);
    }
    let started = Instant::now();
    let drive = drive.output()?;
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
    Ok(Gaps {
        table: out,
        gap_ms: gap.median_ms,
    })
}
