//! The supervisor: `loopx start`, `stop`, `drain` and `service-status`.
//!
//! - [`run`]: the supervisor itself (`start`, in the foreground or
//!   detached): `loopx drive` as a real child process, restarted when it
//!   dies, ended with it when it ends with a meaning.
//! - [`systemd`]: the same supervisor as a transient systemd user unit.
//! - [`smoke`]: `loopx smoke`, whether what a supervisor needs answers
//!   before it starts.
//!
//! This file holds what the commands around a running supervisor do: the
//! one-supervisor-per-loop lock (`supervisor/lock`, an flock that dies
//! with the process, like the driver's), the supervisor's record (the
//! `supervisor` stream, written through the authority like the driver's
//! registration, so `status`, `service-status` and a restarted process
//! read the same facts and `validate` audits them), a drain request and
//! the driver's check of it, stopping every process of the loop, and the
//! service status.
//!
//! Why the record is in the store and not a pid file: the driver's own
//! registration is, and every view of a loop reads the store; a pid file
//! in the loop directory would be a second source an agent can write.
//! Only the lock and the log are files (`supervisor/`, private to the
//! owner): a lock must die with its process, and a log is output.
//!
//! Not here: the rules (restart or finish, with which exit; the failover
//! order: `loopx_core::supervisor`), what a drive does (`crate::driver`).

pub mod run;
pub mod smoke;
pub mod systemd;

use crate::loop_dir::LoopDir;
use crate::{clock, driver, fsutil, platform};
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::supervisor::{
    self as rules, Supervisor, SupervisorOwner, SupervisorRequest, SupervisorState, STREAM,
};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The supervisor's private directory in the loop directory.
pub const SUPERVISOR_DIR: &str = "supervisor";
/// Held by the running supervisor for as long as it lives.
pub const LOCK: &str = "supervisor/lock";
/// A detached supervisor's stdout and stderr (and its driver's).
pub const LOG: &str = "supervisor/supervisor.log";

/// The supervisor's record (empty if none ever started).
pub fn state(dir: &LoopDir) -> Result<SupervisorState> {
    Ok(dir
        .authority()
        .load::<SupervisorOwner>(STREAM)?
        .state
        .unwrap_or_default())
}

/// Commit one change to the supervisor's record.
pub(crate) fn record(dir: &LoopDir, request: &SupervisorRequest) -> Result<()> {
    let id = crate::driver::op("supervisor", &crate::operation::fresh_name("s"))?;
    dir.authority()
        .execute::<SupervisorOwner>(STREAM, &id, request, &(), clock::now())?;
    Ok(())
}

/// The supervisor's private directory, created when missing; a symlink
/// or a file in its place is refused.
fn private_dir(dir: &LoopDir) -> Result<PathBuf> {
    fsutil::private_dir_below(dir.root(), &[SUPERVISOR_DIR])
}

/// Whether the loop's supervisor lock is held: by a live supervisor,
/// since the lock dies with its process. Takes nothing and creates
/// nothing.
pub fn lock_held(dir: &LoopDir) -> bool {
    let Ok(file) = OpenOptions::new().write(true).open(dir.path(LOCK)) else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// Take the loop's supervisor lock for as long as the file lives, or say
/// who holds it (`Err`: the words for exit 10).
pub(crate) fn take_lock(dir: &LoopDir) -> Result<std::result::Result<File, String>> {
    private_dir(dir)?;
    Ok(fsutil::try_lock(&dir.path(LOCK))?.ok_or_else(|| held_words(dir)))
}

/// Who holds the supervisor lock, in words.
fn held_words(dir: &LoopDir) -> String {
    let who = state(dir)
        .ok()
        .and_then(|s| s.current)
        .map(|s| format!(" (pid {}, since {})", s.pid, s.started_at))
        .unwrap_or_default();
    format!(
        "a supervisor{who} already runs this loop; one supervisor per loop: see it with `loopx service-status --dir {d}`, stop it with `loopx stop --dir {d}`",
        d = dir.display()
    )
}

/// The running supervisor's record: the lock is held and the record is
/// of a live process that has not ended.
fn running(dir: &LoopDir) -> Result<Option<Supervisor>> {
    if !lock_held(dir) {
        return Ok(None);
    }
    Ok(state(dir)?
        .current
        .filter(|s| s.ended.is_none() && platform::alive(s.pid)))
}

/// The driver's check between turns: `Some(why)` when `loopx drain` asked
/// the supervisor that started this process to stop. A driver run by
/// hand, or by another supervisor, is never drained by it; a record that
/// cannot be read drains nothing (the driver's next read says why).
pub fn drain_asked_of_parent(dir: &LoopDir) -> Option<String> {
    let parent = std::os::unix::process::parent_id();
    let current = state(dir).ok()?.current?;
    let asked = current.drain_requested_at?;
    (current.pid == parent && current.ended.is_none()).then(|| {
        format!(
            "drained: `loopx drain` at {asked} asked supervisor {parent} to stop after this turn"
        )
    })
}

/// What `loopx drain` did.
#[derive(Debug, Serialize)]
pub struct Drained {
    pub status: &'static str,
    pub action: &'static str,
    pub supervisor_pid: u32,
    /// Already asked before: nothing was written.
    pub already_requested: bool,
}

impl Drained {
    pub fn text(&self) -> String {
        let head = match self.already_requested {
            true => "a drain was already requested",
            false => "drain requested",
        };
        format!(
            "{head}: supervisor {} lets the current turn settle, then stops its driver and exits; `loopx service-status` shows when it has",
            self.supervisor_pid
        )
    }
}

/// Ask the running supervisor to stop after the current turn. Refused
/// when none runs.
pub fn drain(dir: &LoopDir) -> Result<Drained> {
    let Some(current) = running(dir)? else {
        return Err(crate::AppError::refused(format!(
            "no supervisor runs the loop in {}: nothing to drain (a driver run by hand stops between turns with SIGTERM; `loopx request-stop` ends the loop)",
            dir.display()
        ))
        .into());
    };
    let already_requested = current.drain_requested_at.is_some();
    record(
        dir,
        &SupervisorRequest::Drain {
            pid: current.pid,
            at: clock::now(),
        },
    )?;
    Ok(Drained {
        status: "ok",
        action: "drain",
        supervisor_pid: current.pid,
        already_requested,
    })
}

/// What `loopx drain` should recover after asking for the drain, as the
/// reference kit's `drain` does: through the existing use cases, never a
/// second implementation of them.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Cancel this exact open dispatch (`loopx recover --cancel
    /// --dispatch-id`): a person has looked and its agent is gone.
    pub cancel_dispatch_id: Option<String>,
    /// Show the quarantined candidate (`loopx goal-focus
    /// recover-quarantine`), and release it when its exact fingerprint is
    /// given.
    pub recover_quarantine: bool,
    pub release_fingerprint: Option<String>,
}

impl Recovery {
    pub fn asked(&self) -> bool {
        self.cancel_dispatch_id.is_some() || self.recover_quarantine
    }
}

/// One recovery `loopx drain` ran, and how it went.
#[derive(Debug, Serialize)]
pub struct RecoveryStep {
    /// The command it is the same as.
    pub command: String,
    pub ok: bool,
    pub detail: String,
}

/// What `loopx drain` with recovery flags did: the drain (absent when no
/// supervisor ran: there was nothing to drain), then each recovery.
#[derive(Debug, Serialize)]
pub struct DrainedAndRecovered {
    pub status: &'static str,
    pub action: &'static str,
    pub drain: Option<Drained>,
    pub recovered: Vec<RecoveryStep>,
}

impl DrainedAndRecovered {
    /// Whether every recovery succeeded: the exit follows them, since a
    /// failed one leaves the loop where it was stuck.
    pub fn recovered(&self) -> bool {
        self.recovered.iter().all(|step| step.ok)
    }

    pub fn text(&self) -> String {
        let mut lines = vec![match &self.drain {
            Some(drained) => drained.text(),
            None => "no supervisor runs this loop: nothing to drain".to_owned(),
        }];
        for step in &self.recovered {
            let mark = if step.ok { "ok  " } else { "FAIL" };
            lines.push(format!("{mark} {}: {}", step.command, step.detail));
        }
        lines.join("\n")
    }
}

/// `loopx drain` with recovery flags: ask a running supervisor to drain
/// (none running is not refused here: a stuck dispatch is usually left by
/// a supervisor that is gone), then run each recovery asked for. The
/// cancel takes the driver lock as `loopx recover --cancel` does, so it is
/// refused while a driver still works the loop: drain, wait for
/// `service-status` to show it stopped, then cancel.
pub fn drain_and_recover(dir: &LoopDir, recovery: &Recovery) -> Result<DrainedAndRecovered> {
    let drain = match running(dir)? {
        Some(_) => Some(drain(dir)?),
        None => None,
    };
    let d = dir.display();
    let mut recovered = Vec::new();
    if let Some(id) = &recovery.cancel_dispatch_id {
        let command = format!("loopx recover --dir {d} --cancel --dispatch-id {id}");
        let done = driver::cancel_dispatch_by(dir, id, "loopx drain --cancel-dispatch-id");
        recovered.push(RecoveryStep {
            command,
            ok: done.is_ok(),
            detail: match done {
                Ok(()) => format!("cancelled dispatch {id}"),
                Err(error) => format!("{error:#}"),
            },
        });
    }
    if recovery.recover_quarantine {
        use crate::focus::candidate;
        let mut command = format!("loopx goal-focus recover-quarantine --dir {d}");
        let done = match &recovery.release_fingerprint {
            Some(fingerprint) => {
                command.push_str(&format!(" --release --candidate-fingerprint {fingerprint}"));
                candidate::release_quarantine(dir.place(), fingerprint, None).map(|view| {
                    format!(
                        "candidate {} released and archived; the ledger and budget are unchanged",
                        view.body.fingerprint
                    )
                })
            }
            None => candidate::show_quarantine(dir).map(|view| view.text()),
        };
        recovered.push(RecoveryStep {
            command,
            ok: done.is_ok(),
            detail: done.unwrap_or_else(|error| error.to_string()),
        });
    }
    let mut report = DrainedAndRecovered {
        status: "failed",
        action: "drain",
        drain,
        recovered,
    };
    if report.recovered() {
        report.status = "ok";
    }
    Ok(report)
}

/// How long `loopx stop` lets the loop's processes end by themselves
/// before it kills them: the driver's grace for its turn, with room for
/// settling it.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// What `loopx stop` did.
#[derive(Debug, Serialize)]
pub struct Stopped {
    pub status: &'static str,
    pub action: &'static str,
    /// The supervisor asked to stop, if one ran.
    pub supervisor_pid: Option<u32>,
    /// A driver asked to stop directly (none ran under a supervisor).
    pub driver_pid: Option<u32>,
    /// Processes still alive after the grace, killed.
    pub killed: Vec<u32>,
    /// Processes of the loop alive at the end (empty unless a kill failed).
    pub alive: Vec<u32>,
}

impl Stopped {
    pub fn text(&self) -> String {
        let what = match (self.supervisor_pid, self.driver_pid) {
            (Some(pid), _) => format!("stopped supervisor {pid} and its driver"),
            (None, Some(pid)) => format!("stopped driver {pid} (no supervisor ran)"),
            (None, None) => "nothing ran: no supervisor or driver of this loop was alive".into(),
        };
        let killed = match self.killed.is_empty() {
            true => String::new(),
            false => format!("; killed {:?} after the grace", self.killed),
        };
        let alive = match self.alive.is_empty() {
            true => "; no process of the loop is alive".to_owned(),
            false => format!("; still alive: {:?}", self.alive),
        };
        format!("{what}{killed}{alive}")
    }
}

/// Every live process of the loop: its supervisor, its driver, and each
/// agent group its driver's records name (as group leaders).
fn loop_processes(dir: &LoopDir) -> Result<(Option<u32>, Option<u32>, Vec<u32>)> {
    let supervisor = running(dir)?.map(|s| s.pid);
    let driver = driver::summary(dir)?.pid;
    Ok((supervisor, driver, driver::live_agent_groups(dir)))
}

/// Stop the supervisor and its driver now: SIGTERM to the supervisor (it
/// stops its driver, whose own stop path ends the turn and settles it as
/// interrupted), or to the driver when no supervisor runs; then wait up to
/// `grace` until no process of the loop is alive, and kill what is left.
pub fn stop(dir: &LoopDir, grace: Duration) -> Result<Stopped> {
    let (supervisor, driver, _) = loop_processes(dir)?;
    let asked_driver = supervisor.is_none().then_some(driver).flatten();
    if let Some(pid) = supervisor.or(asked_driver) {
        platform::terminate(pid);
    }
    let deadline = Instant::now() + grace;
    let all_gone = || -> Result<bool> {
        let (s, d, agents) = loop_processes(dir)?;
        let asked_gone = supervisor.is_none_or(|pid| !platform::alive(pid));
        Ok(asked_gone && s.is_none() && d.is_none() && agents.is_empty())
    };
    while !all_gone()? && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut killed = Vec::new();
    let (s, d, agents) = loop_processes(dir)?;
    for pid in s.into_iter().chain(supervisor).chain(d) {
        if platform::alive(pid) {
            platform::kill_pid(pid as i32);
            killed.push(pid);
        }
    }
    for group in agents {
        platform::kill_group(group);
        killed.push(group);
    }
    killed.sort_unstable();
    killed.dedup();
    let settle = Instant::now() + Duration::from_secs(2);
    while !killed.iter().all(|pid| !platform::alive(*pid)) && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, d, agents) = loop_processes(dir)?;
    let alive = s.into_iter().chain(d).chain(agents).collect();
    Ok(Stopped {
        status: "ok",
        action: "stop",
        supervisor_pid: supervisor,
        driver_pid: asked_driver,
        killed,
        alive,
    })
}

/// What `loopx service-status` shows.
#[derive(Debug, Serialize)]
pub struct ServiceStatus {
    /// A supervisor holds the lock and its recorded process is alive.
    pub running: bool,
    /// The last supervisor that started on the loop (absent: none ever did).
    pub supervisor: Option<Supervisor>,
    pub uptime_seconds: Option<i64>,
    /// The running driver's pid and provider, from its registration.
    pub driver_pid: Option<u32>,
    pub provider: Option<String>,
    /// The iteration the driver's open dispatch works on.
    pub dispatch_iteration: Option<u64>,
    pub drain_requested: bool,
    pub log: String,
}

impl ServiceStatus {
    /// One line for a view that shows the driver's status (the
    /// dashboard): pid and whether it is alive, backend, uptime, restarts
    /// and drain. `None` when no supervisor ever ran the loop.
    pub fn line(&self) -> Option<String> {
        let s = self.supervisor.as_ref()?;
        let state = match (self.running, &s.ended) {
            (true, _) => format!(
                "pid {} alive ({}), up {}s",
                s.pid,
                s.backend.name(),
                self.uptime_seconds.unwrap_or(0)
            ),
            (false, Some(ended)) => format!(
                "pid {} ({}) ended at {} with exit {} ({})",
                s.pid,
                s.backend.name(),
                ended.at,
                ended.code,
                ended.exit.reason()
            ),
            (false, None) => format!(
                "pid {} ({}) not alive, gone without ending (killed?)",
                s.pid,
                s.backend.name()
            ),
        };
        let drain = match self.drain_requested {
            true => ", draining",
            false => "",
        };
        Some(format!("{state}, {} restarts{drain}", s.restarts))
    }

    pub fn text(&self) -> String {
        let Some(s) = &self.supervisor else {
            return "no supervisor has run this loop (`loopx start --dir DIR --root PROJECT` starts one)".into();
        };
        let mut lines = vec![match (self.running, &s.ended) {
            (true, _) => format!(
                "supervisor: running, pid {} ({}), up {}s since {}",
                s.pid,
                s.backend.name(),
                self.uptime_seconds.unwrap_or(0),
                s.started_at
            ),
            (false, Some(ended)) => format!(
                "supervisor: not running; pid {} ended at {} with exit {} ({}): {}",
                s.pid,
                ended.at,
                ended.code,
                ended.exit.reason(),
                ended.reason
            ),
            (false, None) => format!(
                "supervisor: not running; pid {} (started {}) is gone without ending (killed?): `loopx start` again resumes the loop",
                s.pid, s.started_at
            ),
        }];
        lines.push(format!(
            "failover order: {}; restarts: {}",
            s.order.join(", "),
            s.restarts
        ));
        if let Some(pid) = self.driver_pid {
            lines.push(format!(
                "driver: pid {pid} on {}{}",
                self.provider.as_deref().unwrap_or("(no provider yet)"),
                self.dispatch_iteration
                    .map(|n| format!(", working on iteration {n}"))
                    .unwrap_or_default()
            ));
        }
        if let Some(last) = &s.last_drive {
            lines.push(format!("last driver exit: {} at {}", last.words, last.at));
        }
        if let Some(at) = s.drain_requested_at {
            lines.push(format!("drain requested at {at}"));
        }
        lines.push(format!("log: {}", self.log));
        lines.join("\n")
    }
}

/// One line for `status`, when a supervisor ever ran on the loop: one
/// read of its record (and a look at its lock when there is one).
pub fn status_line(dir: &LoopDir) -> Option<String> {
    let s = state(dir).ok()?.current?;
    let running = s.ended.is_none() && lock_held(dir) && platform::alive(s.pid);
    Some(match running {
        true => format!(
            "pid {} running since {}, {} restarts{}",
            s.pid,
            s.started_at,
            s.restarts,
            match s.drain_requested_at {
                Some(_) => ", draining",
                None => "",
            }
        ),
        false => format!("not running (last pid {}; `loopx service-status`)", s.pid),
    })
}

/// The supervisor as it stands, checked against the live processes.
pub fn service_status(dir: &LoopDir) -> Result<ServiceStatus> {
    let supervisor = state(dir)?.current;
    let running = running(dir)?.is_some();
    let driver = driver::summary(dir)?;
    let now: Timestamp = clock::now();
    let uptime_seconds = supervisor
        .as_ref()
        .filter(|_| running)
        .map(|s| now.duration_since(s.started_at).as_secs());
    let drain_requested = running
        && supervisor
            .as_ref()
            .is_some_and(|s| s.drain_requested_at.is_some());
    Ok(ServiceStatus {
        running,
        supervisor,
        uptime_seconds,
        driver_pid: driver.pid,
        provider: driver.provider,
        dispatch_iteration: driver.iteration,
        drain_requested,
        log: dir.path(LOG).display().to_string(),
    })
}

/// The failover order for a start, from `--provider` (`given`), the loop's
/// `failover.json` (read without following a symlink, bounded), or the
/// installed defaults.
pub fn failover(
    dir: &LoopDir,
    given: &[String],
) -> std::result::Result<rules::Failover, rules::FailoverRefusal> {
    use loopx_core::path::{FileProblem, LoopPath};
    let name = LoopPath::parse(rules::FAILOVER_FILE).expect("a plain file name");
    let text = match fsutil::read_confined(dir.root(), &name, 64 * 1024) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(FileProblem::Missing) => None,
        Err(problem) => return Err(rules::FailoverRefusal::Unreadable(problem.describe())),
    };
    rules::failover(text.as_deref(), given, &|name| {
        crate::launchers::installed_launcher_named(name).is_some()
    })
}

/// A piece of the supervisor's log.
#[derive(Debug, Serialize)]
pub struct LogRead {
    pub path: String,
    /// What was read (lossy UTF-8), at most the bytes asked for.
    pub text: String,
    /// Where the next read goes on from (the log's length when read).
    pub next: u64,
    /// Earlier bytes were left out.
    pub truncated: bool,
}

/// Read the supervisor's log, through the loop directory's confinement:
/// from byte `from` on, or its last `max` bytes when `from` is `None`; at
/// most `max` bytes either way. A log not written yet reads empty.
pub fn read_log(dir: &LoopDir, from: Option<u64>, max: u64) -> Result<LogRead> {
    read_piece(dir, LOG, from, max)
}

/// [`read_log`] for the driver's log of the turn that worked on iteration
/// `iteration` (`loopx logs --turn N`), found through the driver journal.
pub fn read_turn_log(
    dir: &LoopDir,
    iteration: u64,
    from: Option<u64>,
    max: u64,
) -> Result<LogRead> {
    let relative = crate::turns::log_of_iteration(dir, iteration)?;
    read_piece(dir, &relative, from, max)
}

/// A piece of the log at `relative` in the loop directory, as [`read_log`].
fn read_piece(dir: &LoopDir, relative: &str, from: Option<u64>, max: u64) -> Result<LogRead> {
    use loopx_core::path::{FileProblem, LoopPath};
    use std::io::{Read as _, Seek as _, SeekFrom};
    let name = LoopPath::parse(relative).map_err(|e| {
        anyhow::anyhow!("the log {relative:?} is not a path in the loop directory: {e}")
    })?;
    let path = dir.path(relative).display().to_string();
    let mut file = match fsutil::open_confined(dir.root(), &name) {
        Ok(file) => file,
        Err(FileProblem::Missing) => {
            let empty = String::new();
            return Ok(LogRead {
                path,
                text: empty,
                next: 0,
                truncated: false,
            });
        }
        Err(problem) => anyhow::bail!("{path} {}", problem.describe()),
    };
    let length = file.metadata()?.len();
    let start = from
        .unwrap_or_else(|| length.saturating_sub(max))
        .min(length);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(LogRead {
        path,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        next: start + bytes.len() as u64,
        truncated: from.is_none() && start > 0,
    })
}
