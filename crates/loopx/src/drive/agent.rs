//! One agent, check or reviewer process, bounded: started in its own
//! process group, held before exec until its identity is on disk, killed
//! with everything it detached when it ends or runs out of time, and (for
//! a reviewer) its stdout captured up to a limit.
//!
//! Not here: what the process is for or what its output means (the turn,
//! `loopx_core::driver::classify`, the panel).

use anyhow::{Context as _, Result};
use loopx_app::driver::{agent_identity, record_path, write_record};
use loopx_app::platform;
use loopx_store::failpoint;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One turn's process and what came of it.
pub struct Turn {
    pub exit_status: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// The head of a process's stdout, and whether there was more.
#[derive(Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// How long the capture may take to drain once the process group is
/// gone: only a writer that escaped both the group and the subreaper
/// could keep the pipe open longer, and it is not waited for.
const DRAIN: Duration = Duration::from_secs(2);

pub fn spawn_and_wait(
    command: Command,
    stdin: Option<String>,
    timeout: Duration,
    logs: &Path,
    dispatch_id: &str,
) -> Result<Turn> {
    Ok(run_bounded(command, stdin, timeout, logs, dispatch_id, None)?.0)
}

/// [`spawn_and_wait`] with stdout piped to the host, which keeps its first
/// `limit` bytes and reads (and drops) the rest, so a flood neither
/// blocks the process nor grows without bound.
pub fn spawn_capturing(
    command: Command,
    timeout: Duration,
    logs: &Path,
    dispatch_id: &str,
    limit: usize,
) -> Result<(Turn, Captured)> {
    let (turn, captured) = run_bounded(command, None, timeout, logs, dispatch_id, Some(limit))?;
    Ok((turn, captured.unwrap_or_default()))
}

fn run_bounded(
    mut command: Command,
    stdin: Option<String>,
    timeout: Duration,
    logs: &Path,
    dispatch_id: &str,
    capture: Option<usize>,
) -> Result<(Turn, Option<Captured>)> {
    let started = Instant::now();
    // Whatever the turn detaches (setsid, double forks) is re-parented
    // here rather than to init, so the sweep below finds it.
    platform::become_subreaper();
    platform::in_new_group(&mut command);
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    if capture.is_some() {
        command.stdout(Stdio::piped());
    }
    // The agent is held before exec until its process group is on disk: a
    // driver that dies at any point leaves either a record a restart can
    // check, or an agent that never ran.
    let record_logs = logs.to_path_buf();
    let record_id = dispatch_id.to_owned();
    let mut child = platform::spawn_recorded(&mut command, move |pgid| {
        failpoint::reached("drive.agent_held");
        write_record(&record_logs, &record_id, &agent_identity(pgid))
    })
    .with_context(|| {
        format!(
            "cannot start the agent with its pid recorded in {}",
            record_path(logs, dispatch_id).display()
        )
    })?;
    let pgid = child.id();
    if let (Some(prompt), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = pipe.write_all(prompt.as_bytes());
        });
    }
    let capture = capture.zip(child.stdout.take()).map(|(limit, pipe)| {
        let shared = Arc::new(Mutex::new(Captured::default()));
        let (done, drained) = std::sync::mpsc::channel();
        let writer = Arc::clone(&shared);
        std::thread::spawn(move || {
            read_head(pipe, limit, &writer);
            let _ = done.send(());
        });
        (shared, drained)
    });
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait());
    });
    let (status, timed_out) = match receive.recv_timeout(timeout) {
        Ok(status) => (status?, false),
        Err(_) => {
            platform::kill_group(pgid);
            (
                receive.recv().context("the agent's waiter vanished")??,
                true,
            )
        }
    };
    // A turn is bounded: nothing it started outlives it, in its process
    // group or detached from it.
    platform::kill_group(pgid);
    platform::kill_adopted(&[]);
    let captured = capture.map(|(shared, drained)| {
        let _ = drained.recv_timeout(DRAIN);
        let mut held = shared.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *held)
    });
    Ok((
        Turn {
            exit_status: status.code(),
            timed_out,
            elapsed: started.elapsed(),
        },
        captured,
    ))
}

/// Keep the first `limit` bytes of `pipe` in `into`; read the rest to its
/// end and drop it.
fn read_head(mut pipe: impl std::io::Read, limit: usize, into: &Mutex<Captured>) {
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let mut held = into.lock().unwrap_or_else(|p| p.into_inner());
        let room = limit.saturating_sub(held.bytes.len());
        held.bytes.extend_from_slice(&buffer[..n.min(room)]);
        if n > room {
            held.truncated = true;
        }
    }
}
