//! The todo frontier's use cases: add (one, or a batch from a file), list,
//! claim, renew, release, complete, block, defer. One function each; the
//! lease and transition rules are the goal owner's
//! (`loopx_core::goal::todo`).

use super::{write, GoalReceiptView, GoalTarget};
use crate::clock;
use crate::loop_dir::LoopDir;
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::goal::todo::{Todo, TodoAction};
use loopx_core::goal::{GoalRequest, NewTodo};
use loopx_core::operation::OperationId;
use serde::Serialize;

/// The shape of `todo list --json`: 2 since it is one page (1: every
/// todo, unversioned).
pub const LIST_SCHEMA_VERSION: u32 = 2;
/// Todos on a page unless the caller asks for another size.
pub const PAGE_TODOS: usize = 100;
/// The largest page a caller may ask for.
pub const MAX_PAGE_TODOS: usize = 1000;

/// One page of the frontier, in priority order, with leases.
#[derive(Debug, Serialize)]
pub struct TodoList {
    pub schema_version: u32,
    pub todos: Vec<Todo>,
    /// How many todos the goal has.
    pub total: usize,
    /// Pass it as the cursor to read the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Where this page starts (0-based), for people.
    #[serde(skip)]
    pub start: usize,
    /// When it was read: who holds a lease, and for how long, is relative
    /// to this.
    #[serde(skip)]
    pub read_at: Timestamp,
}

/// Which page: after the todos a cursor names (from the start without
/// one), at most `limit` todos.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub cursor: Option<String>,
    pub limit: Option<usize>,
}

/// A cursor names a goal lifetime and how many of its todos came before:
/// todos are only ever appended, so a later page never skips or repeats
/// one, and a cursor from another lifetime is refused.
fn cursor(instance_id: &str, start: usize) -> String {
    format!("{instance_id}@{start}")
}

/// Where `cursor` starts in lifetime `instance_id` of `total` todos.
fn start_of(cursor: &str, instance_id: &str, total: usize) -> Result<usize> {
    let refused = |why: String| -> anyhow::Error {
        crate::AppError::refused(format!(
            "cursor {cursor:?} {why}: list again without a cursor"
        ))
        .into()
    };
    let (instance, start) = cursor
        .rsplit_once('@')
        .ok_or_else(|| refused("is not one `todo list` gave".into()))?;
    let start: usize = start
        .parse()
        .map_err(|_| refused("is not one `todo list` gave".into()))?;
    if instance != instance_id {
        return Err(refused(format!(
            "is for goal instance {instance}, not the current {instance_id}"
        )));
    }
    if start > total {
        return Err(refused(format!("is past the goal's {total} todos")));
    }
    Ok(start)
}

/// One page of the todos of goal `goal_id`. Read-only.
pub fn list(dir: &LoopDir, goal_id: &str, page: &Page) -> Result<TodoList> {
    let limit = page.limit.unwrap_or(PAGE_TODOS);
    if !(1..=MAX_PAGE_TODOS).contains(&limit) {
        return Err(crate::AppError::refused(format!(
            "a page holds 1 to {MAX_PAGE_TODOS} todos, not {limit}"
        ))
        .into());
    }
    let goal = dir.goal(goal_id)?.goal;
    let total = goal.todos.len();
    let start = match &page.cursor {
        Some(cursor) => start_of(cursor, &goal.instance_id, total)?,
        None => 0,
    };
    let end = (start + limit).min(total);
    let mut todos = goal.todos;
    todos.truncate(end);
    todos.drain(..start);
    Ok(TodoList {
        schema_version: LIST_SCHEMA_VERSION,
        todos,
        total,
        next_cursor: (end < total).then(|| cursor(&goal.instance_id, end)),
        start,
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

/// Add every todo of a batch after the existing todos, in order, under
/// one operation id: all of them or, if any row is refused, none (the
/// refusal names the row).
pub fn add_batch(
    dir: &LoopDir,
    target: &GoalTarget,
    todos: Vec<NewTodo>,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    write(dir, target, op, GoalRequest::AddTodos { todos }, None)
}

/// The todos a batch file lists: a JSON array of todos, or JSON lines (one
/// todo per line; blank lines are refused, so row N is line N). Each todo
/// is an object with the fields `todo add` takes: `title`, and `id` if
/// you choose it; any other field is refused. Read no further than the
/// batch limit. Refusals name the row and write nothing.
pub fn read_batch(path: &std::path::Path) -> Result<Vec<NewTodo>> {
    use loopx_core::text::limits;
    let bytes = crate::fsutil::read_bounded(path, limits::TODO_BATCH_BYTES)?;
    let file = path.display();
    let refused = |message: String| crate::AppError::refused(format!("{file}: {message}"));
    let text = std::str::from_utf8(&bytes).map_err(|e| refused(format!("not UTF-8: {e}")))?;
    if text.trim_start().starts_with('[') {
        let rows: Vec<serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| refused(format!("not a JSON array of todos: {e}")))?;
        return rows
            .into_iter()
            .enumerate()
            .map(|(index, row)| {
                serde_json::from_value(row).map_err(|e| {
                    refused(format!(
                        "row {}: not a todo ({{\"title\", \"id\"?}}): {e}; nothing was added",
                        index + 1
                    ))
                    .into()
                })
            })
            .collect();
    }
    let lines = text.strip_suffix('\n').unwrap_or(text);
    if lines.trim().is_empty() {
        return Err(refused(
            "lists no todos: write a JSON array or one JSON object per line".into(),
        )
        .into());
    }
    lines
        .split('\n')
        .enumerate()
        .map(|(index, line)| {
            let row = index + 1;
            if line.trim().is_empty() {
                return Err(refused(format!("row {row} (line {row}) is blank: a JSON-lines file has one todo per line; nothing was added")).into());
            }
            serde_json::from_str(line).map_err(|e| {
                refused(format!("row {row} (line {row}): not a todo ({{\"title\", \"id\"?}}): {e}; nothing was added")).into()
            })
        })
        .collect()
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
