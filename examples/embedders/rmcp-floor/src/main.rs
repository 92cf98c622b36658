//! The floor a stdio-only embedder is measured against: rmcp's own client, spawning the
//! command given as arguments, listing its tools and closing it.

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let program = args.next().ok_or("usage: embedder-rmcp-floor <command> [args…]")?;
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    let client = ().serve(TokioChildProcess::new(command)?).await?;
    let tools = client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    println!("server {}", names.join(" "));
    client.cancel().await?;
    Ok(())
}
