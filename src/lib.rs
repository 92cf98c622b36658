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
//! - [`text`]: the characters of a peer's or a caller's text that are shown only escaped
//!   (control characters, bidirectional overrides and other format characters).
//! - `memory`: freed memory given back to the system after a burst (gateway sessions, a
//!   hydration's connection attempts).
//! - [`telemetry`]: what the host tells about each request it sends or serves, by the
//!   OpenTelemetry semantic conventions for MCP: the duration histograms always, and with
//!   feature `otel` spans, W3C trace context in `_meta` and OTLP export.
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

#![deny(missing_docs)]
#![warn(unreachable_pub)]
// docs.rs builds with every feature and `--cfg docsrs`: each item a feature gates says which.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The `with_*` setters of an options struct a daemon builds. Such a struct is
/// `#[non_exhaustive]`, so a new option is not a breaking change: it is made from its
/// `Default` and these (`HostOptions::default().with_store(Some(store))`).
macro_rules! setters {
    ($ty:ty { $($setter:ident => $field:ident: $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $setter(mut self, $field: $fty) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}

pub mod actors;
pub mod capabilities;
pub mod config;
#[cfg(feature = "exec")]
pub mod exec;
#[cfg(feature = "gateway")]
pub mod gateway;
pub mod host;
#[cfg(feature = "import")]
pub mod import;
mod memory;
pub mod model;
pub mod projection;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod protocol;
pub mod redact;
pub mod sandbox;
#[cfg(feature = "sources")]
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod text;

/// Internal rules the fuzz targets (`fuzz/`) drive directly; not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::protocol::guard::advance_line;
}

pub use actors::restart::{RestartPolicy, Verdict, WorkspaceRestart};
pub use config::{ConfigError, ConfigErrors, HostConfig, ServerDefinition};
#[cfg(feature = "oauth")]
pub use host::Accepted;
pub use host::{
    ActionAnswer, CallOptions, CloseFailure, Customize, DEFAULT_WORKSPACE, Host, HostEvent,
    HostMsg, HostOptions, InputRelay, OnOpen, ServerSummary, ShutdownReport, SnapshotWatch,
    StartError, Workspace,
};
pub use model::{
    Authored, CallError, Catalog, Cause, CompletionRef, ConnectPhase, Connecting,
    DeviceAuthorization, DevicePoll, Effect, Elicitation, ElicitationAnswer, InProcessConnector,
    Interaction, InteractionHandler, Limits, Negotiated, Operation, PendingAuthorization,
    PhaseTimes, Problem, Progress, ProgressSink, PromptArgumentInfo, PromptInfo, ProtectedResource,
    Recovered, Refusal, ResourceInfo, ResourceTemplateInfo, SandboxPart, SandboxPartReport,
    SandboxReport, SandboxState, ServerSnapshot, ServerState, Servers, TelemetryEvent, ToolInfo,
    ToolResult, TransportKind, WorkspaceSnapshot,
};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusError;
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{MemoryStore, RecordSource, ServerRecord, Store, StoreError, WorkspaceRecord};
