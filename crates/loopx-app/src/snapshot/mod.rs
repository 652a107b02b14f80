//! Workspace snapshots: the project's tree committed before and after
//! each turn on loopx's refs, and what is done with them — `loopx
//! snapshot list|show|diff`, `loopx rollback`, a rejected candidate's
//! changes undone, and the comparison a restarted driver makes.
//!
//! Owns the use cases and their journal records (the driver's stream).
//! Not here: the rules (`loopx_core::driver::snapshot`), the git plumbing
//! ([`git`]), when in a run they happen (`crate::driver::run`/`turn`).

pub mod git;

use crate::driver::{op, take_lock, write};
use crate::loop_dir::LoopDir;
use crate::{clock, AppError};
use anyhow::{Context as _, Result};
use git::{Change, Workspace};
use loopx_core::driver::snapshot::{
    self, check_rollback, compare, ref_name, rollback_target, DiffStat, MarkedBy, Rollback,
    Setting, Side, TurnSnapshot, Verdict, WorkspaceMark,
};
use loopx_core::driver::{DriverEvent, DriverRequest};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The most changed paths a view lists (its total says how many there are).
pub const LISTED_PATHS: usize = 100;
/// The most of a patch `snapshot diff` prints.
pub const PATCH_BYTES: u64 = 1024 * 1024;

/// A run's snapshots: the work tree and the loop they are filed under.
pub struct Snapshots {
    workspace: Workspace,
    run_id: String,
}

/// Whether a drive run in `root` snapshots, as `setting` asks: the run's
/// snapshots, or none with the line that says why (`Err`: asked for and
/// impossible).
pub fn for_run(
    dir: &LoopDir,
    root: &Path,
    setting: Setting,
) -> Result<(Option<Snapshots>, Option<String>)> {
    let decision = snapshot::decide(setting, git::probe(root)).map_err(anyhow::Error::new)?;
    if !decision.on {
        return Ok((None, decision.note));
    }
    Ok((Some(Snapshots::open(dir, root)?), None))
}

impl Snapshots {
    /// The snapshots of the loop in `dir`, driven in `root`.
    pub fn open(dir: &LoopDir, root: &Path) -> Result<Snapshots> {
        let run_id = dir.read()?.ledger.run_id;
        let workspace = Workspace::open(root, &own_paths(dir))?;
        Ok(Snapshots { workspace, run_id })
    }

    /// Commit the workspace as turn `turn` begins (its `before` ref).
    pub fn before_turn(&self, turn: u64, dispatch_id: &str) -> Result<()> {
        let message = format!("loopx: workspace before turn {turn} ({dispatch_id})");
        self.workspace
            .snapshot_to(&ref_name(&self.run_id, turn, Side::Before), &message)?;
        Ok(())
    }

    /// Commit the workspace as turn `turn` ended (its `after` ref): both
    /// sides with what changed, for [`record`] to put in the journal.
    pub fn after_turn(&self, turn: u64, dispatch_id: &str, iteration: u64) -> Result<TurnSnapshot> {
        let before_ref = ref_name(&self.run_id, turn, Side::Before);
        let before = self
            .workspace
            .read_ref(&before_ref)
            .with_context(|| format!("the before snapshot {before_ref} is missing"))?;
        let before_tree = self.workspace.tree_of(&before)?;
        let message = format!("loopx: workspace after turn {turn} ({dispatch_id})");
        let git::Taken {
            commit: after,
            tree: after_tree,
            head,
        } = self
            .workspace
            .snapshot_to(&ref_name(&self.run_id, turn, Side::After), &message)?;
        let stat = self.workspace.stat(&before_tree, &after_tree)?;
        Ok(TurnSnapshot {
            turn,
            dispatch_id: dispatch_id.to_owned(),
            iteration,
            before,
            after,
            before_tree,
            after_tree,
            head,
            stat,
        })
    }

    /// The repository's top directory.
    pub fn top(&self) -> &Path {
        self.workspace.top()
    }

    /// The ref a turn's side is kept on.
    pub fn ref_of(&self, turn: u64, side: Side) -> String {
        ref_name(&self.run_id, turn, side)
    }

    /// A driver killed after its last turn settled but before that turn's
    /// after-snapshot was recorded: take it now, at the restart, so the
    /// turn's own changes are not mistaken for changes underneath.
    pub fn complete_interrupted(&self, dir: &LoopDir) -> Result<Option<TurnSnapshot>> {
        let state = dir.driver()?.1;
        let turn = state.dispatches;
        let recorded = state.last_snapshot.as_ref().is_some_and(|s| s.turn >= turn);
        let (Some(settled), false) = (state.recent.last(), recorded || turn == 0) else {
            return Ok(None);
        };
        if self
            .workspace
            .read_ref(&self.ref_of(turn, Side::Before))
            .is_none()
        {
            return Ok(None);
        }
        let snapshot = self.after_turn(turn, &settled.dispatch_id, settled.iteration)?;
        record(dir, &snapshot)?;
        Ok(Some(snapshot))
    }

    /// The workspace now against the one loopx last left.
    pub fn check(&self, dir: &LoopDir) -> Result<WorkspaceCheck> {
        let mark = dir.driver()?.1.workspace_left;
        check_against(&self.workspace, mark)
    }

    /// The operator's word: the workspace as found is the one to go on from.
    pub fn accept(&self, dir: &LoopDir, check: &WorkspaceCheck) -> Result<()> {
        let mark = WorkspaceMark {
            turn: check.mark.as_ref().map_or(0, |m| m.turn),
            tree: check.tree.clone(),
            head: check.head.clone(),
            by: MarkedBy::Accepted,
        };
        let id = format!("{}-{}", &check.tree, crate::platform::nonce());
        write(
            dir,
            &op("accept-workspace", &id)?,
            &DriverRequest::AcceptWorkspace { mark },
        )
    }

    /// Undo the workspace changes of the turn that staged a candidate the
    /// review rejected: back to that turn's `before` (its `after` ref keeps
    /// them). Only for the turn of `dispatch_id` (the last one), and only
    /// while the workspace is still what that turn left.
    pub fn undo_rejected(
        &self,
        dir: &LoopDir,
        dispatch_id: &str,
        fingerprint: &str,
    ) -> Result<String> {
        let state = dir.driver()?.1;
        let last = state.last_snapshot.filter(|s| s.dispatch_id == dispatch_id);
        let Some(turn) = last else {
            return Ok(format!(
                "its turn ({dispatch_id}) is not the last snapshotted one, so the workspace is left as it is"
            ));
        };
        let now = self.workspace.tree_now()?;
        if state.workspace_left.as_ref().map(|m| &m.tree) != Some(&turn.after_tree)
            || now != turn.after_tree
        {
            return Ok(format!(
                "the workspace changed since turn {} ended, so it is left as it is; `loopx rollback --to {}` undoes the turn",
                turn.turn,
                turn.turn.saturating_sub(1)
            ));
        }
        let (rollback, _) = restore(
            &self.workspace,
            &self.run_id,
            turn.turn.saturating_sub(1),
            (&turn.before, &turn.before_tree),
            &now,
            false,
            format!("candidate {fingerprint} rejected by review"),
        )?;
        record_rollback(dir, &self.workspace, &rollback)?;
        Ok(format!(
            "turn {}'s workspace changes undone ({} paths; kept on {})",
            turn.turn,
            rollback.paths,
            ref_name(&self.run_id, turn.turn, Side::After)
        ))
    }
}

/// Record a turn's snapshots in the driver's journal (retried under the
/// same operation id, so a lost reply replays).
pub fn record(dir: &LoopDir, snapshot: &TurnSnapshot) -> Result<()> {
    write(
        dir,
        &op("snapshot", &snapshot.dispatch_id)?,
        &DriverRequest::Snapshot {
            snapshot: Box::new(snapshot.clone()),
        },
    )
}

/// What loopx writes that a snapshot never holds, so a rollback never
/// rewinds it: the loop directory (the ledger, logs, views, tokens) and a
/// SQLite store kept elsewhere (`--store`), with its companion files.
fn own_paths(dir: &LoopDir) -> Vec<PathBuf> {
    let mut paths = vec![dir.root().to_path_buf()];
    let store = dir
        .store_override()
        .and_then(|text| loopx_store::Locator::parse(text).ok())
        .and_then(|locator| locator.sqlite_path().map(Path::to_path_buf));
    if let Some(file) = store {
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut companion = file.clone().into_os_string();
            companion.push(suffix);
            paths.push(companion.into());
        }
        paths.push(file);
    }
    paths
}

/// The workspace now against `mark`, with what differs.
fn check_against(workspace: &Workspace, mark: Option<WorkspaceMark>) -> Result<WorkspaceCheck> {
    // Nothing to compare with: the workspace is not even read.
    if mark.is_none() {
        return Ok(WorkspaceCheck {
            verdict: Verdict::Unknown,
            mark,
            tree: String::new(),
            head: None,
            stat: None,
            changes: Vec::new(),
            changes_total: 0,
        });
    }
    let tree = workspace.tree_now()?;
    let head = workspace.head();
    let verdict = compare(mark.as_ref(), &tree, head.as_deref());
    let (stat, changes) = match (&verdict, &mark) {
        (Verdict::Changed { files: true, .. }, Some(mark)) => (
            Some(workspace.stat(&mark.tree, &tree)?),
            workspace.changes(&tree, &mark.tree)?,
        ),
        _ => (None, Vec::new()),
    };
    Ok(WorkspaceCheck {
        verdict,
        changes_total: changes.len(),
        changes: changes.into_iter().take(LISTED_PATHS).collect(),
        mark,
        tree,
        head,
        stat,
    })
}

/// The workspace against the one loopx last left, for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkspaceCheck {
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What loopx last left (absent before the first snapshot).
    pub mark: Option<WorkspaceMark>,
    /// The tree and HEAD now.
    pub tree: String,
    pub head: Option<String>,
    pub stat: Option<DiffStat>,
    /// The first [`LISTED_PATHS`] changed paths, as restoring the mark
    /// would treat them.
    pub changes: Vec<Change>,
    pub changes_total: usize,
}

impl WorkspaceCheck {
    pub fn changed(&self) -> bool {
        matches!(self.verdict, Verdict::Changed { .. })
    }

    /// One sentence: unchanged, or how it changed.
    pub fn sentence(&self) -> String {
        let turn = self.mark.as_ref().map_or(0, |m| m.turn);
        match self.verdict {
            Verdict::Unknown => "no workspace snapshot yet".into(),
            Verdict::Unchanged => format!("the workspace is as loopx left it (turn {turn})"),
            Verdict::Changed { files, head } => {
                let mut what = Vec::new();
                if files {
                    let stat = self.stat.unwrap_or_default().words();
                    let paths: Vec<&str> = self
                        .changes
                        .iter()
                        .take(5)
                        .map(|c| c.path.as_str())
                        .collect();
                    what.push(format!("its files ({stat}: {})", paths.join(", ")));
                }
                if head {
                    what.push(format!(
                        "HEAD ({} -> {})",
                        short(self.mark.as_ref().and_then(|m| m.head.as_deref())),
                        short(self.head.as_deref())
                    ));
                }
                format!(
                    "the workspace changed underneath since loopx left it after turn {turn}: {}",
                    what.join(" and ")
                )
            }
        }
    }
}

fn short(commit: Option<&str>) -> &str {
    commit.map_or("none", |c| &c[..c.len().min(12)])
}

/// The workspace check `loopx recover` shows: `None` when the loop has no
/// snapshot or its project is no git work tree any more.
pub fn recovery_check(dir: &LoopDir) -> Option<WorkspaceCheck> {
    let state = dir.driver().ok()?.1;
    let mark = state.workspace_left.clone()?;
    let root = state.workspace_root?;
    let workspace = Workspace::open(Path::new(&root), &own_paths(dir)).ok()?;
    check_against(&workspace, Some(mark)).ok()
}

/// Every turn snapshot the journal records, oldest first.
pub fn recorded(dir: &LoopDir) -> Result<Vec<TurnSnapshot>, AppError> {
    let mut snapshots = Vec::new();
    dir.authority()
        .store()
        .journal_rows(loopx_core::driver::STREAM, 0, &mut |row| {
            if let Ok(DriverEvent::Snapshotted { snapshot }) = serde_json::from_str(row.event) {
                snapshots.push(*snapshot);
            }
            Ok(())
        })
        .map_err(anyhow::Error::new)?;
    Ok(snapshots)
}

/// One page of the loop's snapshots.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotPage {
    pub status: &'static str,
    pub snapshots: Vec<TurnSnapshot>,
    pub total: usize,
    /// The cursor of the next page (the last turn shown), if there is one.
    pub next_cursor: Option<u64>,
}

/// The snapshots after turn `cursor`, at most `limit`.
pub fn list(dir: &LoopDir, limit: usize, cursor: Option<u64>) -> Result<SnapshotPage, AppError> {
    let all = recorded(dir)?;
    let total = all.len();
    let after = cursor.unwrap_or(0);
    let rest: Vec<TurnSnapshot> = all.into_iter().filter(|s| s.turn > after).collect();
    let more = rest.len() > limit;
    let snapshots: Vec<TurnSnapshot> = rest.into_iter().take(limit).collect();
    let next_cursor = more.then(|| snapshots.last().map(|s| s.turn)).flatten();
    Ok(SnapshotPage {
        status: "ok",
        snapshots,
        total,
        next_cursor,
    })
}

/// The snapshot of turn `turn`, with its refs.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotView {
    pub status: &'static str,
    #[serde(flatten)]
    pub snapshot: TurnSnapshot,
    pub before_ref: String,
    pub after_ref: String,
}

pub fn show(dir: &LoopDir, turn: u64) -> Result<SnapshotView, AppError> {
    let snapshot = find(dir, turn)?;
    let run_id = dir.read()?.ledger.run_id;
    Ok(SnapshotView {
        status: "ok",
        before_ref: ref_name(&run_id, turn, Side::Before),
        after_ref: ref_name(&run_id, turn, Side::After),
        snapshot,
    })
}

fn find(dir: &LoopDir, turn: u64) -> Result<TurnSnapshot, AppError> {
    let all = recorded(dir)?;
    all.iter()
        .rev()
        .find(|s| s.turn == turn)
        .cloned()
        .ok_or_else(|| {
            AppError::not_found(format!(
                "no snapshot of turn {turn} ({} recorded): `loopx snapshot list --dir {}` shows them",
                all.len(),
                dir.display()
            ))
        })
}

/// The patch a turn made to the workspace.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotDiff {
    pub status: &'static str,
    pub turn: u64,
    pub stat: DiffStat,
    pub patch: String,
    /// The patch was longer than [`PATCH_BYTES`] and is cut there.
    pub truncated: bool,
}

pub fn diff(dir: &LoopDir, turn: u64) -> Result<SnapshotDiff, AppError> {
    let snapshot = find(dir, turn)?;
    let workspace = driven_workspace(dir)?;
    let (patch, truncated) =
        workspace.patch(&snapshot.before_tree, &snapshot.after_tree, PATCH_BYTES)?;
    Ok(SnapshotDiff {
        status: "ok",
        turn,
        stat: snapshot.stat,
        patch,
        truncated,
    })
}

/// The work tree this loop's driver ran in.
fn driven_workspace(dir: &LoopDir) -> Result<Workspace, AppError> {
    let root = dir.driver()?.1.workspace_root.ok_or_else(|| {
        AppError::refused("this loop was never driven, so it has no workspace snapshots")
    })?;
    Ok(Workspace::open(Path::new(&root), &own_paths(dir))?)
}

/// What `loopx rollback` did, or would do.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackView {
    pub status: &'static str,
    pub dry_run: bool,
    pub to: u64,
    /// The snapshot restored.
    pub commit: String,
    pub forced: bool,
    /// The first [`LISTED_PATHS`] paths written or removed.
    pub changes: Vec<Change>,
    pub changes_total: usize,
    /// The commit keeping the workspace as it was (absent in a dry run).
    pub saved: Option<String>,
}

/// Restore the workspace of the loop in `dir` to the state after turn
/// `to` (0: before the first snapshotted turn), refusing over changes
/// loopx did not make unless `force`; `dry_run` only says what it would do.
pub fn rollback(dir: &LoopDir, to: u64, dry_run: bool, force: bool) -> Result<RollbackView> {
    // No driver may run a turn meanwhile.
    let _lock = match dry_run {
        true => None,
        false => Some(take_lock(dir)?),
    };
    let state = dir.driver()?.1;
    let snapshots = recorded(dir)?;
    let target = rollback_target(&snapshots, to).map_err(refused)?;
    let workspace = driven_workspace(dir)?;
    let now = workspace.tree_now()?;
    check_rollback(
        state.workspace_left.as_ref(),
        &now,
        |mark| {
            workspace
                .stat(mark, &now)
                .map(|s| s.words())
                .unwrap_or_else(|e| format!("{e:#}"))
        },
        force,
    )
    .map_err(refused)?;
    let view = |changes: Vec<Change>, saved: Option<String>| RollbackView {
        status: "ok",
        dry_run,
        to,
        commit: target.commit.clone(),
        forced: force,
        changes_total: changes.len(),
        changes: changes.into_iter().take(LISTED_PATHS).collect(),
        saved,
    };
    if dry_run {
        return Ok(view(workspace.changes(&now, &target.tree)?, None));
    }
    let run_id = dir.read()?.ledger.run_id;
    let reason = format!(
        "loopx rollback --to {to}{}",
        if force { " --force" } else { "" }
    );
    let (rollback, changes) = restore(
        &workspace,
        &run_id,
        to,
        (&target.commit, &target.tree),
        &now,
        force,
        reason,
    )?;
    record_rollback(dir, &workspace, &rollback)?;
    Ok(view(changes, Some(rollback.saved.clone())))
}

fn refused(error: snapshot::RollbackRefused) -> anyhow::Error {
    anyhow::Error::new(AppError::refused(error.to_string()))
}

/// Keep the workspace as it is on a ref of its own, then restore
/// `target`: the rollback to record, and the paths it wrote or removed.
fn restore(
    workspace: &Workspace,
    run_id: &str,
    to: u64,
    (commit, tree): (&str, &str),
    now: &str,
    forced: bool,
    reason: String,
) -> Result<(Rollback, Vec<Change>)> {
    let head = workspace.head();
    let saved = workspace.commit(
        now,
        head.as_deref(),
        &format!("loopx: workspace before rollback to turn {to}"),
    )?;
    let name = format!(
        "refs/loopx/{run_id}/rollbacks/{}",
        clock::now().as_millisecond()
    );
    workspace.set_ref(&name, &saved)?;
    let changes = workspace.restore(tree, now)?;
    // Killed here, the journal still names the old workspace: the next
    // rollback or drive sees a change loopx did not record, and says so.
    loopx_store::failpoint::reached("rollback.restored");
    let rollback = Rollback {
        to,
        commit: commit.to_owned(),
        tree: tree.to_owned(),
        saved,
        paths: changes.len() as u64,
        forced,
        reason,
    };
    Ok((rollback, changes))
}

fn record_rollback(dir: &LoopDir, workspace: &Workspace, rollback: &Rollback) -> Result<()> {
    write(
        dir,
        &op("rollback", &rollback.saved)?,
        &DriverRequest::RollBack {
            rollback: Box::new(rollback.clone()),
            head: workspace.head(),
        },
    )
}
