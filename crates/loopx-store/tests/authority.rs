//! The authority over a real SQLite file: replay, conflicts, races.

#[path = "support/ledger.rs"]
mod ledger;

use jiff::Timestamp;
use ledger::{append, init, run};
use loopx_core::ledger::*;
use loopx_core::operation::OperationId;
use loopx_store::sqlite::{Access, SqliteStore};
use loopx_store::{Authority, AuthorityError, Store};
use proptest::prelude::*;
use std::path::Path;

fn journal_len(store: &SqliteStore) -> usize {
    let mut n = 0;
    store
        .journal(STREAM, 0, &mut |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
    n
}

fn fresh(dir: &Path) -> SqliteStore {
    let store = SqliteStore::open(&dir.join("loopx.sqlite"), Access::Create).unwrap();
    run(&store, "init", &init(1000)).unwrap();
    store
}

#[test]
fn exact_replay_writes_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(dir.path());
    let first = run(&store, "op-a", &append("one")).unwrap();
    let again = run(&store, "op-a", &append("one")).unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!((first.revision, &first.body), (again.revision, &again.body));
    assert_eq!(journal_len(&store), 2);
}

#[test]
fn conflicting_reuse_of_an_operation_id_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(dir.path());
    run(&store, "op-a", &append("one")).unwrap();
    let error = run(&store, "op-a", &append("two")).unwrap_err();
    assert!(
        matches!(error, AuthorityError::Conflict { revision: 2, .. }),
        "{error}"
    );
    assert_eq!(journal_len(&store), 2);
}

// Concurrent writers from separate connections: `conformance.rs`
// (`concurrent_connections_never_share_an_iteration`), on every backend.

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Replaying any earlier operation, in any order, returns its original
    /// receipt and leaves the store exactly as it was.
    #[test]
    fn replay_is_idempotent(objectives in prop::collection::vec("[a-z]{1,6}", 1..8), replays in prop::collection::vec(any::<prop::sample::Index>(), 1..8)) {
        let dir = tempfile::tempdir().unwrap();
        let store = fresh(dir.path());
        let mut receipts = Vec::new();
        for (i, objective) in objectives.iter().enumerate() {
            let op = format!("op-{i}");
            receipts.push((op.clone(), append(objective), run(&store, &op, &append(objective)).unwrap()));
        }
        let snapshot = store.load(STREAM).unwrap();
        for index in replays {
            let (op, request, original) = index.get(&receipts);
            let replayed = run(&store, op, request).unwrap();
            prop_assert!(replayed.replayed);
            prop_assert_eq!(&replayed.body, &original.body);
            prop_assert_eq!(replayed.revision, original.revision);
        }
        prop_assert_eq!(store.load(STREAM).unwrap(), snapshot);
        prop_assert_eq!(journal_len(&store), objectives.len() + 1);
    }
}

mod goal_replay {
    use super::*;
    use loopx_core::goal::todo::TodoAction;
    use loopx_core::goal::{
        stream, Actor, GoalCommand, GoalContext, GoalOwner, GoalReceipt, GoalRequest,
        RootCommitments,
    };

    fn run_goal(
        store: &SqliteStore,
        op: &str,
        command: &GoalCommand,
    ) -> Result<loopx_store::Receipt<GoalReceipt>, String> {
        let operation_id = OperationId::parse(op).unwrap();
        let now = Timestamp::now();
        Authority::new(store)
            .execute::<GoalOwner>(
                &stream("main"),
                &operation_id,
                command,
                &GoalContext { now },
                now,
            )
            .map_err(|e| e.to_string())
    }

    fn command(agent: &str, request: GoalRequest) -> GoalCommand {
        GoalCommand {
            actor: Actor::Agent(agent.into()),
            expected_instance: None,
            request,
            base_revision: None,
        }
    }

    fn request(kind: u8, n: u8) -> GoalRequest {
        let id = format!("t{}", n % 3 + 1);
        match kind % 4 {
            0 => GoalRequest::AddTodo {
                id: None,
                title: format!("work {n}"),
            },
            1 => GoalRequest::Todo {
                id,
                action: TodoAction::Claim { ttl_seconds: 60 },
                note: String::new(),
            },
            2 => GoalRequest::Todo {
                id,
                action: TodoAction::Release,
                note: String::new(),
            },
            _ => GoalRequest::Todo {
                id,
                action: TodoAction::Complete,
                note: format!("done {n}"),
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Replaying any committed goal operation returns its receipt and
        /// changes nothing, whatever happened after it.
        #[test]
        fn goal_replay_is_idempotent(ops in prop::collection::vec((any::<u8>(), any::<u8>(), 0usize..2), 1..12), replays in prop::collection::vec(any::<prop::sample::Index>(), 1..6)) {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(&dir.path().join("loopx.sqlite"), Access::Create).unwrap();
            let create = GoalCommand { actor: Actor::Owner, expected_instance: None, request: GoalRequest::Create { goal_id: "main".into(), objective: "g".into(), commitments: RootCommitments::default(), todo_streams: false }, base_revision: None, };
            run_goal(&store, "create", &create).unwrap();
            let mut committed = Vec::new();
            for (i, (kind, n, agent)) in ops.into_iter().enumerate() {
                let cmd = command(["a", "b"][agent], request(kind, n));
                let op = format!("op-{i}");
                if let Ok(receipt) = run_goal(&store, &op, &cmd) {
                    if !receipt.unchanged {
                        committed.push((op, cmd, receipt));
                    }
                }
            }
            prop_assume!(!committed.is_empty());
            let snapshot = store.load(&stream("main")).unwrap();
            for index in replays {
                let (op, cmd, original) = index.get(&committed);
                let again = run_goal(&store, op, cmd).unwrap();
                prop_assert!(again.replayed);
                prop_assert_eq!(&again.body, &original.body);
                prop_assert_eq!(again.revision, original.revision);
            }
            prop_assert_eq!(store.load(&stream("main")).unwrap(), snapshot);
        }
    }
}
