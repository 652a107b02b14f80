//! Legacy goal priority (`goal_priority.v1`): the IO around the core's
//! rule (`loopx_core::ledger::goal_priority`). Reads the loop's
//! `goal_priority.json` (no symlink followed, bounded, parsed as data) and
//! the `AAS_AUTOLOOP_GOAL_PRIORITY` switch, and writes the template.
//!
//! A malformed file or switch is an error naming it, never ignored: the
//! prompt, `validate` and `append-iteration` all refuse to go on without
//! knowing what the operator asked for.

use crate::error::AppError;
use crate::fsutil;
use crate::loop_dir::LoopDir;
use loopx_core::ledger::goal_priority::{self as rule, Resolved};
use loopx_core::path::{FileProblem, LoopPath};
use std::path::Path;

/// The config in force for the loop in `root`: its file (if any) with the
/// environment's switch applied.
pub fn resolve_at(root: &Path) -> Result<Resolved, AppError> {
    let name = LoopPath::parse(rule::FILE).expect("the file's name is a plain file name");
    let config = match fsutil::read_confined(root, &name, rule::MAX_BYTES) {
        Ok(bytes) => Some(rule::parse(&bytes).map_err(|problem| malformed(root, &problem))?),
        Err(FileProblem::Missing) => None,
        Err(problem) => return Err(malformed(root, &problem.describe())),
    };
    let switch = std::env::var(rule::ENV).unwrap_or_default();
    let switch = rule::parse_switch(&switch).map_err(AppError::refused)?;
    Ok(rule::resolve(config, switch))
}

fn malformed(root: &Path, problem: &str) -> AppError {
    AppError::refused(format!(
        "{}: {problem}; fix or remove the file (`loopx init --goal-priority-template` shows every field)",
        root.join(rule::FILE).display()
    ))
}

/// [`resolve_at`] for an open loop.
pub fn resolve(dir: &LoopDir) -> Result<Resolved, AppError> {
    resolve_at(dir.root())
}

/// The warnings `resolved` gives for the loop's latest records (read
/// only when it is active; an unreadable ledger is the caller's to report).
pub fn warnings_now(dir: &LoopDir, resolved: &Resolved) -> Vec<String> {
    let records = match resolved.active {
        true => dir.read().map(|r| r.ledger.recent).unwrap_or_default(),
        false => Vec::new(),
    };
    rule::warnings(resolved, &records)
}

/// Refuse, before anything is written, a template that would replace an
/// existing file without `force`.
pub fn check_template(root: &Path, force: bool) -> Result<(), AppError> {
    let path = root.join(rule::FILE);
    if !force && std::fs::symlink_metadata(&path).is_ok() {
        return Err(AppError::refused(format!(
            "{} already exists: nothing was written; pass --force to replace it with the template",
            path.display()
        )));
    }
    Ok(())
}

/// Write the template into `root` (after [`check_template`]).
pub fn write_template(root: &Path) -> Result<String, AppError> {
    let path = root.join(rule::FILE);
    fsutil::write_durable(&path, rule::TEMPLATE.as_bytes())?;
    Ok(path.display().to_string())
}
