//! One `drive` run: unattended turns until the loop should stop.
//!
//! The loop asks the core's step ([`super::next_step`], over
//! `loopx_core::driver::step`) what to do next and does it: a turn
//! ([`super::turn`]), a panel phase, the success check, a wait. Each turn
//! is a fresh process in the project root with the prompt regenerated from
//! state, run through the [`TurnRunner`] the adapter passes. Every store
//! call once the run has started goes through [`through_outages`], so a
//! store that becomes unreachable (a PostgreSQL restart) is waited out,
//! not a reason to stop.
//!
//! A stop signal (SIGTERM, SIGINT; caught by the adapter through
//! `platform::catch_stop_signals`) ends the run at the next safe point:
//! the runner ends the turn's processes, the turn is settled as
//! interrupted, and the run exits with the signal's code (143, 130).
//!
//! Not here: how a process runs (the runner), how progress is shown (the
//! adapter's [`Progress`]), the policy itself (`loopx_core::driver`).

use super::options::{Options, Progress, Target};
use super::outage::through_outages;
use super::runner::TurnRunner;
use super::turn::{run_turn, verify_claim, TurnContext};
use crate::containment::Containment;
use crate::loop_dir::LoopDir;
use crate::{clock, platform, AppError};
use anyhow::{Context as _, Result};
use loopx_core::containment::Role;
use loopx_core::driver::provider;
use loopx_core::driver::session::{Exit, Next, Session, StopSignal, TurnResult};
use loopx_core::driver::step::Step;
use loopx_core::driver::{DriverError, RecoveryPlan, Registration, RunEnded, Waiting};
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::panel::Phase;
use loopx_store::{failpoint, AuthorityError, Classified};
use std::path::Path;
use std::time::{Duration, Instant};

/// How a drive run ended.
pub struct Ended {
    pub exit: Exit,
    pub reason: String,
    pub turns: u64,
}

/// Marks an error as the caller's to fix (a project root that does not
/// exist, a loop driven from another root): `drive` exits 2 for it, not 4.
#[derive(Debug)]
pub struct Misdirected(pub &'static str);

impl std::fmt::Display for Misdirected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Drive the loop in `dir` until it should stop, each turn through
/// `runner`. Holds the loop's driver lock for the run.
pub fn drive(
    dir: &LoopDir,
    options: &Options,
    runner: &(dyn TurnRunner + Sync),
    progress: &dyn Progress,
) -> Result<Ended> {
    let root = options
        .root
        .canonicalize()
        .with_context(|| format!("the project root {} does not exist", options.root.display()))
        .context(Misdirected("wrong project root"))?;
    let options = &Options {
        root,
        ..options.clone()
    };
    // The transport is decided, and every pinned provider attested, before
    // the driver takes the loop or registers: a refusal changes nothing
    // and starts nothing.
    let ledger = dir.read()?.ledger;
    let enforce = ledger.config.goal_focus_mode == GoalFocusMode::Enforce;
    if enforce && options.workers.is_some() {
        return Err(anyhow::anyhow!(
            "--workers runs in a loop Goal Focus monitors, not in enforce mode: an enforced loop's next dispatch is its plan's, one at a time"
        )
        .context(Misdirected("workers in enforce mode")));
    }
    let provider_names: Vec<&str> = match &options.target {
        Target::Providers(names) => names
            .iter()
            .map(|name| provider::find(name).map_or(name.as_str(), |p| p.name))
            .collect(),
        Target::Command(_) => Vec::new(),
    };
    let containment = crate::containment::prepare(
        Role::Primary,
        options.transport.as_deref(),
        enforce,
        &provider_names,
        matches!(options.target, Target::Command(_)),
    )
    .map_err(|error| anyhow::Error::from(error).context(Misdirected("provider transport")))?;
    check_endpoints(&options.target)?;
    // A malformed goal_priority.json is the operator's to fix: refused
    // here, before the driver registers, rather than at the first prompt.
    crate::goal_priority::resolve(dir)
        .map_err(|error| anyhow::Error::from(error).context(Misdirected("goal priority")))?;
    // So is a formal policy source with a value that is not one; the
    // turns go by what is resolved here, whatever changes meanwhile.
    let formal = crate::formal::resolve(dir, &options.formal)
        .map_err(|error| anyhow::Error::from(error).context(Misdirected("formal policy")))?;
    let options = &Options {
        formal: formal.settings.as_layer(),
        ..options.clone()
    };
    // Asked for and impossible (no repository, no commit): refused before
    // anything is written, like any other misdirected flag.
    // A worker's branch is its snapshot: the root's are the loop's own
    // turns'.
    let git_snapshot = match options.workers {
        Some(_) => loopx_core::driver::snapshot::Setting::Off,
        None => options.git_snapshot,
    };
    let (snapshots, snapshot_note) = crate::snapshot::for_run(dir, &options.root, git_snapshot)
        .context(Misdirected("git snapshots"))?;
    if let Some(note) = snapshot_note {
        progress.say(&note);
    }
    // Workers need a branch with a commit to branch from: refused here,
    // before the driver takes the loop, and resolved once for the run.
    let resolved;
    let options = match &options.workers {
        Some(workers) => {
            let repo = crate::snapshot::git::Repo::at(&options.root);
            let asked = workers.target_branch.as_deref();
            let (branch, _) = crate::workers::worktree::target(&repo, &options.root, asked)
                .context(Misdirected("workers"))?;
            resolved = Options {
                workers: Some(super::options::Workers {
                    target_branch: Some(branch),
                    ..workers.clone()
                }),
                ..options.clone()
            };
            &resolved
        }
        None => options,
    };
    let _lock = super::take_lock(dir)?;
    let logs = super::log_dir(dir)?;
    crate::formal::start_drive(dir, &formal, &options.root, progress)?;
    let panel = crate::panel::enabled(dir, options.panel)?;
    let pid = std::process::id();
    let (providers, command) = match &options.target {
        Target::Providers(names) => (names.clone(), None),
        Target::Command(cmd) => (vec!["cmd".to_owned()], Some(cmd.clone())),
    };
    let registration = Registration {
        pid,
        started_at: clock::now(),
        providers: providers.clone(),
        command,
        transport: Some(containment.transport()),
        limits: containment.limits().copied(),
        pins: provider_names
            .iter()
            .filter_map(|name| provider::find(name))
            .flat_map(|each| provider::pins_set(each, |name| std::env::var(name).ok()))
            .map(|(variable, value)| (variable.to_owned(), value))
            .collect(),
    };
    let root_identity = super::workspace(&options.root);
    // A worker run registers as its host: each host binds its own
    // workspace, and what crosses hosts is the store and the remote.
    let registered_in = match &options.workers {
        Some(workers) => loopx_core::workers::host_stream(&workers.host),
        None => loopx_core::driver::STREAM.to_owned(),
    };
    super::register(
        dir,
        &registered_in,
        registration,
        root_identity.root.clone(),
    )
    .map_err(|error| {
        let mismatch = matches!(
            error
                .downcast_ref::<Classified>()
                .and_then(Classified::original::<AuthorityError<DriverError>>),
            Some(AuthorityError::Rejected(
                DriverError::WorkspaceMismatch { .. }
            ))
        );
        if mismatch {
            error.context(Misdirected("wrong project root"))
        } else {
            error
        }
    })?;
    // `loopx serve --all` lists loops driven here.
    if let Some(warning) =
        crate::all_loops::note(dir, &ledger.run_id, crate::registry::Source::Driven)
    {
        progress.say(&warning);
    }
    let mut run = Run {
        dir,
        options,
        logs: &logs,
        containment: &containment,
        runner,
        progress,
        session: Session::new(providers, options.limits),
        panel,
        turns: 0,
        warned: Vec::new(),
        replanned_since_turn: false,
        snapshots,
    };
    let went = match &options.workers {
        Some(workers) => {
            crate::workers::pool::run(dir, options, workers, &logs, &containment, runner, progress)
        }
        None => run.go(),
    };
    let ended = match went {
        // Told to stop while waiting out an outage or a wait: the signal,
        // not the interrupted wait, is why the run ended.
        Err(error) => match platform::stop_signal() {
            Some(signal) => Ok(run.stopped(signal, &format!("{error:#}"))),
            None => Err(error),
        },
        ended => ended,
    };
    // The goodbye says how the run ended, so a view after it is gone can
    // tell a finished loop from one the driver gave up on; an error that
    // ended the run is an ending too.
    let record = match &ended {
        Ok(ended) => RunEnded {
            exit: ended.exit,
            reason: ended.reason.clone(),
            turns: ended.turns,
            at: clock::now(),
        },
        Err(error) => RunEnded {
            exit: Exit::RuntimeError,
            reason: format!("{error:#}"),
            turns: run.turns,
            at: clock::now(),
        },
    };
    let _ = super::unregister(dir, &registered_in, pid, Some(record));
    // After the goodbye, so the notification reads the run's ending as
    // every view does.
    if let Ok(ended) = &ended {
        crate::notify::stopped(dir, ended.exit, &ended.reason, &containment.words());
    }
    ended
}

/// Every endpoint setting and model or thinking pin of the run's providers
/// is usable before a turn starts: a provider with no known way to change
/// its endpoint, a URL that is not one, or a pin that is not one value,
/// is the caller's to fix (exit 2).
fn check_endpoints(target: &Target) -> Result<()> {
    let Target::Providers(names) = target else {
        return Ok(());
    };
    for name in names {
        if let Some(provider) = loopx_core::driver::provider::find(name) {
            super::env::pin_args(provider)
                .map_err(anyhow::Error::msg)
                .context(Misdirected("wrong model pin"))?;
        }
        let (Some(provider), Some(url)) = (
            loopx_core::driver::provider::find(name),
            super::env::base_url(name),
        ) else {
            continue;
        };
        loopx_core::driver::provider::check_endpoint(provider, &url)
            .map_err(anyhow::Error::msg)
            .context(Misdirected("wrong endpoint setting"))?;
    }
    Ok(())
}

/// How often a driver held back by should-run looks at the store again:
/// short enough that a released lease or a new todo starts the next turn
/// promptly, long enough that waiting costs next to nothing.
const STATE_POLL: Duration = Duration::from_secs(1);

/// A run in progress.
struct Run<'a> {
    dir: &'a LoopDir,
    options: &'a Options,
    logs: &'a Path,
    containment: &'a Containment,
    runner: &'a (dyn TurnRunner + Sync),
    progress: &'a dyn Progress,
    session: Session,
    panel: bool,
    turns: u64,
    /// Providers whose CLI version warning was already said this run.
    warned: Vec<String>,
    /// Gate 6 proposed a plan since the last turn: another closed gate
    /// before a turn runs is a person's to look at.
    replanned_since_turn: bool,
    /// The run's git snapshots of the workspace, when on.
    snapshots: Option<crate::snapshot::Snapshots>,
}

impl Run<'_> {
    fn ended(&self, exit: Exit, reason: String) -> Ended {
        Ended {
            exit,
            reason,
            turns: self.turns,
        }
    }

    fn stopped(&self, signal: StopSignal, during: &str) -> Ended {
        let reason = format!("stopped by {} ({during})", signal.name());
        self.ended(signal.exit(), reason)
    }

    fn go(&mut self) -> Result<Ended> {
        let (dir, options, progress) = (self.dir, self.options, self.progress);
        let pid = std::process::id();
        match through_outages(dir, None, "recovering", progress, || {
            super::recover(dir, options.iteration_timeout)
        })? {
            RecoveryPlan::FailClosed { inspect, .. } => {
                let reason = inspect.replace("<DIR>", &dir.display());
                return Ok(self.ended(Exit::RuntimeError, reason));
            }
            RecoveryPlan::Clear => {}
            plan => progress.say(&format!(
                "recovered an open dispatch: {}",
                serde_json::to_string(&plan)?
            )),
        }
        // Nothing is open now, so any agent record left is stale (a driver
        // killed between its settlement and the record's removal).
        super::remove_stale_records(self.logs);
        if let Some(refused) = self.check_workspace()? {
            return Ok(self.ended(Exit::RuntimeError, refused));
        }
        // What the journal last heard this driver wait for: a wait is
        // committed when it changes, not on every look.
        let mut announced: Option<String> = None;
        loop {
            if let Some(signal) = platform::stop_signal() {
                return Ok(self.stopped(signal, "between turns"));
            }
            // `loopx drain`: the supervisor that started this driver asked
            // it to stop here, its last turn settled.
            if let Some(reason) = crate::supervisor::drain_asked_of_parent(dir) {
                return Ok(self.ended(Exit::Done, reason));
            }
            let session = &self.session;
            let (reading, step) = through_outages(
                dir,
                session.current(),
                "deciding the next step",
                progress,
                || {
                    super::next_step(
                        dir,
                        &options.goal_id,
                        &options.agent_id,
                        session,
                        self.turns,
                        options.max_iterations,
                        options.pause_poll,
                        self.panel,
                        self.replanned_since_turn,
                    )
                },
            )?;
            let provider_name = match step {
                Step::VerifyClaim { .. } => {
                    let root = &options.root;
                    let (timeout, cap) = (options.iteration_timeout, options.output_cap);
                    if let Some(verified) =
                        verify_claim(dir, root, timeout, cap, self.runner, progress)?
                    {
                        progress.say(if verified {
                            "success claim verified by the success_check; banking the stop"
                        } else {
                            "success claim refused: the success_check failed (its log is in driver_logs/); the loop goes on"
                        });
                    }
                    continue;
                }
                Step::Stop { exit, reason } => return Ok(self.ended(exit, reason)),
                Step::Review { fingerprint } => {
                    progress.say(&format!(
                        "candidate {fingerprint} staged: the panel reviews it before the next dispatch"
                    ));
                    if let Err(why) = self.panel_phase(Phase::ResultReview) {
                        let reason =
                            format!("the panel cannot review candidate {fingerprint}: {why}");
                        return Ok(self.ended(Exit::RuntimeError, reason));
                    }
                    self.after_review(&fingerprint.to_string())?;
                    continue;
                }
                Step::Replan { trigger } => {
                    progress.say(&format!(
                        "the pre-dispatch gate is closed ({trigger}): the driver proposes a plan, and the panel's strategy review decides it"
                    ));
                    // One operation for this proposal, however often an
                    // outage makes it retry; once committed, the plan
                    // awaits its review, so a restarted driver reviews it
                    // instead of proposing another.
                    // The strategy review is for the executor that will run
                    // next (after a failover, the new family's).
                    let next = self.session.current().map(str::to_owned);
                    through_outages(
                        dir,
                        next.as_deref(),
                        "recording the provider",
                        progress,
                        || super::set_waiting(dir, std::process::id(), None, next.as_deref()),
                    )?;
                    let operation = crate::operation::fresh_name(&format!("gate6-{trigger}"));
                    let proposed = through_outages(dir, None, "proposing a plan", progress, || {
                        crate::focus::replan(dir.place(), Some(trigger), false, Some(&operation))
                            .map_err(anyhow::Error::from)
                    });
                    if let Err(error) = proposed {
                        let reason = format!("the pre-dispatch gate is closed ({trigger}) and no plan could be proposed: {error:#}");
                        return Ok(self.ended(Exit::RuntimeError, reason));
                    }
                    self.replanned_since_turn = true;
                    failpoint::reached("drive.gate6_proposed");
                    continue;
                }
                Step::ReviewStrategy => {
                    progress.say("the plan awaits a strategy review: the panel reviews it before the next dispatch");
                    if let Err(why) = self.panel_phase(Phase::StrategyReview) {
                        let reason = format!("the panel cannot review the plan: {why}");
                        return Ok(self.ended(Exit::RuntimeError, reason));
                    }
                    failpoint::reached("drive.gate6_reviewed");
                    continue;
                }
                Step::Pause { until, reason } => {
                    // Re-announced on every look: its `until` is the next look.
                    let waiting = Waiting { until, reason };
                    let current = self.session.current();
                    through_outages(dir, current, "recording the pause", progress, || {
                        super::set_waiting(dir, pid, Some(waiting.clone()), current)
                    })?;
                    announced = None;
                    platform::pause(options.pause_poll);
                    continue;
                }
                Step::Wait { until, reason } => {
                    if announced.as_deref() != Some(&reason) {
                        progress.say(&reason);
                        let waiting = Waiting {
                            until,
                            reason: reason.clone(),
                        };
                        let current = self.session.current();
                        through_outages(dir, current, "recording the wait", progress, || {
                            super::set_waiting(dir, pid, Some(waiting.clone()), current)
                        })?;
                        announced = Some(reason);
                    }
                    // The next look re-reads the store: a released lease, a
                    // new todo or the stop arbiter ends the wait there.
                    platform::pause(STATE_POLL);
                    continue;
                }
                Step::Run { provider } => provider,
            };
            let mut running = None;
            let launcher = match &options.target {
                Target::Command(_) => None,
                Target::Providers(_) => {
                    let found = self.containment.launcher_for(&provider_name).map(|found| {
                        if let Some(installed) = &found.installed {
                            if let Some(warning) = installed.warning() {
                                if !self.warned.contains(&provider_name) {
                                    progress.say(&format!("warning: {warning}"));
                                    self.warned.push(provider_name.clone());
                                }
                            }
                            running = installed.choice.version.map(|v| v.to_string());
                        }
                        found.launcher
                    });
                    match found {
                        Some(launcher) => Some(launcher),
                        None => {
                            match self
                                .session
                                .after(TurnResult::Unavailable, None, clock::now())
                            {
                                Next::Switch { excluded, next, .. } => {
                                    progress.say(&format!(
                                        "{excluded} is not installed; switching to {next}"
                                    ));
                                    continue;
                                }
                                Next::Exit { exit, reason } => return Ok(self.ended(exit, reason)),
                                _ => unreachable!("a missing binary excludes its provider"),
                            }
                        }
                    }
                }
            };
            let on = Some(provider_name.as_str());
            through_outages(dir, on, "starting the turn", progress, || {
                super::set_waiting(dir, pid, None, on)
            })?;
            announced = None;
            // A loop Goal Focus does not enforce gets the legacy flow:
            // the panel's target advice before each turn.
            let advice = match self.panel
                && reading.ledger.config.goal_focus_mode != GoalFocusMode::Enforce
            {
                true => match self.target_advice(&provider_name) {
                    Ok(synthesis) => synthesis,
                    Err(reason) => return Ok(self.ended(Exit::RuntimeError, reason)),
                },
                false => None,
            };
            let context = TurnContext {
                dir,
                options,
                logs: self.logs,
                containment: self.containment,
                runner: self.runner,
                progress,
                snapshots: self.snapshots.as_ref(),
                advice: advice.as_deref(),
                worker: None,
            };
            let turn = run_turn(context, &provider_name, launcher, &reading)?;
            self.turns += 1;
            self.replanned_since_turn = false;
            crate::notify::after_turn(dir, &provider_name, turn.result);
            crate::formal::after_turn(context, turn.result);
            match self
                .session
                .after(turn.result, turn.read.resets_at, clock::now())
            {
                Next::Continue => {}
                Next::Wait {
                    seconds,
                    until,
                    reason,
                } => {
                    let until = until.unwrap_or_else(|| {
                        clock::now()
                            .checked_add(jiff::SignedDuration::from_secs(seconds as i64))
                            .unwrap_or(clock::now())
                    });
                    progress.say(&reason);
                    crate::notify::quota_wait(dir, &provider_name, until, &reason);
                    let waiting = Waiting { until, reason };
                    through_outages(dir, on, "recording the wait", progress, || {
                        super::set_waiting(dir, pid, Some(waiting.clone()), on)
                    })?;
                    self.wait(seconds)?;
                }
                Next::Switch {
                    excluded,
                    next,
                    cause,
                } => progress.say(&format!(
                    "{excluded} excluded for this run ({}); switching to {next}",
                    cause.reason()
                )),
                Next::Exit { exit, reason } if turn.result == TurnResult::Advanced => {
                    return Ok(self.ended(exit, reason))
                }
                Next::Exit { exit, reason } => {
                    let log = dir.path(&turn.log);
                    // A refused launch line: what the CLI refused, and which CLI.
                    let refused = match (&turn.read.reported_error, exit) {
                        (Some(refusal), Exit::BadArguments) => format!(
                            " ({} {}: {refusal})",
                            launcher.map_or("", |l| l.binary),
                            running.as_deref().unwrap_or("of an unknown version")
                        ),
                        _ => String::new(),
                    };
                    return Ok(
                        self.ended(exit, format!("{reason}{refused}; see {}", log.display()))
                    );
                }
            }
        }
    }

    /// At the start of a run: the workspace against the one loopx last
    /// left. Changed underneath, it is refused (why, in words) unless the
    /// operator accepted it (`--accept-workspace`), which is recorded.
    fn check_workspace(&self) -> Result<Option<String>> {
        let Some(snapshots) = &self.snapshots else {
            return Ok(None);
        };
        if let Some(taken) = snapshots.complete_interrupted(self.dir)? {
            self.progress.say(&format!(
                "turn {} ended without its after-snapshot (the driver was stopped before it); taken now: {}",
                taken.turn,
                taken.stat.words()
            ));
        }
        let check = snapshots.check(self.dir)?;
        if !check.changed() {
            return Ok(None);
        }
        if !self.options.accept_workspace {
            return Ok(Some(format!(
                "{}; a new turn would build on changes loopx did not make: look at them (`git -C {} status`, `loopx recover --dir {} --json`), then drive again with --accept-workspace to go on from them, or `loopx rollback --dir {} --to N --force` to go back",
                check.sentence(),
                snapshots.top().display(),
                self.dir.display(),
                self.dir.display()
            )));
        }
        through_outages(
            self.dir,
            None,
            "accepting the workspace",
            self.progress,
            || snapshots.accept(self.dir, &check),
        )?;
        self.progress.say(&format!(
            "{}; accepted (--accept-workspace): the next turn starts from it",
            check.sentence()
        ));
        Ok(None)
    }

    /// After the panel's result review in a snapshotting run: a rejected
    /// candidate's turn has its workspace changes undone.
    fn after_review(&self, fingerprint: &str) -> Result<()> {
        let Some(snapshots) = &self.snapshots else {
            return Ok(());
        };
        let Some(slot) = crate::focus::candidate::slot(self.dir)? else {
            return Ok(());
        };
        let decided = slot
            .last_archived
            .filter(|archived| archived.fingerprint.to_string() == fingerprint);
        // The turn that staged it, if a driven turn did.
        let dispatch = slot
            .last_decided
            .and_then(|held| held.candidate.dispatch_id);
        if let (Some(archived), Some(dispatch)) = (decided, dispatch) {
            if loopx_core::driver::snapshot::undoes_turn(archived.outcome) {
                let said = snapshots.undo_rejected(self.dir, &dispatch, fingerprint)?;
                self.progress
                    .say(&format!("candidate {fingerprint} rejected: {said}"));
            }
        }
        Ok(())
    }

    /// Run one panel phase with real reviewers and say how it went. `Err`:
    /// why the driver must stop (the panel was refused, or could launch
    /// nobody, which the next look would find again).
    fn panel_phase(&self, phase: Phase) -> std::result::Result<(), String> {
        let view = crate::panel::prepare(
            self.dir.place(),
            phase,
            None,
            self.options.transport.as_deref(),
        )
        .and_then(|prepared| {
            super::reviewer::review(prepared, None, self.runner, &|line| {
                self.progress.say(&format!("panel: {line}"))
            })
        })
        .map_err(|error| error.message)?;
        let text = view.text();
        for line in text.lines() {
            self.progress.say(&format!("panel: {line}"));
        }
        if view.attempts.is_empty() {
            return Err(format!("no reviewer could be launched: {text}"));
        }
        Ok(())
    }

    /// Ask the panel for target advice on the loop as it stands, for a
    /// turn `provider` runs, and return the synthesis's path when there
    /// is advice in it. A reviewer that fails, times out or says nothing
    /// costs its attempt and the turn runs without it (advice decides
    /// nothing); `Err`, why the driver must stop: the panel was refused
    /// (panel.json, the transport, nobody left to invite), which the next
    /// look would find again.
    fn target_advice(&self, provider: &str) -> std::result::Result<Option<String>, String> {
        let refused =
            |error: AppError| format!("the panel cannot give target advice: {}", error.message);
        let prepared = crate::panel::prepare(
            self.dir.place(),
            Phase::TargetAdvice,
            Some(provider),
            self.options.transport.as_deref(),
        )
        .map_err(refused)?;
        let announce = |line: &str| self.progress.say(&format!("panel: {line}"));
        let view =
            super::reviewer::review(prepared, None, self.runner, &announce).map_err(refused)?;
        for line in view.text().lines() {
            announce(line);
        }
        Ok(view.answered().then_some(view.synthesis).flatten())
    }

    /// Sleep up to `seconds`, waking early when the loop must stop.
    fn wait(&self, seconds: u64) -> Result<()> {
        let until = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < until {
            let reading =
                through_outages(self.dir, None, "waiting", self.progress, || self.dir.read())?;
            if self.dir.verdict(&reading.ledger, clock::now()).done {
                return Ok(());
            }
            // A drain ends the wait too: the loop's top stops the run.
            if crate::supervisor::drain_asked_of_parent(self.dir).is_some() {
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            if platform::pause(Duration::from_millis(250).min(left)) {
                return Ok(());
            }
        }
        Ok(())
    }
}
