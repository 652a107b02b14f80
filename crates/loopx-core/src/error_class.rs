//! The one classification of what went wrong, which every error of the
//! owners and of the store gives itself ([`Classify`]) and every adapter
//! maps once: to an exit code (CLI), an HTTP status (serve), a tool error
//! (MCP).
//!
//! An owner's error must classify itself to be an owner's error at all
//! (`crate::operation::Owner::Error: Classify`), so a new one can never
//! pass unclassified as an internal error; the owners' errors are listed
//! in [`crate::refusals`]. What each class means for the caller is said
//! on its variant.

use serde::Serialize;
use serde_json::Value;

/// What kind of failure this is, from the caller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The request was understood and refused by a rule; nothing was
    /// written. Retrying the same request is refused again.
    Refused,
    /// The operation id was already used for a different request.
    Conflict,
    /// The request was prepared against a revision that is no longer
    /// current: read again, then retry.
    Stale,
    /// The loop, goal, iteration or file asked for does not exist.
    NotFound,
    /// The store could not be reached or is busy; retrying later may work
    /// and loses nothing.
    Unavailable,
    /// A bug or a damaged store: a person should look.
    Internal,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Refused => "refused",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Stale => "stale",
            ErrorClass::NotFound => "not_found",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Internal => "internal",
        }
    }
}

/// An error that says what kind of failure it is, and the facts a caller
/// may act on (which rule refused, the revision to re-read).
pub trait Classify {
    fn class(&self) -> ErrorClass;

    /// Machine-readable facts about the failure (merged into `--json` and
    /// HTTP error bodies).
    fn details(&self) -> Option<Value> {
        None
    }
}
