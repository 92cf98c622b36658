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
//! [`validate`] and [`effect`] against one [`WorkspaceSnapshot`](crate::WorkspaceSnapshot) (synchronous, no I/O), then
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
//!
//! # Layout
//!
//! - `exec/op.rs`: the op's grammar: [`Op`], [`parse`], its `Display`, [`OpError`].
//! - `exec/validate.rs`: the check against one snapshot: [`validate`], [`effect`].
//! - `exec/error.rs`: [`ExecError`], its status, kind, telemetry event and scrubbing.
//! - `exec/quote.rs`: how the errors show text they did not write.
//! - this file: [`run`], the catalog op's answer and the telemetry event sent.

use serde_json::Value;

use crate::host::{CallOptions, Workspace};
use crate::model::{HostEvent, ProtectedResource, ServerSnapshot, TelemetryEvent};
use crate::projection;

mod error;
mod op;
mod quote;
mod validate;

#[cfg(test)]
mod tests;

pub use error::ExecError;
pub use op::{MAX_OP_BYTES, Op, OpError, parse};
use quote::name;
pub use validate::{Validated, effect, validate};

/// How many characters of a failure a telemetry event's detail carries.
const EVENT_DETAIL_CHARS: usize = 2000;

/// Parses `op`, validates it against the workspace's current snapshot, and runs it: a call
/// through [`Workspace::call_tool`] (progress, cancellation, deadline and interaction pass
/// through `options` unchanged), or the catalog from the same snapshot.
///
/// The value is the tool's whole result object as the server returned it (scrubbed of
/// registered secrets), or the catalog: `{ "server", "summary", "tools": [{ "name",
/// "summary", "effect", "inputSchema" }] }`. Every failure is scrubbed and reported on the
/// host's event
/// stream as a [`HostEvent::Telemetry`] (see [`ExecError::telemetry`]).
///
/// ```no_run
/// # async fn run(workspace: plurnk_mcp::Workspace) {
/// use plurnk_mcp::CallOptions;
/// let op = r#"<<EXEC[github](create_issue):{"title":"hi"}:EXEC"#;
/// match plurnk_mcp::exec::run(&workspace, op, CallOptions::default()).await {
///     Ok(result) => println!("{result}"),
///     Err(error) => eprintln!("{} {error}", error.status()),
/// }
/// # }
/// ```
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
