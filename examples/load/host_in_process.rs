//! The host with thousands of in-process attachments (`HostOptions::in_process`): each an
//! rmcp fixture server on a `tokio::io::duplex` pair inside this process, no child process.
//! Hydration (`run`), and one server toggled in a workspace of many (`toggle`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use plurnk_mcp::{Host, HostConfig, HostOptions, InProcessConnector, ServerState, Workspace};

use crate::spec::TrialResult;
use crate::stats::Latencies;

/// A host with `servers` in-process fixture servers, and its default workspace once every
/// one is ready (or ten minutes passed).
async fn start(servers: usize) -> anyhow::Result<(Host, Workspace)> {
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
    let host = Host::start_with(
        HostConfig::default(),
        HostOptions::default().with_in_process(in_process),
    )
    .await?;
    let workspace = host.default_workspace();
    // A count the snapshot keeps, not a walk over every server at every version.
    workspace
        .wait_for(Duration::from_secs(600), |snapshot| {
            snapshot.servers.len() == servers
                && snapshot.servers.count(ServerState::Ready) == servers
        })
        .await;
    Ok((host, workspace))
}

pub async fn run(servers: usize) -> anyhow::Result<TrialResult> {
    crate::stats::reset_peak();
    let before = crate::stats::memory();
    let usage = crate::stats::usage();
    let started = Instant::now();
    let (host, workspace) = start(servers).await?;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let cpu_us = crate::stats::usage().cpu_us.saturating_sub(usage.cpu_us);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = crate::stats::memory();
    let snapshot = workspace.snapshot();
    let ready = snapshot.servers.count(ServerState::Ready);
    let mut result = TrialResult::default();
    let mut revisions: Vec<String> = snapshot
        .servers
        .values()
        .filter_map(|server| server.negotiated.as_ref().map(|n| n.revision.clone()))
        .collect();
    revisions.sort();
    revisions.dedup();
    result.revisions = revisions;
    crate::trial::record_memory(&mut result, ready_ms, ready, servers, before, after);
    result.set("cpu_ms", cpu_us as f64 / 1e3);
    crate::trial::record_settled(&mut result, servers, before).await;
    // Every commit raises the version by one: how many hydration took.
    result.set("commits", snapshot.version as f64);
    let close_started = Instant::now();
    let report = host.shutdown().await;
    if !report.failures.is_empty() {
        bail!("closing failed: {:?}", report.failures);
    }
    result.set("close_ms", close_started.elapsed().as_secs_f64() * 1e3);
    Ok(result)
}

/// Disables and enables again one server of a workspace of `servers`, `toggles` times: each
/// action returns once its snapshot is committed, so its duration is the commit latency a
/// caller sees.
pub async fn toggle(servers: usize, toggles: usize) -> anyhow::Result<TrialResult> {
    let (host, workspace) = start(servers).await?;
    let ready = workspace.snapshot().servers.count(ServerState::Ready);
    if ready != servers {
        bail!("only {ready} of {servers} servers became ready");
    }
    let alias = crate::clients::alias(servers / 2);
    let version = workspace.snapshot().version;
    let mut disables = Latencies::with_capacity(toggles);
    let mut enables = Latencies::with_capacity(toggles);
    for _ in 0..toggles {
        let started = Instant::now();
        workspace
            .disable(&alias)
            .await
            .map_err(|problem| anyhow!("disable: {}", problem.detail))?;
        disables.push(started.elapsed());
        let started = Instant::now();
        let enabled = workspace
            .enable(&alias)
            .await
            .map_err(|problem| anyhow!("enable: {}", problem.detail))?;
        enables.push(started.elapsed());
        if enabled.state != ServerState::Ready {
            bail!("enable left {alias} {}", enabled.state);
        }
    }
    let commits = workspace.snapshot().version - version;
    let mut result = TrialResult::default();
    crate::trial::record_toggles(&mut result, disables, enables);
    result.set("commits", commits as f64);
    let report = host.shutdown().await;
    if !report.failures.is_empty() {
        bail!("closing failed: {:?}", report.failures);
    }
    Ok(result)
}
