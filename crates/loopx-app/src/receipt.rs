//! The one rendering of a committed operation's receipt, shared by every
//! use case that writes (ledger, goal, todo, driver) and every adapter that
//! shows one (CLI `--json`, HTTP, MCP).
//!
//! Owns: which receipt facts a caller sees (operation id, revision, commit
//! time, replayed/unchanged, post-commit warnings) and the short note that
//! names the operation so a doubted reply can be confirmed by a replay.
//! Does not own: the use-case body (`T`, flattened beside those facts) or
//! any adapter's text beyond that note.

use jiff::Timestamp;
use loopx_core::operation::OperationId;
use loopx_store::Receipt;
use serde::Serialize;

/// A committed (or replayed) operation as every adapter shows it: the
/// receipt facts, then the use case's own fields flattened beside them.
///
/// `T` must serialize as a map and must not repeat a receipt field name
/// (`action`, `operation_id`, ...): its fields sit beside them.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptView<T> {
    /// Always `"ok"`: failures are [`crate::AppError`]s, never receipts.
    pub status: &'static str,
    /// The use case that wrote (`init`, `append-iteration`, `todo-claim`).
    pub action: String,
    /// The loop directory, when the adapter names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    pub operation_id: OperationId,
    pub revision: u64,
    pub committed_at: Timestamp,
    /// Nothing was written: this is the receipt of an earlier identical
    /// request under the same operation id.
    pub replayed: bool,
    /// Nothing was written: the request was already satisfied.
    pub unchanged: bool,
    /// What went wrong after the commit (a view that could not be
    /// rewritten): the operation happened regardless.
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub body: T,
}

impl<T> ReceiptView<T> {
    /// The view of `receipt`, its body turned into `T` by `body`.
    pub fn new<R>(
        action: impl Into<String>,
        receipt: Receipt<R>,
        body: impl FnOnce(R) -> T,
    ) -> Self {
        ReceiptView {
            status: "ok",
            action: action.into(),
            dir: None,
            operation_id: receipt.operation_id,
            revision: receipt.revision,
            committed_at: receipt.committed_at,
            replayed: receipt.replayed,
            unchanged: receipt.unchanged,
            warnings: Vec::new(),
            body: body(receipt.body),
        }
    }

    pub fn in_dir(mut self, dir: impl Into<String>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// The suffix every receipt's text ends with: it names the operation,
    /// so that a reply lost or doubted can be confirmed by repeating the
    /// request with the same operation id. Empty when nothing was written
    /// and nothing was replayed (an already-satisfied request).
    pub fn note(&self) -> String {
        if self.replayed {
            format!(
                " [replay of operation {}: nothing written]",
                self.operation_id
            )
        } else if self.unchanged {
            String::new()
        } else {
            format!(
                " [operation {}, revision {}]",
                self.operation_id, self.revision
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        iteration: u64,
    }

    fn receipt(replayed: bool) -> Receipt<u64> {
        Receipt {
            operation_id: OperationId::parse("op-1").unwrap(),
            revision: 4,
            kind: "ledger.iteration_appended".into(),
            committed_at: Timestamp::UNIX_EPOCH,
            replayed,
            unchanged: false,
            body: 3,
        }
    }

    #[test]
    fn the_body_sits_beside_the_receipt_facts() {
        let view = ReceiptView::new("append-iteration", receipt(false), |n| Body {
            iteration: n,
        })
        .in_dir("/tmp/x");
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["action"], "append-iteration");
        assert_eq!(json["operation_id"], "op-1");
        assert_eq!(json["revision"], 4);
        assert_eq!(json["iteration"], 3);
        assert_eq!(json["dir"], "/tmp/x");
        assert_eq!(json["warnings"], serde_json::json!([]));
    }

    #[test]
    fn a_replay_says_nothing_was_written() {
        let view = ReceiptView::new("x", receipt(true), |n| Body { iteration: n });
        assert_eq!(view.note(), " [replay of operation op-1: nothing written]");
        let view = ReceiptView::new("x", receipt(false), |n| Body { iteration: n });
        assert_eq!(view.note(), " [operation op-1, revision 4]");
    }
}
