//! The one way the host runs a command on its own behalf: the loop's
//! `--success-check`, the goal owner's executable checks, Lake for the
//! formal policy. Each goes through the driver's [`TurnRunner`] (its own
//! process group, killed with everything it started at its timeout or
//! when the host is told to stop), its output bounded into a private log
//! under `driver_logs/`, its process recorded there while it runs so a
//! restarted driver can tell whether it still does. What it means (a
//! claim verified, a check passed, a typecheck) is the caller's.

use super::runner::{Output, Process, ProcessOutcome, Record, TurnRunner};
use crate::loop_dir::{LoopDir, DRIVER_LOGS};
use crate::platform;
use anyhow::{Context as _, Result};
use loopx_core::driver::capture::OutputCap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// A command the host runs: a program and its argv (no shell unless the
/// program is one), where, with which variables, for how long.
pub struct HostCommand {
    pub program: OsString,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Variables set on top of the host's environment.
    pub env: Vec<(&'static str, OsString)>,
    /// Variables it must not inherit.
    pub env_removed: &'static [&'static str],
    pub timeout: Duration,
    /// The most of its output its log keeps (head and tail).
    pub cap: OutputCap,
    /// Names the run: its log is `driver_logs/<label>-<fresh>.<kind>.log`.
    pub label: String,
    pub kind: &'static str,
}

/// What came of a host command: the runner's outcome (`Err`: it could not
/// be started, and nothing ran) and its log, relative to the loop
/// directory (created either way).
pub struct HostRun {
    pub outcome: Result<ProcessOutcome>,
    pub log: String,
}

/// Run `command` through `runner`. `Err` only when its log or record
/// cannot be made, before anything starts.
pub fn run(dir: &LoopDir, runner: &dyn TurnRunner, command: HostCommand) -> Result<HostRun> {
    let logs = super::log_dir(dir)?;
    let name = crate::operation::fresh_name(&command.label);
    let log = format!("{DRIVER_LOGS}/{name}.{}.log", command.kind);
    let file = platform::create_private(&dir.path(&log))
        .with_context(|| format!("cannot create {log}"))?;
    let outcome = runner.run(Process {
        program: command.program,
        args: command.args,
        cwd: command.cwd,
        env: command.env,
        env_removed: command.env_removed,
        stdin: None,
        output: Output::Log {
            file,
            cap: command.cap,
        },
        timeout: command.timeout,
        record: Record {
            logs: logs.clone(),
            name: name.clone(),
        },
        confinement: None,
    });
    let _ = std::fs::remove_file(super::record_path(&logs, &name));
    Ok(HostRun { outcome, log })
}
