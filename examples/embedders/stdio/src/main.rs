//! A daemon that embeds plurnk-mcp with only what stdio servers need: it starts the host on
//! the `PLURNK_MCP_*` environment, prints each server's state and tools, and shuts down.

use plurnk_mcp::{Host, HostConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = Host::start(HostConfig::from_env(std::env::vars())?).await?;
    for server in host.default_workspace().snapshot().servers.values() {
        let tools: Vec<&str> = server.tools.iter().map(|tool| tool.name.as_str()).collect();
        println!("{} {} {}", server.alias, server.state, tools.join(" "));
    }
    host.shutdown().await;
    Ok(())
}
