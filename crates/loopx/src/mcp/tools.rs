//! The MCP tools, one per use case an agent needs inside a turn. Each
//! parses its input (a Rust type; its JSON schema is generated from it),
//! binds goal, agent and dispatch from the server's [`Binding`], calls the
//! one `loopx_app` function the CLI calls for the same command, and hands
//! the result to [`super::error::tool_result`].
//!
//! Inputs carry no routing (no loop, goal or agent): they are
//! `deny_unknown_fields`, so a call that tries to name another loop or
//! agent is rejected (rmcp answers a tool error: the parameters do not
//! deserialize) rather than silently ignored.
//! Every mutating tool requires an `operation_id`: repeating a call with
//! the same id and input replays its receipt and writes nothing.

use super::error::tool_result;
use super::Binding;
use anyhow::Result;
use loopx_app::continuation;
use loopx_app::goal::acceptance::{self, Adoption};
use loopx_app::goal::refresh::{self, Refresh};
use loopx_app::goal::todo as todos;
use loopx_app::goal::{GoalReceiptView, GoalTarget, GoalWrite, Submit};
use loopx_app::ledger;
use loopx_app::loop_dir::LoopDir;
use loopx_app::operation;
use loopx_app::AppError;
use loopx_core::digest::Digest;
use loopx_core::goal::objective::ObjectiveDocument;
use loopx_core::goal::outcome::OutcomeUpdate;

use loopx_app::iteration_input::{IterationInput, Provenance};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::Access;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler};
use serde::{Deserialize, Serialize};

type ToolResult = std::result::Result<CallToolResult, ErrorData>;

/// A todo transition's input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInput {
    /// The todo's id (work_context names the selected one).
    pub todo_id: String,
    /// An evidence note kept with the todo.
    #[serde(default)]
    pub note: String,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// A lease's input: the todo and how long to hold it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseInput {
    /// The todo's id (work_context names the selected one).
    pub todo_id: String,
    /// Lease length in seconds.
    pub ttl_seconds: u64,
    /// An evidence note kept with the todo.
    #[serde(default)]
    pub note: String,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// An evidence note for the goal's history.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceInput {
    /// What was found or done, in a few sentences.
    pub note: String,
    /// References to the evidence (paths, commits, URLs).
    #[serde(default)]
    pub evidence_refs: Vec<String>,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// A todo to mark blocked, and why.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockInput {
    pub todo_id: String,
    /// Why it is blocked, and what would unblock it.
    pub reason: String,
}

/// What should_run answers.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShouldRunInput {
    /// The full projection (every open gap and unresolved requirement)
    /// instead of the bounded answer: only when planning needs it.
    #[serde(default)]
    pub detail: bool,
}

/// The turn's writeback.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefreshInput {
    /// The turn's evidence note, kept in the goal's history.
    #[serde(default)]
    pub note: String,
    /// Evidence this turn produced.
    #[serde(default)]
    pub evidence_refs: Vec<String>,
    /// Todos this turn finished.
    #[serde(default)]
    pub complete: Vec<String>,
    /// Todos whose lease this turn gives back.
    #[serde(default)]
    pub release: Vec<String>,
    /// Todos this turn found blocked.
    #[serde(default)]
    pub block: Vec<BlockInput>,
    /// An outcome update document (as refine_outcome's `update`), committed first.
    #[serde(default)]
    pub outcome_update: Option<serde_json::Map<String, serde_json::Value>>,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// An outcome update.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefineInput {
    /// The outcome update document of `loopx goal-acceptance refine-outcome`:
    /// {"outcome_id", "objective"?, "add_requirements": [{"id","description"}],
    /// "link_todos": [todo ids], "source": {"ref","summary"}, "reviews":
    /// [{"requirement_id","conclusion": "met"|"unmet"|"uncertain","reasoning","evidence_refs"}]}.
    pub update: serde_json::Map<String, serde_json::Value>,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// A proposed operating-objective revision.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareInput {
    /// The objective as it should read.
    pub objective: String,
    /// Why it should change.
    #[serde(default)]
    pub reason: String,
    /// Where the change was asked for.
    #[serde(default)]
    pub source_ref: String,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// An adoption of the current objective.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdoptInput {
    /// The objective revision to adopt.
    pub revision: u64,
    /// The objective's current digest.
    pub digest: String,
    /// The objective work digest the agent's readback shows.
    pub work_digest: String,
    /// Why this agent accepts the revision, in a sentence.
    pub review_summary: String,
    /// Stable id for this call; repeat it with the same input to recover a lost reply.
    pub operation_id: String,
}

/// A request to run the owner's configured checks of one outcome. It
/// names no command and carries no result: what runs is the owner's.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunChecksInput {
    /// The outcome whose configured checks to run.
    pub outcome_id: String,
    /// Stable id for this call; repeating it returns where the checks stand
    /// without running them again.
    pub operation_id: String,
}

/// The tool router over one [`Binding`].
#[derive(Clone)]
pub struct Tools {
    binding: Binding,
    tool_router: ToolRouter<Self>,
}

impl Tools {
    pub fn new(binding: Binding) -> Self {
        Tools {
            binding,
            tool_router: Self::tool_router(),
        }
    }

    /// A read-only use case on the bound loop.
    fn read<T: Serialize>(&self, case: impl FnOnce(&LoopDir) -> Result<T>) -> ToolResult {
        tool_result(
            self.binding
                .place()
                .and_then(|place| LoopDir::open(place, Access::ReadOnly))
                .and_then(|dir| case(&dir)),
        )
    }

    /// A goal write on the bound loop, as the bound actor, under the
    /// caller's operation id. `check` runs first, so malformed input is
    /// refused before the loop is opened for writing.
    fn write<I, T: Serialize>(
        &self,
        operation_id: &str,
        check: impl FnOnce() -> Result<I>,
        case: impl FnOnce(&LoopDir, &GoalTarget, &OperationId, I) -> Result<T>,
    ) -> ToolResult {
        tool_result((|| {
            let input = check()?;
            let op = operation::given_or_generated(Some(operation_id))?;
            let dir = LoopDir::open(self.binding.place()?, Access::ReadWrite)?;
            let target = GoalTarget {
                goal_id: self.binding.goal_id.clone(),
                actor: self.binding.actor.clone(),
                expected_instance: None,
            };
            case(&dir, &target, &op, input)
        })())
    }

    /// A lease of todo `todo_id` (claim or renew).
    fn lease(&self, input: LeaseInput, case: LeaseCase) -> ToolResult {
        let LeaseInput {
            todo_id,
            ttl_seconds,
            note,
            operation_id,
        } = input;
        self.write(
            &operation_id,
            || Ok(()),
            |dir, target, op, ()| case(dir, target, &todo_id, ttl_seconds, &note, op),
        )
    }

    /// A transition of todo `todo_id` with a note (release or complete).
    fn transition(&self, input: TodoInput, case: TransitionCase) -> ToolResult {
        let TodoInput {
            todo_id,
            note,
            operation_id,
        } = input;
        self.write(
            &operation_id,
            || Ok(()),
            |dir, target, op, ()| case(dir, target, &todo_id, &note, op),
        )
    }
}

type LeaseCase =
    fn(&LoopDir, &GoalTarget, &str, u64, &str, &OperationId) -> Result<GoalReceiptView>;
type TransitionCase =
    fn(&LoopDir, &GoalTarget, &str, &str, &OperationId) -> Result<GoalReceiptView>;

/// The receipt of a goal write these tools always execute (never preview).
fn committed(written: GoalWrite) -> Result<GoalReceiptView> {
    match written {
        GoalWrite::Committed(receipt) => Ok(receipt),
        GoalWrite::Previewed(_) => unreachable!("MCP tools submit with Submit::Execute"),
    }
}

fn refused(what: &str, error: impl std::fmt::Display) -> anyhow::Error {
    AppError::refused(format!("{what}: {error}")).into()
}

fn outcome_update(document: serde_json::Map<String, serde_json::Value>) -> Result<OutcomeUpdate> {
    serde_json::from_value(document.into())
        .map_err(|e| refused("the outcome update is not a valid document", e))
}

fn digest(name: &str, text: &str) -> Result<Digest> {
    Digest::parse(text).map_err(|_| refused(name, format!("{text:?} is not a digest")))
}

#[tool_router]
impl Tools {
    #[tool(
        description = "Call at the start of a turn: the task body (the prompt) and the todo selected for you."
    )]
    fn work_context(&self) -> ToolResult {
        let Binding { goal_id, actor, .. } = &self.binding;
        self.read(|dir| continuation::work_context(dir, goal_id, actor))
    }

    #[tool(
        description = "Call before starting more work: whether another turn should run now, and why (bounded: the selected work, counts, the first open gaps; detail: true for every gap)."
    )]
    fn should_run(&self, Parameters(input): Parameters<ShouldRunInput>) -> ToolResult {
        let Binding { goal_id, actor, .. } = &self.binding;
        self.read(|dir| continuation::should_run_answer(dir, goal_id, actor, input.detail))
    }

    #[tool(description = "Call before working on a todo: take its lease for ttl_seconds.")]
    fn claim_todo(&self, Parameters(input): Parameters<LeaseInput>) -> ToolResult {
        self.lease(input, todos::claim)
    }

    #[tool(description = "Call when work on a claimed todo takes longer than its lease.")]
    fn renew_lease(&self, Parameters(input): Parameters<LeaseInput>) -> ToolResult {
        self.lease(input, todos::renew)
    }

    #[tool(description = "Call when you stop working on a claimed todo without finishing it.")]
    fn release_todo(&self, Parameters(input): Parameters<TodoInput>) -> ToolResult {
        self.transition(input, todos::release)
    }

    #[tool(description = "Call when a claimed todo is done (final), with a note on the evidence.")]
    fn complete_todo(&self, Parameters(input): Parameters<TodoInput>) -> ToolResult {
        self.transition(input, todos::complete)
    }

    #[tool(
        description = "Call when you have evidence worth keeping mid-turn: a note and its references in the goal's history."
    )]
    fn append_evidence(&self, Parameters(input): Parameters<EvidenceInput>) -> ToolResult {
        let refresh = Refresh {
            note: input.note,
            evidence_refs: input.evidence_refs,
            ..Refresh::default()
        };
        self.write(
            &input.operation_id,
            || Ok(refresh),
            |dir, target, op, refresh| refresh::refresh_state(dir, target, refresh, op),
        )
    }

    #[tool(
        description = "Call at the end of a turn: the evidence note, todos completed/released/blocked, and optionally an outcome update."
    )]
    fn refresh_state(&self, Parameters(input): Parameters<RefreshInput>) -> ToolResult {
        let RefreshInput {
            note,
            evidence_refs,
            complete,
            release,
            block,
            outcome_update: update,
            operation_id,
        } = input;
        let check = || {
            Ok(Refresh {
                note,
                evidence_refs,
                complete,
                release,
                block: block.into_iter().map(|b| (b.todo_id, b.reason)).collect(),
                outcome_update: update.map(outcome_update).transpose()?,
            })
        };
        self.write(&operation_id, check, |dir, target, op, refresh| {
            refresh::refresh_state(dir, target, refresh, op)
        })
    }

    #[tool(
        description = "Call when you find a new requirement, link work to an outcome, or review requirements as met/unmet/uncertain with evidence."
    )]
    fn refine_outcome(&self, Parameters(input): Parameters<RefineInput>) -> ToolResult {
        let check = || outcome_update(input.update);
        self.write(&input.operation_id, check, |dir, target, op, update| {
            committed(acceptance::refine_outcome(
                dir,
                target,
                update,
                &Submit::Execute(op.clone()),
            )?)
        })
    }

    #[tool(
        description = "Call when the goal's operating objective should change: propose a revision for the owner."
    )]
    fn prepare_goal_objective(&self, Parameters(input): Parameters<PrepareInput>) -> ToolResult {
        let document = ObjectiveDocument {
            objective: input.objective,
            reason: input.reason,
            source_ref: input.source_ref,
        };
        self.write(
            &input.operation_id,
            || Ok(document),
            |dir, target, op, document| {
                committed(acceptance::prepare_objective(
                    dir,
                    target,
                    document,
                    &Submit::Execute(op.clone()),
                )?)
            },
        )
    }

    #[tool(
        description = "Call after the objective was revised and you reviewed your work against it: record your adoption."
    )]
    fn adopt_goal_objective(&self, Parameters(input): Parameters<AdoptInput>) -> ToolResult {
        let check = || {
            Ok(Adoption {
                revision: input.revision,
                digest: digest("digest", &input.digest)?,
                work_digest: digest("work_digest", &input.work_digest)?,
                review_summary: input.review_summary,
            })
        };
        self.write(&input.operation_id, check, |dir, target, op, adoption| {
            acceptance::adopt_objective(dir, target, adoption, op)
        })
    }

    #[tool(
        description = "Call once at the end of an iteration: record what it did, what it cost, and the decision (continue/stop/...). In Goal Focus enforce mode the report is staged for result review (state pending_review) instead of banked; pair each claim with its evidence file in claim_evidence."
    )]
    fn append_iteration(&self, Parameters(input): Parameters<IterationInput>) -> ToolResult {
        tool_result((|| {
            let operation_id = input.operation_id.clone().ok_or_else(|| {
                refused(
                    "operation_id",
                    "required: a stable id for this call, repeated with the same input to recover a lost reply",
                )
            })?;
            let report = input.report(Provenance {
                executor_provider: self.binding.executor_provider.clone(),
                dispatch_id: self.binding.dispatch_id.clone(),
            })?;
            Ok(ledger::append_or_stage(
                self.binding.place()?,
                Some(&operation_id),
                report,
                // An agent states no executor: its dispatch names it.
                loopx_app::focus::candidate::Staging {
                    claim_evidence: &input.claim_evidence,
                    obligation_targets: &input.obligation_targets,
                    executor: None,
                },
            )?)
        })())
    }

    #[tool(
        description = "Call to have the host run the goal owner's configured checks of one outcome in the project (the server's working directory) and record their results; you cannot choose the commands or supply results. Returns each check's state on the current HEAD."
    )]
    fn run_checks(&self, Parameters(input): Parameters<RunChecksInput>) -> ToolResult {
        let RunChecksInput {
            outcome_id,
            operation_id,
        } = input;
        let ran_by = match &self.binding.actor {
            loopx_core::goal::Actor::Agent(agent) => format!("agent {agent} (MCP)"),
            loopx_core::goal::Actor::Owner => "owner (MCP)".to_owned(),
        };
        tool_result((|| {
            let op = operation::given_or_generated(Some(&operation_id))?;
            let dir = LoopDir::open(self.binding.place()?, Access::ReadWrite)?;
            let root = std::env::current_dir()?;
            let quiet = |_: &str| {};
            loopx_app::goal::checks::run(
                &dir,
                &root,
                Some(&outcome_id),
                Some(&op),
                &ran_by,
                &crate::process::Plain,
                &quiet,
            )
        })())
    }

    #[tool(
        description = "Call to see the loop at a glance: budgets, the stop verdict, the last iteration, the driver."
    )]
    fn status(&self) -> ToolResult {
        self.read(|dir| Ok(ledger::status(dir)?))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("loopx", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "loopx: the durable ledger and goal of this agent loop. Start a turn with work_context, claim the selected todo, and end it with refresh_state and append_iteration. Every write takes an operation_id; repeat a call with the same id to recover a lost reply.",
            )
    }
}
