//! `loopx drive`: run unattended turns until the loop should stop.
//!
//! Each turn is a fresh agent process in its own process group, in the
//! project root, with the prompt regenerated from state. Before it starts,
//! the driver commits a dispatch intent; after it exits, a settlement.
//! The decisions (classification, failover, recovery) are the core's; this
//! module does the processes, files and clocks.

use anyhow::{bail, Context as _, Result};
use loopx_app::loop_dir::{LoopDir, DRIVER_LOCK, DRIVER_LOGS};
use loopx_app::{clock, platform};
use loopx_core::digest::Digest;
use loopx_core::dispatch::classify::{self, Reading as OutputReading, END_OF_PROMPT};
use loopx_core::dispatch::provider::{self, Launcher, Structured};
use loopx_core::dispatch::session::{Exit, Limits, Next, Session, TurnResult};
use loopx_core::dispatch::{
    self, DriverError, DriverOwner, DriverRequest, Intent, Liveness, Observed, Outcome,
    RecoveryPlan, Registration, Settlement, Waiting, Workspace,
};
use loopx_core::goal::Actor;
use loopx_core::ledger::{CheckRun, LedgerOwner, LedgerRequest, STREAM};
use loopx_core::operation::OperationId;
use loopx_core::path::LoopPath;
use loopx_store::failpoint;
use loopx_store::sqlite::Access;
use loopx_store::AuthorityError;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What runs each turn.
#[derive(Debug, Clone)]
pub enum Target {
    /// Named providers, first available first.
    Providers(Vec<String>),
    /// A shell command; the prompt arrives on its stdin.
    Command(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub root: PathBuf,
    pub target: Target,
    pub goal_id: String,
    pub agent_id: String,
    pub limits: Limits,
    pub iteration_timeout: Duration,
    pub max_iterations: Option<u64>,
    /// How often a paused loop is looked at again.
    pub pause_poll: Duration,
}

/// How a drive run ended.
pub struct Ended {
    pub exit: Exit,
    pub reason: String,
    pub turns: u64,
}

/// Marks an error as the caller's to fix (a wrong `--dir` or `--root`):
/// `drive` exits 2 for it, not 4.
#[derive(Debug)]
pub struct Usage(pub &'static str);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// What the project root looks like now.
pub fn workspace(root: &Path) -> Workspace {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            // A probe: `git status` must not take the index lock.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stderr(Stdio::null())
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let top = git(&["rev-parse", "--show-toplevel"]).map(|s| s.trim().to_owned());
    let Some(top) = top else {
        return Workspace {
            root: root.display().to_string(),
            head: None,
            changes: None,
        };
    };
    let head = git(&["rev-parse", "HEAD"]).map(|s| s.trim().to_owned());
    let status = git(&["status", "--porcelain=v1", "-uall"]).unwrap_or_default();
    let diff = git(&["diff", "HEAD"]).unwrap_or_default();
    let changes = Digest::of_bytes(format!("{status}\n{diff}").as_bytes()).to_string();
    Workspace {
        root: top,
        head,
        changes: Some(changes),
    }
}

fn op(prefix: &str, id: &str) -> Result<OperationId> {
    Ok(OperationId::parse(&format!("{prefix}.{id}"))?)
}

fn unique() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("{:08x}", hasher.finish() as u32)
}

fn driver_write(dir: &LoopDir, id: &OperationId, request: &DriverRequest) -> Result<()> {
    let now = clock::now();
    dir.authority()
        .execute::<DriverOwner>(dispatch::STREAM, id, request, &now, now)?;
    Ok(())
}

/// Hold the loop's driver lock for as long as the value lives. The lock
/// dies with the process, so a dead driver never blocks the next one.
pub fn take_lock(dir: &LoopDir) -> Result<File> {
    let path = dir.path(DRIVER_LOCK);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            let (_, state) = dir.driver()?;
            let who = state
                .registration
                .map(|r| format!(" (pid {}, since {})", r.pid, r.started_at))
                .unwrap_or_default();
            bail!("another driver{who} is running this loop; one driver per loop: stop it first, or watch it with `loopx status --dir {}`", dir.display())
        }
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).context("cannot lock the driver lock")
        }
    }
}

fn log_dir(dir: &LoopDir) -> Result<PathBuf> {
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
            loopx_app::fsutil::create_private_dir(&logs)?;
            Ok(logs)
        }
    }
}

/// The durable record of a dispatch's agent, beside its log.
fn pid_file(logs: &Path, dispatch_id: &str) -> PathBuf {
    logs.join(format!("{dispatch_id}.pid"))
}

/// What the record says before the agent is let run.
const NOT_STARTED: &str = "not-started";

/// Replace the record of `dispatch_id` with `content`, durably: written to
/// a private temporary file, synced, renamed over, and the directory
/// synced, so it is the old or the new record and survives a power cut.
fn write_record(logs: &Path, dispatch_id: &str, content: &str) -> std::io::Result<()> {
    let temporary = logs.join(format!(".{dispatch_id}.pid.tmp"));
    let _ = std::fs::remove_file(&temporary);
    let mut file = platform::create_private(&temporary)?;
    file.write_all(format!("{content}\n").as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, pid_file(logs, dispatch_id))?;
    platform::sync_dir(logs)
}

/// The record of a running agent: its process group and, where the
/// platform tells, when its leader started, so that a recycled pid is not
/// mistaken for the agent.
fn agent_identity(pgid: u32) -> String {
    match platform::start_time(pgid) {
        Some(start) => format!("{pgid} {start}"),
        None => pgid.to_string(),
    }
}

/// What the record of `dispatch_id` says about its agent now.
fn agent_liveness(dir: &LoopDir, dispatch_id: &str) -> Liveness {
    let record = format!("{DRIVER_LOGS}/{dispatch_id}.pid");
    let unknown = || Liveness::Unknown {
        record: record.clone(),
    };
    let Ok(bytes) = loopx_app::fsutil::read_no_follow(&dir.path(&record)) else {
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

fn remove_stale_records(logs: &Path) {
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

/// What a starting driver should do about an open intent, after waiting up
/// to `wait_for_agent` for a live agent to finish. Writes nothing.
pub fn plan_recovery(
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
    let plan = dispatch::recovery_plan(
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
pub fn apply_recovery(dir: &LoopDir, intent: &Intent, plan: &RecoveryPlan) -> Result<()> {
    match plan {
        RecoveryPlan::SettleAdvanced {
            dispatch_id,
            iteration,
        } => {
            let structured = structured_for(&intent.provider);
            let output = agent_log(dir, &intent.log);
            let read = classify::read(classify::agent_output(&output), structured, clock::now());
            charge(dir, dispatch_id, &read)?;
            let settlement = Settlement {
                dispatch_id: dispatch_id.clone(),
                iteration: *iteration,
                provider: intent.provider.clone(),
                outcome: Outcome::RecoveredAdvanced,
                exit_status: None,
                usage: read.usage,
                settled_at: clock::now(),
                note: "settled after a driver restart: the agent had recorded its iteration; not re-run".into(),
            };
            driver_write(
                dir,
                &op("settle", dispatch_id)?,
                &DriverRequest::Settle {
                    settlement: Box::new(settlement),
                },
            )?;
        }
        RecoveryPlan::CancelUnstarted { dispatch_id } => {
            let reason = "cancelled after a driver restart: no iteration recorded, workspace unchanged, agent gone".to_owned();
            driver_write(
                dir,
                &op("cancel", dispatch_id)?,
                &DriverRequest::Cancel {
                    dispatch_id: dispatch_id.clone(),
                    reason,
                },
            )?;
        }
        RecoveryPlan::Clear | RecoveryPlan::FailClosed { .. } => return Ok(()),
    }
    let _ = std::fs::remove_file(pid_file(&dir.path(DRIVER_LOGS), &intent.dispatch_id));
    Ok(())
}

/// How much of a turn's log the driver reads to classify it: structured
/// results and errors come last, and an agent that prints without end must
/// not make the driver read without end.
const AGENT_LOG_TAIL: u64 = 8 * 1024 * 1024;

/// The end of a turn's log, read through the loop directory's confinement
/// (the name comes from the journal); empty when there is none to read.
fn agent_log(dir: &LoopDir, log: &str) -> String {
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

/// Charge a dispatch's measured cost to the ledger, once.
fn charge(dir: &LoopDir, dispatch_id: &str, read: &OutputReading) -> Result<()> {
    if read.usage.tokens == 0 && read.usage.usd == 0.0 {
        return Ok(());
    }
    let request = LedgerRequest::Charge {
        dispatch_id: dispatch_id.to_owned(),
        tokens: read.usage.tokens,
        usd: read.usage.usd,
    };
    let now = clock::now();
    let context = loopx_core::ledger::LedgerContext {
        now,
        operation_id: &op("charge", dispatch_id)?,
        files: dir,
    };
    dir.authority().execute::<LedgerOwner>(
        STREAM,
        &op("charge", dispatch_id)?,
        &request,
        &context,
        now,
    )?;
    dir.refresh_views_or_warn();
    Ok(())
}

/// Run the loop's `success_check` on a pending success claim and settle
/// it. `None` when no claim is pending.
pub fn verify_claim(dir: &LoopDir, root: &Path, timeout: Duration) -> Result<Option<bool>> {
    let ledger = dir.read()?.ledger;
    let Some(iteration) = ledger.pending_claim else {
        return Ok(None);
    };
    let logs = log_dir(dir)?;
    let name = format!(
        "claim-{iteration}-{}{:04x}",
        unique(),
        clock::now().as_millisecond() as u16
    );
    let log_name = format!("{DRIVER_LOGS}/{name}.check.log");
    let log = platform::create_private(&dir.path(&log_name))
        .with_context(|| format!("cannot create {log_name}"))?;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&ledger.config.success_check)
        .current_dir(root)
        .env("LOOPX_DIR", dir.root())
        .stdout(log.try_clone()?)
        .stderr(log);
    let turn = spawn_and_wait(command, None, timeout, &logs, &name);
    let _ = std::fs::remove_file(pid_file(&logs, &name));
    let turn = turn?;
    let check = CheckRun {
        command: ledger.config.success_check.clone(),
        exit_code: turn.exit_status,
        timed_out: turn.timed_out,
        log: log_name,
        duration_ms: turn.elapsed.as_millis() as u64,
    };
    let verified = check.passed();
    let id = op("claim", &name)?;
    let now = clock::now();
    let context = loopx_core::ledger::LedgerContext {
        now,
        operation_id: &id,
        files: dir,
    };
    dir.authority().execute::<LedgerOwner>(
        STREAM,
        &id,
        &LedgerRequest::SettleClaim { iteration, check },
        &context,
        now,
    )?;
    dir.refresh_views_or_warn();
    Ok(Some(verified))
}

/// One turn's process and what came of it.
struct Turn {
    exit_status: Option<i32>,
    timed_out: bool,
    elapsed: Duration,
}

fn spawn_and_wait(
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
            pid_file(logs, dispatch_id).display()
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

/// Sleep up to `seconds`, waking early when the loop must stop.
fn wait(dir: &LoopDir, seconds: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        let reading = dir.read()?;
        if dir.verdict(&reading.ledger, clock::now()).done {
            return Ok(());
        }
        std::thread::sleep(
            Duration::from_millis(250).min(until.saturating_duration_since(Instant::now())),
        );
    }
    Ok(())
}

fn progress(message: &str) {
    eprintln!("loopx drive: {message}");
}

/// A one-line spinner with the turn's elapsed time, on a terminal only;
/// it clears itself when dropped.
struct Ticker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(label: String) -> Self {
        use std::io::IsTerminal;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Ticker { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                eprint!(
                    "\r{} {label} {:.0}s ",
                    frames[n % frames.len()],
                    started.elapsed().as_secs_f64()
                );
                n += 1;
                std::thread::sleep(Duration::from_millis(120));
            }
            eprint!("\r\x1b[2K");
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub fn drive(options: &Options) -> Result<Ended> {
    let dir = match LoopDir::open(&options.dir, Access::ReadWrite) {
        Ok(dir) => dir,
        Err(error) if !options.dir.join(loopx_app::loop_dir::DATABASE).is_file() => {
            return Err(error.context(Usage("wrong --dir")))
        }
        Err(error) => return Err(error),
    };
    let root = options
        .root
        .canonicalize()
        .with_context(|| format!("--root {} does not exist", options.root.display()))
        .context(Usage("wrong --root"))?;
    let _lock = take_lock(&dir)?;
    let logs = log_dir(&dir)?;
    let pid = std::process::id();
    let (providers, command) = match &options.target {
        Target::Providers(names) => (names.clone(), None),
        Target::Command(cmd) => (vec!["cmd".to_owned()], Some(cmd.clone())),
    };
    let registration = Registration {
        pid,
        started_at: clock::now(),
        providers: providers.clone(),
        command: command.clone(),
    };
    let root_identity = workspace(&root);
    driver_write(
        &dir,
        &op("register", &format!("{pid}-{}", unique()))?,
        &DriverRequest::Register {
            registration,
            workspace_root: root_identity.root.clone(),
        },
    )
    .map_err(|error| {
        let mismatch = matches!(
            error.downcast_ref::<AuthorityError<DriverError>>(),
            Some(AuthorityError::Rejected(
                DriverError::WorkspaceMismatch { .. }
            ))
        );
        if mismatch {
            error.context(Usage("wrong --root"))
        } else {
            error
        }
    })?;
    let ended = run(
        &dir,
        options,
        &root,
        &logs,
        Session::new(providers, options.limits),
    );
    let _ = driver_write(
        &dir,
        &op("unregister", &format!("{pid}-{}", unique()))?,
        &DriverRequest::Unregister { pid },
    );
    ended
}

fn run(
    dir: &LoopDir,
    options: &Options,
    root: &Path,
    logs: &Path,
    mut session: Session,
) -> Result<Ended> {
    let pid = std::process::id();
    let mut turns = 0u64;
    let ended = |exit: Exit, reason: String, turns: u64| {
        Ok(Ended {
            exit,
            reason,
            turns,
        })
    };
    match recover(dir, options.iteration_timeout)? {
        RecoveryPlan::FailClosed { inspect, .. } => {
            return ended(
                Exit::RuntimeError,
                inspect.replace("<DIR>", &dir.display()),
                turns,
            )
        }
        RecoveryPlan::Clear => {}
        plan => progress(&format!(
            "recovered an open dispatch: {}",
            serde_json::to_string(&plan)?
        )),
    }
    // Nothing is open now, so any agent record left is stale (a driver
    // killed between its settlement and the record's removal).
    remove_stale_records(logs);
    loop {
        let mut reading = dir.read()?;
        // An agent's own "done" is never enough: verify before the arbiter.
        if reading.ledger.pending_claim.is_some() {
            if let Some(verified) = verify_claim(dir, root, options.iteration_timeout)? {
                progress(if verified {
                    "success claim verified by the success_check; banking the stop"
                } else {
                    "success claim refused: the success_check failed (its log is in driver_logs/); the loop goes on"
                });
            }
            reading = dir.read()?;
        }
        let verdict = dir.verdict(&reading.ledger, clock::now());
        if verdict.done {
            return ended(
                Exit::Done,
                format!("done: {}", verdict.reason.unwrap_or("done")),
                turns,
            );
        }
        if verdict.paused {
            let until =
                clock::now().checked_add(jiff::SignedDuration::try_from(options.pause_poll)?)?;
            set_waiting(
                dir,
                pid,
                Some(Waiting {
                    until,
                    reason: "paused (PAUSE sentinel)".into(),
                }),
                session.current(),
            )?;
            std::thread::sleep(options.pause_poll);
            continue;
        }
        if options.max_iterations.is_some_and(|max| turns >= max) {
            return ended(
                Exit::Done,
                format!(
                    "ran the {} --max-iterations allowed for this run",
                    loopx_core::words::count(turns, "turn")
                ),
                turns,
            );
        }
        let Some(provider_name) = session.current().map(str::to_owned) else {
            return ended(Exit::ProviderUnavailable, "no provider left".into(), turns);
        };
        let launcher = match &options.target {
            Target::Command(_) => None,
            Target::Providers(_) => match provider::find(&provider_name)
                .and_then(|p| provider::resolve(p, |b| platform::which(b).is_some()))
            {
                Some(launcher) => Some(launcher),
                None => match session.after(TurnResult::Unavailable, None, clock::now()) {
                    Next::Switch { excluded, next, .. } => {
                        progress(&format!("{excluded} is not installed; switching to {next}"));
                        continue;
                    }
                    Next::Exit { exit, reason } => return ended(exit, reason, turns),
                    _ => unreachable!("a missing binary excludes its provider"),
                },
            },
        };
        set_waiting(dir, pid, None, Some(&provider_name))?;
        let (turn_result, read, log_name) =
            turn(dir, options, root, logs, &provider_name, launcher, &reading)?;
        turns += 1;
        match session.after(turn_result, read.resets_at, clock::now()) {
            Next::Continue => {}
            Next::Wait {
                seconds,
                until,
                reason,
            } => {
                let until = until.unwrap_or_else(|| {
                    clock::now()
                        .checked_add(jiff::SignedDuration::from_secs(seconds as i64))
                        .unwrap_or(clock::now())
                });
                progress(&reason);
                set_waiting(
                    dir,
                    pid,
                    Some(Waiting { until, reason }),
                    Some(&provider_name),
                )?;
                wait(dir, seconds)?;
            }
            Next::Switch {
                excluded,
                next,
                cause,
            } => progress(&format!(
                "{excluded} excluded for this run ({}); switching to {next}",
                cause.reason()
            )),
            Next::Exit { exit, reason } if turn_result == TurnResult::Advanced => {
                return ended(exit, reason, turns)
            }
            Next::Exit { exit, reason } => {
                return ended(exit, format!("{reason}; see {log_name}"), turns)
            }
        }
    }
}

fn set_waiting(
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
    driver_write(
        dir,
        &op(
            "wait",
            &format!("{pid}-{}-{}", unique(), clock::now().as_millisecond()),
        )?,
        &request,
    )
}

/// Run one turn end to end: intent, agent, reading, charge, settlement.
fn turn(
    dir: &LoopDir,
    options: &Options,
    root: &Path,
    logs: &Path,
    provider_name: &str,
    launcher: Option<&Launcher>,
    before: &loopx_app::loop_dir::Reading,
) -> Result<(TurnResult, OutputReading, String)> {
    let iteration = before.ledger.spent.iterations + 1;
    let prompt = dir.task_body(&options.goal_id, &Actor::Agent(options.agent_id.clone()))?;
    let dispatch_id = format!(
        "d{iteration}-{}{:04x}",
        unique(),
        clock::now().as_millisecond() as u16
    );
    let log_name = format!("{DRIVER_LOGS}/{dispatch_id}.log");
    failpoint::reached("drive.before_intent");
    // Recorded before the intent: an open intent without a record means
    // someone removed it, never that the agent had not started.
    write_record(logs, &dispatch_id, NOT_STARTED)
        .with_context(|| format!("cannot record dispatch {dispatch_id} in {}", logs.display()))?;
    let intent = Intent {
        dispatch_id: dispatch_id.clone(),
        iteration,
        provider: provider_name.to_owned(),
        prompt_digest: Digest::of_bytes(prompt.as_bytes()).to_string(),
        ledger_revision: before.revision,
        iterations_before: before.ledger.spent.iterations,
        workspace: workspace(root),
        log: log_name.clone(),
        started_at: clock::now(),
    };
    driver_write(
        dir,
        &op("intent", &dispatch_id)?,
        &DriverRequest::Intend {
            intent: Box::new(intent),
        },
    )?;
    failpoint::reached("drive.after_intent");

    // Created exclusively: never written through a planted file or symlink.
    let mut log = platform::create_private(&dir.path(&log_name))
        .with_context(|| format!("cannot create {log_name}"))?;
    writeln!(log, "{prompt}\n{END_OF_PROMPT}")?;
    let (mut command, stdin) = match (launcher, &options.target) {
        (Some(launcher), _) => {
            let mut command = Command::new(launcher.binary);
            command.args(launcher.argv(&prompt, &root.display().to_string()));
            (command, None)
        }
        (None, Target::Command(cmd)) => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(cmd);
            (command, Some(prompt.clone()))
        }
        (None, Target::Providers(_)) => unreachable!("a provider turn has a launcher"),
    };
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(exe_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    command
        .current_dir(root)
        .env("PATH", path)
        .env("AUTOLOOP_DRIVER", "1")
        .env("LOOPX_DIR", dir.root())
        .env("LOOPX_AGENT_ID", &options.agent_id)
        .env("LOOPX_DISPATCH_ID", &dispatch_id)
        .env("AAS_AUTOLOOP_PRIMARY_PROVIDER", provider_name)
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    drop(log);
    progress(&format!(
        "iteration {iteration} [{provider_name}] started ({dispatch_id})"
    ));
    let ticker = Ticker::start(format!("iteration {iteration} [{provider_name}] running"));
    let turn = spawn_and_wait(
        command,
        stdin,
        options.iteration_timeout,
        logs,
        &dispatch_id,
    );
    drop(ticker);
    let turn = turn?;
    failpoint::reached("drive.after_agent");

    let output = agent_log(dir, &log_name);
    let structured = launcher.map_or(Structured::Text, |l| l.structured);
    let read = classify::read(classify::agent_output(&output), structured, clock::now());
    let after = dir.read()?;
    let advanced = after.ledger.spent.iterations > before.ledger.spent.iterations;
    let result = TurnResult::of(turn.timed_out, turn.exit_status, advanced, &read);
    charge(dir, &dispatch_id, &read)?;
    let settlement = Settlement {
        dispatch_id: dispatch_id.clone(),
        iteration,
        provider: provider_name.to_owned(),
        outcome: Outcome::from(result),
        exit_status: turn.exit_status,
        usage: read.usage.clone(),
        settled_at: clock::now(),
        note: read.reported_error.clone().unwrap_or_default(),
    };
    driver_write(
        dir,
        &op("settle", &dispatch_id)?,
        &DriverRequest::Settle {
            settlement: Box::new(settlement),
        },
    )?;
    let _ = std::fs::remove_file(pid_file(logs, &dispatch_id));
    failpoint::reached("drive.after_settle");
    let usd = if read.usage.usd > 0.0 {
        format!(", ${:.4}", read.usage.usd)
    } else {
        String::new()
    };
    let why = match result {
        TurnResult::Advanced => String::new(),
        failed => format!(": {}; see {log_name}", failed.sentence()),
    };
    progress(&format!(
        "iteration {iteration} [{provider_name}] {} in {:.1}s (exit {}{usd}){why}; {} left",
        Outcome::from(result).label(),
        turn.elapsed.as_secs_f64(),
        turn.exit_status
            .map_or("killed".to_owned(), |c| c.to_string()),
        loopx_core::words::count(after.ledger.remaining_iterations(), "iteration")
    ));
    Ok((result, read, log_name))
}
