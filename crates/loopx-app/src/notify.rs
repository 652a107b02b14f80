//! The `notify-event` use case and the driver's automatic events: build a
//! notify v2 event from the caller's facts and the loop's state, redact it,
//! and hand it to the transports the loop's `notify.json` configures —
//! always the local audit log, and, when the event may leave the host, a
//! command hook and webhooks, each delivered at most once per event
//! fingerprint.
//!
//! Rules kept here: the profile is chosen from `notify.json`, then the
//! environment; in Goal Focus enforce mode nothing leaves the host without
//! the egress consent variable; wait ticks stay local; a delivery is
//! remembered only after its transport reported success; a failed
//! notification never changes loop state and never fails the driver.
//!
//! Not here: the event's shape, redaction and renderings (the core's
//! `loopx_core::notify`), HTTP and processes ([`transport`]).

pub mod transport;

use crate::error::AppError;
use crate::loop_dir::LoopDir;
use crate::{clock, platform};
use loopx_core::digest::Digest;
use loopx_core::driver;
use loopx_core::driver::session::{Exit, TurnResult};
use loopx_core::ending::ending;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::Ledger;
use loopx_core::notify::{
    render, Event, Facts, Format, IterationStatus, Profile, Progress, Status,
};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::time::Duration;
use transport::{Attempted, Bounds, Webhook};

/// The loop's notification configuration, beside its database.
pub const CONFIG_FILE: &str = "notify.json";
/// Every event that was notified, redacted, one JSON object a line.
pub const AUDIT_FILE: &str = "notify_audit.jsonl";
/// Which transport has delivered which event fingerprint.
pub const DELIVERED_FILE: &str = "notify_delivered.jsonl";
/// The profile when `notify.json` names none.
pub const PROFILE_ENV: &str = "AAS_AUTOLOOP_NOTIFY_BODY_PROFILE";
/// The explicit consent an enforce-mode loop needs before anything leaves.
pub const EGRESS_ENV: &str = "AAS_AUTOLOOP_EXTERNAL_NOTIFY_EGRESS";

/// Event kinds that are local progress only: they would be spam remotely.
const LOCAL_ONLY_KINDS: &[&str] = &[
    "strategy_review_wait",
    "goal_focus_wait",
    "result_review_wait",
    "wait_tick",
];

/// Path and query parts of a webhook URL this long are treated as tokens;
/// shorter ones are words like `sendMessage` or `api`.
const SHORTEST_URL_TOKEN: usize = 16;

const DEFAULT_TIMEOUT_SECONDS: u64 = 5;
const MAX_TIMEOUT_SECONDS: u64 = 30;
const DEFAULT_ATTEMPTS: u32 = 3;
const MAX_ATTEMPTS: u32 = 5;

/// `notify.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_profile: Option<String>,
    /// The operator's name for this research: the title's first choice.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub research_title: String,
    /// Extra strings redacted wherever they appear (webhook URLs and
    /// authorization values are redacted without being listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// A command hook: program and arguments; the body arrives on stdin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// What the command hook receives: markdown (default), plain,
    /// telegram_html or compact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_format: Option<Format>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<Webhook>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

impl Config {
    /// The loop's `notify.json`, checked; none is the empty configuration.
    pub fn read(dir: &LoopDir) -> Result<Config, AppError> {
        let path = dir.path(CONFIG_FILE);
        let bytes = match crate::fsutil::read_no_follow(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => {
                return Err(AppError::refused(format!(
                    "could not read {}: {e}",
                    path.display()
                )))
            }
        };
        let config: Config = serde_json::from_slice(&bytes).map_err(|e| {
            AppError::refused(format!(
                "{} is not a valid notification configuration: {e}",
                path.display()
            ))
        })?;
        config.check(&path.display().to_string())?;
        Ok(config)
    }

    fn check(&self, file: &str) -> Result<(), AppError> {
        if let Some(profile) = &self.body_profile {
            profile
                .parse::<Profile>()
                .map_err(|e| AppError::refused(format!("{file}: {e}")))?;
        }
        let allow_local_http =
            std::env::var(transport::ALLOW_LOCAL_HTTP_ENV).is_ok_and(|v| v == "1");
        for (i, hook) in self.webhooks.iter().enumerate() {
            transport::check_url(&hook.url, allow_local_http).map_err(|why| {
                AppError::refused(format!("{file}: webhook {} {why}", hook_name(hook, i)))
            })?;
        }
        if matches!(self.timeout_seconds, Some(0)) || matches!(self.attempts, Some(0)) {
            return Err(AppError::refused(format!(
                "{file}: timeout_seconds and attempts must be at least 1"
            )));
        }
        Ok(())
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            timeout: Duration::from_secs(
                self.timeout_seconds
                    .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                    .min(MAX_TIMEOUT_SECONDS),
            ),
            attempts: self.attempts.unwrap_or(DEFAULT_ATTEMPTS).min(MAX_ATTEMPTS),
        }
    }

    /// Everything configured that must never leave in a body: the extra
    /// secrets, every webhook URL (their paths often are the credential)
    /// and the authorization values the environment holds.
    fn known_secrets(&self) -> Vec<String> {
        let mut known = self.secrets.clone();
        for hook in &self.webhooks {
            known.push(hook.url.clone());
            // A token in the path or the query (Telegram's bot token, a
            // Slack hook's path) is redacted also when quoted on its own.
            if let Some((_, rest)) = hook.url.split_once("://") {
                if let Some((_, path)) = rest.split_once('/') {
                    known.push(path.to_owned());
                    known.extend(
                        path.split(['/', '?', '&', '='])
                            .filter(|part| part.len() >= SHORTEST_URL_TOKEN)
                            .map(str::to_owned),
                    );
                }
            }
            known.extend(hook.authorization());
        }
        known.retain(|s| !s.is_empty());
        // Longest first: a secret that contains another is replaced whole.
        known.sort_by_key(|s| std::cmp::Reverse(s.len()));
        known
    }

    /// The profile: `notify.json`, then the environment, then the default.
    /// (loopx has no standing orders; the order is otherwise the
    /// reference's.)
    fn profile(&self) -> Result<Profile, AppError> {
        if let Some(profile) = &self.body_profile {
            return profile
                .parse()
                .map_err(|e: loopx_core::notify::NotifyProblem| AppError::refused(e.to_string()));
        }
        match std::env::var(PROFILE_ENV) {
            Ok(name) if !name.is_empty() => {
                name.parse()
                    .map_err(|e: loopx_core::notify::NotifyProblem| {
                        AppError::refused(format!("{PROFILE_ENV}: {e}"))
                    })
            }
            _ => Ok(Profile::default()),
        }
    }
}

fn hook_name(hook: &Webhook, index: usize) -> String {
    if hook.name.is_empty() {
        format!("#{}", index + 1)
    } else {
        format!("{:?}", hook.name)
    }
}

/// What one transport did with the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub transport: String,
    /// delivered, duplicate (delivered before), failed, or withheld
    /// (not allowed to leave the host).
    pub outcome: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The four renderings, for a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renderings {
    pub markdown: String,
    pub plain: String,
    pub telegram_html: String,
    pub compact: String,
}

/// What `notify-event` did.
#[derive(Debug, Clone, Serialize)]
pub struct NotifyView {
    pub dry_run: bool,
    /// The event as it left (or would leave) the host: redacted.
    pub event: Event,
    pub fingerprint: String,
    /// Whether the event may leave the host, and why not.
    pub external: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub local_only_reason: String,
    /// The body in the event's own profile (Markdown).
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renderings: Option<Renderings>,
    pub deliveries: Vec<Delivery>,
}

/// One line of the audit log.
#[derive(Serialize)]
struct AuditLine<'a> {
    recorded_at: jiff::Timestamp,
    fingerprint: &'a str,
    event: &'a Event,
    deliveries: &'a [Delivery],
}

/// Notify `facts` for the loop in `dir`: fill in what the loop knows (the
/// goal, progress, loop status, the research title, the time, the
/// profile), redact, then — unless `dry_run` — deliver and audit.
pub fn notify_event(
    dir: &LoopDir,
    mut facts: Facts,
    dry_run: bool,
) -> Result<NotifyView, AppError> {
    let config = Config::read(dir)?;
    let ledger = dir.read()?.ledger;
    complete_facts(dir, &ledger, &config, &mut facts)?;
    let known = config.known_secrets();
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    let event = Event::build(facts)
        .map_err(|e| AppError::refused(e.to_string()))?
        .redacted(&known);
    let fingerprint = event.fingerprint();
    let (external, local_only_reason) = may_leave(&ledger, &config, &event.event);
    let body = render(&event, Format::Markdown);
    if dry_run {
        return Ok(NotifyView {
            dry_run,
            renderings: Some(Renderings {
                markdown: body.clone(),
                plain: render(&event, Format::Plain),
                telegram_html: render(&event, Format::TelegramHtml),
                compact: render(&event, Format::Compact),
            }),
            event,
            fingerprint: fingerprint.as_str().to_owned(),
            external,
            local_only_reason,
            body,
            deliveries: Vec::new(),
        });
    }
    let deliveries = deliver(dir, &config, &event, &fingerprint, external);
    let line = AuditLine {
        recorded_at: clock::now(),
        fingerprint: fingerprint.as_str(),
        event: &event,
        deliveries: &deliveries,
    };
    append_line(&dir.path(AUDIT_FILE), &line)
        .map_err(|e| AppError::from(e.context("could not append to the notification audit log")))?;
    Ok(NotifyView {
        dry_run,
        event,
        fingerprint: fingerprint.as_str().to_owned(),
        external,
        local_only_reason,
        body,
        renderings: None,
        deliveries,
    })
}

/// The driver's automatic event: as [`notify_event`], but it never fails
/// and never changes loop state; a problem is said on stderr and dropped.
pub fn automatic(dir: &LoopDir, facts: Facts) {
    if let Err(error) = notify_event(dir, facts, false) {
        eprintln!("loopx drive: notification not sent: {}", error.message);
    }
}

fn complete_facts(
    dir: &LoopDir,
    ledger: &Ledger,
    config: &Config,
    facts: &mut Facts,
) -> Result<(), AppError> {
    facts.profile = config.profile()?;
    if facts.research_title.is_empty() {
        facts.research_title = config.research_title.clone();
    }
    facts.dir_name = dir
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if facts.goal.is_empty() {
        facts.goal = ledger.config.goal.clone();
    }
    facts.occurred_at = facts.occurred_at.or_else(|| Some(clock::now()));
    let budget = &ledger.config.budget;
    facts.progress = Progress {
        iterations_used: ledger.spent.iterations,
        iterations_remaining: (budget.max_iterations > 0)
            .then(|| budget.remaining_iterations(&ledger.spent)),
        tokens_used: ledger.spent.tokens,
        usd_used: ledger.spent.usd,
        goal: std::mem::take(&mut facts.progress.goal),
    };
    // How the loop ended, in the words every view uses; else its status.
    let verdict = dir.verdict(ledger, clock::now());
    let driver = driver::summary(&dir.driver()?.1, platform::alive);
    facts.status = Status {
        loop_status: ending(ledger, &verdict, &driver).map_or_else(
            || ledger.status.as_str().to_owned(),
            |ending| ending.words(),
        ),
        ..facts.status.clone()
    };
    Ok(())
}

/// Whether the event may leave the host, and if not, why.
fn may_leave(ledger: &Ledger, config: &Config, kind: &str) -> (bool, String) {
    if config.command.is_empty() && config.webhooks.is_empty() {
        return (false, "no external transport is configured".into());
    }
    if LOCAL_ONLY_KINDS.contains(&kind) {
        return (false, format!("{kind} is local progress only"));
    }
    let consent = std::env::var(EGRESS_ENV).is_ok_and(|v| v == "allow");
    if ledger.config.goal_focus_mode == GoalFocusMode::Enforce && !consent {
        return (
            false,
            format!("the loop is in Goal Focus enforce mode and {EGRESS_ENV}=allow is not set"),
        );
    }
    (true, String::new())
}

/// A delivered (transport, fingerprint) pair, as the dedupe file holds it.
#[derive(Serialize, Deserialize, PartialEq, Eq)]
struct Delivered {
    transport: String,
    fingerprint: String,
}

fn delivered_before(dir: &LoopDir) -> Vec<Delivered> {
    crate::fsutil::read_no_follow(&dir.path(DELIVERED_FILE))
        .map(|bytes| {
            bytes
                .split(|b| *b == b'\n')
                .filter_map(|line| serde_json::from_slice(line).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// One configured way out.
enum Target<'a> {
    Command,
    Webhook(&'a Webhook),
}

/// The configured transports with the names the audit log and the dedupe
/// memory know them by.
fn targets(config: &Config) -> Vec<(String, Target<'_>)> {
    let command = (!config.command.is_empty()).then(|| ("command".to_owned(), Target::Command));
    command
        .into_iter()
        .chain(config.webhooks.iter().enumerate().map(|(i, hook)| {
            (
                format!("webhook {}", hook_name(hook, i)),
                Target::Webhook(hook),
            )
        }))
        .collect()
}

fn deliver(
    dir: &LoopDir,
    config: &Config,
    event: &Event,
    fingerprint: &Digest,
    external: bool,
) -> Vec<Delivery> {
    let skipped = |transport: String, outcome: &str| Delivery {
        transport,
        outcome: outcome.into(),
        attempts: 0,
        detail: String::new(),
    };
    if !external {
        return targets(config)
            .into_iter()
            .map(|(name, _)| skipped(name, "withheld"))
            .collect();
    }
    let before = delivered_before(dir);
    let bounds = config.bounds();
    let key = &fingerprint.as_str()["sha256:".len()..];
    targets(config)
        .into_iter()
        .map(|(name, target)| {
            let mark = Delivered {
                transport: name.clone(),
                fingerprint: fingerprint.as_str().to_owned(),
            };
            if before.contains(&mark) {
                return skipped(name, "duplicate");
            }
            let attempted = match target {
                Target::Command => {
                    let format = config.command_format.unwrap_or(Format::Markdown);
                    transport::run_command(&config.command, &render(event, format), bounds)
                }
                Target::Webhook(hook) => {
                    let (content_type, body) = transport::webhook_body(hook, event);
                    transport::post(hook, content_type, &body, key, bounds)
                }
            };
            outcome(dir, name, mark, attempted)
        })
        .collect()
}

/// Remember a success, then report it. A success that cannot be
/// remembered is still a success; the next send may repeat it, which is
/// what the receiver's idempotency key is for.
fn outcome(dir: &LoopDir, transport: String, mark: Delivered, attempted: Attempted) -> Delivery {
    let mut detail = attempted.detail;
    if attempted.delivered {
        if let Err(e) = append_line(&dir.path(DELIVERED_FILE), &mark) {
            detail = format!("{detail}; not remembered: {e}");
        }
    }
    Delivery {
        transport,
        outcome: if attempted.delivered {
            "delivered"
        } else {
            "failed"
        }
        .into(),
        attempts: attempted.attempts,
        detail,
    }
}

/// Append one JSON line in a single write to a private file.
fn append_line(path: &std::path::Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    let mut file = platform::append_private(path)?;
    file.write_all(&line)?;
    Ok(())
}

/// The driver's event after a turn: `iteration_ok` with what the recorded
/// iteration says, or `iteration_failed` with why. Never fails.
pub fn after_turn(dir: &LoopDir, provider: &str, result: TurnResult) {
    let Ok(reading) = dir.read() else { return };
    let ledger = reading.ledger;
    let mut facts = Facts {
        agents: loopx_core::notify::Agents {
            executor: provider.to_owned(),
            ..Default::default()
        },
        ..Facts::default()
    };
    if result == TurnResult::Advanced {
        let Some(record) = ledger.recent.last() else {
            return;
        };
        facts.kind = "iteration_ok".into();
        facts.iteration = Some(record.iteration);
        facts.status.iteration = IterationStatus::Success;
        facts.timing.finished_at = Some(record.timestamp);
        facts.completed = record.completed_summary.clone();
        facts.current = record.current_summary.clone();
        facts.plan = record.proposed_next_action.clone();
        facts.decision = record.decision.as_str().to_owned();
        facts.decision_reason = record.stop_reason.clone();
        if !record.executor_provider.is_empty() {
            facts.agents.executor = record.executor_provider.clone();
        }
    } else {
        facts.kind = "iteration_failed".into();
        facts.iteration = Some(ledger.spent.iterations + 1);
        facts.status.iteration = IterationStatus::Failure;
        facts.timing.finished_at = Some(clock::now());
        facts.issues.runtime_errors = vec![result.sentence().to_owned()];
        // Two failures of the same attempt are two events.
        facts.event_id = format!("iteration_failed-{}", platform::nonce());
    }
    automatic(dir, facts);
}

/// The driver's event when it waits for a provider's quota to reset.
pub fn quota_wait(dir: &LoopDir, provider: &str, until: jiff::Timestamp, reason: &str) {
    automatic(
        dir,
        Facts {
            kind: "quota_wait".into(),
            event_id: format!("quota_wait-{provider}-{}", until.as_second()),
            status: Status {
                iteration: IterationStatus::Waiting,
                ..Status::default()
            },
            agents: loopx_core::notify::Agents {
                executor: provider.to_owned(),
                ..Default::default()
            },
            current: format!("{reason}; waiting until {until}"),
            ..Facts::default()
        },
    );
}

/// The driver's event when it stops: `auth_dead` when the provider's login
/// is gone, `stop` otherwise, with the reason.
/// The driver's stop, saying how it ended and which transport its
/// provider processes ran under (`transport`, as views say it).
pub fn stopped(dir: &LoopDir, exit: Exit, reason: &str, transport: &str) {
    let kind = if exit == Exit::AuthDead {
        "auth_dead"
    } else {
        "stop"
    };
    automatic(
        dir,
        Facts {
            kind: kind.into(),
            decision: "stop".into(),
            decision_reason: format!(
                "{} (exit {}): {reason}; provider processes ran {transport}",
                exit.reason(),
                exit.code()
            ),
            issues: loopx_core::notify::Issues {
                runtime_errors: (exit.code() != 0)
                    .then(|| reason.to_owned())
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
            ..Facts::default()
        },
    );
}
