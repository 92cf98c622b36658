//! `tools/call`: one request with a deadline, caller cancellation and connection loss.

use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::model::{CallError, ToolResult};

/// A cheap, cloneable handle that runs calls on one connection; many run at once.
#[derive(Clone)]
pub(crate) struct CallPeer {
    alias: String,
    peer: Peer<RoleClient>,
    lost: CancellationToken,
}

impl CallPeer {
    pub(super) fn new(alias: String, peer: Peer<RoleClient>, lost: CancellationToken) -> Self {
        Self { alias, peer, lost }
    }

    /// Calls `tool` and settles with its result or a typed error. Never hangs: the deadline,
    /// the caller's `cancel` and the loss of the connection each end it, and the first two
    /// also cancel the request on the wire.
    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|error| self.map_error(tool, error))?;
        let id = handle.id.clone();
        let response = tokio::select! {
            biased;
            response = handle.await_response() => response,
            () = cancel.cancelled() => {
                let _ = self
                    .peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("cancelled by the caller".into()),
                    ))
                    .await;
                return Err(CallError::Cancelled {
                    alias: self.alias.clone(),
                    tool: tool.to_owned(),
                });
            }
            () = self.lost.cancelled() => {
                return Err(CallError::ConnectionLost {
                    alias: self.alias.clone(),
                    tool: tool.to_owned(),
                    detail: "the transport closed".into(),
                });
            }
        };
        match response {
            Ok(ServerResult::CallToolResult(result)) => {
                let is_error = result.is_error == Some(true);
                let result = serde_json::to_value(&result).map_err(|error| CallError::Protocol {
                    alias: self.alias.clone(),
                    tool: tool.to_owned(),
                    detail: format!("the result could not be represented as JSON: {error}"),
                })?;
                Ok(ToolResult { is_error, result })
            }
            Ok(ServerResult::InputRequiredResult(_)) => Err(CallError::Protocol {
                alias: self.alias.clone(),
                tool: tool.to_owned(),
                detail: "the server asked for input (input_required), which this host does not fulfil yet".into(),
            }),
            Ok(ServerResult::CreateTaskResult(_)) => Err(CallError::Protocol {
                alias: self.alias.clone(),
                tool: tool.to_owned(),
                detail: "the server answered with a Task, which this host does not drive yet".into(),
            }),
            Ok(_) => Err(CallError::Protocol {
                alias: self.alias.clone(),
                tool: tool.to_owned(),
                detail: "the answer is not a tools/call result".into(),
            }),
            Err(error) => Err(self.map_error(tool, error)),
        }
    }

    /// A transport that cannot carry a request any more is a lost connection: say so on
    /// the shared token, so the attachment reconnects instead of failing every later call.
    /// This is how a dropped HTTP peer is noticed, since a stateless HTTP transport has no
    /// stream whose end would tell.
    fn transport_failed(&self) {
        self.lost.cancel();
    }

    fn map_error(&self, tool: &str, error: ServiceError) -> CallError {
        let alias = self.alias.clone();
        let tool = tool.to_owned();
        match error {
            ServiceError::McpError(data) => CallError::Remote {
                alias,
                tool,
                code: data.code.0,
                message: data.message.to_string(),
                data: data.data,
            },
            ServiceError::Timeout { timeout } => CallError::Timeout {
                alias,
                tool,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            },
            ServiceError::Cancelled { .. } => CallError::Cancelled { alias, tool },
            ServiceError::TransportClosed => {
                self.transport_failed();
                CallError::ConnectionLost {
                    alias,
                    tool,
                    detail: "the transport closed".into(),
                }
            }
            ServiceError::TransportSend(error) => {
                self.transport_failed();
                CallError::ConnectionLost {
                    alias,
                    tool,
                    // The transport error may carry the URL; only its innermost cause goes out.
                    detail: format!("the request could not be sent ({})", error_kind(&error)),
                }
            }
            other => CallError::Protocol {
                alias,
                tool,
                detail: other.to_string(),
            },
        }
    }
}

fn error_kind(error: &dyn std::error::Error) -> String {
    // Walk to the innermost cause: that is the io error or the HTTP status, which carries
    // no URL or header.
    let mut inner: &dyn std::error::Error = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}
