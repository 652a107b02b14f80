//! The loop directory: where the store lives, where views are written, and
//! the only way loopx reads files an agent named.
//!
//! Layout: `loopx.sqlite` (the authority), `recovery.md` and `status.json`
//! (views, rewritten after every commit), `proof_artifacts/`, and the
//! operator's sentinels `STOP_REQUESTED`, `BLOCKED`, `PAUSE`.

use crate::goal::GoalCache;
use crate::{clock, fsutil};
use anyhow::{bail, Result};
use jiff::Timestamp;
use loopx_core::driver::{self, DriverOwner};
use loopx_core::goal::frontier::{self, TodoOwner};
use loopx_core::goal::GoalOwner;
use loopx_core::ledger::arbiter::{arbitrate, Sentinels, Verdict};
use loopx_core::ledger::audit::{Audit, Auditor, StreamAudit};
use loopx_core::ledger::proof::{EvidenceFiles, FileProblem};
use loopx_core::ledger::{view, Ledger, LedgerOwner, STREAM};
use loopx_core::path::LoopPath;
use loopx_core::text::limits::PROOF_ARTIFACT_BYTES;
use loopx_store::sqlite::Access;
use loopx_store::{Authority, Loaded, Locator, Store};
use std::path::{Path, PathBuf};

pub const DATABASE: &str = "loopx.sqlite";
pub const RECOVERY: &str = "recovery.md";
pub const STATUS: &str = "status.json";
pub const PROOF_ARTIFACTS: &str = "proof_artifacts";
pub const STOP_REQUESTED: &str = "STOP_REQUESTED";
pub const BLOCKED: &str = "BLOCKED";
pub const PAUSE: &str = "PAUSE";
pub const DRIVER_LOGS: &str = "driver_logs";
pub const DRIVER_LOCK: &str = "driver.lock";
/// The environment variable naming the store (`--store` sets it too, so
/// that agents a driver starts reach the same store).
pub const STORE_ENV: &str = "LOOPX_STORE";

/// The store a loop opened through.
pub type BoxedStore = Box<dyn Store + Send>;

pub struct LoopDir {
    root: PathBuf,
    store: BoxedStore,
    /// The goal snapshot last read, by revision (see [`GoalCache`]).
    pub(crate) goal_cache: GoalCache,
}

/// A ledger as read, with the revision it was read at.
pub struct Reading {
    pub revision: u64,
    pub ledger: Ledger,
}

/// What `validate` found, over every stream of the store.
pub struct StoreAudit {
    /// The ledger's audit; its errors and warnings come first below.
    pub ledger: Audit,
    /// Every problem, each naming its stream unless it is the ledger's.
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Every stream audited, with the revision its journal ends at.
    pub streams: Vec<(String, u64)>,
}

impl StoreAudit {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

impl LoopDir {
    /// Open an existing loop through the store `LOOPX_STORE` names, or
    /// its directory's `loopx.sqlite`. Never creates anything.
    pub fn open(dir: &Path, access: Access) -> Result<Self> {
        match configured_store()? {
            Some(locator) => Self::open_at(dir, &locator, access),
            None => {
                let root = dir.canonicalize().map_err(|_| missing_loop(dir))?;
                if !root.join(DATABASE).is_file() {
                    return Err(missing_loop(dir));
                }
                let store = Locator::sqlite(&root.join(DATABASE)).open(access)?;
                Ok(LoopDir {
                    root,
                    store,
                    goal_cache: GoalCache::default(),
                })
            }
        }
    }

    /// Open the loop directory `dir` with its state in the store
    /// `locator` names. Never creates anything.
    pub fn open_at(dir: &Path, locator: &Locator, access: Access) -> Result<Self> {
        // The store first: one this build cannot open is the error to
        // report, whatever the directory holds.
        let store = locator.open(access)?;
        let root = dir.canonicalize().map_err(|_| missing_loop(dir))?;
        Ok(LoopDir {
            root,
            store,
            goal_cache: GoalCache::default(),
        })
    }

    /// Create the directory, `proof_artifacts/` and the database for `init`.
    /// The store comes first: when it refuses (an orphaned `-wal`, a
    /// locator this build cannot open), nothing else has been created
    /// either.
    pub fn create(dir: &Path) -> Result<Self> {
        let locator = configured_store()?;
        if let Some(Locator::Postgres { .. }) = &locator {
            // Refused before the directory exists.
            locator.as_ref().expect("matched").open(Access::Create)?;
        }
        fsutil::create_loop_dir(dir)?;
        let root = dir.canonicalize()?;
        let locator = locator.unwrap_or_else(|| Locator::sqlite(&root.join(DATABASE)));
        let store = locator.open(Access::Create)?;
        fsutil::create_private_dir(&root.join(PROOF_ARTIFACTS))?;
        Ok(LoopDir {
            root,
            store,
            goal_cache: GoalCache::default(),
        })
    }

    /// Fold recent commits into the store's main file (see
    /// [`Store::checkpoint`]): at the end of a drive turn and before a
    /// backup, never on every command.
    pub fn checkpoint(&self) -> Result<()> {
        Ok(self.store.checkpoint()?)
    }

    /// Write a complete standalone copy of the store to the new file `to`.
    pub fn backup_to(&self, to: &Path) -> Result<()> {
        Ok(self.store.backup_to(to)?)
    }

    /// Where this loop's state lives, as messages name it.
    pub fn store_location(&self) -> String {
        self.store.location()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn display(&self) -> String {
        self.root.display().to_string()
    }

    pub fn authority(&self) -> Authority<'_, dyn Store + Send> {
        Authority::new(&*self.store)
    }

    /// The ledger, or an error that says how to create one.
    pub fn read(&self) -> Result<Reading> {
        match self.authority().load::<LedgerOwner>(STREAM)? {
            Loaded { revision, state: Some(ledger) } => Ok(Reading { revision, ledger }),
            Loaded { state: None, .. } => bail!(
                "{} holds a database but no loop (an interrupted init?): run `loopx init --dir {}` again",
                self.display(),
                self.display()
            ),
        }
    }

    /// Audit every stream of the store: each journal is refolded through
    /// its owner's `evolve` and compared with the stored snapshot, and the
    /// ledger's records are re-checked against the rule that admitted them.
    /// All reads run in one read transaction, so a writer committing
    /// meanwhile can never make a snapshot and its journal look apart.
    pub fn audit(&self, now: Timestamp) -> Result<StoreAudit> {
        let store = &*self.store;
        let mut found = None;
        store.read_consistent(&mut || {
            let mut auditor = Auditor::new(self, now);
            store.journal_rows(STREAM, 0, &mut |row| {
                auditor.entry(row.revision, row.operation_id, row.kind, row.event);
                Ok(())
            })?;
            let snapshot = store.load(STREAM)?;
            let ledger = auditor.finish(snapshot.as_ref().map(|s| (s.revision, s.state.as_str())));
            let mut audit = StoreAudit {
                errors: ledger.errors.clone(),
                warnings: ledger.warnings.clone(),
                streams: vec![(STREAM.to_owned(), ledger.revision)],
                ledger,
            };
            for stream in store.streams()? {
                if stream == STREAM {
                    continue;
                }
                let (problems, revision) = if let Some(goal_id) = stream.strip_prefix("goal:") {
                    let (mut problems, revision, goal) =
                        audit_stream::<GoalOwner>(store, &stream, "goal")?;
                    if let Some(goal) = goal.filter(|g| g.goal_id != goal_id) {
                        problems.push(format!(
                            "the journal folds to goal {:?}, not the goal this stream is named for",
                            goal.goal_id
                        ));
                    }
                    (problems, revision)
                } else if frontier::is_todo_stream(&stream) {
                    let (mut problems, revision, todo) =
                        audit_stream::<TodoOwner>(store, &stream, "todo")?;
                    if let Some(todo) = todo.filter(|t| !stream.ends_with(&format!("/{}", t.id))) {
                        problems.push(format!(
                            "the journal folds to todo {:?}, not the todo this stream is named for",
                            todo.id
                        ));
                    }
                    (problems, revision)
                } else if stream == driver::STREAM {
                    let (problems, revision, _) =
                        audit_stream::<DriverOwner>(store, &stream, "driver state")?;
                    (problems, revision)
                } else if let Some(found) = audit_focus_stream(store, &stream)? {
                    found
                } else {
                    let revision = store.revision(&stream)?;
                    (
                        vec!["no loopx owner writes a stream of this name: it was not written by loopx".to_owned()],
                        revision,
                    )
                };
                audit
                    .errors
                    .extend(problems.into_iter().map(|p| format!("stream {stream}: {p}")));
                audit.streams.push((stream, revision));
            }
            found = Some(audit);
            Ok(())
        })?;
        Ok(found.expect("the audit ran"))
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// Write one view file in the loop directory unless it already holds
    /// exactly `text` (see [`fsutil::write_views`]).
    pub(crate) fn write_view(&self, name: &str, text: &[u8]) -> Result<()> {
        let mut outcomes = fsutil::write_views(&self.root, &[(name, text)]);
        outcomes.pop().map_or(Ok(()), |(_, outcome)| outcome)
    }

    pub fn sentinels(&self) -> Sentinels {
        let present = |name: &str| self.root.join(name).symlink_metadata().is_ok();
        Sentinels {
            stop_requested: present(STOP_REQUESTED),
            blocked: present(BLOCKED),
            paused: present(PAUSE),
        }
    }

    pub fn verdict(&self, ledger: &Ledger, now: Timestamp) -> Verdict {
        arbitrate(ledger, self.sentinels(), now)
    }

    /// Rewrite `recovery.md` and `status.json` from the store, after a
    /// commit. Never an error: the commit stands whatever happens here (a
    /// command that failed now would invite a retry that duplicates it), so
    /// a view that cannot be written (full disk, a directory in its place)
    /// comes back as a warning for the receipt, and the next write
    /// regenerates it.
    pub fn refresh_views(&self) -> Vec<String> {
        match self.read() {
            Ok(reading) => self.refresh_views_from(&reading),
            Err(error) => vec![view_warning("recovery.md and status.json", error)],
        }
    }

    /// [`refresh_views`](Self::refresh_views) from the state a write just
    /// committed, without reading it back. A view whose text is unchanged
    /// is not rewritten (a read is cheaper than a write and a rename).
    pub fn refresh_views_from(&self, reading: &Reading) -> Vec<String> {
        let Reading { revision, ledger } = reading;
        let verdict = self.verdict(ledger, clock::now());
        let recovery = view::recovery_markdown(ledger, &verdict);
        let mut status = view::status_json(ledger, *revision, &verdict);
        status["dir"] = self.display().into();
        let mut text = serde_json::to_string_pretty(&status).expect("JSON values print");
        text.push('\n');
        let mut warnings: Vec<String> = fsutil::write_views(
            &self.root,
            &[(RECOVERY, recovery.as_bytes()), (STATUS, text.as_bytes())],
        )
        .into_iter()
        .filter_map(|(view, outcome)| outcome.err().map(|error| view_warning(view, error)))
        .collect();
        warnings.extend(crate::focus::refresh_projection(self, ledger));
        warnings
    }

    /// [`refresh_views`](Self::refresh_views) for a caller with no receipt
    /// to carry warnings (the driver): they go to stderr.
    pub fn refresh_views_or_warn(&self) {
        for warning in self.refresh_views() {
            eprintln!("warning: {warning}");
        }
    }
}

/// One stream's audit: its problems, the revision its journal ends at,
/// and the state its journal folds to.
type StreamFindings<S> = (Vec<String>, u64, Option<S>);

/// Refold one stream's journal through `O` and compare it with the stored
/// snapshot.
fn audit_stream<O: loopx_core::operation::Owner>(
    store: &(dyn Store + Send),
    stream: &str,
    what: &'static str,
) -> Result<StreamFindings<O::State>, loopx_store::StoreError> {
    let mut audit = StreamAudit::<O>::new(what);
    let mut last = 0;
    store.journal_rows(stream, 0, &mut |row| {
        last = row.revision;
        audit.entry(row.revision, row.kind, row.event);
        Ok(())
    })?;
    let snapshot = store.load(stream)?;
    let (problems, state) = audit.finish(snapshot.as_ref().map(|s| (s.revision, s.state.as_str())));
    Ok((problems, last, state))
}

/// The audit of a Goal Focus stream (problems and revision), or `None` if
/// `stream` is not one.
fn audit_focus_stream(
    store: &(dyn Store + Send),
    stream: &str,
) -> Result<Option<(Vec<String>, u64)>, loopx_store::StoreError> {
    use loopx_core::focus::{self, decisions::DecisionOwner, plan::PlanOwner};
    let (problems, revision) = match stream {
        focus::CONTRACT_STREAM => {
            let (p, r, _) = audit_stream::<focus::ContractOwner>(store, stream, "goal contract")?;
            (p, r)
        }
        focus::REGISTRY_STREAM => {
            let (p, r, _) =
                audit_stream::<focus::RegistryOwner>(store, stream, "approach registry")?;
            (p, r)
        }
        focus::PLAN_STREAM => {
            let (p, r, _) = audit_stream::<PlanOwner>(store, stream, "current plan")?;
            (p, r)
        }
        focus::DECISIONS_STREAM => {
            let (p, r, _) = audit_stream::<DecisionOwner>(store, stream, "direction decisions")?;
            (p, r)
        }
        focus::candidate::CANDIDATE_STREAM => {
            let (p, r, _) = audit_stream::<focus::candidate::CandidateOwner>(
                store,
                stream,
                "staged candidates",
            )?;
            (p, r)
        }
        _ => return Ok(None),
    };
    Ok(Some((problems, revision)))
}

/// The store `LOOPX_STORE` names, if it is set (and not empty).
pub(crate) fn configured_store() -> Result<Option<Locator>> {
    match std::env::var(STORE_ENV) {
        Ok(text) if !text.is_empty() => Ok(Some(Locator::parse(&text)?)),
        _ => Ok(None),
    }
}

/// A view that could not be refreshed after a commit: never an error (the
/// commit stands whatever happens here; a command that failed now would
/// invite a retry that duplicates it), but a warning for the receipt.
pub(crate) fn view_warning(view: &str, error: anyhow::Error) -> String {
    format!(
        "the operation is committed, but {view} could not be refreshed ({error:#}); it is a derived view: fix the cause and the next write to this loop rewrites it"
    )
}

fn missing_loop(dir: &Path) -> anyhow::Error {
    crate::AppError::not_found(format!(
        "no loop at {}: there is no {DATABASE} there; create one with `loopx init --dir {} --goal ... --success-criteria ...`",
        dir.display(),
        dir.display()
    ))
    .into()
}

/// Files named by state or by an agent: the only way to read them, each
/// through [`fsutil::open_confined`] and bounded.
impl LoopDir {
    /// The regular file `path` names below the loop directory, at most
    /// `limit` bytes of it.
    pub fn read_file(&self, path: &LoopPath, limit: u64) -> Result<Vec<u8>, FileProblem> {
        fsutil::read_confined(&self.root, path, limit)
    }

    /// The last `max` bytes of the regular file `path` names.
    pub fn tail_file(&self, path: &LoopPath, max: u64) -> Result<Vec<u8>, FileProblem> {
        fsutil::tail_confined(&self.root, path, max)
    }
}

impl EvidenceFiles for LoopDir {
    fn proof_artifact(&self, evidence_id: &str) -> Result<Vec<u8>, FileProblem> {
        // The owner checked the id's grammar, so this always parses; if it
        // did not, there is no such file to read.
        let path = LoopPath::parse(&format!("{PROOF_ARTIFACTS}/{evidence_id}.json"))
            .map_err(|_| FileProblem::Missing)?;
        self.read_file(&path, PROOF_ARTIFACT_BYTES)
    }

    fn regular_file(&self, path: &LoopPath) -> Result<(), FileProblem> {
        fsutil::open_confined(&self.root, path).map(drop)
    }
}
