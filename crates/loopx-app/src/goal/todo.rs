//! The todo frontier's use cases: add, list, claim, renew, release,
//! complete, block, defer. One function each; the lease and transition
//! rules are the goal owner's (`loopx_core::goal::todo`).

use super::{write, GoalReceiptView, GoalTarget};
use crate::clock;
use crate::loop_dir::LoopDir;
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::goal::todo::{Todo, TodoAction};
use loopx_core::goal::GoalRequest;
use loopx_core::operation::OperationId;
use serde::Serialize;

/// The frontier, in priority order, with leases.
#[derive(Debug, Serialize)]
pub struct TodoList {
    pub todos: Vec<Todo>,
    /// When it was read: who holds a lease, and for how long, is relative
    /// to this.
    #[serde(skip)]
    pub read_at: Timestamp,
}

/// The todos of goal `goal_id`. Read-only.
pub fn list(dir: &LoopDir, goal_id: &str) -> Result<TodoList> {
    Ok(TodoList {
        todos: dir.goal(goal_id)?.goal.todos,
        read_at: clock::now(),
    })
}

/// Add work after the existing todos; `id` defaults to the next `tN`.
pub fn add(
    dir: &LoopDir,
    target: &GoalTarget,
    id: Option<String>,
    title: String,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    write(dir, target, op, GoalRequest::AddTodo { id, title }, None)
}

/// One transition of todo `todo_id`, with an optional evidence note.
fn change(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    action: TodoAction,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    let request = GoalRequest::Todo {
        id: todo_id.to_owned(),
        action,
        note: note.to_owned(),
    };
    write(dir, target, op, request, None)
}

/// Take a lease for `ttl_seconds` (an expired lease may be taken over).
pub fn claim(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    ttl_seconds: u64,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(
        dir,
        target,
        todo_id,
        TodoAction::Claim { ttl_seconds },
        note,
        op,
    )
}

/// Extend the lease the actor holds.
pub fn renew(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    ttl_seconds: u64,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(
        dir,
        target,
        todo_id,
        TodoAction::Renew { ttl_seconds },
        note,
        op,
    )
}

/// Give back the lease the actor holds.
pub fn release(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(dir, target, todo_id, TodoAction::Release, note, op)
}

/// Finish a todo; final.
pub fn complete(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(dir, target, todo_id, TodoAction::Complete, note, op)
}

/// Mark a todo blocked, with the reason.
pub fn block(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    reason: String,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(dir, target, todo_id, TodoAction::Block { reason }, note, op)
}

/// Put a todo off for `seconds`.
pub fn defer(
    dir: &LoopDir,
    target: &GoalTarget,
    todo_id: &str,
    seconds: u64,
    note: &str,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    change(
        dir,
        target,
        todo_id,
        TodoAction::Defer { seconds },
        note,
        op,
    )
}
