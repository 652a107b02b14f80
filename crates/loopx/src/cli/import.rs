//! `loopx import`: parse, call [`loopx_app::import::import`], render.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::driver::env;
use std::path::PathBuf;

/// Read a loop directory written by the reference Python runtime into a
/// new loopx loop.
///
/// Without --apply this is a dry run: it reads the source (no link
/// followed, every file bounded), prints what would be created and every
/// direction signal found (plan state, selected approach, pending
/// decisions, goal priority), and writes nothing anywhere. When the
/// signals disagree, no direction is chosen: the plan is kept as
/// `needs_replan` and the output says why. With --apply the new loop is
/// built beside --dir and moved into place only once complete; iterations
/// keep their numbers, timestamps, costs and outcomes. The source
/// directory is never written to.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The reference runtime's loop directory (loop_state.json, budget.json,
    /// iterations.jsonl, goal_contract.json, approach_registry.json,
    /// current_plan.json, direction_decisions.jsonl, goal_priority.json).
    #[arg(long)]
    from: PathBuf,
    /// The new loop directory: must not exist, or be empty.
    #[arg(long, env = env::LOOP_DIR, default_value = ".loopx")]
    dir: PathBuf,
    /// Create the loop; without it nothing is written.
    #[arg(long)]
    apply: bool,
}

pub fn import(args: &ImportArgs, store: Option<&str>) -> Result<Reply> {
    let view = loopx_app::import::import(&args.from, &args.dir, args.apply, store)?;
    Reply::view(&view, view.text())
}
