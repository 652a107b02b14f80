//! Whether and how the next turn runs: `quota should-run`, `task-body`, and
//! the work context an agent reads inside a turn (both from one read), each
//! computed from the store alone (the ledger, its stop verdict, the
//! operator's sentinels and the goal frontier). The decision itself is the
//! core's (`loopx_core::goal::continuation`, `loopx_core::goal::task_body`);
//! this module reads what it needs and hands it over.

use crate::clock;
use crate::goal::GoalReading;
use crate::loop_dir::{LoopDir, Reading};
use anyhow::Result;
use loopx_core::digest::Digest;
use loopx_core::formal::Layer as FormalLayer;
use loopx_core::goal::continuation::{self, SelectedTodo, ShouldRun};
use loopx_core::goal::task_body::Policies;
use loopx_core::goal::{self, Actor};
use loopx_core::ledger::arbiter::{arbitrate, Verdict};
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::panel::Switch;
use serde::Serialize;

/// The continuation decision for one actor, with every read it was made
/// from (so a caller that shows them never reads twice).
pub struct NextTurn {
    pub reading: Reading,
    /// The goal as the decision read it: with at least the todos its
    /// outcomes link, not necessarily its whole frontier (whose counts and
    /// selected work are in `should_run`); [`LoopDir::goal`] reads that.
    pub goal: GoalReading,
    pub verdict: Verdict,
    pub should_run: ShouldRun,
    /// What the candidate stream holds back (read in enforce mode only).
    pub candidate: Option<loopx_core::focus::candidate::Hold>,
    /// The replan signals that close the enforce-mode pre-dispatch gate
    /// (read in enforce mode only).
    pub direction: Vec<loopx_core::focus::signals::Signal>,
}

/// The next turn's prompt, with its size and digest (a host compares the
/// digest to know the prompt did not change).
#[derive(Debug, Serialize)]
pub struct TaskBody {
    pub bytes: usize,
    pub digest: Digest,
    pub body: String,
}

impl TaskBody {
    fn of(body: String) -> Self {
        TaskBody {
            bytes: body.len(),
            digest: Digest::of_bytes(body.as_bytes()),
            body,
        }
    }
}

impl LoopDir {
    /// The continuation decision for `actor` on goal `goal_id`, from the
    /// store, with everything it was computed from.
    pub fn next_turn(&self, goal_id: &str, actor: &Actor) -> Result<NextTurn> {
        let reading = self.read()?;
        let now = clock::now();
        let (goal, frontier) = self.goal_for_decision(goal_id, actor, now)?;
        let sentinels = self.sentinels();
        let verdict = arbitrate(&reading.ledger, sentinels, now);
        let should_run = continuation::should_run(
            &reading.ledger,
            &verdict,
            sentinels,
            (&goal.goal, &frontier),
            actor,
            now,
        );
        // Only an enforce-mode loop stages candidates and gates turns:
        // others read nothing more. One Goal Focus read serves both.
        let (candidate, direction) = match reading.ledger.config.goal_focus_mode {
            GoalFocusMode::Enforce => {
                let focus = self.focus()?;
                (focus.candidate.hold(), focus.gate_closing_signals(now))
            }
            _ => (None, Vec::new()),
        };
        Ok(NextTurn {
            reading,
            goal,
            verdict,
            should_run,
            candidate,
            direction,
        })
    }

    /// The next turn's prompt, rendered from state: byte-identical while
    /// the frontier does not change. Its panel section is there when
    /// `drive --panel auto` would run a panel ([`crate::panel::enabled`]).
    pub fn task_body(&self, goal_id: &str, actor: &Actor) -> Result<String> {
        self.task_body_with_panel(goal_id, actor, Switch::Auto, None, &FormalLayer::default())
    }

    /// [`Self::task_body`] for a driver whose `--panel` is `panel`, which
    /// ran target advice before this turn when `advice` names its
    /// synthesis (loop-relative), and whose formal policy is `formal` (what
    /// it resolved at its start).
    pub fn task_body_with_panel(
        &self,
        goal_id: &str,
        actor: &Actor,
        panel: Switch,
        advice: Option<&str>,
        formal: &FormalLayer,
    ) -> Result<String> {
        let turn = self.next_turn(goal_id, actor)?;
        self.render_task_body(&turn, panel, advice, formal)
    }

    fn render_task_body(
        &self,
        turn: &NextTurn,
        panel: Switch,
        advice: Option<&str>,
        formal: &FormalLayer,
    ) -> Result<String> {
        let ledger = &turn.reading.ledger;
        let policies = Policies {
            panel: crate::panel::enabled(self, panel)?,
            target_advice: advice.map(str::to_owned),
            formal_policy: crate::formal::prompt_section(self, turn, formal)?,
            ..self.policy_texts(ledger)?
        };
        Ok(goal::task_body::render(
            &self.display(),
            ledger,
            &turn.goal.goal,
            &turn.should_run,
            &policies,
        ))
    }

    /// The policy sections' texts as `ledger` stands (each empty when its
    /// policy is off): the turn prompt's, and the target-advice brief's.
    /// The panel's part is the caller's.
    pub(crate) fn policy_texts(&self, ledger: &loopx_core::ledger::Ledger) -> Result<Policies> {
        // Legacy goal priority: a malformed file refuses the prompt.
        let priority = crate::goal_priority::resolve(self)?;
        let mode = ledger.config.goal_focus_mode;
        let enforces = mode == GoalFocusMode::Enforce;
        let goal_focus = match mode {
            GoalFocusMode::Off => String::new(),
            _ => {
                let focus = self.focus()?;
                loopx_core::focus::prompt::section(
                    mode,
                    &focus.contract.document,
                    &focus.registry.document,
                    focus.plan.state.as_ref(),
                )
            }
        };
        Ok(Policies {
            goal_focus,
            goal_priority: loopx_core::ledger::goal_priority::section(
                &priority,
                &ledger.recent,
                enforces,
            ),
            compute_policy: crate::focus::compute_policy(self)?.prompt(),
            ..Policies::default()
        })
    }
}

/// `quota should-run`: should another turn run now, for `actor`? The full
/// projection (every open gap). Read-only.
pub fn should_run(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<ShouldRun> {
    Ok(dir.next_turn(goal_id, actor)?.should_run)
}

/// What `quota should-run` and the MCP `should_run` tool answer: the
/// bounded brief an agent reads ([`ShouldRun::brief`]), or, when the
/// caller asks for the detail, the full projection.
#[derive(Debug)]
pub struct ShouldRunAnswer {
    pub decision: ShouldRun,
    pub detail: bool,
}

impl Serialize for ShouldRunAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.detail {
            true => self.decision.serialize(serializer),
            false => self.decision.brief().serialize(serializer),
        }
    }
}

/// [`should_run`] as an agent reads it: bounded unless `detail`. Read-only.
pub fn should_run_answer(
    dir: &LoopDir,
    goal_id: &str,
    actor: &Actor,
    detail: bool,
) -> Result<ShouldRunAnswer> {
    Ok(ShouldRunAnswer {
        decision: should_run(dir, goal_id, actor)?,
        detail,
    })
}

/// `task-body`: the next turn's prompt for `actor`. Read-only.
pub fn task_body(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<TaskBody> {
    Ok(TaskBody::of(dir.task_body(goal_id, actor)?))
}

/// What an agent reads at the start of (or during) a turn: the prompt and
/// the todo the continuation decision selected for it, from one read.
#[derive(Debug, Serialize)]
pub struct WorkContext {
    pub should_run: bool,
    pub selected_todo: Option<SelectedTodo>,
    pub next_action: String,
    pub task_body: TaskBody,
}

/// The work context for `actor`: [`task_body`] and the selected todo of
/// [`should_run`], computed once. Read-only.
pub fn work_context(dir: &LoopDir, goal_id: &str, actor: &Actor) -> Result<WorkContext> {
    let turn = dir.next_turn(goal_id, actor)?;
    let body = dir.render_task_body(&turn, Switch::Auto, None, &FormalLayer::default())?;
    let ShouldRun {
        should_run,
        selected_todo,
        next_action,
        ..
    } = turn.should_run;
    Ok(WorkContext {
        should_run,
        selected_todo,
        next_action,
        task_body: TaskBody::of(body),
    })
}
