//! The host against real fixture servers: child processes over stdio and Streamable HTTP
//! servers on 127.0.0.1:0. Every test bounds its waits and stops what it started.
//!
//! # Layout
//! One binary, a module per behaviour; this file holds the setup they share.
//! - `lifecycle`: start, add and remove, enable and disable, shutdown.
//! - `connecting`: a slow server's phases, an attempt out of time, what a server recovered
//!   from at start-up, a host that connects only some servers or declares no elicitation.
//! - `crashes`: kill -9, panics, crash loops, late reports and attempts after a crash.
//! - `catalog`: filters, pagination, listing bounds, ttl and list-change refresh.
//! - `load`: how calls settle, and changes that wait for the calls in flight.
//! - `transports`: negotiation over stdio and HTTP, an HTTP peer's headers and drops.
//! - `metrics`: the Prometheus endpoint (the one test that installs the recorder).

use std::time::Duration;

use plurnk_mcp::{CallError, CallOptions, HostOptions, RestartPolicy, Workspace};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

#[path = "../../crates/cli/tests/support/calls.rs"]
mod calls;
#[path = "../../crates/cli/tests/support/env.rs"]
mod env;
#[path = "../../crates/cli/tests/support/peers.rs"]
mod peers;
#[path = "../../crates/cli/tests/support/processes.rs"]
mod processes;
#[path = "../../crates/cli/tests/support/scrape.rs"]
mod scrape;
#[path = "../../crates/cli/tests/support/wait.rs"]
mod wait;

mod catalog;
mod connecting;
mod crashes;
mod lifecycle;
mod load;
mod metrics;
mod transports;

use calls::{BOUND, gate_call};

fn fast_restarts() -> HostOptions {
    HostOptions::default().with_restart(
        RestartPolicy::default()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(500)),
    )
}

/// Waits, within `BOUND`, until `alias` refuses a new call as closing: its disable is under
/// way. Panics with the last answer if it never is.
async fn closing(workspace: &Workspace, alias: &str) {
    let last = std::cell::RefCell::new(String::new());
    let closing = wait::until_async(BOUND, || async {
        let refused = workspace
            .call_tool(alias, "echo", json!({"text": "x"}), CallOptions::default())
            .await;
        *last.borrow_mut() = format!("{refused:?}");
        matches!(refused, Err(CallError::Closing { .. }))
    })
    .await;
    assert!(closing, "the disable never began: {}", last.borrow());
}

/// A gate call on `alias` that reached the server, or is still on its way.
type GateCall = tokio::task::JoinHandle<Result<plurnk_mcp::ToolResult, CallError>>;

/// Sends gate calls to `alias` until one does not reach the server within half a second:
/// it waits behind a pending change. Returns the calls that reached the server (held at
/// their gates), and the id and the call of the one that waits.
async fn queue_behind_a_change(
    workspace: &Workspace,
    probe: &Probe,
    alias: &str,
) -> (Vec<GateCall>, String, GateCall) {
    let mut beside = Vec::new();
    loop {
        let id = format!("next-{}", beside.len());
        let call = gate_call(workspace, alias, &id);
        let reached = probe
            .until(Duration::from_millis(500), |events| {
                events.iter().any(|e| e.id == id)
            })
            .await;
        if !reached {
            return (beside, id, call);
        }
        beside.push(call);
        assert!(beside.len() < 40, "no call ever waited behind the change");
    }
}

/// Whether the fixture `lists` publishes the tool its `announce` adds.
fn has_extra(snapshot: &plurnk_mcp::WorkspaceSnapshot) -> bool {
    snapshot
        .server("lists")
        .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only probes for existence.
    unsafe { libc::killpg(pgid, 0) == 0 }
}
