//! Criterion micro-benchmarks of the host's hot paths that the load benchmark
//! (`examples/load`) points at: configuration parsing, snapshot reads, and the routing of a
//! call up to the point where it would reach the network.
//!
//! ```text
//! cargo bench --bench host               # full sizes
//! CI=1 cargo bench --bench host          # shrunk sizes (what CI and `cargo test` use)
//! ```
//!
//! The routing benchmarks run against a host whose servers are the fixture served over
//! Streamable HTTP inside this process, so they need no binary.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use plurnk_mcp::{CallError, CallOptions, Host, HostConfig, ServerState};
use serde_json::json;

/// (servers in the configuration benchmark, servers attached for the routing benchmarks)
fn sizes() -> (usize, usize) {
    if std::env::var_os("CI").is_some() {
        (100, 10)
    } else {
        (1_000, 100)
    }
}

/// A `PLURNK_MCP_*` environment of `n` stdio servers, each with arguments and a summary, all
/// enabled — what a daemon with many servers hands the host at start.
fn environment(n: usize) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut enabled = Vec::with_capacity(n);
    for i in 0..n {
        env.insert(
            format!("PLURNK_MCP_SERVER_{i}"),
            format!("/usr/local/bin/mcp-server-{i}"),
        );
        env.insert(
            format!("PLURNK_MCP_SERVER_{i}_ARGS"),
            format!(r#"["--root","/srv/{i}","--verbose"]"#),
        );
        env.insert(
            format!("PLURNK_MCP_SERVER_{i}_SUMMARY"),
            format!("Server number {i} of the benchmark"),
        );
        enabled.push(format!("server-{i}"));
    }
    env.insert(
        "PLURNK_MCP_ENABLED".to_owned(),
        serde_json::to_string(&enabled).expect("a JSON array"),
    );
    // Unrelated variables are part of every real environment.
    env.insert("HOME".to_owned(), "/root".to_owned());
    env.insert("PATH".to_owned(), "/usr/bin:/bin".to_owned());
    env
}

fn config(c: &mut Criterion) {
    let (servers, _) = sizes();
    let env = environment(servers);
    let mut group = c.benchmark_group("config");
    group.bench_with_input(BenchmarkId::new("from_env", servers), &env, |b, env| {
        b.iter(|| {
            let config = HostConfig::from_env(env.clone()).expect("a valid configuration");
            black_box(config)
        });
    });
    group.finish();
}

/// A host with `n` ready servers, all the fixture over HTTP inside this process.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    host: Host,
    stop: tokio_util::sync::CancellationToken,
}

fn start_host(n: usize) -> Fixture {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stop = tokio_util::sync::CancellationToken::new();
    let host = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
        tokio::spawn(plurnk_mcp_fixture::serve_http(
            listener,
            plurnk_mcp_fixture::FixtureOptions::default(),
            stop.clone(),
        ));
        let mut env = BTreeMap::new();
        let mut enabled = Vec::new();
        for i in 0..n {
            env.insert(format!("PLURNK_MCP_S{i}"), url.clone());
            enabled.push(format!("s{i}"));
        }
        env.insert(
            "PLURNK_MCP_ENABLED".to_owned(),
            serde_json::to_string(&enabled).expect("a JSON array"),
        );
        let host = Host::start(HostConfig::from_env(env).expect("a valid configuration"))
            .await
            .expect("the host starts");
        let snapshot = host
            .default_workspace()
            .wait_for(std::time::Duration::from_secs(60), |s| {
                s.servers.values().all(|s| s.state == ServerState::Ready)
            })
            .await;
        assert!(
            snapshot
                .servers
                .values()
                .all(|s| s.state == ServerState::Ready),
            "every fixture server is ready"
        );
        host
    });
    Fixture {
        runtime,
        host,
        stop,
    }
}

fn routing(c: &mut Criterion) {
    let (_, servers) = sizes();
    let fixture = start_host(servers);
    let workspace = fixture.host.default_workspace();
    let middle = format!("s{}", servers / 2);
    let mut group = c.benchmark_group(format!("route/{servers}-servers"));

    group.bench_function("snapshot", |b| {
        b.iter(|| black_box(workspace.snapshot()));
    });
    group.bench_function("snapshot+lookup", |b| {
        b.iter(|| {
            let snapshot = workspace.snapshot();
            let found = snapshot
                .server(black_box(&middle))
                .and_then(|server| server.tool(black_box("echo")))
                .is_some();
            black_box(found)
        });
    });
    // Everything a call does before it reaches the attachment: handle checks, argument
    // conversion, snapshot lookup, state and tool admission.
    group.bench_function("call_tool/unknown-tool", |b| {
        b.to_async(&fixture.runtime).iter(|| async {
            let result = workspace
                .call_tool(
                    &middle,
                    "no-such-tool",
                    json!({ "text": "hello" }),
                    CallOptions::default(),
                )
                .await;
            assert!(matches!(result, Err(CallError::UnknownTool { .. })));
            black_box(result)
        });
    });
    group.bench_function("call_tool/unknown-server", |b| {
        b.to_async(&fixture.runtime).iter(|| async {
            let result = workspace
                .call_tool(
                    "no-such-server",
                    "echo",
                    json!({ "text": "hello" }),
                    CallOptions::default(),
                )
                .await;
            assert!(matches!(result, Err(CallError::UnknownServer(_))));
            black_box(result)
        });
    });
    // One real call, for scale: through the actor tree and rmcp to the HTTP fixture.
    group.bench_function("call_tool/echo-over-http", |b| {
        b.to_async(&fixture.runtime).iter(|| async {
            let result = workspace
                .call_tool(
                    &middle,
                    "echo",
                    json!({ "text": "hello" }),
                    CallOptions::default(),
                )
                .await
                .expect("echo answers");
            black_box(result)
        });
    });
    group.finish();

    let report = fixture.runtime.block_on(fixture.host.shutdown());
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    fixture.stop.cancel();
}

criterion_group!(benches, config, routing);
criterion_main!(benches);
