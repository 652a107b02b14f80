//! A revisioned document replaced as a whole: the one owner shape the goal
//! contract and the approach registry share.
//!
//! Owns: the base-revision check (a revision written against a document
//! the writer never read is refused by the authority), the document's own
//! checks before anything is written, revision numbering, and the pin
//! ([`super::Pin`]) that later decisions bind to. Does not own what makes
//! a contract or a registry valid: each document says that in
//! [`Document::check`].

use super::{FocusError, Pin};
use crate::digest::Digest;
use crate::operation::{Clock, Decided, Owner};
use jiff::Timestamp;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::marker::PhantomData;

/// A document one of the Goal Focus streams holds.
pub trait Document: Serialize + DeserializeOwned + Clone + PartialEq {
    /// What messages call it ("goal contract").
    const WHAT: &'static str;
    /// The journal's kind for a revision of it.
    const KIND: &'static str;
    /// Every rule a version of this document must satisfy.
    fn check(&self) -> Result<(), FocusError>;
}

/// A document as stored: which revision it is and when it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revised<D> {
    pub revision: u64,
    /// `None` for the version derived before anything was written.
    pub revised_at: Option<Timestamp>,
    #[serde(flatten)]
    pub document: D,
}

impl<D: Serialize> Revised<D> {
    /// The pin a decision made against exactly this version carries.
    pub fn pin(&self) -> Pin {
        Pin {
            revision: self.revision,
            fingerprint: Digest::of_json(self),
        }
    }
}

/// Replace the document. `base_revision`, when given, is the revision the
/// writer read (0: nothing was written yet); the authority refuses the
/// write once the stream has moved past it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Revise<D> {
    pub base_revision: Option<u64>,
    pub document: D,
}

/// The journal's record of one revision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Revision<D> {
    pub at: Timestamp,
    pub document: D,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisedReceipt {
    pub revision: u64,
    pub fingerprint: Digest,
    /// The document was already exactly this; nothing was written.
    pub unchanged: bool,
}

pub struct DocumentOwner<D>(PhantomData<D>);

impl<D: Document> Owner for DocumentOwner<D> {
    type State = Revised<D>;
    type Request = Revise<D>;
    type Event = Revision<D>;
    type Receipt = RevisedReceipt;
    type Error = FocusError;
    type Context<'a> = Clock;

    fn expected_revision(request: &Revise<D>) -> Option<u64> {
        request.base_revision
    }

    fn decide(
        state: Option<&Revised<D>>,
        request: &Revise<D>,
        clock: &Clock,
    ) -> Result<Decided<Revision<D>, RevisedReceipt>, FocusError> {
        request.document.check()?;
        if let Some(current) = state.filter(|s| s.document == request.document) {
            let pin = current.pin();
            return Ok(Decided::unchanged(RevisedReceipt {
                revision: pin.revision,
                fingerprint: pin.fingerprint,
                unchanged: true,
            }));
        }
        let event = Revision {
            at: clock.now,
            document: request.document.clone(),
        };
        let pin = Self::evolve(state.cloned(), &event).pin();
        Ok(Decided::write(
            event,
            RevisedReceipt {
                revision: pin.revision,
                fingerprint: pin.fingerprint,
                unchanged: false,
            },
        ))
    }

    fn evolve(state: Option<Revised<D>>, event: &Revision<D>) -> Revised<D> {
        Revised {
            revision: state.map_or(0, |s| s.revision) + 1,
            revised_at: Some(event.at),
            document: event.document.clone(),
        }
    }

    fn event_kind(_event: &Revision<D>) -> &'static str {
        D::KIND
    }
}
