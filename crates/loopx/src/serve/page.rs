//! The server-rendered dashboard. Every page is built from the store on
//! each request; the browser only ever sends intents back.
//!
//! Every link and fetch inside a loop's pages is relative to its overview,
//! so the same pages serve the only loop at `/` and each loop of
//! `loopx serve --all` under `/loops/<id>/`.

use super::api::{blocking, Failure, IterationPath};
use super::{App, Loop, Loops, Server};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use jiff::Timestamp;
use loopx_app::all_loops::{AllLoops, LoopRow, Reach};
use loopx_app::continuation::NextTurn;
use loopx_app::goal::acceptance::GoalInspection;
use loopx_app::health::{self, Health};
use loopx_app::loop_dir::{LoopDir, Reading};
use loopx_app::turns::{self, Turn, Turns};
use loopx_app::{clock, iterations, ErrorClass};
use loopx_core::cost::{BudgetLine, CostReport};
use loopx_core::driver::classify::FailureClass;
use loopx_core::driver::TurnOutcome;
use loopx_core::driver::{summary, DriverSummary};
use loopx_core::goal::continuation::ShouldRun;
use loopx_core::goal::inspect::Readback;
use loopx_core::goal::todo::TodoStatus;
use loopx_core::goal::{self, Actor};
use loopx_core::ledger::arbiter::Verdict;
use loopx_core::ledger::view;
use loopx_core::ledger::IterationRecord;
use loopx_core::words;
use loopx_store::sqlite::Access;
use maud::{html, Markup, PreEscaped, DOCTYPE};

use std::sync::Arc;

/// Everything a page shows, read once per request.
struct Snapshot {
    dir: String,
    ledger: Reading,
    verdict: Verdict,
    /// The goal's readback, from the same read as the decision.
    goal: GoalInspection,
    driver: DriverSummary,
    /// The supervisor's line (`service-status`'s), when one ever ran the loop.
    supervisor: Option<String>,
    /// Worker runs: hosts, each worker's todo, the merge queue.
    workers: Option<loopx_app::workers::Overview>,
    decision: ShouldRun,
    health: Health,
    cost: CostReport,
    turns: Turns,
    now: Timestamp,
}

/// Cards a column of the todo board shows; the rest are counted and
/// linked, so the live view stays small however many todos there are.
const BOARD_CARDS: usize = 20;

/// Turns and cost rows the live view reads: the chart's bars and the
/// timeline's recent records find theirs among these.
const LIVE_ROWS: usize = 60;

fn snapshot(dir: &LoopDir) -> anyhow::Result<Snapshot> {
    let turn = dir.next_turn(goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
    let driver = summary(&dir.driver()?.1, loopx_app::platform::alive);
    let supervisor = loopx_app::supervisor::service_status(dir)?.line();
    let workers = loopx_app::workers::overview(dir)?;
    let now = clock::now();
    let health = health::of_turn(&dir.display(), &turn, &driver, now);
    let cost = loopx_app::cost::recent(dir, LIVE_ROWS)?;
    let turns = turns::page(dir, None, LIVE_ROWS)?;
    let NextTurn {
        reading: ledger,
        verdict,
        should_run: decision,
        ..
    } = turn;
    // The board shows todos of every column: the whole frontier.
    let goal = dir.goal(goal::DEFAULT_GOAL_ID)?;
    Ok(Snapshot {
        health,
        cost,
        turns,
        now,
        dir: dir.display(),
        ledger,
        verdict,
        goal: GoalInspection::of(goal),
        driver,
        supervisor,
        workers,
        decision,
    })
}

const STYLE: &str = r#"
:root { font-family: system-ui, sans-serif; color: #1d232b; background: #f6f7f9; }
body { margin: 0; }
header { background: #1d232b; color: #fff; padding: .8rem 1.2rem; }
header h1 { font-size: 1.1rem; margin: 0; }
header p { margin: .2rem 0 0; opacity: .8; font-size: .85rem; overflow-wrap: anywhere; }
main { max-width: 1200px; margin: 0 auto; padding: 1rem; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: .8rem 1rem; margin-bottom: 1rem; }
h2 { font-size: 1rem; margin: 0 0 .6rem; }
h3 { font-size: .95rem; margin: .2rem 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(260px, 1fr)); gap: .8rem; }
.card { border: 1px solid #e4e7eb; border-radius: 6px; padding: .6rem .8rem; overflow-wrap: anywhere; }
.muted { color: #5b6570; font-size: .85rem; }
.tag { display: inline-block; padding: 0 .4rem; border-radius: 4px; font-size: .8rem; background: #eef1f4; }
.met { background: #d9f2e1; } .unmet { background: #fbdada; } .uncertain { background: #fdf0c9; } .unreviewed { background: #eef1f4; }
.pending { background: #fdf0c9; } .adopted { background: #d9f2e1; }
ul { padding-left: 1.1rem; margin: .3rem 0; }
li { margin: .15rem 0; overflow-wrap: anywhere; }
.board { display: grid; grid-template-columns: repeat(5, minmax(0, 1fr)); gap: .6rem; }
.board > div { background: #f6f7f9; border-radius: 6px; padding: .4rem .5rem; min-width: 0; }
.table { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
td, th { border-bottom: 1px solid #eceff2; padding: .3rem .4rem; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
form label { display: block; font-size: .85rem; margin-top: .5rem; }
input, select, textarea { width: 100%; box-sizing: border-box; font: inherit; padding: .35rem; }
button { font: inherit; padding: .35rem .8rem; margin-top: .6rem; cursor: pointer; }
.message { margin-top: .5rem; font-size: .9rem; }
.message.error { color: #9b1c1c; } .message.ok { color: #17632f; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f7f9; padding: .6rem; border-radius: 6px; font-size: .8rem; max-height: 30rem; overflow-y: auto; }
.health { font-size: 1.05rem; border-left: 6px solid #8a96a3; }
.health.tone-good { border-color: #2f9e55; background: #f1faf4; } .health.tone-attention { border-color: #d9a400; background: #fffaeb; }
.health.tone-bad { border-color: #c53030; background: #fdf2f2; } .health.tone-neutral { border-color: #8a96a3; }
.health-cell { border-left: 4px solid #8a96a3; } .health-cell.tone-good { border-left-color: #2f9e55; } .health-cell.tone-attention { border-left-color: #d9a400; } .health-cell.tone-bad { border-left-color: #c53030; }
table.loops th, table.loops td.nowrap { white-space: nowrap; } table.loops .bar { margin: .2rem 0; min-width: 5rem; }
.health code, .command { background: #eef1f4; padding: 0 .3rem; border-radius: 4px; font-size: .85rem; overflow-wrap: anywhere; }
.budget { display: grid; grid-template-columns: 7rem 1fr; gap: .2rem .6rem; align-items: center; margin: .3rem 0; }
.bar { display: flex; height: .8rem; background: #eef1f4; border-radius: 4px; overflow: hidden; min-width: 0; }
.bar > span { display: block; height: 100%; }
.fill { background: #4a7bd0; } .bar .met { background: #2f9e55; } .bar .unmet { background: #c53030; } .bar .uncertain { background: #d9a400; } .bar .unreviewed { background: #b8c0c8; }
svg.chart { width: 100%; height: auto; max-width: 640px; }
@media (max-width: 720px) { .board { grid-template-columns: 1fr; } main { padding: .5rem; } .budget { grid-template-columns: 1fr; } .timeline .wide { display: none; } }
"#;

const SCRIPT: &str = r#"
// The session cookie (HttpOnly, SameSite=Strict) authenticates every
// same-origin request; the page holds no secret of its own.
const newOperation = () => 'ui-' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 10);
async function post(path, body) {
  const response = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  let json = {};
  try { json = await response.json(); } catch (_) {}
  return { status: response.status, json };
}
// Each live part names the fragment that redraws it (relative, so the
// same page works at / and under /loops/<id>/).
async function refreshLive() {
  const live = document.getElementById('live');
  if (!live || !live.dataset.src) return;
  const response = await fetch(live.dataset.src);
  if (response.ok) { live.outerHTML = await response.text(); }
}
async function currentRevision() {
  const response = await fetch('api/goal');
  return (await response.json()).provider_revision;
}
setInterval(() => { if (document.visibilityState === 'visible') refreshLive(); }, 2000);

const form = document.getElementById('refine');
if (form) {
  const message = document.getElementById('refine-message');
  const retry = document.getElementById('refine-retry');
  const say = (text, kind) => { message.textContent = text; message.className = 'message ' + kind; };
  const send = async () => {
    const data = new FormData(form);
    const outcome = data.get('outcome_id');
    const result = await post('api/outcomes/' + encodeURIComponent(outcome) + '/requirements', {
      requirement_id: data.get('requirement_id'), description: data.get('description'),
      source_ref: data.get('source_ref'), source_summary: 'entered in the dashboard',
      operation_id: form.dataset.operation, base_revision: Number(form.dataset.base),
    });
    if (result.status === 200) {
      say((result.json.replayed ? 'Already saved (the earlier attempt had committed): ' : 'Saved: ') + data.get('requirement_id') + ' at revision ' + result.json.revision, 'ok');
      form.reset();
      form.dataset.operation = newOperation();
      form.dataset.base = result.json.revision;
      retry.hidden = true;
      await refreshLive();
    } else if (result.status === 409 && result.json.reason === 'stale') {
      say('Someone changed this goal since you loaded it (you read revision ' + form.dataset.base + ', it is now at ' + result.json.current_revision + '). Your text is kept and nothing was written. Reload the goal, check it, then retry: the retry reuses the same operation, so it cannot add the requirement twice.', 'error');
      retry.hidden = false;
    } else {
      say(result.json.error || ('Request failed with status ' + result.status), 'error');
    }
  };
  form.addEventListener('submit', (event) => { event.preventDefault(); send(); });
  retry.addEventListener('click', async () => {
    await refreshLive();
    form.dataset.base = await currentRevision();
    await send();
  });
}

document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-apply]');
  if (!button) return;
  const live = document.getElementById('live');
  const result = await post('api/objective/revise', {
    proposal_digest: button.dataset.apply, expected_provider_revision: Number(live.dataset.revision),
    operation_id: 'ui-apply-' + button.dataset.apply.slice(7, 23),
  });
  const note = button.parentElement.querySelector('.message');
  note.textContent = result.status === 200 ? 'Applied as revision ' + (result.json.revision) : (result.json.error || 'failed');
  note.className = 'message ' + (result.status === 200 ? 'ok' : 'error');
  if (result.status === 200) await refreshLive();
});
"#;

fn layout(title: &str, subtitle: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · loopx" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header { h1 { (title) } p { (subtitle) } }
                main { (body) }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
}

fn state_tag(state: &str) -> Markup {
    html! { span class={"tag " (state)} { (state) } }
}

fn live_section(s: &Snapshot, readback: &Readback<'_>) -> Markup {
    let ledger = &s.ledger.ledger;
    let objective = &readback.objective;
    html! {
        div id="live" data-src="fragment/live" data-revision=(readback.provider_revision) {
            (health_line(&s.health))
            (budgets(&s.cost.budgets, s.now))
            (cost_chart(&s.cost, &s.turns))
            section {
                h2 { "Goal" }
                div class="grid" {
                    div class="card" {
                        h3 { "Original objective" }
                        p { (readback.original_objective) }
                        p class="muted" { "Success criteria: " (ledger.config.success_criteria) }
                        @for c in &readback.commitments.non_goals { p class="muted" { "Non-goal: " (c) } }
                    }
                    div class="card" {
                        h3 { "Current operating objective" }
                        p data-testid="current-objective" { (objective.current_objective) }
                        p class="muted" { "Revision " (objective.current_revision) " · " (short_digest(objective.current_digest.as_str())) }
                        @if !objective.revisions.is_empty() {
                            h3 { "Revision history" }
                            ol { @for r in objective.revisions { li { "r" (r.revision) ": " (r.objective) span class="muted" { " — " (r.reason) " (" (r.applied_at) ")" } } } }
                        }
                        @if !objective.adoption.is_empty() {
                            h3 { "Adoption" }
                            ul { @for a in &objective.adoption { li { (a.agent_id) " " (state_tag(a.state)) } } }
                        }
                        @for p in objective.pending_proposals {
                            div class="card" data-testid="proposal" {
                                p { "Proposed by " (p.proposed_by) " as revision " (p.revision) ": " strong { (p.objective) } }
                                p class="muted" { (p.reason) }
                                button data-apply=(p.digest.as_str()) { "Apply this revision" }
                                div class="message" {}
                            }
                        }
                    }
                    div class="card" {
                        h3 { "Loop" }
                        p { "Status " strong data-testid="loop-status" { (ledger.status) } " · " (view::verdict_text(&s.verdict)) }
                        p { "Driver: " span data-testid="driver" { (s.driver.line()) } }
                        @if let Some(line) = &s.supervisor {
                            p { "Supervisor: " span data-testid="supervisor" { (line) } }
                        }
                        @if let Some(w) = &s.workers {
                            (workers_card(w))
                        }
                        p class="muted" { "Next: " (s.decision.next_action) " (" (s.decision.scheduler_hint.reason_code) ")" }
                    }
                }
            }
            section {
                h2 { "Outcomes" }
                @if readback.outcomes.is_empty() {
                    p data-testid="no-outcomes" class="muted" { "No outcomes declared yet. Agents declare them with `loopx goal-acceptance refine-outcome`; they appear here with their accumulated requirements." }
                }
                div class="grid" {
                    @for o in &readback.outcomes {
                        div class="card" data-testid="outcome" data-outcome=(o.id) {
                            h3 { (o.id) " " (state_tag(o.status)) }
                            (coverage(o.requirements.iter().map(|r| r.state.as_str())))
                            p { (o.original_objective) }
                            p class="muted" { "Responsible: " (o.responsible_agent) }
                            ul { @for r in &o.requirements { li data-requirement=(r.id) { (r.id) " " (state_tag(r.state.as_str())) " " (r.description) } } }
                            @if !o.linked_work.is_empty() {
                                p class="muted" { "Work: " @for w in &o.linked_work { (w.todo_id) " (" (w.status.map_or("missing", |s| s.as_str())) ") " } }
                            }
                            @for review in o.reviews {
                                p class="muted" { "Review of " (review.requirement_id) ": " (format!("{:?}", review.conclusion).to_lowercase()) " — " (review.reasoning) " [" (review.evidence_refs.join(", ")) "]" }
                            }
                            @if o.configured_checks.is_empty() {
                                p class="muted" { "Self-assessed reviews only; no configured checks." }
                            } @else {
                                p { "Checks the host runs (the owner's):" }
                                ul data-testid="checks" {
                                    @for c in &o.configured_checks {
                                        li data-check=(c.criterion.id) data-state=(c.state.as_str()) {
                                            (c.criterion.id) " " (state_tag(c.state.as_str())) " "
                                            code { (c.criterion.validation_argv.join(" ")) }
                                            @if let Some(last) = c.last {
                                                " — last " (last.status.as_str())
                                                (last.exit_code.map_or(String::new(), |code| format!(" (exit {code})")))
                                                " at " (last.ran_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
                                                " against " (last.head.as_deref().map_or("no git HEAD".to_owned(), |h| h.chars().take(12).collect()))
                                                ", by " (last.ran_by)
                                            } @else {
                                                " — never run"
                                            }
                                        }
                                    }
                                }
                                p class="muted" { "A configured requirement is met only by its check passing; `loopx check status` judges it against the project's current HEAD." }
                            }
                        }
                    }
                }
                @if !readback.gaps.is_empty() {
                    h3 { "Gaps" }
                    ul { @for g in &readback.gaps { li { (g.outcome_id) ": unresolved " (g.unresolved.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")) " " (if g.acknowledged { "(acknowledged)" } else { "(open)" }) } } }
                }
            }
            section {
                h2 { "Todos" }
                @if s.goal.reading.goal.todos.is_empty() {
                    p class="muted" data-testid="no-todos" { "No todo yet. Todos appear here by status once someone adds one: `loopx todo add --title \"...\"` on the command line, or an agent's `todo_add` MCP tool." }
                }
                div class="board" {
                    @for status in [TodoStatus::Open, TodoStatus::Claimed, TodoStatus::Blocked, TodoStatus::Deferred, TodoStatus::Done] {
                        div data-column=(status.as_str()) {
                            h3 { (status.as_str()) }
                            @let column: Vec<_> = s.goal.reading.goal.todos.iter().filter(|t| t.status == status).collect();
                            @for t in column.iter().take(BOARD_CARDS) {
                                div class="card" data-testid="todo-card" {
                                    strong { (t.id) } " " (t.title)
                                    @if let Some(lease) = &t.lease { p class="muted" { "leased to " (lease.holder) ", expires " (when(lease.expires_at, s.now)) } }
                                    @if !t.blocked_reason.is_empty() { p class="muted" { (t.blocked_reason) } }
                                    @if let Some(until) = t.deferred_until { p class="muted" { "deferred, wakes " (when(until, s.now)) } }
                                }
                            }
                            @if column.len() > BOARD_CARDS {
                                p class="muted" data-testid="more-todos" { "and " (column.len() - BOARD_CARDS) " more: " a href="api/todos" { "all todos" } " or " code { "loopx todo list" } }
                            }
                        }
                    }
                }
            }
            (timeline(s))
        }
    }
}

fn refine_form(readback: &Readback<'_>) -> Markup {
    html! {
        section {
            h2 { "Add a requirement" }
            @if readback.outcomes.is_empty() {
                p class="muted" { "This form appears once an outcome exists." }
            } @else {
                form id="refine" data-base=(readback.provider_revision) data-operation=(format!("ui-{}", clock::now().as_nanosecond())) {
                    label { "Outcome" select name="outcome_id" { @for o in &readback.outcomes { option value=(o.id) { (o.id) } } } }
                    label { "Requirement id" input name="requirement_id" required placeholder="R3"; }
                    label { "Description" textarea name="description" required rows="3" {} }
                    label { "Source" input name="source_ref" required value="dashboard"; }
                    button type="submit" { "Add requirement" }
                    button type="button" id="refine-retry" hidden { "Reload and retry" }
                    div id="refine-message" class="message" role="status" {}
                }
                p class="muted" { "Requirements are append-only: an existing id with other text is refused." }
            }
        }
    }
}

/// A time as a person reads it at a glance, the exact instant on hover.
/// A worker run: each host's driver, each worker's todo, the queue.
fn workers_card(w: &loopx_app::workers::Overview) -> Markup {
    let q = &w.queue;
    html! {
        div data-testid="workers" {
            p { "Workers: " @for h in &w.hosts {
                span data-host=(h.host) { (h.host) " " (state_tag(if h.running { "running" } else { "stopped" })) " " }
            } }
            ul {
                @for x in &w.working {
                    li data-worker=(x.worker) { (x.worker) ": " strong { (x.todo_id) } " " (x.title) }
                }
                @if w.more_working > 0 { li class="muted" { "and " (w.more_working) " more (loopx queue list)" } }
            }
            p data-testid="queue" {
                "Merge queue: " (q.queued) " queued, " (q.merging) " merging"
                @if let Some(todo) = &w.merging { " (" (todo) ")" }
                ", " (q.needs_review) " needs review, " (q.landed) " landed, " (q.discarded) " discarded"
            }
        }
    }
}

fn when(at: Timestamp, now: Timestamp) -> Markup {
    html! { time datetime=(at) title=(at) data-testid="relative" { (words::relative(at, now)) } }
}

/// A digest's first characters, the full value on hover.
fn short_digest(digest: &str) -> Markup {
    let short: String = digest.chars().take(15).collect();
    html! { code title=(digest) data-testid="digest" { (short) "…" } }
}

/// An enumeration's wire name (`needs_person`, `not_yours`), which the
/// page also uses as a CSS class and a test hook.
fn wire_name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The health line: the state, why, and the command that acts on it.
fn health_line(health: &Health) -> Markup {
    let state = wire_name(health.state);
    let tone = wire_name(health.tone);
    html! {
        section class={"health " (state) " tone-" (tone)} data-testid="health" data-state=(state) data-tone=(tone) {
            strong title=[health.until.map(|until| until.to_string())] { (health.line) }
            @if let Some(command) = &health.command { p class="muted" { "To act: " code data-testid="health-command" { (command) } } }
        }
    }
}

/// A bar `used` of `max` wide, as a percentage of its track.
fn bar(used: f64, max: f64) -> Markup {
    let percent = if max > 0.0 {
        (used / max * 100.0).clamp(0.0, 100.0)
    } else {
        0.0
    };
    html! { div class="bar" { span class="fill" style=(format!("width: {percent:.1}%")) {} } }
}

/// Each budget as a bar with its projection; a budget without a cap says
/// "unlimited" (the cost report leaves wall time out when it has none).
fn budgets(lines: &[BudgetLine], now: Timestamp) -> Markup {
    html! {
        section {
            h2 { "Budgets" }
            (budget_rows(lines, now))
        }
    }
}

/// The four budget rows, for a loop's overview and for its row on the
/// all-loops page alike.
fn budget_rows(lines: &[BudgetLine], now: Timestamp) -> Markup {
    let named = |name: &str| lines.iter().find(|b| b.name == name);
    let row = |label: &str, name: &str, line: Option<&BudgetLine>| match line
        .filter(|b| b.max > 0.0)
    {
        Some(b) => html! {
            div class="budget" data-testid={"budget-" (name)} data-used=(b.used) data-max=(b.max) {
                span { (label) } (bar(b.used, b.max))
                span {}
                span class="muted" {
                    (b.figure(b.used)) " of " (b.figure(b.max))
                    @match b.exhausts_at { Some(at) => { " · exhausted " (when(at, now)) " at this rate" }, None => { " · " (b.without_forecast()) } }
                }
            }
        },
        None => html! {
            div class="budget" data-testid={"budget-" (name)} data-max="0" {
                span { (label) } span class="muted" { (line.map_or(String::new(), |b| b.figure(b.used))) " · unlimited" }
            }
        },
    };
    html! {
        (row("Iterations", "iterations", named("iterations")))
        (row("Tokens", "tokens", named("tokens")))
        (row("USD", "usd", named("usd")))
        (row("Wall time", "wall_time_hours", named("wall_time_hours")))
    }
}

/// What a turn's outcome looks like on the chart: advanced turns blue,
/// quota waits amber, every other failure red, the rest grey.
fn outcome_colour(outcome: Option<TurnOutcome>) -> &'static str {
    match outcome {
        Some(TurnOutcome::Advanced | TurnOutcome::RecoveredAdvanced) => "#4a7bd0",
        Some(TurnOutcome::Failed(FailureClass::Quota)) => "#d9a400",
        Some(TurnOutcome::Failed(_) | TurnOutcome::TimedOut) => "#c53030",
        _ => "#8a96a3",
    }
}

/// Cost (bars) and tokens (dots) per turn over the last turns, one bar per
/// turn whatever it cost, coloured by outcome so failed turns and quota
/// waits sit on the same axis. When no turn shown reported a cost, the
/// bars are the turns' durations instead, and the caption says why.
/// Server-rendered SVG, no script; the full table is `loopx cost` and
/// `GET /api/cost`.
fn cost_chart(report: &CostReport, turns: &Turns) -> Markup {
    const BARS: usize = 40;
    const WIDTH: f64 = 600.0;
    const HEIGHT: f64 = 90.0;
    let rows = &report.rows[report.rows.len().saturating_sub(BARS)..];
    let seconds = |row: &loopx_core::cost::Row| {
        row.key
            .parse()
            .ok()
            .and_then(|iteration| turns.for_iteration(iteration))
            .and_then(|t| t.seconds)
            .unwrap_or(0) as f64
    };
    let peak_usd = rows.iter().map(|r| r.usd).fold(0.0, f64::max);
    // Without a cost to draw, a bar is the turn's duration.
    let by_cost = peak_usd > 0.0;
    let measure = |row: &loopx_core::cost::Row| if by_cost { row.usd } else { seconds(row) };
    let peak = rows.iter().map(measure).fold(0.0, f64::max);
    let peak_tokens = rows.iter().map(|r| r.tokens).max().unwrap_or(0) as f64;
    let slot = WIDTH / BARS as f64;
    let height = |value: f64, peak: f64| {
        if peak > 0.0 {
            (value / peak * (HEIGHT - 4.0)).max(2.0)
        } else {
            2.0
        }
    };
    html! {
        section {
            h2 { @if by_cost { "Cost per turn, and tokens" } @else { "Time per turn, and tokens" } }
            @if rows.is_empty() {
                p class="muted" data-testid="no-turns" { "No turn has settled yet. Each turn the driver runs, and each iteration recorded by hand, appears here as a bar coloured by how it ended." }
            } @else {
                svg class="chart" role="img" aria-label={@if by_cost { "cost" } @else { "duration" } " (bars) and tokens (dots) per turn"} data-testid="turn-chart" data-measure=(if by_cost { "usd" } else { "seconds" }) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) {
                    @for (i, row) in rows.iter().enumerate() {
                        @let h = height(measure(row), peak);
                        @let label = row.outcome.map_or("recorded".to_owned(), |o| o.label());
                        rect data-testid="turn-bar" data-outcome=(label) x=(format!("{:.1}", i as f64 * slot)) y=(format!("{:.1}", HEIGHT - h)) width=(format!("{:.1}", slot * 0.8)) height=(format!("{h:.1}")) fill=(outcome_colour(row.outcome)) {
                            title { "iteration " (row.key) " · " (row.provider.as_deref().unwrap_or("?")) " · " (label) ": $" (format!("{:.4}", row.usd)) ", " (row.tokens) " tokens, " (words::duration(seconds(row) as u64)) }
                        }
                        circle data-testid="turn-tokens" cx=(format!("{:.1}", (i as f64 + 0.4) * slot)) cy=(format!("{:.1}", HEIGHT - height(row.tokens as f64, peak_tokens))) r="2.5" fill="#1d232b" {}
                    }
                }
                p class="muted" data-testid="chart-caption" {
                    (words::count(report.turns, "turn")) " · $" (format!("{:.4}", report.usd)) " · " (report.tokens) " tokens · blue advanced, amber quota wait, red failed, grey no advance"
                    @if !by_cost { br; "No turn shown reported a cost (the agent reported no USD, or ran under a plan without per-turn prices), so the bars are each turn's duration." }
                }
            }
        }
    }
}

/// Requirements by review state as one segmented bar.
fn coverage<'a>(states: impl Iterator<Item = &'a str>) -> Markup {
    let states: Vec<&str> = states.collect();
    let total = states.len().max(1) as f64;
    let count = |state: &str| states.iter().filter(|s| **s == state).count();
    html! {
        @if !states.is_empty() {
            div class="bar" data-testid="coverage" title="met / unmet / uncertain / unreviewed" {
                @for state in ["met", "unmet", "uncertain", "unreviewed"] {
                    @let n = count(state);
                    @if n > 0 { span class=(state) data-state=(state) data-count=(n) style=(format!("width: {:.1}%", n as f64 / total * 100.0)) title={(n) " " (state)} {} }
                }
            }
            p class="muted" { (count("met")) " met · " (count("unmet")) " unmet · " (count("uncertain")) " uncertain · " (count("unreviewed")) " unreviewed" }
        }
    }
}

/// A row of the timeline: a recorded iteration, or a turn that ended
/// without recording one (it failed, timed out, or was cancelled), so a
/// run that gave up shows what it tried.
enum Row<'a> {
    Recorded(&'a IterationRecord),
    Unrecorded(&'a Turn),
}

impl Row<'_> {
    fn at(&self) -> Timestamp {
        match self {
            Row::Recorded(r) => r.timestamp,
            Row::Unrecorded(t) => t.ended_at.unwrap_or(t.started_at),
        }
    }
}

/// Each recorded iteration with when, who, how long its turn took, what it
/// decided, how the turn ended and what it cost, and each turn that ended
/// without a record, newest first, linking to its record and log.
fn timeline(s: &Snapshot) -> Markup {
    let ledger = &s.ledger.ledger;
    let turn = |iteration: u64| {
        let key = iteration.to_string();
        s.cost.rows.iter().rev().find(|row| row.key == key)
    };
    // Unrecorded turns as far back as the records shown (all of them when
    // no record is), so the two lists cover the same stretch of time.
    let since = ledger.recent.first().map(|r| r.timestamp);
    let mut rows: Vec<Row<'_>> = ledger.recent.iter().map(Row::Recorded).collect();
    rows.extend(
        s.turns
            .turns
            .iter()
            .filter(|t| t.outcome.is_some_and(|o| !o.advanced()))
            .filter(|t| since.is_none_or(|since| t.ended_at.unwrap_or(t.started_at) >= since))
            .map(Row::Unrecorded),
    );
    rows.sort_by_key(|row| std::cmp::Reverse(row.at()));
    let duration = |ran: Option<&Turn>| {
        html! {
            td data-testid="turn-duration" data-seconds=[ran.and_then(|t| t.seconds)] title=[ran.map(|t| format!("started {}", t.started_at))] {
                (ran.and_then(|t| t.seconds).map_or("—".to_owned(), |seconds| format!("took {}", words::duration(seconds))))
            }
        }
    };
    html! {
        section {
            h2 { "Iterations" }
            @if rows.is_empty() {
                p class="muted" data-testid="no-iterations" { "No iteration recorded yet. Each turn's record appears here, newest first: the agent records it with `loopx append-iteration` (the driver's turns do this), and turns that end without one show here too." }
            } @else {
                div class="table timeline" {
                    table {
                        thead { tr { th { "Iteration" } th { "When" } th { "By" } th { "Took" } th { "Decision" } th { "Turn" } th { "Cost" } th class="wide" { "Objective" } } }
                        tbody {
                            @for row in &rows {
                                @match row {
                                    Row::Recorded(r) => {
                                        @let settled = turn(r.iteration);
                                        tr data-testid="iteration-row" {
                                            td { a href={"iterations/" (r.iteration)} { "#" (r.iteration) } }
                                            td { (when(r.timestamp, s.now)) }
                                            td { (settled.and_then(|t| t.provider.as_deref()).unwrap_or(loopx_core::cost::BY_HAND)) }
                                            (duration(s.turns.for_iteration(r.iteration)))
                                            td { (r.decision) @if let Some(claim) = r.claim { " " (state_tag(&format!("{claim:?}").to_lowercase())) } }
                                            td data-testid="turn-outcome" { (settled.and_then(|t| t.outcome).map_or("—".to_owned(), |o| o.label())) }
                                            td { "$" (format!("{:.4}", r.budget_delta.usd)) " · " (r.budget_delta.tokens) " tok" }
                                            td class="wide" { (r.objective) }
                                        }
                                    }
                                    Row::Unrecorded(t) => {
                                        @let outcome = t.outcome.map_or("—".to_owned(), |o| o.label());
                                        tr data-testid="failed-turn-row" class="failed-turn" {
                                            td { "#" (t.iteration) span class="muted" { " not recorded" } }
                                            td { (when(t.ended_at.unwrap_or(t.started_at), s.now)) }
                                            td { (t.provider) }
                                            (duration(Some(t)))
                                            td { "—" }
                                            td data-testid="turn-outcome" { span class="tag unmet" { (outcome) } }
                                            td { "—" }
                                            td class="wide muted" { "dispatch " (t.dispatch_id) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn render_overview(app: &App, among_all: bool) -> anyhow::Result<Markup> {
    let dir = app.open(Access::ReadOnly)?;
    let s = snapshot(&dir)?;
    let readback = s.goal.readback();
    let title = readback.objective.current_objective.to_owned();
    Ok(layout(
        &title,
        &format!("loop {} · {}", s.ledger.ledger.run_id, s.dir),
        html! {
            @if among_all { p { a href="../../" data-testid="all-loops-link" { "← all loops" } } }
            (live_section(&s, &readback))
            (refine_form(&readback))
        },
    ))
}

pub async fn overview(
    State(server): State<Arc<Server>>,
    Loop(app): Loop,
) -> Result<Response, Failure> {
    let among_all = matches!(server.loops, Loops::All { .. });
    blocking(move || Ok(Html(render_overview(&app, among_all)?.into_string()).into_response()))
        .await
}

pub async fn live(Loop(app): Loop) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let s = snapshot(&dir)?;
        let readback = s.goal.readback();
        Ok(Html(live_section(&s, &readback).into_string()).into_response())
    })
    .await
}

pub async fn iteration(
    Loop(app): Loop,
    Path(IterationPath { n }): Path<IterationPath>,
) -> Result<Response, Failure> {
    blocking(move || {
        let not_found = || {
            let text = maud::html! { "no iteration " (n) " in this ledger" }.into_string();
            Ok((StatusCode::NOT_FOUND, Html(text)).into_response())
        };
        let Some(n) = super::iteration_number(&n) else {
            return not_found();
        };
        let dir = app.open(Access::ReadOnly)?;
        let detail = match iterations::detail(&dir, n) {
            Ok(detail) => detail,
            Err(error) if error.class == ErrorClass::NotFound => return not_found(),
            Err(error) => return Err(error.into()),
        };
        let record = &detail.record;
        let list = |items: &[String]| html! { @if items.is_empty() { span class="muted" { "none" } } @else { ul { @for i in items { li { (i) } } } } };
        let body = html! {
            p { a href="../" { "← overview" } }
            section {
                h2 { "Iteration " (record.iteration) }
                div class="table" { table {
                    tr { th { "Decision" } td data-testid="decision" { (record.decision) @if !record.stop_reason.is_empty() { " (" (record.stop_reason) ")" } } }
                    tr { th { "Mode" } td { (record.mode) } }
                    tr { th { "Objective" } td { (record.objective) } }
                    tr { th { "Recorded" } td { (record.timestamp) " · operation " (record.operation_id) } }
                    tr { th { "Spend" } td { (record.budget_delta.tokens) " tokens, $" (format!("{:.4}", record.budget_delta.usd)) } }
                    tr { th { "Next action" } td { (record.proposed_next_action) } }
                    tr { th { "Output" } td { (record.output) } }
                } }
                h3 { "Evidence" } (list(&record.evidence_checked.evidence_ids))
                h3 { "Actions taken" } (list(&record.actions_taken))
                h3 { "Remaining gaps" } (list(&record.remaining_gaps))
            }
            section {
                h2 { "Driver log" }
                @match (&detail.log, &detail.dispatch) {
                    (Some(log), Some(dispatch)) => { p class="muted" { (dispatch.dispatch_id) " · " (dispatch.provider) } pre data-testid="log" { (log) } }
                    _ => p class="muted" { "This iteration was not recorded under the driver, or its log is gone." },
                }
            }
            @if let Some(snapshot) = &detail.snapshot {
                section data-testid="snapshot" {
                    h2 { "Workspace" }
                    p { "Turn " (snapshot.turn) ": " (snapshot.stat.words()) }
                    div class="table" { table {
                        tr { th { "Before" } td data-testid="snapshot-before" { (short_digest(&snapshot.before)) } }
                        tr { th { "After" } td data-testid="snapshot-after" { (short_digest(&snapshot.after)) } }
                    } }
                    p class="muted" { "loopx snapshot diff " (snapshot.turn) " shows the patch; loopx rollback --to " (snapshot.turn) " restores it." }
                }
            }
        };
        Ok(Html(layout(&format!("Iteration {n}"), &dir.display(), body).into_string()).into_response())
    })
    .await
}

/// Every registered loop, one row each in one table, redrawn live like an
/// overview: a page that holds many loops stays a page to scan.
fn loops_section(view: &AllLoops, now: Timestamp) -> Markup {
    html! {
        div id="live" data-src={"fragment/loops?start=" (view.start)} {
            section {
                h2 { "Loops" }
                p class="muted" data-testid="loop-count" {
                    (words::count(view.count as u64, "loop")) " registered in " (view.registry)
                    @if view.start > 0 || view.next.is_some() {
                        " · showing " (view.start + 1) "–" (view.start + view.loops.len())
                        @if view.start > 0 { " · " a href={"?start=" (view.start.saturating_sub(loopx_app::all_loops::LOOPS_PAGE))} { "previous" } }
                        @if let Some(next) = view.next { " · " a data-testid="next-loops" href={"?start=" (next)} { "next" } }
                    }
                }
                @if view.loops.is_empty() {
                    p data-testid="no-loops" class="muted" { "No loop is registered yet: `loopx init` registers the loop it creates, `loopx drive` the loop it runs, `loopx arm` the loop it arms." }
                } @else {
                    div class="table" {
                        table class="loops" {
                            thead { tr { th { "Loop" } th { "Verdict" } th { "Last activity" } th { "Iterations" } th { "Cost" } } }
                            tbody { @for row in &view.loops { (loop_row(row, now)) } }
                        }
                    }
                }
            }
            @if !view.passed_over.is_empty() {
                section data-testid="passed-over" {
                    h2 { "Registry files passed over" }
                    ul { @for problem in &view.passed_over { li { (problem) } } }
                }
            }
        }
    }
}

/// One loop: a link into its own dashboard, its verdict in words and
/// colour (the command that acts on it on hover), last activity, its
/// iterations as a bar and what it cost; or, when it cannot be read, why.
fn loop_row(row: &LoopRow, now: Timestamp) -> Markup {
    let reach = wire_name(row.reach);
    let named = |name: &str| row.budgets.iter().find(|b| b.name == name);
    html! {
        tr data-testid="loop-row" data-id=(row.id) data-reach=(reach) {
            td {
                @if row.reach == Reach::Readable {
                    a href={"loops/" (row.id) "/"} data-testid="loop-link" { (row.goal.as_deref().unwrap_or(&row.loop_dir)) }
                } @else {
                    (row.loop_dir)
                }
                br;
                span class="muted" title=(row.sources.iter().map(wire_name).collect::<Vec<_>>().join(", ")) { (row.loop_dir) }
            }
            @match &row.health {
                Some(health) => {
                    @let state = wire_name(health.state);
                    @let tone = wire_name(health.tone);
                    td class={"health-cell tone-" (tone)} data-testid="health" data-state=(state) data-tone=(tone) title=[health.command.as_deref()] { (health.line) }
                }
                None => td data-testid="loop-problem" { (state_tag(&reach)) " " (row.problem.as_deref().unwrap_or_default()) },
            }
            td class="nowrap" { @if let Some(at) = row.last_activity { span data-testid="last-activity" { (when(at, now)) } } @else { "—" } }
            td class="nowrap" {
                @if let Some(b) = named("iterations").filter(|b| b.max > 0.0) {
                    div data-testid="budget-iterations" data-used=(b.used) data-max=(b.max) { (bar(b.used, b.max)) span class="muted" { (b.figure(b.used)) " of " (b.figure(b.max)) } }
                } @else { "—" }
            }
            td class="nowrap" data-testid="loop-cost" {
                @match named("usd") {
                    Some(b) => { (b.figure(b.used)) @if b.max > 0.0 { span class="muted" { " of " (b.figure(b.max)) } } },
                    None => "—",
                }
            }
        }
    }
}

/// `--all`: the all-loops page.
pub async fn all_loops(
    State(server): State<Arc<Server>>,
    Query(page): Query<super::LoopsPage>,
) -> Result<Response, Failure> {
    blocking(move || {
        let view = server.all_loops(&page)?;
        let subtitle = format!("every loop registered in {}", view.registry);
        let page = layout("All loops", &subtitle, loops_section(&view, clock::now()));
        Ok(Html(page.into_string()).into_response())
    })
    .await
}

/// `--all`: the rows alone, for the page's live refresh.
pub async fn all_loops_live(
    State(server): State<Arc<Server>>,
    Query(page): Query<super::LoopsPage>,
) -> Result<Response, Failure> {
    blocking(move || {
        let view = server.all_loops(&page)?;
        Ok(Html(loops_section(&view, clock::now()).into_string()).into_response())
    })
    .await
}
