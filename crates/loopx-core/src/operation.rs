//! Operations: the only way state changes.
//!
//! Every mutation is a typed request applied by a pure [`Owner`]: `decide`
//! checks the request against the current state and yields one event and a
//! receipt body, `evolve` folds that event into the state. The store keeps the
//! events as the journal, so a snapshot can always be rebuilt (and checked) by
//! folding the journal from the start.
//!
//! Each request travels with an [`OperationId`]. The store remembers the
//! digest of the request committed under that id: an exact replay returns the
//! original receipt and writes nothing, the same id with a different request
//! is rejected. That is how a lost reply is recovered without guessing.

use crate::digest::Digest;
use jiff::Timestamp;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fmt;

/// A caller-chosen (or generated) stable id for one mutating operation.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OperationId(String);

/// Why a string is not an operation id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid operation id {value:?}: use 1-128 characters of letters, digits, '_', '-', '.' or ':', starting with a letter or digit")]
pub struct InvalidOperationId {
    pub value: String,
}

impl OperationId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(value: &str) -> Result<Self, InvalidOperationId> {
        let valid = !value.is_empty()
            && value.len() <= Self::MAX_LEN
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
        if valid {
            Ok(OperationId(value.to_owned()))
        } else {
            Err(InvalidOperationId {
                value: value.to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OperationId {
    type Error = InvalidOperationId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<OperationId> for String {
    fn from(id: OperationId) -> Self {
        id.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperationId({})", self.0)
    }
}

/// The world as an owner may see it: a clock reading taken by the adapter,
/// so that the owner stays a pure function of its inputs.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub now: Timestamp,
}

/// The result of a successful `decide`: the event to journal and the body of
/// the receipt handed back (and stored for replays). No event means the
/// request is already satisfied: nothing is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided<E, R> {
    pub event: Option<E>,
    pub receipt: R,
}

impl<E, R> Decided<E, R> {
    pub fn write(event: E, receipt: R) -> Self {
        Decided {
            event: Some(event),
            receipt,
        }
    }

    pub fn unchanged(receipt: R) -> Self {
        Decided {
            event: None,
            receipt,
        }
    }
}

/// A pure owner of one piece of durable state.
pub trait Owner {
    /// The snapshot. `None` in `decide`/`evolve` means "not created yet".
    type State: Serialize + DeserializeOwned + Clone;
    /// A typed mutating request.
    type Request: Serialize;
    /// What the journal records about one committed request.
    type Event: Serialize + DeserializeOwned;
    /// What the caller gets back; stored so a replay returns it verbatim.
    type Receipt: Serialize + DeserializeOwned;
    /// Why a request was refused. Nothing is written when this is returned.
    /// It says what kind of refusal it is, so no adapter has to guess.
    type Error: crate::error_class::Classify;
    /// Facts the adapter gathered for the owner (clock, evidence lookups).
    type Context<'a>;

    /// Check `request` against `state` and say what would happen.
    fn decide(
        state: Option<&Self::State>,
        request: &Self::Request,
        context: &Self::Context<'_>,
    ) -> Result<Decided<Self::Event, Self::Receipt>, Self::Error>;

    /// Fold one event into the state. Total: events in the journal were
    /// accepted by `decide`, so evolving them cannot fail.
    fn evolve(state: Option<Self::State>, event: &Self::Event) -> Self::State;

    /// The journal's name for an event's kind (`ledger.iteration_appended`).
    fn event_kind(event: &Self::Event) -> &'static str;

    /// The stream revision the request was based on, if it names one: the
    /// authority refuses it when the store has moved on, instead of
    /// re-deciding against state the caller never saw.
    fn expected_revision(_request: &Self::Request) -> Option<u64> {
        None
    }

    /// What the store keeps beside `state` (the snapshot of `stream`) so
    /// that a family of many streams is queried without reading each
    /// ([`Facet`]); `None` (the default) for a stream that is read alone.
    fn facet(_stream: &str, _state: &Self::State) -> Option<Facet> {
        None
    }
}

/// A few typed columns a store keeps beside a stream's snapshot, written
/// in the same transaction, so that a question about a whole family of
/// streams (a goal's thousands of todos: which is the first runnable,
/// how many are done) is answered from an index instead of by parsing
/// every snapshot. Derived state: the snapshot is the truth, and the
/// owner that writes the snapshot is the only one that says what its
/// facet is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facet {
    /// The family the stream belongs to (a goal lifetime's todos).
    pub family: String,
    /// Its place in the family's order.
    pub position: u64,
    /// A code the owner gives its states (a todo's status); the store
    /// counts each family's streams by it and never interprets it.
    pub class: u8,
    /// Until when the stream is *pending* (a lease's expiry, a deferral's
    /// end): a query at `now` treats it as pending while `now < due`.
    pub due: Option<Timestamp>,
    /// Who holds it while it is pending (a lease's holder).
    pub holder: Option<String>,
}

/// The digest under which a request is remembered for replay checks.
pub fn request_digest<R: Serialize>(request: &R) -> Digest {
    Digest::of_json(request)
}

/// What a previously committed operation id means for a new request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Same id, same request: hand back the stored receipt, write nothing.
    Exact,
    /// Same id, different request: refuse.
    Conflict,
}

impl Replay {
    pub fn classify(stored: &Digest, incoming: &Digest) -> Self {
        Self::classify_str(stored.as_str(), incoming.as_str())
    }

    /// As [`Replay::classify`], for digests read back as text.
    pub fn classify_str(stored: &str, incoming: &str) -> Self {
        if stored == incoming {
            Replay::Exact
        } else {
            Replay::Conflict
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_id_charset_is_enforced() {
        assert!(OperationId::parse("op-1.2:retry_3").is_ok());
        for bad in ["", "-lead", "has space", "slash/x", &"x".repeat(129)] {
            assert!(OperationId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn replay_classification_compares_digests() {
        let a = request_digest(&serde_json::json!({"x": 1}));
        let b = request_digest(&serde_json::json!({"x": 2}));
        assert_eq!(Replay::classify(&a, &a.clone()), Replay::Exact);
        assert_eq!(Replay::classify(&a, &b), Replay::Conflict);
    }
}
