//! A connection attempt as it is shown: the phase a connecting server is in, how long each
//! phase of a ready server's connection took, and the one wording of a slow attempt that a
//! server's status and the Problem of an attempt out of time share.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Where a connection attempt is. Every attempt goes through them in order. Starting and
/// negotiating share one deadline (`PLURNK_MCP_CONNECT_TIMEOUT`), and listing has the
/// deadline every request has (`PLURNK_MCP_REQUEST_TIMEOUT`): no other timer cuts a phase
/// short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ConnectPhase {
    /// The process is started (or the URL dialled) and `server/discover` sent; the server has
    /// not answered yet. A cold interpreter, a first `npx -y` or `uvx` run and a browser
    /// starting all spend their time here.
    Starting,
    /// The server answered `server/discover`; the revision is being agreed (a legacy server's
    /// `initialize`).
    Negotiating,
    /// Negotiated; its tools, resources, resource templates and prompts are being listed.
    Listing,
}

impl ConnectPhase {
    /// The phase's name as it is shown and serialized: `starting`, `negotiating`, `listing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Negotiating => "negotiating",
            Self::Listing => "listing",
        }
    }

    /// What the host is waiting for in this phase.
    fn waiting_for(self) -> &'static str {
        match self {
            Self::Starting => "started, no answer to server/discover yet",
            Self::Negotiating => "answered server/discover, agreeing a revision",
            Self::Listing => "negotiated, listing its tools, resources and prompts",
        }
    }

    /// The setting whose deadline the phase runs under: starting and negotiating share the
    /// connect timeout, and listing has the request timeout, as every request does.
    pub fn bound_by(self) -> &'static str {
        match self {
            Self::Starting | Self::Negotiating => "PLURNK_MCP_CONNECT_TIMEOUT",
            Self::Listing => "PLURNK_MCP_REQUEST_TIMEOUT",
        }
    }

    /// The one wording of an attempt that takes its time: the phase, what it waits for, how
    /// long it has run under the phase's deadline, and the setting that bounds it. A
    /// connecting server's status shows it; the Problem of an attempt that ran out of time
    /// quotes it.
    pub fn describe(self, elapsed: Duration, bound: Duration) -> String {
        format!(
            "{} ({}) after {:.1} s; {} allows {}",
            self.as_str(),
            self.waiting_for(),
            elapsed.as_secs_f64(),
            self.bound_by(),
            seconds(bound),
        )
    }
}

impl std::fmt::Display for ConnectPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bound in whole seconds when it is whole, else in milliseconds.
fn seconds(bound: Duration) -> String {
    let ms = bound.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// A connection attempt under way, on a server that is `connecting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Connecting {
    /// The phase it is in.
    pub phase: ConnectPhase,
    /// When the deadline the phase runs under started (the attempt's start, or the listing's),
    /// in milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// That deadline, in milliseconds ([`ConnectPhase::bound_by`] names its setting).
    pub bound_ms: u64,
}

impl Connecting {
    /// An attempt in `phase`, under a deadline of `bound` that started at `since`.
    pub(crate) fn new(phase: ConnectPhase, since: SystemTime, bound: Duration) -> Self {
        Self {
            phase,
            since_ms: unix_ms(since),
            bound_ms: u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// When the phase's deadline started.
    pub(crate) fn since(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.since_ms)
    }

    /// How long the phase's deadline has run by `now`.
    pub fn elapsed(&self, now: SystemTime) -> Duration {
        Duration::from_millis(unix_ms(now).saturating_sub(self.since_ms))
    }

    /// The attempt in the one wording of [`ConnectPhase::describe`], as of `now`.
    pub fn describe(&self, now: SystemTime) -> String {
        self.phase
            .describe(self.elapsed(now), Duration::from_millis(self.bound_ms))
    }
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The last Problem a server had before it became ready again, and when it did: a server that
/// failed at start and recovered on a retry shows it as one that crashed and came back does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Recovered {
    /// The Problem it had.
    pub problem: super::Problem,
    /// When it was ready again, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl Recovered {
    /// `problem`, recovered from now.
    pub(crate) fn now(problem: super::Problem) -> Self {
        Self {
            problem,
            at_ms: unix_ms(SystemTime::now()),
        }
    }

    /// How long ago it recovered, by `now`.
    pub fn ago(&self, now: SystemTime) -> Duration {
        Duration::from_millis(unix_ms(now).saturating_sub(self.at_ms))
    }
}

/// How long each phase of a server's connection took, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PhaseTimes {
    /// Started until its first answer, to `server/discover`.
    pub starting_ms: u64,
    /// That answer until a revision was agreed.
    pub negotiating_ms: u64,
    /// Negotiated until every family was listed.
    pub listing_ms: u64,
}

impl PhaseTimes {
    /// The whole attempt.
    pub fn total_ms(&self) -> u64 {
        self.starting_ms + self.negotiating_ms + self.listing_ms
    }

    /// Adds `spent` to `phase`.
    pub(crate) fn add(&mut self, phase: ConnectPhase, spent: Duration) {
        let ms = u64::try_from(spent.as_millis()).unwrap_or(u64::MAX);
        let slot = match phase {
            ConnectPhase::Starting => &mut self.starting_ms,
            ConnectPhase::Negotiating => &mut self.negotiating_ms,
            ConnectPhase::Listing => &mut self.listing_ms,
        };
        *slot = slot.saturating_add(ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_attempt_names_its_phase_what_it_waits_for_and_the_setting_that_bounds_it() {
        let text =
            ConnectPhase::Starting.describe(Duration::from_millis(12_345), Duration::from_secs(60));
        assert_eq!(
            text,
            "starting (started, no answer to server/discover yet) after 12.3 s; \
             PLURNK_MCP_CONNECT_TIMEOUT allows 60 s"
        );
        let negotiating =
            ConnectPhase::Negotiating.describe(Duration::from_secs(2), Duration::from_secs(60));
        assert!(
            negotiating.contains("PLURNK_MCP_CONNECT_TIMEOUT"),
            "{negotiating}"
        );
        let listing = ConnectPhase::Listing
            .describe(Duration::from_millis(900), Duration::from_millis(1_500));
        assert!(
            listing.starts_with("listing (negotiated, listing its tools"),
            "{listing}"
        );
        assert!(
            listing.ends_with("PLURNK_MCP_REQUEST_TIMEOUT allows 1500 ms"),
            "{listing}"
        );
    }

    #[test]
    fn a_connecting_server_reads_its_elapsed_time_from_when_the_attempt_started() {
        let started = UNIX_EPOCH + Duration::from_secs(1_000);
        let connecting = Connecting::new(ConnectPhase::Listing, started, Duration::from_secs(60));
        let now = started + Duration::from_millis(4_200);
        assert_eq!(connecting.elapsed(now), Duration::from_millis(4_200));
        assert!(connecting.describe(now).contains("after 4.2 s"));
        // A clock that went back shows no time, not a wrapped one.
        assert_eq!(connecting.elapsed(UNIX_EPOCH), Duration::ZERO);
    }
}
