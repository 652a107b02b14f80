//! One pass over a stream's journal on two cores: the rows are read on the
//! calling thread and visited, in journal order, on another.
//!
//! Owns the pipeline `validate` reads a long journal through. The store
//! is not shared between threads, so the calling thread reads its rows and
//! copies them into batches; the visitor (parse, check and fold: most of an
//! audit's time) runs on a thread of its own, so reading the next rows and
//! folding the last ones overlap. Each record is allocated, folded and
//! freed on that one thread: parsing on several threads and folding on
//! another frees every record on a thread that did not allocate it, and
//! the allocator then costs more than the parse it was meant to spread.
//!
//! Memory stays flat whatever the journal's length: at most
//! [`BATCHES_IN_FLIGHT`] batches of [`BATCH_ROWS`] rows wait between the
//! two threads, and their buffers are reused.
//!
//! Does not own what a row must hold or how it folds: the auditors in
//! `loopx_core::ledger::audit` do.
//!
//! Also here: the bounded reads the views use instead of the whole
//! journal: [`newest_first`], the walk back from its end, [`oldest_first`]
//! the walk forward from a revision, and [`seek`], where a keyed record
//! starts, in a number of reads that grows with the log of its length.

use loopx_store::{JournalRow, Store, StoreError, Window};
use std::ops::ControlFlow;
use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel};

/// Rows read per step of a walk at most: a view wants a few hundred rows
/// at most, and a step costs one indexed query...
const ROWS_PER_STEP: u32 = 256;
/// ...and at first, doubling up to the most.
const FIRST_STEP: u32 = 8;

/// Visit `stream`'s journal from the row before `before` (`u64::MAX`: the
/// newest) back towards the first, until `visit` breaks or the journal
/// begins. What is read is what is visited, a step at a time: the cost
/// follows what the caller wants, not the journal's length.
pub fn newest_first(
    store: &dyn Store,
    stream: &str,
    before: u64,
    visit: &mut dyn FnMut(JournalRow<'_>) -> ControlFlow<()>,
) -> Result<(), StoreError> {
    walk(store, stream, before, false, visit)
}

/// Visit `stream`'s journal from the row after `after` forward, until
/// `visit` breaks or the journal ends, a step at a time.
pub fn oldest_first(
    store: &dyn Store,
    stream: &str,
    after: u64,
    visit: &mut dyn FnMut(JournalRow<'_>) -> ControlFlow<()>,
) -> Result<(), StoreError> {
    walk(store, stream, after, true, visit)
}

fn walk(
    store: &dyn Store,
    stream: &str,
    from: u64,
    forward: bool,
    visit: &mut dyn FnMut(JournalRow<'_>) -> ControlFlow<()>,
) -> Result<(), StoreError> {
    let mut cursor = from;
    let mut stopped = false;
    // Small steps first: most walks stop within a few rows (a probe of
    // `seek`, the newest turn), and a step reads all it asks for.
    let mut limit = FIRST_STEP;
    loop {
        let revision = cursor;
        let window = if forward {
            Window::After { revision, limit }
        } else {
            Window::Before { revision, limit }
        };
        let mut read = 0;
        store.journal_window(stream, window, &mut |row| {
            read += 1;
            cursor = row.revision;
            if !stopped {
                stopped = visit(row).is_break();
            }
            Ok(())
        })?;
        if stopped || read < limit {
            return Ok(());
        }
        limit = (limit * 2).min(ROWS_PER_STEP);
    }
}

/// Below this many revisions, [`seek`] stops halving: reading them is
/// cheaper than more probes.
const SEEK_LINEAR: u64 = 64;

/// A revision from which reading `stream` forward ([`oldest_first`])
/// meets the first row whose key is `target` or more, if any such row is
/// at or before revision `end`. `key` reads a row's key, `None` for rows
/// without one; keys never decrease along the journal (iteration numbers
/// in the ledger, intents' iterations in the driver's journal).
///
/// Halves the revisions between where the row may be: each probe reads
/// forward from the middle to the first keyed row. Rows without a key
/// come a few at a time between keyed ones, so the reads grow with the
/// log of the journal's length.
pub fn seek(
    store: &dyn Store,
    stream: &str,
    end: u64,
    key: &mut dyn FnMut(&str) -> Option<u64>,
    target: u64,
) -> Result<u64, StoreError> {
    // No row at or before `low` is keyed `target` or more; the first one
    // is at or before `high`, or it is the first keyed row after `high`,
    // or there is none.
    let (mut low, mut high) = (0, end);
    while high - low > SEEK_LINEAR {
        let middle = low + (high - low) / 2;
        let mut probe = None;
        oldest_first(store, stream, middle, &mut |row| {
            if row.revision > high {
                return ControlFlow::Break(());
            }
            match key(row.event) {
                Some(found) => {
                    probe = Some((row.revision, found));
                    ControlFlow::Break(())
                }
                None => ControlFlow::Continue(()),
            }
        })?;
        match probe {
            Some((revision, found)) if found < target => low = revision,
            // The row sought is at or before the middle, or it is the
            // probe itself, which the forward read from `low` reaches
            // past the unkeyed rows before it.
            _ => high = middle,
        }
    }
    Ok(low)
}

/// Rows per batch: enough that handing a batch between threads costs
/// nothing next to folding it (a ledger row's event is ~1.2 KB).
const BATCH_ROWS: usize = 256;

/// Full batches waiting for the visitor, at most: what bounds memory.
const BATCHES_IN_FLIGHT: usize = 4;

/// Visit `stream`'s journal in revision order, as
/// [`Store::journal_rows`] does, with `visit` running on another thread
/// than the store's reads (inline on a machine with one core, or when no
/// thread can be started).
pub fn scan(
    store: &(dyn Store + Send),
    stream: &str,
    visit: &mut (dyn FnMut(JournalRow<'_>) + Send),
) -> Result<(), StoreError> {
    let inline = |visit: &mut (dyn FnMut(JournalRow<'_>) + Send)| {
        store.journal_rows(stream, 0, &mut |row| {
            visit(row);
            Ok(())
        })
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return inline(visit);
    }
    let (to_visitor, full) = sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (to_reader, emptied) = channel::<Batch>();
    let scanned = std::thread::scope(|scope| {
        let on_thread = &mut *visit;
        let spawned = std::thread::Builder::new()
            .name("journal visitor".into())
            .spawn_scoped(scope, move || {
                for mut batch in full {
                    batch.visit_all(on_thread);
                    if to_reader.send(batch).is_err() {
                        return;
                    }
                }
            });
        // No thread to be had (a process limit): read inline below.
        let Ok(visitor) = spawned else { return None };
        let mut filling = Batch::default();
        let mut read = store.journal_rows(stream, 0, &mut |row| {
            filling.push(row);
            if filling.rows.len() == BATCH_ROWS {
                let next = emptied.try_recv().unwrap_or_default();
                to_visitor
                    .send(std::mem::replace(&mut filling, next))
                    .map_err(|_| visitor_stopped())?;
            }
            Ok(())
        });
        if read.is_ok() && !filling.rows.is_empty() && to_visitor.send(filling).is_err() {
            read = Err(visitor_stopped());
        }
        // Closing the queue ends the visitor once it has visited the rest.
        drop(to_visitor);
        match visitor.join() {
            Ok(()) => Some(read),
            // The visitor's panic is the failure to report, not the
            // closed queue it left behind.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    match scanned {
        Some(read) => read,
        None => inline(visit),
    }
}

fn visitor_stopped() -> StoreError {
    StoreError::Backend("the journal visitor thread stopped".into())
}

/// Rows copied out of the store's buffer: their text, and where each
/// row's fields lie in it.
struct Batch {
    text: String,
    rows: Vec<RowSpan>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            text: String::new(),
            rows: Vec::with_capacity(BATCH_ROWS),
        }
    }
}

struct RowSpan {
    revision: u64,
    operation_id: Range<usize>,
    kind: Range<usize>,
    event: Range<usize>,
}

impl Batch {
    fn push(&mut self, row: JournalRow<'_>) {
        let text = &mut self.text;
        let mut put = |field: &str| {
            let start = text.len();
            text.push_str(field);
            start..text.len()
        };
        let span = RowSpan {
            revision: row.revision,
            operation_id: put(row.operation_id),
            kind: put(row.kind),
            event: put(row.event),
        };
        self.rows.push(span);
    }

    /// Visit every row in order, and leave the batch empty for reuse.
    fn visit_all(&mut self, visit: &mut (dyn FnMut(JournalRow<'_>) + Send)) {
        for row in self.rows.drain(..) {
            visit(JournalRow {
                revision: row.revision,
                operation_id: &self.text[row.operation_id],
                kind: &self.text[row.kind],
                event: &self.text[row.event],
            });
        }
        self.text.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_store::sqlite::{Access, Durability, SqliteStore};
    use loopx_store::Commit;

    fn store_with(rows: u64) -> (tempfile::TempDir, SqliteStore) {
        store_of(rows, &|revision| format!("{{\"n\":{revision}}}"))
    }

    /// A store whose stream `s` has `rows` rows, row `r` holding `event(r)`.
    fn store_of(rows: u64, event: &dyn Fn(u64) -> String) -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loopx.sqlite");
        let store = SqliteStore::open_with(&path, Access::Create, Durability::Unsafe).unwrap();
        for revision in 1..=rows {
            let operation_id = format!("op-{revision}");
            let event = event(revision);
            store
                .commit(&Commit {
                    stream: "s",
                    expected_revision: revision - 1,
                    operation_id: &operation_id,
                    request_digest: "sha256:0",
                    kind: "k",
                    event: &event,
                    receipt: "{}",
                    state: "{}",
                    committed_at: "2026-01-01T00:00:00Z",
                    facet: None,
                })
                .unwrap();
        }
        (dir, store)
    }

    /// Row `r` holds key `r / 4`, except every fourth row, which holds
    /// none: keys repeat and rows without one sit between.
    fn keyed(rows: u64) -> (tempfile::TempDir, SqliteStore) {
        store_of(rows, &|revision| {
            if revision % 4 == 0 {
                "-".to_owned()
            } else {
                (revision / 4).to_string()
            }
        })
    }

    #[test]
    fn seek_finds_the_first_row_of_a_key_in_few_reads() {
        let rows = 5000;
        let (_dir, store) = keyed(rows);
        let last_key = rows / 4;
        for target in [0, 1, 2, 17, 600, 1111, last_key - 1, last_key, last_key + 5] {
            let mut probed = 0;
            let from = seek(
                &store,
                "s",
                rows,
                &mut |event| {
                    probed += 1;
                    event.parse().ok()
                },
                target,
            )
            .unwrap();
            assert!(probed < 200, "{probed} rows probed for key {target}");
            let mut first = None;
            oldest_first(
                &store,
                "s",
                from,
                &mut |row| match row.event.parse::<u64>() {
                    Ok(key) if key >= target => {
                        first = Some(row.revision);
                        ControlFlow::Break(())
                    }
                    _ => ControlFlow::Continue(()),
                },
            )
            .unwrap();
            // The first row keyed `target` or more, counted from the start.
            let expected = (1..=rows).find(|r| r % 4 != 0 && r / 4 >= target);
            assert_eq!(first, expected, "key {target}");
            assert!(
                expected.is_none_or(|e| e - from <= 2 * SEEK_LINEAR),
                "read forward from {from} for {expected:?}"
            );
        }
    }

    #[test]
    fn the_walks_read_their_windows_in_order_and_stop_when_told() {
        let (_dir, store) = store_with(600);
        let mut back = Vec::new();
        newest_first(&store, "s", 590, &mut |row| {
            back.push(row.revision);
            if back.len() == 300 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!(back, (290..=589).rev().collect::<Vec<_>>());
        let mut forward = Vec::new();
        oldest_first(&store, "s", 100, &mut |row| {
            forward.push(row.revision);
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(forward, (101..=600).collect::<Vec<_>>());
    }

    #[test]
    fn every_row_is_visited_once_in_order_across_many_batches() {
        let rows = (BATCH_ROWS * (BATCHES_IN_FLIGHT + 3) + 17) as u64;
        let (_dir, store) = store_with(rows);
        let mut seen = Vec::new();
        scan(&store, "s", &mut |row| {
            seen.push((
                row.revision,
                row.operation_id.to_owned(),
                row.kind.to_owned(),
                row.event.to_owned(),
            ));
        })
        .unwrap();
        let expected: Vec<_> = (1..=rows)
            .map(|n| {
                (
                    n,
                    format!("op-{n}"),
                    "k".to_owned(),
                    format!("{{\"n\":{n}}}"),
                )
            })
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_panicking_visitor_is_reported_as_its_own_panic() {
        let (_dir, store) = store_with(BATCH_ROWS as u64 * 3);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scan(&store, "s", &mut |row| {
                assert!(row.revision < 300, "visitor gave up at {}", row.revision);
            })
        }));
        let panic = outcome.expect_err("the visitor's panic reaches the caller");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("visitor gave up at 300"), "{message}");
    }
}
