//! The zoo: ten servers people install from npm and PyPI (`support/zoo.rs`), in one workspace
//! with the default settings, on this machine while a burner keeps every core busy: every
//! one ready, each at the best revision it speaks, one real call each answered as the server
//! answers it, through the host and through the gateway at both revisions; and a one-shot
//! `plurnk-mcp call` that starts only the server it names, however broken another is.

#[path = "support/peers.rs"]
mod peers;
#[path = "support/zoo.rs"]
mod zoo;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
use plurnk_mcp::{CallOptions, Host, HostConfig, ServerState};
use serde_json::{Value, json};

use zoo::{ALIASES, Burner, MODERN, Zoo};

const EXE: &str = env!("CARGO_BIN_EXE_plurnk-mcp");

/// The repository, whose `.cache/` holds the peers.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A folder of this test's own under the target's temporary directory.
fn folder(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("zoo-{name}-{}", std::process::id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zoo_comes_up_under_load_at_its_best_revisions_and_answers_through_host_and_gateway() {
    peers::peers();
    let zoo = Zoo::start(&root(), folder("host"), false);
    let _burner = Burner::start();
    let config = HostConfig::from_env(zoo.env()).expect("the zoo's configuration");
    // The defaults, as a new user has them: Host::start returns once hydration is over.
    let host = Host::start(config).await.expect("the host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    for alias in ALIASES {
        let server = snapshot.server(alias).expect("configured");
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias} is not ready under the defaults: {:?}",
            server.problem
        );
        let revision = server.negotiated.as_ref().map(|n| n.revision.as_str());
        let best = if MODERN.contains(&alias) {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(revision, Some(best), "{alias} negotiated below its best");
        let phases = server.phases.expect("a ready server's phases");
        eprintln!(
            "zoo: {alias} ready at {best}: started {} ms, negotiated {} ms, listed {} ms",
            phases.starting_ms, phases.negotiating_ms, phases.listing_ms
        );
    }
    for call in zoo.calls("host") {
        let result = workspace
            .call_tool(
                call.alias,
                call.tool,
                call.arguments.clone(),
                CallOptions::default(),
            )
            .await
            .unwrap_or_else(|error| panic!("{}/{}: {error}", call.alias, call.tool));
        if let Err(wrong) = call.check(&result.result) {
            panic!("through the host: {wrong}");
        }
    }
    let tools: usize = ALIASES
        .iter()
        .filter_map(|alias| snapshot.server(alias))
        .map(|server| server.tools.len())
        .sum();

    // The same workspace served as one MCP server, and the official Python SDK's client at
    // both revisions: every tool, and each call again.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(plurnk_mcp::gateway::serve_http(
        Gateway::new(workspace.clone(), Naming::Prefixed),
        listener,
        HttpOptions::default(),
        shutdown.clone(),
    ));
    for revision in ["2026-07-28", "2025-11-25"] {
        let calls = zoo.calls(revision);
        let mut plan = vec![json!({"op": "list_tools"})];
        plan.extend(calls.iter().map(|call| {
            json!({"op": "call", "tool": format!("{}_{}", call.alias, call.tool),
                   "arguments": call.arguments})
        }));
        let lines = tokio::task::spawn_blocking({
            let (url, plan) = (url.clone(), json!(plan).to_string());
            move || python_client(revision, &plan, &url)
        })
        .await
        .expect("the client ran");
        assert_eq!(lines[0]["protocolVersion"], revision, "{}", lines[0]);
        let listed = lines[1]["result"]["tools"].as_array().map_or(0, Vec::len);
        assert_eq!(listed, tools, "the gateway serves every tool at {revision}");
        for (call, line) in calls.iter().zip(&lines[2..]) {
            assert_eq!(line["ok"], json!(true), "{revision}: {line}");
            if let Err(wrong) = call.check(&line["result"]) {
                panic!("through the gateway at {revision}: {wrong}");
            }
        }
    }
    shutdown.cancel();
    let report = host.shutdown().await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// The official Python SDK's client (`peers/gateway_client.py`) at `revision` against the
/// gateway at `url`, running `plan`: its lines, each a JSON object.
fn python_client(revision: &str, plan: &str, url: &str) -> Vec<Value> {
    let script = peers::peer_script("gateway_client.py");
    let output = Command::new(&peers::peers().python)
        .args([
            script.as_str(),
            "--revision",
            revision,
            "--timeout-ms",
            "120000",
        ])
        .args(["--plan", plan, "--http", url])
        .stdin(Stdio::null())
        .output()
        .expect("the Python client runs");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert!(
        output.status.success() && !lines.is_empty(),
        "the Python client at {revision}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    lines
}

#[test]
fn a_one_shot_call_starts_only_the_server_it_names_though_another_is_broken() {
    peers::peers();
    let zoo = Zoo::start(&root(), folder("call"), true);
    let mut env = zoo.env();
    // The other servers are enabled and one of them cannot start; the HTTP one is left out,
    // since whether a URL was dialled cannot be counted from here.
    env.remove("PLURNK_MCP_EXCEL");
    env.insert("PLURNK_MCP_BROKEN".into(), "/nonexistent/mcp-server".into());
    let enabled: Vec<&str> = ALIASES
        .iter()
        .copied()
        .filter(|alias| *alias != "excel")
        .chain(["broken"])
        .collect();
    env.insert("PLURNK_MCP_ENABLED".into(), json!(enabled).to_string());
    // The host's state folder is its own, which no sandboxed server may reach: beside the
    // zoo's folders, not above them.
    let state = zoo.dir.join("state").join("state.sqlite");
    let output = Command::new(EXE)
        .arg("--state")
        .arg(&state)
        .args([
            "call",
            "time",
            "get_current_time",
            r#"{"timezone":"Etc/UTC"}"#,
        ])
        .env_clear()
        .envs(&env)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .expect("plurnk-mcp runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(&stdout).expect("the result as JSON");
    assert_eq!(
        result["structuredContent"]["timezone"], "Etc/UTC",
        "{stdout}"
    );
    assert_eq!(zoo.starts("time"), 1, "the server named is started once");
    for alias in enabled.iter().filter(|alias| **alias != "time") {
        assert_eq!(
            zoo.starts(alias),
            0,
            "{alias} was started for a call to time"
        );
    }
    // And the call did not wait on any of them: nothing but one server's start is in it.
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("broken"),
        "the broken server was not even tried"
    );
}
