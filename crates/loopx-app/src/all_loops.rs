//! The all-loops view: every loop this user registered on this machine
//! (armed, or run by a driver here), one row each with its health line,
//! last activity and spend against its budgets, for `loopx serve --all`.
//!
//! Owns: grouping registry entries into one row per loop directory, the
//! row's id (what the dashboard's links name), judging whether a
//! registered directory may be opened at all (it must still exist, be this
//! user's and resolve to itself, so an entry cannot lead the server into
//! someone else's directory or through a symlink), and recording that a
//! driver runs a loop. A loop that is gone, unreadable or not this user's
//! is a row that says so; nothing here fails the whole view.
//!
//! Does not own: the registry's files and which of them are trusted
//! (`crate::registry`), the health ranking (`crate::health`), budgets
//! (`crate::cost`) or turns (`crate::turns`).

use crate::error::AppError;
use crate::health::{self, Health};
use crate::loop_dir::LoopDir;
use crate::platform::effective_uid;
use crate::registry::{NotedLoop, Registry, Source};
use crate::{clock, cost, platform, turns};
use jiff::Timestamp;
use loopx_core::cost::BudgetLine;
use loopx_core::digest::Digest;
use loopx_core::driver;
use loopx_core::goal::{self, Actor};
use loopx_store::sqlite::Access;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Every registered loop, one row per loop directory.
#[derive(Debug, Clone, Serialize)]
pub struct AllLoops {
    pub status: &'static str,
    /// 2: `loops` is a page (`start`, `next`); 1 listed every loop.
    pub schema_version: u32,
    /// The registry read.
    pub registry: String,
    /// Every registered loop, on this page or not.
    pub count: usize,
    /// The position of this page's first loop.
    pub start: usize,
    pub loops: Vec<LoopRow>,
    /// Pass as `start` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<usize>,
    /// Registry files and directories that were not trusted, and why.
    pub passed_over: Vec<String>,
}

/// Whether a registered loop could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    Readable,
    /// The directory, or the loop in it, no longer exists.
    Gone,
    /// It exists but could not be read (a symlink, a broken store...).
    Unreadable,
    /// It belongs to another user: never opened.
    NotYours,
}

/// One loop on the all-loops page.
#[derive(Debug, Clone, Serialize)]
pub struct LoopRow {
    /// Stable for the loop directory: the page links to `/loops/<id>/`.
    pub id: String,
    pub run_id: String,
    pub loop_dir: String,
    /// How it was registered: armed, driven or both.
    pub sources: Vec<Source>,
    pub reach: Reach,
    /// Why it is not readable, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The loop's goal as `init` recorded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    /// The latest ledger write or driver turn start or end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<Timestamp>,
    /// Spend against each budget, as the loop's own dashboard bars it.
    pub budgets: Vec<BudgetLine>,
}

/// The id of the loop at `loop_dir`: short, URL-safe and fixed for the
/// directory (two directories with a copied run id stay apart).
pub fn id_of(loop_dir: &str) -> String {
    let digest = Digest::of_bytes(loop_dir.as_bytes());
    let hex = digest.as_str().trim_start_matches("sha256:");
    hex.chars().take(16).collect()
}

/// Loops a page shows by default, and at most.
pub const LOOPS_PAGE: usize = 50;
pub const MAX_LOOPS_PAGE: usize = 500;

/// The registered loops from position `start`, at most `limit` of them
/// (clamped to 1..=[`MAX_LOOPS_PAGE`]), each read now: only the loops on
/// the page are opened. `store`: where their state is when not in each
/// directory's own file (as `--store` names it).
pub fn all_loops(registry: &Registry, store: Option<&str>, start: usize, limit: usize) -> AllLoops {
    let listing = registry.listing();
    let mut loops: Vec<LoopRow> = Vec::new();
    for entry in listing.entries {
        if let Some(row) = loops.iter_mut().find(|r| r.loop_dir == entry.loop_dir) {
            if !row.sources.contains(&entry.source) {
                row.sources.push(entry.source);
            }
            continue;
        }
        loops.push(LoopRow {
            id: id_of(&entry.loop_dir),
            run_id: entry.run_id,
            loop_dir: entry.loop_dir,
            sources: vec![entry.source],
            reach: Reach::Readable,
            problem: None,
            goal: None,
            health: None,
            last_activity: None,
            budgets: Vec::new(),
        });
    }
    let count = loops.len();
    let start = start.min(count);
    let end = start
        .saturating_add(limit.clamp(1, MAX_LOOPS_PAGE))
        .min(count);
    loops.truncate(end);
    loops.drain(..start);
    for row in &mut loops {
        read_row(row, registry, store);
    }
    AllLoops {
        status: "ok",
        schema_version: 2,
        registry: registry.display(),
        count,
        start,
        next: (end < count).then_some(end),
        loops,
        passed_over: listing.passed_over,
    }
}

/// The loop directory the row `id` names, if it is registered and may be
/// opened; not found otherwise, naming what to do.
pub fn find(registry: &Registry, id: &str) -> Result<PathBuf, AppError> {
    let listing = registry.listing();
    let entry = listing
        .entries
        .iter()
        .find(|e| id_of(&e.loop_dir) == id)
        .ok_or_else(|| {
            AppError::not_found(format!(
                "no registered loop has the id {id:?}: open the all-loops page for the current list"
            ))
        })?;
    let dir = PathBuf::from(&entry.loop_dir);
    match may_open(&dir) {
        Ok(()) => Ok(dir),
        Err((_, problem)) => Err(AppError::not_found(format!(
            "the loop {id} at {}: {problem}",
            entry.loop_dir
        ))),
    }
}

/// Record in this user's registry that `source` (`init`, a driver) noted
/// the loop `run_id` in `dir`, so the all-loops page lists it. A registry
/// that cannot be written costs that listing, never the caller's work:
/// the answer is the warning to pass on, if any.
pub fn note(dir: &LoopDir, run_id: &str, source: Source) -> Option<String> {
    let noted = Registry::from_env().and_then(|registry| {
        registry.note(
            source,
            &NotedLoop {
                run_id: run_id.to_owned(),
                loop_dir: dir.display(),
                noted_at: clock::now(),
            },
        )
    });
    noted.err().map(|error| {
        format!(
            "cannot record this loop in the registry ({error:#}); `loopx serve --all` will not list it"
        )
    })
}

/// Whether the registered directory `dir` may be opened: it exists, is a
/// directory of this user's, and resolves to itself (no symlink anywhere
/// on its path), so a registry entry cannot point the reader at another
/// user's loop or through a link planted since it was registered.
fn may_open(dir: &Path) -> Result<(), (Reach, String)> {
    use std::os::unix::fs::MetadataExt as _;
    if !dir.is_absolute() {
        return Err((
            Reach::Unreadable,
            "the registry entry is not an absolute path: disarm it or remove its file".into(),
        ));
    }
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err((Reach::Gone, "the directory is gone".into()))
        }
        Err(e) => return Err((Reach::Unreadable, format!("cannot stat it ({e})"))),
    };
    let me = effective_uid();
    if meta.uid() != me {
        return Err((
            Reach::NotYours,
            format!(
                "it belongs to uid {}, not to this user (uid {me}): not opened",
                meta.uid()
            ),
        ));
    }
    if !meta.is_dir() {
        return Err((
            Reach::Unreadable,
            "it is not a directory (a symlink is not followed)".into(),
        ));
    }
    match dir.canonicalize() {
        Ok(resolved) if resolved == dir => Ok(()),
        Ok(resolved) => Err((
            Reach::Unreadable,
            format!(
                "its path now resolves through a symlink to {}: not followed",
                resolved.display()
            ),
        )),
        Err(e) => Err((Reach::Unreadable, format!("cannot resolve it ({e})"))),
    }
}

/// Fill `row` from its loop, or say why it cannot be.
fn read_row(row: &mut LoopRow, registry: &Registry, store: Option<&str>) {
    let dir = Path::new(&row.loop_dir);
    if let Err((reach, problem)) = may_open(dir) {
        row.reach = reach;
        row.problem = Some(if reach == Reach::Gone {
            format!(
                "{problem}; to drop it from this list: {}",
                forget(row, registry)
            )
        } else {
            problem
        });
        return;
    }
    let read = LoopDir::open(crate::loop_dir::Place::new(dir, store), Access::ReadOnly)
        .map_err(AppError::from)
        .and_then(|loop_dir| read_loop(&loop_dir, row));
    if let Err(error) = read {
        row.reach = if error.class == crate::ErrorClass::NotFound {
            Reach::Gone
        } else {
            Reach::Unreadable
        };
        row.problem = Some(error.message);
    }
}

/// The commands that remove a loop's registry entries.
fn forget(row: &LoopRow, registry: &Registry) -> String {
    row.sources
        .iter()
        .map(|source| match source {
            Source::Armed => format!("loopx disarm --run-id {}", row.run_id),
            noted => format!("rm {}", registry.noted_entry(*noted, &row.run_id).display()),
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

fn read_loop(dir: &LoopDir, row: &mut LoopRow) -> Result<(), AppError> {
    let turn = dir.next_turn(goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
    let summary = driver::summary(&dir.driver()?.1, platform::alive);
    let now = clock::now();
    let newest = turns::page(dir, None, 1)?;
    let ledger = &turn.reading.ledger;
    row.run_id = ledger.run_id.clone();
    row.goal = Some(ledger.config.goal.clone());
    row.last_activity = Some(
        newest
            .last_activity()
            .map_or(ledger.updated_at, |t| t.max(ledger.updated_at)),
    );
    row.health = Some(health::of_turn(&dir.display(), &turn, &summary, now));
    row.budgets = cost::recent(dir, 0)?.budgets;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_fixed_per_directory_and_url_safe() {
        let a = id_of("/home/u/a/.loopx");
        assert_eq!(a, id_of("/home/u/a/.loopx"));
        assert_ne!(a, id_of("/home/u/b/.loopx"));
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn a_missing_relative_or_linked_directory_is_never_opened() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        assert_eq!(may_open(&root.join("gone")).unwrap_err().0, Reach::Gone);
        assert_eq!(
            may_open(Path::new("relative/.loopx")).unwrap_err().0,
            Reach::Unreadable
        );
        let real = root.join("real");
        std::fs::create_dir(&real).unwrap();
        assert_eq!(may_open(&real), Ok(()));
        let link = root.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(may_open(&link).unwrap_err().0, Reach::Unreadable);
        std::fs::create_dir(real.join("inner")).unwrap();
        let (reach, problem) = may_open(&link.join("inner")).unwrap_err();
        assert_eq!(reach, Reach::Unreadable);
        assert!(problem.contains("symlink"), "{problem}");
    }
}
