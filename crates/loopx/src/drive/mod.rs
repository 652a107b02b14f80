//! `loopx drive`: run unattended turns until the loop should stop.
//!
//! Each turn is a fresh agent process in its own process group, in the
//! project root, with the prompt regenerated from state. Before it starts,
//! the driver commits a dispatch intent; after it exits, a settlement.
//!
//! This module is the loop: it asks the core's step
//! (`loopx_core::driver::step`, through `loopx_app::driver::next_step`)
//! what to do next and does it, with the clocks and sleeps that takes. One
//! turn is [`turn`]; one bounded process is [`agent`]; one panel reviewer
//! is [`reviewer`] (shared with `loopx panel`); the spinner is [`ticker`]. Every commit is a `loopx_app::driver` use case, and every
//! store call once the run has started goes through
//! [`outage::through_outages`], so a store that becomes unreachable (a
//! PostgreSQL restart) is waited out, not a reason to stop.

mod agent;
mod outage;
pub mod reviewer;
mod ticker;
mod turn;

use outage::through_outages;

use anyhow::{Context as _, Result};
use loopx_app::clock;
use loopx_app::driver;
use loopx_app::loop_dir::LoopDir;
use loopx_core::driver::session::{Exit, Limits, Next, Session, TurnResult};
use loopx_core::driver::step::Step;
use loopx_core::driver::{DriverError, RecoveryPlan, Registration, Waiting};
use loopx_core::panel::{Phase, Switch};
use loopx_store::sqlite::Access;
use loopx_store::AuthorityError;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use turn::verify_claim;

/// What runs each turn.
#[derive(Debug, Clone)]
pub enum Target {
    /// Named providers, first available first.
    Providers(Vec<String>),
    /// A shell command; the prompt arrives on its stdin.
    Command(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub root: PathBuf,
    pub target: Target,
    pub goal_id: String,
    pub agent_id: String,
    pub limits: Limits,
    pub iteration_timeout: Duration,
    pub max_iterations: Option<u64>,
    /// How often a paused loop is looked at again.
    pub pause_poll: Duration,
    /// `--panel`: whether a staged candidate is reviewed by the panel
    /// before the next dispatch.
    pub panel: Switch,
}

/// How a drive run ended.
pub struct Ended {
    pub exit: Exit,
    pub reason: String,
    pub turns: u64,
}

/// Marks an error as the caller's to fix (a wrong `--dir` or `--root`):
/// `drive` exits 2 for it, not 4.
#[derive(Debug)]
pub struct Usage(pub &'static str);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

pub fn drive(options: &Options) -> Result<Ended> {
    let dir = match LoopDir::open(&options.dir, Access::ReadWrite) {
        Ok(dir) => dir,
        Err(error) if !options.dir.join(loopx_app::loop_dir::DATABASE).is_file() => {
            return Err(error.context(Usage("wrong --dir")))
        }
        Err(error) => return Err(error),
    };
    let root = options
        .root
        .canonicalize()
        .with_context(|| format!("--root {} does not exist", options.root.display()))
        .context(Usage("wrong --root"))?;
    let _lock = driver::take_lock(&dir)?;
    let logs = driver::log_dir(&dir)?;
    let panel = loopx_app::panel::enabled(&dir, options.panel)?;
    let pid = std::process::id();
    let (providers, command) = match &options.target {
        Target::Providers(names) => (names.clone(), None),
        Target::Command(cmd) => (vec!["cmd".to_owned()], Some(cmd.clone())),
    };
    let registration = Registration {
        pid,
        started_at: clock::now(),
        providers: providers.clone(),
        command: command.clone(),
    };
    let root_identity = driver::workspace(&root);
    driver::register(&dir, registration, root_identity.root.clone()).map_err(|error| {
        let mismatch = matches!(
            error.downcast_ref::<AuthorityError<DriverError>>(),
            Some(AuthorityError::Rejected(
                DriverError::WorkspaceMismatch { .. }
            ))
        );
        if mismatch {
            error.context(Usage("wrong --root"))
        } else {
            error
        }
    })?;
    // `loopx serve --all` lists loops driven here. A registry that cannot
    // be written costs that listing, never the run.
    if let Err(error) = loopx_app::all_loops::note_driven(&dir) {
        eprintln!("loopx drive: cannot record this loop in the registry ({error:#}); `loopx serve --all` will not list it");
    }
    let ended = run(
        &dir,
        options,
        &root,
        &logs,
        Session::new(providers, options.limits),
        panel,
    );
    let _ = driver::unregister(&dir, pid);
    ended
}

/// How often a driver held back by should-run looks at the store again:
/// short enough that a released lease or a new todo starts the next turn
/// promptly, long enough that waiting costs next to nothing.
const STATE_POLL: Duration = Duration::from_secs(1);

fn run(
    dir: &LoopDir,
    options: &Options,
    root: &Path,
    logs: &Path,
    mut session: Session,
    panel: bool,
) -> Result<Ended> {
    let pid = std::process::id();
    let mut turns = 0u64;
    let ended = |exit: Exit, reason: String, turns: u64| {
        loopx_app::notify::stopped(dir, exit, &reason);
        Ok(Ended {
            exit,
            reason,
            turns,
        })
    };
    match through_outages(dir, None, "recovering", || {
        driver::recover(dir, options.iteration_timeout)
    })? {
        RecoveryPlan::FailClosed { inspect, .. } => {
            return ended(
                Exit::RuntimeError,
                inspect.replace("<DIR>", &dir.display()),
                turns,
            )
        }
        RecoveryPlan::Clear => {}
        plan => progress(&format!(
            "recovered an open dispatch: {}",
            serde_json::to_string(&plan)?
        )),
    }
    // Nothing is open now, so any agent record left is stale (a driver
    // killed between its settlement and the record's removal).
    driver::remove_stale_records(logs);
    // What the journal last heard this driver wait for: a wait is
    // committed when it changes, not on every look.
    let mut announced: Option<String> = None;
    loop {
        let (reading, step) =
            through_outages(dir, session.current(), "deciding the next step", || {
                driver::next_step(
                    dir,
                    &options.goal_id,
                    &options.agent_id,
                    &session,
                    turns,
                    options.max_iterations,
                    options.pause_poll,
                    panel,
                )
            })?;
        let provider_name = match step {
            Step::VerifyClaim { .. } => {
                if let Some(verified) = verify_claim(dir, root, options.iteration_timeout)? {
                    progress(if verified {
                        "success claim verified by the success_check; banking the stop"
                    } else {
                        "success claim refused: the success_check failed (its log is in driver_logs/); the loop goes on"
                    });
                }
                continue;
            }
            Step::Stop { exit, reason } => return ended(exit, reason, turns),
            Step::Review { fingerprint } => {
                progress(&format!(
                    "candidate {fingerprint} staged: the panel reviews it before the next dispatch"
                ));
                match panel_phase(dir, Phase::ResultReview) {
                    Ok(()) => continue,
                    Err(why) => {
                        let reason =
                            format!("the panel cannot review candidate {fingerprint}: {why}");
                        return ended(Exit::RuntimeError, reason, turns);
                    }
                }
            }
            Step::ReviewStrategy => {
                progress("the plan awaits a strategy review: the panel reviews it before the next dispatch");
                match panel_phase(dir, Phase::StrategyReview) {
                    Ok(()) => continue,
                    Err(why) => {
                        let reason = format!("the panel cannot review the plan: {why}");
                        return ended(Exit::RuntimeError, reason, turns);
                    }
                }
            }
            Step::Pause { until, reason } => {
                // Re-announced on every look: its `until` is the next look.
                let waiting = Waiting { until, reason };
                through_outages(dir, session.current(), "recording the pause", || {
                    driver::set_waiting(dir, pid, Some(waiting.clone()), session.current())
                })?;
                announced = None;
                std::thread::sleep(options.pause_poll);
                continue;
            }
            Step::Wait { until, reason } => {
                if announced.as_deref() != Some(&reason) {
                    progress(&reason);
                    let waiting = Waiting {
                        until,
                        reason: reason.clone(),
                    };
                    through_outages(dir, session.current(), "recording the wait", || {
                        driver::set_waiting(dir, pid, Some(waiting.clone()), session.current())
                    })?;
                    announced = Some(reason);
                }
                // The next look re-reads the store: a released lease, a
                // new todo or the stop arbiter ends the wait there.
                std::thread::sleep(STATE_POLL);
                continue;
            }
            Step::Run { provider } => provider,
        };
        let launcher = match &options.target {
            Target::Command(_) => None,
            Target::Providers(_) => match driver::installed_launcher_named(&provider_name) {
                Some(launcher) => Some(launcher),
                None => match session.after(TurnResult::Unavailable, None, clock::now()) {
                    Next::Switch { excluded, next, .. } => {
                        progress(&format!("{excluded} is not installed; switching to {next}"));
                        continue;
                    }
                    Next::Exit { exit, reason } => return ended(exit, reason, turns),
                    _ => unreachable!("a missing binary excludes its provider"),
                },
            },
        };
        through_outages(dir, Some(&provider_name), "starting the turn", || {
            driver::set_waiting(dir, pid, None, Some(&provider_name))
        })?;
        announced = None;
        let (turn_result, read, log_name) =
            turn::turn(dir, options, root, logs, &provider_name, launcher, &reading)?;
        turns += 1;
        loopx_app::notify::after_turn(dir, &provider_name, turn_result);
        match session.after(turn_result, read.resets_at, clock::now()) {
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
                progress(&reason);
                loopx_app::notify::quota_wait(dir, &provider_name, until, &reason);
                let waiting = Waiting { until, reason };
                through_outages(dir, Some(&provider_name), "recording the wait", || {
                    driver::set_waiting(dir, pid, Some(waiting.clone()), Some(&provider_name))
                })?;
                wait(dir, seconds)?;
            }
            Next::Switch {
                excluded,
                next,
                cause,
            } => progress(&format!(
                "{excluded} excluded for this run ({}); switching to {next}",
                cause.reason()
            )),
            Next::Exit { exit, reason } if turn_result == TurnResult::Advanced => {
                return ended(exit, reason, turns)
            }
            Next::Exit { exit, reason } => {
                return ended(exit, format!("{reason}; see {log_name}"), turns)
            }
        }
    }
}

/// Run one panel phase with real reviewers and say how it went. `Err`:
/// why the driver must stop (the panel was refused, or could launch
/// nobody, which the next look would find again).
fn panel_phase(dir: &LoopDir, phase: Phase) -> std::result::Result<(), String> {
    let view = loopx_app::panel::prepare(dir.root(), phase, None)
        .and_then(|prepared| reviewer::review(prepared, None))
        .map_err(|error| error.message)?;
    let text = view.text();
    for line in text.lines() {
        progress(&format!("panel: {line}"));
    }
    if view.attempts.is_empty() {
        return Err(format!("no reviewer could be launched: {text}"));
    }
    Ok(())
}

/// Sleep up to `seconds`, waking early when the loop must stop.
fn wait(dir: &LoopDir, seconds: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        let reading = through_outages(dir, None, "waiting", || dir.read())?;
        if dir.verdict(&reading.ledger, clock::now()).done {
            return Ok(());
        }
        std::thread::sleep(
            Duration::from_millis(250).min(until.saturating_duration_since(Instant::now())),
        );
    }
    Ok(())
}

fn progress(message: &str) {
    eprintln!("loopx drive: {message}");
}
