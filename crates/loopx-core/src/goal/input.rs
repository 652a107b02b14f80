//! What a goal command may carry: every id in the identifier grammar
//! ([`crate::ident`]) and every free-text field within its limit and free
//! of control characters ([`crate::text`]).
//!
//! [`check`] runs first in [`super::GoalOwner`]'s decide, before any rule
//! reads the request, so a hostile field is refused whatever the request
//! would otherwise have done, and the rules after it may print any field.

use super::outcome::{OutcomeUpdate, RequirementInput};
use super::todo::TodoAction;
use super::{Actor, GoalCommand, GoalError, GoalRequest, RootCommitments};
use crate::ident::{self, IdKind};
use crate::text::{self, limits};

/// Check every id and text field of `command`.
pub fn check(command: &GoalCommand) -> Result<(), GoalError> {
    actor(&command.actor)?;
    if let Some(instance) = &command.expected_instance {
        text::check("--goal-instance", instance, limits::LINE)?;
    }
    match &command.request {
        GoalRequest::Create {
            goal_id,
            objective,
            commitments,
            ..
        } => {
            ident::check(IdKind::Goal, goal_id)?;
            text::check("objective", objective, limits::OBJECTIVE)?;
            root_commitments(commitments)?;
        }
        GoalRequest::Recreate { objective, reason } => {
            text::check("objective", objective, limits::OBJECTIVE)?;
            text::check("reason", reason, limits::NOTE)?;
        }
        GoalRequest::RegisterAgent { agent_id } => ident::check(IdKind::Agent, agent_id)?,
        GoalRequest::PrepareObjective { document }
        | GoalRequest::ReviseObjective { document, .. } => {
            text::check("objective", &document.objective, limits::OBJECTIVE)?;
            text::check("reason", &document.reason, limits::NOTE)?;
            text::check("source_ref", &document.source_ref, limits::LINE)?;
        }
        GoalRequest::AdoptObjective { review_summary, .. } => {
            text::check("--review-summary", review_summary, limits::NOTE)?;
        }
        GoalRequest::RefineOutcome { update } => outcome_update(update)?,
        GoalRequest::AddTodo { id, title } => new_todo(id.as_deref(), title)?,
        GoalRequest::AddTodos { todos } => {
            if todos.is_empty() {
                return Err(GoalError::Invalid("the batch lists no todos".into()));
            }
            if todos.len() > limits::TODO_BATCH_ITEMS {
                return Err(GoalError::Invalid(format!(
                    "a batch of {} todos is over the limit of {}: split it",
                    todos.len(),
                    limits::TODO_BATCH_ITEMS
                )));
            }
            for (index, todo) in todos.iter().enumerate() {
                new_todo(todo.id.as_deref(), &todo.title).map_err(|problem| GoalError::Row {
                    row: index + 1,
                    problem: Box::new(problem),
                })?;
            }
        }
        GoalRequest::Todo { id, action, note } => {
            todo_action(id, action)?;
            text::check("--note", note, limits::NOTE)?;
        }
        GoalRequest::AcknowledgeGap { outcome_id, .. } => {
            ident::check(IdKind::Outcome, outcome_id)?;
        }
        GoalRequest::ConfigureChecks { config, .. } => {
            ident::check(IdKind::Outcome, &config.outcome_id)?;
        }
        GoalRequest::RecordChecks {
            outcome_id,
            results,
        } => {
            ident::check(IdKind::Outcome, outcome_id)?;
            text::check_count("check results", results.len())?;
        }
        GoalRequest::Writeback {
            note,
            evidence_refs,
            todos,
        } => {
            text::check("--note", note, limits::NOTE)?;
            text::check_all("--evidence-ref", evidence_refs, limits::LINE)?;
            text::check_count("todo changes", todos.len())?;
            for (id, action) in todos {
                todo_action(id, action)?;
            }
        }
    }
    Ok(())
}

/// An agent is named by a valid id; the owner has no id at all, so an
/// empty or malformed agent id can never stand in for the owner.
pub fn actor(actor: &Actor) -> Result<(), GoalError> {
    match actor {
        Actor::Owner => Ok(()),
        Actor::Agent(id) => Ok(ident::check(IdKind::Agent, id)?),
    }
}

fn root_commitments(commitments: &RootCommitments) -> Result<(), GoalError> {
    let RootCommitments {
        acceptance_criteria,
        non_goals,
        permissions,
    } = commitments;
    text::check_all(
        "acceptance_criteria",
        acceptance_criteria,
        limits::OBJECTIVE,
    )?;
    text::check_all("non_goals", non_goals, limits::OBJECTIVE)?;
    text::check_all("permissions", permissions, limits::OBJECTIVE)?;
    Ok(())
}

fn new_todo(id: Option<&str>, title: &str) -> Result<(), GoalError> {
    if let Some(id) = id {
        ident::check(IdKind::Todo, id)?;
    }
    text::check("title", title, limits::TITLE)?;
    Ok(())
}

fn todo_action(id: &str, action: &TodoAction) -> Result<(), GoalError> {
    ident::check(IdKind::Todo, id)?;
    if let TodoAction::Block { reason } = action {
        text::check("blocking reason", reason, limits::LINE)?;
    }
    Ok(())
}

fn requirements(field: &str, inputs: &[RequirementInput]) -> Result<(), GoalError> {
    text::check_count(field, inputs.len())?;
    for (index, input) in inputs.iter().enumerate() {
        ident::check(IdKind::Requirement, &input.id)?;
        text::check(
            &format!("{field}[{index}].description"),
            &input.description,
            limits::OBJECTIVE,
        )?;
    }
    Ok(())
}

fn outcome_update(update: &OutcomeUpdate) -> Result<(), GoalError> {
    ident::check(IdKind::Outcome, &update.outcome_id)?;
    if let Some(objective) = &update.objective {
        text::check("objective", objective, limits::OBJECTIVE)?;
    }
    if let Some(agent) = &update.responsible_agent {
        ident::check(IdKind::Agent, agent)?;
    }
    if let Some(restated) = &update.requirements {
        requirements("requirements", restated)?;
    }
    requirements("add_requirements", &update.add_requirements)?;
    text::check_count("link_todos", update.link_todos.len())?;
    for todo in &update.link_todos {
        ident::check(IdKind::Todo, todo)?;
    }
    if let Some(source) = &update.source {
        text::check("source.ref", &source.source_ref, limits::LINE)?;
        text::check("source.summary", &source.summary, limits::NOTE)?;
    }
    text::check_count("reviews", update.reviews.len())?;
    for (index, review) in update.reviews.iter().enumerate() {
        ident::check(IdKind::Requirement, &review.requirement_id)?;
        text::check(
            &format!("reviews[{index}].reasoning"),
            &review.reasoning,
            limits::NOTE,
        )?;
        text::check_all(
            &format!("reviews[{index}].evidence_refs"),
            &review.evidence_refs,
            limits::LINE,
        )?;
    }
    Ok(())
}
