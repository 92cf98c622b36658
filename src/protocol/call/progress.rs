//! Progress reports routed to the caller whose request owns their token, including the
//! reports a fast server sends before that route is made.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::ProgressToken;

use crate::model::{Progress, ProgressSink};

/// Progress sinks by the progress token of the request that owns them.
#[derive(Default)]
pub(crate) struct ProgressRoutes(pub(super) Mutex<Routes>);

#[derive(Default)]
pub(super) struct Routes {
    pub(super) sinks: HashMap<ProgressToken, ProgressSink>,
    /// Reports that arrived before their route: rmcp picks a request's progress token as it
    /// sends the request, so the route can only be made once the request is on its way, and a
    /// fast server's first report may be read before that. Kept, oldest first, until their
    /// route is made; at most [`EARLY_REPORTS`] (the oldest go first), since a server may
    /// report progress on a request whose caller asked for none.
    pub(super) early: std::collections::VecDeque<(ProgressToken, Progress)>,
}

/// How many reports without a route are kept for a route about to be made.
pub(super) const EARLY_REPORTS: usize = 64;

impl ProgressRoutes {
    /// Delivers a progress notification to the caller that owns its token; keeps it for a
    /// while when that route is not made yet.
    pub(crate) fn deliver(&self, token: &ProgressToken, mut progress: Progress) {
        // The server's words reach the caller: scrubbed and bounded like any.
        progress.message = progress
            .message
            .map(|message| crate::redact::scrub_capped(&message, crate::redact::SHOWN_CHARS));
        let sink = {
            let Ok(mut routes) = self.0.lock() else {
                return;
            };
            match routes.sinks.get(token) {
                Some(sink) => sink.clone(),
                None => {
                    if routes.early.len() == EARLY_REPORTS {
                        routes.early.pop_front();
                    }
                    routes.early.push_back((token.clone(), progress));
                    return;
                }
            }
        };
        sink(progress);
    }

    /// Makes the route, handing it first the reports that arrived before it, in order (under
    /// the lock, so a report read meanwhile comes after them).
    pub(super) fn insert(&self, token: ProgressToken, sink: ProgressSink) {
        if let Ok(mut routes) = self.0.lock() {
            let mut kept = std::collections::VecDeque::with_capacity(routes.early.len());
            for (early, progress) in std::mem::take(&mut routes.early) {
                if early == token {
                    sink(progress);
                } else {
                    kept.push_back((early, progress));
                }
            }
            routes.early = kept;
            routes.sinks.insert(token, sink);
        }
    }

    fn remove(&self, token: &ProgressToken) {
        if let Ok(mut routes) = self.0.lock() {
            routes.sinks.remove(token);
        }
    }
}

/// Removes a progress route when the request that owns it settles, however it settles.
pub(super) struct RouteGuard<'a> {
    pub(super) routes: &'a ProgressRoutes,
    pub(super) token: Option<ProgressToken>,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.routes.remove(&token);
        }
    }
}
