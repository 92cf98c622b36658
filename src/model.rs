//! The crate's domain types: what the embedding API and the actors speak, free of rmcp.
//!
//! Everything here is cheap to clone or shared behind an `Arc`: a [`WorkspaceSnapshot`] is
//! immutable once published and is replaced whole, never edited in place.

use std::sync::Arc;

pub use crate::config::TransportKind;

/// Opens one in-process connection and returns the host's end of it (the other end of a
/// `tokio::io::duplex` pair): called for every connection attempt, the first and each
/// reconnect; whatever serves the other end runs as its own task.
pub type InProcessConnector = Arc<dyn Fn() -> tokio::io::DuplexStream + Send + Sync>;

mod action;
mod authorization;
mod call;
mod catalog;
mod connecting;
mod event;
mod problem;
mod sandbox;
mod snapshot;

pub use action::*;
pub use authorization::*;
pub use call::*;
pub use catalog::*;
pub use connecting::*;
pub use event::*;
pub use problem::*;
pub use sandbox::*;
pub use snapshot::*;

/// What a server may make the host hold and do: every bound the host keeps against a server
/// that floods, pages forever or sends more than it should. The defaults are far beyond
/// what a real server needs; a server that meets one is `unavailable` with a Problem that
/// names the bound, or its call fails with [`CallError::Overloaded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Pages one list (`tools/list`, `resources/list`, …) may take.
    pub max_pages: usize,
    /// Items one list may hold (tools, resources, templates or prompts).
    pub max_items: usize,
    /// Bytes one list may hold, counted as the JSON of its items.
    pub max_list_bytes: usize,
    /// Bytes one message from a server may have: a line over stdio (a longer one closes the
    /// connection), a JSON body or one event of a stream over Streamable HTTP (a longer one
    /// fails its request).
    pub max_message_bytes: usize,
    /// Calls in flight on one server; beyond it a call fails at once as overloaded.
    pub max_in_flight_per_server: usize,
    /// Calls in flight in one workspace, all servers together.
    pub max_in_flight_per_workspace: usize,
    /// Notifications one server may send in a burst…
    pub notification_burst: u32,
    /// …and per second after it; the excess is dropped and counted.
    pub notifications_per_second: u32,
    /// A server that keeps exceeding the notification rate this long is disconnected.
    pub flood_grace: std::time::Duration,
    /// Requests one server may have waiting on the host at once (ping, elicitation, …);
    /// more are dropped unanswered.
    pub max_server_requests: usize,
}

setters!(Limits {
    with_max_pages => max_pages: usize,
    with_max_items => max_items: usize,
    with_max_list_bytes => max_list_bytes: usize,
    with_max_message_bytes => max_message_bytes: usize,
    with_max_in_flight_per_server => max_in_flight_per_server: usize,
    with_max_in_flight_per_workspace => max_in_flight_per_workspace: usize,
    with_notification_burst => notification_burst: u32,
    with_notifications_per_second => notifications_per_second: u32,
    with_flood_grace => flood_grace: std::time::Duration,
    with_max_server_requests => max_server_requests: usize,
});

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pages: 100,
            max_items: 10_000,
            max_list_bytes: 32 << 20,
            max_message_bytes: 16 << 20,
            max_in_flight_per_server: 1024,
            max_in_flight_per_workspace: 8192,
            notification_burst: 2000,
            notifications_per_second: 1000,
            flood_grace: std::time::Duration::from_secs(5),
            max_server_requests: 16,
        }
    }
}

#[cfg(test)]
mod tests;
