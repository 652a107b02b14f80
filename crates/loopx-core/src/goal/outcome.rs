//! Supporting outcomes: a stable id, a responsible agent, an immutable
//! original objective, cumulative append-only requirements, linked todos,
//! bounded sources, and the latest evidence review of each requirement.
//!
//! A review is an agent's self-assessment bound to the requirements and
//! linked work it looked at: when either changes, the review no longer
//! counts. It is kept apart from configured checks (`super::checks`: a
//! requirement with one takes its state from the check's result alone),
//! and closing a linked todo never marks anything met.

use super::{Actor, Goal, GoalError};
use crate::digest::{canonical_json, canonical_len, Digest};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub const MAX_SOURCES: usize = 64;
/// Declarations (identity, objectives, requirements, links, sources) and
/// reviews each have their own budget of canonical JSON.
pub const DECLARATION_BUDGET: usize = 128 * 1024;
pub const REVIEW_BUDGET: usize = 128 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    pub id: String,
    pub description: String,
    pub source_ref: String,
    pub added_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub source_ref: String,
    pub summary: String,
    pub added_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    Met,
    Unmet,
    Uncertain,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub requirement_id: String,
    pub conclusion: Conclusion,
    pub reasoning: String,
    pub evidence_refs: Vec<String>,
    pub reviewed_by: String,
    pub reviewed_at: Timestamp,
    /// The requirements and linked work this review looked at.
    pub basis: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub id: String,
    pub responsible_agent: String,
    pub original_objective: String,
    pub requirements: Vec<Requirement>,
    pub linked_todos: Vec<String>,
    pub sources: Vec<Source>,
    /// The latest review of each requirement, in requirement order.
    pub reviews: Vec<Review>,
    pub created_at: Timestamp,
    /// Recomputed by [`Outcome::refresh`] whenever the outcome changes.
    #[serde(default)]
    pub derived: Derived,
    /// The executable checks the goal's owner configured on its
    /// requirements (`super::checks`). Absent when none, so outcomes
    /// written before checks existed keep their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<super::checks::Criterion>,
    /// The newest host-observed result of each configured check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_results: Vec<super::checks::CheckResult>,
}

/// Facts computed from an outcome when it changes, so that reads and budget
/// checks never re-serialize or re-hash the outcomes a write did not touch.
/// Never an input: [`Outcome::refresh`] derives them from the fields above.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Derived {
    pub basis: Option<Digest>,
    /// The current reviews' conclusions and evidence (what a gap
    /// checkpoint binds of them).
    pub reviews: Option<Digest>,
    pub declaration_bytes: usize,
    pub review_bytes: usize,
}

/// What a basis digests. Fields in key order and no maps, so its plain JSON
/// is its canonical JSON.
#[derive(Serialize)]
struct Basis<'a> {
    linked_todos: &'a [String],
    requirements: Vec<(&'a str, &'a str)>,
}

/// The declaration part of an outcome, as its budget counts it.
#[derive(Serialize)]
struct Declaration<'a> {
    id: &'a str,
    responsible_agent: &'a str,
    original_objective: &'a str,
    requirements: &'a [Requirement],
    linked_todos: &'a [String],
    sources: &'a [Source],
    created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementInput {
    pub id: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceInput {
    #[serde(rename = "ref")]
    pub source_ref: String,
    #[serde(default)]
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewInput {
    pub requirement_id: String,
    pub conclusion: Conclusion,
    pub reasoning: String,
    #[serde(default)]
    pub evidence_refs: Vec<String>,
}

/// An outcome update document (`--goal-outcome-update-json`, `refine-outcome`).
/// An update names only what changes; creation also needs an objective and
/// a source.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeUpdate {
    pub outcome_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responsible_agent: Option<String>,
    /// The whole cumulative list as the writer intends it: it must restate
    /// every retained requirement unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Vec<RequirementInput>>,
    /// New requirements only, without restating the old ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_requirements: Vec<RequirementInput>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_todos: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceInput>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<ReviewInput>,
}

/// What a refinement adds, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefinedOutcome {
    pub outcome_id: String,
    pub created: Option<Created>,
    pub requirements: Vec<Requirement>,
    pub links: Vec<String>,
    pub sources: Vec<Source>,
    pub reviews: Vec<Review>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub responsible_agent: String,
    pub original_objective: String,
}

impl RefinedOutcome {
    pub fn is_empty(&self) -> bool {
        self.created.is_none()
            && self.requirements.is_empty()
            && self.links.is_empty()
            && self.sources.is_empty()
            && self.reviews.is_empty()
    }

    pub fn effects(&self) -> Vec<String> {
        let mut effects = Vec::new();
        let mut say = |yes: bool, effect: &str| {
            if yes {
                effects.push(effect.to_owned());
            }
        };
        say(self.created.is_some(), "outcome_created");
        say(!self.requirements.is_empty(), "requirements_added");
        say(!self.links.is_empty(), "work_linked");
        say(!self.sources.is_empty(), "sources_added");
        say(!self.reviews.is_empty(), "reviews_recorded");
        if effects.is_empty() {
            effects.push("outcome_unchanged".into());
        }
        effects
    }
}

impl Outcome {
    /// What reviews are bound to: the cumulative requirements and the
    /// linked work declarations.
    pub fn basis(&self) -> Digest {
        match &self.derived.basis {
            Some(basis) => basis.clone(),
            None => self.compute_basis(),
        }
    }

    fn compute_basis(&self) -> Digest {
        let requirements = self
            .requirements
            .iter()
            .map(|r| (r.id.as_str(), r.description.as_str()))
            .collect();
        Digest::of_ordered_json(&Basis {
            linked_todos: &self.linked_todos,
            requirements,
        })
    }

    /// The digest of the current reviews' conclusions and evidence.
    pub fn reviews_digest(&self) -> Digest {
        match &self.derived.reviews {
            Some(digest) => digest.clone(),
            None => self.compute_reviews_digest(&self.basis()),
        }
    }

    fn compute_reviews_digest(&self, basis: &Digest) -> Digest {
        let current: Vec<_> = self
            .reviews
            .iter()
            .filter(|r| &r.basis == basis)
            .map(|r| (&r.requirement_id, r.conclusion, &r.evidence_refs))
            .collect();
        Digest::of_json(&current)
    }

    /// Recompute [`Derived`] after a change.
    pub fn refresh(&mut self) {
        let basis = self.compute_basis();
        self.refresh_with(basis);
    }

    /// As [`Outcome::refresh`], with the basis already known for the
    /// outcome's current requirements and links.
    fn refresh_with(&mut self, basis: Digest) {
        let declaration = Declaration {
            id: &self.id,
            responsible_agent: &self.responsible_agent,
            original_objective: &self.original_objective,
            requirements: &self.requirements,
            linked_todos: &self.linked_todos,
            sources: &self.sources,
            created_at: self.created_at,
        };
        self.derived = Derived {
            reviews: Some(self.compute_reviews_digest(&basis)),
            basis: Some(basis),
            declaration_bytes: canonical_len(&declaration),
            review_bytes: canonical_len(&self.reviews),
        };
    }

    /// (declaration, review) bytes, from the cache when it is there.
    fn sizes(&self) -> (usize, usize) {
        if self.derived.basis.is_some() {
            (self.derived.declaration_bytes, self.derived.review_bytes)
        } else {
            let mut fresh = self.clone();
            fresh.refresh();
            (fresh.derived.declaration_bytes, fresh.derived.review_bytes)
        }
    }

    /// The review of `requirement_id` that still applies, if any.
    pub fn current_review(&self, requirement_id: &str, basis: &Digest) -> Option<&Review> {
        self.reviews
            .iter()
            .find(|r| r.requirement_id == requirement_id && &r.basis == basis)
    }
}

/// Bytes of canonical JSON the declarations and the reviews of `outcomes` take.
pub fn budget_bytes<'a>(
    goal_identity: usize,
    outcomes: impl IntoIterator<Item = &'a Outcome>,
) -> (usize, usize) {
    outcomes
        .into_iter()
        .map(Outcome::sizes)
        .fold((goal_identity, 0), |(d, r), (od, or)| (d + od, r + or))
}

fn identity_bytes(goal: &Goal) -> usize {
    canonical_json(&(&goal.goal_id, &goal.instance_id, &goal.original_objective)).len()
}

fn check_requirement(input: &RequirementInput) -> Result<(), GoalError> {
    if input.description.trim().is_empty() {
        return Err(GoalError::Invalid(format!(
            "requirement {} needs a non-empty description",
            input.id
        )));
    }
    Ok(())
}

pub fn decide(
    goal: &Goal,
    actor: &Actor,
    update: &OutcomeUpdate,
    now: Timestamp,
) -> Result<RefinedOutcome, GoalError> {
    let id = &update.outcome_id;
    let existing = goal.outcome(id);
    let responsible = match existing {
        Some(outcome) => outcome.responsible_agent.clone(),
        None => update
            .responsible_agent
            .clone()
            .unwrap_or_else(|| actor.name().to_owned()),
    };
    if let Actor::Agent(agent) = actor {
        if agent != &responsible {
            return Err(GoalError::ForeignOutcome {
                outcome_id: id.clone(),
                responsible,
                actor: agent.clone(),
            });
        }
    }
    let source = update
        .source
        .as_ref()
        .filter(|s| !s.source_ref.trim().is_empty());
    let created = match (existing, &update.objective) {
        (None, None) => {
            return Err(GoalError::NoOutcome {
                outcome_id: id.clone(),
            })
        }
        (None, Some(objective)) if objective.trim().is_empty() => {
            return Err(GoalError::EmptyObjective)
        }
        (None, Some(objective)) => {
            if source.is_none() {
                return Err(GoalError::SourceRequired {
                    what: format!("creating outcome {id}"),
                });
            }
            Some(Created {
                responsible_agent: responsible.clone(),
                original_objective: objective.clone(),
            })
        }
        (Some(outcome), Some(objective)) if objective != &outcome.original_objective => {
            return Err(GoalError::ObjectiveImmutable {
                outcome_id: id.clone(),
            })
        }
        (Some(_), _) => None,
    };
    let retained: &[Requirement] = existing.map_or(&[], |o| &o.requirements);
    let source_ref = source
        .map(|s| s.source_ref.trim().to_owned())
        .unwrap_or_default();

    let mut requirements: Vec<Requirement> = Vec::new();
    let inputs = update
        .requirements
        .iter()
        .flatten()
        .chain(&update.add_requirements);
    for input in inputs {
        check_requirement(input)?;
        let known = retained
            .iter()
            .map(|r| (&r.id, &r.description))
            .chain(requirements.iter().map(|r| (&r.id, &r.description)));
        match known.into_iter().find(|(rid, _)| *rid == &input.id) {
            Some((_, description)) if description == &input.description => continue,
            Some(_) => {
                return Err(GoalError::RequirementChanged {
                    outcome_id: id.clone(),
                    requirement_id: input.id.clone(),
                })
            }
            None if source.is_none() => {
                return Err(GoalError::SourceRequired {
                    what: format!("new requirement {}", input.id),
                })
            }
            None => requirements.push(Requirement {
                id: input.id.clone(),
                description: input.description.clone(),
                source_ref: source_ref.clone(),
                added_at: now,
            }),
        }
    }
    if let Some(restated) = &update.requirements {
        if let Some(lost) = retained
            .iter()
            .find(|r| !restated.iter().any(|i| i.id == r.id))
        {
            return Err(GoalError::RequirementLost {
                outcome_id: id.clone(),
                requirement_id: lost.id.clone(),
            });
        }
    }

    let linked: &[String] = existing.map_or(&[], |o| &o.linked_todos);
    let mut links = Vec::new();
    for todo in &update.link_todos {
        if goal.todo(todo).is_none() {
            return Err(GoalError::NoTodo { id: todo.clone() });
        }
        if !linked.contains(todo) && !links.contains(todo) {
            links.push(todo.clone());
        }
    }

    let mut sources = Vec::new();
    let known_sources: &[Source] = existing.map_or(&[], |o| &o.sources);
    if let Some(input) = source {
        if !known_sources.iter().any(|s| s.source_ref == source_ref) {
            sources.push(Source {
                source_ref: source_ref.clone(),
                summary: input.summary.trim().to_owned(),
                added_at: now,
            });
        }
    }
    let count = known_sources.len() + sources.len();
    if count > MAX_SOURCES {
        return Err(GoalError::TooManySources {
            outcome_id: id.clone(),
            count,
            limit: MAX_SOURCES,
        });
    }

    let mut refined = RefinedOutcome {
        outcome_id: id.clone(),
        created,
        requirements,
        links,
        sources,
        reviews: Vec::new(),
    };
    if refined.is_empty() && update.reviews.is_empty() {
        return Ok(refined);
    }
    // Reviews bind the outcome as it will be after this refinement.
    let mut after = existing.cloned().unwrap_or_else(|| blank(id, now));
    extend(&mut after, &refined);
    let basis = after.compute_basis();
    after.derived.basis = Some(basis.clone());
    for input in &update.reviews {
        if !after
            .requirements
            .iter()
            .any(|r| r.id == input.requirement_id)
        {
            return Err(GoalError::NoRequirement {
                outcome_id: id.clone(),
                requirement_id: input.requirement_id.clone(),
            });
        }
        let evidence: Vec<String> = input
            .evidence_refs
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
        if input.reasoning.trim().is_empty() || evidence.is_empty() {
            return Err(GoalError::ReviewNeedsEvidence {
                requirement_id: input.requirement_id.clone(),
            });
        }
        refined.reviews.push(Review {
            requirement_id: input.requirement_id.clone(),
            conclusion: input.conclusion,
            reasoning: input.reasoning.trim().to_owned(),
            evidence_refs: evidence,
            reviewed_by: actor.name().to_owned(),
            reviewed_at: now,
            basis: basis.clone(),
        });
    }
    record_reviews(&mut after, &refined.reviews);
    after.refresh_with(basis);
    check_budgets(goal, &after)?;
    Ok(refined)
}

/// Refuse a refinement whose outcome set would exceed either budget. Only
/// the changed outcome is measured; the others bring their cached sizes.
fn check_budgets(goal: &Goal, changed: &Outcome) -> Result<(), GoalError> {
    let outcomes = goal
        .outcomes
        .iter()
        .filter(|o| o.id != changed.id)
        .chain([changed]);
    let (declarations, reviews) = budget_bytes(identity_bytes(goal), outcomes);
    if declarations > DECLARATION_BUDGET {
        return Err(GoalError::BudgetExceeded {
            which: "outcome declaration",
            bytes: declarations,
            limit: DECLARATION_BUDGET,
        });
    }
    if reviews > REVIEW_BUDGET {
        return Err(GoalError::BudgetExceeded {
            which: "outcome review",
            bytes: reviews,
            limit: REVIEW_BUDGET,
        });
    }
    Ok(())
}

fn blank(id: &str, now: Timestamp) -> Outcome {
    Outcome {
        id: id.to_owned(),
        responsible_agent: String::new(),
        original_objective: String::new(),
        requirements: Vec::new(),
        linked_todos: Vec::new(),
        sources: Vec::new(),
        reviews: Vec::new(),
        created_at: now,
        derived: Derived::default(),
        checks: Vec::new(),
        check_results: Vec::new(),
    }
}

fn extend(outcome: &mut Outcome, refined: &RefinedOutcome) {
    if let Some(created) = &refined.created {
        outcome.responsible_agent = created.responsible_agent.clone();
        outcome.original_objective = created.original_objective.clone();
    }
    outcome
        .requirements
        .extend(refined.requirements.iter().cloned());
    outcome.linked_todos.extend(refined.links.iter().cloned());
    outcome.sources.extend(refined.sources.iter().cloned());
}

fn record_reviews(outcome: &mut Outcome, reviews: &[Review]) {
    for review in reviews {
        outcome
            .reviews
            .retain(|r| r.requirement_id != review.requirement_id);
        outcome.reviews.push(review.clone());
    }
    let order = |id: &str| {
        outcome
            .requirements
            .iter()
            .position(|r| r.id == id)
            .unwrap_or(usize::MAX)
    };
    let mut reviews = std::mem::take(&mut outcome.reviews);
    reviews.sort_by_key(|r| order(&r.requirement_id));
    outcome.reviews = reviews;
}

pub fn evolve(goal: &mut Goal, refined: &RefinedOutcome, at: Timestamp) {
    let index = match goal
        .outcomes
        .iter()
        .position(|o| o.id == refined.outcome_id)
    {
        Some(index) => index,
        None => {
            goal.outcomes.push(blank(&refined.outcome_id, at));
            goal.outcomes.len() - 1
        }
    };
    let outcome = &mut goal.outcomes[index];
    extend(outcome, refined);
    record_reviews(outcome, &refined.reviews);
    // Reviews are bound to the outcome as this refinement leaves it.
    match refined.reviews.first() {
        Some(review) => outcome.refresh_with(review.basis.clone()),
        None => outcome.refresh(),
    }
}
