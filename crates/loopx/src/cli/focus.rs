//! `loopx goal-focus`: Goal Focus v2 direction control. Each subcommand
//! parses its flags, calls its use case in `loopx_app::focus` and renders
//! the view it returns.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use loopx_app::focus::{self, candidate, dispatch, strategy, Which};
use loopx_app::loop_dir::{LoopDir, Place};
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
    Review(ReviewArgs),
    Quarantine(QuarantineArgs),
    RecoverQuarantine(RecoverQuarantineArgs),
    StrategyBrief(StrategyBriefArgs),
    StrategyReview(StrategyReviewArgs),
    RecoverDispatch(RecoverDispatchArgs),
}

/// Show the driver's open dispatch (id, provider, since, whether its agent
/// is alive, what a restarting driver would do); with --cancel and its
/// exact id, settle it as cancelled. In enforce mode an open dispatch no
/// live driver holds closes the pre-dispatch gate until it is recovered.
/// A cancel is refused while a driver runs the loop, while the agent is
/// alive, or for any other id; a refusal writes nothing.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("cancelling").args(["cancel"]).requires("dispatch_id")))]
pub struct RecoverDispatchArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Cancel the open dispatch (needs --dispatch-id).
    #[arg(long)]
    cancel: bool,
    /// The exact id of the open dispatch (from this command without --cancel).
    #[arg(long, requires = "cancel")]
    dispatch_id: Option<String>,
}

/// What a strategy reviewer must see: the goal contract, approach registry
/// and the plan awaiting review (enforce mode), complete, with the exact
/// fingerprints an advice binds (`bind`) and the executor whose family the
/// reviewer must not share. --json gives the brief to send.
#[derive(Debug, Args)]
pub struct StrategyBriefArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The executor's provider, when no driver has named one (must agree
    /// with the driver's when one has).
    #[arg(long)]
    executor: Option<String>,
}

/// Apply a strategy_advice.v1 document to the plan awaiting review.
///
/// The document: {"schema": "strategy_advice.v1", "reviewer": {"provider":
/// "codex"}, "reviewed": {"goal_contract", "approach_registry",
/// "current_plan"} (each {"revision", "fingerprint"}: copy `bind` from
/// `strategy-brief --json`), "verdict": endorse|object|propose,
/// "selection": [approach ids] (propose only, 1 to 3), "reasons": [...]
/// (object), "rationale"}. The reviewer's family must be known and differ
/// from the executor's (the driver's provider, else --executor; unknown
/// fails closed); the bound versions must be exactly the current ones.
/// Endorse or propose commits the reviewed plan (active, `reviewed`) and
/// its decision in one transaction; object commits a `needs_replan` plan
/// (`strategy_objected`) and reviewer dissent fires. A refused advice
/// writes nothing.
#[derive(Debug, Args)]
pub struct StrategyReviewArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The strategy_advice.v1 JSON document.
    #[arg(long)]
    file: PathBuf,
    /// The executor's provider, when no driver has named one (must agree
    /// with the driver's when one has).
    #[arg(long)]
    executor: Option<String>,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

/// Decide the candidate awaiting review with a result_review.v1 document.
///
/// The document: {"schema": "result_review.v1", "candidate_fingerprint":
/// "sha256:…", "reviewer": {"provider": "codex"}, "verdict": pass|fail,
/// "claims": [{"claim_id", "status": supported|unsupported,
/// "evidence_paths"}], "obligations": [{"obligation_id", "status":
/// met|unmet, "target_status", "evidence_paths"}], "inspected_paths":
/// [...], "summary"}. A met obligation states exactly the target status
/// the candidate requests for it (`--obligation-target`), or none.
/// The reviewer's family must differ from the executor's; one review
/// covers every claim and obligation; each supported claim and met
/// obligation cites staged evidence listed in inspected_paths. Pass banks
/// the row as accepted; fail banks it as rejected (real cost counted,
/// claims and deltas cleared, next plan needs a replan). Both archive the
/// candidate in the same transaction; a refused review writes nothing.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The exact fingerprint of the pending candidate (from `status`).
    #[arg(long)]
    candidate_fingerprint: String,
    /// The result_review.v1 JSON document.
    #[arg(long)]
    file: PathBuf,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

/// Quarantine the candidate awaiting review (what the host does after a
/// failed gate: timeout, failed cleanup, rejected output). Nothing is
/// reviewed, banked or dispatched until it is released.
#[derive(Debug, Args)]
pub struct QuarantineArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// The exact fingerprint of the pending candidate.
    #[arg(long)]
    candidate_fingerprint: String,
    /// Why (kept with the quarantine; shown by recover-quarantine).
    #[arg(long)]
    reason: String,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

/// Show the quarantined candidate; with --release and its exact
/// fingerprint, release it (archived; the ledger and budget do not change).
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("releasing").args(["release"]).requires("candidate_fingerprint")))]
pub struct RecoverQuarantineArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Release the quarantined candidate (needs --candidate-fingerprint).
    #[arg(long)]
    release: bool,
    /// The exact fingerprint of the quarantined candidate.
    #[arg(long, requires = "release")]
    candidate_fingerprint: Option<String>,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    operation_id: Option<String>,
}

/// Choose the next bounded direction from the approach registry and commit
/// it with its decision, atomically.
///
/// Eligible approaches only; a robustly dominant lower bound exploits,
/// overlapping intervals run a bounded experiment among at most three
/// diverse approaches. Monitor mode commits the direction unreviewed;
/// enforce mode records `needs_replan` with the direction only proposed:
/// it is selected by a different-family strategy review
/// (`strategy-brief`, then `strategy-review`).
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

pub fn goal_focus(command: &GoalFocusCommand, store: Option<&str>) -> Result<Reply> {
    match command {
        GoalFocusCommand::Status(args) => {
            let view = focus::status(&LoopDir::open(
                Place::new(&args.dir, store),
                Access::ReadOnly,
            )?)?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Validate(args) => {
            let view = focus::validate(&LoopDir::open(
                Place::new(&args.dir, store),
                Access::ReadOnly,
            )?)?;
            Ok(Reply {
                code: if view.is_valid() { 0 } else { 1 },
                report: false,
                ..Reply::view(&view, view.text())?
            })
        }
        GoalFocusCommand::Replan(args) => {
            let trigger = (args.trigger.as_deref())
                .map(|t| Trigger::parse(t).expect("clap checked the trigger"));
            let view = focus::replan(
                args.dir.at(store),
                trigger,
                args.dry_run,
                args.operation_id.as_deref(),
            )?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Reconcile(args) => {
            let view = focus::reconcile(&LoopDir::open(
                Place::new(&args.dir, store),
                Access::ReadWrite,
            )?)?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::Revise(args) => {
            let (which, path) = match (&args.contract, &args.registry) {
                (Some(path), _) => (Which::Contract, path),
                (None, Some(path)) => (Which::Registry, path),
                (None, None) => unreachable!("clap requires one"),
            };
            let view = focus::revise(
                args.dir.at(store),
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
        GoalFocusCommand::Review(args) => {
            let view = candidate::review(
                args.dir.at(store),
                &args.candidate_fingerprint,
                &args.file,
                args.operation_id.as_deref(),
            )?;
            let body = &view.body;
            let text = format!(
                "candidate {} banked as {:?} by reviewer {} ({}): iteration {} ({}, loop {}){}",
                body.candidate_fingerprint,
                body.bank_status,
                body.reviewer_provider,
                body.reviewer_family.name(),
                body.iteration,
                body.decision,
                body.state_status,
                view.note()
            );
            Reply::view(&view, text)
        }
        GoalFocusCommand::Quarantine(args) => {
            let view = candidate::quarantine(
                args.dir.at(store),
                &args.candidate_fingerprint,
                &args.reason,
                args.operation_id.as_deref(),
            )?;
            let text = format!(
                "candidate {} quarantined: nothing is reviewed, banked or dispatched until `loopx goal-focus recover-quarantine --release` with its exact fingerprint{}",
                view.body.fingerprint,
                view.note()
            );
            Reply::view(&view, text)
        }
        GoalFocusCommand::RecoverDispatch(args) => {
            let view = match (&args.dispatch_id, args.cancel) {
                (Some(id), true) => dispatch::cancel(args.dir.at(store), id)?,
                _ => dispatch::show(&LoopDir::open(args.dir.at(store), Access::ReadOnly)?)?,
            };
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::StrategyBrief(args) => {
            let view = strategy::brief(args.dir.at(store), args.executor.as_deref())?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::StrategyReview(args) => {
            let bytes = loopx_app::fsutil::read_bounded(
                &args.file,
                loopx_core::text::limits::DOCUMENT_BYTES,
            )?;
            let view = strategy::review(
                args.dir.at(store),
                &bytes,
                args.executor.as_deref(),
                args.operation_id.as_deref(),
            )?;
            Reply::view(&view, view.text())
        }
        GoalFocusCommand::RecoverQuarantine(args) => match &args.candidate_fingerprint {
            Some(fingerprint) if args.release => {
                let view = candidate::release_quarantine(
                    args.dir.at(store),
                    fingerprint,
                    args.operation_id.as_deref(),
                )?;
                let text = format!(
                    "candidate {} released and archived; the ledger and budget are unchanged{}",
                    view.body.fingerprint,
                    view.note()
                );
                Reply::view(&view, text)
            }
            _ => {
                let view = candidate::show_quarantine(&LoopDir::open(
                    args.dir.at(store),
                    Access::ReadOnly,
                )?)?;
                Reply::view(&view, view.text())
            }
        },
    }
}
