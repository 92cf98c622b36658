//! What the workspace's actions take and answer: the Customize of an enable, a ServerSummary
//! per listed server, a device authorization's DevicePoll, a CloseFailure from shutdown.

use std::sync::Arc;

use serde::Serialize;

use super::problem::Problem;
use super::snapshot::{ServerSnapshot, ServerState};

/// One available server as the `list` action shows it; never carries a credential value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ServerSummary {
    /// The alias.
    pub alias: String,
    /// `service` (the environment), `specialized` (the environment, replaced in this
    /// workspace) or `workspace` (added in this workspace).
    pub source: &'static str,
    /// The executable, or the URL's origin.
    pub target: String,
    /// How it is reached.
    pub transport: crate::model::TransportKind,
    /// Whether it is enabled in this workspace.
    pub enabled: bool,
    /// Its state.
    pub state: ServerState,
    /// Why it is not ready, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
    /// What negotiation established, while ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated: Option<Arc<crate::model::Negotiated>>,
    /// The enabled tools.
    pub tools: Vec<String>,
    /// The tools classified `read`.
    pub read: Vec<String>,
    /// The unexpanded definition, with every secret value redacted.
    pub definition: serde_json::Value,
}

/// A close failure seen during shutdown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct CloseFailure {
    /// The workspace.
    pub workspace: String,
    /// The server alias.
    pub alias: String,
    /// What did not close.
    pub detail: String,
}

/// How an enable customizes the definition: the client configuration overlay's entry and
/// explicit action options, the top two layers of the cascade.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Customize {
    /// The overlay's entry for the alias, if the client sent one.
    pub overlay: Option<crate::config::OverlayServer>,
    /// Explicit options.
    pub options: Option<crate::config::McpServerOptions>,
}

setters!(Customize {
    with_overlay => overlay: Option<crate::config::OverlayServer>,
    with_options => options: Option<crate::config::McpServerOptions>,
});

impl Customize {
    pub(crate) fn is_empty(&self) -> bool {
        self.overlay.is_none()
            && self
                .options
                .as_ref()
                .is_none_or(crate::config::McpServerOptions::is_empty)
    }
}

/// One poll of a device authorization.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DevicePoll {
    /// The person has not approved yet: poll again after the interval.
    Pending,
    /// Polling too fast: poll again after a longer interval (5 s more).
    SlowDown,
    /// Approved: the token is installed and the server connected; its snapshot.
    Authorized {
        /// The server as the enable that followed left it.
        server: Box<ServerSnapshot>,
    },
    /// The person refused.
    Denied,
    /// The code expired: authorize again.
    Expired,
}
