//! `loopx import`: a loop directory written by the reference Python runtime
//! read into a new loopx loop, its history preserved.
//!
//! Owns: reading the source (each file opened without following a link,
//! bounded, parsed as data and never executed), mapping the reference's
//! files onto loopx requests, listing every direction signal the source
//! holds and which of them disagree, and creating the new loop so that a
//! crash leaves either no loop at `--dir` or a complete one: everything is
//! built in a fresh directory beside it and renamed into place last.
//!
//! Does not own any rule: which records may be imported is
//! `loopx_core::ledger::import_guard`, what an imported plan may select is
//! `loopx_core::focus::replan::draft_import`, and every request goes through
//! its owner, first in memory (so the dry run refuses exactly what apply
//! would) and then through the authority.
//!
//! The source files, by the reference's names (unknown fields are ignored):
//!
//! | file | read |
//! | --- | --- |
//! | `loop_state.json` (required) | `goal`, `success_criteria`, `status`, `created_at`, `default_mode`, `plateau_rule`, `stop_conditions`, `next_preferred_path` |
//! | `budget.json` (required) | `max_iterations`, `max_wall_time_seconds`, `max_tokens`, `max_usd`, `spent` {`iterations`, `tokens`, `usd`} or `spent_iterations`, `spent_tokens`, `spent_usd` |
//! | `iterations.jsonl` | one iteration record a line, as `append-iteration` writes it (direction fields at the top or under `progress_assessment`, `goal_focus`, `execution`) |
//! | `goal_contract.json` | `goal_revision` and the contract (`goal`, `criteria` or `success_criteria`, `scope`, `obligations` listed or keyed by id) |
//! | `approach_registry.json` | `registry_revision` and `campaigns` (campaigns and approaches listed or keyed by id) |
//!
//! The reference has written two shapes: the one its specification gives
//! (lists) and the one its runtime writes today (objects keyed by id,
//! `success_criteria`, `scope.included`, flat `spent_*`). Both are read; an
//! empty id (`""`) names nothing. Its per-factor approach `estimates` have
//! no counterpart in loopx's single interval: such an approach starts at
//! [0, 1] and the import warns.
//! | `current_plan.json` | `plan_revision`, `goal_revision`, `registry_revision`, `state`, `enforcement_mode`, `campaign_id`, `approach_id`, `selection`, `horizon_iterations`, `valid_through_iteration` |
//! | `direction_decisions.jsonl` | `decision_id`, `plan_revision`, `status` (`pending` or not), `approach_id` |
//! | `goal_priority.json` | `enabled`, `discipline_mode`, `campaign_id` |

use crate::loop_dir::{store_locator, LoopDir, Reading, DATABASE};
use crate::{clock, fsutil, AppError};
use anyhow::Context as _;
use jiff::Timestamp;
use loopx_core::digest::Digest;
use loopx_core::focus::contract::{Criterion, Obligation, ObligationKind, ObligationStatus, Scope};
use loopx_core::focus::decisions::{DecisionContext, ImportedDecisionOwner, RecordImport};
use loopx_core::focus::direction::{Selection, SelectionKind};
use loopx_core::focus::mode::ModeSource;
use loopx_core::focus::registry::{Approach, Campaign, Eligibility, EligibilityStatus, Estimate};
use loopx_core::focus::replan::{draft_import, ImportPlan, ImportedPlanOwner, PlanContext};
use loopx_core::focus::{
    self, ApproachRegistry, ContractOwner, DocumentOwner, GoalContract, RegistryOwner, Revise,
    Revised,
};
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, GoalFocusMode, LoopStatus, Mode};
use loopx_core::ledger::{
    BudgetDelta, Direction, EvidenceChecked, InitLoop, IterationRecord, Ledger, LedgerContext,
    LedgerOwner, LedgerRequest, StopConditions, STREAM,
};
use loopx_core::operation::{Clock, OperationId, Owner};
use loopx_core::path::LoopPath;
use loopx_core::text::{self, limits};
use loopx_store::sqlite::Access;
use serde::de::{DeserializeOwned, Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// The largest single JSON document read from the source.
const DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;
/// The largest JSON Lines file read from the source (the whole history).
const JOURNAL_BYTES: u64 = 256 * 1024 * 1024;

const LOOP_STATE: &str = "loop_state.json";
const BUDGET: &str = "budget.json";
const ITERATIONS: &str = "iterations.jsonl";
const CONTRACT: &str = "goal_contract.json";
const REGISTRY: &str = "approach_registry.json";
const PLAN: &str = "current_plan.json";
const DECISIONS: &str = "direction_decisions.jsonl";
const PRIORITY: &str = "goal_priority.json";

/// Every file read, in the order they are listed.
const FILES: [&str; 8] = [
    LOOP_STATE, BUDGET, ITERATIONS, CONTRACT, REGISTRY, PLAN, DECISIONS, PRIORITY,
];

#[derive(Debug, Deserialize)]
struct SourceLoopState {
    #[serde(default, deserialize_with = "nonempty")]
    run_id: Option<String>,
    goal: String,
    success_criteria: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    created_at: Option<Timestamp>,
    #[serde(default)]
    default_mode: Option<Mode>,
    #[serde(default)]
    plateau_rule: Option<String>,
    #[serde(default)]
    stop_conditions: Option<SourceStopConditions>,
    #[serde(default)]
    next_preferred_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct SourceStopConditions {
    #[serde(default)]
    require_user_stop_only: bool,
    #[serde(default)]
    user_overrides: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SourceBudget {
    max_iterations: u64,
    #[serde(default)]
    max_wall_time_seconds: u64,
    #[serde(default)]
    max_tokens: u64,
    #[serde(default)]
    max_usd: f64,
    #[serde(default)]
    spent: Option<SourceSpent>,
    /// Today's reference spells the spent budget as flat fields.
    #[serde(default)]
    spent_iterations: Option<u64>,
    #[serde(default)]
    spent_tokens: Option<u64>,
    #[serde(default)]
    spent_usd: Option<f64>,
}

impl SourceBudget {
    /// What the source says was spent, in whichever shape it says it.
    fn spent(&self) -> Option<SourceSpent> {
        let flat = [self.spent_iterations, self.spent_tokens];
        match &self.spent {
            Some(spent) => Some(spent.clone()),
            None if flat.iter().any(Option::is_some) || self.spent_usd.is_some() => {
                Some(SourceSpent {
                    iterations: self.spent_iterations.unwrap_or(0),
                    tokens: self.spent_tokens.unwrap_or(0),
                    usd: self.spent_usd.unwrap_or(0.0),
                })
            }
            None => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct SourceSpent {
    #[serde(default)]
    iterations: u64,
    #[serde(default)]
    tokens: u64,
    #[serde(default)]
    usd: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SourceEvidence {
    source_ids: Vec<String>,
    claim_ids: Vec<String>,
    evidence_ids: Vec<String>,
    guard_refs: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SourceDelta {
    #[serde(default = "one")]
    iterations: u64,
    #[serde(default)]
    tokens: u64,
    #[serde(default)]
    usd: f64,
    #[serde(default)]
    wall_time_seconds: u64,
}

fn one() -> u64 {
    1
}

/// One line of `iterations.jsonl`.
#[derive(Debug, Deserialize)]
struct SourceIteration {
    iteration: u64,
    timestamp: Timestamp,
    mode: Mode,
    objective: String,
    decision: Decision,
    #[serde(default)]
    stop_reason: String,
    #[serde(default)]
    evidence_checked: SourceEvidence,
    #[serde(default)]
    input_refs: Vec<String>,
    #[serde(default)]
    actions_taken: Vec<String>,
    #[serde(default)]
    remaining_gaps: Vec<String>,
    #[serde(default)]
    output: String,
    budget_delta: SourceDelta,
    #[serde(default)]
    completed_summary: String,
    #[serde(default)]
    current_summary: String,
    #[serde(default)]
    proposed_next_action: String,
    #[serde(default)]
    executor_provider: String,
    #[serde(default)]
    global_delta: String,
    #[serde(default)]
    campaign_delta: String,
    #[serde(default)]
    obligation_ids: Vec<String>,
    #[serde(default)]
    campaign_id: String,
    #[serde(default)]
    goal_contribution: String,
    /// Where today's reference keeps the direction and the executor.
    #[serde(default)]
    progress_assessment: Option<SourceProgress>,
    #[serde(default)]
    goal_focus: Option<SourceIterationFocus>,
    #[serde(default)]
    execution: Option<SourceExecution>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SourceProgress {
    campaign_delta: String,
    global_delta: String,
    obligation_ids: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SourceIterationFocus {
    campaign_id: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SourceExecution {
    executor_provider: String,
}

impl SourceIteration {
    fn campaign_id(&self) -> String {
        flat_or_nested(
            &self.campaign_id,
            self.goal_focus.as_ref().map(|f| f.campaign_id.as_str()),
        )
    }
}

/// A top-level text, else the same one nested where today's reference puts it.
fn flat_or_nested(flat: &str, nested: Option<&str>) -> String {
    match (flat.trim(), nested) {
        ("", Some(nested)) => nested.to_owned(),
        _ => flat.to_owned(),
    }
}

/// `goal_contract.json` in either shape the reference has written: the
/// specification's (`criteria`, `scope.in_scope`, obligations listed) or
/// today's (`success_criteria`, `scope.included`, obligations keyed by id).
#[derive(Debug, Deserialize)]
struct SourceContract {
    #[serde(default)]
    goal_revision: Option<u64>,
    goal: String,
    #[serde(default)]
    criteria: Vec<Criterion>,
    #[serde(default)]
    success_criteria: Vec<SourceCriterion>,
    #[serde(default)]
    scope: SourceScope,
    #[serde(default, deserialize_with = "listed_or_keyed")]
    obligations: Vec<SourceObligation>,
}

#[derive(Debug, Deserialize)]
struct SourceCriterion {
    id: String,
    description: String,
}

#[derive(Debug, Default, Deserialize)]
struct SourceScope {
    #[serde(default, alias = "included")]
    in_scope: Vec<String>,
    #[serde(default, alias = "excluded")]
    out_of_scope: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SourceObligation {
    #[serde(default, alias = "id")]
    obligation_id: String,
    description: String,
    #[serde(default)]
    kind: ObligationKind,
    #[serde(default)]
    status: ObligationStatus,
    #[serde(default)]
    depends_on: Vec<String>,
}

impl Keyed for SourceObligation {
    fn id(&mut self) -> &mut String {
        &mut self.obligation_id
    }
}

impl SourceContract {
    fn contract(&self) -> GoalContract {
        let listed = self.criteria.iter().cloned();
        let described = self.success_criteria.iter().map(|c| Criterion {
            criterion_id: c.id.clone(),
            text: c.description.clone(),
        });
        GoalContract {
            goal: self.goal.clone(),
            criteria: listed.chain(described).collect(),
            scope: Scope {
                in_scope: self.scope.in_scope.clone(),
                out_of_scope: self.scope.out_of_scope.clone(),
            },
            obligations: self
                .obligations
                .iter()
                .map(|o| Obligation {
                    obligation_id: o.obligation_id.clone(),
                    description: o.description.clone(),
                    kind: o.kind,
                    status: o.status,
                    depends_on: o.depends_on.clone(),
                })
                .collect(),
        }
    }
}

/// `approach_registry.json` in either shape: campaigns (and their
/// approaches) listed, or keyed by id with the reference's per-approach
/// `status`, `reopen_condition` and per-factor `estimates`.
#[derive(Debug, Deserialize)]
struct SourceRegistry {
    #[serde(default)]
    registry_revision: Option<u64>,
    #[serde(default, deserialize_with = "listed_or_keyed")]
    campaigns: Vec<SourceCampaign>,
}

#[derive(Debug, Deserialize)]
struct SourceCampaign {
    #[serde(default, alias = "id")]
    campaign_id: String,
    #[serde(default)]
    title: String,
    #[serde(default, deserialize_with = "nonempty")]
    status: Option<String>,
    #[serde(default, deserialize_with = "listed_or_keyed")]
    approaches: Vec<SourceApproach>,
}

impl Keyed for SourceCampaign {
    fn id(&mut self) -> &mut String {
        &mut self.campaign_id
    }
}

#[derive(Debug, Deserialize)]
struct SourceApproach {
    #[serde(default, alias = "id")]
    approach_id: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    mechanism: String,
    #[serde(default)]
    estimate: Option<Estimate>,
    #[serde(default)]
    eligibility: Option<Eligibility>,
    #[serde(default)]
    status: Option<EligibilityStatus>,
    #[serde(default)]
    reopen_conditions: Vec<String>,
    #[serde(default)]
    reopen_condition: String,
}

impl Keyed for SourceApproach {
    fn id(&mut self) -> &mut String {
        &mut self.approach_id
    }
}

impl SourceRegistry {
    /// The registry in loopx's shape, and what could not be carried over
    /// as it was.
    fn registry(&self) -> (ApproachRegistry, Vec<String>) {
        let mut unestimated = Vec::new();
        let campaigns = self
            .campaigns
            .iter()
            .map(|campaign| {
                // A campaign that may not be pursued holds its approaches
                // back, as the reference's own eligibility check does.
                let held = campaign
                    .status
                    .as_deref()
                    .and_then(EligibilityStatus::parse)
                    .filter(|s| *s != EligibilityStatus::Eligible);
                let approaches = campaign
                    .approaches
                    .iter()
                    .map(|a| {
                        let mut eligibility = a.eligibility.clone().unwrap_or_else(|| {
                            let status = a.status.unwrap_or_default();
                            Eligibility {
                                status,
                                reason: match status {
                                    EligibilityStatus::Eligible => String::new(),
                                    _ => "marked so in the imported registry".to_owned(),
                                },
                            }
                        });
                        if let (EligibilityStatus::Eligible, Some(status)) =
                            (eligibility.status, held)
                        {
                            eligibility = Eligibility {
                                status,
                                reason: format!("campaign {} is {status}", campaign.campaign_id),
                            };
                        }
                        let mut reopen_conditions = a.reopen_conditions.clone();
                        if !a.reopen_condition.trim().is_empty() {
                            reopen_conditions.push(a.reopen_condition.clone());
                        }
                        let estimate = a.estimate.clone().unwrap_or_else(|| {
                            unestimated.push(a.approach_id.clone());
                            Estimate {
                                low: 0.0,
                                high: 1.0,
                                expires_at: None,
                            }
                        });
                        Approach {
                            approach_id: a.approach_id.clone(),
                            summary: match a.summary.trim() {
                                "" => a.mechanism.clone(),
                                _ => a.summary.clone(),
                            },
                            estimate,
                            eligibility,
                            reopen_conditions,
                        }
                    })
                    .collect();
                Campaign {
                    campaign_id: campaign.campaign_id.clone(),
                    title: campaign.title.clone(),
                    approaches,
                }
            })
            .collect();
        let mut warnings = Vec::new();
        if !unestimated.is_empty() {
            warnings.push(format!(
                "{REGISTRY}: approaches {unestimated:?} carry no single estimate (the reference's `estimates` are per factor): each starts at [0, 1], unknown; set one with `loopx goal-focus revise --registry FILE`"
            ));
        }
        (ApproachRegistry { campaigns }, warnings)
    }
}

/// An entry of a collection the reference lists in one shape and keys by
/// id in another: the key fills an absent id and must match a present one.
trait Keyed {
    fn id(&mut self) -> &mut String;
}

/// A list, or an object keyed by id, read as the list in document order.
fn listed_or_keyed<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Keyed,
{
    struct Entries<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de> + Keyed> Visitor<'de> for Entries<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list, or an object keyed by id")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(entry) = seq.next_element()? {
                out.push(entry);
            }
            Ok(out)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some((key, mut entry)) = map.next_entry::<String, T>()? {
                let id = entry.id();
                if id.is_empty() {
                    *id = key;
                } else if *id != key {
                    return Err(A::Error::custom(format!(
                        "the entry keyed {key:?} says its id is {id:?}: make the key and the id the same"
                    )));
                }
                out.push(entry);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_any(Entries(PhantomData))
}

/// A text that is absent when empty: the reference writes `""` for "none".
fn nonempty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.filter(|s| !s.trim().is_empty()))
}

#[derive(Debug, Deserialize)]
struct SourceSelection {
    #[serde(default)]
    kind: Option<SelectionKind>,
    #[serde(default)]
    approach_ids: Vec<String>,
    #[serde(default)]
    campaign_ids: Vec<String>,
    #[serde(default)]
    horizon_iterations: Option<u64>,
    #[serde(default)]
    rationale: String,
}

#[derive(Debug, Deserialize)]
struct SourcePlan {
    #[serde(default)]
    plan_revision: Option<u64>,
    #[serde(default)]
    goal_revision: Option<u64>,
    #[serde(default)]
    registry_revision: Option<u64>,
    state: String,
    #[serde(default)]
    enforcement_mode: Option<GoalFocusMode>,
    #[serde(default, deserialize_with = "nonempty")]
    campaign_id: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    approach_id: Option<String>,
    #[serde(default)]
    selection: Option<SourceSelection>,
    #[serde(default)]
    horizon_iterations: Option<u64>,
    #[serde(default)]
    valid_through_iteration: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct SourceDecision {
    decision_id: String,
    #[serde(default)]
    plan_revision: Option<u64>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    approach_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SourcePriority {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    discipline_mode: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    campaign_id: Option<String>,
}

/// One file of the source as read: its name, size and digest.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    pub file: &'static str,
    pub bytes: u64,
    pub digest: Digest,
}

/// One direction signal the source holds, as found.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionSignal {
    pub file: &'static str,
    pub signal: &'static str,
    pub value: String,
}

/// A document's revision in the source and in the new loop.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionMap {
    /// What the source's file says (`None`: it gives no revision).
    pub source_revision: Option<u64>,
    /// The loopx stream's revision after the import.
    pub revision: u64,
    pub fingerprint: Digest,
}

/// What becomes of the source's plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanImport {
    pub source_revision: Option<u64>,
    pub source_state: String,
    /// `active` with the source's selection, or `needs_replan` without one.
    pub state: String,
    pub selection: Option<Selection>,
    /// Why the plan was kept without a selection, if it was.
    pub reason: Option<String>,
}

/// What `loopx import` did, or with no `--apply` would do.
#[derive(Debug, Clone, Serialize)]
pub struct ImportView {
    pub status: &'static str,
    pub action: &'static str,
    pub dry_run: bool,
    pub from: String,
    pub dir: String,
    pub sources: Vec<SourceFile>,
    /// The new loop's run id (`None` on a dry run): its own, never the
    /// source's, so that two imports of one source are two loops.
    pub run_id: Option<String>,
    /// The run id `loop_state.json` gives, kept as where the loop came from.
    pub source_run_id: Option<String>,
    pub enforcement_mode: GoalFocusMode,
    pub iterations: u64,
    pub tokens: u64,
    pub usd: f64,
    pub state_status: LoopStatus,
    pub created_at: Timestamp,
    pub goal_contract: Option<RevisionMap>,
    pub approach_registry: Option<RevisionMap>,
    pub plan: Option<PlanImport>,
    /// Decisions in `direction_decisions.jsonl`, and how many are pending.
    pub source_decisions: u64,
    pub pending_decisions: u64,
    /// Every direction signal found, whether or not it is followed.
    pub signals: Vec<DirectionSignal>,
    /// Signals that disagree: with any, no direction is selected.
    pub ambiguities: Vec<String>,
    pub warnings: Vec<String>,
}

impl ImportView {
    pub fn text(&self) -> String {
        let mut out = String::new();
        let verb = if self.dry_run {
            "would import"
        } else {
            "imported"
        };
        let _ = writeln!(
            out,
            "{verb} {} into {}: {} ({} tokens, ${:.2}), status {}",
            self.from,
            self.dir,
            loopx_core::words::count(self.iterations, "iteration"),
            self.tokens,
            self.usd,
            self.state_status
        );
        if let Some(run_id) = &self.run_id {
            let _ = writeln!(out, "  run         {run_id}");
        }
        if let Some(source_run_id) = &self.source_run_id {
            let _ = writeln!(out, "  source run  {source_run_id}");
        }
        let _ = writeln!(out, "  goal focus  {}", self.enforcement_mode);
        for (what, map) in [
            ("contract", &self.goal_contract),
            ("registry", &self.approach_registry),
        ] {
            if let Some(map) = map {
                let source = map
                    .source_revision
                    .map_or("unnumbered".to_owned(), |r| format!("revision {r}"));
                let _ = writeln!(
                    out,
                    "  {what:<11} source {source} -> revision {} ({})",
                    map.revision, map.fingerprint
                );
            }
        }
        if let Some(plan) = &self.plan {
            let direction = plan
                .selection
                .as_ref()
                .map_or("no direction selected".to_owned(), |s| {
                    s.approach_ids.join(", ")
                });
            let _ = writeln!(
                out,
                "  plan        source {} -> {}: {direction}",
                plan.source_state, plan.state
            );
            if let Some(reason) = &plan.reason {
                let _ = writeln!(out, "              {reason}");
            }
        }
        let _ = writeln!(
            out,
            "  decisions   {} in the source, {} pending",
            self.source_decisions, self.pending_decisions
        );
        for signal in &self.signals {
            let _ = writeln!(
                out,
                "  signal      {} {}: {}",
                signal.file, signal.signal, signal.value
            );
        }
        for ambiguity in &self.ambiguities {
            let _ = writeln!(out, "  ambiguous   {ambiguity}");
        }
        if self.dry_run {
            let _ = writeln!(out, "nothing was written: pass --apply to create the loop");
        }
        out
    }
}

/// The source as read and parsed.
struct Source {
    files: Vec<SourceFile>,
    state: SourceLoopState,
    budget: SourceBudget,
    iterations: Vec<(usize, SourceIteration)>,
    contract: Option<Revisioned<GoalContract>>,
    registry: Option<Revisioned<ApproachRegistry>>,
    plan: Option<SourcePlan>,
    decisions: Vec<SourceDecision>,
    priority: Option<SourcePriority>,
    /// What was read but could not be carried over as it was.
    warnings: Vec<String>,
}

/// A Goal Focus document in loopx's shape, with the revision the source gave it.
struct Revisioned<D> {
    revision: Option<u64>,
    document: D,
}

fn refused(message: String) -> AppError {
    AppError::refused(message)
}

/// Read `name` below `root`, no link followed; `None` when it is absent.
fn read_file(root: &Path, name: &'static str, limit: u64) -> Result<Option<Vec<u8>>, AppError> {
    let path = LoopPath::parse(name).expect("the source file names are plain names");
    match fsutil::read_confined(root, &path, limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(loopx_core::path::FileProblem::Missing) => Ok(None),
        Err(problem) => Err(refused(format!(
            "{}/{name} {}: import reads only regular files inside the source directory; nothing was written",
            root.display(),
            problem.describe()
        ))),
    }
}

fn utf8<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str, AppError> {
    std::str::from_utf8(bytes).map_err(|e| {
        refused(format!(
            "{name} is not UTF-8 (at byte {}): nothing was written",
            e.valid_up_to()
        ))
    })
}

fn optional<T: DeserializeOwned>(
    bytes: &Option<Vec<u8>>,
    name: &str,
) -> Result<Option<T>, AppError> {
    bytes
        .as_deref()
        .map(|b| parse_document(name, b))
        .transpose()
}

fn parse_document<T: DeserializeOwned>(name: &str, bytes: &[u8]) -> Result<T, AppError> {
    serde_json::from_str(utf8(name, bytes)?).map_err(|e| {
        refused(format!(
            "{name} line {} column {}: {}; fix the file, then import again; nothing was written",
            e.line(),
            e.column(),
            without_location(&e)
        ))
    })
}

/// A JSON error's message without serde's own "at line L column C": the
/// caller names the place in the file, which for JSON Lines is not the
/// line serde counted.
fn without_location(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_owned()
}

/// Each non-blank line of a JSON Lines file, with its line number.
fn parse_lines<T: DeserializeOwned>(name: &str, bytes: &[u8]) -> Result<Vec<(usize, T)>, AppError> {
    let text = utf8(name, bytes)?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| {
            refused(format!(
                "{name} line {} column {}: {}; fix the line, then import again; nothing was written",
                index + 1,
                e.column(),
                without_location(&e)
            ))
        })?;
        out.push((index + 1, value));
    }
    Ok(out)
}

impl Source {
    fn read(root: &Path) -> Result<Source, AppError> {
        let mut files = Vec::new();
        let mut raw: Vec<Option<Vec<u8>>> = Vec::new();
        for name in FILES {
            let limit = match name.ends_with(".jsonl") {
                true => JOURNAL_BYTES,
                false => DOCUMENT_BYTES,
            };
            let bytes = read_file(root, name, limit)?;
            if let Some(bytes) = &bytes {
                files.push(SourceFile {
                    file: name,
                    bytes: bytes.len() as u64,
                    digest: Digest::of_bytes(bytes),
                });
            }
            raw.push(bytes);
        }
        let [state, budget, iterations, contract, registry, plan, decisions, priority] =
            <[Option<Vec<u8>>; 8]>::try_from(raw).expect("one entry per file");
        let required = |bytes: Option<Vec<u8>>, name: &str| {
            bytes.ok_or_else(|| {
                refused(format!(
                    "{} has no {name}: it is not a loop directory of the reference runtime; nothing was written",
                    root.display()
                ))
            })
        };
        let contract = optional::<SourceContract>(&contract, CONTRACT)?.map(|c| Revisioned {
            revision: c.goal_revision,
            document: c.contract(),
        });
        let mut warnings = Vec::new();
        let registry = optional::<SourceRegistry>(&registry, REGISTRY)?.map(|r| {
            let (document, lost) = r.registry();
            warnings.extend(lost);
            Revisioned {
                revision: r.registry_revision,
                document,
            }
        });
        Ok(Source {
            files,
            warnings,
            state: parse_document(LOOP_STATE, &required(state, LOOP_STATE)?)?,
            budget: parse_document(BUDGET, &required(budget, BUDGET)?)?,
            iterations: match &iterations {
                Some(bytes) => parse_lines(ITERATIONS, bytes)?,
                None => Vec::new(),
            },
            contract,
            registry,
            plan: optional(&plan, PLAN)?,
            decisions: match &decisions {
                Some(bytes) => parse_lines::<SourceDecision>(DECISIONS, bytes)?
                    .into_iter()
                    .map(|(_, d)| d)
                    .collect(),
                None => Vec::new(),
            },
            priority: optional(&priority, PRIORITY)?,
        })
    }

    /// The enforcement mode of the new loop: the source plan's, else
    /// `default`, a new loop's.
    fn mode(&self, default: (GoalFocusMode, ModeSource)) -> (GoalFocusMode, ModeSource) {
        match self.plan.as_ref().and_then(|p| p.enforcement_mode) {
            Some(mode) => (mode, ModeSource::Imported),
            None => default,
        }
    }

    fn init(&self, default_mode: (GoalFocusMode, ModeSource)) -> InitLoop {
        let budget = Budget {
            max_iterations: self.budget.max_iterations,
            max_wall_time_seconds: self.budget.max_wall_time_seconds,
            max_tokens: self.budget.max_tokens,
            max_usd: self.budget.max_usd,
        };
        let mut init = InitLoop::new(&self.state.goal, &self.state.success_criteria, budget);
        if let Some(mode) = self.state.default_mode {
            init.default_mode = mode;
        }
        if let Some(rule) = &self.state.plateau_rule {
            init.plateau_rule = rule.clone();
        }
        if let Some(stop) = &self.state.stop_conditions {
            init.stop_conditions = StopConditions {
                require_user_stop_only: stop.require_user_stop_only,
                user_overrides: stop.user_overrides.clone(),
            };
        }
        let (mode, source) = self.mode(default_mode);
        init.goal_focus_mode = mode;
        init.goal_focus_mode_source = Some(source);
        init
    }

    /// When the loop began: `loop_state.created_at`, else its first record.
    fn created_at(&self, now: Timestamp) -> Timestamp {
        self.state
            .created_at
            .or_else(|| self.iterations.first().map(|(_, i)| i.timestamp))
            .unwrap_or(now)
    }

    /// The directions the plan's fields name, in order, deduplicated.
    fn plan_approaches(plan: &SourcePlan) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        let named = plan.selection.iter().flat_map(|s| s.approach_ids.iter());
        for id in named.chain(plan.approach_id.iter()) {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        ids
    }

    /// Every direction signal, and every disagreement among them.
    fn signals(&self) -> (Vec<DirectionSignal>, Vec<String>) {
        let mut signals = Vec::new();
        let mut ambiguities = Vec::new();
        let mut signal = |file, signal, value: String| {
            signals.push(DirectionSignal {
                file,
                signal,
                value,
            })
        };
        if let Some(path) = &self.state.next_preferred_path {
            signal(LOOP_STATE, "next_preferred_path", path.clone());
        }
        if let Some((_, last)) = self.iterations.last() {
            let campaign = last.campaign_id();
            if !campaign.is_empty() {
                signal(ITERATIONS, "last_campaign", campaign);
            }
        }
        let plan_campaign = self.plan.as_ref().and_then(|p| {
            p.campaign_id.clone().or_else(|| {
                p.selection
                    .as_ref()
                    .and_then(|s| s.campaign_ids.first().cloned())
            })
        });
        if let Some(plan) = &self.plan {
            signal(PLAN, "plan_state", plan.state.clone());
            let approaches = Self::plan_approaches(plan);
            if !approaches.is_empty() {
                signal(PLAN, "selected_approach", approaches.join(", "));
            }
            if let Some(campaign) = &plan_campaign {
                signal(PLAN, "selected_campaign", campaign.clone());
            }
            if let (Some(single), Some(selection)) = (&plan.approach_id, &plan.selection) {
                if !selection.approach_ids.is_empty() && !selection.approach_ids.contains(single) {
                    ambiguities.push(format!(
                        "{PLAN} selects two directions: approach_id {single:?} and selection.approach_ids {:?}",
                        selection.approach_ids
                    ));
                }
            }
            let pins = [
                (
                    "goal_revision",
                    plan.goal_revision,
                    CONTRACT,
                    self.contract.as_ref().and_then(|c| c.revision),
                ),
                (
                    "registry_revision",
                    plan.registry_revision,
                    REGISTRY,
                    self.registry.as_ref().and_then(|r| r.revision),
                ),
            ];
            for (field, pinned, file, actual) in pins {
                if let Some(pinned) = pinned {
                    signal(PLAN, field, pinned.to_string());
                    if Some(pinned) != actual {
                        ambiguities.push(format!(
                            "{PLAN} is pinned to {field} {pinned}, but {file} is at {}",
                            actual.map_or("no revision".to_owned(), |r| r.to_string())
                        ));
                    }
                }
            }
        }
        let pending: Vec<&SourceDecision> = self
            .decisions
            .iter()
            .filter(|d| d.status.as_deref() == Some("pending"))
            .collect();
        for decision in &pending {
            signal(
                DECISIONS,
                "pending_decision",
                format!(
                    "{} ({})",
                    decision.decision_id,
                    decision
                        .approach_id
                        .as_deref()
                        .unwrap_or("no approach named")
                ),
            );
            ambiguities.push(format!(
                "{DECISIONS} holds decision {:?} still pending: which direction it settles on is not known",
                decision.decision_id
            ));
        }
        let committed = self
            .decisions
            .iter()
            .rev()
            .find(|d| d.status.as_deref() != Some("pending"));
        if let Some(last) = committed {
            signal(
                DECISIONS,
                "last_decision",
                format!(
                    "{} for plan {} ({})",
                    last.decision_id,
                    last.plan_revision
                        .map_or("unnumbered".to_owned(), |r| r.to_string()),
                    last.approach_id.as_deref().unwrap_or("no approach named")
                ),
            );
            if let (Some(plan), Some(approach)) = (&self.plan, &last.approach_id) {
                let approaches = Self::plan_approaches(plan);
                let same_plan =
                    last.plan_revision.is_none() || last.plan_revision == plan.plan_revision;
                if same_plan && !approaches.is_empty() && !approaches.contains(approach) {
                    ambiguities.push(format!(
                        "{DECISIONS} last selected approach {approach:?}, but {PLAN} selects {approaches:?}"
                    ));
                }
            }
        }
        if let Some(priority) = &self.priority {
            let enabled = priority.enabled.unwrap_or(false);
            signal(
                PRIORITY,
                "priority",
                format!(
                    "{} ({})",
                    if enabled { "enabled" } else { "disabled" },
                    priority.discipline_mode.as_deref().unwrap_or("soft")
                ),
            );
            if let Some(campaign) = &priority.campaign_id {
                signal(PRIORITY, "priority_campaign", campaign.clone());
                if let Some(plan_campaign) = plan_campaign.as_ref().filter(|_| enabled) {
                    if plan_campaign != campaign {
                        ambiguities.push(format!(
                            "{PRIORITY} puts campaign {campaign:?} first, but {PLAN} selects campaign {plan_campaign:?}"
                        ));
                    }
                }
            }
        }
        (signals, ambiguities)
    }

    /// The selection the plan carries over, or why none is.
    fn plan_selection(&self, ambiguous: bool) -> Result<Option<Selection>, String> {
        let Some(plan) = &self.plan else {
            return Err("the source has no plan".into());
        };
        if plan.state != "active" {
            return Err(format!(
                "the source plan is {}, not active: it selects no direction to follow",
                plan.state
            ));
        }
        if ambiguous {
            return Err(
                "the source's direction signals disagree (see ambiguities): import does not choose among them; run `loopx goal-focus replan` once they are resolved".into(),
            );
        }
        let approaches = Self::plan_approaches(plan);
        if approaches.is_empty() {
            return Err("the source plan is active but names no approach".into());
        }
        let selection = plan.selection.as_ref();
        // The campaigns are the registry's for these approaches; a plan
        // that names others disagrees with its own registry.
        let registry = self.registry.as_ref().map(|r| &r.document);
        let mut campaign_ids: Vec<String> = Vec::new();
        for approach in &approaches {
            let found = registry.and_then(|r| r.approach(approach));
            if let Some(campaign) = found.map(|c| c.campaign_id.to_owned()) {
                if !campaign_ids.contains(&campaign) {
                    campaign_ids.push(campaign);
                }
            }
        }
        let named = selection.iter().flat_map(|s| s.campaign_ids.iter());
        if let Some(other) = named
            .chain(plan.campaign_id.iter())
            .find(|c| !campaign_ids.contains(c))
        {
            return Err(format!(
                "the source plan names campaign {other:?}, but {REGISTRY} puts its approaches in {campaign_ids:?}: import does not choose between them"
            ));
        }
        Ok(Some(Selection {
            kind: selection
                .and_then(|s| s.kind)
                .unwrap_or(if approaches.len() == 1 {
                    SelectionKind::Exploit
                } else {
                    SelectionKind::Experiment
                }),
            approach_ids: approaches,
            campaign_ids,
            horizon_iterations: selection
                .and_then(|s| s.horizon_iterations)
                .or(plan.horizon_iterations)
                .unwrap_or(focus::direction::EXPLOIT_ITERATIONS),
            rationale: match selection.map(|s| s.rationale.trim()) {
                Some(text) if !text.is_empty() => text.to_owned(),
                _ => "carried over from the imported loop's current plan".into(),
            },
        }))
    }
}

fn record_of(source: &SourceIteration, operation_id: OperationId) -> IterationRecord {
    let e = &source.evidence_checked;
    let progress = source.progress_assessment.as_ref();
    IterationRecord {
        iteration: source.iteration,
        timestamp: source.timestamp,
        operation_id,
        mode: source.mode,
        objective: source.objective.clone(),
        decision: source.decision,
        stop_reason: source.stop_reason.clone(),
        evidence_checked: EvidenceChecked {
            source_ids: e.source_ids.clone(),
            claim_ids: e.claim_ids.clone(),
            evidence_ids: e.evidence_ids.clone(),
            guard_refs: e.guard_refs.clone(),
        },
        input_refs: source.input_refs.clone(),
        actions_taken: source.actions_taken.clone(),
        remaining_gaps: source.remaining_gaps.clone(),
        output: source.output.clone(),
        budget_delta: BudgetDelta {
            iterations: source.budget_delta.iterations,
            tokens: source.budget_delta.tokens,
            usd: source.budget_delta.usd,
            wall_time_seconds: source.budget_delta.wall_time_seconds,
        },
        completed_summary: source.completed_summary.clone(),
        current_summary: source.current_summary.clone(),
        proposed_next_action: source.proposed_next_action.clone(),
        executor_provider: flat_or_nested(
            &source.executor_provider,
            source
                .execution
                .as_ref()
                .map(|e| e.executor_provider.as_str()),
        ),
        dispatch_id: String::new(),
        claim: None,
        // Reviewed, if at all, by the runtime that wrote it, not by loopx.
        bank: None,
        direction: Direction {
            global_delta: flat_or_nested(
                &source.global_delta,
                progress.map(|p| p.global_delta.as_str()),
            ),
            campaign_delta: flat_or_nested(
                &source.campaign_delta,
                progress.map(|p| p.campaign_delta.as_str()),
            ),
            obligation_ids: match (&source.obligation_ids, progress) {
                (flat, Some(p)) if flat.is_empty() => p.obligation_ids.clone(),
                (flat, _) => flat.clone(),
            },
            campaign_id: source.campaign_id(),
            goal_contribution: source.goal_contribution.clone(),
            ..Direction::default()
        },
    }
}

/// Every request the import commits, in order, each already decided once
/// in memory against the state the previous ones leave.
struct Plan {
    init: InitLoop,
    /// Fresh for every import: the run id is derived from it, and two
    /// imports of one source are two loops.
    init_operation: OperationId,
    created_at: Timestamp,
    records: Vec<IterationRecord>,
    ledger: Ledger,
    contract: Option<GoalContract>,
    registry: Option<ApproachRegistry>,
    plan: Option<ImportPlan>,
    view: ImportView,
}

fn operation(text: &str) -> OperationId {
    OperationId::parse(text).expect("import operation ids are plain")
}

fn iteration_operation(n: u64) -> OperationId {
    operation(&format!("import-iteration-{n}"))
}

/// The init of an import: `import-init-` and a random suffix.
fn init_operation() -> OperationId {
    operation(&format!(
        "import-init-{:016x}",
        crate::platform::random_u64()
    ))
}
const FOCUS_OPERATION: &str = "import-focus";

/// Decide every request in memory: what apply would commit, and each
/// refusal it would meet, named by file and line.
fn plan(source: &Source, from: &Path, to: &Path, now: Timestamp) -> Result<Plan, AppError> {
    // The reference keeps a loop's panel.json in the loop directory: a
    // source with an enabled panel gets a new loop's default with one.
    let init = source.init(crate::panel::mode_for_new_loop(None, from)?);
    let created_at = source.created_at(now);
    let init_id = init_operation();
    let decided = LedgerOwner::decide(
        None,
        &LedgerRequest::Init(init.clone()),
        &ledger_context(created_at, &init_id),
    )
    .map_err(|e| refused(format!("{LOOP_STATE} / {BUDGET}: {e}; nothing was written")))?;
    let mut ledger = LedgerOwner::evolve(None, decided.event.as_ref().expect("init writes"));
    let mut records = Vec::new();
    for (line, source_record) in &source.iterations {
        let id = iteration_operation(source_record.iteration);
        let record = record_of(source_record, id.clone());
        let request = LedgerRequest::ImportIteration(Box::new(record.clone()));
        let decided = LedgerOwner::decide(Some(&ledger), &request, &ledger_context(now, &id))
            .map_err(|e| {
                refused(format!(
                    "{ITERATIONS} line {line} (iteration {}): {e}; nothing was written",
                    source_record.iteration
                ))
            })?;
        let event = decided.event.expect("an import writes");
        ledger = LedgerOwner::evolve_owned(Some(ledger), event);
        records.push(record);
    }
    if let Some(spent) = &source.budget.spent() {
        let agrees = spent.iterations == ledger.spent.iterations
            && spent.tokens == ledger.spent.tokens
            && (spent.usd - ledger.spent.usd).abs() < 1e-6;
        if !agrees {
            return Err(refused(format!(
                "{BUDGET} says {} iterations, {} tokens and ${} spent, but {ITERATIONS} adds up to {}, {} and ${}: the source disagrees with itself; fix one of them, then import again; nothing was written",
                spent.iterations, spent.tokens, spent.usd,
                ledger.spent.iterations, ledger.spent.tokens, ledger.spent.usd
            )));
        }
    }
    if let Some(status) = &source.state.status {
        let imported = ledger.status.as_str();
        // `initialized` and `running` differ only in whether a record exists.
        let equivalent = status == imported
            || (status == "running" && imported == "initialized")
            || (status == "initialized" && imported == "running");
        if !equivalent {
            return Err(refused(format!(
                "{LOOP_STATE} says status {status:?}, but its iterations leave the loop {imported}: the source disagrees with itself; nothing was written"
            )));
        }
    }
    let (signals, ambiguities) = source.signals();
    // Every value shown is checked as the loop's own text is: bounded, and
    // free of control characters a terminal would act on.
    for signal in &signals {
        let limit = match signal.signal {
            "next_preferred_path" => limits::NOTE,
            _ => limits::LINE,
        };
        text::check(
            &format!("{} {}", signal.file, signal.signal),
            &signal.value,
            limit,
        )
        .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    if let Some(run_id) = &source.state.run_id {
        text::check(&format!("{LOOP_STATE} run_id"), run_id, limits::LINE)
            .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    if let Some(rationale) = source.plan.iter().flat_map(|p| &p.selection).next() {
        text::check(
            &format!("{PLAN} selection.rationale"),
            &rationale.rationale,
            limits::NOTE,
        )
        .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    let mode = init.goal_focus_mode;
    let clock = Clock { now };
    let contract = match &source.contract {
        Some(c) => Some(
            decide_document::<GoalContract>(None, &c.document, &clock)
                .map_err(|e| refused(format!("{CONTRACT}: {e}; nothing was written")))?,
        ),
        None => None,
    };
    let registry = match &source.registry {
        Some(r) => Some(
            decide_document::<ApproachRegistry>(None, &r.document, &clock)
                .map_err(|e| refused(format!("{REGISTRY}: {e}; nothing was written")))?,
        ),
        None => None,
    };
    let contract_now = contract
        .clone()
        .unwrap_or_else(|| unwritten(GoalContract::from_init(&ledger.config)));
    let registry_now = registry
        .clone()
        .unwrap_or_else(|| unwritten(ApproachRegistry::default()));
    let mut plan_view = None;
    let mut import_plan = None;
    if let Some(source_plan) = source.plan.as_ref().filter(|_| mode != GoalFocusMode::Off) {
        let (selection, reason) = match source.plan_selection(!ambiguities.is_empty()) {
            Ok(selection) => (selection, None),
            Err(reason) => (None, Some(reason)),
        };
        let mut request = ImportPlan {
            selection,
            valid_through_iteration: source_plan.valid_through_iteration,
        };
        let plan_context = PlanContext {
            now,
            mode,
            ledger: &ledger,
            contract: &contract_now,
            registry: &registry_now,
            read_plan_revision: 0,
        };
        // A selection the registry cannot hold (undefined, ineligible) is
        // one more disagreement: kept needs_replan, and said why.
        let (drafted, reason) = match draft_import(None, &request, &plan_context) {
            Ok(plan) => (plan, reason),
            Err(refusal) => {
                request.selection = None;
                let plan = draft_import(None, &request, &plan_context)
                    .map_err(|e| refused(format!("{PLAN}: {e}; nothing was written")))?;
                (
                    plan,
                    Some(format!("{refusal}; the plan is kept without it")),
                )
            }
        };
        let reason = match (mode, &drafted.proposal.selection, reason) {
            (GoalFocusMode::Enforce, Some(_), None) => Some(
                "enforce mode: the carried-over direction waits for a different-family strategy review before it is selected".to_owned(),
            ),
            (_, _, reason) => reason,
        };
        plan_view = Some(PlanImport {
            source_revision: source_plan.plan_revision,
            source_state: source_plan.state.clone(),
            state: drafted.state.to_string(),
            selection: drafted.selection.clone(),
            reason,
        });
        import_plan = Some(request);
    }
    let goal_contract = contract.as_ref().map(|d| RevisionMap {
        source_revision: source.contract.as_ref().and_then(|c| c.revision),
        revision: d.revision,
        fingerprint: d.pin().fingerprint,
    });
    let approach_registry = registry.as_ref().map(|d| RevisionMap {
        source_revision: source.registry.as_ref().and_then(|r| r.revision),
        revision: d.revision,
        fingerprint: d.pin().fingerprint,
    });
    let pending = source
        .decisions
        .iter()
        .filter(|d| d.status.as_deref() == Some("pending"))
        .count() as u64;
    let view = ImportView {
        status: "ok",
        action: "import",
        dry_run: true,
        from: from.display().to_string(),
        dir: to.display().to_string(),
        sources: source.files.clone(),
        run_id: None,
        source_run_id: source.state.run_id.clone(),
        enforcement_mode: mode,
        iterations: ledger.spent.iterations,
        tokens: ledger.spent.tokens,
        usd: ledger.spent.usd,
        state_status: ledger.status,
        created_at,
        goal_contract,
        approach_registry,
        plan: plan_view,
        source_decisions: source.decisions.len() as u64,
        pending_decisions: pending,
        signals,
        ambiguities,
        warnings: source.warnings.clone(),
    };
    Ok(Plan {
        init,
        init_operation: init_id,
        created_at,
        records,
        ledger,
        contract: contract.map(|c| c.document),
        registry: registry.map(|r| r.document),
        plan: import_plan,
        view,
    })
}

/// Imports read no loop file: an imported early stop keeps the verdict of
/// the runtime that recorded it (see `import_guard`).
fn ledger_context(now: Timestamp, operation_id: &OperationId) -> LedgerContext<'_> {
    LedgerContext {
        now,
        operation_id,
        files: &NoFiles,
    }
}

fn unwritten<D>(document: D) -> Revised<D> {
    Revised {
        revision: 0,
        revised_at: None,
        document,
    }
}

fn decide_document<D: focus::Document>(
    state: Option<&Revised<D>>,
    document: &D,
    clock: &Clock,
) -> Result<Revised<D>, focus::FocusError> {
    let request = Revise {
        base_revision: Some(0),
        document: document.clone(),
    };
    let decided = DocumentOwner::<D>::decide(state, &request, clock)?;
    Ok(match decided.event {
        Some(event) => DocumentOwner::<D>::evolve(state.cloned(), &event),
        None => state
            .cloned()
            .expect("only an existing document is unchanged"),
    })
}

/// Where the new loop may go: `to` must not exist, or be an empty
/// directory, and must not be inside the source (which import never
/// writes to).
fn check_target(from: &Path, to: &Path) -> Result<(), AppError> {
    if to.join(DATABASE).symlink_metadata().is_ok() {
        return Err(refused(format!(
            "{} already holds a loop: import creates a new loop and never writes into an existing one; choose a new --dir; nothing was written",
            to.display()
        )));
    }
    match std::fs::read_dir(to) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(refused(format!(
                    "{} exists and is not empty: import creates the loop directory itself; choose a new --dir; nothing was written",
                    to.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(refused(format!(
                "{} cannot be used as the new loop directory ({e}); choose a new --dir; nothing was written",
                to.display()
            )))
        }
    }
    let target = absolute(to)?;
    if target.starts_with(from) {
        return Err(refused(format!(
            "{} is inside the source {}: import never writes into the source; choose a --dir outside it; nothing was written",
            to.display(),
            from.display()
        )));
    }
    Ok(())
}

/// `path` made absolute through its nearest existing ancestor (links in
/// that ancestor resolved), so it compares with a canonical source path.
fn absolute(path: &Path) -> Result<PathBuf, AppError> {
    let path = std::path::absolute(path).map_err(anyhow::Error::new)?;
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            // `..` below a directory that does not exist: where it leads
            // cannot be known before it is created, so it is not guessed.
            (Some(_), None) => {
                return Err(refused(format!(
                    "{} goes up (`..`) out of a directory that does not exist yet: name the new loop directory without it; nothing was written",
                    path.display()
                )))
            }
            _ => return Ok(path.clone()),
        }
    }
}

/// `loopx import --from FROM --dir TO [--apply]`.
/// `store`: the store the caller named (`--store`), which import refuses:
/// an imported loop is built in its own file.
pub fn import(
    from: &Path,
    to: &Path,
    apply: bool,
    store: Option<&str>,
) -> Result<ImportView, AppError> {
    let root = from.canonicalize().map_err(|e| {
        AppError::not_found(format!(
            "cannot open the source {} ({e}): name the reference runtime's loop directory with --from",
            from.display()
        ))
    })?;
    if !root.is_dir() {
        return Err(refused(format!(
            "the source {} is not a directory: name the reference runtime's loop directory with --from",
            from.display()
        )));
    }
    let now = clock::now();
    let source = Source::read(&root)?;
    check_target(&root, to)?;
    let plan = plan(&source, from, to, now)?;
    if !apply {
        return Ok(plan.view);
    }
    if store_locator(store)?.is_some() {
        return Err(refused(format!(
            "import --apply creates the loop with its own {DATABASE}, but the store given names another one: drop it (--store, or {}) to import; nothing was written",
            crate::driver::env::STORE
        )));
    }
    create(plan, to, now)
}

/// Build the loop in a fresh directory beside `to`, then rename it into
/// place: until the rename there is no loop at `to`; after it, a complete
/// one. A build that fails removes its directory.
fn create(plan: Plan, to: &Path, now: Timestamp) -> Result<ImportView, AppError> {
    let target = absolute(to)?;
    let parent = target
        .parent()
        .ok_or_else(|| refused(format!("{} has no parent directory", to.display())))?;
    let name = target
        .file_name()
        .ok_or_else(|| refused(format!("{} names no directory", to.display())))?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let building = parent.join(format!(
        ".{}.import-{:016x}",
        name.to_string_lossy(),
        crate::platform::random_u64()
    ));
    let built = build(&plan, &building, now);
    let result = built.and_then(|mut view| {
        loopx_store::failpoint::reached("import.before_rename");
        // rename(2) replaces an empty directory and refuses a non-empty one.
        std::fs::rename(&building, &target).with_context(|| {
            format!(
                "cannot move the new loop into {} (did something appear there meanwhile?)",
                to.display()
            )
        })?;
        crate::platform::sync_dir(parent)?;
        view.dry_run = false;
        Ok(view)
    });
    let mut view = match result {
        Ok(view) => view,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&building);
            return Err(error.into());
        }
    };
    // The loop is in place: the views (which name its directory) are
    // written from there, and what goes wrong now is only a warning.
    match LoopDir::open(
        crate::loop_dir::Place::new(&target, None),
        Access::ReadWrite,
    ) {
        Ok(dir) => {
            view.dir = dir.display();
            view.warnings.extend(dir.refresh_views());
        }
        Err(error) => view
            .warnings
            .push(crate::loop_dir::view_warning("the views", error)),
    }
    Ok(view)
}

fn build(plan: &Plan, building: &Path, now: Timestamp) -> anyhow::Result<ImportView> {
    // Unsynced while it is built: nobody sees this directory until it is
    // complete, synced (below) and renamed into place.
    let dir = LoopDir::create_unsynced(building)?;
    let authority = dir.authority();
    let init_id = plan.init_operation.clone();
    let receipt = authority.execute::<LedgerOwner>(
        STREAM,
        &init_id,
        &LedgerRequest::Init(plan.init.clone()),
        &ledger_context(plan.created_at, &init_id),
        now,
    )?;
    let run_id = match receipt.body {
        loopx_core::ledger::LedgerReceipt::Init { run_id, .. } => run_id,
        _ => unreachable!("init yields an init receipt"),
    };
    for record in &plan.records {
        let id = record.operation_id.clone();
        authority.execute::<LedgerOwner>(
            STREAM,
            &id,
            &LedgerRequest::ImportIteration(Box::new(record.clone())),
            &ledger_context(now, &id),
            now,
        )?;
    }
    let focus_id = operation(FOCUS_OPERATION);
    let clock = Clock { now };
    if let Some(contract) = &plan.contract {
        let request = Revise {
            base_revision: Some(0),
            document: contract.clone(),
        };
        authority.execute::<ContractOwner>(
            focus::CONTRACT_STREAM,
            &focus_id,
            &request,
            &clock,
            now,
        )?;
    }
    if let Some(registry) = &plan.registry {
        let request = Revise {
            base_revision: Some(0),
            document: registry.clone(),
        };
        authority.execute::<RegistryOwner>(
            focus::REGISTRY_STREAM,
            &focus_id,
            &request,
            &clock,
            now,
        )?;
    }
    if let Some(request) = &plan.plan {
        let reading = dir.focus()?;
        let context = PlanContext {
            now,
            mode: reading.mode(),
            ledger: &reading.ledger,
            contract: &reading.contract,
            registry: &reading.registry,
            read_plan_revision: 0,
        };
        authority.execute::<ImportedPlanOwner>(
            focus::PLAN_STREAM,
            &focus_id,
            request,
            &context,
            now,
        )?;
        authority.execute::<ImportedDecisionOwner>(
            focus::DECISIONS_STREAM,
            &focus_id,
            &RecordImport {
                decision_id: focus_id.to_string(),
                plan: request.clone(),
            },
            &DecisionContext {
                plan: &context,
                replaced: None,
            },
            now,
        )?;
    }
    let Reading { ledger, .. } = dir.read()?;
    anyhow::ensure!(
        ledger == plan.ledger,
        "the committed ledger differs from the one decided in memory: nothing is moved into place"
    );
    let mut view = plan.view.clone();
    view.run_id = Some(run_id);
    dir.sync_built()?;
    Ok(view)
}
