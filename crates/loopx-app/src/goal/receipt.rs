//! What a goal write answers: the one receipt view every mutating use
//! case returns ([`ReceiptView`]), with the goal's body, or the preview of
//! what would commit. One shape for every adapter.

use crate::receipt::ReceiptView;
use loopx_core::goal::{GoalEvent, GoalReceipt};
use loopx_store::Receipt;
use serde::Serialize;
use std::collections::BTreeMap;

/// The body of a goal write's receipt: the goal and instance, the effects,
/// and the owner's named values (`todo_id`, ...) flat beside them.
#[derive(Debug, Clone, Serialize)]
pub struct GoalReceiptBody {
    pub goal_id: String,
    pub instance_id: String,
    pub effects: Vec<String>,
    #[serde(flatten)]
    pub values: BTreeMap<String, serde_json::Value>,
}

/// A committed (or replayed) goal write.
pub type GoalReceiptView = ReceiptView<GoalReceiptBody>;

/// The receipt view of a committed goal write; its action is the journal
/// kind of what committed (adapters may name it their own way).
pub fn goal_receipt(receipt: Receipt<GoalReceipt>) -> GoalReceiptView {
    let action = receipt.kind.clone();
    ReceiptView::new(action, receipt, |body| GoalReceiptBody {
        goal_id: body.goal_id,
        instance_id: body.instance_id,
        effects: body.effects,
        values: body.values,
    })
}

impl ReceiptView<GoalReceiptBody> {
    /// One line for people: what happened, where, and under which
    /// operation (so a doubted reply can be confirmed by a replay).
    pub fn text(&self) -> String {
        let mut text = format!(
            "{} (goal {}){}",
            self.body.effects.join(", "),
            self.body.instance_id,
            self.note()
        );
        let value = |key: &str| self.body.values.get(key);
        if let Some(id) = value("todo_id").and_then(|v| v.as_str()) {
            text = format!("{id}: {text}");
        }
        if let (Some(added), Some(first), Some(last)) = (
            value("added"),
            value("first_todo_id"),
            value("last_todo_id"),
        ) {
            text = format!(
                "{added} todos ({} .. {}): {text}",
                first.as_str().unwrap_or("?"),
                last.as_str().unwrap_or("?")
            );
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
