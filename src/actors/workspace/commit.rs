//! The one writer of the snapshot: reports in a burst become one commit, queued behind them,
//! and answers that wait for a commit go out once the snapshot showing them is published.

use std::sync::Arc;

use ractor::ActorRef;

use super::{Published, Route, WorkspaceState};
use crate::actors::messages::WorkspaceMsg;
use crate::model::{HostEvent, Problem, ServerSnapshot, ServerState, WorkspaceSnapshot};

// === impl WorkspaceState ===

impl WorkspaceState {
    /// The queued `Commit` arrived: everything reported before it becomes one snapshot.
    pub(super) fn on_commit(&mut self) {
        self.commit_scheduled = false;
        self.commit();
    }

    /// Queues one `Commit` behind whatever the mailbox already holds, unless one is queued.
    pub(super) fn schedule_commit(&mut self, myself: &ActorRef<WorkspaceMsg>) {
        if !self.commit_scheduled {
            self.commit_scheduled = true;
            let _ = myself.cast(WorkspaceMsg::Commit);
        }
    }

    /// Puts `server` in the map under `alias`, keeping the key it had: a state change
    /// allocates no key, and a commit's copy of the map shares every one.
    pub(super) fn set_server(
        &mut self,
        alias: &str,
        server: Arc<ServerSnapshot>,
    ) -> Option<Arc<ServerSnapshot>> {
        match self.servers.get_mut(alias) {
            Some(slot) => Some(std::mem::replace(slot, server)),
            None => {
                self.servers.insert(Arc::from(alias), server);
                None
            }
        }
    }

    /// Tells subscribers that `alias` moved from `from` to `to`, and counts the move.
    pub(super) fn state_changed(
        &self,
        alias: &str,
        from: Option<ServerState>,
        to: ServerState,
        problem: Option<Problem>,
    ) {
        metrics::counter!("plurnk_mcp_state_changes_total", "to" => to.as_str()).increment(1);
        let _ = self.events.send(HostEvent::StateChanged {
            workspace: self.name.clone(),
            alias: alias.to_owned(),
            from,
            to,
            problem,
        });
    }

    /// Builds and swaps in a new snapshot: the one place a workspace's view changes.
    pub(super) fn commit(&mut self) {
        self.version += 1;
        metrics::counter!("plurnk_mcp_commits_total").increment(1);
        let snapshot = Arc::new(WorkspaceSnapshot {
            workspace: self.name.clone(),
            version: self.version,
            servers: self.servers.clone(),
        });
        // Most commits change a server's state, not who serves it: the last routes are
        // reused unless an attachment came, went or was replaced.
        let same = self.routes.len() == self.attachments.len()
            && self.attachments.iter().all(|(alias, attached)| {
                self.routes.get(alias).is_some_and(|route| {
                    Arc::ptr_eq(&route.session, &attached.session)
                        && route.actor.get_id() == attached.actor.get_id()
                })
            });
        if !same {
            self.routes = Arc::new(
                self.attachments
                    .iter()
                    .map(|(alias, attached)| {
                        let route = Route {
                            session: attached.session.clone(),
                            actor: attached.actor.clone(),
                        };
                        (alias.clone(), route)
                    })
                    .collect(),
            );
        }
        let routes = self.routes.clone();
        for (state, count) in state_counts(snapshot.servers.values().map(|s| s.state)) {
            metrics::gauge!("plurnk_mcp_attachments", "workspace" => self.name.clone(), "state" => state.as_str())
                .set(count as f64);
        }
        self.published
            .send_replace(Arc::new(Published { snapshot, routes }));
        let _ = self.events.send(HostEvent::SnapshotCommitted {
            workspace: self.name.clone(),
            version: self.version,
        });
        for (reply, answer) in self.after_commit.drain(..) {
            let _ = reply.send(answer);
        }
    }
}

/// How many servers are in each state (every state named, zero included): the
/// `plurnk_mcp_attachments` gauge.
fn state_counts(states: impl Iterator<Item = ServerState>) -> [(ServerState, usize); 6] {
    let mut counts = [
        ServerState::Disabled,
        ServerState::Connecting,
        ServerState::Ready,
        ServerState::Unavailable,
        ServerState::CrashLoop,
        ServerState::AuthorizationRequired,
    ]
    .map(|state| (state, 0));
    for state in states {
        if let Some((_, count)) = counts.iter_mut().find(|(known, _)| *known == state) {
            *count += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_counts_servers_in_every_state() {
        let states = [
            ServerState::Ready,
            ServerState::Disabled,
            ServerState::Ready,
            ServerState::CrashLoop,
        ];
        assert_eq!(
            state_counts(states.into_iter()),
            [
                (ServerState::Disabled, 1),
                (ServerState::Connecting, 0),
                (ServerState::Ready, 2),
                (ServerState::Unavailable, 0),
                (ServerState::CrashLoop, 1),
                (ServerState::AuthorizationRequired, 0),
            ]
        );
    }
}
