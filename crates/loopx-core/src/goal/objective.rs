//! The operating objective: proposals, owner-applied revisions in a
//! digest-linked history that is never pruned, and per-agent adoption.
//!
//! Revision 0 is the original objective, which every agent holds by
//! definition. After a revision, an agent of a multi-agent goal must adopt
//! it before it takes new work; renewing and releasing what it already
//! holds stays open to it.

use super::{receipt, Actor, Change, Goal, GoalError, GoalReceipt};
use crate::digest::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `revision.json`: what a proposal or revision says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveDocument {
    pub objective: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub source_ref: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub proposed_by: String,
    /// The revision it would become and the digest it would have: a
    /// proposal is bound to the history it was written against.
    pub revision: u64,
    pub digest: Digest,
    pub objective: String,
    pub reason: String,
    pub source_ref: String,
    pub proposed_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectiveRevision {
    pub revision: u64,
    pub objective: String,
    pub reason: String,
    pub source_ref: String,
    pub digest: Digest,
    pub previous_digest: Digest,
    pub applied_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adoption {
    pub agent_id: String,
    pub revision: u64,
    pub digest: Digest,
    pub work_digest: Digest,
    pub review_summary: String,
    pub adopted_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ObjectiveLog {
    pub revisions: Vec<ObjectiveRevision>,
    pub proposals: Vec<Proposal>,
    pub adoptions: BTreeMap<String, Adoption>,
}

impl ObjectiveLog {
    pub fn current_revision(&self) -> u64 {
        self.revisions.len() as u64
    }
}

/// The digest of revision `revision` saying `objective`, chained to the one
/// before it.
fn link(revision: u64, objective: &str, previous: Option<&Digest>) -> Digest {
    Digest::of_json(
        &serde_json::json!({"revision": revision, "objective": objective, "previous": previous}),
    )
}

pub fn current_text(goal: &Goal) -> &str {
    goal.objective
        .revisions
        .last()
        .map_or(goal.original_objective.as_str(), |r| r.objective.as_str())
}

pub fn current_digest(goal: &Goal) -> Digest {
    match goal.objective.revisions.last() {
        Some(revision) => revision.digest.clone(),
        None => link(0, &goal.original_objective, None),
    }
}

/// The work an agent reviews when it adopts: the todos it holds or made
/// and the outcomes it is responsible for, as they stand.
pub fn work_digest(goal: &Goal, agent: &str) -> Digest {
    let todos: Vec<_> = goal
        .todos
        .iter()
        .filter(|t| t.created_by == agent || t.lease.as_ref().is_some_and(|l| l.holder == agent))
        .map(|t| (&t.id, t.status))
        .collect();
    let outcomes: Vec<_> = goal
        .outcomes
        .iter()
        .filter(|o| o.responsible_agent == agent)
        .map(|o| (&o.id, o.requirements.len(), &o.linked_todos))
        .collect();
    Digest::of_json(&serde_json::json!({"agent": agent, "todos": todos, "outcomes": outcomes}))
}

pub fn has_adopted(goal: &Goal, agent: &str) -> bool {
    let current = goal.objective.current_revision();
    current == 0
        || goal
            .objective
            .adoptions
            .get(agent)
            .is_some_and(|a| a.revision == current && a.digest == current_digest(goal))
}

fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The revision `document` would become, or why it cannot.
fn prospective(
    goal: &Goal,
    document: &ObjectiveDocument,
) -> Result<(u64, Digest, String), GoalError> {
    let objective = document.objective.trim();
    if objective.is_empty() {
        return Err(GoalError::EmptyObjective);
    }
    let current = goal.objective.current_revision();
    if normalized(objective) == normalized(current_text(goal)) {
        return Err(GoalError::IdenticalObjective { revision: current });
    }
    let previous = current_digest(goal);
    Ok((
        current + 1,
        link(current + 1, objective, Some(&previous)),
        objective.to_owned(),
    ))
}

pub fn prepare(
    goal: &Goal,
    actor: &Actor,
    document: &ObjectiveDocument,
    now: Timestamp,
) -> Result<(Vec<Change>, GoalReceipt), GoalError> {
    let (revision, digest, objective) = prospective(goal, document)?;
    let base = receipt(goal, &["objective_proposed"])
        .with("revision", revision)
        .with("digest", &digest);
    if goal.objective.proposals.iter().any(|p| p.digest == digest) {
        // Reuse the pending proposal rather than asking the owner again.
        let mut same = base;
        same.effects = vec!["proposal_already_pending".into()];
        return Ok((vec![], same));
    }
    let proposal = Proposal {
        proposed_by: actor.name().to_owned(),
        revision,
        digest,
        objective,
        reason: document.reason.trim().to_owned(),
        source_ref: document.source_ref.trim().to_owned(),
        proposed_at: now,
    };
    Ok((vec![Change::ObjectiveProposed { proposal }], base))
}

pub fn revise(
    goal: &Goal,
    actor: &Actor,
    document: &ObjectiveDocument,
    now: Timestamp,
) -> Result<(Vec<Change>, GoalReceipt), GoalError> {
    if let Actor::Agent(agent) = actor {
        return Err(GoalError::OwnerOnly {
            what: "revise the operating objective",
            agent: agent.clone(),
        });
    }
    let (revision, digest, objective) = prospective(goal, document)?;
    let change = ObjectiveRevision {
        revision,
        objective,
        reason: document.reason.trim().to_owned(),
        source_ref: document.source_ref.trim().to_owned(),
        digest: digest.clone(),
        previous_digest: current_digest(goal),
        applied_at: now,
    };
    let pending: Vec<&str> = goal.agents.iter().map(|a| a.agent_id.as_str()).collect();
    let receipt = receipt(goal, &["objective_revised"])
        .with("revision", revision)
        .with("digest", &digest)
        .with("pending_agents", pending);
    Ok((vec![Change::ObjectiveRevised { revision: change }], receipt))
}

pub fn adopt(
    goal: &Goal,
    actor: &Actor,
    revision: u64,
    digest: &Digest,
    work: &Digest,
    review_summary: &str,
    now: Timestamp,
) -> Result<(Vec<Change>, GoalReceipt), GoalError> {
    let agent = actor.agent_id().ok_or(GoalError::AgentRequired {
        what: "adopting an objective",
    })?;
    let current = goal.objective.current_revision();
    if revision != current {
        return Err(GoalError::AdoptionMismatch {
            what: format!("revision {revision} is not the current revision {current}"),
        });
    }
    if digest != &current_digest(goal) {
        return Err(GoalError::AdoptionMismatch {
            what: format!("digest {digest} is not the digest of revision {current}"),
        });
    }
    if review_summary.trim().is_empty() {
        return Err(GoalError::Invalid(
            "adoption needs a --review-summary of the work reviewed".into(),
        ));
    }
    let receipt = receipt(goal, &["objective_adopted"]).with("revision", revision);
    if has_adopted(goal, agent) && goal.objective.adoptions.contains_key(agent) {
        let mut same = receipt;
        same.effects = vec!["adoption_unchanged".into()];
        return Ok((vec![], same));
    }
    let expected_work = work_digest(goal, agent);
    if work != &expected_work {
        return Err(GoalError::AdoptionMismatch {
            what: format!(
                "work digest {work} is stale; the agent's work now digests to {expected_work}"
            ),
        });
    }
    let adoption = Adoption {
        agent_id: agent.to_owned(),
        revision,
        digest: digest.clone(),
        work_digest: work.clone(),
        review_summary: review_summary.trim().to_owned(),
        adopted_at: now,
    };
    Ok((vec![Change::ObjectiveAdopted { adoption }], receipt))
}
