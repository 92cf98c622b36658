//! The host against real fixture servers: child processes over stdio and Streamable HTTP
//! servers on 127.0.0.1:0. Every test bounds its waits and stops what it started.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use plurnk_mcp::config::{DefinitionParts, ServerDefinition, StdioDefinition, Transport};
use plurnk_mcp::{
    CallError, CallOptions, Effect, Host, HostConfig, HostEvent, HostOptions, RestartPolicy,
    ServerState, TransportKind, Workspace,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "support/calls.rs"]
mod calls;
use calls::call_then_cancel;

const EXE: &str = env!("CARGO_BIN_EXE_plurnk-mcp");

/// A configuration map under construction.
struct Env(BTreeMap<String, String>);

impl Env {
    fn new() -> Self {
        let mut map = BTreeMap::new();
        map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "10000".into());
        map.insert("PLURNK_MCP_REQUEST_TIMEOUT".into(), "10000".into());
        Env(map)
    }

    fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }

    /// A fixture server over stdio (`extra` are fixture flags such as `--legacy`).
    fn stdio(self, alias: &str, extra: &[&str]) -> Self {
        let upper = alias.to_ascii_uppercase().replace('-', "_");
        let mut args = vec!["fixture", "--name", alias];
        args.extend_from_slice(extra);
        self.set(&format!("PLURNK_MCP_{upper}"), EXE)
            .set(&format!("PLURNK_MCP_{upper}_ARGS"), json!(args).to_string())
    }

    fn enable(self, aliases: &[&str]) -> Self {
        self.set("PLURNK_MCP_ENABLED", json!(aliases).to_string())
    }

    fn config(self) -> HostConfig {
        match HostConfig::from_env(self.0) {
            Ok(config) => config,
            Err(errors) => panic!("test configuration is invalid: {errors}"),
        }
    }
}

fn fast_restarts() -> HostOptions {
    HostOptions {
        restart: RestartPolicy {
            min_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            ..RestartPolicy::default()
        },
        ..HostOptions::default()
    }
}

/// An in-process Streamable HTTP fixture on 127.0.0.1:0.
struct HttpFixture {
    url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl HttpFixture {
    async fn start(name: &str, legacy: bool) -> Self {
        Self::start_with(plurnk_mcp_fixture::FixtureOptions {
            legacy,
            name: name.into(),
            ..Default::default()
        })
        .await
    }

    async fn start_with(options: plurnk_mcp_fixture::FixtureOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let stop = CancellationToken::new();
        let task = tokio::spawn(plurnk_mcp_fixture::serve_http(
            listener,
            options,
            stop.clone(),
        ));
        Self { url, stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

async fn pid_of(workspace: &Workspace, alias: &str) -> i32 {
    let result = workspace
        .call_tool(alias, "pid", json!({}), CallOptions::default())
        .await
        .expect("pid call");
    result.text().trim().parse().expect("pid is a number")
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only probes for existence.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

async fn eventually(bound: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_and_legacy_negotiate_over_stdio_and_http() {
    let modern_http = HttpFixture::start("modern-http", false).await;
    let legacy_http = HttpFixture::start("legacy-http", true).await;
    let config = Env::new()
        .stdio("modern-stdio", &[])
        .stdio("legacy-stdio", &["--legacy"])
        .set("PLURNK_MCP_MODERN_HTTP", modern_http.url.clone())
        .set("PLURNK_MCP_LEGACY_HTTP", legacy_http.url.clone())
        .enable(&["modern-stdio", "legacy-stdio", "modern-http", "legacy-http"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let expected = [
        ("modern-stdio", TransportKind::Stdio, "2026-07-28", true),
        ("legacy-stdio", TransportKind::Stdio, "2025-11-25", false),
        ("modern-http", TransportKind::Http, "2026-07-28", true),
        ("legacy-http", TransportKind::Http, "2025-11-25", false),
    ];
    for (alias, transport, revision, modern) in expected {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
        assert_eq!(server.transport, transport, "{alias}");
        let negotiated = server.negotiated.as_ref().expect("negotiated");
        assert_eq!(negotiated.revision, revision, "{alias}");
        assert_eq!(negotiated.modern, modern, "{alias}");
        assert_eq!(negotiated.name.as_deref(), Some(alias), "{alias} identity");
        assert_eq!(
            negotiated.instructions.as_deref(),
            Some("Fixture server for plurnk-mcp tests."),
            "{alias} instructions"
        );
        let mut names: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "add", "count", "crash", "echo", "fail", "headers", "lists", "pid", "sleep"
            ],
            "{alias}"
        );
        let echo = workspace
            .call_tool(
                alias,
                "echo",
                json!({"text": alias}),
                CallOptions::default(),
            )
            .await
            .expect("echo");
        assert_eq!(echo.text(), alias);
        assert!(!echo.is_error);
    }
    let report = host.shutdown().await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    modern_http.stop().await;
    legacy_http.stop().await;
}

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
        .set("PLURNK_MCP_DISCOVER_TIMEOUT", "500")
        .enable(&["good", "missing", "silent", "refused"])
        .config();
    let started = Instant::now();
    let host = Host::start(config).await.expect("host starts");
    let hydration = started.elapsed();
    let snapshot = host.default_workspace().snapshot();
    // The silent server is bounded by the 1.5 s connect timeout; nothing waits on it longer.
    assert!(
        hydration < Duration::from_millis(1500 + 2500),
        "hydration took {hydration:?}"
    );
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
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_fails_calls_at_once_and_the_server_comes_back_by_itself() {
    let config = Env::new().stdio("victim", &[]).enable(&["victim"]).config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let first_generation = workspace.snapshot().server("victim").map(|s| s.generation);
    let pid = pid_of(&workspace, "victim").await;
    let in_flight = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            workspace
                .call_tool(
                    "victim",
                    "sleep",
                    json!({"ms": 20_000}),
                    CallOptions::default(),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let outcome = tokio::time::timeout(Duration::from_secs(5), in_flight)
        .await
        .expect("the in-flight call settles, it does not hang")
        .expect("the task did not panic");
    assert!(
        matches!(outcome, Err(CallError::ConnectionLost { .. })),
        "{outcome:?}"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "failed fast: {:?}",
        killed.elapsed()
    );
    let mut events = host.events();
    let down = workspace
        .wait_for(Duration::from_secs(5), |s| {
            s.server("victim")
                .is_some_and(|s| s.state != ServerState::Ready)
        })
        .await;
    let victim = down.server("victim").expect("configured");
    assert!(
        matches!(victim.state, ServerState::Unavailable),
        "{:?}",
        victim.state
    );
    let back = workspace
        .wait_for(Duration::from_secs(10), |s| {
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
    assert!(!group_alive(pid), "the killed server's group is gone");
    // Subscribers saw the way back to ready.
    let mut saw_ready = false;
    while let Ok(event) = events.try_recv() {
        if let HostEvent::StateChanged {
            alias,
            to: ServerState::Ready,
            ..
        } = event
        {
            saw_ready |= alias == "victim";
        }
    }
    assert!(saw_ready, "the events stream reported the recovery");
    host.shutdown().await;
    assert!(!group_alive(new_pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_and_enable_while_200_calls_are_in_flight_loses_none() {
    let config = Env::new().stdio("busy", &[]).enable(&["busy"]).config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let mut calls = Vec::new();
    for i in 0..200u64 {
        let workspace = workspace.clone();
        calls.push(tokio::spawn(async move {
            let (tool, args) = if i % 2 == 0 {
                ("sleep", json!({"ms": 100 + (i % 7) * 30}))
            } else {
                ("echo", json!({"text": format!("call {i}")}))
            };
            workspace
                .call_tool("busy", tool, args, CallOptions::default())
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let disabled = workspace.disable("busy").await.expect("disable");
    assert_eq!(disabled.state, ServerState::Disabled);
    assert!(
        disabled.tools.is_empty(),
        "a disabled server publishes no tools"
    );
    let enabled = workspace.enable("busy").await.expect("enable");
    assert_eq!(enabled.state, ServerState::Ready);
    let (mut results, mut typed) = (0, 0);
    for call in calls {
        let outcome = tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("every call settles")
            .expect("no call task panicked");
        match outcome {
            Ok(result) => {
                assert!(!result.is_error);
                results += 1;
            }
            Err(
                CallError::Closing { .. }
                | CallError::NotReady { .. }
                | CallError::ConnectionLost { .. },
            ) => typed += 1,
            Err(other) => panic!("unexpected error kind: {other:?}"),
        }
    }
    assert_eq!(results + typed, 200);
    assert!(results > 0, "calls in flight before the disable completed");
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
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_process_of_any_group_alive() {
    // The server starts a grandchild in its own process group; shutdown must reach it too.
    let script = format!("sleep 300 & exec \"{EXE}\" fixture --name family");
    let config = Env::new()
        .set("PLURNK_MCP_FAMILY", "/bin/sh")
        .set("PLURNK_MCP_FAMILY_ARGS", json!(["-c", script]).to_string())
        .stdio("plain", &[])
        .enable(&["family", "plain"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let family = pid_of(&workspace, "family").await;
    let plain = pid_of(&workspace, "plain").await;
    assert!(group_alive(family) && group_alive(plain));
    let slow = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            workspace
                .call_tool(
                    "plain",
                    "sleep",
                    json!({"ms": 30_000}),
                    CallOptions::default(),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let report = host.shutdown().await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let slow = tokio::time::timeout(Duration::from_secs(5), slow)
        .await
        .expect("the in-flight call was settled by shutdown")
        .expect("no panic");
    assert!(slow.is_err(), "{slow:?}");
    assert!(!group_alive(family), "the grandchild's group is gone");
    assert!(!group_alive(plain));
    let refused = workspace
        .call_tool("plain", "echo", json!({}), CallOptions::default())
        .await;
    assert!(matches!(refused, Err(CallError::ShuttingDown)));
}

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
    assert_eq!(snapshot.server("all").map(|s| s.tools.len()), Some(9));
    let wrong = snapshot.server("wrong").expect("wrong");
    assert_eq!(wrong.state, ServerState::Unavailable);
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
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_cancellation_and_tool_errors_settle_calls() {
    let config = Env::new().stdio("calls", &[]).enable(&["calls"]).config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();

    let started = Instant::now();
    let timed_out = workspace
        .call_tool(
            "calls",
            "sleep",
            json!({"ms": 10_000}),
            CallOptions {
                timeout: Some(Duration::from_millis(300)),
                ..CallOptions::default()
            },
        )
        .await;
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
    assert!(started.elapsed() < Duration::from_secs(3));

    let cancelled = call_then_cancel(
        &workspace,
        "calls",
        "sleep",
        json!({"ms": 10_000}),
        Duration::from_millis(100),
    )
    .await;
    assert!(
        matches!(cancelled, Err(CallError::Cancelled { .. })),
        "{cancelled:?}"
    );

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
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_attachment_restarts_unavailable_then_reconnects() {
    let config = Env::new()
        .stdio("fragile", &[])
        .enable(&["fragile"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let pid = pid_of(&workspace, "fragile").await;
    assert!(workspace.crash_attachment_for_test("fragile"));
    let down = workspace
        .wait_for(Duration::from_secs(5), |s| {
            s.server("fragile")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    assert_eq!(
        down.server("fragile").map(|s| s.state),
        Some(ServerState::Unavailable)
    );
    // The crashed actor's connection died with it: its process group is gone.
    assert!(eventually(Duration::from_secs(5), || !group_alive(pid)).await);
    let back = workspace
        .wait_for(Duration::from_secs(10), |s| {
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
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_crashes_end_in_crash_loop_until_enabled_again() {
    let config = Env::new().stdio("flaky", &[]).enable(&["flaky"]).config();
    let options = HostOptions {
        restart: RestartPolicy {
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            crash_limit: 2,
            window: Duration::from_secs(60),
        },
        ..fast_restarts()
    };
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    for round in 0..2 {
        let ready = workspace
            .wait_for(Duration::from_secs(10), |s| {
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
        assert!(crashed.is_err(), "{crashed:?}");
        workspace
            .wait_for(Duration::from_secs(5), |s| {
                s.server("flaky")
                    .is_some_and(|s| s.state != ServerState::Ready)
            })
            .await;
    }
    let looped = workspace
        .wait_for(Duration::from_secs(5), |s| {
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
    let enabled = workspace.enable("flaky").await.expect("enable reconnects");
    assert_eq!(enabled.state, ServerState::Ready);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_and_remove_workspace_servers() {
    let config = Env::new().stdio("base", &[]).enable(&["base"]).config();
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let mut stdio = StdioDefinition::new(EXE);
    stdio.args = vec!["fixture".into(), "--name".into(), "extra".into()];
    let definition = ServerDefinition::new(DefinitionParts::new("extra", Transport::Stdio(stdio)))
        .expect("a valid definition");
    let added = workspace.add(definition).await.expect("add connects");
    assert_eq!(added.state, ServerState::Ready);
    assert_eq!(added.tools.len(), 9);
    let broken = ServerDefinition::from_target("broken", "/nonexistent/server").expect("valid");
    let problem = workspace
        .add(broken)
        .await
        .expect_err("an unreachable add fails");
    assert_eq!(problem.status, 502);
    assert!(
        workspace.snapshot().server("broken").is_none(),
        "a failed add leaves no trace"
    );
    let conflict = workspace
        .add(ServerDefinition::from_target("base", EXE).expect("valid"))
        .await
        .expect_err("duplicate alias");
    assert_eq!(conflict.status, 409);
    let refused = workspace
        .remove("base")
        .await
        .expect_err("service servers are disabled, not removed");
    assert_eq!(refused.status, 409);
    workspace.remove("extra").await.expect("remove");
    assert!(workspace.snapshot().server("extra").is_none());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_and_headers_reach_the_server_and_never_leak() {
    let guarded = HttpFixture::start_with(plurnk_mcp_fixture::FixtureOptions {
        name: "guarded".into(),
        bearer: Some("tok-123456789".into()),
        ..Default::default()
    })
    .await;
    let config = Env::new()
        .set("TOKEN", "tok-123456789")
        .set("WRONG_TOKEN", "tok-wrong-987654")
        .set("TRACE", "trace-789")
        .set("PLURNK_MCP_GOOD", guarded.url.clone())
        .set("PLURNK_MCP_GOOD_BEARER", "${TOKEN}")
        .set(
            "PLURNK_MCP_GOOD_HEADERS",
            json!({"X-Trace": "${TRACE}"}).to_string(),
        )
        .set("PLURNK_MCP_WRONG", guarded.url.clone())
        .set("PLURNK_MCP_WRONG_BEARER", "${WRONG_TOKEN}")
        .set("PLURNK_MCP_NONE", guarded.url.clone())
        .enable(&["good", "wrong", "none"])
        .config();
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("tok-123456789") && !debug.contains("trace-789"),
        "{debug}"
    );
    let host = Host::start(config).await.expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    assert_eq!(
        snapshot.server("good").map(|s| s.state),
        Some(ServerState::Ready)
    );
    for alias in ["wrong", "none"] {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        let detail = server
            .problem
            .as_ref()
            .map(|p| p.detail.clone())
            .unwrap_or_default();
        assert!(
            detail.contains(&format!("server \"{alias}\" (http)")),
            "{detail}"
        );
        assert!(
            !detail.contains("tok-wrong-987654") && !detail.contains("tok-123456789"),
            "{detail}"
        );
        assert!(
            !detail.contains(&guarded.url),
            "the URL stays out of Problems: {detail}"
        );
    }
    let headers = workspace
        .call_tool("good", "headers", json!({}), CallOptions::default())
        .await
        .expect("headers");
    let headers: serde_json::Value = serde_json::from_str(&headers.text()).expect("JSON");
    assert_eq!(headers["authorization"], "Bearer tok-123456789");
    assert_eq!(headers["x-trace"], "trace-789");
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    host.shutdown().await;
    guarded.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_drained_and_a_non_converging_server_is_refused() {
    let config = Env::new()
        .stdio("paged", &["--paging", "one-per-page"])
        .stdio("looping", &["--paging", "repeat-cursor"])
        .stdio("endless", &["--paging", "endless"])
        .enable(&["paged", "looping", "endless"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let paged = snapshot.server("paged").expect("paged");
    assert_eq!(paged.state, ServerState::Ready);
    assert_eq!(paged.tools.len(), 9, "every page was drained");
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
    host.shutdown().await;
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
        .enable(&["broken"])
        .config();
    let host = Host::start(config).await.expect("host starts");
    let snapshot = host.default_workspace().snapshot();
    let broken = snapshot.server("broken").expect("configured");
    assert_eq!(broken.state, ServerState::Unavailable);
    let detail = broken
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(detail.contains("boom-on-stderr"), "{detail}");
    assert!(detail.contains("status 4"), "{detail}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_http_peer_goes_unavailable_and_comes_back_when_it_returns() {
    let first = HttpFixture::start("remote", false).await;
    let address = first.url.clone();
    let config = Env::new()
        .set("PLURNK_MCP_REMOTE", address.clone())
        .enable(&["remote"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    assert_eq!(
        workspace.snapshot().server("remote").map(|s| s.state),
        Some(ServerState::Ready)
    );
    first.stop().await;
    let failed = workspace
        .call_tool(
            "remote",
            "echo",
            json!({"text": "anyone?"}),
            CallOptions::default(),
        )
        .await;
    assert!(
        matches!(failed, Err(CallError::ConnectionLost { .. })),
        "{failed:?}"
    );
    let down = workspace
        .wait_for(Duration::from_secs(5), |s| {
            s.server("remote")
                .is_some_and(|s| s.state == ServerState::Unavailable)
        })
        .await;
    assert_eq!(
        down.server("remote").map(|s| s.state),
        Some(ServerState::Unavailable)
    );
    // The same address serves again.
    let socket: std::net::SocketAddr = address
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("address");
    let listener = tokio::net::TcpListener::bind(socket).await.expect("rebind");
    let stop = CancellationToken::new();
    let task = tokio::spawn(plurnk_mcp_fixture::serve_http(
        listener,
        plurnk_mcp_fixture::FixtureOptions::default(),
        stop.clone(),
    ));
    let back = workspace
        .wait_for(Duration::from_secs(10), |s| {
            s.server("remote")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    assert_eq!(
        back.server("remote").map(|s| s.state),
        Some(ServerState::Ready)
    );
    let echo = workspace
        .call_tool(
            "remote",
            "echo",
            json!({"text": "back"}),
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert_eq!(echo.text(), "back");
    host.shutdown().await;
    stop.cancel();
    let _ = task.await;
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
    let options = HostOptions {
        in_process: in_process.clone(),
        ..HostOptions::default()
    };
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
    let report = host.shutdown().await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);

    // An alias the configuration also declares is refused at start.
    let clash = HostOptions {
        in_process: BTreeMap::from([("svc".to_owned(), connector)]),
        ..HostOptions::default()
    };
    let config = Env::new().stdio("svc", &[]).config();
    let refused = Host::start_with(config, clash).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("\"svc\"")),
        "{refused:?}"
    );
}
