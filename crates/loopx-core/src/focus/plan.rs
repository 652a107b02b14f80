//! The current plan: the one bounded direction the loop is following, and
//! the exact contract and registry versions it was chosen from.
//!
//! Owns: what a plan is (its state, its review, the trigger that made it,
//! the pins to the documents it was chosen from, and the strategy review it
//! was committed on) and the one event of the plan stream. How a plan is
//! made is [`super::replan`]'s; the triggers are [`super::signals`]'s,
//! which read plans; the decision log is [`super::decisions`]'s.

use super::contract::GoalContract;
use super::direction::{Proposal, Selection};
use super::document::Revised;
use super::registry::ApproachRegistry;
use super::Pin;
use crate::digest::Digest;
use crate::driver::provider::Family;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

crate::ledger::vocabulary::vocabulary! {
    /// Why a plan is (re)made: the replan triggers of the spec, detected
    /// ([`super::signals`]) or stated by the operator (`--trigger`).
    Trigger {
        MissingPlan => "missing_plan",
        PlanNotActive => "plan_not_active",
        SelectionIneligible => "selection_ineligible",
        RevisionDrift => "revision_drift",
        PlanExpired => "plan_expired",
        EstimateExpired => "estimate_expired",
        NoObligationReduction => "no_obligation_reduction",
        ScopeOnly => "scope_only",
        TripWire => "trip_wire",
        ReviewerDissent => "reviewer_dissent",
        UnreviewedCounterevidence => "unreviewed_counterevidence",
        Plateau => "plateau",
        /// The driver failed over to a provider of another family than the
        /// one the direction was reviewed for.
        ProviderFailover => "provider_failover",
        Manual => "manual",
    }
}

crate::ledger::vocabulary::vocabulary! {
    /// Whether the plan has a direction to follow. `needs_replan`: no
    /// direction is selected; a replan (and in enforce mode a strategy
    /// review) has to happen first.
    PlanState {
        Active => "active",
        NeedsReplan => "needs_replan",
    }
}

crate::ledger::vocabulary::vocabulary! {
    /// Whether anyone other than the host looked at the direction:
    /// `unreviewed` in monitor mode (reported only), or waiting for a
    /// different-family strategy review in enforce mode, then `reviewed`
    /// (endorsed or another selection proposed) or `strategy_objected`
    /// (the reviewer objected: no direction, reviewer dissent fires).
    PlanReview {
        Unreviewed => "unreviewed",
        StrategyReviewRequired => "strategy_review_required",
        Reviewed => "reviewed",
        StrategyObjected => "strategy_objected",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrentPlan {
    pub plan_revision: u64,
    pub state: PlanState,
    pub selection: Option<Selection>,
    pub review: PlanReview,
    pub trigger: Trigger,
    /// The contract and registry versions this plan was chosen from.
    pub goal_pin: Pin,
    pub registry_pin: Pin,
    pub committed_at: Timestamp,
    /// Banked iterations when the plan was committed: its horizon counts from here.
    pub committed_at_iteration: u64,
    /// The last iteration the plan covers (`None` without a selection):
    /// once this many are banked, the plan has expired.
    pub valid_through_iteration: Option<u64>,
    /// What the direction rule said, including what it left out and why.
    pub proposal: Proposal,
    /// The strategy review this plan was committed on (enforce mode).
    /// Absent from plans no reviewer decided, so their fingerprints are
    /// what they always were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_review: Option<StrategyReview>,
}

/// A document a plan is pinned to that has moved since the plan was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift<'a> {
    pub what: &'static str,
    pub pinned: &'a Pin,
    pub current: Pin,
}

impl CurrentPlan {
    /// The pinned documents that are no longer the versions pinned: a
    /// revision or, at the same revision, a different fingerprint.
    pub fn drift(
        &self,
        contract: &Revised<GoalContract>,
        registry: &Revised<ApproachRegistry>,
    ) -> Vec<Drift<'_>> {
        [
            ("goal contract", &self.goal_pin, contract.pin()),
            ("approach registry", &self.registry_pin, registry.pin()),
        ]
        .into_iter()
        .filter(|(_, pinned, current)| *pinned != current)
        .map(|(what, pinned, current)| Drift {
            what,
            pinned,
            current,
        })
        .collect()
    }
}

/// The one event of this stream: a plan committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanCommitted {
    pub plan: CurrentPlan,
}

crate::ledger::vocabulary::vocabulary! {
    /// Endorse the proposed selection, object to it, or propose another
    /// one among the eligible approaches.
    AdviceVerdict {
        Endorse => "endorse",
        Object => "object",
        Propose => "propose",
    }
}

/// A provider and the family it was found to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Party {
    pub provider: String,
    pub family: Family,
}

/// What a strategy review recorded on the plan and its decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyReview {
    pub reviewer: Party,
    pub executor: Party,
    pub verdict: AdviceVerdict,
    /// The plan revision the reviewer read.
    pub reviewed_plan_revision: u64,
    /// The canonical digest of the advice as given.
    pub advice_fingerprint: Digest,
    pub rationale: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}
