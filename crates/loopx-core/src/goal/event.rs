//! What a goal write records: a [`GoalEvent`] is a list of resolved facts
//! ([`Change`]), so the fold below is trivial and cannot disagree with what
//! the owner's decide checked. Owns the fold; decides nothing.

use super::checks::{self, CheckResult, Criterion};
use super::objective::{Adoption, ObjectiveLog, ObjectiveRevision, Proposal};
use super::outcome::{self, RefinedOutcome};
use super::todo::{self, EvidenceNote, Todo, TodoTransition};
use super::{Actor, AgentRecord, Goal, RetiredLifetime, RootCommitments, RECENT_NOTES};
use crate::digest::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One resolved fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    Created {
        goal_id: String,
        lifetime: u64,
        instance_id: String,
        objective: String,
        commitments: RootCommitments,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        todo_streams: bool,
    },
    Retired {
        reason: String,
    },
    AgentRegistered {
        agent_id: String,
    },
    ObjectiveProposed {
        proposal: Proposal,
    },
    ObjectiveRevised {
        revision: ObjectiveRevision,
    },
    ObjectiveAdopted {
        adoption: Adoption,
    },
    OutcomeRefined {
        refined: Box<RefinedOutcome>,
    },
    TodoAdded {
        todo: Todo,
    },
    TodoChanged {
        id: String,
        transition: TodoTransition,
    },
    NoteRecorded {
        todo: Option<String>,
        note: EvidenceNote,
    },
    GapAcknowledged {
        outcome_id: String,
        checkpoint: Digest,
    },
    ChecksConfigured {
        outcome_id: String,
        criteria: Vec<Criterion>,
    },
    ChecksRecorded {
        outcome_id: String,
        results: Vec<CheckResult>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalEvent {
    pub at: Timestamp,
    pub actor: Actor,
    pub changes: Vec<Change>,
}

/// The goal after `event`: the fold `GoalOwner::evolve` is.
pub fn fold(state: Option<Goal>, event: &GoalEvent) -> Goal {
    let mut changes = event.changes.iter();
    let mut goal = match (state, event.changes.first()) {
        (
            None,
            Some(Change::Created {
                goal_id,
                lifetime,
                instance_id,
                objective,
                commitments,
                todo_streams,
            }),
        ) => {
            changes.next();
            Goal {
                goal_id: goal_id.clone(),
                lifetime: *lifetime,
                instance_id: instance_id.clone(),
                original_objective: objective.clone(),
                commitments: commitments.clone(),
                created_at: event.at,
                updated_at: event.at,
                agents: Vec::new(),
                objective: ObjectiveLog::default(),
                outcomes: Vec::new(),
                todos: Vec::new(),
                next_todo_number: 1,
                gap_acknowledgements: BTreeMap::new(),
                notes: Vec::new(),
                retired: Vec::new(),
                streamed_todos: todo_streams.then_some(0),
            }
        }
        (Some(goal), _) => goal,
        (None, _) => unreachable!("decide creates a goal before changing it"),
    };
    for change in changes {
        apply(&mut goal, change, event);
    }
    goal.updated_at = event.at;
    goal
}

fn apply(goal: &mut Goal, change: &Change, event: &GoalEvent) {
    match change {
        Change::Created {
            goal_id,
            lifetime,
            instance_id,
            objective,
            commitments,
            todo_streams,
        } => {
            // A successor lifetime: same goal id, nothing else inherited.
            let retired = std::mem::take(&mut goal.retired);
            let next = fold(
                None,
                &GoalEvent {
                    at: event.at,
                    actor: event.actor.clone(),
                    changes: vec![Change::Created {
                        goal_id: goal_id.clone(),
                        lifetime: *lifetime,
                        instance_id: instance_id.clone(),
                        objective: objective.clone(),
                        commitments: commitments.clone(),
                        todo_streams: *todo_streams,
                    }],
                },
            );
            *goal = Goal { retired, ..next };
        }
        Change::Retired { .. } => goal.retired.push(RetiredLifetime {
            lifetime: goal.lifetime,
            instance_id: goal.instance_id.clone(),
            original_objective: goal.original_objective.clone(),
            outcomes: goal.outcomes.len(),
            objective_revision: goal.objective.current_revision(),
            retired_at: event.at,
        }),
        Change::AgentRegistered { agent_id } => goal.agents.push(AgentRecord {
            agent_id: agent_id.clone(),
            registered_at: event.at,
        }),
        Change::ObjectiveProposed { proposal } => goal.objective.proposals.push(proposal.clone()),
        Change::ObjectiveRevised { revision } => {
            goal.objective
                .proposals
                .retain(|p| p.digest != revision.digest);
            goal.objective.revisions.push(revision.clone());
        }
        Change::ObjectiveAdopted { adoption } => {
            goal.objective
                .adoptions
                .insert(adoption.agent_id.clone(), adoption.clone());
        }
        Change::OutcomeRefined { refined } => outcome::evolve(goal, refined, event.at),
        Change::ChecksConfigured {
            outcome_id,
            criteria,
        } => {
            if let Some(o) = goal.outcomes.iter_mut().find(|o| &o.id == outcome_id) {
                o.checks = criteria.clone();
                o.check_results = checks::merged(o, &[]);
            }
        }
        Change::ChecksRecorded {
            outcome_id,
            results,
        } => {
            if let Some(o) = goal.outcomes.iter_mut().find(|o| &o.id == outcome_id) {
                o.check_results = checks::merged(o, results);
            }
        }
        Change::TodoAdded { todo } => {
            let number = todo
                .id
                .strip_prefix('t')
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = number.filter(|n| *n >= goal.next_todo_number) {
                goal.next_todo_number = n + 1;
            }
            match &mut goal.streamed_todos {
                // Its stream holds it (written beside this event).
                Some(added) => *added += 1,
                None => goal.todos.push(todo.clone()),
            }
        }
        Change::TodoChanged { id, transition } => {
            if let Some(todo) = goal.todos.iter_mut().find(|t| &t.id == id) {
                todo::evolve(todo, transition, event.at);
            }
        }
        Change::NoteRecorded {
            todo: Some(id),
            note,
        } => {
            if let Some(todo) = goal.todos.iter_mut().find(|t| &t.id == id) {
                todo.evidence.push(note.clone());
            }
        }
        Change::NoteRecorded { todo: None, note } => {
            crate::window::push_newest(&mut goal.notes, note.clone(), RECENT_NOTES);
        }
        Change::GapAcknowledged {
            outcome_id,
            checkpoint,
        } => {
            goal.gap_acknowledgements
                .insert(outcome_id.clone(), checkpoint.clone());
        }
    }
}
