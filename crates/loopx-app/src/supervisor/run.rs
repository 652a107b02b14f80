//! One supervisor run (`loopx start`): hold the loop's supervisor lock,
//! run `loopx drive` as a child process in its own process group, and
//! after each drive ask the core's rule (`loopx_core::supervisor::
//! after_drive`) whether to finish or restart it after a back-off.
//!
//! The supervisor never leaves its driver or the driver's agent running
//! when it exits: a stop signal (SIGTERM, SIGINT) is forwarded to the
//! driver as SIGTERM, whose own stop path ends the turn and settles it as
//! interrupted (a second signal is forwarded too: the driver then ends
//! its turn at once); a driver that does not end in [`DRIVER_GRACE`] is
//! killed with its group; the driver gets SIGTERM from the kernel if the
//! supervisor itself is killed (`platform::die_with_parent`); and the
//! supervisor is the subreaper of what a killed driver leaves (its agent),
//! reaping it while a restarted driver waits for it and killing it when
//! the supervisor ends.
//!
//! [`detach`] starts the same run in a session of its own with its
//! output in the loop's supervisor log, and returns at once.
//!
//! Not here: the rules (`loopx_core::supervisor`), the lock and the record
//! (`super`).

use super::{record, take_lock, LOG};
use crate::loop_dir::LoopDir;
use crate::{clock, platform};
use anyhow::{Context as _, Result};
use loopx_core::supervisor::{
    after_drive, AfterDrive, Backend, Decision, DriveEnd, Failover, SupervisorExit,
    SupervisorRequest,
};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a start is given.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// The `loopx` binary to run `drive` (and a detached `start`) with.
    pub program: PathBuf,
    pub root: PathBuf,
    /// `--provider`: the failover order, instead of `failover.json`'s.
    pub providers: Vec<String>,
    /// `--cmd`: a shell command per turn instead of providers.
    pub cmd: Option<String>,
    /// `--store`, handed on to the driver and a detached supervisor in
    /// their environment (`LOOPX_STORE`), never on a command line: a
    /// PostgreSQL URL may hold a password, which `ps` would show.
    pub store: Option<String>,
    /// `--max-restarts`; else `failover.json`'s, else the default.
    pub max_restarts: Option<u32>,
    /// The first back-off before a restart (doubling, capped).
    pub first_backoff: Duration,
    /// More `drive` flags, passed as they are.
    pub drive_args: Vec<String>,
    pub backend: Backend,
    /// The host policy file (`--policy-file`), whose assignments
    /// ([`crate::host_policy`]) the driver gets in its environment; a
    /// detached or systemd supervisor reads it again itself.
    pub policy_file: Option<PathBuf>,
    pub policy: std::collections::BTreeMap<String, String>,
    /// The provider secrets file (`--secrets-file`), read the same way;
    /// its credentials go to the driver's environment only, never to a
    /// command line, a log or a view.
    pub secrets_file: Option<PathBuf>,
    pub secrets: crate::host_policy::Secrets,
}

/// How a supervisor run ended.
#[derive(Debug, Clone, Serialize)]
pub struct Ended {
    pub exit: SupervisorExit,
    pub code: u8,
    pub reason: String,
    pub restarts: u32,
}

impl Ended {
    fn new(exit: SupervisorExit, reason: String, restarts: u32) -> Self {
        Ended {
            exit,
            code: exit.code(),
            reason,
            restarts,
        }
    }
}

/// How long a driver told to stop has to settle its turn and exit before
/// it is killed with its group: its runner's own grace for the turn, and
/// room to commit the settlement.
pub const DRIVER_GRACE: Duration = Duration::from_secs(20);

/// How often the supervisor looks at its driver, the stop signal, and a
/// drain request while it waits.
const POLL: Duration = Duration::from_millis(100);

/// The failover order for this start, or the end it comes to at once.
fn order(dir: &LoopDir, options: &StartOptions) -> std::result::Result<Option<Failover>, Ended> {
    if options.cmd.is_some() {
        return Ok(None);
    }
    super::failover(dir, &options.providers)
        .map(Some)
        .map_err(|refusal| Ended::new(refusal.exit(), refusal.to_string(), 0))
}

/// Run the supervisor until its rule says finish. `say`: a line for the
/// operator (the terminal, or the log when detached).
pub fn supervise(dir: &LoopDir, options: &StartOptions, say: &dyn Fn(&str)) -> Result<Ended> {
    let failover = match order(dir, options) {
        Ok(failover) => failover,
        Err(ended) => return Ok(ended),
    };
    let _lock = match take_lock(dir)? {
        Ok(lock) => lock,
        Err(held) => return Ok(Ended::new(SupervisorExit::LockHeld, held, 0)),
    };
    if let Some(ended) = driver_running(dir) {
        return Ok(ended);
    }
    platform::become_subreaper();
    let pid = std::process::id();
    let order_words = match &failover {
        Some(f) => f.order.clone(),
        None => vec!["cmd".to_owned()],
    };
    record(
        dir,
        &SupervisorRequest::Start {
            pid,
            backend: options.backend,
            order: order_words.clone(),
            at: clock::now(),
        },
    )?;
    let running = match &failover {
        Some(f) => format!("failover order {} (from {})", f.order.join(", "), f.source),
        None => "a --cmd per turn".to_owned(),
    };
    let started = format!(
        "supervisor {pid} started on {} with {running}",
        dir.display()
    );
    say(&started);
    tell(dir, "started", &started);
    let ended = supervise_drives(dir, options, failover.as_ref(), say);
    // Whatever a killed driver left (its agent, adopted here) ends with
    // the supervisor.
    platform::kill_adopted(&[]);
    let ended = match ended {
        Ok(ended) => ended,
        Err(error) => {
            // Said in the record too, so no view takes it for a kill.
            let reason = format!("the supervisor failed: {error:#}");
            let failed = SupervisorRequest::End {
                pid,
                exit: SupervisorExit::RuntimeError,
                reason,
                at: clock::now(),
            };
            note(dir, &failed, say);
            return Err(error);
        }
    };
    let end = SupervisorRequest::End {
        pid,
        exit: ended.exit,
        reason: ended.reason.clone(),
        at: clock::now(),
    };
    note(dir, &end, say);
    let said = format!(
        "supervisor {pid} ended: {} (exit {})",
        ended.reason, ended.code
    );
    say(&said);
    tell(dir, "ended", &said);
    Ok(ended)
}

/// The drives, one after another, until the rule says finish.
fn supervise_drives(
    dir: &LoopDir,
    options: &StartOptions,
    failover: Option<&Failover>,
    say: &dyn Fn(&str),
) -> Result<Ended> {
    let pid = std::process::id();
    let max_restarts = (options.max_restarts)
        .or(failover.map(|f| f.max_restarts))
        .unwrap_or(loopx_core::supervisor::DEFAULT_MAX_RESTARTS);
    let mut restarts = 0;
    let mut backoff_step = 0;
    loop {
        if let Some(signal) = platform::stop_signal() {
            let reason = format!("stopped by {} between drives", signal.name());
            return Ok(Ended::new(
                SupervisorExit::stopped_by(signal),
                reason,
                restarts,
            ));
        }
        if drain_requested(dir) {
            let reason = "drained between drives".to_owned();
            return Ok(Ended::new(SupervisorExit::Done, reason, restarts));
        }
        let started = Instant::now();
        let mut child = spawn_drive(dir, options, failover)?;
        say(&format!("driver {} started", child.id()));
        let drive_pid = child.id();
        note(
            dir,
            &SupervisorRequest::DriveStarted { pid, drive_pid },
            say,
        );
        let end = watch(&mut child)?;
        let decision = after_drive(&AfterDrive {
            end,
            stopping: platform::stop_signal(),
            drain_requested: drain_requested(dir),
            quarantined: quarantined(dir),
            recovery_needs_person: crate::driver::show_recovery(dir)
                .is_ok_and(|recovery| recovery.needs_a_person()),
            restarts,
            max_restarts,
            backoff_step,
            first_backoff: options.first_backoff,
            ran_for: started.elapsed(),
        });
        let restarts_after = restarts + u32::from(matches!(decision, Decision::Restart { .. }));
        let ended = SupervisorRequest::DriveEnded {
            pid,
            end,
            restarts: restarts_after,
            at: clock::now(),
        };
        note(dir, &ended, say);
        match decision {
            Decision::Finish { exit, reason } => return Ok(Ended::new(exit, reason, restarts)),
            Decision::Restart {
                after,
                step,
                reason,
            } => {
                let said = format!("{reason}; restarting in {:.1}s", after.as_secs_f64());
                say(&said);
                tell(dir, "restart", &said);
                restarts = restarts_after;
                backoff_step = step;
                pause(dir, after);
            }
        }
    }
}

/// Record what the supervisor saw, best effort: a store that cannot take
/// the note now (a PostgreSQL restart) must not end a supervisor that may
/// run for days, nor leave its driver unwatched; the driver's own writes
/// wait the outage out.
fn note(dir: &LoopDir, request: &SupervisorRequest, say: &dyn Fn(&str)) {
    if let Err(error) = record(dir, request) {
        say(&format!(
            "warning: could not record {} ({error:#}); the supervisor goes on",
            <loopx_core::supervisor::SupervisorOwner as loopx_core::operation::Owner>::event_kind(
                request
            )
        ));
    }
}

/// Tell the operator what the supervisor did (`what`: started, restart,
/// ended), through the loop's notification settings; never fails and
/// never changes loop state (`crate::notify::automatic`). The driver tells
/// its own turns, waits, failovers and stops.
fn tell(dir: &LoopDir, what: &str, message: &str) {
    crate::notify::automatic(
        dir,
        loopx_core::notify::Facts {
            kind: "supervisor".into(),
            event_id: format!(
                "supervisor-{}-{what}-{}",
                std::process::id(),
                platform::nonce()
            ),
            completed: message.to_owned(),
            current: message.to_owned(),
            plan: "Continue under the supervisor's failover and restart policy (`loopx service-status`)."
                .into(),
            ..Default::default()
        },
    );
}

/// Sleep up to `duration`, waking early for a stop signal or a drain
/// request, and reaping what a killed driver left meanwhile.
fn pause(dir: &LoopDir, duration: Duration) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        platform::reap_exited(&[]);
        if platform::stop_signal().is_some() || drain_requested(dir) {
            return;
        }
        platform::pause(POLL.min(until.saturating_duration_since(Instant::now())));
    }
}

/// Whether `loopx drain` asked this supervisor to stop.
fn drain_requested(dir: &LoopDir) -> bool {
    super::state(dir)
        .ok()
        .and_then(|s| s.current)
        .is_some_and(|s| s.pid == std::process::id() && s.drain_requested_at.is_some())
}

/// Whether the loop's staged candidate is quarantined now.
fn quarantined(dir: &LoopDir) -> bool {
    crate::focus::candidate::slot(dir)
        .ok()
        .flatten()
        .is_some_and(|slot| {
            matches!(
                slot.hold(),
                Some(loopx_core::focus::candidate::Hold::Quarantined(_))
            )
        })
}

/// The `drive` command line this supervisor runs.
fn drive_args(dir: &LoopDir, options: &StartOptions, failover: Option<&Failover>) -> Vec<String> {
    let mut args = vec![
        "drive".to_owned(),
        "--dir".to_owned(),
        dir.display(),
        "--root".to_owned(),
        options.root.display().to_string(),
    ];
    match (&options.cmd, failover) {
        (Some(cmd), _) => args.extend(["--cmd".to_owned(), cmd.clone()]),
        (None, Some(failover)) => args.extend([
            "--provider".to_owned(),
            failover.order.join(","),
            "--max-quota-waits".to_owned(),
            failover.max_quota_waits.to_string(),
        ]),
        (None, None) => {}
    }
    args.extend(options.drive_args.iter().cloned());
    args
}

/// Hand the store on in the environment (see [`StartOptions::store`]).
fn with_store(command: &mut Command, options: &StartOptions) {
    if let Some(store) = &options.store {
        command.env(crate::driver::env::STORE, store);
    }
}

/// Start the driver: its own process group (a Ctrl-C at the terminal
/// reaches the supervisor, which forwards it once), SIGTERM when the
/// supervisor dies, its output where the supervisor's goes.
fn spawn_drive(
    dir: &LoopDir,
    options: &StartOptions,
    failover: Option<&Failover>,
) -> Result<Child> {
    let mut command = Command::new(&options.program);
    command
        .args(drive_args(dir, options, failover))
        .stdin(Stdio::null());
    with_store(&mut command, options);
    command.envs(&options.policy).envs(options.secrets.iter());
    platform::in_new_group(&mut command);
    platform::die_with_parent(&mut command);
    command
        .spawn()
        .with_context(|| format!("cannot start {} drive", options.program.display()))
}

/// Wait for the driver to end, reaping whatever a killed earlier driver
/// left. A stop signal is forwarded as SIGTERM, and a second one again
/// (the driver then ends its turn at once, as a second Ctrl-C does to a
/// driver run by hand); a driver that has not ended [`DRIVER_GRACE`]
/// after the first is killed with its group.
fn watch(child: &mut Child) -> Result<DriveEnd> {
    use std::os::unix::process::ExitStatusExt as _;
    let pgid = child.id();
    let mut asked: Option<Instant> = None;
    let mut urged = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        platform::reap_exited(&[pgid]);
        match asked {
            None if platform::stop_signal().is_some() => {
                platform::terminate(pgid);
                asked = Some(Instant::now());
            }
            Some(_) if platform::stop_is_urgent() && !urged => {
                platform::terminate(pgid);
                urged = true;
            }
            Some(when) if when.elapsed() >= DRIVER_GRACE => platform::kill_group(pgid),
            _ => {}
        }
        std::thread::sleep(POLL);
    };
    // Nothing of the driver's group outlives it.
    platform::kill_group(pgid);
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => DriveEnd::Code(code),
        (None, Some(signal)) => DriveEnd::Signal(signal),
        (None, None) => DriveEnd::Code(-1),
    })
}

/// What `start --detach` did.
#[derive(Debug, Serialize)]
pub struct Detached {
    pub status: &'static str,
    pub action: &'static str,
    pub pid: u32,
    pub log: String,
}

impl Detached {
    pub fn text(&self) -> String {
        format!(
            "supervisor started in the background: pid {}\nlog: {}\nsee it with `loopx service-status`, stop it with `loopx stop` or `loopx drain`",
            self.pid, self.log
        )
    }
}

/// What the supervisor would refuse at once (an order it cannot use, a
/// supervisor already running), said before it is started elsewhere so
/// the caller hears it.
fn refused_before_start(dir: &LoopDir, options: &StartOptions) -> Option<Ended> {
    if let Err(ended) = order(dir, options) {
        return Some(ended);
    }
    if super::lock_held(dir) {
        return Some(Ended::new(
            SupervisorExit::LockHeld,
            super::held_words(dir),
            0,
        ));
    }
    driver_running(dir)
}

/// A driver already running the loop without this supervisor (run by
/// hand, or left by a supervisor killed where no parent-death signal
/// stops it): the supervisor's own would only fail to take the driver
/// lock, restart after restart.
fn driver_running(dir: &LoopDir) -> Option<Ended> {
    let pid = crate::driver::summary(dir).ok()?.pid?;
    let words = format!(
        "a driver (pid {pid}) already runs this loop without a supervisor; one driver per loop: stop it first (`loopx stop --dir {}`), then start",
        dir.display()
    );
    Some(Ended::new(SupervisorExit::LockHeld, words, 0))
}

/// What `start --backend systemd` did, or would have done.
#[derive(Debug, Serialize)]
pub struct ViaSystemd {
    pub status: &'static str,
    pub action: &'static str,
    pub unit: super::systemd::Unit,
    /// Why it was refused (no user manager answers, systemd-run failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ViaSystemd {
    pub fn text(&self) -> String {
        match &self.error {
            None => format!(
                "supervisor started as the user unit {}; see it with `loopx service-status` or `systemctl --user status {}`",
                self.unit.name, self.unit.name
            ),
            Some(error) => format!(
                "{error}; nothing was started. The unit it would create: {}",
                self.unit.argv.join(" ")
            ),
        }
    }
}

/// Start the supervisor as a transient systemd user unit running
/// `start_args` (the `start` command line that records the systemd
/// backend), where a user manager answers; refused (the unit shown)
/// where none does. `Err(ended)`: refused as the supervisor would.
pub fn via_systemd(
    dir: &LoopDir,
    options: &StartOptions,
    start_args: &[String],
) -> std::result::Result<ViaSystemd, Ended> {
    if let Some(ended) = refused_before_start(dir, options) {
        return Err(ended);
    }
    let unit = super::systemd::unit(dir, &options.program, &options.root, start_args);
    if options.store.is_some() {
        let refused = "the systemd backend takes no --store or LOOPX_STORE: a store URL may hold a password, which must not become a unit's property; start with --detach instead";
        return Err(Ended::new(SupervisorExit::BadArguments, refused.into(), 0));
    }
    let error = super::systemd::user_manager()
        .map_err(|why| format!("no systemd user manager answers here: {why}; start with --detach instead, or from a session that has one"))
        .and_then(|()| super::systemd::create(&unit).map_err(|why| format!("systemd-run refused the unit: {why}")))
        .err();
    Ok(ViaSystemd {
        status: if error.is_none() { "ok" } else { "failed" },
        action: "start",
        unit,
        error,
    })
}

/// How long `start --detach` watches its supervisor start before it
/// returns: long enough to report one that refused at once (a lock held,
/// an empty order), short enough to return at once.
const DETACH_WATCH: Duration = Duration::from_millis(500);

/// Start the supervisor in a session of its own, its output appended to
/// the loop's supervisor log (private), and return once it has recorded
/// its start (or after [`DETACH_WATCH`]). `Err(ended)`: it could not
/// start (the refusal it would have exited with). `start_args`: the
/// `start` command line without `--detach`.
pub fn detach(
    dir: &LoopDir,
    options: &StartOptions,
    start_args: &[String],
) -> Result<std::result::Result<Detached, Ended>> {
    if let Some(ended) = refused_before_start(dir, options) {
        return Ok(Err(ended));
    }
    super::private_dir(dir)?;
    let log_path = dir.path(LOG);
    let log = platform::append_private(&log_path)
        .with_context(|| format!("cannot open the supervisor log {}", log_path.display()))?;
    let mut command = Command::new(&options.program);
    command
        .args(start_args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    with_store(&mut command, options);
    platform::in_new_session(&mut command);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {} start", options.program.display()))?;
    let pid = child.id();
    let deadline = Instant::now() + DETACH_WATCH;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            let code = status.code().unwrap_or(1);
            let reason = format!(
                "the supervisor exited at once (exit {code}); its log says why: {}",
                log_path.display()
            );
            let exit = match code {
                10 => SupervisorExit::LockHeld,
                11 => SupervisorExit::Exhausted,
                _ => SupervisorExit::BadArguments,
            };
            return Ok(Err(Ended::new(exit, reason, 0)));
        }
        let started = super::state(dir)
            .ok()
            .and_then(|s| s.current)
            .is_some_and(|s| s.pid == pid);
        if started {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Ok(Detached {
        status: "ok",
        action: "start",
        pid,
        log: log_path.display().to_string(),
    }))
}
