//! `strategy_advice.v1`: a different-family reviewer's verdict on the
//! direction a replan proposed, and the rule that decides whether that
//! verdict commits a direction.
//!
//! Owns: the schema (unknown fields are refused, so a typo is never a
//! silent omission); the [`StrategyBrief`] a reviewer is shown (the
//! complete goal contract, approach registry and plan, and the exact
//! fingerprints to bind); who the executor is ([`executor`]); [`judge`]:
//! the reviewer's and the executor's families must both be known and
//! differ, the advice binds the exact revision and fingerprint of all three
//! documents (a same-revision rewrite of any voids it), the plan must be
//! awaiting a strategy review, and the direction it endorses or proposes
//! must be selectable under the direction rule
//! ([`super::direction::select`]); and [`settle`]: the plan an advice
//! commits (endorsed: active and `reviewed`; objected: `needs_replan`,
//! `strategy_objected`, which fires `reviewer_dissent`). Does not own
//! where a provider's family comes from (the provider table and the
//! environment, read by the application), running reviewers (the panel),
//! or the commit (plan and decision, paired by the application).

use super::contract::GoalContract;
use super::decisions::{DecisionOwnerOf, DecisionPath, DecisionRecorded, DirectionDecision};
use super::direction::{select, NotSelectable, Selection};
use super::document::Revised;
pub use super::plan::{AdviceVerdict, Party, StrategyReview};
use super::plan::{CurrentPlan, PlanReview, PlanState};
use super::registry::{ApproachRegistry, Excluded};
use super::replan::{PlanContext, PlanOwnerOf, PlanPath};
use super::review::Reviewer;
use super::{FocusError, Pin};
use crate::digest::Digest;
use crate::driver::provider::Family;
use crate::ledger::vocabulary::GoalFocusMode;
use crate::text::{self, limits, TextProblem};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "strategy_advice.v1";
pub const BRIEF_SCHEMA: &str = "strategy_brief.v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyAdvice {
    pub schema: String,
    pub reviewer: Reviewer,
    /// The exact versions the reviewer read: copied from the brief.
    pub reviewed: Reviewed,
    pub verdict: AdviceVerdict,
    /// With `propose`: the approaches to select instead (1 to 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Vec<String>>,
    /// With `object`: what is wrong with the proposed direction.
    #[serde(default)]
    pub reasons: Vec<String>,
    pub rationale: String,
}

/// The goal contract, approach registry and plan a review binds, each by
/// revision and canonical digest of the complete object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reviewed {
    pub goal_contract: Bound,
    pub approach_registry: Bound,
    pub current_plan: Bound,
}

/// [`Pin`] as a reviewer writes it back (strict: no other field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bound {
    pub revision: u64,
    pub fingerprint: Digest,
}

impl From<Pin> for Bound {
    fn from(pin: Pin) -> Self {
        Bound {
            revision: pin.revision,
            fingerprint: pin.fingerprint,
        }
    }
}

impl CurrentPlan {
    /// The pin of this complete plan object, as a strategy review binds it.
    pub fn pin(&self) -> Pin {
        Pin {
            revision: self.plan_revision,
            fingerprint: Digest::of_json(self),
        }
    }

    /// Whether the plan is waiting for a strategy review of its proposal.
    pub fn awaits_strategy_review(&self) -> bool {
        self.state == PlanState::NeedsReplan && self.review == PlanReview::StrategyReviewRequired
    }
}

/// Everything a strategy reviewer must see, serialisable as sent: the
/// three complete documents, the fingerprints to copy into the advice, the
/// executor whose family the reviewer must not share, and the approaches
/// that may be selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyBrief {
    pub schema: String,
    /// What the reviewer answers with.
    pub answer_schema: String,
    pub bind: Reviewed,
    pub executor: Party,
    pub goal_contract: Revised<GoalContract>,
    pub approach_registry: Revised<ApproachRegistry>,
    pub current_plan: CurrentPlan,
    /// The approaches selectable now (ids), and why each other one is not.
    pub eligible: Vec<String>,
    pub excluded: Vec<Excluded>,
}

/// Why an advice commits nothing. Nothing is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdviceProblem {
    #[error("the advice's schema is {got:?}, not {SCHEMA:?}")]
    Schema { got: String },
    #[error("strategy review is for enforce mode; this loop is in {mode} mode, where a replan commits its direction without one")]
    NotEnforced { mode: GoalFocusMode },
    #[error("there is no plan to review: run `loopx goal-focus replan` first")]
    NoPlan,
    #[error("plan {revision} is {state} ({review}), not awaiting a strategy review: only a plan a replan left `needs_replan` with `strategy_review_required` is reviewed; run `loopx goal-focus replan` for a new proposal")]
    NotAwaiting {
        revision: u64,
        state: PlanState,
        review: PlanReview,
    },
    #[error("the advice binds {what} revision {given_revision} ({given}), but it is revision {revision} ({actual}): a strategy review decides only the exact versions it read; fetch a new brief")]
    Stale {
        what: &'static str,
        given_revision: u64,
        given: Digest,
        revision: u64,
        actual: Digest,
    },
    #[error("the executor is unknown: no driver has named its provider for this loop; name it as the executor, a provider (enforce mode fails closed)")]
    ExecutorUnknown,
    #[error("executor {given:?} is not the driver's provider {driver:?}: the reviewer must be independent of the family that will run the turns")]
    ExecutorMismatch { given: String, driver: String },
    #[error("executor provider {provider:?} has no verified family (unknown to the provider table, or an endpoint override is set): enforce mode fails closed")]
    ExecutorUnverified { provider: String },
    #[error("reviewer provider {provider:?} has no verified family (unknown to the provider table, or an endpoint override is set): enforce mode fails closed")]
    ReviewerUnverified { provider: String },
    #[error("reviewer {provider:?} is of the {family} family, the executor's own: a strategy review must come from a different family")]
    SameFamily {
        provider: String,
        family: &'static str,
    },
    #[error("the advice endorses plan {revision}, which proposes no direction (no approach is eligible): object, or propose a selection")]
    NothingToEndorse { revision: u64 },
    #[error("the proposed direction cannot be selected: {0}")]
    NotSelectable(#[from] NotSelectable),
    #[error("a {verdict} verdict {problem}")]
    Shape {
        verdict: AdviceVerdict,
        problem: &'static str,
    },
    #[error("{0}")]
    Text(#[from] TextProblem),
}

/// The executor's provider: the driver's (the provider its turns run
/// with), else the one named explicitly. Both given and different is
/// refused; neither is refused (fail closed).
pub fn executor(driver: Option<&str>, explicit: Option<&str>) -> Result<String, AdviceProblem> {
    fn clean(p: Option<&str>) -> Option<&str> {
        p.map(str::trim).filter(|p| !p.is_empty())
    }
    match (clean(driver), clean(explicit)) {
        (Some(driver), Some(given)) if driver != given => Err(AdviceProblem::ExecutorMismatch {
            given: given.to_owned(),
            driver: driver.to_owned(),
        }),
        (Some(provider), _) | (None, Some(provider)) => Ok(provider.to_owned()),
        (None, None) => Err(AdviceProblem::ExecutorUnknown),
    }
}

/// The plan awaiting review, or why there is none.
fn awaiting(plan: Option<&CurrentPlan>) -> Result<&CurrentPlan, AdviceProblem> {
    let plan = plan.ok_or(AdviceProblem::NoPlan)?;
    if !plan.awaits_strategy_review() {
        return Err(AdviceProblem::NotAwaiting {
            revision: plan.plan_revision,
            state: plan.state,
            review: plan.review,
        });
    }
    Ok(plan)
}

/// The brief a reviewer of `plan` is sent, or why nothing awaits review.
pub fn brief(
    context: &PlanContext<'_>,
    plan: Option<&CurrentPlan>,
    executor: Party,
) -> Result<StrategyBrief, AdviceProblem> {
    if context.mode != GoalFocusMode::Enforce {
        return Err(AdviceProblem::NotEnforced { mode: context.mode });
    }
    let plan = awaiting(plan)?;
    let (eligible, excluded) = context.registry.document.eligible(context.now);
    Ok(StrategyBrief {
        schema: BRIEF_SCHEMA.into(),
        answer_schema: SCHEMA.into(),
        bind: Reviewed {
            goal_contract: context.contract.pin().into(),
            approach_registry: context.registry.pin().into(),
            current_plan: plan.pin().into(),
        },
        executor,
        goal_contract: context.contract.clone(),
        approach_registry: context.registry.clone(),
        current_plan: plan.clone(),
        eligible: eligible
            .iter()
            .map(|c| c.approach.approach_id.clone())
            .collect(),
        excluded,
    })
}

/// What an advice that passes [`judge`] decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Ruling {
    /// Select this direction: the plan becomes active.
    Select(Selection),
    /// The plan stays without a direction; reviewer dissent fires.
    Object,
}

/// Who wrote the advice and who executes: the application looks both
/// families up.
#[derive(Debug, Clone, PartialEq)]
pub struct Parties {
    pub executor: Party,
    pub reviewer_family: Family,
}

/// Whether `advice` decides the plan awaiting review in `context`.
pub fn judge(
    advice: &StrategyAdvice,
    context: &PlanContext<'_>,
    plan: Option<&CurrentPlan>,
    parties: &Parties,
) -> Result<Ruling, AdviceProblem> {
    if advice.schema != SCHEMA {
        return Err(AdviceProblem::Schema {
            got: advice.schema.clone(),
        });
    }
    if context.mode != GoalFocusMode::Enforce {
        return Err(AdviceProblem::NotEnforced { mode: context.mode });
    }
    let plan = awaiting(plan)?;
    let current = [
        (
            "goal contract",
            &advice.reviewed.goal_contract,
            context.contract.pin(),
        ),
        (
            "approach registry",
            &advice.reviewed.approach_registry,
            context.registry.pin(),
        ),
        ("current plan", &advice.reviewed.current_plan, plan.pin()),
    ];
    for (what, given, actual) in current {
        if given != &Bound::from(actual.clone()) {
            return Err(AdviceProblem::Stale {
                what,
                given_revision: given.revision,
                given: given.fingerprint.clone(),
                revision: actual.revision,
                actual: actual.fingerprint,
            });
        }
    }
    let executor = &parties.executor;
    if executor.family == Family::Unverified {
        return Err(AdviceProblem::ExecutorUnverified {
            provider: executor.provider.clone(),
        });
    }
    let provider = advice.reviewer.provider.trim().to_owned();
    if parties.reviewer_family == Family::Unverified {
        return Err(AdviceProblem::ReviewerUnverified { provider });
    }
    if parties.reviewer_family == executor.family {
        return Err(AdviceProblem::SameFamily {
            provider,
            family: executor.family.name(),
        });
    }
    text::check("rationale", &advice.rationale, limits::NOTE)?;
    text::check_all("reasons", &advice.reasons, limits::LINE)?;
    let shape = |problem| AdviceProblem::Shape {
        verdict: advice.verdict,
        problem,
    };
    if advice.rationale.trim().is_empty() {
        return Err(shape("needs a rationale"));
    }
    let registry = &context.registry.document;
    match (advice.verdict, &advice.selection) {
        (AdviceVerdict::Object, None) if advice.reasons.iter().any(|r| !r.trim().is_empty()) => {
            Ok(Ruling::Object)
        }
        (AdviceVerdict::Object, None) => Err(shape("needs at least one reason")),
        (AdviceVerdict::Endorse, None) => {
            let proposed =
                (plan.proposal.selection.as_ref()).ok_or(AdviceProblem::NothingToEndorse {
                    revision: plan.plan_revision,
                })?;
            // Still selectable now (an estimate may have expired since).
            select(
                registry,
                &proposed.approach_ids,
                context.now,
                proposed.rationale.clone(),
            )?;
            Ok(Ruling::Select(proposed.clone()))
        }
        (AdviceVerdict::Propose, Some(ids)) => Ok(Ruling::Select(select(
            registry,
            ids,
            context.now,
            format!(
                "proposed by strategy reviewer {provider}: {}",
                advice.rationale.trim()
            ),
        )?)),
        (AdviceVerdict::Propose, None) => Err(shape("needs a selection of 1 to 3 approach ids")),
        (_, Some(_)) => Err(shape("takes no selection (only propose does)")),
    }
}

/// What the operator asked: apply this advice, with this executor named
/// explicitly (or `None`: the driver's). Only their words, so repeating
/// the command under the same operation id is an exact replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyAdvice {
    pub advice: StrategyAdvice,
    pub executor: Option<String>,
}

/// What the adapter gathered besides the plan context.
pub struct AdviceContext<'a> {
    pub plan: &'a PlanContext<'a>,
    pub parties: &'a Parties,
}

/// The plan `request` commits over `state`, or why it commits nothing:
/// the next plan revision, pinned to the same contract and registry the
/// reviewer read; active with the selection when the advice selects,
/// `needs_replan` (`strategy_objected`) when it objects.
pub fn settle(
    state: Option<&CurrentPlan>,
    request: &ApplyAdvice,
    context: &AdviceContext<'_>,
) -> Result<CurrentPlan, FocusError> {
    let plan_context = context.plan;
    let current = state.map_or(0, |p| p.plan_revision);
    if current != plan_context.read_plan_revision {
        return Err(FocusError::PlanMoved {
            read: plan_context.read_plan_revision,
            now: current,
        });
    }
    let advice = &request.advice;
    let ruling = judge(advice, plan_context, state, context.parties)?;
    let reviewed = state.expect("judge found the plan awaiting review");
    let record = StrategyReview {
        reviewer: Party {
            provider: advice.reviewer.provider.trim().to_owned(),
            family: context.parties.reviewer_family,
        },
        executor: context.parties.executor.clone(),
        verdict: advice.verdict,
        reviewed_plan_revision: reviewed.plan_revision,
        advice_fingerprint: Digest::of_json(advice),
        rationale: crate::redact::redact_owned(advice.rationale.trim()),
        reasons: (advice.reasons.iter())
            .map(|r| crate::redact::redact_owned(r.trim()))
            .filter(|r| !r.is_empty())
            .collect(),
    };
    let committed_at_iteration = plan_context.ledger.spent.iterations;
    let (state_now, selection, review) = match ruling {
        Ruling::Select(selection) => (PlanState::Active, Some(selection), PlanReview::Reviewed),
        Ruling::Object => (PlanState::NeedsReplan, None, PlanReview::StrategyObjected),
    };
    Ok(CurrentPlan {
        plan_revision: current + 1,
        state: state_now,
        valid_through_iteration: (selection.as_ref())
            .map(|s| committed_at_iteration + s.horizon_iterations),
        selection,
        review,
        trigger: reviewed.trigger,
        goal_pin: plan_context.contract.pin(),
        registry_pin: plan_context.registry.pin(),
        committed_at: plan_context.now,
        committed_at_iteration,
        proposal: reviewed.proposal.clone(),
        strategy_review: Some(record),
    })
}

/// `goal-focus strategy-review`: the plan an advice settles ([`settle`]).
pub struct ByStrategyReview;

impl PlanPath for ByStrategyReview {
    type Request = ApplyAdvice;
    type Context<'a> = AdviceContext<'a>;

    fn draft(
        state: Option<&CurrentPlan>,
        request: &ApplyAdvice,
        context: &AdviceContext<'_>,
    ) -> Result<CurrentPlan, FocusError> {
        settle(state, request, context)
    }
}

/// The owner of the plan stream for `goal-focus strategy-review`.
pub type ReviewedPlanOwner = PlanOwnerOf<ByStrategyReview>;

/// What the paired decision records from: the advice's context and the
/// plan it replaces (the one the plan half decides over).
pub struct AdviceDecisionContext<'a> {
    pub advice: &'a AdviceContext<'a>,
    pub replaced: Option<&'a CurrentPlan>,
}

/// The decision half's request: the operation id and the operator's words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordAdvice {
    pub decision_id: String,
    pub apply: ApplyAdvice,
}

impl DecisionPath for ByStrategyReview {
    type Request = RecordAdvice;
    type Context<'a> = AdviceDecisionContext<'a>;

    fn record(
        request: &RecordAdvice,
        context: &AdviceDecisionContext<'_>,
    ) -> Result<DecisionRecorded, FocusError> {
        let plan = settle(context.replaced, &request.apply, context.advice)?;
        let plan_context = context.advice.plan;
        Ok(DecisionRecorded {
            at: plan_context.now,
            decision: DirectionDecision::of_plan(&request.decision_id, plan_context.mode, &plan),
        })
    }
}

/// The owner of the decision stream for `goal-focus strategy-review`:
/// records the plan [`settle`] yields, under the operation id.
pub type ReviewedDecisionOwner = DecisionOwnerOf<ByStrategyReview>;
