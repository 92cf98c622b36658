//! Negotiating a connection and reading what it negotiated: the client half served over a
//! transport (discover first, or legacy `initialize`), the crate's own [`Negotiated`] made
//! from the discover answer or the peer info, and a later discover answer checked against
//! the first.

use rmcp::model::DiscoverResult;
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient};
use rmcp::transport::Transport;

use super::Service;
use crate::model::{Discovery, Negotiated};
use crate::protocol::HostClient;

pub(super) async fn negotiate<T>(
    client: HostClient,
    transport: T,
    lifecycle: ClientLifecycleMode,
) -> Result<(Service, bool), ClientInitializeError>
where
    T: Transport<RoleClient> + 'static,
{
    let service = client.serve_with_lifecycle(transport, lifecycle).await?;
    // Modern peers were negotiated through discover; their version has no `initialize`.
    let modern = service
        .peer()
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    Ok((service, modern))
}

pub(super) fn negotiated(
    service: &Service,
    modern: bool,
    discovered: Option<&DiscoverResult>,
) -> Negotiated {
    let info = service.peer().peer_info();
    let Some(info) = info else {
        return Negotiated {
            revision: "unknown".into(),
            modern,
            name: None,
            version: None,
            title: None,
            description: None,
            instructions: None,
            capabilities: serde_json::Value::Null,
            discovery: None,
        };
    };
    Negotiated {
        discovery: discovered.filter(|_| modern).map(discovery),
        ..described(
            info.protocol_version.as_str().to_owned(),
            modern,
            info.server_info.as_ref(),
            info.instructions.clone(),
            &info.capabilities,
        )
    }
}

/// What a discover answer says beside identity, capabilities and instructions.
pub(super) fn discovery(result: &DiscoverResult) -> Discovery {
    Discovery {
        supported_versions: result
            .supported_versions
            .iter()
            .map(|version| version.as_str().to_owned())
            .collect(),
        ttl_ms: result.ttl_ms,
        cache_scope: match result.cache_scope {
            rmcp::model::CacheScope::Private => "private",
            _ => "public",
        }
        .to_owned(),
    }
}

/// A later discover answer no longer lists the negotiated revision: the connection must be
/// opened again. It shows how many revisions the server listed and at most four of them,
/// each cut, since they are the server's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "its discover answer no longer lists revision {revision} (it lists {count} revision(s): {}{})",
    listed.join(", "),
    if *count > listed.len() { ", …" } else { "" }
)]
pub(crate) struct RevisionDropped {
    revision: String,
    count: usize,
    listed: Vec<String>,
}

/// A modern server's negotiation renewed from a new discover answer: identity, capabilities,
/// instructions and hints as it now says, the revision as negotiated (a server that no longer
/// lists it is an error: the connection must be opened again).
pub(super) fn rediscovered(
    old: &Negotiated,
    result: &DiscoverResult,
) -> Result<Negotiated, RevisionDropped> {
    if !result
        .supported_versions
        .iter()
        .any(|version| version.as_str() == old.revision)
    {
        return Err(RevisionDropped {
            revision: old.revision.clone(),
            count: result.supported_versions.len(),
            // The server's words, bounded: a few of its revisions, each cut.
            listed: result
                .supported_versions
                .iter()
                .take(4)
                .map(|version| format!("{:?}", crate::config::shorten(version.as_str())))
                .collect(),
        });
    }
    Ok(Negotiated {
        discovery: Some(discovery(result)),
        ..described(
            old.revision.clone(),
            true,
            result.server_info().as_ref(),
            result.instructions.clone(),
            &result.capabilities,
        )
    })
}

/// A negotiation as the server described itself (its identity, instructions, capabilities).
pub(super) fn described(
    revision: String,
    modern: bool,
    identity: Option<&rmcp::model::Implementation>,
    instructions: Option<String>,
    capabilities: &rmcp::model::ServerCapabilities,
) -> Negotiated {
    Negotiated {
        // The server's word for the revision, which rmcp keeps as it came: every revision
        // is a short date, so a longer one is quoted cut, as a name would be.
        revision: crate::config::shorten(&revision),
        modern,
        name: identity.map(|i| i.name.clone()),
        version: identity.map(|i| i.version.clone()),
        title: identity.and_then(|i| i.title.clone()),
        description: identity.and_then(|i| i.description.clone()),
        instructions,
        capabilities: serde_json::to_value(capabilities).unwrap_or_default(),
        discovery: None,
    }
}
