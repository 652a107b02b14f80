//! `request-stop`: the operator ends a loop by hand. It writes the
//! `STOP_REQUESTED` sentinel, which the `done` arbiter reads at its next
//! check: no further turn starts, and a running `loopx drive` ends after
//! settling the turn it is in. This is not stopping a driver process
//! (SIGTERM or Ctrl-C does that, and leaves the loop open to drive again);
//! the sentinel ends the loop itself until it is removed.
//!
//! Not here: the arbiter's rule (`loopx_core::ledger::arbiter`) and where
//! the sentinels are read (`crate::loop_dir`).

use crate::fsutil;
use crate::loop_dir::{LoopDir, STOP_REQUESTED};
use anyhow::Result;
use loopx_core::text::{check, limits};
use serde::Serialize;

/// What `request-stop` did.
#[derive(Debug, Serialize)]
pub struct StopRequested {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    /// The sentinel's path.
    pub sentinel: String,
    /// The reason written into the sentinel (may be empty).
    pub reason: String,
    /// The sentinel was already there: it was left as it was.
    pub already_requested: bool,
}

impl StopRequested {
    /// The words for people: what happens next and how to undo it.
    pub fn text(&self) -> String {
        let head = if self.already_requested {
            format!(
                "a stop was already requested ({} exists; left as it was)",
                self.sentinel
            )
        } else {
            format!("stop requested: wrote {}", self.sentinel)
        };
        format!(
            "{head}\nthe loop ends at the next check: no new turn starts, and a running `loopx drive` exits after settling its current turn.\nto resume instead: rm {}\n",
            self.sentinel
        )
    }
}

/// Write the `STOP_REQUESTED` sentinel of the loop in `dir`, holding
/// `reason`. A reason that is not one clean line is refused before
/// anything is written; a sentinel already there is kept as it is.
pub fn request_stop(dir: &LoopDir, reason: &str) -> Result<StopRequested> {
    check("--reason", reason, limits::LINE)
        .map_err(|problem| crate::AppError::refused(problem.to_string()))?;
    let path = dir.path(STOP_REQUESTED);
    let already_requested = dir.sentinels().stop_requested;
    if !already_requested {
        let mut text = reason.trim().to_owned();
        if !text.is_empty() {
            text.push('\n');
        }
        fsutil::write_durable(&path, text.as_bytes())?;
    }
    Ok(StopRequested {
        status: "ok",
        action: "request-stop",
        dir: dir.display(),
        sentinel: path.display().to_string(),
        reason: reason.trim().to_owned(),
        already_requested,
    })
}
