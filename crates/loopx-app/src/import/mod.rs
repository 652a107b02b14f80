//! `loopx import`: a loop directory written by the reference Python runtime
//! read into a new loopx loop, its history preserved.
//!
//! Owns: reading the source (each file opened without following a link,
//! bounded, parsed as data and never executed), mapping the reference's
//! files onto loopx requests, listing every direction signal the source
//! holds and which of them disagree, and creating the new loop so that a
//! crash leaves either no loop at `--dir` or a complete one: everything is
//! built in a fresh directory beside it and renamed into place last.
//!
//! Does not own any rule: which records may be imported is
//! `loopx_core::ledger::import_guard`, what an imported plan may select is
//! `loopx_core::focus::replan::draft_import`, and every request goes through
//! its owner, first in memory (so the dry run refuses exactly what apply
//! would) and then through the authority.
//!
//! The source files, by the reference's names (unknown fields are ignored):
//!
//! | file | read |
//! | --- | --- |
//! | `loop_state.json` (required) | `goal`, `success_criteria`, `status`, `created_at`, `default_mode`, `plateau_rule`, `stop_conditions`, `next_preferred_path` |
//! | `budget.json` (required) | `max_iterations`, `max_wall_time_seconds`, `max_tokens`, `max_usd`, `spent` {`iterations`, `tokens`, `usd`} or `spent_iterations`, `spent_tokens`, `spent_usd` |
//! | `iterations.jsonl` | one iteration record a line, as `append-iteration` writes it (direction fields at the top or under `progress_assessment`, `goal_focus`, `execution`) |
//! | `goal_contract.json` | `goal_revision` and the contract (`goal`, `criteria` or `success_criteria`, `scope`, `obligations` listed or keyed by id) |
//! | `approach_registry.json` | `registry_revision` and `campaigns` (campaigns and approaches listed or keyed by id) |
//!
//! The reference has written two shapes: the one its specification gives
//! (lists) and the one its runtime writes today (objects keyed by id,
//! `success_criteria`, `scope.included`, flat `spent_*`). Both are read; an
//! empty id (`""`) names nothing. Its per-factor approach `estimates` have
//! no counterpart in loopx's single interval: such an approach starts at
//! [0, 1] and the import warns.
//! | `current_plan.json` | `plan_revision`, `goal_revision`, `registry_revision`, `state`, `enforcement_mode`, `campaign_id`, `approach_id`, `selection`, `horizon_iterations`, `valid_through_iteration` |
//! | `direction_decisions.jsonl` | `decision_id`, `plan_revision`, `status` (`pending` or not), `approach_id` |
//! | `goal_priority.json` | `enabled`, `discipline_mode`, `campaign_id` |
//!
//! Files by job: `source` (reading the files), `map` (what they become in
//! loopx, decided in memory), `apply` (building the loop beside `--dir`
//! and moving it into place), `view` (what the import reports); this file
//! is the use case.

mod apply;
mod map;
mod source;
mod view;

pub use view::{DirectionSignal, ImportView, PlanImport, RevisionMap, SourceFile};

use crate::loop_dir::{store_locator, DATABASE};
use crate::{clock, AppError};
use apply::{check_target, create};
use map::plan;
use source::{refused, Source};
use std::path::Path;

/// `loopx import --from FROM --dir TO [--apply]`.
/// `store`: the store the caller named (`--store`), which import refuses:
/// an imported loop is built in its own file.
pub fn import(
    from: &Path,
    to: &Path,
    apply: bool,
    store: Option<&str>,
) -> Result<ImportView, AppError> {
    let root = from.canonicalize().map_err(|e| {
        AppError::not_found(format!(
            "cannot open the source {} ({e}): name the reference runtime's loop directory with --from",
            from.display()
        ))
    })?;
    if !root.is_dir() {
        return Err(refused(format!(
            "the source {} is not a directory: name the reference runtime's loop directory with --from",
            from.display()
        )));
    }
    let now = clock::now();
    let source = Source::read(&root)?;
    check_target(&root, to)?;
    let plan = plan(&source, from, to, now)?;
    if !apply {
        return Ok(plan.view);
    }
    if store_locator(store)?.is_some() {
        return Err(refused(format!(
            "import --apply creates the loop with its own {DATABASE}, but the store given names another one: drop it (--store, or {}) to import; nothing was written",
            crate::driver::env::STORE
        )));
    }
    create(plan, to, now)
}
