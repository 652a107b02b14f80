//! The crowded goal: the RFC's "synthetic crowded case" as a fixture.
//!
//! 20 supporting outcomes owned by one agent, 5 requirements each (100 in
//! total), each outcome linked to its own todo, 4 sources per outcome, and
//! one evidence review per requirement. The requirement text is sized so
//! that the stored declarations (what `outcome::decide` counts against
//! [`DECLARATION_BUDGET`]) come to about 130 KB, just under the 128 KiB
//! budget, with room for the one requirement a timed refinement adds.
//!
//! Every other todo (t2, t4, ... t20) is claimed and completed, so 10 of the
//! 20 outcomes have no open linked work. Every outcome has at least one
//! requirement reviewed `unmet` or `uncertain`, so those 10 are gaps and the
//! gap projection computes their checkpoints.
//!
//! The fixture is a list of [`GoalRequest`]s that goes through
//! `GoalOwner::decide` + `GoalOwner::evolve` only: in memory for the pure
//! owner benchmark ([`build`]), or through `Authority::execute::<GoalOwner>`
//! into a loop's SQLite store for the CLI benchmark. All timestamps come
//! from a fixture clock ([`Clock`]) with a full nanosecond fraction, so the
//! stored byte size does not depend on when the fixture was built.

use jiff::{SignedDuration, Timestamp};
use loopx_core::digest::canonical_json;
use loopx_core::goal::outcome::{
    budget_bytes, Conclusion, OutcomeUpdate, RequirementInput, ReviewInput, SourceInput,
    DECLARATION_BUDGET,
};
use loopx_core::goal::todo::TodoAction;
use loopx_core::goal::{
    Actor, Goal, GoalCommand, GoalContext, GoalOwner, GoalRequest, RootCommitments,
};
use loopx_core::operation::Owner as _;

use crate::Result;

pub const OUTCOMES: usize = 20;
pub const REQUIREMENTS_PER_OUTCOME: usize = 5;
/// The agent every outcome belongs to (and who builds the fixture).
pub const AGENT: &str = "bench-agent";
/// Stored declarations the fixture is sized to, in bytes of canonical JSON
/// (the budget is 131,072; the RFC's crowded case is about 131,000). This
/// leaves at least 870 bytes for the one requirement plus source that a timed
/// refinement adds, which needs about 580.
pub const TARGET_DECLARATION_BYTES: usize = 130_200;

/// The loop's (and goal's) original objective.
pub const OBJECTIVE: &str =
    "Benchmark fixture: keep the goal authority of a long-running agent loop \
     fast when its goal is crowded with supporting outcomes, requirements, sources and reviews";
pub const SUCCESS_CRITERIA: &str =
    "one refinement plus the full projection stays well under a millisecond in process";
pub const ACCEPTANCE: [&str; 2] = [
    "every requirement an agent states is kept, append-only, with its source",
    "the projection shows every outcome, requirement, review and gap",
];
pub const NON_GOAL: &str = "rewriting the owner for this benchmark";
pub const PERMISSION: &str = "the bench agent may refine its own outcomes";

/// A deterministic clock: `step` seconds after a base one hour in the past,
/// always with a 9-digit fraction (so every timestamp prints at the same
/// length).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Timestamp,
}

impl Clock {
    pub fn new() -> Result<Clock> {
        let second = Timestamp::now().as_second() - 3_600;
        Ok(Clock {
            base: Timestamp::new(second, 123_456_789)?,
        })
    }

    pub fn at(&self, step: u64) -> Timestamp {
        self.base
            .checked_add(SignedDuration::from_secs(step as i64))
            .expect("the fixture clock stays in range")
    }
}

/// Deterministic prose of exactly `len` ASCII bytes (no leading or
/// trailing whitespace, so trimming by the owner does not change it).
pub fn prose(tag: &str, len: usize) -> String {
    const WORDS: &str = "the agent records what it checked against the stated requirement, \
        which evidence it cited, which parts of the linked work are still open, and why the \
        requirement is or is not met given the latest iteration of the loop and its budget; ";
    let mut text = format!("{tag}: ");
    while text.len() < len {
        text.push_str(WORDS);
    }
    text.truncate(len);
    while text.ends_with(' ') {
        text.pop();
        text.push('x');
    }
    text
}

fn outcome_id(i: usize) -> String {
    format!("o{i:02}")
}

fn todo_id(i: usize) -> String {
    format!("t{i}")
}

pub fn todo_title(i: usize) -> String {
    prose(&format!("work for outcome {}", outcome_id(i)), 80)
}

fn source(i: usize, s: usize) -> SourceInput {
    SourceInput {
        source_ref: format!("rfc/goal-authority/requests/{}-s{s}", outcome_id(i)),
        summary: prose(&format!("request {s} of outcome {}", outcome_id(i)), 160),
    }
}

fn requirement(i: usize, j: usize, description_len: usize) -> RequirementInput {
    RequirementInput {
        id: format!("{}-r{j}", outcome_id(i)),
        description: prose(
            &format!("requirement {j} of outcome {}", outcome_id(i)),
            description_len,
        ),
    }
}

fn conclusion(i: usize, j: usize) -> Conclusion {
    match (i + j) % 8 {
        0 => Conclusion::Unmet,
        4 => Conclusion::Uncertain,
        _ => Conclusion::Met,
    }
}

fn refine(update: OutcomeUpdate) -> GoalRequest {
    GoalRequest::RefineOutcome { update }
}

/// The request that creates the goal (through the CLI, `loopx todo add`
/// creates the same goal from the `loopx init` flags instead).
pub fn create() -> GoalRequest {
    GoalRequest::Create {
        goal_id: loopx_core::goal::DEFAULT_GOAL_ID.into(),
        objective: OBJECTIVE.into(),
        commitments: RootCommitments {
            acceptance_criteria: ACCEPTANCE.iter().map(|s| (*s).to_owned()).collect(),
            non_goals: vec![NON_GOAL.into()],
            permissions: vec![PERMISSION.into()],
        },
        todo_streams: false,
    }
}

/// Everything after `create`, in order. The first step is always
/// `AddTodo t1`.
pub fn steps(description_len: usize) -> Vec<GoalRequest> {
    let mut steps = Vec::new();
    for i in 1..=OUTCOMES {
        steps.push(GoalRequest::AddTodo {
            id: Some(todo_id(i)),
            title: todo_title(i),
        });
    }
    for i in 1..=OUTCOMES {
        // Created with its objective, its first source, two requirements
        // and its linked todo ...
        steps.push(refine(OutcomeUpdate {
            outcome_id: outcome_id(i),
            objective: Some(prose(&format!("outcome {} objective", outcome_id(i)), 360)),
            add_requirements: (1..=2)
                .map(|j| requirement(i, j, description_len))
                .collect(),
            link_todos: vec![todo_id(i)],
            source: Some(source(i, 1)),
            ..Default::default()
        }));
        // ... refined three times, one new requirement and source each ...
        for j in 3..=REQUIREMENTS_PER_OUTCOME {
            steps.push(refine(OutcomeUpdate {
                outcome_id: outcome_id(i),
                add_requirements: vec![requirement(i, j, description_len)],
                source: Some(source(i, j - 1)),
                ..Default::default()
            }));
        }
        // ... and then every requirement reviewed once.
        steps.push(refine(OutcomeUpdate {
            outcome_id: outcome_id(i),
            reviews: (1..=REQUIREMENTS_PER_OUTCOME)
                .map(|j| ReviewInput {
                    requirement_id: format!("{}-r{j}", outcome_id(i)),
                    conclusion: conclusion(i, j),
                    reasoning: prose(&format!("review of {}-r{j}", outcome_id(i)), 280),
                    evidence_refs: vec![
                        format!("proof_artifacts/{}-r{j}.json", outcome_id(i)),
                        format!("iteration:{}", i * 10 + j),
                    ],
                })
                .collect(),
            ..Default::default()
        }));
    }
    for i in (2..=OUTCOMES).step_by(2) {
        for action in [
            TodoAction::Claim { ttl_seconds: 3600 },
            TodoAction::Complete,
        ] {
            steps.push(GoalRequest::Todo {
                id: todo_id(i),
                action,
                note: String::new(),
            });
        }
    }
    steps
}

pub fn command(request: GoalRequest) -> GoalCommand {
    GoalCommand {
        actor: Actor::Agent(AGENT.into()),
        expected_instance: None,
        request,
        base_revision: None,
    }
}

/// Decide and evolve one request in memory; refusals are errors.
pub fn apply(state: Option<Goal>, request: GoalRequest, now: Timestamp) -> Result<Goal> {
    let command = command(request);
    let decided = GoalOwner::decide(state.as_ref(), &command, &GoalContext { now })
        .map_err(|e| format!("the fixture was refused: {e}"))?;
    Ok(match decided.event {
        Some(event) => GoalOwner::evolve(state, &event),
        None => state.ok_or("the fixture's first request did not create the goal")?,
    })
}

/// Bytes of canonical JSON the goal's declarations and reviews take, as
/// `outcome::decide` counts them against the budgets.
pub fn stored_bytes(goal: &Goal) -> (usize, usize) {
    let identity =
        canonical_json(&(&goal.goal_id, &goal.instance_id, &goal.original_objective)).len();
    budget_bytes(identity, &goal.outcomes)
}

/// The crowded goal in memory, and the requirement length it was sized with.
pub struct Fixture {
    pub goal: Goal,
    pub description_len: usize,
    pub clock: Clock,
    /// Fixture clock steps used so far; later requests use later steps.
    pub steps_used: u64,
}

fn build_with(description_len: usize, clock: Clock) -> Result<(Goal, u64)> {
    let mut goal = apply(None, create(), clock.at(0))?;
    let mut step = 0;
    for request in steps(description_len) {
        step += 1;
        goal = apply(Some(goal), request, clock.at(step))?;
    }
    Ok((goal, step))
}

/// Build the crowded goal, sizing the requirement text so that the
/// declarations land just at or under [`TARGET_DECLARATION_BYTES`].
pub fn build() -> Result<Fixture> {
    let clock = Clock::new()?;
    let requirements = OUTCOMES * REQUIREMENTS_PER_OUTCOME;
    // Declarations grow by one byte per requirement per byte of text: one
    // probe gives the exact length, a short walk corrects rounding.
    let probe = 400;
    let (goal, _) = build_with(probe, clock)?;
    let (bytes, _) = stored_bytes(&goal);
    let mut len = (probe as i64
        + (TARGET_DECLARATION_BYTES as i64 - bytes as i64) / requirements as i64)
        .max(40) as usize;
    loop {
        let (goal, steps_used) = build_with(len, clock)?;
        let (bytes, _) = stored_bytes(&goal);
        if bytes <= TARGET_DECLARATION_BYTES {
            assert!(bytes < DECLARATION_BUDGET);
            return Ok(Fixture {
                goal,
                description_len: len,
                clock,
                steps_used,
            });
        }
        len -= (bytes - TARGET_DECLARATION_BYTES).div_ceil(requirements);
    }
}

/// The update a timed refinement applies: one new requirement (a fresh id
/// per `sample`) with a new source, on outcome `sample % 20`.
pub fn sample_update(sample: usize) -> OutcomeUpdate {
    let i = sample % OUTCOMES + 1;
    OutcomeUpdate {
        outcome_id: outcome_id(i),
        add_requirements: vec![RequirementInput {
            id: format!("{}-bench-{sample:06}", outcome_id(i)),
            description: prose(&format!("benchmark requirement {sample}"), 240),
        }],
        source: Some(SourceInput {
            source_ref: format!("bench/refinement-{sample:06}"),
            summary: prose(&format!("benchmark request {sample}"), 120),
        }),
        ..Default::default()
    }
}
