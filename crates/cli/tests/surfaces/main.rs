//! The surfaces beyond tools against the fixture and the third-party peers: resources,
//! prompts, completion, caching, list changes, resource updates, progress, MRTR, elicitation,
//! Tasks, the EXEC bridge and results handed on whole.
//!
//! # Layout
//! One binary, a module per behaviour; this file holds the setup they share.
//! - `peers`: server-everything and the Python SDK peer over stdio and HTTP: resources,
//!   prompts, completion, progress, content.
//! - `input`: elicitation and MRTR rounds, a legacy server's questions, Tasks, one deadline.
//! - `freshness`: list changes, ttls, resource updates, discover answers kept whole.
//! - `bridge`: the EXEC bridge.
//! - `verbatim`: results handed on as the server wrote them, through the host and the gateway.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plurnk_mcp::{
    CallError, CallOptions, CompletionRef, Effect, Elicitation, ElicitationAnswer, Host,
    HostConfig, HostEvent, Progress, ServerState, TelemetryEvent, exec,
};
use serde_json::json;

#[path = "../support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "../support/calls.rs"]
mod calls;
#[path = "../support/env.rs"]
mod env;
#[path = "../support/wait.rs"]
mod wait;
use calls::{BOUND, call_then_cancel, shutdown_clean};
use env::EXE;

/// The configuration of these variables, connecting within 30 s.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::connecting_within(30_000, pairs)
}

/// Collects progress reports in order.
fn recorder() -> (Arc<Mutex<Vec<Progress>>>, plurnk_mcp::ProgressSink) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: plurnk_mcp::ProgressSink = Arc::new(move |progress| {
        if let Ok(mut seen) = sink_seen.lock() {
            seen.push(progress);
        }
    });
    (seen, sink)
}

/// Accepts every request of `interaction` with the same `content`.
fn accept_each(
    interaction: &plurnk_mcp::Interaction,
    content: serde_json::Value,
) -> BTreeMap<String, ElicitationAnswer> {
    interaction
        .requests
        .keys()
        .map(|key| {
            (
                key.clone(),
                ElicitationAnswer::Accept {
                    content: content.as_object().cloned(),
                },
            )
        })
        .collect()
}

fn python_surfaces() -> HostConfig {
    let peers = peers();
    config(&[
        ("PLURNK_MCP_PY", peers.python.clone()),
        (
            "PLURNK_MCP_PY_ARGS",
            json!([peer_script("python_surfaces.py")]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["py"]).to_string()),
    ])
}

mod bridge;
mod freshness;
mod input;
mod peers;
mod verbatim;
