//! The loop ledger: a bounded sequence of iteration records toward a goal.
//!
//! [`Ledger`] is the snapshot: configuration, budgets, what has been spent,
//! the status, and the few most recent records (so that `status` and the
//! recovery view cost the same at 10 iterations as at 100,000). The full
//! history is the journal of [`LedgerEvent`]s; [`audit`] folds it back.
//!
//! [`append_guard`] is the single statement of what may be appended. Both
//! [`LedgerOwner::decide`] and the audit call it, so a ledger that passes
//! `validate` is exactly one that could have been written by `decide`.

pub mod arbiter;
pub mod audit;
pub mod budget;
mod canonical_read;
pub mod mode;
pub mod proof;
pub mod view;
pub mod vocabulary;

use crate::digest::Digest;
use crate::operation::{Decided, OperationId, Owner};
use budget::{is_budget_number, Budget, Exhausted, Spent};
use jiff::Timestamp;
use proof::{artifact_problems, EvidenceFiles};
use serde::{Deserialize, Serialize};
use vocabulary::{
    is_success_stop_reason, Decision, GoalFocusMode, LoopStatus, Mode, SUCCESS_STOP_REASONS,
};

/// The journal stream a loop's ledger lives in.
pub const STREAM: &str = "ledger";

/// How many of the latest records the snapshot carries for views.
pub const RECENT_RECORDS: usize = 5;

pub const DEFAULT_PLATEAU_RULE: &str =
    "stop after three consecutive iterations with no new evidence or reduced uncertainty";

/// The snapshot of one loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// This loop's lifetime id; a loop re-created elsewhere gets another.
    pub run_id: String,
    /// What `init` set: goal, criteria, budgets, stop conditions. Flattened,
    /// so the snapshot reads as one object.
    #[serde(flatten)]
    pub config: InitLoop,
    pub spent: Spent,
    pub status: LoopStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The latest records, oldest first, at most [`RECENT_RECORDS`].
    pub recent: Vec<IterationRecord>,
    /// A success stop waiting for the host to run `success_check`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_claim: Option<u64>,
    /// How many of the records were imported from another runtime's
    /// ledger (`loopx import`) rather than appended here. Imports come
    /// first: once a record is appended, no more may be imported. Absent
    /// when zero, so snapshots of loops that never imported are unchanged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub imported: u64,
    /// Enforce mode: what the driver charged for dispatches whose staged
    /// candidate is not banked yet. The driver charges a turn's measured
    /// cost when the turn ends, before the review banks the candidate;
    /// banking counts only what the candidate reports beyond that charge,
    /// so a turn's cost is never counted twice. Absent when empty, so
    /// snapshots of loops not in enforce mode are unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unbanked_charges: Vec<DispatchCharge>,
}

/// The driver's charge for one dispatch, held until its candidate banks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchCharge {
    pub dispatch_id: String,
    pub tokens: u64,
    pub usd: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StopConditions {
    /// Only the user (a sentinel) or a budget may end this loop; an agent's
    /// own `stop` does not release it.
    pub require_user_stop_only: bool,
    pub user_overrides: Vec<String>,
}

/// `loopx init`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitLoop {
    pub goal: String,
    pub success_criteria: String,
    pub default_mode: Mode,
    pub plateau_rule: String,
    pub success_check: String,
    pub stop_conditions: StopConditions,
    pub goal_focus_mode: GoalFocusMode,
    /// Why the mode is what it is (`None`: a loop from before this was
    /// recorded). Absent when `None`, so older requests keep their digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_focus_mode_source: Option<mode::ModeSource>,
    pub budget: Budget,
    /// Root commitments of the loop's goal: no refinement changes them.
    #[serde(default)]
    pub commitments: crate::goal::RootCommitments,
}

impl InitLoop {
    /// A loop with these essentials and every other setting at the default
    /// a plain `loopx init` uses (Goal Focus monitor, no success check).
    pub fn new(goal: &str, success_criteria: &str, budget: Budget) -> Self {
        InitLoop {
            goal: goal.to_owned(),
            success_criteria: success_criteria.to_owned(),
            default_mode: Mode::BoundedResearch,
            plateau_rule: DEFAULT_PLATEAU_RULE.to_owned(),
            success_check: String::new(),
            stop_conditions: StopConditions::default(),
            goal_focus_mode: GoalFocusMode::Monitor,
            goal_focus_mode_source: Some(mode::ModeSource::DefaultWithoutPanel),
            budget,
            commitments: crate::goal::RootCommitments::default(),
        }
    }
}

impl Budget {
    /// At most `max_iterations`, and no other limit.
    pub fn iterations_only(max_iterations: u64) -> Self {
        Budget {
            max_iterations,
            max_wall_time_seconds: 0,
            max_tokens: 0,
            max_usd: 0.0,
        }
    }
}

/// `loopx append-iteration`: what the agent says about the turn it did.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IterationReport {
    pub mode: Option<Mode>,
    pub objective: String,
    pub decision: Option<Decision>,
    pub stop_reason: String,
    pub evidence_checked: EvidenceChecked,
    pub input_refs: Vec<String>,
    pub actions_taken: Vec<String>,
    pub remaining_gaps: Vec<String>,
    pub output: String,
    pub tokens: u64,
    pub usd: f64,
    pub wall_time_seconds: u64,
    pub completed_summary: String,
    pub current_summary: String,
    pub next_action: String,
    pub executor_provider: String,
    /// The driver dispatch this turn ran under (`LOOPX_DISPATCH_ID`), if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dispatch_id: String,
    /// Goal Focus v2 and compute provenance, as the reference's flags gave
    /// them. Absent when empty, so older requests keep their digests.
    #[serde(default, skip_serializing_if = "Direction::is_empty")]
    pub direction: Box<Direction>,
}

/// What the reference's `append-iteration` records for Goal Focus (v2:
/// `--global-delta`, `--campaign-delta`, `--obligation-id`; v1's soft
/// goal-priority fields) and notify (`--compute-run`, `--compute-none`).
/// Stored faithfully; no rule reads it yet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Direction {
    /// `none`, `reduced` or `satisfied`; empty when not given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub global_delta: String,
    /// `none`, `incremental`, `substantial` or `closed`; empty when not given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub campaign_delta: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligation_ids: Vec<String>,
    /// `None`: compute not reported. `Some([])`: explicitly none
    /// (`--compute-none`). Otherwise each `--compute-run` object as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_runs: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    /// Goal Focus v1 soft fields, each as given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal_contribution: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal_contribution_detail: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub campaign_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_without_goal_delta: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub local_without_goal_delta_tag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub residual_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope_lock: String,
}

impl Direction {
    pub fn is_empty(&self) -> bool {
        self == &Direction::default()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EvidenceChecked {
    pub source_ids: Vec<String>,
    pub claim_ids: Vec<String>,
    pub evidence_ids: Vec<String>,
    pub guard_refs: Vec<String>,
}

/// One banked iteration, as the journal and views hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRecord {
    pub iteration: u64,
    pub timestamp: Timestamp,
    pub operation_id: OperationId,
    pub mode: Mode,
    pub objective: String,
    pub decision: Decision,
    pub stop_reason: String,
    pub evidence_checked: EvidenceChecked,
    pub input_refs: Vec<String>,
    pub actions_taken: Vec<String>,
    pub remaining_gaps: Vec<String>,
    pub output: String,
    pub budget_delta: BudgetDelta,
    pub completed_summary: String,
    pub current_summary: String,
    pub proposed_next_action: String,
    pub executor_provider: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dispatch_id: String,
    /// Set on a success stop of a loop with a `success_check`: the stop is
    /// a claim until the host's check settles it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimState>,
    #[serde(default, skip_serializing_if = "Direction::is_empty")]
    pub direction: Direction,
    /// Set on a record of an enforce-mode loop: the reviewed candidate it
    /// was banked from, and whether the review accepted or rejected it.
    /// Absent on every other record, so they keep their digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bank: Option<Bank>,
}

/// How a staged candidate was banked after its result review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bank {
    pub status: BankStatus,
    pub candidate_fingerprint: Digest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BankStatus {
    /// The review passed: the record is banked as the agent reported it.
    Accepted,
    /// The review failed: the real cost counts, but the claims, obligation
    /// transitions and deltas are cleared and the decision is `revise`
    /// (or `blocked` when no iteration is left to revise in).
    Rejected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimState {
    Pending,
    Verified,
    Refused,
}

/// What the host's run of `success_check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    pub command: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The check's output, relative to the loop directory.
    pub log: String,
    pub duration_ms: u64,
}

impl CheckRun {
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

impl IterationRecord {
    /// The report this record was banked from, as far as the guard reads it.
    pub fn as_report(&self) -> IterationReport {
        IterationReport {
            mode: Some(self.mode),
            objective: self.objective.clone(),
            decision: Some(self.decision),
            stop_reason: self.stop_reason.clone(),
            evidence_checked: self.evidence_checked.clone(),
            input_refs: self.input_refs.clone(),
            actions_taken: self.actions_taken.clone(),
            remaining_gaps: self.remaining_gaps.clone(),
            output: self.output.clone(),
            tokens: self.budget_delta.tokens,
            usd: self.budget_delta.usd,
            wall_time_seconds: self.budget_delta.wall_time_seconds,
            completed_summary: self.completed_summary.clone(),
            current_summary: self.current_summary.clone(),
            next_action: self.proposed_next_action.clone(),
            executor_provider: self.executor_provider.clone(),
            dispatch_id: self.dispatch_id.clone(),
            direction: Box::new(self.direction.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetDelta {
    pub iterations: u64,
    pub tokens: u64,
    pub usd: f64,
    pub wall_time_seconds: u64,
}

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
    ImportIteration(Box<IterationRecord>),
    /// Enforce mode: bank a staged candidate whose result review decided
    /// `bank`. The only way a record enters an enforce-mode ledger.
    BankCandidate {
        report: IterationReport,
        bank: Bank,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LedgerEvent {
    Initialized {
        run_id: String,
        at: Timestamp,
        config: Box<InitLoop>,
    },
    IterationAppended {
        record: Box<IterationRecord>,
    },
    Charged {
        dispatch_id: String,
        tokens: u64,
        usd: f64,
        at: Timestamp,
    },
    ClaimSettled {
        iteration: u64,
        check: CheckRun,
        at: Timestamp,
    },
    /// A record imported from another runtime's ledger: folded exactly as
    /// an appended one, and counted in [`Ledger::imported`].
    IterationImported {
        record: Box<IterationRecord>,
    },
}

impl LedgerEvent {
    /// Read one event as the journal holds it. Iteration records, nearly
    /// every entry of a long journal, are read straight into their
    /// variant: first by the fast read of the canonical text loopx writes
    /// ([`canonical_read`]), then by serde into the variant (`LedgerEvent`
    /// is tagged by a field, and serde reads such an enum by first
    /// buffering the whole object into an intermediate tree). Anything
    /// neither direct read accepts as exactly that variant goes the general
    /// way, so what is accepted, and every error, is the same.
    pub fn from_journal(text: &str) -> Result<LedgerEvent, serde_json::Error> {
        if let Some(record) = canonical_read::appended_record(text) {
            return Ok(LedgerEvent::IterationAppended {
                record: Box::new(record),
            });
        }
        #[derive(Deserialize)]
        struct Appended<'a> {
            #[serde(rename = "type", borrow)]
            tag: std::borrow::Cow<'a, str>,
            record: Box<IterationRecord>,
        }
        // The variant's tag as the serde attributes above spell it; the
        // test `the_direct_read_of_a_record_agrees_with_the_general_one`
        // holds the two together.
        if let Ok(Appended { tag, record }) = serde_json::from_str::<Appended<'_>>(text) {
            if tag == "iteration_appended" {
                return Ok(LedgerEvent::IterationAppended { record });
            }
        }
        serde_json::from_str(text)
    }
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

/// Everything the ledger refuses, each saying what to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    #[error("this directory already holds loop {run_id}; loopx never overwrites a ledger: choose a new --dir")]
    AlreadyInitialized { run_id: String },
    #[error("no loop is initialized here: run `loopx init --dir <DIR> --goal ... --success-criteria ...` first")]
    NotInitialized,
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} must be a finite non-negative number (got {value})")]
    NotABudgetNumber { field: &'static str, value: f64 },
    #[error(transparent)]
    TotalOutOfRange(#[from] budget::OutOfRange),
    #[error("max_iterations must be at least 1 (got 0): a loop with no iterations could never record one; pass --max-iterations 1 or more")]
    NoIterations,
    #[error("--{field} is required (one of: {choices})")]
    Missing {
        field: &'static str,
        choices: String,
    },
    #[error("Goal-Focus enforce mode requires a live host dispatch intent: in enforce mode only the host driver banks iterations; to append by hand, use a loop created with --goal-focus-mode monitor")]
    EnforceNeedsDispatch,
    #[error("only an enforce-mode loop banks reviewed candidates; this loop is in {mode} mode, where append-iteration banks directly")]
    NotEnforced { mode: GoalFocusMode },
    #[error("cannot append iteration after loop status is {status}: the loop has ended; start a new loop in a new --dir to continue the work")]
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
    #[error("early stop before max_iterations requires a success/proof stop_reason (got {got:?}; accepted: {accepted}); put detail in --output")]
    EarlyStopReason { got: String, accepted: String },
    #[error("early stop before max_iterations requires at least one proof artifact evidence_id (--evidence-id <id> resolving to proof_artifacts/<id>.json)")]
    EarlyStopWithoutEvidence,
    #[error("early stop before max_iterations requires at least one evidence_id with a valid proof artifact: {}", problems.join("; "))]
    EarlyStopWithoutProof { problems: Vec<String> },
    #[error("iteration {iteration} claimed success and awaits its success_check: run `loopx verify --dir <DIR>` (the driver does it by itself) before recording more")]
    ClaimPending { iteration: u64 },
    #[error("no success claim is pending for iteration {iteration}")]
    NoClaim { iteration: u64 },
    #[error("cannot import a record into a loop that already has {appended} appended here: imported history must come before the loop's own records; import into a new --dir")]
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

/// What `decide` may look at besides the state and the request.
pub struct LedgerContext<'a> {
    pub now: Timestamp,
    pub operation_id: &'a OperationId,
    pub files: &'a dyn EvidenceFiles,
}

impl Ledger {
    /// Seconds of wall time since `init`, as of `now`.
    pub fn elapsed_seconds(&self, now: Timestamp) -> u64 {
        now.duration_since(self.created_at).as_secs().max(0) as u64
    }

    pub fn last_record(&self) -> Option<&IterationRecord> {
        self.recent.last()
    }

    pub fn remaining_iterations(&self) -> u64 {
        self.config.budget.remaining_iterations(&self.spent)
    }
}

/// What [`append_guard`] reads of a report: borrowed, so that the audit
/// re-checks a stored record without copying it back into a report.
#[derive(Debug, Clone, Copy)]
pub struct Guarded<'a> {
    pub objective: &'a str,
    pub stop_reason: &'a str,
    pub evidence_ids: &'a [String],
    pub tokens: u64,
    pub usd: f64,
}

impl IterationReport {
    /// What [`append_guard`] reads of this report.
    pub fn guarded(&self) -> Guarded<'_> {
        Guarded {
            objective: &self.objective,
            stop_reason: &self.stop_reason,
            evidence_ids: &self.evidence_checked.evidence_ids,
            tokens: self.tokens,
            usd: self.usd,
        }
    }
}

impl IterationRecord {
    /// What [`append_guard`] reads of the report this record was banked
    /// from (as [`IterationRecord::as_report`] gives it, without a copy).
    pub fn guarded(&self) -> Guarded<'_> {
        Guarded {
            objective: &self.objective,
            stop_reason: &self.stop_reason,
            evidence_ids: &self.evidence_checked.evidence_ids,
            tokens: self.budget_delta.tokens,
            usd: self.budget_delta.usd,
        }
    }
}

/// Whether `report`, arriving at `now`, may be appended to `ledger`;
/// `reviewed`: it comes as a candidate whose result review was decided
/// (the only way into an enforce-mode ledger).
///
/// The rule of the reference runtime, generalised from the iteration cap to
/// every budget: a record that spends the last of any budget must end the
/// loop (`stop` or `blocked`); a `blocked` before that is refused; a `stop`
/// before that is an early stop and must cite a passing proof artifact.
pub fn append_guard(
    ledger: &Ledger,
    report: &Guarded<'_>,
    decision: Decision,
    now: Timestamp,
    files: &dyn EvidenceFiles,
    reviewed: bool,
) -> Result<(), LedgerError> {
    for (field, value) in [("usd", report.usd)] {
        if !is_budget_number(value) {
            return Err(LedgerError::NotABudgetNumber { field, value });
        }
    }
    if report.objective.trim().is_empty() {
        return Err(LedgerError::Empty { field: "objective" });
    }
    if ledger.config.goal_focus_mode == GoalFocusMode::Enforce && !reviewed {
        return Err(LedgerError::EnforceNeedsDispatch);
    }
    if let Some(iteration) = ledger.pending_claim {
        return Err(LedgerError::ClaimPending { iteration });
    }
    if ledger.status.is_terminal() {
        return Err(LedgerError::AfterTerminal {
            status: ledger.status,
        });
    }
    if ledger.spent.iterations >= ledger.config.budget.max_iterations {
        return Err(LedgerError::IterationsExhausted {
            max: ledger.config.budget.max_iterations,
        });
    }
    let after = ledger.spent.plus(report.tokens, report.usd)?;
    let exhausted = ledger
        .config
        .budget
        .exhausted(&after, ledger.elapsed_seconds(now));
    if decision.is_continuing() {
        return match exhausted.first() {
            None => Ok(()),
            Some(_) if exhausted.contains(&Exhausted::Iterations) => {
                Err(LedgerError::ContinueOnFinal { decision })
            }
            Some(budget) => Err(LedgerError::ContinueOnExhausted {
                budget: budget.describe(),
                decision,
            }),
        };
    }
    if !exhausted.is_empty() {
        // The loop ends because its budget does: no proof is owed.
        return Ok(());
    }
    match decision {
        Decision::Blocked => Err(LedgerError::EarlyBlocked),
        _ => early_stop_guard(report, files),
    }
}

/// Whether `record`, from another runtime's ledger, may be imported into
/// `ledger`: the single statement of it, used by [`LedgerOwner::decide`]
/// and the audit alike.
///
/// The history is kept as it was (number, timestamp, cost, outcome), so
/// what is checked is what keeps the loop coherent, not what the other
/// runtime decided: imports come before any record appended here, are
/// numbered consecutively and run forward in time, stay within the
/// iteration cap and the range of every total, never continue on the
/// final allowed iteration (nor block before it: the reference refuses
/// both), and follow no terminal record. An early `stop` is kept without
/// its proof artifact: the other runtime judged it, and its files are not
/// copied.
pub fn import_guard(ledger: &Ledger, record: &IterationRecord) -> Result<(), LedgerError> {
    check_report_text(&record.as_report())?;
    let appended = ledger.spent.iterations - ledger.imported.min(ledger.spent.iterations);
    if appended > 0 {
        return Err(LedgerError::ImportAfterAppend { appended });
    }
    if ledger.status.is_terminal() {
        return Err(LedgerError::AfterTerminal {
            status: ledger.status,
        });
    }
    let max = ledger.config.budget.max_iterations;
    if ledger.spent.iterations >= max {
        return Err(LedgerError::IterationsExhausted { max });
    }
    let expected = ledger.spent.iterations + 1;
    if record.iteration != expected {
        return Err(LedgerError::ImportOutOfOrder {
            expected,
            found: record.iteration,
        });
    }
    if record.budget_delta.iterations != 1 {
        return Err(LedgerError::ImportIterationCount {
            iteration: record.iteration,
            found: record.budget_delta.iterations,
        });
    }
    if record.claim.is_some() {
        return Err(LedgerError::ImportWithClaim {
            iteration: record.iteration,
        });
    }
    if record.timestamp < ledger.updated_at {
        return Err(LedgerError::ImportBackInTime {
            iteration: record.iteration,
            at: record.timestamp,
            previous: ledger.updated_at,
        });
    }
    if !is_budget_number(record.budget_delta.usd) {
        return Err(LedgerError::NotABudgetNumber {
            field: "usd",
            value: record.budget_delta.usd,
        });
    }
    ledger
        .spent
        .plus(record.budget_delta.tokens, record.budget_delta.usd)?;
    let last = expected == max;
    match record.decision {
        decision if decision.is_continuing() && last => {
            Err(LedgerError::ContinueOnFinal { decision })
        }
        Decision::Blocked if !last => Err(LedgerError::EarlyBlocked),
        _ => Ok(()),
    }
}

fn early_stop_guard(report: &Guarded<'_>, files: &dyn EvidenceFiles) -> Result<(), LedgerError> {
    if !is_success_stop_reason(report.stop_reason) {
        return Err(LedgerError::EarlyStopReason {
            got: report.stop_reason.to_owned(),
            accepted: SUCCESS_STOP_REASONS.join(", "),
        });
    }
    let ids = report.evidence_ids;
    if ids.is_empty() {
        return Err(LedgerError::EarlyStopWithoutEvidence);
    }
    let mut problems = Vec::new();
    for id in ids {
        let found = artifact_problems(id, files);
        if found.is_empty() {
            return Ok(());
        }
        problems.extend(found);
    }
    Err(LedgerError::EarlyStopWithoutProof { problems })
}

/// The run id of a loop created by `operation_id` at `at`: stable under
/// replay, different for every new loop.
fn run_id_for(operation_id: &OperationId, at: Timestamp) -> String {
    let digest = Digest::of_bytes(format!("{operation_id}\n{at}").as_bytes());
    format!("run-{}", &digest.as_str()["sha256:".len()..][..20])
}

fn validate_init(init: &InitLoop) -> Result<(), LedgerError> {
    check_init_text(init)?;
    if init.goal.trim().is_empty() {
        return Err(LedgerError::Empty { field: "goal" });
    }
    if init.success_criteria.trim().is_empty() {
        return Err(LedgerError::Empty {
            field: "success_criteria",
        });
    }
    if !is_budget_number(init.budget.max_usd) {
        return Err(LedgerError::NotABudgetNumber {
            field: "max_usd",
            value: init.budget.max_usd,
        });
    }
    if init.budget.max_iterations == 0 {
        return Err(LedgerError::NoIterations);
    }
    Ok(())
}

/// Every free-text field of `init` within its limit and free of control
/// characters: they are printed by `status`, pasted into every prompt and
/// kept forever.
fn check_init_text(init: &InitLoop) -> Result<(), crate::text::TextProblem> {
    use crate::text::{check, check_all, limits};
    check("--goal", &init.goal, limits::OBJECTIVE)?;
    check(
        "--success-criteria",
        &init.success_criteria,
        limits::OBJECTIVE,
    )?;
    check("--plateau-rule", &init.plateau_rule, limits::NOTE)?;
    check("--success-check", &init.success_check, limits::NOTE)?;
    check_all(
        "user_overrides",
        &init.stop_conditions.user_overrides,
        limits::LINE,
    )?;
    let commitments = &init.commitments;
    check_all(
        "acceptance_criteria",
        &commitments.acceptance_criteria,
        limits::OBJECTIVE,
    )?;
    check_all("non_goals", &commitments.non_goals, limits::OBJECTIVE)?;
    check_all("permissions", &commitments.permissions, limits::OBJECTIVE)
}

/// As [`check_init_text`], for what an agent reports about a turn. Kept
/// out of [`append_guard`] so that `validate` still reads records banked
/// before these limits existed.
fn check_report_text(report: &IterationReport) -> Result<(), crate::text::TextProblem> {
    use crate::text::{check, check_all, limits};
    check("--objective", &report.objective, limits::NOTE)?;
    check("--stop-reason", &report.stop_reason, limits::LINE)?;
    let evidence = &report.evidence_checked;
    check_all("--evidence-id", &evidence.evidence_ids, limits::LINE)?;
    check_all("--claim-id", &evidence.claim_ids, limits::LINE)?;
    check_all("--source-id", &evidence.source_ids, limits::LINE)?;
    check_all("--guard-ref", &evidence.guard_refs, limits::LINE)?;
    check_all("--input-ref", &report.input_refs, limits::LINE)?;
    check_all("--action-taken", &report.actions_taken, limits::NOTE)?;
    check_all("--remaining-gap", &report.remaining_gaps, limits::NOTE)?;
    check("--output", &report.output, limits::OUTPUT)?;
    check(
        "--completed-summary",
        &report.completed_summary,
        limits::NOTE,
    )?;
    check("--current-summary", &report.current_summary, limits::NOTE)?;
    check("--next-action", &report.next_action, limits::NOTE)?;
    check(
        "--executor-provider",
        &report.executor_provider,
        limits::LINE,
    )?;
    check("dispatch id", &report.dispatch_id, limits::LINE)
}

fn required<T: Copy>(
    value: Option<T>,
    field: &'static str,
    choices: Vec<&str>,
) -> Result<T, LedgerError> {
    value.ok_or_else(|| LedgerError::Missing {
        field,
        choices: choices.join(", "),
    })
}

/// The pure owner of a loop's ledger.
pub struct LedgerOwner;

impl Owner for LedgerOwner {
    type State = Ledger;
    type Request = LedgerRequest;
    type Event = LedgerEvent;
    type Receipt = LedgerReceipt;
    type Error = LedgerError;
    type Context<'a> = LedgerContext<'a>;

    fn decide(
        state: Option<&Ledger>,
        request: &LedgerRequest,
        context: &LedgerContext<'_>,
    ) -> Result<Decided<LedgerEvent, LedgerReceipt>, LedgerError> {
        match (state, request) {
            (Some(ledger), LedgerRequest::Init(_)) => Err(LedgerError::AlreadyInitialized {
                run_id: ledger.run_id.clone(),
            }),
            (None, LedgerRequest::Init(init)) => {
                validate_init(init)?;
                let run_id = run_id_for(context.operation_id, context.now);
                let mut config = init.clone();
                config.budget.max_usd = budget::normalized(config.budget.max_usd);
                Ok(Decided::write(
                    LedgerEvent::Initialized {
                        run_id: run_id.clone(),
                        at: context.now,
                        config: Box::new(config),
                    },
                    LedgerReceipt::Init {
                        run_id,
                        state_status: LoopStatus::Initialized,
                        max_iterations: init.budget.max_iterations,
                    },
                ))
            }
            (
                None,
                LedgerRequest::AppendIteration(_)
                | LedgerRequest::Charge { .. }
                | LedgerRequest::SettleClaim { .. }
                | LedgerRequest::ImportIteration(_)
                | LedgerRequest::BankCandidate { .. },
            ) => Err(LedgerError::NotInitialized),
            (Some(ledger), LedgerRequest::ImportIteration(record)) => {
                import_guard(ledger, record)?;
                let mut record = redacted_record(record.as_ref().clone());
                record.operation_id = context.operation_id.clone();
                let receipt = LedgerReceipt::ImportIteration {
                    iteration: record.iteration,
                    decision: record.decision,
                    state_status: record.decision.resulting_status(),
                };
                Ok(Decided::write(
                    LedgerEvent::IterationImported {
                        record: Box::new(record),
                    },
                    receipt,
                ))
            }
            (Some(ledger), LedgerRequest::BankCandidate { report, bank }) => {
                let mode = ledger.config.goal_focus_mode;
                if mode != GoalFocusMode::Enforce {
                    return Err(LedgerError::NotEnforced { mode });
                }
                let report = beyond_charged(ledger, report);
                let report = match bank.status {
                    BankStatus::Accepted => ended_by_budget(ledger, report, context),
                    BankStatus::Rejected => rejected(ledger, &report, context),
                };
                append(ledger, &report, context, Some(bank.clone()))
            }
            (
                Some(ledger),
                LedgerRequest::Charge {
                    dispatch_id,
                    tokens,
                    usd,
                },
            ) => {
                if !is_budget_number(*usd) {
                    return Err(LedgerError::NotABudgetNumber {
                        field: "usd",
                        value: *usd,
                    });
                }
                let reported = ledger
                    .recent
                    .iter()
                    .filter(|r| !dispatch_id.is_empty() && &r.dispatch_id == dispatch_id);
                // Saturating is right here: these only shrink the charge,
                // and the records were already admitted within range.
                let (told_tokens, told_usd) = reported.fold((0u64, 0.0f64), |(t, u), r| {
                    (
                        t.saturating_add(r.budget_delta.tokens),
                        u + r.budget_delta.usd,
                    )
                });
                let tokens = tokens.saturating_sub(told_tokens);
                let usd = (usd - told_usd).max(0.0);
                let receipt = LedgerReceipt::Charge {
                    dispatch_id: dispatch_id.clone(),
                    tokens,
                    usd,
                };
                if tokens == 0 && usd == 0.0 {
                    return Ok(Decided::unchanged(receipt));
                }
                ledger.spent.charged(tokens, usd)?;
                let event = LedgerEvent::Charged {
                    dispatch_id: dispatch_id.clone(),
                    tokens,
                    usd,
                    at: context.now,
                };
                Ok(Decided::write(event, receipt))
            }
            (Some(ledger), LedgerRequest::SettleClaim { iteration, check }) => {
                if ledger.pending_claim != Some(*iteration) {
                    return Err(LedgerError::NoClaim {
                        iteration: *iteration,
                    });
                }
                let verified = check.passed();
                let receipt = LedgerReceipt::SettleClaim {
                    iteration: *iteration,
                    verified,
                    state_status: status_after_claim(ledger, verified),
                };
                let event = LedgerEvent::ClaimSettled {
                    iteration: *iteration,
                    check: check.clone(),
                    at: context.now,
                };
                Ok(Decided::write(event, receipt))
            }
            (Some(ledger), LedgerRequest::AppendIteration(report)) => {
                append(ledger, report, context, None)
            }
        }
    }

    fn evolve(state: Option<Ledger>, event: &LedgerEvent) -> Ledger {
        match (state, event) {
            (_, LedgerEvent::Initialized { run_id, at, config }) => Ledger {
                run_id: run_id.clone(),
                config: (**config).clone(),
                spent: Spent::default(),
                status: LoopStatus::Initialized,
                created_at: *at,
                updated_at: *at,
                recent: Vec::new(),
                pending_claim: None,
                imported: 0,
                unbanked_charges: Vec::new(),
            },
            (Some(ledger), LedgerEvent::IterationAppended { record }) => {
                append_record(ledger, record.as_ref().clone())
            }
            (Some(ledger), LedgerEvent::IterationImported { record }) => {
                import_record(ledger, record.as_ref().clone())
            }
            (
                Some(mut ledger),
                LedgerEvent::Charged {
                    dispatch_id,
                    tokens,
                    usd,
                    at,
                },
            ) => {
                // As for records: `decide` keeps charges within range.
                if let Ok(spent) = ledger.spent.charged(*tokens, *usd) {
                    ledger.spent = spent;
                }
                // A charge that comes after its candidate banked was already
                // reduced by what the record reported; nothing is held.
                let banked = ledger
                    .recent
                    .iter()
                    .any(|r| r.bank.is_some() && &r.dispatch_id == dispatch_id);
                if ledger.config.goal_focus_mode == GoalFocusMode::Enforce && !banked {
                    hold_charge(&mut ledger.unbanked_charges, dispatch_id, *tokens, *usd);
                }
                ledger.updated_at = *at;
                ledger
            }
            (
                Some(mut ledger),
                LedgerEvent::ClaimSettled {
                    iteration,
                    check,
                    at,
                },
            ) => {
                let verified = check.passed();
                ledger.status = status_after_claim(&ledger, verified);
                ledger.pending_claim = None;
                ledger.updated_at = *at;
                if let Some(record) = ledger.recent.iter_mut().find(|r| r.iteration == *iteration) {
                    record.claim = Some(if verified {
                        ClaimState::Verified
                    } else {
                        ClaimState::Refused
                    });
                }
                ledger
            }
            (
                None,
                LedgerEvent::IterationAppended { .. }
                | LedgerEvent::Charged { .. }
                | LedgerEvent::ClaimSettled { .. }
                | LedgerEvent::IterationImported { .. },
            ) => {
                unreachable!("decide never appends to a loop that does not exist")
            }
        }
    }

    fn event_kind(event: &LedgerEvent) -> &'static str {
        match event {
            LedgerEvent::Initialized { .. } => "ledger.initialized",
            LedgerEvent::IterationAppended { .. } => "ledger.iteration_appended",
            LedgerEvent::Charged { .. } => "ledger.charged",
            LedgerEvent::ClaimSettled { .. } => "ledger.claim_settled",
            LedgerEvent::IterationImported { .. } => "ledger.iteration_imported",
        }
    }
}

/// Whether `report` may be banked into `ledger` now, and with which
/// decision: the whole admission rule of an append. `reviewed` as for
/// [`append_guard`]. Staging asks it before it stages a candidate, so a
/// candidate that could never be banked is refused up front.
pub fn admit(
    ledger: &Ledger,
    report: &IterationReport,
    now: Timestamp,
    files: &dyn EvidenceFiles,
    reviewed: bool,
) -> Result<(Mode, Decision), LedgerError> {
    check_report_text(report)?;
    let mode = required(report.mode, "mode", Mode::names())?;
    let decision = required(report.decision, "decision", Decision::names())?;
    append_guard(ledger, &report.guarded(), decision, now, files, reviewed)?;
    Ok((mode, decision))
}

/// The append of `report` (a reviewed candidate's when `bank` is set).
fn append(
    ledger: &Ledger,
    report: &IterationReport,
    context: &LedgerContext<'_>,
    bank: Option<Bank>,
) -> Result<Decided<LedgerEvent, LedgerReceipt>, LedgerError> {
    let (mode, decision) = admit(ledger, report, context.now, context.files, bank.is_some())?;
    let mut record = record_from(ledger, &redacted(report), mode, decision, context);
    record.bank = bank;
    let receipt = LedgerReceipt::AppendIteration {
        iteration: record.iteration,
        decision,
        state_status: if record.claim.is_some() {
            LoopStatus::Running
        } else {
            decision.resulting_status()
        },
        remaining_iterations: ledger
            .config
            .budget
            .max_iterations
            .saturating_sub(record.iteration),
    };
    Ok(Decided::write(
        LedgerEvent::IterationAppended {
            record: Box::new(record),
        },
        receipt,
    ))
}

/// The candidate's reported cost beyond what the driver already charged
/// for its dispatch: banking adds only that, so the turn is counted once.
fn beyond_charged(ledger: &Ledger, report: &IterationReport) -> IterationReport {
    let mut report = report.clone();
    let dispatch_id = report.dispatch_id.trim();
    if let Some(charged) = ledger
        .unbanked_charges
        .iter()
        .find(|charge| !dispatch_id.is_empty() && charge.dispatch_id == dispatch_id)
    {
        report.tokens = report.tokens.saturating_sub(charged.tokens);
        report.usd = (report.usd - charged.usd).max(0.0);
    }
    report
}

/// Add a charge to the dispatch's held total; the oldest dispatch is
/// forgotten past [`RECENT_RECORDS`] (a dispatch that never banks).
fn hold_charge(held: &mut Vec<DispatchCharge>, dispatch_id: &str, tokens: u64, usd: f64) {
    if dispatch_id.is_empty() {
        return;
    }
    match held
        .iter_mut()
        .find(|charge| charge.dispatch_id == dispatch_id)
    {
        Some(charge) => {
            charge.tokens = charge.tokens.saturating_add(tokens);
            charge.usd += usd;
        }
        None => {
            let charge = DispatchCharge {
                dispatch_id: dispatch_id.to_owned(),
                tokens,
                usd,
            };
            crate::window::push_newest(held, charge, RECENT_RECORDS);
        }
    }
}

/// An accepted candidate whose `continue` the budget can no longer honour
/// (wall time ran out while it awaited review) is banked as the `stop` the
/// budget forces, with the budget's reason code. Without this the accepted
/// result could never bank and the loop would wait on it forever.
fn ended_by_budget(
    ledger: &Ledger,
    report: IterationReport,
    context: &LedgerContext<'_>,
) -> IterationReport {
    let Some(decision) = report.decision.filter(|d| d.is_continuing()) else {
        return report;
    };
    let Ok(after) = ledger.spent.plus(report.tokens, report.usd) else {
        return report;
    };
    let exhausted = ledger
        .config
        .budget
        .exhausted(&after, ledger.elapsed_seconds(context.now));
    match exhausted.first() {
        Some(budget)
            if append_guard(
                ledger,
                &report.guarded(),
                decision,
                context.now,
                context.files,
                true,
            )
            .is_err() =>
        {
            let mut report = report;
            report.decision = Some(Decision::Stop);
            report.stop_reason = budget.reason_code().to_owned();
            report
        }
        _ => report,
    }
}

/// What a rejected candidate is banked as: its real cost and provenance,
/// with its claims, obligation transitions and deltas cleared, so a
/// rejected result can never count as progress. The decision is `revise`,
/// or `blocked` when the budget leaves no iteration to revise in.
fn rejected(
    ledger: &Ledger,
    report: &IterationReport,
    context: &LedgerContext<'_>,
) -> IterationReport {
    let mut report = report.clone();
    report.evidence_checked.claim_ids.clear();
    report.stop_reason.clear();
    let direction = &mut report.direction;
    direction.obligation_ids.clear();
    direction.campaign_delta.clear();
    direction.global_delta.clear();
    report.decision = Some(Decision::Revise);
    let revisable = append_guard(
        ledger,
        &report.guarded(),
        Decision::Revise,
        context.now,
        context.files,
        true,
    );
    if revisable.is_err() {
        report.decision = Some(Decision::Blocked);
    }
    report
}

/// Whether a record with `decision` and `stop_reason` is a success claim
/// that the loop's `success_check` must verify before it ends the loop.
fn claims_success(ledger: &Ledger, decision: Decision, stop_reason: &str) -> bool {
    decision == Decision::Stop
        && is_success_stop_reason(stop_reason)
        && !ledger.config.success_check.trim().is_empty()
}

/// Fold one iteration record into the ledger: the `IterationAppended` arm
/// of [`LedgerOwner::evolve`], taking the record by value so that a caller
/// that owns it (the audit, folding a whole journal) does not copy it.
fn append_record(mut ledger: Ledger, record: IterationRecord) -> Ledger {
    // `decide` refused any record that would take a total out of range; a
    // journal that holds one anyway (written by an older loopx) keeps the
    // last representable total, and the audit reports the record.
    if let Ok(spent) = ledger
        .spent
        .plus(record.budget_delta.tokens, record.budget_delta.usd)
    {
        ledger.spent = spent;
    }
    ledger.status = if record.claim.is_some() {
        LoopStatus::Running
    } else {
        record.decision.resulting_status()
    };
    ledger.pending_claim = record.claim.map(|_| record.iteration);
    ledger.updated_at = record.timestamp;
    if record.bank.is_some() {
        ledger
            .unbanked_charges
            .retain(|charge| charge.dispatch_id != record.dispatch_id);
    }
    crate::window::push_newest(&mut ledger.recent, record, RECENT_RECORDS);
    ledger
}

/// Fold one imported record: as an appended one, and counted as imported.
fn import_record(ledger: Ledger, record: IterationRecord) -> Ledger {
    let mut ledger = append_record(ledger, record);
    ledger.imported += 1;
    ledger
}

impl LedgerOwner {
    /// [`Owner::evolve`] for an event the caller owns and no longer needs:
    /// the same fold, without copying an iteration record into `recent`.
    pub fn evolve_owned(state: Option<Ledger>, event: LedgerEvent) -> Ledger {
        match (state, event) {
            (Some(ledger), LedgerEvent::IterationAppended { record }) => {
                append_record(ledger, *record)
            }
            (Some(ledger), LedgerEvent::IterationImported { record }) => {
                import_record(ledger, *record)
            }
            (state, event) => Self::evolve(state, &event),
        }
    }
}

/// The status a settled claim leaves: verified ends the loop; refused lets
/// it go on, unless no iteration is left to go on with.
fn status_after_claim(ledger: &Ledger, verified: bool) -> LoopStatus {
    if verified {
        LoopStatus::Stopped
    } else if ledger.remaining_iterations() == 0 {
        LoopStatus::Blocked
    } else {
        LoopStatus::Running
    }
}

/// The values trimmed, with the empty ones dropped (repeatable flags).
pub fn nonblank(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

fn record_from(
    ledger: &Ledger,
    report: &IterationReport,
    mode: Mode,
    decision: Decision,
    context: &LedgerContext<'_>,
) -> IterationRecord {
    let keep = nonblank;
    let evidence = &report.evidence_checked;
    IterationRecord {
        iteration: ledger.spent.iterations + 1,
        timestamp: context.now,
        operation_id: context.operation_id.clone(),
        mode,
        objective: report.objective.trim().to_owned(),
        decision,
        stop_reason: report.stop_reason.trim().to_owned(),
        evidence_checked: EvidenceChecked {
            source_ids: keep(&evidence.source_ids),
            claim_ids: keep(&evidence.claim_ids),
            evidence_ids: keep(&evidence.evidence_ids),
            guard_refs: keep(&evidence.guard_refs),
        },
        input_refs: keep(&report.input_refs),
        actions_taken: keep(&report.actions_taken),
        remaining_gaps: keep(&report.remaining_gaps),
        output: report.output.clone(),
        budget_delta: BudgetDelta {
            iterations: 1,
            tokens: report.tokens,
            usd: budget::normalized(report.usd),
            wall_time_seconds: report.wall_time_seconds,
        },
        completed_summary: if report.completed_summary.is_empty() {
            report.output.clone()
        } else {
            report.completed_summary.clone()
        },
        current_summary: report.current_summary.clone(),
        proposed_next_action: report.next_action.clone(),
        executor_provider: report.executor_provider.clone(),
        dispatch_id: report.dispatch_id.trim().to_owned(),
        claim: claims_success(ledger, decision, &report.stop_reason).then_some(ClaimState::Pending),
        direction: (*report.direction).clone(),
        bank: None,
    }
}

/// The report with every agent-written free-text field passed through
/// the one redaction rule: the journal is append-only, so a credential an
/// agent pastes into its report must not reach it (as a banked record or
/// as a staged candidate).
pub fn redacted(report: &IterationReport) -> IterationReport {
    let mut report = report.clone();
    redact_free_text(
        [
            &mut report.objective,
            &mut report.output,
            &mut report.completed_summary,
            &mut report.current_summary,
            &mut report.next_action,
        ],
        [&mut report.actions_taken, &mut report.remaining_gaps],
    );
    report
}

/// [`redacted`] for a whole record another runtime wrote (`loopx import`):
/// the same free-text fields, under their record names.
fn redacted_record(mut record: IterationRecord) -> IterationRecord {
    redact_free_text(
        [
            &mut record.objective,
            &mut record.output,
            &mut record.completed_summary,
            &mut record.current_summary,
            &mut record.proposed_next_action,
        ],
        [&mut record.actions_taken, &mut record.remaining_gaps],
    );
    record
}

/// The redaction rule applied to an iteration's free text: every text and
/// every entry of every list.
fn redact_free_text(texts: [&mut String; 5], lists: [&mut Vec<String>; 2]) {
    use crate::redact::redact_owned;
    for text in texts {
        *text = redact_owned(text);
    }
    for text in lists.into_iter().flatten() {
        *text = redact_owned(text);
    }
}

#[cfg(test)]
mod tests;
