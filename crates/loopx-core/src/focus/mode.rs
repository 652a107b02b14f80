//! Which Goal Focus enforcement mode a loop gets, why, and what that mode
//! does with the replan signals.
//!
//! Owns: the default (enforce when a review panel is configured, monitor
//! otherwise; a plain `init` + `append-iteration` keeps working with no
//! reviewer) and the gate verdict for the signals ([`gate`]) — the one
//! place a driver's pre-dispatch check asks. Does not own where the mode
//! is kept, how it came about, or the sentence `status` gives for it: the
//! ledger's (`crate::ledger::mode`), fixed at `init`.

use super::signals::Signal;
use crate::driver::DriverSummary;
use crate::ledger::vocabulary::GoalFocusMode;
use serde::{Deserialize, Serialize};

pub use crate::ledger::mode::{reason, ModeSource};

/// The mode a new loop gets: the one asked for, else enforce with a review
/// panel to enforce with, monitor without one.
pub fn resolve(
    requested: Option<GoalFocusMode>,
    panel_configured: bool,
) -> (GoalFocusMode, ModeSource) {
    match (requested, panel_configured) {
        (Some(mode), _) => (mode, ModeSource::ChosenAtInit),
        (None, true) => (GoalFocusMode::Enforce, ModeSource::DefaultWithPanel),
        (None, false) => (GoalFocusMode::Monitor, ModeSource::DefaultWithoutPanel),
    }
}

/// What the pre-dispatch gate makes of the signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Off: nothing is looked at.
    NotApplied,
    /// No signal fires.
    Clear,
    /// Monitor: signals fire and are only reported.
    Reported,
    /// Enforce: signals fire (or a candidate or a dispatch is undecided);
    /// no turn may be dispatched until a reviewed replan clears them. The
    /// driver's step (`crate::driver::step`) stops on the same holds and
    /// signals before it dispatches.
    Blocked,
}

/// What besides the signals holds new work back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Holds {
    /// A candidate awaits review, or is quarantined.
    pub candidate: bool,
    /// A dispatch is open with no live driver to settle it
    /// ([`dispatch_unresolved`]).
    pub dispatch: bool,
}

/// A driver dispatch is open and no live driver holds it: whether its turn
/// took effect is unknown until a restarting driver or a person settles it
/// (`loopx goal-focus recover-dispatch`).
pub fn dispatch_unresolved(driver: &DriverSummary) -> bool {
    !driver.running && driver.iteration.is_some()
}

/// [`gate`], with the candidate stream and the driver read too: in enforce
/// mode a candidate awaiting review or quarantined, or an unresolved
/// dispatch, closes the gate as well — no new work is launched while a
/// result is undecided.
pub fn gate_with_holds(mode: GoalFocusMode, signals: &[Signal], holds: Holds) -> Gate {
    match (mode, holds.candidate || holds.dispatch) {
        (GoalFocusMode::Enforce, true) => Gate::Blocked,
        _ => gate(mode, signals),
    }
}

pub fn gate(mode: GoalFocusMode, signals: &[Signal]) -> Gate {
    match (mode, signals.is_empty()) {
        (GoalFocusMode::Off, _) => Gate::NotApplied,
        (_, true) => Gate::Clear,
        (GoalFocusMode::Monitor, false) => Gate::Reported,
        (GoalFocusMode::Enforce, false) => Gate::Blocked,
    }
}
