//! Requests on behalf of a caller: `tools/call`, `resources/read`, `prompts/get` and
//! `completion/complete`, each with a deadline, caller cancellation, progress routed to the
//! caller, connection loss, and multi-round-trip input (MRTR).
//!
//! The MRTR loop is ours rather than rmcp's `RunningService::call_tool` driver because the
//! interaction belongs to the caller that owns the operation, not to the connection: rmcp's
//! driver answers through the connection-wide `ClientHandler` and carries no deadline,
//! cancellation or progress routing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelTaskParams, CancelledNotificationParam,
    ClientRequest, CompleteRequest, CompleteRequestParams, CustomResult, GetExtensions,
    GetPromptRequest, GetPromptRequestParams, GetTaskParams, InputRequest, InputRequiredResult,
    InputResponses, ProgressToken, ReadResourceRequest, ReadResourceRequestParams,
    ReadResourceResponse, ServerResult, UpdateTaskParams,
};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::guard::CutReason;
use super::lines::Verbatim;
use crate::model::{
    CallError, Elicitation, ElicitationAnswer, Interaction, InteractionHandler, Operation,
    Progress, ProgressSink, ToolResult,
};

/// The request `_meta` key of the client's capabilities (2026-07-28).
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// How many `input_required` rounds one operation may take before it is abandoned.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;

/// How many times one Task is polled before it is cancelled as non-converging.
pub(crate) const MAX_TASK_POLLS: usize = 10_000;

/// How long a courtesy message (a cancellation) may take to hand over before it is dropped.
const NOTIFY_BOUND: Duration = Duration::from_secs(1);

/// How long `tasks/cancel` may take to be answered before the host stops waiting.
const TASK_CANCEL_BOUND: Duration = Duration::from_secs(2);

/// How long a call stopped by its session's closing may take to tell its server (a
/// cancellation, or a Task's cancel) before it is dropped.
pub(crate) const STOP_GRACE: Duration = NOTIFY_BOUND.saturating_add(TASK_CANCEL_BOUND);

/// How near the operation's deadline rmcp's own timer must fire to be taken as that
/// deadline (rather than a per-progress timeout): timers fire a millisecond or so late.
const RMCP_TIMER_SLACK: Duration = Duration::from_millis(20);

/// What is owed to a server when its caller drops a call before it settles.
enum Owed {
    /// `notifications/cancelled` for the request in flight.
    Request(rmcp::model::RequestId),
    /// `tasks/cancel` for the Task being followed.
    Task(String),
}

/// Sends what is owed if dropped unpaid: the call's future is the caller's own, so a caller
/// that stops waiting drops the request mid-flight, and the server must still be told. Sent
/// from a task of its own, briefly bounded.
struct Courtesy {
    peer: Peer<RoleClient>,
    owed: Option<Owed>,
}

impl Courtesy {
    fn owe(peer: &Peer<RoleClient>, owed: Owed) -> Self {
        Self {
            peer: peer.clone(),
            owed: Some(owed),
        }
    }

    /// The call settled: nothing is owed.
    fn paid(&mut self) {
        self.owed = None;
    }
}

impl Drop for Courtesy {
    fn drop(&mut self) {
        let Some(owed) = self.owed.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            match owed {
                Owed::Request(id) => {
                    let notify = peer.notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the caller stopped waiting".into()),
                    ));
                    let _ = tokio::time::timeout(NOTIFY_BOUND, notify).await;
                }
                Owed::Task(task_id) => {
                    let cancel = peer.cancel_task(CancelTaskParams::new(task_id));
                    let _ = tokio::time::timeout(TASK_CANCEL_BOUND, cancel).await;
                }
            }
        });
    }
}

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

/// The one deadline of an operation (§mcp-host-composition: MRTR rounds, the request
/// timeout, cancellation and a Task's end are one lifecycle): every round, the creation of a
/// Task and its polling, and every interaction the operation waits on end by this instant.
/// Progress moves it only when the caller asked for that, and never past the caller's
/// maximum.
///
/// The session's closing is part of the same lifecycle: a drain past its bound, a disable,
/// a definition swap or a shutdown stops the operation as its caller would, so the server is
/// told (`notifications/cancelled`, `tasks/cancel`) before the connection closes.
#[derive(Clone, Copy)]
struct Owning<'a> {
    at: tokio::time::Instant,
    /// What the caller gave (or the default), for the error that says it passed.
    budget: Duration,
    /// Cancelled when the session closes under the operation.
    closing: &'a CancellationToken,
}

/// Who stopped an operation before it ended.
#[derive(Clone, Copy)]
enum Stop {
    /// Its caller cancelled it.
    Caller,
    /// The session closes: a drain past its bound, a disable, a swap or a shutdown.
    Closing,
}

impl Stop {
    /// What the server is told.
    fn reason(self) -> &'static str {
        match self {
            Self::Caller => "cancelled by the caller",
            Self::Closing => "the client is closing the connection",
        }
    }
}

impl<'a> Owning<'a> {
    fn of(context: &CallContext, closing: &'a CancellationToken) -> Self {
        let budget = context
            .reset_on_progress
            .map_or(context.timeout, |max_total| max_total.max(context.timeout));
        Self {
            at: tokio::time::Instant::now() + budget,
            budget,
            closing,
        }
    }

    fn remaining(&self) -> Duration {
        self.at
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// Completes when the caller cancels or the session closes, saying which.
    async fn stopped(&self, context: &CallContext) -> Stop {
        tokio::select! {
            () = context.cancelled() => Stop::Caller,
            () = self.closing.cancelled() => Stop::Closing,
        }
    }
}

/// Progress sinks by the progress token of the request that owns them.
#[derive(Default)]
pub(crate) struct ProgressRoutes(Mutex<Routes>);

#[derive(Default)]
struct Routes {
    sinks: HashMap<ProgressToken, ProgressSink>,
    /// Reports that arrived before their route: rmcp picks a request's progress token as it
    /// sends the request, so the route can only be made once the request is on its way, and a
    /// fast server's first report may be read before that. Kept, oldest first, until their
    /// route is made; at most [`EARLY_REPORTS`] (the oldest go first), since a server may
    /// report progress on a request whose caller asked for none.
    early: std::collections::VecDeque<(ProgressToken, Progress)>,
}

/// How many reports without a route are kept for a route about to be made.
const EARLY_REPORTS: usize = 64;

impl ProgressRoutes {
    /// Delivers a progress notification to the caller that owns its token; keeps it for a
    /// while when that route is not made yet.
    pub(crate) fn deliver(&self, token: &ProgressToken, mut progress: Progress) {
        // The server's words reach the caller: scrubbed and bounded like any.
        progress.message = progress
            .message
            .map(|message| crate::redact::scrub_capped(&message, crate::redact::SHOWN_CHARS));
        let sink = {
            let Ok(mut routes) = self.0.lock() else {
                return;
            };
            match routes.sinks.get(token) {
                Some(sink) => sink.clone(),
                None => {
                    if routes.early.len() == EARLY_REPORTS {
                        routes.early.pop_front();
                    }
                    routes.early.push_back((token.clone(), progress));
                    return;
                }
            }
        };
        sink(progress);
    }

    /// Makes the route, handing it first the reports that arrived before it, in order (under
    /// the lock, so a report read meanwhile comes after them).
    fn insert(&self, token: ProgressToken, sink: ProgressSink) {
        if let Ok(mut routes) = self.0.lock() {
            let mut kept = std::collections::VecDeque::with_capacity(routes.early.len());
            for (early, progress) in std::mem::take(&mut routes.early) {
                if early == token {
                    sink(progress);
                } else {
                    kept.push_back((early, progress));
                }
            }
            routes.early = kept;
            routes.sinks.insert(token, sink);
        }
    }

    fn remove(&self, token: &ProgressToken) {
        if let Ok(mut routes) = self.0.lock() {
            routes.sinks.remove(token);
        }
    }
}

/// Removes a progress route when the request that owns it settles, however it settles.
struct RouteGuard<'a> {
    routes: &'a ProgressRoutes,
    token: Option<ProgressToken>,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.routes.remove(&token);
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
    /// Why the host cut the connection, when it did: what a call lost with it is told.
    cut: CutReason,
    /// A legacy server's callers in flight, whose interaction its questions go to.
    askers: Option<Arc<super::Askers>>,
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
            cut,
            askers,
        }
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
        let (mut responses, mut state): (Option<InputResponses>, Option<String>) =
            match &context.relay {
                Some(relay) => (
                    relay
                        .input_responses
                        .as_ref()
                        .map(|answers| answers.clone().into_iter().collect()),
                    relay.request_state.clone(),
                ),
                None => (None, None),
            };
        let deadline = Owning::of(context, closing);
        let mut state_only_rounds = 0u32;
        for round in 0..MAX_INPUT_ROUNDS {
            // Only a read that answers no input round may come from the cache.
            let plain = responses.is_none() && state.is_none();
            let request = self.build(operation, responses.take(), state.take(), &label)?;
            let answer = match (&request, round) {
                // A plain read goes through rmcp's response cache (ttlMs, cacheScope). Boxed,
                // like the Task loop below: the future of every call is as large as its
                // largest branch, and it is moved at each layer between the caller and here.
                (ClientRequest::ReadResourceRequest(read), 0) if plain => {
                    Box::pin(self.read_cached(read.params.clone(), context, deadline, &label))
                        .await?
                }
                _ => self.send(request, context, deadline, &label).await?,
            };
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
                    let had_requests = input
                        .input_requests
                        .as_ref()
                        .is_some_and(|requests| !requests.is_empty());
                    if !had_requests && input.request_state.is_none() {
                        return Err(self.protocol(
                            &label,
                            "input_required carried neither input requests nor requestState",
                        ));
                    }
                    let (answers, request_state) =
                        self.fulfil(input, context, deadline, &label).await?;
                    if had_requests {
                        state_only_rounds = 0;
                    } else {
                        // A server that only wants its state back is polled gently.
                        let millis = (50u64 << state_only_rounds.min(3)).min(250);
                        state_only_rounds += 1;
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(millis)) => {}
                            () = tokio::time::sleep_until(deadline.at) => {
                                return Err(self.timeout(&label, deadline.budget));
                            }
                            stop = deadline.stopped(context) => {
                                return Err(self.stopped(&label, stop));
                            }
                        }
                    }
                    responses = (!answers.is_empty()).then_some(answers);
                    state = request_state;
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

    /// Follows the Task a call became to its end; a caller that stops waiting (drops the
    /// call) still has the Task cancelled.
    async fn follow(
        &self,
        operation: &Operation,
        task: Value,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let mut owed = task["taskId"]
            .as_str()
            .map(|id| Courtesy::owe(&self.peer, Owed::Task(id.to_owned())));
        let result = self
            .drive_task(operation, task, context, owning, label)
            .await;
        if let Some(owed) = owed.as_mut() {
            owed.paid();
        }
        result
    }

    /// Follows an unsolicited Task to its end (§mcp-tasks): polls `tasks/get` at each
    /// current `pollIntervalMs` under the operation's one deadline, routes task input through
    /// the caller's interaction and `tasks/update`, and settles with the terminal result or
    /// error. Caller cancellation sends `tasks/cancel` before the call settles as cancelled.
    async fn drive_task(
        &self,
        operation: &Operation,
        mut task: Value,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ToolResult, CallError> {
        let Some(task_id) = task["taskId"].as_str().map(str::to_owned) else {
            return Err(self.protocol(label, "the Task carries no taskId"));
        };
        // The operation's deadline, not a fresh one: the request that created the Task has
        // already spent part of it.
        let deadline = owning.at;
        let mut answered: std::collections::BTreeSet<String> = Default::default();
        for _poll in 0..MAX_TASK_POLLS {
            match task["status"].as_str().unwrap_or("working") {
                "completed" => {
                    // The originating tool result, as the server wrote it.
                    let Some(result) = task.get_mut("result").map(Value::take) else {
                        return Err(self.protocol(label, "the completed Task carries no result"));
                    };
                    return self.complete(
                        operation,
                        ServerResult::CustomResult(CustomResult(result)),
                        label,
                    );
                }
                "failed" => {
                    let error = &task["error"];
                    return Err(CallError::Remote {
                        alias: self.alias.clone(),
                        tool: label.to_owned(),
                        code: error["code"]
                            .as_i64()
                            .and_then(|code| i32::try_from(code).ok())
                            // A failure without a code is an internal error.
                            .unwrap_or(rmcp::model::ErrorCode::INTERNAL_ERROR.0),
                        message: error["message"]
                            .as_str()
                            .unwrap_or("the Task failed")
                            .to_owned(),
                        data: error.get("data").cloned(),
                    });
                }
                "cancelled" => {
                    return Err(CallError::Cancelled {
                        alias: self.alias.clone(),
                        tool: label.to_owned(),
                    });
                }
                "input_required" => {
                    // Each input key is answered once, in one interaction per observed set.
                    let requests: InputRequiredResult = serde_json::from_value(json!({
                        "resultType": "input_required",
                        "inputRequests": task["inputRequests"].clone(),
                    }))
                    .map_err(|error| {
                        self.protocol(
                            label,
                            &format!("the Task's input requests are invalid: {error}"),
                        )
                    })?;
                    let mut fresh = requests.clone();
                    if let Some(pending) = fresh.input_requests.as_mut() {
                        pending.retain(|key, _| !answered.contains(key));
                    }
                    if fresh.input_requests.as_ref().is_some_and(|r| !r.is_empty()) {
                        let asked = self.fulfil(fresh, context, owning, label).await;
                        let (responses, _) = match asked {
                            Ok(answered) => answered,
                            Err(error) => {
                                // The Task is the server's work in flight: it is told.
                                self.cancel_task(&task_id).await;
                                return Err(error);
                            }
                        };
                        answered.extend(responses.keys().cloned());
                        let update: UpdateTaskParams = serde_json::from_value(json!({
                            "taskId": task_id,
                            "inputResponses": responses,
                        }))
                        .map_err(|error| self.protocol(label, &error.to_string()))?;
                        if let Err(error) = self
                            .bounded(owning, label, self.peer.update_task(update))
                            .await
                        {
                            if matches!(error, CallError::Timeout { .. }) {
                                self.cancel_task(&task_id).await;
                            }
                            return Err(error);
                        }
                    }
                }
                _ => {}
            }
            let interval = task["pollIntervalMs"]
                .as_u64()
                .unwrap_or(500)
                .clamp(10, 30_000);
            let sleep = tokio::time::sleep(Duration::from_millis(interval));
            tokio::select! {
                () = sleep => {}
                stop = owning.stopped(context) => {
                    self.cancel_task(&task_id).await;
                    return Err(self.stopped(label, stop));
                }
                () = tokio::time::sleep_until(deadline) => {
                    self.cancel_task(&task_id).await;
                    return Err(self.timeout(label, owning.budget));
                }
                () = self.lost.cancelled() => {
                    return Err(CallError::ConnectionLost {
                        alias: self.alias.clone(),
                        tool: label.to_owned(),
                        detail: self.closed("the transport closed while a Task was running"),
                    });
                }
            }
            let polled = tokio::select! {
                polled = self.bounded(
                    owning,
                    label,
                    self.peer.get_task(GetTaskParams::new(task_id.clone())),
                ) => match polled {
                    Ok(polled) => polled,
                    Err(error) => {
                        if matches!(error, CallError::Timeout { .. }) {
                            self.cancel_task(&task_id).await;
                        }
                        return Err(error);
                    }
                },
                stop = owning.stopped(context) => {
                    self.cancel_task(&task_id).await;
                    return Err(self.stopped(label, stop));
                }
            };
            task = serde_json::to_value(&polled).unwrap_or_default();
        }
        self.cancel_task(&task_id).await;
        Err(self.protocol(
            label,
            &format!("the Task did not finish within {MAX_TASK_POLLS} polls and was cancelled"),
        ))
    }

    /// Runs one Task request, bounded by the operation's deadline.
    async fn bounded<T>(
        &self,
        deadline: Owning<'_>,
        label: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout_at(deadline.at, request).await {
            Ok(result) => result.map_err(|error| self.map_error(label, error)),
            Err(_) => Err(self.timeout(label, deadline.budget)),
        }
    }

    /// Best effort, briefly bounded: the caller is leaving either way.
    async fn cancel_task(&self, task_id: &str) {
        let cancel = self
            .peer
            .cancel_task(CancelTaskParams::new(task_id.to_owned()));
        let _ = tokio::time::timeout(TASK_CANCEL_BOUND, cancel).await;
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
        if let Some(capabilities) = context.client_capabilities.clone() {
            let mut meta = serde_json::Map::new();
            meta.insert(CLIENT_CAPABILITIES.into(), Value::Object(capabilities));
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

    /// `resources/read` through rmcp's cache, with the same deadline, cancellation and loss
    /// handling as any request (dropping the request future cancels it on the wire).
    async fn read_cached(
        &self,
        params: ReadResourceRequestParams,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<ServerResult, CallError> {
        let uri = params.uri.clone();
        let read = tokio::time::timeout_at(owning.at, self.peer.read_resource_once(params));
        tokio::select! {
            biased;
            read = read => match read {
                Ok(Ok(ReadResourceResponse::Complete(result))) => {
                    // Follow updates of what was read, so its cache entry is invalidated.
                    if let Some(subscribed) = &self.subscribed {
                        subscribed.send_if_modified(|uris| uris.insert(uri));
                    }
                    Ok(ServerResult::ReadResourceResult(result))
                }
                Ok(Ok(ReadResourceResponse::InputRequired(input))) => {
                    Ok(ServerResult::InputRequiredResult(input))
                }
                Ok(Ok(_)) => Err(self.protocol(label, "the answer does not fit the request")),
                Ok(Err(error)) => Err(self.map_error(label, error)),
                Err(_) => Err(self.timeout(label, owning.budget)),
            },
            stop = owning.stopped(context) => Err(self.stopped(label, stop)),
            () = self.lost.cancelled() => Err(CallError::ConnectionLost {
                alias: self.alias.clone(),
                tool: label.to_owned(),
                detail: self.closed("the transport closed"),
            }),
        }
    }

    /// Turns every input request of one result into one interaction, and its answers into
    /// the `inputResponses` of the retry. Families this host does not support (sampling,
    /// roots) fail before any interaction.
    async fn fulfil(
        &self,
        input: InputRequiredResult,
        context: &CallContext,
        owning: Owning<'_>,
        label: &str,
    ) -> Result<(InputResponses, Option<String>), CallError> {
        let mut requests = BTreeMap::new();
        for (key, request) in input.input_requests.unwrap_or_default() {
            let elicitation =
                elicitation_of(&key, request).map_err(|detail| self.protocol(label, &detail))?;
            requests.insert(key, elicitation);
        }
        let mut answers = match (&context.interaction, requests.is_empty()) {
            (_, true) => BTreeMap::new(),
            (Some(handler), false) => {
                let interaction = Interaction {
                    server: self.alias.clone(),
                    operation: label.to_owned(),
                    requests: requests
                        .iter()
                        .map(|(key, request)| (key.clone(), request.shown()))
                        .collect(),
                };
                tokio::select! {
                    answers = handler(interaction) => answers,
                    () = tokio::time::sleep_until(owning.at) => {
                        return Err(self.timeout(label, owning.budget));
                    }
                    stop = owning.stopped(context) => {
                        return Err(self.stopped(label, stop));
                    }
                }
            }
            // No one to ask: decline, which the server treats as a standard answer.
            (None, false) => requests
                .keys()
                .map(|key| (key.clone(), ElicitationAnswer::Decline))
                .collect(),
        };
        let mut responses = InputResponses::new();
        for (key, elicitation) in &requests {
            let answer = answers.remove(key).unwrap_or(ElicitationAnswer::Cancel);
            validate(elicitation, &answer).map_err(|detail| CallError::Interaction {
                alias: self.alias.clone(),
                tool: label.to_owned(),
                detail: format!("the answer to \"{key}\" {detail}"),
            })?;
            responses.insert(key.clone(), json!(answer));
        }
        Ok((responses, input.request_state))
    }

    /// The operation's result: as the server wrote it when it came verbatim (or rmcp could
    /// not type it), else rmcp's typed result written out; checked only for what the host
    /// itself reads of it and what the specification forbids, never rebuilt.
    fn complete(
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

/// Reads an elicitation's params (`mode`, `message`, `requestedSchema`, `url`, …).
/// What the caller is asked for one input request of a server, or why the host cannot
/// ask it: only elicitations are offered (no sampling, no roots).
fn elicitation_of(key: &str, request: InputRequest) -> Result<Elicitation, String> {
    match request {
        InputRequest::Elicitation(request) => {
            let params = serde_json::to_value(&request)
                .ok()
                .and_then(|value| value.get("params").cloned())
                .unwrap_or(Value::Null);
            elicitation_from(&params).ok_or_else(|| {
                format!("input request \"{key}\" is an elicitation this host cannot read")
            })
        }
        InputRequest::CreateMessage(_) => Err(format!(
            "input request \"{key}\" asks for sampling, which this host does not offer"
        )),
        InputRequest::ListRoots(_) => Err(format!(
            "input request \"{key}\" asks for roots, which this host does not offer"
        )),
        _ => Err(format!(
            "input request \"{key}\" is of a kind this host does not know"
        )),
    }
}

pub(crate) fn elicitation_from(params: &Value) -> Option<Elicitation> {
    let message = params.get("message")?.as_str()?.to_owned();
    match params.get("mode").and_then(Value::as_str).unwrap_or("form") {
        "form" => Some(Elicitation::Form {
            message,
            schema: params
                .get("requestedSchema")
                .cloned()
                .unwrap_or(Value::Null),
        }),
        "url" => Some(Elicitation::Url {
            message,
            url: params.get("url")?.as_str()?.to_owned(),
            elicitation_id: params
                .get("elicitationId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }),
        _ => None,
    }
}

/// Checks an answer against what was asked: a form's content against its flat schema
/// (required properties, primitive types, enums), and no content for a URL.
pub(crate) fn validate(
    elicitation: &Elicitation,
    answer: &ElicitationAnswer,
) -> Result<(), String> {
    let ElicitationAnswer::Accept { content } = answer else {
        return Ok(());
    };
    match elicitation {
        Elicitation::Url { .. } => match content {
            None => Ok(()),
            Some(_) => {
                Err("accepts a URL elicitation with content, which it must not carry".into())
            }
        },
        Elicitation::Form { schema, .. } => {
            let empty = serde_json::Map::new();
            let content = content.as_ref().unwrap_or(&empty);
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if !content.contains_key(name) {
                        return Err(format!("lacks the required field \"{name}\""));
                    }
                }
            }
            for (name, value) in content {
                let Some(property) = properties.and_then(|p| p.get(name)) else {
                    return Err(format!(
                        "has the field \"{name}\", which the form does not ask for"
                    ));
                };
                let kind = property
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string");
                let fits = match kind {
                    "string" => value.is_string(),
                    "number" => value.is_number(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "boolean" => value.is_boolean(),
                    "array" => value.is_array(),
                    _ => true,
                };
                if !fits {
                    return Err(format!("gives \"{name}\" a value that is not a {kind}"));
                }
                if let Some(options) = property.get("enum").and_then(Value::as_array)
                    && !options.contains(value)
                {
                    return Err(format!("gives \"{name}\" a value outside its enum"));
                }
            }
            Ok(())
        }
    }
}

/// Whether `result` can be handed on as `operation`'s result, and for a tool result its
/// `isError`. Only what the host reads and what the specification forbids is checked: the
/// result is a JSON object of a completed request, its members the host reads have their
/// types, and a tool result holds no standalone `blob` content block (§mcp-result-content:
/// blobs ride inside embedded resources). Everything else — fields and content block types
/// this host does not know — passes untouched.
fn check_result(operation: &Operation, result: &Value) -> Result<bool, String> {
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
fn invalid_content(index: usize, block: &Value) -> Option<String> {
    match block.get("type").and_then(Value::as_str) {
        None => Some(format!("content block {index} has no \"type\" string")),
        Some("blob") => Some(
            "the result holds a standalone blob content block, which is not valid tools/call content (blobs ride inside embedded resources)".into(),
        ),
        Some(_) => None,
    }
}

fn error_kind(error: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    // Walk to the innermost cause: the io error or the HTTP status, which carries no URL or
    // header. An authorization refusal carries the server's challenge header instead: it is
    // named in our words (the challenge only seeds a new authorization).
    let mut inner: &(dyn std::error::Error + 'static) = error;
    loop {
        if inner.is::<AuthRequiredError>() {
            return "the server refused the token (HTTP 401)".to_owned();
        }
        if inner.is::<InsufficientScopeError>() {
            return "the server asked for more scope (HTTP 403)".to_owned();
        }
        match inner.source() {
            Some(source) => inner = source,
            None => break,
        }
    }
    crate::redact::scrub_capped(&inner.to_string(), 512)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_token_is_named_without_the_servers_challenge() {
        use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
        #[derive(Debug)]
        struct Outer(Box<dyn std::error::Error + Send + Sync>);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "transport: {}", self.0)
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(self.0.as_ref())
            }
        }
        let challenge = "Bearer error=\"invalid_token\", error_description=\"SERVER-TEXT\"";
        let refused = Outer(Box::new(AuthRequiredError::new(challenge.into())));
        assert_eq!(
            error_kind(&refused),
            "the server refused the token (HTTP 401)"
        );
        let scope = Outer(Box::new(InsufficientScopeError::new(
            challenge.into(),
            None,
        )));
        assert_eq!(
            error_kind(&scope),
            "the server asked for more scope (HTTP 403)"
        );
        let long = Outer(Box::new(std::io::Error::other("x".repeat(10_000))));
        assert!(error_kind(&long).len() < 1_000);
    }

    #[test]
    fn a_progress_route_lives_exactly_as_long_as_its_request() {
        let routes = ProgressRoutes::default();
        let token = ProgressToken(rmcp::model::NumberOrString::Number(7));
        let seen = Arc::new(Mutex::new(0));
        let counter = seen.clone();
        let sink: ProgressSink = Arc::new(move |_| {
            if let Ok(mut seen) = counter.lock() {
                *seen += 1;
            }
        });
        let report = || Progress {
            progress: 1.0,
            total: None,
            message: None,
        };
        {
            routes.insert(token.clone(), sink);
            let _guard = RouteGuard {
                routes: &routes,
                token: Some(token.clone()),
            };
            routes.deliver(&token, report());
        }
        // Settled: the route is gone, and a late report reaches nobody.
        routes.deliver(&token, report());
        assert_eq!(*seen.lock().expect("lock"), 1);
        assert!(
            routes.0.lock().expect("lock").sinks.is_empty(),
            "the route leaked"
        );
    }

    #[test]
    fn a_report_read_before_its_route_is_made_reaches_it_first_and_in_order() {
        let routes = ProgressRoutes::default();
        let token = |n| ProgressToken(rmcp::model::NumberOrString::Number(n));
        let report = |progress| Progress {
            progress,
            total: None,
            message: None,
        };
        // Reports for a request whose route is not made yet, and for one nobody routes.
        routes.deliver(&token(1), report(1.0));
        routes.deliver(&token(2), report(9.0));
        routes.deliver(&token(1), report(2.0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        routes.insert(
            token(1),
            Arc::new(move |progress: Progress| {
                if let Ok(mut seen) = into.lock() {
                    seen.push(progress.progress);
                }
            }),
        );
        routes.deliver(&token(1), report(3.0));
        assert_eq!(*seen.lock().expect("lock"), vec![1.0, 2.0, 3.0]);
        // What nobody claims is bounded: the oldest go first.
        for n in 0..(EARLY_REPORTS as i64 * 2) {
            routes.deliver(&token(100 + n), report(1.0));
        }
        let early = &routes.0.lock().expect("lock").early;
        assert_eq!(early.len(), EARLY_REPORTS);
        assert_eq!(
            early.front().map(|(t, _)| t.clone()),
            Some(token(100 + EARLY_REPORTS as i64))
        );
    }

    fn form() -> Elicitation {
        Elicitation::Form {
            message: "who?".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer"},
                    "color": {"type": "string", "enum": ["red", "blue"]}
                },
                "required": ["name"]
            }),
        }
    }

    fn accept(content: Value) -> ElicitationAnswer {
        ElicitationAnswer::Accept {
            content: content.as_object().cloned(),
        }
    }

    #[test]
    fn form_answers_are_checked_against_the_schema() {
        assert!(validate(&form(), &accept(json!({"name": "ada", "age": 36}))).is_ok());
        assert!(validate(&form(), &ElicitationAnswer::Decline).is_ok());
        let missing = validate(&form(), &accept(json!({"age": 3}))).unwrap_err();
        assert!(missing.contains("\"name\""), "{missing}");
        let wrong = validate(&form(), &accept(json!({"name": "a", "age": "old"}))).unwrap_err();
        assert!(wrong.contains("integer"), "{wrong}");
        let outside =
            validate(&form(), &accept(json!({"name": "a", "color": "green"}))).unwrap_err();
        assert!(outside.contains("enum"), "{outside}");
        let extra = validate(&form(), &accept(json!({"name": "a", "x": 1}))).unwrap_err();
        assert!(extra.contains("\"x\""), "{extra}");
    }

    #[test]
    fn every_field_type_of_a_form_is_checked() {
        let typed = Elicitation::Form {
            message: "values".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "n": {"type": "number"},
                    "i": {"type": "integer"},
                    "b": {"type": "boolean"},
                    "a": {"type": "array"}
                }
            }),
        };
        let fits = json!({"n": 1.5, "i": -3, "b": true, "a": ["x"]});
        assert_eq!(validate(&typed, &accept(fits)), Ok(()));
        // Unsigned integers past i64 are integers too.
        assert_eq!(validate(&typed, &accept(json!({"i": u64::MAX}))), Ok(()));
        for (field, wrong, kind) in [
            ("n", json!("1.5"), "number"),
            ("i", json!(1.5), "integer"),
            ("b", json!("yes"), "boolean"),
            ("a", json!("x"), "array"),
        ] {
            let refused = validate(&typed, &accept(json!({ field: wrong })));
            assert_eq!(
                refused,
                Err(format!("gives \"{field}\" a value that is not a {kind}"))
            );
        }
    }

    #[test]
    fn an_error_is_told_by_its_innermost_cause() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("request to https://user:secret@example.test/mcp failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let error = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(error_kind(&error), "connection refused");
    }

    #[test]
    fn only_elicitations_are_asked_of_the_caller() {
        let request = |value: Value| -> InputRequest {
            serde_json::from_value(value).expect("an input request")
        };
        let asked = elicitation_of(
            "who",
            request(json!({
                "method": "elicitation/create",
                "params": {"message": "who?", "requestedSchema": {"type": "object", "properties": {}}}
            })),
        );
        assert!(matches!(asked, Ok(Elicitation::Form { .. })), "{asked:?}");
        let sampling = elicitation_of(
            "think",
            request(json!({
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 10}
            })),
        );
        assert_eq!(
            sampling.err().as_deref(),
            Some("input request \"think\" asks for sampling, which this host does not offer")
        );
        let roots = elicitation_of("where", request(json!({"method": "roots/list"})));
        assert_eq!(
            roots.err().as_deref(),
            Some("input request \"where\" asks for roots, which this host does not offer")
        );
    }

    #[test]
    fn url_elicitations_read_and_reject_content() {
        let url = elicitation_from(&json!({
            "mode": "url", "message": "log in", "url": "https://example.test/a", "elicitationId": "e1"
        }))
        .expect("a url elicitation");
        assert!(
            matches!(url, Elicitation::Url { ref elicitation_id, .. } if elicitation_id == "e1")
        );
        assert!(validate(&url, &ElicitationAnswer::Accept { content: None }).is_ok());
        assert!(validate(&url, &accept(json!({"a": 1}))).is_err());
        assert!(elicitation_from(&json!({"mode": "telepathy", "message": "x"})).is_none());
    }

    #[test]
    fn answers_serialize_as_the_standard_actions() {
        assert_eq!(
            json!(ElicitationAnswer::Decline),
            json!({"action": "decline"})
        );
        assert_eq!(
            json!(ElicitationAnswer::Cancel),
            json!({"action": "cancel"})
        );
        assert_eq!(
            json!(accept(json!({"name": "ada"}))),
            json!({"action": "accept", "content": {"name": "ada"}})
        );
    }

    #[test]
    fn a_result_is_checked_for_what_the_host_reads_and_handed_on_otherwise() {
        let call = Operation::CallTool {
            name: "t".into(),
            arguments: serde_json::Map::new(),
        };
        // Unknown content block types, unknown fields and a missing content pass.
        let odd = json!({
            "content": [{"type": "hologram", "frames": 3}, {"type": "text", "text": "x", "x": 1}],
            "x-vendor": {"trace": "abc"},
            "isError": true,
        });
        assert_eq!(check_result(&call, &odd), Ok(true));
        assert_eq!(check_result(&call, &json!({})), Ok(false));
        assert_eq!(
            check_result(&call, &json!({"content": [], "resultType": "complete"})),
            Ok(false)
        );
        // What the specification forbids, and what the host reads, is refused by name.
        let refused = |result: Value| check_result(&call, &result).unwrap_err();
        assert!(
            refused(json!({"content": [{"type": "blob", "blob": "AA=="}]}))
                .contains("standalone blob")
        );
        assert!(
            refused(json!({"content": [{"text": "x"}]}))
                .contains("content block 0 has no \"type\"")
        );
        assert!(refused(json!({"content": {"type": "text"}})).contains("\"content\" is an object"));
        assert!(refused(json!({"isError": "yes"})).contains("\"isError\" is a string"));
        assert!(refused(json!({"resultType": "later"})).contains("resultType \"later\""));
        assert!(refused(json!([1])).contains("an array, not a JSON object"));
        // The other operations' results need the member the host hands on.
        let read = Operation::ReadResource { uri: "u".into() };
        assert_eq!(
            check_result(&read, &json!({"contents": [], "x": 1})),
            Ok(false)
        );
        assert!(check_result(&read, &json!({})).is_err());
        let prompt = Operation::GetPrompt {
            name: "p".into(),
            arguments: serde_json::Map::new(),
        };
        assert!(check_result(&prompt, &json!({"messages": {}})).is_err());
    }
}
