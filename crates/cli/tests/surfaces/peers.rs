//! server-everything and the Python SDK peer: resources, prompts, completion, progress,
//! errors and content, over stdio and Streamable HTTP.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_resources_prompts_completion_and_progress() {
    let peers = peers();
    let host = Host::start(config(&[
        ("PLURNK_MCP_EVERYTHING", peers.node.clone()),
        (
            "PLURNK_MCP_EVERYTHING_ARGS",
            json!([peers.everything, "stdio"]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["everything"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let everything = snapshot.server("everything").expect("configured");
    assert_eq!(
        everything.state,
        ServerState::Ready,
        "{:?}",
        everything.problem
    );

    // It announces tools/list_changed right after start (a legacy notification): the host
    // lists again and commits, beyond the two hydration commits (placeholder, then ready).
    let refreshed = workspace
        .wait_for(BOUND, |snapshot| snapshot.version >= 3)
        .await;
    assert!(
        refreshed.version >= 3,
        "no refresh commit after the list change"
    );
    assert_eq!(
        refreshed.server("everything").map(|s| s.state),
        Some(ServerState::Ready)
    );

    // Resources and templates are published beside the tools.
    let catalog = &everything.catalog;
    let document = catalog
        .resources
        .iter()
        .find(|r| r.uri.ends_with("architecture.md"))
        .expect("a listed document");
    assert_eq!(document.mime_type.as_deref(), Some("text/markdown"));
    assert!(
        catalog
            .templates
            .iter()
            .any(|t| t.uri_template == "demo://resource/dynamic/text/{resourceId}"),
        "{:?}",
        catalog.templates
    );
    let read = workspace
        .read_resource("everything", &document.uri, CallOptions::default())
        .await
        .expect("read a listed resource");
    assert_eq!(read["contents"][0]["uri"], json!(document.uri));
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    let dynamic = workspace
        .read_resource(
            "everything",
            "demo://resource/dynamic/text/7",
            CallOptions::default(),
        )
        .await
        .expect("read through a template");
    assert!(
        dynamic["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains('7')),
        "{dynamic}"
    );

    // Prompts, with their arguments.
    let args_prompt = everything.prompt("args-prompt").expect("listed");
    assert!(
        args_prompt
            .arguments
            .iter()
            .any(|a| a.name == "city" && a.required)
    );
    let prompt = workspace
        .get_prompt(
            "everything",
            "args-prompt",
            json!({"city": "Lisbon", "state": "Lisboa"}),
            CallOptions::default(),
        )
        .await
        .expect("get a prompt");
    let text = prompt["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Lisbon"), "{prompt}");
    let unknown = workspace
        .get_prompt(
            "everything",
            "no-such-prompt",
            json!({}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(unknown, Err(CallError::UnknownPrompt { .. })),
        "{unknown:?}"
    );

    // Completion of a prompt argument.
    let values = workspace
        .complete(
            "everything",
            CompletionRef::Prompt {
                name: "completable-prompt".into(),
            },
            "department",
            "E",
            BTreeMap::new(),
        )
        .await
        .expect("complete");
    assert!(values.iter().any(|v| v == "Engineering"), "{values:?}");

    // Progress reaches the caller that owns the request.
    let (seen, sink) = recorder();
    let result = workspace
        .call_tool(
            "everything",
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
            CallOptions::default().with_progress(Some(sink)),
        )
        .await
        .expect("the long operation completes");
    assert!(!result.is_error, "{:?}", result.result);
    let seen = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(
        seen.last().map(|p| (p.progress, p.total)),
        Some((3.0, Some(3.0)))
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_caller_and_can_extend_the_deadline() {
    let host = Host::start(config(&[
        ("PLURNK_MCP_FIXTURE", EXE.into()),
        ("PLURNK_MCP_FIXTURE_ARGS", json!(["fixture"]).to_string()),
        ("PLURNK_MCP_ENABLED", json!(["fixture"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();

    // Five steps of 150 ms: 750 ms in all, each report within a 400 ms deadline.
    let (seen, sink) = recorder();
    let started = Instant::now();
    let result = workspace
        .call_tool(
            "fixture",
            "count",
            json!({"steps": 5, "delay_ms": 150}),
            CallOptions::default()
                .with_timeout(Some(Duration::from_millis(400)))
                .with_reset_timeout_on_progress(Some(Duration::from_secs(5)))
                .with_progress(Some(sink)),
        )
        .await
        .expect("progress kept the request alive past its 400 ms deadline");
    assert_eq!(result.text(), "counted 5");
    assert!(started.elapsed() > Duration::from_millis(400));
    let reports: Vec<(f64, Option<String>)> = seen
        .lock()
        .map(|seen| {
            seen.iter()
                .map(|p| (p.progress, p.message.clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(reports.len(), 5, "{reports:?}");
    assert_eq!(reports[4], (5.0, Some("step 5 of 5".into())));

    // Without the reset, the same call times out.
    let timed_out = workspace
        .call_tool(
            "fixture",
            "count",
            json!({"steps": 5, "delay_ms": 150}),
            CallOptions::default().with_timeout(Some(Duration::from_millis(400))),
        )
        .await;
    assert!(
        matches!(timed_out, Err(CallError::Timeout { .. })),
        "{timed_out:?}"
    );

    // The reset is bounded by the maximum total.
    let bounded = workspace
        .call_tool(
            "fixture",
            "count",
            json!({"steps": 20, "delay_ms": 100}),
            CallOptions::default()
                .with_timeout(Some(Duration::from_millis(400)))
                .with_reset_timeout_on_progress(Some(Duration::from_millis(700))),
        )
        .await;
    assert!(
        matches!(
            bounded,
            Err(CallError::Timeout {
                timeout_ms: 700,
                ..
            })
        ),
        "{bounded:?}"
    );

    // Cancelling mid-way, once progress flows, settles the call as cancelled at once.
    let (seen, sink) = recorder();
    let first_report = {
        let seen = seen.clone();
        async move {
            let flows = wait::until(BOUND, || seen.lock().is_ok_and(|s| !s.is_empty())).await;
            assert!(flows, "progress flows");
        }
    };
    let cancelled = call_then_cancel(
        &workspace,
        "fixture",
        "count",
        json!({"steps": 500, "delay_ms": 100}),
        CallOptions::default().with_progress(Some(sink)),
        first_report,
    )
    .await;
    assert!(
        matches!(cancelled, Err(CallError::Cancelled { .. })),
        "{cancelled:?}"
    );
    let reports = seen.lock().map(|s| s.len()).unwrap_or_default();
    assert!(
        (1..500).contains(&reports),
        "cancelled mid-way, after {reports} reports"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_peer_resources_prompts_completion_errors_and_content() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let py = snapshot.server("py").expect("configured");
    assert_eq!(py.state, ServerState::Ready, "{:?}", py.problem);
    assert_eq!(
        py.negotiated.as_ref().map(|n| n.revision.as_str()),
        Some("2026-07-28")
    );

    let uris: Vec<&str> = py
        .catalog
        .resources
        .iter()
        .map(|r| r.uri.as_str())
        .collect();
    assert!(
        uris.contains(&"memo://greeting") && uris.contains(&"memo://logo"),
        "{uris:?}"
    );
    let greeting = workspace
        .read_resource("py", "memo://greeting", CallOptions::default())
        .await
        .expect("read text");
    assert_eq!(greeting["contents"][0]["text"], "hello from python");
    let logo = workspace
        .read_resource("py", "memo://logo", CallOptions::default())
        .await
        .expect("read blob");
    assert_eq!(logo["contents"][0]["mimeType"], "image/png");
    assert!(
        logo["contents"][0]["blob"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "{logo}"
    );
    let note = workspace
        .read_resource("py", "memo://notes/shopping", CallOptions::default())
        .await
        .expect("read through the template");
    assert!(
        note["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("shopping")),
        "{note}"
    );

    let greet = py.prompt("greet").expect("listed");
    assert!(
        greet
            .arguments
            .iter()
            .any(|a| a.name == "name" && a.required)
    );
    let prompt = workspace
        .get_prompt(
            "py",
            "greet",
            json!({"name": "Ada"}),
            CallOptions::default(),
        )
        .await
        .expect("get");
    assert_eq!(prompt["messages"][0]["content"]["text"], "Say hello to Ada");

    let values = workspace
        .complete(
            "py",
            CompletionRef::Prompt {
                name: "greet".into(),
            },
            "name",
            "al",
            BTreeMap::new(),
        )
        .await
        .expect("complete a prompt argument");
    assert_eq!(
        values,
        ["alice", "albert"],
        "the prefix \"al\" completes in the server's order"
    );
    assert!(
        values.contains(&"alice".to_owned()) && !values.contains(&"bob".to_owned()),
        "{values:?}"
    );
    let template_values = workspace
        .complete(
            "py",
            CompletionRef::Resource {
                uri: "memo://notes/{name}".into(),
            },
            "name",
            "t",
            BTreeMap::new(),
        )
        .await
        .expect("complete a template variable");
    assert!(
        template_values.iter().all(|v| v.starts_with('t')) && !template_values.is_empty(),
        "{template_values:?}"
    );

    // A JSON-RPC error keeps its code and data; it is not a tool result.
    let boom = workspace
        .call_tool("py", "boom", json!({}), CallOptions::default())
        .await;
    match boom {
        Err(CallError::Remote { code, data, .. }) => {
            assert_eq!(code, -32012);
            assert!(data.is_some(), "the error's data is kept");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    // Every content variant survives as JSON.
    let mixed = workspace
        .call_tool("py", "mixed", json!({}), CallOptions::default())
        .await
        .expect("mixed content");
    let kinds: Vec<&str> = mixed.result["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["type"].as_str()).collect())
        .unwrap_or_default();
    for kind in ["text", "image", "audio", "resource_link", "resource"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let embedded: Vec<&serde_json::Value> = mixed.result["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter(|b| b["type"] == "resource").collect())
        .unwrap_or_default();
    assert!(
        embedded.iter().any(|b| b["resource"]["blob"].is_string()),
        "an embedded blob resource"
    );
    assert!(
        embedded.iter().any(|b| b["resource"]["text"].is_string()),
        "an embedded text resource"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_peer_over_streamable_http() {
    use tokio::io::AsyncBufReadExt;
    let peers = peers();
    let mut child = tokio::process::Command::new(&peers.python)
        .arg(peer_script("python_surfaces.py"))
        .args(["--http", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python peer starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the peer announces its address")
        .expect("read")
        .and_then(|line| line.strip_prefix("listening ").map(str::to_owned))
        .expect("a listening line");
    let host = Host::start(config(&[
        ("PLURNK_MCP_WEB", url),
        ("PLURNK_MCP_ENABLED", json!(["web"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let web = snapshot.server("web").expect("configured");
    assert_eq!(web.state, ServerState::Ready, "{:?}", web.problem);
    assert_eq!(
        web.negotiated.as_ref().map(|n| n.revision.as_str()),
        Some("2026-07-28")
    );
    let greeting = workspace
        .read_resource("web", "memo://greeting", CallOptions::default())
        .await
        .expect("read");
    assert_eq!(greeting["contents"][0]["text"], "hello from python");
    let handler: plurnk_mcp::InteractionHandler = Arc::new(|interaction| {
        Box::pin(async move { accept_each(&interaction, json!({"name": "Lin"})) })
    });
    let asked = workspace
        .call_tool(
            "web",
            "ask_name",
            json!({}),
            CallOptions::default().with_interaction(Some(handler)),
        )
        .await
        .expect("an MRTR round over HTTP");
    assert_eq!(asked.text(), "hello, Lin");
    let (seen, sink) = recorder();
    let slow = workspace
        .call_tool(
            "web",
            "slow",
            json!({"steps": 2, "delay_ms": 20}),
            CallOptions::default().with_progress(Some(sink)),
        )
        .await
        .expect("slow over HTTP");
    assert_eq!(slow.text(), "done after 2 steps");
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 2);
    let job = workspace
        .call_tool(
            "web",
            "long_job",
            json!({"steps": 2, "delay_ms": 50}),
            CallOptions::default(),
        )
        .await
        .expect("a Task over HTTP");
    assert_eq!(job.text(), "job done after 2 steps");
    shutdown_clean(host).await;
    let _ = child.kill().await;
}
