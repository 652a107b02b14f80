//! The driver's turns as a person reads them: when each dispatch started,
//! when it ended (settled or cancelled), how long it took, on which
//! provider and how it ended. The dashboard's timeline and the all-loops
//! page's last activity read it; `GET /api/turns` serves it.
//!
//! Owns: joining a dispatch's intent with its end in the driver journal,
//! and a turn's duration (computed here once, never in an adapter or in
//! the page's script). Does not own: what a turn cost (`crate::cost`), or
//! the driver's bookkeeping (`loopx_core::driver`).

use crate::journal_scan;
use crate::loop_dir::LoopDir;
use crate::AppError;
use jiff::Timestamp;
use loopx_core::driver::snapshot::TurnSnapshot;
use loopx_core::driver::{self, DriverEvent, TurnOutcome};
use serde::Serialize;
use std::ops::ControlFlow;

/// One dispatched turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    pub dispatch_id: String,
    /// The ledger iteration the turn was expected to record.
    pub iteration: u64,
    pub provider: String,
    pub started_at: Timestamp,
    /// When it settled or was cancelled; absent while it is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Whole seconds from start to end; absent while it is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// How it ended; absent while open, `cancelled` when cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TurnOutcome>,
    /// Its workspace before and after, on loopx's git refs (absent when
    /// the run took no snapshots).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<TurnSnapshot>,
}

/// A page of the loop's turns: the newest `limit` before a cursor,
/// oldest first, with how many turns the loop has had and the cursor of
/// the page before this one.
#[derive(Debug, Clone, Serialize)]
pub struct Turns {
    pub status: &'static str,
    /// 2: a page (`total`, `older`) where 1 listed every turn.
    pub schema_version: u32,
    /// Every turn the loop has dispatched, settled or open.
    pub total: u64,
    pub turns: Vec<Turn>,
    /// Pass as `before` for the turns before these; absent on the oldest
    /// page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub older: Option<u64>,
}

impl Turns {
    /// The last turn on this page that was expected to record
    /// `iteration` (a retried iteration has several; the last is the one
    /// that counted).
    pub fn for_iteration(&self, iteration: u64) -> Option<&Turn> {
        self.turns.iter().rev().find(|t| t.iteration == iteration)
    }

    /// When the driver last did anything: the latest start or end.
    pub fn last_activity(&self) -> Option<Timestamp> {
        self.turns
            .iter()
            .map(|t| t.ended_at.unwrap_or(t.started_at))
            .max()
    }
}

/// The most turns a page holds.
pub const MAX_PAGE: usize = 500;

/// The newest `limit` turns before the cursor `before` (a revision of the
/// driver journal; `None`: the newest), read from the end of the driver
/// journal back, so the cost follows the page, not the loop's length.
///
/// One dispatch is open at a time, so every turn older than an intent
/// ended before that intent began: a page's turns find their ends within
/// the rows read, and the cursor is the oldest intent shown.
pub fn page(dir: &LoopDir, before: Option<u64>, limit: usize) -> Result<Turns, AppError> {
    let limit = limit.clamp(1, MAX_PAGE);
    let (_, state) = dir.driver()?;
    let total = state.dispatches + u64::from(state.open.is_some());
    // Newest first; one intent past the page says whether there is more.
    let mut events: Vec<(u64, DriverEvent)> = Vec::new();
    let mut intents = 0;
    journal_scan::newest_first(
        dir.authority().store(),
        driver::STREAM,
        before.unwrap_or(u64::MAX),
        &mut |row| {
            if let Ok(event) = serde_json::from_str::<DriverEvent>(row.event) {
                if matches!(event, DriverEvent::Intended { .. }) {
                    intents += 1;
                }
                events.push((row.revision, event));
            }
            if intents > limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )
    .map_err(anyhow::Error::new)?;
    let older = (intents > limit).then(|| {
        // Drop the intent past the page and what came before it.
        let past = events
            .iter()
            .rposition(|(_, e)| matches!(e, DriverEvent::Intended { .. }))
            .expect("counted");
        events.truncate(past);
        events
            .iter()
            .rev()
            .find(|(_, e)| matches!(e, DriverEvent::Intended { .. }))
            .map_or(0, |(revision, _)| *revision)
    });
    events.reverse();
    Ok(Turns {
        status: "ok",
        schema_version: 2,
        total,
        turns: join(events.into_iter().map(|(_, event)| event)),
        older,
    })
}

/// The log of the turn that worked on iteration `iteration` (relative to
/// the loop directory, as its intent names it): the last dispatch for it,
/// since a retried iteration has several and the last is the one that
/// counted. Read from the end of the driver journal back, stopping there.
pub fn log_of_iteration(dir: &LoopDir, iteration: u64) -> Result<String, AppError> {
    let mut found = None;
    journal_scan::newest_first(
        dir.authority().store(),
        driver::STREAM,
        u64::MAX,
        &mut |row| match serde_json::from_str::<DriverEvent>(row.event) {
            Ok(DriverEvent::Intended { intent }) if intent.iteration == iteration => {
                found = Some(intent.log);
                ControlFlow::Break(())
            }
            _ => ControlFlow::Continue(()),
        },
    )
    .map_err(anyhow::Error::new)?;
    found.ok_or_else(|| {
        AppError::not_found(format!(
            "no driven turn worked on iteration {iteration} of the loop in {} (turns are numbered as the iterations they record, from 1; `loopx snapshot list` shows them)",
            dir.display()
        ))
    })
}

/// Each intent with the settlement or cancellation of the same dispatch.
/// An end without an intent (a journal from before intents carried a
/// start) is left out: it has no duration to show.
pub fn join(events: impl IntoIterator<Item = DriverEvent>) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let end = |turns: &mut Vec<Turn>, id: &str, at: Timestamp, outcome: TurnOutcome| {
        if let Some(turn) = turns
            .iter_mut()
            .rev()
            .find(|t| t.dispatch_id == id && t.ended_at.is_none())
        {
            turn.ended_at = Some(at);
            // A clock stepped back between start and end reads as zero,
            // never as a negative or wrapped duration.
            turn.seconds = Some(at.duration_since(turn.started_at).as_secs().max(0) as u64);
            turn.outcome = Some(outcome);
        }
    };
    for event in events {
        match event {
            DriverEvent::Intended { intent } => turns.push(Turn {
                dispatch_id: intent.dispatch_id,
                iteration: intent.iteration,
                provider: intent.provider,
                started_at: intent.started_at,
                ended_at: None,
                seconds: None,
                outcome: None,
                snapshot: None,
            }),
            DriverEvent::Settled { settlement } => end(
                &mut turns,
                &settlement.dispatch_id,
                settlement.settled_at,
                settlement.outcome,
            ),
            DriverEvent::Cancelled {
                dispatch_id, at, ..
            } => end(&mut turns, &dispatch_id, at, TurnOutcome::Cancelled),
            // Taken after the settlement, so found among ended turns.
            DriverEvent::Snapshotted { snapshot } => {
                if let Some(turn) = turns
                    .iter_mut()
                    .rev()
                    .find(|t| t.dispatch_id == snapshot.dispatch_id)
                {
                    turn.snapshot = Some(*snapshot);
                }
            }
            _ => {}
        }
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_core::driver::classify::{FailureClass, Usage};
    use loopx_core::driver::{Intent, Settlement, Workspace};

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn intended(id: &str, iteration: u64, started: &str) -> DriverEvent {
        DriverEvent::Intended {
            intent: Box::new(Intent {
                dispatch_id: id.into(),
                iteration,
                provider: "claude".into(),
                prompt_digest: String::new(),
                ledger_revision: 1,
                iterations_before: iteration - 1,
                workspace: Workspace {
                    root: "/w".into(),
                    head: None,
                    changes: None,
                },
                log: format!("logs/{id}.log"),
                started_at: at(started),
            }),
        }
    }

    fn settled(id: &str, iteration: u64, when: &str, outcome: TurnOutcome) -> DriverEvent {
        DriverEvent::Settled {
            settlement: Box::new(Settlement {
                dispatch_id: id.into(),
                iteration,
                provider: "claude".into(),
                outcome,
                exit_status: Some(0),
                usage: Usage::default(),
                settled_at: at(when),
                note: String::new(),
            }),
        }
    }

    #[test]
    fn a_turn_lasts_from_its_intent_to_its_settlement() {
        let turns = join([
            intended("d1", 1, "2026-12-03T10:00:00Z"),
            settled("d1", 1, "2026-12-03T10:03:12Z", TurnOutcome::Advanced),
            intended("d2", 2, "2026-12-03T10:04:00Z"),
        ]);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].seconds, Some(192));
        assert_eq!(turns[0].outcome, Some(TurnOutcome::Advanced));
        assert_eq!(turns[1].seconds, None, "an open turn has no duration yet");
    }

    #[test]
    fn a_retried_iteration_shows_its_last_turn_and_a_cancel_ends_one() {
        let turns = Turns {
            status: "ok",
            schema_version: 2,
            total: 2,
            older: None,
            turns: join([
                intended("d1", 4, "2026-12-03T10:00:00Z"),
                settled(
                    "d1",
                    4,
                    "2026-12-03T10:00:05Z",
                    TurnOutcome::Failed(FailureClass::Quota),
                ),
                intended("d2", 4, "2026-12-03T11:00:00Z"),
                DriverEvent::Cancelled {
                    dispatch_id: "d2".into(),
                    reason: "operator".into(),
                    at: at("2026-12-03T11:00:30Z"),
                },
            ]),
        };
        let last = turns.for_iteration(4).unwrap();
        assert_eq!(last.dispatch_id, "d2");
        assert_eq!(last.seconds, Some(30));
        assert_eq!(last.outcome, Some(TurnOutcome::Cancelled));
        assert_eq!(turns.last_activity(), Some(at("2026-12-03T11:00:30Z")));
    }

    #[test]
    fn a_clock_stepped_back_reads_as_zero_seconds() {
        let turns = join([
            intended("d1", 1, "2026-12-03T10:00:10Z"),
            settled("d1", 1, "2026-12-03T10:00:00Z", TurnOutcome::NoAdvance),
        ]);
        assert_eq!(turns[0].seconds, Some(0));
    }
}
