//! How the host reaches a server: protocol negotiation over stdio and Streamable HTTP, the
//! credentials and headers an HTTP server is sent, and an HTTP peer that drops and returns.

use std::time::Duration;

use plurnk_mcp::{CallError, CallOptions, Host, ServerState, TransportKind};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::calls::{BOUND, shutdown_clean};
use crate::env::Env;
use crate::fast_restarts;

/// An in-process Streamable HTTP fixture on 127.0.0.1:0.
struct HttpFixture {
    url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl HttpFixture {
    async fn start(name: &str, legacy: bool) -> Self {
        Self::start_with(plurnk_mcp_fixture::FixtureOptions {
            legacy,
            name: name.into(),
            ..Default::default()
        })
        .await
    }

    async fn start_with(options: plurnk_mcp_fixture::FixtureOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let stop = CancellationToken::new();
        let task = tokio::spawn(plurnk_mcp_fixture::serve_http(
            listener,
            options,
            stop.clone(),
        ));
        Self { url, stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_and_legacy_negotiate_over_stdio_and_http() {
    let modern_http = HttpFixture::start("modern-http", false).await;
    let legacy_http = HttpFixture::start("legacy-http", true).await;
    let config = Env::new()
        .stdio("modern-stdio", &[])
        .stdio("legacy-stdio", &["--legacy"])
        .set("PLURNK_MCP_MODERN_HTTP", modern_http.url.clone())
        .set("PLURNK_MCP_LEGACY_HTTP", legacy_http.url.clone())
        .enable(&["modern-stdio", "legacy-stdio", "modern-http", "legacy-http"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let expected = [
        ("modern-stdio", TransportKind::Stdio, "2026-07-28", true),
        ("legacy-stdio", TransportKind::Stdio, "2025-11-25", false),
        ("modern-http", TransportKind::Http, "2026-07-28", true),
        ("legacy-http", TransportKind::Http, "2025-11-25", false),
    ];
    for (alias, transport, revision, modern) in expected {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
        assert_eq!(server.transport, transport, "{alias}");
        let negotiated = server.negotiated.as_ref().expect("negotiated");
        assert_eq!(negotiated.revision, revision, "{alias}");
        assert_eq!(negotiated.modern, modern, "{alias}");
        assert_eq!(negotiated.name.as_deref(), Some(alias), "{alias} identity");
        assert_eq!(
            negotiated.instructions.as_deref(),
            Some("Fixture server for plurnk-mcp tests."),
            "{alias} instructions"
        );
        let mut names: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "add", "announce", "count", "crash", "echo", "fail", "gate", "headers", "lists",
                "pid", "reveal", "sleep"
            ],
            "{alias}"
        );
        let echo = workspace
            .call_tool(
                alias,
                "echo",
                json!({"text": alias}),
                CallOptions::default(),
            )
            .await
            .expect("echo");
        assert_eq!(echo.text(), alias);
        assert!(!echo.is_error);
    }
    shutdown_clean(host).await;
    modern_http.stop().await;
    legacy_http.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_and_headers_reach_the_server_and_never_leak() {
    let guarded = HttpFixture::start_with(plurnk_mcp_fixture::FixtureOptions {
        name: "guarded".into(),
        bearer: Some("tok-123456789".into()),
        ..Default::default()
    })
    .await;
    let config = Env::new()
        .set("TOKEN", "tok-123456789")
        .set("WRONG_TOKEN", "tok-wrong-987654")
        .set("TRACE", "trace-789")
        .set("PLURNK_MCP_GOOD", guarded.url.clone())
        .set("PLURNK_MCP_GOOD_BEARER", "${TOKEN}")
        .set(
            "PLURNK_MCP_GOOD_HEADERS",
            json!({"X-Trace": "${TRACE}"}).to_string(),
        )
        .set("PLURNK_MCP_WRONG", guarded.url.clone())
        .set("PLURNK_MCP_WRONG_BEARER", "${WRONG_TOKEN}")
        .set("PLURNK_MCP_NONE", guarded.url.clone())
        .enable(&["good", "wrong", "none"])
        .config();
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("tok-123456789") && !debug.contains("trace-789"),
        "{debug}"
    );
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    assert_eq!(
        snapshot.server("good").map(|s| s.state),
        Some(ServerState::Ready)
    );
    for alias in ["wrong", "none"] {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        let detail = server
            .problem
            .as_ref()
            .map(|p| p.detail.clone())
            .unwrap_or_default();
        assert!(
            detail.contains(&format!("server \"{alias}\" (http)")),
            "{detail}"
        );
        assert!(
            !detail.contains("tok-wrong-987654") && !detail.contains("tok-123456789"),
            "{detail}"
        );
        assert!(
            !detail.contains(&guarded.url),
            "the URL stays out of Problems: {detail}"
        );
    }
    let headers = workspace
        .call_tool("good", "headers", json!({}), CallOptions::default())
        .await
        .expect("headers");
    let headers: serde_json::Value = serde_json::from_str(&headers.text()).expect("JSON");
    // The credentials arrived exactly (the reversed copies say so)...
    assert_eq!(headers["authorization~reversed"], "987654321-kot reraeB");
    assert_eq!(headers["x-trace~reversed"], "987-ecart");
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    // ...and reflected back by the server, they reach the caller scrubbed.
    assert_eq!(headers["authorization"], "Bearer <redacted>");
    assert_eq!(headers["x-trace"], "<redacted>");
    shutdown_clean(host).await;
    guarded.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_http_peer_goes_unavailable_and_comes_back_when_it_returns() {
    let first = HttpFixture::start("remote", false).await;
    let address = first.url.clone();
    let config = Env::new()
        .set("PLURNK_MCP_REMOTE", address.clone())
        .enable(&["remote"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    assert_eq!(
        workspace.snapshot().server("remote").map(|s| s.state),
        Some(ServerState::Ready)
    );
    first.stop().await;
    let failed = workspace
        .call_tool(
            "remote",
            "echo",
            json!({"text": "anyone?"}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(failed, Err(CallError::ConnectionLost { .. })),
        "{failed:?}"
    );
    let down = workspace
        .wait_for(BOUND, |s| {
            s.server("remote")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    assert_eq!(
        down.server("remote").map(|s| s.state),
        Some(ServerState::Unavailable)
    );
    // The same address serves again.
    let socket: std::net::SocketAddr = address
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("address");
    let listener = tokio::net::TcpListener::bind(socket).await.expect("rebind");
    let stop = CancellationToken::new();
    let task = tokio::spawn(plurnk_mcp_fixture::serve_http(
        listener,
        plurnk_mcp_fixture::FixtureOptions::default(),
        stop.clone(),
    ));
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("remote")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    assert_eq!(
        back.server("remote").map(|s| s.state),
        Some(ServerState::Ready)
    );
    let echo = workspace
        .call_tool(
            "remote",
            "echo",
            json!({"text": "back"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "back");
    shutdown_clean(host).await;
    stop.cancel();
    let _ = task.await;
}

/// A raw stdio server, in Python: each line it reads appended to the file named by its first
/// argument; `server/discover` answered method-not-found (a 2025-11-25 server), `initialize`
/// and the lists answered as such a server would.
const RAW_LEGACY_SERVER: &str = r#"
import json, sys
record = open(sys.argv[1], "a")
for line in sys.stdin:
    record.write(line); record.flush()
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if id is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "0"}}
        answer = {"jsonrpc": "2.0", "id": id, "result": result}
    elif method == "tools/list":
        answer = {"jsonrpc": "2.0", "id": id, "result": {"tools": []}}
    else:
        answer = {"jsonrpc": "2.0", "id": id,
                  "error": {"code": -32601, "message": "Method not found"}}
    sys.stdout.write(json.dumps(answer) + "\n"); sys.stdout.flush()
"#;

/// The same server over Streamable HTTP on 127.0.0.1:0 (axum), each request body kept.
async fn raw_legacy_http() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    CancellationToken,
) {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let message: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                kept.lock().expect("the record").push(message.clone());
                let id = message["id"].clone();
                let json = |value: serde_json::Value| {
                    (
                        StatusCode::OK,
                        [
                            (header::CONTENT_TYPE, "application/json"),
                            (header::HeaderName::from_static("mcp-session-id"), "raw"),
                        ],
                        value.to_string(),
                    )
                        .into_response()
                };
                match message["method"].as_str() {
                    _ if id.is_null() => StatusCode::ACCEPTED.into_response(),
                    Some("initialize") => json(json!({"jsonrpc": "2.0", "id": id, "result": {
                        "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw-http", "version": "0"}}})),
                    Some("tools/list") => {
                        json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}}))
                    }
                    _ => json(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "Method not found"}})),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopped.cancelled().await })
            .await;
    });
    (url, seen, stop)
}

/// Whether a legacy `initialize` as the server received it offers 2025-11-25 and nothing only
/// 2026-07-28 has: no extension of that revision (`io.modelcontextprotocol/...`, Tasks
/// among them), after a `server/discover` the server refused.
fn check_legacy_initialize(messages: &[serde_json::Value], label: &str) {
    let methods: Vec<&str> = messages
        .iter()
        .filter_map(|message| message["method"].as_str())
        .collect();
    let discover = methods
        .iter()
        .position(|method| *method == "server/discover");
    let initialize = methods.iter().position(|method| *method == "initialize");
    assert!(
        matches!((discover, initialize), (Some(d), Some(i)) if d < i),
        "{label}: discover, then initialize: {methods:?}"
    );
    let initialize = messages
        .iter()
        .find(|message| message["method"] == "initialize")
        .expect("the initialize");
    let params = &initialize["params"];
    assert_eq!(params["protocolVersion"], "2025-11-25", "{label}: {params}");
    let capabilities = params["capabilities"].to_string();
    assert!(
        !capabilities.contains("io.modelcontextprotocol/"),
        "{label}: an extension of 2026-07-28 offered in a legacy initialize: {capabilities}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_initialize_on_the_wire_offers_nothing_only_2026_07_28_has() {
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("legacy-wire-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    let raw_record = scratch.join("raw.jsonl");
    let fixture_record = scratch.join("fixture.jsonl");
    let (url, http_seen, stop) = raw_legacy_http().await;
    let config = Env::new()
        // A raw server, which records what it reads.
        .set("PLURNK_MCP_RAW", "python3")
        .set(
            "PLURNK_MCP_RAW_ARGS",
            json!(["-c", RAW_LEGACY_SERVER, raw_record.display().to_string()]).to_string(),
        )
        // The fixture at 2025-11-25, its standard input copied to a file on the way in.
        .set("PLURNK_MCP_FIXTURE_LEGACY", "/bin/sh")
        .set(
            "PLURNK_MCP_FIXTURE_LEGACY_ARGS",
            json!([
                "-c",
                "tee -a \"$0\" | exec \"$1\" fixture --name legacy --legacy",
                fixture_record.display().to_string(),
                crate::env::EXE,
            ])
            .to_string(),
        )
        .set("PLURNK_MCP_RAW_HTTP", url)
        .enable(&["raw", "fixture-legacy", "raw-http"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    for alias in ["raw", "fixture-legacy", "raw-http"] {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
        let negotiated = server.negotiated.as_ref().expect("negotiated");
        assert_eq!(negotiated.revision, "2025-11-25", "{alias}");
    }
    let read = |path: &std::path::Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .expect("the record")
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    check_legacy_initialize(&read(&raw_record), "a raw stdio server");
    check_legacy_initialize(&read(&fixture_record), "fixture --legacy");
    let http = http_seen.lock().expect("the record").clone();
    check_legacy_initialize(&http, "a legacy HTTP server");
    shutdown_clean(host).await;
    stop.cancel();
}
