//! Workspace actions: what each changes, and the Problem it answers with.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_add_or_enable_changes_nothing() {
    let dir = scratch("failing");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.default_workspace();
    let pid = workspace
        .call_tool("svc", "pid", json!({}), CallOptions::default())
        .await
        .expect("pid")
        .text();
    let before_bytes = db_bytes(&db);
    let before = workspace.snapshot();

    // An unreachable target.
    let unreachable =
        ServerDefinition::from_target("ghost", "/nonexistent/ghost-server").expect("valid");
    let problem = workspace
        .add(unreachable)
        .await
        .expect_err("cannot connect");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    assert!(problem.retryable);
    assert!(
        problem.detail.contains("\"ghost\" (stdio)"),
        "{}",
        problem.detail
    );
    // A tool policy the server contradicts.
    let options = McpServerOptions::from_json(r#"{"args":["fixture"],"tools":["no-such-tool"]}"#)
        .expect("valid options");
    let mismatch = ServerDefinition::from_target("picky", EXE)
        .and_then(|d| d.with_options(&options))
        .expect("valid");
    let problem = workspace.add(mismatch).await.expect_err("policy mismatch");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    assert!(
        problem.detail.contains("no-such-tool"),
        "{}",
        problem.detail
    );
    // Options that do not fit the transport are refused before any connection work.
    let http_args = McpServerOptions::from_json(r#"{"args":["x"]}"#).expect("parses");
    let refused = ServerDefinition::from_target("web", "https://example.test/mcp")
        .and_then(|d| d.with_options(&http_args));
    assert!(
        refused
            .as_ref()
            .is_err_and(|errors| errors.iter().any(|e| matches!(
                e,
                plurnk_mcp::ConfigError::WrongTransport { .. }
            ) && e.to_string().contains("args"))),
        "{refused:?}"
    );
    // Enabling a service server that cannot connect.
    let problem = workspace
        .enable("broken")
        .await
        .expect_err("cannot connect");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    // Enabling with options the cascade refuses.
    let bad = Customize::default().with_options(Some(
        McpServerOptions::from_json(r#"{"headers":{"x":"y"}}"#).expect("parses"),
    ));
    let problem = workspace
        .enable_with("svc", bad)
        .await
        .expect_err("headers on stdio");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (400, "invalid-definition")
    );

    assert_eq!(
        db_bytes(&db),
        before_bytes,
        "the database bytes are unchanged"
    );
    let after = workspace.snapshot();
    assert_eq!(after.servers, before.servers, "the snapshot is unchanged");
    assert_eq!(
        after.server("broken").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    let pid_after = workspace
        .call_tool("svc", "pid", json!({}), CallOptions::default())
        .await
        .expect("pid")
        .text();
    assert_eq!(pid, pid_after, "the other attachment was not touched");
    // A failed add left no trace: the alias is free, listed nowhere, and can be added again.
    let listed = workspace.list().await.expect("list");
    assert!(
        !listed
            .iter()
            .any(|s| s.alias == "ghost" || s.alias == "picky"),
        "{listed:?}"
    );
    let fixed = workspace
        .add(fixture_definition("ghost", "ghost"))
        .await
        .expect("the alias of a failed add is free");
    assert_eq!(fixed.state, ServerState::Ready);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_answers_with_its_problem_shape() {
    let dir = scratch("problems");
    let host = start(&dir.join("state.sqlite"), config(&[])).await;
    let workspace = host.default_workspace();
    for problem in [
        workspace.enable("nobody").await.expect_err("unknown"),
        workspace.disable("nobody").await.expect_err("unknown"),
        workspace.remove("nobody").await.expect_err("unknown"),
    ] {
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (404, "unknown-server")
        );
        assert!(problem.detail.contains("\"nobody\""), "{}", problem.detail);
    }
    // A caller's name is echoed cut, with its length: a megabyte asked for is not a
    // megabyte answered.
    let long = "n".repeat(100_000);
    let call = workspace
        .call_tool(&long, "pid", json!({}), CallOptions::default())
        .await
        .expect_err("unknown");
    let tool = workspace
        .call_tool("svc", &long, json!({}), CallOptions::default())
        .await
        .expect_err("unknown tool");
    for shown in [
        workspace.enable(&long).await.expect_err("unknown").detail,
        workspace.disable(&long).await.expect_err("unknown").detail,
        workspace.remove(&long).await.expect_err("unknown").detail,
        call.to_string(),
        tool.to_string(),
    ] {
        assert!(
            shown.len() < 300,
            "{} bytes: {}",
            shown.len(),
            &shown[..300]
        );
        assert!(shown.contains(&format!("{}… (", &long[..64])), "{shown}");
    }
    let problem = workspace
        .add(fixture_definition("svc", "svc"))
        .await
        .expect_err("an existing alias");
    assert_eq!((problem.status, problem.kind.as_str()), (409, "conflict"));
    let problem = workspace.remove("svc").await.expect_err("a service server");
    assert_eq!((problem.status, problem.kind.as_str()), (409, "conflict"));
    assert!(
        problem.detail.contains("disable it instead"),
        "{}",
        problem.detail
    );
    // Already enabled and connected: a no-op.
    let same = workspace.enable("svc").await.expect("no-op");
    assert_eq!(same.state, ServerState::Ready);
    // Already disabled: a no-op too.
    workspace.disable("broken").await.expect("no-op");
    // Enabled and connected with another definition: the new one is swapped in, and the
    // snapshot that answers it shows the server as the new definition serves it.
    let before = pid_of(&workspace, "svc").await;
    let swapped = workspace
        .enable_with("svc", renamed_fixture("other"))
        .await
        .expect("a definition change swaps");
    assert_eq!(swapped.state, ServerState::Ready);
    assert_eq!(
        swapped.negotiated.and_then(|n| n.name.clone()).as_deref(),
        Some("other")
    );
    assert_ne!(
        pid_of(&workspace, "svc").await,
        before,
        "still the old process"
    );
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customized_enable_specializes_and_remove_reveals_the_service_definition() {
    let dir = scratch("cascade");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", "[]")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    // Enabled as the service defines it, it stays the service's; a server the workspace
    // added stays the workspace's whatever it is enabled with.
    workspace.enable("svc").await.expect("enable");
    assert_eq!(summary_of(&workspace, "svc").await.source, "service");
    workspace.disable("svc").await.expect("disable");
    workspace
        .add(fixture_definition("mine", "mine"))
        .await
        .expect("add");
    workspace.disable("mine").await.expect("disable");
    workspace
        .enable_with("mine", renamed_fixture("renamed"))
        .await
        .expect("enable");
    assert_eq!(summary_of(&workspace, "mine").await.source, "workspace");
    // The overlay (client configuration, environment syntax) renames; options restrict tools.
    let overlay = Overlay::from_env_map(BTreeMap::from([(
        "PLURNK_MCP_SVC_ARGS".to_owned(),
        json!(["fixture", "--name", "from-overlay"]).to_string(),
    )]))
    .expect("a valid overlay");
    let customize = Customize::default()
        .with_overlay(overlay.server("svc"))
        .with_options(Some(
            McpServerOptions::from_json(r#"{"tools":["echo"]}"#).expect("parses"),
        ));
    let enabled = workspace
        .enable_with("svc", customize)
        .await
        .expect("enable");
    assert_eq!(enabled.state, ServerState::Ready);
    let names: Vec<&str> = enabled.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo"], "options replace the tool list");
    assert_eq!(
        enabled.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some("from-overlay"),
        "the overlay's arguments replaced the service's"
    );
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    // A server only the client's overlay defines is shown, disabled, and goes nowhere.
    let carried = Overlay::from_env_map(BTreeMap::from([(
        "PLURNK_MCP_CLIENTONLY".to_owned(),
        "https://client.example.test/mcp".to_owned(),
    )]))
    .expect("overlay");
    let listed = workspace.list_with(Some(&carried)).await.expect("list");
    let client = listed
        .iter()
        .find(|s| s.alias == "clientonly")
        .expect("shown");
    assert_eq!(
        (client.source, client.enabled, client.state),
        ("client", false, ServerState::Disabled)
    );
    assert!(
        workspace.snapshot().server("clientonly").is_none(),
        "not connected"
    );
    shutdown_clean(host).await;

    // The specialization is durable.
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", "[]")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    let svc = workspace.snapshot().server("svc").cloned().expect("svc");
    assert_eq!(svc.state, ServerState::Ready);
    assert_eq!(svc.tools.len(), 1);
    // Removing it reveals the service definition, disabled.
    let removed = workspace
        .remove("svc")
        .await
        .expect("remove the specialization");
    assert_eq!(removed.state, ServerState::Disabled);
    let svc = summary_of(&workspace, "svc").await;
    assert_eq!((svc.source, svc.enabled), ("service", false));
    shutdown_clean(host).await;

    // ...and stays so after a restart, even where the service enables it by default.
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", r#"["svc"]"#)])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    let svc = workspace.snapshot().server("svc").cloned().expect("svc");
    assert_eq!(svc.state, ServerState::Disabled, "{:?}", svc.problem);
    let svc = summary_of(&workspace, "svc").await;
    assert_eq!((svc.source, svc.enabled), ("service", false));
    shutdown_clean(host).await;
}
