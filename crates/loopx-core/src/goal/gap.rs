//! Gap projection: an outcome with requirements not reviewed as met and no
//! linked open work is a gap planning must see.
//!
//! Its checkpoint digests the requirements, the linked work and the review
//! conclusions with their evidence, but not sources or review wording: an
//! acknowledged gap stays acknowledged through bookkeeping and is raised
//! again when something material changes.

use super::outcome::{Conclusion, Outcome};
use super::Goal;
use crate::digest::Digest;
use jiff::Timestamp;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequirementState {
    Met,
    Unmet,
    Uncertain,
    Unreviewed,
}

impl RequirementState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequirementState::Met => "met",
            RequirementState::Unmet => "unmet",
            RequirementState::Uncertain => "uncertain",
            RequirementState::Unreviewed => "unreviewed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnresolvedRequirement {
    pub id: String,
    pub state: RequirementState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub kind: &'static str,
    pub outcome_id: String,
    pub responsible_agent: String,
    pub unresolved: Vec<UnresolvedRequirement>,
    pub checkpoint: Digest,
    pub acknowledged: bool,
}

/// Each requirement of `outcome` with the state its current review gives it.
pub fn requirement_states(outcome: &Outcome) -> Vec<(&str, RequirementState)> {
    let basis = outcome.basis();
    outcome
        .requirements
        .iter()
        .map(|requirement| {
            // A configured check decides its requirement; a review cannot.
            if let Some(check) = super::checks::configured_state(outcome, &requirement.id) {
                let state = match check {
                    super::checks::CheckState::Passed => RequirementState::Met,
                    super::checks::CheckState::Failed => RequirementState::Unmet,
                    _ => RequirementState::Unreviewed,
                };
                return (requirement.id.as_str(), state);
            }
            let state = match outcome
                .current_review(&requirement.id, &basis)
                .map(|r| r.conclusion)
            {
                Some(Conclusion::Met) => RequirementState::Met,
                Some(Conclusion::Unmet) => RequirementState::Unmet,
                Some(Conclusion::Uncertain) => RequirementState::Uncertain,
                None => RequirementState::Unreviewed,
            };
            (requirement.id.as_str(), state)
        })
        .collect()
}

/// The digest a gap acknowledgement binds: the requirements and linked
/// declarations (through the outcome's basis), the linked work's state,
/// the current review conclusions with their evidence, and the configured
/// checks with their results.
pub fn checkpoint(goal: &Goal, outcome: &Outcome) -> Digest {
    /// Fields in key order, no maps: its plain JSON is canonical.
    #[derive(Serialize)]
    struct Checkpoint<'a> {
        basis: Digest,
        #[serde(skip_serializing_if = "Option::is_none")]
        checks: Option<Digest>,
        outcome: &'a str,
        reviews: Digest,
        work: Vec<(&'a str, Option<super::todo::TodoStatus>)>,
    }
    // Configured checks and their results rearm an acknowledged gap when
    // they change; without any, the checkpoint is what it always was.
    let checks = (!outcome.checks.is_empty()).then(|| {
        let results: Vec<_> = (outcome.check_results.iter())
            .map(|r| (&r.criterion_id, r.status, &r.argv_digest, &r.head))
            .collect();
        Digest::of_json(&(&outcome.checks, results))
    });
    Digest::of_ordered_json(&Checkpoint {
        basis: outcome.basis(),
        checks,
        outcome: &outcome.id,
        reviews: outcome.reviews_digest(),
        work: outcome
            .linked_todos
            .iter()
            .map(|id| (id.as_str(), goal.todo(id).map(|t| t.status)))
            .collect(),
    })
}

/// Every gap of `goal`, acknowledged or not, in outcome order.
pub fn gaps(goal: &Goal, _now: Timestamp) -> Vec<Gap> {
    goal.outcomes
        .iter()
        .filter_map(|outcome| {
            let covered = outcome
                .linked_todos
                .iter()
                .any(|id| goal.todo(id).is_some_and(|t| t.status.is_open_work()));
            if covered {
                return None;
            }
            let unresolved: Vec<_> = requirement_states(outcome)
                .into_iter()
                .filter(|(_, state)| *state != RequirementState::Met)
                .map(|(id, state)| UnresolvedRequirement {
                    id: id.to_owned(),
                    state,
                })
                .collect();
            if unresolved.is_empty() {
                return None;
            }
            let checkpoint = checkpoint(goal, outcome);
            let acknowledged = goal.gap_acknowledgements.get(&outcome.id) == Some(&checkpoint);
            Some(Gap {
                kind: "goal_outcome_uncovered",
                outcome_id: outcome.id.clone(),
                responsible_agent: outcome.responsible_agent.clone(),
                unresolved,
                checkpoint,
                acknowledged,
            })
        })
        .collect()
}
