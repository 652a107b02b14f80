//! The ledger commands: init, append-iteration, validate, status, done.

use super::{operation_id, Reply};
use anyhow::{Context as _, Result};
use clap::builder::PossibleValuesParser;
use clap::Args;
use loopx_app::clock;
use loopx_app::loop_dir::{LoopDir, Reading};
use loopx_core::goal::RootCommitments;
use loopx_core::ledger::budget::{is_budget_number, Budget};
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, GoalFocusMode, Mode, SUCCESS_STOP_REASONS};
use loopx_core::ledger::{
    nonblank, view, EvidenceChecked, InitLoop, IterationReport, LedgerContext, LedgerOwner,
    LedgerReceipt, LedgerRequest, StopConditions, DEFAULT_PLATEAU_RULE, STREAM,
};
use loopx_core::operation::Owner;
use loopx_core::words;
use loopx_store::sqlite::Access;
use loopx_store::Receipt;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DirArgs {
    /// The loop directory.
    #[arg(long, env = "LOOPX_DIR", default_value = ".loopx")]
    pub dir: PathBuf,
}

/// Create a loop: its goal, success criteria, budgets and stop conditions.
///
/// Refuses a directory that already holds a loop: loopx never overwrites a
/// ledger. Zero means "unlimited" for --max-tokens, --max-usd and the wall
/// time; --max-iterations is always a hard cap.
#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// What the loop is for.
    #[arg(long)]
    pub goal: String,
    /// How to tell it is achieved.
    #[arg(long)]
    pub success_criteria: String,
    /// The default mode of an iteration.
    #[arg(long, default_value = "bounded-research", value_parser = mode_parser())]
    pub mode: String,
    /// Hard cap on iterations; the last allowed one must stop or block.
    #[arg(long, default_value_t = 5)]
    pub max_iterations: u64,
    /// Wall-time budget in seconds from init (0 = unlimited).
    #[arg(long, default_value_t = 3600, conflicts_with = "max_wall")]
    pub max_wall_time_seconds: u64,
    /// Wall-time budget as a duration: 90m, 48h, 2d 12h (0 = unlimited).
    #[arg(long, value_parser = parse_duration)]
    pub max_wall: Option<u64>,
    /// Token budget (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub max_tokens: u64,
    /// USD budget (0 = unlimited); finite and non-negative.
    #[arg(long, default_value = "0", value_parser = budget_number)]
    pub max_usd: f64,
    /// When progress counts as stalled (recorded for the next session; free text).
    #[arg(long, default_value = DEFAULT_PLATEAU_RULE)]
    pub plateau_rule: String,
    /// Shell command that must pass before a success stop is banked (run by
    /// the driver in the project root).
    #[arg(long, default_value = "")]
    pub success_check: String,
    /// Only the user (STOP_REQUESTED) or a budget ends the loop; an agent's
    /// `stop` does not.
    #[arg(long)]
    pub require_user_stop_only: bool,
    /// An extra stop condition stated by the user (repeatable).
    #[arg(long = "stop-condition")]
    pub stop_conditions: Vec<String>,
    /// Goal Focus direction control; `enforce` admits appends only through
    /// the driver's dispatch.
    #[arg(long, default_value = "monitor", value_parser = PossibleValuesParser::new(GoalFocusMode::names()))]
    pub goal_focus_mode: String,
    /// A root acceptance criterion of the goal (repeatable).
    #[arg(long = "acceptance")]
    pub acceptance_criteria: Vec<String>,
    /// Something the goal must not do or become (repeatable).
    #[arg(long = "non-goal")]
    pub non_goals: Vec<String>,
    /// A permission the agents hold for this goal (repeatable).
    #[arg(long = "permission")]
    pub permissions: Vec<String>,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    pub operation_id: Option<String>,
}

/// Record one iteration: what was done, what it cost, and the decision.
///
/// Rules: no append after max_iterations or after a stop/blocked; the final
/// allowed iteration (or one that spends the last of any budget) must use
/// stop or blocked; blocked is accepted only then; an earlier stop needs a
/// success --stop-reason and an --evidence-id whose proof_artifacts/ID.json
/// is a passed, machine-checkable artifact.
#[derive(Debug, Args)]
#[command(after_help = early_stop_help())]
pub struct AppendArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The kind of work this iteration did.
    #[arg(long, value_parser = mode_parser())]
    pub mode: String,
    /// What this iteration set out to do.
    #[arg(long)]
    pub objective: String,
    /// What happens next: continue, revise or delegate keep the loop going; stop and blocked end it.
    #[arg(long, value_parser = PossibleValuesParser::new(Decision::names()))]
    pub decision: String,
    /// One accepted token; put detail in --output.
    #[arg(long, default_value = "")]
    pub stop_reason: String,
    /// Evidence consulted; for an early stop, a proof artifact id (repeatable).
    #[arg(long = "evidence-id")]
    pub evidence_ids: Vec<String>,
    /// A claim this iteration checked (repeatable).
    #[arg(long = "claim-id")]
    pub claim_ids: Vec<String>,
    /// A source this iteration consulted (repeatable).
    #[arg(long = "source-id")]
    pub source_ids: Vec<String>,
    /// A guard or check this iteration relied on (repeatable).
    #[arg(long = "guard-ref")]
    pub guard_refs: Vec<String>,
    /// An input this iteration read (repeatable).
    #[arg(long = "input-ref")]
    pub input_refs: Vec<String>,
    /// One thing this iteration did (repeatable).
    #[arg(long = "action-taken")]
    pub actions_taken: Vec<String>,
    /// Something still missing after this iteration (repeatable).
    #[arg(long = "remaining-gap")]
    pub remaining_gaps: Vec<String>,
    /// What this iteration produced, in words.
    #[arg(long, default_value = "")]
    pub output: String,
    /// Tokens this iteration used.
    #[arg(long, default_value_t = 0)]
    pub tokens: u64,
    /// USD this iteration cost; finite and non-negative.
    #[arg(long, default_value = "0", value_parser = budget_number)]
    pub usd: f64,
    /// Seconds this iteration took.
    #[arg(long, default_value_t = 0)]
    pub wall_time_seconds: u64,
    /// What is done so far, for the next session's recovery view.
    #[arg(long, default_value = "")]
    pub completed_summary: String,
    /// Where the work stands now, for the next session's recovery view.
    #[arg(long, default_value = "")]
    pub current_summary: String,
    /// The next bounded action (shown in recovery.md for the next session).
    #[arg(long, default_value = "")]
    pub next_action: String,
    /// The agent provider that ran this iteration (set by `loopx drive`).
    #[arg(long, env = "AAS_AUTOLOOP_PRIMARY_PROVIDER", default_value = "")]
    pub executor_provider: String,
    /// The driver dispatch this turn runs under (set by `loopx drive`).
    #[arg(long, env = "LOOPX_DISPATCH_ID", default_value = "", hide = true)]
    pub dispatch_id: String,
    /// Run every check and show the record, but write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    pub operation_id: Option<String>,
    /// Goal Focus v2: how this iteration moved the goal (stored as given).
    #[arg(long, value_parser = ["none", "reduced", "satisfied"])]
    pub global_delta: Option<String>,
    /// Goal Focus v2: how it moved its campaign (stored as given).
    #[arg(long, value_parser = ["none", "incremental", "substantial", "closed"])]
    pub campaign_delta: Option<String>,
    /// A goal-contract obligation this iteration changed (repeatable).
    #[arg(long = "obligation-id")]
    pub obligation_ids: Vec<String>,
    /// Compute actually used: a JSON object, or @FILE holding one
    /// (repeatable; stored as given).
    #[arg(long = "compute-run")]
    pub compute_runs: Vec<String>,
    /// Record that no compute service was used.
    #[arg(long)]
    pub compute_none: bool,
    /// How this iteration served the goal (Goal Focus v1 soft field, stored as given).
    #[arg(long, default_value = "")]
    pub goal_contribution: String,
    /// The detail behind --goal-contribution (stored as given).
    #[arg(long, default_value = "")]
    pub goal_contribution_detail: String,
    /// The campaign this iteration belongs to (stored as given).
    #[arg(long, default_value = "")]
    pub campaign_id: String,
    /// This iteration was local work that moved no goal obligation.
    #[arg(long)]
    pub local_without_goal_delta: bool,
    /// A tag for --local-without-goal-delta (stored as given).
    #[arg(long, default_value = "")]
    pub local_without_goal_delta_tag: String,
    /// The residual this iteration worked on (stored as given).
    #[arg(long, default_value = "")]
    pub residual_id: String,
    /// The scope lock this iteration held (stored as given).
    #[arg(long, default_value = "")]
    pub scope_lock: String,
}

/// `--compute-run`/`--compute-none` as the record stores them: `None`
/// when compute was not reported, an empty list when explicitly none.
fn compute_runs(
    args: &AppendArgs,
) -> Result<Option<Vec<serde_json::Map<String, serde_json::Value>>>> {
    if args.compute_none && !args.compute_runs.is_empty() {
        anyhow::bail!(
            "--compute-none is mutually exclusive with --compute-run: pass one or the other"
        );
    }
    if args.compute_none {
        return Ok(Some(Vec::new()));
    }
    if args.compute_runs.is_empty() {
        return Ok(None);
    }
    let mut runs = Vec::new();
    for raw in &args.compute_runs {
        let raw = raw.trim();
        let text = match raw.strip_prefix('@') {
            Some(path) => {
                let mut text = String::new();
                std::io::Read::read_to_string(
                    &mut std::io::Read::take(
                        std::fs::File::open(path)
                            .with_context(|| format!("cannot read --compute-run file {path}"))?,
                        1 << 20,
                    ),
                    &mut text,
                )
                .with_context(|| format!("cannot read --compute-run file {path} as UTF-8"))?;
                text
            }
            None => raw.to_owned(),
        };
        match serde_json::from_str(&text) {
            Ok(serde_json::Value::Object(run)) => runs.push(run),
            _ => anyhow::bail!(
                "each --compute-run value must be a JSON object (or @FILE holding one), e.g. '{{\"service\":\"local\",\"status\":\"succeeded\"}}'; got {raw:?}"
            ),
        }
    }
    Ok(Some(runs))
}

fn mode_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(Mode::names())
}

fn early_stop_help() -> String {
    format!(
        "Early stop reasons: {}.\nProof artifact (proof_artifacts/<id>.json):\n{}",
        SUCCESS_STOP_REASONS.join(", "),
        serde_json::to_string_pretty(&loopx_core::ledger::proof::expected_artifact_example(
            "<id>"
        ))
        .unwrap_or_default()
    )
}

fn budget_number(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if is_budget_number(value) => Ok(value),
        Ok(value) => Err(format!(
            "must be a finite non-negative number (got {value})"
        )),
        Err(_) => Err(format!(
            "must be a finite non-negative number (got {text:?})"
        )),
    }
}

pub fn parse_duration(text: &str) -> Result<u64, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    let span: jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 90m, 48h or 2d 12h"))?;
    loopx_core::ledger::budget::whole_seconds(span).map_err(|e| e.to_string())
}

pub fn init(args: &InitArgs) -> Result<Reply> {
    let operation_id = operation_id(args.operation_id.as_deref())?;
    let request = LedgerRequest::Init(InitLoop {
        goal: args.goal.trim().to_owned(),
        success_criteria: args.success_criteria.trim().to_owned(),
        default_mode: Mode::parse(&args.mode).expect("clap checked the mode"),
        plateau_rule: args.plateau_rule.clone(),
        success_check: args.success_check.clone(),
        stop_conditions: StopConditions {
            require_user_stop_only: args.require_user_stop_only,
            user_overrides: nonblank(&args.stop_conditions),
        },
        goal_focus_mode: GoalFocusMode::parse(&args.goal_focus_mode)
            .expect("clap checked the mode"),
        budget: Budget {
            max_iterations: args.max_iterations,
            max_wall_time_seconds: args.max_wall.unwrap_or(args.max_wall_time_seconds),
            max_tokens: args.max_tokens,
            max_usd: args.max_usd,
        },
        commitments: RootCommitments {
            acceptance_criteria: nonblank(&args.acceptance_criteria),
            non_goals: nonblank(&args.non_goals),
            permissions: nonblank(&args.permissions),
        },
    });
    let now = clock::now();
    // Refuse bad input before anything exists on disk.
    let precheck = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &NoFiles,
    };
    LedgerOwner::decide(None, &request, &precheck)?;

    let dir = if args.dir.dir.join(loopx_app::loop_dir::DATABASE).is_file() {
        LoopDir::open(&args.dir.dir, Access::ReadWrite)?
    } else {
        LoopDir::create(&args.dir.dir)?
    };
    let context = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &dir,
    };
    let receipt =
        dir.authority()
            .execute::<LedgerOwner>(STREAM, &operation_id, &request, &context, now)?;
    // Committed: from here on nothing is an error (see `refresh_views`).
    let warnings = if receipt.replayed {
        Vec::new()
    } else {
        dir.refresh_views()
    };
    let LedgerReceipt::Init {
        run_id,
        max_iterations,
        ..
    } = &receipt.body
    else {
        unreachable!("init yields an init receipt")
    };
    let text = format!(
        "{} loop {run_id} in {} ({} at most){}\nnext: loopx append-iteration --dir {} --mode bounded-research --objective \"...\" --decision continue",
        if receipt.replayed { "already initialized" } else { "initialized" },
        dir.display(),
        words::count(*max_iterations, "iteration"),
        replay_note(&receipt),
        dir.display()
    );
    Ok(Reply::ok(
        receipt_json("init", &dir, &receipt, warnings),
        text,
    ))
}

pub fn append_iteration(args: &AppendArgs) -> Result<Reply> {
    let operation_id = operation_id(args.operation_id.as_deref())?;
    let direction = loopx_core::ledger::Direction {
        global_delta: args.global_delta.clone().unwrap_or_default(),
        campaign_delta: args.campaign_delta.clone().unwrap_or_default(),
        obligation_ids: args.obligation_ids.clone(),
        compute_runs: compute_runs(args)?,
        goal_contribution: args.goal_contribution.clone(),
        goal_contribution_detail: args.goal_contribution_detail.clone(),
        campaign_id: args.campaign_id.clone(),
        local_without_goal_delta: args.local_without_goal_delta,
        local_without_goal_delta_tag: args.local_without_goal_delta_tag.clone(),
        residual_id: args.residual_id.clone(),
        scope_lock: args.scope_lock.clone(),
    };
    let dir = LoopDir::open(
        &args.dir.dir,
        if args.dry_run {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        },
    )?;
    let request = LedgerRequest::AppendIteration(IterationReport {
        mode: Mode::parse(&args.mode),
        objective: args.objective.clone(),
        decision: Decision::parse(&args.decision),
        stop_reason: args.stop_reason.clone(),
        evidence_checked: EvidenceChecked {
            source_ids: args.source_ids.clone(),
            claim_ids: args.claim_ids.clone(),
            evidence_ids: args.evidence_ids.clone(),
            guard_refs: args.guard_refs.clone(),
        },
        input_refs: args.input_refs.clone(),
        actions_taken: args.actions_taken.clone(),
        remaining_gaps: args.remaining_gaps.clone(),
        output: args.output.clone(),
        tokens: args.tokens,
        usd: args.usd,
        wall_time_seconds: args.wall_time_seconds,
        completed_summary: args.completed_summary.clone(),
        current_summary: args.current_summary.clone(),
        next_action: args.next_action.clone(),
        executor_provider: args.executor_provider.clone(),
        dispatch_id: args.dispatch_id.clone(),
        direction: Box::new(direction),
    });
    let now = clock::now();
    let context = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &dir,
    };
    if args.dry_run {
        let decided = dir
            .authority()
            .preview::<LedgerOwner>(STREAM, &request, &context)?;
        let LedgerReceipt::AppendIteration {
            iteration,
            decision,
            ..
        } = decided.receipt
        else {
            unreachable!("append yields an append receipt")
        };
        let json = json!({
            "status": "ok", "action": "append-iteration", "dry_run": true, "dir": dir.display(),
            "iteration": iteration, "decision": decision, "would_append": decided.event, "warnings": [],
        });
        return Ok(Reply::ok(
            json,
            format!(
                "dry run: iteration {iteration} ({decision}) would be accepted; nothing written"
            ),
        ));
    }
    let receipt =
        dir.authority()
            .execute::<LedgerOwner>(STREAM, &operation_id, &request, &context, now)?;
    // Committed: from here on nothing is an error (see `refresh_views`).
    let warnings = if receipt.replayed {
        Vec::new()
    } else {
        dir.refresh_views()
    };
    let LedgerReceipt::AppendIteration {
        iteration,
        decision,
        state_status,
        remaining_iterations,
    } = &receipt.body
    else {
        unreachable!("append yields an append receipt")
    };
    let text = format!(
        "iteration {iteration} recorded: {decision} (loop {state_status}, {} left){}",
        words::count(*remaining_iterations, "iteration"),
        replay_note(&receipt)
    );
    Ok(Reply::ok(
        receipt_json("append-iteration", &dir, &receipt, warnings),
        text,
    ))
}

/// Every receipt names its operation, so that a reply lost or doubted can
/// be confirmed by repeating the command with `--operation-id`.
fn replay_note<R>(receipt: &Receipt<R>) -> String {
    if receipt.replayed {
        format!(
            " [replay of operation {}: nothing written]",
            receipt.operation_id
        )
    } else {
        format!(
            " [operation {}, revision {}]",
            receipt.operation_id, receipt.revision
        )
    }
}

fn receipt_json<R: serde::Serialize>(
    action: &str,
    dir: &LoopDir,
    receipt: &Receipt<R>,
    warnings: Vec<String>,
) -> serde_json::Value {
    let mut json = json!({
        "status": "ok",
        "action": action,
        "dir": dir.display(),
        "operation_id": receipt.operation_id,
        "revision": receipt.revision,
        "committed_at": receipt.committed_at,
        "replayed": receipt.replayed,
        "warnings": warnings,
    });
    if let (Some(out), Ok(serde_json::Value::Object(body))) =
        (json.as_object_mut(), serde_json::to_value(&receipt.body))
    {
        out.extend(body.into_iter().filter(|(key, _)| key != "action"));
    }
    json
}

pub fn validate(args: &DirArgs) -> Result<Reply> {
    let dir = LoopDir::open(&args.dir, Access::ReadOnly)?;
    let audit = dir.audit(clock::now())?;
    let valid = audit.is_valid();
    let streams: Vec<_> = audit
        .streams
        .iter()
        .map(|(stream, revision)| json!({"stream": stream, "revision": revision}))
        .collect();
    let json = json!({
        "status": if valid { "ok" } else { "failed" },
        "errors": audit.errors,
        "warnings": audit.warnings,
        "checked": {"dir": dir.display(), "iterations": audit.ledger.iterations, "revision": audit.ledger.revision, "streams": streams},
    });
    let mut text = if valid {
        format!(
            "valid: {}, journal revision {}, {} audited",
            words::count(audit.ledger.iterations, "iteration"),
            audit.ledger.revision,
            words::count(audit.streams.len() as u64, "stream")
        )
    } else {
        format!(
            "invalid: {} problems in {}",
            audit.errors.len(),
            dir.display()
        )
    };
    for error in &audit.errors {
        text.push_str(&format!("\n  error: {error}"));
    }
    Ok(Reply {
        json,
        text,
        code: if valid { 0 } else { 1 },
    })
}

pub fn status(args: &DirArgs) -> Result<Reply> {
    let dir = LoopDir::open(&args.dir, Access::ReadOnly)?;
    let Reading { revision, ledger } = dir.read()?;
    let now = clock::now();
    let verdict = dir.verdict(&ledger, now);
    let mut json = view::status_json(&ledger, revision, &verdict);
    json["dir"] = dir.display().into();
    let (_, driver) = dir.driver()?;
    let driver = loopx_core::dispatch::summary(&driver, loopx_app::platform::alive);
    let mut text = view::status_text(&ledger, &verdict, now);
    text.push_str(&format!("  driver      {}\n", driver.line()));
    json["driver"] = serde_json::to_value(&driver)?;
    Ok(Reply::ok(json, text))
}

pub fn done(args: &DirArgs) -> Result<Reply> {
    let dir = LoopDir::open(&args.dir, Access::ReadOnly)?;
    let Reading { ledger, .. } = dir
        .read()
        .context("the done arbiter needs a readable ledger")?;
    let verdict = dir.verdict(&ledger, clock::now());
    let text = match (verdict.done, verdict.reason) {
        (true, Some(reason)) => format!("done: {reason}"),
        (false, Some(reason)) => format!("not done: {reason}"),
        _ => "not done".to_owned(),
    } + if verdict.paused { " (paused)" } else { "" };
    let json = json!({
        "status": "ok", "action": "done", "dir": dir.display(),
        "done": verdict.done, "paused": verdict.paused, "reason": verdict.reason,
        "conditions": verdict.conditions,
    });
    Ok(Reply::ok(json, text))
}
