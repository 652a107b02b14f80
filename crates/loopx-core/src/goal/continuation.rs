//! `quota should-run`: whether another turn should run now, computed from
//! the store alone (the ledger, its stop arbiter, and the goal frontier),
//! never from prose.
//!
//! The answer follows LoopX's host contract: a `scheduler_hint` with an
//! action, a reason and a reset identity (digests of exactly the state that
//! must change before the answer changes), and a typed
//! `goal_runtime_continuation_v0` disposition. Everything but a defer's
//! countdown is a pure function of that state, so an unchanged state
//! answers byte for byte the same and a host can stop polling.
//!
//! What an agent reads is [`ShouldRun::brief`]: the decision, the selected
//! work, the frontier's counts and the first few open gaps, a few KB
//! whatever the goal's size. The full projection (every open gap with every
//! unresolved requirement) is the explicit detail read.

use super::gap::{gaps, Gap, UnresolvedRequirement};
use super::todo::{Availability, Todo};
use super::{objective, Actor, Goal};
use crate::digest::Digest;
use crate::ledger::arbiter::{Sentinels, Verdict};
use crate::ledger::Ledger;
use jiff::Timestamp;
use serde::Serialize;

/// The shape of should-run's JSON: 2 since the default answer is the
/// bounded [`ShouldRunBrief`] (1: every open gap, unversioned).
pub const SCHEMA_VERSION: u32 = 2;
/// The open gaps the bounded answer lists (the first, in outcome order).
pub const BRIEF_GAPS: usize = 5;
/// The unresolved requirements it lists per gap.
pub const BRIEF_UNRESOLVED: usize = 8;

/// A defer with no known deadline rechecks after this long.
pub const DEFAULT_RECHECK_SECONDS: u64 = 900;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    RunNow,
    StopUntilExplicitResume,
    BackoffUntilStateChange,
    BackoffWaitingForUser,
    BackoffUntilFreshEvidence,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RunNow => "run_now",
            Action::StopUntilExplicitResume => "stop_until_explicit_resume",
            Action::BackoffUntilStateChange => "backoff_until_state_change",
            Action::BackoffWaitingForUser => "backoff_waiting_for_user",
            Action::BackoffUntilFreshEvidence => "backoff_until_fresh_evidence",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    ContinueNow,
    Defer,
    Complete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Continuation {
    pub schema: &'static str,
    pub disposition: Disposition,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recheck_after_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recheck_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_policy: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetIdentity {
    pub digest: Digest,
    pub ledger: Digest,
    pub frontier: Digest,
    pub gaps: Digest,
    pub objective: Digest,
    pub controls: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchedulerHint {
    pub source: &'static str,
    pub action: Action,
    pub reason_code: String,
    pub reason: String,
    pub reset_identity: ResetIdentity,
    pub goal_runtime_continuation: Continuation,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectedTodo {
    pub id: String,
    pub title: String,
}

/// The frontier at a glance, as of the decision: how many todos, and how
/// many of them are runnable, held under a live lease, deferred, blocked
/// and done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FrontierCounts {
    pub todos: usize,
    pub runnable: usize,
    pub held: usize,
    pub deferred: usize,
    pub blocked: usize,
    pub done: usize,
}

impl FrontierCounts {
    fn of(availability: &[Availability]) -> Self {
        let mut counts = FrontierCounts {
            todos: availability.len(),
            ..FrontierCounts::default()
        };
        for a in availability {
            *match a {
                Availability::Runnable => &mut counts.runnable,
                Availability::Held(_) => &mut counts.held,
                Availability::Waiting(_) => &mut counts.deferred,
                Availability::Blocked => &mut counts.blocked,
                Availability::Done => &mut counts.done,
            } += 1;
        }
        counts
    }
}

/// The full projection: every open gap (`quota should-run --detail`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShouldRun {
    pub schema_version: u32,
    pub should_run: bool,
    pub scheduler_hint: SchedulerHint,
    pub selected_todo: Option<SelectedTodo>,
    pub next_action: String,
    pub counts: FrontierCounts,
    pub open_gaps: Vec<Gap>,
}

/// What an agent reads: the decision and the selected work, the counts,
/// and the first [`BRIEF_GAPS`] open gaps with at most
/// [`BRIEF_UNRESOLVED`] requirements each; the totals say what was left
/// out, and `detail` how to read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShouldRunBrief<'a> {
    pub schema_version: u32,
    pub should_run: bool,
    pub scheduler_hint: &'a SchedulerHint,
    pub selected_todo: Option<&'a SelectedTodo>,
    pub next_action: &'a str,
    pub counts: &'a FrontierCounts,
    pub open_gaps: Vec<BriefGap<'a>>,
    pub open_gaps_total: usize,
    pub detail: &'static str,
}

/// An open gap in the bounded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BriefGap<'a> {
    pub kind: &'static str,
    pub outcome_id: &'a str,
    pub responsible_agent: &'a str,
    pub unresolved: &'a [UnresolvedRequirement],
    pub unresolved_total: usize,
    pub checkpoint: &'a Digest,
    pub acknowledged: bool,
}

impl ShouldRun {
    /// The bounded answer an agent reads by default.
    pub fn brief(&self) -> ShouldRunBrief<'_> {
        let open_gaps = self
            .open_gaps
            .iter()
            .take(BRIEF_GAPS)
            .map(|gap| BriefGap {
                kind: gap.kind,
                outcome_id: &gap.outcome_id,
                responsible_agent: &gap.responsible_agent,
                unresolved: &gap.unresolved[..gap.unresolved.len().min(BRIEF_UNRESOLVED)],
                unresolved_total: gap.unresolved.len(),
                checkpoint: &gap.checkpoint,
                acknowledged: gap.acknowledged,
            })
            .collect();
        ShouldRunBrief {
            schema_version: self.schema_version,
            should_run: self.should_run,
            scheduler_hint: &self.scheduler_hint,
            selected_todo: self.selected_todo.as_ref(),
            next_action: &self.next_action,
            counts: &self.counts,
            open_gaps,
            open_gaps_total: self.open_gaps.len(),
            detail: "every open gap: `loopx quota should-run --detail --json` (MCP: should_run with detail: true); the goal: `loopx goal-acceptance inspect`",
        }
    }
}

struct Answer {
    action: Action,
    code: &'static str,
    reason: String,
    deadline: Option<Timestamp>,
    selected: Option<&'static str>,
}

fn identity(
    ledger: &Ledger,
    goal: &Goal,
    sentinels: Sentinels,
    gaps: &[Gap],
    actor: &Actor,
) -> ResetIdentity {
    let ledger_part = Digest::of_json(&serde_json::json!({
        "run_id": ledger.run_id, "status": ledger.status, "spent": ledger.spent,
        "budget": ledger.config.budget, "stop_conditions": ledger.config.stop_conditions,
    }));
    let frontier = frontier_digest(goal);
    let gaps_part = Digest::of_json(
        &gaps
            .iter()
            .map(|g| (&g.outcome_id, &g.checkpoint, g.acknowledged))
            .collect::<Vec<_>>(),
    );
    let objective_part = Digest::of_json(&serde_json::json!({
        "current": objective::current_digest(goal),
        "adopted": actor.agent_id().map(|a| objective::has_adopted(goal, a)),
        "multi_agent": goal.is_multi_agent(),
    }));
    let controls = Digest::of_json(&sentinels);
    let digest = Digest::of_json(&[
        &ledger_part,
        &frontier,
        &gaps_part,
        &objective_part,
        &controls,
    ]);
    ResetIdentity {
        digest,
        ledger: ledger_part,
        frontier,
        gaps: gaps_part,
        objective: objective_part,
        controls,
    }
}

/// The frontier part of the reset identity: each todo's id, status, lease
/// and deferral, in order. Written straight from the todos in canonical
/// form (fields in key order, no maps), with no `Value` tree of the whole
/// frontier in between: the same digest as the canonical JSON of
/// `{"instance", "todos": [[id, status, lease, deferred_until], ...]}`.
fn frontier_digest(goal: &Goal) -> Digest {
    use super::todo::{Lease, TodoStatus};
    #[derive(Serialize)]
    struct SortedLease<'a> {
        acquired_at: &'a Timestamp,
        expires_at: &'a Timestamp,
        holder: &'a str,
    }
    #[derive(Serialize)]
    struct Frontier<'a> {
        instance: &'a str,
        todos: Vec<(
            &'a str,
            TodoStatus,
            Option<SortedLease<'a>>,
            &'a Option<Timestamp>,
        )>,
    }
    fn sorted(lease: &Lease) -> SortedLease<'_> {
        SortedLease {
            acquired_at: &lease.acquired_at,
            expires_at: &lease.expires_at,
            holder: &lease.holder,
        }
    }
    Digest::of_ordered_json(&Frontier {
        instance: &goal.instance_id,
        todos: goal
            .todos
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.status,
                    t.lease.as_ref().map(sorted),
                    &t.deferred_until,
                )
            })
            .collect(),
    })
}

/// The first todo anyone may take now, in priority order.
pub fn next_runnable(goal: &Goal, now: Timestamp) -> Option<&Todo> {
    goal.todos
        .iter()
        .find(|t| t.availability(now) == Availability::Runnable)
}

/// The work `actor` should do now: the first todo it holds a live lease
/// on (it claimed it, so it is its to finish; a worker's turn is about its
/// claimed todo), else the first anyone may take.
pub fn next_for<'g>(goal: &'g Goal, actor: &Actor, now: Timestamp) -> Option<&'g Todo> {
    let own = match actor {
        Actor::Agent(agent) => goal.todos.iter().find(|t| t.holder(now) == Some(agent)),
        Actor::Owner => None,
    };
    own.or_else(|| next_runnable(goal, now))
}

pub fn should_run(
    ledger: &Ledger,
    verdict: &Verdict,
    sentinels: Sentinels,
    goal: &Goal,
    actor: &Actor,
    now: Timestamp,
) -> ShouldRun {
    let all_gaps = gaps(goal, now);
    let open_gaps: Vec<Gap> = all_gaps
        .iter()
        .filter(|g| !g.acknowledged)
        .cloned()
        .collect();
    let runnable = next_for(goal, actor, now);
    let availability: Vec<Availability> = goal.todos.iter().map(|t| t.availability(now)).collect();
    let answer = decide(
        ledger,
        verdict,
        goal,
        actor,
        (runnable, &availability),
        &open_gaps,
    );
    let continuation = match answer.action {
        Action::RunNow => Continuation {
            schema: "goal_runtime_continuation_v0",
            disposition: Disposition::ContinueNow,
            recheck_after_seconds: None,
            recheck_at: None,
            wake_policy: None,
        },
        Action::StopUntilExplicitResume => Continuation {
            schema: "goal_runtime_continuation_v0",
            disposition: Disposition::Complete,
            recheck_after_seconds: None,
            recheck_at: None,
            wake_policy: None,
        },
        _ => {
            let seconds = answer.deadline.map_or(DEFAULT_RECHECK_SECONDS, |deadline| {
                let left = deadline.duration_since(now).as_secs_f64().ceil();
                (left.max(1.0)) as u64
            });
            Continuation {
                schema: "goal_runtime_continuation_v0",
                disposition: Disposition::Defer,
                recheck_after_seconds: Some(seconds),
                recheck_at: answer.deadline,
                wake_policy: Some("state_change_or_deadline"),
            }
        }
    };
    let selected_todo = answer.selected.and(runnable).map(|t| SelectedTodo {
        id: t.id.clone(),
        title: t.title.clone(),
    });
    let next_action = match (&selected_todo, answer.action) {
        (Some(todo), _) => format!("claim and work todo {}: {}", todo.id, todo.title),
        (None, Action::RunNow) => answer.reason.clone(),
        (None, Action::StopUntilExplicitResume) => "report stop status".into(),
        (None, _) => format!("wait: {}", answer.reason),
    };
    ShouldRun {
        schema_version: SCHEMA_VERSION,
        should_run: answer.action == Action::RunNow,
        scheduler_hint: SchedulerHint {
            source: "quota.should-run",
            action: answer.action,
            reason_code: answer.code.to_owned(),
            reason: answer.reason,
            reset_identity: identity(ledger, goal, sentinels, &all_gaps, actor),
            goal_runtime_continuation: continuation,
        },
        selected_todo,
        next_action,
        counts: FrontierCounts::of(&availability),
        open_gaps,
    }
}

fn decide(
    ledger: &Ledger,
    verdict: &Verdict,
    goal: &Goal,
    actor: &Actor,
    (runnable, availability): (Option<&Todo>, &[Availability]),
    open_gaps: &[Gap],
) -> Answer {
    let answer = |action, code, reason: String| Answer {
        action,
        code,
        reason,
        deadline: None,
        selected: None,
    };
    if let Some(iteration) = ledger.pending_claim {
        return answer(
            Action::BackoffUntilStateChange,
            "success_claim_pending",
            format!("iteration {iteration} claims success; the host must run the success_check (`loopx verify`) before anything else"),
        );
    }
    if verdict.done {
        let reason = verdict.reason.unwrap_or("done");
        return answer(
            Action::StopUntilExplicitResume,
            "loop_done",
            format!("the done arbiter reports {reason}; resume only by an explicit user action"),
        );
    }
    if verdict.paused {
        return answer(
            Action::BackoffWaitingForUser,
            "paused",
            "the loop is paused (PAUSE sentinel); remove it to resume".into(),
        );
    }
    if ledger.status.is_terminal() {
        // Only reachable under require_user_stop_only: the agent stopped, the user has not.
        return answer(
            Action::BackoffWaitingForUser,
            "awaiting_user_stop",
            format!(
                "the ledger is {} but only the user may end this loop (STOP_REQUESTED)",
                ledger.status
            ),
        );
    }
    if let Actor::Agent(agent) = actor {
        if goal.is_multi_agent() && !objective::has_adopted(goal, agent) {
            return answer(
                Action::RunNow,
                "objective_adoption_required",
                format!("adopt objective revision {} before taking new work (loopx goal-acceptance inspect, then adopt-objective)", goal.objective.current_revision()),
            );
        }
    }
    if let Some(todo) = runnable {
        return Answer {
            selected: Some("todo"),
            ..answer(
                Action::RunNow,
                "runnable_todo",
                format!("todo {} is runnable", todo.id),
            )
        };
    }
    if let Some(gap) = open_gaps.first() {
        return answer(
            Action::RunNow,
            "outcome_gap_replan",
            format!("outcome {} has unresolved requirements and no open linked work: plan work for it or acknowledge checkpoint {}", gap.outcome_id, gap.checkpoint),
        );
    }
    let earliest =
        |pick: fn(&Availability) -> Option<Timestamp>| availability.iter().filter_map(pick).min();
    if let Some(until) = earliest(|a| {
        if let Availability::Held(t) = a {
            Some(*t)
        } else {
            None
        }
    }) {
        return Answer {
            deadline: Some(until),
            ..answer(
                Action::BackoffUntilStateChange,
                "leases_held",
                format!("every open todo is leased; the first lease expires at {until}"),
            )
        };
    }
    if let Some(until) = earliest(|a| {
        if let Availability::Waiting(t) = a {
            Some(*t)
        } else {
            None
        }
    }) {
        return Answer {
            deadline: Some(until),
            ..answer(
                Action::BackoffUntilStateChange,
                "todos_deferred",
                format!("every open todo is deferred; the first is due at {until}"),
            )
        };
    }
    if availability.contains(&Availability::Blocked) {
        return answer(
            Action::BackoffUntilFreshEvidence,
            "todos_blocked",
            "every open todo is blocked; unblock one with new evidence or add work".into(),
        );
    }
    if goal.todos.is_empty() {
        return answer(
            Action::RunNow,
            "ledger_next_iteration",
            "no todos: run the next bounded iteration of the loop".into(),
        );
    }
    answer(
        Action::RunNow,
        "frontier_complete_review",
        "every todo is done: review the outcomes against the success criteria and record the loop's decision".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::todo::{Lease, Todo, TodoStatus};

    #[test]
    fn the_frontier_digest_is_the_canonical_json_digest_of_the_frontier() {
        let at = Timestamp::UNIX_EPOCH;
        let todo = |id: &str, status, lease, deferred_until| Todo {
            id: id.into(),
            title: "work".into(),
            status,
            lease,
            created_at: at,
            created_by: "owner".into(),
            blocked_reason: String::new(),
            deferred_until,
            completed_at: None,
            evidence: Vec::new(),
            position: None,
        };
        let lease = Lease {
            holder: "agent-a".into(),
            acquired_at: at,
            expires_at: at.checked_add(jiff::SignedDuration::from_secs(60)).unwrap(),
        };
        let goal = crate::goal::event::fold(
            None,
            &crate::goal::GoalEvent {
                at,
                actor: Actor::Owner,
                changes: vec![crate::goal::Change::Created {
                    goal_id: "main".into(),
                    lifetime: 1,
                    instance_id: "main#1".into(),
                    objective: "o".into(),
                    commitments: Default::default(),
                    todo_streams: false,
                }],
            },
        );
        let goal = Goal {
            todos: vec![
                todo("t1", TodoStatus::Claimed, Some(lease), None),
                todo("t2", TodoStatus::Deferred, None, Some(at)),
                todo("t3", TodoStatus::Open, None, None),
            ],
            ..goal
        };
        let todos: Vec<_> = goal
            .todos
            .iter()
            .map(|t| (&t.id, t.status, &t.lease, &t.deferred_until))
            .collect();
        let canonical =
            Digest::of_json(&serde_json::json!({"instance": goal.instance_id, "todos": todos}));
        assert_eq!(frontier_digest(&goal), canonical);
    }
}
