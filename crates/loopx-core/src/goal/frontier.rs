//! Where a todo's live state is kept: in a stream of its own.
//!
//! Every claim used to compare-and-swap the whole goal snapshot, so claims
//! of distinct todos contended for one row. Now each todo of a goal
//! lifetime has its own stream ([`stream`]), written by [`TodoOwner`]: a
//! claim, renewal, release, completion, block or deferral of one todo
//! compare-and-swaps only that todo's stream, and claims of distinct todos
//! never conflict (the store can commit them side by side).
//!
//! What stays in the goal snapshot: the objective and adoptions, outcomes,
//! notes, and how many todos were added (adding a todo is a goal write, so
//! adds are ordered by the goal's revision). A goal lifetime begun with
//! todo streams (`Goal::streamed_todos`) lists no todo in its snapshot:
//! each todo's stream is written beside the goal event that adds it (one
//! transaction) and holds the todo from the start, with its place in
//! priority order (`Todo::position`), so neither adding nor claiming reads
//! or rewrites the other todos. A lifetime begun before that lists each
//! todo as added (or, for a loop written before todo streams, as last
//! changed there), and its stream, once it exists, holds the state that
//! counts. [`overlay`] composes the goal with its todos' streams for every
//! read, so nothing downstream sees two sources.
//!
//! Why this keeps the guarantees of one snapshot:
//! - every transition of one todo (claim, completion, ...) is a CAS on that
//!   todo's stream, so two of them never both land on the same base: no
//!   double claim, no completion beside someone's live lease;
//! - the rules are the goal owner's, applied through the same function
//!   (`owner::decide_todo`: the adoption fence, then `todo::decide`);
//! - the goal facts a todo decision reads (adoption, the todo's existence,
//!   the lifetime) are written only to the goal stream, and no goal write
//!   reads a todo's lease, so a todo decision on a goal snapshot that a
//!   concurrent objective revision has just superseded is ordered before
//!   that revision, as it would have been with one row.
//!
//! Owns the stream names, the todo owner and the composition. It does not
//! own any todo rule (`todo.rs`, `owner.rs`) or how streams are committed
//! (the store's authority).

use super::owner::{check_distinct_todos, decide_todo, receipt, transition_effect};
use super::todo::{EvidenceNote, Todo, TodoTransition};
use super::{
    input, Actor, Goal, GoalCommand, GoalContext, GoalError, GoalEvent, GoalOwner, GoalReceipt,
    GoalRequest,
};
use crate::operation::{Decided, Facet, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The stream of todo `todo_id` in goal lifetime `instance_id`. A successor
/// lifetime starts with no todos, so its streams are new ones. `/` is in no
/// id, so the name is unambiguous, and [`streams_of`] selects a lifetime's.
pub fn stream(instance_id: &str, todo_id: &str) -> String {
    format!("{}{todo_id}", streams_of(instance_id))
}

/// The common prefix of the todo streams of lifetime `instance_id`.
pub fn streams_of(instance_id: &str) -> String {
    format!("todo:{instance_id}/")
}

/// Whether `stream` names a todo stream (for audits).
pub fn is_todo_stream(stream: &str) -> bool {
    stream.starts_with("todo:")
}

/// The goal with each todo's live state from its stream, where it has one.
/// `live` are the states the streams hold. The todos a goal with todo
/// streams keeps only there follow the listed ones, in priority order;
/// for a goal without, ids it does not list are ignored (they cannot
/// exist: a todo stream is only written for a todo of the goal).
pub fn overlay(goal: &mut Goal, live: impl IntoIterator<Item = Todo>) {
    let listed: HashMap<String, usize> = goal
        .todos
        .iter()
        .enumerate()
        .map(|(index, todo)| (todo.id.clone(), index))
        .collect();
    let mut born = Vec::new();
    for state in live {
        match listed.get(&state.id) {
            Some(&index) => goal.todos[index] = state,
            None if goal.streamed_todos.is_some() && state.position.is_some() => born.push(state),
            None => {}
        }
    }
    // Sorted by reference, then moved once each: a todo is hundreds of
    // bytes, and a frontier thousands of todos.
    let mut order: Vec<(Option<u64>, usize)> = born
        .iter()
        .enumerate()
        .map(|(index, todo)| (todo.position, index))
        .collect();
    order.sort_unstable();
    let mut born: Vec<Option<Todo>> = born.into_iter().map(Some).collect();
    goal.todos.reserve(born.len());
    goal.todos.extend(
        order
            .into_iter()
            .filter_map(|(_, index)| born[index].take()),
    );
}

/// What a goal decision reads besides the goal snapshot: the clock, and
/// each todo's live state ([`overlay`]), for the rules that look at todos
/// (gaps, linked work, the work an adoption reviews).
pub struct ComposedContext<'t> {
    pub now: Timestamp,
    pub live: &'t [Todo],
}

/// The goal owner over the goal stream, deciding on the goal as composed
/// with its todos' streams. Same requests, events and fold as
/// [`GoalOwner`] (the journal is the goal's, audited by it); only what
/// `decide` sees differs.
pub struct ComposedGoalOwner;

impl Owner for ComposedGoalOwner {
    type State = Goal;
    type Request = GoalCommand;
    type Event = GoalEvent;
    type Receipt = GoalReceipt;
    type Error = GoalError;
    type Context<'a> = ComposedContext<'a>;

    fn expected_revision(command: &GoalCommand) -> Option<u64> {
        GoalOwner::expected_revision(command)
    }

    fn decide(
        state: Option<&Goal>,
        command: &GoalCommand,
        context: &ComposedContext<'_>,
    ) -> Result<Decided<GoalEvent, GoalReceipt>, GoalError> {
        let composed = state.map(|goal| {
            let mut goal = goal.clone();
            overlay(&mut goal, context.live.iter().cloned());
            goal
        });
        let context = GoalContext { now: context.now };
        GoalOwner::decide(composed.as_ref(), command, &context)
    }

    fn evolve(state: Option<Goal>, event: &GoalEvent) -> Goal {
        GoalOwner::evolve(state, event)
    }

    fn event_kind(event: &GoalEvent) -> &'static str {
        GoalOwner::event_kind(event)
    }
}

/// A writeback split by where each part is kept: the goal-level note (a
/// goal write, `Writeback` with no todos) and one todo request per named
/// todo (each a write to that todo's stream, with no note of its own).
/// `None` for any other request. Refuses a todo named twice, as the goal
/// owner does.
pub fn split_writeback(
    command: &GoalCommand,
) -> Result<Option<(GoalCommand, Vec<GoalCommand>)>, GoalError> {
    let GoalRequest::Writeback {
        note,
        evidence_refs,
        todos,
    } = &command.request
    else {
        return Ok(None);
    };
    check_distinct_todos(todos)?;
    let part = |request| GoalCommand {
        actor: command.actor.clone(),
        expected_instance: command.expected_instance.clone(),
        request,
        base_revision: None,
    };
    let goal_part = GoalCommand {
        base_revision: command.base_revision,
        ..part(GoalRequest::Writeback {
            note: note.clone(),
            evidence_refs: evidence_refs.clone(),
            todos: Vec::new(),
        })
    };
    let todo_parts = todos
        .iter()
        .map(|(id, action)| {
            part(GoalRequest::Todo {
                id: id.clone(),
                action: action.clone(),
                note: String::new(),
            })
        })
        .collect();
    Ok(Some((goal_part, todo_parts)))
}

/// What a todo stream's journal records: one transition and the note that
/// came with it. The first event of a stream carries the todo it started
/// from (as the goal snapshot held it), so the stream's journal alone folds
/// to its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TodoEvent {
    pub at: Timestamp,
    pub actor: Actor,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Todo>,
    pub transition: TodoTransition,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<EvidenceNote>,
}

/// What a todo decision reads besides the todo: the clock, and the goal
/// snapshot (its lifetime, the adoption fence, and the todo as added);
/// for the todo's first event in a goal with todo streams, the todo the
/// goal's decision added (`born`).
pub struct TodoContext<'g> {
    pub now: Timestamp,
    pub goal: &'g Goal,
    pub born: Option<&'g Todo>,
}

/// The owner of one todo's stream. Its request is the goal's
/// (`GoalRequest::Todo`), so a request digests the same wherever it is kept.
pub struct TodoOwner;

impl Owner for TodoOwner {
    type State = Todo;
    type Request = GoalCommand;
    type Event = TodoEvent;
    type Receipt = GoalReceipt;
    type Error = GoalError;
    type Context<'a> = TodoContext<'a>;

    /// A base revision names a goal revision (the dashboard's forms), not a
    /// todo stream's; todo transitions carry none. A todo's addition
    /// creates its stream: it expects none, so an addition that lost a race
    /// for the id is stale (decided again by the caller), not refused.
    fn expected_revision(command: &GoalCommand) -> Option<u64> {
        match command.request {
            GoalRequest::AddTodo { .. } => Some(0),
            _ => None,
        }
    }

    fn decide(
        state: Option<&Todo>,
        command: &GoalCommand,
        context: &TodoContext<'_>,
    ) -> Result<Decided<TodoEvent, GoalReceipt>, GoalError> {
        input::check(command)?;
        let goal = context.goal;
        if let (GoalRequest::AddTodo { id: Some(id), .. }, Some(born)) =
            (&command.request, context.born)
        {
            if state.is_some() || born.id != *id {
                return Err(GoalError::TodoExists { id: id.clone() });
            }
            let event = TodoEvent {
                at: context.now,
                actor: command.actor.clone(),
                from: Some(born.clone()),
                transition: TodoTransition::Added,
                note: None,
            };
            let receipt = receipt(goal, &["todo_added"]).with("todo_id", id);
            return Ok(Decided::write(event, receipt));
        }
        let GoalRequest::Todo { id, action, note } = &command.request else {
            return Err(GoalError::Invalid(
                "only a todo's addition or transition is kept in a todo's stream".into(),
            ));
        };
        if let Some(expected) = &command.expected_instance {
            if expected != &goal.instance_id {
                return Err(GoalError::LifetimeMismatch {
                    expected: expected.clone(),
                    current: goal.instance_id.clone(),
                });
            }
        }
        let added = goal.todo(id);
        let todo = state
            .or(added)
            .ok_or_else(|| GoalError::NoTodo { id: id.clone() })?;
        let (transition, note) =
            decide_todo(goal, todo, action, note, &command.actor, context.now)?;
        let event = TodoEvent {
            at: context.now,
            actor: command.actor.clone(),
            from: state.is_none().then(|| todo.clone()),
            transition,
            note,
        };
        let receipt = receipt(goal, &[transition_effect(action)]).with("todo_id", id);
        Ok(Decided::write(event, receipt))
    }

    fn evolve(state: Option<Todo>, event: &TodoEvent) -> Todo {
        let mut todo = state
            .or_else(|| event.from.clone())
            .expect("the first event of a todo stream carries the todo it started from");
        super::todo::evolve(&mut todo, &event.transition, event.at);
        if let Some(note) = &event.note {
            todo.evidence.push(note.clone());
        }
        todo
    }

    fn event_kind(event: &TodoEvent) -> &'static str {
        match event.transition {
            TodoTransition::Added => "todo.added",
            _ => "todo.changed",
        }
    }

    /// A todo kept in its stream from the start (it has a position) is
    /// indexed by the store: its status, what it waits on and who holds
    /// it, so that should-run finds the first runnable todo and counts
    /// the frontier without reading every todo. A todo the goal snapshot
    /// lists has none: its order is the listing's.
    fn facet(stream: &str, todo: &Todo) -> Option<Facet> {
        let family = &stream[..=stream.rfind('/')?];
        Some(Facet {
            family: family.to_owned(),
            position: todo.position?,
            class: todo.status.code(),
            due: todo.due(),
            holder: todo.claimant().map(str::to_owned),
        })
    }
}
