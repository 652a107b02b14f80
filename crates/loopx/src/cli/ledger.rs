//! The ledger commands: init, append-iteration, validate, status, done.
//! Each parses its flags, calls its use case in `loopx_app::ledger` and
//! renders the view it returns.

use super::Reply;
use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::Args;
use loopx_app::driver::env;
use loopx_app::iteration_input::{usd_amount, IterationInput, Provenance};
use loopx_app::ledger;
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_app::AppError;
use loopx_core::goal::RootCommitments;
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::vocabulary::{GoalFocusMode, Mode, SUCCESS_STOP_REASONS};
use loopx_core::ledger::{nonblank, InitLoop, StopConditions, DEFAULT_PLATEAU_RULE};
use loopx_core::words;
use loopx_store::sqlite::Access;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DirArgs {
    /// The loop directory.
    #[arg(long, env = env::LOOP_DIR, default_value = ".loopx")]
    pub dir: PathBuf,
}

impl DirArgs {
    /// The loop these arguments name, in the store `--store` names.
    pub fn at<'a>(&'a self, store: Option<&'a str>) -> Place<'a> {
        Place::new(&self.dir, store)
    }
}

/// Create a loop: its goal, success criteria, budgets and stop conditions.
///
/// Refuses a directory that already holds a loop: loopx never overwrites a
/// ledger. Zero means "unlimited" for --max-tokens, --max-usd and the wall
/// time; --max-iterations is always a hard cap.
#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// What the loop is for.
    #[arg(long)]
    pub goal: String,
    /// How to tell it is achieved.
    #[arg(long)]
    pub success_criteria: String,
    /// The default mode of an iteration.
    #[arg(long, default_value = "bounded-research", value_parser = PossibleValuesParser::new(Mode::names()))]
    pub mode: String,
    /// Hard cap on iterations; the last allowed one must stop or block.
    #[arg(long, default_value_t = Budget::INIT_ITERATIONS, value_parser = iteration_cap)]
    pub max_iterations: u64,
    /// Wall-time budget in seconds from init (0 = unlimited).
    #[arg(long, default_value_t = Budget::INIT_WALL_TIME_SECONDS, conflicts_with = "max_wall", value_parser = limit)]
    pub max_wall_time_seconds: u64,
    /// Wall-time budget as a duration: 90m, 48h, 2d 12h (0 = unlimited).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub max_wall: Option<u64>,
    /// Token budget (0 = unlimited).
    #[arg(long, default_value_t = 0, value_parser = limit)]
    pub max_tokens: u64,
    /// USD budget (0 = unlimited); finite and non-negative.
    #[arg(long, default_value = "0", value_parser = usd_amount)]
    pub max_usd: f64,
    /// When progress counts as stalled (recorded for the next session; free text).
    #[arg(long, default_value = DEFAULT_PLATEAU_RULE)]
    pub plateau_rule: String,
    /// Shell command that must pass before a success stop is banked (run by
    /// the driver in the project root).
    #[arg(long, default_value = "")]
    pub success_check: String,
    /// Only the user (STOP_REQUESTED) or a budget ends the loop; an agent's
    /// `stop` does not.
    #[arg(long)]
    pub require_user_stop_only: bool,
    /// An extra stop condition stated by the user (repeatable).
    #[arg(long = "stop-condition")]
    pub stop_conditions: Vec<String>,
    /// Goal Focus direction control; `enforce` admits appends only through
    /// the driver's dispatch. Default: monitor without a review panel
    /// (`loopx goal-focus status` says which mode is in force and why).
    #[arg(long, value_parser = PossibleValuesParser::new(GoalFocusMode::names()))]
    pub goal_focus_mode: Option<String>,
    /// A root acceptance criterion of the goal (repeatable).
    #[arg(long = "acceptance")]
    pub acceptance_criteria: Vec<String>,
    /// Something the goal must not do or become (repeatable).
    #[arg(long = "non-goal")]
    pub non_goals: Vec<String>,
    /// A permission the agents hold for this goal (repeatable).
    #[arg(long = "permission")]
    pub permissions: Vec<String>,
    /// Also write goal_priority.json (legacy goal priority v1, disabled and
    /// soft until edited) into the loop directory; an existing file is
    /// refused, and nothing is written, unless --force.
    #[arg(long)]
    pub goal_priority_template: bool,
    /// With --goal-priority-template: replace an existing goal_priority.json.
    #[arg(long, requires = "goal_priority_template")]
    pub force: bool,
    #[command(flatten)]
    pub formal: FormalArgs,
    /// Stable id for this operation; repeating it replays the receipt.
    #[arg(long)]
    pub operation_id: Option<String>,
}

/// The formal (Lean) policy's flags, shared by `init` (where they become
/// the loop's standing orders, shown in formal/formal_policy.json) and
/// `drive` (where they override every other source for the run).
#[derive(Debug, Args)]
pub struct FormalArgs {
    /// Lean formalization assist: off (no formal section in the prompt),
    /// mention-only, auto, on, or force (the binding rules always, and a
    /// host hygiene tick with --formal-force-after-iteration). Default:
    /// AAS_AUTOLOOP_FORMAL_POLICY, the loop's standing orders,
    /// formal/formal_policy.json in the loop directory, else off.
    #[arg(long, value_name = "POLICY", value_parser = PossibleValuesParser::new(loopx_core::formal::Policy::names()))]
    pub formal_policy: Option<String>,
    /// The Lake project, relative to the loop directory (looked for there
    /// first) or the project root; default formal/
    /// (AAS_AUTOLOOP_FORMAL_PROJECT).
    #[arg(long, value_name = "PATH", value_parser = formal_project)]
    pub formal_project: Option<String>,
    /// With policy force: after each ok turn the host runs a formal
    /// hygiene tick (a sorry scan of the Lake project, and `lake build`
    /// with --formal-typecheck), writing formal/force_loop_reports/*.json.
    /// It never stops the loop or supports a claim
    /// (AAS_AUTOLOOP_FORMAL_FORCE=1).
    #[arg(long)]
    pub formal_force_after_iteration: bool,
    /// Let the force tick run `lake build` in the Lake project (its own
    /// process group, a timeout of AAS_AUTOLOOP_FORMAL_TYPECHECK_TIMEOUT
    /// seconds, 600 by default, at most --iteration-timeout)
    /// (AAS_AUTOLOOP_FORMAL_TYPECHECK=1).
    #[arg(long)]
    pub formal_typecheck: bool,
    /// How many force ticks the loop may spend over all its drives
    /// (default 3; spent ones stay spent across restarts).
    #[arg(long, value_name = "N")]
    pub formal_force_credits: Option<u32>,
}

impl FormalArgs {
    /// What the flags say (a switch not given says nothing).
    pub fn layer(&self) -> loopx_core::formal::Layer {
        loopx_core::formal::Layer {
            policy: (self.formal_policy.as_deref())
                .map(|p| loopx_core::formal::Policy::parse(p).expect("clap checked the policy")),
            project: self.formal_project.clone(),
            force_credits: self.formal_force_credits,
            typecheck: self.formal_typecheck.then_some(true),
            force_after_iteration: self.formal_force_after_iteration.then_some(true),
        }
    }
}

fn formal_project(text: &str) -> Result<String, String> {
    loopx_core::formal::check_project(text)
}

/// Record one iteration: what was done, what it cost, and the decision.
///
/// Rules: no append after max_iterations or after a stop/blocked; the final
/// allowed iteration (or one that spends the last of any budget) must use
/// stop or blocked; blocked is accepted only then; an earlier stop needs a
/// success --stop-reason and an --evidence-id whose proof_artifacts/ID.json
/// is a passed, machine-checkable artifact.
// Its help ends with [`early_stop_help`], added where the whole tree is
// built (`cli::whole_tree`): computing it on every parse cost each
// `append-iteration` a JSON rendering it never shows.
#[derive(Debug, Args)]
pub struct AppendArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    #[command(flatten)]
    pub iteration: IterationInput,
    /// Enforce mode, appending by hand: the provider that ran this
    /// iteration, stated by you. The candidate's executor (whose family
    /// its reviewer must not share) is taken from the driver's open
    /// dispatch, never from the report; with no dispatch open, this flag is
    /// required, and a driver dispatch that is open must agree with it.
    #[arg(long, value_name = "PROVIDER")]
    pub executor: Option<String>,
    /// The agent provider that ran this iteration (set by `loopx drive`).
    #[arg(long, env = env::PRIMARY_PROVIDER, default_value = "")]
    pub executor_provider: String,
    /// The driver dispatch this turn runs under (set by `loopx drive`).
    #[arg(long, env = env::DISPATCH_ID, default_value = "", hide = true)]
    pub dispatch_id: String,
    /// Run every check and show the record, but write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `--compute-run @FILE` read in place: the command line's way of passing
/// a JSON object too long to type. (Other adapters pass the object.)
fn with_compute_files(input: &IterationInput) -> Result<IterationInput> {
    let mut input = input.clone();
    for run in &mut input.compute_runs {
        let Some(path) = run.trim().strip_prefix('@').map(str::to_owned) else {
            continue;
        };
        let mut text = String::new();
        let file = std::fs::File::open(&path).map_err(|e| {
            AppError::refused(format!("cannot read --compute-run file {path}: {e}"))
        })?;
        std::io::Read::read_to_string(&mut std::io::Read::take(file, 1 << 20), &mut text).map_err(
            |e| {
                AppError::refused(format!(
                    "cannot read --compute-run file {path} as UTF-8: {e}"
                ))
            },
        )?;
        *run = text;
    }
    Ok(input)
}

/// The end of `append-iteration --help`: the early-stop reasons and an
/// example proof artifact.
pub fn early_stop_help() -> String {
    format!(
        "Early stop reasons: {}.\nProof artifact (proof_artifacts/<id>.json):\n{}",
        SUCCESS_STOP_REASONS.join(", "),
        serde_json::to_string_pretty(&loopx_core::ledger::proof::expected_artifact_example(
            "<id>"
        ))
        .unwrap_or_default()
    )
}

/// A whole number for a flag, with what is accepted: for `-5` clap's own
/// parser says only "invalid digit found in string".
fn whole(text: &str, expected: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected {expected}"))
}

/// A limit: a whole number, 0 meaning unlimited.
pub fn limit(text: &str) -> Result<u64, String> {
    whole(
        text,
        "a whole number, 0 or more, such as 200000 (0 means unlimited)",
    )
}

/// An iteration cap: a whole number, 1 or more.
pub fn iteration_cap(text: &str) -> Result<u64, String> {
    whole(text, "a whole number of iterations, 1 or more, such as 20")
}

pub fn parse_duration(text: &str) -> Result<u64, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    let span: jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 90m, 48h or 2d 12h"))?;
    loopx_core::ledger::budget::whole_seconds(span).map_err(|e| e.to_string())
}

pub fn init(args: &InitArgs, store: Option<&str>) -> Result<Reply> {
    let requested = (args.goal_focus_mode.as_deref())
        .map(|mode| GoalFocusMode::parse(mode).expect("clap checked the mode"));
    let (goal_focus_mode, goal_focus_mode_source) =
        loopx_app::panel::mode_for_new_loop(requested, &args.dir.dir)?;
    let request = InitLoop {
        goal: args.goal.trim().to_owned(),
        success_criteria: args.success_criteria.trim().to_owned(),
        default_mode: Mode::parse(&args.mode).expect("clap checked the mode"),
        plateau_rule: args.plateau_rule.clone(),
        success_check: args.success_check.clone(),
        stop_conditions: StopConditions {
            require_user_stop_only: args.require_user_stop_only,
            user_overrides: nonblank(&args.stop_conditions),
        },
        goal_focus_mode,
        goal_focus_mode_source: Some(goal_focus_mode_source),
        source_run_id: None,
        budget: Budget {
            max_iterations: args.max_iterations,
            max_wall_time_seconds: args.max_wall.unwrap_or(args.max_wall_time_seconds),
            max_tokens: args.max_tokens,
            max_usd: args.max_usd,
        },
        commitments: RootCommitments {
            acceptance_criteria: nonblank(&args.acceptance_criteria),
            non_goals: nonblank(&args.non_goals),
            permissions: nonblank(&args.permissions),
        },
    };
    let view = ledger::init_with_template(
        args.dir.at(store),
        args.operation_id.as_deref(),
        request,
        args.goal_priority_template.then_some(args.force),
        &args.formal.layer(),
    )?;
    let dir = view.dir.as_deref().unwrap_or_default();
    let template = (view.body.goal_priority_template.as_deref())
        .map(|path| format!("\nwrote the goal-priority template {path} (disabled until edited)"))
        .unwrap_or_default();
    let formal = (view.body.formal_policy.as_deref())
        .map(|path| format!("\nrecorded the formal policy as standing orders, shown in {path}"))
        .unwrap_or_default();
    let text = format!(
        "{} loop {} in {dir} ({} at most){}{template}{formal}\nnext: loopx append-iteration --dir {dir} --mode bounded-research --objective \"...\" --decision continue",
        if view.replayed { "already initialized" } else { "initialized" },
        view.body.run_id,
        words::count(view.body.max_iterations, "iteration"),
        view.note(),
    );
    Reply::view(&view, text)
}

pub fn append_iteration(args: &AppendArgs, store: Option<&str>) -> Result<Reply> {
    let input = with_compute_files(&args.iteration)?;
    let report = input.report(Provenance {
        executor_provider: args.executor_provider.clone(),
        dispatch_id: args.dispatch_id.clone(),
    })?;
    if args.dry_run {
        let preview = ledger::preview_append(args.dir.at(store), report)?;
        let text = format!(
            "dry run: iteration {} ({}) would be accepted; nothing written",
            preview.iteration, preview.decision
        );
        return Reply::view(&preview, text);
    }
    let view = match ledger::append_or_stage(
        args.dir.at(store),
        input.operation_id.as_deref(),
        report,
        loopx_app::focus::candidate::Staging {
            claim_evidence: &input.claim_evidence,
            obligation_targets: &input.obligation_targets,
            executor: args.executor.as_deref(),
        },
    )? {
        ledger::Recorded::Banked(view) => view,
        ledger::Recorded::Staged(view) => {
            let body = &view.body;
            let text = format!(
                "staged candidate {} for result review ({}, {}): nothing is banked until `loopx goal-focus review --candidate-fingerprint {} --file REVIEW.json` decides it{}",
                body.candidate_fingerprint,
                words::count(body.claims as u64, "claim"),
                words::count(body.evidence_files as u64, "evidence file"),
                body.candidate_fingerprint,
                view.note()
            );
            return Reply::view(&view, text);
        }
    };
    let body = &view.body;
    let text = format!(
        "iteration {} recorded: {} (loop {}, {} left){}",
        body.iteration,
        body.decision,
        body.state_status,
        words::count(body.remaining_iterations, "iteration"),
        view.note()
    );
    Reply::view(&view, text)
}

pub fn validate(args: &DirArgs, store: Option<&str>) -> Result<Reply> {
    let view = ledger::validate(&LoopDir::open(
        Place::new(&args.dir, store),
        Access::ReadOnly,
    )?)?;
    Ok(Reply {
        code: if view.is_valid() { 0 } else { 1 },
        ..Reply::view(&view, view.text())?
    })
}

pub fn status(args: &DirArgs, store: Option<&str>) -> Result<Reply> {
    let view = ledger::status(&LoopDir::open(
        Place::new(&args.dir, store),
        Access::ReadOnly,
    )?)?;
    Reply::view(&view, view.text())
}

/// The loop, and the project root its configured checks are judged in.
#[derive(Debug, Args)]
pub struct DoneArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The project root the owner's executable checks are judged against
    /// (its HEAD; default: the current directory). Nothing is run.
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn done(args: &DoneArgs, store: Option<&str>) -> Result<Reply> {
    let root = args.root.clone().unwrap_or(std::env::current_dir()?);
    let view = ledger::done(
        &LoopDir::open(Place::new(&args.dir.dir, store), Access::ReadOnly)?,
        &root,
    )?;
    Reply::view(&view, view.text())
}
