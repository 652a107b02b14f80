//! Ledger requests and one authority call, shared by the store tests that
//! drive the authority with the ledger owner. Owns only test fixtures.
#![allow(dead_code)]

use jiff::Timestamp;
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, Mode};
use loopx_core::ledger::*;
use loopx_core::operation::OperationId;
use loopx_store::{Authority, AuthorityError, Store};

pub fn init(max_iterations: u64) -> LedgerRequest {
    LedgerRequest::Init(InitLoop::new(
        "g",
        "c",
        Budget::iterations_only(max_iterations),
    ))
}

pub fn append(objective: &str) -> LedgerRequest {
    LedgerRequest::AppendIteration(IterationReport {
        mode: Some(Mode::BoundedResearch),
        objective: objective.into(),
        decision: Some(Decision::Continue),
        ..Default::default()
    })
}

/// `request` as operation `op` on the ledger stream, through the authority.
pub fn run(
    store: &dyn Store,
    op: &str,
    request: &LedgerRequest,
) -> Result<loopx_store::Receipt<LedgerReceipt>, AuthorityError<LedgerError>> {
    let operation_id = OperationId::parse(op).unwrap();
    let now = Timestamp::now();
    let context = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &NoFiles,
    };
    Authority::new(store).execute::<LedgerOwner>(STREAM, &operation_id, request, &context, now)
}
