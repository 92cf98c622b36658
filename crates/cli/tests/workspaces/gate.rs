//! The install gate and literal credentials.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literal_credential_is_refused_before_anything_connects_and_never_stored() {
    // A literal credential in every kind of kept definition; each refused with a 400 that
    // names the field, before any connection, process or state write.
    const LITERAL: &str = "letmein-4711-literal";
    const TOKEN: &str = "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o";
    let dir = scratch("literal");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("w");
    // A real endpoint that counts every connection it is offered.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("loopback");
    let port = listener.local_addr().expect("an address").port();
    let dialled = Arc::new(AtomicUsize::new(0));
    let counter = dialled.clone();
    let accepting = tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let probe = Probe::start().await;
    let before = db_bytes(&db);
    let options = |json: serde_json::Value| {
        McpServerOptions::from_json(&json.to_string()).expect("valid options")
    };
    let http = ServerDefinition::from_target("web", &format!("http://127.0.0.1:{port}/mcp"))
        .and_then(|d| d.with_options(&options(json!({"headers": {"X-Auth": LITERAL}}))))
        .expect("a definition");
    let stdio = ServerDefinition::from_target("local", EXE)
        .and_then(|d| {
            d.with_options(&options(json!({
                "args": ["fixture", "--probe", probe.address(), "--token", LITERAL],
                "env": {"CLIENT_SECRET": "pa$$w0rd"},
            })))
        })
        .expect("a definition");
    let source = plurnk_mcp::sources::definition(
        "tool",
        plurnk_mcp::sources::SourceKind::Cli,
        json!({"kind": "cli", "name": "tool", "command": "true",
            "env": {"CLIENT_SECRET": LITERAL}, "tools": [{"name": "run"}]}),
        "the add action",
    )
    .expect("a declaration");
    let cases = [
        ("web", workspace.add(http).await, vec!["headers.\"X-Auth\""]),
        (
            "local",
            workspace.add(stdio).await,
            vec!["args[4] (the value of --token)", "env.\"CLIENT_SECRET\""],
        ),
        (
            "tool",
            workspace.add(source).await,
            vec!["declaration.env.\"CLIENT_SECRET\""],
        ),
        // A customization is kept as a specialization: the same refusal.
        (
            "svc",
            workspace
                .enable_with(
                    "svc",
                    Customize::default()
                        .with_options(Some(options(json!({"env": {"SETTINGS": TOKEN}})))),
                )
                .await,
            vec!["env.\"SETTINGS\" (a token-shaped value)"],
        ),
    ];
    for (alias, answer, fields) in cases {
        let problem = answer.expect_err("a literal credential");
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (400, "literal-credential"),
            "{alias}: {problem}"
        );
        let server = format!("server \"{alias}\"");
        for said in
            fields
                .into_iter()
                .chain([server.as_str(), "${NAME}", "PLURNK_MCP_WORKSPACE_ENV"])
        {
            assert!(problem.detail.contains(said), "{alias}: {}", problem.detail);
        }
        for value in [LITERAL, TOKEN, "pa$$w0rd"] {
            assert!(!problem.detail.contains(value), "{}", problem.detail);
        }
    }
    assert_eq!(
        dialled.load(Ordering::SeqCst),
        0,
        "the endpoint was dialled"
    );
    assert!(
        probe.events().is_empty(),
        "the server ran: {:?}",
        probe.events()
    );
    assert_eq!(db_bytes(&db), before, "the state file changed");
    for alias in ["web", "local", "tool"] {
        assert!(workspace.snapshot().server(alias).is_none(), "{alias}");
    }
    assert_eq!(summary_of(&workspace, "svc").await.source, "service");
    accepting.abort();
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_gate_admits_only_what_the_operator_allows() {
    let dir = scratch("gate");
    let db = dir.join("state.sqlite");
    // Off by default: no runtime add, no customized enable.
    let closed = config(&[("PLURNK_MCP_ALLOW_ADD", "false")]);
    let host = start(&db, closed).await;
    let workspace = host.workspace("w").await.expect("w");
    let refused = workspace
        .add(fixture_definition("extra", "extra"))
        .await
        .expect_err("no runtime add");
    assert_eq!((refused.status, refused.kind.as_str()), (403, "forbidden"));
    assert!(
        refused.detail.contains("PLURNK_MCP_ALLOW_ADD=true"),
        "{}",
        refused.detail
    );
    let customized = renamed_fixture("custom");
    let refused = workspace
        .enable_with("svc", customized.clone())
        .await
        .expect_err("no customized enable");
    assert_eq!(refused.status, 403);
    // A plain enable of a declared server is not gated.
    workspace.enable("svc").await.expect("plain enable");
    shutdown_clean(host).await;

    // Allowed, but an added definition may refer only to the names handed to workspaces.
    let open = config(&[("OPERATOR_TOKEN", "operator-only-9999")]);
    let host = start(&db, open).await;
    let workspace = host.workspace("w").await.expect("w");
    let refused = workspace
        .add(fixture_definition("greedy", "${OPERATOR_TOKEN}"))
        .await
        .expect_err("a name not handed over");
    assert_eq!(refused.status, 403);
    assert!(
        refused.detail.contains("${OPERATOR_TOKEN}"),
        "{}",
        refused.detail
    );
    assert!(!refused.detail.contains("operator-only-9999"));
    let added = workspace
        .add(fixture_definition("fine", "${SECRET_ARG}"))
        .await
        .expect("a handed-over name");
    assert_eq!(added.state, ServerState::Ready);
    // The gate lets it through, and the connected server changes definition in place.
    let changed = workspace
        .enable_with("svc", customized)
        .await
        .expect("the gate admits it, and the definition is swapped in");
    assert_eq!(changed.state, ServerState::Ready);
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    shutdown_clean(host).await;

    // The name is no longer handed over: the stored server cannot expand it on restart.
    let narrowed = config(&[("PLURNK_MCP_WORKSPACE_ENV", "[]")]);
    let host = start(&db, narrowed).await;
    let workspace = host.workspace("w").await.expect("w");
    let fine = workspace
        .snapshot()
        .server("fine")
        .cloned()
        .expect("stored");
    assert_eq!(fine.state, ServerState::Unavailable);
    let detail = fine.problem.map(|p| p.detail).unwrap_or_default();
    assert!(detail.contains("SECRET_ARG"), "{detail}");
    shutdown_clean(host).await;
}

/// The install gate closes behind itself: a server added, and a declared one customized,
/// while the operator allowed it are kept but not connected once the gate is closed (403
/// `install-gate-closed`, saying why and what to do), refuse an enable meanwhile, and come
/// back as they were when the gate opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_the_gate_let_in_stay_out_once_it_closes_and_come_back_when_it_opens() {
    let dir = scratch("gate");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.default_workspace();
    let added = workspace
        .add(fixture_definition("extra", "extra"))
        .await
        .expect("added while the gate is open");
    assert_eq!(added.state, ServerState::Ready);
    let customized = workspace
        .enable_with("svc", renamed_fixture("renamed"))
        .await
        .expect("customized while the gate is open");
    assert_eq!(customized.state, ServerState::Ready);
    shutdown_clean(host).await;

    let closed = start(&db, config(&[("PLURNK_MCP_ALLOW_ADD", "false")])).await;
    let workspace = closed.default_workspace();
    let snapshot = workspace.snapshot();
    // A declared server is always honoured: customized while the gate was open, it runs as
    // the operator declared it once the gate is closed, and is enabled as such.
    let declared = snapshot.server("svc").expect("declared");
    assert_eq!(declared.state, ServerState::Ready, "{:?}", declared.problem);
    assert_eq!(
        declared.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some("svc"),
        "the declared definition, not the customization"
    );
    workspace.disable("svc").await.expect("disable");
    let enabled = workspace
        .enable("svc")
        .await
        .expect("a declared server enables");
    assert_eq!(enabled.state, ServerState::Ready);
    for (alias, how) in [("extra", "added")] {
        let server = snapshot.server(alias).expect("kept");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        let problem = server.problem.as_ref().expect("a Problem");
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (403, "install-gate-closed"),
            "{alias}"
        );
        assert!(
            problem.detail.contains(how) && problem.detail.contains("PLURNK_MCP_ALLOW_ADD"),
            "{alias}: {}",
            problem.detail
        );
        let refused = workspace
            .enable(alias)
            .await
            .expect_err("the gate is closed");
        assert_eq!(refused.kind, "install-gate-closed", "{alias}");
    }
    shutdown_clean(closed).await;

    let open = start(&db, config(&[])).await;
    let snapshot = open.default_workspace().snapshot();
    for alias in ["extra", "svc"] {
        assert_eq!(
            snapshot.server(alias).map(|s| s.state),
            Some(ServerState::Ready),
            "{alias} is back"
        );
    }
    // The customization rested in the store while the gate was closed, and is back.
    assert_eq!(
        snapshot
            .server("svc")
            .and_then(|s| s.negotiated.as_ref())
            .and_then(|n| n.name.as_deref()),
        Some("renamed")
    );
    shutdown_clean(open).await;
}
