//! `validate`: rebuild the ledger from its journal and check every record.
//!
//! The auditor streams: it holds the folded state, never the whole history,
//! so a ledger of 100,000 iterations costs one pass and little memory. Each
//! record is re-checked with [`append_guard`], the rule `decide` used, so the
//! audit and the writer cannot drift apart. At the end the fold is compared
//! with the stored snapshot: a snapshot the journal does not explain is
//! reported, field by field.
//!
//! [`StreamAudit`] is the part of that every stream gets, whatever owns it
//! (the goal streams, the driver's): consecutive revisions, events that
//! parse and carry their label, and a snapshot that parses as its owner's
//! state and equals the fold of the journal through the owner's `evolve`.

use super::budget::Exhausted;
use super::proof::EvidenceFiles;
use super::vocabulary::LoopStatus;
use super::{append_guard, import_guard, Ledger, LedgerEvent, LedgerOwner};
use crate::operation::Owner;
use jiff::Timestamp;
use serde::de::DeserializeOwned;
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
    /// `Sync`, so that an auditor can fold on a thread other than the
    /// one reading the journal.
    files: &'a (dyn EvidenceFiles + Sync),
    now: Timestamp,
    state: Option<Ledger>,
    audit: Audit,
}

impl<'a> Auditor<'a> {
    pub fn new(files: &'a (dyn EvidenceFiles + Sync), now: Timestamp) -> Self {
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
        let event: LedgerEvent = match LedgerEvent::from_journal(event) {
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
                | LedgerEvent::ClaimSettled { .. }
                | LedgerEvent::IterationImported { .. },
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
            (Some(ledger), LedgerEvent::Charged { tokens, usd, .. }) => {
                if let Err(refusal) = ledger.spent.charged(*tokens, *usd) {
                    self.error(format!("journal revision {revision}: {refusal}"));
                }
            }
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
                    &record.guarded(),
                    record.decision,
                    record.timestamp,
                    self.files,
                    record.bank.is_some(),
                ) {
                    problems.push(format!("iteration {}: {refusal}", record.iteration));
                }
                for problem in problems {
                    self.error(problem);
                }
            }
            (Some(ledger), LedgerEvent::IterationImported { record }) => {
                self.audit.iterations += 1;
                let mut problems = Vec::new();
                if record.operation_id.as_str() != operation_id {
                    problems.push(format!(
                        "imported iteration {} claims operation {} but was committed as {operation_id}",
                        record.iteration, record.operation_id
                    ));
                }
                if let Err(refusal) = import_guard(ledger, record) {
                    problems.push(format!(
                        "imported iteration {}: {refusal}",
                        record.iteration
                    ));
                }
                for problem in problems {
                    self.error(problem);
                }
            }
            (None, LedgerEvent::Initialized { .. }) => {}
        }
        self.state = Some(LedgerOwner::evolve_owned(self.state.take(), event));
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
        for problem in snapshot_problems("ledger", folded, text) {
            self.error(problem);
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

/// What is wrong with the stored snapshot `text` of a stream whose journal
/// folds to `folded`. It is parsed as the state every command loads, not as
/// loose JSON: a snapshot that no command can read is the worst
/// inconsistency of all. Differences are named field by field.
fn snapshot_problems<S: Serialize + DeserializeOwned>(
    what: &str,
    folded: &S,
    text: &str,
) -> Vec<String> {
    let parse_error = serde_json::from_str::<S>(text).err();
    let stored: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(error) => return vec![format!("snapshot is not JSON ({error})")],
    };
    let folded = serde_json::to_value(folded).expect("states serialize");
    let (Some(stored), Some(folded)) = (stored.as_object(), folded.as_object()) else {
        return vec![format!("snapshot is not a {what} (not a JSON object)")];
    };
    let keys: std::collections::BTreeSet<_> = stored.keys().chain(folded.keys()).collect();
    let differing: Vec<_> = keys
        .into_iter()
        .filter(|key| stored.get(key.as_str()) != folded.get(key.as_str()))
        .collect();
    if let Some(error) = parse_error {
        // One line: a snapshot that does not parse (`{}`) differs
        // everywhere, and listing every field would bury the point.
        let fields: Vec<&str> = differing.iter().map(|k| k.as_str()).collect();
        return vec![format!(
            "snapshot does not parse as a {what} ({error}): every command that reads it will fail; it differs from the journal's fold on: {}",
            fields.join(", ")
        )];
    }
    differing
        .into_iter()
        .map(|key| {
            format!(
                "snapshot disagrees with the journal on {key}: stored {}, journal folds to {}",
                brief(stored.get(key.as_str())),
                brief(folded.get(key.as_str()))
            )
        })
        .collect()
}

/// The audit every stream gets: feed it the journal with [`entry`], then
/// the stored snapshot with [`finish`].
///
/// [`entry`]: StreamAudit::entry
/// [`finish`]: StreamAudit::finish
pub struct StreamAudit<O: Owner> {
    what: &'static str,
    state: Option<O::State>,
    revision: u64,
    broken: bool,
    errors: Vec<String>,
}

impl<O: Owner> StreamAudit<O> {
    /// `what` names the state in messages ("goal", "driver state").
    pub fn new(what: &'static str) -> Self {
        StreamAudit {
            what,
            state: None,
            revision: 0,
            broken: false,
            errors: Vec::new(),
        }
    }

    /// Check and fold the next journal entry.
    pub fn entry(&mut self, revision: u64, kind: &str, event: &str) {
        if revision != self.revision + 1 {
            self.errors.push(format!(
                "journal revision {revision} follows {}: revisions must be consecutive",
                self.revision
            ));
        }
        self.revision = revision;
        if self.broken {
            return;
        }
        let event: O::Event = match serde_json::from_str(event) {
            Ok(event) => event,
            Err(error) => {
                // Later entries build on this one: folding on without it
                // would only report its consequences.
                self.broken = true;
                return self.errors.push(format!(
                    "journal revision {revision} ({kind}) does not parse: {error}; later entries are not folded"
                ));
            }
        };
        if O::event_kind(&event) != kind {
            self.errors.push(format!(
                "journal revision {revision} is labelled {kind} but holds {}",
                O::event_kind(&event)
            ));
        }
        // `evolve` is total over journals `decide` wrote; a journal written
        // by hand may break its assumptions, and the audit must report that
        // rather than die of it.
        let state = self.state.take();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| O::evolve(state, &event))) {
            Ok(next) => self.state = Some(next),
            Err(_) => {
                self.broken = true;
                self.errors.push(format!(
                    "journal revision {revision} ({kind}) cannot follow the entries before it; later entries are not folded"
                ));
            }
        }
    }

    /// Compare the fold with the stored snapshot (`None`: no snapshot row).
    /// Returns every problem found, and the folded state.
    pub fn finish(mut self, snapshot: Option<(u64, &str)>) -> (Vec<String>, Option<O::State>) {
        match (&self.state, snapshot) {
            (None, None) => {}
            (Some(_), None) => self
                .errors
                .push("the journal has entries but no snapshot exists".into()),
            (None, Some((revision, _))) if self.revision == 0 => self.errors.push(format!(
                "a snapshot at revision {revision} exists but the journal is empty"
            )),
            (None, Some(_)) => {}
            (Some(folded), Some((revision, text))) => {
                if revision != self.revision {
                    self.errors.push(format!(
                        "snapshot is at revision {revision} but the journal ends at {}",
                        self.revision
                    ));
                }
                if !self.broken {
                    let problems = snapshot_problems(self.what, folded, text);
                    self.errors.extend(problems);
                }
            }
        }
        (self.errors, self.state)
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

#[cfg(test)]
mod tests {
    use super::super::budget::Budget;
    use super::super::proof::NoFiles;
    use super::super::vocabulary::{Decision, Mode};
    use super::super::*;
    use crate::digest::canonical_json;
    use crate::operation::{OperationId, Owner};

    fn event(state: Option<&Ledger>, request: &LedgerRequest) -> LedgerEvent {
        let id = OperationId::parse("op-1").unwrap();
        let context = LedgerContext {
            now: jiff::Timestamp::UNIX_EPOCH,
            operation_id: &id,
            files: &NoFiles,
        };
        LedgerOwner::decide(state, request, &context)
            .unwrap()
            .event
            .unwrap()
    }

    #[test]
    fn folding_an_owned_event_agrees_with_the_owners_evolve() {
        let init = event(
            None,
            &LedgerRequest::Init(InitLoop::new("g", "c", Budget::iterations_only(5))),
        );
        let mut by_ref = LedgerOwner::evolve(None, &init);
        let mut owned = LedgerOwner::evolve_owned(None, init);
        assert_eq!(owned, by_ref);
        for n in 0..4 {
            let next = event(
                Some(&by_ref),
                &LedgerRequest::AppendIteration(IterationReport {
                    mode: Some(Mode::BoundedResearch),
                    objective: format!("o{n}"),
                    decision: Some(Decision::Continue),
                    ..Default::default()
                }),
            );
            by_ref = LedgerOwner::evolve(Some(by_ref), &next);
            owned = LedgerOwner::evolve_owned(Some(owned), next);
            assert_eq!(owned, by_ref);
        }
        assert_eq!(owned.recent.len(), 4);
    }

    #[test]
    fn the_direct_read_of_a_record_agrees_with_the_general_one() {
        let init = event(
            None,
            &LedgerRequest::Init(InitLoop::new("g", "c", Budget::iterations_only(5))),
        );
        let ledger = LedgerOwner::evolve(None, &init);
        let appended = event(
            Some(&ledger),
            &LedgerRequest::AppendIteration(IterationReport {
                mode: Some(Mode::BoundedResearch),
                objective: "o".into(),
                decision: Some(Decision::Continue),
                ..Default::default()
            }),
        );
        let LedgerEvent::IterationAppended { record } = &appended else {
            panic!("an append writes an appended record")
        };
        let imported = LedgerEvent::IterationImported {
            record: record.clone(),
        };
        for original in [init, appended, imported] {
            // The canonical text (the fast read) and another spelling of
            // it (the direct serde read, or the general one).
            let pretty = serde_json::to_string_pretty(&original).unwrap();
            for text in [canonical_json(&original), pretty] {
                assert_eq!(LedgerEvent::from_journal(&text).unwrap(), original);
                assert_eq!(
                    LedgerEvent::from_journal(&text).unwrap(),
                    serde_json::from_str::<LedgerEvent>(&text).unwrap()
                );
            }
        }
        // A record under another tag is read as that tag says, or refused.
        let text = canonical_json(&event(
            Some(&ledger),
            &LedgerRequest::AppendIteration(IterationReport {
                mode: Some(Mode::BoundedResearch),
                objective: "o".into(),
                decision: Some(Decision::Continue),
                ..Default::default()
            }),
        ))
        .replace("\"iteration_appended\"", "\"charged\"");
        assert!(LedgerEvent::from_journal(&text).is_err());
    }
}
