//! Everything the ledger refuses ([`LedgerError`]), each saying what to
//! do instead, and the machine-readable help that goes with an early-stop
//! refusal. Not here: the rules that refuse (`guard.rs`, `owner.rs`).

use super::budget;
use super::proof;
use super::vocabulary::{Decision, GoalFocusMode, LoopStatus, SUCCESS_STOP_REASONS};
use jiff::Timestamp;

/// Everything the ledger refuses, each saying what to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    #[error("this directory already holds loop {run_id}; loopx never overwrites a ledger: choose a new loop directory")]
    AlreadyInitialized { run_id: String },
    #[error("no loop is initialized here: run `loopx init --dir <DIR> --goal ... --success-criteria ...` first")]
    NotInitialized,
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} must be a finite non-negative number (got {value})")]
    NotABudgetNumber { field: &'static str, value: f64 },
    #[error(transparent)]
    TotalOutOfRange(#[from] budget::OutOfRange),
    #[error("max_iterations must be at least 1 (got 0): a loop with no iterations could never record one; set max_iterations to 1 or more")]
    NoIterations,
    #[error("{field} is required (one of: {choices})")]
    Missing {
        field: &'static str,
        choices: String,
    },
    #[error("Goal-Focus enforce mode requires a live host dispatch intent: in enforce mode only the host driver banks iterations; to append by hand, use a loop created in goal_focus_mode monitor")]
    EnforceNeedsDispatch,
    #[error("only an enforce-mode loop banks reviewed candidates; this loop is in {mode} mode, where append-iteration banks directly")]
    NotEnforced { mode: GoalFocusMode },
    #[error("cannot append iteration after loop status is {status}: the loop has ended; start a new loop in a new directory to continue the work")]
    AfterTerminal { status: LoopStatus },
    #[error(
        "cannot append iteration because max_iterations is exhausted ({max} of {max} recorded)"
    )]
    IterationsExhausted { max: u64 },
    #[error("final allowed iteration must use decision stop or blocked, not a continuing decision ({decision})")]
    ContinueOnFinal { decision: Decision },
    #[error("this iteration exhausts the {budget} budget, so it must use decision stop or blocked, not {decision}")]
    ContinueOnExhausted {
        budget: &'static str,
        decision: Decision,
    },
    #[error("early blocked before max_iterations is not a valid stop under the enforcement policy: record the blocker and continue with decision revise or delegate")]
    EarlyBlocked,
    #[error("early stop before max_iterations requires a success/proof stop_reason (got {got:?}; accepted: {accepted}); put detail in the output")]
    EarlyStopReason { got: String, accepted: String },
    #[error("early stop before max_iterations requires at least one proof artifact evidence_id (an evidence_id <id> naming proof_artifacts/<id>.json)")]
    EarlyStopWithoutEvidence,
    #[error("early stop before max_iterations requires at least one evidence_id with a valid proof artifact: {}", problems.join("; "))]
    EarlyStopWithoutProof { problems: Vec<String> },
    #[error("iteration {iteration} claimed success and awaits its success_check: run `loopx verify --dir <DIR>` (the driver does it by itself) before recording more")]
    ClaimPending { iteration: u64 },
    #[error("no success claim is pending for iteration {iteration}")]
    NoClaim { iteration: u64 },
    #[error("cannot import a record into a loop that already has {appended} appended here: imported history must come before the loop's own records; import into a new directory")]
    ImportAfterAppend { appended: u64 },
    #[error("imported records must be numbered consecutively from 1: expected iteration {expected}, found iteration {found}")]
    ImportOutOfOrder { expected: u64, found: u64 },
    #[error("imported iteration {iteration} is dated {at}, before the record or loop creation it follows ({previous}): imported history must run forward in time")]
    ImportBackInTime {
        iteration: u64,
        at: Timestamp,
        previous: Timestamp,
    },
    #[error("imported iteration {iteration} must count exactly one iteration in its budget_delta (found {found})")]
    ImportIterationCount { iteration: u64, found: u64 },
    #[error("imported iteration {iteration} carries a success claim state: an imported record is history, never a claim awaiting a check")]
    ImportWithClaim { iteration: u64 },
    #[error("{0}")]
    Text(#[from] crate::text::TextProblem),
}

impl LedgerError {
    /// Machine-readable help that goes with an early-stop refusal.
    pub fn details(&self) -> Option<serde_json::Value> {
        match self {
            LedgerError::EarlyStopReason { .. }
            | LedgerError::EarlyStopWithoutEvidence
            | LedgerError::EarlyStopWithoutProof { .. } => Some(serde_json::json!({
                "accepted_stop_reasons": SUCCESS_STOP_REASONS,
                "accepted_artifact_types": proof::ARTIFACT_TYPES,
                "expected_proof_artifact": proof::expected_artifact_example("<evidence-id>"),
            })),
            _ => None,
        }
    }
}
