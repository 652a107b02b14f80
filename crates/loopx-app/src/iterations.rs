//! The iteration reads: the most recent iteration records, and one
//! iteration in detail (its record, the driver's dispatch for it, the tail
//! of its log).
//!
//! Owns: finding records in the ledger journal without refolding all of
//! it, and joining an iteration with its dispatch. Journal entries are
//! recognised by their typed events (`LedgerEvent`, `DriverEvent`), never
//! by kind strings. Does not own: how an adapter lays the detail out.

use crate::journal_scan;
use crate::loop_dir::LoopDir;
use crate::AppError;
use loopx_core::driver::snapshot::TurnSnapshot;
use loopx_core::driver::{self, DriverEvent, Intent};
use loopx_core::ledger::{IterationRecord, LedgerEvent, STREAM};
use loopx_core::path::LoopPath;
use serde::Serialize;
use std::ops::ControlFlow;

/// The most recent iterations, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct RecentIterations {
    pub status: &'static str,
    pub iterations: Vec<IterationRecord>,
}

/// One iteration: what the ledger recorded, and, when the driver ran it,
/// its dispatch and the tail of its log.
#[derive(Debug, Clone, Serialize)]
pub struct IterationDetail {
    pub status: &'static str,
    pub record: IterationRecord,
    pub dispatch: Option<Intent>,
    pub log: Option<String>,
    /// The workspace before and after its turn, when the driver took git
    /// snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<TurnSnapshot>,
}

/// How much of a turn's log the detail shows: its end, where a failure is.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The last `limit` iteration records, newest first.
pub fn recent(dir: &LoopDir, limit: usize) -> Result<RecentIterations, AppError> {
    let mut iterations = recent_records(dir, limit)?;
    iterations.reverse();
    Ok(RecentIterations {
        status: "ok",
        iterations,
    })
}

/// The last `limit` iteration records, oldest first, reading only the end
/// of the journal when that is enough.
pub fn recent_records(dir: &LoopDir, limit: usize) -> Result<Vec<IterationRecord>, AppError> {
    let reading = dir.read()?;
    let wanted = (reading.ledger.spent.iterations as usize).min(limit);
    let mut window = (limit as u64) * 2 + 8;
    loop {
        let after = reading.revision.saturating_sub(window);
        let mut records = records_after(dir, after)?;
        if records.len() >= wanted || after == 0 {
            let start = records.len().saturating_sub(limit);
            return Ok(records.split_off(start));
        }
        window *= 4;
    }
}

/// Iteration `iteration` in detail; not found when the ledger has none.
/// Finds the record and its dispatch with [`journal_scan::seek`]: the
/// reads grow with the log of the journals' lengths.
pub fn detail(dir: &LoopDir, iteration: u64) -> Result<IterationDetail, AppError> {
    let store = dir.authority().store();
    let ledger_revision = dir.read()?.revision;
    let iteration_of = &mut |event: &str| iteration_record(event).map(|r| r.iteration);
    let from = journal_scan::seek(store, STREAM, ledger_revision, iteration_of, iteration)
        .map_err(anyhow::Error::new)?;
    let mut found = None;
    journal_scan::oldest_first(
        store,
        STREAM,
        from,
        &mut |row| match iteration_record(row.event) {
            Some(record) if record.iteration >= iteration => {
                found = Some(record).filter(|r| r.iteration == iteration);
                ControlFlow::Break(())
            }
            _ => ControlFlow::Continue(()),
        },
    )
    .map_err(anyhow::Error::new)?;
    let record = found.ok_or_else(|| {
        AppError::not_found(format!(
            "no iteration {iteration} in this ledger (iterations are numbered from 1)"
        ))
    })?;
    let (dispatch, snapshot) = dispatch_of(dir, &record)?;
    let log = dispatch.as_ref().and_then(|i| log_tail(dir, &i.log));
    Ok(IterationDetail {
        status: "ok",
        record,
        dispatch,
        log,
        snapshot,
    })
}

/// The driver's dispatch that recorded `record`: the intent for its
/// iteration with its dispatch id, or the last intent for its iteration
/// when the record names none; and that turn's git snapshots, recorded
/// after it settled and before the next intent.
fn dispatch_of(
    dir: &LoopDir,
    record: &IterationRecord,
) -> Result<(Option<Intent>, Option<TurnSnapshot>), AppError> {
    let store = dir.authority().store();
    let (driver_revision, _) = dir.driver()?;
    let intended = |event: &str| match serde_json::from_str(event) {
        Ok(DriverEvent::Intended { intent }) => Some(intent),
        _ => None,
    };
    let iteration = record.iteration;
    let from = journal_scan::seek(
        store,
        driver::STREAM,
        driver_revision,
        &mut |event| intended(event).map(|i| i.iteration),
        iteration,
    )
    .map_err(anyhow::Error::new)?;
    let mut dispatch: Option<Intent> = None;
    let mut snapshot = None;
    journal_scan::oldest_first(store, driver::STREAM, from, &mut |row| {
        match serde_json::from_str(row.event) {
            Ok(DriverEvent::Intended { intent }) if intent.iteration > iteration => {
                return ControlFlow::Break(());
            }
            Ok(DriverEvent::Intended { intent })
                if intent.iteration == iteration
                    && (record.dispatch_id.is_empty()
                        || intent.dispatch_id == record.dispatch_id) =>
            {
                dispatch = Some(*intent);
                snapshot = None;
            }
            Ok(DriverEvent::Snapshotted { snapshot: taken })
                if dispatch
                    .as_ref()
                    .is_some_and(|d| d.dispatch_id == taken.dispatch_id) =>
            {
                snapshot = Some(*taken);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    })
    .map_err(anyhow::Error::new)?;
    Ok((dispatch, snapshot))
}

/// Iteration records from the journal, oldest first, from revision `after`
/// on.
fn records_after(dir: &LoopDir, after: u64) -> Result<Vec<IterationRecord>, AppError> {
    let mut records = Vec::new();
    dir.authority()
        .store()
        .journal_rows(STREAM, after, &mut |row| {
            records.extend(iteration_record(row.event));
            Ok(())
        })
        .map_err(anyhow::Error::new)?;
    Ok(records)
}

/// The iteration record a ledger journal entry holds, if it holds one.
fn iteration_record(event: &str) -> Option<IterationRecord> {
    match LedgerEvent::from_journal(event) {
        Ok(
            LedgerEvent::IterationAppended { record } | LedgerEvent::IterationImported { record },
        ) => Some(*record),
        _ => None,
    }
}

/// The end of a log named by the journal, read only if it is a regular
/// file inside the loop directory.
fn log_tail(dir: &LoopDir, relative: &str) -> Option<String> {
    let path = LoopPath::parse(relative).ok()?;
    let bytes = dir.tail_file(&path, LOG_TAIL_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}
