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
    /// The total after one more iteration with these figures.
    pub fn plus(&self, tokens: u64, usd: f64) -> Result<Spent, OutOfRange> {
        self.add(1, tokens, usd)
    }

    /// The total after a driver's charge of these figures (no iteration).
    pub fn charged(&self, tokens: u64, usd: f64) -> Result<Spent, OutOfRange> {
        self.add(0, tokens, usd)
    }

    /// The one rule for growing a total: every figure must stay a budget
    /// number the snapshot can hold. A total that wrapped would look like a
    /// fresh budget, and an infinite USD total is not JSON (the snapshot
    /// would no longer parse), so both are refused, never saturated.
    fn add(&self, iterations: u64, tokens: u64, usd: f64) -> Result<Spent, OutOfRange> {
        let refuse =
            |total: &'static str, current: String, adding: String, limit: String| OutOfRange {
                total,
                current,
                adding,
                limit,
            };
        let iterations = self.iterations.checked_add(iterations).ok_or_else(|| {
            refuse(
                "iteration",
                self.iterations.to_string(),
                iterations.to_string(),
                u64::MAX.to_string(),
            )
        })?;
        let tokens = self.tokens.checked_add(tokens).ok_or_else(|| {
            refuse(
                "token",
                self.tokens.to_string(),
                tokens.to_string(),
                u64::MAX.to_string(),
            )
        })?;
        let sum = self.usd + usd;
        if !is_budget_number(usd) || !is_budget_number(sum) {
            return Err(refuse(
                "USD",
                // Debug prints 1e308, not 309 digits.
                format!("{:?}", self.usd),
                format!("{usd:?}"),
                format!("{:?}", f64::MAX),
            ));
        }
        Ok(Spent {
            iterations,
            tokens,
            usd: sum,
        })
    }
}

/// A running total that would leave the range its type can hold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the loop's {total} total would leave the range loopx can record ({current} spent + {adding} reported; the largest total is {limit}); nothing was written: check the reported figure and record the iteration with a correct one")]
pub struct OutOfRange {
    pub total: &'static str,
    pub current: String,
    pub adding: String,
    pub limit: String,
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
    pub const ALL: [Exhausted; 4] = [
        Exhausted::Usd,
        Exhausted::Tokens,
        Exhausted::WallTime,
        Exhausted::Iterations,
    ];

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
    // The one place "zero means no limit" is decided, for tokens, USD and
    // wall time; every rule and view asks these.

    /// The token limit, or `None` for unlimited.
    pub fn token_limit(&self) -> Option<u64> {
        (self.max_tokens > 0).then_some(self.max_tokens)
    }

    /// The USD limit, or `None` for unlimited.
    pub fn usd_limit(&self) -> Option<f64> {
        (self.max_usd > 0.0).then_some(self.max_usd)
    }

    /// The wall-time limit in seconds, or `None` for unlimited.
    pub fn wall_time_limit(&self) -> Option<u64> {
        (self.max_wall_time_seconds > 0).then_some(self.max_wall_time_seconds)
    }

    /// Every budget `spent` (after `elapsed_seconds` of wall time) has used up.
    pub fn exhausted(&self, spent: &Spent, elapsed_seconds: u64) -> Vec<Exhausted> {
        let mut out = Vec::new();
        if self.usd_limit().is_some_and(|max| spent.usd >= max) {
            out.push(Exhausted::Usd);
        }
        if self.token_limit().is_some_and(|max| spent.tokens >= max) {
            out.push(Exhausted::Tokens);
        }
        if self
            .wall_time_limit()
            .is_some_and(|max| elapsed_seconds >= max)
        {
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

/// A budget figure as stored: `-0` is zero (it would otherwise be kept,
/// and shown, as `-0.0`).
pub fn normalized(value: f64) -> f64 {
    if value == 0.0 {
        0.0
    } else {
        value
    }
}

/// A duration a user wrote for a limit (`90m`, `2d 12h`), in the whole
/// seconds loopx counts in. Zero means "unlimited" to the budgets, so a
/// duration that would round to zero, or lose a fraction, is refused rather
/// than silently turned into something else.
pub fn whole_seconds(span: jiff::SignedDuration) -> Result<u64, DurationError> {
    if span.is_negative() {
        // `{:#}` of a negative span reads "1h ago": name it as written.
        return Err(DurationError::Negative(format!("-{:#}", span.abs())));
    }
    if span.subsec_nanos() != 0 {
        return Err(DurationError::Fractional(format!("{span:#}")));
    }
    Ok(span.as_secs() as u64)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("a duration limit cannot be negative (got {0}); write e.g. 90m, 48h or 2d 12h (0 means unlimited)")]
    Negative(String),
    #[error("a duration limit is counted in whole seconds (got {0}); write e.g. 1s, 90m or 2d 12h (0 means unlimited)")]
    Fractional(String),
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
    fn durations_that_would_round_are_refused() {
        use jiff::SignedDuration;
        assert!(matches!(
            whole_seconds(SignedDuration::from_micros(100)),
            Err(DurationError::Fractional(_))
        ));
        assert!(whole_seconds(SignedDuration::from_millis(1500)).is_err());
        let negative = whole_seconds(SignedDuration::from_secs(-3600)).unwrap_err();
        assert!(negative.to_string().contains("(got -1h)"), "{negative}");
        assert_eq!(whole_seconds(SignedDuration::from_secs(90)), Ok(90));
        assert_eq!(normalized(-0.0).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn totals_that_leave_their_range_are_refused_not_saturated() {
        let full = Spent {
            iterations: 1,
            tokens: u64::MAX - 1,
            usd: 1e308,
        };
        let tokens = full.plus(10, 0.0).unwrap_err();
        assert_eq!(tokens.total, "token");
        let usd = full.charged(0, 1e308).unwrap_err();
        assert_eq!(usd.total, "USD");
        assert!(usd.to_string().contains("1e308"), "{usd}");
        assert!(full.charged(0, f64::NAN).is_err());
        let ok = full.plus(1, 1.0).unwrap();
        assert_eq!((ok.iterations, ok.tokens), (2, u64::MAX));
        assert!(serde_json::to_string(&ok)
            .unwrap()
            .parse::<serde_json::Value>()
            .is_ok());
    }
}
