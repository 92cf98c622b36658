//! What a gateway client may make the gateway hold per request: a request body bounded in
//! bytes and time, and places, per client address and in total, for legacy sessions and
//! listen streams.
//!
//! rmcp's `StreamableHttpService` owns sessions and streams; it bounds a body's bytes but not
//! its time, and holds as many sessions and streams as clients open. [`admit`] sits in front
//! of it: it reads the body whole within [`ClientLimits::body_timeout`] (`408` past it, `413`
//! past [`ClientLimits::max_body_bytes`]), gives a listen stream (`GET`, or a
//! `subscriptions/listen` POST, which 2026-07-28 requests name in their `Mcp-Method` header)
//! a place it holds as long as its answer lasts, and lets rmcp create a session only through
//! [`Sessions`], which takes a place in the session book. A client is its address: on
//! loopback every local client is one client.
//!
//! `SessionManager::create_session` is told nothing of the request, so [`admit`] lends the
//! client to it through a task-local: rmcp creates the session inline in the request's own
//! future. Were that ever not so, the session would count against the total only.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager,
    session::{
        RestoreOutcome, ServerSseMessage,
        local::{LocalSessionManager, LocalSessionManagerError, SessionConfig},
    },
};

use tokio_util::sync::CancellationToken;

use super::bytes::{Charged, Ledger, Over};
use super::limits::ClientLimits;
use super::listener::{ClientAddr, WithGuard};
use super::sealed::{Ended, Key, Sealer, key_of, now};

/// The header a 2026-07-28 request names its method in (SEP-2243; rmcp refuses a request
/// whose header and body disagree).
const MCP_METHOD: &str = "mcp-method";

/// The flags that bound sessions, which also tell the session book from the listen one.
const SESSIONS_FLAGS: (&str, &str) = ("--max-sessions", "--max-sessions-per-client");

/// What a client is told to wait before asking again for a session or a stream.
const RETRY_AFTER_SECONDS: &str = "5";

/// The places taken, per client and in total, of one kind (sessions or listen streams).
struct Book {
    /// What it counts, as the refusals name it.
    what: &'static str,
    /// The flags that set `max` and `max_per_client`.
    flags: (&'static str, &'static str),
    max: usize,
    max_per_client: usize,
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// A refusal: its status and what it says.
#[derive(Debug, Clone)]
struct Refusal {
    status: StatusCode,
    message: String,
}

impl From<Over> for Refusal {
    fn from(over: Over) -> Self {
        Self {
            status: over.status,
            message: over.message,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.message)).into_response();
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

impl Book {
    fn new(
        what: &'static str,
        flags: (&'static str, &'static str),
        max: usize,
        per: usize,
    ) -> Self {
        Self {
            what,
            flags,
            max,
            max_per_client: per,
            total: 0,
            per_client: HashMap::new(),
        }
    }

    /// The gauge of the places this book holds (every gateway of the process together).
    fn gauge(&self) -> metrics::Gauge {
        if self.flags.0 == SESSIONS_FLAGS.0 {
            metrics::gauge!("plurnk_mcp_gateway_sessions")
        } else {
            metrics::gauge!("plurnk_mcp_gateway_listen_streams")
        }
    }

    /// Takes a place for `client`, or says why not.
    fn take(&mut self, client: Option<IpAddr>) -> Result<(), Refusal> {
        if let Some(client) = client
            && self.per_client.get(&client).copied().unwrap_or(0) >= self.max_per_client
        {
            return Err(Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                message: format!(
                    "client {client} has its {} {} open (plurnk-mcp serve {}): end one before \
                     opening another",
                    self.max_per_client, self.what, self.flags.1
                ),
            });
        }
        if self.total >= self.max {
            return Err(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!(
                    "the gateway has its {} {} open (plurnk-mcp serve {}): retry later",
                    self.max, self.what, self.flags.0
                ),
            });
        }
        self.total += 1;
        self.gauge().increment(1.0);
        if let Some(client) = client {
            *self.per_client.entry(client).or_default() += 1;
        }
        Ok(())
    }

    fn give_back(&mut self, client: Option<IpAddr>) {
        if self.total > 0 {
            self.gauge().decrement(1.0);
        }
        self.total = self.total.saturating_sub(1);
        if let Some(client) = client
            && let Some(count) = self.per_client.get_mut(&client)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                // A client that holds nothing costs nothing.
                self.per_client.remove(&client);
            }
        }
    }
}

/// A place in a book, given back when dropped.
struct Place {
    book: Arc<Mutex<Book>>,
    client: Option<IpAddr>,
}

impl Place {
    fn take(book: &Arc<Mutex<Book>>, client: Option<IpAddr>) -> Result<Self, Refusal> {
        let mut taken = book.lock().map_err(|_| Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "the gateway's admission book is unusable".into(),
        })?;
        taken.take(client)?;
        Ok(Self {
            book: book.clone(),
            client,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Ok(mut book) = self.book.lock() {
            book.give_back(self.client);
        }
    }
}

/// The admission state the middleware and the session manager share.
#[derive(Clone)]
pub(super) struct Admission {
    limits: ClientLimits,
    listens: Arc<Mutex<Book>>,
    /// The bytes requests and their answers hold.
    bytes: Arc<Ledger>,
}

impl Admission {
    /// The middleware's state and the session manager rmcp is to use, both from `limits`;
    /// every session's id sealed by `sealer`, and put on `ended` once it ends for good (not
    /// when `shutdown` ends it: the session goes on through other replicas).
    pub(super) fn new(
        limits: ClientLimits,
        sealer: Sealer,
        ended: Arc<Ended>,
        shutdown: CancellationToken,
    ) -> (Self, Sessions) {
        let listens = Book::new(
            "listen streams",
            ("--max-listen-streams", "--max-listen-streams-per-client"),
            limits.max_listen_streams,
            limits.max_listen_streams_per_client,
        );
        let sessions = Book::new(
            "sessions",
            SESSIONS_FLAGS,
            limits.max_sessions,
            limits.max_sessions_per_client,
        );
        let mut local = LocalSessionManager::default();
        local.session_config = session_config(&limits);
        (
            Self {
                limits,
                listens: Arc::new(Mutex::new(listens)),
                bytes: Arc::new(Ledger::new(
                    limits.max_bytes_in_flight,
                    limits.max_bytes_in_flight_per_client,
                )),
            },
            Sessions {
                inner: local,
                book: Arc::new(Mutex::new(sessions)),
                places: Mutex::new(HashMap::new()),
                sealer,
                ended,
                shutdown,
            },
        )
    }
}

fn session_config(limits: &ClientLimits) -> SessionConfig {
    let mut config = SessionConfig::default();
    config.keep_alive = Some(limits.session_idle);
    config
}

/// The request being admitted, lent to [`Sessions::create_session`].
struct Asking {
    client: Option<IpAddr>,
    refused: Mutex<Option<Refusal>>,
    /// An `initialize` request's params: what the new session's id seals.
    initialize: Option<serde_json::Value>,
}

tokio::task_local! {
    static ASKING: Arc<Asking>;
}

/// The middleware in front of rmcp's service: the body read whole within its bounds, a
/// listen stream's place taken for as long as its answer lasts, the client lent to the
/// session manager and its refusal answered in our words.
pub(super) async fn admit(
    State(admission): State<Admission>,
    request: Request,
    next: Next,
) -> Response {
    let client = request
        .extensions()
        .get::<ClientAddr>()
        .map(|ClientAddr(address)| *address);
    let (parts, body) = request.into_parts();
    let body = match read_body(body, &parts.headers, &admission.limits).await {
        Ok(body) => body,
        Err(refusal) => {
            let mut response = refusal.into_response();
            // What is left of the body is never read: the connection cannot carry another
            // request after it.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let charge = match admission.bytes.charge(client, body.len()) {
        Ok(charge) => charge,
        Err(over) => return Refusal::from(over).into_response(),
    };
    let listens = parts.method == axum::http::Method::GET
        || parts
            .headers
            .get(MCP_METHOD)
            .is_some_and(|method| method.as_bytes() == b"subscriptions/listen");
    let place = if listens {
        match Place::take(&admission.listens, client) {
            Ok(place) => Some(place),
            Err(refusal) => return refusal.into_response(),
        }
    } else {
        None
    };
    let initialize = (parts.method == axum::http::Method::POST
        && !parts.headers.contains_key("mcp-session-id"))
    .then(|| initialize_params(&body))
    .flatten();
    let asking = Arc::new(Asking {
        client,
        refused: Mutex::new(None),
        initialize,
    });
    let request = Request::from_parts(parts, Body::from(body));
    let response = ASKING.scope(asking.clone(), next.run(request)).await;
    if let Some(refusal) = asking
        .refused
        .lock()
        .ok()
        .and_then(|mut taken| taken.take())
    {
        return refusal.into_response();
    }
    let response = response.map(|body| Body::new(Charged::new(body, charge)));
    match place {
        Some(place) => response.map(|body| Body::new(WithGuard::new(body, place))),
        None => response,
    }
}

/// The params of an `initialize` request body, if that is what it is.
fn initialize_params(body: &[u8]) -> Option<serde_json::Value> {
    let mut message: serde_json::Value = serde_json::from_slice(body).ok()?;
    if message.get("method")?.as_str()? != "initialize" {
        return None;
    }
    Some(message.get_mut("params")?.take())
}

/// The whole body, within the byte and time bounds.
async fn read_body(
    body: Body,
    headers: &axum::http::HeaderMap,
    limits: &ClientLimits,
) -> Result<Bytes, Refusal> {
    let max = limits.max_body_bytes;
    let too_large = || Refusal {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!(
            "the request body is over {max} bytes (plurnk-mcp serve --max-body-bytes): send a \
             smaller request"
        ),
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut collected = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| Refusal {
                status: StatusCode::BAD_REQUEST,
                message: format!("the request body could not be read: {error}"),
            })?;
            if chunk.len() > max.saturating_sub(collected.len()) {
                return Err(too_large());
            }
            collected.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(collected))
    };
    match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(read) => read,
        Err(_) => Err(Refusal {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the request body did not arrive whole within {} ms (plurnk-mcp serve \
                 --body-timeout-ms): send the body with its head",
                limits.body_timeout.as_millis()
            ),
        }),
    }
}

// === Sessions ===

/// rmcp's in-memory session manager with a place in the session book for every session:
/// past a bound `initialize` is refused (the middleware answers the refusal), and a session's
/// place is given back when it ends (closed, deleted, or idle past
/// [`ClientLimits::session_idle`], which rmcp's worker enforces). A session that ends for
/// good goes on the ended list, so its id never opens again; one past its sealed lifetime
/// ends at its next request.
pub(super) struct Sessions {
    inner: LocalSessionManager,
    book: Arc<Mutex<Book>>,
    places: Mutex<HashMap<SessionId, Held>>,
    /// Seals every new session's id, so any replica can serve it.
    sealer: Sealer,
    /// The sessions that ended, here and (through the store) on every replica.
    ended: Arc<Ended>,
    /// Cancelled when the gateway shuts down: the sessions it then closes have not ended.
    shutdown: CancellationToken,
}

/// What a session held here takes and is: its place in the book, when its lifetime ends,
/// and its id's key on the ended list.
struct Held {
    _place: Place,
    until: u64,
    key: Key,
}

/// Why a session could not be had.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    /// A bound of the session book (the middleware answers it).
    #[error("{0}")]
    Refused(String),
    /// rmcp's session manager.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl Sessions {
    /// Keeps `place` for the session `id` holds here, with its lifetime from its id (a
    /// session made under an id of another form lives as long as the gateway's bound says).
    fn hold(&self, id: &SessionId, place: Place) {
        let until = self.sealer.open(id).map_or_else(
            || now().saturating_add(self.sealer.lifetime_secs()),
            |o| o.until,
        );
        if let Ok(mut places) = self.places.lock() {
            places.insert(
                id.clone(),
                Held {
                    _place: place,
                    until,
                    key: key_of(id),
                },
            );
        }
    }

    /// Ends this gateway's copy of the session whose id's key is `key`, which ended on
    /// another host: put on the list first, so closing it records nothing again.
    pub(super) async fn ended_elsewhere(&self, key: Key, until: u64) {
        self.ended.note(key, until);
        let id = self.places.lock().ok().and_then(|places| {
            places
                .iter()
                .find(|(_, held)| held.key == key)
                .map(|(id, _)| id.clone())
        });
        if let Some(id) = id {
            let _ = self.close_session(&id).await;
        }
    }

    /// A place in the session book for the client `asking` lends, or the refusal (kept for
    /// the middleware to answer in its words).
    fn place(&self, asking: Option<&Asking>) -> Result<Place, SessionsError> {
        let client = asking.and_then(|asking| asking.client);
        Place::take(&self.book, client).map_err(|refusal| {
            let message = refusal.message.clone();
            if let Some(asking) = asking
                && let Ok(mut refused) = asking.refused.lock()
            {
                *refused = Some(refusal);
            }
            SessionsError::Refused(message)
        })
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let asking = ASKING.try_with(Arc::clone).ok();
        let place = self.place(asking.as_deref())?;
        // The session is made under the id that seals its client's initialize, as a
        // restore would make it: the id is all another replica needs.
        let sealed = asking
            .as_ref()
            .and_then(|asking| asking.initialize.as_ref())
            .map(|params| SessionId::from(self.sealer.seal(params)));
        let (id, transport) = match sealed {
            Some(id) => match self.inner.restore_session(id.clone()).await? {
                RestoreOutcome::Restored(transport) => (id, transport),
                _ => self.inner.create_session().await?,
            },
            None => self.inner.create_session().await?,
        };
        self.hold(&id, place);
        Ok((id, transport))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // A session another replica opened (its id verified by the sealed store) takes a
        // place here like one opened here.
        let asking = ASKING.try_with(Arc::clone).ok();
        let place = self.place(asking.as_deref())?;
        let outcome = self.inner.restore_session(id.clone()).await?;
        if matches!(outcome, RestoreOutcome::Restored(_)) {
            self.hold(&id, place);
        }
        Ok(outcome)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // Past its lifetime a session ends at its next request, which then finds none (and
        // its id no longer opens).
        let lived = self
            .places
            .lock()
            .ok()
            .and_then(|places| places.get(id).map(|held| held.until <= now()))
            .unwrap_or(false);
        if lived {
            self.close_session(id).await?;
            return Ok(false);
        }
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let held = self
            .places
            .lock()
            .ok()
            .and_then(|mut places| places.remove(id));
        let closed = self.inner.close_session(id).await;
        // Closed for good (deleted, idle, failed) unless the gateway is shutting down: its id
        // must open nowhere until its lifetime passes. An id that does not open here (forged,
        // another workspace's, past its lifetime) has nothing to end.
        if !self.shutdown.is_cancelled() {
            let until = match &held {
                Some(held) => Some(held.until),
                None => self.sealer.open(id).map(|opened| opened.until),
            };
            if let Some(until) = until.filter(|until| *until > now()) {
                self.ended.end(id, until).await;
            }
        }
        if held.is_some() {
            drop(held);
            crate::memory::give_back();
        }
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> Book {
        Book::new(
            "sessions",
            ("--max-sessions", "--max-sessions-per-client"),
            3,
            2,
        )
    }

    #[test]
    fn a_client_meets_its_own_bound_before_the_total_and_others_keep_theirs() {
        let mut book = book();
        let one: IpAddr = [127, 0, 0, 1].into();
        let two: IpAddr = [127, 0, 0, 2].into();
        book.take(Some(one)).expect("first");
        book.take(Some(one)).expect("second");
        let refused = book.take(Some(one)).expect_err("over the per-client bound");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(
            refused.message.contains("--max-sessions-per-client")
                && refused.message.contains("127.0.0.1"),
            "{}",
            refused.message
        );
        book.take(Some(two)).expect("another client");
        let refused = book.take(Some(two)).expect_err("over the total");
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused.message.contains("--max-sessions)"),
            "{}",
            refused.message
        );
        book.give_back(Some(one));
        book.take(Some(two))
            .expect("a place given back is taken again");
        book.give_back(Some(two));
        book.give_back(Some(two));
        book.give_back(Some(one));
        assert_eq!(book.total, 0);
        assert!(book.per_client.is_empty(), "{:?}", book.per_client);
    }
}
