//! Budgets and what it means for one to be spent. One rule, used by the
//! append guard, the `done` arbiter and the audit alike.

use serde::{Deserialize, Serialize};

/// The limits set at `init`. Zero means "no limit" for tokens, USD and wall
/// time (as in the reference); `max_iterations` is always a hard cap, and a
/// cap of zero admits no iteration at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub max_iterations: u64,
    pub max_wall_time_seconds: u64,
    pub max_tokens: u64,
    pub max_usd: f64,
}

/// What the recorded iterations have used.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Spent {
    pub iterations: u64,
    pub tokens: u64,
    pub usd: f64,
}

impl Spent {
    /// The total after one more iteration with these figures. Saturating:
    /// a token count cannot wrap around into a fresh budget.
    pub fn plus(&self, tokens: u64, usd: f64) -> Spent {
        Spent {
            iterations: self.iterations.saturating_add(1),
            tokens: self.tokens.saturating_add(tokens),
            usd: self.usd + usd,
        }
    }
}

/// A budget that is used up, in the order the `done` arbiter reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exhausted {
    Usd,
    Tokens,
    WallTime,
    Iterations,
}

impl Exhausted {
    /// The reason code the reference `done` arbiter prints.
    pub fn reason_code(self) -> &'static str {
        match self {
            Exhausted::Usd => "credit_exhausted:usd",
            Exhausted::Tokens => "credit_exhausted:tokens",
            Exhausted::WallTime => "credit_exhausted:wall_time",
            Exhausted::Iterations => "loops_reached",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Exhausted::Usd => "USD",
            Exhausted::Tokens => "token",
            Exhausted::WallTime => "wall-time",
            Exhausted::Iterations => "iteration",
        }
    }
}

impl Budget {
    /// Every budget `spent` (after `elapsed_seconds` of wall time) has used up.
    pub fn exhausted(&self, spent: &Spent, elapsed_seconds: u64) -> Vec<Exhausted> {
        let mut out = Vec::new();
        if self.max_usd > 0.0 && spent.usd >= self.max_usd {
            out.push(Exhausted::Usd);
        }
        if self.max_tokens > 0 && spent.tokens >= self.max_tokens {
            out.push(Exhausted::Tokens);
        }
        if self.max_wall_time_seconds > 0 && elapsed_seconds >= self.max_wall_time_seconds {
            out.push(Exhausted::WallTime);
        }
        if spent.iterations >= self.max_iterations {
            out.push(Exhausted::Iterations);
        }
        out
    }

    pub fn remaining_iterations(&self, spent: &Spent) -> u64 {
        self.max_iterations.saturating_sub(spent.iterations)
    }
}

/// A number is a budget figure only if it is finite and not negative.
pub fn is_budget_number(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            max_iterations: 3,
            max_wall_time_seconds: 60,
            max_tokens: 100,
            max_usd: 1.5,
        }
    }

    #[test]
    fn caps_are_reached_at_equality_in_reference_order() {
        let spent = Spent {
            iterations: 3,
            tokens: 100,
            usd: 1.5,
        };
        assert_eq!(
            budget().exhausted(&spent, 60),
            [
                Exhausted::Usd,
                Exhausted::Tokens,
                Exhausted::WallTime,
                Exhausted::Iterations
            ]
        );
        let under = Spent {
            iterations: 2,
            tokens: 99,
            usd: 1.49,
        };
        assert!(budget().exhausted(&under, 59).is_empty());
    }

    #[test]
    fn zero_means_unlimited_except_for_iterations() {
        let unlimited = Budget {
            max_iterations: 0,
            max_wall_time_seconds: 0,
            max_tokens: 0,
            max_usd: 0.0,
        };
        let spent = Spent {
            iterations: 0,
            tokens: u64::MAX,
            usd: 1e12,
        };
        assert_eq!(
            unlimited.exhausted(&spent, u64::MAX),
            [Exhausted::Iterations]
        );
    }

    #[test]
    fn token_totals_saturate_instead_of_wrapping() {
        let spent = Spent {
            iterations: 1,
            tokens: u64::MAX - 1,
            usd: 0.0,
        }
        .plus(10, 0.0);
        assert_eq!(spent.tokens, u64::MAX);
    }
}
