//! The gateway's TCP listener: every accepted connection in a slot of a bounded set, served by
//! hyper's HTTP/1.1 with a deadline on request heads and on unread answers.
//!
//! axum's own `serve` keeps a connection as long as its client likes, and an `EMFILE` from
//! `accept` stalls it: a thousand connections that never finish a request head stop the
//! gateway answering anyone. Here:
//! - a connection has [`ClientLimits::header_timeout`] to deliver each request head (hyper's
//!   own timer, which also ends an idle keep-alive connection);
//! - at most [`ClientLimits::max_connections`] are open, and at most
//!   [`ClientLimits::max_connections_per_client`] of one client address. Past a client's own
//!   bound its connection idle longest is closed to make room, and with all of its own busy
//!   the new one is answered `429`; past the total, the connection idle longest (no request
//!   in flight: waiting for a head) is closed, so connections that send nothing never lock a
//!   client out, and when every connection has a request in flight the new one is answered
//!   `503`; either refusal with `Retry-After`, and the connection closed. So one client's
//!   trickled bodies, each a request in flight, hold its own share and never every place;
//! - an `accept` that fails for want of file descriptors closes the connection idle longest,
//!   or backs off when none is idle, and the loop goes on;
//! - an answer the client leaves unread, its socket full, for [`ClientLimits::write_timeout`]
//!   closes the connection and drops the answer;
//! - every socket has `TCP_NODELAY`: an answer sent as a chunked event stream would otherwise
//!   wait for the client's delayed ACK (about 40 ms a request on a keep-alive connection).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::limits::ClientLimits;

/// The address a request came from, in its extensions: what tells one client from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct ClientAddr(pub(super) IpAddr);

/// Refusals being written at once; past it a connection over the cap is closed unanswered.
const REFUSALS: usize = 64;

/// How long a refusal may take to write and to see its client go, and how much of the
/// client's request it reads meanwhile (so closing the socket does not reset it before the
/// client read the refusal).
const REFUSAL_TIME: Duration = Duration::from_secs(1);
const REFUSAL_BYTES: usize = 64 << 10;

/// A connection that moved at least this many bytes has its memory given back when it ends:
/// large bodies and answers leave copies freed along their way that glibc would keep.
const LARGE_TRAFFIC: u64 = 1 << 20;

/// How long connections have to finish their answers once the gateway shuts down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The first and the longest pause after `accept` failed for want of resources.
const BACKOFF_FIRST: Duration = Duration::from_millis(5);
const BACKOFF_LONGEST: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets open connections
/// finish their answers for a bounded time.
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ClientLimits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Slots::new(
        limits.max_connections,
        limits.max_connections_per_client,
    ));
    let refusals = Arc::new(tokio::sync::Semaphore::new(REFUSALS));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let service = TowerToHyperService::new(router);
    let tracker = TaskTracker::new();
    let mut backoff = BACKOFF_FIRST;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff = BACKOFF_FIRST;
                accepted
            }
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                // Out of file descriptors (or memory): the connection idle longest gives its
                // descriptor back; with none idle, wait for one to end. Either way the loop
                // goes on, and the client waits in the listen backlog meanwhile.
                let pause = if slots.shed() {
                    BACKOFF_FIRST
                } else {
                    if backoff == BACKOFF_FIRST {
                        tracing::warn!(%error, "the gateway cannot accept a connection now; retrying");
                    }
                    let pause = backoff;
                    backoff = (backoff * 2).min(BACKOFF_LONGEST);
                    pause
                };
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(pause) => continue,
                }
            }
        };
        // Without it an answer streamed in chunks waits on the client's delayed ACK.
        let _ = stream.set_nodelay(true);
        let client = ClientAddr(peer.ip().to_canonical());
        let slot = match slots.admit(client.0) {
            Ok(slot) => slot,
            Err(full) => {
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    tracker.spawn(async move {
                        refuse(stream, full).await;
                        drop(permit);
                    });
                }
                continue;
            }
        };
        let connection = Connection {
            stream,
            client,
            slot,
        };
        tracker.spawn(connection.serve(
            builder.clone(),
            service.clone(),
            limits.write_timeout,
            shutdown.clone(),
        ));
    }
    tracker.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE * 2, tracker.wait()).await;
}

/// An `accept` error that concerns only the connection it was about.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Which bound a connection found full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// Every connection of the gateway has a request in flight.
    All(usize),
    /// Every connection of this client address has a request in flight.
    Client(usize),
}

/// Answers a connection over a cap with a `503` (every client's) or `429` (its own) that
/// says why, then closes it.
async fn refuse(mut stream: TcpStream, full: Full) {
    let (status, body) = match full {
        Full::All(max) => (
            "503 Service Unavailable",
            format!(
                "the gateway has its {max} connections open, each with a request in flight \
                 (plurnk-mcp serve --max-connections): retry shortly\n"
            ),
        ),
        Full::Client(max) => (
            "429 Too Many Requests",
            format!(
                "this client address has {max} connections open, each with a request in \
                 flight (plurnk-mcp serve --max-connections-per-client): finish one, then \
                 retry\n"
            ),
        ),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nRetry-After: 1\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        // Read (and drop) what the client sends until it closes: a socket closed with unread
        // input is reset, and a reset can discard the refusal before the client reads it.
        let mut buffer = [0u8; 4096];
        let mut read = 0;
        while read < REFUSAL_BYTES {
            match stream.read(&mut buffer).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<(), io::Error>(())
    })
    .await;
}

// === Slots ===

/// The open connections, each in a slot, at most `max` of them and `max_per_client` of one
/// client address.
struct Slots {
    max: usize,
    max_per_client: usize,
    /// What `idle_since` counts from.
    epoch: Instant,
    next: AtomicU64,
    open: Mutex<Open>,
}

/// The slots taken, and how many of them each client address holds.
#[derive(Default)]
struct Open {
    slots: HashMap<u64, Arc<Slot>>,
    per_client: HashMap<IpAddr, usize>,
}

impl Open {
    fn insert(&mut self, id: u64, slot: Arc<Slot>) {
        *self.per_client.entry(slot.client).or_default() += 1;
        self.slots.insert(id, slot);
        opened();
    }

    /// Frees `id`'s slot, once: whoever removes it counts it closed.
    fn remove(&mut self, id: u64) {
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        if let Some(count) = self.per_client.get_mut(&slot.client) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&slot.client);
            }
        }
        closed();
    }

    /// Closes the connection idle longest among those `mine` picks, if one is idle.
    fn close_idle(&mut self, mine: impl Fn(&Slot) -> bool) -> bool {
        match longest_idle(&self.slots, mine) {
            Some((id, idle)) => {
                idle.close.cancel();
                self.remove(id);
                true
            }
            None => false,
        }
    }
}

/// One connection's place: whether it has a request in flight, and how to close it.
struct Slot {
    /// The client address it came from.
    client: IpAddr,
    /// Requests whose answer has not been dropped yet; at zero the connection is idle (waiting
    /// for a head) and may be closed to make room.
    busy: AtomicUsize,
    /// Milliseconds from the epoch to when it last went idle: the longest idle goes first.
    idle_since: AtomicU64,
    close: CancellationToken,
}

/// A connection's hold on its slot; the slot is freed when the connection ends.
struct Held {
    slots: Arc<Slots>,
    id: u64,
    slot: Arc<Slot>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock() {
            open.remove(self.id);
        }
    }
}

/// Counts a connection that took a slot (`plurnk_mcp_gateway_connections`: open now).
fn opened() {
    metrics::gauge!("plurnk_mcp_gateway_connections").increment(1.0);
}

/// Counts a connection whose slot was freed (once: whoever removes it from the set).
fn closed() {
    metrics::gauge!("plurnk_mcp_gateway_connections").decrement(1.0);
}

impl Slots {
    fn new(max: usize, max_per_client: usize) -> Self {
        Self {
            max,
            max_per_client,
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(Open::default()),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A slot for a new connection from `client`: past the client's own bound, the slot of
    /// its connection idle longest (which is closed); past the total, the one of any
    /// connection idle longest; else the bound that is full.
    fn admit(self: &Arc<Self>, client: IpAddr) -> Result<Held, Full> {
        let Ok(mut open) = self.open.lock() else {
            return Err(Full::All(self.max));
        };
        let mine = open.per_client.get(&client).copied().unwrap_or(0);
        if mine >= self.max_per_client && !open.close_idle(|slot| slot.client == client) {
            return Err(Full::Client(self.max_per_client));
        }
        if open.slots.len() >= self.max && !open.close_idle(|_| true) {
            return Err(Full::All(self.max));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            client,
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now()),
            close: CancellationToken::new(),
        });
        open.insert(id, slot.clone());
        Ok(Held {
            slots: self.clone(),
            id,
            slot,
        })
    }

    /// Closes the connection idle longest, if one is; whether one was.
    fn shed(&self) -> bool {
        self.open
            .lock()
            .is_ok_and(|mut open| open.close_idle(|_| true))
    }
}

/// The connection idle longest among the ones `mine` picks.
fn longest_idle(
    open: &HashMap<u64, Arc<Slot>>,
    mine: impl Fn(&Slot) -> bool,
) -> Option<(u64, Arc<Slot>)> {
    open.iter()
        .filter(|(_, slot)| mine(slot) && slot.busy.load(Ordering::Acquire) == 0)
        .min_by_key(|(id, slot)| (slot.idle_since.load(Ordering::Relaxed), **id))
        .map(|(id, slot)| (*id, slot.clone()))
}

/// One request in flight on a connection, from its head until its answer is dropped.
struct Busy {
    slots: Arc<Slots>,
    slot: Arc<Slot>,
}

impl Busy {
    fn start(slots: Arc<Slots>, slot: Arc<Slot>) -> Self {
        slot.busy.fetch_add(1, Ordering::AcqRel);
        Self { slots, slot }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.slot.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.slot
                .idle_since
                .store(self.slots.now(), Ordering::Relaxed);
        }
    }
}

// === Connection ===

struct Connection {
    stream: TcpStream,
    client: ClientAddr,
    slot: Held,
}

impl Connection {
    async fn serve(
        self,
        builder: Arc<hyper::server::conn::http1::Builder>,
        service: TowerToHyperService<axum::Router>,
        write_timeout: Duration,
        shutdown: CancellationToken,
    ) {
        let moved = Arc::new(AtomicU64::new(0));
        self.run(builder, service, write_timeout, shutdown, moved.clone())
            .await;
        // The connection is gone, and with it its buffers and what its requests held (a
        // connection ends however it ends: closed by its client, idle, cut off, shed).
        if moved.load(Ordering::Relaxed) >= LARGE_TRAFFIC {
            crate::memory::give_back();
        }
    }

    async fn run(
        self,
        builder: Arc<hyper::server::conn::http1::Builder>,
        service: TowerToHyperService<axum::Router>,
        write_timeout: Duration,
        shutdown: CancellationToken,
        moved: Arc<AtomicU64>,
    ) {
        let Connection {
            stream,
            client,
            slot,
        } = self;
        let closed = slot.slot.close.clone();
        let service = Tracked {
            service,
            client,
            slots: slot.slots.clone(),
            slot: slot.slot.clone(),
        };
        let io = TokioIo::new(Unread::new(stream, write_timeout, moved));
        let connection = builder.serve_connection(io, service);
        let mut connection = std::pin::pin!(connection);
        tokio::select! {
            _ = connection.as_mut() => return,
            () = closed.cancelled() => return,
            () = shutdown.cancelled() => {}
        }
        connection.as_mut().graceful_shutdown();
        tokio::select! {
            _ = tokio::time::timeout(SHUTDOWN_GRACE, connection) => {}
            () = closed.cancelled() => {}
        }
        drop(slot);
    }
}

/// The router as hyper calls it: each request marks its connection busy until its answer is
/// dropped, and carries its client's address.
#[derive(Clone)]
struct Tracked {
    service: TowerToHyperService<axum::Router>,
    client: ClientAddr,
    slots: Arc<Slots>,
    slot: Arc<Slot>,
}

type Answer = Response<WithGuard<axum::body::Body, Busy>>;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let busy = Busy::start(self.slots.clone(), self.slot.clone());
        request.extensions_mut().insert(self.client);
        let answer = hyper::service::Service::call(&self.service, request);
        Box::pin(async move {
            let answer = answer.await?;
            Ok(answer.map(|body| WithGuard::new(body, busy)))
        })
    }
}

/// A body that holds `guard` until it is dropped: what an answer keeps taken (its
/// connection busy, a listen stream's place) lasts exactly as long as the answer.
pub(super) struct WithGuard<B, G> {
    body: B,
    _guard: G,
}

impl<B, G> WithGuard<B, G> {
    pub(super) fn new(body: B, guard: G) -> Self {
        Self {
            body,
            _guard: guard,
        }
    }
}

impl<B, G> http_body::Body for WithGuard<B, G>
where
    B: http_body::Body + Unpin,
    G: Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

// === Unread ===

/// A socket whose writes fail once the client has read nothing for `limit` with the socket
/// full: a client that stops reading gives its answer back instead of keeping it buffered.
struct Unread {
    stream: TcpStream,
    limit: Duration,
    /// Armed when a write found the socket full; cleared when a write gets through.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Bytes read and written, for the memory given back when the connection ends.
    moved: Arc<AtomicU64>,
}

impl Unread {
    fn new(stream: TcpStream, limit: Duration, moved: Arc<AtomicU64>) -> Self {
        Self {
            stream,
            limit,
            stalled: None,
            moved,
        }
    }

    fn count(&self, bytes: usize) {
        self.moved.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn after<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if written.is_ready() {
            self.stalled = None;
            return written;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read none of its answer for {} ms \
                     (plurnk-mcp serve --write-timeout-ms)",
                    limit.as_millis()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Unread {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        this.count(buf.filled().len().saturating_sub(before));
        read
    }
}

impl AsyncWrite for Unread {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.count(n);
        }
        this.after(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            this.count(n);
        }
        this.after(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.stream).poll_flush(cx);
        this.after(cx, flushed)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn a_full_set_makes_room_by_closing_the_connection_idle_longest_and_only_an_idle_one() {
        let slots = Arc::new(Slots::new(2, 2));
        let first = slots.admit(HERE).expect("a free slot");
        let second = slots.admit(HERE).expect("a free slot");
        // The first is busy: the second, idle, is the one closed.
        let busy = Busy::start(slots.clone(), first.slot.clone());
        let third = slots.admit(HERE).expect("room made");
        assert!(second.slot.close.is_cancelled());
        assert!(!first.slot.close.is_cancelled());
        // Both open ones busy: no room.
        let _also_busy = Busy::start(slots.clone(), third.slot.clone());
        assert_eq!(slots.admit(HERE).err(), Some(Full::Client(2)));
        assert!(!slots.shed());
        // The first goes idle again: it is shed next.
        drop(busy);
        assert!(slots.shed());
        assert!(first.slot.close.is_cancelled());
        assert!(!third.slot.close.is_cancelled());
    }

    #[test]
    fn an_ended_connection_frees_its_slot() {
        let slots = Arc::new(Slots::new(1, 1));
        let only = slots.admit(HERE).expect("a free slot");
        let _busy = Busy::start(slots.clone(), only.slot.clone());
        assert!(slots.admit(HERE).is_err());
        drop(_busy);
        drop(only);
        let again = slots.admit(HERE).expect("freed");
        assert!(!again.slot.close.is_cancelled());
    }

    #[test]
    fn one_client_holds_its_own_share_and_others_find_room() {
        let other = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
        let slots = Arc::new(Slots::new(4, 2));
        // Two busy connections of one client: its third is refused, not another's.
        let mine: Vec<Held> = (0..2).map(|_| slots.admit(HERE).expect("room")).collect();
        let _busy: Vec<Busy> = mine
            .iter()
            .map(|held| Busy::start(slots.clone(), held.slot.clone()))
            .collect();
        assert_eq!(slots.admit(HERE).err(), Some(Full::Client(2)));
        let theirs = slots.admit(other).expect("another client finds room");
        let _theirs_busy = Busy::start(slots.clone(), theirs.slot.clone());
        // An idle connection of its own makes room for the client's next one.
        let idle = slots.admit(other).expect("room");
        let next = slots.admit(other).expect("its own idle one closed");
        assert!(idle.slot.close.is_cancelled());
        assert!(!theirs.slot.close.is_cancelled() && !next.slot.close.is_cancelled());
    }
}
