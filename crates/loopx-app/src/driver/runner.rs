//! The seam between the turn protocol and the processes it runs: a
//! [`TurnRunner`] starts one process, watches it, limits it and reaps it,
//! and reports what it saw. It decides nothing and commits nothing; the
//! protocol above it (`super::turn`, the panel, the success check) does.
//!
//! How a process runs varies (plain, contained, supervised); what is asked
//! of it does not, and is written here once: [`Process`] in,
//! [`ProcessOutcome`] out. The binary provides the real implementation;
//! tests may provide others. A worker's turn (`drive --workers`) is not a
//! runner of its own: its worktree changes what the turn is (its journal,
//! its agent, its directory, what counts as done), which is the protocol's
//! business (`super::turn::WorkerTurn`), not how its process runs; it runs
//! through whichever runner the run has, contained or not.

use loopx_core::driver::capture::OutputCap;
use loopx_core::driver::session::StopSignal;
use loopx_core::driver::stream::CutShort;
use std::ffi::OsString;
use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;

/// One process to run to its end, its timeout, or the driver's stop.
pub struct Process {
    pub program: OsString,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Variables set on top of the driver's environment.
    pub env: Vec<(&'static str, OsString)>,
    /// Variables the process must not inherit.
    pub env_removed: &'static [&'static str],
    /// Written to its stdin, then closed; `None`: stdin is `/dev/null`.
    pub stdin: Option<String>,
    pub output: Output,
    pub timeout: Duration,
    /// Where its identity is recorded before it may run (the driver's log
    /// directory) and under which name (the dispatch id), so a restarted
    /// driver can tell whether it still runs.
    pub record: Record,
    /// Under trusted-local: its scope, limits and sandbox. `None`: it
    /// runs unconfined (a process group and the timeout).
    pub confinement: Option<crate::containment::Confinement>,
}

/// Where a process's output goes.
pub enum Output {
    /// stdout and stderr both written to this file (a turn's log), at
    /// most `cap` of it: past the cap its head and tail are kept and a line
    /// says how much was dropped between (see [`super::capture::BoundedLog`]).
    /// The output goes through the runner, never straight to the file, so
    /// a flood neither blocks the process nor fills the disk.
    Log { file: File, cap: OutputCap },
    /// stdout kept up to `limit` bytes (the rest read and dropped, so a
    /// flood neither blocks the process nor grows without bound); stderr
    /// discarded.
    Capture { limit: usize },
}

/// The durable record of a running process: `<logs>/<name>.pid`.
pub struct Record {
    pub logs: PathBuf,
    pub name: String,
}

/// What came of a process. Nothing it started outlives the run that
/// reports this.
#[derive(Debug, Clone, Default)]
pub struct ProcessOutcome {
    pub exit_status: Option<i32>,
    pub timed_out: bool,
    /// The stop signal the driver received while the process ran, which
    /// ended it.
    pub stopped_by: Option<StopSignal>,
    pub elapsed: Duration,
    /// With [`Output::Capture`]: the head of its stdout.
    pub captured: Vec<u8>,
    /// Whether it wrote more than was kept.
    pub truncated: bool,
    /// With [`Output::Log`]: how many bytes were dropped from the middle
    /// of the log.
    pub dropped: u64,
    /// Its stdin, if it had one, was written whole.
    pub prompt_delivered: bool,
    /// Nothing it started was alive after the runner's sweep.
    pub cleaned_up: bool,
    /// The watch ended it before it exited, and why.
    pub cut_short: Option<CutShort>,
}

/// Reads a process's output line by line while it runs (a turn's
/// structured events), on the runner's own thread, and may have it ended.
pub trait Watch {
    /// One whole line of its output (without the newline), in order; a
    /// line longer than the runner reads whole is not passed. `Some`: end
    /// the process now (its whole group), for this reason.
    fn line(&mut self, line: &str) -> Option<CutShort>;
}

/// A watch that reads nothing and never ends a process.
pub struct Unwatched;

impl Watch for Unwatched {
    fn line(&mut self, _line: &str) -> Option<CutShort> {
        None
    }
}

/// How a turn's process is started, watched, limited and reaped.
pub trait TurnRunner {
    /// Run `process` until it exits, its timeout passes, or the driver is
    /// told to stop (SIGTERM, SIGINT); end everything it started either
    /// way. `Err`: it could not be started, and nothing runs.
    fn run(&self, process: Process) -> anyhow::Result<ProcessOutcome> {
        self.run_watched(process, &mut Unwatched)
    }

    /// [`TurnRunner::run`], with `watch` reading its output (a turn's log,
    /// [`Output::Log`]) as it arrives: a line the watch says ends the
    /// process ends its whole group at once, reported as
    /// [`ProcessOutcome::cut_short`].
    fn run_watched(
        &self,
        process: Process,
        watch: &mut dyn Watch,
    ) -> anyhow::Result<ProcessOutcome>;
}
