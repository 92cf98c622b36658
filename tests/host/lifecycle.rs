//! A server's life in a workspace without faults: start beside unreachable ones, add and
//! remove, enable and disable, in-process servers, and a shutdown that leaves nothing behind.

use std::collections::BTreeMap;
use std::time::Instant;

use plurnk_mcp::config::{DefinitionParts, ServerDefinition, StdioDefinition, Transport};
use plurnk_mcp::{CallError, CallOptions, Host, HostOptions, ServerState, TransportKind};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

use crate::calls::{BOUND, gate_call, pid_of, shutdown_clean};
use crate::env::{EXE, Env};
use crate::wait;
use crate::{closing, group_alive};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_servers_are_unavailable_and_never_hold_up_the_others() {
    // A port nobody listens on: bind, note it, close.
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let config = Env::new()
        .stdio("good", &[])
        .set(
            "PLURNK_MCP_MISSING",
            "/nonexistent/dir with space/mcp-server",
        )
        .set("PLURNK_MCP_SILENT", "/bin/sleep")
        .set("PLURNK_MCP_SILENT_ARGS", json!(["30"]).to_string())
        .set(
            "PLURNK_MCP_REFUSED",
            format!("http://127.0.0.1:{closed_port}/mcp"),
        )
        .set("PLURNK_MCP_REFUSED_BEARER", "${SECRET_TOKEN}")
        .set("SECRET_TOKEN", "tok-very-secret-123")
        .set("PLURNK_MCP_CONNECT_TIMEOUT", "1500")
        .enable(&["good", "missing", "silent", "refused"])
        .config();
    let started = Instant::now();
    let host = Host::start(config).await.expect("host starts");
    let hydration = started.elapsed();
    let snapshot = host.default_workspace().snapshot();
    // The silent server is bounded by the 1.5 s connect timeout; nothing waits on it longer
    // (a generous guard: the silent server alone would hold start for its 30 s sleep).
    assert!(hydration < BOUND, "hydration took {hydration:?}");
    assert_eq!(
        snapshot.server("good").map(|s| s.state),
        Some(ServerState::Ready)
    );
    for (alias, transport) in [
        ("missing", "stdio"),
        ("silent", "stdio"),
        ("refused", "http"),
    ] {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        assert!(server.tools.is_empty(), "{alias} publishes nothing");
        let problem = server.problem.as_ref().expect("a problem");
        assert_eq!(problem.status, 502, "{alias}");
        assert_eq!(problem.kind, "server-unavailable");
        assert!(problem.retryable);
        assert!(
            problem
                .detail
                .contains(&format!("server \"{alias}\" ({transport})")),
            "{alias}: {}",
            problem.detail
        );
        assert!(
            !problem.detail.contains("tok-very-secret-123"),
            "{}",
            problem.detail
        );
    }
    let silent = snapshot.server("silent").and_then(|s| s.problem.clone());
    assert!(
        silent.is_some_and(|p| p.detail.contains("1500 ms")),
        "the timeout is named"
    );
    let echo = host
        .default_workspace()
        .call_tool(
            "good",
            "echo",
            json!({"text": "still here"}),
            CallOptions::default(),
        )
        .await
        .expect("the good server answers");
    assert_eq!(echo.text(), "still here");
    let refused = host
        .default_workspace()
        .call_tool("refused", "echo", json!({}), CallOptions::default())
        .await;
    assert!(matches!(
        refused,
        Err(CallError::NotReady {
            state: ServerState::Unavailable,
            ..
        })
    ));
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_given_its_grace_to_exit_on_its_own() {
    // Each server's last act after its stdin closes: the host waits for it (its close
    // grace) before it kills the group, when it shuts down and when it lets a server go
    // that failed its tool policy.
    let mark = |alias: &str| {
        std::env::temp_dir().join(format!("plurnk-mcp-grace-{alias}-{}", std::process::id()))
    };
    let script = |alias: &str| {
        let _ = std::fs::remove_file(mark(alias));
        format!(
            "\"{EXE}\" fixture --name {alias}; sleep 0.2; echo finished > \"{}\"",
            mark(alias).display()
        )
    };
    let finished = |alias: &str| {
        std::fs::read_to_string(mark(alias)).is_ok_and(|text| text.trim() == "finished")
    };
    let config = Env::new()
        .set("PLURNK_MCP_POLITE", "/bin/sh")
        .set(
            "PLURNK_MCP_POLITE_ARGS",
            json!(["-c", script("polite")]).to_string(),
        )
        .set("PLURNK_MCP_PICKY", "/bin/sh")
        .set(
            "PLURNK_MCP_PICKY_ARGS",
            json!(["-c", script("picky")]).to_string(),
        )
        .set("PLURNK_MCP_PICKY_TOOLS", json!(["push"]).to_string())
        .enable(&["polite", "picky"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    assert_eq!(
        snapshot.server("polite").map(|s| s.state),
        Some(ServerState::Ready)
    );
    assert_eq!(
        snapshot.server("picky").map(|s| s.state),
        Some(ServerState::Unavailable)
    );
    assert!(
        wait::until(BOUND, || finished("picky")).await,
        "the server that failed its policy was killed before it could exit"
    );
    shutdown_clean(host).await;
    assert!(
        finished("polite"),
        "the server was killed before it could exit at shutdown"
    );
    for alias in ["polite", "picky"] {
        let _ = std::fs::remove_file(mark(alias));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_process_of_any_group_alive() {
    let probe = Probe::start().await;
    // The server starts a grandchild in its own process group that ignores SIGTERM, SIGHUP
    // and stdin EOF; shutdown must reach it too.
    let script = format!(
        "trap '' TERM HUP; (trap '' TERM HUP; exec sleep 300 </dev/null >/dev/null 2>&1) & \
         exec \"{EXE}\" fixture --name family"
    );
    let config = Env::new()
        .set("PLURNK_MCP_FAMILY", "/bin/sh")
        .set("PLURNK_MCP_FAMILY_ARGS", json!(["-c", script]).to_string())
        .probed("plain", &probe, &[])
        .enable(&["family", "plain"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let family = pid_of(&workspace, "family").await;
    let plain = pid_of(&workspace, "plain").await;
    assert!(group_alive(family) && group_alive(plain));
    let held = gate_call(&workspace, "plain", "held");
    probe.wait_gate("held", BOUND).await;
    shutdown_clean(host).await;
    let held = tokio::time::timeout(BOUND, held)
        .await
        .expect("the in-flight call was settled by shutdown")
        .expect("no panic");
    assert!(
        matches!(held, Err(CallError::Closing { .. })),
        "shutdown settles an in-flight call as closing: {held:?}"
    );
    assert!(
        wait::until(BOUND, || !group_alive(family)).await,
        "the grandchild's group is gone"
    );
    assert!(wait::until(BOUND, || !group_alive(plain)).await);
    let refused = workspace
        .call_tool("plain", "echo", json!({}), CallOptions::default())
        .await;
    assert!(matches!(refused, Err(CallError::ShuttingDown)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enable_behind_a_disable_is_answered_with_how_it_failed() {
    let probe = Probe::start().await;
    // The server starts once; started again, it fails with its reason on stderr.
    let mark = std::env::temp_dir().join(format!("plurnk-mcp-once-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let script = format!(
        "if [ -e \"{mark}\" ]; then echo 'only once, on purpose' >&2; exit 3; fi; \
         touch \"{mark}\"; exec \"{EXE}\" fixture --name once --probe {probe}",
        mark = mark.display(),
        probe = probe.address(),
    );
    let config = Env::new()
        .set("PLURNK_MCP_ONCE", "/bin/sh")
        .set("PLURNK_MCP_ONCE_ARGS", json!(["-c", script]).to_string())
        .enable(&["once"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    // A held call keeps the disable from committing; the enable waits behind it.
    let held = gate_call(&workspace, "once", "held");
    probe.wait_gate("held", BOUND).await;
    let spawn = |action: &'static str| {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            match action {
                "disable" => workspace.disable("once").await,
                _ => workspace.enable("once").await,
            }
        })
    };
    let disable = spawn("disable");
    closing(&workspace, "once").await;
    let enable = spawn("enable");
    probe.release_all().await;
    let settle = |task: tokio::task::JoinHandle<_>| async move {
        tokio::time::timeout(BOUND, task)
            .await
            .expect("the action settles")
            .expect("no panic")
    };
    let disabled = settle(disable).await;
    assert!(disabled.is_ok(), "{disabled:?}");
    let enabled = settle(enable).await;
    let _ = std::fs::remove_file(&mark);
    let Err(problem) = enabled else {
        panic!("an enable whose server fails is answered with its Problem: {enabled:?}");
    };
    assert!(
        problem.detail.contains("only once, on purpose"),
        "{problem:?}"
    );
    let _ = held.await;
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_and_remove_workspace_servers() {
    let config = Env::new()
        .stdio("base", &[])
        .enable(&["base"])
        .set("PLURNK_MCP_ALLOW_ADD", "true")
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let mut stdio = StdioDefinition::new(EXE);
    stdio.args = vec!["fixture".into(), "--name".into(), "extra".into()];
    let definition = ServerDefinition::new(DefinitionParts::new("extra", Transport::Stdio(stdio)))
        .expect("a valid definition");
    let added = workspace.add(definition).await.expect("add connects");
    assert_eq!(added.state, ServerState::Ready);
    assert_eq!(added.tools.len(), 12);
    let broken = ServerDefinition::from_target("broken", "/nonexistent/server").expect("valid");
    let problem = workspace
        .add(broken)
        .await
        .expect_err("an unreachable add fails");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    assert!(
        workspace.snapshot().server("broken").is_none(),
        "a failed add leaves no trace"
    );
    let conflict = workspace
        .add(ServerDefinition::from_target("base", EXE).expect("valid"))
        .await
        .expect_err("duplicate alias");
    assert_eq!((conflict.status, conflict.kind.as_str()), (409, "conflict"));
    let refused = workspace
        .remove("base")
        .await
        .expect_err("service servers are disabled, not removed");
    assert_eq!((refused.status, refused.kind.as_str()), (409, "conflict"));
    workspace.remove("extra").await.expect("remove");
    assert!(workspace.snapshot().server("extra").is_none());
    shutdown_clean(host).await;
}

/// Thousands of servers connecting at once would each take as long as all of them together,
/// pass their connect timeout and retry without end: a host runs at most 512 attempts at
/// once (`ATTEMPTS_AT_ONCE` in `actors/attachment.rs`), and the others wait for a place
/// before their attempt, and its timeout, starts. Every server gets there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_512_connection_attempts_run_at_once_and_every_server_gets_there() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const SERVERS: usize = 600;
    // Every server answers only once the gate opens, so every attempt started stays open.
    let (gate, opened) = tokio::sync::watch::channel(false);
    let started = Arc::new(AtomicUsize::new(0));
    let connector: plurnk_mcp::InProcessConnector = {
        let started = started.clone();
        Arc::new(move || {
            started.fetch_add(1, Ordering::SeqCst);
            let (host_end, server_end) = tokio::io::duplex(64 * 1024);
            let mut opened = opened.clone();
            tokio::spawn(async move {
                let _ = opened.wait_for(|open| *open).await;
                let (read, write) = tokio::io::split(server_end);
                let _ = plurnk_mcp_fixture::serve_io(
                    read,
                    write,
                    plurnk_mcp_fixture::FixtureOptions::default(),
                )
                .await;
            });
            host_end
        })
    };
    let options = HostOptions::default().with_in_process(
        (0..SERVERS)
            .map(|i| (format!("mem-{i}"), connector.clone()))
            .collect(),
    );
    // The attempts held at the gate must not time out on a slow machine.
    let config = Env::new()
        .set("PLURNK_MCP_CONNECT_TIMEOUT", "120000")
        .config();
    let starting = tokio::spawn(Host::start_with(config, options));
    assert!(
        wait::until(BOUND, || started.load(Ordering::SeqCst) >= 512).await,
        "512 attempts start at once ({} did)",
        started.load(Ordering::SeqCst)
    );
    // A window that can only undercount: no attempt ends while the gate is shut, so any
    // attempt past the 512th would have started by now on any machine that started those.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(started.load(Ordering::SeqCst), 512, "no more run at once");
    gate.send_replace(true);
    let host = starting
        .await
        .expect("the start task")
        .expect("host starts");
    let workspace = host.default_workspace();
    let ready = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot.servers.count(ServerState::Ready) == SERVERS
        })
        .await;
    assert_eq!(ready.servers.count(ServerState::Ready), SERVERS);
    assert_eq!(started.load(Ordering::SeqCst), SERVERS, "one attempt each");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_servers_join_the_default_workspace() {
    let connector: plurnk_mcp::InProcessConnector = std::sync::Arc::new(|| {
        let (host_end, server_end) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server_end);
        tokio::spawn(plurnk_mcp_fixture::serve_io(
            read,
            write,
            plurnk_mcp_fixture::FixtureOptions::default(),
        ));
        host_end
    });
    let in_process: BTreeMap<String, plurnk_mcp::InProcessConnector> = (0..50)
        .map(|i| (format!("mem-{i}"), connector.clone()))
        .collect();
    let options = HostOptions::default().with_in_process(in_process.clone());
    let host = Host::start_with(Env::new().config(), options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    assert_eq!(snapshot.servers.len(), 50);
    for server in snapshot.servers.values() {
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{}: {:?}",
            server.alias,
            server.problem
        );
        assert_eq!(server.transport, TransportKind::InProcess);
        assert_eq!(
            server.negotiated.as_ref().map(|n| n.revision.as_str()),
            Some("2026-07-28")
        );
    }
    let echo = workspace
        .call_tool(
            "mem-7",
            "echo",
            json!({"text": "inside"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "inside");
    // Disable and enable reconnect through the connector again.
    workspace.disable("mem-7").await.expect("disable");
    let enabled = workspace.enable("mem-7").await.expect("enable");
    assert_eq!(enabled.state, ServerState::Ready);
    shutdown_clean(host).await;

    // An alias the configuration also declares is refused at start.
    let clash =
        HostOptions::default().with_in_process(BTreeMap::from([("svc".to_owned(), connector)]));
    let config = Env::new().stdio("svc", &[]).config();
    let refused = Host::start_with(config, clash).await;
    assert!(
        refused.as_ref().is_err_and(
            |e| matches!(e, plurnk_mcp::StartError::State(detail) if detail.contains("\"svc\""))
        ),
        "{refused:?}"
    );
}
