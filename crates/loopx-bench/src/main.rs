//! `loopx-bench`: wall-clock latency of the real `loopx` release binary on
//! large ledgers.
//!
//! What it is for: answering "does `status` and `append-iteration` stay
//! flat, and does `validate` stay fast, as a loop grows to 100,000
//! iterations?" with end-to-end numbers a user would see. For each ledger
//! size it seeds a loop directory in-process through the same owner code the
//! CLI uses (`Authority::execute::<LedgerOwner>`, see [`seed`]), then spawns
//! the `loopx` binary repeatedly (`status`, `append-iteration`, `validate`,
//! and `--version` as the process-spawn baseline) and reports median, p95
//! and minimum wall time, spawn to exit, as a Markdown table. Timed
//! `append-iteration` runs are real durable commits (`synchronous=FULL`,
//! WAL) plus the view rewrites the CLI does after every commit.
//!
//! What it is not: a micro-benchmark of the library (nothing here isolates
//! decide/evolve or SQLite from process start-up), a statistically rigorous
//! harness (no outlier rejection, no confidence intervals, no CPU pinning),
//! a load or concurrency test (one writer, one process at a time), or a
//! test of crash safety (seeding deliberately uses `synchronous=OFF`). It is
//! not run by `cargo test`; run it with `benches/cli_latency.sh`.

mod measure;
mod seed;

use measure::{json_of, time_once, time_runs, Summary};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "\
usage: loopx-bench [--loopx PATH] [--runs N] [--sizes N,N,...] [--validate-runs N]
                   [--markdown-out FILE] [--keep]

  --loopx PATH          the loopx binary to time (default: the loopx next to
                        this executable, i.e. target/release/loopx)
  --runs N              timed runs per command and size (default 30)
  --sizes LIST          ledger sizes in iterations (default 1000,10000,100000)
  --validate-runs N     timed validate runs per size (default: --runs, but at
                        most 10 for sizes of 100,000 and more)
  --markdown-out FILE   also write the result table to FILE
  --keep                keep the seeded loop directories (default: delete)
";

/// Sizes at and above which `validate` gets at most this many runs by
/// default (a run costs about a second there).
const LARGE: u64 = 100_000;
const LARGE_VALIDATE_RUNS: usize = 10;

struct Options {
    loopx: PathBuf,
    runs: usize,
    sizes: Vec<u64>,
    validate_runs: Option<usize>,
    markdown_out: Option<PathBuf>,
    keep: bool,
}

fn parse_options() -> Result<Option<Options>> {
    let mut options = Options {
        loopx: default_loopx()?,
        runs: 30,
        sizes: vec![1_000, 10_000, 100_000],
        validate_runs: None,
        markdown_out: None,
        keep: false,
    };
    let mut args = std::env::args().skip(1);
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
                options.sizes = value()?
                    .split(',')
                    .map(|s| positive(&flag, s).map(|n| n as u64))
                    .collect::<Result<_>>()?
            }
            "--markdown-out" => options.markdown_out = Some(PathBuf::from(value()?)),
            "--keep" => options.keep = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?}\n\n{USAGE}").into()),
        }
    }
    if !options.loopx.is_file() {
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
struct Row {
    command: &'static str,
    size: Option<u64>,
    summary: Summary,
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
    let loopx = options.loopx.canonicalize()?;
    let version = String::from_utf8_lossy(
        &std::process::Command::new(&loopx)
            .arg("--version")
            .output()?
            .stdout,
    )
    .trim()
    .to_owned();
    let work = std::env::temp_dir().join(format!("loopx-bench-{}", std::process::id()));
    eprintln!(
        "loopx-bench: timing {} ({version}), {} runs per command, sizes {:?}, in {}",
        loopx.display(),
        options.runs,
        options.sizes,
        work.display()
    );

    let mut rows = Vec::new();
    time_once(&loopx, &["--version"])?; // warm-up
    rows.push(Row {
        command: "loopx --version (spawn baseline)",
        size: None,
        summary: Summary::of(&time_runs(&loopx, &["--version"], options.runs)?),
    });

    let result = options.sizes.iter().try_for_each(|&size| {
        bench_size(
            &loopx,
            &options,
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

    let table = markdown_table(&rows);
    print!("{table}");
    if let Some(path) = &options.markdown_out {
        std::fs::write(path, &table)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("loopx-bench: table written to {}", path.display());
    }
    Ok(())
}

fn bench_size(
    loopx: &Path,
    options: &Options,
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

    eprintln!("loopx-bench: {size}: status x{}", options.runs);
    let status_times = time_runs(loopx, &status_args, options.runs)?;
    eprintln!(
        "loopx-bench: {size}: append-iteration x{} (+1 warm-up)",
        options.runs
    );
    time_once(loopx, &append_args)?; // warm-up; also writes the views
    let append_times = time_runs(loopx, &append_args, options.runs)?;
    eprintln!("loopx-bench: {size}: validate x{validate_runs} (+1 warm-up)");
    time_once(loopx, &validate_args)?;
    let validate_times = time_runs(loopx, &validate_args, validate_runs)?;

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

/// Rows grouped by command (baseline first), then by size.
fn markdown_table(rows: &[Row]) -> String {
    let mut order: Vec<&Row> = rows.iter().collect();
    let rank = |command: &str| rows.iter().position(|r| r.command == command);
    order.sort_by_key(|r| (rank(r.command), r.size));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| command | ledger iterations | median ms | p95 ms | min ms | runs |"
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

fn thousands(n: u64) -> String {
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
