//! The driver: everything `loopx drive` and `loopx recover` do, above how
//! a process runs.
//!
//! - [`run`]: one drive run, the loop over the core's step, with
//!   [`options`]: what it is given.
//! - [`turn`]: the turn protocol (intent → start → watch → capture →
//!   classify → settle), written once; the success check beside it.
//! - [`runner`]: the seam under both, [`runner::TurnRunner`]: how a
//!   process is started, watched, limited and reaped. The binary provides
//!   the real one.
//! - [`reviewer`]: a panel reviewer through the same runner.
//! - [`host`]: a command the host runs on its own behalf (the success
//!   check, the owner's executable checks, Lake) through the same runner.
//! - [`env`]: the names of the variables a started process sees.
//! - `watch`: a running turn's output read as it arrives (its CLI's
//!   retries shown, and ended past the loop's policy).
//!
//! This file holds the driver's bookkeeping, one function per commit or
//! read: register and unregister a driver, ask the core's step what to do
//! next (with should-run computed from the same reads), record an intent
//! before a turn and settle it after (its cost charged to the ledger
//! first), say what the driver waits for (an unreachable store included:
//! how long it waits between tries, and the note it leaves when the store
//! is back), settle a verified success claim, plan and apply a crash
//! recovery, and summarise the driver for `status`. The agent record beside
//! each turn's log (`driver_logs/<dispatch>.pid`) is owned here too,
//! because the driver writes it and recovery reads it.
//!
//! Not here: the policy itself (`loopx_core::driver`).

pub mod capture;
pub mod env;
pub mod host;
pub mod options;
mod outage;
pub mod reviewer;
pub mod run;
pub mod runner;
pub mod turn;
mod watch;

use crate::loop_dir::{LoopDir, Reading, DRIVER_LOCK, DRIVER_LOGS};
use crate::{clock, fsutil, platform};
use anyhow::{bail, Context as _, Result};
use loopx_core::digest::Digest;
use loopx_core::driver::classify::{self, Reading as OutputReading};
use loopx_core::driver::provider::{self, Family, Structured};
use loopx_core::driver::session::Session;
use loopx_core::driver::step::{self, Situation, Step};
use loopx_core::driver::{
    self, DriverOwner, DriverRequest, DriverState, DriverSummary, HostAttestation, Intent,
    Liveness, Observed, RecoveryPlan, Registration, RunEnded, Settlement, TurnOutcome, TurnRetry,
    Waiting, Workspace,
};
use loopx_core::focus::candidate::Hold;
use loopx_core::focus::plan::PlanState;
use loopx_core::goal::continuation::should_run;
use loopx_core::goal::Actor;
use loopx_core::ledger::arbiter::arbitrate;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::{CheckRun, LedgerContext, LedgerOwner, LedgerRequest, STREAM};
use loopx_core::operation::OperationId;
use loopx_core::panel::Phase;
use loopx_core::path::LoopPath;
use loopx_store::{Loaded, Step as PairStep};
use serde::Serialize;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

impl LoopDir {
    /// The driver's journal state (empty if no driver ever ran).
    pub fn driver(&self) -> Result<(u64, DriverState)> {
        let Loaded { revision, state } = self.authority().load::<DriverOwner>(driver::STREAM)?;
        Ok((revision, state.unwrap_or_default()))
    }
}

/// What `status` shows of the driver, its registered pid checked against
/// the live processes.
pub fn summary(dir: &LoopDir) -> Result<DriverSummary> {
    Ok(driver::summary(&dir.driver()?.1, platform::alive))
}

/// The step the driver takes next, from one read of the ledger, the goal
/// and the sentinels, with the reading it was decided on. `panel`: this
/// run runs the review panel on a pending candidate.
#[allow(clippy::too_many_arguments)]
pub fn next_step(
    dir: &LoopDir,
    goal_id: &str,
    agent: &str,
    session: &Session,
    turns: u64,
    max_turns: Option<u64>,
    pause_poll: Duration,
    runs_panel: bool,
    replanned_since_turn: bool,
) -> Result<(Reading, Step)> {
    let reading = dir.read()?;
    let now = clock::now();
    let actor = Actor::Agent(agent.to_owned());
    let (goal, frontier) = dir.goal_for_decision(goal_id, &actor, now)?;
    let sentinels = dir.sentinels();
    let verdict = arbitrate(&reading.ledger, sentinels, now);
    let should_run = should_run(
        &reading.ledger,
        &verdict,
        sentinels,
        (&goal.goal, &frontier),
        &actor,
        now,
    );
    let enforce = reading.ledger.config.goal_focus_mode == GoalFocusMode::Enforce;
    // Goal Focus (the candidate stream with it) is read once, and only
    // where it gates: enforce mode. Other loops stage nothing.
    let focus = match enforce {
        true => Some(dir.focus()?),
        false => None,
    };
    let candidate = focus.as_ref().and_then(|f| f.candidate.hold());
    let plan = focus.as_ref().and_then(|f| f.plan.state.as_ref());
    let (panel, strategy) = match &candidate {
        _ if !runs_panel || !enforce => (None, None),
        Some(Hold::Pending(fingerprint)) => {
            let executor = (focus.as_ref())
                .and_then(|f| f.candidate.pending.as_ref())
                .map_or(Family::Unverified, |held| held.candidate.executor_family);
            let budget = crate::panel::budget(dir, Phase::ResultReview, fingerprint, executor)?;
            (Some(budget), None)
        }
        _ => match plan.filter(|p| p.awaits_strategy_review()) {
            Some(awaiting) => {
                let fingerprint = &awaiting.pin().fingerprint;
                // Reviewed for the executor that runs next.
                let executor = (session.current())
                    .map_or(Family::Unverified, crate::focus::candidate::family_of);
                let budget =
                    crate::panel::budget(dir, Phase::StrategyReview, fingerprint, executor)?;
                (None, Some(budget))
            }
            None => (None, None),
        },
    };
    let direction = (focus.as_ref())
        .map(|f| f.gate_closing_signals(now))
        .unwrap_or_default();
    let reviewed_executor = plan
        .filter(|plan| plan.state == PlanState::Active)
        .and_then(|plan| plan.strategy_review.as_ref())
        .map(|review| review.executor.family);
    let step = step::next(&Situation {
        ledger: &reading.ledger,
        verdict: &verdict,
        should_run: &should_run,
        frontier: &frontier,
        session,
        turns,
        max_turns,
        pause_poll: jiff::SignedDuration::try_from(pause_poll)?,
        now,
        candidate: candidate.as_ref(),
        panel,
        strategy,
        direction: &direction,
        reviewed_executor,
        may_replan: runs_panel && enforce && !replanned_since_turn,
        family_of: &crate::focus::candidate::family_of,
    });
    Ok((reading, step))
}

/// `prefix.id`: the operation id of one driver write, stable across a
/// retry of the same write.
pub(crate) fn op(prefix: &str, id: &str) -> Result<OperationId> {
    Ok(OperationId::parse(&format!("{prefix}.{id}"))?)
}

pub(crate) fn write(dir: &LoopDir, id: &OperationId, request: &DriverRequest) -> Result<()> {
    write_on(dir, driver::STREAM, id, request)
}

/// [`write`] to the turn journal `stream`: the loop's own
/// ([`driver::STREAM`]) or a worker's (`loopx_core::workers::turn_stream`).
pub(crate) fn write_on(
    dir: &LoopDir,
    stream: &str,
    id: &OperationId,
    request: &DriverRequest,
) -> Result<()> {
    let now = clock::now();
    dir.authority()
        .execute::<DriverOwner>(stream, id, request, &now, now)?;
    Ok(())
}

/// Register this process as the loop's driver in workspace `root`. A
/// `DriverError::WorkspaceMismatch` comes back inside the error when the
/// loop was driven from another root.
/// `stream`: the loop's driver journal, or a worker run's host's
/// (`loopx_core::workers::host_stream`), whose binding is that host's.
pub fn register(
    dir: &LoopDir,
    stream: &str,
    registration: Registration,
    workspace_root: String,
) -> Result<()> {
    let id = op(
        "register",
        &format!("{}-{}", registration.pid, platform::nonce()),
    )?;
    write_on(
        dir,
        stream,
        &id,
        &DriverRequest::Register {
            registration,
            workspace_root,
        },
    )
}

/// Say goodbye: the driver `pid` no longer runs this loop, and how its
/// run ended (what views show once it is gone).
/// Once gone, the driver leaves `loopx.sqlite` a complete copy on its own.
pub fn unregister(dir: &LoopDir, stream: &str, pid: u32, ended: Option<RunEnded>) -> Result<()> {
    write_on(
        dir,
        stream,
        &op("unregister", &format!("{pid}-{}", platform::nonce()))?,
        &DriverRequest::Unregister { pid, ended },
    )?;
    fold_log(dir, "at the end of the run");
    Ok(())
}

/// Record what the driver is waiting for (`None`: it is not), and the
/// provider it is on.
pub fn set_waiting(
    dir: &LoopDir,
    pid: u32,
    waiting: Option<Waiting>,
    provider: Option<&str>,
) -> Result<()> {
    let request = DriverRequest::Wait {
        pid,
        waiting,
        provider: provider.map(str::to_owned),
    };
    // Waits repeat with other content, so each needs its own id.
    static WAITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WAITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!(
        "{pid}-{}-{}-{n}",
        platform::nonce(),
        clock::now().as_millisecond()
    );
    write(dir, &op("wait", &id)?, &request)
}

/// How long the driver waits before its `attempt`-th retry (from 0) of a
/// call that found the store unreachable: doubling from half a second,
/// capped at ten, with jitter so that drivers on many hosts do not all
/// reconnect in the same instant when the server comes back.
pub fn outage_backoff(attempt: u32) -> Duration {
    let base =
        loopx_core::backoff::doubling(Duration::from_millis(500), attempt, Duration::from_secs(10));
    // 75..=100% of the step: spread, never much shorter.
    let jitter = platform::random_u64() % 26;
    base.mul_f64((75 + jitter) as f64 / 100.0)
}

/// Leave in the driver's state (what `status` shows as the driver's
/// wait, until its next turn starts) that the store was unreachable from
/// `since` for `down_for`, and that the driver resumed. The journal keeps
/// it for good. Best effort: the note is not worth failing a run for.
pub fn store_back(
    dir: &LoopDir,
    pid: u32,
    provider: Option<&str>,
    since: jiff::Timestamp,
    down_for: Duration,
) {
    let now = clock::now();
    let reason = format!(
        "the store at {} was unavailable from {since} for {:.0}s; the driver waited and resumed at {now}, retrying the same operations",
        dir.store_location(),
        down_for.as_secs_f64()
    );
    if let Err(error) = set_waiting(dir, pid, Some(Waiting { until: now, reason }), provider) {
        eprintln!("loopx drive: warning: could not record the store outage in status ({error:#})");
    }
}

/// Record that the open turn's CLI is retrying (its `n`-th retry event
/// this turn), for `status` to show until the turn settles.
pub fn record_retry(dir: &LoopDir, stream: &str, retry: TurnRetry, n: u64) -> Result<()> {
    let id = op("retry", &format!("{}-{n}", retry.dispatch_id))?;
    write_on(dir, stream, &id, &DriverRequest::Retrying { retry })
}

/// Commit the intent of a turn to the turn journal `stream`, before its
/// agent starts.
pub fn intend(dir: &LoopDir, stream: &str, intent: Intent) -> Result<()> {
    write_on(
        dir,
        stream,
        &op("intent", &intent.dispatch_id)?,
        &DriverRequest::Intend {
            intent: Box::new(intent),
        },
    )
}

/// The host's completion gate after the turn of `dispatch_id`: a
/// candidate the turn staged is quarantined if the host saw anything
/// wrong with the turn (`seen`: timeout, truncated output, an incomplete
/// cleanup or prompt delivery, a credential in its output). Run
/// before the settlement, so a driver that dies in between leaves the
/// candidate held, never reviewable; retried under the same operation id.
pub fn quarantine_after_turn(
    dir: &LoopDir,
    dispatch_id: &str,
    seen: &HostAttestation,
) -> Result<Option<Digest>> {
    let id = op("quarantine", dispatch_id)?;
    crate::focus::candidate::quarantine_after_turn(dir, &id, dispatch_id, seen)
}

/// Close a turn: charge its measured cost to the ledger and settle its
/// dispatch, in one atomic commit of both streams, so no crash can leave a
/// turn charged but unsettled (or settled but uncharged). A turn that
/// reported no cost only settles. `stream`: the turn journal the
/// dispatch is open in.
pub fn settle_turn(
    dir: &LoopDir,
    stream: &str,
    read: &OutputReading,
    settlement: Settlement,
) -> Result<()> {
    let charge_id = op("charge", &settlement.dispatch_id)?;
    let settle_id = op("settle", &settlement.dispatch_id)?;
    let charge = charge_request(&settlement.dispatch_id, read);
    let settle = DriverRequest::Settle {
        settlement: Box::new(settlement),
    };
    let Some(charge) = charge else {
        return write_on(dir, stream, &settle_id, &settle);
    };
    let now = clock::now();
    let ledger_context = LedgerContext {
        now,
        operation_id: &charge_id,
        files: dir,
    };
    dir.authority().execute_pair::<LedgerOwner, DriverOwner>(
        &PairStep {
            stream: STREAM,
            operation_id: &charge_id,
            request: &charge,
            context: &ledger_context,
        },
        &PairStep {
            stream,
            operation_id: &settle_id,
            request: &settle,
            context: &now,
        },
        now,
    )?;
    dir.refresh_views_or_warn();
    Ok(())
}

/// Fold the write-ahead log into the database file, so that `loopx.sqlite`
/// alone is a complete copy. Done when a run ends, not after every turn:
/// a fold costs two syncs, the commits are as durable in the log, and the
/// writers fold it themselves once it grows (see the README's storage
/// section). A checkpoint that cannot run now (a reader holds the log) is
/// not an error: the next one, or SQLite's own, catches up.
fn fold_log(dir: &LoopDir, when: &str) {
    if let Err(error) = dir.checkpoint() {
        eprintln!("loopx drive: warning: checkpoint {when} did not run ({error:#}); the commits are durable in the -wal");
    }
}

/// The ledger request that charges a dispatch's measured cost, if it cost
/// anything.
fn charge_request(dispatch_id: &str, read: &OutputReading) -> Option<LedgerRequest> {
    (read.usage.tokens > 0 || read.usage.usd > 0.0).then(|| LedgerRequest::Charge {
        dispatch_id: dispatch_id.to_owned(),
        tokens: read.usage.tokens,
        usd: read.usage.usd,
    })
}

/// Commit a driver-made ledger request, then rewrite the views.
fn ledger_write(dir: &LoopDir, id: &OperationId, request: &LedgerRequest) -> Result<()> {
    let now = clock::now();
    let context = LedgerContext {
        now,
        operation_id: id,
        files: dir,
    };
    dir.authority()
        .execute::<LedgerOwner>(STREAM, id, request, &context, now)?;
    dir.refresh_views_or_warn();
    Ok(())
}

/// Cancel the open dispatch `dispatch_id`, saying why.
fn cancel(dir: &LoopDir, dispatch_id: &str, reason: String) -> Result<()> {
    write(
        dir,
        &op("cancel", dispatch_id)?,
        &DriverRequest::Cancel {
            dispatch_id: dispatch_id.to_owned(),
            reason,
        },
    )
}

/// Settle the pending success claim of `iteration` with the check that
/// ran on it (`name` identifies the run); whether it passed.
pub fn settle_claim(dir: &LoopDir, iteration: u64, check: CheckRun, name: &str) -> Result<bool> {
    let verified = check.passed();
    ledger_write(
        dir,
        &op("claim", name)?,
        &LedgerRequest::SettleClaim { iteration, check },
    )?;
    Ok(verified)
}

/// What the project root looks like now. Outside a git work tree this
/// is one `git rev-parse`; inside, five git commands, none of which runs
/// a program the work tree configures or writes the user's index.
pub fn workspace(root: &Path) -> Workspace {
    let bare = Workspace {
        root: root.display().to_string(),
        head: None,
        changes: None,
    };
    let git = |args: &[&str], inert: &[String], index: Option<&Path>| -> Option<String> {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(root)
            .args(["-c", "core.fsmonitor=false"])
            .args(inert)
            .args(args)
            // A probe: `git status` must not take the index lock.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stderr(Stdio::null());
        if let Some(index) = index {
            command.env("GIT_INDEX_FILE", index);
        }
        let output = command.output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    };
    // Where the work tree and its git directory are, in one call.
    let Some(located) = git(
        &["rev-parse", "--show-toplevel", "--absolute-git-dir"],
        &[],
        None,
    ) else {
        return bare;
    };
    let mut lines = located.lines();
    let (Some(top), Some(git_dir)) = (lines.next(), lines.next()) else {
        return bare;
    };
    // A probe reads a copy of the user's index: `git diff` would write the
    // stat data it refreshes into the user's own.
    let index = crate::snapshot::git::index_copy_in(Path::new(git_dir.trim()));
    let index = index.as_ref().map(|i| i.path());
    // Nor may it run a filter or diff program the work tree configures.
    let inert = crate::snapshot::git::inert_filters(root);
    let head = git(&["rev-parse", "HEAD"], &inert, index).map(|s| s.trim().to_owned());
    let status = git(&["status", "--porcelain=v1", "-uall"], &inert, index).unwrap_or_default();
    let diff = git(
        &["diff", "--no-ext-diff", "--no-textconv", "HEAD"],
        &inert,
        index,
    )
    .unwrap_or_default();
    let changes = Digest::of_bytes(format!("{status}\n{diff}").as_bytes()).to_string();
    Workspace {
        root: top.trim().to_owned(),
        head,
        changes: Some(changes),
    }
}

/// Hold the loop's driver lock for as long as the value lives. The lock
/// dies with the process, so a dead driver never blocks the next one.
pub fn take_lock(dir: &LoopDir) -> Result<File> {
    if let Some(file) = fsutil::try_lock(&dir.path(DRIVER_LOCK))? {
        return Ok(file);
    }
    let (_, state) = dir.driver()?;
    let who = state
        .registration
        .map(|r| format!(" (pid {}, since {})", r.pid, r.started_at))
        .unwrap_or_default();
    bail!("another driver{who} is running this loop; one driver per loop: stop it first, or watch it with `loopx status --dir {}`", dir.display())
}

/// The private directory of turn logs and agent records, created or
/// narrowed to its owner; a symlink or a file in its place is refused.
pub fn log_dir(dir: &LoopDir) -> Result<PathBuf> {
    let logs = dir.path(DRIVER_LOGS);
    match logs.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
            bail!(
                "{} must be a real directory, not a symlink or a file",
                logs.display()
            )
        }
        Ok(_) => {
            // Logs hold everything agents print, secrets included: an
            // older or hand-made directory is narrowed to its owner.
            platform::make_private_dir(&logs)
                .with_context(|| format!("cannot make {} private (0700)", logs.display()))?;
            Ok(logs)
        }
        Err(_) => {
            fsutil::create_private_dir(&logs)?;
            Ok(logs)
        }
    }
}

/// The durable record of a dispatch's agent, beside its log.
pub fn record_path(logs: &Path, dispatch_id: &str) -> PathBuf {
    logs.join(format!("{dispatch_id}.pid"))
}

/// What the record says before the agent is let run.
pub const NOT_STARTED: &str = "not-started";

/// Replace the record of `dispatch_id` with `content`, durably: written to
/// a private temporary file, synced, renamed over, and the directory
/// synced, so it is the old or the new record and survives a power cut.
pub fn write_record(logs: &Path, dispatch_id: &str, content: &str) -> std::io::Result<()> {
    let temporary = logs.join(format!(".{dispatch_id}.pid.tmp"));
    let _ = std::fs::remove_file(&temporary);
    let mut file = platform::create_private(&temporary)?;
    file.write_all(format!("{content}\n").as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, record_path(logs, dispatch_id))?;
    platform::sync_dir(logs)
}

/// The record of a running agent: its process group and, where the
/// platform tells, when its leader started, so that a recycled pid is not
/// mistaken for the agent.
pub fn agent_identity(pgid: u32) -> String {
    match platform::start_time(pgid) {
        Some(start) => format!("{pgid} {start}"),
        None => pgid.to_string(),
    }
}

/// What the record of `dispatch_id` says about its agent now.
pub fn agent_liveness(dir: &LoopDir, dispatch_id: &str) -> Liveness {
    let record = format!("{DRIVER_LOGS}/{dispatch_id}.pid");
    let unknown = || Liveness::Unknown {
        record: record.clone(),
    };
    let Ok(bytes) = fsutil::read_no_follow(&dir.path(&record)) else {
        return unknown();
    };
    let text = String::from_utf8_lossy(&bytes);
    if text.trim() == NOT_STARTED {
        return Liveness::NotStarted;
    }
    let mut words = text.split_whitespace();
    let pgid = words.next().and_then(|w| w.parse::<u32>().ok());
    let start = words.next().map(|w| w.parse::<u64>().ok());
    match (pgid, start) {
        // 0 and 1 would name our own group and init's: never a record.
        (Some(pgid), start) if pgid > 1 && start != Some(None) => {
            // A live leader that started at another time is a new process
            // on a recycled pid; a group without its leader is still ours
            // (the kernel does not hand out a pid its group still uses).
            let recycled = start.flatten().is_some_and(|recorded| {
                platform::start_time(pgid).is_some_and(|now| now != recorded)
            });
            if platform::group_alive(pgid) && !recycled {
                Liveness::Alive
            } else {
                Liveness::Gone
            }
        }
        _ => unknown(),
    }
}

/// End the agent of `dispatch_id` if its record says it is still alive
/// (its driver was killed, so nothing else will): its whole group,
/// SIGKILLed. Whether one was alive.
pub fn end_left_agent(dir: &LoopDir, dispatch_id: &str) -> bool {
    if agent_liveness(dir, dispatch_id) != Liveness::Alive {
        return false;
    }
    let record = dir.path(&format!("{DRIVER_LOGS}/{dispatch_id}.pid"));
    let pgid = fsutil::read_no_follow(&record).ok().and_then(|bytes| {
        String::from_utf8_lossy(&bytes)
            .split_whitespace()
            .next()?
            .parse::<u32>()
            .ok()
    });
    if let Some(pgid) = pgid.filter(|pgid| *pgid > 1) {
        platform::kill_group(pgid);
        let deadline = Instant::now() + Duration::from_secs(2);
        while platform::group_alive(pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    true
}

/// The process groups of the agents whose records say they are alive:
/// what must be gone before a loop's processes are all stopped.
pub fn live_agent_groups(dir: &LoopDir) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir.path(DRIVER_LOGS)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let dispatch_id = name.strip_suffix(".pid")?.to_owned();
            (agent_liveness(dir, &dispatch_id) == Liveness::Alive).then_some(())?;
            let bytes = fsutil::read_no_follow(&entry.path()).ok()?;
            String::from_utf8_lossy(&bytes)
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Remove every agent record: called when no dispatch is open, so any
/// record left is stale (a driver killed between its settlement and the
/// record's removal).
pub fn remove_stale_records(logs: &Path) {
    let Ok(entries) = std::fs::read_dir(logs) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".pid") || name.ends_with(".pid.tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How much of a turn's log the driver reads to classify it: structured
/// results and errors come last, and an agent that prints without end must
/// not make the driver read without end.
const AGENT_LOG_TAIL: u64 = 8 * 1024 * 1024;

/// The end of a turn's log, read through the loop directory's confinement
/// (the name comes from the journal); empty when there is none to read.
pub fn agent_log(dir: &LoopDir, log: &str) -> String {
    LoopPath::parse(log)
        .ok()
        .and_then(|path| dir.tail_file(&path, AGENT_LOG_TAIL).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

fn structured_for(provider: &str) -> Structured {
    provider::find(provider)
        .and_then(|p| p.launchers.first())
        .map_or(Structured::Text, |l| l.structured)
}

/// What a starting driver should do about an open intent, after waiting up
/// to `wait_for_agent` for a live agent to finish. Writes nothing.
fn plan_recovery(
    dir: &LoopDir,
    wait_for_agent: Duration,
) -> Result<(Option<Intent>, RecoveryPlan)> {
    let (_, state) = dir.driver()?;
    let Some(intent) = state.open.clone() else {
        return Ok((None, RecoveryPlan::Clear));
    };
    let deadline = Instant::now() + wait_for_agent;
    while agent_liveness(dir, &intent.dispatch_id) == Liveness::Alive && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let reading = dir.read()?;
    let observed_workspace = workspace(Path::new(&intent.workspace.root));
    let plan = driver::recovery_plan(
        Some(&intent),
        &Observed {
            iterations_now: reading.ledger.spent.iterations,
            ledger_revision_now: reading.revision,
            workspace_now: &observed_workspace,
            agent: agent_liveness(dir, &intent.dispatch_id),
        },
    );
    Ok((Some(intent), plan))
}

/// Reconcile an open intent left by a driver that died. Returns the plan
/// it followed; `FailClosed` means stop and let a person look.
pub fn recover(dir: &LoopDir, wait_for_agent: Duration) -> Result<RecoveryPlan> {
    let (intent, plan) = plan_recovery(dir, wait_for_agent)?;
    if let Some(intent) = intent {
        apply_recovery(dir, &intent, &plan)?;
    }
    Ok(plan)
}

/// Carry out `plan` for the open `intent`: settle it or cancel it. A
/// fail-closed plan writes nothing.
fn apply_recovery(dir: &LoopDir, intent: &Intent, plan: &RecoveryPlan) -> Result<()> {
    match plan {
        RecoveryPlan::SettleAdvanced {
            dispatch_id,
            iteration,
        } => {
            let structured = structured_for(&intent.provider);
            let output = agent_log(dir, &intent.log);
            let read = classify::read(classify::agent_output(&output), structured, clock::now());
            let settlement = Settlement {
                dispatch_id: dispatch_id.clone(),
                iteration: *iteration,
                provider: intent.provider.clone(),
                outcome: TurnOutcome::RecoveredAdvanced,
                exit_status: None,
                usage: read.usage.clone(),
                settled_at: clock::now(),
                note: "settled after a driver restart: the agent had recorded its iteration; not re-run".into(),
            };
            settle_turn(dir, driver::STREAM, &read, settlement)?;
        }
        RecoveryPlan::CancelUnstarted { dispatch_id } => cancel(
            dir,
            dispatch_id,
            "cancelled after a driver restart: no iteration recorded, workspace unchanged, agent gone".into(),
        )?,
        RecoveryPlan::Clear | RecoveryPlan::FailClosed { .. } => return Ok(()),
    }
    let _ = std::fs::remove_file(record_path(&dir.path(DRIVER_LOGS), &intent.dispatch_id));
    Ok(())
}

/// What `loopx recover` found, and did when told to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovery {
    /// Whether the plan was carried out (a plan that needs a person never is).
    pub applied: bool,
    pub plan: RecoveryPlan,
    pub open: Option<Intent>,
    /// A live driver of this loop while a dispatch is open: the dispatch is
    /// then probably its current turn, not a leftover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_driver: Option<u32>,
    /// The workspace against the last one loopx left (its after-snapshot
    /// or a rollback), when the loop has workspace snapshots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::snapshot::WorkspaceCheck>,
}

impl Recovery {
    pub fn needs_a_person(&self) -> bool {
        matches!(self.plan, RecoveryPlan::FailClosed { .. })
    }
}

/// The recovery plan for the open dispatch, read-only (no lock, no
/// write), so it can be shown beside a live driver.
pub fn show_recovery(dir: &LoopDir) -> Result<Recovery> {
    let (open, plan) = plan_recovery(dir, Duration::ZERO)?;
    let (_, state) = dir.driver()?;
    let running_driver = state
        .registration
        .filter(|r| open.is_some() && platform::alive(r.pid))
        .map(|r| r.pid);
    Ok(Recovery {
        applied: false,
        plan,
        open,
        running_driver,
        workspace: crate::snapshot::recovery_check(dir),
    })
}

/// Carry out the recovery plan for the open dispatch now, holding the
/// driver lock so no driver starts meanwhile.
pub fn run_recovery(dir: &LoopDir) -> Result<Recovery> {
    let _lock = take_lock(dir)?;
    let (_, state) = dir.driver()?;
    let plan = recover(dir, Duration::ZERO)?;
    Ok(Recovery {
        applied: !matches!(plan, RecoveryPlan::FailClosed { .. }),
        plan,
        open: state.open,
        running_driver: None,
        workspace: crate::snapshot::recovery_check(dir),
    })
}

/// Cancel the open dispatch `dispatch_id` for an operator who has looked,
/// whatever the plan says, holding the driver lock.
pub fn cancel_dispatch(dir: &LoopDir, dispatch_id: &str) -> Result<()> {
    cancel_dispatch_by(dir, dispatch_id, "loopx recover --cancel")
}

/// [`cancel_dispatch`], recording `command` as the operator's means.
pub fn cancel_dispatch_by(dir: &LoopDir, dispatch_id: &str, command: &str) -> Result<()> {
    let _lock = take_lock(dir)?;
    cancel(
        dir,
        dispatch_id,
        format!("cancelled by the operator ({command})"),
    )
}
