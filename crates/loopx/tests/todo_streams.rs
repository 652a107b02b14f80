//! Todos kept in streams of their own, through the real binary: a loop
//! written before todo streams existed (every todo transition in the goal
//! snapshot) keeps its leases, answers a retried operation with its
//! original receipt, and moves on to the new shape without losing or
//! doubling anything; `validate` audits both shapes.

mod common;

use common::Fixture;
use jiff::Timestamp;
use loopx_core::goal::todo::TodoAction;
use loopx_core::goal::{Actor, GoalCommand, GoalContext, GoalOwner, GoalRequest};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::Access;
use loopx_store::{Authority, Locator};
use serde_json::Value;

fn run(f: &Fixture, agent: Option<&str>, args: &[&str]) -> (bool, Value, String) {
    let mut command = f.loopx();
    command.args(args).args(["--dir", f.d(), "--json"]);
    if let Some(agent) = agent {
        command.env("LOOPX_AGENT_ID", agent);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn ok(f: &Fixture, agent: Option<&str>, args: &[&str]) -> Value {
    let (ok, json, stderr) = run(f, agent, args);
    assert!(ok, "{args:?} failed: {stderr}");
    json
}

fn todo<'v>(list: &'v Value, id: &str) -> &'v Value {
    list["todos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap()
}

/// Commit `request` as `actor` on the goal stream itself, as loopx did
/// before todo streams.
fn on_the_goal_stream(f: &Fixture, actor: Actor, request: GoalRequest, op: &str) {
    let locator = Locator::parse(&format!("sqlite:{}/loopx.sqlite", f.d())).unwrap();
    let store = locator.open(Access::ReadWrite).unwrap();
    let command = GoalCommand {
        actor,
        expected_instance: None,
        request,
        base_revision: None,
    };
    let now = Timestamp::now();
    Authority::new(&*store)
        .execute::<GoalOwner>(
            "goal:main",
            &OperationId::parse(op).unwrap(),
            &command,
            &GoalContext { now },
            now,
        )
        .unwrap();
}

/// Create the loop's goal the way loopx did before todo streams: its
/// snapshot lists its todos.
fn goal_in_the_old_shape(f: &Fixture) {
    let request = GoalRequest::Create {
        goal_id: "main".into(),
        objective: "Prove lemma B".into(),
        commitments: Default::default(),
        todo_streams: false,
    };
    on_the_goal_stream(f, Actor::Owner, request, "legacy-create");
}

/// Claim `todo` for `agent` the way loopx did before todo streams: a goal
/// request on the goal stream, the lease kept in the goal snapshot.
fn claim_in_the_goal_snapshot(f: &Fixture, agent: &str, todo: &str, op: &str) {
    let request = GoalRequest::Todo {
        id: todo.into(),
        action: TodoAction::Claim { ttl_seconds: 3600 },
        note: String::new(),
    };
    on_the_goal_stream(f, Actor::Agent(agent.into()), request, op);
}

#[test]
fn a_loop_written_before_todo_streams_keeps_its_leases_and_its_replays() {
    let f = Fixture::new();
    f.init(10, &[]);
    goal_in_the_old_shape(&f);
    ok(&f, None, &["todo", "add", "--title", "old work"]);
    ok(&f, None, &["todo", "add", "--title", "more work"]);
    assert_eq!(
        goal_snapshot(&f)["todos"].as_array().map(Vec::len),
        Some(2),
        "a goal of the old shape keeps listing its todos"
    );
    claim_in_the_goal_snapshot(&f, "old", "t1", "legacy-claim");
    let list = ok(&f, None, &["todo", "list"]);
    assert_eq!(todo(&list, "t1")["lease"]["holder"], "old");

    // The lease kept in the goal snapshot still holds others off.
    let before = f.fingerprint();
    let (claimed, _, stderr) = run(&f, Some("new"), &["todo", "claim", "t1"]);
    assert!(!claimed && stderr.contains("old"), "{stderr}");
    assert_eq!(f.fingerprint(), before, "a refusal writes nothing");

    // A retry of the claim committed the old way is its replay, not a
    // second decision (which would refuse: the lease is its own).
    let replay = ok(
        &f,
        Some("old"),
        &["todo", "claim", "t1", "--operation-id", "legacy-claim"],
    );
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(f.fingerprint(), before, "a replay writes nothing");

    // The holder finishes it in the new shape; done is final for everyone.
    ok(&f, Some("old"), &["todo", "complete", "t1"]);
    let list = ok(&f, None, &["todo", "list"]);
    assert_eq!(todo(&list, "t1")["status"], "done");
    let (claimed, _, _) = run(&f, Some("new"), &["todo", "claim", "t1"]);
    assert!(!claimed, "a done todo was claimed again");
    ok(&f, Some("new"), &["todo", "claim", "t2"]);
    assert_eq!(
        todo(&ok(&f, None, &["todo", "list"]), "t2")["lease"]["holder"],
        "new"
    );
    f.assert_valid();
}

#[test]
fn validate_audits_each_todo_stream_against_its_journal() {
    let f = Fixture::new();
    f.init(10, &[]);
    ok(&f, None, &["todo", "add", "--title", "work"]);
    ok(&f, Some("a"), &["todo", "claim", "t1"]);
    ok(&f, Some("a"), &["todo", "renew", "t1", "--ttl", "60"]);
    f.assert_valid();
    // A snapshot that no longer matches its journal is found and named.
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    let changed = conn
        .execute(
            "UPDATE snapshots SET state = replace(state, '\"holder\":\"a\"', '\"holder\":\"z\"') \
             WHERE stream = 'todo:main#1/t1'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1, "the todo's live state is in its own stream");
    drop(conn);
    let said = f.validate_refused();
    assert!(said.contains("todo:main#1/t1"), "{said}");
}

/// A process that claims one todo after another keeps the goal it read
/// (claims no longer change it) but never past a goal write: an objective
/// revision committed by another process meanwhile fences its next claim.
#[test]
fn a_claimer_that_keeps_its_goal_still_sees_the_next_goal_write() {
    use loopx_app::goal::acceptance;
    use loopx_app::goal::todo as todos;
    use loopx_app::goal::{GoalTarget, Submit};
    use loopx_app::loop_dir::LoopDir;
    use loopx_core::goal::objective::ObjectiveDocument;

    let f = Fixture::new();
    f.init(10, &[]);
    for title in ["one", "two"] {
        ok(&f, None, &["todo", "add", "--title", title]);
    }
    let locator = Locator::parse(&format!("sqlite:{}/loopx.sqlite", f.d())).unwrap();
    let open = || LoopDir::open_at(&f.dir, &locator, Access::ReadWrite).unwrap();
    let (claimer, owner) = (open(), open());
    let op = || loopx_app::operation::generate();
    let owner_target = GoalTarget::owner_of_default();
    for agent in ["a", "b"] {
        acceptance::register_agent(&owner, &owner_target, agent.into(), &op()).unwrap();
    }
    let agent = GoalTarget {
        actor: Actor::Agent("a".into()),
        ..GoalTarget::owner_of_default()
    };
    todos::claim(&claimer, &agent, "t1", 600, "", &op()).unwrap();
    let read_at = owner.goal("main").unwrap().revision;
    let document = ObjectiveDocument {
        objective: "a wider objective".into(),
        reason: "scope grew".into(),
        source_ref: "msg-1".into(),
    };
    let how = Submit::Execute(op());
    acceptance::revise_objective(&owner, &owner_target, document, read_at, &how).unwrap();
    let refused = todos::claim(&claimer, &agent, "t2", 600, "", &op()).unwrap_err();
    assert!(
        format!("{refused:#}").contains("adopt"),
        "the claim went through on a goal read before the revision: {refused:#}"
    );
}

/// A writeback is kept in the goal (its note) and in each todo it names:
/// repeating it exactly is a replay of all of it, and reusing its
/// operation id for another writeback is refused; neither writes.
#[test]
fn a_writeback_across_streams_replays_whole_and_refuses_a_reused_id() {
    let f = Fixture::new();
    f.init(10, &[]);
    ok(&f, None, &["todo", "add", "--title", "one"]);
    ok(&f, None, &["todo", "add", "--title", "two"]);
    ok(&f, Some("a"), &["todo", "claim", "t1"]);
    let writeback = |todo: &str| {
        run(
            &f,
            Some("a"),
            &[
                "refresh-state",
                "--note",
                "turn done",
                "--complete",
                todo,
                "--operation-id",
                "turn-1",
            ],
        )
    };
    let (done, first, stderr) = writeback("t1");
    assert!(done, "{stderr}");
    assert_eq!(first["replayed"], false);
    assert_eq!(
        first["effects"],
        serde_json::json!(["todo_completed", "note_recorded"])
    );
    let before = f.fingerprint();
    let (again, replay, stderr) = writeback("t1");
    assert!(again, "{stderr}");
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(replay["effects"], first["effects"]);
    assert_eq!(f.fingerprint(), before, "a replay writes nothing");
    let (reused, _, stderr) = writeback("t2");
    assert!(!reused && stderr.contains("turn-1"), "{stderr}");
    assert_eq!(f.fingerprint(), before, "a refusal writes nothing");
    f.assert_valid();
}

/// The goal's snapshot as stored.
fn goal_snapshot(f: &Fixture) -> Value {
    f.stored_snapshot("goal:main")
}

#[test]
fn a_new_goal_keeps_each_todo_in_its_own_stream_from_the_start() {
    let f = Fixture::new();
    f.init(10, &[]);
    ok(
        &f,
        None,
        &["todo", "add", "--title", "first", "--id", "zeta"],
    );
    let small = goal_snapshot(&f).to_string().len();
    f.large_goal(2_000, 0, 0);
    ok(
        &f,
        None,
        &["todo", "add", "--title", "named", "--id", "alpha"],
    );
    let added = ok(&f, None, &["todo", "add", "--title", "last"]);
    assert_eq!(added["todo_id"], "t2001", "{added}");

    let snapshot = goal_snapshot(&f);
    assert_eq!(
        snapshot
            .get("todos")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(0)
    );
    assert_eq!(snapshot["streamed_todos"], 2_003);
    assert!(
        snapshot.to_string().len() < small + 64,
        "the goal snapshot does not grow with its todos: {} bytes, {small} with one todo",
        snapshot.to_string().len()
    );
    let ids = |args: &[&str]| -> Vec<String> {
        ok(&f, None, &[&["todo", "list"][..], args].concat())["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&["--limit", "3"]),
        ["zeta", "t1", "t2"],
        "priority order is the order added"
    );
    assert_eq!(ids(&["--cursor", "main#1@2001"]), ["alpha", "t2001"]);

    // An id that exists is refused, whoever added it; nothing is written.
    let before = f.fingerprint();
    let (added, _, stderr) = run(&f, None, &["todo", "add", "--title", "again", "--id", "t7"]);
    assert!(
        !added && stderr.contains("todo t7 already exists"),
        "{stderr}"
    );
    assert_eq!(f.fingerprint(), before, "a refusal writes nothing");

    // Claims and writebacks work on todos born in their streams.
    ok(&f, Some("a"), &["todo", "claim", "t7"]);
    ok(
        &f,
        Some("a"),
        &["refresh-state", "--complete", "t7", "--note", "done"],
    );
    let list = ok(&f, None, &["todo", "list", "--limit", "10"]);
    assert_eq!(todo(&list, "t7")["status"], "done");
    assert_eq!(
        ok(&f, None, &["quota", "should-run"])["selected_todo"]["id"],
        "zeta"
    );
    f.assert_valid();
}

#[test]
fn racing_adds_each_get_their_own_todo_and_none_is_lost() {
    let f = Fixture::new();
    f.init(10, &[]);
    ok(&f, None, &["todo", "add", "--title", "first"]);
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let mut command = std::process::Command::new(common::loopx_path());
            command
                .env("LOOPX_REGISTRY_DIR", &f.registry)
                .args(["todo", "add", "--dir", f.d(), "--json", "--title"])
                .arg(format!("racer {i}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    for racer in racers {
        let output = racer.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "a racing add failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let list = ok(&f, None, &["todo", "list"]);
    let mut ids: Vec<&str> = list["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(list["total"], 9);
    ids.sort_unstable();
    let mut expected: Vec<String> = (1..=9).map(|i| format!("t{i}")).collect();
    expected.sort_unstable();
    assert_eq!(ids, expected, "every add got its own id");
    assert_eq!(goal_snapshot(&f)["streamed_todos"], 9);
    f.assert_valid();
}
