//! One agent or check process, bounded: started in its own process group,
//! held before exec until its identity is on disk, killed with everything
//! it detached when it ends or runs out of time.
//!
//! Not here: what the process is for or what its output means (the turn
//! and `loopx_core::driver::classify`).

use anyhow::{Context as _, Result};
use loopx_app::driver::{agent_identity, record_path, write_record};
use loopx_app::platform;
use loopx_store::failpoint;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One turn's process and what came of it.
pub struct Turn {
    pub exit_status: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
}

pub fn spawn_and_wait(
    mut command: Command,
    stdin: Option<String>,
    timeout: Duration,
    logs: &Path,
    dispatch_id: &str,
) -> Result<Turn> {
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
    Ok(Turn {
        exit_status: status.code(),
        timed_out,
        elapsed: started.elapsed(),
    })
}
