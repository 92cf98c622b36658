//! Everything that speaks MCP: connection setup, negotiation, catalogs and calls.
//!
//! rmcp types stay inside this folder. What leaves it is the crate's own domain types
//! ([`crate::model`]): a [`Connection`] hands out [`Negotiated`](crate::model::Negotiated),
//! [`ToolInfo`](crate::model::ToolInfo) and [`ToolResult`](crate::model::ToolResult), and
//! failures arrive as [`ConnectError`] or [`CallError`](crate::model::CallError).

// The address rule judges URLs a remote party chose: OAuth metadata, OpenAPI documents.
#[cfg(any(feature = "oauth", feature = "sources"))]
mod address;
#[cfg(feature = "oauth")]
pub(crate) mod auth;
// Without OAuth, the same face answers that no server is authorized by it.
#[cfg(not(feature = "oauth"))]
#[path = "protocol/no_oauth.rs"]
pub(crate) mod auth;
mod call;
mod catalog;
mod close;
mod connect;
pub(crate) mod guard;
#[cfg(feature = "http")]
mod http;
mod lines;
mod phases;
// Process groups and the reaper need nothing beyond the standard library, libc and tokio, so
// they are in every build; without `stdio` (which `sources` implies) the configuration
// refuses every command and nothing here is reached, and what only a tool source's program
// uses (descendants found by their mark, the probe's bare environment) is unused without
// `sources`. Dead code is found in the build with every feature.
#[cfg_attr(not(feature = "stdio"), allow(dead_code))]
mod reaper;
mod session;
#[cfg_attr(not(feature = "sources"), allow(dead_code))]
mod stdio;

#[cfg(feature = "sources")]
pub(crate) use address::AddressRule;
pub(crate) use call::{CallContext, CallPeer};
pub(crate) use catalog::apply_policy;
pub(crate) use close::CloseError;
#[cfg(feature = "sources")]
pub(crate) use connect::SourceOpener;
pub(crate) use connect::{ConnectOptions, Connection, OnUpdate};
#[cfg(feature = "sources")]
pub(crate) use http::same_origin_redirects;
#[cfg(feature = "sources")]
pub(crate) use http::{Bounded, describe, read_bounded};
pub(crate) use phases::OnPhase;
pub(crate) use reaper::Reaper;
pub(crate) use session::{Opened, Opening, Ready, Refused, Relisted, Session, count, open, relist};
pub(crate) use stdio::Inherited;
#[cfg(feature = "sources")]
pub(crate) use stdio::{
    Children, StderrTail, describe_exit, group_command, kill_group, kill_marked,
};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, Implementation,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use crate::model::{ElicitationAnswer, Interaction, InteractionHandler};

/// The client half rmcp drives for us: it identifies the host, advertises the client
/// capabilities the capability matrix derives, and answers a legacy peer's server-initiated
/// `elicitation/create` through the host's interaction handler (declining without one).
/// Progress is routed by the transport wrapper, in arrival order, not here: rmcp runs
/// notification handlers as detached tasks, which could deliver a report after the result it
/// precedes.
#[derive(Clone, Default)]
pub(crate) struct HostClient {
    pub(crate) alias: String,
    pub(crate) interaction: Option<InteractionHandler>,
    /// The interaction handlers of the calls in flight on this connection: a legacy
    /// server's question goes to the call that caused it.
    pub(crate) askers: Arc<Askers>,
    /// Negotiating through legacy `initialize`: offer 2025-11-25, the newest revision that
    /// has it (2026-07-28 has none).
    pub(crate) legacy: bool,
    /// Declares the `elicitation` capability: somebody answers the server's questions.
    pub(crate) elicitation: bool,
    /// The connection authorizes with the client-credentials grant: it, and only it,
    /// advertises the `io.modelcontextprotocol/oauth-client-credentials` extension.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) grant: bool,
}

impl ClientHandler for HostClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = Implementation::new("plurnk-mcp", env!("CARGO_PKG_VERSION"));
        info.title = Some("plurnk MCP host".into());
        let mut advertised = crate::capabilities::client_capabilities(self.legacy);
        if !self.elicitation
            && let Some(capabilities) = advertised.as_object_mut()
        {
            capabilities.remove("elicitation");
        }
        #[cfg(feature = "oauth")]
        let advertised = {
            let mut advertised = advertised;
            if self.grant {
                for extension in crate::capabilities::grant_extensions() {
                    advertised["extensions"][extension] = serde_json::json!({});
                }
            }
            advertised
        };
        let capabilities: ClientCapabilities =
            serde_json::from_value(advertised).unwrap_or_default();
        let config = ClientConfig::new(capabilities, info);
        if self.legacy {
            config.with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
        } else {
            config
        }
    }

    /// Roots are excluded (§mcp-exclusions): a legacy server that asks anyway is told the
    /// method does not exist, as for sampling, rather than handed an empty list that claims
    /// the host has none.
    // The trait names the deprecated type; overriding it is how the method is refused.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            rmcp::model::ListRootsRequestMethod,
        >())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let Some(elicitation) = call::elicitation_from(&params) else {
            return Err(ErrorData::invalid_params(
                "the elicitation is of a mode this host does not support",
                None,
            ));
        };
        let handler = match self.askers.who() {
            Asker::One(handler) => Some(handler),
            Asker::Nobody => self.interaction.clone(),
            Asker::Several => {
                tracing::warn!(
                    server = %self.alias,
                    "a question came while calls of several callers were in flight; it names \
                     none of them, so it is declined rather than shown to the wrong one"
                );
                None
            }
        };
        let answer = match &handler {
            None => ElicitationAnswer::Decline,
            Some(handler) => {
                let interaction = Interaction {
                    server: self.alias.clone(),
                    operation: "elicitation/create".into(),
                    requests: [("elicitation".to_owned(), elicitation.shown())].into(),
                };
                handler(interaction)
                    .await
                    .remove("elicitation")
                    .unwrap_or(ElicitationAnswer::Cancel)
            }
        };
        call::validate(&elicitation, &answer).map_err(|detail| {
            ErrorData::internal_error(format!("the host's answer {detail}"), None)
        })?;
        serde_json::from_value(serde_json::json!(answer))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

/// Who a legacy server's `elicitation/create` is for: the calls in flight on its connection
/// and their interaction handlers. The question names no request (2025-11-25 carries no
/// such link), so: the one caller in flight, when every call in flight has the same
/// handler; the host's own handler when no call is in flight; and, when calls of different
/// callers are in flight, nobody (declined), since showing one caller's question to another
/// would be worse than declining it.
#[derive(Default)]
pub(crate) struct Askers {
    next: AtomicU64,
    active: Mutex<Vec<(u64, InteractionHandler)>>,
}

/// Whose interaction answers a question.
pub(crate) enum Asker {
    Nobody,
    One(InteractionHandler),
    Several,
}

impl Askers {
    /// Records `handler` as a caller in flight until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, handler: InteractionHandler) -> AskerGuard {
        let id = self.next.fetch_add(1, AtomicOrdering::Relaxed);
        if let Ok(mut active) = self.active.lock() {
            active.push((id, handler));
        }
        AskerGuard {
            askers: self.clone(),
            id,
        }
    }

    fn who(&self) -> Asker {
        let Ok(active) = self.active.lock() else {
            return Asker::Several;
        };
        let Some((_, first)) = active.first() else {
            return Asker::Nobody;
        };
        if active
            .iter()
            .all(|(_, handler)| Arc::ptr_eq(handler, first))
        {
            Asker::One(first.clone())
        } else {
            Asker::Several
        }
    }
}

/// A call's place among the askers of its connection, given up when the call settles.
pub(crate) struct AskerGuard {
    askers: Arc<Askers>,
    id: u64,
}

impl Drop for AskerGuard {
    fn drop(&mut self) {
        if let Ok(mut active) = self.askers.active.lock() {
            active.retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(legacy: bool, grant: bool) -> HostClient {
        HostClient {
            alias: "s".into(),
            interaction: None,
            askers: Arc::default(),
            legacy,
            elicitation: true,
            grant,
        }
    }

    #[cfg(feature = "oauth")]
    #[test]
    fn only_a_client_credentials_connection_advertises_that_extension() {
        let key = rmcp::transport::auth::EXTENSION_OAUTH_CLIENT_CREDENTIALS;
        let advertised = |grant: bool| {
            serde_json::to_value(client(false, grant).get_info().capabilities)
                .map(|capabilities| capabilities["extensions"].get(key).is_some())
                .unwrap_or(false)
        };
        assert!(advertised(true));
        assert!(!advertised(false));
    }

    #[test]
    fn a_legacy_initialize_advertises_no_extension_of_2026_07_28() {
        let extensions = |legacy: bool| {
            serde_json::to_value(client(legacy, false).get_info().capabilities)
                .map(|capabilities| capabilities["extensions"].clone())
                .unwrap_or_default()
        };
        assert!(
            extensions(true)
                .get("io.modelcontextprotocol/tasks")
                .is_none(),
            "{}",
            extensions(true)
        );
        assert!(
            extensions(false)
                .get("io.modelcontextprotocol/tasks")
                .is_some()
        );
    }

    #[test]
    fn legacy_initialize_offers_the_newest_revision_that_has_it() {
        assert_eq!(
            client(true, false).get_info().protocol_version,
            rmcp::model::ProtocolVersion::V_2025_11_25
        );
        assert!(
            !client(false, false)
                .get_info()
                .protocol_version
                .has_initialize()
        );
    }
}
