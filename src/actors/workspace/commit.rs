//! The one writer of the snapshot. A commit costs what changed, not what the workspace holds:
//! the servers and the routes are persistent maps kept up to date as reports arrive, so a
//! commit clones two roots and reads the state counts. At most one commit is queued at a
//! time, and it is spaced from the last one, so reports that arrive faster than that are
//! gathered into it whatever their rate: hydrating N servers commits a number of times set by
//! how long it takes, not by N. Answers that wait for a commit go out once the snapshot
//! showing them is published.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::ActorRef;

use super::{Published, WorkspaceState};
use crate::actors::messages::WorkspaceMsg;
use crate::model::{HostEvent, Problem, ServerState, WorkspaceSnapshot};

/// The least time between two queued commits. A workspace that committed longer ago than this
/// commits at once (an action in a quiet workspace waits for nothing); reports arriving
/// closer together than this wait for the one commit that gathers them.
pub(super) const COMMIT_SPACING: Duration = Duration::from_millis(1);

/// When the next commit goes out, a pure function of when the last one went and whether one
/// is queued: reports at any rate become at most one commit per [`COMMIT_SPACING`].
#[derive(Debug, Default)]
pub(super) struct Coalescing {
    next: Next,
    /// When the last commit went out.
    last: Option<Instant>,
}

/// The next commit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// None is queued: the next report queues one.
    #[default]
    Idle,
    /// A `Commit` is in the mailbox or on its way there; every report before it is in it.
    Queued,
}

impl Coalescing {
    /// A report arrived at `now`. `Some(wait)`: it queues a commit, to be sent `wait` from
    /// now; `None`: it joins the commit already queued.
    pub(super) fn report(&mut self, now: Instant) -> Option<Duration> {
        if self.next == Next::Queued {
            return None;
        }
        self.next = Next::Queued;
        Some(self.last.map_or(Duration::ZERO, |last| {
            COMMIT_SPACING.saturating_sub(now.saturating_duration_since(last))
        }))
    }

    /// The queued commit arrived: the next report queues another.
    pub(super) fn arrived(&mut self) {
        self.next = Next::Idle;
    }

    /// A commit went out at `now` (the queued one, or one an action made at once).
    pub(super) fn committed(&mut self, now: Instant) {
        self.last = Some(now);
    }
}

// === impl WorkspaceState ===

impl WorkspaceState {
    /// The queued `Commit` arrived: everything reported before it becomes one snapshot.
    pub(super) fn on_commit(&mut self) {
        self.coalescing.arrived();
        self.commit();
    }

    /// Queues one `Commit`, unless one is queued: behind whatever the mailbox holds, and no
    /// sooner than [`COMMIT_SPACING`] after the last commit.
    pub(super) fn schedule_commit(&mut self, myself: &ActorRef<WorkspaceMsg>) {
        match self.coalescing.report(Instant::now()) {
            None => {}
            Some(wait) if wait.is_zero() => {
                let _ = myself.cast(WorkspaceMsg::Commit);
            }
            Some(wait) => {
                myself.send_after(wait, || WorkspaceMsg::Commit);
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

    /// Builds and swaps in a new snapshot: the one place a workspace's view changes. Nothing
    /// here walks the servers: the map and the routes are shared, the counts are kept.
    pub(super) fn commit(&mut self) {
        self.version += 1;
        self.coalescing.committed(Instant::now());
        metrics::counter!("plurnk_mcp_commits_total").increment(1);
        debug_assert!(
            self.attachments.routes_agree(),
            "a route differs from its attachment"
        );
        let snapshot = Arc::new(WorkspaceSnapshot {
            workspace: self.name.clone(),
            version: self.version,
            servers: self.servers.clone(),
        });
        for state in ServerState::ALL {
            metrics::gauge!("plurnk_mcp_attachments", "workspace" => self.name.clone(), "state" => state.as_str())
                .set(snapshot.servers.count(state) as f64);
        }
        let routes = self.attachments.routes().clone();
        // The snapshot replaced is dropped here unless a reader holds it: only what this
        // commit changed was its own.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator, as in `restart.rs`.
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// Reports at any rate, from one every microsecond to one every few milliseconds, each
    /// commit taking its own time to reach the mailbox's front: every report is in a commit
    /// sent at or after it, a report in a quiet workspace is committed at once, and there are
    /// at most as many commits as the span of time allows, whatever the number of reports.
    #[test]
    fn property_reports_at_any_rate_commit_once_per_spacing_and_none_is_left_out() {
        let mut seed = 3;
        for case in 0..300 {
            let reports = 1 + (lcg(&mut seed) % 5_000) as usize;
            let densest = case % 3 == 0;
            let start = Instant::now();
            let mut policy = Coalescing::default();
            let mut at = start;
            // When the queued commit reaches the front of the mailbox, and the reports it
            // will carry.
            let mut queued: Option<(Instant, usize)> = None;
            let mut commits = 0usize;
            let mut committed_reports = 0usize;
            let mut last_commit: Option<Instant> = None;
            for _ in 0..reports {
                let gap = if densest { 1 } else { lcg(&mut seed) % 3_000 };
                at += Duration::from_micros(gap);
                // A queued commit whose time came goes out before this report is handled.
                if let Some((due, carried)) = queued
                    && due <= at
                {
                    policy.arrived();
                    policy.committed(due);
                    commits += 1;
                    committed_reports += carried;
                    last_commit = Some(due);
                    queued = None;
                }
                let quiet = queued.is_none()
                    && last_commit.is_none_or(|last| at.duration_since(last) >= COMMIT_SPACING);
                match policy.report(at) {
                    Some(wait) => {
                        assert!(queued.is_none(), "a second commit queued beside the first");
                        if quiet {
                            assert_eq!(wait, Duration::ZERO, "a quiet workspace waited");
                        }
                        // The mailbox takes its own time to reach the commit.
                        let behind = Duration::from_micros(lcg(&mut seed) % 200);
                        queued = Some((at + wait + behind, 1));
                    }
                    None => match &mut queued {
                        Some((_, carried)) => *carried += 1,
                        None => panic!("a report joined a commit that is not queued"),
                    },
                }
            }
            if let Some((due, carried)) = queued.take() {
                policy.arrived();
                policy.committed(due);
                commits += 1;
                committed_reports += carried;
                last_commit = Some(due);
            }
            assert_eq!(committed_reports, reports, "every report is committed");
            let span = last_commit.map_or(Duration::ZERO, |last| last.duration_since(start));
            let allowed = 1 + (span.as_micros() / COMMIT_SPACING.as_micros()) as usize;
            assert!(
                commits <= allowed,
                "{commits} commits for {reports} reports over {span:?}"
            );
        }
    }
}
