//! The conventions' names and bounded values, and the two duration histograms every build
//! records through the `metrics` facade.

use std::time::Duration;

use crate::model::{CallError, Operation, ToolResult};

/// The conventions' bucket boundaries for both duration histograms, in seconds.
#[cfg(any(feature = "otel", feature = "prometheus"))]
pub(crate) const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The `mcp.method.name` of an operation the host sends.
pub(crate) fn method_of(operation: &Operation) -> &'static str {
    match operation {
        Operation::CallTool { .. } => "tools/call",
        Operation::ReadResource { .. } => "resources/read",
        Operation::GetPrompt { .. } => "prompts/get",
        Operation::Complete { .. } => "completion/complete",
    }
}

/// The methods a client may send that the conventions (or the 2026-07-28 revision) name.
#[cfg(feature = "gateway")]
const METHODS: &[&str] = &[
    "completion/complete",
    "initialize",
    "logging/setLevel",
    "notifications/cancelled",
    "notifications/initialized",
    "notifications/progress",
    "ping",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/templates/list",
    "resources/unsubscribe",
    "server/discover",
    "subscriptions/listen",
    "tasks/cancel",
    "tasks/get",
    "tasks/result",
    "tasks/update",
    "tools/call",
    "tools/list",
];

/// A method a client sent, as a bounded value: one of [`METHODS`], else `_OTHER` (the
/// conventions' fallback), so a client cannot mint label values.
#[cfg(feature = "gateway")]
pub(crate) fn known_method(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("_OTHER")
}

/// The JSON-RPC error codes the specification defines (and JSON-RPC's own), as the
/// `error.type` of a histogram; any other code a server chose is `_OTHER`.
fn known_code(code: i32) -> &'static str {
    match code {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32002 => "-32002",
        -32020 => "-32020",
        -32021 => "-32021",
        -32022 => "-32022",
        -32042 => "-32042",
        _ => "_OTHER",
    }
}

/// The bounded `error.type` of a settled call: `None` for a success, `tool_error` for a
/// result with `isError`, the code a server's JSON-RPC error carried (bounded), or the
/// host's own error kind (`timeout`, `connection-lost`, …).
pub(crate) fn error_type(result: Result<&ToolResult, &CallError>) -> Option<&'static str> {
    match result {
        Ok(result) if result.is_error => Some("tool_error"),
        Ok(_) => None,
        Err(CallError::Remote { code, .. }) => Some(known_code(*code)),
        Err(error) => Some(error.kind()),
    }
}

/// The bounded `error.type` of an answer the gateway gave.
#[cfg(feature = "gateway")]
pub(crate) fn answer_error_type(answer: Result<bool, (i32, &str)>) -> Option<&'static str> {
    match answer {
        Ok(true) => Some("tool_error"),
        Ok(false) => None,
        Err((code, _)) => Some(known_code(code)),
    }
}

/// `mcp_client_operation_duration_seconds`: one request the host sent a server.
pub(crate) fn client_duration(
    method: &'static str,
    result: Result<&ToolResult, &CallError>,
    elapsed: Duration,
) {
    record(
        "mcp_client_operation_duration_seconds",
        method,
        error_type(result),
        elapsed,
    );
}

/// `mcp_server_operation_duration_seconds`: one request the gateway served.
#[cfg(feature = "gateway")]
pub(crate) fn server_duration(
    method: &'static str,
    answer: Result<bool, (i32, &str)>,
    elapsed: Duration,
) {
    record(
        "mcp_server_operation_duration_seconds",
        method,
        answer_error_type(answer),
        elapsed,
    );
}

fn record(
    name: &'static str,
    method: &'static str,
    error: Option<&'static str>,
    elapsed: Duration,
) {
    let seconds = elapsed.as_secs_f64();
    // The common case (a tool call that succeeded) with literal labels, so the macro keeps
    // its key in a static and allocates nothing; the rest pay a small key.
    match (name, method, error) {
        ("mcp_client_operation_duration_seconds", "tools/call", None) => metrics::histogram!(
            "mcp_client_operation_duration_seconds",
            "mcp_method_name" => "tools/call"
        )
        .record(seconds),
        ("mcp_server_operation_duration_seconds", "tools/call", None) => metrics::histogram!(
            "mcp_server_operation_duration_seconds",
            "mcp_method_name" => "tools/call"
        )
        .record(seconds),
        (name, method, None) => {
            metrics::histogram!(name, "mcp_method_name" => method).record(seconds);
        }
        (name, method, Some(error)) => {
            metrics::histogram!(name, "mcp_method_name" => method, "error_type" => error)
                .record(seconds);
        }
    }
}

/// A text a server or a caller chose, as an attribute may carry it: scrubbed of every
/// registered secret and cut to a name's length.
#[cfg(feature = "otel")]
pub(crate) fn shown(text: &str) -> String {
    crate::redact::scrub_capped(text, SHOWN_ATTRIBUTE)
}

/// How much of a chosen text one attribute carries (a name, a status, a URI).
#[cfg(feature = "otel")]
pub(crate) const SHOWN_ATTRIBUTE: usize = 256;

/// A resource URI as an attribute may carry it: without user information (`user:pass@`),
/// query or fragment (where tokens travel), then scrubbed and cut.
#[cfg(feature = "otel")]
pub(crate) fn shown_uri(uri: &str) -> String {
    let end = uri.find(['?', '#']).unwrap_or(uri.len());
    let uri = &uri[..end];
    let stripped = match uri.find("://") {
        Some(scheme_end) => {
            let rest = &uri[scheme_end + 3..];
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{}{}", &uri[..scheme_end + 3], &rest[at + 1..]),
                None => uri.to_owned(),
            }
        }
        None => uri.to_owned(),
    };
    shown(&stripped)
}

// Each test needs a part the default build leaves out.
#[cfg(all(test, any(feature = "gateway", feature = "otel")))]
mod tests {
    use super::*;

    #[cfg(feature = "gateway")]
    #[test]
    fn a_label_value_is_one_the_conventions_or_the_host_name() {
        assert_eq!(known_method("tools/call"), "tools/call");
        assert_eq!(known_method("x/made-up-by-a-client"), "_OTHER");
        let remote = |code| CallError::Remote {
            alias: "a".into(),
            tool: "t".into(),
            code,
            message: "m".into(),
            data: None,
        };
        assert_eq!(error_type(Err(&remote(-32602))), Some("-32602"));
        assert_eq!(error_type(Err(&remote(-1234))), Some("_OTHER"));
        let failed = ToolResult {
            is_error: true,
            result: serde_json::json!({}),
        };
        assert_eq!(error_type(Ok(&failed)), Some("tool_error"));
        assert_eq!(answer_error_type(Err((-32601, "no"))), Some("-32601"));
        assert_eq!(answer_error_type(Ok(false)), None);
    }

    #[cfg(feature = "otel")]
    #[test]
    fn a_uri_attribute_keeps_no_user_information_or_query() {
        assert_eq!(
            shown_uri("postgres://admin:hunter2@db.internal:5432/customers?token=abc#x"),
            "postgres://db.internal:5432/customers"
        );
        assert_eq!(
            shown_uri("file:///home/a/report.pdf"),
            "file:///home/a/report.pdf"
        );
        assert_eq!(shown_uri("mem://a@b/c@d"), "mem://b/c@d");
        assert_eq!(shown_uri("urn:x:y?q"), "urn:x:y");
    }
}
