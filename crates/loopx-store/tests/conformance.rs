//! One conformance suite for every `Store` backend: each property is a
//! function of a store locator, run once against a SQLite file and once
//! against a fresh PostgreSQL database (see `support/pg_server.rs`).
//!
//! Owns the backend-independent contract: CAS and the refusal of a stale
//! revision, operation replay and conflict, journal order, the atomic
//! multi-stream commit, reading a family of streams by prefix, and at the
//! Authority level budgets, replay, concurrent writers from separate
//! connections, and the goal's rules as the store must carry them: lease
//! admission and expiry on a todo's own stream (exclusive under racing
//! connections, an expired lease taken over once), the adoption fence, a
//! writeback that finishes a leased todo and notes it on the goal in one
//! commit, and the refusal of a stale base. The same races across
//! processes run on the real binary (`crates/loopx/tests/postgres.rs`).

#[path = "support/goal.rs"]
mod goal_support;
#[path = "support/ledger.rs"]
mod ledger;
#[path = "support/pg_server.rs"]
mod pg_server;

use goal_support::*;
use jiff::Timestamp;
use ledger::{append, init, run};
use loopx_core::error_class::ErrorClass;
use loopx_core::focus::Revise;
use loopx_core::focus::{ApproachRegistry, ContractOwner, GoalContract, RegistryOwner};
use loopx_core::goal::todo::TodoStatus;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::{LedgerContext, LedgerOwner};
use loopx_core::ledger::{LedgerReceipt, STREAM};
use loopx_core::operation::{Clock, OperationId};
use loopx_store::sqlite::Access;
use loopx_store::{
    failpoint, Authority, AuthorityError, ClassCount, Classified, Commit, Either, Facet,
    FacetQuery, FacetReading, Fence, Locator, Member, Step, Store, StoreError, Window,
};

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
    a_journal_window_reads_at_most_its_limit_in_its_order,
    commit_all_is_all_or_nothing,
    a_fenced_commit_lands_only_while_what_it_read_stands_still,
    of_two_commits_each_fenced_on_what_the_other_writes_exactly_one_lands,
    the_journal_is_append_only_in_the_schema,
    authority_replays_and_refuses_a_conflicting_reuse,
    authority_enforces_the_budget,
    concurrent_connections_never_share_an_iteration,
    read_consistent_sees_one_state,
    load_prefixed_reads_exactly_one_family_of_streams,
    facets_index_a_family_and_move_only_with_the_commits_that_land,
    a_lease_is_exclusive_until_it_expires_and_then_taken_over_once,
    racing_connections_admit_one_claim_per_todo_and_every_distinct_claim,
    the_adoption_fence_refuses_new_work_until_the_agent_adopts,
    a_writeback_finishes_a_leased_todo_and_notes_it_in_one_commit,
    racing_writebacks_are_never_lost,
    a_stale_base_is_refused_without_a_write,
    a_group_of_three_owners_commits_whole_or_not_at_all,
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
        facet: None,
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

fn window(store: &dyn Store, stream: &str, window: Window) -> Vec<(u64, String)> {
    let mut rows = Vec::new();
    store
        .journal_window(stream, window, &mut |row| {
            rows.push((row.revision, row.operation_id.to_owned()));
            Ok(())
        })
        .unwrap();
    rows
}

fn a_journal_window_reads_at_most_its_limit_in_its_order(locator: &str) {
    let store = open(locator, Access::Create);
    for revision in 0..40u64 {
        let op = format!("op-{revision}");
        store
            .commit(&commit("s", revision, &op, &revision.to_string()))
            .unwrap();
    }
    store.commit(&commit("t", 0, "other", "x")).unwrap();
    let revisions = |rows: Vec<(u64, String)>| rows.into_iter().map(|r| r.0).collect::<Vec<_>>();
    let newest = Window::Before {
        revision: u64::MAX,
        limit: 3,
    };
    assert_eq!(revisions(window(&*store, "s", newest)), [40, 39, 38]);
    let before = Window::Before {
        revision: 3,
        limit: 10,
    };
    assert_eq!(revisions(window(&*store, "s", before)), [2, 1]);
    let after = Window::After {
        revision: 36,
        limit: 10,
    };
    assert_eq!(
        window(&*store, "s", after),
        (37..=40)
            .map(|r| (r, format!("op-{}", r - 1)))
            .collect::<Vec<_>>()
    );
    let one = Window::After {
        revision: 0,
        limit: 1,
    };
    assert_eq!(revisions(window(&*store, "s", one)), [1]);
    let empty = Window::Before {
        revision: u64::MAX,
        limit: 5,
    };
    assert!(window(&*store, "missing", empty).is_empty());
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

fn fence(stream: &str, revision: u64) -> Fence<'_> {
    Fence { stream, revision }
}

fn a_fenced_commit_lands_only_while_what_it_read_stands_still(locator: &str) {
    let store = open(locator, Access::Create);
    store.commit(&commit("contract", 0, "c1", "1")).unwrap();
    // Judged against contract revision 1; the contract is still there.
    let revisions = store
        .commit_fenced(
            &[
                commit("plan", 0, "p1", "1"),
                commit("decisions", 0, "d1", "1"),
            ],
            &[fence("contract", 1)],
        )
        .unwrap();
    assert_eq!(revisions, [1, 1]);
    // The contract moves on; a commit judged against revision 1 is refused
    // and writes nothing on either stream.
    store.commit(&commit("contract", 1, "c2", "2")).unwrap();
    let error = store
        .commit_fenced(
            &[
                commit("plan", 1, "p2", "2"),
                commit("decisions", 1, "d2", "2"),
            ],
            &[fence("contract", 1)],
        )
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::FenceMoved { stream, read: 1, actual: 2 } if stream == "contract"),
        "{error}"
    );
    assert_eq!(
        (
            store.revision("plan").unwrap(),
            store.revision("decisions").unwrap()
        ),
        (1, 1)
    );
    assert!(store.receipt("plan", "p2").unwrap().is_none());
    assert!(store.receipt("decisions", "d2").unwrap().is_none());
    // A stream nobody wrote is at revision 0: fenced at 0 it stands still,
    // fenced at anything else it has moved.
    store
        .commit_fenced(
            &[commit("plan", 1, "p3", "3")],
            &[fence("registry", 0), fence("contract", 2)],
        )
        .unwrap();
    let error = store
        .commit_fenced(&[commit("plan", 2, "p4", "4")], &[fence("registry", 1)])
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::FenceMoved {
                read: 1,
                actual: 0,
                ..
            }
        ),
        "{error}"
    );
    // Created after it was read as absent: moved.
    store.commit(&commit("registry", 0, "r1", "1")).unwrap();
    let error = store
        .commit_fenced(&[commit("plan", 2, "p5", "5")], &[fence("registry", 0)])
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::FenceMoved {
                read: 0,
                actual: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(store.revision("plan").unwrap(), 2);
    // Fencing a stream the commit writes is a misuse, refused unwritten.
    assert!(store
        .commit_fenced(&[commit("plan", 2, "p6", "6")], &[fence("plan", 2)])
        .is_err());
    assert_eq!(store.revision("plan").unwrap(), 2);
    // The CAS still holds beside the fences.
    let error = store
        .commit_fenced(&[commit("plan", 1, "p7", "7")], &[fence("registry", 1)])
        .unwrap_err();
    assert!(matches!(error, StoreError::StaleRevision { .. }), "{error}");
}

/// Write skew, the race a fence exists for: two writers each read a stream
/// the other writes and commit their own. Serially, the second sees the
/// first's write and is refused; a fence that did not hold its stream
/// until the commit would let both land. Both a stream that exists and
/// one that does not yet (nothing to lock but its name) are raced.
fn of_two_commits_each_fenced_on_what_the_other_writes_exactly_one_lands(locator: &str) {
    drop(open(locator, Access::Create));
    for round in 0..24 {
        let (x, y) = (format!("x{round}"), format!("y{round}"));
        // Odd rounds race on streams that exist, even ones create them.
        let base = round % 2;
        if base == 1 {
            let store = open(locator, Access::ReadWrite);
            store.commit(&commit(&x, 0, "seed", "0")).unwrap();
            store.commit(&commit(&y, 0, "seed", "0")).unwrap();
        }
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = [(x.clone(), y.clone()), (y.clone(), x.clone())]
            .into_iter()
            .map(|(mine, theirs)| {
                let locator = locator.to_owned();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let store = open(&locator, Access::ReadWrite);
                    barrier.wait();
                    store
                        .commit_fenced(&[commit(&mine, base, "race", "1")], &[fence(&theirs, base)])
                })
            })
            .collect();
        let outcomes: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let landed = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(landed, 1, "round {round}: {outcomes:?}");
        for outcome in outcomes.into_iter().filter_map(Result::err) {
            assert!(
                matches!(outcome, StoreError::FenceMoved { .. }),
                "{outcome}"
            );
        }
    }
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

fn load_prefixed_reads_exactly_one_family_of_streams(locator: &str) {
    let store = open(locator, Access::Create);
    // `_` and `%` are wildcards to LIKE; the prefix must match literally.
    for (i, stream) in [
        "todo:a_b/2",
        "todo:aXb/1",
        "todo:a_b/1",
        "todo:a_b",
        "todo:a%b/1",
    ]
    .into_iter()
    .enumerate()
    {
        store
            .commit(&commit(stream, 0, &format!("op{i}"), &i.to_string()))
            .unwrap();
    }
    let family: Vec<(String, String)> = store
        .load_prefixed("todo:a_b/")
        .unwrap()
        .into_iter()
        .map(|(stream, snapshot)| (stream, snapshot.state))
        .collect();
    assert_eq!(
        family,
        [
            ("todo:a_b/1".to_owned(), "2".to_owned()),
            ("todo:a_b/2".to_owned(), "0".to_owned())
        ]
    );
    assert!(store.load_prefixed("nothing/").unwrap().is_empty());
    let mut visited = Vec::new();
    store
        .visit_prefixed("todo:a_b/", &mut |stream, revision, state| {
            assert_eq!(revision, 1);
            visited.push((stream.to_owned(), state.to_owned()));
        })
        .unwrap();
    assert_eq!(visited, family, "a visit lends what a load returns");
}

fn facets_index_a_family_and_move_only_with_the_commits_that_land(locator: &str) {
    let store = open(locator, Access::Create);
    let second = |s: i64| Timestamp::from_second(s).unwrap();
    let facet = |family: &str, position, class, due: Option<i64>, holder: Option<&str>| Facet {
        family: family.to_owned(),
        position,
        class,
        due: due.map(second),
        holder: holder.map(str::to_owned),
    };
    let read = |now: i64, holder: Option<&str>| {
        store
            .read_facets(&FacetQuery {
                family: "f/",
                now: second(now),
                free_classes: &[0, 1, 3],
                holder,
            })
            .unwrap()
            .expect("this schema keeps facets")
    };
    let count = |class, total, pending, first_due: Option<i64>| ClassCount {
        class,
        total,
        pending,
        first_due: first_due.map(second),
    };
    // Four open streams of family f/ (in one commit) and one of g/.
    let open_facets: Vec<Facet> = (0..4).map(|p| facet("f/", p, 0, None, None)).collect();
    let names: Vec<String> = (1..=4).map(|i| format!("f/{i}")).collect();
    let ops: Vec<String> = (1..=4).map(|i| format!("add{i}")).collect();
    let adds: Vec<Commit<'_>> = (0..4)
        .map(|i| Commit {
            facet: Some(&open_facets[i]),
            ..commit(&names[i], 0, &ops[i], "{}")
        })
        .collect();
    store.commit_all(&adds).unwrap();
    let other = facet("g/", 0, 4, None, None);
    store
        .commit(&Commit {
            facet: Some(&other),
            ..commit("g/1", 0, "g", "{}")
        })
        .unwrap();
    store.commit(&commit("plain", 0, "plain", "{}")).unwrap();
    assert_eq!(
        read(10, Some("a")),
        FacetReading {
            classes: vec![count(0, 4, 0, None)],
            first_free: Some("f/1".into()),
            first_held: None,
        }
    );
    // f/1 claimed by a until 20 s, f/2 done, f/3 deferred until 5 s.
    let moves = [
        ("f/1", facet("f/", 0, 1, Some(20), Some("a"))),
        ("f/2", facet("f/", 1, 4, None, None)),
        ("f/3", facet("f/", 2, 3, Some(5), None)),
    ];
    for (stream, moved) in &moves {
        store
            .commit(&Commit {
                facet: Some(moved),
                ..commit(stream, 1, "move", "{}")
            })
            .unwrap();
    }
    let at_ten = read(10, Some("a"));
    assert_eq!(
        at_ten.classes,
        [
            count(0, 1, 0, None),
            count(1, 1, 1, Some(20)),
            count(3, 1, 0, None),
            count(4, 1, 0, None)
        ]
    );
    assert_eq!(
        at_ten.first_free.as_deref(),
        Some("f/3"),
        "its deferral ended"
    );
    assert_eq!(at_ten.first_held.as_deref(), Some("f/1"));
    assert_eq!(read(10, Some("b")).first_held, None);
    let at_thirty = read(30, Some("a"));
    assert_eq!(at_thirty.classes[1], count(1, 1, 0, None));
    assert_eq!(
        at_thirty.first_free.as_deref(),
        Some("f/1"),
        "its lease lapsed"
    );
    assert_eq!(at_thirty.first_held, None);
    // A stale commit, alone or in a group, moves no facet.
    let done = facet("f/", 3, 4, None, None);
    let stale = Commit {
        facet: Some(&done),
        ..commit("f/4", 0, "stale", "{}")
    };
    assert!(store.commit(&stale).is_err());
    let fresh = Commit {
        facet: Some(&done),
        ..commit("f/4", 1, "fresh", "{}")
    };
    assert!(store.commit_all(&[fresh, stale]).is_err());
    assert_eq!(read(10, Some("a")), at_ten);
    let mut kept = Vec::new();
    store
        .visit_facets(&mut |stream, facet| {
            kept.push((stream.to_owned(), facet));
            Ok(())
        })
        .unwrap();
    let expected: Vec<(String, Facet)> = [
        ("f/1", moves[0].1.clone()),
        ("f/2", moves[1].1.clone()),
        ("f/3", moves[2].1.clone()),
        ("f/4", open_facets[3].clone()),
        ("g/1", other.clone()),
    ]
    .into_iter()
    .map(|(stream, facet)| (stream.to_owned(), facet))
    .collect();
    assert_eq!(kept, expected);
}

fn a_lease_is_exclusive_until_it_expires_and_then_taken_over_once(locator: &str) {
    let store = open(locator, Access::Create);
    let goal = goal_with_todos(&*store, 1);
    claim(&*store, &goal, "a", "t1", 60, at(0)).unwrap();
    let stream = todo_stream(&goal, "t1");
    let before = store.revision(&stream).unwrap();
    // Held: another agent is refused, its holder is named, nothing is written.
    let refused = claim(&*store, &goal, "b", "t1", 60, at(59)).unwrap_err();
    assert!(
        matches!(&refused, AuthorityError::Rejected(GoalError::LeaseHeld { holder, .. }) if holder == "a"),
        "{refused}"
    );
    assert_eq!(store.revision(&stream).unwrap(), before);
    // Only the holder renews; a renewal moves the expiry.
    let renew = TodoAction::Renew { ttl_seconds: 60 };
    assert!(todo_action(&*store, &goal, "b", "t1", renew.clone(), at(30)).is_err());
    todo_action(&*store, &goal, "a", "t1", renew, at(30)).unwrap();
    assert!(claim(&*store, &goal, "b", "t1", 60, at(89)).is_err());
    // Expired: the first claimer takes it over, the next one is refused.
    claim(&*store, &goal, "b", "t1", 60, at(90)).unwrap();
    assert!(claim(&*store, &goal, "c", "t1", 60, at(90)).is_err());
    assert_eq!(holder(&*store, &goal, "t1", at(91)).as_deref(), Some("b"));
    // The goal stream was not written by any of it: claims never contend
    // with each other through it.
    assert_eq!(store.revision(GOAL_STREAM).unwrap(), 2);
}

fn racing_connections_admit_one_claim_per_todo_and_every_distinct_claim(locator: &str) {
    const CLAIMERS: usize = 8;
    const EACH: usize = 10;
    let store = open(locator, Access::Create);
    let goal = goal_with_todos(&*store, CLAIMERS * EACH + 1);
    let contested = format!("t{}", CLAIMERS * EACH + 1);
    let threads: Vec<_> = (0..CLAIMERS)
        .map(|c| {
            let (locator, goal, contested) = (locator.to_owned(), goal.clone(), contested.clone());
            std::thread::spawn(move || {
                let store = open(&locator, Access::ReadWrite);
                let agent = format!("agent{c}");
                let won = claim(&*store, &goal, &agent, &contested, 600, at(0)).is_ok();
                // Distinct todos never conflict: every one of these lands.
                for i in 0..EACH {
                    let todo = format!("t{}", c * EACH + i + 1);
                    claim(&*store, &goal, &agent, &todo, 600, at(0)).unwrap();
                }
                won
            })
        })
        .collect();
    let winners = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|won| *won)
        .count();
    assert_eq!(winners, 1, "the contested todo was claimed {winners} times");
    for c in 0..CLAIMERS {
        for i in 0..EACH {
            let todo = format!("t{}", c * EACH + i + 1);
            assert_eq!(
                holder(&*store, &goal, &todo, at(1)),
                Some(format!("agent{c}"))
            );
        }
    }
}

fn the_adoption_fence_refuses_new_work_until_the_agent_adopts(locator: &str) {
    let store = open(locator, Access::Create);
    let goal = goal_with_todos(&*store, 2);
    for agent in ["a", "b"] {
        goal_op(
            &*store,
            &format!("register-{agent}"),
            Actor::Owner,
            GoalRequest::RegisterAgent {
                agent_id: agent.into(),
            },
        )
        .unwrap();
    }
    claim(&*store, &goal, "a", "t1", 600, at(0)).unwrap();
    // The revision names the goal revision its author read.
    let read_at = store.revision(GOAL_STREAM).unwrap();
    goal_op(
        &*store,
        "revise",
        Actor::Owner,
        GoalRequest::ReviseObjective {
            document: ObjectiveDocument {
                objective: "a wider objective".into(),
                reason: "scope grew".into(),
                source_ref: "msg-1".into(),
            },
            expected_provider_revision: read_at,
        },
    )
    .unwrap();
    let goal = load_goal(&*store);
    let stream = todo_stream(&goal, "t2");
    let refused = claim(&*store, &goal, "b", "t2", 600, at(1)).unwrap_err();
    assert!(
        matches!(
            refused,
            AuthorityError::Rejected(GoalError::NotAdopted { revision: 1, .. })
        ),
        "{refused}"
    );
    assert_eq!(
        store.revision(&stream).unwrap(),
        0,
        "a refusal writes nothing"
    );
    // Work already held is not new work: its holder may still finish it.
    todo_action(&*store, &goal, "a", "t1", TodoAction::Complete, at(2)).unwrap();
    goal_op(
        &*store,
        "adopt-b",
        Actor::Agent("b".into()),
        GoalRequest::AdoptObjective {
            revision: 1,
            digest: objective::current_digest(&goal),
            work_digest: objective::work_digest(&goal, "b"),
            review_summary: "read the new scope".into(),
        },
    )
    .unwrap();
    let goal = load_goal(&*store);
    claim(&*store, &goal, "b", "t2", 600, at(3)).unwrap();
}

fn a_writeback_finishes_a_leased_todo_and_notes_it_in_one_commit(locator: &str) {
    let store = open(locator, Access::Create);
    let goal = goal_with_todos(&*store, 2);
    claim(&*store, &goal, "a", "t1", 600, at(0)).unwrap();
    claim(&*store, &goal, "b", "t2", 600, at(0)).unwrap();
    let revisions = |store: &dyn Store| {
        [
            store.revision(GOAL_STREAM).unwrap(),
            store.revision(&todo_stream(&goal, "t1")).unwrap(),
            store.revision(&todo_stream(&goal, "t2")).unwrap(),
        ]
    };
    let before = revisions(&*store);
    // One part is refused (t2 is b's): nothing of the writeback lands.
    let refused = writeback(
        &*store,
        &goal,
        "a",
        "wb-1",
        &[("t1", TodoAction::Complete), ("t2", TodoAction::Complete)],
        at(1),
    )
    .unwrap_err();
    assert!(
        matches!(
            refused,
            AuthorityError::Rejected(Either::Second(GoalError::NotHolder { .. }))
        ),
        "{refused}"
    );
    assert_eq!(revisions(&*store), before);
    // Its own todo only: the todo and the note land together, once.
    let finish = |now| {
        writeback(
            &*store,
            &goal,
            "a",
            "wb-2",
            &[("t1", TodoAction::Complete)],
            now,
        )
        .unwrap()
    };
    let (note, todos) = finish(at(1));
    assert_eq!(note.body.effects, ["note_recorded"]);
    assert_eq!(todos[0].body.effects, ["todo_completed"]);
    let after = revisions(&*store);
    assert_eq!(after, [before[0] + 1, before[1] + 1, before[2]]);
    let (note, todos) = finish(at(5));
    assert!(note.replayed && todos[0].replayed);
    assert_eq!(revisions(&*store), after, "a replay writes nothing");
    // Done is final: no later claim reopens it.
    assert!(claim(&*store, &goal, "b", "t1", 600, at(700)).is_err());
}

fn a_stale_base_is_refused_without_a_write(locator: &str) {
    let store = open(locator, Access::Create);
    goal_with_todos(&*store, 1);
    let read_at = store.revision(GOAL_STREAM).unwrap();
    goal_op(
        &*store,
        "add-2",
        Actor::Owner,
        GoalRequest::AddTodo {
            id: None,
            title: "written meanwhile".into(),
        },
    )
    .unwrap();
    let now = store.revision(GOAL_STREAM).unwrap();
    let stale = GoalCommand {
        actor: Actor::Owner,
        expected_instance: None,
        request: GoalRequest::AddTodo {
            id: None,
            title: "based on the old read".into(),
        },
        base_revision: Some(read_at),
    };
    let refused = goal_command(&*store, "add-3", &stale).unwrap_err();
    assert!(
        matches!(
            refused,
            AuthorityError::StaleBase { expected, actual, .. } if expected == read_at && actual == now
        ),
        "{refused}"
    );
    assert_eq!(store.revision(GOAL_STREAM).unwrap(), now);
    assert!(store.receipt(GOAL_STREAM, "add-3").unwrap().is_none());
    // Re-read and retried under the same operation id: it lands once.
    let fresh = GoalCommand {
        base_revision: Some(now),
        ..stale
    };
    goal_command(&*store, "add-3", &fresh).unwrap();
    assert_eq!(store.revision(GOAL_STREAM).unwrap(), now + 1);
}

fn racing_writebacks_are_never_lost(locator: &str) {
    const WRITERS: usize = 6;
    const EACH: usize = 4;
    let store = open(locator, Access::Create);
    let goal = goal_with_todos(&*store, WRITERS * EACH);
    let goal_revision = store.revision(GOAL_STREAM).unwrap();
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (locator, goal) = (locator.to_owned(), goal.clone());
            std::thread::spawn(move || {
                let store = open(&locator, Access::ReadWrite);
                let agent = format!("agent{w}");
                for i in 0..EACH {
                    let todo = format!("t{}", w * EACH + i + 1);
                    claim(&*store, &goal, &agent, &todo, 600, at(0)).unwrap();
                    // Every writeback's note lands on the one goal stream:
                    // they race there, and each must land exactly once.
                    writeback(
                        &*store,
                        &goal,
                        &agent,
                        &format!("wb-{todo}"),
                        &[(&todo, TodoAction::Complete)],
                        at(1),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let ops: Vec<String> = journal_ops(&*store, GOAL_STREAM)
        .into_iter()
        .skip(goal_revision as usize)
        .map(|(_, op)| op)
        .collect();
    assert_eq!(ops.len(), WRITERS * EACH, "{ops:?}");
    for n in 1..=WRITERS * EACH {
        let todo = format!("t{n}");
        assert!(
            ops.contains(&format!("wb-{todo}")),
            "the note of {todo} was lost"
        );
        let state = Authority::new(&*store)
            .load::<TodoOwner>(&todo_stream(&goal, &todo))
            .unwrap()
            .state
            .unwrap();
        assert_eq!(state.status, TodoStatus::Done, "{todo}");
    }
}

/// A ledger append of `objective` (stream `ledger`), a goal contract
/// revision to `goal` on `contract_base` (stream `contract`) and an empty
/// registry revision on `registry_base` (stream `registry`): three owners
/// of three kinds, under operation `op`, as one. Their new revisions.
fn three(
    store: &dyn Store,
    op: &str,
    objective: &str,
    (contract_base, goal): (u64, &str),
    registry_base: u64,
) -> Result<[u64; 3], AuthorityError<Box<Classified>>> {
    let operation_id = OperationId::parse(op).unwrap();
    let now = Timestamp::now();
    let ledger_context = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &NoFiles,
    };
    let clock = Clock { now };
    let ledger = append(objective);
    let goal = Revise {
        base_revision: Some(contract_base),
        document: GoalContract {
            goal: goal.into(),
            criteria: Vec::new(),
            scope: Default::default(),
            obligations: Vec::new(),
            trip_wires: Vec::new(),
        },
    };
    let registry = Revise {
        base_revision: Some(registry_base),
        document: ApproachRegistry::default(),
    };
    let (a, b, c) = (
        Step::<LedgerOwner> {
            stream: STREAM,
            operation_id: &operation_id,
            request: &ledger,
            context: &ledger_context,
        },
        Step::<ContractOwner> {
            stream: "contract",
            operation_id: &operation_id,
            request: &goal,
            context: &clock,
        },
        Step::<RegistryOwner> {
            stream: "registry",
            operation_id: &operation_id,
            request: &registry,
            context: &clock,
        },
    );
    let (mut a, mut b, mut c) = (Member::new(&a), Member::new(&b), Member::new(&c));
    Authority::new(store).execute_all(&mut [&mut a, &mut b, &mut c], &[], now)?;
    Ok([
        a.into_receipt().revision,
        b.into_receipt().revision,
        c.into_receipt().revision,
    ])
}

fn a_group_of_three_owners_commits_whole_or_not_at_all(locator: &str) {
    let store = open(locator, Access::Create);
    run(&*store, "init", &init(100)).unwrap();
    let revisions =
        |store: &dyn Store| ["ledger", "contract", "registry"].map(|s| store.revision(s).unwrap());
    assert_eq!(
        three(&*store, "g1", "one", (0, "goal"), 0).unwrap(),
        [2, 1, 1]
    );
    // The exact group again: every part answers with its stored receipt.
    assert_eq!(
        three(&*store, "g1", "one", (0, "goal"), 0).unwrap(),
        [2, 1, 1]
    );
    assert_eq!(revisions(&*store), [2, 1, 1], "a replay writes nothing");
    // Compare-and-swap on every stream: a stale contract base refuses all.
    let stale = three(&*store, "g2", "two", (0, "other"), 1).unwrap_err();
    assert!(matches!(stale, AuthorityError::StaleBase { .. }), "{stale}");
    // An owner's refusal (an empty goal) refuses all, classified.
    let refused = three(&*store, "g3", "two", (1, " "), 1).unwrap_err();
    match &refused {
        AuthorityError::Rejected(refusal) => {
            assert_eq!(refusal.class(), ErrorClass::Refused, "{refused}")
        }
        other => panic!("expected the contract's refusal, got {other}"),
    }
    assert_eq!(
        revisions(&*store),
        [2, 1, 1],
        "a refused group writes nothing"
    );
    // A part committed alone before: the group is not completed silently.
    run(&*store, "g4", &append("two")).unwrap();
    let split = three(&*store, "g4", "two", (1, "next"), 1).unwrap_err();
    assert!(
        matches!(split, AuthorityError::PartiallyCommitted { .. }),
        "{split}"
    );
    assert_eq!(revisions(&*store), [3, 1, 1]);
}
