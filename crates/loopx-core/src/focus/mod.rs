//! Goal Focus v2: the authority over a loop's direction, as pure owners.
//!
//! Four streams, each with its owner:
//!
//! | stream | owner | holds |
//! | --- | --- | --- |
//! | [`CONTRACT_STREAM`] | [`ContractOwner`] | the goal contract: goal, criteria, scope, obligation DAG |
//! | [`REGISTRY_STREAM`] | [`RegistryOwner`] | campaigns and approaches with interval estimates, eligibility, reopen conditions |
//! | [`PLAN_STREAM`] | [`replan::PlanOwner`] | one selected bounded direction, pinned to the contract and registry it was chosen from |
//! | [`DECISIONS_STREAM`] | [`decisions::DecisionOwner`] | append-only direction decisions (the journal is the log) |
//!
//! The rules live beside them: [`direction`] chooses a direction from the
//! registry, [`signals`] says which replan triggers fire, [`mode`] says
//! which enforcement mode is in force and what it does with those signals.
//!
//! Staging and result review: [`candidate`] owns the candidate stream
//! ([`candidate::CANDIDATE_STREAM`]: one pending candidate, its
//! quarantine), [`review`] what a `result_review.v1` must say to bank it.
//!
//! Direction review: in enforce mode a replan only proposes (the plan
//! waits `needs_replan`, `strategy_review_required`); [`strategy`] owns
//! the `strategy_advice.v1` a different-family reviewer answers with and
//! the plan an endorsement, a counter-proposal or an objection commits.
//!
//! The turn prompt's Goal Focus section is [`prompt`]'s.
//!
//! Not here: the enforcement mode itself (the ledger's `goal_focus_mode`,
//! set once at `init`) and the review panel that runs reviewers.

pub mod banking;
pub mod candidate;
pub mod compute;
pub mod contract;
pub mod decisions;
pub mod direction;
mod document;
pub mod mode;
pub mod plan;
pub mod prompt;
pub mod registry;
pub mod replan;
pub mod review;
pub mod signals;
pub mod strategy;
#[cfg(test)]
pub(crate) mod tests;

pub use contract::GoalContract;
pub use document::{Document, DocumentOwner, Revise, Revised, RevisedReceipt, Revision};
pub use registry::ApproachRegistry;

use crate::digest::Digest;
use crate::ident::IdentProblem;
use crate::text::TextProblem;
use serde::{Deserialize, Serialize};

pub const CONTRACT_STREAM: &str = "focus:goal_contract";
pub const REGISTRY_STREAM: &str = "focus:approach_registry";
pub const PLAN_STREAM: &str = "focus:current_plan";
pub const DECISIONS_STREAM: &str = "focus:direction_decisions";
/// The host's compute pin for the whole loop ([`compute::ComputePin`]).
pub const COMPUTE_PIN_STREAM: &str = "focus:compute_pin";

/// Every Goal Focus stream, in the order status and validate show them.
pub const STREAMS: [&str; 5] = [
    CONTRACT_STREAM,
    REGISTRY_STREAM,
    PLAN_STREAM,
    DECISIONS_STREAM,
    candidate::CANDIDATE_STREAM,
];

/// The owner of the goal contract stream.
pub type ContractOwner = DocumentOwner<GoalContract>;
/// The owner of the approach registry stream.
pub type RegistryOwner = DocumentOwner<ApproachRegistry>;
/// The owner of the host's compute pin.
pub type ComputePinOwner = DocumentOwner<compute::ComputePin>;

/// Exactly which version of a document something was decided against:
/// its revision and the digest of the complete revised object. A plan or a
/// decision carrying a pin is void once either part differs, so a
/// same-revision rewrite cannot pass for the version that was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub revision: u64,
    pub fingerprint: Digest,
}

/// Why a Goal Focus request was refused. Nothing is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FocusError {
    #[error("{0}")]
    Id(#[from] IdentProblem),
    #[error("{0}")]
    Text(#[from] TextProblem),
    #[error("{what} lists {kind} {id:?} twice: ids must be unique")]
    DuplicateId {
        what: &'static str,
        kind: &'static str,
        id: String,
    },
    #[error("obligation {obligation:?} depends on {missing:?}, which the contract does not define: add it or remove the dependency")]
    UnknownDependency { obligation: String, missing: String },
    #[error("the obligations depend on each other in a cycle ({}): an obligation DAG may not loop; remove one of these dependencies", cycle.join(" -> "))]
    DependencyCycle { cycle: Vec<String> },
    #[error("approach {approach:?} has estimate [{low}, {high}]: an interval estimate needs 0 <= low <= high <= 1")]
    BadEstimate {
        approach: String,
        low: f64,
        high: f64,
    },
    #[error(
        "approach {approach:?} is {status} but gives no reason: say why in eligibility.reason"
    )]
    IneligibleWithoutReason { approach: String, status: String },
    #[error("trip wire {id:?} can never stay unset: its at_least must be a positive count, or a positive finite USD amount")]
    TripWireNeverSet { id: String },
    #[error("the goal contract needs a non-empty goal")]
    EmptyGoal,
    #[error("Goal Focus is off for this loop: there is no direction to plan; create a loop in goal_focus_mode monitor or enforce to use it")]
    Off,
    #[error("the current plan moved from revision {read} to {now} while this replan was prepared: run it again to decide against the new plan")]
    PlanMoved { read: u64, now: u64 },
    #[error("nothing calls for a replan: no replan trigger fires (`loopx goal-focus status` lists them); name the trigger manual, or another, to replan anyway")]
    NothingToReplan,
    #[error("{0}")]
    Advice(#[from] strategy::AdviceProblem),
    #[error(
        "the imported plan selects approach {approach:?}, which cannot be selected here: {reason}"
    )]
    ImportedSelection { approach: String, reason: String },
}

impl FocusError {
    /// Which input, left out, would have let the request through (the
    /// adapter names its own spelling of it).
    pub fn details(&self) -> Option<serde_json::Value> {
        let missing = match self {
            FocusError::NothingToReplan => "trigger",
            FocusError::Advice(strategy::AdviceProblem::ExecutorUnknown) => "executor",
            _ => return None,
        };
        Some(serde_json::json!({ "missing": missing }))
    }
}
