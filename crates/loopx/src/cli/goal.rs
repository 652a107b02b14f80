//! The goal commands: goal-acceptance, todo, quota should-run,
//! refresh-state and task-body.

use super::ledger::DirArgs;
use super::{operation_id, Reply};
use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use loopx_app::loop_dir::{GoalReading, LoopDir};
use loopx_app::{clock, fsutil};
use loopx_core::digest::Digest;
use loopx_core::goal::outcome::OutcomeUpdate;
use loopx_core::goal::todo::TodoAction;
use loopx_core::goal::{self, inspect, Actor, GoalCommand, GoalReceipt, GoalRequest};
use loopx_core::operation::OperationId;
use loopx_core::text::limits::DOCUMENT_BYTES;
use loopx_core::words;
use loopx_store::sqlite::Access;
use loopx_store::Receipt;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Which goal, as whom.
#[derive(Debug, Args)]
pub struct GoalArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The goal (a loop's own goal is `main`).
    #[arg(long, default_value = goal::DEFAULT_GOAL_ID)]
    pub goal_id: String,
    /// Act as this agent; without it, act as the goal's owner.
    #[arg(long, env = "LOOPX_AGENT_ID")]
    pub agent_id: Option<String>,
}

impl GoalArgs {
    /// Without `--agent-id`, the owner; with one, that agent, whose id the
    /// owner's grammar must accept: `--agent-id ""` is refused, never
    /// taken to mean the owner.
    fn actor(&self) -> Result<Actor> {
        match &self.agent_id {
            Some(agent) => Ok(Actor::agent(agent).context("--agent-id / LOOPX_AGENT_ID")?),
            None => Ok(Actor::Owner),
        }
    }
}

/// How a write names itself and the goal lifetime it means.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    pub operation_id: Option<String>,
    /// Refuse unless this is still the goal's current instance (e.g. main#1).
    #[arg(long)]
    pub goal_instance: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AcceptanceCommand {
    /// The full readback: objective, revisions, adoption per agent,
    /// outcomes, requirements, reviews, linked work, gaps. Read-only.
    Inspect(GoalArgs),
    /// Propose an operating-objective revision for the owner (saves only
    /// with --execute; previews otherwise).
    PrepareObjective(ObjectiveArgs),
    /// Apply an operating-objective revision as the owner (previews unless
    /// --execute). Refuses agent actors.
    ReviseObjective(ReviseArgs),
    /// Record that this agent reviewed its work against the current objective.
    AdoptObjective(AdoptArgs),
    /// Create or refine a supporting outcome from a JSON update document.
    RefineOutcome(RefineArgs),
    /// Acknowledge an outcome gap at its checkpoint (discharges the replan
    /// obligation until something material changes).
    AckGap(AckArgs),
    /// Register an agent of this goal (the second one turns on the
    /// multi-agent adoption fences).
    RegisterAgent(RegisterArgs),
    /// Retire the current goal lifetime and start a successor (owner only).
    Recreate(RecreateArgs),
}

#[derive(Debug, Args)]
pub struct ObjectiveArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// revision.json: {"objective": "...", "reason": "...", "source_ref": "..."}
    #[arg(long)]
    pub document: PathBuf,
    /// Write (without it, only show what would be written).
    #[arg(long)]
    pub execute: bool,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct ReviseArgs {
    #[command(flatten)]
    pub objective: ObjectiveArgs,
    /// The provider_revision `goal-acceptance inspect` showed.
    #[arg(long)]
    pub expected_provider_revision: u64,
}

#[derive(Debug, Args)]
pub struct AdoptArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The objective revision to adopt (from `goal-acceptance inspect`).
    #[arg(long)]
    pub revision: u64,
    /// The current_digest from inspect.
    #[arg(long)]
    pub digest: String,
    /// The objective_work_digest from `inspect --agent-id`.
    #[arg(long)]
    pub work_digest: String,
    /// Why this agent accepts the revision, in a sentence.
    #[arg(long)]
    pub review_summary: String,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct RefineArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The outcome update document (JSON).
    #[arg(long)]
    pub document: PathBuf,
    /// Check everything and show the result; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct AckArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The outcome whose gap is acknowledged.
    #[arg(long)]
    pub outcome_id: String,
    /// The gap checkpoint `goal-acceptance inspect` showed for it.
    #[arg(long)]
    pub checkpoint: String,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The goal (a loop's own goal is `main`).
    #[arg(long, default_value = goal::DEFAULT_GOAL_ID)]
    pub goal_id: String,
    /// The agent to register.
    #[arg(long, env = "LOOPX_AGENT_ID")]
    pub agent_id: String,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct RecreateArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The successor's objective.
    #[arg(long)]
    pub objective: String,
    /// Why the goal is recreated (kept in its history).
    #[arg(long, default_value = "")]
    pub reason: String,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Subcommand)]
pub enum TodoCommand {
    /// Add work to the frontier (after the existing todos, in priority order).
    Add(TodoAddArgs),
    /// The frontier, with leases. Read-only.
    List(GoalArgs),
    /// Take a lease on a todo (an expired lease may be taken over).
    Claim(TodoLeaseArgs),
    /// Extend the lease you hold.
    Renew(TodoLeaseArgs),
    /// Give back the lease you hold.
    Release(TodoNoteArgs),
    /// Finish a todo (final: it cannot be reopened).
    Complete(TodoNoteArgs),
    /// Mark a todo blocked, with the reason.
    Block(TodoBlockArgs),
    /// Put a todo off for a while.
    Defer(TodoDeferArgs),
}

#[derive(Debug, Args)]
pub struct TodoAddArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// What the todo is, in a line.
    #[arg(required_unless_present = "title_flag")]
    pub title: Option<String>,
    /// The same, as a flag (for scripts).
    #[arg(long = "title", id = "title_flag", conflicts_with = "title")]
    pub title_flag: Option<String>,
    /// An id of your choosing (default: t1, t2, ...).
    #[arg(long)]
    pub id: Option<String>,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct TodoNoteArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The todo's id (from `loopx todo list`).
    pub id: String,
    /// An evidence note kept with the todo.
    #[arg(long, default_value = "")]
    pub note: String,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Debug, Args)]
pub struct TodoLeaseArgs {
    #[command(flatten)]
    pub todo: TodoNoteArgs,
    /// Lease length in seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl: u64,
}

#[derive(Debug, Args)]
pub struct TodoBlockArgs {
    #[command(flatten)]
    pub todo: TodoNoteArgs,
    /// Why it is blocked, and what would unblock it.
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct TodoDeferArgs {
    #[command(flatten)]
    pub todo: TodoNoteArgs,
    /// How long: 90m, 2h, 1d.
    #[arg(long = "for", value_parser = super::ledger::parse_duration)]
    pub duration: u64,
}

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Should another turn run now? The decision, computed from the store (`--json` for the full object).
    ShouldRun(GoalArgs),
}

/// The agent's writeback at the end of a turn: an evidence note, todo
/// transitions, and optionally an outcome refinement/review, which commits
/// first. If the writeback then fails, the error says what committed;
/// retrying the identical command finishes the job without duplicating.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The turn's evidence note, kept in the goal's history.
    #[arg(long, default_value = "")]
    pub note: String,
    /// Evidence this turn produced (repeatable).
    #[arg(long = "evidence-ref")]
    pub evidence_refs: Vec<String>,
    /// Complete this todo (repeatable).
    #[arg(long = "complete")]
    pub complete: Vec<String>,
    /// Release this todo's lease (repeatable).
    #[arg(long = "release")]
    pub release: Vec<String>,
    /// Block a todo: ID=reason (repeatable).
    #[arg(long = "block", value_parser = parse_block)]
    pub block: Vec<(String, String)>,
    /// An outcome update document to apply first.
    #[arg(long)]
    pub goal_outcome_update_json: Option<PathBuf>,
    #[command(flatten)]
    pub write: WriteArgs,
}

/// The prompt for the next turn, rendered from state.
#[derive(Debug, Args)]
pub struct TaskBodyArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
}

fn parse_block(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((id, reason)) if !id.trim().is_empty() && !reason.trim().is_empty() => {
            Ok((id.trim().to_owned(), reason.trim().to_owned()))
        }
        _ => Err("write --block ID=reason".into()),
    }
}

/// A JSON document the user named, read no further than the limit for
/// documents.
fn read_document<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = fsutil::read_bounded(path, DOCUMENT_BYTES)?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a valid document", path.display()))
}

/// The command a CLI goal write sends.
fn goal_command(goal: &GoalArgs, write: &WriteArgs, request: GoalRequest) -> Result<GoalCommand> {
    Ok(GoalCommand {
        actor: goal.actor()?,
        expected_instance: write.goal_instance.clone(),
        request,
        base_revision: None,
    })
}

/// Show what a request would do, writing nothing.
fn preview(
    dir: &LoopDir,
    goal: &GoalArgs,
    write: &WriteArgs,
    request: GoalRequest,
) -> Result<Reply> {
    let decided = dir.goal_preview(&goal.goal_id, &goal_command(goal, write, request)?)?;
    let json = json!({"status": "ok", "action": "preview", "would_write": decided.event.is_some(), "receipt": decided.receipt, "event": decided.event});
    let text = format!(
        "preview (nothing written): {}; pass --execute to write",
        decided.receipt.effects.join(", ")
    );
    Ok(Reply::ok(json, text))
}

fn receipt_reply(action: &str, receipt: &Receipt<GoalReceipt>) -> Reply {
    let mut json = json!({
        "status": "ok", "action": action, "operation_id": receipt.operation_id, "revision": receipt.revision,
        "replayed": receipt.replayed, "unchanged": receipt.unchanged,
        "goal_id": receipt.body.goal_id, "instance_id": receipt.body.instance_id, "effects": receipt.body.effects,
    });
    for (key, value) in &receipt.body.values {
        json[key] = value.clone();
    }
    let mut text = format!(
        "{} (goal {}, revision {})",
        receipt.body.effects.join(", "),
        receipt.body.instance_id,
        receipt.revision
    );
    if let Some(id) = receipt.body.values.get("todo_id").and_then(|v| v.as_str()) {
        text = format!("{id}: {text}");
    }
    if receipt.replayed {
        text.push_str(&format!(
            " [replay of operation {}: nothing written]",
            receipt.operation_id
        ));
    } else if !receipt.unchanged {
        // Named so that a doubted reply can be confirmed by a replay.
        text.push_str(&format!(" [operation {}]", receipt.operation_id));
    }
    Reply::ok(json, text)
}

fn open(dir: &DirArgs, access: Access) -> Result<LoopDir> {
    LoopDir::open(&dir.dir, access)
}

/// Write `request` (or, with `dry_run`, only show what it would write).
fn submit(
    goal: &GoalArgs,
    write: &WriteArgs,
    action: &str,
    request: GoalRequest,
    dry_run: bool,
) -> Result<Reply> {
    if dry_run {
        return preview(&open(&goal.dir, Access::ReadOnly)?, goal, write, request);
    }
    let dir = open(&goal.dir, Access::ReadWrite)?;
    let id = operation_id(write.operation_id.as_deref())?;
    Ok(receipt_reply(
        action,
        &dir.goal_execute(&goal.goal_id, &id, &goal_command(goal, write, request)?)?,
    ))
}

pub fn acceptance(command: &AcceptanceCommand) -> Result<Reply> {
    match command {
        AcceptanceCommand::Inspect(args) => {
            let dir = open(&args.dir, Access::ReadOnly)?;
            let actor = args.actor()?;
            let GoalReading { goal, revision } = dir.goal(&args.goal_id)?;
            let readback = inspect::readback(&goal, revision, actor.agent_id(), clock::now());
            let mut json = serde_json::to_value(&readback)?;
            json["status"] = "ok".into();
            json["action"] = "goal-acceptance-inspect".into();
            Ok(Reply::ok(json, inspect_text(&readback)))
        }
        AcceptanceCommand::PrepareObjective(args) => {
            let request = GoalRequest::PrepareObjective {
                document: read_document(&args.document)?,
            };
            submit(
                &args.goal,
                &args.write,
                "prepare-objective",
                request,
                !args.execute,
            )
        }
        AcceptanceCommand::ReviseObjective(ReviseArgs {
            objective: args,
            expected_provider_revision,
        }) => {
            let request = GoalRequest::ReviseObjective {
                document: read_document(&args.document)?,
                expected_provider_revision: *expected_provider_revision,
            };
            submit(
                &args.goal,
                &args.write,
                "revise-objective",
                request,
                !args.execute,
            )
        }
        AcceptanceCommand::AdoptObjective(args) => {
            let request = GoalRequest::AdoptObjective {
                revision: args.revision,
                digest: parse_digest(&args.digest)?,
                work_digest: parse_digest(&args.work_digest)?,
                review_summary: args.review_summary.clone(),
            };
            submit(&args.goal, &args.write, "adopt-objective", request, false)
        }
        AcceptanceCommand::RefineOutcome(args) => {
            let request = GoalRequest::RefineOutcome {
                update: read_document(&args.document)?,
            };
            submit(
                &args.goal,
                &args.write,
                "refine-outcome",
                request,
                args.dry_run,
            )
        }
        AcceptanceCommand::AckGap(args) => {
            let request = GoalRequest::AcknowledgeGap {
                outcome_id: args.outcome_id.clone(),
                checkpoint: parse_digest(&args.checkpoint)?,
            };
            submit(&args.goal, &args.write, "ack-gap", request, false)
        }
        AcceptanceCommand::RegisterAgent(args) => {
            // Registration is the owner's act, whoever the agent is.
            let goal = GoalArgs {
                dir: DirArgs {
                    dir: args.dir.dir.clone(),
                },
                goal_id: args.goal_id.clone(),
                agent_id: None,
            };
            let request = GoalRequest::RegisterAgent {
                agent_id: args.agent_id.clone(),
            };
            submit(&goal, &args.write, "register-agent", request, false)
        }
        AcceptanceCommand::Recreate(args) => {
            let request = GoalRequest::Recreate {
                objective: args.objective.clone(),
                reason: args.reason.clone(),
            };
            submit(&args.goal, &args.write, "recreate", request, false)
        }
    }
}

fn parse_digest(text: &str) -> Result<Digest> {
    let hex = text.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64
        && hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        Ok(serde_json::from_value(json!(text))?)
    } else {
        anyhow::bail!("{text:?} is not a digest: expected sha256:<64 lowercase hex>, as `loopx goal-acceptance inspect` prints")
    }
}

fn inspect_text(readback: &inspect::Readback<'_>) -> String {
    let mut out = format!(
        "goal {} (lifetime {}, provider revision {})\n  original objective: {}\n",
        readback.instance_id,
        readback.lifetime,
        readback.provider_revision,
        readback.original_objective
    );
    let objective = &readback.objective;
    if objective.current_revision > 0 {
        out.push_str(&format!(
            "  current objective (revision {}): {}\n",
            objective.current_revision, objective.current_objective
        ));
    }
    out.push_str(&format!(
        "  objective digest: {}\n",
        objective.current_digest
    ));
    for line in &objective.adoption {
        out.push_str(&format!("  agent {}: {}\n", line.agent_id, line.state));
    }
    if let Some(work) = &objective.objective_work_digest {
        out.push_str(&format!("  objective work digest: {work}\n"));
    }
    for proposal in objective.pending_proposals {
        out.push_str(&format!(
            "  proposal by {} (would be revision {}): {}\n",
            proposal.proposed_by, proposal.revision, proposal.objective
        ));
    }
    for outcome in &readback.outcomes {
        out.push_str(&format!(
            "  outcome {} [{}] ({}): {}\n",
            outcome.id, outcome.status, outcome.responsible_agent, outcome.original_objective
        ));
        for requirement in &outcome.requirements {
            out.push_str(&format!(
                "    {} [{}] {}\n",
                requirement.id,
                requirement.state.as_str(),
                requirement.description
            ));
        }
        for work in &outcome.linked_work {
            out.push_str(&format!(
                "    work {} {}\n",
                work.todo_id,
                work.status.map_or("missing", |s| s.as_str())
            ));
        }
    }
    for gap in &readback.gaps {
        out.push_str(&format!(
            "  gap {} {} checkpoint {}\n",
            gap.outcome_id,
            if gap.acknowledged {
                "(acknowledged)"
            } else {
                "(open)"
            },
            gap.checkpoint
        ));
    }
    out
}

pub fn todo(command: &TodoCommand) -> Result<Reply> {
    let (goal, write, request) = match command {
        TodoCommand::List(args) => {
            let dir = open(&args.dir, Access::ReadOnly)?;
            let GoalReading { goal, .. } = dir.goal(&args.goal_id)?;
            let now = clock::now();
            let mut text = String::new();
            for todo in &goal.todos {
                let holder = match (todo.holder(now), &todo.lease) {
                    (Some(holder), Some(lease)) => format!(
                        " leased to {holder} until {} (in {})",
                        lease.expires_at,
                        words::duration(
                            lease.expires_at.duration_since(now).as_secs().max(0) as u64
                        )
                    ),
                    _ => String::new(),
                };
                text.push_str(&format!(
                    "{:<6} {:<9} {}{holder}\n",
                    todo.id,
                    todo.status.as_str(),
                    todo.title
                ));
            }
            if goal.todos.is_empty() {
                text.push_str("no todos\n");
            }
            return Ok(Reply::ok(
                json!({"status": "ok", "action": "todo-list", "todos": goal.todos}),
                text,
            ));
        }
        TodoCommand::Add(args) => (
            &args.goal,
            &args.write,
            GoalRequest::AddTodo {
                id: args.id.clone(),
                title: args
                    .title
                    .clone()
                    .or_else(|| args.title_flag.clone())
                    .unwrap_or_default(),
            },
        ),
        TodoCommand::Claim(args) => todo_request(
            &args.todo,
            TodoAction::Claim {
                ttl_seconds: args.ttl,
            },
        ),
        TodoCommand::Renew(args) => todo_request(
            &args.todo,
            TodoAction::Renew {
                ttl_seconds: args.ttl,
            },
        ),
        TodoCommand::Release(args) => todo_request(args, TodoAction::Release),
        TodoCommand::Complete(args) => todo_request(args, TodoAction::Complete),
        TodoCommand::Block(args) => todo_request(
            &args.todo,
            TodoAction::Block {
                reason: args.reason.clone(),
            },
        ),
        TodoCommand::Defer(args) => todo_request(
            &args.todo,
            TodoAction::Defer {
                seconds: args.duration,
            },
        ),
    };
    let dir = open(&goal.dir, Access::ReadWrite)?;
    let id = operation_id(write.operation_id.as_deref())?;
    Ok(receipt_reply(
        "todo",
        &dir.goal_execute(&goal.goal_id, &id, &goal_command(goal, write, request)?)?,
    ))
}

fn todo_request(args: &TodoNoteArgs, action: TodoAction) -> (&GoalArgs, &WriteArgs, GoalRequest) {
    (
        &args.goal,
        &args.write,
        GoalRequest::Todo {
            id: args.id.clone(),
            action,
            note: args.note.clone(),
        },
    )
}

pub fn quota(command: &QuotaCommand) -> Result<Reply> {
    let QuotaCommand::ShouldRun(args) = command;
    let dir = open(&args.dir, Access::ReadOnly)?;
    let decision = dir.decision(&args.goal_id, &args.actor()?)?.should_run;
    let hint = &decision.scheduler_hint;
    let text = format!(
        "{} ({}): {}",
        hint.action.as_str(),
        hint.reason_code,
        hint.reason
    );
    let mut json = serde_json::to_value(&decision)?;
    json["status"] = "ok".into();
    json["action"] = "quota-should-run".into();
    Ok(Reply::ok(json, text))
}

pub fn task_body(args: &TaskBodyArgs) -> Result<Reply> {
    let dir = open(&args.goal.dir, Access::ReadOnly)?;
    let body = dir.task_body(&args.goal.goal_id, &args.goal.actor()?)?;
    let json = json!({"status": "ok", "action": "task-body", "bytes": body.len(), "digest": Digest::of_bytes(body.as_bytes()), "body": body});
    Ok(Reply::ok(json, body))
}

pub fn refresh_state(args: &RefreshArgs) -> Result<Reply> {
    // Read (and bound) the document before the loop is opened for writing.
    let update: Option<OutcomeUpdate> = match &args.goal_outcome_update_json {
        Some(path) => Some(read_document(path)?),
        None => None,
    };
    let dir = open(&args.goal.dir, Access::ReadWrite)?;
    let base = operation_id(args.write.operation_id.as_deref())?;
    let part = |suffix: &str| {
        OperationId::parse(&format!("{base}.{suffix}"))
            .context("--operation-id is too long to derive its parts; use at most 110 characters")
    };
    let mut todos: Vec<(String, TodoAction)> = Vec::new();
    todos.extend(
        args.complete
            .iter()
            .map(|id| (id.clone(), TodoAction::Complete)),
    );
    todos.extend(
        args.release
            .iter()
            .map(|id| (id.clone(), TodoAction::Release)),
    );
    todos.extend(args.block.iter().map(|(id, reason)| {
        (
            id.clone(),
            TodoAction::Block {
                reason: reason.clone(),
            },
        )
    }));
    let request = GoalRequest::Writeback {
        note: args.note.clone(),
        evidence_refs: args.evidence_refs.clone(),
        todos,
    };
    let writeback_command = goal_command(&args.goal, &args.write, request)?;
    // Refuse a malformed writeback before the outcome commits, so a bad
    // --note never leaves half a refresh behind.
    goal::input::check(&writeback_command)?;
    let mut outcome = None;
    if let Some(update) = update {
        outcome = Some(dir.goal_execute(
            &args.goal.goal_id,
            &part("outcome")?,
            &goal_command(
                &args.goal,
                &args.write,
                GoalRequest::RefineOutcome { update },
            )?,
        )?);
    }
    let writeback = dir.goal_execute(&args.goal.goal_id, &part("writeback")?, &writeback_command).map_err(|error| match &outcome {
        Some(committed) => error.context(format!(
            "the outcome refinement already committed (operation {}, revision {}); the writeback did not: fix the cause and repeat this exact command with --operation-id {base} to finish without duplicating",
            committed.operation_id, committed.revision
        )),
        None => error,
    })?;
    let mut reply = receipt_reply("refresh-state", &writeback);
    reply.json["outcome"] = outcome.as_ref().map_or(serde_json::Value::Null, |o| json!({"operation_id": o.operation_id, "revision": o.revision, "replayed": o.replayed, "effects": o.body.effects}));
    if let Some(o) = &outcome {
        reply.text = format!(
            "outcome: {} (revision {})\nwriteback: {}",
            o.body.effects.join(", "),
            o.revision,
            reply.text
        );
    }
    Ok(reply)
}
