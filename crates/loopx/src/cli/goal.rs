//! The goal commands: goal-acceptance, todo, quota should-run,
//! refresh-state and task-body. Each parses its flags, calls its use case
//! in `loopx_app::goal` / `loopx_app::continuation`, and renders the view.

use super::ledger::DirArgs;
use super::{operation_id, Reply};
use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use loopx_app::continuation;
use loopx_app::goal::acceptance::{self, Adoption, GoalInspection};
use loopx_app::goal::refresh::{self, Refresh, RefreshView};
use loopx_app::goal::todo::{self as todos, TodoList};
use loopx_app::goal::{read_document, GoalReceiptView, GoalTarget, GoalWrite, Submit};
use loopx_app::loop_dir::LoopDir;
use loopx_core::digest::Digest;
use loopx_core::goal::{self, Actor};
use loopx_core::operation::OperationId;
use loopx_core::words;
use loopx_store::sqlite::Access;
use serde::Serialize;
use std::path::PathBuf;

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

    /// The goal a write acts on, as whom, and (`--goal-instance`) which
    /// lifetime it means.
    fn target(&self, write: &WriteArgs) -> Result<GoalTarget> {
        Ok(GoalTarget {
            goal_id: self.goal_id.clone(),
            actor: self.actor()?,
            expected_instance: write.goal_instance.clone(),
        })
    }

    fn open(&self, access: Access) -> Result<LoopDir> {
        LoopDir::open(&self.dir.dir, access)
    }

    /// What every committing goal command needs: the loop opened for
    /// writing, the target, and the operation id.
    fn writer(&self, write: &WriteArgs) -> Result<(LoopDir, GoalTarget, OperationId)> {
        let dir = self.open(Access::ReadWrite)?;
        let id = write.id()?;
        Ok((dir, self.target(write)?, id))
    }
}

impl WriteArgs {
    /// `--operation-id`, or a fresh one.
    fn id(&self) -> Result<OperationId> {
        operation_id(self.operation_id.as_deref())
    }

    /// Commit under the operation id, or (`preview`) only show the result.
    fn submit(&self, preview: bool) -> Result<Submit> {
        Ok(match preview {
            true => Submit::Preview,
            false => Submit::Execute(self.id()?),
        })
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
    #[arg(long, value_parser = Digest::parse)]
    pub digest: Digest,
    /// The objective_work_digest from `inspect --agent-id`.
    #[arg(long, value_parser = Digest::parse)]
    pub work_digest: Digest,
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
    #[arg(long, value_parser = Digest::parse)]
    pub checkpoint: Digest,
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

/// The `--json` object of a command: its view, with `status` and `action`.
fn reply(action: &str, view: &impl Serialize, text: String) -> Result<Reply> {
    let mut json = serde_json::to_value(view)?;
    json["status"] = "ok".into();
    json["action"] = action.into();
    Ok(Reply::ok(json, text))
}

fn receipt_reply(action: &str, receipt: &GoalReceiptView) -> Result<Reply> {
    reply(action, receipt, receipt.text())
}

/// A write that may have been a preview; `to_write` says how to write it.
fn write_reply(action: &str, write: &GoalWrite, to_write: &str) -> Result<Reply> {
    match write {
        GoalWrite::Committed(receipt) => receipt_reply(action, receipt),
        GoalWrite::Previewed(preview) => {
            let text = format!(
                "preview (nothing written): {}; {to_write} to write",
                preview.receipt.effects.join(", ")
            );
            reply("preview", preview, text)
        }
    }
}

pub fn acceptance(command: &AcceptanceCommand) -> Result<Reply> {
    match command {
        AcceptanceCommand::Inspect(args) => {
            let dir = args.open(Access::ReadOnly)?;
            let inspection = acceptance::inspect(&dir, &args.goal_id, &args.actor()?)?;
            let text = inspect_text(&inspection);
            reply("goal-acceptance-inspect", &inspection, text)
        }
        AcceptanceCommand::PrepareObjective(args) => {
            let document = read_document(&args.document)?;
            let how = args.write.submit(!args.execute)?;
            let dir = args.goal.open(how.access())?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::prepare_objective(&dir, &target, document, &how)?;
            write_reply("prepare-objective", &written, "pass --execute")
        }
        AcceptanceCommand::ReviseObjective(ReviseArgs {
            objective: args,
            expected_provider_revision,
        }) => {
            let document = read_document(&args.document)?;
            let how = args.write.submit(!args.execute)?;
            let dir = args.goal.open(how.access())?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::revise_objective(
                &dir,
                &target,
                document,
                *expected_provider_revision,
                &how,
            )?;
            write_reply("revise-objective", &written, "pass --execute")
        }
        AcceptanceCommand::AdoptObjective(args) => {
            let adoption = Adoption {
                revision: args.revision,
                digest: args.digest.clone(),
                work_digest: args.work_digest.clone(),
                review_summary: args.review_summary.clone(),
            };
            let (dir, target, op) = args.goal.writer(&args.write)?;
            let receipt = acceptance::adopt_objective(&dir, &target, adoption, &op)?;
            receipt_reply("adopt-objective", &receipt)
        }
        AcceptanceCommand::RefineOutcome(args) => {
            let update = read_document(&args.document)?;
            let how = args.write.submit(args.dry_run)?;
            let dir = args.goal.open(how.access())?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::refine_outcome(&dir, &target, update, &how)?;
            write_reply("refine-outcome", &written, "run it without --dry-run")
        }
        AcceptanceCommand::AckGap(args) => {
            let (dir, target, op) = args.goal.writer(&args.write)?;
            let receipt = acceptance::ack_gap(
                &dir,
                &target,
                args.outcome_id.clone(),
                args.checkpoint.clone(),
                &op,
            )?;
            receipt_reply("ack-gap", &receipt)
        }
        AcceptanceCommand::RegisterAgent(args) => {
            let dir = LoopDir::open(&args.dir.dir, Access::ReadWrite)?;
            let target = GoalTarget {
                goal_id: args.goal_id.clone(),
                actor: Actor::Owner,
                expected_instance: args.write.goal_instance.clone(),
            };
            let receipt = acceptance::register_agent(
                &dir,
                &target,
                args.agent_id.clone(),
                &args.write.id()?,
            )?;
            receipt_reply("register-agent", &receipt)
        }
        AcceptanceCommand::Recreate(args) => {
            let (dir, target, op) = args.goal.writer(&args.write)?;
            let receipt = acceptance::recreate(
                &dir,
                &target,
                args.objective.clone(),
                args.reason.clone(),
                &op,
            )?;
            receipt_reply("recreate", &receipt)
        }
    }
}

fn inspect_text(inspection: &GoalInspection) -> String {
    let readback = inspection.readback();
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

fn todo_list_text(list: &TodoList) -> String {
    let now = list.read_at;
    let mut text = String::new();
    for todo in &list.todos {
        let holder = match (todo.holder(now), &todo.lease) {
            (Some(holder), Some(lease)) => format!(
                " leased to {holder} until {} (in {})",
                lease.expires_at,
                words::duration(lease.expires_at.duration_since(now).as_secs().max(0) as u64)
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
    if list.todos.is_empty() {
        text.push_str("no todos\n");
    }
    text
}

pub fn todo(command: &TodoCommand) -> Result<Reply> {
    let receipt = match command {
        TodoCommand::List(args) => {
            let list = todos::list(&args.open(Access::ReadOnly)?, &args.goal_id)?;
            let text = todo_list_text(&list);
            return reply("todo-list", &list, text);
        }
        TodoCommand::Add(args) => {
            let (dir, target, op) = args.goal.writer(&args.write)?;
            let title = args.title.clone().or_else(|| args.title_flag.clone());
            todos::add(
                &dir,
                &target,
                args.id.clone(),
                title.unwrap_or_default(),
                &op,
            )?
        }
        TodoCommand::Claim(TodoLeaseArgs { todo, ttl }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::claim(&dir, &target, &todo.id, *ttl, &todo.note, &op)?
        }
        TodoCommand::Renew(TodoLeaseArgs { todo, ttl }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::renew(&dir, &target, &todo.id, *ttl, &todo.note, &op)?
        }
        TodoCommand::Release(todo) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::release(&dir, &target, &todo.id, &todo.note, &op)?
        }
        TodoCommand::Complete(todo) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::complete(&dir, &target, &todo.id, &todo.note, &op)?
        }
        TodoCommand::Block(TodoBlockArgs { todo, reason }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::block(&dir, &target, &todo.id, reason.clone(), &todo.note, &op)?
        }
        TodoCommand::Defer(TodoDeferArgs { todo, duration }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write)?;
            todos::defer(&dir, &target, &todo.id, *duration, &todo.note, &op)?
        }
    };
    receipt_reply("todo", &receipt)
}

pub fn quota(command: &QuotaCommand) -> Result<Reply> {
    let QuotaCommand::ShouldRun(args) = command;
    let dir = args.open(Access::ReadOnly)?;
    let decision = continuation::should_run(&dir, &args.goal_id, &args.actor()?)?;
    let hint = &decision.scheduler_hint;
    let text = format!(
        "{} ({}): {}",
        hint.action.as_str(),
        hint.reason_code,
        hint.reason
    );
    reply("quota-should-run", &decision, text)
}

pub fn task_body(args: &TaskBodyArgs) -> Result<Reply> {
    let dir = args.goal.open(Access::ReadOnly)?;
    let body = continuation::task_body(&dir, &args.goal.goal_id, &args.goal.actor()?)?;
    let text = body.body.clone();
    reply("task-body", &body, text)
}

pub fn refresh_state(args: &RefreshArgs) -> Result<Reply> {
    // Read (and bound) the document before the loop is opened for writing.
    let outcome_update = match &args.goal_outcome_update_json {
        Some(path) => Some(read_document(path)?),
        None => None,
    };
    let (dir, target, base) = args.goal.writer(&args.write)?;
    let refresh = Refresh {
        note: args.note.clone(),
        evidence_refs: args.evidence_refs.clone(),
        complete: args.complete.clone(),
        release: args.release.clone(),
        block: args.block.clone(),
        outcome_update,
    };
    let view = refresh::refresh_state(&dir, &target, refresh, &base)?;
    let text = refresh_text(&view);
    reply("refresh-state", &view, text)
}

fn refresh_text(view: &RefreshView) -> String {
    let writeback = view.writeback.text();
    match &view.outcome {
        Some(o) => format!(
            "outcome: {} (revision {})\nwriteback: {writeback}",
            o.effects.join(", "),
            o.revision
        ),
        None => writeback,
    }
}
