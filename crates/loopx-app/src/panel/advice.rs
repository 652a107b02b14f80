//! The legacy target-advice phase as the application runs it: the brief,
//! built from the loop's state (the turn prompt's policy texts, the
//! committed next path, recovery.md as the host renders it), and the
//! synthesis, written after a round from the attempt ledger and the
//! answers stored beside it, so a round a killed driver left half done
//! still gets one. Not here: the text and what counts as advice
//! (`loopx_core::panel::advice`), the round itself (`run.rs`).

use super::prepare::attempts;
use crate::focus::candidate::family_of;
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil, AppError};
use loopx_core::digest::Digest;
use loopx_core::driver::provider::Family;
use loopx_core::goal::{Actor, DEFAULT_GOAL_ID};
use loopx_core::ledger::view;
use loopx_core::panel::advice::{self, Advisor, TargetBrief};
use loopx_core::panel::attempts::AttemptOutcome;
use loopx_core::panel::Phase;
use loopx_core::path::LoopPath;
use std::io::Read as _;

/// The state a target-advice round advises on.
pub(crate) struct Target {
    /// What every reviewer is sent.
    pub brief: String,
    /// The loop's committed next path, which the synthesis repeats.
    pub next_path: String,
    /// The family of the provider about to run the turn.
    pub executor: Family,
}

impl Target {
    /// The loop as it stands, for a turn `executor` (a provider name)
    /// will run.
    pub(crate) fn of(dir: &LoopDir, executor: Option<&str>) -> Result<Target, AppError> {
        // As the owner sees the turn: the formal section reads the work
        // selected for it.
        let turn = dir.next_turn(DEFAULT_GOAL_ID, &Actor::Owner)?;
        let ledger = &turn.reading.ledger;
        let verdict = dir.verdict(ledger, clock::now());
        let policies = dir.policy_texts(ledger)?;
        // The policy the sources give (a driver's flags were made its
        // standing orders when it started).
        let formal = crate::formal::prompt_section(dir, &turn, &Default::default())?;
        let next_path = view::next_safe_action(ledger, &verdict);
        let recovery = view::recovery_markdown(ledger, &verdict);
        let brief = advice::brief(&TargetBrief {
            compute_policy: &policies.compute_policy,
            goal_priority: &policies.goal_priority,
            formal_policy: &formal,
            next_path: &next_path,
            last_iteration: ledger.spent.iterations,
            recovery: &recovery,
        });
        Ok(Target {
            brief,
            next_path,
            executor: executor.map_or(Family::Unverified, family_of),
        })
    }

    /// Names the state advised on: the same state, the same round.
    pub(crate) fn fingerprint(&self) -> Digest {
        Digest::of_bytes(self.brief.as_bytes())
    }
}

/// The most of one stored answer the synthesis reads: enough for its
/// quote, whatever the answer's size.
const ANSWER_READ_BYTES: u64 = 4 * advice::QUOTED_CHARS as u64;

/// Write `host_synthesis.md` in `folder` (loop-relative, the round's
/// artifact folder) from every attempt the round on `target` has
/// recorded, and return its loop-relative path.
pub(super) fn write_synthesis(
    dir: &LoopDir,
    target: &Target,
    folder: &str,
) -> anyhow::Result<String> {
    let attempts = attempts(dir)?;
    let tally = attempts.tally(Phase::TargetAdvice, &target.fingerprint());
    let recorded = tally.map_or(&[][..], |t| t.attempts.as_slice());
    let answers: Vec<(String, Option<String>)> = recorded
        .iter()
        .map(|a| {
            let path = format!("{folder}/{}-{}.out", a.attempt, a.provider);
            let advice = (a.outcome == Some(AttemptOutcome::Advised))
                .then(|| stored_answer(dir, &path))
                .flatten();
            (path, advice)
        })
        .collect();
    let advisors: Vec<Advisor<'_>> = recorded
        .iter()
        .zip(&answers)
        .map(|(a, (path, advice))| Advisor {
            provider: &a.provider,
            family: family_of(&a.provider),
            // Started and never finished: the driver was stopped under it.
            outcome: a.outcome.map_or("unfinished", AttemptOutcome::label),
            detail: &a.detail,
            answer_path: advice.as_ref().map(|_| path.as_str()),
            advice: advice.as_deref(),
        })
        .collect();
    let text = advice::synthesis(&target.next_path, &advisors);
    let relative = format!("{folder}/{}", advice::SYNTHESIS);
    fsutil::write_private(&dir.root().join(&relative), text.as_bytes())?;
    Ok(relative)
}

/// The start of a stored (already redacted) answer, printable, or `None`
/// when it cannot be read confined to the loop directory or says nothing.
fn stored_answer(dir: &LoopDir, relative: &str) -> Option<String> {
    let path = LoopPath::parse(relative).ok()?;
    let file = fsutil::open_confined(dir.root(), &path).ok()?;
    let mut bytes = Vec::new();
    file.take(ANSWER_READ_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let answer = advice::advice_in(&text).ok()?;
    Some(loopx_core::text::printable(answer).into_owned())
}
