//! A call and what settles it: the Operation, its ToolResult or CallError, progress, and
//! the interactions (elicitations) a server asks of the caller.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::snapshot::ServerState;

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
#[non_exhaustive]
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

    /// A short name for messages: the tool name, or the method and its subject (the
    /// caller's, so cut as every caller-given name is quoted: `config::shorten`).
    pub fn label(&self) -> std::borrow::Cow<'_, str> {
        // Borrowed for a tool call, the common case: most calls never need it (only their
        // errors do), so it costs them nothing. A called tool is one the server lists, at
        // most 128 characters.
        use crate::config::shorten;
        match self {
            Self::CallTool { name, .. } => name.as_str().into(),
            Self::ReadResource { uri } => format!("resources/read {}", shorten(uri)).into(),
            Self::GetPrompt { name, .. } => format!("prompts/get {}", shorten(name)).into(),
            Self::Complete { argument, .. } => {
                format!("completion/complete {}", shorten(argument)).into()
            }
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
#[non_exhaustive]
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

/// A batch of input requests from one result (MRTR), handed to the embedder as one
/// interaction: every request of the result at once, keyed as the server keyed them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
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
