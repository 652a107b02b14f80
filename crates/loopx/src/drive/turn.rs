//! One turn end to end (intent, agent, reading, settlement), and the host's
//! run of the success_check on an agent's claim.
//!
//! This file owns the processes, their environment, their logs and the
//! progress lines; every commit goes through `loopx_app::driver`, and what
//! the output means is `loopx_core::driver::classify`'s.

use super::agent::spawn_and_wait;
use super::ticker::Ticker;
use super::{progress, through_outages, Options, Target};
use anyhow::{Context as _, Result};
use loopx_app::driver::{self, NOT_STARTED};
use loopx_app::loop_dir::{LoopDir, Reading, DRIVER_LOGS};
use loopx_app::{clock, platform};
use loopx_core::digest::Digest;
use loopx_core::driver::classify::{self, Reading as OutputReading, END_OF_PROMPT};
use loopx_core::driver::provider::{Launcher, Structured};
use loopx_core::driver::session::TurnResult;
use loopx_core::driver::{Intent, Settlement, TurnOutcome};
use loopx_core::goal::Actor;
use loopx_core::ledger::CheckRun;
use loopx_store::failpoint;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Run the loop's `success_check` on a pending success claim and settle
/// it. `None` when no claim is pending.
pub fn verify_claim(dir: &LoopDir, root: &Path, timeout: Duration) -> Result<Option<bool>> {
    let ledger = through_outages(dir, None, "reading the ledger", || dir.read())?.ledger;
    let Some(iteration) = ledger.pending_claim else {
        return Ok(None);
    };
    let logs = driver::log_dir(dir)?;
    let name = driver::fresh_name(&format!("claim-{iteration}"));
    let log_name = format!("{DRIVER_LOGS}/{name}.check.log");
    let log = platform::create_private(&dir.path(&log_name))
        .with_context(|| format!("cannot create {log_name}"))?;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&ledger.config.success_check)
        .current_dir(root)
        .env("LOOPX_DIR", dir.root())
        .stdout(log.try_clone()?)
        .stderr(log);
    let turn = spawn_and_wait(command, None, timeout, &logs, &name);
    let _ = std::fs::remove_file(driver::record_path(&logs, &name));
    let turn = turn?;
    let check = CheckRun {
        command: ledger.config.success_check.clone(),
        exit_code: turn.exit_status,
        timed_out: turn.timed_out,
        log: log_name,
        duration_ms: turn.elapsed.as_millis() as u64,
    };
    Ok(Some(through_outages(
        dir,
        None,
        "settling the success claim",
        || driver::settle_claim(dir, iteration, check.clone(), &name),
    )?))
}

/// The fingerprint of the candidate pending review, if any.
fn staged(dir: &LoopDir) -> Result<Option<Digest>> {
    Ok(loopx_app::focus::candidate::slot(dir)?
        .and_then(|slot| slot.pending)
        .map(|held| held.fingerprint))
}

/// Run one turn end to end: intent, agent, reading, charge, settlement.
pub fn turn(
    dir: &LoopDir,
    options: &Options,
    root: &Path,
    logs: &Path,
    provider_name: &str,
    launcher: Option<&Launcher>,
    before: &Reading,
) -> Result<(TurnResult, OutputReading, String)> {
    let iteration = before.ledger.spent.iterations + 1;
    let prompt = through_outages(dir, Some(provider_name), "writing the prompt", || {
        dir.task_body(&options.goal_id, &Actor::Agent(options.agent_id.clone()))
    })?;
    let staged_before = through_outages(dir, Some(provider_name), "reading the candidate", || {
        staged(dir)
    })?;
    let dispatch_id = driver::fresh_name(&format!("d{iteration}"));
    let log_name = format!("{DRIVER_LOGS}/{dispatch_id}.log");
    failpoint::reached("drive.before_intent");
    // Recorded before the intent: an open intent without a record means
    // someone removed it, never that the agent had not started.
    driver::write_record(logs, &dispatch_id, NOT_STARTED)
        .with_context(|| format!("cannot record dispatch {dispatch_id} in {}", logs.display()))?;
    // Built once: a retry after an outage commits this very intent under
    // the same operation id, so a lost reply replays instead of doubling.
    let intent = Intent {
        dispatch_id: dispatch_id.clone(),
        iteration,
        provider: provider_name.to_owned(),
        prompt_digest: Digest::of_bytes(prompt.as_bytes()).to_string(),
        ledger_revision: before.revision,
        iterations_before: before.ledger.spent.iterations,
        workspace: driver::workspace(root),
        log: log_name.clone(),
        started_at: clock::now(),
    };
    through_outages(
        dir,
        Some(provider_name),
        "recording the turn's intent",
        || driver::intend(dir, intent.clone()),
    )?;
    failpoint::reached("drive.after_intent");

    // Created exclusively: never written through a planted file or symlink.
    let mut log = platform::create_private(&dir.path(&log_name))
        .with_context(|| format!("cannot create {log_name}"))?;
    writeln!(log, "{prompt}\n{END_OF_PROMPT}")?;
    let (mut command, stdin) = match (launcher, &options.target) {
        (Some(launcher), _) => {
            let mut command = Command::new(launcher.binary);
            command.args(launcher.argv(&prompt, &root.display().to_string()));
            (command, None)
        }
        (None, Target::Command(cmd)) => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(cmd);
            (command, Some(prompt.clone()))
        }
        (None, Target::Providers(_)) => unreachable!("a provider turn has a launcher"),
    };
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(exe_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    command
        .current_dir(root)
        .env("PATH", path)
        .env("AUTOLOOP_DRIVER", "1")
        .env("LOOPX_DIR", dir.root())
        .env("LOOPX_AGENT_ID", &options.agent_id)
        .env("LOOPX_DISPATCH_ID", &dispatch_id)
        .env("AAS_AUTOLOOP_PRIMARY_PROVIDER", provider_name)
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    drop(log);
    progress(&format!(
        "iteration {iteration} [{provider_name}] started ({dispatch_id})"
    ));
    let ticker = Ticker::start(format!("iteration {iteration} [{provider_name}] running"));
    let turn = spawn_and_wait(
        command,
        stdin,
        options.iteration_timeout,
        logs,
        &dispatch_id,
    );
    drop(ticker);
    let turn = turn?;
    failpoint::reached("drive.after_agent");

    let output = driver::agent_log(dir, &log_name);
    let structured = launcher.map_or(Structured::Text, |l| l.structured);
    let read = classify::read(classify::agent_output(&output), structured, clock::now());
    // The agent has run: from here on the turn is only ever settled,
    // however long the store takes to come back, never run again.
    let after = through_outages(
        dir,
        Some(provider_name),
        "reading the turn's result",
        || dir.read(),
    )?;
    let staged_after = through_outages(dir, Some(provider_name), "reading the candidate", || {
        staged(dir)
    })?;
    // In enforce mode an agent's report is staged, not banked: a turn that
    // staged a new candidate did its part (the review decides the rest).
    let advanced = after.ledger.spent.iterations > before.ledger.spent.iterations
        || (staged_after.is_some() && staged_after != staged_before);
    // The host's completion gate, before the settlement: a candidate this
    // turn staged is held if the turn ran out of time.
    let quarantined = through_outages(
        dir,
        Some(provider_name),
        "checking what the turn staged",
        || driver::quarantine_after_turn(dir, &dispatch_id, turn.timed_out),
    )?;
    if let Some(fingerprint) = &quarantined {
        progress(&format!(
            "turn {iteration} ran out of time after staging candidate {fingerprint}: quarantined; no review or new turn until a person inspects it (`loopx goal-focus recover-quarantine --dir {}`)",
            dir.display()
        ));
    }
    let result = TurnResult::of(turn.timed_out, turn.exit_status, advanced, &read);
    let settlement = Settlement {
        dispatch_id: dispatch_id.clone(),
        iteration,
        provider: provider_name.to_owned(),
        outcome: TurnOutcome::from(result),
        exit_status: turn.exit_status,
        usage: read.usage.clone(),
        settled_at: clock::now(),
        note: read.reported_error.clone().unwrap_or_default(),
    };
    through_outages(
        dir,
        Some(provider_name),
        "charging and settling the turn",
        || driver::settle_turn(dir, &read, settlement.clone()),
    )?;
    let _ = std::fs::remove_file(driver::record_path(logs, &dispatch_id));
    failpoint::reached("drive.after_settle");
    driver::turn_finished(dir);
    let usd = if read.usage.usd > 0.0 {
        format!(", ${:.4}", read.usage.usd)
    } else {
        String::new()
    };
    let why = match result {
        TurnResult::Advanced => String::new(),
        failed => format!(": {}; see {log_name}", failed.sentence()),
    };
    progress(&format!(
        "iteration {iteration} [{provider_name}] {} in {:.1}s (exit {}{usd}){why}; {} left",
        TurnOutcome::from(result).label(),
        turn.elapsed.as_secs_f64(),
        turn.exit_status
            .map_or("killed".to_owned(), |c| c.to_string()),
        loopx_core::words::count(after.ledger.remaining_iterations(), "iteration")
    ));
    Ok((result, read, log_name))
}
