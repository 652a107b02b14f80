//! `goal-acceptance inspect`: the full readback of a goal, read-only.

use super::gap::{gaps, requirement_states, Gap, RequirementState};
use super::objective::{self, ObjectiveRevision, Proposal};
use super::outcome::{Review, Source};
use super::todo::TodoStatus;
use super::{Goal, RetiredLifetime, RootCommitments};
use crate::digest::Digest;
use jiff::Timestamp;
use serde::Serialize;

/// Todos a readback lists: enough to see the work at a glance, bounded
/// however large the frontier grows.
pub const READBACK_TODOS: usize = 100;

#[derive(Debug, Serialize)]
pub struct Readback<'a> {
    pub goal_id: &'a str,
    pub instance_id: &'a str,
    pub lifetime: u64,
    /// The store revision of this goal: pass it as
    /// `--expected-provider-revision` to `revise-objective`.
    pub provider_revision: u64,
    pub original_objective: &'a str,
    pub commitments: &'a RootCommitments,
    pub objective: ObjectiveReadback<'a>,
    pub outcomes: Vec<OutcomeReadback<'a>>,
    pub gaps: Vec<Gap>,
    /// The first [`READBACK_TODOS`] todos in frontier order; every todo is
    /// `todo list`'s, page by page.
    pub todos: Vec<TodoLine<'a>>,
    /// How many todos the goal has, listed here or not.
    pub todos_total: usize,
    pub retired_lifetimes: &'a [RetiredLifetime],
}

#[derive(Debug, Serialize)]
pub struct ObjectiveReadback<'a> {
    pub current_revision: u64,
    pub current_objective: &'a str,
    pub current_digest: Digest,
    pub revisions: &'a [ObjectiveRevision],
    pub pending_proposals: &'a [Proposal],
    /// One line per registered agent: a later-registered one is pending
    /// until it adopts.
    pub adoption: Vec<AdoptionLine<'a>>,
    /// For `--agent-id`: the work digest its adoption must cite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective_work_digest: Option<Digest>,
}

#[derive(Debug, Serialize)]
pub struct AdoptionLine<'a> {
    pub agent_id: &'a str,
    pub state: &'static str,
    pub adopted_revision: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct RequirementLine<'a> {
    pub id: &'a str,
    pub description: &'a str,
    pub source_ref: &'a str,
    pub state: RequirementState,
}

#[derive(Debug, Serialize)]
pub struct LinkedWork<'a> {
    pub todo_id: &'a str,
    pub status: Option<TodoStatus>,
}

#[derive(Debug, Serialize)]
pub struct OutcomeReadback<'a> {
    pub id: &'a str,
    pub responsible_agent: &'a str,
    pub original_objective: &'a str,
    pub status: &'static str,
    pub requirements: Vec<RequirementLine<'a>>,
    pub linked_work: Vec<LinkedWork<'a>>,
    pub sources: &'a [Source],
    /// The agent's own evidence reviews (self-assessment), current or not.
    pub reviews: &'a [Review],
    /// Independent, configured checks (the owner's; `super::checks`), each
    /// with its newest host-observed result; reviews above are never
    /// presented as one. Judged here without a HEAD (`check status` judges
    /// against the project's).
    pub configured_checks: Vec<CheckLine<'a>>,
}

#[derive(Debug, Serialize)]
pub struct CheckLine<'a> {
    pub criterion: &'a super::checks::Criterion,
    pub state: super::checks::CheckState,
    pub last: Option<&'a super::checks::CheckResult>,
}

#[derive(Debug, Serialize)]
pub struct TodoLine<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub status: TodoStatus,
    pub holder: Option<&'a str>,
    pub lease_expires_at: Option<Timestamp>,
}

/// Summarize requirement states into one outcome status.
pub fn outcome_status(states: &[RequirementState]) -> &'static str {
    if states.is_empty() {
        "no_requirements"
    } else if states.iter().all(|s| *s == RequirementState::Met) {
        "met"
    } else if states.contains(&RequirementState::Unmet) {
        "unmet"
    } else if states.contains(&RequirementState::Uncertain) {
        "uncertain"
    } else {
        "unreviewed"
    }
}

pub fn readback<'a>(
    goal: &'a Goal,
    provider_revision: u64,
    agent: Option<&str>,
    now: Timestamp,
) -> Readback<'a> {
    let adoption = goal
        .agents
        .iter()
        .map(|a| {
            let adopted = objective::has_adopted(goal, &a.agent_id);
            AdoptionLine {
                agent_id: &a.agent_id,
                state: if adopted { "adopted" } else { "pending" },
                adopted_revision: goal
                    .objective
                    .adoptions
                    .get(&a.agent_id)
                    .map(|x| x.revision),
            }
        })
        .collect();
    let outcomes = goal
        .outcomes
        .iter()
        .map(|outcome| {
            let states = requirement_states(outcome);
            OutcomeReadback {
                id: &outcome.id,
                responsible_agent: &outcome.responsible_agent,
                original_objective: &outcome.original_objective,
                status: outcome_status(&states.iter().map(|(_, s)| *s).collect::<Vec<_>>()),
                requirements: outcome
                    .requirements
                    .iter()
                    .zip(&states)
                    .map(|(r, (_, state))| RequirementLine {
                        id: &r.id,
                        description: &r.description,
                        source_ref: &r.source_ref,
                        state: *state,
                    })
                    .collect(),
                linked_work: outcome
                    .linked_todos
                    .iter()
                    .map(|id| LinkedWork {
                        todo_id: id,
                        status: goal.todo(id).map(|t| t.status),
                    })
                    .collect(),
                sources: &outcome.sources,
                reviews: &outcome.reviews,
                configured_checks: (outcome.checks.iter())
                    .map(|criterion| CheckLine {
                        criterion,
                        state: super::checks::state(outcome, criterion, None),
                        last: (outcome.check_results.iter())
                            .find(|r| r.criterion_id == criterion.id),
                    })
                    .collect(),
            }
        })
        .collect();
    Readback {
        goal_id: &goal.goal_id,
        instance_id: &goal.instance_id,
        lifetime: goal.lifetime,
        provider_revision,
        original_objective: &goal.original_objective,
        commitments: &goal.commitments,
        objective: ObjectiveReadback {
            current_revision: goal.objective.current_revision(),
            current_objective: objective::current_text(goal),
            current_digest: objective::current_digest(goal),
            revisions: &goal.objective.revisions,
            pending_proposals: &goal.objective.proposals,
            adoption,
            objective_work_digest: agent.map(|a| objective::work_digest(goal, a)),
        },
        outcomes,
        gaps: gaps(goal, now),
        todos_total: goal.todos.len(),
        todos: goal
            .todos
            .iter()
            .take(READBACK_TODOS)
            .map(|t| TodoLine {
                id: &t.id,
                title: &t.title,
                status: t.status,
                holder: t.lease.as_ref().map(|l| l.holder.as_str()),
                lease_expires_at: t.lease.as_ref().map(|l| l.expires_at),
            })
            .collect(),
        retired_lifetimes: &goal.retired,
    }
}
