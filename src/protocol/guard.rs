//! What a server may make the host hold: the per-connection bounds on what arrives.
//!
//! A server is an adversary. [`Inbound`] sits in the transport wrapper and decides, for each
//! message that arrives, whether rmcp gets to see it: notifications beyond a token bucket
//! are dropped and counted, requests beyond [`Limits::max_server_requests`] unanswered at
//! once are dropped, and a flood that outlasts [`Limits::flood_grace`] cuts the connection
//! with a reason the Problem names. [`LineLimit`] bounds a single message on a byte stream
//! (stdio, in-process) before it is buffered whole.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Instant;

use crate::model::Limits;

/// A second without a dropped notification ends a flood.
const FLOOD_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// Why the host cut a connection, when it did; read by the loss detail.
#[derive(Clone, Default)]
pub(crate) struct CutReason(Arc<Mutex<Option<String>>>);

impl CutReason {
    pub(crate) fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.lock()
            && slot.is_none()
        {
            *slot = Some(reason);
        }
    }

    pub(crate) fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// What [`Inbound::admit`] decided about one arriving message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand it to rmcp.
    Pass,
    /// Drop it and go on.
    Drop,
    /// Close the connection: the reason is in the [`CutReason`].
    Cut,
}

/// The inbound bounds of one connection.
pub(crate) struct Inbound {
    limits: Limits,
    /// Notification tokens left, refilled at `notifications_per_second`.
    tokens: f64,
    refilled: Instant,
    /// Since when notifications have been dropped without a pause of a second.
    flooding_since: Option<Instant>,
    /// When the last one was dropped.
    last_drop: Option<Instant>,
    dropped: u64,
    /// Server requests the host has not answered yet.
    pending: Arc<AtomicUsize>,
    reason: CutReason,
}

impl Inbound {
    pub(crate) fn new(limits: Limits, reason: CutReason) -> Self {
        Self {
            limits,
            tokens: f64::from(limits.notification_burst),
            refilled: Instant::now(),
            flooding_since: None,
            last_drop: None,
            dropped: 0,
            pending: Arc::default(),
            reason,
        }
    }

    /// The count of unanswered server requests, shared with the sending side.
    pub(crate) fn pending(&self) -> Arc<AtomicUsize> {
        self.pending.clone()
    }

    /// A notification arrived.
    pub(crate) fn notification(&mut self) -> Verdict {
        let now = Instant::now();
        let rate = f64::from(self.limits.notifications_per_second);
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(self.limits.notification_burst));
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Verdict::Pass;
        }
        metrics::counter!("plurnk_mcp_notifications_dropped_total").increment(1);
        // A flood is drops without a pause: a second without one ends it.
        let paused = self
            .last_drop
            .is_none_or(|last| now.duration_since(last) >= FLOOD_PAUSE);
        self.last_drop = Some(now);
        if paused {
            if self.flooding_since.is_some() {
                tracing::warn!(dropped = self.dropped, "a notification flood paused");
            }
            self.flooding_since = Some(now);
            self.dropped = 0;
        }
        self.dropped += 1;
        let since = self.flooding_since.unwrap_or(now);
        if now.duration_since(since) >= self.limits.flood_grace {
            self.reason.set(format!(
                "the server flooded the host with notifications and requests for {:?} ({} \
                 dropped, more than {} per second): the host closed the connection",
                self.limits.flood_grace, self.dropped, self.limits.notifications_per_second
            ));
            return Verdict::Cut;
        }
        Verdict::Drop
    }

    /// A request from the server arrived (ping, elicitation, sampling, roots): it costs a
    /// token like a notification, and needs a free place among the unanswered ones.
    pub(crate) fn request(&mut self) -> Verdict {
        match self.notification() {
            Verdict::Pass => {}
            other => return other,
        }
        let admitted = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                (pending < self.limits.max_server_requests).then_some(pending + 1)
            })
            .is_ok();
        if admitted {
            Verdict::Pass
        } else {
            metrics::counter!("plurnk_mcp_server_requests_dropped_total").increment(1);
            Verdict::Drop
        }
    }
}

/// The host answered one server request.
pub(crate) fn answered(pending: &AtomicUsize) {
    let _ = pending.fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
        Some(pending.saturating_sub(1))
    });
}

/// A byte stream of newline-delimited messages, none longer than `max` bytes: a longer one
/// ends the stream with an error (the reason is recorded) before it is buffered whole.
pub(crate) struct LineLimit<R> {
    inner: R,
    max: usize,
    /// Bytes since the last newline.
    current: usize,
    reason: CutReason,
}

impl<R> LineLimit<R> {
    pub(crate) fn new(inner: R, max: usize, reason: CutReason) -> Self {
        Self {
            inner,
            max,
            current: 0,
            reason,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            match advance_line(self.current, &buf.filled()[before..], self.max) {
                Some(current) => self.current = current,
                None => {
                    let reason = format!(
                        "the server sent a message of more than {} bytes (Limits::max_message_bytes): \
                         the host closed the connection",
                        self.max
                    );
                    self.reason.set(reason.clone());
                    // Nothing of a refused read is handed on.
                    buf.set_filled(before);
                    return Poll::Ready(Err(std::io::Error::other(reason)));
                }
            }
        }
        polled
    }
}

/// The framing rule of the host's stdio line bound: given the length of the line read so far and the next
/// bytes, the length of the line then under way, or `None` once a line exceeds `max`.
pub fn advance_line(current: usize, bytes: &[u8], max: usize) -> Option<usize> {
    // Newlines are found with `memchr` (vectorised): this runs on every byte a server sends.
    let mut current = current;
    let mut start = 0;
    for newline in memchr::memchr_iter(b'\n', bytes) {
        if current + (newline - start) > max {
            return None;
        }
        current = 0;
        start = newline + 1;
    }
    let current = current + (bytes.len() - start);
    (current <= max).then_some(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            notification_burst: 10,
            notifications_per_second: 100,
            flood_grace: Duration::from_secs(2),
            max_server_requests: 2,
            ..Limits::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn notifications_pass_within_the_rate_and_a_lasting_flood_is_cut() {
        let reason = CutReason::default();
        let mut inbound = Inbound::new(limits(), reason.clone());
        let started = tokio::time::Instant::now();
        // The burst passes, the next one is dropped.
        for _ in 0..10 {
            assert_eq!(inbound.notification(), Verdict::Pass);
        }
        assert_eq!(inbound.notification(), Verdict::Drop);
        // 10 ms later one token is back.
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(inbound.notification(), Verdict::Pass);
        // Flooding without a pause for longer than the grace cuts the connection.
        let mut verdict = Verdict::Pass;
        for _ in 0..3000 {
            tokio::time::advance(Duration::from_millis(1)).await;
            for _ in 0..10 {
                verdict = inbound.notification();
                if verdict == Verdict::Cut {
                    break;
                }
            }
            if verdict == Verdict::Cut {
                break;
            }
        }
        assert_eq!(verdict, Verdict::Cut);
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "not before the grace"
        );
        assert!(reason.get().is_some_and(|r| r.contains("flooded")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_in_the_flood_starts_the_grace_again() {
        let mut inbound = Inbound::new(limits(), CutReason::default());
        for round in 0..5 {
            // Flood for most of the grace (1.9 of 2 s), then pause for a second and more.
            for _ in 0..190 {
                for _ in 0..10 {
                    assert_ne!(inbound.notification(), Verdict::Cut, "round {round}");
                }
                tokio::time::advance(Duration::from_millis(10)).await;
            }
            tokio::time::advance(Duration::from_millis(1100)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn server_requests_cost_tokens_like_notifications() {
        let mut inbound = Inbound::new(limits(), CutReason::default());
        let pending = inbound.pending();
        let mut passed = 0;
        for _ in 0..50 {
            if inbound.request() == Verdict::Pass {
                passed += 1;
                answered(&pending);
            }
        }
        assert_eq!(passed, 10, "the burst, then nothing until tokens come back");
    }

    #[test]
    fn server_requests_beyond_the_bound_are_dropped_until_answered() {
        let mut inbound = Inbound::new(limits(), CutReason::default());
        let pending = inbound.pending();
        assert_eq!(inbound.request(), Verdict::Pass);
        assert_eq!(inbound.request(), Verdict::Pass);
        assert_eq!(inbound.request(), Verdict::Drop);
        answered(&pending);
        assert_eq!(inbound.request(), Verdict::Pass);
        answered(&pending);
        answered(&pending);
        answered(&pending);
        assert_eq!(pending.load(Ordering::Acquire), 0, "never below zero");
    }

    #[tokio::test]
    async fn a_message_longer_than_the_bound_ends_the_stream() {
        use tokio::io::AsyncReadExt;
        let reason = CutReason::default();
        let data = [b"short\n".as_slice(), &[b'x'; 100], b"\n"].concat();
        let mut limited = LineLimit::new(data.as_slice(), 64, reason.clone());
        let mut out = Vec::new();
        let read = limited.read_to_end(&mut out).await;
        assert!(read.is_err());
        assert!(
            reason
                .get()
                .is_some_and(|r| r.contains("more than 64 bytes"))
        );
        let fine = [b"short\n".as_slice(), &[b'x'; 64], b"\n"].concat();
        let mut limited = LineLimit::new(fine.as_slice(), 64, CutReason::default());
        let mut out = Vec::new();
        assert!(limited.read_to_end(&mut out).await.is_ok());
        assert_eq!(out, fine);
    }
}
