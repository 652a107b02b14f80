//! `loopx panel --smoke`: whether the panel's reviewers start and answer
//! at all, without a loop; nothing of any loop is sent or written. Not
//! here: a real review (`run.rs`).

use super::config::{config_in, refused};
use super::launch::{Launch, Ran, Unanswered};
use crate::focus::candidate::family_of;
use crate::{fsutil, AppError};
use loopx_core::driver::provider::Family;
use loopx_core::panel::config::{self, Skipped};
use loopx_core::panel::{PanelConfig, FILE, PROVIDERS_ENV};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// What `loopx panel --smoke` sends each reviewer: nothing of any loop.
pub const SMOKE_PROMPT: &str =
    "This is a connectivity check from loopx. Reply with the single word PONG and nothing else.";

/// How long a reviewer gets to answer the smoke prompt, unless `--timeout`
/// says otherwise: a cold start of an agent CLI plus one short answer.
pub const SMOKE_TIMEOUT_S: u64 = 120;

/// How one reviewer fared in a smoke test.
#[derive(Debug, Clone, Serialize)]
pub struct SmokeReviewer {
    pub provider: String,
    pub family: Family,
    /// `answered`, `not_installed`, `timed_out`, `failed` or
    /// `unexpected_answer`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    pub elapsed_ms: u64,
    pub detail: String,
}

/// `loopx panel --smoke`: can the panel reach its reviewers?
#[derive(Debug, Clone, Serialize)]
pub struct SmokeView {
    pub status: &'static str,
    pub action: &'static str,
    /// Where panel.json was read from, if there was one.
    pub config: Option<String>,
    pub timeout_s: u64,
    pub reviewers: Vec<SmokeReviewer>,
    pub skipped: Vec<Skipped>,
}

impl SmokeView {
    /// Whether any invited reviewer answered.
    pub fn passed(&self) -> bool {
        self.reviewers.iter().any(|r| r.outcome == "answered")
    }

    pub fn text(&self) -> String {
        let mut lines = vec![format!(
            "panel smoke test ({}s per reviewer; config: {}):",
            self.timeout_s,
            self.config.as_deref().unwrap_or("defaults")
        )];
        for r in &self.reviewers {
            lines.push(format!(
                "  {} ({}): {}{}",
                r.provider,
                r.family.name(),
                r.outcome,
                if r.detail.is_empty() {
                    String::new()
                } else {
                    format!(" - {}", r.detail)
                }
            ));
        }
        for s in &self.skipped {
            lines.push(format!("  {}: skipped - {}", s.provider, s.reason));
        }
        lines.push(if self.passed() {
            "at least one reviewer answered: the panel can run".to_owned()
        } else {
            "no reviewer answered: the panel cannot run here".to_owned()
        });
        lines.join("\n")
    }
}

/// Check that the panel's reviewers start and answer, without a loop:
/// each reviewer the panel would invite (panel.json in `root` if there
/// is one, the session's list, the default order; `exclude_until_credit`
/// honoured; no executor, so no family is left out) is sent
/// [`SMOKE_PROMPT`], through `runner`, in a private temporary directory
/// that is removed afterwards. Nothing of any loop is sent or written, so
/// no consent is asked. A reviewer answers when its output holds `PONG`.
pub fn smoke(
    root: &Path,
    cli_timeout: Option<u64>,
    runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
) -> Result<SmokeView, AppError> {
    let found = config_in(root, &root.display().to_string())?;
    let config_path = found
        .as_ref()
        .map(|_| root.join(FILE).display().to_string());
    // A smoke test has no executor: every family is welcome.
    let config = PanelConfig {
        require_different_family: false,
        ..found.unwrap_or_default()
    };
    let invitation = config::invite(
        &config,
        std::env::var(PROVIDERS_ENV).ok().as_deref(),
        Family::Unverified,
        family_of,
        false,
    )
    .map_err(refused)?;
    let timeout_s = cli_timeout.unwrap_or(SMOKE_TIMEOUT_S);
    let work = fsutil::create_private_temp_dir("loopx-panel-smoke")?;
    let mut reviewers = Vec::new();
    for name in &invitation.invited {
        let launcher = crate::launchers::installed_launcher_named(name);
        let mut reviewer = SmokeReviewer {
            provider: name.clone(),
            family: family_of(name),
            outcome: "not_installed",
            binary: launcher.map(|l| l.binary.to_owned()),
            elapsed_ms: 0,
            detail: String::new(),
        };
        if let Some(launcher) = launcher {
            let (outcome, detail, elapsed_ms) =
                ping(name, launcher, work.clone(), timeout_s, runner);
            reviewer.outcome = outcome;
            reviewer.detail = detail;
            reviewer.elapsed_ms = elapsed_ms;
        }
        reviewers.push(reviewer);
    }
    let _ = std::fs::remove_dir_all(&work);
    let mut view = SmokeView {
        status: "failed",
        action: "panel-smoke",
        config: config_path,
        timeout_s,
        reviewers,
        skipped: invitation.skipped,
    };
    if view.passed() {
        view.status = "ok";
    }
    Ok(view)
}

/// Send [`SMOKE_PROMPT`] to provider `name` through `launcher`, in
/// `work`, and judge its answer: `(outcome, detail, elapsed_ms)`, the
/// outcome as [`SmokeReviewer::outcome`] names it (never `not_installed`).
/// Shared with `loopx smoke --live`, which asks the supervisor's providers.
pub fn ping(
    name: &str,
    launcher: &loopx_core::driver::provider::Launcher,
    work: std::path::PathBuf,
    timeout_s: u64,
    runner: &mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
) -> (&'static str, String, u64) {
    let launch = Launch::reviewer(
        name,
        launcher,
        SMOKE_PROMPT,
        work,
        Duration::from_secs(timeout_s),
        crate::operation::fresh_name(&format!("smoke-{name}")),
    );
    match launch.map(|launch| runner(&launch)) {
        Err(unusable) => ("failed", unusable, 0),
        Ok(Err(error)) => ("failed", format!("could not be started: {error:#}"), 0),
        Ok(Ok(ran)) => {
            let said = loopx_core::redact::redact_owned(&String::from_utf8_lossy(&ran.stdout));
            let elapsed_ms = ran.elapsed.as_millis() as u64;
            let (outcome, detail) = match ran.unanswered(timeout_s) {
                Some(Unanswered::TimedOut(why)) => ("timed_out", why),
                Some(Unanswered::Failed(why)) => ("failed", format!("{why}: {}", excerpt(&said))),
                None if said.to_ascii_uppercase().contains("PONG") => ("answered", String::new()),
                None => ("unexpected_answer", excerpt(&said)),
            };
            (outcome, detail, elapsed_ms)
        }
    }
}

/// The start of what a reviewer said, on one line, for a person.
fn excerpt(said: &str) -> String {
    let line = said.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None if line.is_empty() => "(no output)".to_owned(),
        None => line,
    }
}
