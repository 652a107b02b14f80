//! A running turn's structured output, read line by line as it arrives:
//! what one line says ([`event`]), and what the loop makes of it while the
//! turn still runs ([`StreamWatch`]): a CLI retrying a refused model API
//! call is shown (the driver records [`CliRetry`] for `status`), and a CLI
//! whose own retries of a refused key or a usage limit go past the loop's
//! policy ([`RetryPolicy`]) has its turn ended at once, classified AUTH or
//! QUOTA, instead of waiting out minutes of retries that cannot succeed.
//!
//! The shapes are those the real CLIs print (fixtures in
//! `tests/fixtures/agents/`): Claude Code's stream-json
//! `{"type":"system","subtype":"api_retry","attempt":N,"max_retries":M,
//! "retry_delay_ms":D,"error_status":429,"error":"rate_limit"}`, and
//! Codex's `{"type":"error","message":"Reconnecting... N/M (… last status:
//! 429 Too Many Requests)"}`. OpenCode 1.18 retries silently (its
//! `--format json` prints nothing until it gives up), so it has no event.
//!
//! Not here: reading the pipe or ending the process (the runner), the
//! write `status` reads (the application), the classification of a whole
//! turn's output once it ends (`super::classify`).

use super::classify::{class_from_status, class_from_text, epoch, FailureClass};
use super::provider::Structured;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many of a CLI's own retries of a refused key or a usage limit a
/// turn waits out before it is ended, unless the run says otherwise
/// (`drive --max-cli-retries`).
pub const DEFAULT_MAX_CLI_RETRIES: u32 = 2;

/// The longest line the watch reads; a longer one (a tool's output, a
/// whole file) is no retry event, and is skipped.
pub const MAX_EVENT_LINE: usize = 16 * 1024;

/// The CLI is retrying a model API call that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CliRetry {
    /// Which retry this is, from 1.
    pub attempt: u32,
    /// How many the CLI will make, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// The HTTP status the model API answered, when the CLI says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The CLI's short name or words for the error (`rate_limit`,
    /// `429 Too Many Requests`), bounded and redacted.
    pub error: String,
    /// How long the CLI waits before this retry, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

impl CliRetry {
    /// What the failing call shows: a refused key (AUTH) or a usage limit
    /// (QUOTA); `None` for anything a retry may cure (overload, 5xx, a
    /// broken connection).
    pub fn class(&self) -> Option<FailureClass> {
        class_from_status(self.status.map(u64::from)).or_else(|| class_from_text(&self.error))
    }

    /// In words: "retry 2 of 10 after 429 rate_limit".
    pub fn words(&self) -> String {
        let of = self
            .max_retries
            .map(|max| format!(" of {max}"))
            .unwrap_or_default();
        let status = match self.status {
            Some(status) if !self.error.contains(&status.to_string()) => format!("{status} "),
            _ => String::new(),
        };
        format!("retry {}{of} after {status}{}", self.attempt, self.error)
    }
}

/// What one line of a running turn's output says, when it says anything
/// the loop acts on while the turn runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// The CLI retries a failed model API call.
    Retry(CliRetry),
    /// The provider said when its usage limit resets (Claude Code's
    /// `rate_limit_event`).
    Resets(Timestamp),
}

/// The most of a CLI's error words kept.
const ERROR_WORDS: usize = 120;

fn bounded_words(text: &str) -> String {
    let text = crate::redact::redact_owned(text.trim());
    match text.char_indices().nth(ERROR_WORDS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// What `line` of a turn's output says, for a CLI whose output is
/// `structured`.
pub fn event(line: &str, structured: Structured) -> Option<StreamEvent> {
    let line = line.trim();
    if line.len() > MAX_EVENT_LINE || !line.starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(line).ok()?;
    let kind = value.get("type").and_then(Value::as_str)?;
    match (structured, kind) {
        (Structured::ClaudeStreamJson, "system")
            if value.get("subtype").and_then(Value::as_str) == Some("api_retry") =>
        {
            let number = |key: &str| value.get(key).and_then(Value::as_f64);
            let attempt = number("attempt").filter(|n| *n >= 0.0)? as u32;
            Some(StreamEvent::Retry(CliRetry {
                attempt,
                max_retries: number("max_retries")
                    .filter(|n| *n >= 0.0)
                    .map(|n| n as u32),
                status: number("error_status")
                    .filter(|n| (100.0..600.0).contains(n))
                    .map(|n| n as u16),
                error: bounded_words(value.get("error").and_then(Value::as_str).unwrap_or("")),
                delay_ms: number("retry_delay_ms")
                    .filter(|n| *n >= 0.0)
                    .map(|n| n as u64),
            }))
        }
        (Structured::ClaudeStreamJson, "rate_limit_event") => {
            let info = value.get("rate_limit_info").unwrap_or(&value);
            info.get("resetsAt")
                .and_then(epoch)
                .map(StreamEvent::Resets)
        }
        (Structured::CodexJson, "error") => {
            let message = value.get("message").and_then(Value::as_str)?;
            codex_reconnect(message).map(StreamEvent::Retry)
        }
        _ => None,
    }
}

/// Codex's `Reconnecting... N/M (why)`, the status read from its words
/// (`last status: 429 Too Many Requests`, `unexpected status 401
/// Unauthorized`).
fn codex_reconnect(message: &str) -> Option<CliRetry> {
    let rest = message.strip_prefix("Reconnecting...")?.trim_start();
    let (counts, why) = rest.split_once(' ').unwrap_or((rest, ""));
    let (attempt, max) = counts.split_once('/')?;
    let why = why.trim().trim_start_matches('(').trim_end_matches(')');
    let status = ["last status: ", "unexpected status "]
        .iter()
        .find_map(|marker| {
            let after = &why[why.find(marker)? + marker.len()..];
            after.get(..3)?.parse::<u16>().ok()
        });
    Some(CliRetry {
        attempt: attempt.parse().ok()?,
        max_retries: max.parse().ok(),
        status,
        error: bounded_words(why),
        delay_ms: None,
    })
}

/// How many of a CLI's own retries of a call that cannot succeed by
/// retrying soon (a refused key, a usage limit) a turn waits out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_cli_retries: u32,
}

/// The variable that sets the policy when `--max-cli-retries` does not.
pub const MAX_CLI_RETRIES_ENV: &str = "LOOPX_MAX_CLI_RETRIES";

impl RetryPolicy {
    /// `--max-cli-retries`, else [`MAX_CLI_RETRIES_ENV`], else the default.
    pub fn resolve(flag: Option<u32>, env: Option<&str>) -> Result<RetryPolicy, String> {
        let max_cli_retries = match (flag, env) {
            (Some(flag), _) => flag,
            (None, Some(env)) => env.trim().parse().map_err(|_| {
                format!(
                    "{MAX_CLI_RETRIES_ENV}={env:?} is not a whole number of retries; fix or unset it, or give --max-cli-retries"
                )
            })?,
            (None, None) => DEFAULT_MAX_CLI_RETRIES,
        };
        Ok(RetryPolicy { max_cli_retries })
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_cli_retries: DEFAULT_MAX_CLI_RETRIES,
        }
    }
}

/// Why a running turn is ended before its CLI gives up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutShort {
    pub class: FailureClass,
    /// In words, for the settlement's note and the progress line.
    pub reason: String,
    /// When the provider said its usage limit resets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<Timestamp>,
}

/// What the watch makes of one line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watched {
    /// A retry to show (the driver records it for `status`): once per
    /// retry event, never per line.
    pub retry: Option<CliRetry>,
    /// End the turn now.
    pub cut: Option<CutShort>,
}

/// The loop's view of one running turn's output, line by line.
#[derive(Debug, Clone)]
pub struct StreamWatch {
    structured: Structured,
    policy: RetryPolicy,
    resets_at: Option<Timestamp>,
    cut: bool,
}

impl StreamWatch {
    pub fn new(structured: Structured, policy: RetryPolicy) -> StreamWatch {
        StreamWatch {
            structured,
            policy,
            resets_at: None,
            cut: false,
        }
    }

    /// Read one line. A turn is cut short once: lines after that are
    /// what the dying CLI still printed.
    pub fn line(&mut self, line: &str) -> Watched {
        if self.cut {
            return Watched::default();
        }
        match event(line, self.structured) {
            Some(StreamEvent::Resets(at)) => {
                self.resets_at = Some(at);
                Watched::default()
            }
            Some(StreamEvent::Retry(retry)) => {
                let cut = match retry.class() {
                    Some(class @ (FailureClass::Auth | FailureClass::Quota))
                        if retry.attempt > self.policy.max_cli_retries =>
                    {
                        self.cut = true;
                        Some(CutShort {
                            class,
                            reason: format!(
                                "the CLI was on its {} and the loop allows {} (--max-cli-retries): the turn was ended",
                                retry.words(),
                                self.policy.max_cli_retries,
                            ),
                            resets_at: self.resets_at.filter(|_| class == FailureClass::Quota),
                        })
                    }
                    _ => None,
                };
                Watched {
                    retry: Some(retry),
                    cut,
                }
            }
            None => Watched::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the real CLIs print, recorded by `scripts/record-agent-fixtures`.
    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/agents/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Each line of `name` through a watch allowing `allowed` retries:
    /// the retries shown and the cut, if any.
    fn watch(name: &str, structured: Structured, allowed: u32) -> (Vec<u32>, Option<CutShort>) {
        let mut watch = StreamWatch::new(
            structured,
            RetryPolicy {
                max_cli_retries: allowed,
            },
        );
        let mut shown = Vec::new();
        let mut cut = None;
        for line in fixture(name).lines() {
            let watched = watch.line(line);
            shown.extend(watched.retry.map(|r| r.attempt));
            if let Some(c) = watched.cut {
                assert!(cut.is_none(), "{name}: cut twice");
                cut = Some(c);
            }
        }
        (shown, cut)
    }

    #[test]
    fn claude_codes_api_retry_lines_are_read_with_their_status() {
        let line = r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1035.49,"error_status":429,"error":"rate_limit","session_id":"s"}"#;
        let Some(StreamEvent::Retry(retry)) = event(line, Structured::ClaudeStreamJson) else {
            panic!("not a retry");
        };
        assert_eq!(
            retry,
            CliRetry {
                attempt: 2,
                max_retries: Some(10),
                status: Some(429),
                error: "rate_limit".into(),
                delay_ms: Some(1035),
            }
        );
        assert_eq!(retry.class(), Some(FailureClass::Quota));
        assert_eq!(retry.words(), "retry 2 of 10 after 429 rate_limit");
        // The same line from another CLI's output is nothing.
        assert_eq!(event(line, Structured::CodexJson), None);
    }

    #[test]
    fn codexs_reconnecting_errors_are_retries_with_the_status_from_their_words() {
        let (shown, _) = watch("codex-401.jsonl", Structured::CodexJson, 99);
        assert_eq!(shown, [1, 2, 3, 4, 5]);
        let line = r#"{"type":"error","message":"Reconnecting... 3/5 (exceeded retry limit, last status: 429 Too Many Requests)"}"#;
        let Some(StreamEvent::Retry(retry)) = event(line, Structured::CodexJson) else {
            panic!("not a retry");
        };
        assert_eq!(
            (retry.attempt, retry.max_retries, retry.status),
            (3, Some(5), Some(429))
        );
        assert_eq!(retry.class(), Some(FailureClass::Quota));
        // Codex's final error is no retry: the turn's reading classifies it.
        let gave_up = r#"{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}"#;
        assert_eq!(event(gave_up, Structured::CodexJson), None);
    }

    #[test]
    fn retries_past_the_policy_cut_the_turn_short_as_auth_or_quota() {
        for (name, structured, allowed, shown, class) in [
            (
                "claude-401.jsonl",
                Structured::ClaudeStreamJson,
                1,
                &[1, 2][..],
                FailureClass::Auth,
            ),
            (
                "codex-401.jsonl",
                Structured::CodexJson,
                2,
                &[1, 2, 3][..],
                FailureClass::Auth,
            ),
            (
                "claude-429-retrying.jsonl",
                Structured::ClaudeStreamJson,
                2,
                &[1, 2, 3][..],
                FailureClass::Quota,
            ),
        ] {
            let (seen, cut) = watch(name, structured, allowed);
            assert_eq!(
                seen, shown,
                "{name}: shown once per retry, none after the cut"
            );
            let cut = cut.unwrap_or_else(|| panic!("{name}: never cut"));
            assert_eq!(cut.class, class, "{name}");
            assert!(cut.reason.contains("--max-cli-retries"), "{}", cut.reason);
        }
        // Within the policy: shown, never cut.
        let (seen, cut) = watch("claude-429.jsonl", Structured::ClaudeStreamJson, 2);
        assert_eq!((seen, cut), (vec![1], None));
    }

    #[test]
    fn an_overload_is_retried_by_the_cli_however_long() {
        let mut watch = StreamWatch::new(Structured::ClaudeStreamJson, RetryPolicy::default());
        for attempt in 1..=10 {
            let line = format!(
                r#"{{"type":"system","subtype":"api_retry","attempt":{attempt},"max_retries":10,"error_status":529,"error":"overloaded"}}"#
            );
            let watched = watch.line(&line);
            assert_eq!(watched.retry.map(|r| r.attempt), Some(attempt));
            assert_eq!(watched.cut, None);
        }
    }

    #[test]
    fn a_reset_time_the_provider_gave_travels_with_a_quota_cut() {
        let mut watch = StreamWatch::new(
            Structured::ClaudeStreamJson,
            RetryPolicy { max_cli_retries: 0 },
        );
        let resets = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1893456000}}"#;
        assert_eq!(watch.line(resets), Watched::default());
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":429,"error":"rate_limit"}"#;
        let cut = watch.line(retry).cut.unwrap();
        assert_eq!(
            cut.resets_at,
            Some(Timestamp::from_second(1893456000).unwrap())
        );
    }

    #[test]
    fn the_policy_comes_from_the_flag_then_the_environment_then_the_default() {
        let resolve = RetryPolicy::resolve;
        assert_eq!(resolve(Some(5), Some("1")).unwrap().max_cli_retries, 5);
        assert_eq!(resolve(None, Some(" 0 ")).unwrap().max_cli_retries, 0);
        assert_eq!(resolve(None, None).unwrap(), RetryPolicy::default());
        let error = resolve(None, Some("many")).unwrap_err();
        assert!(error.contains(MAX_CLI_RETRIES_ENV) && error.contains("--max-cli-retries"));
    }

    #[test]
    fn hostile_lines_are_nothing_or_bounded() {
        let mut watch = StreamWatch::new(Structured::ClaudeStreamJson, RetryPolicy::default());
        for line in [
            "",
            "not json",
            "{",
            r#"{"type":"system","subtype":"api_retry"}"#,
            r#"{"type":"system","subtype":"api_retry","attempt":-1}"#,
            r#"{"type":"system","subtype":"api_retry","attempt":"1"}"#,
            r#"[{"type":"system"}]"#,
        ] {
            assert_eq!(watch.line(line), Watched::default(), "{line:?}");
        }
        let long = format!(
            r#"{{"type":"system","subtype":"api_retry","attempt":1,"error_status":429,"error":"{}"}}"#,
            "x".repeat(MAX_EVENT_LINE)
        );
        assert_eq!(watch.line(&long), Watched::default());
        let key = r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":401,"error":"bad key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 and then a great deal more text that goes on and on and on past the bound for words"}"#;
        let retry = watch.line(key).retry.unwrap();
        assert!(!retry.error.contains("abcdefghijklmnop"), "{}", retry.error);
        assert!(
            retry.error.chars().count() <= ERROR_WORDS + 1,
            "{}",
            retry.error
        );
    }
}
