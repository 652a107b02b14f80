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
        }
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
        check_dag(&self.obligations)
    }
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
