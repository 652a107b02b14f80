//! Mapping the source onto loopx: the loop's `init`, each iteration
//! record, the Goal Focus documents and plan, every direction signal and
//! which of them disagree; and every request decided once in memory
//! ([`plan`]), so the dry run refuses exactly what apply would. Not here:
//! reading the files (`source.rs`) or committing the requests
//! (`apply.rs`).

use super::source::{
    flat_or_nested, refused, Iterations, Source, SourceDecision, SourceIteration, SourcePlan,
    BUDGET, CONTRACT, DECISIONS, ITERATIONS, LOOP_STATE, PLAN, PRIORITY, REGISTRY,
};
use super::view::{DirectionSignal, ImportView, PlanImport, RevisionMap};
use crate::AppError;
use jiff::Timestamp;
use loopx_core::focus::direction::{Selection, SelectionKind};
use loopx_core::focus::mode::ModeSource;
use loopx_core::focus::replan::{draft_import, ImportPlan, PlanContext};
use loopx_core::focus::{self, ApproachRegistry, DocumentOwner, GoalContract, Revise, Revised};
use loopx_core::ledger::budget::Budget;
use loopx_core::ledger::proof::NoFiles;
use loopx_core::ledger::vocabulary::GoalFocusMode;
use loopx_core::ledger::{
    BudgetDelta, Direction, EvidenceChecked, InitLoop, IterationRecord, Ledger, LedgerContext,
    LedgerOwner, LedgerRequest, StopConditions,
};
use loopx_core::operation::{Clock, OperationId, Owner};
use loopx_core::text::{self, limits};
use std::path::Path;

impl Source {
    /// The enforcement mode of the new loop: the source plan's, else
    /// `default`, a new loop's.
    fn mode(&self, default: (GoalFocusMode, ModeSource)) -> (GoalFocusMode, ModeSource) {
        match self.plan.as_ref().and_then(|p| p.enforcement_mode) {
            Some(mode) => (mode, ModeSource::Imported),
            None => default,
        }
    }

    fn init(&self, default_mode: (GoalFocusMode, ModeSource)) -> InitLoop {
        let budget = Budget {
            max_iterations: self.budget.max_iterations,
            max_wall_time_seconds: self.budget.max_wall_time_seconds,
            max_tokens: self.budget.max_tokens,
            max_usd: self.budget.max_usd,
        };
        let mut init = InitLoop::new(&self.state.goal, &self.state.success_criteria, budget);
        if let Some(mode) = self.state.default_mode {
            init.default_mode = mode;
        }
        if let Some(rule) = &self.state.plateau_rule {
            init.plateau_rule = rule.clone();
        }
        if let Some(stop) = &self.state.stop_conditions {
            init.stop_conditions = StopConditions {
                require_user_stop_only: stop.require_user_stop_only,
                user_overrides: stop.user_overrides.clone(),
            };
        }
        let (mode, source) = self.mode(default_mode);
        init.goal_focus_mode = mode;
        init.goal_focus_mode_source = Some(source);
        init.source_run_id = self.state.run_id.clone();
        init
    }

    /// When the loop began: `loop_state.created_at`, else its first record.
    fn created_at(&self, now: Timestamp) -> Timestamp {
        self.state
            .created_at
            .or_else(|| self.iterations.as_ref().and_then(|i| i.first_timestamp))
            .unwrap_or(now)
    }

    /// The directions the plan's fields name, in order, deduplicated.
    fn plan_approaches(plan: &SourcePlan) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        let named = plan.selection.iter().flat_map(|s| s.approach_ids.iter());
        for id in named.chain(plan.approach_id.iter()) {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        ids
    }

    /// Every direction signal, and every disagreement among them.
    fn signals(&self) -> (Vec<DirectionSignal>, Vec<String>) {
        let mut signals = Vec::new();
        let mut ambiguities = Vec::new();
        let mut signal = |file, signal, value: String| {
            signals.push(DirectionSignal {
                file,
                signal,
                value,
            })
        };
        if let Some(path) = &self.state.next_preferred_path {
            signal(LOOP_STATE, "next_preferred_path", path.clone());
        }
        if let Some(iterations) = &self.iterations {
            if !iterations.last_campaign.is_empty() {
                signal(
                    ITERATIONS,
                    "last_campaign",
                    iterations.last_campaign.clone(),
                );
            }
        }
        let plan_campaign = self.plan.as_ref().and_then(|p| {
            p.campaign_id.clone().or_else(|| {
                p.selection
                    .as_ref()
                    .and_then(|s| s.campaign_ids.first().cloned())
            })
        });
        if let Some(plan) = &self.plan {
            signal(PLAN, "plan_state", plan.state.clone());
            let approaches = Self::plan_approaches(plan);
            if !approaches.is_empty() {
                signal(PLAN, "selected_approach", approaches.join(", "));
            }
            if let Some(campaign) = &plan_campaign {
                signal(PLAN, "selected_campaign", campaign.clone());
            }
            if let (Some(single), Some(selection)) = (&plan.approach_id, &plan.selection) {
                if !selection.approach_ids.is_empty() && !selection.approach_ids.contains(single) {
                    ambiguities.push(format!(
                        "{PLAN} selects two directions: approach_id {single:?} and selection.approach_ids {:?}",
                        selection.approach_ids
                    ));
                }
            }
            let pins = [
                (
                    "goal_revision",
                    plan.goal_revision,
                    CONTRACT,
                    self.contract.as_ref().and_then(|c| c.revision),
                ),
                (
                    "registry_revision",
                    plan.registry_revision,
                    REGISTRY,
                    self.registry.as_ref().and_then(|r| r.revision),
                ),
            ];
            for (field, pinned, file, actual) in pins {
                if let Some(pinned) = pinned {
                    signal(PLAN, field, pinned.to_string());
                    if Some(pinned) != actual {
                        ambiguities.push(format!(
                            "{PLAN} is pinned to {field} {pinned}, but {file} is at {}",
                            actual.map_or("no revision".to_owned(), |r| r.to_string())
                        ));
                    }
                }
            }
        }
        let pending: Vec<&SourceDecision> = self
            .decisions
            .iter()
            .filter(|d| d.status.as_deref() == Some("pending"))
            .collect();
        for decision in &pending {
            signal(
                DECISIONS,
                "pending_decision",
                format!(
                    "{} ({})",
                    decision.decision_id,
                    decision
                        .approach_id
                        .as_deref()
                        .unwrap_or("no approach named")
                ),
            );
            ambiguities.push(format!(
                "{DECISIONS} holds decision {:?} still pending: which direction it settles on is not known",
                decision.decision_id
            ));
        }
        let committed = self
            .decisions
            .iter()
            .rev()
            .find(|d| d.status.as_deref() != Some("pending"));
        if let Some(last) = committed {
            signal(
                DECISIONS,
                "last_decision",
                format!(
                    "{} for plan {} ({})",
                    last.decision_id,
                    last.plan_revision
                        .map_or("unnumbered".to_owned(), |r| r.to_string()),
                    last.approach_id.as_deref().unwrap_or("no approach named")
                ),
            );
            if let (Some(plan), Some(approach)) = (&self.plan, &last.approach_id) {
                let approaches = Self::plan_approaches(plan);
                let same_plan =
                    last.plan_revision.is_none() || last.plan_revision == plan.plan_revision;
                if same_plan && !approaches.is_empty() && !approaches.contains(approach) {
                    ambiguities.push(format!(
                        "{DECISIONS} last selected approach {approach:?}, but {PLAN} selects {approaches:?}"
                    ));
                }
            }
        }
        if let Some(priority) = &self.priority {
            let enabled = priority.enabled.unwrap_or(false);
            signal(
                PRIORITY,
                "priority",
                format!(
                    "{} ({})",
                    if enabled { "enabled" } else { "disabled" },
                    priority.discipline_mode.as_deref().unwrap_or("soft")
                ),
            );
            if let Some(campaign) = &priority.campaign_id {
                signal(PRIORITY, "priority_campaign", campaign.clone());
                if let Some(plan_campaign) = plan_campaign.as_ref().filter(|_| enabled) {
                    if plan_campaign != campaign {
                        ambiguities.push(format!(
                            "{PRIORITY} puts campaign {campaign:?} first, but {PLAN} selects campaign {plan_campaign:?}"
                        ));
                    }
                }
            }
        }
        (signals, ambiguities)
    }

    /// The selection the plan carries over, or why none is.
    fn plan_selection(&self, ambiguous: bool) -> Result<Option<Selection>, String> {
        let Some(plan) = &self.plan else {
            return Err("the source has no plan".into());
        };
        if plan.state != "active" {
            return Err(format!(
                "the source plan is {}, not active: it selects no direction to follow",
                plan.state
            ));
        }
        if ambiguous {
            return Err(
                "the source's direction signals disagree (see ambiguities): import does not choose among them; run `loopx goal-focus replan` once they are resolved".into(),
            );
        }
        let approaches = Self::plan_approaches(plan);
        if approaches.is_empty() {
            return Err("the source plan is active but names no approach".into());
        }
        let selection = plan.selection.as_ref();
        // The campaigns are the registry's for these approaches; a plan
        // that names others disagrees with its own registry.
        let registry = self.registry.as_ref().map(|r| &r.document);
        let mut campaign_ids: Vec<String> = Vec::new();
        for approach in &approaches {
            let found = registry.and_then(|r| r.approach(approach));
            if let Some(campaign) = found.map(|c| c.campaign_id.to_owned()) {
                if !campaign_ids.contains(&campaign) {
                    campaign_ids.push(campaign);
                }
            }
        }
        let named = selection.iter().flat_map(|s| s.campaign_ids.iter());
        if let Some(other) = named
            .chain(plan.campaign_id.iter())
            .find(|c| !campaign_ids.contains(c))
        {
            return Err(format!(
                "the source plan names campaign {other:?}, but {REGISTRY} puts its approaches in {campaign_ids:?}: import does not choose between them"
            ));
        }
        Ok(Some(Selection {
            kind: selection
                .and_then(|s| s.kind)
                .unwrap_or(if approaches.len() == 1 {
                    SelectionKind::Exploit
                } else {
                    SelectionKind::Experiment
                }),
            approach_ids: approaches,
            campaign_ids,
            horizon_iterations: selection
                .and_then(|s| s.horizon_iterations)
                .or(plan.horizon_iterations)
                .unwrap_or(focus::direction::EXPLOIT_ITERATIONS),
            rationale: match selection.map(|s| s.rationale.trim()) {
                Some(text) if !text.is_empty() => text.to_owned(),
                _ => "carried over from the imported loop's current plan".into(),
            },
        }))
    }
}

fn record_of(source: &SourceIteration, operation_id: OperationId) -> IterationRecord {
    let e = &source.evidence_checked;
    let progress = source.progress_assessment.as_ref();
    IterationRecord {
        iteration: source.iteration,
        timestamp: source.timestamp,
        operation_id,
        mode: source.mode,
        objective: source.objective.clone(),
        decision: source.decision,
        stop_reason: source.stop_reason.clone(),
        evidence_checked: EvidenceChecked {
            source_ids: e.source_ids.clone(),
            claim_ids: e.claim_ids.clone(),
            evidence_ids: e.evidence_ids.clone(),
            guard_refs: e.guard_refs.clone(),
        },
        input_refs: source.input_refs.clone(),
        actions_taken: source.actions_taken.clone(),
        remaining_gaps: source.remaining_gaps.clone(),
        output: source.output.clone(),
        budget_delta: BudgetDelta {
            iterations: source.budget_delta.iterations,
            tokens: source.budget_delta.tokens,
            usd: source.budget_delta.usd,
            wall_time_seconds: source.budget_delta.wall_time_seconds,
        },
        completed_summary: source.completed_summary.clone(),
        current_summary: source.current_summary.clone(),
        proposed_next_action: source.proposed_next_action.clone(),
        executor_provider: flat_or_nested(
            &source.executor_provider,
            source
                .execution
                .as_ref()
                .map(|e| e.executor_provider.as_str()),
        ),
        dispatch_id: String::new(),
        claim: None,
        // Reviewed, if at all, by the runtime that wrote it, not by loopx.
        bank: None,
        direction: Direction {
            global_delta: flat_or_nested(
                &source.global_delta,
                progress.map(|p| p.global_delta.as_str()),
            ),
            campaign_delta: flat_or_nested(
                &source.campaign_delta,
                progress.map(|p| p.campaign_delta.as_str()),
            ),
            obligation_ids: match (&source.obligation_ids, progress) {
                (flat, Some(p)) if flat.is_empty() => p.obligation_ids.clone(),
                (flat, _) => flat.clone(),
            },
            campaign_id: source.campaign_id(),
            goal_contribution: source.goal_contribution.clone(),
            ..Direction::default()
        },
    }
}

/// Every request the import commits, in order, each already decided once
/// in memory against the state the previous ones leave.
pub(super) struct Plan {
    pub(super) init: InitLoop,
    /// Fresh for every import: the run id is derived from it, and two
    /// imports of one source are two loops.
    pub(super) init_operation: OperationId,
    pub(super) created_at: Timestamp,
    /// The history, read again record by record when the loop is built.
    pub(super) iterations: Option<Iterations>,
    pub(super) ledger: Ledger,
    pub(super) contract: Option<GoalContract>,
    pub(super) registry: Option<ApproachRegistry>,
    pub(super) plan: Option<ImportPlan>,
    pub(super) view: ImportView,
}

pub(super) fn operation(text: &str) -> OperationId {
    OperationId::parse(text).expect("import operation ids are plain")
}

fn iteration_operation(n: u64) -> OperationId {
    operation(&format!("import-iteration-{n}"))
}

/// What one source record becomes: its import, under an operation id
/// its iteration number fixes (so the dry run and the build agree).
pub(super) fn import_request(source_record: &SourceIteration) -> LedgerRequest {
    let id = iteration_operation(source_record.iteration);
    LedgerRequest::ImportIteration(Box::new(record_of(source_record, id)))
}

/// The init of an import: `import-init-` and a random suffix.
fn init_operation() -> OperationId {
    operation(&format!(
        "import-init-{:016x}",
        crate::platform::random_u64()
    ))
}
pub(super) const FOCUS_OPERATION: &str = "import-focus";

/// Decide every request in memory: what apply would commit, and each
/// refusal it would meet, named by file and line.
pub(super) fn plan(
    source: &Source,
    from: &Path,
    to: &Path,
    now: Timestamp,
) -> Result<Plan, AppError> {
    // The reference keeps a loop's panel.json in the loop directory: a
    // source with an enabled panel gets a new loop's default with one.
    let init = source.init(crate::panel::mode_for_new_loop(None, from)?);
    let created_at = source.created_at(now);
    let init_id = init_operation();
    let decided = LedgerOwner::decide(
        None,
        &LedgerRequest::Init(init.clone()),
        &ledger_context(created_at, &init_id),
    )
    .map_err(|e| refused(format!("{LOOP_STATE} / {BUDGET}: {e}; nothing was written")))?;
    let mut folded = Some(LedgerOwner::evolve(
        None,
        decided.event.as_ref().expect("init writes"),
    ));
    if let Some(iterations) = &source.iterations {
        iterations.each(&mut |line, source_record| {
            let request = import_request(&source_record);
            let id = iteration_operation(source_record.iteration);
            let ledger = folded.take().expect("folded up to this record");
            let decided = LedgerOwner::decide(Some(&ledger), &request, &ledger_context(now, &id))
                .map_err(|e| {
                refused(format!(
                    "{ITERATIONS} line {line} (iteration {}): {e}; nothing was written",
                    source_record.iteration
                ))
            })?;
            let event = decided.event.expect("an import writes");
            folded = Some(LedgerOwner::evolve_owned(Some(ledger), event));
            Ok(())
        })?;
    }
    let ledger = folded.expect("folded up to the last record");
    if let Some(spent) = &source.budget.spent() {
        let agrees = spent.iterations == ledger.spent.iterations
            && spent.tokens == ledger.spent.tokens
            && (spent.usd - ledger.spent.usd).abs() < 1e-6;
        if !agrees {
            return Err(refused(format!(
                "{BUDGET} says {} iterations, {} tokens and ${} spent, but {ITERATIONS} adds up to {}, {} and ${}: the source disagrees with itself; fix one of them, then import again; nothing was written",
                spent.iterations, spent.tokens, spent.usd,
                ledger.spent.iterations, ledger.spent.tokens, ledger.spent.usd
            )));
        }
    }
    if let Some(status) = &source.state.status {
        let imported = ledger.status.as_str();
        // `initialized` and `running` differ only in whether a record exists.
        let equivalent = status == imported
            || (status == "running" && imported == "initialized")
            || (status == "initialized" && imported == "running");
        if !equivalent {
            return Err(refused(format!(
                "{LOOP_STATE} says status {status:?}, but its iterations leave the loop {imported}: the source disagrees with itself; nothing was written"
            )));
        }
    }
    let (signals, ambiguities) = source.signals();
    // Every value shown is checked as the loop's own text is: bounded, and
    // free of control characters a terminal would act on.
    for signal in &signals {
        let limit = match signal.signal {
            "next_preferred_path" => limits::NOTE,
            _ => limits::LINE,
        };
        text::check(
            &format!("{} {}", signal.file, signal.signal),
            &signal.value,
            limit,
        )
        .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    if let Some(run_id) = &source.state.run_id {
        text::check(&format!("{LOOP_STATE} run_id"), run_id, limits::LINE)
            .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    if let Some(rationale) = source.plan.iter().flat_map(|p| &p.selection).next() {
        text::check(
            &format!("{PLAN} selection.rationale"),
            &rationale.rationale,
            limits::NOTE,
        )
        .map_err(|e| refused(format!("{e}; nothing was written")))?;
    }
    let mode = init.goal_focus_mode;
    let clock = Clock { now };
    let contract = match &source.contract {
        Some(c) => Some(
            decide_document::<GoalContract>(None, &c.document, &clock)
                .map_err(|e| refused(format!("{CONTRACT}: {e}; nothing was written")))?,
        ),
        None => None,
    };
    let registry = match &source.registry {
        Some(r) => Some(
            decide_document::<ApproachRegistry>(None, &r.document, &clock)
                .map_err(|e| refused(format!("{REGISTRY}: {e}; nothing was written")))?,
        ),
        None => None,
    };
    let contract_now = contract
        .clone()
        .unwrap_or_else(|| unwritten(GoalContract::from_init(&ledger.config)));
    let registry_now = registry
        .clone()
        .unwrap_or_else(|| unwritten(ApproachRegistry::default()));
    let mut plan_view = None;
    let mut import_plan = None;
    if let Some(source_plan) = source.plan.as_ref().filter(|_| mode != GoalFocusMode::Off) {
        let (selection, reason) = match source.plan_selection(!ambiguities.is_empty()) {
            Ok(selection) => (selection, None),
            Err(reason) => (None, Some(reason)),
        };
        let mut request = ImportPlan {
            selection,
            valid_through_iteration: source_plan.valid_through_iteration,
        };
        let plan_context = PlanContext {
            now,
            mode,
            ledger: &ledger,
            contract: &contract_now,
            registry: &registry_now,
            read_plan_revision: 0,
        };
        // A selection the registry cannot hold (undefined, ineligible) is
        // one more disagreement: kept needs_replan, and said why.
        let (drafted, reason) = match draft_import(None, &request, &plan_context) {
            Ok(plan) => (plan, reason),
            Err(refusal) => {
                request.selection = None;
                let plan = draft_import(None, &request, &plan_context)
                    .map_err(|e| refused(format!("{PLAN}: {e}; nothing was written")))?;
                (
                    plan,
                    Some(format!("{refusal}; the plan is kept without it")),
                )
            }
        };
        let reason = match (mode, &drafted.proposal.selection, reason) {
            (GoalFocusMode::Enforce, Some(_), None) => Some(
                "enforce mode: the carried-over direction waits for a different-family strategy review before it is selected".to_owned(),
            ),
            (_, _, reason) => reason,
        };
        plan_view = Some(PlanImport {
            source_revision: source_plan.plan_revision,
            source_state: source_plan.state.clone(),
            state: drafted.state.to_string(),
            selection: drafted.selection.clone(),
            reason,
        });
        import_plan = Some(request);
    }
    let goal_contract = contract.as_ref().map(|d| RevisionMap {
        source_revision: source.contract.as_ref().and_then(|c| c.revision),
        revision: d.revision,
        fingerprint: d.pin().fingerprint,
    });
    let approach_registry = registry.as_ref().map(|d| RevisionMap {
        source_revision: source.registry.as_ref().and_then(|r| r.revision),
        revision: d.revision,
        fingerprint: d.pin().fingerprint,
    });
    let pending = source
        .decisions
        .iter()
        .filter(|d| d.status.as_deref() == Some("pending"))
        .count() as u64;
    let view = ImportView {
        status: "ok",
        action: "import",
        dry_run: true,
        from: from.display().to_string(),
        dir: to.display().to_string(),
        sources: source.files.clone(),
        run_id: None,
        source_run_id: source.state.run_id.clone(),
        enforcement_mode: mode,
        iterations: ledger.spent.iterations,
        tokens: ledger.spent.tokens,
        usd: ledger.spent.usd,
        state_status: ledger.status,
        created_at,
        goal_contract,
        approach_registry,
        plan: plan_view,
        source_decisions: source.decisions.len() as u64,
        pending_decisions: pending,
        signals,
        ambiguities,
        warnings: source.warnings.clone(),
    };
    Ok(Plan {
        init,
        init_operation: init_id,
        created_at,
        iterations: source.iterations.clone(),
        ledger,
        contract: contract.map(|c| c.document),
        registry: registry.map(|r| r.document),
        plan: import_plan,
        view,
    })
}

/// Imports read no loop file: an imported early stop keeps the verdict of
/// the runtime that recorded it (see `import_guard`).
pub(super) fn ledger_context(now: Timestamp, operation_id: &OperationId) -> LedgerContext<'_> {
    LedgerContext {
        now,
        operation_id,
        files: &NoFiles,
    }
}

fn unwritten<D>(document: D) -> Revised<D> {
    Revised {
        revision: 0,
        revised_at: None,
        document,
    }
}

fn decide_document<D: focus::Document>(
    state: Option<&Revised<D>>,
    document: &D,
    clock: &Clock,
) -> Result<Revised<D>, focus::FocusError> {
    let request = Revise {
        base_revision: Some(0),
        document: document.clone(),
    };
    let decided = DocumentOwner::<D>::decide(state, &request, clock)?;
    Ok(match decided.event {
        Some(event) => DocumentOwner::<D>::evolve(state.cloned(), &event),
        None => state
            .cloned()
            .expect("only an existing document is unchanged"),
    })
}
