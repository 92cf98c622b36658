//! The gateway over Streamable HTTP at `/mcp`: rmcp's `StreamableHttpService` (stateless
//! 2026-07-28 requests, sessions for older clients) behind DNS-rebinding protection, off
//! loopback a required bearer token, and the bounds of [`ClientLimits`] (the listener in
//! `listener.rs`, bodies, sessions and listen streams in `admission.rs`); beside it the
//! status page, `/status` and `/status.json` (`status.rs`), behind the same bearer and
//! `Host`/`Origin` rules. Each answer is JSON or an event stream as its request needs
//! (`reply.rs`).
//!
//! `Host` must be a loopback name (or one the operator allows) and a present `Origin` a
//! loopback origin (or one allowed): a web page a browser was tricked into sending to the
//! gateway is refused with `403`. Bound anywhere but loopback, the gateway refuses to start
//! without a bearer token, and answers `401` to a request without it (compared in constant
//! time); the token is registered as a secret, so it is scrubbed from whatever leaves. A token
//! shorter than [`MIN_BEARER_BYTES`] is refused: it could be guessed.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::admission::{Admission, Sessions, admit};
use super::limits::{ClientLimits, LimitError};
use super::sealed::{Ended, MIN_SESSION_KEY_BYTES, SealedSessions, Sealer};
use super::status::Status;

/// The shortest bearer token the gateway accepts: 16 bytes of a random token are 128 bits.
pub const MIN_BEARER_BYTES: usize = 16;

/// How the HTTP gateway admits requests.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The bearer token every request must carry (`Authorization: Bearer <token>`);
    /// required when the listener is not on loopback.
    pub bearer: Option<String>,
    /// `Host` names (or `host:port`) accepted besides `localhost`, `127.0.0.1` and `::1`.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port|:*]`) accepted besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// What a client may make the gateway hold.
    pub limits: ClientLimits,
    /// The key 2025-11-25 session ids are sealed with ([`MIN_SESSION_KEY_BYTES`] at least):
    /// replicas given the same key serve each other's sessions. `None`: a random key of this
    /// process (its sessions are its own).
    pub session_key: Option<Vec<u8>>,
}

setters!(HttpOptions {
    with_bearer => bearer: Option<String>,
    with_allowed_hosts => allowed_hosts: Vec<String>,
    with_allowed_origins => allowed_origins: Vec<String>,
    with_limits => limits: ClientLimits,
    with_session_key => session_key: Option<Vec<u8>>,
});

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("limits", &self.limits)
            .field(
                "session_key",
                &self.session_key.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Why the gateway could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Off loopback without a bearer token.
    #[error(
        "the gateway would listen on {address}, which is not loopback, without a bearer token: \
         set one (plurnk-mcp serve --bearer-env NAME) or listen on 127.0.0.1"
    )]
    BearerRequired {
        /// The address it was given.
        address: SocketAddr,
    },
    /// A bearer token too short to withstand guessing (its length only: never the token).
    #[error(
        "the gateway's bearer token is {bytes} bytes; it must be at least {MIN_BEARER_BYTES}: \
         use a long random one (openssl rand -hex 32)"
    )]
    BearerTooShort {
        /// How long the token given is.
        bytes: usize,
    },
    /// A session key too short to withstand guessing (its length only: never the key).
    #[error(
        "the gateway's session key is {bytes} bytes; it must be at least \
         {MIN_SESSION_KEY_BYTES}: use a long random one (openssl rand -hex 32)"
    )]
    SessionKeyTooShort {
        /// How long the key given is.
        bytes: usize,
    },
    /// Settings of [`ClientLimits`] out of their range, all of them.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Limits(Vec<LimitError>),
    /// The listener failed.
    #[error("the gateway's listener failed: {0}")]
    Io(#[from] std::io::Error),
    /// A client session ended with an error.
    #[error("the gateway's session failed: {0}")]
    Session(String),
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Serves `gateway` on `listener` at `/mcp` until `shutdown` is cancelled, with a load
/// balancer's checks beside it: `GET /healthz` (the process answers) and `GET /readyz` (its
/// workspace can serve: [`crate::Workspace::readiness`]; `503` when not). The checks meet the
/// `Host` and `Origin` rules of `/mcp` (a balancer sends `Host: localhost`, or a name the
/// operator allows) and need no bearer token; why a gateway is not ready (which names its
/// store: its user, host, port and database) is said only to a request that carries the
/// bearer, anyone else is told `not ready` alone.
///
/// ```no_run
/// # async fn run(host: plurnk_mcp::Host) -> Result<(), Box<dyn std::error::Error>> {
/// use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming, serve_http};
/// let gateway = Gateway::new(host.default_workspace(), Naming::Prefixed);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8931").await?;
/// let stop = tokio_util::sync::CancellationToken::new();
/// serve_http(gateway, listener, HttpOptions::default(), stop).await?;
/// # Ok(()) }
/// ```
pub async fn serve_http(
    gateway: Gateway,
    listener: tokio::net::TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    admissible(&options, listener.local_addr()?)?;
    let limits = options.limits;
    if let Some(key) = &options.session_key {
        crate::redact::register([String::from_utf8_lossy(key).into_owned()]);
    }
    let workspace = gateway.workspace().clone();
    let sealer = Sealer::new(
        options.session_key.as_deref(),
        workspace.name(),
        limits.session_lifetime,
    );
    let ended = Arc::new(Ended::new(workspace.store()));
    let mut config = service_config(&options, shutdown.child_token());
    // A session this replica does not hold is opened from its id (nothing is stored but the
    // ids that ended).
    config.session_store = Some(Arc::new(SealedSessions {
        sealer: sealer.clone(),
        ended: ended.clone(),
    }));
    let (admission, sessions) = Admission::new(limits, sealer.clone(), ended, shutdown.clone());
    let sessions = Arc::new(sessions);
    follow_ended(&workspace, sessions.clone(), shutdown.child_token());
    let status_gateway = gateway.clone();
    let expected: Option<Arc<[u8]>> = options
        .bearer
        .as_ref()
        .map(|token| format!("Bearer {token}").into_bytes().into());
    let service: StreamableHttpService<Gateway, Sessions> =
        StreamableHttpService::new(move || Ok(gateway.clone()), sessions, config);
    let guard = service.clone();
    let status = Status::new(status_gateway, move |probe| {
        let guard = guard.clone();
        Box::pin(async move { guard.handle(probe).await.map(axum::body::Body::new) })
    });
    status.follow(shutdown.child_token());
    let page = status.clone();
    let probes = Probes {
        status: status.clone(),
        workspace,
        bearer: expected.clone(),
    };
    // The status page is not an MCP exchange: no body to admit, no session, no listen
    // stream; only the bearer (below) and the `Host`/`Origin` rules (asked of `service`).
    let pages = axum::Router::new()
        .route(
            "/status",
            axum::routing::any(move |request: Request| {
                let page = page.clone();
                async move { page.answer(request, false).await }
            }),
        )
        .route(
            "/status.json",
            axum::routing::any(move |request: Request| {
                let status = status.clone();
                async move { status.answer(request, true).await }
            }),
        );
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            sealer,
            super::reply::shape,
        ))
        .layer(axum::middleware::from_fn(super::verbatim::swap_http))
        .layer(axum::middleware::from_fn_with_state(admission, admit))
        .merge(pages);
    if let (Some(token), Some(expected)) = (options.bearer, expected) {
        crate::redact::register([token]);
        router = router.layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let expected = expected.clone();
                async move { require_bearer(&expected, request, next).await }
            },
        ));
    }
    // The bearer is checked first (the outermost layer): nothing of a request without it
    // is read beyond its head. The checks are routed after the layers, so the bearer does not
    // apply to them; the `Host` and `Origin` rules do (`Probes`).
    let ready = probes.clone();
    let router = router
        .route(
            "/healthz",
            axum::routing::get(move |request: Request| {
                let probes = probes.clone();
                async move { probes.healthz(request).await }
            }),
        )
        .route(
            "/readyz",
            axum::routing::get(move |request: Request| {
                let probes = ready.clone();
                async move { probes.readyz(request).await }
            }),
        );
    super::listener::serve(listener, router, limits, shutdown).await;
    Ok(())
}

/// rmcp's service configuration: the `Host` and `Origin` rules (loopback and what `options`
/// allows), the body bound, JSON answers, and `stop` to end it.
fn service_config(options: &HttpOptions, stop: CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(
            LOOPBACK_HOSTS
                .iter()
                .map(|host| (*host).to_owned())
                .chain(options.allowed_hosts.iter().cloned()),
        )
        .with_allowed_origins(
            LOOPBACK_ORIGINS
                .iter()
                .map(|origin| (*origin).to_owned())
                .chain(options.allowed_origins.iter().cloned()),
        )
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.limits.max_body_bytes)
        // A 2026-07-28 answer goes out as JSON unless a message comes before it (`reply.rs`).
        .with_json_response(true)
        .with_cancellation_token(stop)
}

/// Ends this gateway's copy of every session a shared store announces ended on another
/// host, until `shutdown`.
fn follow_ended(
    workspace: &crate::Workspace,
    sessions: Arc<Sessions>,
    shutdown: CancellationToken,
) {
    use crate::store::Announcement;
    use tokio::sync::broadcast::error::RecvError;
    let Some(mut announcements) = workspace.store().and_then(|store| store.announcements()) else {
        return;
    };
    tokio::spawn(async move {
        loop {
            let announced = tokio::select! {
                announced = announcements.recv() => announced,
                () = shutdown.cancelled() => return,
            };
            match announced {
                Ok(Announcement::SessionEnded { key, until }) => {
                    if let Some(key) = Ended::parse_key(&key) {
                        sessions.ended_elsewhere(key, until).await;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// Whether `options` may serve on `address`: a bearer off loopback, one long enough, and
/// bounds in range.
fn admissible(options: &HttpOptions, address: SocketAddr) -> Result<(), ServeError> {
    if !address.ip().is_loopback() && options.bearer.is_none() {
        return Err(ServeError::BearerRequired { address });
    }
    if let Some(token) = &options.bearer
        && token.len() < MIN_BEARER_BYTES
    {
        return Err(ServeError::BearerTooShort { bytes: token.len() });
    }
    if let Some(key) = &options.session_key
        && key.len() < MIN_SESSION_KEY_BYTES
    {
        return Err(ServeError::SessionKeyTooShort { bytes: key.len() });
    }
    options.limits.check().map_err(ServeError::Limits)
}

/// A load balancer's checks: behind the `Host` and `Origin` rules, the bearer only needed
/// to hear why the gateway is not ready.
#[derive(Clone)]
struct Probes {
    status: Status,
    workspace: crate::Workspace,
    /// `Bearer <token>`, when the gateway has one.
    bearer: Option<Arc<[u8]>>,
}

impl Probes {
    /// `GET /healthz`: the process answers.
    async fn healthz(&self, request: Request) -> Response {
        if let Some(refused) = self.status.refusal(request.uri(), request.headers()).await {
            return refused;
        }
        (StatusCode::OK, "ok\n").into_response()
    }

    /// `GET /readyz`: the workspace can serve; why not, only to a request with the bearer
    /// (it names the store), the same fixed words to anyone else.
    async fn readyz(&self, request: Request) -> Response {
        if let Some(refused) = self.status.refusal(request.uri(), request.headers()).await {
            return refused;
        }
        let Err(why) = self.workspace.readiness() else {
            return (StatusCode::OK, "ready\n").into_response();
        };
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|value| value.as_bytes())
            .unwrap_or_default();
        let told = self
            .bearer
            .as_deref()
            .is_some_and(|expected| same(given, expected));
        let body = if told {
            format!("not ready: {}\n", crate::redact::scrub(&why))
        } else {
            "not ready\n".to_owned()
        };
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

async fn require_bearer(expected: &[u8], request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.as_bytes())
        .unwrap_or_default();
    if same(given, expected) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this gateway needs Authorization: Bearer <token>",
        )
            .into_response()
    }
}

/// Equal bytes, in time that depends only on the lengths.
fn same(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_bearer_is_refused_by_its_length_and_never_shown() {
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let short = HttpOptions {
            bearer: Some("fifteen-bytes!!".into()),
            ..HttpOptions::default()
        };
        let refused = admissible(&short, loopback).expect_err("15 bytes");
        let said = refused.to_string();
        assert!(
            said.contains("15 bytes") && said.contains("at least 16"),
            "{said}"
        );
        assert!(!said.contains("fifteen"), "{said}");
        let enough = HttpOptions {
            bearer: Some("sixteen-bytes!!!".into()),
            ..HttpOptions::default()
        };
        assert!(admissible(&enough, loopback).is_ok());
        let anywhere: SocketAddr = ([0, 0, 0, 0], 0).into();
        assert!(matches!(
            admissible(&HttpOptions::default(), anywhere),
            Err(ServeError::BearerRequired { .. })
        ));
        let zero = HttpOptions {
            limits: ClientLimits {
                max_connections: 0,
                ..ClientLimits::default()
            },
            ..HttpOptions::default()
        };
        assert!(matches!(
            admissible(&zero, loopback),
            Err(ServeError::Limits(_))
        ));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"Bearer abc", b"Bearer abc"));
        assert!(!same(b"Bearer abd", b"Bearer abc"));
        assert!(!same(b"Bearer ab", b"Bearer abc"));
        assert!(!same(b"", b"Bearer abc"));
    }
}
