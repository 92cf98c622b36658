//! Calls in flight: how each settles (deadline, cancellation, overload), and that a change
//! (a list change, a disable, a new definition) waits for the calls before it to settle
//! and loses none of them, under hundreds of calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plurnk_mcp::config::McpServerOptions;
use plurnk_mcp::{CallError, CallOptions, Customize, Host, HostEvent, HostOptions, ServerState};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::calls::{BOUND, call_then_cancel, gate_call, pid_of, shutdown_clean};
use crate::env::Env;
use crate::wait;
use crate::{fast_restarts, group_alive, has_extra, queue_behind_a_change};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_and_enable_while_200_calls_are_in_flight_loses_none() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("busy", &probe, &[])
        .enable(&["busy"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    // 200 calls provably on the wire: the server has received each and holds it.
    let calls: Vec<_> = (0..200)
        .map(|i| gate_call(&workspace, "busy", &format!("call-{i}")))
        .collect();
    probe.wait_count("gate", 200, BOUND).await;
    let disable = {
        let workspace = workspace.clone();
        tokio::spawn(async move { workspace.disable("busy").await })
    };
    // The disable has begun once a new call is refused as closing; until then the server is
    // still taking calls and answers them.
    let deadline = Instant::now() + BOUND;
    loop {
        match workspace
            .call_tool(
                "busy",
                "echo",
                json!({"text": "late"}),
                CallOptions::default(),
            )
            .await
        {
            Err(CallError::Closing { .. }) => break,
            Ok(result) => assert_eq!(result.text(), "late"),
            Err(other) => panic!("a call beside the disable failed: {other:?}"),
        }
        assert!(Instant::now() < deadline, "the disable never began");
        tokio::task::yield_now().await;
    }
    // While the 200 are held, the disable waits: nothing is committed, the server is
    // still published as ready.
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !disable.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        early.is_err(),
        "disable finished while calls were in flight"
    );
    assert_eq!(
        workspace.snapshot().server("busy").map(|s| s.state),
        Some(ServerState::Ready)
    );
    assert_eq!(probe.release_all().await, 200);
    for (i, call) in calls.into_iter().enumerate() {
        let outcome = tokio::time::timeout(BOUND, call)
            .await
            .expect("every call settles")
            .expect("no call task panicked");
        let result = outcome.unwrap_or_else(|error| panic!("call {i} was lost: {error:?}"));
        assert!(!result.is_error, "call {i}: {:?}", result.result);
        assert_eq!(result.text(), format!("released call-{i}"));
    }
    let disabled = tokio::time::timeout(BOUND, disable)
        .await
        .expect("the disable completes once the calls settled")
        .expect("no panic")
        .expect("disable");
    assert_eq!(disabled.state, ServerState::Disabled);
    assert!(
        disabled.tools.is_empty(),
        "a disabled server publishes no tools"
    );
    let refused = workspace
        .call_tool("busy", "echo", json!({"text": "x"}), CallOptions::default())
        .await;
    assert!(
        matches!(
            refused,
            Err(CallError::NotReady {
                state: ServerState::Disabled,
                ..
            })
        ),
        "{refused:?}"
    );
    let enabled = workspace.enable("busy").await.expect("enable");
    assert_eq!(enabled.state, ServerState::Ready);
    let echo = workspace
        .call_tool(
            "busy",
            "echo",
            json!({"text": "after"}),
            CallOptions::default(),
        )
        .await
        .expect("ready again");
    assert_eq!(echo.text(), "after");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_arriving_while_a_list_change_waits_run_after_it_commits() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy"])
        .enable(&["lists"])
        .config();
    // The change commits at quiescence, not at its deadline: that is out of reach here.
    let options = HostOptions::default().with_drain_timeout(Some(Duration::from_secs(600)));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let generation = workspace.snapshot().server("lists").map(|s| s.generation);
    let held = gate_call(&workspace, "lists", "held");
    probe.wait_gate("held", BOUND).await;
    let listed = probe.count("tools/list");
    let announced = workspace
        .call_tool("lists", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    assert_eq!(announced.text(), "announced");
    // The host lists again on the same connection...
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    // ...and holds the new catalog until `held` settles. Calls sent from now on run beside
    // `held` until the refreshed catalog is pending, then wait behind it: keep sending one
    // until one does not reach the server.
    let (beside, queued_id, queued_call) = queue_behind_a_change(&workspace, &probe, "lists").await;
    assert!(
        !has_extra(&workspace.snapshot()),
        "the refreshed catalog was committed while calls were in flight"
    );
    // Quiescence: the held calls finish, the catalog commits, then the queued call runs.
    // (A call judged queued may only have been slow to arrive: it is then released here.)
    assert!(probe.release_all().await > beside.len());
    probe.wait_gate(&queued_id, BOUND).await;
    probe.release(&queued_id).await;
    for call in std::iter::once(held).chain(beside).chain([queued_call]) {
        let result = tokio::time::timeout(BOUND, call)
            .await
            .expect("every call settles")
            .expect("no panic")
            .expect("every call completes with its result");
        assert!(
            result.text().starts_with("released "),
            "{:?}",
            result.result
        );
    }
    let committed = workspace.wait_for(BOUND, has_extra).await;
    assert!(has_extra(&committed), "the list change was committed");
    assert_eq!(
        committed.server("lists").map(|s| s.generation),
        generation,
        "on the same connection"
    );
    let extra = workspace
        .call_tool("lists", "extra", json!({}), CallOptions::default())
        .await
        .expect("the new tool is routed");
    assert_eq!(extra.text(), "extra");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_cancellation_and_tool_errors_settle_calls() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("calls", &probe, &[])
        .enable(&["calls"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();

    // Calls that complete owe the server nothing: no cancellation follows them. (Any that
    // did would reach the server before a later request the test waits for.)
    for n in 0..20 {
        let text = format!("completed {n}");
        let echo = workspace
            .call_tool(
                "calls",
                "echo",
                json!({ "text": text }),
                CallOptions::default(),
            )
            .await
            .expect("echo");
        assert_eq!(echo.text(), text);
    }
    let after = gate_call(&workspace, "calls", "after-echoes");
    probe.wait_gate("after-echoes", BOUND).await;
    probe.release("after-echoes").await;
    after
        .await
        .expect("joined")
        .expect("the gate call completes");
    assert_eq!(
        probe.count("cancel-notice"),
        0,
        "completed calls were followed by cancellations: {:?}",
        probe.events()
    );

    // A held call meets its deadline: it settles as a timeout and the server is told.
    let timed_out = tokio::time::timeout(
        BOUND,
        workspace.call_tool(
            "calls",
            "gate",
            json!({"id": "slow"}),
            CallOptions::default().with_timeout(Some(Duration::from_millis(300))),
        ),
    )
    .await
    .expect("the deadline ends the call");
    assert!(
        matches!(
            timed_out,
            Err(CallError::Timeout {
                timeout_ms: 300,
                ..
            })
        ),
        "{timed_out:?}"
    );
    let told = probe
        .until(BOUND, |events| {
            events
                .iter()
                .any(|e| e.event == "cancelled" && e.id == "slow")
        })
        .await;
    assert!(told, "the timed-out request was cancelled on the wire");

    // The caller cancels a call the server holds: cancelled, and the server is told.
    let cancelled = call_then_cancel(
        &workspace,
        "calls",
        "gate",
        json!({"id": "cancel-me"}),
        CallOptions::default(),
        probe.wait_gate("cancel-me", BOUND),
    )
    .await;
    assert!(
        matches!(cancelled, Err(CallError::Cancelled { .. })),
        "{cancelled:?}"
    );
    let told = probe
        .until(BOUND, |events| {
            events
                .iter()
                .any(|e| e.event == "cancelled" && e.id == "cancel-me")
        })
        .await;
    assert!(told, "the cancelled request was cancelled on the wire");

    // The caller stops waiting for a call the server holds (drops its future): the call
    // runs in the caller's task, and the server is still told.
    let dropped = gate_call(&workspace, "calls", "drop-me");
    probe.wait_gate("drop-me", BOUND).await;
    dropped.abort();
    assert!(dropped.await.is_err_and(|error| error.is_cancelled()));
    let told = probe
        .until(BOUND, |events| {
            events
                .iter()
                .any(|e| e.event == "cancelled" && e.id == "drop-me")
        })
        .await;
    assert!(told, "the dropped request was cancelled on the wire");

    let failed = workspace
        .call_tool(
            "calls",
            "fail",
            json!({"message": "nope"}),
            CallOptions::default(),
        )
        .await
        .expect("a tool error is a completed result");
    assert!(failed.is_error);
    assert_eq!(failed.text(), "nope");
    assert_eq!(failed.result["isError"], json!(true));
    assert_eq!(failed.result["content"][0]["type"], json!("text"));

    let bad = workspace
        .call_tool("calls", "echo", json!([1, 2]), CallOptions::default())
        .await;
    assert!(matches!(bad, Err(CallError::InvalidArguments { .. })));
    let unknown = workspace
        .call_tool("nobody", "echo", json!({}), CallOptions::default())
        .await;
    assert!(matches!(unknown, Err(CallError::UnknownServer(_))));
    // The server kept working through all of that.
    let echo = workspace
        .call_tool(
            "calls",
            "echo",
            json!({"text": "fine"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "fine");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_change_takes_its_deadline_with_it() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy"])
        .enable(&["lists"])
        .config();
    let bound = Duration::from_secs(3);
    let options = HostOptions::default().with_drain_timeout(Some(bound));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let announce = || async {
        workspace
            .call_tool("lists", "announce", json!({}), CallOptions::default())
            .await
            .expect("announce")
    };
    // A first change waits behind a call, then commits when the call settles: its deadline
    // is still scheduled.
    let first = gate_call(&workspace, "lists", "first");
    probe.wait_gate("first", BOUND).await;
    let listed = probe.count("tools/list");
    announce().await;
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    let first_listed = Instant::now();
    assert!(probe.release("first").await);
    workspace
        .wait_for(BOUND, |s| {
            s.server("lists")
                .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
        })
        .await;
    // A second change, half a drain bound after the first, waits behind another call: the
    // pause is the scenario, it puts the second change's deadline after the first one's.
    tokio::time::sleep_until((first_listed + bound / 2).into()).await;
    let second = gate_call(&workspace, "lists", "second");
    probe.wait_gate("second", BOUND).await;
    let listed = probe.count("tools/list");
    announce().await;
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    // Once the change is pending a call waits behind it: keep sending one until one does not
    // reach the server.
    let (mut sent, queued, waiting) = queue_behind_a_change(&workspace, &probe, "lists").await;
    sent.push(waiting);
    // The first change's deadline passes: it went with that change, so the second one still
    // waits (its own deadline is more than a second away).
    let stale = first_listed + bound + Duration::from_millis(700);
    tokio::time::sleep_until(stale.into()).await;
    assert!(
        !probe.events().iter().any(|e| e.id == queued),
        "the second change was committed at the first one's deadline"
    );
    probe.release_all().await;
    probe.wait_gate(&queued, BOUND).await;
    probe.release_all().await;
    for call in [first, second].into_iter().chain(sent) {
        let result = tokio::time::timeout(BOUND, call)
            .await
            .expect("every call settles")
            .expect("no panic");
        assert!(result.is_ok(), "{result:?}");
    }
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_list_change_commits_at_its_deadline_beside_a_stuck_call() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("stuck", &probe, &["--legacy"])
        .enable(&["stuck"])
        .config();
    let options = HostOptions::default().with_drain_timeout(Some(Duration::from_millis(500)));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let held = gate_call(&workspace, "stuck", "held");
    probe.wait_gate("held", BOUND).await;
    let listed = probe.count("tools/list");
    workspace
        .call_tool("stuck", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    // The call never settles, yet the change is committed once its bound passes.
    let committed = workspace
        .wait_for(BOUND, |s| {
            s.server("stuck")
                .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
        })
        .await;
    assert!(
        committed
            .server("stuck")
            .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra")),
        "the pending change starved behind a stuck call"
    );
    assert_eq!(probe.held(), 1, "the stuck call is still held");
    // Calls are not held behind it any more.
    let echo = tokio::time::timeout(
        BOUND,
        workspace.call_tool("stuck", "extra", json!({}), CallOptions::default()),
    )
    .await
    .expect("not queued")
    .expect("the new tool answers");
    assert_eq!(echo.text(), "extra");
    assert!(probe.release("held").await);
    let held = held
        .await
        .expect("no panic")
        .expect("the stuck call completes");
    assert_eq!(held.text(), "released held");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_pending_when_the_server_dies_leaves_no_call_waiting() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("doomed", &probe, &["--legacy"])
        .enable(&["doomed"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let pid = pid_of(&workspace, "doomed").await;
    let held = gate_call(&workspace, "doomed", "held");
    probe.wait_gate("held", BOUND).await;
    let listed = probe.count("tools/list");
    workspace
        .call_tool("doomed", "announce", json!({}), CallOptions::default())
        .await
        .expect("announce");
    probe.wait_count("tools/list", listed + 1, BOUND).await;
    // Calls run beside `held` until the refreshed catalog is pending, then wait behind it:
    // send them until one does not reach the server.
    let (beside, _, behind) = queue_behind_a_change(&workspace, &probe, "doomed").await;
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let held = tokio::time::timeout(BOUND, held)
        .await
        .expect("the held call settles")
        .expect("no panic");
    assert!(
        matches!(held, Err(CallError::ConnectionLost { .. })),
        "{held:?}"
    );
    // It never reached the dead server: it is refused, or runs on the next connection
    // (where its gate holds it: keep letting gates go, every 50 ms, until it settles).
    let behind = tokio::time::timeout(BOUND, async {
        tokio::pin!(behind);
        loop {
            tokio::select! {
                settled = &mut behind => return settled,
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    probe.release_all().await;
                }
            }
        }
    })
    .await
    .expect("the call behind the pending change settles")
    .expect("no panic");
    assert!(
        matches!(&behind, Ok(r) if r.text().starts_with("released "))
            || matches!(
                behind,
                Err(CallError::ConnectionLost { .. } | CallError::NotReady { .. })
            ),
        "{behind:?}"
    );
    for call in beside {
        let _ = tokio::time::timeout(BOUND, call).await;
    }
    // Back on a new connection, calls run: nothing of the old change is left to wait for.
    workspace
        .wait_for(BOUND, |s| {
            s.server("doomed")
                .is_some_and(|s| s.state == ServerState::Ready && s.generation > 1)
        })
        .await;
    let echo = tokio::time::timeout(
        BOUND,
        workspace.call_tool(
            "doomed",
            "echo",
            json!({"text": "after"}),
            CallOptions::default(),
        ),
    )
    .await
    .expect("a call on the new connection is not left waiting")
    .expect("echo");
    assert_eq!(echo.text(), "after");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_in_flight_bounds_fail_at_once_as_overloaded() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("one", &probe, &[])
        .probed("two", &probe, &[])
        .enable(&["one", "two"])
        .config();
    let options = HostOptions::default().with_limits(
        plurnk_mcp::Limits::default()
            .with_max_in_flight_per_server(2)
            .with_max_in_flight_per_workspace(3),
    );
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let a = gate_call(&workspace, "one", "a");
    let b = gate_call(&workspace, "one", "b");
    probe.wait_count("gate", 2, BOUND).await;
    // A third call on the same server: refused at once, not queued.
    let third = tokio::time::timeout(
        BOUND,
        workspace.call_tool("one", "echo", json!({"text": "x"}), CallOptions::default()),
    )
    .await
    .expect("refused at once");
    assert!(
        matches!(&third, Err(CallError::Overloaded { limit: 2, scope, .. }) if scope == "on this server"),
        "{third:?}"
    );
    assert!(third.as_ref().is_err_and(CallError::is_retryable));
    // Another server still takes one more, then the workspace is full.
    let c = gate_call(&workspace, "two", "c");
    probe.wait_count("gate", 3, BOUND).await;
    let fourth = workspace
        .call_tool("two", "echo", json!({"text": "x"}), CallOptions::default())
        .await;
    assert!(
        matches!(&fourth, Err(CallError::Overloaded { limit: 3, scope, .. }) if scope == "in this workspace"),
        "{fourth:?}"
    );
    // Places come back when calls settle.
    assert_eq!(probe.release_all().await, 3);
    for call in [a, b, c] {
        call.await
            .expect("no panic")
            .expect("a held call completes");
    }
    let echo = workspace
        .call_tool(
            "two",
            "echo",
            json!({"text": "room"}),
            CallOptions::default(),
        )
        .await
        .expect("room again");
    assert_eq!(echo.text(), "room");
    shutdown_clean(host).await;
}

/// The fixture `alias` is, as a customized enable names it: its name and its probe.
fn renamed(name: &str, probe: &Probe) -> Customize {
    let options = json!({"args": ["fixture", "--name", name, "--probe", probe.address()]});
    Customize::default().with_options(Some(
        McpServerOptions::from_json(&options.to_string()).expect("parses"),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disable_racing_1000_calls_loses_none_and_commits_after_the_last() {
    const CALLS: usize = 1000;
    let probe = Probe::start().await;
    let config = Env::new()
        .set("PLURNK_MCP_REQUEST_TIMEOUT", "120000")
        .probed("busy", &probe, &[])
        .enable(&["busy"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    // The calls are issued while the disable is: each is either admitted (and must then
    // settle with its answer) or refused as closing, never lost or left hanging.
    let refused = Arc::new(AtomicUsize::new(0));
    let mut calls = Vec::with_capacity(CALLS);
    let mut disable = None;
    for i in 0..CALLS {
        let (caller, refused) = (workspace.clone(), refused.clone());
        calls.push(tokio::spawn(async move {
            let id = format!("call-{i}");
            let outcome = caller
                .call_tool("busy", "gate", json!({ "id": id }), CallOptions::default())
                .await;
            if matches!(outcome, Err(CallError::Closing { .. })) {
                refused.fetch_add(1, Ordering::SeqCst);
            }
            outcome
        }));
        if i == CALLS / 2 {
            let workspace = workspace.clone();
            disable = Some(tokio::spawn(async move { workspace.disable("busy").await }));
        }
    }
    let disable = disable.expect("the disable was issued");
    // Every call has been decided: refused, or held by the server.
    assert!(
        wait::until(BOUND, || refused.load(Ordering::SeqCst) + probe.held()
            == CALLS)
        .await,
        "calls neither refused nor on the wire: {} refused, {} held",
        refused.load(Ordering::SeqCst),
        probe.held()
    );
    let admitted = probe.held();
    assert!(admitted > 0, "the race admitted no call at all");
    // All but one released: the disable still waits for the last, and the server is still
    // published as ready.
    let held: Vec<String> = probe
        .events()
        .into_iter()
        .filter(|event| event.event == "gate")
        .map(|event| event.id)
        .collect();
    let (last, rest) = held.split_last().expect("one is held");
    for id in rest {
        assert!(probe.release(id).await, "{id} was held");
    }
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !disable.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(early.is_err(), "the disable committed before the last call");
    assert_eq!(
        workspace.snapshot().server("busy").map(|s| s.state),
        Some(ServerState::Ready)
    );
    assert!(probe.release(last).await);
    let mut answered = 0;
    for (i, call) in calls.into_iter().enumerate() {
        let outcome = tokio::time::timeout(BOUND, call)
            .await
            .expect("every call settles")
            .expect("no call task panicked");
        match outcome {
            Ok(result) => {
                assert_eq!(result.text(), format!("released call-{i}"));
                answered += 1;
            }
            Err(CallError::Closing { .. }) => {}
            Err(other) => panic!("call {i} was lost: {other:?}"),
        }
    }
    assert_eq!(answered, admitted, "every admitted call was answered");
    let disabled = tokio::time::timeout(BOUND, disable)
        .await
        .expect("the disable completes once the calls settled")
        .expect("no panic")
        .expect("disable");
    assert_eq!(disabled.state, ServerState::Disabled);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_change_under_load_swaps_with_no_lost_call_and_no_gap() {
    const HELD: usize = 50;
    let probe = Probe::start().await;
    let config = Env::new()
        .set("PLURNK_MCP_REQUEST_TIMEOUT", "120000")
        .set("PLURNK_MCP_ALLOW_ADD", "true")
        .probed("busy", &probe, &[])
        .enable(&["busy"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let old = pid_of(&workspace, "busy").await;
    let mut events = host.events();
    // Load beside the change: every call must succeed, whichever definition serves it.
    let stop = CancellationToken::new();
    let load: Vec<_> = (0..4)
        .map(|n| {
            let (workspace, stop) = (workspace.clone(), stop.clone());
            tokio::spawn(async move {
                let mut done = 0usize;
                while !stop.is_cancelled() {
                    let text = format!("load-{n}-{done}");
                    let result = workspace
                        .call_tool(
                            "busy",
                            "echo",
                            json!({ "text": text }),
                            CallOptions::default(),
                        )
                        .await
                        .unwrap_or_else(|error| {
                            panic!("a call beside the change failed: {error:?}")
                        });
                    assert_eq!(result.text(), text);
                    // No version of the snapshot lacks the server or shows it not ready.
                    let shown = workspace.snapshot().server("busy").map(|s| s.state);
                    assert_eq!(shown, Some(ServerState::Ready), "a gap in the snapshot");
                    done += 1;
                }
                done
            })
        })
        .collect();
    // Calls held by the old process: the swap must wait for them.
    let held: Vec<_> = (0..HELD)
        .map(|i| gate_call(&workspace, "busy", &format!("old-{i}")))
        .collect();
    probe.wait_count("gate", HELD, BOUND).await;
    let change = {
        let (workspace, customize) = (workspace.clone(), renamed("busy-next", &probe));
        tokio::spawn(async move { workspace.enable_with("busy", customize).await })
    };
    // Once the new definition is ready, new calls run on its process although the old one
    // still holds its calls and the snapshot still routes to the old session.
    let deadline = Instant::now() + BOUND;
    let new = loop {
        let now = pid_of(&workspace, "busy").await;
        if now != old {
            break now;
        }
        assert!(
            !change.is_finished(),
            "the change settled before it took calls: {:?}",
            change.await
        );
        assert!(
            Instant::now() < deadline,
            "the new definition never took calls"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        !change.is_finished(),
        "the swap committed beside held calls"
    );
    assert!(group_alive(old), "the old process went while it held calls");
    assert_eq!(probe.release_all().await, HELD);
    for (i, call) in held.into_iter().enumerate() {
        let result = tokio::time::timeout(BOUND, call)
            .await
            .expect("every held call settles")
            .expect("no panic")
            .unwrap_or_else(|error| panic!("held call {i} was lost: {error:?}"));
        assert_eq!(result.text(), format!("released old-{i}"));
    }
    let changed = tokio::time::timeout(BOUND, change)
        .await
        .expect("the change completes once the old calls settled")
        .expect("no panic")
        .expect("the change");
    assert_eq!(changed.state, ServerState::Ready);
    assert_eq!(
        changed.negotiated.and_then(|n| n.name.clone()).as_deref(),
        Some("busy-next")
    );
    assert_eq!(pid_of(&workspace, "busy").await, new);
    assert!(
        wait::until(BOUND, || !group_alive(old)).await,
        "the old process outlived the swap"
    );
    stop.cancel();
    for task in load {
        let done = tokio::time::timeout(BOUND, task)
            .await
            .expect("the load stops")
            .expect("no call beside the change failed");
        assert!(done > 0, "a load task made no call");
    }
    // The server never left `ready`: no state change was reported for it.
    while let Ok(event) = events.try_recv() {
        if let HostEvent::StateChanged { alias, to, .. } = event {
            assert_ne!(alias, "busy", "the server went {to:?} during the swap");
        }
    }
    // A change the server cannot be connected with changes nothing.
    let broken = Customize::default().with_overlay(None).with_options(Some(
        McpServerOptions::from_json(&json!({"args": ["no-such-subcommand"]}).to_string())
            .expect("parses"),
    ));
    let problem = workspace
        .enable_with("busy", broken)
        .await
        .expect_err("a candidate that cannot start");
    assert_eq!(problem.status, 502, "{problem:?}");
    assert_eq!(
        pid_of(&workspace, "busy").await,
        new,
        "the live session was replaced"
    );
    assert_eq!(
        workspace.snapshot().server("busy").map(|s| s.state),
        Some(ServerState::Ready)
    );
    shutdown_clean(host).await;
}
