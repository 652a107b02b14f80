//! What a goal write answers: the receipt of what committed (or was
//! replayed), or the preview of what would commit. One shape for every
//! adapter; the CLI adds its `status`/`action` envelope and its text.
//!
//! This is the goal's own receipt view. The ledger's writes have theirs; a
//! single receipt view for every mutating use case is where both go next.

use loopx_core::goal::{GoalEvent, GoalReceipt};
use loopx_store::Receipt;
use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};

/// A committed (or replayed) goal write. Serializes flat: the receipt's
/// operation id, revision, `replayed`, `unchanged`, the goal and instance,
/// the effects, and the owner's named values (`todo_id`, ...) beside them.
#[derive(Debug, Clone)]
pub struct GoalReceiptView(pub Receipt<GoalReceipt>);

impl Serialize for GoalReceiptView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let receipt = &self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("operation_id", &receipt.operation_id)?;
        map.serialize_entry("revision", &receipt.revision)?;
        map.serialize_entry("replayed", &receipt.replayed)?;
        map.serialize_entry("unchanged", &receipt.unchanged)?;
        map.serialize_entry("goal_id", &receipt.body.goal_id)?;
        map.serialize_entry("instance_id", &receipt.body.instance_id)?;
        map.serialize_entry("effects", &receipt.body.effects)?;
        for (key, value) in &receipt.body.values {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl GoalReceiptView {
    /// One line for people: what happened, where, and under which
    /// operation (so a doubted reply can be confirmed by a replay).
    pub fn text(&self) -> String {
        let receipt = &self.0;
        let mut text = format!(
            "{} (goal {}, revision {})",
            receipt.body.effects.join(", "),
            receipt.body.instance_id,
            receipt.revision
        );
        if let Some(id) = receipt.body.values.get("todo_id").and_then(|v| v.as_str()) {
            text = format!("{id}: {text}");
        }
        if receipt.replayed {
            text.push_str(&format!(
                " [replay of operation {}: nothing written]",
                receipt.operation_id
            ));
        } else if !receipt.unchanged {
            text.push_str(&format!(" [operation {}]", receipt.operation_id));
        }
        text
    }
}

/// What a goal request would do now; nothing was written.
#[derive(Debug, Clone, Serialize)]
pub struct GoalPreviewView {
    pub would_write: bool,
    pub receipt: GoalReceipt,
    pub event: Option<GoalEvent>,
}

/// A write that may have been only a preview.
#[derive(Debug, Clone)]
pub enum GoalWrite {
    Committed(GoalReceiptView),
    Previewed(GoalPreviewView),
}
