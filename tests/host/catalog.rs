//! What a server lists and when it is listed again: filters and effects, pagination, the
//! listing bounds, the ttl, list-change notifications, and a refresh that cannot complete.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use plurnk_mcp::{CallError, CallOptions, CompletionRef, Effect, Host, HostOptions, ServerState};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

use crate::calls::{BOUND, gate_call, holds_for, pid_of, shutdown_clean};
use crate::env::Env;
use crate::{fast_restarts, has_extra, queue_behind_a_change};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_and_read_filter_the_catalog_and_set_effects() {
    let config = Env::new()
        .stdio("some", &[])
        .set("PLURNK_MCP_SOME_TOOLS", json!(["echo", "add"]).to_string())
        .set("PLURNK_MCP_SOME_READ", json!(["echo"]).to_string())
        .stdio("none", &[])
        .set("PLURNK_MCP_NONE_TOOLS", "[]")
        .stdio("wrong", &[])
        .set(
            "PLURNK_MCP_WRONG_TOOLS",
            json!(["echo", "push"]).to_string(),
        )
        .stdio("all", &[])
        .enable(&["some", "none", "wrong", "all"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let some = snapshot.server("some").expect("some");
    let effects: BTreeMap<&str, Effect> = some
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.effect))
        .collect();
    assert_eq!(
        effects,
        BTreeMap::from([("add", Effect::Host), ("echo", Effect::Read)])
    );
    assert_eq!(
        snapshot.server("none").map(|s| (s.state, s.tools.len())),
        Some((ServerState::Ready, 0))
    );
    assert_eq!(snapshot.server("all").map(|s| s.tools.len()), Some(12));
    let wrong = snapshot.server("wrong").expect("wrong");
    assert_eq!(wrong.state, ServerState::Unavailable);
    assert!(
        wrong.tools.is_empty(),
        "a policy mismatch publishes nothing"
    );
    assert!(wrong.negotiated.is_none(), "not even its negotiation");
    let detail = wrong
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains("\"push\"") && detail.contains("PLURNK_MCP_WRONG_TOOLS"),
        "{detail}"
    );
    let refused = workspace
        .call_tool("some", "sleep", json!({"ms": 1}), CallOptions::default())
        .await;
    assert!(
        matches!(refused, Err(CallError::UnknownTool { .. })),
        "{refused:?}"
    );
    let sum = workspace
        .call_tool(
            "some",
            "add",
            json!({"a": 20, "b": 22}),
            CallOptions::default(),
        )
        .await
        .expect("add");
    assert_eq!(sum.text(), "42");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_drained_and_a_non_converging_server_is_refused() {
    let probe = Probe::start().await;
    let config = Env::new()
        .stdio("paged", &["--paging", "one-per-page"])
        .stdio("looping", &["--paging", "repeat-cursor"])
        .probed("endless", &probe, &["--paging", "endless"])
        .enable(&["paged", "looping", "endless"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let paged = snapshot.server("paged").expect("paged");
    assert_eq!(paged.state, ServerState::Ready);
    assert_eq!(paged.tools.len(), 12, "every page was drained");
    // Each list method follows its own cursor: resources, templates and prompts come one per
    // page too (a request that dropped the cursor would be handed the first page again).
    assert_eq!(
        paged
            .catalog
            .resources
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>(),
        ["fixture://counter", "fixture://page/1", "fixture://page/2"]
    );
    assert_eq!(
        paged
            .catalog
            .templates
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["template-1", "template-2"]
    );
    assert_eq!(
        paged
            .catalog
            .prompts
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["prompt-1", "prompt-2"]
    );
    for (alias, expected) in [
        ("looping", "repeated the cursor"),
        ("endless", "more than 100 pages"),
    ] {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        assert!(server.tools.is_empty(), "no partial catalog is published");
        let detail = server
            .problem
            .as_ref()
            .map(|p| p.detail.clone())
            .unwrap_or_default();
        assert!(detail.contains(expected), "{alias}: {detail}");
    }
    // The bound is the number of pages actually asked for, not only its wording: pages 0 to
    // 99 were requested and not one more (each page reaches the probe before its answer; a
    // reconnect would start again at page 0).
    let last_page = probe
        .events()
        .iter()
        .filter_map(|e| e.id.strip_prefix("tools/listpage-"))
        .filter_map(|n| n.parse::<u64>().ok())
        .max();
    assert_eq!(last_page, Some(99), "the endless server was paged too far");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_goes_only_to_a_server_that_offers_it() {
    let config = Env::new()
        .stdio("bare", &["--tools-only"])
        .stdio("full", &["--paging", "one-per-page", "--completions"])
        .enable(&["bare", "full"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let complete = |alias: &'static str, context: &[(&str, &str)]| {
        let workspace = workspace.clone();
        let context = context
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        async move {
            workspace
                .complete(
                    alias,
                    CompletionRef::Prompt {
                        name: "prompt-1".into(),
                    },
                    "topic",
                    "a",
                    context,
                )
                .await
        }
    };
    let prompt = |alias: &'static str, name: &'static str| {
        let workspace = workspace.clone();
        async move {
            workspace
                .get_prompt(alias, name, json!({}), CallOptions::default())
                .await
        }
    };
    // A server that offers tools only: nothing else is sent to it.
    let read = workspace
        .read_resource("bare", "fixture://counter", CallOptions::default())
        .await;
    assert!(
        matches!(&read, Err(CallError::Unsupported { what, .. }) if what == "resources"),
        "{read:?}"
    );
    let completed = complete("bare", &[]).await;
    assert!(
        matches!(&completed, Err(CallError::Unsupported { what, .. }) if what == "completion"),
        "{completed:?}"
    );
    let asked = prompt("bare", "prompt-1").await;
    assert!(
        matches!(asked, Err(CallError::UnknownPrompt { .. })),
        "{asked:?}"
    );
    // A server that offers them all is asked.
    let read = workspace
        .read_resource("full", "fixture://counter", CallOptions::default())
        .await
        .expect("the resource is read");
    assert!(read.to_string().contains("reads: 1"), "{read}");
    // The fixture completes to what it was sent: the value, then the context given.
    assert_eq!(complete("full", &[]).await.expect("completed"), ["a"]);
    assert_eq!(
        complete("full", &[("lang", "rust"), ("area", "mcp")])
            .await
            .expect("completed"),
        ["a", "area=mcp", "lang=rust"]
    );
    // A listed prompt is sent (this server then refuses it itself); an unlisted one is not.
    let asked = prompt("full", "prompt-1").await;
    assert!(matches!(asked, Err(CallError::Remote { .. })), "{asked:?}");
    let asked = prompt("full", "prompt-9").await;
    assert!(
        matches!(asked, Err(CallError::UnknownPrompt { .. })),
        "{asked:?}"
    );
    shutdown_clean(host).await;
}

/// One fixture server under `limits`: its state and Problem once hydrated, and its tools.
async fn listed_under(limits: plurnk_mcp::Limits) -> (ServerState, String, usize) {
    let config = Env::new().stdio("lister", &[]).enable(&["lister"]).config();
    let options = HostOptions::default().with_limits(limits);
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let server = snapshot.server("lister").expect("configured");
    let listed = (
        server.state,
        server
            .problem
            .as_ref()
            .map(|p| p.detail.clone())
            .unwrap_or_default(),
        server.tools.len(),
    );
    let catalog = &server.catalog;
    assert!(
        [
            catalog.resources.len(),
            catalog.templates.len(),
            catalog.prompts.len()
        ]
        .iter()
        .all(|&n| n < server.tools.len().max(1)),
        "the tools must be the fixture's longest list for this test"
    );
    shutdown_clean(host).await;
    listed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_is_admitted_up_to_its_bounds_and_refused_past_them() {
    let (state, _, tools) = listed_under(plurnk_mcp::Limits::default()).await;
    assert_eq!(state, ServerState::Ready);
    // Exactly as many items as the bound: admitted.
    let (state, problem, listed) =
        listed_under(plurnk_mcp::Limits::default().with_max_items(tools)).await;
    assert_eq!((state, listed), (ServerState::Ready, tools), "{problem}");
    // One more than the bound: refused, and the Problem names the bound.
    let (state, problem, _) =
        listed_under(plurnk_mcp::Limits::default().with_max_items(tools - 1)).await;
    assert_eq!(state, ServerState::Unavailable);
    assert!(
        problem.contains(&format!("more than {} items", tools - 1)),
        "{problem}"
    );
    // Bytes too: the fixture's twelve tools with their schemas are well over a kilobyte.
    let (state, problem, _) =
        listed_under(plurnk_mcp::Limits::default().with_max_list_bytes(1000)).await;
    assert_eq!(state, ServerState::Unavailable);
    assert!(problem.contains("more than 1000 bytes"), "{problem}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_past_its_ttl_is_listed_again_by_itself() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("aging", &probe, &["--legacy", "--list-ttl-ms", "200"])
        .enable(&["aging"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    // Nothing changes on the server: only the ttl of each listing brings the next one.
    probe.wait_count("tools/list", 3, BOUND).await;
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    assert_eq!(
        snapshot.server("aging").map(|s| s.state),
        Some(ServerState::Ready),
        "refreshing on a ttl keeps the server ready"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_and_a_ttl_together_refresh_no_faster_than_the_ttl() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("fresh", &probe, &["--legacy", "--list-ttl-ms", "1000"])
        .enable(&["fresh"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let started = Instant::now();
    // The pause is the scenario: a change listed half a ttl after the first listing; the ttl
    // timer of the first listing is then stale and must do nothing, or every stale timer
    // would list again, half a ttl apart from the current one, and start one more.
    tokio::time::sleep_until((started + Duration::from_millis(500)).into()).await;
    workspace
        .call_tool("fresh", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    // The first listing, the change's, then one per second at most (one more for rounding),
    // at every moment of 3.5 s.
    let allowed = || 3 + usize::try_from(started.elapsed().as_secs()).unwrap_or(usize::MAX);
    holds_for(Duration::from_millis(3500), || {
        let lists = probe.count("tools/list");
        if lists <= allowed() {
            Ok(())
        } else {
            Err(format!(
                "{lists} listings in {:?}: stale timers listed again",
                started.elapsed()
            ))
        }
    })
    .await;
    let lists = probe.count("tools/list");
    let elapsed = started.elapsed();
    assert!(
        (3..=allowed()).contains(&lists),
        "{lists} listings in {elapsed:?}: the ttl was not honoured, or stale timers listed again"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_waited_for_a_change_is_checked_against_the_new_catalog() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy"])
        .enable(&["lists"])
        .config();
    let options = HostOptions::default().with_drain_timeout(Some(Duration::from_secs(600)));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    workspace
        .call_tool("lists", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    let announced = workspace.wait_for(BOUND, has_extra).await;
    assert!(has_extra(&announced));
    // The server takes `extra` back while a call is in flight: the new catalog waits.
    let held = gate_call(&workspace, "lists", "held");
    probe.wait_gate("held", BOUND).await;
    let listed = probe.count("tools/list");
    workspace
        .call_tool(
            "lists",
            "announce",
            json!({"retract": true}),
            CallOptions::default(),
        )
        .await
        .expect("retract");
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    let (mut sent, queued, waiting) = queue_behind_a_change(&workspace, &probe, "lists").await;
    sent.push(waiting);
    // `extra` is still published, so a call to it is routed, and waits behind the change.
    assert!(has_extra(&workspace.snapshot()));
    let extra = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            workspace
                .call_tool("lists", "extra", json!({}), CallOptions::default())
                .await
        })
    };
    probe.release_all().await;
    probe.wait_gate(&queued, BOUND).await;
    probe.release_all().await;
    // It runs against the catalog it waited for, where `extra` is gone.
    let extra = tokio::time::timeout(BOUND, extra)
        .await
        .expect("the waiting call settles")
        .expect("no panic");
    assert!(
        matches!(extra, Err(CallError::UnknownTool { .. })),
        "{extra:?}"
    );
    assert!(!has_extra(&workspace.snapshot()));
    for call in std::iter::once(held).chain(sent) {
        let result = tokio::time::timeout(BOUND, call)
            .await
            .expect("every call settles")
            .expect("no panic");
        assert!(result.is_ok(), "{result:?}");
    }
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_of_zero_leaves_the_list_to_its_change_notifications() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("zero", &probe, &["--legacy", "--list-ttl-ms", "0"])
        .enable(&["zero"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    // Listed at start and after a change, each time with `ttlMs: 0`...
    workspace
        .call_tool("zero", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", 2, BOUND).await;
    // ...and then not again: past the one-second floor a ttl would have listed it twice.
    holds_for(Duration::from_millis(2500), || {
        match probe.count("tools/list") {
            2 => Ok(()),
            lists => Err(format!("a ttl of 0 was taken as a ttl: {lists} listings")),
        }
    })
    .await;
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_cut_short_by_a_crash_leaves_the_next_connection_free_to_refresh() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy", "--hold-lists"])
        .enable(&["lists"])
        .config();
    // Every listing holds on the server until the test lets it go.
    let start = tokio::spawn(Host::start_with(config, fast_restarts()));
    probe.wait_count("tools/list", 1, BOUND).await;
    probe.release_all().await;
    let host = start.await.expect("no panic").expect("host starts");
    let workspace = host.default_workspace();
    let has_extra = |snapshot: &plurnk_mcp::WorkspaceSnapshot| {
        snapshot.server("lists").is_some_and(|s| {
            s.state == ServerState::Ready && s.tools.iter().any(|t| t.name == "extra")
        })
    };
    // A change: the host lists again, and that listing is held when the server dies.
    let pid = pid_of(&workspace, "lists").await;
    workspace
        .call_tool("lists", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", 2, BOUND).await;
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    // It comes back by itself, listed afresh (without the change: a new process).
    probe.wait_count("tools/list", 3, BOUND).await;
    probe.release_all().await;
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("lists")
                .is_some_and(|s| s.state == ServerState::Ready && s.generation == 2)
        })
        .await;
    assert!(!has_extra(&back));
    // A change on the new connection is listed and committed: the refresh the crash cut
    // short does not stand in its way.
    workspace
        .call_tool("lists", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", 4, BOUND).await;
    probe.release_all().await;
    let committed = workspace.wait_for(BOUND, has_extra).await;
    assert!(
        has_extra(&committed),
        "the new connection's change was listed"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_cannot_be_listed_makes_the_server_unavailable() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy", "--hold-lists"])
        .set("PLURNK_MCP_REQUEST_TIMEOUT", "3000")
        .enable(&["lists"])
        .config();
    // Every listing holds on the server until the test lets it go: the first one goes.
    let start = tokio::spawn(Host::start_with(config, fast_restarts()));
    probe.wait_count("tools/list", 1, BOUND).await;
    probe.release_all().await;
    let host = start.await.expect("no panic").expect("host starts");
    let workspace = host.default_workspace();
    // A change: the host lists again on the same connection, and that listing never ends.
    workspace
        .call_tool("lists", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", 2, BOUND).await;
    // The server is alive, but its catalog cannot be known: it is unavailable (and retries),
    // rather than ready with a catalog it no longer has.
    let down = workspace
        .wait_for(BOUND, |s| {
            s.server("lists")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    let lists = down.server("lists").expect("listed");
    assert_eq!(lists.state, ServerState::Unavailable);
    let detail = lists
        .problem
        .as_ref()
        .map(|p| p.detail.as_str())
        .unwrap_or_default();
    assert!(
        detail.contains("could not be listed again within 3000 ms (PLURNK_MCP_REQUEST_TIMEOUT)"),
        "{detail}"
    );
    probe.release_all().await;
    shutdown_clean(host).await;
}
