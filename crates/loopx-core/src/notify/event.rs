//! The structured notification event (notify v2, schema 2.1): its fields,
//! their enumerations, how it is built from the facts the runtime supplies
//! and from a legacy flat progress record, its redaction before it leaves
//! the host, and its fingerprint for deduplication.
//!
//! Not here: how it reads (`render`), where it goes and whether it may go
//! (the application layer's transports), or any clock: times arrive as
//! arguments.

use crate::digest::Digest;
use crate::redact::{redact_outbound, redact_outbound_object};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

pub const SCHEMA: &str = "loopx.notify.v2";
pub const SCHEMA_VERSION: &str = "2.1";

/// How the body is laid out. Stored on the event so that a re-render (a
/// retry, another transport) reads the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Status and event time first, every research section, a trailer.
    #[default]
    OperatorFull,
    /// Title, status, event time, completed/current/plan, progress; errors
    /// only when present.
    OperatorCompact,
    /// The v2.0 lead: goal, completed, current, plan first.
    Legacy,
}

impl Profile {
    pub const NAMES: &'static str = "operator_full, operator_compact, legacy";

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::OperatorFull => "operator_full",
            Profile::OperatorCompact => "operator_compact",
            Profile::Legacy => "legacy",
        }
    }
}

impl FromStr for Profile {
    type Err = NotifyProblem;
    fn from_str(text: &str) -> Result<Self, NotifyProblem> {
        match text {
            "operator_full" => Ok(Profile::OperatorFull),
            "operator_compact" => Ok(Profile::OperatorCompact),
            "legacy" => Ok(Profile::Legacy),
            other => Err(NotifyProblem::Unknown {
                field: "body_profile",
                value: other.to_owned(),
                allowed: Profile::NAMES,
            }),
        }
    }
}

/// What happened to the attempted iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IterationStatus {
    Running,
    Success,
    Failure,
    Error,
    Waiting,
    Paused,
    #[default]
    NotApplicable,
}

impl IterationStatus {
    pub const NAMES: &'static str =
        "running, success, failure, error, waiting, paused, not_applicable";

    pub fn as_str(self) -> &'static str {
        match self {
            IterationStatus::Running => "running",
            IterationStatus::Success => "success",
            IterationStatus::Failure => "failure",
            IterationStatus::Error => "error",
            IterationStatus::Waiting => "waiting",
            IterationStatus::Paused => "paused",
            IterationStatus::NotApplicable => "not_applicable",
        }
    }

    /// A finish time means something only once the attempt is over.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            IterationStatus::Success | IterationStatus::Failure | IterationStatus::Error
        )
    }
}

impl FromStr for IterationStatus {
    type Err = NotifyProblem;
    fn from_str(text: &str) -> Result<Self, NotifyProblem> {
        [
            IterationStatus::Running,
            IterationStatus::Success,
            IterationStatus::Failure,
            IterationStatus::Error,
            IterationStatus::Waiting,
            IterationStatus::Paused,
            IterationStatus::NotApplicable,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| NotifyProblem::Unknown {
            field: "iteration status",
            value: text.to_owned(),
            allowed: IterationStatus::NAMES,
        })
    }
}

/// The result review of the iteration, kept apart from operational errors:
/// a different-family reviewer rejecting the work is not a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    #[default]
    NotRequired,
    Pending,
    Passed,
    Failed,
    Error,
}

impl ReviewStatus {
    pub const NAMES: &'static str = "not_required, pending, passed, failed, error";

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::NotRequired => "not_required",
            ReviewStatus::Pending => "pending",
            ReviewStatus::Passed => "passed",
            ReviewStatus::Failed => "failed",
            ReviewStatus::Error => "error",
        }
    }
}

impl FromStr for ReviewStatus {
    type Err = NotifyProblem;
    fn from_str(text: &str) -> Result<Self, NotifyProblem> {
        [
            ReviewStatus::NotRequired,
            ReviewStatus::Pending,
            ReviewStatus::Passed,
            ReviewStatus::Failed,
            ReviewStatus::Error,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| NotifyProblem::Unknown {
            field: "review status",
            value: text.to_owned(),
            allowed: ReviewStatus::NAMES,
        })
    }
}

/// How one compute run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeStatus {
    Succeeded,
    Failed,
    Cancelled,
    Unknown,
}

impl ComputeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ComputeStatus::Succeeded => "succeeded",
            ComputeStatus::Failed => "failed",
            ComputeStatus::Cancelled => "cancelled",
            ComputeStatus::Unknown => "unknown",
        }
    }
}

/// One explicitly reported compute run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeRun {
    /// local, hetzner, kaggle, modal, github-actions, or other:<slug>.
    pub service: String,
    pub status: ComputeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
}

const COMPUTE_SERVICES: &str = "local, hetzner, kaggle, modal, github-actions or other:<slug>";

impl ComputeRun {
    /// A run from its JSON, as an operator or a script reports it.
    pub fn parse(json: &str) -> Result<ComputeRun, NotifyProblem> {
        let run: ComputeRun =
            serde_json::from_str(json).map_err(|e| NotifyProblem::BadCompute(e.to_string()))?;
        let service_ok = match run.service.strip_prefix("other:") {
            Some(slug) => {
                !slug.is_empty()
                    && slug.len() <= 40
                    && slug
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }
            None => matches!(
                run.service.as_str(),
                "local" | "hetzner" | "kaggle" | "modal" | "github-actions"
            ),
        };
        if !service_ok {
            return Err(NotifyProblem::Unknown {
                field: "compute service",
                value: run.service,
                allowed: COMPUTE_SERVICES,
            });
        }
        Ok(run)
    }
}

/// Compute provenance. `reported: false` is a legacy or unreported event;
/// `reported: true` with no runs is an explicit "no compute used".
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Compute {
    pub reported: bool,
    pub runs: Vec<ComputeRun>,
}

/// Who took part in one role. A reported empty list means the role was not
/// used; `reported: false` means nobody said.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentGroup {
    pub reported: bool,
    pub agents: Vec<String>,
}

impl AgentGroup {
    pub fn of(agents: Vec<String>) -> AgentGroup {
        AgentGroup {
            reported: true,
            agents,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Agents {
    /// The provider that performed the attempted iteration.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub executor: String,
    pub driver: AgentGroup,
    /// Panel agents that actually returned usable work, never the invite list.
    pub panel: AgentGroup,
    pub other: AgentGroup,
}

/// Separate statuses: the attempt, its review, and the loop as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Status {
    pub iteration: IterationStatus,
    pub review: ReviewStatus,
    #[serde(rename = "loop")]
    pub loop_status: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    pub iterations_used: u64,
    /// Absent when the loop has no iteration budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations_remaining: Option<u64>,
    pub tokens_used: u64,
    pub usd_used: f64,
    /// Goal and obligation progress in plain words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal: String,
}

/// Only what was recorded: a start is never invented from a finish.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Timing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
}

/// Operational errors and review failures, each omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Issues {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_errors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_failures: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Presentation {
    pub body_profile: Profile,
}

/// One notification, finalized: every fact it states was supplied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub schema: String,
    pub schema_version: String,
    pub event_id: String,
    /// The event kind: `iteration_ok`, `iteration_failed`, `quota_wait`, …
    pub event: String,
    pub title: String,
    /// The research identity alone: a stable thread or topic name for
    /// transports that group messages (Zulip's topic).
    pub topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u64>,
    pub status: Status,
    pub progress: Progress,
    pub timing: Timing,
    pub agents: Agents,
    pub compute: Compute,
    pub issues: Issues,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completed: String,
    /// Banked claim ids or gists; only ever what was banked and reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub decision: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub decision_reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan: String,
    pub presentation: Presentation,
    /// Anything else the runtime attached; never rendered, still redacted.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extensions: Map<String, Value>,
}

/// Why an event could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyProblem {
    Unknown {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
    BadCompute(String),
    BadKind(String),
}

impl fmt::Display for NotifyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyProblem::Unknown {
                field,
                value,
                allowed,
            } => write!(f, "{field} {value:?} is not known: use one of {allowed}"),
            NotifyProblem::BadCompute(why) => write!(
                f,
                "a compute run must be a JSON object {{\"service\": …, \"status\": succeeded|failed|cancelled|unknown, \"job_ref\"?: …}}: {why}"
            ),
            NotifyProblem::BadKind(kind) => write!(
                f,
                "event kind {kind:?} is not valid: use 1-64 lowercase letters, digits or '_' (iteration_ok, stop, …)"
            ),
        }
    }
}

impl std::error::Error for NotifyProblem {}

/// The facts the runtime supplies for one event. Everything optional is
/// left out of the event when absent; nothing is inferred.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub kind: String,
    pub event_id: String,
    /// The operator's name for this research, when configured.
    pub research_title: String,
    /// The loop directory's name, the last resort for a title.
    pub dir_name: String,
    pub occurred_at: Option<Timestamp>,
    pub iteration: Option<u64>,
    pub status: Status,
    pub progress: Progress,
    pub timing: Timing,
    pub agents: Agents,
    /// `None`: not reported (legacy). `Some(vec![])`: no compute used.
    pub compute: Option<Vec<ComputeRun>>,
    pub issues: Issues,
    pub goal: String,
    pub completed: String,
    pub results: Vec<String>,
    pub current: String,
    pub decision: String,
    pub decision_reason: String,
    pub plan: String,
    pub profile: Profile,
    pub extensions: Map<String, Value>,
}

/// Directory names that say nothing about the research.
const GENERIC_NAMES: &[&str] = &[".loopx", "loopx", "loop", "run", "research", "state", "."];
const TITLE_IDENTITY_CHARS: usize = 80;

/// The research identity: the configured title, then the goal's first
/// line, then a non-generic directory name; never a generic loop name
/// while one of those exists.
pub fn research_identity(research_title: &str, goal: &str, dir_name: &str) -> String {
    let first_line = |text: &str| text.lines().next().unwrap_or("").trim().to_owned();
    let title = first_line(research_title);
    if !title.is_empty() {
        return shorten(&title, TITLE_IDENTITY_CHARS);
    }
    let goal = first_line(goal);
    if !goal.is_empty() {
        return shorten(&goal, TITLE_IDENTITY_CHARS);
    }
    let dir = dir_name.trim();
    if !dir.is_empty() && !GENERIC_NAMES.contains(&dir.to_ascii_lowercase().as_str()) {
        return dir.to_owned();
    }
    "loopx loop".to_owned()
}

/// `text` cut to at most `max` characters, marked with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn check_kind(kind: &str) -> Result<(), NotifyProblem> {
    let ok = !kind.is_empty()
        && kind.len() <= 64
        && kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(NotifyProblem::BadKind(kind.to_owned()))
    }
}

impl Event {
    /// The event the facts describe: the title resolved from the research
    /// identity and the outcome, compute `reported` only when supplied.
    pub fn build(facts: Facts) -> Result<Event, NotifyProblem> {
        check_kind(&facts.kind)?;
        let identity = research_identity(&facts.research_title, &facts.goal, &facts.dir_name);
        let outcome = match facts.iteration {
            Some(n) => format!("iteration {n} {}", facts.status.iteration.as_str()),
            None => facts.kind.replace('_', " "),
        };
        let title = format!("{identity} — {outcome}");
        let event_id = if facts.event_id.is_empty() {
            match facts.iteration {
                Some(n) => format!("{}-{n}", facts.kind),
                None => facts.kind.clone(),
            }
        } else {
            facts.event_id
        };
        let mut timing = facts.timing;
        if !facts.status.iteration.is_terminal() {
            timing.finished_at = None;
        }
        Ok(Event {
            schema: SCHEMA.to_owned(),
            schema_version: SCHEMA_VERSION.to_owned(),
            event_id,
            event: facts.kind,
            title,
            topic: identity,
            occurred_at: facts.occurred_at,
            iteration: facts.iteration,
            status: facts.status,
            progress: facts.progress,
            timing,
            agents: facts.agents,
            compute: match facts.compute {
                Some(runs) => Compute {
                    reported: true,
                    runs,
                },
                None => Compute::default(),
            },
            issues: facts.issues,
            goal: facts.goal,
            completed: facts.completed,
            results: facts.results,
            current: facts.current,
            decision: facts.decision,
            decision_reason: facts.decision_reason,
            plan: facts.plan,
            presentation: Presentation {
                body_profile: facts.profile,
            },
            extensions: facts.extensions,
        })
    }

    /// The event as it may leave the host: every string — extensions and
    /// the event id included — through the one outbound redaction, with
    /// `known` (the configured transport secrets) matched literally. An id
    /// that carried a secret becomes a deterministic opaque id, so retries
    /// and dedupe still agree.
    pub fn redacted(&self, known: &[&str]) -> Event {
        let mut event = self.clone();
        let clean_id = redact_outbound(&event.event_id, known);
        if clean_id != event.event_id {
            event.event_id = opaque_id(&event.event_id);
        }
        for text in event.texts_mut() {
            let clean = redact_outbound(text, known);
            if clean != *text {
                *text = clean;
            }
        }
        redact_outbound_object(&mut event.extensions, known);
        event
    }

    fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let Event {
            title,
            topic,
            event,
            status,
            progress,
            agents,
            compute,
            issues,
            goal,
            completed,
            results,
            current,
            decision,
            decision_reason,
            plan,
            ..
        } = self;
        [
            title,
            topic,
            event,
            &mut status.loop_status,
            &mut progress.goal,
            &mut agents.executor,
            goal,
            completed,
            current,
            decision,
            decision_reason,
            plan,
        ]
        .into_iter()
        .chain(results.iter_mut())
        .chain(agents.driver.agents.iter_mut())
        .chain(agents.panel.agents.iter_mut())
        .chain(agents.other.agents.iter_mut())
        .chain(issues.runtime_errors.iter_mut())
        .chain(issues.review_failures.iter_mut())
        .chain(
            compute
                .runs
                .iter_mut()
                .flat_map(|run| std::iter::once(&mut run.service).chain(run.job_ref.as_mut())),
        )
    }
}

/// The opaque id a secret-bearing event id becomes.
pub fn opaque_id(id: &str) -> String {
    let digest = Digest::of_bytes(id.as_bytes());
    format!("evt-{}", &digest.as_str()["sha256:".len()..][..24])
}

/// The event a legacy flat progress record describes (`goal`, `completed`,
/// `current`, `plan`, `status`, `iteration`, `provider`, `event`). It
/// reports no compute, no agent groups and no results: a legacy record
/// never said, and the converter does not guess.
pub fn from_legacy(flat: &Map<String, Value>, research_title: &str, dir_name: &str) -> Facts {
    let text = |key: &str| {
        flat.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let iteration_status = match text("status").as_str() {
        "ok" | "success" => IterationStatus::Success,
        "failed" | "failure" => IterationStatus::Failure,
        "error" => IterationStatus::Error,
        "waiting" => IterationStatus::Waiting,
        "running" => IterationStatus::Running,
        _ => IterationStatus::NotApplicable,
    };
    let kind = text("event");
    Facts {
        kind: if kind.is_empty() {
            "progress".into()
        } else {
            kind
        },
        research_title: research_title.to_owned(),
        dir_name: dir_name.to_owned(),
        iteration: flat.get("iteration").and_then(Value::as_u64),
        status: Status {
            iteration: iteration_status,
            ..Status::default()
        },
        agents: Agents {
            executor: text("provider"),
            ..Agents::default()
        },
        goal: text("goal"),
        completed: text("completed"),
        current: text("current"),
        plan: text("plan"),
        profile: Profile::Legacy,
        ..Facts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_prefers_the_research_title_then_the_goal_never_a_generic_name() {
        assert_eq!(
            research_identity("Bridge lemma", "goal", "run"),
            "Bridge lemma"
        );
        assert_eq!(research_identity("", "Prove B\nmore", "run"), "Prove B");
        assert_eq!(research_identity("", "", "run"), "loopx loop");
        assert_eq!(research_identity("", "", "ramsey-r5"), "ramsey-r5");
    }

    #[test]
    fn the_legacy_converter_never_invents_results_compute_or_agents() {
        let flat =
            serde_json::json!({"goal": "g", "completed": "c", "status": "ok", "iteration": 2});
        let event = Event::build(from_legacy(flat.as_object().unwrap(), "", "d")).unwrap();
        assert!(!event.compute.reported && event.compute.runs.is_empty());
        assert!(event.results.is_empty());
        assert!(!event.agents.panel.reported && !event.agents.driver.reported);
        assert_eq!(event.presentation.body_profile, Profile::Legacy);
    }

    #[test]
    fn explicit_no_compute_is_reported_with_no_runs() {
        let event = Event::build(Facts {
            kind: "iteration_ok".into(),
            compute: Some(vec![]),
            ..Facts::default()
        })
        .unwrap();
        assert!(event.compute.reported && event.compute.runs.is_empty());
    }

    #[test]
    fn a_finish_time_is_dropped_while_the_iteration_is_not_over() {
        let now: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let event = Event::build(Facts {
            kind: "quota_wait".into(),
            status: Status {
                iteration: IterationStatus::Waiting,
                ..Status::default()
            },
            timing: Timing {
                started_at: None,
                finished_at: Some(now),
            },
            ..Facts::default()
        })
        .unwrap();
        assert_eq!(event.timing, Timing::default());
    }

    #[test]
    fn compute_services_outside_the_list_are_refused() {
        assert!(ComputeRun::parse(r#"{"service":"hetzner","status":"succeeded"}"#).is_ok());
        assert!(ComputeRun::parse(r#"{"service":"other:my-box","status":"unknown"}"#).is_ok());
        assert!(ComputeRun::parse(r#"{"service":"aws","status":"succeeded"}"#).is_err());
        assert!(ComputeRun::parse(r#"{"service":"local","status":"done"}"#).is_err());
    }

    #[test]
    fn a_secret_bearing_event_id_becomes_a_deterministic_opaque_id() {
        let mut facts = Facts {
            kind: "stop".into(),
            event_id: "stop/ghp_0123456789abcdefghijABCDEFGHIJ012345".into(),
            ..Facts::default()
        };
        facts.extensions.insert(
            "deep".into(),
            serde_json::json!({"list": ["mail ada@example.org", {"k": "Hook-Secret-42"}]}),
        );
        let event = Event::build(facts).unwrap();
        let once = event.redacted(&["Hook-Secret-42"]);
        let twice = event.redacted(&["Hook-Secret-42"]);
        assert_eq!(once.event_id, twice.event_id);
        assert!(once.event_id.starts_with("evt-"), "{}", once.event_id);
        let text = serde_json::to_string(&once).unwrap();
        for secret in ["ghp_0123", "Hook-Secret-42", "ada@example.org"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}
