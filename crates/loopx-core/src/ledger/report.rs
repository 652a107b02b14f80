//! What an agent says about the turn it did ([`IterationReport`], with its
//! [`Direction`] and [`EvidenceChecked`]), as `append-iteration` takes it.
//! Not here: whether it may be banked (`guard.rs`) or the record it
//! becomes (`record.rs`, `append.rs`).

use super::vocabulary::{Decision, Mode};
use serde::{Deserialize, Serialize};

/// `loopx append-iteration`: what the agent says about the turn it did.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IterationReport {
    pub mode: Option<Mode>,
    pub objective: String,
    pub decision: Option<Decision>,
    pub stop_reason: String,
    pub evidence_checked: EvidenceChecked,
    pub input_refs: Vec<String>,
    pub actions_taken: Vec<String>,
    pub remaining_gaps: Vec<String>,
    pub output: String,
    pub tokens: u64,
    pub usd: f64,
    pub wall_time_seconds: u64,
    pub completed_summary: String,
    pub current_summary: String,
    pub next_action: String,
    pub executor_provider: String,
    /// The driver dispatch this turn ran under (`LOOPX_DISPATCH_ID`), if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dispatch_id: String,
    /// Goal Focus v2 and compute provenance, as the reference's flags gave
    /// them. Absent when empty, so older requests keep their digests.
    #[serde(default, skip_serializing_if = "Direction::is_empty")]
    pub direction: Box<Direction>,
}

/// What the reference's `append-iteration` records for Goal Focus (v2:
/// `--global-delta`, `--campaign-delta`, `--obligation-id`; v1's soft
/// goal-priority fields) and notify (`--compute-run`, `--compute-none`).
/// Stored faithfully; no rule reads it yet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Direction {
    /// `none`, `reduced` or `satisfied`; empty when not given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub global_delta: String,
    /// `none`, `incremental`, `substantial` or `closed`; empty when not given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub campaign_delta: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligation_ids: Vec<String>,
    /// What this iteration's evidence contradicts: a claim another
    /// iteration supported, or the selected approach's premise (its
    /// approach id). Until a strategy review has seen it (a plan committed
    /// after it), it fires `unreviewed_counterevidence`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counterevidence: Vec<String>,
    /// `None`: compute not reported. `Some([])`: explicitly none
    /// (`--compute-none`). Otherwise each `--compute-run` object as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_runs: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    /// Goal Focus v1 soft fields, each as given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal_contribution: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal_contribution_detail: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub campaign_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_without_goal_delta: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub local_without_goal_delta_tag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub residual_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope_lock: String,
}

impl Direction {
    pub fn is_empty(&self) -> bool {
        self == &Direction::default()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EvidenceChecked {
    pub source_ids: Vec<String>,
    pub claim_ids: Vec<String>,
    pub evidence_ids: Vec<String>,
    pub guard_refs: Vec<String>,
}

/// The values trimmed, with the empty ones dropped (repeatable flags).
pub fn nonblank(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}
