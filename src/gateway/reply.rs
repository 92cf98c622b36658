//! How each answer of `/mcp` goes out: a JSON body when the request needs no stream, an event
//! stream only when it does.
//!
//! A client that accepts `application/json` gets its answer as one JSON body unless the
//! request may need a stream: it asked for progress (`_meta.progressToken`), it opens a
//! `subscriptions/listen` stream, or it is a 2025-11-25 session's forwarded request (a tool
//! call, a prompt, a read) whose client declared elicitation, so the server may ask it a
//! question on the way. Decided per request from the request and the session alone, before
//! anything runs; then, whatever was decided, a message that would come before the answer
//! (a progress report, a log line, a question) turns the answer into an event stream carrying
//! everything in order, so nothing is ever lost to the choice. A 2026-07-28 request is
//! answered by rmcp's JSON mode (`json_response`), which already works this way; a
//! 2025-11-25 session's answer rmcp always streams, so [`shape`] reads that stream up to its
//! first message and answers JSON when that message is the answer.
//!
//! A JSON answer keeps the connection for the next request: the official SDK clients close
//! an event stream's connection once they have its answer, so every call of theirs would
//! otherwise open a new one.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;

use super::sealed::Sealer;

/// The methods whose answer a legacy session's upstream may interrupt with a question.
const FORWARDED: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// How a request's answer is to go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// One JSON body, unless a message comes before the answer.
    Json,
    /// An event stream, as rmcp makes it.
    Stream,
}

/// What [`Reply::of`] reads of a request body.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(default)]
    id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    params: Option<Params>,
}

#[derive(Deserialize)]
struct Params {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<serde::de::IgnoredAny>,
}

impl Reply {
    /// The reply a request `body` needs, its client's session able to answer elicitation
    /// (`asks`) or not. Anything but a request (a notification, a response, a batch, what
    /// does not parse) is [`Reply::Stream`]: it is left to rmcp as it is.
    pub(super) fn of(body: &[u8], asks: bool) -> Self {
        let Ok(probe) = serde_json::from_slice::<Probe<'_>>(body) else {
            return Self::Stream;
        };
        let (Some(method), Some(_)) = (probe.method, probe.id) else {
            return Self::Stream;
        };
        let progress = probe
            .params
            .and_then(|params| params.meta)
            .is_some_and(|meta| meta.progress_token.is_some());
        if progress || method == "subscriptions/listen" || (asks && FORWARDED.contains(&method)) {
            Self::Stream
        } else {
            Self::Json
        }
    }
}

/// Whether the client accepts a JSON answer.
fn accepts_json(request: &Request) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|kind| {
            let kind = kind.split(';').next().unwrap_or_default().trim();
            kind.eq_ignore_ascii_case("application/json") || kind == "*/*"
        })
}

/// The middleware: a 2025-11-25 session's request that needs no stream is answered with the
/// first message of rmcp's stream as a JSON body, when that message is its answer.
pub(super) async fn shape(State(sealer): State<Sealer>, request: Request, next: Next) -> Response {
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .map(str::to_owned);
    let Some(session) =
        session.filter(|_| request.method() == axum::http::Method::POST && accepts_json(&request))
    else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // The admission in front read the body whole (bounded): this is its one chunk again.
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let asks = sealer
        .open(&session)
        .is_some_and(|opened| opened.params.capabilities.elicitation.is_some());
    let reply = Reply::of(&body, asks);
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    if reply == Reply::Stream {
        return response;
    }
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|kind| kind.to_str().ok())
        .is_some_and(|kind| kind.starts_with("text/event-stream"));
    if !streamed {
        return response;
    }
    unstreamed(response).await
}

/// `response`'s stream as a JSON body when its first message is a JSON-RPC answer; otherwise
/// the stream as it was, what was read of it first.
async fn unstreamed(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    // Where in `read` the next event starts.
    let mut next_event = 0;
    loop {
        while let Some(end) = memchr::memmem::find(&read[next_event..], b"\n\n") {
            let event = &read[next_event..next_event + end];
            next_event += end + 2;
            let Some(data) = data_of(event) else {
                // A priming event, a comment or a keep-alive: nothing of the exchange.
                continue;
            };
            if !is_answer(&data) {
                return restreamed(parts, read, stream);
            }
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            parts.headers.remove(header::CACHE_CONTROL);
            parts.headers.remove("x-accel-buffering");
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::TRANSFER_ENCODING);
            return Response::from_parts(parts, Body::from(data));
        }
        match stream.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk),
            // An error or the end before any message: the client gets what rmcp gave.
            Some(Err(_)) | None => return restreamed(parts, read, stream),
        }
    }
}

/// The stream rmcp made, what was already read of it first.
fn restreamed(
    parts: axum::http::response::Parts,
    read: Vec<u8>,
    rest: axum::body::BodyDataStream,
) -> Response {
    let head = futures::stream::iter([Ok::<_, axum::Error>(Bytes::from(read))]);
    Response::from_parts(parts, Body::from_stream(head.chain(rest)))
}

/// The data of one event, its `data:` lines joined; `None` when it has none, or only empty
/// ones.
fn data_of(event: &[u8]) -> Option<Vec<u8>> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|byte| *byte == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(value) = line.strip_prefix(b"data:") else {
            continue;
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match &mut data {
            Some(data) => {
                data.push(b'\n');
                data.extend_from_slice(value);
            }
            None => data = Some(value.to_vec()),
        }
    }
    data.filter(|data| !data.is_empty())
}

/// Whether `message` is a JSON-RPC answer (a result or an error), not a request or a
/// notification.
fn is_answer(message: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Shape {
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        result: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Shape>(message).is_ok_and(|shape| {
        shape.method.is_none() && (shape.result.is_some() || shape.error.is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_needs_a_stream_only_for_progress_listening_or_a_question() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#;
        assert_eq!(Reply::of(call, false), Reply::Json);
        assert_eq!(Reply::of(call, true), Reply::Stream);
        let progress = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":7}}}"#;
        assert_eq!(Reply::of(progress, false), Reply::Stream);
        let list = br#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#;
        assert_eq!(Reply::of(list, true), Reply::Json);
        let listen = br#"{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{}}"#;
        assert_eq!(Reply::of(listen, false), Reply::Stream);
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(Reply::of(notification, false), Reply::Stream);
        assert_eq!(Reply::of(b"[1,2]", false), Reply::Stream);
    }

    #[tokio::test]
    async fn an_answer_first_becomes_json_and_anything_else_first_keeps_the_stream() {
        let stream = |chunks: Vec<&'static [u8]>| {
            let body = Body::from_stream(futures::stream::iter(
                chunks
                    .into_iter()
                    .map(|chunk| Ok::<_, std::io::Error>(Bytes::from_static(chunk))),
            ));
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(body)
                .expect("a response")
        };
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        let response = unstreamed(stream(vec![
            b"id: 0\nretry: 3000\ndata:\n\n",
            b"data: {\"jsonrpc\":\"2.0\",\"id\":1,",
            b"\"result\":{\"content\":[]}}\n\n",
        ]))
        .await;
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        assert_eq!(&body[..], &answer[..]);

        let progress: &'static [u8] =
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n";
        let rest: &'static [u8] = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let response = unstreamed(stream(vec![progress, rest])).await;
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        assert_eq!(&body[..], [progress, rest].concat().as_slice());
    }
}
