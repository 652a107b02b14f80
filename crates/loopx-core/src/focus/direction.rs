//! The direction rule: from the approach registry, which bounded direction
//! to take next.
//!
//! 1. Filter: only eligible approaches with unexpired estimates compete.
//! 2. Exploit when one approach is robustly dominant: its lower bound is
//!    above every other eligible approach's upper bound, so no reading of
//!    the estimates makes another one better.
//! 3. Otherwise the estimates overlap and choosing would be a guess: run a
//!    bounded informative experiment among at most three approaches that
//!    could still be best, preferring different campaigns (diverse) and,
//!    within that, the highest upper bound and then the widest interval
//!    (most to learn).
//!
//! Owns this rule and nothing else: no state, no review, no commit. The
//! plan owner calls it; `replan --dry-run` shows what it says.

use super::registry::{ApproachRegistry, Candidate, Excluded};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// At most this many approaches share one experiment.
pub const MAX_EXPERIMENT_APPROACHES: usize = 3;
/// How many iterations an exploitation plan runs before it expires.
pub const EXPLOIT_ITERATIONS: u64 = 3;

crate::ledger::vocabulary::vocabulary! {
    /// Follow one dominant approach, or tell overlapping ones apart.
    SelectionKind {
        Exploit => "exploit",
        Experiment => "experiment",
    }
}

/// One bounded direction: which approaches, and for how many iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub kind: SelectionKind,
    pub approach_ids: Vec<String>,
    pub campaign_ids: Vec<String>,
    /// The plan expires after this many banked iterations.
    pub horizon_iterations: u64,
    pub rationale: String,
}

/// What the rule says, with everything it left out and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// `None` when no approach is eligible: the plan needs a new registry
    /// (or a reopened approach) before it can select.
    pub selection: Option<Selection>,
    pub excluded: Vec<Excluded>,
}

fn by_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Apply the rule to `registry` as of `now`.
pub fn propose(registry: &ApproachRegistry, now: Timestamp) -> Proposal {
    let (mut eligible, excluded) = registry.eligible(now);
    // Highest lower bound first; ties by id so the rule is deterministic.
    eligible.sort_by(|a, b| {
        by_f64(b.approach.estimate.low, a.approach.estimate.low)
            .then_with(|| a.approach.approach_id.cmp(&b.approach.approach_id))
    });
    let Some(leader) = eligible.first().copied() else {
        return Proposal {
            selection: None,
            excluded,
        };
    };
    let rivals = &eligible[1..];
    let dominant = rivals
        .iter()
        .all(|r| leader.approach.estimate.low > r.approach.estimate.high);
    let selection = if dominant {
        Selection {
            kind: SelectionKind::Exploit,
            approach_ids: vec![leader.approach.approach_id.clone()],
            campaign_ids: vec![leader.campaign_id.to_owned()],
            horizon_iterations: EXPLOIT_ITERATIONS,
            rationale: match rivals.is_empty() {
                true => format!(
                    "{} is the only eligible approach",
                    leader.approach.approach_id
                ),
                false => format!(
                    "{} is robustly dominant: its lower bound {} is above every other eligible upper bound",
                    leader.approach.approach_id, leader.approach.estimate.low
                ),
            },
        }
    } else {
        experiment(&eligible, leader)
    };
    Proposal {
        selection: Some(selection),
        excluded,
    }
}

/// The experiment among approaches whose interval overlaps the leader's.
fn experiment(eligible: &[Candidate<'_>], leader: Candidate<'_>) -> Selection {
    let mut contenders: Vec<Candidate<'_>> = eligible
        .iter()
        .copied()
        .filter(|c| c.approach.estimate.high >= leader.approach.estimate.low)
        .collect();
    let width = |c: &Candidate<'_>| c.approach.estimate.high - c.approach.estimate.low;
    contenders.sort_by(|a, b| {
        by_f64(b.approach.estimate.high, a.approach.estimate.high)
            .then_with(|| by_f64(width(b), width(a)))
            .then_with(|| a.approach.approach_id.cmp(&b.approach.approach_id))
    });
    // One per campaign first (diversity), then fill from what is left.
    let mut chosen: Vec<Candidate<'_>> = Vec::new();
    for candidate in &contenders {
        if chosen.len() < MAX_EXPERIMENT_APPROACHES
            && !chosen
                .iter()
                .any(|c| c.campaign_id == candidate.campaign_id)
        {
            chosen.push(*candidate);
        }
    }
    for candidate in &contenders {
        if chosen.len() < MAX_EXPERIMENT_APPROACHES
            && !chosen
                .iter()
                .any(|c| c.approach.approach_id == candidate.approach.approach_id)
        {
            chosen.push(*candidate);
        }
    }
    let mut campaign_ids: Vec<String> = Vec::new();
    for c in &chosen {
        if !campaign_ids.iter().any(|id| id == c.campaign_id) {
            campaign_ids.push(c.campaign_id.to_owned());
        }
    }
    let approach_ids: Vec<String> = chosen
        .iter()
        .map(|c| c.approach.approach_id.clone())
        .collect();
    Selection {
        kind: SelectionKind::Experiment,
        rationale: format!(
            "the estimates of {} overlap: no approach is robustly dominant, so one bounded iteration each tells them apart",
            approach_ids.join(", ")
        ),
        horizon_iterations: approach_ids.len() as u64,
        approach_ids,
        campaign_ids,
    }
}

/// Why a selection someone else named (a strategy reviewer's) may not be
/// taken under this rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotSelectable {
    #[error("a selection names 1 to {MAX_EXPERIMENT_APPROACHES} approaches, not {count}")]
    Count { count: usize },
    #[error("the selection names approach {0:?} twice")]
    Twice(String),
    #[error("approach {0:?} is not in the approach registry")]
    Unknown(String),
    #[error("approach {approach:?} is not eligible: {reason}")]
    Ineligible { approach: String, reason: String },
    #[error("approach {approach:?} cannot be best (its upper bound {high} is below the lower bound {leader_low} of {leader:?}): only approaches that could still be best share an experiment")]
    Dominated {
        approach: String,
        high: f64,
        leader: String,
        leader_low: f64,
    },
}

/// The selection of exactly `approach_ids` under this rule, or why it is
/// not one: every approach eligible now, at most
/// [`MAX_EXPERIMENT_APPROACHES`], each one that could still be best (its
/// upper bound reaches the leader's lower bound). One robustly dominant
/// approach is exploited; anything else is a bounded experiment of one
/// iteration per approach. `rationale` says who chose it and why.
pub fn select(
    registry: &ApproachRegistry,
    approach_ids: &[String],
    now: Timestamp,
    rationale: String,
) -> Result<Selection, NotSelectable> {
    if approach_ids.is_empty() || approach_ids.len() > MAX_EXPERIMENT_APPROACHES {
        return Err(NotSelectable::Count {
            count: approach_ids.len(),
        });
    }
    let mut chosen: Vec<Candidate<'_>> = Vec::new();
    for id in approach_ids {
        if chosen.iter().any(|c| &c.approach.approach_id == id) {
            return Err(NotSelectable::Twice(id.clone()));
        }
        let candidate = registry
            .approach(id)
            .ok_or_else(|| NotSelectable::Unknown(id.clone()))?;
        if let Some(reason) = ApproachRegistry::ineligibility(&candidate, now) {
            return Err(NotSelectable::Ineligible {
                approach: id.clone(),
                reason,
            });
        }
        chosen.push(candidate);
    }
    let (eligible, _) = registry.eligible(now);
    let leader = eligible
        .iter()
        .copied()
        .max_by(|a, b| {
            by_f64(a.approach.estimate.low, b.approach.estimate.low)
                .then_with(|| b.approach.approach_id.cmp(&a.approach.approach_id))
        })
        .expect("a chosen approach is eligible");
    if let Some(dominated) = chosen
        .iter()
        .find(|c| c.approach.estimate.high < leader.approach.estimate.low)
    {
        return Err(NotSelectable::Dominated {
            approach: dominated.approach.approach_id.clone(),
            high: dominated.approach.estimate.high,
            leader: leader.approach.approach_id.clone(),
            leader_low: leader.approach.estimate.low,
        });
    }
    let dominant = chosen.len() == 1
        && eligible.iter().all(|other| {
            other.approach.approach_id == chosen[0].approach.approach_id
                || chosen[0].approach.estimate.low > other.approach.estimate.high
        });
    let mut campaign_ids: Vec<String> = Vec::new();
    for c in &chosen {
        if !campaign_ids.iter().any(|id| id == c.campaign_id) {
            campaign_ids.push(c.campaign_id.to_owned());
        }
    }
    let (kind, horizon_iterations) = match dominant {
        true => (SelectionKind::Exploit, EXPLOIT_ITERATIONS),
        false => (SelectionKind::Experiment, chosen.len() as u64),
    };
    Ok(Selection {
        kind,
        approach_ids: approach_ids.to_vec(),
        campaign_ids,
        horizon_iterations,
        rationale,
    })
}
