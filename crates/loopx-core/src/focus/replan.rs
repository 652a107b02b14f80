//! How a plan is made: a replan (the direction rule's proposal, settled as
//! the mode allows: monitor commits it unreviewed, since monitor is never
//! an acceptance guarantee; enforce records `needs_replan` with the
//! strategy review it waits for), an import (another runtime's selection,
//! carried over), and the owner of the plan stream for each way.
//!
//! Does not own what a plan is ([`super::plan`]), the mode (the ledger's),
//! the triggers ([`super::signals`]) or the decision log
//! ([`super::decisions`]).

use super::contract::GoalContract;
use super::direction::{propose, Proposal, Selection};
use super::document::Revised;
use super::plan::{CurrentPlan, PlanCommitted, PlanReview, PlanState, Trigger};
use super::registry::ApproachRegistry;
use super::signals::{signals, Inputs};
use super::FocusError;
use crate::ledger::vocabulary::GoalFocusMode;
use crate::ledger::Ledger;
use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// `goal-focus replan`, as the operator asked for it: the trigger they
/// named, or `None` to replan on the first trigger that fires. Only the
/// operator's words, so repeating the command under the same operation id
/// is an exact replay whatever was committed since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replan {
    pub trigger: Option<Trigger>,
}

/// What the adapter gathered: the clock, the loop's mode and ledger, the
/// contract and registry as they are now, and the plan revision it read
/// them together with.
pub struct PlanContext<'a> {
    pub now: Timestamp,
    pub mode: GoalFocusMode,
    pub ledger: &'a Ledger,
    pub contract: &'a Revised<GoalContract>,
    pub registry: &'a Revised<ApproachRegistry>,
    /// The plan revision read with the rest (0: no plan). A plan committed
    /// meanwhile voids the reading: the decision log must record exactly
    /// the plan this replan commits.
    pub read_plan_revision: u64,
}

/// The plan a replan would commit, or why it may not. [`PlanOwner`]
/// commits exactly this; the decision log records it.
pub fn draft(
    state: Option<&CurrentPlan>,
    request: &Replan,
    context: &PlanContext<'_>,
) -> Result<CurrentPlan, FocusError> {
    if context.mode == GoalFocusMode::Off {
        return Err(FocusError::Off);
    }
    let current = state.map_or(0, |p| p.plan_revision);
    if current != context.read_plan_revision {
        return Err(FocusError::PlanMoved {
            read: context.read_plan_revision,
            now: current,
        });
    }
    let trigger = match request.trigger {
        Some(trigger) => trigger,
        None => {
            let fired = signals(&Inputs {
                now: context.now,
                ledger: context.ledger,
                contract: context.contract,
                registry: context.registry,
                plan: state,
            });
            fired
                .first()
                .map(|s| s.trigger)
                .ok_or(FocusError::NothingToReplan)?
        }
    };
    let proposal = propose(&context.registry.document, context.now);
    Ok(settle(context, current + 1, trigger, proposal, None))
}

/// The plan that commits `proposal` as the mode allows: monitor selects
/// it unreviewed, enforce waits in `needs_replan` for the strategy review
/// it needs, and no selection is `needs_replan` in either. The one rule
/// for a replan and an import alike. `valid_through` overrides the end of
/// the selection's horizon (an imported plan keeps its own).
fn settle(
    context: &PlanContext<'_>,
    plan_revision: u64,
    trigger: Trigger,
    proposal: Proposal,
    valid_through: Option<u64>,
) -> CurrentPlan {
    let (state_now, selection, review) = match (context.mode, &proposal.selection) {
        (GoalFocusMode::Enforce, _) => (
            PlanState::NeedsReplan,
            None,
            PlanReview::StrategyReviewRequired,
        ),
        (_, None) => (PlanState::NeedsReplan, None, PlanReview::Unreviewed),
        (_, Some(selection)) => (
            PlanState::Active,
            Some(selection.clone()),
            PlanReview::Unreviewed,
        ),
    };
    let committed_at_iteration = context.ledger.spent.iterations;
    let valid_through_iteration = (selection.as_ref())
        .map(|s| valid_through.unwrap_or(committed_at_iteration + s.horizon_iterations));
    CurrentPlan {
        plan_revision,
        state: state_now,
        selection,
        review,
        trigger,
        goal_pin: context.contract.pin(),
        registry_pin: context.registry.pin(),
        committed_at: context.now,
        committed_at_iteration,
        valid_through_iteration,
        proposal,
        strategy_review: None,
    }
}

/// One way a plan is made (a replan, an import, a strategy review): what
/// it asks and what it reads, and the next plan it drafts from them. Every
/// way commits the same [`PlanCommitted`] event through [`PlanOwnerOf`],
/// and records its decision through
/// [`super::decisions::DecisionOwnerOf`], so the plan stream folds and
/// audits alike whichever way made it.
pub trait PlanPath {
    type Request: Serialize;
    type Context<'a>;

    fn draft(
        state: Option<&CurrentPlan>,
        request: &Self::Request,
        context: &Self::Context<'_>,
    ) -> Result<CurrentPlan, FocusError>;
}

/// The owner of the plan stream, for the way `P` makes a plan.
pub struct PlanOwnerOf<P>(std::marker::PhantomData<P>);

impl<P: PlanPath> Owner for PlanOwnerOf<P> {
    type State = CurrentPlan;
    type Request = P::Request;
    type Event = PlanCommitted;
    type Receipt = CurrentPlan;
    type Error = FocusError;
    type Context<'a> = P::Context<'a>;

    fn decide(
        state: Option<&CurrentPlan>,
        request: &P::Request,
        context: &P::Context<'_>,
    ) -> Result<Decided<PlanCommitted, CurrentPlan>, FocusError> {
        let plan = P::draft(state, request, context)?;
        Ok(Decided::write(PlanCommitted { plan: plan.clone() }, plan))
    }

    fn evolve(_state: Option<CurrentPlan>, event: &PlanCommitted) -> CurrentPlan {
        event.plan.clone()
    }

    fn event_kind(_event: &PlanCommitted) -> &'static str {
        "focus.plan_committed"
    }
}

/// `goal-focus replan`: the direction rule's plan ([`draft`]).
pub struct ByReplan;

impl PlanPath for ByReplan {
    type Request = Replan;
    type Context<'a> = PlanContext<'a>;

    fn draft(
        state: Option<&CurrentPlan>,
        request: &Replan,
        context: &PlanContext<'_>,
    ) -> Result<CurrentPlan, FocusError> {
        draft(state, request, context)
    }
}

/// The owner of the plan stream: every plan folds through it.
pub type PlanOwner = PlanOwnerOf<ByReplan>;

/// `loopx import`: the direction another runtime's plan had selected,
/// carried over instead of chosen here by [`propose`]. `None`: the source
/// named no single direction unambiguously, and the plan is kept
/// `needs_replan` with no selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportPlan {
    pub selection: Option<Selection>,
    /// The last iteration the source's plan covered, if it said.
    pub valid_through_iteration: Option<u64>,
}

/// The plan an import commits: the loop's first, triggered by its having
/// none (`missing_plan`). A carried-over selection must name approaches
/// the registry defines and holds eligible now; in enforce mode it is
/// not selected (no different-family review of it exists here) but kept
/// as the proposal, and the plan waits in `needs_replan` for that review.
pub fn draft_import(
    state: Option<&CurrentPlan>,
    request: &ImportPlan,
    context: &PlanContext<'_>,
) -> Result<CurrentPlan, FocusError> {
    if context.mode == GoalFocusMode::Off {
        return Err(FocusError::Off);
    }
    if let Some(plan) = state {
        return Err(FocusError::PlanMoved {
            read: 0,
            now: plan.plan_revision,
        });
    }
    let registry = &context.registry.document;
    for approach_id in request.selection.iter().flat_map(|s| &s.approach_ids) {
        let reason = match registry.approach(approach_id) {
            None => Some("the approach registry does not define it".to_owned()),
            Some(candidate) => ApproachRegistry::ineligibility(&candidate, context.now),
        };
        if let Some(reason) = reason {
            return Err(FocusError::ImportedSelection {
                approach: approach_id.clone(),
                reason,
            });
        }
    }
    let (_, excluded) = registry.eligible(context.now);
    let proposal = Proposal {
        selection: request.selection.clone(),
        excluded,
    };
    Ok(settle(
        context,
        1,
        Trigger::MissingPlan,
        proposal,
        request.valid_through_iteration,
    ))
}

/// `loopx import`: the plan another runtime selected ([`draft_import`]).
pub struct ByImport;

impl PlanPath for ByImport {
    type Request = ImportPlan;
    type Context<'a> = PlanContext<'a>;

    fn draft(
        state: Option<&CurrentPlan>,
        request: &ImportPlan,
        context: &PlanContext<'_>,
    ) -> Result<CurrentPlan, FocusError> {
        draft_import(state, request, context)
    }
}

/// The owner of the plan stream for `loopx import`.
pub type ImportedPlanOwner = PlanOwnerOf<ByImport>;
