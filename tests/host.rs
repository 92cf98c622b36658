//! The host against real fixture servers: child processes over stdio and Streamable HTTP
//! servers on 127.0.0.1:0. Every test bounds its waits and stops what it started.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plurnk_mcp::config::{
    DefinitionParts, McpServerOptions, ServerDefinition, StdioDefinition, Transport,
};
use plurnk_mcp::{
    CallError, CallOptions, CompletionRef, Customize, Effect, Host, HostConfig, HostEvent,
    HostOptions, RestartPolicy, ServerState, TransportKind, Workspace,
};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "support/scrape.rs"]
mod scrape;
use scrape::{http_get, sample};

#[path = "support/calls.rs"]
mod calls;
#[path = "support/processes.rs"]
mod processes;
use calls::{BOUND, call_then_cancel, gate_call, holds_for, shutdown_clean};

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

    /// A fixture server over stdio that reports to `probe` (and serves `gate`).
    fn probed(self, alias: &str, probe: &Probe, extra: &[&str]) -> Self {
        let mut flags = vec!["--probe", probe.address()];
        flags.extend_from_slice(extra);
        self.stdio(alias, &flags)
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

/// A gate call on `alias` that reached the server, or is still on its way.
type GateCall = tokio::task::JoinHandle<Result<plurnk_mcp::ToolResult, CallError>>;

/// Sends gate calls to `alias` until one does not reach the server within half a second:
/// it waits behind a pending change. Returns the calls that reached the server (held at
/// their gates), and the id and the call of the one that waits.
async fn queue_behind_a_change(
    workspace: &Workspace,
    probe: &Probe,
    alias: &str,
) -> (Vec<GateCall>, String, GateCall) {
    let mut beside = Vec::new();
    loop {
        let id = format!("next-{}", beside.len());
        let call = gate_call(workspace, alias, &id);
        let reached = probe
            .until(Duration::from_millis(500), |events| {
                events.iter().any(|e| e.id == id)
            })
            .await;
        if !reached {
            return (beside, id, call);
        }
        beside.push(call);
        assert!(beside.len() < 40, "no call ever waited behind the change");
    }
}

/// Whether the fixture `lists` publishes the tool its `announce` adds.
fn has_extra(snapshot: &plurnk_mcp::WorkspaceSnapshot) -> bool {
    snapshot
        .server("lists")
        .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
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
                "add", "announce", "count", "crash", "echo", "fail", "gate", "headers", "lists",
                "pid", "reveal", "sleep"
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
    shutdown_clean(host).await;
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
            let options = CallOptions {
                timeout: Some(Duration::from_secs(120)),
                ..CallOptions::default()
            };
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
        eventually(BOUND, || !group_alive(pid)).await,
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
    assert!(eventually(BOUND, || !group_alive(new_pid)).await);
}

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
    let options = HostOptions {
        drain_timeout: Some(Duration::from_secs(600)),
        ..HostOptions::default()
    };
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
        eventually(BOUND, || finished("picky")).await,
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
        eventually(BOUND, || !group_alive(family)).await,
        "the grandchild's group is gone"
    );
    assert!(eventually(BOUND, || !group_alive(plain)).await);
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
            CallOptions {
                timeout: Some(Duration::from_millis(300)),
                ..CallOptions::default()
            },
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
    let deadline = Instant::now() + BOUND;
    loop {
        let refused = workspace
            .call_tool("once", "echo", json!({"text": "x"}), CallOptions::default())
            .await;
        if matches!(refused, Err(CallError::Closing { .. })) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the disable never began: {refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let deadline = Instant::now() + BOUND;
    loop {
        let refused = workspace
            .call_tool(
                "fragile",
                "echo",
                json!({"text": "x"}),
                CallOptions::default(),
            )
            .await;
        if matches!(refused, Err(CallError::Closing { .. })) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the disable never began: {refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        eventually(BOUND, || !group_alive(pid)).await,
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
    assert!(eventually(BOUND, || !group_alive(again)).await);
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
        .enable(&["lingering"])
        .config();
    let grace = Duration::from_secs(2);
    let host = Host::start_with(
        config,
        HostOptions {
            close_grace: grace,
            ..fast_restarts()
        },
    )
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
        eventually(BOUND, || !group_alive(first[0])).await,
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
    assert!(eventually(BOUND, || !group_alive(second)).await);
    let _ = std::fs::remove_file(&pids);
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
    // The credentials arrived exactly (the reversed copies say so)...
    assert_eq!(headers["authorization~reversed"], "987654321-kot reraeB");
    assert_eq!(headers["x-trace~reversed"], "987-ecart");
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    // ...and reflected back by the server, they reach the caller scrubbed.
    assert_eq!(headers["authorization"], "Bearer <redacted>");
    assert_eq!(headers["x-trace"], "<redacted>");
    shutdown_clean(host).await;
    guarded.stop().await;
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
        .wait_for(BOUND, |s| {
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
        .wait_for(BOUND, |s| {
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
    shutdown_clean(host).await;
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
    shutdown_clean(host).await;

    // An alias the configuration also declares is refused at start.
    let clash = HostOptions {
        in_process: BTreeMap::from([("svc".to_owned(), connector)]),
        ..HostOptions::default()
    };
    let config = Env::new().stdio("svc", &[]).config();
    let refused = Host::start_with(config, clash).await;
    assert!(
        refused.as_ref().is_err_and(
            |e| matches!(e, plurnk_mcp::StartError::State(detail) if detail.contains("\"svc\""))
        ),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enable_during_backoff_leaves_no_stray_reconnect() {
    let config = Env::new().stdio("victim", &[]).enable(&["victim"]).config();
    // A slow backoff: the retry timer of the loss is still pending when enable reconnects.
    let options = HostOptions {
        restart: RestartPolicy {
            min_delay: Duration::from_millis(1500),
            max_delay: Duration::from_millis(1500),
            crash_limit: 10,
            window: Duration::from_secs(60),
        },
        ..HostOptions::default()
    };
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

/// One fixture server under `limits`: its state and Problem once hydrated, and its tools.
async fn listed_under(limits: plurnk_mcp::Limits) -> (ServerState, String, usize) {
    let config = Env::new().stdio("lister", &[]).enable(&["lister"]).config();
    let options = HostOptions {
        limits,
        ..HostOptions::default()
    };
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
    let (state, problem, listed) = listed_under(plurnk_mcp::Limits {
        max_items: tools,
        ..plurnk_mcp::Limits::default()
    })
    .await;
    assert_eq!((state, listed), (ServerState::Ready, tools), "{problem}");
    // One more than the bound: refused, and the Problem names the bound.
    let (state, problem, _) = listed_under(plurnk_mcp::Limits {
        max_items: tools - 1,
        ..plurnk_mcp::Limits::default()
    })
    .await;
    assert_eq!(state, ServerState::Unavailable);
    assert!(
        problem.contains(&format!("more than {} items", tools - 1)),
        "{problem}"
    );
    // Bytes too: the fixture's twelve tools with their schemas are well over a kilobyte.
    let (state, problem, _) = listed_under(plurnk_mcp::Limits {
        max_list_bytes: 1000,
        ..plurnk_mcp::Limits::default()
    })
    .await;
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
    // A change listed half a ttl after the first listing; the ttl timer of the first listing
    // is then stale and must do nothing, or every stale timer would list again, half a ttl
    // apart from the current one, and start one more.
    tokio::time::sleep(Duration::from_millis(500)).await;
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
    let options = HostOptions {
        drain_timeout: Some(Duration::from_secs(600)),
        ..HostOptions::default()
    };
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
async fn a_committed_change_takes_its_deadline_with_it() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("lists", &probe, &["--legacy"])
        .enable(&["lists"])
        .config();
    let bound = Duration::from_secs(3);
    let options = HostOptions {
        drain_timeout: Some(bound),
        ..HostOptions::default()
    };
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
    // A second change, well after the first, waits behind another call.
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
async fn a_pending_list_change_commits_at_its_deadline_beside_a_stuck_call() {
    let probe = Probe::start().await;
    let config = Env::new()
        .probed("stuck", &probe, &["--legacy"])
        .enable(&["stuck"])
        .config();
    let options = HostOptions {
        drain_timeout: Some(Duration::from_millis(500)),
        ..HostOptions::default()
    };
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
    // (where its gate holds it: keep letting gates go until it settles).
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
    let options = HostOptions {
        limits: plurnk_mcp::Limits {
            max_in_flight_per_server: 2,
            max_in_flight_per_workspace: 3,
            ..plurnk_mcp::Limits::default()
        },
        ..HostOptions::default()
    };
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
        .set("PLURNK_MCP_CONNECT_TIMEOUT", "3000")
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
        detail.contains("could not be listed again within 3000 ms"),
        "{detail}"
    );
    probe.release_all().await;
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
        eventually(BOUND, || processes::marked(&mark).len() == 1).await,
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

/// The fixture `alias` is, as a customized enable names it: its name and its probe.
fn renamed(name: &str, probe: &Probe) -> Customize {
    let options = json!({"args": ["fixture", "--name", name, "--probe", probe.address()]});
    Customize {
        options: Some(McpServerOptions::from_json(&options.to_string()).expect("parses")),
        ..Customize::default()
    }
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
        eventually(BOUND, || refused.load(Ordering::SeqCst) + probe.held()
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
        eventually(BOUND, || !group_alive(old)).await,
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
    let broken = Customize {
        overlay: None,
        options: Some(
            McpServerOptions::from_json(&json!({"args": ["no-such-subcommand"]}).to_string())
                .expect("parses"),
        ),
    };
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

// The one test of this binary that installs the process's recorder: the other tests run
// beside it and count into it too, so each value is asserted as a floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_endpoint_counts_calls_errors_commits_and_a_reconnect() {
    use plurnk_mcp::{PrometheusError, prometheus};
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let busy = taken.local_addr().expect("address");
    match prometheus::serve(busy) {
        Err(error @ PrometheusError::Bind { .. }) => {
            assert!(error.to_string().contains(&busy.to_string()), "{error}");
        }
        other => panic!("a taken address is refused: {other:?}"),
    }
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("an address");
    // Refused at the address, nothing was installed: this one succeeds.
    let address = prometheus::serve(any).expect("the endpoint starts");
    assert_ne!(address.port(), 0, "the bound port is given");
    assert!(
        matches!(
            prometheus::serve(any),
            Err(PrometheusError::AlreadyInstalled)
        ),
        "a second recorder is refused"
    );

    let probe = Probe::start().await;
    let config = Env::new()
        .probed("metered", &probe, &[])
        .enable(&["metered"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let first = workspace.snapshot().server("metered").map(|s| s.generation);
    let pid = pid_of(&workspace, "metered").await;
    let unknown = workspace
        .call_tool("metered", "no-such-tool", json!({}), CallOptions::default())
        .await;
    assert!(
        matches!(unknown, Err(CallError::UnknownTool { .. })),
        "{unknown:?}"
    );
    // SAFETY: a signal to the process we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("metered")
                .is_some_and(|s| s.state == ServerState::Ready && Some(s.generation) > first)
        })
        .await;
    assert!(
        back.server("metered")
            .is_some_and(|s| s.state == ServerState::Ready && Some(s.generation) > first),
        "the server came back: {:?}",
        back.server("metered")
    );

    let (status, scrape) =
        tokio::task::spawn_blocking(move || http_get(&address.to_string(), "/metrics"))
            .await
            .expect("the scrape did not panic");
    assert_eq!(status, "HTTP/1.1 200 OK", "{scrape}");
    for (series, floor) in [
        (r#"plurnk_mcp_calls_total{outcome="ok"}"#, 1.0),
        (r#"plurnk_mcp_calls_total{outcome="error"}"#, 1.0),
        (r#"plurnk_mcp_call_errors_total{kind="unknown-tool"}"#, 1.0),
        ("plurnk_mcp_call_seconds_count", 1.0),
        ("plurnk_mcp_commits_total", 3.0),
        (r#"plurnk_mcp_state_changes_total{to="ready"}"#, 2.0),
        (r#"plurnk_mcp_state_changes_total{to="unavailable"}"#, 1.0),
        ("plurnk_mcp_restarts_total", 1.0),
        ("plurnk_mcp_reconnects_total", 1.0),
    ] {
        let value = sample(&scrape, series);
        assert!(
            value.is_some_and(|value| value >= floor),
            "{series} is {value:?}, at least {floor} expected:\n{scrape}"
        );
    }
    assert!(
        scrape.contains("# TYPE plurnk_mcp_call_seconds histogram")
            && scrape.contains("# HELP plurnk_mcp_calls_total calls the host answered"),
        "{scrape}"
    );
    assert!(
        !scrape.contains("metered") && !scrape.contains("no-such-tool"),
        "no alias or tool is a label:\n{scrape}"
    );
    shutdown_clean(host).await;
}
