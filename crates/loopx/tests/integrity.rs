//! Nothing lost, nothing leaked: the ledger and the store under overflowing
//! totals, failures after a commit (an unwritable view, a full disk), an
//! orphaned `-wal` or `-journal`, tampered goal snapshots, concurrent writers, read-only
//! directories read by another user, and crashed view writers. Every test
//! runs the real binary on real SQLite files.

mod common;

use common::{iteration_numbers, Fixture};
use predicates::str::contains;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Journal rows of the whole store (every stream).
fn journal_rows(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row("SELECT COUNT(*) FROM journal", [], |row| row.get(0))
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

// ---- 1. running totals -------------------------------------------------

#[test]
fn overflowing_usd_total_is_refused_and_writes_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--usd", "1e308"]).success();
    let before = f.fingerprint();
    let output = f
        .loopx()
        .args(f.append_words("continue"))
        .args(["--usd", "1e308"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("USD total would leave the range")
            && stderr(&output).contains("1e308"),
        "{}",
        stderr(&output)
    );
    assert_eq!(f.fingerprint(), before, "a refused append wrote something");
    // The loop is not bricked: every read still parses the snapshot.
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["spent"]["usd"].as_f64(), Some(1e308));
    f.assert_valid();
    f.append("continue", &["--usd", "1"]).success();
}

#[test]
fn overflowing_token_total_is_refused_and_writes_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--tokens", &u64::MAX.to_string()])
        .success();
    let before = f.fingerprint();
    f.append("continue", &["--tokens", "1"])
        .failure()
        .stderr(contains("token total would leave the range"));
    assert_eq!(f.fingerprint(), before);
    f.assert_valid();
}

/// A Claude stream-json result line reporting `total_cost_usd: 1e308` each
/// turn: the driver charges the first, and refuses the second before it is
/// committed.
#[test]
fn a_driver_charge_that_would_overflow_the_usd_total_is_refused() {
    let f = Fixture::new();
    f.init(10, &[]);
    let bin = f.temp.path().join("bin");
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        r#"#!/bin/sh
loopx append-iteration --mode bounded-research --objective "fake turn" --decision continue >/dev/null
echo '{"type":"result","subtype":"success","is_error":false,"total_cost_usd":1e308,"usage":{"input_tokens":10,"output_tokens":2}}'
"#,
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let output = Command::new(common::loopx_path())
        .args(["drive", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--provider", "claude", "--max-iterations", "3"])
        .env("PATH", path)
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("AUTOLOOP_DRIVER")
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("USD total would leave the range"),
        "{}",
        stderr(&output)
    );
    let charges: i64 = rusqlite::Connection::open(f.dir.join("loopx.sqlite"))
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM journal WHERE kind = 'ledger.charged'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(charges, 1, "only the first charge fits");
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["spent"]["usd"].as_f64(), Some(1e308));
    f.assert_valid();
}

/// What an older loopx committed after two `--usd 1e308`: a second record
/// whose total is infinite, folded into a snapshot holding `null`. Loose
/// JSON comparison found journal and snapshot "equal"; the audit must parse
/// the snapshot as a ledger and re-check the total.
#[test]
fn validate_reports_a_snapshot_that_does_not_parse() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--usd", "1e308", "--operation-id", "first"])
        .success();
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    conn.execute_batch(
        "INSERT INTO journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at)
           SELECT stream, 3, 'second', request_digest, kind,
                  json_set(event, '$.record.iteration', 2, '$.record.operation_id', 'second'),
                  receipt, committed_at
           FROM journal WHERE stream = 'ledger' AND revision = 2;
         UPDATE snapshots SET revision = 3,
                state = json_insert(json_set(state, '$.spent.usd', json('null'), '$.spent.iterations', 2),
                                    '$.recent[#]',
                                    (SELECT json_extract(event, '$.record') FROM journal
                                     WHERE stream = 'ledger' AND revision = 3))
          WHERE stream = 'ledger';",
    )
    .unwrap();
    drop(conn);
    let report = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(report["status"], "failed", "{report:#}");
    let errors = report["errors"].to_string();
    assert!(errors.contains("does not parse as a ledger"), "{report:#}");
    assert!(
        errors.contains("USD total would leave the range"),
        "{report:#}"
    );
}

// ---- 2. after the commit, nothing is an error ----------------------------

#[test]
fn an_unwritable_view_is_a_warning_and_the_commit_stands() {
    let f = Fixture::new();
    f.init(5, &[]);
    std::fs::remove_file(f.dir.join("status.json")).unwrap();
    std::fs::create_dir(f.dir.join("status.json")).unwrap();
    let rows = journal_rows(&f.dir);

    let output = f
        .loopx()
        .args(f.append_words("continue"))
        .args(["--operation-id", "turn-1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("[operation turn-1, revision 2]"), "{text}");
    assert!(
        stderr(&output).contains(
            "warning: the operation is committed, but status.json could not be refreshed"
        ),
        "{}",
        stderr(&output)
    );
    assert_eq!(journal_rows(&f.dir), rows + 1);
    let recovery = std::fs::read_to_string(f.dir.join("recovery.md")).unwrap();
    assert!(
        recovery.contains("- Last completed iteration: 1"),
        "{recovery}"
    );
    // The directory in the view's place is left where it was (a view is
    // swapped in, and the swap undone when what it took out is no file),
    // and no temporary is left behind.
    assert!(f.dir.join("status.json").is_dir());
    let temporaries: Vec<_> = std::fs::read_dir(&f.dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp-"))
        .collect();
    assert!(temporaries.is_empty(), "{temporaries:?}");

    // --json carries the warning; a retry with the named operation replays.
    let replay = f.json(&[
        "append-iteration",
        "--dir",
        f.d(),
        "--mode",
        "bounded-research",
        "--objective",
        "Check evidence gaps",
        "--decision",
        "continue",
        "--operation-id",
        "turn-1",
    ]);
    assert_eq!(replay["replayed"], true);
    assert_eq!(journal_rows(&f.dir), rows + 1, "the retry duplicated");
    let next = f.json(&[
        "append-iteration",
        "--dir",
        f.d(),
        "--mode",
        "bounded-research",
        "--objective",
        "Check evidence gaps",
        "--decision",
        "continue",
    ]);
    assert_eq!(next["status"], "ok");
    assert!(next["operation_id"].as_str().is_some());
    let warnings = next["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{next:#}");
    assert!(warnings[0].as_str().unwrap().contains("status.json"));
    assert_eq!(iteration_numbers(&f.dir), [1, 2]);
}

/// A tmpfs mounted for one test, unmounted however the test ends.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(at).unwrap();
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if output.status.success() {
            Ok(Tmpfs(at.to_owned()))
        } else {
            Err(stderr(&output))
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fill the file system holding `dir` to the last byte; returns the
/// filler, which the test shrinks to give space back bit by bit.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while file.write_all(&block).is_ok() {}
    while file.write_all(&[0]).is_ok() {}
    filler
}

fn shrink(filler: &Path, by: u64) {
    let len = std::fs::metadata(filler).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(filler)
        .unwrap();
    file.set_len(len.saturating_sub(by)).unwrap();
}

/// The journal count and every row of the database, read from a copy of
/// its files on another file system: on a full disk a reader may not be
/// able to create SQLite's companions. No writer runs while the test reads.
fn database_rows(dir: &Path) -> (i64, Vec<String>) {
    let copy = tempfile::tempdir().unwrap();
    for name in ["loopx.sqlite", "loopx.sqlite-wal"] {
        if dir.join(name).exists() {
            std::fs::copy(dir.join(name), copy.path().join(name)).unwrap();
        }
    }
    let conn = rusqlite::Connection::open(copy.path().join("loopx.sqlite")).unwrap();
    let mut dump = Vec::new();
    for table in ["journal", "snapshots"] {
        let mut statement = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
            .unwrap();
        let columns = statement.column_count();
        let mut rows = statement.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let values: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect();
            dump.push(values.join("|"));
        }
    }
    let count = conn
        .query_row("SELECT COUNT(*) FROM journal", [], |row| row.get(0))
        .unwrap();
    (count, dump)
}

/// The disk fills up, then space comes back 2 KiB at a time, so that every
/// point is crossed: no room for the commit, room for the commit but not
/// for the views, room for both. Whatever happens, a command exits 0 if
/// and only if the journal gained exactly one row, and one that fails
/// leaves the database as it was.
#[test]
fn on_a_full_disk_a_command_exits_zero_if_and_only_if_it_committed() {
    let f = Fixture::new();
    let mount = f.temp.path().join("small");
    let _tmpfs = match Tmpfs::mount(&mount, "3m") {
        Ok(tmpfs) => tmpfs,
        Err(why) => {
            common::skipped_without(&format!("cannot mount a tmpfs here ({why})"));
            return;
        }
    };
    let dir = mount.join("run");
    let d = dir.to_str().unwrap();
    f.loopx()
        .args(["init", "--dir", d, "--goal", "g", "--success-criteria", "c"])
        .args(["--max-iterations", "100000"])
        .assert()
        .success();
    let filler = fill(&mount);
    let output_text = "x".repeat(6000);
    let (mut committed, mut refused, mut warned) = (0u64, 0, 0);
    for attempt in 0..400 {
        if warned > 0 && refused > 0 && committed > 3 {
            break;
        }
        let (rows, dump) = database_rows(&dir);
        let output = f
            .loopx()
            .args([
                "append-iteration",
                "--dir",
                d,
                "--mode",
                "bounded-research",
                "--objective",
                "fill",
                "--decision",
                "continue",
                "--output",
                &output_text,
                "--json",
            ])
            .output()
            .unwrap();
        let (rows_after, dump_after) = database_rows(&dir);
        if output.status.success() {
            assert_eq!(
                rows_after,
                rows + 1,
                "attempt {attempt} exited 0 without committing exactly one row"
            );
            committed += 1;
            let reply: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert!(reply["operation_id"].as_str().is_some());
            if !reply["warnings"].as_array().unwrap().is_empty() {
                warned += 1;
            }
        } else {
            assert!(
                rows_after == rows && dump_after == dump,
                "attempt {attempt} failed but changed the database: {}",
                stderr(&output)
            );
            refused += 1;
            shrink(&filler, 2048);
        }
    }
    println!("committed {committed}, refused {refused}, committed with a view warning {warned}");
    assert!(refused > 0, "the disk never filled up");
    assert!(
        warned > 0,
        "no attempt committed with a view that could not be written"
    );
    std::fs::remove_file(&filler).unwrap();
    f.loopx()
        .args(["append-iteration", "--dir", d, "--mode", "bounded-research"])
        .args(["--objective", "room again", "--decision", "continue"])
        .assert()
        .success()
        .stderr("");
    assert_eq!(
        iteration_numbers(&dir),
        (1..=committed + 1).collect::<Vec<u64>>()
    );
    f.loopx().args(["validate", "--dir", d]).assert().success();
}

// ---- 3. an orphaned -wal or -journal ------------------------------------

/// `init` in the loop directory is refused, naming `log` and both ways
/// out, and changes nothing: not the log, not any other byte.
fn init_is_refused_for_the_orphaned_log(f: &Fixture, log: &std::path::Path) {
    let log_bytes = std::fs::read(log).unwrap();
    let before = f.fingerprint();
    let output = f.loopx().args(f.init_words()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    let name = log.file_name().unwrap().to_str().unwrap();
    assert!(
        message.contains(&format!("{name} is present but"))
            && message.contains("restore")
            && message.contains("move"),
        "{message}"
    );
    assert_eq!(std::fs::read(log).unwrap(), log_bytes, "{name} was touched");
    assert_eq!(f.fingerprint(), before, "init changed the directory");
}

#[test]
fn init_refuses_an_orphaned_wal_and_leaves_it_byte_for_byte() {
    let f = Fixture::new();
    f.init(5, &[]);
    // A reader holding the database open keeps the append's commit in the
    // -wal (its writer cannot checkpoint on close past a reader).
    let reader = rusqlite::Connection::open_with_flags(
        f.dir.join("loopx.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let _: i64 = reader
        .query_row("SELECT COUNT(*) FROM journal", [], |row| row.get(0))
        .unwrap();
    f.append("continue", &["--operation-id", "only-in-the-wal"])
        .success();
    drop(reader);
    let wal = f.dir.join("loopx.sqlite-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the commit should still be in the -wal"
    );
    let backup = f.temp.path().join("backup.sqlite");
    std::fs::rename(f.dir.join("loopx.sqlite"), &backup).unwrap();
    init_is_refused_for_the_orphaned_log(&f, &wal);

    // The advice works: put the database back and the commit is there.
    std::fs::rename(&backup, f.dir.join("loopx.sqlite")).unwrap();
    assert_eq!(iteration_numbers(&f.dir), [1]);
    f.assert_valid();
}

/// A rollback journal left without its database (a loop opened by another
/// SQLite tool, a botched restore) may hold the only copy of pages: init
/// refuses it by the same rule as a `-wal`, and touches nothing.
#[test]
fn init_refuses_an_orphaned_rollback_journal_and_leaves_it_byte_for_byte() {
    let f = Fixture::new();
    std::fs::create_dir_all(&f.dir).unwrap();
    let journal = f.dir.join("loopx.sqlite-journal");
    let journal_bytes = b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7 pages of a loop";
    std::fs::write(&journal, journal_bytes).unwrap();
    init_is_refused_for_the_orphaned_log(&f, &journal);

    // An empty journal holds nothing and is no reason to refuse.
    std::fs::write(&journal, b"").unwrap();
    f.init(5, &[]);
    f.assert_valid();
}

// ---- 5. validate audits every stream, consistently ------------------------

#[test]
fn validate_names_a_goal_stream_whose_snapshot_was_replaced() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "write the proof"])
        .assert()
        .success();
    f.assert_valid();
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    assert_eq!(
        conn.execute(
            "UPDATE snapshots SET state = '{}' WHERE stream = 'goal:main'",
            []
        )
        .unwrap(),
        1
    );
    drop(conn);
    let output = f
        .loopx()
        .args(["validate", "--dir", f.d()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("stream goal:main: snapshot does not parse as a goal"),
        "{}",
        stderr(&output)
    );
}

/// `validate` reads a long journal on one thread and folds it on another,
/// in batches: every row of a journal longer than many batches is still
/// folded once and in order, and a bad row deep in it is named by its own
/// revision.
#[test]
fn validate_folds_a_long_journal_in_order_and_names_a_bad_row_deep_in_it() {
    let f = Fixture::new();
    f.init(5000, &[]);
    f.append("continue", &["--operation-id", "op-1"]).success();
    // Rows 3..=2000 are copies of the real record at revision 2, each
    // renumbered; row 1500 does not parse. Only appends are possible.
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    let (event, receipt): (String, String) = conn
        .query_row(
            "SELECT event, receipt FROM journal WHERE stream = 'ledger' AND revision = 2",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert!(event.contains("\"iteration\":1,") && event.contains("\"op-1\""));
    let tx = conn.unchecked_transaction().unwrap();
    for revision in 3..=2000_i64 {
        let iteration = revision - 1;
        let operation_id = format!("op-{iteration}");
        let event = if revision == 1500 {
            "{\"type\":\"iteration_appended\",\"record\":{\"iteration\":\"not a number\"}}"
                .to_owned()
        } else {
            event
                .replace("\"iteration\":1,", &format!("\"iteration\":{iteration},"))
                .replace("\"op-1\"", &format!("{operation_id:?}"))
        };
        tx.execute(
            "INSERT INTO journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at)
             VALUES ('ledger', ?1, ?2, 'sha256:0', 'ledger.iteration_appended', ?3, ?4, '2026-01-01T00:00:00Z')",
            rusqlite::params![revision, operation_id, event, receipt],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    drop(conn);
    let report = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(report["status"], "failed");
    assert_eq!(report["checked"]["revision"], 2000, "{report:#}");
    let errors: Vec<String> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    // The bad row is named; the rows after it follow on from the one
    // before it, so each is one iteration ahead of the fold, and nothing
    // else is out of order.
    assert!(
        errors[0].starts_with("journal revision 1500 (ledger.iteration_appended) does not parse"),
        "{errors:#?}"
    );
    let ahead: Vec<&String> = errors
        .iter()
        .filter(|e| e.starts_with("ledger expected iteration"))
        .collect();
    assert_eq!(ahead.len(), 500, "{errors:#?}");
    assert_eq!(
        ahead[0],
        "ledger expected iteration 1499, found iteration 1500"
    );
    assert!(
        !errors
            .iter()
            .any(|e| e.contains("revisions must be consecutive") || e.contains("claims operation")),
        "{errors:#?}"
    );
    assert_eq!(report["checked"]["iterations"], 1998, "{report:#}");
}

#[test]
fn validate_names_a_goal_journal_entry_that_was_forged() {
    let f = Fixture::new();
    f.init(5, &[]);
    let added = f
        .loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "write the proof"])
        .args(["--operation-id", "todo-1"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", stderr(&added));
    let text = String::from_utf8_lossy(&added.stdout);
    assert!(
        text.contains("[operation todo-1, revision 2]"),
        "the receipt must name its operation: {text}"
    );
    // The journal refuses updates and deletes, but a row can be added.
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    conn.execute(
        "INSERT INTO journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at)
         VALUES ('goal:main', 3, 'forged', 'sha256:0', 'goal.todo_added', '{\"not\": \"an event\"}', '{}', '2026-01-01T00:00:00Z')",
        [],
    )
    .unwrap();
    drop(conn);
    let report = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(report["status"], "failed");
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("stream goal:main: journal revision 3 (goal.todo_added) does not parse"),
        "{report:#}"
    );
    assert!(
        errors.contains("stream goal:main: snapshot is at revision 2 but the journal ends at 3"),
        "{report:#}"
    );
}

#[test]
fn a_tampered_todo_in_a_goal_snapshot_is_reported() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "write the proof"])
        .assert()
        .success();
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    // The todo is kept in its own stream; the goal snapshot counts it.
    conn.execute(
        "UPDATE snapshots SET state = json_set(state, '$.status', 'done') WHERE stream = 'todo:main#1/t1'",
        [],
    )
    .unwrap();
    conn.execute(
        "UPDATE snapshots SET state = json_set(state, '$.streamed_todos', 2) WHERE stream = 'goal:main'",
        [],
    )
    .unwrap();
    drop(conn);
    let report = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(report["status"], "failed");
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("stream todo:main#1/t1: snapshot disagrees with the journal on status"),
        "{report:#}"
    );
    assert!(
        errors.contains("stream goal:main: snapshot disagrees with the journal on streamed_todos"),
        "{report:#}"
    );
    let streams = report["checked"]["streams"].to_string();
    assert!(
        streams.contains("goal:main") && streams.contains("ledger"),
        "{streams}"
    );
}

#[test]
fn validate_never_reports_a_false_inconsistency_while_another_process_writes() {
    let f = Fixture::new();
    f.init(100_000, &[]);
    let d = f.d().to_owned();
    let registry = f.registry.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let words: Vec<String> = if n % 2 == 0 {
                    [
                        "append-iteration",
                        "--dir",
                        &d,
                        "--mode",
                        "bounded-research",
                        "--objective",
                        "race",
                        "--decision",
                        "continue",
                    ]
                    .map(String::from)
                    .to_vec()
                } else {
                    ["todo", "add", "--dir", &d, "--title", &format!("t{n}")]
                        .map(String::from)
                        .to_vec()
                };
                let status = common::loopx(&registry)
                    .args(&words)
                    .output()
                    .unwrap()
                    .status;
                assert!(status.success());
                n += 1;
            }
            n
        })
    };
    let started = std::time::Instant::now();
    let mut audits = 0;
    while started.elapsed() < std::time::Duration::from_secs(4) {
        let output = f
            .loopx()
            .args(["validate", "--dir", f.d()])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "validate reported a false inconsistency while a writer ran: {}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        audits += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    println!("{audits} audits during {writes} writes");
    assert!(writes > 5 && audits > 5);
}

// ---- 14. limits that would mean something else ----------------------------

#[test]
fn limits_that_would_silently_mean_something_else_are_refused() {
    let f = Fixture::new();
    for (flags, expected) in [
        (vec!["--max-wall", "0.0001s"], "whole seconds"),
        (vec!["--max-wall", "1.5s"], "whole seconds"),
        (
            vec!["--max-iterations", "0"],
            "max_iterations must be at least 1",
        ),
    ] {
        f.loopx()
            .args(f.init_words())
            .args(&flags)
            .assert()
            .failure()
            .stderr(contains(expected));
        assert!(!f.dir.exists(), "{flags:?} created the loop directory");
    }
    f.init(3, &["--max-usd=-0"]);
    f.append("continue", &["--usd=-0"]).success();
    let status = f.json(&["status", "--dir", f.d()]);
    assert_eq!(status["budget"]["max_usd"].to_string(), "0.0");
    assert_eq!(status["spent"]["usd"].to_string(), "0.0");
    let conn = rusqlite::Connection::open(f.dir.join("loopx.sqlite")).unwrap();
    let stored: String = conn
        .query_row("SELECT group_concat(state, '') FROM snapshots", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert!(!stored.contains("-0.0"), "{stored}");
}

// ---- 15. reads create nothing, and work read-only --------------------------

/// Names and a hash of the bytes of everything in `dir`, except the bytes
/// of SQLite's `-shm`: it is the shared-memory lock table, where every
/// reader marks what it reads; its name must stay, its bytes are not data.
fn listing(dir: &Path) -> BTreeMap<String, Option<u64>> {
    use std::hash::{Hash, Hasher};
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = (!name.ends_with("-shm") && entry.path().is_file()).then(|| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            std::fs::read(entry.path()).unwrap().hash(&mut hasher);
            hasher.finish()
        });
        out.insert(name, bytes);
    }
    out
}

#[test]
fn reads_leave_a_writable_loop_directory_unchanged() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &[]).success();
    let before = listing(&f.dir);
    for read in ["status", "done", "validate"] {
        for json in [false, true] {
            let mut command = f.loopx();
            command.args([read, "--dir", f.d()]);
            if json {
                command.arg("--json");
            }
            command.assert().success();
            assert_eq!(listing(&f.dir), before, "{read} changed the loop directory");
        }
    }
}

/// Run `loopx <args>` as the unprivileged user `nobody`.
fn as_nobody(binary: &Path, args: &str) -> Output {
    Command::new("su")
        .args(["nobody", "-s", "/bin/sh", "-c"])
        .arg(format!("{} {args}", binary.display()))
        .output()
        .unwrap()
}

#[test]
fn reads_work_in_a_read_only_directory_as_another_user() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &[]).success();
    // nobody must be able to reach the directory and run the binary.
    std::fs::set_permissions(f.temp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let binary = f.temp.path().join("loopx");
    std::fs::copy(common::loopx_path(), &binary).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let probe = as_nobody(&binary, "--version");
    if !probe.status.success() {
        common::skipped_without(&format!("cannot run as nobody ({})", stderr(&probe)));
        return;
    }
    let chown = Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&f.dir)
        .status()
        .unwrap();
    assert!(chown.success());
    for entry in std::fs::read_dir(&f.dir).unwrap().flatten() {
        if entry.path().is_file() {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o400)).unwrap();
        }
    }
    std::fs::set_permissions(&f.dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let before = listing(&f.dir);
    for read in ["status", "done", "validate"] {
        let output = as_nobody(&binary, &format!("{read} --dir {}", f.d()));
        assert!(
            output.status.success(),
            "{read} failed in a read-only directory: {}",
            stderr(&output)
        );
    }
    let status = as_nobody(&binary, &format!("status --json --dir {}", f.d()));
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["iterations"], 1);
    assert_eq!(listing(&f.dir), before);
    // And without the -wal and -shm (a loop an older loopx wrote: it
    // checkpointed on every exit, so its main file held every commit).
    std::fs::set_permissions(&f.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    rusqlite::Connection::open(f.dir.join("loopx.sqlite"))
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    for companion in ["loopx.sqlite-wal", "loopx.sqlite-shm"] {
        let path = f.dir.join(companion);
        if companion.ends_with("-wal") && path.exists() {
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "checkpointed");
        }
        let _ = std::fs::remove_file(path);
    }
    std::fs::set_permissions(&f.dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let output = as_nobody(&binary, &format!("validate --dir {}", f.d()));
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::set_permissions(&f.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

// ---- 16 and file modes --------------------------------------------------

#[test]
fn stale_view_temporaries_of_dead_writers_are_removed() {
    let f = Fixture::new();
    f.init(5, &[]);
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let live = std::process::id();
    for name in [
        format!(".status.json.tmp-{dead}"),
        format!(".recovery.md.tmp-{dead}"),
        format!(".status.json.tmp-{live}"),
    ] {
        std::fs::write(f.dir.join(name), "half a view").unwrap();
    }
    f.append("continue", &[]).success();
    assert!(!f.dir.join(format!(".status.json.tmp-{dead}")).exists());
    assert!(!f.dir.join(format!(".recovery.md.tmp-{dead}")).exists());
    assert!(
        f.dir.join(format!(".status.json.tmp-{live}")).exists(),
        "a live writer's temporary was removed"
    );
}

#[test]
fn database_files_are_the_owners_alone_and_the_loop_directory_is_private() {
    let f = Fixture::new();
    f.init(5, &[]);
    let check = |when: &str| {
        assert_eq!(mode(&f.dir) & 0o077, 0, "loop directory after {when}");
        for name in ["loopx.sqlite", "loopx.sqlite-wal", "loopx.sqlite-shm"] {
            let path = f.dir.join(name);
            if path.exists() {
                assert_eq!(mode(&path), 0o600, "{name} after {when}");
            }
        }
    };
    check("init");
    f.append("continue", &[]).success();
    check("append");
    // A loop whose database was left readable by others (an older loopx,
    // a lax umask, a careless copy) is made private by the next write.
    for name in ["loopx.sqlite", "loopx.sqlite-wal", "loopx.sqlite-shm"] {
        std::fs::set_permissions(f.dir.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    f.append("continue", &[]).success();
    check("an append to a loop with lax files");

    // An existing directory any user may write is refused, untouched.
    let open = f.temp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    f.loopx()
        .args(["init", "--dir", open.to_str().unwrap(), "--goal", "g"])
        .args(["--success-criteria", "c"])
        .assert()
        .failure()
        .stderr(contains("writable by every user"));
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
}
