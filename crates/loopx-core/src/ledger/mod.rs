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
//!
//! Files by job: `state` (the snapshot and its config), `report` (what an
//! agent says about a turn), `record` (a banked iteration; redaction),
//! `request` (requests, context, receipts), `event` (what a write
//! records), `error` (refusals), `guard` (admission), `append` (from
//! report to record, and its fold), `owner` (decide and evolve); their
//! types are re-exported here. Then the rest: the `done` arbiter, the
//! audit, budgets, Goal Focus mode, proof artifacts, views, vocabulary.
//!
//! [`LedgerOwner::decide`]: LedgerOwner#method.decide

pub mod arbiter;
pub mod audit;
pub mod budget;
mod canonical_read;
pub mod goal_priority;
pub mod mode;
pub mod proof;
pub mod view;
pub mod vocabulary;

mod append;
mod error;
mod event;
mod guard;
mod owner;
mod record;
mod report;
mod request;
mod state;

pub use error::LedgerError;
pub use event::LedgerEvent;
pub use guard::{admit, append_guard, final_decisions, import_guard, next_is_final, Guarded};
pub use owner::LedgerOwner;
pub use record::{redacted, Bank, BankStatus, BudgetDelta, CheckRun, ClaimState, IterationRecord};
pub use report::{nonblank, Direction, EvidenceChecked, IterationReport};
pub use request::{LedgerContext, LedgerReceipt, LedgerRequest};
pub use state::{
    DispatchCharge, InitLoop, Ledger, StopConditions, DEFAULT_PLATEAU_RULE, RECENT_RECORDS,
};

/// The journal stream a loop's ledger lives in.
pub const STREAM: &str = "ledger";

#[cfg(test)]
mod tests;
