//! The goal contract: what the loop is for (goal), how to tell it is
//! achieved (criteria), what it may and may not touch (scope), and the
//! obligations still standing between here and done, as a DAG.
//!
//! Owns: the contract's shape and its validity (unique ids, text limits,
//! every dependency defined, no cycle), and the contract a loop has before
//! one is written (derived from its `init`). Does not own how obligations
//! change over iterations: the ledger records `--obligation-id` and
//! `--global-delta` as given.

use super::document::Document;
use super::FocusError;
use crate::ident::{self, IdKind};
use crate::ledger::InitLoop;
use crate::text::{self, limits};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalContract {
    pub goal: String,
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    #[serde(default)]
    pub scope: Scope,
    #[serde(default)]
    pub obligations: Vec<Obligation>,
    /// Conditions that, once the ledger meets them under the current plan,
    /// call for a replan (`trip_wire`), checked before every turn. Absent
    /// when none, so contracts written before them keep their
    /// fingerprints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trip_wires: Vec<TripWire>,
}

/// A trip wire: a named condition on the iterations banked since the
/// current plan was committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TripWire {
    pub trip_wire_id: String,
    #[serde(default)]
    pub description: String,
    pub when: TripCondition,
}

/// What trips a wire, counted over the iterations banked under the plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TripCondition {
    /// This many iterations banked.
    Iterations { at_least: u64 },
    /// This much USD spent by them.
    Usd { at_least: f64 },
    /// This many of them rejected by their result review.
    RejectedReviews { at_least: u64 },
}

impl TripCondition {
    /// What the records banked under the plan say of it: the measure, if
    /// it reached the threshold.
    pub fn tripped(&self, records: &[&crate::ledger::IterationRecord]) -> Option<String> {
        use crate::ledger::BankStatus;
        match *self {
            TripCondition::Iterations { at_least } => {
                let n = records.len() as u64;
                (n >= at_least).then(|| format!("{n} iterations under the plan (wire: {at_least})"))
            }
            TripCondition::Usd { at_least } => {
                let usd: f64 = records.iter().map(|r| r.budget_delta.usd).sum();
                (usd >= at_least)
                    .then(|| format!("${usd:.2} spent under the plan (wire: ${at_least:.2})"))
            }
            TripCondition::RejectedReviews { at_least } => {
                let rejected = (records.iter())
                    .filter(|r| {
                        r.bank
                            .as_ref()
                            .is_some_and(|b| b.status == BankStatus::Rejected)
                    })
                    .count() as u64;
                (rejected >= at_least)
                    .then(|| format!("{rejected} iterations rejected by review under the plan (wire: {at_least})"))
            }
        }
    }

    fn check(&self, id: &str) -> Result<(), FocusError> {
        let sound = match *self {
            TripCondition::Iterations { at_least }
            | TripCondition::RejectedReviews { at_least } => at_least >= 1,
            TripCondition::Usd { at_least } => at_least.is_finite() && at_least > 0.0,
        };
        match sound {
            true => Ok(()),
            false => Err(FocusError::TripWireNeverSet { id: id.to_owned() }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub criterion_id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Scope {
    #[serde(default)]
    pub in_scope: Vec<String>,
    #[serde(default)]
    pub out_of_scope: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Obligation {
    pub obligation_id: String,
    pub description: String,
    #[serde(default)]
    pub kind: ObligationKind,
    #[serde(default)]
    pub status: ObligationStatus,
    /// Obligations that must be discharged before this one can be.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

crate::ledger::vocabulary::vocabulary! {
    /// Where an obligation stands, spelled as the reference runtime's.
    /// Satisfied and closed obligations are discharged; the rest are open
    /// work.
    #[derive(Default)]
    ObligationStatus {
        #[default]
        Open => "open",
        Partial => "partial",
        Satisfied => "satisfied",
        Blocked => "blocked",
        Closed => "closed",
    }
}

impl ObligationStatus {
    pub fn is_discharged(self) -> bool {
        matches!(self, ObligationStatus::Satisfied | ObligationStatus::Closed)
    }
}

crate::ledger::vocabulary::vocabulary! {
    /// What an obligation is for, spelled as the reference runtime's:
    /// supporting work, a bridge between results, or a terminal obligation
    /// whose discharge is the goal.
    #[derive(Default)]
    ObligationKind {
        #[default]
        Supporting => "supporting",
        Bridge => "bridge",
        Terminal => "terminal",
    }
}

impl GoalContract {
    /// The contract of a loop nobody wrote one for: its goal, its success
    /// criteria and acceptance criteria as criteria, its non-goals out of
    /// scope, and no obligations yet.
    pub fn from_init(init: &InitLoop) -> Self {
        let mut criteria = vec![Criterion {
            criterion_id: "success".into(),
            text: init.success_criteria.clone(),
        }];
        criteria.extend(init.commitments.acceptance_criteria.iter().enumerate().map(
            |(i, text)| Criterion {
                criterion_id: format!("acceptance-{}", i + 1),
                text: text.clone(),
            },
        ));
        GoalContract {
            goal: init.goal.clone(),
            criteria,
            scope: Scope {
                in_scope: Vec::new(),
                out_of_scope: init.commitments.non_goals.clone(),
            },
            obligations: Vec::new(),
            trip_wires: Vec::new(),
        }
    }

    /// The obligation `obligation_id` names, if the contract defines it.
    pub fn obligation(&self, obligation_id: &str) -> Option<&Obligation> {
        (self.obligations.iter()).find(|o| o.obligation_id == obligation_id)
    }

    /// Obligations not yet discharged.
    pub fn open_obligations(&self) -> usize {
        self.obligations
            .iter()
            .filter(|o| !o.status.is_discharged())
            .count()
    }
}

impl Document for GoalContract {
    const WHAT: &'static str = "the goal contract";
    const KIND: &'static str = "focus.goal_contract_revised";

    fn check(&self) -> Result<(), FocusError> {
        if self.goal.trim().is_empty() {
            return Err(FocusError::EmptyGoal);
        }
        text::check("goal", &self.goal, limits::OBJECTIVE)?;
        text::check_count("criteria", self.criteria.len())?;
        unique(
            "the goal contract",
            "criterion",
            self.criteria.iter().map(|c| &c.criterion_id),
        )?;
        for criterion in &self.criteria {
            ident::check(IdKind::Criterion, &criterion.criterion_id)?;
            text::check("criteria[].text", &criterion.text, limits::OBJECTIVE)?;
        }
        text::check_all("scope.in_scope", &self.scope.in_scope, limits::OBJECTIVE)?;
        text::check_all(
            "scope.out_of_scope",
            &self.scope.out_of_scope,
            limits::OBJECTIVE,
        )?;
        text::check_count("obligations", self.obligations.len())?;
        unique(
            "the goal contract",
            "obligation",
            self.obligations.iter().map(|o| &o.obligation_id),
        )?;
        for obligation in &self.obligations {
            ident::check(IdKind::Obligation, &obligation.obligation_id)?;
            text::check(
                "obligations[].description",
                &obligation.description,
                limits::OBJECTIVE,
            )?;
            text::check_count("obligations[].depends_on", obligation.depends_on.len())?;
        }
        check_trip_wires(&self.trip_wires)?;
        check_dag(&self.obligations)
    }
}

/// The trip wires of a contract or of one approach: few enough, each id
/// once and well-formed, each description within limits, and each able to
/// stay unset.
pub(super) fn check_trip_wires(wires: &[TripWire]) -> Result<(), FocusError> {
    text::check_count("trip_wires", wires.len())?;
    unique(
        "a trip wire list",
        "trip wire",
        wires.iter().map(|w| &w.trip_wire_id),
    )?;
    for wire in wires {
        ident::check(IdKind::Criterion, &wire.trip_wire_id)?;
        text::check(
            "trip_wires[].description",
            &wire.description,
            limits::OBJECTIVE,
        )?;
        wire.when.check(&wire.trip_wire_id)?;
    }
    Ok(())
}

/// Refuse a list of ids that names one twice.
pub(super) fn unique<'a>(
    what: &'static str,
    kind: &'static str,
    ids: impl Iterator<Item = &'a String>,
) -> Result<(), FocusError> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(FocusError::DuplicateId {
                what,
                kind,
                id: id.clone(),
            });
        }
    }
    Ok(())
}

/// Every dependency names a defined obligation and none leads back to
/// where it started.
fn check_dag(obligations: &[Obligation]) -> Result<(), FocusError> {
    let edges: BTreeMap<&str, &[String]> = obligations
        .iter()
        .map(|o| (o.obligation_id.as_str(), o.depends_on.as_slice()))
        .collect();
    for obligation in obligations {
        if let Some(missing) = obligation
            .depends_on
            .iter()
            .find(|d| !edges.contains_key(d.as_str()))
        {
            return Err(FocusError::UnknownDependency {
                obligation: obligation.obligation_id.clone(),
                missing: missing.clone(),
            });
        }
    }
    // Depth-first search with the path kept, so a cycle is reported as
    // the obligations a person has to look at. Iterative: a hostile
    // contract cannot exhaust the stack.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Unseen,
        OnPath,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = edges.keys().map(|k| (*k, Mark::Unseen)).collect();
    for start in edges.keys() {
        if marks[start] != Mark::Unseen {
            continue;
        }
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::OnPath);
        while let Some((node, next)) = path.last_mut() {
            let deps = edges[*node];
            if *next == deps.len() {
                marks.insert(node, Mark::Done);
                path.pop();
                continue;
            }
            let dep = deps[*next].as_str();
            *next += 1;
            match marks[dep] {
                Mark::Done => {}
                Mark::Unseen => {
                    marks.insert(dep, Mark::OnPath);
                    path.push((dep, 0));
                }
                Mark::OnPath => {
                    let from = path.iter().position(|(n, _)| *n == dep).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|(n, _)| (*n).to_owned()).collect();
                    cycle.push(dep.to_owned());
                    return Err(FocusError::DependencyCycle { cycle });
                }
            }
        }
    }
    Ok(())
}
