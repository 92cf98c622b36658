//! Forwarded answers sent on as the server wrote them.
//!
//! rmcp's server side only sends typed results, and its typed results keep only the fields
//! and content block types rmcp knows: an upstream's unknown field or content block type
//! would be dropped, or fail the answer, on its way through the gateway. The specification
//! asks a host to preserve results without reconstructing them (§mcp-core-matrix, Base).
//! So the gateway answers a forwarded request with the least result of the type rmcp
//! expects, carrying the upstream's answer (already as the client's revision has it) in its
//! `_meta` under [`PASSED`]; on the way out the answer takes the place of that result: in
//! the rmcp service of a stdio client ([`Verbatim`]), in the HTTP response of a Streamable
//! HTTP client ([`swap_http`]). rmcp still checks and frames every request and answer
//! around the handler as it always does. Only the gateway writes a result's top-level
//! `_meta`, so no upstream can place the key where it is looked for.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use rmcp::model::{
    ClientNotification, ClientRequest, CustomResult, ProtocolVersion, ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, Service};
use serde_json::{Value, json};

/// The `_meta` key of a placeholder result that carries the answer sent in its place.
pub(super) const PASSED: &str = "plurnk/passed";

/// What a forwarded answer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Passing {
    /// An `input_required` round, relayed to a 2026-07-28 client.
    Input,
    Tool,
    Prompt,
    Resource,
    Completion,
}

impl Passing {
    fn name(self) -> &'static str {
        match self {
            Self::Input => "input request",
            Self::Tool => "tool result",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
            Self::Completion => "completion",
        }
    }

    /// The least result of the type rmcp expects for it.
    fn placeholder(self) -> Value {
        match self {
            Self::Input => json!({"resultType": "input_required", "requestState": ""}),
            Self::Tool => json!({"content": []}),
            Self::Prompt => json!({"messages": []}),
            Self::Resource => json!({"contents": []}),
            Self::Completion => json!({"completion": {"values": []}}),
        }
    }
}

/// Whether `context`'s client speaks 2026-07-28 or later, as rmcp decides it for the
/// answers it shapes.
pub(super) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The result rmcp is given for `answer`: a placeholder carrying `answer` as the client's
/// revision has it.
pub(super) fn placeholder<T: serde::de::DeserializeOwned>(
    answer: Value,
    what: Passing,
    modern: bool,
) -> Result<T, McpError> {
    let mut placeholder = what.placeholder();
    placeholder["_meta"] = json!({ PASSED: adapted(answer, what, modern) });
    serde_json::from_value(placeholder).map_err(|error| {
        McpError::internal_error(
            format!(
                "the upstream {} could not be passed on: {error}",
                what.name()
            ),
            None,
        )
    })
}

/// `answer` as the client's revision has it, changed only where rmcp changes every answer
/// of a handler for that revision, and where the client's schema requires a member: a
/// 2026-07-28 client gets `resultType` and a read's cache hints when the server (an older
/// one) left them out; an older client gets no `resultType: "complete"`, and a tool's
/// structured content only as an object (another value moves into a text block, as rmcp
/// moves it); a tool result always has its `content`.
fn adapted(mut answer: Value, what: Passing, modern: bool) -> Value {
    let Some(object) = answer.as_object_mut() else {
        return answer;
    };
    if what == Passing::Input {
        return answer;
    }
    if modern {
        let kind = object
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
        if what == Passing::Resource && kind == "complete" {
            object.entry("ttlMs").or_insert_with(|| json!(0));
            object
                .entry("cacheScope")
                .or_insert_with(|| json!("private"));
        }
    } else if object.get("resultType").and_then(Value::as_str) == Some("complete") {
        object.remove("resultType");
    }
    if what == Passing::Tool {
        let moved = object
            .get("structuredContent")
            .filter(|structured| !modern && !structured.is_object())
            .cloned();
        let content = object
            .entry("content")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let (Some(moved), Some(blocks)) = (moved, content.as_array_mut()) {
            let shown = blocks
                .first()
                .and_then(|block| block.get("text"))
                .and_then(Value::as_str)
                .and_then(|text| serde_json::from_str::<Value>(text).ok());
            if shown.as_ref() != Some(&moved) {
                blocks.insert(0, json!({"type": "text", "text": moved.to_string()}));
            }
            object.remove("structuredContent");
        }
    }
    answer
}

/// The answer a placeholder result carries, taken out of it.
fn carried(result: &mut ServerResult) -> Option<Value> {
    let meta = match result {
        ServerResult::CallToolResult(result) => result.meta.as_mut(),
        ServerResult::GetPromptResult(result) => result.meta.as_mut(),
        ServerResult::ReadResourceResult(result) => result.meta.as_mut(),
        ServerResult::CompleteResult(result) => result.meta.as_mut(),
        ServerResult::InputRequiredResult(result) => result.meta.as_mut(),
        _ => None,
    }?;
    meta.remove(PASSED)
}

/// The gateway as one stdio client's rmcp service: rmcp's handling of each request, with a
/// forwarded answer sent as the server wrote it.
pub(super) struct Verbatim<H>(pub(super) H);

impl<H: ServerHandler> Service<RoleServer> for Verbatim<H> {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let mut answered = Service::handle_request(&self.0, request, context).await?;
        Ok(match carried(&mut answered) {
            Some(answer) => ServerResult::CustomResult(CustomResult(answer)),
            None => answered,
        })
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        Service::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.0)
    }
}

/// The byte string only a response carrying a passed answer holds (JSON escapes nothing in
/// it, so it is found without parsing).
const MARK: &[u8] = b"\"plurnk/passed\"";

/// HTTP middleware of the gateway's `/mcp`: a JSON-RPC message whose result carries a
/// passed answer, in a JSON body or an event of a stream, is sent with the answer as its
/// result. Everything else goes through untouched, and a stream stays a stream.
pub(super) async fn swap_http(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let kind = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if kind.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        // A JSON answer is whole already (rmcp builds it in memory).
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(_) => return Response::from_parts(parts, Body::empty()),
        };
        let bytes = match swapped(&bytes) {
            Some(changed) => {
                parts.headers.remove(http::header::CONTENT_LENGTH);
                changed.into()
            }
            None => bytes,
        };
        Response::from_parts(parts, Body::from(bytes))
    } else if kind.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let state = (body.into_data_stream(), Events::default(), false);
        let stream = futures::stream::unfold(state, |(mut inner, mut events, ended)| async move {
            if ended {
                return None;
            }
            loop {
                match inner.next().await {
                    Some(Ok(chunk)) => {
                        let out = events.push(&chunk);
                        // An empty chunk would say nothing; wait for a whole event.
                        if !out.is_empty() {
                            return Some((Ok(out), (inner, events, false)));
                        }
                    }
                    Some(Err(error)) => return Some((Err(error), (inner, events, true))),
                    // What is left of an event the stream did not finish goes out as it is.
                    None if events.pending.is_empty() => return None,
                    None => {
                        let rest = std::mem::take(&mut events.pending);
                        return Some((Ok(rest.into()), (inner, events, true)));
                    }
                }
            }
        });
        Response::from_parts(parts, Body::from_stream(stream))
    } else {
        response
    }
}

/// A JSON-RPC message with its passed answer in place of its result; `None` when it carries
/// none.
fn swapped(message: &[u8]) -> Option<Vec<u8>> {
    memchr::memmem::find(message, MARK)?;
    let mut value: Value = serde_json::from_slice(message).ok()?;
    let answer = value
        .get_mut("result")?
        .get_mut("_meta")?
        .as_object_mut()?
        .remove(PASSED)?;
    value["result"] = answer;
    serde_json::to_vec(&value).ok()
}

/// An event stream passed through event by event: the bytes of an unfinished event wait
/// for the rest of it; an event whose `data` carries a passed answer is rewritten.
#[derive(Default)]
struct Events {
    pending: Vec<u8>,
}

impl Events {
    /// What of the stream can go out after `chunk`: every event it completes.
    fn push(&mut self, chunk: &[u8]) -> axum::body::Bytes {
        self.pending.extend_from_slice(chunk);
        let Some(end) = memchr::memmem::rfind(&self.pending, b"\n\n") else {
            return axum::body::Bytes::new();
        };
        let complete: Vec<u8> = self.pending.drain(..end + 2).collect();
        if memchr::memmem::find(&complete, MARK).is_none() {
            return complete.into();
        }
        let mut out = Vec::with_capacity(complete.len());
        for line in complete.split_inclusive(|byte| *byte == b'\n') {
            let swapped = line
                .strip_prefix(b"data:")
                .map(|data| data.strip_prefix(b" ").unwrap_or(data))
                .map(|data| data.strip_suffix(b"\n").unwrap_or(data))
                .and_then(swapped);
            match swapped {
                Some(data) => {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(&data);
                    out.push(b'\n');
                }
                None => out.extend_from_slice(line),
            }
        }
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_adapted_to_the_clients_revision_and_otherwise_kept() {
        let odd = json!({
            "content": [{"type": "hologram"}],
            "structuredContent": [1, 2],
            "x-vendor": 1,
        });
        let modern = adapted(odd.clone(), Passing::Tool, true);
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(modern["structuredContent"], json!([1, 2]));
        assert_eq!(modern["x-vendor"], 1);
        let legacy = adapted(odd, Passing::Tool, false);
        assert!(legacy.get("resultType").is_none());
        assert!(legacy.get("structuredContent").is_none());
        assert_eq!(
            legacy["content"],
            json!([{"type": "text", "text": "[1,2]"}, {"type": "hologram"}])
        );
        let read = adapted(json!({"contents": []}), Passing::Resource, true);
        assert_eq!(
            (&read["ttlMs"], &read["cacheScope"]),
            (&json!(0), &json!("private"))
        );
        let kept = adapted(
            json!({"contents": [], "ttlMs": 5, "resultType": "complete"}),
            Passing::Resource,
            false,
        );
        assert_eq!(kept, json!({"contents": [], "ttlMs": 5}));
        assert_eq!(
            adapted(json!({}), Passing::Tool, true)["content"],
            json!([])
        );
    }

    #[test]
    fn a_placeholder_carries_its_answer_out_of_an_event_stream_and_a_json_body() {
        let answer = json!({"content": [{"type": "hologram", "x": "\"plurnk/passed\""}], "resultType": "complete"});
        let result: rmcp::model::CallToolResult =
            placeholder(answer.clone(), Passing::Tool, true).expect("a placeholder");
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        let line = serde_json::to_vec(&message).expect("json");
        let expected = json!({"jsonrpc": "2.0", "id": 1, "result": answer});
        let body: Value = serde_json::from_slice(&swapped(&line).expect("swapped")).expect("json");
        assert_eq!(body, expected);
        // An event split anywhere comes out whole, rewritten; other events untouched.
        let mut stream = b"id: 0\ndata:\n\n".to_vec();
        stream.extend_from_slice(b"id: 1\ndata: ");
        stream.extend_from_slice(&line);
        stream.extend_from_slice(b"\n\n: keep-alive\n\n");
        let mut events = Events::default();
        let mut out = Vec::new();
        for chunk in stream.chunks(7) {
            out.extend_from_slice(&events.push(chunk));
        }
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.starts_with("id: 0\ndata:\n\nid: 1\ndata: "), "{text}");
        assert!(text.ends_with("\n\n: keep-alive\n\n"), "{text}");
        let data = text
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .expect("the data line");
        assert_eq!(serde_json::from_str::<Value>(data).expect("json"), expected);
        // What carries no passed answer is left as it is.
        assert!(swapped(br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#).is_none());
    }
}
