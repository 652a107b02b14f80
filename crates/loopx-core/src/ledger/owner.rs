//! The pure owner of a loop's ledger ([`LedgerOwner`]): `decide` a
//! [`LedgerRequest`] against the snapshot (which guard refuses it, or
//! which event it writes and the receipt) and `evolve` the snapshot by an
//! event. Not here: the admission rules (`guard.rs`) and the append path
//! (`append.rs`).

use super::append::{
    append, append_record, beyond_charged, ended_by_budget, import_record, rejected,
};
use super::budget::{self, is_budget_number, Spent};
use super::error::LedgerError;
use super::event::LedgerEvent;
use super::guard::{import_guard, validate_init};
use super::record::{redacted_record, BankStatus, ClaimState};
use super::request::{LedgerContext, LedgerReceipt, LedgerRequest};
use super::state::{DispatchCharge, Ledger, RECENT_RECORDS};
use super::vocabulary::{GoalFocusMode, LoopStatus};
use crate::digest::Digest;
use crate::operation::{Decided, OperationId, Owner};
use jiff::Timestamp;

/// The run id of a loop created by `operation_id` at `at`: stable under
/// replay, different for every new loop.
fn run_id_for(operation_id: &OperationId, at: Timestamp) -> String {
    let digest = Digest::of_bytes(format!("{operation_id}\n{at}").as_bytes());
    format!("run-{}", &digest.as_str()["sha256:".len()..][..20])
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
