//! What an agent says about the turn it did, as every adapter takes it:
//! one type for `loopx append-iteration`'s flags (clap), the MCP tool's
//! arguments (serde and its JSON schema) and anything else that records an
//! iteration, so the spellings cannot drift apart. Its documentation is
//! both the CLI's help and the tool's schema, so it names fields, never a
//! flag.
//!
//! Owns: turning that input into the core's [`IterationReport`], with the
//! checks that need nothing but the input (the mode and decision words,
//! compute reported as runs or as none). Does not own the ledger's rules
//! (`loopx_core::ledger`), redaction (the core's, applied to the whole
//! report as it is recorded) or where a value came from (an adapter reads
//! `--compute-run @FILE` and the driver's environment).

use crate::AppError;
use clap::builder::PossibleValuesParser;
use loopx_core::ledger::vocabulary::{Decision, Mode};
use loopx_core::ledger::{Direction, EvidenceChecked, IterationReport};
use serde::Deserialize;

/// One iteration: what it did, what it cost, and the decision.
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterationInput {
    /// The kind of work this iteration did (bounded-research,
    /// implementation-support, monitor, panel-loop, recovery).
    #[arg(long, value_parser = PossibleValuesParser::new(Mode::names()))]
    pub mode: String,
    /// What this iteration set out to do.
    #[arg(long)]
    pub objective: String,
    /// What happens next: continue, revise or delegate keep the loop going;
    /// stop and blocked end it.
    #[arg(long, value_parser = PossibleValuesParser::new(Decision::names()))]
    pub decision: String,
    /// For stop or blocked: one accepted reason token (detail goes in the
    /// output).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub stop_reason: String,
    /// Evidence consulted; for an early stop, a proof artifact id.
    #[arg(long = "evidence-id")]
    #[serde(default)]
    pub evidence_ids: Vec<String>,
    /// A claim this iteration checked.
    #[arg(long = "claim-id")]
    #[serde(default)]
    pub claim_ids: Vec<String>,
    /// Enforce mode: the evidence of a claim, CLAIM_ID=PATH with PATH a
    /// file below the loop directory (every claim id needs one). The file
    /// is read without following links and embedded in the staged
    /// candidate, which is then staged for result review instead of banked.
    #[arg(long = "claim-evidence", value_name = "CLAIM_ID=PATH")]
    #[serde(default)]
    pub claim_evidence: Vec<String>,
    /// Enforce mode: the status this iteration asks an obligation it moves
    /// (an obligation id) to reach, OBLIGATION_ID=STATUS with STATUS one of
    /// open, partial, satisfied, blocked, closed. An accepting result review
    /// must state exactly this target status.
    #[arg(long = "obligation-target", value_name = "OBLIGATION_ID=STATUS")]
    #[serde(default)]
    pub obligation_targets: Vec<String>,
    /// A source this iteration consulted.
    #[arg(long = "source-id")]
    #[serde(default)]
    pub source_ids: Vec<String>,
    /// A guard or check this iteration relied on.
    #[arg(long = "guard-ref")]
    #[serde(default)]
    pub guard_refs: Vec<String>,
    /// An input this iteration read.
    #[arg(long = "input-ref")]
    #[serde(default)]
    pub input_refs: Vec<String>,
    /// One thing this iteration did.
    #[arg(long = "action-taken")]
    #[serde(default)]
    pub actions_taken: Vec<String>,
    /// Something still missing after this iteration.
    #[arg(long = "remaining-gap")]
    #[serde(default)]
    pub remaining_gaps: Vec<String>,
    /// What this iteration produced, in words.
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub output: String,
    /// Tokens this iteration used.
    #[arg(long, default_value_t = 0)]
    #[serde(default)]
    pub tokens: u64,
    /// USD this iteration cost; finite and non-negative.
    #[arg(long, default_value = "0", value_parser = usd_amount)]
    #[serde(default)]
    pub usd: f64,
    /// Seconds this iteration took.
    #[arg(long, default_value_t = 0)]
    #[serde(default)]
    pub wall_time_seconds: u64,
    /// What is done so far, for the next session's recovery view.
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub completed_summary: String,
    /// Where the work stands now, for the next session's recovery view.
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub current_summary: String,
    /// The next bounded action, for the next session's recovery view.
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub next_action: String,
    /// Stable id for this operation; repeating it with the same input
    /// replays the receipt, which is how a lost reply is recovered. (A tool
    /// call must give one; the command line makes one up when it is left
    /// out.)
    #[arg(long)]
    #[schemars(required)]
    pub operation_id: Option<String>,
    /// Goal Focus v2: how this iteration moved the goal (none, reduced,
    /// satisfied; stored as given).
    #[arg(long, value_parser = ["none", "reduced", "satisfied"])]
    #[serde(default)]
    pub global_delta: Option<String>,
    /// Goal Focus v2: how it moved its campaign (none, incremental,
    /// substantial, closed; stored as given).
    #[arg(long, value_parser = ["none", "incremental", "substantial", "closed"])]
    #[serde(default)]
    pub campaign_delta: Option<String>,
    /// A goal-contract obligation this iteration changed.
    #[arg(long = "obligation-id")]
    #[serde(default)]
    pub obligation_ids: Vec<String>,
    /// Goal Focus v2: a supported claim, or the selected approach (its
    /// id), that this iteration's evidence contradicts. It calls for a
    /// strategy review of the direction (`unreviewed_counterevidence`).
    #[arg(long = "counterevidence")]
    #[serde(default)]
    pub counterevidence: Vec<String>,
    /// Compute actually used: one JSON object each (on the command line,
    /// also @FILE holding one; stored as given).
    #[arg(long = "compute-run")]
    #[serde(default)]
    pub compute_runs: Vec<String>,
    /// Record that no compute service was used (excludes compute runs).
    #[arg(long)]
    #[serde(default)]
    pub compute_none: bool,
    /// How this iteration served the goal (Goal Focus v1 soft field,
    /// stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub goal_contribution: String,
    /// The detail behind the goal contribution (stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub goal_contribution_detail: String,
    /// The campaign this iteration belongs to (stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub campaign_id: String,
    /// This iteration was local work that moved no goal obligation.
    #[arg(long)]
    #[serde(default)]
    pub local_without_goal_delta: bool,
    /// A tag for local work without a goal delta (stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub local_without_goal_delta_tag: String,
    /// The residual this iteration worked on (stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub residual_id: String,
    /// The scope lock this iteration held (stored as given).
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub scope_lock: String,
}

/// A command line's USD amount (a cost, a budget): finite and
/// non-negative, refused while parsing (the ledger refuses any other as
/// well).
pub fn usd_amount(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(value) if loopx_core::ledger::budget::is_budget_number(value) => Ok(value),
        Ok(value) => Err(format!(
            "must be a finite non-negative number (got {value})"
        )),
        Err(_) => Err(format!(
            "must be a finite non-negative number (got {text:?})"
        )),
    }
}

/// Who ran the turn, as the adapter knows it (the driver's environment, an
/// MCP server's binding): never the agent's own statement.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// The agent provider that ran the turn.
    pub executor_provider: String,
    /// The driver dispatch the turn ran under ("" outside a driver).
    pub dispatch_id: String,
}

impl IterationInput {
    /// The report the ledger records. Refused, naming the field, when a
    /// word is not one the ledger knows, a compute run is not a JSON
    /// object, or compute is reported both as runs and as none.
    pub fn report(&self, provenance: Provenance) -> Result<IterationReport, AppError> {
        let word = |field: &str, text: &str, names: &[&str]| {
            AppError::refused(format!(
                "{field}: {text:?} is not one of {}",
                names.join(", ")
            ))
        };
        let mode =
            Mode::parse(&self.mode).ok_or_else(|| word("mode", &self.mode, &Mode::names()))?;
        let decision = Decision::parse(&self.decision)
            .ok_or_else(|| word("decision", &self.decision, &Decision::names()))?;
        let direction = Direction {
            global_delta: self.global_delta.clone().unwrap_or_default(),
            campaign_delta: self.campaign_delta.clone().unwrap_or_default(),
            obligation_ids: self.obligation_ids.clone(),
            counterevidence: self.counterevidence.clone(),
            compute_runs: self.compute()?,
            goal_contribution: self.goal_contribution.clone(),
            goal_contribution_detail: self.goal_contribution_detail.clone(),
            campaign_id: self.campaign_id.clone(),
            local_without_goal_delta: self.local_without_goal_delta,
            local_without_goal_delta_tag: self.local_without_goal_delta_tag.clone(),
            residual_id: self.residual_id.clone(),
            scope_lock: self.scope_lock.clone(),
        };
        Ok(IterationReport {
            mode: Some(mode),
            objective: self.objective.clone(),
            decision: Some(decision),
            stop_reason: self.stop_reason.clone(),
            evidence_checked: EvidenceChecked {
                source_ids: self.source_ids.clone(),
                claim_ids: self.claim_ids.clone(),
                evidence_ids: self.evidence_ids.clone(),
                guard_refs: self.guard_refs.clone(),
            },
            input_refs: self.input_refs.clone(),
            actions_taken: self.actions_taken.clone(),
            remaining_gaps: self.remaining_gaps.clone(),
            output: self.output.clone(),
            tokens: self.tokens,
            usd: self.usd,
            wall_time_seconds: self.wall_time_seconds,
            completed_summary: self.completed_summary.clone(),
            current_summary: self.current_summary.clone(),
            next_action: self.next_action.clone(),
            executor_provider: provenance.executor_provider,
            dispatch_id: provenance.dispatch_id,
            direction: Box::new(direction),
        })
    }

    /// Compute as the record stores it: `None` when not reported, an empty
    /// list when explicitly none, else each run's JSON object.
    fn compute(&self) -> Result<Option<Vec<serde_json::Map<String, serde_json::Value>>>, AppError> {
        if self.compute_none && !self.compute_runs.is_empty() {
            return Err(AppError::refused(
                "compute_none and compute_runs are mutually exclusive: report the runs, or that there were none",
            ));
        }
        if self.compute_none {
            return Ok(Some(Vec::new()));
        }
        if self.compute_runs.is_empty() {
            return Ok(None);
        }
        self.compute_runs
            .iter()
            .map(|text| {
                serde_json::from_str(text.trim()).map_err(|e| {
                    AppError::refused(format!(
                        "compute_runs: each must be a JSON object, e.g. {{\"service\":\"local\",\"status\":\"succeeded\"}}; got {:?} ({e})",
                        text.trim()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> IterationInput {
        IterationInput {
            mode: "bounded-research".into(),
            objective: "o".into(),
            decision: "continue".into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_unknown_word_is_refused_naming_its_field() {
        let mut bad = input();
        bad.decision = "maybe".into();
        let error = bad.report(Provenance::default()).unwrap_err();
        assert!(
            error.message.starts_with("decision: \"maybe\""),
            "{}",
            error.message
        );
        let mut bad = input();
        bad.mode = "dreaming".into();
        let error = bad.report(Provenance::default()).unwrap_err();
        assert!(error.message.starts_with("mode: "), "{}", error.message);
    }

    #[test]
    fn compute_is_runs_or_none_never_both() {
        let mut both = input();
        both.compute_none = true;
        both.compute_runs = vec![r#"{"service":"local"}"#.into()];
        assert!(both.report(Provenance::default()).is_err());
        let mut none = input();
        none.compute_none = true;
        let report = none.report(Provenance::default()).unwrap();
        assert_eq!(report.direction.compute_runs, Some(Vec::new()));
        let mut runs = input();
        runs.compute_runs = vec![r#"{"service":"local"}"#.into()];
        let report = runs.report(Provenance::default()).unwrap();
        assert_eq!(
            report.direction.compute_runs.unwrap()[0]["service"],
            "local"
        );
        let unreported = input().report(Provenance::default()).unwrap();
        assert_eq!(unreported.direction.compute_runs, None);
    }

    #[test]
    fn every_flag_is_a_tool_field_and_every_tool_field_a_flag() {
        use clap::Args as _;
        let command = IterationInput::augment_args(clap::Command::new("append-iteration"));
        let mut flags: Vec<String> = command
            .get_arguments()
            .map(|arg| arg.get_id().to_string())
            .collect();
        let schema = schemars::schema_for!(IterationInput);
        let mut fields: Vec<String> = schema
            .get("properties")
            .and_then(|p| p.as_object())
            .expect("an object schema")
            .keys()
            .cloned()
            .collect();
        flags.sort();
        fields.sort();
        assert_eq!(flags, fields);
        let required = schema.get("required").and_then(|r| r.as_array()).unwrap();
        for field in ["mode", "objective", "decision", "operation_id"] {
            assert!(required.contains(&field.into()), "{field} is not required");
        }
    }

    #[test]
    fn a_tool_call_with_an_unknown_field_is_refused() {
        let text = r#"{"mode":"monitor","objective":"o","decision":"continue","operation_id":"a","note":"x"}"#;
        let error = serde_json::from_str::<IterationInput>(text).unwrap_err();
        assert!(
            error.to_string().contains("unknown field `note`"),
            "{error}"
        );
    }

    #[test]
    fn provenance_comes_from_the_adapter_not_the_input() {
        let provenance = Provenance {
            executor_provider: "codex".into(),
            dispatch_id: "d1-x".into(),
        };
        let report = input().report(provenance).unwrap();
        assert_eq!(report.executor_provider, "codex");
        assert_eq!(report.dispatch_id, "d1-x");
    }
}
