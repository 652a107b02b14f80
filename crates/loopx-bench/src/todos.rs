//! `loopx-bench todos`: does a todo write, a claim and should-run stay flat
//! as a goal's frontier grows?
//!
//! For each size (`--sizes`, default 10, 1,000 and 10,000 todos) a loop is
//! seeded through the real binary's bulk path ([`seed::todo_goal`]: one
//! `todo add --from-file`, timed and reported), and its database set
//! aside. Timed, spawn to exit, each alternating with its floor in the same
//! run: `todo add` (one new todo) and `todo claim t1`, each on the restored
//! seeded database (untimed restore before every run, so every run is the
//! same durable commit onto exactly N todos), against `loopx-floor` (one
//! durable SQLite commit); `quota should-run` and `task-body` against
//! `--version`. Reported: the table, each command's ratio to itself at the
//! smallest size (the target is ≤ 1.3), and the bytes an agent reads
//! (`quota should-run --json`, `todo list --json`).
//!
//! What it is not: a concurrency test (one process at a time), or a test
//! of anything but the default goal's frontier (no outcomes, no notes).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::measure::{json_of, time_once, Summary};
use crate::seed::{restore, set_aside};
use crate::{markdown_table, seed, thousands, Result, Row};

/// The target: at the largest size, at most this many times the smallest.
pub const TARGET_RATIO: f64 = 1.3;

pub struct Options<'a> {
    pub loopx: &'a Path,
    pub floor: &'a Path,
    pub sizes: &'a [u64],
    pub runs: usize,
}

/// Each timed command and the floor timed alternating with it.
const COMMANDS: [(&str, &str); 4] = [
    (
        "todo add",
        "floor: one FULL commit, alternating with todo add",
    ),
    (
        "todo claim",
        "floor: one FULL commit, alternating with todo claim",
    ),
    (
        "quota should-run",
        "--version, alternating with quota should-run",
    ),
    ("task-body", "--version, alternating with task-body"),
];

/// Seed, time, and return the report as Markdown. `work` is a scratch
/// directory this function owns.
pub fn run(options: &Options<'_>, work: &Path) -> Result<String> {
    let Options {
        loopx, floor, runs, ..
    } = *options;
    std::fs::create_dir_all(work)?;
    let floor_db = work.join("floor.sqlite");
    let floor_db = floor_db.to_str().ok_or("the work directory is not UTF-8")?;
    time_once(floor, &["--setup", floor_db])?;
    let mut rows = Vec::new();
    let mut sizes_out = String::from(
        "| todos | seed: one `todo add --from-file` (s) | database bytes | `quota should-run --json` bytes | `todo list --json` bytes |\n|---:|---:|---:|---:|---:|\n",
    );
    for &size in options.sizes {
        let dir = work.join(format!("todos-{size}"));
        eprintln!(
            "loopx-bench: todos: seeding {size} todos in {}",
            dir.display()
        );
        let seeded = seed::todo_goal(loopx, &dir, size as usize)?;
        let d = dir.to_str().ok_or("the work directory is not UTF-8")?;
        let database = dir.join("loopx.sqlite");
        let pristine = work.join(format!("pristine-{size}"));
        set_aside(&database, &pristine)?;
        let bytes =
            |args: &[&str]| -> Result<usize> { Ok(json_of(loopx, args)?.to_string().len()) };
        let _ = writeln!(
            sizes_out,
            "| {} | {:.2} | {} | {} | {} |",
            thousands(size),
            seeded.as_secs_f64(),
            thousands(std::fs::metadata(&database)?.len()),
            thousands(bytes(&["--json", "quota", "should-run", "--dir", d])? as u64),
            thousands(bytes(&["--json", "todo", "list", "--dir", d])? as u64),
        );

        let args: [&[&str]; 4] = [
            &[
                "todo",
                "add",
                "--dir",
                d,
                "--id",
                "bench-new",
                "--title",
                "one more step",
            ],
            &["todo", "claim", "t1", "--dir", d],
            &["quota", "should-run", "--dir", d],
            &["task-body", "--dir", d],
        ];
        for ((command, floor_name), args) in COMMANDS.into_iter().zip(args) {
            let writes = command.starts_with("todo");
            eprintln!("loopx-bench: todos: {size}: {command} x{runs} (+1 warm-up), alternating with its floor");
            let (mut timed, mut floors) = (Vec::new(), Vec::new());
            for _ in 0..=runs {
                if writes {
                    restore(&pristine, &database)?;
                    timed.push(time_once(loopx, args)?);
                    floors.push(time_once(floor, &[floor_db])?);
                } else {
                    timed.push(time_once(loopx, args)?);
                    floors.push(time_once(loopx, &["--version"])?);
                }
            }
            restore(&pristine, &database)?;
            push(&mut rows, command, size, &timed[1..]);
            push(&mut rows, floor_name, size, &floors[1..]);
        }
    }
    Ok(format!(
        "{}\n{}\n{sizes_out}",
        markdown_table(&rows, "todos"),
        ratios(&rows, options.sizes)
    ))
}

fn push(rows: &mut Vec<Row>, command: &'static str, size: u64, timed: &[Duration]) {
    rows.push(Row {
        command,
        size: Some(size),
        summary: Summary::of(timed),
    });
}

/// Each command at each size against itself at the smallest size, and
/// against its floor at the same size.
fn ratios(rows: &[Row], sizes: &[u64]) -> String {
    let median = |command: &str, size: u64| {
        rows.iter()
            .find(|r| r.command == command && r.size == Some(size))
            .map(|r| r.summary.median_ms)
    };
    let Some(&smallest) = sizes.iter().min() else {
        return String::new();
    };
    let mut out = format!(
        "| command | todos | / itself at {} todos (target ≤ {TARGET_RATIO}) | / its floor |\n|---|---:|---:|---:|\n",
        thousands(smallest)
    );
    for (command, floor) in COMMANDS {
        for &size in sizes {
            let (Some(at), Some(base), Some(floor)) = (
                median(command, size),
                median(command, smallest),
                median(floor, size),
            ) else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {command} | {} | {:.2} | {:.2} |",
                thousands(size),
                at / base,
                at / floor
            );
        }
    }
    out
}
