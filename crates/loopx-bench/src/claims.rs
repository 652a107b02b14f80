//! The `claims` suite: lease admission throughput on one goal, SQLite on one
//! host against a PostgreSQL server (`--store postgres://…`).
//!
//! For each worker count N it makes a fresh loop (for PostgreSQL, a fresh
//! database on the given server), adds N × `--runs` todos in process, then
//! measures two figures over distinct todos, so every claim is admitted:
//! - server-side: N threads in this process, each with its own store
//!   connection, claiming through `loopx_app::goal::todo::claim` (the
//!   authority's replay -> decide -> CAS and the commit, no process start);
//! - per process: N workers each running `loopx todo claim` processes one
//!   after another (spawn to exit, what an agent on a host sees).
//!
//! Reports claims/s and the p50/p99 latency of one claim. Each todo keeps
//! its lease in a stream of its own (`loopx_core::goal::frontier`), so
//! claims of distinct todos never invalidate each other: N > 1 measures how
//! well the backend commits independent transactions side by side
//! (PostgreSQL groups their WAL flushes; SQLite takes one writer at a
//! time). The "failed" column counts claims that gave up (the authority's
//! bounded retries), which should now stay 0. It owns no rule; it is not
//! run by `cargo test`.

use crate::Result;
use loopx_app::goal::todo as todos;
use loopx_app::goal::GoalTarget;
use loopx_app::loop_dir::LoopDir;
use loopx_core::goal::Actor;
use loopx_store::sqlite::Access;
use loopx_store::Locator;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn run(
    loopx: &Path,
    store: Option<&str>,
    counts: &[usize],
    per_worker: usize,
    work: &Path,
) -> Result<String> {
    std::fs::create_dir_all(work)?;
    let backend = if store.is_some() {
        "PostgreSQL (loopback)"
    } else {
        "SQLite (one host)"
    };
    let mut out = format!(
        "## claims/s on one goal: {backend}\n\n{per_worker} claims per worker, distinct todos.\n\n\
         | N | mode | claims | failed | claims/s | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n"
    );
    for &n in counts {
        let dir = work.join(format!("claims-{n}"));
        let locator = match store {
            Some(url) => fresh_database(url, &format!("loopx_bench_{}_{n}", std::process::id()))?,
            None => format!("sqlite:{}", dir.join("loopx.sqlite").display()),
        };
        let status = Command::new(loopx)
            .args(["init", "--dir"])
            .arg(&dir)
            .args([
                "--goal",
                "claims",
                "--success-criteria",
                "numbers",
                "--store",
                &locator,
            ])
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(format!("init of {} failed", dir.display()).into());
        }
        let parsed = Locator::parse(&locator)?;
        {
            let owner = LoopDir::open_at(&dir, &parsed, Access::ReadWrite)?;
            for todo in 0..2 * n * per_worker {
                todos::add(
                    &owner,
                    &GoalTarget::owner_of_default(),
                    Some(format!("t{todo}")),
                    format!("work {todo}"),
                    &loopx_app::operation::generate(),
                )?;
            }
        }
        eprintln!("loopx-bench: claims: N = {n}");
        // Server-side: threads with their own connections, todos 0..n*per.
        let started = Instant::now();
        let threads: Vec<_> = (0..n)
            .map(|w| {
                let (dir, parsed) = (dir.clone(), parsed.clone());
                std::thread::spawn(move || -> (Vec<Duration>, usize) {
                    let Ok(loop_dir) = LoopDir::open_at(&dir, &parsed, Access::ReadWrite) else {
                        return (Vec::new(), per_worker);
                    };
                    let target = GoalTarget {
                        actor: Actor::Agent(format!("w{w}")),
                        ..GoalTarget::owner_of_default()
                    };
                    let (mut times, mut failed) = (Vec::new(), 0);
                    for i in 0..per_worker {
                        let todo = format!("t{}", w * per_worker + i);
                        let one = Instant::now();
                        let op = loopx_app::operation::generate();
                        match todos::claim(&loop_dir, &target, &todo, 3600, "", &op) {
                            Ok(_) => times.push(one.elapsed()),
                            Err(_) => failed += 1,
                        }
                    }
                    (times, failed)
                })
            })
            .collect();
        let (times, failed) = gather(threads);
        row(&mut out, n, "in process", &times, failed, started.elapsed());
        // Per process: todos n*per..2*n*per.
        let started = Instant::now();
        let workers: Vec<_> = (0..n)
            .map(|w| {
                let (loopx, dir, locator) = (loopx.to_owned(), dir.clone(), locator.clone());
                std::thread::spawn(move || -> (Vec<Duration>, usize) {
                    let (mut times, mut failed) = (Vec::new(), 0);
                    for i in 0..per_worker {
                        let todo = format!("t{}", (n + w) * per_worker + i);
                        let one = Instant::now();
                        let ok = Command::new(&loopx)
                            .args(["todo", "claim", &todo, "--dir"])
                            .arg(&dir)
                            .env("LOOPX_STORE", &locator)
                            .env(loopx_app::driver::env::AGENT_ID, format!("p{w}"))
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status()
                            .is_ok_and(|s| s.success());
                        if ok {
                            times.push(one.elapsed());
                        } else {
                            failed += 1;
                        }
                    }
                    (times, failed)
                })
            })
            .collect();
        let (times, failed) = gather(workers);
        row(
            &mut out,
            n,
            "process per claim",
            &times,
            failed,
            started.elapsed(),
        );
    }
    Ok(out)
}

type Worker = std::thread::JoinHandle<(Vec<Duration>, usize)>;

fn gather(workers: Vec<Worker>) -> (Vec<Duration>, usize) {
    let mut all = (Vec::new(), 0);
    for worker in workers {
        let (times, failed) = worker.join().expect("a worker panicked");
        all.0.extend(times);
        all.1 += failed;
    }
    all
}

fn row(out: &mut String, n: usize, mode: &str, times: &[Duration], failed: usize, wall: Duration) {
    let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |p: usize| {
        ms.get((ms.len() * p).div_ceil(100).max(1) - 1)
            .copied()
            .unwrap_or(0.0)
    };
    let _ = writeln!(
        out,
        "| {n} | {mode} | {} | {failed} | {:.0} | {:.1} | {:.1} |",
        ms.len(),
        ms.len() as f64 / wall.as_secs_f64(),
        rank(50),
        rank(99)
    );
}

/// Drop the database `name` on the server `url` names.
pub fn drop_database(url: &str, name: &str) -> Result<()> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .map_err(|e| format!("cannot reach the server: {e}"))?;
    client.batch_execute(&format!("DROP DATABASE {name}"))?;
    Ok(())
}

/// Create the database `name` on the server `url` names and return its URL.
pub fn fresh_database(url: &str, name: &str) -> Result<String> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .map_err(|e| format!("cannot reach the server: {e}"))?;
    client.batch_execute(&format!("CREATE DATABASE {name}"))?;
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let (server, _) = base
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("//") && !server.ends_with('/'))
        .ok_or("--store must name a database: postgres://USER@HOST:PORT/DATABASE")?;
    Ok(format!("{server}/{name}{query}"))
}
