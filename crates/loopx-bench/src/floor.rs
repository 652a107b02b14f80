//! `loopx-floor`: the cheapest durable write a loopx command could make,
//! timed by `loopx-bench` in the same run as the real binary.
//!
//! One process: open a SQLite file with the pragmas loopx's writers use
//! (WAL, `synchronous=FULL`, persistent log, no checkpoint on close), make
//! one `BEGIN IMMEDIATE` commit of a row about the size of an iteration
//! record, fold the log in when it has grown long as loopx's writers do
//! (`loopx_store::sqlite::fold_long_log`: without it the floor's own log
//! would grow over a run and slow every later floor process), exit. `--checkpoint-on-close` keeps SQLite's default
//! checkpoint on close instead (what loopx did before). `--setup` creates
//! the table and exits. It owns nothing of loopx: no owner, no journal, no
//! views, no argument parser beyond these flags.
//!
//! `--scan PATH` is `validate`'s floor instead: open a loop's database
//! read-only and read the text of every ledger journal event out of
//! SQLite, in revision order, doing nothing with it. No audit can read
//! less than that.

use rusqlite::config::DbConfig;
use rusqlite::{Connection, TransactionBehavior};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: loopx-floor [--setup] [--checkpoint-on-close] PATH\n       loopx-floor --scan PATH");
        return ExitCode::FAILURE;
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    let done = if flag("--scan") {
        scan(path)
    } else {
        write(path, flag("--setup"), flag("--checkpoint-on-close"))
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loopx-floor: {path}: {error}");
            ExitCode::FAILURE
        }
    }
}

fn write(path: &str, setup: bool, checkpoint_on_close: bool) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA journal_size_limit=0; PRAGMA wal_autocheckpoint=0;",
    )?;
    conn.set_db_config(
        DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        !checkpoint_on_close,
    )?;
    if setup {
        return conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        );
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("INSERT INTO floor (body) VALUES (?1)", ["x".repeat(2048)])?;
    tx.commit()?;
    loopx_store::sqlite::fold_long_log(&conn, std::path::Path::new(path));
    Ok(())
}

fn scan(path: &str) -> rusqlite::Result<()> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut statement =
        conn.prepare("SELECT event FROM journal WHERE stream = ?1 ORDER BY revision")?;
    let mut rows = statement.query([loopx_core::ledger::STREAM])?;
    let mut bytes = 0usize;
    while let Some(row) = rows.next()? {
        // The text as SQLite hands it over: no copy, no UTF-8 check.
        bytes += row.get_ref(0)?.as_bytes()?.len();
    }
    std::hint::black_box(bytes);
    Ok(())
}
