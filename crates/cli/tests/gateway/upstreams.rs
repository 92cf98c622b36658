//! A host attached to a gateway reaches every upstream through it, over HTTP and stdio;
//! an upstream that dies mid-call.

#[allow(unused_imports)]
use super::*;

/// An in-process host on two fixture servers, its default workspace served over HTTP on
/// loopback, and a second host attached to that gateway as server `gw`.
struct Pair {
    inner: Host,
    outer: Host,
    shutdown: tokio_util::sync::CancellationToken,
    url: String,
}

impl Pair {
    async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// The pair with `alpha` started with these fixture flags (such as `--probe ADDR`).
    async fn start_with(alpha: &[&str]) -> Self {
        let mut env = fixture("alpha", alpha);
        env.extend(fixture("beta", &[]));
        env.push((
            "PLURNK_MCP_ENABLED".into(),
            json!(["alpha", "beta"]).to_string(),
        ));
        // Alpha holds a credential it will reveal when asked: the gateway's clients see it
        // scrubbed, as the host's own callers do.
        env.push((
            "PLURNK_MCP_ALPHA_ENV".into(),
            json!({"API_KEY": "${GATEWAY_SECRET}"}).to_string(),
        ));
        env.push(("GATEWAY_SECRET".into(), SECRET.into()));
        let inner = Host::start(config(&pairs(&env))).await.expect("inner host");
        let workspace = inner.default_workspace();
        let ready = workspace
            .wait_for(BOUND, |snapshot| {
                ["alpha", "beta"].iter().all(|alias| {
                    snapshot
                        .server(alias)
                        .is_some_and(|server| server.state == ServerState::Ready)
                })
            })
            .await;
        assert!(ready.is_settled(), "the upstream servers connect");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let gateway = Gateway::new(workspace, Naming::Prefixed);
        tokio::spawn(plurnk_mcp::gateway::serve_http(
            gateway,
            listener,
            HttpOptions::default(),
            shutdown.clone(),
        ));
        let outer = Host::start(config(&[
            ("PLURNK_MCP_GW", url.clone()),
            ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
        ]))
        .await
        .expect("outer host");
        Self {
            inner,
            outer,
            shutdown,
            url,
        }
    }

    async fn stop(self) {
        shutdown_clean(self.outer).await;
        self.shutdown.cancel();
        shutdown_clean(self.inner).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plurnk_mcp_attaches_to_a_gateway_and_reaches_every_upstream_through_it() {
    let pair = Pair::start().await;
    let outer = pair.outer.default_workspace();
    let snapshot = outer
        .wait_for(BOUND, |snapshot| tool_names(snapshot, "gw").len() >= 24)
        .await;
    let gw = snapshot.server("gw").expect("gw is configured");
    assert_eq!(gw.state, ServerState::Ready, "{:?}", gw.problem);
    let negotiated = gw.negotiated.as_ref().expect("negotiated");
    assert_eq!(negotiated.revision, "2026-07-28");
    assert!(negotiated.modern, "the gateway answers server/discover");
    assert_eq!(negotiated.name.as_deref(), Some("plurnk-mcp"));
    let names = tool_names(&snapshot, "gw");
    for expected in ["alpha_echo", "alpha_sleep", "beta_echo", "beta_add"] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
    }
    assert!(
        names
            .iter()
            .all(|name| name.starts_with("alpha_") || name.starts_with("beta_")),
        "every served name is <server>_<tool>: {names:?}"
    );
    // Descriptions and schemas pass through unchanged.
    let echo = gw
        .tools
        .iter()
        .find(|tool| tool.name == "alpha_echo")
        .expect("alpha_echo");
    assert_eq!(
        echo.description.as_deref(),
        Some("Return the given text unchanged.")
    );
    assert_eq!(echo.input_schema["required"], json!(["text"]));

    let answer = outer
        .call_tool(
            "gw",
            "alpha_echo",
            json!({"text": "through"}),
            CallOptions::default(),
        )
        .await
        .expect("alpha_echo");
    assert_eq!(answer.text(), "through");
    let sum = outer
        .call_tool(
            "gw",
            "beta_add",
            json!({"a": 2, "b": 3}),
            CallOptions::default(),
        )
        .await
        .expect("beta_add");
    assert_eq!(sum.text(), "5");
    // A tool error is a result, flagged, not a failure.
    let failed = outer
        .call_tool(
            "gw",
            "beta_fail",
            json!({"message": "no"}),
            CallOptions::default(),
        )
        .await
        .expect("beta_fail settles");
    assert!(failed.is_error);
    assert_eq!(failed.text(), "no");

    // Progress crosses both hops, in order, before the result.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let options = CallOptions::default().with_progress(Some(Arc::new(
        move |progress: plurnk_mcp::Progress| {
            sink_seen.lock().expect("progress").push(progress.progress);
        },
    )));
    let counted = outer
        .call_tool(
            "gw",
            "alpha_count",
            json!({"steps": 3, "delay_ms": 20}),
            options,
        )
        .await
        .expect("alpha_count");
    assert_eq!(counted.text(), "counted 3");
    assert_eq!(*seen.lock().expect("progress"), vec![1.0, 2.0, 3.0]);

    // Resources keep their URIs, each listed with the server it belongs to. Alpha and beta
    // both list this one: a read that does not say which is refused, naming both, rather
    // than handed to whichever sorts first (a server could claim another's URI that way).
    let counters: Vec<&Value> = gw
        .catalog
        .resources
        .iter()
        .filter(|resource| resource.uri == "fixture://counter")
        .map(|resource| &resource.definition["_meta"]["plurnk/server"])
        .collect();
    assert_eq!(counters, [&json!("alpha"), &json!("beta")]);
    match outer
        .read_resource("gw", "fixture://counter", CallOptions::default())
        .await
    {
        Err(CallError::Remote { message, .. }) => assert!(
            message.contains("claimed by servers \"alpha\" and \"beta\"")
                && message.contains("plurnk/server"),
            "{message}"
        ),
        other => panic!("an ambiguous read is refused: {other:?}"),
    }
    // A client that names the server reads from that one, and the answer says who answered.
    let read = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 9, "method": "resources/read",
               "params": {"uri": "fixture://counter",
                          "_meta": {"plurnk/server": "beta",
                                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    let result = &read["result"];
    assert!(
        result["contents"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("reads: ")),
        "{read}"
    );
    assert_eq!(result["_meta"]["plurnk/server"], "beta", "{read}");

    // A credential an upstream reflects reaches no client of the gateway.
    let revealed = outer
        .call_tool(
            "gw",
            "alpha_reveal",
            json!({"name": "API_KEY", "to": "text"}),
            CallOptions::default(),
        )
        .await
        .expect("alpha_reveal");
    // How much of `API_KEY=<value>` is scrubbed depends on the spellings the process has
    // registered (another test's `?key=<value>` URL takes `KEY=` with it): the value is gone.
    let text = revealed.text();
    assert!(
        text.starts_with("API_") && text.ends_with("<redacted>") && !text.contains(SECRET),
        "{text}"
    );
    let raw = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "alpha_reveal", "arguments": {"name": "API_KEY", "to": "error"},
                          "_meta": modern_meta()}}),
    );
    assert!(!raw.to_string().contains(SECRET), "{raw}");
    assert!(raw.to_string().contains("<redacted>"), "{raw}");

    // A name that routes nowhere is the client's error, and says how names are made.
    match outer
        .call_tool(
            "gw",
            "gamma_echo",
            json!({"text": "x"}),
            CallOptions::default(),
        )
        .await
    {
        Err(CallError::UnknownTool { .. }) => {}
        other => panic!("a tool the gateway does not list is refused by the host: {other:?}"),
    }
    let raw = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "gamma_echo", "arguments": {}, "_meta": modern_meta()}}),
    );
    assert_eq!(raw["error"]["code"], -32602, "{raw}");
    let message = raw["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("gamma_echo") && message.contains("<server>_<name>"),
        "{message}"
    );
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_dies_mid_call_fails_the_call_and_its_tools_leave_and_come_back() {
    let probe = Probe::start().await;
    let pair = Pair::start_with(&["--probe", probe.address()]).await;
    let outer = pair.outer.default_workspace();
    outer
        .wait_for(BOUND, |snapshot| tool_names(snapshot, "gw").len() >= 24)
        .await;

    // A disabled upstream leaves tools/list, and the client hears of it.
    let inner = pair.inner.default_workspace();
    inner.disable("beta").await.expect("disable beta");
    let gone = outer
        .wait_for(BOUND, |snapshot| {
            !tool_names(snapshot, "gw")
                .iter()
                .any(|name| name.starts_with("beta_"))
        })
        .await;
    let names = tool_names(&gone, "gw");
    assert!(
        !names.is_empty() && names.iter().all(|name| name.starts_with("alpha_")),
        "{names:?}"
    );
    inner.enable("beta").await.expect("enable beta");
    let back = outer
        .wait_for(BOUND, |snapshot| {
            tool_names(snapshot, "gw").contains(&"beta_echo".to_owned())
        })
        .await;
    assert!(tool_names(&back, "gw").contains(&"beta_echo".to_owned()));

    // Killed under a call: the client gets a JSON-RPC error at once, not a hang.
    let pid = outer
        .call_tool("gw", "alpha_pid", json!({}), CallOptions::default())
        .await
        .expect("alpha_pid")
        .text();
    let pid: i32 = pid.parse().expect("a pid");
    let started = Instant::now();
    let call = tokio::spawn({
        let outer = outer.clone();
        async move {
            outer
                .call_tool(
                    "gw",
                    "alpha_gate",
                    json!({"id": "doomed"}),
                    CallOptions::default(),
                )
                .await
        }
    });
    // The call is held on the server when it dies.
    probe.wait_gate("doomed", BOUND).await;
    // SAFETY: kill(2) with a pid read from the server itself; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "kill {pid}");
    let settled = tokio::time::timeout(BOUND, call)
        .await
        .expect("the call settles long before its deadline")
        .expect("the call task");
    match settled {
        Err(CallError::Remote { code, message, .. }) => {
            assert_eq!(code, -32603, "{message}");
            assert!(
                message.contains("alpha") && message.contains("connection"),
                "{message}"
            );
        }
        other => panic!("a JSON-RPC error reaches the client: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // The server comes back by itself, and its tools with it.
    let came_back = wait::until_async(Duration::from_secs(30), || async {
        let answer = outer
            .call_tool(
                "gw",
                "alpha_echo",
                json!({"text": "again"}),
                CallOptions::default(),
            )
            .await;
        answer.is_ok_and(|answer| answer.text() == "again")
    })
    .await;
    assert!(came_back, "alpha came back and echoes");
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plurnk_mcp_attaches_to_a_gateway_it_starts_over_stdio() {
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-attach-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let upstream = json!({
        "PLURNK_MCP_FX": EXE,
        "PLURNK_MCP_FX_ARGS": json!(["fixture", "--name", "fx"]).to_string(),
        "PLURNK_MCP_ENABLED": json!(["fx"]).to_string(),
    });
    let outer = Host::start(config(&[
        ("PLURNK_MCP_GW", EXE.to_owned()),
        (
            "PLURNK_MCP_GW_ARGS",
            json!(["--state", state, "serve"]).to_string(),
        ),
        ("PLURNK_MCP_GW_ENV", upstream.to_string()),
        ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
    ]))
    .await
    .expect("outer host");
    let workspace = outer.default_workspace();
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| !tool_names(snapshot, "gw").is_empty())
        .await;
    let gw = snapshot.server("gw").expect("gw");
    assert_eq!(gw.state, ServerState::Ready, "{:?}", gw.problem);
    assert_eq!(
        gw.negotiated.as_ref().map(|n| n.revision.as_str()),
        Some("2026-07-28")
    );
    let names = tool_names(&snapshot, "gw");
    assert!(names.contains(&"fx_echo".to_owned()), "{names:?}");
    let answer = workspace
        .call_tool(
            "gw",
            "fx_echo",
            json!({"text": "over stdio"}),
            CallOptions::default(),
        )
        .await
        .expect("fx_echo");
    assert_eq!(answer.text(), "over stdio");
    shutdown_clean(outer).await;
}
