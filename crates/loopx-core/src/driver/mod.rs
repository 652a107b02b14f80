//! The driver's durable side: its registration, the dispatch intent it
//! writes before each turn, and the settlement after.
//!
//! An intent that is still open when a driver starts means the previous
//! one died mid-turn. [`recovery_plan`] reads it against the ledger and the
//! workspace and says what is safe: settle without re-running, cancel, or
//! stop and let a person look.

pub mod capture;
pub mod classify;
pub mod provider;
pub mod session;
pub mod snapshot;
pub mod step;
pub mod stream;

use crate::operation::{Decided, Owner};
use classify::{FailureClass, Usage};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub const STREAM: &str = "driver";
pub const RECENT_SETTLEMENTS: usize = 10;

/// Where the agent works: the repository and what it looked like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub root: String,
    /// `None` outside a git repository.
    pub head: Option<String>,
    /// Digest of the uncommitted changes (`git status` + `git diff`).
    pub changes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub pid: u32,
    pub started_at: Timestamp,
    pub providers: Vec<String>,
    pub command: Option<String>,
    /// How its provider processes run; absent in journals from before
    /// the transport was recorded, which ran unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::containment::Transport>,
    /// Under trusted-local, the limits in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::containment::limits::Limits>,
    /// The model and thinking pins its providers start with
    /// ([`provider::pins_set`]), by variable.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pins: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub dispatch_id: String,
    /// The ledger iteration this turn is expected to record.
    pub iteration: u64,
    pub provider: String,
    pub prompt_digest: String,
    /// Ledger revision and recorded iterations when the turn began.
    pub ledger_revision: u64,
    pub iterations_before: u64,
    pub workspace: Workspace,
    /// The turn's log, relative to the loop directory.
    pub log: String,
    pub started_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    Advanced,
    NoAdvance,
    Failed(FailureClass),
    TimedOut,
    /// Found after a crash: the agent had written the ledger.
    RecoveredAdvanced,
    /// Cancelled by the operator or by a recovery that proved no effect.
    Cancelled,
    /// Ended by the driver when it was told to stop (SIGINT, SIGTERM),
    /// before the agent recorded anything.
    Interrupted,
}

impl From<session::TurnResult> for TurnOutcome {
    fn from(result: session::TurnResult) -> Self {
        use session::TurnResult;
        match result {
            TurnResult::Advanced => TurnOutcome::Advanced,
            TurnResult::NoAdvance => TurnOutcome::NoAdvance,
            TurnResult::Failed(class) => TurnOutcome::Failed(class),
            TurnResult::TimedOut => TurnOutcome::TimedOut,
            TurnResult::Unavailable => TurnOutcome::Cancelled,
            TurnResult::Interrupted(_) => TurnOutcome::Interrupted,
        }
    }
}

/// Whether a turn did its part: the ledger gained an iteration, or (in
/// enforce mode, where an agent's report is staged, not banked) the turn
/// staged a new candidate, whose review decides the rest. `staged_*`: the
/// fingerprint of the candidate pending review before and after the turn.
pub fn turn_advanced(
    iterations_before: u64,
    iterations_after: u64,
    staged_before: Option<&crate::digest::Digest>,
    staged_after: Option<&crate::digest::Digest>,
) -> bool {
    iterations_after > iterations_before
        || (staged_after.is_some() && staged_after != staged_before)
}

impl TurnOutcome {
    /// `advanced`, `failed:quota`, ...
    /// Whether the turn recorded its iteration (at once, or as found by a
    /// later driver's recovery).
    pub fn advanced(self) -> bool {
        matches!(self, TurnOutcome::Advanced | TurnOutcome::RecoveredAdvanced)
    }

    pub fn label(self) -> String {
        match self {
            TurnOutcome::Advanced => "advanced".into(),
            TurnOutcome::NoAdvance => "no_advance".into(),
            TurnOutcome::Failed(class) => format!(
                "failed:{}",
                serde_json::to_value(class)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            TurnOutcome::TimedOut => "timed_out".into(),
            TurnOutcome::RecoveredAdvanced => "recovered_advanced".into(),
            TurnOutcome::Cancelled => "cancelled".into(),
            TurnOutcome::Interrupted => "interrupted".into(),
        }
    }
}

/// What the host itself saw of a turn, whatever the agent says of it:
/// the completion gate a candidate the turn staged must pass before it
/// may be reviewed or banked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostAttestation {
    /// The prompt reached the process whole (argv, or all of stdin).
    pub prompt_delivered: bool,
    /// The process ran past its timeout and was killed.
    pub timed_out: bool,
    /// Its output was more than the cap, so the host did not see all of it.
    pub output_truncated: bool,
    /// Nothing it started was still alive after the sweep.
    pub cleaned_up: bool,
    /// Its output held a credential (redacted wherever it is stored).
    pub sensitive_output: bool,
}

impl HostAttestation {
    /// Why a candidate the turn staged cannot be trusted as it stands,
    /// one phrase each; empty when the host saw nothing wrong.
    pub fn failures(&self) -> Vec<&'static str> {
        [
            (!self.prompt_delivered, "its prompt was not delivered whole"),
            (self.timed_out, "it ran out of time and was killed"),
            (
                self.output_truncated,
                "its output passed the cap, so the host did not see all of it",
            ),
            (
                !self.cleaned_up,
                "processes it started outlived the cleanup",
            ),
            (self.sensitive_output, "its output held a credential"),
        ]
        .into_iter()
        .filter_map(|(failed, why)| failed.then_some(why))
        .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    pub dispatch_id: String,
    pub iteration: u64,
    pub provider: String,
    pub outcome: TurnOutcome,
    pub exit_status: Option<i32>,
    pub usage: Usage,
    pub settled_at: Timestamp,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub until: Timestamp,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DriverState {
    pub registration: Option<Registration>,
    pub current_provider: Option<String>,
    pub open: Option<Intent>,
    pub waiting: Option<Waiting>,
    pub dispatches: u64,
    pub recent: Vec<Settlement>,
    /// The repository root first driven; a later driver must find the same.
    pub workspace_root: Option<String>,
    /// How the last drive run that said goodbye ended. Absent until one
    /// has, so older journals read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunEnded>,
    /// The open turn's CLI retrying a failed model API call: its latest
    /// retry, until the turn settles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrying: Option<TurnRetry>,
    /// The last turn's git snapshots (absent while none was taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_snapshot: Option<snapshot::TurnSnapshot>,
    /// The workspace as loopx last left it (a turn's end, a rollback, the
    /// operator's acceptance): what a rollback and a restart check against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_left: Option<snapshot::WorkspaceMark>,
}

/// A running turn's CLI retrying a failed model API call, as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRetry {
    pub dispatch_id: String,
    #[serde(flatten)]
    pub retry: stream::CliRetry,
    pub at: Timestamp,
}

/// How one drive run ended: its exit, why in words, and how many turns it
/// ran. What a view says after the driver is gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnded {
    pub exit: session::Exit,
    pub reason: String,
    pub turns: u64,
    pub at: Timestamp,
}

impl RunEnded {
    /// Whether the run gave up on the loop (rather than finishing it or
    /// being told to stop): the loop did not end, and nothing drives it.
    pub fn gave_up(&self) -> bool {
        !matches!(
            self.exit,
            session::Exit::Done | session::Exit::Interrupted | session::Exit::Terminated
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DriverRequest {
    Register {
        registration: Registration,
        workspace_root: String,
    },
    Unregister {
        pid: u32,
        /// How the run ended, when it ended on its own terms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended: Option<RunEnded>,
    },
    Intend {
        intent: Box<Intent>,
    },
    Settle {
        settlement: Box<Settlement>,
    },
    Cancel {
        dispatch_id: String,
        reason: String,
    },
    Wait {
        pid: u32,
        waiting: Option<Waiting>,
        provider: Option<String>,
    },
    /// The open turn's CLI is retrying (what `status` shows meanwhile).
    Retrying {
        retry: TurnRetry,
    },
    /// A turn's workspace before and after, as committed to loopx's refs.
    Snapshot {
        snapshot: Box<snapshot::TurnSnapshot>,
    },
    /// The workspace was restored to a snapshot.
    RollBack {
        rollback: Box<snapshot::Rollback>,
        /// The user's HEAD, which a rollback never moves.
        head: Option<String>,
    },
    /// The operator accepted the workspace as found at a restart.
    AcceptWorkspace {
        mark: snapshot::WorkspaceMark,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DriverEvent {
    Registered {
        registration: Registration,
        workspace_root: String,
        reclaimed_from: Option<u32>,
    },
    Unregistered {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended: Option<RunEnded>,
    },
    Intended {
        intent: Box<Intent>,
    },
    Settled {
        settlement: Box<Settlement>,
    },
    Cancelled {
        dispatch_id: String,
        reason: String,
        at: Timestamp,
    },
    Waiting {
        waiting: Option<Waiting>,
        provider: Option<String>,
    },
    Retrying {
        retry: TurnRetry,
    },
    Snapshotted {
        snapshot: Box<snapshot::TurnSnapshot>,
    },
    RolledBack {
        rollback: Box<snapshot::Rollback>,
        head: Option<String>,
        at: Timestamp,
    },
    WorkspaceAccepted {
        mark: snapshot::WorkspaceMark,
        at: Timestamp,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverReceipt {
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimed_from: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error("dispatch {dispatch_id} (iteration {iteration}) is still open from an earlier driver: run `loopx recover --dir <DIR>` to see what it did before dispatching again")]
    OpenDispatch { dispatch_id: String, iteration: u64 },
    #[error("no open dispatch {dispatch_id}{}", open.as_ref().map(|o| format!(" (the open one is {o})")).unwrap_or_default())]
    NotOpen {
        dispatch_id: String,
        open: Option<String>,
    },
    #[error("this loop was driven in workspace {recorded}, not {found}: drive it from the project root {recorded}, or start a new loop for this workspace")]
    WorkspaceMismatch { recorded: String, found: String },
    #[error("driver pid {pid} is not this loop's registered driver")]
    NotRegistered { pid: u32 },
}

pub struct DriverOwner;

fn receipt(effect: &str, dispatch_id: Option<&str>) -> DriverReceipt {
    DriverReceipt {
        effect: effect.to_owned(),
        dispatch_id: dispatch_id.map(str::to_owned),
        reclaimed_from: None,
    }
}

impl Owner for DriverOwner {
    type State = DriverState;
    type Request = DriverRequest;
    type Event = DriverEvent;
    type Receipt = DriverReceipt;
    type Error = DriverError;
    type Context<'a> = Timestamp;

    fn decide(
        state: Option<&DriverState>,
        request: &DriverRequest,
        now: &Timestamp,
    ) -> Result<Decided<DriverEvent, DriverReceipt>, DriverError> {
        let empty = DriverState::default();
        let state = state.unwrap_or(&empty);
        let open_id = || state.open.as_ref().map(|o| o.dispatch_id.clone());
        match request {
            DriverRequest::Register {
                registration,
                workspace_root,
            } => {
                if let Some(recorded) = state
                    .workspace_root
                    .as_ref()
                    .filter(|r| *r != workspace_root)
                {
                    return Err(DriverError::WorkspaceMismatch {
                        recorded: recorded.clone(),
                        found: workspace_root.clone(),
                    });
                }
                // The adapter holds the loop's driver lock, so any earlier
                // registration belongs to a driver that is gone.
                let reclaimed_from = state
                    .registration
                    .as_ref()
                    .map(|r| r.pid)
                    .filter(|pid| *pid != registration.pid);
                let mut r = receipt("registered", None);
                r.reclaimed_from = reclaimed_from;
                Ok(Decided::write(
                    DriverEvent::Registered {
                        registration: registration.clone(),
                        workspace_root: workspace_root.clone(),
                        reclaimed_from,
                    },
                    r,
                ))
            }
            DriverRequest::Unregister { pid, ended } => match &state.registration {
                Some(r) if r.pid == *pid => Ok(Decided::write(
                    DriverEvent::Unregistered {
                        ended: ended.clone(),
                    },
                    receipt("unregistered", None),
                )),
                _ => Ok(Decided::unchanged(receipt("not_registered", None))),
            },
            DriverRequest::Intend { intent } => {
                if let Some(open) = &state.open {
                    return Err(DriverError::OpenDispatch {
                        dispatch_id: open.dispatch_id.clone(),
                        iteration: open.iteration,
                    });
                }
                Ok(Decided::write(
                    DriverEvent::Intended {
                        intent: intent.clone(),
                    },
                    receipt("intended", Some(&intent.dispatch_id)),
                ))
            }
            DriverRequest::Settle { settlement } => {
                if open_id().as_deref() != Some(settlement.dispatch_id.as_str()) {
                    return Err(DriverError::NotOpen {
                        dispatch_id: settlement.dispatch_id.clone(),
                        open: open_id(),
                    });
                }
                // The note quotes the provider's error text, which may
                // echo a credential; the journal is forever.
                let receipt = receipt("settled", Some(&settlement.dispatch_id));
                let mut settlement = settlement.clone();
                settlement.note = crate::redact::redact_owned(&settlement.note);
                Ok(Decided::write(DriverEvent::Settled { settlement }, receipt))
            }
            DriverRequest::Cancel {
                dispatch_id,
                reason,
            } => {
                if open_id().as_deref() != Some(dispatch_id.as_str()) {
                    return Err(DriverError::NotOpen {
                        dispatch_id: dispatch_id.clone(),
                        open: open_id(),
                    });
                }
                Ok(Decided::write(
                    DriverEvent::Cancelled {
                        dispatch_id: dispatch_id.clone(),
                        reason: crate::redact::redact_owned(reason),
                        at: *now,
                    },
                    receipt("cancelled", Some(dispatch_id)),
                ))
            }
            DriverRequest::Wait {
                pid,
                waiting,
                provider,
            } => {
                if state.registration.as_ref().map(|r| r.pid) != Some(*pid) {
                    return Err(DriverError::NotRegistered { pid: *pid });
                }
                if &state.waiting == waiting && &state.current_provider == provider {
                    return Ok(Decided::unchanged(receipt("unchanged", None)));
                }
                Ok(Decided::write(
                    DriverEvent::Waiting {
                        waiting: waiting.clone(),
                        provider: provider.clone(),
                    },
                    receipt("waiting", None),
                ))
            }
            DriverRequest::Retrying { retry } => {
                if open_id().as_deref() != Some(retry.dispatch_id.as_str()) {
                    return Err(DriverError::NotOpen {
                        dispatch_id: retry.dispatch_id.clone(),
                        open: open_id(),
                    });
                }
                if state.retrying.as_ref().map(|r| &r.retry) == Some(&retry.retry) {
                    return Ok(Decided::unchanged(receipt(
                        "unchanged",
                        Some(&retry.dispatch_id),
                    )));
                }
                Ok(Decided::write(
                    DriverEvent::Retrying {
                        retry: retry.clone(),
                    },
                    receipt("retrying", Some(&retry.dispatch_id)),
                ))
            }
            DriverRequest::Snapshot { snapshot } => Ok(Decided::write(
                DriverEvent::Snapshotted {
                    snapshot: snapshot.clone(),
                },
                receipt("snapshotted", Some(&snapshot.dispatch_id)),
            )),
            DriverRequest::RollBack { rollback, head } => {
                let mut rollback = rollback.clone();
                rollback.reason = crate::redact::redact_owned(&rollback.reason);
                Ok(Decided::write(
                    DriverEvent::RolledBack {
                        rollback,
                        head: head.clone(),
                        at: *now,
                    },
                    receipt("rolled_back", None),
                ))
            }
            DriverRequest::AcceptWorkspace { mark } => Ok(Decided::write(
                DriverEvent::WorkspaceAccepted {
                    mark: mark.clone(),
                    at: *now,
                },
                receipt("workspace_accepted", None),
            )),
        }
    }

    fn evolve(state: Option<DriverState>, event: &DriverEvent) -> DriverState {
        let mut state = state.unwrap_or_default();
        let settle = |state: &mut DriverState, settlement: Settlement| {
            state.open = None;
            state.retrying = None;
            state.dispatches += 1;
            crate::window::push_newest(&mut state.recent, settlement, RECENT_SETTLEMENTS);
        };
        match event {
            DriverEvent::Registered {
                registration,
                workspace_root,
                ..
            } => {
                state.registration = Some(registration.clone());
                state.workspace_root = Some(workspace_root.clone());
                state.waiting = None;
                state.current_provider = registration.providers.first().cloned();
            }
            DriverEvent::Unregistered { ended } => {
                state.registration = None;
                state.waiting = None;
                if ended.is_some() {
                    state.last_run = ended.clone();
                }
            }
            DriverEvent::Intended { intent } => {
                state.current_provider = Some(intent.provider.clone());
                state.waiting = None;
                state.retrying = None;
                state.open = Some((**intent).clone());
            }
            DriverEvent::Settled { settlement } => settle(&mut state, (**settlement).clone()),
            DriverEvent::Cancelled {
                dispatch_id,
                reason,
                at,
            } => {
                if let Some(open) = state.open.clone().filter(|o| &o.dispatch_id == dispatch_id) {
                    settle(
                        &mut state,
                        Settlement {
                            dispatch_id: open.dispatch_id,
                            iteration: open.iteration,
                            provider: open.provider,
                            outcome: TurnOutcome::Cancelled,
                            exit_status: None,
                            usage: Usage::default(),
                            settled_at: *at,
                            note: reason.clone(),
                        },
                    );
                }
            }
            DriverEvent::Waiting { waiting, provider } => {
                state.waiting = waiting.clone();
                state.current_provider = provider.clone();
            }
            DriverEvent::Retrying { retry } => {
                if state.open.as_ref().map(|o| &o.dispatch_id) == Some(&retry.dispatch_id) {
                    state.retrying = Some(retry.clone());
                }
            }
            DriverEvent::Snapshotted { snapshot } => {
                state.workspace_left = Some(snapshot.left());
                state.last_snapshot = Some((**snapshot).clone());
            }
            DriverEvent::RolledBack { rollback, head, .. } => {
                state.workspace_left = Some(rollback.left(head.clone()));
            }
            DriverEvent::WorkspaceAccepted { mark, .. } => {
                state.workspace_left = Some(mark.clone());
            }
        }
        state
    }

    fn event_kind(event: &DriverEvent) -> &'static str {
        match event {
            DriverEvent::Registered { .. } => "driver.registered",
            DriverEvent::Unregistered { .. } => "driver.unregistered",
            DriverEvent::Intended { .. } => "driver.intended",
            DriverEvent::Settled { .. } => "driver.settled",
            DriverEvent::Cancelled { .. } => "driver.cancelled",
            DriverEvent::Waiting { .. } => "driver.waiting",
            DriverEvent::Retrying { .. } => "driver.retrying",
            DriverEvent::Snapshotted { .. } => "driver.snapshotted",
            DriverEvent::RolledBack { .. } => "driver.rolled_back",
            DriverEvent::WorkspaceAccepted { .. } => "driver.workspace_accepted",
        }
    }
}

/// What a starting driver should do about an open intent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RecoveryPlan {
    /// Nothing is open.
    Clear,
    /// The agent recorded its iteration: settle the intent, do not re-run.
    SettleAdvanced { dispatch_id: String, iteration: u64 },
    /// No iteration, no workspace change, no live agent: safe to cancel
    /// and dispatch afresh once.
    CancelUnstarted { dispatch_id: String },
    /// Stop: a person must look (exit 4).
    FailClosed {
        dispatch_id: String,
        inspect: String,
    },
}

/// What the store and the workspace say about `open`.
pub struct Observed<'a> {
    pub iterations_now: u64,
    pub ledger_revision_now: u64,
    pub workspace_now: &'a Workspace,
    pub agent: Liveness,
}

/// What the driver's durable record of the agent process says. The record
/// (a pid file) is written before the intent commits, saying "not started",
/// and rewritten with the agent's process group before the agent is let
/// run; so its absence proves nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The record says the agent was never let run.
    NotStarted,
    /// The recorded process group is gone.
    Gone,
    /// The recorded process group still has a live process.
    Alive,
    /// The record is missing or unreadable: the agent may be running.
    Unknown {
        /// The record that was looked for, relative to the loop directory.
        record: String,
    },
}

pub fn recovery_plan(open: Option<&Intent>, seen: &Observed<'_>) -> RecoveryPlan {
    let Some(intent) = open else {
        return RecoveryPlan::Clear;
    };
    let id = intent.dispatch_id.clone();
    let fail = |inspect: String| RecoveryPlan::FailClosed {
        dispatch_id: id.clone(),
        inspect,
    };
    match &seen.agent {
        Liveness::Alive => return fail(format!("the agent of dispatch {id} may still be running; wait for it or stop it, then run `loopx recover --dir <DIR>` again")),
        Liveness::Unknown { record } => return fail(format!(
            "the agent record {record} of dispatch {id} is missing or unreadable, so its agent may still be running and re-running the turn could do its work twice: look for it (`grep -l LOOPX_DISPATCH_ID={id} /proc/*/environ`), stop it if it runs, inspect {} and `loopx status`, then `loopx recover --dir <DIR> --cancel --dispatch-id {id}` (or append its iteration by hand first)",
            intent.log
        )),
        Liveness::NotStarted | Liveness::Gone => {}
    }
    if seen.ledger_revision_now < intent.ledger_revision
        || seen.iterations_now < intent.iterations_before
    {
        return fail(format!(
            "the ledger is behind the journal (intent saw revision {}, {} iterations; the store has revision {}, {} iterations): the journal contradicts the ledger; inspect loopx.sqlite and {}",
            intent.ledger_revision, intent.iterations_before, seen.ledger_revision_now, seen.iterations_now, intent.log
        ));
    }
    match seen.iterations_now - intent.iterations_before {
        0 if seen.workspace_now == &intent.workspace => RecoveryPlan::CancelUnstarted { dispatch_id: id },
        0 => fail(format!(
            "dispatch {id} changed the workspace but recorded no iteration: inspect {} and `git -C {} status`, then append the iteration by hand or `loopx recover --dir <DIR> --cancel --dispatch-id {id}`",
            intent.log, intent.workspace.root
        )),
        1 => RecoveryPlan::SettleAdvanced { dispatch_id: id, iteration: intent.iteration },
        n => fail(format!("dispatch {id} expected one iteration but the ledger gained {n}: the journal contradicts the ledger; inspect `loopx validate` and {}", intent.log)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_advances_by_an_iteration_or_a_newly_staged_candidate_only() {
        let old = crate::digest::Digest::of_bytes(b"old");
        let new = crate::digest::Digest::of_bytes(b"new");
        assert!(turn_advanced(3, 4, None, None));
        assert!(turn_advanced(3, 3, None, Some(&new)));
        assert!(turn_advanced(3, 3, Some(&old), Some(&new)));
        // The same candidate still pending, or none: nothing was done.
        assert!(!turn_advanced(3, 3, Some(&old), Some(&old)));
        assert!(!turn_advanced(3, 3, Some(&old), None));
        assert!(!turn_advanced(3, 3, None, None));
    }

    #[test]
    fn a_goodbye_keeps_how_the_run_ended_and_older_journals_still_read() {
        // Written before goodbyes said how a run ended.
        let old: DriverEvent = serde_json::from_str(r#"{"type":"unregistered"}"#).unwrap();
        assert_eq!(old, DriverEvent::Unregistered { ended: None });
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"type":"unregistered"}"#,
            "an event without an ending serializes as it always did"
        );
        let ended = RunEnded {
            exit: session::Exit::MaxFailures,
            reason: "3 consecutive failed turns".into(),
            turns: 3,
            at: Timestamp::UNIX_EPOCH,
        };
        let state = DriverOwner::evolve(
            None,
            &DriverEvent::Unregistered {
                ended: Some(ended.clone()),
            },
        );
        // A goodbye without an ending (an older driver) keeps the last one.
        let state = DriverOwner::evolve(Some(state), &old);
        assert_eq!(state.last_run, Some(ended));
        let view = summary(&state, |_| false);
        assert!(
            view.line().starts_with(
                "not running; its last run ended with exit 3 (max_failures) after 3 turns"
            ),
            "{}",
            view.line()
        );
    }

    fn workspace(changes: &str) -> Workspace {
        Workspace {
            root: "/p".into(),
            head: Some("abc".into()),
            changes: Some(changes.into()),
        }
    }

    fn intent() -> Intent {
        Intent {
            dispatch_id: "d1".into(),
            iteration: 4,
            provider: "claude".into(),
            prompt_digest: "sha256:x".into(),
            ledger_revision: 10,
            iterations_before: 3,
            workspace: workspace("clean"),
            log: "driver_logs/d1.log".into(),
            started_at: Timestamp::UNIX_EPOCH,
        }
    }

    fn seen<'a>(iterations: u64, revision: u64, ws: &'a Workspace, alive: bool) -> Observed<'a> {
        Observed {
            iterations_now: iterations,
            ledger_revision_now: revision,
            workspace_now: ws,
            agent: if alive {
                Liveness::Alive
            } else {
                Liveness::Gone
            },
        }
    }

    #[test]
    fn an_unknown_agent_fails_closed_whatever_the_ledger_says() {
        let clean = workspace("clean");
        let i = intent();
        for (iterations, revision) in [(3, 10), (4, 11)] {
            let observed = Observed {
                agent: Liveness::Unknown {
                    record: "driver_logs/d1.pid".into(),
                },
                ..seen(iterations, revision, &clean, false)
            };
            match recovery_plan(Some(&i), &observed) {
                RecoveryPlan::FailClosed { inspect, .. } => assert!(
                    inspect.contains("driver_logs/d1.pid") && inspect.contains("--cancel"),
                    "{inspect}"
                ),
                other => panic!("{other:?}"),
            }
        }
        let never = Observed {
            agent: Liveness::NotStarted,
            ..seen(3, 10, &clean, false)
        };
        assert_eq!(
            recovery_plan(Some(&i), &never),
            RecoveryPlan::CancelUnstarted {
                dispatch_id: "d1".into()
            }
        );
    }

    #[test]
    fn the_retry_table() {
        let clean = workspace("clean");
        let dirty = workspace("dirty");
        let i = intent();
        assert_eq!(
            recovery_plan(None, &seen(3, 10, &clean, false)),
            RecoveryPlan::Clear
        );
        assert_eq!(
            recovery_plan(Some(&i), &seen(4, 11, &dirty, false)),
            RecoveryPlan::SettleAdvanced {
                dispatch_id: "d1".into(),
                iteration: 4
            }
        );
        assert_eq!(
            recovery_plan(Some(&i), &seen(3, 10, &clean, false)),
            RecoveryPlan::CancelUnstarted {
                dispatch_id: "d1".into()
            }
        );
        for observed in [
            seen(3, 10, &dirty, false),
            seen(5, 12, &clean, false),
            seen(2, 9, &clean, false),
            seen(3, 10, &clean, true),
        ] {
            assert!(matches!(
                recovery_plan(Some(&i), &observed),
                RecoveryPlan::FailClosed { .. }
            ));
        }
    }

    #[test]
    fn settlement_notes_and_cancel_reasons_are_redacted_before_the_journal() {
        let now = Timestamp::UNIX_EPOCH;
        let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let state = DriverOwner::evolve(
            None,
            &DriverEvent::Intended {
                intent: Box::new(intent()),
            },
        );
        let settle = DriverOwner::decide(
            Some(&state),
            &DriverRequest::Settle {
                settlement: Box::new(Settlement {
                    dispatch_id: "d1".into(),
                    iteration: 4,
                    provider: "claude".into(),
                    outcome: TurnOutcome::Failed(FailureClass::Failure),
                    exit_status: Some(1),
                    usage: Usage::default(),
                    settled_at: now,
                    note: format!("invalid x-api-key {key}"),
                }),
            },
            &now,
        )
        .unwrap();
        let text = serde_json::to_string(&settle.event).unwrap();
        assert!(!text.contains(key) && text.contains("[REDACTED]"), "{text}");
        let cancel = DriverOwner::decide(
            Some(&state),
            &DriverRequest::Cancel {
                dispatch_id: "d1".into(),
                reason: format!("Bearer {key}"),
            },
            &now,
        )
        .unwrap();
        let text = serde_json::to_string(&cancel.event).unwrap();
        assert!(!text.contains(key), "{text}");
    }

    #[test]
    fn a_running_turns_cli_retry_is_shown_until_the_turn_settles_and_never_for_another() {
        let now = Timestamp::UNIX_EPOCH;
        let registered = DriverOwner::evolve(
            None,
            &DriverEvent::Registered {
                registration: Registration {
                    pid: 7,
                    started_at: now,
                    providers: vec!["claude".into()],
                    command: None,
                    transport: None,
                    limits: None,
                    pins: Default::default(),
                },
                workspace_root: "/p".into(),
                reclaimed_from: None,
            },
        );
        let open = DriverOwner::evolve(
            Some(registered),
            &DriverEvent::Intended {
                intent: Box::new(intent()),
            },
        );
        let retry = |dispatch_id: &str, attempt: u32| DriverRequest::Retrying {
            retry: TurnRetry {
                dispatch_id: dispatch_id.into(),
                retry: stream::CliRetry {
                    attempt,
                    max_retries: Some(10),
                    status: Some(429),
                    error: "rate_limit".into(),
                    delay_ms: Some(1000),
                },
                at: now,
            },
        };
        // Not the open turn's: refused, nothing written.
        assert!(matches!(
            DriverOwner::decide(Some(&open), &retry("d0", 1), &now),
            Err(DriverError::NotOpen { .. })
        ));
        let decided = DriverOwner::decide(Some(&open), &retry("d1", 1), &now).unwrap();
        let retrying = DriverOwner::evolve(Some(open), &decided.event.unwrap());
        let line = summary(&retrying, |_| true).line();
        assert!(
            line.contains("on iteration 4, its CLI on retry 1 of 10 after 429 rate_limit"),
            "{line}"
        );
        // The same retry again writes nothing.
        let again = DriverOwner::decide(Some(&retrying), &retry("d1", 1), &now).unwrap();
        assert!(again.event.is_none());
        let settled = DriverOwner::evolve(
            Some(retrying),
            &DriverEvent::Cancelled {
                dispatch_id: "d1".into(),
                reason: "test".into(),
                at: now,
            },
        );
        assert_eq!(settled.retrying, None);
        assert_eq!(summary(&settled, |_| true).retrying, None);
    }

    #[test]
    fn one_intent_at_a_time_and_settlement_must_match() {
        let now = Timestamp::UNIX_EPOCH;
        let state = DriverOwner::evolve(
            None,
            &DriverEvent::Intended {
                intent: Box::new(intent()),
            },
        );
        let again = DriverOwner::decide(
            Some(&state),
            &DriverRequest::Intend {
                intent: Box::new(intent()),
            },
            &now,
        );
        assert!(matches!(again, Err(DriverError::OpenDispatch { .. })));
        let wrong = DriverOwner::decide(
            Some(&state),
            &DriverRequest::Cancel {
                dispatch_id: "d2".into(),
                reason: String::new(),
            },
            &now,
        );
        assert!(matches!(wrong, Err(DriverError::NotOpen { .. })));
        let cancel = DriverOwner::decide(
            Some(&state),
            &DriverRequest::Cancel {
                dispatch_id: "d1".into(),
                reason: "operator".into(),
            },
            &now,
        )
        .unwrap();
        let after = DriverOwner::evolve(Some(state), &cancel.event.unwrap());
        assert!(after.open.is_none());
        assert_eq!(after.recent[0].outcome, TurnOutcome::Cancelled);
    }
}

/// What `status` shows of the driver (the default: none has run).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct DriverSummary {
    pub running: bool,
    pub pid: Option<u32>,
    pub provider: Option<String>,
    pub since: Option<Timestamp>,
    /// The iteration the open dispatch is working on.
    pub iteration: Option<u64>,
    pub waiting: Option<Waiting>,
    pub dispatches: u64,
    pub last: Option<Settlement>,
    /// How the last run ended; absent while one runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunEnded>,
    /// How the running driver's provider processes run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::containment::Transport>,
    /// Under trusted-local, the limits in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::containment::limits::Limits>,
    /// The running driver's model and thinking pins, by variable.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pins: std::collections::BTreeMap<String, String>,
    /// The running turn's CLI retrying a failed model API call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrying: Option<TurnRetry>,
    /// The last turn's git snapshots: both commits and what changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<snapshot::TurnSnapshot>,
}

/// The driver as `alive` says its registered pid is.
pub fn summary(state: &DriverState, alive: impl Fn(u32) -> bool) -> DriverSummary {
    let running = state.registration.as_ref().is_some_and(|r| alive(r.pid));
    DriverSummary {
        running,
        pid: state
            .registration
            .as_ref()
            .map(|r| r.pid)
            .filter(|_| running),
        provider: state.current_provider.clone().filter(|_| running),
        since: state
            .registration
            .as_ref()
            .map(|r| r.started_at)
            .filter(|_| running),
        iteration: state.open.as_ref().map(|o| o.iteration),
        waiting: state.waiting.clone().filter(|_| running),
        dispatches: state.dispatches,
        last: state.recent.last().cloned(),
        last_run: state.last_run.clone().filter(|_| !running),
        transport: state.registration.as_ref().filter(|_| running).map(|r| {
            r.transport
                .unwrap_or(crate::containment::Transport::Unconfined)
        }),
        limits: state
            .registration
            .as_ref()
            .filter(|_| running)
            .and_then(|r| r.limits),
        pins: state
            .registration
            .as_ref()
            .filter(|_| running)
            .map(|r| r.pins.clone())
            .unwrap_or_default(),
        retrying: state.retrying.clone().filter(|_| running),
        snapshot: state.last_snapshot.clone(),
    }
}

impl DriverSummary {
    /// How the running driver's processes run, as views say it
    /// ([`crate::containment::describe`]); empty when none runs.
    pub fn transport_words(&self) -> String {
        self.transport
            .map(|transport| crate::containment::describe(transport, self.limits.as_ref()))
            .unwrap_or_default()
    }

    /// The running driver's pins, as `; pins A=x, B=y`; empty without.
    pub fn pins_words(&self) -> String {
        if self.pins.is_empty() {
            return String::new();
        }
        let pins: Vec<String> = self.pins.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("; pins {}", pins.join(", "))
    }

    /// One line for `loopx status`.
    pub fn line(&self) -> String {
        match (self.running, &self.waiting) {
            (true, Some(waiting)) => format!(
                "running (pid {}, {}), {} until {}",
                self.pid.unwrap_or(0),
                self.provider.as_deref().unwrap_or("?"),
                waiting.reason,
                waiting.until
            ),
            (true, None) => format!(
                "running (pid {}, {}, since {}){}{}; {}{}",
                self.pid.unwrap_or(0),
                self.provider.as_deref().unwrap_or("?"),
                self.since.map(|s| s.to_string()).unwrap_or_default(),
                self.iteration
                    .map(|i| format!(", on iteration {i}"))
                    .unwrap_or_default(),
                self.retrying
                    .as_ref()
                    .map(|r| format!(", its CLI on {}", r.retry.words()))
                    .unwrap_or_default(),
                self.transport_words(),
                self.pins_words()
            ),
            (false, _) if self.iteration.is_some() => format!(
                "not running; dispatch for iteration {} is open (`loopx recover` shows what to do, `loopx recover --apply` does it)",
                self.iteration.unwrap_or(0)
            ),
            (false, _) => match &self.last_run {
                Some(run) => format!(
                    "not running; its last run ended with exit {} ({}) after {}: {}",
                    run.exit.code(),
                    run.exit.reason(),
                    crate::words::count(run.turns, "turn"),
                    run.reason
                ),
                None => format!("not running ({} dispatches so far)", self.dispatches),
            },
        }
    }
}
