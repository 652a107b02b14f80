//! Where a notification goes once it is allowed to leave: a command hook
//! (the rendered body on its stdin, in its own process group, killed at its
//! deadline) and HTTPS webhooks with Slack-, Discord-, Zulip- and
//! Telegram-shaped bodies. Each delivery is bounded: a timeout per attempt,
//! a fixed number of attempts with backoff, no redirects followed.
//!
//! Not here: whether an event may leave (consent, local-only kinds), what
//! it says (the core renders it, already redacted) or dedupe memory
//! (`super`). The URL policy — HTTPS only, no credentials in the URL, plain
//! HTTP only to this host behind the development opt-in — is
//! [`check_url`], applied when the configuration is read.

use loopx_core::notify::{render, Event, Format};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The development opt-in for plain HTTP to this host.
pub const ALLOW_LOCAL_HTTP_ENV: &str = "LOOPX_NOTIFY_ALLOW_LOCAL_HTTP";
/// For tests: a PEM file of extra certificate authorities webhooks trust.
pub const TEST_CA_FILE_ENV: &str = "LOOPX_NOTIFY_TEST_CA_FILE";

/// The body shape a webhook receiver expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookKind {
    /// `{"text": markdown}`.
    Slack,
    /// `{"content": markdown}`, cut to Discord's 2000 characters.
    Discord,
    /// Zulip's form body: `type=stream&to=…&topic=…&content=…`.
    Zulip,
    /// `{"chat_id": …, "text": html, "parse_mode": "HTML"}`.
    Telegram,
    /// The redacted event itself, with its Markdown body.
    Json,
}

/// One configured webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    #[serde(default)]
    pub name: String,
    pub kind: WebhookKind,
    pub url: String,
    /// The environment variable whose value is sent as the
    /// `Authorization` header (kept out of the file and out of the URL).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authorization_env: String,
    /// Telegram's chat.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chat_id: String,
    /// Zulip's stream and topic.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub topic: String,
}

impl Webhook {
    /// The `Authorization` value, when one is configured and set.
    pub fn authorization(&self) -> Option<String> {
        (!self.authorization_env.is_empty())
            .then(|| std::env::var(&self.authorization_env).ok())
            .flatten()
            .filter(|v| !v.is_empty())
    }
}

/// Why a webhook URL is refused. Messages name the scheme and host only:
/// the rest of a webhook URL is often itself a secret.
pub fn check_url(url: &str, allow_local_http: bool) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let (plain, rest) = if let Some(rest) = lower.strip_prefix("https://") {
        (false, rest)
    } else if let Some(rest) = lower.strip_prefix("http://") {
        (true, rest)
    } else {
        return Err("is not an https:// URL".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(
            "carries credentials in the URL: put them in the environment variable named by authorization_env"
                .into(),
        );
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if plain {
        let local = matches!(host, "localhost" | "127.0.0.1" | "::1");
        if !local {
            return Err(format!("uses plain http to {host}: use https"));
        }
        if !allow_local_http {
            return Err(format!(
                "uses plain http to {host}: use https, or set {ALLOW_LOCAL_HTTP_ENV}=1 for local development"
            ));
        }
    }
    Ok(())
}

/// How one transport's delivery went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempted {
    pub delivered: bool,
    pub attempts: u32,
    /// What the last attempt came to, for the audit log (never a body).
    pub detail: String,
}

/// The bounds every delivery keeps.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub timeout: Duration,
    pub attempts: u32,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Run `argv` with `body` on its stdin; success is exit status 0 before the
/// deadline. The hook runs in its own process group, killed whole at the
/// deadline so nothing it started outlives it.
pub fn run_command(argv: &[String], body: &str, bounds: Bounds) -> Attempted {
    let mut last = String::new();
    for attempt in 1..=bounds.attempts.max(1) {
        match run_command_once(argv, body, bounds.timeout) {
            Ok(()) => {
                return Attempted {
                    delivered: true,
                    attempts: attempt,
                    detail: "exit 0".into(),
                }
            }
            Err(why) => last = why,
        }
        if attempt < bounds.attempts {
            std::thread::sleep(backoff(attempt));
        }
    }
    Attempted {
        delivered: false,
        attempts: bounds.attempts.max(1),
        detail: last,
    }
}

fn run_command_once(argv: &[String], body: &str, timeout: Duration) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("the command is empty")?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::platform::in_new_group(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not start {program:?}: {e}"))?;
    let group = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its stdin is its own business: the
        // exit status decides.
        let _ = stdin.write_all(body.as_bytes());
    }
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("the command exited with {status}")),
            Ok(None) if Instant::now() >= deadline => {
                crate::platform::kill_group(group);
                let _ = child.wait();
                return Err(format!(
                    "the command ran past its {}s timeout and was killed",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("could not wait for the command: {e}")),
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    loopx_core::backoff::doubling(FIRST_BACKOFF, attempt.saturating_sub(1), MAX_BACKOFF)
}

/// The request a webhook receives: content type and body.
pub fn webhook_body(hook: &Webhook, event: &Event) -> (&'static str, String) {
    const DISCORD_LIMIT: usize = 2000;
    let markdown = render(event, Format::Markdown);
    match hook.kind {
        WebhookKind::Slack => (
            "application/json",
            serde_json::json!({ "text": markdown }).to_string(),
        ),
        WebhookKind::Discord => (
            "application/json",
            serde_json::json!({
                "content": loopx_core::notify::shorten(&markdown, DISCORD_LIMIT)
            })
            .to_string(),
        ),
        WebhookKind::Zulip => {
            let topic = if hook.topic.is_empty() {
                &event.topic
            } else {
                &hook.topic
            };
            let form = [
                ("type", "stream"),
                ("to", hook.stream.as_str()),
                ("topic", topic),
                ("content", markdown.as_str()),
            ]
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
            ("application/x-www-form-urlencoded", form)
        }
        WebhookKind::Telegram => (
            "application/json",
            serde_json::json!({
                "chat_id": hook.chat_id,
                "text": render(event, Format::TelegramHtml),
                "parse_mode": "HTML",
                "disable_web_page_preview": true,
            })
            .to_string(),
        ),
        WebhookKind::Json => (
            "application/json",
            serde_json::json!({ "event": event, "body": markdown }).to_string(),
        ),
    }
}

fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// POST `body` to the webhook: each attempt bounded by the timeout,
/// redirects never followed (a 3xx is a refusal, not retried), a 2xx is
/// delivery, a connection error, a 429 or a 5xx is retried with backoff.
/// The idempotency key is the same on every attempt, so a receiver that
/// got an attempt whose answer was lost can tell the retry apart.
pub fn post(
    hook: &Webhook,
    content_type: &str,
    body: &str,
    idempotency_key: &str,
    bounds: Bounds,
) -> Attempted {
    let agent = match agent(bounds.timeout) {
        Ok(agent) => agent,
        Err(why) => {
            return Attempted {
                delivered: false,
                attempts: 0,
                detail: why,
            }
        }
    };
    let mut last = String::new();
    let attempts = bounds.attempts.max(1);
    for attempt in 1..=attempts {
        let mut request = agent
            .post(&hook.url)
            .header("Content-Type", content_type)
            .header("Idempotency-Key", idempotency_key)
            .header("User-Agent", concat!("loopx/", env!("CARGO_PKG_VERSION")));
        if let Some(authorization) = hook.authorization() {
            request = request.header("Authorization", authorization);
        }
        let retry = match request.send(body) {
            Ok(response) => {
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return Attempted {
                        delivered: true,
                        attempts: attempt,
                        detail: format!("HTTP {status}"),
                    };
                }
                if (300..400).contains(&status) {
                    last = format!(
                        "HTTP {status}: redirects are not followed; configure the final https URL"
                    );
                    false
                } else {
                    last = format!("HTTP {status}");
                    status == 429 || status >= 500
                }
            }
            // The error's text can hold the URL; say only its kind.
            Err(error) => {
                last = describe(&error);
                true
            }
        };
        if !retry {
            return Attempted {
                delivered: false,
                attempts: attempt,
                detail: last,
            };
        }
        if attempt < attempts {
            std::thread::sleep(backoff(attempt));
        }
    }
    Attempted {
        delivered: false,
        attempts,
        detail: last,
    }
}

fn describe(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::Io(e) => format!("connection failed ({:?})", e.kind()),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => "TLS handshake failed".into(),
        _ => "request failed".into(),
    }
}

fn agent(timeout: Duration) -> Result<ureq::Agent, String> {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let mut tls = TlsConfig::builder();
    if let Some(path) = std::env::var_os(TEST_CA_FILE_ENV) {
        let pem = std::fs::read(&path)
            .map_err(|e| format!("{TEST_CA_FILE_ENV}: could not read {path:?}: {e}"))?;
        let ca = Certificate::from_pem(&pem)
            .map_err(|e| format!("{TEST_CA_FILE_ENV}: {path:?} is not a PEM certificate: {e}"))?;
        tls = tls.root_certs(RootCerts::new_with_certs(&[ca]));
    }
    let config = ureq::Agent::config_builder()
        .max_redirects(0)
        .max_redirects_will_error(false)
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        // Webhooks go direct: a proxy from the environment would be a
        // second, unconfigured egress path.
        .proxy(None)
        .tls_config(tls.build())
        .build();
    Ok(config.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_urls_must_be_https_without_credentials() {
        assert!(check_url("https://hooks.example.com/T0/B0", false).is_ok());
        assert!(check_url("https://user:pw@hooks.example.com/x", false)
            .unwrap_err()
            .contains("credentials"));
        assert!(check_url("http://hooks.example.com/x", true).is_err());
        assert!(check_url("http://127.0.0.1:8080/x", false).is_err());
        assert!(check_url("http://127.0.0.1:8080/x", true).is_ok());
        assert!(check_url("http://[::1]:8080/x", true).is_ok());
        assert!(check_url("ftp://example.com", true).is_err());
    }

    #[test]
    fn the_command_hook_is_killed_at_its_deadline() {
        let started = Instant::now();
        let outcome = run_command(
            &["sh".into(), "-c".into(), "sleep 30".into()],
            "body",
            Bounds {
                timeout: Duration::from_millis(300),
                attempts: 1,
            },
        );
        assert!(!outcome.delivered);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
