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

use serde_json::{Map, Value};

use crate::host::{CallOptions, Workspace};
use crate::model::{
    Effect, HostEvent, ProtectedResource, ServerSnapshot, ServerState, TelemetryEvent,
    WorkspaceSnapshot,
};
use crate::projection;

mod error;
mod op;
mod quote;
#[cfg(test)]
mod tests;

pub use error::ExecError;
pub use op::{MAX_OP_BYTES, Op, OpError, parse};
use quote::{LISTED_TOOLS, capped, name};

/// How many schema failures an error lists before it says how many more there are.
const LISTED_FAILURES: usize = 8;

/// How many characters of one schema failure an error shows.
const FAILURE_CHARS: usize = 200;

/// How many characters of a failure a telemetry event's detail carries.
const EVENT_DETAIL_CHARS: usize = 2000;

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
