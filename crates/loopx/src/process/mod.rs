//! The plain turn runner: each agent, check or reviewer process started in
//! its own process group, held before exec until its identity is on disk,
//! and ended with everything it started (its group, and whatever it
//! detached, which the subreaper re-parents here) when it exits, runs out
//! of time, or the driver is told to stop.
//!
//! A stop signal (SIGTERM, SIGINT) asks the turn's group to end with
//! SIGTERM, gives it [`GRACE`] to do so, then kills it; a second signal
//! kills at once. No process is started once a stop signal has come.
//!
//! Its output always comes through a pipe the runner reads: a reviewer's
//! stdout is kept up to a limit, a turn's stdout and stderr go to its log
//! within the turn's cap (`loopx_app::driver::capture::BoundedLog`), so a
//! flooding process is never blocked and never fills the disk. (A process
//! that outlives a SIGKILLed driver therefore gets a broken pipe when it
//! next writes.)
//!
//! Not here: what the process is for or what its output means (the turn
//! protocol in `loopx_app::driver`, the panel, the core's classifier).

use anyhow::{bail, Context as _, Result};
use loopx_app::driver::capture::{BoundedLog, Lines};
use loopx_app::driver::runner::{Output, Process, ProcessOutcome, TurnRunner, Watch};
use loopx_app::driver::{agent_identity, record_path, write_record};
use loopx_app::platform;
use loopx_store::failpoint;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs each process directly on this host, unconfined.
pub struct Plain;

impl TurnRunner for Plain {
    fn run_watched(&self, process: Process, watch: &mut dyn Watch) -> Result<ProcessOutcome> {
        run_bounded(process, watch)
    }
}

/// How long a turn told to stop has to end by itself after SIGTERM,
/// before it is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// How often a running process's clock and the stop signal are looked at
/// (the platform's stop poll). An exit is seen at once, whatever this is.
const WATCH: Duration = platform::STOP_POLL;

/// How long the capture may take to drain once the process group is
/// gone: only a writer that escaped both the group and the subreaper
/// could keep the pipe open longer, and it is not waited for.
const DRAIN: Duration = Duration::from_secs(2);

/// Where the runner puts what a process prints.
enum Sink {
    /// The head of its stdout, and whether there was more.
    Head {
        bytes: Vec<u8>,
        limit: usize,
        truncated: bool,
    },
    /// Its log; `None` once finished (a writer that escaped the sweep is
    /// not written any more). The lines, for the watch.
    Log(Option<BoundedLog>, Lines),
}

impl Sink {
    fn take(&mut self, chunk: &[u8]) {
        match self {
            Sink::Head {
                bytes,
                limit,
                truncated,
            } => {
                let room = limit.saturating_sub(bytes.len());
                bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
                *truncated |= chunk.len() > room;
            }
            // A log that cannot be written (a full disk) loses output, not
            // the turn: the process is still read, never blocked.
            Sink::Log(log, lines) => {
                if let Some(log) = log {
                    let _ = log.write(chunk);
                    lines.push(chunk);
                }
            }
        }
    }
}

fn run_bounded(process: Process, watch: &mut dyn Watch) -> Result<ProcessOutcome> {
    if let Some(signal) = platform::stop_signal() {
        bail!(
            "not started: the driver was told to stop ({})",
            signal.name()
        );
    }
    let started = Instant::now();
    // Contained: the scope's prefix, the gate (this binary), bubblewrap,
    // then the program; its POSIX limits are set before the first exec
    // and inherited by all of them.
    let mut command = match &process.confinement {
        None => {
            let mut command = Command::new(&process.program);
            command.args(&process.args);
            command
        }
        Some(confinement) => {
            let gate = std::env::current_exe()
                .context("cannot find the loopx binary to gate a contained process")?;
            let line = confinement.command_line(&gate, &process.program, &process.args);
            let mut command = Command::new(&line[0]);
            command.args(&line[1..]);
            platform::limit_before_exec(&mut command, &confinement.limits, confinement.cpu_seconds);
            command
        }
    };
    command.current_dir(&process.cwd);
    for (name, value) in &process.env {
        command.env(name, value);
    }
    for name in process.env_removed {
        command.env_remove(name);
    }
    let (sink, log_pipe) = match process.output {
        Output::Log { file, cap } => {
            // One pipe for both, so their lines interleave as in a file.
            let (reader, writer) = std::io::pipe()?;
            command.stdout(writer.try_clone()?).stderr(writer);
            let sink = Sink::Log(Some(BoundedLog::new(file, cap)), Lines::default());
            (sink, Some(reader))
        }
        Output::Capture { limit } => {
            command.stdout(Stdio::piped()).stderr(Stdio::null());
            let sink = Sink::Head {
                bytes: Vec::new(),
                limit,
                truncated: false,
            };
            (sink, None)
        }
    };
    // Whatever the process detaches (setsid, double forks) is re-parented
    // here rather than to init, so the sweep below finds it.
    platform::become_subreaper();
    platform::in_new_group(&mut command);
    command.stdin(if process.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    // The process is held before exec until its process group is on disk:
    // a driver that dies at any point leaves either a record a restart can
    // check, or a process that never ran.
    let logs = process.record.logs.clone();
    let name = process.record.name.clone();
    let confinement = process.confinement;
    // Joined to its scope while still held, so nothing of it runs outside;
    // the gate checks from inside that it got there.
    let joiner = confinement.as_ref().map(|c| c.scope.joiner());
    let mut child = platform::spawn_turn(&mut command, move |pgid| {
        failpoint::reached("drive.agent_held");
        write_record(&logs, &name, &agent_identity(pgid))?;
        match &joiner {
            Some(joiner) => joiner.join(pgid),
            None => Ok(()),
        }
    })
    .with_context(|| {
        format!(
            "cannot start {} with its pid recorded in {}",
            process.program.to_string_lossy(),
            record_path(&process.record.logs, &process.record.name).display()
        )
    })?;
    // The command holds the write end of the log's pipe: closed here, so
    // the pipe ends when the process and its children are gone.
    drop(command);
    let pgid = child.id();
    // Whether the prompt reached the process whole: a process that stops
    // reading its stdin has not seen all it was asked.
    let delivery = match (process.stdin, child.stdin.take()) {
        (Some(prompt), Some(mut pipe)) => Some(std::thread::spawn(move || {
            pipe.write_all(prompt.as_bytes()).is_ok()
        })),
        _ => None,
    };
    let pipe: Option<Box<dyn std::io::Read + Send>> = match (log_pipe, child.stdout.take()) {
        (Some(reader), _) => Some(Box::new(reader)),
        (None, Some(stdout)) => Some(Box::new(stdout)),
        (None, None) => None,
    };
    let shared = Arc::new(Mutex::new(sink));
    let drained = pipe.map(|pipe| {
        let (done, drained) = std::sync::mpsc::channel();
        let writer = Arc::clone(&shared);
        std::thread::spawn(move || {
            read_into(pipe, &writer);
            let _ = done.send(());
        });
        drained
    });
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait());
    });
    let deadline = started + process.timeout;
    let mut timed_out = false;
    let mut cut_short = None;
    // The stop signal that reached the driver, and when the group was asked
    // to end.
    let mut stopping = None;
    let status = loop {
        match receive.recv_timeout(WATCH) {
            Ok(status) => break status?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => bail!("the process's waiter vanished"),
        }
        if cut_short.is_none() {
            cut_short = watched(&shared, watch);
            if cut_short.is_some() {
                platform::kill_group(pgid);
            }
        }
        if stopping.is_none() {
            if let Some(signal) = platform::stop_signal() {
                platform::terminate_group(pgid);
                stopping = Some((signal, Instant::now()));
            }
        }
        if let Some((_, asked)) = stopping {
            if platform::stop_is_urgent() || asked.elapsed() >= GRACE {
                platform::kill_group(pgid);
            }
        }
        if !timed_out && stopping.is_none() && Instant::now() >= deadline {
            platform::kill_group(pgid);
            timed_out = true;
        }
    };
    // Told to stop: what is left of the group gets the rest of its grace
    // to end by itself, as the leader had.
    if let Some((_, asked)) = stopping {
        while platform::group_alive(pgid) && !platform::stop_is_urgent() && asked.elapsed() < GRACE
        {
            std::thread::sleep(WATCH);
        }
    }
    // A process is bounded: nothing it started outlives it, in its process
    // group or detached from it.
    platform::kill_group(pgid);
    platform::sweep_after_turn(pgid);
    // Whatever left the group inside the scope (setsid) goes with it.
    drop(confinement);
    let cleaned_up = !platform::group_alive(pgid);
    if let Some(drained) = drained {
        let _ = drained.recv_timeout(DRAIN);
    }
    let mut outcome = ProcessOutcome {
        exit_status: status.code(),
        timed_out,
        stopped_by: stopping.map(|(signal, _)| signal),
        elapsed: started.elapsed(),
        // A writer still blocked on a process that is gone never finishes:
        // a delivery that has not finished by now did not happen.
        prompt_delivered: delivery
            .is_none_or(|thread| thread.is_finished() && thread.join().unwrap_or(false)),
        cleaned_up,
        cut_short,
        ..ProcessOutcome::default()
    };
    let mut held = shared.lock().unwrap_or_else(|p| p.into_inner());
    match &mut *held {
        Sink::Head {
            bytes, truncated, ..
        } => {
            outcome.captured = std::mem::take(bytes);
            outcome.truncated = *truncated;
        }
        Sink::Log(log, _) => {
            if let Some(log) = log.take() {
                outcome.dropped = log.finish().context("cannot finish the turn's log")?;
                outcome.truncated = outcome.dropped > 0;
            }
        }
    }
    Ok(outcome)
}

/// The lines read since the last look, through `watch`: why it ends the
/// process, if it does.
fn watched(
    sink: &Mutex<Sink>,
    watch: &mut dyn Watch,
) -> Option<loopx_core::driver::stream::CutShort> {
    // Taken under the lock, read outside it: the watch may write to the
    // store, and the reader must never wait on that.
    let lines = match &mut *sink.lock().unwrap_or_else(|p| p.into_inner()) {
        Sink::Log(_, lines) => lines.take(),
        Sink::Head { .. } => return None,
    };
    lines.iter().find_map(|line| watch.line(line))
}

/// Read `pipe` to its end into `sink`.
fn read_into(mut pipe: impl std::io::Read, sink: &Mutex<Sink>) {
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(&buffer[..n]);
    }
}
