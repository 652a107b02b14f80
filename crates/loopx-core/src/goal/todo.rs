//! The todo frontier: executable work, claims and leases.
//!
//! One active lease per todo. A lease past its expiry can be taken over by
//! anyone; until then only its holder renews, releases or finishes the work.
//! A finished todo is final: no later writer, stale or not, reopens it.

use super::{Actor, GoalError};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Open,
    Claimed,
    Blocked,
    Deferred,
    Done,
}

impl TodoStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Open => "open",
            TodoStatus::Claimed => "claimed",
            TodoStatus::Blocked => "blocked",
            TodoStatus::Deferred => "deferred",
            TodoStatus::Done => "done",
        }
    }

    /// Linked work that is active or waiting (anything but done).
    pub fn is_open_work(self) -> bool {
        self != TodoStatus::Done
    }

    /// Every status, in the order of [`TodoStatus::code`].
    pub const ALL: [TodoStatus; 5] = [
        TodoStatus::Open,
        TodoStatus::Claimed,
        TodoStatus::Blocked,
        TodoStatus::Deferred,
        TodoStatus::Done,
    ];

    /// The status as the store's frontier index counts it
    /// ([`crate::operation::Facet::class`]).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status a [`TodoStatus::code`] stands for.
    pub fn from_code(code: u8) -> Option<TodoStatus> {
        TodoStatus::ALL.get(usize::from(code)).copied()
    }

    /// What a todo of this status is, given whether what it waits on (its
    /// lease's expiry, its deferral's end: [`Todo::due`]) is still ahead,
    /// `pending_until`. The one rule of availability: a todo's own, and a
    /// frontier counted from the store's index.
    pub fn availability(self, pending_until: Option<Timestamp>) -> Availability {
        match (self, pending_until) {
            (TodoStatus::Done, _) => Availability::Done,
            (TodoStatus::Blocked, _) => Availability::Blocked,
            (TodoStatus::Claimed, Some(until)) => Availability::Held(until),
            (TodoStatus::Deferred, Some(until)) => Availability::Waiting(until),
            (TodoStatus::Open | TodoStatus::Claimed | TodoStatus::Deferred, _) => {
                Availability::Runnable
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: String,
    pub acquired_at: Timestamp,
    pub expires_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceNote {
    pub at: Timestamp,
    pub by: String,
    pub note: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_refs: Vec<String>,
}

impl EvidenceNote {
    /// The note `by` writes at `now`, its text and every reference passed
    /// through the one redaction rule ([`crate::redact`]): the goal's
    /// history is append-only, and an agent's note (`todo note`, MCP
    /// `append_evidence`) is free text. Honest text is kept exactly.
    pub fn new(at: Timestamp, by: &str, note: &str, evidence_refs: &[String]) -> EvidenceNote {
        use crate::redact::redact_owned;
        EvidenceNote {
            at,
            by: by.to_owned(),
            note: redact_owned(note.trim()),
            evidence_refs: evidence_refs.iter().map(|r| redact_owned(r)).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub id: String,
    pub title: String,
    pub status: TodoStatus,
    pub lease: Option<Lease>,
    pub created_at: Timestamp,
    pub created_by: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub blocked_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceNote>,
    /// Where it stands in priority order, for a todo kept in its own
    /// stream from the start (the goal's snapshot does not list it; see
    /// [`super::frontier`]); `None` for a todo the goal snapshot lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
}

/// What a todo is, as of `now`: an expired lease no longer holds anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Anyone may claim it now.
    Runnable,
    /// Held under a live lease until the given time.
    Held(Timestamp),
    /// Deferred until the given time.
    Waiting(Timestamp),
    Blocked,
    Done,
}

impl Todo {
    pub fn availability(&self, now: Timestamp) -> Availability {
        self.status
            .availability(self.due().filter(|due| now < *due))
    }

    /// What the todo waits on, whether or not it has passed: a claim's
    /// lease expiry, a deferral's end; `None` for any other status.
    pub fn due(&self) -> Option<Timestamp> {
        match self.status {
            TodoStatus::Claimed => self.lease.as_ref().map(|lease| lease.expires_at),
            TodoStatus::Deferred => self.deferred_until,
            _ => None,
        }
    }

    /// Who holds the claim, live or lapsed (`None` unless claimed).
    pub fn claimant(&self) -> Option<&str> {
        match (&self.status, &self.lease) {
            (TodoStatus::Claimed, Some(lease)) => Some(&lease.holder),
            _ => None,
        }
    }

    /// The live holder, if any.
    pub fn holder(&self, now: Timestamp) -> Option<&str> {
        match self.availability(now) {
            Availability::Held(_) => self.claimant(),
            _ => None,
        }
    }
}

/// A change to one todo, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transition", rename_all = "snake_case")]
pub enum TodoTransition {
    /// The todo was added: the first event of a stream that holds a todo
    /// from the start carries it (`TodoEvent::from`) and changes nothing.
    Added,
    Claim {
        lease: Lease,
    },
    Renew {
        expires_at: Timestamp,
    },
    Release,
    Complete,
    Block {
        reason: String,
    },
    Defer {
        until: Timestamp,
    },
}

/// What a caller asked to do with a todo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum TodoAction {
    Claim { ttl_seconds: u64 },
    Renew { ttl_seconds: u64 },
    Release,
    Complete,
    Block { reason: String },
    Defer { seconds: u64 },
}

pub const MAX_LEASE_SECONDS: u64 = 7 * 24 * 3600;

fn after(now: Timestamp, seconds: u64) -> Result<Timestamp, GoalError> {
    let seconds =
        i64::try_from(seconds).map_err(|_| GoalError::Invalid("duration is too long".into()))?;
    now.checked_add(SignedDuration::from_secs(seconds))
        .map_err(|_| GoalError::Invalid("duration is too long".into()))
}

/// Check `action` by `actor` on `todo` at `now`; say what it changes.
pub fn decide(
    todo: &Todo,
    action: &TodoAction,
    actor: &Actor,
    now: Timestamp,
) -> Result<TodoTransition, GoalError> {
    let who = actor.name();
    if todo.status == TodoStatus::Done {
        return Err(GoalError::TodoDone {
            id: todo.id.clone(),
        });
    }
    let holder = todo.holder(now);
    let held_by_other = holder.is_some_and(|h| h != who);
    let ttl_ok = |ttl: u64| {
        if ttl == 0 || ttl > MAX_LEASE_SECONDS {
            Err(GoalError::Invalid(format!(
                "--ttl must be between 1 and {MAX_LEASE_SECONDS} seconds"
            )))
        } else {
            Ok(ttl)
        }
    };
    match action {
        TodoAction::Claim { ttl_seconds } => {
            let ttl = ttl_ok(*ttl_seconds)?;
            if let Some(holder) = holder {
                return Err(GoalError::LeaseHeld {
                    id: todo.id.clone(),
                    holder: holder.to_owned(),
                    until: todo.lease.as_ref().map(|l| l.expires_at).unwrap_or(now),
                });
            }
            if todo.status == TodoStatus::Blocked {
                return Err(GoalError::TodoBlocked {
                    id: todo.id.clone(),
                    reason: todo.blocked_reason.clone(),
                });
            }
            Ok(TodoTransition::Claim {
                lease: Lease {
                    holder: who.to_owned(),
                    acquired_at: now,
                    expires_at: after(now, ttl)?,
                },
            })
        }
        TodoAction::Renew { ttl_seconds } => {
            let ttl = ttl_ok(*ttl_seconds)?;
            match &todo.lease {
                // The holder may renew even a lapsed lease nobody took over.
                Some(lease) if todo.status == TodoStatus::Claimed && lease.holder == who => {
                    Ok(TodoTransition::Renew {
                        expires_at: after(now, ttl)?,
                    })
                }
                _ => Err(GoalError::NotHolder {
                    id: todo.id.clone(),
                    actor: who.to_owned(),
                    holder: holder.map(str::to_owned),
                }),
            }
        }
        TodoAction::Release => match &todo.lease {
            Some(lease) if todo.status == TodoStatus::Claimed && lease.holder == who => {
                Ok(TodoTransition::Release)
            }
            _ => Err(GoalError::NotHolder {
                id: todo.id.clone(),
                actor: who.to_owned(),
                holder: holder.map(str::to_owned),
            }),
        },
        TodoAction::Complete | TodoAction::Block { .. } | TodoAction::Defer { .. }
            if held_by_other =>
        {
            Err(GoalError::NotHolder {
                id: todo.id.clone(),
                actor: who.to_owned(),
                holder: holder.map(str::to_owned),
            })
        }
        TodoAction::Complete => Ok(TodoTransition::Complete),
        TodoAction::Block { reason } => {
            if reason.trim().is_empty() {
                return Err(GoalError::Invalid(
                    "blocking a todo needs a --reason".into(),
                ));
            }
            Ok(TodoTransition::Block {
                reason: crate::redact::redact_owned(reason.trim()),
            })
        }
        TodoAction::Defer { seconds } => {
            if *seconds == 0 {
                return Err(GoalError::Invalid(
                    "--for must be a positive duration".into(),
                ));
            }
            Ok(TodoTransition::Defer {
                until: after(now, *seconds)?,
            })
        }
    }
}

/// Apply a decided transition.
pub fn evolve(todo: &mut Todo, transition: &TodoTransition, at: Timestamp) {
    match transition {
        TodoTransition::Added => {}
        TodoTransition::Claim { lease } => {
            todo.status = TodoStatus::Claimed;
            todo.lease = Some(lease.clone());
            todo.deferred_until = None;
        }
        TodoTransition::Renew { expires_at } => {
            if let Some(lease) = &mut todo.lease {
                lease.expires_at = *expires_at;
            }
        }
        TodoTransition::Release => {
            todo.status = TodoStatus::Open;
            todo.lease = None;
        }
        TodoTransition::Complete => {
            todo.status = TodoStatus::Done;
            todo.lease = None;
            todo.completed_at = Some(at);
        }
        TodoTransition::Block { reason } => {
            todo.status = TodoStatus::Blocked;
            todo.lease = None;
            todo.blocked_reason = reason.clone();
        }
        TodoTransition::Defer { until } => {
            todo.status = TodoStatus::Deferred;
            todo.lease = None;
            todo.deferred_until = Some(*until);
        }
    }
}

impl TodoAction {
    /// Whether this action starts new work (and so needs the actor to have
    /// adopted the current objective).
    pub fn acquires(&self) -> bool {
        matches!(self, TodoAction::Claim { .. })
    }
}
