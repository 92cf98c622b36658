//! How each answer goes out: JSON unless the request needs a stream, the connection kept;
//! a removed `ping`.

#[allow(unused_imports)]
use super::*;

/// A legacy `initialize` declaring `capabilities`.
fn initialize_with(host: &str, capabilities: Value) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "gateway-test", "version": "1"}}});
    mcp_request(host, &body, &[])
}

/// The JSON-RPC answer of a reply, from a JSON body or its event stream.
fn answer_of(reply: &Reply) -> Value {
    serde_json::from_str::<Value>(&reply.body)
        .ok()
        .or_else(|| {
            reply
                .body
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some() && message.get("method").is_none())
        })
        .unwrap_or_else(|| panic!("no answer in {reply:?}"))
}

#[test]
fn each_answer_is_json_unless_its_request_needs_a_stream_and_the_connection_is_kept() {
    use std::io::Write;
    let (_served, authority) = served_fixture(&["--unprefixed"], None);
    // Every exchange below on one connection: a JSON answer keeps it.
    let mut stream = connect(&authority, None, false);
    let mut exchange = |request: Vec<u8>| {
        stream.write_all(&request).expect("send");
        let reply = read_reply(&mut stream).expect("an answer");
        assert!(matches!(reply.status, 200 | 202), "{reply:?}");
        assert_ne!(reply.header("connection"), Some("close"), "{reply:?}");
        reply
    };
    let kind = |reply: &Reply| reply.header("content-type").unwrap_or_default().to_owned();
    let echo = json!({"name": "echo", "arguments": {"text": "hi"}});
    let counted = json!({"name": "count", "arguments": {"steps": 2, "delay_ms": 1},
                         "_meta": {"progressToken": "p"}});

    // 2026-07-28: a call and a list are JSON; a call whose server reports progress a stream.
    let reply = exchange(modern_request(&authority, "tools/call", echo.clone()));
    assert!(kind(&reply).starts_with("application/json"), "{reply:?}");
    assert_eq!(answer_of(&reply)["result"]["content"][0]["text"], "hi");
    let reply = exchange(modern_request(&authority, "tools/list", json!({})));
    assert!(kind(&reply).starts_with("application/json"), "{reply:?}");
    let mut progress = counted.clone();
    progress["_meta"] = modern_meta();
    progress["_meta"]["progressToken"] = json!("p");
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": progress});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "count"),
    ];
    let reply = exchange(mcp_request(&authority, &body, &headers));
    assert!(kind(&reply).starts_with("text/event-stream"), "{reply:?}");
    assert!(reply.body.contains("notifications/progress"), "{reply:?}");
    assert_eq!(
        answer_of(&reply)["result"]["content"][0]["text"],
        "counted 2"
    );

    // 2025-11-25, a client that declared no elicitation: the call and the list are JSON, the
    // call with progress a stream.
    let reply = exchange(initialize_with(&authority, json!({})));
    let session = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        exchange(mcp_request(&authority, &initialized, &in_session)).status,
        202
    );
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": echo});
    let reply = exchange(mcp_request(&authority, &call, &in_session));
    assert!(kind(&reply).starts_with("application/json"), "{reply:?}");
    assert_eq!(answer_of(&reply)["result"]["content"][0]["text"], "hi");
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let reply = exchange(mcp_request(&authority, &list, &in_session));
    assert!(kind(&reply).starts_with("application/json"), "{reply:?}");
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": counted});
    let reply = exchange(mcp_request(&authority, &call, &in_session));
    assert!(kind(&reply).starts_with("text/event-stream"), "{reply:?}");
    assert!(reply.body.contains("notifications/progress"), "{reply:?}");

    // A session whose client declared elicitation: a call may be asked a question on the
    // way, so it is a stream; a list is not.
    let reply = exchange(initialize_with(
        &authority,
        json!({"elicitation": {"form": {}}}),
    ));
    let session = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(
        exchange(mcp_request(&authority, &initialized, &in_session)).status,
        202
    );
    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": "asked"}}});
    let reply = exchange(mcp_request(&authority, &call, &in_session));
    assert!(kind(&reply).starts_with("text/event-stream"), "{reply:?}");
    assert_eq!(answer_of(&reply)["result"]["content"][0]["text"], "asked");
    let reply = exchange(mcp_request(&authority, &list, &in_session));
    assert!(kind(&reply).starts_with("application/json"), "{reply:?}");
}

#[test]
fn a_modern_clients_ping_is_refused_as_removed_and_a_sessions_answered() {
    use std::io::{BufRead, Write};
    // Over stdio: a 2026-07-28 client's ping (its request `_meta` says the revision) is
    // method-not-found.
    let mut env = fixture("fx", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx"]).to_string()));
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-ping-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let mut child = Command::new(EXE)
        .arg("--state")
        .arg(&state)
        .args(["serve", "--unprefixed"])
        .env_clear()
        .envs(env.iter().cloned())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("plurnk-mcp serve over stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": modern_meta()}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": modern_meta()}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta()}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": modern_meta()}}),
    ] {
        writeln!(stdin, "{message}").expect("send");
    }
    let answers: Vec<Value> = (0..4)
        .map(|_| {
            let line = lines.next().expect("an answer").expect("a line");
            serde_json::from_str(&line).expect("JSON")
        })
        .collect();
    let answer = |id: u64| {
        answers
            .iter()
            .find(|answer| answer["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id} in {answers:?}"))
    };
    // Between `server/discover` and the first request that names its revision too, where
    // rmcp's stdio server has chosen no lifecycle yet.
    assert_eq!(answer(1)["error"]["code"], -32601, "{answers:?}");
    assert_eq!(answer(3)["error"]["code"], -32601, "{answers:?}");
    drop(stdin);
    let _ = child.wait();

    // Over HTTP, the same; a 2025-11-25 session's ping is answered.
    let (_served, authority) = served_fixture(&["--unprefixed"], None);
    let reply = ask(
        &authority,
        None,
        &modern_request(&authority, "ping", json!({})),
    );
    let answer = answer_of(&reply);
    assert_eq!(answer["error"]["code"], -32601, "{reply:?}");
    let mut stream = connect(&authority, None, false);
    stream
        .write_all(&initialize_with(&authority, json!({})))
        .expect("send");
    let reply = read_reply(&mut stream).expect("an answer");
    let session = reply
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    stream
        .write_all(&mcp_request(&authority, &initialized, &in_session))
        .expect("send");
    read_reply(&mut stream).expect("an answer");
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    stream
        .write_all(&mcp_request(&authority, &ping, &in_session))
        .expect("send");
    let answer = answer_of(&read_reply(&mut stream).expect("an answer"));
    assert_eq!(answer["result"], json!({}), "{answer}");
}
