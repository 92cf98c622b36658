//! The crate's domain types: what the embedding API and the actors speak, free of rmcp.
//!
//! Everything here is cheap to clone or shared behind an `Arc`: a [`WorkspaceSnapshot`] is
//! immutable once published and is replaced whole, never edited in place.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

pub use crate::config::TransportKind;

/// Opens one in-process connection and returns the host's end of it (the other end of a
/// `tokio::io::duplex` pair): called for every connection attempt, the first and each
/// reconnect; whatever serves the other end runs as its own task.
pub type InProcessConnector = Arc<dyn Fn() -> tokio::io::DuplexStream + Send + Sync>;

/// An expected failure, shaped after RFC 9457: what every failure a user can act on becomes.
///
/// A `Problem` never carries a credential: it is built from the alias, the transport and
/// messages of our own, never from an expanded definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The HTTP-like status: `502` for a server that cannot be reached, `404` unknown, …
    pub status: u16,
    /// A stable machine-readable kind, such as `server-unavailable`.
    pub kind: String,
    /// One or more lower-case sentences that name the thing and say what to do.
    pub detail: String,
    /// Whether trying the same thing again later may succeed.
    pub retryable: bool,
}

impl Problem {
    /// The same Problem with every registered secret scrubbed from its detail.
    pub(crate) fn scrubbed(mut self) -> Self {
        self.detail = crate::redact::scrub_capped(&self.detail, crate::redact::SHOWN_CHARS);
        self
    }

    /// `502 server-unavailable`: the server could not be connected, discovered or listed.
    pub fn server_unavailable(detail: impl Into<String>) -> Self {
        Self {
            status: 502,
            kind: "server-unavailable".into(),
            detail: detail.into(),
            retryable: true,
        }
    }

    /// `502 server-list-failed`: the server connected but one of its catalogs (tools,
    /// resources, templates, prompts) could not be listed whole.
    pub fn list_failed(detail: impl Into<String>) -> Self {
        Self {
            status: 502,
            kind: LIST_FAILED.into(),
            detail: detail.into(),
            retryable: true,
        }
    }

    /// `401 server-unauthorized`: the server refused the connection for want of an
    /// authorization its definition does not give (or a token it refused).
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self {
            status: 401,
            kind: UNAUTHORIZED.into(),
            detail: detail.into(),
            retryable: false,
        }
    }

    /// `502 authorization-failed`: the server asks for OAuth authorization, and its
    /// authorization could not be started (discovery or registration failed).
    pub fn authorization_failed(detail: impl Into<String>) -> Self {
        Self {
            status: 502,
            kind: AUTHORIZATION_FAILED.into(),
            detail: detail.into(),
            retryable: true,
        }
    }

    /// What the Problem's kind says of why a server is not ready.
    pub fn cause(&self) -> Cause {
        Cause::of_kind(&self.kind)
    }

    /// `409 server-crash-loop`: the server crashed too often and waits for an explicit enable.
    pub fn crash_loop(detail: impl Into<String>) -> Self {
        Self {
            status: 409,
            kind: "server-crash-loop".into(),
            detail: detail.into(),
            retryable: false,
        }
    }

    /// `404 unknown-server`.
    pub fn unknown_server(alias: &str) -> Self {
        Self {
            status: 404,
            kind: "unknown-server".into(),
            detail: format!(
                "server \"{}\" is not configured in this workspace: check the alias or add it",
                crate::config::shorten(alias)
            ),
            retryable: false,
        }
    }

    /// `409 conflict`.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self {
            status: 409,
            kind: "conflict".into(),
            detail: detail.into(),
            retryable: false,
        }
    }

    /// `403 forbidden`: the operator has not allowed what was asked.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self {
            status: 403,
            kind: "forbidden".into(),
            detail: detail.into(),
            retryable: false,
        }
    }

    /// `400 literal-credential`: a definition that would be kept holds a credential written
    /// literally; the detail names every field (never a value) and says to write `${NAME}`.
    pub fn literal_credential(refused: &crate::config::LiteralCredentials) -> Self {
        Self {
            status: 400,
            kind: "literal-credential".into(),
            detail: refused.to_string(),
            retryable: false,
        }
    }

    /// `400 invalid-definition`.
    pub fn invalid_definition(detail: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "invalid-definition".into(),
            detail: detail.into(),
            retryable: false,
        }
    }

    /// `401 authorization-required`: the server needs OAuth authorization, which a person
    /// gives at the URL in the server's snapshot (`authorization`).
    pub fn authorization_required(alias: &str) -> Self {
        Self {
            status: 401,
            kind: AUTHORIZATION_REQUIRED.into(),
            detail: format!(
                "server \"{alias}\" (http) needs OAuth authorization: open the URL in its \
                 `authorization`, approve, then pass the complete callback URL to \
                 Workspace::oauth_complete (or run `plurnk-mcp auth {alias}`)"
            ),
            retryable: false,
        }
    }

    /// `404 oauth-not-pending`: no authorization of the server waits for a callback.
    pub fn oauth_not_pending(alias: &str) -> Self {
        Self {
            status: 404,
            kind: "oauth-not-pending".into(),
            detail: format!(
                "no authorization of server \"{alias}\" is pending in this workspace (it was \
                 completed, replaced, cleared by a disable, or lost in a restart): enable the \
                 server to start a new one"
            ),
            retryable: false,
        }
    }

    /// `409 oauth-target-conflict`: the server changed while its authorization was pending.
    pub fn oauth_target_conflict(alias: &str) -> Self {
        Self {
            status: 409,
            kind: "oauth-target-conflict".into(),
            detail: format!(
                "server \"{alias}\" was changed (or removed, or added) while its authorization \
                 was pending, so that authorization is not applied: enable the server to \
                 authorize its current definition"
            ),
            retryable: false,
        }
    }

    /// `503 shutting-down`: the host refuses new work while it shuts down.
    pub fn shutting_down() -> Self {
        Self {
            status: 503,
            kind: "shutting-down".into(),
            detail: "the host is shutting down and accepts no new work".into(),
            retryable: false,
        }
    }
}

/// The kind of a Problem whose server waits for a person's OAuth authorization.
pub(crate) const AUTHORIZATION_REQUIRED: &str = "authorization-required";
/// The kind of [`Problem::authorization_failed`].
pub(crate) const AUTHORIZATION_FAILED: &str = "authorization-failed";
/// The kind of [`Problem::unauthorized`].
pub(crate) const UNAUTHORIZED: &str = "server-unauthorized";
/// The kind of a refused client-credentials grant's Problem.
pub(crate) const CLIENT_CREDENTIALS_FAILED: &str = "oauth-client-credentials-failed";
/// The kind of a refused workload-identity grant's Problem.
pub(crate) const WORKLOAD_IDENTITY_FAILED: &str = "oauth-workload-identity-failed";
/// The kind of [`Problem::list_failed`].
pub(crate) const LIST_FAILED: &str = "server-list-failed";

/// Why a server is not ready, as its [`Problem`]'s kind says: what the EXEC bridge reports
/// it as ([`crate::exec::ExecError::telemetry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// It needs an authorization it does not have, or was refused one: pending OAuth
    /// (`authorization-required`), none configured or a token refused
    /// (`server-unauthorized`), an authorization that could not be started
    /// (`authorization-failed`), a refused grant (`oauth-client-credentials-failed`,
    /// `oauth-workload-identity-failed`).
    Authorization,
    /// A catalog could not be listed whole (`server-list-failed`).
    Listing,
    /// Anything else: it could not be reached, it crashed, its workspace failed.
    Unreachable,
}

impl Cause {
    /// The cause a Problem kind names.
    pub fn of_kind(kind: &str) -> Self {
        match kind {
            AUTHORIZATION_REQUIRED
            | AUTHORIZATION_FAILED
            | UNAUTHORIZED
            | CLIENT_CREDENTIALS_FAILED
            | WORKLOAD_IDENTITY_FAILED => Self::Authorization,
            LIST_FAILED => Self::Listing,
            _ => Self::Unreachable,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.kind, self.detail)
    }
}

impl std::error::Error for Problem {}

/// Where a server's attachment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerState {
    /// Configured but not enabled in this workspace: visible, contributes nothing.
    Disabled,
    /// The first connection attempt is under way.
    Connecting,
    /// Connected, discovered and listed: its tools are published.
    Ready,
    /// Could not connect, or lost its connection; it retries by itself with backoff.
    Unavailable,
    /// Crashed too often in a short window; it stays down until enabled again.
    CrashLoop,
    /// Needs OAuth authorization by a person: its snapshot's `authorization` has the URL.
    /// It does not retry by itself; enabling it starts a fresh authorization.
    AuthorizationRequired,
}

impl ServerState {
    /// The state's name as it is shown and serialized: `disabled`, `connecting`, `ready`,
    /// `unavailable`, `crash-loop`, `authorization-required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Connecting => "connecting",
            Self::Ready => "ready",
            Self::Unavailable => "unavailable",
            Self::CrashLoop => "crash-loop",
            Self::AuthorizationRequired => "authorization-required",
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The operator's classification of a tool: `read` tools may be auto-run by the embedder,
/// every other enabled tool keeps the conservative `host` effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Read-only, by the operator's `_READ` list.
    Read,
    /// Anything else.
    Host,
}

/// One enabled tool, as published in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The exact remote name; calls use it unchanged.
    pub name: String,
    /// The display title, if the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments, as the server sent it.
    pub input_schema: Value,
    /// The JSON Schema of its structured result, as the server sent it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The server's annotations (hints such as `readOnlyHint`), as it sent them, if any;
    /// never consulted for the effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The tool's effect from `_READ`.
    pub effect: Effect,
}

/// What negotiation told us about a server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Negotiated {
    /// The negotiated protocol revision, such as `2026-07-28`.
    pub revision: String,
    /// `true` when the server answered `server/discover` (a modern peer).
    pub modern: bool,
    /// The server's name, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The server's version, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The server's display title, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's one-line description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Usage instructions the server sent, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The server's capabilities, as JSON.
    pub capabilities: Value,
    /// What a modern server's discover answer said beside the above; `None` for a legacy
    /// server (negotiated through `initialize`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
}

/// The hints of a `server/discover` answer (§mcp-core-matrix Discovery): which revisions the
/// server speaks, and how long its answer stays fresh and for whom. The host asks again once
/// `ttl_ms` passes (with the catalog's own freshness), taking the new identity, capabilities
/// and instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// Every revision the server said it implements.
    pub supported_versions: Vec<String>,
    /// How long the answer stays fresh, in milliseconds (0: not to be reused).
    pub ttl_ms: u64,
    /// `public` or `private`: whether the answer may be shared across authorizations.
    pub cache_scope: String,
}

/// One server in a workspace snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSnapshot {
    /// The configured alias.
    pub alias: String,
    /// How it is reached.
    pub transport: TransportKind,
    /// Its state.
    pub state: ServerState,
    /// Why it is not ready, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// What negotiation established (present while ready); shared, not copied, by every
    /// snapshot and the connection it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<Arc<Negotiated>>,
    /// The enabled tools (empty unless ready).
    pub tools: Arc<[ToolInfo]>,
    /// Its resources, resource templates and prompts (empty unless ready).
    pub catalog: Catalog,
    /// Counts connections of this attachment; a reconnect raises it.
    pub generation: u64,
    /// What the operator wrote for the model about this server and its tools.
    #[serde(skip_serializing_if = "Authored::is_empty")]
    pub authored: Arc<Authored>,
    /// While `authorization-required`: where a person authorizes it (the action's `202
    /// { authorization: { url } }`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<PendingAuthorization>,
}

/// An OAuth authorization waiting for a person: open `url`, approve, and pass the complete
/// callback URL to [`crate::Workspace::oauth_complete`]; or, for the device grant
/// ([`crate::Workspace::authorize_device`]), enter `device.user_code` at `url` on any device
/// and [`crate::Workspace::poll_device`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingAuthorization {
    /// The authorization server's URL for this attempt (the verification URI of a device
    /// authorization).
    pub url: String,
    /// A device authorization's code and polling terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceAuthorization>,
}

/// A device authorization (RFC 8628) waiting for a person: show `verification_uri` and
/// `user_code` (or `verification_uri_complete`, which embeds the code), then poll with
/// `device` every `interval` seconds, for at most `expires_in` seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAuthorization {
    /// Where the person goes.
    pub verification_uri: String,
    /// The same, with the user code in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_uri_complete: Option<String>,
    /// What the person enters.
    pub user_code: String,
    /// Seconds between polls.
    pub interval: u64,
    /// Seconds the code lives.
    pub expires_in: u64,
    /// The opaque handle [`crate::Workspace::poll_device`] takes (not the device code, which
    /// never leaves the host).
    pub device: String,
}

/// One poll of a device authorization.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DevicePoll {
    /// The person has not approved yet: poll again after the interval.
    Pending,
    /// Polling too fast: poll again after a longer interval (5 s more).
    SlowDown,
    /// Approved: the token is installed and the server connected; its snapshot.
    Authorized {
        /// The server as the enable that followed left it.
        server: Box<ServerSnapshot>,
    },
    /// The person refused.
    Denied,
    /// The code expired: authorize again.
    Expired,
}

/// What the operator authored for a server's orientation: the `PLURNK_MCP_<server>_SUMMARY`
/// and `PLURNK_MCP_<server>_<tool>_SUMMARY` companions (with `${NAME}` expanded), and
/// whether `PLURNK_MCP_EXPANDED` names it. [`crate::projection`] derives every one-liner from
/// these first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Authored {
    /// The server's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Tool summaries, keyed by [`crate::config::tool_summary_key`] of the tool name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
    /// Its whole tool tree expands into the survey.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expanded: bool,
}

impl Authored {
    /// Nothing authored.
    pub fn is_empty(&self) -> bool {
        self.summary.is_none() && self.tools.is_empty() && !self.expanded
    }

    /// The authored summaries of `definition`, `${NAME}` expanded against `env`. A summary
    /// whose reference cannot be expanded is left out (the next source of its one-liner
    /// applies) and logged with the variable's name.
    pub(crate) fn of(
        definition: &crate::config::ServerDefinition,
        env: &crate::config::Environment,
        expanded: bool,
    ) -> Self {
        let alias = definition.alias();
        let expand = |what: &str, text: &str| match env.expand_setting(what, text) {
            Ok(text) if !text.trim().is_empty() => Some(text),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(server = alias, %error, "a summary is left out");
                None
            }
        };
        Self {
            summary: definition
                .summary()
                .and_then(|text| expand("the server summary", text)),
            tools: definition
                .tool_summaries()
                .iter()
                .filter_map(|(tool, text)| Some((tool.clone(), expand("a tool summary", text)?)))
                .collect(),
            expanded,
        }
    }
}

impl ServerSnapshot {
    /// Scrubs every registered secret from what the snapshot shows — its Problem, what the
    /// server said about itself, its tools, resources and prompts — so a server that echoes
    /// a credential it was given does not publish it. A no-op while no secret is registered.
    pub(crate) fn scrub(&mut self) {
        use crate::redact::{scrub_in_place, scrub_json};
        if !crate::redact::active() {
            return;
        }
        self.problem = self.problem.take().map(Problem::scrubbed);
        // Copied only when something in it holds a secret: otherwise it stays shared.
        if let Some(negotiated) = &mut self.negotiated
            && serde_json::to_string(&**negotiated)
                .is_ok_and(|json| crate::redact::holds_secret(&json))
        {
            let negotiated = Arc::make_mut(negotiated);
            for text in [
                &mut negotiated.name,
                &mut negotiated.version,
                &mut negotiated.title,
                &mut negotiated.description,
                &mut negotiated.instructions,
            ]
            .into_iter()
            .flatten()
            {
                scrub_in_place(text);
            }
            scrub_json(&mut negotiated.capabilities);
        }
        // A summary that names a credential (`${TOKEN}` in a `_SUMMARY`) shows its name only.
        if serde_json::to_string(&*self.authored)
            .is_ok_and(|json| crate::redact::holds_secret(&json))
        {
            let authored = Arc::make_mut(&mut self.authored);
            authored.summary.iter_mut().for_each(scrub_in_place);
            authored.tools.values_mut().for_each(scrub_in_place);
        }
        // Lists are rebuilt only when something in them holds a secret.
        rebuild_if_dirty(&mut self.tools, |tool| {
            scrub_in_place(&mut tool.name);
            tool.title.iter_mut().for_each(scrub_in_place);
            tool.description.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut tool.input_schema);
            tool.output_schema.iter_mut().for_each(scrub_json);
            tool.annotations.iter_mut().for_each(scrub_json);
        });
        rebuild_if_dirty(&mut self.catalog.resources, |resource| {
            scrub_in_place(&mut resource.uri);
            scrub_in_place(&mut resource.name);
            resource.description.iter_mut().for_each(scrub_in_place);
            resource.mime_type.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut resource.definition);
        });
        rebuild_if_dirty(&mut self.catalog.templates, |template| {
            scrub_in_place(&mut template.uri_template);
            scrub_in_place(&mut template.name);
            template.description.iter_mut().for_each(scrub_in_place);
            scrub_json(&mut template.definition);
        });
        rebuild_if_dirty(&mut self.catalog.prompts, |prompt| {
            scrub_in_place(&mut prompt.name);
            prompt.description.iter_mut().for_each(scrub_in_place);
            for argument in &mut prompt.arguments {
                scrub_in_place(&mut argument.name);
                argument.description.iter_mut().for_each(scrub_in_place);
            }
            scrub_json(&mut prompt.definition);
        });
    }

    /// Looks up an enabled tool by its exact name.
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Looks up a prompt by its exact name.
    pub fn prompt(&self, name: &str) -> Option<&PromptInfo> {
        self.catalog
            .prompts
            .iter()
            .find(|prompt| prompt.name == name)
    }
}

/// One workspace's complete, immutable view: every configured server and what it publishes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkspaceSnapshot {
    /// The workspace name.
    pub workspace: String,
    /// Raised by one on every commit.
    pub version: u64,
    /// Every configured server, by alias.
    pub servers: BTreeMap<Arc<str>, Arc<ServerSnapshot>>,
}

impl WorkspaceSnapshot {
    /// Looks up a server by alias.
    pub fn server(&self, alias: &str) -> Option<&ServerSnapshot> {
        self.servers.get(alias).map(|server| &**server)
    }

    /// Whether every server has left `connecting`.
    pub fn is_settled(&self) -> bool {
        self.servers
            .values()
            .all(|server| server.state != ServerState::Connecting)
    }

    /// The route rule, the one place it is written: the server `alias` is in this snapshot,
    /// enabled and ready, and, when a call names `tool`, lists that tool among its enabled
    /// tools. Every way in (the handle, EXEC ops, the command line, and through the handle
    /// the gateway) asks here and words the [`Refusal`] in its own error.
    ///
    /// A snapshot may be stale by the time a request reaches the server, so the server's
    /// live session checks again what it offers now: its tools, prompts and capabilities.
    pub fn admit<'a>(
        &'a self,
        alias: &str,
        tool: Option<&'a str>,
    ) -> Result<&'a ServerSnapshot, Refusal<'a>> {
        let server = self.server(alias).ok_or(Refusal::UnknownServer)?;
        let problem = server.problem.as_ref();
        match server.state {
            ServerState::Ready => {}
            ServerState::Disabled => return Err(Refusal::Disabled { problem }),
            state => return Err(Refusal::NotReady { state, problem }),
        }
        match tool {
            Some(tool) if server.tool(tool).is_none() => Err(Refusal::UnknownTool { server, tool }),
            _ => Ok(server),
        }
    }
}

/// Why [`WorkspaceSnapshot::admit`] routes nothing to a server.
///
/// Exhaustive on purpose: each caller maps every refusal to an error of its own, so a new
/// refusal must make each of them decide how to word it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal<'a> {
    /// The snapshot has no server by that alias.
    UnknownServer,
    /// The server is configured but not enabled in this workspace.
    Disabled {
        /// Why, when the snapshot says.
        problem: Option<&'a Problem>,
    },
    /// The server is enabled but not ready: connecting, unavailable, crash-looping or
    /// waiting for an authorization.
    NotReady {
        /// The state it is in.
        state: ServerState,
        /// Why, when the snapshot says.
        problem: Option<&'a Problem>,
    },
    /// The server is ready, but the tool named is not one of its enabled tools.
    UnknownTool {
        /// The server, for callers that suggest a tool it does list.
        server: &'a ServerSnapshot,
        /// The tool named.
        tool: &'a str,
    },
}

/// What a relayed request carries from the caller's previous `input_required` round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InputRelay {
    /// The caller's `inputResponses`, by the keys the server gave.
    pub input_responses: Option<serde_json::Map<String, Value>>,
    /// The server's `requestState`, echoed byte for byte.
    pub request_state: Option<String>,
}

/// A settled `tools/call`: the server answered with a result.
///
/// A tool-level `isError: true` is a completed result, not a failure: `is_error` tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// `true` when the server flagged the result as a tool-level error.
    pub is_error: bool,
    /// The whole result object as JSON (`content`, `structuredContent`, `_meta`, …).
    pub result: Value,
}

impl ToolResult {
    /// The same result with every registered secret scrubbed from its strings: a server
    /// that reflects a credential does not hand it to the caller (or the model).
    pub(crate) fn scrubbed(mut self) -> Self {
        crate::redact::scrub_json(&mut self.result);
        self
    }

    /// Whether the server answered `input_required` to a relayed request
    /// ([`crate::CallOptions::relay`]): `result` is then that answer, for the caller's own
    /// client to fulfil and send again.
    pub fn is_input_required(&self) -> bool {
        self.result.get("resultType").and_then(Value::as_str) == Some("input_required")
    }

    /// The concatenated text of the result's text content blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(blocks) = self.result.get("content").and_then(Value::as_array) {
            for block in blocks {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(text);
                }
            }
        }
        out
    }
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The alias is not configured in the workspace.
    #[error(
        "server \"{}\" is not configured in this workspace",
        crate::config::shorten(.0)
    )]
    UnknownServer(String),
    /// The server is configured but not ready (disabled, connecting, unavailable, crash-loop).
    #[error("server \"{alias}\" is {state}: {detail}")]
    NotReady {
        /// The alias.
        alias: String,
        /// Its state when the call was refused.
        state: ServerState,
        /// Why, from its Problem when it has one.
        detail: String,
    },
    /// The tool is not an enabled tool of the server in the current snapshot.
    #[error(
        "server \"{alias}\" has no enabled tool \"{}\": list its tools with `plurnk-mcp tools {alias}`",
        crate::config::shorten(tool)
    )]
    UnknownTool {
        /// The alias.
        alias: String,
        /// The tool name asked for.
        tool: String,
    },
    /// The server does not offer what the operation needs (resources, prompts, completion).
    #[error("server \"{alias}\" does not offer {what}: {operation} cannot be sent to it")]
    Unsupported {
        /// The alias.
        alias: String,
        /// The operation.
        operation: String,
        /// The missing surface.
        what: String,
    },
    /// The prompt is not one the server lists.
    #[error(
        "server \"{alias}\" has no prompt \"{}\": list its prompts with `plurnk-mcp prompts {alias}`",
        crate::config::shorten(prompt)
    )]
    UnknownPrompt {
        /// The alias.
        alias: String,
        /// The prompt asked for.
        prompt: String,
    },
    /// The arguments were not a JSON object.
    #[error("arguments for {alias}/{tool} must be a JSON object")]
    InvalidArguments {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
    },
    /// The call's one deadline passed (it bounds every round, the Task and every answer the
    /// call waited on together), or, when progress resets it, no progress came in time; the
    /// request or Task was cancelled on the wire.
    #[error(
        "server \"{alias}\" did not finish {tool} within its deadline of {timeout_ms} ms; the \
         server was told to stop"
    )]
    Timeout {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
        /// The deadline that passed.
        timeout_ms: u64,
    },
    /// The caller cancelled; the request was cancelled on the wire.
    #[error("the call to {alias}/{tool} was cancelled")]
    Cancelled {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
    },
    /// The connection died while the call was in flight.
    #[error("server \"{alias}\" lost its connection during {tool}: {detail}")]
    ConnectionLost {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
        /// What happened to the connection.
        detail: String,
    },
    /// The server is being disabled or removed, or the host is shutting down.
    #[error("server \"{alias}\" is closing ({reason}); the call was not completed")]
    Closing {
        /// The alias.
        alias: String,
        /// Why it is closing.
        reason: String,
    },
    /// The server answered with a JSON-RPC error; code, message and data are kept.
    #[error("server \"{alias}\" answered {tool} with JSON-RPC error {code}: {message}")]
    Remote {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The server's `data`, if any.
        data: Option<Value>,
    },
    /// The server answered with something this host cannot use.
    #[error("server \"{alias}\" answered {tool} with an invalid result: {detail}")]
    Protocol {
        /// The alias.
        alias: String,
        /// The tool.
        tool: String,
        /// What was wrong.
        detail: String,
    },
    /// The embedder's interaction answered something the server did not ask for.
    #[error("the interaction for {alias}/{tool} gave an invalid answer: {detail}")]
    Interaction {
        /// The alias.
        alias: String,
        /// The tool or operation.
        tool: String,
        /// What was wrong.
        detail: String,
    },
    /// Too many calls are in flight on the server or in the workspace: the call was refused
    /// at once rather than queued without bound.
    #[error(
        "server \"{alias}\" is overloaded: {limit} calls are already in flight {scope}; try again when some have settled"
    )]
    Overloaded {
        /// The alias.
        alias: String,
        /// The bound that was met.
        limit: usize,
        /// Where: "on this server" or "in this workspace".
        scope: String,
    },
    /// The host is shutting down.
    #[error("the host is shutting down")]
    ShuttingDown,
}

impl CallError {
    /// A stable, kebab-case name for the kind of failure, the same for every alias, tool and
    /// message: `unknown-server`, `not-ready`, `unknown-tool`, `unsupported`,
    /// `unknown-prompt`, `invalid-arguments`, `timeout`, `cancelled`, `connection-lost`,
    /// `closing`, `remote`, `protocol`, `interaction`, `overloaded`, `shutting-down`. The
    /// `kind` label of `plurnk_mcp_call_errors_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownServer(_) => "unknown-server",
            Self::NotReady { .. } => "not-ready",
            Self::UnknownTool { .. } => "unknown-tool",
            Self::Unsupported { .. } => "unsupported",
            Self::UnknownPrompt { .. } => "unknown-prompt",
            Self::InvalidArguments { .. } => "invalid-arguments",
            Self::Timeout { .. } => "timeout",
            Self::Cancelled { .. } => "cancelled",
            Self::ConnectionLost { .. } => "connection-lost",
            Self::Closing { .. } => "closing",
            Self::Remote { .. } => "remote",
            Self::Protocol { .. } => "protocol",
            Self::Interaction { .. } => "interaction",
            Self::Overloaded { .. } => "overloaded",
            Self::ShuttingDown => "shutting-down",
        }
    }

    /// The same error with every registered secret scrubbed from its text and data.
    pub(crate) fn scrubbed(self) -> Self {
        use crate::redact::scrub_json;
        // Scrubbed, then cut: a server's message is passed on, not a megabyte of it.
        let scrub_in_place = |text: &mut String| {
            *text = crate::redact::scrub_capped(text, crate::redact::SHOWN_CHARS);
        };
        let mut error = self;
        match &mut error {
            Self::UnknownServer(alias) => scrub_in_place(alias),
            Self::NotReady { detail, .. }
            | Self::ConnectionLost { detail, .. }
            | Self::Protocol { detail, .. }
            | Self::Interaction { detail, .. } => scrub_in_place(detail),
            Self::Closing { reason, .. } => scrub_in_place(reason),
            Self::Remote { message, data, .. } => {
                scrub_in_place(message);
                if let Some(data) = data {
                    scrub_json(data);
                }
            }
            Self::UnknownTool { .. }
            | Self::Unsupported { .. }
            | Self::UnknownPrompt { .. }
            | Self::InvalidArguments { .. }
            | Self::Timeout { .. }
            | Self::Cancelled { .. }
            | Self::Overloaded { .. }
            | Self::ShuttingDown => {}
        }
        error
    }

    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::NotReady { .. }
                | Self::Timeout { .. }
                | Self::ConnectionLost { .. }
                | Self::Closing { .. }
                | Self::Overloaded { .. }
        )
    }
}

/// One request a caller makes of a server through the host.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Operation {
    /// `tools/call`.
    CallTool {
        /// The exact tool name.
        name: String,
        /// The arguments object.
        arguments: serde_json::Map<String, Value>,
    },
    /// `resources/read`.
    ReadResource {
        /// The resource URI.
        uri: String,
    },
    /// `prompts/get`.
    GetPrompt {
        /// The prompt name.
        name: String,
        /// The prompt arguments.
        arguments: serde_json::Map<String, Value>,
    },
    /// `completion/complete` for a prompt or resource-template argument.
    Complete {
        /// What owns the argument.
        reference: CompletionRef,
        /// The argument's name.
        argument: String,
        /// What the user typed so far.
        value: String,
        /// Already resolved arguments, as context.
        context: BTreeMap<String, String>,
    },
}

impl Operation {
    /// The tool a `tools/call` names; no other operation names one.
    pub(crate) fn tool(&self) -> Option<&str> {
        match self {
            Self::CallTool { name, .. } => Some(name),
            _ => None,
        }
    }

    /// A short name for messages: the tool name, or the method and its subject.
    pub fn label(&self) -> std::borrow::Cow<'_, str> {
        // Borrowed for a tool call, the common case: most calls never need it (only their
        // errors do), so it costs them nothing.
        match self {
            Self::CallTool { name, .. } => name.as_str().into(),
            Self::ReadResource { uri } => format!("resources/read {uri}").into(),
            Self::GetPrompt { name, .. } => format!("prompts/get {name}").into(),
            Self::Complete { argument, .. } => format!("completion/complete {argument}").into(),
        }
    }
}

/// What a completion request completes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum CompletionRef {
    /// An argument of a prompt.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// A variable of a resource template.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template's URI template.
        uri: String,
    },
}

/// A progress report of an in-flight request, delivered to the caller that owns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The progress so far; increases with every report.
    pub progress: f64,
    /// The total, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable message, if the server sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One resource a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceInfo {
    /// The resource URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if given.
    #[serde(skip_serializing_if = "Option::is_none", rename = "mimeType")]
    pub mime_type: Option<String>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One resource template a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceTemplateInfo {
    /// The RFC 6570 URI template.
    #[serde(rename = "uriTemplate")]
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One prompt a server lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptInfo {
    /// The prompt's name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentInfo>,
    /// The server's whole definition, as JSON.
    pub definition: Value,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptArgumentInfo {
    /// The argument's name.
    pub name: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// A server's published catalog besides its tools.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Catalog {
    /// Its resources.
    pub resources: Arc<[ResourceInfo]>,
    /// Its resource templates.
    pub templates: Arc<[ResourceTemplateInfo]>,
    /// Its prompts.
    pub prompts: Arc<[PromptInfo]>,
}

/// A batch of input requests from one result (MRTR), handed to the embedder as one
/// interaction: every request of the result at once, keyed as the server keyed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interaction {
    /// The server asking.
    pub server: String,
    /// The operation it asks for (a tool name, or a method and its subject).
    pub operation: String,
    /// The elicitations, by the server's key.
    pub requests: BTreeMap<String, Elicitation>,
}

/// One elicitation: a form to fill in or a URL to visit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Elicitation {
    /// Ask for values matching `schema` (a flat JSON Schema object).
    Form {
        /// What to ask.
        message: String,
        /// The requested schema.
        schema: Value,
    },
    /// Send the user to `url`.
    Url {
        /// What to tell the user.
        message: String,
        /// Where to send them.
        url: String,
        /// The server's id for this elicitation.
        #[serde(rename = "elicitationId")]
        elicitation_id: String,
    },
}

impl Elicitation {
    /// The request as the embedder is shown it: the server's words scrubbed and bounded.
    pub(crate) fn shown(&self) -> Self {
        let shown = |text: &str| crate::redact::scrub_capped(text, crate::redact::SHOWN_CHARS);
        match self {
            Self::Form { message, schema } => {
                let mut schema = schema.clone();
                crate::redact::scrub_json(&mut schema);
                Self::Form {
                    message: shown(message),
                    schema,
                }
            }
            Self::Url {
                message,
                url,
                elicitation_id,
            } => Self::Url {
                message: shown(message),
                url: shown(url),
                elicitation_id: elicitation_id.clone(),
            },
        }
    }
}

/// The answer to one elicitation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum ElicitationAnswer {
    /// The user supplied `content` (for a URL elicitation: agreed to go).
    Accept {
        /// The values, for a form; `None` for a URL elicitation.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<serde_json::Map<String, Value>>,
    },
    /// The user said no.
    Decline,
    /// The user dismissed it.
    Cancel,
}

/// The embedder's side of an interaction: receives every input request of one result and
/// answers each key. Missing keys are answered `cancel`.
pub type InteractionHandler = Arc<
    dyn Fn(
            Interaction,
        )
            -> std::pin::Pin<Box<dyn Future<Output = BTreeMap<String, ElicitationAnswer>> + Send>>
        + Send
        + Sync,
>;

/// Where progress reports of one call go.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a server may make the host hold and do: every bound the host keeps against a server
/// that floods, pages forever or sends more than it should. The defaults are far beyond
/// what a real server needs; a server that meets one is `unavailable` with a Problem that
/// names the bound, or its call fails with [`CallError::Overloaded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Pages one list (`tools/list`, `resources/list`, …) may take.
    pub max_pages: usize,
    /// Items one list may hold (tools, resources, templates or prompts).
    pub max_items: usize,
    /// Bytes one list may hold, counted as the JSON of its items.
    pub max_list_bytes: usize,
    /// Bytes one message from a server may have: a line over stdio (a longer one closes the
    /// connection), a JSON body or one event of a stream over Streamable HTTP (a longer one
    /// fails its request).
    pub max_message_bytes: usize,
    /// Calls in flight on one server; beyond it a call fails at once as overloaded.
    pub max_in_flight_per_server: usize,
    /// Calls in flight in one workspace, all servers together.
    pub max_in_flight_per_workspace: usize,
    /// Notifications one server may send in a burst…
    pub notification_burst: u32,
    /// …and per second after it; the excess is dropped and counted.
    pub notifications_per_second: u32,
    /// A server that keeps exceeding the notification rate this long is disconnected.
    pub flood_grace: std::time::Duration,
    /// Requests one server may have waiting on the host at once (ping, elicitation, …);
    /// more are dropped unanswered.
    pub max_server_requests: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pages: 100,
            max_items: 10_000,
            max_list_bytes: 32 << 20,
            max_message_bytes: 16 << 20,
            max_in_flight_per_server: 1024,
            max_in_flight_per_workspace: 8192,
            notification_burst: 2000,
            notifications_per_second: 1000,
            flood_grace: std::time::Duration::from_secs(5),
            max_server_requests: 16,
        }
    }
}

/// Rebuilds `items` with `scrub` applied to each, when any of them, shown as its JSON (how an
/// embedder would show it), holds a secret; leaves the shared list alone otherwise.
fn rebuild_if_dirty<T: Clone + Serialize>(items: &mut Arc<[T]>, scrub: impl Fn(&mut T)) {
    let dirty = items.iter().any(|item| {
        serde_json::to_string(item).is_ok_and(|json| crate::redact::holds_secret(&json))
    });
    if dirty {
        *items = items
            .iter()
            .cloned()
            .map(|mut item| {
                scrub(&mut item);
                item
            })
            .collect();
    }
}

/// Something that happened in the host; subscribe with [`Host::events`](crate::Host::events).
///
/// The stream is a broadcast: a subscriber that falls behind loses the oldest events (it is
/// told so by `RecvError::Lagged`), but the snapshot itself is always current.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostEvent {
    /// A server changed state.
    StateChanged {
        /// The workspace.
        workspace: String,
        /// The server alias.
        alias: String,
        /// The previous state, if it had one.
        from: Option<ServerState>,
        /// The new state.
        to: ServerState,
        /// Why, when the new state is a failure.
        problem: Option<Problem>,
    },
    /// A server said a resource changed (`notifications/resources/updated`); the host
    /// follows every resource read through it, and its cached copy is already dropped.
    ResourceUpdated {
        /// The workspace.
        workspace: String,
        /// The server alias.
        alias: String,
        /// The resource URI.
        uri: String,
    },
    /// A new snapshot was committed.
    SnapshotCommitted {
        /// The workspace.
        workspace: String,
        /// The snapshot's version.
        version: u64,
    },
    /// A workspace's actor failed and the host supervisor started it again from the store
    /// and the service configuration; its servers reconnect (`connecting`, then `ready` or
    /// `unavailable`, as on start). Calls in flight on it settled with a typed error.
    WorkspaceRestarted {
        /// The workspace.
        workspace: String,
        /// Its failures inside the restart window, this one included.
        failures: usize,
        /// Why (`503 workspace-failed`).
        problem: Problem,
    },
    /// A workspace failed too often (or could not be started again) and stays down: every
    /// server it had enabled shows `unavailable` with this Problem until the workspace is
    /// opened again by name. Reported once.
    WorkspaceFailed {
        /// The workspace.
        workspace: String,
        /// Why (`503 workspace-failed`).
        problem: Problem,
    },
    /// Only from [`crate::Host::events_to`]: the receiving actor fell behind and this many
    /// events were dropped for it.
    EventsMissed {
        /// How many.
        count: u64,
    },
    /// An EXEC op failed ([`crate::exec::run`]): what kind of failure, for the embedder's
    /// telemetry. Its strings are scrubbed.
    Telemetry {
        /// `exec:<server>`.
        source: String,
        /// What failed.
        event: TelemetryEvent,
        /// The HTTP-like status of the failure (`404`, `422`, `503`, …; `401` for
        /// `mcp_auth_required`).
        status: u16,
        /// The failure's message, bounded.
        detail: String,
        /// With `mcp_auth_required`: the server and the resource it needs authorization
        /// for (seed 000's `{ server, resource }`).
        auth_required: Option<ProtectedResource>,
    },
}

/// What `mcp_auth_required` carries: the server that needs authorization, and the protected
/// resource (RFC 9728) it is needed for, named by the origin of the server's URL: the host
/// never shows more of a server's URL, whose userinfo, path and query can hold a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectedResource {
    /// The server's alias.
    pub server: String,
    /// The origin of its URL, `scheme://host:port`.
    pub resource: String,
}

/// The kind of an EXEC failure a [`HostEvent::Telemetry`] reports; shown (and serialized)
/// as `mcp_not_configured`, `mcp_unreachable`, ….
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum TelemetryEvent {
    /// `mcp_not_configured`: the op names a server or tool this workspace does not offer.
    #[serde(rename = "mcp_not_configured")]
    NotConfigured,
    /// `mcp_unreachable`: the server is not ready, or was lost during the call.
    #[serde(rename = "mcp_unreachable")]
    Unreachable,
    /// `mcp_list_failed`: the server's catalog could not be listed (whole or in part).
    #[serde(rename = "mcp_list_failed")]
    ListFailed,
    /// `mcp_bad_arguments`: the op could not be read, or its arguments fail the schema.
    #[serde(rename = "mcp_bad_arguments")]
    BadArguments,
    /// `mcp_tool_error`: the tool reported `isError`, or the server answered with an error.
    #[serde(rename = "mcp_tool_error")]
    ToolError,
    /// `mcp_auth_required`: the server needs authorization the host does not have.
    #[serde(rename = "mcp_auth_required")]
    AuthRequired,
}

impl TelemetryEvent {
    /// The event's wire name, such as `mcp_bad_arguments`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotConfigured => "mcp_not_configured",
            Self::Unreachable => "mcp_unreachable",
            Self::ListFailed => "mcp_list_failed",
            Self::BadArguments => "mcp_bad_arguments",
            Self::ToolError => "mcp_tool_error",
            Self::AuthRequired => "mcp_auth_required",
        }
    }
}

impl fmt::Display for TelemetryEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One available server as the `list` action shows it; never carries a credential value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerSummary {
    /// The alias.
    pub alias: String,
    /// `service` (the environment), `specialized` (the environment, replaced in this
    /// workspace) or `workspace` (added in this workspace).
    pub source: &'static str,
    /// The executable, or the URL's origin.
    pub target: String,
    /// How it is reached.
    pub transport: crate::model::TransportKind,
    /// Whether it is enabled in this workspace.
    pub enabled: bool,
    /// Its state.
    pub state: ServerState,
    /// Why it is not ready, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// What negotiation established, while ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<Arc<crate::model::Negotiated>>,
    /// The enabled tools.
    pub tools: Vec<String>,
    /// The tools classified `read`.
    pub read: Vec<String>,
    /// The unexpanded definition, with every secret value redacted.
    pub definition: serde_json::Value,
}

/// A close failure seen during shutdown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CloseFailure {
    /// The workspace.
    pub workspace: String,
    /// The server alias.
    pub alias: String,
    /// What did not close.
    pub detail: String,
}

/// How an enable customizes the definition: the client configuration overlay's entry and
/// explicit action options, the top two layers of the cascade.
#[derive(Debug, Clone, Default)]
pub struct Customize {
    /// The overlay's entry for the alias, if the client sent one.
    pub overlay: Option<crate::config::OverlayServer>,
    /// Explicit options.
    pub options: Option<crate::config::McpServerOptions>,
}

impl Customize {
    pub(crate) fn is_empty(&self) -> bool {
        self.overlay.is_none()
            && self
                .options
                .as_ref()
                .is_none_or(crate::config::McpServerOptions::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_snapshot_shows_no_secret_a_server_reported() {
        crate::redact::register(["snapshot-secret-4242"]);
        let tool = |name: &str, description: &str| ToolInfo {
            name: name.to_owned(),
            title: None,
            description: Some(description.to_owned()),
            input_schema: serde_json::json!({"description": description}),
            output_schema: None,
            annotations: None,
            effect: Effect::Host,
        };
        let clean_tools: Arc<[ToolInfo]> = Arc::from([tool("plain", "nothing here")]);
        let mut snapshot = ServerSnapshot {
            alias: "leaky".into(),
            transport: TransportKind::Stdio,
            state: ServerState::Unavailable,
            problem: Some(Problem::server_unavailable("died: snapshot-secret-4242")),
            negotiated: Some(Arc::new(Negotiated {
                revision: "2026-07-28".into(),
                modern: true,
                name: Some("snapshot-secret-4242".into()),
                version: None,
                title: None,
                description: None,
                instructions: Some("call with SNAPSHOT-SECRET-4242".into()),
                capabilities: Value::Null,
                discovery: None,
            })),
            tools: Arc::from([
                tool("leaks", "key snapshot-secret-4242"),
                tool("plain", "fine"),
            ]),
            catalog: Catalog {
                resources: Arc::from([ResourceInfo {
                    uri: "memo://snapshot-secret-4242".into(),
                    name: "r".into(),
                    description: None,
                    mime_type: Some("text/snapshot-secret-4242".into()),
                    definition: Value::Null,
                }]),
                ..Catalog::default()
            },
            generation: 1,
            authored: Arc::new(Authored {
                summary: Some("orientation snapshot-secret-4242".into()),
                tools: BTreeMap::from([("leaks".into(), "uses snapshot-secret-4242".into())]),
                expanded: false,
            }),
            authorization: None,
        };
        snapshot.scrub();
        let shown = format!(
            "{snapshot:?} {}",
            serde_json::to_string(&snapshot).unwrap_or_default()
        );
        assert!(
            !shown.to_ascii_lowercase().contains("snapshot-secret-4242"),
            "{shown}"
        );
        assert_eq!(snapshot.tools[1].description.as_deref(), Some("fine"));
        // A list with nothing to hide is left as it is, shared.
        let mut clean = snapshot.clone();
        clean.tools = clean_tools.clone();
        let clean_negotiated = clean.negotiated.clone();
        clean.scrub();
        assert!(Arc::ptr_eq(&clean_tools, &clean.tools));
        assert!(
            matches!((&clean_negotiated, &clean.negotiated), (Some(a), Some(b)) if Arc::ptr_eq(a, b)),
            "a negotiation with nothing to hide stays shared"
        );
    }

    #[test]
    fn the_route_rule_admits_only_a_ready_server_that_lists_the_tool() {
        let server = |alias: &str, state: ServerState, problem: Option<Problem>| ServerSnapshot {
            alias: alias.into(),
            transport: TransportKind::Stdio,
            state,
            problem,
            negotiated: None,
            tools: Arc::from([ToolInfo {
                name: "echo".into(),
                title: None,
                description: None,
                input_schema: serde_json::json!({"type": "object"}),
                output_schema: None,
                annotations: None,
                effect: Effect::Host,
            }]),
            catalog: Catalog::default(),
            generation: 1,
            authored: Arc::new(Authored::default()),
            authorization: None,
        };
        let down = Problem::server_unavailable("it exited");
        let snapshot = WorkspaceSnapshot {
            workspace: "default".into(),
            version: 3,
            servers: [
                server("up", ServerState::Ready, None),
                server("off", ServerState::Disabled, None),
                server("down", ServerState::Unavailable, Some(down.clone())),
                server("starting", ServerState::Connecting, None),
            ]
            .into_iter()
            .map(|server| (Arc::from(server.alias.as_str()), Arc::new(server)))
            .collect(),
        };
        let up = snapshot.server("up").map(|server| server.alias.as_str());
        assert_eq!(
            snapshot.admit("up", None).ok().map(|s| s.alias.as_str()),
            up
        );
        assert_eq!(
            snapshot
                .admit("up", Some("echo"))
                .ok()
                .map(|s| s.alias.as_str()),
            up
        );
        assert!(matches!(
            snapshot.admit("up", Some("missing")),
            Err(Refusal::UnknownTool { server, tool: "missing" }) if server.alias == "up"
        ));
        assert_eq!(
            snapshot.admit("nowhere", None).err(),
            Some(Refusal::UnknownServer)
        );
        assert_eq!(
            snapshot.admit("off", Some("echo")).err(),
            Some(Refusal::Disabled { problem: None })
        );
        assert_eq!(
            snapshot.admit("down", Some("echo")).err(),
            Some(Refusal::NotReady {
                state: ServerState::Unavailable,
                problem: Some(&down)
            })
        );
        assert_eq!(
            snapshot.admit("starting", None).err(),
            Some(Refusal::NotReady {
                state: ServerState::Connecting,
                problem: None
            })
        );
    }
}
