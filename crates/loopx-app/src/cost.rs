//! The `cost` use case: the driver's settlements read from the journal
//! (each carries the usage the agent's structured output reported, once
//! per dispatch), with the ledger's budget and spend, into the core's
//! cost report. Shared by `loopx cost`, `GET /api/cost` and the dashboard.

use crate::clock;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use loopx_core::cost::{report, By, CostReport};
use loopx_core::driver::{self, DriverEvent, Settlement};

/// The cost report of the loop in `dir`, rows grouped `by`.
pub fn cost(dir: &LoopDir, by: By) -> Result<CostReport, AppError> {
    let ledger = dir.read()?.ledger;
    let mut settlements: Vec<Settlement> = Vec::new();
    dir.authority()
        .store()
        .journal(driver::STREAM, 0, &mut |entry| {
            if let Ok(DriverEvent::Settled { settlement }) = serde_json::from_str(&entry.event) {
                settlements.push(*settlement);
            }
            Ok(())
        })
        .map_err(anyhow::Error::new)?;
    Ok(report(
        &settlements,
        by,
        &ledger.config.budget,
        &ledger.spent,
        ledger.created_at,
        clock::now(),
    ))
}
