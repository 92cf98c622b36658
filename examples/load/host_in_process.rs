//! The host with thousands of in-process attachments (`HostOptions::in_process`): each an
//! rmcp fixture server on a `tokio::io::duplex` pair inside this process, no child process.

use crate::spec::TrialResult;

pub async fn run(servers: usize) -> anyhow::Result<TrialResult> {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use plurnk_mcp::{Host, HostConfig, HostOptions, InProcessConnector, ServerState};

    let connector: InProcessConnector = Arc::new(|| {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server);
        tokio::spawn(plurnk_mcp_fixture::serve_io(
            read,
            write,
            plurnk_mcp_fixture::FixtureOptions::default(),
        ));
        client
    });
    let in_process: BTreeMap<String, InProcessConnector> = (0..servers)
        .map(|i| (crate::clients::alias(i), connector.clone()))
        .collect();
    crate::stats::reset_peak();
    let before = crate::stats::memory();
    let started = Instant::now();
    let host = Host::start_with(
        HostConfig::default(),
        HostOptions::default().with_in_process(in_process),
    )
    .await?;
    let snapshot = host
        .default_workspace()
        .wait_for(Duration::from_secs(300), |snapshot| {
            snapshot.servers.len() == servers
                && snapshot
                    .servers
                    .values()
                    .all(|s| s.state == ServerState::Ready)
        })
        .await;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = crate::stats::memory();
    let ready = snapshot
        .servers
        .values()
        .filter(|s| s.state == ServerState::Ready)
        .count();
    let mut result = TrialResult::default();
    crate::trial::record_memory(&mut result, ready_ms, ready, servers, before, after);
    let close_started = Instant::now();
    let report = host.shutdown().await;
    if !report.failures.is_empty() {
        anyhow::bail!("closing failed: {:?}", report.failures);
    }
    result.set("close_ms", close_started.elapsed().as_secs_f64() * 1e3);
    Ok(result)
}
