//! Direction decisions: the append-only provenance of every plan the loop
//! committed, why, and against which contract and registry versions.
//!
//! Owns: what one decision records. The stream's journal is the log (one
//! entry per decision, never rewritten); the snapshot keeps only the count
//! and the latest, so reading it costs the same after ten decisions as
//! after ten thousand. A decision is idempotent through its operation id,
//! which is also its `decision_id`. Does not own the plan it records: the
//! plan owner commits it in the same transaction.

use super::direction::Proposal;
use super::plan::{CurrentPlan, PlanReview, PlanState, Trigger};
use super::replan::{draft, ByImport, ByReplan, PlanContext, Replan};
use super::{FocusError, Pin};
use crate::ledger::vocabulary::GoalFocusMode;
use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionOutcome {
    /// A direction was selected and the plan is active.
    Selected,
    /// The rule found no eligible approach; the plan needs a replan.
    NoEligibleApproach,
    /// Enforce mode: the direction waits for a different-family review.
    StrategyReviewRequired,
    /// `loopx import`: the imported loop's direction signals named no
    /// single direction, and none was chosen for it.
    ImportedWithoutSelection,
    /// Enforce mode: the strategy reviewer objected to the proposal; no
    /// direction is selected and reviewer dissent fires.
    StrategyObjected,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionDecision {
    pub decision_id: String,
    pub trigger: Trigger,
    pub enforcement_mode: GoalFocusMode,
    pub outcome: DecisionOutcome,
    pub plan_revision: u64,
    pub goal_pin: Pin,
    pub registry_pin: Pin,
    pub proposal: Proposal,
    /// The strategy review that decided this plan, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_review: Option<super::plan::StrategyReview>,
}

impl DirectionDecision {
    /// The decision that records committing `plan` under `decision_id`.
    pub fn of_plan(decision_id: &str, mode: GoalFocusMode, plan: &CurrentPlan) -> Self {
        let outcome = match (plan.state, plan.review) {
            (PlanState::Active, _) => DecisionOutcome::Selected,
            (PlanState::NeedsReplan, PlanReview::StrategyReviewRequired) => {
                DecisionOutcome::StrategyReviewRequired
            }
            (PlanState::NeedsReplan, PlanReview::StrategyObjected) => {
                DecisionOutcome::StrategyObjected
            }
            // A reviewed plan is active; `needs_replan` without a review
            // pending is the rule finding nothing eligible.
            (PlanState::NeedsReplan, PlanReview::Unreviewed | PlanReview::Reviewed) => {
                DecisionOutcome::NoEligibleApproach
            }
        };
        DirectionDecision {
            decision_id: decision_id.to_owned(),
            trigger: plan.trigger,
            enforcement_mode: mode,
            outcome,
            plan_revision: plan.plan_revision,
            goal_pin: plan.goal_pin.clone(),
            registry_pin: plan.registry_pin.clone(),
            proposal: plan.proposal.clone(),
            strategy_review: plan.strategy_review.clone(),
        }
    }
}

/// One decision as the journal holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecorded {
    pub at: Timestamp,
    pub decision: DirectionDecision,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DecisionLog {
    pub decisions: u64,
    pub last: Option<DecisionRecorded>,
}

/// Record the decision behind the plan a replan commits in the same
/// transaction. Only the operator's words, as [`super::replan::Replan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub decision_id: String,
    pub trigger: Option<Trigger>,
}

/// What the paired replan decides on, and the plan it replaces: the
/// decision recorded is the plan [`draft`] yields from them, which is
/// exactly what the plan owner commits (it refuses a reading another plan
/// has overtaken).
pub struct DecisionContext<'a> {
    pub plan: &'a PlanContext<'a>,
    pub replaced: Option<&'a CurrentPlan>,
}

/// One way a plan is made, on the decision stream: the decision it
/// records beside its plan ([`super::replan::PlanPath`]), drafted from the
/// same request and reading so the two agree.
pub trait DecisionPath {
    type Request: Serialize;
    type Context<'a>;

    fn record(
        request: &Self::Request,
        context: &Self::Context<'_>,
    ) -> Result<DecisionRecorded, FocusError>;
}

/// The owner of the decision stream, for the way `P` makes a plan.
pub struct DecisionOwnerOf<P>(std::marker::PhantomData<P>);

impl<P: DecisionPath> Owner for DecisionOwnerOf<P> {
    type State = DecisionLog;
    type Request = P::Request;
    type Event = DecisionRecorded;
    type Receipt = DecisionRecorded;
    type Error = FocusError;
    type Context<'a> = P::Context<'a>;

    fn decide(
        _state: Option<&DecisionLog>,
        request: &P::Request,
        context: &P::Context<'_>,
    ) -> Result<Decided<DecisionRecorded, DecisionRecorded>, FocusError> {
        let recorded = P::record(request, context)?;
        Ok(Decided::write(recorded.clone(), recorded))
    }

    fn evolve(state: Option<DecisionLog>, event: &DecisionRecorded) -> DecisionLog {
        DecisionLog {
            decisions: state.map_or(0, |s| s.decisions) + 1,
            last: Some(event.clone()),
        }
    }

    fn event_kind(_event: &DecisionRecorded) -> &'static str {
        "focus.direction_decided"
    }
}

impl DecisionPath for ByReplan {
    type Request = Record;
    type Context<'a> = DecisionContext<'a>;

    fn record(
        request: &Record,
        context: &DecisionContext<'_>,
    ) -> Result<DecisionRecorded, FocusError> {
        let replan = Replan {
            trigger: request.trigger,
        };
        let plan = draft(context.replaced, &replan, context.plan)?;
        Ok(DecisionRecorded {
            at: context.plan.now,
            decision: DirectionDecision::of_plan(&request.decision_id, context.plan.mode, &plan),
        })
    }
}

/// The owner of the decision stream: every decision folds through it.
pub type DecisionOwner = DecisionOwnerOf<ByReplan>;

/// Record the decision behind an imported plan ([`super::replan::draft_import`]),
/// committed with it. `decision_id` is the import's operation id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordImport {
    pub decision_id: String,
    pub plan: super::replan::ImportPlan,
}

impl DecisionPath for ByImport {
    type Request = RecordImport;
    type Context<'a> = DecisionContext<'a>;

    fn record(
        request: &RecordImport,
        context: &DecisionContext<'_>,
    ) -> Result<DecisionRecorded, FocusError> {
        let plan = super::replan::draft_import(context.replaced, &request.plan, context.plan)?;
        let mut decision =
            DirectionDecision::of_plan(&request.decision_id, context.plan.mode, &plan);
        if request.plan.selection.is_none() {
            decision.outcome = DecisionOutcome::ImportedWithoutSelection;
        }
        Ok(DecisionRecorded {
            at: context.plan.now,
            decision,
        })
    }
}

/// The owner of the decision stream for `loopx import`: records the plan
/// [`super::replan::draft_import`] yields as the same event a replan records.
pub type ImportedDecisionOwner = DecisionOwnerOf<ByImport>;
