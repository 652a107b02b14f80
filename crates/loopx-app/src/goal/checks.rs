//! Executable checks as the application runs them: the owner's proposal
//! (`goal-acceptance prepare-checks`: the outcome resolved, each argv
//! shown, nothing written), its application (`apply-checks`: resolved
//! again, refused when the requirements or linked work changed since),
//! running the configured criteria (`check run`, the driver's completion
//! gate, `verify`, MCP `run_checks`), and where each one stands against
//! the project's HEAD now (`check status`, `done`).
//!
//! A run is the same for every caller: the owner's argv, executed without
//! a shell through the driver's runner (its own process group, the
//! criterion's timeout, output to a bounded private log), in the project
//! root or the criterion's `cwd` confined to it; the result (redacted
//! excerpt, output digest, argv digest, HEAD) is recorded on the goal by
//! the host. Nobody supplies a result or an argv at run time.
//!
//! The rules are `loopx_core::goal::checks`'s.

use super::{write, GoalReceiptView, GoalTarget};
use crate::driver::runner::TurnRunner;
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil, AppError};
use anyhow::{Context as _, Result};
use loopx_core::digest::Digest;
use loopx_core::driver::capture::OutputCap;
use loopx_core::goal::checks::{
    self, CheckConfig, CheckResult, CheckState, CheckStatus, Criterion, Proposal,
};
use loopx_core::goal::outcome::Outcome;
use loopx_core::goal::{self, GoalOwner, GoalRequest, DEFAULT_GOAL_ID};
use loopx_core::operation::OperationId;
use loopx_core::path::LoopPath;
use serde::Serialize;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most of a check's output its log keeps (head and tail).
const LOG_CAP: &str = "1M";

/// What `prepare-checks` proposes for `config` on the loop's goal: the
/// outcome as the owner resolves it and each argv. Read-only.
pub fn prepare(dir: &LoopDir, goal_id: &str, config: &CheckConfig) -> Result<Proposal> {
    let reading = dir.goal(goal_id)?;
    let outcome = outcome_of(&reading.goal.outcomes, &config.outcome_id)?;
    checks::propose(config, outcome).map_err(crate::error::refusal)
}

/// Configure `config`, as `target` (the owner; an agent is refused by the
/// goal owner), bound to the `basis` the proposal showed.
pub fn apply(
    dir: &LoopDir,
    target: &GoalTarget,
    config: CheckConfig,
    basis: Digest,
    op: &OperationId,
) -> Result<GoalReceiptView> {
    write(
        dir,
        target,
        op,
        GoalRequest::ConfigureChecks { config, basis },
        None,
    )
}

fn outcome_of<'a>(outcomes: &'a [Outcome], id: &str) -> Result<&'a Outcome> {
    outcomes.iter().find(|o| o.id == id).ok_or_else(|| {
        AppError::not_found(format!(
            "outcome {id:?} does not exist (see `loopx goal-acceptance inspect`)"
        ))
        .into()
    })
}

/// One criterion as a view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CriterionView {
    pub outcome_id: String,
    pub criterion_id: String,
    pub validation_argv: Vec<String>,
    /// Against the project's HEAD now.
    pub state: CheckState,
    /// Its newest result, whatever it ran against.
    pub last: Option<CheckResult>,
}

impl CriterionView {
    pub fn line(&self) -> String {
        let last = match &self.last {
            Some(r) => format!(
                "; last {} (exit {}) in {} ms against {} at {}",
                r.status.as_str(),
                r.exit_code.map_or("none".to_owned(), |c| c.to_string()),
                r.duration_ms,
                r.head.as_deref().map_or("no git HEAD", short_head),
                r.ran_at
            ),
            None => String::new(),
        };
        format!(
            "{} {} [{}]{last}",
            self.outcome_id,
            self.criterion_id,
            self.state.as_str()
        )
    }
}

fn short_head(head: &str) -> &str {
    &head[..head.len().min(12)]
}

/// Every configured criterion of the goal (of `only` if named), judged
/// against the project's HEAD now. Read-only: runs nothing.
#[derive(Debug, Clone, Serialize)]
pub struct ChecksView {
    pub head: Option<String>,
    pub criteria: Vec<CriterionView>,
    /// How many are not passed on this HEAD.
    pub not_met: usize,
    /// The run under this operation id was already recorded: nothing ran
    /// again, and this is where the checks stand now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

impl ChecksView {
    /// Each criterion not met, in words (`<criterion> of <outcome>
    /// <state>`): why a gate that needs them all refuses.
    pub fn not_met_words(&self) -> Vec<String> {
        (self.criteria.iter())
            .filter(|c| !c.state.met())
            .map(|c| {
                format!(
                    "{} of {} {}",
                    c.criterion_id,
                    c.outcome_id,
                    c.state.as_str()
                )
            })
            .collect()
    }

    pub fn text(&self) -> String {
        if self.criteria.is_empty() {
            return "no executable checks are configured (`loopx goal-acceptance prepare-checks --file F` proposes some)".into();
        }
        let mut text: String = (self.criteria.iter())
            .map(|c| format!("{}\n", c.line()))
            .collect();
        text.push_str(&format!(
            "{} of {} configured checks not met on {}",
            self.not_met,
            self.criteria.len(),
            self.head
                .as_deref()
                .map_or("this workspace (no git HEAD)", short_head)
        ));
        text
    }
}

/// The loop goal's outcomes, from its snapshot alone: checks live on
/// outcomes, so no todo stream is read (and nothing is written for a goal
/// never written, which has none).
fn outcomes(dir: &LoopDir) -> Result<Vec<Outcome>> {
    let loaded = dir
        .authority()
        .load::<GoalOwner>(&goal::stream(DEFAULT_GOAL_ID))?;
    Ok(loaded.state.map(|g| g.outcomes).unwrap_or_default())
}

/// Where the configured checks stand against the HEAD of `root` now.
pub fn status(dir: &LoopDir, root: &Path, only: Option<&str>) -> Result<ChecksView> {
    let outcomes = outcomes(dir)?;
    let any = (outcomes.iter()).any(|o| only.is_none_or(|id| o.id == id) && !o.checks.is_empty());
    // No git process for a goal without checks.
    let head = if any { head_of(root) } else { None };
    Ok(view(&outcomes, only, head))
}

fn view(outcomes: &[Outcome], only: Option<&str>, head: Option<String>) -> ChecksView {
    let mut criteria = Vec::new();
    for outcome in outcomes.iter().filter(|o| only.is_none_or(|id| o.id == id)) {
        for criterion in &outcome.checks {
            criteria.push(CriterionView {
                outcome_id: outcome.id.clone(),
                criterion_id: criterion.id.clone(),
                validation_argv: criterion.validation_argv.clone(),
                state: checks::state(outcome, criterion, Some(head.as_deref())),
                last: (outcome.check_results.iter())
                    .find(|r| r.criterion_id == criterion.id)
                    .cloned(),
            });
        }
    }
    let not_met = criteria.iter().filter(|c| !c.state.met()).count();
    ChecksView {
        head,
        criteria,
        not_met,
        replayed: false,
    }
}

/// The project's HEAD commit, or `None` outside a git work tree (or one
/// without commits). Git runs no program the work tree configures.
pub fn head_of(root: &Path) -> Option<String> {
    crate::driver::workspace(root).head
}

/// Run every configured criterion of the goal (of `only` if named) in
/// `root`, through `runner`, record the results as observed by the host
/// for `ran_by`, and say where each stands now. Under `operation` (one
/// outcome's run, asked through MCP), a run already recorded is not run
/// again: a lost reply is recovered by asking again, never by a second run.
pub fn run(
    dir: &LoopDir,
    root: &Path,
    only: Option<&str>,
    operation: Option<&OperationId>,
    ran_by: &str,
    runner: &dyn TurnRunner,
    progress: &dyn Fn(&str),
) -> Result<ChecksView> {
    let outcomes = outcomes(dir)?;
    if let Some(id) = only {
        outcome_of(&outcomes, id)?;
    }
    if let Some(op) = operation {
        if only.is_none() {
            return Err(AppError::refused(
                "a check run under an operation id names its outcome: one outcome's results are one write",
            )
            .into());
        }
        let stream = goal::stream(DEFAULT_GOAL_ID);
        if dir
            .authority()
            .store()
            .receipt(&stream, op.as_str())?
            .is_some()
        {
            let head = head_of(root);
            return Ok(ChecksView {
                replayed: true,
                ..view(&outcomes, only, head)
            });
        }
    }
    let configured = |o: &&Outcome| only.is_none_or(|id| o.id == id) && !o.checks.is_empty();
    if !outcomes.iter().any(|o| configured(&o)) {
        return Ok(view(&outcomes, only, None));
    }
    let root = root
        .canonicalize()
        .with_context(|| format!("the project root {} cannot be opened", root.display()))?;
    let head = head_of(&root);
    for outcome in outcomes.iter().filter(configured) {
        let mut results = Vec::new();
        for criterion in &outcome.checks {
            progress(&format!(
                "running check {} of {} (timeout {}s)",
                criterion.id, outcome.id, criterion.timeout_seconds
            ));
            let result = run_one(dir, &root, criterion, head.clone(), ran_by, runner)?;
            progress(&format!(
                "check {} of {}: {} in {} ms",
                criterion.id,
                outcome.id,
                result.status.as_str(),
                result.duration_ms
            ));
            results.push(result);
        }
        let op = match operation {
            Some(op) => op.clone(),
            None => OperationId::parse(&crate::operation::fresh_name("checks"))?,
        };
        let target = GoalTarget::owner_of_default();
        write(
            dir,
            &target,
            &op,
            GoalRequest::RecordChecks {
                outcome_id: outcome.id.clone(),
                results,
            },
            None,
        )?;
    }
    Ok(view(&self::outcomes(dir)?, only, head))
}

/// The directory a criterion runs in: the project root, or its `cwd`
/// below it, refused when that leads elsewhere (a symlink out of the
/// project, say).
fn workdir(root: &Path, criterion: &Criterion) -> Result<PathBuf> {
    let Some(cwd) = &criterion.cwd else {
        return Ok(root.to_path_buf());
    };
    let path = root.join(cwd).canonicalize().with_context(|| {
        format!(
            "check {}: its cwd {cwd:?} does not exist in the project",
            criterion.id
        )
    })?;
    if !path.starts_with(root) || !path.is_dir() {
        return Err(AppError::refused(format!(
            "check {}: its cwd {cwd:?} leads outside the project root {} (or is not a directory): not run",
            criterion.id,
            root.display()
        ))
        .into());
    }
    Ok(path)
}

fn run_one(
    dir: &LoopDir,
    root: &Path,
    criterion: &Criterion,
    head: Option<String>,
    ran_by: &str,
    runner: &dyn TurnRunner,
) -> Result<CheckResult> {
    let started = clock::now();
    let argv_digest = criterion.argv_digest();
    let observed = |status, exit_code, duration_ms, output: &str, log: &str| {
        let output = loopx_core::redact::redact_owned(output);
        CheckResult {
            criterion_id: criterion.id.clone(),
            status,
            exit_code,
            duration_ms,
            output_digest: Digest::of_bytes(output.as_bytes()),
            excerpt: loopx_core::text::prefix_chars(&output, checks::EXCERPT_CHARS).to_owned(),
            log: log.to_owned(),
            argv_digest: argv_digest.clone(),
            head: head.clone(),
            ran_at: started,
            ran_by: ran_by.to_owned(),
        }
    };
    let cwd = match workdir(root, criterion) {
        Ok(cwd) => cwd,
        Err(error) => {
            let why = format!("{error:#}");
            return Ok(observed(CheckStatus::Error, None, 0, &why, ""));
        }
    };
    let (program, args) = criterion
        .validation_argv
        .split_first()
        .expect("a configured criterion has a program");
    let ran = crate::driver::host::run(
        dir,
        runner,
        crate::driver::host::HostCommand {
            program: program.into(),
            args: args.to_vec(),
            cwd,
            env: vec![(crate::driver::env::LOOP_DIR, dir.root().into())],
            env_removed: &[],
            timeout: Duration::from_secs(criterion.timeout_seconds),
            cap: OutputCap::parse(LOG_CAP).expect("a valid cap"),
            label: "check".into(),
            kind: "check",
        },
    )?;
    let log_name = ran.log;
    let ran = match ran.outcome {
        Ok(ran) => ran,
        Err(error) => {
            let why = format!("could not be started: {error:#}");
            return Ok(observed(CheckStatus::Error, None, 0, &why, &log_name));
        }
    };
    let output = read_head(dir, &log_name);
    let status = match (ran.timed_out, ran.stopped_by, ran.exit_status) {
        (true, _, _) | (_, Some(_), _) | (_, _, None) => CheckStatus::Error,
        (_, _, Some(0)) => CheckStatus::Pass,
        (_, _, Some(_)) => CheckStatus::Fail,
    };
    let mut output = output;
    if ran.timed_out {
        output = format!(
            "[loopx: killed at its timeout of {}s]\n{output}",
            criterion.timeout_seconds
        );
    }
    Ok(observed(
        status,
        ran.exit_status,
        ran.elapsed.as_millis() as u64,
        &output,
        &log_name,
    ))
}

/// The start of a check's log (loop-relative), read confined to the loop
/// directory: what its excerpt and digest are taken from.
fn read_head(dir: &LoopDir, log_name: &str) -> String {
    let mut bytes = Vec::new();
    let opened = LoopPath::parse(log_name)
        .ok()
        .and_then(|path| fsutil::open_confined(dir.root(), &path).ok());
    if let Some(file) = opened {
        let _ = file.take(64 * 1024).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
