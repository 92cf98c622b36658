//! Supervision and independence: failed workspaces restarted or held, a host under a daemon
//! actor, a session answering while the snapshot lags, commits that share what they did not
//! change, one workspace never delaying another.

#[allow(unused_imports)]
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_server_in_one_workspace_never_delays_another() {
    let dir = scratch("independent");
    let probe = Probe::start().await;
    let host = start(&dir.join("state.sqlite"), config(&[])).await;
    let a = host.workspace("a").await.expect("a");
    let b = host.workspace("b").await.expect("b");
    // A server that holds its tools/list until the probe lets it go: its add in A stays
    // under way for as long as the test likes.
    let hang = {
        let a = a.clone();
        let args = json!({"args": ["fixture", "--name", "held", "--probe", probe.address(), "--hold-lists"]});
        tokio::spawn(async move {
            let options = McpServerOptions::from_json(&args.to_string()).expect("parses");
            let held = ServerDefinition::from_target("held", EXE)
                .and_then(|d| d.with_options(&options))
                .expect("valid");
            a.add(held).await
        })
    };
    probe.wait_gate("tools/list", BOUND).await;
    // While A's add is under way, B's actions and calls run, and so does A's own list.
    let listed = b.list().await.expect("list in b");
    assert!(!listed.is_empty());
    b.disable("svc").await.expect("disable in b");
    b.enable("svc").await.expect("enable in b");
    let echo = b
        .call_tool("svc", "echo", json!({"text": "b"}), CallOptions::default())
        .await
        .expect("a call in b");
    assert_eq!(echo.text(), "b");
    a.list().await.expect("list in a");
    assert!(
        !hang.is_finished(),
        "the add cannot finish before its list is released"
    );
    assert_eq!(probe.release_all().await, 1);
    let added = tokio::time::timeout(BOUND, hang)
        .await
        .expect("the add finishes once listed")
        .expect("no panic")
        .expect("the add succeeds");
    assert_eq!(added.state, ServerState::Ready);
    shutdown_clean(host).await;
}

/// Waits (bounded) until the process `pid` is gone.
async fn wait_gone(pid: i32, what: &str) {
    // SAFETY: signal 0 only probes for existence.
    let gone = wait::until(BOUND, || unsafe { libc::kill(pid, 0) } != 0).await;
    assert!(gone, "{what} outlived it");
}

/// Waits (bounded) for the first event `pick` accepts.
async fn next_event<T>(
    events: &mut tokio::sync::broadcast::Receiver<HostEvent>,
    what: &str,
    pick: impl Fn(&HostEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(BOUND, async {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some(found) = pick(&event) {
                        return found;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(error) => panic!("the event stream ended while waiting for {what}: {error}"),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} event"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_workspace_is_restarted_and_the_handle_taken_before_still_calls() {
    let probe = Probe::start().await;
    let db = scratch("restarted").join("state.sqlite");
    let args = json!(["fixture", "--name", "svc", "--probe", probe.address()]).to_string();
    let host = start(&db, config(&[("PLURNK_MCP_SVC_ARGS", &args)])).await;
    let first = host.workspace("w").await.expect("workspace");
    // What the restart must bring back from the store: a server this workspace added.
    first
        .add(fixture_definition("extra", "${SECRET_ARG}"))
        .await
        .expect("added");
    let old_svc = pid_of(&first, "svc").await;
    let old_extra = pid_of(&first, "extra").await;
    let version = first.snapshot().version;
    // A call the server holds when the workspace fails, with a deadline far past the bound.
    let held = {
        let workspace = first.clone();
        tokio::spawn(async move {
            let options =
                CallOptions::default().with_timeout(Some(std::time::Duration::from_secs(120)));
            workspace
                .call_tool("svc", "gate", json!({"id": "held"}), options)
                .await
        })
    };
    probe.wait_gate("held", BOUND).await;
    let mut events = host.events();
    assert!(first.crash_for_test());
    let outcome = tokio::time::timeout(BOUND, held)
        .await
        .expect("the call in flight on the failed workspace settles, it does not hang")
        .expect("no panic");
    assert!(
        matches!(
            outcome,
            Err(CallError::ConnectionLost { .. } | CallError::Closing { .. })
        ),
        "settled with a typed error: {outcome:?}"
    );
    let (failures, problem) = next_event(&mut events, "WorkspaceRestarted", |event| match event {
        HostEvent::WorkspaceRestarted {
            workspace,
            failures,
            problem,
        } if workspace == "w" => Some((*failures, problem.clone())),
        _ => None,
    })
    .await;
    assert_eq!(failures, 1);
    assert_eq!(problem.kind, "workspace-failed");
    assert!(problem.detail.contains("workspace \"w\""), "{problem}");
    // The dead generation's servers are gone...
    wait_gone(old_svc, "the failed workspace's server").await;
    wait_gone(old_extra, "the failed workspace's added server").await;
    // ...and the handle taken before the failure sees the new generation come up, with the
    // added server restored from the store, and calls and acts through it.
    let snapshot = first
        .wait_for(BOUND, |snapshot| ready(snapshot, &["svc", "extra"]))
        .await;
    assert!(ready(&snapshot, &["svc", "extra"]), "{snapshot:?}");
    assert!(snapshot.version > version, "versions never go back");
    assert!(first.is_running());
    assert_ne!(pid_of(&first, "svc").await, old_svc);
    let echoed = first
        .call_tool(
            "svc",
            "echo",
            json!({"text": "after"}),
            CallOptions::default(),
        )
        .await
        .expect("a call through the old handle");
    assert_eq!(echoed.text(), "after");
    let disabled = first
        .disable("extra")
        .await
        .expect("an action through the old handle");
    assert_eq!(disabled.state, ServerState::Disabled);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_failing_too_often_stays_failed_with_one_problem_until_opened_again() {
    let host = Host::start_with(
        config(&[]),
        HostOptions::default()
            .with_store(Some(Arc::new(MemoryStore::default())))
            .with_workspace_restart(
                WorkspaceRestart::default()
                    .with_max_failures(3)
                    .with_window(std::time::Duration::from_secs(600)),
            ),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    let mut events = host.events();
    let mut pids = Vec::new();
    for round in 1..=3 {
        let snapshot = workspace
            .wait_for(BOUND, |snapshot| ready(snapshot, &["svc"]))
            .await;
        assert!(ready(&snapshot, &["svc"]), "round {round}: {snapshot:?}");
        assert!(workspace.is_running());
        pids.push(pid_of(&workspace, "svc").await);
        assert!(workspace.crash_for_test());
        if round < 3 {
            let failures = next_event(&mut events, "WorkspaceRestarted", |event| match event {
                HostEvent::WorkspaceRestarted { failures, .. } => Some(*failures),
                _ => None,
            })
            .await;
            assert_eq!(failures, round);
        }
    }
    let problem = next_event(&mut events, "WorkspaceFailed", |event| match event {
        HostEvent::WorkspaceFailed { workspace, problem } if workspace == "w" => {
            Some(problem.clone())
        }
        HostEvent::WorkspaceRestarted { .. } => panic!("restarted past its limit"),
        _ => None,
    })
    .await;
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (503, "workspace-failed")
    );
    assert!(
        problem.detail.contains("failed 3 times within 600 s")
            && problem.detail.contains("open it again by name"),
        "{problem}"
    );
    for pid in pids {
        wait_gone(pid, "a failed generation's server").await;
    }
    // What a user sees of it: the server unavailable with the workspace's Problem, calls and
    // actions refused with it, the handle not running.
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("svc")
                .is_some_and(|server| server.state == ServerState::Unavailable)
        })
        .await;
    let svc = snapshot.server("svc").expect("still shown");
    assert_eq!(svc.state, ServerState::Unavailable);
    assert_eq!(svc.problem.as_ref(), Some(&problem));
    assert!(svc.tools.is_empty());
    assert_eq!(workspace.failure(), Some(problem.clone()));
    assert!(!workspace.is_running());
    let refused = workspace
        .call_tool("svc", "echo", json!({"text": "x"}), CallOptions::default())
        .await;
    assert!(
        matches!(&refused, Err(CallError::NotReady { detail, .. }) if detail == &problem.detail),
        "{refused:?}"
    );
    assert_eq!(workspace.enable("svc").await.expect_err("refused"), problem);
    // Reported once: nothing more of it while it stays failed.
    let _ = workspace.disable("svc").await;
    let _ = workspace.list().await;
    loop {
        match events.try_recv() {
            Ok(HostEvent::WorkspaceFailed { .. } | HostEvent::WorkspaceRestarted { .. }) => {
                panic!("the failure was reported again")
            }
            Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    // Opening it again by name starts it afresh, and the old handle follows.
    let again = host.workspace("w").await.expect("opened again");
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| ready(snapshot, &["svc"]))
        .await;
    assert!(ready(&snapshot, &["svc"]), "{snapshot:?}");
    assert_eq!(workspace.failure(), None);
    for handle in [&workspace, &again] {
        let echoed = handle
            .call_tool(
                "svc",
                "echo",
                json!({"text": "back"}),
                CallOptions::default(),
            )
            .await
            .expect("echo");
        assert_eq!(echoed.text(), "back");
    }
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_session_answers_for_it_while_the_snapshot_lags_behind() {
    // Calls go to a server's session, not through the workspace: while the workspace actor
    // is busy (here, held by a test lever, as a long handler would hold it), the published
    // snapshot lags, and the session alone knows the server changed its tools, lost its
    // process or lost its attachment.
    let store = Arc::new(Flaky::default());
    let host = Host::start_with(
        config(&[
            ("PLURNK_MCP_ENABLED", r#"["svc", "other"]"#),
            (
                "PLURNK_MCP_SVC_ARGS",
                r#"["fixture", "--name", "svc", "--legacy"]"#,
            ),
            ("PLURNK_MCP_OTHER", EXE),
            ("PLURNK_MCP_OTHER_ARGS", r#"["fixture", "--name", "other"]"#),
            ("PLURNK_MCP_THIRD", EXE),
            ("PLURNK_MCP_THIRD_ARGS", r#"["fixture", "--name", "third"]"#),
        ]),
        HostOptions::default().with_store(Some(store.clone())),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    workspace.enable("third").await.expect("enable");
    let call = |alias: &'static str, tool: &'static str, arguments: serde_json::Value| {
        let workspace = workspace.clone();
        async move {
            workspace
                .call_tool(alias, tool, arguments, CallOptions::default())
                .await
        }
    };
    fn has_extra(snapshot: &plurnk_mcp::WorkspaceSnapshot) -> bool {
        snapshot
            .server("svc")
            .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
    }
    call("svc", "announce", json!({})).await.expect("announce");
    assert!(has_extra(&*workspace.wait_for(BOUND, has_extra).await));
    let other_pid = pid_of(&workspace, "other").await;

    // The workspace actor is held busy (until released, or until this test fails and drops
    // the release), and a disable waits in its mailbox behind it.
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    assert!(
        workspace.stall_for_test(held).await,
        "the actor was never held"
    );
    let disabling = tokio::spawn({
        let workspace = workspace.clone();
        async move { workspace.disable("third").await }
    });
    let deadline = std::time::Instant::now() + BOUND;

    // 1. The server takes `extra` out: once the attachment has listed again, its session
    // refuses the tool, though the snapshot still lists it.
    call("svc", "announce", json!({"retract": true}))
        .await
        .expect("announce");
    loop {
        match call("svc", "extra", json!({})).await {
            Err(CallError::UnknownTool { tool, .. }) if tool == "extra" => break,
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "the session kept the retracted tool"
            ),
            Err(other) => panic!("a call of the retracted tool: {other:?}"),
        }
    }
    assert!(has_extra(&workspace.snapshot()), "the snapshot still lags");

    // 2. The other server's process dies: its session refuses calls as not ready.
    // SAFETY: a signal to the process the host spawned.
    unsafe {
        libc::kill(other_pid, libc::SIGKILL);
    }
    loop {
        match call("other", "echo", json!({"text": "x"})).await {
            Err(CallError::NotReady { state, .. }) => {
                assert_eq!(state, ServerState::Unavailable);
                break;
            }
            // Before the loss is noticed a call may still go out, and be lost with it.
            Ok(_) | Err(CallError::ConnectionLost { .. }) => assert!(
                std::time::Instant::now() < deadline,
                "the session of a dead server still takes calls"
            ),
            Err(other) => panic!("a call of a dead server: {other:?}"),
        }
    }
    assert_eq!(
        workspace.snapshot().server("other").map(|s| s.state),
        Some(ServerState::Ready),
        "the snapshot still lags"
    );

    // 3. The svc attachment fails: its session says so at once.
    assert!(workspace.crash_attachment_for_test("svc"));
    loop {
        match call("svc", "echo", json!({"text": "x"})).await {
            Err(CallError::Closing { reason, .. }) => {
                assert!(reason.contains("attachment stopped"), "{reason}");
                break;
            }
            Ok(_) | Err(CallError::ConnectionLost { .. }) => assert!(
                std::time::Instant::now() < deadline,
                "the session of a failed attachment still takes calls"
            ),
            Err(other) => panic!("a call of a failed attachment: {other:?}"),
        }
    }

    // The workspace goes on: the disable completes, and both servers come back.
    drop(release);
    let disabled = disabling.await.expect("joined").expect("disabled");
    assert_eq!(disabled.state, ServerState::Disabled);
    let back = workspace
        .wait_for(BOUND, |s| {
            ["svc", "other"].iter().all(|alias| {
                s.server(alias)
                    .is_some_and(|s| s.state == ServerState::Ready)
            })
        })
        .await;
    assert!(!has_extra(&back), "the committed catalog has no extra");
    assert_eq!(
        call("other", "echo", json!({"text": "back"}))
            .await
            .expect("echo")
            .text(),
        "back"
    );
    shutdown_clean(host).await;
}

/// A daemon's own actor: it tells the test what supervision says of its children, and
/// passes on the host events it is sent.
struct Daemon;

impl ractor::Actor for Daemon {
    type Msg = DaemonMsg;
    type State = (Heard, Told);
    type Arguments = (Heard, Told);

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        DaemonMsg::Event(event): Self::Msg,
        (_, told): &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let _ = told.send(event);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        event: ractor::SupervisionEvent,
        (heard, _): &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        // Kept running whatever its child does, so one daemon hears every host it starts.
        match event {
            ractor::SupervisionEvent::ActorTerminated(cell, _, _) => {
                let _ = heard.send((cell.get_id(), "terminated"));
            }
            ractor::SupervisionEvent::ActorFailed(cell, _) => {
                let _ = heard.send((cell.get_id(), "failed"));
            }
            _ => {}
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_under_a_daemon_actor_is_supervised_and_managed_by_message() {
    use plurnk_mcp::HostMsg;
    let (heard_tx, mut heard_rx) = tokio::sync::mpsc::unbounded_channel();
    let (told_tx, mut told_rx) = tokio::sync::mpsc::unbounded_channel();
    let (daemon, daemon_task) = ractor::Actor::spawn(None, Daemon, (heard_tx, told_tx))
        .await
        .expect("the daemon starts");
    let linked = || HostOptions::default().with_parent(Some(daemon.get_cell()));

    // Linked: the daemon hears the host's root end when the host shuts down.
    let host = Host::start_with(config(&[]), linked())
        .await
        .expect("host starts");
    host.events_to(daemon.clone(), |event| Some(DaemonMsg::Event(event)));
    let root = host.actor();
    // Enable and disable by message, as a daemon actor's `handle` would.
    let disabled = ractor::call!(root, |reply| HostMsg::Disable {
        workspace: "default".into(),
        alias: "svc".into(),
        reply,
    })
    .expect("the root answers")
    .expect("disabled");
    assert_eq!(disabled.state, ServerState::Disabled);
    // The events arrive at the actor as its own messages.
    let told = tokio::time::timeout(BOUND, async {
        while let Some(event) = told_rx.recv().await {
            if let HostEvent::StateChanged {
                alias,
                to: ServerState::Disabled,
                ..
            } = &event
                && alias == "svc"
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(told, Ok(true), "the daemon was told of the disable");
    let mut watch = ractor::call!(root, |reply| HostMsg::Subscribe {
        workspace: "default".into(),
        reply,
    })
    .expect("the root answers")
    .expect("a subscription");
    let enabled = ractor::call!(root, |reply| HostMsg::Enable {
        workspace: "default".into(),
        alias: "svc".into(),
        customize: Box::default(),
        reply,
    })
    .expect("the root answers")
    .expect("enabled");
    assert_eq!(enabled.state, ServerState::Ready);
    let seen = tokio::time::timeout(BOUND, async {
        loop {
            let snapshot = watch.changed().await.expect("the host runs");
            if ready(&snapshot, &["svc"]) {
                return snapshot;
            }
        }
    })
    .await
    .expect("the subscription saw the server come back");
    let snapshot = ractor::call!(root, |reply| HostMsg::Snapshot {
        workspace: "default".into(),
        reply,
    })
    .expect("the root answers")
    .expect("a snapshot");
    assert!(snapshot.version >= seen.version);
    // A message naming a workspace that is not open opens it; a bad name says what is wrong.
    let listed = ractor::call!(root, |reply| HostMsg::List {
        workspace: "by-message".into(),
        client: Vec::new(),
        reply,
    })
    .expect("the root answers")
    .expect("listed");
    assert!(listed.iter().any(|summary| summary.alias == "svc"));
    assert!(
        host.workspace_names()
            .await
            .contains(&"by-message".to_owned())
    );
    let bad = ractor::call!(root, |reply| HostMsg::Disable {
        workspace: "no spaces".into(),
        alias: "svc".into(),
        reply,
    })
    .expect("the root answers")
    .expect_err("refused");
    assert!(
        bad.detail
            .contains("workspace name \"no spaces\" is not valid"),
        "{bad}"
    );
    let root_id = root.get_id();
    shutdown_clean(host).await;
    assert_eq!(heard(&mut heard_rx).await, (root_id, "terminated"));

    // And it hears the root fail; the servers go with it.
    let host = Host::start_with(config(&[]), linked())
        .await
        .expect("host starts");
    let pid = pid_of(&host.default_workspace(), "svc").await;
    let root_id = host.actor().get_id();
    assert!(host.crash_root_for_test());
    assert_eq!(heard(&mut heard_rx).await, (root_id, "failed"));
    wait_gone(pid, "the failed root's server").await;
    let refused = host
        .default_workspace()
        .disable("svc")
        .await
        .expect_err("no root to answer");
    assert!(
        refused.detail.contains("root actor has stopped"),
        "{refused}"
    );
    let _ = host.shutdown().await;
    daemon.stop(None);
    daemon_task.await.expect("the daemon stopped");
}

/// `count` in-process fixture servers, `mem-0` to `mem-{count - 1}`: no process each, so a
/// workspace of thousands starts in a test.
fn in_process_fixtures(count: usize) -> BTreeMap<String, plurnk_mcp::InProcessConnector> {
    let connector: plurnk_mcp::InProcessConnector = Arc::new(|| {
        let (host_end, server_end) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server_end);
        tokio::spawn(plurnk_mcp_fixture::serve_io(
            read,
            write,
            plurnk_mcp_fixture::FixtureOptions::default(),
        ));
        host_end
    });
    (0..count)
        .map(|i| (format!("mem-{i}"), connector.clone()))
        .collect()
}

/// A commit copies nothing it did not change: after one server is disabled, the snapshot
/// committed shares every other server with the snapshot before it (the same allocation,
/// not an equal copy), and the one changed is new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_one_change_shares_every_other_server_with_the_snapshot_before() {
    let options = HostOptions::default().with_in_process(in_process_fixtures(64));
    let host = Host::start_with(HostConfig::default(), options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let before = workspace.snapshot();
    assert_eq!(before.servers.count(ServerState::Ready), 64);
    workspace.disable("mem-17").await.expect("disable");
    let after = workspace.snapshot();
    assert!(after.version > before.version, "a commit happened");
    assert_eq!(
        after.server("mem-17").map(|server| server.state),
        Some(ServerState::Disabled)
    );
    for (alias, server) in before.servers.iter() {
        let shared = after
            .servers
            .get(alias)
            .is_some_and(|now| Arc::ptr_eq(server, now));
        assert_eq!(shared, alias != "mem-17", "{alias} shared: {shared}");
    }
    assert_eq!(after.servers.count(ServerState::Ready), 63);
    shutdown_clean(host).await;
}
