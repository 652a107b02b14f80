//! The driver's run-or-stop policy: from what the store says now and how
//! this run has gone, the one thing `loopx drive` does next.
//!
//! It owns the order of the questions (a pending success claim first, then
//! an undecided candidate (reviewed by the panel, or a stop), the stop
//! arbiter, the operator's pause, this run's turn cap, a plan awaiting its
//! strategy review (reviewed by the panel), in enforce mode any replan
//! signal still firing (the pre-dispatch gate: a stop), should-run's
//! admission, and last the provider), so the driver's loop only executes
//! the answer. It
//! does not own the answers themselves: the arbiter
//! ([`crate::ledger::arbiter`]), should-run ([`crate::goal::continuation`]),
//! the run's failure and failover state ([`super::session`]) and the
//! panel's attempt cap ([`crate::panel::attempts`]; the step only reads
//! what is left of it) do. What happens after a turn is
//! [`super::session::Session::after`]'s.

use super::session::{Exit, Session};
use super::DriverSummary;
use crate::digest::Digest;
use crate::driver::provider::Family;
use crate::focus::candidate::Hold;
use crate::focus::plan::Trigger;
use crate::focus::signals::Signal;
use crate::goal::continuation::{Action, Frontier, ShouldRun};
use crate::ledger::arbiter::Verdict;
use crate::ledger::Ledger;
use jiff::{SignedDuration, Timestamp};

/// Everything the step reads; the adapter gathers it from the store.
pub struct Situation<'a> {
    pub ledger: &'a Ledger,
    pub verdict: &'a Verdict,
    /// should-run for the driving agent, from the same reads.
    pub should_run: &'a ShouldRun,
    /// What should-run read of the frontier, for the driving agent.
    pub frontier: &'a Frontier,
    pub session: &'a Session,
    /// Turns this run has started, and the most it may (`--max-iterations`).
    pub turns: u64,
    pub max_turns: Option<u64>,
    /// How long a paused driver sleeps before it looks again.
    pub pause_poll: SignedDuration,
    pub now: Timestamp,
    /// What the candidate stream holds back (enforce mode only).
    pub candidate: Option<&'a Hold>,
    /// The review panel, when this run runs it (`drive --panel`): the
    /// attempts it has left on the pending candidate.
    pub panel: Option<PanelBudget>,
    /// The review panel's attempts on the plan awaiting a strategy review,
    /// when this run runs the panel and a plan awaits one (enforce mode).
    pub strategy: Option<PanelBudget>,
    /// Enforce mode: the replan signals that fire (empty in other modes).
    /// Any one closes the pre-dispatch gate: no turn runs without a
    /// reviewed direction.
    pub direction: &'a [Signal],
    /// Enforce mode: the executor family the active direction's strategy
    /// review was made for. A turn of another family is a failover the
    /// review did not cover.
    pub reviewed_executor: Option<Family>,
    /// Whether the driver may answer a closed gate itself (the
    /// specification's gate 6): it runs the panel (whose strategy review
    /// commits a direction), and has not already replanned since its last
    /// turn (a reviewed direction that leaves the gate closed is for a
    /// person, not another round).
    pub may_replan: bool,
    /// The family of a provider (the provider table and the environment's
    /// endpoint overrides, read by the application).
    pub family_of: &'a dyn Fn(&str) -> Family,
}

/// The panel's attempts on its subject: `used` of `max`, and how many
/// invited reviewers (each of another family than the executor's) have not
/// been tried on it yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PanelBudget {
    pub used: u32,
    pub max: u32,
    pub untried: u32,
}

impl PanelBudget {
    /// Whether the panel may still ask someone: below the cap, or past it
    /// by rotation to a reviewer not yet tried
    /// ([`crate::panel::attempts::may_start`]).
    pub fn may_review(&self) -> bool {
        self.used < self.max || self.untried > 0
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run the loop's success_check on the agent's claim before anything
    /// else: an agent's own "done" is never enough.
    VerifyClaim { iteration: u64 },
    /// End the run with this exit code.
    Stop { exit: Exit, reason: String },
    /// The operator paused the loop: look again at `until`.
    Pause { until: Timestamp, reason: String },
    /// should-run says back off (every todo leased to someone else or
    /// deferred, ...): start no turn; look again when the state changes,
    /// at `until` at the latest.
    Wait { until: Timestamp, reason: String },
    /// Run the review panel's result review on the pending candidate
    /// before any new work.
    Review { fingerprint: Digest },
    /// Run the review panel's strategy review on the plan awaiting one
    /// before the next dispatch.
    ReviewStrategy,
    /// Gate 6: a replan trigger closed the pre-dispatch gate; propose a
    /// plan for it, which the panel's strategy review then decides.
    Replan { trigger: Trigger },
    /// Start a turn with this provider.
    Run { provider: String },
}

/// The next step for `situation`.
pub fn next(situation: &Situation<'_>) -> Step {
    let Situation {
        ledger,
        verdict,
        should_run,
        frontier,
        session,
        turns,
        max_turns,
        pause_poll,
        now,
        candidate,
        panel,
        strategy,
        direction,
        reviewed_executor,
        may_replan,
        family_of,
    } = situation;
    if let Some(iteration) = ledger.pending_claim {
        return Step::VerifyClaim { iteration };
    }
    // Before anything else may launch work: an undecided result. The
    // driver never retries or fails over past it; a person (or the
    // review) acts first, and a restarted driver stops here again.
    match candidate {
        Some(Hold::Quarantined(fingerprint)) => {
            return Step::Stop {
                exit: Exit::RuntimeError,
                reason: format!("candidate {fingerprint} is quarantined: no turn runs until a person inspects it (`loopx goal-focus recover-quarantine`)"),
            }
        }
        Some(Hold::Pending(fingerprint)) => {
            return match panel {
                Some(budget) if budget.may_review() => Step::Review {
                    fingerprint: fingerprint.clone(),
                },
                Some(budget) => Step::Stop {
                    exit: Exit::RuntimeError,
                    reason: format!("candidate {fingerprint} has no usable review after the panel's {} attempts and no reviewer of another family is left to rotate to: no new work is launched until a person decides it (`loopx goal-focus review --file REVIEW.json`, or `loopx goal-focus quarantine`)", budget.max),
                },
                None => Step::Stop {
                    exit: Exit::RuntimeError,
                    reason: format!("candidate {fingerprint} awaits its result review: no new work is launched until a review decides it (`loopx panel --phase result_review`, `drive --panel on`, or a person's `loopx goal-focus review`)"),
                },
            }
        }
        None => {}
    }
    if verdict.done {
        return Step::Stop {
            exit: Exit::Done,
            // In the words every view uses (`crate::ending`), with the
            // arbiter's code that scripts know.
            reason: format!(
                "done: {} ({})",
                crate::ending::ending(ledger, verdict, &DriverSummary::default())
                    .map_or_else(|| "the loop is over".to_owned(), |ending| ending.words()),
                verdict.reason.unwrap_or("done")
            ),
        };
    }
    if verdict.paused {
        return Step::Pause {
            until: now.checked_add(*pause_poll).unwrap_or(*now),
            reason: "paused (PAUSE sentinel)".into(),
        };
    }
    if max_turns.is_some_and(|max| *turns >= max) {
        return Step::Stop {
            exit: Exit::Done,
            reason: format!(
                "ran the {} --max-iterations allowed for this run",
                crate::words::count(*turns, "turn")
            ),
        };
    }
    // A direction awaiting its review is reviewed before the turn that
    // would execute it.
    match strategy {
        Some(budget) if budget.may_review() => return Step::ReviewStrategy,
        Some(budget) => {
            return Step::Stop {
                exit: Exit::RuntimeError,
                reason: format!("the plan awaiting a strategy review has no usable advice after the panel's {} attempts and no reviewer of another family is left to rotate to: no new work is launched until a person decides it (`loopx goal-focus strategy-review --file ADVICE.json`, or `loopx goal-focus replan`)", budget.max),
            }
        }
        None => {}
    }
    if let Some(first) = direction.first().filter(|_| *may_replan) {
        return Step::Replan {
            trigger: first.trigger,
        };
    }
    if !direction.is_empty() {
        let triggers: Vec<&str> = direction.iter().map(|s| s.trigger.as_str()).collect();
        return Step::Stop {
            exit: Exit::RuntimeError,
            reason: format!("enforce mode: the pre-dispatch gate is closed ({}): no turn runs without a reviewed direction (`loopx goal-focus status` says why; `loopx goal-focus replan` proposes one, and a different-family strategy review commits it: `drive --panel on`, `loopx panel --phase strategy_review` or `loopx goal-focus strategy-review`)", triggers.join(", ")),
        };
    }
    let hint = &should_run.scheduler_hint;
    // A lease the driving agent holds is its own unfinished work, which
    // its next turn resumes: only other agents' leases hold it back.
    let resumes_own_work = hint.action == Action::BackoffUntilStateChange && frontier.next_is_own;
    if !should_run.should_run && !resumes_own_work {
        let continuation = &hint.goal_runtime_continuation;
        let recheck = SignedDuration::from_secs(
            continuation
                .recheck_after_seconds
                .map_or(i64::MAX, |s| i64::try_from(s).unwrap_or(i64::MAX)),
        );
        let until = continuation
            .recheck_at
            .or_else(|| now.checked_add(recheck).ok())
            .unwrap_or(*now);
        return Step::Wait {
            until,
            reason: format!("waiting: {}", hint.reason),
        };
    }
    match session.current() {
        Some(provider) => match reviewed_executor.filter(|f| family_of(provider) != *f) {
            // A failover the review did not cover: gate 6 replans for the
            // new family when the driver runs the panel.
            Some(_) if *may_replan => Step::Replan {
                trigger: Trigger::ProviderFailover,
            },
            Some(reviewed) => Step::Stop {
                exit: Exit::RuntimeError,
                reason: format!("enforce mode: provider {provider} ({}) is not of the family the direction was reviewed for ({}): a failover to another family needs a replan and its strategy review (`loopx goal-focus replan --trigger manual`)", family_of(provider).name(), reviewed.name()),
            },
            None => Step::Run {
                provider: provider.to_owned(),
            },
        },
        None => Step::Stop {
            exit: Exit::ProviderUnavailable,
            reason: "no provider left".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::session::Limits;
    use crate::goal::continuation::{should_run, Frontier};
    use crate::goal::todo::TodoAction;
    use crate::goal::{
        Actor, Goal, GoalCommand, GoalContext, GoalOwner, GoalRequest, RootCommitments,
    };
    use crate::ledger::arbiter::{arbitrate, Sentinels};
    use crate::ledger::budget::Budget;
    use crate::ledger::{InitLoop, LedgerEvent, LedgerOwner};
    use crate::operation::Owner as _;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH
            .checked_add(SignedDuration::from_secs(1_000_000 + seconds))
            .unwrap()
    }

    fn ledger() -> Ledger {
        LedgerOwner::evolve(
            None,
            &LedgerEvent::Initialized {
                run_id: "run-1".into(),
                at: at(0),
                config: Box::new(InitLoop::new(
                    "Prove lemma B",
                    "checked proof",
                    Budget::iterations_only(10),
                )),
            },
        )
    }

    fn apply(goal: Option<Goal>, actor: Actor, request: GoalRequest) -> Goal {
        let command = GoalCommand {
            actor,
            expected_instance: None,
            request,
            base_revision: None,
        };
        let decided =
            GoalOwner::decide(goal.as_ref(), &command, &GoalContext { now: at(0) }).unwrap();
        GoalOwner::evolve(goal, &decided.event.unwrap())
    }

    /// A goal with one todo `t1`, to which `action` was done by `by`.
    fn goal_with(by: &str, action: Option<TodoAction>) -> Goal {
        let goal = apply(
            None,
            Actor::Owner,
            GoalRequest::Create {
                goal_id: "main".into(),
                objective: "Prove lemma B".into(),
                commitments: RootCommitments::default(),
                todo_streams: false,
            },
        );
        let goal = apply(
            Some(goal),
            Actor::Owner,
            GoalRequest::AddTodo {
                id: Some("t1".into()),
                title: "work".into(),
            },
        );
        match action {
            None => goal,
            Some(action) => apply(
                Some(goal),
                Actor::Agent(by.into()),
                GoalRequest::Todo {
                    id: "t1".into(),
                    action,
                    note: String::new(),
                },
            ),
        }
    }

    struct Case {
        ledger: Ledger,
        sentinels: Sentinels,
        goal: Goal,
        session: Session,
        turns: u64,
        max_turns: Option<u64>,
        candidate: Option<Hold>,
        panel: Option<PanelBudget>,
        strategy: Option<PanelBudget>,
        direction: Vec<Signal>,
        reviewed_executor: Option<Family>,
        may_replan: bool,
    }

    impl Case {
        fn new() -> Self {
            Case {
                ledger: ledger(),
                sentinels: Sentinels::default(),
                goal: goal_with("", None),
                session: Session::new(vec!["claude".into(), "codex".into()], limits()),
                turns: 0,
                max_turns: None,
                candidate: None,
                panel: None,
                strategy: None,
                direction: Vec::new(),
                reviewed_executor: None,
                may_replan: false,
            }
        }

        fn step(&self) -> Step {
            let now = at(10);
            let verdict = arbitrate(&self.ledger, self.sentinels, now);
            let actor = Actor::Agent("agent".into());
            let frontier = Frontier::scan(&self.goal, &actor, now);
            let should_run = should_run(
                &self.ledger,
                &verdict,
                self.sentinels,
                (&self.goal, &frontier),
                &actor,
                now,
            );
            next(&Situation {
                ledger: &self.ledger,
                verdict: &verdict,
                should_run: &should_run,
                frontier: &frontier,
                session: &self.session,
                turns: self.turns,
                max_turns: self.max_turns,
                pause_poll: SignedDuration::from_secs(5),
                now,
                candidate: self.candidate.as_ref(),
                panel: self.panel,
                strategy: self.strategy,
                direction: &self.direction,
                reviewed_executor: self.reviewed_executor,
                may_replan: self.may_replan,
                family_of: &|provider: &str| match provider {
                    "claude" => Family::Anthropic,
                    "codex" => Family::Openai,
                    _ => Family::Unverified,
                },
            })
        }
    }

    fn limits() -> Limits {
        Limits {
            max_failures: 3,
            max_quota_waits: 0,
            quota_backoff_seconds: 60,
            max_quota_wait_seconds: 3600,
        }
    }

    #[test]
    fn a_runnable_frontier_runs_the_first_provider_not_excluded() {
        assert_eq!(
            Case::new().step(),
            Step::Run {
                provider: "claude".into()
            }
        );
    }

    #[test]
    fn a_pending_success_claim_is_verified_before_anything_else() {
        let mut case = Case::new();
        case.ledger.pending_claim = Some(4);
        case.sentinels.stop_requested = true;
        assert_eq!(case.step(), Step::VerifyClaim { iteration: 4 });
    }

    #[test]
    fn the_stop_arbiter_ends_the_run_with_exit_0() {
        let mut case = Case::new();
        case.sentinels.stop_requested = true;
        let Step::Stop { exit, reason } = case.step() else {
            panic!("not a stop: {:?}", case.step())
        };
        assert_eq!(exit, Exit::Done);
        assert_eq!(
            reason,
            "done: stopped by the user (STOP_REQUESTED) (user_stop_requested)"
        );
    }

    #[test]
    fn a_paused_loop_pauses_until_the_next_look() {
        let mut case = Case::new();
        case.sentinels.paused = true;
        assert_eq!(
            case.step(),
            Step::Pause {
                until: at(15),
                reason: "paused (PAUSE sentinel)".into()
            }
        );
    }

    #[test]
    fn the_runs_turn_cap_stops_it_cleanly() {
        let mut case = Case::new();
        case.turns = 2;
        case.max_turns = Some(2);
        assert_eq!(
            case.step(),
            Step::Stop {
                exit: Exit::Done,
                reason: "ran the 2 turns --max-iterations allowed for this run".into()
            }
        );
        case.max_turns = Some(3);
        assert!(matches!(case.step(), Step::Run { .. }));
    }

    #[test]
    fn every_todo_leased_to_another_agent_waits_until_the_lease_expires() {
        let mut case = Case::new();
        case.goal = goal_with("other", Some(TodoAction::Claim { ttl_seconds: 600 }));
        let Step::Wait { until, reason } = case.step() else {
            panic!("not a wait: {:?}", case.step())
        };
        assert_eq!(until, at(600));
        assert!(
            reason.starts_with("waiting: every open todo is leased"),
            "{reason}"
        );
    }

    #[test]
    fn a_lease_the_driving_agent_holds_is_resumed_not_waited_on() {
        let mut case = Case::new();
        case.goal = goal_with("agent", Some(TodoAction::Claim { ttl_seconds: 600 }));
        assert!(matches!(case.step(), Step::Run { .. }), "{:?}", case.step());
    }

    #[test]
    fn every_todo_deferred_waits_until_the_first_is_due() {
        let mut case = Case::new();
        case.goal = goal_with("agent", Some(TodoAction::Defer { seconds: 120 }));
        let Step::Wait { until, reason } = case.step() else {
            panic!("not a wait: {:?}", case.step())
        };
        assert_eq!(until, at(120));
        assert!(
            reason.starts_with("waiting: every open todo is deferred"),
            "{reason}"
        );
    }

    #[test]
    fn every_todo_blocked_waits_for_fresh_evidence() {
        let mut case = Case::new();
        case.goal = goal_with(
            "agent",
            Some(TodoAction::Block {
                reason: "needs data".into(),
            }),
        );
        let Step::Wait { until, reason } = case.step() else {
            panic!("not a wait: {:?}", case.step())
        };
        assert!(until > at(10));
        assert!(reason.contains("blocked"), "{reason}");
    }

    #[test]
    fn no_provider_left_stops_with_exit_6() {
        let mut case = Case::new();
        let now = at(0);
        for _ in 0..2 {
            case.session
                .after(super::super::session::TurnResult::Unavailable, None, now);
        }
        assert_eq!(
            case.step(),
            Step::Stop {
                exit: Exit::ProviderUnavailable,
                reason: "no provider left".into()
            }
        );
    }

    #[test]
    fn an_undecided_candidate_stops_the_driver_without_retry_or_failover() {
        let digest = crate::digest::Digest::of_bytes(b"candidate");
        for hold in [
            Hold::Quarantined(digest.clone()),
            Hold::Pending(digest.clone()),
        ] {
            let mut case = Case::new();
            case.candidate = Some(hold);
            match case.step() {
                Step::Stop { exit, reason } => {
                    assert_eq!(exit, Exit::RuntimeError);
                    assert!(reason.contains(digest.as_str()), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn with_the_panel_on_a_pending_candidate_is_reviewed_until_its_attempts_run_out() {
        let digest = crate::digest::Digest::of_bytes(b"candidate");
        let mut case = Case::new();
        case.candidate = Some(Hold::Pending(digest.clone()));
        case.panel = Some(PanelBudget {
            used: 2,
            max: 3,
            untried: 0,
        });
        assert_eq!(
            case.step(),
            Step::Review {
                fingerprint: digest.clone()
            }
        );
        case.panel = Some(PanelBudget {
            used: 3,
            max: 3,
            untried: 0,
        });
        match case.step() {
            Step::Stop { exit, reason } => {
                assert_eq!(exit, Exit::RuntimeError);
                assert!(
                    reason.contains("no usable review after the panel's 3 attempts"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        // A quarantine is never reviewed, panel or not.
        case.candidate = Some(Hold::Quarantined(digest));
        case.panel = Some(PanelBudget {
            used: 0,
            max: 3,
            untried: 0,
        });
        assert!(matches!(case.step(), Step::Stop { .. }));
    }

    #[test]
    fn with_the_panel_on_a_plan_awaiting_review_is_reviewed_before_the_next_turn() {
        let mut case = Case::new();
        case.strategy = Some(PanelBudget {
            used: 0,
            max: 2,
            untried: 0,
        });
        assert_eq!(case.step(), Step::ReviewStrategy);
        // The stop arbiter still comes first.
        case.sentinels.stop_requested = true;
        assert!(matches!(
            case.step(),
            Step::Stop {
                exit: Exit::Done,
                ..
            }
        ));
        case.sentinels.stop_requested = false;
        // Past the cap, a reviewer of another family not yet tried is
        // rotated to instead of asking a person.
        case.strategy = Some(PanelBudget {
            used: 2,
            max: 2,
            untried: 1,
        });
        assert_eq!(case.step(), Step::ReviewStrategy);
        case.strategy = Some(PanelBudget {
            used: 2,
            max: 2,
            untried: 0,
        });
        match case.step() {
            Step::Stop { exit, reason } => {
                assert_eq!(exit, Exit::RuntimeError);
                assert!(
                    reason.contains("no usable advice after the panel's 2 attempts")
                        && reason.contains("no reviewer of another family is left"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_firing_replan_signal_closes_the_enforce_gate_after_the_strategy_review() {
        let mut case = Case::new();
        case.direction = vec![Signal {
            trigger: crate::focus::plan::Trigger::ReviewerDissent,
            detail: "the strategy reviewer objected".into(),
        }];
        match case.step() {
            Step::Stop { exit, reason } => {
                assert_eq!(exit, Exit::RuntimeError);
                assert!(reason.contains("reviewer_dissent"), "{reason}");
            }
            other => panic!("expected the gate to stop the run, got {other:?}"),
        }
        // A plan awaiting its review is reviewed first: that may clear it.
        case.strategy = Some(PanelBudget {
            used: 0,
            max: 3,
            untried: 0,
        });
        assert_eq!(case.step(), Step::ReviewStrategy);
        // No signal: the turn runs.
        case.strategy = None;
        case.direction.clear();
        assert!(matches!(case.step(), Step::Run { .. }));
    }

    #[test]
    fn gate_six_replans_itself_when_it_runs_the_panel_and_has_not_just_replanned() {
        let mut case = Case::new();
        case.direction = vec![Signal {
            trigger: crate::focus::plan::Trigger::ScopeOnly,
            detail: "three scope-only iterations".into(),
        }];
        case.may_replan = true;
        assert_eq!(
            case.step(),
            Step::Replan {
                trigger: crate::focus::plan::Trigger::ScopeOnly
            }
        );
        // The plan it proposed is reviewed before anything else.
        case.strategy = Some(PanelBudget {
            used: 0,
            max: 3,
            untried: 0,
        });
        assert_eq!(case.step(), Step::ReviewStrategy);
        // A reviewed direction that leaves the gate closed goes to a person.
        case.strategy = None;
        case.may_replan = false;
        assert!(matches!(case.step(), Step::Stop { .. }));
    }

    #[test]
    fn a_turn_of_another_family_than_the_reviewed_one_is_a_failover_that_needs_a_replan() {
        let mut case = Case::new();
        case.reviewed_executor = Some(Family::Anthropic);
        assert_eq!(
            case.step(),
            Step::Run {
                provider: "claude".into()
            }
        );
        case.reviewed_executor = Some(Family::Openai);
        match case.step() {
            Step::Stop { exit, reason } => {
                assert_eq!(exit, Exit::RuntimeError);
                assert!(reason.contains("needs a replan"), "{reason}");
            }
            other => panic!("expected a stop, got {other:?}"),
        }
        // A driver that runs the panel replans for the new family itself.
        case.may_replan = true;
        assert_eq!(
            case.step(),
            Step::Replan {
                trigger: Trigger::ProviderFailover
            }
        );
    }
}
