//! A server or an attachment that fails: kill -9, panics, crash loops, a child that dies at
//! start or keeps its stdout open, and late reports or attempts that must not touch a successor.

use std::time::{Duration, Instant};

use plurnk_mcp::{
    CallError, CallOptions, Host, HostEvent, HostOptions, RestartPolicy, ServerState,
};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

use crate::calls::{BOUND, gate_call, holds_for, pid_of, shutdown_clean};
use crate::env::{EXE, Env};
use crate::wait;
use crate::{closing, fast_restarts, group_alive, processes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_fails_calls_at_once_and_the_server_comes_back_by_itself() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("victim", &probe, &[])
        .enable(&["victim"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let first_generation = workspace.snapshot().server("victim").map(|s| s.generation);
    let pid = pid_of(&workspace, "victim").await;
    // A call the server has received and holds, with a deadline far beyond the guard below:
    // if loss did not fail it at once, it would run into that deadline instead.
    let in_flight = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            let options = CallOptions::default().with_timeout(Some(Duration::from_secs(120)));
            workspace
                .call_tool("victim", "gate", json!({"id": "held"}), options)
                .await
        })
    };
    probe.wait_gate("held", BOUND).await;
    let mut events = host.events();
    let killed = Instant::now();
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let outcome = tokio::time::timeout(BOUND, in_flight)
        .await
        .expect("the in-flight call settles, it does not hang")
        .expect("the task did not panic");
    assert!(
        matches!(&outcome, Err(CallError::ConnectionLost { detail, .. }) if detail == "the transport closed"),
        "the call says how it was lost: {outcome:?}"
    );
    assert!(
        killed.elapsed() < BOUND,
        "failed at the loss, not at its 120 s deadline: {:?}",
        killed.elapsed()
    );
    let down = workspace
        .wait_for(BOUND, |s| {
            s.server("victim")
                .is_some_and(|s| s.state != ServerState::Ready)
        })
        .await;
    let victim = down.server("victim").expect("configured");
    assert_eq!(
        victim.state,
        ServerState::Unavailable,
        "{:?}",
        victim.problem
    );
    // Once the loss is examined, the Problem says how the process ended.
    let examined = workspace
        .wait_for(BOUND, |s| {
            s.server("victim")
                .and_then(|s| s.problem.as_ref())
                .is_some_and(|p| p.detail.contains("killed by signal 9"))
        })
        .await;
    let detail = examined
        .server("victim")
        .and_then(|s| s.problem.as_ref())
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains("lost its connection") && detail.contains("killed by signal 9"),
        "{detail}"
    );
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("victim")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    let victim = back.server("victim").expect("configured");
    assert_eq!(victim.state, ServerState::Ready, "{:?}", victim.problem);
    assert!(
        Some(victim.generation) > first_generation,
        "a new connection"
    );
    let new_pid = pid_of(&workspace, "victim").await;
    assert_ne!(new_pid, pid);
    assert!(
        wait::until(BOUND, || !group_alive(pid)).await,
        "the killed server's group is gone"
    );
    // Subscribers saw the way down and back to ready.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HostEvent::StateChanged { alias, to, .. } = event
            && alias == "victim"
        {
            seen.push(to);
        }
    }
    assert_eq!(
        seen,
        [ServerState::Unavailable, ServerState::Ready],
        "the events stream reported the loss and the recovery"
    );
    shutdown_clean(host).await;
    assert!(wait::until(BOUND, || !group_alive(new_pid)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_that_crashes_while_it_closes_completes_its_disable() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("fragile", &probe, &[])
        .enable(&["fragile"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    // A call keeps the attachment closing for as long as the test likes.
    let held = gate_call(&workspace, "fragile", "held");
    probe.wait_gate("held", BOUND).await;
    let disable = {
        let workspace = workspace.clone();
        tokio::spawn(async move { workspace.disable("fragile").await })
    };
    // Once the attachment refuses new calls as closing, the disable is under way.
    closing(&workspace, "fragile").await;
    assert!(workspace.crash_attachment_for_test("fragile"));
    // The crash ends the closing: the disable completes, and nothing is restarted.
    let disabled = tokio::time::timeout(BOUND, disable)
        .await
        .expect("the disable settles")
        .expect("no panic");
    assert!(disabled.is_ok(), "{disabled:?}");
    let settled = workspace
        .wait_for(BOUND, |s| {
            s.server("fragile")
                .is_some_and(|s| s.state == ServerState::Disabled)
        })
        .await;
    assert_eq!(
        settled.server("fragile").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    let held = tokio::time::timeout(BOUND, held)
        .await
        .expect("the held call settles")
        .expect("no panic");
    assert!(held.is_err(), "{held:?}");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_child_keeps_its_stdout_open_is_still_seen_to_die() {
    // The server's child inherits its stdout and outlives it: no end of file ever comes.
    let script = format!("(exec sleep 300) & exec \"{EXE}\" fixture --name parent");
    let config = Env::new()
        .set("PLURNK_MCP_PARENT", "/bin/sh")
        .set("PLURNK_MCP_PARENT_ARGS", json!(["-c", script]).to_string())
        .enable(&["parent"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let pid = pid_of(&workspace, "parent").await;
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("parent")
                .is_some_and(|s| s.state == ServerState::Ready && s.generation == 2)
        })
        .await;
    assert_eq!(
        back.server("parent").map(|s| (s.state, s.generation)),
        Some((ServerState::Ready, 2)),
        "the server's death was noticed and it came back"
    );
    assert_ne!(pid_of(&workspace, "parent").await, pid);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_attachment_restarts_unavailable_then_reconnects() {
    // The server leaves a grandchild in its group that ignores SIGTERM, SIGHUP and stdin EOF:
    // only killing the group when the crashed actor's connection is dropped ends it.
    let script = format!(
        "trap '' TERM HUP; (trap '' TERM HUP; exec sleep 300 </dev/null >/dev/null 2>&1) & \
         exec \"{EXE}\" fixture --name fragile"
    );
    let config = Env::new()
        .set("PLURNK_MCP_FRAGILE", "/bin/sh")
        .set("PLURNK_MCP_FRAGILE_ARGS", json!(["-c", script]).to_string())
        .enable(&["fragile"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let pid = pid_of(&workspace, "fragile").await;
    assert!(workspace.crash_attachment_for_test("fragile"));
    let down = workspace
        .wait_for(BOUND, |s| {
            s.server("fragile")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    assert_eq!(
        down.server("fragile").map(|s| s.state),
        Some(ServerState::Unavailable)
    );
    // The crashed actor's connection died with it: its whole process group is gone.
    assert!(
        wait::until(BOUND, || !group_alive(pid)).await,
        "the stubborn grandchild outlived the crashed attachment"
    );
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("fragile")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    assert_eq!(
        back.server("fragile").map(|s| s.state),
        Some(ServerState::Ready)
    );
    let echo = workspace
        .call_tool(
            "fragile",
            "echo",
            json!({"text": "again"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "again");
    let again = pid_of(&workspace, "fragile").await;
    shutdown_clean(host).await;
    assert!(wait::until(BOUND, || !group_alive(again)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_report_of_a_crashed_attachment_never_touches_its_successor() {
    // A server whose group outlives its stdin: every close of it takes the whole close grace
    // (then SIGKILL), so the report that a connection closed comes a grace after the close
    // began. Each start appends the group leader's pid.
    let pids = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("host-lingering-{}.pids", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    let script = format!(
        "echo $$ >> \"{}\"; \"{EXE}\" fixture --name lingering; \
         exec sleep 300 </dev/null >/dev/null 2>&1",
        pids.display()
    );
    let leaders = || -> Vec<i32> {
        std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .map(|line| line.trim().parse().expect("a pid"))
            .collect()
    };
    let config = Env::new()
        .set("PLURNK_MCP_LINGERING", "/bin/sh")
        .set(
            "PLURNK_MCP_LINGERING_ARGS",
            json!(["-c", script]).to_string(),
        )
        // Its script reports its own pid ($$), which in a sandbox's PID namespace is 1.
        .set(
            "PLURNK_MCP_LINGERING_SANDBOX",
            json!({"mode": "off"}).to_string(),
        )
        .enable(&["lingering"])
        .config();
    let grace = Duration::from_secs(2);
    let host = Host::start_with(config, fast_restarts().with_close_grace(grace))
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    pid_of(&workspace, "lingering").await;
    let first = leaders();
    assert_eq!(first.len(), 1, "one start so far: {first:?}");
    // Disable: the attachment drains, and its connection starts its slow close.
    let disabling = tokio::spawn({
        let workspace = workspace.clone();
        async move { workspace.disable("lingering").await }
    });
    let deadline = Instant::now() + BOUND;
    loop {
        let call = workspace
            .call_tool(
                "lingering",
                "echo",
                json!({"text": "x"}),
                CallOptions::default(),
            )
            .await;
        match call {
            // The attachment has taken the drain (and, with nothing in flight, begun closing).
            Err(CallError::Closing { .. }) => break,
            Ok(_) => assert!(Instant::now() < deadline, "the disable never began"),
            Err(other) => panic!("a call during the disable: {other:?}"),
        }
    }
    // The attachment fails while its connection is still closing: the workspace takes the
    // crash as the end of the disable, and an enable starts a new attachment at once.
    assert!(workspace.crash_attachment_for_test("lingering"));
    let disabled = disabling
        .await
        .expect("joined")
        .expect("the disable is answered");
    assert_eq!(disabled.state, ServerState::Disabled);
    let mut events = host.events();
    let enabled = workspace.enable("lingering").await.expect("enabled again");
    assert_eq!(enabled.state, ServerState::Ready);
    // (The test means something only if the old close is still under way here.)
    assert!(
        group_alive(first[0]),
        "the first connection closed before its successor was ready: raise the grace"
    );
    // The old connection's close ends, and its report reaches the workspace late...
    assert!(
        wait::until(BOUND, || !group_alive(first[0])).await,
        "the first connection's group outlived its close"
    );
    // ...before this round trip through the workspace (an enable of a ready server).
    let again = workspace.enable("lingering").await.expect("still enabled");
    assert_eq!(again.state, ServerState::Ready);
    // The report was the old attachment's: the new one is still the server, ready and
    // alone, and nothing changed state since it became ready.
    let now = workspace.snapshot();
    assert_eq!(
        now.server("lingering").map(|s| s.state),
        Some(ServerState::Ready)
    );
    let mut changes = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HostEvent::StateChanged { alias, to, .. } = event
            && alias == "lingering"
        {
            changes.push(to);
        }
    }
    assert_eq!(
        changes.last(),
        Some(&ServerState::Ready),
        "the new attachment's state changes end at ready: {changes:?}"
    );
    assert!(
        !changes.contains(&ServerState::Disabled),
        "a late report disabled the new attachment: {changes:?}"
    );
    assert_eq!(leaders().len(), 2, "exactly one new start: {:?}", leaders());
    let echo = workspace
        .call_tool(
            "lingering",
            "echo",
            json!({"text": "on"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "on");
    let second = leaders()[1];
    shutdown_clean(host).await;
    assert!(wait::until(BOUND, || !group_alive(second)).await);
    let _ = std::fs::remove_file(&pids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_crashes_end_in_crash_loop_until_enabled_again() {
    let config = Env::new().stdio("flaky", &[]).enable(&["flaky"]).config();
    let options = fast_restarts().with_restart(
        RestartPolicy::default()
            .with_min_delay(Duration::from_millis(20))
            .with_max_delay(Duration::from_millis(100))
            .with_crash_limit(2)
            .with_window(Duration::from_secs(60)),
    );
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    for round in 0..2 {
        let ready = workspace
            .wait_for(BOUND, |s| {
                s.server("flaky")
                    .is_some_and(|s| s.state == ServerState::Ready)
            })
            .await;
        assert_eq!(
            ready.server("flaky").map(|s| s.state),
            Some(ServerState::Ready),
            "round {round}"
        );
        let crashed = workspace
            .call_tool("flaky", "crash", json!({"code": 3}), CallOptions::default())
            .await;
        assert!(
            matches!(crashed, Err(CallError::ConnectionLost { .. })),
            "{crashed:?}"
        );
        let down = workspace
            .wait_for(BOUND, |s| {
                s.server("flaky")
                    .is_some_and(|s| s.state != ServerState::Ready)
            })
            .await;
        assert_ne!(
            down.server("flaky").map(|s| s.state),
            Some(ServerState::Ready),
            "round {round}"
        );
    }
    let looped = workspace
        .wait_for(BOUND, |s| {
            s.server("flaky")
                .is_some_and(|s| s.state == ServerState::CrashLoop)
        })
        .await;
    let flaky = looped.server("flaky").expect("configured");
    assert_eq!(flaky.state, ServerState::CrashLoop);
    assert!(
        flaky
            .problem
            .as_ref()
            .is_some_and(|p| p.detail.contains("enable it again")),
        "{:?}",
        flaky.problem
    );
    // The last failure is named too, once the loss is examined.
    let examined = workspace
        .wait_for(BOUND, |s| {
            s.server("flaky")
                .and_then(|s| s.problem.as_ref())
                .is_some_and(|p| p.detail.contains("exited with status 3"))
        })
        .await;
    let detail = examined
        .server("flaky")
        .and_then(|s| s.problem.as_ref())
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains("last failure") && detail.contains("exited with status 3"),
        "{detail}"
    );
    let enabled = workspace.enable("flaky").await.expect("enable reconnects");
    assert_eq!(enabled.state, ServerState::Ready);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_at_start_shows_its_exit_and_stderr() {
    let config = Env::new()
        .set("PLURNK_MCP_BROKEN", "/bin/sh")
        .set(
            "PLURNK_MCP_BROKEN_ARGS",
            json!([
                "-c",
                "echo 'cannot open database: boom-on-stderr' >&2; exit 4"
            ])
            .to_string(),
        )
        // Its stdout closes first; its last words and its exit come a moment later, and are
        // waited for.
        .set("PLURNK_MCP_LATE", "/bin/sh")
        .set(
            "PLURNK_MCP_LATE_ARGS",
            json!([
                "-c",
                "exec 1>&-; sleep 0.2; echo 'late last words' >&2; exit 5"
            ])
            .to_string(),
        )
        .enable(&["broken", "late"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let late = snapshot
        .server("late")
        .and_then(|s| s.problem.as_ref())
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(
        late.contains("late last words") && late.contains("status 5"),
        "{late}"
    );
    let broken = snapshot.server("broken").expect("configured");
    assert_eq!(broken.state, ServerState::Unavailable);
    let detail = broken
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(detail.contains("boom-on-stderr"), "{detail}");
    assert!(detail.contains("status 4"), "{detail}");
    // Enabling it again is a reconnect, answered with how that attempt failed.
    let again = host.default_workspace().enable("broken").await;
    let Err(problem) = again else {
        panic!("a reconnect that fails is answered with its Problem: {again:?}");
    };
    assert!(problem.detail.contains("status 4"), "{problem:?}");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enable_during_backoff_leaves_no_stray_reconnect() {
    let config = Env::new().stdio("victim", &[]).enable(&["victim"]).config();
    // A slow backoff: the retry timer of the loss is still pending when enable reconnects.
    let options = HostOptions::default().with_restart(
        RestartPolicy::default()
            .with_min_delay(Duration::from_millis(1500))
            .with_max_delay(Duration::from_millis(1500))
            .with_crash_limit(10)
            .with_window(Duration::from_secs(60)),
    );
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let pid = pid_of(&workspace, "victim").await;
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    workspace
        .wait_for(BOUND, |s| {
            s.server("victim")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    let enabled = workspace.enable("victim").await.expect("enable reconnects");
    assert_eq!(enabled.state, ServerState::Ready);
    let generation = enabled.generation;
    let new_pid = pid_of(&workspace, "victim").await;
    // The stale timer fires within its delay plus jitter (at most twice the delay): it must
    // find nothing to do. The wait is the policy's own bound, not a guess at a state.
    holds_for(Duration::from_millis(3200), || {
        let after = workspace.snapshot();
        let victim = after.server("victim").ok_or("victim is configured")?;
        if (victim.state, victim.generation) == (ServerState::Ready, generation) {
            Ok(())
        } else {
            Err(format!(
                "the stale retry timer reconnected a ready server: {:?} generation {}",
                victim.state, victim.generation
            ))
        }
    })
    .await;
    assert_eq!(pid_of(&workspace, "victim").await, new_pid);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_connection_attempt_never_becomes_the_connection() {
    let probe = Probe::start().await;
    let mark = format!("replaced-{}", std::process::id());
    let config = Env::new()
        .probed("slow", &probe, &["--hold-lists"])
        .set(
            "PLURNK_MCP_SLOW_ENV",
            json!({ "TEST_MARK": mark }).to_string(),
        )
        .enable(&["slow"])
        .config();
    // Every attempt holds at its first tools/list until the test lets it go.
    let start = tokio::spawn(Host::start_with(config, fast_restarts()));
    probe.wait_count("tools/list", 1, BOUND).await;
    probe.release_all().await;
    let host = start.await.expect("no panic").expect("host starts");
    let workspace = host.default_workspace();
    assert_eq!(
        workspace
            .snapshot()
            .server("slow")
            .map(|s| (s.state, s.generation)),
        Some((ServerState::Ready, 1))
    );
    let pid = pid_of(&workspace, "slow").await;
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    // The backoff's attempt starts and holds; an enable starts another beside it.
    probe.wait_count("tools/list", 2, BOUND).await;
    let enable = {
        let workspace = workspace.clone();
        tokio::spawn(async move { workspace.enable("slow").await })
    };
    probe.wait_count("tools/list", 3, BOUND).await;
    // The older attempt finishes first: it was replaced, and must be dropped (its process
    // ends) while the newer one still holds.
    assert!(probe.release_one("tools/list").await);
    assert!(
        wait::until(BOUND, || processes::marked(&mark).len() == 1).await,
        "the replaced attempt was kept: {:?}",
        processes::marked(&mark)
    );
    assert_eq!(probe.release_all().await, 1);
    let enabled = tokio::time::timeout(BOUND, enable)
        .await
        .expect("the enable settles")
        .expect("no panic")
        .expect("enabled");
    assert_eq!(enabled.state, ServerState::Ready);
    let settled = workspace
        .wait_for(BOUND, |s| {
            s.server("slow")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    // One new connection, not one per attempt.
    assert_eq!(settled.server("slow").map(|s| s.generation), Some(2));
    let echo = workspace
        .call_tool(
            "slow",
            "echo",
            json!({"text": "one"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "one");
    assert_eq!(
        workspace.snapshot().server("slow").map(|s| s.generation),
        Some(2),
        "a late attempt replaced the connection"
    );
    shutdown_clean(host).await;
}
