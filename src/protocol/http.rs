//! The Streamable HTTP binding: rmcp's reqwest transport with our headers and bounded retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};

use crate::config::is_reserved_header;

pub(crate) mod kept;

/// The host's shared HTTP client could not be built (reqwest's reason: no TLS roots, a
/// resolver that cannot start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the HTTP client could not be built: {0}")]
pub(crate) struct ClientUnbuilt(pub(crate) String);

/// A configured header the transport cannot send. It names the header, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeaderError {
    /// One of the headers the transport sets itself.
    #[error("header \"{name}\" is set by the MCP transport itself: remove it from _HEADERS")]
    Reserved { name: String },
    /// Not a token HTTP allows as a name.
    #[error("\"{name}\" is not a valid HTTP header name")]
    InvalidName { name: String },
    /// A value with bytes HTTP does not allow in a header (after `${NAME}` expansion).
    #[error("the value of header \"{name}\" is not a valid HTTP header value")]
    InvalidValue { name: String },
}

/// Builds the transport for one connection attempt.
///
/// `headers` are already expanded and include `Authorization` when a bearer is configured.
/// Errors name the header, never its value. `max_message` bounds one JSON body and one
/// event of a stream, as it bounds one line over stdio.
pub(crate) fn transport<C: StreamableHttpClient>(
    url: &str,
    headers: &[(String, String)],
    client: C,
    max_message: usize,
) -> Result<StreamableHttpClientTransport<C>, HeaderError> {
    let mut map = HashMap::new();
    for (name, value) in headers {
        // The same list the configuration refuses at load: a header that reaches here
        // unchecked still cannot replace one the transport owns.
        if is_reserved_header(name) {
            return Err(HeaderError::Reserved { name: name.clone() });
        }
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HeaderError::InvalidName { name: name.clone() })?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| HeaderError::InvalidValue { name: name.clone() })?;
        map.insert(header, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(Arc::<str>::from(url))
        .custom_headers(map)
        .max_concurrent_requests(64);
    // rmcp's SSE reconnect backoff doubles without bound by default: cap it.
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(5);
    retry.base_duration = Duration::from_millis(200);
    retry.max_delay = Some(Duration::from_secs(5));
    config.retry_config = Arc::new(retry);
    config.allow_stateless = true;
    config.max_json_response_size = max_message;
    config.max_sse_event_size = max_message;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// How many redirects one request may follow.
const MAX_REDIRECTS: usize = 5;

/// Redirects are followed only within the origin (scheme, host and port) they started from:
/// the credentials and custom headers of a request, and a 307/308's body, must never be
/// sent to another origin. A redirect elsewhere ends the request with the redirect itself,
/// which fails the connection with its status.
pub(crate) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin = |url: &reqwest::Url| {
            (
                url.scheme().to_owned(),
                url.host_str().map(str::to_ascii_lowercase),
                url.port_or_known_default(),
            )
        };
        let first = attempt.previous().first().map(origin);
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if first.is_some_and(|first| first == origin(attempt.url())) {
            attempt.follow()
        } else {
            tracing::warn!("a redirect to another origin was not followed");
            attempt.stop()
        }
    })
}

/// Why a response body could not be read whole.
pub(crate) enum Bounded {
    /// It passed its bound.
    TooLarge,
    /// The connection failed while it was read (said scrubbed).
    Failed(String),
}

/// A response body of at most `limit` bytes: what a server may make the host hold.
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, Bounded> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(Bounded::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Bounded::Failed(describe(&e)))?
    {
        if body.len() + chunk.len() > limit {
            return Err(Bounded::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error with its causes, scrubbed of every registered secret (reqwest prints the URL).
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    crate::redact::scrub(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_header_the_transport_owns_is_refused_by_name() {
        for name in [
            "Mcp-Session-Id",
            "mcp-param-region",
            "Accept",
            "Transfer-Encoding",
        ] {
            let headers = [(name.to_owned(), "secret-value-31".to_owned())];
            let refused = transport(
                "http://127.0.0.1:9/mcp",
                &headers,
                reqwest::Client::new(),
                1024,
            )
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
            assert_eq!(
                refused,
                format!(
                    "header \"{name}\" is set by the MCP transport itself: remove it from _HEADERS"
                )
            );
        }
        let headers = [("X-Tenant".to_owned(), "a".to_owned())];
        assert!(
            transport(
                "http://127.0.0.1:9/mcp",
                &headers,
                reqwest::Client::new(),
                1024
            )
            .is_ok()
        );
    }
}
