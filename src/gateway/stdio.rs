//! The gateway over a byte stream pair: rmcp's line transport, with a 2026-07-28 client's
//! `ping` refused before any lifecycle is chosen.
//!
//! rmcp's stdio server answers every `ping` it reads before an `initialize` or a request
//! that names its revision, as 2025-11-25 allows before `initialize`; the service never sees
//! it. A client that opened with `server/discover` speaks 2026-07-28, which removed `ping`
//! (§mcp-core-matrix): its `ping` is answered method-not-found here, until it falls back to
//! `initialize`. Once a lifecycle is chosen rmcp refuses a 2026-07-28 `ping` itself.

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, PingRequestMethod, ServerJsonRpcMessage,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// A server transport that refuses a `ping` of a client that opened with `server/discover`.
pub(super) struct Lifecycle<T> {
    inner: T,
    /// The client's last lifecycle request was `server/discover`, not `initialize`.
    discovered: bool,
}

impl<T> Lifecycle<T> {
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            discovered: false,
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Lifecycle<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            if let ClientJsonRpcMessage::Request(request) = &message {
                match &request.request {
                    ClientRequest::DiscoverRequest(_) => self.discovered = true,
                    ClientRequest::InitializeRequest(_) => self.discovered = false,
                    ClientRequest::PingRequest(_) if self.discovered => {
                        let refused = ServerJsonRpcMessage::error(
                            ErrorData::method_not_found::<PingRequestMethod>(),
                            Some(request.id.clone()),
                        );
                        // A client that stopped reading costs this one answer, as rmcp's own.
                        if self.inner.send(refused).await.is_err() {
                            return None;
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
