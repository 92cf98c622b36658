//! Any [`ToolSource`](super::ToolSource) as an MCP server, served in-process: the host
//! reaches a CLI adapter or a script through the same connection, catalog and call path as
//! any server (`Target::InProcess`), so a source is a namespace like every other.
//!
//! [`SourceServer`] answers `tools/list` with every [`SourceTool`] and `tools/call` by
//! calling the source. A result becomes a `CallToolResult` (text content, structured
//! content, `isError`); a call that produced no result becomes an `isError` result carrying
//! the reason when the model can act on it (a deadline, an output bound, a program that
//! could not start) and a JSON-RPC invalid-params error (-32602) when the request itself
//! was wrong (an unknown tool, arguments that do not fit). It negotiates every protocol
//! revision rmcp knows, 2026-07-28 and older.
//!
//! This file is the one place rmcp types meet a source: the sources themselves speak only
//! the crate's [`ToolSource`](crate::sources::ToolSource) types.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use super::{SharedSource, SourceError, SourceResult, SourceTool};
use crate::model::InProcessConnector;

/// The deadline a call through the server is given: the source bounds each call by its own
/// declared timeout (at most an hour), and the host's caller by its own deadline, which
/// cancels the request.
const CALL_CEILING: Duration = Duration::from_millis(super::cli::MAX_TIMEOUT_MS);
/// The size of each direction of the in-process pipe.
const DUPLEX_BYTES: usize = 64 << 10;

/// A [`ToolSource`](super::ToolSource) as an rmcp server handler.
#[derive(Clone)]
pub struct SourceServer {
    source: SharedSource,
    /// The server name the client is told: the source's name.
    name: String,
}

impl std::fmt::Debug for SourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceServer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SourceServer {
    /// Serves `source` under the server name `name`.
    pub fn new(source: SharedSource, name: String) -> Self {
        Self { source, name }
    }
}

/// Opens an in-process connection to `source` each time it is called: a fresh
/// [`SourceServer`] on one end of a `tokio::io::duplex` pair, served as a task of the
/// current runtime, and the other end returned to the host. Without a runtime the server
/// The JSON-RPC error code of a call the source stopped (deadline, output bound) or could not
/// start; `data.kind` says which (`timeout`, `output-too-large`, `unavailable`).
pub const SOURCE_ERROR: i32 = -32000;

/// end is dropped at once, so the connection fails as a closed one, without a panic.
pub fn connector(source: SharedSource, name: String) -> InProcessConnector {
    Arc::new(move || {
        let (client, server) = tokio::io::duplex(DUPLEX_BYTES);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let handler = SourceServer::new(source.clone(), name.clone());
            runtime.spawn(async move {
                // A client that leaves early, or a session that ends, ends the task.
                if let Ok(running) = handler.serve(server).await {
                    let _ = running.waiting().await;
                }
            });
        }
        client
    })
}

fn to_tool(tool: SourceTool) -> Tool {
    Tool::new_with_raw(
        tool.name,
        tool.description.map(Cow::Owned),
        Arc::new(tool.input_schema),
    )
}

fn to_result(result: SourceResult) -> CallToolResult {
    let content = vec![ContentBlock::text(result.text)];
    let mut converted = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    // Structured content is an object (2025-11-25 requires it, and a client that reads
    // `structuredContent` reads an object): a tool's JSON output that is any other value (an
    // array, a number, a stream of values) is left in the text, which holds it exactly. A
    // wrapper such as `{"value": …}` would invent a shape no tool declared, and a client
    // could not tell it from an output that is such an object.
    converted.structured_content = result.structured.filter(Value::is_object);
    converted
}

impl ServerHandler for SourceServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new(self.name.clone(), env!("CARGO_PKG_VERSION"))
                .with_description("A plurnk-mcp tool source served in-process"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.source.tools().into_iter().map(to_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let call = self.source.call(&request.name, arguments, CALL_CEILING);
        // A cancelled request drops the call, which kills its process group.
        let outcome = tokio::select! {
            outcome = call => outcome,
            () = context.ct.cancelled() => {
                return Err(McpError::internal_error("the call was cancelled", None));
            }
        };
        match outcome {
            Ok(result) => Ok(to_result(result).into()),
            Err(error @ (SourceError::UnknownTool(_) | SourceError::InvalidArguments(_))) => {
                Err(McpError::invalid_params(error.to_string(), None))
            }
            // Stopped at its deadline or its output bound, or never started: an error the
            // caller can tell apart by `data.kind`, not a result the tool gave.
            Err(error) => {
                let data = match &error {
                    SourceError::Timeout { timeout_ms } => {
                        serde_json::json!({ "kind": "timeout", "timeoutMs": timeout_ms })
                    }
                    SourceError::OutputTooLarge { limit } => {
                        serde_json::json!({ "kind": "output-too-large", "limitBytes": limit })
                    }
                    _ => serde_json::json!({ "kind": "unavailable" }),
                };
                Err(McpError::new(
                    rmcp::model::ErrorCode(SOURCE_ERROR),
                    error.to_string(),
                    Some(data),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::ServiceError;
    use rmcp::model::{ErrorCode, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use serde_json::{Value, json};

    use super::*;
    use crate::sources::cli::CliDeclaration;

    /// A CLI source of `sh` tools: `echo` (text back), `json` (JSON back), `fail` (exit 2),
    /// `slow` (past its deadline).
    fn shell_source() -> SharedSource {
        let declaration = CliDeclaration::parse(
            &json!({
                "name": "shell",
                "command": "sh",
                "timeoutMs": 300,
                "tools": [
                    {
                        "name": "echo",
                        "description": "Says the text back",
                        "args": ["-c", "printf '%s' \"$1\"", "sh"],
                        "params": [{ "name": "text", "required": true }]
                    },
                    {
                        "name": "json",
                        "args": ["-c", "printf '{\"n\": %s}' \"$1\"", "sh"],
                        "json": true,
                        "params": [{ "name": "n", "type": "integer", "required": true }]
                    },
                    { "name": "fail", "args": ["-c", "echo no >&2; exit 2"] },
                    { "name": "slow", "args": ["-c", "sleep 30"] }
                ]
            }),
            "shell.json",
        )
        .expect("a valid declaration");
        let source = declaration
            .open(
                "shell.json",
                &|raw: &str| Ok(raw.to_owned()),
                crate::protocol::Children::new(crate::protocol::Inherited::defaults()),
            )
            .expect("it opens");
        Arc::new(source)
    }

    fn arguments(value: Value) -> rmcp::model::JsonObject {
        match value {
            Value::Object(object) => object,
            _ => rmcp::model::JsonObject::new(),
        }
    }

    #[tokio::test]
    async fn an_rmcp_client_lists_and_calls_a_source_through_the_connector() {
        let connect = connector(shell_source(), "shell".into());
        // The host's way in: discover at 2026-07-28, initialize for older peers.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let client =
            ().serve_with_lifecycle(connect(), lifecycle)
                .await
                .expect("the client connects");
        let info = client.peer_info().expect("the server said who it is");
        assert_eq!(
            info.server_info.as_ref().map(|server| server.name.as_str()),
            Some("shell")
        );
        assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);

        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["echo", "json", "fail", "slow"]);
        assert_eq!(tools[0].description.as_deref(), Some("Says the text back"));
        assert_eq!(
            Value::Object((*tools[0].input_schema).clone()),
            json!({
                "type": "object",
                "properties": { "text": { "type": "string" } },
                "required": ["text"],
                "additionalProperties": false
            })
        );

        let echo = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(arguments(json!({ "text": "hi" }))),
            )
            .await
            .expect("echo");
        assert_eq!(echo.is_error, Some(false));
        assert_eq!(
            echo.content[0].as_text().map(|t| t.text.as_str()),
            Some("hi")
        );

        let structured = client
            .call_tool(
                CallToolRequestParams::new("json").with_arguments(arguments(json!({ "n": 7 }))),
            )
            .await
            .expect("json");
        assert_eq!(structured.structured_content, Some(json!({ "n": 7 })));

        let failed = client
            .call_tool(CallToolRequestParams::new("fail"))
            .await
            .expect("a result");
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            failed.content[0].as_text().map(|t| t.text.as_str()),
            Some("[sh exited with status 2; its stderr ends:]\nno")
        );

        match client.call_tool(CallToolRequestParams::new("slow")).await {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode(SOURCE_ERROR));
                assert_eq!(
                    error.message,
                    "the call ran past its deadline of 300 ms and was stopped"
                );
                assert_eq!(
                    error.data,
                    Some(json!({"kind": "timeout", "timeoutMs": 300}))
                );
            }
            other => panic!("a call past its deadline is a typed error: {other:?}"),
        }

        // A request that cannot be routed or does not fit is the client's error.
        for (name, args, message) in [
            ("nope", json!({}), "no tool \"nope\" in this source"),
            (
                "echo",
                json!({ "text": 3 }),
                "invalid arguments: argument \"text\" must be a string, not a number",
            ),
        ] {
            let error = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(arguments(args)))
                .await
                .expect_err("an error");
            let ServiceError::McpError(error) = error else {
                panic!("a JSON-RPC error, not {error:?}");
            };
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(error.message, message);
        }
        let _ = client.cancel().await;
    }

    #[tokio::test]
    async fn a_legacy_client_initializes_at_2025_11_25() {
        let connect = connector(shell_source(), "shell".into());
        let client =
            ().serve_with_lifecycle(connect(), ClientLifecycleMode::Initialize)
                .await
                .expect("the client connects");
        let info = client.peer_info().expect("the server said who it is");
        assert_eq!(
            info.server_info.as_ref().map(|server| server.name.as_str()),
            Some("shell")
        );
        assert!(
            info.protocol_version.has_initialize(),
            "{:?}",
            info.protocol_version
        );
        let echo = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(arguments(json!({ "text": "old" }))),
            )
            .await
            .expect("echo");
        assert_eq!(
            echo.content[0].as_text().map(|t| t.text.as_str()),
            Some("old")
        );
        let _ = client.cancel().await;
    }

    #[test]
    fn without_a_runtime_the_connector_gives_a_closed_connection() {
        let connect = connector(shell_source(), "shell".into());
        drop(connect());
    }
}
