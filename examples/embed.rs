//! Embedding plurnk-mcp in a daemon: start a host, read its snapshot, call a tool, watch
//! events, disable and re-enable a server, shut down.
//!
//! Run with `cargo run --example embed`. It serves the fixture MCP server over Streamable
//! HTTP on 127.0.0.1 inside this process, so it needs nothing else.

use std::collections::BTreeMap;

use plurnk_mcp::{CallOptions, Host, HostConfig, HostEvent};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(plurnk_mcp_fixture::serve_http(
        listener,
        plurnk_mcp_fixture::FixtureOptions::default(),
        stop.clone(),
    ));

    // A daemon would pass std::env::vars(); the example builds its own map.
    let env = BTreeMap::from([
        ("PLURNK_MCP_FIXTURE".to_owned(), url),
        (
            "PLURNK_MCP_FIXTURE_READ".to_owned(),
            r#"["echo"]"#.to_owned(),
        ),
        ("PLURNK_MCP_ENABLED".to_owned(), r#"["fixture"]"#.to_owned()),
    ]);
    let host = Host::start(HostConfig::from_env(env)?).await?;
    let mut events = host.events();
    let workspace = host.default_workspace();

    let snapshot = workspace.snapshot();
    for server in snapshot.servers.values() {
        println!(
            "{} is {} with {} tools",
            server.alias,
            server.state,
            server.tools.len()
        );
        for tool in server.tools.iter() {
            println!("  {} ({:?})", tool.name, tool.effect);
        }
    }

    let result = workspace
        .call_tool(
            "fixture",
            "echo",
            json!({"text": "hello"}),
            CallOptions::default(),
        )
        .await?;
    println!("echo -> {}", result.text());

    workspace.disable("fixture").await?;
    workspace.enable("fixture").await?;
    while let Ok(event) = events.try_recv() {
        if let HostEvent::StateChanged {
            alias, from, to, ..
        } = event
        {
            println!("event: {alias} {from:?} -> {to}");
        }
    }

    let report = host.shutdown().await;
    println!("shutdown: {} close failure(s)", report.failures.len());
    stop.cancel();
    server.await??;
    Ok(())
}
