//! The `cost` use case: the ledger's charges (every iteration's own
//! figures, however it was recorded, and the driver's charge per dispatch)
//! and the driver's settlements, read from the journal, with the ledger's
//! budget and spend and whether the loop is done, into the core's cost
//! report. Shared by `loopx cost`, `GET /api/cost`, the dashboard and the
//! all-loops page.
//!
//! Two reads: [`cost`], every row grouped one way (what `loopx cost --by`
//! asks for, reading both journals whole), and [`recent`], the totals,
//! budgets and newest rows the live views poll, read from the snapshots
//! and the journals' ends only, so its cost does not grow with the loop.

use crate::clock;
use crate::error::AppError;
use crate::journal_scan::newest_first;
use crate::loop_dir::LoopDir;
use loopx_core::cost::{recent_rows, report, summary, By, Charge, CostReport, Period};
use loopx_core::driver::{self, DriverEvent, Settlement};
use loopx_core::ledger::arbiter::arbitrate;
use loopx_core::ledger::{self, Ledger, LedgerEvent};
use std::ops::ControlFlow;

/// The cost report of the loop in `dir`, rows grouped `by`.
pub fn cost(dir: &LoopDir, by: By) -> Result<CostReport, AppError> {
    let ledger = dir.read()?.ledger;
    let store = dir.authority().store();
    let mut charges: Vec<Charge> = Vec::new();
    store
        .journal_rows(ledger::STREAM, 0, &mut |row| {
            if let Ok(event) = LedgerEvent::from_journal(row.event) {
                charges.extend(Charge::of(&event));
            }
            Ok(())
        })
        .map_err(anyhow::Error::new)?;
    let mut settlements: Vec<Settlement> = Vec::new();
    store
        .journal(driver::STREAM, 0, &mut |entry| {
            if let Ok(DriverEvent::Settled { settlement }) = serde_json::from_str(&entry.event) {
                settlements.push(*settlement);
            }
            Ok(())
        })
        .map_err(anyhow::Error::new)?;
    Ok(report(
        &charges,
        &settlements,
        by,
        &ledger.config.budget,
        &ledger.spent,
        period(dir, &ledger),
    ))
}

/// The totals and budgets of the loop in `dir` with its newest `limit`
/// turn rows (the tail of [`cost`]'s rows by turn).
///
/// Reads the newest `limit + 1` settlements, and the ledger's charges
/// back to the oldest of them: the rows after it are whole, because one
/// dispatch runs at a time. Charges made by hand count as rows too, so
/// the walk back also ends once `limit` of those are read.
pub fn recent(dir: &LoopDir, limit: usize) -> Result<CostReport, AppError> {
    let ledger = dir.read()?.ledger;
    let (_, driver_state) = dir.driver()?;
    let mut settlements: Vec<Settlement> = Vec::new();
    let mut charges: Vec<Charge> = Vec::new();
    if limit > 0 {
        read_window(dir, limit, &mut settlements, &mut charges)?;
    }
    // Every turn the driver settled, or every iteration recorded,
    // whichever is more: at least as many turns as the loop has had.
    let turns = driver_state.dispatches.max(ledger.spent.iterations);
    // The rows counted are the turns: one row each (a page of them here;
    // `cost` pages all of them).
    Ok(CostReport {
        rows: recent_rows(&charges, &settlements, limit),
        rows_total: turns,
        ..summary(
            &ledger.config.budget,
            &ledger.spent,
            period(dir, &ledger),
            turns,
        )
    })
}

/// The newest `limit` settlements and the charges since the settlement
/// before them, oldest first.
fn read_window(
    dir: &LoopDir,
    limit: usize,
    settlements: &mut Vec<Settlement>,
    charges: &mut Vec<Charge>,
) -> Result<(), AppError> {
    let store = dir.authority().store();
    newest_first(store, driver::STREAM, u64::MAX, &mut |row| {
        if let Ok(DriverEvent::Settled { settlement }) = serde_json::from_str(row.event) {
            settlements.push(*settlement);
        }
        if settlements.len() > limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .map_err(anyhow::Error::new)?;
    // The settlement before the window bounds it; it is not shown.
    let bound = (settlements.len() > limit).then(|| settlements.remove(limit).settled_at);
    let mut by_hand = 0;
    newest_first(store, ledger::STREAM, u64::MAX, &mut |row| {
        let Some(charge) = LedgerEvent::from_journal(row.event)
            .ok()
            .and_then(|event| Charge::of(&event))
        else {
            return ControlFlow::Continue(());
        };
        if bound.is_some_and(|bound| charge.at <= bound) {
            return ControlFlow::Break(());
        }
        if !settlements
            .iter()
            .any(|s| s.dispatch_id == charge.dispatch_id)
        {
            by_hand += 1;
        }
        charges.push(charge);
        if by_hand >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .map_err(anyhow::Error::new)?;
    charges.reverse();
    settlements.reverse();
    Ok(())
}

/// From the loop's creation to now, and whether it has finished.
fn period(dir: &LoopDir, ledger: &Ledger) -> Period {
    let now = clock::now();
    Period {
        since: ledger.created_at,
        now,
        finished: arbitrate(ledger, dir.sentinels(), now).done,
    }
}
