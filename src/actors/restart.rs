//! The restart policy: a pure function from failure history to "retry after D" or "give up".
//!
//! Delays come from `backon`'s jittered exponential builder, capped; the crash-loop verdict
//! only counts crashes (a ready connection that died, or a panicking attachment) inside a
//! sliding window, so a server that is merely unreachable keeps retrying at the cap.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};

/// The knobs of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartPolicy {
    /// The first retry delay.
    pub min_delay: Duration,
    /// No retry waits longer than this (before jitter).
    pub max_delay: Duration,
    /// This many crashes inside `window` put the server in `crash-loop`.
    pub crash_limit: usize,
    /// The sliding window for `crash_limit`.
    pub window: Duration,
}

setters!(RestartPolicy {
    with_min_delay => min_delay: Duration,
    with_max_delay => max_delay: Duration,
    with_crash_limit => crash_limit: usize,
    with_window => window: Duration,
});

setters!(WorkspaceRestart {
    with_max_failures => max_failures: usize,
    with_window => window: Duration,
});

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(30),
            crash_limit: 5,
            window: Duration::from_secs(60),
        }
    }
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Try again after this delay.
    RetryAfter(Duration),
    /// Too many crashes in the window: stay down until enabled again.
    GiveUp,
}

impl RestartPolicy {
    /// A fresh jittered delay sequence for one run of failures.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// Decides after a failure. `crashes` holds the instants of recent crashes (oldest first,
    /// the current one included when this failure was a crash); `next_delay` is the next value
    /// of the delay sequence. Crashes older than the window are pruned from `crashes`.
    pub fn decide(
        &self,
        crashes: &mut VecDeque<Instant>,
        now: Instant,
        next_delay: Option<Duration>,
    ) -> Verdict {
        while let Some(oldest) = crashes.front() {
            if now.saturating_duration_since(*oldest) > self.window {
                crashes.pop_front();
            } else {
                break;
            }
        }
        if crashes.len() >= self.crash_limit {
            return Verdict::GiveUp;
        }
        // The jittered sequence can exceed the cap by its jitter; bound it for good.
        let delay = next_delay.unwrap_or(self.max_delay).min(self.max_delay * 2);
        Verdict::RetryAfter(delay)
    }
}

/// How often the host supervisor restarts a failed workspace actor, as an OTP supervisor's
/// intensity and period: a workspace that fails `max_failures` times inside `window` is not
/// restarted again (its servers stay disconnected, its snapshot says why) until it is opened
/// again by name. Restarts are immediate: a workspace's own attachments back off on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkspaceRestart {
    /// This many failures inside `window` end in the failed state (so `max_failures - 1`
    /// restarts are allowed in any window).
    pub max_failures: usize,
    /// The sliding window.
    pub window: Duration,
}

impl Default for WorkspaceRestart {
    fn default() -> Self {
        Self {
            max_failures: 5,
            window: Duration::from_secs(60),
        }
    }
}

impl WorkspaceRestart {
    /// Records a failure at `now` in `failures` (oldest first), prunes the ones older than the
    /// window, and says whether to restart.
    pub fn restart_after(&self, failures: &mut VecDeque<Instant>, now: Instant) -> bool {
        failures.push_back(now);
        while let Some(oldest) = failures.front() {
            if now.saturating_duration_since(*oldest) > self.window {
                failures.pop_front();
            } else {
                break;
            }
        }
        failures.len() < self.max_failures.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator, so the property tests need no extra crate.
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn delays_are_bounded_and_start_small() {
        let policy = RestartPolicy::default();
        let delays: Vec<Duration> = policy.delays().take(50).collect();
        assert_eq!(delays.len(), 50, "the sequence never ends by itself");
        assert!(
            delays[0] <= policy.min_delay * 2,
            "first delay {:?}",
            delays[0]
        );
        for delay in &delays {
            assert!(
                *delay <= policy.max_delay * 2,
                "delay {delay:?} exceeds the cap"
            );
        }
    }

    #[test]
    fn property_give_up_exactly_when_the_window_holds_the_limit() {
        let mut seed = 7;
        for _case in 0..500 {
            let policy = RestartPolicy {
                min_delay: Duration::from_millis(1 + lcg(&mut seed) % 100),
                max_delay: Duration::from_millis(100 + lcg(&mut seed) % 10_000),
                crash_limit: 1 + (lcg(&mut seed) % 8) as usize,
                window: Duration::from_millis(1 + lcg(&mut seed) % 5_000),
            };
            let start = Instant::now();
            let mut crashes = VecDeque::new();
            let mut at = start;
            for _ in 0..(lcg(&mut seed) % 20) {
                at += Duration::from_millis(lcg(&mut seed) % 2_000);
                crashes.push_back(at);
            }
            let now = at + Duration::from_millis(lcg(&mut seed) % 1_000);
            let in_window = crashes
                .iter()
                .filter(|t| now.saturating_duration_since(**t) <= policy.window)
                .count();
            let verdict = policy.decide(&mut crashes, now, Some(policy.max_delay * 10));
            assert_eq!(crashes.len(), in_window, "pruning keeps exactly the window");
            match verdict {
                Verdict::GiveUp => assert!(in_window >= policy.crash_limit),
                Verdict::RetryAfter(delay) => {
                    assert!(in_window < policy.crash_limit);
                    assert!(delay <= policy.max_delay * 2);
                }
            }
        }
    }

    #[test]
    fn unreachable_servers_never_give_up() {
        let policy = RestartPolicy::default();
        let mut crashes = VecDeque::new();
        let mut delays = policy.delays();
        for _ in 0..1_000 {
            let verdict = policy.decide(&mut crashes, Instant::now(), delays.next());
            assert!(matches!(verdict, Verdict::RetryAfter(_)));
        }
    }

    #[test]
    fn property_a_workspace_restarts_until_the_window_holds_max_failures() {
        let mut seed = 11;
        for _case in 0..500 {
            let policy = WorkspaceRestart {
                max_failures: 1 + (lcg(&mut seed) % 8) as usize,
                window: Duration::from_millis(1 + lcg(&mut seed) % 5_000),
            };
            let mut failures = VecDeque::new();
            let mut at = Instant::now();
            for _ in 0..(1 + lcg(&mut seed) % 20) {
                at += Duration::from_millis(lcg(&mut seed) % 2_000);
                let before: Vec<Instant> = failures.iter().copied().collect();
                let restart = policy.restart_after(&mut failures, at);
                let in_window = before
                    .iter()
                    .chain(std::iter::once(&at))
                    .filter(|t| at.saturating_duration_since(**t) <= policy.window)
                    .count();
                assert_eq!(
                    failures.len(),
                    in_window,
                    "pruning keeps exactly the window"
                );
                assert_eq!(restart, in_window < policy.max_failures);
            }
        }
    }
}
