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

use loopx_store::{JournalRow, Store, StoreError};
use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel};

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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loopx.sqlite");
        let store = SqliteStore::open_with(&path, Access::Create, Durability::Unsafe).unwrap();
        for revision in 1..=rows {
            let operation_id = format!("op-{revision}");
            let event = format!("{{\"n\":{revision}}}");
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
                })
                .unwrap();
        }
        (dir, store)
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
