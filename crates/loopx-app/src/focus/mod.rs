//! Goal Focus v2 as the application reaches it: the mode a new loop gets,
//! reading the four Goal Focus streams together, and the use cases
//! `goal-focus status`, `validate`, `replan`, `reconcile` and `revise`,
//! each returning a typed view (staging and result review in
//! [`candidate`], strategy review in [`strategy`]).
//!
//! Owns: gathering what the owners decide on (one consistent read of the
//! ledger, contract, registry, plan and decision log), committing a replan
//! as one atomic pair (plan and decision) fenced on the contract and
//! registry revisions it was chosen from, the cross-stream agreement
//! `validate` checks, and the `goal_focus.json` projection. Does not own
//! any rule: the direction rule, the triggers, the mode and what a plan
//! may be are `loopx_core::focus`'s.

pub mod candidate;
pub mod dispatch;
pub mod strategy;

use crate::loop_dir::{LoopDir, Place, Reading};
use crate::operation::given_or_generated;
use crate::receipt::ReceiptView;
use crate::{clock, AppError};
use anyhow::Result;
use jiff::Timestamp;
use loopx_core::digest::Digest;
use loopx_core::driver::DriverSummary;
use loopx_core::focus::compute::{ComputePin, ComputePolicy};
use loopx_core::focus::decisions::DecisionRecorded;
use loopx_core::focus::decisions::{DecisionContext, DecisionLog, DecisionOwner, Record};
use loopx_core::focus::mode::{self, Gate, Holds, ModeSource};
use loopx_core::focus::plan::{CurrentPlan, Trigger};
use loopx_core::focus::registry::EligibilityStatus;
use loopx_core::focus::replan::{self as plan, PlanContext, PlanOwner, Replan};
use loopx_core::focus::signals::{signals, Inputs, Signal};
use loopx_core::focus::Document;
use loopx_core::focus::{
    self, ApproachRegistry, ContractOwner, DocumentOwner, FocusError, GoalContract, Pin,
    RegistryOwner, Revise, Revised, RevisedReceipt,
};
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::Ledger;
use loopx_core::operation::{Clock, OperationId, Owner};
use loopx_store::sqlite::Access;
use loopx_store::{AuthorityError, Fence, Loaded, Receipt, Step, StoreError};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// The derived view of Goal Focus, rewritten after every commit once the
/// loop has Goal Focus state: exactly what `goal-focus status --json` says.
pub const PROJECTION: &str = "goal_focus.json";

/// Everything Goal Focus decides on, read in one consistent snapshot. A
/// contract or registry nobody wrote reads as revision 0: the contract
/// derived from `init`, an empty registry.
pub struct FocusReading {
    pub ledger: Ledger,
    pub contract: Revised<GoalContract>,
    pub registry: Revised<ApproachRegistry>,
    pub plan: Loaded<CurrentPlan>,
    pub decisions: Loaded<DecisionLog>,
    /// The candidate stream (empty when nothing was ever staged).
    pub candidate: loopx_core::focus::candidate::Slot,
    /// The driver, its registered pid checked against the live processes.
    pub driver: DriverSummary,
    /// The store revisions the contract and registry were read at (0:
    /// never written): what a direction commit judged on them is fenced on.
    pub read_at: ReadAt,
}

/// The store revisions of the streams a direction commit judges against
/// but does not write.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadAt {
    pub contract: u64,
    pub registry: u64,
}

impl ReadAt {
    /// The fences of a commit judged on this reading: it lands only while
    /// neither the contract nor the registry has moved.
    fn fences(self) -> [Fence<'static>; 2] {
        [
            Fence {
                stream: focus::CONTRACT_STREAM,
                revision: self.contract,
            },
            Fence {
                stream: focus::REGISTRY_STREAM,
                revision: self.registry,
            },
        ]
    }
}

impl FocusReading {
    pub fn mode(&self) -> GoalFocusMode {
        self.ledger.config.goal_focus_mode
    }

    /// Whether any Goal Focus stream was ever written.
    pub fn has_state(&self) -> bool {
        self.contract.revision > 0
            || self.registry.revision > 0
            || self.plan.revision > 0
            || self.candidate != Default::default()
    }

    /// The replan signals that close the pre-dispatch gate now: those
    /// that fire, when the mode enforces them ([`mode::gate`]); none
    /// otherwise. What the driver stops on and the health line shows.
    pub fn gate_closing_signals(&self, now: Timestamp) -> Vec<Signal> {
        let signals = self.signals(now);
        match mode::gate(self.mode(), &signals) {
            mode::Gate::Blocked => signals,
            _ => Vec::new(),
        }
    }

    /// The replan triggers that fire now (none when Goal Focus is off).
    pub fn signals(&self, now: Timestamp) -> Vec<Signal> {
        if self.mode() == GoalFocusMode::Off {
            return Vec::new();
        }
        signals(&Inputs {
            now,
            ledger: &self.ledger,
            contract: &self.contract,
            registry: &self.registry,
            plan: self.plan.state.as_ref(),
        })
    }

    fn plan_context(&self, now: Timestamp) -> PlanContext<'_> {
        PlanContext {
            now,
            mode: self.mode(),
            ledger: &self.ledger,
            contract: &self.contract,
            registry: &self.registry,
            read_plan_revision: self.plan.state.as_ref().map_or(0, |p| p.plan_revision),
        }
    }
}

/// The compute policy in force: what the current plan's selected
/// approaches in the registry allow and forbid (none without a plan),
/// under the host's compute pin. Staging checks a candidate against it;
/// the turn prompt states it.
pub fn compute_policy(dir: &LoopDir) -> Result<ComputePolicy, AppError> {
    let (pin, _) = document(dir, focus::COMPUTE_PIN_STREAM, ComputePin::default)?;
    let plan =
        (dir.authority().load::<PlanOwner>(focus::PLAN_STREAM)).map_err(anyhow::Error::from)?;
    let of_plan = match plan.state {
        Some(plan) => {
            let (registry, _) = document(dir, focus::REGISTRY_STREAM, ApproachRegistry::default)?;
            ComputePolicy::of(&plan, &registry.document)
        }
        None => ComputePolicy::default(),
    };
    Ok(of_plan.under(&pin.document.policy))
}

/// A document and the store revision it was read at.
fn document<D: Document>(
    dir: &LoopDir,
    stream: &str,
    unwritten: impl FnOnce() -> D,
) -> Result<(Revised<D>, u64)> {
    let loaded = dir.authority().load::<DocumentOwner<D>>(stream)?;
    let document = loaded.state.unwrap_or_else(|| Revised {
        revision: 0,
        revised_at: None,
        document: unwritten(),
    });
    Ok((document, loaded.revision))
}

/// The Goal Focus streams of the loop whose ledger is `ledger`.
fn read_streams(dir: &LoopDir, ledger: Ledger) -> Result<FocusReading> {
    let (contract, contract_at) = document(dir, focus::CONTRACT_STREAM, || {
        GoalContract::from_init(&ledger.config)
    })?;
    let (registry, registry_at) = document(dir, focus::REGISTRY_STREAM, ApproachRegistry::default)?;
    Ok(FocusReading {
        contract,
        registry,
        read_at: ReadAt {
            contract: contract_at,
            registry: registry_at,
        },
        plan: dir.authority().load::<PlanOwner>(focus::PLAN_STREAM)?,
        decisions: dir
            .authority()
            .load::<DecisionOwner>(focus::DECISIONS_STREAM)?,
        candidate: candidate::slot(dir)?.unwrap_or_default(),
        driver: loopx_core::driver::summary(&dir.driver()?.1, crate::platform::alive),
        ledger,
    })
}

impl LoopDir {
    /// The ledger and every Goal Focus stream, as of one committed state.
    pub fn focus(&self) -> Result<FocusReading> {
        let mut found = None;
        self.authority().store().read_consistent(&mut || {
            found = Some(self.read().and_then(|r| read_streams(self, r.ledger)));
            Ok(())
        })?;
        found.expect("the read ran")
    }
}

/// A document's place in the status: which version, and how much of it.
#[derive(Debug, Clone, Serialize)]
pub struct DocumentSummary {
    pub revision: u64,
    pub fingerprint: Digest,
    /// False: nobody wrote one; this is the version derived from `init`.
    pub written: bool,
    #[serde(flatten)]
    pub counts: serde_json::Value,
}

fn summary<D: Serialize>(doc: &Revised<D>, counts: serde_json::Value) -> DocumentSummary {
    let Pin {
        revision,
        fingerprint,
    } = doc.pin();
    DocumentSummary {
        revision,
        fingerprint,
        written: revision > 0,
        counts,
    }
}

/// An open dispatch no live driver holds, and the command that shows it.
#[derive(Debug, Clone, Serialize)]
pub struct UnresolvedDispatch {
    pub iteration: u64,
    pub command: String,
}

/// `goal-focus status`: the mode in force and why, what the gate makes of
/// the signals, and where contract, registry, plan and decisions stand.
#[derive(Debug, Clone, Serialize)]
pub struct FocusStatus {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub enforcement_mode: GoalFocusMode,
    /// `None`: the loop was created before loopx recorded why.
    pub mode_source: Option<ModeSource>,
    pub mode_reason: String,
    pub gate: Gate,
    /// A driver dispatch open with no live driver to settle it: in enforce
    /// mode it closes the gate until recovered.
    pub unresolved_dispatch: Option<UnresolvedDispatch>,
    pub signals: Vec<Signal>,
    pub goal_contract: DocumentSummary,
    pub approach_registry: DocumentSummary,
    pub current_plan: Option<CurrentPlan>,
    pub direction_decisions: u64,
    /// The staged candidate awaiting result review, and any quarantined.
    pub candidate: candidate::CandidateStatus,
}

impl FocusStatus {
    fn of(dir: &LoopDir, reading: &FocusReading, now: Timestamp) -> Self {
        let mode = reading.mode();
        let source = reading.ledger.config.goal_focus_mode_source;
        let signals = reading.signals(now);
        let contract = &reading.contract.document;
        let registry = &reading.registry.document;
        let (eligible, _) = registry.eligible(now);
        let unresolved = (reading.driver.iteration)
            .filter(|_| mode::dispatch_unresolved(&reading.driver))
            .map(|iteration| UnresolvedDispatch {
                iteration,
                command: format!("loopx goal-focus recover-dispatch --dir {}", dir.display()),
            });
        FocusStatus {
            status: "ok",
            action: "goal-focus status",
            dir: dir.display(),
            enforcement_mode: mode,
            mode_source: source,
            mode_reason: mode::reason(mode, source),
            gate: mode::gate_with_holds(
                mode,
                &signals,
                Holds {
                    candidate: reading.candidate.hold().is_some(),
                    dispatch: unresolved.is_some(),
                },
            ),
            unresolved_dispatch: unresolved,
            signals,
            goal_contract: summary(
                &reading.contract,
                serde_json::json!({
                    "criteria": contract.criteria.len(),
                    "obligations": contract.obligations.len(),
                    "open_obligations": contract.open_obligations(),
                }),
            ),
            approach_registry: summary(
                &reading.registry,
                serde_json::json!({
                    "campaigns": registry.campaigns.len(),
                    "approaches": registry.approaches().count(),
                    "eligible": eligible.len(),
                }),
            ),
            current_plan: reading.plan.state.clone(),
            direction_decisions: reading.decisions.state.as_ref().map_or(0, |d| d.decisions),
            candidate: candidate::CandidateStatus::of(Some(&reading.candidate)),
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "goal focus  {}", self.mode_reason);
        let gate = match self.gate {
            Gate::NotApplied => "not applied",
            Gate::Clear => "clear: no replan trigger fires",
            Gate::Reported => "reported: triggers fire; monitor mode does not block",
            Gate::Blocked => {
                "blocked: a trigger fires, a candidate is undecided or a dispatch unresolved; enforce launches no new work until a reviewed replan, the candidate's review or release, or the dispatch's recovery"
            }
        };
        let _ = writeln!(out, "  gate      {gate}");
        if let Some(open) = &self.unresolved_dispatch {
            let _ = writeln!(
                out,
                "  dispatch  for iteration {} is open and no driver runs it: `{}`",
                open.iteration, open.command
            );
        }
        out.push_str(&self.candidate.text());
        for signal in &self.signals {
            let _ = writeln!(out, "  trigger   {}: {}", signal.trigger, signal.detail);
        }
        let doc = |d: &DocumentSummary| match d.written {
            true => format!("revision {} ({})", d.revision, d.fingerprint),
            false => {
                "not written yet (the contract derives from init; the registry is empty)".to_owned()
            }
        };
        let _ = writeln!(out, "  contract  {}", doc(&self.goal_contract));
        let _ = writeln!(out, "  registry  {}", doc(&self.approach_registry));
        match &self.current_plan {
            None => {
                let _ = writeln!(out, "  plan      none");
            }
            Some(plan) => {
                let direction = match &plan.selection {
                    Some(s) => format!(
                        "{} {} for {} ({})",
                        s.kind,
                        s.approach_ids.join(", "),
                        loopx_core::words::count(s.horizon_iterations, "iteration"),
                        s.rationale
                    ),
                    None => "no direction selected".into(),
                };
                let _ = writeln!(
                    out,
                    "  plan      {} {} ({}, trigger {}): {direction}",
                    plan.plan_revision, plan.state, plan.review, plan.trigger
                );
            }
        }
        let _ = writeln!(
            out,
            "  decisions {}",
            loopx_core::words::count(self.direction_decisions, "direction decision")
        );
        out
    }
}

pub fn status(dir: &LoopDir) -> Result<FocusStatus, AppError> {
    let reading = dir.focus()?;
    Ok(FocusStatus::of(dir, &reading, clock::now()))
}

/// Rewrite `goal_focus.json` from `ledger` and the Goal Focus streams,
/// once the loop has Goal Focus state (a loop that never used it gets no
/// file). Never an error: called after a commit, like the other views.
pub(crate) fn refresh_projection(dir: &LoopDir, ledger: &Ledger) -> Vec<String> {
    // Three index lookups on a loop without Goal Focus state (a decision
    // is never written without its plan, so its stream needs no look).
    let written = || -> Result<bool> {
        let store = dir.authority().store();
        for stream in [
            focus::PLAN_STREAM,
            focus::REGISTRY_STREAM,
            focus::CONTRACT_STREAM,
        ] {
            if store.revision(stream)? > 0 {
                return Ok(true);
            }
        }
        // Only an enforce-mode loop stages candidates: a plain loop pays
        // no fourth lookup.
        Ok(ledger.config.goal_focus_mode == GoalFocusMode::Enforce
            && store.revision(loopx_core::focus::candidate::CANDIDATE_STREAM)? > 0)
    };
    let result = written().and_then(|written| {
        if !written || ledger.config.goal_focus_mode == GoalFocusMode::Off {
            return Ok(());
        }
        let reading = read_streams(dir, ledger.clone())?;
        let status = FocusStatus::of(dir, &reading, clock::now());
        let mut text = serde_json::to_string_pretty(&status)?;
        text.push('\n');
        dir.write_view(PROJECTION, text.as_bytes())
    });
    match result {
        Ok(()) => Vec::new(),
        Err(error) => vec![crate::loop_dir::view_warning(PROJECTION, error)],
    }
}

/// What `goal-focus validate` found: every Goal Focus stream's journal
/// audit, each stored document re-checked, and whether plan, contract,
/// registry and decision log agree with each other.
#[derive(Debug, Clone, Serialize)]
pub struct FocusValidation {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub enforcement_mode: GoalFocusMode,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl FocusValidation {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn text(&self) -> String {
        let mut text = match self.is_valid() {
            true => format!("valid: Goal Focus state of {} agrees", self.dir),
            false => format!(
                "invalid: {} Goal Focus problems in {}",
                self.errors.len(),
                self.dir
            ),
        };
        for error in &self.errors {
            let _ = write!(text, "\n  error: {error}");
        }
        for warning in &self.warnings {
            let _ = write!(text, "\n  warning: {warning}");
        }
        text
    }
}

/// Where a plan and the versions it is pinned to disagree.
fn pin_problems(plan: &CurrentPlan, reading: &FocusReading) -> Vec<String> {
    let mut problems: Vec<String> = plan
        .drift(&reading.contract, &reading.registry)
        .into_iter()
        .map(|drift| format!(
            "plan {} is pinned to {} revision {} ({}), but it is now revision {} ({}): run `loopx goal-focus replan --trigger revision_drift`",
            plan.plan_revision,
            drift.what,
            drift.pinned.revision,
            drift.pinned.fingerprint,
            drift.current.revision,
            drift.current.fingerprint
        ))
        .collect();
    if problems.is_empty() {
        for approach_id in plan.selection.iter().flat_map(|s| &s.approach_ids) {
            if reading.registry.document.approach(approach_id).is_none() {
                problems.push(format!(
                    "plan {} selects approach {approach_id:?}, which the registry it is pinned to does not define",
                    plan.plan_revision
                ));
            }
        }
    }
    problems
}

pub fn validate(dir: &LoopDir) -> Result<FocusValidation, AppError> {
    let now = clock::now();
    let audit = dir.audit(now)?;
    let reading = dir.focus()?;
    let mut errors: Vec<String> = audit
        .errors
        .into_iter()
        .filter(|e| {
            focus::STREAMS
                .iter()
                .any(|s| e.starts_with(&format!("stream {s}:")))
        })
        .collect();
    let mut warnings = Vec::new();
    if let Err(problem) = reading.contract.document.check() {
        errors.push(format!("the stored goal contract is not valid: {problem}"));
    }
    if let Err(problem) = reading.registry.document.check() {
        errors.push(format!(
            "the stored approach registry is not valid: {problem}"
        ));
    }
    let decisions = reading.decisions.state.as_ref();
    match (&reading.plan.state, decisions) {
        (None, None) => {}
        (Some(plan), decisions) => {
            errors.extend(pin_problems(plan, &reading));
            let recorded = decisions.map_or(0, |d| d.decisions);
            let last = decisions.and_then(|d| d.last.as_ref());
            if recorded != plan.plan_revision
                || last.map(|l| l.decision.plan_revision) != Some(plan.plan_revision)
            {
                errors.push(format!(
                    "plan {} and the direction decisions disagree ({recorded} decisions, the last for plan {}): every plan is committed with exactly one decision",
                    plan.plan_revision,
                    last.map_or("none".to_owned(), |l| l.decision.plan_revision.to_string())
                ));
            }
        }
        (None, Some(log)) => errors.push(format!(
            "{} direction decisions are recorded but there is no plan: every decision is committed with the plan it records",
            log.decisions
        )),
    }
    if reading.mode() == GoalFocusMode::Off && reading.has_state() {
        warnings.push(
            "Goal Focus is off for this loop, but Goal Focus state was written: it is kept and not acted on".into(),
        );
    }
    for approach in reading.registry.document.approaches() {
        let a = approach.approach;
        if a.eligibility.status == EligibilityStatus::Blocked && a.reopen_conditions.is_empty() {
            warnings.push(format!(
                "approach {} is blocked with no reopen condition: nothing can make it eligible again",
                a.approach_id
            ));
        }
    }
    Ok(FocusValidation {
        status: if errors.is_empty() { "ok" } else { "failed" },
        action: "goal-focus validate",
        dir: dir.display(),
        enforcement_mode: reading.mode(),
        errors,
        warnings,
    })
}

/// What `goal-focus replan` committed, or with `--dry-run` would commit.
#[derive(Debug, Clone, Serialize)]
pub struct ReplanView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub dry_run: bool,
    /// `None` on a dry run: nothing was committed.
    pub operation_id: Option<String>,
    pub replayed: bool,
    pub plan: CurrentPlan,
    /// The decision committed with the plan (`None` on a dry run).
    pub decision: Option<loopx_core::focus::decisions::DecisionRecorded>,
    pub warnings: Vec<String>,
}

impl ReplanView {
    pub fn text(&self) -> String {
        let plan = &self.plan;
        let verb = match (self.dry_run, self.replayed) {
            (true, _) => "would commit",
            (false, true) => "already committed",
            (false, false) => "committed",
        };
        let mut text = format!(
            "{verb} plan {} ({}, {}) on trigger {}",
            plan.plan_revision, plan.state, plan.review, plan.trigger
        );
        match (&plan.selection, &plan.proposal.selection) {
            (Some(s), _) => {
                let _ = write!(
                    text,
                    "\n  direction  {}: {}",
                    s.approach_ids.join(", "),
                    s.rationale
                );
            }
            (None, Some(proposed)) => {
                let _ = write!(
                    text,
                    "\n  proposed   {} (not selected: enforce mode needs a different-family strategy review; `loopx goal-focus strategy-brief` shows what to review, `loopx goal-focus strategy-review --file ADVICE.json` applies it)",
                    proposed.approach_ids.join(", ")
                );
            }
            (None, None) => {
                let _ = write!(
                    text,
                    "\n  no eligible approach: revise the registry (`loopx goal-focus revise --registry FILE`)"
                );
            }
        }
        for excluded in &plan.proposal.excluded {
            let _ = write!(
                text,
                "\n  excluded   {} ({})",
                excluded.approach_id, excluded.reason
            );
        }
        text
    }
}

/// Choose a direction and commit it with its decision, atomically; with
/// `dry_run`, only show what would be committed.
pub fn replan(
    root: Place<'_>,
    trigger: Option<Trigger>,
    dry_run: bool,
    operation_id: Option<&str>,
) -> Result<ReplanView, AppError> {
    let request = Replan { trigger };
    let now = clock::now();
    if dry_run {
        let dir = LoopDir::open(root, Access::ReadOnly)?;
        let reading = dir.focus()?;
        let plan = plan::draft(
            reading.plan.state.as_ref(),
            &request,
            &reading.plan_context(now),
        )
        .map_err(crate::error::refusal)?;
        return Ok(ReplanView {
            status: "ok",
            action: "goal-focus replan",
            dir: dir.display(),
            dry_run: true,
            operation_id: None,
            replayed: false,
            plan,
            decision: None,
            warnings: Vec::new(),
        });
    }
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let record = Record {
        decision_id: operation_id.to_string(),
        trigger,
    };
    let (plan, decision, warnings) = judged_anew(|| {
        let reading = dir.focus()?;
        let context = reading.plan_context(now);
        commit_plan::<PlanOwner, DecisionOwner>(
            &dir,
            &operation_id,
            (&request, &context),
            (
                &record,
                &DecisionContext {
                    plan: &context,
                    replaced: reading.plan.state.as_ref(),
                },
            ),
            reading.read_at,
            now,
        )
    })?;
    Ok(ReplanView {
        status: "ok",
        action: "goal-focus replan",
        dir: dir.display(),
        dry_run: false,
        operation_id: Some(operation_id.to_string()),
        replayed: plan.replayed,
        plan: plan.body,
        decision: Some(decision.body),
        warnings,
    })
}

/// A committed plan, its decision, and the warnings of the views refresh.
type PlanCommitted = (Receipt<CurrentPlan>, Receipt<DecisionRecorded>, Vec<String>);

/// What one attempt at a direction commit came to: committed, or not
/// written because a stream it judged against moved meanwhile
/// ([`StoreError::FenceMoved`]), so it must be read and judged again.
type Attempt = Result<PlanCommitted, StoreError>;

/// How many times a direction commit is read and judged again after what
/// it judged against moved under it, before it reports that.
const JUDGE_ATTEMPTS: u32 = 4;

/// Run `attempt` (read, judge, commit fenced on what was read) until it
/// commits, is refused, or has found its inputs moved [`JUDGE_ATTEMPTS`]
/// times. Each new attempt reads the moved stream and judges again: a
/// replan chooses anew from the revised contract or registry, a strategy
/// review finds that its advice no longer binds what is there.
fn judged_anew(
    mut attempt: impl FnMut() -> Result<Attempt, AppError>,
) -> Result<PlanCommitted, AppError> {
    let mut moved = None;
    for _ in 0..JUDGE_ATTEMPTS {
        match attempt()? {
            Ok(committed) => return Ok(committed),
            Err(fence) => moved = Some(fence),
        }
    }
    Err(anyhow::Error::new(moved.expect("at least one attempt ran")).into())
}

/// Commit a plan and the decision that records it as one pair under
/// `operation_id` (both or neither), fenced on the contract and registry
/// revisions its contexts were built from (`read_at`), then refresh the
/// views unless it was a replay: the one way every direction commit
/// (replan, strategy review) is written.
fn commit_plan<P, D>(
    dir: &LoopDir,
    operation_id: &OperationId,
    plan: (&P::Request, &P::Context<'_>),
    decision: (&D::Request, &D::Context<'_>),
    read_at: ReadAt,
    now: Timestamp,
) -> Result<Attempt, AppError>
where
    P: Owner<State = CurrentPlan, Receipt = CurrentPlan, Error = FocusError>,
    D: Owner<State = DecisionLog, Receipt = DecisionRecorded, Error = FocusError>,
{
    // Between the judgement and the commit: a revision landing here must
    // stop the commit, not show up later as drift.
    loopx_store::failpoint::hold("focus.plan.before_commit");
    let committed = dir.authority().execute_pair_fenced::<P, D>(
        &Step {
            stream: focus::PLAN_STREAM,
            operation_id,
            request: plan.0,
            context: plan.1,
        },
        &Step {
            stream: focus::DECISIONS_STREAM,
            operation_id,
            request: decision.0,
            context: decision.1,
        },
        &read_at.fences(),
        now,
    );
    let (plan, decision) = match committed {
        Ok(pair) => pair,
        Err(AuthorityError::Store(moved @ StoreError::FenceMoved { .. })) => return Ok(Err(moved)),
        Err(other) => return Err(anyhow::Error::from(other).into()),
    };
    let warnings = match plan.replayed {
        true => Vec::new(),
        false => dir.refresh_views(),
    };
    Ok(Ok((plan, decision, warnings)))
}

/// Which Goal Focus document `revise` replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Contract,
    Registry,
}

/// Replace the goal contract or the approach registry with the JSON
/// document at `path` (read bounded). With `base_revision`, refused once
/// the document has moved past the revision the caller read.
pub fn revise(
    root: Place<'_>,
    which: Which,
    path: &Path,
    base_revision: Option<u64>,
    operation_id: Option<&str>,
) -> Result<ReceiptView<RevisedReceipt>, AppError> {
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let Reading { ledger, .. } = dir.read()?;
    if ledger.config.goal_focus_mode == GoalFocusMode::Off {
        return Err(crate::error::refusal(FocusError::Off).into());
    }
    let now = clock::now();
    let clock = Clock { now };
    let receipt = match which {
        Which::Contract => {
            let request = Revise {
                base_revision,
                document: crate::goal::read_document::<GoalContract>(path)?,
            };
            dir.authority().execute::<ContractOwner>(
                focus::CONTRACT_STREAM,
                &operation_id,
                &request,
                &clock,
                now,
            )
        }
        Which::Registry => {
            let request = Revise {
                base_revision,
                document: crate::goal::read_document::<ApproachRegistry>(path)?,
            };
            dir.authority().execute::<RegistryOwner>(
                focus::REGISTRY_STREAM,
                &operation_id,
                &request,
                &clock,
                now,
            )
        }
    }
    .map_err(anyhow::Error::from)?;
    let warnings = match receipt.replayed || receipt.unchanged {
        true => Vec::new(),
        false => dir.refresh_views(),
    };
    let action = match which {
        Which::Contract => "goal-focus revise --contract",
        Which::Registry => "goal-focus revise --registry",
    };
    Ok(ReceiptView::new(action, receipt, |body| body)
        .in_dir(dir.display())
        .with_warnings(warnings))
}

/// What `goal-focus reconcile` rewrote.
#[derive(Debug, Clone, Serialize)]
pub struct ReconcileView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    /// The derived views, each rewritten from the store if it differed.
    pub views: Vec<&'static str>,
    pub warnings: Vec<String>,
}

impl ReconcileView {
    pub fn text(&self) -> String {
        format!("reconciled {} from the store", self.views.join(", "))
    }
}

/// Rewrite every derived view of the loop (`recovery.md`, `status.json`,
/// and `goal_focus.json` once there is Goal Focus state) from the store.
pub fn reconcile(dir: &LoopDir) -> Result<ReconcileView, AppError> {
    let reading = dir.focus()?;
    let warnings = dir.refresh_views();
    let mut views = vec![crate::loop_dir::RECOVERY, crate::loop_dir::STATUS];
    if reading.has_state() && reading.mode() != GoalFocusMode::Off {
        views.push(PROJECTION);
    }
    Ok(ReconcileView {
        status: "ok",
        action: "goal-focus reconcile",
        dir: dir.display(),
        views,
        warnings,
    })
}
