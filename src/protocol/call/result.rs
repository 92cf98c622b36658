//! An operation's result as the caller gets it: as the server wrote it when it came
//! verbatim, else rmcp's typed result written out, checked only for what the host reads.

use rmcp::model::{CustomResult, ServerResult};
use serde_json::Value;

use super::CallPeer;
use crate::model::{CallError, Operation, ToolResult};

// === impl CallPeer ===

impl CallPeer {
    /// The operation's result: as the server wrote it when it came verbatim (or rmcp could
    /// not type it), else rmcp's typed result written out; checked only for what the host
    /// itself reads of it and what the specification forbids, never rebuilt.
    pub(super) fn complete(
        &self,
        operation: &Operation,
        result: ServerResult,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let value = match (operation, result) {
            (_, ServerResult::CustomResult(CustomResult(raw))) => Ok(raw),
            (Operation::CallTool { .. }, ServerResult::CallToolResult(result)) => {
                serde_json::to_value(&result)
            }
            (Operation::ReadResource { .. }, ServerResult::ReadResourceResult(result)) => {
                serde_json::to_value(&result)
            }
            (Operation::GetPrompt { .. }, ServerResult::GetPromptResult(result)) => {
                serde_json::to_value(&result)
            }
            (Operation::Complete { .. }, ServerResult::CompleteResult(result)) => {
                serde_json::to_value(&result)
            }
            _ => {
                return Err(self.protocol(label, "the answer does not fit the request"));
            }
        };
        let result = value.map_err(|error| {
            self.protocol(
                label,
                &format!("the result could not be represented as JSON: {error}"),
            )
        })?;
        let is_error =
            check_result(operation, &result).map_err(|bad| self.protocol(label, &bad))?;
        Ok(ToolResult { is_error, result })
    }
}

/// Whether `result` can be handed on as `operation`'s result, and for a tool result its
/// `isError`. Only what the host reads and what the specification forbids is checked: the
/// result is a JSON object of a completed request, its members the host reads have their
/// types, and a tool result holds no standalone `blob` content block (§mcp-result-content:
/// blobs ride inside embedded resources). Everything else — fields and content block types
/// this host does not know — passes untouched.
pub(super) fn check_result(operation: &Operation, result: &Value) -> Result<bool, String> {
    let Some(object) = result.as_object() else {
        return Err(format!(
            "the result is {}, not a JSON object",
            crate::config::json_kind(result)
        ));
    };
    match object.get("resultType") {
        None => {}
        Some(Value::String(kind)) if kind == "complete" => {}
        Some(other) => {
            return Err(format!(
                "the result's resultType {} is not \"complete\", \"input_required\" or \"task\"",
                crate::redact::scrub_capped(&other.to_string(), 64)
            ));
        }
    }
    let array = |name: &str, required: bool| match object.get(name) {
        Some(Value::Array(_)) => Ok(()),
        None if !required => Ok(()),
        None => Err(format!("the result has no \"{name}\" array")),
        Some(other) => Err(format!(
            "the result's \"{name}\" is {}, not an array",
            crate::config::json_kind(other)
        )),
    };
    match operation {
        Operation::CallTool { .. } => {
            // A result without content is taken as empty content, as rmcp takes it.
            array("content", false)?;
            if let Some(bad) = object
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .find_map(|(index, block)| invalid_content(index, block))
            {
                return Err(bad);
            }
            match object.get("isError") {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(is_error)) => Ok(*is_error),
                Some(other) => Err(format!(
                    "the result's \"isError\" is {}, not a boolean",
                    crate::config::json_kind(other)
                )),
            }
        }
        Operation::ReadResource { .. } => array("contents", true).map(|()| false),
        Operation::GetPrompt { .. } => array("messages", true).map(|()| false),
        Operation::Complete { .. } => match object.get("completion") {
            Some(Value::Object(_)) => Ok(false),
            _ => Err("the result has no \"completion\" object".into()),
        },
    }
}

/// A `tools/call` content block the host cannot hand on, described: one without a type, or
/// a standalone `blob` block. A block of a type this host does not know is handed on.
pub(super) fn invalid_content(index: usize, block: &Value) -> Option<String> {
    match block.get("type").and_then(Value::as_str) {
        None => Some(format!("content block {index} has no \"type\" string")),
        Some("blob") => Some(
            "the result holds a standalone blob content block, which is not valid tools/call content (blobs ride inside embedded resources)".into(),
        ),
        Some(_) => None,
    }
}
