//! The EXEC bridge: every bad op refused clearly and counted, the catalog and calls run,
//! results whole.

#[allow(unused_imports)]
use super::*;

// === the EXEC bridge ===

/// The telemetry events `run` sent: it sends them before it returns, so whatever is in the
/// stream when it has returned is all of them.
fn telemetry_sent(
    events: &mut tokio::sync::broadcast::Receiver<HostEvent>,
) -> Vec<(
    String,
    TelemetryEvent,
    u16,
    String,
    Option<plurnk_mcp::ProtectedResource>,
)> {
    let mut sent = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HostEvent::Telemetry {
            source,
            event,
            status,
            detail,
            auth_required,
        } = event
        {
            sent.push((source, event, status, detail, auth_required));
        }
    }
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_exec_op_is_refused_clearly_and_reported_as_telemetry() {
    use TelemetryEvent::{AuthRequired, BadArguments, ListFailed, NotConfigured, Unreachable};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let locked_url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let locked = tokio::spawn(plurnk_mcp_fixture::serve_http(
        listener,
        plurnk_mcp_fixture::FixtureOptions {
            name: "locked".into(),
            bearer: Some("exec-bearer-7070".into()),
            ..Default::default()
        },
        stop.clone(),
    ));
    let host = Host::start(config(&[
        ("PLURNK_MCP_FIXTURE", EXE.into()),
        ("PLURNK_MCP_FIXTURE_ARGS", json!(["fixture"]).to_string()),
        (
            "PLURNK_MCP_FIXTURE_TOOLS",
            json!(["echo", "add", "fail"]).to_string(),
        ),
        ("PLURNK_MCP_SPARE", EXE.into()),
        ("PLURNK_MCP_SPARE_ARGS", json!(["fixture"]).to_string()),
        (
            "PLURNK_MCP_GONE",
            "/nonexistent/plurnk-mcp-exec-test".into(),
        ),
        ("PLURNK_MCP_LOOPING", EXE.into()),
        (
            "PLURNK_MCP_LOOPING_ARGS",
            json!(["fixture", "--paging", "repeat-cursor"]).to_string(),
        ),
        ("PLURNK_MCP_LOCKED", locked_url.clone()),
        (
            "PLURNK_MCP_ENABLED",
            json!(["fixture", "gone", "looping", "locked"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    for alias in ["gone", "looping", "locked"] {
        assert_eq!(
            snapshot.server(alias).map(|s| s.state),
            Some(ServerState::Unavailable),
            "{alias}"
        );
    }
    let mut events = host.events();
    /// The op, its status, what its message names, and the event (source, kind) it sends.
    type Case = (
        &'static str,
        u16,
        Vec<&'static str>,
        Option<(&'static str, TelemetryEvent)>,
    );
    let cases: Vec<Case> = vec![
        (
            r#"<<EXEC[nowhere](echo):{}:EXEC"#,
            404,
            vec!["no server \"nowhere\"", "fixture, gone, locked, looping"],
            Some(("exec:nowhere", NotConfigured)),
        ),
        (
            r#"<<EXEC[fixture](ehco):{"text":"hi"}:EXEC"#,
            404,
            vec!["no enabled tool \"ehco\"", "the closest is \"echo\""],
            Some(("exec:fixture", NotConfigured)),
        ),
        // Left out by the server's _TOOLS policy: absent, like any unknown tool.
        (
            r#"<<EXEC[fixture](sleep):{"ms":1}:EXEC"#,
            404,
            vec![
                "no enabled tool \"sleep\"",
                "its enabled tools are add, echo, fail",
                "worker://plurnk/tools/fixture.md",
            ],
            Some(("exec:fixture", NotConfigured)),
        ),
        (
            "<<EXEC[spare]:?:EXEC",
            409,
            vec!["\"spare\" is disabled", "plurnk-mcp enable spare"],
            Some(("exec:spare", NotConfigured)),
        ),
        (
            r#"<<EXEC[fixture](echo):{"text":}:EXEC"#,
            400,
            vec!["fixture/echo are not valid JSON", "line 1 column 9"],
            Some(("exec:fixture", BadArguments)),
        ),
        (
            r#"<<EXEC[fixture](add):{"a":"two","b":3}:EXEC"#,
            422,
            vec![
                "fixture/add do not match its input schema",
                "/a: \"two\" is not of type \"number\"",
            ],
            Some(("exec:fixture", BadArguments)),
        ),
        (
            "<<EXEC[fixture](echo):{}:EXEC",
            422,
            vec!["\"text\" is a required property"],
            Some(("exec:fixture", BadArguments)),
        ),
        // Unclosed, with its server read: reported for that server.
        (
            r#"<<EXEC[fixture](echo):{"text":"hi"}"#,
            400,
            vec!["not closed", "must end with `:EXEC`"],
            Some(("exec:fixture", BadArguments)),
        ),
        // Unclosed before any server could be read: no source, so no event.
        (
            r#"<<EXEC[fixture(echo):{"text":"hi"}"#,
            400,
            vec!["not closed"],
            None,
        ),
        (
            "<<EXEC[gone](echo):{}:EXEC",
            503,
            vec!["\"gone\" is unavailable", "could not be connected"],
            Some(("exec:gone", Unreachable)),
        ),
        (
            "<<EXEC[looping]:?:EXEC",
            503,
            vec!["\"looping\" is unavailable", "could not be listed"],
            Some(("exec:looping", ListFailed)),
        ),
        // A server that needs an authorization it does not have: 401, as seed 000 has it.
        (
            "<<EXEC[locked](echo):{}:EXEC",
            401,
            vec!["\"locked\" is unavailable", "authorization required"],
            Some(("exec:locked", AuthRequired)),
        ),
    ];
    for (op, status, words, expected) in cases {
        let error = exec::run(&workspace, op, CallOptions::default())
            .await
            .expect_err(op);
        let message = error.to_string();
        assert_eq!(error.status(), status, "{op}: {message}");
        for word in words {
            assert!(
                message.contains(word),
                "{op}: {word:?} is not in: {message}"
            );
        }
        let sent = telemetry_sent(&mut events);
        match expected {
            None => assert!(sent.is_empty(), "{op}: {sent:?}"),
            Some((source, event)) => {
                assert_eq!(sent.len(), 1, "{op}: {sent:?}");
                let (seen_source, seen_event, seen_status, detail, protected) = &sent[0];
                assert_eq!(
                    (seen_source.as_str(), *seen_event, *seen_status),
                    (source, event, status),
                    "{op}: {detail}"
                );
                assert_eq!(detail, &message, "{op}");
                // mcp_auth_required names the server and the resource it needs
                // authorization for (its URL's origin); no other event carries them.
                let expected = (event == AuthRequired)
                    .then(|| ("locked", locked_url.trim_end_matches("/mcp")));
                let protected = protected
                    .as_ref()
                    .map(|p| (p.server.as_str(), p.resource.as_str()));
                assert_eq!(protected, expected, "{op}");
            }
        }
    }
    shutdown_clean(host).await;
    stop.cancel();
    let _ = locked.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_the_catalog_and_calls_and_returns_results_whole() {
    let host = Host::start(config(&[
        ("PLURNK_MCP_FIXTURE", EXE.into()),
        ("PLURNK_MCP_FIXTURE_ARGS", json!(["fixture"]).to_string()),
        ("PLURNK_MCP_FIXTURE_READ", json!(["echo"]).to_string()),
        ("PLURNK_MCP_ENABLED", json!(["fixture"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let mut events = host.events();
    let snapshot = workspace.snapshot();
    let fixture = snapshot.server("fixture").expect("configured");
    assert_eq!(fixture.state, ServerState::Ready, "{:?}", fixture.problem);

    // The catalog: every enabled tool with its one-liner, effect and schema, read-only.
    for op in [
        "<<EXEC[fixture]:?:EXEC",
        "<<EXEC[fixture]:help:EXEC",
        " <<EXEC[fixture]:EXEC ",
    ] {
        let parsed = exec::parse(op).expect("a catalog op");
        assert_eq!(exec::effect(&parsed, &snapshot), Ok(Effect::Read));
        let catalog = exec::run(&workspace, op, CallOptions::default())
            .await
            .expect("the catalog");
        assert_eq!(catalog["server"], json!("fixture"));
        assert_eq!(
            catalog["summary"],
            json!(plurnk_mcp::projection::server_summary(fixture))
        );
        let tools = catalog["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), fixture.tools.len());
        for (entry, tool) in tools.iter().zip(fixture.tools.iter()) {
            assert_eq!(
                entry,
                &json!({
                    "name": tool.name,
                    "summary": plurnk_mcp::projection::tool_summary(fixture, tool),
                    "effect": tool.effect,
                    "inputSchema": tool.input_schema,
                })
            );
        }
        let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo");
        assert_eq!(echo["effect"], json!("read"));
        let add = tools.iter().find(|t| t["name"] == "add").expect("add");
        assert_eq!(add["effect"], json!("host"));
    }

    // A call: the server's whole result object, exactly as a direct call returns it.
    let op = r#"<<EXEC[fixture](echo):{"text":"hi :EXEC there"}:EXEC"#;
    assert_eq!(
        exec::effect(&exec::parse(op).expect("a call"), &snapshot),
        Ok(Effect::Read)
    );
    let value = exec::run(&workspace, op, CallOptions::default())
        .await
        .expect("echo");
    let direct = workspace
        .call_tool(
            "fixture",
            "echo",
            json!({"text": "hi :EXEC there"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(value, direct.result);
    assert_eq!(value["content"][0]["text"], json!("hi :EXEC there"));
    let sum = exec::run(
        &workspace,
        r#"<<EXEC[fixture](add):{"a":2,"b":40}:EXEC"#,
        CallOptions::default(),
    )
    .await
    .expect("add");
    assert_eq!(sum["content"][0]["text"], json!("42"));
    // No arguments: an empty body.
    let pid = exec::run(
        &workspace,
        "<<EXEC[fixture](pid):EXEC",
        CallOptions::default(),
    )
    .await
    .expect("pid");
    assert!(
        pid["content"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert!(
        telemetry_sent(&mut events).is_empty(),
        "no failure, no event"
    );

    // isError: a ToolError with status 500 carrying the whole result, and its event.
    let failed = exec::run(
        &workspace,
        r#"<<EXEC[fixture](fail):{"message":"it broke"}:EXEC"#,
        CallOptions::default(),
    )
    .await;
    let direct = workspace
        .call_tool(
            "fixture",
            "fail",
            json!({"message": "it broke"}),
            CallOptions::default(),
        )
        .await
        .expect("a tool error is a result");
    match &failed {
        Err(exec::ExecError::ToolError { status, result, .. }) => {
            assert_eq!(*status, 500);
            assert_eq!(result, &direct.result);
            assert_eq!(result["isError"], json!(true));
        }
        other => panic!("not a tool error: {other:?}"),
    }
    let sent = telemetry_sent(&mut events);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1, sent[0].2),
        ("exec:fixture", TelemetryEvent::ToolError, 500)
    );
    assert!(sent[0].3.contains("it broke"), "{}", sent[0].3);

    // Progress and cancellation pass through the options.
    let (seen, sink) = recorder();
    let counted = exec::run(
        &workspace,
        r#"<<EXEC[fixture](count):{"steps":3,"delay_ms":1}:EXEC"#,
        CallOptions::default().with_progress(Some(sink)),
    )
    .await
    .expect("count");
    assert_eq!(counted["content"][0]["text"], json!("counted 3"));
    let reports: Vec<f64> = seen
        .lock()
        .map(|seen| seen.iter().map(|p| p.progress).collect())
        .unwrap_or_default();
    assert_eq!(reports, [1.0, 2.0, 3.0]);
    let cancel = tokio_util::sync::CancellationToken::new();
    let sleeping = {
        let (workspace, cancel) = (workspace.clone(), cancel.clone());
        tokio::spawn(async move {
            exec::run(
                &workspace,
                r#"<<EXEC[fixture](sleep):{"ms":60000}:EXEC"#,
                CallOptions::default().with_cancel(Some(cancel)),
            )
            .await
        })
    };
    cancel.cancel();
    let cancelled = tokio::time::timeout(BOUND, sleeping)
        .await
        .expect("settles")
        .expect("joins");
    assert!(
        matches!(
            &cancelled,
            Err(exec::ExecError::Call { error, .. }) if matches!(**error, CallError::Cancelled { .. })
        ),
        "{cancelled:?}"
    );
    assert!(
        telemetry_sent(&mut events).is_empty(),
        "a cancellation is the caller's, not the server's failure"
    );
    shutdown_clean(host).await;
}
