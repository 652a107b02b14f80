//! `bootstrap` and `apply-defaults`: parse, call
//! [`loopx_app::bootstrap`], render.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::bootstrap::{self, NewLoop, Overrides, Profile};
use loopx_app::loop_dir::LoopDir;
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::InitLoop;
use loopx_store::sqlite::Access;
use std::path::PathBuf;

/// Create a loop for running unattended (or adopt the one in --dir) and
/// apply a force-loop profile's pins: Goal Focus enforce (at creation;
/// an existing loop keeps its mode, and says so), goal_priority.json
/// enabled with discipline_mode hard, panel.json enabled, the host's
/// compute pin (allow local, kaggle, modal; forbid hetzner,
/// github-actions), and the formal policy: on with the Lake typecheck for
/// `formal`, off for `general`. Idempotent: a second run changes nothing.
/// Then `loopx start` runs it.
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The profile: general or formal.
    #[arg(long, value_parser = ["general", "formal"])]
    pub profile: String,
    /// The loop's goal (needed when --dir holds no loop yet).
    #[arg(long, requires = "success_criteria")]
    pub goal: Option<String>,
    /// Its observable success criteria (needed with --goal).
    #[arg(long, requires = "goal")]
    pub success_criteria: Option<String>,
    /// Iteration cap of a new loop (default: 40 for formal, init's 5 for general).
    #[arg(long)]
    pub max_iterations: Option<u64>,
    /// Wall-time cap of a new loop in seconds (default: 3 days for formal, init's 1 hour for general).
    #[arg(long)]
    pub max_wall_time_seconds: Option<u64>,
    /// Accepted so the reference kit's command line works; `loopx start
    /// --root` names the project the loop runs in.
    #[arg(long, value_name = "PROJECT")]
    pub root: Option<PathBuf>,
    /// Stable id for creating the loop; repeating it replays.
    #[arg(long)]
    pub operation_id: Option<String>,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// The host policy file, whose values change the profile's pins.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The host policy file (as `loopx start --policy-file`, the same
    /// checks): AAS_AUTOLOOP_GOAL_PRIORITY=off disables goal priority,
    /// AAS_AUTOLOOP_FORMAL_POLICY and AAS_AUTOLOOP_FORMAL_TYPECHECK set
    /// the formal pins, AAS_FORCE_LOOP_COMPUTE_LANES allows those lanes
    /// beside local (and no longer forbids them).
    #[arg(long, env = loopx_app::host_policy::ENV, value_name = "ABS_PATH")]
    pub policy_file: Option<PathBuf>,
}

impl PolicyArgs {
    fn overrides(&self, loop_root: &std::path::Path) -> Result<Overrides> {
        Ok(match &self.policy_file {
            Some(path) => Overrides::of_policy(&loopx_app::host_policy::load(path, loop_root)?)?,
            None => Overrides::default(),
        })
    }
}

/// Re-apply a force-loop profile's pins to the loop in --dir, reporting
/// each: what the profile wants, what the loop had, and whether it was
/// changed.
#[derive(Debug, Args)]
pub struct ApplyDefaultsArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The profile: general or formal.
    #[arg(long, value_parser = ["general", "formal"])]
    pub profile: String,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

pub fn bootstrap(args: &BootstrapArgs, store: Option<&str>) -> Result<Reply> {
    let profile = Profile::parse(&args.profile)?;
    let new = match (&args.goal, &args.success_criteria) {
        (Some(goal), Some(criteria)) => {
            let (iterations, wall) = profile.budget_defaults();
            let budget = Budget {
                max_iterations: (args.max_iterations.or(iterations))
                    .unwrap_or(Budget::INIT_ITERATIONS),
                max_wall_time_seconds: (args.max_wall_time_seconds.or(wall))
                    .unwrap_or(Budget::INIT_WALL_TIME_SECONDS),
                ..Budget::iterations_only(0)
            };
            Some(NewLoop {
                request: InitLoop::new(goal.trim(), criteria.trim(), budget),
                operation_id: args.operation_id.clone(),
            })
        }
        _ => None,
    };
    let overrides = args.policy.overrides(&args.dir.dir)?;
    let view = bootstrap::bootstrap(args.dir.at(store), profile, new, &overrides)?;
    Reply::view(&view, view.text())
}

pub fn apply_defaults(args: &ApplyDefaultsArgs, store: Option<&str>) -> Result<Reply> {
    let profile = Profile::parse(&args.profile)?;
    let overrides = args.policy.overrides(&args.dir.dir)?;
    let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
    let view = bootstrap::apply_defaults(&dir, profile, &overrides)?;
    Reply::view(&view, view.text())
}
