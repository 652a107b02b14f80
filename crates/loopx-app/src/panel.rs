//! The review panel as the application runs it: `loopx panel --phase
//! result_review` and `drive --panel`, one use case returning a typed view.
//!
//! Owns the IO around the panel's rules: reading `panel.json` (confined,
//! bounded), the environment (consent, the session's invite list, endpoint
//! overrides through the provider family), resolving each reviewer's
//! launcher on PATH, the artifacts under
//! `panel/<candidate>/<phase>/<attempt>-<provider>.{prompt,out,json}`
//! (atomic, mode 0600, output redacted), committing each attempt's start
//! before its launch and its outcome after, and handing a well-formed
//! review to `focus::candidate::review`, the one use case that banks a
//! candidate. Does not own any rule (`loopx_core::panel` and
//! `loopx_core::focus::review` do) or the process itself: the caller
//! passes a runner (the binary's, which gives it its own process group, a
//! timeout and a bounded capture).

use crate::focus::candidate::{self, family_of, Finalized};
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil, platform, AppError};
use loopx_core::digest::Digest;
use loopx_core::driver::provider::{self, Family};
use loopx_core::driver::step::PanelBudget;
use loopx_core::focus::candidate::Held;
use loopx_core::focus::review::{ResultReview, SCHEMA};
use loopx_core::ledger::vocabulary::GoalFocusMode;
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

/// The loop's panel.json, if there is one (refused when it is invalid).
pub fn load_config(dir: &LoopDir) -> Result<Option<PanelConfig>, AppError> {
    let path = LoopPath::parse(FILE).expect("panel.json is a loop path");
    if dir.path(FILE).symlink_metadata().is_err() {
        return Ok(None);
    }
    let bytes = dir.read_file(&path, CONFIG_BYTES).map_err(|problem| {
        AppError::refused(format!(
            "{}: {FILE} {}; it must be a regular file of at most {CONFIG_BYTES} bytes",
            dir.display(),
            problem.describe()
        ))
    })?;
    PanelConfig::parse(&bytes)
        .map(Some)
        .map_err(|problem| AppError::refused(format!("{}/{problem}", dir.display())))
}

/// Whether `drive --panel <switch>` runs the panel on this loop.
pub fn enabled(dir: &LoopDir, switch: Switch) -> Result<bool, AppError> {
    let config = match switch {
        Switch::Auto => load_config(dir)?,
        _ => None,
    };
    Ok(switch.resolve(std::env::var(PANEL_ENV).ok().as_deref(), config.as_ref()))
}

fn attempts(dir: &LoopDir) -> anyhow::Result<Attempts> {
    Ok(dir
        .authority()
        .load::<AttemptOwner>(ATTEMPTS_STREAM)?
        .state
        .unwrap_or_default())
}

/// The panel's attempts on the pending candidate `fingerprint`, for the
/// driver's step.
pub fn budget(dir: &LoopDir, fingerprint: &Digest) -> Result<PanelBudget, AppError> {
    let max = load_config(dir)?.unwrap_or_default().max_attempts;
    let used = attempts(dir)?.used(Phase::ResultReview, fingerprint);
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
    /// `ok` when a review decided the candidate, else `failed`.
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub phase: Phase,
    pub candidate_fingerprint: Digest,
    /// `banked_accepted`, `banked_rejected`, or `pending` (no usable review).
    pub state: &'static str,
    pub invited: Vec<String>,
    pub skipped: Vec<Skipped>,
    pub attempts: Vec<AttemptView>,
    pub attempts_used: u32,
    pub max_attempts: u32,
    pub finalized: Option<Finalized>,
    /// What went wrong after a commit (an outcome that could not be
    /// recorded): what happened happened regardless.
    pub warnings: Vec<String>,
}

impl PanelView {
    pub fn decided(&self) -> bool {
        self.finalized.is_some()
    }

    pub fn text(&self) -> String {
        let mut text = String::new();
        for a in &self.attempts {
            text.push_str(&format!(
                "attempt {} [{} / {}] {:?} in {:.1}s{}\n",
                a.attempt,
                a.provider,
                a.family.name(),
                a.outcome,
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
        match &self.finalized {
            Some(f) => text.push_str(&format!(
                "candidate {} banked {:?} as iteration {} on {}'s review",
                self.candidate_fingerprint, f.bank_status, f.iteration, f.reviewer_provider
            )),
            None => text.push_str(&format!(
                "candidate {} stays pending: no usable review ({} of {} attempts used; nothing banked, nothing charged); artifacts under {}/{}",
                self.candidate_fingerprint,
                self.attempts_used,
                self.max_attempts,
                ARTIFACTS,
                short(&self.candidate_fingerprint)
            )),
        }
        text
    }
}

fn hex(digest: &Digest) -> &str {
    digest.as_str().trim_start_matches("sha256:")
}

/// The first 12 hex digits of a digest: the candidate's artifact folder.
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

/// A panel run that passed every check and has written nothing yet.
pub struct Prepared {
    dir: LoopDir,
    phase: Phase,
    held: Held,
    config: PanelConfig,
    invitation: config::Invitation,
    used: u32,
}

impl Prepared {
    /// The loop it runs on.
    pub fn dir(&self) -> &LoopDir {
        &self.dir
    }
}

/// Check that `phase` can run on the loop at `root`, writing nothing and
/// spawning nothing: refused when no candidate is pending, panel.json is
/// invalid, enforce mode lacks the egress consent, nobody can be invited,
/// or no attempt is left.
pub fn prepare(root: &Path, phase: Phase) -> Result<Prepared, AppError> {
    if phase == Phase::StrategyReview {
        return Err(AppError::refused(
            "--phase strategy_review is not available in this loopx yet: only result_review runs on the panel",
        ));
    }
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let mode = dir.read()?.ledger.config.goal_focus_mode;
    let slot = candidate::slot(&dir)?.unwrap_or_default();
    if let Some(q) = &slot.quarantine {
        return Err(AppError::refused(format!(
            "candidate {} is quarantined: no reviewer runs on it until a person releases it (`loopx goal-focus recover-quarantine`)",
            q.fingerprint
        )));
    }
    let Some(held) = slot.pending else {
        let why = match mode {
            GoalFocusMode::Enforce => "nothing is pending",
            _ => "only an enforce-mode loop stages candidates",
        };
        return Err(AppError::refused(format!(
            "no candidate awaits a result review in {} ({why}): `loopx goal-focus status` shows the candidate stream",
            dir.display()
        )));
    };
    let config = load_config(&dir)?.unwrap_or_default();
    consent(mode, std::env::var(EGRESS_ENV).ok().as_deref()).map_err(refused)?;
    let invitation = config::invite(
        &config,
        std::env::var(PROVIDERS_ENV).ok().as_deref(),
        held.candidate.executor_family,
        family_of,
        mode == GoalFocusMode::Enforce,
    )
    .map_err(refused)?;
    if invitation.invited.is_empty() {
        return Err(refused(PanelProblem::NobodyInvited(
            invitation.why_nobody(),
        )));
    }
    let used = attempts(&dir)?.used(phase, &held.fingerprint);
    if used >= config.max_attempts {
        return Err(refused(PanelProblem::Exhausted {
            phase: phase.name(),
            subject: held.fingerprint.to_string(),
            max: config.max_attempts,
        }));
    }
    Ok(Prepared {
        dir,
        phase,
        held,
        config,
        invitation,
        used,
    })
}

impl Prepared {
    /// Each invited reviewer in turn, through `runner`, until one's review
    /// decides the candidate, every one was tried, or the attempts run out.
    pub fn run(
        self,
        cli_timeout: Option<u64>,
        runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
    ) -> Result<PanelView, AppError> {
        let Prepared {
            dir,
            phase,
            held,
            config,
            invitation,
            used,
        } = self;
        let mut view = PanelView {
            status: "failed",
            action: "panel",
            dir: dir.display(),
            phase,
            candidate_fingerprint: held.fingerprint.clone(),
            state: "pending",
            invited: invitation.invited.clone(),
            skipped: invitation.skipped,
            attempts: Vec::new(),
            attempts_used: used,
            max_attempts: config.max_attempts,
            finalized: None,
            warnings: Vec::new(),
        };
        for reviewer in &invitation.invited {
            if view.attempts_used >= config.max_attempts {
                break;
            }
            let launcher = provider::find(reviewer)
                .and_then(|p| provider::resolve(p, |b| platform::which(b).is_some()));
            let Some(launcher) = launcher else {
                // Nothing is launched, nothing leaves the host: not an attempt.
                view.skipped.push(Skipped {
                    provider: reviewer.clone(),
                    reason: "not installed (no launcher binary on PATH)".into(),
                });
                continue;
            };
            let prompt = brief::result_review(&held.candidate, &held.fingerprint, reviewer);
            if let Err(problem) = brief::fits_argv(&prompt) {
                // It could not be launched: not an attempt either.
                view.skipped.push(Skipped {
                    provider: reviewer.clone(),
                    reason: problem.to_string(),
                });
                continue;
            }
            let attempt = view.attempts_used + 1;
            let reviewed = review_once(
                &dir,
                &config,
                phase,
                &held,
                reviewer,
                launcher,
                attempt,
                &prompt,
                cli_timeout,
                runner,
            )?;
            view.attempts_used = attempt;
            view.warnings.extend(reviewed.warning);
            let decided = reviewed.outcome.decided();
            view.attempts.push(reviewed.view);
            if decided {
                view.state = match reviewed.outcome {
                    AttemptOutcome::BankedAccepted => "banked_accepted",
                    _ => "banked_rejected",
                };
                view.status = "ok";
                view.finalized = reviewed.finalized;
                break;
            }
        }
        Ok(view)
    }
}

struct Reviewed {
    outcome: AttemptOutcome,
    view: AttemptView,
    finalized: Option<Finalized>,
    warning: Option<String>,
}

/// One reviewer, start to finish: the attempt committed, the brief
/// written, the process run, its output stored and read, the review
/// judged (and banked, if it decides), the outcome committed.
#[allow(clippy::too_many_arguments)]
fn review_once(
    dir: &LoopDir,
    config: &PanelConfig,
    phase: Phase,
    held: &Held,
    reviewer: &str,
    launcher: &provider::Launcher,
    attempt: u32,
    prompt: &str,
    cli_timeout: Option<u64>,
    runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
) -> Result<Reviewed, AppError> {
    let fingerprint = &held.fingerprint;
    let timeout_s = config::timeout_s(config, phase, reviewer, cli_timeout, prompt.len());
    // The whole fingerprint: an id names one attempt on one candidate.
    let base = format!("panel.{}.{}.{attempt}", phase.name(), hex(fingerprint));
    let op =
        |suffix: &str| OperationId::parse(&format!("{base}{suffix}")).map_err(anyhow::Error::new);
    let now = clock::now();
    // Counted before the launch: a host killed while the reviewer runs
    // has still spent the attempt.
    dir.authority()
        .execute::<AttemptOwner>(
            ATTEMPTS_STREAM,
            &op("")?,
            &AttemptRequest::Start {
                phase,
                subject: fingerprint.clone(),
                attempt,
                provider: reviewer.to_owned(),
                max_attempts: config.max_attempts,
            },
            &Clock { now },
            now,
        )
        .map_err(of_authority)?;
    let mut artifacts = Vec::new();
    // From here on the attempt is counted: whatever fails is its outcome,
    // recorded, never an error that hides the count.
    let found = launch_and_read(
        dir,
        phase,
        held,
        reviewer,
        launcher,
        attempt,
        prompt,
        timeout_s,
        runner,
        &mut artifacts,
    )
    .unwrap_or_else(|error| Found {
        outcome: AttemptOutcome::Failed,
        detail: format!("{error:#}"),
        finalized: None,
        elapsed_ms: 0,
        exit_status: None,
    });
    let now = clock::now();
    let finish = AttemptRequest::Finish {
        phase,
        subject: fingerprint.clone(),
        attempt,
        outcome: found.outcome,
        detail: found.detail.clone(),
    };
    let finished = op(".end").and_then(|id| {
        dir.authority()
            .execute::<AttemptOwner>(ATTEMPTS_STREAM, &id, &finish, &Clock { now }, now)
            .map_err(anyhow::Error::new)
    });
    let warning = finished.err().map(|error| {
        format!(
            "attempt {attempt} ({reviewer}) ended {:?}, but that could not be recorded ({error:#}); the attempt still counts",
            found.outcome
        )
    });
    Ok(Reviewed {
        outcome: found.outcome,
        finalized: found.finalized,
        warning,
        view: AttemptView {
            attempt,
            provider: reviewer.to_owned(),
            family: family_of(reviewer),
            timeout_s,
            elapsed_ms: found.elapsed_ms,
            exit_status: found.exit_status,
            outcome: found.outcome,
            detail: found.detail,
            artifacts,
        },
    })
}

/// What one launched attempt came to.
struct Found {
    outcome: AttemptOutcome,
    detail: String,
    finalized: Option<Finalized>,
    elapsed_ms: u64,
    exit_status: Option<i32>,
}

/// Write the brief, run the reviewer, store its (redacted) output and
/// judge what it said. Each artifact written is added to `artifacts`.
#[allow(clippy::too_many_arguments)]
fn launch_and_read(
    dir: &LoopDir,
    phase: Phase,
    held: &Held,
    reviewer: &str,
    launcher: &provider::Launcher,
    attempt: u32,
    prompt: &str,
    timeout_s: u64,
    runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
    artifacts: &mut Vec<String>,
) -> anyhow::Result<Found> {
    let folder = [ARTIFACTS, &short(&held.fingerprint), phase.name()];
    let cwd = private_dir(dir, &folder)?;
    let stem = format!("{attempt}-{reviewer}");
    let relative = |ext: &str| format!("{}/{stem}.{ext}", folder.join("/"));
    fsutil::write_private(&cwd.join(format!("{stem}.prompt")), prompt.as_bytes())?;
    artifacts.push(relative("prompt"));
    let launch = Launch {
        provider: reviewer.to_owned(),
        binary: launcher.binary.to_owned(),
        args: launcher.review_argv(prompt, &cwd.display().to_string()),
        cwd: cwd.clone(),
        timeout: Duration::from_secs(timeout_s),
        name: crate::driver::fresh_name(&format!("panel-{attempt}")),
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
    let (outcome, detail, finalized) = if ran.timed_out {
        (
            AttemptOutcome::TimedOut,
            format!("killed (with everything it started) at its {timeout_s}s timeout"),
            None,
        )
    } else if ran.exit_status != Some(0) {
        let code = ran
            .exit_status
            .map_or("a signal".to_owned(), |c| format!("code {c}"));
        (AttemptOutcome::Failed, format!("exited with {code}"), None)
    } else {
        let file = cwd.join(format!("{stem}.json"));
        let judged = judge(dir, held, reviewer, &output, &file)?;
        if file.exists() {
            artifacts.push(relative("json"));
        }
        judged
    };
    Ok(Found {
        outcome,
        detail,
        finalized,
        elapsed_ms: ran.elapsed.as_millis() as u64,
        exit_status: ran.exit_status,
    })
}

/// Read the review out of `output`, store it at `file`, and hand it to
/// the review use case: the outcome and, if it decided the candidate, what
/// was banked.
fn judge(
    dir: &LoopDir,
    held: &Held,
    reviewer: &str,
    output: &str,
    file: &Path,
) -> anyhow::Result<(AttemptOutcome, String, Option<Finalized>)> {
    let review: ResultReview = match brief::extract(output, SCHEMA) {
        Ok(review) => review,
        Err(problem) => return Ok((AttemptOutcome::Malformed, problem.to_string(), None)),
    };
    if let Err(problem) = brief::attributed(&review, reviewer) {
        return Ok((AttemptOutcome::Refused, problem.to_string(), None));
    }
    fsutil::write_private(file, serde_json::to_string_pretty(&review)?.as_bytes())?;
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    let operation = format!("panel.bank.{}.{stem}", hex(&held.fingerprint));
    match candidate::review(
        dir.root(),
        held.fingerprint.as_str(),
        file,
        Some(&operation),
    ) {
        Ok(banked) => {
            let outcome = match banked.body.bank_status {
                loopx_core::ledger::BankStatus::Accepted => AttemptOutcome::BankedAccepted,
                loopx_core::ledger::BankStatus::Rejected => AttemptOutcome::BankedRejected,
            };
            let detail = format!("banked as iteration {}", banked.body.iteration);
            Ok((outcome, detail, Some(banked.body)))
        }
        // The judge's refusal: this review cannot decide; the next
        // reviewer may.
        Err(error) if error.class == crate::ErrorClass::Refused => {
            Ok((AttemptOutcome::Refused, error.message, None))
        }
        Err(error) => Err(anyhow::anyhow!(
            "the review could not be committed: {}",
            error.message
        )),
    }
}
