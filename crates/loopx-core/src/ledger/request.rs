//! What a caller sends the ledger owner ([`LedgerRequest`]), what `decide`
//! may read besides ([`LedgerContext`]) and what it hands back
//! ([`LedgerReceipt`]). Deciding a request is `owner.rs`'s job.

use super::proof::EvidenceFiles;
use super::record::{Bank, CheckRun, IterationRecord};
use super::report::IterationReport;
use super::state::InitLoop;
use super::vocabulary::{Decision, LoopStatus};
use crate::operation::OperationId;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LedgerRequest {
    Init(InitLoop),
    AppendIteration(IterationReport),
    /// The driver's measured cost of one dispatch, charged once: whatever
    /// the dispatch's own records already reported is not charged again.
    Charge {
        dispatch_id: String,
        tokens: u64,
        usd: f64,
    },
    /// The host ran `success_check` on the pending claim of `iteration`.
    SettleClaim {
        iteration: u64,
        check: CheckRun,
    },
    /// `loopx import`: one record of another runtime's ledger, with its own
    /// number, timestamp, cost and outcome. [`import_guard`] says which
    /// records may be imported.
    ///
    /// [`import_guard`]: super::import_guard
    ImportIteration(Box<IterationRecord>),
    /// Enforce mode: bank a staged candidate whose result review decided
    /// `bank`. The only way a record enters an enforce-mode ledger.
    BankCandidate {
        report: IterationReport,
        bank: Bank,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum LedgerReceipt {
    Init {
        run_id: String,
        state_status: LoopStatus,
        max_iterations: u64,
    },
    AppendIteration {
        iteration: u64,
        decision: Decision,
        state_status: LoopStatus,
        remaining_iterations: u64,
    },
    Charge {
        dispatch_id: String,
        tokens: u64,
        usd: f64,
    },
    SettleClaim {
        iteration: u64,
        verified: bool,
        state_status: LoopStatus,
    },
    ImportIteration {
        iteration: u64,
        decision: Decision,
        state_status: LoopStatus,
    },
}

/// What `decide` may look at besides the state and the request.
pub struct LedgerContext<'a> {
    pub now: Timestamp,
    pub operation_id: &'a OperationId,
    pub files: &'a dyn EvidenceFiles,
}
