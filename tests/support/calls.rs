//! Call patterns several test binaries share.

use std::time::Duration;

use plurnk_mcp::{CallError, CallOptions, ToolResult, Workspace};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Starts `tool` on `server`, cancels it through its token after `after`, and returns how
/// the call settled; panics if it has not settled 5 s later.
pub async fn call_then_cancel(
    workspace: &Workspace,
    server: &str,
    tool: &str,
    arguments: Value,
    after: Duration,
) -> Result<ToolResult, CallError> {
    let cancel = CancellationToken::new();
    let call = {
        let (workspace, server, tool) = (workspace.clone(), server.to_owned(), tool.to_owned());
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let options = CallOptions {
                cancel: Some(cancel),
                ..CallOptions::default()
            };
            workspace
                .call_tool(&server, &tool, arguments, options)
                .await
        })
    };
    tokio::time::sleep(after).await;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the cancelled call settles")
        .expect("the call task did not panic")
}
