//! The `panel` suite: what `loopx panel --phase result_review` costs on top
//! of the review it hands to the judge.
//!
//! An enforce-mode loop stages one candidate per run; a fake `codex`
//! reviewer (a shell script that answers a passing `result_review.v1` at
//! once) reviews it through the real binary. Each run also stages a second
//! candidate and banks it with `goal-focus review --file` (the judge and
//! the atomic finalization alone), and runs the fake reviewer by itself.
//! The panel's own overhead is the panel's time minus those two: the
//! attempt's two commits, the brief, the private artifacts (fsynced), the
//! process group, the driver lock and the bounded capture. Not measured: a
//! real reviewer's model time, which dwarfs all of it.

use crate::measure::Summary;
use crate::Result;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ANSWER: &str = r#"{"schema":"result_review.v1","candidate_fingerprint":"FP","reviewer":{"provider":"codex"},"verdict":"pass","claims":[{"claim_id":"c1","status":"supported","evidence_paths":["notes/b.md"]}],"obligations":[],"inspected_paths":["notes/b.md"]}"#;

pub fn run(loopx: &Path, runs: usize, work: &Path) -> Result<String> {
    let bin = work.join("bin");
    let dir = work.join("loop");
    std::fs::create_dir_all(&bin)?;
    let reviewer = bin.join("codex");
    let answer = ANSWER.replace("FP", "$fp").replace('"', "\\\"");
    std::fs::write(
        &reviewer,
        format!("#!/bin/sh\nfp=$(printf '%s' \"$*\" | grep -o 'sha256:[0-9a-f]\\{{64\\}}' | head -n1)\necho \"{answer}\"\n"),
    )?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&reviewer, std::fs::Permissions::from_mode(0o755))?;
    }
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let loopx_in = |args: &[&str]| {
        let mut command = Command::new(loopx);
        command
            .args(args)
            .env("PATH", &path)
            .env("AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS", "allow")
            .env("LOOPX_REGISTRY_DIR", work.join("registry"))
            .env_remove(loopx_app::driver::env::LOOP_DIR)
            .env_remove("LOOPX_STORE")
            .stdin(Stdio::null());
        command
    };
    // One run of `loopx args`, which must succeed: its stdout as JSON (or
    // null) and its wall time, spawn to exit.
    let checked = |args: &[&str]| -> Result<(serde_json::Value, Duration)> {
        let started = Instant::now();
        let output = loopx_in(args).output()?;
        let elapsed = started.elapsed();
        if !output.status.success() {
            return Err(format!(
                "`loopx {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            )
            .into());
        }
        let json = serde_json::from_slice(&output.stdout).unwrap_or_default();
        Ok((json, elapsed))
    };
    let d = dir.to_str().ok_or("the work directory is not UTF-8")?;
    let most = (2 * runs + 1).to_string();
    checked(&[
        "init",
        "--dir",
        d,
        "--goal",
        "measure the panel",
        "--success-criteria",
        "numbers",
        "--max-wall",
        "0",
        "--max-iterations",
        &most,
        "--goal-focus-mode",
        "enforce",
    ])?;
    std::fs::create_dir_all(dir.join("notes"))?;
    std::fs::write(dir.join("notes/b.md"), "lemma B holds for n <= 4\n")?;
    let stage = || -> Result<String> {
        let (staged, _) = checked(&[
            "append-iteration",
            "--dir",
            d,
            "--mode",
            "bounded-research",
            "--objective",
            "o",
            "--decision",
            "continue",
            "--executor-provider",
            "claude",
            "--executor",
            "claude",
            "--claim-id",
            "c1",
            "--claim-evidence",
            "c1=notes/b.md",
            "--json",
        ])?;
        Ok(staged["candidate_fingerprint"]
            .as_str()
            .ok_or("staging printed no fingerprint")?
            .to_owned())
    };
    let timed = |args: &[&str]| checked(args).map(|(_, elapsed)| elapsed);
    eprintln!("loopx-bench: panel: {runs} result reviews by the panel and {runs} by hand");
    let (mut panel, mut review, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    let file = work.join("review.json");
    for _ in 0..runs {
        stage()?;
        panel.push(timed(&["panel", "--dir", d, "--phase", "result_review"])?);
        let fingerprint = stage()?;
        std::fs::write(&file, ANSWER.replace("FP", &fingerprint))?;
        let f = file.to_str().ok_or("the work directory is not UTF-8")?;
        review.push(timed(&[
            "goal-focus",
            "review",
            "--dir",
            d,
            "--candidate-fingerprint",
            &fingerprint,
            "--file",
            f,
        ])?);
        let started = Instant::now();
        Command::new(&reviewer)
            .args(["exec", &format!("Candidate fingerprint: {fingerprint}")])
            .stdout(Stdio::null())
            .status()?;
        alone.push(started.elapsed());
    }
    let (panel, review, alone) = (
        Summary::of(&panel),
        Summary::of(&review),
        Summary::of(&alone),
    );
    let mut out = Summary::table_header("per result review", "runs");
    out += &panel.table_row("`loopx panel --phase result_review` (one instant fake reviewer)");
    out += &review.table_row("`loopx goal-focus review --file` (judge and finalization alone)");
    out += &alone.table_row("the fake reviewer alone (`sh` + `grep`)");
    out += &format!(
        "\nThe panel's own overhead per review, panel minus review minus the reviewer: **{:.2} ms** median.\n",
        panel.median_ms - review.median_ms - alone.median_ms
    );
    Ok(out)
}
