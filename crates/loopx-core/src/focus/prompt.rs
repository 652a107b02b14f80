//! The turn prompt's Goal Focus section: in enforce mode the committed
//! plan as the turn's only dispatch authority, with the staging rules an
//! executor must keep; in monitor mode the same documents as observations
//! that change nothing. The reference runtime gives the primary the same
//! two readings. Off: nothing.
//!
//! Owns the words, from the documents as they stand. Does not own which
//! plan is current or whether a turn may run at all (the plan and
//! [`super::signals`] do; the driver dispatches nothing without an active
//! direction in enforce mode).

use super::contract::GoalContract;
use super::plan::{CurrentPlan, PlanState};
use super::registry::ApproachRegistry;
use crate::goal::task_body::clip;
use crate::ledger::vocabulary::GoalFocusMode;
use std::fmt::Write as _;

/// The open obligations the section lists; the rest are counted.
const MAX_OBLIGATIONS: usize = 8;

/// The section's text for a loop in `mode` (empty when off).
pub fn section(
    mode: GoalFocusMode,
    contract: &GoalContract,
    registry: &ApproachRegistry,
    plan: Option<&CurrentPlan>,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    match mode {
        GoalFocusMode::Off => return out,
        GoalFocusMode::Monitor => {
            let _ = writeln!(
                w,
                "- Goal Focus only observes this loop: the plan below is not dispatch authority, nothing is staged, and banking is unchanged. Follow the recorded next action above."
            );
            let _ = writeln!(w, "- Recorded goal: {}", clip(&contract.goal, 600));
            let _ = writeln!(w, "- Observed plan: {}", path(plan, registry));
            return out;
        }
        GoalFocusMode::Enforce => {}
    }
    let _ = writeln!(
        w,
        "- Goal Focus enforces this loop: the plan below is the turn's only dispatch authority."
    );
    let _ = writeln!(w, "- Goal: {}", clip(&contract.goal, 600));
    let _ = writeln!(w, "- Plan: {}", path(plan, registry));
    let open: Vec<_> = (contract.obligations.iter())
        .filter(|o| !o.status.is_discharged())
        .collect();
    for o in open.iter().take(MAX_OBLIGATIONS) {
        let _ = writeln!(
            w,
            "- Open obligation {} ({}, {}): {}",
            o.obligation_id,
            o.kind,
            o.status,
            clip(&o.description, 200)
        );
    }
    if open.len() > MAX_OBLIGATIONS {
        let _ = writeln!(
            w,
            "- (+{} more open obligations: `loopx goal-focus status`)",
            open.len() - MAX_OBLIGATIONS
        );
    }
    let _ = write!(
        w,
        "- Execute only the bounded next action within the selected approach. Progress toward the goal itself needs evidence that discharges a named obligation; report progress within the approach apart from it.\n\
         - `append-iteration` stages your result for an independent review by another model family: it is not banked until the host finalizes it. Name every result with `--claim-id` and its evidence (`--claim-evidence ID=PATH`), and list every obligation you moved (`--obligation-id`)."
    );
    out
}

/// The plan in one line: its revision, state and selection.
fn path(plan: Option<&CurrentPlan>, registry: &ApproachRegistry) -> String {
    let Some(plan) = plan else {
        return "none committed yet".to_owned();
    };
    let mut line = format!(
        "revision {}, {} ({})",
        plan.plan_revision, plan.state, plan.review
    );
    match (&plan.selection, plan.state) {
        (Some(selection), PlanState::Active) => {
            let approaches: Vec<String> = (selection.approach_ids.iter())
                .map(|id| match registry.approach(id) {
                    Some(found) if !found.approach.summary.trim().is_empty() => format!(
                        "{id} in {} ({})",
                        found.campaign_id,
                        clip(&found.approach.summary, 160)
                    ),
                    Some(found) => format!("{id} in {}", found.campaign_id),
                    None => id.clone(),
                })
                .collect();
            let _ = write!(line, ": {} {}", selection.kind, approaches.join("; "));
            if let Some(through) = plan.valid_through_iteration {
                let _ = write!(line, "; valid through iteration {through}");
            }
        }
        _ => line.push_str(": no direction selected; the host replans before the next dispatch"),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> GoalContract {
        serde_json::from_value(serde_json::json!({
            "goal": "prove lemma B",
            "obligations": [
                {"obligation_id": "o1", "description": "bound n", "kind": "bridge", "status": "open"},
                {"obligation_id": "o2", "description": "done already", "status": "satisfied"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn off_says_nothing_and_monitor_only_observes() {
        let registry = ApproachRegistry::default();
        assert_eq!(
            section(GoalFocusMode::Off, &contract(), &registry, None),
            ""
        );
        let monitor = section(GoalFocusMode::Monitor, &contract(), &registry, None);
        assert!(monitor.contains("only observes"), "{monitor}");
        assert!(monitor.contains("Recorded goal: prove lemma B"));
        assert!(monitor.contains("Observed plan: none committed yet"));
        assert!(!monitor.contains("stages your result"), "{monitor}");
    }

    #[test]
    fn enforce_lists_open_obligations_and_the_staging_rules() {
        let registry = ApproachRegistry::default();
        let text = section(GoalFocusMode::Enforce, &contract(), &registry, None);
        assert!(text.contains("only dispatch authority"), "{text}");
        assert!(
            text.contains("- Open obligation o1 (bridge, open): bound n"),
            "{text}"
        );
        assert!(
            !text.contains("o2"),
            "a discharged obligation is not work: {text}"
        );
        assert!(text.contains("--claim-id"), "{text}");
    }
}
