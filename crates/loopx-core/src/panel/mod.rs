//! The review panel: different-family reviewers the host runs as child
//! processes to decide what an agent could not decide about itself.
//!
//! Owns, as pure rules: `panel.json` and who is invited in which order
//! ([`config`]), how long each reviewer may take ([`config::timeout_s`]),
//! how many reviewer launches one pending candidate may cost, persisted as
//! a stream ([`attempts`]), what a reviewer is told and how its answer is
//! read back ([`brief`]), whether state may leave the host at all
//! ([`consent`]) and whether `drive` runs the panel ([`Switch`]); and the
//! legacy target-advice phase's brief and synthesis ([`advice`]).
//!
//! Not here: the processes (the binary's `drive/reviewer.rs`), the files
//! and the environment (`loopx_app::panel`), and what a review must say to
//! bank a candidate (`crate::focus::review::judge`, the one judge every
//! review goes through, whoever brings it).

pub mod advice;
pub mod attempts;
pub mod brief;
pub mod config;
pub mod merge;

pub use config::PanelConfig;

use crate::ledger::vocabulary::GoalFocusMode;
use serde::{Deserialize, Serialize};

/// The panel's configuration file, in the loop directory.
pub const FILE: &str = "panel.json";

/// Consent to send a loop's state (the goal, the candidate and its
/// evidence) to an external reviewer. Enforce mode spawns no reviewer
/// without it.
pub const EGRESS_ENV: &str = "AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS";

/// `on` or `off`: what `drive --panel auto` does, whatever panel.json says.
pub const PANEL_ENV: &str = "AAS_AUTOLOOP_PANEL";

/// A comma-separated invite list that overrides panel.json for a session.
pub const PROVIDERS_ENV: &str = "AAS_AUTOLOOP_PANEL_PROVIDERS";

/// One kind of review the panel performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A direction commit's review (`strategy_advice.v1`).
    StrategyReview,
    /// A staged candidate's review (`result_review.v1`).
    ResultReview,
    /// Free-text advice on the next path before a turn, for loops Goal
    /// Focus does not enforce (the legacy flow; [`advice`]).
    TargetAdvice,
    /// A worker's merged change before the merge queue lands it
    /// (`merge_review.v1`; [`merge`]).
    MergeReview,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::StrategyReview => "strategy_review",
            Phase::ResultReview => "result_review",
            Phase::TargetAdvice => "target_advice",
            Phase::MergeReview => "merge_review",
        }
    }

    /// The time a reviewer gets in this phase when panel.json says nothing.
    pub fn default_timeout_s(self) -> u64 {
        match self {
            Phase::StrategyReview | Phase::TargetAdvice => 600,
            Phase::ResultReview | Phase::MergeReview => 900,
        }
    }
}

/// Whether state may be sent to external reviewers in `mode`, given the
/// value of [`EGRESS_ENV`]. Enforce mode needs exactly `allow`: consent is
/// never assumed.
pub fn consent(mode: GoalFocusMode, value: Option<&str>) -> Result<(), PanelProblem> {
    match mode {
        GoalFocusMode::Enforce if value != Some("allow") => Err(PanelProblem::NoConsent),
        _ => Ok(()),
    }
}

/// `drive --panel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    On,
    Auto,
    Off,
}

impl Switch {
    /// Whether the panel runs: `auto` follows [`PANEL_ENV`] when it says
    /// `on` or `off`, and otherwise panel.json's `enabled` (no file: off).
    pub fn resolve(self, env: Option<&str>, config: Option<&PanelConfig>) -> bool {
        match self {
            Switch::On => true,
            Switch::Off => false,
            Switch::Auto => match env.map(str::trim) {
                Some("on") => true,
                Some("off") => false,
                _ => config.is_some_and(|c| c.enabled),
            },
        }
    }
}

/// Why the panel cannot run or a reviewer's answer cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PanelProblem {
    #[error("{FILE} is not valid: {0}")]
    Config(String),
    #[error(
        "{FILE} names provider {name:?}, which the provider table does not know; known: {known}"
    )]
    UnknownProvider { name: String, known: String },
    #[error("{PROVIDERS_ENV} names provider {name:?}, which the provider table does not know; known: {known}")]
    UnknownEnvProvider { name: String, known: String },
    #[error("the loop is in Goal Focus enforce mode and {EGRESS_ENV}=allow is not set: a reviewer would receive the candidate and its evidence, so no reviewer is started without that consent; set {EGRESS_ENV}=allow to send it")]
    NoConsent,
    #[error("no reviewer can be invited: {0}")]
    NobodyInvited(String),
    #[error("{phase} of {subject} already used its {max} attempts and every invited reviewer was tried on it: no reviewer is started again for it; a person decides (`loopx goal-focus review --file REVIEW.json`, or `loopx goal-focus quarantine`)")]
    Exhausted {
        phase: &'static str,
        subject: String,
        max: u32,
    },
    #[error("attempt {given} of {phase} is out of turn (the next is {next}): another panel run is working on it")]
    OutOfTurn {
        phase: &'static str,
        given: u32,
        next: u32,
    },
    #[error("attempt {attempt} of {phase} was not started, or already finished")]
    NotStarted { phase: &'static str, attempt: u32 },
    #[error("the reviewer's output holds no {schema} JSON object")]
    NoDocument { schema: &'static str },
    #[error("the reviewer's {schema} object is malformed: {problem}")]
    Malformed {
        schema: &'static str,
        problem: String,
    },
    #[error("the reviewer's brief is {bytes} bytes, more than the {limit} one argv word may hold: stage less evidence (or smaller files) for the panel to review it, or have a person review it (`loopx goal-focus review --file REVIEW.json`)")]
    BriefTooLarge { bytes: usize, limit: usize },
    #[error("the review says it was written by {claimed:?}, but the host ran {ran:?}: a reviewer is attributed by what the host launched, never by what it says")]
    Misattributed { claimed: String, ran: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforce_mode_needs_exactly_allow() {
        assert_eq!(
            consent(GoalFocusMode::Enforce, None),
            Err(PanelProblem::NoConsent)
        );
        assert_eq!(
            consent(GoalFocusMode::Enforce, Some("yes")),
            Err(PanelProblem::NoConsent)
        );
        assert_eq!(consent(GoalFocusMode::Enforce, Some("allow")), Ok(()));
        assert_eq!(consent(GoalFocusMode::Monitor, None), Ok(()));
    }

    #[test]
    fn auto_follows_the_environment_then_the_file() {
        let enabled = PanelConfig::parse(br#"{"enabled": true}"#).unwrap();
        let disabled = PanelConfig::parse(b"{}").unwrap();
        assert!(Switch::Auto.resolve(None, Some(&enabled)));
        assert!(!Switch::Auto.resolve(None, Some(&disabled)));
        assert!(!Switch::Auto.resolve(None, None));
        assert!(Switch::Auto.resolve(Some("on"), None));
        assert!(!Switch::Auto.resolve(Some("off"), Some(&enabled)));
        assert!(Switch::On.resolve(Some("off"), None));
        assert!(!Switch::Off.resolve(Some("on"), Some(&enabled)));
    }
}
