//! A prepared panel run: each invited reviewer in turn, each attempt
//! committed before its launch and its outcome after, the artifacts under
//! `panel/<subject>/<phase>/<attempt>-<provider>.{prompt,out,json}`
//! (private, output redacted), and a well-formed answer handed to the use
//! case that decides with it (target advice: every reviewer once, then
//! the synthesis); and the view of what the run did. Not
//! here: the checks before it (`prepare.rs`) or the process (the
//! caller's runner, `launch.rs`).

use super::advice::{self, Target};
use super::config::refused;
use super::launch::{Launch, Ran, Unanswered, OUTPUT_BYTES};
use super::prepare::{self, Prepared, Subject};
use crate::focus::candidate::{self, family_of, Finalized};
use crate::focus::strategy::{self, StrategyReviewView};
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil, AppError};
use loopx_core::digest::Digest;
use loopx_core::driver::provider::{self, Family};
use loopx_core::focus::review::{ResultReview, SCHEMA};
use loopx_core::focus::strategy::{StrategyAdvice, SCHEMA as ADVICE_SCHEMA};
use loopx_core::ledger::BankStatus;
use loopx_core::operation::{Clock, OperationId};
use loopx_core::panel::attempts::{
    self, AttemptOutcome, AttemptOwner, AttemptRequest, ATTEMPTS_STREAM,
};
use loopx_core::panel::config::{self, Skipped};
use loopx_core::panel::merge::{MergeReview, MergeVerdict, SCHEMA as MERGE_SCHEMA};
use loopx_core::panel::{brief, PanelProblem, Phase};
use loopx_store::AuthorityError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the panel's artifacts live in the loop directory.
pub const ARTIFACTS: &str = "panel";

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
    /// target_advice: the loop-relative path of the synthesis written for
    /// the primary, and how many reviewers advised on this state in all
    /// (this run's and any earlier run's on the same state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advised: Option<u32>,
    /// merge_review: the deciding reviewer's verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeDecision>,
}

/// What a deciding merge review said.
#[derive(Debug, Clone, Serialize)]
pub struct MergeDecision {
    pub accepted: bool,
    pub reviewer: String,
    pub reasoning: String,
}

impl PanelView {
    pub fn decided(&self) -> bool {
        self.finalized.is_some() || self.committed.is_some() || self.merge.is_some()
    }

    /// The run did what its phase is for: decided its subject, or (target
    /// advice) has advice to synthesize.
    pub fn answered(&self) -> bool {
        self.decided() || self.advised.is_some_and(|n| n > 0)
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
            Phase::MergeReview => "merge",
            Phase::TargetAdvice => {
                text.push_str(&format!(
                    "target advice from {} of {} reviewers invited; synthesis for the primary at {}",
                    self.advised.unwrap_or(0),
                    self.invited.len(),
                    self.synthesis.as_deref().unwrap_or("(not written)")
                ));
                return text;
            }
        };
        if let Some(m) = &self.merge {
            text.push_str(&format!(
                "merge {} {} by {}: {}",
                self.subject,
                if m.accepted { "accepted" } else { "rejected" },
                m.reviewer,
                m.reasoning
            ));
            return text;
        }
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

fn of_authority(error: AuthorityError<PanelProblem>) -> AppError {
    match error {
        AuthorityError::Rejected(problem) => refused(problem),
        other => anyhow::Error::from(other).into(),
    }
}

/// A directory below the loop directory, each level created private and
/// none reached through a symlink: an agent that plants `panel` as a link
/// does not get the host to write the candidate somewhere else.
fn private_dir(dir: &LoopDir, parts: &[&str]) -> anyhow::Result<PathBuf> {
    fsutil::private_dir_below(dir.root(), parts)
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
            synthesis: None,
            advised: None,
            merge: None,
        };
        let subject = self.subject.fingerprint();
        let mut tried: Vec<String> = (self.attempts.tried(self.phase, &subject))
            .map(str::to_owned)
            .collect();
        for reviewer in &self.invitation.invited {
            // Below the cap anyone invited; past it, only a reviewer not
            // yet tried on this subject (the rotation): those tried are not
            // called again, their artifacts and outcomes stand.
            let (used, max) = (view.attempts_used, self.config.max_attempts);
            if !attempts::may_start(used, max, tried.iter().map(String::as_str), reviewer) {
                continue;
            }
            // Advice is asked of each reviewer once per state.
            if self.phase == Phase::TargetAdvice && tried.contains(reviewer) {
                continue;
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
            tried.push(reviewer.clone());
            view.warnings.extend(reviewed.warning);
            let outcome = reviewed.view.outcome;
            view.attempts.push(reviewed.view);
            if outcome.decided() {
                view.state = match outcome {
                    AttemptOutcome::BankedAccepted => "banked_accepted",
                    AttemptOutcome::BankedRejected => "banked_rejected",
                    AttemptOutcome::MergeAccepted => "merge_accepted",
                    AttemptOutcome::MergeRejected => "merge_rejected",
                    _ => "committed",
                };
                view.status = "ok";
                match reviewed.decided {
                    Some(Decided::Banked(f)) => view.finalized = Some(f),
                    Some(Decided::Committed(c)) => view.committed = Some(*c),
                    Some(Decided::Merge(m)) => view.merge = Some(m),
                    None => {}
                }
                break;
            }
        }
        if let Subject::Target(target) = &self.subject {
            self.synthesize(target, &mut view)?;
        }
        Ok(view)
    }

    /// After a target-advice round: the synthesis of every answer the
    /// round has, for the primary.
    fn synthesize(&self, target: &Target, view: &mut PanelView) -> Result<(), AppError> {
        let folder = [ARTIFACTS, &short(&view.subject), self.phase.name()];
        private_dir(&self.dir, &folder)?;
        view.synthesis = Some(advice::write_synthesis(
            &self.dir,
            target,
            &folder.join("/"),
        )?);
        let advised = prepare::attempts(&self.dir)?
            .tally(self.phase, &view.subject)
            .map_or(0, |t| {
                (t.attempts.iter())
                    .filter(|a| a.outcome == Some(AttemptOutcome::Advised))
                    .count() as u32
            });
        view.advised = Some(advised);
        if advised > 0 {
            view.status = "ok";
            view.state = "advised";
        }
        Ok(())
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
                .map_err(anyhow::Error::from)
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
        // The brief leaves the machine: personal data in it goes only with
        // the operator's approval of these exact bytes.
        let approval = std::env::var(loopx_core::pii::APPROVAL_ENV).ok();
        if let Err(unapproved) = loopx_core::pii::outbound(reviewer.prompt, approval.as_deref()) {
            return Ok(Found {
                outcome: AttemptOutcome::Refused,
                detail: unapproved.to_string(),
                decided: None,
                elapsed_ms: 0,
                exit_status: None,
            });
        }
        let launch = match Launch::reviewer(
            reviewer.name,
            reviewer.launcher,
            reviewer.prompt,
            cwd.clone(),
            Duration::from_secs(timeout_s),
            crate::operation::fresh_name(&format!("panel-{}", reviewer.attempt)),
        ) {
            Ok(launch) => launch,
            Err(unusable) => {
                return Ok(Found {
                    outcome: AttemptOutcome::Refused,
                    detail: unusable,
                    decided: None,
                    elapsed_ms: 0,
                    exit_status: None,
                })
            }
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
            Subject::Target(_) => {
                return Ok(match loopx_core::panel::advice::advice_in(output) {
                    Ok(advice) => (
                        AttemptOutcome::Advised,
                        format!("{} characters of advice", advice.chars().count()),
                        None,
                    ),
                    Err(why) => (AttemptOutcome::Malformed, why.to_owned(), None),
                });
            }
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
            Subject::Merge(merge, _) => {
                let review: MergeReview = match brief::extract(output, MERGE_SCHEMA) {
                    Ok(review) => review,
                    Err(problem) => return Ok(malformed(problem)),
                };
                if let Err(problem) = brief::attributed(&review.reviewer.provider, reviewer) {
                    return Ok((AttemptOutcome::Refused, problem.to_string(), None));
                }
                if review.merge_fingerprint != merge.fingerprint() {
                    let why = format!(
                        "the answer is for merge {}, not {}",
                        review.merge_fingerprint,
                        merge.fingerprint()
                    );
                    return Ok((AttemptOutcome::Refused, why, None));
                }
                fsutil::write_private(file, serde_json::to_string_pretty(&review)?.as_bytes())?;
                let accepted = review.verdict == MergeVerdict::Accept;
                let outcome = match accepted {
                    true => AttemptOutcome::MergeAccepted,
                    false => AttemptOutcome::MergeRejected,
                };
                let reasoning = loopx_core::redact::redact_owned(review.reasoning.trim());
                let decision = MergeDecision {
                    accepted,
                    reviewer: reviewer.to_owned(),
                    reasoning: reasoning.clone(),
                };
                Ok((outcome, reasoning, Some(Decided::Merge(decision))))
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
    Merge(MergeDecision),
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
