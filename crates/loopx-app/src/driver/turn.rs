//! The turn protocol, written once: intent → start → watch → capture →
//! classify → settle, whatever runs the process.
//!
//! Before the agent starts, the dispatch's intent is committed and its
//! record is on disk; the agent runs through a [`TurnRunner`]; its output
//! is read and classified (`loopx_core::driver::classify`); whether it
//! advanced is the core's rule ([`loopx_core::driver::turn_advanced`]);
//! its cost is charged and its dispatch settled in one commit. The host's
//! run of the `success_check` on an agent's claim follows the same shape.
//!
//! Not here: how the process runs (the runner), what to do next (the
//! core's step, asked by [`super::run`]), the words a person reads (the
//! adapter renders [`Progress`] lines).

use super::capture;
use super::env;
use super::options::{Options, Progress, Target};
use super::outage::through_outages;
use super::runner::{Output, Process, Record, TurnRunner};
use crate::containment::Containment;
use crate::loop_dir::{LoopDir, Reading, DRIVER_LOGS};
use crate::{clock, platform};
use anyhow::{Context as _, Result};
use loopx_core::digest::Digest;
use loopx_core::driver::capture::{OutputCap, Retention};
use loopx_core::driver::classify::{self, Reading as OutputReading, END_OF_PROMPT};
use loopx_core::driver::provider::{self, Launcher, Structured};
use loopx_core::driver::session::TurnResult;
use loopx_core::driver::stream::StreamWatch;
use loopx_core::driver::HostAttestation;
use loopx_core::driver::{turn_advanced, Intent, Settlement, TurnOutcome};
use loopx_core::goal::Actor;
use loopx_core::ledger::CheckRun;
use loopx_store::failpoint;
use std::borrow::Cow;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

/// What one turn came to.
pub struct Turn {
    pub result: TurnResult,
    /// Its output, read.
    pub read: OutputReading,
    /// Its log, relative to the loop directory.
    pub log: String,
}

/// Run the loop's `success_check` on a pending success claim and settle
/// it. `None` when no claim is pending.
pub fn verify_claim(
    dir: &LoopDir,
    root: &Path,
    timeout: Duration,
    cap: OutputCap,
    runner: &dyn TurnRunner,
    progress: &dyn Progress,
) -> Result<Option<bool>> {
    let ledger = through_outages(dir, None, "reading the ledger", progress, || dir.read())?.ledger;
    let Some(iteration) = ledger.pending_claim else {
        return Ok(None);
    };
    let name = crate::operation::fresh_name(&format!("claim-{iteration}"));
    // The owner's configured checks first, run on this HEAD: a claim is
    // refused while any of them is not met, whatever the success check
    // would say. Configuring them was the owner's consent to run them.
    let started = std::time::Instant::now();
    let say = |line: &str| progress.say(line);
    let checks = crate::goal::checks::run(dir, root, None, None, "completion gate", runner, &say)?;
    if platform::stop_signal().is_some() {
        // A check cut short by a stop proves nothing either way: the
        // claim stays pending for the next run to check.
        return Ok(None);
    }
    if let Some(first) = checks.criteria.iter().find(|c| !c.state.met()) {
        let failing = checks.not_met_words();
        let check = CheckRun {
            command: format!("configured checks: {}", failing.join(", ")),
            exit_code: Some(1),
            timed_out: false,
            log: first
                .last
                .as_ref()
                .map(|r| r.log.clone())
                .unwrap_or_default(),
            duration_ms: started.elapsed().as_millis() as u64,
        };
        return Ok(Some(through_outages(
            dir,
            None,
            "settling the success claim",
            progress,
            || super::settle_claim(dir, iteration, check.clone(), &name),
        )?));
    }
    let ran = super::host::run(
        dir,
        runner,
        super::host::HostCommand {
            program: "sh".into(),
            args: vec!["-c".into(), ledger.config.success_check.clone()],
            cwd: root.to_path_buf(),
            env: vec![(env::LOOP_DIR, dir.root().into())],
            env_removed: &[],
            timeout,
            cap,
            label: format!("claim-{iteration}"),
            kind: "check",
        },
    )?;
    let log_name = ran.log;
    let ran = ran.outcome?;
    if ran.stopped_by.is_some() {
        // A check cut short proves nothing either way: the claim stays
        // pending for the next run to check.
        return Ok(None);
    }
    let check = CheckRun {
        command: ledger.config.success_check.clone(),
        exit_code: ran.exit_status,
        timed_out: ran.timed_out,
        log: log_name,
        duration_ms: ran.elapsed.as_millis() as u64,
    };
    Ok(Some(through_outages(
        dir,
        None,
        "settling the success claim",
        progress,
        || super::settle_claim(dir, iteration, check.clone(), &name),
    )?))
}

/// Apply the driver logs' retention after a settled turn. A sweep that
/// fails costs disk, not the run: it is said, and tried again next turn.
fn sweep_logs(dir: &LoopDir, logs: &Path, progress: &dyn Progress) {
    let open = dir
        .driver()
        .ok()
        .and_then(|(_, state)| state.open.map(|intent| intent.log));
    if let Err(error) = capture::sweep_logs(logs, open.as_deref(), Retention::DEFAULT) {
        progress.say(&format!(
            "warning: old driver logs in {} could not be removed ({error}); they are tried again after the next turn",
            logs.display()
        ));
    }
}

/// The fingerprint of the candidate pending review, if any.
fn staged(dir: &LoopDir) -> Result<Option<Digest>> {
    Ok(crate::focus::candidate::slot(dir)?
        .and_then(|slot| slot.pending)
        .map(|held| held.fingerprint))
}

/// The turn's environment: the driver's PATH with this binary's directory
/// first (so the agent's `loopx` is this one), and where the turn reports.
fn agent_env(
    dir: &LoopDir,
    options: &Options,
    agent_id: &str,
    dispatch_id: &str,
    provider: &str,
) -> Result<Vec<(&'static str, OsString)>> {
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(exe_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    let mut vars = vec![
        ("PATH", path),
        (env::UNDER_DRIVER, "1".into()),
        (env::LOOP_DIR, dir.root().into()),
        (env::AGENT_ID, agent_id.into()),
        (env::DISPATCH_ID, dispatch_id.into()),
        (env::PRIMARY_PROVIDER, provider.into()),
    ];
    if let Some(store) = dir.store_override() {
        vars.push((env::STORE, store.into()));
    }
    vars.extend(crate::formal::agent_env(&options.formal));
    Ok(vars)
}

/// What every turn of a run shares: the loop, the run's options, where
/// turn logs go, how processes run and how progress is shown.
#[derive(Clone, Copy)]
pub struct TurnContext<'a> {
    pub dir: &'a LoopDir,
    pub options: &'a Options,
    pub logs: &'a Path,
    /// How the run's provider processes are contained.
    pub containment: &'a Containment,
    pub runner: &'a dyn TurnRunner,
    pub progress: &'a dyn Progress,
    /// The run's git snapshots of the workspace, when on.
    pub snapshots: Option<&'a crate::snapshot::Snapshots>,
    /// The synthesis of the target advice asked before this turn, when
    /// the panel gave one (loop-relative).
    pub advice: Option<&'a str>,
    /// A worker's turn (`drive --workers`); `None`: the loop's own turn
    /// in the project root.
    pub worker: Option<WorkerTurn<'a>>,
}

/// Where a worker's turn differs from the loop's own: its turn journal,
/// its agent id (its leases and notes), its worktree, its todo. What a
/// worker's turn achieved is its worktree's change, which the merge queue
/// judges; staging a Goal Focus candidate is the loop's own turns' job.
#[derive(Clone, Copy)]
pub struct WorkerTurn<'a> {
    pub stream: &'a str,
    pub agent_id: &'a str,
    pub worktree: &'a Path,
    pub todo_id: &'a str,
    /// The worktree's commit before the turn.
    pub head_before: &'a str,
    /// Commit what the turn left in the worktree; the head after. The
    /// turn advanced when it differs from `head_before`.
    pub commit: &'a dyn Fn() -> Result<String>,
}

/// Run one turn end to end: intent, agent, reading, charge, settlement.
pub fn run_turn(
    context: TurnContext<'_>,
    provider_name: &str,
    launcher: Option<&Launcher>,
    before: &Reading,
) -> Result<Turn> {
    let TurnContext {
        dir,
        options,
        logs,
        containment,
        runner,
        progress,
        snapshots,
        advice,
        worker,
    } = context;
    let root = worker.map_or(options.root.as_path(), |w| w.worktree);
    let stream = worker.map_or(loopx_core::driver::STREAM, |w| w.stream);
    let agent_id = worker.map_or(options.agent_id.as_str(), |w| w.agent_id);
    let iteration = before.ledger.spent.iterations + 1;
    let on = Some(provider_name);
    let prompt = through_outages(dir, on, "writing the prompt", progress, || {
        dir.task_body_with_panel(
            &options.goal_id,
            &Actor::Agent(agent_id.to_owned()),
            options.panel,
            advice,
            &options.formal,
        )
    })?;
    let prompt = match worker {
        Some(worker) => crate::workers::prompt(&prompt, worker.todo_id, worker.worktree),
        None => prompt,
    };
    let staged_before = match worker {
        Some(_) => None,
        None => through_outages(dir, on, "reading the candidate", progress, || staged(dir))?,
    };
    let label = match worker {
        Some(worker) => format!(
            "{} on todo {} [{provider_name}]",
            worker.agent_id, worker.todo_id
        ),
        None => format!("iteration {iteration} [{provider_name}]"),
    };
    let dispatch_id = crate::operation::fresh_name(&format!("d{iteration}"));
    let log_name = format!("{DRIVER_LOGS}/{dispatch_id}.log");
    // Under trusted-local the provider on disk is checked against its pins
    // and the closure attested at the start, and its scope made, before
    // the intent: a refusal leaves no open dispatch behind.
    let contained = match containment {
        Containment::Unconfined => None,
        Containment::TrustedLocal(contained) => {
            Some(contained.ready(provider_name, &dispatch_id, options.iteration_timeout)?)
        }
    };
    // The workspace as the turn finds it, before anything can change it.
    let snapshot_turn = match snapshots {
        Some(snapshots) => {
            let turn = 1 + through_outages(dir, on, "numbering the turn", progress, || {
                Ok(dir.driver()?.1.dispatches)
            })?;
            snapshots.before_turn(turn, &dispatch_id)?;
            Some((snapshots, turn))
        }
        None => None,
    };
    failpoint::reached("drive.before_intent");
    // Recorded before the intent: an open intent without a record means
    // someone removed it, never that the agent had not started.
    super::write_record(logs, &dispatch_id, super::NOT_STARTED)
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
        workspace: super::workspace(root),
        log: log_name.clone(),
        started_at: clock::now(),
    };
    through_outages(dir, on, "recording the turn's intent", progress, || {
        super::intend(dir, stream, intent.clone())
    })?;
    failpoint::reached("drive.after_intent");

    // Created exclusively: never written through a planted file or symlink.
    let mut log = platform::create_private(&dir.path(&log_name))
        .with_context(|| format!("cannot create {log_name}"))?;
    writeln!(log, "{prompt}\n{END_OF_PROMPT}")?;
    let mut env = agent_env(dir, options, agent_id, &dispatch_id, provider_name)?;
    if let Some(worker) = worker {
        env.push((env::TODO_ID, worker.todo_id.into()));
    }
    let (program, args, stdin) = match (launcher, &options.target) {
        // The pinned binary and model, never what PATH finds.
        (Some(launcher), _) if contained.is_some() => {
            let (attested, _) = contained.as_ref().expect("matched");
            let provider =
                provider::find(provider_name).context("a provider turn has a provider")?;
            // Checked when the run started (`run::check_endpoints`).
            let mut args = launcher.argv(&prompt, &root.display().to_string());
            args.extend(env::pin_args(provider).map_err(anyhow::Error::msg)?);
            let (program, args) = attested.command(args, &[]);
            (program, args, None)
        }
        (Some(launcher), _) => {
            // Checked when the run started (`run::check_endpoints`).
            let provider =
                provider::find(provider_name).context("a provider turn has a provider")?;
            let launch = provider::endpoint_launch(
                provider,
                launcher,
                &prompt,
                &root.display().to_string(),
                env::base_url(provider_name).as_deref(),
            )
            .map_err(anyhow::Error::msg)?;
            let mut args = launch.args;
            args.extend(env::pin_args(provider).map_err(anyhow::Error::msg)?);
            env.extend(
                launch
                    .env
                    .into_iter()
                    .map(|(name, value)| (name, value.into())),
            );
            (launcher.binary.into(), args, None)
        }
        (None, Target::Command(cmd)) => (
            "sh".into(),
            vec!["-c".to_owned(), cmd.clone()],
            Some(prompt.clone()),
        ),
        (None, Target::Providers(_)) => unreachable!("a provider turn has a launcher"),
    };
    // A contained turn's output is bounded by its limits.
    let cap = match &contained {
        Some((_, confinement)) => OutputCap::parse(&confinement.limits.output_bytes.to_string())
            .unwrap_or(options.output_cap),
        None => options.output_cap,
    };
    progress.say(&format!("{label} started ({dispatch_id})"));
    progress.running(Some(format!("{label} running")));
    let structured = launcher.map_or(Structured::Text, |l| l.structured);
    let mut watch = super::watch::TurnWatch {
        dir,
        progress,
        dispatch_id: &dispatch_id,
        stream,
        label: label.clone(),
        watch: StreamWatch::new(structured, options.cli_retries),
        recorded: 0,
    };
    let ran = runner.run_watched(
        Process {
            program,
            args,
            cwd: root.to_path_buf(),
            env,
            env_removed: &[],
            stdin,
            output: Output::Log { file: log, cap },
            timeout: options.iteration_timeout,
            record: Record {
                logs: logs.to_path_buf(),
                name: dispatch_id.clone(),
            },
            confinement: contained.map(|(_, confinement)| confinement),
        },
        &mut watch,
    );
    progress.running(None);
    let ran = ran?;
    failpoint::reached("drive.after_agent");
    let truncation = (ran.dropped > 0).then(|| {
        let note = cap.truncation_note(ran.dropped, &log_name);
        progress.say(&format!("{label}: {note}"));
        note
    });

    let output = super::agent_log(dir, &log_name);
    let mut read = classify::read(classify::agent_output(&output), structured, clock::now());
    if let Some(cut) = &ran.cut_short {
        read.cut_short(cut);
    }
    // The agent has run: from here on the turn is only ever settled,
    // however long the store takes to come back, never run again.
    let after = through_outages(dir, on, "reading the turn's result", progress, || {
        dir.read()
    })?;
    let advanced = match worker {
        // A worker's turn did its part when its worktree changed: the
        // merge queue, not the ledger, takes it from there.
        Some(worker) => match (worker.commit)() {
            Ok(head) => head != worker.head_before,
            Err(error) => {
                progress.say(&format!(
                    "{label}: what the turn left could not be committed ({error:#}); it stays in the worktree"
                ));
                false
            }
        },
        None => {
            let staged_after =
                through_outages(dir, on, "reading the candidate", progress, || staged(dir))?;
            turn_advanced(
                before.ledger.spent.iterations,
                after.ledger.spent.iterations,
                staged_before.as_ref(),
                staged_after.as_ref(),
            )
        }
    };
    // The host's completion gate, before the settlement: a candidate this
    // turn staged is held if the host saw anything wrong with the turn.
    let seen = HostAttestation {
        prompt_delivered: ran.prompt_delivered,
        timed_out: ran.timed_out,
        output_truncated: ran.dropped > 0,
        cleaned_up: ran.cleaned_up,
        sensitive_output: matches!(
            loopx_core::redact::redact(classify::agent_output(&output)),
            Cow::Owned(_)
        ),
    };
    let quarantined = match worker {
        Some(_) => None,
        None => through_outages(dir, on, "checking what the turn staged", progress, || {
            super::quarantine_after_turn(dir, &dispatch_id, &seen)
        })?,
    };
    if let Some(fingerprint) = &quarantined {
        progress.say(&format!(
            "turn {iteration} staged candidate {fingerprint}, but the host's completion gate failed ({}): quarantined; no review or new turn until a person inspects it (`loopx goal-focus recover-quarantine --dir {}`)",
            seen.failures().join("; "),
            dir.display()
        ));
    }
    let result = TurnResult::of(
        ran.timed_out,
        ran.exit_status,
        advanced,
        ran.stopped_by,
        &read,
    );
    let settlement = Settlement {
        dispatch_id: dispatch_id.clone(),
        iteration,
        provider: provider_name.to_owned(),
        outcome: TurnOutcome::from(result),
        exit_status: ran.exit_status,
        usage: read.usage.clone(),
        settled_at: clock::now(),
        note: [read.reported_error.clone(), truncation]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
    };
    through_outages(dir, on, "charging and settling the turn", progress, || {
        super::settle_turn(dir, stream, &read, settlement.clone())
    })?;
    let _ = std::fs::remove_file(super::record_path(logs, &dispatch_id));
    failpoint::reached("drive.after_settle");
    if let Some((snapshots, turn)) = snapshot_turn {
        // Taken once; only the journal write is retried through an outage.
        let snapshot = snapshots.after_turn(turn, &dispatch_id, iteration)?;
        through_outages(dir, on, "recording the turn's snapshots", progress, || {
            crate::snapshot::record(dir, &snapshot)
        })?;
        progress.say(&format!(
            "iteration {iteration} [{provider_name}] workspace: {} ({})",
            snapshot.stat.words(),
            snapshots.ref_of(turn, loopx_core::driver::snapshot::Side::After)
        ));
    }
    if worker.is_none() {
        // Other workers' logs are open meanwhile; their run sweeps at its end.
        sweep_logs(dir, logs, progress);
    }
    let usd = if read.usage.usd > 0.0 {
        format!(", ${:.4}", read.usage.usd)
    } else {
        String::new()
    };
    let why = match result {
        TurnResult::Advanced => String::new(),
        // Openable from where drive was run, not only from the loop dir.
        failed => format!(
            ": {}; see {}",
            failed.sentence(),
            dir.path(&log_name).display()
        ),
    };
    progress.say(&format!(
        "{label} {} in {:.1}s (exit {}{usd}){why}; {} left",
        TurnOutcome::from(result).label(),
        ran.elapsed.as_secs_f64(),
        ran.exit_status
            .map_or("killed".to_owned(), |c| c.to_string()),
        loopx_core::words::count(after.ledger.remaining_iterations(), "iteration")
    ));
    Ok(Turn {
        result,
        read,
        log: log_name,
    })
}
