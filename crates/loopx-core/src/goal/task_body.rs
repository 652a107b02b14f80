//! The next turn's prompt, rendered from state alone.
//!
//! No clock, no host memory: the same frontier gives the same bytes, so a
//! host can tell "nothing changed" from the prompt itself. Long lists are
//! cut with a pointer to the full read, keeping the default body small.

use super::continuation::ShouldRun;
use super::gap::requirement_states;
use super::{objective, Goal};
use crate::ledger::budget::Exhausted;
use crate::ledger::{final_decisions, next_is_final, view, Ledger};
use std::fmt::Write as _;

/// The default body stays under this many bytes.
pub const TARGET_BYTES: usize = 8 * 1024;
const MAX_OUTCOMES: usize = 6;
const MAX_REQUIREMENTS: usize = 8;
const MAX_NOTES: usize = 3;
/// The outcomes section stops adding lines past this many bytes.
const OUTCOME_BYTES: usize = 3 * 1024;

/// `text` on one line, cut to `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        line
    } else {
        format!("{}…", line.chars().take(max).collect::<String>())
    }
}

fn decision_choices() -> String {
    final_decisions()
        .map(|d| d.as_str())
        .collect::<Vec<_>>()
        .join("|")
}

/// What the final allowed iteration must record, so that an agent following
/// the contract is not refused (the rule is the ledger guard's).
fn final_turn(w: &mut String, ledger: &Ledger) {
    let accepted: Vec<&str> = final_decisions().map(|d| d.as_str()).collect();
    let _ = writeln!(
        w,
        "- Final turn: this is the last iteration the cap allows, so `append-iteration` accepts only decision {}; a continuing decision is refused. Record this turn with:",
        accepted.join(" or ")
    );
    let _ = writeln!(
        w,
        "  `loopx append-iteration --mode {} --objective \"<what this turn did>\" --decision stop --stop-reason {} [--next-action \"<what is left>\"]`",
        ledger.config.default_mode,
        Exhausted::Iterations.reason_code()
    );
    let _ = writeln!(
        w,
        "  or, when only a person can unblock the goal, the same with `--decision blocked --stop-reason \"<what blocks it>\"`."
    );
}

/// `goal_priority` is the legacy goal-priority section, already rendered
/// (`crate::ledger::goal_priority::section`; empty when it is off).
pub fn render(
    dir: &str,
    ledger: &Ledger,
    goal: &Goal,
    decision: &ShouldRun,
    goal_priority: &str,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# loopx: one bounded turn toward the goal\n");
    let _ = writeln!(
        w,
        "Loop directory: {dir} (loopx commands read it from LOOPX_DIR or --dir)\n"
    );
    let _ = writeln!(w, "## Goal\n");
    let _ = writeln!(
        w,
        "- Original objective: {}",
        clip(&goal.original_objective, 600)
    );
    let revision = goal.objective.current_revision();
    if revision > 0 {
        let _ = writeln!(
            w,
            "- Current operating objective (revision {revision}): {}",
            clip(objective::current_text(goal), 600)
        );
    }
    let _ = writeln!(
        w,
        "- Success criteria: {}",
        clip(&ledger.config.success_criteria, 400)
    );
    for (label, items) in [
        ("Acceptance", &goal.commitments.acceptance_criteria),
        ("Non-goal", &goal.commitments.non_goals),
        ("Permission", &goal.commitments.permissions),
    ] {
        for item in items.iter().take(5) {
            let _ = writeln!(w, "- {label}: {}", clip(item, 200));
        }
    }
    let budget = &ledger.config.budget;
    let _ = writeln!(
        w,
        "- Budget: iteration {} of {}; tokens {}{}; usd {:.2}{}",
        ledger.spent.iterations + 1,
        budget.max_iterations,
        ledger.spent.tokens,
        budget
            .token_limit()
            .map(|max| format!(" of {max}"))
            .unwrap_or_default(),
        ledger.spent.usd,
        budget
            .usd_limit()
            .map(|max| format!(" of {max:.2}"))
            .unwrap_or_default(),
    );

    let _ = writeln!(w, "\n## This turn\n");
    let hint = &decision.scheduler_hint;
    let _ = writeln!(
        w,
        "- Decision: {} ({}): {}",
        hint.action.as_str(),
        hint.reason_code,
        clip(&hint.reason, 300)
    );
    match &decision.selected_todo {
        Some(todo) => {
            let _ = writeln!(w, "- Selected todo: {} {}", todo.id, clip(&todo.title, 300));
            let _ = writeln!(
                w,
                "- Claim it first: `loopx todo claim {} --ttl 3600`",
                todo.id
            );
        }
        None => {
            let _ = writeln!(w, "- Next action: {}", clip(&decision.next_action, 300));
        }
    }
    let last_turn = next_is_final(ledger);
    if last_turn {
        final_turn(w, ledger);
    }
    if let Some(last) = ledger.last_record() {
        let _ = writeln!(w, "- Last iteration: {}", clip(&view::one_line(last), 300));
        if !last.proposed_next_action.trim().is_empty() {
            let _ = writeln!(
                w,
                "- It proposed: {}",
                clip(&last.proposed_next_action, 300)
            );
        }
    }

    if !goal.outcomes.is_empty() {
        let _ = writeln!(
            w,
            "\n## Outcomes (cumulative requirements; keep every one)\n"
        );
        // The outcomes the selected work serves come first; the section has
        // a byte budget, and what does not fit is counted, never dropped
        // silently.
        let selected = decision.selected_todo.as_ref().map(|t| t.id.as_str());
        let mut ordered: Vec<_> = goal.outcomes.iter().collect();
        ordered.sort_by_key(|o| !selected.is_some_and(|id| o.linked_todos.iter().any(|l| l == id)));
        let start = w.len();
        let (mut omitted_requirements, mut omitted_outcomes) = (0usize, 0usize);
        for (shown, outcome) in ordered.into_iter().enumerate() {
            if shown >= MAX_OUTCOMES || w.len() - start > OUTCOME_BYTES {
                omitted_outcomes += 1;
                omitted_requirements += outcome.requirements.len();
                continue;
            }
            let _ = writeln!(
                w,
                "- {} ({}): {}",
                outcome.id,
                outcome.responsible_agent,
                clip(&outcome.original_objective, 200)
            );
            let states = requirement_states(outcome);
            for (index, (requirement, (_, state))) in
                outcome.requirements.iter().zip(&states).enumerate()
            {
                if index >= MAX_REQUIREMENTS || w.len() - start > OUTCOME_BYTES {
                    omitted_requirements += outcome.requirements.len() - index;
                    break;
                }
                let _ = writeln!(
                    w,
                    "  - {} [{}] {}",
                    requirement.id,
                    state.as_str(),
                    clip(&requirement.description, 160)
                );
            }
        }
        if omitted_outcomes + omitted_requirements > 0 {
            let _ = writeln!(w, "- (+{omitted_requirements} more requirements and {omitted_outcomes} more outcomes not shown here)");
        }
        let _ = writeln!(w, "- Full read: `loopx goal-acceptance inspect`");
    }
    if !decision.open_gaps.is_empty() {
        let _ = writeln!(w, "\n## Gaps to plan for\n");
        for gap in decision.open_gaps.iter().take(MAX_OUTCOMES) {
            let ids: Vec<&str> = gap.unresolved.iter().map(|r| r.id.as_str()).collect();
            let _ = writeln!(
                w,
                "- {}: unresolved {} (checkpoint {})",
                gap.outcome_id,
                clip(&ids.join(", "), 200),
                gap.checkpoint
            );
        }
    }
    let notes: Vec<_> = goal.notes.iter().rev().take(MAX_NOTES).collect();
    if !notes.is_empty() {
        let _ = writeln!(w, "\n## Recent evidence\n");
        for note in notes {
            let _ = writeln!(w, "- {} ({}): {}", note.at, note.by, clip(&note.note, 300));
        }
    }
    // Goal priority (legacy v1), when on: Goal Focus speaks instead when it enforces.
    w.push_str(goal_priority);
    let _ = writeln!(w, "\n## The one-iteration contract\n");
    let _ = writeln!(
        w,
        "1. Read {dir}/recovery.md and `loopx status`; do not rely on memory of earlier turns."
    );
    let _ = writeln!(w, "2. Do the one action above, within the goal's non-goals and permissions; verify it independently.");
    let _ = writeln!(w, "3. Write back: `loopx refresh-state --note ... [--complete TODO] [--goal-outcome-update-json FILE]`.");
    if last_turn {
        let _ = writeln!(w, "4. Record exactly one iteration, ending the loop: `loopx append-iteration --mode ... --objective ... --decision {}` (see Final turn above).", decision_choices());
    } else {
        let _ = writeln!(w, "4. Record exactly one iteration: `loopx append-iteration --mode ... --objective ... --decision ...`.");
    }
    let _ = writeln!(w, "5. Stop. The next turn is a fresh session.");
    out
}
