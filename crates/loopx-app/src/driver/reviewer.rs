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
use crate::containment::Containment;
use crate::panel::{Launch, PanelView, Prepared, Ran, OUTPUT_BYTES};
use crate::AppError;
use anyhow::Result;
use std::path::Path;

/// Run one reviewer to its end or its timeout, its process record in
/// `logs`, contained as `containment` says (under trusted-local: the
/// pinned binary and model, checked again now, in its own scope).
pub fn run_reviewer(
    runner: &dyn TurnRunner,
    logs: &Path,
    launch: &Launch,
    containment: &Containment,
) -> Result<Ran> {
    let (program, args, confinement) = match containment {
        Containment::Unconfined => (launch.binary.clone().into(), launch.args.clone(), None),
        Containment::TrustedLocal(contained) => {
            let (attested, confinement) =
                contained.ready(&launch.provider, &launch.name, launch.timeout)?;
            // A reviewer answers from its brief alone: no tools.
            let prompt_only = loopx_core::containment::prompt_only_flags(&launch.provider);
            let (program, args) = attested.command(launch.args.clone(), prompt_only);
            (program, args, Some(confinement))
        }
    };
    let ran = runner.run(Process {
        program,
        args,
        cwd: launch.cwd.clone(),
        // Under trusted-local an endpoint setting was refused before any
        // reviewer started, so only an unconfined one is pointed.
        env: std::iter::once((env::PANEL_REVIEWER, "1".into()))
            .chain(launch.env.iter().map(|(name, value)| (*name, value.into())))
            .collect(),
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
        confinement,
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

/// A prepared panel run, each reviewer through `runner` under the
/// transport it was prepared with, and announced through `announce` as it
/// starts.
pub fn review(
    mut prepared: Prepared,
    cli_timeout: Option<u64>,
    runner: &dyn TurnRunner,
    announce: &dyn Fn(&str),
) -> Result<PanelView, AppError> {
    let logs = super::log_dir(prepared.dir())?;
    // The reviewers' containment outlives the run that consumes `prepared`.
    let containment = std::mem::replace(&mut prepared.containment, Containment::Unconfined);
    let mut each = |launch: &Launch| {
        announce(&format!(
            "reviewer {} started (timeout {}s)",
            launch.provider,
            launch.timeout.as_secs()
        ));
        run_reviewer(runner, &logs, launch, &containment)
    };
    prepared.run(cli_timeout, &mut each)
}
