//! The EXEC bridge: the op a model writes (`<<EXEC[server](tool):{…}:EXEC`) read, checked
//! against one snapshot, classified and run, with a telemetry event for every failure.
//!
//! | op | what it does | effect |
//! |---|---|---|
//! | `<<EXEC[server](tool):{"name":"value"}:EXEC` | calls `tool` with the JSON object as its arguments | the tool's, from `_READ` |
//! | `<<EXEC[server](tool):EXEC` | calls `tool` with no arguments (`{}`) | the tool's |
//! | `<<EXEC[server]:?:EXEC`, `…:help:EXEC`, `…::EXEC`, `<<EXEC[server]:EXEC` | the server's live catalog | `read` |
//!
//! The steps are separate so an embedder can gate between them: [`parse`] (pure), then
//! [`validate`] and [`effect`] against one [`WorkspaceSnapshot`] (synchronous, no I/O), then
//! [`run`], which does all three against the workspace's current snapshot before it calls.
//! Only the operator's `_READ` list decides an effect; a server's MCP annotations
//! (`readOnlyHint`, …) are never consulted.
//!
//! A result is one JSON value, lossless: the tool result object exactly as the server
//! returned it (scrubbed of registered secrets), or the catalog. A result the tool flagged
//! `isError` is [`ExecError::ToolError`] (status 500) carrying that whole result.
//!
//! Every failure [`run`] returns is also sent on the host's event stream as a
//! [`HostEvent::Telemetry`] with source `exec:<server>` ([`ExecError::telemetry`] says
//! which event). An op so broken that no server can be read from it (no `[server]`, an
//! unclosed `[`, an empty name, over [`MAX_OP_BYTES`]) names no source, so it is returned
//! but not reported; a bad op whose `[server]` was read is reported as
//! `mcp_bad_arguments` for that server. The event is decided by the error's type and, for a
//! server that is not ready, its state and Problem kind ([`crate::Cause`]), never by what a
//! message says; `mcp_auth_required` has status 401 and names the server and its resource
//! ([`crate::ProtectedResource`], seed 000's `{ server, resource }`).

use std::fmt;

use serde_json::{Map, Value};

use crate::host::{CallOptions, Workspace};
use crate::model::{
    CallError, Cause, Effect, HostEvent, ProtectedResource, ServerSnapshot, ServerState,
    TelemetryEvent, WorkspaceSnapshot,
};
use crate::projection::{self, EXEC_CLOSE, EXEC_OPEN};

/// The longest op [`parse`] reads, in bytes; a longer one is refused whole.
pub const MAX_OP_BYTES: usize = 1 << 20;

/// How many schema failures an error lists before it says how many more there are.
const LISTED_FAILURES: usize = 8;

/// How many characters of one schema failure an error shows.
const FAILURE_CHARS: usize = 200;

/// How many characters of a name an error shows.
const NAME_CHARS: usize = 128;

/// How many characters of unexpected text an error quotes.
const SNIPPET_CHARS: usize = 40;

/// How many tool names an unknown-tool error lists when nothing is close.
const LISTED_TOOLS: usize = 20;

/// How many characters of a tool's error text an [`ExecError::ToolError`] message shows.
const TOOL_TEXT_CHARS: usize = 500;

/// How many characters of a failure a telemetry event's detail carries.
const EVENT_DETAIL_CHARS: usize = 2000;

/// The shape of every op, as errors quote it.
const SHAPE: Shape = Shape;

/// What [`SHAPE`] writes out.
struct Shape;

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{EXEC_OPEN}[server](tool):{{\"name\":\"value\"}}{EXEC_CLOSE}`, or `{EXEC_OPEN}[server]:?{EXEC_CLOSE}` for the server's tools"
        )
    }
}

/// One EXEC op, as [`parse`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `<<EXEC[server](tool):{…}:EXEC`: call `tool` of `server` with `arguments`.
    Call {
        /// The server alias inside `[…]`.
        server: String,
        /// The exact tool name inside `(…)`.
        tool: String,
        /// The body's JSON object; empty for an empty body.
        arguments: Map<String, Value>,
    },
    /// `<<EXEC[server]:?:EXEC` (or `help`, or an empty body): the server's live catalog.
    Catalog {
        /// The server alias inside `[…]`.
        server: String,
    },
}

impl Op {
    /// The server the op addresses.
    pub fn server(&self) -> &str {
        match self {
            Self::Call { server, .. } | Self::Catalog { server } => server,
        }
    }
}

/// Why an op could not be read. Each message names what is wrong and shows the shape to
/// write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// Over [`MAX_OP_BYTES`].
    #[error("the op is {bytes} bytes, over the limit of {max} bytes: send smaller arguments", max = MAX_OP_BYTES)]
    TooLarge {
        /// Its length.
        bytes: usize,
    },
    /// It does not start with `<<EXEC`.
    #[error("an op starts with `{EXEC_OPEN}`, found {}: write {SHAPE}", snippet(.found))]
    NotAnOp {
        /// What it starts with.
        found: String,
    },
    /// No closing `:EXEC` at all.
    #[error("the op is not closed: it must end with `{EXEC_CLOSE}`, as in {SHAPE}")]
    Unclosed {
        /// The server, when one could be read.
        server: Option<String>,
    },
    /// Something follows the last `:EXEC`.
    #[error(
        "nothing may follow the closing `{EXEC_CLOSE}`, found {}: end the op with `{EXEC_CLOSE}` (a body may hold `{EXEC_CLOSE}` in a JSON string, but the op still ends with its own)",
        snippet(.found)
    )]
    TrailingGarbage {
        /// The server, when one could be read.
        server: Option<String>,
        /// What follows.
        found: String,
    },
    /// `<<EXEC` is not followed by `[`.
    #[error("`{EXEC_OPEN}` must be followed by `[server]`, found {}: write {SHAPE}", snippet(.found))]
    MissingServer {
        /// What follows `<<EXEC`.
        found: String,
    },
    /// `[` with no `]`.
    #[error("the `[server]` after `{EXEC_OPEN}` has no closing `]`: write {SHAPE}")]
    UnclosedServer,
    /// `[]`.
    #[error("the server name in `[]` is empty: name one, as in {SHAPE}")]
    EmptyServer,
    /// `(` with no `)`.
    #[error(
        "the `(tool)` after `[{}]` has no closing `)`: write `{EXEC_OPEN}[{0}](tool):{{…}}{EXEC_CLOSE}`",
        name(.server)
    )]
    UnclosedTool {
        /// The server.
        server: String,
    },
    /// `()`.
    #[error(
        "the tool name in `()` after `[{0}]` is empty: name one, as in `{EXEC_OPEN}[{0}](tool):{{…}}{EXEC_CLOSE}`, or list the tools with `{EXEC_OPEN}[{0}]:?{EXEC_CLOSE}`",
        name(.server)
    )]
    EmptyTool {
        /// The server.
        server: String,
    },
    /// `[server]` is followed by neither `(tool)` nor `:`.
    #[error(
        "`[{0}]` must be followed by `(tool)` or `:`, found {1}: write `{EXEC_OPEN}[{0}](tool):{{…}}{EXEC_CLOSE}` to call a tool, or `{EXEC_OPEN}[{0}]:?{EXEC_CLOSE}` for its tools",
        name(.server),
        snippet(.found)
    )]
    AfterServer {
        /// The server.
        server: String,
        /// What follows `]`.
        found: String,
    },
    /// `(tool)` is followed by something other than `:`.
    #[error(
        "`({1})` must be followed by `:` and the JSON arguments, found {2}: write `{EXEC_OPEN}[{0}]({1}):{{…}}{EXEC_CLOSE}`",
        name(.server),
        name(.tool),
        snippet(.found)
    )]
    AfterTool {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What follows `)`.
        found: String,
    },
    /// A catalog op with a body other than `?`, `help` or nothing.
    #[error(
        "`{EXEC_OPEN}[{0}]:…{EXEC_CLOSE}` without a `(tool)` lists the server's tools and takes `?`, `help` or nothing as its body, found {1}: to call a tool write `{EXEC_OPEN}[{0}](tool):{{…}}{EXEC_CLOSE}`",
        name(.server),
        snippet(.found)
    )]
    CatalogBody {
        /// The server.
        server: String,
        /// The body.
        found: String,
    },
    /// The body is not JSON.
    #[error(
        "the arguments of {0}/{1} are not valid JSON ({reason}, counted in the body): send one JSON object, as in `{EXEC_OPEN}[{0}]({1}):{{\"name\":\"value\"}}{EXEC_CLOSE}`, or an empty body for none",
        name(.server),
        name(.tool)
    )]
    NotJson {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The line of the body where reading stopped, from 1.
        line: usize,
        /// The column on that line, from 1.
        column: usize,
        /// serde_json's words, which carry the line and column.
        reason: String,
    },
    /// The body is JSON but not an object.
    #[error(
        "the arguments of {0}/{1} are a JSON {found}, not an object: send an object of named arguments, as in `{EXEC_OPEN}[{0}]({1}):{{\"name\":\"value\"}}{EXEC_CLOSE}`, or an empty body for none",
        name(.server),
        name(.tool)
    )]
    NotAnObject {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What it is: `array`, `string`, `number`, `boolean` or `null`.
        found: &'static str,
    },
}

impl OpError {
    /// The server named in the op, when one could be read before the fault.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::Unclosed { server } | Self::TrailingGarbage { server, .. } => server.as_deref(),
            Self::UnclosedTool { server }
            | Self::EmptyTool { server }
            | Self::AfterServer { server, .. }
            | Self::AfterTool { server, .. }
            | Self::CatalogBody { server, .. }
            | Self::NotJson { server, .. }
            | Self::NotAnObject { server, .. } => Some(server),
            Self::TooLarge { .. }
            | Self::NotAnOp { .. }
            | Self::MissingServer { .. }
            | Self::UnclosedServer
            | Self::EmptyServer => None,
        }
    }

    fn scrubbed(mut self) -> Self {
        let scrub = |text: &mut String| crate::redact::scrub_in_place(text);
        match &mut self {
            Self::Unclosed { server } => server.iter_mut().for_each(scrub),
            Self::TrailingGarbage { server, found } => {
                server.iter_mut().for_each(scrub);
                scrub(found);
            }
            Self::NotAnOp { found } | Self::MissingServer { found } => scrub(found),
            Self::UnclosedTool { server } | Self::EmptyTool { server } => scrub(server),
            Self::AfterServer { server, found } | Self::CatalogBody { server, found } => {
                scrub(server);
                scrub(found);
            }
            Self::AfterTool {
                server,
                tool,
                found,
            } => {
                scrub(server);
                scrub(tool);
                scrub(found);
            }
            Self::NotJson {
                server,
                tool,
                reason,
                ..
            } => {
                scrub(server);
                scrub(tool);
                scrub(reason);
            }
            Self::NotAnObject { server, tool, .. } => {
                scrub(server);
                scrub(tool);
            }
            Self::TooLarge { .. } | Self::UnclosedServer | Self::EmptyServer => {}
        }
        self
    }
}

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
        /// The server's family document ([`projection::family_uri`]).
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
        /// The tool's document ([`projection::tool_uri`]).
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
    /// [`effect`] was asked about a server or tool the snapshot does not hold: the caller
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

    /// The telemetry event [`run`] reports this failure as, if any: a cancelled call, a
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
            Self::NotReady { state, kind, .. } => not_ready_event(*state, kind.as_deref()),
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
    fn scrubbed(self) -> Self {
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

/// An op that passed [`validate`] against one snapshot: only `validate` makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    op: Op,
    effect: Effect,
    version: u64,
}

impl Validated {
    /// The op.
    pub fn op(&self) -> &Op {
        &self.op
    }

    /// Its effect, as [`effect`] classifies it.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    /// The version of the snapshot it was checked against.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The op, to run.
    pub fn into_op(self) -> Op {
        self.op
    }
}

// === parse ===

/// Reads one op: `<<EXEC[server](tool):<json>:EXEC`, `<<EXEC[server](tool):EXEC` (no
/// arguments), or the catalog forms `<<EXEC[server]:?:EXEC`, `…:help:EXEC`, `…::EXEC` and
/// `<<EXEC[server]:EXEC`. Whitespace around the whole op is allowed. The body is everything
/// between the `:` after `]` or `)` and the op's last `:EXEC`, which must end it; a call's
/// body is a JSON object, or empty (or whitespace) for none. Pure: no I/O, no panic on any
/// input, nothing over [`MAX_OP_BYTES`] read.
pub fn parse(op: &str) -> Result<Op, OpError> {
    if op.len() > MAX_OP_BYTES {
        return Err(OpError::TooLarge { bytes: op.len() });
    }
    let op = op.trim();
    let Some(after) = op.strip_prefix(EXEC_OPEN) else {
        return Err(OpError::NotAnOp { found: excerpt(op) });
    };
    // The server is read first, so that a fault further on can still name it.
    let server = read_server(after);
    let known = server.as_ref().ok().map(|(server, _)| (*server).to_owned());
    let Some(inner) = after.strip_suffix(EXEC_CLOSE) else {
        return Err(match op.rfind(EXEC_CLOSE) {
            Some(at) if at >= EXEC_OPEN.len() => OpError::TrailingGarbage {
                server: known,
                found: excerpt(&op[at + EXEC_CLOSE.len()..]),
            },
            _ => OpError::Unclosed { server: known },
        });
    };
    let (server, head) = server?;
    // Between `]` and the closing `:EXEC`. The closing `:EXEC` holds neither `]` nor `)`, so
    // what `read_server` found lies inside `inner`.
    let rest = inner.get(head..).unwrap_or_default();
    let server = server.to_owned();
    if let Some(rest) = rest.strip_prefix('(') {
        let Some(close) = rest.find(')') else {
            return Err(OpError::UnclosedTool { server });
        };
        let tool = &rest[..close];
        if tool.is_empty() {
            return Err(OpError::EmptyTool { server });
        }
        let tail = &rest[close + 1..];
        let body = if tail.is_empty() {
            // `<<EXEC[server](tool):EXEC`: the `:` after `)` is the closing one's.
            ""
        } else if let Some(body) = tail.strip_prefix(':') {
            body
        } else {
            return Err(OpError::AfterTool {
                server,
                tool: tool.to_owned(),
                found: excerpt(tail),
            });
        };
        let arguments = arguments(body, &server, tool)?;
        return Ok(Op::Call {
            server,
            tool: tool.to_owned(),
            arguments,
        });
    }
    let body = if rest.is_empty() {
        ""
    } else if let Some(body) = rest.strip_prefix(':') {
        body.trim()
    } else {
        return Err(OpError::AfterServer {
            server,
            found: excerpt(rest),
        });
    };
    match body {
        "" | "?" | "help" => Ok(Op::Catalog { server }),
        _ => Err(OpError::CatalogBody {
            server,
            found: excerpt(body),
        }),
    }
}

/// The server in `[…]` at the start of `after` (what follows `<<EXEC`), and where what
/// follows its `]` starts.
fn read_server(after: &str) -> Result<(&str, usize), OpError> {
    let Some(rest) = after.strip_prefix('[') else {
        return Err(OpError::MissingServer {
            found: excerpt(after),
        });
    };
    let Some(close) = rest.find(']') else {
        return Err(OpError::UnclosedServer);
    };
    let server = &rest[..close];
    if server.is_empty() {
        return Err(OpError::EmptyServer);
    }
    Ok((server, 1 + close + 1))
}

/// A call's body as its arguments object.
fn arguments(body: &str, server: &str, tool: &str) -> Result<Map<String, Value>, OpError> {
    if body.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(other) => Err(OpError::NotAnObject {
            server: server.to_owned(),
            tool: tool.to_owned(),
            found: json_kind(&other),
        }),
        Err(error) => Err(OpError::NotJson {
            server: server.to_owned(),
            tool: tool.to_owned(),
            line: error.line(),
            column: error.column(),
            reason: error.to_string(),
        }),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// === validate and classify ===

/// Checks `op` against one snapshot before anything runs: the server exists, is enabled
/// and ready; for a call, the tool is one of its enabled tools and the arguments satisfy
/// the tool's input schema (JSON Schema, 2020-12 unless the schema's `$schema` names
/// another dialect; no remote `$ref` is ever fetched).
pub fn validate(op: &Op, snapshot: &WorkspaceSnapshot) -> Result<Validated, ExecError> {
    let alias = op.server();
    let Some(server) = snapshot.server(alias) else {
        return Err(ExecError::UnknownServer {
            server: alias.to_owned(),
            enabled: snapshot
                .servers
                .values()
                .filter(|server| server.state != ServerState::Disabled)
                .map(|server| server.alias.clone())
                .collect(),
        });
    };
    match server.state {
        ServerState::Ready => {}
        ServerState::Disabled => {
            return Err(ExecError::Disabled {
                server: alias.to_owned(),
            });
        }
        state => {
            return Err(ExecError::NotReady {
                server: alias.to_owned(),
                state,
                kind: server.problem.as_ref().map(|problem| problem.kind.clone()),
                detail: server
                    .problem
                    .as_ref()
                    .map(|problem| problem.detail.clone())
                    .unwrap_or_else(|| match state {
                        ServerState::Connecting => "it is still connecting".to_owned(),
                        _ => format!("it is {state}"),
                    }),
            });
        }
    }
    if let Op::Call {
        tool, arguments, ..
    } = op
    {
        let Some(info) = server.tool(tool) else {
            return Err(ExecError::UnknownTool {
                server: alias.to_owned(),
                tool: tool.clone(),
                hint: tool_hint(server, tool),
                family: projection::family_uri(alias),
            });
        };
        check_arguments(alias, tool, &info.input_schema, arguments)?;
    }
    Ok(Validated {
        op: op.clone(),
        effect: effect(op, snapshot)?,
        version: snapshot.version,
    })
}

/// The op's effect, synchronously: a catalog op is `read`; a call has its tool's effect
/// from the snapshot (`_READ` → [`Effect::Read`], every other tool [`Effect::Host`]). MCP
/// annotations are never consulted. A server or tool the snapshot does not hold is
/// [`ExecError::Unregistered`]: validate against the same snapshot first.
pub fn effect(op: &Op, snapshot: &WorkspaceSnapshot) -> Result<Effect, ExecError> {
    let unregistered = |tool: Option<&str>| ExecError::Unregistered {
        server: op.server().to_owned(),
        tool: tool.map(str::to_owned),
    };
    let server = snapshot
        .server(op.server())
        .ok_or_else(|| unregistered(None))?;
    match op {
        Op::Catalog { .. } => Ok(Effect::Read),
        Op::Call { tool, .. } => server
            .tool(tool)
            .map(|info| info.effect)
            .ok_or_else(|| unregistered(Some(tool))),
    }
}

/// The arguments against the tool's input schema; a schema that cannot be compiled is the
/// server's fault.
fn check_arguments(
    server: &str,
    tool: &str,
    schema: &Value,
    arguments: &Map<String, Value>,
) -> Result<(), ExecError> {
    // `offline`: a `$ref` outside the schema is never fetched (and the crate is built
    // without its HTTP and file resolvers besides).
    let validator = jsonschema::options()
        .offline()
        .build(schema)
        .map_err(|error| ExecError::BadSchema {
            server: server.to_owned(),
            tool: tool.to_owned(),
            detail: capped(&error.to_string(), FAILURE_CHARS),
        })?;
    let instance = Value::Object(arguments.clone());
    let mut failures = Vec::new();
    let mut more = 0;
    for error in validator.iter_errors(&instance) {
        if failures.len() == LISTED_FAILURES {
            more += 1;
            continue;
        }
        let path = error.instance_path().as_str();
        let path = if path.is_empty() {
            "(the arguments)"
        } else {
            path
        };
        failures.push(capped(&format!("{path}: {error}"), FAILURE_CHARS));
    }
    if failures.is_empty() {
        return Ok(());
    }
    Err(ExecError::BadArguments {
        server: server.to_owned(),
        tool: tool.to_owned(),
        failures,
        more,
        document: projection::tool_uri(server, tool),
    })
}

/// What an unknown-tool error suggests: the close names, else the server's tools.
fn tool_hint(server: &ServerSnapshot, asked: &str) -> String {
    let names: Vec<&str> = server.tools.iter().map(|tool| tool.name.as_str()).collect();
    if names.is_empty() {
        return "it has no enabled tools".to_owned();
    }
    let close = close_matches(asked, &names);
    if !close.is_empty() {
        let quoted: Vec<String> = close.iter().map(|name| format!("\"{name}\"")).collect();
        let lead = if quoted.len() == 1 {
            "the closest is"
        } else {
            "the closest are"
        };
        return format!("{lead} {}", quoted.join(" or "));
    }
    let shown: Vec<&str> = names.iter().copied().take(LISTED_TOOLS).collect();
    match names.len() - shown.len() {
        0 => format!("its enabled tools are {}", shown.join(", ")),
        more => format!("its enabled tools are {} and {more} more", shown.join(", ")),
    }
}

/// Up to three names close to `asked`: the same but for case, one containing the other, or
/// a few edits apart.
fn close_matches<'n>(asked: &str, names: &[&'n str]) -> Vec<&'n str> {
    let asked = asked.to_lowercase();
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .filter_map(|name| {
            let lower = name.to_lowercase();
            if lower == asked {
                return Some((0, *name));
            }
            if asked.len() >= 3 && (lower.contains(&asked) || asked.contains(&lower)) {
                return Some((1, *name));
            }
            let limit = (asked.chars().count() / 3).clamp(1, 3);
            edits(&asked, &lower, limit).map(|distance| (1 + distance, *name))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

/// The edit distance between `a` and `b` (insertions, deletions, substitutions and swaps of
/// neighbours) when it is at most `limit`; names longer than a name should be are not
/// compared.
fn edits(a: &str, b: &str, limit: usize) -> Option<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() > 64 || b.len() > 64 || a.len().abs_diff(b.len()) > limit {
        return None;
    }
    // Three rows of the optimal-string-alignment table: two back, one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut current = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            let mut distance = (previous[j] + usize::from(a[i] != b[j]))
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                distance = distance.min(before[j - 1] + 1);
            }
            current[j + 1] = distance;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous
        .last()
        .copied()
        .filter(|distance| *distance <= limit)
}

/// The event of a server that is not ready, from its state and its Problem's kind
/// ([`crate::Cause`]): waiting for a person's OAuth authorization, or a Problem of
/// authorization, is `mcp_auth_required`; a catalog that could not be listed is
/// `mcp_list_failed`; anything else is `mcp_unreachable`. What a Problem's text says
/// decides nothing.
fn not_ready_event(state: ServerState, kind: Option<&str>) -> TelemetryEvent {
    if state == ServerState::AuthorizationRequired {
        return TelemetryEvent::AuthRequired;
    }
    match kind.map(Cause::of_kind) {
        Some(Cause::Authorization) => TelemetryEvent::AuthRequired,
        Some(Cause::Listing) => TelemetryEvent::ListFailed,
        _ => TelemetryEvent::Unreachable,
    }
}

// === run ===

/// Parses `op`, validates it against the workspace's current snapshot, and runs it: a call
/// through [`Workspace::call_tool`] (progress, cancellation, deadline and interaction pass
/// through `options` unchanged), or the catalog from the same snapshot.
///
/// The value is the tool's whole result object as the server returned it (scrubbed of
/// registered secrets), or the catalog: `{ "server", "summary", "tools": [{ "name",
/// "summary", "effect", "inputSchema" }] }`. Every failure is scrubbed and reported on the
/// host's event
/// stream as a [`HostEvent::Telemetry`] (see [`ExecError::telemetry`]).
pub async fn run(
    workspace: &Workspace,
    op: &str,
    options: CallOptions,
) -> Result<Value, ExecError> {
    match attempt(workspace, op, options).await {
        Ok(value) => Ok(value),
        Err(error) => {
            let error = error.scrubbed();
            if let (Some(event), Some(server)) = (error.telemetry(), error.server()) {
                let protected = match event {
                    TelemetryEvent::AuthRequired => protected_resource(workspace, server).await,
                    _ => None,
                };
                workspace.emit(telemetry(
                    server,
                    event,
                    error.status(),
                    &error.to_string(),
                    protected,
                ));
            }
            Err(error)
        }
    }
}

async fn attempt(
    workspace: &Workspace,
    op: &str,
    options: CallOptions,
) -> Result<Value, ExecError> {
    let op = parse(op)?;
    let snapshot = workspace.snapshot();
    match validate(&op, &snapshot)?.into_op() {
        Op::Catalog { server } => {
            let Some(entry) = snapshot.server(&server) else {
                return Err(ExecError::Unregistered { server, tool: None });
            };
            Ok(catalog(entry))
        }
        Op::Call {
            server,
            tool,
            arguments,
        } => {
            let called = workspace
                .call_tool(&server, &tool, Value::Object(arguments), options)
                .await;
            match called {
                Ok(result) if result.is_error => Err(ExecError::ToolError {
                    server,
                    tool,
                    status: 500,
                    result: result.result,
                }),
                Ok(result) => Ok(result.result),
                Err(error) => Err(ExecError::Call {
                    server,
                    tool,
                    error: Box::new(error),
                }),
            }
        }
    }
}

/// The live catalog of a ready server, as the catalog op returns it.
fn catalog(server: &ServerSnapshot) -> Value {
    let tools: Vec<Value> = server
        .tools
        .iter()
        .map(|tool| {
            serde_json::json!({
                "name": tool.name,
                "summary": projection::tool_summary(server, tool),
                "effect": tool.effect,
                "inputSchema": tool.input_schema,
            })
        })
        .collect();
    serde_json::json!({
        "server": server.alias,
        "summary": projection::server_summary(server),
        "tools": tools,
    })
}

/// A telemetry event of `server`, its detail scrubbed and bounded.
fn telemetry(
    server: &str,
    event: TelemetryEvent,
    status: u16,
    detail: &str,
    auth_required: Option<ProtectedResource>,
) -> HostEvent {
    HostEvent::Telemetry {
        source: format!("exec:{}", crate::redact::scrub(&name(server))),
        event,
        status,
        detail: crate::redact::scrub_capped(detail, EVENT_DETAIL_CHARS),
        auth_required,
    }
}

/// The resource `server` needs authorization for: the origin of its URL as its definition
/// gives it (`None` for a server without one, or once the workspace cannot say).
async fn protected_resource(workspace: &Workspace, server: &str) -> Option<ProtectedResource> {
    let summaries = workspace.list().await.ok()?;
    let summary = summaries.iter().find(|summary| summary.alias == server)?;
    let url = summary.definition.get("url")?.as_str()?;
    Some(ProtectedResource {
        server: crate::redact::scrub(&name(server)).into_owned(),
        resource: crate::redact::scrub(&origin_of(url)).into_owned(),
    })
}

/// A URL's origin, `scheme://host:port`: what of a server's URL the host ever shows, since
/// its userinfo, path and query can all hold a credential (some hosted servers put the key
/// in the path).
fn origin_of(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return String::new();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}")
}

// === how errors show what they quote ===

/// A name as an error shows it: control characters as `?`, cut at [`NAME_CHARS`].
fn name(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(NAME_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(NAME_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// Unexpected text as an error quotes it: the start of it, escaped.
fn snippet(text: &str) -> String {
    if text.is_empty() {
        return "nothing".to_owned();
    }
    let start: String = text.chars().take(SNIPPET_CHARS).collect();
    let cut = if text.chars().nth(SNIPPET_CHARS).is_some() {
        "…"
    } else {
        ""
    };
    format!("{start:?}{cut}")
}

/// What an error keeps of unexpected text: enough for [`snippet`] to quote it and to tell
/// that it goes on.
fn excerpt(text: &str) -> String {
    text.chars().take(SNIPPET_CHARS + 1).collect()
}

/// `text` cut at `max` characters, ending in `…` when cut.
fn capped(text: &str, max: usize) -> String {
    if text.chars().nth(max).is_none() {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
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

impl fmt::Display for Op {
    /// The op written out again, as the model would write it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Call {
                server,
                tool,
                arguments,
            } if arguments.is_empty() => write!(f, "{EXEC_OPEN}[{server}]({tool}){EXEC_CLOSE}"),
            Self::Call {
                server,
                tool,
                arguments,
            } => {
                let body = serde_json::to_string(arguments).map_err(|_| fmt::Error)?;
                write!(f, "{EXEC_OPEN}[{server}]({tool}):{body}{EXEC_CLOSE}")
            }
            Self::Catalog { server } => write!(f, "{EXEC_OPEN}[{server}]:?{EXEC_CLOSE}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::model::{Authored, Catalog, Problem, ToolInfo, TransportKind};

    fn call(server: &str, tool: &str, arguments: Value) -> Op {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        Op::Call {
            server: server.into(),
            tool: tool.into(),
            arguments,
        }
    }

    fn catalog_of(server: &str) -> Op {
        Op::Catalog {
            server: server.into(),
        }
    }

    /// The message of the error `op` fails to parse with.
    fn refused(op: &str) -> (OpError, String) {
        match parse(op) {
            Ok(parsed) => panic!("{op:?} parsed as {parsed:?}"),
            Err(error) => {
                let message = error.to_string();
                (error, message)
            }
        }
    }

    fn assert_names(message: &str, words: &[&str]) {
        for word in words {
            assert!(message.contains(word), "{word:?} is not in: {message}");
        }
    }

    // === parse: every form ===

    #[test]
    fn a_call_with_a_json_object_body() {
        assert_eq!(
            parse(r#"<<EXEC[github](create_issue):{"title":"Bug","body":"…"}:EXEC"#),
            Ok(call(
                "github",
                "create_issue",
                json!({"title": "Bug", "body": "…"})
            ))
        );
    }

    #[test]
    fn a_call_with_an_empty_body_has_no_arguments() {
        for op in [
            "<<EXEC[github](list_repos):EXEC",
            "<<EXEC[github](list_repos)::EXEC",
            "<<EXEC[github](list_repos):  \n\t :EXEC",
        ] {
            assert_eq!(
                parse(op),
                Ok(call("github", "list_repos", json!({}))),
                "{op:?}"
            );
        }
    }

    #[test]
    fn every_catalog_form_reads_as_the_catalog() {
        for op in [
            "<<EXEC[github]:?:EXEC",
            "<<EXEC[github]:help:EXEC",
            "<<EXEC[github]::EXEC",
            "<<EXEC[github]:EXEC",
            "<<EXEC[github]: ? :EXEC",
            "<<EXEC[github]:\nhelp\n:EXEC",
        ] {
            assert_eq!(parse(op), Ok(catalog_of("github")), "{op:?}");
        }
    }

    #[test]
    fn whitespace_around_the_op_is_allowed() {
        assert_eq!(
            parse("\n  <<EXEC[fx](echo):{\"text\":\"hi\"}:EXEC \n\t"),
            Ok(call("fx", "echo", json!({"text": "hi"})))
        );
        assert_eq!(parse("  <<EXEC[fx]:?:EXEC\n"), Ok(catalog_of("fx")));
    }

    #[test]
    fn a_body_may_hold_exec_terminators_in_its_strings() {
        assert_eq!(
            parse(r#"<<EXEC[fx](echo):{"text":"a:EXEC b :EXEC"}:EXEC"#),
            Ok(call("fx", "echo", json!({"text": "a:EXEC b :EXEC"})))
        );
    }

    #[test]
    fn a_body_may_span_lines_and_nest() {
        let op =
            "<<EXEC[fx](deep):{\n  \"a\": {\"b\": [1, 2.5, null, true]},\n  \"c\": \"d\"\n}:EXEC";
        assert_eq!(
            parse(op),
            Ok(call(
                "fx",
                "deep",
                json!({"a": {"b": [1, 2.5, null, true]}, "c": "d"})
            ))
        );
    }

    #[test]
    fn names_are_taken_exactly_as_written() {
        assert_eq!(
            parse("<<EXEC[my-server.v2](ns:tool/with.parts):EXEC"),
            Ok(call("my-server.v2", "ns:tool/with.parts", json!({})))
        );
        assert_eq!(
            parse("<<EXEC[ünï](çødé):EXEC"),
            Ok(call("ünï", "çødé", json!({})))
        );
    }

    #[test]
    fn an_op_written_out_again_reads_the_same() {
        for op in [
            call("fx", "echo", json!({"text": "a:EXEC b", "n": [1, -0.5]})),
            call("fx", "list", json!({})),
            catalog_of("fx"),
        ] {
            assert_eq!(parse(&op.to_string()), Ok(op.clone()), "{op}");
        }
    }

    // === parse: every bad op ===

    #[test]
    fn an_op_over_the_bound_is_refused_before_it_is_read() {
        let op = format!(
            "<<EXEC[fx](echo):{{\"text\":\"{}\"}}:EXEC",
            "x".repeat(MAX_OP_BYTES)
        );
        let (error, message) = refused(&op);
        assert_eq!(error, OpError::TooLarge { bytes: op.len() });
        assert_names(&message, &[&op.len().to_string(), "1048576", "limit"]);
    }

    #[test]
    fn an_op_must_start_with_exec() {
        let (error, message) = refused("EXEC[fx](echo):{}:EXEC");
        assert!(matches!(error, OpError::NotAnOp { .. }));
        assert_names(
            &message,
            &[
                "starts with `<<EXEC`",
                "\"EXEC[fx](echo):{}:EXEC\"",
                "<<EXEC[server](tool)",
            ],
        );
        let (_, message) = refused("");
        assert_names(&message, &["found nothing"]);
    }

    #[test]
    fn an_unclosed_op_says_it_must_end_with_exec_and_keeps_its_server() {
        let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":"hi"}"#);
        assert_eq!(
            error,
            OpError::Unclosed {
                server: Some("fx".into())
            }
        );
        assert_names(
            &message,
            &["not closed", "end with `:EXEC`", "<<EXEC[server](tool)"],
        );
        for op in ["<<EXEC", "<<EXEC[fx", "<<EXEC(echo):{}"] {
            let (error, _) = refused(op);
            assert_eq!(error, OpError::Unclosed { server: None }, "{op:?}");
        }
        // `:EXEC` inside a string does not close an op that does not end with one.
        let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":"a:EXEC b"}"#);
        assert!(
            matches!(&error, OpError::TrailingGarbage { server: Some(s), .. } if s == "fx"),
            "{error:?}"
        );
        assert_names(&message, &["closing `:EXEC`", "\" b\\\"}\""]);
    }

    #[test]
    fn text_after_the_closing_exec_is_refused_and_quoted() {
        let (error, message) = refused("<<EXEC[fx](echo):{}:EXEC and then some");
        assert_eq!(
            error,
            OpError::TrailingGarbage {
                server: Some("fx".into()),
                found: " and then some".into()
            }
        );
        assert_names(&message, &["nothing may follow", "\" and then some\""]);
        // A long tail is quoted in part.
        let (_, message) = refused(&format!("<<EXEC[fx]:?:EXEC{}", "y".repeat(10_000)));
        assert!(message.len() < 600, "{message}");
        assert_names(&message, &["yyyy\"…"]);
    }

    #[test]
    fn a_missing_server_is_named() {
        let (error, message) = refused("<<EXEC(echo):{}:EXEC");
        assert!(matches!(error, OpError::MissingServer { .. }));
        assert_names(&message, &["followed by `[server]`", "\"(echo):{}:EXEC\""]);
        let (error, _) = refused("<<EXEC:EXEC");
        assert!(matches!(error, OpError::MissingServer { .. }));
    }

    #[test]
    fn an_unclosed_or_empty_server_is_named() {
        let (error, message) = refused("<<EXEC[fx(echo):{}:EXEC");
        assert_eq!(error, OpError::UnclosedServer);
        assert_names(&message, &["`[server]`", "no closing `]`"]);
        let (error, message) = refused("<<EXEC[](echo):{}:EXEC");
        assert_eq!(error, OpError::EmptyServer);
        assert_names(&message, &["server name", "empty"]);
        assert_eq!(error.server(), None);
    }

    #[test]
    fn an_unclosed_or_empty_tool_is_named_with_its_server() {
        let (error, message) = refused("<<EXEC[fx](echo:{}:EXEC");
        assert_eq!(
            error,
            OpError::UnclosedTool {
                server: "fx".into()
            }
        );
        assert_names(
            &message,
            &[
                "`(tool)` after `[fx]`",
                "no closing `)`",
                "<<EXEC[fx](tool)",
            ],
        );
        let (error, message) = refused("<<EXEC[fx]():{}:EXEC");
        assert_eq!(
            error,
            OpError::EmptyTool {
                server: "fx".into()
            }
        );
        assert_names(&message, &["tool name", "empty", "<<EXEC[fx]:?:EXEC"]);
    }

    #[test]
    fn what_follows_the_server_or_tool_must_be_a_colon() {
        let (error, message) = refused("<<EXEC[fx]echo:{}:EXEC");
        assert!(matches!(error, OpError::AfterServer { .. }), "{error:?}");
        assert_names(
            &message,
            &["`[fx]` must be followed by `(tool)` or `:`", "\"echo:{}\""],
        );
        let (error, message) = refused("<<EXEC[fx](echo){}:EXEC");
        assert!(matches!(error, OpError::AfterTool { .. }), "{error:?}");
        assert_names(
            &message,
            &["`(echo)` must be followed by `:`", "found \"{}\""],
        );
        // Whitespace is not a colon.
        let (error, _) = refused("<<EXEC[fx] (echo):{}:EXEC");
        assert!(matches!(error, OpError::AfterServer { .. }), "{error:?}");
    }

    #[test]
    fn a_catalog_op_takes_no_arguments() {
        let (error, message) = refused(r#"<<EXEC[fx]:{"text":"hi"}:EXEC"#);
        assert!(matches!(error, OpError::CatalogBody { .. }), "{error:?}");
        assert_names(
            &message,
            &[
                "without a `(tool)`",
                "`?`, `help` or nothing",
                "<<EXEC[fx](tool)",
            ],
        );
    }

    #[test]
    fn a_body_that_is_not_json_says_where_reading_stopped() {
        let (error, message) = refused(r#"<<EXEC[fx](echo):{"text":}:EXEC"#);
        let OpError::NotJson { line, column, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!((*line, *column), (1, 9));
        assert_names(
            &message,
            &[
                "fx/echo",
                "not valid JSON",
                "line 1 column 9",
                "one JSON object",
            ],
        );
        let (error, message) = refused("<<EXEC[fx](echo):{\n  \"a\": 1,\n  oops\n}:EXEC");
        assert!(
            matches!(error, OpError::NotJson { line: 3, .. }),
            "{error:?}"
        );
        assert_names(&message, &["line 3 column 3"]);
        // Trailing text after the object is not JSON either.
        let (error, _) = refused(r#"<<EXEC[fx](echo):{"a":1} {"b":2}:EXEC"#);
        assert!(matches!(error, OpError::NotJson { .. }), "{error:?}");
        // Nesting past serde_json's depth is an error, not a stack overflow.
        let deep = format!(
            "<<EXEC[fx](echo):{{\"a\":{}{}}}:EXEC",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let (error, message) = refused(&deep);
        assert!(matches!(error, OpError::NotJson { .. }), "{error:?}");
        assert_names(&message, &["recursion limit"]);
    }

    #[test]
    fn a_body_that_is_json_but_not_an_object_names_what_it_is() {
        for (body, kind) in [
            ("[1,2]", "array"),
            ("\"hi\"", "string"),
            ("42", "number"),
            ("true", "boolean"),
            ("null", "null"),
        ] {
            let (error, message) = refused(&format!("<<EXEC[fx](echo):{body}:EXEC"));
            assert!(
                matches!(&error, OpError::NotAnObject { found, .. } if *found == kind),
                "{error:?}"
            );
            assert_names(
                &message,
                &["fx/echo", &format!("a JSON {kind}, not an object")],
            );
        }
    }

    #[test]
    fn no_input_panics_the_parser() {
        for op in [
            "<<EXEC[",
            "<<EXEC[a",
            "<<EXEC[a]",
            "<<EXEC[a](",
            "<<EXEC[a](b",
            "<<EXEC[a](b)",
            "<<EXEC[a](b):",
            "<<EXEC[a]é:EXEC",
            "<<EXEC[a](b)é:EXEC",
            "<<EXEC[é]:é:EXEC",
            "<<EXEC]:EXEC",
            "<<EXEC[]:EXEC",
            "<<EXEC[:EXEC",
            "<<EXEC[a]:EXEC:EXEC",
            ":EXEC",
            "<<EXE:EXEC",
            "<<EXEC\u{0}[a]:EXEC",
        ] {
            let _ = parse(op);
        }
    }

    // === validate, effect ===

    fn tool(name: &str, schema: Value, effect: Effect) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: Some(format!("The {name} tool. It does things.")),
            input_schema: schema,
            output_schema: None,
            annotations: None,
            effect,
        }
    }

    fn server(alias: &str, state: ServerState, tools: Vec<ToolInfo>) -> ServerSnapshot {
        ServerSnapshot {
            alias: alias.into(),
            transport: TransportKind::Stdio,
            state,
            problem: None,
            negotiated: None,
            tools: tools.into(),
            catalog: Catalog::default(),
            generation: 1,
            authored: Arc::new(Authored::default()),
            authorization: None,
        }
    }

    fn add_schema() -> Value {
        json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]
        })
    }

    fn snapshot() -> WorkspaceSnapshot {
        let fx = server(
            "fx",
            ServerState::Ready,
            vec![
                tool(
                    "echo",
                    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                    Effect::Read,
                ),
                tool("add", add_schema(), Effect::Host),
                tool("ping", json!({"type": "object"}), Effect::Host),
                tool("broken", json!({"type": 12}), Effect::Host),
                tool(
                    "remote",
                    json!({"type": "object", "properties": {"x": {"$ref": "https://schemas.invalid/x.json"}}}),
                    Effect::Host,
                ),
                tool(
                    "local",
                    json!({
                        "type": "object",
                        "$defs": {"level": {"enum": ["low", "high"]}},
                        "properties": {"level": {"$ref": "#/$defs/level"}}
                    }),
                    Effect::Host,
                ),
                tool(
                    "legacy",
                    json!({
                        "$schema": "http://json-schema.org/draft-07/schema#",
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"]
                    }),
                    Effect::Host,
                ),
            ],
        );
        let mut down = server("down", ServerState::Unavailable, vec![]);
        down.problem = Some(Problem::server_unavailable(
            "server \"down\" (stdio) could not be connected: no such file",
        ));
        let servers = [
            fx,
            server("off", ServerState::Disabled, vec![]),
            down,
            server("early", ServerState::Connecting, vec![]),
        ];
        WorkspaceSnapshot {
            workspace: "default".into(),
            version: 7,
            servers: servers
                .into_iter()
                .map(|s| (Arc::from(s.alias.as_str()), Arc::new(s)))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn rejected(op: Op) -> (ExecError, String) {
        match validate(&op, &snapshot()) {
            Ok(validated) => panic!("{op} was validated: {validated:?}"),
            Err(error) => {
                let message = error.to_string();
                (error, message)
            }
        }
    }

    #[test]
    fn a_valid_op_is_validated_with_its_effect_and_snapshot_version() {
        let snapshot = snapshot();
        let validated =
            validate(&call("fx", "echo", json!({"text": "hi"})), &snapshot).expect("valid");
        assert_eq!((validated.effect(), validated.version()), (Effect::Read, 7));
        assert_eq!(validated.op(), &call("fx", "echo", json!({"text": "hi"})));
        let validated = validate(&catalog_of("fx"), &snapshot).expect("valid");
        assert_eq!(validated.effect(), Effect::Read);
        let validated =
            validate(&call("fx", "add", json!({"a": 1, "b": 2.5})), &snapshot).expect("valid");
        assert_eq!(validated.effect(), Effect::Host);
        validate(&call("fx", "ping", json!({})), &snapshot).expect("no arguments");
        validate(&call("fx", "local", json!({"level": "low"})), &snapshot)
            .expect("a local $ref resolves");
        validate(&call("fx", "legacy", json!({"n": 3})), &snapshot)
            .expect("a draft-07 schema compiles offline");
    }

    #[test]
    fn an_unknown_server_names_the_enabled_ones() {
        let (error, message) = rejected(call("nope", "echo", json!({})));
        assert_eq!(error.status(), 404);
        assert_names(
            &message,
            &[
                "no server \"nope\"",
                "the enabled servers are down, early, fx",
            ],
        );
        assert!(
            !message.contains("off"),
            "a disabled server is not offered: {message}"
        );
        assert_eq!(error.telemetry(), Some(TelemetryEvent::NotConfigured));
    }

    #[test]
    fn a_disabled_server_says_how_to_enable_it() {
        let (error, message) = rejected(catalog_of("off"));
        assert_eq!(
            error,
            ExecError::Disabled {
                server: "off".into()
            }
        );
        assert_eq!(error.status(), 409);
        assert_names(&message, &["\"off\" is disabled", "plurnk-mcp enable off"]);
    }

    #[test]
    fn a_server_not_ready_gives_its_state_and_problem() {
        let (error, message) = rejected(call("down", "echo", json!({})));
        assert_eq!(error.status(), 503);
        assert_names(
            &message,
            &[
                "\"down\" is unavailable",
                "could not be connected: no such file",
            ],
        );
        assert_eq!(error.telemetry(), Some(TelemetryEvent::Unreachable));
        let (error, message) = rejected(catalog_of("early"));
        assert_eq!(error.status(), 503);
        assert_names(&message, &["\"early\" is connecting", "still connecting"]);
        assert!(error.problem().retryable);
    }

    #[test]
    fn an_unknown_tool_suggests_close_names_or_lists_the_tools() {
        let (error, message) = rejected(call("fx", "ecko", json!({})));
        assert_eq!(error.status(), 404);
        assert_names(
            &message,
            &[
                "no enabled tool \"ecko\"",
                "the closest is \"echo\"",
                "<<EXEC[fx]:?:EXEC",
                "worker://plurnk/tools/fx.md",
            ],
        );
        for near in ["Echo", "ehco", "eco", "echoo"] {
            let (_, message) = rejected(call("fx", near, json!({})));
            assert_names(&message, &["the closest is \"echo\""]);
        }
        let (_, message) = rejected(call("fx", "zzzzzzzz", json!({})));
        assert_names(
            &message,
            &["its enabled tools are echo, add, ping, broken, remote, local, legacy"],
        );
        assert!(!message.contains("more"), "all seven are listed: {message}");
        // A long list is cut, and says by how much.
        let many: Vec<ToolInfo> = (0..LISTED_TOOLS + 5)
            .map(|n| tool(&format!("t{n:02}"), json!({"type": "object"}), Effect::Host))
            .collect();
        let hint = tool_hint(&server("big", ServerState::Ready, many), "zzzzzzzz");
        assert!(
            hint.starts_with("its enabled tools are t00, t01,"),
            "{hint}"
        );
        assert!(hint.ends_with(" and 5 more"), "{hint}");
        assert_eq!(
            rejected(call("fx", "zz", json!({}))).0.telemetry(),
            Some(TelemetryEvent::NotConfigured)
        );
    }

    #[test]
    fn arguments_that_fail_the_schema_list_each_path_and_expectation() {
        let (error, message) = rejected(call("fx", "add", json!({"a": "one"})));
        assert_eq!(error.status(), 422);
        assert_eq!(error.telemetry(), Some(TelemetryEvent::BadArguments));
        assert_names(
            &message,
            &[
                "arguments of fx/add do not match its input schema",
                "/a: \"one\" is not of type \"number\"",
                "(the arguments): \"b\" is a required property",
                "worker://plurnk/tools/fx/add.md",
            ],
        );
        let (error, _) = rejected(call("fx", "local", json!({"level": "medium"})));
        assert!(matches!(error, ExecError::BadArguments { .. }), "{error:?}");
    }

    #[test]
    fn schema_failures_are_bounded_in_count_and_length() {
        let names: Vec<String> = (0..20).map(|i| format!("p{i:02}")).collect();
        let schema = json!({"type": "object", "required": names});
        let mut snapshot = snapshot();
        let many = server(
            "many",
            ServerState::Ready,
            vec![
                tool("strict", schema, Effect::Host),
                tool(
                    "short",
                    json!({"properties": {"s": {"maxLength": 1}}}),
                    Effect::Host,
                ),
            ],
        );
        snapshot.servers.insert(Arc::from("many"), Arc::new(many));
        let Err(ExecError::BadArguments { failures, more, .. }) =
            validate(&call("many", "strict", json!({})), &snapshot)
        else {
            panic!("twenty missing properties fail");
        };
        assert_eq!(
            (failures.len(), more),
            (LISTED_FAILURES, 20 - LISTED_FAILURES)
        );
        let error = validate(&call("many", "strict", json!({})), &snapshot).unwrap_err();
        assert_names(&error.to_string(), &["and 12 more"]);
        let long = "x".repeat(10_000);
        let Err(ExecError::BadArguments { failures, .. }) =
            validate(&call("many", "short", json!({ "s": long })), &snapshot)
        else {
            panic!("a long string fails maxLength");
        };
        assert!(
            failures[0].chars().count() <= FAILURE_CHARS + 1,
            "{failures:?}"
        );
        assert!(failures[0].ends_with('…'));
    }

    #[test]
    fn a_schema_that_cannot_be_compiled_is_the_servers_fault() {
        let (error, message) = rejected(call("fx", "broken", json!({})));
        assert_eq!(error.status(), 502);
        assert_names(
            &message,
            &[
                "server \"fx\" sent an input schema for its tool \"broken\"",
                "server's fault",
            ],
        );
        assert_eq!(error.telemetry(), Some(TelemetryEvent::ListFailed));
    }

    #[test]
    fn a_remote_ref_is_never_fetched() {
        let (error, message) = rejected(call("fx", "remote", json!({"x": 1})));
        assert!(matches!(error, ExecError::BadSchema { .. }), "{error:?}");
        assert_names(&message, &["\"remote\"", "schemas.invalid"]);
    }

    #[test]
    fn effects_come_from_the_snapshot_and_unregistered_targets_are_a_contract_error() {
        let snapshot = snapshot();
        assert_eq!(effect(&catalog_of("fx"), &snapshot), Ok(Effect::Read));
        assert_eq!(effect(&catalog_of("off"), &snapshot), Ok(Effect::Read));
        assert_eq!(
            effect(&call("fx", "echo", json!({})), &snapshot),
            Ok(Effect::Read)
        );
        assert_eq!(
            effect(&call("fx", "add", json!({})), &snapshot),
            Ok(Effect::Host)
        );
        for (op, tool) in [
            (call("fx", "nope", json!({})), Some("nope")),
            (call("ghost", "echo", json!({})), None),
            (catalog_of("ghost"), None),
        ] {
            let error = effect(&op, &snapshot).expect_err("unregistered");
            assert_eq!(
                error,
                ExecError::Unregistered {
                    server: op.server().into(),
                    tool: tool.map(str::to_owned)
                }
            );
            assert_eq!((error.status(), error.telemetry()), (500, None));
            assert_names(
                &error.to_string(),
                &["internal contract", "validate the op"],
            );
        }
    }

    // === statuses, telemetry, scrubbing ===

    #[test]
    fn every_error_has_its_status_and_telemetry_event() {
        let bad_op = ExecError::from(refused("<<EXEC[fx](echo):[1]:EXEC").0);
        assert_eq!((bad_op.status(), bad_op.kind()), (400, "bad-op"));
        assert_eq!(bad_op.telemetry(), Some(TelemetryEvent::BadArguments));
        assert_eq!(bad_op.server(), Some("fx"));
        // No server, no source: nothing to report.
        let serverless = ExecError::from(OpError::EmptyServer);
        assert_eq!((serverless.status(), serverless.telemetry()), (400, None));
        let tool_error = ExecError::ToolError {
            server: "fx".into(),
            tool: "fail".into(),
            status: 500,
            result: json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
        };
        assert_eq!(tool_error.status(), 500);
        assert_eq!(tool_error.telemetry(), Some(TelemetryEvent::ToolError));
        assert_names(
            &tool_error.to_string(),
            &["fx/fail reported a tool error", "it broke"],
        );
        let call_error = |error: CallError| ExecError::Call {
            server: "fx".into(),
            tool: "t".into(),
            error: Box::new(error),
        };
        let cases = [
            (
                CallError::Remote {
                    alias: "fx".into(),
                    tool: "t".into(),
                    code: -32603,
                    message: "boom".into(),
                    data: None,
                },
                500,
                Some(TelemetryEvent::ToolError),
            ),
            (
                CallError::ConnectionLost {
                    alias: "fx".into(),
                    tool: "t".into(),
                    detail: "eof".into(),
                },
                503,
                Some(TelemetryEvent::Unreachable),
            ),
            (
                CallError::Timeout {
                    alias: "fx".into(),
                    tool: "t".into(),
                    timeout_ms: 5,
                },
                504,
                Some(TelemetryEvent::Unreachable),
            ),
            (
                CallError::Cancelled {
                    alias: "fx".into(),
                    tool: "t".into(),
                },
                499,
                None,
            ),
            (
                CallError::UnknownServer("fx".into()),
                404,
                Some(TelemetryEvent::NotConfigured),
            ),
            (CallError::ShuttingDown, 503, None),
        ];
        for (error, status, event) in cases {
            let error = call_error(error);
            assert_eq!(
                (error.status(), error.telemetry()),
                (status, event),
                "{error}"
            );
            assert_eq!(error.problem().status, status);
        }
    }

    #[test]
    fn a_server_not_ready_is_reported_by_its_state_and_problem_kind_never_its_text() {
        let not_ready =
            |state: ServerState, kind: Option<&str>, detail: &str| ExecError::NotReady {
                server: "gh".into(),
                state,
                kind: kind.map(str::to_owned),
                detail: detail.into(),
            };
        let unavailable = ServerState::Unavailable;
        let cases = [
            (
                ServerState::AuthorizationRequired,
                Some("authorization-required"),
                "anything",
                TelemetryEvent::AuthRequired,
            ),
            (
                unavailable,
                Some("server-unauthorized"),
                "anything",
                TelemetryEvent::AuthRequired,
            ),
            (
                unavailable,
                Some("authorization-failed"),
                "anything",
                TelemetryEvent::AuthRequired,
            ),
            (
                unavailable,
                Some("oauth-client-credentials-failed"),
                "anything",
                TelemetryEvent::AuthRequired,
            ),
            (
                unavailable,
                Some("oauth-workload-identity-failed"),
                "anything",
                TelemetryEvent::AuthRequired,
            ),
            (
                unavailable,
                Some("server-list-failed"),
                "anything",
                TelemetryEvent::ListFailed,
            ),
            // The words a Problem's detail holds decide nothing.
            (
                unavailable,
                Some("server-unavailable"),
                "could not be connected: authorization required (HTTP 401); could not be listed",
                TelemetryEvent::Unreachable,
            ),
            (
                ServerState::CrashLoop,
                Some("server-crash-loop"),
                "crashed",
                TelemetryEvent::Unreachable,
            ),
            (
                unavailable,
                None,
                "insufficient scope",
                TelemetryEvent::Unreachable,
            ),
        ];
        for (state, kind, detail, event) in cases {
            let error = not_ready(state, kind, detail);
            assert_eq!(error.telemetry(), Some(event), "{kind:?}");
            let status = if event == TelemetryEvent::AuthRequired {
                401
            } else {
                503
            };
            assert_eq!(error.status(), status, "{kind:?}");
            assert_eq!(error.problem().status, status, "{kind:?}");
        }
        // A call refused at the gate of a server waiting for authorization says so too.
        let refused = ExecError::Call {
            server: "gh".into(),
            tool: "t".into(),
            error: Box::new(CallError::NotReady {
                alias: "gh".into(),
                state: ServerState::AuthorizationRequired,
                detail: "open the URL".into(),
            }),
        };
        assert_eq!(
            (refused.telemetry(), refused.status()),
            (Some(TelemetryEvent::AuthRequired), 401)
        );
    }

    #[test]
    fn a_protected_resource_is_named_by_its_servers_origin_alone() {
        for (url, origin) in [
            ("https://api.example.com/mcp", "https://api.example.com"),
            (
                "https://user:pa55@api.example.com:8443/k3y/mcp?key=v#x",
                "https://api.example.com:8443",
            ),
            ("http://127.0.0.1:4010", "http://127.0.0.1:4010"),
            (
                "https://<redacted>@host.example/<redacted>",
                "https://host.example",
            ),
            ("no scheme", ""),
        ] {
            assert_eq!(origin_of(url), origin, "{url}");
        }
    }

    #[test]
    fn telemetry_events_have_their_wire_names() {
        for (event, word) in [
            (TelemetryEvent::NotConfigured, "mcp_not_configured"),
            (TelemetryEvent::Unreachable, "mcp_unreachable"),
            (TelemetryEvent::ListFailed, "mcp_list_failed"),
            (TelemetryEvent::BadArguments, "mcp_bad_arguments"),
            (TelemetryEvent::ToolError, "mcp_tool_error"),
            (TelemetryEvent::AuthRequired, "mcp_auth_required"),
        ] {
            assert_eq!(event.to_string(), word);
            assert_eq!(serde_json::to_value(event).ok(), Some(json!(word)));
        }
    }

    #[test]
    fn what_an_error_and_its_event_show_is_scrubbed() {
        crate::redact::register(["exec-secret-31337"]);
        let (error, _) = refused("<<EXEC[exec-secret-31337](t):[1]:EXEC");
        let error = ExecError::from(error).scrubbed();
        let event = telemetry(
            error.server().unwrap_or_default(),
            TelemetryEvent::BadArguments,
            error.status(),
            &error.to_string(),
            None,
        );
        let shown = format!("{error} {error:?} {event:?}");
        assert!(!shown.contains("exec-secret-31337"), "{shown}");
        let tool_error = ExecError::ToolError {
            server: "fx".into(),
            tool: "t".into(),
            status: 500,
            result: json!({"content": [{"type": "text", "text": "key exec-secret-31337"}]}),
        }
        .scrubbed();
        assert!(!format!("{tool_error:?}").contains("exec-secret-31337"));
    }

    #[test]
    fn the_catalog_has_each_tools_name_summary_effect_and_schema() {
        let snapshot = snapshot();
        let Some(fx) = snapshot.server("fx") else {
            panic!("fx is in the snapshot");
        };
        let value = catalog(fx);
        assert_eq!(value["server"], json!("fx"));
        assert!(
            value["summary"]
                .as_str()
                .is_some_and(|s| s.contains("echo"))
        );
        assert_eq!(
            value["tools"][0],
            json!({
                "name": "echo",
                "summary": "The echo tool.",
                "effect": "read",
                "inputSchema": fx.tools[0].input_schema,
            })
        );
        assert_eq!(value["tools"][1]["effect"], json!("host"));
        assert!(value.get("problems").is_none());
    }
}
