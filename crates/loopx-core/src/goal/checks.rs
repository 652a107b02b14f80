//! Executable checks: commands the goal's owner configures on an outcome's
//! requirements, which the host (never the agent) runs, and whose results
//! are independent evidence, apart from the agent's self-assessment.
//!
//! Owns: the configuration document (`{outcome_id, criteria: [{id,
//! validation_argv, timeout_seconds?, cwd?}]}`, each criterion's `id` one
//! of the outcome's requirement ids, kept byte for byte, `:` and `@`
//! included), its checks, the proposal `prepare-checks` shows (the
//! resolved outcome and each argv, bound to the outcome's basis, which
//! `apply-checks` must still match), what a result records, and when a
//! result is current: for the argv it ran ([`Criterion::argv_digest`]) and
//! the project HEAD it ran against. A configured requirement takes its
//! state from its current result alone ([`configured_state`]); a review
//! cannot stand in for it, and closing a todo supplies nothing.
//!
//! Not here: who may configure (the owner's `decide`: the goal's owner
//! only), running a command (the application's runner), reading HEAD.

use super::outcome::Outcome;
use super::GoalError;
use crate::digest::Digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Criteria one outcome may carry.
pub const MAX_CRITERIA: usize = 16;
/// Words one argv may have, and bytes each word may hold.
pub const MAX_ARGV_WORDS: usize = 64;
pub const MAX_ARGV_WORD_BYTES: usize = 4096;
/// A check's timeout when the criterion names none, and the longest one.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;
/// The part of a check's output a result keeps (the whole output's digest
/// is kept beside it).
pub const EXCERPT_CHARS: usize = 1024;

/// One configured check: run `validation_argv` (no shell) in the project
/// root, or in `cwd` below it, within `timeout_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// The requirement it checks, exactly as the outcome spells it.
    pub id: String,
    pub validation_argv: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Relative to the project root; never above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

impl Criterion {
    /// What a result is bound to: the argv, the directory and the timeout.
    pub fn argv_digest(&self) -> Digest {
        Digest::of_json(&(&self.validation_argv, &self.cwd, self.timeout_seconds))
    }
}

/// The configuration document, as an operator writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    pub outcome_id: String,
    pub criteria: Vec<Criterion>,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Exited 0.
    Pass,
    /// Exited non-zero.
    Fail,
    /// Could not run, was killed at its timeout, or died by a signal.
    Error,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Fail => "fail",
            CheckStatus::Error => "error",
        }
    }
}

/// What the host observed running one criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub criterion_id: String,
    pub status: CheckStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Of the whole (redacted) output.
    pub output_digest: Digest,
    /// Its start, redacted, at most [`EXCERPT_CHARS`] characters.
    pub excerpt: String,
    /// Its whole (bounded) output, relative to the loop directory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
    /// [`Criterion::argv_digest`] of what ran.
    pub argv_digest: Digest,
    /// The project's HEAD commit it ran against (none outside git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    pub ran_at: Timestamp,
    /// Who asked for the run (`owner`, `driver`, `verify`, or an agent's
    /// request through MCP): attribution, not authority; the argv is the
    /// owner's either way.
    pub ran_by: String,
}

/// Where a configured criterion stands for a given HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    Passed,
    Failed,
    /// Its last run could not decide (an error, a timeout).
    Errored,
    /// Its last result ran another argv or against another HEAD.
    Stale,
    NeverRun,
}

impl CheckState {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Passed => "passed",
            CheckState::Failed => "failed",
            CheckState::Errored => "errored",
            CheckState::Stale => "stale",
            CheckState::NeverRun => "never_run",
        }
    }

    pub fn met(self) -> bool {
        self == CheckState::Passed
    }
}

/// The latest result of `criterion` on `outcome`, judged against `head`
/// (`None`: HEAD not considered, as planning reads it).
pub fn state(outcome: &Outcome, criterion: &Criterion, head: Option<Option<&str>>) -> CheckState {
    let Some(result) = (outcome.check_results.iter()).find(|r| r.criterion_id == criterion.id)
    else {
        return CheckState::NeverRun;
    };
    let other_head = head.is_some_and(|head| result.head.as_deref() != head);
    if result.argv_digest != criterion.argv_digest() || other_head {
        return CheckState::Stale;
    }
    match result.status {
        CheckStatus::Pass => CheckState::Passed,
        CheckStatus::Fail => CheckState::Failed,
        CheckStatus::Error => CheckState::Errored,
    }
}

/// The state the configured check gives `requirement_id`, or `None` when
/// no check is configured on it (its review decides then).
pub fn configured_state(outcome: &Outcome, requirement_id: &str) -> Option<CheckState> {
    (outcome.checks.iter())
        .find(|c| c.id == requirement_id)
        .map(|c| state(outcome, c, None))
}

/// `config` checked against the goal's outcome: every id names one of its
/// requirements, once; every argv is a program and bounded words; every
/// `cwd` stays below the project root; the timeout is within bounds.
pub fn validate(config: &CheckConfig, outcome: &Outcome) -> Result<(), GoalError> {
    let invalid = |why: String| GoalError::ChecksInvalid {
        outcome_id: outcome.id.clone(),
        why,
    };
    if config.criteria.len() > MAX_CRITERIA {
        return Err(invalid(format!(
            "{} criteria; at most {MAX_CRITERIA}",
            config.criteria.len()
        )));
    }
    for (index, c) in config.criteria.iter().enumerate() {
        if !outcome.requirements.iter().any(|r| r.id == c.id) {
            return Err(invalid(format!(
                "criterion {:?} names no requirement of the outcome (its ids: {})",
                c.id,
                outcome
                    .requirements
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if config.criteria[..index].iter().any(|o| o.id == c.id) {
            return Err(invalid(format!("criterion {:?} is configured twice", c.id)));
        }
        match c.validation_argv.first() {
            None => {
                return Err(invalid(format!(
                    "criterion {:?} has an empty validation_argv",
                    c.id
                )))
            }
            Some(program) if program.trim().is_empty() => {
                return Err(invalid(format!("criterion {:?} names no program", c.id)))
            }
            Some(_) => {}
        }
        if c.validation_argv.len() > MAX_ARGV_WORDS {
            return Err(invalid(format!(
                "criterion {:?} has {} argv words; at most {MAX_ARGV_WORDS}",
                c.id,
                c.validation_argv.len()
            )));
        }
        if let Some(word) =
            (c.validation_argv.iter()).find(|w| w.len() > MAX_ARGV_WORD_BYTES || w.contains('\0'))
        {
            return Err(invalid(format!(
                "criterion {:?} has an argv word of {} bytes or with a NUL (at most {MAX_ARGV_WORD_BYTES} bytes, no NUL)",
                c.id,
                word.len()
            )));
        }
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&c.timeout_seconds) {
            return Err(invalid(format!(
                "criterion {:?} has timeout_seconds {}; it must be 1 to {MAX_TIMEOUT_SECONDS}",
                c.id, c.timeout_seconds
            )));
        }
        if let Some(cwd) = &c.cwd {
            let below = !cwd.is_empty()
                && !cwd.starts_with('/')
                && !cwd.contains('\0')
                && cwd.split('/').all(|part| part != "..");
            if !below {
                return Err(invalid(format!(
                    "criterion {:?} has cwd {cwd:?}: it must be a relative path below the project root, without `..`",
                    c.id
                )));
            }
        }
    }
    Ok(())
}

/// What `prepare-checks` shows and `apply-checks` binds to: the outcome as
/// the owner resolved it, and each criterion with the requirement it checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Proposal {
    pub outcome_id: String,
    pub objective: String,
    pub responsible_agent: String,
    pub requirements: Vec<ProposedRequirement>,
    pub linked_todos: Vec<String>,
    pub criteria: Vec<Criterion>,
    /// The outcome's requirements and linked work as read: `apply-checks`
    /// refuses when they have changed since.
    pub basis: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposedRequirement {
    pub id: String,
    pub description: String,
    /// The check configured on it by this proposal, if any.
    pub checked: bool,
}

/// The proposal for `config` on `outcome`, after [`validate`].
pub fn propose(config: &CheckConfig, outcome: &Outcome) -> Result<Proposal, GoalError> {
    validate(config, outcome)?;
    Ok(Proposal {
        outcome_id: outcome.id.clone(),
        objective: outcome.original_objective.clone(),
        responsible_agent: outcome.responsible_agent.clone(),
        requirements: (outcome.requirements.iter())
            .map(|r| ProposedRequirement {
                id: r.id.clone(),
                description: r.description.clone(),
                checked: config.criteria.iter().any(|c| c.id == r.id),
            })
            .collect(),
        linked_todos: outcome.linked_todos.clone(),
        criteria: config.criteria.clone(),
        basis: outcome.basis(),
    })
}

/// The results after recording `fresh`: one per configured criterion, the
/// newest; results of criteria no longer configured are dropped.
pub fn merged(outcome: &Outcome, fresh: &[CheckResult]) -> Vec<CheckResult> {
    (outcome.checks.iter())
        .filter_map(|c| {
            (fresh.iter())
                .find(|r| r.criterion_id == c.id)
                .or_else(|| {
                    outcome
                        .check_results
                        .iter()
                        .find(|r| r.criterion_id == c.id)
                })
                .cloned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::outcome::Requirement;

    fn outcome() -> Outcome {
        let mut o = Outcome {
            id: "o1".into(),
            responsible_agent: "a".into(),
            original_objective: "ship".into(),
            requirements: ["tests:unit@v1", "docs"]
                .iter()
                .map(|id| Requirement {
                    id: (*id).into(),
                    description: format!("{id} holds"),
                    source_ref: "req".into(),
                    added_at: Timestamp::UNIX_EPOCH,
                })
                .collect(),
            linked_todos: vec![],
            sources: vec![],
            reviews: vec![],
            created_at: Timestamp::UNIX_EPOCH,
            derived: Default::default(),
            checks: vec![],
            check_results: vec![],
        };
        o.refresh();
        o
    }

    fn criterion(id: &str, argv: &[&str]) -> Criterion {
        Criterion {
            id: id.into(),
            validation_argv: argv.iter().map(|w| (*w).into()).collect(),
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            cwd: None,
        }
    }

    fn config(criteria: Vec<Criterion>) -> CheckConfig {
        CheckConfig {
            outcome_id: "o1".into(),
            criteria,
        }
    }

    #[test]
    fn ids_keep_their_exact_identity_and_must_name_a_requirement() {
        let o = outcome();
        let ok = propose(
            &config(vec![criterion("tests:unit@v1", &["cargo", "test"])]),
            &o,
        )
        .unwrap();
        assert_eq!(ok.criteria[0].id, "tests:unit@v1");
        assert!(ok.requirements[0].checked && !ok.requirements[1].checked);
        assert_eq!(ok.basis, o.basis());
        for bad in [
            config(vec![criterion("tests:unit", &["true"])]),
            config(vec![criterion("docs", &[])]),
            config(vec![
                criterion("docs", &["true"]),
                criterion("docs", &["true"]),
            ]),
            config(vec![Criterion {
                cwd: Some("../elsewhere".into()),
                ..criterion("docs", &["true"])
            }]),
            config(vec![Criterion {
                cwd: Some("/etc".into()),
                ..criterion("docs", &["true"])
            }]),
            config(vec![Criterion {
                timeout_seconds: 0,
                ..criterion("docs", &["true"])
            }]),
        ] {
            assert!(
                matches!(validate(&bad, &o), Err(GoalError::ChecksInvalid { .. })),
                "{bad:?}"
            );
        }
    }

    fn result(c: &Criterion, status: CheckStatus, head: Option<&str>) -> CheckResult {
        CheckResult {
            criterion_id: c.id.clone(),
            status,
            exit_code: Some(0),
            duration_ms: 1,
            output_digest: Digest::of_bytes(b""),
            excerpt: String::new(),
            log: String::new(),
            argv_digest: c.argv_digest(),
            head: head.map(str::to_owned),
            ran_at: Timestamp::UNIX_EPOCH,
            ran_by: "owner".into(),
        }
    }

    #[test]
    fn a_result_is_current_only_for_its_argv_and_head() {
        let mut o = outcome();
        let c = criterion("docs", &["make", "docs"]);
        o.checks = vec![c.clone()];
        assert_eq!(configured_state(&o, "docs"), Some(CheckState::NeverRun));
        assert_eq!(configured_state(&o, "tests:unit@v1"), None);
        o.check_results = merged(&o, &[result(&c, CheckStatus::Pass, Some("abc"))]);
        assert_eq!(configured_state(&o, "docs"), Some(CheckState::Passed));
        assert_eq!(state(&o, &c, Some(Some("abc"))), CheckState::Passed);
        // The agent committed: the pass is stale until a run on the new HEAD.
        assert_eq!(state(&o, &c, Some(Some("def"))), CheckState::Stale);
        // The owner changed the argv: stale too.
        let changed = criterion("docs", &["make", "all"]);
        o.checks = vec![changed.clone()];
        assert_eq!(state(&o, &changed, None), CheckState::Stale);
        o.check_results = merged(&o, &[result(&changed, CheckStatus::Fail, Some("def"))]);
        assert_eq!(configured_state(&o, "docs"), Some(CheckState::Failed));
        assert_eq!(o.check_results.len(), 1);
    }
}
