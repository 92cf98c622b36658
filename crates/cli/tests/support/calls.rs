//! Call patterns and guards several test binaries share.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use plurnk_mcp::{CallError, CallOptions, Host, ToolResult, Workspace};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use crate::wait::BOUND;

/// Checks `claim` every 20 ms for the whole of `window`, failing at the first check that
/// fails: a claim that something does not happen, held for as long as it would take to
/// happen. (A window, not a sleep: a violation ends the test at once.)
pub async fn holds_for(window: Duration, mut claim: impl FnMut() -> Result<(), String>) {
    let end = std::time::Instant::now() + window;
    loop {
        if let Err(violation) = claim() {
            panic!("{violation}");
        }
        if std::time::Instant::now() >= end {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Shuts the host down and asserts every connection closed cleanly.
pub async fn shutdown_clean(host: Host) {
    let report = host.shutdown().await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// The process id fixture server `alias` answers its `pid` tool with.
pub async fn pid_of(workspace: &Workspace, alias: &str) -> i32 {
    let result = workspace
        .call_tool(alias, "pid", json!({}), CallOptions::default())
        .await
        .expect("pid call");
    result.text().trim().parse().expect("pid is a number")
}

/// Starts a fixture `gate` call with this id on `alias`; the server reports it to the probe
/// and holds it until the probe releases it.
pub fn gate_call(
    workspace: &Workspace,
    alias: &str,
    id: &str,
) -> JoinHandle<Result<ToolResult, CallError>> {
    let (workspace, alias, id) = (workspace.clone(), alias.to_owned(), id.to_owned());
    tokio::spawn(async move {
        workspace
            .call_tool(&alias, "gate", json!({ "id": id }), CallOptions::default())
            .await
    })
}

/// Starts `tool` on `server` with `options`, waits until `in_flight` says the request is
/// where the test wants it (the server holds it, progress flows, a Task is being polled),
/// cancels it through its token and returns how the call settled; panics if it has not
/// settled within [`BOUND`].
pub async fn call_then_cancel(
    workspace: &Workspace,
    server: &str,
    tool: &str,
    arguments: Value,
    options: CallOptions,
    in_flight: impl Future<Output = ()>,
) -> Result<ToolResult, CallError> {
    let cancel = CancellationToken::new();
    let call = {
        let (workspace, server, tool) = (workspace.clone(), server.to_owned(), tool.to_owned());
        let options = options.with_cancel(Some(cancel.clone()));
        tokio::spawn(async move {
            workspace
                .call_tool(&server, &tool, arguments, options)
                .await
        })
    };
    tokio::time::timeout(BOUND, in_flight)
        .await
        .expect("the call got in flight");
    cancel.cancel();
    tokio::time::timeout(BOUND, call)
        .await
        .expect("the cancelled call settles")
        .expect("the call task did not panic")
}
