//! `snapshot list|show|diff` and `rollback`: parse, call
//! [`loopx_app::snapshot`], render.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::{Args, Subcommand};
use loopx_app::loop_dir::LoopDir;
use loopx_app::snapshot;
use loopx_core::driver::snapshot::TurnSnapshot;
use loopx_store::sqlite::Access;

/// The workspace snapshots `loopx drive --git-snapshot` takes: a git
/// commit of the project before and after each turn, on the refs
/// `refs/loopx/<run>/turns/<n>/before|after` (untracked files included,
/// `.gitignore` respected, the loop directory left out). The user's
/// branch, index, stash and working tree are never touched.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// One page of the snapshotted turns, oldest first: both commits and
    /// what changed (files, insertions, deletions).
    List(ListArgs),
    /// One turn's snapshot: its commits, trees, HEAD and refs.
    Show(TurnArgs),
    /// The patch one turn made to the workspace (at most 1 MiB).
    Diff(TurnArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// At most this many turns (1 to 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
    /// Start after the page that gave this `next_cursor`.
    #[arg(long)]
    pub cursor: Option<u64>,
}

#[derive(Debug, Args)]
pub struct TurnArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The turn's number, as `loopx snapshot list` shows it.
    pub turn: u64,
}

/// Restore the project's workspace to a turn's snapshot.
///
/// `--to N` restores the state after turn N; `--to 0` the state before
/// the first snapshotted turn. Only paths a snapshot holds are written or
/// removed: ignored files and the loop directory are never touched, and
/// the user's HEAD, branches and index stay as they are. Refused while the
/// working tree has changes loopx did not make (it differs from what loopx
/// last left), unless `--force`; either way the workspace as it was is
/// kept on `refs/loopx/<run>/rollbacks/<ms>` and the rollback is recorded
/// in the driver's journal. Refused while a driver runs the loop.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The turn whose after-snapshot to restore (0: before the first turn).
    #[arg(long)]
    pub to: u64,
    /// Print what would be written or removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Overwrite changes loopx did not make.
    #[arg(long)]
    pub force: bool,
}

fn line(s: &TurnSnapshot) -> String {
    format!(
        "turn {} (iteration {}, {}): {} -> {}  {}",
        s.turn,
        s.iteration,
        s.dispatch_id,
        &s.before[..s.before.len().min(12)],
        &s.after[..s.after.len().min(12)],
        s.stat.words()
    )
}

pub fn snapshot(command: &SnapshotCommand, store: Option<&str>) -> Result<Reply> {
    match command {
        SnapshotCommand::List(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
            let page = snapshot::list(&dir, args.limit as usize, args.cursor)?;
            let mut text: Vec<String> = page.snapshots.iter().map(line).collect();
            if page.total == 0 {
                text.push("no snapshots: `loopx drive` takes one before and after each turn in a git repository with a commit".into());
            }
            if let Some(next) = page.next_cursor {
                text.push(format!(
                    "{} of {}; the next page: loopx snapshot list --cursor {next}",
                    page.snapshots.len(),
                    page.total
                ));
            }
            Ok(Reply::ok(serde_json::to_value(&page)?, text.join("\n")))
        }
        SnapshotCommand::Show(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
            let view = snapshot::show(&dir, args.turn)?;
            let s = &view.snapshot;
            let text = format!(
                "{}\nbefore {} (tree {}) on {}\nafter  {} (tree {}) on {}\nHEAD   {}",
                line(s),
                s.before,
                s.before_tree,
                view.before_ref,
                s.after,
                s.after_tree,
                view.after_ref,
                s.head.as_deref().unwrap_or("none")
            );
            Ok(Reply::ok(serde_json::to_value(&view)?, text))
        }
        SnapshotCommand::Diff(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
            let view = snapshot::diff(&dir, args.turn)?;
            let mut text = view.patch.clone();
            if view.truncated {
                text.push_str(&format!(
                    "\n[the patch is longer than {} bytes and was cut here; `git diff-tree -p` of the turn's refs shows all of it]",
                    snapshot::PATCH_BYTES
                ));
            }
            if text.is_empty() {
                text = format!("turn {} changed nothing", view.turn);
            }
            Ok(Reply::ok(serde_json::to_value(&view)?, text))
        }
    }
}

pub fn rollback(args: &RollbackArgs, store: Option<&str>) -> Result<Reply> {
    let access = match args.dry_run {
        true => Access::ReadOnly,
        false => Access::ReadWrite,
    };
    let dir = LoopDir::open(args.dir.at(store), access)?;
    let view = snapshot::rollback(&dir, args.to, args.dry_run, args.force)?;
    let verb = match view.dry_run {
        true => "would restore",
        false => "restored",
    };
    let mut text = vec![format!(
        "{verb} the workspace to turn {} ({}): {} paths",
        view.to,
        &view.commit[..view.commit.len().min(12)],
        view.changes_total
    )];
    text.extend(
        view.changes
            .iter()
            .map(|c| format!("  {} {}", c.action, c.path)),
    );
    if view.changes_total > view.changes.len() {
        text.push(format!(
            "  … and {} more",
            view.changes_total - view.changes.len()
        ));
    }
    if let Some(saved) = &view.saved {
        text.push(format!("the workspace as it was is kept as commit {saved}"));
    }
    Ok(Reply::ok(serde_json::to_value(&view)?, text.join("\n")))
}
