//! `loopx cost`: parse, call `loopx_app::cost::cost`, render the report.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::driver::env;
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_core::cost::{By, CostReport};
use loopx_store::sqlite::Access;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Tokens and USD per turn, day or provider, the budgets left, the burn
/// rate and when each budget runs out at that rate.
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
    /// Group the rows by turn, day or provider.
    #[arg(long, default_value = "turn", value_parser = ["turn", "day", "provider"])]
    by: String,
}

pub fn cost(args: &CostArgs, store: Option<&str>) -> Result<Reply> {
    let by: By = args.by.parse().map_err(loopx_app::AppError::refused)?;
    let view = loopx_app::cost::cost(
        &LoopDir::open(Place::new(&args.dir, store), Access::ReadOnly)?,
        by,
    )?;
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
    let _ = writeln!(
        out,
        "{:<22} {:>6} {:>12} {:>10.4}\n",
        "total", report.turns, report.tokens, report.usd
    );
    for b in &report.budgets {
        let left = match b.remaining {
            Some(left) => format!("{left:.2} of {:.2} left", b.max),
            None => "unlimited".into(),
        };
        let end = match (b.hours_to_exhaust, b.exhausts_at) {
            (Some(h), Some(at)) => format!("; runs out in {h:.1}h ({at})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{}: {:.2} used, {left}, {:.2}/h{end}",
            b.name, b.used, b.per_hour
        );
    }
    out
}
