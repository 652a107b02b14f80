//! `refresh-state`: the agent's writeback at the end of a turn — an
//! evidence note, todo transitions, and optionally an outcome refinement —
//! committed by the two-commit protocol below. Owns that protocol and
//! nothing else; every rule it applies is the goal owner's.

use super::{GoalReceiptView, GoalTarget};
use crate::loop_dir::LoopDir;
use anyhow::{Context as _, Result};
use loopx_core::goal::outcome::OutcomeUpdate;
use loopx_core::goal::todo::TodoAction;
use loopx_core::goal::{self, GoalRequest};
use loopx_core::operation::OperationId;
use serde::Serialize;

/// What one turn writes back.
#[derive(Debug, Clone, Default)]
pub struct Refresh {
    /// The turn's evidence note, kept in the goal's history.
    pub note: String,
    pub evidence_refs: Vec<String>,
    pub complete: Vec<String>,
    pub release: Vec<String>,
    /// Todo id and the reason it is blocked.
    pub block: Vec<(String, String)>,
    /// An outcome update, committed before the writeback.
    pub outcome_update: Option<OutcomeUpdate>,
}

/// What the outcome's commit answered (its own operation and revision).
#[derive(Debug, Serialize)]
pub struct OutcomeCommitted {
    pub operation_id: OperationId,
    pub revision: u64,
    pub replayed: bool,
    pub effects: Vec<String>,
}

/// Both commits of a refresh: the writeback's receipt (flattened) and the
/// outcome's, if there was one.
#[derive(Debug, Serialize)]
pub struct RefreshView {
    #[serde(flatten)]
    pub writeback: GoalReceiptView,
    pub outcome: Option<OutcomeCommitted>,
}

/// Commit a turn's writeback under operation id `base`.
///
/// Two commits, in this order: the outcome refinement under
/// `<base>.outcome`, then the writeback under `<base>.writeback`. They stay
/// sequential, not one atomic multi-stream commit: the goal-outcome RFC
/// allows it, because each is idempotent under its derived operation id.
/// If the writeback fails after the refinement committed, the error says
/// so, and repeating the identical request (same `base`) replays the
/// refinement and finishes the writeback without duplicating either.
/// A malformed writeback is refused before the refinement commits, so a bad
/// note never leaves half a refresh behind.
pub fn refresh_state(
    dir: &LoopDir,
    target: &GoalTarget,
    refresh: Refresh,
    base: &OperationId,
) -> Result<RefreshView> {
    let part = |suffix: &str| {
        let id = format!("{base}.{suffix}");
        OperationId::parse(&id).with_context(|| {
            format!(
                "operation id {base} is too long to derive its parts (such as {id}); use at most {} characters",
                OperationId::MAX_LEN - ".writeback".len()
            )
        })
    };
    let Refresh {
        note,
        evidence_refs,
        complete,
        release,
        block,
        outcome_update,
    } = refresh;
    let mut todos: Vec<(String, TodoAction)> = Vec::new();
    todos.extend(complete.into_iter().map(|id| (id, TodoAction::Complete)));
    todos.extend(release.into_iter().map(|id| (id, TodoAction::Release)));
    todos.extend(
        block
            .into_iter()
            .map(|(id, reason)| (id, TodoAction::Block { reason })),
    );
    let writeback = target.command(
        GoalRequest::Writeback {
            note,
            evidence_refs,
            todos,
        },
        None,
    );
    goal::input::check(&writeback)?;
    let writeback_id = part("writeback")?;
    let mut outcome = None;
    if let Some(update) = outcome_update {
        let command = target.command(GoalRequest::RefineOutcome { update }, None);
        outcome = Some(dir.goal_execute(&target.goal_id, &part("outcome")?, &command)?);
    }
    let written = dir
        .goal_execute(&target.goal_id, &writeback_id, &writeback)
        .map_err(|error| match &outcome {
            Some(committed) => error.context(format!(
                "the outcome refinement already committed (operation {}, revision {}); the writeback did not: fix the cause and repeat this exact request with operation id {base} to finish without duplicating",
                committed.operation_id, committed.revision
            )),
            None => error,
        })?;
    Ok(RefreshView {
        writeback: super::goal_receipt(written),
        outcome: outcome.map(|o| OutcomeCommitted {
            operation_id: o.operation_id,
            revision: o.revision,
            replayed: o.replayed,
            effects: o.body.effects,
        }),
    })
}
