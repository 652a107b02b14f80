//! One banked iteration ([`IterationRecord`]) and what it carries: its
//! cost, how a reviewed candidate was banked, a success claim and the
//! check that settles it; and the redaction of every text an agent writes
//! into a report or another runtime wrote into a record.
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
    /// The obligation transitions this banking applied to the goal
    /// contract, in the same transaction (`focus::banking`): an accepted
    /// candidate's reviewed targets; none for a rejected one. Absent when
    /// none, so rows banked before it existed keep their digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligation_transitions: Vec<crate::focus::candidate::ObligationTarget>,
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

/// The report with every text it carries passed through the one
/// redaction rule: the journal is append-only, so a credential an agent
/// pastes into its report (a note, an id, a reference, a Direction field)
/// must not reach it, as a banked record or as a staged candidate. An
/// honest value is left exactly as it is, so an evidence id still names
/// its `proof_artifacts/<id>.json`.
pub fn redacted(report: &IterationReport) -> IterationReport {
    let mut report = report.clone();
    // Spelled out field by field, without `..`: a field added to the
    // report does not compile here until it is redacted or named as
    // holding no text.
    let IterationReport {
        mode: _,
        objective,
        decision: _,
        stop_reason,
        evidence_checked,
        input_refs,
        actions_taken,
        remaining_gaps,
        output,
        tokens: _,
        usd: _,
        wall_time_seconds: _,
        completed_summary,
        current_summary,
        next_action,
        executor_provider,
        dispatch_id,
        direction,
    } = &mut report;
    Texts {
        texts: [
            objective,
            stop_reason,
            output,
            completed_summary,
            current_summary,
            next_action,
            executor_provider,
            dispatch_id,
        ],
        lists: [input_refs, actions_taken, remaining_gaps],
        evidence: evidence_checked,
        direction,
    }
    .redact();
    report
}

/// [`redacted`] for a whole record another runtime wrote (`loopx import`):
/// the same texts, under their record names.
pub(super) fn redacted_record(mut record: IterationRecord) -> IterationRecord {
    let IterationRecord {
        iteration: _,
        timestamp: _,
        // An identifier, checked as one; the owner replaces an imported
        // record's with the import's own.
        operation_id: _,
        mode: _,
        objective,
        decision: _,
        stop_reason,
        evidence_checked,
        input_refs,
        actions_taken,
        remaining_gaps,
        output,
        budget_delta: _,
        completed_summary,
        current_summary,
        proposed_next_action,
        executor_provider,
        dispatch_id,
        claim: _,
        direction,
        bank: _,
    } = &mut record;
    Texts {
        texts: [
            objective,
            stop_reason,
            output,
            completed_summary,
            current_summary,
            proposed_next_action,
            executor_provider,
            dispatch_id,
        ],
        lists: [input_refs, actions_taken, remaining_gaps],
        evidence: evidence_checked,
        direction,
    }
    .redact();
    record
}

/// Every text of an iteration, a report's or a record's: what the one
/// redaction rule is applied to.
struct Texts<'a> {
    texts: [&'a mut String; 8],
    lists: [&'a mut Vec<String>; 3],
    evidence: &'a mut EvidenceChecked,
    direction: &'a mut Direction,
}

impl Texts<'_> {
    fn redact(self) {
        let EvidenceChecked {
            source_ids,
            claim_ids,
            evidence_ids,
            guard_refs,
        } = self.evidence;
        let Direction {
            global_delta,
            campaign_delta,
            obligation_ids,
            counterevidence,
            compute_runs,
            goal_contribution,
            goal_contribution_detail,
            campaign_id,
            local_without_goal_delta: _,
            local_without_goal_delta_tag,
            residual_id,
            scope_lock,
        } = self.direction;
        let texts = self.texts.into_iter().chain([
            global_delta,
            campaign_delta,
            goal_contribution,
            goal_contribution_detail,
            campaign_id,
            local_without_goal_delta_tag,
            residual_id,
            scope_lock,
        ]);
        let lists = self.lists.into_iter().chain([
            source_ids,
            claim_ids,
            evidence_ids,
            guard_refs,
            obligation_ids,
            counterevidence,
        ]);
        for text in texts.chain(lists.flatten()) {
            redact_in_place(text);
        }
        for run in compute_runs.iter_mut().flatten() {
            crate::redact::redact_object(run);
        }
    }
}

/// `text` redacted, reallocated only when something was.
fn redact_in_place(text: &mut String) {
    if let std::borrow::Cow::Owned(clean) = crate::redact::redact(text) {
        *text = clean;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::vocabulary::{Decision, Mode};

    const KEY: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH";

    /// `name` with a key glued to it, as a hostile or careless agent
    /// would pass it in any field.
    fn planted(name: &str) -> String {
        format!("{name}_{KEY}")
    }

    fn planted_list(name: &str) -> Vec<String> {
        vec![planted(name), format!("plain {name}")]
    }

    /// A report with every field set (no `..`: a new field must be added
    /// here to compile), each text carrying a key.
    fn planted_report() -> IterationReport {
        IterationReport {
            mode: Some(Mode::BoundedResearch),
            objective: planted("objective"),
            decision: Some(Decision::Stop),
            stop_reason: planted("stop"),
            evidence_checked: EvidenceChecked {
                source_ids: planted_list("source"),
                claim_ids: planted_list("claim"),
                evidence_ids: planted_list("evidence"),
                guard_refs: planted_list("guard"),
            },
            input_refs: planted_list("input"),
            actions_taken: planted_list("action"),
            remaining_gaps: planted_list("gap"),
            output: planted("output"),
            tokens: 1,
            usd: 0.5,
            wall_time_seconds: 2,
            completed_summary: planted("completed"),
            current_summary: planted("current"),
            next_action: planted("next"),
            executor_provider: planted("provider"),
            dispatch_id: planted("dispatch"),
            direction: Box::new(Direction {
                global_delta: planted("global"),
                campaign_delta: planted("campaign"),
                obligation_ids: planted_list("obligation"),
                counterevidence: planted_list("counterevidence"),
                compute_runs: Some(vec![serde_json::json!({
                    planted("key"): {"note": planted("note")},
                    "list": [planted("item")],
                })
                .as_object()
                .unwrap()
                .clone()]),
                goal_contribution: planted("contribution"),
                goal_contribution_detail: planted("detail"),
                campaign_id: planted("campaign_id"),
                local_without_goal_delta: true,
                local_without_goal_delta_tag: planted("tag"),
                residual_id: planted("residual"),
                scope_lock: planted("scope"),
            }),
        }
    }

    /// Every string of `value`, at any depth, and the object keys too
    /// when `keys` (field names are not planted, a compute run's are).
    fn strings(value: &serde_json::Value, keys: bool, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text) => out.push(text.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, keys, out)),
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    if keys {
                        out.push(key.clone());
                    }
                    strings(value, keys, out);
                }
            }
            _ => {}
        }
    }

    fn texts_of<T: Serialize>(value: &T, keys: bool) -> Vec<String> {
        let mut out = Vec::new();
        strings(&serde_json::to_value(value).unwrap(), keys, &mut out);
        out
    }

    /// Every text value of `value` carries a key, or is one of the
    /// plain list entries beside them, or is not text an agent wrote (a
    /// mode, a decision, a record's timestamp and operation id).
    fn assert_planted_everywhere<T: Serialize>(value: &T) {
        for text in texts_of(value, false) {
            assert!(
                text.contains(KEY)
                    || text.starts_with("plain ")
                    || [
                        "stop",
                        "bounded-research",
                        "import-3",
                        "2026-12-04T10:00:00Z"
                    ]
                    .contains(&text.as_str()),
                "a text without a key: {text:?}"
            );
        }
    }

    fn assert_no_key_survives<T: Serialize>(value: &T) {
        let texts = texts_of(value, true);
        assert!(texts.iter().any(|text| text.contains("[REDACTED]")));
        for text in texts {
            assert!(!text.contains("AbCdEfGhIjKlMnOp"), "{text:?} survived");
        }
    }

    #[test]
    fn a_key_planted_in_every_text_of_a_report_survives_in_none() {
        let report = planted_report();
        assert_planted_everywhere(&report);
        let clean = redacted(&report);
        assert_no_key_survives(&clean);
        assert_eq!(
            clean.evidence_checked.evidence_ids[0],
            "evidence_[REDACTED]"
        );
        assert_eq!(clean.evidence_checked.evidence_ids[1], "plain evidence");
        assert_eq!((clean.tokens, clean.usd, clean.mode), (1, 0.5, report.mode));
    }

    #[test]
    fn a_key_planted_in_every_text_of_an_imported_record_survives_in_none() {
        let report = planted_report();
        let record = IterationRecord {
            iteration: 3,
            timestamp: "2026-12-04T10:00:00Z".parse().unwrap(),
            operation_id: OperationId::parse("import-3").unwrap(),
            mode: Mode::BoundedResearch,
            objective: report.objective.clone(),
            decision: Decision::Stop,
            stop_reason: report.stop_reason.clone(),
            evidence_checked: report.evidence_checked.clone(),
            input_refs: report.input_refs.clone(),
            actions_taken: report.actions_taken.clone(),
            remaining_gaps: report.remaining_gaps.clone(),
            output: report.output.clone(),
            budget_delta: BudgetDelta {
                iterations: 1,
                tokens: 1,
                usd: 0.5,
                wall_time_seconds: 2,
            },
            completed_summary: report.completed_summary.clone(),
            current_summary: report.current_summary.clone(),
            proposed_next_action: report.next_action.clone(),
            executor_provider: report.executor_provider.clone(),
            dispatch_id: report.dispatch_id.clone(),
            claim: None,
            direction: (*report.direction).clone(),
            bank: None,
        };
        assert_planted_everywhere(&record);
        assert_no_key_survives(&redacted_record(record));
    }

    #[test]
    fn honest_ids_and_references_are_left_exactly_as_given() {
        let mut report = IterationReport {
            objective: "Prove lemma B; tokens: 1200".into(),
            input_refs: vec!["notes/plan.md".into(), "sha256:9f86d081884c7d65".into()],
            ..IterationReport::default()
        };
        report.evidence_checked.evidence_ids = vec!["proof-1".into(), "ev-0000001-a".into()];
        report.evidence_checked.claim_ids = vec!["c1".into()];
        report.direction.obligation_ids = vec!["obl-task-scheduler".into()];
        assert_eq!(redacted(&report), report);
    }
}
