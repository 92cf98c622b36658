//! What the gateway tells: list changes, the status page a person reads in a browser, the
//! metrics the dashboard queries.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_replaced_by_another_is_announced_though_the_count_stays() {
    let mut env = fixture("alpha", &[]);
    env.push(("PLURNK_MCP_ALPHA_TOOLS".into(), json!(["echo"]).to_string()));
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["alpha"]).to_string()));
    env.push(("PLURNK_MCP_ALLOW_ADD".into(), "true".into()));
    let inner = Host::start(config(&pairs(&env))).await.expect("inner host");
    let workspace = inner.default_workspace();
    let ready = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("alpha")
                .is_some_and(|server| server.state == ServerState::Ready)
        })
        .await;
    assert!(ready.is_settled(), "alpha connects");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        listener,
        HttpOptions::default(),
        shutdown.clone(),
    ));
    let outer = Host::start(config(&[
        ("PLURNK_MCP_GW", url),
        ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
    ]))
    .await
    .expect("outer host");
    let watched = outer.default_workspace();
    let before = watched
        .wait_for(BOUND, |snapshot| {
            tool_names(snapshot, "gw") == ["alpha_echo"]
        })
        .await;
    assert_eq!(tool_names(&before, "gw"), ["alpha_echo"]);
    // One tool for another: the same count, another list.
    let options =
        plurnk_mcp::config::McpServerOptions::from_json(r#"{"tools": ["add"]}"#).expect("options");
    workspace
        .enable_with(
            "alpha",
            plurnk_mcp::Customize::default().with_options(Some(options)),
        )
        .await
        .expect("alpha with another tool");
    let after = watched
        .wait_for(BOUND, |snapshot| {
            tool_names(snapshot, "gw") == ["alpha_add"]
        })
        .await;
    assert_eq!(
        tool_names(&after, "gw"),
        ["alpha_add"],
        "the client was told the list changed and sees the new one"
    );
    shutdown_clean(outer).await;
    shutdown.cancel();
    shutdown_clean(inner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_every_server_and_its_state_to_a_person_in_a_real_browser() {
    // A server's own words, with markup that would run (or hide) were it not escaped.
    const MARKUP: &str = "<script>document.title='owned'</script><b>beta</b> & its words";
    let mut env = fixture("alpha", &[]);
    env.extend(fixture("beta", &["--description", MARKUP]));
    // Configured, never enabled: shown disabled.
    env.extend(fixture("spare", &[]));
    // Never reachable, its URL holding a credential its Problem must not show.
    env.push((
        "PLURNK_MCP_GONE".into(),
        "http://127.0.0.1:9/mcp?key=${GATEWAY_SECRET}".into(),
    ));
    env.push((
        "PLURNK_MCP_ALPHA_ENV".into(),
        json!({"API_KEY": "${GATEWAY_SECRET}"}).to_string(),
    ));
    env.push(("GATEWAY_SECRET".into(), SECRET.into()));
    env.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["alpha", "beta", "gone"]).to_string(),
    ));
    let inner = Host::start(config(&pairs(&env))).await.expect("inner host");
    let workspace = inner.default_workspace();
    let states = |snapshot: &WorkspaceSnapshot, wanted: &[(&str, ServerState)]| {
        wanted.iter().all(|(alias, state)| {
            snapshot
                .server(alias)
                .is_some_and(|server| server.state == *state)
        })
    };
    let expected = [
        ("alpha", ServerState::Ready),
        ("beta", ServerState::Ready),
        ("gone", ServerState::Unavailable),
        ("spare", ServerState::Disabled),
    ];
    let settled = workspace
        .wait_for(BOUND, |snapshot| states(snapshot, &expected))
        .await;
    assert!(states(&settled, &expected), "{settled:?}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let authority = listener.local_addr().expect("address").to_string();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        listener,
        HttpOptions::default(),
        shutdown.clone(),
    ));
    // Calls through the gateway, one of them a tool error: counted per server.
    let outer = Host::start(config(&[
        ("PLURNK_MCP_GW", format!("http://{authority}/mcp")),
        ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
    ]))
    .await
    .expect("outer host");
    let client = outer.default_workspace();
    for (tool, arguments) in [
        ("alpha_echo", json!({"text": "one"})),
        ("alpha_echo", json!({"text": "two"})),
        ("beta_fail", json!({"message": "no"})),
    ] {
        client
            .call_tool("gw", tool, arguments, CallOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
    }
    // Alpha fails once and comes back: its last Problem stays on the page, recovered.
    let mut events = inner.events();
    assert!(workspace.crash_attachment_for_test("alpha"));
    let back = tokio::time::timeout(BOUND, async {
        let mut failed = false;
        loop {
            match events.recv().await {
                Ok(plurnk_mcp::HostEvent::StateChanged { alias, to, .. }) if alias == "alpha" => {
                    failed |= to == ServerState::Unavailable;
                    if failed && to == ServerState::Ready {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => panic!("the host's events: {error}"),
            }
        }
    })
    .await;
    assert!(back.is_ok(), "alpha went unavailable and came back");

    let report = |authority: &str| -> Value {
        let (status, body) = raw_request(authority, "GET", "/status.json", &[]);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("status.json is JSON")
    };
    let server = |report: &Value, alias: &str| -> Value {
        report["servers"]
            .as_array()
            .and_then(|servers| servers.iter().find(|s| s["alias"] == alias))
            .cloned()
            .unwrap_or_else(|| panic!("{alias} in {report}"))
    };
    assert!(
        wait::until(BOUND, || {
            server(&report(&authority), "alpha")["lastProblem"]["current"] == json!(false)
        })
        .await,
        "alpha's recovered Problem is remembered: {}",
        report(&authority)
    );
    let json = report(&authority);
    assert_eq!(json["workspace"], "default");
    assert!(json["uptimeSeconds"].is_u64());
    let alpha = server(&json, "alpha");
    assert_eq!(
        (
            &alpha["state"],
            &alpha["revision"],
            &alpha["calls"],
            &alpha["errors"]
        ),
        (&json!("ready"), &json!("2026-07-28"), &json!(2), &json!(0)),
        "{alpha}"
    );
    assert!(alpha["tools"].as_u64().is_some_and(|n| n >= 10), "{alpha}");
    let beta = server(&json, "beta");
    assert_eq!((&beta["calls"], &beta["errors"]), (&json!(1), &json!(1)));
    assert_eq!(
        beta["description"], MARKUP,
        "the server's words, as it wrote them"
    );
    let gone = server(&json, "gone");
    assert_eq!(gone["state"], "unavailable");
    assert_eq!(gone["lastProblem"]["current"], json!(true));
    assert_eq!(gone["lastProblem"]["kind"], "server-unavailable");
    assert_eq!(server(&json, "spare")["state"], "disabled");

    // What the page is never: a secret, a place a script runs.
    let (status, page) = raw_request(&authority, "GET", "/status", &[]);
    assert_eq!(status, 200);
    for shown in [&page, &json.to_string()] {
        assert!(!shown.contains(SECRET), "a secret on the status page");
    }
    assert!(!page.contains("<script"), "{page}");
    assert!(page.contains("&lt;script&gt;"), "{page}");
    // The rules of /mcp: Host, Origin; and only GET.
    for (headers, want) in [
        (vec![("Host", "evil.example.com")], 403),
        (vec![("Origin", "http://evil.example.com")], 403),
        (vec![("Origin", "http://127.0.0.1:1234")], 200),
    ] {
        let (status, body) = raw_request(&authority, "GET", "/status", &headers);
        assert_eq!(status, want, "{headers:?}: {body}");
    }
    assert_eq!(raw_request(&authority, "POST", "/status", &[]).0, 405);
    // Behind a bearer, the page is too.
    const BEARER: &str = "status-page-bearer-2b7c41d9";
    let guarded = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let guarded_authority = guarded.local_addr().expect("address").to_string();
    tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        guarded,
        HttpOptions::default().with_bearer(Some(BEARER.into())),
        shutdown.clone(),
    ));
    for path in ["/status", "/status.json"] {
        assert_eq!(raw_request(&guarded_authority, "GET", path, &[]).0, 401);
        let bearer = format!("Bearer {BEARER}");
        let (status, body) = raw_request(
            &guarded_authority,
            "GET",
            path,
            &[("Authorization", &bearer)],
        );
        assert_eq!(status, 200, "{body}");
        assert!(!body.contains(BEARER));
    }

    // What a person sees, in a real browser.
    let started = Instant::now();
    let mut browser = tokio::task::block_in_place(|| browser::Browser::start(1280, 720));
    let url = format!("http://{authority}/status");
    let (text, title, elements) = tokio::task::block_in_place(|| {
        browser.open(&url);
        let text = browser.visible_text();
        let title = browser.evaluate("document.title");
        let elements = browser.evaluate("document.querySelectorAll('script, b').length");
        let shot =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway/status-page.png");
        browser.screenshot(&shot);
        let png = std::fs::read(&shot).expect("the screenshot");
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{}",
            png.len()
        );
        println!("status page screenshot: {}", shot.display());
        (text, title, elements)
    });
    drop(browser);
    println!("the browser took {:?}", started.elapsed());
    for (alias, state) in expected {
        assert!(
            text.lines().any(|line| {
                let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
                cells.first() == Some(&alias) && cells.contains(&state.as_str())
            }),
            "a person sees {alias} {state}: {text}"
        );
    }
    assert!(text.contains(MARKUP), "the markup shows as text: {text}");
    assert!(text.contains("recovered"), "{text}");
    assert_eq!(title, json!("plurnk-mcp: default"), "no script ran");
    assert_eq!(elements, json!(0), "no element came from a server's words");
    assert!(!text.contains(SECRET));

    shutdown_clean(outer).await;
    shutdown.cancel();
    shutdown_clean(inner).await;
}

/// The metric names a Grafana dashboard's queries name: every `plurnk_mcp_…` word of every
/// panel's target and every templating query.
fn queried_metrics(dashboard: &Value) -> std::collections::BTreeSet<String> {
    fn walk(value: &Value, found: &mut std::collections::BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    if let ("expr" | "query" | "definition", Value::String(query)) =
                        (key.as_str(), value)
                    {
                        for (at, _) in query.match_indices("plurnk_mcp_") {
                            let name: String = query[at..]
                                .chars()
                                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                                .collect();
                            found.insert(name);
                        }
                    }
                    walk(value, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            _ => {}
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(dashboard, &mut found);
    found
}

#[test]
fn every_metric_the_grafana_dashboard_queries_is_served_by_a_live_host() {
    let dashboard: Value =
        serde_json::from_str(include_str!("../../../../deploy/grafana/plurnk-mcp.json"))
            .expect("the dashboard is JSON");
    let queried = queried_metrics(&dashboard);
    // What the issue asks the dashboard to show, at least.
    for wanted in [
        "plurnk_mcp_attachments",
        "plurnk_mcp_calls_total",
        "plurnk_mcp_call_seconds_bucket",
        "plurnk_mcp_restarts_total",
        "plurnk_mcp_commits_total",
        "plurnk_mcp_gateway_connections",
    ] {
        assert!(queried.contains(wanted), "the dashboard shows {wanted}");
    }

    // A live host: `plurnk-mcp serve` with its metrics, a call of each outcome through it.
    let mut env = fixture("alpha", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["alpha"]).to_string()));
    let served = Served::start(
        &["--metrics", "127.0.0.1:0", "--transport", "http"],
        &env,
        true,
    );
    let line = |prefix: &str| {
        let mut found = None;
        wait::until_blocking(BOUND, || {
            found = served.stderr().lines().find_map(|line| {
                line.split_once(prefix)
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .map(str::to_owned)
            });
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no {prefix:?} in {}", served.stderr()))
    };
    let metrics = line("metrics: http://");
    let metrics = metrics.trim_end_matches("/metrics");
    let gateway = format!("http://{}", line(" at http://"));
    for (id, tool, arguments) in [
        (1, "alpha_echo", json!({"text": "x"})),
        (2, "alpha_fail", json!({"message": "no"})),
        (3, "alpha_nope", json!({})),
    ] {
        let answer = post_json(
            &gateway,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments, "_meta": modern_meta()}}),
        );
        assert!(
            answer.get("result").is_some() || answer.get("error").is_some(),
            "{answer}"
        );
    }

    let (status, scraped) = scrape::http_get(metrics, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{scraped}");
    let served_names: std::collections::BTreeSet<&str> = scraped
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = queried
        .iter()
        .filter(|name| !served_names.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, which the host does not serve:\n{scraped}"
    );
    // Each call's connection closed: none is counted open any more.
    let mut open = None;
    let closed = wait::until_blocking(BOUND, || {
        open = scrape::sample(
            &scrape::http_get(metrics, "/metrics").1,
            "plurnk_mcp_gateway_connections",
        );
        open == Some(0.0)
    });
    assert!(closed, "gateway connections open: {open:?}");
    // The workspace variable reads its values from this label.
    assert!(
        scraped.contains("plurnk_mcp_attachments{workspace=\"default\",state=\"ready\"}"),
        "{scraped}"
    );
}
