//! HostEvent, what happened in the host, and the TelemetryEvent an EXEC failure is
//! counted as.

use std::fmt;

use serde::Serialize;

use super::problem::Problem;
use super::snapshot::ServerState;

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
#[non_exhaustive]
pub struct ProtectedResource {
    /// The server's alias.
    pub server: String,
    /// The origin of its URL, `scheme://host:port`.
    pub resource: String,
}

/// The kind of an EXEC failure a [`HostEvent::Telemetry`] reports; shown (and serialized)
/// as `mcp_not_configured`, `mcp_unreachable`, ….
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
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
