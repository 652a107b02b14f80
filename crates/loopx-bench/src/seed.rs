//! Building a large loop directory quickly, through the owner code path.
//!
//! Seeding 100,000 iterations through the CLI would cost one process and
//! one fsync per record. Instead the ledger is written in-process by the
//! same [`Authority`] + [`LedgerOwner`] pair the CLI uses, on a store opened
//! with [`Durability::Unsafe`] (`synchronous=OFF`). The resulting file is
//! byte-for-byte the kind of database the CLI writes: same schema, same
//! journal entries, same snapshot; only the seeding is not crash-safe.

use jiff::Timestamp;
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, Mode};
use loopx_core::ledger::{
    EvidenceChecked, InitLoop, IterationReport, LedgerContext, LedgerOwner, LedgerRequest, STREAM,
};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::{Access, Durability, SqliteStore};
use loopx_store::Authority;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::Result;

/// Headroom above the seeded size, so that timed appends stay legal (an
/// append that spends the last iteration must stop the loop).
pub const APPEND_HEADROOM: u64 = 1000;

/// Create `dir` as a loop holding `iterations` realistic iteration records.
pub fn seed(dir: &Path, iterations: u64) -> Result<()> {
    std::fs::create_dir_all(dir.join("proof_artifacts"))?;
    let database = dir.join("loopx.sqlite");
    let store = SqliteStore::open_with(&database, Access::Create, Durability::Unsafe)?;
    let authority = Authority::new(&store);

    let init = LedgerRequest::Init(InitLoop::new(
        "Benchmark fixture: find and document the latency profile of the loopx CLI on large ledgers",
        "status and append-iteration stay flat in ledger size; validate stays linear",
        Budget::iterations_only(iterations + APPEND_HEADROOM),
    ));
    execute(&authority, &OperationId::parse("bench-init")?, &init)?;

    let started = Instant::now();
    let step = (iterations / 10).max(1);
    for i in 1..=iterations {
        let op_id = OperationId::parse(&format!("bench-seed-{i:07}"))?;
        execute(&authority, &op_id, &report(i))?;
        if i % step == 0 || i == iterations {
            eprintln!(
                "  seeded {i:>7} / {iterations} iterations ({:>3}%, {:.1} s)",
                i * 100 / iterations,
                started.elapsed().as_secs_f64()
            );
        }
    }
    drop(store);
    // Seeding wrote everything with synchronous=OFF: flush it now, so that
    // the kernel's writeback of hundreds of MB does not land in (and slow
    // the fsyncs of) the timed runs that follow.
    std::fs::File::open(&database)?.sync_all()?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn execute(
    authority: &Authority<'_, SqliteStore>,
    op_id: &OperationId,
    request: &LedgerRequest,
) -> Result<()> {
    let now = Timestamp::now();
    let context = LedgerContext {
        now,
        operation_id: op_id,
        files: &NoFiles,
    };
    authority
        .execute::<LedgerOwner>(STREAM, op_id, request, &context, now)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// One iteration record of roughly the size an agent writes: an ~80-char
/// objective, a ~200-char output, a few ids and gaps, and some spend.
fn report(i: u64) -> LedgerRequest {
    LedgerRequest::AppendIteration(IterationReport {
        mode: Some(Mode::BoundedResearch),
        objective: format!(
            "Iteration {i:07}: narrow the regression window in the storage layer benchmarks"
        ),
        decision: Some(Decision::Continue),
        evidence_checked: EvidenceChecked {
            source_ids: vec![format!("src-{}", i % 97)],
            claim_ids: vec![],
            evidence_ids: vec![format!("ev-{i:07}-a"), format!("ev-{i:07}-b")],
            guard_refs: vec![],
        },
        input_refs: vec!["notes/plan.md".into()],
        actions_taken: vec![
            "ran the latency suite".into(),
            "compared against baseline".into(),
        ],
        remaining_gaps: vec![
            "p95 on cold cache unexplained".into(),
            "no data for 1M records".into(),
        ],
        output: format!(
            "Iteration {i}: re-ran the suite on the seeded ledger, compared medians against the \
             previous baseline and found no change beyond noise; the cold-cache p95 is still \
             unexplained and needs a dedicated run."
        ),
        tokens: 12_000 + (i % 5_000),
        usd: 0.0125,
        wall_time_seconds: 45,
        next_action: "repeat with a cold page cache".into(),
        executor_provider: "bench".into(),
        ..Default::default()
    })
}

/// Create `dir` as a loop whose goal holds `todos` open todos (`t1` ..
/// `tN`), through the real binary: `loopx init`, then one `loopx todo add
/// --from-file` (the bulk path: one operation, one durable commit, however
/// many todos). Returns how long the `todo add` took.
pub fn todo_goal(loopx: &Path, dir: &Path, todos: usize) -> Result<std::time::Duration> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let d = dir.to_str().ok_or("the work directory is not UTF-8")?;
    crate::measure::json_of(
        loopx,
        &[
            "--json",
            "init",
            "--dir",
            d,
            "--goal",
            "Benchmark fixture: a goal with a large todo frontier",
            "--success-criteria",
            "todo writes, claims and should-run stay flat in the number of todos",
            "--max-iterations",
            "1000",
        ],
    )?;
    let plan = dir.with_extension("plan.jsonl");
    let mut lines = String::with_capacity(todos * 96);
    for i in 1..=todos {
        lines.push_str(&format!(
            "{{\"id\": \"t{i}\", \"title\": \"Step {i:05} of the imported plan: check one module against its spec\"}}\n"
        ));
    }
    std::fs::write(&plan, lines)?;
    let started = Instant::now();
    crate::measure::json_of(
        loopx,
        &[
            "--json",
            "todo",
            "add",
            "--dir",
            d,
            "--from-file",
            plan.to_str().ok_or("the work directory is not UTF-8")?,
        ],
    )?;
    let took = started.elapsed();
    std::fs::remove_file(&plan)?;
    Ok(took)
}

/// Copy the seeded database (and its write-ahead log, which a loopx
/// process leaves in place) aside.
pub fn set_aside(database: &Path, pristine: &Path) -> Result<()> {
    std::fs::create_dir_all(pristine)?;
    for (from, name) in companions(database) {
        let to = pristine.join(&name);
        if name.ends_with("-shm") {
            continue;
        }
        match std::fs::copy(&from, &to) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = std::fs::remove_file(&to);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Put the set-aside database back, exactly: main file and log as they
/// were, and no shared-memory index from a later process; fsynced, so the
/// copy's writeback does not land in the timed commit's fsync.
pub fn restore(pristine: &Path, database: &Path) -> Result<()> {
    for (to, name) in companions(database) {
        let from = pristine.join(name);
        if from.exists() {
            std::fs::copy(&from, &to)?;
            std::fs::File::open(&to)?.sync_all()?;
        } else if to.exists() {
            std::fs::remove_file(&to)?;
        }
    }
    let dir = database.parent().ok_or("the database has no directory")?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The database, its log and its shared-memory index, with their names.
fn companions(database: &Path) -> Vec<(PathBuf, String)> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut path = database.as_os_str().to_owned();
            path.push(suffix);
            (PathBuf::from(path), format!("loopx.sqlite{suffix}"))
        })
        .collect()
}
