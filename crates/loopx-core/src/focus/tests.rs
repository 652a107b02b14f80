//! The Goal Focus rules, each proved on the pure owners.

use super::contract::{Criterion, Obligation, ObligationStatus, Scope};
use super::decisions::{DecisionOutcome, DirectionDecision};
use super::direction::{propose, SelectionKind};
use super::mode::{gate, resolve, Gate, ModeSource};
use super::plan::{PlanReview, PlanState, Trigger};
use super::registry::{Approach, Campaign, Eligibility, EligibilityStatus, Estimate};
use super::replan::{draft, PlanContext, PlanOwner, Replan};
use super::signals::{signals, Inputs};
use super::*;
use crate::ledger::budget::Budget;
use crate::ledger::vocabulary::GoalFocusMode;
use crate::ledger::{InitLoop, Ledger};
use crate::operation::{Clock, Owner};
use jiff::Timestamp;

fn now() -> Timestamp {
    "2026-12-03T12:00:00Z".parse().unwrap()
}

fn approach(id: &str, low: f64, high: f64) -> Approach {
    Approach {
        approach_id: id.into(),
        summary: format!("try {id}"),
        estimate: Estimate {
            low,
            high,
            expires_at: None,
        },
        eligibility: Eligibility::default(),
        reopen_conditions: vec![],
        trip_wires: vec![],
        compute_policy: None,
    }
}

fn registry(campaigns: &[(&str, Vec<Approach>)]) -> ApproachRegistry {
    ApproachRegistry {
        campaigns: campaigns
            .iter()
            .map(|(id, approaches)| Campaign {
                campaign_id: (*id).into(),
                title: String::new(),
                approaches: approaches.clone(),
            })
            .collect(),
    }
}

fn contract(obligations: Vec<Obligation>) -> GoalContract {
    GoalContract {
        goal: "prove lemma B".into(),
        criteria: vec![Criterion {
            criterion_id: "success".into(),
            text: "a checked proof".into(),
        }],
        scope: Scope::default(),
        obligations,
        trip_wires: Vec::new(),
    }
}

fn obligation(id: &str, depends_on: &[&str]) -> Obligation {
    Obligation {
        obligation_id: id.into(),
        description: format!("discharge {id}"),
        kind: Default::default(),
        status: ObligationStatus::Open,
        depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
    }
}

fn revised<D: document::Document>(document: D) -> Revised<D> {
    DocumentOwner::<D>::evolve(
        None,
        &Revision {
            at: now(),
            document,
        },
    )
}

#[test]
fn a_robustly_dominant_lower_bound_exploits() {
    let r = registry(&[
        ("c1", vec![approach("a", 0.6, 0.9)]),
        ("c2", vec![approach("b", 0.1, 0.5)]),
    ]);
    let selection = propose(&r, now()).selection.unwrap();
    assert_eq!(selection.kind, SelectionKind::Exploit);
    assert_eq!(selection.approach_ids, ["a"]);
}

#[test]
fn overlapping_intervals_run_an_experiment_among_at_most_three_diverse_approaches() {
    let r = registry(&[
        (
            "c1",
            vec![approach("a1", 0.4, 0.9), approach("a2", 0.4, 0.85)],
        ),
        ("c2", vec![approach("b", 0.3, 0.7)]),
        ("c3", vec![approach("c", 0.2, 0.6)]),
        ("c4", vec![approach("d", 0.35, 0.5)]),
        // Cannot beat a1's lower bound: never part of the experiment.
        ("c5", vec![approach("e", 0.0, 0.3)]),
    ]);
    let selection = propose(&r, now()).selection.unwrap();
    assert_eq!(selection.kind, SelectionKind::Experiment);
    assert_eq!(selection.approach_ids, ["a1", "b", "c"]);
    assert_eq!(selection.campaign_ids, ["c1", "c2", "c3"]);
    assert_eq!(selection.horizon_iterations, 3);
}

#[test]
fn ineligible_and_expired_approaches_never_compete() {
    let mut blocked = approach("blocked", 0.9, 1.0);
    blocked.eligibility = Eligibility {
        status: EligibilityStatus::Blocked,
        reason: "waits for the cluster".into(),
    };
    let mut stale = approach("stale", 0.8, 0.95);
    stale.estimate.expires_at = Some("2026-12-01T00:00:00Z".parse().unwrap());
    let r = registry(&[("c1", vec![blocked, stale, approach("ok", 0.1, 0.2)])]);
    let proposal = propose(&r, now());
    assert_eq!(proposal.selection.unwrap().approach_ids, ["ok"]);
    let excluded: Vec<&str> = proposal
        .excluded
        .iter()
        .map(|e| e.approach_id.as_str())
        .collect();
    assert_eq!(excluded, ["blocked", "stale"]);
    let nothing = registry(&[]);
    assert!(propose(&nothing, now()).selection.is_none());
}

#[test]
fn an_obligation_cycle_or_unknown_dependency_is_refused() {
    use document::Document;
    let cyclic = contract(vec![
        obligation("o1", &["o2"]),
        obligation("o2", &["o3"]),
        obligation("o3", &["o1"]),
    ]);
    match cyclic.check() {
        Err(FocusError::DependencyCycle { cycle }) => {
            assert_eq!(cycle.first(), cycle.last(), "{cycle:?}");
            assert_eq!(cycle.len(), 4, "{cycle:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        contract(vec![obligation("o1", &["nope"])]).check(),
        Err(FocusError::UnknownDependency { .. })
    ));
    assert!(matches!(
        contract(vec![obligation("o1", &[]), obligation("o1", &[])]).check(),
        Err(FocusError::DuplicateId { .. })
    ));
    assert!(
        contract(vec![obligation("o1", &[]), obligation("o2", &["o1"])])
            .check()
            .is_ok()
    );
}

#[test]
fn a_long_dependency_chain_is_checked_without_recursion() {
    use document::Document;
    let chain: Vec<Obligation> = (0..200)
        .map(|i| {
            let deps: Vec<String> = if i == 0 {
                vec![]
            } else {
                vec![format!("o{}", i - 1)]
            };
            let mut o = obligation(&format!("o{i}"), &[]);
            o.depends_on = deps;
            o
        })
        .collect();
    assert!(contract(chain).check().is_ok());
}

#[test]
fn estimates_outside_the_unit_interval_are_refused() {
    use document::Document;
    for (low, high) in [(0.5, 0.4), (-0.1, 0.2), (0.2, 1.5), (f64::NAN, 0.5)] {
        let r = registry(&[("c", vec![approach("a", low, high)])]);
        assert!(
            matches!(r.check(), Err(FocusError::BadEstimate { .. })),
            "[{low}, {high}] accepted"
        );
    }
}

#[test]
fn a_document_revision_counts_and_an_identical_one_writes_nothing() {
    let clock = Clock { now: now() };
    let request = Revise {
        base_revision: Some(0),
        document: contract(vec![]),
    };
    let first = ContractOwner::decide(None, &request, &clock).unwrap();
    let state = ContractOwner::evolve(None, first.event.as_ref().unwrap());
    assert_eq!(state.revision, 1);
    let again = ContractOwner::decide(
        Some(&state),
        &Revise {
            base_revision: Some(1),
            document: contract(vec![]),
        },
        &clock,
    )
    .unwrap();
    assert!(again.event.is_none() && again.receipt.unchanged);
    assert_eq!(again.receipt.fingerprint, state.pin().fingerprint);
}

fn ledger() -> Ledger {
    let init = InitLoop::new("g", "c", Budget::iterations_only(10));
    Ledger {
        run_id: "run".into(),
        config: init,
        spent: Default::default(),
        status: crate::ledger::vocabulary::LoopStatus::Initialized,
        created_at: now(),
        updated_at: now(),
        recent: vec![],
        pending_claim: None,
        imported: 0,
        unbanked_charges: Vec::new(),
    }
}

pub(crate) fn record(iteration: u64) -> crate::ledger::IterationRecord {
    use crate::ledger::vocabulary::{Decision, Mode};
    crate::ledger::IterationRecord {
        iteration,
        timestamp: now(),
        operation_id: crate::operation::OperationId::parse(&format!("op{iteration}")).unwrap(),
        mode: Mode::BoundedResearch,
        objective: "work".into(),
        decision: Decision::Continue,
        stop_reason: String::new(),
        evidence_checked: Default::default(),
        input_refs: vec![],
        actions_taken: vec![],
        remaining_gaps: vec![],
        output: String::new(),
        budget_delta: crate::ledger::BudgetDelta {
            iterations: 1,
            tokens: 0,
            usd: 0.0,
            wall_time_seconds: 0,
        },
        completed_summary: String::new(),
        current_summary: String::new(),
        proposed_next_action: String::new(),
        executor_provider: String::new(),
        dispatch_id: String::new(),
        claim: None,
        direction: Default::default(),
        bank: None,
    }
}

fn replan_in(mode: GoalFocusMode) -> Result<plan::CurrentPlan, FocusError> {
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let l = ledger();
    draft(
        None,
        &Replan { trigger: None },
        &PlanContext {
            now: now(),
            mode,
            ledger: &l,
            contract: &c,
            registry: &r,
            read_plan_revision: 0,
        },
    )
}

#[test]
fn monitor_commits_the_direction_unreviewed_and_enforce_waits_for_a_review() {
    let monitor = replan_in(GoalFocusMode::Monitor).unwrap();
    assert_eq!(monitor.state, PlanState::Active);
    assert_eq!(monitor.review, PlanReview::Unreviewed);
    assert_eq!(monitor.selection.as_ref().unwrap().approach_ids, ["a"]);
    let enforce = replan_in(GoalFocusMode::Enforce).unwrap();
    assert_eq!(enforce.state, PlanState::NeedsReplan);
    assert_eq!(enforce.review, PlanReview::StrategyReviewRequired);
    assert!(enforce.selection.is_none());
    // The proposal is kept for the reviewer to see, never selected.
    assert!(enforce.proposal.selection.is_some());
    assert_eq!(enforce.trigger, Trigger::MissingPlan);
    let decision = DirectionDecision::of_plan("op", GoalFocusMode::Enforce, &enforce);
    assert_eq!(decision.outcome, DecisionOutcome::StrategyReviewRequired);
    assert!(matches!(
        replan_in(GoalFocusMode::Off),
        Err(FocusError::Off)
    ));
}

#[test]
fn signals_fire_for_a_missing_plan_drift_expiry_and_streaks() {
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let mut l = ledger();
    let fired = |plan: Option<&plan::CurrentPlan>, l: &Ledger, r: &Revised<ApproachRegistry>| {
        signals(&Inputs {
            now: now(),
            ledger: l,
            contract: &c,
            registry: r,
            plan,
        })
        .into_iter()
        .map(|s| s.trigger)
        .collect::<Vec<_>>()
    };
    assert_eq!(fired(None, &l, &r), [Trigger::MissingPlan]);
    let plan = replan_in(GoalFocusMode::Monitor).unwrap();
    assert!(fired(Some(&plan), &l, &r).is_empty());
    // Three banked iterations exhaust the exploit bound, and none reduced
    // an obligation; all three were scope-only.
    for i in 1..=3 {
        let mut record = record(i);
        record.direction.local_without_goal_delta = true;
        l.recent.push(record);
    }
    l.spent.iterations = 3;
    assert_eq!(
        fired(Some(&plan), &l, &r),
        [
            Trigger::PlanExpired,
            Trigger::NoObligationReduction,
            Trigger::ScopeOnly
        ]
    );
    let moved = revised(registry(&[("c1", vec![approach("b", 0.5, 0.9)])]));
    let l = ledger();
    assert_eq!(
        fired(Some(&plan), &l, &moved),
        [Trigger::RevisionDrift, Trigger::SelectionIneligible]
    );
}

#[test]
fn the_default_mode_is_monitor_without_a_panel_and_enforce_with_one() {
    assert_eq!(
        resolve(None, false),
        (GoalFocusMode::Monitor, ModeSource::DefaultWithoutPanel)
    );
    assert_eq!(
        resolve(None, true),
        (GoalFocusMode::Enforce, ModeSource::DefaultWithPanel)
    );
    assert_eq!(
        resolve(Some(GoalFocusMode::Off), true),
        (GoalFocusMode::Off, ModeSource::ChosenAtInit)
    );
    let signal = [signals::Signal {
        trigger: Trigger::Manual,
        detail: String::new(),
    }];
    assert_eq!(gate(GoalFocusMode::Monitor, &signal), Gate::Reported);
    assert_eq!(gate(GoalFocusMode::Enforce, &signal), Gate::Blocked);
    assert_eq!(gate(GoalFocusMode::Enforce, &[]), Gate::Clear);
    assert_eq!(gate(GoalFocusMode::Off, &signal), Gate::NotApplied);
}

#[test]
fn a_replan_with_nothing_firing_needs_a_named_trigger_and_a_moved_plan_voids_the_reading() {
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let l = ledger();
    let context = |read_plan_revision| PlanContext {
        now: now(),
        mode: GoalFocusMode::Monitor,
        ledger: &l,
        contract: &c,
        registry: &r,
        read_plan_revision,
    };
    let first = PlanOwner::decide(None, &Replan { trigger: None }, &context(0)).unwrap();
    let plan = PlanOwner::evolve(None, first.event.as_ref().unwrap());
    assert_eq!(
        draft(Some(&plan), &Replan { trigger: None }, &context(1)),
        Err(FocusError::NothingToReplan)
    );
    let manual = Replan {
        trigger: Some(Trigger::Manual),
    };
    assert_eq!(
        draft(Some(&plan), &manual, &context(1))
            .unwrap()
            .plan_revision,
        2
    );
    assert_eq!(
        draft(Some(&plan), &manual, &context(0)),
        Err(FocusError::PlanMoved { read: 0, now: 1 })
    );
}

mod direction_properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// (campaign, low, width, eligible) for each approach `a<i>`.
    fn registry_of(specs: &[(u8, f64, f64, bool)]) -> ApproachRegistry {
        let mut campaigns: Vec<(String, Vec<Approach>)> = Vec::new();
        for (i, (campaign, low, width, eligible)) in specs.iter().enumerate() {
            let mut a = approach(&format!("a{i}"), *low, (low + width).min(1.0));
            if !eligible {
                a.eligibility = Eligibility {
                    status: EligibilityStatus::Parked,
                    reason: "parked".into(),
                };
            }
            let id = format!("c{campaign}");
            match campaigns.iter_mut().find(|(c, _)| *c == id) {
                Some((_, list)) => list.push(a),
                None => campaigns.push((id, vec![a])),
            }
        }
        ApproachRegistry {
            campaigns: campaigns
                .into_iter()
                .map(|(campaign_id, approaches)| Campaign {
                    campaign_id,
                    title: String::new(),
                    approaches,
                })
                .collect(),
        }
    }

    proptest! {
        #[test]
        fn the_direction_rule_holds_for_any_registry(
            specs in proptest::collection::vec((0u8..4, 0.0f64..1.0, 0.0f64..0.5, any::<bool>()), 0..9)
        ) {
            let registry = registry_of(&specs);
            let proposal = propose(&registry, now());
            let (eligible, _) = registry.eligible(now());
            let estimate = |id: &str| registry.approach(id).unwrap().approach.estimate.clone();
            let Some(selection) = proposal.selection.clone() else {
                prop_assert!(eligible.is_empty());
                return Ok(());
            };
            let eligible_ids: BTreeSet<&str> =
                eligible.iter().map(|c| c.approach.approach_id.as_str()).collect();
            let chosen: BTreeSet<&str> = selection.approach_ids.iter().map(String::as_str).collect();
            prop_assert_eq!(chosen.len(), selection.approach_ids.len(), "an approach chosen twice");
            prop_assert!(chosen.is_subset(&eligible_ids), "an ineligible approach was chosen");
            let best_low = eligible
                .iter()
                .map(|c| c.approach.estimate.low)
                .fold(f64::MIN, f64::max);
            match selection.kind {
                SelectionKind::Exploit => {
                    prop_assert_eq!(chosen.len(), 1);
                    let winner = estimate(&selection.approach_ids[0]);
                    for other in eligible.iter().filter(|c| !chosen.contains(c.approach.approach_id.as_str())) {
                        prop_assert!(winner.low > other.approach.estimate.high, "exploited without dominance");
                    }
                }
                SelectionKind::Experiment => {
                    prop_assert!((1..=3).contains(&chosen.len()));
                    // Somebody overlaps the leader, or it would have been exploited.
                    prop_assert!(eligible.len() > 1);
                    for id in &selection.approach_ids {
                        prop_assert!(estimate(id).high >= best_low, "{} cannot beat the leader", id);
                    }
                    // Diverse: as many campaigns as the contenders offer, up to three.
                    let contender_campaigns: BTreeSet<&str> = eligible
                        .iter()
                        .filter(|c| c.approach.estimate.high >= best_low)
                        .map(|c| c.campaign_id)
                        .collect();
                    prop_assert_eq!(
                        selection.campaign_ids.len(),
                        contender_campaigns.len().min(3)
                    );
                }
            }
            // The order the registry lists campaigns in decides nothing.
            let mut reversed = registry.clone();
            reversed.campaigns.reverse();
            prop_assert_eq!(propose(&reversed, now()).selection, proposal.selection);
        }
    }
}

mod strategy_review {
    use super::*;
    use crate::driver::provider::Family;
    use crate::focus::direction::NotSelectable;
    use crate::focus::strategy::{
        executor, judge, settle, AdviceContext, AdviceProblem, ApplyAdvice, Parties, Party, Ruling,
        StrategyAdvice,
    };

    struct World {
        contract: Revised<GoalContract>,
        registry: Revised<ApproachRegistry>,
        ledger: Ledger,
        plan: plan::CurrentPlan,
    }

    /// An enforce loop whose replan proposed an experiment of a and b
    /// (overlapping), with c dominated and d parked.
    fn world() -> World {
        let contract = revised(contract(vec![]));
        let mut parked = approach("d", 0.0, 1.0);
        parked.eligibility = Eligibility {
            status: EligibilityStatus::Parked,
            reason: "waiting".into(),
        };
        let registry = revised(registry(&[
            ("c1", vec![approach("a", 0.5, 0.9), approach("c", 0.1, 0.2)]),
            ("c2", vec![approach("b", 0.4, 0.8), parked]),
        ]));
        let ledger = ledger();
        let plan = draft(
            None,
            &Replan { trigger: None },
            &PlanContext {
                now: now(),
                mode: GoalFocusMode::Enforce,
                ledger: &ledger,
                contract: &contract,
                registry: &registry,
                read_plan_revision: 0,
            },
        )
        .unwrap();
        World {
            contract,
            registry,
            ledger,
            plan,
        }
    }

    impl World {
        fn context(&self) -> PlanContext<'_> {
            PlanContext {
                now: now(),
                mode: GoalFocusMode::Enforce,
                ledger: &self.ledger,
                contract: &self.contract,
                registry: &self.registry,
                read_plan_revision: self.plan.plan_revision,
            }
        }

        fn advice(&self, verdict: &str, extra: serde_json::Value) -> StrategyAdvice {
            let mut value = serde_json::json!({
                "schema": "strategy_advice.v1",
                "reviewer": {"provider": "codex"},
                "reviewed": {
                    "goal_contract": self.contract.pin(),
                    "approach_registry": self.registry.pin(),
                    "current_plan": self.plan.pin(),
                },
                "verdict": verdict,
                "rationale": "the experiment separates the two leaders",
            });
            for (k, v) in extra.as_object().unwrap() {
                value[k] = v.clone();
            }
            serde_json::from_value(value).unwrap()
        }

        fn judge(
            &self,
            advice: &StrategyAdvice,
            reviewer: Family,
        ) -> Result<Ruling, AdviceProblem> {
            judge(
                advice,
                &self.context(),
                Some(&self.plan),
                &parties(reviewer),
            )
        }
    }

    fn parties(reviewer_family: Family) -> Parties {
        Parties {
            executor: Party {
                provider: "claude".into(),
                family: Family::Anthropic,
            },
            reviewer_family,
        }
    }

    #[test]
    fn an_endorsement_selects_the_proposal_and_commits_a_reviewed_active_plan() {
        let w = world();
        let advice = w.advice("endorse", serde_json::json!({}));
        let Ok(Ruling::Select(selection)) = w.judge(&advice, Family::Openai) else {
            panic!("endorsement refused");
        };
        assert_eq!(selection.approach_ids, ["a", "b"]);
        let context = w.context();
        let parties = parties(Family::Openai);
        let next = settle(
            Some(&w.plan),
            &ApplyAdvice {
                advice,
                executor: None,
            },
            &AdviceContext {
                plan: &context,
                parties: &parties,
            },
        )
        .unwrap();
        assert_eq!(next.plan_revision, 2);
        assert_eq!(next.state, PlanState::Active);
        assert_eq!(next.review, PlanReview::Reviewed);
        assert_eq!(next.valid_through_iteration, Some(2));
        let review = next.strategy_review.as_ref().unwrap();
        assert_eq!(review.reviewer.family, Family::Openai);
        assert_eq!(review.reviewed_plan_revision, 1);
        let decision = DirectionDecision::of_plan("op", GoalFocusMode::Enforce, &next);
        assert_eq!(decision.outcome, DecisionOutcome::Selected);
        assert!(decision.strategy_review.is_some());
    }

    #[test]
    fn the_reviewer_must_be_of_a_known_family_other_than_the_executors() {
        let w = world();
        let advice = w.advice("endorse", serde_json::json!({}));
        assert!(matches!(
            w.judge(&advice, Family::Anthropic),
            Err(AdviceProblem::SameFamily { .. })
        ));
        assert!(matches!(
            w.judge(&advice, Family::Unverified),
            Err(AdviceProblem::ReviewerUnverified { .. })
        ));
        let mut unknown_executor = parties(Family::Openai);
        unknown_executor.executor.family = Family::Unverified;
        assert!(matches!(
            judge(&advice, &w.context(), Some(&w.plan), &unknown_executor),
            Err(AdviceProblem::ExecutorUnverified { .. })
        ));
        assert_eq!(executor(Some("claude"), None).unwrap(), "claude");
        assert_eq!(executor(None, Some(" codex ")).unwrap(), "codex");
        assert_eq!(executor(Some("claude"), Some("claude")).unwrap(), "claude");
        assert!(matches!(
            executor(Some("claude"), Some("codex")),
            Err(AdviceProblem::ExecutorMismatch { .. })
        ));
        assert_eq!(
            executor(None, Some("  ")),
            Err(AdviceProblem::ExecutorUnknown)
        );
    }

    #[test]
    fn a_same_revision_rewrite_of_any_reviewed_document_voids_the_advice() {
        let w = world();
        let advice = w.advice("endorse", serde_json::json!({}));
        let mut contract = w.contract.clone();
        contract.document.goal = "prove lemma C".into();
        let mut plan = w.plan.clone();
        plan.committed_at = "2026-12-03T12:00:01Z".parse().unwrap();
        let stale_contract = World {
            contract,
            ..world()
        };
        assert!(matches!(
            stale_contract.judge(&advice, Family::Openai),
            Err(AdviceProblem::Stale {
                what: "goal contract",
                ..
            })
        ));
        let stale_plan = World { plan, ..world() };
        assert!(matches!(
            stale_plan.judge(&advice, Family::Openai),
            Err(AdviceProblem::Stale {
                what: "current plan",
                ..
            })
        ));
    }

    #[test]
    fn a_proposal_must_be_selectable_under_the_direction_rule() {
        let w = world();
        let propose = |ids: serde_json::Value| {
            w.judge(
                &w.advice("propose", serde_json::json!({ "selection": ids })),
                Family::Openai,
            )
        };
        let Ok(Ruling::Select(one)) = propose(serde_json::json!(["b"])) else {
            panic!("a contender alone is an experiment");
        };
        assert_eq!(one.kind, SelectionKind::Experiment);
        assert_eq!(one.horizon_iterations, 1);
        assert!(matches!(
            propose(serde_json::json!(["d"])),
            Err(AdviceProblem::NotSelectable(
                NotSelectable::Ineligible { .. }
            ))
        ));
        assert!(matches!(
            propose(serde_json::json!(["c"])),
            Err(AdviceProblem::NotSelectable(
                NotSelectable::Dominated { .. }
            ))
        ));
        assert!(matches!(
            propose(serde_json::json!(["a", "b", "a"])),
            Err(AdviceProblem::NotSelectable(NotSelectable::Twice(_)))
        ));
        assert!(matches!(
            propose(serde_json::json!(["zz"])),
            Err(AdviceProblem::NotSelectable(NotSelectable::Unknown(_)))
        ));
        assert!(matches!(
            propose(serde_json::json!([])),
            Err(AdviceProblem::NotSelectable(NotSelectable::Count {
                count: 0
            }))
        ));
        // An objection needs a reason and leaves the plan without a direction.
        let bare = w.advice("object", serde_json::json!({}));
        assert!(matches!(
            w.judge(&bare, Family::Openai),
            Err(AdviceProblem::Shape { .. })
        ));
        let objection = w.advice("object", serde_json::json!({"reasons": ["b is untested"]}));
        assert_eq!(w.judge(&objection, Family::Openai), Ok(Ruling::Object));
        // Unknown fields are refused, not ignored.
        let mut typo = serde_json::to_value(w.advice("endorse", serde_json::json!({}))).unwrap();
        typo["verdict_reason"] = serde_json::json!("fine");
        assert!(serde_json::from_value::<StrategyAdvice>(typo).is_err());
    }

    #[test]
    fn an_objection_keeps_needs_replan_and_fires_reviewer_dissent() {
        let w = world();
        let context = w.context();
        let parties = parties(Family::Openai);
        let next = settle(
            Some(&w.plan),
            &ApplyAdvice {
                advice: w.advice("object", serde_json::json!({"reasons": ["b is untested"]})),
                executor: None,
            },
            &AdviceContext {
                plan: &context,
                parties: &parties,
            },
        )
        .unwrap();
        assert_eq!(next.state, PlanState::NeedsReplan);
        assert_eq!(next.review, PlanReview::StrategyObjected);
        assert!(next.selection.is_none());
        let fired = signals(&Inputs {
            now: now(),
            ledger: &w.ledger,
            contract: &w.contract,
            registry: &w.registry,
            plan: Some(&next),
        });
        assert!(fired.iter().any(|s| s.trigger == Trigger::ReviewerDissent));
        let decision = DirectionDecision::of_plan("op", GoalFocusMode::Enforce, &next);
        assert_eq!(decision.outcome, DecisionOutcome::StrategyObjected);
        // The objected plan awaits no review: a second advice is refused.
        let again = judge(
            &w.advice("endorse", serde_json::json!({})),
            &context,
            Some(&next),
            &parties,
        );
        assert!(matches!(again, Err(AdviceProblem::NotAwaiting { .. })));
    }
}

#[test]
fn a_reviewed_discharge_resets_the_reduction_count_and_an_agents_own_claim_does_not() {
    use crate::focus::candidate::ObligationTarget;
    use crate::focus::contract::ObligationStatus;
    use crate::ledger::{Bank, BankStatus};
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let plan = replan_in(GoalFocusMode::Monitor).unwrap();
    let stalled = |l: &Ledger| {
        signals_of(&c, &r, Some(&plan), l)
            .iter()
            .any(|s| s.trigger == Trigger::NoObligationReduction)
    };
    let banked = |i: u64, transitions: Vec<ObligationTarget>| {
        let mut record = record(i);
        // What the agent says is its claim; only the review's transitions count.
        record.direction.global_delta = "reduced".into();
        record.bank = Some(Bank {
            status: BankStatus::Accepted,
            candidate_fingerprint: crate::digest::Digest::of_bytes(&i.to_be_bytes()),
            obligation_transitions: transitions,
        });
        record
    };
    let satisfied = vec![ObligationTarget {
        obligation_id: "o1".into(),
        target_status: ObligationStatus::Satisfied,
    }];
    let mut l = ledger();
    l.recent = vec![banked(1, vec![]), banked(2, vec![]), banked(3, vec![])];
    assert!(
        stalled(&l),
        "three banked rows that discharged nothing stall"
    );
    l.recent[2] = banked(3, satisfied.clone());
    assert!(
        !stalled(&l),
        "the latest discharged o1: the count starts over"
    );
    l.recent.extend([banked(4, vec![]), banked(5, vec![])]);
    assert!(!stalled(&l));
    l.recent.push(banked(6, vec![]));
    assert!(stalled(&l));
}

#[test]
fn a_trip_wire_fires_once_the_iterations_under_the_plan_meet_it_and_a_replan_resets_it() {
    use crate::focus::contract::{TripCondition, TripWire};
    use crate::ledger::{Bank, BankStatus};
    let wire = |id: &str, when| TripWire {
        trip_wire_id: id.into(),
        description: String::new(),
        when,
    };
    let mut document = contract(vec![]);
    document.trip_wires = vec![
        wire("spend", TripCondition::Usd { at_least: 1.0 }),
        wire("rejections", TripCondition::RejectedReviews { at_least: 2 }),
    ];
    let c = revised(document);
    // The selected approach declares its own wire too.
    let mut a = approach("a", 0.5, 0.9);
    a.trip_wires = vec![wire("long", TripCondition::Iterations { at_least: 2 })];
    let r = revised(registry(&[("c1", vec![a])]));
    let mut plan = replan_in(GoalFocusMode::Monitor).unwrap();
    assert_eq!(plan.selection.as_ref().unwrap().approach_ids, ["a"]);
    let fired = |plan: &plan::CurrentPlan, l: &Ledger| {
        signals_of(&c, &r, Some(plan), l)
            .into_iter()
            .filter(|s| s.trigger == Trigger::TripWire)
            .map(|s| s.detail)
            .collect::<Vec<_>>()
    };
    let rejected = |i: u64, usd: f64| {
        let mut record = record(i);
        record.budget_delta.usd = usd;
        record.bank = Some(Bank {
            status: BankStatus::Rejected,
            candidate_fingerprint: crate::digest::Digest::of_bytes(&i.to_be_bytes()),
            obligation_transitions: Vec::new(),
        });
        record
    };
    let mut l = ledger();
    l.recent.push(rejected(1, 0.4));
    assert!(fired(&plan, &l).is_empty());
    l.recent.push(rejected(2, 0.7));
    let details = fired(&plan, &l);
    assert_eq!(details.len(), 3, "{details:?}");
    assert!(details[0].contains("trip wire spend") && details[0].contains("$1.10"));
    assert!(details[1].contains("2 iterations rejected"));
    assert!(
        details[2].contains("trip wire long of approach a"),
        "{details:?}"
    );
    // A plan committed after them has not seen them spend or fail.
    plan.committed_at_iteration = 2;
    assert!(fired(&plan, &l).is_empty());
}

#[test]
fn counterevidence_fires_until_a_plan_committed_after_it_has_seen_it() {
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let mut plan = replan_in(GoalFocusMode::Monitor).unwrap();
    let fires = |plan: &plan::CurrentPlan, l: &Ledger| {
        signals_of(&c, &r, Some(plan), l).iter().any(|s| {
            s.trigger == Trigger::UnreviewedCounterevidence && s.detail.contains("against a")
        })
    };
    let mut l = ledger();
    l.recent.push(record(1));
    assert!(!fires(&plan, &l));
    let mut against = record(2);
    against.direction.counterevidence = vec!["a".into()];
    l.recent.push(against);
    l.recent.push(record(3));
    assert!(fires(&plan, &l), "a later iteration does not review it");
    plan.committed_at_iteration = 3;
    assert!(!fires(&plan, &l));
}

#[test]
fn a_trip_wire_that_can_never_stay_unset_is_refused() {
    use crate::focus::contract::{TripCondition, TripWire};
    for when in [
        TripCondition::Iterations { at_least: 0 },
        TripCondition::Usd { at_least: f64::NAN },
        TripCondition::Usd { at_least: 0.0 },
    ] {
        let wires = vec![TripWire {
            trip_wire_id: "w".into(),
            description: String::new(),
            when,
        }];
        let mut document = contract(vec![]);
        document.trip_wires = wires.clone();
        assert!(
            matches!(document.check(), Err(FocusError::TripWireNeverSet { .. })),
            "{when:?}"
        );
        // An approach's wire is held to the same rule.
        let mut a = approach("a", 0.5, 0.9);
        a.trip_wires = wires;
        assert!(
            matches!(
                registry(&[("c1", vec![a])]).check(),
                Err(FocusError::TripWireNeverSet { .. })
            ),
            "{when:?}"
        );
    }
}

/// The signals that fire for `plan` over ledger `l`, contract `c` and
/// registry `r`, now.
fn signals_of(
    c: &Revised<GoalContract>,
    r: &Revised<ApproachRegistry>,
    plan: Option<&plan::CurrentPlan>,
    l: &Ledger,
) -> Vec<signals::Signal> {
    signals(&Inputs {
        now: now(),
        ledger: l,
        contract: c,
        registry: r,
        plan,
    })
}

#[test]
fn a_scope_only_streak_counts_under_the_plan_so_a_replan_reviews_it() {
    let c = revised(contract(vec![]));
    let r = revised(registry(&[("c1", vec![approach("a", 0.5, 0.9)])]));
    let mut plan = replan_in(GoalFocusMode::Monitor).unwrap();
    let mut l = ledger();
    for i in 1..=3 {
        let mut record = record(i);
        record.direction.local_without_goal_delta = true;
        l.recent.push(record);
    }
    let scope_only = |plan: &plan::CurrentPlan, l: &Ledger| {
        signals_of(&c, &r, Some(plan), l)
            .iter()
            .any(|s| s.trigger == Trigger::ScopeOnly)
    };
    assert!(scope_only(&plan, &l));
    plan.committed_at_iteration = 1;
    assert!(
        !scope_only(&plan, &l),
        "two under the plan are no streak yet"
    );
    // Without any plan, every recent iteration counts.
    assert!(signals_of(&c, &r, None, &l)
        .iter()
        .any(|s| s.trigger == Trigger::ScopeOnly));
}
