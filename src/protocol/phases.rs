//! The phases of one connection attempt as they pass (started, negotiating, listing): told to
//! whoever watches the attempt (its attachment publishes each), and timed, so the Problem of
//! an attempt out of time says where it was and a ready server shows what each phase took.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::{ConnectPhase, PhaseTimes};

/// Told each phase an attempt enters, as it enters it.
pub(crate) type OnPhase = Arc<dyn Fn(ConnectPhase) + Send + Sync>;

/// One attempt's clock: it starts in [`ConnectPhase::Starting`] when it is made.
pub(crate) struct Phases {
    now: Mutex<Now>,
    tell: Option<OnPhase>,
}

struct Now {
    phase: ConnectPhase,
    since: Instant,
    /// When the deadline the phase runs under started: the attempt's start for starting and
    /// negotiating, the listing's own start for listing.
    window: Instant,
    spent: PhaseTimes,
}

impl Phases {
    /// An attempt starting now; `tell` hears each later phase.
    pub(crate) fn new(tell: Option<OnPhase>) -> Self {
        let started = Instant::now();
        Self {
            now: Mutex::new(Now {
                phase: ConnectPhase::Starting,
                since: started,
                window: started,
                spent: PhaseTimes::default(),
            }),
            tell,
        }
    }

    /// The attempt moves on to `phase` (a phase it is already in changes nothing).
    pub(crate) fn enter(&self, phase: ConnectPhase) {
        {
            let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
            if now.phase == phase {
                return;
            }
            let at = Instant::now();
            let (left, since) = (now.phase, now.since);
            now.spent.add(left, at.duration_since(since));
            now.phase = phase;
            now.since = at;
            if phase.bound_by() != left.bound_by() {
                now.window = at;
            }
        }
        if let Some(tell) = &self.tell {
            tell(phase);
        }
    }

    /// The phase the attempt is in.
    pub(crate) fn phase(&self) -> ConnectPhase {
        self.now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .phase
    }

    /// How long the phase has run under its deadline.
    pub(crate) fn elapsed(&self) -> Duration {
        self.now
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .window
            .elapsed()
    }

    /// What each phase took, the one it is in counted until now.
    pub(crate) fn times(&self) -> PhaseTimes {
        let now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        let mut spent = now.spent;
        spent.add(now.phase, now.since.elapsed());
        spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_is_told_once_as_it_is_entered_and_timed_apart() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let heard = told.clone();
        let phases = Phases::new(Some(Arc::new(move |phase| {
            heard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(phase);
        })));
        assert_eq!(phases.phase(), ConnectPhase::Starting);
        std::thread::sleep(Duration::from_millis(20));
        phases.enter(ConnectPhase::Negotiating);
        phases.enter(ConnectPhase::Negotiating);
        phases.enter(ConnectPhase::Listing);
        assert_eq!(
            *told.lock().unwrap_or_else(PoisonError::into_inner),
            [ConnectPhase::Negotiating, ConnectPhase::Listing]
        );
        let times = phases.times();
        assert!(times.starting_ms >= 20, "{times:?}");
        // Listing runs under a deadline of its own, counted from its start.
        assert!(
            phases.elapsed() < Duration::from_millis(20),
            "{:?}",
            phases.elapsed()
        );
    }
}
