//! One `drive` run as a state machine: what happens after each turn.
//!
//! Consecutive hard failures stop the run (exit 3). Quota signals wait and
//! retry (until the reported reset, else with backoff) and, with a cap,
//! exclude the provider; so do auth failures (at once) and a missing binary.
//! An excluded provider is gone for the rest of the run; the next one in
//! the list takes over, and when none is left the run exits with the last
//! cause.

use super::classify::{FailureClass, Reading};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `drive`'s exit codes, as the runtime spec numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    Done,
    BadArguments,
    MaxFailures,
    RuntimeError,
    QuotaExhausted,
    ProviderUnavailable,
    AuthDead,
    /// Stopped by SIGINT (Ctrl-C): the shell's 128 + 2.
    Interrupted,
    /// Stopped by SIGTERM (systemd, Docker, `kill`): the shell's 128 + 15.
    Terminated,
}

/// A signal that asks a running driver to stop: its turn's processes are
/// ended, the turn is settled, and the run exits with the signal's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopSignal {
    /// SIGINT, what Ctrl-C sends.
    Interrupt,
    /// SIGTERM, what a service manager or `kill` sends.
    Terminate,
}

impl StopSignal {
    /// The exit of a run this signal stopped.
    pub fn exit(self) -> Exit {
        match self {
            StopSignal::Interrupt => Exit::Interrupted,
            StopSignal::Terminate => Exit::Terminated,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::BadArguments => 2,
            Exit::MaxFailures => 3,
            Exit::RuntimeError => 4,
            Exit::QuotaExhausted => 5,
            Exit::ProviderUnavailable => 6,
            Exit::AuthDead => 7,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::BadArguments => "bad_arguments",
            Exit::MaxFailures => "max_failures",
            Exit::RuntimeError => "runtime_error",
            Exit::QuotaExhausted => "quota_wait_exhausted",
            Exit::ProviderUnavailable => "provider_unavailable",
            Exit::AuthDead => "auth_or_session_dead",
            Exit::Interrupted => "interrupted",
            Exit::Terminated => "terminated",
        }
    }
}

/// What a turn came to, as far as the run is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnResult {
    /// The ledger advanced.
    Advanced,
    /// Exit 0 but no iteration recorded: a failure.
    NoAdvance,
    Failed(FailureClass),
    TimedOut,
    /// The provider's binary is not on PATH.
    Unavailable,
    /// The driver was told to stop while the turn ran, and ended it before
    /// it recorded anything.
    Interrupted(StopSignal),
}

impl TurnResult {
    /// What a finished turn came to. The ledger decides success: a turn
    /// that recorded its iteration advanced, whatever it printed; one that
    /// did not failed, with the class its output shows, and a clean exit
    /// without a record or a reported error is a no-advance failure.
    /// A turn the driver was told to stop is interrupted unless it had
    /// already recorded its iteration (then it advanced, and the run stops
    /// after it all the same).
    pub fn of(
        timed_out: bool,
        exit_status: Option<i32>,
        advanced: bool,
        stopped_by: Option<StopSignal>,
        read: &Reading,
    ) -> TurnResult {
        if timed_out {
            return TurnResult::TimedOut;
        }
        if advanced {
            return TurnResult::Advanced;
        }
        if let Some(signal) = stopped_by {
            return TurnResult::Interrupted(signal);
        }
        match (exit_status, read.class) {
            (_, Some(class @ (FailureClass::Auth | FailureClass::Quota))) => {
                TurnResult::Failed(class)
            }
            (Some(status), Some(FailureClass::Configuration)) if status != 0 => {
                TurnResult::Failed(FailureClass::Configuration)
            }
            (Some(0), None) if read.reported_error.is_none() => TurnResult::NoAdvance,
            _ => TurnResult::Failed(FailureClass::Failure),
        }
    }
}

impl TurnResult {
    /// What the turn came to, in words a person reads (never an internal
    /// name).
    pub fn sentence(self) -> &'static str {
        match self {
            TurnResult::Advanced => "the agent recorded its iteration",
            TurnResult::NoAdvance => "the agent exited 0 without recording an iteration",
            TurnResult::Failed(FailureClass::Failure) => {
                "the agent failed without recording an iteration"
            }
            TurnResult::Failed(FailureClass::Auth) => {
                "the provider refused the agent's credentials (sign in again)"
            }
            TurnResult::Failed(FailureClass::Quota) => "the provider reported a usage limit",
            TurnResult::Failed(FailureClass::Configuration) => {
                "the provider's CLI refused how loopx launched it (a configuration error: fix it, retrying fails the same way)"
            }
            TurnResult::TimedOut => {
                "the turn ran past --iteration-timeout and was killed with everything it started"
            }
            TurnResult::Unavailable => "the provider's binary is not on PATH",
            TurnResult::Interrupted(StopSignal::Interrupt) => {
                "the driver was interrupted (SIGINT) and ended the turn with everything it started"
            }
            TurnResult::Interrupted(StopSignal::Terminate) => {
                "the driver was terminated (SIGTERM) and ended the turn with everything it started"
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_failures: u32,
    /// 0 waits indefinitely.
    pub max_quota_waits: u32,
    pub quota_backoff_seconds: u64,
    /// The longest wait for a reported reset.
    pub max_quota_wait_seconds: u64,
}

pub const MAX_BACKOFF_SECONDS: u64 = 900;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Continue,
    Wait {
        seconds: u64,
        until: Option<Timestamp>,
        reason: String,
    },
    Switch {
        excluded: String,
        next: String,
        cause: Exit,
    },
    Exit {
        exit: Exit,
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct Session {
    providers: Vec<String>,
    excluded: Vec<String>,
    limits: Limits,
    failures: u32,
    quota_waits: u32,
}

impl Session {
    pub fn new(providers: Vec<String>, limits: Limits) -> Self {
        Session {
            providers,
            excluded: Vec::new(),
            limits,
            failures: 0,
            quota_waits: 0,
        }
    }

    /// The provider the next turn uses: the first one not excluded.
    pub fn current(&self) -> Option<&str> {
        self.providers
            .iter()
            .find(|p| !self.excluded.contains(p))
            .map(String::as_str)
    }

    pub fn excluded(&self) -> &[String] {
        &self.excluded
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    fn exclude(&mut self, cause: Exit, why: String) -> Next {
        let Some(current) = self.current().map(str::to_owned) else {
            return Next::Exit {
                exit: cause,
                reason: why,
            };
        };
        self.excluded.push(current.clone());
        self.failures = 0;
        self.quota_waits = 0;
        match self.current() {
            Some(next) => Next::Switch {
                excluded: current,
                next: next.to_owned(),
                cause,
            },
            None => Next::Exit {
                exit: cause,
                reason: format!("{why}; no provider left"),
            },
        }
    }

    pub fn after(
        &mut self,
        result: TurnResult,
        resets_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Next {
        let provider = self.current().unwrap_or("?").to_owned();
        match result {
            TurnResult::Advanced => {
                self.failures = 0;
                self.quota_waits = 0;
                Next::Continue
            }
            TurnResult::NoAdvance
            | TurnResult::TimedOut
            | TurnResult::Failed(FailureClass::Failure) => {
                self.quota_waits = 0;
                self.failures += 1;
                if self.failures >= self.limits.max_failures {
                    Next::Exit {
                        exit: Exit::MaxFailures,
                        reason: format!(
                            "{} consecutive failed turns; the last: {}",
                            self.failures,
                            result.sentence()
                        ),
                    }
                } else {
                    Next::Continue
                }
            }
            TurnResult::Failed(FailureClass::Auth) => {
                self.exclude(Exit::AuthDead, format!("{provider}: authentication failed"))
            }
            TurnResult::Failed(FailureClass::Configuration) => Next::Exit {
                exit: Exit::BadArguments,
                reason: format!("{provider}: {}", result.sentence()),
            },
            TurnResult::Unavailable => self.exclude(
                Exit::ProviderUnavailable,
                format!("{provider}: binary not found on PATH"),
            ),
            // Not a failure of the provider: the operator stopped the run.
            TurnResult::Interrupted(signal) => Next::Exit {
                exit: signal.exit(),
                reason: format!("stopped by {}: {}", signal.name(), result.sentence()),
            },
            TurnResult::Failed(FailureClass::Quota) => {
                self.failures = 0;
                self.quota_waits += 1;
                let capped = self.limits.max_quota_waits > 0
                    && self.quota_waits >= self.limits.max_quota_waits;
                if capped {
                    return self.exclude(
                        Exit::QuotaExhausted,
                        format!("{provider}: {} consecutive quota signals", self.quota_waits),
                    );
                }
                if let Some(until) = resets_at.filter(|t| *t > now) {
                    let seconds = until.duration_since(now).as_secs().max(1) as u64;
                    if seconds > self.limits.max_quota_wait_seconds {
                        return self.exclude(
                            Exit::QuotaExhausted,
                            format!("{provider}: quota resets at {until}, beyond --max-quota-wait"),
                        );
                    }
                    return Next::Wait {
                        seconds,
                        until: Some(until),
                        reason: format!("waiting for quota reset until {until}"),
                    };
                }
                let first = self.limits.quota_backoff_seconds;
                let seconds = crate::backoff::doubling(
                    Duration::from_secs(first),
                    self.quota_waits - 1,
                    Duration::from_secs(MAX_BACKOFF_SECONDS.max(first)),
                )
                .as_secs()
                .max(1);
                Next::Wait {
                    seconds,
                    until: None,
                    reason: format!(
                        "quota signal {} from {provider}; backing off {seconds}s",
                        self.quota_waits
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_failures: 3,
            max_quota_waits: 2,
            quota_backoff_seconds: 10,
            max_quota_wait_seconds: 3600,
        }
    }

    fn now() -> Timestamp {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_ledger_decides_success_and_output_only_classifies_failure() {
        use crate::driver::classify::read;
        use crate::driver::provider::Structured;
        let quiet = read("", Structured::Text, now());
        let limited = read("You have hit your usage limit", Structured::Text, now());
        let errored = read(
            r#"{"type":"result","is_error":true,"subtype":"error_during_execution"}"#,
            Structured::ClaudeStreamJson,
            now(),
        );
        assert_eq!(
            TurnResult::of(false, Some(0), true, None, &limited),
            TurnResult::Advanced
        );
        assert_eq!(
            TurnResult::of(false, Some(0), false, None, &quiet),
            TurnResult::NoAdvance
        );
        assert_eq!(
            TurnResult::of(false, Some(0), false, None, &errored),
            TurnResult::Failed(FailureClass::Failure)
        );
        assert_eq!(
            TurnResult::of(false, Some(1), false, None, &limited),
            TurnResult::Failed(FailureClass::Quota)
        );
        assert_eq!(
            TurnResult::of(false, Some(1), false, None, &quiet),
            TurnResult::Failed(FailureClass::Failure)
        );
        assert_eq!(
            TurnResult::of(true, None, true, None, &quiet),
            TurnResult::TimedOut
        );
    }

    #[test]
    fn a_stop_signal_interrupts_a_turn_that_recorded_nothing_and_ends_the_run() {
        use crate::driver::classify::read;
        use crate::driver::provider::Structured;
        let quiet = read("", Structured::Text, now());
        let sigterm = Some(StopSignal::Terminate);
        assert_eq!(
            TurnResult::of(false, None, false, sigterm, &quiet),
            TurnResult::Interrupted(StopSignal::Terminate)
        );
        // The agent's record stands: the turn advanced, the run stops next.
        assert_eq!(
            TurnResult::of(false, None, true, sigterm, &quiet),
            TurnResult::Advanced
        );
        let mut s = Session::new(vec!["claude".into()], limits());
        let interrupted = TurnResult::Interrupted(StopSignal::Interrupt);
        assert!(matches!(
            s.after(interrupted, None, now()),
            Next::Exit {
                exit: Exit::Interrupted,
                ..
            }
        ));
        assert_eq!(Exit::Interrupted.code(), 130);
        assert_eq!(Exit::Terminated.code(), 143);
    }

    #[test]
    fn consecutive_failures_stop_the_run_and_success_resets_the_count() {
        let mut s = Session::new(vec!["claude".into()], limits());
        assert_eq!(s.after(TurnResult::NoAdvance, None, now()), Next::Continue);
        assert_eq!(s.after(TurnResult::TimedOut, None, now()), Next::Continue);
        assert_eq!(s.after(TurnResult::Advanced, None, now()), Next::Continue);
        s.after(TurnResult::Failed(FailureClass::Failure), None, now());
        s.after(TurnResult::NoAdvance, None, now());
        assert!(matches!(
            s.after(TurnResult::TimedOut, None, now()),
            Next::Exit {
                exit: Exit::MaxFailures,
                ..
            }
        ));
    }

    #[test]
    fn auth_and_missing_binaries_fail_over_then_exit_with_the_last_cause() {
        let mut s = Session::new(vec!["claude".into(), "codex".into()], limits());
        assert_eq!(
            s.after(TurnResult::Failed(FailureClass::Auth), None, now()),
            Next::Switch {
                excluded: "claude".into(),
                next: "codex".into(),
                cause: Exit::AuthDead
            }
        );
        assert_eq!(s.current(), Some("codex"));
        assert!(matches!(
            s.after(TurnResult::Unavailable, None, now()),
            Next::Exit {
                exit: Exit::ProviderUnavailable,
                ..
            }
        ));
    }

    #[test]
    fn quota_waits_back_off_honour_resets_and_are_capped() {
        let mut s = Session::new(vec!["claude".into()], limits());
        match s.after(TurnResult::Failed(FailureClass::Quota), None, now()) {
            Next::Wait {
                seconds: 10,
                until: None,
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            s.after(TurnResult::Failed(FailureClass::Quota), None, now()),
            Next::Exit {
                exit: Exit::QuotaExhausted,
                ..
            }
        ));
        let mut unlimited = Session::new(
            vec!["claude".into()],
            Limits {
                max_quota_waits: 0,
                ..limits()
            },
        );
        let reset = now()
            .checked_add(jiff::SignedDuration::from_secs(120))
            .unwrap();
        assert_eq!(
            unlimited.after(TurnResult::Failed(FailureClass::Quota), Some(reset), now()),
            Next::Wait {
                seconds: 120,
                until: Some(reset),
                reason: format!("waiting for quota reset until {reset}")
            }
        );
        let far = now()
            .checked_add(jiff::SignedDuration::from_secs(7200))
            .unwrap();
        assert!(matches!(
            unlimited.after(TurnResult::Failed(FailureClass::Quota), Some(far), now()),
            Next::Exit {
                exit: Exit::QuotaExhausted,
                ..
            }
        ));
        let mut backoff = Session::new(
            vec!["x".into()],
            Limits {
                max_quota_waits: 0,
                ..limits()
            },
        );
        let waits: Vec<u64> = (0..4)
            .map(
                |_| match backoff.after(TurnResult::Failed(FailureClass::Quota), None, now()) {
                    Next::Wait { seconds, .. } => seconds,
                    other => panic!("{other:?}"),
                },
            )
            .collect();
        assert_eq!(waits, [10, 20, 40, 80]);
    }
    #[test]
    fn a_refused_launch_line_stops_the_run_as_bad_arguments_and_is_never_retried() {
        use crate::driver::classify::read;
        use crate::driver::provider::Structured;
        let refused = read(
            "error: unexpected argument '--full-auto' found\n",
            Structured::CodexJson,
            now(),
        );
        let result = TurnResult::of(false, Some(2), false, None, &refused);
        assert_eq!(result, TurnResult::Failed(FailureClass::Configuration));
        // Exit 0: whatever it printed, the CLI ran.
        assert_eq!(
            TurnResult::of(false, Some(0), false, None, &refused),
            TurnResult::Failed(FailureClass::Failure)
        );
        let mut s = Session::new(vec!["codex".into(), "claude".into()], limits());
        match s.after(result, None, now()) {
            Next::Exit {
                exit: Exit::BadArguments,
                reason,
            } => assert!(reason.starts_with("codex: "), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.failures(), 0);
    }
}
