//! Each ending from a ledger built through its owner, as a view reads it.

use super::*;
use crate::driver::classify::{FailureClass, Usage};
use crate::driver::session::Exit;
use crate::driver::TurnOutcome;
use crate::ledger::arbiter::{arbitrate, Sentinels};
use crate::ledger::budget::Budget;
use crate::ledger::proof::tests::MemoryFiles;
use crate::ledger::vocabulary::Mode;
use crate::ledger::{
    CheckRun, InitLoop, IterationReport, LedgerContext, LedgerOwner, LedgerRequest,
};
use crate::operation::{OperationId, Owner};
use jiff::Timestamp;

const NOW: Timestamp = Timestamp::UNIX_EPOCH;

/// Apply `requests` in order, each of which must be accepted.
fn ledger(init: InitLoop, requests: Vec<LedgerRequest>) -> Ledger {
    let files = MemoryFiles::with_valid_artifact("proof-1");
    let mut state = None;
    for (n, request) in std::iter::once(LedgerRequest::Init(init))
        .chain(requests)
        .enumerate()
    {
        let operation_id = OperationId::parse(&format!("op-{n}")).unwrap();
        let context = LedgerContext {
            now: NOW,
            operation_id: &operation_id,
            files: &files,
        };
        let decided = LedgerOwner::decide(state.as_ref(), &request, &context).unwrap();
        state = Some(LedgerOwner::evolve(state, &decided.event.unwrap()));
    }
    state.unwrap()
}

fn record(decision: Decision, stop_reason: &str, evidence: &[&str]) -> LedgerRequest {
    let mut report = IterationReport {
        mode: Some(Mode::BoundedResearch),
        objective: "work".into(),
        decision: Some(decision),
        stop_reason: stop_reason.into(),
        ..Default::default()
    };
    report.evidence_checked.evidence_ids = evidence.iter().map(|e| (*e).to_owned()).collect();
    LedgerRequest::AppendIteration(report)
}

fn idle() -> DriverSummary {
    DriverSummary::default()
}

fn ending_of(ledger: &Ledger, sentinels: Sentinels, driver: &DriverSummary) -> Option<Ending> {
    ending(ledger, &arbitrate(ledger, sentinels, NOW), driver)
}

fn iterations(max: u64) -> InitLoop {
    InitLoop::new("goal", "criteria", Budget::iterations_only(max))
}

/// A loop of one iteration whose success claim its check settled with
/// `exit_code`.
fn claim_checked(exit_code: i32) -> Ledger {
    let mut init = iterations(1);
    init.success_check = "check".into();
    let check = CheckRun {
        command: "check".into(),
        exit_code: Some(exit_code),
        timed_out: false,
        log: "checks/1.log".into(),
        duration_ms: 5,
    };
    ledger(
        init,
        vec![
            record(Decision::Stop, "success", &["proof-1"]),
            LedgerRequest::SettleClaim {
                iteration: 1,
                check,
            },
        ],
    )
}

#[test]
fn a_verified_success_check_is_a_success_even_on_the_last_iteration() {
    let loop_ = claim_checked(0);
    let ending = ending_of(&loop_, Sentinels::default(), &idle()).unwrap();
    assert_eq!(
        ending,
        Ending::Succeeded {
            iteration: 1,
            checked: true
        }
    );
    assert_eq!(ending.tone(), Tone::Good);
    assert_eq!(
        ending.words(),
        "succeeded: iteration 1's success check passed"
    );
}

#[test]
fn an_early_stop_with_proof_succeeds_and_a_stop_at_the_cap_does_not() {
    let early = ledger(
        iterations(3),
        vec![record(Decision::Stop, "proof_found", &["proof-1"])],
    );
    assert_eq!(
        ending_of(&early, Sentinels::default(), &idle()),
        Some(Ending::Succeeded {
            iteration: 1,
            checked: false
        })
    );
    // At the cap no proof is owed, so a success word proves nothing.
    let capped = ledger(
        iterations(2),
        vec![
            record(Decision::Continue, "", &[]),
            record(Decision::Stop, "success", &[]),
        ],
    );
    let ending = ending_of(&capped, Sentinels::default(), &idle()).unwrap();
    assert_eq!(ending, Ending::IterationCap { iterations: 2 });
    assert_eq!(ending.tone(), Tone::Attention);
    assert_eq!(
        ending.words(),
        "finished at the iteration cap: 2 iterations recorded, no success claimed"
    );
}

#[test]
fn a_sentinel_outranks_everything_and_names_its_file() {
    let early = ledger(
        iterations(3),
        vec![record(Decision::Stop, "proof_found", &["proof-1"])],
    );
    let user = Sentinels {
        stop_requested: true,
        ..Sentinels::default()
    };
    let ending = ending_of(&early, user, &idle()).unwrap();
    assert_eq!(
        ending,
        Ending::StoppedByUser {
            sentinel: "STOP_REQUESTED"
        }
    );
    assert_eq!(ending.words(), "stopped by the user (STOP_REQUESTED)");
    assert_eq!(ending.tone(), Tone::Neutral);
}

#[test]
fn a_spent_budget_says_which() {
    let mut budget = Budget::iterations_only(5);
    budget.max_tokens = 100;
    let mut spend = record(Decision::Stop, "", &[]);
    if let LedgerRequest::AppendIteration(report) = &mut spend {
        report.tokens = 150;
    }
    let loop_ = ledger(InitLoop::new("goal", "criteria", budget), vec![spend]);
    let ending = ending_of(&loop_, Sentinels::default(), &idle()).unwrap();
    assert_eq!(
        ending,
        Ending::BudgetExhausted {
            budget: Exhausted::Tokens
        }
    );
    assert_eq!(
        ending.words(),
        "budget exhausted: the token budget is used up"
    );
}

#[test]
fn a_blocked_agent_needs_a_person_with_its_reason() {
    let loop_ = ledger(
        iterations(1),
        vec![record(Decision::Blocked, "no access to the dataset", &[])],
    );
    let ending = ending_of(&loop_, Sentinels::default(), &idle()).unwrap();
    assert_eq!(ending.tone(), Tone::Bad);
    assert_eq!(
        ending.words(),
        "needs a person: the agent reported itself blocked on iteration 1 (no access to the dataset)"
    );
    let loop_ = claim_checked(1);
    assert_eq!(
        ending_of(&loop_, Sentinels::default(), &idle())
            .unwrap()
            .words(),
        "needs a person: the success check refused iteration 1's claim and no iteration is left"
    );
}

#[test]
fn a_driver_that_gave_up_is_a_failure_and_one_told_to_stop_is_not() {
    let loop_ = ledger(iterations(5), vec![]);
    let run = |exit| RunEnded {
        exit,
        reason: "3 consecutive failed turns; the last: exited 0 without recording".into(),
        turns: 3,
        at: NOW,
    };
    let turn = Settlement {
        dispatch_id: "d3".into(),
        iteration: 1,
        provider: "claude".into(),
        outcome: TurnOutcome::NoAdvance,
        exit_status: Some(0),
        usage: Usage::default(),
        settled_at: NOW,
        note: String::new(),
    };
    let gave_up = DriverSummary {
        last: Some(turn.clone()),
        last_run: Some(run(Exit::MaxFailures)),
        ..idle()
    };
    let ending = ending_of(&loop_, Sentinels::default(), &gave_up).unwrap();
    assert!(matches!(ending, Ending::Failed { .. }));
    assert_eq!(
        ending.words(),
        "failed: the driver gave up after 3 turns (exit 3): 3 consecutive failed turns; the last: exited 0 without recording (last failed turn: iteration 1 on claude, no_advance)"
    );
    for exit in [Exit::Interrupted, Exit::Terminated, Exit::Done] {
        let told = DriverSummary {
            last_run: Some(run(exit)),
            ..idle()
        };
        assert_eq!(ending_of(&loop_, Sentinels::default(), &told), None);
    }
    // A failure an auth class names still reads as the failure it was.
    let auth = DriverSummary {
        last: Some(Settlement {
            outcome: TurnOutcome::Failed(FailureClass::Auth),
            ..turn
        }),
        last_run: Some(run(Exit::AuthDead)),
        ..idle()
    };
    assert!(ending_of(&loop_, Sentinels::default(), &auth)
        .unwrap()
        .words()
        .contains("failed:auth"));
}

#[test]
fn a_loop_that_goes_on_has_no_ending() {
    let loop_ = ledger(iterations(5), vec![record(Decision::Continue, "", &[])]);
    assert_eq!(ending_of(&loop_, Sentinels::default(), &idle()), None);
}
