//! The ledger rules, driven through `decide`/`evolve` in memory.

use super::arbiter::{arbitrate, Sentinels};
use super::audit::Auditor;
use super::budget::{Budget, Spent};
use super::proof::tests::MemoryFiles;
use super::vocabulary::{Decision, GoalFocusMode, LoopStatus, Mode};
use super::*;
use crate::digest::canonical_json;
use crate::operation::{OperationId, Owner};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

const T0: Timestamp = Timestamp::UNIX_EPOCH;

fn at(seconds: i64) -> Timestamp {
    T0.checked_add(SignedDuration::from_secs(seconds)).unwrap()
}

fn init_request(max_iterations: u64) -> InitLoop {
    InitLoop::new(
        "Prove lemma B",
        "checked proof",
        Budget::iterations_only(max_iterations),
    )
}

fn report(decision: Decision) -> IterationReport {
    IterationReport {
        mode: Some(Mode::BoundedResearch),
        objective: "Check evidence gaps".into(),
        decision: Some(decision),
        ..Default::default()
    }
}

/// A ledger in memory plus its journal, written only through the owner.
struct Harness {
    state: Option<Ledger>,
    journal: Vec<(String, String, String)>,
    files: MemoryFiles,
    clock: i64,
}

impl Harness {
    fn new(init: InitLoop) -> Self {
        let mut harness = Harness {
            state: None,
            journal: vec![],
            files: MemoryFiles::with_valid_artifact("proof-1"),
            clock: 0,
        };
        harness
            .apply(LedgerRequest::Init(init))
            .expect("init is accepted");
        harness
    }

    fn apply(&mut self, request: LedgerRequest) -> Result<LedgerReceipt, LedgerError> {
        self.clock += 1;
        let operation_id = OperationId::parse(&format!("op-{}", self.journal.len() + 1)).unwrap();
        let context = LedgerContext {
            now: at(self.clock),
            operation_id: &operation_id,
            files: &self.files,
        };
        let decided = LedgerOwner::decide(self.state.as_ref(), &request, &context)?;
        let event = decided.event.expect("the ledger always writes");
        self.journal.push((
            operation_id.to_string(),
            LedgerOwner::event_kind(&event).to_owned(),
            canonical_json(&event),
        ));
        self.state = Some(LedgerOwner::evolve(self.state.take(), &event));
        Ok(decided.receipt)
    }

    fn append(&mut self, report: IterationReport) -> Result<LedgerReceipt, LedgerError> {
        self.apply(LedgerRequest::AppendIteration(report))
    }

    fn ledger(&self) -> &Ledger {
        self.state.as_ref().unwrap()
    }

    fn audit_with(&self, snapshot: &str) -> audit::Audit {
        let mut auditor = Auditor::new(&self.files, at(self.clock));
        for (index, (operation_id, kind, event)) in self.journal.iter().enumerate() {
            auditor.entry(index as u64 + 1, operation_id, kind, event);
        }
        auditor.finish(Some((self.journal.len() as u64, snapshot)))
    }

    fn audit(&self) -> audit::Audit {
        self.audit_with(&canonical_json(self.ledger()))
    }
}

fn early_success_stop(evidence: &str) -> IterationReport {
    let mut stop = report(Decision::Stop);
    stop.stop_reason = "proof_found".into();
    stop.evidence_checked.evidence_ids = vec![evidence.into()];
    stop
}

#[test]
fn iterations_are_numbered_from_one_and_spend_is_summed() {
    let mut h = Harness::new(init_request(5));
    for n in 1..=3u64 {
        let mut r = report(Decision::Continue);
        r.tokens = 10;
        r.usd = 0.25;
        let receipt = h.append(r).unwrap();
        assert!(
            matches!(receipt, LedgerReceipt::AppendIteration { iteration, .. } if iteration == n)
        );
    }
    assert_eq!(
        h.ledger().spent,
        Spent {
            iterations: 3,
            tokens: 30,
            usd: 0.75
        }
    );
    assert_eq!(h.ledger().status, LoopStatus::Running);
    assert!(h.audit().is_valid(), "{:?}", h.audit());
}

#[test]
fn the_final_allowed_iteration_must_stop_or_block() {
    let mut h = Harness::new(init_request(2));
    h.append(report(Decision::Continue)).unwrap();
    assert!(matches!(
        h.append(report(Decision::Revise)),
        Err(LedgerError::ContinueOnFinal { .. })
    ));
    // On the final iteration neither a reason nor proof is owed.
    h.append(report(Decision::Blocked)).unwrap();
    assert_eq!(h.ledger().status, LoopStatus::Blocked);
    assert!(h.audit().is_valid());
}

#[test]
fn nothing_is_appended_after_a_terminal_decision_or_past_the_cap() {
    let mut h = Harness::new(init_request(1));
    h.append(report(Decision::Stop)).unwrap();
    assert!(matches!(
        h.append(report(Decision::Stop)),
        Err(LedgerError::AfterTerminal {
            status: LoopStatus::Stopped
        })
    ));
    // A loop that could never record an iteration is refused at init.
    let at = Timestamp::UNIX_EPOCH;
    let id = OperationId::parse("init-zero").unwrap();
    let context = LedgerContext {
        now: at,
        operation_id: &id,
        files: &proof::NoFiles,
    };
    assert_eq!(
        LedgerOwner::decide(None, &LedgerRequest::Init(init_request(0)), &context).unwrap_err(),
        LedgerError::NoIterations
    );
}

#[test]
fn an_early_blocked_is_refused() {
    let mut h = Harness::new(init_request(5));
    assert_eq!(
        h.append(report(Decision::Blocked)),
        Err(LedgerError::EarlyBlocked)
    );
    assert!(h.ledger().recent.is_empty());
}

#[test]
fn an_early_stop_needs_a_success_reason_and_a_passing_artifact() {
    let mut h = Harness::new(init_request(5));
    let mut vague = report(Decision::Stop);
    vague.stop_reason = "plateau".into();
    assert!(matches!(
        h.append(vague),
        Err(LedgerError::EarlyStopReason { .. })
    ));
    let mut unproven = report(Decision::Stop);
    unproven.stop_reason = "success".into();
    assert_eq!(
        h.append(unproven),
        Err(LedgerError::EarlyStopWithoutEvidence)
    );
    let refused = h
        .append(early_success_stop("no-such-artifact"))
        .unwrap_err();
    assert!(refused.to_string().contains("does not exist"), "{refused}");
    assert!(refused.details().unwrap()["expected_proof_artifact"].is_object());
    h.append(early_success_stop("proof-1")).unwrap();
    assert_eq!(h.ledger().status, LoopStatus::Stopped);
    assert!(h.audit().is_valid());
}

#[test]
fn a_record_that_spends_the_token_budget_must_end_the_loop() {
    let mut init = init_request(10);
    init.budget.max_tokens = 100;
    let mut h = Harness::new(init);
    let mut big = report(Decision::Continue);
    big.tokens = 100;
    assert!(matches!(
        h.append(big.clone()),
        Err(LedgerError::ContinueOnExhausted {
            budget: "token",
            ..
        })
    ));
    big.decision = Some(Decision::Stop);
    h.append(big).unwrap();
    let verdict = arbitrate(h.ledger(), Sentinels::default(), at(99));
    assert!(verdict.done);
    assert_eq!(
        verdict.conditions,
        ["credit_exhausted:tokens", "terminal_status:stopped"]
    );
}

#[test]
fn enforce_mode_refuses_direct_appends_and_init_is_once() {
    let mut init = init_request(5);
    init.goal_focus_mode = GoalFocusMode::Enforce;
    let mut h = Harness::new(init.clone());
    assert_eq!(
        h.append(report(Decision::Continue)),
        Err(LedgerError::EnforceNeedsDispatch)
    );
    assert!(matches!(
        h.apply(LedgerRequest::Init(init)),
        Err(LedgerError::AlreadyInitialized { .. })
    ));
}

#[test]
fn arbiter_checks_sentinels_then_budgets_then_user_only_then_status() {
    let mut init = init_request(5);
    init.stop_conditions.require_user_stop_only = true;
    init.budget.max_wall_time_seconds = 100;
    let mut h = Harness::new(init);
    h.append(early_success_stop("proof-1")).unwrap();
    let quiet = arbitrate(h.ledger(), Sentinels::default(), at(50));
    assert!(
        !quiet.done,
        "an agent's stop does not release a user-stop-only loop"
    );
    assert_eq!(quiet.reason, Some("awaiting_user_stop"));
    let late = arbitrate(
        h.ledger(),
        Sentinels {
            paused: true,
            ..Default::default()
        },
        at(101),
    );
    assert!(late.done && late.paused);
    assert_eq!(late.reason, Some("credit_exhausted:wall_time"));
    let stopped = arbitrate(
        h.ledger(),
        Sentinels {
            stop_requested: true,
            blocked: true,
            paused: false,
        },
        at(1),
    );
    assert_eq!(
        stopped.conditions[..2],
        ["user_stop_requested", "operator_blocked"]
    );
}

#[test]
fn audit_reports_a_snapshot_the_journal_does_not_explain() {
    let mut h = Harness::new(init_request(5));
    h.append(report(Decision::Continue)).unwrap();
    let mut tampered = h.ledger().clone();
    tampered.spent.iterations = 4;
    let audit = h.audit_with(&canonical_json(&tampered));
    assert!(
        audit
            .errors
            .iter()
            .any(|e| e.contains("disagrees with the journal on spent")),
        "{audit:?}"
    );
}

#[test]
fn audit_rechecks_proof_artifacts_and_record_order() {
    let mut h = Harness::new(init_request(5));
    h.append(early_success_stop("proof-1")).unwrap();
    assert!(h.audit().is_valid());
    h.files.artifacts.clear();
    let audit = h.audit();
    assert!(
        audit
            .errors
            .iter()
            .any(|e| e.starts_with("iteration 1: early stop")),
        "{audit:?}"
    );

    // A record smuggled in after the terminal one is caught by the same guard.
    let mut h = Harness::new(init_request(5));
    h.append(early_success_stop("proof-1")).unwrap();
    let (_, kind, event) = h.journal.last().unwrap().clone();
    h.journal.push((
        "op-3".into(),
        kind,
        event
            .replace("\"iteration\":1", "\"iteration\":2")
            .replace("op-2", "op-3"),
    ));
    let audit = h.audit();
    assert!(
        audit
            .errors
            .iter()
            .any(|e| e.contains("after loop status is stopped")),
        "{audit:?}"
    );
}

#[test]
fn audit_warns_but_does_not_fail_when_wall_time_runs_out() {
    let mut init = init_request(5);
    init.budget.max_wall_time_seconds = 2;
    let mut h = Harness::new(init);
    h.append(report(Decision::Continue)).unwrap();
    h.clock += 10;
    let audit = h.audit();
    assert!(audit.is_valid() && audit.warnings.len() == 1, "{audit:?}");
}

#[test]
fn views_carry_the_next_action_and_recent_records() {
    let mut h = Harness::new(init_request(5));
    let mut r = report(Decision::Continue);
    r.next_action = "Compare bounds".into();
    r.remaining_gaps = vec!["lemma C".into()];
    h.append(r).unwrap();
    let verdict = arbitrate(h.ledger(), Sentinels::default(), at(5));
    let md = view::recovery_markdown(h.ledger(), &verdict);
    assert!(md.contains("- Next safe action: Compare bounds"), "{md}");
    assert!(md.contains("- Remaining evidence gaps: lemma C"));
    assert!(md.contains("#1 continue (bounded-research) Check evidence gaps"));
    for _ in 0..(RECENT_RECORDS + 2) {
        if h.ledger().remaining_iterations() > 1 {
            h.append(report(Decision::Continue)).unwrap();
        }
    }
    assert!(h.ledger().recent.len() <= RECENT_RECORDS);
}

fn arbitrary_report() -> impl Strategy<Value = IterationReport> {
    (
        prop::sample::select(Decision::ALL.to_vec()),
        0u64..60,
        0u32..100,
        prop::option::of(prop::sample::select(vec!["proof-1", "missing", "../bad"])),
        prop::sample::select(vec!["", "success", "plateau", "Proof-Found"]),
    )
        .prop_map(|(decision, tokens, cents, evidence, reason)| {
            let mut r = report(decision);
            r.tokens = tokens;
            r.usd = f64::from(cents) / 100.0;
            r.stop_reason = reason.into();
            r.evidence_checked.evidence_ids = evidence.into_iter().map(str::to_owned).collect();
            r
        })
}

proptest! {
    /// Whatever agents throw at it, an accepted ledger is a valid ledger.
    #[test]
    fn random_appends_never_break_the_invariants(
        max_iterations in 1u64..8,
        max_tokens in prop::sample::select(vec![0u64, 50, 200]),
        reports in prop::collection::vec(arbitrary_report(), 0..16),
    ) {
        let mut init = init_request(max_iterations);
        init.budget.max_tokens = max_tokens;
        let mut h = Harness::new(init);
        for r in reports {
            let before = h.ledger().clone();
            let journal_len = h.journal.len();
            if h.append(r).is_err() {
                prop_assert_eq!(h.ledger(), &before, "a refusal changed the state");
                prop_assert_eq!(h.journal.len(), journal_len);
            }
            let ledger = h.ledger();
            prop_assert!(ledger.spent.iterations <= ledger.config.budget.max_iterations);
            if ledger.status == LoopStatus::Running {
                prop_assert!(ledger.config.budget.exhausted(&ledger.spent, 0).is_empty());
            }
        }
        let audit = h.audit();
        prop_assert!(audit.is_valid(), "{:?}", audit);
        prop_assert_eq!(audit.iterations, h.ledger().spent.iterations);
    }
}

#[test]
fn a_charge_or_record_that_would_overflow_a_total_is_refused() {
    let mut h = Harness::new(init_request(5));
    let mut big = report(Decision::Continue);
    big.usd = 1e308;
    h.append(big.clone()).unwrap();
    let charge = LedgerRequest::Charge {
        dispatch_id: "d-1".into(),
        tokens: 0,
        usd: 1e308,
    };
    assert!(matches!(
        h.apply(charge),
        Err(LedgerError::TotalOutOfRange(_))
    ));
    assert!(matches!(
        h.append(big),
        Err(LedgerError::TotalOutOfRange(_))
    ));
    assert_eq!(h.ledger().spent.usd, 1e308);
    assert!(h.audit().is_valid(), "{:?}", h.audit());
}

#[test]
fn the_stream_audit_refolds_through_the_owner_and_parses_the_snapshot() {
    let mut h = Harness::new(init_request(5));
    h.append(report(Decision::Continue)).unwrap();
    let run = |snapshot: &str| {
        let mut audit = audit::StreamAudit::<LedgerOwner>::new("ledger");
        for (index, (_, kind, event)) in h.journal.iter().enumerate() {
            audit.entry(index as u64 + 1, kind, event);
        }
        audit.finish(Some((h.journal.len() as u64, snapshot))).0
    };
    assert!(run(&canonical_json(h.ledger())).is_empty());
    let problems = run("{}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("does not parse as a ledger"),
        "{problems:?}"
    );
}

#[test]
fn the_stream_audit_reports_a_journal_its_owner_cannot_fold_instead_of_dying() {
    let mut h = Harness::new(init_request(5));
    h.append(report(Decision::Continue)).unwrap();
    // The append alone, with no loop initialized before it: `evolve`
    // assumes this cannot happen.
    let (_, kind, event) = &h.journal[1];
    let mut audit = audit::StreamAudit::<LedgerOwner>::new("ledger");
    audit.entry(1, kind, event);
    let (problems, state) = audit.finish(None);
    assert!(state.is_none());
    assert!(
        problems.iter().any(|p| p.contains("cannot follow")),
        "{problems:?}"
    );
}

/// A record of another runtime's ledger, as `loopx import` reads it.
fn imported(iteration: u64, seconds: i64, decision: Decision) -> LedgerRequest {
    LedgerRequest::ImportIteration(Box::new(IterationRecord {
        iteration,
        timestamp: at(seconds),
        operation_id: OperationId::parse("ignored").unwrap(),
        mode: Mode::BoundedResearch,
        objective: format!("imported {iteration}"),
        decision,
        stop_reason: String::new(),
        evidence_checked: EvidenceChecked::default(),
        input_refs: vec![],
        actions_taken: vec![],
        remaining_gaps: vec![],
        output: String::new(),
        budget_delta: BudgetDelta {
            iterations: 1,
            tokens: 100,
            usd: 0.5,
            wall_time_seconds: 60,
        },
        completed_summary: String::new(),
        current_summary: String::new(),
        proposed_next_action: String::new(),
        executor_provider: "claude".into(),
        dispatch_id: String::new(),
        claim: None,
        bank: None,
        direction: Direction::default(),
    }))
}

#[test]
fn imported_records_keep_their_timestamps_and_refold_under_the_audit() {
    let mut h = Harness::new(init_request(5));
    h.apply(imported(1, 100, Decision::Continue)).unwrap();
    h.apply(imported(2, 200, Decision::Revise)).unwrap();
    let ledger = h.ledger();
    assert_eq!(ledger.imported, 2);
    assert_eq!(ledger.updated_at, at(200));
    assert_eq!(ledger.recent[0].timestamp, at(100));
    assert_eq!(ledger.recent[1].operation_id.as_str(), "op-3");
    assert_eq!(
        ledger.spent,
        Spent {
            iterations: 2,
            tokens: 200,
            usd: 1.0
        }
    );
    assert!(h.audit().is_valid(), "{:?}", h.audit());
    // The loop's own records follow; no import after them.
    h.append(report(Decision::Continue)).unwrap();
    assert_eq!(
        h.apply(imported(4, 300, Decision::Continue)),
        Err(LedgerError::ImportAfterAppend { appended: 1 })
    );
    assert!(h.audit().is_valid(), "{:?}", h.audit());
}

#[test]
fn an_import_out_of_order_back_in_time_or_past_the_rules_is_refused() {
    let mut h = Harness::new(init_request(3));
    h.apply(imported(1, 100, Decision::Continue)).unwrap();
    assert_eq!(
        h.apply(imported(3, 200, Decision::Continue)),
        Err(LedgerError::ImportOutOfOrder {
            expected: 2,
            found: 3
        })
    );
    assert!(matches!(
        h.apply(imported(2, 50, Decision::Continue)),
        Err(LedgerError::ImportBackInTime { iteration: 2, .. })
    ));
    assert_eq!(
        h.apply(imported(2, 200, Decision::Blocked)),
        Err(LedgerError::EarlyBlocked)
    );
    h.apply(imported(2, 200, Decision::Continue)).unwrap();
    assert_eq!(
        h.apply(imported(3, 300, Decision::Continue)),
        Err(LedgerError::ContinueOnFinal {
            decision: Decision::Continue
        })
    );
    // An early stop keeps the other runtime's verdict: no proof is read.
    let mut early = Harness::new(init_request(3));
    early.apply(imported(1, 100, Decision::Stop)).unwrap();
    assert_eq!(early.ledger().status, LoopStatus::Stopped);
    assert_eq!(
        early.apply(imported(2, 200, Decision::Continue)),
        Err(LedgerError::AfterTerminal {
            status: LoopStatus::Stopped
        })
    );
    assert!(early.audit().is_valid(), "{:?}", early.audit());
}

#[test]
fn the_audit_refuses_an_import_written_after_an_appended_record() {
    let mut h = Harness::new(init_request(5));
    h.append(report(Decision::Continue)).unwrap();
    // Written by hand: the owner refuses it, so only a forged journal holds it.
    let forged = LedgerEvent::IterationImported {
        record: match imported(2, 100, Decision::Continue) {
            LedgerRequest::ImportIteration(mut record) => {
                record.operation_id = OperationId::parse("op-3").unwrap();
                record
            }
            _ => unreachable!(),
        },
    };
    h.journal.push((
        "op-3".into(),
        LedgerOwner::event_kind(&forged).to_owned(),
        canonical_json(&forged),
    ));
    h.state = Some(LedgerOwner::evolve(h.state.take(), &forged));
    let audit = h.audit();
    assert!(
        audit
            .errors
            .iter()
            .any(|e| e.contains("imported iteration 2") && e.contains("before the loop's own")),
        "{audit:?}"
    );
}

fn enforce_harness(budget: Budget) -> Harness {
    let mut init = InitLoop::new("Prove lemma B", "checked proof", budget);
    init.goal_focus_mode = GoalFocusMode::Enforce;
    Harness::new(init)
}

fn bank(report: IterationReport, status: BankStatus) -> LedgerRequest {
    LedgerRequest::BankCandidate {
        report,
        bank: Bank {
            status,
            candidate_fingerprint: crate::digest::Digest::of_bytes(b"candidate"),
            obligation_transitions: Vec::new(),
        },
    }
}

#[test]
fn a_banked_candidate_counts_only_its_cost_beyond_the_turns_charge() {
    let mut h = enforce_harness(Budget::iterations_only(5));
    // The driver charges the turn when it ends; the review banks later.
    h.apply(LedgerRequest::Charge {
        dispatch_id: "d-1".into(),
        tokens: 1_000,
        usd: 0.5,
    })
    .unwrap();
    assert_eq!(h.ledger().unbanked_charges.len(), 1);
    let mut staged = report(Decision::Continue);
    staged.dispatch_id = "d-1".into();
    staged.tokens = 1_200;
    staged.usd = 0.5;
    h.apply(bank(staged.clone(), BankStatus::Accepted)).unwrap();
    assert_eq!(h.ledger().spent.tokens, 1_200, "the turn is counted once");
    assert_eq!(h.ledger().spent.usd, 0.5);
    assert!(h.ledger().unbanked_charges.is_empty());
    // A rejected candidate of another dispatch: its real cost, once.
    h.apply(LedgerRequest::Charge {
        dispatch_id: "d-2".into(),
        tokens: 300,
        usd: 0.0,
    })
    .unwrap();
    staged.dispatch_id = "d-2".into();
    staged.tokens = 300;
    staged.usd = 0.0;
    h.apply(bank(staged.clone(), BankStatus::Rejected)).unwrap();
    assert_eq!(h.ledger().spent.tokens, 1_500);
    // Banked before the driver charged (reviewed while the turn ran): the
    // charge is reduced by the record, and nothing is held.
    staged.dispatch_id = "d-3".into();
    h.apply(bank(staged, BankStatus::Accepted)).unwrap();
    assert_eq!(h.ledger().spent.tokens, 1_800);
    h.apply(LedgerRequest::Charge {
        dispatch_id: "d-3".into(),
        tokens: 400,
        usd: 0.0,
    })
    .unwrap();
    assert_eq!(h.ledger().spent.tokens, 1_900);
    assert!(h.ledger().unbanked_charges.is_empty());
    assert!(h.audit().is_valid(), "{:?}", h.audit());
}

#[test]
fn charges_are_not_held_outside_enforce_mode() {
    let mut h = Harness::new(init_request(5));
    h.apply(LedgerRequest::Charge {
        dispatch_id: "d-1".into(),
        tokens: 10,
        usd: 0.0,
    })
    .unwrap();
    assert!(h.ledger().unbanked_charges.is_empty());
    assert!(!canonical_json(h.ledger()).contains("unbanked_charges"));
}

#[test]
fn an_accepted_continue_banks_as_the_budgets_stop_when_time_ran_out_during_review() {
    let mut budget = Budget::iterations_only(5);
    budget.max_wall_time_seconds = 100;
    let mut h = enforce_harness(budget);
    h.clock = 500; // the review came after the wall-time budget ended
    let receipt = h
        .apply(bank(report(Decision::Continue), BankStatus::Accepted))
        .expect("an accepted result is banked, not left pending forever");
    let record = h.ledger().last_record().unwrap();
    assert_eq!(record.decision, Decision::Stop);
    assert_eq!(record.stop_reason, "credit_exhausted:wall_time");
    assert!(matches!(
        receipt,
        LedgerReceipt::AppendIteration {
            state_status: LoopStatus::Stopped,
            ..
        }
    ));
    assert!(h.audit().is_valid(), "{:?}", h.audit());
}

#[test]
fn an_imported_loop_keeps_its_source_run_id_and_other_loops_are_unchanged() {
    // A loop made by init: no field in its request or snapshot, so the
    // request digests and journals of every existing loop stay the same.
    let native = Harness::new(init_request(3));
    let request = canonical_json(&init_request(3));
    assert!(!request.contains("source_run_id"), "{request}");
    let snapshot = canonical_json(native.state.as_ref().unwrap());
    assert!(!snapshot.contains("source_run_id"), "{snapshot}");
    // An init event written before the field existed still reads.
    let old: InitLoop = serde_json::from_str(&request).unwrap();
    assert_eq!(old.source_run_id, None);

    let mut init = init_request(3);
    init.source_run_id = Some("run-reference-123".into());
    let imported = Harness::new(init);
    let ledger = imported.state.as_ref().unwrap();
    assert_eq!(
        ledger.config.source_run_id.as_deref(),
        Some("run-reference-123")
    );
    assert_ne!(ledger.run_id, "run-reference-123");
    let verdict = arbitrate(ledger, Sentinels::default(), at(10));
    let status = view::status_json(ledger, 1, &verdict);
    assert_eq!(status["source_run_id"], "run-reference-123");
    assert!(
        view::status_text(ledger, &verdict, None, at(10)).contains("from run run-reference-123")
    );

    let mut hostile = init_request(3);
    hostile.source_run_id = Some("run\u{1b}[2J".into());
    let mut harness = Harness::new(init_request(3));
    harness.state = None;
    let refused = harness.apply(LedgerRequest::Init(hostile)).unwrap_err();
    assert!(refused.to_string().contains("source_run_id"), "{refused}");
}
