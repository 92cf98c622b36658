//! What the host tells about each MCP request it sends a server or serves a client, by the
//! OpenTelemetry semantic conventions for MCP (`docs/gen-ai/mcp.md` of the GenAI
//! conventions, status Development) and the MCP specification's reserved `_meta` keys.
//!
//! **Always** (every build): the conventions' two duration histograms through the `metrics`
//! facade, under the names an OTLP-to-Prometheus bridge gives them,
//! `mcp_client_operation_duration_seconds` (each request the host sent a server, from
//! admission to its answer) and `mcp_server_operation_duration_seconds` (each request the
//! gateway served), with the conventions' bucket boundaries. Their labels stay bounded, as
//! every label of the host's: `mcp_method_name` (a method the conventions name, or
//! `_OTHER`) and, for a failure, `error_type` (`tool_error`, the host's error kind, or a
//! JSON-RPC code the specification defines, else `_OTHER`).
//!
//! **With feature `otel`**: every request the host sends is an MCP client span
//! (`{mcp.method.name} {target}`, kind `CLIENT`) with the conventions' attributes, under the
//! caller's own `tracing` span or an explicit parent ([`CallOptions::parent`]); what the host
//! adds (waiting for a ready connection, each `input_required` round, a Task's creation and
//! polls) is a child span or an event of it. The W3C trace context of that span goes into
//! the request's `_meta` (`traceparent`, `tracestate`, `baggage`, unprefixed, as the
//! specification reserves them), so a server that reads it continues the trace. The gateway's
//! side of every request it serves is an MCP server span whose parent is the context its
//! client sent in `_meta` (or, when `_meta` holds none, in the HTTP `traceparent` header).
//! A hydration is a span with a child per connection attempt. The spans are `tracing` spans
//! (target [`TARGET`]) that `tracing-opentelemetry` makes OpenTelemetry spans: a daemon's
//! subscriber with that layer sees them under its own; [`Telemetry`] is the pipeline the
//! command line installs from the standard `OTEL_*` variables (OTLP over HTTP/protobuf,
//! bounded queues that drop and count, a bounded flush at shutdown). No attribute carries a
//! secret: every text a server or a caller chose is scrubbed of the registered secrets and
//! cut, and a resource URI loses its user information and query.
//!
//! # Layout
//!
//! This file is the face the call sites use, the same in every build: `ClientCall` and
//! `ServedRequest` (a request sent and one served), `inject` and the events. The rooms:
//!
//! - `conventions.rs`: the conventions' names, bounded values and the histograms (always)
//! - `spans.rs` (`otel`): the spans and their attributes
//! - `propagate.rs` (`otel`): W3C trace context into and out of `_meta` and headers
//! - `config.rs` (`otel`): the `OTEL_*` variables read from a map, every fault at once
//! - `export.rs` (`otel`): the OTLP pipeline, its bounded queue and its flush
//!
//! [`CallOptions::parent`]: crate::CallOptions
//! [`Telemetry`]: self

#[cfg(feature = "otel")]
mod config;
mod conventions;
#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod propagate;
#[cfg(feature = "otel")]
mod spans;

use std::time::Duration;
#[cfg(feature = "gateway")]
use std::time::Instant;

use crate::model::{CallError, Operation, ToolResult, TransportKind};

#[cfg(feature = "otel")]
pub use config::{Settings, TelemetryError, TelemetryErrors};
#[cfg(feature = "prometheus")]
pub(crate) use conventions::DURATION_BUCKETS;
#[cfg(feature = "otel")]
pub use export::{Flushed, Telemetry};
/// The OpenTelemetry API and `tracing` bridge this build speaks ([`CallOptions::parent`] is
/// an [`opentelemetry::Context`]), for a daemon to name the same versions.
///
/// [`CallOptions::parent`]: crate::CallOptions
#[cfg(feature = "otel")]
pub use {opentelemetry, tracing_opentelemetry};

/// The trace context a caller names as the parent of its call's span
/// ([`CallOptions::parent`](crate::CallOptions)).
#[cfg(feature = "otel")]
pub(crate) type Parent = opentelemetry::Context;

/// No trace context in a build without `otel`: a call never has one.
#[cfg(not(feature = "otel"))]
#[derive(Debug, Clone)]
pub(crate) enum Parent {}

/// The `tracing` target of every span and event this module makes: a subscriber's layer
/// that exports them selects this target.
pub const TARGET: &str = "plurnk_mcp::otel";

/// What a connection's requests are sent over, as the conventions name it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Peer {
    #[cfg(feature = "otel")]
    facts: Option<std::sync::Arc<spans::PeerFacts>>,
}

impl Peer {
    /// A connection over `kind` that negotiated `revision`.
    pub(crate) fn new(kind: TransportKind, revision: &str) -> Self {
        #[cfg(feature = "otel")]
        {
            Self {
                facts: Some(std::sync::Arc::new(spans::PeerFacts::new(kind, revision))),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (kind, revision);
            Self {}
        }
    }
}

/// One operation the host sends a server: its client span and its duration.
pub(crate) struct ClientCall {
    method: &'static str,
    #[cfg(feature = "otel")]
    span: tracing::Span,
}

impl ClientCall {
    /// The operation `operation` on server `alias`, under `parent` when the caller names one
    /// (else under the caller's current span).
    pub(crate) fn start(alias: &str, operation: &Operation, parent: Option<&Parent>) -> Self {
        let method = conventions::method_of(operation);
        #[cfg(feature = "otel")]
        {
            Self {
                method,
                span: spans::client(alias, method, operation, parent),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (alias, parent);
            Self { method }
        }
    }

    /// Runs `work` inside the call's span (requests sent in it carry its context).
    pub(crate) async fn within<F: Future>(&self, work: F) -> F::Output {
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument;
            work.instrument(self.span.clone()).await
        }
        #[cfg(not(feature = "otel"))]
        {
            work.await
        }
    }

    /// The call was admitted on a connection over `peer`.
    pub(crate) fn admitted(&self, peer: &Peer) {
        #[cfg(feature = "otel")]
        if let Some(facts) = &peer.facts {
            facts.record(&self.span);
        }
        #[cfg(not(feature = "otel"))]
        let _ = peer;
    }

    /// The call went to the server and settled with `result` after `elapsed`: the duration
    /// histogram is told (a call refused before it was sent is not an operation).
    pub(crate) fn sent(&self, elapsed: Duration, result: Result<&ToolResult, &CallError>) {
        conventions::client_duration(self.method, result, elapsed);
        #[cfg(feature = "otel")]
        spans::client_duration(&self.span, self.method, result, elapsed);
    }

    /// The call settled with `result` (sent or refused): the span's outcome.
    pub(crate) fn settled(&self, result: Result<&ToolResult, &CallError>) {
        #[cfg(feature = "otel")]
        spans::outcome(&self.span, result);
        #[cfg(not(feature = "otel"))]
        let _ = result;
    }
}

/// Runs `wait` (a call waiting for its connection to be ready again, behind a changed
/// catalog) as a child span of the current call.
pub(crate) async fn waiting_for_ready<F: Future>(wait: F) -> F::Output {
    #[cfg(feature = "otel")]
    {
        use tracing::Instrument;
        wait.instrument(spans::waiting()).await
    }
    #[cfg(not(feature = "otel"))]
    {
        wait.await
    }
}

/// The current call sent a request whose JSON-RPC id is `id`.
pub(crate) fn request_sent(id: &impl std::fmt::Display) {
    #[cfg(feature = "otel")]
    spans::request_sent(id);
    #[cfg(not(feature = "otel"))]
    let _ = id;
}

/// The server answered the current call's round `round` with `input_required`, asking
/// `asked` questions.
pub(crate) fn input_round(round: usize, asked: usize) {
    #[cfg(feature = "otel")]
    tracing::event!(target: TARGET, tracing::Level::INFO, mcp.round = round, mcp.input_requests = asked, "input_required");
    #[cfg(not(feature = "otel"))]
    let _ = (round, asked);
}

/// The current call became Task `task`.
pub(crate) fn task_created(task: &str) {
    #[cfg(feature = "otel")]
    tracing::event!(target: TARGET, tracing::Level::INFO, mcp.task.id = %conventions::shown(task), "task created");
    #[cfg(not(feature = "otel"))]
    let _ = task;
}

/// The current call's Task was polled and is `status`.
pub(crate) fn task_polled(status: &str) {
    #[cfg(feature = "otel")]
    tracing::event!(target: TARGET, tracing::Level::INFO, mcp.task.status = %conventions::shown(status), "task polled");
    #[cfg(not(feature = "otel"))]
    let _ = status;
}

/// Puts the W3C trace context of the current call into a request's `_meta`: the current
/// span's when it is exported, else the caller's explicit parent, else nothing.
pub(crate) fn inject(
    meta: &mut serde_json::Map<String, serde_json::Value>,
    parent: Option<&Parent>,
) {
    #[cfg(feature = "otel")]
    propagate::inject_current(meta, parent);
    #[cfg(not(feature = "otel"))]
    let _ = (meta, parent);
}

/// One request the gateway serves: its server span and its duration.
#[cfg(feature = "gateway")]
pub(crate) struct ServedRequest {
    method: &'static str,
    started: Instant,
    #[cfg(feature = "otel")]
    served: spans::Served,
}

#[cfg(feature = "gateway")]
impl ServedRequest {
    /// Request `method` (naming `target`, when it names a tool or prompt) with JSON-RPC id
    /// `id`, its `_meta` and, over HTTP, its headers.
    pub(crate) fn start(
        method: &str,
        target: Target<'_>,
        id: &impl std::fmt::Display,
        meta: &serde_json::Map<String, serde_json::Value>,
        headers: Option<&http::HeaderMap>,
        revision: Option<&str>,
    ) -> Self {
        let method = conventions::known_method(method);
        #[cfg(feature = "otel")]
        {
            Self {
                method,
                started: Instant::now(),
                served: spans::server(method, target, id, meta, headers, revision),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (target, id, meta, headers, revision);
            Self {
                method,
                started: Instant::now(),
            }
        }
    }

    /// Runs `work` inside the request's span.
    pub(crate) async fn within<F: Future>(&self, work: F) -> F::Output {
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument;
            work.instrument(self.served.span.clone()).await
        }
        #[cfg(not(feature = "otel"))]
        {
            work.await
        }
    }

    /// The request was answered: `Ok(is_error)` (a tool's `isError`), or a JSON-RPC error
    /// with `code` and `message`.
    pub(crate) fn answered(self, answer: Result<bool, (i32, &str)>) {
        let elapsed = self.started.elapsed();
        conventions::server_duration(self.method, answer, elapsed);
        #[cfg(feature = "otel")]
        {
            spans::server_duration(self.method, answer, elapsed);
            self.served.answered(answer);
        }
    }

    /// The trace context the request runs under, for the host's call it makes: the served
    /// span's when it is exported, else the one the client sent (passed through as it came).
    #[cfg(feature = "otel")]
    pub(crate) fn parent(&self) -> Option<opentelemetry::Context> {
        self.served.parent()
    }
}

/// What a served request names beside its method.
#[cfg(feature = "gateway")]
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Nothing the span's name takes.
    None,
    /// A tool, by the name the client called it.
    Tool(&'a str),
    /// A prompt, by the name the client asked for it.
    Prompt(&'a str),
    /// A resource URI (an attribute, never the span's name).
    Resource(&'a str),
}

/// A hydration of workspace `workspace`: the span each of its connection attempts is a child
/// of, ended when the last handle to it is dropped (the last attempt settled).
pub(crate) fn hydration(workspace: &str, servers: usize) -> tracing::Span {
    #[cfg(feature = "otel")]
    {
        spans::hydration(workspace, servers)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (workspace, servers);
        tracing::Span::none()
    }
}

/// One connection attempt to server `alias` over `kind`: a child of `hydration` when it is
/// part of one, else a root of its own (a reconnect, an enable).
pub(crate) fn attempt(
    alias: &str,
    kind: TransportKind,
    hydration: Option<&tracing::Span>,
    reconnect: bool,
) -> tracing::Span {
    #[cfg(feature = "otel")]
    {
        spans::attempt(alias, kind, hydration, reconnect)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (alias, kind, hydration, reconnect);
        tracing::Span::none()
    }
}

/// Runs connection attempt `work` with `span`'s trace context for the requests it sends
/// (its listings). The span is not entered: rmcp's connection task takes the span current when
/// it starts and holds it for the connection's life, which would keep the attempt's span
/// (and its hydration's) open as long as the connection.
pub(crate) async fn attempting<F: Future>(span: &tracing::Span, work: F) -> F::Output {
    #[cfg(feature = "otel")]
    {
        propagate::attempting(span, work).await
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        work.await
    }
}

/// How an attempt ended, on its span: `None` when it connected, else the Problem kind.
pub(crate) fn attempt_settled(span: &tracing::Span, failed: Option<&str>) {
    #[cfg(feature = "otel")]
    spans::attempt_settled(span, failed);
    #[cfg(not(feature = "otel"))]
    let _ = (span, failed);
}
