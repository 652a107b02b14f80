//! Running one operation against a store, end to end.

use crate::{Commit, Store, StoreError, Stream};
use jiff::Timestamp;
use loopx_core::digest::canonical_json;
use loopx_core::operation::{request_digest, Decided, OperationId, Owner, Replay};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// How many times a writer re-reads and re-decides after losing a race
/// before it gives up and reports contention.
const MAX_ATTEMPTS: u32 = 32;

/// What a committed operation returned, as stored for replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt<R> {
    pub operation_id: OperationId,
    pub revision: u64,
    pub kind: String,
    pub committed_at: Timestamp,
    /// True when this call committed nothing and returned the receipt of an
    /// earlier identical request. Not part of the stored receipt.
    #[serde(skip_deserializing, default)]
    pub replayed: bool,
    /// True when the request was already satisfied and nothing was written.
    #[serde(default)]
    pub unchanged: bool,
    pub body: R,
}

/// A stream's state as read, with the revision a commit must build on.
#[derive(Debug, Clone)]
pub struct Loaded<S> {
    /// 0 when the stream does not exist yet.
    pub revision: u64,
    pub state: Option<S>,
}

/// What [`Authority::preview`] says an operation would do.
pub type Preview<O> = Decided<<O as Owner>::Event, <O as Owner>::Receipt>;

/// The outcome of [`Authority::execute`].
pub type Executed<R> = Receipt<R>;

#[derive(Debug, thiserror::Error)]
pub enum AuthorityError<E> {
    /// The owner refused the request; nothing was written.
    #[error(transparent)]
    Rejected(E),
    #[error("operation id {operation_id} was already used for a different request (committed at revision {revision}); choose a new --operation-id, or repeat the original request exactly to get its receipt")]
    Conflict {
        operation_id: OperationId,
        revision: u64,
    },
    #[error("stale base revision: the request was prepared against revision {expected} of {stream}, which is now at {actual}; read it again (e.g. `loopx goal-acceptance inspect`) and retry with the new revision")]
    StaleBase {
        stream: String,
        expected: u64,
        actual: u64,
    },
    #[error("gave up after {attempts} attempts: other writers kept committing to {stream}; retry with the same --operation-id")]
    Contended { stream: String, attempts: u32 },
    #[error("stored {what} of {stream} at revision {revision} does not parse ({reason}); run `loopx validate` and inspect the database")]
    Unreadable {
        stream: String,
        revision: u64,
        what: &'static str,
        reason: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The one place operations are applied: replay check, pure decide, CAS.
pub struct Authority<'s, S: Store + ?Sized> {
    store: &'s S,
}

impl<'s, S: Store + ?Sized> Authority<'s, S> {
    pub fn new(store: &'s S) -> Self {
        Authority { store }
    }

    pub fn store(&self) -> &'s S {
        self.store
    }

    /// The current state of `stream` and its revision.
    pub fn load<O: Owner>(
        &self,
        stream: &Stream,
    ) -> Result<Loaded<O::State>, AuthorityError<O::Error>> {
        match self.store.load(stream)? {
            None => Ok(Loaded {
                revision: 0,
                state: None,
            }),
            Some(snapshot) => Ok(Loaded {
                revision: snapshot.revision,
                state: Some(parse(
                    stream,
                    snapshot.revision,
                    "snapshot",
                    &snapshot.state,
                )?),
            }),
        }
    }

    /// What `request` would do now, without committing (`--dry-run`).
    pub fn preview<O: Owner>(
        &self,
        stream: &Stream,
        request: &O::Request,
        context: &O::Context<'_>,
    ) -> Result<Preview<O>, AuthorityError<O::Error>> {
        decide_at::<O>(stream, &self.load::<O>(stream)?, request, context)
    }

    /// Apply `request` under `operation_id`, or return the receipt it
    /// already has.
    pub fn execute<O: Owner>(
        &self,
        stream: &Stream,
        operation_id: &OperationId,
        request: &O::Request,
        context: &O::Context<'_>,
        now: Timestamp,
    ) -> Result<Executed<O::Receipt>, AuthorityError<O::Error>> {
        let digest = request_digest(request);
        for _ in 0..MAX_ATTEMPTS {
            if let Some(stored) = self.store.receipt(stream, operation_id.as_str())? {
                return match Replay::classify_str(&stored.request_digest, digest.as_str()) {
                    Replay::Exact => {
                        let mut receipt: Receipt<O::Receipt> =
                            parse(stream, stored.revision, "receipt", &stored.receipt)?;
                        receipt.replayed = true;
                        Ok(receipt)
                    }
                    Replay::Conflict => Err(AuthorityError::Conflict {
                        operation_id: operation_id.clone(),
                        revision: stored.revision,
                    }),
                };
            }
            let Loaded { revision, state } = self.load::<O>(stream)?;
            check_base::<O>(stream, request, revision)?;
            let decided =
                O::decide(state.as_ref(), request, context).map_err(AuthorityError::Rejected)?;
            let Some(event) = decided.event else {
                // Already satisfied: nothing to write, and nothing stored,
                // so a repeat decides (and finds it satisfied) again.
                return Ok(Receipt {
                    operation_id: operation_id.clone(),
                    revision,
                    kind: "unchanged".to_owned(),
                    committed_at: now,
                    replayed: false,
                    unchanged: true,
                    body: decided.receipt,
                });
            };
            let kind = O::event_kind(&event);
            let next = O::evolve(state, &event);
            let receipt = Receipt {
                operation_id: operation_id.clone(),
                revision: revision + 1,
                kind: kind.to_owned(),
                committed_at: now,
                replayed: false,
                unchanged: false,
                body: decided.receipt,
            };
            let committed = self.store.commit(&Commit {
                stream,
                expected_revision: revision,
                operation_id: operation_id.as_str(),
                request_digest: digest.as_str(),
                kind,
                event: &canonical_json(&event),
                receipt: &canonical_json(&receipt),
                // The snapshot is stored state, never digested: plain JSON
                // (readers compare parsed values, not bytes).
                state: &serde_json::to_string(&next).expect("states serialize"),
                committed_at: &now.to_string(),
            });
            match committed {
                Ok(_) => return Ok(receipt),
                // Someone else committed first (possibly this very operation
                // id, from a retrying twin): re-read and decide again.
                Err(StoreError::StaleRevision { .. } | StoreError::DuplicateOperation { .. }) => {
                    continue
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(AuthorityError::Contended {
            stream: stream.to_owned(),
            attempts: MAX_ATTEMPTS,
        })
    }
}

/// What `request` would do to `loaded`, refusing a stale base as a commit
/// would; writes nothing.
pub fn decide_at<O: Owner>(
    stream: &Stream,
    loaded: &Loaded<O::State>,
    request: &O::Request,
    context: &O::Context<'_>,
) -> Result<Preview<O>, AuthorityError<O::Error>> {
    check_base::<O>(stream, request, loaded.revision)?;
    O::decide(loaded.state.as_ref(), request, context).map_err(AuthorityError::Rejected)
}

fn check_base<O: Owner>(
    stream: &Stream,
    request: &O::Request,
    actual: u64,
) -> Result<(), AuthorityError<O::Error>> {
    match O::expected_revision(request) {
        Some(expected) if expected != actual => Err(AuthorityError::StaleBase {
            stream: stream.to_owned(),
            expected,
            actual,
        }),
        _ => Ok(()),
    }
}

fn parse<T: DeserializeOwned, E>(
    stream: &Stream,
    revision: u64,
    what: &'static str,
    text: &str,
) -> Result<T, AuthorityError<E>> {
    serde_json::from_str(text).map_err(|error| AuthorityError::Unreadable {
        stream: stream.to_owned(),
        revision,
        what,
        reason: error.to_string(),
    })
}
