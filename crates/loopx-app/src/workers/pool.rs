//! `drive --workers N`: N worker slots in one driver process, and the
//! merge queue between them and the target branch.
//!
//! Each slot, on its own thread with its own connection to the store:
//! asks the loop's stop conditions (the goal's budgets and the done
//! arbiter, shared by every worker); claims the first todo it may work
//! through the goal's leases (two workers never hold one todo, on this
//! host or another); makes or finds the todo's worktree; runs one turn
//! there through the turn protocol (`crate::driver::turn`, recorded in
//! its own turn journal under its own agent id); commits what the turn
//! left; and submits the branch to the queue when the turn did its part,
//! or gives the todo back when it did not. The calling thread merges the
//! queue meanwhile ([`super::merge`]), one entry at a time, and relays
//! the workers' progress.
//!
//! A worker killed with its turn (the whole driver, `kill -9`) leaves its
//! todo's lease to expire and its worktree and turn journal as they were:
//! the next run settles the open turn ([`settle_left_turns`]), and
//! whichever worker claims the todo next takes the worktree over where it
//! was left. Its cost is charged once, under the dispatch's id.

use super::merge::{self, Merged};
use super::worktree;
use crate::containment::Containment;
use crate::driver::options::{Options, Progress, Target, Workers};
use crate::driver::run::Ended;
use crate::driver::runner::TurnRunner;
use crate::driver::turn::{run_turn, TurnContext, WorkerTurn};
use crate::goal::GoalTarget;
use crate::loop_dir::{LoopDir, Place};
use crate::snapshot::git::Repo;
use crate::{clock, platform};
use anyhow::{Context as _, Result};
use loopx_core::driver::classify;
use loopx_core::driver::provider::{self, Launcher};
use loopx_core::driver::session::{Exit, TurnResult};
use loopx_core::driver::{DriverState, Settlement, TurnOutcome};
use loopx_core::goal::todo::Availability;
use loopx_core::goal::Actor;
use loopx_core::ledger::arbiter::arbitrate;
use loopx_core::workers::{self, Entry, QueueRequest};
use loopx_store::sqlite::Access;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;

/// How often an idle worker and an idle queue look at the store again.
const POLL: Duration = Duration::from_millis(200);

/// How long a submitted todo's lease is extended, so that no other
/// worker takes it up while it waits in line (a queue that stops moving
/// lets it lapse, and a restart finds the entry still queued).
const QUEUED_LEASE_SECONDS: u64 = 6 * 3600;

/// What the slots share: why the run is ending (the first reason wins),
/// how many turns ran, and how many are running.
struct Shared {
    ending: Mutex<Option<(Exit, String)>>,
    stopping: AtomicBool,
    turns: AtomicU64,
    busy: AtomicU64,
    failures: AtomicU64,
}

impl Shared {
    fn stop(&self, exit: Exit, reason: String) {
        let mut ending = self.ending.lock().unwrap_or_else(|p| p.into_inner());
        if ending.is_none() {
            *ending = Some((exit, reason));
        }
        self.stopping.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// A worker thread's progress, relayed to the thread that owns the
/// terminal.
struct Relay(Sender<String>);

impl Progress for Relay {
    fn say(&self, line: &str) {
        let _ = self.0.send(line.to_owned());
    }

    fn running(&self, _label: Option<String>) {}
}

/// What every slot is given.
struct Slots<'a> {
    /// Where the loop is: each slot opens its own connection.
    place: Place<'a>,
    options: &'a Options,
    logs: &'a Path,
    containment: &'a Containment,
    runner: &'a (dyn TurnRunner + Sync),
    root: &'a Path,
    target: &'a str,
    run: &'a str,
    host: &'a str,
    remote: Option<&'a str>,
    shared: &'a Shared,
}

/// Run the workers and the queue until the loop should stop and the
/// queue is empty. The driver lock is held and the driver registered by
/// the caller (`crate::driver::run::drive`).
pub fn run(
    dir: &LoopDir,
    options: &Options,
    workers: &Workers,
    logs: &Path,
    containment: &Containment,
    runner: &(dyn TurnRunner + Sync),
    progress: &dyn Progress,
) -> Result<Ended> {
    let root = options.root.as_path();
    let repo = Repo::at(root);
    let target = (workers.target_branch.clone())
        .context("the target branch is resolved before the run starts")?;
    let run_id = dir.read()?.ledger.run_id;
    let host = workers.host.as_str();
    let remote = workers.push.as_deref();
    // With a remote, its target: one that cannot be fetched stops the run
    // here, before any worker starts.
    let tip = worktree::tip(&repo, root, &target, remote)?;
    for slot in [1, workers.count] {
        Actor::agent(&workers::agent_id(&options.agent_id, slot, host)).map_err(|error| {
            anyhow::anyhow!("--agent-id and --host-id make worker ids that are not ids: {error}")
        })?;
    }
    settle_left_turns(dir, host, progress)?;
    let say = |line: &str| progress.say(line);
    let setup = merge::Setup {
        root,
        repo: &repo,
        target: &target,
        mode: workers.merge,
        goal_id: &options.goal_id,
        host,
        remote,
        runner,
        say: &say,
        review: crate::panel::enabled(dir, options.panel)?.then(|| merge::Review {
            executor: crate::focus::candidate::family_of(&executor_name(options)),
            transport: options.transport.as_deref(),
        }),
    };
    // A merge a killed run of this host left open is settled before
    // anything else (another host's is that host's, while it lives).
    if (dir.queue()?.merging()).is_some_and(|m| m.merger.as_deref().is_none_or(|h| h == host)) {
        merge::next(dir, &setup)?;
    }
    let pruned = worktree::prune(dir, root, &repo, &run_id, &dir.queue()?)?;
    if !pruned.worktrees.is_empty() || !pruned.branches.is_empty() {
        progress.say(&format!(
            "pruned what a stopped run left: worktrees [{}], branches [{}]",
            pruned.worktrees.join(", "),
            pruned.branches.join(", ")
        ));
    }
    progress.say(&format!(
        "{} workers on goal {} as host {host}, landing on {target}{} (at {}) by {}",
        workers.count,
        options.goal_id,
        remote.map(|r| format!(" of {r}")).unwrap_or_default(),
        &tip[..tip.len().min(12)],
        workers.merge.as_str()
    ));
    let shared = Shared {
        ending: Mutex::new(None),
        stopping: AtomicBool::new(false),
        turns: AtomicU64::new(0),
        busy: AtomicU64::new(0),
        failures: AtomicU64::new(0),
    };
    let slots = Slots {
        place: dir.place(),
        options,
        logs,
        containment,
        runner,
        root,
        target: &target,
        run: &run_id,
        host,
        remote,
        shared: &shared,
    };
    // Turns side by side: one's end must not sweep another's processes.
    platform::run_turns_concurrently();
    let (tx, rx) = mpsc::channel::<String>();
    let scoped = std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for slot in 1..=workers.count {
            let tx = tx.clone();
            let slots = &slots;
            handles.push(scope.spawn(move || {
                let relay = Relay(tx);
                let result = work(slots, slot, &relay);
                if let Err(error) = &result {
                    slots.shared.stop(
                        Exit::RuntimeError,
                        format!("worker {slot} stopped by a runtime error: {error:#}"),
                    );
                }
            }));
        }
        drop(tx);
        // The queue, on this thread, until every worker is gone and
        // nothing waits to merge.
        loop {
            while let Ok(line) = rx.try_recv() {
                progress.say(&line);
            }
            let workers_gone = handles.iter().all(|h| h.is_finished());
            let signalled = platform::stop_signal().is_some();
            let step = match signalled {
                true => Merged::Idle,
                false => merge::next(dir, &setup).inspect_err(|_| {
                    shared.stop(Exit::RuntimeError, "the merge queue failed".into())
                })?,
            };
            if step != Merged::Idle {
                continue;
            }
            if workers_gone {
                break;
            }
            match rx.recv_timeout(POLL) {
                Ok(line) => progress.say(&line),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
        }
        while let Ok(line) = rx.try_recv() {
            progress.say(&line);
        }
        Ok(())
    });
    // Every worker is done: whatever any turn detached goes now.
    platform::kill_adopted(&[]);
    scoped?;
    let turns = shared.turns.load(Ordering::SeqCst);
    if let Err(error) = crate::driver::capture::sweep_logs(
        logs,
        None,
        loopx_core::driver::capture::Retention::DEFAULT,
    ) {
        progress.say(&format!(
            "warning: old driver logs were not removed ({error})"
        ));
    }
    let (exit, reason) = match platform::stop_signal() {
        Some(signal) => (signal.exit(), format!("stopped by {}", signal.name())),
        None => shared
            .ending
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or((Exit::Done, "no work left".into())),
    };
    let queue = dir.queue()?;
    Ok(Ended {
        exit,
        reason: format!(
            "{reason}; merge queue: {} landed, {} needs review, {} queued",
            queue.landed,
            queue.count(workers::EntryState::NeedsReview),
            queue.count(workers::EntryState::Queued)
        ),
        turns,
    })
}

/// How long a worker's claim lasts: its turn's timeout, with room for
/// making the worktree before and committing after. A worker killed with
/// its driver holds the todo no longer than this.
fn lease_seconds(iteration_timeout: Duration) -> u64 {
    let timeout = iteration_timeout.as_secs();
    timeout + (timeout / 10).max(10)
}

/// What a slot should do next.
enum Pick {
    Work { todo_id: String, title: String },
    Wait,
    Stop(Exit, String),
}

/// One slot's life: pick, work, repeat, until the run ends.
fn work(slots: &Slots<'_>, slot: u32, progress: &Relay) -> Result<()> {
    let dir = LoopDir::open(slots.place, Access::ReadWrite)
        .context("a worker could not open the loop")?;
    let dir = &dir;
    let agent_id = workers::agent_id(&slots.options.agent_id, slot, slots.host);
    let stream = workers::turn_stream(slot, slots.host);
    loop {
        if slots.shared.stopping() || platform::stop_signal().is_some() {
            return Ok(());
        }
        let (todo_id, title) = match pick(dir, slots, &agent_id)? {
            Pick::Work { todo_id, title } => (todo_id, title),
            Pick::Wait => {
                platform::pause(POLL);
                continue;
            }
            Pick::Stop(exit, reason) => {
                slots.shared.stop(exit, reason);
                return Ok(());
            }
        };
        slots.shared.busy.fetch_add(1, Ordering::SeqCst);
        let worked = work_on(dir, slots, &agent_id, &stream, &todo_id, &title, progress);
        slots.shared.busy.fetch_sub(1, Ordering::SeqCst);
        worked?;
    }
}

/// The todo this worker takes up now, claimed; or why it waits or stops.
fn pick(dir: &LoopDir, slots: &Slots<'_>, agent_id: &str) -> Result<Pick> {
    let options = slots.options;
    if let Some(max) = options.max_iterations {
        if slots.shared.turns.load(Ordering::SeqCst) >= max {
            return Ok(Pick::Stop(
                Exit::Done,
                format!("ran the {max} turns asked for"),
            ));
        }
    }
    let reading = dir.read()?;
    let now = clock::now();
    let verdict = arbitrate(&reading.ledger, dir.sentinels(), now);
    if verdict.done {
        return Ok(Pick::Stop(
            Exit::Done,
            format!(
                "the done arbiter reports {}",
                verdict.reason.unwrap_or("done")
            ),
        ));
    }
    if verdict.paused || reading.ledger.pending_claim.is_some() {
        return Ok(Pick::Wait);
    }
    let failures = slots.shared.failures.load(Ordering::SeqCst);
    if failures >= u64::from(options.limits.max_failures) {
        return Ok(Pick::Stop(
            Exit::MaxFailures,
            format!("{failures} worker turns in a row did not advance"),
        ));
    }
    let queue = dir.queue()?;
    let goal = dir.goal(&options.goal_id)?.goal;
    let me = GoalTarget {
        goal_id: options.goal_id.clone(),
        actor: Actor::Agent(agent_id.to_owned()),
        expected_instance: None,
    };
    for todo in &goal.todos {
        if !queue.may_work(&todo.id) {
            continue;
        }
        let mine = todo.holder(now) == Some(agent_id);
        if !mine && todo.availability(now) != Availability::Runnable {
            continue;
        }
        if !mine {
            let ttl = lease_seconds(options.iteration_timeout);
            let op = super::fresh_op("worker-claim")?;
            // Another worker (or host) may have taken it since the read.
            if crate::goal::todo::claim(dir, &me, &todo.id, ttl, "taken up by a worker", &op)
                .is_err()
            {
                continue;
            }
        }
        return Ok(Pick::Work {
            todo_id: todo.id.clone(),
            title: todo.title.clone(),
        });
    }
    let idle = slots.shared.busy.load(Ordering::SeqCst) == 0;
    let in_line = queue.head().is_some() || queue.merging().is_some();
    // Held by someone else (a worker killed with its driver, another
    // host) or put off: it comes back when its lease lapses or its time
    // comes, as for the loop's own driver.
    let coming_back = goal.todos.iter().any(|t| {
        queue.may_work(&t.id)
            && matches!(
                t.availability(now),
                Availability::Held(_) | Availability::Waiting(_)
            )
    });
    Ok(match idle && !in_line && !coming_back {
        true => Pick::Stop(Exit::Done, "no todo left for a worker to take up".into()),
        false => Pick::Wait,
    })
}

/// One turn on `todo_id`: its worktree, the turn, and what follows.
#[allow(clippy::too_many_arguments)]
fn work_on(
    dir: &LoopDir,
    slots: &Slots<'_>,
    agent_id: &str,
    stream: &str,
    todo_id: &str,
    title: &str,
    progress: &Relay,
) -> Result<()> {
    let options = slots.options;
    // The config as it is now (see `merge::next`).
    let repo = &Repo::at(slots.root);
    let tip = worktree::tip(repo, slots.root, slots.target, slots.remote)?;
    let receipt = super::write(
        dir,
        &super::fresh_op("worker-assign")?,
        &QueueRequest::Assign {
            todo_id: todo_id.to_owned(),
            title: title.to_owned(),
            worker: agent_id.to_owned(),
            branch: workers::branch(slots.run, todo_id),
            worktree: workers::worktree(todo_id),
            base: tip,
        },
    )?;
    let entry = dir
        .queue()?
        .active
        .get(&receipt.todo_id)
        .cloned()
        .context("the entry just assigned")?;
    let path = worktree::prepare(dir, slots.root, repo, &entry, slots.remote)?;
    let (provider_name, launcher) = provider_for(slots)?;
    let reading = dir.read()?;
    let head_before = repo.run(&path, &["rev-parse", "HEAD"])?;
    let message = format!("loopx: todo {todo_id} ({title}), worked by {agent_id}");
    let commit = || worktree::commit_left(&path, agent_id, &message);
    let context = TurnContext {
        dir,
        options,
        logs: slots.logs,
        containment: slots.containment,
        runner: slots.runner,
        progress,
        snapshots: None,
        advice: None,
        worker: Some(WorkerTurn {
            stream,
            agent_id,
            worktree: &path,
            todo_id,
            head_before: &head_before,
            commit: &commit,
        }),
    };
    let turn = run_turn(context, &provider_name, launcher, &reading)?;
    slots.shared.turns.fetch_add(1, Ordering::SeqCst);
    let head = repo.run(&path, &["rev-parse", "HEAD"])?;
    let me = GoalTarget {
        goal_id: options.goal_id.clone(),
        actor: Actor::Agent(agent_id.to_owned()),
        expected_instance: None,
    };
    if turn.result == TurnResult::Advanced && head != entry.base {
        slots.shared.failures.store(0, Ordering::SeqCst);
        // Held while it waits in line; a todo the agent finished or
        // blocked itself keeps what the agent said.
        let _ = crate::goal::todo::renew(
            dir,
            &me,
            todo_id,
            QUEUED_LEASE_SECONDS,
            "submitted to the merge queue",
            &super::fresh_op("worker-hold")?,
        );
        if let Some(remote) = slots.remote {
            // What another host's queue merges, or its worker takes over.
            worktree::push_branch(repo, slots.root, remote, &entry.branch)?;
        }
        let submitted = super::write(
            dir,
            &super::fresh_op("worker-submit")?,
            &QueueRequest::Submit {
                todo_id: todo_id.to_owned(),
                worker: agent_id.to_owned(),
                head: head.clone(),
            },
        );
        if let Err(error) = submitted {
            // Discarded by the operator, or taken over, meanwhile: the
            // queue's word stands; the work stays on its branch.
            progress.say(&format!(
                "{agent_id}: todo {todo_id} was not submitted: {error:#}"
            ));
            return Ok(());
        }
        progress.say(&format!(
            "{agent_id}: todo {todo_id} submitted to the merge queue ({} at {})",
            entry.branch,
            &head[..head.len().min(12)]
        ));
    } else {
        slots.shared.failures.fetch_add(1, Ordering::SeqCst);
        let why = match turn.result {
            TurnResult::Advanced => "the turn changed nothing",
            other => other.sentence(),
        };
        release_to_frontier(
            dir,
            &entry_as(&entry, agent_id),
            &format!("{agent_id}'s turn did not finish it: {why}; its worktree is kept"),
        );
    }
    Ok(())
}

fn entry_as(entry: &Entry, worker: &str) -> Entry {
    Entry {
        worker: worker.to_owned(),
        ..entry.clone()
    }
}

/// The name the workers' provider goes by: the first named, or `cmd`.
fn executor_name(options: &Options) -> String {
    match &options.target {
        Target::Command(_) => "cmd".to_owned(),
        Target::Providers(names) => names.first().cloned().unwrap_or_default(),
    }
}

/// The provider a worker's turn runs on, with its launcher: the command,
/// or the first named provider found installed (the pinned one under
/// trusted-local).
fn provider_for(slots: &Slots<'_>) -> Result<(String, Option<&'static Launcher>)> {
    match &slots.options.target {
        Target::Command(_) => Ok(("cmd".to_owned(), None)),
        Target::Providers(names) => names
            .iter()
            .find_map(|name| {
                let name = provider::find(name).map_or(name.as_str(), |p| p.name);
                let found = slots.containment.launcher_for(name)?;
                Some((name.to_owned(), Some(found.launcher)))
            })
            .context("none of the providers asked for is installed"),
    }
}

/// Give `entry`'s todo back to the frontier, saying why: the lease
/// released as its worker (a note with the reason either way). Best
/// effort after the queue's commit: a todo the agent already finished,
/// blocked or gave back keeps what it has.
pub fn release_to_frontier(dir: &LoopDir, entry: &Entry, reason: &str) {
    let target = GoalTarget {
        goal_id: loopx_core::goal::DEFAULT_GOAL_ID.to_owned(),
        actor: Actor::Agent(entry.worker.clone()),
        expected_instance: None,
    };
    if let Ok(op) = super::fresh_op("worker-release") {
        let _ = crate::goal::todo::release(dir, &target, &entry.todo_id, reason, &op);
    }
}

/// Settle the turns a killed run left open in the workers' journals:
/// each agent waited out (or found gone), its output read for its cost,
/// and the turn settled as interrupted, charged once under its dispatch's
/// id. Its todo's lease lapses by itself; its worktree is kept.
pub fn settle_left_turns(dir: &LoopDir, host: &str, progress: &dyn Progress) -> Result<()> {
    // Every worker journal in one read; this host's are its own to settle.
    let journals = dir
        .authority()
        .store()
        .load_prefixed(workers::TURN_STREAMS)?;
    for (stream, snapshot) in journals {
        let Some(slot) =
            (1..=workers::MAX_WORKERS).find(|n| stream == workers::turn_stream(*n, host))
        else {
            continue;
        };
        let state: DriverState = serde_json::from_str(&snapshot.state)?;
        let Some(intent) = state.open else {
            continue;
        };
        // Its driver is gone, so nothing else ends an agent that still
        // runs: it would write to a worktree another worker takes over.
        if crate::driver::end_left_agent(dir, &intent.dispatch_id) {
            progress.say(&format!(
                "ended worker {slot}'s agent of {}, left running by a stopped run",
                intent.dispatch_id
            ));
        }
        let structured = provider::find(&intent.provider)
            .and_then(|p| p.launchers.first())
            .map_or(provider::Structured::Text, |l| l.structured);
        let output = crate::driver::agent_log(dir, &intent.log);
        let read = classify::read(classify::agent_output(&output), structured, clock::now());
        let settlement = Settlement {
            dispatch_id: intent.dispatch_id.clone(),
            iteration: intent.iteration,
            provider: intent.provider.clone(),
            outcome: TurnOutcome::Interrupted,
            exit_status: None,
            usage: read.usage.clone(),
            settled_at: clock::now(),
            note: "settled after a driver restart: the worker's turn was cut short; its worktree is kept for whoever takes the todo up".into(),
        };
        crate::driver::settle_turn(dir, &stream, &read, settlement)?;
        let _ = std::fs::remove_file(crate::driver::record_path(
            &dir.path(crate::loop_dir::DRIVER_LOGS),
            &intent.dispatch_id,
        ));
        progress.say(&format!(
            "settled worker {slot}'s turn {} that a stopped run left open",
            intent.dispatch_id
        ));
    }
    Ok(())
}
