//! Before a panel run: what the phase reviews (the pending candidate, the
//! plan awaiting a strategy review, or the state target advice is asked
//! on), every check that can refuse it
//! (consent, invitations, attempts left), and the attempts already spent,
//! for the driver's step. Writes nothing and spawns nothing. Not here:
//! the run itself (`run.rs`).

use super::advice::Target;
use super::config::{load_config, refused};
use crate::containment::Containment;
use crate::focus::candidate::{self, family_of};
use crate::focus::strategy;
use crate::loop_dir::{LoopDir, Place};
use crate::AppError;
use loopx_core::containment::Role;
use loopx_core::digest::Digest;
use loopx_core::driver::provider::Family;
use loopx_core::driver::step::PanelBudget;
use loopx_core::focus::candidate::Held;
use loopx_core::focus::strategy::StrategyBrief;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::panel::attempts::{AttemptOwner, Attempts, ATTEMPTS_STREAM};
use loopx_core::panel::config;
use loopx_core::panel::merge::MergeBrief;
use loopx_core::panel::{
    brief, consent, PanelConfig, PanelProblem, Phase, EGRESS_ENV, PROVIDERS_ENV,
};
use loopx_store::sqlite::Access;

pub(super) fn attempts(dir: &LoopDir) -> anyhow::Result<Attempts> {
    Ok(dir
        .authority()
        .load::<AttemptOwner>(ATTEMPTS_STREAM)?
        .state
        .unwrap_or_default())
}

/// The panel's attempts in `phase` on `subject` (the pending candidate's
/// fingerprint, or the fingerprint of the plan awaiting strategy review),
/// for the driver's step, with the reviewers it would invite for an
/// executor of `executor` family that have not been tried on it (the
/// rotation left after the cap).
pub fn budget(
    dir: &LoopDir,
    phase: Phase,
    subject: &Digest,
    executor: Family,
) -> Result<PanelBudget, AppError> {
    let config = load_config(dir)?.unwrap_or_default();
    let attempts = attempts(dir)?;
    let untried = match config::invite(
        &config,
        std::env::var(PROVIDERS_ENV).ok().as_deref(),
        executor,
        family_of,
        true,
    ) {
        Ok(invitation) => untried(&invitation.invited, &attempts, phase, subject),
        // Nobody can be invited: the panel run says why.
        Err(_) => 0,
    };
    Ok(PanelBudget {
        used: attempts.used(phase, subject),
        max: config.max_attempts,
        untried,
    })
}

/// The invited reviewers a rotation past the cap could still ask on
/// `subject`: installed (one that is not is never launched) and not yet
/// tried on it.
fn untried(invited: &[String], attempts: &Attempts, phase: Phase, subject: &Digest) -> u32 {
    (invited.iter())
        .filter(|r| !attempts.tried(phase, subject).any(|t| t == r.as_str()))
        .filter(|r| crate::launchers::installed_launcher_named(r).is_some())
        .count() as u32
}

/// What a phase reviews.
pub(super) enum Subject {
    /// The pending candidate.
    Candidate(Box<Held>),
    /// The plan awaiting a strategy review, as its brief shows it, and the
    /// executor named on the command line (if any).
    Direction {
        brief: Box<StrategyBrief>,
        executor: Option<String>,
    },
    /// The loop's state, on which target advice is asked before a turn.
    Target(Box<Target>),
    /// A worker's merged change, before the merge queue lands it, and the
    /// family of the worker's provider.
    Merge(Box<MergeBrief>, Family),
}

impl Subject {
    pub(super) fn fingerprint(&self) -> Digest {
        match self {
            Subject::Candidate(held) => held.fingerprint.clone(),
            Subject::Direction { brief, .. } => brief.bind.current_plan.fingerprint.clone(),
            Subject::Target(target) => target.fingerprint(),
            Subject::Merge(merge, _) => merge.fingerprint(),
        }
    }

    pub(super) fn executor_family(&self) -> Family {
        match self {
            Subject::Candidate(held) => held.candidate.executor_family,
            Subject::Direction { brief, .. } => brief.executor.family,
            Subject::Target(target) => target.executor,
            Subject::Merge(_, executor) => *executor,
        }
    }

    /// What `reviewer` is sent.
    pub(super) fn brief(&self, reviewer: &str) -> String {
        match self {
            Subject::Candidate(held) => {
                brief::result_review(&held.candidate, &held.fingerprint, reviewer)
            }
            Subject::Direction { brief, .. } => brief::strategy_review(brief, reviewer),
            // One brief for every reviewer: it names the state, not them.
            Subject::Target(target) => target.brief.clone(),
            Subject::Merge(merge, _) => loopx_core::panel::merge::brief(merge, reviewer),
        }
    }
}

/// A panel run that passed every check and has written nothing yet.
pub struct Prepared {
    pub(super) dir: LoopDir,
    pub(super) phase: Phase,
    pub(super) subject: Subject,
    pub(super) config: PanelConfig,
    pub(super) invitation: config::Invitation,
    /// The attempt ledger as it stood when the run began: the attempts
    /// already spent on the subject, and how long reviews took lately.
    pub(super) attempts: Attempts,
    /// How its reviewer processes run, every invited one attested.
    pub containment: Containment,
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
/// can be invited, no attempt is left, or the provider transport
/// (`transport`, else its variable) refuses the reviewers; target advice
/// is refused in enforce mode. `executor` names the executor's provider
/// for a strategy review when no driver has, and for target advice the
/// provider about to run the turn.
pub fn prepare(
    root: Place<'_>,
    phase: Phase,
    executor: Option<&str>,
    transport: Option<&str>,
) -> Result<Prepared, AppError> {
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let mode = dir.read()?.ledger.config.goal_focus_mode;
    let subject = match phase {
        Phase::ResultReview => Subject::Candidate(Box::new(pending_candidate(&dir, mode)?)),
        Phase::StrategyReview => Subject::Direction {
            brief: Box::new(strategy::brief(root, executor)?.brief),
            executor: executor.map(str::to_owned),
        },
        Phase::TargetAdvice => {
            if mode == GoalFocusMode::Enforce {
                return Err(AppError::refused(format!(
                    "{} is in Goal Focus enforce mode: its direction is reviewed by strategy_review (`loopx panel --phase strategy_review`); target_advice is the flow for loops Goal Focus does not enforce",
                    dir.display()
                )));
            }
            Subject::Target(Box::new(Target::of(&dir, executor)?))
        }
        Phase::MergeReview => {
            return Err(AppError::refused(
                "merge_review runs in the merge queue of `loopx drive --workers N --panel on`, on each merged change before it lands",
            ))
        }
    };
    prepared(dir, mode, phase, subject, transport)
}

/// [`prepare`] for the merge queue: the review of `merge`, a change a
/// worker on a provider of family `executor` made, merged and checked.
pub fn prepare_merge(
    root: Place<'_>,
    merge: MergeBrief,
    executor: Family,
    transport: Option<&str>,
) -> Result<Prepared, AppError> {
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let mode = dir.read()?.ledger.config.goal_focus_mode;
    let subject = Subject::Merge(Box::new(merge), executor);
    prepared(dir, mode, Phase::MergeReview, subject, transport)
}

/// Every check after the subject is known.
fn prepared(
    dir: LoopDir,
    mode: GoalFocusMode,
    phase: Phase,
    subject: Subject,
    transport: Option<&str>,
) -> Result<Prepared, AppError> {
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
    let past_cap = attempts.used(phase, &fingerprint) >= config.max_attempts;
    // Target advice asks each reviewer once per state: a round whose
    // reviewers were all asked is finished, not exhausted (its run only
    // rewrites the synthesis).
    if phase != Phase::TargetAdvice
        && past_cap
        && untried(&invitation.invited, &attempts, phase, &fingerprint) == 0
    {
        return Err(refused(PanelProblem::Exhausted {
            phase: phase.name(),
            subject: fingerprint.to_string(),
            max: config.max_attempts,
        }));
    }
    let invited: Vec<&str> = invitation.invited.iter().map(String::as_str).collect();
    let containment = crate::containment::prepare(
        Role::Panel,
        transport,
        mode == GoalFocusMode::Enforce,
        &invited,
        false,
    )?;
    Ok(Prepared {
        dir,
        phase,
        subject,
        config,
        invitation,
        attempts,
        containment,
    })
}
