//! Two owners' operations committed as one: all or nothing, with replay
//! semantics per half.

use jiff::Timestamp;
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, Mode};
use loopx_core::ledger::*;
use loopx_core::operation::OperationId;
use loopx_store::sqlite::{Access, SqliteStore};
use loopx_store::{failpoint, Authority, AuthorityError, Either, Step, Store};

fn init() -> LedgerRequest {
    LedgerRequest::Init(InitLoop::new("g", "c", Budget::iterations_only(100)))
}

fn append(objective: &str) -> LedgerRequest {
    LedgerRequest::AppendIteration(IterationReport {
        mode: Some(Mode::BoundedResearch),
        objective: objective.into(),
        decision: Some(Decision::Continue),
        ..Default::default()
    })
}

type PairResult = Result<
    (
        loopx_store::Receipt<LedgerReceipt>,
        loopx_store::Receipt<LedgerReceipt>,
    ),
    AuthorityError<Either<LedgerError, LedgerError>>,
>;

/// `first` on stream `a` and `second` on stream `b`, as one.
fn pair(
    store: &SqliteStore,
    ops: (&str, &str),
    first: &LedgerRequest,
    second: &LedgerRequest,
) -> PairResult {
    let (op_a, op_b) = (
        OperationId::parse(ops.0).unwrap(),
        OperationId::parse(ops.1).unwrap(),
    );
    let now = Timestamp::now();
    let context_a = LedgerContext {
        now,
        operation_id: &op_a,
        files: &NoFiles,
    };
    let context_b = LedgerContext {
        now,
        operation_id: &op_b,
        files: &NoFiles,
    };
    Authority::new(store).execute_pair::<LedgerOwner, LedgerOwner>(
        &Step {
            stream: "a",
            operation_id: &op_a,
            request: first,
            context: &context_a,
        },
        &Step {
            stream: "b",
            operation_id: &op_b,
            request: second,
            context: &context_b,
        },
        now,
    )
}

fn single(store: &SqliteStore, stream: &str, op: &str, request: &LedgerRequest) {
    let id = OperationId::parse(op).unwrap();
    let now = Timestamp::now();
    let context = LedgerContext {
        now,
        operation_id: &id,
        files: &NoFiles,
    };
    Authority::new(store)
        .execute::<LedgerOwner>(stream, &id, request, &context, now)
        .unwrap();
}

fn revisions(store: &SqliteStore) -> (u64, u64) {
    (store.revision("a").unwrap(), store.revision("b").unwrap())
}

fn fresh() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("loopx.sqlite"), Access::Create).unwrap();
    (dir, store)
}

#[test]
fn a_pair_commits_both_halves_and_an_exact_replay_writes_nothing() {
    let (_dir, store) = fresh();
    let (a, b) = pair(&store, ("init-a", "init-b"), &init(), &init()).unwrap();
    assert!(!a.replayed && !b.replayed);
    assert_eq!(revisions(&store), (1, 1));
    let (a, b) = pair(&store, ("init-a", "init-b"), &init(), &init()).unwrap();
    assert!(
        a.replayed && b.replayed,
        "an exact replay returns both stored receipts"
    );
    assert_eq!(revisions(&store), (1, 1), "and writes nothing");
    pair(&store, ("one-a", "one-b"), &append("x"), &append("y")).unwrap();
    assert_eq!(revisions(&store), (2, 2));
}

#[test]
fn a_storage_failure_between_the_halves_writes_neither() {
    let (_dir, store) = fresh();
    pair(&store, ("init-a", "init-b"), &init(), &init()).unwrap();
    failpoint::arm_error("sqlite.commit_all.between");
    let error = pair(&store, ("one-a", "one-b"), &append("x"), &append("y")).unwrap_err();
    failpoint::disarm();
    assert!(error.to_string().contains("failpoint"), "{error}");
    assert_eq!(revisions(&store), (1, 1));
    assert!(store.receipt("a", "one-a").unwrap().is_none());
    // The same pair, retried, then lands whole.
    pair(&store, ("one-a", "one-b"), &append("x"), &append("y")).unwrap();
    assert_eq!(revisions(&store), (2, 2));
}

#[test]
fn a_refused_half_writes_neither() {
    let (_dir, store) = fresh();
    single(&store, "a", "init-a", &init());
    // Stream b was never initialised: its owner refuses the append.
    let error = pair(&store, ("one-a", "one-b"), &append("x"), &append("y")).unwrap_err();
    assert!(
        matches!(error, AuthorityError::Rejected(Either::Second(_))),
        "{error}"
    );
    assert_eq!(revisions(&store), (1, 0));
}

#[test]
fn a_pair_of_which_one_half_is_already_committed_is_reported() {
    let (_dir, store) = fresh();
    pair(&store, ("init-a", "init-b"), &init(), &init()).unwrap();
    single(&store, "a", "one-a", &append("x"));
    let error = pair(&store, ("one-a", "one-b"), &append("x"), &append("y")).unwrap_err();
    match &error {
        AuthorityError::PartiallyCommitted {
            committed, missing, ..
        } => {
            assert_eq!((committed.as_str(), missing.as_str()), ("one-a", "one-b"));
        }
        other => panic!("expected PartiallyCommitted, got {other}"),
    }
    assert!(error.to_string().contains("one-b"), "{error}");
    assert_eq!(revisions(&store), (2, 1), "nothing more was written");
    // A conflicting request under a committed id stays a conflict.
    let error = pair(&store, ("one-a", "two-b"), &append("other"), &append("y")).unwrap_err();
    assert!(matches!(error, AuthorityError::Conflict { .. }), "{error}");
}
