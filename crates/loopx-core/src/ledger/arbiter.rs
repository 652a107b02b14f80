//! The `done` arbiter: should this loop run another turn?
//!
//! Read-only and pure: the adapter supplies the sentinel files it saw and
//! the clock. The driver, `hook-check` and `status` all ask this one function.

use super::budget::Exhausted;
use super::vocabulary::LoopStatus;
use super::Ledger;
use jiff::Timestamp;
use serde::Serialize;

/// The operator's sentinel files in the loop directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sentinels {
    /// `STOP_REQUESTED`: the user wants the loop to end.
    pub stop_requested: bool,
    /// `BLOCKED`: an operator declared the loop blocked.
    pub blocked: bool,
    /// `PAUSE`: hold off without ending the loop.
    pub paused: bool,
}

/// A reason the loop should not (or, for `AwaitingUserStop`, may only by
/// the user's word) run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCondition {
    UserStopRequested,
    OperatorBlocked,
    Budget(Exhausted),
    /// `require_user_stop_only`: nothing but the user or a budget ends it.
    AwaitingUserStop,
    TerminalStatus(LoopStatus),
}

impl StopCondition {
    pub fn code(self) -> &'static str {
        match self {
            StopCondition::UserStopRequested => "user_stop_requested",
            StopCondition::OperatorBlocked => "operator_blocked",
            StopCondition::Budget(exhausted) => exhausted.reason_code(),
            StopCondition::AwaitingUserStop => "awaiting_user_stop",
            StopCondition::TerminalStatus(LoopStatus::Blocked) => "terminal_status:blocked",
            StopCondition::TerminalStatus(_) => "terminal_status:stopped",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub done: bool,
    pub paused: bool,
    /// The deciding condition's code, as the reference prints it.
    pub reason: Option<&'static str>,
    /// Every condition that holds, deciding one first.
    pub conditions: Vec<&'static str>,
    /// The deciding condition itself, for the views that say in words why
    /// the loop ended (`crate::ending`); its code is `reason`.
    #[serde(skip)]
    pub deciding: Option<StopCondition>,
}

/// Checked in the reference runtime's order; the first that holds decides.
pub fn arbitrate(ledger: &Ledger, sentinels: Sentinels, now: Timestamp) -> Verdict {
    let mut holding = Vec::new();
    if sentinels.stop_requested {
        holding.push(StopCondition::UserStopRequested);
    }
    if sentinels.blocked {
        holding.push(StopCondition::OperatorBlocked);
    }
    let exhausted = ledger
        .config
        .budget
        .exhausted(&ledger.spent, ledger.elapsed_seconds(now));
    holding.extend(exhausted.into_iter().map(StopCondition::Budget));
    if ledger.config.stop_conditions.require_user_stop_only {
        holding.push(StopCondition::AwaitingUserStop);
    }
    if ledger.status.is_terminal() {
        holding.push(StopCondition::TerminalStatus(ledger.status));
    }
    let deciding = holding.first().copied();
    Verdict {
        done: matches!(deciding, Some(condition) if condition != StopCondition::AwaitingUserStop),
        paused: sentinels.paused,
        reason: deciding.map(StopCondition::code),
        deciding,
        conditions: holding.into_iter().map(StopCondition::code).collect(),
    }
}
