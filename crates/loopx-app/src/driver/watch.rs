//! The watch on a running turn ([`TurnWatch`]): each line the agent's CLI
//! prints goes through the core's [`StreamWatch`] as it arrives; a retry
//! it shows is recorded in the driver's state (what `status`, its
//! `--json` and the dashboard read) and said, once per retry event; a
//! retry past the loop's policy ends the turn (the runner kills its
//! group) with the class the core gave it.
//!
//! Not here: what a line means or when a turn is ended (the core,
//! `loopx_core::driver::stream`), reading the pipe (the runner).

use super::options::Progress;
use super::runner::Watch;
use crate::clock;
use crate::loop_dir::LoopDir;
use loopx_core::driver::stream::{CutShort, StreamWatch};
use loopx_core::driver::TurnRetry;

pub struct TurnWatch<'a> {
    pub dir: &'a LoopDir,
    pub progress: &'a dyn Progress,
    pub dispatch_id: &'a str,
    /// The turn journal the dispatch is open in.
    pub stream: &'a str,
    /// How progress names the turn (`iteration 3 [claude]`).
    pub label: String,
    pub watch: StreamWatch,
    /// Retries recorded so far (each write's own operation id).
    pub recorded: u64,
}

impl Watch for TurnWatch<'_> {
    fn line(&mut self, line: &str) -> Option<CutShort> {
        let watched = self.watch.line(line);
        if let Some(retry) = watched.retry {
            self.progress
                .say(&format!("{}: its CLI is on {}", self.label, retry.words()));
            self.recorded += 1;
            let retry = TurnRetry {
                dispatch_id: self.dispatch_id.to_owned(),
                retry,
                at: clock::now(),
            };
            // What status shows is worth a write, not the turn: a store
            // that cannot take it now is said, and the turn goes on.
            if let Err(error) = super::record_retry(self.dir, self.stream, retry, self.recorded) {
                self.progress.say(&format!(
                    "warning: {}: the CLI's retry could not be recorded for status ({error:#})",
                    self.label
                ));
            }
        }
        if let Some(cut) = &watched.cut {
            self.progress
                .say(&format!("{}: {}", self.label, cut.reason));
        }
        watched.cut
    }
}
