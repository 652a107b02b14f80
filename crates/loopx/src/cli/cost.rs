//! `loopx cost`: parse, call `loopx_app::cost::cost`, render the report.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::driver::env;
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_core::cost::{By, CostReport};
use loopx_core::words;
use loopx_store::sqlite::Access;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Tokens and USD per turn, day or provider, the budgets left, the burn
/// rate and when each budget runs out at that rate (forecast only after 3
/// turns and 10 minutes, and never for a finished loop).
///
/// Every figure is the ledger's: each iteration's own --tokens/--usd
/// (recorded by hand, by an agent or by the driver) and the driver's
/// measured charge per dispatch, counted once. The total is what the
/// budgets are judged by.
#[derive(Debug, Args)]
pub struct CostArgs {
    /// The loop directory.
    #[arg(long, env = env::LOOP_DIR, default_value = ".loopx")]
    dir: PathBuf,
    /// Group the rows by provider (a few rows), day or turn (one row each,
    /// paged).
    #[arg(long, default_value = "provider", value_parser = ["turn", "day", "provider"])]
    by: String,
    /// Rows per page: the newest this many (at most 500).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=500))]
    limit: u64,
    /// Show the rows before this position (the `older` of the page after).
    #[arg(long)]
    before: Option<u64>,
}

pub fn cost(args: &CostArgs, store: Option<&str>) -> Result<Reply> {
    let by: By = args.by.parse().map_err(loopx_app::AppError::refused)?;
    let view = loopx_app::cost::cost(
        &LoopDir::open(Place::new(&args.dir, store), Access::ReadOnly)?,
        by,
    )?
    .page(args.before, args.limit as usize);
    let text = text(&view);
    Reply::view(&view, text)
}

fn text(report: &CostReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>6} {:>12} {:>10}",
        "", "turns", "tokens", "usd"
    );
    for row in &report.rows {
        let key = match &row.provider {
            Some(provider) => format!("{} [{provider}]", row.key),
            None => row.key.clone(),
        };
        let _ = writeln!(
            out,
            "{key:<22} {:>6} {:>12} {:>10.4}",
            row.turns, row.tokens, row.usd
        );
    }
    if let Some(older) = report.older {
        let _ = writeln!(out, "({older} earlier rows: --before {older})");
    }
    let _ = writeln!(
        out,
        "{:<22} {:>6} {:>12} {:>10.4}\n",
        "total", report.turns, report.tokens, report.usd
    );
    for b in &report.budgets {
        let left = match b.remaining {
            Some(left) => format!("{} of {} left", b.figure(left), b.figure(b.max)),
            None => "unlimited".into(),
        };
        let end = match (b.per_hour, b.hours_to_exhaust, b.exhausts_at) {
            (Some(rate), Some(h), Some(at)) => {
                // Wall time always burns an hour an hour: no rate to show.
                let rate = if b.name == "wall_time_hours" {
                    String::new()
                } else {
                    format!(", {}/h", b.figure(rate))
                };
                let left = words::duration((h * 3600.0) as u64);
                format!("{rate}; runs out in {left} ({at})")
            }
            _ if b.max > 0.0 => format!("; {}", b.without_forecast()),
            _ => String::new(),
        };
        let _ = writeln!(out, "{}: {} used, {left}{end}", b.name, b.figure(b.used));
    }
    out
}
