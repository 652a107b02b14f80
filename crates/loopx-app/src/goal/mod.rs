//! The goal of a loop, as the application reaches it: reading it (or what
//! the loop's default goal will be before its first write), committing a
//! goal request through the authority, previewing one, and the typed views
//! every goal use case answers with.
//!
//! The use cases themselves live beside this file, one function each:
//! [`todo`](mod@todo) (the frontier), [`acceptance`] (objective, outcomes, gaps,
//! agents, lifetimes, and the dashboard's writes), [`refresh`] (the turn's
//! writeback). The rules are the goal owner's (`loopx_core::goal`); nothing
//! here decides what a request may do. Should-run and the task body are in
//! [`crate::continuation`].

pub mod acceptance;
pub mod checks;
mod receipt;
pub mod refresh;
pub mod todo;

pub use receipt::{goal_receipt, GoalPreviewView, GoalReceiptBody, GoalReceiptView, GoalWrite};

use crate::clock;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::goal::continuation::{Frontier, Next, Tally};
use loopx_core::goal::frontier::{
    self, ComposedContext, ComposedGoalOwner, TodoContext, TodoOwner,
};
use loopx_core::goal::todo::{Todo, TodoStatus};
use loopx_core::goal::{
    self, Actor, Goal, GoalCommand, GoalContext, GoalError, GoalOwner, GoalReceipt, GoalRequest,
};
use loopx_core::ledger::Ledger;
use loopx_core::operation::{OperationId, Owner as _};
use loopx_store::sqlite::Access;
use loopx_store::{decide_at, AuthorityError, FacetQuery, Loaded, Preview, Receipt, Step};
use std::sync::Arc;

/// A goal as read. `revision` 0 means the loop's default goal was never
/// written yet and this is what its first write will create.
pub struct GoalReading {
    pub revision: u64,
    pub goal: Goal,
}

/// Which goal a write acts on, as whom, and which lifetime the caller read.
#[derive(Debug, Clone)]
pub struct GoalTarget {
    pub goal_id: String,
    pub actor: Actor,
    /// Refuse unless this is still the goal's current instance (`main#1`).
    pub expected_instance: Option<String>,
}

impl GoalTarget {
    /// The loop's own goal, as its owner (the dashboard's writes).
    pub fn owner_of_default() -> Self {
        GoalTarget {
            goal_id: goal::DEFAULT_GOAL_ID.to_owned(),
            actor: Actor::Owner,
            expected_instance: None,
        }
    }

    fn command(&self, request: GoalRequest, base_revision: Option<u64>) -> GoalCommand {
        GoalCommand {
            actor: self.actor.clone(),
            expected_instance: self.expected_instance.clone(),
            request,
            base_revision,
        }
    }
}

/// Whether a write commits (under its operation id) or only shows what it
/// would commit.
#[derive(Debug, Clone)]
pub enum Submit {
    Execute(OperationId),
    Preview,
}

impl Submit {
    /// How the loop must be opened for this: a preview never writes, not
    /// even the default goal, so it opens read-only.
    pub fn access(&self) -> Access {
        match self {
            Submit::Execute(_) => Access::ReadWrite,
            Submit::Preview => Access::ReadOnly,
        }
    }
}

/// The request that creates a loop's default goal from its ledger. It is
/// deterministic, so every process that needs the goal first commits the
/// same operation and all but one of them merely replay it.
fn bootstrap(ledger: &Ledger) -> (OperationId, GoalCommand, GoalContext) {
    let command = GoalCommand {
        actor: Actor::Owner,
        expected_instance: None,
        request: GoalRequest::Create {
            goal_id: goal::DEFAULT_GOAL_ID.into(),
            objective: ledger.config.goal.clone(),
            commitments: ledger.config.commitments.clone(),
            todo_streams: true,
        },
        base_revision: None,
    };
    let id = OperationId::parse(&format!("goal-bootstrap.{}", ledger.run_id))
        .expect("run ids make valid operation ids");
    (
        id,
        command,
        GoalContext {
            now: ledger.created_at,
        },
    )
}

/// The goal a command named is not this loop's: say which was asked for,
/// and which goal there is.
fn no_such_goal(goal_id: &str) -> anyhow::Error {
    AppError::not_found(format!(
        "this loop has no goal {goal_id:?}; its goal is {:?}: drop --goal-id or pass --goal-id {}",
        goal::DEFAULT_GOAL_ID,
        goal::DEFAULT_GOAL_ID
    ))
    .into()
}

impl LoopDir {
    /// The goal `goal_id`, or what the default goal will be when first
    /// written; each todo as its own stream holds it ([`frontier`]).
    /// `revision` is the goal stream's: what a goal write's base names.
    pub fn goal(&self, goal_id: &str) -> Result<GoalReading> {
        match self.authority().load::<GoalOwner>(&goal::stream(goal_id))? {
            Loaded {
                revision,
                state: Some(mut goal),
            } => {
                // Read after the goal: a todo changed meanwhile shows its
                // newer state, and (in a goal with todo streams) one added
                // meanwhile is listed, as a read a moment later would;
                // in a goal without, one added meanwhile is not listed and
                // its stream is ignored.
                self.overlay_live_todos(&mut goal)?;
                Ok(GoalReading { revision, goal })
            }
            Loaded { state: None, .. } if goal_id == goal::DEFAULT_GOAL_ID => {
                let (_, command, context) = bootstrap(&self.read()?.ledger);
                let decided = GoalOwner::decide(None, &command, &context)?;
                let event = decided.event.expect("creating a goal writes");
                Ok(GoalReading {
                    revision: 0,
                    goal: GoalOwner::evolve(None, &event),
                })
            }
            Loaded { state: None, .. } => Err(no_such_goal(goal_id)),
        }
    }

    /// The goal `goal_id` as the continuation decision reads it, and the
    /// frontier's part in that decision for `actor` at `now`. A goal
    /// whose todos are each in a stream with a facet is not read whole:
    /// the store's index counts the frontier and finds the actor's work
    /// ([`Self::indexed_frontier`]), and the goal holds just the todos its
    /// outcomes link (what its gaps look at). Any other goal is read
    /// whole and scanned.
    pub fn goal_for_decision(
        &self,
        goal_id: &str,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<(GoalReading, Frontier)> {
        let Loaded { revision, state } =
            self.authority().load::<GoalOwner>(&goal::stream(goal_id))?;
        let Some(mut goal) = state else {
            // Never written: what its first write will create, if it is
            // the loop's default goal.
            let reading = self.goal(goal_id)?;
            let frontier = Frontier::scan(&reading.goal, actor, now);
            return Ok((reading, frontier));
        };
        let frontier = match self.indexed_frontier(&goal, actor, now)? {
            Some(frontier) => {
                // The todos the outcomes link, for the gaps: a few, by id.
                let mut linked: Vec<&str> = goal
                    .outcomes
                    .iter()
                    .flat_map(|outcome| outcome.linked_todos.iter().map(String::as_str))
                    .collect();
                linked.sort_unstable();
                linked.dedup();
                let mut live = Vec::with_capacity(linked.len());
                for todo_id in linked {
                    live.extend(self.todo_of(&frontier::stream(&goal.instance_id, todo_id))?);
                }
                frontier::overlay(&mut goal, live);
                frontier
            }
            None => {
                self.overlay_live_todos(&mut goal)?;
                Frontier::scan(&goal, actor, now)
            }
        };
        Ok((GoalReading { revision, goal }, frontier))
    }

    /// The frontier of `goal` for `actor` at `now` from the store's index,
    /// or `None` when the index cannot answer for it: a goal whose
    /// snapshot lists its todos, a store of an older schema, or a frontier
    /// whose facets do not count every todo the goal added (a lifetime
    /// begun before facets, or a todo added since the goal was read).
    fn indexed_frontier(
        &self,
        goal: &Goal,
        actor: &Actor,
        now: Timestamp,
    ) -> Result<Option<Frontier>> {
        let Some(added) = goal.streamed_todos.filter(|_| goal.todos.is_empty()) else {
            return Ok(None);
        };
        let family = frontier::streams_of(&goal.instance_id);
        let free: Vec<u8> = Frontier::runnable_statuses()
            .map(TodoStatus::code)
            .collect();
        let query = FacetQuery {
            family: &family,
            now,
            free_classes: &free,
            holder: actor.agent_id(),
        };
        let Some(facets) = self.authority().store().read_facets(&query)? else {
            return Ok(None);
        };
        if facets.streams() != added {
            return Ok(None);
        }
        let mut tallies = Vec::with_capacity(facets.classes.len());
        for count in &facets.classes {
            let status = TodoStatus::from_code(count.class).ok_or_else(|| {
                anyhow::anyhow!(
                    "the store's index of {family} counts class {} that no todo status has: run `loopx validate`",
                    count.class
                )
            })?;
            tallies.push(Tally {
                status,
                total: count.total as usize,
                pending: count.pending as usize,
                first_due: count.first_due,
            });
        }
        let own = facets.first_held.is_some();
        let next = match facets.first_held.or(facets.first_free) {
            Some(stream) => self.todo_of(&stream)?,
            None => None,
        };
        let next = next.as_ref().map(|todo| match own {
            true => Next::Own(todo),
            false => Next::Runnable(todo),
        });
        Ok(Some(Frontier::of_tallies(&tallies, next)))
    }

    /// Compose `goal` with its todos' streams ([`frontier::overlay`]).
    fn overlay_live_todos(&self, goal: &mut Goal) -> Result<()> {
        let live = self.live_todos(&goal.instance_id)?;
        frontier::overlay(goal, live);
        Ok(())
    }

    /// The goal `goal_id` as its stream holds it (no todo streams
    /// composed), created first if it is the loop's default goal and was
    /// never written; from [`GoalCache`] when the revision is unchanged.
    fn stored_goal(&self, goal_id: &str) -> Result<Arc<Goal>> {
        let stream = goal::stream(goal_id);
        let mut revision = self.authority().store().revision(&stream)?;
        if revision == 0 {
            self.ensure_goal(goal_id)?;
            revision = self.authority().store().revision(&stream)?;
        }
        if let Some(goal) = self.goal_cache.get(&stream, revision) {
            return Ok(goal);
        }
        let loaded = self.authority().load::<GoalOwner>(&stream)?;
        let goal = loaded.state.ok_or_else(|| no_such_goal(goal_id))?;
        Ok(self.goal_cache.put(&stream, loaded.revision, goal))
    }

    /// Make sure the goal a write targets exists in the store.
    fn ensure_goal(&self, goal_id: &str) -> Result<()> {
        let stream = goal::stream(goal_id);
        if self.authority().store().revision(&stream)? > 0 {
            return Ok(());
        }
        if goal_id != goal::DEFAULT_GOAL_ID {
            return Err(no_such_goal(goal_id));
        }
        let (id, command, context) = bootstrap(&self.read()?.ledger);
        self.authority()
            .execute::<GoalOwner>(&stream, &id, &command, &context, context.now)?;
        Ok(())
    }

    /// The todo streams of goal lifetime `instance_id`, by todo id.
    fn live_todos(&self, instance_id: &str) -> Result<Vec<Todo>> {
        let mut live = Vec::new();
        let mut unreadable = None;
        let prefix = frontier::streams_of(instance_id);
        // Parsed straight from the store's row buffers, one at a time.
        self.authority()
            .store()
            .visit_prefixed(
                &prefix,
                &mut |stream, revision, state| match serde_json::from_str::<Todo>(state) {
                    Ok(todo) => live.push(todo),
                    Err(error) => {
                        unreadable.get_or_insert(AuthorityError::<GoalError>::Unreadable {
                            stream: stream.to_owned(),
                            revision,
                            what: "snapshot",
                            reason: error.to_string(),
                        });
                    }
                },
            )?;
        match unreadable {
            Some(error) => Err(error.into()),
            None => Ok(live),
        }
    }

    /// Commit a goal command, creating the loop's default goal first if
    /// this is its first write. A todo transition commits to that todo's
    /// stream, a writeback to the goal and each todo it names at once
    /// ([`frontier`]); everything else to the goal stream.
    fn goal_execute(
        &self,
        goal_id: &str,
        id: &OperationId,
        command: &GoalCommand,
    ) -> Result<Receipt<GoalReceipt>> {
        let now = clock::now();
        let authority = self.authority();
        let goal_stream = goal::stream(goal_id);
        if authority.store().revision(&goal_stream)? == 0 {
            // The default goal's first write creates it: a request it
            // refuses must not leave the goal created behind it.
            self.goal_preview(goal_id, command)?;
        }
        let goal_context = GoalContext { now };
        let goal_step = |command| Step::<GoalOwner> {
            stream: &goal_stream,
            operation_id: id,
            request: command,
            context: &goal_context,
        };
        let keeps_todos = matches!(
            &command.request,
            GoalRequest::Todo { .. } | GoalRequest::Writeback { .. }
        );
        let adds = matches!(
            &command.request,
            GoalRequest::AddTodo { .. } | GoalRequest::AddTodos { .. }
        );
        if adds && self.stored_goal(goal_id)?.streamed_todos.is_some() {
            return self.add_in_streams(goal_id, id, command);
        }
        if !keeps_todos {
            self.ensure_goal(goal_id)?;
            // Decided on the goal as composed with its todos' streams,
            // read first: the rules that look at todos see their state.
            let live = match authority.load::<GoalOwner>(&goal_stream)?.state {
                Some(goal) => self.live_todos(&goal.instance_id)?,
                None => Vec::new(),
            };
            let context = ComposedContext { now, live: &live };
            return Ok(authority.execute::<ComposedGoalOwner>(
                &goal_stream,
                id,
                command,
                &context,
                now,
            )?);
        }
        // Committed before todos had streams of their own (the whole
        // request on the goal stream): a retry is that commit's replay.
        match authority.replay(&goal_step(command)) {
            Ok(Some(receipt)) => return Ok(receipt),
            Ok(None) => {}
            // A writeback kept across streams stores only its note part on
            // the goal under this id: the group below replays that, or
            // refuses the id if it was used for anything else.
            Err(AuthorityError::Conflict { .. })
                if matches!(command.request, GoalRequest::Writeback { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        let goal = self.stored_goal(goal_id)?;
        let context = TodoContext {
            now,
            goal: &goal,
            born: None,
        };
        if let GoalRequest::Todo { id: todo_id, .. } = &command.request {
            let stream = frontier::stream(&goal.instance_id, todo_id);
            return Ok(authority.execute::<TodoOwner>(&stream, id, command, &context, now)?);
        }
        let (goal_part, todo_parts) =
            frontier::split_writeback(command)?.expect("a writeback splits");
        let streams: Vec<String> = todo_parts
            .iter()
            .map(|part| match &part.request {
                GoalRequest::Todo { id: todo_id, .. } => {
                    frontier::stream(&goal.instance_id, todo_id)
                }
                _ => unreachable!("a writeback splits into todo requests"),
            })
            .collect();
        let todo_steps: Vec<Step<'_, '_, TodoOwner>> = todo_parts
            .iter()
            .zip(&streams)
            .map(|(request, stream)| Step {
                stream,
                operation_id: id,
                request,
                context: &context,
            })
            .collect();
        let (note, todos) = authority
            .execute_group(&goal_step(&goal_part), &todo_steps, now)
            .map_err(|error| error.map(|either| either.into_inner()))?;
        Ok(merge_writeback(note, todos))
    }

    /// Add todos to a goal that keeps each todo in its own stream: the
    /// goal's event (its count of todos, the todos in its journal) and one
    /// new stream per todo, holding it from the start, in one transaction,
    /// so the cost is what is added, not the frontier's size. Decided on
    /// the goal snapshot with just the todos the request names that exist
    /// (an id must be new; automatic ids are past every `tN` the goal has
    /// seen), then committed on that very goal revision: if another write
    /// landed in between, decided again.
    fn add_in_streams(
        &self,
        goal_id: &str,
        id: &OperationId,
        command: &GoalCommand,
    ) -> Result<Receipt<GoalReceipt>> {
        let authority = self.authority();
        let goal_stream = goal::stream(goal_id);
        let now = clock::now();
        let replay = Step::<GoalOwner> {
            stream: &goal_stream,
            operation_id: id,
            request: command,
            context: &GoalContext { now },
        };
        if let Some(receipt) = authority.replay(&replay)? {
            return Ok(receipt);
        }
        let named: Vec<&str> = match &command.request {
            GoalRequest::AddTodo { id, .. } => id.iter().map(String::as_str).collect(),
            GoalRequest::AddTodos { todos } => {
                todos.iter().filter_map(|t| t.id.as_deref()).collect()
            }
            _ => unreachable!("only additions are kept this way"),
        };
        let mut last = None;
        for _ in 0..ADD_ATTEMPTS {
            let loaded = authority.load::<GoalOwner>(&goal_stream)?;
            let goal = loaded.state.clone().ok_or_else(|| no_such_goal(goal_id))?;
            let mut live = Vec::new();
            for todo_id in &named {
                let stream = frontier::stream(&goal.instance_id, todo_id);
                live.extend(self.todo_of(&stream)?);
            }
            // Held to the revision it was decided on; a caller's own base
            // (a form read at an older state) is kept, and refused as stale.
            let based = GoalCommand {
                base_revision: command.base_revision.or(Some(loaded.revision)),
                ..command.clone()
            };
            let context = ComposedContext { now, live: &live };
            let decided = decide_at::<ComposedGoalOwner>(&goal_stream, &loaded, &based, &context)?;
            let born: Vec<&Todo> = decided
                .event
                .iter()
                .flat_map(|event| &event.changes)
                .filter_map(|change| match change {
                    goal::Change::TodoAdded { todo } => Some(todo),
                    _ => None,
                })
                .collect();
            let parts: Vec<(String, GoalCommand)> = born
                .iter()
                .map(|todo| {
                    let request = GoalRequest::AddTodo {
                        id: Some(todo.id.clone()),
                        title: todo.title.clone(),
                    };
                    let stream = frontier::stream(&goal.instance_id, &todo.id);
                    (stream, target_command(command, request))
                })
                .collect();
            let contexts: Vec<TodoContext<'_>> = born
                .iter()
                .map(|todo| TodoContext {
                    now,
                    goal: &goal,
                    born: Some(todo),
                })
                .collect();
            let steps: Vec<Step<'_, '_, TodoOwner>> = parts
                .iter()
                .zip(&contexts)
                .map(|((stream, request), context)| Step {
                    stream,
                    operation_id: id,
                    request,
                    context,
                })
                .collect();
            let first = Step::<ComposedGoalOwner> {
                stream: &goal_stream,
                operation_id: id,
                request: &based,
                context: &context,
            };
            match authority.execute_group(&first, &steps, now) {
                Ok((receipt, _)) => return Ok(receipt),
                // Another write landed on the goal since it was read.
                Err(error @ AuthorityError::StaleBase { .. })
                    if command.base_revision.is_none() =>
                {
                    last = Some(error)
                }
                Err(error) => return Err(error.map(|either| either.into_inner()).into()),
            }
        }
        Err(last
            .map(|error| error.map(|either| either.into_inner()))
            .expect("an attempt was made")
            .into())
    }

    /// The todo a todo stream holds, if it exists.
    fn todo_of(&self, stream: &str) -> Result<Option<Todo>> {
        Ok(self.authority().load::<TodoOwner>(stream)?.state)
    }

    /// What a goal command would do now; writes nothing, not even the
    /// default goal.
    fn goal_preview(&self, goal_id: &str, command: &GoalCommand) -> Result<Preview<GoalOwner>> {
        let GoalReading { revision, goal } = self.goal(goal_id)?;
        let loaded = Loaded {
            revision,
            state: Some(goal),
        };
        Ok(decide_at::<GoalOwner>(
            &goal::stream(goal_id),
            &loaded,
            command,
            &GoalContext { now: clock::now() },
        )?)
    }
}

/// How often an addition is decided again when other goal writes keep
/// landing between its read and its commit.
const ADD_ATTEMPTS: usize = 8;

/// A part of `command` kept in another stream: same actor and lifetime,
/// its own request, no goal base revision.
fn target_command(command: &GoalCommand, request: GoalRequest) -> GoalCommand {
    GoalCommand {
        actor: command.actor.clone(),
        expected_instance: command.expected_instance.clone(),
        request,
        base_revision: None,
    }
}

/// One receipt for a writeback kept in several streams: the goal's (its
/// revision, the goal's), with the todos' effects first, as a writeback
/// committed to the goal alone listed them. It is a replay when every part
/// that wrote was replayed, unchanged when no part wrote.
fn merge_writeback(
    note: Receipt<GoalReceipt>,
    todos: Vec<Receipt<GoalReceipt>>,
) -> Receipt<GoalReceipt> {
    let parts = || std::iter::once(&note).chain(&todos);
    let unchanged = parts().all(|part| part.unchanged);
    let replayed =
        parts().any(|part| part.replayed) && parts().all(|part| part.replayed || part.unchanged);
    let wrote = parts().find(|part| !part.unchanged);
    let (kind, committed_at) = match wrote {
        Some(part) => ("goal.writeback".to_owned(), part.committed_at),
        None => (note.kind.clone(), note.committed_at),
    };
    let effects = todos
        .iter()
        .flat_map(|part| part.body.effects.iter().cloned())
        .chain(note.body.effects.iter().cloned())
        .collect();
    Receipt {
        kind,
        committed_at,
        replayed,
        unchanged,
        body: GoalReceipt {
            effects,
            ..note.body
        },
        ..note
    }
}

/// Commit one goal request: the write path every goal use case shares.
/// `base_revision` is the goal revision the caller's view was read at, for
/// writes that must not land on a state the caller never saw.
fn write(
    dir: &LoopDir,
    target: &GoalTarget,
    id: &OperationId,
    request: GoalRequest,
    base_revision: Option<u64>,
) -> Result<GoalReceiptView> {
    let command = target.command(request, base_revision);
    Ok(goal_receipt(dir.goal_execute(
        &target.goal_id,
        id,
        &command,
    )?))
}

/// Commit `request`, or with [`Submit::Preview`] only show what it would
/// commit.
fn submit(
    dir: &LoopDir,
    target: &GoalTarget,
    submit: &Submit,
    request: GoalRequest,
) -> Result<GoalWrite> {
    match submit {
        Submit::Execute(id) => write(dir, target, id, request, None).map(GoalWrite::Committed),
        Submit::Preview => {
            let decided = dir.goal_preview(&target.goal_id, &target.command(request, None))?;
            Ok(GoalWrite::Previewed(GoalPreviewView {
                would_write: decided.event.is_some(),
                receipt: decided.receipt,
                event: decided.event,
            }))
        }
    }
}

/// A JSON document a person named (an outcome update, an objective
/// revision), read no further than the limit for documents, so a document
/// without end (`/dev/zero`) is refused quickly.
pub fn read_document<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    use anyhow::Context as _;
    let bytes = crate::fsutil::read_bounded(path, loopx_core::text::limits::DOCUMENT_BYTES)?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a valid document", path.display()))
}
