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
