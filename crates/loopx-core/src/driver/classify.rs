//! What one agent turn's output says: cost and usage from structured
//! events first, then failure class from structure, and only then from the
//! agent's own text (the host prompt stripped, so echoed instructions or
//! file contents that mention "quota" never count).
//!
//! A CLI that refuses how it was launched (its argument parser rejects a
//! flag, or it refuses a flag as root) is a configuration error, read from
//! the first lines it prints before any structured event: retrying it
//! fails the same way. The shapes are those the real CLIs print, kept as
//! fixtures in `tests/fixtures/agents/` (re-recorded by
//! `scripts/record-agent-fixtures`).

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
    /// The CLI refused its launch line: fix the configuration, not retried.
    Configuration,
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

impl Reading {
    /// The structured output reported a failure: its class from the HTTP
    /// status the model API answered, else from its words, unless an
    /// earlier event already gave one.
    fn failed(&mut self, status: Option<u64>, message: String) {
        self.class = self
            .class
            .or(class_from_status(status))
            .or(class_from_text(&message));
        self.reported_error = Some(message);
    }
}

impl Reading {
    /// The loop ended the turn while its CLI still retried a call that
    /// cannot succeed soon (`super::stream`): the class and the words are
    /// the cut's, and a reset time the provider gave is kept.
    pub fn cut_short(&mut self, cut: &super::stream::CutShort) {
        self.class = Some(cut.class);
        self.reported_error = Some(cut.reason.clone());
        self.resets_at = cut.resets_at.or(self.resets_at);
    }
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

/// How many of the first non-blank lines of a turn's output a launch
/// refusal is looked for in: a CLI refuses before it does anything, and a
/// message an agent's tool printed later in the turn never counts.
const REFUSAL_LINES: usize = 6;

/// Why the CLI refused how it was launched, naming the flag when it does:
/// read from the first plain (non-JSON) lines of its output, and only
/// when it printed no structured event (a CLI that started its session
/// accepted its arguments).
pub fn launch_refusal(output: &str) -> Option<String> {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    if output
        .lines()
        .any(|l| serde_json::from_str::<Value>(l.trim()).is_ok_and(|v| v.is_object()))
    {
        return None;
    }
    let quoted = |line: &str, after: &str| -> Option<String> {
        let rest = &line[line.find(after)? + after.len()..];
        let end = rest.find('\'')?;
        Some(rest[..end].to_owned())
    };
    lines.by_ref().take(REFUSAL_LINES).find_map(|line| {
        if let Some(flag) = quoted(line, "error: unexpected argument '") {
            // clap (Codex)
            Some(format!("the CLI rejected the argument {flag}"))
        } else if let Some(flag) = quoted(line, "error: unknown option '") {
            // commander (Claude Code)
            Some(format!("the CLI rejected the argument {flag}"))
        } else if let (Some(value), Some(flag)) = (
            quoted(line, "error: invalid value '"),
            quoted(line, "' for '"),
        ) {
            Some(format!("the CLI rejected the value {value} of {flag}"))
        } else if line.contains("--skip-git-repo-check was not specified") {
            Some("the CLI refused to run outside a git repository or trusted directory without --skip-git-repo-check".into())
        } else if line.contains("--dangerously-skip-permissions cannot be used with root/sudo privileges") {
            Some("the CLI refuses --dangerously-skip-permissions as root: run drive as another user, or set IS_SANDBOX=1 where the machine really is a sandbox (a container or VM with nothing else to lose)".into())
        } else if line.starts_with("opencode run [message..]") {
            // yargs prints the usage, and not the argument it rejected.
            Some("the CLI printed its usage instead of running: it rejected an argument of its launch line".into())
        } else {
            None
        }
    })
}

/// A failure class from the HTTP status the model API answered.
pub(crate) fn class_from_status(status: Option<u64>) -> Option<FailureClass> {
    match status? {
        401 | 403 => Some(FailureClass::Auth),
        429 => Some(FailureClass::Quota),
        _ => None,
    }
}

/// A reported price in USD: a finite, non-negative number.
fn usd(value: Option<&Value>) -> Option<f64> {
    value
        .and_then(Value::as_f64)
        .filter(|u| u.is_finite() && *u >= 0.0)
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

/// When a usage limit resets, from a model API's rate-limit headers:
/// Anthropic's unified reset (seconds since the epoch), else its
/// per-kind resets (RFC 3339), the latest of them.
fn reset_from_headers(headers: &Value) -> Option<Timestamp> {
    let header = |name: &str| headers.get(name).and_then(Value::as_str);
    if let Some(at) = header("anthropic-ratelimit-unified-reset")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .and_then(|n| epoch(&Value::from(n)))
    {
        return Some(at);
    }
    [
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-input-tokens-reset",
        "anthropic-ratelimit-output-tokens-reset",
    ]
    .iter()
    .filter_map(|name| header(name)?.trim().parse::<Timestamp>().ok())
    .max()
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

pub(crate) fn epoch(value: &Value) -> Option<Timestamp> {
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
                if let Some(usd) = usd(event.get("total_cost_usd")) {
                    reading.usage.usd = usd;
                    reading.usage.usd_provenance = Provenance::Reported;
                }
                if let Some(tokens) = event.get("usage").and_then(usage_tokens) {
                    reading.usage.tokens = tokens;
                    reading.usage.tokens_provenance = Provenance::Computed;
                }
                if event.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let reason = ["terminal_reason", "result", "subtype"]
                        .iter()
                        .find_map(|k| event.get(*k).and_then(Value::as_str))
                        .unwrap_or("is_error")
                        .to_owned();
                    let status = event.get("api_error_status").and_then(Value::as_u64);
                    reading.failed(status, reason);
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
            (Structured::OpencodeJson, "error") => {
                let data = event.pointer("/error/data");
                let status = data
                    .and_then(|d| d.get("statusCode"))
                    .and_then(Value::as_u64);
                let message = data
                    .and_then(|d| d.get("message"))
                    .or_else(|| event.pointer("/error/name"))
                    .and_then(Value::as_str)
                    .unwrap_or(kind)
                    .to_owned();
                reading.failed(status, message);
                // OpenCode passes the API's response headers on: the reset
                // time of a usage limit is there when the API gave one.
                if let Some(at) = data
                    .and_then(|d| d.get("responseHeaders"))
                    .and_then(reset_from_headers)
                {
                    reading.resets_at = Some(at);
                }
            }
            (Structured::OpencodeJson, "step_finish") => {
                let part = event.get("part").unwrap_or(&event);
                if let Some(tokens) = part.get("tokens").and_then(|t| number(t, "total")) {
                    reading.usage.tokens = reading.usage.tokens.saturating_add(tokens);
                    reading.usage.tokens_provenance = Provenance::Reported;
                }
                if let Some(usd) = usd(part.get("cost")) {
                    reading.usage.usd += usd;
                    reading.usage.usd_provenance = Provenance::Reported;
                }
            }
            (Structured::CodexJson, "turn.failed" | "error") => {
                let message = event
                    .pointer("/error/message")
                    .or_else(|| event.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or(kind)
                    .to_owned();
                reading.failed(None, message);
            }
            _ => {}
        }
    }
    if reading.class.is_none() {
        if let Some(refusal) = launch_refusal(output) {
            reading.class = Some(FailureClass::Configuration);
            reading.reported_error = Some(refusal);
        } else {
            reading.class = class_from_text(output);
        }
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
    fn opencodes_error_carries_the_apis_reset_time_in_its_headers() {
        let line = |headers: &str| {
            format!(
                r#"{{"type":"error","error":{{"name":"APIError","data":{{"message":"Number of requests has exceeded your rate limit","statusCode":429,"isRetryable":true,"responseHeaders":{headers}}}}}}}"#
            )
        };
        for (headers, reset) in [
            (
                r#"{"anthropic-ratelimit-unified-reset":"1893456000","retry-after":"1"}"#,
                Some("2030-01-01T00:00:00Z"),
            ),
            (
                r#"{"anthropic-ratelimit-requests-reset":"2030-01-01T00:00:00Z","anthropic-ratelimit-tokens-reset":"2030-01-01T00:05:00Z"}"#,
                Some("2030-01-01T00:05:00Z"),
            ),
            (
                r#"{"retry-after":"1","anthropic-ratelimit-unified-reset":"soon"}"#,
                None,
            ),
        ] {
            let reading = read(&line(headers), Structured::OpencodeJson, now());
            assert_eq!(reading.class, Some(FailureClass::Quota), "{headers}");
            assert_eq!(
                reading.resets_at,
                reset.map(|r| r.parse().unwrap()),
                "{headers}"
            );
        }
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
    /// What the real CLIs print, recorded by `scripts/record-agent-fixtures`.
    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/agents/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_cli_rejecting_its_own_arguments_is_a_configuration_error_naming_the_flag() {
        for (name, structured, says) in [
            (
                "codex-unexpected-argument.txt",
                Structured::CodexJson,
                "rejected the argument --full-auto",
            ),
            (
                "claude-unknown-option.txt",
                Structured::ClaudeStreamJson,
                "rejected the argument --full-auto",
            ),
            (
                "codex-outside-git.txt",
                Structured::CodexJson,
                "--skip-git-repo-check",
            ),
            (
                "opencode-unknown-argument.txt",
                Structured::OpencodeJson,
                "printed its usage",
            ),
        ] {
            let reading = read(&fixture(name), structured, now());
            assert_eq!(reading.class, Some(FailureClass::Configuration), "{name}");
            let error = reading.reported_error.unwrap();
            assert!(error.contains(says), "{name}: {error}");
        }
    }

    #[test]
    fn claude_as_root_refusing_to_skip_permissions_says_what_to_do() {
        let reading = read(
            &fixture("claude-root-refuses-skip-permissions.txt"),
            Structured::ClaudeStreamJson,
            now(),
        );
        assert_eq!(reading.class, Some(FailureClass::Configuration));
        let error = reading.reported_error.unwrap();
        assert!(
            error.contains("another user") && error.contains("IS_SANDBOX=1"),
            "{error}"
        );
    }

    #[test]
    fn a_refused_key_is_auth_and_a_usage_limit_quota_in_every_cli_output() {
        for (status, class) in [("401", FailureClass::Auth), ("429", FailureClass::Quota)] {
            for (cli, structured) in [
                ("claude", Structured::ClaudeStreamJson),
                ("codex", Structured::CodexJson),
                ("opencode", Structured::OpencodeJson),
            ] {
                let name = format!("{cli}-{status}.jsonl");
                let reading = read(&fixture(&name), structured, now());
                assert_eq!(reading.class, Some(class), "{name}");
                assert!(reading.reported_error.is_some(), "{name}");
                // None passes the API's reset time on: the driver backs off.
                assert_eq!(reading.resets_at, None, "{name}");
            }
        }
    }

    #[test]
    fn a_refusal_printed_later_in_a_turn_or_inside_events_is_not_configuration() {
        // A tool the agent ran printed a parser error: the CLI had started.
        let started = "{\"type\":\"turn.started\"}\nerror: unexpected argument '--x' found\n";
        assert_eq!(launch_refusal(started), None);
        let late = format!(
            "{}error: unknown option '--x'\n",
            "working\n".repeat(REFUSAL_LINES)
        );
        assert_eq!(launch_refusal(&late), None);
        assert_eq!(
            launch_refusal("error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'"),
            Some("the CLI rejected the value bogus of --sandbox <SANDBOX_MODE>".into())
        );
    }
    #[test]
    fn each_clis_own_report_of_a_turn_gives_its_usage_and_price() {
        // (fixture, output, tokens, provenance, USD reported)
        let table = [
            (
                "claude-turn.jsonl",
                Structured::ClaudeStreamJson,
                2070,
                Provenance::Computed,
                Some(0.01175),
            ),
            (
                "codex-turn.jsonl",
                Structured::CodexJson,
                2100,
                Provenance::Computed,
                None,
            ),
            (
                "opencode-steps.jsonl",
                Structured::OpencodeJson,
                2070,
                Provenance::Reported,
                Some(0.00705),
            ),
        ];
        for (name, structured, tokens, provenance, usd) in table {
            let reading = read(&fixture(name), structured, now());
            assert_eq!(
                (reading.usage.tokens, reading.usage.tokens_provenance),
                (tokens, provenance),
                "{name}"
            );
            match usd {
                Some(usd) => {
                    assert!(
                        (reading.usage.usd - usd).abs() < 1e-12,
                        "{name}: {reading:?}"
                    );
                    assert_eq!(reading.usage.usd_provenance, Provenance::Reported, "{name}");
                }
                None => assert_eq!(reading.usage.usd_provenance, Provenance::Unknown, "{name}"),
            }
            assert_eq!(
                (reading.class, reading.reported_error),
                (None, None),
                "{name}"
            );
        }
    }
}
