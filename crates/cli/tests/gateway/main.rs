//! The gateway (`plurnk-mcp serve`) driven as its clients drive it: plurnk-mcp's own host,
//! the official TypeScript and Python SDK clients, raw HTTP/1.1, a headless browser.
//!
//! # Layout
//! One binary, a module per behaviour; this file holds the setup they share.
//! - `upstreams`: a host attached to a gateway reaches every upstream through it, over
//!   HTTP and stdio, and an upstream that dies mid-call.
//! - `admission`: the bearer off loopback, unprefixed serving, bounds refused at start.
//! - `clients`: the official SDK clients at both revisions, elicitation across the gateway.
//! - `holding`: what a client may make the HTTP gateway hold (connections, bodies,
//!   sessions, listen streams, unread answers, TCP_NODELAY).
//! - `answers`: JSON or an event stream per request, the kept connection, `ping`.
//! - `status`: list changes announced, the status page in a real browser, the metrics the
//!   dashboard queries.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
use plurnk_mcp::{CallError, CallOptions, Host, HostConfig, ServerState, WorkspaceSnapshot};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::{Value, json};

#[path = "../support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "../support/calls.rs"]
mod calls;
#[path = "../support/env.rs"]
mod env;
#[path = "../support/served.rs"]
mod served;
#[path = "../support/wait.rs"]
mod wait;
use calls::{BOUND, shutdown_clean};
use env::{EXE, fixture};
use served::{
    Reply, Served, ask, connect, initialize_request, listed, mcp_request, memory_kib, modern_meta,
    modern_request, raise_nofile, raw_request, read_reply, served_fixture, sockets_of,
};

/// The configuration of these variables, connecting within 30 s.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::connecting_within(30_000, pairs)
}

/// A credential an upstream is given, and must never reach a gateway client.
const SECRET: &str = "gateway-upstream-secret-5f2e81";

fn pairs(list: &[(String, String)]) -> Vec<(&str, String)> {
    list.iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect()
}

/// The served tool names of `alias` in a snapshot of a host attached to a gateway.
fn tool_names(snapshot: &WorkspaceSnapshot, alias: &str) -> Vec<String> {
    snapshot
        .server(alias)
        .filter(|server| server.state == ServerState::Ready)
        .map(|server| server.tools.iter().map(|tool| tool.name.clone()).collect())
        .unwrap_or_default()
}

/// POSTs one 2026-07-28 JSON-RPC request and returns the response message (from a JSON
/// body or the first SSE `data:` event that is one).
fn post_json(url: &str, message: Value) -> Value {
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    // Mcp-Name carries the tool or prompt name, or a resource's URI.
    let name = message["params"]["name"]
        .as_str()
        .or_else(|| message["params"]["uri"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut headers = vec![("Mcp-Method", method.as_str())];
    if !name.is_empty() {
        headers.push(("Mcp-Name", name.as_str()));
    }
    let response = raw_post(url, &message, &headers);
    let body = response.1;
    if let Ok(value) = serde_json::from_str::<Value>(&body) {
        return value;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
        .unwrap_or_else(|| panic!("no response in {body}"))
}

/// POSTs `message` with extra headers; (status, body).
fn raw_post(url: &str, message: &Value, headers: &[(&str, &str)]) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (authority, path) = rest.split_once('/').expect("a path");
    let body = message.to_string();
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[path = "../support/browser.rs"]
mod browser;

#[path = "../support/scrape.rs"]
mod scrape;

mod admission;
mod answers;
mod clients;
mod holding;
mod status;
mod upstreams;
