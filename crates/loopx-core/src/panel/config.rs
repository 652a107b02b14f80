//! `panel.json`: which providers review, in which order, how long each
//! may take and how many launches one subject may cost.
//!
//! Owns: the schema (unknown keys are refused, so a typo is never a
//! silent default), its validation, the invite list ([`invite`]) and the
//! reviewer timeout ([`timeout_s`]). Does not own where the file is read
//! from or the environment (the application passes both in), nor a
//! provider's family (the provider table's, also passed in, because an
//! endpoint override in the environment changes it).

use super::{PanelProblem, Phase};
use crate::driver::provider::{self, Family};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The invite order when panel.json names no providers.
pub const DEFAULT_ORDER: [&str; 3] = ["codex", "claude", "codewhale"];

/// The launches one subject may cost per phase when panel.json says
/// nothing.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// More than this many launches for one candidate is a misconfiguration:
/// each one sends the candidate out again.
const MOST_ATTEMPTS: u32 = 20;

/// Keys `timeouts` may have: the phases'.
const TIMEOUT_KEYS: [&str; 3] = ["strategy_review", "result_review", "target_advice"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanelConfig {
    /// Whether `drive --panel auto` runs the panel.
    #[serde(default)]
    pub enabled: bool,
    /// The invite order (default [`DEFAULT_ORDER`]).
    #[serde(default)]
    pub providers: Option<Vec<String>>,
    /// Providers never invited (out of credit, say).
    #[serde(default, alias = "exclude_providers")]
    pub exclude_until_credit: Vec<String>,
    #[serde(default)]
    pub timeout_mode: TimeoutMode,
    /// Base seconds per phase.
    #[serde(default)]
    pub timeouts: BTreeMap<String, u64>,
    #[serde(default)]
    pub timeouts_by_provider: BTreeMap<String, ProviderTimeout>,
    #[serde(default)]
    pub timeout_calc: TimeoutCalc,
    /// Drop reviewers of the executor's family from the invite list.
    #[serde(default = "yes")]
    pub require_different_family: bool,
    /// Reviewer launches per phase per subject (a pending candidate).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The reference runtime's key, with its default (true). Neither it
    /// nor loopx reads it to decide anything: it is kept so its files
    /// load and say the same thing back.
    #[serde(default = "yes")]
    pub anti_deadlock_math_without_panel: bool,
}

fn yes() -> bool {
    true
}

fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}

impl Default for PanelConfig {
    fn default() -> Self {
        PanelConfig::parse(b"{}").expect("the empty panel.json is valid")
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutMode {
    /// Scaled by the brief's size and the provider, clamped.
    #[default]
    Adaptive,
    /// The same cap for every provider and brief.
    Fixed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderTimeout {
    pub mult: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutCalc {
    pub min_s: u64,
    pub max_s: u64,
    /// Brief bytes a reviewer reads in the base time; a longer brief gets
    /// proportionally more.
    pub size_free: u64,
}

impl Default for TimeoutCalc {
    fn default() -> Self {
        TimeoutCalc {
            min_s: 120,
            max_s: 2400,
            size_free: 4000,
        }
    }
}

/// The provider table's name for `name` (`codewhale` is `deepseek`).
fn canonical(name: &str) -> Option<&'static str> {
    provider::find(name.trim()).map(|p| p.name)
}

fn known_list() -> String {
    let mut names = provider::names();
    names.push("codewhale");
    names.join(", ")
}

fn bad(message: String) -> PanelProblem {
    PanelProblem::Config(message)
}

impl PanelConfig {
    /// Parse and validate the bytes of a panel.json.
    pub fn parse(bytes: &[u8]) -> Result<PanelConfig, PanelProblem> {
        let config: PanelConfig = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), PanelProblem> {
        let named = self
            .providers
            .iter()
            .flatten()
            .chain(&self.exclude_until_credit)
            .chain(self.timeouts_by_provider.keys());
        for name in named {
            if canonical(name).is_none() {
                return Err(PanelProblem::UnknownProvider {
                    name: name.clone(),
                    known: known_list(),
                });
            }
        }
        if self.providers.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad("\"providers\" is empty: name at least one reviewer, or leave the key out for the default order (codex, claude, codewhale)".into()));
        }
        for (key, seconds) in &self.timeouts {
            if !TIMEOUT_KEYS.contains(&key.as_str()) {
                return Err(bad(format!(
                    "\"timeouts\" has key {key:?}; the phases are {}",
                    TIMEOUT_KEYS.join(", ")
                )));
            }
            if *seconds == 0 {
                return Err(bad(format!("\"timeouts\".{key} must be at least 1 second")));
            }
        }
        for (name, each) in &self.timeouts_by_provider {
            if !(each.mult.is_finite() && each.mult > 0.0 && each.mult <= 100.0) {
                return Err(bad(format!(
                    "\"timeouts_by_provider\".{name}.mult is {}: use a number above 0 and at most 100",
                    each.mult
                )));
            }
        }
        let calc = &self.timeout_calc;
        if calc.min_s == 0 || calc.min_s > calc.max_s || calc.size_free == 0 {
            return Err(bad(format!(
                "\"timeout_calc\" needs 1 <= min_s <= max_s and size_free >= 1 (got min_s {}, max_s {}, size_free {})",
                calc.min_s, calc.max_s, calc.size_free
            )));
        }
        if !(1..=MOST_ATTEMPTS).contains(&self.max_attempts) {
            return Err(bad(format!(
                "\"max_attempts\" is {}: use 1 to {MOST_ATTEMPTS}",
                self.max_attempts
            )));
        }
        Ok(())
    }

    /// The base seconds of `phase`.
    pub fn base_s(&self, phase: Phase) -> u64 {
        self.timeouts
            .get(phase.name())
            .copied()
            .unwrap_or(phase.default_timeout_s())
    }

    fn mult(&self, reviewer: &str) -> f64 {
        let wanted = canonical(reviewer);
        self.timeouts_by_provider
            .iter()
            .find(|(name, _)| canonical(name) == wanted)
            .map_or(1.0, |(_, t)| t.mult)
    }
}

/// Who reviews, in order, and who was left out and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invitation {
    pub invited: Vec<String>,
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub provider: String,
    pub reason: String,
}

impl Invitation {
    /// The skip reasons in one line, for an error that nobody is invited.
    pub fn why_nobody(&self) -> String {
        if self.skipped.is_empty() {
            return "the invite list is empty".into();
        }
        self.skipped
            .iter()
            .map(|s| format!("{} ({})", s.provider, s.reason))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The reviewers to invite for an executor of `executor` family:
/// `env_providers` ([`super::PROVIDERS_ENV`]) if set, else panel.json's
/// providers, else [`DEFAULT_ORDER`]; each once; excluded ones removed;
/// the executor's family removed when `require_different_family`; and in
/// enforce mode every provider whose family is unverified (`family_of`
/// says so for gateways and for any provider under an endpoint override).
pub fn invite(
    config: &PanelConfig,
    env_providers: Option<&str>,
    executor: Family,
    family_of: impl Fn(&str) -> Family,
    enforce: bool,
) -> Result<Invitation, PanelProblem> {
    let order: Vec<String> = match env_providers.filter(|v| !v.trim().is_empty()) {
        Some(list) => {
            let names: Vec<String> = list
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            if let Some(name) = names.iter().find(|n| canonical(n).is_none()) {
                return Err(PanelProblem::UnknownEnvProvider {
                    name: name.clone(),
                    known: known_list(),
                });
            }
            names
        }
        None => match &config.providers {
            Some(names) => names.iter().map(|n| n.trim().to_owned()).collect(),
            None => DEFAULT_ORDER.map(str::to_owned).to_vec(),
        },
    };
    let excluded: Vec<_> = config
        .exclude_until_credit
        .iter()
        .filter_map(|n| canonical(n))
        .collect();
    let mut seen = Vec::new();
    let mut invitation = Invitation {
        invited: Vec::new(),
        skipped: Vec::new(),
    };
    for name in order {
        let Some(id) = canonical(&name) else { continue };
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let family = family_of(&name);
        let reason = if excluded.contains(&id) {
            Some("excluded in exclude_until_credit".to_owned())
        } else if enforce && family == Family::Unverified {
            Some("no verified family (a gateway, or an endpoint override is set): enforce mode fails closed".to_owned())
        } else if config.require_different_family && family == executor {
            Some(format!("the executor's own family ({})", family.name()))
        } else {
            None
        };
        match reason {
            Some(reason) => invitation.skipped.push(Skipped {
                provider: name,
                reason,
            }),
            None => invitation.invited.push(name),
        }
    }
    Ok(invitation)
}

/// How much longer than its slowest recent decisive review a reviewer
/// gets, at least, in adaptive mode.
pub const RECENT_HEADROOM: f64 = 2.0;

/// The seconds `reviewer` gets for a brief of `brief_bytes` in `phase`,
/// knowing how long its recent decisive reviews there took
/// (`recent_success_ms`, from the attempt ledger).
///
/// Fixed mode: `--timeout` if given, else the phase's base, for everyone.
/// Adaptive mode: the base is the phase's, raised to `--timeout` when that
/// is larger (a floor, not a cap); scaled by how many times the brief
/// exceeds `size_free` bytes and by the provider's `mult`; raised to
/// [`RECENT_HEADROOM`] times the slowest recent decisive review, so that a
/// provider that has shown it needs longer is not killed just short of
/// answering (never lowered by a fast one: one quick answer says little
/// about the next); then clamped to `min_s`..=`max_s`.
pub fn timeout_s(
    config: &PanelConfig,
    phase: Phase,
    reviewer: &str,
    cli_timeout: Option<u64>,
    brief_bytes: usize,
    recent_success_ms: &[u64],
) -> u64 {
    let base = config.base_s(phase);
    match config.timeout_mode {
        TimeoutMode::Fixed => cli_timeout.unwrap_or(base).max(1),
        TimeoutMode::Adaptive => {
            let calc = &config.timeout_calc;
            let base = base.max(cli_timeout.unwrap_or(0));
            let size = (brief_bytes as f64 / calc.size_free as f64).max(1.0);
            let scaled = (base as f64 * size * config.mult(reviewer)).ceil();
            let slowest_s = recent_success_ms
                .iter()
                .max()
                .map_or(0.0, |&ms| ms as f64 / 1000.0);
            let needed = (slowest_s * RECENT_HEADROOM).ceil();
            // `as` saturates: a huge product is clamped below like any other.
            (scaled.max(needed) as u64).clamp(calc.min_s, calc.max_s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anti_deadlock_math_without_panel_defaults_to_true_as_the_reference_does() {
        assert!(PanelConfig::default().anti_deadlock_math_without_panel);
        let off = PanelConfig::parse(br#"{"anti_deadlock_math_without_panel": false}"#).unwrap();
        assert!(!off.anti_deadlock_math_without_panel);
        let timed = PanelConfig::parse(br#"{"timeouts": {"target_advice": 30}}"#).unwrap();
        assert_eq!(timed.base_s(Phase::TargetAdvice), 30);
    }

    fn config(json: &str) -> PanelConfig {
        PanelConfig::parse(json.as_bytes()).unwrap()
    }

    fn refused(json: &str) -> String {
        PanelConfig::parse(json.as_bytes()).unwrap_err().to_string()
    }

    fn table(name: &str) -> Family {
        provider::find(name).map_or(Family::Unverified, |p| p.family)
    }

    #[test]
    fn the_reference_example_loads_and_typos_do_not() {
        let example = r#"{
          "enabled": true,
          "providers": ["claude", "codex", "codewhale"],
          "exclude_until_credit": [],
          "timeout_mode": "adaptive",
          "timeouts": {"target_advice": 600, "result_review": 900},
          "timeouts_by_provider": {"kimi": {"mult": 1.5}},
          "timeout_calc": {"min_s": 120, "max_s": 2400, "size_free": 4000},
          "require_different_family": true,
          "anti_deadlock_math_without_panel": true
        }"#;
        let c = config(example);
        assert!(c.enabled);
        assert_eq!(c.max_attempts, 3);
        assert_eq!(c.base_s(Phase::ResultReview), 900);
        assert_eq!(c.base_s(Phase::StrategyReview), 600);
        assert!(refused(r#"{"max_atempts": 3}"#).contains("max_atempts"));
        assert!(refused(r#"{"timeout_calc": {"min": 1}}"#).contains("min"));
        assert!(refused(r#"{"providers": ["claud"]}"#).contains("\"claud\""));
        assert!(refused(r#"{"providers": []}"#).contains("empty"));
        assert!(refused(r#"{"timeouts": {"review": 5}}"#).contains("review"));
        assert!(refused(r#"{"max_attempts": 0}"#).contains("max_attempts"));
        assert!(refused(r#"{"timeout_calc": {"min_s": 50, "max_s": 10}}"#).contains("min_s"));
        assert!(refused(r#"{"timeouts_by_provider": {"codex": {"mult": -1}}}"#).contains("mult"));
        let alias = config(r#"{"exclude_providers": ["claude"]}"#);
        assert_eq!(alias.exclude_until_credit, ["claude"]);
    }

    #[test]
    fn the_invite_list_drops_the_excluded_the_executors_family_and_the_unverified() {
        let default = PanelConfig::default();
        let invited = |c: &PanelConfig, env: Option<&str>, executor: Family| {
            invite(c, env, executor, table, true).unwrap().invited
        };
        assert_eq!(
            invited(&default, None, Family::Google),
            ["codex", "claude", "codewhale"]
        );
        assert_eq!(
            invited(&default, None, Family::Anthropic),
            ["codex", "codewhale"]
        );
        let excluded = config(r#"{"exclude_until_credit": ["deepseek"]}"#);
        assert_eq!(invited(&excluded, None, Family::Anthropic), ["codex"]);
        // The session's list wins over the file, aliases count once.
        assert_eq!(
            invited(
                &default,
                Some("claude, kimi,codewhale,deepseek"),
                Family::Openai
            ),
            ["claude", "codewhale"]
        );
        let why = invite(&default, Some("kimi"), Family::Openai, table, true).unwrap();
        assert!(why.invited.is_empty());
        assert!(
            why.why_nobody().contains("kimi (no verified family"),
            "{}",
            why.why_nobody()
        );
        assert!(invite(&default, Some("claud"), Family::Openai, table, true).is_err());
        // An endpoint override makes every family unverified: nobody.
        let overridden = invite(
            &default,
            None,
            Family::Anthropic,
            |_| Family::Unverified,
            true,
        );
        assert!(overridden.unwrap().invited.is_empty());
        // Same family kept only when the file says so.
        let same = config(r#"{"require_different_family": false, "providers": ["claude"]}"#);
        assert_eq!(invited(&same, None, Family::Anthropic), ["claude"]);
    }

    #[test]
    fn the_adaptive_timeout_scales_by_size_and_provider_and_is_clamped() {
        let c = config(
            r#"{"timeouts": {"result_review": 300},
                "timeouts_by_provider": {"codewhale": {"mult": 1.5}},
                "timeout_calc": {"min_s": 200, "max_s": 1000, "size_free": 1000}}"#,
        );
        let t = |reviewer: &str, cli: Option<u64>, bytes: usize| {
            timeout_s(&c, Phase::ResultReview, reviewer, cli, bytes, &[])
        };
        // A small brief gets the base.
        assert_eq!(t("codex", None, 10), 300);
        // Twice size_free: twice the base.
        assert_eq!(t("codex", None, 2000), 600);
        // The provider's multiplier, by alias too.
        assert_eq!(t("deepseek", None, 10), 450);
        // --timeout raises the base, never lowers it.
        assert_eq!(t("codex", Some(400), 10), 400);
        assert_eq!(t("codex", Some(5), 10), 300);
        // Clamped at both ends.
        assert_eq!(t("codex", None, 1_000_000), 1000);
        let short = config(
            r#"{"timeouts": {"result_review": 10}, "timeout_calc": {"min_s": 60, "max_s": 100}}"#,
        );
        assert_eq!(
            timeout_s(&short, Phase::ResultReview, "codex", None, 0, &[]),
            60
        );
        // The strategy phase has its own default base.
        assert_eq!(
            timeout_s(&c, Phase::StrategyReview, "codex", None, 0, &[]),
            600
        );
    }

    #[test]
    fn a_provider_that_was_slow_lately_gets_twice_its_slowest_review() {
        let c = config(
            r#"{"timeouts": {"result_review": 300},
                "timeout_calc": {"min_s": 200, "max_s": 1000, "size_free": 1000}}"#,
        );
        let t = |recent: &[u64]| timeout_s(&c, Phase::ResultReview, "codex", None, 10, recent);
        assert_eq!(t(&[]), 300);
        // Fast reviews never lower the budget below what size and mult give.
        assert_eq!(t(&[1_000, 2_000]), 300);
        // The slowest of the recent ones, twice over, rounded up.
        assert_eq!(t(&[100_000, 240_600, 30_000]), 482);
        // Still clamped.
        assert_eq!(t(&[900_000]), 1000);
        let fixed = config(r#"{"timeout_mode": "fixed"}"#);
        assert_eq!(
            timeout_s(&fixed, Phase::ResultReview, "codex", None, 10, &[1_900_000]),
            900
        );
    }

    #[test]
    fn the_fixed_timeout_is_the_same_for_everyone() {
        let c =
            config(r#"{"timeout_mode": "fixed", "timeouts_by_provider": {"claude": {"mult": 3}}}"#);
        assert_eq!(
            timeout_s(&c, Phase::ResultReview, "claude", None, 100_000, &[]),
            900
        );
        assert_eq!(
            timeout_s(&c, Phase::ResultReview, "codex", Some(2), 100_000, &[]),
            2
        );
    }
}
