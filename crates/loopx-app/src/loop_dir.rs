//! The loop directory: where the store lives, where views are written, and
//! the only way loopx reads files an agent named.
//!
//! Layout: `loopx.sqlite` (the authority), `recovery.md` and `status.json`
//! (views, rewritten after every commit), `proof_artifacts/`, and the
//! operator's sentinels `STOP_REQUESTED`, `BLOCKED`, `PAUSE`.

use crate::{fsutil, journal_scan};
use anyhow::{bail, Result};
use jiff::Timestamp;
use loopx_core::digest::Digest;
use loopx_core::driver::{self, DriverOwner};
use loopx_core::goal::frontier::{self, TodoOwner};
use loopx_core::goal::GoalOwner;
use loopx_core::ledger::arbiter::{arbitrate, Sentinels, Verdict};
use loopx_core::ledger::audit::{Audit, Auditor, StreamAudit};
use loopx_core::ledger::proof::{EvidenceFiles, FileProblem};
use loopx_core::ledger::{Ledger, LedgerOwner, STREAM};
use loopx_core::path::LoopPath;
use loopx_core::text::limits::PROOF_ARTIFACT_BYTES;
use loopx_store::sqlite::Access;
use loopx_store::{Authority, Loaded, Locator, Store};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const DATABASE: &str = "loopx.sqlite";
pub const RECOVERY: &str = "recovery.md";
pub const STATUS: &str = "status.json";
pub const PROOF_ARTIFACTS: &str = "proof_artifacts";
pub const STOP_REQUESTED: &str = "STOP_REQUESTED";
pub const BLOCKED: &str = "BLOCKED";
pub const PAUSE: &str = "PAUSE";
pub const DRIVER_LOGS: &str = "driver_logs";
pub const DRIVER_LOCK: &str = "driver.lock";

/// The store a loop opened through.
pub type BoxedStore = Box<dyn Store + Send>;

pub struct LoopDir {
    root: PathBuf,
    store: BoxedStore,
    /// The locator of the store it was opened through, when that is not
    /// the directory's own `loopx.sqlite`: what a process it starts must
    /// be told (password included, so never shown).
    store_text: Option<String>,
    /// The goal snapshot last read, by revision (see [`SnapshotCache`]).
    pub(crate) goal_cache: SnapshotCache<loopx_core::goal::Goal>,
}

/// The snapshot (the goal's) this loop handle read last, with its stream
/// and revision. A snapshot at a revision never changes, and todo transitions
/// no longer write the goal, so a process that claims one todo after
/// another re-reads only the goal's revision (a small query) instead of the
/// whole goal for every claim. Not state: every use checks the revision
/// against the store first.
pub struct SnapshotCache<T>(RefCell<Option<(String, u64, Arc<T>)>>);

impl<T> SnapshotCache<T> {
    pub(crate) fn get(&self, stream: &str, revision: u64) -> Option<Arc<T>> {
        match &*self.0.borrow() {
            Some((cached, at, goal)) if cached == stream && *at == revision => Some(goal.clone()),
            _ => None,
        }
    }

    pub(crate) fn put(&self, stream: &str, revision: u64, goal: T) -> Arc<T> {
        let goal = Arc::new(goal);
        *self.0.borrow_mut() = Some((stream.to_owned(), revision, goal.clone()));
        goal
    }
}

impl<T> Default for SnapshotCache<T> {
    fn default() -> Self {
        SnapshotCache(RefCell::new(None))
    }
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
    /// One digest of every stream's snapshot (name, revision and state):
    /// two stores with equal digests hold the same loop state, whichever
    /// backend each is (what `migrate --from-dir` is verified by).
    pub state_digest: Digest,
}

impl StoreAudit {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Where a loop is: its directory, and the store its state lives in when
/// that is not the directory's own `loopx.sqlite` (a locator, as `--store`
/// takes it). An adapter builds it once from what it was given and passes
/// it to every use case; nothing below reads the environment for it.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub dir: &'a Path,
    pub store: Option<&'a str>,
    /// The loop (its run id) the caller is bound to, if any: a store that
    /// now holds another loop (a database swapped under a long-lived
    /// server) is refused rather than served.
    pub run_id: Option<&'a str>,
}

impl<'a> Place<'a> {
    pub fn new(dir: &'a Path, store: Option<&'a str>) -> Self {
        Place {
            dir,
            store,
            run_id: None,
        }
    }

    /// The same place, opened only while it holds the loop `run_id`.
    pub fn bound_to(self, run_id: &'a str) -> Self {
        Place {
            run_id: Some(run_id),
            ..self
        }
    }

    /// The store's locator, parsed; `None` for the directory's own file.
    fn locator(self) -> Result<Option<Locator>> {
        store_locator(self.store)
    }
}

/// The locator `store` names (as `--store` takes it), parsed; `None` when
/// it names none (absent or empty): the directory's own file.
pub fn store_locator(store: Option<&str>) -> Result<Option<Locator>> {
    match store {
        Some(text) if !text.is_empty() => Ok(Some(Locator::parse(text)?)),
        _ => Ok(None),
    }
}

impl LoopDir {
    /// Open an existing loop at `place`. Never creates anything.
    pub fn open(place: Place<'_>, access: Access) -> Result<Self> {
        let dir = match place.locator()? {
            Some(locator) => Self::open_at(place.dir, &locator, access)?,
            None => Self::open_own_database(place.dir, access)?,
        };
        if let Some(expected) = place.run_id {
            let found = dir.read()?.ledger.run_id;
            if found != expected {
                return Err(crate::AppError::refused(format!(
                    "the store at {} now holds loop {found}, not loop {expected} this process was started for (was the database replaced?); nothing was read or written: restart the process to serve the loop that is there now",
                    dir.store_location()
                ))
                .into());
            }
        }
        Ok(dir)
    }

    /// Where this loop is, as it was opened: to open it again (a use case
    /// that needs another access mode).
    pub fn place(&self) -> Place<'_> {
        Place::new(&self.root, self.store_text.as_deref())
    }

    /// Open the loop whose state is the directory's own `loopx.sqlite`
    /// (the source of `migrate --from-dir`).
    pub fn open_own_database(dir: &Path, access: Access) -> Result<Self> {
        let root = dir.canonicalize().map_err(|_| missing_loop(dir))?;
        if !root.join(DATABASE).is_file() {
            return Err(missing_loop(dir));
        }
        let store = Locator::sqlite(&root.join(DATABASE)).open(access)?;
        Ok(LoopDir {
            root,
            store,
            store_text: None,
            goal_cache: SnapshotCache::default(),
        })
    }

    /// Open the loop directory `dir` with its state in the store
    /// `locator` names. Never creates anything.
    pub fn open_at(dir: &Path, locator: &Locator, access: Access) -> Result<Self> {
        // The store first: one this build cannot open is the error to
        // report, whatever the directory holds.
        let store = locator.open(access)?;
        let root = dir.canonicalize().map_err(|_| {
            // A second host of a shared store: the loop may well exist,
            // in the store, before its directory does here.
            match store.revision(loopx_core::ledger::STREAM) {
                Ok(revision) if revision > 0 => missing_dir_of_stored_loop(dir, locator),
                _ => missing_loop(dir),
            }
        })?;
        Ok(LoopDir {
            root,
            store,
            store_text: Some(locator.handoff_text()),
            goal_cache: SnapshotCache::default(),
        })
    }

    /// Create the directory, `proof_artifacts/` and the database for `init`.
    /// The store comes first: when it refuses (an orphaned `-wal`, a
    /// locator this build cannot open), nothing else has been created
    /// either.
    pub fn create(place: Place<'_>) -> Result<Self> {
        let dir = place.dir;
        let locator = place.locator()?;
        if let Some(Locator::Postgres { .. }) = &locator {
            // Refused before the directory exists.
            locator.as_ref().expect("matched").open(Access::Create)?;
        }
        fsutil::create_loop_dir(dir)?;
        let root = dir.canonicalize()?;
        let store = match &locator {
            Some(configured) => configured.open(Access::Create)?,
            None => Locator::sqlite(&root.join(DATABASE)).open(Access::Create)?,
        };
        fsutil::create_private_dir(&root.join(PROOF_ARTIFACTS))?;
        Ok(LoopDir {
            root,
            store,
            store_text: locator.as_ref().map(Locator::handoff_text),
            goal_cache: SnapshotCache::default(),
        })
    }

    /// [`create`](Self::create) for a loop built where nobody can see it
    /// yet (`loopx import` builds beside its target and renames it into
    /// place): commits are not synced to disk one by one. The builder
    /// makes the finished database durable with [`Self::sync_built`]
    /// before the loop becomes visible. `dir` must not exist yet (its
    /// parent must). Always the directory's own SQLite file.
    pub(crate) fn create_unsynced(dir: &Path) -> Result<Self> {
        use loopx_store::sqlite::{Durability, SqliteStore};
        use std::os::unix::fs::DirBuilderExt as _;
        // Created here and now, never one that was already there: a
        // directory planted under this name is refused, not built into.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {} ({e})", dir.display()))?;
        let root = dir.canonicalize()?;
        let store =
            SqliteStore::open_with(&root.join(DATABASE), Access::Create, Durability::Unsafe)?;
        fsutil::create_private_dir(&root.join(PROOF_ARTIFACTS))?;
        Ok(LoopDir {
            root,
            store: Box::new(store),
            store_text: None,
            goal_cache: SnapshotCache::default(),
        })
    }

    /// Fold every commit into the database file and sync it and the
    /// directory to disk: what [`Self::create_unsynced`] left undone.
    pub(crate) fn sync_built(&self) -> Result<()> {
        self.store.checkpoint()?;
        std::fs::File::open(self.root.join(DATABASE))?.sync_all()?;
        crate::platform::sync_dir(&self.root.join(PROOF_ARTIFACTS))?;
        Ok(crate::platform::sync_dir(&self.root)?)
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

    /// The store's locator for a process this loop starts, when the store
    /// is not the directory's own `loopx.sqlite` (which the process finds
    /// from the directory alone). Holds a password if the locator does.
    pub fn store_override(&self) -> Option<&str> {
        self.store_text.as_deref()
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

    /// The store itself, for the use cases that work on a whole store
    /// rather than through an owner (moving a loop between stores).
    pub(crate) fn store(&self) -> &(dyn Store + Send) {
        &*self.store
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
            let files = self.files();
            let mut auditor = Auditor::new(&files, now);
            journal_scan::scan(store, STREAM, &mut |row| {
                auditor.entry(row.revision, row.operation_id, row.kind, row.event);
            })?;
            let snapshot = store.load(STREAM)?;
            let ledger = auditor.finish(snapshot.as_ref().map(|s| (s.revision, s.state.as_str())));
            let mut snapshots = vec![snapshot_digest(STREAM, snapshot.as_ref())];
            let mut audit = StoreAudit {
                errors: ledger.errors.clone(),
                warnings: ledger.warnings.clone(),
                streams: vec![(STREAM.to_owned(), ledger.revision)],
                ledger,
                state_digest: Digest::of_bytes(&[]),
            };
            let mut index = FacetAudit::read(store)?;
            for stream in store.streams()? {
                if stream == STREAM {
                    continue;
                }
                let (problems, revision, snapshot) =
                    audit_stream_by_name(store, &stream, &mut index)?;
                snapshots.push(snapshot);
                audit.errors.extend(
                    problems
                        .into_iter()
                        .map(|p| format!("stream {stream}: {p}")),
                );
                audit.streams.push((stream, revision));
            }
            audit.errors.extend(index.finish(store, now)?);
            // In byte order of the names: backends list streams in their
            // own collation, and the digest must not depend on it.
            snapshots.sort();
            audit.state_digest = Digest::of_json(&snapshots);
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
}

/// One stream's audit: its problems, the revision its journal ends at,
/// the state its journal folds to, and its snapshot's digest entry.
/// What refolding one stream found: its problems, its last journal
/// revision, the state its journal folds to and its part of the digest.
struct StreamFindings<S> {
    problems: Vec<String>,
    revision: u64,
    state: Option<S>,
    digest: SnapshotDigest,
}

impl<S> StreamFindings<S> {
    /// The findings without the folded state.
    fn parts(self) -> (Vec<String>, u64, SnapshotDigest) {
        (self.problems, self.revision, self.digest)
    }
}

/// One stream's part of [`StoreAudit::state_digest`]: its name, its
/// snapshot's revision and the digest of its state (`None`: no snapshot).
type SnapshotDigest = (String, Option<(u64, Digest)>);

fn snapshot_digest(stream: &str, snapshot: Option<&loopx_store::Snapshot>) -> SnapshotDigest {
    (
        stream.to_owned(),
        snapshot.map(|s| (s.revision, Digest::of_bytes(s.state.as_bytes()))),
    )
}

/// Refold one stream's journal through `O` and compare it with the stored
/// snapshot.
fn audit_stream<O: loopx_core::operation::Owner>(
    store: &(dyn Store + Send),
    stream: &str,
    what: &'static str,
) -> Result<StreamFindings<O::State>, loopx_store::StoreError>
where
    O::State: Send,
{
    let mut audit = StreamAudit::<O>::new(what);
    let mut last = 0;
    journal_scan::scan(store, stream, &mut |row| {
        last = row.revision;
        audit.entry(row.revision, row.kind, row.event);
    })?;
    let snapshot = store.load(stream)?;
    let (problems, state) = audit.finish(snapshot.as_ref().map(|s| (s.revision, s.state.as_str())));
    Ok(StreamFindings {
        problems,
        revision: last,
        state,
        digest: snapshot_digest(stream, snapshot.as_ref()),
    })
}

/// The audit of any stream but the ledger, through the owner its name
/// says writes it: its problems, its last journal revision and its part of
/// the state digest. A name no owner writes is itself a problem.
fn audit_stream_by_name(
    store: &(dyn Store + Send),
    stream: &str,
    index: &mut FacetAudit,
) -> Result<(Vec<String>, u64, SnapshotDigest), loopx_store::StoreError> {
    use loopx_core::focus::{self, decisions::DecisionOwner, replan::PlanOwner};
    /// The journal folds to a state whose own id is not the stream's.
    fn misnamed(what: &str, id: &str) -> String {
        format!("the journal folds to {what} {id:?}, not the {what} this stream is named for")
    }
    Ok(if let Some(goal_id) = stream.strip_prefix("goal:") {
        let mut f = audit_stream::<GoalOwner>(store, stream, "goal")?;
        if let Some(goal) = f.state.take().filter(|g| g.goal_id != goal_id) {
            f.problems.push(misnamed("goal", &goal.goal_id));
        }
        f.parts()
    } else if frontier::is_todo_stream(stream) {
        let mut f = audit_stream::<TodoOwner>(store, stream, "todo")?;
        f.problems.extend(index.check(stream, f.state.as_ref()));
        if let Some(todo) = f
            .state
            .take()
            .filter(|t| !stream.ends_with(&format!("/{}", t.id)))
        {
            f.problems.push(misnamed("todo", &todo.id));
        }
        f.parts()
    } else {
        match stream {
            driver::STREAM => audit_stream::<DriverOwner>(store, stream, "driver state")?.parts(),
            loopx_core::supervisor::STREAM => audit_stream::<
                loopx_core::supervisor::SupervisorOwner,
            >(store, stream, "supervisor record")?
            .parts(),
            focus::CONTRACT_STREAM => {
                audit_stream::<focus::ContractOwner>(store, stream, "goal contract")?.parts()
            }
            focus::REGISTRY_STREAM => {
                audit_stream::<focus::RegistryOwner>(store, stream, "approach registry")?.parts()
            }
            focus::PLAN_STREAM => audit_stream::<PlanOwner>(store, stream, "current plan")?.parts(),
            focus::COMPUTE_PIN_STREAM => {
                audit_stream::<focus::ComputePinOwner>(store, stream, "compute pin")?.parts()
            }
            focus::DECISIONS_STREAM => {
                audit_stream::<DecisionOwner>(store, stream, "direction decisions")?.parts()
            }
            focus::candidate::CANDIDATE_STREAM => audit_stream::<focus::candidate::CandidateOwner>(
                store,
                stream,
                "staged candidates",
            )?
            .parts(),
            loopx_core::formal::STREAM => audit_stream::<loopx_core::formal::FormalOwner>(
                store,
                stream,
                "formal standing orders",
            )?
            .parts(),
            loopx_core::panel::attempts::ATTEMPTS_STREAM => audit_stream::<
                loopx_core::panel::attempts::AttemptOwner,
            >(
                store, stream, "panel attempts"
            )?
            .parts(),
            _ => (
                vec![
                    "no loopx owner writes a stream of this name: it was not written by loopx"
                        .to_owned(),
                ],
                store.revision(stream)?,
                snapshot_digest(stream, store.load(stream)?.as_ref()),
            ),
        }
    })
}

/// The store's index (its facets) against the todos it indexes: each
/// facet must be what the todo's owner says of the todo its journal folds
/// to (checked as the audit refolds each todo stream), and each family's
/// counts must count its facets. A todo stream with no facet (last
/// written before facets existed) is no problem: should-run then finds
/// its family's index incomplete and reads the todos instead.
struct FacetAudit {
    /// The facets not yet checked against a todo, by stream.
    unchecked: std::collections::BTreeMap<String, loopx_core::operation::Facet>,
    /// How many facets each family has per class.
    counted: std::collections::BTreeMap<String, std::collections::BTreeMap<u8, u64>>,
}

impl FacetAudit {
    fn read(store: &(dyn Store + Send)) -> Result<FacetAudit, loopx_store::StoreError> {
        let mut audit = FacetAudit {
            unchecked: Default::default(),
            counted: Default::default(),
        };
        store.visit_facets(&mut |stream, facet| {
            *audit
                .counted
                .entry(facet.family.clone())
                .or_default()
                .entry(facet.class)
                .or_default() += 1;
            audit.unchecked.insert(stream.to_owned(), facet);
            Ok(())
        })?;
        Ok(audit)
    }

    /// The problem with todo stream `stream`'s facet, if it has one, given
    /// the todo its journal folds to.
    fn check(
        &mut self,
        stream: &str,
        todo: Option<&loopx_core::goal::todo::Todo>,
    ) -> Option<String> {
        use loopx_core::operation::Owner as _;
        let kept = self.unchecked.remove(stream)?;
        let expected = todo.and_then(|todo| TodoOwner::facet(stream, todo));
        (expected.as_ref() != Some(&kept)).then(|| mismatched_facet(&kept, expected.as_ref()))
    }

    /// The facets no todo stream has, and the counts that disagree with
    /// the facets.
    fn finish(
        self,
        store: &(dyn Store + Send),
        now: Timestamp,
    ) -> Result<Vec<String>, loopx_store::StoreError> {
        let mut problems: Vec<String> = self
            .unchecked
            .iter()
            .map(|(stream, kept)| format!("stream {stream}: {}", mismatched_facet(kept, None)))
            .collect();
        for (family, classes) in self.counted {
            let query = loopx_store::FacetQuery {
                family: &family,
                now,
                free_classes: &[],
                holder: None,
            };
            let kept: std::collections::BTreeMap<u8, u64> = store
                .read_facets(&query)?
                .map(|reading| reading.classes.iter().map(|c| (c.class, c.total)).collect())
                .unwrap_or_default();
            if kept != classes {
                problems.push(format!(
                    "the store's counts of {family} ({kept:?} by class) are not its index rows' ({classes:?}): should-run would count the frontier wrong; restore the loop from a backup"
                ));
            }
        }
        Ok(problems)
    }
}

fn mismatched_facet(
    kept: &loopx_core::operation::Facet,
    expected: Option<&loopx_core::operation::Facet>,
) -> String {
    let describe = |facet: Option<&loopx_core::operation::Facet>| match facet {
        None => "none".to_owned(),
        Some(f) => format!(
            "position {}, class {}, due {}, holder {}",
            f.position,
            f.class,
            f.due.map_or("none".to_owned(), |d| d.to_string()),
            f.holder.as_deref().unwrap_or("none")
        ),
    };
    format!(
        "the store's index row ({}) is not what its todo says ({}): should-run would decide on it; restore the loop from a backup",
        describe(Some(kept)),
        describe(expected)
    )
}

/// A view that could not be refreshed after a commit: never an error (the
/// commit stands whatever happens here; a command that failed now would
/// invite a retry that duplicates it), but a warning for the receipt.
pub(crate) fn view_warning(view: &str, error: anyhow::Error) -> String {
    format!(
        "the operation is committed, but {view} could not be refreshed ({error:#}); it is a derived view: fix the cause and the next write to this loop rewrites it"
    )
}

/// Where a server a client started finds the loop `dir` names. Clients
/// (Claude Code, Codex, OpenCode) start `loopx mcp` in the session's
/// working directory, which may be below the project root: a relative
/// `dir` that is not there is looked for under the client's project root
/// (`project`, Claude Code's `CLAUDE_PROJECT_DIR`), then in the nearest
/// directory above `cwd` that has it. An absolute `dir`, or one that is
/// there, is taken as it is; so is one found nowhere (the open then says
/// it is missing, naming it).
pub fn locate_for_session(dir: &Path, project: Option<&Path>, cwd: &Path) -> PathBuf {
    if dir.is_absolute() || cwd.join(dir).join(DATABASE).is_file() {
        return dir.to_owned();
    }
    let holds_loop = |root: &Path| root.join(dir).join(DATABASE).is_file();
    project
        .filter(|root| holds_loop(root))
        .or_else(|| cwd.ancestors().skip(1).find(|root| holds_loop(root)))
        .map_or_else(|| dir.to_owned(), |root| root.join(dir))
}

fn missing_loop(dir: &Path) -> anyhow::Error {
    let create = format!(
        "create one with `loopx init --dir {} --goal ... --success-criteria ...`",
        dir.display()
    );
    let way_out = match nearest_loop(dir) {
        Some(near) => format!("did you mean --dir {}? Or {create}", near.display()),
        None => create,
    };
    crate::AppError::not_found(format!(
        "no loop at {}: there is no {DATABASE} there; {way_out}",
        dir.display()
    ))
    .into()
}

fn missing_dir_of_stored_loop(dir: &Path, locator: &Locator) -> anyhow::Error {
    crate::AppError::not_found(format!(
        "the loop directory {} does not exist on this host, but the store ({}) holds its loop: the loop is read from the store, and its directory keeps this host's logs, proof artifacts and sentinel files; create it with `mkdir -p {}` (not `loopx init`: the loop exists)",
        dir.display(),
        locator,
        dir.display()
    ))
    .into()
}

/// The existing loop directory whose name is nearest to `dir`'s among
/// its would-be siblings (a typo's likely target), if one is close.
fn nearest_loop(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.to_str()?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Bounded: a typo in a huge directory costs at most this many names.
    const LOOKED_AT: usize = 4096;
    std::fs::read_dir(parent)
        .ok()?
        .take(LOOKED_AT)
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let candidate = entry.file_name().into_string().ok()?;
            let distance = loopx_core::words::edit_distance(name, &candidate);
            (distance <= name.chars().count().div_ceil(3).max(2)
                && entry.path().join(DATABASE).is_file())
            .then(|| (distance, parent.join(candidate)))
        })
        .min()
        .map(|(_, path)| path)
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
        self.files().proof_artifact(evidence_id)
    }

    fn regular_file(&self, path: &LoopPath) -> Result<(), FileProblem> {
        self.files().regular_file(path)
    }
}

/// The loop directory's evidence files without its store, which a thread
/// of its own may read them through (the audit folds on one; see
/// [`journal_scan`]). The rules are [`LoopDir`]'s, which reads through it.
#[derive(Clone, Copy)]
pub struct LoopFiles<'a> {
    root: &'a Path,
}

impl LoopDir {
    /// This loop's evidence files, readable from any thread.
    pub fn files(&self) -> LoopFiles<'_> {
        LoopFiles { root: &self.root }
    }
}

impl EvidenceFiles for LoopFiles<'_> {
    fn proof_artifact(&self, evidence_id: &str) -> Result<Vec<u8>, FileProblem> {
        // The owner checked the id's grammar, so this always parses; if it
        // did not, there is no such file to read.
        let path = LoopPath::parse(&format!("{PROOF_ARTIFACTS}/{evidence_id}.json"))
            .map_err(|_| FileProblem::Missing)?;
        fsutil::read_confined(self.root, &path, PROOF_ARTIFACT_BYTES)
    }

    fn regular_file(&self, path: &LoopPath) -> Result<(), FileProblem> {
        fsutil::open_confined(self.root, path).map(drop)
    }
}
