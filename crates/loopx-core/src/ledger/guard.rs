//! What may enter a ledger: an append ([`append_guard`], [`admit`]), an
//! imported record ([`import_guard`]) and `init` ([`validate_init`]),
//! with the text limits of each. The owner and the audit both call these,
//! so a ledger that passes `validate` is exactly one that could have been
//! written by `decide`. Not here: what an admitted request writes
//! (`owner.rs`, `append.rs`).

use super::budget::is_budget_number;
use super::error::LedgerError;
use super::proof::{artifact_problems, EvidenceFiles};
use super::record::IterationRecord;
use super::report::{EvidenceChecked, IterationReport};
use super::state::{InitLoop, Ledger};
use super::vocabulary::{
    is_success_stop_reason, Decision, GoalFocusMode, Mode, SUCCESS_STOP_REASONS,
};
use jiff::Timestamp;

/// What [`append_guard`] and the text limits read of a report: borrowed,
/// so that the audit re-checks a stored record without copying it back
/// into a report.
#[derive(Debug, Clone, Copy)]
pub struct Guarded<'a> {
    pub objective: &'a str,
    pub stop_reason: &'a str,
    pub evidence: &'a EvidenceChecked,
    pub input_refs: &'a [String],
    pub actions_taken: &'a [String],
    pub remaining_gaps: &'a [String],
    pub output: &'a str,
    pub completed_summary: &'a str,
    pub current_summary: &'a str,
    pub next_action: &'a str,
    pub executor_provider: &'a str,
    pub dispatch_id: &'a str,
    pub tokens: u64,
    pub usd: f64,
}

/// A [`Guarded`] borrowed from `$from`, a report or a record: the texts
/// have the same names in both, and the rest are given.
macro_rules! guarded {
    ($from:expr, next_action: $next:expr, tokens: $tokens:expr, usd: $usd:expr) => {
        Guarded {
            objective: &$from.objective,
            stop_reason: &$from.stop_reason,
            evidence: &$from.evidence_checked,
            input_refs: &$from.input_refs,
            actions_taken: &$from.actions_taken,
            remaining_gaps: &$from.remaining_gaps,
            output: &$from.output,
            completed_summary: &$from.completed_summary,
            current_summary: &$from.current_summary,
            next_action: $next,
            executor_provider: &$from.executor_provider,
            dispatch_id: &$from.dispatch_id,
            tokens: $tokens,
            usd: $usd,
        }
    };
}

impl IterationReport {
    /// What [`append_guard`] reads of this report.
    pub fn guarded(&self) -> Guarded<'_> {
        guarded!(self, next_action: &self.next_action, tokens: self.tokens, usd: self.usd)
    }
}

impl IterationRecord {
    /// What [`append_guard`] reads of the report this record was banked
    /// from (as [`IterationRecord::as_report`] gives it, without a copy).
    pub fn guarded(&self) -> Guarded<'_> {
        let cost = &self.budget_delta;
        guarded!(self, next_action: &self.proposed_next_action, tokens: cost.tokens, usd: cost.usd)
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
            Some(_) if next_is_final(ledger) => Err(LedgerError::ContinueOnFinal { decision }),
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

/// Whether the next append is the final one the iteration cap allows:
/// the one rule for "final allowed iteration", which both guards apply
/// and the task body announces. There only [`final_decisions`] are
/// accepted; `blocked` is accepted nowhere else.
pub fn next_is_final(ledger: &Ledger) -> bool {
    ledger.spent.iterations.checked_add(1) == Some(ledger.config.budget.max_iterations)
}

/// The decisions an append on the final allowed iteration may use.
pub fn final_decisions() -> impl Iterator<Item = Decision> {
    Decision::ALL.iter().copied().filter(|d| !d.is_continuing())
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
///
/// [`LedgerOwner::decide`]: super::LedgerOwner#method.decide
pub fn import_guard(ledger: &Ledger, record: &IterationRecord) -> Result<(), LedgerError> {
    check_report_text(&record.guarded())?;
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
    let last = next_is_final(ledger);
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
    let ids = &report.evidence.evidence_ids;
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

pub(super) fn validate_init(init: &InitLoop) -> Result<(), LedgerError> {
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
    check_all("permissions", &commitments.permissions, limits::OBJECTIVE)?;
    let source_run_id = init.source_run_id.as_deref().unwrap_or_default();
    check("source_run_id", source_run_id, limits::LINE)
}

/// As [`check_init_text`], for what an agent reports about a turn. Kept
/// out of [`append_guard`] so that `validate` still reads records banked
/// before these limits existed.
fn check_report_text(report: &Guarded<'_>) -> Result<(), crate::text::TextProblem> {
    use crate::text::{check, check_all, limits};
    check("--objective", report.objective, limits::NOTE)?;
    check("--stop-reason", report.stop_reason, limits::LINE)?;
    let evidence = report.evidence;
    check_all("--evidence-id", &evidence.evidence_ids, limits::LINE)?;
    check_all("--claim-id", &evidence.claim_ids, limits::LINE)?;
    check_all("--source-id", &evidence.source_ids, limits::LINE)?;
    check_all("--guard-ref", &evidence.guard_refs, limits::LINE)?;
    check_all("--input-ref", report.input_refs, limits::LINE)?;
    check_all("--action-taken", report.actions_taken, limits::NOTE)?;
    check_all("--remaining-gap", report.remaining_gaps, limits::NOTE)?;
    check("--output", report.output, limits::OUTPUT)?;
    check(
        "--completed-summary",
        report.completed_summary,
        limits::NOTE,
    )?;
    check("--current-summary", report.current_summary, limits::NOTE)?;
    check("--next-action", report.next_action, limits::NOTE)?;
    check(
        "--executor-provider",
        report.executor_provider,
        limits::LINE,
    )?;
    check("dispatch id", report.dispatch_id, limits::LINE)
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
    let guarded = report.guarded();
    check_report_text(&guarded)?;
    let mode = required(report.mode, "mode", Mode::names())?;
    let decision = required(report.decision, "decision", Decision::names())?;
    append_guard(ledger, &guarded, decision, now, files, reviewed)?;
    Ok((mode, decision))
}
