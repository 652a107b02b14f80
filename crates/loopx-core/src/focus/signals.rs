//! Replan signals: which of the spec's replan triggers fire now, read from
//! the plan, the contract and registry it is pinned to, and the ledger's
//! latest records.
//!
//! Owns the detection of: a missing or non-active plan, a plan pinned to
//! versions that are no longer current, a selection that became
//! ineligible or whose estimate expired, a plan past its bound, three
//! iterations in a row without global obligation reduction (what counts
//! as one is [`super::banking::reduced`]), and three
//! scope-only iterations in a row, and reviewer dissent: a result review
//! rejected the latest iteration since the plan (so the next plan is
//! `needs_replan`), or a strategy reviewer objected to the plan's
//! proposed direction; a trip wire of the contract, or of a selected
//! approach, that the iterations banked under the plan meet; and unreviewed counterevidence: an
//! iteration banked under the plan that reported evidence against a
//! supported claim or the selected approach (a plan committed after it
//! is the review that has seen it). Does not own what a mode does with
//! a signal ([`super::mode`]).

use super::contract::GoalContract;
use super::document::Revised;
use super::plan::{CurrentPlan, PlanReview, PlanState, Trigger};
use super::registry::ApproachRegistry;
use crate::ledger::{BankStatus, IterationRecord, Ledger};
use jiff::Timestamp;
use serde::Serialize;

/// Iterations in a row that make a streak a trigger.
pub const STREAK: usize = 3;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signal {
    pub trigger: Trigger,
    pub detail: String,
}

/// What the signals are read from.
pub struct Inputs<'a> {
    pub now: Timestamp,
    pub ledger: &'a Ledger,
    pub contract: &'a Revised<GoalContract>,
    pub registry: &'a Revised<ApproachRegistry>,
    pub plan: Option<&'a CurrentPlan>,
}

/// Every trigger that fires, in the order of the list above.
pub fn signals(inputs: &Inputs<'_>) -> Vec<Signal> {
    let mut out = Vec::new();
    let mut fire = |trigger, detail: String| out.push(Signal { trigger, detail });
    let Some(plan) = inputs.plan else {
        fire(
            Trigger::MissingPlan,
            "no plan was ever committed: run `loopx goal-focus replan`".into(),
        );
        streaks(inputs.ledger.recent.iter(), &mut fire);
        dissent(inputs.ledger, 0, &mut fire);
        return out;
    };
    if plan.state != PlanState::Active {
        fire(
            Trigger::PlanNotActive,
            format!(
                "plan {} is {} (review: {})",
                plan.plan_revision, plan.state, plan.review
            ),
        );
    }
    for drift in plan.drift(inputs.contract, inputs.registry) {
        fire(
            Trigger::RevisionDrift,
            format!(
                "the plan is pinned to {} revision {} ({}), which is now revision {} ({})",
                drift.what,
                drift.pinned.revision,
                drift.pinned.fingerprint,
                drift.current.revision,
                drift.current.fingerprint
            ),
        );
    }
    if let Some(selection) = &plan.selection {
        for approach_id in &selection.approach_ids {
            let registry = &inputs.registry.document;
            let Some(candidate) = registry.approach(approach_id) else {
                fire(
                    Trigger::SelectionIneligible,
                    format!("selected approach {approach_id} is no longer in the registry"),
                );
                continue;
            };
            match candidate.approach.estimate.expires_at {
                Some(at) if at <= inputs.now => fire(
                    Trigger::EstimateExpired,
                    format!("the estimate of selected approach {approach_id} expired at {at}"),
                ),
                _ => {
                    if let Some(reason) = ApproachRegistry::ineligibility(&candidate, inputs.now) {
                        fire(
                            Trigger::SelectionIneligible,
                            format!("selected approach {approach_id} is {reason}"),
                        );
                    }
                }
            }
        }
        let banked = inputs.ledger.spent.iterations;
        if let Some(through) = plan.valid_through_iteration.filter(|t| banked >= *t) {
            fire(
                Trigger::PlanExpired,
                format!(
                    "the plan covered {} iterations, through iteration {through}, and {banked} are banked",
                    selection.horizon_iterations
                ),
            );
        }
    }
    let since_plan = inputs
        .ledger
        .recent
        .iter()
        .filter(|r| r.iteration > plan.committed_at_iteration);
    let without: Vec<&IterationRecord> = since_plan.collect();
    let selected = (plan.selection.iter())
        .flat_map(|s| &s.approach_ids)
        .filter_map(|id| inputs.registry.document.approach(id))
        .flat_map(|c| {
            let approach = c.approach;
            (approach.trip_wires.iter()).map(move |w| (Some(approach.approach_id.as_str()), w))
        });
    let wires = (inputs.contract.document.trip_wires.iter())
        .map(|w| (None, w))
        .chain(selected);
    for (approach, wire) in wires {
        if let Some(measure) = wire.when.tripped(&without) {
            let of = approach.map_or(String::new(), |a| format!(" of approach {a}"));
            fire(
                Trigger::TripWire,
                format!("trip wire {}{of} tripped: {measure}", wire.trip_wire_id),
            );
        }
    }
    if let Some(last) = (without.iter().rev()).find(|r| !r.direction.counterevidence.is_empty()) {
        fire(
            Trigger::UnreviewedCounterevidence,
            format!(
                "iteration {} reported evidence against {}, which no strategy review has seen",
                last.iteration,
                last.direction.counterevidence.join(", ")
            ),
        );
    }
    let run = (without.iter().rev())
        .take_while(|r| !super::banking::reduced(r))
        .count();
    if run >= STREAK {
        fire(
            Trigger::NoObligationReduction,
            format!("the last {run} iterations since the plan reduced no global obligation"),
        );
    }
    // Counted under this plan: a replan is the review of the streak.
    streaks(without.iter().copied(), &mut fire);
    dissent(inputs.ledger, plan.committed_at_iteration, &mut fire);
    if let Some(review) =
        (plan.strategy_review.as_ref()).filter(|_| plan.review == PlanReview::StrategyObjected)
    {
        fire(
            Trigger::ReviewerDissent,
            format!(
                "strategy reviewer {} ({}) objected to plan {}: {}",
                review.reviewer.provider,
                review.reviewer.family.name(),
                review.reviewed_plan_revision,
                review.reasons.join("; ")
            ),
        );
    }
    out
}

/// A result review rejected the latest iteration banked after iteration
/// `since`: the direction that produced it needs a replan.
fn dissent(ledger: &Ledger, since: u64, fire: &mut impl FnMut(Trigger, String)) {
    let Some(last) = ledger.recent.last().filter(|r| r.iteration > since) else {
        return;
    };
    if let Some(bank) = last
        .bank
        .as_ref()
        .filter(|b| b.status == BankStatus::Rejected)
    {
        fire(
            Trigger::ReviewerDissent,
            format!(
                "the result review rejected iteration {} (candidate {})",
                last.iteration, bank.candidate_fingerprint
            ),
        );
    }
}

/// The scope-only streak, which fires whether or not there is a plan
/// (with one, over the iterations banked under it).
fn streaks<'a>(
    recent: impl DoubleEndedIterator<Item = &'a IterationRecord>,
    fire: &mut impl FnMut(Trigger, String),
) {
    let run = recent
        .rev()
        .take_while(|r| r.direction.local_without_goal_delta)
        .count();
    if run >= STREAK {
        fire(
            Trigger::ScopeOnly,
            format!("the last {run} iterations were local work without goal delta"),
        );
    }
}
