//! `loopx-bench`: wall-clock latency of the real `loopx` release binary on
//! large ledgers and crowded goals, and of the pure goal owner in process.
//!
//! Suites (the first argument; without one, `ledger` runs, as before):
//! - `ledger`: does `status` and `append-iteration` stay flat, and does
//!   `validate` stay fast, as a loop grows to 100,000 iterations? For each
//!   ledger size it seeds a loop directory in-process through the same owner
//!   code the CLI uses (`Authority::execute::<LedgerOwner>`, see [`seed`]),
//!   then spawns the `loopx` binary repeatedly (`status`,
//!   `append-iteration`, `validate`, and `--version` as the process-spawn
//!   baseline) and reports median, p95 and minimum wall time, spawn to exit,
//!   as a Markdown table. Timed `append-iteration` runs are real durable
//!   commits (`synchronous=FULL`, WAL) plus the view rewrites the CLI does
//!   after every commit. Each target is set against a floor timed in the
//!   same run, alternating with it: `loopx-floor` (one durable commit) for
//!   the append, `--version` for the reads, and for `validate`
//!   `loopx-floor --scan` (read every event's text out of SQLite).
//! - `goal-owner`: the pure goal owner in process on the RFC's crowded goal
//!   (20 outcomes, 100 requirements, about 130 KB of declarations, a review
//!   per requirement; see [`crowded`]): p50/p95 in µs of one refinement
//!   (`GoalOwner::decide` + `evolve`) plus the full typed projection
//!   (`inspect::readback` + `gap::gaps`), over `--samples` samples, with
//!   the sub-steps and the public functions they spend their time in timed
//!   on their own (see [`goal_owner`]).
//! - `goal-cli`: the real binary on a loop whose default goal is seeded with
//!   the same crowded goal: `quota should-run`, `goal-acceptance
//!   refine-outcome`, `task-body` and `goal-acceptance inspect --json`, the
//!   task-body size, and the refinement's steps timed in process (see
//!   [`goal_cli`]).
//! - `goal`: `goal-owner` then `goal-cli`.
//! - `drive`: the driver's own overhead per turn with a no-op agent.
//! - `todos`: `todo add`, `todo claim`, `quota should-run` and `task-body`
//!   on goals of 10, 1,000 and 10,000 todos seeded through the bulk path,
//!   each against its floor and against itself at the smallest size (see
//!   [`todos`]).
//! - `views`: what the dashboard polls (`/fragment/live`, `/api/turns`,
//!   `/api/cost`, iteration 1) on loops driven for 20, 2,000 and 20,000
//!   turns, against `/api/status` (see [`views`]).
//! - `snapshot`: one workspace snapshot against `git add -A && git
//!   commit` of the same small change, on repositories of 100 to 10,000
//!   files (see [`snapshot`]).
//! - `panel`: `loopx panel --phase result_review` with an instant fake
//!   reviewer, against `goal-focus review --file` alone (see [`panel`]).
//!
//! What it is not: a statistically rigorous harness (no outlier rejection,
//! no confidence intervals, no CPU pinning), a load or concurrency test (one
//! writer, one process at a time), or a test of crash safety (seeding
//! deliberately uses `synchronous=OFF`). Only `goal-owner` isolates the
//! owner from process start-up and SQLite; the CLI suites time whole
//! processes. It is not run by `cargo test`; run it with
//! `benches/cli_latency.sh [SUITE] [FLAGS]`.

mod claims;
mod crowded;
mod drive_overhead;
mod goal_cli;
mod goal_owner;
mod measure;
mod moving;
mod panel;
mod seed;
mod snapshot;
mod todos;
mod views;

use measure::{json_of, time_once, time_runs, Summary};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "\
usage: loopx-bench [ledger] [--loopx PATH] [--runs N] [--sizes N,N,...]
                   [--validate-runs N] [--markdown-out FILE] [--keep]
       loopx-bench goal-owner [--samples N] [--warmup N] [--markdown-out FILE]
       loopx-bench goal-cli [--loopx PATH] [--runs N] [--markdown-out FILE] [--keep]
       loopx-bench goal [any goal-owner or goal-cli flag]
       loopx-bench todos [--loopx PATH] [--runs N] [--sizes N,N,...] [--markdown-out FILE] [--keep]

suites:
  ledger                the loopx CLI on seeded ledgers (the default):
                        status, append-iteration and validate
  goal-owner            the pure goal owner in process on the crowded goal
                        (20 outcomes, 100 requirements, ~130 KB declared):
                        one refinement (decide + evolve) plus the full
                        projection (inspect::readback + gap::gaps), in µs
  goal-cli              the loopx CLI on a loop seeded with the crowded goal:
                        quota should-run, goal-acceptance refine-outcome,
                        task-body and goal-acceptance inspect --json
  goal                  goal-owner, then goal-cli
  drive                 the driver's own overhead per turn (--runs turns of a no-op agent)
  panel                 loopx panel's overhead per result review (--runs reviews by an
                        instant fake reviewer, against goal-focus review --file)
  claims                todo claims/s and p50/p99 on one goal, N workers in
                        process and as processes (--runs claims per worker);
                        SQLite, or --store postgres://USER@HOST:PORT/DB (a
                        fresh database per N is created on that server)
  todos                 todo add, todo claim, quota should-run and task-body
                        on goals of --sizes todos (default 10,1000,10000),
                        seeded by one `todo add --from-file` each; each
                        alternating with its floor, and its ratio to itself
                        at the smallest size
  views                 what the dashboard polls (fragment/live, api/turns,
                        api/cost, api/iterations/1) on loops seeded with
                        --sizes turns (default 20,2000,20000), against
                        /api/status, and each at the largest size over the
                        smallest
  snapshot              one workspace snapshot (the driver's, before a turn) on
                        repositories of --sizes files (default 100,1000,10000)
                        with a small change, alternating with a plain
                        `git add -A && git commit` of the same change
  move                  loopx migrate --from-dir into --store postgres://…
                        on seeded ledgers (--sizes; at most 5 runs each, a
                        fresh database per run, dropped after it)

  --loopx PATH          the loopx binary to time (default: the loopx next to
                        this executable, i.e. target/release/loopx)
  --runs N              timed runs per command and size (default 30)
  --sizes LIST          ledger sizes in iterations (default 1000,10000,100000)
  --validate-runs N     timed validate runs per size (default: --runs, but at
                        most 10 for sizes of 100,000 and more)
  --samples N           goal-owner: timed samples (default 2000)
  --warmup N            goal-owner: untimed warm-up samples (default 200)
  --markdown-out FILE   also write the result tables to FILE
  --keep                keep the seeded loop directories (default: delete)
  --store URL           claims, move: the PostgreSQL server to measure
  --workers LIST        claims: worker counts (default 1,8,32)
";

/// Sizes at and above which `validate` gets at most this many runs by
/// default (a run costs about a second there).
const LARGE: u64 = 100_000;
const LARGE_VALIDATE_RUNS: usize = 10;

/// Timed runs per size of the move suite: each copies the whole ledger.
const MOVE_RUNS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suite {
    Ledger,
    GoalOwner,
    GoalCli,
    Goal,
    Drive,
    Claims,
    Move,
    Panel,
    Todos,
    Views,
    Snapshot,
}

struct Options {
    suite: Suite,
    loopx: PathBuf,
    runs: usize,
    sizes: Vec<u64>,
    validate_runs: Option<usize>,
    samples: usize,
    warmup: usize,
    markdown_out: Option<PathBuf>,
    keep: bool,
    store: Option<String>,
    workers: Vec<usize>,
}

fn parse_options() -> Result<Option<Options>> {
    let mut args = std::env::args().skip(1).peekable();
    let suite = match args.peek().map(String::as_str) {
        Some("ledger") => Some(Suite::Ledger),
        Some("goal-owner") => Some(Suite::GoalOwner),
        Some("goal-cli") => Some(Suite::GoalCli),
        Some("goal") => Some(Suite::Goal),
        Some("drive") => Some(Suite::Drive),
        Some("claims") => Some(Suite::Claims),
        Some("move") => Some(Suite::Move),
        Some("panel") => Some(Suite::Panel),
        Some("todos") => Some(Suite::Todos),
        Some("views") => Some(Suite::Views),
        Some("snapshot") => Some(Suite::Snapshot),
        _ => None,
    };
    if suite.is_some() {
        args.next();
    }
    let mut options = Options {
        suite: suite.unwrap_or(Suite::Ledger),
        loopx: default_loopx()?,
        runs: 30,
        sizes: vec![1_000, 10_000, 100_000],
        validate_runs: None,
        samples: 2_000,
        warmup: 200,
        markdown_out: None,
        keep: false,
        store: None,
        workers: vec![1, 8, 32],
    };
    let mut sizes_given = false;
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))
        };
        match flag.as_str() {
            "--loopx" => options.loopx = PathBuf::from(value()?),
            "--runs" => options.runs = positive(&flag, &value()?)?,
            "--validate-runs" => options.validate_runs = Some(positive(&flag, &value()?)?),
            "--sizes" => {
                sizes_given = true;
                options.sizes = value()?
                    .split(',')
                    .map(|s| positive(&flag, s).map(|n| n as u64))
                    .collect::<Result<_>>()?
            }
            "--samples" => options.samples = positive(&flag, &value()?)?,
            "--warmup" => {
                options.warmup = value()?
                    .trim()
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("{flag} expects a non-negative integer"))?
            }
            "--markdown-out" => options.markdown_out = Some(PathBuf::from(value()?)),
            "--keep" => options.keep = true,
            "--store" => options.store = Some(value()?),
            "--workers" => {
                options.workers = value()?
                    .split(',')
                    .map(|s| positive(&flag, s))
                    .collect::<Result<_>>()?
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?}\n\n{USAGE}").into()),
        }
    }
    if options.suite == Suite::Todos && !sizes_given {
        options.sizes = vec![10, 1_000, 10_000];
    }
    if options.suite == Suite::Views && !sizes_given {
        options.sizes = vec![20, 2_000, 20_000];
    }
    if options.suite == Suite::Snapshot && !sizes_given {
        options.sizes = vec![100, 1_000, 10_000];
    }
    let in_process = matches!(options.suite, Suite::GoalOwner | Suite::Snapshot);
    if !in_process && !options.loopx.is_file() {
        return Err(format!(
            "no loopx binary at {}: build it with `cargo build --release -p loopx` or pass --loopx PATH",
            options.loopx.display()
        )
        .into());
    }
    Ok(Some(options))
}

fn positive(flag: &str, text: &str) -> Result<usize> {
    match text.trim().replace('_', "").parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag} expects a positive integer, got {text:?}").into()),
    }
}

fn default_loopx() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or("the current executable has no directory")?;
    Ok(dir.join(format!("loopx{}", std::env::consts::EXE_SUFFIX)))
}

/// One row of the result table.
pub(crate) struct Row {
    pub(crate) command: &'static str,
    pub(crate) size: Option<u64>,
    pub(crate) summary: Summary,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loopx-bench: error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let Some(options) = parse_options()? else {
        return Ok(());
    };
    let report = match options.suite {
        Suite::Ledger => run_ledger(&options)?,
        Suite::GoalOwner => run_goal_owner(&options)?,
        Suite::GoalCli => run_goal_cli(&options)?,
        Suite::Goal => format!("{}\n{}", run_goal_owner(&options)?, run_goal_cli(&options)?),
        Suite::Claims => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-claims-{}", std::process::id()));
            let result = claims::run(
                &options.loopx.canonicalize()?,
                options.store.as_deref(),
                &options.workers,
                options.runs,
                &work,
            );
            if !options.keep {
                let _ = std::fs::remove_dir_all(&work);
            }
            result?
        }
        Suite::Move => {
            let url = options
                .store
                .as_deref()
                .ok_or("move needs --store postgres://USER@HOST:PORT/DATABASE (a server where it may create databases)")?;
            let work =
                std::env::temp_dir().join(format!("loopx-bench-move-{}", std::process::id()));
            let result = moving::run(
                &options.loopx.canonicalize()?,
                url,
                &options.sizes,
                options.runs.min(MOVE_RUNS),
                &work,
            );
            let _ = std::fs::remove_dir_all(&work);
            result?
        }
        Suite::Drive => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-drive-{}", std::process::id()));
            let result = drive_overhead::run(&options.loopx.canonicalize()?, options.runs, &work);
            let _ = std::fs::remove_dir_all(&work);
            result?
        }
        Suite::Todos => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-todos-{}", std::process::id()));
            let built = options.loopx.canonicalize()?;
            let loopx = installed_copy(&built, &work)?;
            let floor = installed_copy(&floor_path()?, &work)?;
            let result = todos::run(
                &todos::Options {
                    loopx: &loopx,
                    floor: &floor,
                    sizes: &options.sizes,
                    runs: options.runs,
                },
                &work,
            );
            kept_or_removed(&work, options.keep, result)?
        }
        Suite::Views => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-views-{}", std::process::id()));
            let built = options.loopx.canonicalize()?;
            let loopx = installed_copy(&built, &work)?;
            let result = views::run(
                &views::Options {
                    loopx: &loopx,
                    sizes: &options.sizes,
                    runs: options.runs,
                },
                &work,
            );
            kept_or_removed(&work, options.keep, result)?
        }
        Suite::Snapshot => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-snapshot-{}", std::process::id()));
            let result = snapshot::run(&options.sizes, options.runs, &work);
            kept_or_removed(&work, options.keep, result)?
        }
        Suite::Panel => {
            let work =
                std::env::temp_dir().join(format!("loopx-bench-panel-{}", std::process::id()));
            let result = panel::run(&options.loopx.canonicalize()?, options.runs, &work);
            let _ = std::fs::remove_dir_all(&work);
            result?
        }
    };
    print!("{report}");
    if let Some(path) = &options.markdown_out {
        std::fs::write(path, &report)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("loopx-bench: table written to {}", path.display());
    }
    Ok(())
}

fn run_goal_owner(options: &Options) -> Result<String> {
    goal_owner::run(&goal_owner::Options {
        samples: options.samples,
        warmup: options.warmup,
    })
}

fn run_goal_cli(options: &Options) -> Result<String> {
    let loopx = options.loopx.canonicalize()?;
    let work = std::env::temp_dir().join(format!("loopx-bench-goal-{}", std::process::id()));
    eprintln!(
        "loopx-bench: goal-cli: timing {}, {} runs per command, in {}",
        loopx.display(),
        options.runs,
        work.display()
    );
    let result = goal_cli::run(
        &goal_cli::Options {
            loopx: &loopx,
            runs: options.runs,
        },
        &work,
    );
    kept_or_removed(&work, options.keep, result)
}

/// A suite's `result`, with its scratch directory `work` removed, or kept
/// (and said so) when asked to or when the suite failed.
fn kept_or_removed<T>(work: &Path, keep: bool, result: Result<T>) -> Result<T> {
    if keep || result.is_err() {
        eprintln!("loopx-bench: loop directories kept in {}", work.display());
    } else {
        std::fs::remove_dir_all(work)?;
    }
    result
}

fn run_ledger(options: &Options) -> Result<String> {
    let work = std::env::temp_dir().join(format!("loopx-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let built = options.loopx.canonicalize()?;
    let loopx = installed_copy(&built, &work)?;
    let version = String::from_utf8_lossy(
        &std::process::Command::new(&loopx)
            .arg("--version")
            .output()?
            .stdout,
    )
    .trim()
    .to_owned();
    eprintln!(
        "loopx-bench: timing a copy of {} ({version}), {} runs per command, sizes {:?}, in {}",
        built.display(),
        options.runs,
        options.sizes,
        work.display()
    );

    let mut rows = Vec::new();
    time_once(&loopx, &["--version"])?; // warm-up
    rows.push(Row {
        command: VERSION,
        size: None,
        summary: Summary::of(&time_runs(&loopx, &["--version"], options.runs)?),
    });

    // The floor, in this same run: the cheapest durable one-commit process
    // (see src/floor.rs), with loopx's pragmas and with SQLite's default
    // checkpoint on close, on a small database of its own.
    let floor = installed_copy(&floor_path()?, &work)?;
    let floor_db = work.join("floor.sqlite");
    let floor_db = floor_db
        .to_str()
        .ok_or("the temporary directory is not UTF-8")?;
    time_once(&floor, &["--setup", floor_db])?;
    time_once(&floor, &[floor_db])?; // warm-up
    rows.push(Row {
        command: FLOOR,
        size: None,
        summary: Summary::of(&time_runs(&floor, &[floor_db], options.runs)?),
    });
    rows.push(Row {
        command: "floor, checkpoint on close (as loopx before)",
        size: None,
        summary: Summary::of(&time_runs(
            &floor,
            &["--checkpoint-on-close", floor_db],
            options.runs,
        )?),
    });

    let result = options.sizes.iter().try_for_each(|&size| {
        bench_size(
            &loopx,
            options,
            (&floor, floor_db),
            &work.join(size.to_string()),
            size,
            &mut rows,
        )
    });
    if options.keep || result.is_err() {
        eprintln!("loopx-bench: loop directories kept in {}", work.display());
    } else {
        std::fs::remove_dir_all(&work)?;
    }
    result?;
    Ok(format!(
        "{}\n{}",
        markdown_table(&rows, "ledger iterations"),
        ratios(&rows)
    ))
}

const FLOOR: &str = "floor: open SQLite, one FULL commit, exit";
const VERSION: &str = "loopx --version (spawn baseline)";
const FLOOR_ALTERNATING: &str = "floor, alternating with append-iteration";
const VERSION_ALTERNATING: &str = "--version, alternating with status and done";
const SCAN_FLOOR: &str = "journal scan floor: read every event's text, alternating with validate";

/// `runs` runs of `a` and of `b`, alternating a, b, a, b, ...
fn time_alternating(
    (a, a_args): (&Path, &[&str]),
    (b, b_args): (&Path, &[&str]),
    runs: usize,
) -> Result<(Vec<std::time::Duration>, Vec<std::time::Duration>)> {
    let mut times = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        times.0.push(time_once(a, a_args)?);
        times.1.push(time_once(b, b_args)?);
    }
    Ok(times)
}

/// The targets, as ratios of medians measured in this run: writes against
/// the floor, reads against process start.
fn ratios(rows: &[Row]) -> String {
    let median = |command: &str, size: Option<u64>| {
        rows.iter()
            .find(|r| r.command == command && r.size == size)
            .map(|r| r.summary.median_ms)
    };
    let mut out = String::from("| ratio of medians (baseline alternating in the same run) | ledger iterations | ratio | target |\n|---|---:|---:|---:|\n");
    for row in rows.iter().filter(|r| r.size.is_some()) {
        let (base, name, target) = match row.command {
            "append-iteration" => (
                median(FLOOR_ALTERNATING, row.size),
                "append-iteration / floor",
                Some(1.3),
            ),
            "status" | "done" => (
                median(VERSION_ALTERNATING, row.size),
                row.command,
                Some(1.5),
            ),
            // No ratio is set for validate (its target is the rate below);
            // this one says how far it is from reading alone.
            "validate" => (
                median(SCAN_FLOOR, row.size),
                "validate / journal scan floor",
                None,
            ),
            _ => continue,
        };
        let Some(base) = base else { continue };
        let label = if row.command == "status" || row.command == "done" {
            format!("{name} / --version")
        } else {
            name.to_owned()
        };
        let _ = writeln!(
            out,
            "| {label} | {} | {:.2} | {} |",
            row.size.map_or_else(String::new, thousands),
            row.summary.median_ms / base,
            target.map_or_else(|| "-".to_owned(), |target| format!("≤ {target}"))
        );
    }
    out.push_str(&throughput(rows));
    out
}

/// `validate`'s target is a rate, not a ratio: iterations refolded per
/// second, beside the rate at which the scan floor merely reads them out
/// of SQLite in the same run (what bounds any audit on this machine).
fn throughput(rows: &[Row]) -> String {
    let mut out = String::from("\n| throughput (medians) | ledger iterations | per second | target |\n|---|---:|---:|---:|\n");
    for row in rows {
        let (label, target) = match row.command {
            "validate" => ("validate: iterations refolded", "≥ 1,000,000"),
            SCAN_FLOOR => ("journal scan floor: events read", "-"),
            _ => continue,
        };
        let Some(size) = row.size else { continue };
        let per_second = size as f64 / (row.summary.median_ms / 1000.0);
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {target} |",
            thousands(size),
            thousands(per_second.round() as u64)
        );
    }
    out
}

/// A copy of `binary` in `work/bin`, to be timed instead of the file the
/// linker wrote. Both are in the page cache, but a file written by a
/// linker sits there in small pieces, so a process run from it takes more
/// page faults than one run from a copy (or from an installed binary read
/// back from disk): 40 more for an append, about 10% of its time, so that
/// timing a fresh build would charge loopx, which touches far more of its
/// binary than the floor does, for how it was built.
fn installed_copy(binary: &Path, work: &Path) -> Result<PathBuf> {
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin)?;
    let name = binary
        .file_name()
        .ok_or_else(|| format!("{} names no file", binary.display()))?;
    let copy = bin.join(name);
    std::fs::copy(binary, &copy).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            binary.display(),
            copy.display()
        )
    })?;
    Ok(copy)
}

/// `loopx-floor`, built beside this executable.
fn floor_path() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .ok_or("the current executable has no directory")?
        .join(format!("loopx-floor{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        return Err(format!(
            "no loopx-floor at {}: build it with `cargo build --release -p loopx-bench`",
            path.display()
        )
        .into());
    }
    Ok(path)
}

fn bench_size(
    loopx: &Path,
    options: &Options,
    (floor, floor_db): (&Path, &str),
    dir: &Path,
    size: u64,
    rows: &mut Vec<Row>,
) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    eprintln!(
        "loopx-bench: seeding {size} iterations into {}",
        dir.display()
    );
    let started = Instant::now();
    seed::seed(dir, size)?;
    eprintln!(
        "loopx-bench: seeded {size} iterations in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let d = dir.to_str().ok_or("the temporary directory is not UTF-8")?;

    // The seed is checked through the binary itself before anything is
    // timed; this run also warms the page cache and the status path.
    let status = json_of(loopx, &["--json", "status", "--dir", d])?;
    expect_iterations(&status, size, "status after seeding")?;

    let status_args = ["status", "--dir", d];
    let done_args = ["done", "--dir", d];
    let append_args = [
        "append-iteration",
        "--dir",
        d,
        "--mode",
        "bounded-research",
        "--objective",
        "bench",
        "--decision",
        "continue",
    ];
    let validate_args = ["validate", "--dir", d];
    let validate_runs = options.validate_runs.unwrap_or(if size >= LARGE {
        options.runs.min(LARGE_VALIDATE_RUNS)
    } else {
        options.runs
    });

    // Each target is a ratio, so each command alternates with its
    // baseline run for run: a burst of load on a shared machine (other
    // builds' fsyncs) then lands on both sides instead of on one.
    let version_args = ["--version"];
    let floor_args = [floor_db];
    eprintln!(
        "loopx-bench: {size}: status x{}, alternating with --version",
        options.runs
    );
    let (status_times, version_times_status) =
        time_alternating((loopx, &status_args), (loopx, &version_args), options.runs)?;
    eprintln!(
        "loopx-bench: {size}: done x{}, alternating with --version",
        options.runs
    );
    let (done_times, version_times_done) =
        time_alternating((loopx, &done_args), (loopx, &version_args), options.runs)?;
    // Before the appends, so that it refolds exactly `size` iterations.
    eprintln!(
        "loopx-bench: {size}: validate x{validate_runs} (+1 warm-up), alternating with the journal scan floor"
    );
    time_once(loopx, &validate_args)?;
    let database = dir.join("loopx.sqlite");
    let database = database
        .to_str()
        .ok_or("the temporary directory is not UTF-8")?;
    let scan_args = ["--scan", database];
    let (validate_times, scan_times) =
        time_alternating((loopx, &validate_args), (floor, &scan_args), validate_runs)?;
    rows.push(Row {
        command: SCAN_FLOOR,
        size: Some(size),
        summary: Summary::of(&scan_times),
    });

    eprintln!(
        "loopx-bench: {size}: append-iteration x{} (+1 warm-up), alternating with the floor",
        options.runs
    );
    time_once(loopx, &append_args)?; // warm-up; also writes the views
    let (append_times, floor_times) =
        time_alternating((loopx, &append_args), (floor, &floor_args), options.runs)?;
    let mut version_times = version_times_status;
    version_times.extend(version_times_done);
    rows.push(Row {
        command: VERSION_ALTERNATING,
        size: Some(size),
        summary: Summary::of(&version_times),
    });
    rows.push(Row {
        command: FLOOR_ALTERNATING,
        size: Some(size),
        summary: Summary::of(&floor_times),
    });
    // Every timed append must have been banked as a real record.
    let appended = 1 + options.runs as u64;
    let validated = json_of(loopx, &["--json", "validate", "--dir", d])?;
    if validated["checked"]["iterations"].as_u64() != Some(size + appended) {
        return Err(format!(
            "validate after the runs saw {} iterations, expected {}",
            validated["checked"]["iterations"],
            size + appended
        )
        .into());
    }

    for (command, times) in [
        ("status", &status_times),
        ("done", &done_times),
        ("append-iteration", &append_times),
        ("validate", &validate_times),
    ] {
        rows.push(Row {
            command,
            size: Some(size),
            summary: Summary::of(times),
        });
    }
    Ok(())
}

fn expect_iterations(json: &serde_json::Value, size: u64, what: &str) -> Result<()> {
    match json["iterations"].as_u64() {
        Some(n) if n == size => Ok(()),
        _ => Err(format!(
            "{what}: expected {size} iterations, loopx reports {}",
            json["iterations"]
        )
        .into()),
    }
}

/// Rows grouped by command (baseline first), then by size, in a column
/// named `sizes` (what a size counts).
pub(crate) fn markdown_table(rows: &[Row], sizes: &str) -> String {
    let mut order: Vec<&Row> = rows.iter().collect();
    let rank = |command: &str| rows.iter().position(|r| r.command == command);
    order.sort_by_key(|r| (rank(r.command), r.size));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| command | {sizes} | median ms | p95 ms | min ms | runs |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for row in order {
        let s = row.summary;
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} |",
            row.command,
            row.size.map_or_else(|| "-".to_owned(), thousands),
            s.median_ms,
            s.p95_ms,
            s.min_ms,
            s.runs
        );
    }
    out
}

pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
