//! The gateway: one workspace's merged namespace served as one MCP server.
//!
//! [`Gateway`] is an rmcp [`ServerHandler`] over a [`Workspace`] handle. It answers from the
//! workspace's published snapshot (never from a server directly) and routes every request
//! through the host's call path, so each bound, deadline and redaction of the host applies
//! to the gateway's clients too. It speaks 2026-07-28 (stateless, `server/discover`,
//! `subscriptions/listen`, caching hints) and 2025-11-25 (`initialize`, sessions).
//!
//! **Names.** Tools and prompts of every ready server are served as `<server>_<name>`:
//! an alias never holds `_` (aliases are `[a-z][a-z0-9-]*`), so the first `_` always splits
//! a served name back into its server and its own name, whatever the name holds.
//! [`Naming::Unprefixed`] serves one server's names as they are, and only that server.
//! Resources keep their URIs, each listed with its server in `_meta` ([`SERVER_META`]); a
//! read goes to the one server that claims the URI (lists it, or has a template that expands
//! to it), and a URI several servers claim is refused unless the request names its server.
//!
//! **Changes.** A server that goes `unavailable` leaves `tools/list` and comes back when it
//! is ready again; the gateway tells its clients with `notifications/tools/list_changed`
//! (and the prompts and resources counterparts) on each `subscriptions/listen` stream and
//! on each legacy session, whenever what it serves changed.
//!
//! **Input.** A 2026-07-28 client's `input_required` rounds are relayed both ways
//! unchanged: the server's `inputRequests` and `requestState` reach the client, and the
//! client's `inputResponses` and `requestState` reach the server ([`CallOptions::relay`]).
//! A 2025-11-25 client is asked through `elicitation/create` on its session, when it
//! declared elicitation, and the answers go back to the server. Progress and cancellation
//! pass through in both revisions.

mod admission;
mod bridge;
mod bytes;
mod http;
mod limits;
mod listener;
mod observed;
mod reply;
mod sealed;
mod status;
mod stdio;
mod uri_template;
mod verbatim;
mod view;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        ElicitRequestParams, GetPromptRequestParams, GetPromptResponse, Implementation,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
        SubscriptionFilter,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use self::observed::{Target, answer_of, tool_failed};
use self::verbatim::{Passing, Verbatim, is_modern, placeholder};
use self::view::{View, with_server};
use crate::host::{CallOptions, InputRelay, Workspace};
use crate::model::{
    CallError, Elicitation, ElicitationAnswer, Interaction, InteractionHandler, Operation, Progress,
};

pub use http::{HttpOptions, MIN_BEARER_BYTES, ServeError, serve_http};
pub use limits::{ClientLimits, LimitError};
pub use sealed::MIN_SESSION_KEY_BYTES;
pub use view::{Naming, route_name, served_name};

/// The character between a server's alias and a tool's or prompt's own name.
pub const SEPARATOR: char = '_';

/// The request `_meta` key of the client's capabilities (2026-07-28), relayed upstream.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The `_meta` key naming a resource's server: on each listed resource and template, on
/// every read's result, and on a read request that chooses its server.
pub const SERVER_META: &str = "plurnk/server";

/// One workspace served as one MCP server. Cheap to clone: every clone serves the same
/// workspace (rmcp makes one per HTTP session or stateless request).
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    workspace: Workspace,
    naming: Naming,
    /// The view of the last snapshot version asked for, rebuilt when the version moves.
    view: Mutex<Arc<View>>,
    /// What the status page counts per server (`/status`, HTTP only).
    status: status::StatusBook,
    /// Calls of 2026-07-28 clients held while their legacy upstream's question is answered.
    bridges: bridge::Bridges,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("workspace", &self.inner.workspace.name())
            .field("naming", &self.inner.naming)
            .finish()
    }
}

impl Gateway {
    /// A gateway over `workspace`, naming what it serves by `naming`.
    pub fn new(workspace: Workspace, naming: Naming) -> Self {
        let view = View::of(&workspace.snapshot(), &naming);
        Self {
            inner: Arc::new(Inner {
                workspace,
                naming,
                view: Mutex::new(Arc::new(view)),
                status: status::StatusBook::new(),
                bridges: bridge::Bridges::default(),
            }),
        }
    }

    /// The workspace it serves.
    pub fn workspace(&self) -> &Workspace {
        &self.inner.workspace
    }

    /// Serves one client over a byte stream pair (newline-delimited JSON-RPC) until it
    /// closes; `serve_io(tokio::io::stdin(), tokio::io::stdout())` is the stdio transport.
    pub async fn serve_io<R, W>(self, reader: R, writer: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        match Verbatim(self)
            .serve(stdio::Lifecycle::new(
                rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, writer),
            ))
            .await
        {
            Ok(running) => running
                .waiting()
                .await
                .map(drop)
                .map_err(|error| ServeError::Session(error.to_string())),
            // A client that leaves before its first message is no failure.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
            Err(error) => Err(ServeError::Session(error.to_string())),
        }
    }

    /// Call options that carry only the request's trace context (feature `otel`).
    fn traced(context: &RequestContext<RoleServer>) -> CallOptions {
        #[cfg(feature = "otel")]
        {
            CallOptions::default().with_parent(observed::parent_of(context))
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = context;
            CallOptions::default()
        }
    }

    fn view(&self) -> Arc<View> {
        let snapshot = self.inner.workspace.snapshot();
        let mut view = self
            .inner
            .view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if view.version != snapshot.version {
            *view = Arc::new(View::of(&snapshot, &self.inner.naming));
        }
        view.clone()
    }

    /// Waits until what the gateway serves changed, then says which lists did; `None` when
    /// the workspace is gone (the host shut down).
    async fn next_change(
        &self,
        watch: &mut crate::host::SnapshotWatch,
        seen: &mut Arc<View>,
    ) -> Option<[bool; 3]> {
        loop {
            let snapshot = watch.changed().await?;
            let next = Arc::new(View::of(&snapshot, &self.inner.naming));
            let changes = seen.changes(&next);
            *seen = next;
            if changes.iter().any(|changed| *changed) {
                return Some(changes);
            }
        }
    }

    fn not_found(&self, what: &str, name: &str) -> McpError {
        let hint = match &self.inner.naming {
            Naming::Prefixed => format!(
                "names are <server>{SEPARATOR}<name>; the list request names every one served"
            ),
            Naming::Unprefixed(alias) => {
                format!(
                    "this gateway serves server \"{alias}\" only; the list request names every one"
                )
            }
        };
        // The name is the client's text: quoted cut, never whole.
        let name = crate::config::shorten(name);
        McpError::invalid_params(format!("unknown {what} \"{name}\": {hint}"), None)
    }

    /// The call options of one request: its cancellation, its progress reports, and how its
    /// input rounds reach the client.
    fn options(
        &self,
        context: &RequestContext<RoleServer>,
        relay: InputRelay,
    ) -> (CallOptions, Option<ProgressForwarder>) {
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let forwarder = context
            .meta
            .get_progress_token()
            .map(|token| ProgressForwarder::start(context.peer.clone(), token));
        // The server asks only for what the client can give: a 2026-07-28 client's declared
        // capabilities as they are (it answers every round itself); a session's elicitation
        // only (the gateway asks it over the session, and can bridge nothing else).
        let client_capabilities = if modern {
            serde_json::to_value(&context.meta)
                .ok()
                .and_then(|meta| meta.get(CLIENT_CAPABILITIES)?.as_object().cloned())
                .unwrap_or_default()
        } else {
            let declared = context
                .peer
                .peer_info()
                .and_then(|info| serde_json::to_value(&info.capabilities).ok())
                .unwrap_or_default();
            declared
                .get("elicitation")
                .map(|elicitation| {
                    let mut only = serde_json::Map::new();
                    only.insert("elicitation".into(), elicitation.clone());
                    only
                })
                .unwrap_or_default()
        };
        let options = CallOptions {
            cancel: Some(context.ct.clone()),
            progress: forwarder.as_ref().map(ProgressForwarder::sink),
            relay: modern.then_some(relay),
            interaction: (!modern).then(|| ask_over_session(context.peer.clone())),
            client_capabilities: Some(client_capabilities),
            #[cfg(feature = "otel")]
            parent: observed::parent_of(context),
            ..CallOptions::default()
        };
        (options, forwarder)
    }
}

/// What an upstream answered a forwarded request.
enum Forwarded {
    /// It wants input first: the client answers and sends the request again.
    InputRequired(Value),
    /// Its result.
    Complete(Value),
}

impl Forwarded {
    /// As rmcp's response for the request: a placeholder of its type that carries the
    /// upstream's answer, sent on as the upstream wrote it (`verbatim.rs`).
    fn into_response<T, R>(
        self,
        input: impl FnOnce(rmcp::model::InputRequiredResult) -> R,
        done: impl FnOnce(T) -> R,
        what: Passing,
        modern: bool,
    ) -> Result<R, McpError>
    where
        T: serde::de::DeserializeOwned,
    {
        Ok(match self {
            Self::InputRequired(value) => input(placeholder(value, Passing::Input, modern)?),
            Self::Complete(value) => done(placeholder(value, what, modern)?),
        })
    }
}

impl Gateway {
    /// Runs `operation` on `alias` for this request: its cancellation, progress, input
    /// relay and capabilities; progress is all sent before the answer.
    async fn forward(
        &self,
        alias: &str,
        operation: Operation,
        relay: InputRelay,
        context: &RequestContext<RoleServer>,
    ) -> Result<Forwarded, CallError> {
        let (options, forwarder) = self.options(context, relay);
        let result = if is_modern(context) {
            // A legacy upstream's question is the client's `input_required` (`bridge.rs`).
            let bridged = self
                .inner
                .bridges
                .run(
                    &self.inner.workspace,
                    alias,
                    operation,
                    options,
                    context.ct.clone(),
                )
                .await;
            match bridged {
                bridge::Bridged::Asked(asked) => return Ok(Forwarded::InputRequired(asked)),
                bridge::Bridged::Done(result) => result,
            }
        } else {
            self.inner.workspace.run(alias, operation, options).await
        };
        if let Some(forwarder) = forwarder {
            forwarder.flush().await;
        }
        let failed = result.as_ref().map_or(true, |result| result.is_error);
        self.inner
            .status
            .count(&self.inner.workspace.snapshot(), alias, failed);
        let result = result?;
        Ok(if result.is_input_required() {
            Forwarded::InputRequired(result.result)
        } else {
            Forwarded::Complete(result.result)
        })
    }
}

fn relay_of(
    input_responses: Option<rmcp::model::InputResponses>,
    request_state: Option<String>,
) -> InputRelay {
    InputRelay {
        input_responses: input_responses.map(|answers| answers.into_iter().collect()),
        request_state,
    }
}

/// The server's progress reports of one request, sent on to the client in order and all
/// before the request's result.
struct ProgressForwarder {
    sender: tokio::sync::mpsc::UnboundedSender<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressForwarder {
    fn start(peer: rmcp::Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Self {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Progress>();
        let task = tokio::spawn(async move {
            while let Some(progress) = receiver.recv().await {
                let mut param = ProgressNotificationParam::new(token.clone(), progress.progress);
                if let Some(total) = progress.total {
                    param = param.with_total(total);
                }
                if let Some(message) = progress.message {
                    param = param.with_message(message);
                }
                if peer.notify_progress(param).await.is_err() {
                    break;
                }
            }
        });
        Self { sender, task }
    }

    fn sink(&self) -> crate::model::ProgressSink {
        let sender = self.sender.clone();
        Arc::new(move |progress| {
            let _ = sender.send(progress);
        })
    }

    /// Every report sent (briefly bounded: a client that stopped reading costs no more).
    async fn flush(self) {
        drop(self.sender);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

/// Asks a legacy client's session with `elicitation/create`, one request per input request,
/// when the client declared elicitation; declines otherwise.
fn ask_over_session(peer: rmcp::Peer<RoleServer>) -> InteractionHandler {
    Arc::new(move |interaction: Interaction| {
        let peer = peer.clone();
        Box::pin(async move {
            let can_elicit = peer
                .peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some());
            let mut answers = BTreeMap::new();
            for (key, request) in interaction.requests {
                let answer = if can_elicit {
                    elicit(&peer, request).await
                } else {
                    ElicitationAnswer::Decline
                };
                answers.insert(key, answer);
            }
            answers
        })
    })
}

/// How often a legacy session's list-change task checks that its client is still there.
const SESSION_CHECK: Duration = Duration::from_secs(5);

/// How long a legacy client's user has to answer one elicitation.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

async fn elicit(peer: &rmcp::Peer<RoleServer>, request: Elicitation) -> ElicitationAnswer {
    let params = match request {
        Elicitation::Form { message, schema } => {
            json!({"mode": "form", "message": message, "requestedSchema": schema})
        }
        Elicitation::Url {
            message,
            url,
            elicitation_id,
        } => {
            json!({"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id})
        }
    };
    let Ok(params) = serde_json::from_value::<ElicitRequestParams>(params) else {
        return ElicitationAnswer::Decline;
    };
    match peer
        .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
        .await
    {
        Ok(result) => match serde_json::to_value(&result) {
            Ok(answer) => match answer["action"].as_str() {
                Some("accept") => ElicitationAnswer::Accept {
                    content: answer.get("content").and_then(Value::as_object).cloned(),
                },
                Some("decline") => ElicitationAnswer::Decline,
                _ => ElicitationAnswer::Cancel,
            },
            Err(_) => ElicitationAnswer::Cancel,
        },
        Err(_) => ElicitationAnswer::Cancel,
    }
}

/// A host call error as the gateway's client sees it: a server's JSON-RPC error keeps its
/// code, message and data; a call the gateway refused is invalid params; anything else is
/// an internal error that says what happened (already scrubbed by the host).
fn to_mcp(error: CallError) -> McpError {
    match error {
        CallError::Remote {
            code,
            message,
            data,
            ..
        } => McpError::new(rmcp::model::ErrorCode(code), message, data),
        CallError::UnknownTool { .. }
        | CallError::UnknownPrompt { .. }
        | CallError::InvalidArguments { .. }
        | CallError::UnknownServer(_) => McpError::invalid_params(error.to_string(), None),
        other => McpError::internal_error(other.to_string(), Some(json!({ "kind": other.kind() }))),
    }
}

fn from_wire<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(
            format!("the upstream {what} could not be passed on: {error}"),
            None,
        )
    })
}

/// How many items one list page holds: a workspace of hundreds of servers is listed in
/// pages a client can take.
const PAGE_ITEMS: usize = 500;

/// One page of `items` from `cursor` (the offset of its first item, as the previous page
/// said). A list that changed between pages is announced; a cursor past its end is an
/// empty last page.
fn page<T: serde::de::DeserializeOwned>(
    key: &str,
    items: &[Value],
    request: Option<PaginatedRequestParams>,
) -> Result<T, McpError> {
    let start = match request.and_then(|request| request.cursor) {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().map_err(|_| {
            McpError::invalid_params(
                format!("unknown cursor \"{cursor}\": pass the nextCursor of the previous page"),
                None,
            )
        })?,
    };
    let end = start.saturating_add(PAGE_ITEMS).min(items.len());
    let slice = items.get(start..end).unwrap_or_default();
    // Cache hints: what the gateway serves changes only with the snapshot, and every change
    // is announced; a client still asks again rather than trust a stale list.
    let mut page =
        json!({ key: slice, "resultType": "complete", "ttlMs": 0, "cacheScope": "private" });
    if end < items.len() {
        page["nextCursor"] = json!(end.to_string());
    }
    from_wire(page, "list")
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_completions()
            .build();
        if let Some(resources) = capabilities.resources.as_mut() {
            resources.subscribe = None;
        }
        let workspace = self.inner.workspace.name();
        let instructions = match &self.inner.naming {
            Naming::Prefixed => format!(
                "The MCP servers of plurnk-mcp workspace \"{workspace}\" as one server: each \
                 tool and prompt is named <server>{SEPARATOR}<name>."
            ),
            Naming::Unprefixed(alias) => format!(
                "Server \"{alias}\" of plurnk-mcp workspace \"{workspace}\", through the host."
            ),
        };
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("plurnk-mcp", env!("CARGO_PKG_VERSION"))
                    .with_title(format!("plurnk-mcp gateway: {workspace}"))
                    .with_description("One plurnk-mcp workspace's MCP servers as one server"),
            )
            .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let served = observed::serve("tools/list", Target::None, &mut context);
        let answer = page("tools", &self.view().tools, request);
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let served = observed::serve("tools/call", Target::Tool(&request.name), &mut context);
        let answer = served
            .within(async move {
                let naming = &self.inner.naming;
                let Some((alias, tool)) = route_name(naming, &request.name) else {
                    return Err(self.not_found("tool", &request.name));
                };
                let relay = relay_of(request.input_responses, request.request_state);
                let modern = is_modern(&context);
                let operation = Operation::CallTool {
                    name: tool.to_owned(),
                    arguments: request.arguments.unwrap_or_default(),
                };
                self.forward(alias, operation, relay, &context)
                    .await
                    .map_err(|error| match error {
                        CallError::UnknownTool { .. } | CallError::UnknownServer(_) => {
                            self.not_found("tool", &request.name)
                        }
                        other => to_mcp(other),
                    })?
                    .into_response(
                        CallToolResponse::InputRequired,
                        CallToolResponse::Complete,
                        Passing::Tool,
                        modern,
                    )
            })
            .await;
        served.answered(answer_of(&answer, tool_failed));
        answer
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let served = observed::serve("prompts/list", Target::None, &mut context);
        let answer = page("prompts", &self.view().prompts, request);
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let served = observed::serve("prompts/get", Target::Prompt(&request.name), &mut context);
        let answer = served
            .within(async move {
                let Some((alias, name)) = route_name(&self.inner.naming, &request.name) else {
                    return Err(self.not_found("prompt", &request.name));
                };
                let relay = relay_of(request.input_responses, request.request_state);
                let modern = is_modern(&context);
                let arguments = request
                    .arguments
                    .map(|arguments| {
                        arguments
                            .into_iter()
                            .map(|(key, value)| (key, json!(value)))
                            .collect()
                    })
                    .unwrap_or_default();
                let operation = Operation::GetPrompt {
                    name: name.to_owned(),
                    arguments,
                };
                self.forward(alias, operation, relay, &context)
                    .await
                    .map_err(to_mcp)?
                    .into_response(
                        GetPromptResponse::InputRequired,
                        GetPromptResponse::Complete,
                        Passing::Prompt,
                        modern,
                    )
            })
            .await;
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let served = observed::serve("resources/list", Target::None, &mut context);
        let answer = page("resources", &self.view().resources, request);
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let served = observed::serve("resources/templates/list", Target::None, &mut context);
        let answer = page("resourceTemplates", &self.view().templates, request);
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let served = observed::serve(
            "resources/read",
            Target::Resource(&request.uri),
            &mut context,
        );
        let answer = served
            .within(async move {
                let view = self.view();
                // rmcp hands a request's `_meta` over in its context, not in its params.
                let chosen = context.meta.0.get(SERVER_META).and_then(Value::as_str);
                let alias = view
                    .resource_route(&request.uri, chosen)
                    .map_err(|unroutable| unroutable.into_error(&request.uri))?
                    .to_owned();
                let relay = relay_of(request.input_responses, request.request_state);
                let modern = is_modern(&context);
                let operation = Operation::ReadResource {
                    uri: request.uri.clone(),
                };
                let forwarded = self
                    .forward(&alias, operation, relay, &context)
                    .await
                    .map_err(to_mcp)?;
                // The client learns which server answered, as it does from a tool's served name.
                let forwarded = match forwarded {
                    Forwarded::Complete(result) => {
                        Forwarded::Complete(with_server(&result, &alias))
                    }
                    input => input,
                };
                forwarded.into_response(
                    ReadResourceResponse::InputRequired,
                    ReadResourceResponse::Complete,
                    Passing::Resource,
                    modern,
                )
            })
            .await;
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        mut request_context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let served = observed::serve("completion/complete", Target::None, &mut request_context);
        let answer = served
            .within(async move {
                let modern = is_modern(&request_context);
                let wire = serde_json::to_value(&request).map_err(|error| {
                    McpError::invalid_params(
                        format!("unreadable completion request: {error}"),
                        None,
                    )
                })?;
                let (alias, reference) = match wire["ref"]["type"].as_str() {
                    Some("ref/prompt") => {
                        let served = wire["ref"]["name"].as_str().unwrap_or_default();
                        let Some((alias, name)) = route_name(&self.inner.naming, served) else {
                            return Err(self.not_found("prompt", served));
                        };
                        (
                            alias.to_owned(),
                            crate::model::CompletionRef::Prompt {
                                name: name.to_owned(),
                            },
                        )
                    }
                    Some("ref/resource") => {
                        let uri = wire["ref"]["uri"].as_str().unwrap_or_default();
                        let view = self.view();
                        let alias = match view.template_route(uri) {
                            Some(alias) => alias,
                            None => view
                                .resource_route(uri, None)
                                .map_err(|unroutable| unroutable.into_error(uri))?,
                        };
                        (
                            alias.to_owned(),
                            crate::model::CompletionRef::Resource {
                                uri: uri.to_owned(),
                            },
                        )
                    }
                    _ => {
                        return Err(McpError::invalid_params(
                            "a completion names ref/prompt or ref/resource",
                            None,
                        ));
                    }
                };
                let context = wire["context"]["arguments"]
                    .as_object()
                    .map(|arguments| {
                        arguments
                            .iter()
                            .filter_map(|(key, value)| {
                                Some((key.clone(), value.as_str()?.to_owned()))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let operation = Operation::Complete {
                    reference,
                    argument: wire["argument"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    value: wire["argument"]["value"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    context,
                };
                let result = self
                    .inner
                    .workspace
                    .run(&alias, operation, Self::traced(&request_context))
                    .await
                    .map_err(to_mcp)?;
                placeholder(result.result, Passing::Completion, modern)
            })
            .await;
        served.answered(answer_of(&answer, |_| false));
        answer
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let _ = requested;
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let accepted = subscription.accepted().clone();
        let mut watch = self.inner.workspace.watch();
        let mut seen = self.view();
        loop {
            let changes = tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                changes = self.next_change(&mut watch, &mut seen) => changes,
            };
            // The host is shutting down: end the stream gracefully.
            let Some([tools, prompts, resources]) = changes else {
                return Ok(());
            };
            let sink = subscription.sink();
            let sent = async {
                if tools && accepted.tools_list_changed == Some(true) {
                    sink.notify_tool_list_changed().await?;
                }
                if prompts && accepted.prompts_list_changed == Some(true) {
                    sink.notify_prompt_list_changed().await?;
                }
                if resources && accepted.resources_list_changed == Some(true) {
                    sink.notify_resource_list_changed().await?;
                }
                Ok::<(), rmcp::service::SubscriptionSendError>(())
            };
            if sent.await.is_err() {
                return Ok(());
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A legacy session hears list changes as plain notifications, for as long as it
        // lasts (a failed send means the client is gone).
        let gateway = self.clone();
        let peer = context.peer;
        tokio::spawn(async move {
            let mut watch = gateway.inner.workspace.watch();
            let mut seen = gateway.view();
            let mut alive = tokio::time::interval(SESSION_CHECK);
            loop {
                // A session that ended without a change since is noticed within the check.
                let change = tokio::select! {
                    change = gateway.next_change(&mut watch, &mut seen) => change,
                    _ = alive.tick() => {
                        if peer.is_transport_closed() {
                            break;
                        }
                        continue;
                    }
                };
                let Some([tools, prompts, resources]) = change else {
                    break;
                };
                let sent = async {
                    if tools {
                        peer.notify_tool_list_changed().await?;
                    }
                    if prompts {
                        peer.notify_prompt_list_changed().await?;
                    }
                    if resources {
                        peer.notify_resource_list_changed().await?;
                    }
                    Ok::<(), rmcp::service::ServiceError>(())
                };
                if sent.await.is_err() || peer.is_transport_closed() {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests;
