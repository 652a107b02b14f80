//! The goal owner's rules, driven through decide/evolve in memory.

use super::continuation::{should_run, Action, Disposition, Frontier};
use super::gap::gaps;
use super::objective::{current_digest, work_digest, ObjectiveDocument};
use super::outcome::{Conclusion, OutcomeUpdate, RequirementInput, ReviewInput, SourceInput};
use super::todo::{TodoAction, TodoStatus};
use super::*;
use crate::ledger::arbiter::{arbitrate, Sentinels};
use crate::ledger::budget::Budget;
use crate::ledger::{InitLoop, LedgerEvent, LedgerOwner};
use crate::operation::Owner as _;
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::UNIX_EPOCH
        .checked_add(SignedDuration::from_secs(1_000_000 + seconds))
        .unwrap()
}

fn agent(id: &str) -> Actor {
    Actor::Agent(id.into())
}

struct Harness {
    goal: Option<Goal>,
    writes: usize,
    clock: i64,
}

impl Harness {
    /// A goal whose snapshot lists its todos (the pure owner's default).
    fn new() -> Self {
        Harness::created(false)
    }

    fn created(todo_streams: bool) -> Self {
        let mut h = Harness {
            goal: None,
            writes: 0,
            clock: 0,
        };
        h.run(
            Actor::Owner,
            GoalRequest::Create {
                goal_id: "main".into(),
                objective: "Prove lemma B".into(),
                commitments: RootCommitments::default(),
                todo_streams,
            },
        )
        .unwrap();
        h
    }

    fn run(&mut self, actor: Actor, request: GoalRequest) -> Result<GoalReceipt, GoalError> {
        self.run_as(actor, None, request)
    }

    fn run_as(
        &mut self,
        actor: Actor,
        expected_instance: Option<&str>,
        request: GoalRequest,
    ) -> Result<GoalReceipt, GoalError> {
        let command = GoalCommand {
            actor,
            expected_instance: expected_instance.map(str::to_owned),
            request,
            base_revision: None,
        };
        let decided = GoalOwner::decide(
            self.goal.as_ref(),
            &command,
            &GoalContext {
                now: at(self.clock),
            },
        )?;
        if let Some(event) = decided.event {
            self.writes += 1;
            self.goal = Some(GoalOwner::evolve(self.goal.take(), &event));
        }
        Ok(decided.receipt)
    }

    fn goal(&self) -> &Goal {
        self.goal.as_ref().unwrap()
    }

    fn add_todo(&mut self, title: &str) -> String {
        let receipt = self
            .run(
                Actor::Owner,
                GoalRequest::AddTodo {
                    id: None,
                    title: title.into(),
                },
            )
            .unwrap();
        receipt.values["todo_id"].as_str().unwrap().to_owned()
    }

    fn todo(
        &mut self,
        actor: Actor,
        id: &str,
        action: TodoAction,
    ) -> Result<GoalReceipt, GoalError> {
        self.run(
            actor,
            GoalRequest::Todo {
                id: id.into(),
                action,
                note: String::new(),
            },
        )
    }

    fn refine(&mut self, actor: Actor, update: OutcomeUpdate) -> Result<GoalReceipt, GoalError> {
        self.run(actor, GoalRequest::RefineOutcome { update })
    }
}

fn requirement(id: &str, description: &str) -> RequirementInput {
    RequirementInput {
        id: id.into(),
        description: description.into(),
    }
}

fn source(reference: &str) -> Option<SourceInput> {
    Some(SourceInput {
        source_ref: reference.into(),
        summary: "user message".into(),
    })
}

fn create_outcome(owner: &str, todo: &str) -> OutcomeUpdate {
    OutcomeUpdate {
        outcome_id: "deck".into(),
        objective: Some("A talk deck that keeps the accepted introduction".into()),
        add_requirements: vec![requirement(
            "R1",
            "Keep the accepted introduction slide first",
        )],
        link_todos: vec![todo.into()],
        source: source(&format!("msg-1-{owner}")),
        ..Default::default()
    }
}

fn review(id: &str, conclusion: Conclusion) -> ReviewInput {
    ReviewInput {
        requirement_id: id.into(),
        conclusion,
        reasoning: "compared the artifact".into(),
        evidence_refs: vec!["deck.pdf".into()],
    }
}

#[test]
fn refinements_accumulate_and_never_rewrite() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let before = h.goal().outcome("deck").unwrap().clone();
    // A second user correction adds R2; R1 and the objective stay byte-for-byte.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            add_requirements: vec![requirement("R2", "Move the results before the methods")],
            source: source("msg-2"),
            ..Default::default()
        },
    )
    .unwrap();
    let after = h.goal().outcome("deck").unwrap();
    assert_eq!(after.original_objective, before.original_objective);
    assert_eq!(after.requirements[0], before.requirements[0]);
    assert_eq!(after.requirements[1].id, "R2");
    assert_eq!(
        after
            .sources
            .iter()
            .map(|s| s.source_ref.as_str())
            .collect::<Vec<_>>(),
        ["msg-1-a", "msg-2"]
    );
    assert_eq!(h.goal().original_objective, "Prove lemma B");
}

#[test]
fn every_unsafe_refinement_is_refused_without_a_write() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let writes = h.writes;
    let base = || OutcomeUpdate {
        outcome_id: "deck".into(),
        source: source("msg-3"),
        ..Default::default()
    };
    let cases: Vec<(Actor, OutcomeUpdate, &str)> = vec![
        (
            agent("a"),
            OutcomeUpdate {
                requirements: Some(vec![requirement("R9", "new")]),
                ..base()
            },
            "RequirementLost",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                add_requirements: vec![requirement("R1", "Different text")],
                ..base()
            },
            "RequirementChanged",
        ),
        (
            agent("b"),
            OutcomeUpdate {
                add_requirements: vec![requirement("R2", "x")],
                ..base()
            },
            "ForeignOutcome",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                link_todos: vec!["t99".into()],
                ..base()
            },
            "NoTodo",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                objective: Some("Another objective".into()),
                ..base()
            },
            "ObjectiveImmutable",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                add_requirements: vec![requirement("R2", "x")],
                source: None,
                ..base()
            },
            "SourceRequired",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                reviews: vec![ReviewInput {
                    evidence_refs: vec![],
                    ..review("R1", Conclusion::Met)
                }],
                ..base()
            },
            "ReviewNeedsEvidence",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                reviews: vec![review("R7", Conclusion::Met)],
                ..base()
            },
            "NoRequirement",
        ),
        (
            agent("a"),
            OutcomeUpdate {
                outcome_id: "new".into(),
                ..base()
            },
            "NoOutcome",
        ),
    ];
    for (actor, update, expected) in cases {
        let error = h.refine(actor, update).unwrap_err();
        assert!(
            format!("{error:?}").starts_with(expected),
            "expected {expected}, got {error:?}"
        );
    }
    assert_eq!(h.writes, writes);
    // Restating everything unchanged is accepted and writes nothing new.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            requirements: Some(vec![requirement(
                "R1",
                "Keep the accepted introduction slide first",
            )]),
            ..base()
        },
    )
    .unwrap();
    assert_eq!(h.goal().outcome("deck").unwrap().requirements.len(), 1);
}

#[test]
fn sources_are_bounded_and_overflow_names_the_limit() {
    let mut h = Harness::new();
    let todo = h.add_todo("t");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    for i in 0..63 {
        h.refine(
            agent("a"),
            OutcomeUpdate {
                outcome_id: "deck".into(),
                add_requirements: vec![requirement(&format!("S{i}"), "r")],
                source: source(&format!("src-{i}")),
                ..Default::default()
            },
        )
        .unwrap();
    }
    let error = h
        .refine(
            agent("a"),
            OutcomeUpdate {
                outcome_id: "deck".into(),
                add_requirements: vec![requirement("S99", "r")],
                source: source("one-too-many"),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(error.to_string().contains("limit is 64"), "{error}");
}

#[test]
fn an_oversized_declaration_fails_before_commit() {
    let mut h = Harness::new();
    let todo = h.add_todo("t");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let before = h.goal().clone();
    // Each requirement within its own field limit; together over budget.
    let large = "x".repeat(crate::text::limits::OBJECTIVE.max_bytes);
    let count = outcome::DECLARATION_BUDGET / large.len() + 1;
    let error = h
        .refine(
            agent("a"),
            OutcomeUpdate {
                outcome_id: "deck".into(),
                add_requirements: (0..count)
                    .map(|i| requirement(&format!("big{i}"), &large))
                    .collect(),
                source: source("s"),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(
            error,
            GoalError::BudgetExceeded {
                which: "outcome declaration",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(h.goal(), &before);
}

fn check_config(argv: &[&str]) -> checks::CheckConfig {
    checks::CheckConfig {
        outcome_id: "deck".into(),
        criteria: vec![checks::Criterion {
            id: "R1".into(),
            validation_argv: argv.iter().map(|w| (*w).into()).collect(),
            timeout_seconds: 60,
            cwd: None,
        }],
    }
}

fn check_result(h: &Harness, status: checks::CheckStatus) -> checks::CheckResult {
    let criterion = &h.goal().outcome("deck").unwrap().checks[0];
    checks::CheckResult {
        criterion_id: "R1".into(),
        status,
        exit_code: Some(0),
        duration_ms: 5,
        output_digest: crate::digest::Digest::of_bytes(b"ok"),
        excerpt: "ok".into(),
        log: String::new(),
        argv_digest: criterion.argv_digest(),
        head: None,
        ran_at: at(1),
        ran_by: "owner".into(),
    }
}

#[test]
fn only_the_owner_configures_checks_and_only_on_the_basis_it_was_shown() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let basis = h.goal().outcome("deck").unwrap().basis();
    let configure = |basis: &crate::digest::Digest| GoalRequest::ConfigureChecks {
        config: check_config(&["make", "deck"]),
        basis: basis.clone(),
    };
    // An agent could certify itself with `true`: refused.
    assert!(matches!(
        h.run(agent("a"), configure(&basis)),
        Err(GoalError::OwnerOnly { .. })
    ));
    // A requirement added after the proposal was read: refused.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            add_requirements: vec![requirement("R2", "Cite the dataset")],
            source: source("msg-2"),
            ..Default::default()
        },
    )
    .unwrap();
    let writes = h.writes;
    assert!(matches!(
        h.run(Actor::Owner, configure(&basis)),
        Err(GoalError::ChecksBasisChanged { .. })
    ));
    assert_eq!(h.writes, writes);
    let current = h.goal().outcome("deck").unwrap().basis();
    h.run(Actor::Owner, configure(&current)).unwrap();
    assert_eq!(h.goal().outcome("deck").unwrap().checks.len(), 1);
    // The same configuration again writes nothing.
    let writes = h.writes;
    h.run(Actor::Owner, configure(&current)).unwrap();
    assert_eq!(h.writes, writes);
}

#[test]
fn a_configured_check_decides_its_requirement_and_a_review_cannot() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let basis = h.goal().outcome("deck").unwrap().basis();
    h.run(
        Actor::Owner,
        GoalRequest::ConfigureChecks {
            config: check_config(&["make", "deck"]),
            basis,
        },
    )
    .unwrap();
    h.todo(agent("a"), &todo, TodoAction::Complete).unwrap();
    // The agent's self-assessment says met: the check has not run.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            reviews: vec![review("R1", Conclusion::Met)],
            ..Default::default()
        },
    )
    .unwrap();
    let open = gaps(h.goal(), at(0));
    assert_eq!(
        open[0].unresolved[0].state,
        gap::RequirementState::Unreviewed
    );
    let checkpoint = open[0].checkpoint.clone();
    let failing = check_result(&h, checks::CheckStatus::Fail);
    h.run(
        Actor::Owner,
        GoalRequest::RecordChecks {
            outcome_id: "deck".into(),
            results: vec![failing],
        },
    )
    .unwrap();
    let open = gaps(h.goal(), at(0));
    assert_eq!(open[0].unresolved[0].state, gap::RequirementState::Unmet);
    // A new result rearms the gap.
    assert_ne!(open[0].checkpoint, checkpoint);
    let passing = check_result(&h, checks::CheckStatus::Pass);
    h.run(
        Actor::Owner,
        GoalRequest::RecordChecks {
            outcome_id: "deck".into(),
            results: vec![passing.clone()],
        },
    )
    .unwrap();
    assert!(gaps(h.goal(), at(0)).is_empty());
    // A result for a check nobody configured is refused.
    let stray = checks::CheckResult {
        criterion_id: "R9".into(),
        ..passing
    };
    assert!(matches!(
        h.run(
            Actor::Owner,
            GoalRequest::RecordChecks {
                outcome_id: "deck".into(),
                results: vec![stray],
            },
        ),
        Err(GoalError::NoSuchCheck { .. })
    ));
}

#[test]
fn a_closed_linked_todo_never_meets_an_outcome_and_the_gap_stays() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    assert!(
        gaps(h.goal(), at(0)).is_empty(),
        "open linked work covers the outcome"
    );
    h.todo(agent("a"), &todo, TodoAction::Complete).unwrap();
    let open = gaps(h.goal(), at(0));
    assert_eq!(open.len(), 1);
    assert_eq!(
        open[0].unresolved[0].state,
        gap::RequirementState::Unreviewed
    );
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            reviews: vec![review("R1", Conclusion::Unmet)],
            ..Default::default()
        },
    )
    .unwrap();
    let open = gaps(h.goal(), at(0));
    assert_eq!(open[0].unresolved[0].state, gap::RequirementState::Unmet);
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            reviews: vec![review("R1", Conclusion::Met)],
            ..Default::default()
        },
    )
    .unwrap();
    assert!(gaps(h.goal(), at(0)).is_empty());
}

#[test]
fn an_acknowledged_gap_stays_discharged_until_something_material_changes() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    h.todo(agent("a"), &todo, TodoAction::Complete).unwrap();
    let checkpoint = gaps(h.goal(), at(0))[0].checkpoint.clone();
    h.run(
        agent("a"),
        GoalRequest::AcknowledgeGap {
            outcome_id: "deck".into(),
            checkpoint: checkpoint.clone(),
        },
    )
    .unwrap();
    let writes = h.writes;
    assert!(gaps(h.goal(), at(0))[0].acknowledged);
    // Acknowledging again writes nothing.
    h.run(
        agent("a"),
        GoalRequest::AcknowledgeGap {
            outcome_id: "deck".into(),
            checkpoint,
        },
    )
    .unwrap();
    assert_eq!(h.writes, writes);
    // A source-only refinement is bookkeeping: still discharged.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            source: source("msg-9"),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(gaps(h.goal(), at(0))[0].acknowledged);
    // A review changes a conclusion: raised again.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            reviews: vec![review("R1", Conclusion::Uncertain)],
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!gaps(h.goal(), at(0))[0].acknowledged);
    let checkpoint = gaps(h.goal(), at(0))[0].checkpoint.clone();
    h.run(
        agent("a"),
        GoalRequest::AcknowledgeGap {
            outcome_id: "deck".into(),
            checkpoint,
        },
    )
    .unwrap();
    // Rewording the same conclusion is not material.
    let reworded = ReviewInput {
        reasoning: "looked again".into(),
        ..review("R1", Conclusion::Uncertain)
    };
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            reviews: vec![reworded],
            ..Default::default()
        },
    )
    .unwrap();
    assert!(gaps(h.goal(), at(0))[0].acknowledged);
    // A new requirement is.
    h.refine(
        agent("a"),
        OutcomeUpdate {
            outcome_id: "deck".into(),
            add_requirements: vec![requirement("R2", "More")],
            source: source("msg-10"),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!gaps(h.goal(), at(0))[0].acknowledged);
}

fn ledger(max_iterations: u64) -> crate::ledger::Ledger {
    let event = LedgerEvent::Initialized {
        run_id: "run-1".into(),
        at: at(0),
        config: Box::new(InitLoop::new(
            "Prove lemma B",
            "checked proof",
            Budget::iterations_only(max_iterations),
        )),
    };
    LedgerOwner::evolve(None, &event)
}

fn decide_now(h: &Harness, actor: &Actor, seconds: i64) -> continuation::ShouldRun {
    let ledger = ledger(10);
    let verdict = arbitrate(&ledger, Sentinels::default(), at(seconds));
    should_run(
        &ledger,
        &verdict,
        Sentinels::default(),
        (h.goal(), &Frontier::scan(h.goal(), actor, at(seconds))),
        actor,
        at(seconds),
    )
}

#[test]
fn outcome_states_never_change_admission_or_the_next_runnable_action() {
    let mut h = Harness::new();
    let deck = h.add_todo("Build the deck");
    let other = h.add_todo("Unrelated work");
    let baseline = decide_now(&h, &Actor::Owner, 1);
    assert_eq!(baseline.selected_todo.as_ref().unwrap().id, deck);
    let root = (
        h.goal().original_objective.clone(),
        h.goal().commitments.clone(),
    );
    h.refine(agent("a"), create_outcome("a", &other)).unwrap();
    for conclusion in [
        None,
        Some(Conclusion::Uncertain),
        Some(Conclusion::Unmet),
        Some(Conclusion::Met),
    ] {
        if let Some(conclusion) = conclusion {
            h.refine(
                agent("a"),
                OutcomeUpdate {
                    outcome_id: "deck".into(),
                    reviews: vec![review("R1", conclusion)],
                    ..Default::default()
                },
            )
            .unwrap();
        }
        let now = decide_now(&h, &Actor::Owner, 1);
        assert_eq!(now.selected_todo, baseline.selected_todo, "{conclusion:?}");
        assert_eq!(now.scheduler_hint.action, Action::RunNow);
        assert_eq!(
            (
                h.goal().original_objective.clone(),
                h.goal().commitments.clone()
            ),
            root
        );
    }
}

#[test]
fn should_run_is_byte_identical_for_an_unchanged_state_and_defers_to_lease_expiry() {
    let mut h = Harness::new();
    let todo = h.add_todo("Only work");
    let first = serde_json::to_string(&decide_now(&h, &Actor::Owner, 5)).unwrap();
    assert_eq!(
        first,
        serde_json::to_string(&decide_now(&h, &Actor::Owner, 50)).unwrap()
    );
    let unclaimed_frontier = decide_now(&h, &Actor::Owner, 5)
        .scheduler_hint
        .reset_identity
        .frontier;
    h.todo(agent("a"), &todo, TodoAction::Claim { ttl_seconds: 600 })
        .unwrap();
    let held = decide_now(&h, &agent("b"), 100);
    let hint = &held.scheduler_hint;
    assert_eq!(
        (hint.action, hint.reason_code.as_str()),
        (Action::BackoffUntilStateChange, "leases_held")
    );
    let continuation = &hint.goal_runtime_continuation;
    assert_eq!(continuation.disposition, Disposition::Defer);
    assert_eq!(continuation.recheck_after_seconds, Some(500));
    assert_eq!(continuation.wake_policy, Some("state_change_or_deadline"));
    assert_ne!(
        hint.reset_identity.frontier, unclaimed_frontier,
        "a claim changes the frontier identity"
    );
    // After expiry the todo is runnable again, by anyone.
    let later = decide_now(&h, &agent("b"), 700);
    assert_eq!(later.selected_todo.unwrap().id, todo);
}

#[test]
fn leases_are_exclusive_expire_and_done_is_final() {
    let mut h = Harness::new();
    let todo = h.add_todo("Work");
    h.todo(agent("a"), &todo, TodoAction::Claim { ttl_seconds: 60 })
        .unwrap();
    assert!(matches!(
        h.todo(agent("b"), &todo, TodoAction::Claim { ttl_seconds: 60 }),
        Err(GoalError::LeaseHeld { .. })
    ));
    assert!(matches!(
        h.todo(agent("b"), &todo, TodoAction::Complete),
        Err(GoalError::NotHolder { .. })
    ));
    h.clock = 61;
    h.todo(agent("b"), &todo, TodoAction::Claim { ttl_seconds: 60 })
        .unwrap();
    assert!(matches!(
        h.todo(agent("a"), &todo, TodoAction::Renew { ttl_seconds: 60 }),
        Err(GoalError::NotHolder { .. })
    ));
    h.todo(agent("b"), &todo, TodoAction::Complete).unwrap();
    for action in [
        TodoAction::Claim { ttl_seconds: 5 },
        TodoAction::Release,
        TodoAction::Block { reason: "x".into() },
    ] {
        assert!(matches!(
            h.todo(agent("a"), &todo, action),
            Err(GoalError::TodoDone { .. })
        ));
    }
    assert_eq!(h.goal().todo(&todo).unwrap().status, TodoStatus::Done);
}

#[test]
fn objective_revisions_are_owner_applied_digest_linked_and_fence_new_work() {
    let mut h = Harness::new();
    let todo = h.add_todo("Work");
    let held = h.add_todo("Held");
    // One agent: no ceremony.
    h.run(
        Actor::Owner,
        GoalRequest::RegisterAgent {
            agent_id: "a".into(),
        },
    )
    .unwrap();
    h.todo(agent("a"), &held, TodoAction::Claim { ttl_seconds: 3600 })
        .unwrap();
    let document = ObjectiveDocument {
        objective: "Prove lemma B for all n".into(),
        reason: "user widened scope".into(),
        source_ref: "msg-7".into(),
    };
    h.run(
        agent("a"),
        GoalRequest::PrepareObjective {
            document: document.clone(),
        },
    )
    .unwrap();
    assert_eq!(h.goal().objective.proposals.len(), 1);
    assert_eq!(
        h.goal().objective.current_revision(),
        0,
        "preparing saves only"
    );
    let writes = h.writes;
    h.run(
        agent("a"),
        GoalRequest::PrepareObjective {
            document: document.clone(),
        },
    )
    .unwrap();
    assert_eq!(h.writes, writes, "the same pending proposal is reused");
    assert!(matches!(
        h.run(
            agent("a"),
            GoalRequest::ReviseObjective {
                document: document.clone(),
                expected_provider_revision: 0
            }
        ),
        Err(GoalError::OwnerOnly { .. })
    ));
    let whitespace = ObjectiveDocument {
        objective: "  Prove   lemma B ".into(),
        ..document.clone()
    };
    assert!(matches!(
        h.run(
            Actor::Owner,
            GoalRequest::ReviseObjective {
                document: whitespace,
                expected_provider_revision: 0
            }
        ),
        Err(GoalError::IdenticalObjective { .. })
    ));
    let previous = current_digest(h.goal());
    h.run(
        Actor::Owner,
        GoalRequest::ReviseObjective {
            document,
            expected_provider_revision: 0,
        },
    )
    .unwrap();
    let revision = h.goal().objective.revisions[0].clone();
    assert_eq!(revision.previous_digest, previous);
    assert!(
        h.goal().objective.proposals.is_empty(),
        "the applied proposal is settled"
    );
    // A second agent registers: now the fence applies to both.
    h.run(
        Actor::Owner,
        GoalRequest::RegisterAgent {
            agent_id: "b".into(),
        },
    )
    .unwrap();
    assert!(matches!(
        h.todo(agent("b"), &todo, TodoAction::Claim { ttl_seconds: 60 }),
        Err(GoalError::NotAdopted { .. })
    ));
    assert!(matches!(
        decide_now(&h, &agent("b"), 1)
            .scheduler_hint
            .reason_code
            .as_str(),
        "objective_adoption_required"
    ));
    // What a holder already has stays workable.
    h.todo(agent("a"), &held, TodoAction::Renew { ttl_seconds: 3600 })
        .unwrap();
    h.todo(agent("a"), &held, TodoAction::Release).unwrap();
    // Adoption needs the current revision, digest and work digest.
    let adopt = |h: &Harness, agent_id: &str, rev: u64| GoalRequest::AdoptObjective {
        revision: rev,
        digest: current_digest(h.goal()),
        work_digest: work_digest(h.goal(), agent_id),
        review_summary: "reviewed my todos against the new scope".into(),
    };
    assert!(matches!(
        h.run(agent("b"), adopt(&h, "b", 0)),
        Err(GoalError::AdoptionMismatch { .. })
    ));
    h.run(agent("b"), adopt(&h, "b", 1)).unwrap();
    h.todo(agent("b"), &todo, TodoAction::Claim { ttl_seconds: 60 })
        .unwrap();
    let writes = h.writes;
    h.run(agent("b"), adopt(&h, "b", 1)).unwrap();
    assert_eq!(
        h.writes, writes,
        "an unchanged repeated adoption writes nothing"
    );
    let readback = inspect::readback(h.goal(), 0, None, at(0));
    let states: Vec<_> = readback
        .objective
        .adoption
        .iter()
        .map(|a| (a.agent_id, a.state))
        .collect();
    assert_eq!(states, [("a", "pending"), ("b", "adopted")]);
}

#[test]
fn a_successor_lifetime_inherits_no_outcomes_and_refuses_old_instances() {
    let mut h = Harness::new();
    let todo = h.add_todo("Work");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let old = h.goal().instance_id.clone();
    assert!(matches!(
        h.run(
            agent("a"),
            GoalRequest::Recreate {
                objective: "x".into(),
                reason: "y".into()
            }
        ),
        Err(GoalError::OwnerOnly { .. })
    ));
    h.run(
        Actor::Owner,
        GoalRequest::Recreate {
            objective: "Prove lemma C".into(),
            reason: "new goal".into(),
        },
    )
    .unwrap();
    let goal = h.goal();
    assert_eq!(
        (
            goal.lifetime,
            goal.instance_id.as_str(),
            goal.outcomes.len()
        ),
        (2, "main#2", 0)
    );
    assert_eq!(goal.retired[0].instance_id, old);
    let stale = h.run_as(
        agent("a"),
        Some(&old),
        GoalRequest::RefineOutcome {
            update: create_outcome("a", "t1"),
        },
    );
    assert!(
        matches!(stale, Err(GoalError::LifetimeMismatch { .. })),
        "{stale:?}"
    );
}

/// The owner's should-run decision on `h`'s goal at second `now`.
fn owners_decision(
    ledger: &crate::ledger::Ledger,
    h: &Harness,
    now: i64,
) -> super::continuation::ShouldRun {
    let verdict = arbitrate(ledger, Sentinels::default(), at(now));
    should_run(
        ledger,
        &verdict,
        Sentinels::default(),
        (h.goal(), &Frontier::scan(h.goal(), &Actor::Owner, at(now))),
        &Actor::Owner,
        at(now),
    )
}

#[test]
fn the_task_body_is_stable_and_small() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let ledger = ledger(10);
    let body = |h: &Harness, now| {
        let decision = owners_decision(&ledger, h, now);
        task_body::render(
            "/p/.loopx",
            &ledger,
            h.goal(),
            &decision,
            &task_body::Policies::default(),
        )
    };
    let first = body(&h, 1);
    assert_eq!(first, body(&h, 99));
    assert!(
        first.contains("Selected todo: t1 Build the deck") && first.contains("R1 [unreviewed]"),
        "{first}"
    );
    assert!(
        first.len() < task_body::TARGET_BYTES,
        "{} bytes",
        first.len()
    );
    h.todo(Actor::Owner, &todo, TodoAction::Complete).unwrap();
    assert_ne!(first, body(&h, 1));
}

#[test]
fn the_policy_sections_follow_the_contract_in_the_specified_order() {
    use crate::ledger::vocabulary::GoalFocusMode;
    let h = Harness::new();
    let policies = task_body::Policies {
        compute_policy: "COMPUTE".into(),
        panel: true,
        target_advice: Some("panel/abc/target_advice/host_synthesis.md".into()),
        goal_focus: "FOCUS".into(),
        goal_priority: "PRIORITY".into(),
        formal_policy: "FORMAL".into(),
    };
    let body = |mode, policies: &task_body::Policies| {
        let mut ledger = ledger(10);
        ledger.config.goal_focus_mode = mode;
        let decision = owners_decision(&ledger, &h, 1);
        task_body::render("/p/.loopx", &ledger, h.goal(), &decision, policies)
    };
    let headings = |text: &str| -> Vec<String> {
        let contract = text.find("## The one-iteration contract").unwrap();
        text[contract..]
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    let all = [
        "Compute policy",
        "Review panel",
        "Goal Focus",
        "Goal priority",
        "Formal policy",
    ];
    // Monitor: Goal Focus only reports, so goal priority follows it.
    assert_eq!(headings(&body(GoalFocusMode::Monitor, &policies)), all);
    // Enforce: Goal Focus in place of goal priority.
    assert_eq!(
        headings(&body(GoalFocusMode::Enforce, &policies)),
        [all[0], all[1], all[2], all[4]]
    );
    // Off: goal priority in place of Goal Focus.
    assert_eq!(
        headings(&body(GoalFocusMode::Off, &policies)),
        [all[0], all[1], all[3], all[4]]
    );
    // Each section's text sits under its own heading, in that order.
    let monitor = body(GoalFocusMode::Monitor, &policies);
    let at_of = |s: &str| monitor.find(s).unwrap();
    assert!(at_of("COMPUTE") < at_of("/p/.loopx/panel/"));
    // The synthesis of this turn's target advice, inside the panel section.
    let advice =
        at_of("read only its synthesis, /p/.loopx/panel/abc/target_advice/host_synthesis.md");
    assert!(at_of("/p/.loopx/panel/") < advice && advice < at_of("FOCUS"));
    assert!(at_of("/p/.loopx/panel/") < at_of("FOCUS"));
    assert!(at_of("FOCUS") < at_of("PRIORITY") && at_of("PRIORITY") < at_of("FORMAL"));
    // An empty section renders nothing; without a panel, none of it.
    let bare = body(GoalFocusMode::Monitor, &task_body::Policies::default());
    assert!(headings(&bare).is_empty(), "{bare}");
    // Whatever the sections, the primary is told not to nest panel CLIs.
    for text in [&bare, &monitor] {
        assert!(text.contains(task_body::NO_NESTED_PANEL), "{text}");
    }
    assert!(
        task_body::NO_NESTED_PANEL.contains("Do not start reviewer or panel agent CLIs yourself")
    );
}

#[derive(Debug, Clone)]
enum Step {
    Add,
    Todo(usize, usize, TodoAction),
    Refine(usize, Vec<(u8, bool)>, bool),
    Clock(i64),
}

fn step() -> impl Strategy<Value = Step> {
    let action = prop_oneof![
        (1u64..120).prop_map(|ttl| TodoAction::Claim { ttl_seconds: ttl }),
        (1u64..120).prop_map(|ttl| TodoAction::Renew { ttl_seconds: ttl }),
        Just(TodoAction::Release),
        Just(TodoAction::Complete),
        Just(TodoAction::Block {
            reason: "waiting".into()
        }),
        (1u64..120).prop_map(|s| TodoAction::Defer { seconds: s }),
    ];
    prop_oneof![
        Just(Step::Add),
        (0usize..4, 0usize..3, action).prop_map(|(t, a, x)| Step::Todo(t, a, x)),
        (
            0usize..3,
            prop::collection::vec((0u8..5, any::<bool>()), 0..3),
            any::<bool>()
        )
            .prop_map(|(a, r, s)| Step::Refine(a, r, s)),
        (0i64..200).prop_map(Step::Clock),
    ]
}

proptest! {
    /// Random operation sequences never break the goal's invariants.
    #[test]
    fn random_operations_keep_the_invariants(steps in prop::collection::vec(step(), 1..40)) {
        let mut h = Harness::new();
        let agents = ["a", "b", "c"];
        let mut seen_requirements: Vec<(String, String)> = Vec::new();
        let mut done: Vec<String> = Vec::new();
        for s in steps {
            let before = h.goal().clone();
            let result = match s {
                Step::Add => h.run(Actor::Owner, GoalRequest::AddTodo { id: None, title: "work".into() }).map(|_| ()),
                Step::Todo(t, a, action) => {
                    let id = format!("t{}", t + 1);
                    h.todo(agent(agents[a]), &id, action).map(|_| ())
                }
                Step::Refine(a, reqs, with_source) => h.refine(agent(agents[a]), OutcomeUpdate {
                    outcome_id: "o".into(),
                    objective: Some("objective".into()),
                    add_requirements: reqs.iter().map(|(n, alt)| requirement(&format!("R{n}"), if *alt { "alt" } else { "text" })).collect(),
                    source: if with_source { source("s") } else { None },
                    ..Default::default()
                }).map(|_| ()),
                Step::Clock(d) => { h.clock += d; Ok(()) }
            };
            if result.is_err() {
                prop_assert_eq!(h.goal(), &before, "a refusal changed the goal");
            }
            let goal = h.goal();
            for todo in &goal.todos {
                if done.contains(&todo.id) {
                    prop_assert_eq!(todo.status, TodoStatus::Done, "a done todo was reopened");
                }
                if todo.status == TodoStatus::Done && !done.contains(&todo.id) {
                    done.push(todo.id.clone());
                }
                prop_assert_eq!(todo.lease.is_some(), todo.status == TodoStatus::Claimed);
            }
            if let Some(outcome) = goal.outcome("o") {
                prop_assert_eq!(outcome.original_objective.as_str(), "objective");
                for (id, text) in &seen_requirements {
                    let kept = outcome.requirements.iter().find(|r| &r.id == id);
                    prop_assert_eq!(kept.map(|r| r.description.as_str()), Some(text.as_str()), "requirement lost or rewritten");
                }
                seen_requirements = outcome.requirements.iter().map(|r| (r.id.clone(), r.description.clone())).collect();
            }
        }
    }
}

#[test]
fn control_characters_are_refused_in_every_free_text_field_without_a_write() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    h.refine(agent("a"), create_outcome("a", &todo)).unwrap();
    let writes = h.writes;
    let esc = "red \u{1b}[31m alert\u{7}";
    let requests = vec![
        GoalRequest::AddTodo {
            id: None,
            title: esc.into(),
        },
        GoalRequest::AddTodo {
            id: None,
            title: "two\nlines".into(),
        },
        GoalRequest::Todo {
            id: todo.clone(),
            action: TodoAction::Complete,
            note: format!("done {esc}"),
        },
        GoalRequest::Writeback {
            note: "nul\0".into(),
            evidence_refs: vec![],
            todos: vec![],
        },
        GoalRequest::PrepareObjective {
            document: ObjectiveDocument {
                objective: format!("New {esc}"),
                reason: String::new(),
                source_ref: String::new(),
            },
        },
        GoalRequest::RefineOutcome {
            update: OutcomeUpdate {
                outcome_id: "deck".into(),
                add_requirements: vec![requirement("R9", "del\u{7f}")],
                source: source("msg-9"),
                ..Default::default()
            },
        },
        GoalRequest::Recreate {
            objective: "c1 \u{9b}2J".into(),
            reason: String::new(),
        },
    ];
    for request in requests {
        let error = h.run(Actor::Owner, request.clone()).unwrap_err();
        assert!(
            matches!(error, GoalError::Text(_)),
            "{request:?} not refused as text: {error}"
        );
        assert!(
            error.to_string().contains("control character U+"),
            "{error}"
        );
    }
    assert_eq!(h.writes, writes);
}

#[test]
fn an_objective_over_its_limit_is_refused_naming_the_limit() {
    let mut h = Harness::new();
    let error = h
        .run(
            Actor::Owner,
            GoalRequest::Recreate {
                objective: "x".repeat(1024 * 1024),
                reason: String::new(),
            },
        )
        .unwrap_err();
    assert!(
        error.to_string().contains("the limit is 16384 bytes"),
        "{error}"
    );
    assert_eq!(h.goal().lifetime, 1);
}

#[test]
fn identities_follow_one_grammar_at_the_owner() {
    let mut h = Harness::new();
    let todo = h.add_todo("Build the deck");
    let writes = h.writes;
    // An empty agent id is not the owner.
    let error = h
        .todo(agent(""), &todo, TodoAction::Claim { ttl_seconds: 60 })
        .unwrap_err();
    assert!(error.to_string().starts_with("agent id \"\""), "{error}");
    assert!(Actor::agent("").is_err() && Actor::agent("../../x y\n").is_err());
    let mut hostile = create_outcome("a", &todo);
    hostile.responsible_agent = Some("../../x y\n".into());
    let error = h.refine(Actor::Owner, hostile).unwrap_err();
    assert!(matches!(error, GoalError::Ident(_)), "{error}");
    for (request, kind) in [
        (
            GoalRequest::AddTodo {
                id: Some("../t".into()),
                title: "t".into(),
            },
            "todo id",
        ),
        (
            GoalRequest::RegisterAgent {
                agent_id: " ".into(),
            },
            "agent id",
        ),
        (
            GoalRequest::AcknowledgeGap {
                outcome_id: "a/b".into(),
                checkpoint: crate::digest::Digest::of_bytes(b"x"),
            },
            "outcome id",
        ),
    ] {
        let error = h.run(Actor::Owner, request).unwrap_err();
        assert!(error.to_string().starts_with(kind), "{error}");
    }
    assert_eq!(h.writes, writes);
    // Ids loopx generates, and ordinary ones, still pass.
    h.run(
        Actor::Owner,
        GoalRequest::RegisterAgent {
            agent_id: "claude@host".into(),
        },
    )
    .unwrap();
    assert_eq!(todo, "t1");
}

#[test]
fn notes_references_and_block_reasons_are_redacted_before_the_history() {
    const KEY: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let mut h = Harness::new();
    let todo = h.add_todo("Work");
    let blocked = h.add_todo("Blocked work");
    h.run(
        Actor::Owner,
        GoalRequest::Writeback {
            note: format!("found the token_{KEY} in a log"),
            evidence_refs: vec![format!("ref-{KEY}"), "deck.pdf#1".into()],
            todos: vec![],
        },
    )
    .unwrap();
    h.run(
        Actor::Owner,
        GoalRequest::Todo {
            id: todo.clone(),
            action: TodoAction::Claim { ttl_seconds: 60 },
            note: format!("claimed with {KEY}"),
        },
    )
    .unwrap();
    h.todo(
        Actor::Owner,
        &blocked,
        TodoAction::Block {
            reason: format!("waiting on password={KEY}"),
        },
    )
    .unwrap();
    let history = serde_json::to_string(h.goal()).unwrap();
    assert!(!history.contains(KEY), "{history}");
    let note = h.goal().notes.last().unwrap();
    assert_eq!(note.note, "found the token_[REDACTED] in a log");
    // An honest reference is kept exactly as given.
    assert_eq!(note.evidence_refs, ["ref-[REDACTED]", "deck.pdf#1"]);
    let claimed = h.goal().todo(&todo).unwrap();
    assert_eq!(claimed.evidence[0].note, "claimed with [REDACTED]");
    let reason = &h.goal().todo(&blocked).unwrap().blocked_reason;
    assert_eq!(reason, "waiting on password=[REDACTED]");
}

fn row(id: Option<&str>, title: &str) -> NewTodo {
    NewTodo {
        id: id.map(str::to_owned),
        title: title.into(),
    }
}

#[test]
fn a_batch_adds_every_row_in_order_in_one_write_and_skips_ids_later_rows_name() {
    let mut h = Harness::new();
    h.add_todo("first");
    let writes = h.writes;
    let receipt = h
        .run(
            Actor::Owner,
            GoalRequest::AddTodos {
                todos: vec![
                    row(None, "auto"),
                    row(Some("t3"), "named later-free id"),
                    row(None, "auto again"),
                    row(Some("plan-x"), "named"),
                ],
            },
        )
        .unwrap();
    assert_eq!(h.writes, writes + 1, "one batch is one write");
    let ids: Vec<&str> = h.goal().todos.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4", "plan-x"]);
    assert_eq!(h.goal().todos[2].title, "named later-free id");
    assert_eq!(receipt.values["added"], 4);
    assert_eq!(receipt.values["first_todo_id"], "t2");
    assert_eq!(receipt.values["last_todo_id"], "plan-x");
    assert_eq!(h.add_todo("after"), "t5");
}

#[test]
fn one_bad_row_refuses_the_whole_batch_naming_the_row() {
    let mut h = Harness::new();
    let existing = h.add_todo("first");
    let before = h.goal().clone();
    let cases: Vec<(Vec<NewTodo>, &str)> = vec![
        (
            vec![row(None, "ok"), row(None, "  ")],
            "row 2: a todo needs a non-empty",
        ),
        (
            vec![
                row(None, "ok"),
                row(None, "ok"),
                row(Some(&existing), "dup"),
            ],
            "row 3: todo t1 already exists",
        ),
        (
            vec![row(Some("x"), "a"), row(Some("x"), "b")],
            "row 2: todo x is added twice",
        ),
        (vec![row(Some("no spaces"), "a")], "row 1:"),
        (vec![row(None, "a"), row(None, "two\nlines")], "row 2:"),
    ];
    for (todos, expected) in cases {
        let error = h
            .run(Actor::Owner, GoalRequest::AddTodos { todos })
            .unwrap_err();
        assert!(
            error.to_string().starts_with(expected),
            "{error} does not start with {expected:?}"
        );
        assert!(error.to_string().ends_with("nothing was added"), "{error}");
        assert_eq!(h.goal(), &before, "a refused batch changes nothing");
    }
}

#[test]
fn a_batch_over_the_limit_is_refused_before_any_row_is_read() {
    let mut h = Harness::new();
    let todos = vec![row(None, "x"); crate::text::limits::TODO_BATCH_ITEMS + 1];
    let error = h
        .run(Actor::Owner, GoalRequest::AddTodos { todos })
        .unwrap_err();
    assert!(error.to_string().contains("over the limit"), "{error}");
}

/// A goal that keeps each todo in its own stream, as loopx creates them.
fn streamed() -> Harness {
    Harness::created(true)
}

#[test]
fn a_goal_with_todo_streams_counts_its_todos_and_lists_none_in_its_snapshot() {
    let mut h = streamed();
    let receipt = h
        .run(
            Actor::Owner,
            GoalRequest::AddTodos {
                todos: vec![row(Some("t5"), "named"), row(None, "auto")],
            },
        )
        .unwrap();
    assert_eq!(receipt.values["first_todo_id"], "t5");
    assert_eq!(
        receipt.values["last_todo_id"], "t1",
        "skipping only ids rows name"
    );
    let goal = h.goal();
    assert!(goal.todos.is_empty(), "the snapshot lists no todo");
    assert_eq!(goal.streamed_todos, Some(2));
    assert_eq!(goal.next_todo_number, 6, "past every tN added");
    assert_eq!(h.add_todo("third"), "t6");
    assert_eq!(h.goal().streamed_todos, Some(3));

    // A successor lifetime keeps the shape, and starts from nothing.
    h.run(
        Actor::Owner,
        GoalRequest::Recreate {
            objective: "Prove lemma C".into(),
            reason: "new direction".into(),
        },
    )
    .unwrap();
    assert_eq!(h.goal().streamed_todos, Some(0));
}

#[test]
fn todos_kept_in_streams_compose_in_the_order_they_were_added() {
    use super::frontier::{overlay, ComposedContext, ComposedGoalOwner};
    let mut h = streamed();
    let todos = vec![
        row(Some("zeta"), "z"),
        row(None, "one"),
        row(Some("alpha"), "a"),
    ];
    let command = GoalCommand {
        actor: Actor::Owner,
        expected_instance: None,
        request: GoalRequest::AddTodos { todos },
        base_revision: None,
    };
    let event = GoalOwner::decide(h.goal.as_ref(), &command, &GoalContext { now: at(0) })
        .unwrap()
        .event
        .unwrap();
    let live: Vec<todo::Todo> = event
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::TodoAdded { todo } => Some(todo.clone()),
            _ => None,
        })
        .collect();
    h.goal = Some(GoalOwner::evolve(h.goal.take(), &event));
    let mut composed = h.goal().clone();
    overlay(&mut composed, live.iter().rev().cloned());
    let ids: Vec<&str> = composed.todos.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["zeta", "t1", "alpha"], "not the streams' name order");

    // An id whose stream exists is refused, naming the row.
    let again = GoalCommand {
        request: GoalRequest::AddTodos {
            todos: vec![row(None, "fine"), row(Some("alpha"), "again")],
        },
        ..command
    };
    let context = ComposedContext {
        now: at(1),
        live: &live,
    };
    let error = ComposedGoalOwner::decide(h.goal.as_ref(), &again, &context).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("row 2: todo alpha already exists"),
        "{error}"
    );
}

#[test]
fn a_todo_stream_starts_from_the_todo_its_goal_added_and_only_once() {
    use super::frontier::{TodoContext, TodoOwner};
    let h = streamed();
    let goal = h.goal();
    let born = todo::Todo {
        id: "t1".into(),
        title: "work".into(),
        status: todo::TodoStatus::Open,
        lease: None,
        created_at: at(0),
        created_by: "owner".into(),
        blocked_reason: String::new(),
        deferred_until: None,
        completed_at: None,
        evidence: Vec::new(),
        position: Some(0),
    };
    let command = GoalCommand {
        actor: Actor::Owner,
        expected_instance: None,
        request: GoalRequest::AddTodo {
            id: Some("t1".into()),
            title: "work".into(),
        },
        base_revision: None,
    };
    let context = TodoContext {
        now: at(0),
        goal,
        born: Some(&born),
    };
    let event = TodoOwner::decide(None, &command, &context)
        .unwrap()
        .event
        .unwrap();
    assert_eq!(TodoOwner::event_kind(&event), "todo.added");
    let state = TodoOwner::evolve(None, &event);
    assert_eq!(state, born);
    let error = TodoOwner::decide(Some(&state), &command, &context).unwrap_err();
    assert_eq!(error, GoalError::TodoExists { id: "t1".into() });
    assert_eq!(
        TodoOwner::expected_revision(&command),
        Some(0),
        "an addition that lost a race for its stream is stale, and decided again"
    );
}
