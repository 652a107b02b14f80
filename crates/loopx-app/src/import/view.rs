//! What `loopx import` did, or on a dry run would do ([`ImportView`]),
//! with its parts and its text rendering. Not here: how any of it is
//! found (`source.rs`, `map.rs`) or written (`apply.rs`).

use jiff::Timestamp;
use loopx_core::digest::Digest;
use loopx_core::focus::direction::Selection;
use loopx_core::ledger::vocabulary::{GoalFocusMode, LoopStatus};
use serde::Serialize;
use std::fmt::Write as _;

/// One file of the source as read: its name, size and digest.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    pub file: &'static str,
    pub bytes: u64,
    pub digest: Digest,
}

/// One direction signal the source holds, as found.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionSignal {
    pub file: &'static str,
    pub signal: &'static str,
    pub value: String,
}

/// A document's revision in the source and in the new loop.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionMap {
    /// What the source's file says (`None`: it gives no revision).
    pub source_revision: Option<u64>,
    /// The loopx stream's revision after the import.
    pub revision: u64,
    pub fingerprint: Digest,
}

/// What becomes of the source's plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanImport {
    pub source_revision: Option<u64>,
    pub source_state: String,
    /// `active` with the source's selection, or `needs_replan` without one.
    pub state: String,
    pub selection: Option<Selection>,
    /// Why the plan was kept without a selection, if it was.
    pub reason: Option<String>,
}

/// What `loopx import` did, or with no `--apply` would do.
#[derive(Debug, Clone, Serialize)]
pub struct ImportView {
    pub status: &'static str,
    pub action: &'static str,
    pub dry_run: bool,
    pub from: String,
    pub dir: String,
    pub sources: Vec<SourceFile>,
    /// The new loop's run id (`None` on a dry run): its own, never the
    /// source's, so that two imports of one source are two loops.
    pub run_id: Option<String>,
    /// The run id `loop_state.json` gives, kept as where the loop came from.
    pub source_run_id: Option<String>,
    pub enforcement_mode: GoalFocusMode,
    pub iterations: u64,
    pub tokens: u64,
    pub usd: f64,
    pub state_status: LoopStatus,
    pub created_at: Timestamp,
    pub goal_contract: Option<RevisionMap>,
    pub approach_registry: Option<RevisionMap>,
    pub plan: Option<PlanImport>,
    /// Decisions in `direction_decisions.jsonl`, and how many are pending.
    pub source_decisions: u64,
    pub pending_decisions: u64,
    /// Every direction signal found, whether or not it is followed.
    pub signals: Vec<DirectionSignal>,
    /// Signals that disagree: with any, no direction is selected.
    pub ambiguities: Vec<String>,
    pub warnings: Vec<String>,
}

impl ImportView {
    pub fn text(&self) -> String {
        let mut out = String::new();
        let verb = if self.dry_run {
            "would import"
        } else {
            "imported"
        };
        let _ = writeln!(
            out,
            "{verb} {} into {}: {} ({} tokens, ${:.2}), status {}",
            self.from,
            self.dir,
            loopx_core::words::count(self.iterations, "iteration"),
            self.tokens,
            self.usd,
            self.state_status
        );
        if let Some(run_id) = &self.run_id {
            let _ = writeln!(out, "  run         {run_id}");
        }
        if let Some(source_run_id) = &self.source_run_id {
            let _ = writeln!(out, "  source run  {source_run_id}");
        }
        let _ = writeln!(out, "  goal focus  {}", self.enforcement_mode);
        for (what, map) in [
            ("contract", &self.goal_contract),
            ("registry", &self.approach_registry),
        ] {
            if let Some(map) = map {
                let source = map
                    .source_revision
                    .map_or("unnumbered".to_owned(), |r| format!("revision {r}"));
                let _ = writeln!(
                    out,
                    "  {what:<11} source {source} -> revision {} ({})",
                    map.revision, map.fingerprint
                );
            }
        }
        if let Some(plan) = &self.plan {
            let direction = plan
                .selection
                .as_ref()
                .map_or("no direction selected".to_owned(), |s| {
                    s.approach_ids.join(", ")
                });
            let _ = writeln!(
                out,
                "  plan        source {} -> {}: {direction}",
                plan.source_state, plan.state
            );
            if let Some(reason) = &plan.reason {
                let _ = writeln!(out, "              {reason}");
            }
        }
        let _ = writeln!(
            out,
            "  decisions   {} in the source, {} pending",
            self.source_decisions, self.pending_decisions
        );
        for signal in &self.signals {
            let _ = writeln!(
                out,
                "  signal      {} {}: {}",
                signal.file, signal.signal, signal.value
            );
        }
        for ambiguity in &self.ambiguities {
            let _ = writeln!(out, "  ambiguous   {ambiguity}");
        }
        if self.dry_run {
            let _ = writeln!(out, "nothing was written: pass --apply to create the loop");
        }
        out
    }
}
