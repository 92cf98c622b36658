//! plurnk-mcp: an MCP host that a daemon embeds to reach many Model Context Protocol servers
//! at once.
//!
//! # Layout
//!
//! - [`config`]: the `PLURNK_MCP_*` environment namespace → validated, unexpanded server
//!   definitions; `${NAME}` expansion happens only while preparing a connection.
//! - `protocol`: everything that speaks MCP (rmcp stays inside it): stdio process groups,
//!   Streamable HTTP, negotiate-and-degrade, catalogs with their pagination guard, calls.
//! - `actors`: the supervision tree — a supervisor, a workspace actor per workspace, an
//!   attachment actor per (workspace, enabled server) — and the restart policy.
//! - [`host`]: the embedding API, a cheap-to-clone [`Host`] handle over the actors.
//! - [`exec`]: the EXEC bridge above it: `<<EXEC[server](tool):{…}:EXEC` parsed, validated
//!   against one snapshot, classified and run, every failure a telemetry event.
//! - [`gateway`]: the host as an MCP server too: one workspace's merged namespace served over
//!   stdio or Streamable HTTP (`plurnk-mcp serve`), every request routed through [`host`].
//! - [`import`]: another client's server list (Claude Desktop, Cursor, VS Code, Codex) read
//!   into definitions to add, with a reason for each entry that cannot be carried over.
//! - [`model`]: the domain types the API speaks: snapshots, states, Problems, results.
//! - [`redact`]: the secret registry; every credential value is scrubbed, in any spelling,
//!   from whatever leaves the host (Problems, call errors and results, log lines).
//! - [`prometheus`]: the optional `GET /metrics` endpoint over the `metrics` facade the host
//!   records through, and the table of what it records.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use plurnk_mcp::{CallOptions, Host, HostConfig};
//! let host = Host::start(HostConfig::from_env(std::env::vars())?).await?;
//! let workspace = host.default_workspace();
//! for server in workspace.snapshot().servers.values() {
//!     println!("{} {}", server.alias, server.state);
//! }
//! let result = workspace
//!     .call_tool("fixture", "echo", serde_json::json!({"text": "hi"}), CallOptions::default())
//!     .await?;
//! println!("{}", result.text());
//! let report = host.shutdown().await;
//! for failure in &report.failures {
//!     eprintln!("{} did not close cleanly: {}", failure.alias, failure.detail);
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs, unreachable_pub)]

pub mod actors;
pub mod capabilities;
pub mod config;
pub mod exec;
pub mod gateway;
pub mod host;
pub mod import;
pub mod model;
pub mod projection;
pub mod prometheus;
mod protocol;
pub mod redact;
pub mod sources;
pub mod store;

/// Internal rules the fuzz targets (`fuzz/`) drive directly; not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::protocol::guard::advance_line;
}

pub use actors::restart::{RestartPolicy, Verdict, WorkspaceRestart};
pub use config::{ConfigError, ConfigErrors, HostConfig, ServerDefinition};
pub use host::{
    Accepted, ActionAnswer, CallOptions, CloseFailure, Customize, DEFAULT_WORKSPACE, Host,
    HostEvent, HostMsg, HostOptions, InputRelay, OnOpen, ServerSummary, ShutdownReport,
    SnapshotWatch, StartError, Workspace,
};
pub use model::{
    Authored, CallError, Catalog, Cause, CompletionRef, DeviceAuthorization, DevicePoll, Effect,
    Elicitation, ElicitationAnswer, InProcessConnector, Interaction, InteractionHandler, Limits,
    Negotiated, Operation, PendingAuthorization, Problem, Progress, ProgressSink,
    PromptArgumentInfo, PromptInfo, ProtectedResource, Refusal, ResourceInfo, ResourceTemplateInfo,
    ServerSnapshot, ServerState, TelemetryEvent, ToolInfo, ToolResult, TransportKind,
    WorkspaceSnapshot,
};
pub use prometheus::PrometheusError;
pub use store::{
    MemoryStore, RecordSource, ServerRecord, SqliteStore, Store, StoreError, WorkspaceRecord,
};
