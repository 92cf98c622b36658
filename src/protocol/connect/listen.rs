//! A connection's `subscriptions/listen` stream: what it carries (the list changes the server
//! offers, the resources read so far), kept open as long as the connection is.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::model::SubscriptionFilter;
use rmcp::service::RoleClient;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What a listen stream of this server should carry: the list changes it offers, and
/// whether it offers updates of individual resources.
pub(super) fn listen_base(capabilities: &serde_json::Value) -> Option<(SubscriptionFilter, bool)> {
    let offers = |surface: &str| capabilities[surface]["listChanged"].as_bool() == Some(true);
    let mut filter = SubscriptionFilter::default();
    if offers("tools") {
        filter.tools_list_changed = Some(true);
    }
    if offers("resources") {
        filter.resources_list_changed = Some(true);
    }
    if offers("prompts") {
        filter.prompts_list_changed = Some(true);
    }
    let updates = capabilities["resources"]["subscribe"].as_bool() == Some(true);
    let any = filter != SubscriptionFilter::default() || updates;
    any.then_some((filter, updates))
}

/// Keeps one `subscriptions/listen` open carrying the current filter: the list changes the
/// server offers and the resource URIs read so far. A filter change opens the new stream
/// before the old one is dropped, so no notification falls into a gap; a lost stream is
/// opened again, gently if the server keeps refusing. The notifications themselves are
/// handled by the transport wrapper, in arrival order; this task keeps the stream open and
/// drains it so rmcp's buffer never overflows.
pub(super) async fn listen(
    alias: String,
    peer: rmcp::Peer<RoleClient>,
    base: SubscriptionFilter,
    mut uris: Option<watch::Receiver<BTreeSet<String>>>,
    lost: CancellationToken,
    closing: CancellationToken,
) {
    let filter = |uris: &Option<watch::Receiver<BTreeSet<String>>>| {
        let mut filter = base.clone();
        if let Some(uris) = uris {
            let uris: Vec<String> = uris.borrow().iter().cloned().collect();
            if !uris.is_empty() {
                filter.resource_subscriptions = Some(uris);
            }
        }
        filter
    };
    let mut current = None;
    let mut failures = 0u32;
    loop {
        let Some(subscription) = current.as_mut() else {
            let opened = tokio::select! {
                opened = peer.listen(filter(&uris)) => opened,
                () = closing.cancelled() => return,
                () = lost.cancelled() => return,
            };
            match opened {
                Ok(subscription) => {
                    failures = 0;
                    current = Some(subscription);
                }
                Err(error) => {
                    failures += 1;
                    tracing::debug!(server = %alias, %error, "subscriptions/listen failed");
                    let delay = Duration::from_millis(100u64 << failures.min(6));
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = closing.cancelled() => return,
                        () = lost.cancelled() => return,
                    }
                }
            }
            continue;
        };
        let changed = async {
            match uris.as_mut() {
                Some(uris) => uris.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = subscription.next() => {
                if !matches!(next, Ok(Some(_))) {
                    current = None;
                }
            }
            still = changed => {
                if !still {
                    uris = None;
                    continue;
                }
                // Overlap: the new stream is acknowledged before the old one goes.
                if let Ok(replacement) = peer.listen(filter(&uris)).await {
                    current = Some(replacement);
                }
            }
            () = closing.cancelled() => return,
            () = lost.cancelled() => return,
        }
    }
}
