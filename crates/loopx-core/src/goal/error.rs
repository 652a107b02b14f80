//! Every refusal of the goal owner, each naming the value that was wrong
//! and what to do next.

use crate::digest::Digest;
use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoalError {
    #[error("goal {goal_id} does not exist yet")]
    NoGoal { goal_id: String },
    #[error("goal {goal_id} already exists (instance {instance_id})")]
    GoalExists {
        goal_id: String,
        instance_id: String,
    },
    #[error("this request was made for goal instance {expected}, but the current instance is {current}: a successor lifetime does not accept its predecessor's operations; read the goal again")]
    LifetimeMismatch { expected: String, current: String },
    #[error("{what} needs an agent: act as one (an agent_id, or LOOPX_AGENT_ID)")]
    AgentRequired { what: &'static str },
    #[error("only the goal's owner may {what}; agent {agent} cannot (act as the owner, with no agent_id)")]
    OwnerOnly { what: &'static str, agent: String },
    #[error("agent {agent} has not adopted objective revision {revision}: read `loopx goal-acceptance inspect --agent-id {agent}`, then `loopx goal-acceptance adopt-objective` before taking new work")]
    NotAdopted { agent: String, revision: u64 },
    #[error("the objective must not be empty or whitespace")]
    EmptyObjective,
    #[error("the proposed objective is identical to current revision {revision} (ignoring whitespace): nothing to revise")]
    IdenticalObjective { revision: u64 },
    #[error("adoption does not match the current objective: {what}; read `loopx goal-acceptance inspect` and adopt what it shows")]
    AdoptionMismatch { what: String },
    #[error("outcome {outcome_id} belongs to agent {responsible}; {actor} cannot change it")]
    ForeignOutcome {
        outcome_id: String,
        responsible: String,
        actor: String,
    },
    #[error(
        "outcome {outcome_id} does not exist; creating it needs an \"objective\" and a \"source\""
    )]
    NoOutcome { outcome_id: String },
    #[error("the original objective of outcome {outcome_id} is immutable")]
    ObjectiveImmutable { outcome_id: String },
    #[error("requirement {requirement_id} of outcome {outcome_id} already reads differently; requirements are append-only: add a new requirement id instead of changing this one")]
    RequirementChanged {
        outcome_id: String,
        requirement_id: String,
    },
    #[error("requirement {requirement_id} of outcome {outcome_id} is missing from the restated \"requirements\": a refinement may not lose a requirement (list it, or use \"add_requirements\")")]
    RequirementLost {
        outcome_id: String,
        requirement_id: String,
    },
    #[error("{what} needs a \"source\" (a reference to the request it came from)")]
    SourceRequired { what: String },
    #[error("outcome {outcome_id} would have {count} sources; the limit is {limit}: cite existing sources instead of adding more")]
    TooManySources {
        outcome_id: String,
        count: usize,
        limit: usize,
    },
    #[error("the {which} budget would be {bytes} bytes of canonical JSON; the limit is {limit}: nothing was written; move detail into the evidence it cites")]
    BudgetExceeded {
        which: &'static str,
        bytes: usize,
        limit: usize,
    },
    #[error("the checks for outcome {outcome_id} are not valid: {why}; nothing was written")]
    ChecksInvalid { outcome_id: String, why: String },
    #[error("the requirements or linked work of outcome {outcome_id} changed since the proposal (basis {proposed}, now {current}): nothing was written; run `loopx goal-acceptance prepare-checks` again and review what it shows")]
    ChecksBasisChanged {
        outcome_id: String,
        proposed: Digest,
        current: Digest,
    },
    #[error("no check is configured on outcome {outcome_id} for {criterion_id}: a result is recorded only for a configured check")]
    NoSuchCheck {
        outcome_id: String,
        criterion_id: String,
    },
    #[error("todo {id} does not exist (see `loopx todo list`)")]
    NoTodo { id: String },
    #[error("todo {id} already exists")]
    TodoExists { id: String },
    #[error("todo {id} is added twice in one batch")]
    TodoTwice { id: String },
    /// A refusal of one todo of a batch: `row` counts from 1, in the
    /// order the batch lists them. Nothing of the batch was written.
    #[error("row {row}: {problem}; nothing was added")]
    Row { row: usize, problem: Box<GoalError> },
    #[error("todo {id} is done; a finished todo cannot be reopened or changed")]
    TodoDone { id: String },
    #[error("todo {id} is blocked ({reason}); it must be unblocked before it is claimed")]
    TodoBlocked { id: String, reason: String },
    #[error("todo {id} is leased to {holder} until {until}")]
    LeaseHeld {
        id: String,
        holder: String,
        until: Timestamp,
    },
    #[error("{actor} does not hold the lease on todo {id} (holder: {})", holder.as_deref().unwrap_or("nobody"))]
    NotHolder {
        id: String,
        actor: String,
        holder: Option<String>,
    },
    #[error("requirement {requirement_id} does not exist on outcome {outcome_id}")]
    NoRequirement {
        outcome_id: String,
        requirement_id: String,
    },
    #[error("a review of requirement {requirement_id} needs reasoning and at least one evidence reference")]
    ReviewNeedsEvidence { requirement_id: String },
    #[error("outcome {outcome_id} has no open gap at checkpoint {checkpoint}")]
    NoSuchGap {
        outcome_id: String,
        checkpoint: String,
    },
    #[error("no pending proposal {digest}: read the goal again to see the current ones")]
    NoProposal { digest: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Text(#[from] crate::text::TextProblem),
    #[error("{0}")]
    Ident(#[from] crate::ident::IdentProblem),
}
