//! The goal owner: decide a [`GoalCommand`] against the current [`Goal`]
//! (which rule refuses it, or which [`Change`]s it resolves to, and the
//! receipt), for the store's authority. The objective, outcome and todo
//! rules it dispatches to live in their own modules.

use super::todo::{self, EvidenceNote, Todo, TodoAction, TodoStatus};
use super::{
    checks, event, gap, input, objective, outcome, Actor, Change, Goal, GoalCommand, GoalContext,
    GoalError, GoalEvent, GoalReceipt, GoalRequest, NewTodo, DEFAULT_GOAL_ID,
};
use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use std::collections::{BTreeMap, HashSet};

fn ensure_adopted(goal: &Goal, actor: &Actor) -> Result<(), GoalError> {
    let Actor::Agent(agent) = actor else {
        return Ok(());
    };
    if !goal.is_multi_agent() || objective::has_adopted(goal, agent) {
        return Ok(());
    }
    Err(GoalError::NotAdopted {
        agent: agent.clone(),
        revision: goal.objective.current_revision(),
    })
}

pub(super) fn receipt(goal: &Goal, effects: &[&str]) -> GoalReceipt {
    GoalReceipt {
        goal_id: goal.goal_id.clone(),
        instance_id: goal.instance_id.clone(),
        effects: effects.iter().map(|e| (*e).to_owned()).collect(),
        values: BTreeMap::new(),
    }
}

/// Decide one todo action (with its optional note) for `actor`, on the
/// todo as the goal snapshot holds it.
fn todo_changes(
    goal: &Goal,
    id: &str,
    action: &TodoAction,
    note: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<Vec<Change>, GoalError> {
    let todo = goal
        .todo(id)
        .ok_or_else(|| GoalError::NoTodo { id: id.to_owned() })?;
    let (transition, note) = decide_todo(goal, todo, action, note, actor, now)?;
    let mut changes = vec![Change::TodoChanged {
        id: id.to_owned(),
        transition,
    }];
    if let Some(note) = note {
        changes.push(Change::NoteRecorded {
            todo: Some(id.to_owned()),
            note,
        });
    }
    Ok(changes)
}

/// The one admission path of a todo action, wherever the todo's state is
/// kept (in the goal snapshot, or in its own stream, see
/// [`super::frontier`]): the adoption fence for new work, then the todo's
/// own rules, and the evidence note it carries.
pub(super) fn decide_todo(
    goal: &Goal,
    todo: &Todo,
    action: &TodoAction,
    note: &str,
    actor: &Actor,
    now: Timestamp,
) -> Result<(todo::TodoTransition, Option<EvidenceNote>), GoalError> {
    if action.acquires() {
        ensure_adopted(goal, actor)?;
    }
    let transition = todo::decide(todo, action, actor, now)?;
    let note = (!note.trim().is_empty()).then(|| EvidenceNote::new(now, actor.name(), note, &[]));
    Ok((transition, note))
}

/// A writeback names each todo at most once: two transitions of one todo
/// in one request would each be decided against the state before both.
pub(super) fn check_distinct_todos(todos: &[(String, TodoAction)]) -> Result<(), GoalError> {
    let mut seen = std::collections::BTreeSet::new();
    for (id, _) in todos {
        if !seen.insert(id) {
            return Err(GoalError::Invalid(format!(
                "todo {id} appears twice in one writeback"
            )));
        }
    }
    Ok(())
}

pub(super) fn transition_effect(action: &TodoAction) -> &'static str {
    match action {
        TodoAction::Claim { .. } => "todo_claimed",
        TodoAction::Renew { .. } => "lease_renewed",
        TodoAction::Release => "todo_released",
        TodoAction::Complete => "todo_completed",
        TodoAction::Block { .. } => "todo_blocked",
        TodoAction::Defer { .. } => "todo_deferred",
    }
}

/// The todos `rows` add after the goal's, in order: each with a title,
/// and an id (the caller's, or the next free `tN`) that neither the goal
/// nor another row has. An id a later row names is never handed out to
/// an earlier row without one. A refusal names the row's index.
fn additions(
    goal: &Goal,
    rows: &[NewTodo],
    actor: &Actor,
    now: Timestamp,
) -> Result<Vec<Todo>, (usize, GoalError)> {
    let existing: HashSet<&str> = goal.todos.iter().map(|t| t.id.as_str()).collect();
    let mut batch: HashSet<String> = HashSet::with_capacity(rows.len());
    let named: HashSet<&str> = rows.iter().filter_map(|r| r.id.as_deref()).collect();
    let mut next = goal.next_todo_number;
    let mut added = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        if row.title.trim().is_empty() {
            return Err((
                index,
                GoalError::Invalid("a todo needs a non-empty --title".into()),
            ));
        }
        let id = match &row.id {
            Some(id) if existing.contains(id.as_str()) => {
                return Err((index, GoalError::TodoExists { id: id.clone() }));
            }
            Some(id) if batch.contains(id) => {
                return Err((index, GoalError::TodoTwice { id: id.clone() }));
            }
            Some(id) => id.clone(),
            None => loop {
                let id = format!("t{next}");
                next += 1;
                if !existing.contains(id.as_str()) && !named.contains(id.as_str()) {
                    break id;
                }
            },
        };
        batch.insert(id.clone());
        added.push(Todo {
            id,
            title: row.title.trim().to_owned(),
            status: TodoStatus::Open,
            lease: None,
            created_at: now,
            created_by: actor.name().to_owned(),
            blocked_reason: String::new(),
            deferred_until: None,
            completed_at: None,
            evidence: Vec::new(),
            position: goal.streamed_todos.map(|added| added + index as u64),
        });
    }
    Ok(added)
}

pub struct GoalOwner;

impl Owner for GoalOwner {
    type State = Goal;
    type Request = GoalCommand;
    type Event = GoalEvent;
    type Receipt = GoalReceipt;
    type Error = GoalError;
    type Context<'a> = GoalContext;

    fn expected_revision(command: &GoalCommand) -> Option<u64> {
        match &command.request {
            GoalRequest::ReviseObjective {
                expected_provider_revision,
                ..
            } => Some(*expected_provider_revision),
            _ => command.base_revision,
        }
    }

    fn decide(
        state: Option<&Goal>,
        command: &GoalCommand,
        context: &GoalContext,
    ) -> Result<Decided<GoalEvent, GoalReceipt>, GoalError> {
        input::check(command)?;
        let now = context.now;
        let actor = &command.actor;
        let event = |changes: Vec<Change>| GoalEvent {
            at: now,
            actor: actor.clone(),
            changes,
        };
        let GoalRequest::Create {
            goal_id,
            objective,
            commitments,
            todo_streams,
        } = &command.request
        else {
            let goal = state.ok_or_else(|| GoalError::NoGoal {
                goal_id: DEFAULT_GOAL_ID.into(),
            })?;
            if let Some(expected) = &command.expected_instance {
                if expected != &goal.instance_id {
                    return Err(GoalError::LifetimeMismatch {
                        expected: expected.clone(),
                        current: goal.instance_id.clone(),
                    });
                }
            }
            return decide_on(goal, command, now).map(|(changes, receipt)| {
                match changes.is_empty() {
                    true => Decided::unchanged(receipt),
                    false => Decided::write(event(changes), receipt),
                }
            });
        };
        if let Some(goal) = state {
            return Err(GoalError::GoalExists {
                goal_id: goal.goal_id.clone(),
                instance_id: goal.instance_id.clone(),
            });
        }
        if objective.trim().is_empty() {
            return Err(GoalError::EmptyObjective);
        }
        let instance_id = format!("{goal_id}#1");
        let receipt = GoalReceipt {
            goal_id: goal_id.clone(),
            instance_id: instance_id.clone(),
            effects: vec!["goal_created".into()],
            values: BTreeMap::new(),
        };
        let created = Change::Created {
            goal_id: goal_id.clone(),
            lifetime: 1,
            instance_id,
            objective: objective.trim().to_owned(),
            commitments: commitments.clone(),
            todo_streams: *todo_streams,
        };
        Ok(Decided::write(event(vec![created]), receipt))
    }

    fn evolve(state: Option<Goal>, event: &GoalEvent) -> Goal {
        event::fold(state, event)
    }

    fn event_kind(event: &GoalEvent) -> &'static str {
        match event.changes.as_slice() {
            [Change::Created { .. }] => "goal.created",
            [Change::Retired { .. }, ..] => "goal.recreated",
            [Change::AgentRegistered { .. }] => "goal.agent_registered",
            [Change::ObjectiveProposed { .. }] => "goal.objective_proposed",
            [Change::ObjectiveRevised { .. }] => "goal.objective_revised",
            [Change::ObjectiveAdopted { .. }] => "goal.objective_adopted",
            [Change::OutcomeRefined { .. }] => "goal.outcome_refined",
            [Change::TodoAdded { .. }] => "goal.todo_added",
            [Change::TodoAdded { .. }, ..]
                if event
                    .changes
                    .iter()
                    .all(|c| matches!(c, Change::TodoAdded { .. })) =>
            {
                "goal.todos_added"
            }
            [Change::GapAcknowledged { .. }] => "goal.gap_acknowledged",
            [Change::TodoChanged { .. }]
            | [Change::TodoChanged { .. }, Change::NoteRecorded { .. }] => "goal.todo_changed",
            _ => "goal.writeback",
        }
    }
}

fn decide_on(
    goal: &Goal,
    command: &GoalCommand,
    now: Timestamp,
) -> Result<(Vec<Change>, GoalReceipt), GoalError> {
    let actor = &command.actor;
    match &command.request {
        GoalRequest::Create { .. } => unreachable!("handled by decide"),
        GoalRequest::Recreate { objective, reason } => {
            if let Actor::Agent(agent) = actor {
                return Err(GoalError::OwnerOnly {
                    what: "recreate a goal",
                    agent: agent.clone(),
                });
            }
            if objective.trim().is_empty() {
                return Err(GoalError::EmptyObjective);
            }
            let lifetime = goal.lifetime + 1;
            let instance_id = format!("{}#{lifetime}", goal.goal_id);
            let changes = vec![
                Change::Retired {
                    reason: reason.trim().to_owned(),
                },
                Change::Created {
                    goal_id: goal.goal_id.clone(),
                    lifetime,
                    instance_id: instance_id.clone(),
                    objective: objective.trim().to_owned(),
                    commitments: goal.commitments.clone(),
                    todo_streams: goal.streamed_todos.is_some(),
                },
            ];
            let mut receipt =
                receipt(goal, &["goal_recreated"]).with("predecessor", &goal.instance_id);
            receipt.instance_id = instance_id;
            Ok((changes, receipt))
        }
        GoalRequest::RegisterAgent { agent_id } => {
            if goal.is_registered(agent_id) {
                return Ok((vec![], receipt(goal, &["agent_already_registered"])));
            }
            Ok((
                vec![Change::AgentRegistered {
                    agent_id: agent_id.clone(),
                }],
                receipt(goal, &["agent_registered"]).with("agents", goal.agents.len() + 1),
            ))
        }
        GoalRequest::PrepareObjective { document } => {
            objective::prepare(goal, actor, document, now)
        }
        GoalRequest::ReviseObjective { document, .. } => {
            objective::revise(goal, actor, document, now)
        }
        GoalRequest::AdoptObjective {
            revision,
            digest,
            work_digest,
            review_summary,
        } => objective::adopt(
            goal,
            actor,
            *revision,
            digest,
            work_digest,
            review_summary,
            now,
        ),
        GoalRequest::RefineOutcome { update } => {
            let refined = outcome::decide(goal, actor, update, now)?;
            let effects = refined.effects();
            let mut r = receipt(
                goal,
                &effects.iter().map(String::as_str).collect::<Vec<_>>(),
            )
            .with("outcome_id", &refined.outcome_id);
            r = r.with("requirements_added", refined.requirements.len());
            Ok((
                vec![Change::OutcomeRefined {
                    refined: Box::new(refined),
                }],
                r,
            ))
        }
        GoalRequest::AddTodo { id, title } => {
            let row = NewTodo {
                id: id.clone(),
                title: title.clone(),
            };
            let todo = additions(goal, std::slice::from_ref(&row), actor, now)
                .map_err(|(_, problem)| problem)?
                .pop()
                .expect("one todo per row");
            let id = todo.id.clone();
            Ok((
                vec![Change::TodoAdded { todo }],
                receipt(goal, &["todo_added"]).with("todo_id", id),
            ))
        }
        GoalRequest::AddTodos { todos } => {
            let added =
                additions(goal, todos, actor, now).map_err(|(index, problem)| GoalError::Row {
                    row: index + 1,
                    problem: Box::new(problem),
                })?;
            let mut r = receipt(goal, &["todos_added"]).with("added", added.len());
            if let (Some(first), Some(last)) = (added.first(), added.last()) {
                r = r
                    .with("first_todo_id", &first.id)
                    .with("last_todo_id", &last.id);
            }
            let changes = added
                .into_iter()
                .map(|todo| Change::TodoAdded { todo })
                .collect();
            Ok((changes, r))
        }
        GoalRequest::Todo { id, action, note } => {
            let changes = todo_changes(goal, id, action, note, actor, now)?;
            Ok((
                changes,
                receipt(goal, &[transition_effect(action)]).with("todo_id", id),
            ))
        }
        GoalRequest::AcknowledgeGap {
            outcome_id,
            checkpoint,
        } => {
            let open = gap::gaps(goal, now)
                .into_iter()
                .find(|g| &g.outcome_id == outcome_id && &g.checkpoint == checkpoint);
            match open {
                None => Err(GoalError::NoSuchGap {
                    outcome_id: outcome_id.clone(),
                    checkpoint: checkpoint.to_string(),
                }),
                Some(gap) if gap.acknowledged => {
                    Ok((vec![], receipt(goal, &["gap_already_acknowledged"])))
                }
                Some(_) => Ok((
                    vec![Change::GapAcknowledged {
                        outcome_id: outcome_id.clone(),
                        checkpoint: checkpoint.clone(),
                    }],
                    receipt(goal, &["gap_acknowledged"]),
                )),
            }
        }
        GoalRequest::ConfigureChecks { config, basis } => {
            // Otherwise an agent could configure `true` and certify itself.
            if let Actor::Agent(agent) = actor {
                return Err(GoalError::OwnerOnly {
                    what: "configure executable checks",
                    agent: agent.clone(),
                });
            }
            let outcome = goal
                .outcome(&config.outcome_id)
                .ok_or_else(|| GoalError::NoOutcome {
                    outcome_id: config.outcome_id.clone(),
                })?;
            let current = outcome.basis();
            if &current != basis {
                return Err(GoalError::ChecksBasisChanged {
                    outcome_id: outcome.id.clone(),
                    proposed: basis.clone(),
                    current,
                });
            }
            checks::validate(config, outcome)?;
            if outcome.checks == config.criteria {
                return Ok((vec![], receipt(goal, &["checks_unchanged"])));
            }
            Ok((
                vec![Change::ChecksConfigured {
                    outcome_id: outcome.id.clone(),
                    criteria: config.criteria.clone(),
                }],
                receipt(goal, &["checks_configured"])
                    .with("outcome_id", &outcome.id)
                    .with("criteria", config.criteria.len()),
            ))
        }
        GoalRequest::RecordChecks {
            outcome_id,
            results,
        } => {
            let outcome = goal
                .outcome(outcome_id)
                .ok_or_else(|| GoalError::NoOutcome {
                    outcome_id: outcome_id.clone(),
                })?;
            if let Some(stray) =
                (results.iter()).find(|r| !outcome.checks.iter().any(|c| c.id == r.criterion_id))
            {
                return Err(GoalError::NoSuchCheck {
                    outcome_id: outcome_id.clone(),
                    criterion_id: stray.criterion_id.clone(),
                });
            }
            Ok((
                vec![Change::ChecksRecorded {
                    outcome_id: outcome_id.clone(),
                    results: results.clone(),
                }],
                receipt(goal, &["checks_recorded"]).with("outcome_id", outcome_id),
            ))
        }
        GoalRequest::Writeback {
            note,
            evidence_refs,
            todos,
        } => {
            let mut changes = Vec::new();
            let mut effects = Vec::new();
            check_distinct_todos(todos)?;
            for (id, action) in todos {
                changes.extend(todo_changes(goal, id, action, "", actor, now)?);
                effects.push(transition_effect(action));
            }
            if !note.trim().is_empty() || !evidence_refs.is_empty() {
                changes.push(Change::NoteRecorded {
                    todo: None,
                    note: EvidenceNote::new(now, actor.name(), note, evidence_refs),
                });
                effects.push("note_recorded");
            }
            Ok((changes, receipt(goal, &effects)))
        }
    }
}
