//! What one agent turn's output says: cost and usage from structured
//! events first, then failure class from structure, and only then from the
//! agent's own text (the host prompt stripped, so echoed instructions or
//! file contents that mention "quota" never count).

use super::provider::Structured;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The line separating the host prompt from the agent's output in a log.
pub const END_OF_PROMPT: &str = "# --- END HOST PROMPT ---";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    Auth,
    Quota,
    Failure,
}

/// How a cost figure is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// The provider said so in its structured output.
    Reported,
    /// Derived (e.g. tokens summed from usage parts).
    Computed,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub tokens: u64,
    pub tokens_provenance: Provenance,
    pub usd: f64,
    pub usd_provenance: Provenance,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            tokens: 0,
            tokens_provenance: Provenance::Unknown,
            usd: 0.0,
            usd_provenance: Provenance::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub usage: Usage,
    /// The structured result said the turn failed (even with exit 0).
    pub reported_error: Option<String>,
    /// A failure class the output shows, if any.
    pub class: Option<FailureClass>,
    /// When a usage limit says it resets.
    pub resets_at: Option<Timestamp>,
}

/// The agent's part of a log: everything after the prompt sentinel.
pub fn agent_output(log: &str) -> &str {
    match log.find(END_OF_PROMPT) {
        Some(at) => &log[at + END_OF_PROMPT.len()..],
        None => log,
    }
}

const AUTH: &[&str] = &[
    "token has been invalidated",
    "token invalidated",
    "401 unauthorized",
    "status 401",
    "error 401",
    "http 401",
    "sign in again",
    "log in again",
    "login again",
    "invalid api key",
    "authentication_error",
    "not logged in",
];

const QUOTA: &[&str] = &[
    "quota exceeded",
    "exceeded your quota",
    "quota limit",
    "usage limit",
    "out of credits",
    "credit balance is too low",
    "insufficient credits",
    "rate limit exceeded",
    "rate_limit_error",
    "too many requests",
    "error 429",
    "status 429",
    "http 429",
    "429 too many",
    "weekly limit",
    "monthly limit",
];

/// A failure class from the agent's own words.
pub fn class_from_text(output: &str) -> Option<FailureClass> {
    let lower = output.to_lowercase();
    if AUTH.iter().any(|p| lower.contains(p)) {
        Some(FailureClass::Auth)
    } else if QUOTA.iter().any(|p| lower.contains(p)) {
        Some(FailureClass::Quota)
    } else {
        None
    }
}

/// A reset time in text: an RFC 3339 timestamp after "reset", or
/// "resets in N minutes/hours".
pub fn reset_from_text(output: &str, now: Timestamp) -> Option<Timestamp> {
    let lower = output.to_lowercase();
    let at = lower.find("reset")?;
    let rest = &output[at..];
    for word in rest.split_whitespace().take(12) {
        let word = word.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | '.' | '"' | '\''));
        if let Ok(ts) = word.parse::<Timestamp>() {
            return Some(ts);
        }
    }
    let words: Vec<&str> = lower[at..].split_whitespace().take(8).collect();
    let position = words.iter().position(|w| *w == "in")?;
    let amount: i64 = words.get(position + 1)?.parse().ok()?;
    let unit = words.get(position + 2)?;
    let seconds = if unit.starts_with("second") {
        amount
    } else if unit.starts_with("minute") || unit.starts_with("min") {
        amount * 60
    } else if unit.starts_with("hour") {
        amount * 3600
    } else {
        return None;
    };
    now.checked_add(jiff::SignedDuration::from_secs(seconds))
        .ok()
}

fn number(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn usage_tokens(usage: &Value) -> Option<u64> {
    let parts = [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];
    let found: Vec<u64> = parts.iter().filter_map(|k| number(usage, k)).collect();
    // Saturating: an agent reporting more than u64 holds has used at least
    // that much, and a wrapped sum would charge it almost nothing. The
    // ledger then refuses a total it cannot hold.
    (!found.is_empty()).then(|| found.iter().fold(0u64, |sum, n| sum.saturating_add(*n)))
}

fn epoch(value: &Value) -> Option<Timestamp> {
    let seconds = value
        .as_i64()
        .or_else(|| value.as_f64().map(|f| f as i64))?;
    // Seconds or milliseconds since the epoch.
    let seconds = if seconds > 100_000_000_000 {
        seconds / 1000
    } else {
        seconds
    };
    Timestamp::from_second(seconds).ok()
}

/// Read an agent's output, structured events first.
pub fn read(output: &str, structured: Structured, now: Timestamp) -> Reading {
    let mut reading = Reading {
        usage: Usage::default(),
        reported_error: None,
        class: None,
        resets_at: None,
    };
    let events = output
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .filter(Value::is_object);
    for event in events {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match (structured, kind) {
            (Structured::ClaudeStreamJson, "result") => {
                if let Some(usd) = event
                    .get("total_cost_usd")
                    .and_then(Value::as_f64)
                    .filter(|u| u.is_finite() && *u >= 0.0)
                {
                    reading.usage.usd = usd;
                    reading.usage.usd_provenance = Provenance::Reported;
                }
                if let Some(tokens) = event.get("usage").and_then(usage_tokens) {
                    reading.usage.tokens = tokens;
                    reading.usage.tokens_provenance = Provenance::Computed;
                }
                if event.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let reason = ["terminal_reason", "subtype", "result"]
                        .iter()
                        .find_map(|k| event.get(*k).and_then(Value::as_str))
                        .unwrap_or("is_error")
                        .to_owned();
                    reading.class = reading.class.or(class_from_text(&reason));
                    reading.reported_error = Some(reason);
                }
            }
            (Structured::ClaudeStreamJson, "rate_limit_event") => {
                let info = event.get("rate_limit_info").unwrap_or(&event);
                if let Some(at) = info.get("resetsAt").and_then(epoch) {
                    reading.resets_at = Some(at);
                }
                let status = info.get("status").and_then(Value::as_str).unwrap_or("");
                if status == "rejected" || status == "exceeded" {
                    reading.class = Some(FailureClass::Quota);
                }
            }
            (Structured::CodexJson, "turn.completed") => {
                if let Some(tokens) = event.get("usage").and_then(usage_tokens) {
                    reading.usage.tokens = reading.usage.tokens.saturating_add(tokens);
                    reading.usage.tokens_provenance = Provenance::Computed;
                }
            }
            (Structured::CodexJson, "turn.failed" | "error") => {
                let message = event
                    .pointer("/error/message")
                    .or_else(|| event.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or(kind)
                    .to_owned();
                reading.class = reading.class.or(class_from_text(&message));
                reading.reported_error = Some(message);
            }
            _ => {}
        }
    }
    if reading.class.is_none() {
        reading.class = class_from_text(output);
    }
    if reading.class == Some(FailureClass::Quota) && reading.resets_at.is_none() {
        reading.resets_at = reset_from_text(output, now);
    }
    // What the provider reported travels on (settlement note, progress
    // lines); a key it echoed must not.
    reading.reported_error = reading
        .reported_error
        .map(|e| crate::redact::redact_owned(&e));
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_host_prompt_is_stripped_before_matching() {
        let log =
            format!("Never exceed your quota limit or usage limit.\n{END_OF_PROMPT}\nall good\n");
        assert_eq!(class_from_text(agent_output(&log)), None);
        let log =
            format!("prompt\n{END_OF_PROMPT}\nError: 401 Unauthorized - please sign in again\n");
        assert_eq!(
            class_from_text(agent_output(&log)),
            Some(FailureClass::Auth)
        );
    }

    #[test]
    fn quota_phrasings_are_recognised_and_a_bare_word_is_not() {
        for text in [
            "You've hit your usage limit",
            "Claude AI weekly limit reached ∙ resets Dec 5",
            "HTTP 429 Too Many Requests",
            "Your credit balance is too low",
        ] {
            assert_eq!(class_from_text(text), Some(FailureClass::Quota), "{text}");
        }
        assert_eq!(
            class_from_text("I checked the quota module and fixed a test"),
            None
        );
    }

    #[test]
    fn claude_results_give_cost_usage_and_errors_with_exit_zero() {
        let out = r#"{"type":"system","subtype":"init"}
{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.0421,"usage":{"input_tokens":1200,"output_tokens":300,"cache_read_input_tokens":500}}"#;
        let reading = read(out, Structured::ClaudeStreamJson, now());
        assert_eq!(reading.usage.usd, 0.0421);
        assert_eq!(reading.usage.usd_provenance, Provenance::Reported);
        assert_eq!(
            (reading.usage.tokens, reading.usage.tokens_provenance),
            (2000, Provenance::Computed)
        );
        assert_eq!(reading.reported_error, None);
        let failed = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"total_cost_usd":0.01}"#;
        assert_eq!(
            read(failed, Structured::ClaudeStreamJson, now())
                .reported_error
                .as_deref(),
            Some("error_during_execution")
        );
    }

    #[test]
    fn a_rate_limit_event_carries_the_reset_time() {
        let out = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796300000}}"#;
        let reading = read(out, Structured::ClaudeStreamJson, now());
        assert_eq!(reading.class, Some(FailureClass::Quota));
        assert_eq!(
            reading.resets_at,
            Some(Timestamp::from_second(1796300000).unwrap())
        );
        let text = "usage limit reached; resets in 30 minutes";
        assert_eq!(
            read(text, Structured::Text, now()).resets_at,
            Some("2026-12-02T12:30:00Z".parse().unwrap())
        );
        let text = "quota exceeded, resets at 2026-12-02T18:00:00Z.";
        assert_eq!(
            read(text, Structured::Text, now()).resets_at,
            Some("2026-12-02T18:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn codex_usage_sums_over_turns() {
        let out = r#"{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":5}}
{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#;
        assert_eq!(read(out, Structured::CodexJson, now()).usage.tokens, 17);
    }

    #[test]
    fn reported_usage_beyond_u64_saturates_instead_of_wrapping() {
        let out = r#"{"type":"turn.completed","usage":{"input_tokens":18446744073709551615,"output_tokens":5}}
{"type":"turn.completed","usage":{"input_tokens":1}}"#;
        assert_eq!(
            read(out, Structured::CodexJson, now()).usage.tokens,
            u64::MAX
        );
        let out =
            r#"{"type":"result","usage":{"input_tokens":18446744073709551615,"output_tokens":5}}"#;
        assert_eq!(
            read(out, Structured::ClaudeStreamJson, now()).usage.tokens,
            u64::MAX
        );
    }
}
