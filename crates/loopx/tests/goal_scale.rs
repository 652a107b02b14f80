//! Large goals through the real binary and SQLite file: the bulk path
//! (`todo add --from-file`, one operation, all or nothing) and the
//! answers an agent reads staying bounded as the goal grows.

mod common;

use common::Fixture;
use serde_json::Value;

impl Fixture {
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.temp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn ok(&self, args: &[&str]) -> Value {
        let (ok, json, stderr) = self.run_in_dir(args);
        assert!(ok, "{args:?} failed: {stderr}");
        json
    }

    fn todo_ids(&self) -> Vec<String> {
        self.ok(&["todo", "list"])["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn journal_kinds(f: &Fixture) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(
        f.dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut statement = conn
        .prepare("SELECT kind FROM journal WHERE stream = 'goal:main' ORDER BY revision")
        .unwrap();
    let rows = statement.query_map([], |row| row.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

/// `n` todos as JSON lines, ids left to loopx.
fn plan(n: usize) -> String {
    (1..=n)
        .map(|i| format!("{{\"title\": \"step {i} of the imported plan\"}}\n"))
        .collect()
}

#[test]
fn a_batch_adds_every_todo_in_order_as_one_operation_and_replays_without_writing() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.ok(&["todo", "add", "--title", "by hand"]);
    let lines = f.file(
        "plan.jsonl",
        "{\"title\": \"first\"}\n{\"id\": \"t5\", \"title\": \"named\"}\n{\"title\": \"third\"}\n",
    );
    let add_plan = || {
        f.ok(&[
            "todo",
            "add",
            "--from-file",
            &lines,
            "--operation-id",
            "plan-1",
        ])
    };
    let receipt = add_plan();
    assert_eq!(receipt["added"], 3, "{receipt}");
    assert_eq!(f.todo_ids(), ["t1", "t2", "t5", "t3"]);
    let kinds = journal_kinds(&f);
    assert_eq!(
        kinds.iter().filter(|k| *k == "goal.todos_added").count(),
        1,
        "one journal entry for the batch: {kinds:?}"
    );

    let before = f.fingerprint();
    let replay = add_plan();
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(f.fingerprint(), before, "a replay writes nothing");

    let array = f.file(
        "plan.json",
        r#"[{"title": "from an array"}, {"id": "last", "title": "named too"}]"#,
    );
    f.ok(&["todo", "add", "--from-file", &array]);
    assert_eq!(f.todo_ids(), ["t1", "t2", "t5", "t3", "t6", "last"]);
    f.assert_valid();
}

#[test]
fn one_bad_row_refuses_the_batch_naming_the_row_and_changes_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    // Before the goal's first write: a refused batch must not create it.
    let fresh = f.file("fresh.jsonl", "{\"title\": \"a\"}\n{\"title\": \" \"}\n");
    let (_, stderr) = f.refused_in_dir(&["todo", "add", "--from-file", &fresh]);
    assert!(
        stderr.contains("row 2: a todo needs a non-empty"),
        "{stderr}"
    );

    f.ok(&["todo", "add", "--title", "exists", "--id", "kept"]);
    let cases = [
        (
            "{\"title\": \"a\"}\n{\"title\": \"b\"}\n{\"id\": \"kept\", \"title\": \"c\"}\n",
            "row 3: todo kept already exists",
        ),
        (
            "{\"id\": \"x\", \"title\": \"a\"}\n{\"id\": \"x\", \"title\": \"b\"}\n",
            "row 2: todo x is added twice",
        ),
        (
            "{\"title\": \"a\"}\n{\"tittle\": \"typo\"}\n",
            "row 2 (line 2): not a todo",
        ),
        (
            "{\"title\": \"a\"}\n\n{\"title\": \"b\"}\n",
            "row 2 (line 2) is blank",
        ),
        (
            "{\"title\": \"a\"}\nnot json\n",
            "row 2 (line 2): not a todo",
        ),
        (
            "{\"title\": \"a\"}\n{\"id\": \"has space\", \"title\": \"b\"}\n",
            "row 2:",
        ),
        (
            "{\"title\": \"a\"}\n{\"title\": \"bell \\u0007\"}\n",
            "row 2:",
        ),
        ("[{\"title\": \"a\"}, {\"title\": 7}]", "row 2: not a todo"),
        ("[]", "lists no todos"),
        ("", "lists no todos"),
    ];
    for (text, expected) in cases {
        let path = f.file("bad.jsonl", text);
        let (_, stderr) = f.refused_in_dir(&["todo", "add", "--from-file", &path]);
        assert!(
            stderr.contains(expected),
            "{text:?}: expected {expected:?} in {stderr}"
        );
    }
    assert_eq!(f.todo_ids(), ["kept"]);
}

#[test]
fn a_batch_conflicts_with_a_title_or_an_id() {
    let f = Fixture::new();
    f.init(5, &[]);
    let path = f.file("plan.jsonl", &plan(2));
    for extra in [["--title", "x"], ["--id", "t9"]] {
        let (_, stderr) = f.refused_in_dir(
            &[
                &["todo", "add", "--from-file", path.as_str()][..],
                &extra[..],
            ]
            .concat(),
        );
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}

/// What should-run's bounded answer may weigh: the task body's budget.
const BRIEF_BYTES: usize = 8 * 1024;

#[test]
fn should_run_stays_bounded_at_ten_thousand_todos_and_the_detail_has_everything() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.large_goal(10_000, 12, 20);
    assert_eq!(f.ok(&["todo", "list"])["total"], 10_000);

    let brief = f.ok(&["quota", "should-run"]);
    let bytes = brief.to_string().len();
    assert!(bytes <= BRIEF_BYTES, "should-run is {bytes} bytes: {brief}");
    assert_eq!(brief["schema_version"], 2);
    assert_eq!(brief["selected_todo"]["id"], "t1", "{brief}");
    assert_eq!(brief["counts"]["todos"], 10_000);
    assert_eq!(brief["counts"]["runnable"], 10_000);
    assert_eq!(brief["open_gaps_total"], 12);
    let gaps = brief["open_gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 5, "the first open gaps only");
    assert_eq!(gaps[0]["outcome_id"], "outcome-1");
    assert_eq!(gaps[0]["unresolved"].as_array().unwrap().len(), 8);
    assert_eq!(gaps[0]["unresolved_total"], 20);
    assert!(brief["detail"].as_str().unwrap().contains("--detail"));

    let detail = f.ok(&["quota", "should-run", "--detail"]);
    let gaps = detail["open_gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 12);
    assert!(gaps
        .iter()
        .all(|g| g["unresolved"].as_array().unwrap().len() == 20));
    assert_eq!(
        detail["scheduler_hint"], brief["scheduler_hint"],
        "one decision, two views"
    );
    assert!(detail.to_string().len() > bytes);
}

#[test]
fn todo_list_is_a_bounded_page_with_a_cursor_at_ten_thousand_todos() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.large_goal(10_000, 0, 0);
    let first = f.ok(&["todo", "list"]);
    assert_eq!(first["schema_version"], 2);
    assert_eq!(first["total"], 10_000);
    let todos = first["todos"].as_array().unwrap();
    assert_eq!(todos.len(), 100, "a page by default");
    assert_eq!(todos[0]["id"], "t1");
    let bytes = first.to_string().len();
    assert!(bytes <= 32 * 1024, "a page is {bytes} bytes");
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = f.ok(&["todo", "list", "--cursor", &cursor]);
    assert_eq!(second["todos"][0]["id"], "t101");

    // Following the cursors visits every todo once, in order.
    let (mut seen, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let mut args = vec!["todo", "list", "--limit", "1000"];
        if let Some(cursor) = &cursor {
            args.extend(["--cursor", cursor.as_str()]);
        }
        let page = f.ok(&args);
        seen.extend(
            page["todos"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=10_000).map(|i| format!("t{i}")).collect();
    assert_eq!(seen, expected);

    let before = f.fingerprint();
    for (args, said) in [
        (vec!["--limit", "0"], "a page holds 1 to 1000 todos"),
        (vec!["--limit", "1001"], "a page holds 1 to 1000 todos"),
        (vec!["--cursor", "nonsense"], "is not one `todo list` gave"),
        (
            vec!["--cursor", "main#2@100"],
            "is for goal instance main#2",
        ),
        (
            vec!["--cursor", "main#1@10001"],
            "is past the goal's 10000 todos",
        ),
    ] {
        let (ok, _, stderr) = f.run_in_dir(&[&["todo", "list"][..], &args[..]].concat());
        assert!(!ok && stderr.contains(said), "{args:?}: {stderr}");
    }
    assert_eq!(f.fingerprint(), before, "a read writes nothing");
}

/// `quota should-run` at `now` for `agent` (the owner when `None`).
fn should_run_as(f: &Fixture, agent: Option<&str>) -> Value {
    match agent {
        Some(agent) => f.ok(&["quota", "should-run", "--agent-id", agent]),
        None => f.ok(&["quota", "should-run"]),
    }
}

#[test]
fn should_run_reads_the_frontier_from_the_index_and_answers_as_a_scan_of_every_todo() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.large_goal(10_000, 2, 3);
    f.ok(&["todo", "claim", "t1", "--agent-id", "a", "--ttl", "3600"]);
    f.ok(&["todo", "claim", "t2", "--agent-id", "b", "--ttl", "3600"]);
    f.ok(&["todo", "complete", "t2", "--agent-id", "b"]);
    f.ok(&["todo", "defer", "t3", "--for", "1h"]);
    f.ok(&["todo", "block", "t4", "--reason", "waits on the vendor"]);
    f.ok(&["todo", "claim", "t9000", "--agent-id", "b", "--ttl", "3600"]);
    let answers = |f: &Fixture| -> Vec<Value> {
        [None, Some("a"), Some("b"), Some("c")]
            .into_iter()
            .map(|agent| should_run_as(f, agent))
            .collect()
    };
    let indexed = answers(&f);
    let owner = &indexed[0];
    assert_eq!(owner["selected_todo"]["id"], "t5", "{owner}");
    assert_eq!(
        owner["counts"],
        serde_json::json!({"todos": 10_000, "runnable": 9_995, "held": 2, "deferred": 1, "blocked": 1, "done": 1})
    );
    assert_eq!(
        indexed[1]["selected_todo"]["id"], "t1",
        "a resumes its own claim"
    );
    assert_eq!(
        indexed[2]["selected_todo"]["id"], "t9000",
        "b resumes its own claim"
    );
    assert_eq!(indexed[3]["selected_todo"]["id"], "t5");
    f.assert_valid();

    // Take one todo's index row away, as a loop written before the index
    // would have it: the index no longer counts every todo, and should-run
    // reads the todos themselves, to the same answers, byte for byte.
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    let class: i64 = conn
        .query_row(
            "DELETE FROM facets WHERE stream = 'todo:main#1/t7' RETURNING class",
            [],
            |row| row.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE facet_counts SET n = n - 1 WHERE family = 'todo:main#1/' AND class = ?1",
        [class],
    )
    .unwrap();
    drop(conn);
    assert_eq!(answers(&f), indexed);
}

#[test]
fn validate_finds_an_index_row_that_disagrees_with_its_todo() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.large_goal(20, 0, 0);
    f.ok(&["todo", "claim", "t2", "--agent-id", "a"]);
    f.assert_valid();
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    // Marked done in the index only: should-run would skip it.
    let changed = conn
        .execute(
            "UPDATE facets SET class = 4, due = NULL, holder = NULL WHERE stream = 'todo:main#1/t2'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1, "each todo has its index row");
    drop(conn);
    let said = f.validate_refused();
    assert!(said.contains("todo:main#1/t2"), "{said}");
    assert!(said.contains("counts of todo:main#1/"), "{said}");
}
