//! Reading the reference runtime's loop directory: each file opened
//! without following a link, bounded, parsed as data (in either shape the
//! reference has written) and never executed; its Goal Focus documents
//! read into loopx's shape. Refusals name the file and line. Not here:
//! what the files become in loopx (`map.rs`).

use super::view::SourceFile;
use crate::{fsutil, AppError};
use jiff::Timestamp;
use loopx_core::digest::{Digest, Hasher};
use loopx_core::focus::compute::ComputePolicy;
use loopx_core::focus::contract::{Criterion, Obligation, ObligationKind, ObligationStatus, Scope};
use loopx_core::focus::direction::SelectionKind;
use loopx_core::focus::registry::{Approach, Campaign, Eligibility, EligibilityStatus, Estimate};
use loopx_core::focus::{ApproachRegistry, GoalContract};
use loopx_core::ledger::vocabulary::{Decision, GoalFocusMode, Mode};
use loopx_core::path::LoopPath;
use serde::de::{DeserializeOwned, Error as _, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// The largest single JSON document read from the source.
const DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;
/// The largest JSON Lines file read from the source (the whole history).
const JOURNAL_BYTES: u64 = 256 * 1024 * 1024;

pub(super) const LOOP_STATE: &str = "loop_state.json";
pub(super) const BUDGET: &str = "budget.json";
pub(super) const ITERATIONS: &str = "iterations.jsonl";
pub(super) const CONTRACT: &str = "goal_contract.json";
pub(super) const REGISTRY: &str = "approach_registry.json";
pub(super) const PLAN: &str = "current_plan.json";
pub(super) const DECISIONS: &str = "direction_decisions.jsonl";
pub(super) const PRIORITY: &str = "goal_priority.json";

/// Every file read, in the order they are listed.
const FILES: [&str; 8] = [
    LOOP_STATE, BUDGET, ITERATIONS, CONTRACT, REGISTRY, PLAN, DECISIONS, PRIORITY,
];

#[derive(Debug, Deserialize)]
pub(super) struct SourceLoopState {
    #[serde(default, deserialize_with = "nonempty")]
    pub(super) run_id: Option<String>,
    pub(super) goal: String,
    pub(super) success_criteria: String,
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default)]
    pub(super) created_at: Option<Timestamp>,
    #[serde(default)]
    pub(super) default_mode: Option<Mode>,
    #[serde(default)]
    pub(super) plateau_rule: Option<String>,
    #[serde(default)]
    pub(super) stop_conditions: Option<SourceStopConditions>,
    #[serde(default)]
    pub(super) next_preferred_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SourceStopConditions {
    #[serde(default)]
    pub(super) require_user_stop_only: bool,
    #[serde(default)]
    pub(super) user_overrides: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SourceBudget {
    pub(super) max_iterations: u64,
    #[serde(default)]
    pub(super) max_wall_time_seconds: u64,
    #[serde(default)]
    pub(super) max_tokens: u64,
    #[serde(default)]
    pub(super) max_usd: f64,
    #[serde(default)]
    pub(super) spent: Option<SourceSpent>,
    /// Today's reference spells the spent budget as flat fields.
    #[serde(default)]
    pub(super) spent_iterations: Option<u64>,
    #[serde(default)]
    pub(super) spent_tokens: Option<u64>,
    #[serde(default)]
    pub(super) spent_usd: Option<f64>,
}

impl SourceBudget {
    /// What the source says was spent, in whichever shape it says it.
    pub(super) fn spent(&self) -> Option<SourceSpent> {
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
pub(super) struct SourceSpent {
    #[serde(default)]
    pub(super) iterations: u64,
    #[serde(default)]
    pub(super) tokens: u64,
    #[serde(default)]
    pub(super) usd: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SourceEvidence {
    pub(super) source_ids: Vec<String>,
    pub(super) claim_ids: Vec<String>,
    pub(super) evidence_ids: Vec<String>,
    pub(super) guard_refs: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SourceDelta {
    #[serde(default = "one")]
    pub(super) iterations: u64,
    #[serde(default)]
    pub(super) tokens: u64,
    #[serde(default)]
    pub(super) usd: f64,
    #[serde(default)]
    pub(super) wall_time_seconds: u64,
}

fn one() -> u64 {
    1
}

/// One line of `iterations.jsonl`.
#[derive(Debug, Deserialize)]
pub(super) struct SourceIteration {
    pub(super) iteration: u64,
    pub(super) timestamp: Timestamp,
    pub(super) mode: Mode,
    pub(super) objective: String,
    pub(super) decision: Decision,
    #[serde(default)]
    pub(super) stop_reason: String,
    #[serde(default)]
    pub(super) evidence_checked: SourceEvidence,
    #[serde(default)]
    pub(super) input_refs: Vec<String>,
    #[serde(default)]
    pub(super) actions_taken: Vec<String>,
    #[serde(default)]
    pub(super) remaining_gaps: Vec<String>,
    #[serde(default)]
    pub(super) output: String,
    pub(super) budget_delta: SourceDelta,
    #[serde(default)]
    pub(super) completed_summary: String,
    #[serde(default)]
    pub(super) current_summary: String,
    #[serde(default)]
    pub(super) proposed_next_action: String,
    #[serde(default)]
    pub(super) executor_provider: String,
    #[serde(default)]
    pub(super) global_delta: String,
    #[serde(default)]
    pub(super) campaign_delta: String,
    #[serde(default)]
    pub(super) obligation_ids: Vec<String>,
    #[serde(default)]
    pub(super) campaign_id: String,
    #[serde(default)]
    pub(super) goal_contribution: String,
    /// Where today's reference keeps the direction and the executor.
    #[serde(default)]
    pub(super) progress_assessment: Option<SourceProgress>,
    #[serde(default)]
    pub(super) goal_focus: Option<SourceIterationFocus>,
    #[serde(default)]
    pub(super) execution: Option<SourceExecution>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SourceProgress {
    pub(super) campaign_delta: String,
    pub(super) global_delta: String,
    pub(super) obligation_ids: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SourceIterationFocus {
    pub(super) campaign_id: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SourceExecution {
    pub(super) executor_provider: String,
}

impl SourceIteration {
    pub(super) fn campaign_id(&self) -> String {
        flat_or_nested(
            &self.campaign_id,
            self.goal_focus.as_ref().map(|f| f.campaign_id.as_str()),
        )
    }
}

/// A top-level text, else the same one nested where today's reference puts it.
pub(super) fn flat_or_nested(flat: &str, nested: Option<&str>) -> String {
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
            // The reference declares trip wires on its plan, free-form: none
            // has a condition loopx could check.
            trip_wires: Vec::new(),
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
    #[serde(default)]
    compute_policy: Option<SourceComputePolicy>,
}

/// An approach's compute policy as the reference writes it: the allowed
/// services as `allowed_services`, `backends` or one `backend`.
#[derive(Debug, Deserialize)]
struct SourceComputePolicy {
    #[serde(default, alias = "backends")]
    allowed_services: Vec<String>,
    #[serde(default)]
    backend: String,
    #[serde(default)]
    forbidden_services: Vec<String>,
}

impl SourceComputePolicy {
    fn policy(&self) -> ComputePolicy {
        let mut allowed = self.allowed_services.clone();
        if !self.backend.trim().is_empty() {
            allowed.push(self.backend.clone());
        }
        ComputePolicy {
            allowed_services: allowed,
            forbidden_services: self.forbidden_services.clone(),
        }
    }
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
                            trip_wires: Vec::new(),
                            compute_policy: a
                                .compute_policy
                                .as_ref()
                                .map(SourceComputePolicy::policy),
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
pub(super) struct SourceSelection {
    #[serde(default)]
    pub(super) kind: Option<SelectionKind>,
    #[serde(default)]
    pub(super) approach_ids: Vec<String>,
    #[serde(default)]
    pub(super) campaign_ids: Vec<String>,
    #[serde(default)]
    pub(super) horizon_iterations: Option<u64>,
    #[serde(default)]
    pub(super) rationale: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct SourcePlan {
    #[serde(default)]
    pub(super) plan_revision: Option<u64>,
    #[serde(default)]
    pub(super) goal_revision: Option<u64>,
    #[serde(default)]
    pub(super) registry_revision: Option<u64>,
    pub(super) state: String,
    #[serde(default)]
    pub(super) enforcement_mode: Option<GoalFocusMode>,
    #[serde(default, deserialize_with = "nonempty")]
    pub(super) campaign_id: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    pub(super) approach_id: Option<String>,
    #[serde(default)]
    pub(super) selection: Option<SourceSelection>,
    #[serde(default)]
    pub(super) horizon_iterations: Option<u64>,
    #[serde(default)]
    pub(super) valid_through_iteration: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SourceDecision {
    pub(super) decision_id: String,
    #[serde(default)]
    pub(super) plan_revision: Option<u64>,
    #[serde(default)]
    pub(super) status: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    pub(super) approach_id: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SourcePriority {
    #[serde(default)]
    pub(super) enabled: Option<bool>,
    #[serde(default)]
    pub(super) discipline_mode: Option<String>,
    #[serde(default, deserialize_with = "nonempty")]
    pub(super) campaign_id: Option<String>,
}

/// The source as read and parsed.
pub(super) struct Source {
    pub(super) files: Vec<SourceFile>,
    pub(super) state: SourceLoopState,
    pub(super) budget: SourceBudget,
    /// `iterations.jsonl`, read a line at a time when it is needed.
    pub(super) iterations: Option<Iterations>,
    pub(super) contract: Option<Revisioned<GoalContract>>,
    pub(super) registry: Option<Revisioned<ApproachRegistry>>,
    pub(super) plan: Option<SourcePlan>,
    pub(super) decisions: Vec<SourceDecision>,
    pub(super) priority: Option<SourcePriority>,
    /// What was read but could not be carried over as it was.
    pub(super) warnings: Vec<String>,
}

/// The source's history, never held whole: it is read a line at a time,
/// once here to check every line and learn what the plan needs from it,
/// then again by each step that maps its records (the dry run's fold in
/// memory, the import's commits), each read checked against the digest
/// of the first, so memory stays flat however long the history is.
#[derive(Clone)]
pub(super) struct Iterations {
    root: PathBuf,
    /// What the first read saw: its size and digest.
    pub(super) file: SourceFile,
    /// The first record's time: when the loop began, if the state says not.
    pub(super) first_timestamp: Option<Timestamp>,
    /// The last record's campaign: a direction signal.
    pub(super) last_campaign: String,
}

impl Iterations {
    /// Read the history once: every line parsed (a refusal names the line).
    fn read(root: &Path) -> Result<Option<Iterations>, AppError> {
        let mut first_timestamp = None;
        let mut last_campaign = String::new();
        let Some(file) = each_line(root, &mut |_, record: SourceIteration| {
            first_timestamp.get_or_insert(record.timestamp);
            last_campaign = record.campaign_id();
            Ok(())
        })?
        else {
            return Ok(None);
        };
        Ok(Some(Iterations {
            root: root.to_owned(),
            file,
            first_timestamp,
            last_campaign,
        }))
    }

    /// Visit each record with its line number, in order; refused if the
    /// file is no longer what the first read saw.
    pub(super) fn each(
        &self,
        visit: &mut dyn FnMut(usize, SourceIteration) -> Result<(), AppError>,
    ) -> Result<(), AppError> {
        let read = each_line(&self.root, visit)?;
        if read.as_ref().map(|f| &f.digest) != Some(&self.file.digest) {
            return Err(refused(format!(
                "{ITERATIONS} changed while it was imported: import again once nothing writes the source; nothing was written"
            )));
        }
        Ok(())
    }
}

/// The longest line of a JSON Lines file: one record, however verbose.
const LINE_BYTES: usize = 4 * 1024 * 1024;

/// Visit each non-blank line of `iterations.jsonl` below `root`, parsed,
/// with its line number, reading a line at a time (no link followed,
/// [`JOURNAL_BYTES`] at most); the file's size and digest, `None` when it
/// is absent.
fn each_line<T: DeserializeOwned>(
    root: &Path,
    visit: &mut dyn FnMut(usize, T) -> Result<(), AppError>,
) -> Result<Option<SourceFile>, AppError> {
    use std::io::{BufRead as _, Read as _};
    let name = ITERATIONS;
    let path = LoopPath::parse(name).expect("the source file names are plain names");
    let file = match fsutil::open_confined(root, &path) {
        Ok(file) => file,
        Err(loopx_core::path::FileProblem::Missing) => return Ok(None),
        Err(problem) => return Err(unreadable(root, name, &problem)),
    };
    let mut reader = std::io::BufReader::new(file.take(JOURNAL_BYTES + 1));
    let mut hasher = Hasher::default();
    let mut bytes = 0u64;
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = (&mut reader)
            .take(LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| {
                unreadable(
                    root,
                    name,
                    &loopx_core::path::FileProblem::Unreadable(e.to_string()),
                )
            })?;
        if read == 0 {
            break;
        }
        bytes += read as u64;
        if bytes > JOURNAL_BYTES {
            let problem = loopx_core::path::FileProblem::TooLarge {
                limit: JOURNAL_BYTES,
            };
            return Err(unreadable(root, name, &problem));
        }
        if line.len() > LINE_BYTES {
            return Err(refused(format!(
                "{name} line {number} is longer than {LINE_BYTES} bytes: one record a line; nothing was written"
            )));
        }
        hasher.update(&line);
        let text = std::str::from_utf8(&line).map_err(|e| {
            refused(format!(
                "{name} line {number} is not UTF-8 (at byte {}): nothing was written",
                e.valid_up_to()
            ))
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        visit(number, parse_line(name, number, text)?)?;
    }
    Ok(Some(SourceFile {
        file: name,
        bytes,
        digest: hasher.finish(),
    }))
}

/// A Goal Focus document in loopx's shape, with the revision the source gave it.
pub(super) struct Revisioned<D> {
    pub(super) revision: Option<u64>,
    pub(super) document: D,
}

pub(super) fn refused(message: String) -> AppError {
    AppError::refused(message)
}

/// Read `name` below `root`, no link followed; `None` when it is absent.
fn read_file(root: &Path, name: &'static str, limit: u64) -> Result<Option<Vec<u8>>, AppError> {
    let path = LoopPath::parse(name).expect("the source file names are plain names");
    match fsutil::read_confined(root, &path, limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(loopx_core::path::FileProblem::Missing) => Ok(None),
        Err(problem) => Err(unreadable(root, name, &problem)),
    }
}

fn unreadable(root: &Path, name: &str, problem: &loopx_core::path::FileProblem) -> AppError {
    refused(format!(
        "{}/{name} {}: import reads only regular files inside the source directory; nothing was written",
        root.display(),
        problem.describe()
    ))
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
        out.push((index + 1, parse_line(name, index + 1, line)?));
    }
    Ok(out)
}

/// Line `number` of the JSON Lines file `name`, parsed.
fn parse_line<T: DeserializeOwned>(name: &str, number: usize, line: &str) -> Result<T, AppError> {
    serde_json::from_str(line).map_err(|e| {
        refused(format!(
            "{name} line {number} column {}: {}; fix the line, then import again; nothing was written",
            e.column(),
            without_location(&e)
        ))
    })
}

impl Source {
    pub(super) fn read(root: &Path) -> Result<Source, AppError> {
        let mut files = Vec::new();
        let mut raw: Vec<Option<Vec<u8>>> = Vec::new();
        let mut iterations = None;
        for name in FILES {
            if name == ITERATIONS {
                iterations = Iterations::read(root)?;
                files.extend(iterations.as_ref().map(|i| i.file.clone()));
                raw.push(None);
                continue;
            }
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
        let [state, budget, _, contract, registry, plan, decisions, priority] =
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
            iterations,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../loopx/tests/fixtures/import/full/iterations.jsonl"
    );

    #[test]
    fn the_history_is_read_a_line_at_a_time_and_a_change_between_reads_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let history = std::fs::read(FULL).unwrap();
        std::fs::write(dir.path().join(ITERATIONS), &history).unwrap();
        let iterations = Iterations::read(dir.path()).unwrap().expect("present");
        assert_eq!(iterations.file.bytes, history.len() as u64);
        assert_eq!(iterations.file.digest, Digest::of_bytes(&history));
        let mut seen = Vec::new();
        iterations
            .each(&mut |line, record| {
                seen.push((line, record.iteration));
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, [(1, 1), (2, 2), (3, 3)]);
        // One more record appended between the reads.
        let mut grown = history.clone();
        grown.extend_from_slice(history.split(|b| *b == b'\n').next().unwrap());
        grown.push(b'\n');
        std::fs::write(dir.path().join(ITERATIONS), &grown).unwrap();
        let error = iterations.each(&mut |_, _| Ok(())).unwrap_err();
        assert!(
            error.message.contains("changed while it was imported"),
            "{error:?}"
        );
    }

    #[test]
    fn an_overlong_line_is_refused_by_its_number_without_reading_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = std::fs::read(FULL).unwrap();
        text.extend(std::iter::repeat_n(b'x', LINE_BYTES + 10));
        std::fs::write(dir.path().join(ITERATIONS), &text).unwrap();
        let error = Iterations::read(dir.path()).err().expect("refused");
        assert!(error.message.contains("line 4 is longer than"), "{error:?}");
    }
}
