//! The MCP surfaces beyond tools — resources, templates, prompts, completion, progress,
//! cancellation, multi-round-trip input — against real peers: the project's fixture server,
//! `@modelcontextprotocol/server-everything` (a 2025-11-25 peer) and the Python SDK
//! (`mcp==2.3.0`, a 2026-07-28 peer); and the EXEC bridge over them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plurnk_mcp::{
    CallError, CallOptions, CompletionRef, Effect, Elicitation, ElicitationAnswer, Host,
    HostConfig, HostEvent, Progress, ServerState, TelemetryEvent, exec,
};
use serde_json::json;

#[path = "support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "support/calls.rs"]
mod calls;
#[path = "support/env.rs"]
mod env;
#[path = "support/wait.rs"]
mod wait;
use calls::{BOUND, call_then_cancel, shutdown_clean};
use env::EXE;

/// The configuration of these variables, connecting within 30 s.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::connecting_within(30_000, pairs)
}

/// Collects progress reports in order.
fn recorder() -> (Arc<Mutex<Vec<Progress>>>, plurnk_mcp::ProgressSink) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let sink: plurnk_mcp::ProgressSink = Arc::new(move |progress| {
        if let Ok(mut seen) = sink_seen.lock() {
            seen.push(progress);
        }
    });
    (seen, sink)
}

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

/// Accepts every request of `interaction` with the same `content`.
fn accept_each(
    interaction: &plurnk_mcp::Interaction,
    content: serde_json::Value,
) -> BTreeMap<String, ElicitationAnswer> {
    interaction
        .requests
        .keys()
        .map(|key| {
            (
                key.clone(),
                ElicitationAnswer::Accept {
                    content: content.as_object().cloned(),
                },
            )
        })
        .collect()
}

fn python_surfaces() -> HostConfig {
    let peers = peers();
    config(&[
        ("PLURNK_MCP_PY", peers.python.clone()),
        (
            "PLURNK_MCP_PY_ARGS",
            json!([peer_script("python_surfaces.py")]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["py"]).to_string()),
    ])
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
async fn a_list_change_commits_only_after_in_flight_calls_settle() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let has_dynamic = |snapshot: &plurnk_mcp::WorkspaceSnapshot| {
        snapshot
            .server("py")
            .is_some_and(|s| s.tools.iter().any(|t| t.name == "dynamic_extra"))
    };
    assert!(!has_dynamic(&workspace.snapshot()));
    // One timeline of what the caller saw: the slow call's progress reports, and each
    // snapshot published, in the order they were observed.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Progress(f64),
        Committed { dynamic: bool },
    }
    let timeline = Arc::new(Mutex::new(Vec::new()));
    let watcher = {
        let (workspace, timeline) = (workspace.clone(), timeline.clone());
        tokio::spawn(async move {
            let mut version = workspace.snapshot().version;
            loop {
                let snapshot = workspace.wait_for(BOUND, |s| s.version > version).await;
                if snapshot.version == version {
                    return;
                }
                version = snapshot.version;
                let dynamic = has_dynamic(&snapshot);
                if let Ok(mut timeline) = timeline.lock() {
                    timeline.push(Seen::Committed { dynamic });
                }
                if dynamic {
                    return;
                }
            }
        })
    };
    let sink: plurnk_mcp::ProgressSink = {
        let timeline = timeline.clone();
        Arc::new(move |progress: Progress| {
            if let Ok(mut timeline) = timeline.lock() {
                timeline.push(Seen::Progress(progress.progress));
            }
        })
    };
    // A call that stays in flight across the list change: the change is announced once its
    // first report arrived, with most of its steps still to go.
    let slow = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            workspace
                .call_tool(
                    "py",
                    "slow",
                    json!({"steps": 8, "delay_ms": 200}),
                    CallOptions::default().with_progress(Some(sink)),
                )
                .await
        })
    };
    let first_report = wait::until(BOUND, || {
        timeline
            .lock()
            .is_ok_and(|t| t.iter().any(|seen| matches!(seen, Seen::Progress(_))))
    })
    .await;
    assert!(first_report, "the slow call reported progress");
    let added = workspace
        .call_tool(
            "py",
            "add_tool",
            json!({"name": "dynamic_extra"}),
            CallOptions::default(),
        )
        .await
        .expect("add_tool");
    assert!(!added.is_error, "{:?}", added.result);
    let reports_then = timeline
        .lock()
        .map(|t| {
            t.iter()
                .filter(|seen| matches!(seen, Seen::Progress(_)))
                .count()
        })
        .unwrap_or_default();
    assert!(
        reports_then < 8,
        "the change was announced while the call was still in flight ({reports_then} of 8 steps done)"
    );
    let slow_result = slow.await.expect("no panic");
    assert_eq!(
        slow_result.expect("slow completes").text(),
        "done after 8 steps"
    );
    let committed = workspace
        .wait_for(BOUND, |snapshot| has_dynamic(snapshot))
        .await;
    assert!(
        has_dynamic(&committed),
        "the list change was committed after quiescence"
    );
    tokio::time::timeout(BOUND, watcher)
        .await
        .expect("the watcher saw the commit")
        .expect("no panic");
    // The new catalog was published only after the slow call's last report: not while it
    // was in flight.
    let timeline: Vec<(bool, bool)> = timeline
        .lock()
        .map(|t| {
            t.iter()
                .map(|seen| match seen {
                    Seen::Progress(_) => (true, false),
                    Seen::Committed { dynamic } => (false, *dynamic),
                })
                .collect()
        })
        .unwrap_or_default();
    let last_progress = timeline.iter().rposition(|(progress, _)| *progress);
    let first_dynamic = timeline.iter().position(|(_, dynamic)| *dynamic);
    assert!(
        first_dynamic > last_progress,
        "the change committed while the call was in flight: {timeline:?}"
    );
    // The new tool is callable, on the same connection.
    let generation = committed.server("py").map(|s| s.generation);
    let called = workspace
        .call_tool("py", "dynamic_extra", json!({}), CallOptions::default())
        .await
        .expect("the new tool is routed");
    assert!(
        called.text().contains("dynamic_extra"),
        "{:?}",
        called.result
    );
    assert_eq!(
        workspace.snapshot().server("py").map(|s| s.generation),
        generation
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_reads_honour_the_servers_ttl() {
    let host = Host::start(config(&[
        ("PLURNK_MCP_FIXTURE", EXE.into()),
        ("PLURNK_MCP_FIXTURE_ARGS", json!(["fixture"]).to_string()),
        ("PLURNK_MCP_ENABLED", json!(["fixture"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let uri = plurnk_mcp_fixture::COUNTER_URI;
    let read = || async {
        workspace
            .read_resource("fixture", uri, CallOptions::default())
            .await
            .map(|result| {
                result["contents"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
    };
    // The server counts its reads and marks each answer fresh for 300 ms.
    let first = read().await.expect("read");
    let again = read().await.expect("read");
    assert_eq!(first, "reads: 1");
    assert_eq!(again, first, "a fresh answer is served from the cache");
    // Once stale, the next read reaches the server again.
    let deadline = Instant::now() + BOUND;
    let mut latest = again;
    while latest == first && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        latest = read().await.expect("read");
    }
    assert_eq!(
        latest, "reads: 2",
        "the expired entry was fetched again, once"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_reach_the_events_stream() {
    let host = Host::start(python_surfaces()).await.expect("host starts");
    let workspace = host.default_workspace();
    let mut events = host.events();
    // Reading a resource makes the listen stream follow it. A note is read first, so the
    // filter that follows the greeting follows the note too (it serves as a barrier below).
    workspace
        .read_resource("py", "memo://notes/todo", CallOptions::default())
        .await
        .expect("read");
    workspace
        .read_resource("py", "memo://greeting", CallOptions::default())
        .await
        .expect("read");
    // The filter change is acknowledged by the server before it counts; touch until seen.
    let deadline = Instant::now() + BOUND;
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        workspace
            .call_tool(
                "py",
                "touch",
                json!({"uri": "memo://greeting"}),
                CallOptions::default(),
            )
            .await
            .expect("touch");
        let wait = tokio::time::timeout(Duration::from_millis(300), async {
            loop {
                match events.recv().await {
                    Ok(plurnk_mcp::HostEvent::ResourceUpdated { alias, uri, .. }) => {
                        return alias == "py" && uri == "memo://greeting";
                    }
                    Ok(_) => continue,
                    Err(_) => return false,
                }
            }
        })
        .await;
        seen = wait.unwrap_or(false);
    }
    assert!(
        seen,
        "the update of a resource that was read reached the events stream"
    );
    // A resource never read is not followed.
    workspace
        .call_tool(
            "py",
            "touch",
            json!({"uri": "memo://logo"}),
            CallOptions::default(),
        )
        .await
        .expect("touch");
    // A barrier: the note, followed on the same stream, is touched after it; updates arrive
    // in order, so by the time the note's arrives a stray one would have too.
    workspace
        .call_tool(
            "py",
            "touch",
            json!({"uri": "memo://notes/todo"}),
            CallOptions::default(),
        )
        .await
        .expect("touch");
    let before_barrier = tokio::time::timeout(BOUND, async {
        let mut seen = Vec::new();
        loop {
            if let Ok(plurnk_mcp::HostEvent::ResourceUpdated { uri, .. }) = events.recv().await {
                if uri == "memo://notes/todo" {
                    return seen;
                }
                seen.push(uri);
            }
        }
    })
    .await
    .expect("the barrier's update arrived");
    assert!(
        !before_barrier.iter().any(|uri| uri == "memo://logo"),
        "an update for an unread resource arrived: {before_barrier:?}"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discover_answer_is_kept_whole_and_asked_again_when_its_ttl_passes() {
    let host = Host::start(config(&[
        ("PLURNK_MCP_FRESH", EXE.into()),
        (
            "PLURNK_MCP_FRESH_ARGS",
            json!(["fixture", "--discover-ttl-ms", "100"]).to_string(),
        ),
        ("PLURNK_MCP_OLD", EXE.into()),
        (
            "PLURNK_MCP_OLD_ARGS",
            json!(["fixture", "--legacy"]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["fresh", "old"]).to_string()),
    ]))
    .await
    .expect("host starts");
    let workspace = host.default_workspace();
    let negotiated = |alias: &str| {
        workspace
            .snapshot()
            .server(alias)
            .and_then(|server| server.negotiated.clone())
            .unwrap_or_else(|| panic!("{alias} negotiated"))
    };
    // What rmcp does not keep of the answer is kept: the revisions, the ttl, the scope.
    let first = negotiated("fresh");
    let discovery = first
        .discovery
        .clone()
        .expect("a modern server's discover hints");
    assert!(
        discovery
            .supported_versions
            .iter()
            .any(|v| v == "2026-07-28")
            && discovery.supported_versions.len() > 1,
        "{discovery:?}"
    );
    assert_eq!(discovery.ttl_ms, 100);
    assert_eq!(discovery.cache_scope, "private");
    assert!(
        first
            .instructions
            .as_deref()
            .is_some_and(|i| i.ends_with("(discover answer 1)")),
        "{:?}",
        first.instructions
    );
    // Once the answer goes stale the server is asked again and what it now says is published
    // (no sooner than the one-second floor of every freshness hint).
    workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("fresh")
                .and_then(|server| server.negotiated.as_ref())
                .and_then(|negotiated| negotiated.instructions.as_deref())
                .is_some_and(|instructions| !instructions.ends_with("(discover answer 1)"))
        })
        .await;
    let now = negotiated("fresh");
    assert!(
        now.instructions.as_deref().is_some_and(|i| i.contains("(discover answer ")
            && !i.ends_with("(discover answer 1)")),
        "the stale discover answer was not asked again: {:?}",
        now.instructions
    );
    assert_eq!(
        now.revision, first.revision,
        "the revision stays as negotiated"
    );
    assert_eq!(now.discovery, Some(discovery));
    // A legacy server negotiated through initialize has no discover answer to keep.
    assert_eq!(negotiated("old").discovery, None);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_is_fetched_again_when_its_ttl_passes() {
    let host = Host::start(config(&[
        ("PLURNK_MCP_FRESH", EXE.into()),
        (
            "PLURNK_MCP_FRESH_ARGS",
            json!(["fixture", "--list-ttl-ms", "100"]).to_string(),
        ),
        ("PLURNK_MCP_STATIC", EXE.into()),
        ("PLURNK_MCP_STATIC_ARGS", json!(["fixture"]).to_string()),
        // One tool per page, each page fresh for 100 ms: the list is as fresh as its pages.
        ("PLURNK_MCP_PAGED", EXE.into()),
        (
            "PLURNK_MCP_PAGED_ARGS",
            json!([
                "fixture",
                "--paging",
                "one-per-page",
                "--list-ttl-ms",
                "100"
            ])
            .to_string(),
        ),
        // Its tool list carries no ttlMs; its resources and prompts say 100 ms.
        ("PLURNK_MCP_CATALOG", EXE.into()),
        (
            "PLURNK_MCP_CATALOG_ARGS",
            json!(["fixture", "--catalog-ttl-ms", "100"]).to_string(),
        ),
        (
            "PLURNK_MCP_ENABLED",
            json!(["fresh", "static", "paged", "catalog"]).to_string(),
        ),
    ]))
    .await
    .expect("host starts");
    // Both were listed once by now: the floor counts from here.
    let started = Instant::now();
    let workspace = host.default_workspace();
    let lists = |alias: &'static str| {
        let workspace = workspace.clone();
        async move {
            workspace
                .call_tool(alias, "lists", json!({}), CallOptions::default())
                .await
                .map(|r| r.text().parse::<u64>().unwrap_or_default())
                .unwrap_or_default()
        }
    };
    // A 100 ms ttl is honoured, but no more than once a second: the list is fetched again
    // (three lists in all, the first at start), and never faster than that floor.
    let deadline = Instant::now() + BOUND;
    let mut fresh = lists("fresh").await;
    while fresh < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fresh = lists("fresh").await;
    }
    let elapsed = started.elapsed();
    assert!(
        fresh >= 3,
        "the stale list was fetched again ({fresh} lists)"
    );
    // One list at start plus at most one per whole second since (one more for rounding).
    let allowed = 2 + elapsed.as_secs();
    assert!(
        fresh <= allowed,
        "{fresh} lists within {elapsed:?}: the one-second floor was not kept"
    );
    assert_eq!(
        lists("static").await,
        1,
        "a list without ttlMs waits for a change notification"
    );
    // Resources and prompts that say how long they are fresh are listed again too (the
    // whole catalog is, tools included, so the tool list's count shows it).
    let mut catalog = lists("catalog").await;
    while catalog < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        catalog = lists("catalog").await;
    }
    assert!(
        catalog >= 3,
        "a stale resource and prompt list was fetched again ({catalog} lists)"
    );
    let pages = workspace
        .snapshot()
        .server("paged")
        .map(|s| s.tools.len() as u64)
        .unwrap_or_default();
    let mut paged = lists("paged").await;
    while paged < 2 * pages && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        paged = lists("paged").await;
    }
    assert!(
        pages > 1 && paged >= 2 * pages,
        "a paged list whose pages carry ttlMs was fetched again ({paged} requests, {pages} pages)"
    );
    assert_eq!(
        workspace.snapshot().server("fresh").map(|s| s.state),
        Some(ServerState::Ready)
    );
    shutdown_clean(host).await;
}

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

// === results handed on as the server wrote them ===

/// A host on the fixture's `odd-results` server (stdio) as `odd`.
fn odd_results() -> HostConfig {
    config(&[
        ("PLURNK_MCP_ODD", EXE.into()),
        (
            "PLURNK_MCP_ODD_ARGS",
            json!(["fixture", "--hostile", "odd-results"]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED", json!(["odd"]).to_string()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_reaches_the_caller_as_the_server_wrote_it() {
    let host = Host::start(odd_results()).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let odd = snapshot.server("odd").expect("configured");
    assert_eq!(odd.state, ServerState::Ready, "{:?}", odd.problem);

    // A content block type no revision defines; fields no revision defines, at the top and
    // in a known block: each result handed on, as JSON, exactly as written, to the caller
    // and to EXEC.
    for (tool, expected, text) in [
        ("odd", plurnk_mcp_fixture::hostile::odd_result(), "known"),
        (
            "extra",
            plurnk_mcp_fixture::hostile::extra_result(),
            "with a field of its own",
        ),
    ] {
        let called = workspace
            .call_tool("odd", tool, json!({}), CallOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"));
        assert_eq!(called.result, expected, "{tool}");
        assert!(!called.is_error);
        assert_eq!(called.text(), text);
        let value = exec::run(
            &workspace,
            &format!("<<EXEC[odd]({tool}):EXEC"),
            CallOptions::default(),
        )
        .await
        .unwrap_or_else(|error| panic!("{tool} through EXEC: {error}"));
        assert_eq!(value, expected, "{tool} through EXEC");
    }

    // A resource read: fields no revision defines, at the top and in a content, kept; the
    // second read (within its ttlMs) from what the host kept, as whole.
    for _ in 0..2 {
        let read = workspace
            .read_resource(
                "odd",
                plurnk_mcp_fixture::hostile::ODD_RESOURCE,
                CallOptions::default(),
            )
            .await
            .expect("the odd resource");
        assert_eq!(read, plurnk_mcp_fixture::hostile::odd_resource());
    }

    // The one refusal the specification asks for stays: a standalone blob block.
    let blob = workspace
        .call_tool("odd", "blob", json!({}), CallOptions::default())
        .await;
    assert!(
        matches!(&blob, Err(CallError::Protocol { detail, .. }) if detail.contains("standalone blob")),
        "{blob:?}"
    );
    // The server is still there for the next call.
    let echo = workspace
        .call_tool(
            "odd",
            "echo",
            json!({"text": "still"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "still");
    shutdown_clean(host).await;
}

/// One 2026-07-28 `tools/call` POSTed to a gateway; the JSON-RPC answer, from a JSON body or
/// the event of a stream that holds it.
async fn call_through_gateway(url: &str, id: u64, name: &str) -> serde_json::Value {
    let message = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "surfaces-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let body = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .json(&message)
        .send()
        .await
        .expect("the gateway answers")
        .text()
        .await
        .expect("a body");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) {
        return value;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_hands_a_result_on_as_the_server_wrote_it() {
    use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
    use plurnk_mcp_fixture::hostile::{extra_result, odd_result};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let host = Host::start(odd_results()).await.expect("host starts");
    let workspace = host.default_workspace();
    assert_eq!(
        workspace.snapshot().server("odd").map(|s| s.state),
        Some(ServerState::Ready)
    );

    // A 2026-07-28 client over Streamable HTTP: each answer as the server wrote it, with
    // the resultType its revision requires.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let served = tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        listener,
        HttpOptions::default(),
        stop.clone(),
    ));
    for (id, tool, mut expected) in [
        (1, "odd_odd", odd_result()),
        (2, "odd_extra", extra_result()),
    ] {
        expected["resultType"] = json!("complete");
        let answer = call_through_gateway(&url, id, tool).await;
        assert_eq!(answer["result"], expected, "{tool}: {answer}");
    }
    let blob = call_through_gateway(&url, 3, "odd_blob").await;
    assert!(
        blob["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("standalone blob")),
        "{blob}"
    );

    // A 2025-11-25 client over stdio: the same answers, without the resultType its revision
    // does not have.
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let session = tokio::spawn(
        Gateway::new(workspace.clone(), Naming::Prefixed).serve_io(server_read, server_write),
    );
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(client_read).lines();
    let mut send = async |message: serde_json::Value| {
        client_write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "surfaces-test", "version": "1"}}}),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    for (id, tool) in [(1, "odd_odd"), (2, "odd_extra")] {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": {}}}))
        .await;
    }
    let mut answers = BTreeMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(BOUND, lines.next_line())
            .await
            .expect("the gateway answers in time")
            .expect("read")
            .expect("a line");
        let message: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message["result"].clone());
        }
    }
    assert_eq!(answers[&1], odd_result());
    assert_eq!(answers[&2], extra_result());
    drop(lines);
    drop(client_write);
    let _ = tokio::time::timeout(BOUND, session).await;
    stop.cancel();
    let _ = served.await;
    shutdown_clean(host).await;
}
