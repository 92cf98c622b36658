//! Durable state: across a restart, a foreign or newer file, a gone variable, two hosts on
//! one file, a store that cannot be written.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_and_disabled_servers_survive_a_restart_without_their_secrets() {
    let dir = scratch("restart");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let a = host.workspace("a").await.expect("workspace a");
    let b = host.workspace("b").await.expect("workspace b");
    let added = a
        .add(fixture_definition("extra", "${SECRET_ARG}"))
        .await
        .expect("add connects");
    assert_eq!(added.state, ServerState::Ready);
    // The reference was expanded for the connection: the server reports the value as its
    // name (unexpanded it would say "${SECRET_ARG}"), and the host scrubs it on the way out.
    let name = added.negotiated.as_ref().and_then(|n| n.name.clone());
    assert_eq!(name.as_deref(), Some("<redacted>"));
    let disabled = b.disable("svc").await.expect("disable");
    assert_eq!(disabled.state, ServerState::Disabled);
    shutdown_clean(host).await;

    let host = start(&db, config(&[])).await;
    let a = host.workspace("a").await.expect("workspace a");
    let b = host.workspace("b").await.expect("workspace b");
    let extra = a
        .snapshot()
        .server("extra")
        .cloned()
        .expect("the added server is back");
    assert_eq!(extra.state, ServerState::Ready, "{:?}", extra.problem);
    let echo = a
        .call_tool(
            "extra",
            "echo",
            json!({"text": "again"}),
            CallOptions::default(),
        )
        .await
        .expect("it answers");
    assert_eq!(echo.text(), "again");
    assert_eq!(
        b.snapshot().server("svc").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    assert!(
        b.snapshot().server("extra").is_none(),
        "workspaces are separate"
    );
    assert_eq!(
        host.default_workspace()
            .snapshot()
            .server("svc")
            .map(|s| s.state),
        Some(ServerState::Ready),
        "the service default still holds elsewhere"
    );
    let extra = summary_of(&a, "extra").await;
    assert_eq!((extra.source, extra.enabled), ("workspace", true));
    shutdown_clean(host).await;

    let bytes = db_bytes(&db);
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("s3cr3t-value-4711"),
        "an expanded value reached the database"
    );
    assert!(
        text.contains("${SECRET_ARG}"),
        "the unexpanded reference is what is kept"
    );
}

#[tokio::test]
async fn a_newer_or_foreign_state_file_is_refused_untouched() {
    let dir = scratch("refuse");
    let garbage = dir.join("garbage.sqlite");
    std::fs::write(&garbage, b"this is not a database at all, not even close").expect("write");
    let before = std::fs::read(&garbage).expect("read");
    let error = SqliteStore::open(&garbage).expect_err("refused");
    assert!(
        matches!(error, plurnk_mcp::StoreError::Corrupt { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("garbage.sqlite"), "{error}");
    assert_eq!(std::fs::read(&garbage).expect("read"), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_server_whose_variable_is_gone_locks_nobody_out() {
    let dir = scratch("gone-variable");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[("LATER_NAME", "later-name-1234")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    workspace
        .add(fixture_definition("later", "${LATER_NAME}"))
        .await
        .expect("add connects");
    shutdown_clean(host).await;

    // LATER_NAME is no longer set: the host still starts, and only that server is down.
    let host = start(&db, config(&[])).await;
    let workspace = host
        .workspace("w")
        .await
        .expect("the workspace still opens");
    let snapshot = workspace.snapshot();
    let later = snapshot.server("later").expect("still there");
    assert_eq!(later.state, ServerState::Unavailable);
    let detail = later
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(detail.contains("LATER_NAME"), "{detail}");
    assert_eq!(
        snapshot.server("svc").map(|s| s.state),
        Some(ServerState::Ready)
    );
    // And it can be removed, as the Problem suggests.
    workspace.remove("later").await.expect("remove");
    shutdown_clean(host).await;
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    assert!(workspace.snapshot().server("later").is_none());
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_adding_one_alias_to_one_state_file_lose_nothing() {
    let dir = scratch("twins");
    let db = dir.join("state.sqlite");
    let first = start(&db, config(&[])).await;
    let second = start(&db, config(&[])).await;
    let (a, b) = (
        first.workspace("w").await.expect("w"),
        second.workspace("w").await.expect("w"),
    );
    let (one, two) = tokio::join!(
        a.add(fixture_definition("twin", "first")),
        b.add(fixture_definition("twin", "second")),
    );
    let outcomes = [&one, &two];
    let won: Vec<_> = outcomes.iter().filter(|o| o.is_ok()).collect();
    let lost: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(won.len(), 1, "{one:?} {two:?}");
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].status, lost[0].kind.as_str()), (409, "conflict"));
    assert!(
        lost[0].detail.contains("another process"),
        "{}",
        lost[0].detail
    );
    let winner = if one.is_ok() { "first" } else { "second" };
    shutdown_clean(first).await;
    shutdown_clean(second).await;
    // What is stored is the winner's definition, and it is what comes back.
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("w");
    let twin = workspace
        .snapshot()
        .server("twin")
        .cloned()
        .expect("stored");
    assert_eq!(twin.state, ServerState::Ready, "{:?}", twin.problem);
    assert_eq!(
        twin.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some(winner)
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_refuses_an_enable_and_stops_nothing_running() {
    let store = Arc::new(Flaky::default());
    let host = Host::start_with(
        config(&[
            ("PLURNK_MCP_ENABLED", "[]"),
            ("PLURNK_MCP_OTHER", EXE),
            ("PLURNK_MCP_OTHER_ARGS", r#"["fixture", "--name", "other"]"#),
        ]),
        HostOptions::default()
            .with_store(Some(store.clone()))
            .with_restart(
                RestartPolicy::default()
                    .with_min_delay(std::time::Duration::from_millis(50))
                    .with_max_delay(std::time::Duration::from_millis(500)),
            ),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    workspace.enable("svc").await.expect("enable");
    store.failing.store(true, Ordering::SeqCst);
    // An enable that cannot be made durable is refused, and changes nothing: once its
    // candidate has gone (the next commit), the server is still listed, disabled.
    let before = workspace.snapshot().version;
    let refused = workspace.enable("other").await;
    let Err(problem) = &refused else {
        panic!("an enable that cannot be saved is refused: {refused:?}");
    };
    assert!(problem.detail.contains("could not be saved"), "{problem:?}");
    // (The refused candidate published nothing: the next commit is its detach.)
    let after = workspace.wait_for(BOUND, |s| s.version > before).await;
    assert!(
        after.version > before,
        "the candidate's detach was never committed"
    );
    assert_eq!(
        after.server("other").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    assert_eq!(summary_of(&workspace, "other").await.alias, "other");
    // A server already enabled that reconnects writes nothing, so it comes back.
    let pid = pid_of(&workspace, "svc").await;
    // SAFETY: a signal to the process the host spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("svc")
                .is_some_and(|s| s.state == ServerState::Ready && s.generation == 2)
        })
        .await;
    assert_eq!(
        back.server("svc").map(|s| (s.state, s.generation)),
        Some((ServerState::Ready, 2)),
        "the reconnected server was stopped for a write it did not need"
    );
    store.failing.store(false, Ordering::SeqCst);
    shutdown_clean(host).await;
}
