//! Strategy review as the application reaches it: `goal-focus
//! strategy-brief` (what a reviewer must see) and `goal-focus
//! strategy-review` (apply a reviewer's `strategy_advice.v1`), each
//! returning a typed view. The review panel calls the same two functions,
//! [`brief`] and [`review`], with the bytes its reviewer wrote.
//!
//! Owns: the IO these need and nothing more: reading the loop's Goal Focus
//! streams and its driver's provider in one consistent read, looking the
//! executor's and the reviewer's families up in the provider table with
//! the real environment, parsing the advice (bounded, strict), and
//! committing its plan and decision as ONE atomic pair, fenced on the
//! contract and registry revisions it was judged against (judged again if
//! either moved before the commit). Does not own any
//! rule: who the executor is, what an advice must bind and say, and the
//! plan it commits are `loopx_core::focus::strategy`'s.

use super::candidate::family_of;
use super::FocusReading;
use crate::loop_dir::{LoopDir, Place};
use crate::operation::given_or_generated;
use crate::{clock, AppError};
use loopx_core::focus::decisions::DecisionRecorded;
use loopx_core::focus::plan::CurrentPlan;
use loopx_core::focus::strategy::{
    self, AdviceContext, AdviceDecisionContext, ApplyAdvice, Parties, Party, RecordAdvice,
    ReviewedDecisionOwner, ReviewedPlanOwner, StrategyAdvice, StrategyBrief,
};
use loopx_core::focus::FocusError;
use loopx_core::text::limits;
use loopx_store::sqlite::Access;
use serde::Serialize;
use std::fmt::Write as _;

/// The Goal Focus reading and the driver's provider, as of one commit.
fn read(dir: &LoopDir) -> anyhow::Result<(FocusReading, Option<String>)> {
    let mut found = None;
    dir.authority().store().read_consistent(&mut || {
        found = Some(dir.read().and_then(|r| {
            let reading = super::read_streams(dir, r.ledger)?;
            let (_, driver) = dir.driver()?;
            let provider = driver.current_provider.or_else(|| {
                driver
                    .registration
                    .and_then(|r| r.providers.into_iter().next())
            });
            Ok((reading, provider))
        }));
        Ok(())
    })?;
    found.expect("the read ran")
}

fn refused(problem: strategy::AdviceProblem) -> AppError {
    crate::error::refusal(FocusError::from(problem)).into()
}

/// The executor named by the driver or by `explicit`, with its family.
fn executor(driver: Option<&str>, explicit: Option<&str>) -> Result<Party, AppError> {
    let provider = strategy::executor(driver, explicit).map_err(refused)?;
    Ok(Party {
        family: family_of(&provider),
        provider,
    })
}

/// `goal-focus strategy-brief`: what a strategy reviewer is sent.
#[derive(Debug, Clone, Serialize)]
pub struct BriefView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub brief: StrategyBrief,
}

impl BriefView {
    pub fn text(&self) -> String {
        let b = &self.brief;
        let plan = &b.current_plan;
        let proposed = (plan.proposal.selection.as_ref())
            .map_or("nothing (no approach is eligible)".to_owned(), |s| {
                format!("{} {} ({})", s.kind, s.approach_ids.join(", "), s.rationale)
            });
        let mut text = format!(
            "plan {} awaits a strategy review from a family other than {} ({})\n  proposed   {proposed}\n  eligible   {}\n",
            plan.plan_revision,
            b.executor.family.name(),
            b.executor.provider,
            b.eligible.join(", ")
        );
        for (what, bound) in [
            ("contract", &b.bind.goal_contract),
            ("registry", &b.bind.approach_registry),
            ("plan", &b.bind.current_plan),
        ] {
            let _ = writeln!(
                text,
                "  bind {what:<9} revision {} {}",
                bound.revision, bound.fingerprint
            );
        }
        text.push_str("answer with a strategy_advice.v1 document: `loopx goal-focus strategy-review --file ADVICE.json` (--json shows the complete brief)");
        text
    }
}

/// The brief a strategy reviewer of the loop at `root` must see, or why
/// nothing awaits review. `executor` names the executor's provider when no
/// driver has (it must agree with the driver's when one has).
pub fn brief(root: Place<'_>, executor_provider: Option<&str>) -> Result<BriefView, AppError> {
    let dir = LoopDir::open(root, Access::ReadOnly)?;
    let (reading, driver) = read(&dir)?;
    let executor = executor(driver.as_deref(), executor_provider)?;
    let context = reading.plan_context(clock::now());
    let brief =
        strategy::brief(&context, reading.plan.state.as_ref(), executor).map_err(refused)?;
    Ok(BriefView {
        status: "ok",
        action: "goal-focus strategy-brief",
        dir: dir.display(),
        brief,
    })
}

/// What `goal-focus strategy-review` committed.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyReviewView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub operation_id: String,
    pub replayed: bool,
    pub plan: CurrentPlan,
    pub decision: DecisionRecorded,
    pub warnings: Vec<String>,
}

impl StrategyReviewView {
    pub fn text(&self) -> String {
        let plan = &self.plan;
        let verb = if self.replayed {
            "already committed"
        } else {
            "committed"
        };
        let review = plan.strategy_review.as_ref();
        let by = review.map_or(String::new(), |r| {
            format!(
                ": {} by {} ({}; executor {} / {})",
                r.verdict,
                r.reviewer.provider,
                r.reviewer.family.name(),
                r.executor.provider,
                r.executor.family.name()
            )
        });
        let mut text = format!(
            "{verb} plan {} ({}, {}){by}",
            plan.plan_revision, plan.state, plan.review
        );
        match &plan.selection {
            Some(s) => {
                let _ = write!(
                    text,
                    "\n  direction  {} {} for {}: {}",
                    s.kind,
                    s.approach_ids.join(", "),
                    loopx_core::words::count(s.horizon_iterations, "iteration"),
                    s.rationale
                );
            }
            None => {
                for reason in review.iter().flat_map(|r| &r.reasons) {
                    let _ = write!(text, "\n  objection  {reason}");
                }
                text.push_str(
                    "\n  no direction: reviewer dissent fires; `loopx goal-focus replan` proposes again",
                );
            }
        }
        text
    }
}

/// Parse `bytes` as a `strategy_advice.v1` document (bounded, strict).
pub fn parse_advice(bytes: &[u8]) -> Result<StrategyAdvice, AppError> {
    if bytes.len() as u64 > limits::DOCUMENT_BYTES {
        return Err(AppError::refused(format!(
            "the advice is {} bytes, over the {} byte limit of a document",
            bytes.len(),
            limits::DOCUMENT_BYTES
        )));
    }
    serde_json::from_slice(bytes).map_err(|error| {
        AppError::refused(format!(
            "the advice is not a {} document ({error}): fields schema, reviewer {{provider}}, reviewed {{goal_contract, approach_registry, current_plan}} (copy `bind` from `loopx goal-focus strategy-brief --json`), verdict endorse|object|propose, selection (propose only), reasons (object), rationale",
            strategy::SCHEMA
        ))
    })
}

/// Apply the `strategy_advice.v1` document `advice_bytes` to the loop at
/// `root`: refused (nothing written) unless it passes
/// [`strategy::judge`]; otherwise the next plan and its decision are
/// committed in one transaction. `executor` as for [`brief`]. Repeating
/// the same advice under the same `operation_id` replays the receipt.
pub fn review(
    root: Place<'_>,
    advice_bytes: &[u8],
    executor_provider: Option<&str>,
    operation_id: Option<&str>,
) -> Result<StrategyReviewView, AppError> {
    let advice = parse_advice(advice_bytes)?;
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let now = clock::now();
    let apply = ApplyAdvice {
        advice,
        executor: executor_provider.map(|p| p.trim().to_owned()),
    };
    let record = RecordAdvice {
        decision_id: operation_id.to_string(),
        apply: apply.clone(),
    };
    // Judged against the contract and registry as read; should either move
    // before the commit, the advice is judged again against what is there.
    let (plan, decision, warnings) = super::judged_anew(|| {
        let (reading, driver) = read(&dir)?;
        let executor = executor(driver.as_deref(), executor_provider)?;
        let parties = Parties {
            reviewer_family: family_of(&apply.advice.reviewer.provider),
            executor,
        };
        let plan_context = reading.plan_context(now);
        let context = AdviceContext {
            plan: &plan_context,
            parties: &parties,
        };
        super::commit_plan::<ReviewedPlanOwner, ReviewedDecisionOwner>(
            &dir,
            &operation_id,
            (&apply, &context),
            (
                &record,
                &AdviceDecisionContext {
                    advice: &context,
                    replaced: reading.plan.state.as_ref(),
                },
            ),
            reading.read_at,
            now,
        )
    })?;
    Ok(StrategyReviewView {
        status: "ok",
        action: "goal-focus strategy-review",
        dir: dir.display(),
        operation_id: operation_id.to_string(),
        replayed: plan.replayed,
        plan: plan.body,
        decision: decision.body,
        warnings,
    })
}
