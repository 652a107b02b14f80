//! Legacy goal priority (`goal_priority.v1`): an optional, advisory
//! discipline that keeps each turn pointed at the goal.
//!
//! One owner for the whole rule: how the loop's `goal_priority.json` is
//! read as data ([`parse`]), how it combines with the
//! `AAS_AUTOLOOP_GOAL_PRIORITY` switch ([`resolve`]), the streak of local
//! work without a goal delta ([`streak`]), the validation warnings
//! ([`warnings`]) and the turn prompt's section ([`section`]). No IO: the
//! application reads the file and the environment and passes them in.
//!
//! v1 only advises. It never refuses an append, never stops a loop and
//! never stands in for Goal Focus v2: a loop whose Goal Focus enforces
//! gets no goal-priority section at all.

use super::record::IterationRecord;
use crate::goal::task_body::clip;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The file in the loop directory.
pub const FILE: &str = "goal_priority.json";
/// The switch: `off` disables; `on` enables a loop that has a config.
pub const ENV: &str = "AAS_AUTOLOOP_GOAL_PRIORITY";
/// The file is refused past this size.
pub const MAX_BYTES: u64 = 64 * 1024;
/// The one schema version this reader knows.
pub const SCHEMA: &str = "goal_priority.v1";
/// The streak cap when the config names none.
pub const DEFAULT_CAP: u64 = 3;

/// How loudly an active config speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discipline {
    /// Validation warnings only; the prompt is unchanged.
    #[default]
    Soft,
    /// The prompt carries the goal text and the warnings.
    Advise,
    /// As advise, worded as the operator's standing requirement (v1 still
    /// refuses nothing).
    Hard,
}

impl Discipline {
    pub fn as_str(self) -> &'static str {
        match self {
            Discipline::Soft => "soft",
            Discipline::Advise => "advise",
            Discipline::Hard => "hard",
        }
    }
}

/// One campaign the config describes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Campaign {
    pub objective: String,
    pub entry_condition: String,
    pub non_goals: Vec<String>,
}

/// `goal_priority.json` as written. Fields it does not know are kept out
/// (ignored), so a newer writer's extras do not break an older reader;
/// a known field of the wrong type is an error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub schema_version: Option<String>,
    pub enabled: Option<bool>,
    pub discipline_mode: Option<Discipline>,
    pub primary_campaign: String,
    pub primary_objective: String,
    pub campaign_registry: BTreeMap<String, Campaign>,
    pub closed_campaigns: Vec<String>,
    pub next_campaigns_ordered: Vec<String>,
    pub max_consecutive_local_without_goal_delta: Option<u64>,
    pub local_without_goal_delta_tags: Option<Vec<String>>,
    pub require_goal_contribution_in_ledger: Option<bool>,
}

/// Read the file's bytes as a config, or say what is wrong with them.
pub fn parse(bytes: &[u8]) -> Result<Config, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?;
    if !value.is_object() {
        return Err("it must hold one JSON object".into());
    }
    let config: Config = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if let Some(version) = &config.schema_version {
        if version != SCHEMA {
            return Err(format!(
                "schema_version is {version:?}; this loopx reads {SCHEMA:?}"
            ));
        }
    }
    if config.max_consecutive_local_without_goal_delta == Some(0) {
        return Err("max_consecutive_local_without_goal_delta must be at least 1".into());
    }
    Ok(config)
}

/// The environment switch, read as a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    On,
    Off,
}

/// `on|off|1|0|true|false|yes|no` (any case); empty is no switch.
pub fn parse_switch(value: &str) -> Result<Option<Switch>, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "on" | "1" | "true" | "yes" => Ok(Some(Switch::On)),
        "off" | "0" | "false" | "no" => Ok(Some(Switch::Off)),
        other => Err(format!(
            "{ENV}={other:?} is not a switch: use on or off (or 1/0, true/false, yes/no)"
        )),
    }
}

/// The config in force: the file's, with the switch applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolved {
    /// Whether goal priority speaks at all.
    pub active: bool,
    pub discipline: Discipline,
    /// Why it is (or is not) active, in one line.
    pub reason: String,
    /// `on` was asked for a loop without a config: nothing to enable.
    pub inert_switch: bool,
    pub config: Config,
}

impl Resolved {
    pub fn cap(&self) -> u64 {
        self.config
            .max_consecutive_local_without_goal_delta
            .unwrap_or(DEFAULT_CAP)
    }

    fn requires_contribution(&self) -> bool {
        self.config
            .require_goal_contribution_in_ledger
            .unwrap_or(true)
    }

    fn speaks_in_prompt(&self) -> bool {
        self.active && self.discipline != Discipline::Soft
    }
}

/// Combine the file (absent: `None`) with the switch. Defaults: disabled,
/// soft. `off` always disables; `on` enables only a config that exists.
pub fn resolve(config: Option<Config>, switch: Option<Switch>) -> Resolved {
    let exists = config.is_some();
    let config = config.unwrap_or_default();
    let discipline = config.discipline_mode.unwrap_or_default();
    let enabled = config.enabled == Some(true);
    let (active, reason) = match (switch, exists) {
        (Some(Switch::Off), _) => (false, format!("disabled by {ENV}=off")),
        (Some(Switch::On), true) => (true, format!("enabled by {ENV}=on")),
        (Some(Switch::On), false) => (
            false,
            format!("{ENV}=on has no effect: the loop has no {FILE}"),
        ),
        (None, false) => (false, format!("no {FILE} (the default is disabled)")),
        (None, true) if enabled => (true, format!("enabled in {FILE}")),
        (None, true) => (false, format!("{FILE} does not set \"enabled\": true")),
    };
    Resolved {
        active,
        discipline,
        reason,
        inert_switch: switch == Some(Switch::On) && !exists,
        config,
    }
}

fn marked(record: &IterationRecord) -> bool {
    let d = &record.direction;
    !d.goal_contribution.trim().is_empty()
        || !d.campaign_id.trim().is_empty()
        || d.local_without_goal_delta
}

/// Does this record count toward the streak?
fn local(resolved: &Resolved, record: &IterationRecord) -> bool {
    let d = &record.direction;
    d.local_without_goal_delta
        || (resolved.requires_contribution() && d.goal_contribution.trim().is_empty())
}

/// The run of latest records that were local work without a goal delta.
/// Counting starts at the first record that set any goal-priority field
/// (`--goal-contribution`, `--campaign-id`, `--local-without-goal-delta`),
/// within the records given (oldest first).
pub fn streak(resolved: &Resolved, records: &[IterationRecord]) -> u64 {
    let Some(start) = records.iter().position(marked) else {
        return 0;
    };
    records[start..]
        .iter()
        .rev()
        .take_while(|r| local(resolved, r))
        .count() as u64
}

/// The latest record's `advance` that says nothing about what advanced.
fn bare_advance(records: &[IterationRecord]) -> Option<u64> {
    let last = records.last()?;
    let d = &last.direction;
    (d.goal_contribution.trim() == "advance"
        && d.goal_contribution_detail.trim().is_empty()
        && d.global_delta.trim().is_empty())
    .then_some(last.iteration)
}

/// What `validate` and `append-iteration` warn about for an active config.
/// Never an error: v1 does not refuse.
pub fn warnings(resolved: &Resolved, records: &[IterationRecord]) -> Vec<String> {
    let mut out = Vec::new();
    if !resolved.active {
        // The switch asked for something the loop cannot give: say so.
        if resolved.inert_switch {
            out.push(format!("goal priority: {}", resolved.reason));
        }
        return out;
    }
    let run = streak(resolved, records);
    let cap = resolved.cap();
    if run >= cap {
        out.push(format!(
            "goal priority: the last {run} iterations were local work without a goal delta (the cap is {cap}); replan toward the goal"
        ));
    }
    if let Some(last) = records.last() {
        let tag = last.direction.local_without_goal_delta_tag.trim();
        let listed = resolved.config.local_without_goal_delta_tags.as_ref();
        if !tag.is_empty() && listed.is_some_and(|tags| !tags.iter().any(|t| t == tag)) {
            out.push(format!(
                "goal priority: iteration {} uses the tag {tag:?}, which {FILE} does not list",
                last.iteration
            ));
        }
        let campaign = last.direction.campaign_id.trim();
        if resolved
            .config
            .closed_campaigns
            .iter()
            .any(|c| c == campaign)
        {
            out.push(format!(
                "goal priority: iteration {} worked in campaign {campaign:?}, which {FILE} lists as closed",
                last.iteration
            ));
        }
    }
    if let Some(iteration) = bare_advance(records) {
        out.push(format!(
            "goal priority: iteration {iteration} recorded goal contribution \"advance\" without saying what advanced (--goal-contribution-detail)"
        ));
    }
    out
}

/// The turn prompt's goal-priority section: empty unless the config is
/// active in advise or hard mode and Goal Focus does not enforce (when it
/// does, Goal Focus speaks for the direction instead).
pub fn section(
    resolved: &Resolved,
    records: &[IterationRecord],
    goal_focus_enforces: bool,
) -> String {
    if goal_focus_enforces || !resolved.speaks_in_prompt() {
        return String::new();
    }
    let config = &resolved.config;
    let mut out = String::new();
    let w = &mut out;
    // Headed by the prompt's ordered slot (`task_body::policy_sections`).
    let _ = writeln!(w, "- Mode: {} (advisory)", resolved.discipline.as_str());
    if resolved.discipline == Discipline::Hard {
        let _ = writeln!(
            w,
            "- The operator requires every turn to move the goal itself; work that does not must say so."
        );
    }
    if !config.primary_campaign.trim().is_empty() {
        let _ = writeln!(
            w,
            "- Primary campaign: {}",
            clip(&config.primary_campaign, 80)
        );
    }
    if !config.primary_objective.trim().is_empty() {
        let _ = writeln!(
            w,
            "- It must produce: {}",
            clip(&config.primary_objective, 300)
        );
    }
    if let Some(campaign) = config.campaign_registry.get(&config.primary_campaign) {
        if !campaign.objective.trim().is_empty() {
            let _ = writeln!(
                w,
                "- Campaign objective: {}",
                clip(&campaign.objective, 300)
            );
        }
        for non_goal in campaign.non_goals.iter().take(5) {
            let _ = writeln!(w, "- Campaign non-goal: {}", clip(non_goal, 200));
        }
    }
    if !config.next_campaigns_ordered.is_empty() {
        let _ = writeln!(
            w,
            "- Next campaigns, in order: {}",
            clip(&config.next_campaigns_ordered.join(", "), 200)
        );
    }
    if !config.closed_campaigns.is_empty() {
        let _ = writeln!(
            w,
            "- Closed campaigns (do not sample them): {}",
            clip(&config.closed_campaigns.join(", "), 200)
        );
    }
    let _ = writeln!(
        w,
        "- Record how the turn served the goal: `--goal-contribution advance|eliminate|verify|replan|operational --goal-contribution-detail \"<what moved>\" --campaign-id <campaign>`; local work that moved nothing: `--local-without-goal-delta [--local-without-goal-delta-tag <tag>]`."
    );
    let run = streak(resolved, records);
    let cap = resolved.cap();
    if run >= cap {
        let _ = writeln!(
            w,
            "- REPLAN_REQUIRED: the last {run} iterations were local work without a goal delta (the cap is {cap}). Choose a step that moves the goal, or switch campaign and record `--goal-contribution replan`."
        );
    } else if run > 0 {
        let _ = writeln!(
            w,
            "- Local work without a goal delta: {run} in a row (the cap is {cap})."
        );
    }
    if let Some(iteration) = bare_advance(records) {
        let _ = writeln!(
            w,
            "- Warning: iteration {iteration} claimed `advance` without saying what advanced; a bare advance does not count as goal progress. Name the change in `--goal-contribution-detail`."
        );
    }
    out
}

/// What `init --goal-priority-template` writes: every field, disabled, so
/// that the operator reads it before turning it on.
pub const TEMPLATE: &str = r#"{
  "schema_version": "goal_priority.v1",
  "enabled": false,
  "discipline_mode": "soft",
  "primary_campaign": "main",
  "primary_objective": "What this campaign has to deliver toward the loop's goal",
  "campaign_registry": {
    "main": {
      "objective": "Move the goal forward with a result the host can check",
      "entry_condition": "While main is the primary campaign",
      "non_goals": [
        "Local sampling that reduces nothing the goal needs"
      ]
    }
  },
  "closed_campaigns": [],
  "next_campaigns_ordered": ["main"],
  "max_consecutive_local_without_goal_delta": 3,
  "local_without_goal_delta_tags": [
    "finite_sample_only",
    "bookkeeping",
    "special_case_only",
    "uncertified_counterexample",
    "elegant_reduction",
    "local_refinement_only",
    "closed_campaign_sample"
  ],
  "require_goal_contribution_in_ledger": true
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn record(iteration: u64, contribution: &str, local: bool) -> IterationRecord {
        let mut r = crate::focus::tests::record(iteration);
        r.direction.goal_contribution = contribution.into();
        r.direction.local_without_goal_delta = local;
        r
    }

    fn on(mode: Discipline) -> Resolved {
        resolve(
            Some(Config {
                enabled: Some(true),
                discipline_mode: Some(mode),
                ..Config::default()
            }),
            None,
        )
    }

    #[test]
    fn the_template_parses_and_is_disabled_soft() {
        let config = parse(TEMPLATE.as_bytes()).expect("the template parses");
        let resolved = resolve(Some(config), None);
        assert!(!resolved.active);
        assert_eq!(resolved.discipline, Discipline::Soft);
    }

    #[test]
    fn the_defaults_are_disabled_and_soft() {
        let resolved = resolve(None, None);
        assert!(!resolved.active);
        assert_eq!(resolved.discipline, Discipline::Soft);
        assert_eq!(resolved.cap(), DEFAULT_CAP);
    }

    #[test]
    fn the_switch_disables_always_and_enables_only_a_config() {
        let config = parse(br#"{"enabled": false, "discipline_mode": "advise"}"#).unwrap();
        assert!(resolve(Some(config.clone()), Some(Switch::On)).active);
        assert!(!resolve(Some(config), None).active);
        assert!(!resolve(None, Some(Switch::On)).active);
        let enabled = parse(br#"{"enabled": true}"#).unwrap();
        assert!(!resolve(Some(enabled), Some(Switch::Off)).active);
    }

    #[test]
    fn malformed_files_and_switches_are_refused() {
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"enabled": "true"}"#,
            br#"{"discipline_mode": "strict"}"#,
            br#"{"schema_version": "goal_priority.v2"}"#,
            br#"{"max_consecutive_local_without_goal_delta": 0}"#,
            b"\xff",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse_switch("maybe").is_err());
        assert_eq!(parse_switch(" ON ").unwrap(), Some(Switch::On));
        assert_eq!(parse_switch("0").unwrap(), Some(Switch::Off));
        assert_eq!(parse_switch("").unwrap(), None);
    }

    #[test]
    fn the_streak_starts_at_the_first_marked_record() {
        let resolved = on(Discipline::Soft);
        let records = vec![
            record(1, "", false),
            record(2, "", true),
            record(3, "", false),
            record(4, "", true),
        ];
        assert_eq!(streak(&resolved, &records), 3);
        assert_eq!(warnings(&resolved, &records).len(), 1);
        let moved = vec![record(1, "", true), record(2, "advance", false)];
        assert_eq!(streak(&resolved, &moved), 0);
        assert_eq!(streak(&resolved, &[record(1, "", false)]), 0);
    }

    #[test]
    fn only_advise_and_hard_speak_in_the_prompt_and_never_under_enforce() {
        let records = vec![record(1, "advance", false)];
        assert!(section(&on(Discipline::Soft), &records, false).is_empty());
        assert!(section(&on(Discipline::Advise), &records, true).is_empty());
        let advise = section(&on(Discipline::Advise), &records, false);
        assert!(advise.contains("- Mode: advise (advisory)"));
        assert!(advise.contains("claimed `advance` without saying"));
        let hard = section(&on(Discipline::Hard), &records, false);
        assert!(hard.contains("The operator requires"));
        assert!(section(&resolve(None, None), &records, false).is_empty());
    }
}
