//! The embedded default backend: one SQLite file in the loop directory.
//!
//! WAL mode with `synchronous=FULL`, so a commit that returned is on disk and
//! readers never block the writer. Commits run in `BEGIN IMMEDIATE`, which
//! serializes writers across processes; the revision check still guards
//! against a writer that read before another one committed.
//!
//! Migrations are the numbered files in `migrations/` beside this file, tracked by
//! `PRAGMA user_version`. Only a writable open migrates; a read-only open
//! reads a schema from [`READABLE_FROM`] on as it is and refuses an older or
//! newer one with a clear error, touching nothing.
//!
//! Files: the database and its `-wal` and `-shm` companions are the loop
//! owner's alone (0600). A writer does NOT checkpoint on close (SQLite's
//! default would cost a WAL rewrite and extra fsyncs on every command):
//! recent commits live in the `-wal` until it grows past
//! [`WAL_FOLD_BYTES`] (the committing writer then folds it in and empties
//! it, see [`fold_long_log`]), an explicit [`Store::checkpoint`] (the driver, at the end of a turn) or a
//! backup folds them in. So the database is the three files together, and
//! a complete single-file copy is [`Store::backup_to`]. The `-wal` and the
//! `-shm` are kept in place ("persistent WAL"): a reader then finds every
//! file it needs and creates none, which is what lets `status` and
//! `validate` run in a read-only directory, or as another user, without
//! changing a byte of the loop directory.

use crate::{
    due_micros, failpoint, from_due_micros, now_micros, position_from_sql, position_to_sql,
    ClassCount, Commit, CountDeltas, Facet, FacetQuery, FacetReading, Fence, JournalEntry,
    JournalRow, Snapshot, Store, StoreError, StoredReceipt, Stream, Window,
};
use rusqlite::config::DbConfig;
use rusqlite::{
    ffi, params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior,
};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_journal.sql"),
    include_str!("migrations/0002_todo_streams.sql"),
    include_str!("migrations/0003_facets.sql"),
];

/// The first schema with facets: a reader of an older database (read as
/// it is) finds none, and its callers read the streams themselves.
const FACETS_FROM: u32 = 3;

/// The oldest schema a reader of this build reads as it is, without a
/// migration: every migration after it changes nothing a reader relies on
/// (see each file). An older database must first be migrated by a writer.
const READABLE_FROM: u32 = 1;

/// How large the -wal may grow before the writer that just committed folds
/// it into the main file and empties it (see [`fold_long_log`]). Every
/// process that opens the loop reads the whole log first (about 3 µs per
/// 4 KiB frame here), and a fold costs one fsync of the main file: 256 KiB
/// is about 16 appends between folds, about 0.2 ms of log to read on
/// average.
pub const WAL_FOLD_BYTES: u64 = 256 * 1024;

/// How long a writer waits for another writer's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// How a database is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Create the file if it does not exist (only `init` does this).
    Create,
    /// Read and write an existing database.
    ReadWrite,
    /// Read an existing database; never writes a byte.
    ReadOnly,
}

/// How hard a commit insists on reaching the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a returned commit survives power loss. The default.
    Full,
    /// `synchronous=OFF`: for seeding benchmark fixtures only.
    Unsafe,
}

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The schema has the facet tables (from [`FACETS_FROM`] on), as read
    /// at open: a writer has migrated to this build's schema, a reader may
    /// read an older one as it is.
    keeps_facets: bool,
}

impl SqliteStore {
    pub fn open(path: &Path, access: Access) -> Result<Self, StoreError> {
        Self::open_with(path, access, Durability::Full)
    }

    pub fn open_with(
        path: &Path,
        access: Access,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        let display = path.display().to_string();
        if access == Access::Create && path.symlink_metadata().is_err() {
            refuse_orphaned_log(path)?;
            create_private(path)?;
        } else if !path.is_file() {
            return Err(StoreError::Missing { path: display });
        } else if access != Access::ReadOnly && path.metadata().is_ok_and(|m| m.len() == 0) {
            // An empty database file (a botched restore, a truncation) is
            // as good as none: SQLite would discard the log beside it.
            refuse_orphaned_log(path)?;
        }
        let mut store = match access {
            Access::ReadOnly => Self::open_reader(path)?,
            Access::Create | Access::ReadWrite => Self::connect(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?,
        };
        let version = store.user_version()?;
        match access {
            Access::ReadOnly => store.check_version(version)?,
            Access::Create | Access::ReadWrite => {
                if version > SCHEMA_VERSION {
                    store.check_version(version)?;
                }
                let sync = match durability {
                    Durability::Full => "FULL",
                    Durability::Unsafe => "OFF",
                };
                // SQLite's own auto-checkpoint is off: it never empties the
                // log here (see fold_long_log), so a writer folds the log
                // itself after its commit. journal_size_limit=0: a log that
                // SQLite starts over is truncated to zero bytes too.
                store
                    .conn
                    .execute_batch(&format!(
                        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA journal_size_limit=0; PRAGMA wal_autocheckpoint=0;"
                    ))
                    .map_err(|e| classify(&display, e))?;
                // No checkpoint on close: that rewrote the log into the
                // main file and fsynced both on every command exit, the
                // largest cost of a write after the commit itself. Commits
                // stay in the -wal (durable: it is fsynced at commit) until
                // a checkpoint; see the module comment.
                store
                    .conn
                    .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
                    .map_err(|e| classify(&display, e))?;
                persist_wal(&store.conn).map_err(|e| classify(&display, e))?;
                store.migrate(version)?;
                restrict_files(path)?;
            }
        }
        store.keeps_facets = match access {
            Access::ReadOnly => version >= FACETS_FROM,
            Access::Create | Access::ReadWrite => true,
        };
        Ok(store)
    }

    fn connect(path: &Path, flags: OpenFlags) -> Result<Self, StoreError> {
        let display = path.display().to_string();
        let conn = Connection::open_with_flags(path, flags).map_err(|e| classify(&display, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| classify(&display, e))?;
        Ok(SqliteStore {
            conn,
            path: path.to_owned(),
            keeps_facets: false,
        })
    }

    /// A reader that creates no file. When the `-wal` and `-shm` exist (every
    /// loop written by this loopx), SQLite reads through them, even when it
    /// may not write them. A database without them (last written by an
    /// older loopx) in a directory this process cannot write is read as an
    /// immutable file: with no `-wal`, no writer is mid-commit, and one that
    /// starts later writes only to its own `-wal` until its checkpoint on
    /// close. That residue is why this is a fallback for old loops only and
    /// never the way a writable directory is read.
    fn open_reader(path: &Path) -> Result<Self, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let attempt = |target: &Path, flags: OpenFlags| -> rusqlite::Result<Connection> {
            let conn = Connection::open_with_flags(target, flags)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // The first read is what opens the -wal: fail here, not later.
            conn.query_row("PRAGMA user_version", [], |_| Ok(()))?;
            Ok(conn)
        };
        let conn = match attempt(path, flags) {
            Err(error)
                if matches!(
                    error.sqlite_error_code(),
                    Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
                ) && companion(path, "-wal").symlink_metadata().is_err() =>
            {
                attempt(
                    Path::new(&immutable_uri(path)),
                    flags | OpenFlags::SQLITE_OPEN_URI,
                )
            }
            other => other,
        }
        .map_err(|e| classify(&path.display().to_string(), e))?;
        Ok(SqliteStore {
            conn,
            path: path.to_owned(),
            keeps_facets: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn display(&self) -> String {
        self.path.display().to_string()
    }

    fn user_version(&self) -> Result<u32, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|e| classify(&self.display(), e))
    }

    fn check_version(&self, found: u32) -> Result<(), StoreError> {
        use std::cmp::Ordering::*;
        match found.cmp(&SCHEMA_VERSION) {
            Equal => Ok(()),
            Greater => Err(StoreError::TooNew {
                path: self.display(),
                found,
                known: SCHEMA_VERSION,
            }),
            Less if found == 0 => Err(StoreError::Corrupt {
                path: self.display(),
                reason: "not a loopx database (no schema)".into(),
            }),
            Less if found >= READABLE_FROM => Ok(()),
            Less => Err(StoreError::TooOld {
                path: self.display(),
                found,
                known: SCHEMA_VERSION,
            }),
        }
    }

    fn migrate(&self, from: u32) -> Result<(), StoreError> {
        if from == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| classify(&self.display(), e))?;
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            tx.execute_batch(sql)
                .map_err(|e| classify(&self.display(), e))?;
            tx.pragma_update(None, "user_version", index as u32 + 1)
                .map_err(|e| classify(&self.display(), e))?;
        }
        tx.commit().map_err(|e| classify(&self.display(), e))
    }

    /// Cached: a write asks it once in its transaction and once for each
    /// stream the views look at after it.
    fn current_revision(conn: &Connection, stream: &Stream) -> rusqlite::Result<u64> {
        conn.prepare_cached("SELECT revision FROM snapshots WHERE stream = ?1")?
            .query_row([stream], |row| row.get::<_, i64>(0))
            .optional()
            .map(|revision| revision.map_or(0, from_sql_revision))
    }

    /// One commit's writes inside an open transaction: the revision check,
    /// the operation-id check, the journal row and the snapshot.
    fn write(
        conn: &Connection,
        commit: &Commit<'_>,
        counts: &mut CountDeltas,
        display: &str,
    ) -> Result<u64, StoreError> {
        let fail = |e| classify(display, e);
        let actual = Self::current_revision(conn, commit.stream).map_err(fail)?;
        if actual != commit.expected_revision {
            return Err(StoreError::StaleRevision {
                stream: commit.stream.to_owned(),
                expected: commit.expected_revision,
                actual,
            });
        }
        let taken: bool = conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM journal WHERE stream = ?1 AND operation_id = ?2)",
                [commit.stream, commit.operation_id],
                |row| row.get(0),
            )
            .map_err(fail)?;
        if taken {
            return Err(StoreError::DuplicateOperation {
                stream: commit.stream.to_owned(),
                operation_id: commit.operation_id.to_owned(),
            });
        }
        let revision = actual + 1;
        failpoint::reached("sqlite.commit.before_journal");
        conn.prepare_cached(
            "INSERT INTO journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                commit.stream,
                to_sql_revision(revision),
                commit.operation_id,
                commit.request_digest,
                commit.kind,
                commit.event,
                commit.receipt,
                commit.committed_at
            ])
        })
        .map_err(fail)?;
        failpoint::reached("sqlite.commit.before_snapshot");
        conn.prepare_cached(
            "INSERT INTO snapshots (stream, revision, state, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision,
                 state = excluded.state, updated_at = excluded.updated_at",
        )
        .and_then(|mut upsert| {
            upsert.execute(params![
                commit.stream,
                to_sql_revision(revision),
                commit.state,
                commit.committed_at
            ])
        })
        .map_err(fail)?;
        if let Some(facet) = commit.facet {
            Self::write_facet(conn, commit, facet, counts).map_err(fail)?;
        }
        Ok(revision)
    }

    /// The facet of the snapshot just written, and what it moves in its
    /// family's counts. A new stream has no facet to replace.
    fn write_facet(
        conn: &Connection,
        commit: &Commit<'_>,
        facet: &Facet,
        counts: &mut CountDeltas,
    ) -> rusqlite::Result<()> {
        let old: Option<(String, u8)> = match commit.expected_revision {
            0 => None,
            _ => conn
                .prepare_cached("SELECT family, class FROM facets WHERE stream = ?1")?
                .query_row([commit.stream], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()?,
        };
        conn.prepare_cached(
            "INSERT INTO facets (stream, family, position, class, due, holder)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (stream) DO UPDATE SET family = excluded.family,
                 position = excluded.position, class = excluded.class,
                 due = excluded.due, holder = excluded.holder",
        )?
        .execute(params![
            commit.stream,
            facet.family,
            position_to_sql(facet.position),
            facet.class,
            facet.due.map(due_micros),
            facet.holder
        ])?;
        counts.moved(
            commit.stream,
            old.as_ref()
                .map(|(family, class)| (family.as_str(), *class)),
            facet,
        );
        Ok(())
    }

    /// Apply a transaction's count changes, before it commits.
    fn write_counts(conn: &Connection, counts: &CountDeltas) -> rusqlite::Result<()> {
        for (family, shard, class, delta) in counts.changes() {
            // What a stream moves from has its row; an INSERT of a
            // negative count would fail its CHECK before its ON CONFLICT.
            let sql = match delta > 0 {
                true => {
                    "INSERT INTO facet_counts (family, shard, class, n) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (family, shard, class) DO UPDATE SET n = n + excluded.n"
                }
                false => {
                    "UPDATE facet_counts SET n = n + ?4
                     WHERE family = ?1 AND shard = ?2 AND class = ?3"
                }
            };
            conn.prepare_cached(sql)?
                .execute(params![family, shard, class, delta])?;
        }
        Ok(())
    }
}

impl Store for SqliteStore {
    fn revision(&self, stream: &Stream) -> Result<u64, StoreError> {
        Self::current_revision(&self.conn, stream).map_err(|e| classify(&self.display(), e))
    }

    fn load(&self, stream: &Stream) -> Result<Option<Snapshot>, StoreError> {
        self.conn
            .query_row(
                "SELECT revision, state FROM snapshots WHERE stream = ?1",
                [stream],
                |row| {
                    Ok(Snapshot {
                        revision: from_sql_revision(row.get(0)?),
                        state: row.get(1)?,
                    })
                },
            )
            .optional()
            .map_err(|e| classify(&self.display(), e))
    }

    fn load_prefixed(&self, prefix: &str) -> Result<Vec<(String, Snapshot)>, StoreError> {
        let mut loaded = Vec::new();
        self.visit_prefixed(prefix, &mut |stream, revision, state| {
            let snapshot = Snapshot {
                revision,
                state: state.to_owned(),
            };
            loaded.push((stream.to_owned(), snapshot));
        })?;
        Ok(loaded)
    }

    fn visit_prefixed(
        &self,
        prefix: &str,
        visit: &mut dyn FnMut(&str, u64, &str),
    ) -> Result<(), StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        fn text<'r>(row: &'r rusqlite::Row<'_>, column: usize) -> Result<&'r str, rusqlite::Error> {
            row.get_ref(column)?.as_str().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    column,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })
        }
        // substr compares the exact characters: LIKE would read `_` and `%`
        // in the prefix as wildcards.
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT stream, revision, state FROM snapshots
                 WHERE substr(stream, 1, length(?1)) = ?1 ORDER BY stream",
            )
            .map_err(fail)?;
        let mut rows = statement.query([prefix]).map_err(fail)?;
        while let Some(row) = rows.next().map_err(fail)? {
            let revision = from_sql_revision(row.get(1).map_err(fail)?);
            let stream = text(row, 0).map_err(fail)?;
            let state = text(row, 2).map_err(fail)?;
            visit(stream, revision, state);
        }
        Ok(())
    }

    fn read_facets(&self, query: &FacetQuery<'_>) -> Result<Option<FacetReading>, StoreError> {
        if !self.keeps_facets {
            return Ok(None);
        }
        let display = self.display();
        let fail = |e| classify(&display, e);
        // One read transaction: the counts and the rows are of one state
        // (inside a consistent read, that read's).
        let own_transaction = match self.conn.is_autocommit() {
            true => Some(self.conn.unchecked_transaction().map_err(fail)?),
            false => None,
        };
        let conn = &self.conn;
        let now = now_micros(query.now);
        let mut reading = FacetReading::default();
        let mut totals = conn
            .prepare_cached(
                "SELECT class, SUM(n) FROM facet_counts WHERE family = ?1
                 GROUP BY class HAVING SUM(n) > 0 ORDER BY class",
            )
            .map_err(fail)?;
        let mut rows = totals.query([query.family]).map_err(fail)?;
        while let Some(row) = rows.next().map_err(fail)? {
            reading.classes.push(ClassCount {
                class: row.get(0).map_err(fail)?,
                total: row.get::<_, i64>(1).map_err(fail)?.max(0) as u64,
                pending: 0,
                first_due: None,
            });
        }
        let mut pending = conn
            .prepare_cached(
                "SELECT class, COUNT(*), MIN(due) FROM facets
                 WHERE family = ?1 AND due > ?2 GROUP BY class",
            )
            .map_err(fail)?;
        let mut rows = pending.query(params![query.family, now]).map_err(fail)?;
        while let Some(row) = rows.next().map_err(fail)? {
            let class: u8 = row.get(0).map_err(fail)?;
            let count = reading.class_mut(class);
            count.pending = row.get::<_, i64>(1).map_err(fail)? as u64;
            count.first_due = Some(from_due_micros(row.get(2).map_err(fail)?)?);
        }
        let mut first = None::<(i64, String)>;
        for class in query.free_classes {
            let found: Option<(i64, String)> = conn
                .prepare_cached(
                    "SELECT position, stream FROM facets
                     WHERE family = ?1 AND class = ?2 AND (due IS NULL OR due <= ?3)
                     ORDER BY position LIMIT 1",
                )
                .and_then(|mut statement| {
                    statement
                        .query_row(params![query.family, class, now], |row| {
                            Ok((row.get(0)?, row.get(1)?))
                        })
                        .optional()
                })
                .map_err(fail)?;
            first = first.into_iter().chain(found).min();
        }
        reading.first_free = first.map(|(_, stream)| stream);
        if let Some(holder) = query.holder {
            reading.first_held = conn
                .prepare_cached(
                    "SELECT stream FROM facets
                     WHERE family = ?1 AND due > ?3 AND holder = ?2
                     ORDER BY position LIMIT 1",
                )
                .and_then(|mut statement| {
                    statement
                        .query_row(params![query.family, holder, now], |row| row.get(0))
                        .optional()
                })
                .map_err(fail)?;
        }
        drop(own_transaction);
        Ok(Some(reading))
    }

    fn visit_facets(
        &self,
        visit: &mut dyn FnMut(&str, Facet) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if !self.keeps_facets {
            return Ok(());
        }
        let display = self.display();
        let fail = |e| classify(&display, e);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT stream, family, position, class, due, holder FROM facets ORDER BY stream",
            )
            .map_err(fail)?;
        let mut rows = statement.query([]).map_err(fail)?;
        while let Some(row) = rows.next().map_err(fail)? {
            let stream: String = row.get(0).map_err(fail)?;
            let due: Option<i64> = row.get(4).map_err(fail)?;
            let facet = Facet {
                family: row.get(1).map_err(fail)?,
                position: position_from_sql(row.get(2).map_err(fail)?),
                class: row.get(3).map_err(fail)?,
                due: due.map(from_due_micros).transpose()?,
                holder: row.get(5).map_err(fail)?,
            };
            visit(&stream, facet)?;
        }
        Ok(())
    }

    fn receipt(
        &self,
        stream: &Stream,
        operation_id: &str,
    ) -> Result<Option<StoredReceipt>, StoreError> {
        self.conn
            .query_row(
                "SELECT revision, request_digest, receipt FROM journal
                 WHERE stream = ?1 AND operation_id = ?2",
                [stream, operation_id],
                |row| {
                    Ok(StoredReceipt {
                        revision: from_sql_revision(row.get(0)?),
                        request_digest: row.get(1)?,
                        receipt: row.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| classify(&self.display(), e))
    }

    fn commit(&self, commit: &Commit<'_>) -> Result<u64, StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(fail)?;
        let mut counts = CountDeltas::new(1);
        let revision = Self::write(&tx, commit, &mut counts, &display)?;
        Self::write_counts(&tx, &counts).map_err(fail)?;
        failpoint::reached("sqlite.commit.before_commit");
        tx.commit().map_err(fail)?;
        failpoint::reached("sqlite.commit.after_commit");
        fold_long_log(&self.conn, &self.path);
        Ok(revision)
    }

    fn commit_fenced(
        &self,
        commits: &[Commit<'_>],
        fences: &[Fence<'_>],
    ) -> Result<Vec<u64>, StoreError> {
        crate::fences_apart(commits, fences)?;
        let display = self.display();
        let fail = |e| classify(&display, e);
        // Dropping the transaction on any early return rolls back every
        // write made before it: that is the all-or-nothing. IMMEDIATE holds
        // the database's one write lock from here to the commit, so no
        // other writer can move a fenced stream after it is checked.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(fail)?;
        for fence in fences {
            fence.holds_at(Self::current_revision(&tx, fence.stream).map_err(fail)?)?;
        }
        let mut revisions = Vec::with_capacity(commits.len());
        let mut counts = CountDeltas::new(1);
        for (index, commit) in commits.iter().enumerate() {
            if index > 0 {
                failpoint::fail_here("sqlite.commit_all.between")?;
            }
            revisions.push(Self::write(&tx, commit, &mut counts, &display)?);
        }
        Self::write_counts(&tx, &counts).map_err(fail)?;
        failpoint::reached("sqlite.commit_all.before_commit");
        tx.commit().map_err(fail)?;
        failpoint::reached("sqlite.commit_all.after_commit");
        fold_long_log(&self.conn, &self.path);
        Ok(revisions)
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        let display = self.display();
        // TRUNCATE: wait for readers, copy every frame, empty the -wal.
        let (busy, _, _): (i64, i64, i64) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .map_err(|e| classify(&display, e))?;
        if busy != 0 {
            return Err(StoreError::Backend(format!(
                "{display}: a reader kept the checkpoint from completing; retry when it is done"
            )));
        }
        Ok(())
    }

    fn backup_to(&self, to: &Path) -> Result<(), StoreError> {
        let display = self.display();
        if to.symlink_metadata().is_ok() {
            return Err(StoreError::Exists {
                path: to.display().to_string(),
            });
        }
        // Created here, empty and owner-only, so that no other file is
        // ever overwritten and the copy is as private as the original;
        // VACUUM INTO accepts an empty target.
        create_private(to)?;
        let copied = (|| {
            let target = to.to_str().ok_or_else(|| {
                StoreError::Backend(format!("{}: not a UTF-8 path", to.display()))
            })?;
            // One read transaction: the copy is one committed state,
            // whatever writers commit meanwhile, including what is still
            // in the -wal.
            self.conn
                .execute("VACUUM INTO ?1", [target])
                .map_err(|e| classify(&display, e))?;
            fs::File::open(to)
                .and_then(|file| file.sync_all())
                .map_err(|e| StoreError::Backend(format!("cannot sync {}: {e}", to.display())))
        })();
        if copied.is_err() {
            let _ = fs::remove_file(to);
        }
        copied
    }

    fn location(&self) -> String {
        self.display()
    }

    fn streams(&self) -> Result<Vec<String>, StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        let mut statement = self
            .conn
            .prepare(
                "SELECT stream FROM snapshots UNION SELECT DISTINCT stream FROM journal ORDER BY 1",
            )
            .map_err(fail)?;
        let rows = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(fail)?;
        rows.collect::<Result<_, _>>().map_err(fail)
    }

    fn read_consistent(
        &self,
        read: &mut dyn FnMut() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        // One read transaction: under WAL every statement in it sees the
        // snapshot taken at its first read, whatever commits meanwhile.
        self.conn.execute_batch("BEGIN DEFERRED").map_err(fail)?;
        let result = read();
        let end = self
            .conn
            .execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" });
        result?;
        end.map_err(fail)
    }

    fn journal(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalEntry) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT revision, operation_id, request_digest, kind, event, receipt, committed_at
                 FROM journal WHERE stream = ?1 AND revision > ?2 ORDER BY revision",
            )
            .map_err(fail)?;
        let mut rows = statement
            .query(params![stream, to_sql_revision(after_revision)])
            .map_err(fail)?;
        while let Some(row) = rows.next().map_err(fail)? {
            visit(JournalEntry {
                revision: from_sql_revision(row.get(0).map_err(fail)?),
                operation_id: row.get(1).map_err(fail)?,
                request_digest: row.get(2).map_err(fail)?,
                kind: row.get(3).map_err(fail)?,
                event: row.get(4).map_err(fail)?,
                receipt: row.get(5).map_err(fail)?,
                committed_at: row.get(6).map_err(fail)?,
            })?;
        }
        Ok(())
    }

    fn journal_rows(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT revision, operation_id, kind, event
                 FROM journal WHERE stream = ?1 AND revision > ?2 ORDER BY revision",
            )
            .map_err(fail)?;
        let rows = statement
            .query(params![stream, to_sql_revision(after_revision)])
            .map_err(fail)?;
        lend_rows(rows, &display, visit)
    }
    fn journal_window(
        &self,
        stream: &Stream,
        window: Window,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let display = self.display();
        let fail = |e| classify(&display, e);
        let (sql, revision, limit) = match window {
            Window::After { revision, limit } => (
                "SELECT revision, operation_id, kind, event FROM journal
                 WHERE stream = ?1 AND revision > ?2 ORDER BY revision LIMIT ?3",
                revision,
                limit,
            ),
            Window::Before { revision, limit } => (
                "SELECT revision, operation_id, kind, event FROM journal
                 WHERE stream = ?1 AND revision < ?2 ORDER BY revision DESC LIMIT ?3",
                revision,
                limit,
            ),
        };
        let mut statement = self.conn.prepare_cached(sql).map_err(fail)?;
        let rows = statement
            .query(params![stream, window_revision(revision), limit])
            .map_err(fail)?;
        lend_rows(rows, &display, visit)
    }
}

/// Lend each row of a `revision, operation_id, kind, event` query to
/// `visit`, borrowed from SQLite's buffers.
fn lend_rows(
    mut rows: rusqlite::Rows<'_>,
    display: &str,
    visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    while let Some(row) = rows.next().map_err(|e| classify(display, e))? {
        visit(JournalRow {
            revision: from_sql_revision(row.get(0).map_err(|e| classify(display, e))?),
            operation_id: borrowed_text(row, 1, display)?,
            kind: borrowed_text(row, 2, display)?,
            event: borrowed_text(row, 3, display)?,
        })?;
    }
    Ok(())
}

/// Column `index` of `row` as text, borrowed from SQLite's buffer.
fn borrowed_text<'r>(
    row: &'r rusqlite::Row<'_>,
    index: usize,
    display: &str,
) -> Result<&'r str, StoreError> {
    row.get_ref(index)
        .map_err(|e| classify(display, e))?
        .as_str()
        .map_err(|e| StoreError::Backend(format!("{display}: journal column {index}: {e}")))
}

/// `loopx.sqlite-wal` for `loopx.sqlite`.
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A `file:` URI that opens `path` as an immutable database (no locks, no
/// `-wal`, no `-shm`). Every byte outside the unreserved set is escaped, so
/// no path can smuggle in a URI parameter.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    uri
}

/// Refuse to open a database that does not exist (or is empty) for
/// writing when a log is beside it, a `-wal` or a rollback `-journal`
/// (left by a loop opened in rollback mode, or by another SQLite tool):
/// SQLite would silently delete a log that may hold the only copy of
/// committed operations or pages. An empty log holds nothing and is no
/// reason to refuse.
fn refuse_orphaned_log(path: &Path) -> Result<(), StoreError> {
    for suffix in ["-wal", "-journal"] {
        let log = companion(path, suffix);
        match log.symlink_metadata() {
            Ok(meta) if !meta.is_file() || meta.len() > 0 => {
                return Err(StoreError::OrphanedLog {
                    path: path.display().to_string(),
                    log: log.display().to_string(),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

/// Create the database file for `init`, owner-only from its first byte
/// (SQLite gives its `-wal` and `-shm` the same mode).
fn create_private(path: &Path) -> Result<(), StoreError> {
    let display = path.display().to_string();
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|e| StoreError::Backend(format!("cannot create {display}: {e}")))
}

/// Keep the database and its companions owner-only, also for a loop created
/// by an older loopx or under a lax umask.
fn restrict_files(path: &Path) -> Result<(), StoreError> {
    for file in [
        path.to_owned(),
        companion(path, "-wal"),
        companion(path, "-shm"),
    ] {
        let Ok(meta) = file.symlink_metadata() else {
            continue;
        };
        if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).map_err(|e| {
                StoreError::Backend(format!("cannot make {} owner-only: {e}", file.display()))
            })?;
        }
    }
    Ok(())
}

/// After a commit: when the `-wal` of the database at `path` has grown past
/// [`WAL_FOLD_BYTES`], fold it into the main file and empty it (a TRUNCATE
/// checkpoint). Best effort and never an error: the commit before it
/// stands, and a log left long is folded by the next writer.
///
/// Why not SQLite's auto-checkpoint: every loopx process is the first
/// connection to the database, and the first connection rebuilds the
/// log's index, forgetting how much of the log was already copied. So a
/// passive checkpoint copies the log but SQLite never starts it over: the
/// `-wal` grew without bound (6 MB after 1,200 appends), and every process
/// read all of it on open. Emptying the file is what keeps the open cheap.
///
/// A reader of an older snapshot must not make a writer wait (TRUNCATE
/// would wait for it): the busy timeout is zero for the checkpoint, which
/// then stops where a passive one would, and the next writer tries again.
pub fn fold_long_log(conn: &Connection, path: &Path) {
    let long = companion(path, "-wal")
        .metadata()
        .is_ok_and(|meta| meta.len() > WAL_FOLD_BYTES);
    if !long {
        return;
    }
    if conn.busy_timeout(Duration::ZERO).is_err() {
        return;
    }
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
}

/// Keep the `-wal` and `-shm` when the last connection closes (after its
/// checkpoint, which still runs), so that readers never need to create them.
fn persist_wal(conn: &Connection) -> rusqlite::Result<()> {
    let mut on: std::ffi::c_int = 1;
    // SAFETY: the handle lives as long as `conn`; "main" is NUL-terminated;
    // SQLITE_FCNTL_PERSIST_WAL reads and writes one int through the pointer,
    // which points to a live local.
    let code = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_PERSIST_WAL,
            (&mut on as *mut std::ffi::c_int).cast(),
        )
    };
    if code == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None))
    }
}

// SQLite integers are signed; revisions are positive (a CHECK enforces it)
// and far below 2^63, so these conversions are lossless in practice.
fn to_sql_revision(revision: u64) -> i64 {
    i64::try_from(revision).expect("revision below 2^63")
}

/// A window's bound as SQL compares it: `u64::MAX` (from the newest row)
/// and anything past what SQL holds read as the largest revision.
fn window_revision(revision: u64) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

fn from_sql_revision(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// Turn SQLite's error into one that says what to do.
fn classify(path: &str, error: rusqlite::Error) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        _ => StoreError::Backend(format!("{path}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit<'a>(expected: u64, op: &'a str, state: &'a str) -> Commit<'a> {
        Commit {
            stream: "ledger",
            expected_revision: expected,
            operation_id: op,
            request_digest: "sha256:r",
            kind: "test.event",
            event: "{}",
            receipt: "{\"ok\":true}",
            state,
            committed_at: "2026-12-02T00:00:00Z",
            facet: None,
        }
    }

    fn fresh() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("loopx.sqlite"), Access::Create).unwrap();
        (dir, store)
    }

    #[test]
    fn commit_appends_journal_and_replaces_snapshot() {
        let (_dir, store) = fresh();
        assert_eq!(store.commit(&commit(0, "a", "{\"n\":1}")).unwrap(), 1);
        assert_eq!(store.commit(&commit(1, "b", "{\"n\":2}")).unwrap(), 2);
        let snapshot = store.load("ledger").unwrap().unwrap();
        assert_eq!(
            snapshot,
            Snapshot {
                revision: 2,
                state: "{\"n\":2}".into()
            }
        );
        let mut seen = Vec::new();
        store
            .journal("ledger", 0, &mut |entry| {
                seen.push(entry.operation_id);
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(store.receipt("ledger", "b").unwrap().unwrap().revision, 2);
    }

    #[test]
    fn stale_revision_is_rejected_and_writes_nothing() {
        let (_dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        let error = store.commit(&commit(0, "b", "{}")).unwrap_err();
        assert!(matches!(
            error,
            StoreError::StaleRevision {
                expected: 0,
                actual: 1,
                ..
            }
        ));
        assert!(store.receipt("ledger", "b").unwrap().is_none());
    }

    #[test]
    fn reused_operation_id_is_rejected() {
        let (_dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        let error = store.commit(&commit(1, "a", "{}")).unwrap_err();
        assert!(matches!(error, StoreError::DuplicateOperation { .. }));
        assert_eq!(store.load("ledger").unwrap().unwrap().revision, 1);
    }

    #[test]
    fn journal_rows_cannot_be_rewritten() {
        let (_dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        let error = store.conn.execute("DELETE FROM journal", []).unwrap_err();
        assert!(error.to_string().contains("append-only"), "{error}");
    }

    #[test]
    fn missing_and_corrupt_files_are_reported_without_creating_anything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loopx.sqlite");
        assert!(matches!(
            SqliteStore::open(&path, Access::ReadWrite),
            Err(StoreError::Missing { .. })
        ));
        assert!(!path.exists());
        std::fs::write(
            &path,
            b"this is not a database, just some bytes ...........",
        )
        .unwrap();
        let before = std::fs::read(&path).unwrap();
        for access in [Access::ReadWrite, Access::ReadOnly] {
            match SqliteStore::open(&path, access) {
                Err(StoreError::Corrupt { .. }) => {}
                other => panic!("expected Corrupt, got {:?}", other.err()),
            }
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// Set the schema version a database claims, as an older or newer
    /// build would have left it.
    fn claim_version(path: &Path, version: u32) {
        let conn = Connection::open(path).unwrap();
        conn.pragma_update(None, "user_version", version).unwrap();
    }

    /// A database as a build of schema 2 left it: without the tables of
    /// version 3.
    fn as_schema_2(path: &Path) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch("DROP TABLE facets; DROP TABLE facet_counts;")
            .unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
    }

    #[test]
    fn a_reader_reads_a_schema_readable_as_it_is_and_a_writer_migrates_it() {
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        as_schema_2(&path);
        claim_version(&path, READABLE_FROM);
        let before = std::fs::read(&path).unwrap();
        let reader = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(reader.load("ledger").unwrap().unwrap().revision, 1);
        let query = FacetQuery {
            family: "todo:main#1/",
            now: jiff::Timestamp::UNIX_EPOCH,
            free_classes: &[0],
            holder: None,
        };
        assert_eq!(
            reader.read_facets(&query).unwrap(),
            None,
            "an older schema keeps no index: its readers read the streams"
        );
        drop(reader);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "a reader migrates nothing"
        );
        let writer = SqliteStore::open(&path, Access::ReadWrite).unwrap();
        assert_eq!(writer.user_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            writer.read_facets(&query).unwrap(),
            Some(FacetReading::default())
        );
    }

    #[test]
    fn a_schema_newer_than_this_build_is_refused_by_readers_and_writers() {
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        claim_version(&path, SCHEMA_VERSION + 1);
        let before = std::fs::read(&path).unwrap();
        for access in [Access::ReadOnly, Access::ReadWrite] {
            match SqliteStore::open(&path, access) {
                Err(StoreError::TooNew { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
                other => panic!("{access:?}: expected TooNew, got {:?}", other.err()),
            }
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn read_only_open_leaves_the_file_untouched() {
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        let before = std::fs::read(&path).unwrap();
        let reader = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(reader.load("ledger").unwrap().unwrap().revision, 1);
        assert!(reader.commit(&commit(1, "b", "{}")).is_err());
        drop(reader);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_consistent_read_never_sees_a_commit_made_during_it() {
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{\"n\":1}")).unwrap();
        let path = dir.path().join("loopx.sqlite");
        let reader = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        let mut seen = Vec::new();
        reader
            .read_consistent(&mut || {
                let mut journal = 0;
                reader.journal("ledger", 0, &mut |_| {
                    journal += 1;
                    Ok(())
                })?;
                // Another writer commits between the journal and the
                // snapshot read: the snapshot must still match the journal.
                store.commit(&commit(1, "b", "{\"n\":2}")).unwrap();
                let snapshot = reader.load("ledger")?.unwrap();
                seen.push((journal, snapshot.revision, reader.streams()?.len()));
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, [(1, 1, 1)]);
        assert_eq!(reader.load("ledger").unwrap().unwrap().revision, 2);
    }

    #[test]
    fn a_log_without_its_database_is_never_discarded() {
        let (dir, store) = fresh();
        let path = dir.path().join("loopx.sqlite");
        // A reader keeps the writer from checkpointing the commit away.
        let reader = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        reader.load("ledger").unwrap();
        store.commit(&commit(0, "a", "{}")).unwrap();
        drop(store);
        drop(reader);
        let wal = companion(&path, "-wal");
        let log = std::fs::read(&wal).unwrap();
        assert!(!log.is_empty(), "the commit should still be in the log");
        let database = std::fs::read(&path).unwrap();

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            SqliteStore::open(&path, Access::Create),
            Err(StoreError::OrphanedLog { .. })
        ));
        assert!(!path.exists(), "a refused create made a database");
        std::fs::write(&path, b"").unwrap();
        assert!(matches!(
            SqliteStore::open(&path, Access::ReadWrite),
            Err(StoreError::OrphanedLog { .. })
        ));
        assert_eq!(std::fs::read(&wal).unwrap(), log, "the log was touched");

        std::fs::write(&path, database).unwrap();
        let restored = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(restored.load("ledger").unwrap().unwrap().revision, 1);
    }

    #[test]
    fn files_are_private_and_a_reader_creates_none() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{}")).unwrap();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        let names = || {
            let mut names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names(),
            ["loopx.sqlite", "loopx.sqlite-shm", "loopx.sqlite-wal"]
        );
        for name in names() {
            let mode = std::fs::metadata(dir.path().join(&name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        let reader = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(reader.load("ledger").unwrap().unwrap().revision, 1);
        drop(reader);
        assert_eq!(
            names(),
            ["loopx.sqlite", "loopx.sqlite-shm", "loopx.sqlite-wal"]
        );
    }

    #[test]
    fn commits_stay_in_the_log_until_a_checkpoint_and_a_backup_is_complete() {
        let (dir, store) = fresh();
        store.commit(&commit(0, "a", "{\"n\":1}")).unwrap();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        let wal = companion(&path, "-wal");
        assert!(
            std::fs::metadata(&wal).unwrap().len() > 0,
            "closing no longer checkpoints: the commit is in the log"
        );
        let store = SqliteStore::open(&path, Access::ReadWrite).unwrap();
        let copy = dir.path().join("copy.sqlite");
        store.backup_to(&copy).unwrap();
        assert!(matches!(
            store.backup_to(&copy),
            Err(StoreError::Exists { .. })
        ));
        // The copy alone, with no log beside it, holds the commit.
        assert!(!companion(&copy, "-wal").exists());
        let restored = SqliteStore::open(&copy, Access::ReadOnly).unwrap();
        assert_eq!(restored.load("ledger").unwrap().unwrap().revision, 1);
        store.checkpoint().unwrap();
        assert_eq!(
            std::fs::metadata(&wal).unwrap().len(),
            0,
            "checkpoint empties the log"
        );
        assert_eq!(store.load("ledger").unwrap().unwrap().revision, 1);
    }

    #[test]
    fn the_log_stays_short_when_every_commit_is_a_new_process() {
        // Each loopx command opens its own connection, commits once and
        // exits: SQLite's own checkpoint let the -wal grow without bound
        // under that pattern, and every open read all of it.
        let (dir, store) = fresh();
        drop(store);
        let path = dir.path().join("loopx.sqlite");
        let wal = companion(&path, "-wal");
        let state = "x".repeat(3000);
        let mut longest = 0;
        for n in 0..400u64 {
            let store = SqliteStore::open(&path, Access::ReadWrite).unwrap();
            let op = format!("op-{n}");
            store.commit(&commit(n, &op, &state)).unwrap();
            longest = longest.max(std::fs::metadata(&wal).unwrap().len());
        }
        assert!(
            longest <= WAL_FOLD_BYTES + 64 * 1024,
            "the -wal reached {longest} bytes"
        );
        let store = SqliteStore::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(store.load("ledger").unwrap().unwrap().revision, 400);
        let mut rows = 0;
        store
            .journal("ledger", 0, &mut |_| {
                rows += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(rows, 400);
    }

    fn on(stream: &'static str, expected: u64, op: &'static str) -> Commit<'static> {
        Commit {
            stream,
            ..commit(expected, op, "{}")
        }
    }

    #[test]
    fn commit_all_writes_every_stream_or_none() {
        let (_dir, store) = fresh();
        assert_eq!(
            store
                .commit_all(&[on("a", 0, "x"), on("b", 0, "y")])
                .unwrap(),
            [1, 1]
        );
        // The second half is stale: the first half must not land either.
        let error = store
            .commit_all(&[on("a", 1, "x2"), on("b", 0, "y2")])
            .unwrap_err();
        assert!(matches!(error, StoreError::StaleRevision { .. }), "{error}");
        assert_eq!(store.revision("a").unwrap(), 1);
        assert!(store.receipt("a", "x2").unwrap().is_none());
        // A storage failure between the two inserts: nothing lands.
        failpoint::arm_error("sqlite.commit_all.between");
        let error = store
            .commit_all(&[on("a", 1, "x3"), on("b", 1, "y3")])
            .unwrap_err();
        failpoint::disarm();
        assert!(error.to_string().contains("failpoint"), "{error}");
        assert_eq!(
            (store.revision("a").unwrap(), store.revision("b").unwrap()),
            (1, 1)
        );
        assert!(store.receipt("a", "x3").unwrap().is_none());
        // Two commits to one stream: the second is stale, nothing lands.
        assert!(store
            .commit_all(&[on("a", 1, "x4"), on("a", 1, "x5")])
            .is_err());
        assert_eq!(store.revision("a").unwrap(), 1);
    }

    #[test]
    fn a_uri_path_cannot_carry_parameters() {
        assert_eq!(
            immutable_uri(Path::new("/tmp/a b?mode=rw#x%/loopx.sqlite")),
            "file:/tmp/a%20b%3Fmode%3Drw%23x%25/loopx.sqlite?mode=ro&immutable=1"
        );
    }
}
