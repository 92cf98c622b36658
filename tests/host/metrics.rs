//! The Prometheus endpoint against the host's real work: calls, errors, commits, a reconnect.

use plurnk_mcp::{CallError, CallOptions, Host, ServerState};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

use crate::calls::{BOUND, pid_of, shutdown_clean};
use crate::env::Env;
use crate::fast_restarts;
use crate::scrape::{http_get, sample};

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
