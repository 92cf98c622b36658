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

/// The least time between two queued commits that nobody waits for. A workspace that committed
/// longer ago than this commits at once; reports arriving closer together than this (a
/// hydration) wait for the one commit that gathers them. A report whose action waits for the
/// commit (an enable, a disable) is committed at once, with everything queued before it.
pub(super) const COMMIT_SPACING: Duration = Duration::from_millis(1);

/// When the next commit goes out, a pure function of when the last one went, what is queued
/// and whether an action waits: reports at any rate nobody waits for become at most one commit
/// per [`COMMIT_SPACING`], and an action waits for no spacing.
#[derive(Debug, Default)]
pub(super) struct Coalescing {
    next: Next,
    /// When the last commit went out.
    last: Option<Instant>,
    /// The number of the last `Commit` sent: one sent at once overtakes one on a timer, whose
    /// arrival is then ignored.
    ticket: u64,
}

/// The next commit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// None is queued: the next report queues one.
    #[default]
    Idle,
    /// A `Commit` is on a timer, for the spacing: reports gather behind it, and one an action
    /// waits for sends another at once.
    Spaced,
    /// A `Commit` is in the mailbox: every report before it is in it.
    Queued,
}

/// What a report asks the actor to send itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dispatch {
    /// Nothing: the commit already queued will carry it.
    Nothing,
    /// `Commit { ticket }` now, behind whatever the mailbox holds.
    Now(u64),
    /// `Commit { ticket }` once the duration has passed.
    After(Duration, u64),
}

impl Coalescing {
    /// A report arrived at `now`; `waiting` when an action waits for the commit showing it.
    pub(super) fn report(&mut self, now: Instant, waiting: bool) -> Dispatch {
        match (self.next, waiting) {
            (Next::Queued, _) | (Next::Spaced, false) => return Dispatch::Nothing,
            (Next::Idle, _) | (Next::Spaced, true) => {}
        }
        let wait = match (waiting, self.last) {
            (true, _) | (false, None) => Duration::ZERO,
            (false, Some(last)) => {
                COMMIT_SPACING.saturating_sub(now.saturating_duration_since(last))
            }
        };
        self.ticket += 1;
        if wait.is_zero() {
            self.next = Next::Queued;
            Dispatch::Now(self.ticket)
        } else {
            self.next = Next::Spaced;
            Dispatch::After(wait, self.ticket)
        }
    }

    /// The `Commit` numbered `ticket` arrived: whether it is the one queued (an overtaken one
    /// commits nothing). The next report queues another.
    pub(super) fn arrived(&mut self, ticket: u64) -> bool {
        if ticket != self.ticket {
            return false;
        }
        self.next = Next::Idle;
        true
    }

    /// A commit went out at `now` (the queued one, or one an action made at once).
    pub(super) fn committed(&mut self, now: Instant) {
        self.last = Some(now);
    }
}

// === impl WorkspaceState ===

impl WorkspaceState {
    /// The queued `Commit` arrived: everything reported before it becomes one snapshot.
    pub(super) fn on_commit(&mut self, ticket: u64) {
        if self.coalescing.arrived(ticket) {
            self.commit();
        }
    }

    /// Queues one `Commit`, unless one is queued: behind whatever the mailbox holds, at once
    /// when an answer waits for it, else no sooner than [`COMMIT_SPACING`] after the last.
    pub(super) fn schedule_commit(&mut self, myself: &ActorRef<WorkspaceMsg>) {
        let waiting = !self.after_commit.is_empty();
        match self.coalescing.report(Instant::now(), waiting) {
            Dispatch::Nothing => {}
            Dispatch::Now(ticket) => {
                let _ = myself.cast(WorkspaceMsg::Commit { ticket });
            }
            Dispatch::After(wait, ticket) => {
                myself.send_after(wait, move || WorkspaceMsg::Commit { ticket });
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

    /// Reports at any rate, from one every microsecond to one every few milliseconds, some
    /// of them waited for by an action, each commit taking its own time to reach the mailbox's
    /// front: every report is in a commit sent at or after it, a report in a quiet workspace or
    /// one an action waits for is committed at once, and the commits nobody waited for are at
    /// most as many as the span of time allows, whatever the number of reports.
    #[test]
    fn property_reports_at_any_rate_commit_once_per_spacing_and_none_is_left_out() {
        let mut seed = 3;
        for case in 0..300 {
            let reports = 1 + (lcg(&mut seed) % 5_000) as usize;
            let densest = case % 3 == 0;
            // One report in this many is an action's (none in a third of the cases).
            let actions = [0, 20, 200][case % 3];
            let start = Instant::now();
            let mut policy = Coalescing::default();
            let mut at = start;
            // The queued commit: when it reaches the front of the mailbox, its ticket, and
            // the reports it will carry.
            let mut queued: Option<(Instant, u64, usize)> = None;
            let mut commits = 0usize;
            let mut waited = 0usize;
            let mut committed_reports = 0usize;
            let mut last_commit: Option<Instant> = None;
            for _ in 0..reports {
                let gap = if densest { 1 } else { lcg(&mut seed) % 3_000 };
                at += Duration::from_micros(gap);
                // A queued commit whose time came goes out before this report is handled.
                if let Some((due, ticket, carried)) = queued
                    && due <= at
                {
                    assert!(
                        policy.arrived(ticket),
                        "the queued commit is the current one"
                    );
                    policy.committed(due);
                    commits += 1;
                    committed_reports += carried;
                    last_commit = Some(due);
                    queued = None;
                }
                let waiting = actions > 0 && lcg(&mut seed).is_multiple_of(actions);
                waited += usize::from(waiting);
                let quiet = queued.is_none()
                    && last_commit.is_none_or(|last| at.duration_since(last) >= COMMIT_SPACING);
                // The mailbox takes its own time to reach a commit sent now.
                let behind = Duration::from_micros(lcg(&mut seed) % 200);
                let carried_before = queued.map_or(0, |(_, _, carried)| carried);
                match policy.report(at, waiting) {
                    Dispatch::Now(ticket) => {
                        // It overtakes a commit on a timer, and carries what that one had.
                        if let Some((_, old, _)) = queued {
                            assert!(!policy.arrived(old), "an overtaken commit commits nothing");
                        }
                        queued = Some((at + behind, ticket, carried_before + 1));
                    }
                    Dispatch::After(wait, ticket) => {
                        assert!(queued.is_none(), "a second commit queued beside the first");
                        assert!(!quiet && !waiting, "waited with nothing to wait for");
                        queued = Some((at + wait + behind, ticket, 1));
                    }
                    Dispatch::Nothing => match &mut queued {
                        Some((due, _, carried)) => {
                            assert!(
                                !waiting || *due <= at + Duration::from_micros(200),
                                "an action waits behind a timer"
                            );
                            *carried += 1;
                        }
                        None => panic!("a report joined a commit that is not queued"),
                    },
                }
            }
            if let Some((due, ticket, carried)) = queued.take() {
                assert!(policy.arrived(ticket));
                policy.committed(due);
                commits += 1;
                committed_reports += carried;
                last_commit = Some(due);
            }
            assert_eq!(committed_reports, reports, "every report is committed");
            let span = last_commit.map_or(Duration::ZERO, |last| last.duration_since(start));
            let allowed = 1 + waited + (span.as_micros() / COMMIT_SPACING.as_micros()) as usize;
            assert!(
                commits <= allowed,
                "{commits} commits for {reports} reports ({waited} waited for) over {span:?}"
            );
        }
    }
}
