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
