//! What a ledger write records ([`LedgerEvent`]) and how one is read back
//! from the journal. Not here: how an event changes the snapshot (the
//! owner's `evolve`, `owner.rs`).

use super::canonical_read;
use super::record::{CheckRun, IterationRecord};
use super::state::InitLoop;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LedgerEvent {
    Initialized {
        run_id: String,
        at: Timestamp,
        config: Box<InitLoop>,
    },
    IterationAppended {
        record: Box<IterationRecord>,
    },
    Charged {
        dispatch_id: String,
        tokens: u64,
        usd: f64,
        at: Timestamp,
    },
    ClaimSettled {
        iteration: u64,
        check: CheckRun,
        at: Timestamp,
    },
    /// A record imported from another runtime's ledger: folded exactly as
    /// an appended one, and counted in [`Ledger::imported`].
    ///
    /// [`Ledger::imported`]: super::Ledger::imported
    IterationImported {
        record: Box<IterationRecord>,
    },
}

impl LedgerEvent {
    /// Read one event as the journal holds it. Iteration records, appended
    /// or imported, nearly every entry of a long journal, are read straight
    /// into their variant: first by the fast read of the canonical text
    /// loopx writes ([`canonical_read`]), then by serde into the variant
    /// (`LedgerEvent` is tagged by a field, and serde reads such an enum by
    /// first buffering the whole object into an intermediate tree).
    /// Anything neither direct read accepts as exactly one of those
    /// variants goes the general way, so what is accepted, and every
    /// error, is the same.
    pub fn from_journal(text: &str) -> Result<LedgerEvent, serde_json::Error> {
        use canonical_read::RecordEvent;
        let event = |kind, record| match kind {
            RecordEvent::Appended => LedgerEvent::IterationAppended { record },
            RecordEvent::Imported => LedgerEvent::IterationImported { record },
        };
        if let Some((kind, record)) = canonical_read::iteration_record(text) {
            return Ok(event(kind, Box::new(record)));
        }
        #[derive(Deserialize)]
        struct Record<'a> {
            #[serde(rename = "type", borrow)]
            tag: std::borrow::Cow<'a, str>,
            record: Box<IterationRecord>,
        }
        // The variants' tags as the serde attributes above spell them; the
        // test `the_direct_read_of_a_record_agrees_with_the_general_one`
        // holds the two together.
        if let Ok(Record { tag, record }) = serde_json::from_str::<Record<'_>>(text) {
            match tag.as_ref() {
                "iteration_appended" => return Ok(event(RecordEvent::Appended, record)),
                "iteration_imported" => return Ok(event(RecordEvent::Imported, record)),
                _ => {}
            }
        }
        serde_json::from_str(text)
    }
}
