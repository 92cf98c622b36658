//! `plurnk-mcp demo`: the host on three built-in fixture servers — modern stdio, legacy stdio
//! and Streamable HTTP — showing hydration, calls, a disable/enable under load, a killed
//! server coming back by itself, and a shutdown that leaves no process behind.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use plurnk_mcp::{
    CallError, CallOptions, Host, HostConfig, HostOptions, RestartPolicy, ServerState, Workspace,
    WorkspaceSnapshot,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use plurnk_mcp_fixture::probe::Probe;

use super::eventually;
use super::inspect::status_table;

/// A guard on waits that normally end in milliseconds.
const BOUND: Duration = Duration::from_secs(20);

/// Counts what went right and wrong, so the demo's exit code means something.
struct Demo {
    failures: Vec<String>,
}

impl Demo {
    fn check(&mut self, ok: bool, what: &str) {
        if ok {
            outln!("  ok    {what}");
        } else {
            outln!("  FAIL  {what}");
            self.failures.push(what.to_owned());
        }
    }
}

pub(crate) async fn run() -> ExitCode {
    match demo().await {
        Ok(demo) if demo.failures.is_empty() => {
            outln!("\ndemo finished: every step behaved as expected");
            ExitCode::SUCCESS
        }
        Ok(demo) => {
            outln!(
                "\ndemo finished with {} failed step(s):",
                demo.failures.len()
            );
            for failure in demo.failures {
                outln!("  - {failure}");
            }
            ExitCode::from(1)
        }
        Err(error) => {
            errln!("plurnk-mcp demo: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn demo() -> anyhow::Result<Demo> {
    let mut demo = Demo {
        failures: Vec::new(),
    };
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy().into_owned();

    // The HTTP server runs inside this process; the two stdio servers are child processes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let http_shutdown = CancellationToken::new();
    let http_task = tokio::spawn(plurnk_mcp_fixture::serve_http(
        listener,
        plurnk_mcp_fixture::FixtureOptions {
            name: "remote".into(),
            ..Default::default()
        },
        http_shutdown.clone(),
    ));

    // The fixture's instrument: the stdio servers report what they receive to this probe and
    // hold `gate` calls until it lets them go, so the demo knows a call is in flight.
    let probe = Probe::start().await;
    let env = fixture_environment(&exe, &probe, &url);

    outln!(
        "plurnk-mcp demo: three fixture servers (modern stdio, legacy stdio, Streamable HTTP)\n"
    );
    let config = HostConfig::from_env(env).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    let options = HostOptions::default().with_restart(
        RestartPolicy::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(2)),
    );
    let started = Instant::now();
    let host = Host::start_with(config, options).await?;
    super::running(&host);
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    outln!("hydrated in {} ms:\n", started.elapsed().as_millis());
    out!("{}", status_table(&snapshot));
    outln!();
    check_negotiation(&mut demo, &snapshot);

    first_calls(&mut demo, &workspace).await;

    disable_under_load(&mut demo, &workspace, &probe).await;
    kill_and_recover(&mut demo, &workspace, &probe).await;

    shut_down(&mut demo, host, &workspace).await;
    http_shutdown.cancel();
    let _ = http_task.await;
    Ok(demo)
}

/// The configuration the three fixture servers are declared with, as a daemon's environment
/// would carry it: the two stdio servers are this executable's hidden `fixture` command
/// reporting to `probe`, the HTTP one is at `url` behind a bearer read from `DEMO_TOKEN`.
fn fixture_environment(exe: &str, probe: &Probe, url: &str) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("DEMO_TOKEN".into(), "demo-secret-token".into());
    env.insert("PLURNK_MCP_MODERN".into(), exe.to_owned());
    env.insert(
        "PLURNK_MCP_MODERN_ARGS".into(),
        json!(["fixture", "--name", "modern", "--probe", probe.address()]).to_string(),
    );
    env.insert("PLURNK_MCP_LEGACY".into(), exe.to_owned());
    env.insert(
        "PLURNK_MCP_LEGACY_ARGS".into(),
        json!([
            "fixture",
            "--legacy",
            "--name",
            "legacy",
            "--probe",
            probe.address()
        ])
        .to_string(),
    );
    env.insert("PLURNK_MCP_REMOTE".into(), url.to_owned());
    env.insert("PLURNK_MCP_REMOTE_BEARER".into(), "${DEMO_TOKEN}".into());
    env.insert(
        "PLURNK_MCP_REMOTE_TOOLS".into(),
        json!(["echo", "add", "sleep"]).to_string(),
    );
    env.insert("PLURNK_MCP_REMOTE_READ".into(), json!(["echo"]).to_string());
    env.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["modern", "legacy", "remote"]).to_string(),
    );
    env.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "10000".into());
    env.insert("PLURNK_MCP_REQUEST_TIMEOUT".into(), "10000".into());
    env
}

/// Each server negotiated the revision it speaks, and `_TOOLS` published what it names.
fn check_negotiation(demo: &mut Demo, snapshot: &WorkspaceSnapshot) {
    let revision = |alias: &str| {
        snapshot
            .server(alias)
            .and_then(|s| s.negotiated.as_ref())
            .map(|n| n.revision.clone())
    };
    demo.check(
        revision("modern").as_deref() == Some("2026-07-28"),
        "modern stdio server negotiated 2026-07-28 through server/discover",
    );
    demo.check(
        revision("legacy").as_deref() == Some("2025-11-25"),
        "legacy stdio server degraded to initialize at 2025-11-25",
    );
    demo.check(
        revision("remote").as_deref() == Some("2026-07-28"),
        "Streamable HTTP server negotiated 2026-07-28",
    );
    demo.check(
        snapshot.server("remote").map(|s| s.tools.len()) == Some(3),
        "_TOOLS published exactly the three configured tools of \"remote\"",
    );
}

/// echo and add on each server, a tool-level error, and a tool outside `_TOOLS` refused.
async fn first_calls(demo: &mut Demo, workspace: &Workspace) {
    outln!("\ncalls:");
    for alias in ["modern", "legacy", "remote"] {
        let echo = workspace
            .call_tool(
                alias,
                "echo",
                json!({"text": format!("hello {alias}")}),
                CallOptions::default(),
            )
            .await;
        let text = echo.as_ref().map(|r| r.text()).unwrap_or_default();
        outln!("  {alias}/echo -> {text:?}");
        demo.check(
            text == format!("hello {alias}"),
            &format!("{alias}/echo answered"),
        );
        let sum = workspace
            .call_tool(
                alias,
                "add",
                json!({"a": 2, "b": 3}),
                CallOptions::default(),
            )
            .await;
        let text = sum.as_ref().map(|r| r.text()).unwrap_or_default();
        outln!("  {alias}/add 2+3 -> {text:?}");
        demo.check(text == "5", &format!("{alias}/add answered"));
    }
    let failed = workspace
        .call_tool(
            "modern",
            "fail",
            json!({"message": "as asked"}),
            CallOptions::default(),
        )
        .await;
    demo.check(
        failed.as_ref().is_ok_and(|r| r.is_error),
        "a tool-level isError comes back as a completed result",
    );
    let unknown = workspace
        .call_tool("remote", "fail", json!({}), CallOptions::default())
        .await;
    demo.check(
        matches!(unknown, Err(CallError::UnknownTool { .. })),
        "a tool outside _TOOLS is refused before it reaches the server",
    );
}

/// The host shut down: every connection closed, and no process of a stdio server's group
/// outlives it.
async fn shut_down(demo: &mut Demo, host: Host, workspace: &Workspace) {
    // Note every stdio server's process group before shutting down.
    let mut groups = Vec::new();
    for alias in ["modern", "legacy"] {
        if let Ok(result) = workspace
            .call_tool(alias, "pid", json!({}), CallOptions::default())
            .await
            && let Ok(pid) = result.text().trim().parse::<i32>()
        {
            groups.push((alias, pid));
        }
    }
    outln!("\nshutdown:");
    let report = host.shutdown().await;
    demo.check(
        report.failures.is_empty(),
        "every connection closed cleanly",
    );
    for failure in &report.failures {
        outln!(
            "        {}: {}",
            failure.alias,
            super::printable(&failure.detail)
        );
    }
    for (alias, pgid) in groups {
        let gone = eventually(Duration::from_secs(5), || !group_alive(pgid)).await;
        demo.check(
            gone,
            &format!("no process of {alias}'s process group {pgid} is alive"),
        );
    }
}

async fn disable_under_load(demo: &mut Demo, workspace: &Workspace, probe: &Probe) {
    outln!("\ndisable and re-enable \"modern\" while 40 calls are in flight:");
    let calls: Vec<_> = (0..40)
        .map(|i| {
            let workspace = workspace.clone();
            tokio::spawn(async move {
                workspace
                    .call_tool(
                        "modern",
                        "gate",
                        json!({"id": format!("call-{i}")}),
                        CallOptions::default(),
                    )
                    .await
            })
        })
        .collect();
    let arrived = probe
        .until(BOUND, |events| {
            events
                .iter()
                .filter(|e| e.server == "modern" && e.event == "gate")
                .count()
                >= 40
        })
        .await;
    demo.check(arrived, "the server received all 40 calls and holds them");
    let disable = {
        let workspace = workspace.clone();
        tokio::spawn(async move { workspace.disable("modern").await })
    };
    // Once the disable has begun, new calls are refused as closing.
    let refused = tokio::time::timeout(BOUND, async {
        loop {
            let late = workspace
                .call_tool(
                    "modern",
                    "echo",
                    json!({"text": "late"}),
                    CallOptions::default(),
                )
                .await;
            if matches!(late, Err(CallError::Closing { .. })) {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .is_ok();
    demo.check(refused, "a new call is refused while \"modern\" drains");
    demo.check(
        !disable.is_finished()
            && workspace.snapshot().server("modern").map(|s| s.state) == Some(ServerState::Ready),
        "while the 40 are held, nothing is committed yet",
    );
    let released = probe.release_all().await;
    outln!("  released the {released} held calls");
    demo.check(released == 40, "exactly the 40 calls were held");
    let mut results = 0;
    let mut failures = Vec::new();
    for call in calls {
        match call.await {
            Ok(Ok(result)) if result.text().starts_with("released ") => results += 1,
            Ok(Ok(result)) => failures.push(format!("an unexpected result: {}", result.text())),
            Ok(Err(error)) => failures.push(error.to_string()),
            Err(error) => failures.push(format!("a call task failed: {error}")),
        }
    }
    let disabled = match disable.await {
        Ok(disabled) => disabled,
        Err(error) => Err(plurnk_mcp::Problem::server_unavailable(error.to_string())),
    };
    outln!(
        "  disable -> {}",
        disabled
            .as_ref()
            .map(|s| s.state.to_string())
            .unwrap_or_else(|p| p.to_string())
    );
    let enabled = workspace.enable("modern").await;
    outln!(
        "  enable  -> {}",
        enabled
            .as_ref()
            .map(|s| s.state.to_string())
            .unwrap_or_else(|p| p.to_string())
    );
    outln!(
        "  40 calls: {results} completed with their result, {} failed",
        failures.len()
    );
    for failure in &failures {
        outln!("        {failure}");
    }
    demo.check(
        results == 40,
        "every call in flight completed with its result: none was lost",
    );
    demo.check(
        disabled.is_ok_and(|s| s.state == ServerState::Disabled),
        "disable committed only after the in-flight calls settled",
    );
    demo.check(
        enabled.is_ok_and(|s| s.state == ServerState::Ready),
        "enable brought \"modern\" back to ready",
    );
}

async fn kill_and_recover(demo: &mut Demo, workspace: &Workspace, probe: &Probe) {
    outln!("\nkill -9 the \"legacy\" server process:");
    let pid = workspace
        .call_tool("legacy", "pid", json!({}), CallOptions::default())
        .await
        .ok()
        .and_then(|r| r.text().trim().parse::<i32>().ok());
    let Some(pid) = pid else {
        demo.check(false, "the legacy server told its pid");
        return;
    };
    // A call the server holds, with a deadline far beyond what "at once" means.
    let held = {
        let workspace = workspace.clone();
        tokio::spawn(async move {
            let options = CallOptions::default().with_timeout(Some(Duration::from_secs(120)));
            workspace
                .call_tool("legacy", "gate", json!({"id": "held"}), options)
                .await
        })
    };
    let arrived = probe
        .until(BOUND, |events| events.iter().any(|e| e.id == "held"))
        .await;
    demo.check(arrived, "a call is in flight on the legacy server");
    let killed_at = Instant::now();
    // SAFETY: plain syscall on a pid we were told by the server we spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let in_flight = tokio::time::timeout(BOUND, held).await;
    let failed_fast = matches!(in_flight, Ok(Ok(Err(CallError::ConnectionLost { .. }))));
    outln!(
        "  the in-flight call settled after {} ms: {}",
        killed_at.elapsed().as_millis(),
        match &in_flight {
            Ok(Ok(Err(error))) => error.to_string(),
            Ok(Ok(Ok(_))) => "a result".into(),
            Ok(Err(_)) => "lost".into(),
            Err(_) => "still waiting".into(),
        }
    );
    demo.check(
        failed_fast,
        "the call in flight on the dead server failed at once, not at its 120 s deadline",
    );
    let down = workspace
        .wait_for(Duration::from_secs(5), |s| {
            s.server("legacy")
                .is_some_and(|s| s.state != ServerState::Ready)
        })
        .await;
    let state = down.server("legacy").map(|s| s.state);
    outln!(
        "  legacy is now {}",
        state.map(|s| s.to_string()).unwrap_or_default()
    );
    demo.check(
        state == Some(ServerState::Unavailable),
        "the killed server went unavailable",
    );
    let back = workspace
        .wait_for(Duration::from_secs(15), |s| {
            s.server("legacy")
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .await;
    let ready = back
        .server("legacy")
        .is_some_and(|s| s.state == ServerState::Ready);
    outln!(
        "  legacy is {} again after {} ms, generation {}",
        back.server("legacy")
            .map(|s| s.state.to_string())
            .unwrap_or_default(),
        killed_at.elapsed().as_millis(),
        back.server("legacy")
            .map(|s| s.generation)
            .unwrap_or_default()
    );
    demo.check(
        ready,
        "it came back by itself, without any message from the caller",
    );
    let echo = workspace
        .call_tool(
            "legacy",
            "echo",
            json!({"text": "back"}),
            CallOptions::default(),
        )
        .await;
    demo.check(
        echo.is_ok_and(|r| r.text() == "back"),
        "calls work on the new connection",
    );
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence; no memory is involved.
    unsafe { libc::killpg(pgid, 0) == 0 }
}
