//! Many workers on one goal (`drive --workers N`) and the merge queue
//! they feed (`loopx queue list|retry|discard`).
//!
//! - [`pool`]: the run: N worker slots, each claiming a todo through the
//!   goal's leases, working it in its own git worktree through the one
//!   turn protocol (`crate::driver::turn`, as a [`WorkerTurn`]), and
//!   submitting its branch; the queue merged meanwhile.
//! - [`merge`]: one entry merged onto the target branch, checked, landed
//!   or undone; what a restart finds of a merge cut short.
//! - [`worktree`]: the branches and worktrees, made, reused and pruned.
//!
//! This file: the queue's reads and writes, the operator's use cases, and
//! what a worker's prompt adds to the task body. The queue's rules are its
//! owner's (`loopx_core::workers`).
//!
//! [`WorkerTurn`]: crate::driver::turn::WorkerTurn

pub mod merge;
pub mod pool;
pub mod worktree;

use crate::loop_dir::LoopDir;
use crate::{clock, AppError};
use anyhow::Result;
use loopx_core::operation::OperationId;
use loopx_core::workers::{
    Entry, EntryState, Queue, QueueOwner, QueueReceipt, QueueRequest, STREAM,
};
use loopx_store::Loaded;
use serde::Serialize;
use std::path::Path;

/// The shape of `queue list --json`.
pub const LIST_SCHEMA_VERSION: u32 = 1;
/// Entries on a page unless the caller asks for another size.
pub const PAGE_ENTRIES: usize = 50;

impl LoopDir {
    /// The merge queue (empty if no worker ever ran).
    pub fn queue(&self) -> Result<Queue> {
        let Loaded { state, .. } = self.authority().load::<QueueOwner>(STREAM)?;
        Ok(state.unwrap_or_default())
    }
}

/// This host's id for a worker run on `dir`: `asked` (`--host-id`), else
/// made from the machine's name and the loop directory's path
/// (`loopx_core::workers::host_id`). Refused when `asked` is not an id.
pub fn host(dir: &LoopDir, asked: Option<&str>) -> Result<String> {
    match asked {
        Some(id)
            if loopx_core::workers::component(id) == id && !id.is_empty() && id.len() <= 32 =>
        {
            Ok(id.to_owned())
        }
        Some(id) => Err(AppError::refused(format!(
            "--host-id {id:?} is not a host id: use 1-32 ASCII letters, digits, '_' or '-'"
        ))
        .into()),
        None => Ok(loopx_core::workers::host_id(
            &crate::platform::hostname(),
            &dir.root().display().to_string(),
        )),
    }
}

/// Commit `request` to the queue under `id`.
pub fn write(dir: &LoopDir, id: &OperationId, request: &QueueRequest) -> Result<QueueReceipt> {
    let now = clock::now();
    Ok(dir
        .authority()
        .execute::<QueueOwner>(STREAM, id, request, &now, now)?
        .body)
}

/// `name.detail`, an operation id made fresh for one write.
pub(crate) fn fresh_op(name: &str) -> Result<OperationId> {
    Ok(OperationId::parse(&crate::operation::fresh_name(name))?)
}

/// What a worker's turn is told beyond the task body: which todo is its,
/// where it works, and that the host, not the agent, merges.
pub fn prompt(task_body: &str, todo_id: &str, worktree: &Path) -> String {
    format!(
        "{task_body}\n\n## Worker\n\nYou are one of several workers on this goal. Your todo is {todo_id}: work on it only, in this git worktree ({}), on its branch. Finish it in this turn if you can. Commit or leave your changes in the worktree: the host commits what is left, and its merge queue merges the branch onto the target branch and runs the checks; do not merge, push or switch branches yourself. If you cannot finish it, block or defer the todo with a reason (`loopx todo block|defer`).\n",
        worktree.display()
    )
}

/// One page of the queue: the entries in flight (merge order first), then
/// the finished ones, newest first.
#[derive(Debug, Serialize)]
pub struct QueueList {
    pub schema_version: u32,
    pub entries: Vec<Entry>,
    /// How many entries the queue shows in all (in flight + remembered).
    pub total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub counts: Counts,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Counts {
    pub working: usize,
    pub queued: usize,
    pub merging: usize,
    pub needs_review: usize,
    /// Ever, not only those remembered.
    pub landed: u64,
    pub discarded: u64,
}

impl Counts {
    pub fn of(queue: &Queue) -> Counts {
        Counts {
            working: queue.count(EntryState::Working),
            queued: queue.count(EntryState::Queued),
            merging: queue.count(EntryState::Merging),
            needs_review: queue.count(EntryState::NeedsReview),
            landed: queue.landed,
            discarded: queue.discarded,
        }
    }
}

/// The queue's entries in the order a person reads them.
fn ordered(queue: &Queue) -> Vec<Entry> {
    let rank = |state: EntryState| match state {
        EntryState::Merging => 0,
        EntryState::Queued => 1,
        EntryState::NeedsReview => 2,
        EntryState::Working => 3,
        _ => 4,
    };
    let mut active: Vec<Entry> = queue.active.values().cloned().collect();
    active.sort_by_key(|e| (rank(e.state), e.position, e.todo_id.clone()));
    active.extend(queue.finished.iter().rev().cloned());
    active
}

/// One page of the queue, after `cursor` (an offset this gave), at most
/// `limit` entries. Read-only.
pub fn list(dir: &LoopDir, cursor: Option<&str>, limit: Option<usize>) -> Result<QueueList> {
    let queue = dir.queue()?;
    let all = ordered(&queue);
    let start = match cursor {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= all.len())
            .ok_or_else(|| {
                AppError::refused(format!(
                    "cursor {text:?} is not one `queue list` gave: list again without a cursor"
                ))
            })?,
    };
    let limit = limit.unwrap_or(PAGE_ENTRIES).clamp(1, 1000);
    let end = (start + limit).min(all.len());
    Ok(QueueList {
        schema_version: LIST_SCHEMA_VERSION,
        total: all.len(),
        next_cursor: (end < all.len()).then(|| end.to_string()),
        entries: all[start..end].to_vec(),
        counts: Counts::of(&queue),
    })
}

/// Put an entry that needs review back in line, as it is: the operator
/// has looked (or fixed the target) and wants it merged again.
pub fn retry(dir: &LoopDir, todo_id: &str, op: &OperationId) -> Result<QueueReceipt> {
    write(
        dir,
        op,
        &QueueRequest::Requeue {
            todo_id: todo_id.to_owned(),
            reason: "retried by the operator (loopx queue retry)".into(),
        },
    )
}

/// Throw an entry's work away: no merge; its worktree and branch removed
/// and its todo back on the frontier for a fresh start.
pub fn discard(
    dir: &LoopDir,
    todo_id: &str,
    reason: &str,
    op: &OperationId,
) -> Result<QueueReceipt> {
    let entry = dir.queue()?.active.get(todo_id).cloned().ok_or_else(|| {
        AppError::not_found(format!(
            "todo {todo_id} is not in flight in the merge queue"
        ))
    })?;
    let receipt = write(
        dir,
        op,
        &QueueRequest::Discard {
            todo_id: todo_id.to_owned(),
            reason: reason.to_owned(),
        },
    )?;
    // After the commit: a failure to clean up leaves an orphan the next
    // run prunes, never a discarded entry that still looks in flight.
    pool::release_to_frontier(
        dir,
        &entry,
        &format!("discarded from the merge queue: {reason}"),
    );
    // Its worktree is here when this host worked it last; the next run of
    // the host that did prunes it otherwise.
    if let Some(root) = worktree::repository_of(&worktree::path_of(dir, &entry)) {
        worktree::remove(dir, &root, &entry);
    }
    Ok(receipt)
}

/// The most hosts and workers' todos the overview lists.
const OVERVIEW_ROWS: usize = 32;

/// What `status`, its `--json` and the dashboard show of a worker run:
/// each host's driver, each worker's todo, and the queue. `None` from
/// [`overview`] for a loop no worker ever ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub hosts: Vec<HostDriver>,
    /// The todos workers have in their worktrees now, at most
    /// [`OVERVIEW_ROWS`]; `more_working` says how many are not listed.
    pub working: Vec<Working>,
    pub more_working: usize,
    pub queue: Counts,
    /// The entry being merged, if one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merging: Option<String>,
}

/// One host's worker driver, as its registration says.
#[derive(Debug, Clone, Serialize)]
pub struct HostDriver {
    pub host: String,
    /// Its pid while it is registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Whether that pid is alive here (another host's is not seen).
    pub running: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// A worker and the todo in its worktree.
#[derive(Debug, Clone, Serialize)]
pub struct Working {
    pub worker: String,
    pub todo_id: String,
    pub title: String,
    pub since: jiff::Timestamp,
}

impl Overview {
    /// One line for `status`.
    pub fn line(&self) -> String {
        let hosts: Vec<String> = (self.hosts.iter())
            .map(|h| match (h.pid, h.running) {
                (Some(pid), true) => format!("{} (pid {pid}, running)", h.host),
                (Some(pid), false) => format!("{} (pid {pid}, not seen here)", h.host),
                (None, _) => format!("{} (stopped)", h.host),
            })
            .collect();
        let working: Vec<String> = (self.working.iter())
            .map(|w| format!("{} by {}", w.todo_id, w.worker))
            .collect();
        let more = match self.more_working {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let q = &self.queue;
        format!(
            "hosts [{}]; working [{}{more}]; queue {} queued, {} merging, {} needs review, {} landed, {} discarded",
            hosts.join(", "),
            working.join(", "),
            q.queued,
            q.merging,
            q.needs_review,
            q.landed,
            q.discarded
        )
    }
}

/// The overview of the loop's worker runs. Read-only; bounded.
pub fn overview(dir: &LoopDir) -> Result<Option<Overview>> {
    let queue = dir.queue()?;
    let mut hosts = Vec::new();
    let registered = dir
        .authority()
        .store()
        .load_prefixed(loopx_core::workers::HOST_STREAMS)?;
    for (stream, snapshot) in registered.into_iter().take(OVERVIEW_ROWS) {
        let state: loopx_core::driver::DriverState = serde_json::from_str(&snapshot.state)?;
        let pid = state.registration.as_ref().map(|r| r.pid);
        hosts.push(HostDriver {
            host: stream
                .strip_prefix(loopx_core::workers::HOST_STREAMS)
                .unwrap_or(&stream)
                .to_owned(),
            pid,
            running: pid.is_some_and(crate::platform::alive),
            workspace: state.workspace_root,
        });
    }
    if hosts.is_empty() && queue.active.is_empty() && queue.finished.is_empty() {
        return Ok(None);
    }
    let mut working: Vec<Working> = (queue.active.values())
        .filter(|e| e.state == EntryState::Working)
        .map(|e| Working {
            worker: e.worker.clone(),
            todo_id: e.todo_id.clone(),
            title: e.title.clone(),
            since: e.updated_at,
        })
        .collect();
    working.sort_by_key(|w| w.since);
    let more_working = working.len().saturating_sub(OVERVIEW_ROWS);
    working.truncate(OVERVIEW_ROWS);
    Ok(Some(Overview {
        hosts,
        working,
        more_working,
        merging: queue.merging().map(|e| e.todo_id.clone()),
        queue: Counts::of(&queue),
    }))
}
