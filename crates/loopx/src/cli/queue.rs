//! `queue list|retry|discard`: parse, call [`loopx_app::workers`], render.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::{Args, Subcommand};
use loopx_app::loop_dir::LoopDir;
use loopx_app::workers;
use loopx_core::workers::Entry;
use loopx_store::sqlite::Access;

/// The merge queue of `loopx drive --workers N`: each worker's finished
/// todo waits here (queued), is merged onto the target branch with the
/// configured checks run on the result (merging), and lands (the target
/// advances, the todo completes with the merge commit as evidence) or is
/// undone (needs-review: the todo back on the frontier with the reason,
/// its worktree kept; workers take it up again up to 3 times, then it
/// waits for `retry` or `discard`).
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// One page of the queue: in flight first (merging, queued in merge
    /// order, needs-review, working), then the latest landed and
    /// discarded; with counts.
    List(ListArgs),
    /// Put an entry that needs review back in line, as it is; or a merge
    /// whose driver died (another host's, unreachable) to be merged again.
    Retry(TodoArgs),
    /// Throw an entry's work away: no merge, its worktree and branch
    /// removed, its todo back on the frontier for a fresh start.
    Discard(DiscardArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// At most this many entries (1 to 1000).
    #[arg(long, default_value_t = workers::PAGE_ENTRIES as u64, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
    /// Start after the page that gave this `next_cursor`.
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct TodoArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The todo whose entry it is.
    pub todo: String,
    /// A stable id for this write: a retry with the same id replays.
    #[arg(long)]
    pub operation_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct DiscardArgs {
    #[command(flatten)]
    pub todo: TodoArgs,
    /// Why it is thrown away (kept in the queue's history).
    #[arg(long)]
    pub reason: String,
}

fn line(entry: &Entry) -> String {
    let mut line = format!(
        "{:<12} {}  {}  ({}, {})",
        entry.state.as_str(),
        entry.todo_id,
        loopx_core::text::printable(&entry.title),
        entry.branch,
        entry.worker
    );
    if let Some(commit) = &entry.merge_commit {
        line.push_str(&format!(" as {}", &commit[..commit.len().min(12)]));
    }
    if let Some(reason) = &entry.reason {
        line.push_str(&format!(
            "\n             {}",
            loopx_core::text::printable(reason)
        ));
    }
    line
}

fn operation(args: &TodoArgs, name: &str) -> Result<loopx_core::operation::OperationId> {
    Ok(match &args.operation_id {
        Some(id) => loopx_core::operation::OperationId::parse(id)?,
        None => loopx_core::operation::OperationId::parse(&loopx_app::operation::fresh_name(name))?,
    })
}

pub fn queue(command: &QueueCommand, store: Option<&str>) -> Result<Reply> {
    match command {
        QueueCommand::List(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
            let page = workers::list(&dir, args.cursor.as_deref(), Some(args.limit as usize))?;
            let c = &page.counts;
            let mut text = vec![format!(
                "merge queue: {} working, {} queued, {} merging, {} needs review, {} landed, {} discarded",
                c.working, c.queued, c.merging, c.needs_review, c.landed, c.discarded
            )];
            text.extend(page.entries.iter().map(line));
            if let Some(next) = &page.next_cursor {
                text.push(format!(
                    "{} of {}; the next page: loopx queue list --cursor {next}",
                    page.entries.len(),
                    page.total
                ));
            }
            Ok(Reply::ok(serde_json::to_value(&page)?, text.join("\n")))
        }
        QueueCommand::Retry(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
            let receipt = workers::retry(&dir, &args.todo, &operation(args, "queue-retry")?)?;
            Ok(Reply::ok(
                serde_json::to_value(&receipt)?,
                format!(
                    "todo {} is {} again",
                    receipt.todo_id,
                    receipt.state.as_str()
                ),
            ))
        }
        QueueCommand::Discard(args) => {
            let todo = &args.todo;
            let dir = LoopDir::open(todo.dir.at(store), Access::ReadWrite)?;
            let receipt = workers::discard(
                &dir,
                &todo.todo,
                &args.reason,
                &operation(todo, "queue-discard")?,
            )?;
            Ok(Reply::ok(
                serde_json::to_value(&receipt)?,
                format!(
                    "todo {} discarded from the merge queue; its worktree and branch are removed and the todo is back on the frontier",
                    receipt.todo_id
                ),
            ))
        }
    }
}
