//! The shared backend: one PostgreSQL database holds one loop's streams, so
//! that agents on several hosts share one authority.
//!
//! Owns the PostgreSQL schema (the numbered files in `migrations/` beside
//! this file, tracked in `loopx_schema_version`), the CAS commit and the
//! classification of server errors. It does not own the locator grammar or
//! how a password is hidden (`locator.rs`), nor any rule about what a commit
//! means (`Authority`).
//!
//! Isolation: commits run at READ COMMITTED. The CAS is one conditional
//! statement on the stream's snapshot row (`UPDATE … WHERE revision = $n`,
//! or `INSERT … ON CONFLICT DO NOTHING` for revision 0): a second writer
//! blocks on the row lock until the first commits, then re-evaluates its
//! `WHERE` against the new row and updates nothing, so it is refused as
//! stale. SERIALIZABLE would add serialization failures to retry and buy
//! nothing, since the only read a commit depends on is that one row.
//! Operation ids are refused by the UNIQUE constraint on
//! `(stream, operation_id)`, never by a read-then-write check. A fenced
//! commit ([`Store::commit_fenced`]) also depends on rows it does not
//! write: it locks them `FOR SHARE` (and, for a stream not yet created, a
//! shared advisory lock on its name, which every creation takes
//! exclusively), all in stream name order before it writes, so what it
//! checked cannot change before it commits and two fenced commits cannot
//! deadlock on each other. Audits run in
//! one REPEATABLE READ READ ONLY transaction ([`Store::read_consistent`]).
//!
//! One connection per process and no pool: every loopx command is one short
//! process (or one driver/server holding one store), and the `Store` API is
//! synchronous, so a pool would only add idle server connections.
//!
//! A lost connection (the server restarted) fails the call that found it
//! with [`StoreError::Unavailable`] and is replaced on the next call, never
//! inside the failed one: a statement whose outcome is unknown is never
//! resent here, the caller retries with the same operation id. Nor is it
//! replaced inside [`Store::read_consistent`], whose reads must all come
//! from one snapshot. A short command never sees this (it connects once);
//! a long-lived driver or server is what recovers by it.
//!
//! [`PostgresStore::import`] copies a whole loop from another store (what
//! `loopx migrate --from-dir` is built on).
//!
//! TLS is libpq's `sslmode` and `sslrootcert`, through rustls (see [`tls`]).

use crate::sqlite::Access;
use crate::{
    due_micros, failpoint, from_due_micros, now_micros, position_from_sql, position_to_sql,
    ClassCount, Commit, CountDeltas, Facet, FacetQuery, FacetReading, Fence, JournalEntry,
    JournalRow, Snapshot, Store, StoreError, StoredReceipt, Stream, Window,
};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::error::SqlState;
use postgres::types::Type;
use postgres::{Client, Config, GenericClient, Statement};
use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use tls::TlsSettings;
use tokio_postgres_rustls::MakeRustlsConnect;

pub mod tls;

const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_journal.sql"),
    include_str!("migrations/0002_todo_streams.sql"),
    include_str!("migrations/0003_facets.sql"),
];

/// How many rows a family's facet counts are spread over: commits to
/// distinct streams of one family (claims of distinct todos) then rarely
/// queue on the same count row.
const COUNT_SHARDS: u16 = 16;

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// How many journal rows one round trip fetches: the journal is read in
/// keyset pages so that a long journal never sits in memory at once.
const JOURNAL_PAGE: i64 = 1000;

/// How long a command waits for the server before it reports it unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`PostgresStore::import`] copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Streams with a snapshot.
    pub streams: u64,
    /// Journal entries, each with its receipt.
    pub journal_entries: u64,
}

pub struct PostgresStore {
    /// `RefCell`: the `Store` API lends `&self`, the client wants `&mut`;
    /// a store belongs to one thread at a time (it is `Send`, not `Sync`).
    client: RefCell<Client>,
    /// How to connect again when the server went away.
    config: Config,
    /// The TLS the locator asked for, set up once.
    tls: MakeRustlsConnect,
    /// What a replacement connection must check and set up: the access
    /// it was opened with (`None`: `connect`, for `migrate`, checks no
    /// schema).
    access: Cell<Option<Access>>,
    /// A call found the connection broken: the next call replaces it.
    broken: Cell<bool>,
    /// Inside [`Store::read_consistent`]: a broken connection is not
    /// replaced, since the new one would read outside the snapshot.
    consistent_read: Cell<bool>,
    /// The locator without its password: what every message names.
    location: String,
    /// The password, if the locator has one, scrubbed from every message
    /// the server or the driver produces (a defence in depth: neither is
    /// known to echo it).
    secret: Option<String>,
    /// The statements of the hot path, prepared once per connection: an
    /// unprepared query costs a round trip to parse it on every call, and
    /// a claim runs about six of them. Emptied when the connection is
    /// replaced (a statement belongs to the connection that prepared it).
    statements: RefCell<HashMap<&'static str, Statement>>,
}

impl PostgresStore {
    /// Connect to `url`. `Create` (only `init`) and [`PostgresStore::migrate`]
    /// apply missing migrations; every other access refuses a schema that
    /// is not exactly this build's.
    pub fn open(
        url: &str,
        location: &str,
        secret: Option<&str>,
        access: Access,
    ) -> Result<Self, StoreError> {
        let store = Self::connect(url, location, secret)?;
        match access {
            Access::Create => {
                store.migrate()?;
            }
            Access::ReadWrite | Access::ReadOnly => {
                let mut client = store.client.borrow_mut();
                store.prepare_session(&mut client, access)?;
            }
        }
        store.access.set(Some(access));
        Ok(store)
    }

    /// What every connection of an open store checks and sets up: the
    /// schema is exactly this build's, and a reader never writes (the
    /// server enforces it).
    fn prepare_session(&self, client: &mut Client, access: Access) -> Result<(), StoreError> {
        if access != Access::Create {
            self.check_version(client)?;
        }
        if access == Access::ReadOnly {
            client
                .batch_execute("SET default_transaction_read_only = on")
                .map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    /// The connection, replaced first if a call found it broken (see the
    /// module comment for when it is not).
    fn client(&self) -> Result<RefMut<'_, Client>, StoreError> {
        let mut client = self.client.borrow_mut();
        if self.broken.get() || client.is_closed() {
            if self.consistent_read.get() {
                return Err(self.unavailable(
                    "the connection was lost during a consistent read; nothing was committed by this command; retry when the server is back",
                ));
            }
            let mut fresh = self.config.connect(self.tls.clone()).map_err(|e| {
                self.unavailable(&format!(
                    "{}; check that the server is running and reachable, then retry",
                    self.scrub(describe(&e))
                ))
            })?;
            if let Some(access) = self.access.get() {
                self.prepare_session(&mut fresh, access)?;
            }
            *client = fresh;
            self.statements.borrow_mut().clear();
            self.broken.set(false);
        }
        Ok(client)
    }

    fn unavailable(&self, reason: &str) -> StoreError {
        StoreError::Unavailable {
            location: self.location.clone(),
            reason: reason.to_owned(),
        }
    }

    fn scrub(&self, text: String) -> String {
        match &self.secret {
            Some(secret) => text.replace(secret.as_str(), "…"),
            None => text,
        }
    }

    /// Connect without looking at the schema (for `migrate`).
    pub fn connect(url: &str, location: &str, secret: Option<&str>) -> Result<Self, StoreError> {
        let scrub = |text: String| match secret {
            Some(secret) if !secret.is_empty() => text.replace(secret, "…"),
            _ => text,
        };
        let bad_locator = |reason: String| StoreError::BadLocator {
            locator: location.to_owned(),
            reason: scrub(reason),
        };
        let (url, tls) =
            TlsSettings::split(url, |name| std::env::var(name).ok()).map_err(bad_locator)?;
        let connector = tls.connector().map_err(bad_locator)?;
        let mut config: Config = url
            .parse()
            .map_err(|e: postgres::Error| bad_locator(e.to_string()))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("loopx");
        let client = config
            .connect(connector.clone())
            .map_err(|e| StoreError::Unavailable {
                location: location.to_owned(),
                reason: format!(
                    "{}; check that the server is running and reachable{}, then retry",
                    scrub(describe(&e)),
                    tls.hint()
                ),
            })?;
        Ok(PostgresStore {
            client: RefCell::new(client),
            config,
            tls: connector,
            access: Cell::new(None),
            broken: Cell::new(false),
            consistent_read: Cell::new(false),
            statements: RefCell::new(HashMap::new()),
            location: location.to_owned(),
            secret: secret.filter(|s| !s.is_empty()).map(str::to_owned),
        })
    }

    /// The schema version the database holds (0: no loopx schema yet).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.version_of(&mut *self.client()?)
    }

    fn version_of(&self, client: &mut Client) -> Result<u32, StoreError> {
        let exists: bool = client
            .query_one(
                "SELECT to_regclass('loopx_schema_version') IS NOT NULL",
                &[],
            )
            .map_err(|e| self.fail(e))?
            .get(0);
        if !exists {
            return Ok(0);
        }
        let version: i32 = client
            .query_one("SELECT version FROM loopx_schema_version", &[])
            .map_err(|e| self.fail(e))?
            .get(0);
        Ok(u32::try_from(version).unwrap_or(0))
    }

    /// Apply every migration this build has and the database lacks, in one
    /// transaction under an advisory lock (two hosts migrating at once apply
    /// each file once). Returns the versions before and after; refuses a
    /// database newer than this build.
    pub fn migrate(&self) -> Result<(u32, u32), StoreError> {
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(|e| self.fail(e))?;
        tx.batch_execute(
            "SELECT pg_advisory_xact_lock(7402350021);
             CREATE TABLE IF NOT EXISTS loopx_schema_version (
                 singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
                 version   INTEGER NOT NULL
             );
             INSERT INTO loopx_schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;",
        )
        .map_err(|e| self.fail(e))?;
        let found: i32 = tx
            .query_one("SELECT version FROM loopx_schema_version", &[])
            .map_err(|e| self.fail(e))?
            .get(0);
        let found = u32::try_from(found).unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(self.too_new(found));
        }
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.batch_execute(sql).map_err(|e| self.fail(e))?;
            tx.execute(
                "UPDATE loopx_schema_version SET version = $1",
                &[&(index as i32 + 1)],
            )
            .map_err(|e| self.fail(e))?;
        }
        tx.commit().map_err(|e| self.fail(e))?;
        Ok((found, SCHEMA_VERSION))
    }

    fn check_version(&self, client: &mut Client) -> Result<(), StoreError> {
        let found = self.version_of(client)?;
        if found > SCHEMA_VERSION {
            return Err(self.too_new(found));
        }
        if found < SCHEMA_VERSION {
            return Err(StoreError::NotMigrated {
                location: self.location.clone(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    fn too_new(&self, found: u32) -> StoreError {
        StoreError::TooNew {
            path: self.location.clone(),
            found,
            known: SCHEMA_VERSION,
        }
    }

    /// Classify a server or connection error: a broken connection is
    /// `Unavailable` (retryable), anything else a backend error; both name
    /// the store without its password.
    fn fail(&self, error: postgres::Error) -> StoreError {
        let text = self.scrub(describe(&error));
        if error.is_closed() || error.code().is_none() && error.as_db_error().is_none() {
            self.broken.set(true);
            return StoreError::Unavailable {
                location: self.location.clone(),
                reason: format!(
                    "{text}; nothing was committed by this command; retry when the server is back"
                ),
            };
        }
        if matches!(
            error.code(),
            Some(
                &SqlState::ADMIN_SHUTDOWN
                    | &SqlState::CRASH_SHUTDOWN
                    | &SqlState::CANNOT_CONNECT_NOW
            )
        ) {
            self.broken.set(true);
            return StoreError::Unavailable {
                location: self.location.clone(),
                reason: format!("{text}; retry when the server is back"),
            };
        }
        StoreError::Backend(format!("{}: {text}", self.location))
    }

    /// Copy every stream of `source` into this database, verbatim: each
    /// journal entry in revision order with its operation id, request
    /// digest, receipt and commit time (so that a retried operation
    /// replays here with the receipt it got there), and each snapshot.
    ///
    /// One transaction: the copy lands whole or not at all. The tables are
    /// locked against writers first and a database that already holds any
    /// stream is refused with [`StoreError::Occupied`], having written
    /// nothing; so two imports, or an import and an `init`, never mix.
    /// `source` is read in one [`Store::read_consistent`] snapshot. The
    /// schema must be this build's (see [`PostgresStore::migrate`]).
    pub fn import(&self, source: &dyn Store) -> Result<Imported, StoreError> {
        let mut client = self.client()?;
        self.check_version(&mut client)?;
        let mut tx = client.transaction().map_err(|e| self.fail(e))?;
        // EXCLUSIVE: readers may read, no one else writes until we commit.
        tx.batch_execute("LOCK TABLE snapshots, journal, facets, facet_counts IN EXCLUSIVE MODE")
            .map_err(|e| self.fail(e))?;
        let occupied = tx
            .query_opt(
                "(SELECT stream FROM snapshots LIMIT 1) UNION ALL (SELECT stream FROM journal LIMIT 1) LIMIT 1",
                &[],
            )
            .map_err(|e| self.fail(e))?;
        if let Some(row) = occupied {
            return Err(StoreError::Occupied {
                location: self.location.clone(),
                stream: row.get(0),
            });
        }
        let mut imported = Imported::default();
        source.read_consistent(&mut || {
            let streams = source.streams()?;
            // COPY, not one INSERT per entry: a journal of a long loop is
            // many thousands of rows, and COPY streams them in one go.
            let copy = tx
                .copy_in(
                    "COPY journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at) FROM STDIN BINARY",
                )
                .map_err(|e| self.fail(e))?;
            let mut copy = BinaryCopyInWriter::new(
                copy,
                &[
                    Type::TEXT,
                    Type::INT8,
                    Type::TEXT,
                    Type::TEXT,
                    Type::TEXT,
                    Type::TEXT,
                    Type::TEXT,
                    Type::TEXT,
                ],
            );
            // Each stream's snapshot is stamped with its last commit's
            // time, as a commit stamps it.
            let mut last_commit = Vec::with_capacity(streams.len());
            for stream in &streams {
                let mut last = String::new();
                source.journal(stream, 0, &mut |entry| {
                    copy.write(&[
                        &stream.as_str(),
                        &to_sql(entry.revision),
                        &entry.operation_id,
                        &entry.request_digest,
                        &entry.kind,
                        &entry.event,
                        &entry.receipt,
                        &entry.committed_at,
                    ])
                    .map_err(|e| self.fail(e))?;
                    imported.journal_entries += 1;
                    last = entry.committed_at;
                    Ok(())
                })?;
                last_commit.push(last);
            }
            copy.finish().map_err(|e| self.fail(e))?;
            for (stream, committed_at) in streams.iter().zip(&last_commit) {
                let Some(snapshot) = source.load(stream)? else {
                    continue;
                };
                tx.execute(
                    "INSERT INTO snapshots (stream, revision, state, updated_at) VALUES ($1, $2, $3, $4)",
                    &[stream, &to_sql(snapshot.revision), &snapshot.state, committed_at],
                )
                .map_err(|e| self.fail(e))?;
                imported.streams += 1;
            }
            // The facets as they are, and their counts from them.
            let mut counts = CountDeltas::new(COUNT_SHARDS);
            source.visit_facets(&mut |stream, facet| {
                self.put_facet(&mut tx, stream, &facet)?;
                counts.moved(stream, None, &facet);
                Ok(())
            })?;
            self.write_counts(&mut tx, &counts)?;
            Ok(())
        })?;
        failpoint::fail_here("postgres.import.before_commit")?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(imported)
    }

    /// `sql` prepared on this connection, once.
    fn prepared(
        &self,
        client: &mut impl GenericClient,
        sql: &'static str,
    ) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = client.prepare(sql).map_err(|e| self.fail(e))?;
        self.statements.borrow_mut().insert(sql, statement.clone());
        Ok(statement)
    }

    /// Take every lock a fenced commit needs before it writes anything,
    /// in stream name order: two fenced commits that each fence what the
    /// other writes then queue behind each other instead of deadlocking
    /// (each would hold a share lock the other's write waits for).
    fn lock_in_name_order(
        &self,
        tx: &mut postgres::Transaction<'_>,
        commits: &[Commit<'_>],
        fences: &[Fence<'_>],
    ) -> Result<(), StoreError> {
        let mut streams: Vec<(&Stream, Option<&Fence<'_>>)> = fences
            .iter()
            .map(|fence| (fence.stream, Some(fence)))
            .chain(commits.iter().map(|commit| (commit.stream, None)))
            .collect();
        streams.sort_by_key(|(stream, _)| *stream);
        for (stream, fence) in streams {
            match fence {
                Some(fence) => self.hold_fence(tx, fence)?,
                // A written stream: its name (for a creation) and its row.
                None => {
                    for sql in [
                        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                        "SELECT 1 FROM snapshots WHERE stream = $1 FOR UPDATE",
                    ] {
                        let claim = self.prepared(tx, sql)?;
                        tx.execute(&claim, &[&stream]).map_err(|e| self.fail(e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Check one fence inside an open transaction and keep it true until
    /// the transaction ends. `FOR SHARE` locks the stream's snapshot row:
    /// a writer that updated it and has not committed makes this wait and
    /// then read the committed row (READ COMMITTED re-reads a locked row),
    /// and no writer can update it after this read until we commit. A
    /// stream with no row has nothing to lock, so the shared advisory lock
    /// on its name stands in for the row: the write that creates a stream
    /// takes the same lock exclusively ([`Self::write`]), and this read
    /// runs after that lock is granted, in a statement of its own, so it
    /// sees the created row.
    fn hold_fence(
        &self,
        tx: &mut postgres::Transaction<'_>,
        fence: &Fence<'_>,
    ) -> Result<(), StoreError> {
        let lock = self.prepared(
            tx,
            "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))",
        )?;
        tx.execute(&lock, &[&fence.stream])
            .map_err(|e| self.fail(e))?;
        let read = self.prepared(
            tx,
            "SELECT revision FROM snapshots WHERE stream = $1 FOR SHARE",
        )?;
        let actual = tx
            .query_opt(&read, &[&fence.stream])
            .map_err(|e| self.fail(e))?
            .map_or(0, |row| from_sql(row.get(0)));
        fence.holds_at(actual)
    }

    /// One commit's writes inside an open transaction: the conditional
    /// snapshot write (the CAS) and the journal row.
    fn write(
        &self,
        tx: &mut postgres::Transaction<'_>,
        commit: &Commit<'_>,
        counts: &mut CountDeltas,
    ) -> Result<u64, StoreError> {
        let revision = commit.expected_revision + 1;
        let new = to_sql(revision);
        let swapped = if commit.expected_revision == 0 {
            // Creating a stream: exclusive on its name, so a fenced commit
            // that found it absent either finishes first or sees it.
            let lock =
                self.prepared(tx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")?;
            tx.execute(&lock, &[&commit.stream])
                .map_err(|e| self.fail(e))?;
            let insert = self.prepared(
                tx,
                "INSERT INTO snapshots (stream, revision, state, updated_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (stream) DO NOTHING",
            )?;
            tx.execute(
                &insert,
                &[&commit.stream, &new, &commit.state, &commit.committed_at],
            )
        } else {
            let update = self.prepared(
                tx,
                "UPDATE snapshots SET revision = $2, state = $3, updated_at = $4
                 WHERE stream = $1 AND revision = $5",
            )?;
            tx.execute(
                &update,
                &[
                    &commit.stream,
                    &new,
                    &commit.state,
                    &commit.committed_at,
                    &to_sql(commit.expected_revision),
                ],
            )
        }
        .map_err(|e| self.fail(e))?;
        if swapped != 1 {
            let actual = tx
                .query_opt(
                    "SELECT revision FROM snapshots WHERE stream = $1",
                    &[&commit.stream],
                )
                .map_err(|e| self.fail(e))?
                .map_or(0, |row| from_sql(row.get(0)));
            return Err(StoreError::StaleRevision {
                stream: commit.stream.to_owned(),
                expected: commit.expected_revision,
                actual,
            });
        }
        failpoint::reached("postgres.commit.before_journal");
        let append = self.prepared(
            tx,
            "INSERT INTO journal (stream, revision, operation_id, request_digest, kind, event, receipt, committed_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )?;
        tx.execute(
            &append,
            &[
                &commit.stream,
                &new,
                &commit.operation_id,
                &commit.request_digest,
                &commit.kind,
                &commit.event,
                &commit.receipt,
                &commit.committed_at,
            ],
        )
        .map_err(|e| {
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                StoreError::DuplicateOperation {
                    stream: commit.stream.to_owned(),
                    operation_id: commit.operation_id.to_owned(),
                }
            } else {
                self.fail(e)
            }
        })?;
        if let Some(facet) = commit.facet {
            self.write_facet(tx, commit, facet, counts)?;
        }
        Ok(revision)
    }

    /// The facet of the snapshot just written (its row is locked by the
    /// CAS, so no other commit moves this facet meanwhile), and what it
    /// moves in its family's counts.
    fn write_facet(
        &self,
        tx: &mut postgres::Transaction<'_>,
        commit: &Commit<'_>,
        facet: &Facet,
        counts: &mut CountDeltas,
    ) -> Result<(), StoreError> {
        let old: Option<(String, i16)> = match commit.expected_revision {
            0 => None,
            _ => {
                let read =
                    self.prepared(tx, "SELECT family, class FROM facets WHERE stream = $1")?;
                tx.query_opt(&read, &[&commit.stream])
                    .map_err(|e| self.fail(e))?
                    .map(|row| (row.get(0), row.get(1)))
            }
        };
        self.put_facet(tx, commit.stream, facet)?;
        counts.moved(
            commit.stream,
            old.as_ref()
                .map(|(family, class)| (family.as_str(), class_from_sql(*class))),
            facet,
        );
        Ok(())
    }

    /// Write `stream`'s facet row, replacing the one it had.
    fn put_facet(
        &self,
        tx: &mut postgres::Transaction<'_>,
        stream: &str,
        facet: &Facet,
    ) -> Result<(), StoreError> {
        let upsert = self.prepared(
            tx,
            "INSERT INTO facets (stream, family, position, class, due, holder)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (stream) DO UPDATE SET family = EXCLUDED.family,
                 position = EXCLUDED.position, class = EXCLUDED.class,
                 due = EXCLUDED.due, holder = EXCLUDED.holder",
        )?;
        tx.execute(
            &upsert,
            &[
                &stream,
                &facet.family,
                &position_to_sql(facet.position),
                &i16::from(facet.class),
                &facet.due.map(due_micros),
                &facet.holder,
            ],
        )
        .map_err(|e| self.fail(e))?;
        Ok(())
    }

    /// Apply a transaction's count changes, in key order, as its last
    /// writes: it then holds every stream lock it takes before any count
    /// row, and count rows in one order, so no two commits deadlock.
    fn write_counts(
        &self,
        tx: &mut postgres::Transaction<'_>,
        counts: &CountDeltas,
    ) -> Result<(), StoreError> {
        for (family, shard, class, delta) in counts.changes() {
            // What a stream moves from has its row; an INSERT of a
            // negative count would fail its CHECK.
            let sql = match delta > 0 {
                true => {
                    "INSERT INTO facet_counts (family, shard, class, n) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (family, shard, class) DO UPDATE SET n = facet_counts.n + EXCLUDED.n"
                }
                false => {
                    "UPDATE facet_counts SET n = n + $4
                     WHERE family = $1 AND shard = $2 AND class = $3"
                }
            };
            let add = self.prepared(tx, sql)?;
            tx.execute(&add, &[&family, &(shard as i16), &i16::from(class), &delta])
                .map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    /// [`Store::read_facets`]'s queries, on `client`.
    fn read_facets_in(
        &self,
        client: &mut impl GenericClient,
        query: &FacetQuery<'_>,
    ) -> Result<FacetReading, StoreError> {
        let now = now_micros(query.now);
        let mut reading = FacetReading::default();
        let totals = self.prepared(
            client,
            "SELECT class, SUM(n)::BIGINT FROM facet_counts WHERE family = $1
             GROUP BY class HAVING SUM(n) > 0 ORDER BY class",
        )?;
        for row in client
            .query(&totals, &[&query.family])
            .map_err(|e| self.fail(e))?
        {
            reading.classes.push(ClassCount {
                class: class_from_sql(row.get(0)),
                total: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
                pending: 0,
                first_due: None,
            });
        }
        let pending = self.prepared(
            client,
            "SELECT class, COUNT(*), MIN(due) FROM facets
             WHERE family = $1 AND due > $2 GROUP BY class",
        )?;
        for row in client
            .query(&pending, &[&query.family, &now])
            .map_err(|e| self.fail(e))?
        {
            let count = reading.class_mut(class_from_sql(row.get(0)));
            count.pending = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
            count.first_due = Some(from_due_micros(row.get(2))?);
        }
        let free = self.prepared(
            client,
            "SELECT position, stream FROM facets
             WHERE family = $1 AND class = $2 AND (due IS NULL OR due <= $3)
             ORDER BY position LIMIT 1",
        )?;
        let mut first = None::<(i64, String)>;
        for class in query.free_classes {
            let found = client
                .query_opt(&free, &[&query.family, &i16::from(*class), &now])
                .map_err(|e| self.fail(e))?
                .map(|row| (row.get(0), row.get(1)));
            first = first.into_iter().chain(found).min();
        }
        reading.first_free = first.map(|(_, stream)| stream);
        if let Some(holder) = query.holder {
            let held = self.prepared(
                client,
                "SELECT stream FROM facets
                 WHERE family = $1 AND due > $3 AND holder = $2
                 ORDER BY position LIMIT 1",
            )?;
            reading.first_held = client
                .query_opt(&held, &[&query.family, &holder, &now])
                .map_err(|e| self.fail(e))?
                .map(|row| row.get(0));
        }
        Ok(reading)
    }

    /// Visit the journal page by page; each page is fetched, the client
    /// released, then the rows visited (a visitor may read the store).
    fn pages(
        &self,
        stream: &Stream,
        after_revision: u64,
        columns: &str,
        visit: &mut dyn FnMut(&postgres::Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "SELECT revision, {columns} FROM journal
             WHERE stream = $1 AND revision > $2 ORDER BY revision LIMIT $3"
        );
        let mut after = to_sql(after_revision);
        loop {
            let rows = self
                .client()?
                .query(sql.as_str(), &[&stream, &after, &JOURNAL_PAGE])
                .map_err(|e| self.fail(e))?;
            for row in &rows {
                visit(row)?;
            }
            match rows.last() {
                Some(last) if rows.len() as i64 == JOURNAL_PAGE => after = last.get(0),
                _ => return Ok(()),
            }
        }
    }
}

impl Store for PostgresStore {
    fn load(&self, stream: &Stream) -> Result<Option<Snapshot>, StoreError> {
        let mut client = self.client()?;
        let statement = self.prepared(
            &mut *client,
            "SELECT revision, state FROM snapshots WHERE stream = $1",
        )?;
        let row = client
            .query_opt(&statement, &[&stream])
            .map_err(|e| self.fail(e))?;
        Ok(row.map(|row| Snapshot {
            revision: from_sql(row.get(0)),
            state: row.get(1),
        }))
    }

    fn load_prefixed(&self, prefix: &str) -> Result<Vec<(String, Snapshot)>, StoreError> {
        // left() compares the exact characters: LIKE would read `_` and `%`
        // in the prefix as wildcards, and a range would follow the
        // database's collation rather than the bytes.
        let rows = self
            .client()?
            .query(
                "SELECT stream, revision, state FROM snapshots
                 WHERE left(stream, length($1)) = $1 ORDER BY stream COLLATE \"C\"",
                &[&prefix],
            )
            .map_err(|e| self.fail(e))?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    row.get(0),
                    Snapshot {
                        revision: from_sql(row.get(1)),
                        state: row.get(2),
                    },
                )
            })
            .collect())
    }

    fn read_facets(&self, query: &FacetQuery<'_>) -> Result<Option<FacetReading>, StoreError> {
        let mut client = self.client()?;
        // Inside a consistent read, its transaction is this read's.
        if self.consistent_read.get() {
            return self.read_facets_in(&mut *client, query).map(Some);
        }
        // One snapshot of the database for every query.
        let mut tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| self.fail(e))?;
        let reading = self.read_facets_in(&mut tx, query)?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(Some(reading))
    }

    fn visit_facets(
        &self,
        visit: &mut dyn FnMut(&str, Facet) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let rows = self
            .client()?
            .query(
                "SELECT stream, family, position, class, due, holder FROM facets
                 ORDER BY stream COLLATE \"C\"",
                &[],
            )
            .map_err(|e| self.fail(e))?;
        for row in &rows {
            let due: Option<i64> = row.get(4);
            let facet = Facet {
                family: row.get(1),
                position: position_from_sql(row.get(2)),
                class: class_from_sql(row.get(3)),
                due: due.map(from_due_micros).transpose()?,
                holder: row.get(5),
            };
            visit(row.get(0), facet)?;
        }
        Ok(())
    }

    fn revision(&self, stream: &Stream) -> Result<u64, StoreError> {
        let mut client = self.client()?;
        let statement = self.prepared(
            &mut *client,
            "SELECT revision FROM snapshots WHERE stream = $1",
        )?;
        let row = client
            .query_opt(&statement, &[&stream])
            .map_err(|e| self.fail(e))?;
        Ok(row.map_or(0, |row| from_sql(row.get(0))))
    }

    fn receipt(
        &self,
        stream: &Stream,
        operation_id: &str,
    ) -> Result<Option<StoredReceipt>, StoreError> {
        let mut client = self.client()?;
        let statement = self.prepared(
            &mut *client,
            "SELECT revision, request_digest, receipt FROM journal
                 WHERE stream = $1 AND operation_id = $2",
        )?;
        let row = client
            .query_opt(&statement, &[&stream, &operation_id])
            .map_err(|e| self.fail(e))?;
        Ok(row.map(|row| StoredReceipt {
            revision: from_sql(row.get(0)),
            request_digest: row.get(1),
            receipt: row.get(2),
        }))
    }

    fn commit(&self, commit: &Commit<'_>) -> Result<u64, StoreError> {
        self.commit_all(std::slice::from_ref(commit))
            .map(|revisions| revisions[0])
    }

    fn commit_fenced(
        &self,
        commits: &[Commit<'_>],
        fences: &[Fence<'_>],
    ) -> Result<Vec<u64>, StoreError> {
        crate::fences_apart(commits, fences)?;
        let mut client = self.client()?;
        // READ COMMITTED (the server default, named so it never drifts): see
        // the module comment for why the conditional write is enough.
        // Dropping the transaction on an early return rolls it back.
        let mut tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::ReadCommitted)
            .start()
            .map_err(|e| self.fail(e))?;
        if !fences.is_empty() {
            self.lock_in_name_order(&mut tx, commits, fences)?;
        }
        let mut revisions = Vec::with_capacity(commits.len());
        let mut counts = CountDeltas::new(COUNT_SHARDS);
        for (index, commit) in commits.iter().enumerate() {
            if index > 0 {
                failpoint::fail_here("postgres.commit_all.between")?;
            }
            revisions.push(self.write(&mut tx, commit, &mut counts)?);
        }
        self.write_counts(&mut tx, &counts)?;
        failpoint::reached("postgres.commit.before_commit");
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(revisions)
    }

    fn backup_to(&self, _to: &Path) -> Result<(), StoreError> {
        Err(StoreError::Unsupported {
            location: self.location.clone(),
            reason: "loopx backup copies SQLite files; back a PostgreSQL store up with the server's own tools (pg_dump -Fc DATABASE > FILE)".into(),
        })
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn streams(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .client()?
            .query(
                "SELECT stream FROM snapshots UNION SELECT stream FROM journal ORDER BY 1",
                &[],
            )
            .map_err(|e| self.fail(e))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn read_consistent(
        &self,
        read: &mut dyn FnMut() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // Plain statements, not a borrowed `Transaction`: `read` goes back
        // through this store, which must stay borrowable meanwhile.
        self.client()?
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .map_err(|e| self.fail(e))?;
        self.consistent_read.set(true);
        let result = read();
        self.consistent_read.set(false);
        if self.broken.get() {
            // The transaction died with its connection: nothing to end.
            return result.and(Err(self.unavailable(
                "the connection was lost during a consistent read; retry when the server is back",
            )));
        }
        let end = self
            .client()?
            .batch_execute(if result.is_ok() { "COMMIT" } else { "ROLLBACK" });
        result?;
        end.map_err(|e| self.fail(e))
    }

    fn journal(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalEntry) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.pages(
            stream,
            after_revision,
            "operation_id, request_digest, kind, event, receipt, committed_at",
            &mut |row| {
                visit(JournalEntry {
                    revision: from_sql(row.get(0)),
                    operation_id: row.get(1),
                    request_digest: row.get(2),
                    kind: row.get(3),
                    event: row.get(4),
                    receipt: row.get(5),
                    committed_at: row.get(6),
                })
            },
        )
    }

    fn journal_rows(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.pages(
            stream,
            after_revision,
            "operation_id, kind, event",
            &mut |row| {
                visit(JournalRow {
                    revision: from_sql(row.get(0)),
                    operation_id: row.get(1),
                    kind: row.get(2),
                    event: row.get(3),
                })
            },
        )
    }

    fn journal_window(
        &self,
        stream: &Stream,
        window: Window,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let (sql, revision, limit) = match window {
            Window::After { revision, limit } => (
                "SELECT revision, operation_id, kind, event FROM journal
                 WHERE stream = $1 AND revision > $2 ORDER BY revision LIMIT $3",
                revision,
                limit,
            ),
            Window::Before { revision, limit } => (
                "SELECT revision, operation_id, kind, event FROM journal
                 WHERE stream = $1 AND revision < $2 ORDER BY revision DESC LIMIT $3",
                revision,
                limit,
            ),
        };
        let bound = i64::try_from(revision).unwrap_or(i64::MAX);
        // Fetched whole, then visited with the client released: a window
        // is small by construction, and a visitor may read the store.
        let rows = self
            .client()?
            .query(sql, &[&stream, &bound, &i64::from(limit)])
            .map_err(|e| self.fail(e))?;
        for row in &rows {
            visit(JournalRow {
                revision: from_sql(row.get(0)),
                operation_id: row.get(1),
                kind: row.get(2),
                event: row.get(3),
            })?;
        }
        Ok(())
    }
}

/// The error with its source chain: the driver's top-level text alone
/// ("error connecting to server") hides the reason.
fn describe(error: &postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// A facet's class as PostgreSQL keeps it (SMALLINT); the stores write
/// only classes an owner gave, 0 to 255.
fn class_from_sql(class: i16) -> u8 {
    u8::try_from(class).unwrap_or(u8::MAX)
}

fn to_sql(revision: u64) -> i64 {
    i64::try_from(revision).expect("revisions stay far below i64::MAX")
}

fn from_sql(revision: i64) -> u64 {
    u64::try_from(revision).expect("the schema keeps revisions positive")
}
