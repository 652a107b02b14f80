//! A panel reviewer run through a [`TurnRunner`]: what
//! [`crate::panel`] asks of each attempt, for `loopx panel` and for the
//! driver's review phases alike.
//!
//! Owns the reviewer's process hygiene beyond what every process a runner
//! starts gets: an environment without the loop's location or any consent
//! variable ([`env::WITHHELD_FROM_REVIEWERS`]), stderr discarded, stdout
//! captured up to [`OUTPUT_BYTES`]. Does not own who is invited, the brief,
//! or what the answer means (`crate::panel`, `loopx_core::panel`).

use super::env;
use super::runner::{Output, Process, Record, TurnRunner};
use crate::panel::{Launch, PanelView, Prepared, Ran, OUTPUT_BYTES};
use crate::AppError;
use anyhow::Result;
use std::path::Path;

/// Run one reviewer to its end or its timeout, its process record in
/// `logs`.
pub fn run_reviewer(runner: &dyn TurnRunner, logs: &Path, launch: &Launch) -> Result<Ran> {
    let ran = runner.run(Process {
        program: launch.binary.clone().into(),
        args: launch.args.clone(),
        cwd: launch.cwd.clone(),
        env: vec![(env::PANEL_REVIEWER, "1".into())],
        env_removed: env::WITHHELD_FROM_REVIEWERS,
        stdin: None,
        output: Output::Capture {
            limit: OUTPUT_BYTES,
        },
        timeout: launch.timeout,
        record: Record {
            logs: logs.to_path_buf(),
            name: launch.name.clone(),
        },
        confinement: None,
    });
    let _ = std::fs::remove_file(super::record_path(logs, &launch.name));
    let ran = ran?;
    Ok(Ran {
        exit_status: ran.exit_status,
        timed_out: ran.timed_out,
        elapsed: ran.elapsed,
        stdout: ran.captured,
        truncated: ran.truncated,
    })
}

/// A prepared panel run, each reviewer through `runner` and announced
/// through `announce` as it starts.
pub fn review(
    prepared: Prepared,
    cli_timeout: Option<u64>,
    runner: &dyn TurnRunner,
    announce: &dyn Fn(&str),
) -> Result<PanelView, AppError> {
    let logs = super::log_dir(prepared.dir())?;
    let mut each = |launch: &Launch| {
        announce(&format!(
            "reviewer {} started (timeout {}s)",
            launch.provider,
            launch.timeout.as_secs()
        ));
        run_reviewer(runner, &logs, launch)
    };
    prepared.run(cli_timeout, &mut each)
}
