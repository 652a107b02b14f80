//! The snapshot of one goal ([`Goal`]) and the small records it holds.
//! What may change it is decided in `owner.rs`; how an event changes
//! it, in [`super::event`].

use super::objective::ObjectiveLog;
use super::outcome::Outcome;
use super::todo::{EvidenceNote, Todo};
use crate::digest::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What no refinement or revision can change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RootCommitments {
    pub acceptance_criteria: Vec<String>,
    pub non_goals: Vec<String>,
    pub permissions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub agent_id: String,
    pub registered_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredLifetime {
    pub lifetime: u64,
    pub instance_id: String,
    pub original_objective: String,
    pub outcomes: usize,
    pub objective_revision: u64,
    pub retired_at: Timestamp,
}

/// The snapshot of one goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub goal_id: String,
    /// 1 for the first lifetime; a recreated goal is a successor with the
    /// next number and inherits none of its predecessor's outcomes.
    pub lifetime: u64,
    pub instance_id: String,
    pub original_objective: String,
    pub commitments: RootCommitments,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub agents: Vec<AgentRecord>,
    pub objective: ObjectiveLog,
    pub outcomes: Vec<Outcome>,
    /// In priority order: the first runnable one is the next to work on.
    pub todos: Vec<Todo>,
    pub next_todo_number: u64,
    /// Gap checkpoints an agent acknowledged, by outcome id.
    pub gap_acknowledgements: BTreeMap<String, Digest>,
    pub notes: Vec<EvidenceNote>,
    pub retired: Vec<RetiredLifetime>,
    /// `Some(n)`: this lifetime keeps each todo in a stream of its own from
    /// the moment it is added (`todos` stays empty here; n todos were added
    /// so far), so a goal write costs what it changes, not the frontier's
    /// size. `None`: a lifetime begun before that, whose snapshot lists
    /// its todos (see [`super::frontier`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed_todos: Option<u64>,
}

impl Goal {
    pub fn todo(&self, id: &str) -> Option<&Todo> {
        self.todos.iter().find(|t| t.id == id)
    }

    pub fn outcome(&self, id: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.id == id)
    }

    pub fn is_registered(&self, agent_id: &str) -> bool {
        self.agents.iter().any(|a| a.agent_id == agent_id)
    }

    /// The multi-agent fences (adoption before new work) apply once a
    /// second agent registers; one agent needs no ceremony.
    pub fn is_multi_agent(&self) -> bool {
        self.agents.len() >= 2
    }
}
