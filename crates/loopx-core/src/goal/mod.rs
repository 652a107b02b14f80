//! The goal authority: the original objective and its root commitments,
//! registered agents, the operating objective and its adoptions, supporting
//! outcomes with cumulative requirements, the todo frontier with leases, and
//! the gaps planning must see.
//!
//! One snapshot per goal (stream `goal:<id>`), changed only through
//! [`GoalOwner`], plus one stream per todo that holds the todo's live state
//! (status, lease, evidence) once it has changed, written by
//! [`frontier::TodoOwner`] through the same rules; reads compose the two
//! ([`frontier::overlay`]). Each goal event is a list of resolved facts
//! ([`Change`]), so the fold is trivial and cannot disagree with what
//! `decide` checked.
//!
//! Files by job: `actor` (who asks), `state` (the snapshot), `request`
//! (commands and receipts), `error` (refusals), `owner` (decide), [`event`]
//! (the fold); their types are re-exported here. Then one module per rule area
//! (objective, outcome, checks, todo, gap), where a todo's live state is kept
//! ([`frontier`]: a stream per todo), the readbacks (inspect, continuation,
//! task_body) and the field checks (input).

mod actor;
pub mod checks;
pub mod continuation;
mod error;
pub mod event;
pub mod frontier;
pub mod gap;
pub mod input;
pub mod inspect;
pub mod objective;
pub mod outcome;
mod owner;
mod request;
mod state;
pub mod task_body;
pub mod todo;

pub use actor::Actor;
pub use error::GoalError;
pub use event::{Change, GoalEvent};
use owner::receipt;
pub use owner::GoalOwner;
pub use request::{GoalCommand, GoalContext, GoalReceipt, GoalRequest, NewTodo};
pub use state::{AgentRecord, Goal, RetiredLifetime, RootCommitments};

/// The goal every loop has unless told otherwise.
pub const DEFAULT_GOAL_ID: &str = "main";

/// How many recent goal-level notes the snapshot keeps (the journal keeps all).
pub const RECENT_NOTES: usize = 20;

pub fn stream(goal_id: &str) -> String {
    format!("goal:{goal_id}")
}

#[cfg(test)]
mod tests;
