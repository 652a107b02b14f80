//! Goal and todo requests through the authority, for the conformance
//! suite's lease, adoption, writeback and stale-base properties: a goal with
//! numbered todos on the goal stream, and each todo action on that todo's
//! own stream (`loopx_core::goal::frontier`), decided with the goal as the
//! application reads it. Owns only test fixtures; every rule is the core's.
#![allow(dead_code)]

use jiff::{SignedDuration, Timestamp};
pub use loopx_core::goal::frontier::{self, TodoContext, TodoOwner};
pub use loopx_core::goal::objective::{self, ObjectiveDocument};
pub use loopx_core::goal::todo::TodoAction;
pub use loopx_core::goal::{
    Actor, Goal, GoalCommand, GoalContext, GoalError, GoalOwner, GoalReceipt, GoalRequest,
    RootCommitments,
};
use loopx_core::operation::OperationId;
use loopx_store::{Authority, AuthorityError, Either, Receipt, Step, Store};

pub const GOAL_STREAM: &str = "goal:main";

/// A fixed instant plus `seconds`: leases expire on the tests' clock.
pub fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

fn op(id: &str) -> OperationId {
    OperationId::parse(id).unwrap()
}

pub fn goal_command(
    store: &dyn Store,
    id: &str,
    command: &GoalCommand,
) -> Result<Receipt<GoalReceipt>, AuthorityError<GoalError>> {
    let now = at(0);
    Authority::new(store).execute::<GoalOwner>(
        GOAL_STREAM,
        &op(id),
        command,
        &GoalContext { now },
        now,
    )
}

pub fn goal_op(
    store: &dyn Store,
    id: &str,
    actor: Actor,
    request: GoalRequest,
) -> Result<Receipt<GoalReceipt>, AuthorityError<GoalError>> {
    let command = GoalCommand {
        actor,
        expected_instance: None,
        request,
        base_revision: None,
    };
    goal_command(store, id, &command)
}

/// A goal with todos `t1..=tN` (one goal write to create it, one per
/// todo), as stored.
pub fn goal_with_todos(store: &dyn Store, todos: usize) -> Goal {
    goal_op(
        store,
        "create",
        Actor::Owner,
        GoalRequest::Create {
            goal_id: "main".into(),
            objective: "the objective".into(),
            commitments: RootCommitments::default(),
            todo_streams: false,
        },
    )
    .unwrap();
    for n in 1..=todos {
        goal_op(
            store,
            &format!("add-{n}"),
            Actor::Owner,
            GoalRequest::AddTodo {
                id: None,
                title: format!("work {n}"),
            },
        )
        .unwrap();
    }
    load_goal(store)
}

pub fn load_goal(store: &dyn Store) -> Goal {
    Authority::new(store)
        .load::<GoalOwner>(GOAL_STREAM)
        .unwrap()
        .state
        .unwrap()
}

pub fn todo_stream(goal: &Goal, todo: &str) -> String {
    frontier::stream(&goal.instance_id, todo)
}

fn todo_command(agent: &str, todo: &str, action: TodoAction) -> GoalCommand {
    GoalCommand {
        actor: Actor::Agent(agent.into()),
        expected_instance: None,
        request: GoalRequest::Todo {
            id: todo.into(),
            action,
            note: String::new(),
        },
        base_revision: None,
    }
}

/// `action` on `todo` by `agent` at `now`, on the todo's own stream.
pub fn todo_action(
    store: &dyn Store,
    goal: &Goal,
    agent: &str,
    todo: &str,
    action: TodoAction,
    now: Timestamp,
) -> Result<Receipt<GoalReceipt>, AuthorityError<GoalError>> {
    let command = todo_command(agent, todo, action);
    let id = format!("{agent}-{todo}-{}", now.as_second());
    Authority::new(store).execute::<TodoOwner>(
        &todo_stream(goal, todo),
        &op(&id),
        &command,
        &TodoContext {
            now,
            goal,
            born: None,
        },
        now,
    )
}

pub fn claim(
    store: &dyn Store,
    goal: &Goal,
    agent: &str,
    todo: &str,
    ttl_seconds: u64,
    now: Timestamp,
) -> Result<Receipt<GoalReceipt>, AuthorityError<GoalError>> {
    todo_action(
        store,
        goal,
        agent,
        todo,
        TodoAction::Claim { ttl_seconds },
        now,
    )
}

/// Who holds `todo` at `now`, from its stream.
pub fn holder(store: &dyn Store, goal: &Goal, todo: &str, now: Timestamp) -> Option<String> {
    let loaded = Authority::new(store)
        .load::<TodoOwner>(&todo_stream(goal, todo))
        .unwrap();
    loaded.state?.holder(now).map(str::to_owned)
}

type Group = (Receipt<GoalReceipt>, Vec<Receipt<GoalReceipt>>);

/// A writeback by `agent`: a note on the goal and `todos`' transitions on
/// their streams, as one grouped commit.
pub fn writeback(
    store: &dyn Store,
    goal: &Goal,
    agent: &str,
    id: &str,
    todos: &[(&str, TodoAction)],
    now: Timestamp,
) -> Result<Group, AuthorityError<Either<GoalError, GoalError>>> {
    let command = GoalCommand {
        actor: Actor::Agent(agent.into()),
        expected_instance: None,
        request: GoalRequest::Writeback {
            note: "turn done".into(),
            evidence_refs: vec![],
            todos: todos
                .iter()
                .map(|(todo, action)| ((*todo).to_owned(), action.clone()))
                .collect(),
        },
        base_revision: None,
    };
    let (goal_part, todo_parts) = frontier::split_writeback(&command).unwrap().unwrap();
    let id = op(id);
    let streams: Vec<String> = todos
        .iter()
        .map(|(todo, _)| todo_stream(goal, todo))
        .collect();
    let (goal_context, todo_context) = (
        GoalContext { now },
        TodoContext {
            now,
            goal,
            born: None,
        },
    );
    let steps: Vec<Step<'_, '_, TodoOwner>> = todo_parts
        .iter()
        .zip(&streams)
        .map(|(request, stream)| Step {
            stream,
            operation_id: &id,
            request,
            context: &todo_context,
        })
        .collect();
    let note = Step::<GoalOwner> {
        stream: GOAL_STREAM,
        operation_id: &id,
        request: &goal_part,
        context: &goal_context,
    };
    Authority::new(store).execute_group(&note, &steps, now)
}
