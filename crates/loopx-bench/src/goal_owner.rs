//! `loopx-bench goal-owner`: the pure goal owner on the crowded goal, in
//! process, no IO.
//!
//! Each sample times, with `std::time::Instant`:
//! - **refine**: one `GoalOwner::decide` of a `RefineOutcome` that adds one
//!   new requirement (a fresh id per sample) with a new source to one
//!   outcome (rotating over the 20), then `GoalOwner::evolve` of its event
//!   onto a copy of the crowded state. The copy is cloned before the timer
//!   starts, and the command is built before it too.
//! - **projection**: `inspect::readback(&goal, revision, None, now)` and
//!   `gap::gaps(&goal, now)` on the refined goal: the typed projections,
//!   not serialized.
//!
//! The sum of the two is "one refinement plus full projection". Everything
//! a sample allocates is dropped after its timer stops.

use loopx_core::goal::inspect::readback;
use loopx_core::goal::{gap, GoalContext, GoalOwner, GoalRequest};
use loopx_core::operation::Owner as _;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::crowded;
use crate::measure::Summary;
use crate::Result;

/// The RFC's reported numbers for its own implementation, same case.
pub const RFC_P50_MS: f64 = 1.025;
pub const RFC_P95_MS: f64 = 1.387;
/// The target for "one refinement plus full projection", p50.
pub const TARGET_P50_US: f64 = 50.0;

pub struct Options {
    pub samples: usize,
    pub warmup: usize,
}

struct Sample {
    decide: Duration,
    evolve: Duration,
    readback: Duration,
    gaps: Duration,
}

/// Run the benchmark and return its report as Markdown.
pub fn run(options: &Options) -> Result<String> {
    eprintln!("loopx-bench: goal-owner: building the crowded goal");
    let started = Instant::now();
    let fixture = crowded::build()?;
    let (declarations, reviews) = crowded::stored_bytes(&fixture.goal);
    let requirements: usize = fixture
        .goal
        .outcomes
        .iter()
        .map(|o| o.requirements.len())
        .sum();
    let review_count: usize = fixture.goal.outcomes.iter().map(|o| o.reviews.len()).sum();
    let now = fixture.clock.at(fixture.steps_used + 1);
    let revision = fixture.steps_used + 2;
    let snapshot_bytes = serde_json::to_string(&fixture.goal)?.len();
    let base_gaps = gap::gaps(&fixture.goal, now).len();
    eprintln!(
        "loopx-bench: goal-owner: built in {:.2} s: {} outcomes, {requirements} requirements \
         ({} bytes of text each), {review_count} reviews, {declarations} bytes of declarations, \
         {reviews} bytes of reviews, {base_gaps} gaps",
        started.elapsed().as_secs_f64(),
        fixture.goal.outcomes.len(),
        fixture.description_len,
    );

    let sample = |n: usize| -> Result<Sample> {
        let command = crowded::command(GoalRequest::RefineOutcome {
            update: crowded::sample_update(n),
        });
        let context = GoalContext { now };
        let state = fixture.goal.clone();

        let t0 = Instant::now();
        let decided = GoalOwner::decide(Some(&state), &command, &context);
        let t1 = Instant::now();
        let decided = decided.map_err(|e| format!("the timed refinement was refused: {e}"))?;
        let event = decided
            .event
            .as_ref()
            .ok_or("the timed refinement wrote nothing")?;
        let t1b = Instant::now();
        let next = GoalOwner::evolve(Some(state), event);
        let t2 = Instant::now();
        let projection = black_box(readback(black_box(&next), revision, None, now));
        let t3 = Instant::now();
        let gaps = black_box(gap::gaps(black_box(&next), now));
        let t4 = Instant::now();

        drop(projection);
        drop(gaps);
        drop(next);
        drop(decided);
        Ok(Sample {
            decide: t1 - t0,
            evolve: t2 - t1b,
            readback: t3 - t2,
            gaps: t4 - t3,
        })
    };

    // Check once that a sample does what it says.
    {
        let command = crowded::command(GoalRequest::RefineOutcome {
            update: crowded::sample_update(0),
        });
        let decided = GoalOwner::decide(Some(&fixture.goal), &command, &GoalContext { now })
            .map_err(|e| format!("the timed refinement is refused: {e}"))?;
        let event = decided.event.ok_or("the timed refinement writes nothing")?;
        let next = GoalOwner::evolve(Some(fixture.goal.clone()), &event);
        let after: usize = next.outcomes.iter().map(|o| o.requirements.len()).sum();
        if after != requirements + 1 {
            return Err(format!(
                "a refinement left {after} requirements, not {}",
                requirements + 1
            )
            .into());
        }
    }

    eprintln!(
        "loopx-bench: goal-owner: {} warm-up samples, then {} timed",
        options.warmup, options.samples
    );
    for n in 0..options.warmup {
        sample(1_000_000 + n)?;
    }
    let samples: Vec<Sample> = (0..options.samples).map(sample).collect::<Result<_>>()?;

    // Sub-step probes: the public functions the steps above spend their
    // time in, each timed on its own on the unrefined crowded goal.
    let probes = probes(&fixture.goal, revision, now, options.samples.min(1_000));

    let pick = |f: &dyn Fn(&Sample) -> Duration| -> Summary {
        Summary::of(&samples.iter().map(f).collect::<Vec<_>>())
    };
    let combined = pick(&|s| s.decide + s.evolve + s.readback + s.gaps);
    let refine = pick(&|s| s.decide + s.evolve);
    let projection = pick(&|s| s.readback + s.gaps);
    let readback_json = serde_json::to_string(&readback(&fixture.goal, revision, None, now))?;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Fixture: {} outcomes, {requirements} requirements ({} bytes of description each), \
         {review_count} reviews, {base_gaps} open gaps; {declarations} bytes of stored \
         declarations (budget {}), {reviews} bytes of reviews; snapshot JSON {snapshot_bytes} \
         bytes; readback JSON (`serde_json::to_string`) {} bytes.\n",
        fixture.goal.outcomes.len(),
        fixture.description_len,
        loopx_core::goal::outcome::DECLARATION_BUDGET,
        readback_json.len(),
    );
    let _ = writeln!(out, "| measurement | p50 µs | p95 µs | min µs | samples |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let mut row = |name: &str, s: Summary| {
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {:.1} | {:.1} | {} |",
            s.median_ms * 1e3,
            s.p95_ms * 1e3,
            s.min_ms * 1e3,
            s.runs
        );
    };
    row("**one refinement plus full projection** (a)+(b)", combined);
    row("(a) refine: decide + evolve", refine);
    row("(a1) `GoalOwner::decide`", pick(&|s| s.decide));
    row("(a2) `GoalOwner::evolve`", pick(&|s| s.evolve));
    row("(b) projection: readback + gaps", projection);
    row("(b1) `inspect::readback`", pick(&|s| s.readback));
    row("(b2) `gap::gaps`", pick(&|s| s.gaps));
    for (name, summary) in probes {
        row(&name, summary);
    }
    let _ = writeln!(
        out,
        "\nRFC implementation, same case: p50 {:.0} µs / p95 {:.0} µs. Target: p50 under \
         {TARGET_P50_US:.0} µs for the combined number: **{}** (p50 {:.1} µs).",
        RFC_P50_MS * 1e3,
        RFC_P95_MS * 1e3,
        if combined.median_ms * 1e3 < TARGET_P50_US {
            "met"
        } else {
            "missed"
        },
        combined.median_ms * 1e3,
    );
    Ok(out)
}

/// Time `f` `n` times (after a tenth of that as warm-up).
fn time<T>(n: usize, mut f: impl FnMut() -> T) -> Summary {
    for _ in 0..n / 10 {
        black_box(f());
    }
    let times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let value = black_box(f());
            let elapsed = t.elapsed();
            drop(value);
            elapsed
        })
        .collect();
    Summary::of(&times)
}

fn probes(
    goal: &loopx_core::goal::Goal,
    revision: u64,
    now: jiff::Timestamp,
    n: usize,
) -> Vec<(String, Summary)> {
    let outcomes = goal.outcomes.len();
    vec![
        (
            "probe: `outcome::budget_bytes` over all outcomes (inside decide's budget check)"
                .into(),
            time(n, || crowded::stored_bytes(goal)),
        ),
        (
            "probe: clone of all outcomes (inside decide's budget check)".into(),
            time(n, || goal.outcomes.clone()),
        ),
        (
            format!("probe: `Outcome::basis` of all {outcomes} outcomes"),
            time(n, || {
                goal.outcomes.iter().map(|o| o.basis()).collect::<Vec<_>>()
            }),
        ),
        (
            "probe: `gap::requirement_states` of all outcomes".into(),
            time(n, || {
                goal.outcomes
                    .iter()
                    .map(gap::requirement_states)
                    .collect::<Vec<_>>()
            }),
        ),
        (
            "probe: `gap::checkpoint` of all outcomes".into(),
            time(n, || {
                goal.outcomes
                    .iter()
                    .map(|o| gap::checkpoint(goal, o))
                    .collect::<Vec<_>>()
            }),
        ),
        (
            "not in the totals: `inspect::readback` + `serde_json::to_string` of it".into(),
            time(n, || {
                serde_json::to_string(&readback(goal, revision, None, now))
                    .expect("a readback serializes")
            }),
        ),
        (
            "not in the totals: clone of the crowded `Goal` (excluded from (a))".into(),
            time(n, || goal.clone()),
        ),
    ]
}
