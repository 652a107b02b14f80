//! The supervisor's rules: which providers `loopx start` hands the driver
//! (the failover order from `failover.json`), what each way a `drive`
//! child can end means for the supervisor (finish with which exit, or
//! restart after how long), and the supervisor's durable record (who runs
//! the loop, since when, how many restarts, the last drive's end, whether
//! a drain was asked), kept as the `supervisor` stream.
//!
//! Failover itself is not here: it stays the driver's one rule (`drive
//! --provider a,b,…` with its session exclusions). The supervisor only
//! turns the order into that list and reads the driver's exit: a driver
//! that gave up on every provider ends the supervisor (exit 11), one that
//! died restarts with back-off up to a cap (exit 12), and one that stopped
//! on a quarantined candidate is never restarted (exit 14: a person must
//! look, and a restarted driver would stop there again).
//!
//! Not here: processes, signals, locks, files (`loopx_app::supervisor`).

use crate::driver::session::{Exit, StopSignal};
use crate::error_class::{Classify, ErrorClass};
use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub const STREAM: &str = "supervisor";

/// The file in the loop directory the failover order is read from.
pub const FAILOVER_FILE: &str = "failover.json";

/// The order used when neither `--provider` nor `failover.json` gives one
/// (the reference kit's example), keeping only the providers installed.
pub const DEFAULT_ORDER: [&str; 8] = [
    "claude",
    "codex",
    "grok",
    "opencode",
    "antigravity",
    "copilot",
    "kimi",
    "deepseek",
];

/// Consecutive quota signals before the driver excludes a primary, when
/// `failover.json` does not say (the reference's default).
pub const DEFAULT_QUOTA_WAITS: u32 = 3;

/// Restarts of an abnormally ended driver before the supervisor gives up
/// (the reference's `max_restarts`).
pub const DEFAULT_MAX_RESTARTS: u32 = 50;

/// The longest back-off between restarts (the reference's `retry_sleep_s`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// A driver that ran this long before it died was healthy: its successor's
/// back-off starts again from the first step.
pub const HEALTHY_RUN: Duration = Duration::from_secs(600);

/// `failover.json` as far as the supervisor reads it; every other key of
/// the reference's file is left alone.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FailoverFile {
    #[serde(default)]
    pub primary_order: Option<Vec<String>>,
    /// The reference's older name for `primary_order`.
    #[serde(default)]
    pub primary_fallback: Option<Vec<String>>,
    #[serde(default)]
    pub max_quota_waits_per_primary: Option<u32>,
    #[serde(default)]
    pub max_restarts: Option<u32>,
}

/// What the supervisor hands the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failover {
    /// `drive --provider`, first available first.
    pub order: Vec<String>,
    /// `drive --max-quota-waits`.
    pub max_quota_waits: u32,
    /// The file's `max_restarts`, else [`DEFAULT_MAX_RESTARTS`].
    pub max_restarts: u32,
    /// Where the order came from: `--provider`, `failover.json`, or the default.
    pub source: &'static str,
}

/// Why no failover order could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FailoverRefusal {
    #[error("{FAILOVER_FILE} is not valid: {0}")]
    Unreadable(String),
    #[error("the failover order is empty ({0}): no provider to drive with")]
    Empty(&'static str),
    #[error("{FAILOVER_FILE} lists {0} primaries with max_quota_waits_per_primary 0: the first would wait on its quota forever and never fail over; set it to 1 or more")]
    MultiPrimaryWithoutWaits(usize),
}

impl FailoverRefusal {
    /// The supervisor's exit for it: an empty order is 11 (nothing to
    /// run, as when every primary is exhausted), a bad file 2.
    pub fn exit(&self) -> SupervisorExit {
        match self {
            FailoverRefusal::Empty(_) => SupervisorExit::Exhausted,
            _ => SupervisorExit::BadArguments,
        }
    }
}

/// The failover order: `given` (`--provider`) when not empty, else the
/// file's `primary_order` (or `primary_fallback`), else [`DEFAULT_ORDER`]
/// filtered by `installed`. `file`: the text of `failover.json`, if any.
pub fn failover(
    file: Option<&str>,
    given: &[String],
    installed: &dyn Fn(&str) -> bool,
) -> Result<Failover, FailoverRefusal> {
    let parsed: FailoverFile = match file {
        Some(text) => serde_json::from_str(text)
            .map_err(|error| FailoverRefusal::Unreadable(error.to_string()))?,
        None => FailoverFile::default(),
    };
    let names = |list: &[String]| -> Vec<String> {
        list.iter()
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    };
    let listed = parsed
        .primary_order
        .as_deref()
        .filter(|order| !order.is_empty())
        .or(parsed.primary_fallback.as_deref());
    let (order, source) = match (given.is_empty(), listed, file.is_some()) {
        (false, _, _) => (names(given), "--provider"),
        (true, Some(listed), _) => (names(listed), FAILOVER_FILE),
        // A file that names no order is an empty order, as the reference
        // reads it: the operator wrote one and meant it.
        (true, None, true) => (Vec::new(), FAILOVER_FILE),
        (true, None, false) => (
            DEFAULT_ORDER
                .iter()
                .filter(|name| installed(name))
                .map(|name| (*name).to_owned())
                .collect(),
            "the default order (installed providers only)",
        ),
    };
    if order.is_empty() {
        return Err(FailoverRefusal::Empty(source));
    }
    let max_quota_waits = parsed
        .max_quota_waits_per_primary
        .unwrap_or(DEFAULT_QUOTA_WAITS);
    if order.len() > 1 && max_quota_waits == 0 {
        return Err(FailoverRefusal::MultiPrimaryWithoutWaits(order.len()));
    }
    Ok(Failover {
        order,
        max_quota_waits,
        max_restarts: parsed.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
        source,
    })
}

/// The supervisor's exit codes, as the reference kit numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupervisorExit {
    /// The loop is done, a stop was requested, or the supervisor drained.
    Done,
    BadArguments,
    /// `start` while another supervisor runs this loop.
    LockHeld,
    /// The driver gave up on every provider in the order (or there was none).
    Exhausted,
    /// The driver died more often than `--max-restarts` allows.
    RestartCap,
    /// The driver stopped on a quarantined candidate: a person must look.
    Quarantined,
    /// The driver's recovery of a turn a killed driver left fails closed
    /// (the workspace changed and nothing was recorded): a person must look.
    NeedsPerson,
    /// The supervisor itself failed (its driver could not be started).
    RuntimeError,
    Interrupted,
    Terminated,
}

impl SupervisorExit {
    pub fn code(self) -> u8 {
        match self {
            SupervisorExit::Done => 0,
            SupervisorExit::BadArguments => 2,
            SupervisorExit::LockHeld => 10,
            SupervisorExit::Exhausted => 11,
            SupervisorExit::RestartCap => 12,
            SupervisorExit::Quarantined => 14,
            SupervisorExit::NeedsPerson => 16,
            SupervisorExit::RuntimeError => 1,
            SupervisorExit::Interrupted => 130,
            SupervisorExit::Terminated => 143,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            SupervisorExit::Done => "done",
            SupervisorExit::BadArguments => "bad_arguments",
            SupervisorExit::LockHeld => "lock_held",
            SupervisorExit::Exhausted => "all_primaries_exhausted",
            SupervisorExit::RestartCap => "restart_cap_reached",
            SupervisorExit::Quarantined => "candidate_quarantined",
            SupervisorExit::NeedsPerson => "recovery_needs_a_person",
            SupervisorExit::RuntimeError => "runtime_error",
            SupervisorExit::Interrupted => "interrupted",
            SupervisorExit::Terminated => "terminated",
        }
    }

    /// The exit of a supervisor this signal stopped.
    pub fn stopped_by(signal: StopSignal) -> Self {
        match signal {
            StopSignal::Interrupt => SupervisorExit::Interrupted,
            StopSignal::Terminate => SupervisorExit::Terminated,
        }
    }
}

/// How a `drive` child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by", content = "value")]
pub enum DriveEnd {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it (SIGKILL, an OOM kill, SIGSEGV).
    Signal(i32),
}

impl DriveEnd {
    /// The driver's own exit, when it chose one.
    pub fn exit(self) -> Option<Exit> {
        let DriveEnd::Code(code) = self else {
            return None;
        };
        [
            Exit::Done,
            Exit::BadArguments,
            Exit::MaxFailures,
            Exit::RuntimeError,
            Exit::QuotaExhausted,
            Exit::ProviderUnavailable,
            Exit::AuthDead,
            Exit::Interrupted,
            Exit::Terminated,
        ]
        .into_iter()
        .find(|exit| i32::from(exit.code()) == code)
    }

    pub fn words(self) -> String {
        match (self, self.exit()) {
            (_, Some(exit)) => format!("exit {} ({})", exit.code(), exit.reason()),
            (DriveEnd::Code(101), None) => "exit 101 (panicked)".to_owned(),
            (DriveEnd::Code(code), None) => format!("exit {code}"),
            (DriveEnd::Signal(9), None) => "killed by signal 9 (SIGKILL)".to_owned(),
            (DriveEnd::Signal(signal), None) => format!("killed by signal {signal}"),
        }
    }
}

/// What the supervisor knew when a drive child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterDrive {
    pub end: DriveEnd,
    /// A stop signal reached the supervisor (it forwarded it).
    pub stopping: Option<StopSignal>,
    /// `loopx drain` asked the supervisor to stop after the current turn.
    pub drain_requested: bool,
    /// The loop's staged candidate is quarantined now.
    pub quarantined: bool,
    /// The recovery of the open dispatch fails closed now.
    pub recovery_needs_person: bool,
    /// Restarts so far, and the cap.
    pub restarts: u32,
    pub max_restarts: u32,
    /// The back-off step the next restart would take (see [`backoff`]).
    pub backoff_step: u32,
    /// The first back-off.
    pub first_backoff: Duration,
    /// How long the ended driver ran.
    pub ran_for: Duration,
}

/// What the supervisor does after a drive child ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Decision {
    /// End the supervisor with this exit.
    Finish {
        exit: SupervisorExit,
        reason: String,
    },
    /// Start the driver again after `after`, as back-off step `step`.
    Restart {
        #[serde(with = "seconds")]
        after: Duration,
        step: u32,
        reason: String,
    },
}

mod seconds {
    pub fn serialize<S: serde::Serializer>(
        value: &std::time::Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(value.as_secs_f64())
    }
}

/// The back-off before restart step `step` (from 0): doubling from
/// `first`, capped at [`MAX_BACKOFF`].
pub fn backoff(first: Duration, step: u32) -> Duration {
    crate::backoff::doubling(first, step, MAX_BACKOFF.max(first))
}

/// The rule: what a drive child's end means for the supervisor.
///
/// A stop the supervisor was asked for, a drain, and every end the
/// driver chose with a meaning (the loop is done or a stop was requested:
/// 0; bad arguments: 2; every provider excluded: 3, 5, 6, 7) end the
/// supervisor. A runtime error (4) on a quarantined candidate, or on a
/// recovery that fails closed, ends it too: a restart would stop there
/// again, and a person must look. Anything
/// else (a panic, a kill, a signal the supervisor did not send, another
/// runtime error) is a driver that died: restarted after a back-off, until
/// the cap.
pub fn after_drive(after: &AfterDrive) -> Decision {
    let finish = |exit: SupervisorExit, reason: String| Decision::Finish { exit, reason };
    let end = after.end.words();
    if let Some(signal) = after.stopping {
        return finish(
            SupervisorExit::stopped_by(signal),
            format!("stopped by {}; the driver ended with {end}", signal.name()),
        );
    }
    if after.drain_requested {
        return finish(
            SupervisorExit::Done,
            format!("drained: the driver ended after its turn with {end}"),
        );
    }
    match after.end.exit() {
        Some(Exit::Done) => {
            return finish(
                SupervisorExit::Done,
                format!("the driver ended the run ({end}): the loop is done, a stop was requested, or a budget is spent"),
            )
        }
        Some(Exit::BadArguments) => {
            return finish(
                SupervisorExit::BadArguments,
                format!("the driver refused its arguments ({end}): fix them and start again"),
            )
        }
        Some(Exit::MaxFailures | Exit::QuotaExhausted | Exit::ProviderUnavailable | Exit::AuthDead) => {
            return finish(
                SupervisorExit::Exhausted,
                format!("the driver excluded every provider in the failover order ({end}): fund, install or sign in to one, then start again"),
            )
        }
        Some(Exit::RuntimeError) if after.quarantined => {
            return finish(
                SupervisorExit::Quarantined,
                format!("the driver stopped on a quarantined candidate ({end}): not restarted; a person must inspect it (`loopx goal-focus recover-quarantine`)"),
            )
        }
        Some(Exit::RuntimeError) if after.recovery_needs_person => {
            return finish(
                SupervisorExit::NeedsPerson,
                format!("the driver cannot recover the turn a killed driver left ({end}): not restarted; a person must look (`loopx recover`)"),
            )
        }
        _ => {}
    }
    if after.restarts >= after.max_restarts {
        return finish(
            SupervisorExit::RestartCap,
            format!(
                "the driver ended with {end} and the restart cap ({}) is spent",
                after.max_restarts
            ),
        );
    }
    let step = match after.ran_for >= HEALTHY_RUN {
        true => 0,
        false => after.backoff_step,
    };
    Decision::Restart {
        after: backoff(after.first_backoff, step),
        step: step + 1,
        reason: format!(
            "the driver ended with {end}: restart {} of {}",
            after.restarts + 1,
            after.max_restarts
        ),
    }
}

/// How the supervisor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// In the terminal that started it.
    Foreground,
    /// In its own session, its output in the loop's supervisor log.
    Detach,
    /// As a transient systemd user unit.
    Systemd,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Foreground => "foreground",
            Backend::Detach => "detach",
            Backend::Systemd => "systemd",
        }
    }
}

/// One supervisor's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Supervisor {
    pub pid: u32,
    pub started_at: Timestamp,
    pub backend: Backend,
    pub order: Vec<String>,
    pub restarts: u32,
    /// The running drive child, if one runs.
    #[serde(default)]
    pub drive_pid: Option<u32>,
    #[serde(default)]
    pub last_drive: Option<DriveEnded>,
    #[serde(default)]
    pub drain_requested_at: Option<Timestamp>,
    #[serde(default)]
    pub ended: Option<SupervisorEnded>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveEnded {
    pub end: DriveEnd,
    pub words: String,
    pub at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorEnded {
    pub exit: SupervisorExit,
    pub code: u8,
    pub reason: String,
    pub at: Timestamp,
}

/// The `supervisor` stream: the last supervisor that started on the loop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SupervisorState {
    pub current: Option<Supervisor>,
}

impl SupervisorState {
    /// The supervisor `pid`, when it is the current one and has not ended.
    fn running(&self, pid: u32) -> Option<&Supervisor> {
        self.current
            .as_ref()
            .filter(|s| s.pid == pid && s.ended.is_none())
    }
}

/// A change to the supervisor's record. Each is also its own journal
/// event: the record keeps what the supervisor saw, nothing is derived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "request")]
pub enum SupervisorRequest {
    /// A supervisor took the loop's supervisor lock: it replaces any
    /// earlier record (that one is gone, the lock says so).
    Start {
        pid: u32,
        backend: Backend,
        order: Vec<String>,
        at: Timestamp,
    },
    /// It started a drive child.
    DriveStarted { pid: u32, drive_pid: u32 },
    /// Its drive child ended; `restarts`: the count after this end.
    DriveEnded {
        pid: u32,
        end: DriveEnd,
        restarts: u32,
        at: Timestamp,
    },
    /// An operator asked it to stop after the current turn.
    Drain { pid: u32, at: Timestamp },
    /// It ended.
    End {
        pid: u32,
        exit: SupervisorExit,
        reason: String,
        at: Timestamp,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupervisorError {
    #[error("no supervisor with pid {0} runs this loop")]
    NotRunning(u32),
}

impl Classify for SupervisorError {
    fn class(&self) -> ErrorClass {
        ErrorClass::Refused
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorReceipt {
    pub status: String,
}

pub struct SupervisorOwner;

impl Owner for SupervisorOwner {
    type State = SupervisorState;
    type Request = SupervisorRequest;
    type Event = SupervisorRequest;
    type Receipt = SupervisorReceipt;
    type Error = SupervisorError;
    type Context<'a> = ();

    fn decide(
        state: Option<&SupervisorState>,
        request: &SupervisorRequest,
        _: &(),
    ) -> Result<Decided<SupervisorRequest, SupervisorReceipt>, SupervisorError> {
        let empty = SupervisorState::default();
        let state = state.unwrap_or(&empty);
        let written = |status: &str| {
            Decided::write(
                request.clone(),
                SupervisorReceipt {
                    status: status.to_owned(),
                },
            )
        };
        let pid = match request {
            SupervisorRequest::Start { .. } => return Ok(written("started")),
            SupervisorRequest::DriveStarted { pid, .. }
            | SupervisorRequest::DriveEnded { pid, .. }
            | SupervisorRequest::Drain { pid, .. }
            | SupervisorRequest::End { pid, .. } => *pid,
        };
        let running = state.running(pid).ok_or(SupervisorError::NotRunning(pid))?;
        match request {
            // A second drain changes nothing: the first one's time stands.
            SupervisorRequest::Drain { .. } if running.drain_requested_at.is_some() => {
                Ok(Decided::unchanged(SupervisorReceipt {
                    status: "drain_already_requested".into(),
                }))
            }
            SupervisorRequest::Drain { .. } => Ok(written("drain_requested")),
            SupervisorRequest::End { .. } => Ok(written("ended")),
            _ => Ok(written("recorded")),
        }
    }

    fn evolve(state: Option<SupervisorState>, event: &SupervisorRequest) -> SupervisorState {
        let mut state = state.unwrap_or_default();
        if let SupervisorRequest::Start {
            pid,
            backend,
            order,
            at,
        } = event
        {
            state.current = Some(Supervisor {
                pid: *pid,
                started_at: *at,
                backend: *backend,
                order: order.clone(),
                restarts: 0,
                drive_pid: None,
                last_drive: None,
                drain_requested_at: None,
                ended: None,
            });
            return state;
        }
        let Some(current) = state.current.as_mut() else {
            return state;
        };
        match event {
            SupervisorRequest::Start { .. } => {}
            SupervisorRequest::DriveStarted { drive_pid, .. } => {
                current.drive_pid = Some(*drive_pid);
            }
            SupervisorRequest::DriveEnded {
                end, restarts, at, ..
            } => {
                current.drive_pid = None;
                current.restarts = *restarts;
                current.last_drive = Some(DriveEnded {
                    end: *end,
                    words: end.words(),
                    at: *at,
                });
            }
            SupervisorRequest::Drain { at, .. } => current.drain_requested_at = Some(*at),
            SupervisorRequest::End {
                exit, reason, at, ..
            } => {
                current.drive_pid = None;
                current.ended = Some(SupervisorEnded {
                    exit: *exit,
                    code: exit.code(),
                    reason: reason.clone(),
                    at: *at,
                });
            }
        }
        state
    }

    fn event_kind(event: &SupervisorRequest) -> &'static str {
        match event {
            SupervisorRequest::Start { .. } => "supervisor.started",
            SupervisorRequest::DriveStarted { .. } => "supervisor.drive_started",
            SupervisorRequest::DriveEnded { .. } => "supervisor.drive_ended",
            SupervisorRequest::Drain { .. } => "supervisor.drain_requested",
            SupervisorRequest::End { .. } => "supervisor.ended",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none_installed(_: &str) -> bool {
        false
    }

    fn after(end: DriveEnd) -> AfterDrive {
        AfterDrive {
            end,
            stopping: None,
            drain_requested: false,
            quarantined: false,
            recovery_needs_person: false,
            restarts: 0,
            max_restarts: 3,
            backoff_step: 0,
            first_backoff: Duration::from_secs(10),
            ran_for: Duration::from_secs(5),
        }
    }

    fn exit_of(decision: &Decision) -> Option<u8> {
        match decision {
            Decision::Finish { exit, .. } => Some(exit.code()),
            Decision::Restart { .. } => None,
        }
    }

    #[test]
    fn the_given_order_wins_then_the_file_then_the_installed_defaults() {
        let given = vec!["codex".to_owned(), " claude ".to_owned()];
        let file = r#"{"primary_order": ["grok", "kimi"], "max_quota_waits_per_primary": 2}"#;
        let chosen = failover(Some(file), &given, &none_installed).unwrap();
        assert_eq!(chosen.order, ["codex", "claude"]);
        assert_eq!(chosen.max_quota_waits, 2);
        let chosen = failover(Some(file), &[], &none_installed).unwrap();
        assert_eq!(chosen.order, ["grok", "kimi"]);
        let fallback = r#"{"primary_fallback": ["kimi"]}"#;
        assert_eq!(
            failover(Some(fallback), &[], &none_installed)
                .unwrap()
                .order,
            ["kimi"]
        );
        let installed = |name: &str| name == "codex" || name == "deepseek";
        let chosen = failover(None, &[], &installed).unwrap();
        assert_eq!(chosen.order, ["codex", "deepseek"]);
        assert_eq!(chosen.max_quota_waits, DEFAULT_QUOTA_WAITS);
    }

    #[test]
    fn an_empty_order_exits_11_and_a_bad_file_2() {
        for (file, given) in [
            (None, vec![]),
            (Some(r#"{"primary_order": []}"#), vec![]),
            (Some(r#"{"primary_order": ["  "]}"#), vec![]),
            (Some("{}"), vec![]),
            (None, vec![" ".to_owned()]),
        ] {
            let refused = failover(file, &given, &none_installed).unwrap_err();
            assert_eq!(refused.exit().code(), 11, "{file:?} {given:?}: {refused}");
        }
        let refused = failover(Some("{not json"), &[], &none_installed).unwrap_err();
        assert_eq!(refused.exit().code(), 2);
    }

    #[test]
    fn several_primaries_with_zero_quota_waits_are_refused_one_is_not() {
        let many = r#"{"primary_order": ["claude", "codex"], "max_quota_waits_per_primary": 0}"#;
        let refused = failover(Some(many), &[], &none_installed).unwrap_err();
        assert_eq!(refused, FailoverRefusal::MultiPrimaryWithoutWaits(2));
        assert_eq!(refused.exit().code(), 2);
        let one = r#"{"primary_order": ["claude"], "max_quota_waits_per_primary": 0}"#;
        assert_eq!(
            failover(Some(one), &[], &none_installed)
                .unwrap()
                .max_quota_waits,
            0
        );
    }

    #[test]
    fn a_driver_that_ended_with_a_meaning_ends_the_supervisor() {
        for (code, expected) in [(0, 0), (2, 2), (3, 11), (5, 11), (6, 11), (7, 11)] {
            let decision = after_drive(&after(DriveEnd::Code(code)));
            assert_eq!(exit_of(&decision), Some(expected), "drive exit {code}");
        }
    }

    #[test]
    fn a_quarantined_candidate_or_a_recovery_that_fails_closed_is_never_restarted() {
        let mut stopped = after(DriveEnd::Code(4));
        stopped.quarantined = true;
        assert_eq!(exit_of(&after_drive(&stopped)), Some(14));
        // However few restarts were spent.
        stopped.max_restarts = 100;
        assert_eq!(exit_of(&after_drive(&stopped)), Some(14));
        let mut closed = after(DriveEnd::Code(4));
        closed.recovery_needs_person = true;
        assert_eq!(exit_of(&after_drive(&closed)), Some(16));
        // Only a runtime error is read so: a killed driver is restarted.
        closed.end = DriveEnd::Signal(9);
        assert_eq!(exit_of(&after_drive(&closed)), None);
    }

    #[test]
    fn a_driver_that_died_is_restarted_with_back_off_until_the_cap() {
        for end in [
            DriveEnd::Signal(9),
            DriveEnd::Code(101),
            DriveEnd::Code(4),
            DriveEnd::Code(143),
            DriveEnd::Code(77),
        ] {
            let decision = after_drive(&after(end));
            assert!(
                matches!(decision, Decision::Restart { after, step: 1, .. } if after == Duration::from_secs(10)),
                "{end:?}: {decision:?}"
            );
        }
        let mut later = after(DriveEnd::Signal(9));
        later.backoff_step = 3;
        later.restarts = 2;
        assert!(matches!(
            after_drive(&later),
            Decision::Restart { after, step: 4, .. } if after == Duration::from_secs(80)
        ));
        // A driver that had run for a long while starts the back-off over.
        later.ran_for = HEALTHY_RUN;
        assert!(matches!(
            after_drive(&later),
            Decision::Restart { after, step: 1, .. } if after == Duration::from_secs(10)
        ));
        later.restarts = 3;
        assert_eq!(exit_of(&after_drive(&later)), Some(12));
        assert_eq!(backoff(Duration::from_secs(10), 20), MAX_BACKOFF);
    }

    #[test]
    fn a_stop_or_a_drain_ends_the_supervisor_whatever_the_driver_did() {
        let mut stopped = after(DriveEnd::Code(143));
        stopped.stopping = Some(StopSignal::Terminate);
        assert_eq!(exit_of(&after_drive(&stopped)), Some(143));
        let mut drained = after(DriveEnd::Code(0));
        drained.drain_requested = true;
        assert_eq!(exit_of(&after_drive(&drained)), Some(0));
        drained.end = DriveEnd::Signal(9);
        assert_eq!(exit_of(&after_drive(&drained)), Some(0));
    }

    #[test]
    fn the_record_follows_one_supervisor_and_refuses_another_pid() {
        let at = Timestamp::UNIX_EPOCH;
        let start = SupervisorRequest::Start {
            pid: 7,
            backend: Backend::Detach,
            order: vec!["claude".into()],
            at,
        };
        let decide = |state: Option<&SupervisorState>, request: &SupervisorRequest| {
            SupervisorOwner::decide(state, request, &())
        };
        let state = SupervisorOwner::evolve(None, &decide(None, &start).unwrap().event.unwrap());
        let drain = SupervisorRequest::Drain { pid: 7, at };
        assert_eq!(
            decide(Some(&state), &SupervisorRequest::Drain { pid: 8, at }).unwrap_err(),
            SupervisorError::NotRunning(8)
        );
        let state = SupervisorOwner::evolve(Some(state.clone()), &drain);
        assert!(decide(Some(&state), &drain).unwrap().event.is_none());
        let ended = SupervisorRequest::DriveEnded {
            pid: 7,
            end: DriveEnd::Signal(9),
            restarts: 1,
            at,
        };
        let state = SupervisorOwner::evolve(Some(state), &ended);
        let current = state.current.as_ref().unwrap();
        assert_eq!(current.restarts, 1);
        assert_eq!(
            current.last_drive.as_ref().unwrap().words,
            "killed by signal 9 (SIGKILL)"
        );
        let end = SupervisorRequest::End {
            pid: 7,
            exit: SupervisorExit::Done,
            reason: "drained".into(),
            at,
        };
        let state = SupervisorOwner::evolve(Some(state), &end);
        assert!(
            decide(Some(&state), &drain).is_err(),
            "an ended one drains no more"
        );
    }
}
