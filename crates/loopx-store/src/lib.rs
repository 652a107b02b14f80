//! The durable authority of loopx.
//!
//! [`Store`] is what a backend must provide: a versioned snapshot per stream,
//! a compare-and-swap commit that writes the new snapshot and one journal
//! entry in a single transaction (optionally fenced on the revisions of
//! streams it read but does not write), receipt lookup by operation id, and a
//! streaming read of the append-only journal. [`sqlite::SqliteStore`] is the
//! embedded default; [`postgres::PostgresStore`] is the shared one, the same
//! trait over one PostgreSQL database.
//!
//! [`Authority`] is the one place that runs an operation end to end: replay
//! check, pure `decide`/`evolve` from `loopx-core`, CAS commit, and a bounded
//! retry when another writer won the race. It knows nothing about ledgers or
//! goals; it only knows [`loopx_core::operation::Owner`].

mod authority;
pub mod failpoint;
pub mod locator;
pub mod postgres;
pub mod sqlite;

pub use authority::{
    decide_at, Authority, AuthorityError, Classified, Committed, Either, Executed,
    ExecutedWithState, GroupResult, Grouped, Loaded, Member, PairResult, Part, Preview, Reads,
    Receipt, Step,
};
pub use locator::Locator;

/// The name of one independently versioned piece of state (`ledger`,
/// `goal:<id>`, a todo's `todo:<goal instance>/<todo id>`).
pub type Stream = str;

/// A snapshot as stored: its revision and its canonical JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub revision: u64,
    pub state: String,
}

/// One committed operation, as the journal holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub revision: u64,
    pub operation_id: String,
    pub request_digest: String,
    pub kind: String,
    pub event: String,
    pub receipt: String,
    pub committed_at: String,
}

/// One journal row as [`Store::journal_rows`] lends it: borrowed from the
/// backend's buffer and without the stored receipt, for readers that visit
/// every row (the audit) and would otherwise allocate each field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalRow<'a> {
    pub revision: u64,
    pub operation_id: &'a str,
    pub kind: &'a str,
    pub event: &'a str,
}

/// A bounded slice of one stream's journal, read through its index on
/// (stream, revision): what a view that shows the newest turns, or looks
/// up one record, reads instead of the whole journal, so its cost does
/// not grow with the journal's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// At most `limit` rows after `revision`, oldest first.
    After { revision: u64, limit: u32 },
    /// At most `limit` rows before `revision`, newest first
    /// (`u64::MAX`: from the newest row).
    Before { revision: u64, limit: u32 },
}

/// What a commit writes: the snapshot that results and the journal entry
/// that explains it. `expected_revision` is the revision the writer read
/// (0 when the stream did not exist); the entry's revision is one more.
#[derive(Debug, Clone)]
pub struct Commit<'a> {
    pub stream: &'a Stream,
    pub expected_revision: u64,
    pub operation_id: &'a str,
    pub request_digest: &'a str,
    pub kind: &'a str,
    pub event: &'a str,
    pub receipt: &'a str,
    pub state: &'a str,
    pub committed_at: &'a str,
    /// The index row the new snapshot has (its owner's
    /// [`Owner::facet`](loopx_core::operation::Owner::facet)), written in
    /// the same transaction; `None` for a stream that has none.
    pub facet: Option<&'a Facet>,
}

pub use loopx_core::operation::Facet;

/// A question about one family of faceted streams, as of `now`: a stream
/// is *pending* while `now` is before its facet's `due`.
#[derive(Debug, Clone, Copy)]
pub struct FacetQuery<'a> {
    pub family: &'a str,
    pub now: jiff::Timestamp,
    /// Find the first stream in the family's order whose class is one of
    /// these and which is not pending.
    pub free_classes: &'a [u8],
    /// Find the first stream in the family's order that this holder holds
    /// and that is pending.
    pub holder: Option<&'a str>,
}

/// What a family's facets say, read in one consistent state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FacetReading {
    /// Per class with any stream: how many streams, how many of them are
    /// pending, and the soonest due among those.
    pub classes: Vec<ClassCount>,
    /// The first free stream ([`FacetQuery::free_classes`]).
    pub first_free: Option<String>,
    /// The holder's first held stream ([`FacetQuery::holder`]).
    pub first_held: Option<String>,
}

impl FacetReading {
    /// How many streams the family has.
    pub fn streams(&self) -> u64 {
        self.classes.iter().map(|c| c.total).sum()
    }

    /// The count of `class`, added (empty) if there was none, the classes
    /// kept in order.
    fn class_mut(&mut self, class: u8) -> &mut ClassCount {
        let index = match self.classes.binary_search_by_key(&class, |c| c.class) {
            Ok(index) => index,
            Err(index) => {
                self.classes.insert(
                    index,
                    ClassCount {
                        class,
                        total: 0,
                        pending: 0,
                        first_due: None,
                    },
                );
                index
            }
        };
        &mut self.classes[index]
    }
}

/// A facet's position as both stores keep it (a signed 64-bit integer).
fn position_to_sql(position: u64) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

fn position_from_sql(position: i64) -> u64 {
    u64::try_from(position).unwrap_or(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassCount {
    pub class: u8,
    pub total: u64,
    pub pending: u64,
    pub first_due: Option<jiff::Timestamp>,
}

/// What a transaction's facet writes add to and take from each family's
/// counts, kept until the transaction's last write and then applied in
/// key order (so that two transactions never wait on each other's count
/// rows in a cycle). `shards` spreads a family's counts over that many
/// rows, chosen by stream.
struct CountDeltas {
    shards: u16,
    deltas: std::collections::BTreeMap<(String, u16, u8), i64>,
}

impl CountDeltas {
    fn new(shards: u16) -> Self {
        CountDeltas {
            shards,
            deltas: Default::default(),
        }
    }

    /// `stream`'s facet moves from `old` (family and class) to `new`.
    fn moved(&mut self, stream: &str, old: Option<(&str, u8)>, new: &Facet) {
        if old == Some((new.family.as_str(), new.class)) {
            return;
        }
        let shard = self.shard_of(stream);
        if let Some((family, class)) = old {
            *self
                .deltas
                .entry((family.to_owned(), shard, class))
                .or_default() -= 1;
        }
        *self
            .deltas
            .entry((new.family.clone(), shard, new.class))
            .or_default() += 1;
    }

    /// FNV-1a of the stream's name: stable across processes and builds.
    fn shard_of(&self, stream: &str) -> u16 {
        let hash = stream
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        (hash % u64::from(self.shards)) as u16
    }

    /// The changed counts, in key order.
    fn changes(&self) -> impl Iterator<Item = (&str, u16, u8, i64)> {
        self.deltas
            .iter()
            .filter(|(_, delta)| **delta != 0)
            .map(|((family, shard, class), delta)| (family.as_str(), *shard, *class, *delta))
    }
}

/// A due time as the stores keep it: microseconds since the epoch,
/// rounded up, so that for a `now` of whole microseconds (the clock
/// gives milliseconds) `now < due` holds of the kept values exactly when
/// it holds of the times.
fn due_micros(due: jiff::Timestamp) -> i64 {
    let nanos = due.as_nanosecond();
    // jiff's range is ±10,000 years: microseconds fit an i64.
    (nanos.div_euclid(1000) + i128::from(nanos.rem_euclid(1000) != 0)) as i64
}

/// `now` as the stores compare it with a kept due (rounded down).
fn now_micros(now: jiff::Timestamp) -> i64 {
    now.as_nanosecond().div_euclid(1000) as i64
}

/// A kept due time, back as a time.
fn from_due_micros(micros: i64) -> Result<jiff::Timestamp, StoreError> {
    jiff::Timestamp::from_microsecond(micros)
        .map_err(|e| StoreError::Backend(format!("a facet's due time is out of range: {e}")))
}

/// A stream a grouped commit read and judged against but does not write:
/// the commit lands only while the stream is still at `revision` (0: it
/// did not exist). What keeps a decision from outliving its inputs: a
/// review judged against the goal contract must not commit once the
/// contract was rewritten, although it never writes the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence<'a> {
    pub stream: &'a Stream,
    pub revision: u64,
}

impl Fence<'_> {
    /// Whether the fenced stream, now at `actual`, still stands where it
    /// was read; [`StoreError::FenceMoved`] if not.
    fn holds_at(&self, actual: u64) -> Result<(), StoreError> {
        match actual == self.revision {
            true => Ok(()),
            false => Err(StoreError::FenceMoved {
                stream: self.stream.to_owned(),
                read: self.revision,
                actual,
            }),
        }
    }
}

/// Refuse fences that make no sense for `commits`: a fence on a stream the
/// group writes (its commit's revision check already is its fence). Both
/// backends call this before they open a transaction.
fn fences_apart(commits: &[Commit<'_>], fences: &[Fence<'_>]) -> Result<(), StoreError> {
    match fences
        .iter()
        .find(|fence| commits.iter().any(|c| c.stream == fence.stream))
    {
        Some(fence) => Err(StoreError::Backend(format!(
            "a fenced commit both writes and fences {}: its commit's revision check is already its fence; drop the fence",
            fence.stream
        ))),
        None => Ok(()),
    }
}

/// A receipt remembered under an operation id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReceipt {
    pub revision: u64,
    pub request_digest: String,
    pub receipt: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("stale revision on {stream}: read revision {expected}, the store is now at {actual}")]
    StaleRevision {
        stream: String,
        expected: u64,
        actual: u64,
    },
    #[error("{stream} moved from revision {read}, which this commit was judged against, to {actual}: nothing was written; read it again and judge again")]
    FenceMoved {
        stream: String,
        read: u64,
        actual: u64,
    },
    #[error("operation id {operation_id} is already committed on {stream}")]
    DuplicateOperation {
        stream: String,
        operation_id: String,
    },
    #[error("no loop database at {path}: run `loopx init --dir <DIR>` first")]
    Missing { path: String },
    #[error("the loop database at {path} is unreadable ({reason}); restore it from a backup or move it aside; nothing was changed")]
    Corrupt { path: String, reason: String },
    #[error("the loop database at {path} has schema version {found}, newer than this loopx understands ({known}); upgrade loopx")]
    TooNew {
        path: String,
        found: u32,
        known: u32,
    },
    #[error("the loop database at {path} has schema version {found}, older than this loopx ({known}); the next mutating command on this loop migrates it")]
    TooOld {
        path: String,
        found: u32,
        known: u32,
    },
    #[error("the store at {location} has schema version {found}, older than this loopx ({known}); run `loopx migrate --store {location}` (with its password) to apply the migrations; nothing was changed")]
    NotMigrated {
        location: String,
        found: u32,
        known: u32,
    },
    #[error("the store at {location} cannot do this: {reason}")]
    Unsupported { location: String, reason: String },
    #[error("{log} is present but {path} is not: the log may hold committed operations of a loop whose database was deleted or moved; restore {path} from a backup next to it (SQLite replays the log on the next open), or move {log} (and any -shm beside it) out of this directory to start a new loop here; nothing was changed")]
    OrphanedLog { path: String, log: String },
    #[error("store locator {locator:?} is not usable: {reason}")]
    BadLocator { locator: String, reason: String },
    #[error("the store at {location} is unavailable: {reason}")]
    Unavailable { location: String, reason: String },
    #[error("the store at {location} already holds loop state (stream {stream}): a loop is moved only into a database with no loop in it, and nothing was written; create an empty database for it (createdb NAME) and name that one")]
    Occupied { location: String, stream: String },
    #[error("{path} already exists: a backup never overwrites a file; choose a new path")]
    Exists { path: String },
    #[error("storage error: {0}")]
    Backend(String),
}

impl loopx_core::error_class::Classify for StoreError {
    fn class(&self) -> loopx_core::error_class::ErrorClass {
        use loopx_core::error_class::ErrorClass;
        match self {
            StoreError::StaleRevision { .. } | StoreError::FenceMoved { .. } => ErrorClass::Stale,
            StoreError::DuplicateOperation { .. } => ErrorClass::Conflict,
            StoreError::Missing { .. } => ErrorClass::NotFound,
            StoreError::TooOld { .. }
            | StoreError::TooNew { .. }
            | StoreError::NotMigrated { .. }
            | StoreError::Unsupported { .. }
            | StoreError::OrphanedLog { .. }
            | StoreError::BadLocator { .. }
            | StoreError::Exists { .. }
            | StoreError::Occupied { .. } => ErrorClass::Refused,
            StoreError::Corrupt { .. } => ErrorClass::Internal,
            StoreError::Unavailable { .. } | StoreError::Backend(_) => ErrorClass::Unavailable,
        }
    }
}

/// A durable, transactional home for snapshots and their journal.
pub trait Store {
    /// The latest snapshot of `stream`, or `None` if nothing was committed.
    fn load(&self, stream: &Stream) -> Result<Option<Snapshot>, StoreError>;

    /// Every snapshot whose stream name starts with `prefix`, in name
    /// order: the streams of one family read at once (a goal's todos,
    /// `todo:main#1/`), rather than one round trip per stream.
    fn load_prefixed(&self, prefix: &str) -> Result<Vec<(String, Snapshot)>, StoreError>;

    /// [`load_prefixed`](Self::load_prefixed), lending each snapshot to
    /// `visit` (its stream, revision and state) in name order instead of
    /// collecting them: for a reader that parses each and keeps none of
    /// the text (a goal's thousands of todos), a backend may lend its own
    /// row buffers.
    fn visit_prefixed(
        &self,
        prefix: &str,
        visit: &mut dyn FnMut(&str, u64, &str),
    ) -> Result<(), StoreError> {
        for (stream, snapshot) in self.load_prefixed(prefix)? {
            visit(&stream, snapshot.revision, &snapshot.state);
        }
        Ok(())
    }

    /// The revision of `stream` (0 if nothing was committed), without
    /// reading its snapshot.
    fn revision(&self, stream: &Stream) -> Result<u64, StoreError>;

    /// The receipt committed under `operation_id`, if any.
    fn receipt(
        &self,
        stream: &Stream,
        operation_id: &str,
    ) -> Result<Option<StoredReceipt>, StoreError>;

    /// Atomically check the revision, append the journal entry and replace
    /// the snapshot. Returns the new revision. Fails with
    /// [`StoreError::StaleRevision`] or [`StoreError::DuplicateOperation`]
    /// without writing anything.
    fn commit(&self, commit: &Commit<'_>) -> Result<u64, StoreError>;

    /// [`commit`](Self::commit) for several streams at once, in one
    /// transaction: every commit's revision check and operation id are
    /// checked and each writes its own journal entry, and either all of
    /// them land or none does. Returns the new revisions in order. Two
    /// commits to the same stream are refused (the second would be stale).
    fn commit_all(&self, commits: &[Commit<'_>]) -> Result<Vec<u64>, StoreError> {
        self.commit_fenced(commits, &[])
    }

    /// [`commit_all`](Self::commit_all), and in the same transaction every
    /// fence's stream must still be at the fence's revision, or
    /// [`StoreError::FenceMoved`] and nothing is written. A fence on a
    /// stream the commits write is refused as a misuse (its commit's own
    /// revision check is the fence). The fenced streams stay unwritable by
    /// others until this transaction ends, so what was checked is what
    /// the commit lands on.
    fn commit_fenced(
        &self,
        commits: &[Commit<'_>],
        fences: &[Fence<'_>],
    ) -> Result<Vec<u64>, StoreError>;

    /// Fold the write-ahead log into the main database file, so that the
    /// file alone holds every commit. Writers do not do this on exit
    /// (it costs fsyncs on every command); the driver does it at the end of
    /// a turn and `backup` before copying. Backends without a log: no-op.
    fn checkpoint(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Write a complete, standalone copy of the store to the new file `to`
    /// (refused with [`StoreError::Exists`] if anything is there).
    fn backup_to(&self, to: &std::path::Path) -> Result<(), StoreError>;

    /// Where this store lives, as messages name it.
    fn location(&self) -> String;

    /// Every stream that holds a snapshot or a journal entry, in name order.
    fn streams(&self) -> Result<Vec<String>, StoreError>;

    /// Run `read` so that every read it makes through this store sees one
    /// committed state of the whole store: what writers commit meanwhile
    /// stays invisible to it. For audits that compare one stream's journal
    /// with its snapshot, and one stream with another.
    fn read_consistent(
        &self,
        read: &mut dyn FnMut() -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// What the facets of `query.family` say ([`FacetQuery`]), in one
    /// consistent read whose cost grows with what is pending, not with
    /// the family's size; `None` when this store keeps no facets (a
    /// database of an older schema, read as it is).
    fn read_facets(&self, query: &FacetQuery<'_>) -> Result<Option<FacetReading>, StoreError>;

    /// Every stream's facet, in stream order (for copying a store and for
    /// audits).
    fn visit_facets(
        &self,
        visit: &mut dyn FnMut(&str, Facet) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Visit the journal of `stream` in revision order, starting after
    /// `after_revision`. Streams: the journal can be much larger than memory
    /// would like.
    fn journal(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalEntry) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// [`journal`](Self::journal) without copying: each row is lent to
    /// `visit` for the duration of the call, and the receipt is not read.
    fn journal_rows(
        &self,
        stream: &Stream,
        after_revision: u64,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The rows of `stream`'s journal in `window`, lent to `visit` as
    /// [`journal_rows`](Self::journal_rows) lends them, in the window's
    /// order. At most `limit` rows are read, whatever the journal's length.
    fn journal_window(
        &self,
        stream: &Stream,
        window: Window,
        visit: &mut dyn FnMut(JournalRow<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
}
