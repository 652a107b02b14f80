//! `loopx notify-event`: parse the flags into notify facts, call
//! `loopx_app::notify::notify_event`, render its view.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::driver::env;
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_app::notify;
use loopx_core::notify::{AgentGroup, Agents, ComputeRun, Facts, Issues, Status, Timing};
use loopx_store::sqlite::Access;
use std::path::PathBuf;

/// Send a structured progress event (notify v2) to the loop's transports.
///
/// The event is redacted (configured secrets, credential forms, e-mail
/// addresses, phone numbers) before anything leaves, dry run included. It
/// always goes to the local audit log (notify_audit.jsonl); to the command
/// hook and webhooks of the loop's notify.json only when it may leave the
/// host, and at most once per event fingerprint and transport.
#[derive(Debug, Args)]
pub struct NotifyEventArgs {
    /// The loop directory.
    #[arg(long, env = env::LOOP_DIR, default_value = ".loopx")]
    dir: PathBuf,
    /// The event kind: iteration_ok, iteration_failed, quota_wait, stop, …
    #[arg(long)]
    event: String,
    /// A stable id for this event (default: the kind and the iteration).
    #[arg(long, default_value = "")]
    event_id: String,
    /// The iteration the event is about.
    #[arg(long)]
    iteration: Option<u64>,
    /// What was finalized.
    #[arg(long, default_value = "")]
    completed: String,
    /// Where the research stands now.
    #[arg(long, default_value = "")]
    current: String,
    /// The next bounded action.
    #[arg(long, default_value = "")]
    plan: String,
    /// Goal and obligation progress in plain words.
    #[arg(long, default_value = "")]
    goal_progress: String,
    /// running, success, failure, error, waiting, paused or not_applicable.
    #[arg(long, default_value = "not_applicable")]
    iteration_status: String,
    /// not_required, pending, passed, failed or error.
    #[arg(long, default_value = "not_required")]
    review_status: String,
    /// The provider that performed the iteration (the executor).
    #[arg(long, default_value = "")]
    provider: String,
    /// A driver agent actually used (repeatable).
    #[arg(long)]
    driver_agent: Vec<String>,
    /// A panel agent that returned usable work (repeatable).
    #[arg(long)]
    panel_agent: Vec<String>,
    /// A compute run as JSON, e.g. '{"service":"hetzner","status":"succeeded","job_ref":"job-123"}' (repeatable).
    #[arg(long)]
    compute_run: Vec<String>,
    /// Report explicitly that no compute was used.
    #[arg(long, conflicts_with = "compute_run")]
    no_compute: bool,
    /// A banked result: claim id or gist (repeatable).
    #[arg(long)]
    result: Vec<String>,
    /// The ledger decision (continue, stop, blocked, revise, delegate), when set.
    #[arg(long, default_value = "")]
    decision: String,
    /// Why that decision was taken.
    #[arg(long, default_value = "")]
    decision_reason: String,
    /// An operational error (repeatable).
    #[arg(long)]
    runtime_error: Vec<String>,
    /// A review failure (repeatable).
    #[arg(long)]
    review_failure: Vec<String>,
    /// When the iteration started (RFC 3339).
    #[arg(long)]
    started_at: Option<jiff::Timestamp>,
    /// When the iteration finished (RFC 3339).
    #[arg(long)]
    finished_at: Option<jiff::Timestamp>,
    /// Extra structured values carried on the event (a JSON object); never
    /// rendered, always redacted.
    #[arg(long)]
    extensions: Option<String>,
    /// Show the redacted event and every rendering; send and write nothing.
    #[arg(long)]
    dry_run: bool,
}

fn group(agents: &[String]) -> AgentGroup {
    if agents.is_empty() {
        AgentGroup::default()
    } else {
        AgentGroup::of(agents.to_vec())
    }
}

pub fn notify_event(args: &NotifyEventArgs, store: Option<&str>) -> Result<Reply> {
    let refused =
        |e: loopx_core::notify::NotifyProblem| loopx_app::AppError::refused(e.to_string());
    let compute = if args.no_compute {
        Some(Vec::new())
    } else if args.compute_run.is_empty() {
        None
    } else {
        Some(
            args.compute_run
                .iter()
                .map(|run| ComputeRun::parse(run))
                .collect::<Result<Vec<_>, _>>()
                .map_err(refused)?,
        )
    };
    let extensions = match &args.extensions {
        None => serde_json::Map::new(),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            loopx_app::AppError::refused(format!("extensions must be a JSON object: {e}"))
        })?,
    };
    let facts = Facts {
        extensions,
        kind: args.event.clone(),
        event_id: args.event_id.clone(),
        iteration: args.iteration,
        status: Status {
            iteration: args.iteration_status.parse().map_err(refused)?,
            review: args.review_status.parse().map_err(refused)?,
            loop_status: String::new(),
        },
        timing: Timing {
            started_at: args.started_at,
            finished_at: args.finished_at,
        },
        agents: Agents {
            executor: args.provider.clone(),
            driver: group(&args.driver_agent),
            panel: group(&args.panel_agent),
            other: AgentGroup::default(),
        },
        compute,
        issues: Issues {
            runtime_errors: args.runtime_error.clone(),
            review_failures: args.review_failure.clone(),
        },
        completed: args.completed.clone(),
        results: args.result.clone(),
        current: args.current.clone(),
        decision: args.decision.clone(),
        decision_reason: args.decision_reason.clone(),
        plan: args.plan.clone(),
        progress: loopx_core::notify::Progress {
            goal: args.goal_progress.clone(),
            ..Default::default()
        },
        ..Facts::default()
    };
    let dir = LoopDir::open(Place::new(&args.dir, store), Access::ReadOnly)?;
    let view = notify::notify_event(&dir, facts, args.dry_run)?;
    let mut text = view.body.clone();
    if !view.external && !view.local_only_reason.is_empty() {
        text.push_str(&format!(
            "\n(local audit only: {})\n",
            view.local_only_reason
        ));
    }
    for d in &view.deliveries {
        text.push_str(&format!("{}: {} {}\n", d.transport, d.outcome, d.detail));
    }
    Reply::view(&view, text)
}
