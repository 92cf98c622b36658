//! The op's grammar: [`Op`] as [`parse`] reads it and as its `Display` writes it again,
//! bounded by [`MAX_OP_BYTES`], and [`OpError`], why an op could not be read, each message
//! showing the shape to write instead. The spelling's two words are projection's.

use std::fmt;

use serde_json::{Map, Value};

use super::quote::{excerpt, name, snippet};
use crate::projection::{EXEC_CLOSE, EXEC_OPEN};

/// The longest op [`parse`] reads, in bytes; a longer one is refused whole.
pub const MAX_OP_BYTES: usize = 1 << 20;

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

    /// The tool a call names; a catalog op names none.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Self::Call { tool, .. } => Some(tool),
            Self::Catalog { .. } => None,
        }
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

    /// The same error with every registered secret scrubbed from its text.
    pub(super) fn scrubbed(mut self) -> Self {
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
