//! The Goal Focus mode as the ledger records it at `init`: how the loop
//! came by its mode ([`ModeSource`]), and the sentence `status` gives for
//! why that mode is in force. What the mode does with replan signals is
//! Goal Focus's (`crate::focus::mode`), which reads these; the ledger
//! reads nothing of Goal Focus.

use super::vocabulary::GoalFocusMode;
use serde::{Deserialize, Serialize};

super::vocabulary::vocabulary! {
    /// How the loop came by its mode, recorded at `init`.
    ModeSource {
        ChosenAtInit => "chosen_at_init",
        DefaultWithoutPanel => "default_without_panel",
        DefaultWithPanel => "default_with_panel",
        /// Carried over by `loopx import` from the imported loop's plan.
        Imported => "imported",
    }
}

/// Why `mode` is in force, for people. `source` is `None` for a loop
/// created by a loopx that did not record it.
pub fn reason(mode: GoalFocusMode, source: Option<ModeSource>) -> String {
    let why = match source {
        Some(ModeSource::ChosenAtInit) => format!("chosen at init with --goal-focus-mode {mode}"),
        Some(ModeSource::DefaultWithoutPanel) => {
            "the default for a loop created without a review panel (enforce is the default only with one)".into()
        }
        Some(ModeSource::DefaultWithPanel) => {
            "the default for a loop created with a review panel configured".into()
        }
        Some(ModeSource::Imported) => {
            "carried over by `loopx import` from the imported loop's current_plan.enforcement_mode".into()
        }
        None => {
            "set at init by a loopx that did not record whether it was chosen".into()
        }
    };
    let effect = match mode {
        GoalFocusMode::Off => "direction control is off: no signals are read and nothing is gated",
        GoalFocusMode::Monitor => {
            "replan signals are reported and never block an append or a turn; monitor is not an acceptance guarantee"
        }
        GoalFocusMode::Enforce => {
            "an append is staged as a candidate and banked only after a different-family result review, a direction needs a different-family strategy review, and a firing replan signal, a candidate awaiting review or quarantined, or a dispatch no live driver settles closes the pre-dispatch gate"
        }
    };
    format!("{mode}: {why}; {effect}")
}
