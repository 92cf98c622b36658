//! Negotiating a connection and reading what it negotiated: the host's own `server/discover`
//! on the connection's transport, answered in its own time, then rmcp's client half served
//! over the same transport (adopting that answer, or through legacy `initialize`); the
//! crate's own [`Negotiated`] made from the discover answer or the peer info, and a later
//! discover answer checked against the first.
//!
//! The host asks and waits itself rather than through rmcp's `Auto` lifecycle, whose fixed
//! 10 s discover timer would give up on a slow server and send `initialize` on the same
//! transport, where the late discover answer then arrives first and fails the negotiation.
//! Here nothing but the attempt's one deadline ends the wait: a server is never killed for
//! being slow, never started twice, and ends at the best revision it speaks, whatever the
//! load.

use std::borrow::Cow;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, DiscoverRequest, DiscoverRequestParams, DiscoverResult,
    ErrorCode, ErrorData, JsonRpcMessage, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient};
use rmcp::transport::Transport;

use super::Service;
use crate::model::{ConnectPhase, Discovery, Negotiated};
use crate::protocol::HostClient;
use crate::protocol::phases::Phases;

/// The id of the host's own `server/discover`. rmcp numbers its requests from 0, so none of
/// its own can carry this id: an answer to it is told apart whenever it comes.
const DISCOVER_ID: &str = "plurnk-mcp/discover";

/// The revision the host prefers, which only `server/discover` negotiates.
fn preferred() -> ProtocolVersion {
    ProtocolVersion::V_2026_07_28
}

/// Negotiates over `transport`: asks `server/discover` and waits for an answer (a result, or
/// an error such as method-not-found, which is how a legacy server says no) for as long as
/// the caller's deadline lets it; then serves rmcp's client half over the same transport,
/// adopting a discover answer that offers the preferred revision, or through `initialize`
/// for a legacy server. `phases` hears the answer arrive. `true` with a modern peer.
pub(super) async fn negotiate<T>(
    mut client: HostClient,
    mut transport: T,
    phases: &Phases,
) -> Result<(Service, bool), ClientInitializeError>
where
    T: Transport<RoleClient> + 'static,
{
    let id = RequestId::String(DISCOVER_ID.into());
    transport
        .send(discover_request(&client, id.clone()))
        .await
        .map_err(|error| ClientInitializeError::transport::<T>(error, "send discover request"))?;
    let answer = first_answer(&mut transport, &id).await?;
    phases.enter(ConnectPhase::Negotiating);
    let service = match classify(answer) {
        Answer::Modern(response) => {
            client
                .serve_with_lifecycle(
                    Adopted::new(transport, *response),
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![preferred()],
                    },
                )
                .await?
        }
        Answer::Legacy(why) => {
            tracing::debug!(server = %client.alias, "{why}; initializing on the same connection");
            client.legacy = true;
            client
                .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                .await?
        }
        Answer::Refused(error) => return Err(ClientInitializeError::JsonRpcError(error)),
    };
    // Modern peers were negotiated through discover; their version has no `initialize`.
    let modern = service
        .peer()
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    Ok((service, modern))
}

/// The host's `server/discover`, carrying the client context the preferred revision's
/// requests carry in `_meta` (as rmcp's own discover does).
fn discover_request(client: &HostClient, id: RequestId) -> ClientJsonRpcMessage {
    let info = client.get_info();
    let meta =
        RequestMetaObject::with_client_context(preferred(), info.client_info, info.capabilities);
    let mut discover = DiscoverRequest::new(DiscoverRequestParams {});
    discover.extensions.insert(meta);
    ClientJsonRpcMessage::request(ClientRequest::DiscoverRequest(discover), id)
}

/// Reads until the answer to the host's discover: its result, or an error that carries its
/// id or none (a server that could not read the id). Anything else that comes first is read
/// and dropped: an answer to some other request (none is outstanding, so it is late), a
/// notification, and a request, which is refused (nothing is negotiated to answer it under).
async fn first_answer<T>(
    transport: &mut T,
    id: &RequestId,
) -> Result<ServerJsonRpcMessage, ClientInitializeError>
where
    T: Transport<RoleClient> + 'static,
{
    loop {
        let message = transport.receive().await.ok_or_else(|| {
            ClientInitializeError::ConnectionClosed("discover response".to_owned())
        })?;
        match &message {
            JsonRpcMessage::Response(response) if response.id == *id => return Ok(message),
            JsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|got| got == id) => {
                return Ok(message);
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {
                tracing::debug!(
                    "an answer to no request in flight arrived before discover's; dropped"
                );
            }
            JsonRpcMessage::Notification(_) => {
                tracing::trace!("a notification arrived before discover's answer; dropped");
            }
            JsonRpcMessage::Request(request) => {
                let refusal = ClientJsonRpcMessage::error(
                    ErrorData::new(
                        ErrorCode::INVALID_REQUEST,
                        "the host has not negotiated with this server yet",
                        None,
                    ),
                    Some(request.id.clone()),
                );
                transport.send(refusal).await.map_err(|error| {
                    ClientInitializeError::transport::<T>(
                        error,
                        "refuse a request before negotiation",
                    )
                })?;
            }
        }
    }
}

/// What the server's answer to discover makes of the connection.
enum Answer {
    /// A discover result that lists the preferred revision, or a refusal of the version asked
    /// that lists it as supported (a server may refuse a first request so, expecting it asked
    /// again): rmcp's discover lifecycle adopts it, and asks again for the second.
    Modern(Box<ServerJsonRpcMessage>),
    /// A legacy peer: `initialize` follows on the same transport. Why it is taken for one.
    Legacy(Cow<'static, str>),
    /// A rejection of the 2026-07-28 era (a capability it requires, a header that does not
    /// match): the server speaks the revision and refused this client, which `initialize`
    /// would not mend.
    Refused(ErrorData),
}

fn classify(answer: ServerJsonRpcMessage) -> Answer {
    match answer {
        JsonRpcMessage::Response(response) => match &response.result {
            ServerResult::DiscoverResult(result)
                if result.supported_versions.contains(&preferred()) =>
            {
                Answer::Modern(Box::new(JsonRpcMessage::Response(response)))
            }
            ServerResult::DiscoverResult(result) => Answer::Legacy(
                format!(
                    "its discover answer lists no revision this host prefers ({} listed)",
                    result.supported_versions.len()
                )
                .into(),
            ),
            _ => Answer::Legacy(
                "it answered discover with something other than a discover result".into(),
            ),
        },
        JsonRpcMessage::Error(error)
            if error.error.code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                && lists_preferred(error.error.data.as_ref()) =>
        {
            Answer::Modern(Box::new(JsonRpcMessage::Error(error)))
        }
        JsonRpcMessage::Error(error)
            if matches!(
                error.error.code,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY | ErrorCode::HEADER_MISMATCH
            ) =>
        {
            Answer::Refused(error.error)
        }
        JsonRpcMessage::Error(error) => {
            Answer::Legacy(format!("it answered discover with error {}", error.error.code.0).into())
        }
        JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => {
            Answer::Legacy("it did not answer discover".into())
        }
    }
}

/// Whether an unsupported-version refusal's `data.supported` lists the preferred revision.
fn lists_preferred(data: Option<&serde_json::Value>) -> bool {
    let preferred = preferred();
    data.and_then(|data| data.get("supported"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|supported| {
            supported
                .iter()
                .any(|version| version.as_str() == Some(preferred.as_str()))
        })
}

/// The transport rmcp's discover lifecycle runs over once the host has the server's answer:
/// rmcp's own `server/discover` is answered with it (under rmcp's id) instead of being sent
/// again, and everything else passes through.
struct Adopted<T> {
    inner: T,
    /// The server's answer, until rmcp asks.
    answer: Option<ServerJsonRpcMessage>,
    /// The answer under rmcp's id, for rmcp's next read.
    ready: Option<ServerJsonRpcMessage>,
}

impl<T> Adopted<T> {
    fn new(inner: T, answer: ServerJsonRpcMessage) -> Self {
        Self {
            inner,
            answer: Some(answer),
            ready: None,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Adopted<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        use futures::future::Either;
        if let JsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
            && let Some(mut answer) = self.answer.take()
        {
            match &mut answer {
                JsonRpcMessage::Response(response) => response.id = request.id.clone(),
                JsonRpcMessage::Error(error) => error.id = Some(request.id.clone()),
                JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => {}
            }
            self.ready = Some(answer);
            return Either::Left(std::future::ready(Ok(())));
        }
        Either::Right(self.inner.send(item))
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        match self.ready.take() {
            Some(answer) => Some(answer),
            None => self.inner.receive().await,
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
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
