//! The spans: the MCP client span of each request the host sends, the server span of each
//! request the gateway serves, the hydration and its connection attempts, with the
//! conventions' names and attributes. Each is a `tracing` span of target [`TARGET`] that
//! `tracing-opentelemetry` turns into an OpenTelemetry span; a disabled span (no subscriber
//! wants it) costs its callsite check and nothing else.

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;
use opentelemetry::trace::Status;
#[cfg(feature = "gateway")]
use opentelemetry::trace::TraceContextExt;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::conventions::{self, DURATION_BUCKETS, shown, shown_uri};
#[cfg(feature = "gateway")]
use super::{Target, propagate};
use crate::model::{CallError, Operation, ToolResult, TransportKind};

use super::TARGET;

/// What a connection's spans say of its transport and revision.
#[derive(Debug)]
pub(crate) struct PeerFacts {
    /// `network.transport`: `pipe` for a child's stdio (and an in-process stream), `tcp`
    /// for HTTP.
    transport: &'static str,
    /// `network.protocol.name`: `http` over HTTP.
    protocol: Option<&'static str>,
    /// `mcp.protocol.version`.
    revision: String,
}

impl PeerFacts {
    pub(crate) fn new(kind: TransportKind, revision: &str) -> Self {
        let http = matches!(kind, TransportKind::Http);
        Self {
            transport: if http { "tcp" } else { "pipe" },
            protocol: http.then_some("http"),
            revision: shown(revision),
        }
    }

    pub(crate) fn record(&self, span: &Span) {
        if span.is_disabled() {
            return;
        }
        span.record("network.transport", self.transport);
        if let Some(protocol) = self.protocol {
            span.record("network.protocol.name", protocol);
        }
        span.record("mcp.protocol.version", self.revision.as_str());
    }
}

/// `{mcp.method.name} {target}`, made only when the span is.
struct SpanName<'a>(&'static str, Option<&'a str>);

impl fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(target) => write!(f, "{} {}", self.0, shown(target)),
            None => f.write_str(self.0),
        }
    }
}

/// The client span of `operation` on `alias`: under `parent` when the caller names one,
/// else under the current span.
pub(super) fn client(
    alias: &str,
    method: &'static str,
    operation: &Operation,
    parent: Option<&opentelemetry::Context>,
) -> Span {
    let target = match operation {
        Operation::CallTool { name, .. } | Operation::GetPrompt { name, .. } => Some(name.as_str()),
        _ => None,
    };
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.client",
        otel.name = %SpanName(method, target),
        otel.kind = "client",
        mcp.method.name = method,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        plurnk.mcp.server = alias,
        jsonrpc.request.id = Empty,
        mcp.protocol.version = Empty,
        network.transport = Empty,
        network.protocol.name = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    match operation {
        Operation::CallTool { name, .. } => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", shown(name));
        }
        Operation::GetPrompt { name, .. } => {
            span.record("gen_ai.prompt.name", shown(name));
        }
        Operation::ReadResource { uri } => {
            span.record("mcp.resource.uri", shown_uri(uri));
        }
        Operation::Complete { .. } => {}
    }
    if let Some(parent) = parent {
        // Before the span starts (its first entry), when a parent can still be set.
        let _ = span.set_parent(parent.clone());
    }
    span
}

/// The outcome of a settled call on its span: `error.type` and an `ERROR` status for a
/// failure, with the server's JSON-RPC code and message when it sent one.
pub(super) fn outcome(span: &Span, result: Result<&ToolResult, &CallError>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(result) if result.is_error => {
            span.record("error.type", "tool_error");
            span.set_status(Status::error(""));
        }
        Ok(_) => {}
        Err(CallError::Remote { code, message, .. }) => {
            let code = code.to_string();
            span.record("error.type", code.as_str());
            span.record("rpc.response.status_code", code.as_str());
            span.set_status(Status::error(shown(message)));
        }
        Err(error) => {
            span.record("error.type", error.kind());
            // The host's own words, scrubbed like everything a caller is told.
            span.set_status(Status::error(shown(&error.to_string())));
        }
    }
}

/// The OpenTelemetry instruments of the two durations, made from the global meter provider
/// the first time they are needed (so a provider installed before the first call is used).
struct Instruments {
    client: Histogram<f64>,
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    server: Histogram<f64>,
}

fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = opentelemetry::global::meter("plurnk-mcp");
        let histogram = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build()
        };
        Instruments {
            client: histogram(
                "mcp.client.operation.duration",
                "The duration of the MCP request as observed on the sender from the time it \
                 was sent until the response is received.",
            ),
            server: histogram(
                "mcp.server.operation.duration",
                "MCP request duration as observed on the receiver from the time it was \
                 received until the result is sent.",
            ),
        }
    })
}

/// `mcp.client.operation.duration` on the OpenTelemetry side, with the conventions'
/// attributes (the tool's or prompt's name among them, bounded by the server's catalog).
pub(super) fn client_duration(
    span: &Span,
    method: &'static str,
    result: Result<&ToolResult, &CallError>,
    elapsed: Duration,
) {
    let _ = span;
    let mut attributes = Vec::with_capacity(3);
    attributes.push(KeyValue::new("mcp.method.name", method));
    if let Some(error) = conventions::error_type(result) {
        attributes.push(KeyValue::new("error.type", error));
    }
    instruments()
        .client
        .record(elapsed.as_secs_f64(), &attributes);
}

/// A child span of the current call while it waits for its connection to be ready.
pub(super) fn waiting() -> Span {
    tracing::info_span!(
        target: TARGET,
        "mcp.wait",
        otel.name = "wait ready connection",
        otel.kind = "internal",
    )
}

/// The current span sent request `id`.
pub(super) fn request_sent(id: &impl fmt::Display) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record("jsonrpc.request.id", tracing::field::display(id));
    }
}

/// A request the gateway serves: its span, and the context its client sent.
#[cfg(feature = "gateway")]
pub(crate) struct Served {
    pub(super) span: Span,
    /// The trace context the client sent, if any (in `_meta`, else the HTTP header).
    extracted: Option<opentelemetry::Context>,
}

/// The server span of a request the gateway serves.
#[cfg(feature = "gateway")]
pub(super) fn server(
    method: &'static str,
    target: Target<'_>,
    id: &impl fmt::Display,
    meta: &serde_json::Map<String, serde_json::Value>,
    headers: Option<&http::HeaderMap>,
    revision: Option<&str>,
) -> Served {
    let named = match target {
        Target::Tool(name) | Target::Prompt(name) => Some(name),
        Target::None | Target::Resource(_) => None,
    };
    let extracted = propagate::extract(meta, headers);
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.server",
        otel.name = %SpanName(method, named),
        otel.kind = "server",
        mcp.method.name = method,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        jsonrpc.request.id = %id,
        mcp.protocol.version = Empty,
        network.transport = if headers.is_some() { "tcp" } else { "pipe" },
        network.protocol.name = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    if !span.is_disabled() {
        match target {
            Target::Tool(name) => {
                span.record("gen_ai.operation.name", "execute_tool");
                span.record("gen_ai.tool.name", shown(name));
            }
            Target::Prompt(name) => {
                span.record("gen_ai.prompt.name", shown(name));
            }
            Target::Resource(uri) => {
                span.record("mcp.resource.uri", shown_uri(uri));
            }
            Target::None => {}
        }
        if headers.is_some() {
            span.record("network.protocol.name", "http");
        }
        if let Some(revision) = revision {
            span.record("mcp.protocol.version", shown(revision));
        }
        if let Some(parent) = &extracted {
            let _ = span.set_parent(parent.clone());
        }
    }
    Served { span, extracted }
}

#[cfg(feature = "gateway")]
impl Served {
    pub(super) fn answered(&self, answer: Result<bool, (i32, &str)>) {
        let span = &self.span;
        if span.is_disabled() {
            return;
        }
        match answer {
            Ok(false) => {}
            Ok(true) => {
                span.record("error.type", "tool_error");
                span.set_status(Status::error(""));
            }
            Err((code, message)) => {
                let code = code.to_string();
                span.record("error.type", code.as_str());
                span.record("rpc.response.status_code", code.as_str());
                span.set_status(Status::error(shown(message)));
            }
        }
    }

    /// The context the host's call runs under: this span's when it is exported, else the
    /// client's as it came (so a gateway that exports nothing still passes the trace on).
    pub(super) fn parent(&self) -> Option<opentelemetry::Context> {
        let own = self.span.context();
        if own.span().span_context().is_valid() {
            return Some(own);
        }
        self.extracted.clone()
    }
}

/// `mcp.server.operation.duration` on the OpenTelemetry side.
#[cfg(feature = "gateway")]
pub(super) fn server_duration(
    method: &'static str,
    answer: Result<bool, (i32, &str)>,
    elapsed: Duration,
) {
    let mut attributes = Vec::with_capacity(2);
    attributes.push(KeyValue::new("mcp.method.name", method));
    if let Some(error) = conventions::answer_error_type(answer) {
        attributes.push(KeyValue::new("error.type", error));
    }
    instruments()
        .server
        .record(elapsed.as_secs_f64(), &attributes);
}

/// The span of one workspace's hydration (a root).
pub(super) fn hydration(workspace: &str, servers: usize) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "plurnk.hydration",
        otel.name = "hydrate",
        otel.kind = "internal",
        plurnk.mcp.workspace = %shown(workspace),
        plurnk.mcp.servers = servers,
    )
}

/// The span of one connection attempt: under its hydration, or a root of its own.
pub(super) fn attempt(
    alias: &str,
    kind: TransportKind,
    hydration: Option<&Span>,
    reconnect: bool,
) -> Span {
    let transport = if matches!(kind, TransportKind::Http) {
        "tcp"
    } else {
        "pipe"
    };
    let reason = match (hydration.is_some(), reconnect) {
        (true, _) => "hydration",
        (false, true) => "reconnect",
        (false, false) => "enable",
    };
    tracing::info_span!(
        target: TARGET,
        parent: hydration.and_then(Span::id),
        "plurnk.connect",
        otel.name = %format_args!("connect {alias}"),
        otel.kind = "internal",
        plurnk.mcp.server = alias,
        plurnk.mcp.attempt = reason,
        network.transport = transport,
        error.type = Empty,
    )
}

/// How an attempt ended: `failed` names the Problem kind of a failure.
pub(super) fn attempt_settled(span: &Span, failed: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    if let Some(kind) = failed {
        span.record("error.type", kind);
        span.set_status(Status::error(""));
    }
}
