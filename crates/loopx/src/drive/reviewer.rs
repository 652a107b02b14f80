//! A panel reviewer as a real child process: the runner
//! `loopx_app::panel::run` calls for each attempt, shared by `loopx panel`
//! and `drive --panel`.
//!
//! Owns the reviewer's process hygiene beyond what every bounded process
//! gets ([`super::agent`]): an environment without the loop's location or
//! any consent variable (a reviewer answers from its brief; it has no
//! business reaching the loop), stderr discarded, stdout captured up to
//! [`loopx_app::panel::OUTPUT_BYTES`]. Does not own who is invited, the
//! brief, or what the answer means (`loopx_app::panel`, `loopx_core`).

use super::agent::spawn_capturing;
use anyhow::Result;
use loopx_app::driver;
use loopx_app::loop_dir::STORE_ENV;
use loopx_app::panel::{Launch, PanelView, Prepared, Ran, OUTPUT_BYTES};
use loopx_app::AppError;
use std::process::{Command, Stdio};

/// Variables a reviewer never inherits: where the loop is, and the
/// consents that let state leave the host.
const WITHHELD: &[&str] = &[
    "LOOPX_DIR",
    STORE_ENV,
    "LOOPX_AGENT_ID",
    "LOOPX_DISPATCH_ID",
    loopx_core::panel::EGRESS_ENV,
    loopx_app::notify::EGRESS_ENV,
];

/// Run one reviewer to its end or its timeout.
pub fn run_reviewer(logs: &std::path::Path, launch: &Launch) -> Result<Ran> {
    let mut command = Command::new(&launch.binary);
    command
        .args(&launch.args)
        .current_dir(&launch.cwd)
        .env("AUTOLOOP_PANEL_REVIEWER", "1")
        .stderr(Stdio::null());
    for name in WITHHELD {
        command.env_remove(name);
    }
    let outcome = spawn_capturing(command, launch.timeout, logs, &launch.name, OUTPUT_BYTES);
    let _ = std::fs::remove_file(driver::record_path(logs, &launch.name));
    let (turn, captured) = outcome?;
    Ok(Ran {
        exit_status: turn.exit_status,
        timed_out: turn.timed_out,
        elapsed: turn.elapsed,
        stdout: captured.bytes,
        truncated: captured.truncated,
    })
}

/// A prepared panel run with real reviewer processes, each announced on
/// stderr as it starts.
pub fn review(prepared: Prepared, cli_timeout: Option<u64>) -> Result<PanelView, AppError> {
    let logs = driver::log_dir(prepared.dir())?;
    let mut runner = |launch: &Launch| {
        eprintln!(
            "loopx panel: reviewer {} started (timeout {}s)",
            launch.provider,
            launch.timeout.as_secs()
        );
        run_reviewer(&logs, launch)
    };
    prepared.run(cli_timeout, &mut runner)
}
