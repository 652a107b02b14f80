//! The MCP rendering of a tool's outcome, mapped once: a view becomes a
//! result with structured content; an [`AppError`] becomes a tool error
//! (`isError: true`) whose text starts with its class (`[refused] ...`)
//! and whose structured content is the same failure body the CLI's
//! `--json` prints (`status`, `class`, `error`, details, `hint`).
//!
//! Does not own: classifying errors (`loopx_app::error`) or the views.

use loopx_app::{AppError, ErrorClass};
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::ErrorData;
use serde::Serialize;
use serde_json::{json, Value};

/// What a tool answers: its view, or its error as a tool error.
pub fn tool_result<T: Serialize>(
    result: anyhow::Result<T>,
) -> std::result::Result<CallToolResult, ErrorData> {
    match result {
        Ok(view) => {
            let value = serde_json::to_value(&view).map_err(|e| {
                ErrorData::internal_error(format!("view not serializable: {e}"), None)
            })?;
            Ok(CallToolResult::structured(value))
        }
        Err(error) => Ok(tool_error(AppError::from(error))),
    }
}

fn tool_error(error: AppError) -> CallToolResult {
    let mut body = json!({
        "status": "failed",
        "class": error.class,
        "error": error.message,
    });
    if let (Some(body), Some(Value::Object(details))) = (body.as_object_mut(), error.details) {
        body.extend(details);
    }
    let mut text = format!("[{}] {}", error.class.as_str(), error.message);
    if let Some(hint) = hint(error.class) {
        body["hint"] = hint.into();
        text = format!("{text}\nhint: {hint}");
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(body);
    result
}

/// What to do next, in this adapter's words (tool and input names).
fn hint(class: ErrorClass) -> Option<&'static str> {
    match class {
        ErrorClass::Conflict => Some("this operation_id was already used for a different request: choose a new one, or repeat the original call to see its receipt"),
        ErrorClass::Stale => Some("read the current state again (work_context or status), then retry"),
        ErrorClass::Unavailable => Some("the store is busy or unreachable: retry shortly with the same operation_id; nothing was written"),
        _ => None,
    }
}
