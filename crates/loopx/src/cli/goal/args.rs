//! The goal commands' flags (clap): which goal, as whom, under which
//! operation id, and each command's own arguments. Turning them into a
//! use case's inputs (the actor, the target, the operation id) is here too;
//! calling the use case and rendering it is the parent module's job.

use super::super::ledger::DirArgs;
use super::super::operation_id;
use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use loopx_app::driver::env;
use loopx_app::goal::{GoalTarget, Submit};
use loopx_app::loop_dir::LoopDir;
use loopx_core::digest::Digest;
use loopx_core::goal::{self, Actor};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::Access;
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
    #[arg(long, env = env::AGENT_ID)]
    pub agent_id: Option<String>,
}

impl GoalArgs {
    /// Without `--agent-id`, the owner; with one, that agent, whose id the
    /// owner's grammar must accept: `--agent-id ""` is refused, never
    /// taken to mean the owner.
    pub(crate) fn actor(&self) -> Result<Actor> {
        match &self.agent_id {
            Some(agent) => Ok(Actor::agent(agent).context("--agent-id / LOOPX_AGENT_ID")?),
            None => Ok(Actor::Owner),
        }
    }

    /// The goal a write acts on, as whom, and (`--goal-instance`) which
    /// lifetime it means.
    pub(super) fn target(&self, write: &WriteArgs) -> Result<GoalTarget> {
        Ok(GoalTarget {
            goal_id: self.goal_id.clone(),
            actor: self.actor()?,
            expected_instance: write.goal_instance.clone(),
        })
    }

    pub(super) fn open(&self, access: Access, store: Option<&str>) -> Result<LoopDir> {
        LoopDir::open(self.dir.at(store), access)
    }

    /// What every committing goal command needs: the loop opened for
    /// writing, the target, and the operation id.
    pub(super) fn writer(
        &self,
        write: &WriteArgs,
        store: Option<&str>,
    ) -> Result<(LoopDir, GoalTarget, OperationId)> {
        let dir = self.open(Access::ReadWrite, store)?;
        let id = write.id()?;
        Ok((dir, self.target(write)?, id))
    }
}

impl WriteArgs {
    /// `--operation-id`, or a fresh one.
    pub(super) fn id(&self) -> Result<OperationId> {
        operation_id(self.operation_id.as_deref())
    }

    /// Commit under the operation id, or (`preview`) only show the result.
    pub(super) fn submit(&self, preview: bool) -> Result<Submit> {
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
    /// Propose executable checks on an outcome's requirements from a JSON
    /// document `{outcome_id, criteria: [{id, validation_argv,
    /// timeout_seconds?, cwd?}]}`: shows the outcome as resolved (its
    /// objective, requirements, linked work) and each argv, and the basis
    /// `apply-checks` must cite. Writes nothing, runs nothing.
    PrepareChecks(PrepareChecksArgs),
    /// Configure the proposed checks (owner only: an agent could configure
    /// `true` and certify itself). Refused when the outcome's requirements
    /// or linked work changed since `prepare-checks` (its basis). Runs
    /// nothing: `loopx check run` does, or the driver's completion gate.
    ApplyChecks(ApplyChecksArgs),
}

#[derive(Debug, Args)]
pub struct PrepareChecksArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The check document (JSON).
    #[arg(long)]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ApplyChecksArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The check document (JSON), as proposed.
    #[arg(long)]
    pub file: PathBuf,
    /// The basis `prepare-checks` showed.
    #[arg(long, value_parser = Digest::parse)]
    pub basis: Digest,
    #[command(flatten)]
    pub write: WriteArgs,
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
    #[arg(long, env = env::AGENT_ID)]
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
    /// The frontier, with leases, a page at a time. Read-only.
    List(TodoListArgs),
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
pub struct TodoListArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// Todos per page (default 100, at most 1000).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start after the page that gave this `next_cursor`.
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct TodoAddArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// What the todo is, in a line.
    #[arg(required_unless_present_any = ["title_flag", "from_file"])]
    pub title: Option<String>,
    /// The same, as a flag (for scripts).
    #[arg(long = "title", id = "title_flag", conflicts_with = "title")]
    pub title_flag: Option<String>,
    /// An id of your choosing (default: t1, t2, ...).
    #[arg(long, conflicts_with = "from_file")]
    pub id: Option<String>,
    /// Add many todos as one operation, all or none: a JSON array of
    /// {"title": ..., "id": ...(optional)} objects, or one such object per
    /// line (JSON lines). A refused row is named and nothing is added.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["title", "title_flag"])]
    pub from_file: Option<PathBuf>,
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
    #[arg(long = "for", value_parser = super::super::ledger::parse_duration)]
    pub duration: u64,
}

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Should another turn run now? The decision, computed from the store
    /// (`--json` for the object: bounded, with the selected work, the
    /// frontier's counts and the first open gaps; `--detail` for every gap).
    ShouldRun(ShouldRunArgs),
}

#[derive(Debug, Args)]
pub struct ShouldRunArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// Answer with the full projection (every open gap and unresolved
    /// requirement) instead of the bounded answer an agent reads.
    #[arg(long)]
    pub detail: bool,
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
