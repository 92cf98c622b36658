//! What a server asks mid-call: elicitation (form and url) and MRTR rounds, a legacy
//! server's questions, Tasks, one deadline over every round.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitations_reach_the_interaction_end_to_end() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let asked: Arc<Mutex<Vec<plurnk_mcp::Interaction>>> = Arc::default();
    let record = asked.clone();
    let handler: plurnk_mcp::InteractionHandler = Arc::new(move |interaction| {
        if let Ok(mut asked) = record.lock() {
            asked.push(interaction.clone());
        }
        // A url elicitation is accepted with no content: the user went to the URL.
        Box::pin(async move { accept_each(&interaction, json!(null)) })
    });
    let visited = workspace
        .call_tool(
            "py",
            "ask_url",
            json!({}),
            CallOptions::default().with_interaction(Some(handler)),
        )
        .await
        .expect("the url round completes");
    assert_eq!(visited.text(), "visited", "{:?}", visited.result);
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        matches!(
            asked[0].requests.get("visit"),
            // (The Python SDK writes no elicitationId into a 2026-07-28 input request.)
            Some(Elicitation::Url { url, message, .. })
                if url == "https://example.test/consent" && message == "Consent at the provider"
        ),
        "{asked:?}"
    );
    // No handler: declined, and the server says so.
    let declined = workspace
        .call_tool("py", "ask_url", json!({}), CallOptions::default())
        .await
        .expect("a decline is a standard answer");
    assert_eq!(declined.text(), "not visited");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_rounds_go_through_the_interaction() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let asked: Arc<Mutex<Vec<plurnk_mcp::Interaction>>> = Arc::default();
    let record = asked.clone();
    let handler: plurnk_mcp::InteractionHandler = Arc::new(move |interaction| {
        if let Ok(mut asked) = record.lock() {
            asked.push(interaction.clone());
        }
        Box::pin(async move { accept_each(&interaction, json!({"name": "Ada"})) })
    });
    for tool in ["ask_name", "ask_name_raw"] {
        let result = workspace
            .call_tool(
                "py",
                tool,
                json!({}),
                CallOptions::default().with_interaction(Some(handler.clone())),
            )
            .await
            .expect("the round completes");
        // The server only accepts the answer with its requestState echoed unchanged.
        assert_eq!(result.text(), "hello, Ada", "{tool}: {:?}", result.result);
    }
    let asked = asked.lock().map(|a| a.clone()).unwrap_or_default();
    assert_eq!(asked.len(), 2, "one interaction per input_required result");
    assert_eq!(asked[1].server, "py");
    assert_eq!(asked[1].operation, "ask_name_raw");
    assert!(matches!(
        asked[1].requests.get("name"),
        Some(Elicitation::Form { .. })
    ));

    // No handler: the host declines, which the server answers as it sees fit.
    let declined = workspace
        .call_tool("py", "ask_name", json!({}), CallOptions::default())
        .await
        .expect("a decline is a standard answer");
    assert_eq!(declined.text(), "no name given");

    // An answer that does not fit the form fails the call before any retry.
    let sloppy: plurnk_mcp::InteractionHandler = Arc::new(|interaction| {
        Box::pin(async move { accept_each(&interaction, json!({"name": 42})) })
    });
    let invalid = workspace
        .call_tool(
            "py",
            "ask_name_raw",
            json!({}),
            CallOptions::default().with_interaction(Some(sloppy)),
        )
        .await;
    assert!(
        matches!(invalid, Err(CallError::Interaction { .. })),
        "{invalid:?}"
    );

    // Input requests without a requestState are fine: the answers alone go back.
    let stateless = workspace
        .call_tool(
            "py",
            "ask_without_state",
            json!({}),
            CallOptions::default().with_interaction(Some(handler.clone())),
        )
        .await
        .expect("answered without a requestState");
    assert_eq!(stateless.text(), "hello, Ada");

    // A server that only wants its requestState back is answered without any interaction,
    // gently: 50, 100 then 200 ms apart.
    let started = Instant::now();
    let state_only = workspace
        .call_tool(
            "py",
            "ask_state_only",
            json!({"rounds": 3}),
            CallOptions::default(),
        )
        .await
        .expect("state-only rounds complete");
    assert_eq!(state_only.text(), "done after 3 state-only rounds");
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "state-only rounds were not spaced out: {:?}",
        started.elapsed()
    );

    // Neither input requests nor a requestState: the server broke the protocol.
    let nothing = workspace
        .call_tool("py", "ask_nothing", json!({}), CallOptions::default())
        .await;
    assert!(
        matches!(&nothing, Err(CallError::Protocol { detail, .. }) if detail.contains("neither")),
        "{nothing:?}"
    );

    // Progress from a modern peer too.
    let (seen, sink) = recorder();
    let slow = workspace
        .call_tool(
            "py",
            "slow",
            json!({"steps": 3, "delay_ms": 20}),
            CallOptions::default().with_progress(Some(sink)),
        )
        .await
        .expect("slow");
    assert_eq!(slow.text(), "done after 3 steps");
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 3);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_driven_to_their_end_through_the_original_call() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();

    // An unsolicited Task keeps the original call pending until it completes.
    let started = Instant::now();
    let done = workspace
        .call_tool(
            "py",
            "long_job",
            json!({"steps": 3, "delay_ms": 100}),
            CallOptions::default(),
        )
        .await
        .expect("the task completes");
    assert_eq!(done.text(), "job done after 3 steps");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );

    // A failed Task keeps its JSON-RPC error.
    let failed = workspace
        .call_tool(
            "py",
            "long_job",
            json!({"steps": 1, "delay_ms": 50, "fail": true}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(failed, Err(CallError::Remote { .. })),
        "{failed:?}"
    );

    // Task input goes through the caller's interaction and tasks/update.
    let asked = Arc::new(Mutex::new(0usize));
    let count = asked.clone();
    let handler: plurnk_mcp::InteractionHandler = Arc::new(move |interaction| {
        if let Ok(mut count) = count.lock() {
            *count += 1;
        }
        Box::pin(async move { accept_each(&interaction, json!({"name": "Grace"})) })
    });
    let answered = workspace
        .call_tool(
            "py",
            "long_job_ask",
            json!({"steps": 1, "delay_ms": 50}),
            CallOptions::default().with_interaction(Some(handler)),
        )
        .await
        .expect("the task completes after its input");
    assert!(answered.text().contains("Grace"), "{:?}", answered.result);
    assert_eq!(
        *asked.lock().expect("lock"),
        1,
        "each input key is asked once"
    );

    // Cancelling the call, once its Task is being polled, cancels the Task first.
    let task_log = || {
        let workspace = workspace.clone();
        async move {
            let log = workspace
                .call_tool("py", "task_log", json!({}), CallOptions::default())
                .await
                .expect("task_log");
            serde_json::from_str::<serde_json::Value>(&log.text()).expect("task_log is JSON")
        }
    };
    let before: Vec<String> = task_log()
        .await
        .as_object()
        .map(|tasks| tasks.keys().cloned().collect())
        .unwrap_or_default();
    let polled = {
        let before = before.clone();
        let task_log = &task_log;
        async move {
            let polled = wait::until_async(BOUND, || async {
                task_log().await.as_object().is_some_and(|tasks| {
                    tasks.iter().any(|(id, task)| {
                        !before.contains(id) && task["polls"].as_u64().unwrap_or(0) >= 1
                    })
                })
            })
            .await;
            assert!(polled, "the Task is polled");
        }
    };
    let cancelled = call_then_cancel(
        &workspace,
        "py",
        "long_job",
        json!({"steps": 500, "delay_ms": 200}),
        CallOptions::default(),
        polled,
    )
    .await;
    assert!(
        matches!(cancelled, Err(CallError::Cancelled { .. })),
        "{cancelled:?}"
    );
    let log = task_log().await;
    let statuses: Vec<&str> = log
        .as_object()
        .map(|tasks| {
            tasks
                .iter()
                .filter(|(id, _)| !before.contains(id))
                .filter_map(|(_, task)| task["status"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        statuses,
        ["cancelled"],
        "tasks/cancel reached the server: {log}"
    );

    // A Task the server cancels itself settles the call as cancelled.
    let cancelled_by_server = workspace
        .call_tool(
            "py",
            "long_job",
            json!({"steps": 1, "delay_ms": 50, "server_cancels": true}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(cancelled_by_server, Err(CallError::Cancelled { .. })),
        "{cancelled_by_server:?}"
    );

    // The deadline bounds the whole Task, not one poll.
    let bounded = workspace
        .call_tool(
            "py",
            "long_job",
            json!({"steps": 50, "delay_ms": 200}),
            CallOptions::default().with_timeout(Some(Duration::from_millis(700))),
        )
        .await;
    assert!(
        matches!(bounded, Err(CallError::Timeout { .. })),
        "{bounded:?}"
    );
    shutdown_clean(host).await;
}

/// The caller's deadline owns the whole operation: four input rounds of a second each, and
/// a Task that takes a second to be created and would then run for ten, both end at the one
/// deadline of 1.5 s (plus at most the 500 ms the cancellation's round trip is allowed here),
/// the server is told, and the error names the deadline that passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_deadline_owns_every_round_and_the_task_and_the_server_is_told() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let deadline = Duration::from_millis(1_500);
    let bound = deadline + Duration::from_millis(500);
    let options = || CallOptions::default().with_timeout(Some(deadline));
    let log = |tool: &'static str| {
        let workspace = workspace.clone();
        async move {
            let text = workspace
                .call_tool("py", tool, json!({}), CallOptions::default())
                .await
                .expect("the log answers")
                .text();
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
        }
    };

    let started = Instant::now();
    let rounds = workspace
        .call_tool(
            "py",
            "slow_rounds",
            json!({"rounds": 4, "delay_ms": 1000}),
            options(),
        )
        .await;
    let took = started.elapsed();
    match &rounds {
        Err(error @ CallError::Timeout { timeout_ms, .. }) => {
            assert_eq!(*timeout_ms, 1_500, "{error}");
            assert!(error.to_string().contains("1500 ms"), "{error}");
        }
        other => panic!("the rounds end at the deadline: {other:?}"),
    }
    assert!(took < bound, "four rounds took {took:?}");
    // The round in flight at the deadline was cancelled on the server, and none ran after it.
    let rounds_log = loop {
        let rounds_log = log("round_log").await;
        if rounds_log.as_array().is_some_and(|log| log.len() >= 2) {
            break rounds_log;
        }
        assert!(started.elapsed() < BOUND, "{rounds_log}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(rounds_log, json!(["finished:1", "cancelled:2"]));

    let before: Vec<String> = log("task_log")
        .await
        .as_object()
        .map(|tasks| tasks.keys().cloned().collect())
        .unwrap_or_default();
    let started = Instant::now();
    let task = workspace
        .call_tool(
            "py",
            "long_job",
            json!({"steps": 50, "delay_ms": 200, "create_delay_ms": 1000}),
            options(),
        )
        .await;
    let took = started.elapsed();
    assert!(
        matches!(
            task,
            Err(CallError::Timeout {
                timeout_ms: 1_500,
                ..
            })
        ),
        "{task:?}"
    );
    assert!(took < bound, "the Task took {took:?}");
    let tasks = log("task_log").await;
    let statuses: Vec<&str> = tasks
        .as_object()
        .map(|tasks| {
            tasks
                .iter()
                .filter(|(id, _)| !before.contains(id))
                .filter_map(|(_, task)| task["status"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        statuses,
        ["cancelled"],
        "tasks/cancel reached the server: {tasks}"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_peers_elicitation_goes_to_the_hosts_interaction() {
    let peers = peers();
    let everything = || {
        config(&[
            ("PLURNK_MCP_EVERYTHING", peers.node.clone()),
            (
                "PLURNK_MCP_EVERYTHING_ARGS",
                json!([peers.everything, "stdio"]).to_string(),
            ),
            ("PLURNK_MCP_ENABLED", json!(["everything"]).to_string()),
        ])
    };
    let handler: plurnk_mcp::InteractionHandler = Arc::new(|interaction| {
        Box::pin(async move {
            assert_eq!(interaction.operation, "elicitation/create");
            accept_each(
                &interaction,
                json!({"name": "Ada", "check": true, "integer": 7}),
            )
        })
    });
    let host = Host::start_with(
        everything(),
        plurnk_mcp::HostOptions::default().with_interaction(Some(handler)),
    )
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let answered = workspace
        .call_tool(
            "everything",
            "trigger-elicitation-request",
            json!({}),
            CallOptions::default(),
        )
        .await
        .expect("the elicitation round completes");
    let text = answered.text();
    assert!(
        text.contains("- Name: Ada") && text.contains("Favorite Integer: 7"),
        "{text}"
    );
    shutdown_clean(host).await;

    // Without a handler the host declines, and the server says so.
    let host = Host::start(everything()).await.expect("host starts");
    let declined = host
        .default_workspace()
        .call_tool(
            "everything",
            "trigger-elicitation-request",
            json!({}),
            CallOptions::default(),
        )
        .await
        .expect("a decline is an answer");
    assert!(declined.text().contains("declined"), "{}", declined.text());
    shutdown_clean(host).await;
}

/// A legacy server's question goes to the call that caused it: its caller's interaction,
/// not the host's. While calls of two callers are in flight it names neither, so it is
/// declined rather than shown to the wrong one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_servers_question_goes_to_the_caller_whose_call_is_in_flight() {
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
    let asked = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let ada: plurnk_mcp::InteractionHandler = {
        let (asked, release) = (asked.clone(), release.clone());
        Arc::new(move |interaction| {
            let (asked, release) = (asked.clone(), release.clone());
            Box::pin(async move {
                asked.notify_one();
                release.notified().await;
                accept_each(
                    &interaction,
                    json!({"name": "Ada", "check": true, "integer": 7}),
                )
            })
        })
    };
    let bob: plurnk_mcp::InteractionHandler = Arc::new(|interaction| {
        Box::pin(async move {
            accept_each(
                &interaction,
                json!({"name": "Bob", "check": true, "integer": 8}),
            )
        })
    });
    let ask = |handler: plurnk_mcp::InteractionHandler| {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            workspace
                .call_tool(
                    "everything",
                    "trigger-elicitation-request",
                    json!({}),
                    CallOptions::default().with_interaction(Some(handler)),
                )
                .await
        })
    };
    // Ada's call asks alone: her handler has the question. Bob's call asks while Ada's is in
    // flight: the question names neither, so it is declined. The server announces its tools
    // again after it starts (it registers this tool once it knows the host's capabilities);
    // when that change arrives late, on a busy machine, it waits for Ada's call to settle and
    // Bob's call waits behind it (calls never run beside a change that waits), so the two are
    // never in flight together: then both are let go and the scene is played again, on the
    // settled catalog.
    let mut played = false;
    for _ in 0..3 {
        let first = ask(ada.clone());
        tokio::time::timeout(BOUND, asked.notified())
            .await
            .expect("the first caller is asked");
        let mut second = ask(bob.clone());
        let Ok(second) = tokio::time::timeout(Duration::from_secs(5), &mut second).await else {
            release.notify_one();
            for call in [first, second] {
                let _ = tokio::time::timeout(BOUND, call).await.expect("settles");
            }
            continue;
        };
        let second = second.expect("joined").expect("a decline is an answer");
        assert!(second.text().contains("declined"), "{}", second.text());
        release.notify_one();
        let first = tokio::time::timeout(BOUND, first)
            .await
            .expect("settles")
            .expect("joined")
            .expect("answered");
        assert!(first.text().contains("- Name: Ada"), "{}", first.text());
        played = true;
        break;
    }
    assert!(played, "Bob's call never ran beside Ada's");
    // Alone again, Bob's call gets his own answer, not the host's (there is none here).
    let alone = ask(bob).await.expect("joined").expect("answered");
    assert!(alone.text().contains("- Name: Bob"), "{}", alone.text());
    shutdown_clean(host).await;
}
