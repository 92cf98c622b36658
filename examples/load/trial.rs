//! One trial: one client, one workload, one size, in this (fresh) process.
//!
//! Metric names and units:
//! - calls, churn: `p50_us`, `p99_us` (per-call latency), `calls_per_s`, `ok`, `failed`,
//!   `cpu_us_per_call` (this client process's user+system CPU over the measured calls)
//! - hydrate, in-process: `ready_ms` (all connected and listed), `ready`, `rss_before_kib`,
//!   `rss_after_kib`, `peak_kib` (VmHWM), `per_attachment_kib`, `close_ms`; in-process also
//!   `cpu_ms` (this process's CPU until all ready) and, for the host, `commits`; hydrate and
//!   in-process (not the TypeScript client) also `per_attachment_settled_kib`, the RSS per
//!   attachment `SETTLED_AFTER` later, and `anon_per_attachment_settled_kib`, the same without
//!   file pages (the program's code)
//! - churn: `lost`, `cycles`, `commit_p50_ms`, `commit_p99_ms`, `disable_p50_ms`,
//!   `enable_p50_ms`, `commits` (SnapshotCommitted events seen, host only)
//! - toggle: `commit_p50_ms`, `commit_p99_ms`, `disable_p50_ms`, `enable_p50_ms`, and for the
//!   host `commits` (snapshot versions the toggles took)

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::clients::{self, BareConn, Session};
use crate::spec::{Client, TrialResult, TrialSpec, Workload};
use crate::stats::{self, Latencies};
use crate::ts::TsDriver;

/// A call that has not settled after this long counts as lost.
const LOST_AFTER: Duration = Duration::from_secs(30);

pub async fn run(spec: TrialSpec) -> TrialResult {
    let result = match (&spec.workload, spec.client) {
        (Workload::Calls { .. } | Workload::Hydrate { .. }, Client::Ts) => ts(&spec).await,
        (
            Workload::Calls {
                n,
                c,
                servers,
                warmup,
                ..
            },
            client @ (Client::HostOtel | Client::HostOtelDown),
        ) => {
            let work = calls(&spec, "host", *n, *c, *servers, *warmup);
            crate::otel::calls(&spec, client, work).await
        }
        (
            Workload::Calls {
                n,
                c,
                servers,
                warmup,
                host_identity,
            },
            client,
        ) => {
            let client = match (client, host_identity) {
                (Client::Rmcp, true) => "rmcp-identity",
                (client, _) => client.name(),
            };
            calls(&spec, client, *n, *c, *servers, *warmup).await
        }
        (Workload::Hydrate { servers, .. }, client) => {
            hydrate(&spec, client.name(), *servers).await
        }
        (Workload::InProcess { servers }, client) => in_process(client, *servers).await,
        (Workload::Churn { n, c, servers }, Client::Host) => {
            churn(&spec, "host", *n, *c, *servers).await
        }
        (Workload::Churn { n, c, servers }, Client::Rmcp) => {
            churn(&spec, "rmcp-slots", *n, *c, *servers).await
        }
        (Workload::Churn { .. }, client) => Err(anyhow::anyhow!(
            "churn is not implemented for the {} client",
            client.name()
        )),
        (Workload::Toggle { servers, toggles }, Client::Host) => {
            crate::host_in_process::toggle(*servers, *toggles).await
        }
        (Workload::Toggle { servers, toggles }, Client::Rmcp) => {
            rmcp_toggle(*servers, *toggles).await
        }
        (Workload::Toggle { .. }, client) => Err(anyhow::anyhow!(
            "toggle is not implemented for the {} client",
            client.name()
        )),
    };
    result.unwrap_or_else(|error| TrialResult::failed(format!("{error:#}")))
}

/// What a calls loop saw.
struct Outcome {
    latencies: Latencies,
    ok: usize,
    failures: BTreeMap<String, usize>,
    lost: usize,
    wall: Duration,
    cpu_us: u64,
    switches: u64,
}

/// `n` echo calls with `c` in flight, call i to server i % len, each on its own task's loop.
async fn run_calls(session: Arc<Session>, n: usize, c: usize, guard: Option<Duration>) -> Outcome {
    let next = Arc::new(AtomicUsize::new(0));
    let servers = session.len();
    let usage0 = stats::usage();
    let started = Instant::now();
    let workers: Vec<_> = (0..c.max(1))
        .map(|_| {
            let session = session.clone();
            let next = next.clone();
            tokio::spawn(async move {
                let mut latencies = Latencies::with_capacity(n / c.max(1) + 1);
                let mut ok = 0;
                let mut lost = 0;
                let mut failures: BTreeMap<String, usize> = BTreeMap::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let t = Instant::now();
                    let result = match guard {
                        None => session.call(i % servers).await,
                        Some(bound) => {
                            match tokio::time::timeout(bound, session.call(i % servers)).await {
                                Ok(result) => result,
                                Err(_) => {
                                    lost += 1;
                                    continue;
                                }
                            }
                        }
                    };
                    latencies.push(t.elapsed());
                    match result {
                        Ok(()) => ok += 1,
                        Err(kind) => *failures.entry(kind).or_default() += 1,
                    }
                }
                (latencies, ok, failures, lost)
            })
        })
        .collect();
    let mut outcome = Outcome {
        latencies: Latencies::with_capacity(n),
        ok: 0,
        failures: BTreeMap::new(),
        lost: 0,
        wall: Duration::ZERO,
        cpu_us: 0,
        switches: 0,
    };
    for worker in workers {
        match worker.await {
            Ok((latencies, ok, failures, lost)) => {
                outcome.latencies.extend(latencies);
                outcome.ok += ok;
                outcome.lost += lost;
                for (kind, count) in failures {
                    *outcome.failures.entry(kind).or_default() += count;
                }
            }
            Err(error) => {
                *outcome
                    .failures
                    .entry(format!("panic: {error}"))
                    .or_default() += 1;
            }
        }
    }
    outcome.wall = started.elapsed();
    let usage1 = stats::usage();
    outcome.cpu_us = usage1.cpu_us.saturating_sub(usage0.cpu_us);
    outcome.switches = usage1.switches.saturating_sub(usage0.switches);
    outcome
}

fn record_calls(result: &mut TrialResult, outcome: &mut Outcome, n: usize) {
    result.set("p50_us", outcome.latencies.quantile(0.50));
    result.set("p99_us", outcome.latencies.quantile(0.99));
    result.set("calls_per_s", n as f64 / outcome.wall.as_secs_f64());
    result.set("ok", outcome.ok as f64);
    result.set("failed", outcome.failures.values().sum::<usize>() as f64);
    result.set("cpu_us_per_call", outcome.cpu_us as f64 / n.max(1) as f64);
    if outcome.switches > 0 {
        result.set(
            "switches_per_call",
            outcome.switches as f64 / n.max(1) as f64,
        );
    }
    for (kind, count) in &outcome.failures {
        result.notes.push(format!("{count} call(s) failed: {kind}"));
    }
}

pub(crate) async fn calls(
    spec: &TrialSpec,
    client: &str,
    n: usize,
    c: usize,
    servers: usize,
    warmup: usize,
) -> anyhow::Result<TrialResult> {
    let connected = Session::connect(client, &spec.fixture, servers).await?;
    let session = Arc::new(connected.session);
    for _ in 0..warmup {
        session
            .call(0)
            .await
            .map_err(|kind| anyhow::anyhow!("warm-up call failed: {kind}"))?;
    }
    let mut outcome = run_calls(session.clone(), n, c, None).await;
    let mut result = TrialResult {
        revisions: connected.revisions,
        ..TrialResult::default()
    };
    record_calls(&mut result, &mut outcome, n);
    close(session).await;
    Ok(result)
}

async fn close(session: Arc<Session>) -> Duration {
    match Arc::try_unwrap(session) {
        Ok(session) => session.close().await,
        Err(_) => Duration::ZERO,
    }
}

async fn hydrate(spec: &TrialSpec, client: &str, servers: usize) -> anyhow::Result<TrialResult> {
    stats::reset_peak();
    let before = stats::memory();
    let started = Instant::now();
    let connected = Session::connect(client, &spec.fixture, servers).await?;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    // Let the connections go idle (listen streams opened, buffers settled) before measuring.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = stats::memory();
    if std::env::var_os("PLURNK_BENCH_EXIT_AT_IDLE").is_some() {
        // For a heap profiler: what is still allocated at exit is what the idle
        // attachments hold (see BENCHMARKS.md, "What the profile says").
        std::process::exit(0);
    }
    let mut result = TrialResult {
        revisions: connected.revisions,
        ..TrialResult::default()
    };
    record_memory(
        &mut result,
        ready_ms,
        connected.ready,
        servers,
        before,
        after,
    );
    record_settled(&mut result, servers, before).await;
    let close_ms = connected.session.close().await.as_secs_f64() * 1e3;
    result.set("close_ms", close_ms);
    Ok(result)
}

/// How long after all ready memory is measured again: what a process gives back once a burst
/// is over (the host's allocator trim follows its last connection attempt by a second) is
/// what `top` shows from then on.
pub(crate) const SETTLED_AFTER: Duration = Duration::from_secs(2);

/// Records the memory per attachment once `SETTLED_AFTER` more has passed.
pub(crate) async fn record_settled(
    result: &mut TrialResult,
    servers: usize,
    before: stats::Memory,
) {
    tokio::time::sleep(SETTLED_AFTER).await;
    let settled = stats::memory();
    result.set("rss_settled_kib", settled.rss_kib as f64);
    result.set(
        "per_attachment_settled_kib",
        settled.rss_kib.saturating_sub(before.rss_kib) as f64 / servers.max(1) as f64,
    );
    result.set(
        "anon_per_attachment_settled_kib",
        settled.anon_kib.saturating_sub(before.anon_kib) as f64 / servers.max(1) as f64,
    );
}

/// Records a hydration's readiness and memory figures (shared with the in-process trial).
pub(crate) fn record_memory(
    result: &mut TrialResult,
    ready_ms: f64,
    ready: usize,
    servers: usize,
    before: stats::Memory,
    after: stats::Memory,
) {
    result.set("ready_ms", ready_ms);
    result.set("ready", ready as f64);
    result.set("rss_before_kib", before.rss_kib as f64);
    result.set("rss_after_kib", after.rss_kib as f64);
    result.set("peak_kib", after.hwm_kib as f64);
    result.set(
        "per_attachment_kib",
        after.rss_kib.saturating_sub(before.rss_kib) as f64 / servers.max(1) as f64,
    );
    if after.heap > 0 {
        result.set(
            "heap_per_attachment_kib",
            after.heap.saturating_sub(before.heap) as f64 / 1024.0 / servers.max(1) as f64,
        );
    }
    if ready < servers {
        result
            .notes
            .push(format!("only {ready} of {servers} servers became ready"));
    }
}

async fn ts(spec: &TrialSpec) -> anyhow::Result<TrialResult> {
    let mut driver = TsDriver::start(spec).await?;
    let (servers, mode) = match &spec.workload {
        Workload::Calls { servers, .. } => (*servers, "auto".to_owned()),
        Workload::Hydrate { servers, ts_mode } => (
            *servers,
            ts_mode.clone().unwrap_or_else(|| "auto".to_owned()),
        ),
        _ => anyhow::bail!("no TypeScript trial for {:?}", spec.workload),
    };
    let connected = driver
        .command(json!({
            "op": "connect",
            "command": spec.fixture,
            "args": [],
            "servers": servers,
            "mode": mode,
        }))
        .await?;
    let mut result = TrialResult::default();
    result.notes.push(driver.versions.clone());
    result.revisions = connected["revisions"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    match &spec.workload {
        Workload::Calls { n, c, warmup, .. } => {
            let answer = driver
                .command(json!({ "op": "calls", "n": n, "c": c, "warmup": warmup }))
                .await?;
            let latencies: Vec<u64> = answer["lat_us"]
                .as_array()
                .map(|l| l.iter().filter_map(serde_json::Value::as_u64).collect())
                .unwrap_or_default();
            let failed = answer["failed"].as_u64().unwrap_or(0) as usize;
            let mut outcome = Outcome {
                latencies: Latencies::from_micros(latencies),
                ok: n - failed.min(*n),
                failures: if failed > 0 {
                    BTreeMap::from([("ts-error".to_owned(), failed)])
                } else {
                    BTreeMap::new()
                },
                lost: 0,
                wall: Duration::from_secs_f64(answer["wall_ms"].as_f64().unwrap_or(0.0) / 1e3),
                cpu_us: answer["cpu_us"].as_u64().unwrap_or(0),
                switches: 0,
            };
            record_calls(&mut result, &mut outcome, *n);
        }
        Workload::Hydrate { servers, .. } => {
            let kib = |name: &str| connected[name].as_u64().unwrap_or(0);
            record_memory(
                &mut result,
                connected["ms"].as_f64().unwrap_or(0.0),
                *servers,
                *servers,
                stats::Memory {
                    rss_kib: kib("rss_before_kib"),
                    ..stats::Memory::default()
                },
                stats::Memory {
                    rss_kib: kib("rss_after_kib"),
                    hwm_kib: kib("hwm_kib"),
                    ..stats::Memory::default()
                },
            );
        }
        _ => {}
    }
    let close_ms = driver.close().await?;
    if matches!(spec.workload, Workload::Hydrate { .. }) {
        result.set("close_ms", close_ms);
    }
    Ok(result)
}

/// A fixture server inside this process: the client's end of its duplex stream, and its task.
fn serve() -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server);
    let task = tokio::spawn(async move {
        let _ = plurnk_mcp_fixture::serve_io(
            read,
            write,
            plurnk_mcp_fixture::FixtureOptions::default(),
        )
        .await;
    });
    (client, task)
}

/// Raw rmcp connected to an in-process fixture server, and that server's task.
async fn rmcp_in_process() -> anyhow::Result<(clients::RmcpService, tokio::task::JoinHandle<()>)> {
    let (stream, server) = serve();
    let (read, write) = tokio::io::split(stream);
    Ok((clients::rmcp_connect_io(read, write).await?, server))
}

/// `servers` fixture servers inside this process over `tokio::io::duplex`, no processes.
async fn in_process(client: Client, servers: usize) -> anyhow::Result<TrialResult> {
    stats::reset_peak();
    let before = stats::memory();
    let usage = stats::usage();
    let started = Instant::now();
    let mut result = TrialResult::default();
    let ready;
    let closing: Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()>>;
    match client {
        Client::Rmcp => {
            let connected = clients::connect_all(servers, |_| rmcp_in_process()).await?;
            ready = connected.len();
            result.revisions = clients::rmcp_revisions(connected.iter().map(|(s, _)| s));
            closing = Box::new(move || {
                Box::pin(async move {
                    futures::future::join_all(connected.into_iter().map(|(rmcp, server)| async {
                        let _ = rmcp.service.cancel().await;
                        let _ = server.await;
                    }))
                    .await;
                })
            });
        }
        Client::Bare => {
            let connected = clients::connect_all(servers, |_| async {
                let (stream, server) = serve();
                let (read, write) = tokio::io::split(stream);
                Ok((BareConn::over(read, write).await?, server))
            })
            .await?;
            ready = connected.len();
            result.revisions = vec![clients::REVISION.to_owned()];
            closing = Box::new(move || {
                Box::pin(async move {
                    futures::future::join_all(connected.into_iter().map(|(conn, server)| async {
                        conn.close().await;
                        let _ = server.await;
                    }))
                    .await;
                })
            });
        }
        Client::Host => return crate::host_in_process::run(servers).await,
        Client::Ts => anyhow::bail!("the TypeScript client has no in-process transport to Rust"),
        Client::HostOtel | Client::HostOtelDown => {
            anyhow::bail!("the OpenTelemetry comparison runs the sequential calls only")
        }
    }
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let cpu_us = stats::usage().cpu_us.saturating_sub(usage.cpu_us);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = stats::memory();
    record_memory(&mut result, ready_ms, ready, servers, before, after);
    result.set("cpu_ms", cpu_us as f64 / 1e3);
    record_settled(&mut result, servers, before).await;
    result.notes.push(
        "per-attachment memory includes the in-process fixture server's own share".to_owned(),
    );
    let close_started = Instant::now();
    closing().await;
    result.set("close_ms", close_started.elapsed().as_secs_f64() * 1e3);
    Ok(result)
}

/// The calls workload while a churner disables and re-enables server after server.
async fn churn(
    spec: &TrialSpec,
    client: &str,
    n: usize,
    c: usize,
    servers: usize,
) -> anyhow::Result<TrialResult> {
    let connected = Session::connect(client, &spec.fixture, servers).await?;
    let mut events = match &connected.session {
        Session::Host(session) => Some(session.host.events()),
        _ => None,
    };
    let session = Arc::new(connected.session);
    let commits = Arc::new(AtomicUsize::new(0));
    let counter = events.take().map(|mut events| {
        let commits = commits.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match events.recv().await {
                    Ok(plurnk_mcp::HostEvent::SnapshotCommitted { .. }) => {
                        commits.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                }
            }
        })
    });
    let done = Arc::new(AtomicBool::new(false));
    let churner = {
        let session = session.clone();
        let done = done.clone();
        let fixture = spec.fixture.clone();
        tokio::spawn(async move {
            let mut disables = Latencies::default();
            let mut enables = Latencies::default();
            let mut errors = Vec::new();
            let mut cycle = 0usize;
            while !done.load(Ordering::Relaxed) {
                let i = cycle % servers;
                cycle += 1;
                match session.disable(i).await {
                    Ok(elapsed) => disables.push(elapsed),
                    Err(error) => errors.push(format!("{error:#}")),
                }
                match session.enable(i, &fixture).await {
                    Ok(elapsed) => enables.push(elapsed),
                    Err(error) => errors.push(format!("{error:#}")),
                }
            }
            (disables, enables, errors, cycle)
        })
    };
    let mut outcome = run_calls(session.clone(), n, c, Some(LOST_AFTER)).await;
    done.store(true, Ordering::Relaxed);
    let (mut disables, mut enables, errors, cycles) = churner.await?;
    let mut result = TrialResult {
        revisions: connected.revisions,
        ..TrialResult::default()
    };
    record_calls(&mut result, &mut outcome, n);
    result.set("lost", outcome.lost as f64);
    result.set("cycles", cycles as f64);
    let mut all = Latencies::default();
    result.set("disable_p50_ms", disables.quantile(0.5) / 1e3);
    result.set("enable_p50_ms", enables.quantile(0.5) / 1e3);
    all.extend(disables);
    all.extend(enables);
    result.set("commit_p50_ms", all.quantile(0.5) / 1e3);
    result.set("commit_p99_ms", all.quantile(0.99) / 1e3);
    for error in errors.iter().take(3) {
        result.notes.push(format!("churn action failed: {error}"));
    }
    if errors.len() > 3 {
        result
            .notes
            .push(format!("… {} churn action failures in all", errors.len()));
    }
    if let Some(counter) = counter {
        result.set("commits", commits.load(Ordering::Relaxed) as f64);
        counter.abort();
    }
    close(session).await;
    Ok(result)
}

/// Raw rmcp's toggle of one server among `servers` in-process ones, done by hand: the
/// connection closed and its server ended, then a fresh one connected and listed.
async fn rmcp_toggle(servers: usize, toggles: usize) -> anyhow::Result<TrialResult> {
    let mut connected: Vec<Option<_>> = clients::connect_all(servers, |_| rmcp_in_process())
        .await?
        .into_iter()
        .map(Some)
        .collect();
    let slot = servers / 2;
    let mut disables = Latencies::with_capacity(toggles);
    let mut enables = Latencies::with_capacity(toggles);
    for _ in 0..toggles {
        let started = Instant::now();
        let (rmcp, server) = connected[slot]
            .take()
            .ok_or_else(|| anyhow::anyhow!("server {slot} is already disabled"))?;
        let _ = rmcp.service.cancel().await;
        let _ = server.await;
        disables.push(started.elapsed());
        let started = Instant::now();
        connected[slot] = Some(rmcp_in_process().await?);
        enables.push(started.elapsed());
    }
    let mut result = TrialResult::default();
    record_toggles(&mut result, disables, enables);
    futures::future::join_all(connected.into_iter().flatten().map(|(rmcp, server)| async {
        let _ = rmcp.service.cancel().await;
        let _ = server.await;
    }))
    .await;
    Ok(result)
}

/// Records the durations of a toggle's disables and enables.
pub(crate) fn record_toggles(
    result: &mut TrialResult,
    mut disables: Latencies,
    mut enables: Latencies,
) {
    result.set("disable_p50_ms", disables.quantile(0.5) / 1e3);
    result.set("enable_p50_ms", enables.quantile(0.5) / 1e3);
    let mut all = Latencies::default();
    all.extend(disables);
    all.extend(enables);
    result.set("commit_p50_ms", all.quantile(0.5) / 1e3);
    result.set("commit_p99_ms", all.quantile(0.99) / 1e3);
}
