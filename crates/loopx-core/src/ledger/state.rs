//! The snapshot of one loop ([`Ledger`]) and the configuration `init` gave
//! it ([`InitLoop`]). Not here: what may change it (`guard.rs`) and how
//! each event does (`owner.rs`, `append.rs`).

use super::budget::{Budget, Spent};
use super::mode;
use super::record::IterationRecord;
use super::vocabulary::{GoalFocusMode, LoopStatus, Mode};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

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
    /// For a loop made by `loopx import`: the run id of the loop it was
    /// imported from, kept as provenance (the imported loop has its own
    /// [`Ledger::run_id`], so two imports of one source never collide).
    /// Absent otherwise, so every other loop's requests, journals and
    /// digests are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run_id: Option<String>,
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
            source_run_id: None,
        }
    }
}

impl Budget {
    /// `loopx init`'s iteration cap when none is given.
    pub const INIT_ITERATIONS: u64 = 5;
    /// `loopx init`'s wall-time cap when none is given: an hour.
    pub const INIT_WALL_TIME_SECONDS: u64 = 3600;

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
