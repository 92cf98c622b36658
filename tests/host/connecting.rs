//! A connection attempt as a user sees it: the phase a slow server is in while it connects,
//! the wording of an attempt out of time, what a server recovered from at start-up, a host
//! that connects only the servers it is asked for, one that declares no elicitation, and a
//! refresh that commits at quiescence saying nothing of calls that never were.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plurnk_mcp::{CallError, CallOptions, ConnectPhase, Host, HostOptions, ServerState, Workspace};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

use crate::calls::{BOUND, shutdown_clean};
use crate::env::{EXE, Env};
use crate::{fast_restarts, wait};

/// A fixture server started through a shell that waits `seconds` first: a server slow to
/// start, as a cold interpreter under load is.
fn slow_fixture(env: Env, alias: &str, seconds: u32) -> Env {
    let upper = alias.to_ascii_uppercase();
    env.set(&format!("PLURNK_MCP_{upper}"), "/bin/sh").set(
        &format!("PLURNK_MCP_{upper}_ARGS"),
        json!(["-c", format!("sleep {seconds}; exec \"$0\" fixture"), EXE]).to_string(),
    )
}

/// Starts a host on `config`, handing over the default workspace as soon as it opens (before
/// `Host::start` returns, which is once hydration is over).
async fn start_watched(
    config: plurnk_mcp::HostConfig,
    options: HostOptions,
) -> (tokio::task::JoinHandle<Host>, Workspace) {
    let opened: Arc<Mutex<Option<Workspace>>> = Arc::default();
    let hand = opened.clone();
    let options = options.with_on_open(Some(Arc::new(move |workspace: &Workspace| {
        if let Ok(mut opened) = hand.lock() {
            opened.get_or_insert_with(|| workspace.clone());
        }
    })));
    let starting =
        tokio::spawn(async move { Host::start_with(config, options).await.expect("host") });
    assert!(
        wait::until(BOUND, || opened.lock().is_ok_and(|o| o.is_some())).await,
        "the workspace opened"
    );
    let workspace = opened.lock().ok().and_then(|o| o.clone()).expect("opened");
    (starting, workspace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_is_connecting_in_its_phase_then_ready_with_what_each_phase_took() {
    let config = slow_fixture(Env::new(), "slow", 2)
        .enable(&["slow"])
        .config();
    let (starting, workspace) = start_watched(config, HostOptions::default()).await;
    let seen = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("slow")
                .and_then(|server| server.connecting)
                .is_some_and(|connecting| connecting.phase == ConnectPhase::Starting)
        })
        .await;
    let server = seen.server("slow").expect("configured");
    assert_eq!(
        server.state,
        ServerState::Connecting,
        "still starting, not unavailable"
    );
    let connecting = server.connecting.expect("its attempt");
    assert_eq!(connecting.bound_ms, 10_000, "the connect timeout bounds it");
    let said = connecting.describe(std::time::SystemTime::now());
    assert!(
        said.starts_with("starting (started, no answer to server/discover yet) after")
            && said.ends_with("PLURNK_MCP_CONNECT_TIMEOUT allows 10 s"),
        "{said}"
    );
    let host = starting.await.expect("the start task");
    let snapshot = workspace.snapshot();
    let server = snapshot.server("slow").expect("configured");
    assert_eq!(server.state, ServerState::Ready, "{:?}", server.problem);
    assert!(server.connecting.is_none());
    let phases = server.phases.expect("what each phase took");
    assert!(phases.starting_ms >= 2_000, "{phases:?}");
    assert_eq!(
        server.negotiated.as_ref().map(|n| n.revision.as_str()),
        Some("2026-07-28"),
        "a server slow to answer discover still negotiates its best revision"
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_out_of_time_names_its_phase_and_the_setting_that_bounds_it() {
    let probe = Probe::start().await;
    let config = Env::new()
        .set("PLURNK_MCP_SILENT", "/bin/sleep")
        .set("PLURNK_MCP_SILENT_ARGS", json!(["30"]).to_string())
        .probed("lists", &probe, &["--hold-lists"])
        .set("PLURNK_MCP_CONNECT_TIMEOUT", "1500")
        .set("PLURNK_MCP_REQUEST_TIMEOUT", "1500")
        .enable(&["silent", "lists"])
        .config();
    let host = Host::start_with(config, HostOptions::default())
        .await
        .expect("host starts");
    let snapshot = host
        .default_workspace()
        .wait_for(BOUND, |snapshot| {
            ["silent", "lists"].iter().all(|alias| {
                snapshot
                    .server(alias)
                    .is_some_and(|server| server.state == ServerState::Unavailable)
            })
        })
        .await;
    let detail = |alias: &str| {
        snapshot
            .server(alias)
            .and_then(|server| server.problem.as_ref())
            .map(|problem| problem.detail.clone())
            .unwrap_or_default()
    };
    let silent = detail("silent");
    assert!(
        silent.contains(
            "did not finish connecting: starting (started, no answer to server/discover yet) \
             after 1.5 s; PLURNK_MCP_CONNECT_TIMEOUT allows 1500 ms; raise it for a server this slow"
        ),
        "{silent}"
    );
    let lists = detail("lists");
    assert!(
        lists.contains("listing (negotiated, listing its tools, resources and prompts) after")
            && lists.contains("PLURNK_MCP_REQUEST_TIMEOUT allows 1500 ms"),
        "{lists}"
    );
    probe.release_all().await;
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_problem_recovered_from_at_start_up_is_kept_in_the_snapshot_and_on_the_status_page() {
    let mark = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("first-start-fails-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    // Fails its first start (saying why on stderr), then starts as the fixture.
    let script = "[ -e \"$1\" ] || { : > \"$1\"; echo 'first start: no config yet' >&2; exit 3; }; \
                  exec \"$0\" fixture";
    let config = Env::new()
        .set("PLURNK_MCP_FLAKY", "/bin/sh")
        .set(
            "PLURNK_MCP_FLAKY_ARGS",
            json!(["-c", script, EXE, mark.to_string_lossy()]).to_string(),
        )
        .enable(&["flaky"])
        .config();
    let host = Host::start_with(config, fast_restarts())
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("flaky")
                .is_some_and(|server| server.state == ServerState::Ready)
        })
        .await;
    let server = snapshot.server("flaky").expect("configured");
    assert_eq!(server.state, ServerState::Ready);
    let recovered = server.recovered.as_ref().expect("what it recovered from");
    assert!(
        recovered
            .problem
            .detail
            .contains("first start: no config yet"),
        "{}",
        recovered.problem.detail
    );
    // The gateway's status page began listening after hydration, and shows it all the same.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("address").to_string();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(plurnk_mcp::gateway::serve_http(
        plurnk_mcp::gateway::Gateway::new(workspace.clone(), plurnk_mcp::gateway::Naming::Prefixed),
        listener,
        plurnk_mcp::gateway::HttpOptions::default(),
        shutdown.clone(),
    ));
    let (head, body) =
        tokio::task::spawn_blocking(move || crate::scrape::http_get(&address, "/status.json"))
            .await
            .expect("the request ran");
    assert!(head.contains(" 200 "), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let flaky = status["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["alias"] == "flaky"))
        .expect("flaky on the page");
    assert_eq!(flaky["lastProblem"]["current"], json!(false), "{flaky}");
    assert!(
        flaky["lastProblem"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("first start: no config yet")),
        "{flaky}"
    );
    shutdown.cancel();
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_told_to_connect_some_servers_leaves_the_others_idle_until_enabled() {
    let config = Env::new()
        .stdio("wanted", &[])
        .stdio("other", &[])
        .enable(&["wanted", "other"])
        .config();
    let only: BTreeSet<String> = ["wanted".to_owned()].into();
    let host = Host::start_with(config, HostOptions::default().with_only(Some(only)))
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    assert_eq!(
        snapshot.server("wanted").map(|s| s.state),
        Some(ServerState::Ready)
    );
    assert_eq!(
        snapshot.server("other").map(|s| s.state),
        Some(ServerState::Idle)
    );
    let refused = workspace
        .call_tool(
            "other",
            "echo",
            json!({"text": "hi"}),
            CallOptions::default(),
        )
        .await;
    match refused {
        Err(CallError::NotReady { state, detail, .. }) => {
            assert_eq!(state, ServerState::Idle);
            assert!(detail.contains("enable it to connect it"), "{detail}");
        }
        other => panic!("an idle server took a call: {other:?}"),
    }
    let enabled = workspace
        .enable("other")
        .await
        .expect("enabling connects it");
    assert_eq!(enabled.state, ServerState::Ready);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_nobody_answers_for_declares_no_elicitation_and_is_offered_nothing_that_asks() {
    let peers = crate::peers::peers();
    let tools = |elicitation: bool| {
        let config = Env::new()
            .set("PLURNK_MCP_EVERYTHING", peers.node.clone())
            .set(
                "PLURNK_MCP_EVERYTHING_ARGS",
                json!([peers.everything, "stdio"]).to_string(),
            )
            .enable(&["everything"])
            .config();
        async move {
            let host =
                Host::start_with(config, HostOptions::default().with_elicitation(elicitation))
                    .await
                    .expect("host starts");
            let snapshot = host.default_workspace().snapshot();
            let names: Vec<String> = snapshot
                .server("everything")
                .map(|server| server.tools.iter().map(|tool| tool.name.clone()).collect())
                .unwrap_or_default();
            shutdown_clean(host).await;
            names
        }
    };
    let asking = |names: &[String]| names.iter().any(|name| name.contains("elicitation"));
    let declared = tools(true).await;
    assert!(
        asking(&declared),
        "a host that answers is offered it: {declared:?}"
    );
    let undeclared = tools(false).await;
    assert!(!undeclared.is_empty(), "the server is ready");
    assert!(!asking(&undeclared), "{undeclared:?}");
}

/// What a test's own subscriber was told, in memory.
#[derive(Clone, Default)]
struct Told(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Told {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut told) = self.0.lock() {
            told.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// One thread: the subscriber set for this test's thread sees every task the host runs.
#[tokio::test(flavor = "current_thread")]
async fn a_refresh_committed_at_quiescence_warns_of_no_calls_when_none_waited() {
    let told = Told::default();
    let writer = told.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _scope = tracing::subscriber::set_default(subscriber);
    let config = Env::new().stdio("quiet", &[]).enable(&["quiet"]).config();
    let options = HostOptions::default().with_drain_timeout(Some(Duration::from_millis(200)));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    workspace
        .call_tool("quiet", "announce", json!({}), CallOptions::default())
        .await
        .expect("a list change");
    workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("quiet")
                .is_some_and(|server| server.tool("extra").is_some())
        })
        .await;
    // The window in which the refresh's bound passes with nothing left to commit; it must
    // stay quiet (any warning then would be about calls that never waited).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let said =
        String::from_utf8_lossy(&told.0.lock().map(|t| t.clone()).unwrap_or_default()).into_owned();
    assert!(!said.contains("did not settle"), "{said}");
    shutdown_clean(host).await;
}
