//! Why a loop ended, or why nothing drives it any more, in the words a
//! person uses and with the tone a view colours it by.
//!
//! `status`, `done`, the dashboard's health line, the all-loops page and
//! notifications all ask [`ending`], so no two of them can disagree on
//! whether a loop succeeded. The arbiter decides *that* a loop is done
//! (`ledger::arbiter`); this module only reads its deciding condition
//! against the last record and the driver's last run to say *how*.

use crate::driver::{DriverSummary, RunEnded, Settlement};
use crate::ledger::arbiter::{StopCondition, Verdict};
use crate::ledger::budget::Exhausted;
use crate::ledger::vocabulary::{is_success_stop_reason, Decision, LoopStatus};
use crate::ledger::ClaimState;
use crate::ledger::Ledger;
use crate::words;
use serde::Serialize;

/// How a view colours a state: the one mapping from meaning to colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    /// It worked, or it is working (green).
    Good,
    /// Over, or held, for a reason worth a look (amber).
    Attention,
    /// Something went wrong or a person must act (red).
    Bad,
    /// Nothing to judge: stopped on purpose, paused, idle (grey).
    Neutral,
}

/// How a loop ended, or how the run that drove it gave up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ending {
    /// The agent's success stop, proven: its success check passed on this
    /// host (`checked`), or it cited a valid proof artifact before the cap.
    Succeeded { iteration: u64, checked: bool },
    /// A sentinel file a person wrote: `STOP_REQUESTED` or `BLOCKED`.
    StoppedByUser { sentinel: &'static str },
    /// A token, USD or wall-time budget is used up.
    BudgetExhausted { budget: Exhausted },
    /// Every allowed iteration is recorded.
    IterationCap { iterations: u64 },
    /// The loop cannot go on without a person: the agent declared itself
    /// blocked, or the success check refused its last claim.
    NeedsPerson { iteration: u64, why: String },
    /// The agent stopped in a way none of the above explains (an imported
    /// stop, for one).
    StoppedByAgent { iteration: u64, reason: String },
    /// The loop did not end, but the driver gave up on it.
    Failed {
        run: RunEnded,
        /// The last turn that failed, if the run settled one.
        turn: Option<Settlement>,
    },
}

/// Why the loop ended (`verdict.done`), else why its last driver run gave
/// up while no driver runs; `None` for a loop that goes on.
pub fn ending(ledger: &Ledger, verdict: &Verdict, driver: &DriverSummary) -> Option<Ending> {
    if verdict.done {
        return verdict
            .deciding
            .map(|deciding| loop_ending(ledger, verdict, deciding));
    }
    let run = driver
        .last_run
        .as_ref()
        .filter(|run| !driver.running && run.gave_up())?;
    Some(Ending::Failed {
        run: run.clone(),
        turn: driver.last.clone().filter(|turn| !turn.outcome.advanced()),
    })
}

fn loop_ending(ledger: &Ledger, verdict: &Verdict, deciding: StopCondition) -> Ending {
    match deciding {
        StopCondition::UserStopRequested => {
            return Ending::StoppedByUser {
                sentinel: "STOP_REQUESTED",
            }
        }
        StopCondition::OperatorBlocked => {
            return Ending::StoppedByUser {
                sentinel: "BLOCKED",
            }
        }
        _ => {}
    }
    let last = ledger.last_record();
    // A success outranks the budget it happened to spend the last of: a
    // verified claim is verified whatever it cost.
    if let Some(record) = last.filter(|r| r.claim == Some(ClaimState::Verified)) {
        return Ending::Succeeded {
            iteration: record.iteration,
            checked: true,
        };
    }
    // An early stop had to cite a passing proof artifact; one that spent a
    // budget's last did not, so it is the budget that ended the loop.
    let budget_spent = verdict.conditions.iter().any(|c| {
        Exhausted::ALL
            .iter()
            .any(|budget| budget.reason_code() == *c)
    });
    if let Some(record) = last.filter(|r| {
        r.decision == Decision::Stop
            && r.claim.is_none()
            && is_success_stop_reason(&r.stop_reason)
            && !budget_spent
    }) {
        return Ending::Succeeded {
            iteration: record.iteration,
            checked: false,
        };
    }
    let (iteration, record_reason) =
        last.map_or((0, ""), |r| (r.iteration, r.stop_reason.as_str()));
    // `blocked` is accepted only on the final allowed iteration, so it
    // always comes with the cap: the block is the news, not the cap.
    if ledger.status == LoopStatus::Blocked {
        let why = match last.and_then(|r| r.claim) {
            Some(ClaimState::Refused) => format!(
                "the success check refused iteration {iteration}'s claim and no iteration is left"
            ),
            _ => format!(
                "the agent reported itself blocked on iteration {iteration}{}",
                said(record_reason)
            ),
        };
        return Ending::NeedsPerson { iteration, why };
    }
    match deciding {
        StopCondition::Budget(Exhausted::Iterations) => Ending::IterationCap {
            iterations: ledger.spent.iterations,
        },
        StopCondition::Budget(budget) => Ending::BudgetExhausted { budget },
        _ => Ending::StoppedByAgent {
            iteration,
            reason: record_reason.to_owned(),
        },
    }
}

/// ` (why)`, or nothing when there is no why.
fn said(reason: &str) -> String {
    match reason.trim() {
        "" => String::new(),
        reason => format!(" ({reason})"),
    }
}

impl Ending {
    pub fn tone(&self) -> Tone {
        match self {
            Ending::Succeeded { .. } => Tone::Good,
            Ending::StoppedByUser { .. } | Ending::StoppedByAgent { .. } => Tone::Neutral,
            Ending::BudgetExhausted { .. } | Ending::IterationCap { .. } => Tone::Attention,
            Ending::NeedsPerson { .. } | Ending::Failed { .. } => Tone::Bad,
        }
    }

    /// One sentence a person reads at a glance.
    pub fn words(&self) -> String {
        match self {
            Ending::Succeeded {
                iteration,
                checked: true,
            } => format!("succeeded: iteration {iteration}'s success check passed"),
            Ending::Succeeded {
                iteration,
                checked: false,
            } => format!("succeeded: iteration {iteration} stopped with a valid proof artifact"),
            Ending::StoppedByUser {
                sentinel: "STOP_REQUESTED",
            } => "stopped by the user (STOP_REQUESTED)".to_owned(),
            Ending::StoppedByUser { sentinel } => format!("stopped by an operator ({sentinel})"),
            Ending::BudgetExhausted { budget } => {
                format!(
                    "budget exhausted: the {} budget is used up",
                    budget.describe()
                )
            }
            Ending::IterationCap { iterations } => format!(
                "finished at the iteration cap: {} recorded, no success claimed",
                words::count(*iterations, "iteration")
            ),
            Ending::NeedsPerson { why, .. } => format!("needs a person: {why}"),
            Ending::StoppedByAgent { iteration, reason } => {
                format!(
                    "stopped by the agent on iteration {iteration}{}",
                    said(reason)
                )
            }
            Ending::Failed { run, turn } => {
                let mut line = format!(
                    "failed: the driver gave up after {} (exit {}): {}",
                    words::count(run.turns, "turn"),
                    run.exit.code(),
                    run.reason
                );
                if let Some(turn) = turn {
                    line.push_str(&format!(
                        " (last failed turn: iteration {} on {}, {})",
                        turn.iteration,
                        turn.provider,
                        turn.outcome.label()
                    ));
                }
                line
            }
        }
    }
}

/// An ending as `--json` and the HTTP API show it: its kind and facts,
/// with the words and tone every view shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndingView {
    #[serde(flatten)]
    pub ending: Ending,
    pub words: String,
    pub tone: Tone,
}

impl From<Ending> for EndingView {
    fn from(ending: Ending) -> Self {
        EndingView {
            words: ending.words(),
            tone: ending.tone(),
            ending,
        }
    }
}

#[cfg(test)]
mod tests;
