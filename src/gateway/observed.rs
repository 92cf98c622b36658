//! Each request the gateway serves, observed: the conventions' server duration and, with
//! feature `otel`, its MCP server span, whose parent is the trace context the client sent
//! (in `_meta`, or in the HTTP `traceparent` header when `_meta` holds none). The host's call
//! for the request runs under that span: the context rides in the request's extensions to
//! [`Gateway::options`](super::Gateway), which names it the call's parent.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::verbatim::PASSED;
use crate::telemetry::ServedRequest;
pub(super) use crate::telemetry::Target;

/// The trace context a served request's host call runs under.
#[cfg(feature = "otel")]
#[derive(Clone)]
pub(super) struct Traced(pub(super) opentelemetry::Context);

/// Starts observing request `method` naming `target`; with feature `otel` the context its
/// host call runs under is left in `context`'s extensions.
pub(super) fn serve(
    method: &str,
    target: Target<'_>,
    context: &mut RequestContext<RoleServer>,
) -> ServedRequest {
    let revision = context.protocol_version();
    let headers = context
        .extensions
        .get::<http::request::Parts>()
        .map(|parts| &parts.headers);
    let served = ServedRequest::start(
        method,
        target,
        &context.id,
        &context.meta.0,
        headers,
        revision.as_ref().map(|revision| revision.as_str()),
    );
    #[cfg(feature = "otel")]
    if let Some(parent) = served.parent() {
        context.extensions.insert(Traced(parent));
    }
    served
}

/// The trace context the host's call for `context`'s request runs under.
#[cfg(feature = "otel")]
pub(super) fn parent_of(context: &RequestContext<RoleServer>) -> Option<opentelemetry::Context> {
    context
        .extensions
        .get::<Traced>()
        .map(|traced| traced.0.clone())
}

/// What an answer was, as the duration and the span tell it: `Ok(is_error)` or the
/// JSON-RPC error's code and message.
pub(super) fn answer_of<T>(
    answer: &Result<T, McpError>,
    failed: impl FnOnce(&T) -> bool,
) -> Result<bool, (i32, &str)> {
    match answer {
        Ok(result) => Ok(failed(result)),
        Err(error) => Err((error.code.0, error.message.as_ref())),
    }
}

/// Whether a tool call's answer is a tool error: the upstream's `isError`, carried in the
/// placeholder's `_meta` when it is passed on as written.
pub(super) fn tool_failed(response: &CallToolResponse) -> bool {
    let CallToolResponse::Complete(result) = response else {
        return false;
    };
    result.is_error == Some(true) || passed_is_error(result)
}

fn passed_is_error(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .and_then(|meta| meta.get(PASSED))
        .and_then(|passed| passed.get("isError"))
        .and_then(Value::as_bool)
        == Some(true)
}
