//! One conformance suite for every `Store` backend: each property is a
//! function of a store locator, run once against a SQLite file and once
//! against a fresh PostgreSQL database (see `support/pg_server.rs`).
//!
//! Owns the backend-independent contract: CAS and the refusal of a stale
//! revision, operation replay and conflict, journal order, the atomic
//! multi-stream commit, and at the Authority level budgets, replay, and
//! concurrent writers from separate connections. Lease admission and expiry
//! across processes are proved on the real binary (`crates/loopx/tests/
//! lease_hosts.rs`), where they are decided.

#[path = "support/ledger.rs"]
mod ledger;
#[path = "support/pg_server.rs"]
mod pg_server;

use ledger::{append, init, run};
use loopx_core::ledger::{LedgerReceipt, STREAM};
use loopx_store::sqlite::Access;
use loopx_store::{failpoint, AuthorityError, Commit, Locator, Store, StoreError};

type Boxed = Box<dyn Store + Send>;

/// A property run against both backends.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let locator = format!("sqlite:{}", dir.path().join("loopx.sqlite").display());
                super::$name(&locator);
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(url) = super::pg_server::database() {
                    super::$name(&url);
                }
            })*
        }
    };
}

conformance!(
    cas_refuses_a_stale_revision,
    an_operation_id_commits_once,
    the_journal_keeps_revision_order,
    commit_all_is_all_or_nothing,
    the_journal_is_append_only_in_the_schema,
    authority_replays_and_refuses_a_conflicting_reuse,
    authority_enforces_the_budget,
    concurrent_connections_never_share_an_iteration,
    read_consistent_sees_one_state,
);

fn open(locator: &str, access: Access) -> Boxed {
    Locator::parse(locator).unwrap().open(access).unwrap()
}

fn commit<'a>(stream: &'a str, expected: u64, op: &'a str, state: &'a str) -> Commit<'a> {
    Commit {
        stream,
        expected_revision: expected,
        operation_id: op,
        request_digest: "digest",
        kind: "test",
        event: "{}",
        receipt: "{}",
        state,
        committed_at: "2026-01-01T00:00:00Z",
    }
}

fn journal_ops(store: &dyn Store, stream: &str) -> Vec<(u64, String)> {
    let mut ops = Vec::new();
    store
        .journal(stream, 0, &mut |entry| {
            ops.push((entry.revision, entry.operation_id));
            Ok(())
        })
        .unwrap();
    ops
}

fn cas_refuses_a_stale_revision(locator: &str) {
    let store = open(locator, Access::Create);
    assert_eq!(store.commit(&commit("s", 0, "a", "1")).unwrap(), 1);
    let error = store.commit(&commit("s", 0, "b", "x")).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::StaleRevision {
                expected: 0,
                actual: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(store.commit(&commit("s", 1, "c", "2")).unwrap(), 2);
    let error = store.commit(&commit("s", 1, "d", "x")).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::StaleRevision {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{error}"
    );
    let snapshot = store.load("s").unwrap().unwrap();
    assert_eq!((snapshot.revision, snapshot.state.as_str()), (2, "2"));
    assert_eq!(store.revision("s").unwrap(), 2);
    assert_eq!(store.revision("none").unwrap(), 0);
    assert!(store.load("none").unwrap().is_none());
    assert_eq!(
        journal_ops(&*store, "s").len(),
        2,
        "a refusal writes nothing"
    );
}

fn an_operation_id_commits_once(locator: &str) {
    let store = open(locator, Access::Create);
    store.commit(&commit("s", 0, "op", "1")).unwrap();
    let error = store.commit(&commit("s", 1, "op", "2")).unwrap_err();
    assert!(
        matches!(error, StoreError::DuplicateOperation { .. }),
        "{error}"
    );
    assert_eq!(
        store.revision("s").unwrap(),
        1,
        "the refused commit left the snapshot"
    );
    let receipt = store.receipt("s", "op").unwrap().unwrap();
    assert_eq!(receipt.revision, 1);
    assert!(store.receipt("s", "other").unwrap().is_none());
    // Operation ids are per stream.
    store.commit(&commit("t", 0, "op", "1")).unwrap();
}

fn the_journal_keeps_revision_order(locator: &str) {
    let store = open(locator, Access::Create);
    for revision in 0..2500u64 {
        let op = format!("op-{revision}");
        store
            .commit(&commit("s", revision, &op, &revision.to_string()))
            .unwrap();
    }
    let ops = journal_ops(&*store, "s");
    assert_eq!(ops.len(), 2500);
    assert!(ops
        .iter()
        .enumerate()
        .all(|(i, (r, op))| *r == i as u64 + 1 && *op == format!("op-{i}")));
    let mut after = Vec::new();
    store
        .journal_rows("s", 2400, &mut |row| {
            after.push(row.revision);
            Ok(())
        })
        .unwrap();
    assert_eq!(after, (2401..=2500).collect::<Vec<_>>());
    store.commit(&commit("a", 0, "x", "1")).unwrap();
    assert_eq!(store.streams().unwrap(), ["a", "s"]);
}

fn commit_all_is_all_or_nothing(locator: &str) {
    let store = open(locator, Access::Create);
    let revisions = store
        .commit_all(&[commit("a", 0, "a1", "1"), commit("b", 0, "b1", "1")])
        .unwrap();
    assert_eq!(revisions, [1, 1]);
    // The second half is stale: neither lands.
    let error = store
        .commit_all(&[commit("a", 1, "a2", "2"), commit("b", 0, "b2", "2")])
        .unwrap_err();
    assert!(matches!(error, StoreError::StaleRevision { .. }), "{error}");
    assert_eq!(
        (store.revision("a").unwrap(), store.revision("b").unwrap()),
        (1, 1)
    );
    // A storage failure between the halves: neither lands.
    failpoint::arm_error("sqlite.commit_all.between");
    failpoint::arm_error("postgres.commit_all.between");
    let failed = store.commit_all(&[commit("a", 1, "a3", "3"), commit("b", 1, "b3", "3")]);
    failpoint::disarm();
    assert!(failed.is_err());
    assert_eq!(
        (store.revision("a").unwrap(), store.revision("b").unwrap()),
        (1, 1)
    );
    assert!(store.receipt("a", "a3").unwrap().is_none());
    // Two commits to one stream in one call: the second is stale.
    assert!(store
        .commit_all(&[commit("a", 1, "a4", "4"), commit("a", 1, "a5", "5")])
        .is_err());
    assert_eq!(store.revision("a").unwrap(), 1);
}

fn the_journal_is_append_only_in_the_schema(locator: &str) {
    let store = open(locator, Access::Create);
    store.commit(&commit("s", 0, "op", "1")).unwrap();
    drop(store);
    let refused = match Locator::parse(locator).unwrap() {
        Locator::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let refused = conn.execute_batch("DELETE FROM journal").is_err()
                && conn.execute_batch("UPDATE journal SET kind = 'x'").is_err();
            let rows: i64 = conn
                .query_row("SELECT count(*) FROM journal", [], |row| row.get(0))
                .unwrap();
            assert_eq!(rows, 1, "the journal row is still there");
            refused
        }
        Locator::Postgres { .. } => {
            pg_exec(locator, "DELETE FROM journal")
                && pg_exec(locator, "UPDATE journal SET kind = 'x'")
                && pg_exec(locator, "TRUNCATE journal")
        }
    };
    assert!(refused, "changing journal rows is refused by the schema");
}

/// Run `sql` on the PostgreSQL database `url`; true if the server refused it.
fn pg_exec(url: &str, sql: &str) -> bool {
    let mut client = ::postgres::Client::connect(url, ::postgres::NoTls).unwrap();
    let refused = client.batch_execute(sql).is_err();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM journal", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the journal row is still there");
    refused
}

fn authority_replays_and_refuses_a_conflicting_reuse(locator: &str) {
    let store = open(locator, Access::Create);
    run(&*store, "init", &init(100)).unwrap();
    let first = run(&*store, "op-a", &append("one")).unwrap();
    let again = run(&*store, "op-a", &append("one")).unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!((first.revision, &first.body), (again.revision, &again.body));
    let error = run(&*store, "op-a", &append("two")).unwrap_err();
    assert!(
        matches!(error, AuthorityError::Conflict { revision: 2, .. }),
        "{error}"
    );
    assert_eq!(journal_ops(&*store, STREAM).len(), 2);
}

fn authority_enforces_the_budget(locator: &str) {
    let store = open(locator, Access::Create);
    run(&*store, "init", &init(2)).unwrap();
    run(&*store, "one", &append("1")).unwrap();
    // The second iteration is the last the budget allows: asking to
    // continue after it is refused, and the refusal writes nothing.
    let refused = run(&*store, "two", &append("2")).unwrap_err();
    assert!(matches!(refused, AuthorityError::Rejected(_)), "{refused}");
    assert_eq!(store.revision(STREAM).unwrap(), 2);
    assert!(store.receipt(STREAM, "two").unwrap().is_none());
}

fn concurrent_connections_never_share_an_iteration(locator: &str) {
    run(&*open(locator, Access::Create), "init", &init(1000)).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let locator = locator.to_owned();
            std::thread::spawn(move || {
                let store = open(&locator, Access::ReadWrite);
                (0..20)
                    .map(|i| {
                        match run(&*store, &format!("t{t}-{i}"), &append("x"))
                            .unwrap()
                            .body
                        {
                            LedgerReceipt::AppendIteration { iteration, .. } => iteration,
                            other => panic!("{other:?}"),
                        }
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut numbers: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=80).collect::<Vec<_>>());
}

fn read_consistent_sees_one_state(locator: &str) {
    let store = open(locator, Access::Create);
    store.commit(&commit("s", 0, "a", "1")).unwrap();
    let writer = open(locator, Access::ReadWrite);
    let mut seen = Vec::new();
    store
        .read_consistent(&mut || {
            seen.push(store.revision("s")?);
            writer.commit(&commit("s", 1, "b", "2")).unwrap();
            seen.push(store.revision("s")?);
            seen.push(journal_ops(&*store, "s").len() as u64);
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, [1, 1, 1], "a commit made meanwhile stays invisible");
    assert_eq!(store.revision("s").unwrap(), 2);
}
