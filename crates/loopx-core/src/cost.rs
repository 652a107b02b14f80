//! The cost report: what each turn, day and provider used, what each
//! budget has left, the burn rate and when, at that rate, each budget runs
//! out. A burn rate is forecast only from enough history
//! ([`FORECAST_MIN_TURNS`] turns over [`FORECAST_MIN_SECONDS`]) and never
//! for a finished loop: a rate from a two-second sample is noise.
//!
//! Every figure is the ledger's: the rows are its [`Charge`]s (each
//! iteration's own figures, however it was recorded, and the driver's
//! charge for each dispatch), labelled with the driver's settlements where
//! a turn was driven, and the totals are the ledger's spend, the one sum
//! the budgets are judged by. So the table, its total and the budget lines
//! can never disagree.
//!
//! Pure: the charges, settlements, the ledger's budget and spend and the
//! clock arrive as arguments. Reading the journal is the application
//! layer's (`loopx_app::cost`).

use crate::driver::{Settlement, TurnOutcome};
use crate::ledger::budget::{Budget, Spent};
use crate::ledger::LedgerEvent;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use std::collections::BTreeMap;
use std::str::FromStr;

/// How the rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    Turn,
    Day,
    /// The default: a few rows whatever the loop's length.
    #[default]
    Provider,
}

impl FromStr for By {
    type Err = String;
    fn from_str(text: &str) -> Result<By, String> {
        match text {
            "turn" => Ok(By::Turn),
            "day" => Ok(By::Day),
            "provider" => Ok(By::Provider),
            other => Err(format!(
                "cannot group cost by {other:?}: use turn, day or provider"
            )),
        }
    }
}

/// One group of settled turns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The turn's iteration, the UTC day (YYYY-MM-DD) or the provider.
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Timestamp>,
    /// How the turn ended (by turn only): the dashboard marks failed turns
    /// and quota waits on the cost axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TurnOutcome>,
    pub turns: u64,
    pub tokens: u64,
    pub usd: f64,
}

/// One budget: its cap, what is used and left, the burn rate per hour
/// since the loop began, and when it runs out at that rate (the last two
/// only when the report forecasts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetLine {
    pub name: &'static str,
    /// Zero: unlimited (no projection).
    pub max: f64,
    pub used: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours_to_exhaust: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exhausts_at: Option<Timestamp>,
    /// Why this line forecasts no end; absent when it does (or when its
    /// budget is not burning).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_forecast: Option<NoForecast>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    /// 2: rows are a page (`rows_total`, `older`) and the default
    /// grouping is by provider; 1 listed every turn by default.
    pub schema_version: u32,
    pub by: By,
    /// A page of the rows, oldest first.
    pub rows: Vec<Row>,
    /// Every row of the report, on this page or not.
    pub rows_total: u64,
    /// Pass as `before` for the rows before this page; absent on the
    /// first page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub older: Option<u64>,
    /// The turns together (driven or recorded by hand); tokens and USD
    /// are the ledger's spend.
    pub turns: u64,
    pub tokens: u64,
    pub usd: f64,
    /// Hours since the loop was created: the burn rates' window.
    pub hours: f64,
    pub budgets: Vec<BudgetLine>,
}

/// A burn rate is forecast only after this many turns...
pub const FORECAST_MIN_TURNS: u64 = 3;
/// ...and this much time since the loop began.
pub const FORECAST_MIN_SECONDS: u64 = 600;

/// Why a report forecasts no budget's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoForecast {
    /// The loop is done or stopped: nothing burns any more.
    Finished,
    /// Fewer turns or less time than a rate can be read from.
    TooLittleHistory,
}

impl NoForecast {
    /// Why, in words every view prints.
    pub fn describe(self) -> String {
        match self {
            NoForecast::Finished => "the loop is finished".to_owned(),
            NoForecast::TooLittleHistory => format!(
                "no forecast before {FORECAST_MIN_TURNS} turns and {}",
                crate::words::duration(FORECAST_MIN_SECONDS)
            ),
        }
    }

    fn of(finished: bool, turns: u64, elapsed_seconds: f64) -> Option<NoForecast> {
        if finished {
            Some(NoForecast::Finished)
        } else if turns < FORECAST_MIN_TURNS || elapsed_seconds < FORECAST_MIN_SECONDS as f64 {
            Some(NoForecast::TooLittleHistory)
        } else {
            None
        }
    }
}

/// The time a report covers: from the loop's creation to now, and whether
/// the loop has finished (done or stopped) by then.
#[derive(Debug, Clone, Copy)]
pub struct Period {
    pub since: Timestamp,
    pub now: Timestamp,
    pub finished: bool,
}

impl BudgetLine {
    /// `value` of this budget as every view prints it: dollars with cents,
    /// wall time as a duration, counts as whole numbers.
    pub fn figure(&self, value: f64) -> String {
        match self.name {
            "usd" => format!("${value:.2}"),
            "wall_time_hours" => crate::words::duration((value * SECONDS_PER_HOUR) as u64),
            _ => format!("{}", value as u64),
        }
    }

    /// What every view says instead of a forecast when there is none.
    pub fn without_forecast(&self) -> String {
        self.no_forecast
            .map_or_else(|| "not burning".to_owned(), NoForecast::describe)
    }
}

const SECONDS_PER_HOUR: f64 = 3600.0;

/// What the provider column says of an iteration recorded outside a
/// driven turn that named no executor.
pub const BY_HAND: &str = "by hand";

/// One charge to the ledger's spend, as its journal holds it: an iteration
/// record's own figures (appended by hand, by an agent, banked or
/// imported) or the driver's measured charge for a dispatch beyond what
/// its records reported. Their sum is the ledger's spend.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    /// The dispatch it belongs to; empty for a record made outside one.
    pub dispatch_id: String,
    /// The iteration, for a record's own figures.
    pub iteration: Option<u64>,
    /// Who the record names as executor (empty when none).
    pub provider: String,
    pub at: Timestamp,
    pub tokens: u64,
    pub usd: f64,
}

impl Charge {
    /// The charge a ledger journal event makes, if it makes one.
    pub fn of(event: &LedgerEvent) -> Option<Charge> {
        match event {
            LedgerEvent::IterationAppended { record }
            | LedgerEvent::IterationImported { record } => Some(Charge {
                dispatch_id: record.dispatch_id.clone(),
                iteration: Some(record.iteration),
                provider: record.executor_provider.clone(),
                at: record.timestamp,
                tokens: record.budget_delta.tokens,
                usd: record.budget_delta.usd,
            }),
            LedgerEvent::Charged {
                dispatch_id,
                tokens,
                usd,
                at,
            } => Some(Charge {
                dispatch_id: dispatch_id.clone(),
                iteration: None,
                provider: String::new(),
                at: *at,
                tokens: *tokens,
                usd: *usd,
            }),
            _ => None,
        }
    }
}

/// One row per turn: each settled dispatch with every charge made for it,
/// then each charge made outside a settled dispatch (a record made by
/// hand or by an agent outside `drive`), in time order.
fn turn_rows(charges: &[Charge], settlements: &[Settlement]) -> Vec<Row> {
    let mut rows: Vec<Row> = settlements
        .iter()
        .map(|s| Row {
            key: s.iteration.to_string(),
            provider: Some(s.provider.clone()),
            settled_at: Some(s.settled_at),
            outcome: Some(s.outcome),
            turns: 1,
            tokens: 0,
            usd: 0.0,
        })
        .collect();
    // Each charge finds its turn by dispatch id: an index, not a search,
    // so a report of 20,000 turns costs 20,000 lookups, not their square.
    let by_dispatch: std::collections::HashMap<&str, usize> = settlements
        .iter()
        .enumerate()
        .map(|(index, s)| (s.dispatch_id.as_str(), index))
        .collect();
    for charge in charges {
        let settled = (!charge.dispatch_id.is_empty())
            .then(|| by_dispatch.get(charge.dispatch_id.as_str()).copied())
            .flatten();
        match settled {
            Some(index) => {
                rows[index].tokens = rows[index].tokens.saturating_add(charge.tokens);
                rows[index].usd += charge.usd;
            }
            None => rows.push(Row {
                key: charge
                    .iteration
                    .map_or_else(|| charge.dispatch_id.clone(), |i| i.to_string()),
                provider: Some(if charge.provider.trim().is_empty() {
                    BY_HAND.to_owned()
                } else {
                    charge.provider.clone()
                }),
                settled_at: Some(charge.at),
                outcome: None,
                turns: 1,
                tokens: charge.tokens,
                usd: charge.usd,
            }),
        }
    }
    rows.sort_by_key(|row| row.settled_at);
    rows
}

/// The report of the ledger's `charges` grouped `by` (turns labelled by
/// the driver's `settlements`), with the loop's budgets projected from
/// `spent` over `period` when there is enough of it. The totals are
/// `spent`.
pub fn report(
    charges: &[Charge],
    settlements: &[Settlement],
    by: By,
    budget: &Budget,
    spent: &Spent,
    period: Period,
) -> CostReport {
    let turns = turn_rows(charges, settlements);
    let turn_count = turns.len() as u64;
    let rows = match by {
        By::Turn => turns,
        By::Day | By::Provider => {
            let mut groups: BTreeMap<String, Row> = BTreeMap::new();
            for turn in turns {
                let key = match by {
                    By::Day => turn
                        .settled_at
                        .map(|at| at.strftime("%Y-%m-%d").to_string())
                        .unwrap_or_default(),
                    _ => turn.provider.unwrap_or_default(),
                };
                let row = groups.entry(key.clone()).or_insert(Row {
                    key,
                    provider: None,
                    settled_at: None,
                    outcome: None,
                    turns: 0,
                    tokens: 0,
                    usd: 0.0,
                });
                row.turns += 1;
                row.tokens = row.tokens.saturating_add(turn.tokens);
                row.usd += turn.usd;
            }
            groups.into_values().collect()
        }
    };
    CostReport {
        by,
        rows_total: rows.len() as u64,
        rows,
        ..summary(budget, spent, period, turn_count)
    }
}

/// The most rows a page of a report holds.
pub const MAX_ROWS_PAGE: usize = 500;

impl CostReport {
    /// This report with only the `limit` rows before row `before` (by
    /// position from the first, oldest row; `None`: the newest rows).
    /// Rows are added at the end, so a position names the same row on the
    /// next read.
    pub fn page(mut self, before: Option<u64>, limit: usize) -> CostReport {
        let limit = limit.clamp(1, MAX_ROWS_PAGE);
        let end = before.map_or(self.rows.len(), |b| {
            usize::try_from(b)
                .unwrap_or(usize::MAX)
                .min(self.rows.len())
        });
        let start = end.saturating_sub(limit);
        self.rows.truncate(end);
        self.rows.drain(..start);
        self.older = (start > 0).then_some(start as u64);
        self
    }
}

/// The newest `limit` turn rows of what [`report`] would list by turn,
/// from a window of the journals: the `settlements` of the newest
/// dispatches and every charge made since the one settled before them.
/// One dispatch runs at a time, so a dispatch's charges all fall after
/// the settlement before it: the window's rows are whole.
pub fn recent_rows(charges: &[Charge], settlements: &[Settlement], limit: usize) -> Vec<Row> {
    let mut rows = turn_rows(charges, settlements);
    rows.drain(..rows.len().saturating_sub(limit));
    rows
}

/// The totals and budget lines of a report, without its rows: what the
/// live views show, read from the ledger's spend alone. `turns` is how
/// many turns the loop has had, as far as the caller counts them; it
/// decides only whether there is history enough to forecast.
pub fn summary(budget: &Budget, spent: &Spent, period: Period, turns: u64) -> CostReport {
    let Period { since, now, .. } = period;
    let turn_count = turns;
    let elapsed = now.duration_since(since).as_secs_f64().max(0.0);
    let hours = elapsed / SECONDS_PER_HOUR;
    let no_forecast = NoForecast::of(period.finished, turn_count, elapsed);
    let line = |name: &'static str, max: f64, used: f64| {
        let per_hour = (no_forecast.is_none() && hours > 0.0).then(|| used / hours);
        let remaining = (max > 0.0).then(|| (max - used).max(0.0));
        let hours_to_exhaust = remaining
            .zip(per_hour.filter(|rate| *rate > 0.0))
            .map(|(left, rate)| left / rate);
        BudgetLine {
            name,
            max,
            used,
            remaining,
            per_hour,
            hours_to_exhaust,
            exhausts_at: hours_to_exhaust.and_then(|h| {
                now.checked_add(SignedDuration::from_secs_f64(h * SECONDS_PER_HOUR))
                    .ok()
            }),
            no_forecast,
        }
    };
    let mut budgets = vec![
        line("tokens", budget.max_tokens as f64, spent.tokens as f64),
        line("usd", budget.max_usd, spent.usd),
        line(
            "iterations",
            budget.max_iterations as f64,
            spent.iterations as f64,
        ),
    ];
    // Wall time burns at one hour per hour, whatever the agents do: it
    // needs no history, only a loop that still runs.
    if budget.max_wall_time_seconds > 0 {
        let max = budget.max_wall_time_seconds as f64 / SECONDS_PER_HOUR;
        let left = (max - hours).max(0.0);
        let running = !period.finished;
        budgets.push(BudgetLine {
            name: "wall_time_hours",
            max,
            used: hours,
            remaining: Some(left),
            per_hour: running.then_some(1.0),
            hours_to_exhaust: running.then_some(left),
            exhausts_at: running
                .then(|| {
                    now.checked_add(SignedDuration::from_secs_f64(left * SECONDS_PER_HOUR))
                        .ok()
                })
                .flatten(),
            no_forecast: period.finished.then_some(NoForecast::Finished),
        });
    }
    CostReport {
        schema_version: 2,
        by: By::Turn,
        rows: Vec::new(),
        rows_total: 0,
        older: None,
        turns: turn_count,
        tokens: spent.tokens,
        usd: spent.usd,
        hours,
        budgets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::classify::Usage;

    /// A driven turn: its settlement and the driver's charge for it.
    fn settled(
        iteration: u64,
        provider: &str,
        at: &str,
        tokens: u64,
        usd: f64,
    ) -> (Settlement, Charge) {
        let charge = Charge {
            dispatch_id: format!("d{iteration}"),
            iteration: None,
            provider: String::new(),
            at: at.parse().unwrap(),
            tokens,
            usd,
        };
        let settlement = Settlement {
            dispatch_id: format!("d{iteration}"),
            iteration,
            provider: provider.into(),
            outcome: TurnOutcome::Advanced,
            exit_status: Some(0),
            usage: Usage {
                tokens,
                usd,
                ..Usage::default()
            },
            settled_at: at.parse().unwrap(),
            note: String::new(),
        };
        (settlement, charge)
    }

    fn running(since: Timestamp, now: Timestamp) -> Period {
        Period {
            since,
            now,
            finished: false,
        }
    }

    /// Ten iterations, no wall-time limit, these token and USD limits.
    fn budget(max_tokens: u64, max_usd: f64) -> Budget {
        Budget {
            max_iterations: 10,
            max_wall_time_seconds: 0,
            max_tokens,
            max_usd,
        }
    }

    fn spent(iterations: u64, tokens: u64, usd: f64) -> Spent {
        Spent {
            iterations,
            tokens,
            usd,
        }
    }

    /// A record appended by hand (no dispatch) with these figures.
    fn by_hand(iteration: u64, at: &str, tokens: u64, usd: f64) -> Charge {
        Charge {
            dispatch_id: String::new(),
            iteration: Some(iteration),
            provider: String::new(),
            at: at.parse().unwrap(),
            tokens,
            usd,
        }
    }

    #[test]
    fn a_page_is_the_newest_rows_before_a_position_and_names_the_rest() {
        let (settlements, charges): (Vec<_>, Vec<_>) = (1..=5)
            .map(|i| settled(i, "claude", &format!("2026-12-01T10:0{i}:00Z"), 100, 0.1))
            .unzip();
        let created: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let full = || {
            report(
                &charges,
                &settlements,
                By::Turn,
                &budget(0, 0.0),
                &spent(5, 500, 0.5),
                running(created, created),
            )
        };
        let keys = |r: &CostReport| r.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
        let newest = full().page(None, 2);
        assert_eq!(
            (keys(&newest), newest.older, newest.rows_total),
            (vec!["4".into(), "5".into()], Some(3), 5)
        );
        let middle = full().page(Some(3), 2);
        assert_eq!(
            (keys(&middle), middle.older),
            (vec!["2".into(), "3".into()], Some(1))
        );
        let first = full().page(Some(1), 2);
        assert_eq!((keys(&first), first.older), (vec!["1".into()], None));
        assert_eq!(
            keys(&full().page(Some(99), 500)).len(),
            5,
            "a position past the end reads to it"
        );
        // The window of the newest three, bounded by the fourth-newest
        // settlement, gives the same rows as the whole report.
        let window: Vec<Charge> = charges.iter().skip(2).cloned().collect();
        assert_eq!(
            recent_rows(&window, &settlements[2..], 3),
            full().rows[2..].to_vec()
        );
    }

    #[test]
    fn rows_group_by_turn_day_and_provider_and_budgets_project_their_end() {
        let (settlements, charges): (Vec<_>, Vec<_>) = [
            settled(1, "claude", "2026-12-01T10:00:00Z", 1000, 0.5),
            settled(2, "codex", "2026-12-01T23:00:00Z", 500, 0.25),
            settled(3, "claude", "2026-12-02T01:00:00Z", 1500, 0.25),
        ]
        .into_iter()
        .unzip();
        let (budget, spent) = (budget(0, 2.0), spent(3, 3000, 1.0));
        let created: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-12-02T00:00:00Z".parse().unwrap();
        let by_day = report(
            &charges,
            &settlements,
            By::Day,
            &budget,
            &spent,
            running(created, now),
        );
        let days: Vec<_> = by_day
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.turns))
            .collect();
        assert_eq!(days, [("2026-12-01", 2), ("2026-12-02", 1)]);
        let by_provider = report(
            &charges,
            &settlements,
            By::Provider,
            &budget,
            &spent,
            running(created, now),
        );
        assert_eq!(by_provider.rows[0].tokens, 2500);
        let usd = &by_provider.budgets[1];
        assert_eq!((usd.remaining, usd.per_hour), (Some(1.0), Some(1.0 / 24.0)));
        assert_eq!(usd.hours_to_exhaust, Some(24.0));
        assert_eq!(
            usd.exhausts_at,
            Some("2026-12-03T00:00:00Z".parse().unwrap())
        );
        assert_eq!(
            by_day.budgets[0].remaining, None,
            "an unlimited budget has no end"
        );
    }

    #[test]
    fn iterations_recorded_by_hand_are_charges_and_the_totals_are_the_ledgers_spend() {
        let (settlement, mut charges) = {
            let (s, c) = settled(2, "claude", "2026-12-01T11:00:00Z", 1000, 0.05);
            (s, vec![c])
        };
        charges.insert(0, by_hand(1, "2026-12-01T10:00:00Z", 4200, 0.17));
        // The agent of the driven turn reported part of it itself.
        let mut own = by_hand(2, "2026-12-01T10:59:00Z", 200, 0.01);
        own.dispatch_id = "d2".into();
        charges.push(own);
        let (budget, spent) = (budget(3000, 0.15), spent(2, 5400, 0.23));
        let created: Timestamp = "2026-12-01T09:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let cost = report(
            &charges,
            &[settlement],
            By::Turn,
            &budget,
            &spent,
            running(created, now),
        );
        let rows: Vec<_> = cost
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.provider.as_deref(), r.tokens))
            .collect();
        assert_eq!(
            rows,
            [("1", Some(BY_HAND), 4200), ("2", Some("claude"), 1200)]
        );
        assert_eq!((cost.turns, cost.tokens, cost.usd), (2, 5400, 0.23));
        assert_eq!(cost.rows.iter().map(|r| r.tokens).sum::<u64>(), cost.tokens);
        assert_eq!(cost.budgets[0].used, cost.tokens as f64);
        assert_eq!(cost.budgets[1].used, cost.usd);
    }

    #[test]
    fn burn_rates_are_forecast_only_from_three_turns_over_ten_minutes_and_never_for_a_finished_loop(
    ) {
        let charges: Vec<Charge> = (1..=3)
            .map(|i| by_hand(i, "2026-12-01T10:00:00Z", 100, 0.1))
            .collect();
        let mut budget = budget(1000, 1.0);
        budget.max_wall_time_seconds = 7200;
        let spent = spent(3, 300, 0.3);
        let since: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let at = |minutes: i64| since + SignedDuration::from_mins(minutes);
        let cost =
            |charges: &[Charge], period| report(charges, &[], By::Turn, &budget, &spent, period);
        let line = |report: &CostReport, name: &str| {
            report
                .budgets
                .iter()
                .find(|b| b.name == name)
                .unwrap()
                .clone()
        };
        let forecast = |report: &CostReport, name: &str| {
            let line = line(report, name);
            (line.per_hour.is_some(), line.exhausts_at.is_some())
        };
        let early = cost(&charges, running(since, at(9)));
        assert_eq!(
            line(&early, "usd").no_forecast,
            Some(NoForecast::TooLittleHistory)
        );
        assert_eq!(forecast(&early, "tokens"), (false, false));
        assert_eq!(
            forecast(&early, "wall_time_hours"),
            (true, true),
            "wall time needs no history"
        );
        let few = cost(&charges[..2], running(since, at(60)));
        assert_eq!(
            line(&few, "tokens").no_forecast,
            Some(NoForecast::TooLittleHistory)
        );
        let enough = cost(&charges, running(since, at(10)));
        assert_eq!(line(&enough, "tokens").no_forecast, None);
        assert_eq!(forecast(&enough, "usd"), (true, true));
        let finished = Period {
            finished: true,
            ..running(since, at(60))
        };
        let done = cost(&charges, finished);
        for line in &done.budgets {
            assert_eq!(forecast(&done, line.name), (false, false), "{}", line.name);
            assert_eq!(line.without_forecast(), "the loop is finished");
        }
        assert_eq!(
            line(&early, "tokens").without_forecast(),
            "no forecast before 3 turns and 10m"
        );
        let iterations = &done.budgets[2];
        assert_eq!(iterations.figure(iterations.used), "3");
        assert_eq!(done.budgets[1].figure(0.3), "$0.30");
    }
}
