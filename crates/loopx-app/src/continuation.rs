//! Whether and how the next turn runs: `quota should-run` and `task-body`,
//! each computed from the store alone (the ledger, its stop verdict, the
//! operator's sentinels and the goal frontier). The decision itself is the
//! core's (`loopx_core::goal::continuation`, `loopx_core::goal::task_body`);
//! this module reads what it needs and hands it over.

use crate::clock;
use crate::goal::GoalReading;
use crate::loop_dir::{LoopDir, Reading};
use anyhow::Result;
use loopx_core::digest::Digest;
use loopx_core::goal::continuation::{self, ShouldRun};
use loopx_core::goal::{self, Actor};
use loopx_core::ledger::arbiter::{arbitrate, Verdict};
use serde::Serialize;

/// The continuation decision for one actor, with every read it was made
/// from (so a caller that shows them never reads twice).
pub struct NextTurn {
    pub reading: Reading,
    pub goal: GoalReading,
    pub verdict: Verdict,
    pub should_run: ShouldRun,
}

/// The next turn's prompt, with its size and digest (a host compares the
/// digest to know the prompt did not change).
#[derive(Debug, Serialize)]
pub struct TaskBody {
    pub bytes: usize,
    pub digest: Digest,
    pub body: String,
}

impl LoopDir {
    /// The continuation decision for `actor` on goal `goal_id`, from the
    /// store, with everything it was computed from.
    pub fn next_turn(&self, goal_id: &str, actor: &Actor) -> Result<NextTurn> {
        let reading = self.read()?;
        let goal = self.goal(goal_id)?;
        let now = clock::now();
        let sentinels = self.sentinels();
        let verdict = arbitrate(&reading.ledger, sentinels, now);
        let should_run =
            continuation::should_run(&reading.ledger, &verdict, sentinels, &goal.goal, actor, now);
        Ok(NextTurn {
            reading,
            goal,
            verdict,
            should_run,
        })
    }

    /// The next turn's prompt, rendered from state: byte-identical while
    /// the frontier does not change.
    pub fn task_body(&self, goal_id: &str, actor: &Actor) -> Result<String> {
        let NextTurn {
            reading,
            goal,
            should_run,
            ..
        } = self.next_turn(goal_id, actor)?;
        Ok(goal::task_body::render(
            &self.display(),
            &reading.ledger,
            &goal.goal,
            &should_run,
        ))
    }
}

/// `quota should-run`: should another turn run now, for `actor`? Read-only.
pub fn should_run(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<ShouldRun> {
    Ok(dir.next_turn(goal_id, actor)?.should_run)
}

/// `task-body`: the next turn's prompt for `actor`. Read-only.
pub fn task_body(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<TaskBody> {
    let body = dir.task_body(goal_id, actor)?;
    Ok(TaskBody {
        bytes: body.len(),
        digest: Digest::of_bytes(body.as_bytes()),
        body,
    })
}
