//! What a gateway client may make the gateway hold: the bounds of the HTTP listener, each a
//! setting (a `plurnk-mcp serve` flag), checked whole before anything listens.
//!
//! A gateway client is an adversary as a server is. Connections, request heads and bodies,
//! answers a client does not read, legacy sessions and listen streams all cost memory and file
//! descriptors; each is bounded here, and past a bound the client meets a refusal that names
//! the bound (RELIABILITY.md lists each with the figure that chose its default).

use std::time::Duration;

/// The bounds the HTTP gateway keeps against its clients. The defaults keep a gateway under the
/// usual limit of 1,024 open files and a few hundred MiB whatever its clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientLimits {
    /// Client connections open at once (`--max-connections`). Past it the connection idle
    /// longest (no request in flight) is closed to make room; when every one has a request in
    /// flight, the new one is answered `503` with `Retry-After` and closed.
    pub max_connections: usize,
    /// Client connections open at once from one client address
    /// (`--max-connections-per-client`). Past it that client's connection idle longest is
    /// closed to make room; when every one of its own has a request in flight, the new one is
    /// answered `429` with `Retry-After` and closed. So one client's slow requests (trickled
    /// bodies, each in flight) never take every place.
    pub max_connections_per_client: usize,
    /// Time a connection has to send a whole request head, counted from its opening or from
    /// the end of its previous answer (`--header-timeout-ms`): an idle keep-alive connection
    /// is closed after it too.
    pub header_timeout: Duration,
    /// Time a request has to deliver its whole body after its head (`--body-timeout-ms`);
    /// past it, `408`.
    pub body_timeout: Duration,
    /// Bytes one request body may have (`--max-body-bytes`); past it, `413`.
    pub max_body_bytes: usize,
    /// Time a client may leave an answer unread, the socket full, before its connection is
    /// closed and the answer dropped (`--write-timeout-ms`).
    pub write_timeout: Duration,
    /// Bytes the requests in flight and their answers hold at once, every client together
    /// (`--max-bytes-in-flight`): each request's body from its admission, and its answer's
    /// frame in flight, until the answer is dropped. Past it a request is refused `503`.
    pub max_bytes_in_flight: usize,
    /// The same, of one client address (`--max-bytes-in-flight-per-client`); past it, `429`.
    pub max_bytes_in_flight_per_client: usize,
    /// Legacy (2025-11-25) sessions at once, every client together (`--max-sessions`).
    pub max_sessions: usize,
    /// Legacy sessions at once from one client address (`--max-sessions-per-client`).
    pub max_sessions_per_client: usize,
    /// A legacy session with no request for this long ends, and what it held is freed
    /// (`--session-idle-ms`).
    pub session_idle: Duration,
    /// How long a legacy session's id opens at most, however active it is
    /// (`--session-lifetime-ms`): sealed into the id, so every replica agrees; past it the id
    /// is `404` and the client initializes again. It bounds how long an ended id is kept on
    /// the list that refuses it.
    pub session_lifetime: Duration,
    /// Listen streams open at once (`subscriptions/listen` and legacy `GET` streams), every
    /// client together (`--max-listen-streams`).
    pub max_listen_streams: usize,
    /// Listen streams open at once from one client address
    /// (`--max-listen-streams-per-client`).
    pub max_listen_streams_per_client: usize,
}

setters!(ClientLimits {
    with_max_connections => max_connections: usize,
    with_max_connections_per_client => max_connections_per_client: usize,
    with_header_timeout => header_timeout: Duration,
    with_body_timeout => body_timeout: Duration,
    with_max_body_bytes => max_body_bytes: usize,
    with_write_timeout => write_timeout: Duration,
    with_max_bytes_in_flight => max_bytes_in_flight: usize,
    with_max_bytes_in_flight_per_client => max_bytes_in_flight_per_client: usize,
    with_max_sessions => max_sessions: usize,
    with_max_sessions_per_client => max_sessions_per_client: usize,
    with_session_idle => session_idle: Duration,
    with_session_lifetime => session_lifetime: Duration,
    with_max_listen_streams => max_listen_streams: usize,
    with_max_listen_streams_per_client => max_listen_streams_per_client: usize,
});

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            max_connections_per_client: 128,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_body_bytes: 4 << 20,
            write_timeout: Duration::from_secs(10),
            max_bytes_in_flight: 256 << 20,
            max_bytes_in_flight_per_client: 64 << 20,
            max_sessions: 1024,
            max_sessions_per_client: 256,
            session_idle: Duration::from_secs(300),
            session_lifetime: Duration::from_secs(24 * 60 * 60),
            max_listen_streams: 256,
            max_listen_streams_per_client: 64,
        }
    }
}

/// The longest any timeout may be: longer ones would overflow the clocks that arm them.
const LONGEST: Duration = Duration::from_secs(24 * 60 * 60);

/// The smallest body bound: a smaller one could not carry an `initialize`.
const SMALLEST_BODY: usize = 1024;

/// One setting out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} is {given}: {fix}")]
pub struct LimitError {
    /// The `plurnk-mcp serve` flag (the field of [`ClientLimits`] has the same name).
    pub flag: &'static str,
    /// The value it was given, as given.
    pub given: String,
    /// What to give instead.
    pub fix: &'static str,
}

impl ClientLimits {
    /// Every setting out of its range, all at once.
    pub fn check(&self) -> Result<(), Vec<LimitError>> {
        let mut faults = Vec::new();
        let counts = [
            ("--max-connections", self.max_connections),
            (
                "--max-connections-per-client",
                self.max_connections_per_client,
            ),
            ("--max-sessions", self.max_sessions),
            ("--max-sessions-per-client", self.max_sessions_per_client),
            ("--max-listen-streams", self.max_listen_streams),
            (
                "--max-listen-streams-per-client",
                self.max_listen_streams_per_client,
            ),
        ];
        for (flag, count) in counts {
            if count == 0 {
                faults.push(LimitError {
                    flag,
                    given: "0".into(),
                    fix: "give 1 or more",
                });
            }
        }
        let timeouts = [
            ("--header-timeout-ms", self.header_timeout),
            ("--body-timeout-ms", self.body_timeout),
            ("--write-timeout-ms", self.write_timeout),
            ("--session-idle-ms", self.session_idle),
            ("--session-lifetime-ms", self.session_lifetime),
        ];
        for (flag, timeout) in timeouts {
            if timeout < Duration::from_millis(1) || timeout > LONGEST {
                faults.push(LimitError {
                    flag,
                    given: format!("{} ms", timeout.as_millis()),
                    fix: "give between 1 and 86400000 milliseconds (a day)",
                });
            }
        }
        if self.max_body_bytes < SMALLEST_BODY {
            faults.push(LimitError {
                flag: "--max-body-bytes",
                given: self.max_body_bytes.to_string(),
                fix: "give 1024 or more (an initialize request alone takes hundreds of bytes)",
            });
        }
        // Every body the gateway takes must fit what one client may hold, and that what all
        // may: a smaller bound would refuse requests it admits by size.
        if self.max_bytes_in_flight_per_client < self.max_body_bytes {
            faults.push(LimitError {
                flag: "--max-bytes-in-flight-per-client",
                given: self.max_bytes_in_flight_per_client.to_string(),
                fix: "give at least --max-body-bytes (a request's body is charged whole)",
            });
        }
        if self.max_bytes_in_flight < self.max_bytes_in_flight_per_client {
            faults.push(LimitError {
                flag: "--max-bytes-in-flight",
                given: self.max_bytes_in_flight.to_string(),
                fix: "give at least --max-bytes-in-flight-per-client",
            });
        }
        if faults.is_empty() {
            Ok(())
        } else {
            Err(faults)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_their_own_check() {
        assert_eq!(ClientLimits::default().check(), Ok(()));
    }

    #[test]
    fn every_setting_out_of_range_is_named_at_once() {
        let limits = ClientLimits {
            max_connections: 0,
            max_connections_per_client: 0,
            header_timeout: Duration::ZERO,
            body_timeout: Duration::from_secs(2 * 24 * 60 * 60),
            max_body_bytes: 10,
            write_timeout: Duration::ZERO,
            max_bytes_in_flight: 0,
            max_bytes_in_flight_per_client: 0,
            max_sessions: 0,
            max_sessions_per_client: 0,
            session_idle: Duration::ZERO,
            session_lifetime: Duration::ZERO,
            max_listen_streams: 0,
            max_listen_streams_per_client: 0,
        };
        let faults = limits.check().expect_err("every setting is out of range");
        let flags: Vec<&str> = faults.iter().map(|fault| fault.flag).collect();
        assert_eq!(
            flags,
            [
                "--max-connections",
                "--max-connections-per-client",
                "--max-sessions",
                "--max-sessions-per-client",
                "--max-listen-streams",
                "--max-listen-streams-per-client",
                "--header-timeout-ms",
                "--body-timeout-ms",
                "--write-timeout-ms",
                "--session-idle-ms",
                "--session-lifetime-ms",
                "--max-body-bytes",
                "--max-bytes-in-flight-per-client",
            ]
        );
        assert_eq!(
            faults[7].to_string(),
            "--body-timeout-ms is 172800000 ms: give between 1 and 86400000 milliseconds (a day)"
        );
        assert_eq!(
            faults[0].to_string(),
            "--max-connections is 0: give 1 or more"
        );
    }
}
