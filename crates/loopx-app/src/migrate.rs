//! The `migrate` use cases: bring a shared store's schema to this build's,
//! and move a loop directory's SQLite loop into a PostgreSQL store.
//!
//! Owns when a migration runs explicitly (a PostgreSQL store: every other
//! command refuses a schema that is not exactly this build's, so that hosts
//! running different loopx versions never write through a schema one of
//! them does not know) and the view it returns. How migrations are applied
//! is the backend's ([`loopx_store::postgres::PostgresStore::migrate`]); a
//! SQLite loop needs no command, its next writer migrates it.
//!
//! Moving a loop ([`move_from_dir`]) owns the order of the steps and their
//! verification: the source must validate, the copy is one transaction
//! ([`loopx_store::postgres::PostgresStore::import`], which owns how rows are copied and the
//! refusal of a store that already holds a loop), and the copy is then
//! audited as `validate` audits it and compared with the source: the same
//! streams at the same revisions, the same state digest, and the same
//! journal digest (every entry with its operation id, request digest,
//! receipt and time). The source is opened read-only and never changed.
//!
//! Why a whole-store copy and not a replay of the journal through
//! [`loopx_store::Store::commit`]: a commit needs the snapshot at each
//! revision, which the journal does not hold (the owners would have to
//! refold every stream), each commit would be its own transaction (a
//! crash would leave half a loop), and the copy must keep every receipt
//! and commit time as it was, which a replay would re-stamp.

use crate::ledger::StreamChecked;
use crate::loop_dir::{store_locator, LoopDir, StoreAudit, DRIVER_LOCK};
use crate::{clock, AppError, ErrorClass};
use anyhow::{bail, Result};
use loopx_core::digest::Digest;
use loopx_core::path::LoopPath;
use loopx_store::sqlite::Access;
use loopx_store::{Store, StoreError};
use serde::Serialize;
use std::path::Path;

/// What `migrate` did.
#[derive(Debug, Serialize)]
pub struct MigrateView {
    pub status: &'static str,
    /// The store, without its password.
    pub store: String,
    /// The schema version found before, and the one it holds now.
    pub from_version: u32,
    pub to_version: u32,
}

/// Apply every migration this build has to the store `store` names.
pub fn migrate(store: Option<&str>) -> Result<MigrateView> {
    let Some(locator) = store_locator(store)? else {
        bail!("migrate applies a shared store's schema: name the store (postgres://…); a loop directory's SQLite database is migrated by its next writer");
    };
    let Some(store) = locator.open_postgres() else {
        bail!("{locator} is a SQLite database: its next writer migrates it; migrate applies a PostgreSQL store's schema");
    };
    let (from_version, to_version) = store?.migrate()?;
    Ok(MigrateView {
        status: if from_version == to_version {
            "up_to_date"
        } else {
            "migrated"
        },
        store: locator.to_string(),
        from_version,
        to_version,
    })
}

/// What `migrate --from-dir` did: the loop it moved and the checks the
/// copy passed (equal on both sides, or the use case fails).
#[derive(Debug, Serialize)]
pub struct MoveView {
    pub status: &'static str,
    /// The loop directory moved from; its `loopx.sqlite` is unchanged.
    pub from_dir: String,
    /// The store moved into, without its password.
    pub store: String,
    pub schema_version: u32,
    pub iterations: u64,
    pub streams: Vec<StreamChecked>,
    pub journal_entries: u64,
    /// The digest `validate --json` reports as `checked.state_digest`.
    pub state_digest: String,
    /// A digest chained over every journal entry of every stream, receipts
    /// included.
    pub journal_digest: String,
}

/// Move the SQLite loop of `from` into the (empty) PostgreSQL store that
/// `store` names, and verify the copy.
pub fn move_from_dir(from: &Path, store: Option<&str>) -> Result<MoveView> {
    let Some(locator) = store_locator(store)? else {
        bail!(AppError::refused(
            "migrate --from-dir moves a loop into a PostgreSQL store: name it with --store postgres://… (or LOOPX_STORE)"
        ));
    };
    let Some(target) = locator.open_postgres() else {
        bail!(AppError::refused(format!(
            "{locator} is a SQLite file; migrate --from-dir moves a loop into a PostgreSQL store (postgres://…)"
        )));
    };
    let source = LoopDir::open_own_database(from, Access::ReadOnly)?;
    refuse_a_running_driver(&source)?;
    let audit = source.audit(clock::now())?;
    if !audit.is_valid() {
        bail!(AppError::refused(format!(
            "the loop at {} does not validate ({}); `loopx validate --dir {}` lists every problem: repair it first; nothing was written",
            source.display(),
            audit.errors.join("; "),
            source.display()
        )));
    }
    let target = target?;
    // A database without the loopx schema holds no loop: give it the
    // schema. One with an older schema is refused by `import` with the
    // command that migrates it.
    if target.schema_version()? == 0 {
        target.migrate()?;
    }
    let imported = target.import(source.store())?;

    // Committed from here on: a failure must say so.
    let committed = |problem: String| -> anyhow::Error {
        AppError::new(
            ErrorClass::Internal,
            format!(
                "the loop was copied into {locator} ({} journal entries committed), but {problem}; the source {} is unchanged: keep using it, and drop that database (dropdb) before moving again",
                imported.journal_entries,
                source.display()
            ),
        )
        .into()
    };
    let copy = LoopDir::open_at(from, &locator, Access::ReadOnly)
        .map_err(|e| committed(format!("it cannot be reopened to verify it ({e:#})")))?;
    let verify = || -> Result<(Side, Side)> {
        let copied = Side::of(&copy)?;
        // The source again, after the copy: a writer that committed to it
        // meanwhile shows up as a difference instead of being lost quietly.
        let original = Side::of(&source)?;
        Ok((copied, original))
    };
    let (copied, original) =
        verify().map_err(|e| committed(format!("verifying the copy failed ({e:#})")))?;
    if !copied.audit.is_valid() {
        return Err(committed(format!(
            "the copy does not validate: {}",
            copied.audit.errors.join("; ")
        )));
    }
    if copied != original {
        return Err(committed(format!(
            "the copy differs from the source (copy: {}; source: {}): was the source written to during the move? Stop every writer of it first",
            copied.describe(),
            original.describe()
        )));
    }
    Ok(MoveView {
        status: "moved",
        from_dir: source.display(),
        store: locator.to_string(),
        schema_version: loopx_store::postgres::SCHEMA_VERSION,
        iterations: copied.audit.ledger.iterations,
        streams: copied
            .streams
            .iter()
            .map(|(stream, revision)| StreamChecked {
                stream: stream.clone(),
                revision: *revision,
            })
            .collect(),
        journal_entries: copied.entries,
        state_digest: copied.audit.state_digest.to_string(),
        journal_digest: copied.journal.to_string(),
    })
}

/// One side of a move as the verification compares it: its audit, its
/// streams in byte order of their names, and its journal's digest.
struct Side {
    audit: StoreAudit,
    streams: Vec<(String, u64)>,
    entries: u64,
    journal: Digest,
}

impl Side {
    fn of(dir: &LoopDir) -> Result<Self> {
        let audit = dir.audit(clock::now())?;
        let (entries, journal) = journal_digest(dir.store())?;
        let mut streams = audit.streams.clone();
        streams.sort();
        Ok(Side {
            audit,
            streams,
            entries,
            journal,
        })
    }

    fn describe(&self) -> String {
        format!(
            "streams {:?}, state {}, {} journal entries {}",
            self.streams, self.audit.state_digest, self.entries, self.journal
        )
    }
}

/// Equal: the same streams at the same revisions, the same snapshots and
/// the same journal, receipts included.
impl PartialEq for Side {
    fn eq(&self, other: &Self) -> bool {
        self.streams == other.streams
            && self.audit.state_digest == other.audit.state_digest
            && self.entries == other.entries
            && self.journal == other.journal
    }
}

/// A driver writing to the source while it is copied would lose what it
/// commits after the copy: refuse while one holds the loop's driver lock.
/// The lock file is only opened, never created (the source stays as it
/// is), and opened as any file of the loop is: a FIFO or a symlink planted
/// in its place is not a lock anyone holds.
fn refuse_a_running_driver(source: &LoopDir) -> Result<()> {
    let name = LoopPath::parse(DRIVER_LOCK).expect("the lock's name is a plain file name");
    let Ok(lock) = crate::fsutil::open_confined(source.root(), &name) else {
        return Ok(());
    };
    if let Err(std::fs::TryLockError::WouldBlock) = lock.try_lock_shared() {
        bail!(AppError::refused(format!(
            "a driver is running the loop at {}: stop it (touch {}/STOP_REQUESTED and wait for it to exit) and move the loop then; nothing was written",
            source.display(),
            source.display()
        )));
    }
    Ok(())
}

/// How many journal entries `store` holds, and one digest chained over all
/// of them (streams in byte order of their names, entries in revision
/// order, every field including the receipt), read in one consistent
/// snapshot.
fn journal_digest(store: &dyn Store) -> Result<(u64, Digest), StoreError> {
    let mut count = 0u64;
    let mut chain = Digest::of_bytes(&[]);
    store.read_consistent(&mut || {
        count = 0;
        chain = Digest::of_bytes(&[]);
        let mut streams = store.streams()?;
        streams.sort();
        for stream in &streams {
            store.journal(stream, 0, &mut |entry| {
                count += 1;
                chain = Digest::of_json(&(
                    chain.as_str(),
                    stream,
                    entry.revision,
                    &entry.operation_id,
                    &entry.request_digest,
                    &entry.kind,
                    &entry.event,
                    &entry.receipt,
                    &entry.committed_at,
                ));
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok((count, chain))
}
