//! Goal acceptance's use cases: the readback (`inspect`), outcome
//! refinement, gap acknowledgement, the operating objective (prepare,
//! revise, adopt), agent registration, recreating a goal, and the
//! dashboard's two writes (add a requirement, apply a revision). One
//! function each, shared by the CLI and the HTTP server.
//!
//! The rules are the goal owner's (`loopx_core::goal`); what is here is
//! how each use case builds its request and what it answers.

use super::{submit, write, GoalReading, GoalReceiptView, GoalTarget, GoalWrite, Submit};
use crate::clock;
use crate::loop_dir::LoopDir;
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::digest::Digest;
use loopx_core::goal::inspect::{self, Readback};
use loopx_core::goal::objective::ObjectiveDocument;
use loopx_core::goal::outcome::{OutcomeUpdate, RequirementInput, SourceInput};
use loopx_core::goal::{Actor, GoalError, GoalRequest, DEFAULT_GOAL_ID};
use loopx_core::operation::OperationId;
use serde::{Serialize, Serializer};

/// The full readback of a goal: objective, revisions, adoption per agent,
/// outcomes, requirements, reviews, linked work, gaps, todos. Serializes as
/// [`Readback`]; the same for `goal-acceptance inspect --json` and
/// `GET /api/goal`.
pub struct GoalInspection {
    pub reading: GoalReading,
    /// For an agent's readback: the work digest its adoption must cite.
    agent: Option<String>,
    read_at: Timestamp,
}

impl GoalInspection {
    /// The readback of a goal already read (by a caller that needed the
    /// reading for something else too), as the owner sees it.
    pub fn of(reading: GoalReading) -> Self {
        GoalInspection {
            reading,
            agent: None,
            read_at: clock::now(),
        }
    }

    pub fn readback(&self) -> Readback<'_> {
        inspect::readback(
            &self.reading.goal,
            self.reading.revision,
            self.agent.as_deref(),
            self.read_at,
        )
    }
}

impl Serialize for GoalInspection {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.readback().serialize(serializer)
    }
}

/// Goal `goal_id` as `actor` sees it. Read-only.
pub fn inspect(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<GoalInspection> {
    Ok(GoalInspection {
        reading: dir.goal(goal_id)?,
        agent: actor.agent_id().map(str::to_owned),
        read_at: clock::now(),
    })
}

/// Create or refine a supporting outcome.
pub fn refine_outcome(
    dir: &LoopDir,
    target: &GoalTarget,
    update: OutcomeUpdate,
    how: &Submit,
) -> Result<GoalWrite> {
    submit(dir, target, how, GoalRequest::RefineOutcome { update })
}

/// Acknowledge an outcome's gap at the checkpoint the readback showed.
pub fn ack_gap(
    dir: &LoopDir,
    target: &GoalTarget,
    outcome_id: String,
    checkpoint: Digest,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    let request = GoalRequest::AcknowledgeGap {
        outcome_id,
        checkpoint,
    };
    write(dir, target, op, request, None)
}

/// Propose an operating-objective revision for the owner.
pub fn prepare_objective(
    dir: &LoopDir,
    target: &GoalTarget,
    document: ObjectiveDocument,
    how: &Submit,
) -> Result<GoalWrite> {
    submit(dir, target, how, GoalRequest::PrepareObjective { document })
}

/// Apply an operating-objective revision (the owner only), against the
/// provider revision the caller read.
pub fn revise_objective(
    dir: &LoopDir,
    target: &GoalTarget,
    document: ObjectiveDocument,
    expected_provider_revision: u64,
    how: &Submit,
) -> Result<GoalWrite> {
    let request = GoalRequest::ReviseObjective {
        document,
        expected_provider_revision,
    };
    submit(dir, target, how, request)
}

/// What an agent's adoption of the current objective cites.
pub struct Adoption {
    pub revision: u64,
    pub digest: Digest,
    pub work_digest: Digest,
    pub review_summary: String,
}

/// Record that the actor reviewed its work against the current objective.
pub fn adopt_objective(
    dir: &LoopDir,
    target: &GoalTarget,
    adoption: Adoption,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    let request = GoalRequest::AdoptObjective {
        revision: adoption.revision,
        digest: adoption.digest,
        work_digest: adoption.work_digest,
        review_summary: adoption.review_summary,
    };
    write(dir, target, op, request, None)
}

/// Register `agent_id` on the goal. Registration is the owner's act,
/// whoever the agent is, so `target`'s actor is not consulted.
pub fn register_agent(
    dir: &LoopDir,
    target: &GoalTarget,
    agent_id: String,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    let owner = GoalTarget {
        actor: Actor::Owner,
        ..target.clone()
    };
    write(
        dir,
        &owner,
        op,
        GoalRequest::RegisterAgent { agent_id },
        None,
    )
}

/// Retire the current goal lifetime and start a successor (owner only).
pub fn recreate(
    dir: &LoopDir,
    target: &GoalTarget,
    objective: String,
    reason: String,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    write(
        dir,
        target,
        op,
        GoalRequest::Recreate { objective, reason },
        None,
    )
}

/// A requirement the owner enters in the dashboard.
pub struct NewRequirement {
    pub outcome_id: String,
    pub requirement_id: String,
    pub description: String,
    /// Where the request came from; required.
    pub source_ref: String,
    pub source_summary: String,
    /// The goal revision the form was read at: a write on a newer state is
    /// refused as stale, and its retry reuses the operation id.
    pub base_revision: u64,
}

/// Add a requirement to an outcome, as the owner of the loop's goal.
pub fn add_requirement(
    dir: &LoopDir,
    input: NewRequirement,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    if input.source_ref.trim().is_empty() {
        return Err(GoalError::SourceRequired {
            what: format!("new requirement {}", input.requirement_id.trim()),
        }
        .into());
    }
    let update = OutcomeUpdate {
        outcome_id: input.outcome_id,
        add_requirements: vec![RequirementInput {
            id: input.requirement_id.trim().to_owned(),
            description: input.description,
        }],
        source: Some(SourceInput {
            source_ref: input.source_ref.trim().to_owned(),
            summary: input.source_summary,
        }),
        ..OutcomeUpdate::default()
    };
    write(
        dir,
        &GoalTarget::owner_of_default(),
        op,
        GoalRequest::RefineOutcome { update },
        Some(input.base_revision),
    )
}

/// Which revision the owner applies from the dashboard.
pub enum RevisionSource {
    /// A pending proposal, by its digest.
    Proposal(Digest),
    /// A revision the owner wrote.
    Document(ObjectiveDocument),
}

/// Apply an operating-objective revision as the owner of the loop's goal.
pub fn apply_revision(
    dir: &LoopDir,
    source: RevisionSource,
    expected_provider_revision: u64,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    let document = match source {
        RevisionSource::Document(document) => document,
        RevisionSource::Proposal(digest) => proposed_document(dir, &digest)?,
    };
    let request = GoalRequest::ReviseObjective {
        document,
        expected_provider_revision,
    };
    write(dir, &GoalTarget::owner_of_default(), op, request, None)
}

/// The document of proposal `digest`. A proposal becomes the revision with
/// the same digest once applied; rebuilding the identical request from it
/// lets a retried apply replay instead of failing.
fn proposed_document(dir: &LoopDir, digest: &Digest) -> Result<ObjectiveDocument> {
    let reading = dir.goal(DEFAULT_GOAL_ID)?;
    let objective = &reading.goal.objective;
    let pending = objective
        .proposals
        .iter()
        .find(|p| &p.digest == digest)
        .map(|p| (&p.objective, &p.reason, &p.source_ref));
    let applied = objective
        .revisions
        .iter()
        .find(|r| &r.digest == digest)
        .map(|r| (&r.objective, &r.reason, &r.source_ref));
    let Some((objective, reason, source_ref)) = pending.or(applied) else {
        return Err(GoalError::NoProposal {
            digest: digest.to_string(),
        }
        .into());
    };
    Ok(ObjectiveDocument {
        objective: objective.clone(),
        reason: reason.clone(),
        source_ref: source_ref.clone(),
    })
}
