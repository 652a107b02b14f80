//! The panel's attempt ledger: how many reviewer launches each phase has
//! spent on its current subject (a pending candidate's fingerprint, or the
//! fingerprint of the plan awaiting a strategy review), kept
//! as a stream so the cap survives restarts.
//!
//! Owns the cap: an attempt is started (and counted) before its reviewer
//! is launched, so a host killed mid-review has still spent it; once
//! `max_attempts` are started for a subject no further one starts, however
//! many processes ask, except by rotation ([`may_start`]): a reviewer
//! not yet tried on the subject may still be asked once, while the
//! reviewers already tried are not called again (their artifacts and
//! outcomes stand). A person is needed only when no untried reviewer is
//! left. A start for another subject begins a fresh tally
//! for that phase (one candidate is pending at a time, so only the latest
//! subject matters and the stream stays small).
//!
//! Also owns the panel's memory of how long reviews take: the elapsed
//! time of each provider's last [`RECENT_SUCCESSES`] reviews that answered
//! (decided their subject, or advised), per phase, across subjects. The adaptive timeout
//! (`config::timeout_s`) reads it. Does not own what an attempt's outcome
//! means (the application records it for people) or the cap's value
//! (panel.json's, passed with each start).

use super::{PanelProblem, Phase};
use crate::digest::Digest;
use crate::operation::{Clock, Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const ATTEMPTS_STREAM: &str = "panel:attempts";

/// How many of a provider's answered reviews per phase the panel
/// remembers the elapsed time of.
pub const RECENT_SUCCESSES: usize = 5;

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The review decided the candidate: banked accepted.
    BankedAccepted,
    /// The review decided the candidate: banked rejected.
    BankedRejected,
    /// The strategy advice was applied: the next plan is committed
    /// (a direction when endorsed or proposed; `needs_replan` when objected).
    Committed,
    /// A well-formed review the judge refused (wrong fingerprint, split
    /// coverage, same family, ...).
    Refused,
    /// A target-advice reviewer advised (advice decides nothing).
    Advised,
    /// The merge review accepted the merged change: the queue lands it.
    MergeAccepted,
    /// The merge review rejected the merged change: the queue undoes it.
    MergeRejected,
    /// No usable review document in the output.
    Malformed,
    /// Killed at its timeout.
    TimedOut,
    /// Exited non-zero, or could not be started.
    Failed,
}

impl AttemptOutcome {
    /// Its name, as the JSON says it.
    pub fn label(self) -> &'static str {
        match self {
            AttemptOutcome::BankedAccepted => "banked_accepted",
            AttemptOutcome::BankedRejected => "banked_rejected",
            AttemptOutcome::Committed => "committed",
            AttemptOutcome::Refused => "refused",
            AttemptOutcome::Advised => "advised",
            AttemptOutcome::MergeAccepted => "merge_accepted",
            AttemptOutcome::MergeRejected => "merge_rejected",
            AttemptOutcome::Malformed => "malformed",
            AttemptOutcome::TimedOut => "timed_out",
            AttemptOutcome::Failed => "failed",
        }
    }

    pub fn decided(self) -> bool {
        matches!(
            self,
            AttemptOutcome::BankedAccepted
                | AttemptOutcome::BankedRejected
                | AttemptOutcome::Committed
                | AttemptOutcome::MergeAccepted
                | AttemptOutcome::MergeRejected
        )
    }

    /// The reviewer gave what its phase asks for: a deciding review, or
    /// advice. Its elapsed time is what the adaptive timeout learns from.
    pub fn answered(self) -> bool {
        self.decided() || self == AttemptOutcome::Advised
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub provider: String,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// One phase's attempts on its current subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub subject: Digest,
    pub attempts: Vec<Attempt>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Attempts {
    pub phases: BTreeMap<Phase, Tally>,
    /// Per phase, per provider: the elapsed milliseconds of its last
    /// [`RECENT_SUCCESSES`] reviews that answered (decided their subject, or advised), oldest
    /// first. Absent when empty, so the snapshots of loops whose reviews
    /// were recorded before elapsed times were are unchanged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recent_success_ms: BTreeMap<Phase, BTreeMap<String, Vec<u64>>>,
}

/// Whether `provider` may start an attempt on a subject that has had
/// `used` attempts, by the reviewers `tried`, under a cap of `max`: below
/// the cap anyone invited may; at or past it only a reviewer not yet
/// tried (the rotation after the cap).
pub fn may_start<'a>(
    used: u32,
    max: u32,
    mut tried: impl Iterator<Item = &'a str>,
    provider: &str,
) -> bool {
    used < max || !tried.any(|t| t == provider)
}

impl Attempts {
    /// The reviewers that started an attempt in `phase` on `subject`.
    pub fn tried(&self, phase: Phase, subject: &Digest) -> impl Iterator<Item = &str> {
        (self.tally(phase, subject).into_iter())
            .flat_map(|t| t.attempts.iter().map(|a| a.provider.as_str()))
    }

    /// [`may_start`] for `provider` in `phase` on `subject`.
    pub fn may_start(&self, phase: Phase, subject: &Digest, provider: &str, max: u32) -> bool {
        may_start(
            self.used(phase, subject),
            max,
            self.tried(phase, subject),
            provider,
        )
    }

    /// The attempts `phase` has started on `subject`.
    pub fn used(&self, phase: Phase, subject: &Digest) -> u32 {
        self.tally(phase, subject)
            .map_or(0, |t| t.attempts.len() as u32)
    }

    pub fn tally(&self, phase: Phase, subject: &Digest) -> Option<&Tally> {
        self.phases.get(&phase).filter(|t| &t.subject == subject)
    }

    /// How long `provider`'s recent answered reviews in `phase` took, in
    /// milliseconds, oldest first (empty when none is known).
    pub fn recent_success_ms(&self, phase: Phase, provider: &str) -> &[u64] {
        self.recent_success_ms
            .get(&phase)
            .and_then(|by_provider| by_provider.get(provider))
            .map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AttemptRequest {
    /// Start attempt number `attempt` (the next one) on `subject`, unless
    /// `max_attempts` are already started.
    Start {
        phase: Phase,
        subject: Digest,
        attempt: u32,
        provider: String,
        max_attempts: u32,
    },
    /// Record how a started attempt ended, and how long its reviewer ran
    /// (`None`: not measured).
    Finish {
        phase: Phase,
        subject: Digest,
        attempt: u32,
        outcome: AttemptOutcome,
        detail: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elapsed_ms: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AttemptEvent {
    Started {
        phase: Phase,
        subject: Digest,
        attempt: u32,
        provider: String,
        at: Timestamp,
    },
    Finished {
        phase: Phase,
        attempt: u32,
        outcome: AttemptOutcome,
        detail: String,
        /// Absent on attempts recorded before elapsed times were.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elapsed_ms: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptReceipt {
    pub phase: Phase,
    pub attempt: u32,
    /// Attempts started on the subject, this one included.
    pub used: u32,
}

pub struct AttemptOwner;

impl Owner for AttemptOwner {
    type State = Attempts;
    type Request = AttemptRequest;
    type Event = AttemptEvent;
    type Receipt = AttemptReceipt;
    type Error = PanelProblem;
    type Context<'a> = Clock;

    fn decide(
        state: Option<&Attempts>,
        request: &AttemptRequest,
        clock: &Clock,
    ) -> Result<Decided<AttemptEvent, AttemptReceipt>, PanelProblem> {
        let empty = Attempts::default();
        let state = state.unwrap_or(&empty);
        match request {
            AttemptRequest::Start {
                phase,
                subject,
                attempt,
                provider,
                max_attempts,
            } => {
                let used = state.used(*phase, subject);
                if !state.may_start(*phase, subject, provider, *max_attempts) {
                    return Err(PanelProblem::Exhausted {
                        phase: phase.name(),
                        subject: subject.to_string(),
                        max: *max_attempts,
                    });
                }
                if *attempt != used + 1 {
                    return Err(PanelProblem::OutOfTurn {
                        phase: phase.name(),
                        given: *attempt,
                        next: used + 1,
                    });
                }
                Ok(Decided::write(
                    AttemptEvent::Started {
                        phase: *phase,
                        subject: subject.clone(),
                        attempt: *attempt,
                        provider: provider.clone(),
                        at: clock.now,
                    },
                    AttemptReceipt {
                        phase: *phase,
                        attempt: *attempt,
                        used: *attempt,
                    },
                ))
            }
            AttemptRequest::Finish {
                phase,
                subject,
                attempt,
                outcome,
                detail,
                elapsed_ms,
            } => {
                let open = state
                    .tally(*phase, subject)
                    .and_then(|t| t.attempts.iter().find(|a| a.attempt == *attempt))
                    .is_some_and(|a| a.outcome.is_none());
                if !open {
                    return Err(PanelProblem::NotStarted {
                        phase: phase.name(),
                        attempt: *attempt,
                    });
                }
                Ok(Decided::write(
                    AttemptEvent::Finished {
                        phase: *phase,
                        attempt: *attempt,
                        outcome: *outcome,
                        detail: crate::redact::redact_owned(detail),
                        elapsed_ms: *elapsed_ms,
                    },
                    AttemptReceipt {
                        phase: *phase,
                        attempt: *attempt,
                        used: state.used(*phase, subject),
                    },
                ))
            }
        }
    }

    fn evolve(state: Option<Attempts>, event: &AttemptEvent) -> Attempts {
        let mut state = state.unwrap_or_default();
        match event {
            AttemptEvent::Started {
                phase,
                subject,
                attempt,
                provider,
                at,
            } => {
                let tally = state.phases.entry(*phase).or_insert_with(|| Tally {
                    subject: subject.clone(),
                    attempts: Vec::new(),
                });
                if &tally.subject != subject {
                    *tally = Tally {
                        subject: subject.clone(),
                        attempts: Vec::new(),
                    };
                }
                tally.attempts.push(Attempt {
                    attempt: *attempt,
                    provider: provider.clone(),
                    started_at: *at,
                    outcome: None,
                    detail: String::new(),
                });
            }
            AttemptEvent::Finished {
                phase,
                attempt,
                outcome,
                detail,
                elapsed_ms,
            } => {
                let found = state
                    .phases
                    .get_mut(phase)
                    .and_then(|t| t.attempts.iter_mut().find(|a| a.attempt == *attempt));
                let Some(a) = found else { return state };
                a.outcome = Some(*outcome);
                a.detail = detail.clone();
                if let (true, Some(elapsed_ms)) = (outcome.answered(), elapsed_ms) {
                    let provider = a.provider.clone();
                    let recent = state
                        .recent_success_ms
                        .entry(*phase)
                        .or_default()
                        .entry(provider)
                        .or_default();
                    crate::window::push_newest(recent, *elapsed_ms, RECENT_SUCCESSES);
                }
            }
        }
        state
    }

    fn event_kind(event: &AttemptEvent) -> &'static str {
        match event {
            AttemptEvent::Started { .. } => "panel.attempt_started",
            AttemptEvent::Finished { .. } => "panel.attempt_finished",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(state: Attempts, request: AttemptRequest) -> Result<Attempts, PanelProblem> {
        let clock = Clock {
            now: Timestamp::UNIX_EPOCH,
        };
        let decided = AttemptOwner::decide(Some(&state), &request, &clock)?;
        Ok(AttemptOwner::evolve(Some(state), &decided.event.unwrap()))
    }

    fn start(subject: &Digest, attempt: u32) -> AttemptRequest {
        AttemptRequest::Start {
            phase: Phase::ResultReview,
            subject: subject.clone(),
            attempt,
            provider: "codex".into(),
            max_attempts: 2,
        }
    }

    #[test]
    fn no_attempt_starts_past_the_cap_and_a_new_subject_starts_afresh() {
        let a = Digest::of_bytes(b"a");
        let b = Digest::of_bytes(b"b");
        let state = apply(Attempts::default(), start(&a, 1)).unwrap();
        assert!(matches!(
            apply(state.clone(), start(&a, 1)),
            Err(PanelProblem::OutOfTurn { next: 2, .. })
        ));
        let state = apply(state, start(&a, 2)).unwrap();
        assert!(matches!(
            apply(state.clone(), start(&a, 3)),
            Err(PanelProblem::Exhausted { max: 2, .. })
        ));
        assert_eq!(state.used(Phase::ResultReview, &a), 2);
        assert_eq!(state.used(Phase::StrategyReview, &a), 0);
        let state = apply(state, start(&b, 1)).unwrap();
        assert_eq!(state.used(Phase::ResultReview, &b), 1);
        assert_eq!(state.used(Phase::ResultReview, &a), 0);
    }

    #[test]
    fn past_the_cap_only_a_reviewer_not_yet_tried_starts_once() {
        let a = Digest::of_bytes(b"a");
        let by = |provider: &str, attempt| AttemptRequest::Start {
            phase: Phase::StrategyReview,
            subject: a.clone(),
            attempt,
            provider: provider.into(),
            max_attempts: 1,
        };
        let state = apply(Attempts::default(), by("codex", 1)).unwrap();
        // codex was asked: it is not called again on this subject.
        assert!(matches!(
            apply(state.clone(), by("codex", 2)),
            Err(PanelProblem::Exhausted { max: 1, .. })
        ));
        assert!(state.may_start(Phase::StrategyReview, &a, "claude", 1));
        let state = apply(state, by("claude", 2)).unwrap();
        assert!(!state.may_start(Phase::StrategyReview, &a, "claude", 1));
        assert!(matches!(
            apply(state.clone(), by("claude", 3)),
            Err(PanelProblem::Exhausted { .. })
        ));
        assert_eq!(
            state.tried(Phase::StrategyReview, &a).collect::<Vec<_>>(),
            ["codex", "claude"]
        );
    }

    #[test]
    fn an_attempt_finishes_once() {
        let a = Digest::of_bytes(b"a");
        let finish = AttemptRequest::Finish {
            phase: Phase::ResultReview,
            subject: a.clone(),
            attempt: 1,
            outcome: AttemptOutcome::Malformed,
            detail: "no JSON".into(),
            elapsed_ms: Some(10),
        };
        assert!(apply(Attempts::default(), finish.clone()).is_err());
        let state = apply(Attempts::default(), start(&a, 1)).unwrap();
        let state = apply(state, finish.clone()).unwrap();
        let tally = state.tally(Phase::ResultReview, &a).unwrap();
        assert_eq!(tally.attempts[0].outcome, Some(AttemptOutcome::Malformed));
        let json = serde_json::to_value(AttemptOutcome::TimedOut).unwrap();
        assert_eq!(json, AttemptOutcome::TimedOut.label());
        assert!(apply(state.clone(), finish).is_err());
        // A review that decided nothing teaches nothing about how long
        // reviews take.
        assert!(state.recent_success_ms.is_empty());
    }

    fn finish(subject: &Digest, attempt: u32, elapsed_ms: Option<u64>) -> AttemptRequest {
        AttemptRequest::Finish {
            phase: Phase::ResultReview,
            subject: subject.clone(),
            attempt,
            outcome: AttemptOutcome::BankedAccepted,
            detail: String::new(),
            elapsed_ms,
        }
    }

    #[test]
    fn the_last_decisive_reviews_are_remembered_per_provider_across_subjects() {
        let mut state = Attempts::default();
        for n in 1..=(RECENT_SUCCESSES as u64 + 2) {
            let subject = Digest::of_bytes(&n.to_be_bytes());
            state = apply(state, start(&subject, 1)).unwrap();
            state = apply(state, finish(&subject, 1, Some(n * 1000))).unwrap();
        }
        // The oldest two fell out; the strategy phase and other providers
        // know nothing.
        assert_eq!(
            state.recent_success_ms(Phase::ResultReview, "codex"),
            [3000, 4000, 5000, 6000, 7000]
        );
        assert!(state
            .recent_success_ms(Phase::StrategyReview, "codex")
            .is_empty());
        assert!(state
            .recent_success_ms(Phase::ResultReview, "claude")
            .is_empty());
        // An attempt recorded without its time (an older loopx) adds none,
        // and a snapshot without any keeps its old shape.
        let subject = Digest::of_bytes(b"old");
        let old = apply(Attempts::default(), start(&subject, 1)).unwrap();
        let old = apply(old, finish(&subject, 1, None)).unwrap();
        assert!(old.recent_success_ms.is_empty());
        let json = serde_json::to_value(&old).unwrap();
        assert!(json.get("recent_success_ms").is_none(), "{json}");
    }
}
