//! The `cost` use case: the ledger's charges (every iteration's own
//! figures, however it was recorded, and the driver's charge per dispatch)
//! and the driver's settlements, read from the journal, with the ledger's
//! budget and spend and whether the loop is done, into the core's cost
//! report. Shared by `loopx cost`, `GET /api/cost`, the dashboard and the
//! all-loops page.

use crate::clock;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use loopx_core::cost::{report, By, Charge, CostReport, Period};
use loopx_core::driver::{self, DriverEvent, Settlement};
use loopx_core::ledger::arbiter::arbitrate;
use loopx_core::ledger::{self, LedgerEvent};

/// The cost report of the loop in `dir`, rows grouped `by`.
pub fn cost(dir: &LoopDir, by: By) -> Result<CostReport, AppError> {
    let ledger = dir.read()?.ledger;
    let now = clock::now();
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
        Period {
            since: ledger.created_at,
            now,
            finished: arbitrate(&ledger, dir.sentinels(), now).done,
        },
    ))
}
