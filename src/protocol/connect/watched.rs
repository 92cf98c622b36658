//! The transport wrapper every connection reads through: it notices the moment the
//! transport stops delivering, routes each progress report to its caller before any later
//! message, wakes the list-change `Notify`, hands resource updates on, keeps the server's
//! whole discover answer, and holds inbound traffic within its bounds.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{JsonRpcMessage, ServerNotification, ServerResult};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Discovered, OnUpdate};
use crate::model::Progress;
use crate::protocol::call::ProgressRoutes;
use crate::protocol::guard::{self, Inbound, Verdict};

/// The sending ends of what a [`Watched`] transport reports, and the bounds it keeps.
pub(super) struct Signals {
    pub(super) discovered: Discovered,
    pub(super) lost: CancellationToken,
    pub(super) routes: Arc<ProgressRoutes>,
    pub(super) changed: Arc<Notify>,
    pub(super) updated: Option<OnUpdate>,
    pub(super) inbound: Inbound,
}

impl Signals {
    pub(super) fn wrap<T>(self, inner: T) -> Watched<T> {
        let pending = self.inbound.pending();
        Watched {
            inner,
            discovered: self.discovered,
            lost: self.lost,
            routes: self.routes,
            changed: self.changed,
            updated: self.updated,
            inbound: self.inbound,
            pending,
        }
    }
}

/// Wraps a transport to notice the moment it stops delivering messages, to hand each
/// progress notification to the caller that owns it before any later message (such as the
/// result it precedes) is processed, and to keep the server's inbound traffic within its
/// bounds ([`Inbound`]): what exceeds them never reaches rmcp.
pub(super) struct Watched<T> {
    inner: T,
    discovered: Discovered,
    lost: CancellationToken,
    routes: Arc<ProgressRoutes>,
    changed: Arc<Notify>,
    /// Told each `notifications/resources/updated` URI, in arrival order.
    updated: Option<OnUpdate>,
    inbound: Inbound,
    /// Server requests not answered yet, shared with `inbound`.
    pending: Arc<std::sync::atomic::AtomicUsize>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)) {
            guard::answered(&self.pending);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await;
            let verdict = match &message {
                None => Verdict::Cut,
                Some(JsonRpcMessage::Notification(_)) => self.inbound.notification(),
                Some(JsonRpcMessage::Request(_)) => self.inbound.request(),
                Some(_) => Verdict::Pass,
            };
            match verdict {
                Verdict::Pass => {}
                Verdict::Drop => continue,
                Verdict::Cut => {
                    self.lost.cancel();
                    return None;
                }
            }
            if let Some(JsonRpcMessage::Response(response)) = &message
                && let ServerResult::DiscoverResult(discover) = &response.result
            {
                *self
                    .discovered
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(discover.clone());
            }
            if let Some(JsonRpcMessage::Notification(notification)) = &message {
                match &notification.notification {
                    ServerNotification::ProgressNotification(progress) => {
                        let params = &progress.params;
                        self.routes.deliver(
                            &params.progress_token,
                            Progress {
                                progress: params.progress,
                                total: params.total,
                                message: params.message.clone(),
                            },
                        );
                    }
                    ServerNotification::ResourceUpdatedNotification(updated) => {
                        if let Some(tell) = &self.updated {
                            tell(&updated.params.uri);
                        }
                    }
                    ServerNotification::ToolListChangedNotification(_)
                    | ServerNotification::ResourceListChangedNotification(_)
                    | ServerNotification::PromptListChangedNotification(_) => {
                        self.changed.notify_one();
                    }
                    _ => {}
                }
            }
            return message;
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.lost.cancel();
        self.inner.close().await
    }
}
