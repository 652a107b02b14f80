//! The goal authority: the original objective and its root commitments,
//! registered agents, the operating objective and its adoptions, supporting
//! outcomes with cumulative requirements, the todo frontier with leases, and
//! the gaps planning must see.
//!
//! One snapshot per goal (stream `goal:<id>`), changed only through
//! [`GoalOwner`]. Each event is a list of resolved facts ([`Change`]), so the
//! fold is trivial and cannot disagree with what `decide` checked.

pub mod continuation;
pub mod gap;
pub mod input;
pub mod inspect;
pub mod objective;
pub mod outcome;
pub mod task_body;
pub mod todo;

use crate::digest::Digest;
use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use objective::{Adoption, ObjectiveDocument, ObjectiveLog, ObjectiveRevision, Proposal};
use outcome::{Outcome, OutcomeUpdate, RefinedOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use todo::{EvidenceNote, Todo, TodoAction, TodoStatus, TodoTransition};

/// The goal every loop has unless told otherwise.
pub const DEFAULT_GOAL_ID: &str = "main";

/// How many recent goal-level notes the snapshot keeps (the journal keeps all).
pub const RECENT_NOTES: usize = 20;

pub fn stream(goal_id: &str) -> String {
    format!("goal:{goal_id}")
}

/// Who is asking. The local owner (a person at the CLI or dashboard) has no
/// agent id; an agent always does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Actor {
    Owner,
    Agent(String),
}

impl Actor {
    /// The agent `id`, or why it is not an agent id. Adapters build actors
    /// with this, so an empty `--agent-id` is refused rather than taken to
    /// mean the owner.
    pub fn agent(id: &str) -> Result<Actor, GoalError> {
        let actor = Actor::Agent(id.to_owned());
        input::actor(&actor)?;
        Ok(actor)
    }

    pub fn name(&self) -> &str {
        match self {
            Actor::Owner => "owner",
            Actor::Agent(id) => id,
        }
    }

    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Actor::Owner => None,
            Actor::Agent(id) => Some(id),
        }
    }
}

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
    Todo {
        id: String,
        action: TodoAction,
        note: String,
    },
    AcknowledgeGap {
        outcome_id: String,
        checkpoint: Digest,
    },
    /// The agent's writeback at the end of a turn.
    Writeback {
        note: String,
        evidence_refs: Vec<String>,
        todos: Vec<(String, TodoAction)>,
    },
}

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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalEvent {
    pub at: Timestamp,
    pub actor: Actor,
    pub changes: Vec<Change>,
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
    #[error("{what} needs an agent: pass --agent-id or set LOOPX_AGENT_ID")]
    AgentRequired { what: &'static str },
    #[error("only the goal's owner may {what}; agent {agent} cannot (run it without --agent-id / LOOPX_AGENT_ID)")]
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
    #[error("todo {id} does not exist (see `loopx todo list`)")]
    NoTodo { id: String },
    #[error("todo {id} already exists")]
    TodoExists { id: String },
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

pub struct GoalContext {
    pub now: Timestamp,
}

fn ensure_adopted(goal: &Goal, actor: &Actor) -> Result<(), GoalError> {
    let Actor::Agent(agent) = actor else {
        return Ok(());
    };
    if !goal.is_multi_agent() || objective::has_adopted(goal, agent) {
        return Ok(());
    }
    Err(GoalError::NotAdopted {
        agent: agent.clone(),
        revision: goal.objective.current_revision(),
    })
}

fn receipt(goal: &Goal, effects: &[&str]) -> GoalReceipt {
    GoalReceipt {
        goal_id: goal.goal_id.clone(),
        instance_id: goal.instance_id.clone(),
        effects: effects.iter().map(|e| (*e).to_owned()).collect(),
        values: BTreeMap::new(),
    }
}

impl GoalReceipt {
    fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.values.insert(
            key.to_owned(),
            serde_json::to_value(value).expect("receipt values serialize"),
        );
        self
    }
}

/// Decide one todo action (with its optional note) for `actor`.
fn todo_changes(
    goal: &Goal,
    id: &str,
    action: &TodoAction,
    note: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<Vec<Change>, GoalError> {
    let todo = goal
        .todo(id)
        .ok_or_else(|| GoalError::NoTodo { id: id.to_owned() })?;
    if action.acquires() {
        ensure_adopted(goal, actor)?;
    }
    let transition = todo::decide(todo, action, actor, now)?;
    let mut changes = vec![Change::TodoChanged {
        id: id.to_owned(),
        transition,
    }];
    if !note.trim().is_empty() {
        changes.push(Change::NoteRecorded {
            todo: Some(id.to_owned()),
            note: EvidenceNote {
                at: now,
                by: actor.name().to_owned(),
                note: note.trim().to_owned(),
                evidence_refs: vec![],
            },
        });
    }
    Ok(changes)
}

fn transition_effect(action: &TodoAction) -> &'static str {
    match action {
        TodoAction::Claim { .. } => "todo_claimed",
        TodoAction::Renew { .. } => "lease_renewed",
        TodoAction::Release => "todo_released",
        TodoAction::Complete => "todo_completed",
        TodoAction::Block { .. } => "todo_blocked",
        TodoAction::Defer { .. } => "todo_deferred",
    }
}

pub struct GoalOwner;

impl Owner for GoalOwner {
    type State = Goal;
    type Request = GoalCommand;
    type Event = GoalEvent;
    type Receipt = GoalReceipt;
    type Error = GoalError;
    type Context<'a> = GoalContext;

    fn expected_revision(command: &GoalCommand) -> Option<u64> {
        match &command.request {
            GoalRequest::ReviseObjective {
                expected_provider_revision,
                ..
            } => Some(*expected_provider_revision),
            _ => command.base_revision,
        }
    }

    fn decide(
        state: Option<&Goal>,
        command: &GoalCommand,
        context: &GoalContext,
    ) -> Result<Decided<GoalEvent, GoalReceipt>, GoalError> {
        input::check(command)?;
        let now = context.now;
        let actor = &command.actor;
        let event = |changes: Vec<Change>| GoalEvent {
            at: now,
            actor: actor.clone(),
            changes,
        };
        let GoalRequest::Create {
            goal_id,
            objective,
            commitments,
        } = &command.request
        else {
            let goal = state.ok_or_else(|| GoalError::NoGoal {
                goal_id: DEFAULT_GOAL_ID.into(),
            })?;
            if let Some(expected) = &command.expected_instance {
                if expected != &goal.instance_id {
                    return Err(GoalError::LifetimeMismatch {
                        expected: expected.clone(),
                        current: goal.instance_id.clone(),
                    });
                }
            }
            return decide_on(goal, command, now).map(|(changes, receipt)| {
                match changes.is_empty() {
                    true => Decided::unchanged(receipt),
                    false => Decided::write(event(changes), receipt),
                }
            });
        };
        if let Some(goal) = state {
            return Err(GoalError::GoalExists {
                goal_id: goal.goal_id.clone(),
                instance_id: goal.instance_id.clone(),
            });
        }
        if objective.trim().is_empty() {
            return Err(GoalError::EmptyObjective);
        }
        let instance_id = format!("{goal_id}#1");
        let receipt = GoalReceipt {
            goal_id: goal_id.clone(),
            instance_id: instance_id.clone(),
            effects: vec!["goal_created".into()],
            values: BTreeMap::new(),
        };
        let created = Change::Created {
            goal_id: goal_id.clone(),
            lifetime: 1,
            instance_id,
            objective: objective.trim().to_owned(),
            commitments: commitments.clone(),
        };
        Ok(Decided::write(event(vec![created]), receipt))
    }

    fn evolve(state: Option<Goal>, event: &GoalEvent) -> Goal {
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

    fn event_kind(event: &GoalEvent) -> &'static str {
        match event.changes.as_slice() {
            [Change::Created { .. }] => "goal.created",
            [Change::Retired { .. }, ..] => "goal.recreated",
            [Change::AgentRegistered { .. }] => "goal.agent_registered",
            [Change::ObjectiveProposed { .. }] => "goal.objective_proposed",
            [Change::ObjectiveRevised { .. }] => "goal.objective_revised",
            [Change::ObjectiveAdopted { .. }] => "goal.objective_adopted",
            [Change::OutcomeRefined { .. }] => "goal.outcome_refined",
            [Change::TodoAdded { .. }] => "goal.todo_added",
            [Change::GapAcknowledged { .. }] => "goal.gap_acknowledged",
            [Change::TodoChanged { .. }]
            | [Change::TodoChanged { .. }, Change::NoteRecorded { .. }] => "goal.todo_changed",
            _ => "goal.writeback",
        }
    }
}

fn decide_on(
    goal: &Goal,
    command: &GoalCommand,
    now: Timestamp,
) -> Result<(Vec<Change>, GoalReceipt), GoalError> {
    let actor = &command.actor;
    match &command.request {
        GoalRequest::Create { .. } => unreachable!("handled by decide"),
        GoalRequest::Recreate { objective, reason } => {
            if let Actor::Agent(agent) = actor {
                return Err(GoalError::OwnerOnly {
                    what: "recreate a goal",
                    agent: agent.clone(),
                });
            }
            if objective.trim().is_empty() {
                return Err(GoalError::EmptyObjective);
            }
            let lifetime = goal.lifetime + 1;
            let instance_id = format!("{}#{lifetime}", goal.goal_id);
            let changes = vec![
                Change::Retired {
                    reason: reason.trim().to_owned(),
                },
                Change::Created {
                    goal_id: goal.goal_id.clone(),
                    lifetime,
                    instance_id: instance_id.clone(),
                    objective: objective.trim().to_owned(),
                    commitments: goal.commitments.clone(),
                },
            ];
            let mut receipt =
                receipt(goal, &["goal_recreated"]).with("predecessor", &goal.instance_id);
            receipt.instance_id = instance_id;
            Ok((changes, receipt))
        }
        GoalRequest::RegisterAgent { agent_id } => {
            if goal.is_registered(agent_id) {
                return Ok((vec![], receipt(goal, &["agent_already_registered"])));
            }
            Ok((
                vec![Change::AgentRegistered {
                    agent_id: agent_id.clone(),
                }],
                receipt(goal, &["agent_registered"]).with("agents", goal.agents.len() + 1),
            ))
        }
        GoalRequest::PrepareObjective { document } => {
            objective::prepare(goal, actor, document, now)
        }
        GoalRequest::ReviseObjective { document, .. } => {
            objective::revise(goal, actor, document, now)
        }
        GoalRequest::AdoptObjective {
            revision,
            digest,
            work_digest,
            review_summary,
        } => objective::adopt(
            goal,
            actor,
            *revision,
            digest,
            work_digest,
            review_summary,
            now,
        ),
        GoalRequest::RefineOutcome { update } => {
            let refined = outcome::decide(goal, actor, update, now)?;
            let effects = refined.effects();
            let mut r = receipt(
                goal,
                &effects.iter().map(String::as_str).collect::<Vec<_>>(),
            )
            .with("outcome_id", &refined.outcome_id);
            r = r.with("requirements_added", refined.requirements.len());
            Ok((
                vec![Change::OutcomeRefined {
                    refined: Box::new(refined),
                }],
                r,
            ))
        }
        GoalRequest::AddTodo { id, title } => {
            if title.trim().is_empty() {
                return Err(GoalError::Invalid(
                    "a todo needs a non-empty --title".into(),
                ));
            }
            let id = match id {
                Some(id) => id.clone(),
                None => {
                    let mut n = goal.next_todo_number;
                    while goal.todo(&format!("t{n}")).is_some() {
                        n += 1;
                    }
                    format!("t{n}")
                }
            };
            if goal.todo(&id).is_some() {
                return Err(GoalError::TodoExists { id });
            }
            let todo = Todo {
                id: id.clone(),
                title: title.trim().to_owned(),
                status: TodoStatus::Open,
                lease: None,
                created_at: now,
                created_by: actor.name().to_owned(),
                blocked_reason: String::new(),
                deferred_until: None,
                completed_at: None,
                evidence: Vec::new(),
            };
            Ok((
                vec![Change::TodoAdded { todo }],
                receipt(goal, &["todo_added"]).with("todo_id", id),
            ))
        }
        GoalRequest::Todo { id, action, note } => {
            let changes = todo_changes(goal, id, action, note, actor, now)?;
            Ok((
                changes,
                receipt(goal, &[transition_effect(action)]).with("todo_id", id),
            ))
        }
        GoalRequest::AcknowledgeGap {
            outcome_id,
            checkpoint,
        } => {
            let open = gap::gaps(goal, now)
                .into_iter()
                .find(|g| &g.outcome_id == outcome_id && &g.checkpoint == checkpoint);
            match open {
                None => Err(GoalError::NoSuchGap {
                    outcome_id: outcome_id.clone(),
                    checkpoint: checkpoint.to_string(),
                }),
                Some(gap) if gap.acknowledged => {
                    Ok((vec![], receipt(goal, &["gap_already_acknowledged"])))
                }
                Some(_) => Ok((
                    vec![Change::GapAcknowledged {
                        outcome_id: outcome_id.clone(),
                        checkpoint: checkpoint.clone(),
                    }],
                    receipt(goal, &["gap_acknowledged"]),
                )),
            }
        }
        GoalRequest::Writeback {
            note,
            evidence_refs,
            todos,
        } => {
            let mut changes = Vec::new();
            let mut effects = Vec::new();
            let mut seen = std::collections::BTreeSet::new();
            for (id, action) in todos {
                if !seen.insert(id) {
                    return Err(GoalError::Invalid(format!(
                        "todo {id} appears twice in one writeback"
                    )));
                }
                changes.extend(todo_changes(goal, id, action, "", actor, now)?);
                effects.push(transition_effect(action));
            }
            if !note.trim().is_empty() || !evidence_refs.is_empty() {
                changes.push(Change::NoteRecorded {
                    todo: None,
                    note: EvidenceNote {
                        at: now,
                        by: actor.name().to_owned(),
                        note: note.trim().to_owned(),
                        evidence_refs: evidence_refs.clone(),
                    },
                });
                effects.push("note_recorded");
            }
            Ok((changes, receipt(goal, &effects)))
        }
    }
}

fn apply(goal: &mut Goal, change: &Change, event: &GoalEvent) {
    match change {
        Change::Created {
            goal_id,
            lifetime,
            instance_id,
            objective,
            commitments,
        } => {
            // A successor lifetime: same goal id, nothing else inherited.
            let retired = std::mem::take(&mut goal.retired);
            let next = GoalOwner::evolve(
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
        Change::TodoAdded { todo } => {
            let number = todo
                .id
                .strip_prefix('t')
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = number.filter(|n| *n >= goal.next_todo_number) {
                goal.next_todo_number = n + 1;
            }
            goal.todos.push(todo.clone());
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
            if goal.notes.len() == RECENT_NOTES {
                goal.notes.remove(0);
            }
            goal.notes.push(note.clone());
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

#[cfg(test)]
mod tests;
