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
use super::todo::{Availability, Todo, TodoStatus};
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
    fn count(&mut self, availability: Availability, n: usize) {
        self.todos += n;
        *match availability {
            Availability::Runnable => &mut self.runnable,
            Availability::Held(_) => &mut self.held,
            Availability::Waiting(_) => &mut self.deferred,
            Availability::Blocked => &mut self.blocked,
            Availability::Done => &mut self.done,
        } += n;
    }
}

/// What the decision reads of the frontier, as of `now`: the work the
/// actor should do next, the counts, and the first lease to expire and
/// the first deferral to end. A goal with thousands of todos is not read
/// whole for this: the store's index answers it ([`Frontier::of_tallies`]);
/// a goal whose todos are in memory is scanned ([`Frontier::scan`]), to
/// the same result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Frontier {
    /// The first todo (in priority order) `actor` holds a live lease on (it
    /// claimed it, so it is its to finish: a worker's turn is about its
    /// claimed todo), else the first anyone may take.
    pub next: Option<SelectedTodo>,
    /// `next` is a todo the actor holds (its own unfinished work).
    pub next_is_own: bool,
    pub counts: FrontierCounts,
    pub first_lease_expiry: Option<Timestamp>,
    pub first_deferral_end: Option<Timestamp>,
}

/// The todo the store's index found for an actor.
#[derive(Debug, Clone, Copy)]
pub enum Next<'t> {
    /// The first the actor holds a live lease on.
    Own(&'t Todo),
    /// The first anyone may take.
    Runnable(&'t Todo),
}

/// How many todos of one status there are, and how many of them wait on
/// something still ahead (a live lease, a deferral not yet over), with
/// the soonest of those: what the store's index counts per status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub status: TodoStatus,
    pub total: usize,
    pub pending: usize,
    pub first_due: Option<Timestamp>,
}

impl Frontier {
    /// The frontier of `goal`'s todos (all of them in memory) for `actor`.
    pub fn scan(goal: &Goal, actor: &Actor, now: Timestamp) -> Frontier {
        let mut frontier = Frontier::default();
        let mut runnable = None;
        let mut own = None;
        for todo in &goal.todos {
            let availability = todo.availability(now);
            frontier.note(availability, 1);
            match availability {
                Availability::Runnable => {
                    runnable.get_or_insert(todo);
                }
                Availability::Held(_) if own.is_none() => {
                    own = actor
                        .agent_id()
                        .filter(|agent| todo.claimant() == Some(*agent))
                        .map(|_| todo);
                }
                _ => {}
            }
        }
        frontier.next_is_own = own.is_some();
        frontier.next = own.or(runnable).map(SelectedTodo::of);
        frontier
    }

    /// The frontier from the store's index: one [`Tally`] per status, and
    /// the todo the index found for the actor: its first held (`Own`), else
    /// the first runnable.
    pub fn of_tallies(tallies: &[Tally], next: Option<Next<'_>>) -> Frontier {
        let mut frontier = Frontier {
            next_is_own: matches!(next, Some(Next::Own(_))),
            next: next.map(|(Next::Own(todo) | Next::Runnable(todo))| SelectedTodo::of(todo)),
            ..Frontier::default()
        };
        for tally in tallies {
            frontier.note(tally.status.availability(tally.first_due), tally.pending);
            // Saturating: an index that counts more pending rows than rows
            // (only a damaged one can; `validate` names it) never wraps.
            let not_pending = tally.total.saturating_sub(tally.pending);
            frontier.note(tally.status.availability(None), not_pending);
        }
        frontier
    }

    /// The statuses a todo may be runnable in (once what it waits on has
    /// passed): where the index looks for the first runnable todo.
    pub fn runnable_statuses() -> impl Iterator<Item = TodoStatus> {
        TodoStatus::ALL
            .into_iter()
            .filter(|status| status.availability(None) == Availability::Runnable)
    }

    /// Count `n` todos of `availability`, keeping the soonest deadlines.
    fn note(&mut self, availability: Availability, n: usize) {
        if n == 0 {
            return;
        }
        self.counts.count(availability, n);
        let soonest = |kept: &mut Option<Timestamp>, at: Timestamp| {
            *kept = Some(kept.map_or(at, |kept| kept.min(at)));
        };
        match availability {
            Availability::Held(until) => soonest(&mut self.first_lease_expiry, until),
            Availability::Waiting(until) => soonest(&mut self.first_deferral_end, until),
            _ => {}
        }
    }
}

impl SelectedTodo {
    fn of(todo: &Todo) -> SelectedTodo {
        SelectedTodo {
            id: todo.id.clone(),
            title: todo.title.clone(),
        }
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
    frontier: &Frontier,
    sentinels: Sentinels,
    gaps: &[Gap],
    actor: &Actor,
) -> ResetIdentity {
    let ledger_part = Digest::of_json(&serde_json::json!({
        "run_id": ledger.run_id, "status": ledger.status, "spent": ledger.spent,
        "budget": ledger.config.budget, "stop_conditions": ledger.config.stop_conditions,
    }));
    // Everything the decision reads of the frontier: the answer is a
    // function of it, so it changes only when this digest does.
    let frontier = Digest::of_json(&serde_json::json!({
        "instance": goal.instance_id, "frontier": frontier,
    }));
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

/// Should another turn run now, for `actor`? `goal` holds at least the
/// todos its outcomes link (for the gaps); `frontier` is what the
/// decision reads of all of them.
pub fn should_run(
    ledger: &Ledger,
    verdict: &Verdict,
    sentinels: Sentinels,
    (goal, frontier): (&Goal, &Frontier),
    actor: &Actor,
    now: Timestamp,
) -> ShouldRun {
    let all_gaps = gaps(goal, now);
    let open_gaps: Vec<Gap> = all_gaps
        .iter()
        .filter(|g| !g.acknowledged)
        .cloned()
        .collect();
    let answer = decide(ledger, verdict, goal, frontier, actor, &open_gaps);
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
    let selected_todo = answer.selected.and(frontier.next.clone());
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
            reset_identity: identity(ledger, goal, frontier, sentinels, &all_gaps, actor),
            goal_runtime_continuation: continuation,
        },
        selected_todo,
        next_action,
        counts: frontier.counts.clone(),
        open_gaps,
    }
}

fn decide(
    ledger: &Ledger,
    verdict: &Verdict,
    goal: &Goal,
    frontier: &Frontier,
    actor: &Actor,
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
    if let Some(todo) = &frontier.next {
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
    if let Some(until) = frontier.first_lease_expiry {
        return Answer {
            deadline: Some(until),
            ..answer(
                Action::BackoffUntilStateChange,
                "leases_held",
                format!("every open todo is leased; the first lease expires at {until}"),
            )
        };
    }
    if let Some(until) = frontier.first_deferral_end {
        return Answer {
            deadline: Some(until),
            ..answer(
                Action::BackoffUntilStateChange,
                "todos_deferred",
                format!("every open todo is deferred; the first is due at {until}"),
            )
        };
    }
    if frontier.counts.blocked > 0 {
        return answer(
            Action::BackoffUntilFreshEvidence,
            "todos_blocked",
            "every open todo is blocked; unblock one with new evidence or add work".into(),
        );
    }
    if frontier.counts.todos == 0 {
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
    use crate::goal::todo::Lease;
    use proptest::prelude::*;

    /// A todo of `status` at position `position`; `due` seconds after the
    /// epoch is its lease's expiry (held by `holder`) or its deferral's end.
    fn todo(position: u64, status: TodoStatus, due: Option<i64>, holder: &str) -> Todo {
        let at = |s: i64| Timestamp::from_second(s).unwrap();
        Todo {
            id: format!("t{position}"),
            title: format!("work {position}"),
            status,
            lease: (status == TodoStatus::Claimed)
                .then(|| {
                    due.map(|s| Lease {
                        holder: holder.into(),
                        acquired_at: at(0),
                        expires_at: at(s),
                    })
                })
                .flatten(),
            created_at: at(0),
            created_by: "owner".into(),
            blocked_reason: String::new(),
            deferred_until: (status == TodoStatus::Deferred)
                .then(|| due.map(at))
                .flatten(),
            completed_at: None,
            evidence: Vec::new(),
            position: Some(position),
        }
    }

    /// The frontier as the store's index answers it: per status, how many
    /// todos and how many still wait (`now < due`) with the soonest due;
    /// the actor's first held todo by position, else the first of the
    /// runnable statuses whose wait is over.
    fn indexed(todos: &[Todo], actor: &Actor, now: Timestamp) -> Frontier {
        let pending = |t: &Todo| t.due().filter(|due| now < *due);
        let tallies: Vec<Tally> = TodoStatus::ALL
            .into_iter()
            .map(|status| {
                let of: Vec<&Todo> = todos.iter().filter(|t| t.status == status).collect();
                Tally {
                    status,
                    total: of.len(),
                    pending: of.iter().filter(|t| pending(t).is_some()).count(),
                    first_due: of.iter().filter_map(|t| pending(t)).min(),
                }
            })
            .collect();
        let held = todos.iter().find(|t| {
            pending(t).is_some() && t.claimant().is_some() && t.claimant() == actor.agent_id()
        });
        let free = todos
            .iter()
            .find(|t| Frontier::runnable_statuses().any(|s| s == t.status) && pending(t).is_none());
        let next = held.map(Next::Own).or(free.map(Next::Runnable));
        Frontier::of_tallies(&tallies, next)
    }

    fn goal_of(todos: Vec<Todo>) -> Goal {
        let at = Timestamp::UNIX_EPOCH;
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
                    todo_streams: true,
                }],
            },
        );
        Goal { todos, ..goal }
    }

    proptest! {
        /// The index's tallies give the frontier a scan of every todo
        /// gives: the same counts, deadlines and selected work.
        #[test]
        fn the_frontier_from_tallies_is_the_frontier_a_scan_finds(
            shape in proptest::collection::vec((0usize..5, proptest::option::of(0i64..20), 0usize..2), 0..24),
            now in 0i64..20,
            as_agent in any::<bool>(),
        ) {
            let holders = ["agent-a", "agent-b"];
            let todos: Vec<Todo> = shape
                .iter()
                .enumerate()
                .map(|(i, (status, due, holder))| {
                    todo(i as u64, TodoStatus::ALL[*status], *due, holders[*holder])
                })
                .collect();
            let actor = match as_agent {
                true => Actor::Agent("agent-a".into()),
                false => Actor::Owner,
            };
            let now = Timestamp::from_second(now).unwrap();
            let goal = goal_of(todos.clone());
            prop_assert_eq!(Frontier::scan(&goal, &actor, now), indexed(&todos, &actor, now));
        }
    }

    #[test]
    fn an_actor_is_given_the_todo_it_holds_before_the_first_runnable_one() {
        let now = Timestamp::from_second(5).unwrap();
        let goal = goal_of(vec![
            todo(0, TodoStatus::Open, None, ""),
            todo(1, TodoStatus::Claimed, Some(10), "agent-b"),
            todo(2, TodoStatus::Claimed, Some(10), "agent-a"),
        ]);
        let next = |actor: &Actor| Frontier::scan(&goal, actor, now).next.unwrap().id;
        assert_eq!(next(&Actor::Agent("agent-a".into())), "t2");
        assert_eq!(next(&Actor::Agent("agent-b".into())), "t1");
        assert_eq!(next(&Actor::Owner), "t0");
        let frontier = Frontier::scan(&goal, &Actor::Owner, now);
        assert_eq!((frontier.counts.runnable, frontier.counts.held), (1, 2));
        assert_eq!(frontier.first_lease_expiry, Timestamp::from_second(10).ok());
    }
}
