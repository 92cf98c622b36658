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
        let is_error = check_result(operation, &result)
            .map_err(|bad| self.protocol(label, &bad.to_string()))?;
        if let Operation::ReadResource { uri } = operation {
            self.reads.keep(uri, &result, std::time::Instant::now());
            // Follow updates of what was read, so what is kept of it is forgotten in time.
            if let Some(subscribed) = &self.subscribed {
                subscribed.send_if_modified(|uris| uris.insert(uri.clone()));
            }
        }
        Ok(ToolResult { is_error, result })
    }
}

/// Whether `result` can be handed on as `operation`'s result, and for a tool result its
/// `isError`. Only what the host reads and what the specification forbids is checked: the
/// result is a JSON object of a completed request, its members the host reads have their
/// types, and a tool result holds no standalone `blob` content block (§mcp-result-content:
/// blobs ride inside embedded resources). Everything else — fields and content block types
/// this host does not know — passes untouched.
pub(super) fn check_result(operation: &Operation, result: &Value) -> Result<bool, ResultFault> {
    let Some(object) = result.as_object() else {
        return Err(ResultFault::NotAnObject(crate::config::json_kind(result)));
    };
    match object.get("resultType") {
        None => {}
        Some(Value::String(kind)) if kind == "complete" => {}
        Some(other) => {
            return Err(ResultFault::ResultType(crate::redact::scrub_capped(
                &other.to_string(),
                64,
            )));
        }
    }
    let array = |name: &'static str, required: bool| match object.get(name) {
        Some(Value::Array(_)) => Ok(()),
        None if !required => Ok(()),
        None => Err(ResultFault::NoArray(name)),
        Some(other) => Err(ResultFault::NotAnArray {
            name,
            kind: crate::config::json_kind(other),
        }),
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
                Some(other) => Err(ResultFault::IsErrorNotBoolean(crate::config::json_kind(
                    other,
                ))),
            }
        }
        Operation::ReadResource { .. } => array("contents", true).map(|()| false),
        Operation::GetPrompt { .. } => array("messages", true).map(|()| false),
        Operation::Complete { .. } => match object.get("completion") {
            Some(Value::Object(_)) => Ok(false),
            _ => Err(ResultFault::NoCompletion),
        },
    }
}

/// Why a server's result cannot be handed on as the result of the request it answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ResultFault {
    /// The result is not a JSON object (its JSON kind).
    #[error("the result is {0}, not a JSON object")]
    NotAnObject(&'static str),
    /// `resultType` is neither absent nor `complete` here (shown scrubbed, cut to 64).
    #[error("the result's resultType {0} is not \"complete\", \"input_required\" or \"task\"")]
    ResultType(String),
    /// A member the host hands on is missing.
    #[error("the result has no \"{0}\" array")]
    NoArray(&'static str),
    /// A member the host hands on is not an array.
    #[error("the result's \"{name}\" is {kind}, not an array")]
    NotAnArray {
        name: &'static str,
        kind: &'static str,
    },
    /// A content block has no `type`.
    #[error("content block {0} has no \"type\" string")]
    UntypedBlock(usize),
    /// A standalone `blob` block, which the specification does not allow.
    #[error(
        "the result holds a standalone blob content block, which is not valid tools/call content (blobs ride inside embedded resources)"
    )]
    StandaloneBlob,
    /// `isError` is not a boolean.
    #[error("the result's \"isError\" is {0}, not a boolean")]
    IsErrorNotBoolean(&'static str),
    /// A completion result without its `completion` object.
    #[error("the result has no \"completion\" object")]
    NoCompletion,
}

/// A `tools/call` content block the host cannot hand on, described: one without a type, or
/// a standalone `blob` block. A block of a type this host does not know is handed on.
pub(super) fn invalid_content(index: usize, block: &Value) -> Option<ResultFault> {
    match block.get("type").and_then(Value::as_str) {
        None => Some(ResultFault::UntypedBlock(index)),
        Some("blob") => Some(ResultFault::StandaloneBlob),
        Some(_) => None,
    }
}
