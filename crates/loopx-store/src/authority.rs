//! Running one operation against a store, end to end.

use crate::{Commit, Fence, Store, StoreError, Stream};
use jiff::Timestamp;
use loopx_core::digest::canonical_json;
use loopx_core::error_class::{Classify, ErrorClass};
use loopx_core::operation::{request_digest, Decided, OperationId, Owner, Replay};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::time::Duration;

/// How many times a writer re-reads and re-decides after losing a race
/// before it gives up and reports contention.
const MAX_ATTEMPTS: u32 = 32;

/// The pause between a lost race and the next attempt: exponential in the
/// number of losses, capped, with full jitter, so writers that collided
/// once do not collide again in lock step. Without it a few writers on a
/// busy server can keep invalidating each other until one gives up.
struct Backoff {
    losses: u32,
    seed: RandomState,
}

impl Backoff {
    const FIRST: Duration = Duration::from_micros(200);
    const CAP: Duration = Duration::from_millis(25);

    fn new() -> Self {
        Self {
            losses: 0,
            seed: RandomState::new(),
        }
    }

    /// The longest pause after `losses` lost races.
    fn window(losses: u32) -> Duration {
        loopx_core::backoff::doubling(Self::FIRST, losses, Self::CAP)
    }

    /// Record a lost race and say how long to wait: a uniformly random
    /// share of the window.
    fn next_pause(&mut self) -> Duration {
        self.losses += 1;
        let window = u64::try_from(Self::window(self.losses).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.seed.hash_one(self.losses) % window.max(1))
    }

    fn lost(&mut self) {
        std::thread::sleep(self.next_pause());
    }
}

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

/// The state one call committed, at the revision it was committed as.
#[derive(Debug, Clone)]
pub struct Committed<S> {
    pub revision: u64,
    pub state: S,
}

/// What [`Authority::execute_committed`] returns: the receipt, and the
/// state committed when this call committed one.
pub type ExecutedWithState<O> = (
    Executed<<O as Owner>::Receipt>,
    Option<Committed<<O as Owner>::State>>,
);

/// What [`Authority::preview`] says an operation would do.
pub type Preview<O> = Decided<<O as Owner>::Event, <O as Owner>::Receipt>;

/// The outcome of [`Authority::execute`].
pub type Executed<R> = Receipt<R>;

/// The outcome of [`Authority::execute_pair`]: both receipts, or why
/// neither half was written.
pub type PairResult<A, B> = Result<
    (
        Executed<<A as Owner>::Receipt>,
        Executed<<B as Owner>::Receipt>,
    ),
    AuthorityError<Either<<A as Owner>::Error, <B as Owner>::Error>>,
>;

/// The outcome of [`Authority::execute_group`]: every receipt, or why no
/// part was written.
pub type GroupResult<A, B> = Result<
    (
        Executed<<A as Owner>::Receipt>,
        Vec<Executed<<B as Owner>::Receipt>>,
    ),
    AuthorityError<Either<<A as Owner>::Error, <B as Owner>::Error>>,
>;

/// Why an operation was not applied. Not a `std::error::Error` on purpose:
/// it becomes an `anyhow::Error` only as a [`Classified`] (see the `From`
/// below), so its class goes wherever it goes and no caller has to guess
/// it from the owner's type.
#[derive(Debug)]
pub enum AuthorityError<E> {
    /// The owner refused the request; nothing was written.
    Rejected(E),
    Conflict {
        operation_id: OperationId,
        revision: u64,
    },
    StaleBase {
        stream: String,
        expected: u64,
        actual: u64,
    },
    Contended {
        stream: String,
        attempts: u32,
    },
    Unreadable {
        stream: String,
        revision: u64,
        what: &'static str,
        reason: String,
    },
    PartiallyCommitted {
        committed: OperationId,
        committed_stream: String,
        missing: OperationId,
        missing_stream: String,
    },
    Store(StoreError),
}

impl<E: fmt::Display> fmt::Display for AuthorityError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthorityError::Rejected(refusal) => refusal.fmt(f),
            AuthorityError::Conflict {
                operation_id,
                revision,
            } => write!(f, "operation id {operation_id} was already used for a different request (committed at revision {revision}); choose a new operation_id, or repeat the original request exactly to get its receipt"),
            AuthorityError::StaleBase {
                stream,
                expected,
                actual,
            } => write!(f, "stale base revision: the request was prepared against revision {expected} of {stream}, which is now at {actual}; read it again (e.g. `loopx goal-acceptance inspect`) and retry with the new revision"),
            AuthorityError::Contended { stream, attempts } => write!(f, "gave up after {attempts} attempts: other writers kept committing to {stream}; retry with the same operation_id"),
            AuthorityError::Unreadable {
                stream,
                revision,
                what,
                reason,
            } => write!(f, "stored {what} of {stream} at revision {revision} does not parse ({reason}); run `loopx validate` and inspect the database"),
            AuthorityError::PartiallyCommitted {
                committed,
                committed_stream,
                missing,
                missing_stream,
            } => write!(f, "operation {committed} is already committed on {committed_stream}, but its pair {missing} on {missing_stream} is not: the two were once written apart; inspect both streams, then send the missing half alone or use new operation ids for both"),
            AuthorityError::Store(store) => store.fmt(f),
        }
    }
}

impl<E> From<StoreError> for AuthorityError<E> {
    fn from(error: StoreError) -> Self {
        AuthorityError::Store(error)
    }
}

impl<E: Classify> Classify for AuthorityError<E> {
    fn class(&self) -> ErrorClass {
        match self {
            AuthorityError::Rejected(refusal) => refusal.class(),
            AuthorityError::Conflict { .. } | AuthorityError::PartiallyCommitted { .. } => {
                ErrorClass::Conflict
            }
            AuthorityError::StaleBase { .. } => ErrorClass::Stale,
            AuthorityError::Contended { .. } => ErrorClass::Unavailable,
            AuthorityError::Unreadable { .. } => ErrorClass::Internal,
            AuthorityError::Store(store) => store.class(),
        }
    }

    fn details(&self) -> Option<serde_json::Value> {
        match self {
            AuthorityError::Rejected(refusal) => refusal.details(),
            AuthorityError::Conflict { .. } => {
                Some(serde_json::json!({"reason": "operation_conflict"}))
            }
            AuthorityError::StaleBase { actual, .. } => {
                Some(serde_json::json!({"reason": "stale", "current_revision": actual}))
            }
            AuthorityError::PartiallyCommitted { .. } => {
                Some(serde_json::json!({"reason": "partially_committed"}))
            }
            _ => None,
        }
    }
}

impl<A: Classify, B: Classify> Classify for Either<A, B> {
    fn class(&self) -> ErrorClass {
        match self {
            Either::First(a) => a.class(),
            Either::Second(b) => b.class(),
        }
    }

    fn details(&self) -> Option<serde_json::Value> {
        match self {
            Either::First(a) => a.details(),
            Either::Second(b) => b.details(),
        }
    }
}

/// An [`AuthorityError`] on its way through `anyhow`: its text, its class
/// and details as it gave them, the store error under it (for a caller
/// that waits out an unreachable store), and the typed error itself for a
/// caller that knows which owner it asked ([`Classified::original`]).
#[derive(Debug)]
pub struct Classified {
    message: String,
    class: ErrorClass,
    details: Option<serde_json::Value>,
    store: Option<StoreError>,
    original: Box<dyn std::any::Any + Send + Sync>,
}

impl Classified {
    /// Any classified error, carried the same way (an owner's refusal that
    /// did not go through the authority).
    pub fn new<E>(error: E) -> Classified
    where
        E: Classify + fmt::Display + fmt::Debug + Send + Sync + 'static,
    {
        Classified {
            message: error.to_string(),
            class: error.class(),
            details: error.details(),
            store: None,
            original: Box::new(error),
        }
    }

    pub fn class(&self) -> ErrorClass {
        self.class
    }

    pub fn details(&self) -> Option<&serde_json::Value> {
        self.details.as_ref()
    }

    /// The error as the authority returned it, if it was a `T`.
    pub fn original<T: 'static>(&self) -> Option<&T> {
        self.original.downcast_ref()
    }
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.store.as_ref().map(|store| store as _)
    }
}

/// The only way an [`AuthorityError`] becomes an `anyhow::Error`: with its
/// class, so the owner's type never has to be guessed again.
impl<E> From<AuthorityError<E>> for anyhow::Error
where
    E: Classify + fmt::Display + fmt::Debug + Send + Sync + 'static,
{
    fn from(error: AuthorityError<E>) -> anyhow::Error {
        anyhow::Error::new(match error {
            // A store failure goes under it as its source, where a caller
            // that waits out an unreachable store looks for it.
            AuthorityError::Store(store) => Classified {
                message: store.to_string(),
                class: store.class(),
                details: None,
                store: Some(store),
                original: Box::new(()),
            },
            other => Classified::new(other),
        })
    }
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
        load_in::<O>(self, stream)
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
        let step = Step::<O> {
            stream,
            operation_id,
            request,
            context,
        };
        self.execute_committed(&step, now)
            .map(|(receipt, _)| receipt)
    }

    /// [`execute`](Self::execute), also handing back the state this call
    /// committed and its revision: what a caller derives views from
    /// without reading the stream back. `None` when this call committed
    /// nothing (a replay, or a request the owner found satisfied).
    pub fn execute_committed<O: Owner>(
        &self,
        step: &Step<'_, '_, O>,
        now: Timestamp,
    ) -> Result<ExecutedWithState<O>, AuthorityError<O::Error>> {
        let digest = request_digest(step.request);
        let mut backoff = Backoff::new();
        for _ in 0..MAX_ATTEMPTS {
            if let Some(receipt) = self.replayed(step, digest.as_str())? {
                return Ok((receipt, None));
            }
            let prepared = self.prepare(step, now)?;
            let Some(commit) = prepared.commit(step, digest.as_str()) else {
                return Ok((prepared.receipt, None));
            };
            match self.store.commit(&commit) {
                Ok(revision) => {
                    let committed = prepared.next.map(|state| Committed { revision, state });
                    return Ok((prepared.receipt, committed));
                }
                // Someone else committed first (possibly this very operation
                // id, from a retrying twin): re-read and decide again.
                Err(StoreError::StaleRevision { .. } | StoreError::DuplicateOperation { .. }) => {
                    backoff.lost()
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(AuthorityError::Contended {
            stream: step.stream.to_owned(),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Apply two owners' operations on two streams as one: both commit in
    /// one store transaction ([`Store::commit_all`]), each with its own
    /// revision check and journal entry, or neither does. For a user action
    /// that writes two streams (the driver's charge and its settlement).
    ///
    /// Replays keep their meaning per half: repeating the exact pair writes
    /// nothing and returns both stored receipts; a pair of which only one
    /// half was ever committed (each was sent alone before) is refused with
    /// [`AuthorityError::PartiallyCommitted`], naming both, rather than
    /// silently completing or duplicating it. A half whose owner finds it
    /// already satisfied writes nothing, as in [`execute`](Self::execute).
    pub fn execute_pair<A: Owner, B: Owner>(
        &self,
        first: &Step<'_, '_, A>,
        second: &Step<'_, '_, B>,
        now: Timestamp,
    ) -> PairResult<A, B> {
        self.execute_pair_fenced(first, second, &[], now)
    }

    /// [`execute_pair`](Self::execute_pair), landing only while every
    /// stream in `fences` is still at the revision the caller judged
    /// against (see [`execute_group_fenced`](Self::execute_group_fenced)).
    pub fn execute_pair_fenced<A: Owner, B: Owner>(
        &self,
        first: &Step<'_, '_, A>,
        second: &Step<'_, '_, B>,
        fences: &[Fence<'_>],
        now: Timestamp,
    ) -> PairResult<A, B> {
        let (a, mut b) =
            self.execute_group_fenced(first, std::slice::from_ref(second), fences, now)?;
        Ok((a, b.pop().expect("one receipt per step")))
    }

    /// [`execute_pair`](Self::execute_pair) for one operation of owner `A`
    /// and any number of owner `B`'s, each on its own stream, all in one
    /// store transaction: a goal's writeback note and the todos it
    /// finishes, each kept in its own stream. Same replay rules: the exact
    /// group again writes nothing; a group of which some parts were once
    /// committed and others would write now is refused, naming one of each.
    pub fn execute_group<A: Owner, B: Owner>(
        &self,
        first: &Step<'_, '_, A>,
        rest: &[Step<'_, '_, B>],
        now: Timestamp,
    ) -> GroupResult<A, B> {
        self.execute_group_fenced(first, rest, &[], now)
    }

    /// [`execute_group`](Self::execute_group) for a group whose steps were
    /// judged against streams it does not write (their contexts carry
    /// what the caller read): it lands only while each stream in `fences`
    /// is still at the fence's revision, checked in the commit's own
    /// transaction ([`Store::commit_fenced`]). A moved fence is
    /// [`StoreError::FenceMoved`], returned at once and never retried
    /// here: a retry would decide again with the same stale context, and
    /// only the caller can read the moved stream and judge again. A lost
    /// race on a written stream is retried as always, with the same
    /// fences, so the retry is still held to what was judged.
    pub fn execute_group_fenced<A: Owner, B: Owner>(
        &self,
        first: &Step<'_, '_, A>,
        rest: &[Step<'_, '_, B>],
        fences: &[Fence<'_>],
        now: Timestamp,
    ) -> GroupResult<A, B> {
        let mut head = Member::new(first);
        let mut tail: Vec<Member<'_, '_, '_, B>> = rest.iter().map(Member::new).collect();
        let outcome = {
            let mut parts: Vec<&mut dyn Part> = Vec::with_capacity(rest.len() + 1);
            parts.push(&mut head);
            parts.extend(tail.iter_mut().map(|m| m as &mut dyn Part));
            self.commit_group(&mut parts, fences, now)
        };
        match outcome {
            Ok(()) => Ok((
                head.into_receipt(),
                tail.into_iter().map(Member::into_receipt).collect(),
            )),
            Err(error) => Err(error.map(|part| match part {
                0 => Either::First(
                    head.refusal
                        .take()
                        .expect("the refusing part keeps its refusal"),
                ),
                n => Either::Second(
                    tail[n - 1]
                        .refusal
                        .take()
                        .expect("the refusing part keeps its refusal"),
                ),
            })),
        }
    }

    /// Apply the operations of any owners, each on its own stream, as one:
    /// all commit in one store transaction ([`Store::commit_fenced`]),
    /// each with its own compare-and-swap on its stream's revision and its
    /// own journal entry, or none does; for a user action that writes
    /// several kinds of state (banking a reviewed candidate: the ledger
    /// row, the candidate's archive and the goal contract it changes).
    /// Each part is a [`Member`] that keeps its receipt
    /// ([`Member::into_receipt`]) once this returns `Ok`. The same rules
    /// as [`execute_group_fenced`](Self::execute_group_fenced): the exact
    /// group again writes nothing and every member answers with its stored
    /// receipt; a group of which some parts were committed before and
    /// others would write now is refused; an owner's refusal comes back
    /// as that owner gave it, classified, and nothing is written.
    pub fn execute_all(
        &self,
        parts: &mut [&mut dyn Grouped],
        fences: &[Fence<'_>],
        now: Timestamp,
    ) -> Result<(), AuthorityError<Box<Classified>>> {
        self.commit_group(parts, fences, now).map_err(|error| {
            error.map(|part| {
                Box::new(
                    parts[part]
                        .take_refusal()
                        .expect("the refusing part keeps its refusal"),
                )
            })
        })
    }

    /// The one loop every grouped commit runs: replay check and decision
    /// per part, refusal of a split group, one transaction, retry on a lost
    /// race. A refusal is reported as the index of the part that keeps it.
    fn commit_group<P: Part + ?Sized>(
        &self,
        parts: &mut [&mut P],
        fences: &[Fence<'_>],
        now: Timestamp,
    ) -> Result<(), AuthorityError<usize>> {
        let streams: Vec<String> = parts.iter().map(|p| p.stream().to_owned()).collect();
        if let Some(twice) = streams
            .iter()
            .enumerate()
            .find_map(|(i, s)| streams[..i].contains(s).then_some(s))
        {
            return Err(StoreError::Backend(format!(
                "a grouped operation writes each stream once, but two parts name {twice}"
            ))
            .into());
        }
        let mut backoff = Backoff::new();
        for _ in 0..MAX_ATTEMPTS {
            for (index, part) in parts.iter_mut().enumerate() {
                part.decide(self, now).map_err(|e| e.map(|()| index))?;
            }
            // Some part committed earlier, another would write now: the
            // group was split once; completing it here would hide that.
            let committed = parts.iter().find(|p| p.committed_before());
            let writing = parts.iter().find(|p| p.commit().is_some());
            if let (Some(committed), Some(missing)) = (committed, writing) {
                return Err(AuthorityError::PartiallyCommitted {
                    committed: committed.operation_id().clone(),
                    committed_stream: committed.stream().to_owned(),
                    missing: missing.operation_id().clone(),
                    missing_stream: missing.stream().to_owned(),
                });
            }
            let commits: Vec<Commit<'_>> = parts.iter().filter_map(|p| p.commit()).collect();
            let outcome = match (commits.as_slice(), fences) {
                ([], _) => Ok(()),
                ([one], []) => self.store.commit(one).map(drop),
                (many, fences) => self.store.commit_fenced(many, fences).map(drop),
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err(StoreError::StaleRevision { .. } | StoreError::DuplicateOperation { .. }) => {
                    backoff.lost()
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(AuthorityError::Contended {
            stream: streams.join(" and "),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// The receipt `step`'s operation id already has on its stream, if it
    /// was committed with this very request (a different request under the
    /// id is a conflict); writes nothing. For a caller that moved where a
    /// request is kept and must still answer a retry of one committed
    /// where it used to be.
    pub fn replay<O: Owner>(
        &self,
        step: &Step<'_, '_, O>,
    ) -> Result<Option<Executed<O::Receipt>>, AuthorityError<O::Error>> {
        self.replayed(step, request_digest(step.request).as_str())
    }

    /// The stored receipt of `step`'s operation id, if that id was
    /// committed with this very request ([`replayed_in`]).
    fn replayed<O: Owner>(
        &self,
        step: &Step<'_, '_, O>,
        digest: &str,
    ) -> Result<Option<Executed<O::Receipt>>, AuthorityError<O::Error>> {
        replayed_in(self, step, digest)
    }

    /// Read `step`'s stream and decide its request ([`prepare_in`]).
    fn prepare<O: Owner>(
        &self,
        step: &Step<'_, '_, O>,
        now: Timestamp,
    ) -> Result<PreparedFor<O>, AuthorityError<O::Error>> {
        prepare_in(self, step, now)
    }
}

/// What deciding a step reads from the store, whatever the store's type:
/// so that the parts of a group, each of its own owner, are decided
/// through one object-safe seam.
pub trait Reads {
    fn snapshot(&self, stream: &Stream) -> Result<Option<crate::Snapshot>, StoreError>;
    fn stored_receipt(
        &self,
        stream: &Stream,
        operation_id: &str,
    ) -> Result<Option<crate::StoredReceipt>, StoreError>;
}

impl<S: Store + ?Sized> Reads for Authority<'_, S> {
    fn snapshot(&self, stream: &Stream) -> Result<Option<crate::Snapshot>, StoreError> {
        self.store.load(stream)
    }

    fn stored_receipt(
        &self,
        stream: &Stream,
        operation_id: &str,
    ) -> Result<Option<crate::StoredReceipt>, StoreError> {
        self.store.receipt(stream, operation_id)
    }
}

/// The state of `stream` and its revision, parsed as `O`'s.
fn load_in<O: Owner>(
    reads: &dyn Reads,
    stream: &Stream,
) -> Result<Loaded<O::State>, AuthorityError<O::Error>> {
    match reads.snapshot(stream)? {
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

/// The stored receipt of `step`'s operation id, if that id was committed
/// with this very request; a different request under the id is a
/// conflict.
fn replayed_in<O: Owner>(
    reads: &dyn Reads,
    step: &Step<'_, '_, O>,
    digest: &str,
) -> Result<Option<Executed<O::Receipt>>, AuthorityError<O::Error>> {
    let Some(stored) = reads.stored_receipt(step.stream, step.operation_id.as_str())? else {
        return Ok(None);
    };
    match Replay::classify_str(&stored.request_digest, digest) {
        Replay::Exact => {
            let mut receipt: Receipt<O::Receipt> =
                parse(step.stream, stored.revision, "receipt", &stored.receipt)?;
            receipt.replayed = true;
            Ok(Some(receipt))
        }
        Replay::Conflict => Err(AuthorityError::Conflict {
            operation_id: step.operation_id.clone(),
            revision: stored.revision,
        }),
    }
}

/// Read `step`'s stream and decide its request: the receipt, and what a
/// commit would write (nothing when the owner finds it satisfied).
fn prepare_in<O: Owner>(
    reads: &dyn Reads,
    step: &Step<'_, '_, O>,
    now: Timestamp,
) -> Result<PreparedFor<O>, AuthorityError<O::Error>> {
    let Loaded { revision, state } = load_in::<O>(reads, step.stream)?;
    check_base::<O>(step.stream, step.request, revision)?;
    let decided =
        O::decide(state.as_ref(), step.request, step.context).map_err(AuthorityError::Rejected)?;
    let Some(event) = decided.event else {
        // Already satisfied: nothing to write, and nothing stored, so a
        // repeat decides (and finds it satisfied) again.
        return Ok(Prepared {
            revision,
            write: None,
            next: None,
            receipt: Receipt {
                operation_id: step.operation_id.clone(),
                revision,
                kind: "unchanged".to_owned(),
                committed_at: now,
                replayed: false,
                unchanged: true,
                body: decided.receipt,
            },
        });
    };
    let kind = O::event_kind(&event);
    let next = O::evolve(state, &event);
    let receipt = Receipt {
        operation_id: step.operation_id.clone(),
        revision: revision + 1,
        kind: kind.to_owned(),
        committed_at: now,
        replayed: false,
        unchanged: false,
        body: decided.receipt,
    };
    Ok(Prepared {
        revision,
        write: Some(Write {
            kind,
            event: canonical_json(&event),
            receipt: canonical_json(&receipt),
            // The snapshot is stored state, never digested: plain JSON
            // (readers compare parsed values, not bytes).
            state: serde_json::to_string(&next).expect("states serialize"),
            committed_at: now.to_string(),
            facet: O::facet(step.stream, &next),
        }),
        next: Some(next),
        receipt,
    })
}

/// One owner's operation on one stream, as [`Authority::execute_pair`]
/// takes each half.
pub struct Step<'r, 'c, O: Owner> {
    pub stream: &'r Stream,
    pub operation_id: &'r OperationId,
    pub request: &'r O::Request,
    pub context: &'r O::Context<'c>,
}

/// One part of a grouped commit, whatever its owner: what a grouped
/// commit decides and commits. [`Member`] is the one implementation.
pub trait Part {
    fn stream(&self) -> &Stream;
    fn operation_id(&self) -> &OperationId;
    /// Check for a replay, else read the stream and decide; a refusal is
    /// kept by the part ([`take_refusal`](Self::take_refusal)).
    fn decide(&mut self, reads: &dyn Reads, now: Timestamp) -> Result<(), AuthorityError<()>>;
    /// Whether the last decision found this part committed before.
    fn committed_before(&self) -> bool;
    /// What committing this part writes, if it writes anything.
    fn commit(&self) -> Option<Commit<'_>>;
}

/// A [`Part`] whose owner's refusal can travel as a [`Classified`]: what
/// [`Authority::execute_all`] takes.
pub trait Grouped: Part {
    /// The owner's refusal of the last decision, classified.
    fn take_refusal(&mut self) -> Option<Classified>;
}

/// One owner's step in a group, and what deciding it found: its stored
/// receipt (a replay), or what it would write, or the owner's refusal.
pub struct Member<'m, 'r, 'c, O: Owner> {
    step: &'m Step<'r, 'c, O>,
    digest: String,
    done: Option<Executed<O::Receipt>>,
    prepared: Option<PreparedFor<O>>,
    refusal: Option<O::Error>,
}

impl<'m, 'r, 'c, O: Owner> Member<'m, 'r, 'c, O> {
    pub fn new(step: &'m Step<'r, 'c, O>) -> Self {
        Member {
            step,
            digest: request_digest(step.request).as_str().to_owned(),
            done: None,
            prepared: None,
            refusal: None,
        }
    }

    /// The receipt of a group that committed (or replayed) whole.
    pub fn into_receipt(self) -> Executed<O::Receipt> {
        match (self.done, self.prepared) {
            (Some(done), _) => done,
            (None, Some(prepared)) => prepared.receipt,
            (None, None) => panic!("a member's receipt is read only after its group committed"),
        }
    }

    fn keep(&mut self, error: AuthorityError<O::Error>) -> AuthorityError<()> {
        error.map(|refusal| self.refusal = Some(refusal))
    }

    fn decide_step(&mut self, reads: &dyn Reads, now: Timestamp) -> Result<(), AuthorityError<()>> {
        self.done = None;
        self.prepared = None;
        match replayed_in(reads, self.step, &self.digest) {
            Ok(Some(receipt)) => self.done = Some(receipt),
            Ok(None) => match prepare_in(reads, self.step, now) {
                Ok(prepared) => self.prepared = Some(prepared),
                Err(error) => return Err(self.keep(error)),
            },
            Err(error) => return Err(self.keep(error)),
        }
        Ok(())
    }
}

impl<O: Owner> Part for Member<'_, '_, '_, O> {
    fn stream(&self) -> &Stream {
        self.step.stream
    }

    fn operation_id(&self) -> &OperationId {
        self.step.operation_id
    }

    fn decide(&mut self, reads: &dyn Reads, now: Timestamp) -> Result<(), AuthorityError<()>> {
        self.decide_step(reads, now)
    }

    fn committed_before(&self) -> bool {
        self.done.is_some()
    }

    fn commit(&self) -> Option<Commit<'_>> {
        self.prepared
            .as_ref()
            .and_then(|p| p.commit(self.step, &self.digest))
    }
}

impl<O: Owner> Grouped for Member<'_, '_, '_, O>
where
    O::Error: fmt::Display + fmt::Debug + Send + Sync + 'static,
{
    fn take_refusal(&mut self) -> Option<Classified> {
        self.refusal.take().map(Classified::new)
    }
}

/// A grouped commit's refusal, boxed (it is large), keeps its class.
impl Classify for Box<Classified> {
    fn class(&self) -> ErrorClass {
        self.class
    }

    fn details(&self) -> Option<serde_json::Value> {
        self.details.clone()
    }
}

/// Which half of a paired operation an owner refused.
#[derive(Debug, thiserror::Error)]
pub enum Either<A, B> {
    #[error(transparent)]
    First(A),
    #[error(transparent)]
    Second(B),
}

impl<E> Either<E, E> {
    /// The refusal, whichever half of a group of one owner's kind it came
    /// from.
    pub fn into_inner(self) -> E {
        match self {
            Either::First(e) | Either::Second(e) => e,
        }
    }
}

/// A decided operation, before its commit.
struct Prepared<R, S> {
    /// The revision it was decided against.
    revision: u64,
    /// What the commit writes; `None` when the request was already satisfied.
    write: Option<Write>,
    /// The state the commit stores, as the owner folded it.
    next: Option<S>,
    receipt: Receipt<R>,
}

type PreparedFor<O> = Prepared<<O as Owner>::Receipt, <O as Owner>::State>;

struct Write {
    kind: &'static str,
    event: String,
    receipt: String,
    state: String,
    committed_at: String,
    facet: Option<crate::Facet>,
}

impl<R, S> Prepared<R, S> {
    fn commit<'a, O: Owner>(
        &'a self,
        step: &Step<'a, '_, O>,
        digest: &'a str,
    ) -> Option<Commit<'a>> {
        let write = self.write.as_ref()?;
        Some(Commit {
            stream: step.stream,
            expected_revision: self.revision,
            operation_id: step.operation_id.as_str(),
            request_digest: digest,
            kind: write.kind,
            event: &write.event,
            receipt: &write.receipt,
            state: &write.state,
            committed_at: &write.committed_at,
            facet: write.facet.as_ref(),
        })
    }
}

impl<E> AuthorityError<E> {
    /// The same error, with an owner's refusal carried as another type.
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> AuthorityError<F> {
        match self {
            AuthorityError::Rejected(e) => AuthorityError::Rejected(f(e)),
            AuthorityError::Conflict {
                operation_id,
                revision,
            } => AuthorityError::Conflict {
                operation_id,
                revision,
            },
            AuthorityError::StaleBase {
                stream,
                expected,
                actual,
            } => AuthorityError::StaleBase {
                stream,
                expected,
                actual,
            },
            AuthorityError::Contended { stream, attempts } => {
                AuthorityError::Contended { stream, attempts }
            }
            AuthorityError::Unreadable {
                stream,
                revision,
                what,
                reason,
            } => AuthorityError::Unreadable {
                stream,
                revision,
                what,
                reason,
            },
            AuthorityError::PartiallyCommitted {
                committed,
                committed_stream,
                missing,
                missing_stream,
            } => AuthorityError::PartiallyCommitted {
                committed,
                committed_stream,
                missing,
                missing_stream,
            },
            AuthorityError::Store(e) => AuthorityError::Store(e),
        }
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

#[cfg(test)]
mod tests {
    use super::Backoff;

    #[test]
    fn backoff_grows_then_caps_and_pauses_within_its_window() {
        assert!(Backoff::window(1) < Backoff::window(2));
        assert!(Backoff::window(2) < Backoff::window(4));
        assert_eq!(Backoff::window(20), Backoff::CAP);
        assert_eq!(Backoff::window(u32::MAX), Backoff::CAP);
        let mut backoff = Backoff::new();
        let pauses: Vec<_> = (1..=40).map(|_| backoff.next_pause()).collect();
        for (losses, pause) in (1..).zip(&pauses) {
            assert!(*pause < Backoff::window(losses), "{losses}: {pause:?}");
        }
        // Jitter: forty draws are not all the same share of their window.
        let capped: Vec<_> = pauses[10..].to_vec();
        assert!(capped.iter().any(|p| *p != capped[0]));
    }
}
