//! `loopx migrate --from-dir D --store URL` on the real binary: a SQLite
//! loop moves into PostgreSQL with every stream, journal entry and receipt,
//! verified by `validate` on both sides; a retried operation replays on
//! PostgreSQL with the receipt it got on SQLite; a store that holds a loop
//! is refused; a move killed before its commit leaves nothing; and the
//! source directory never changes. Without server binaries the tests are
//! skipped unless `LOOPX_PG_REQUIRED=1`.

mod common;
#[path = "../../loopx-store/tests/support/pg_server.rs"]
mod pg_server;

use common::Fixture;
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Run `loopx ARGS --dir D` against `store` (`None`: the directory's own
/// SQLite file); returns (success, stdout, stderr) and asserts that no
/// output shows the password.
fn run(f: &Fixture, store: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut command = f.loopx();
    command.args(args).args(["--dir", f.d()]);
    match store {
        Some(url) => command.env("LOOPX_STORE", url),
        None => command.env_remove("LOOPX_STORE"),
    };
    outcome(command.env("LOOPX_AGENT_ID", "a"))
}

/// Run `command`: (success, stdout, stderr), asserting that no output
/// shows the password.
fn outcome(command: &mut assert_cmd::Command) -> (bool, String, String) {
    let out = command.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !stdout.contains(pg_server::PASSWORD) && !stderr.contains(pg_server::PASSWORD),
        "printed the password: {stdout}{stderr}"
    );
    (out.status.success(), stdout, stderr)
}

fn json(f: &Fixture, store: Option<&str>, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (ok, stdout, stderr) = run(f, store, &args);
    assert!(ok, "{args:?} failed: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// `migrate --from-dir D --store URL`: (success, stdout, stderr).
fn move_loop(f: &Fixture, url: &str, extra: &[&str]) -> (bool, String, String) {
    outcome(
        f.loopx()
            .args(["migrate", "--from-dir", f.d(), "--store", url])
            .args(extra)
            .env_remove("LOOPX_STORE"),
    )
}

/// A SQLite loop that has used every kind of state: ledger iterations,
/// todos added, claimed and completed, a goal refinement, each through
/// the binary; `op-add` is the operation id of one todo addition.
fn busy_sqlite_loop() -> Fixture {
    let f = Fixture::new();
    f.init(10, &["--acceptance", "the user approves the deck"]);
    f.append("continue", &[]).success();
    json(
        &f,
        None,
        &["todo", "add", "--title", "deck", "--operation-id", "op-add"],
    );
    json(&f, None, &["todo", "add", "--title", "abstract"]);
    json(&f, None, &["todo", "claim", "t1"]);
    json(
        &f,
        None,
        &["todo", "complete", "t1", "--note", "deck drafted"],
    );
    let document = f.temp.path().join("refine.json");
    std::fs::write(
        &document,
        json!({
            "outcome_id": "deck",
            "objective": "A talk deck that keeps the accepted introduction",
            "add_requirements": [{"id": "R1", "description": "Keep the introduction first"}],
            "link_todos": ["t2"],
            "source": {"ref": "msg-1", "summary": "user: keep my intro"}
        })
        .to_string(),
    )
    .unwrap();
    json(
        &f,
        None,
        &[
            "goal-acceptance",
            "refine-outcome",
            "--document",
            document.to_str().unwrap(),
            "--operation-id",
            "refine-1",
        ],
    );
    f.append("continue", &[]).success();
    f
}

/// What `validate --json` says, with the streams in name order (each
/// backend lists them in its own collation).
fn checked(f: &Fixture, store: Option<&str>) -> Value {
    let view = json(f, store, &["validate"]);
    assert_eq!(view["status"], "ok", "{view}");
    let mut checked = view["checked"].clone();
    let mut streams = checked["streams"].as_array().unwrap().clone();
    streams.sort_by_key(|s| s["stream"].as_str().unwrap().to_owned());
    checked["streams"] = Value::Array(streams);
    checked
}

#[test]
fn a_sqlite_loop_moves_into_postgres_with_its_journal_and_receipts_and_validates_alike() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = busy_sqlite_loop();
    let sqlite = checked(&f, None);
    let before = f.fingerprint();

    let (ok, stdout, stderr) = move_loop(&f, &url, &["--json"]);
    assert!(ok, "{stderr}");
    let moved: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(moved["status"], "moved");
    assert!(
        moved["store"]
            .as_str()
            .unwrap()
            .starts_with("postgres://postgres@127.0.0.1:"),
        "{moved}"
    );
    assert_eq!(moved["state_digest"], sqlite["state_digest"], "{moved}");
    assert_eq!(f.fingerprint(), before, "the move changed the source");

    // Both sides validate, with the same counts and the same state.
    let postgres = checked(&f, Some(&url));
    assert_eq!(postgres["iterations"], 2);
    assert_eq!(postgres["iterations"], sqlite["iterations"]);
    assert_eq!(postgres["revision"], sqlite["revision"]);
    assert_eq!(postgres["streams"], sqlite["streams"]);
    assert_eq!(postgres["state_digest"], sqlite["state_digest"]);
    assert!(postgres["streams"].as_array().unwrap().len() >= 2);
    // The todo index came along, row for row.
    let facets = |locator: &str| {
        let store = loopx_store::Locator::parse(locator)
            .unwrap()
            .open(loopx_store::sqlite::Access::ReadOnly)
            .unwrap();
        let mut rows = Vec::new();
        store
            .visit_facets(&mut |stream, facet| {
                rows.push((stream.to_owned(), facet));
                Ok(())
            })
            .unwrap();
        rows
    };
    let on_sqlite = facets(&format!("sqlite:{}", f.dir.join("loopx.sqlite").display()));
    assert_eq!(on_sqlite.len(), 2, "each todo has its index row");
    assert_eq!(facets(&url), on_sqlite);

    // A retried operation replays on PostgreSQL with its SQLite receipt.
    let replay = |store: Option<&str>| {
        json(
            &f,
            store,
            &["todo", "add", "--title", "deck", "--operation-id", "op-add"],
        )
    };
    let on_sqlite = replay(None);
    let on_postgres = replay(Some(&url));
    assert_eq!(on_postgres["replayed"], true, "{on_postgres}");
    assert_eq!(on_postgres, on_sqlite);
    // The same id with another request is still a conflict there.
    let (ok, _, stderr) = run(
        &f,
        Some(&url),
        &[
            "todo",
            "add",
            "--title",
            "other",
            "--operation-id",
            "op-add",
        ],
    );
    assert!(!ok && stderr.contains("op-add"), "{stderr}");

    // The moved loop goes on; the source is untouched by it.
    let before = f.fingerprint();
    json(&f, Some(&url), &["todo", "add", "--title", "next"]);
    assert_eq!(checked(&f, Some(&url))["iterations"], 2);
    let todos = json(&f, None, &["todo", "list"])["todos"].clone();
    assert_eq!(todos.as_array().unwrap().len(), 2, "{todos}");
    assert_eq!(
        f.fingerprint()
            .into_iter()
            .filter(|(name, _)| name != "recovery.md" && name != "status.json")
            .collect::<Vec<_>>(),
        before
            .into_iter()
            .filter(|(name, _)| name != "recovery.md" && name != "status.json")
            .collect::<Vec<_>>(),
    );
}

#[test]
fn a_store_that_holds_a_loop_is_refused_and_nothing_is_written() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = busy_sqlite_loop();
    // Moved once: a second move into the same database is refused.
    let (ok, _, stderr) = move_loop(&f, &url, &[]);
    assert!(ok, "{stderr}");
    let target = checked(&f, Some(&url));
    let before = f.fingerprint();
    let (ok, _, stderr) = move_loop(&f, &url, &[]);
    assert!(!ok, "a second move was accepted");
    assert!(
        stderr.contains("already holds loop state") && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert!(
        stderr.contains("postgres://postgres@127.0.0.1:"),
        "{stderr}"
    );
    assert_eq!(checked(&f, Some(&url)), target);
    assert_eq!(f.fingerprint(), before);

    // A database where another loop was started is refused alike.
    let other = pg_server::database().unwrap();
    let g = Fixture::new();
    let out = g
        .loopx()
        .args(g.init_words())
        .env("LOOPX_STORE", &other)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (ok, _, stderr) = move_loop(&f, &other, &[]);
    assert!(!ok && stderr.contains("stream"), "{stderr}");
    assert_eq!(f.fingerprint(), before);

    // So is a source that is not a loop, and a SQLite target.
    let empty = pg_server::database().unwrap();
    let h = Fixture::new();
    std::fs::create_dir_all(&h.dir).unwrap();
    let (ok, _, stderr) = move_loop(&h, &empty, &[]);
    assert!(!ok && stderr.contains("no loop at"), "{stderr}");
    let (ok, _, stderr) = move_loop(&f, "sqlite:/tmp/never-there.sqlite", &[]);
    assert!(!ok && stderr.contains("PostgreSQL store"), "{stderr}");
    assert!(!std::path::Path::new("/tmp/never-there.sqlite").exists());
}

#[test]
fn a_move_killed_before_its_commit_leaves_the_store_empty_and_can_be_run_again() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = busy_sqlite_loop();
    let sqlite = checked(&f, None);
    let before = f.fingerprint();
    let mut command = Command::new(common::loopx_path());
    command
        .args(["migrate", "--from-dir", f.d(), "--store", &url])
        .env_remove("LOOPX_STORE");
    common::kill_at_failpoint(command, "postgres.import.before_commit");

    // Every row was copied in the killed transaction; none is visible.
    let (ok, _, stderr) = run(&f, Some(&url), &["status"]);
    assert!(!ok, "the killed move left a loop behind");
    assert!(
        stderr.contains("no loop") || stderr.contains("holds a database but no loop"),
        "{stderr}"
    );
    assert_eq!(f.fingerprint(), before);

    let (ok, _, stderr) = move_loop(&f, &url, &[]);
    assert!(ok, "{stderr}");
    assert_eq!(checked(&f, Some(&url)), sqlite);
}

#[test]
fn a_loop_with_a_running_driver_is_not_moved() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = busy_sqlite_loop();
    let lock = std::fs::File::create(f.dir.join("driver.lock")).unwrap();
    lock.lock().unwrap();
    let before = f.fingerprint();
    let (ok, _, stderr) = move_loop(&f, &url, &[]);
    assert!(!ok && stderr.contains("a driver is running"), "{stderr}");
    assert_eq!(f.fingerprint(), before);
    drop(lock);
    let (ok, _, stderr) = move_loop(&f, &url, &[]);
    assert!(ok, "{stderr}");
}

#[test]
fn a_fifo_planted_as_the_driver_lock_neither_blocks_nor_stops_the_move() {
    let Some(url) = pg_server::database() else {
        return;
    };
    let f = busy_sqlite_loop();
    let status = Command::new("mkfifo")
        .arg(f.dir.join("driver.lock"))
        .status()
        .unwrap();
    assert!(status.success());
    // Spawned and watched: opening a FIFO would block for ever.
    let mut child = Command::new(common::loopx_path())
        .args(["migrate", "--from-dir", f.d(), "--store", &url])
        .env_remove("LOOPX_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("migrate blocked on the FIFO planted as driver.lock");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success());
    std::fs::remove_file(f.dir.join("driver.lock")).unwrap();
    assert_eq!(checked(&f, Some(&url)), checked(&f, None));
}
