//! What a caller sends the goal owner ([`GoalCommand`]: who, which
//! lifetime, which [`GoalRequest`]) and what it hands back
//! ([`GoalReceipt`]). Checking a request's fields is [`super::input`]'s
//! job; deciding it, `owner.rs`'s.

use super::checks::{CheckConfig, CheckResult};
use super::objective::ObjectiveDocument;
use super::outcome::OutcomeUpdate;
use super::todo::TodoAction;
use super::{Actor, RootCommitments};
use crate::digest::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A mutating goal request, with who asks and which lifetime they mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalCommand {
    pub actor: Actor,
    /// The goal instance the caller read; a different current lifetime
    /// refuses the request. `None` means "whatever is current".
    pub expected_instance: Option<String>,
    pub request: GoalRequest,
    /// The goal revision the caller's view was read at, for writes that must
    /// not land on a state the caller never saw (the dashboard's forms).
    /// Not part of the request's identity: a retry after re-reading reuses
    /// the same operation id with a newer base, and a reply lost after the
    /// first attempt committed is recovered by replay, never duplicated.
    #[serde(skip)]
    pub base_revision: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GoalRequest {
    Create {
        goal_id: String,
        objective: String,
        commitments: RootCommitments,
        /// Keep each todo in its own stream from the start (what loopx
        /// creates); without it the goal snapshot lists its todos.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        todo_streams: bool,
    },
    Recreate {
        objective: String,
        reason: String,
    },
    RegisterAgent {
        agent_id: String,
    },
    PrepareObjective {
        document: ObjectiveDocument,
    },
    ReviseObjective {
        document: ObjectiveDocument,
        expected_provider_revision: u64,
    },
    AdoptObjective {
        revision: u64,
        digest: Digest,
        work_digest: Digest,
        review_summary: String,
    },
    RefineOutcome {
        update: OutcomeUpdate,
    },
    AddTodo {
        id: Option<String>,
        title: String,
    },
    /// Many todos at once (`todo add --from-file`), all or none, in order.
    AddTodos {
        todos: Vec<NewTodo>,
    },
    Todo {
        id: String,
        action: TodoAction,
        note: String,
    },
    AcknowledgeGap {
        outcome_id: String,
        checkpoint: Digest,
    },
    /// The owner's executable checks on one outcome (they replace any
    /// configured before), bound to the outcome's requirements and linked
    /// work as the proposal showed them (`basis`).
    ConfigureChecks {
        config: CheckConfig,
        basis: Digest,
    },
    /// What the host observed running configured checks of one outcome.
    RecordChecks {
        outcome_id: String,
        results: Vec<CheckResult>,
    },
    /// The agent's writeback at the end of a turn.
    Writeback {
        note: String,
        evidence_refs: Vec<String>,
        todos: Vec<(String, TodoAction)>,
    },
}

/// One todo to add: what `todo add` takes (a title, and an id of the
/// caller's choosing or the next free `tN`). A row of a batch file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTodo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub title: String,
}

/// What a goal operation hands back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalReceipt {
    pub goal_id: String,
    pub instance_id: String,
    /// Short machine words for what happened (`todo_claimed`, ...).
    pub effects: Vec<String>,
    /// Values the caller will want next (a new todo id, a digest, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, serde_json::Value>,
}

impl GoalReceipt {
    pub(super) fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.values.insert(
            key.to_owned(),
            serde_json::to_value(value).expect("receipt values serialize"),
        );
        self
    }
}

pub struct GoalContext {
    pub now: Timestamp,
}
