//! The gateway over Streamable HTTP at `/mcp`: rmcp's `StreamableHttpService` (stateless
//! 2026-07-28 requests, sessions for older clients) behind DNS-rebinding protection and,
//! off loopback, a required bearer token.
//!
//! `Host` must be a loopback name (or one the operator allows) and a present `Origin` a
//! loopback origin (or one allowed): a web page a browser was tricked into sending to the
//! gateway is refused with `403`. Bound anywhere but loopback, the gateway refuses to start
//! without a bearer token, and answers `401` to a request without it (compared in constant
//! time); the token is registered as a secret, so it is scrubbed from whatever leaves.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use super::Gateway;

/// How the HTTP gateway admits requests.
#[derive(Clone, Default)]
pub struct HttpOptions {
    /// The bearer token every request must carry (`Authorization: Bearer <token>`);
    /// required when the listener is not on loopback.
    pub bearer: Option<String>,
    /// `Host` names (or `host:port`) accepted besides `localhost`, `127.0.0.1` and `::1`.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port|:*]`) accepted besides the loopback ones.
    pub allowed_origins: Vec<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
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
    /// The listener failed.
    #[error("the gateway's listener failed: {0}")]
    Io(#[from] std::io::Error),
    /// A client session ended with an error.
    #[error("the gateway's session failed: {0}")]
    Session(String),
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Serves `gateway` on `listener` at `/mcp` until `shutdown` is cancelled.
pub async fn serve_http(
    gateway: Gateway,
    listener: tokio::net::TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let address = listener.local_addr()?;
    if !address.ip().is_loopback() && options.bearer.is_none() {
        return Err(ServeError::BearerRequired { address });
    }
    let config = StreamableHttpServerConfig::default()
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
        .with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<Gateway, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(gateway.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(super::verbatim::swap_http));
    if let Some(token) = options.bearer {
        crate::redact::register([token.clone()]);
        let expected: Arc<[u8]> = format!("Bearer {token}").into_bytes().into();
        router = router.layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let expected = expected.clone();
                async move { require_bearer(&expected, request, next).await }
            },
        ));
    }
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
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
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"Bearer abc", b"Bearer abc"));
        assert!(!same(b"Bearer abd", b"Bearer abc"));
        assert!(!same(b"Bearer ab", b"Bearer abc"));
        assert!(!same(b"", b"Bearer abc"));
    }
}
