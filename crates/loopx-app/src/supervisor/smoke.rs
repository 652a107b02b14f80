//! `loopx smoke`: before a long unattended run, whether what the
//! supervisor will need answers — the store opens read-write, every
//! provider of the failover order `loopx start` would hand its driver is
//! installed and starts (with `live`, answers a one-line prompt), and the
//! notification settings are valid. One check a line; writes nothing to
//! the loop.
//!
//! Not here: the failover order's rule (`super::failover`, the one
//! `start` uses), the one-line prompt and how its answer is judged
//! (`crate::panel::ping`, shared with `loopx panel --smoke`), how a
//! provider process is run (the caller's `runner`).

use crate::loop_dir::{LoopDir, Place};
use crate::panel::{Launch, Ran};
use crate::{fsutil, launchers, notify, platform};
use loopx_store::sqlite::Access;
use serde::Serialize;

/// One check and how it went.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked: `store`, `failover`, `provider NAME`, `notify ...`.
    pub check: String,
    pub passed: bool,
    pub detail: String,
}

/// What `loopx smoke` found.
#[derive(Debug, Clone, Serialize)]
pub struct Smoke {
    pub status: &'static str,
    pub action: &'static str,
    /// The providers were sent a one-line prompt, not only `--version`.
    pub live: bool,
    pub checks: Vec<Check>,
}

impl Smoke {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    pub fn text(&self) -> String {
        let mut lines: Vec<String> = self
            .checks
            .iter()
            .map(|c| {
                let mark = if c.passed { "ok  " } else { "FAIL" };
                format!("{mark} {}: {}", c.check, c.detail)
            })
            .collect();
        let failed = self.checks.iter().filter(|c| !c.passed).count();
        lines.push(match failed {
            0 => "all checks passed: `loopx start` can run this loop unattended".to_owned(),
            n => format!("{n} check(s) failed: fix them before `loopx start`"),
        });
        lines.join("\n")
    }
}

/// How `--live` asks each provider: within `timeout_s`, through `runner`.
pub struct Live<'a> {
    pub timeout_s: u64,
    pub runner: &'a mut dyn FnMut(&Launch) -> anyhow::Result<Ran>,
}

fn check(check: impl Into<String>, passed: bool, detail: impl Into<String>) -> Check {
    Check {
        check: check.into(),
        passed,
        detail: detail.into(),
    }
}

/// Run the checks on the loop at `place`, for the order `given`
/// (`--provider`, as `start` takes it). `live` sends each installed
/// provider the panel's smoke prompt, in a private temporary directory
/// removed afterwards.
pub fn smoke(place: Place<'_>, given: &[String], live: Option<Live<'_>>) -> anyhow::Result<Smoke> {
    let is_live = live.is_some();
    let mut checks = Vec::new();
    match LoopDir::open(place, Access::ReadWrite) {
        Err(error) => {
            checks.push(check("store", false, format!("{error:#}")));
            checks.push(check(
                "the rest",
                false,
                "not checked: the failover order and the notification settings are read from the loop",
            ));
        }
        Ok(dir) => {
            checks.push(store_check(&dir));
            checks.extend(provider_checks(&dir, given, live)?);
            checks.extend(notify_checks(&dir));
        }
    }
    let mut smoke = Smoke {
        status: "failed",
        action: "smoke",
        live: is_live,
        checks,
    };
    if smoke.passed() {
        smoke.status = "ok";
    }
    Ok(smoke)
}

/// The store opened read-write (the caller's open) and its state reads.
fn store_check(dir: &LoopDir) -> Check {
    match dir.read() {
        Ok(_) => check(
            "store",
            true,
            format!("{} opens read-write", dir.store_location()),
        ),
        Err(error) => check(
            "store",
            false,
            format!(
                "{} opened but its state does not read: {error:#}",
                dir.store_location()
            ),
        ),
    }
}

/// The failover order as `start` resolves it, then each provider in it.
fn provider_checks(
    dir: &LoopDir,
    given: &[String],
    mut live: Option<Live<'_>>,
) -> anyhow::Result<Vec<Check>> {
    let failover = match super::failover(dir, given) {
        Ok(failover) => failover,
        Err(refusal) => return Ok(vec![check("failover", false, refusal.to_string())]),
    };
    let mut checks = vec![check(
        "failover",
        true,
        format!("{} (from {})", failover.order.join(", "), failover.source),
    )];
    let work = match live {
        Some(_) => Some(fsutil::create_private_temp_dir("loopx-smoke")?),
        None => None,
    };
    for name in &failover.order {
        let label = format!("provider {name}");
        if loopx_core::driver::provider::find(name).is_none() {
            let known = loopx_core::driver::provider::names().join(", ");
            checks.push(check(
                label,
                false,
                format!("unknown provider (known: {known})"),
            ));
            continue;
        }
        let Some(launcher) = launchers::installed_launcher_named(name) else {
            checks.push(check(
                label,
                false,
                "not installed: no launcher of it is on PATH",
            ));
            continue;
        };
        let Some(path) = platform::which(launcher.binary) else {
            checks.push(check(
                label,
                false,
                format!("{} is not on PATH", launcher.binary),
            ));
            continue;
        };
        let version = match launchers::version(&path) {
            Ok(line) => line,
            Err(why) => {
                checks.push(check(
                    label,
                    false,
                    format!("{} --version {why}", path.display()),
                ));
                continue;
            }
        };
        let started = format!("{} starts ({})", path.display(), version);
        let (Some(live), Some(work)) = (live.as_mut(), &work) else {
            checks.push(check(label, true, started));
            continue;
        };
        let (outcome, detail, elapsed_ms) =
            crate::panel::ping(name, launcher, work.clone(), live.timeout_s, live.runner);
        let passed = outcome == "answered";
        let detail = match detail.is_empty() {
            true => format!("{started}; {outcome} in {elapsed_ms} ms"),
            false => format!("{started}; {outcome}: {detail}"),
        };
        checks.push(check(label, passed, detail));
    }
    if let Some(work) = work {
        let _ = std::fs::remove_dir_all(work);
    }
    Ok(checks)
}

/// The notification settings, checked as a delivery reads them. loopx has
/// no test-send, and a smoke test must not post to anyone's channel: each
/// configured transport is reported valid, or not, without sending.
fn notify_checks(dir: &LoopDir) -> Vec<Check> {
    let config = match notify::Config::read(dir) {
        Ok(config) => config,
        Err(error) => return vec![check("notify", false, error.to_string())],
    };
    let mut checks = vec![check(
        "notify audit log",
        true,
        format!(
            "{} (local, always written)",
            dir.path(notify::AUDIT_FILE).display()
        ),
    )];
    if let Some(program) = config.command.first() {
        let found = match program.contains('/') {
            true => std::path::Path::new(program)
                .is_file()
                .then(|| program.into()),
            false => platform::which(program),
        };
        checks.push(match found {
            Some(path) => check(
                "notify command",
                true,
                format!("{} found; settings valid, nothing sent", path.display()),
            ),
            None => check(
                "notify command",
                false,
                format!("{program} is not found (not a file, not on PATH)"),
            ),
        });
    }
    for (i, hook) in config.webhooks.iter().enumerate() {
        let name = match hook.name.is_empty() {
            true => format!("#{}", i + 1),
            false => hook.name.clone(),
        };
        let label = format!("notify webhook {name}");
        let missing_auth = !hook.authorization_env.is_empty() && hook.authorization().is_none();
        checks.push(match missing_auth {
            true => check(
                label,
                false,
                format!(
                    "its authorization variable {} is not set here",
                    hook.authorization_env
                ),
            ),
            false => check(
                label,
                true,
                format!("{:?} webhook settings valid, nothing sent", hook.kind),
            ),
        });
    }
    checks
}
