//! The ledger's use cases: init, append-iteration (and its dry run),
//! status, done and validate, each returning a typed view that every
//! adapter serializes as is.
//!
//! Owns: opening the loop for each use case, committing through the
//! authority, refreshing the views after a commit, and composing the status
//! read (ledger, stop verdict, driver) once for the CLI and HTTP alike.
//! Does not own: the ledger's rules (`loopx_core::ledger`), the rendering
//! rules of its views (`loopx_core::ledger::view`), or any adapter's hints.

use crate::loop_dir::{LoopDir, Place, Reading, DATABASE};
use crate::operation::given_or_generated;
use crate::receipt::ReceiptView;
use crate::{clock, platform, AppError};
use jiff::Timestamp;
use loopx_core::driver::{self, DriverSummary};
use loopx_core::ending::{ending, Ending, EndingView};
use loopx_core::ledger::arbiter::Verdict;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::{Decision, LoopStatus};
use loopx_core::ledger::{
    view, InitLoop, IterationReport, Ledger, LedgerContext, LedgerError, LedgerEvent, LedgerOwner,
    LedgerReceipt, LedgerRequest, STREAM,
};
use loopx_core::operation::{OperationId, Owner as _};
use loopx_store::sqlite::Access;
use loopx_store::{AuthorityError, Committed, Receipt, Step};
use serde::Serialize;

/// What `init` created.
#[derive(Debug, Clone, Serialize)]
pub struct Initialized {
    pub run_id: String,
    pub state_status: LoopStatus,
    pub max_iterations: u64,
    /// The goal-priority template written beside the loop, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_priority_template: Option<String>,
    /// The formal policy file written beside the loop, when a formal flag
    /// was given (the flags are also the loop's standing orders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formal_policy: Option<String>,
}

/// What `append-iteration` recorded.
#[derive(Debug, Clone, Serialize)]
pub struct Appended {
    pub iteration: u64,
    pub decision: Decision,
    pub state_status: LoopStatus,
    pub remaining_iterations: u64,
}

/// What `append-iteration --dry-run` would record; nothing was written.
#[derive(Debug, Clone, Serialize)]
pub struct AppendPreview {
    pub status: &'static str,
    pub action: &'static str,
    pub dry_run: bool,
    pub dir: String,
    pub iteration: u64,
    pub decision: Decision,
    pub would_append: Option<LedgerEvent>,
    pub warnings: Vec<String>,
}

/// [`init`], then, when `goal_priority_template` is `Some(force)`, write
/// the goal-priority template beside the loop. An existing
/// `goal_priority.json` without `force` refuses the whole init before
/// anything is written.
pub fn init_with_template(
    root: Place<'_>,
    operation_id: Option<&str>,
    request: InitLoop,
    goal_priority_template: Option<bool>,
    formal: &loopx_core::formal::Layer,
) -> Result<ReceiptView<Initialized>, AppError> {
    if let Some(force) = goal_priority_template {
        crate::goal_priority::check_template(root.dir, force)?;
    }
    crate::formal::check_init(root.dir, formal)?;
    let operation_id = given_or_generated(operation_id)?;
    let mut view = init(root, Some(operation_id.as_str()), request)?;
    if goal_priority_template.is_some() {
        view.body.goal_priority_template = Some(crate::goal_priority::write_template(root.dir)?);
    }
    if !formal.is_empty() {
        let dir = LoopDir::open(root, Access::ReadWrite)?;
        view.body.formal_policy = crate::formal::record_at_init(&dir, &operation_id, formal)?;
    }
    Ok(view)
}

/// Create a loop in `root` (refused, leaving nothing behind, when the
/// request is invalid or `root` already holds a loop).
pub fn init(
    root: Place<'_>,
    operation_id: Option<&str>,
    request: InitLoop,
) -> Result<ReceiptView<Initialized>, AppError> {
    let operation_id = given_or_generated(operation_id)?;
    let request = LedgerRequest::Init(request);
    let now = clock::now();
    // Refuse bad input before anything exists on disk.
    let precheck = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &NoFiles,
    };
    LedgerOwner::decide(None, &request, &precheck).map_err(crate::error::refusal)?;
    let dir = if root.dir.join(DATABASE).is_file() {
        LoopDir::open(root, Access::ReadWrite)?
    } else {
        LoopDir::create(root)?
    };
    let (receipt, mut warnings) = commit(&dir, &operation_id, &request, now)?;
    // `loopx serve --all` lists every loop made here.
    if let LedgerReceipt::Init { run_id, .. } = &receipt.body {
        warnings.extend(crate::all_loops::note(
            &dir,
            run_id,
            crate::registry::Source::Created,
        ));
    }
    Ok(ReceiptView::new("init", receipt, |body| match body {
        LedgerReceipt::Init {
            run_id,
            state_status,
            max_iterations,
        } => Initialized {
            run_id,
            state_status,
            max_iterations,
            goal_priority_template: None,
            formal_policy: None,
        },
        _ => unreachable!("init yields an init receipt"),
    })
    .in_dir(dir.display())
    .with_warnings(warnings))
}

/// What `append-iteration` did with a report: banked it, or (enforce
/// mode) staged it as a candidate for result review.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Recorded {
    Banked(ReceiptView<Appended>),
    Staged(ReceiptView<crate::focus::candidate::Staged>),
}

/// Record one iteration: banked directly, except in enforce mode, where
/// the ledger refuses a direct append and the report is staged instead,
/// with what `staging` adds (each claim's evidence file, requested
/// obligation target statuses), bound to the driver's open dispatch (or,
/// with none open, to the executor `staging` states). The mode is not read up front: a monitor or off loop
/// pays nothing for the diversion.
pub fn append_or_stage(
    root: Place<'_>,
    operation_id: Option<&str>,
    report: IterationReport,
    staging: crate::focus::candidate::Staging<'_>,
) -> Result<Recorded, AppError> {
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    // A malformed goal_priority.json refuses the append before it is made.
    let priority = crate::goal_priority::resolve(&dir)?;
    let request = LedgerRequest::AppendIteration(report);
    match try_commit(&dir, &operation_id, &request, clock::now()) {
        Ok((receipt, mut warnings)) => Ok(Recorded::Banked({
            warnings.extend(crate::goal_priority::warnings_now(&dir, &priority));
            ReceiptView::new("append-iteration", receipt, appended)
                .in_dir(dir.display())
                .with_warnings(warnings)
        })),
        Err(AuthorityError::Rejected(LedgerError::EnforceNeedsDispatch)) => {
            let LedgerRequest::AppendIteration(report) = request else {
                unreachable!("the request is an append")
            };
            crate::focus::candidate::stage(&dir, &operation_id, report, staging)
                .map(Recorded::Staged)
        }
        Err(refused) => Err(anyhow::Error::from(refused).into()),
    }
}

/// What [`append_iteration`] would record, from a read-only look.
pub fn preview_append(root: Place<'_>, report: IterationReport) -> Result<AppendPreview, AppError> {
    let operation_id = given_or_generated(None)?;
    let dir = LoopDir::open(root, Access::ReadOnly)?;
    let priority = crate::goal_priority::resolve(&dir)?;
    let request = LedgerRequest::AppendIteration(report);
    let context = LedgerContext {
        now: clock::now(),
        operation_id: &operation_id,
        files: &dir,
    };
    let decided = dir
        .authority()
        .preview::<LedgerOwner>(STREAM, &request, &context)
        .map_err(anyhow::Error::from)?;
    let Appended {
        iteration,
        decision,
        ..
    } = appended(decided.receipt);
    // What goal priority would warn about once this record is banked.
    let warnings = match &decided.event {
        Some(LedgerEvent::IterationAppended { record }) if priority.active => {
            let mut records = dir.read()?.ledger.recent;
            records.push((**record).clone());
            loopx_core::ledger::goal_priority::warnings(&priority, &records)
        }
        _ => crate::goal_priority::warnings_now(&dir, &priority),
    };
    Ok(AppendPreview {
        status: "ok",
        action: "append-iteration",
        dry_run: true,
        dir: dir.display(),
        iteration,
        decision,
        would_append: decided.event,
        warnings,
    })
}

fn appended(body: LedgerReceipt) -> Appended {
    match body {
        LedgerReceipt::AppendIteration {
            iteration,
            decision,
            state_status,
            remaining_iterations,
        } => Appended {
            iteration,
            decision,
            state_status,
            remaining_iterations,
        },
        _ => unreachable!("append yields an append receipt"),
    }
}

/// Commit `request` to the ledger, then refresh the views from the state
/// committed. Once committed nothing is an error (see `refresh_views`):
/// what goes wrong after is a warning. A replay wrote nothing, so there is
/// nothing to refresh.
fn commit(
    dir: &LoopDir,
    operation_id: &OperationId,
    request: &LedgerRequest,
    now: Timestamp,
) -> Result<(Receipt<LedgerReceipt>, Vec<String>), AppError> {
    try_commit(dir, operation_id, request, now).map_err(|e| anyhow::Error::from(e).into())
}

/// [`commit`], with the refusal still typed.
fn try_commit(
    dir: &LoopDir,
    operation_id: &OperationId,
    request: &LedgerRequest,
    now: Timestamp,
) -> Result<(Receipt<LedgerReceipt>, Vec<String>), AuthorityError<LedgerError>> {
    let context = LedgerContext {
        now,
        operation_id,
        files: dir,
    };
    let step = Step::<LedgerOwner> {
        stream: STREAM,
        operation_id,
        request,
        context: &context,
    };
    let (receipt, committed) = dir.authority().execute_committed(&step, now)?;
    let warnings = match committed {
        // The views come from the state just committed: no read back.
        Some(Committed { revision, state }) => dir.refresh_views_from(&Reading {
            revision,
            ledger: state,
        }),
        None if receipt.replayed => Vec::new(),
        None => dir.refresh_views(),
    };
    Ok((receipt, warnings))
}

/// The loop at a glance: the ledger, its stop verdict and the driver, as
/// of `now`. `status --json` and `GET /api/status` both return this.
#[derive(Debug, Clone)]
pub struct StatusView {
    pub dir: String,
    pub revision: u64,
    pub ledger: Ledger,
    pub verdict: Verdict,
    pub driver: DriverSummary,
    /// How the loop ended, or how its last driver run gave up.
    pub ending: Option<Ending>,
    pub now: Timestamp,
    /// The supervisor's line, when one ever ran on the loop (text only).
    pub supervisor: Option<String>,
    /// Worker runs' hosts, workers' todos and the merge queue, when a
    /// worker ever ran on the loop.
    pub workers: Option<crate::workers::Overview>,
}

impl Serialize for StatusView {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(flatten)]
            ledger: view::Status<'a>,
            dir: &'a str,
            driver: &'a DriverSummary,
            #[serde(skip_serializing_if = "Option::is_none")]
            ending: Option<EndingView>,
            #[serde(skip_serializing_if = "Option::is_none")]
            workers: Option<&'a crate::workers::Overview>,
        }
        Wire {
            ledger: view::status(&self.ledger, self.revision, &self.verdict),
            dir: &self.dir,
            driver: &self.driver,
            ending: self.ending.clone().map(EndingView::from),
            workers: self.workers.as_ref(),
        }
        .serialize(serializer)
    }
}

impl StatusView {
    /// The status for people: the ledger's lines, then the driver's.
    pub fn text(&self) -> String {
        let mut text =
            view::status_text(&self.ledger, &self.verdict, self.ending.as_ref(), self.now);
        text.push_str(&format!("  driver      {}\n", self.driver.line()));
        if let Some(line) = &self.supervisor {
            text.push_str(&format!("  supervisor: {line}\n"));
        }
        if let Some(workers) = &self.workers {
            text.push_str(&format!("  workers     {}\n", workers.line()));
        }
        if let Some(snapshot) = &self.driver.snapshot {
            text.push_str(&format!(
                "  workspace   turn {}: {} (`loopx snapshot show {}`)\n",
                snapshot.turn,
                snapshot.stat.words(),
                snapshot.turn
            ));
        }
        text
    }
}

pub fn status(dir: &LoopDir) -> Result<StatusView, AppError> {
    let Reading { revision, ledger } = dir.read()?;
    let now = clock::now();
    let verdict = dir.verdict(&ledger, now);
    let (_, driver) = dir.driver()?;
    let driver = driver::summary(&driver, platform::alive);
    Ok(StatusView {
        dir: dir.display(),
        revision,
        ending: ending(&ledger, &verdict, &driver),
        driver,
        ledger,
        verdict,
        now,
        supervisor: crate::supervisor::status_line(dir),
        workers: crate::workers::overview(dir)?,
    })
}

/// The read-only stop arbiter's answer.
#[derive(Debug, Clone, Serialize)]
pub struct DoneView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// How the loop ended (or its last driver run gave up), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ending: Option<EndingView>,
    /// The owner's executable checks against the project's HEAD now, when
    /// any are configured (judged, never run: `done` runs nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<crate::goal::checks::ChecksView>,
}

impl DoneView {
    /// The ending's words first, then the arbiter's code, which scripts
    /// and the reference runtime's readers know; then configured checks
    /// that are not met.
    pub fn text(&self) -> String {
        let mut text = match &self.ending {
            Some(ending) => format!("{} [{}]", ending.words, view::verdict_text(&self.verdict)),
            None => view::verdict_text(&self.verdict),
        };
        if let Some(checks) = self.checks.as_ref().filter(|c| c.not_met > 0) {
            text.push_str(&format!(
                "\n{} of {} configured checks not met on this HEAD (`loopx check status`; `loopx check run` runs them)",
                checks.not_met,
                checks.criteria.len()
            ));
        }
        text
    }
}

/// The stop arbiter's answer, with the configured checks judged against
/// the HEAD of the project at `root`. Read-only: runs no check.
pub fn done(dir: &LoopDir, root: &std::path::Path) -> Result<DoneView, AppError> {
    let Reading { ledger, .. } = dir
        .read()
        .map_err(|e| AppError::from(e.context("the done arbiter needs a readable ledger")))?;
    let verdict = dir.verdict(&ledger, clock::now());
    let driver = driver::summary(&dir.driver()?.1, platform::alive);
    Ok(DoneView {
        status: "ok",
        action: "done",
        dir: dir.display(),
        ending: ending(&ledger, &verdict, &driver).map(EndingView::from),
        verdict,
        checks: Some(crate::goal::checks::status(dir, root, None)?)
            .filter(|c| !c.criteria.is_empty()),
    })
}

/// What `validate` found. A store with problems is a finding, not a
/// failure of the use case: `status` says `failed` and the adapter decides
/// what that means for its caller (the CLI exits 1).
#[derive(Debug, Clone, Serialize)]
pub struct ValidateView {
    pub status: &'static str,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub checked: Checked,
}

#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub dir: String,
    pub iterations: u64,
    pub revision: u64,
    pub streams: Vec<StreamChecked>,
    /// One digest of every stream's snapshot: equal on two stores that
    /// hold the same loop, whichever their backends.
    pub state_digest: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamChecked {
    pub stream: String,
    pub revision: u64,
}

impl ValidateView {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn text(&self) -> String {
        let mut text = if self.is_valid() {
            format!(
                "valid: {}, journal revision {}, {} audited",
                loopx_core::words::count(self.checked.iterations, "iteration"),
                self.checked.revision,
                loopx_core::words::count(self.checked.streams.len() as u64, "stream")
            )
        } else {
            format!(
                "invalid: {} problems in {}",
                self.errors.len(),
                self.checked.dir
            )
        };
        for error in &self.errors {
            text.push_str(&format!("\n  error: {error}"));
        }
        text
    }
}

pub fn validate(dir: &LoopDir) -> Result<ValidateView, AppError> {
    let mut audit = dir.audit(clock::now())?;
    // Legacy goal priority: its streak warnings, or its file's problem.
    match crate::goal_priority::resolve(dir) {
        Ok(priority) => audit
            .warnings
            .extend(crate::goal_priority::warnings_now(dir, &priority)),
        Err(problem) => audit.errors.push(problem.message),
    }
    Ok(ValidateView {
        status: if audit.is_valid() { "ok" } else { "failed" },
        checked: Checked {
            dir: dir.display(),
            iterations: audit.ledger.iterations,
            revision: audit.ledger.revision,
            streams: audit
                .streams
                .into_iter()
                .map(|(stream, revision)| StreamChecked { stream, revision })
                .collect(),
            state_digest: audit.state_digest.to_string(),
        },
        errors: audit.errors,
        warnings: audit.warnings,
    })
}
