//! `validate`: rebuild the ledger from its journal and check every record.
//!
//! The auditor streams: it holds the folded state, never the whole history,
//! so a ledger of 100,000 iterations costs one pass and little memory. Each
//! record is re-checked with [`append_guard`], the rule `decide` used, so the
//! audit and the writer cannot drift apart. At the end the fold is compared
//! with the stored snapshot: a snapshot the journal does not explain is
//! reported, field by field.

use super::budget::Exhausted;
use super::proof::EvidenceFiles;
use super::vocabulary::LoopStatus;
use super::{append_guard, Ledger, LedgerEvent, LedgerOwner};
use crate::operation::Owner;
use jiff::Timestamp;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Audit {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Iteration records found in the journal.
    pub iterations: u64,
    /// The last journal revision read.
    pub revision: u64,
}

impl Audit {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

pub struct Auditor<'a> {
    files: &'a dyn EvidenceFiles,
    now: Timestamp,
    state: Option<Ledger>,
    audit: Audit,
}

impl<'a> Auditor<'a> {
    pub fn new(files: &'a dyn EvidenceFiles, now: Timestamp) -> Self {
        Auditor {
            files,
            now,
            state: None,
            audit: Audit::default(),
        }
    }

    /// Check and fold the next journal entry.
    pub fn entry(&mut self, revision: u64, operation_id: &str, kind: &str, event: &str) {
        let expected = self.audit.revision + 1;
        if revision != expected {
            self.error(format!(
                "journal revision {revision} follows {}: revisions must be consecutive",
                self.audit.revision
            ));
        }
        self.audit.revision = revision;
        let event: LedgerEvent = match serde_json::from_str(event) {
            Ok(event) => event,
            Err(error) => {
                return self.error(format!(
                    "journal revision {revision} ({kind}) does not parse: {error}"
                ))
            }
        };
        if LedgerOwner::event_kind(&event) != kind {
            self.error(format!(
                "journal revision {revision} is labelled {kind} but holds {}",
                LedgerOwner::event_kind(&event)
            ));
        }
        match (&self.state, &event) {
            (Some(_), LedgerEvent::Initialized { .. }) => {
                return self.error(format!(
                    "journal revision {revision} initializes the loop a second time"
                ));
            }
            (
                None,
                LedgerEvent::IterationAppended { .. }
                | LedgerEvent::Charged { .. }
                | LedgerEvent::ClaimSettled { .. },
            ) => {
                return self.error(format!(
                    "journal revision {revision} changes the loop before it was initialized"
                ));
            }
            (Some(_), LedgerEvent::Charged { usd, .. })
                if !super::budget::is_budget_number(*usd) =>
            {
                self.error(format!(
                    "journal revision {revision} charges a USD amount that is not a budget number"
                ));
            }
            (Some(_), LedgerEvent::Charged { .. }) => {}
            (Some(ledger), LedgerEvent::ClaimSettled { iteration, .. })
                if ledger.pending_claim != Some(*iteration) =>
            {
                self.error(format!("journal revision {revision} settles a claim of iteration {iteration} that was not pending"));
            }
            (Some(_), LedgerEvent::ClaimSettled { .. }) => {}
            (Some(ledger), LedgerEvent::IterationAppended { record }) => {
                self.audit.iterations += 1;
                let k = ledger.spent.iterations + 1;
                let mut problems = Vec::new();
                if record.iteration != k {
                    problems.push(format!(
                        "ledger expected iteration {k}, found iteration {}",
                        record.iteration
                    ));
                }
                if record.operation_id.as_str() != operation_id {
                    problems.push(format!(
                        "iteration {} claims operation {} but was committed as {operation_id}",
                        record.iteration, record.operation_id
                    ));
                }
                if let Err(refusal) = append_guard(
                    ledger,
                    &record.as_report(),
                    record.decision,
                    record.timestamp,
                    self.files,
                ) {
                    problems.push(format!("iteration {}: {refusal}", record.iteration));
                }
                for problem in problems {
                    self.error(problem);
                }
            }
            (None, LedgerEvent::Initialized { .. }) => {}
        }
        self.state = Some(LedgerOwner::evolve(self.state.take(), &event));
    }

    /// Compare the fold with the stored snapshot and check the final state.
    pub fn finish(mut self, snapshot: Option<(u64, &str)>) -> Audit {
        let Some(folded) = self.state.take() else {
            self.error("the journal holds no initialized loop".into());
            return self.audit;
        };
        match snapshot {
            None => self.error("the journal has entries but no snapshot exists".into()),
            Some((revision, text)) => {
                if revision != self.audit.revision {
                    self.error(format!(
                        "snapshot is at revision {revision} but the journal ends at {}",
                        self.audit.revision
                    ));
                }
                self.compare_snapshot(&folded, text);
            }
        }
        self.check_final_state(&folded);
        self.audit
    }

    fn compare_snapshot(&mut self, folded: &Ledger, text: &str) {
        let stored: serde_json::Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(error) => return self.error(format!("snapshot does not parse: {error}")),
        };
        let folded = serde_json::to_value(folded).expect("a ledger serializes");
        let (Some(stored), Some(folded)) = (stored.as_object(), folded.as_object()) else {
            return self.error("snapshot is not a JSON object".into());
        };
        let keys: std::collections::BTreeSet<_> = stored.keys().chain(folded.keys()).collect();
        for key in keys {
            let (s, f) = (stored.get(key.as_str()), folded.get(key.as_str()));
            if s != f {
                self.error(format!(
                    "snapshot disagrees with the journal on {key}: stored {}, journal folds to {}",
                    brief(s),
                    brief(f)
                ));
            }
        }
    }

    fn check_final_state(&mut self, ledger: &Ledger) {
        if ledger.status != LoopStatus::Running || ledger.pending_claim.is_some() {
            return;
        }
        let elapsed = ledger.elapsed_seconds(self.now);
        for exhausted in ledger.config.budget.exhausted(&ledger.spent, elapsed) {
            match exhausted {
                // Only a record can spend an iteration, and the guard makes
                // the last one end the loop.
                Exhausted::Iterations => self.error(
                    "loop status cannot be running when the iteration budget is exhausted".into(),
                ),
                // Time passes, and a driver charges measured cost, with no
                // record to end the loop: expected, and the arbiter stops it.
                other => self.audit.warnings.push(format!(
                    "the {} budget is exhausted while the loop is running: `loopx done` reports {}",
                    other.describe(),
                    other.reason_code()
                )),
            }
        }
    }

    fn error(&mut self, message: String) {
        self.audit.errors.push(message);
    }
}

fn brief(value: Option<&serde_json::Value>) -> String {
    let text = value.map_or_else(|| "nothing".to_owned(), |v| v.to_string());
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}
