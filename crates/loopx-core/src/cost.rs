//! The cost report: what each turn, day and provider used (tokens and USD
//! from the driver's settlements, which carry the usage the agent's
//! structured output reported), what each budget has left, the burn rate
//! and when, at that rate, each budget runs out.
//!
//! Pure: the settlements, the ledger's budget and spend and the clock
//! arrive as arguments. Reading the journal is the application layer's
//! (`loopx_app::cost`).

use crate::driver::{Settlement, TurnOutcome};
use crate::ledger::budget::{Budget, Spent};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use std::collections::BTreeMap;
use std::str::FromStr;

/// How the rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    #[default]
    Turn,
    Day,
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
/// since the loop began, and when it runs out at that rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetLine {
    pub name: &'static str,
    /// Zero: unlimited (no projection).
    pub max: f64,
    pub used: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<f64>,
    pub per_hour: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours_to_exhaust: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exhausts_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostReport {
    pub by: By,
    pub rows: Vec<Row>,
    /// The settled turns together.
    pub turns: u64,
    pub tokens: u64,
    pub usd: f64,
    /// Hours since the loop was created: the burn rates' window.
    pub hours: f64,
    pub budgets: Vec<BudgetLine>,
}

const SECONDS_PER_HOUR: f64 = 3600.0;

/// The report of `settlements` grouped `by`, with the loop's budgets
/// projected from `spent` over the time since `created_at`.
pub fn report(
    settlements: &[Settlement],
    by: By,
    budget: &Budget,
    spent: &Spent,
    created_at: Timestamp,
    now: Timestamp,
) -> CostReport {
    let rows = match by {
        By::Turn => settlements
            .iter()
            .map(|s| Row {
                key: s.iteration.to_string(),
                provider: Some(s.provider.clone()),
                settled_at: Some(s.settled_at),
                outcome: Some(s.outcome),
                turns: 1,
                tokens: s.usage.tokens,
                usd: s.usage.usd,
            })
            .collect(),
        By::Day | By::Provider => {
            let mut groups: BTreeMap<String, Row> = BTreeMap::new();
            for s in settlements {
                let key = match by {
                    By::Day => s.settled_at.strftime("%Y-%m-%d").to_string(),
                    _ => s.provider.clone(),
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
                row.tokens += s.usage.tokens;
                row.usd += s.usage.usd;
            }
            groups.into_values().collect()
        }
    };
    let elapsed = now.duration_since(created_at).as_secs_f64().max(0.0);
    let hours = elapsed / SECONDS_PER_HOUR;
    let line = |name: &'static str, max: f64, used: f64| {
        let per_hour = if hours > 0.0 { used / hours } else { 0.0 };
        let remaining = (max > 0.0).then(|| (max - used).max(0.0));
        let hours_to_exhaust = remaining
            .filter(|_| per_hour > 0.0)
            .map(|left| left / per_hour);
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
    // Wall time burns at one hour per hour, whatever the agents do.
    if budget.max_wall_time_seconds > 0 {
        let max = budget.max_wall_time_seconds as f64 / SECONDS_PER_HOUR;
        let left = (max - hours).max(0.0);
        budgets.push(BudgetLine {
            name: "wall_time_hours",
            max,
            used: hours,
            remaining: Some(left),
            per_hour: 1.0,
            hours_to_exhaust: Some(left),
            exhausts_at: now
                .checked_add(SignedDuration::from_secs_f64(left * SECONDS_PER_HOUR))
                .ok(),
        });
    }
    CostReport {
        by,
        rows,
        turns: settlements.len() as u64,
        tokens: settlements.iter().map(|s| s.usage.tokens).sum(),
        // Not `sum()`: an empty f64 sum is -0.0, which prints as "-0".
        usd: settlements.iter().fold(0.0, |total, s| total + s.usage.usd),
        hours,
        budgets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::classify::Usage;

    fn settled(iteration: u64, provider: &str, at: &str, tokens: u64, usd: f64) -> Settlement {
        Settlement {
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
        }
    }

    #[test]
    fn rows_group_by_turn_day_and_provider_and_budgets_project_their_end() {
        let settlements = [
            settled(1, "claude", "2026-12-01T10:00:00Z", 1000, 0.5),
            settled(2, "codex", "2026-12-01T23:00:00Z", 500, 0.25),
            settled(3, "claude", "2026-12-02T01:00:00Z", 1500, 0.25),
        ];
        let budget = Budget {
            max_iterations: 10,
            max_wall_time_seconds: 0,
            max_tokens: 0,
            max_usd: 2.0,
        };
        let spent = Spent {
            iterations: 3,
            tokens: 3000,
            usd: 1.0,
        };
        let created: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-12-02T00:00:00Z".parse().unwrap();
        let by_day = report(&settlements, By::Day, &budget, &spent, created, now);
        let days: Vec<_> = by_day
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.turns))
            .collect();
        assert_eq!(days, [("2026-12-01", 2), ("2026-12-02", 1)]);
        let by_provider = report(&settlements, By::Provider, &budget, &spent, created, now);
        assert_eq!(by_provider.rows[0].tokens, 2500);
        let usd = &by_provider.budgets[1];
        assert_eq!((usd.remaining, usd.per_hour), (Some(1.0), 1.0 / 24.0));
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
}
