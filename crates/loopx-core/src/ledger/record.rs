//! One banked iteration ([`IterationRecord`]) and what it carries: its
//! cost, how a reviewed candidate was banked, a success claim and the
//! check that settles it; and the one redaction rule for the free text an
//! agent writes into a report or another runtime wrote into a record.
//! Not here: building a record from a report (`append.rs`).

use super::report::{Direction, EvidenceChecked, IterationReport};
use super::vocabulary::{Decision, Mode};
use crate::digest::Digest;
use crate::operation::OperationId;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

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
pub(super) fn redacted_record(mut record: IterationRecord) -> IterationRecord {
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
