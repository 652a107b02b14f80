//! The formal policy's durable state, one stream per loop: the standing
//! orders (the settings `init` was given, or a drive resolved at its
//! start) and the force tick's spent credits.
//!
//! The standing orders are the host's record of what the operator asked
//! for, kept in the store rather than in `formal/formal_policy.json`, which
//! an agent's turn can rewrite. The credits are kept here for the same
//! reason and so that a restarted driver does not refill them: a tick is
//! counted before it runs (like a panel attempt), so a host killed during
//! a typecheck has still spent it. The budget is the settings' (a later
//! drive may raise it); what has been spent only grows.
//!
//! Also kept here: the host's last re-check of each Lean proof artifact
//! ([`Recheck`]), so "checked proof" can be what the host saw rather than
//! what the artifact says of itself.
//!
//! Not here: the tick and the re-check themselves (`loopx_app::formal`),
//! the settings' rules (the parent module).

use super::Settings;
use crate::operation::{Clock, Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const STREAM: &str = "formal";

/// Who set the standing orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrdersSource {
    /// `loopx init --formal-policy ...`.
    Init,
    /// A drive's resolution at its start.
    DriveStart,
    /// `loopx bootstrap` / `apply-defaults`: a force-loop profile's pins.
    Profile,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Standing {
    /// The settings last set; `None` before any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders: Option<Settings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_by: Option<OrdersSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_at: Option<Timestamp>,
    /// Force ticks started, in every drive of the loop.
    #[serde(default)]
    pub credits_spent: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tick_at: Option<Timestamp>,
    /// The host's latest re-check of each Lean proof artifact, by evidence
    /// id. Absent when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rechecks: BTreeMap<String, Recheck>,
}

/// One host re-check of a Lean proof artifact: what was checked (the
/// artifact's and the proof file's digests), how, and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recheck {
    pub status: super::tick::TypecheckStatus,
    /// The proof file still says `sorry` (then the re-check is not passed,
    /// whatever Lean's exit).
    pub sorry_count: usize,
    pub artifact_digest: crate::digest::Digest,
    pub proof_digest: crate::digest::Digest,
    pub proof_path: String,
    /// The Lake project it ran in, relative to the loop directory.
    pub project: String,
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    pub at: Timestamp,
}

impl Recheck {
    /// Whether the host saw the proof check: Lean passed and no `sorry`.
    pub fn passed(&self) -> bool {
        self.status == super::tick::TypecheckStatus::Passed && self.sorry_count == 0
    }
}

impl Standing {
    /// The credits left under `budget`.
    pub fn credits_left(&self, budget: u32) -> u32 {
        budget.saturating_sub(self.credits_spent)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FormalRequest {
    /// Record `settings` as the standing orders (nothing is written when
    /// they already are).
    SetOrders {
        settings: Settings,
        source: OrdersSource,
    },
    /// Spend credit number `tick` (the next one) of `budget` on a force tick.
    SpendCredit { tick: u32, budget: u32 },
    /// Record the host's re-check of the proof artifact `evidence_id`.
    RecordRecheck {
        evidence_id: String,
        recheck: Recheck,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FormalEvent {
    OrdersSet {
        settings: Settings,
        source: OrdersSource,
        at: Timestamp,
    },
    CreditSpent {
        tick: u32,
        at: Timestamp,
    },
    Rechecked {
        evidence_id: String,
        recheck: Recheck,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormalReceipt {
    pub credits_spent: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders: Option<Settings>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormalProblem {
    #[error("the formal force tick has spent its {budget} credits; raise --formal-force-credits to allow more ticks")]
    Exhausted { budget: u32 },
    #[error("formal force tick {given} is out of turn: the next is {next}")]
    OutOfTurn { given: u32, next: u32 },
    #[error("{0:?} is not an evidence id: use 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit")]
    BadEvidenceId(String),
}

pub struct FormalOwner;

impl Owner for FormalOwner {
    type State = Standing;
    type Request = FormalRequest;
    type Event = FormalEvent;
    type Receipt = FormalReceipt;
    type Error = FormalProblem;
    type Context<'a> = Clock;

    fn decide(
        state: Option<&Standing>,
        request: &FormalRequest,
        clock: &Clock,
    ) -> Result<Decided<FormalEvent, FormalReceipt>, FormalProblem> {
        let empty = Standing::default();
        let state = state.unwrap_or(&empty);
        match request {
            FormalRequest::SetOrders { settings, source } => {
                let receipt = FormalReceipt {
                    credits_spent: state.credits_spent,
                    orders: Some(settings.clone()),
                };
                if state.orders.as_ref() == Some(settings) {
                    return Ok(Decided::unchanged(receipt));
                }
                Ok(Decided::write(
                    FormalEvent::OrdersSet {
                        settings: settings.clone(),
                        source: *source,
                        at: clock.now,
                    },
                    receipt,
                ))
            }
            FormalRequest::SpendCredit { tick, budget } => {
                if state.credits_spent >= *budget {
                    return Err(FormalProblem::Exhausted { budget: *budget });
                }
                let next = state.credits_spent + 1;
                if *tick != next {
                    return Err(FormalProblem::OutOfTurn { given: *tick, next });
                }
                Ok(Decided::write(
                    FormalEvent::CreditSpent {
                        tick: *tick,
                        at: clock.now,
                    },
                    FormalReceipt {
                        credits_spent: next,
                        orders: state.orders.clone(),
                    },
                ))
            }
            FormalRequest::RecordRecheck {
                evidence_id,
                recheck,
            } => {
                if !crate::ledger::proof::is_valid_evidence_id(evidence_id) {
                    return Err(FormalProblem::BadEvidenceId(evidence_id.clone()));
                }
                Ok(Decided::write(
                    FormalEvent::Rechecked {
                        evidence_id: evidence_id.clone(),
                        recheck: recheck.clone(),
                    },
                    FormalReceipt {
                        credits_spent: state.credits_spent,
                        orders: state.orders.clone(),
                    },
                ))
            }
        }
    }

    fn evolve(state: Option<Standing>, event: &FormalEvent) -> Standing {
        let mut state = state.unwrap_or_default();
        match event {
            FormalEvent::OrdersSet {
                settings,
                source,
                at,
            } => {
                state.orders = Some(settings.clone());
                state.set_by = Some(*source);
                state.set_at = Some(*at);
            }
            FormalEvent::CreditSpent { tick, at } => {
                state.credits_spent = state.credits_spent.max(*tick);
                state.last_tick_at = Some(*at);
            }
            FormalEvent::Rechecked {
                evidence_id,
                recheck,
            } => {
                state.rechecks.insert(evidence_id.clone(), recheck.clone());
            }
        }
        state
    }

    fn event_kind(event: &FormalEvent) -> &'static str {
        match event {
            FormalEvent::OrdersSet { .. } => "formal.orders_set",
            FormalEvent::CreditSpent { .. } => "formal.credit_spent",
            FormalEvent::Rechecked { .. } => "formal.rechecked",
        }
    }
}
