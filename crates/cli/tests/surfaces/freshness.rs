//! How long what a server said stays true: list changes at quiescence, ttls, resource
//! updates, a discover answer asked again.

#[allow(unused_imports)]
use super::*;

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
