//! `loopx-bench goal-cli`: the real `loopx` binary on a loop whose default
//! goal is the crowded goal.
//!
//! Seeding: `loopx init` and `loopx todo add` (the first fixture todo, as
//! the fixture's agent) through the binary, which also creates the loop's
//! default goal `main` through its bootstrap operation; then every other
//! fixture request in-process through `Authority::execute::<GoalOwner>` on
//! stream `goal:main`, on a store opened with `Durability::Unsafe`. The
//! database is then closed, fsynced and copied aside.
//!
//! Timed (spawn to exit, stdout/stderr to /dev/null, exit 0 required):
//! `quota should-run`, `task-body`, `goal-acceptance inspect --json` (all
//! read-only), and `goal-acceptance refine-outcome` with a document that
//! adds one new requirement (fresh id per run) with a new source. Before
//! every refine run, untimed, the seeded database is restored from the copy
//! (and fsynced) and the run's document is written, so every timed
//! refinement is a real durable commit onto exactly the crowded goal.

use loopx_core::digest::canonical_json;
use loopx_core::goal::frontier::{ComposedContext, ComposedGoalOwner};
use loopx_core::goal::todo::TodoAction;
use loopx_core::goal::{self, GoalContext, GoalOwner, GoalRequest};
use loopx_core::operation::{OperationId, Owner as _};
use loopx_store::sqlite::{Access, Durability, SqliteStore};
use loopx_store::{Authority, Store as _};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::crowded;
use crate::measure::{json_of, time_once, time_runs, Summary};
use crate::seed::{restore, set_aside};
use crate::Result;

/// Targets (p50, ms) for the write and the poll.
pub const TARGET_MS: f64 = 5.0;

pub struct Options<'a> {
    pub loopx: &'a Path,
    pub runs: usize,
}

struct Row {
    command: &'static str,
    fixture: &'static str,
    summary: Summary,
}

/// Seed, time, and return the report as Markdown. `work` is a scratch
/// directory this function owns.
pub fn run(options: &Options<'_>, work: &Path) -> Result<String> {
    let loopx = options.loopx;
    let runs = options.runs;
    std::fs::create_dir_all(work)?;
    let fixture = crowded::build()?;
    let crowded_dir = work.join("crowded");
    let fresh_dir = work.join("fresh");

    eprintln!("loopx-bench: goal-cli: seeding {}", crowded_dir.display());
    let started = Instant::now();
    let seeded = seed(loopx, &crowded_dir, &fixture)?;
    eprintln!(
        "loopx-bench: goal-cli: seeded in {:.2} s ({} bytes of declarations, {} of reviews, \
         database {} bytes)",
        started.elapsed().as_secs_f64(),
        seeded.declarations,
        seeded.reviews,
        seeded.database_bytes
    );
    let d = utf8(&crowded_dir)?;

    // A fresh loop with one todo, for the default task-body size and as a
    // baseline for the read-only commands.
    init(loopx, &fresh_dir)?;
    let f = utf8(&fresh_dir)?;
    json_of(
        loopx,
        &[
            "--json",
            "todo",
            "add",
            "--dir",
            f,
            "--agent-id",
            crowded::AGENT,
            "--id",
            "t1",
            "--title",
            &crowded::todo_title(1),
        ],
    )?;

    // Check the seed through the binary before timing anything.
    let inspect = json_of(loopx, &["--json", "goal-acceptance", "inspect", "--dir", d])?;
    let outcomes = inspect["outcomes"].as_array().map_or(0, Vec::len);
    let requirements: usize = inspect["outcomes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["requirements"].as_array().map_or(0, Vec::len))
        .sum();
    if (outcomes, requirements)
        != (
            crowded::OUTCOMES,
            crowded::OUTCOMES * crowded::REQUIREMENTS_PER_OUTCOME,
        )
    {
        return Err(format!(
            "the seeded loop shows {outcomes} outcomes and {requirements} requirements"
        )
        .into());
    }
    let gaps = inspect["gaps"].as_array().map_or(0, Vec::len);
    let should_run = json_of(loopx, &["--json", "quota", "should-run", "--dir", d])?;
    let action = should_run["scheduler_hint"]["action"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    let body_bytes = |dir: &str| -> Result<u64> {
        json_of(loopx, &["--json", "task-body", "--dir", dir])?["bytes"]
            .as_u64()
            .ok_or_else(|| "task-body --json has no bytes".into())
    };
    let crowded_body = body_bytes(d)?;
    let fresh_body = body_bytes(f)?;
    let inspect_bytes = std::process::Command::new(loopx)
        .args(["--json", "goal-acceptance", "inspect", "--dir", d])
        .output()?
        .stdout
        .len();

    let mut rows = Vec::new();
    let mut timed = |command: &'static str, fixture: &'static str, args: &[&str]| -> Result<()> {
        eprintln!("loopx-bench: goal-cli: {fixture}: {command} x{runs} (+1 warm-up)");
        time_once(loopx, args)?;
        rows.push(Row {
            command,
            fixture,
            summary: Summary::of(&time_runs(loopx, args, runs)?),
        });
        Ok(())
    };
    timed("loopx --version (spawn baseline)", "-", &["--version"])?;
    timed(
        "quota should-run",
        "fresh, 1 todo",
        &["quota", "should-run", "--dir", f],
    )?;
    timed(
        "quota should-run",
        "crowded",
        &["quota", "should-run", "--dir", d],
    )?;
    timed("task-body", "fresh, 1 todo", &["task-body", "--dir", f])?;
    timed("task-body", "crowded", &["task-body", "--dir", d])?;
    timed(
        "goal-acceptance inspect --json",
        "crowded",
        &["--json", "goal-acceptance", "inspect", "--dir", d],
    )?;

    // The write: restore the crowded database, write the document (both
    // untimed), then time one refine-outcome.
    eprintln!(
        "loopx-bench: goal-cli: crowded: goal-acceptance refine-outcome x{runs} (+1 warm-up)"
    );
    let database = crowded_dir.join("loopx.sqlite");
    let documents = work.join("documents");
    std::fs::create_dir_all(&documents)?;
    let mut refine_times = Vec::with_capacity(runs);
    for n in 0..=runs {
        restore(&seeded.pristine, &database)?;
        let document = documents.join(format!("refine-{n:04}.json"));
        std::fs::write(&document, serde_json::to_vec(&crowded::sample_update(n))?)?;
        let doc = utf8(&document)?;
        let args = [
            "goal-acceptance",
            "refine-outcome",
            "--dir",
            d,
            "--agent-id",
            crowded::AGENT,
            "--document",
            doc,
        ];
        let elapsed = time_once(loopx, &args)?;
        if n > 0 {
            refine_times.push(elapsed);
        }
    }
    // The last refinement must be in the store: 101 requirements.
    let after = json_of(loopx, &["--json", "goal-acceptance", "inspect", "--dir", d])?;
    let after_requirements: usize = after["outcomes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["requirements"].as_array().map_or(0, Vec::len))
        .sum();
    if after_requirements != requirements + 1 {
        return Err(format!(
            "after the timed refinements the goal has {after_requirements} requirements, \
             expected {}",
            requirements + 1
        )
        .into());
    }
    rows.push(Row {
        command: "goal-acceptance refine-outcome",
        fixture: "crowded",
        summary: Summary::of(&refine_times),
    });
    eprintln!("loopx-bench: goal-cli: crowded: in-process refine steps x{runs} (+1 warm-up)");
    let steps = refine_steps(&seeded.pristine, &database, runs)?;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Crowded loop: {outcomes} outcomes, {requirements} requirements, {gaps} gaps, \
         {} bytes of stored declarations, {} bytes of reviews, `loopx.sqlite` {} bytes, goal \
         snapshot {} bytes. `quota should-run` answers `{action}`. `task-body`: {crowded_body} \
         bytes crowded, {fresh_body} bytes for a fresh loop with one todo. \
         `goal-acceptance inspect --json` prints {inspect_bytes} bytes.\n",
        seeded.declarations, seeded.reviews, seeded.database_bytes, seeded.snapshot_bytes,
    );
    let _ = writeln!(
        out,
        "| command | goal | median ms | p95 ms | min ms | runs |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|");
    for row in &rows {
        let s = row.summary;
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} |",
            row.command, row.fixture, s.median_ms, s.p95_ms, s.min_ms, s.runs
        );
    }
    let _ = writeln!(
        out,
        "\nThe same refinement in process, step by step (`Durability::Full`, as the CLI; each \
         run on the restored crowded database; the CLI's process start-up, argument parsing, \
         document read and view refresh are not in these rows):\n"
    );
    let _ = writeln!(out, "| step | median ms | p95 ms | min ms | runs |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for (step, s) in &steps {
        let _ = writeln!(
            out,
            "| {step} | {:.3} | {:.3} | {:.3} | {} |",
            s.median_ms, s.p95_ms, s.min_ms, s.runs
        );
    }
    for (command, row) in [
        ("quota should-run", "quota should-run"),
        ("refine-outcome", "goal-acceptance refine-outcome"),
    ] {
        if let Some(r) = rows
            .iter()
            .find(|r| r.command == row && r.fixture == "crowded")
        {
            let _ = writeln!(
                out,
                "\nTarget `{command}` under {TARGET_MS:.0} ms p50 on the crowded goal: **{}** \
                 ({:.2} ms).",
                if r.summary.median_ms < TARGET_MS {
                    "met"
                } else {
                    "missed"
                },
                r.summary.median_ms
            );
        }
    }
    Ok(out)
}

/// Time the parts of one `refine-outcome` in process, with the public
/// store and owner APIs the CLI uses: opening the store, the raw snapshot
/// read of `ensure_goal`, `Authority::execute` (receipt lookup, snapshot
/// load and parse, decide, evolve, canonical JSON of event, receipt and
/// snapshot, the commit and its fsyncs), and closing the store (the WAL
/// checkpoint and its fsyncs). The CPU parts of `execute` are then timed on
/// their own, without committing.
fn refine_steps(
    pristine: &Path,
    database: &Path,
    runs: usize,
) -> Result<Vec<(&'static str, Summary)>> {
    let stream = goal::stream(goal::DEFAULT_GOAL_ID);
    let names = [
        "`SqliteStore::open` (read-write, WAL, synchronous=FULL)",
        "`Store::load` of the goal snapshot (`ensure_goal`)",
        "`Authority::execute::<GoalOwner>` (whole)",
        "close the store (WAL checkpoint, fsyncs)",
        "total of the four",
        "  in execute: `Authority::load::<GoalOwner>` (read + parse snapshot)",
        "  in execute: `GoalOwner::decide`",
        "  in execute: `GoalOwner::evolve`",
        "  in execute: `canonical_json` of the new snapshot",
        "  in execute: the rest (digests, event/receipt JSON, SQLite commit, WAL fsync)",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    for n in 0..=runs {
        restore(pristine, database)?;
        let command = crowded::command(GoalRequest::RefineOutcome {
            update: crowded::sample_update(100_000 + n),
        });
        let id = OperationId::parse(&format!("bench-steps-{n:05}"))?;
        let t0 = Instant::now();
        let store = SqliteStore::open(database, Access::ReadWrite)?;
        let t1 = Instant::now();
        black_box(store.load(&stream)?);
        let t2 = Instant::now();
        let now = jiff::Timestamp::now();
        let receipt = Authority::new(&store)
            .execute::<GoalOwner>(&stream, &id, &command, &GoalContext { now }, now)
            .map_err(|e| format!("the in-process refinement was refused: {e}"))?;
        let t3 = Instant::now();
        drop(store);
        let t4 = Instant::now();
        if receipt.replayed || receipt.unchanged {
            return Err("the in-process refinement did not write".into());
        }

        // The CPU parts of execute, again, without the commit.
        restore(pristine, database)?;
        let store = SqliteStore::open(database, Access::ReadOnly)?;
        let authority = Authority::new(&store);
        let u0 = Instant::now();
        let loaded = authority
            .load::<GoalOwner>(&stream)
            .map_err(|e| format!("cannot load the goal: {e}"))?;
        let u1 = Instant::now();
        let state = loaded.state.ok_or("no goal")?;
        let command = crowded::command(GoalRequest::RefineOutcome {
            update: crowded::sample_update(200_000 + n),
        });
        let u2 = Instant::now();
        let decided = GoalOwner::decide(Some(&state), &command, &GoalContext { now })
            .map_err(|e| format!("refused: {e}"))?;
        let u3 = Instant::now();
        let event = decided.event.as_ref().ok_or("no event")?;
        let u4 = Instant::now();
        let next = GoalOwner::evolve(Some(state), event);
        let u5 = Instant::now();
        black_box(canonical_json(&next));
        let u6 = Instant::now();
        drop(next);
        drop(store);

        if n == 0 {
            continue;
        }
        let cpu = (u1 - u0) + (u3 - u2) + (u5 - u4) + (u6 - u5);
        for (i, d) in [
            t1 - t0,
            t2 - t1,
            t3 - t2,
            t4 - t3,
            t4 - t0,
            u1 - u0,
            u3 - u2,
            u5 - u4,
            u6 - u5,
            (t3 - t2).saturating_sub(cpu),
        ]
        .into_iter()
        .enumerate()
        {
            times[i].push(d);
        }
    }
    Ok(names
        .into_iter()
        .zip(times.iter().map(|t| Summary::of(t)))
        .collect())
}

fn utf8(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()).into())
}

fn init(loopx: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let d = utf8(dir)?;
    let mut args = vec![
        "--json",
        "init",
        "--dir",
        d,
        "--goal",
        crowded::OBJECTIVE,
        "--success-criteria",
        crowded::SUCCESS_CRITERIA,
        "--max-iterations",
        "1000",
        "--max-wall-time-seconds",
        "0",
        "--non-goal",
        crowded::NON_GOAL,
        "--permission",
        crowded::PERMISSION,
    ];
    for acceptance in crowded::ACCEPTANCE {
        args.extend(["--acceptance", acceptance]);
    }
    json_of(loopx, &args)?;
    Ok(())
}

struct Seeded {
    pristine: PathBuf,
    declarations: usize,
    reviews: usize,
    database_bytes: u64,
    snapshot_bytes: usize,
}

fn seed(loopx: &Path, dir: &Path, fixture: &crowded::Fixture) -> Result<Seeded> {
    init(loopx, dir)?;
    let d = utf8(dir)?;
    let steps = crowded::steps(fixture.description_len);
    // Through the binary: the todos (one bulk add, which also bootstraps
    // the default goal) and, after the refinements, the claims and
    // completions; each todo is kept in its own stream.
    let as_agent = |args: &[&str]| -> Result<()> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        all.extend(["--dir", d, "--agent-id", crowded::AGENT]);
        json_of(loopx, &all).map(drop)
    };
    let plan: String = steps
        .iter()
        .filter_map(|step| match step {
            GoalRequest::AddTodo { id, title } => {
                Some(serde_json::json!({"id": id, "title": title}).to_string() + "\n")
            }
            _ => None,
        })
        .collect();
    let plan_file = dir.with_extension("plan.jsonl");
    std::fs::write(&plan_file, plan)?;
    as_agent(&["todo", "add", "--from-file", utf8(&plan_file)?])?;

    let database = dir.join("loopx.sqlite");
    let stream = goal::stream(goal::DEFAULT_GOAL_ID);
    {
        let store = SqliteStore::open_with(&database, Access::ReadWrite, Durability::Unsafe)?;
        let authority = Authority::new(&store);
        // The refinements in process, decided on the goal composed with
        // its todos, as the application decides them.
        let mut live: Vec<loopx_core::goal::todo::Todo> = Vec::new();
        for (_, snapshot) in store.load_prefixed("todo:")? {
            live.push(serde_json::from_str(&snapshot.state)?);
        }
        let mut transitions = Vec::new();
        for (n, request) in steps.into_iter().enumerate() {
            let now = fixture.clock.at(n as u64 + 1);
            let id = OperationId::parse(&format!("bench-goal-seed-{n:04}"))?;
            match request {
                GoalRequest::AddTodo { .. } => continue,
                GoalRequest::Todo { id, action, .. } => {
                    transitions.push((id, action));
                    continue;
                }
                _ => {}
            }
            let command = crowded::command(request);
            let context = ComposedContext { now, live: &live };
            authority
                .execute::<ComposedGoalOwner>(&stream, &id, &command, &context, now)
                .map_err(|e| format!("seeding step {n} was refused: {e}"))?;
        }
        drop(store);
        for (todo, action) in transitions {
            let verb = match action {
                TodoAction::Claim { .. } => "claim",
                TodoAction::Complete => "complete",
                other => return Err(format!("the fixture does not {other:?}").into()),
            };
            as_agent(&["todo", verb, &todo])?;
        }
        std::fs::remove_file(&plan_file)?;
        let store = SqliteStore::open_with(&database, Access::ReadWrite, Durability::Unsafe)?;
        let authority = Authority::new(&store);
        let goal = authority
            .load::<GoalOwner>(&stream)
            .map_err(|e| format!("cannot read the seeded goal: {e}"))?
            .state
            .ok_or("the seeded goal is missing")?;
        let (declarations, reviews) = crowded::stored_bytes(&goal);
        let snapshot_bytes = loopx_core::digest::canonical_json(&goal).len();
        drop(store);
        sync(&database, dir)?;
        let pristine = dir.with_extension("pristine");
        set_aside(&database, &pristine)?;
        Ok(Seeded {
            pristine,
            declarations,
            reviews,
            database_bytes: std::fs::metadata(&database)?.len(),
            snapshot_bytes,
        })
    }
}

fn sync(database: &Path, dir: &Path) -> Result<()> {
    std::fs::File::open(database)?.sync_all()?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}
