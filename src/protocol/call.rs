//! Requests on behalf of a caller: `tools/call`, `resources/read`, `prompts/get` and
//! `completion/complete`, each with a deadline, caller cancellation, progress routed to the
//! caller, connection loss, and multi-round-trip input (MRTR).
//!
//! The MRTR loop is ours rather than rmcp's `RunningService::call_tool` driver because the
//! interaction belongs to the caller that owns the operation, not to the connection: rmcp's
//! driver answers through the connection-wide `ClientHandler` and carries no deadline,
//! cancellation or progress routing.

//!
//! # Layout
//!
//! This file holds `CallPeer` and the plain call: `run` (the MRTR rounds), the request
//! built and sent, a cached read, and how failures are named. The rooms beside it import one
//! way (task → interaction, result → deadline; each may use this file):
//!
//! - `task.rs`: a call that became a Task, followed to its end
//! - `interaction.rs`: input requests asked of the caller, answers checked
//! - `result.rs`: the result as the caller gets it (verbatim, or typed and written out)
//! - `deadline.rs`: the operation's one deadline, who stopped it, what a dropped call owes
//! - `progress.rs`: progress reports routed to the request that owns their token

mod deadline;
mod interaction;
mod progress;
pub(crate) mod reads;
mod result;
mod task;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    CompleteRequest, CompleteRequestParams, CustomResult, GetExtensions, GetPromptRequest,
    GetPromptRequestParams, InputResponses, ReadResourceRequest, ReadResourceRequestParams,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use self::deadline::STOP_GRACE;
use self::deadline::{Courtesy, NOTIFY_BOUND, Owed, Owning, Stop};
use self::interaction::relayed;
pub(crate) use self::interaction::{elicitation_from, validate};
pub(crate) use self::progress::ProgressRoutes;
use self::progress::RouteGuard;
use super::guard::CutReason;
use super::lines::Verbatim;
use crate::model::{CallError, InteractionHandler, Operation, ProgressSink, ToolResult};

/// The request `_meta` key of the client's capabilities (2026-07-28).
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// How many `input_required` rounds one operation may take before it is abandoned.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;

/// How near the operation's deadline rmcp's own timer must fire to be taken as that
/// deadline (rather than a per-progress timeout): timers fire a millisecond or so late.
const RMCP_TIMER_SLACK: Duration = Duration::from_millis(20);

/// What the caller brings to one operation.
#[derive(Clone)]
pub(crate) struct CallContext {
    /// The per-request deadline.
    pub timeout: Duration,
    /// With `Some(max)`, progress resets the deadline, bounded by `max` in total.
    pub reset_on_progress: Option<Duration>,
    /// The caller's cancellation, if it brought one (most calls do not, and then cost no
    /// token of their own).
    pub cancel: Option<CancellationToken>,
    /// Where progress reports go.
    pub progress: Option<ProgressSink>,
    /// Who answers input requests; `None` declines them.
    pub interaction: Option<InteractionHandler>,
    /// Relay `input_required` to the caller: what the first request carries, and the
    /// caller answers the next round itself.
    pub relay: Option<crate::model::InputRelay>,
    /// Sent in the request's `_meta` in place of the host's own capabilities.
    pub client_capabilities: Option<serde_json::Map<String, Value>>,
    /// The trace context the caller names as its call's parent (feature `otel`).
    pub parent: Option<crate::telemetry::Parent>,
}

impl CallContext {
    /// Completes when the caller cancels; never, when it brought no cancellation.
    pub(crate) async fn cancelled(&self) {
        match &self.cancel {
            Some(cancel) => cancel.cancelled().await,
            None => std::future::pending().await,
        }
    }
}

/// A cheap, cloneable handle that runs requests on one connection; many run at once.
#[derive(Clone)]
pub(crate) struct CallPeer {
    alias: String,
    peer: Peer<RoleClient>,
    lost: CancellationToken,
    routes: Arc<ProgressRoutes>,
    /// The resource URIs the connection's listen stream follows, when the server offers
    /// resource updates: a URI read into the cache joins it.
    subscribed: Option<Arc<watch::Sender<BTreeSet<String>>>>,
    /// The connection's resource reads, kept whole for their `ttlMs`.
    reads: Arc<reads::Reads>,
    /// Why the host cut the connection, when it did: what a call lost with it is told.
    cut: CutReason,
    /// A legacy server's callers in flight, whose interaction its questions go to.
    askers: Option<Arc<super::Askers>>,
    /// What the call's span says of this connection (its transport and revision).
    telemetry: crate::telemetry::Peer,
}

impl CallPeer {
    pub(super) fn new(
        alias: String,
        peer: Peer<RoleClient>,
        lost: CancellationToken,
        routes: Arc<ProgressRoutes>,
        subscribed: Option<Arc<watch::Sender<BTreeSet<String>>>>,
        cut: CutReason,
        askers: Option<Arc<super::Askers>>,
    ) -> Self {
        Self {
            alias,
            peer,
            lost,
            routes,
            subscribed,
            reads: Arc::default(),
            cut,
            askers,
            telemetry: crate::telemetry::Peer::default(),
        }
    }

    /// The same peer, keeping its resource reads in `reads` (the connection's).
    pub(super) fn with_reads(mut self, reads: Arc<reads::Reads>) -> Self {
        self.reads = reads;
        self
    }

    /// The same peer, its calls' spans saying `telemetry` of the connection.
    pub(super) fn with_telemetry(mut self, telemetry: crate::telemetry::Peer) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// What the call's span says of this connection.
    pub(crate) fn telemetry(&self) -> &crate::telemetry::Peer {
        &self.telemetry
    }

    /// Why the connection closed under a call: the host's reason when it cut it (a flood,
    /// an oversized message), else `what` happened.
    fn closed(&self, what: &str) -> String {
        self.cut.get().unwrap_or_else(|| what.to_owned())
    }

    /// Runs `operation` to its end: the result, or a typed error. Never hangs: the deadline,
    /// the caller's cancellation and the loss of the connection each end it, and the first
    /// two also cancel the request on the wire. `input_required` rounds are answered through
    /// the caller's interaction and only the originating request is reissued, with a fresh
    /// id and the server's `requestState` echoed byte for byte.
    pub(crate) async fn run(
        &self,
        operation: &Operation,
        context: &CallContext,
        closing: &CancellationToken,
    ) -> Result<ToolResult, CallError> {
        let label = operation.label();
        // A legacy server asks its questions beside the call (elicitation/create): they go
        // to this call's interaction while it is in flight.
        let _asker = match (&self.askers, &context.interaction) {
            (Some(askers), Some(handler)) => Some(askers.enter(handler.clone())),
            _ => None,
        };
        let (mut responses, mut state) = relayed(context);
        let deadline = Owning::of(context, closing);
        let mut state_only_rounds = 0u32;
        for round in 0..MAX_INPUT_ROUNDS {
            // Only a read that answers no input round may come from the connection's reads,
            // kept whole as the server wrote them for their ttlMs.
            if round == 0
                && responses.is_none()
                && state.is_none()
                && let Operation::ReadResource { uri } = operation
                && let Some(kept) = self.reads.fresh(uri, std::time::Instant::now())
            {
                // Checked when it was kept; kept again it would never expire.
                return Ok(ToolResult {
                    is_error: false,
                    result: kept,
                });
            }
            let request = self.build(operation, responses.take(), state.take(), &label)?;
            let answer = self.send(request, context, deadline, &label).await?;
            // An answer kept whole in an event stream, given back as the server wrote it.
            #[cfg(feature = "http")]
            let answer = super::http::kept::unwrap(answer);
            // A verbatim answer is read for its `resultType` only: a round or a Task is
            // followed here, a result goes back as the server wrote it.
            let answer = match answer {
                ServerResult::CustomResult(CustomResult(raw)) => {
                    match raw.get("resultType").and_then(Value::as_str) {
                        Some("input_required") if context.relay.is_some() => {
                            return Ok(ToolResult {
                                is_error: false,
                                result: raw,
                            });
                        }
                        Some("input_required") => ServerResult::InputRequiredResult(
                            serde_json::from_value(raw).map_err(|error| {
                                self.protocol(
                                    &label,
                                    &format!("input_required unreadable: {error}"),
                                )
                            })?,
                        ),
                        Some("task") => {
                            return Box::pin(
                                self.follow(operation, raw, context, deadline, &label),
                            )
                            .await;
                        }
                        _ => {
                            return self.complete(
                                operation,
                                ServerResult::CustomResult(CustomResult(raw)),
                                &label,
                            );
                        }
                    }
                }
                typed => typed,
            };
            match answer {
                ServerResult::InputRequiredResult(input) if context.relay.is_some() => {
                    let result = serde_json::to_value(&input).map_err(|error| {
                        self.protocol(&label, &format!("input_required unreadable: {error}"))
                    })?;
                    return Ok(ToolResult {
                        is_error: false,
                        result,
                    });
                }
                ServerResult::InputRequiredResult(input) => {
                    let asked = input.input_requests.as_ref().map_or(0, |asked| asked.len());
                    crate::telemetry::input_round(round, asked);
                    let rounds = &mut state_only_rounds;
                    (responses, state) = self
                        .next_round(input, rounds, context, deadline, &label)
                        .await?;
                }
                ServerResult::CreateTaskResult(created) => {
                    let task = serde_json::to_value(&created.task).unwrap_or_default();
                    return Box::pin(self.follow(operation, task, context, deadline, &label)).await;
                }
                other => return self.complete(operation, other, &label),
            }
        }
        Err(self.protocol(
            &label,
            &format!(
                "the server asked for input more than {MAX_INPUT_ROUNDS} times without completing"
            ),
        ))
    }

    fn build(
        &self,
        operation: &Operation,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
        label: &str,
    ) -> Result<ClientRequest, CallError> {
        let mrtr = |mut params: serde_json::Map<String, Value>| {
            if let Some(responses) = &input_responses {
                params.insert("inputResponses".into(), json!(responses));
            }
            if let Some(state) = &request_state {
                params.insert("requestState".into(), Value::String(state.clone()));
            }
            Value::Object(params)
        };
        let invalid = |error: serde_json::Error| {
            self.protocol(label, &format!("the request could not be built: {error}"))
        };
        let mut request = match operation {
            // The common case, built directly (no round trip through JSON).
            Operation::CallTool { name, arguments }
                if input_responses.is_none() && request_state.is_none() =>
            {
                ClientRequest::CallToolRequest(CallToolRequest::new(
                    CallToolRequestParams::new(name.clone()).with_arguments(arguments.clone()),
                ))
            }
            Operation::CallTool { name, arguments } => {
                let mut params = serde_json::Map::new();
                params.insert("name".into(), Value::String(name.clone()));
                params.insert("arguments".into(), Value::Object(arguments.clone()));
                let params: CallToolRequestParams =
                    serde_json::from_value(mrtr(params)).map_err(invalid)?;
                ClientRequest::CallToolRequest(CallToolRequest::new(params))
            }
            Operation::ReadResource { uri } => {
                let mut params = serde_json::Map::new();
                params.insert("uri".into(), Value::String(uri.clone()));
                let params: ReadResourceRequestParams =
                    serde_json::from_value(mrtr(params)).map_err(invalid)?;
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params))
            }
            Operation::GetPrompt { name, arguments } => {
                let mut params = serde_json::Map::new();
                params.insert("name".into(), Value::String(name.clone()));
                if !arguments.is_empty() {
                    params.insert("arguments".into(), Value::Object(arguments.clone()));
                }
                let params: GetPromptRequestParams =
                    serde_json::from_value(mrtr(params)).map_err(invalid)?;
                ClientRequest::GetPromptRequest(GetPromptRequest::new(params))
            }
            Operation::Complete {
                reference,
                argument,
                value,
                context,
            } => {
                let mut params = json!({
                    "ref": reference,
                    "argument": {"name": argument, "value": value},
                });
                if !context.is_empty() {
                    params["context"] = json!({ "arguments": context });
                }
                let params: CompleteRequestParams =
                    serde_json::from_value(params).map_err(invalid)?;
                ClientRequest::CompleteRequest(CompleteRequest::new(params))
            }
        };
        // Its result is handed back as the server wrote it (where the transport can).
        request.extensions_mut().insert(Verbatim);
        Ok(request)
    }

    async fn send(
        &self,
        request: ClientRequest,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ServerResult, CallError> {
        // One timer per call, at the operation's deadline. A plain deadline is the host's
        // own: rmcp is given none (its expiry would await the cancellation without a bound),
        // and on expiry the host sends the cancellation itself, bounded. A deadline that
        // progress resets is rmcp's (only it sees progress), within what is left of the
        // operation's, and the host's timer then bounds the whole wait a moment after rmcp's
        // has had its chance.
        let remaining = owning.remaining();
        if remaining.is_zero() {
            return Err(self.timeout(label, owning.budget));
        }
        let resets = context.reset_on_progress;
        let options = match resets {
            Some(_) => PeerRequestOptions::with_timeout(context.timeout.min(remaining))
                .reset_timeout_on_progress()
                .with_max_total_timeout(remaining),
            None => PeerRequestOptions::no_options(),
        };
        let mut options = options;
        let mut meta = serde_json::Map::new();
        if let Some(capabilities) = context.client_capabilities.clone() {
            meta.insert(CLIENT_CAPABILITIES.into(), Value::Object(capabilities));
        }
        // The call's trace context, so a server that reads it continues the trace.
        crate::telemetry::inject(&mut meta, context.parent.as_ref());
        if !meta.is_empty() {
            options.meta = Some(meta.into());
        }
        // The same deadline bounds handing the request over and waiting for its answer: a
        // server that stops reading its input blocks the write, and with it everything
        // queued behind.
        let deadline = tokio::time::sleep_until(owning.at);
        tokio::pin!(deadline);
        let handle = tokio::select! {
            biased;
            sent = self.peer.send_cancellable_request(request, options) => {
                sent.map_err(|error| self.map_error(label, error))?
            }
            () = &mut deadline => return Err(self.timeout(label, owning.budget)),
        };
        if resets.is_some() {
            deadline.as_mut().reset(owning.at + NOTIFY_BOUND);
        }
        let _route = RouteGuard {
            routes: &self.routes,
            token: context.progress.clone().map(|sink| {
                self.routes.insert(handle.progress_token.clone(), sink);
                handle.progress_token.clone()
            }),
        };
        let id = handle.id.clone();
        crate::telemetry::request_sent(&id);
        // A caller that stops waiting (drops the call) still has the request cancelled.
        let mut owed = Courtesy::owe(&self.peer, Owed::Request(id.clone()));
        let settled = tokio::select! {
            biased;
            response = handle.await_response() => response.map_err(|error| match error {
                // rmcp's timer (progress resets it): either the operation's deadline passed
                // (rmcp was given what was left of it) or no progress came within the
                // caller's per-report timeout; the error names the one that did.
                ServiceError::Timeout { .. } => {
                    let passed = if owning.remaining() < RMCP_TIMER_SLACK {
                        owning.budget
                    } else {
                        context.timeout
                    };
                    self.timeout(label, passed)
                }
                error => self.map_error(label, error),
            }),
            () = &mut deadline => {
                if resets.is_none() {
                    self.notify_cancelled(id, "the request timed out").await;
                }
                Err(self.timeout(label, owning.budget))
            }
            stop = owning.stopped(context) => {
                // On HTTP the dropped response future closes the request's stream; the
                // notification covers stdio and legacy peers.
                self.notify_cancelled(id, stop.reason()).await;
                Err(self.stopped(label, stop))
            }
            () = self.lost.cancelled() => Err(CallError::ConnectionLost {
                alias: self.alias.clone(),
                tool: label.to_owned(),
                detail: self.closed("the transport closed"),
            }),
        };
        owed.paid();
        settled
    }

    /// Tells the server to stop working on request `id`, bounded: a server that stops
    /// reading does not hold the caller.
    async fn notify_cancelled(&self, id: rmcp::model::RequestId, reason: &str) {
        let notify = self.peer.notify_cancelled(CancelledNotificationParam::new(
            Some(id),
            Some(reason.to_owned()),
        ));
        let _ = tokio::time::timeout(NOTIFY_BOUND, notify).await;
    }

    /// The error of an operation stopped before it ended.
    fn stopped(&self, label: &str, stop: Stop) -> CallError {
        match stop {
            Stop::Caller => CallError::Cancelled {
                alias: self.alias.clone(),
                tool: label.to_owned(),
            },
            Stop::Closing => CallError::Closing {
                alias: self.alias.clone(),
                reason: "the server is closing".into(),
            },
        }
    }

    fn timeout(&self, label: &str, timeout: Duration) -> CallError {
        CallError::Timeout {
            alias: self.alias.clone(),
            tool: label.to_owned(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn protocol(&self, label: &str, detail: &str) -> CallError {
        CallError::Protocol {
            alias: self.alias.clone(),
            tool: label.to_owned(),
            detail: detail.to_owned(),
        }
    }

    fn map_error(&self, label: &str, error: ServiceError) -> CallError {
        let alias = self.alias.clone();
        let tool = label.to_owned();
        match error {
            ServiceError::McpError(data) => CallError::Remote {
                alias,
                tool,
                code: data.code.0,
                message: data.message.to_string(),
                data: data.data,
            },
            ServiceError::Timeout { timeout } => CallError::Timeout {
                alias,
                tool,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            },
            ServiceError::Cancelled { .. } => CallError::Cancelled { alias, tool },
            ServiceError::TransportClosed => {
                self.transport_failed();
                CallError::ConnectionLost {
                    alias,
                    tool,
                    detail: self.closed("the transport closed"),
                }
            }
            ServiceError::TransportSend(error) => {
                self.transport_failed();
                CallError::ConnectionLost {
                    alias,
                    tool,
                    // The transport error may carry the URL; only its innermost cause goes out.
                    detail: format!("the request could not be sent ({})", error_kind(&error)),
                }
            }
            other => CallError::Protocol {
                alias,
                tool,
                detail: other.to_string(),
            },
        }
    }

    /// A transport that cannot carry a request any more is a lost connection: say so on
    /// the shared token, so the attachment reconnects instead of failing every later call.
    /// This is how a dropped HTTP peer is noticed, since a stateless HTTP transport has no
    /// stream whose end would tell.
    fn transport_failed(&self) {
        self.lost.cancel();
    }
}

#[cfg(feature = "http")]
use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

fn error_kind(error: &(dyn std::error::Error + 'static)) -> String {
    // Walk to the innermost cause: the io error or the HTTP status, which carries no URL or
    // header. An authorization refusal carries the server's challenge header instead: it is
    // named in our words (the challenge only seeds a new authorization).
    let mut inner: &(dyn std::error::Error + 'static) = error;
    loop {
        if let Some(refusal) = refusal(inner) {
            return refusal.to_owned();
        }
        match inner.source() {
            Some(source) => inner = source,
            None => break,
        }
    }
    crate::redact::scrub_capped(&inner.to_string(), 512)
}

/// An HTTP server's refusal of the token, in our words (only an HTTP transport has one).
fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    #[cfg(feature = "http")]
    {
        if error.is::<AuthRequiredError>() {
            return Some("the server refused the token (HTTP 401)");
        }
        if error.is::<InsufficientScopeError>() {
            return Some("the server asked for more scope (HTTP 403)");
        }
    }
    let _ = error;
    None
}

#[cfg(test)]
mod tests;
