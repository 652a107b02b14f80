//! The review panel as the application runs it: `loopx panel --phase
//! result_review` and `drive --panel`, one use case returning a typed view,
//! and `loopx panel --smoke`, which checks the reviewers answer at all.
//!
//! Owns the IO around the panel's rules: reading `panel.json` (confined,
//! bounded), the environment (consent, the session's invite list, endpoint
//! overrides through the provider family), resolving each reviewer's
//! launcher on PATH, the artifacts under
//! `panel/<candidate>/<phase>/<attempt>-<provider>.{prompt,out,json}`
//! (atomic, mode 0600, output redacted), committing each attempt's start
//! before its launch and its outcome after, and handing a well-formed
//! review to `focus::candidate::review`, the one use case that banks a
//! candidate, or a strategy advice to `focus::strategy::review`, the one
//! that commits a reviewed direction. Does not own any rule (`loopx_core::panel` and
//! `loopx_core::focus::review` do) or the process itself: the caller
//! passes a runner (the binary's, which gives it its own process group, a
//! timeout and a bounded capture).

use crate::focus::candidate::{self, family_of, Finalized};
use crate::focus::strategy::{self, StrategyReviewView};
use crate::loop_dir::{LoopDir, Place};
use crate::{clock, fsutil, platform, AppError};
use loopx_core::digest::Digest;
use loopx_core::driver::provider::{self, Family};
use loopx_core::driver::step::PanelBudget;
use loopx_core::focus::candidate::Held;
use loopx_core::focus::review::{ResultReview, SCHEMA};
use loopx_core::focus::strategy::{StrategyAdvice, StrategyBrief, SCHEMA as ADVICE_SCHEMA};
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::BankStatus;
use loopx_core::operation::{Clock, OperationId};
use loopx_core::panel::attempts::{
    AttemptOutcome, AttemptOwner, AttemptRequest, Attempts, ATTEMPTS_STREAM,
};
use loopx_core::panel::config::{self, Skipped};
use loopx_core::panel::{
    brief, consent, PanelConfig, PanelProblem, Phase, Switch, EGRESS_ENV, FILE, PANEL_ENV,
    PROVIDERS_ENV,
};
use loopx_core::path::LoopPath;
use loopx_store::sqlite::Access;
use loopx_store::AuthorityError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most of a reviewer's stdout the host keeps; the rest is read and
/// dropped, so a runaway reviewer fills neither memory nor the disk.
pub const OUTPUT_BYTES: usize = 1 << 20;

/// The largest panel.json read.
const CONFIG_BYTES: u64 = 64 * 1024;

/// Where the panel's artifacts live in the loop directory.
pub const ARTIFACTS: &str = "panel";

/// One reviewer process to run.
#[derive(Debug, Clone)]
pub struct Launch {
    pub provider: String,
    pub binary: String,
    pub args: Vec<String>,
    /// Its working directory: the attempt's own artifact directory, so it
    /// starts with nothing of the project in view.
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// A name for its process record, unique in the loop.
    pub name: String,
}

/// What came of a reviewer process.
#[derive(Debug, Clone)]
pub struct Ran {
    pub exit_status: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// At most [`OUTPUT_BYTES`] of its stdout.
    pub stdout: Vec<u8>,
    /// Whether it wrote more than that.
    pub truncated: bool,
}

/// Why a reviewer process left no answer to read, for a person.
enum Unanswered {
    TimedOut(String),
    Failed(String),
}

impl Ran {
    /// `None` when the process exited 0 before its timeout, so its output
    /// is worth reading.
    fn unanswered(&self, timeout_s: u64) -> Option<Unanswered> {
        if self.timed_out {
            Some(Unanswered::TimedOut(format!(
                "killed (with everything it started) at its {timeout_s}s timeout"
            )))
        } else if self.exit_status != Some(0) {
            let code = self
                .exit_status
                .map_or("a signal".to_owned(), |c| format!("code {c}"));
            Some(Unanswered::Failed(format!("exited with {code}")))
        } else {
            None
        }
    }
}

/// The loop's panel.json, if there is one (refused when it is invalid).
pub fn load_config(dir: &LoopDir) -> Result<Option<PanelConfig>, AppError> {
    config_in(dir.root(), &dir.display())
}

/// The panel.json in the loop directory `root` (which need not be a loop
/// yet: `init` asks), read confined and bounded; `shown` names the
/// directory in messages.
fn config_in(root: &Path, shown: &str) -> Result<Option<PanelConfig>, AppError> {
    let path = LoopPath::parse(FILE).expect("panel.json is a loop path");
    if root.join(FILE).symlink_metadata().is_err() {
        return Ok(None);
    }
    let bytes = fsutil::read_confined(root, &path, CONFIG_BYTES).map_err(|problem| {
        AppError::refused(format!(
            "{shown}: {FILE} {}; it must be a regular file of at most {CONFIG_BYTES} bytes",
            problem.describe()
        ))
    })?;
    PanelConfig::parse(&bytes)
        .map(Some)
        .map_err(|problem| AppError::refused(format!("{shown}/{problem}")))
}

/// Whether `drive --panel <switch>` runs the panel on this loop.
pub fn enabled(dir: &LoopDir, switch: Switch) -> Result<bool, AppError> {
    let config = match switch {
        Switch::Auto => load_config(dir)?,
        _ => None,
    };
    Ok(switch.resolve(std::env::var(PANEL_ENV).ok().as_deref(), config.as_ref()))
}

/// Whether a review panel is configured for the loop directory `root`:
/// what `drive --panel auto` would decide there ([`PANEL_ENV`], else
/// panel.json's `enabled`). A new loop's default mode follows it.
pub fn configured(root: &Path) -> Result<bool, AppError> {
    let config = config_in(root, &root.display().to_string())?;
    Ok(Switch::Auto.resolve(std::env::var(PANEL_ENV).ok().as_deref(), config.as_ref()))
}

/// The enforcement mode (and why) for a new loop in the directory `root`,
/// from `--goal-focus-mode`, else from whether a review panel is
/// configured there ([`configured`]: `AAS_AUTOLOOP_PANEL`,
/// else an enabled `panel.json` placed before `init`). An invalid
/// panel.json is refused rather than read as "no panel".
pub fn mode_for_new_loop(
    requested: Option<loopx_core::ledger::vocabulary::GoalFocusMode>,
    root: &Path,
) -> Result<
    (
        loopx_core::ledger::vocabulary::GoalFocusMode,
        loopx_core::ledger::mode::ModeSource,
    ),
    AppError,
> {
    let panel_configured = match requested {
        Some(_) => false,
        None => configured(root)?,
    };
    Ok(loopx_core::focus::mode::resolve(
        requested,
        panel_configured,
    ))
}

fn attempts(dir: &LoopDir) -> anyhow::Result<Attempts> {
    Ok(dir
        .authority()
        .load::<AttemptOwner>(ATTEMPTS_STREAM)?
        .state
        .unwrap_or_default())
}

/// The panel's attempts in `phase` on `subject` (the pending candidate's
/// fingerprint, or the fingerprint of the plan awaiting strategy review),
/// for the driver's step.
pub fn budget(dir: &LoopDir, phase: Phase, subject: &Digest) -> Result<PanelBudget, AppError> {
    let max = load_config(dir)?.unwrap_or_default().max_attempts;
    let used = attempts(dir)?.used(phase, subject);
    Ok(PanelBudget { used, max })
}

/// One attempt as the panel's view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    pub attempt: u32,
    pub provider: String,
    pub family: Family,
    pub timeout_s: u64,
    pub elapsed_ms: u64,
    pub exit_status: Option<i32>,
    pub outcome: AttemptOutcome,
    pub detail: String,
    /// Loop-relative paths of its prompt, output and review.
    pub artifacts: Vec<String>,
}

/// What `loopx panel` did.
#[derive(Debug, Clone, Serialize)]
pub struct PanelView {
    /// `ok` when an answer decided the subject, else `failed`.
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub phase: Phase,
    /// What was reviewed: the pending candidate's fingerprint
    /// (result_review), or the fingerprint of the plan awaiting review
    /// (strategy_review).
    pub subject: Digest,
    /// `banked_accepted`, `banked_rejected`, `committed` (a strategy
    /// advice was applied), or `pending` (no usable answer).
    pub state: &'static str,
    pub invited: Vec<String>,
    pub skipped: Vec<Skipped>,
    pub attempts: Vec<AttemptView>,
    pub attempts_used: u32,
    pub max_attempts: u32,
    /// What a deciding result review banked.
    pub finalized: Option<Finalized>,
    /// What a deciding strategy advice committed.
    pub committed: Option<StrategyReviewView>,
    /// What went wrong after a commit (an outcome that could not be
    /// recorded): what happened happened regardless.
    pub warnings: Vec<String>,
}

impl PanelView {
    pub fn decided(&self) -> bool {
        self.finalized.is_some() || self.committed.is_some()
    }

    pub fn text(&self) -> String {
        let mut text = String::new();
        for a in &self.attempts {
            text.push_str(&format!(
                "attempt {} [{} / {}] {} in {:.1}s{}\n",
                a.attempt,
                a.provider,
                a.family.name(),
                a.outcome.label(),
                a.elapsed_ms as f64 / 1000.0,
                if a.detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", a.detail)
                }
            ));
        }
        for s in &self.skipped {
            text.push_str(&format!("skipped {}: {}\n", s.provider, s.reason));
        }
        let what = match self.phase {
            Phase::ResultReview => "candidate",
            Phase::StrategyReview => "plan",
        };
        match (&self.finalized, &self.committed) {
            (Some(f), _) => text.push_str(&format!(
                "candidate {} {} as iteration {} on {}'s review",
                self.subject, self.state, f.iteration, f.reviewer_provider
            )),
            (None, Some(c)) => text.push_str(&c.text()),
            (None, None) => text.push_str(&format!(
                "{what} {} stays pending: no usable answer ({} of {} attempts used; nothing committed, nothing charged); artifacts under {}/{}/{}",
                self.subject,
                self.attempts_used,
                self.max_attempts,
                ARTIFACTS,
                short(&self.subject),
                self.phase.name()
            )),
        }
        text
    }
}

fn hex(digest: &Digest) -> &str {
    digest.as_str().trim_start_matches("sha256:")
}

/// The first 12 hex digits of a digest: the subject's artifact folder.
fn short(digest: &Digest) -> String {
    let hex = hex(digest);
    hex[..hex.len().min(12)].to_owned()
}

fn refused(problem: PanelProblem) -> AppError {
    AppError::refused(problem.to_string())
}

fn of_authority(error: AuthorityError<PanelProblem>) -> AppError {
    match error {
        AuthorityError::Rejected(problem) => refused(problem),
        other => anyhow::Error::new(other).into(),
    }
}

/// A directory below the loop directory, each level created private and
/// none reached through a symlink: an agent that plants `panel` as a link
/// does not get the host to write the candidate somewhere else.
fn private_dir(dir: &LoopDir, parts: &[&str]) -> anyhow::Result<PathBuf> {
    let mut path = dir.root().to_path_buf();
    for part in parts {
        path.push(part);
        match path.symlink_metadata() {
            Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {}
            Ok(_) => anyhow::bail!(
                "{} must be a real directory, not a symlink or a file",
                path.display()
            ),
            Err(_) => {
                std::fs::create_dir(&path)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
                platform::make_private_dir(&path)?;
            }
        }
    }
    Ok(path)
}

/// What a phase reviews.
enum Subject {
    /// The pending candidate.
    Candidate(Box<Held>),
    /// The plan awaiting a strategy review, as its brief shows it, and the
    /// executor named on the command line (if any).
    Direction {
        brief: Box<StrategyBrief>,
        executor: Option<String>,
    },
}

impl Subject {
    fn fingerprint(&self) -> Digest {
        match self {
            Subject::Candidate(held) => held.fingerprint.clone(),
            Subject::Direction { brief, .. } => brief.bind.current_plan.fingerprint.clone(),
        }
    }

    fn executor_family(&self) -> Family {
        match self {
            Subject::Candidate(held) => held.candidate.executor_family,
            Subject::Direction { brief, .. } => brief.executor.family,
        }
    }

    /// What `reviewer` is sent.
    fn brief(&self, reviewer: &str) -> String {
        match self {
            Subject::Candidate(held) => {
                brief::result_review(&held.candidate, &held.fingerprint, reviewer)
            }
            Subject::Direction { brief, .. } => brief::strategy_review(brief, reviewer),
        }
    }
}

/// A panel run that passed every check and has written nothing yet.
pub struct Prepared {
    dir: LoopDir,
    phase: Phase,
    subject: Subject,
    config: PanelConfig,
    invitation: config::Invitation,
    /// The attempt ledger as it stood when the run began: the attempts
    /// already spent on the subject, and how long reviews took lately.
    attempts: Attempts,
}

impl Prepared {
    /// The loop it runs on.
    pub fn dir(&self) -> &LoopDir {
        &self.dir
    }
}

/// The pending candidate, or why no result review can run.
fn pending_candidate(dir: &LoopDir, mode: GoalFocusMode) -> Result<Held, AppError> {
    let slot = candidate::slot(dir)?.unwrap_or_default();
    if let Some(q) = &slot.quarantine {
        return Err(AppError::refused(format!(
            "candidate {} is quarantined: no reviewer runs on it until a person releases it (`loopx goal-focus recover-quarantine`)",
            q.fingerprint
        )));
    }
    slot.pending.ok_or_else(|| {
        let why = match mode {
            GoalFocusMode::Enforce => "nothing is pending",
            _ => "only an enforce-mode loop stages candidates",
        };
        AppError::refused(format!(
            "no candidate awaits a result review in {} ({why}): `loopx goal-focus status` shows the candidate stream",
            dir.display()
        ))
    })
}

/// Check that `phase` can run on the loop at `root`, writing nothing and
/// spawning nothing: refused when nothing awaits that review (no pending
/// candidate; no plan awaiting a strategy review, or an unknown executor),
/// panel.json is invalid, enforce mode lacks the egress consent, nobody
/// can be invited, or no attempt is left. `executor` names the executor's
/// provider for a strategy review when no driver has.
pub fn prepare(
    root: Place<'_>,
    phase: Phase,
    executor: Option<&str>,
) -> Result<Prepared, AppError> {
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let mode = dir.read()?.ledger.config.goal_focus_mode;
    let subject = match phase {
        Phase::ResultReview => Subject::Candidate(Box::new(pending_candidate(&dir, mode)?)),
        Phase::StrategyReview => Subject::Direction {
            brief: Box::new(strategy::brief(root, executor)?.brief),
            executor: executor.map(str::to_owned),
        },
    };
    let config = load_config(&dir)?.unwrap_or_default();
    consent(mode, std::env::var(EGRESS_ENV).ok().as_deref()).map_err(refused)?;
    let invitation = config::invite(
        &config,
        std::env::var(PROVIDERS_ENV).ok().as_deref(),
        subject.executor_family(),
        family_of,
        mode == GoalFocusMode::Enforce,
    )
    .map_err(refused)?;
    if invitation.invited.is_empty() {
        return Err(refused(PanelProblem::NobodyInvited(
            invitation.why_nobody(),
        )));
    }
    let fingerprint = subject.fingerprint();
    let attempts = attempts(&dir)?;
    if attempts.used(phase, &fingerprint) >= config.max_attempts {
        return Err(refused(PanelProblem::Exhausted {
            phase: phase.name(),
            subject: fingerprint.to_string(),
            max: config.max_attempts,
        }));
    }
    Ok(Prepared {
        dir,
        phase,
        subject,
        config,
        invitation,
        attempts,
    })
}

impl Prepared {
    /// Each invited reviewer in turn, through `runner`, until one's answer
    /// decides the subject, every one was tried, or the attempts run out.
    pub fn run(
        self,
        cli_timeout: Option<u64>,
        runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
    ) -> Result<PanelView, AppError> {
        let mut view = PanelView {
            status: "failed",
            action: "panel",
            dir: self.dir.display(),
            phase: self.phase,
            subject: self.subject.fingerprint(),
            state: "pending",
            invited: self.invitation.invited.clone(),
            skipped: self.invitation.skipped.clone(),
            attempts: Vec::new(),
            attempts_used: self.attempts.used(self.phase, &self.subject.fingerprint()),
            max_attempts: self.config.max_attempts,
            finalized: None,
            committed: None,
            warnings: Vec::new(),
        };
        for reviewer in &self.invitation.invited {
            if view.attempts_used >= self.config.max_attempts {
                break;
            }
            let launcher = crate::launchers::installed_launcher_named(reviewer);
            let Some(launcher) = launcher else {
                // Nothing is launched, nothing leaves the host: not an attempt.
                view.skipped.push(Skipped {
                    provider: reviewer.clone(),
                    reason: "not installed (no launcher binary on PATH)".into(),
                });
                continue;
            };
            let prompt = self.subject.brief(reviewer);
            if let Err(problem) = brief::fits_argv(&prompt) {
                // It could not be launched: not an attempt either.
                view.skipped.push(Skipped {
                    provider: reviewer.clone(),
                    reason: problem.to_string(),
                });
                continue;
            }
            let attempt = view.attempts_used + 1;
            let reviewed = self.review_once(
                Reviewer {
                    name: reviewer,
                    launcher,
                    attempt,
                    prompt: &prompt,
                },
                cli_timeout,
                runner,
            )?;
            view.attempts_used = attempt;
            view.warnings.extend(reviewed.warning);
            let outcome = reviewed.view.outcome;
            view.attempts.push(reviewed.view);
            if outcome.decided() {
                view.state = match outcome {
                    AttemptOutcome::BankedAccepted => "banked_accepted",
                    AttemptOutcome::BankedRejected => "banked_rejected",
                    _ => "committed",
                };
                view.status = "ok";
                match reviewed.decided {
                    Some(Decided::Banked(f)) => view.finalized = Some(f),
                    Some(Decided::Committed(c)) => view.committed = Some(*c),
                    None => {}
                }
                break;
            }
        }
        Ok(view)
    }

    /// One reviewer, start to finish: the attempt committed, the brief
    /// written, the process run, its output stored and read, the answer
    /// judged (and committed, if it decides), the outcome committed.
    fn review_once(
        &self,
        reviewer: Reviewer<'_>,
        cli_timeout: Option<u64>,
        runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
    ) -> Result<Reviewed, AppError> {
        let Reviewer { name, attempt, .. } = reviewer;
        let (dir, phase, config) = (&self.dir, self.phase, &self.config);
        let subject = self.subject.fingerprint();
        let timeout_s = config::timeout_s(
            config,
            phase,
            name,
            cli_timeout,
            reviewer.prompt.len(),
            self.attempts.recent_success_ms(phase, name),
        );
        // The whole fingerprint: an id names one attempt on one subject.
        let base = format!("panel.{}.{}.{attempt}", phase.name(), hex(&subject));
        let op = |suffix: &str| {
            OperationId::parse(&format!("{base}{suffix}")).map_err(anyhow::Error::new)
        };
        let now = clock::now();
        // Counted before the launch: a host killed while the reviewer runs
        // has still spent the attempt.
        dir.authority()
            .execute::<AttemptOwner>(
                ATTEMPTS_STREAM,
                &op("")?,
                &AttemptRequest::Start {
                    phase,
                    subject: subject.clone(),
                    attempt,
                    provider: name.to_owned(),
                    max_attempts: config.max_attempts,
                },
                &Clock { now },
                now,
            )
            .map_err(of_authority)?;
        let mut artifacts = Vec::new();
        // From here on the attempt is counted: whatever fails is its
        // outcome, recorded, never an error that hides the count.
        let found = self
            .launch_and_read(&reviewer, timeout_s, runner, &mut artifacts)
            .unwrap_or_else(|error| Found {
                outcome: AttemptOutcome::Failed,
                detail: format!("{error:#}"),
                decided: None,
                elapsed_ms: 0,
                exit_status: None,
            });
        let now = clock::now();
        let finish = AttemptRequest::Finish {
            phase,
            subject,
            attempt,
            outcome: found.outcome,
            detail: found.detail.clone(),
            elapsed_ms: Some(found.elapsed_ms),
        };
        let finished = op(".end").and_then(|id| {
            dir.authority()
                .execute::<AttemptOwner>(ATTEMPTS_STREAM, &id, &finish, &Clock { now }, now)
                .map_err(anyhow::Error::new)
        });
        let warning = finished.err().map(|error| {
            format!(
                "attempt {attempt} ({name}) ended {}, but that could not be recorded ({error:#}); the attempt still counts",
                found.outcome.label()
            )
        });
        Ok(Reviewed {
            decided: found.decided,
            warning,
            view: AttemptView {
                attempt,
                provider: name.to_owned(),
                family: family_of(name),
                timeout_s,
                elapsed_ms: found.elapsed_ms,
                exit_status: found.exit_status,
                outcome: found.outcome,
                detail: found.detail,
                artifacts,
            },
        })
    }

    /// Write the brief, run the reviewer, store its (redacted) output and
    /// judge what it said. Each artifact written is added to `artifacts`.
    fn launch_and_read(
        &self,
        reviewer: &Reviewer<'_>,
        timeout_s: u64,
        runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
        artifacts: &mut Vec<String>,
    ) -> anyhow::Result<Found> {
        let subject = self.subject.fingerprint();
        let folder = [ARTIFACTS, &short(&subject), self.phase.name()];
        let cwd = private_dir(&self.dir, &folder)?;
        let stem = format!("{}-{}", reviewer.attempt, reviewer.name);
        let relative = |ext: &str| format!("{}/{stem}.{ext}", folder.join("/"));
        fsutil::write_private(
            &cwd.join(format!("{stem}.prompt")),
            reviewer.prompt.as_bytes(),
        )?;
        artifacts.push(relative("prompt"));
        let launch = Launch {
            provider: reviewer.name.to_owned(),
            binary: reviewer.launcher.binary.to_owned(),
            args: reviewer
                .launcher
                .review_argv(reviewer.prompt, &cwd.display().to_string()),
            cwd: cwd.clone(),
            timeout: Duration::from_secs(timeout_s),
            name: crate::operation::fresh_name(&format!("panel-{}", reviewer.attempt)),
        };
        let ran =
            runner(&launch).map_err(|error| error.context("the reviewer could not be started"))?;
        let output = loopx_core::redact::redact_owned(&String::from_utf8_lossy(&ran.stdout));
        let mut stored = output.clone();
        if ran.truncated {
            stored.push_str(&format!(
                "\n[loopx: output cut at {OUTPUT_BYTES} bytes; the rest was dropped]\n"
            ));
        }
        fsutil::write_private(&cwd.join(format!("{stem}.out")), stored.as_bytes())?;
        artifacts.push(relative("out"));
        let (outcome, detail, decided) = match ran.unanswered(timeout_s) {
            Some(Unanswered::TimedOut(why)) => (AttemptOutcome::TimedOut, why, None),
            Some(Unanswered::Failed(why)) => (AttemptOutcome::Failed, why, None),
            None => {
                let file = cwd.join(format!("{stem}.json"));
                let judged = self.judge(reviewer.name, &output, &file)?;
                if file.exists() {
                    artifacts.push(relative("json"));
                }
                judged
            }
        };
        Ok(Found {
            outcome,
            detail,
            decided,
            elapsed_ms: ran.elapsed.as_millis() as u64,
            exit_status: ran.exit_status,
        })
    }

    /// Read the answer out of `output`, store it at `file`, and hand it to
    /// the use case that decides with it: the outcome and, if it decided,
    /// what was committed.
    fn judge(&self, reviewer: &str, output: &str, file: &Path) -> anyhow::Result<Judged> {
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        let operation = format!(
            "panel.{}.{}.{stem}",
            self.phase.name(),
            hex(&self.subject.fingerprint())
        );
        let root = self.dir.place();
        let decided = match &self.subject {
            Subject::Candidate(held) => {
                let review: ResultReview = match brief::extract(output, SCHEMA) {
                    Ok(review) => review,
                    Err(problem) => return Ok(malformed(problem)),
                };
                if let Err(problem) = brief::attributed(&review.reviewer.provider, reviewer) {
                    return Ok((AttemptOutcome::Refused, problem.to_string(), None));
                }
                fsutil::write_private(file, serde_json::to_string_pretty(&review)?.as_bytes())?;
                candidate::review(root, held.fingerprint.as_str(), file, Some(&operation)).map(
                    |banked| {
                        let body = banked.body;
                        let outcome = match body.bank_status {
                            BankStatus::Accepted => AttemptOutcome::BankedAccepted,
                            BankStatus::Rejected => AttemptOutcome::BankedRejected,
                        };
                        let detail = format!("banked as iteration {}", body.iteration);
                        (outcome, detail, Some(Decided::Banked(body)))
                    },
                )
            }
            Subject::Direction { executor, .. } => {
                let advice: StrategyAdvice = match brief::extract(output, ADVICE_SCHEMA) {
                    Ok(advice) => advice,
                    Err(problem) => return Ok(malformed(problem)),
                };
                if let Err(problem) = brief::attributed(&advice.reviewer.provider, reviewer) {
                    return Ok((AttemptOutcome::Refused, problem.to_string(), None));
                }
                let bytes = serde_json::to_string_pretty(&advice)?;
                fsutil::write_private(file, bytes.as_bytes())?;
                strategy::review(
                    root,
                    bytes.as_bytes(),
                    executor.as_deref(),
                    Some(&operation),
                )
                .map(|committed| {
                    let detail = format!(
                        "{} by {reviewer}: plan {} is {}",
                        advice.verdict, committed.plan.plan_revision, committed.plan.state
                    );
                    let decided = Decided::Committed(Box::new(committed));
                    (AttemptOutcome::Committed, detail, Some(decided))
                })
            }
        };
        match decided {
            Ok(judged) => Ok(judged),
            // The judge's refusal: this answer cannot decide; the next
            // reviewer's may.
            Err(error) if error.class == crate::ErrorClass::Refused => {
                Ok((AttemptOutcome::Refused, error.message, None))
            }
            Err(error) => Err(anyhow::anyhow!(
                "the answer could not be committed: {}",
                error.message
            )),
        }
    }
}

fn malformed(problem: PanelProblem) -> Judged {
    (AttemptOutcome::Malformed, problem.to_string(), None)
}

/// One reviewer to launch for one attempt.
struct Reviewer<'a> {
    name: &'a str,
    launcher: &'a provider::Launcher,
    attempt: u32,
    prompt: &'a str,
}

/// What a deciding answer committed.
enum Decided {
    Banked(Finalized),
    Committed(Box<StrategyReviewView>),
}

type Judged = (AttemptOutcome, String, Option<Decided>);

struct Reviewed {
    view: AttemptView,
    decided: Option<Decided>,
    warning: Option<String>,
}

/// What one launched attempt came to.
struct Found {
    outcome: AttemptOutcome,
    detail: String,
    decided: Option<Decided>,
    elapsed_ms: u64,
    exit_status: Option<i32>,
}

/// What `loopx panel --smoke` sends each reviewer: nothing of any loop.
pub const SMOKE_PROMPT: &str =
    "This is a connectivity check from loopx. Reply with the single word PONG and nothing else.";

/// How long a reviewer gets to answer the smoke prompt, unless `--timeout`
/// says otherwise: a cold start of an agent CLI plus one short answer.
pub const SMOKE_TIMEOUT_S: u64 = 120;

/// How one reviewer fared in a smoke test.
#[derive(Debug, Clone, Serialize)]
pub struct SmokeReviewer {
    pub provider: String,
    pub family: Family,
    /// `answered`, `not_installed`, `timed_out`, `failed` or
    /// `unexpected_answer`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    pub elapsed_ms: u64,
    pub detail: String,
}

/// `loopx panel --smoke`: can the panel reach its reviewers?
#[derive(Debug, Clone, Serialize)]
pub struct SmokeView {
    pub status: &'static str,
    pub action: &'static str,
    /// Where panel.json was read from, if there was one.
    pub config: Option<String>,
    pub timeout_s: u64,
    pub reviewers: Vec<SmokeReviewer>,
    pub skipped: Vec<Skipped>,
}

impl SmokeView {
    /// Whether any invited reviewer answered.
    pub fn passed(&self) -> bool {
        self.reviewers.iter().any(|r| r.outcome == "answered")
    }

    pub fn text(&self) -> String {
        let mut lines = vec![format!(
            "panel smoke test ({}s per reviewer; config: {}):",
            self.timeout_s,
            self.config.as_deref().unwrap_or("defaults")
        )];
        for r in &self.reviewers {
            lines.push(format!(
                "  {} ({}): {}{}",
                r.provider,
                r.family.name(),
                r.outcome,
                if r.detail.is_empty() {
                    String::new()
                } else {
                    format!(" - {}", r.detail)
                }
            ));
        }
        for s in &self.skipped {
            lines.push(format!("  {}: skipped - {}", s.provider, s.reason));
        }
        lines.push(if self.passed() {
            "at least one reviewer answered: the panel can run".to_owned()
        } else {
            "no reviewer answered: the panel cannot run here".to_owned()
        });
        lines.join("\n")
    }
}

/// Check that the panel's reviewers start and answer, without a loop:
/// each reviewer the panel would invite (panel.json in `root` if there
/// is one, the session's list, the default order; `exclude_until_credit`
/// honoured; no executor, so no family is left out) is sent
/// [`SMOKE_PROMPT`], through `runner`, in a private temporary directory
/// that is removed afterwards. Nothing of any loop is sent or written, so
/// no consent is asked. A reviewer answers when its output holds `PONG`.
pub fn smoke(
    root: &Path,
    cli_timeout: Option<u64>,
    runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
) -> Result<SmokeView, AppError> {
    let found = config_in(root, &root.display().to_string())?;
    let config_path = found
        .as_ref()
        .map(|_| root.join(FILE).display().to_string());
    // A smoke test has no executor: every family is welcome.
    let config = PanelConfig {
        require_different_family: false,
        ..found.unwrap_or_default()
    };
    let invitation = config::invite(
        &config,
        std::env::var(PROVIDERS_ENV).ok().as_deref(),
        Family::Unverified,
        family_of,
        false,
    )
    .map_err(refused)?;
    let timeout_s = cli_timeout.unwrap_or(SMOKE_TIMEOUT_S);
    let work = fsutil::create_private_temp_dir("loopx-panel-smoke")?;
    let mut reviewers = Vec::new();
    for name in &invitation.invited {
        let launcher = crate::launchers::installed_launcher_named(name);
        let mut reviewer = SmokeReviewer {
            provider: name.clone(),
            family: family_of(name),
            outcome: "not_installed",
            binary: launcher.map(|l| l.binary.to_owned()),
            elapsed_ms: 0,
            detail: String::new(),
        };
        if let Some(launcher) = launcher {
            let launch = Launch {
                provider: name.clone(),
                binary: launcher.binary.to_owned(),
                args: launcher.review_argv(SMOKE_PROMPT, &work.display().to_string()),
                cwd: work.clone(),
                timeout: Duration::from_secs(timeout_s),
                name: crate::operation::fresh_name(&format!("smoke-{name}")),
            };
            let (outcome, detail, elapsed_ms) = match runner(&launch) {
                Err(error) => ("failed", format!("could not be started: {error:#}"), 0),
                Ok(ran) => {
                    let said =
                        loopx_core::redact::redact_owned(&String::from_utf8_lossy(&ran.stdout));
                    let elapsed_ms = ran.elapsed.as_millis() as u64;
                    let (outcome, detail) = match ran.unanswered(timeout_s) {
                        Some(Unanswered::TimedOut(why)) => ("timed_out", why),
                        Some(Unanswered::Failed(why)) => {
                            ("failed", format!("{why}: {}", excerpt(&said)))
                        }
                        None if said.to_ascii_uppercase().contains("PONG") => {
                            ("answered", String::new())
                        }
                        None => ("unexpected_answer", excerpt(&said)),
                    };
                    (outcome, detail, elapsed_ms)
                }
            };
            reviewer.outcome = outcome;
            reviewer.detail = detail;
            reviewer.elapsed_ms = elapsed_ms;
        }
        reviewers.push(reviewer);
    }
    let _ = std::fs::remove_dir_all(&work);
    let mut view = SmokeView {
        status: "failed",
        action: "panel-smoke",
        config: config_path,
        timeout_s,
        reviewers,
        skipped: invitation.skipped,
    };
    if view.passed() {
        view.status = "ok";
    }
    Ok(view)
}

/// The start of what a reviewer said, on one line, for a person.
fn excerpt(said: &str) -> String {
    let line = said.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None if line.is_empty() => "(no output)".to_owned(),
        None => line,
    }
}
