//! `loopx goal-focus`: Goal Focus v2 direction control. Each subcommand
//! parses its flags, calls its use case in `loopx_app::focus` and renders
//! the view it returns.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use loopx_app::focus::{self, Which};
use loopx_app::loop_dir::LoopDir;
use loopx_core::focus::plan::Trigger;
use loopx_store::sqlite::Access;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum GoalFocusCommand {
    /// The enforcement mode in force and why, the replan triggers that
    /// fire, and where contract, registry, plan and decisions stand.
    Status(DirArgs),
    /// Check that plan, contract, registry and decision log agree (exit 1
    /// lists every problem).
    Validate(DirArgs),
    Replan(ReplanArgs),
    /// Rewrite the derived views (recovery.md, status.json,
    /// goal_focus.json) from the store.
    Reconcile(DirArgs),
    Revise(ReviseArgs),
}

/// Choose the next bounded direction from the approach registry and commit
/// it with its decision, atomically.
///
/// Eligible approaches only; a robustly dominant lower bound exploits,
/// overlapping intervals run a bounded experiment among at most three
/// diverse approaches. Monitor mode commits the direction unreviewed;
/// enforce mode records `needs_replan` (a direction needs a
/// different-family strategy review, which this loopx cannot run yet).
#[derive(Debug, Args)]
pub struct ReplanArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Why to replan (default: the first trigger that fires; refused when
    /// none does).
    #[arg(long, value_parser = PossibleValuesParser::new(Trigger::names()))]
    trigger: Option<String>,
    /// Show the plan that would be committed; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

/// Replace the goal contract or the approach registry with a JSON document.
///
/// Contract: {"goal", "criteria": [{"criterion_id", "text"}], "scope":
/// {"in_scope", "out_of_scope"}, "obligations": [{"obligation_id",
/// "description", "kind": supporting|bridge|terminal, "status":
/// open|partial|satisfied|blocked|closed, "depends_on"}]}.
/// Registry: {"campaigns": [{"campaign_id", "title", "approaches":
/// [{"approach_id", "summary", "estimate": {"low", "high", "expires_at"},
/// "eligibility": {"status": eligible|parked|blocked|closed|succeeded,
/// "reason"}, "reopen_conditions"}]}]}.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("document").required(true).args(["contract", "registry"])))]
pub struct ReviseArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The new goal contract (a JSON file).
    #[arg(long)]
    contract: Option<PathBuf>,
    /// The new approach registry (a JSON file).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// Refuse unless the document is still at this revision (from `status`).
    #[arg(long)]
    base_revision: Option<u64>,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

pub fn goal_focus(command: &GoalFocusCommand) -> Result<Reply> {
    match command {
        GoalFocusCommand::Status(args) => {
            let view = focus::status(&LoopDir::open(&args.dir, Access::ReadOnly)?)?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Validate(args) => {
            let view = focus::validate(&LoopDir::open(&args.dir, Access::ReadOnly)?)?;
            Ok(Reply {
                code: if view.is_valid() { 0 } else { 1 },
                ..Reply::view(&view, view.text())?
            })
        }
        GoalFocusCommand::Replan(args) => {
            let trigger = (args.trigger.as_deref())
                .map(|t| Trigger::parse(t).expect("clap checked the trigger"));
            let view = focus::replan(
                &args.dir.dir,
                trigger,
                args.dry_run,
                args.operation_id.as_deref(),
            )?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Reconcile(args) => {
            let view = focus::reconcile(&LoopDir::open(&args.dir, Access::ReadWrite)?)?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Revise(args) => {
            let (which, path) = match (&args.contract, &args.registry) {
                (Some(path), _) => (Which::Contract, path),
                (None, Some(path)) => (Which::Registry, path),
                (None, None) => unreachable!("clap requires one"),
            };
            let view = focus::revise(
                &args.dir.dir,
                which,
                path,
                args.base_revision,
                args.operation_id.as_deref(),
            )?;
            let text = format!(
                "{} {} revision {} ({}){}",
                view.action,
                if view.replayed || view.body.unchanged {
                    "kept"
                } else {
                    "committed"
                },
                view.body.revision,
                view.body.fingerprint,
                view.note()
            );
            Reply::view(&view, text)
        }
    }
}
