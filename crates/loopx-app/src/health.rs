//! The `health` use case: the loop's state in one line, with its tone and
//! the one command that acts on it, decided once from the status read
//! (the stop verdict, how the loop ended, the driver summary) and the
//! continuation decision. The dashboard's health line and the all-loops
//! page call [`health`]; the decision itself is [`decide`], pure, so every
//! state is tested without a loop on disk.
//!
//! Does not own: the stop rules (`loopx_core::ledger::arbiter`), the words
//! for how a loop ended (`loopx_core::ending`, which `status`, `done` and
//! notifications read too), whether a turn should run
//! (`loopx_core::goal::continuation`), or the driver's bookkeeping
//! (`loopx_core::driver`); it only ranks what they say.

use crate::clock;
use crate::continuation::NextTurn;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use crate::platform;
use jiff::Timestamp;
use loopx_core::driver::{self, classify::FailureClass, DriverSummary, TurnOutcome};
use loopx_core::ending::{ending, Ending, Tone};
use loopx_core::focus::candidate::Hold;
use loopx_core::focus::mode::dispatch_unresolved;
use loopx_core::focus::signals::Signal;
use loopx_core::goal::{self, Actor};
use loopx_core::ledger::arbiter::Verdict;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::words;
use serde::Serialize;

/// Which state the loop is in, most urgent first when several hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Nothing proceeds until a person acts (an ambiguous open dispatch,
    /// a provider whose login is dead, a quarantined candidate, an agent
    /// that declared itself blocked).
    NeedsPerson,
    /// The loop ended on a proven success.
    Succeeded,
    /// A person ended it with `STOP_REQUESTED` or `BLOCKED`.
    StoppedByUser,
    /// A token, USD or wall-time budget ended it.
    BudgetExhausted,
    /// Every allowed iteration is recorded.
    IterationCap,
    /// The agent stopped for a reason none of the above names.
    StoppedByAgent,
    /// The loop goes on, but the driver gave up on it.
    Failed,
    /// `PAUSE` holds the loop without ending it.
    Paused,
    /// The driver sleeps until a provider's quota resets.
    WaitingForReset,
    /// The driver runs but should-run backs off: no work it may take now.
    WaitingForWork,
    /// The driver runs turns.
    Running,
    /// No driver process, and nothing stops the loop.
    NotDriven,
}

impl State {
    /// The state an ending puts the loop in.
    fn of(ending: &Ending) -> State {
        match ending {
            Ending::Succeeded { .. } => State::Succeeded,
            Ending::StoppedByUser { .. } => State::StoppedByUser,
            Ending::BudgetExhausted { .. } => State::BudgetExhausted,
            Ending::IterationCap { .. } => State::IterationCap,
            Ending::NeedsPerson { .. } => State::NeedsPerson,
            Ending::StoppedByAgent { .. } => State::StoppedByAgent,
            Ending::Failed { .. } => State::Failed,
        }
    }

    /// The colour of a state no ending decided.
    fn tone(self) -> Tone {
        match self {
            State::Running => Tone::Good,
            State::WaitingForReset | State::WaitingForWork => Tone::Attention,
            State::NeedsPerson | State::Failed => Tone::Bad,
            _ => Tone::Neutral,
        }
    }
}

/// The health line: the state, why, and the one command that acts on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Health {
    pub state: State,
    /// How a view colours it.
    pub tone: Tone,
    /// One sentence a person reads at a glance.
    pub line: String,
    /// The command (or file operation) that acts on this state, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// When waiting for a reset: until when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

/// What [`decide`] ranks: the reads, named by what they mean here.
pub struct Inputs<'a> {
    /// The loop directory as commands should name it.
    pub dir: &'a str,
    pub verdict: &'a Verdict,
    /// How the loop ended, or how its last driver run gave up.
    pub ending: Option<&'a Ending>,
    pub driver: &'a DriverSummary,
    pub should_run: bool,
    /// should-run's reason when it backs off.
    pub backoff_reason: &'a str,
    pub now: Timestamp,
    /// What the candidate stream holds back (enforce mode).
    pub candidate: Option<&'a Hold>,
    /// Goal Focus enforce mode: an unresolved dispatch closes its
    /// pre-dispatch gate, and `goal-focus recover-dispatch` settles it.
    pub enforce: bool,
    /// The replan signals that close the enforce-mode gate (empty
    /// otherwise): the driver runs no turn while any fires.
    pub direction: &'a [Signal],
}

/// The health of the loop in `dir`, from one status read.
pub fn health(dir: &LoopDir) -> Result<Health, AppError> {
    let turn = dir.next_turn(goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
    let summary = driver::summary(&dir.driver()?.1, platform::alive);
    Ok(of_turn(&dir.display(), &turn, &summary, clock::now()))
}

/// The health from reads a caller already made (the dashboard reads the
/// turn and the driver once for the whole page).
pub fn of_turn(dir: &str, turn: &NextTurn, driver: &DriverSummary, now: Timestamp) -> Health {
    let ending = ending(&turn.reading.ledger, &turn.verdict, driver);
    decide(&Inputs {
        dir,
        verdict: &turn.verdict,
        ending: ending.as_ref(),
        driver,
        should_run: turn.should_run.should_run,
        backoff_reason: &turn.should_run.scheduler_hint.reason,
        now,
        candidate: turn.candidate.as_ref(),
        enforce: turn.reading.ledger.config.goal_focus_mode == GoalFocusMode::Enforce,
        direction: &turn.direction,
    })
}

/// The ranking: a state that needs a person outranks one that explains
/// itself, and a stop outranks any wait.
pub fn decide(i: &Inputs<'_>) -> Health {
    let dir = i.dir;
    let health = |state: State, line: String, command: Option<String>| Health {
        state,
        tone: state.tone(),
        line,
        command,
        until: None,
    };
    match i.candidate {
        Some(Hold::Quarantined(fingerprint)) => {
            return health(
                State::NeedsPerson,
                format!("needs a person: candidate {fingerprint} is quarantined, so nothing is reviewed, banked or dispatched; inspect its evidence, then release it"),
                Some(format!("loopx goal-focus recover-quarantine --dir {dir}")),
            );
        }
        // Without a driver running the panel, a staged result waits for a
        // person to bring (or run) a different-family review.
        Some(Hold::Pending(fingerprint)) => {
            return health(
                State::NeedsPerson,
                format!("needs a person: candidate {fingerprint} awaits its result review, so no new work is launched"),
                Some(format!("loopx goal-focus review --dir {dir} --candidate-fingerprint {fingerprint} --file REVIEW.json")),
            );
        }
        None => {}
    }
    if let Some(iteration) = i.driver.iteration.filter(|_| dispatch_unresolved(i.driver)) {
        let (gate, command) = match i.enforce {
            true => (
                "; the enforce-mode pre-dispatch gate is closed until it is recovered",
                format!("loopx goal-focus recover-dispatch --dir {dir}"),
            ),
            false => ("", format!("loopx recover --dir {dir}")),
        };
        return health(
            State::NeedsPerson,
            format!("needs a person: the dispatch for iteration {iteration} is open and no driver runs, so whether it took effect is unknown{gate}"),
            Some(command),
        );
    }
    if let Some(last) =
        i.driver.last.as_ref().filter(|last| {
            last.outcome == TurnOutcome::Failed(FailureClass::Auth) && !i.driver.running
        })
    {
        return health(
            State::NeedsPerson,
            format!(
                "needs a person: {} refused its login on iteration {}",
                last.provider, last.iteration
            ),
            Some(format!(
                "sign in to {} again, then loopx drive --dir {dir} --provider {}",
                last.provider, last.provider
            )),
        );
    }
    let ended = |ending: &Ending| Health {
        state: State::of(ending),
        tone: ending.tone(),
        line: ending.words(),
        command: match ending {
            Ending::StoppedByUser { sentinel } => Some(format!("rm {dir}/{sentinel}")),
            Ending::NeedsPerson { .. } => Some(format!("loopx status --dir {dir}")),
            Ending::Failed { turn, .. } => Some(format!(
                "loopx drive --dir {dir} --provider {}",
                turn.as_ref().map_or("<name>", |t| t.provider.as_str())
            )),
            _ => None,
        },
        until: None,
    };
    if i.verdict.done {
        if let Some(ending) = i.ending {
            return ended(ending);
        }
    }
    if i.verdict.paused {
        return health(
            State::Paused,
            "paused by the PAUSE file".to_owned(),
            Some(format!("rm {dir}/PAUSE")),
        );
    }
    if !i.direction.is_empty() {
        let triggers: Vec<&str> = i.direction.iter().map(|s| s.trigger.as_str()).collect();
        return health(
            State::NeedsPerson,
            format!(
                "needs a person: the enforce-mode pre-dispatch gate is closed ({}), so no turn runs until a reviewed direction clears it",
                triggers.join(", ")
            ),
            Some(format!("loopx goal-focus status --dir {dir}")),
        );
    }
    if !i.driver.running {
        // Not done, so an ending here is a driver run that gave up.
        if let Some(ending) = i.ending {
            return ended(ending);
        }
        return health(
            State::NotDriven,
            "not driven: no driver process runs this loop".to_owned(),
            Some(format!("loopx drive --dir {dir} --provider <name>")),
        );
    }
    if let Some(waiting) = &i.driver.waiting {
        let left = waiting.until.duration_since(i.now).as_secs().max(0) as u64;
        return Health {
            state: State::WaitingForReset,
            tone: State::WaitingForReset.tone(),
            line: format!(
                "waiting for a quota reset until {} UTC (in {})",
                waiting.until.strftime("%H:%M"),
                words::duration(left),
            ),
            command: None,
            until: Some(waiting.until),
        };
    }
    if !i.should_run {
        return health(
            State::WaitingForWork,
            format!("waiting for work: {}", i.backoff_reason),
            Some(format!("loopx todo list --dir {dir}")),
        );
    }
    health(
        State::Running,
        format!(
            "running: {} on iteration {}{}{}",
            i.driver.provider.as_deref().unwrap_or("an agent"),
            i.driver
                .iteration
                .map_or("next".to_owned(), |n| n.to_string()),
            // Which transport its processes run under, so nobody mistakes
            // an unconfined run for a contained one.
            i.driver
                .transport
                .map(|transport| format!(" ({transport})"))
                .unwrap_or_default(),
            // A CLI retrying a refused call is why a turn seems stuck.
            i.driver
                .retrying
                .as_ref()
                .map(|r| format!("; its CLI is on {}", r.retry.words()))
                .unwrap_or_default()
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_core::driver::classify::Usage;
    use loopx_core::driver::{Settlement, Waiting};

    fn now() -> Timestamp {
        "2026-12-03T12:00:00Z".parse().unwrap()
    }

    fn verdict(done: bool, paused: bool, reason: Option<&'static str>) -> Verdict {
        Verdict {
            done,
            paused,
            reason,
            conditions: reason.into_iter().collect(),
            deciding: None,
        }
    }

    fn running() -> DriverSummary {
        DriverSummary {
            running: true,
            pid: Some(7),
            provider: Some("claude".into()),
            since: Some(now()),
            iteration: Some(3),
            dispatches: 2,
            ..DriverSummary::default()
        }
    }

    fn stopped_driver() -> DriverSummary {
        DriverSummary {
            dispatches: 2,
            ..DriverSummary::default()
        }
    }

    fn inputs<'a>(verdict: &'a Verdict, driver: &'a DriverSummary, should_run: bool) -> Inputs<'a> {
        Inputs {
            dir: "/l",
            verdict,
            ending: None,
            driver,
            should_run,
            backoff_reason: "no open todo",
            now: now(),
            candidate: None,
            enforce: false,
            direction: &[],
        }
    }

    fn decide_with(verdict: &Verdict, driver: &DriverSummary, should_run: bool) -> Health {
        decide(&inputs(verdict, driver, should_run))
    }

    fn settled(outcome: TurnOutcome) -> Settlement {
        Settlement {
            dispatch_id: "d1".into(),
            iteration: 2,
            provider: "codex".into(),
            outcome,
            exit_status: Some(1),
            usage: Usage::default(),
            settled_at: now(),
            note: String::new(),
        }
    }

    #[test]
    fn an_undecided_candidate_needs_a_person_and_outranks_everything() {
        let fingerprint = loopx_core::digest::Digest::of_bytes(b"candidate");
        let stopped = verdict(true, true, Some("user_stop_requested"));
        for (hold, command) in [
            (
                Hold::Quarantined(fingerprint.clone()),
                "loopx goal-focus recover-quarantine --dir /l".to_owned(),
            ),
            (
                Hold::Pending(fingerprint.clone()),
                format!("loopx goal-focus review --dir /l --candidate-fingerprint {fingerprint} --file REVIEW.json"),
            ),
        ] {
            let h = decide(&Inputs {
                dir: "/l",
                verdict: &stopped,
                ending: None,
                driver: &running(),
                should_run: true,
                backoff_reason: "",
                now: now(),
                candidate: Some(&hold),
                enforce: true,
                direction: &[],
            });
            assert_eq!(h.state, State::NeedsPerson);
            assert!(h.line.contains(fingerprint.as_str()), "{}", h.line);
            assert_eq!(h.command.as_deref(), Some(command.as_str()));
        }
    }

    #[test]
    fn a_running_driver_with_work_is_running_under_its_transport() {
        let h = decide_with(&verdict(false, false, None), &running(), true);
        assert_eq!(h.state, State::Running);
        assert_eq!(h.line, "running: claude on iteration 3");
        assert_eq!(h.command, None);
        let contained = DriverSummary {
            transport: Some(loopx_core::containment::Transport::TrustedLocal),
            ..running()
        };
        let h = decide_with(&verdict(false, false, None), &contained, true);
        assert_eq!(h.line, "running: claude on iteration 3 (trusted-local)");
        let retrying = DriverSummary {
            retrying: Some(loopx_core::driver::TurnRetry {
                dispatch_id: "d3".into(),
                retry: loopx_core::driver::stream::CliRetry {
                    attempt: 2,
                    max_retries: Some(10),
                    status: Some(429),
                    error: "rate_limit".into(),
                    delay_ms: None,
                },
                at: now(),
            }),
            ..running()
        };
        let h = decide_with(&verdict(false, false, None), &retrying, true);
        assert_eq!(
            h.line,
            "running: claude on iteration 3; its CLI is on retry 2 of 10 after 429 rate_limit"
        );
    }

    #[test]
    fn a_quota_wait_says_until_when_and_in_how_long() {
        let driver = DriverSummary {
            waiting: Some(Waiting {
                until: "2026-12-03T12:42:10Z".parse().unwrap(),
                reason: "claude quota".into(),
            }),
            ..running()
        };
        let h = decide_with(&verdict(false, false, None), &driver, true);
        assert_eq!(h.state, State::WaitingForReset);
        assert_eq!(h.line, "waiting for a quota reset until 12:42 UTC (in 42m)");
        assert_eq!(h.until, driver.waiting.map(|w| w.until));
    }

    #[test]
    fn a_backing_off_should_run_is_waiting_for_work() {
        let h = decide_with(&verdict(false, false, None), &running(), false);
        assert_eq!(h.state, State::WaitingForWork);
        assert_eq!(h.line, "waiting for work: no open todo");
    }

    #[test]
    fn pause_outranks_a_running_driver_and_names_its_file() {
        let h = decide_with(&verdict(false, true, None), &running(), false);
        assert_eq!(h.state, State::Paused);
        assert_eq!(h.command.as_deref(), Some("rm /l/PAUSE"));
    }

    #[test]
    fn an_ending_says_why_in_its_words_and_tone_and_outranks_pause() {
        let done = verdict(true, true, Some("user_stop_requested"));
        let by_user = Ending::StoppedByUser {
            sentinel: "STOP_REQUESTED",
        };
        let h = decide(&Inputs {
            ending: Some(&by_user),
            ..inputs(&done, &running(), false)
        });
        assert_eq!(h.state, State::StoppedByUser);
        assert_eq!(h.tone, Tone::Neutral);
        assert_eq!(h.line, "stopped by the user (STOP_REQUESTED)");
        assert_eq!(h.command.as_deref(), Some("rm /l/STOP_REQUESTED"));
        let success = Ending::Succeeded {
            iteration: 3,
            checked: true,
        };
        let h = decide(&Inputs {
            ending: Some(&success),
            ..inputs(&done, &stopped_driver(), false)
        });
        assert_eq!((h.state, h.tone), (State::Succeeded, Tone::Good));
        assert_eq!(h.command, None);
    }

    #[test]
    fn a_driver_that_gave_up_is_a_failure_that_names_its_provider() {
        let gave_up = Ending::Failed {
            run: loopx_core::driver::RunEnded {
                exit: loopx_core::driver::session::Exit::MaxFailures,
                reason: "3 consecutive failed turns".into(),
                turns: 3,
                at: now(),
            },
            turn: Some(settled(TurnOutcome::NoAdvance)),
        };
        let open = verdict(false, false, None);
        let h = decide(&Inputs {
            ending: Some(&gave_up),
            ..inputs(&open, &stopped_driver(), true)
        });
        assert_eq!((h.state, h.tone), (State::Failed, Tone::Bad));
        assert!(
            h.line
                .starts_with("failed: the driver gave up after 3 turns"),
            "{}",
            h.line
        );
        assert_eq!(
            h.command.as_deref(),
            Some("loopx drive --dir /l --provider codex")
        );
        // A driver running again is what matters now.
        let h = decide(&Inputs {
            ending: Some(&gave_up),
            ..inputs(&open, &running(), true)
        });
        assert_eq!(h.state, State::Running);
    }

    #[test]
    fn an_open_dispatch_without_a_driver_needs_a_person_before_anything() {
        let driver = DriverSummary {
            iteration: Some(5),
            ..stopped_driver()
        };
        let h = decide_with(
            &verdict(true, false, Some("max_iterations")),
            &driver,
            false,
        );
        assert_eq!(h.state, State::NeedsPerson);
        assert_eq!(h.command.as_deref(), Some("loopx recover --dir /l"));
        // Enforce mode: its gate is closed, and the Goal Focus command
        // shows the dispatch and cancels it by its exact id.
        let enforce = decide(&Inputs {
            dir: "/l",
            verdict: &verdict(false, false, None),
            ending: None,
            driver: &driver,
            should_run: true,
            backoff_reason: "",
            now: now(),
            candidate: None,
            enforce: true,
            direction: &[],
        });
        assert_eq!(enforce.state, State::NeedsPerson);
        assert!(enforce.line.contains("gate is closed"), "{}", enforce.line);
        assert_eq!(
            enforce.command.as_deref(),
            Some("loopx goal-focus recover-dispatch --dir /l")
        );
    }

    #[test]
    fn a_dead_login_needs_a_person_but_an_ordinary_failure_does_not() {
        let dead = DriverSummary {
            last: Some(settled(TurnOutcome::Failed(FailureClass::Auth))),
            ..stopped_driver()
        };
        let h = decide_with(&verdict(false, false, None), &dead, true);
        assert_eq!(h.state, State::NeedsPerson);
        assert!(h.line.contains("codex refused its login"), "{}", h.line);
        let failed = DriverSummary {
            last: Some(settled(TurnOutcome::Failed(FailureClass::Failure))),
            ..stopped_driver()
        };
        assert_eq!(
            decide_with(&verdict(false, false, None), &failed, true).state,
            State::NotDriven
        );
    }

    #[test]
    fn a_closed_enforce_gate_needs_a_person_with_the_command_that_says_why() {
        let signals = [Signal {
            trigger: loopx_core::focus::plan::Trigger::MissingPlan,
            detail: "no plan".into(),
        }];
        let stopped = DriverSummary {
            running: false,
            iteration: None,
            ..running()
        };
        for driver in [&stopped, &running()] {
            let h = decide(&Inputs {
                dir: "/l",
                verdict: &verdict(false, false, None),
                ending: None,
                driver,
                should_run: true,
                backoff_reason: "",
                now: now(),
                candidate: None,
                enforce: true,
                direction: &signals,
            });
            assert_eq!(h.state, State::NeedsPerson);
            assert!(
                h.line.contains("gate is closed (missing_plan)"),
                "{}",
                h.line
            );
            assert_eq!(
                h.command.as_deref(),
                Some("loopx goal-focus status --dir /l")
            );
        }
        // A loop that is done is stopped, gate or not.
        let done = decide(&Inputs {
            dir: "/l",
            verdict: &verdict(true, false, Some("loops_reached")),
            ending: Some(&Ending::IterationCap { iterations: 4 }),
            driver: &stopped,
            should_run: false,
            backoff_reason: "",
            now: now(),
            candidate: None,
            enforce: true,
            direction: &signals,
        });
        assert_eq!(done.state, State::IterationCap);
    }
}
