//! An append, from report to record: what a report or a reviewed
//! candidate is banked as (its cost net of what the driver already
//! charged, a `continue` the budget ended, a rejected result), the record
//! built from it, and the fold of an appended or imported record into the
//! snapshot. Not here: whether it may be appended (`guard.rs`).

use super::budget;
use super::error::LedgerError;
use super::event::LedgerEvent;
use super::guard::{admit, append_guard};
use super::record::{redacted, Bank, BudgetDelta, ClaimState, IterationRecord};
use super::report::{nonblank, EvidenceChecked, IterationReport};
use super::request::{LedgerContext, LedgerReceipt};
use super::state::{Ledger, RECENT_RECORDS};
use super::vocabulary::{is_success_stop_reason, Decision, LoopStatus, Mode};
use crate::operation::Decided;

/// The append of `report` (a reviewed candidate's when `bank` is set).
pub(super) fn append(
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
pub(super) fn beyond_charged(ledger: &Ledger, report: &IterationReport) -> IterationReport {
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

/// An accepted candidate whose `continue` the budget can no longer honour
/// (wall time ran out while it awaited review) is banked as the `stop` the
/// budget forces, with the budget's reason code. Without this the accepted
/// result could never bank and the loop would wait on it forever.
pub(super) fn ended_by_budget(
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
pub(super) fn rejected(
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
///
/// [`LedgerOwner::evolve`]: super::LedgerOwner#method.evolve
pub(super) fn append_record(mut ledger: Ledger, record: IterationRecord) -> Ledger {
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
pub(super) fn import_record(ledger: Ledger, record: IterationRecord) -> Ledger {
    let mut ledger = append_record(ledger, record);
    ledger.imported += 1;
    ledger
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
