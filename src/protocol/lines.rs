//! Newline-delimited JSON-RPC on a byte stream pair, the framing of stdio servers, tool
//! sources and in-process servers, read by the host rather than by rmcp's `AsyncRwTransport`
//! so that a result can reach its caller as the server wrote it.
//!
//! rmcp reads every message into its typed union, whose result structs keep only the fields
//! they know: an extra top-level field of a tool result, or a field of a content block, is
//! dropped, and a content block of a type rmcp does not know makes the whole result
//! unreadable as a tool result. The specification asks a host to preserve results without
//! reconstructing them (§mcp-core-matrix, Base). So a request the caller marks [`Verbatim`]
//! has its response handed over as `ServerResult::CustomResult` holding the `result`
//! object exactly as parsed from the line, and everything else is read as rmcp reads it.
//! The marked response is parsed once, into a `serde_json::Value`, which is what the caller
//! returns: no typed round trip.

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, CustomResult, ErrorData, GetExtensions,
    JsonRpcMessage, NumberOrString, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Marks a request (in its extensions, which are never sent) whose result the caller takes
/// as the server wrote it: on a [`Lines`] transport its response arrives as
/// `ServerResult::CustomResult`. Other transports ignore the mark and answer typed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verbatim;

/// A UTF-8 byte order mark, which a line may start with (RFC 8259 §8.1 lets a reader skip it).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The read buffer of a connection. Every idle connection holds it, so it is sized for the
/// answers most calls get (a line longer than this is gathered over several reads), not for
/// the largest: 8 KiB, tokio's default, is a tenth of what a whole attachment holds.
const READ_BUFFER: usize = 2 * 1024;

/// The longest line whose buffer is kept for the next one. A longer line (a catalog listed,
/// a large result) gets a buffer of its own that goes with it, so an idle connection does not
/// hold the largest answer it ever read.
const KEPT_LINE: usize = 2 * 1024;

/// The client side of one newline-delimited connection.
pub(crate) struct Lines<R, W> {
    read: BufReader<R>,
    /// The line read so far: a read cancelled mid-line (rmcp polls `receive` inside a
    /// `select!`) resumes it.
    line: Vec<u8>,
    max_line: usize,
    /// Dropping the tail of a line that passed `max_line`, until its newline.
    discarding: bool,
    /// Shared with the futures `send` returns, which write after `send` returned; `None`
    /// once closed (the writer dropped: a child sees the end of its input).
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    /// The ids of requests sent [`Verbatim`] and not answered yet. `send` and `receive`
    /// both take `&mut self` and rmcp calls `send` before it writes, so an id is here before
    /// its response can be read. Bounded by the requests in flight: an id leaves with its
    /// response, its error or its cancellation.
    verbatim: HashSet<RequestId>,
    /// An `Invalid Request` error owed to the server for a request that could not be read,
    /// written before the next line is read.
    owed_error: Option<RequestId>,
}

impl<R, W> Lines<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// A transport reading `read` and writing `write`; a line longer than `max_line` bytes is
    /// dropped whole (as rmcp's transport does; the host's `LineLimit` in front of `read` cuts
    /// the connection before that, and says why).
    pub(crate) fn new(read: R, write: W, max_line: usize) -> Self {
        Self {
            read: BufReader::with_capacity(READ_BUFFER, read),
            line: Vec::new(),
            max_line,
            discarding: false,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            verbatim: HashSet::new(),
            owed_error: None,
        }
    }

    /// Reads up to the next newline into `self.line`: `Some(true)` a whole line, `Some(false)`
    /// a line dropped for its length, `None` the end of the stream (or a read error).
    async fn read_line(&mut self) -> Option<bool> {
        loop {
            let (consumed, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) if !available.is_empty() => available,
                    Ok(_) => return None,
                    Err(error) => {
                        tracing::debug!("the server's output could not be read: {error}");
                        return None;
                    }
                };
                let newline = memchr::memchr(b'\n', available);
                let take = newline.map_or(available.len(), |at| at + 1);
                let done = if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    None
                } else if self.line.len().saturating_add(take) > self.max_line {
                    self.line.clear();
                    self.discarding = newline.is_none();
                    Some(false)
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    newline.map(|_| true)
                };
                (take, done)
            };
            self.read.consume(consumed);
            if let Some(done) = done {
                return Some(done);
            }
        }
    }

    /// Notes what an outgoing message means for the responses to come.
    fn note_sent(&mut self, message: &ClientJsonRpcMessage) {
        match message {
            JsonRpcMessage::Request(request)
                if request.request.extensions().get::<Verbatim>().is_some() =>
            {
                self.verbatim.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.verbatim.remove(id);
                }
            }
            _ => {}
        }
    }

    /// One line as a message: `None` to skip it.
    fn parse(&mut self, line: &[u8]) -> Option<ServerJsonRpcMessage> {
        let line = line.strip_prefix(BOM).unwrap_or(line);
        if self.verbatim.is_empty() {
            return match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
                Ok(message) => Some(message),
                Err(error) => self.unreadable(line, error),
            };
        }
        // A response to a verbatim request is parsed this once; anything else read while
        // one is awaited is read from the parsed value.
        let mut value = match serde_json::from_slice::<Value>(line) {
            Ok(value) => value,
            Err(error) => return self.unreadable(line, error),
        };
        if let Some(id) = self.verbatim_response(&value)
            && let Some(result) = value.as_object_mut().and_then(|m| m.remove("result"))
        {
            return Some(JsonRpcMessage::response(
                ServerResult::CustomResult(CustomResult(result)),
                id,
            ));
        }
        if value.get("method").is_none()
            && let Some(id) = value.get("id").and_then(request_id)
        {
            // An error answers a verbatim request too. (A server's own requests have ids
            // of their own, which say nothing of ours.)
            self.verbatim.remove(&id);
        }
        match serde_json::from_value::<ServerJsonRpcMessage>(value) {
            Ok(message) => Some(message),
            Err(error) => self.unreadable(line, error),
        }
    }

    /// The id of `value` when it is a result for a verbatim request (taken out of the set).
    fn verbatim_response(&mut self, value: &Value) -> Option<RequestId> {
        let object = value.as_object()?;
        if !object.contains_key("result") || object.contains_key("method") {
            return None;
        }
        let id = request_id(object.get("id")?)?;
        self.verbatim.remove(&id).then_some(id)
    }

    /// What is done with a line that is not a message rmcp can read, as rmcp's own
    /// transport does: text that is not JSON is ignored (answering it could start an error
    /// storm with a peer that echoes); a notification is ignored (JSON-RPC answers none); a
    /// request is answered `Invalid Request`.
    fn unreadable(
        &mut self,
        line: &[u8],
        error: serde_json::Error,
    ) -> Option<ServerJsonRpcMessage> {
        // serde's message can quote the server's own text: scrubbed and cut like any.
        tracing::debug!(
            "an unreadable message from the server was skipped: {}",
            crate::redact::scrub_capped(&error.to_string(), crate::redact::SHOWN_CHARS)
        );
        if !error.is_data() {
            return None;
        }
        if let Ok(value) = serde_json::from_slice::<Value>(line)
            && value.get("method").is_some()
            && let Some(id) = value.get("id").and_then(request_id)
        {
            self.owed_error = Some(id);
        }
        None
    }

    /// Writes the `Invalid Request` error owed, if any; `false` when the stream is closed.
    async fn pay_owed_error(&mut self) -> bool {
        let Some(id) = self.owed_error.take() else {
            return true;
        };
        let error: TxJsonRpcMessage<RoleClient> = JsonRpcMessage::error(
            ErrorData::invalid_request("Invalid request", None),
            Some(id),
        );
        write_message(&self.write, &error).await.is_ok()
    }
}

/// A JSON-RPC id as rmcp holds it.
fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(number) => number.as_i64().map(NumberOrString::Number),
        Value::String(text) => Some(NumberOrString::String(Arc::from(text.as_str()))),
        _ => None,
    }
}

/// Writes one message and its newline, and flushes.
async fn write_message<W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<Option<W>>,
    message: &ClientJsonRpcMessage,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    let mut write = write.lock().await;
    let Some(write) = write.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    write.write_all(&bytes).await?;
    write.flush().await
}

impl<R, W> Transport<RoleClient> for Lines<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.note_sent(&item);
        let write = self.write.clone();
        async move { write_message(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if !self.pay_owed_error().await {
                return None;
            }
            match self.read_line().await? {
                true => {}
                false => {
                    tracing::error!(
                        max_line = self.max_line,
                        "a message from the server exceeded the line bound and was dropped"
                    );
                    continue;
                }
            }
            let line = std::mem::take(&mut self.line);
            let trimmed = line.strip_suffix(b"\n").unwrap_or(&line);
            let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
            let parsed = if trimmed.is_empty() {
                None
            } else {
                self.parse(trimmed)
            };
            // Keep the buffer's capacity for the next line, unless the line was a long one.
            if line.capacity() <= KEPT_LINE {
                self.line = line;
                self.line.clear();
            }
            if let Some(message) = parsed {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    fn call(id: i64, verbatim: bool) -> ClientJsonRpcMessage {
        let mut request =
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("odd")));
        if verbatim {
            request.extensions_mut().insert(Verbatim);
        }
        JsonRpcMessage::request(request, NumberOrString::Number(id))
    }

    /// A transport over in-memory pipes: what the test writes is what the server said.
    fn pair() -> (
        Lines<tokio::io::DuplexStream, tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
    ) {
        let (server_out, client_in) = tokio::io::duplex(1 << 16);
        let (client_out, server_in) = tokio::io::duplex(1 << 16);
        (
            Lines::new(client_in, client_out, 1 << 20),
            server_out,
            server_in,
        )
    }

    #[tokio::test]
    async fn a_verbatim_requests_result_arrives_as_written_and_others_typed() {
        let (mut lines, mut server, mut sent) = pair();
        let odd = json!({
            "content": [{"type": "hologram", "frames": 3}, {"type": "text", "text": "t", "x": 1}],
            "x-vendor": {"kept": true},
        });
        lines.send(call(1, true)).await.expect("sent");
        lines.send(call(2, false)).await.expect("sent");
        let mut written = vec![0u8; 4096];
        let n = sent.read(&mut written).await.expect("read");
        assert!(!String::from_utf8_lossy(&written[..n]).contains("Verbatim"));
        let plain = json!({"content": [{"type": "text", "text": "t"}], "x-vendor": 1});
        for (id, result) in [(1, &odd), (2, &plain)] {
            let line = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            server
                .write_all(format!("{line}\n").as_bytes())
                .await
                .expect("write");
        }
        let Some(JsonRpcMessage::Response(first)) = lines.receive().await else {
            panic!("a response");
        };
        match first.result {
            ServerResult::CustomResult(CustomResult(value)) => assert_eq!(value, odd),
            other => panic!("not verbatim: {other:?}"),
        }
        assert!(lines.verbatim.is_empty(), "the id left with its response");
        // The unmarked request gets rmcp's typed reading, as rmcp's own transport gives it.
        let Some(JsonRpcMessage::Response(second)) = lines.receive().await else {
            panic!("a response");
        };
        assert!(matches!(second.result, ServerResult::CallToolResult(_)));
    }

    #[tokio::test]
    async fn a_cancelled_or_failed_verbatim_request_leaves_nothing_behind() {
        let (mut lines, mut server, _sent) = pair();
        lines.send(call(7, true)).await.expect("sent");
        lines.send(call(8, true)).await.expect("sent");
        assert_eq!(lines.verbatim.len(), 2);
        let cancel: ClientJsonRpcMessage = JsonRpcMessage::notification(
            ClientNotification::CancelledNotification(rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(Some(NumberOrString::Number(7)), None),
            )),
        );
        lines.send(cancel).await.expect("sent");
        let error = json!({"jsonrpc": "2.0", "id": 8, "error": {"code": -1, "message": "no"}});
        server
            .write_all(format!("{error}\n").as_bytes())
            .await
            .expect("write");
        assert!(matches!(
            lines.receive().await,
            Some(JsonRpcMessage::Error(_))
        ));
        assert!(lines.verbatim.is_empty());
    }

    #[tokio::test]
    async fn lines_that_are_not_messages_are_skipped_and_a_bad_request_is_answered() {
        let (mut lines, mut server, mut sent) = pair();
        // Not JSON; empty; a request whose method is no string; a malformed notification;
        // then, behind a byte order mark and ending in CRLF, a notification.
        let input = "not json\n\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":7}\n\
                     {\"jsonrpc\":\"2.0\",\"method\":9}\n\
                     \u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\r\n";
        server.write_all(input.as_bytes()).await.expect("write");
        let bound = std::time::Duration::from_secs(10);
        let received = tokio::time::timeout(bound, lines.receive()).await;
        assert!(
            matches!(received, Ok(Some(JsonRpcMessage::Notification(_)))),
            "{received:?}"
        );
        drop(server);
        assert!(matches!(
            tokio::time::timeout(bound, lines.receive()).await,
            Ok(None)
        ));
        lines.close().await.expect("closed");
        let mut written = String::new();
        tokio::time::timeout(bound, sent.read_to_string(&mut written))
            .await
            .expect("the writer was closed")
            .expect("read");
        // One answer, for the request only.
        let answer: Value = serde_json::from_str(written.trim()).expect("one JSON line");
        assert_eq!(answer["id"], json!(5));
        assert_eq!(answer["error"]["code"], json!(-32600));
    }

    #[tokio::test]
    async fn a_line_past_the_bound_is_dropped_and_the_next_one_read() {
        let (client_in, mut server) = tokio::io::duplex(1 << 16);
        let (client_out, _sent) = tokio::io::duplex(1 << 16);
        let mut lines = Lines::new(client_in, client_out, 64);
        let long = format!("{}\n", "x".repeat(200));
        let next = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";
        server.write_all(long.as_bytes()).await.expect("write");
        server.write_all(next.as_bytes()).await.expect("write");
        assert!(matches!(
            lines.receive().await,
            Some(JsonRpcMessage::Notification(_))
        ));
    }
}
