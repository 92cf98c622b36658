//! Answers kept as the server wrote them over Streamable HTTP.
//!
//! rmcp's reqwest client reads a JSON answer into its typed union, whose result structs keep
//! only the fields they know (an extra field of a read, of a tool result, of a content block)
//! and cannot hold a content block of a type rmcp does not know. A request marked
//! [`Verbatim`] is posted here instead, as rmcp's client posts it: a JSON answer to it is
//! handed over as `ServerResult::CustomResult` holding the `result` object exactly as parsed,
//! as [`super::super::lines`] does over stdio; in an event stream, the event that answers it
//! carries that object under [`KEPT`], which rmcp's typed reading of the event can only take
//! as a `CustomResult`, and [`unwrap`] gives the caller the object itself. Every other request
//! and every stream opened by a `GET` is rmcp's client's own.
//!
//! The bounds are rmcp's: a JSON body at most `max_json_response_size`, one event at most
//! `max_sse_event_size`; a failed answer's text is scrubbed and cut as every server's words
//! are.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use reqwest::header::{
    ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use rmcp::model::{
    ClientJsonRpcMessage, CustomResult, GetExtensions, JsonRpcMessage, NumberOrString, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::{Error as SseError, Sse, SseStream};

use crate::protocol::lines::Verbatim;

/// The member an event's result is kept under: a name no result of the protocol has, so that
/// rmcp's typed union reads the object as a `CustomResult`.
pub(crate) const KEPT: &str = "io.plurnk/kept";

/// A verbatim answer that came in an event stream, given back as the server wrote it; any
/// other answer as it is.
pub(crate) fn unwrap(answer: ServerResult) -> ServerResult {
    match answer {
        ServerResult::CustomResult(CustomResult(Value::Object(mut object)))
            if object.len() == 1 && object.contains_key(KEPT) =>
        {
            ServerResult::CustomResult(CustomResult(object.remove(KEPT).unwrap_or_default()))
        }
        answer => answer,
    }
}

/// rmcp's reqwest client, but for requests marked [`Verbatim`].
#[derive(Clone)]
pub(crate) struct Kept(pub(crate) reqwest::Client);

/// The header of a legacy session's id.
const SESSION_ID: &str = "mcp-session-id";

/// rmcp's own limits when its caller gives only the event size.
fn limits_for(max_sse_event_size: usize) -> StreamableHttpResponseLimits {
    let mut limits = StreamableHttpResponseLimits::default();
    limits.max_sse_event_size = max_sse_event_size;
    limits
}

/// The id of `message` when it is a request whose answer is to be kept.
fn verbatim(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request)
            if request.request.extensions().get::<Verbatim>().is_some() =>
        {
            Some(request.id.clone())
        }
        _ => None,
    }
}

impl StreamableHttpClient for Kept {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits_for(max_sse_event_size),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        match verbatim(&message) {
            Some(id) => {
                post_kept(
                    &self.0,
                    &uri,
                    &message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                    id,
                )
                .await
            }
            None => {
                self.0
                    .post_message_with_response_limits(
                        uri,
                        message,
                        session_id,
                        auth_header,
                        custom_headers,
                        limits,
                    )
                    .await
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// Posts `message` as rmcp's reqwest client does and reads its answer keeping the result
/// that answers `id` whole.
#[allow(clippy::too_many_arguments)]
async fn post_kept(
    client: &reqwest::Client,
    uri: &str,
    message: &ClientJsonRpcMessage,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
    limits: StreamableHttpResponseLimits,
    id: RequestId,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
    let mut request = client
        .post(uri)
        .header(ACCEPT, "text/event-stream, application/json");
    if let Some(token) = auth_header {
        request = request.bearer_auth(token);
    }
    for (name, value) in custom_headers {
        request = request.header(name, value);
    }
    let session_attached = session_id.is_some();
    if let Some(session) = session_id {
        request = request.header(SESSION_ID, session.as_ref());
    }
    let response = request
        .json(message)
        .send()
        .await
        .map_err(StreamableHttpError::Client)?;
    let status = response.status();
    let challenge = || {
        response
            .headers()
            .get(WWW_AUTHENTICATE)
            .map(|value| value.to_str().map(str::to_owned))
    };
    if status == reqwest::StatusCode::UNAUTHORIZED
        && let Some(header) = challenge()
    {
        let header = header.map_err(|_| invalid_challenge())?;
        return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            header,
        )));
    }
    if status == reqwest::StatusCode::FORBIDDEN
        && let Some(header) = challenge()
    {
        let header = header.map_err(|_| invalid_challenge())?;
        let scope = scope_of(&header);
        return Err(StreamableHttpError::InsufficientScope(
            InsufficientScopeError::new(header, scope),
        ));
    }
    if matches!(
        status,
        reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
    ) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == reqwest::StatusCode::NOT_FOUND && session_attached {
        return Err(StreamableHttpError::SessionExpired);
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| {
            value
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    let session = response
        .headers()
        .get(SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if !status.is_success() {
        return failed(response, status, content_type.as_deref(), limits, session).await;
    }
    match content_type.as_deref() {
        Some("application/json") => {
            let body = read_bounded(response, limits.max_json_response_size).await?;
            let answer = kept_answer(&body, &id).ok_or_else(|| {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                    "the answer is not a JSON-RPC message: {}",
                    preview(&body)
                )))
            })?;
            Ok(StreamableHttpPostResponse::Json(answer, session))
        }
        Some("text/event-stream") => {
            let bytes = Bounded::new(response.bytes_stream(), limits.max_sse_event_size);
            let events = SseStream::from_bytes_stream(bytes)
                .map(move |event| event.map(|event| keep_event(event, &id)))
                .boxed();
            Ok(StreamableHttpPostResponse::Sse(events, session))
        }
        other => Err(StreamableHttpError::UnexpectedContentType(
            other.map(str::to_owned),
        )),
    }
}

/// A failed answer: its JSON-RPC error when it carries one, else its status (with a 429's or
/// a 5xx's `Retry-After`), as rmcp's client says them.
async fn failed(
    response: reqwest::Response,
    status: reqwest::StatusCode,
    content_type: Option<&str>,
    limits: StreamableHttpResponseLimits,
    session: Option<String>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
    let unauthenticated = matches!(
        status,
        reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
    );
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let status_error = (status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error())
    .then(|| HttpStatusError::new(status.as_u16(), retry_after));
    if content_type == Some("application/json")
        && !unauthenticated
        && status != reqwest::StatusCode::TOO_MANY_REQUESTS
    {
        match read_bounded(response, limits.max_json_response_size).await {
            Ok(body) => {
                if let Ok(error @ JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(error, session));
                }
                if let Some(error) = status_error {
                    return Err(error.into());
                }
                // The server's own words: scrubbed of every secret and cut, as any.
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("HTTP {status}: {}", preview(&body)),
                )));
            }
            Err(error) => return Err(status_error.map_or(error, StreamableHttpError::from)),
        }
    }
    if let Some(error) = status_error {
        return Err(error.into());
    }
    Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
        format!("HTTP {status}"),
    )))
}

/// The body of `response`, at most `limit` bytes (the host's one bounded read).
async fn read_bounded(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, StreamableHttpError<reqwest::Error>> {
    super::read_bounded(response, limit)
        .await
        .map_err(|fault| match fault {
            super::Bounded::TooLarge => {
                StreamableHttpError::ResponseBodyTooLarge { max_size: limit }
            }
            super::Bounded::Failed(why) => StreamableHttpError::UnexpectedServerResponse(
                Cow::Owned(format!("the answer could not be read: {why}")),
            ),
        })
}

/// The message of a JSON answer, the result that answers `id` kept as written.
fn kept_answer(body: &[u8], id: &RequestId) -> Option<ServerJsonRpcMessage> {
    let mut value = serde_json::from_slice::<Value>(body).ok()?;
    if answers(&value, id)
        && let Some(result) = value.as_object_mut().and_then(|m| m.remove("result"))
    {
        return Some(JsonRpcMessage::response(
            ServerResult::CustomResult(CustomResult(result)),
            id.clone(),
        ));
    }
    serde_json::from_value(value).ok()
}

/// `event` with its data's result kept under [`KEPT`] when it answers `id`.
fn keep_event(mut event: Sse, id: &RequestId) -> Sse {
    // Only a result is kept: the stream's other events (progress, logs, a server's own
    // requests) are left for rmcp to read once, unparsed here.
    let Some(data) = event
        .data
        .as_deref()
        .filter(|data| data.contains("\"result\""))
    else {
        return event;
    };
    let Ok(mut value) = serde_json::from_str::<Value>(data) else {
        return event;
    };
    if answers(&value, id)
        && let Some(object) = value.as_object_mut()
        && let Some(result) = object.remove("result")
    {
        object.insert("result".into(), serde_json::json!({ KEPT: result }));
        event.data = Some(value.to_string());
    }
    event
}

/// Whether `value` is a result answering request `id`.
fn answers(value: &Value, id: &RequestId) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    if object.contains_key("method") || !object.contains_key("result") {
        return false;
    }
    match (object.get("id"), id) {
        (Some(Value::Number(number)), NumberOrString::Number(ours)) => {
            number.as_i64() == Some(*ours)
        }
        (Some(Value::String(text)), NumberOrString::String(ours)) => text.as_str() == ours.as_ref(),
        _ => false,
    }
}

/// The scope a `403`'s challenge asks for, read as rmcp's client reads it (its reader is
/// its own): the `scope` parameter, quoted or bare.
fn scope_of(header: &str) -> Option<String> {
    let start = header.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let rest = header.get(start..)?;
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.find('"').map(|end| quoted[..end].to_owned()),
        None => {
            let end = rest
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(rest.len());
            (end > 0).then(|| rest[..end].to_owned())
        }
    }
}

fn invalid_challenge() -> StreamableHttpError<reqwest::Error> {
    StreamableHttpError::UnexpectedServerResponse(Cow::Borrowed(
        "invalid www-authenticate header value",
    ))
}

/// A short view of a body that is not a message.
fn preview(body: &[u8]) -> String {
    let cut = &body[..body.len().min(256)];
    crate::redact::scrub_capped(&String::from_utf8_lossy(cut), crate::redact::SHOWN_CHARS)
}

/// An event stream's bytes, failed once one event passes `max` bytes (comments and the
/// blank line that ends an event not counted), so a server cannot make the host hold an
/// endless event.
struct Bounded<S> {
    inner: S,
    max: usize,
    /// Bytes of the event so far, and of the current line.
    event: usize,
    line: usize,
    comment: bool,
    after_cr: bool,
    failed: bool,
}

impl<S> Bounded<S> {
    fn new(inner: S, max: usize) -> Self {
        Self {
            inner,
            max,
            event: 0,
            line: 0,
            comment: false,
            after_cr: false,
            failed: false,
        }
    }

    /// Counts `chunk`; `false` once an event is past the bound.
    fn observe(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    if self.line == 0 {
                        self.event = 0;
                    } else if !self.comment {
                        self.event = self.event.saturating_add(self.line + 1);
                    }
                    self.line = 0;
                    self.comment = false;
                }
                _ => {
                    if self.line == 0 {
                        self.comment = byte == b':';
                    }
                    self.line = self.line.saturating_add(1);
                }
            }
            if self.event.saturating_add(self.line) > self.max {
                return false;
            }
        }
        true
    }
}

/// Why an answer's event stream ended early.
#[derive(Debug, thiserror::Error)]
enum StreamFault {
    /// An event passed its bound.
    #[error("an event of the answer's stream passed {0} bytes")]
    EventTooLarge(usize),
    /// The connection failed while it was read.
    #[error(transparent)]
    Read(#[from] reqwest::Error),
}

impl<S, D> Stream for Bounded<S>
where
    S: Stream<Item = Result<D, reqwest::Error>> + Unpin,
    D: AsRef<[u8]>,
{
    type Item = Result<D, StreamFault>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.observe(chunk.as_ref()) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.failed = true;
                    let max = self.max;
                    Poll::Ready(Some(Err(StreamFault::EventTooLarge(max))))
                }
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kept_result_is_read_by_rmcp_as_a_custom_result_and_unwrapped_whole() {
        let written = json!({"contents": [{"uri": "a", "text": "x", "x-field": 1}],
                             "x-vendor": {"kept": true}, "ttlMs": 5});
        // Every typed result of the union refuses the wrapper: a change in rmcp that reads
        // it as something else fails here.
        let typed: ServerResult = serde_json::from_value(json!({ KEPT: written })).unwrap();
        assert!(matches!(typed, ServerResult::CustomResult(_)), "{typed:?}");
        match unwrap(typed) {
            ServerResult::CustomResult(CustomResult(value)) => assert_eq!(value, written),
            other => panic!("{other:?}"),
        }
        // Another custom result is left as it is.
        let other = json!({ KEPT: 1, "x": 2 });
        match unwrap(ServerResult::CustomResult(CustomResult(other.clone()))) {
            ServerResult::CustomResult(CustomResult(value)) => assert_eq!(value, other),
            answer => panic!("{answer:?}"),
        }
    }

    #[test]
    fn only_the_result_answering_the_request_is_kept() {
        let id = NumberOrString::Number(7);
        let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {"x-odd": 1, "content": []}});
        match kept_answer(answer.to_string().as_bytes(), &id) {
            Some(JsonRpcMessage::Response(response)) => match response.result {
                ServerResult::CustomResult(CustomResult(value)) => {
                    assert_eq!(value, json!({"x-odd": 1, "content": []}));
                }
                answer => panic!("{answer:?}"),
            },
            other => panic!("{other:?}"),
        }
        let event = keep_event(Sse::default().data(answer.to_string()), &id);
        let data: Value = serde_json::from_str(event.data.as_deref().unwrap()).unwrap();
        assert_eq!(data["result"][KEPT], answer["result"]);
        // A notification, another id, an error: as written.
        for other in [
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 8, "result": {}}),
            json!({"jsonrpc": "2.0", "id": "7", "result": {}}),
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "no"}}),
        ] {
            let event = keep_event(Sse::default().data(other.to_string()), &id);
            assert_eq!(event.data.as_deref(), Some(other.to_string().as_str()));
        }
    }

    #[test]
    fn an_event_past_its_bound_fails_the_stream_and_comments_do_not_count() {
        // A line counts with the newline joining it to the next (as rmcp counts it).
        let mut bounded = Bounded::new((), 11);
        assert!(bounded.observe(b"data: 1234\n\n"));
        // A completed comment is not kept: with it counted, this event would be 12 bytes.
        assert!(bounded.observe(b"data: 1\r\n: x\r\n"));
        assert!(bounded.observe(b"d:\n\n"));
        assert!(!bounded.observe(b"data: 12345678"));
        let mut split = Bounded::new((), 11);
        assert!(split.observe(b"data: "));
        assert!(!split.observe(b"1234567"));
    }

    #[test]
    fn a_challenge_scope_is_read_quoted_or_bare() {
        assert_eq!(
            scope_of(r#"Bearer error="insufficient_scope", scope="a b""#),
            Some("a b".into())
        );
        assert_eq!(scope_of("Bearer Scope=files,x=1"), Some("files".into()));
        assert_eq!(scope_of("Bearer"), None);
    }
}
