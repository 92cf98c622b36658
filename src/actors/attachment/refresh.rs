//! Listing a ready server's catalog again (a list change, or its `ttlMs` passing) and
//! committing the new catalog at quiescence: calls wait behind the change while the active
//! ones settle, within a bound after which it commits beside them.

use std::time::Duration;

use ractor::ActorRef;

use super::{AttachmentMsg, AttachmentState, Lifecycle, Refresh};
use crate::model::Problem;
use crate::protocol;

/// Whether the catalog is being listed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relisting {
    /// No listing runs.
    Idle,
    /// A listing runs.
    Running,
    /// A listing runs, and another change arrived meanwhile: list once more after it.
    Again,
}

// === impl AttachmentState ===

impl AttachmentState {
    /// Whichever connection reported it, the catalog may have changed: the refresh lists
    /// the current one (and only a ready one), and a change committed during a drain is a
    /// real one, shown until the server goes.
    pub(super) fn on_list_changed(&mut self, myself: &ActorRef<AttachmentMsg>) {
        if matches!(self.lifecycle, Lifecycle::Ready(_)) {
            match self.relisting {
                Relisting::Running | Relisting::Again => self.relisting = Relisting::Again,
                Relisting::Idle => self.start_refresh(myself),
            }
        }
    }

    /// The tool list's `ttlMs` passed: list again, if this is the latest timer of the
    /// current connection and nothing lists already.
    pub(super) fn on_expired(
        &mut self,
        myself: &ActorRef<AttachmentMsg>,
        generation: u64,
        epoch: u64,
    ) {
        if generation == self.generation
            && epoch == self.expiry
            && self.draining.is_none()
            && self.relisting == Relisting::Idle
            && matches!(self.lifecycle, Lifecycle::Ready(_))
        {
            self.start_refresh(myself);
        }
    }

    /// The bound for a waiting refresh passed: it commits beside the calls still active.
    pub(super) fn on_refresh_deadline(&mut self, myself: &ActorRef<AttachmentMsg>, epoch: u64) {
        // Only the deadline of the refresh waiting now counts (a refresh that was committed
        // or dropped takes its deadline with it).
        // A deadline that outlived its refresh (committed at quiescence before the bound)
        // finds nothing waiting, and says nothing.
        if epoch != self.refresh_epoch || self.pending_refresh.is_none() {
            return;
        }
        let active = self.args.session.active();
        if active > 0 {
            tracing::warn!(
                server = %self.args.alias,
                "{active} call(s) did not settle within the bound; committing the refreshed \
                 catalog beside them"
            );
        }
        self.commit_refresh(myself);
    }

    pub(super) fn start_refresh(&mut self, myself: &ActorRef<AttachmentMsg>) {
        let Lifecycle::Ready(live) = &self.lifecycle else {
            return;
        };
        self.relisting = Relisting::Running;
        let generation = self.generation;
        // Read by what the server said last (its discover answer may have been renewed).
        let peer = live.connection.lister().renewed(live.negotiated.clone());
        let (retired, lost) = (live.retired.clone(), live.connection.lost());
        let alias = self.args.alias.clone();
        let definition = self.args.definition.clone();
        let timeout = self.args.settings.request_timeout;
        // Listing again is bounded as the first listing is: by the request timeout, whole.
        let bound = timeout;
        let myself = myself.clone();
        tokio::spawn(async move {
            // Listing again is bounded as a whole, like the first listing.
            let listing =
                tokio::time::timeout(bound, protocol::relist(&alias, &definition, &peer, timeout));
            let result = tokio::select! {
                biased;
                // A connection the actor let go has nothing more to say.
                () = retired.cancelled() => return,
                listed = listing => listed.unwrap_or_else(|_| {
                    Err(Problem::list_failed(format!(
                        "server \"{alias}\" changed its lists and could not be listed again within {} ms \
                         (PLURNK_MCP_REQUEST_TIMEOUT)",
                        bound.as_millis()
                    )))
                }),
            };
            // A listing cut short because the connection was lost is the loss's to report:
            // the transport marks the loss before its requests fail, so the actor always
            // hears of it as a loss, with the server's exit, never as a catalog failure.
            if result.is_err() && lost.is_cancelled() {
                return;
            }
            let _ = myself.cast(AttachmentMsg::Refreshed { generation, result });
        });
    }

    pub(super) fn on_refreshed(
        &mut self,
        myself: &ActorRef<AttachmentMsg>,
        generation: u64,
        result: Result<Box<Refresh>, Problem>,
    ) {
        // Only a ready connection's listing counts, and only ever the current one's: a
        // connection the actor lets go is retired first (its refresh stops with its `Live`),
        // and a listing sent before that is handled before any newer connection can be
        // ready, since both go through this one mailbox in order.
        if !matches!(self.lifecycle, Lifecycle::Ready(_)) {
            return;
        }
        debug_assert_eq!(
            generation, self.generation,
            "a retired connection reported its listing"
        );
        let again = std::mem::replace(&mut self.relisting, Relisting::Idle) == Relisting::Again;
        match result {
            Ok(refresh) => {
                // The bound runs from the first change that waits: a newer catalog replaces
                // the waiting one but does not start the wait again (no starving).
                if self.pending_refresh.is_none() {
                    self.refresh_epoch += 1;
                    let epoch = self.refresh_epoch;
                    myself.send_after(self.args.settings.drain_timeout, move || {
                        AttachmentMsg::RefreshDeadline { epoch }
                    });
                }
                self.pending_refresh = Some(refresh);
                // New calls wait behind the change; it commits once the active ones settle.
                if self.args.session.hold() {
                    self.commit_refresh(myself);
                }
            }
            Err(problem) => {
                // The catalog now contradicts the policy (or cannot be listed): the server
                // is unavailable until a reconnect lists a consistent one.
                if let Lifecycle::Ready(live) =
                    std::mem::replace(&mut self.lifecycle, Lifecycle::Unavailable(problem))
                {
                    live.connection
                        .close_in_background(self.args.settings.connect.close_grace);
                }
                self.publish();
                self.forget_refresh();
                if self.draining.is_none() {
                    self.schedule_retry(myself);
                }
                return;
            }
        }
        if again {
            self.start_refresh(myself);
        }
    }

    /// Commits the waiting catalog, if any, once nothing is active (a stale `Quiet` finds
    /// either nothing waiting or calls active again, and does nothing).
    pub(super) fn commit_refresh_if_quiet(&mut self, myself: &ActorRef<AttachmentMsg>) {
        if self.args.session.active() == 0 {
            self.commit_refresh(myself);
        }
    }

    /// Swaps the refreshed catalog in and publishes it; then the calls that waited run.
    pub(super) fn commit_refresh(&mut self, myself: &ActorRef<AttachmentMsg>) {
        let Some(refresh) = self.pending_refresh.take() else {
            return;
        };
        if let Lifecycle::Ready(live) = &mut self.lifecycle {
            live.tools = refresh.tools;
            live.catalog = refresh.catalog;
            live.freshness = refresh.freshness;
            if let Some(negotiated) = refresh.negotiated {
                live.negotiated = negotiated;
            }
            self.publish();
        }
        // The calls that waited behind the change run now, on the new catalog.
        self.open_gate();
        self.schedule_expiry(myself);
    }

    /// Honours the tool list's `ttlMs`: once it passes, the list is fetched again (and
    /// committed at quiescence like any change). No sooner than a second apart; a `ttlMs`
    /// of 0 or none leaves the catalog to list-change notifications.
    pub(super) fn schedule_expiry(&mut self, myself: &ActorRef<AttachmentMsg>) {
        let Lifecycle::Ready(live) = &self.lifecycle else {
            return;
        };
        let Some(freshness) = live.freshness else {
            return;
        };
        self.expiry += 1;
        let (generation, epoch) = (self.generation, self.expiry);
        myself.send_after(freshness.max(Duration::from_secs(1)), move || {
            AttachmentMsg::Expired { generation, epoch }
        });
    }

    /// The connection is gone, and its refresh with it: nothing is listing, nothing waits to
    /// be committed (a newer connection lists its own catalog), and the calls that waited for
    /// the commit are answered now, as the gate now says.
    pub(super) fn forget_refresh(&mut self) {
        self.relisting = Relisting::Idle;
        self.pending_refresh = None;
        self.close_gate();
    }
}
