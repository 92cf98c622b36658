//! [`ExecError`]: why an op was not run, or what its tool reported; its status, kind and
//! Problem, the telemetry event it is reported as (decided by its type, and for a server
//! that is not ready by its state and Problem kind, never by a message's words), and its
//! scrubbing.

use serde_json::Value;

use super::op::OpError;
use super::quote::{LISTED_TOOLS, capped, name};
use crate::model::{CallError, Cause, ServerState, TelemetryEvent};
use crate::projection::{EXEC_CLOSE, EXEC_OPEN};

/// How many characters of a tool's error text an [`ExecError::ToolError`] message shows.
const TOOL_TEXT_CHARS: usize = 500;

/// Why an op was not run, or what its tool reported. [`ExecError::status`] is its
/// HTTP-like status and [`ExecError::problem`] its [`crate::Problem`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The op could not be read (400).
    #[error(transparent)]
    BadOp(#[from] OpError),
    /// No such server in the workspace (404).
    #[error("there is no server \"{}\" in this workspace: {}", name(.server), enabled_list(.enabled))]
    UnknownServer {
        /// The alias asked for.
        server: String,
        /// The enabled servers, to choose from.
        enabled: Vec<String>,
    },
    /// The server is configured but disabled in this workspace (409).
    #[error(
        "server \"{0}\" is disabled in this workspace: enable it (`plurnk-mcp enable {0}`, or `Workspace::enable`) and send the op again",
        name(.server)
    )]
    Disabled {
        /// The alias.
        server: String,
    },
    /// The server is enabled but not ready (503).
    #[error("server \"{}\" is {state}, not ready: {detail}; send the op again once it is ready", name(.server))]
    NotReady {
        /// The alias.
        server: String,
        /// Its state.
        state: ServerState,
        /// Its Problem's kind, when it has one.
        kind: Option<String>,
        /// Why it is not ready, as its Problem says, when it has one.
        cause: Option<Cause>,
        /// Its Problem's detail, or what its state means.
        detail: String,
    },
    /// The server has no enabled tool of that name (404): unknown, or left out by its
    /// `_TOOLS` policy.
    #[error(
        "server \"{0}\" has no enabled tool \"{1}\": {hint}; list them with `{EXEC_OPEN}[{0}]:?{EXEC_CLOSE}`, or read {family}",
        name(.server),
        name(.tool)
    )]
    UnknownTool {
        /// The alias.
        server: String,
        /// The tool asked for.
        tool: String,
        /// Close matches, or the server's tools.
        hint: String,
        /// The server's family document ([`crate::projection::family_uri`]).
        family: String,
    },
    /// The input schema the server sent for the tool cannot be compiled (502): the
    /// server's fault, not the op's.
    #[error(
        "server \"{}\" sent an input schema for its tool \"{}\" that cannot be used ({detail}): this is the server's fault, and the tool cannot be called until the server sends a valid schema",
        name(.server),
        name(.tool)
    )]
    BadSchema {
        /// The alias.
        server: String,
        /// The tool.
        tool: String,
        /// Why the schema was refused.
        detail: String,
    },
    /// The arguments fail the tool's input schema (422).
    #[error(
        "the arguments of {}/{} do not match its input schema: {}; its exact contract is {document}",
        name(.server),
        name(.tool),
        failure_list(.failures, .more)
    )]
    BadArguments {
        /// The alias.
        server: String,
        /// The tool.
        tool: String,
        /// Each failure (bounded), as `<instance path>: <what was expected>`.
        failures: Vec<String>,
        /// How many more failures there were.
        more: usize,
        /// The tool's document ([`crate::projection::tool_uri`]).
        document: String,
    },
    /// The tool answered with `isError: true` (status 500); `result` is its whole result.
    #[error(
        "{}/{} reported a tool error (isError): {}",
        name(.server),
        name(.tool),
        tool_text(.result)
    )]
    ToolError {
        /// The alias.
        server: String,
        /// The tool.
        tool: String,
        /// 500.
        status: u16,
        /// The whole result object, as the server returned it.
        result: Value,
    },
    /// The call itself failed (a JSON-RPC error, a timeout, a lost connection, …).
    #[error("{error}")]
    Call {
        /// The alias.
        server: String,
        /// The tool.
        tool: String,
        /// How it failed (boxed: it is the largest of these errors by far).
        error: Box<CallError>,
    },
    /// [`effect`](crate::exec::effect) was asked about a server or tool the snapshot does not hold: the caller
    /// broke the contract to validate against the same snapshot first (500).
    #[error(
        "internal contract: effect() was asked about {}, which the snapshot does not hold; validate the op against the same snapshot first",
        target(.server, .tool.as_deref())
    )]
    Unregistered {
        /// The alias.
        server: String,
        /// The tool, for a call.
        tool: Option<String>,
    },
}

impl ExecError {
    /// The HTTP-like status: 400 a bad op, 401 a server that needs an authorization it does
    /// not have, 404 an unknown server or tool, 409 a disabled server, 422 arguments that
    /// fail the schema, 500 a tool error (or a JSON-RPC error), 502 a server's unusable
    /// schema or result, 503 a server not ready (or lost), 504 a timeout, 499 a call the
    /// caller cancelled.
    pub fn status(&self) -> u16 {
        if self.telemetry() == Some(TelemetryEvent::AuthRequired) {
            return 401;
        }
        match self {
            Self::BadOp(_) => 400,
            Self::UnknownServer { .. } | Self::UnknownTool { .. } => 404,
            Self::Disabled { .. } => 409,
            Self::NotReady { .. } => 503,
            Self::BadSchema { .. } => 502,
            Self::BadArguments { .. } => 422,
            Self::ToolError { status, .. } => *status,
            Self::Unregistered { .. } => 500,
            Self::Call { error, .. } => match **error {
                CallError::UnknownServer(_)
                | CallError::UnknownTool { .. }
                | CallError::UnknownPrompt { .. } => 404,
                CallError::InvalidArguments { .. } => 422,
                CallError::Unsupported { .. } => 501,
                CallError::Remote { .. } | CallError::Interaction { .. } => 500,
                CallError::Protocol { .. } => 502,
                CallError::Timeout { .. } => 504,
                CallError::Cancelled { .. } => 499,
                CallError::NotReady { .. }
                | CallError::ConnectionLost { .. }
                | CallError::Closing { .. }
                | CallError::Overloaded { .. }
                | CallError::ShuttingDown => 503,
            },
        }
    }

    /// A stable machine-readable kind, such as `unknown-tool`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadOp(_) => "bad-op",
            Self::UnknownServer { .. } => "unknown-server",
            Self::Disabled { .. } => "server-disabled",
            Self::NotReady { .. } => "server-not-ready",
            Self::UnknownTool { .. } => "unknown-tool",
            Self::BadSchema { .. } => "bad-input-schema",
            Self::BadArguments { .. } => "bad-arguments",
            Self::ToolError { .. } => "tool-error",
            Self::Unregistered { .. } => "unregistered-target",
            Self::Call { error, .. } => match **error {
                CallError::Remote { .. } => "remote-error",
                CallError::Timeout { .. } => "timeout",
                CallError::Cancelled { .. } => "cancelled",
                CallError::ConnectionLost { .. } => "connection-lost",
                CallError::Overloaded { .. } => "overloaded",
                CallError::ShuttingDown => "shutting-down",
                _ => "call-failed",
            },
        }
    }

    /// The failure as a [`crate::Problem`].
    pub fn problem(&self) -> crate::Problem {
        crate::Problem {
            listing: false,
            status: self.status(),
            kind: self.kind().to_owned(),
            detail: self.to_string(),
            retryable: match self {
                Self::NotReady { .. } => true,
                Self::Call { error, .. } => error.is_retryable(),
                _ => false,
            },
        }
    }

    /// The telemetry event [`run`](crate::exec::run) reports this failure as, if any: a cancelled call, a
    /// host that is shutting down or overloaded, a broken interaction and a broken
    /// contract are not the server's failures and report none.
    pub fn telemetry(&self) -> Option<TelemetryEvent> {
        Some(match self {
            Self::BadOp(error) => {
                error.server()?;
                TelemetryEvent::BadArguments
            }
            Self::UnknownServer { .. } | Self::Disabled { .. } | Self::UnknownTool { .. } => {
                TelemetryEvent::NotConfigured
            }
            Self::NotReady { state, cause, .. } => not_ready_event(*state, *cause),
            Self::BadSchema { .. } => TelemetryEvent::ListFailed,
            Self::BadArguments { .. } => TelemetryEvent::BadArguments,
            Self::ToolError { .. } => TelemetryEvent::ToolError,
            Self::Unregistered { .. } => return None,
            Self::Call { error, .. } => match &**error {
                CallError::UnknownServer(_) | CallError::UnknownTool { .. } => {
                    TelemetryEvent::NotConfigured
                }
                // Refused at the server's gate: its state says whether it waits for an
                // authorization; why it is down otherwise is the snapshot's to say.
                CallError::NotReady { state, .. } => not_ready_event(*state, None),
                CallError::InvalidArguments { .. } => TelemetryEvent::BadArguments,
                CallError::Remote { .. } | CallError::Protocol { .. } => TelemetryEvent::ToolError,
                CallError::Timeout { .. }
                | CallError::ConnectionLost { .. }
                | CallError::Closing { .. } => TelemetryEvent::Unreachable,
                CallError::Cancelled { .. }
                | CallError::Interaction { .. }
                | CallError::Overloaded { .. }
                | CallError::ShuttingDown
                | CallError::Unsupported { .. }
                | CallError::UnknownPrompt { .. } => return None,
            },
        })
    }

    /// The server the failure concerns, when the op named one.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::BadOp(error) => error.server(),
            Self::UnknownServer { server, .. }
            | Self::Disabled { server }
            | Self::NotReady { server, .. }
            | Self::UnknownTool { server, .. }
            | Self::BadSchema { server, .. }
            | Self::BadArguments { server, .. }
            | Self::ToolError { server, .. }
            | Self::Call { server, .. }
            | Self::Unregistered { server, .. } => Some(server),
        }
    }

    /// The same error with every registered secret scrubbed from its text and data.
    pub(super) fn scrubbed(self) -> Self {
        let scrub = |text: &mut String| crate::redact::scrub_in_place(text);
        let mut error = self;
        match &mut error {
            Self::BadOp(op) => *op = op.clone().scrubbed(),
            Self::UnknownServer { server, enabled } => {
                scrub(server);
                enabled.iter_mut().for_each(scrub);
            }
            Self::Disabled { server } => scrub(server),
            Self::NotReady {
                server,
                kind,
                detail,
                ..
            } => {
                scrub(server);
                kind.iter_mut().for_each(scrub);
                *detail = crate::redact::scrub_capped(detail, crate::redact::SHOWN_CHARS);
            }
            Self::UnknownTool {
                server,
                tool,
                hint,
                family,
            } => {
                for text in [server, tool, hint, family] {
                    scrub(text);
                }
            }
            Self::BadSchema {
                server,
                tool,
                detail,
            } => {
                for text in [server, tool, detail] {
                    scrub(text);
                }
            }
            Self::BadArguments {
                server,
                tool,
                failures,
                document,
                ..
            } => {
                for text in [server, tool, document] {
                    scrub(text);
                }
                failures.iter_mut().for_each(scrub);
            }
            Self::ToolError {
                server,
                tool,
                result,
                ..
            } => {
                scrub(server);
                scrub(tool);
                crate::redact::scrub_json(result);
            }
            Self::Call {
                server,
                tool,
                error,
            } => {
                scrub(server);
                scrub(tool);
                **error = error.as_ref().clone().scrubbed();
            }
            Self::Unregistered { server, tool } => {
                scrub(server);
                tool.iter_mut().for_each(scrub);
            }
        }
        error
    }
}

/// The event of a server that is not ready, from its state and its Problem's cause
/// ([`crate::Cause`]): waiting for a person's OAuth authorization, or a Problem of
/// authorization, is `mcp_auth_required`; a catalog that could not be listed is
/// `mcp_list_failed`; anything else is `mcp_unreachable`. What a Problem's text says
/// decides nothing.
fn not_ready_event(state: ServerState, cause: Option<Cause>) -> TelemetryEvent {
    if state == ServerState::AuthorizationRequired {
        return TelemetryEvent::AuthRequired;
    }
    match cause {
        Some(Cause::Authorization) => TelemetryEvent::AuthRequired,
        Some(Cause::Listing) => TelemetryEvent::ListFailed,
        _ => TelemetryEvent::Unreachable,
    }
}

fn enabled_list(enabled: &[String]) -> String {
    if enabled.is_empty() {
        return "no server is enabled here".to_owned();
    }
    let shown: Vec<String> = enabled.iter().take(LISTED_TOOLS).map(|s| name(s)).collect();
    let more = enabled.len() - shown.len();
    let list = shown.join(", ");
    if more == 0 {
        format!("the enabled servers are {list}")
    } else {
        format!("the enabled servers are {list} and {more} more")
    }
}

fn failure_list(failures: &[String], more: &usize) -> String {
    let list = failures.join("; ");
    match *more {
        0 => list,
        more => format!("{list}; and {more} more"),
    }
}

fn tool_text(result: &Value) -> String {
    let text = crate::model::ToolResult {
        is_error: true,
        result: result.clone(),
    }
    .text();
    if text.trim().is_empty() {
        return "it gave no text".to_owned();
    }
    capped(text.trim(), TOOL_TEXT_CHARS)
}

fn target(server: &str, tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("{}/{}", name(server), name(tool)),
        None => format!("server \"{}\"", name(server)),
    }
}
