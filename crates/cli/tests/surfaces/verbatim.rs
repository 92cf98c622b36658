//! Results handed on as the server wrote them: to the caller, to EXEC, through the gateway.

#[allow(unused_imports)]
use super::*;

// === results handed on as the server wrote them ===

/// A host on the fixture's `odd-results` server (stdio) as `odd`.
fn odd_results() -> HostConfig {
    config(&[
        ("PLURNK_MCP_ODD", EXE.into()),
        (
            "PLURNK_MCP_ODD_ARGS",
            json!(["fixture", "--hostile", "odd-results"]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["odd"]).to_string()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_reaches_the_caller_as_the_server_wrote_it() {
    let host = Host::start(odd_results()).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let odd = snapshot.server("odd").expect("configured");
    assert_eq!(odd.state, ServerState::Ready, "{:?}", odd.problem);

    // A content block type no revision defines; fields no revision defines, at the top and
    // in a known block: each result handed on, as JSON, exactly as written, to the caller
    // and to EXEC.
    for (tool, expected, text) in [
        ("odd", plurnk_mcp_fixture::hostile::odd_result(), "known"),
        (
            "extra",
            plurnk_mcp_fixture::hostile::extra_result(),
            "with a field of its own",
        ),
    ] {
        let called = workspace
            .call_tool("odd", tool, json!({}), CallOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
        assert_eq!(called.result, expected, "{tool}");
        assert!(!called.is_error);
        assert_eq!(called.text(), text);
        let value = exec::run(
            &workspace,
            &format!("<<EXEC[odd]({tool}):EXEC"),
            CallOptions::default(),
        )
        .await
        .unwrap_or_else(|error| panic!("{tool} through EXEC: {error}"));
        assert_eq!(value, expected, "{tool} through EXEC");
    }

    // A resource read: fields no revision defines, at the top and in a content, kept; the
    // second read (within its ttlMs) from what the host kept, as whole.
    for _ in 0..2 {
        let read = workspace
            .read_resource(
                "odd",
                plurnk_mcp_fixture::hostile::ODD_RESOURCE,
                CallOptions::default(),
            )
            .await
            .expect("the odd resource");
        assert_eq!(read, plurnk_mcp_fixture::hostile::odd_resource());
    }

    // The one refusal the specification asks for stays: a standalone blob block.
    let blob = workspace
        .call_tool("odd", "blob", json!({}), CallOptions::default())
        .await;
    assert!(
        matches!(&blob, Err(CallError::Protocol { detail, .. }) if detail.contains("standalone blob")),
        "{blob:?}"
    );
    // The server is still there for the next call.
    let echo = workspace
        .call_tool(
            "odd",
            "echo",
            json!({"text": "still"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "still");
    shutdown_clean(host).await;
}

/// One 2026-07-28 `tools/call` POSTed to a gateway; the JSON-RPC answer, from a JSON body or
/// the event of a stream that holds it.
async fn call_through_gateway(url: &str, id: u64, name: &str) -> serde_json::Value {
    let message = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "surfaces-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let body = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .json(&message)
        .send()
        .await
        .expect("the gateway answers")
        .text()
        .await
        .expect("a body");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) {
        return value;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_hands_a_result_on_as_the_server_wrote_it() {
    use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
    use plurnk_mcp_fixture::hostile::{extra_result, odd_result};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let host = Host::start(odd_results()).await.expect("host starts");
    let workspace = host.default_workspace();
    assert_eq!(
        workspace.snapshot().server("odd").map(|s| s.state),
        Some(ServerState::Ready)
    );

    // A 2026-07-28 client over Streamable HTTP: each answer as the server wrote it, with
    // the resultType its revision requires.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let served = tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        listener,
        HttpOptions::default(),
        stop.clone(),
    ));
    for (id, tool, mut expected) in [
        (1, "odd_odd", odd_result()),
        (2, "odd_extra", extra_result()),
    ] {
        expected["resultType"] = json!("complete");
        let answer = call_through_gateway(&url, id, tool).await;
        assert_eq!(answer["result"], expected, "{tool}: {answer}");
    }
    let blob = call_through_gateway(&url, 3, "odd_blob").await;
    assert!(
        blob["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("standalone blob")),
        "{blob}"
    );

    // A 2025-11-25 client over stdio: the same answers, without the resultType its revision
    // does not have.
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let session = tokio::spawn(
        Gateway::new(workspace.clone(), Naming::Prefixed).serve_io(server_read, server_write),
    );
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(client_read).lines();
    let mut send = async |message: serde_json::Value| {
        client_write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "surfaces-test", "version": "1"}}}),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    for (id, tool) in [(1, "odd_odd"), (2, "odd_extra")] {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": {}}}))
        .await;
    }
    let mut answers = BTreeMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(BOUND, lines.next_line())
            .await
            .expect("the gateway answers in time")
            .expect("read")
            .expect("a line");
        let message: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message["result"].clone());
        }
    }
    assert_eq!(answers[&1], odd_result());
    assert_eq!(answers[&2], extra_result());
    drop(lines);
    drop(client_write);
    let _ = tokio::time::timeout(BOUND, session).await;
    stop.cancel();
    let _ = served.await;
    shutdown_clean(host).await;
}
