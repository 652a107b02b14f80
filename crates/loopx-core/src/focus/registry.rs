//! The approach registry: the campaigns a loop may pursue, the approaches
//! within each, how good each looks (an interval estimate of its value to
//! the goal, with an expiry), whether it may be chosen now, and what would
//! reopen it if not.
//!
//! Owns: the registry's shape and validity, and the one rule of which
//! approaches are eligible at a given moment ([`ApproachRegistry::eligible`]).
//! Does not own the choice among them ([`super::direction`]).

use super::contract::{check_trip_wires, unique, TripWire};
use super::document::Document;
use super::FocusError;
use crate::ident::{self, IdKind};
use crate::text::{self, limits};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ApproachRegistry {
    #[serde(default)]
    pub campaigns: Vec<Campaign>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Campaign {
    pub campaign_id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub approaches: Vec<Approach>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approach {
    pub approach_id: String,
    #[serde(default)]
    pub summary: String,
    pub estimate: Estimate,
    #[serde(default)]
    pub eligibility: Eligibility,
    /// What would make an ineligible approach worth choosing again.
    #[serde(default)]
    pub reopen_conditions: Vec<String>,
    /// The contract's kind of trip wire, for while this approach is
    /// selected. Absent when none, so registries written before them keep
    /// their fingerprints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trip_wires: Vec<TripWire>,
    /// The compute services this approach's work may and must not use
    /// (`super::compute`). Absent when none, as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_policy: Option<super::compute::ComputePolicy>,
}

/// The approach's value to the goal as an interval in [0, 1]: the honest
/// range, not a point guess, so that overlap can be told from dominance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub low: f64,
    pub high: f64,
    /// After this the estimate is stale: the approach is not chosen on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Eligibility {
    pub status: EligibilityStatus,
    #[serde(default)]
    pub reason: String,
}

crate::ledger::vocabulary::vocabulary! {
    /// Whether an approach may be chosen, spelled as the reference
    /// runtime's: only `eligible` competes; `parked` and `blocked` wait for
    /// their reopen conditions; `closed` and `succeeded` are done.
    #[derive(Default)]
    EligibilityStatus {
        #[default]
        Eligible => "eligible",
        Parked => "parked",
        Blocked => "blocked",
        Closed => "closed",
        Succeeded => "succeeded",
    }
}

/// Why an approach was left out of a choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub approach_id: String,
    pub campaign_id: String,
    pub reason: String,
}

/// An approach with the campaign it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub campaign_id: &'a str,
    pub approach: &'a Approach,
}

impl ApproachRegistry {
    pub fn approaches(&self) -> impl Iterator<Item = Candidate<'_>> {
        self.campaigns.iter().flat_map(|c| {
            c.approaches.iter().map(move |approach| Candidate {
                campaign_id: &c.campaign_id,
                approach,
            })
        })
    }

    pub fn approach(&self, approach_id: &str) -> Option<Candidate<'_>> {
        self.approaches()
            .find(|c| c.approach.approach_id == approach_id)
    }

    /// Why `candidate` may not be chosen at `now`, or `None` if it may.
    pub fn ineligibility(candidate: &Candidate<'_>, now: Timestamp) -> Option<String> {
        let approach = candidate.approach;
        if approach.eligibility.status != EligibilityStatus::Eligible {
            return Some(format!(
                "{}: {}",
                approach.eligibility.status, approach.eligibility.reason
            ));
        }
        match approach.estimate.expires_at {
            Some(at) if at <= now => Some(format!("estimate expired at {at}")),
            _ => None,
        }
    }

    /// The approaches that may be chosen at `now`, and why each other one
    /// may not.
    pub fn eligible(&self, now: Timestamp) -> (Vec<Candidate<'_>>, Vec<Excluded>) {
        let mut eligible = Vec::new();
        let mut excluded = Vec::new();
        for candidate in self.approaches() {
            match Self::ineligibility(&candidate, now) {
                None => eligible.push(candidate),
                Some(reason) => excluded.push(Excluded {
                    approach_id: candidate.approach.approach_id.clone(),
                    campaign_id: candidate.campaign_id.to_owned(),
                    reason,
                }),
            }
        }
        (eligible, excluded)
    }
}

impl Document for ApproachRegistry {
    const WHAT: &'static str = "the approach registry";
    const KIND: &'static str = "focus.approach_registry_revised";

    fn check(&self) -> Result<(), FocusError> {
        text::check_count("campaigns", self.campaigns.len())?;
        unique(
            "the approach registry",
            "campaign",
            self.campaigns.iter().map(|c| &c.campaign_id),
        )?;
        for campaign in &self.campaigns {
            ident::check(IdKind::Campaign, &campaign.campaign_id)?;
            text::check("campaigns[].title", &campaign.title, limits::TITLE)?;
            text::check_count("campaigns[].approaches", campaign.approaches.len())?;
        }
        let ids: Vec<&String> = self.approaches().map(|c| &c.approach.approach_id).collect();
        unique("the approach registry", "approach", ids.into_iter())?;
        for Candidate { approach, .. } in self.approaches() {
            ident::check(IdKind::Approach, &approach.approach_id)?;
            text::check("approaches[].summary", &approach.summary, limits::NOTE)?;
            text::check(
                "approaches[].eligibility.reason",
                &approach.eligibility.reason,
                limits::LINE,
            )?;
            text::check_all(
                "approaches[].reopen_conditions",
                &approach.reopen_conditions,
                limits::LINE,
            )?;
            check_trip_wires(&approach.trip_wires)?;
            let Estimate { low, high, .. } = approach.estimate;
            let in_unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
            if !(in_unit(low) && in_unit(high) && low <= high) {
                return Err(FocusError::BadEstimate {
                    approach: approach.approach_id.clone(),
                    low,
                    high,
                });
            }
            if approach.eligibility.status != EligibilityStatus::Eligible
                && approach.eligibility.reason.trim().is_empty()
            {
                return Err(FocusError::IneligibleWithoutReason {
                    approach: approach.approach_id.clone(),
                    status: approach.eligibility.status.to_string(),
                });
            }
        }
        Ok(())
    }
}
